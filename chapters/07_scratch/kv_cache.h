// Generated from full/kv_cache.h by tools/chapgen. In a class, edit this copy freely (make chapters will not overwrite your edits); to change the engine, edit full/kv_cache.h and run make chapters.
// kv_cache.h - remember every position's keys and values, so that a new
// token attends over them without recomputing them.
//
//     struct mg_kv_cache * kv = mg_kv_cache_new(n_layer, n_ctx, head_dim, n_head_kv, MG_TYPE_F32, 1);
//     // per layer, in the graph of a batch of tokens at positions pos0 .. pos0+T-1:
//     mg_kv_cache_store(ctx, g, kv, il, k_cur, v_cur, pos0);          // write K and V into their slots
//     struct mg_tensor * k = mg_kv_cache_k(ctx, kv, il, n_kv);       // read positions 0 .. n_kv-1
//     struct mg_tensor * v = mg_kv_cache_v(ctx, kv, il, n_kv);
//     struct mg_tensor * out = mg_attn(ctx, q, k, v, mask, 1.0f / sqrtf(head_dim));
//
// Attention at position p needs the keys and values of positions 0..p. They
// do not change once computed (a token never sees the future), so computing
// them again at every step is pure waste: O(p) projections per step, O(n^2)
// in all. The cache keeps them, and a decode step computes one token's K and
// V and reads the rest (llama.cpp: llama_kv_cache, build_attn_mha).
//
// Layout (llama.cpp's, without flash attention): per layer, K is {n_embd_k,
// n_ctx} - one row per position - and V is stored transposed, {n_ctx,
// n_embd_v}, so that the weighted sum P V reads V in rows too.
#pragma once

#include "graph.h"

struct mg_kv_cache {
    int          n_layer;
    int          n_ctx;        // positions it can hold
    int          head_dim;
    int          n_head_kv;
    int          n_pad;        // n_kv is rounded up to a multiple of this (llama.cpp uses 256)
    enum mg_type type;         // F32 (or F16 from chapter 09)

    struct mg_context * ctx;   // the headers of k[] and v[]
    struct mg_buffer *  buf;   // their bytes
    struct mg_tensor ** k;     // [n_layer] {head_dim * n_head_kv, n_ctx}
    struct mg_tensor ** v;     // [n_layer] {n_ctx, head_dim * n_head_kv}, transposed
};

// NULL, with mg_last_error(), if the memory cannot be had.
struct mg_kv_cache * mg_kv_cache_new(int n_layer, int n_ctx, int head_dim, int n_head_kv, enum mg_type type, int n_pad);
void                 mg_kv_cache_free(struct mg_kv_cache * kv);

size_t mg_kv_cache_bytes(const struct mg_kv_cache * kv);             // all of it
size_t mg_kv_cache_bytes_per_token(const struct mg_kv_cache * kv);   // K and V of one position, all layers

// How many positions a batch ending at position pos_end-1 attends over:
// pos_end rounded up to n_pad (the extra ones are masked), at most n_ctx.
int mg_kv_cache_n_kv(const struct mg_kv_cache * kv, int pos_end);

// Add to g the copies of k_cur and v_cur ({head_dim, n_head_kv, T}) into
// layer il's slots pos0 .. pos0+T-1. They are expanded into g right away, so
// they run before anything built afterwards reads the cache.
void mg_kv_cache_store(struct mg_context * ctx, struct mg_cgraph * g, struct mg_kv_cache * kv, int il,
                       struct mg_tensor * k_cur, struct mg_tensor * v_cur, int pos0);

// Views of layer il's first n_kv positions, shaped for mg_attn:
// K as {head_dim, n_kv, n_head_kv}, V as {n_kv, head_dim, n_head_kv}.
struct mg_tensor * mg_kv_cache_k(struct mg_context * ctx, const struct mg_kv_cache * kv, int il, int n_kv);
struct mg_tensor * mg_kv_cache_v(struct mg_context * ctx, const struct mg_kv_cache * kv, int il, int n_kv);

// The causal mask for a batch of n_tokens at pos0..: mask is F32 {n_kv, >= n_tokens};
// row t lets token t see positions 0 .. pos0+t and hides the rest with -INFINITY.
void mg_kv_cache_fill_mask(struct mg_tensor * mask, int pos0, int n_tokens);

// softmax(K^T Q * scale + mask) V per head, heads grouped over the KV heads
// (grouped-query attention: q head h reads kv head h / (H / Hkv)).
// q: {head_dim, H, T}, k: {head_dim, n_kv, Hkv}, v: {n_kv, head_dim, Hkv}. Returns {head_dim*H, T}.
struct mg_tensor * mg_attn(struct mg_context * ctx, struct mg_tensor * q, struct mg_tensor * k, struct mg_tensor * v,
                           struct mg_tensor * mask, float scale);
