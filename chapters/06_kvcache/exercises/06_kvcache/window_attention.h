// window_attention.h - what the chapter 06 exercises compare with: attention
// in double over a window of positions, and helpers to feed the engine.
//
// Token p attends over positions max(0, p - W + 1) .. p (W <= 0: all of
// 0 .. p), softmax of q.k * scale, then the weighted sum of v; q head h
// reads kv head h / (H / Hkv). It knows nothing of the cache or its layout.
#pragma once

#include "mg.h"

#include <math.h>
#include <stdlib.h>

enum { WA_D = 8, WA_MAX_T = 40, WA_H = 4, WA_HKV = 2 };

struct wa_qkv {
    float q[WA_MAX_T][WA_H][WA_D];
    float k[WA_MAX_T][WA_HKV][WA_D];
    float v[WA_MAX_T][WA_HKV][WA_D];
};

static inline void wa_make(struct wa_qkv * d, uint64_t seed) {
    uint64_t rng = seed;
    for (int t = 0; t < WA_MAX_T; t++)
        for (int i = 0; i < WA_D; i++) {
            for (int h = 0; h < WA_H; h++) d->q[t][h][i] = mg_test_rand_normal(&rng);
            for (int h = 0; h < WA_HKV; h++) {
                d->k[t][h][i] = mg_test_rand_normal(&rng);
                d->v[t][h][i] = mg_test_rand_normal(&rng);
            }
        }
}

static inline float wa_scale(void) { return 1.0f / sqrtf((float) WA_D); }

// {WA_D, n_heads, T}: tokens t0 .. t0+T-1 of src (rows of n_heads x WA_D floats).
static inline struct mg_tensor * wa_tokens(struct mg_context * ctx, const float * src, int n_heads, int t0, int T) {
    struct mg_tensor * t = mg_new_tensor_3d(ctx, MG_TYPE_F32, WA_D, n_heads, T);
    for (int tok = 0; tok < T; tok++)
        for (int h = 0; h < n_heads; h++)
            for (int i = 0; i < WA_D; i++) mg_set_f32_nd(t, i, h, tok, 0, src[((t0 + tok) * n_heads + h) * WA_D + i]);
    return t;
}

static inline void wa_naive(const struct wa_qkv * d, int p, int window, double out[WA_H * WA_D]) {
    const int first = window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
    for (int h = 0; h < WA_H; h++) {
        const int hk = h / (WA_H / WA_HKV);
        double w[WA_MAX_T], max = -INFINITY, sum = 0.0;
        for (int j = first; j <= p; j++) {
            double s = 0.0;
            for (int i = 0; i < WA_D; i++) s += (double) d->q[p][h][i] * d->k[j][hk][i];
            w[j] = s * wa_scale();
            max  = fmax(max, w[j]);
        }
        for (int j = first; j <= p; j++) sum += w[j] = exp(w[j] - max);
        for (int i = 0; i < WA_D; i++) {
            double acc = 0.0;
            for (int j = first; j <= p; j++) acc += w[j] / sum * d->v[j][hk][i];
            out[h * WA_D + i] = acc;
        }
    }
}

// Slots never written hold large finite garbage: only the mask keeps it out.
static inline void wa_poison(struct mg_kv_cache * kv) {
    for (int64_t i = 0; i < mg_nelements(kv->k[0]); i++) ((float *) kv->k[0]->data)[i] = 100.0f;
    for (int64_t i = 0; i < mg_nelements(kv->v[0]); i++) ((float *) kv->v[0]->data)[i] = -100.0f;
}

// Row t of y ({WA_H * WA_D, T}) against the naive attention of token p.
static inline void wa_check_row(const struct mg_tensor * y, int t, const struct wa_qkv * d, int p, int window,
                                const char * what) {
    double want[WA_H * WA_D];
    wa_naive(d, p, window, want);
    for (int i = 0; i < WA_H * WA_D; i++) {
        const float got = mg_get_f32_nd(y, i, t, 0, 0);
        ck_assert_msg(fabs(got - want[i]) <= 2e-5 * (1.0 + fabs(want[i])), "%s: token at position %d, value %d: %.7g, expected %.7g",
                      what, p, i, (double) got, want[i]);
    }
}
