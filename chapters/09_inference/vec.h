// Generated from full/vec.h by tools/chapgen. In a class, edit this copy freely (make chapters will not overwrite your edits); to change the engine, edit full/vec.h and run make chapters.
// vec.h - the CPU side of each type: how a weight row of that type meets an
// activation row in a matmul (ggml-cpu.c, type_traits_cpu[], and the
// ggml_vec_dot_* kernels of ggml-cpu/vec.cpp and ggml-cpu/quants.c).
//
// A matmul never dequantizes its weights. Each F32 activation row is first
// converted, once, to the weight type's partner format (vec_dot_type), and
// then every output element is one dot product of raw blocks:
//
//     const struct mg_type_traits_cpu * tr = mg_get_type_traits_cpu(MG_TYPE_Q4_0);
//     // tr->vec_dot_type == MG_TYPE_Q8_0
//     struct mg_block_q8_0 xq[256 / MG_QK8_0];      // lives in the scratch buffer (plan.c)
//     tr->from_float(x, xq, 256);                    // 256 activations -> 8 Q8_0 blocks, once
//     float s;
//     tr->vec_dot(256, &s, w_row, xq);               // w_row . x: integer sums per block
//
// So a Q4_0 model's result depends on how the activations were rounded to
// Q8_0, not only on the weights: that is why these conversions follow ggml's
// x86 build exactly (docs/formats.md 2.6).
//
// Every kernel here is the scalar reference, with ggml's float evaluation
// order (ggml: ggml_vec_dot_*_generic).
#pragma once

#include "quants.h"

// s = dot(x row, y row) over n elements; x is a row of the weight type, y a row
// of its vec_dot_type. n is a multiple of the weight type's block size.
typedef void (*mg_vec_dot_fn)(int64_t n, float * s, const void * x, const void * y);

struct mg_type_traits_cpu {
    mg_from_float_fn from_float;     // how an F32 activation row becomes vec_dot_type (NULL: used as is)
    mg_vec_dot_fn    vec_dot;        // a row of this type . a row of vec_dot_type
    enum mg_type     vec_dot_type;
};

// NULL for a type that cannot be a matmul's weight (I32, Q8_K, ...).
const struct mg_type_traits_cpu * mg_get_type_traits_cpu(enum mg_type type);

void mg_vec_dot_f32      (int64_t n, float * s, const void * x, const void * y);
void mg_vec_dot_f16      (int64_t n, float * s, const void * x, const void * y);
void mg_vec_dot_q4_0_q8_0(int64_t n, float * s, const void * x, const void * y);
void mg_vec_dot_q8_0_q8_0(int64_t n, float * s, const void * x, const void * y);
// The 8 float lanes of an x86 dot product summed as ggml's hsum_float_8: halves, then pairs.
float mg_hsum_lanes_8(const float lanes[8]);
void mg_vec_dot_bf16     (int64_t n, float * s, const void * x, const void * y);
void mg_vec_dot_q4_K_q8_K(int64_t n, float * s, const void * x, const void * y);
void mg_vec_dot_q6_K_q8_K(int64_t n, float * s, const void * x, const void * y);
