// Generated from full/kv_cache.c by tools/chapgen. In a class, edit this copy freely (make chapters will not overwrite your edits); to change the engine, edit full/kv_cache.c and run make chapters.
// kv_cache.c - the per-layer K/V store and the attention that reads it
// (llama.cpp: llama_kv_cache::cpy_k/cpy_v/get_k/get_v, build_attn_mha).
#include "kv_cache.h"
#include "arena.h"
#include "ops.h"
#include "trace.h"

#include <math.h>
#include <stdlib.h>

// The element types a cache holds (chapter 09 adds F16: half the bytes).
static void assert_cache_type(enum mg_type type) {
    MG_ASSERT((type == MG_TYPE_F32 || type == MG_TYPE_F16) && "the cache holds F32 or F16");
}

// A layer's V: {n_ctx, n_embd}, stored transposed, a row per value.
static struct mg_tensor * new_v_tensor(const struct mg_kv_cache * kv, int64_t n_embd) {
    return mg_new_tensor_2d(kv->ctx, kv->type, kv->n_ctx, n_embd);
}

// A cache of the sizes in `shape`: each layer's K and V headers in a no_alloc
// context, then one buffer for all layers' bytes (llama_kv_cache's constructor).
static struct mg_kv_cache * kv_cache_create(struct mg_kv_cache shape) {
    assert_cache_type(shape.type);
    struct mg_kv_cache * kv = calloc(1, sizeof(*kv));
    MG_ASSERT(kv != NULL);
    *kv = shape;
    kv->n_pad = shape.n_pad > 0 ? shape.n_pad : 1;
    kv->ctx = mg_init((struct mg_init_params) {.mem_size = (size_t) (2 * kv->n_layer) * mg_tensor_overhead(),
                                               .no_alloc = true});
    kv->k = calloc((size_t) kv->n_layer, sizeof(struct mg_tensor *));
    kv->v = calloc((size_t) kv->n_layer, sizeof(struct mg_tensor *));
    MG_ASSERT(kv->ctx != NULL && kv->k != NULL && kv->v != NULL);
    const int64_t n_embd = (int64_t) kv->head_dim * kv->n_head_kv;
    for (int il = 0; il < kv->n_layer; il++) {
        kv->k[il] = mg_format_name(mg_new_tensor_2d(kv->ctx, kv->type, n_embd, kv->n_ctx), "cache_k_l%d", il);
        kv->v[il] = mg_format_name(new_v_tensor(kv, n_embd), "cache_v_l%d", il);
    }
    kv->buf = mg_alloc_ctx_tensors(kv->ctx);   // zeroed, so unwritten positions hold 0, never garbage
    if (kv->buf == NULL) {
        mg_kv_cache_free(kv);
        return NULL;
    }
    mg_trace(MG_TRACE_KV, "cache: %d layers x %d positions x (K %lld + V %lld) %s = %zu bytes", kv->n_layer,
             kv->n_ctx, (long long) n_embd, (long long) n_embd, mg_type_name(kv->type), mg_kv_cache_bytes(kv));
    return kv;
}

struct mg_kv_cache * mg_kv_cache_new(int n_layer, int n_ctx, int head_dim, int n_head_kv, enum mg_type type,
                                     int n_pad) {
    return kv_cache_create((struct mg_kv_cache) {.n_layer = n_layer, .n_ctx = n_ctx, .head_dim = head_dim,
                                                 .n_head_kv = n_head_kv, .n_pad = n_pad, .type = type});
}

void mg_kv_cache_free(struct mg_kv_cache * kv) {
    if (kv == NULL) return;
    mg_buffer_free(kv->buf);
    mg_free(kv->ctx);
    free(kv->k);
    free(kv->v);
    free(kv);
}

size_t mg_kv_cache_bytes(const struct mg_kv_cache * kv) {
    return mg_kv_cache_bytes_per_token(kv) * (size_t) kv->n_ctx;
}

// 2 (K and V) x layers x KV heads x head_dim x bytes per element.
size_t mg_kv_cache_bytes_per_token(const struct mg_kv_cache * kv) {
    return 2 * (size_t) kv->n_layer * (size_t) kv->n_head_kv * (size_t) kv->head_dim * mg_type_size(kv->type);
}

int mg_kv_cache_n_kv(const struct mg_kv_cache * kv, int pos_end) {
    const int n_kv = (pos_end + kv->n_pad - 1) / kv->n_pad * kv->n_pad;
    return n_kv < kv->n_ctx ? n_kv : kv->n_ctx;
}

void mg_kv_cache_store(struct mg_context * ctx, struct mg_cgraph * g, struct mg_kv_cache * kv, int il,
                       struct mg_tensor * k_cur, struct mg_tensor * v_cur, int pos0) {
    const int64_t n_embd   = (int64_t) kv->head_dim * kv->n_head_kv;
    const int64_t n_tokens = k_cur->ne[2];
    MG_ASSERT(mg_nelements(k_cur) == n_embd * n_tokens && mg_nelements(v_cur) == n_embd * n_tokens);
    MG_ASSERT(pos0 >= 0 && pos0 + n_tokens <= kv->n_ctx && "the batch does not fit in the cache");

    // K: rows pos0 .. pos0+T-1 of {n_embd, n_ctx}, one row per token.
    struct mg_tensor * k_slots = mg_view_2d(ctx, kv->k[il], n_embd, n_tokens, kv->k[il]->nb[1],
                                            (size_t) pos0 * kv->k[il]->nb[1]);
    mg_build_forward_expand(g, mg_format_name(mg_cpy(ctx, k_cur, k_slots), "k_store-%d", il));

    // V is stored transposed: token t's values go down column pos0+t.
    struct mg_tensor * v_slots = mg_view_2d(ctx, kv->v[il], n_tokens, n_embd, kv->v[il]->nb[1],
                                            (size_t) pos0 * mg_type_size(kv->type));
    struct mg_tensor * v_t = mg_transpose(ctx, mg_reshape_2d(ctx, v_cur, n_embd, n_tokens));
    mg_build_forward_expand(g, mg_format_name(mg_cpy(ctx, v_t, v_slots), "v_store-%d", il));

    mg_trace(MG_TRACE_KV, "layer %d: store K,V of positions %d..%lld (%zu bytes)", il, pos0,
             (long long) (pos0 + n_tokens - 1), (size_t) n_tokens * 2 * (size_t) n_embd * mg_type_size(kv->type));
}

// Rows of cur, a token's n_embd values each, written to rows idx[t] of
// cache (ggml_set_rows): K's store, token t's row to row k_idx[t].
static struct mg_tensor * set_token_rows(struct mg_context * ctx, const struct mg_kv_cache * kv,
                                         struct mg_tensor * cache, struct mg_tensor * cur, struct mg_tensor * idx) {
    const int64_t n_embd = (int64_t) kv->head_dim * kv->n_head_kv;
    return mg_set_rows(ctx, cache, mg_reshape_2d(ctx, cur, n_embd, cur->ne[2]), idx);
}

// V is transposed, so each value is a "row" of one element: value i of
// token t goes to element i*n_ctx + pos of the flattened cache.
static struct mg_tensor * set_v_values(struct mg_context * ctx, const struct mg_kv_cache * kv, int il,
                                       struct mg_tensor * v_cur, struct mg_tensor * v_idx) {
    const int64_t n_embd = (int64_t) kv->head_dim * kv->n_head_kv;
    struct mg_tensor * v_cache = mg_reshape_2d(ctx, kv->v[il], 1, n_embd * kv->n_ctx);
    struct mg_tensor * v_vals  = mg_reshape_2d(ctx, v_cur, 1, n_embd * v_cur->ne[2]);
    return mg_set_rows(ctx, v_cache, v_vals, v_idx);
}

void mg_kv_cache_store_rows(struct mg_context * ctx, struct mg_cgraph * g, struct mg_kv_cache * kv, int il,
                            struct mg_tensor * k_cur, struct mg_tensor * v_cur, struct mg_tensor * k_idx,
                            struct mg_tensor * v_idx) {
    mg_build_forward_expand(g, mg_format_name(set_token_rows(ctx, kv, kv->k[il], k_cur, k_idx), "k_store-%d", il));
    mg_build_forward_expand(g, mg_format_name(set_v_values(ctx, kv, il, v_cur, v_idx), "v_store-%d", il));
}

// Row t of K goes to position pos0 + t.
static void fill_k_idx(struct mg_tensor * k_idx, int pos0) {
    int32_t * k = k_idx->data;
    for (int64_t t = 0; t < k_idx->ne[0]; t++) k[t] = (int32_t) (pos0 + t);
}

// Value i of token t goes to element i*n_ctx + pos0 + t of the transposed V.
static void fill_v_idx(const struct mg_kv_cache * kv, struct mg_tensor * v_idx, int pos0, int64_t n_tokens) {
    if (v_idx == NULL) return;   // no V index: full/'s flash-attention cache stores V by k_idx
    const int64_t n_embd = (int64_t) kv->head_dim * kv->n_head_kv;
    MG_ASSERT(v_idx->ne[0] == n_embd * n_tokens);
    int32_t * v = v_idx->data;
    for (int64_t t = 0; t < n_tokens; t++) {
        for (int64_t i = 0; i < n_embd; i++) v[t * n_embd + i] = (int32_t) (i * kv->n_ctx + pos0 + t);
    }
}

void mg_kv_cache_fill_store_idx(const struct mg_kv_cache * kv, struct mg_tensor * k_idx, struct mg_tensor * v_idx,
                                int pos0) {
    const int64_t n_tokens = k_idx->ne[0];
    MG_ASSERT(pos0 >= 0 && pos0 + n_tokens <= kv->n_ctx);
    fill_k_idx(k_idx, pos0);
    mg_trace(MG_TRACE_KV, "store K,V of positions %d..%lld", pos0, (long long) (pos0 + n_tokens - 1));
    fill_v_idx(kv, v_idx, pos0, n_tokens);
}

struct mg_tensor * mg_kv_cache_k(struct mg_context * ctx, const struct mg_kv_cache * kv, int il, int n_kv) {
    const struct mg_tensor * k = kv->k[il];
    const size_t es = mg_type_size(kv->type);
    // {head_dim, n_head_kv, n_kv} over the rows, then heads outermost.
    struct mg_tensor * view = mg_view_3d(ctx, kv->k[il], kv->head_dim, kv->n_head_kv, n_kv,
                                         (size_t) kv->head_dim * es, k->nb[1], 0);
    mg_trace(MG_TRACE_KV, "layer %d: read K of %d positions", il, n_kv);
    return mg_format_name(mg_permute(ctx, view, 0, 2, 1, 3), "k-%d", il);
}

struct mg_tensor * mg_kv_cache_v(struct mg_context * ctx, const struct mg_kv_cache * kv, int il, int n_kv) {
    const struct mg_tensor * v = kv->v[il];
    struct mg_tensor * view = mg_view_3d(ctx, kv->v[il], n_kv, kv->head_dim, kv->n_head_kv, v->nb[1],
                                         v->nb[1] * (size_t) kv->head_dim, 0);
    mg_trace(MG_TRACE_KV, "layer %d: read V of %d positions", il, n_kv);
    return mg_format_name(view, "v-%d", il);
}

void mg_kv_cache_fill_mask(struct mg_tensor * mask, int pos0, int n_tokens) {
    MG_ASSERT(mask->type == MG_TYPE_F32 && mask->ne[1] >= n_tokens);
    for (int64_t t = 0; t < mask->ne[1]; t++) {
        float * row = (float *) ((char *) mask->data + t * mask->nb[1]);
        for (int64_t j = 0; j < mask->ne[0]; j++) {
            // Token t sits at position pos0+t and may see itself and everything before.
            row[j] = t < n_tokens && j <= pos0 + t ? 0.0f : -INFINITY;
        }
    }
}

struct mg_tensor * mg_attn(struct mg_context * ctx, struct mg_tensor * q, struct mg_tensor * k, struct mg_tensor * v,
                           struct mg_tensor * mask, float scale) {
    const int64_t head_dim = q->ne[0], n_head = q->ne[1], n_tokens = q->ne[2];
    // Heads outermost, so that each head is one matrix of mul_mat's batch.
    struct mg_tensor * qh  = mg_permute(ctx, q, 0, 2, 1, 3);             // {head_dim, T, H}
    struct mg_tensor * kq  = mg_mul_mat(ctx, k, qh);                     // {n_kv, T, H}: every score
    kq = mg_soft_max_ext(ctx, kq, mask, scale);                          // each row: a distribution
    struct mg_tensor * kqv = mg_mul_mat(ctx, v, kq);                     // {head_dim, T, H}
    struct mg_tensor * out = mg_cont(ctx, mg_permute(ctx, kqv, 0, 2, 1, 3));   // {head_dim, H, T}
    return mg_reshape_2d(ctx, out, head_dim * n_head, n_tokens);
}
