// test_quant_matmul.c - a matmul with F16, Q8_0 or Q4_0 weights against the
// F32 matmul of the decoded weights, computed here in double.
//
// The weights are the same numbers in both (the reference decodes them with
// the type's to_float), so the only differences are the activations'
// conversion and float rounding. Each output gets its own bound:
//   - F16 activations: x rounds to 11 significant bits, |x - x~| <= |x| 2^-11
//     (plus 2^-25 for the subnormal range), and the error of the dot is at
//     most sum_k |w_k| |x_k - x~_k|;
//   - Q8_0 activations (for Q8_0 and Q4_0 weights): a block of 32 gets the
//     scale d = amax/127, stored as F16; x~ = q d16 with |x/d - q| <= 1/2, so
//     |x - x~| <= d/2 + 127 |d - d16| <= d (1/2 + 127 * 2^-11) < 0.57 d;
//   - float accumulation on top: at most (K + 4) 2^-24 sum_k |w_k| |x~_k|.
// A wrong scale, a wrong block, a wrong row or a wrong broadcast is off by
// the size of the values themselves, orders of magnitude above the bound.
#include "harness.h"
#include "mg.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct mm_case {
    enum mg_type type;
    int64_t      k, m, n;   // W {k, m, w2}, x {k, n, x2}: out {m, n, x2}
    int64_t      w2, x2;    // x2 a multiple of w2 (broadcast, as in GQA)
};

// Bound on |x - x~| for element i of the row x of length k.
static double activation_error(enum mg_type type, const float * x, int64_t k, int64_t i) {
    if (type == MG_TYPE_F16) return fabs(x[i]) * ldexp(1.0, -11) + ldexp(1.0, -25);
    if (type == MG_TYPE_F32) return 0.0;
    (void) k;
    const int64_t b0   = i / 32 * 32;
    double        amax = 0.0;
    for (int64_t j = b0; j < b0 + 32; j++) amax = fmax(amax, fabs(x[j]));
    return 0.57 * amax / 127.0;
}

static void check_case(const struct mm_case * c, uint64_t seed) {
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 32 * 1024 * 1024});
    uint64_t rng = seed;
    // Weights: random floats encoded in the type, then decoded for the reference.
    struct mg_tensor * w = mg_new_tensor_3d(ctx, c->type, c->k, c->m, c->w2);
    float *            wf = malloc(sizeof(float) * (size_t) (c->k * c->m * c->w2));
    mg_test_fill_uniform(wf, (size_t) (c->k * c->m * c->w2), &rng, -1.0f, 1.0f);
    const struct mg_type_traits * tt = mg_get_type_traits(c->type);
    if (c->type == MG_TYPE_F32) memcpy(w->data, wf, mg_nbytes(w));
    else tt->from_float(wf, w->data, c->k * c->m * c->w2);
    if (c->type != MG_TYPE_F32) tt->to_float(w->data, wf, c->k * c->m * c->w2);   // what the matmul multiplies

    struct mg_tensor * x = mg_new_tensor_3d(ctx, MG_TYPE_F32, c->k, c->n, c->x2);
    float *            xf = x->data;
    for (int64_t i = 0; i < mg_nelements(x); i++) xf[i] = 3.0f * mg_test_rand_normal(&rng);

    struct mg_tensor * y = mg_mul_mat(ctx, w, x);
    struct mg_cgraph * g = mg_new_graph(ctx);
    mg_build_forward_expand(g, y);
    mg_graph_compute_with_ctx(ctx, g, 1);
    ck_assert_int_eq(y->ne[0], c->m);
    ck_assert_int_eq(y->ne[1], c->n);
    ck_assert_int_eq(y->ne[2], c->x2);

    const enum mg_type act = mg_get_type_traits_cpu(c->type)->vec_dot_type;
    const int64_t      r2  = c->x2 / c->w2;
    for (int64_t b = 0; b < c->x2; b++) {
        for (int64_t j = 0; j < c->n; j++) {
            const float * xrow = xf + (b * c->n + j) * c->k;
            for (int64_t i = 0; i < c->m; i++) {
                const float * wrow = wf + ((b / r2) * c->m + i) * c->k;
                double dot = 0.0, bound = 0.0, mag = 0.0;
                for (int64_t t = 0; t < c->k; t++) {
                    const double e = activation_error(act, xrow, c->k, t);
                    dot   += (double) wrow[t] * xrow[t];
                    bound += fabs(wrow[t]) * e;
                    mag   += fabs(wrow[t]) * (fabs(xrow[t]) + e);
                }
                bound += (double) (c->k + 4) * ldexp(1.0, -24) * mag;
                const double got = mg_get_f32_nd(y, i, j, b, 0);
                ck_assert_msg(fabs(got - dot) <= bound,
                              "%s k %lld: out[%lld, %lld, %lld] = %.7g, expected %.7g +- %.3g", mg_type_name(c->type),
                              (long long) c->k, (long long) i, (long long) j, (long long) b, got, dot, bound);
            }
        }
    }
    free(wf);
    mg_free(ctx);
}

START_TEST(test_q8_0_weights) {
    const struct mm_case cases[] = {
        {MG_TYPE_Q8_0, 32, 1, 1, 1, 1}, {MG_TYPE_Q8_0, 64, 7, 3, 1, 1}, {MG_TYPE_Q8_0, 256, 16, 8, 1, 1},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) check_case(&cases[i], 10 + i);
}
END_TEST

START_TEST(test_q4_0_weights) {
    const struct mm_case cases[] = {
        {MG_TYPE_Q4_0, 32, 1, 1, 1, 1}, {MG_TYPE_Q4_0, 64, 7, 3, 1, 1}, {MG_TYPE_Q4_0, 256, 16, 8, 1, 1},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) check_case(&cases[i], 20 + i);
}
END_TEST

START_TEST(test_f16_weights) {
    const struct mm_case cases[] = {
        {MG_TYPE_F16, 32, 1, 1, 1, 1}, {MG_TYPE_F16, 64, 7, 3, 1, 1}, {MG_TYPE_F16, 256, 16, 8, 1, 1},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) check_case(&cases[i], 30 + i);
}
END_TEST

START_TEST(test_f32_weights) {
    const struct mm_case c = {MG_TYPE_F32, 96, 5, 4, 1, 1};
    check_case(&c, 40);
}
END_TEST

// Several weight matrices shared by groups of activation matrices: every
// converted row of x must be found again at its place in the work buffer.
START_TEST(test_quantized_weights_broadcast_over_batches) {
    const struct mm_case cases[] = {
        {MG_TYPE_Q8_0, 64, 5, 3, 2, 4}, {MG_TYPE_Q4_0, 64, 5, 3, 2, 6}, {MG_TYPE_F16, 32, 4, 2, 3, 3},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) check_case(&cases[i], 50 + i);
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("quant_matmul");
    MG_TCASE(s, "vs_dequantized", test_q8_0_weights, test_q4_0_weights, test_f16_weights, test_f32_weights,
                test_quantized_weights_broadcast_over_batches);
    return s;
}
