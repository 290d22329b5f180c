//@file 03
// ops.h - lazy operations: each call records what to compute, nothing more.
//
//     struct mg_tensor * wx  = mg_mul_mat(ctx, W, x);    // no arithmetic happens here:
//     struct mg_tensor * h   = mg_add(ctx, wx, b);       // each call returns a tensor whose
//     struct mg_tensor * out = mg_relu(ctx, h);          // op and src[] say how to make it
//     mg_compute(ctx, out);                              // ... and now it is computed
//
// Building first and computing later is ggml's central idea (ggml.h, "lazy"
// graphs): the whole computation is known before the first multiply, so it can
// be ordered (chapter 04), given memory cleverly (chapter 05) and split across
// threads (chapter 08). Computing it again for new inputs costs no rebuilding.
//
// Shapes follow ggml. ne[0] is the row length. Binary ops broadcast b over a
// when every a->ne[i] is a multiple of b->ne[i] (a bias row added to every row).
// mg_mul_mat(a, b) multiplies over ne[0]: a is {K, M}, b is {K, N}, the result
// is {M, N} and holds every dot product of a row of a with a row of b, that is
// (a^T b) in column-major terms, or "W x" when a holds W's rows.
//
// Each op X also has X_inplace, which writes its result over its first
// operand (the result is a view of it) and so needs no new memory.
#pragma once

#include "tensor.h"

// Element-wise arithmetic: a op b, b broadcast over a.
struct mg_tensor * mg_add        (struct mg_context * ctx, struct mg_tensor * a, struct mg_tensor * b);
struct mg_tensor * mg_add_inplace(struct mg_context * ctx, struct mg_tensor * a, struct mg_tensor * b);
struct mg_tensor * mg_sub        (struct mg_context * ctx, struct mg_tensor * a, struct mg_tensor * b);
struct mg_tensor * mg_sub_inplace(struct mg_context * ctx, struct mg_tensor * a, struct mg_tensor * b);
struct mg_tensor * mg_mul        (struct mg_context * ctx, struct mg_tensor * a, struct mg_tensor * b);
struct mg_tensor * mg_mul_inplace(struct mg_context * ctx, struct mg_tensor * a, struct mg_tensor * b);
struct mg_tensor * mg_div        (struct mg_context * ctx, struct mg_tensor * a, struct mg_tensor * b);
struct mg_tensor * mg_div_inplace(struct mg_context * ctx, struct mg_tensor * a, struct mg_tensor * b);

// s * a
struct mg_tensor * mg_scale        (struct mg_context * ctx, struct mg_tensor * a, float s);
struct mg_tensor * mg_scale_inplace(struct mg_context * ctx, struct mg_tensor * a, float s);

// Element-wise functions of one tensor.
struct mg_tensor * mg_sqr         (struct mg_context * ctx, struct mg_tensor * a);
struct mg_tensor * mg_sqr_inplace (struct mg_context * ctx, struct mg_tensor * a);
struct mg_tensor * mg_sqrt        (struct mg_context * ctx, struct mg_tensor * a);
struct mg_tensor * mg_sqrt_inplace(struct mg_context * ctx, struct mg_tensor * a);
struct mg_tensor * mg_relu        (struct mg_context * ctx, struct mg_tensor * a);   // max(x, 0)
struct mg_tensor * mg_relu_inplace(struct mg_context * ctx, struct mg_tensor * a);
struct mg_tensor * mg_silu        (struct mg_context * ctx, struct mg_tensor * a);   // x / (1 + e^-x)
struct mg_tensor * mg_silu_inplace(struct mg_context * ctx, struct mg_tensor * a);
struct mg_tensor * mg_gelu        (struct mg_context * ctx, struct mg_tensor * a);   // tanh approximation
struct mg_tensor * mg_gelu_inplace(struct mg_context * ctx, struct mg_tensor * a);

// {n, rows...} -> {1, rows...}: the sum of each row.
struct mg_tensor * mg_sum_rows(struct mg_context * ctx, struct mg_tensor * a);

// Each row divided by its root mean square: x / sqrt(mean(x^2) + eps).
struct mg_tensor * mg_rms_norm        (struct mg_context * ctx, struct mg_tensor * a, float eps);
struct mg_tensor * mg_rms_norm_inplace(struct mg_context * ctx, struct mg_tensor * a, float eps);

// Each row turned into probabilities: e^x / sum(e^x), computed stably.
struct mg_tensor * mg_soft_max        (struct mg_context * ctx, struct mg_tensor * a);
struct mg_tensor * mg_soft_max_inplace(struct mg_context * ctx, struct mg_tensor * a);

// {K, M, ...} x {K, N, ...} -> {M, N, ...}. In dims 2 and 3, b may have more
// matrices than a (a multiple): a's matrix i serves b's matrices i*r..i*r+r-1,
// which is how grouped-query attention shares one K head among r Q heads.
struct mg_tensor * mg_mul_mat(struct mg_context * ctx, struct mg_tensor * a, struct mg_tensor * b);

// A contiguous copy of a: what you need after a permute or transpose before
// reshaping or multiplying.
struct mg_tensor * mg_cont(struct mg_context * ctx, struct mg_tensor * a);

// Copy a's values into b's bytes (converting the type, e.g. F32 to F16); the
// result is a view of b, so later ops see the copied values.
struct mg_tensor * mg_cpy(struct mg_context * ctx, struct mg_tensor * a, struct mg_tensor * b);
//@+ full shift
// A copy of a (F32 or F16) converted to type, in a new tensor (ggml_cast).
struct mg_tensor * mg_cast(struct mg_context * ctx, struct mg_tensor * a, enum mg_type type);
//@- full shift

// Rows of a picked by the I32 indices in ids: {n, rows} x {k} -> {n, k} (F32).
// This is the embedding lookup, and it decodes quantized rows on the way.
//@+ full moe
// In full/, as in ggml, a and ids may have more dimensions: {n, rows, m} x
// I32 {k, m} -> {n, k, m}, row ids[i, j] of a's matrix j (how a MoE layer
// picks each token's expert weights out of {1, n_expert, T}).
//@- full moe
struct mg_tensor * mg_get_rows(struct mg_context * ctx, struct mg_tensor * a, struct mg_tensor * ids);

//@+ 06 attention-ops
// softmax(a * scale + mask) row by row. mask (F32 or F16, may be NULL) is
// {n, rows} and added to every matrix of a: 0 where a position may be seen,
// -INFINITY where it may not (the causal mask).
struct mg_tensor * mg_soft_max_ext(struct mg_context * ctx, struct mg_tensor * a, struct mg_tensor * mask, float scale);

enum mg_rope_mode {
    MG_ROPE_NORMAL = 0,   // rotate pairs (0,1), (2,3), ... (the original RoFormer layout)
    MG_ROPE_NEOX   = 2,   // rotate pairs (i, i + n_rot/2): GPT-NeoX, Llama-HF, Qwen (ggml's value 2)
};

// Rotary position embedding of a = {head_dim, n_head, n_tokens}: token t is
// rotated by its position pos[t] (I32). Pair i turns by the angle
// pos * freq_scale * freq_base^(-2i/n_rot); dims from n_rot on are left alone.
struct mg_tensor * mg_rope(struct mg_context * ctx, struct mg_tensor * a, struct mg_tensor * pos, int n_rot,
                           enum mg_rope_mode mode, float freq_base, float freq_scale);
//@- 06 attention-ops
//@+ full rope-freqs
// mg_rope with a frequency factor per pair (F32 {n_rot/2}, or NULL): pair
// i turns by its angle divided by freq_factors[i] (Llama 3's rope_freqs.weight;
// ggml_rope_ext's src[2]).
struct mg_tensor * mg_rope_ext(struct mg_context * ctx, struct mg_tensor * a, struct mg_tensor * pos,
                               struct mg_tensor * freq_factors, int n_rot, enum mg_rope_mode mode, float freq_base,
                               float freq_scale);
//@- full rope-freqs

//@+ 09 set-rows
// Row r of src goes to row idx[r] of dst (src F32, dst F32 or F16; idx I32,
// one per row of src); the result is a view of dst. Where a cpy into a view
// fixes the destination when the graph is built, set_rows reads it from an
// input when the graph runs: the same graph can store each new token's K and
// V at a new position, so a decode graph can be reused (ggml_set_rows).
struct mg_tensor * mg_set_rows(struct mg_context * ctx, struct mg_tensor * dst, struct mg_tensor * src,
                               struct mg_tensor * idx);
//@- 09 set-rows

//@+ full fused-ops
// silu(a) * b in one pass (ggml_swiglu_split): the SwiGLU of a Qwen3 FFN
// without writing silu(a) to memory first.
struct mg_tensor * mg_swiglu(struct mg_context * ctx, struct mg_tensor * a, struct mg_tensor * b);

// softmax(q k^T * scale + mask) v for every head, with an online softmax that
// never materialises the {n_kv, n_tokens} score matrix (ggml_flash_attn_ext).
// q: {D, n_tokens, H}, k: {D, n_kv, Hkv}, v: {D, n_kv, Hkv}, mask: {n_kv, n_tokens};
// the result is {D, H, n_tokens}, ready to be reshaped to {D*H, n_tokens}.
struct mg_tensor * mg_flash_attn(struct mg_context * ctx, struct mg_tensor * q, struct mg_tensor * k,
                                 struct mg_tensor * v, struct mg_tensor * mask, float scale);
//@- full fused-ops

//@+ full moe
// The ops of a mixture-of-experts FFN (Qwen3-MoE): the router picks, per
// token, the n_used experts with the largest probabilities (argsort, top_k),
// and mul_mat_id multiplies each token by only the weight matrices it picked.

enum mg_sort_order {
    MG_SORT_ORDER_ASC  = 0,   // ggml's values (GGML_SORT_ORDER_ASC, _DESC)
    MG_SORT_ORDER_DESC = 1,
};

// Per row of a (F32), the I32 indices 0..n-1 in the order that sorts the row:
// {n, rows...} -> I32 {n, rows...} (ggml_argsort).
struct mg_tensor * mg_argsort(struct mg_context * ctx, struct mg_tensor * a, enum mg_sort_order order);

// The indices of the k largest values of each row, largest first: argsort
// DESC, then a view of the first k of each row, {k, rows...} (ggml_argsort_top_k).
// The result is that view; its src[0] / view_src is the whole argsort.
struct mg_tensor * mg_argsort_top_k(struct mg_context * ctx, struct mg_tensor * a, int k);

// Every element of a (F32) limited to [min, max] (ggml_clamp).
struct mg_tensor * mg_clamp(struct mg_context * ctx, struct mg_tensor * a, float min, float max);

// One matrix per expert, each token multiplied by the ones its ids pick
// (ggml_mul_mat_id). as: the experts' weights {K, N, n_as} (any type mul_mat
// takes), b: F32 activations {K, n_b, T} with n_b 1 (the same row for every
// pick) or n_used, ids: I32 {n_used, T}, each in 0..n_as-1. The result is
// F32 {N, n_used, T}: column (i, t) = as[:, :, ids[i, t]] x b[:, i % n_b, t].
struct mg_tensor * mg_mul_mat_id(struct mg_context * ctx, struct mg_tensor * as, struct mg_tensor * b,
                                 struct mg_tensor * ids);
//@- full moe
