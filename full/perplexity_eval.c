//@file full
// perplexity_eval.c - the model's side of mg perplexity (perplexity_eval.h):
// llama-perplexity's perplexity() and kl_divergence() loops (llama.cpp
// tools/perplexity/perplexity.cpp) without their printing. The positions are
// summed in order on one thread (llama.cpp's worker threads add their partial
// sums in whatever order they finish), so the figures do not depend on the
// thread count.
#include "perplexity_eval.h"
#include "mg.h"
#include "vocab.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------
// One chunk through the model
// ---------------------------------------------------------------------------

bool mg_ppl_eval_init(struct mg_ppl_eval * ev, struct mg_model * m, struct mg_session_params p, int n_batch,
                      bool with_rows) {
    memset(ev, 0, sizeof(*ev));
    if (p.n_ctx < 4 || n_batch < 1) {   // n_ctx/2 .. n_ctx-2 must score a position; a batch of 0 never ends
        mg_set_error("a chunk needs n_ctx >= 4 and n_batch >= 1, got n_ctx %d and n_batch %d", p.n_ctx, n_batch);
        return false;
    }
    const int n_ctx = p.n_ctx, n_vocab = m->hp.n_vocab, first = n_ctx / 2;
    if (n_batch > n_ctx) n_batch = n_ctx;
    const size_t row_bytes = (size_t) mg_ppl_row_slots(n_vocab) * sizeof(uint16_t);
    *ev = (struct mg_ppl_eval) {
        .s = mg_session_new(m, p), .n_ctx = n_ctx, .n_batch = n_batch, .first = first,
        .n_scored = n_ctx - 1 - first, .n_vocab = n_vocab,
        .bos = mg_vocab_add_bos(m->vocab) ? mg_vocab_bos(m->vocab) : -1,
        .batch = malloc((size_t) n_batch * sizeof(int32_t)),
        .logits = malloc((size_t) (n_ctx - first) * (size_t) n_vocab * sizeof(float)),
        // Only --save-logits and --kl-base need a chunk's rows (77 MB for a 152k vocabulary at n_ctx 512).
        .rows = with_rows ? malloc((size_t) (n_ctx - 1 - first) * row_bytes) : NULL,
    };
    if (ev->s != NULL && ev->batch != NULL && ev->logits != NULL && (ev->rows != NULL || !with_rows)) return true;
    if (ev->s != NULL) mg_set_error("out of memory for the logits of a chunk of %d tokens", n_ctx);
    mg_ppl_eval_free(ev);   // mg_session_new said why it failed
    return false;
}

void mg_ppl_eval_free(struct mg_ppl_eval * ev) {
    mg_session_free(ev->s);
    free(ev->batch);
    free(ev->logits);
    free(ev->rows);
    memset(ev, 0, sizeof(*ev));
}

// perplexity(): the llama_decode loop over one chunk's batches.
bool mg_ppl_eval_chunk(struct mg_ppl_eval * ev, const int32_t * tokens) {
    const size_t nv = (size_t) ev->n_vocab;
    mg_session_rewind(ev->s, 0);
    for (int start = 0; start < ev->n_ctx; start += ev->n_batch) {
        const int n = ev->n_ctx - start < ev->n_batch ? ev->n_ctx - start : ev->n_batch;
        memcpy(ev->batch, tokens + start, (size_t) n * sizeof(int32_t));
        if (start == 0 && ev->bos >= 0) ev->batch[0] = ev->bos;
        const bool keep = start + n > ev->first;   // any position of this batch scored?
        if (!mg_decode(ev->s, ev->batch, n, keep)) return false;
        if (!keep) continue;
        const float * out = mg_get_logits(ev->s);
        const int     k0  = start >= ev->first ? 0 : ev->first - start;   // first kept row of the batch
        memcpy(ev->logits + (size_t) (start + k0 - ev->first) * nv, out + (size_t) k0 * nv,
               (size_t) (n - k0) * nv * sizeof(float));
        // A NaN would make the chunk's figures nan, and a row of them a KL divergence of nan or 0.
        if (!mg_logits_finite(out + (size_t) k0 * nv, n - k0, ev->n_vocab, start + k0)) return false;
    }
    return true;
}

// ---------------------------------------------------------------------------
// perplexity(): the negative log-likelihood of the second half of each chunk
// ---------------------------------------------------------------------------

void mg_ppl_score_chunk(struct mg_ppl_eval * ev, const int32_t * tokens, bool save, struct mg_ppl_sums * sums) {
    const size_t nv = (size_t) mg_ppl_row_slots(ev->n_vocab);
    MG_ASSERT(!save || ev->rows != NULL);   // the rows come with mg_ppl_eval_init's with_rows
    for (int i = 0; i < ev->n_scored; i++) {
        const float * logits = ev->logits + (size_t) i * (size_t) ev->n_vocab;
        const int32_t target = tokens[ev->first + i + 1];
        const double  v      = save ? mg_ppl_nll_and_row(logits, ev->n_vocab, target, ev->rows + (size_t) i * nv)
                                    : mg_ppl_nll(logits, ev->n_vocab, target);
        sums->nll += v;
        sums->nll2 += v * v;
    }
    sums->count += (size_t) ev->n_scored;
}

double mg_ppl_so_far(const struct mg_ppl_sums * sums) {
    return exp(sums->nll / (double) sums->count);
}

bool mg_ppl_final(const struct mg_ppl_sums * sums, struct mg_ppl_estimate * ppl) {
    const double nll = sums->nll / (double) sums->count;
    const double var = sums->nll2 / (double) sums->count - nll * nll;
    if (!(var > 0)) {
        mg_set_error("unexpected negative variance of the log-probabilities");
        return false;
    }
    ppl->value = exp(nll);
    ppl->err   = sqrt(var / (double) (sums->count - 1)) * ppl->value;
    return true;
}

// ---------------------------------------------------------------------------
// kl_divergence(): each scored position against the base's saved row
// ---------------------------------------------------------------------------

bool mg_ppl_kld_chunk(struct mg_ppl_eval * ev, struct mg_logits_base * b, const int32_t * tokens, int c,
                      struct mg_kld_sums * k, float * klds, float * p_diffs) {
    const size_t nv = (size_t) mg_ppl_row_slots(ev->n_vocab);
    MG_ASSERT(ev->rows != NULL);   // the rows come with mg_ppl_eval_init's with_rows
    if (!mg_ppl_base_read_rows(b, ev->rows, ev->n_scored)) {
        mg_set_error("cannot read the log-probabilities of chunk %d", c + 1);
        return false;
    }
    for (int i = 0; i < ev->n_scored; i++) {
        if (!mg_ppl_row_ok(ev->rows + (size_t) i * nv, ev->n_vocab)) {
            mg_set_error("chunk %d, position %d: the saved log-probabilities are not valid (not finite, out of range, "
                         "or more than 1 in all); is the file damaged?", c + 1, ev->first + i + 1);
            return false;
        }
    }
    for (int i = 0; i < ev->n_scored; i++) {
        const size_t at = (size_t) c * (size_t) ev->n_scored + (size_t) i;
        mg_ppl_kld_add(k, ev->logits + (size_t) i * (size_t) ev->n_vocab, ev->n_vocab, ev->rows + (size_t) i * nv,
                       tokens[ev->first + i + 1], &klds[at], &p_diffs[at]);
    }
    return true;
}

struct mg_kld_figures mg_ppl_kld_figures(const struct mg_kld_sums * k) {
    const struct mg_ppl_estimate lp  = mg_ppl_mean_err(k->sum_nll, k->sum_nll2, k->count);
    const struct mg_ppl_estimate lpb = mg_ppl_mean_err(k->sum_nll_base, k->sum_nll_base2, k->count);
    const struct mg_ppl_estimate mse = mg_ppl_mean_err(k->sum_p_diff2, k->sum_p_diff4, k->count);
    const double cov = mg_ppl_covariance(k->sum_nll, k->sum_nll_base, k->sum_nll_nll_base, k->count);
    const double ppl = exp(lp.value), ppl_err = ppl * lp.err;
    const double ppl_base = exp(lpb.value), ppl_base_err = ppl_base * lpb.err;
    const double ln_ratio = lp.value - lpb.value;
    const double ln_ratio_err = mg_ppl_sqrt_pos(lp.err * lp.err + lpb.err * lpb.err - 2.0 * cov);
    const double rms = sqrt(mse.value), top = (double) k->n_same_top / (double) k->count;
    return (struct mg_kld_figures) {
        .ppl        = {ppl, ppl_err},
        .ppl_base   = {ppl_base, ppl_base_err},
        .cor        = lp.err * lpb.err > 0 ? cov / (lp.err * lpb.err) : 0.0,
        .ln_ratio   = {ln_ratio, ln_ratio_err},
        .ppl_ratio  = {exp(ln_ratio), exp(ln_ratio) * ln_ratio_err},
        .ppl_diff   = {ppl - ppl_base,
                       mg_ppl_sqrt_pos(ppl_err * ppl_err + ppl_base_err * ppl_base_err - 2.0 * ppl * ppl_base * cov)},
        .kld        = mg_ppl_mean_err(k->sum_kld, k->sum_kld2, k->count),
        .p_diff     = mg_ppl_mean_err(k->sum_p_diff, k->sum_p_diff2, k->count),
        .rms_p_diff = {rms, rms > 0 ? 0.5 / rms * mse.err : 0.0},
        .same_top   = {top, k->count > 1 ? sqrt(top * (1.0 - top) / (double) (k->count - 1)) : 0.0},
    };
}

bool mg_ppl_base_same_tokens(const struct mg_logits_base * b, const int32_t * tokens, int n, const char * text_path,
                             const char * base_path) {
    const int n_base = b->n_chunk * b->n_ctx;
    int       i      = 0;
    while (i < n && i < n_base && tokens[i] == b->tokens[i]) i++;
    if (n / b->n_ctx < b->n_chunk || i < n_base) {
        mg_set_error("%s does not match %s: %s %d (%d tokens, %d chunks of %d; the base has %d chunks)", text_path,
                     base_path, i < n && i < n_base ? "the tokens differ at" : "it ends at token", i, n, n / b->n_ctx,
                     b->n_ctx, b->n_chunk);
        return false;
    }
    return true;
}
