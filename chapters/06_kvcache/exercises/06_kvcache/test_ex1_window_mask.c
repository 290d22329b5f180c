// test_ex1_window_mask.c - chapter 06, exercise 1: a sliding-window mask.
//
//     void mg_kv_cache_fill_mask_window(struct mg_tensor * mask, int pos0, int n_tokens, int window);
//
// Like mg_kv_cache_fill_mask, but row t (token t, at position pos0 + t) lets
// the token see only positions pos0 + t - window + 1 .. pos0 + t (and none
// below 0); window <= 0 means no window (the causal mask). Rows past n_tokens
// hide everything. Graded by `make grade`; declared weak. Checked cell by
// cell against the rule, and through attention: decoding with the window
// gives the attention over the last `window` positions, in double.
#include "harness.h"
#include "mg.h"
#include "window_attention.h"

void mg_kv_cache_fill_mask_window(struct mg_tensor * mask, int pos0, int n_tokens, int window) __attribute__((weak));

static void require_function(void) {
    ck_assert_msg(mg_kv_cache_fill_mask_window != NULL, "mg_kv_cache_fill_mask_window is not defined yet (kv_cache.c, declared in kv_cache.h)");
}

START_TEST(function_exists) {
    require_function();
}
END_TEST

START_TEST(every_cell_follows_the_rule) {
    require_function();
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 1024 * 1024});
    uint64_t rng = 0x3a5c;
    for (int round = 0; round < 300; round++) {
        const int n_tokens = 1 + (int) (mg_test_rand_u64(&rng) % 6);
        const int pos0     = (int) (mg_test_rand_u64(&rng) % 20);
        const int n_kv     = pos0 + n_tokens + (int) (mg_test_rand_u64(&rng) % 8);   // padded
        const int rows     = n_tokens + (int) (mg_test_rand_u64(&rng) % 3);
        const int window   = (int) (mg_test_rand_u64(&rng) % 10) - 1;                  // -1 .. 8
        struct mg_tensor * mask = mg_new_tensor_2d(ctx, MG_TYPE_F32, n_kv, rows);
        for (int64_t i = 0; i < mg_nelements(mask); i++) ((float *) mask->data)[i] = 42.0f;
        mg_kv_cache_fill_mask_window(mask, pos0, n_tokens, window);
        for (int t = 0; t < rows; t++) {
            for (int j = 0; j < n_kv; j++) {
                const int  p       = pos0 + t;
                const bool visible = t < n_tokens && j <= p && (window <= 0 || j > p - window);
                const float cell   = mg_get_f32_nd(mask, j, t, 0, 0);
                ck_assert_msg(visible ? cell == 0.0f : cell == -INFINITY,
                              "pos0 %d, %d tokens, window %d: row %d column %d is %g, expected %s", pos0, n_tokens,
                              window, t, j, (double) cell, visible ? "0" : "-inf");
            }
        }
    }
    mg_free(ctx);
}
END_TEST

// A prompt of 5 tokens, then one token per step up to position 19, through
// the chapter's cache (big enough for all): only the mask makes the window.
static void decode_with_window(int window, int n_pad, uint64_t seed) {
    struct wa_qkv * d = malloc(sizeof(*d));
    wa_make(d, seed);
    struct mg_kv_cache * kv = mg_kv_cache_new(1, 32, WA_D, WA_HKV, MG_TYPE_F32, n_pad);
    ck_assert_ptr_nonnull(kv);
    wa_poison(kv);
    for (int pos0 = 0; pos0 < 20;) {
        const int T = pos0 == 0 ? 5 : 1;
        struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 4 * 1024 * 1024});
        struct mg_cgraph *  g   = mg_new_graph(ctx);
        mg_kv_cache_store(ctx, g, kv, 0, wa_tokens(ctx, &d->k[0][0][0], WA_HKV, pos0, T),
                          wa_tokens(ctx, &d->v[0][0][0], WA_HKV, pos0, T), pos0);
        const int n_kv = mg_kv_cache_n_kv(kv, pos0 + T);
        struct mg_tensor * mask = mg_new_tensor_2d(ctx, MG_TYPE_F32, n_kv, T);
        mg_kv_cache_fill_mask_window(mask, pos0, T, window);
        struct mg_tensor * y = mg_attn(ctx, wa_tokens(ctx, &d->q[0][0][0], WA_H, pos0, T), mg_kv_cache_k(ctx, kv, 0, n_kv),
                                       mg_kv_cache_v(ctx, kv, 0, n_kv), mask, wa_scale());
        mg_build_forward_expand(g, y);
        mg_graph_compute_with_ctx(ctx, g, 1);
        for (int t = 0; t < T; t++) wa_check_row(y, t, d, pos0 + t, window, "window mask");
        mg_free(ctx);
        pos0 += T;
    }
    mg_kv_cache_free(kv);
    free(d);
}

START_TEST(decoding_attends_over_the_window) {
    require_function();
    decode_with_window(4, 1, 61);
    decode_with_window(1, 1, 62);    // only itself
    decode_with_window(3, 8, 63);    // padded columns stay hidden
    decode_with_window(0, 1, 64);    // no window: the causal attention
    decode_with_window(50, 1, 65);   // wider than everything: the same
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("06_kvcache ex1 window_mask");
    TCase * tc = tcase_create("window_mask");
    tcase_add_test(tc, function_exists);   // 0 points: only a start
    tcase_add_test(tc, every_cell_follows_the_rule);
    tcase_add_test(tc, decoding_attends_over_the_window);
    suite_add_tcase(s, tc);
    return s;
}
