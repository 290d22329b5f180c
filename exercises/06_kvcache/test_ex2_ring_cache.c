// test_ex2_ring_cache.c - chapter 06, exercise 2: a ring of n_ctx slots.
//
// Position p is stored in slot p % n_ctx, so decoding goes on past n_ctx
// positions, attending over the last `window` of them:
//
//     mg_kv_cache_store(ctx, g, kv, il, k_cur, v_cur, pos0);   // any pos0: slots wrap (a batch may straddle the end)
//     void mg_kv_cache_fill_mask_ring(struct mg_tensor * mask, int n_ctx, int pos0, int n_tokens, int window);
//
// The mask is {n_ctx, >= n_tokens}: column j is slot j, which after this
// batch is stored holds the latest position q <= pos0 + n_tokens - 1 with
// q % n_ctx == j (none if there is no such q >= 0). Row t (position p =
// pos0 + t) lets slot j through when q <= p and q > p - window; rows past
// n_tokens hide everything. Once the ring has wrapped, a batch must leave
// every position its tokens need in place: n_tokens + window - 1 <= n_ctx
// (a first prompt of n_ctx tokens overwrites nothing). Attention reads all n_ctx slots
// (mg_kv_cache_k(ctx, kv, il, n_ctx)). RoPE is applied before storing, so the
// cached keys stay right wherever they sit. Graded by `make grade`; the mask
// function is declared weak. Checked against attention in double over each
// token's window, through prompts, decodes and a batch that wraps.
#include "harness.h"
#include "mg.h"
#include "window_attention.h"

void mg_kv_cache_fill_mask_ring(struct mg_tensor * mask, int n_ctx, int pos0, int n_tokens, int window)
    __attribute__((weak));

static void require_function(void) {
    ck_assert_msg(mg_kv_cache_fill_mask_ring != NULL, "mg_kv_cache_fill_mask_ring is not defined yet (kv_cache.c, declared in kv_cache.h)");
}

START_TEST(function_exists) {
    require_function();
}
END_TEST

// The latest position in slot j once positions 0 .. last are stored; -1 if none.
static int slot_position(int j, int n_ctx, int last) {
    if (j > last) return -1;
    return last - ((last - j) % n_ctx);
}

START_TEST(every_cell_follows_the_rule) {
    require_function();
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 1024 * 1024});
    uint64_t rng = 0x7146;
    for (int round = 0; round < 300; round++) {
        const int n_ctx    = 2 + (int) (mg_test_rand_u64(&rng) % 9);
        const int window   = 1 + (int) (mg_test_rand_u64(&rng) % (uint64_t) n_ctx);
        const int n_tokens = 1 + (int) (mg_test_rand_u64(&rng) % (uint64_t) (n_ctx - window + 1));
        const int pos0     = (int) (mg_test_rand_u64(&rng) % 40);
        const int rows     = n_tokens + (int) (mg_test_rand_u64(&rng) % 2);
        struct mg_tensor * mask = mg_new_tensor_2d(ctx, MG_TYPE_F32, n_ctx, rows);
        for (int64_t i = 0; i < mg_nelements(mask); i++) ((float *) mask->data)[i] = 42.0f;
        mg_kv_cache_fill_mask_ring(mask, n_ctx, pos0, n_tokens, window);
        for (int t = 0; t < rows; t++) {
            for (int j = 0; j < n_ctx; j++) {
                const int  p       = pos0 + t;
                const int  q       = slot_position(j, n_ctx, pos0 + n_tokens - 1);
                const bool visible = t < n_tokens && q >= 0 && q <= p && q > p - window;
                const float cell   = mg_get_f32_nd(mask, j, t, 0, 0);
                ck_assert_msg(visible ? cell == 0.0f : cell == -INFINITY,
                              "n_ctx %d, window %d, pos0 %d, %d tokens: row %d slot %d is %g, expected %s", n_ctx,
                              window, pos0, n_tokens, t, j, (double) cell, visible ? "0" : "-inf");
            }
        }
    }
    mg_free(ctx);
}
END_TEST

// Feed the batches (sizes in batches[], 0-terminated) through a ring of n_ctx
// slots with the window, checking every token's output.
static void decode_in_a_ring(int n_ctx, int window, const int * batches, uint64_t seed) {
    struct wa_qkv * d = malloc(sizeof(*d));
    wa_make(d, seed);
    struct mg_kv_cache * kv = mg_kv_cache_new(1, n_ctx, WA_D, WA_HKV, MG_TYPE_F32, 1);
    ck_assert_ptr_nonnull(kv);
    wa_poison(kv);
    int pos0 = 0;
    for (int b = 0; batches[b] != 0; b++) {
        const int T = batches[b];
        ck_assert(pos0 + T <= WA_MAX_T);
        struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 4 * 1024 * 1024});
        struct mg_cgraph *  g   = mg_new_graph(ctx);
        mg_kv_cache_store(ctx, g, kv, 0, wa_tokens(ctx, &d->k[0][0][0], WA_HKV, pos0, T),
                          wa_tokens(ctx, &d->v[0][0][0], WA_HKV, pos0, T), pos0);
        struct mg_tensor * mask = mg_new_tensor_2d(ctx, MG_TYPE_F32, n_ctx, T);
        mg_kv_cache_fill_mask_ring(mask, n_ctx, pos0, T, window);
        struct mg_tensor * y = mg_attn(ctx, wa_tokens(ctx, &d->q[0][0][0], WA_H, pos0, T), mg_kv_cache_k(ctx, kv, 0, n_ctx),
                                       mg_kv_cache_v(ctx, kv, 0, n_ctx), mask, wa_scale());
        mg_build_forward_expand(g, y);
        mg_graph_compute_with_ctx(ctx, g, 1);
        for (int t = 0; t < T; t++) wa_check_row(y, t, d, pos0 + t, window, "ring cache");
        mg_free(ctx);
        pos0 += T;
    }
    mg_kv_cache_free(kv);
    free(d);
}

// The README's case: n_ctx = window = 4, one token at a time up to position 11.
START_TEST(four_slots_one_token_at_a_time) {
    require_function();
    const int batches[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0};
    decode_in_a_ring(4, 4, batches, 71);
}
END_TEST

START_TEST(a_prompt_then_decodes) {
    require_function();
    const int batches[] = {4, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0};
    decode_in_a_ring(4, 4, batches, 72);
    const int batches2[] = {3, 1, 1, 1, 1, 1, 1, 1, 0};
    decode_in_a_ring(6, 3, batches2, 73);
}
END_TEST

// Positions 5..7 of a 6-slot ring go to slots 5, 0, 1: the store must split.
START_TEST(a_batch_that_wraps) {
    require_function();
    const int batches[] = {3, 1, 1, 3, 1, 1, 3, 1, 2, 2, 0};
    decode_in_a_ring(6, 3, batches, 74);
    const int batches2[] = {5, 5, 5, 5, 5, 0};
    decode_in_a_ring(8, 2, batches2, 75);
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("06_kvcache ex2 ring_cache");
    TCase * tc = tcase_create("ring_cache");
    tcase_add_test(tc, function_exists);   // 0 points: only a start
    tcase_add_test(tc, every_cell_follows_the_rule);
    tcase_add_test(tc, four_slots_one_token_at_a_time);
    tcase_add_test(tc, a_prompt_then_decodes);
    tcase_add_test(tc, a_batch_that_wraps);
    suite_add_tcase(s, tc);
    return s;
}
