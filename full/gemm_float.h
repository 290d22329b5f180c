//@file full
// gemm_float.h - the matrix product of float weights (F32, F16, BF16) with a
// batch of activation columns, in the order of llama.cpp's tinyBLAS
// (ggml-cpu/llamafile/sgemm.cpp), which ggml_compute_forward_mul_mat hands
// such products to. One token (one column) does not come here: llama.cpp
// leaves it to vec_dot, and so do we (vec.h).
//
// Every output element is the dot product of a weight row and a column, added
// in lanes: lane i of one accumulator takes the products of elements
// i, i + L, i + 2L, ... (L = 16 on AVX-512), one fused multiply-add each, and
// at the end the L lanes are summed in the order of _mm512_reduce_add_ps.
// That is another order than vec_dot's (4 accumulators, 64 elements a step),
// so a prompt taken as one batch and the same prompt token by token differ
// in the last bits, in llama.cpp and here alike.
//
//     if (mg_gemm_float_applies(MG_TYPE_F16, m, n, k)) {         // n >= 2, k % 16 == 0, m % 4 == 0
//         // rows [0, m) of W (F16, lda bytes apart) x n columns of x
//         // (already rounded to F16, ldb bytes apart) -> out[j * ldc + i]
//         mg_gemm_float(MG_TYPE_F16, k, w, lda, 0, m, x, ldb, n, out, ldc);
//     }
//
// mg_gemm_float_dot is the scalar reference of one output, the same
// additions in the same order; the SIMD build's mg_gemm_float equals it to
// the bit (tests/full/test_gemm_float.c), the scalar build uses it.
#pragma once

#include "quants.h"

#include <stdbool.h>
#include <stddef.h>

// How one output is added up: lanes accumulators of one float each, and each
// multiply-add step consumes step elements of k (lanes, or 2 * lanes where a
// step multiplies pairs: AVX512-BF16's vdpbf16ps). step == 0: the type has no
// such kernel.
struct mg_gemm_float_order {
    int lanes;   // 16 (AVX-512; the scalar build) or 8 (AVX2)
    int step;    // KN of tinyBLAS<KN, ...>
};

// The order of this build for a weight type (F32, F16, BF16; others: step 0).
struct mg_gemm_float_order mg_gemm_float_order(enum mg_type type);

// llamafile_sgemm's own conditions for taking a product of m weight rows of k
// elements with n columns: n >= 2, k a multiple of the step, m a multiple of 4
// (its tiles are 4 rows high). Otherwise llama.cpp falls back to vec_dot.
bool mg_gemm_float_applies(enum mg_type type, int64_t m, int64_t n, int64_t k);

// out[j * ldc + i] = W row i . column j for r0 <= i < r1 (r0, r1 multiples of
// 4) and j < n. W rows lda bytes apart, columns ldb bytes apart, both of the
// weight type (columns already converted: vec_dot_type is the weight type).
void mg_gemm_float(enum mg_type type, int64_t k, const void * w, size_t lda, int64_t r0, int64_t r1, const void * x,
                   size_t ldb, int64_t n, float * out, size_t ldc);

// One output, the scalar way, in the order of mg_gemm_float_order(type).
void mg_gemm_float_dot(enum mg_type type, int64_t k, float * s, const void * w_row, const void * x_col);
