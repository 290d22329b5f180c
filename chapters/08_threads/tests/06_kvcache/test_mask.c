// test_mask.c - the causal mask and the masked softmax.
//
// mg_kv_cache_fill_mask(mask, pos0, n_tokens): row t (token t, at position
// pos0 + t) holds 0 where j <= pos0 + t and -INFINITY elsewhere; rows from
// n_tokens on (padding) hide everything. softmax(a * scale + mask) must then
// give exactly zero weight to every hidden position, whatever a holds there,
// and over the visible ones the softmax a double computation gives here.
#include "harness.h"
#include "mg.h"

#include <math.h>

static bool is_minus_inf(float x) {
    return isinf(x) && x < 0.0f;
}

static void check_mask_values(int n_kv, int rows, int pos0, int n_tokens) {
    struct mg_context * ctx  = mg_init((struct mg_init_params) {.mem_size = 1024 * 1024});
    struct mg_tensor *  mask = mg_new_tensor_2d(ctx, MG_TYPE_F32, n_kv, rows);
    for (int64_t i = 0; i < mg_nelements(mask); i++) mg_set_f32_1d(mask, i, 123.0f);   // all overwritten
    mg_kv_cache_fill_mask(mask, pos0, n_tokens);
    for (int t = 0; t < rows; t++) {
        for (int j = 0; j < n_kv; j++) {
            const float m = mg_get_f32_nd(mask, j, t, 0, 0);
            if (t < n_tokens && j <= pos0 + t) {
                ck_assert_msg(m == 0.0f, "row %d position %d: %g, expected 0", t, j, (double) m);
            } else {
                ck_assert_msg(is_minus_inf(m), "row %d position %d: %g, expected -inf", t, j, (double) m);
            }
        }
    }
    mg_free(ctx);
}

START_TEST(test_mask_prompt_is_lower_triangular) {
    check_mask_values(5, 5, 0, 5);
}
END_TEST

START_TEST(test_mask_decode_step_sees_the_past) {
    check_mask_values(8, 1, 6, 1);   // one token at position 6 of a padded n_kv of 8
}
END_TEST

START_TEST(test_mask_batch_after_a_prefix) {
    check_mask_values(10, 4, 3, 3);   // tokens at 3, 4, 5; row 3 is padding
}
END_TEST

// Random scores, the causal mask, a scale: future weights exactly 0, the
// visible ones a softmax of the visible scores.
static void check_masked_softmax(int n_kv, int n_tokens, int pos0, int n_heads, float scale, uint64_t seed) {
    struct mg_context * ctx    = mg_init((struct mg_init_params) {.mem_size = 1024 * 1024});
    struct mg_tensor *  scores = mg_new_tensor_3d(ctx, MG_TYPE_F32, n_kv, n_tokens, n_heads);
    struct mg_tensor *  mask   = mg_new_tensor_2d(ctx, MG_TYPE_F32, n_kv, n_tokens);
    uint64_t rng = seed;
    mg_test_fill_uniform(scores->data, (size_t) mg_nelements(scores), &rng, -4.0f, 4.0f);
    for (int h = 0; h < n_heads; h++) mg_set_f32_nd(scores, n_kv - 1, 0, h, 0, 1e30f);   // a huge future score
    mg_kv_cache_fill_mask(mask, pos0, n_tokens);
    struct mg_tensor * p = mg_soft_max_ext(ctx, scores, mask, scale);
    struct mg_cgraph * g = mg_new_graph(ctx);
    mg_build_forward_expand(g, p);
    mg_graph_compute_with_ctx(ctx, g, 1);

    for (int h = 0; h < n_heads; h++) {
        for (int t = 0; t < n_tokens; t++) {
            const int visible = pos0 + t + 1;
            double    max = -INFINITY, sum = 0.0;
            for (int j = 0; j < visible; j++) max = fmax(max, (double) mg_get_f32_nd(scores, j, t, h, 0) * scale);
            for (int j = 0; j < visible; j++) sum += exp((double) mg_get_f32_nd(scores, j, t, h, 0) * scale - max);
            for (int j = 0; j < n_kv; j++) {
                const float got = mg_get_f32_nd(p, j, t, h, 0);
                if (j >= visible) {
                    ck_assert_msg(got == 0.0f, "head %d token %d: weight %g on future position %d", h, t, (double) got,
                                  j);
                    continue;
                }
                const double want = exp((double) mg_get_f32_nd(scores, j, t, h, 0) * scale - max) / sum;
                ck_assert_msg(fabs(got - want) <= 1e-6, "head %d token %d position %d: %.9g, expected %.9g", h, t, j,
                              (double) got, want);
            }
        }
    }
    mg_free(ctx);
}

START_TEST(test_masked_softmax_prompt) {
    check_masked_softmax(7, 7, 0, 2, 0.5f, 1);
}
END_TEST

START_TEST(test_masked_softmax_decode_with_padding) {
    check_masked_softmax(32, 1, 20, 3, 0.125f, 2);   // 21 visible, 11 padded
}
END_TEST

START_TEST(test_masked_softmax_batch_after_prefix) {
    check_masked_softmax(20, 4, 9, 2, 1.0f, 3);
}
END_TEST

// A long row: ggml's exp differs between the 16-wide body of a row and its
// tail (compute.c, row_expf); both must still give a softmax.
START_TEST(test_masked_softmax_long_row) {
    check_masked_softmax(100, 3, 50, 1, 0.3f, 4);
}
END_TEST

// The mask a graph computes (here: scaled by 1) rather than a leaf. The
// scores are a leaf and stay alive, so with parent reuse the allocator may
// write the softmax over the mask, its dying source of the same shape. The
// kernel must then still read each mask row before the row is overwritten.
START_TEST(test_softmax_over_a_computed_mask) {
    enum { N = 6, T = 6 };
    struct mg_context * ctx    = mg_init((struct mg_init_params) {.mem_size = 1024 * 1024});
    struct mg_tensor *  scores = mg_new_tensor_2d(ctx, MG_TYPE_F32, N, T);
    struct mg_tensor *  causal = mg_new_tensor_2d(ctx, MG_TYPE_F32, N, T);
    uint64_t rng = 5;
    mg_test_fill_uniform(scores->data, N * T, &rng, -2.0f, 2.0f);
    mg_kv_cache_fill_mask(causal, 0, T);
    struct mg_tensor * mask = mg_scale(ctx, causal, 1.0f);
    struct mg_tensor * p    = mg_soft_max_ext(ctx, scores, mask, 1.0f);
    struct mg_cgraph * g    = mg_new_graph(ctx);
    mg_build_forward_expand(g, p);
    struct mg_gallocr * ga = mg_gallocr_new(0);   // parent reuse on, as by default
    ck_assert(mg_gallocr_alloc_graph(ga, g));
    mg_graph_compute_with_ctx(ctx, g, 1);
    for (int t = 0; t < T; t++) {
        double max = -INFINITY, sum = 0.0;
        for (int j = 0; j <= t; j++) max = fmax(max, (double) mg_get_f32_nd(scores, j, t, 0, 0));
        for (int j = 0; j <= t; j++) sum += exp((double) mg_get_f32_nd(scores, j, t, 0, 0) - max);
        for (int j = 0; j < N; j++) {
            const double want = j <= t ? exp((double) mg_get_f32_nd(scores, j, t, 0, 0) - max) / sum : 0.0;
            ck_assert_msg(fabs(mg_get_f32_nd(p, j, t, 0, 0) - want) <= 1e-6, "row %d position %d: %.9g, expected %.9g",
                          t, j, (double) mg_get_f32_nd(p, j, t, 0, 0), want);
        }
    }
    mg_gallocr_free(ga);
    mg_free(ctx);
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("mask");

    MG_TCASE(s, "fill_mask", test_mask_prompt_is_lower_triangular, test_mask_decode_step_sees_the_past,
                test_mask_batch_after_a_prefix);

    MG_TCASE(s, "masked_softmax", test_masked_softmax_prompt, test_masked_softmax_decode_with_padding,
                test_masked_softmax_batch_after_prefix, test_masked_softmax_long_row,
                test_softmax_over_a_computed_mask);
    return s;
}
