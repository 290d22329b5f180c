//@file 06
// kv_cache.c - the per-layer K/V store and the attention that reads it
// (llama.cpp: llama_kv_cache::cpy_k/cpy_v/get_k/get_v, build_attn_mha).
#include "kv_cache.h"
#include "arena.h"
#include "ops.h"
#include "trace.h"

#include <math.h>
//@+ full shift
#include <stdio.h>
//@- full shift
#include <stdlib.h>

// The element types a cache holds (chapter 09 adds F16: half the bytes).
#if 0 //@old 06..08 kv-f32
static void assert_cache_type(enum mg_type type) {
    MG_ASSERT(type == MG_TYPE_F32 && "the cache is F32 until chapter 09");
}
#endif //@old kv-f32
//@+ 09 kv-f16
static void assert_cache_type(enum mg_type type) {
    MG_ASSERT((type == MG_TYPE_F32 || type == MG_TYPE_F16) && "the cache holds F32 or F16");
}
//@- 09 kv-f16

// A layer's V: {n_ctx, n_embd}, stored transposed, a row per value.
#if 0 //@old 06..09 v-layout
static struct mg_tensor * new_v_tensor(const struct mg_kv_cache * kv, int64_t n_embd) {
    return mg_new_tensor_2d(kv->ctx, kv->type, kv->n_ctx, n_embd);
}
#endif //@old v-layout
//@+ full flash-attn
// full/: or {n_embd, n_ctx}, like K, for flash attention (llama.cpp's v_trans).
// Transposed, each stream's block {S, n_embd} is a matrix of its own
// (one matrix of n_ctx when there is one stream).
static struct mg_tensor * new_v_tensor(const struct mg_kv_cache * kv, int64_t n_embd) {
    const int64_t n_stream = kv->n_stream > 0 ? kv->n_stream : 1;
    return kv->v_trans ? mg_new_tensor_3d(kv->ctx, kv->type, kv->n_ctx / n_stream, n_embd, n_stream)   // a row per value
                       : mg_new_tensor_2d(kv->ctx, kv->type, n_embd, kv->n_ctx);   // like K: a row per position
}
//@- full flash-attn

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

#if 0 //@old 06..09 kv-new
struct mg_kv_cache * mg_kv_cache_new(int n_layer, int n_ctx, int head_dim, int n_head_kv, enum mg_type type,
                                     int n_pad) {
    return kv_cache_create((struct mg_kv_cache) {.n_layer = n_layer, .n_ctx = n_ctx, .head_dim = head_dim,
                                                 .n_head_kv = n_head_kv, .n_pad = n_pad, .type = type});
}
#endif //@old kv-new

//@+ full seqs
// full/: each cell's positions and sequences. After the buffer: a -c too
// large for memory fails there, with its size, before n_ctx cells are made
// (and an allocation that fails is an error, not an abort).
static struct mg_kv_cache * with_cells(struct mg_kv_cache * kv) {
    if (kv == NULL) return NULL;
    kv->cells = malloc((size_t) kv->n_ctx * sizeof(struct mg_kv_cell));
    if (kv->cells == NULL) {
        mg_set_error("cannot allocate %zu bytes for the cells of %d positions",
                     (size_t) kv->n_ctx * sizeof(struct mg_kv_cell), kv->n_ctx);
        mg_kv_cache_free(kv);
        return NULL;
    }
    for (int i = 0; i < kv->n_ctx; i++) kv->cells[i] = (struct mg_kv_cell) {-1, 0, 0};
    return kv;
}
//@- full seqs

//@+ full flash-attn
struct mg_kv_cache * mg_kv_cache_new(int n_layer, int n_ctx, int head_dim, int n_head_kv, enum mg_type type,
                                     int n_pad) {
    return with_cells(kv_cache_create((struct mg_kv_cache) {.n_layer = n_layer, .n_ctx = n_ctx, .head_dim = head_dim,
                                                            .n_head_kv = n_head_kv, .n_pad = n_pad, .type = type,
                                                            .v_trans = true}));
}

struct mg_kv_cache * mg_kv_cache_new_flash(int n_layer, int n_ctx, int head_dim, int n_head_kv, enum mg_type type,
                                           int n_pad) {
    return with_cells(kv_cache_create((struct mg_kv_cache) {.n_layer = n_layer, .n_ctx = n_ctx, .head_dim = head_dim,
                                                            .n_head_kv = n_head_kv, .n_pad = n_pad, .type = type,
                                                            .v_trans = false}));
}
//@- full flash-attn

#if 0 //@old 06..09 kv-free
void mg_kv_cache_free(struct mg_kv_cache * kv) {
    if (kv == NULL) return;
    mg_buffer_free(kv->buf);
    mg_free(kv->ctx);
    free(kv->k);
    free(kv->v);
    free(kv);
}
#endif //@old kv-free
//@+ full seqs
void mg_kv_cache_free(struct mg_kv_cache * kv) {
    if (kv == NULL) return;
    mg_buffer_free(kv->buf);
    mg_free(kv->ctx);
    free(kv->cells);
    free(kv->k);
    free(kv->v);
    free(kv);
}
//@- full seqs

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

//@+ 06 store
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
//@- 06 store

//@+ 09 kv-store-rows
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

#if 0 //@old 09..09 store-rows-v
void mg_kv_cache_store_rows(struct mg_context * ctx, struct mg_cgraph * g, struct mg_kv_cache * kv, int il,
                            struct mg_tensor * k_cur, struct mg_tensor * v_cur, struct mg_tensor * k_idx,
                            struct mg_tensor * v_idx) {
    mg_build_forward_expand(g, mg_format_name(set_token_rows(ctx, kv, kv->k[il], k_cur, k_idx), "k_store-%d", il));
    mg_build_forward_expand(g, mg_format_name(set_v_values(ctx, kv, il, v_cur, v_idx), "v_store-%d", il));
}
#endif //@old store-rows-v
//@+ full flash-attn
void mg_kv_cache_store_rows(struct mg_context * ctx, struct mg_cgraph * g, struct mg_kv_cache * kv, int il,
                            struct mg_tensor * k_cur, struct mg_tensor * v_cur, struct mg_tensor * k_idx,
                            struct mg_tensor * v_idx) {
    mg_build_forward_expand(g, mg_format_name(set_token_rows(ctx, kv, kv->k[il], k_cur, k_idx), "k_store-%d", il));
    // full/: V laid out like K (flash attention) takes the same rows, the same indices.
    struct mg_tensor * v_store = kv->v_trans ? set_v_values(ctx, kv, il, v_cur, v_idx)
                                             : set_token_rows(ctx, kv, kv->v[il], v_cur, k_idx);
    mg_build_forward_expand(g, mg_format_name(v_store, "v_store-%d", il));
}
//@- full flash-attn

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
//@- 09 kv-store-rows

struct mg_tensor * mg_kv_cache_k(struct mg_context * ctx, const struct mg_kv_cache * kv, int il, int n_kv) {
    const struct mg_tensor * k = kv->k[il];
    const size_t es = mg_type_size(kv->type);
    // {head_dim, n_head_kv, n_kv} over the rows, then heads outermost.
    struct mg_tensor * view = mg_view_3d(ctx, kv->k[il], kv->head_dim, kv->n_head_kv, n_kv,
                                         (size_t) kv->head_dim * es, k->nb[1], 0);
    mg_trace(MG_TRACE_KV, "layer %d: read K of %d positions", il, n_kv);
    return mg_format_name(mg_permute(ctx, view, 0, 2, 1, 3), "k-%d", il);
}

#if 0 //@old 06..09 v-view
struct mg_tensor * mg_kv_cache_v(struct mg_context * ctx, const struct mg_kv_cache * kv, int il, int n_kv) {
    const struct mg_tensor * v = kv->v[il];
    struct mg_tensor * view = mg_view_3d(ctx, kv->v[il], n_kv, kv->head_dim, kv->n_head_kv, v->nb[1],
                                         v->nb[1] * (size_t) kv->head_dim, 0);
    mg_trace(MG_TRACE_KV, "layer %d: read V of %d positions", il, n_kv);
    return mg_format_name(view, "v-%d", il);
}
#endif //@old v-view
//@+ full flash-attn
struct mg_tensor * mg_kv_cache_v(struct mg_context * ctx, const struct mg_kv_cache * kv, int il, int n_kv) {
    const struct mg_tensor * v = kv->v[il];
    if (!kv->v_trans) {   // full/'s flash attention: {head_dim, n_kv, n_head_kv}, the shape of K
        struct mg_tensor * rows = mg_view_3d(ctx, kv->v[il], kv->head_dim, kv->n_head_kv, n_kv,
                                             (size_t) kv->head_dim * mg_type_size(kv->type), v->nb[1], 0);
        return mg_format_name(mg_permute(ctx, rows, 0, 2, 1, 3), "v-%d", il);
    }
    struct mg_tensor * view = mg_view_3d(ctx, kv->v[il], n_kv, kv->head_dim, kv->n_head_kv, v->nb[1],
                                         v->nb[1] * (size_t) kv->head_dim, 0);
    mg_trace(MG_TRACE_KV, "layer %d: read V of %d positions", il, n_kv);
    return mg_format_name(view, "v-%d", il);
}
//@- full flash-attn

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

//@+ 06 attn
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
//@- 06 attn

//@+ full seqs
// ---------------------------------------------------------------------------
// Cells: many sequences in one cache (llama.cpp: llama_kv_cells, and the
// mask of llm_graph_input_attn_kv::set_input)
// ---------------------------------------------------------------------------

bool mg_kv_cache_find_cells(const struct mg_kv_cache * kv, int n, int32_t * cells) {
    int found = 0;
    for (int i = 0; i < kv->n_ctx && found < n; i++) {
        if (kv->cells[i].pos < 0) cells[found++] = i;
    }
    return found == n;
}

void mg_kv_cache_fill_store_idx_cells(const struct mg_kv_cache * kv, struct mg_tensor * k_idx, struct mg_tensor * v_idx,
                                      const int32_t * cells) {
    const int64_t n_embd   = (int64_t) kv->head_dim * kv->n_head_kv;
    const int64_t n_tokens = k_idx->ne[0];
    int32_t * k = k_idx->data;
    for (int64_t t = 0; t < n_tokens; t++) k[t] = cells[t];
    if (v_idx == NULL) return;   // a flash-attention cache stores V with k_idx
    int32_t * v = v_idx->data;
    for (int64_t t = 0; t < n_tokens; t++) {
        // Element (cell c of stream s, value i) of the transposed V: s's block, row i, column c.
        const int64_t size = kv->n_ctx / (kv->n_stream > 0 ? kv->n_stream : 1);
        const int64_t s = cells[t] / size, c = cells[t] % size;
        for (int64_t i = 0; i < n_embd; i++) v[t * n_embd + i] = (int32_t) ((s * n_embd + i) * size + c);
    }
}

void mg_kv_cache_fill_mask_seqs(const struct mg_kv_cache * kv, struct mg_tensor * mask, const int32_t * pos,
                                const int32_t * seq, int n_tokens) {
    MG_ASSERT(mask->type == MG_TYPE_F32 && mask->ne[1] >= n_tokens && mask->ne[0] <= kv->n_ctx);
    for (int64_t t = 0; t < mask->ne[1]; t++) {
        float * row = (float *) ((char *) mask->data + t * mask->nb[1]);
        const uint64_t bit = t < n_tokens ? 1ull << seq[t] : 0;
        for (int64_t j = 0; j < mask->ne[0]; j++) {
            const struct mg_kv_cell * c = &kv->cells[j];
            row[j] = (c->seqs & bit) != 0 && c->pos <= pos[t] ? 0.0f : -INFINITY;
        }
    }
}

int mg_kv_cache_cells_end(const struct mg_kv_cache * kv) {
    int end = 0;
    for (int i = 0; i < kv->n_ctx; i++) {
        if (kv->cells[i].pos >= 0) end = i + 1;
    }
    return end;
}

int mg_kv_cache_cells_used(const struct mg_kv_cache * kv) {
    int used = 0;
    for (int i = 0; i < kv->n_ctx; i++) used += kv->cells[i].pos >= 0;
    return used;
}

//@+ full streams
// ---------------------------------------------------------------------------
// Streams: a range of cells per sequence (llama.cpp: kv_unified = false)
// ---------------------------------------------------------------------------

struct mg_kv_cache * mg_kv_cache_new_streams(int n_layer, int n_ctx, int head_dim, int n_head_kv, enum mg_type type,
                                             int n_pad, int n_stream) {
    MG_ASSERT(n_stream >= 1 && n_stream <= MG_MAX_SEQ && n_ctx % n_stream == 0);
    return with_cells(kv_cache_create((struct mg_kv_cache) {.n_layer = n_layer, .n_ctx = n_ctx, .head_dim = head_dim,
                                                            .n_head_kv = n_head_kv, .n_pad = n_pad, .type = type,
                                                            .v_trans = true, .n_stream = n_stream}));
}

int mg_kv_cache_stream_size(const struct mg_kv_cache * kv) {
    return kv->n_ctx / (kv->n_stream > 0 ? kv->n_stream : 1);
}

bool mg_kv_cache_find_cells_seqs(const struct mg_kv_cache * kv, int n, const int32_t * seq, int32_t * cells) {
    const int size = mg_kv_cache_stream_size(kv);
    int       next[MG_MAX_SEQ];   // where each stream's search goes on: a batch's tokens take distinct cells
    for (int s = 0; s < MG_MAX_SEQ; s++) next[s] = s * size;
    for (int t = 0; t < n; t++) {
        const int s = seq[t];
        MG_ASSERT(s >= 0 && s < (kv->n_stream > 0 ? kv->n_stream : 1));
        while (next[s] < (s + 1) * size && kv->cells[next[s]].pos >= 0) next[s]++;
        if (next[s] == (s + 1) * size) return false;
        cells[t] = next[s]++;
    }
    return true;
}

int mg_kv_cache_stream_end(const struct mg_kv_cache * kv, int s) {
    const int size = mg_kv_cache_stream_size(kv);
    int       end  = 0;
    for (int c = 0; c < size; c++) {
        if (kv->cells[s * size + c].pos >= 0) end = c + 1;
    }
    return end;
}

struct mg_tensor * mg_kv_cache_k_streams(struct mg_context * ctx, const struct mg_kv_cache * kv, int il, int n_kv,
                                         int s0, int n_s) {
    const struct mg_tensor * k    = kv->k[il];
    const size_t             size = (size_t) mg_kv_cache_stream_size(kv);
    // {head_dim, n_head_kv, n_kv, n_s}: a stream's rows, then the next stream's S rows on.
    struct mg_tensor * view = mg_view_4d(ctx, kv->k[il], kv->head_dim, kv->n_head_kv, n_kv, n_s,
                                         (size_t) kv->head_dim * mg_type_size(kv->type), k->nb[1], size * k->nb[1],
                                         (size_t) s0 * size * k->nb[1]);
    return mg_format_name(mg_permute(ctx, view, 0, 2, 1, 3), "k-%d", il);
}

struct mg_tensor * mg_kv_cache_v_streams(struct mg_context * ctx, const struct mg_kv_cache * kv, int il, int n_kv,
                                         int s0, int n_s) {
    const struct mg_tensor * v = kv->v[il];   // {S, n_embd, n_stream}
    MG_ASSERT(kv->v_trans);
    struct mg_tensor * view = mg_view_4d(ctx, kv->v[il], n_kv, kv->head_dim, kv->n_head_kv, n_s, v->nb[1],
                                         v->nb[1] * (size_t) kv->head_dim, v->nb[2], (size_t) s0 * v->nb[2]);
    return mg_format_name(view, "v-%d", il);
}

void mg_kv_cache_fill_mask_streams(const struct mg_kv_cache * kv, struct mg_tensor * mask, const int32_t * pos,
                                   const int32_t * seq, int n_tokens, int s0, int n_s) {
    const int size = mg_kv_cache_stream_size(kv);
    const int n_ts = n_tokens / n_s;   // tokens per stream
    MG_ASSERT(mask->type == MG_TYPE_F32 && n_tokens % n_s == 0 && mask->ne[1] >= n_ts && mask->ne[3] == n_s &&
              mask->ne[0] <= size);
    for (int64_t j = 0; j < n_s; j++) {
        const struct mg_kv_cell * cells = kv->cells + (size_t) (s0 + j) * (size_t) size;
        for (int64_t t = 0; t < mask->ne[1]; t++) {
            float *        row = (float *) ((char *) mask->data + t * mask->nb[1] + j * mask->nb[3]);
            const int64_t  i   = j * n_ts + t;   // the token in the batch
            const uint64_t bit = t < n_ts ? 1ull << seq[i] : 0;
            for (int64_t c = 0; c < mask->ne[0]; c++) {
                row[c] = (cells[c].seqs & bit) != 0 && cells[c].pos <= pos[t < n_ts ? i : 0] ? 0.0f : -INFINITY;
            }
        }
    }
}
//@- full streams

static bool in_range(int pos, int p0, int p1) {
    return pos >= p0 && (p1 < 0 || pos < p1);
}

void mg_kv_cache_seq_rm(struct mg_kv_cache * kv, int seq, int p0, int p1) {
    const uint64_t bits = seq < 0 ? ~0ull : 1ull << seq;
    for (int i = 0; i < kv->n_ctx; i++) {
        struct mg_kv_cell * c = &kv->cells[i];
        if (c->pos < 0 || !in_range(c->pos, p0, p1)) continue;
        c->seqs &= ~bits;
        if (c->seqs == 0) *c = (struct mg_kv_cell) {-1, 0, 0};   // no sequence left: the cell is free
    }
}

void mg_kv_cache_seq_cp(struct mg_kv_cache * kv, int src, int dst, int p0, int p1) {
    for (int i = 0; i < kv->n_ctx; i++) {
        struct mg_kv_cell * c = &kv->cells[i];
        if (c->pos >= 0 && (c->seqs >> src & 1) && in_range(c->pos, p0, p1)) c->seqs |= 1ull << dst;
    }
}

void mg_kv_cache_seq_keep(struct mg_kv_cache * kv, int seq) {
    for (int i = 0; i < kv->n_ctx; i++) {
        struct mg_kv_cell * c = &kv->cells[i];
        c->seqs &= 1ull << seq;
        if (c->seqs == 0) *c = (struct mg_kv_cell) {-1, 0, 0};
    }
}

int mg_kv_cache_seq_pos_max(const struct mg_kv_cache * kv, int seq) {
    int max = -1;
    for (int i = 0; i < kv->n_ctx; i++) {
        const struct mg_kv_cell * c = &kv->cells[i];
        if (c->pos > max && (c->seqs >> seq & 1)) max = c->pos;
    }
    return max;
}
//@- full seqs

//@+ full shift
// ---------------------------------------------------------------------------
// Shifting a sequence (llama.cpp: llama_kv_cache::seq_add, llama_kv_cells::
// pos_add, build_graph_shift, build_rope_shift)
// ---------------------------------------------------------------------------

// Everything that can be wrong, checked before any cell changes.
static bool check_seq_add(const struct mg_kv_cache * kv, int seq, int p0, int p1, int delta) {
    if (seq < 0 || seq >= MG_MAX_SEQ) {
        mg_set_error("seq_add: sequence id %d is not in 0..%d", seq, MG_MAX_SEQ - 1);
        return false;
    }
    if (p1 >= 0 && p1 < p0) {
        mg_set_error("seq_add: the range [%d, %d) ends before it starts", p0, p1);
        return false;
    }
    const uint64_t bit = 1ull << seq;
    for (int i = 0; i < kv->n_ctx; i++) {
        const struct mg_kv_cell * c = &kv->cells[i];
        if (c->pos < 0 || !(c->seqs & bit) || !in_range(c->pos, p0, p1)) continue;
        if (c->seqs != bit) {
            mg_set_error("seq_add: position %d of sequence %d is shared with other sequences (cell %d, sequence mask "
                         "0x%llx): moving it would move theirs too; remove it from them first (seq_rm)",
                         c->pos, seq, i, (unsigned long long) c->seqs);
            return false;
        }
        if ((int64_t) c->pos + delta > INT32_MAX || (int64_t) c->shift + delta > INT32_MAX ||
            (int64_t) c->shift + delta < INT32_MIN) {
            mg_set_error("seq_add: position %d + %d overflows", c->pos, delta);
            return false;
        }
    }
    return true;
}

bool mg_kv_cache_seq_add(struct mg_kv_cache * kv, int seq, int p0, int p1, int delta) {
    if (p0 < 0) p0 = 0;   // as llama.cpp: a negative start means from the beginning
    if (!check_seq_add(kv, seq, p0, p1, delta)) return false;
    if (delta == 0) return true;
    int moved = 0, freed = 0;
    for (int i = 0; i < kv->n_ctx; i++) {
        struct mg_kv_cell * c = &kv->cells[i];
        if (c->pos < 0 || !(c->seqs >> seq & 1) || !in_range(c->pos, p0, p1)) continue;
        c->pos += delta;
        c->shift += delta;
        kv->has_shift = true;
        moved++;
        if (c->pos < 0) {   // moved before the start: the cell is dropped, as in pos_add
            *c = (struct mg_kv_cell) {-1, 0, 0};
            freed++;
        }
    }
    char end[16] = "end";
    if (p1 >= 0) snprintf(end, sizeof(end), "%d", p1);
    mg_trace(MG_TRACE_KV, "seq_add: sequence %d, positions [%d, %s) moved by %d: %d cells, %d of them freed", seq, p0,
             end, delta, moved, freed);
    return true;
}

// One layer's keys in cells 0..n-1, turned by each cell's shift. RoPE turns
// pair i of a key at position p by p * theta_i; turning it again by
// d * theta_i gives the turn of position p + d, which is what a key computed
// at p + d would have. llama.cpp turns F32 keys in place
// (ggml_rope_ext_inplace); mg_rope always makes a new tensor, so the turned
// rows land in the compute buffer and are copied back.
static struct mg_tensor * rotate_keys(struct mg_context * ctx, const struct mg_kv_cache * kv, int il, int64_t n,
                                      struct mg_tensor * shift, struct mg_tensor * freq_factors, int n_rot,
                                      enum mg_rope_mode mode, float freq_base, float freq_scale) {
    const struct mg_tensor * cache = kv->k[il];
    struct mg_tensor * k = mg_view_3d(ctx, kv->k[il], kv->head_dim, kv->n_head_kv, n,
                                      (size_t) kv->head_dim * mg_type_size(kv->type), cache->nb[1], 0);
    struct mg_tensor * k32 = k->type == MG_TYPE_F32 ? k : mg_cast(ctx, k, MG_TYPE_F32);   // F16 -> F32
    struct mg_tensor * rot = mg_rope_ext(ctx, k32, shift, freq_factors, n_rot, mode, freq_base, freq_scale);
    mg_format_name(rot, "k_shifted-%d", il);
    return mg_format_name(mg_cpy(ctx, rot, k), "k_shift_store-%d", il);   // back into the cache, in its type
}

struct mg_tensor * mg_kv_cache_build_shift(struct mg_context * ctx, struct mg_cgraph * g, struct mg_kv_cache * kv,
                                           struct mg_tensor * freq_factors, int n_rot, enum mg_rope_mode mode,
                                           float freq_base, float freq_scale) {
    // llama.cpp turns every cell; the cells past the last used one hold
    // nothing to turn, so these stop there.
    const int64_t      n     = mg_kv_cache_cells_end(kv) > 0 ? mg_kv_cache_cells_end(kv) : 1;
    struct mg_tensor * shift = mg_new_node(ctx, MG_TYPE_I32, 1, (const int64_t[]) {n});
    shift->flags |= MG_TENSOR_FLAG_INPUT;
    mg_set_name(shift, "k_shift");
    for (int il = 0; il < kv->n_layer; il++) {
        mg_build_forward_expand(g, rotate_keys(ctx, kv, il, n, shift, freq_factors, n_rot, mode, freq_base, freq_scale));
    }
    return shift;
}

void mg_kv_cache_fill_shift(const struct mg_kv_cache * kv, struct mg_tensor * shift) {
    MG_ASSERT(shift->type == MG_TYPE_I32 && shift->ne[0] <= kv->n_ctx);
    int32_t * d = shift->data;
    for (int64_t i = 0; i < shift->ne[0]; i++) d[i] = kv->cells[i].pos < 0 ? 0 : kv->cells[i].shift;
}

bool mg_kv_cache_shift_pending(const struct mg_kv_cache * kv) {
    for (int i = 0; kv->has_shift && i < kv->n_ctx; i++) {
        if (kv->cells[i].pos >= 0 && kv->cells[i].shift != 0) return true;
    }
    return false;
}

void mg_kv_cache_reset_shift(struct mg_kv_cache * kv) {
    for (int i = 0; i < kv->n_ctx; i++) kv->cells[i].shift = 0;
    kv->has_shift = false;
}
//@- full shift
