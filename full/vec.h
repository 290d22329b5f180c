//@file 07
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
//@+ full simd
// full/ adds SIMD twins (vec_simd.c: *_simd, ggml's AVX2 float order), which
// the table picks when the build targets AVX2 + FMA + F16C, and a multi-column
// entry per type for matrix x matrix products:
//
//     tr->vec_dot_cols(256, s, w_row, xq, row_size, 4);   // s[c] = w_row . column c, c < 4
//
// which unpacks each weight block once for all columns and gives, column by
// column, exactly what vec_dot gives, and a tile entry, rows x columns:
//
//     float s[4 * 8];                                     // column c's 8 results at s + 8 * c
//     tr->vec_dot_tile(256, s, 8, w_rows, w_row_size, 8, xq, xq_row_size, 4);
//
// which loads each weight block once for all columns and each activation
// block once for all rows. Every s[c * 8 + r] is again, to the bit, vec_dot
// of weight row r and column c: how many rows and columns a call takes never
// changes a result, so neither do batches nor thread counts. (mul_mat gives
// float weights with 2 or more columns to gemm_float.h instead, as llama.cpp
// gives them to its tinyBLAS: another order, llama.cpp's.)
//@- full simd
#pragma once

#include "quants.h"

// s = dot(x row, y row) over n elements; x is a row of the weight type, y a row
// of its vec_dot_type. n is a multiple of the weight type's block size.
typedef void (*mg_vec_dot_fn)(int64_t n, float * s, const void * x, const void * y);
//@+ full dot-cols

// s[c] = dot(x row, y row c) for c < n_cols <= MG_VEC_DOT_MAX_COLS, where y row c
// starts y_stride bytes after row c-1. Each s[c] is bit-identical to vec_dot's.
typedef void (*mg_vec_dot_cols_fn)(int64_t n, float * s, const void * x, const void * y, size_t y_stride, int n_cols);
#define MG_VEC_DOT_MAX_COLS 4
//@- full dot-cols
//@+ full dot-tile

// s[c * s_stride + r] = dot(x row r, y row c) for r < n_rows <= MG_VEC_DOT_MAX_ROWS
// and c < n_cols <= MG_VEC_DOT_MAX_COLS: x rows x_stride bytes apart, y rows
// y_stride bytes apart, s_stride counted in floats. That is mul_mat's dst
// layout (dst row c holds column c's results, one per weight row r), so a
// tile writes straight into dst. Each s[...] is bit-identical to vec_dot's.
typedef void (*mg_vec_dot_tile_fn)(int64_t n, float * s, size_t s_stride, const void * x, size_t x_stride,
                                   int n_rows, const void * y, size_t y_stride, int n_cols);
#define MG_VEC_DOT_MAX_ROWS 8

// A panel: a tile of up to MG_VEC_DOT_PANEL_ROWS rows (the same arguments and
// results), for kernels that work out once what the columns give every 8
// rows (vec_simd.c: lane_panel_32). mul_mat hands it a row block's tiles at once.
#define MG_VEC_DOT_PANEL_ROWS 128

// A tile as n_rows calls of vec_dot_cols (vec.c): for the scalar build, and
// for types without a SIMD tile kernel.
void mg_vec_dot_tile_by_rows(mg_vec_dot_cols_fn vec_dot_cols, int64_t n, float * s, size_t s_stride, const void * x,
                             size_t x_stride, int n_rows, const void * y, size_t y_stride, int n_cols);
//@- full dot-tile

struct mg_type_traits_cpu {
    mg_from_float_fn from_float;     // how an F32 activation row becomes vec_dot_type (NULL: used as is)
    mg_vec_dot_fn    vec_dot;        // a row of this type . a row of vec_dot_type
    enum mg_type     vec_dot_type;
    //@+ full dot-cols
    mg_vec_dot_cols_fn vec_dot_cols; // a row of this type . up to 4 rows of vec_dot_type
    //@- full dot-cols
    //@+ full dot-tile
    mg_vec_dot_tile_fn vec_dot_tile; // up to 8 rows of this type . up to 4 rows of vec_dot_type
    mg_vec_dot_tile_fn vec_dot_panel;// up to MG_VEC_DOT_PANEL_ROWS rows . up to 4 rows (NULL: tiles only)
    //@- full dot-tile
};

// NULL for a type that cannot be a matmul's weight (I32, Q8_K, ...).
const struct mg_type_traits_cpu * mg_get_type_traits_cpu(enum mg_type type);

void mg_vec_dot_f32      (int64_t n, float * s, const void * x, const void * y);
void mg_vec_dot_f16      (int64_t n, float * s, const void * x, const void * y);
void mg_vec_dot_q4_0_q8_0(int64_t n, float * s, const void * x, const void * y);
void mg_vec_dot_q8_0_q8_0(int64_t n, float * s, const void * x, const void * y);
// The 8 float lanes of an x86 dot product summed as ggml's hsum_float_8: halves, then pairs.
float mg_hsum_lanes_8(const float lanes[8]);
//@+ 09 vec-k-quants
void mg_vec_dot_bf16     (int64_t n, float * s, const void * x, const void * y);
void mg_vec_dot_q4_K_q8_K(int64_t n, float * s, const void * x, const void * y);
void mg_vec_dot_q6_K_q8_K(int64_t n, float * s, const void * x, const void * y);
//@- 09 vec-k-quants
//@+ full more-quants
void mg_vec_dot_q4_1_q8_1  (int64_t n, float * s, const void * x, const void * y);
void mg_vec_dot_q5_0_q8_0  (int64_t n, float * s, const void * x, const void * y);
void mg_vec_dot_q5_1_q8_1  (int64_t n, float * s, const void * x, const void * y);
void mg_vec_dot_q2_K_q8_K  (int64_t n, float * s, const void * x, const void * y);
void mg_vec_dot_q3_K_q8_K  (int64_t n, float * s, const void * x, const void * y);
void mg_vec_dot_q5_K_q8_K  (int64_t n, float * s, const void * x, const void * y);
void mg_vec_dot_iq4_nl_q8_0(int64_t n, float * s, const void * x, const void * y);
//@- full more-quants
//@+ full simd

// The SIMD twins of these kernels, and MG_SIMD when the build has them.
#include "vec_simd.h"
//@- full simd
