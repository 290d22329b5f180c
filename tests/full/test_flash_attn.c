// test_flash_attn.c - flash attention (an online softmax over tiles of keys)
// against the plain path (scores, softmax, weighted sum), and against the
// fixtures' reference logits when a model runs with it.
#include "harness.h"
#include "mg.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct attn_case {
    int   D, H, Hkv, T, n_kv, pos0;   // the queries sit at positions pos0 .. pos0+T-1
    enum mg_type kv_type;
};

static struct mg_tensor * random_tensor(struct mg_context * ctx, enum mg_type type, int64_t ne0, int64_t ne1,
                                        int64_t ne2, uint64_t * rng) {
    struct mg_tensor * t = mg_new_tensor_3d(ctx, type, ne0, ne1, ne2);
    for (int64_t i = 0; i < mg_nelements(t); i++) mg_set_f32_1d(t, i, mg_test_rand_uniform(rng, -1.0f, 1.0f));
    return t;
}

// Both paths on the same q, K, V and causal mask; returns the largest
// difference, relative to the largest |output|.
static float compare_paths(const struct attn_case * c, uint64_t seed) {
    uint64_t rng = seed;
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 64 * 1024 * 1024});
    struct mg_tensor * q    = random_tensor(ctx, MG_TYPE_F32, c->D, c->H, c->T, &rng);   // {D, H, T}
    // K and V as the two cache layouts hold them: K {D, n_kv, Hkv}; V like K
    // for flash attention, transposed {n_kv, D, Hkv} for the plain path.
    struct mg_tensor * k    = random_tensor(ctx, c->kv_type, c->D, c->n_kv, c->Hkv, &rng);
    struct mg_tensor * v    = random_tensor(ctx, c->kv_type, c->D, c->n_kv, c->Hkv, &rng);
    struct mg_tensor * v_t  = mg_new_tensor_3d(ctx, c->kv_type, c->n_kv, c->D, c->Hkv);
    for (int64_t h = 0; h < c->Hkv; h++) {
        for (int64_t j = 0; j < c->n_kv; j++) {
            for (int64_t d = 0; d < c->D; d++) mg_set_f32_nd(v_t, j, d, h, 0, mg_get_f32_nd(v, d, j, h, 0));
        }
    }
    struct mg_tensor * mask = mg_new_tensor_2d(ctx, MG_TYPE_F32, c->n_kv, c->T);
    mg_kv_cache_fill_mask(mask, c->pos0, c->T);
    const float scale = 1.0f / sqrtf((float) c->D);

    struct mg_tensor * plain = mg_attn(ctx, q, k, v_t, mask, scale);                                   // {D*H, T}
    struct mg_tensor * flash = mg_flash_attn(ctx, mg_permute(ctx, q, 0, 2, 1, 3), k, v, mask, scale);   // {D, H, T}
    struct mg_cgraph * g     = mg_new_graph(ctx);
    mg_build_forward_expand(g, plain);
    mg_build_forward_expand(g, flash);
    mg_graph_compute_with_ctx(ctx, g, 2);

    float max_abs = 0.0f, max_diff = 0.0f;
    for (int64_t i = 0; i < mg_nelements(plain); i++) {
        const float a = mg_get_f32_1d(plain, i), b = mg_get_f32_1d(flash, i);
        max_abs  = fmaxf(max_abs, fabsf(a));
        max_diff = fmaxf(max_diff, fabsf(a - b));
    }
    mg_free(ctx);
    return max_diff / max_abs;
}

static const struct attn_case cases[] = {
    {64, 4, 4, 1, 1, 0, MG_TYPE_F32},     // one key: softmax of one score
    {64, 4, 2, 3, 17, 14, MG_TYPE_F32},   // a batch at the end of an odd-length cache, GQA 2
    {64, 8, 2, 5, 100, 95, MG_TYPE_F32},  // several tiles of keys, GQA 4
    {96, 8, 4, 1, 64, 40, MG_TYPE_F32},   // decode with masked padding beyond position 40
    {64, 4, 2, 3, 70, 67, MG_TYPE_F16},   // the F16 cache
    {96, 8, 4, 7, 33, 26, MG_TYPE_F16},
    // Blocks: a block holds 64 / G tokens of the G query heads of a KV head.
    {64, 8, 2, 40, 200, 160, MG_TYPE_F16},    // G 4: blocks of 16 tokens, the last one short; 3 whole tiles + 8
    {128, 4, 4, 1, 320, 300, MG_TYPE_F16},    // G 1, decode: one row, dot products key by key
    {64, 2, 2, 70, 128, 58, MG_TYPE_F32},     // G 1: a block of 64 tokens and one of 6
    {96, 16, 1, 3, 1030, 1027, MG_TYPE_F16},  // G 16, deep: 16 tiles of keys, the online max keeps moving
};

// F32: the paths differ only in the order of the softmax sums. F16: the plain
// path rounds the probabilities to F16 before multiplying by V (as llama.cpp
// does), which flash attention does not, so up to ~2^-11 of the output.
START_TEST(test_flash_equals_plain) {
    const struct attn_case * c = &cases[_i];
    const float tolerance = c->kv_type == MG_TYPE_F32 ? 1e-5f : 2e-3f;
    for (uint64_t seed = 1; seed <= 3; seed++) {
        const float rel = compare_paths(c, seed * 7919 + (uint64_t) _i);
        ck_assert_msg(rel <= tolerance, "case %d seed %d: relative difference %g > %g", _i, (int) seed, (double) rel,
                      (double) tolerance);
    }
}
END_TEST

// A model run with flash attention and an F32 cache lands as close to the
// reference's plain-attention logits as the plain path does (fixtures' 1e-3).
START_TEST(test_flash_attention_model_matches_fixture) {
    struct mg_model * m = mg_model_load_from_file(mg_test_fixture("models/tiny-f32.gguf"), mg_model_default_params());
    ck_assert_ptr_nonnull(m);
    size_t len;
    char * text = mg_test_read_file(mg_test_fixture("prompts/fox.txt"), &len);
    ck_assert_ptr_nonnull(text);
    int32_t tokens[64];
    const int32_t n = mg_tokenize(m->vocab, text, (int32_t) len, tokens, 64, false, false);
    ck_assert_int_eq(n, 18);

    struct mg_session_params params = mg_session_default_params();
    params.n_ctx      = 512;
    params.kv_type    = MG_TYPE_F32;
    params.flash_attn = true;
    params.n_threads  = 2;
    struct mg_session * s = mg_session_new(m, params);
    ck_assert(mg_decode(s, tokens, n, false));

    size_t golden_size;
    float * golden = mg_test_read_file(mg_test_fixture("golden/tiny-f32/fox.f32kv.logits.bin"), &golden_size);
    ck_assert_ptr_nonnull(golden);
    ck_assert_uint_eq(golden_size, 6400 * sizeof(float));
    float max_diff = 0.0f;
    for (int i = 0; i < 6400; i++) max_diff = fmaxf(max_diff, fabsf(mg_get_logits(s)[i] - golden[i]));
    ck_assert_msg(max_diff <= 1e-3f, "flash attention logits differ from the reference by %g", (double) max_diff);
    free(golden);
    free(text);
    mg_session_free(s);
    mg_model_free(m);
}
END_TEST

// Each block of query rows is computed whole by one thread, so the output
// does not depend on how many threads share the blocks: equal to the bit.
START_TEST(test_flash_equal_across_thread_counts) {
    uint64_t rng = 99;
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 64 * 1024 * 1024});
    const int D = 64, H = 8, Hkv = 2, T = 37, n_kv = 300, pos0 = 263;
    struct mg_tensor * q    = random_tensor(ctx, MG_TYPE_F32, D, H, T, &rng);
    struct mg_tensor * k    = random_tensor(ctx, MG_TYPE_F16, D, n_kv, Hkv, &rng);
    struct mg_tensor * v    = random_tensor(ctx, MG_TYPE_F16, D, n_kv, Hkv, &rng);
    struct mg_tensor * mask = mg_new_tensor_2d(ctx, MG_TYPE_F32, n_kv, T);
    mg_kv_cache_fill_mask(mask, pos0, T);
    struct mg_tensor * out = mg_flash_attn(ctx, mg_permute(ctx, q, 0, 2, 1, 3), k, v, mask, 0.125f);
    struct mg_cgraph * g   = mg_new_graph(ctx);
    mg_build_forward_expand(g, out);
    float * first = malloc((size_t) mg_nbytes(out));
    ck_assert_ptr_nonnull(first);
    for (int n_threads = 1; n_threads <= 4; n_threads++) {
        mg_graph_compute_with_ctx(ctx, g, n_threads);
        if (n_threads == 1) {
            memcpy(first, out->data, mg_nbytes(out));
        } else {
            ck_assert_msg(memcmp(first, out->data, mg_nbytes(out)) == 0, "%d threads differ from one", n_threads);
        }
    }
    free(first);
    mg_free(ctx);
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("flash_attn");
    TCase * tc = tcase_create("flash_attn");
    tcase_add_loop_test(tc, test_flash_equals_plain, 0, (int) (sizeof(cases) / sizeof(cases[0])));
    tcase_add_test(tc, test_flash_attention_model_matches_fixture);
    tcase_add_test(tc, test_flash_equal_across_thread_counts);
    suite_add_tcase(s, tc);
    return s;
}
