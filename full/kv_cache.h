//@file 06
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
//@+ full shift
#include "ops.h"
//@- full shift

//@+ full seqs
// Many sequences in one cache (llama.cpp: llama_kv_cells). Up to chapter 09
// cell i simply holds position i of the one sequence. A server decodes many
// sequences at once, so in full/ a cell records which position it holds and
// for which sequences: a token attends to the cells of its own sequences at
// positions up to its own, and a prompt prefix copied to several sequences is
// stored once, its cells tagged with all of them.
enum { MG_MAX_SEQ = 64 };   // sequence ids 0..63: a cell's set is one uint64_t

struct mg_kv_cell {
    int32_t  pos;     // the position it holds, or -1 when empty
    uint64_t seqs;    // bit s set: sequence s has this position here
    int32_t  shift;   // how far pos moved since its key was last rotated (mg_kv_cache_seq_add)
};
//@- full seqs

struct mg_kv_cache {
    int          n_layer;
    int          n_ctx;        // positions it can hold
    int          head_dim;
    int          n_head_kv;
    int          n_pad;        // n_kv is rounded up to a multiple of this (llama.cpp uses 256)
    enum mg_type type;         // F32 (or F16 from chapter 09)
    //@+ full flash-attn
    bool         v_trans;      // V stored transposed (plain attention) or like K (flash attention)
    //@- full flash-attn
    //@+ full streams
    int          n_stream;     // ranges of n_ctx / n_stream cells, one per sequence (1: one pool for all)
    //@- full streams

    struct mg_context * ctx;   // the headers of k[] and v[]
    struct mg_buffer *  buf;   // their bytes
    struct mg_tensor ** k;     // [n_layer] {head_dim * n_head_kv, n_ctx}
    struct mg_tensor ** v;     // [n_layer] {n_ctx, head_dim * n_head_kv}, transposed
    //@+ full seqs
    struct mg_kv_cell * cells; // [n_ctx] which position of which sequences each cell holds
    //@- full seqs
    //@+ full shift
    bool                has_shift;   // some cell's shift is not 0: its key must be rotated again
    //@- full shift
};

// NULL, with mg_last_error(), if the memory cannot be had.
struct mg_kv_cache * mg_kv_cache_new(int n_layer, int n_ctx, int head_dim, int n_head_kv, enum mg_type type, int n_pad);
void                 mg_kv_cache_free(struct mg_kv_cache * kv);
//@+ full flash-attn
// A cache for flash attention: V is stored like K, one row per position,
// because mg_flash_attn reads one value row per key (llama.cpp does the same).
struct mg_kv_cache * mg_kv_cache_new_flash(int n_layer, int n_ctx, int head_dim, int n_head_kv, enum mg_type type,
                                           int n_pad);
//@- full flash-attn

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

//@+ 09 kv-store-rows
// The same store, with the positions read from inputs when the graph runs
// (mg_set_rows), so that one built graph serves every decode step.
// k_idx: I32 {T}; v_idx: I32 {head_dim * n_head_kv * T}; fill them with
// mg_kv_cache_fill_store_idx before each compute.
void mg_kv_cache_store_rows(struct mg_context * ctx, struct mg_cgraph * g, struct mg_kv_cache * kv, int il,
                            struct mg_tensor * k_cur, struct mg_tensor * v_cur, struct mg_tensor * k_idx,
                            struct mg_tensor * v_idx);
void mg_kv_cache_fill_store_idx(const struct mg_kv_cache * kv, struct mg_tensor * k_idx, struct mg_tensor * v_idx,
                                int pos0);
//@- 09 kv-store-rows

// Views of layer il's first n_kv positions, shaped for mg_attn:
// K as {head_dim, n_kv, n_head_kv}, V as {n_kv, head_dim, n_head_kv}.
struct mg_tensor * mg_kv_cache_k(struct mg_context * ctx, const struct mg_kv_cache * kv, int il, int n_kv);
struct mg_tensor * mg_kv_cache_v(struct mg_context * ctx, const struct mg_kv_cache * kv, int il, int n_kv);

// The causal mask for a batch of n_tokens at pos0..: mask is F32 {n_kv, >= n_tokens};
// row t lets token t see positions 0 .. pos0+t and hides the rest with -INFINITY.
void mg_kv_cache_fill_mask(struct mg_tensor * mask, int pos0, int n_tokens);

//@+ full seqs
// Cells. A batch's tokens get the first empty cells, in order (first fit);
// false if fewer than n are empty. Tagging them with (pos, seq) is the
// caller's next step, before the mask is filled, so tokens of one batch see
// the earlier tokens of their own sequence in the same batch.
bool mg_kv_cache_find_cells(const struct mg_kv_cache * kv, int n, int32_t * cells);
void mg_kv_cache_fill_store_idx_cells(const struct mg_kv_cache * kv, struct mg_tensor * k_idx, struct mg_tensor * v_idx,
                                      const int32_t * cells);
// Row t of mask: 0 for the cells of sequence seq[t] at positions <= pos[t], -INFINITY elsewhere.
void mg_kv_cache_fill_mask_seqs(const struct mg_kv_cache * kv, struct mg_tensor * mask, const int32_t * pos,
                                const int32_t * seq, int n_tokens);
int  mg_kv_cache_cells_end(const struct mg_kv_cache * kv);   // the last used cell + 1
int  mg_kv_cache_cells_used(const struct mg_kv_cache * kv);
// The sequence operations of llama.cpp's llama_memory_seq_*: positions
// p0 <= pos < p1 (p1 < 0: no end) of sequence seq (seq < 0: every sequence).
void mg_kv_cache_seq_rm(struct mg_kv_cache * kv, int seq, int p0, int p1);
void mg_kv_cache_seq_cp(struct mg_kv_cache * kv, int src, int dst, int p0, int p1);   // shares cells, copies nothing
void mg_kv_cache_seq_keep(struct mg_kv_cache * kv, int seq);                         // drop every other sequence
int  mg_kv_cache_seq_pos_max(const struct mg_kv_cache * kv, int seq);                // -1 when it has none
//@- full seqs

//@+ full streams
// Per-sequence streams (llama.cpp: llama_kv_cache with kv_unified = false,
// which llama-batched-bench and llama-server use when n_seq_max > 1). The
// cells are n_stream equal ranges, and sequence s lives in range s alone: its
// tokens take cells there, and attention over stream s reads that range and
// nothing else, instead of every cell of a shared pool with the other
// sequences' masked out. Transposed V is one {S, n_embd} block per stream
// (S = n_ctx / n_stream), so its rows are S long. A graph attends over
// streams s0 .. s0+n_s-1 at once as 4-D views, one matrix per stream.
// n_stream = 1 is the one pool above, cell for cell and byte for byte.
struct mg_kv_cache * mg_kv_cache_new_streams(int n_layer, int n_ctx, int head_dim, int n_head_kv, enum mg_type type,
                                             int n_pad, int n_stream);
int  mg_kv_cache_stream_size(const struct mg_kv_cache * kv);   // S: cells per stream
// Each token's cell in its own sequence's stream (seq[t] < n_stream), first
// fit, in order; false if some stream has too few empty cells.
bool mg_kv_cache_find_cells_seqs(const struct mg_kv_cache * kv, int n, const int32_t * seq, int32_t * cells);
// How many cells of stream s a graph must read: its last used cell + 1,
// counted from the stream's start.
int  mg_kv_cache_stream_end(const struct mg_kv_cache * kv, int s);
// Views of layer il's first n_kv cells of streams s0 .. s0+n_s-1, shaped for
// attention per stream: K {head_dim, n_kv, n_head_kv, n_s}; V transposed
// {n_kv, head_dim, n_head_kv, n_s}.
struct mg_tensor * mg_kv_cache_k_streams(struct mg_context * ctx, const struct mg_kv_cache * kv, int il, int n_kv,
                                         int s0, int n_s);
struct mg_tensor * mg_kv_cache_v_streams(struct mg_context * ctx, const struct mg_kv_cache * kv, int il, int n_kv,
                                         int s0, int n_s);
// The mask of a batch of n_s streams' tokens, n_tokens / n_s of each, stream
// by stream (token j * T_s + t is stream s0 + j's t-th): F32 {n_kv, >= T_s, 1, n_s};
// row t of matrix j is 0 for the cells of stream s0 + j that hold seq[] of
// that token at positions <= its pos[], -INFINITY elsewhere.
void mg_kv_cache_fill_mask_streams(const struct mg_kv_cache * kv, struct mg_tensor * mask, const int32_t * pos,
                                   const int32_t * seq, int n_tokens, int s0, int n_s);
//@- full streams

//@+ full shift
// Shifting a sequence (llama.cpp: llama_kv_cache::seq_add and the K-shift).
// Positions p0 <= pos < p1 (p0 < 0: from 0; p1 < 0: to the end) of sequence
// seq move by delta; a cell whose position becomes negative is freed. Only
// the cells' numbers change here: each cell adds delta to its shift and
// has_shift is set, and the cached keys, which RoPE rotated by the old
// position, are rotated by the shift before the next decode (the graph
// below). False, with mg_last_error() and nothing changed, for a bad
// sequence id, p1 < p0, a position that would overflow, or a cell the
// sequence shares with another one (llama.cpp moves such a cell for every
// sequence that has it; we refuse, since it would move the others' too).
bool mg_kv_cache_seq_add(struct mg_kv_cache * kv, int seq, int p0, int p1, int delta);

// Add to g the K-shift of every layer (llama.cpp: build_graph_shift): the
// cached keys of cells 0 .. cells_end-1, viewed as {head_dim, n_head_kv,
// cells}, turned by RoPE with the model's n_rot, mode, base, scale and
// frequency factors (Llama 3's rope_freqs, or NULL), and
// "positions" = each cell's shift, and written back. F16 keys are cast to
// F32, turned and stored back (mg_rope reads F32). V is not touched.
// Returns the I32 {cells} input to fill with mg_kv_cache_fill_shift.
struct mg_tensor * mg_kv_cache_build_shift(struct mg_context * ctx, struct mg_cgraph * g, struct mg_kv_cache * kv,
                                           struct mg_tensor * freq_factors, int n_rot, enum mg_rope_mode mode,
                                           float freq_base, float freq_scale);
void mg_kv_cache_fill_shift(const struct mg_kv_cache * kv, struct mg_tensor * shift);   // 0 for empty cells
void mg_kv_cache_reset_shift(struct mg_kv_cache * kv);                                  // after the graph ran
// Is any used cell's shift not 0? (has_shift may outlive the cells it was
// set for: removing them leaves nothing to turn.)
bool mg_kv_cache_shift_pending(const struct mg_kv_cache * kv);
//@- full shift

// softmax(K^T Q * scale + mask) V per head, heads grouped over the KV heads
// (grouped-query attention: q head h reads kv head h / (H / Hkv)).
// q: {head_dim, H, T}, k: {head_dim, n_kv, Hkv}, v: {n_kv, head_dim, Hkv}. Returns {head_dim*H, T}.
struct mg_tensor * mg_attn(struct mg_context * ctx, struct mg_tensor * q, struct mg_tensor * k, struct mg_tensor * v,
                           struct mg_tensor * mask, float scale);
