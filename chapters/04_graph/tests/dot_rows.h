// dot_rows.h - one weight row and one activation row for the dot-product
// tests of the quantized types (tests/09_inference/test_kquants.c,
// tests/full/test_quants_more.c).
//
// The weights are quantized to the type under test and the activations
// converted the way mul_mat converts them (the type's vec_dot_type), so a
// kernel sees what it sees in a real matmul; the decoded rows give the exact
// dot product in double to measure the kernel against.
#pragma once

#include "harness.h"
#include "vec.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#define DOT_N 4096

struct dot_rows {
    float   w[DOT_N], a[DOT_N];     // the rows as drawn
    float   wf[DOT_N], af[DOT_N];   // the rows as the kernel sees them, decoded
    uint8_t wq[DOT_N * 2], aq[DOT_N * 2];
};

// Fills d with n weights of type `type` and their activations, returns
// scalar_dot's result on them, and sets *exact to the dot of the decoded rows
// (*mag = the sum of |terms|, the scale of the rounding error).
//
// With aligned, the two rows share a random sign per element and have
// magnitudes near their maximum, so the integer block sums grow to 13 and more
// significant bits, where the order of the float multiplies starts to matter.
static inline float dot_rows_prepare(struct dot_rows * d, enum mg_type type, int64_t n, uint64_t seed, bool aligned,
                                     mg_vec_dot_fn scalar_dot, double * exact, double * mag) {
    uint64_t rng = seed;
    for (int64_t i = 0; i < n; i++) {
        if (aligned) {
            const float sign = (mg_test_rand_u64(&rng) & 1) ? 1.0f : -1.0f;
            d->w[i]          = sign * mg_test_rand_uniform(&rng, 0.85f, 1.0f);
            d->a[i]          = sign * mg_test_rand_uniform(&rng, 0.85f, 1.0f) * 2.0f;
        } else {
            d->w[i] = mg_test_rand_normal(&rng);
            d->a[i] = mg_test_rand_normal(&rng) * 2.0f;
        }
    }
    const struct mg_type_traits *     tw = mg_get_type_traits(type);
    const struct mg_type_traits_cpu * tc = mg_get_type_traits_cpu(type);
    ck_assert_ptr_nonnull(tc);
    tw->from_float(d->w, d->wq, n);
    tw->to_float(d->wq, d->wf, n);
    tc->from_float(d->a, d->aq, n);
    mg_get_type_traits(tc->vec_dot_type)->to_float(d->aq, d->af, n);
    *exact = 0, *mag = 0;
    for (int64_t i = 0; i < n; i++) {
        *exact += (double) d->wf[i] * d->af[i];
        *mag += fabs((double) d->wf[i] * d->af[i]);
    }
    float s = NAN;
    scalar_dot(n, &s, d->wq, d->aq);
    return s;
}

// The same with weights that are already blocks of `type` (chapter 09 has no
// Q4_K/Q6_K quantizer: it reads those from model files). The activations are
// drawn as above; aligned gives each the sign of its decoded weight.
static inline float dot_rows_prepare_blocks(struct dot_rows * d, enum mg_type type, const void * blocks, int64_t n,
                                            uint64_t seed, bool aligned, mg_vec_dot_fn scalar_dot, double * exact,
                                            double * mag) {
    const struct mg_type_traits_cpu * tc = mg_get_type_traits_cpu(type);
    ck_assert_ptr_nonnull(tc);
    memcpy(d->wq, blocks, mg_row_size(type, n));
    mg_get_type_traits(type)->to_float(d->wq, d->wf, n);
    uint64_t rng = seed;
    for (int64_t i = 0; i < n; i++) {
        const float sign = d->wf[i] < 0 ? -1.0f : 1.0f;
        d->a[i] = aligned ? sign * mg_test_rand_uniform(&rng, 0.85f, 1.0f) * 2.0f : mg_test_rand_normal(&rng) * 2.0f;
    }
    tc->from_float(d->a, d->aq, n);
    mg_get_type_traits(tc->vec_dot_type)->to_float(d->aq, d->af, n);
    *exact = 0, *mag = 0;
    for (int64_t i = 0; i < n; i++) {
        *exact += (double) d->wf[i] * d->af[i];
        *mag += fabs((double) d->wf[i] * d->af[i]);
    }
    float s = NAN;
    scalar_dot(n, &s, d->wq, d->aq);
    return s;
}
