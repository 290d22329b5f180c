//@file 09
// sampling.c - penalties, filters, temperature and the draw, on a list of
// candidates (llama.cpp: llama_sampler_penalties_apply, _top_k, _top_p,
// _min_p, _temp, _dist).
#include "sampling.h"
#include "tensor.h"
#include "trace.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct candidate {
    int32_t id;
    float   logit;
};

struct mg_sampler {
    struct mg_sampler_params params;
    int32_t                  n_vocab;
    struct candidate *       cands;     // [n_vocab]
    int32_t *                recent;    // ring buffer of the last repeat_last_n accepted tokens
    int                      n_recent;
    int                      recent_head;
    uint64_t                 rng;       // xorshift64* state
};

struct mg_sampler_params mg_sampler_default_params(void) {
    return (struct mg_sampler_params) {
        .temp = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f,
        .repeat_penalty = 1.0f, .repeat_last_n = 64, .seed = 0,
    };
}

struct mg_sampler * mg_sampler_new(struct mg_sampler_params params, int32_t n_vocab) {
    struct mg_sampler * s = calloc(1, sizeof(*s));
    MG_ASSERT(s != NULL);
    s->params  = params;
    s->n_vocab = n_vocab;
    s->cands   = malloc((size_t) n_vocab * sizeof(struct candidate));
    s->recent  = calloc((size_t) (params.repeat_last_n > 0 ? params.repeat_last_n : 1), sizeof(int32_t));
    MG_ASSERT(s->cands != NULL && s->recent != NULL);
    s->rng = params.seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull;   // never 0
    return s;
}

void mg_sampler_free(struct mg_sampler * s) {
    if (s == NULL) return;
    free(s->cands);
    free(s->recent);
    free(s);
}

void mg_sampler_accept(struct mg_sampler * s, int32_t token) {
    const int cap = s->params.repeat_last_n;
    if (cap <= 0) return;
    s->recent[s->recent_head] = token;
    s->recent_head = (s->recent_head + 1) % cap;
    if (s->n_recent < cap) s->n_recent++;
}

int32_t mg_argmax(const float * x, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++) {
        if (x[i] > x[best]) best = i;   // strict: ties keep the lower id
    }
    return best;
}

// A uniform double in [0, 1) from xorshift64*.
static double next_uniform(struct mg_sampler * s) {
    s->rng ^= s->rng >> 12;
    s->rng ^= s->rng << 25;
    s->rng ^= s->rng >> 27;
    return (double) ((s->rng * 0x2545F4914F6CDD1Dull) >> 11) / 9007199254740992.0;
}

// A token seen c times recently: positive logits are divided by the
// penalty, negative ones multiplied, so both move towards "less likely".
static void apply_repeat_penalty(struct mg_sampler * s, struct candidate * c, int n) {
    const float penalty = s->params.repeat_penalty;
    if (penalty == 1.0f || s->n_recent == 0) return;
    for (int i = 0; i < n; i++) {
        bool seen = false;
        for (int j = 0; j < s->n_recent && !seen; j++) seen = s->recent[j] == c[i].id;
        if (seen) c[i].logit = c[i].logit <= 0.0f ? c[i].logit * penalty : c[i].logit / penalty;
    }
}

// A NaN logit (a broken model) sorts after every number: qsort needs a
// consistent order, which NaN's comparisons (all false) do not give.
static int by_logit_descending(const void * a, const void * b) {
    const struct candidate * x = a, * y = b;
    const bool x_nan = isnan(x->logit), y_nan = isnan(y->logit);
    if (x_nan != y_nan) return x_nan ? 1 : -1;
    if (!x_nan && x->logit != y->logit) return x->logit > y->logit ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;   // ties: lower id first, so runs repeat
}

// Softmax over the first n candidates (sorted), max subtracted, into p.
static void softmax(const struct candidate * c, int n, float * p) {
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        p[i] = expf(c[i].logit - c[0].logit);
        sum += p[i];
    }
    for (int i = 0; i < n; i++) p[i] = (float) (p[i] / sum);
}

// The smallest prefix whose probability reaches top_p (the crossing token included).
static int apply_top_p(const struct candidate * c, int n, float top_p, float * p) {
    if (top_p >= 1.0f) return n;
    softmax(c, n, p);
    double cum = 0.0;
    for (int i = 0; i < n; i++) {
        cum += p[i];
        if (cum >= top_p) return i + 1;
    }
    return n;
}

// Keep the tokens whose probability is at least min_p times the best one's.
static int apply_min_p(const struct candidate * c, int n, float min_p) {
    if (min_p <= 0.0f) return n;
    const float threshold = c[0].logit + logf(min_p);
    int keep = 1;
    while (keep < n && c[keep].logit >= threshold) keep++;
    return keep;
}

// MG_TRACE=sample: what a stage left, the best few candidates with their
// probability among those left (a softmax of what the next stage sees).
static void trace_stage(const struct candidate * c, int n, const char * fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void trace_stage(const struct candidate * c, int n, const char * fmt, ...) {
    char what[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += exp((double) c[i].logit - (double) c[0].logit);
    char line[512];
    size_t len = 0;
    for (int i = 0; i < n && i < 6; i++) {
        const double p = exp((double) c[i].logit - (double) c[0].logit) / sum;
        len += (size_t) snprintf(line + len, sizeof(line) - len, "  %d:%.3f(p %.3f)", c[i].id, (double) c[i].logit, p);
    }
    mg_trace(MG_TRACE_SAMPLE, "%-28s %4d left%s%s", what, n, line, n > 6 ? "  ..." : "");
}

int32_t mg_sampler_sample(struct mg_sampler * s, const float * logits) {
    const struct mg_sampler_params * p = &s->params;
    int32_t token;
    if (p->temp <= 0.0f && p->repeat_penalty == 1.0f) {
        token = mg_argmax(logits, s->n_vocab);
    } else {
        struct candidate * c = s->cands;
        int n = s->n_vocab;
        for (int i = 0; i < n; i++) c[i] = (struct candidate) {.id = i, .logit = logits[i]};
        apply_repeat_penalty(s, c, n);
        qsort(c, (size_t) n, sizeof(*c), by_logit_descending);
        const bool trace = mg_trace_on(MG_TRACE_SAMPLE);
        if (trace) trace_stage(c, n, "penalty %.2f (%d recent)", (double) p->repeat_penalty, s->n_recent);
        if (p->temp <= 0.0f) {
            token = c[0].id;
        } else {
            //@+ 09 sample-chain
            if (p->top_k > 0 && p->top_k < n) n = p->top_k;
            if (trace) trace_stage(c, n, "top-k %d", p->top_k);
            float * probs = malloc((size_t) n * sizeof(float));
            MG_ASSERT(probs != NULL);
            n = apply_top_p(c, n, p->top_p, probs);
            if (trace) trace_stage(c, n, "top-p %.2f", (double) p->top_p);
            n = apply_min_p(c, n, p->min_p);
            if (trace) trace_stage(c, n, "min-p %.2f", (double) p->min_p);
            // Temperature last: it reshapes what the filters kept.
            for (int i = 0; i < n; i++) c[i].logit /= p->temp;
            if (trace) trace_stage(c, n, "temperature %.2f", (double) p->temp);
            //@- 09 sample-chain
            softmax(c, n, probs);
            const double r = next_uniform(s);
            double cum = 0.0;
            token = c[n - 1].id;
            for (int i = 0; i < n; i++) {
                cum += probs[i];
                if (r < cum) {
                    token = c[i].id;
                    break;
                }
            }
            if (trace) mg_trace(MG_TRACE_SAMPLE, "draw: r = %.4f -> token %d", r, token);
            free(probs);
        }
    }
    mg_sampler_accept(s, token);
    return token;
}
