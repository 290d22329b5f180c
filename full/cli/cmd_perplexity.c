//@file full
// cmd_perplexity.c - mg perplexity: how well a model predicts a text, and how
// far a quantized model's predictions are from its parent's.
//
//     $ mg perplexity -m fortune-toy-f16.gguf -f heldout.txt -c 256 --save-logits f16.kld
//     [1]41.2087,[2]45.9412,[3]47.5201,...
//     Final estimate: PPL = 48.7012 +/- 0.77013
//     $ mg perplexity -m fortune-toy-q4_k_m.gguf --kl-base f16.kld
//     ... Mean KLD: 0.004512 +- ..., Same top p: 96.1 %, ...
//
// It is llama-perplexity (llama.cpp tools/perplexity/perplexity.cpp, the
// functions perplexity() and kl_divergence()) redone, rule for rule, so that
// both print the same figures for the same file and text:
//   - the text is tokenized once, as common_tokenize(ctx, text, true) does:
//     BOS first if the vocabulary asks for it (add_bos), special tokens not
//     parsed;
//   - the tokens are cut into n_chunk = n_tokens / n_ctx chunks of n_ctx
//     tokens (the rest is dropped); each chunk is evaluated from an empty
//     cache, in batches of n_batch tokens, with its first token replaced by
//     BOS when add_bos is set;
//   - only the second half of each chunk is scored: the logits at positions
//     first = n_ctx/2 .. n_ctx-2 predict the tokens at first+1 .. n_ctx-1, so
//     every scored token has at least n_ctx/2 tokens of context;
//   - PPL = exp(mean NLL), and its error is PPL times the standard error of
//     the mean NLL: sqrt((mean(NLL^2) - mean(NLL)^2) / (count - 1)).
// The log-softmax sums are kept in double, the terms in float, as llama.cpp's
// log_softmax() does. Unlike llama.cpp, the positions are summed in order on
// one thread (llama.cpp's worker threads add their partial sums in whatever
// order they finish), so the figures do not depend on -t; and a -b larger than
// -c evaluates one chunk at a time where llama.cpp runs several sequences in
// one batch (the same numbers, not the same speed).
//
// This file parses and prints; the runs of the model and what they score are
// perplexity_eval.c's, the arithmetic and the logits file perplexity.c's.
#include "cli.h"
#include "outfile.h"
#include "perplexity_eval.h"
#include "vocab.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char * usage =
    "usage: mg perplexity -m MODEL.gguf -f TEXT [-c N] [-b N] [-t N] [--chunks N] [--save-logits FILE]\n"
    "       mg perplexity -m MODEL.gguf --kl-base FILE [-f TEXT] [-b N] [-t N]\n"
    "\n"
    "Perplexity as llama-perplexity computes it: the text tokenized once (BOS first if the vocabulary\n"
    "asks for it), cut into chunks of -c tokens (default: 512, or the model's training context if\n"
    "smaller), each chunk evaluated from an empty cache in batches of -b, the negative log-likelihood\n"
    "scored over the second half of each chunk. Prints the running estimate after every chunk,\n"
    "[1]x,[2]y,..., then 'Final estimate: PPL = x +/- err' and the speed (on stderr).\n"
    "\n"
    "--save-logits FILE also writes the scored positions' log-probabilities, to compare another model\n"
    "(a quantization of this one) with --kl-base FILE: it then reads the tokens from FILE (a -f TEXT\n"
    "must tokenize to the same tokens), evaluates them, and prints per chunk and at the end: PPL of\n"
    "this model and of the base, ln(PPL/PPL base), the KL divergence from the base's distribution\n"
    "(mean +- err, median, max, percentiles), delta-p of the right token (RMS, percentiles) and how\n"
    "often both models agree on the top token. FILE is llama-perplexity's --kl-divergence-base\n"
    "format, so either tool reads the other's. All little-endian:\n"
    "  char[8] \"_logits_\", int32 n_ctx, int32 n_vocab, int32 n_chunk, int32 tokens[n_chunk*n_ctx],\n"
    "  then per chunk, per scored position (n_ctx - 1 - n_ctx/2 of them), a row of nv = n_vocab +\n"
    "  (n_vocab odd) + 4 uint16: float32 scale, float32 min (4 slots), then q[i] for every token,\n"
    "  log p(i) = min + scale * q[i] (q = 0 for the tokens 16 or more below the top logit).";

// ---------------------------------------------------------------------------
// The tables of kl_divergence()
// ---------------------------------------------------------------------------

// The running figures after a chunk, one line.
static void print_kld_row(int chunk, const struct mg_kld_sums * k) {
    const struct mg_kld_figures f = mg_ppl_kld_figures(k);
    printf("%4d    %9.4f ± %9.4f    %10.5f ± %10.5f    %10.5f ± %10.5f    %6.3f ± %6.3f %%    %6.3f ± %6.3f %%\n", chunk,
           f.ppl.value, f.ppl.err, f.ln_ratio.value, f.ln_ratio.err, f.kld.value, f.kld.err, 100.0 * f.rms_p_diff.value,
           100.0 * f.rms_p_diff.err, 100.0 * f.same_top.value, 100.0 * f.same_top.err);
}

static void print_distribution(const char * name, float * v, size_t n, double unit, const char * fmt) {
    static const struct {
        const char * label;
        float        fraction;
    } rows[] = {{"Maximum", 1.0f}, {"99.9%  ", 0.999f}, {"99.0%  ", 0.99f}, {"95.0%  ", 0.95f}, {"90.0%  ", 0.9f},
                {"Median ", -1.0f}, {"10.0%  ", 0.1f}, {" 5.0%  ", 0.05f}, {" 1.0%  ", 0.01f}, {" 0.1%  ", 0.001f},
                {"Minimum", 0.0f}};
    qsort(v, n, sizeof(float), mg_ppl_cmp_float);
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        const float x = rows[i].fraction < 0 ? mg_ppl_median(v, n) : mg_ppl_percentile(v, n, rows[i].fraction);
        printf("%s %s: ", rows[i].label, name);
        printf(fmt, unit * x);
        printf("\n");
    }
}

// The closing statistics of kl_divergence().
static void print_kld_summary(const struct mg_kld_sums * k, float * kld_values, float * p_diff_values) {
    const struct mg_kld_figures f = mg_ppl_kld_figures(k);
    printf("\n====== Perplexity statistics ======\n");
    printf("Mean PPL(Q)                   : %10.6f ± %10.6f\n", f.ppl.value, f.ppl.err);
    printf("Mean PPL(base)                : %10.6f ± %10.6f\n", f.ppl_base.value, f.ppl_base.err);
    printf("Cor(ln(PPL(Q)), ln(PPL(base))): %6.2f%%\n", 100.0 * f.cor);
    printf("Mean ln(PPL(Q)/PPL(base))     : %10.6f ± %10.6f\n", f.ln_ratio.value, f.ln_ratio.err);
    printf("Mean PPL(Q)/PPL(base)         : %10.6f ± %10.6f\n", f.ppl_ratio.value, f.ppl_ratio.err);
    printf("Mean PPL(Q)-PPL(base)         : %10.6f ± %10.6f\n", f.ppl_diff.value, f.ppl_diff.err);

    printf("\n====== KL divergence statistics ======\n");
    printf("Mean    KLD: %10.6f ± %10.6f\n", f.kld.value, f.kld.err);
    print_distribution("KLD", kld_values, k->count, 1.0, "%10.6f");

    printf("\n====== Token probability statistics ======\n");
    printf("Mean    Δp: %6.3f ± %5.3f %%\n", 100.0 * f.p_diff.value, 100.0 * f.p_diff.err);
    print_distribution("Δp", p_diff_values, k->count, 100.0, "%6.3f%%");
    printf("RMS Δp    : %6.3f ± %5.3f %%\n", 100.0 * f.rms_p_diff.value, 100.0 * f.rms_p_diff.err);
    printf("Same top p: %6.3f ± %5.3f %%\n", 100.0 * f.same_top.value, 100.0 * f.same_top.err);
}

// ---------------------------------------------------------------------------
// The command
// ---------------------------------------------------------------------------

struct ppl_opts {
    const char * text_file;
    const char * save_logits;
    const char * kl_base;
    int          n_chunks;   // at most this many chunks (-1: all)
};

// The text's tokens, as common_tokenize(ctx, text, add_special = true) gives them.
static int32_t * tokenize_file(const char * cmd, const char * path, const struct mg_vocab * vocab, int * n_tokens) {
    size_t len;
    char * text = cli_read_file(cmd, path, &len);
    if (text == NULL) return NULL;
    // cli_tokenize sizes the buffer by the count mg_tokenize asks for: an
    // invalid byte is U+FFFD, three byte tokens, so len + 2 is not enough.
    int32_t   n      = 0;
    int32_t * tokens = cli_tokenize(cmd, vocab, text, len, true, false, &n);
    free(text);
    if (tokens == NULL) return NULL;
    *n_tokens = n;
    return tokens;
}

// perplexity(): the running estimate per chunk, then the final one.
static bool run_perplexity(const char * cmd, struct mg_ppl_eval * ev, const int32_t * tokens, int n_chunk, FILE * save) {
    struct mg_ppl_sums sums = {0};
    for (int c = 0; c < n_chunk; c++) {
        const int32_t * chunk = tokens + (size_t) c * (size_t) ev->n_ctx;
        const double    t0    = mg_time_ms();
        if (!mg_ppl_eval_chunk(ev, chunk)) {
            fprintf(stderr, "\nmg %s: chunk %d: %s\n", cmd, c + 1, cli_last_error());
            return false;
        }
        if (c == 0) fprintf(stderr, "mg %s: %.2f seconds per pass - ETA %.2f minutes\n", cmd,
                            (mg_time_ms() - t0) / 1e3, (mg_time_ms() - t0) * n_chunk / 6e4);
        mg_ppl_score_chunk(ev, chunk, save != NULL, &sums);
        if (save && !mg_ppl_write_rows(save, ev->rows, ev->n_scored, ev->n_vocab)) {
            fprintf(stderr, "\nmg %s: cannot write the logits file: %s\n", cmd, strerror(errno));
            return false;
        }
        printf("[%d]%.4f,", c + 1, mg_ppl_so_far(&sums));
        fflush(stdout);
    }
    printf("\n");
    struct mg_ppl_estimate ppl;
    if (!mg_ppl_final(&sums, &ppl)) {
        fprintf(stderr, "mg %s: %s\n", cmd, cli_last_error());
        return false;
    }
    printf("Final estimate: PPL = %.4f +/- %.5f\n", ppl.value, ppl.err);
    fflush(stdout);
    return true;
}

// kl_divergence(): this model against a saved base, chunk by chunk.
static bool run_kl_divergence(const char * cmd, struct mg_ppl_eval * ev, struct mg_logits_base * b, int n_chunk) {
    float *            klds    = malloc((size_t) n_chunk * (size_t) ev->n_scored * sizeof(float));
    float *            p_diffs = malloc((size_t) n_chunk * (size_t) ev->n_scored * sizeof(float));
    struct mg_kld_sums k       = {0};
    bool               ok      = klds != NULL && p_diffs != NULL;
    if (!ok) fprintf(stderr, "mg %s: out of memory for %d chunks' KL divergences\n", cmd, n_chunk);
    if (ok) printf("chunk             PPL               ln(PPL(Q)/PPL(base))          KL Divergence              Δp RMS"
                   "            Same top p\n");
    for (int c = 0; ok && c < n_chunk; c++) {
        const int32_t * chunk = b->tokens + (size_t) c * (size_t) ev->n_ctx;
        if (!mg_ppl_eval_chunk(ev, chunk)) {
            fprintf(stderr, "mg %s: chunk %d: %s\n", cmd, c + 1, cli_last_error());
            ok = false;
        } else if (!mg_ppl_kld_chunk(ev, b, chunk, c, &k, klds, p_diffs)) {
            fprintf(stderr, "mg %s: --kl-base: %s\n", cmd, cli_last_error());
            ok = false;
        } else {
            print_kld_row(c + 1, &k);
            fflush(stdout);
        }
    }
    if (ok) print_kld_summary(&k, klds, p_diffs);
    fflush(stdout);
    free(klds);
    free(p_diffs);
    return ok;
}

// With --kl-base and -f: the text must be the one the base was saved from.
static bool same_tokens(const char * cmd, const struct ppl_opts * o, const struct mg_vocab * vocab,
                        const struct mg_logits_base * b) {
    int       n;
    int32_t * t = tokenize_file(cmd, o->text_file, vocab, &n);
    if (t == NULL) return false;
    const bool same = mg_ppl_base_same_tokens(b, t, n, o->text_file, o->kl_base);
    if (!same) fprintf(stderr, "mg %s: %s\n", cmd, cli_last_error());
    free(t);
    return same;
}

// Everything one run holds, freed by ppl_run_free.
struct ppl_run {
    struct cli_engine_opts e;
    struct ppl_opts        o;
    struct mg_model *      m;
    double                 load_ms;
    struct mg_logits_base  base;       // with --kl-base
    int32_t *              tokens;     // of -f TEXT, without --kl-base
    int                    n_tokens;
    int                    n_chunk;    // chunks to score
    struct mg_ppl_eval     ev;
};

// The options and the checks that need no model. False after printing why.
static bool ppl_parse(const char * cmd, int argc, char ** argv, struct ppl_run * r) {
    struct ppl_opts * o = &r->o;
    struct cli_option opts[24];
    int               n_opts = 0;
    opts[n_opts++] = (struct cli_option) {"-f", "--file", CLI_IN_FILE, &o->text_file, "the text to score"};
    opts[n_opts++] = (struct cli_option) {NULL, "--chunks", CLI_INT, &o->n_chunks, "score at most N chunks (default all)"};
    opts[n_opts++] = (struct cli_option) {NULL, "--save-logits", CLI_OUT_FILE, &o->save_logits,
                                          "write the scored log-probabilities to FILE, for --kl-base"};
    opts[n_opts++] = (struct cli_option) {NULL, "--kl-base", CLI_IN_FILE, &o->kl_base,
                                          "KL divergence against FILE (from --save-logits)"};
    if (!cli_parse_engine_command(cmd, argc, argv, usage, opts, n_opts, &r->e, NULL)) return false;
    const char * wrong = o->text_file == NULL && o->kl_base == NULL ? "no text: give one with -f TEXT (or --kl-base FILE)"
                         : o->save_logits != NULL && o->kl_base != NULL
                             ? "--save-logits and --kl-base do not go together (save from the base model)"
                             : NULL;
    if (wrong != NULL) {
        fprintf(stderr, "mg %s: %s\n", cmd, wrong);
        return false;
    }
    if (o->n_chunks == 0 || o->n_chunks < -1) {
        fprintf(stderr, "mg %s: --chunks must be at least 1, got %d\n", cmd, o->n_chunks);
        return false;
    }
    if (r->e.n_ctx != 0 && r->e.n_ctx < 4) {
        fprintf(stderr, "mg %s: --ctx-size must be at least 4 (half of each chunk is context), got %d\n", cmd,
                r->e.n_ctx);
        return false;
    }
    return true;
}

// With --kl-base: the saved file, its tokens and its -c (a -f TEXT must be the same tokens).
static bool ppl_open_base(const char * cmd, struct ppl_run * r) {
    if (!mg_ppl_base_open(r->o.kl_base, r->m->hp.n_vocab, &r->base)) {
        fprintf(stderr, "mg %s: --kl-base: %s (make one with --save-logits)\n", cmd, cli_last_error());
        return false;
    }
    if (r->e.n_ctx != 0 && r->e.n_ctx != r->base.n_ctx) {
        fprintf(stderr, "mg %s: %s was saved with -c %d, not %d (leave -c out)\n", cmd, mg_quote(r->o.kl_base),
                r->base.n_ctx, r->e.n_ctx);
        return false;
    }
    if (r->o.text_file != NULL && !same_tokens(cmd, &r->o, r->m->vocab, &r->base)) return false;
    r->e.n_ctx = r->base.n_ctx;
    return true;
}

// Without it: -f TEXT's tokens, at least two chunks of -c (default 512, or the training context if smaller).
static bool ppl_read_text(const char * cmd, struct ppl_run * r) {
    const struct mg_model_hparams * hp = &r->m->hp;
    if (r->e.n_ctx == 0) r->e.n_ctx = hp->n_ctx_train > 0 && hp->n_ctx_train < 512 ? hp->n_ctx_train : 512;
    r->tokens = tokenize_file(cmd, r->o.text_file, r->m->vocab, &r->n_tokens);
    if (r->tokens == NULL) return false;
    if ((int64_t) r->n_tokens < 2 * (int64_t) r->e.n_ctx) {   // 64 bits: -c near INT_MAX must not wrap
        fprintf(stderr, "mg %s: %s tokenizes to only %d tokens: perplexity with -c %d needs at least %lld\n", cmd,
                mg_quote(r->o.text_file), r->n_tokens, r->e.n_ctx, (long long) 2 * r->e.n_ctx);
        return false;
    }
    return true;
}

// The model, the tokens to score, the chunk count, and the evaluator's session and buffers.
static bool ppl_set_up(const char * cmd, struct ppl_run * r) {
    r->m = cli_load_model(cmd, r->e.model, !r->e.no_repack, !r->e.no_huge_pages, &r->load_ms);
    if (r->m == NULL) return false;
    if (!(r->o.kl_base != NULL ? ppl_open_base(cmd, r) : ppl_read_text(cmd, r))) return false;
    if (mg_vocab_add_eos(r->m->vocab)) {   // llama.cpp asserts the same: EOS inside chunks would be scored
        fprintf(stderr, "mg %s: this vocabulary adds EOS to every text (add_eos): perplexity does not apply\n", cmd);
        return false;
    }
    struct cli_engine_opts * e = &r->e;
    if (e->n_ctx > r->m->hp.n_ctx_train) {
        fprintf(stderr, "mg %s: warning: the model was trained on only %d context tokens (-c %d)\n", cmd,
                r->m->hp.n_ctx_train, e->n_ctx);
    }
    if (e->n_batch > e->n_ctx) e->n_batch = e->n_ctx;   // the session's batch too, and the batch_size printed
    const int n_chunk_max = r->o.kl_base ? r->base.n_chunk : r->n_tokens / e->n_ctx;
    r->n_chunk            = r->o.n_chunks > 0 && r->o.n_chunks < n_chunk_max ? r->o.n_chunks : n_chunk_max;
    if (r->o.n_chunks > n_chunk_max) {   // llama-perplexity clamps in silence; a table of fewer chunks than asked is said
        fprintf(stderr, "mg %s: warning: --chunks %d, but %s holds only %d chunk%s of %d tokens: scoring %d\n", cmd,
                r->o.n_chunks, r->o.kl_base ? r->o.kl_base : "the text", n_chunk_max, n_chunk_max == 1 ? "" : "s",
                e->n_ctx, n_chunk_max);
    }
    const bool with_rows = r->o.save_logits != NULL || r->o.kl_base != NULL;
    if (!mg_ppl_eval_init(&r->ev, r->m, cli_session_params(e), e->n_batch, with_rows)) {
        fprintf(stderr, "mg %s: %s\n", cmd, cli_last_error());
        return false;
    }
    return true;
}

// Perplexity of the text, its log-probabilities saved with --save-logits
// (renamed over the old file only when the run is complete).
static bool ppl_score_text(const char * cmd, struct ppl_run * r) {
    struct mg_outfile save_out = {0};
    FILE *            save     = NULL;
    if (r->o.save_logits != NULL) {
        // Its size is known, so the disk's room is checked before the work.
        const uint64_t bytes = mg_ppl_logits_file_size(r->e.n_ctx, r->m->hp.n_vocab, r->n_chunk);
        if (!mg_outfile_room("--save-logits", r->o.save_logits, bytes)) {
            fprintf(stderr, "mg %s: %s\n", cmd, cli_last_error());
            return false;
        }
        save = mg_ppl_logits_file_create(&save_out, r->o.save_logits, r->e.n_ctx, r->m->hp.n_vocab, r->n_chunk,
                                         r->tokens);
        if (save == NULL) {
            fprintf(stderr, "mg %s: --save-logits %s\n", cmd, cli_last_error());
            return false;
        }
    }
    if (!run_perplexity(cmd, &r->ev, r->tokens, r->n_chunk, save)) {
        if (save != NULL) mg_outfile_abort(&save_out);   // a failed run leaves the old file as it was
        return false;
    }
    if (save != NULL && !mg_outfile_commit(&save_out)) {
        fprintf(stderr, "mg %s: --save-logits %s\n", cmd, cli_last_error());
        return false;
    }
    return true;
}

static void ppl_run_free(struct ppl_run * r) {
    mg_ppl_base_close(&r->base);
    mg_ppl_eval_free(&r->ev);
    free(r->tokens);
    mg_model_free(r->m);
}

int cmd_perplexity(int argc, char ** argv) {
    const char *   cmd = "perplexity";
    struct ppl_run r   = {.e = cli_engine_defaults(), .o = {.n_chunks = -1}};
    if (!ppl_parse(cmd, argc, argv, &r)) return 1;
    if (!ppl_set_up(cmd, &r)) {
        ppl_run_free(&r);
        return 1;
    }
    fprintf(stderr, "mg %s: %s over %d chunks, n_ctx=%d, batch_size=%d, %d threads%s\n", cmd,
            r.o.kl_base ? "KL divergence" : "perplexity", r.n_chunk, r.e.n_ctx, r.e.n_batch, r.e.n_threads,
            r.o.kl_base ? "" : " (scoring the second half of each chunk)");
    const double t0 = mg_time_ms();
    const bool   ok = r.o.kl_base != NULL ? run_kl_divergence(cmd, &r.ev, &r.base, r.n_chunk) : ppl_score_text(cmd, &r);
    if (ok) {
        const double ms     = mg_time_ms() - t0;
        const int    n_eval = r.n_chunk * r.e.n_ctx;
        fprintf(stderr, "mg %s: %d tokens in %.2f s: %.2f tokens per second\n", cmd, n_eval, ms / 1e3,
                ms > 0 ? 1e3 * n_eval / ms : 0.0);
        cli_print_timings(r.ev.s, r.load_ms, n_eval, ms, 0, 0.0);
    }
    ppl_run_free(&r);
    return ok ? 0 : 1;
}
