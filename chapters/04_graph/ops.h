// Generated from full/ops.h by tools/chapgen. In a class, edit this copy freely (make chapters will not overwrite your edits); to change the engine, edit full/ops.h and run make chapters.
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

// Rows of a picked by the I32 indices in ids: {n, rows} x {k} -> {n, k} (F32).
// This is the embedding lookup, and it decodes quantized rows on the way.
struct mg_tensor * mg_get_rows(struct mg_context * ctx, struct mg_tensor * a, struct mg_tensor * ids);
