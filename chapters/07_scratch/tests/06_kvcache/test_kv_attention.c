// test_kv_attention.c - decoding step by step through the KV cache gives the
// attention that recomputing every position gives; and the cache's bytes,
// sizes and padding are what its header says.
//
// Step p with the cache stores token p's K and V at position p and attends
// over positions 0..n_kv-1 of the cache (the padded ones masked). Recomputing
// builds K and V of tokens 0..p from scratch and attends with the causal
// mask; its last row is step p's output. With n_pad = 1 both multiply the
// same numbers in the same order, so they must agree to the bit. With
// padding, the softmax rows are longer (the extra weights are exactly 0) and
// the exp of an element depends on its place in the row (mg_expf vs expf,
// see compute.c): they agree to float rounding, 1e-6. So they do, too, in
// full/ when the recomputation has 16 or 32 positions: there full/ hands its
// weighted sum of V (2 or more query rows, k a multiple of 16) to the order
// of llama.cpp's batches (gemm_float.c, llamafile's tinyBLAS), and one
// cached step, a single row, keeps vec_dot's, as llama.cpp does.
// Both are also checked against a naive attention in double written here,
// which knows nothing of permutes and views: 2e-5 (float dot products of
// head_dim terms, a float softmax, a float weighted sum).
#include "harness.h"
#include "mg.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// gemm_float.h exists in full/ only (the chapters multiply in one order).
#if __has_include("gemm_float.h")
#include "gemm_float.h"
#define HAS_GEMM_FLOAT 1
#endif

enum { HEAD_DIM = 8, MAX_T = 33, MAX_H = 8 };

struct attn_case {
    int n_head, n_head_kv, n_tokens, n_pad;
};

// Token t's q, k, v: {HEAD_DIM, heads} each, for t = 0..T-1.
struct qkv {
    float q[MAX_T][MAX_H][HEAD_DIM];
    float k[MAX_T][MAX_H][HEAD_DIM];
    float v[MAX_T][MAX_H][HEAD_DIM];
};

static void make_qkv(struct qkv * d, const struct attn_case * c, uint64_t seed) {
    uint64_t rng = seed;
    for (int t = 0; t < c->n_tokens; t++) {
        for (int h = 0; h < MAX_H; h++) {
            for (int i = 0; i < HEAD_DIM; i++) {
                d->q[t][h][i] = mg_test_rand_normal(&rng);
                d->k[t][h][i] = mg_test_rand_normal(&rng);
                d->v[t][h][i] = mg_test_rand_normal(&rng);
            }
        }
    }
}

// {HEAD_DIM, n_heads, T} holding tokens t0 .. t0+T-1 of src.
static struct mg_tensor * tokens(struct mg_context * ctx, const float (*src)[MAX_H][HEAD_DIM], int n_heads, int t0,
                                 int T) {
    struct mg_tensor * t = mg_new_tensor_3d(ctx, MG_TYPE_F32, HEAD_DIM, n_heads, T);
    for (int tok = 0; tok < T; tok++)
        for (int h = 0; h < n_heads; h++)
            for (int i = 0; i < HEAD_DIM; i++) mg_set_f32_nd(t, i, h, tok, 0, src[t0 + tok][h][i]);
    return t;
}

static float attn_scale(void) {
    return 1.0f / sqrtf((float) HEAD_DIM);
}

// Step p through the cache: out is {HEAD_DIM * n_head} floats.
static void step_with_cache(struct mg_kv_cache * kv, const struct qkv * d, const struct attn_case * c, int p,
                            float * out) {
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 4 * 1024 * 1024});
    struct mg_cgraph *  g   = mg_new_graph(ctx);
    mg_kv_cache_store(ctx, g, kv, 0, tokens(ctx, d->k, c->n_head_kv, p, 1), tokens(ctx, d->v, c->n_head_kv, p, 1), p);
    const int          n_kv = mg_kv_cache_n_kv(kv, p + 1);
    struct mg_tensor * mask = mg_new_tensor_2d(ctx, MG_TYPE_F32, n_kv, 1);
    mg_kv_cache_fill_mask(mask, p, 1);
    struct mg_tensor * y = mg_attn(ctx, tokens(ctx, d->q, c->n_head, p, 1), mg_kv_cache_k(ctx, kv, 0, n_kv),
                                   mg_kv_cache_v(ctx, kv, 0, n_kv), mask, attn_scale());
    mg_build_forward_expand(g, y);
    mg_graph_compute_with_ctx(ctx, g, 1);
    ck_assert_int_eq(y->ne[0], HEAD_DIM * c->n_head);
    ck_assert_int_eq(y->ne[1], 1);
    for (int i = 0; i < HEAD_DIM * c->n_head; i++) out[i] = mg_get_f32_1d(y, i);
    mg_free(ctx);
}

// Step p recomputed: all p+1 tokens with the causal mask; the last row.
static void step_recomputed(const struct qkv * d, const struct attn_case * c, int p, float * out) {
    struct mg_context * ctx  = mg_init((struct mg_init_params) {.mem_size = 4 * 1024 * 1024});
    const int           T    = p + 1;
    struct mg_tensor *  k    = tokens(ctx, d->k, c->n_head_kv, 0, T);
    struct mg_tensor *  v    = tokens(ctx, d->v, c->n_head_kv, 0, T);
    struct mg_tensor *  mask = mg_new_tensor_2d(ctx, MG_TYPE_F32, T, T);
    mg_kv_cache_fill_mask(mask, 0, T);
    struct mg_tensor * k_heads = mg_permute(ctx, k, 0, 2, 1, 3);                 // {D, T, Hkv}
    struct mg_tensor * v_rows  = mg_cont(ctx, mg_permute(ctx, v, 1, 2, 0, 3));   // {T, D, Hkv}
    struct mg_tensor * y = mg_attn(ctx, tokens(ctx, d->q, c->n_head, 0, T), k_heads, v_rows, mask, attn_scale());
    struct mg_cgraph * g = mg_new_graph(ctx);
    mg_build_forward_expand(g, y);
    mg_graph_compute_with_ctx(ctx, g, 1);
    for (int i = 0; i < HEAD_DIM * c->n_head; i++) out[i] = mg_get_f32_nd(y, i, p, 0, 0);
    mg_free(ctx);
}

// softmax over positions 0..p of q.k * scale, then the weighted sum of v, in
// double; q head h reads kv head h / (H / Hkv).
static void step_naive(const struct qkv * d, const struct attn_case * c, int p, double * out) {
    const int group = c->n_head / c->n_head_kv;
    for (int h = 0; h < c->n_head; h++) {
        const int hk = h / group;
        double    w[MAX_T], max = -INFINITY, sum = 0.0;
        for (int j = 0; j <= p; j++) {
            double s = 0.0;
            for (int i = 0; i < HEAD_DIM; i++) s += (double) d->q[p][h][i] * d->k[j][hk][i];
            w[j] = s * attn_scale();
            max  = fmax(max, w[j]);
        }
        for (int j = 0; j <= p; j++) sum += w[j] = exp(w[j] - max);
        for (int i = 0; i < HEAD_DIM; i++) {
            double acc = 0.0;
            for (int j = 0; j <= p; j++) acc += w[j] / sum * d->v[j][hk][i];
            out[h * HEAD_DIM + i] = acc;
        }
    }
}

// Whether the recomputation of T positions sums V in llama.cpp's batch order
// (a mul_mat of HEAD_DIM rows of T, with T columns), not vec_dot's.
static bool recomputed_in_batch_order(int T) {
#if defined(HAS_GEMM_FLOAT)
    return mg_gemm_float_applies(MG_TYPE_F32, HEAD_DIM, T, T);
#else
    (void) T;
    return false;
#endif
}

static void check_decoding(const struct attn_case * c, uint64_t seed) {
    struct qkv * d = malloc(sizeof(*d));
    make_qkv(d, c, seed);
    struct mg_kv_cache * kv = mg_kv_cache_new(1, 40, HEAD_DIM, c->n_head_kv, MG_TYPE_F32, c->n_pad);
    ck_assert_ptr_nonnull(kv);
    // Slots not written yet hold large finite garbage: only the mask keeps it out.
    for (int64_t i = 0; i < mg_nelements(kv->k[0]); i++) ((float *) kv->k[0]->data)[i] = 100.0f;
    for (int64_t i = 0; i < mg_nelements(kv->v[0]); i++) ((float *) kv->v[0]->data)[i] = -100.0f;

    for (int p = 0; p < c->n_tokens; p++) {
        const bool bit_exact = c->n_pad == 1 && !recomputed_in_batch_order(p + 1);
        float  cached[HEAD_DIM * MAX_H], full[HEAD_DIM * MAX_H];
        double naive[HEAD_DIM * MAX_H];
        step_with_cache(kv, d, c, p, cached);
        step_recomputed(d, c, p, full);
        step_naive(d, c, p, naive);
        for (int i = 0; i < HEAD_DIM * c->n_head; i++) {
            if (bit_exact) {
                ck_assert_msg(memcmp(&cached[i], &full[i], sizeof(float)) == 0,
                              "H %d Hkv %d step %d value %d: cached %.9g, recomputed %.9g", c->n_head, c->n_head_kv, p,
                              i, (double) cached[i], (double) full[i]);
            } else {
                ck_assert_msg(fabsf(cached[i] - full[i]) <= 1e-6f * (1.0f + fabsf(full[i])),
                              "H %d Hkv %d pad %d step %d value %d: cached %.9g, recomputed %.9g", c->n_head,
                              c->n_head_kv, c->n_pad, p, i, (double) cached[i], (double) full[i]);
            }
            ck_assert_msg(fabs(cached[i] - naive[i]) <= 2e-5 * (1.0 + fabs(naive[i])),
                          "H %d Hkv %d step %d value %d: cached %.9g, naive %.9g", c->n_head, c->n_head_kv, p, i,
                          (double) cached[i], naive[i]);
        }
    }
    mg_kv_cache_free(kv);
    free(d);
}

static const int seq_lens[4] = {1, 2, 7, 33};

static void check_ratio(int n_head, int n_head_kv, int n_pad) {
    for (int s = 0; s < 4; s++) {
        const struct attn_case c = {n_head, n_head_kv, seq_lens[s], n_pad};
        check_decoding(&c, (uint64_t) (n_head * 100 + n_head_kv * 10 + s));
    }
}

START_TEST(test_cache_equals_recompute_mha) {
    check_ratio(2, 2, 1);
}
END_TEST

START_TEST(test_cache_equals_recompute_gqa_2) {
    check_ratio(4, 2, 1);
}
END_TEST

START_TEST(test_cache_equals_recompute_gqa_4) {
    check_ratio(4, 1, 1);
    check_ratio(8, 2, 1);
}
END_TEST

START_TEST(test_cache_with_padding_equals_recompute) {
    check_ratio(4, 2, 8);
    check_ratio(4, 1, 32);
}
END_TEST

// ---------------------------------------------------------------------------
// The store writes exactly its slots
// ---------------------------------------------------------------------------

enum { S_LAYERS = 2, S_CTX = 8, S_D = 4, S_HKV = 2, S_EMBD = S_D * S_HKV };

static float before_k(int il, int64_t i) { return 1000.0f * (float) (il + 1) + (float) i; }
static float before_v(int il, int64_t i) { return -1000.0f * (float) (il + 1) - (float) i; }

// Store T tokens at pos0 into layer il, then compare every byte of the cache
// with what should be there: K row pos0+t = token t; V column pos0+t =
// token t (V is stored transposed, {n_ctx, n_embd}); the rest as before.
static void check_store(int il, int pos0, int T) {
    struct mg_kv_cache * kv = mg_kv_cache_new(S_LAYERS, S_CTX, S_D, S_HKV, MG_TYPE_F32, 1);
    ck_assert_ptr_nonnull(kv);
    for (int l = 0; l < S_LAYERS; l++) {
        ck_assert_int_eq(kv->k[l]->ne[0], S_EMBD);
        ck_assert_int_eq(kv->k[l]->ne[1], S_CTX);
        ck_assert_int_eq(kv->v[l]->ne[0], S_CTX);
        ck_assert_int_eq(kv->v[l]->ne[1], S_EMBD);
        for (int64_t i = 0; i < S_EMBD * S_CTX; i++) {
            ((float *) kv->k[l]->data)[i] = before_k(l, i);
            ((float *) kv->v[l]->data)[i] = before_v(l, i);
        }
    }
    struct mg_context * ctx   = mg_init((struct mg_init_params) {.mem_size = 1024 * 1024});
    struct mg_tensor *  k_cur = mg_new_tensor_3d(ctx, MG_TYPE_F32, S_D, S_HKV, T);
    struct mg_tensor *  v_cur = mg_new_tensor_3d(ctx, MG_TYPE_F32, S_D, S_HKV, T);
    for (int64_t i = 0; i < S_EMBD * T; i++) {
        mg_set_f32_1d(k_cur, i, 0.5f + (float) i);
        mg_set_f32_1d(v_cur, i, -0.5f - (float) i);
    }
    struct mg_cgraph * g = mg_new_graph(ctx);
    mg_kv_cache_store(ctx, g, kv, il, k_cur, v_cur, pos0);
    mg_graph_compute_with_ctx(ctx, g, 1);

    for (int l = 0; l < S_LAYERS; l++) {
        const float * K = kv->k[l]->data;
        const float * V = kv->v[l]->data;
        for (int pos = 0; pos < S_CTX; pos++) {
            const int  t       = pos - pos0;
            const bool written = l == il && t >= 0 && t < T;
            for (int i = 0; i < S_EMBD; i++) {
                const int64_t ki = (int64_t) pos * S_EMBD + i;   // K {n_embd, n_ctx}: row pos
                const int64_t vi = (int64_t) i * S_CTX + pos;    // V {n_ctx, n_embd}: column pos
                const float   want_k = written ? 0.5f + (float) (t * S_EMBD + i) : before_k(l, ki);
                const float   want_v = written ? -0.5f - (float) (t * S_EMBD + i) : before_v(l, vi);
                ck_assert_msg(K[ki] == want_k, "layer %d K[pos %d][%d] = %g, expected %g", l, pos, i, (double) K[ki],
                              (double) want_k);
                ck_assert_msg(V[vi] == want_v, "layer %d V[%d][pos %d] = %g, expected %g", l, i, pos, (double) V[vi],
                              (double) want_v);
            }
        }
    }
    mg_free(ctx);
    mg_kv_cache_free(kv);
}

START_TEST(test_store_one_token_writes_its_slot_only) {
    check_store(1, 3, 1);
}
END_TEST

START_TEST(test_store_at_position_zero) {
    check_store(0, 0, 1);
}
END_TEST

START_TEST(test_store_at_the_last_position) {
    check_store(1, S_CTX - 1, 1);
}
END_TEST

START_TEST(test_store_a_batch_of_tokens) {
    check_store(0, 2, 3);
}
END_TEST

// The views read positions 0..n_kv-1 in mg_attn's shapes: K as {D, n_kv, Hkv}
// and V as {n_kv, D, Hkv}, element by element.
START_TEST(test_cache_views_read_the_slots) {
    struct mg_kv_cache * kv = mg_kv_cache_new(1, S_CTX, S_D, S_HKV, MG_TYPE_F32, 1);
    for (int64_t i = 0; i < S_EMBD * S_CTX; i++) {
        ((float *) kv->k[0]->data)[i] = before_k(0, i);
        ((float *) kv->v[0]->data)[i] = before_v(0, i);
    }
    struct mg_context * ctx  = mg_init((struct mg_init_params) {.mem_size = 1024 * 1024});
    const int           n_kv = 5;
    struct mg_tensor *  k    = mg_kv_cache_k(ctx, kv, 0, n_kv);
    struct mg_tensor *  v    = mg_kv_cache_v(ctx, kv, 0, n_kv);
    ck_assert_int_eq(k->ne[0], S_D);
    ck_assert_int_eq(k->ne[1], n_kv);
    ck_assert_int_eq(k->ne[2], S_HKV);
    ck_assert_int_eq(v->ne[0], n_kv);
    ck_assert_int_eq(v->ne[1], S_D);
    ck_assert_int_eq(v->ne[2], S_HKV);
    for (int h = 0; h < S_HKV; h++) {
        for (int pos = 0; pos < n_kv; pos++) {
            for (int d = 0; d < S_D; d++) {
                const int i = h * S_D + d;   // element of the {D, Hkv} token row
                ck_assert_float_eq(mg_get_f32_nd(k, d, pos, h, 0), before_k(0, (int64_t) pos * S_EMBD + i));
                ck_assert_float_eq(mg_get_f32_nd(v, pos, d, h, 0), before_v(0, (int64_t) i * S_CTX + pos));
            }
        }
    }
    mg_free(ctx);
    mg_kv_cache_free(kv);
}
END_TEST

// ---------------------------------------------------------------------------
// Sizes
// ---------------------------------------------------------------------------

START_TEST(test_n_kv_pads_to_a_multiple) {
    struct mg_kv_cache * kv = mg_kv_cache_new(1, 512, 4, 1, MG_TYPE_F32, 256);
    ck_assert_int_eq(mg_kv_cache_n_kv(kv, 1), 256);
    ck_assert_int_eq(mg_kv_cache_n_kv(kv, 255), 256);
    ck_assert_int_eq(mg_kv_cache_n_kv(kv, 256), 256);
    ck_assert_int_eq(mg_kv_cache_n_kv(kv, 257), 512);
    ck_assert_int_eq(mg_kv_cache_n_kv(kv, 512), 512);
    mg_kv_cache_free(kv);
}
END_TEST

START_TEST(test_n_kv_is_capped_at_n_ctx) {
    struct mg_kv_cache * kv = mg_kv_cache_new(1, 100, 4, 1, MG_TYPE_F32, 32);
    ck_assert_int_eq(mg_kv_cache_n_kv(kv, 70), 96);
    ck_assert_int_eq(mg_kv_cache_n_kv(kv, 96), 96);
    ck_assert_int_eq(mg_kv_cache_n_kv(kv, 97), 100);   // 128 would be past the cache
    ck_assert_int_eq(mg_kv_cache_n_kv(kv, 100), 100);
    mg_kv_cache_free(kv);
}
END_TEST

START_TEST(test_n_kv_without_padding) {
    struct mg_kv_cache * kv = mg_kv_cache_new(1, 16, 4, 1, MG_TYPE_F32, 1);
    for (int p = 1; p <= 16; p++) ck_assert_int_eq(mg_kv_cache_n_kv(kv, p), p);
    mg_kv_cache_free(kv);
}
END_TEST

// 2 (K and V) x layers x KV heads x head_dim x 4 bytes (F32).
START_TEST(test_bytes_per_token_formula) {
    struct mg_kv_cache * kv = mg_kv_cache_new(3, 16, 8, 2, MG_TYPE_F32, 1);
    ck_assert_uint_eq(mg_kv_cache_bytes_per_token(kv), 2 * 3 * 2 * 8 * 4);
    ck_assert_uint_eq(mg_kv_cache_bytes(kv), 2 * 3 * 2 * 8 * 4 * 16);
    size_t tensors = 0;
    for (int l = 0; l < 3; l++) tensors += mg_nbytes(kv->k[l]) + mg_nbytes(kv->v[l]);
    ck_assert_uint_eq(tensors, mg_kv_cache_bytes(kv));
    ck_assert_uint_ge(kv->buf->size, tensors);
    mg_kv_cache_free(kv);
}
END_TEST

// The slots nobody wrote hold 0, never garbage.
START_TEST(test_new_cache_is_zeroed) {
    struct mg_kv_cache * kv = mg_kv_cache_new(2, 8, 4, 2, MG_TYPE_F32, 1);
    for (int l = 0; l < 2; l++) {
        for (int64_t i = 0; i < mg_nelements(kv->k[l]); i++) ck_assert_float_eq(((float *) kv->k[l]->data)[i], 0.0f);
        for (int64_t i = 0; i < mg_nelements(kv->v[l]); i++) ck_assert_float_eq(((float *) kv->v[l]->data)[i], 0.0f);
    }
    mg_kv_cache_free(kv);
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("kv_attention");

    TCase * decode = MG_TCASE(s, "decode", test_cache_equals_recompute_mha, test_cache_equals_recompute_gqa_2,
                                 test_cache_equals_recompute_gqa_4, test_cache_with_padding_equals_recompute);
    tcase_set_timeout(decode, 60);

    MG_TCASE(s, "store", test_store_one_token_writes_its_slot_only, test_store_at_position_zero,
                test_store_at_the_last_position, test_store_a_batch_of_tokens, test_cache_views_read_the_slots);

    MG_TCASE(s, "sizes", test_n_kv_pads_to_a_multiple, test_n_kv_is_capped_at_n_ctx, test_n_kv_without_padding,
                test_bytes_per_token_formula, test_new_cache_is_zeroed);
    return s;
}
