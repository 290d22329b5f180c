//@file full
// perplexity.c - the arithmetic of mg perplexity (perplexity.h): scoring a
// position in llama.cpp's precision, the saved-logits file, and the KL
// divergence against it (llama.cpp tools/perplexity/perplexity.cpp:
// log_softmax() and kl_divergence()).
#define _POSIX_C_SOURCE 200809L   // fileno
#include "perplexity.h"
#include "mg.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

// ---------------------------------------------------------------------------
// Scoring one position: log-softmax, in llama.cpp's precision
// ---------------------------------------------------------------------------

float mg_ppl_max_of(const float * x, int n, int * argmax) {
    float m = x[0];
    int   im = 0;
    for (int i = 1; i < n; i++) {
        if (x[i] > m) {
            m  = x[i];
            im = i;
        }
    }
    if (argmax) *argmax = im;
    return m;
}

// sum_i exp(x_i - max), the terms in float (expf) and their sum in double.
double mg_ppl_sum_exp(const float * x, int n, float max) {
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += expf(x[i] - max);
    return sum;
}

// -log p(tok): llama.cpp's log_softmax(n_vocab, logits, tok).
double mg_ppl_nll(const float * logits, int n_vocab, int32_t tok) {
    const float max = mg_ppl_max_of(logits, n_vocab, NULL);
    return -(logits[tok] - max - log(mg_ppl_sum_exp(logits, n_vocab, max)));
}

// -log p(tok) as the --save-logits path computes it (log_sum_exp rounded to
// float), and row = the position's log-probabilities in 16 bits: everything
// within 16 of the top logit on a uniform grid of 65536 steps, the rest 0.
// llama.cpp's log_softmax(n_vocab, logits, log_prob, tok).
double mg_ppl_nll_and_row(const float * logits, int n_vocab, int32_t tok, uint16_t * row) {
    const float max = mg_ppl_max_of(logits, n_vocab, NULL);
    float       min = logits[0];
    for (int i = 1; i < n_vocab; i++) min = logits[i] < min ? logits[i] : min;
    min = min > max - 16 ? min : max - 16;
    const float log_sum_exp  = (float) log(mg_ppl_sum_exp(logits, n_vocab, max));
    const float min_log_prob = min - max - log_sum_exp;
    const float scale        = (max - min) / 65535.f;
    memcpy(row, &scale, sizeof(float));
    memcpy(row + 2, &min_log_prob, sizeof(float));
    uint16_t * q = row + 4;
    if (scale != 0.0f) {
        const float inv_scale = 1 / scale;
        // lrintf rounds half to even, as ggml's nearest_int trick does
        for (int i = 0; i < n_vocab; i++) q[i] = logits[i] > min ? (uint16_t) lrintf(inv_scale * (logits[i] - min)) : 0;
    } else {
        memset(q, 0, (size_t) n_vocab * sizeof(uint16_t));
    }
    return max + log_sum_exp - logits[tok];
}

// ---------------------------------------------------------------------------
// KL divergence against a saved row (llama.cpp's kl_divergence_result and
// the log_softmax(..., base_log_prob, tok, kld) beside it)
// ---------------------------------------------------------------------------


// Adds one position; *kld and *p_diff get its KL divergence and p - p_base
// of the right token.
void mg_ppl_kld_add(struct mg_kld_sums * k, const float * logits, int n_vocab, const uint16_t * base_row, int32_t tok,
                    float * kld, float * p_diff) {
    int         imax;
    float       max         = mg_ppl_max_of(logits, n_vocab, &imax);
    const float log_sum_exp = (float) log(mg_ppl_sum_exp(logits, n_vocab, max));
    float       scale, min_log_prob;
    memcpy(&scale, base_row, sizeof(float));
    memcpy(&min_log_prob, base_row + 2, sizeof(float));
    const uint16_t * q = base_row + 4;

    const float nll      = max + log_sum_exp - logits[tok];
    const float nll_base = -(scale * q[tok] + min_log_prob);
    k->sum_nll += nll;
    k->sum_nll2 += nll * nll;
    k->sum_nll_base += nll_base;
    k->sum_nll_base2 += nll_base * nll_base;
    k->sum_nll_nll_base += nll * nll_base;

    // KL(base || this) = sum_i p_base(i) (log p_base(i) - log p(i)), over the
    // tokens the base file resolves (log p_base > -16).
    max += log_sum_exp;   // log p(i) = logits[i] - max
    double sum = 0.0;
    int    imax_base = 0;
    float  lp_base_max = 0.0f;
    for (int i = 0; i < n_vocab; i++) {
        const float lp_base = scale * q[i] + min_log_prob;
        if (i == 0 || lp_base > lp_base_max) {
            lp_base_max = lp_base;
            imax_base   = i;
        }
        if (lp_base > -16.f) sum += expf(lp_base) * (lp_base - logits[i] + max);
    }
    k->sum_kld += sum;
    k->sum_kld2 += sum * sum;
    k->count++;
    k->n_same_top += imax == imax_base;

    const float  dp  = expf(-nll) - expf(-nll_base);
    const double dp2 = dp * dp;
    k->sum_p_diff += dp;
    k->sum_p_diff2 += dp2;
    k->sum_p_diff4 += dp2 * dp2;
    *kld    = (float) sum;
    *p_diff = dp;
}

// A saved row is usable when its scale and offset are finite and within what
// --save-logits writes (at most 16 nats over 65535 steps, log p <= 0), and its
// probabilities add up to at most 1, rounding aside: a damaged or foreign
// file would otherwise print nan, inf, or a KL divergence of 0.
bool mg_ppl_row_ok(const uint16_t * row, int n_vocab) {
    float scale, min_log_prob;
    memcpy(&scale, row, sizeof(float));
    memcpy(&min_log_prob, row + 2, sizeof(float));
    if (!isfinite(scale) || !isfinite(min_log_prob) || scale < 0.0f || scale * 65535.0f > 16.01f || min_log_prob > 0.0f) {
        return false;
    }
    double sum = 0.0;
    for (int i = 0; i < n_vocab; i++) {
        const float lp = scale * row[4 + i] + min_log_prob;
        if (lp > 0.01f) return false;
        if (lp > -16.f) sum += exp(lp);
    }
    return sum > 0.0 && sum <= 1.01;
}

// ---------------------------------------------------------------------------
// The logits file (see the usage text for its layout)
// ---------------------------------------------------------------------------

static const char logits_magic[8] = {'_', 'l', 'o', 'g', 'i', 't', 's', '_'};

int mg_ppl_row_slots(int n_vocab) {   // uint16 per saved row: 2 floats, then n_vocab rounded up to even
    return 2 * ((n_vocab + 1) / 2) + 4;
}

uint64_t mg_ppl_logits_file_size(int n_ctx, int n_vocab, int n_chunk) {
    const uint64_t n_scored = (uint64_t) (n_ctx - 1 - n_ctx / 2);
    return 20 + (uint64_t) n_chunk * ((uint64_t) n_ctx * 4 + n_scored * (uint64_t) mg_ppl_row_slots(n_vocab) * 2);
}

static bool write_all(FILE * f, const void * p, size_t bytes) {
    return fwrite(p, 1, bytes, f) == bytes;
}

// The file's header, into a temporary file beside path (outfile.h: the old
// file stays whole until the run is complete and mg_outfile_commit renames).
FILE * mg_ppl_logits_file_create(struct mg_outfile * out, const char * path, int32_t n_ctx, int32_t n_vocab,
                                 int32_t n_chunk, const int32_t * tokens) {
    FILE * f = mg_outfile_open(out, path);
    if (f == NULL) return NULL;   // mg_outfile_open said why
    if (!write_all(f, logits_magic, 8) || !write_all(f, &n_ctx, 4) || !write_all(f, &n_vocab, 4) ||
        !write_all(f, &n_chunk, 4) || !write_all(f, tokens, (size_t) n_chunk * (size_t) n_ctx * sizeof(int32_t))) {
        mg_set_error("cannot write %s: %s", path, strerror(errno));
        mg_outfile_abort(out);
        return NULL;
    }
    return f;
}

// The checks of mg_ppl_base_open (perplexity.h); false after mg_set_error.
static bool base_read_checked(const char * path, int n_vocab_model, struct mg_logits_base * b) {
    memset(b, 0, sizeof(*b));
    uint64_t size;   // checked below, against what the header says
    b->f = mg_open_regular(path, UINT64_MAX, &size);   // a FIFO blocked the open forever
    if (b->f == NULL) return false;
    char        magic[8];
    if (fread(magic, 1, 8, b->f) != 8 || memcmp(magic, logits_magic, 8) != 0 || fread(&b->n_ctx, 4, 1, b->f) != 1 ||
        fread(&b->n_vocab, 4, 1, b->f) != 1 || fread(&b->n_chunk, 4, 1, b->f) != 1) {
        mg_set_error("%s is not a logits file (no \"_logits_\" header)", path);
        return false;
    }
    // n_vocab at most 2^26 (the largest vocabularies have 2^18 tokens) keeps
    // mg_ppl_row_slots and the sizes below inside an int.
    if (b->n_ctx < 4 || b->n_vocab < 1 || b->n_vocab > (1 << 26) || b->n_chunk < 1 || b->n_chunk > (1 << 30) / b->n_ctx) {
        mg_set_error("%s: a header of n_ctx %d, n_vocab %d, n_chunk %d makes no sense", path, b->n_ctx, b->n_vocab,
                     b->n_chunk);
        return false;
    }
    if (b->n_vocab != n_vocab_model) {
        mg_set_error("%s was saved with a vocabulary of %d tokens, this model has %d", path, b->n_vocab,
                     n_vocab_model);
        return false;
    }
    // The header's figures are bounded above, so the size fits in 64 bits (below 2^58).
    const uint64_t expected = mg_ppl_logits_file_size(b->n_ctx, b->n_vocab, b->n_chunk);
    if (size != expected) {
        mg_set_error("%s has %llu bytes, but its header (%d chunks of %d tokens, %d-token vocabulary) needs %llu: %s",
                     path, (unsigned long long) size, b->n_chunk, b->n_ctx, b->n_vocab, (unsigned long long) expected,
                     size < expected ? "truncated" : "extra bytes at the end");
        return false;
    }
    const size_t n_tokens = (size_t) b->n_chunk * (size_t) b->n_ctx;
    b->tokens             = malloc(n_tokens * sizeof(int32_t));
    if (b->tokens == NULL || fread(b->tokens, sizeof(int32_t), n_tokens, b->f) != n_tokens) {
        mg_set_error("cannot read the tokens of %s", path);
        return false;
    }
    for (size_t i = 0; i < n_tokens; i++) {
        if (b->tokens[i] < 0 || b->tokens[i] >= b->n_vocab) {
            mg_set_error("%s: token %zu is %d, not in the vocabulary (0..%d)", path, i, b->tokens[i], b->n_vocab - 1);
            return false;
        }
    }
    return true;
}

bool mg_ppl_base_open(const char * path, int n_vocab_model, struct mg_logits_base * b) {
    if (base_read_checked(path, n_vocab_model, b)) return true;
    mg_ppl_base_close(b);
    return false;
}

void mg_ppl_base_close(struct mg_logits_base * b) {
    if (b->f) fclose(b->f);
    free(b->tokens);
    b->f      = NULL;
    b->tokens = NULL;
}

bool mg_ppl_write_rows(FILE * f, const uint16_t * rows, int n_rows, int n_vocab) {
    return write_all(f, rows, (size_t) n_rows * (size_t) mg_ppl_row_slots(n_vocab) * sizeof(uint16_t));
}

bool mg_ppl_base_read_rows(struct mg_logits_base * b, uint16_t * rows, int n_rows) {
    const size_t n = (size_t) n_rows * (size_t) mg_ppl_row_slots(b->n_vocab);
    return fread(rows, sizeof(uint16_t), n, b->f) == n;
}

// ---------------------------------------------------------------------------
// The statistics of the closing table
// ---------------------------------------------------------------------------

struct mg_ppl_estimate mg_ppl_mean_err(double sum, double sum2, size_t count) {
    if (count < 1) return (struct mg_ppl_estimate) {0, 0};
    const double f  = sum / (double) count;
    const double df = sum2 / (double) count - f * f;
    return (struct mg_ppl_estimate) {f, df > 0 && count > 10 ? sqrt(df / (double) (count - 1)) : 0.0};
}

double mg_ppl_covariance(double suma, double sumb, double sumab, size_t count) {
    if (count < 10) return 0.0;
    const double n = (double) count;
    return (sumab / n - (suma / n) * (sumb / n)) / (n - 1);
}

// The error of a difference of two almost equal figures (a model against
// itself) can round below 0: 0 then, where llama.cpp prints -nan.
double mg_ppl_sqrt_pos(double x) {
    return x > 0 ? sqrt(x) : 0.0;
}

int mg_ppl_cmp_float(const void * a, const void * b) {
    const float x = *(const float *) a, y = *(const float *) b;
    return (x > y) - (x < y);
}

// Of sorted values: linear interpolation between neighbours (llama.cpp's percentile lambda in kl_divergence()).
float mg_ppl_percentile(const float * v, size_t n, float fraction) {
    if (fraction <= 0) return v[0];
    if (fraction >= 1) return v[n - 1];
    float        p  = fraction * (float) (n - 1);
    const size_t ip = (size_t) p;
    p -= (float) ip;
    return (1 - p) * v[ip] + p * v[ip + 1 < n ? ip + 1 : n - 1];
}

float mg_ppl_median(const float * v, size_t n) {
    return n % 2 == 0 ? 0.5f * (v[n / 2] + v[n / 2 - 1]) : v[n / 2];
}
