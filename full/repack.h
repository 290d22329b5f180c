//@file full
// repack.h - Q4_0, Q4_K and Q2_K weights copied, at load time, into a layout
// that the tile kernel reads in memory order (ggml's CPU "extra buffer type",
// CPU_REPACK: ggml-cpu/repack.cpp, block_q4_0x8, block_q4_Kx8, block_q2_Kx8).
// repack.c explains the layouts and the cost.
//
//     if (mg_repack_fits(w)) {                           // Q4_0, Q4_K or Q2_K, rows % 8 == 0, ...
//         void * copy = aligned_alloc(64, mg_nbytes(w));   // the same size as the original
//         mg_repack(copy, w);
//         w->repacked = copy;                             // mul_mat now reads the copy
//     }
//
// The original bytes stay where they are (in the mapping), so get_rows, `mg
// info` and everything else that reads the weight read them as before; only
// mul_mat looks at t->repacked. For Q4_0 results are bit-identical either
// way. The Q4_K and Q2_K tiles add in the order of llama.cpp's repacked
// kernels instead (its gemm for whole groups of 4 columns, its gemv for the
// rest), so that a batch gives what llama.cpp's batch gives: Q4_K below 4
// columns equals vec_dot, Q2_K does not (its vec_dot keeps ggml's AVX2
// lanes, as llama.cpp does for the Q2_K matrices it cannot repack).
#pragma once

#include "tensor.h"

// Does t qualify: Q4_0, 2-D (or a 3-D stack of experts' matrices) and
// contiguous, rows a multiple of 8, row length a multiple of 32. Says nothing
// about whether repacking is switched on. A 3-D stack is repacked as
// ne[1] * ne[2] rows; expert e's copy starts at e * nb[2] (read by mul_mat_id).
bool mg_repack_q4_0_fits(const struct mg_tensor * t);

// Does this build's mul_mat read the repacked layouts? Not the scalar build
// (-DMG_SCALAR), whose tiles read rows one by one anyway. Whether a model is
// repacked is its load parameter (model.h: mg_model_params.repack).
bool mg_repack_available(void);

// Rows x (n / 32 blocks) of Q4_0 at src -> the interleaved layout at dst
// (the same number of bytes), and back. rows % 8 == 0, n % 32 == 0.
void mg_repack_q4_0(void * dst, const void * src, int64_t n, int64_t rows);
void mg_unpack_q4_0(void * dst, const void * src, int64_t n, int64_t rows);

// Q4_K the same way: rows x (n / 256 super-blocks) at src <-> the interleaved
// layout (repack.c, second drawing). rows % 8 == 0, n % 256 == 0.
bool mg_repack_q4_K_fits(const struct mg_tensor * t);
void mg_repack_q4_K(void * dst, const void * src, int64_t n, int64_t rows);
void mg_unpack_q4_K(void * dst, const void * src, int64_t n, int64_t rows);

// Q2_K the same way (repack.c, third drawing), for llama.cpp's x86 build
// repacks it where the CPU has AVX-512 (q2_K_8x8).
bool mg_repack_q2_K_fits(const struct mg_tensor * t);
void mg_repack_q2_K(void * dst, const void * src, int64_t n, int64_t rows);
void mg_unpack_q2_K(void * dst, const void * src, int64_t n, int64_t rows);

// The float orders of ggml's repacked Q4_K and Q2_K kernels (repack.c), one
// row . one Q8_K column, in plain C: the gemv's (a single token, and the n % 4
// columns a batch leaves) and the gemm's (whole groups of 4 columns). The K
// tiles below take the gemm's order when n_cols == 4, the gemv's otherwise,
// and so do their references.
void mg_gemv_q4_K_q8_K(int64_t n, float * s, const void * x, const void * y);
void mg_gemm_q4_K_q8_K(int64_t n, float * s, const void * x, const void * y);
void mg_gemv_q2_K_q8_K(int64_t n, float * s, const void * x, const void * y);
void mg_gemm_q2_K_q8_K(int64_t n, float * s, const void * x, const void * y);

// The orders of llama.cpp's NEON repacked K-quant kernels (q4_K_8x4, q5_K_8x4,
// q6_K_8x4; Q6_K's gemv and gemm differ), one row . one Q8_K column, in plain C
// (repack.c says which steps are fused).
void mg_dot_q4_K_8x4_q8_K(int64_t n, float * s, const void * x, const void * y);
void mg_dot_q5_K_8x4_q8_K(int64_t n, float * s, const void * x, const void * y);
void mg_gemv_q6_K_8x4_q8_K(int64_t n, float * s, const void * x, const void * y);
void mg_gemm_q6_K_8x4_q8_K(int64_t n, float * s, const void * x, const void * y);

// llama.cpp repacks Q2_K only where it has AVX-512 (ggml_cpu_has_avx512); its
// AVX2 build keeps the file's layout and ggml_vec_dot_q2_K_q8_K's order.
#if defined(__AVX512F__)
#define MG_REPACK_Q2_K 1
#else
#define MG_REPACK_Q2_K 0
#endif

// Any type above, for the loader and mul_mat (Q2_K where MG_REPACK_Q2_K): does
// t qualify, repack it into
// dst (mg_nbytes(t) bytes), and the tile of its type (and its reference).
bool mg_repack_fits(const struct mg_tensor * t);
void mg_repack(void * dst, const struct mg_tensor * t);
// The tile of a repacked matrix: 8 weight rows (x: their group, at the same
// byte offset as row 0 of the 8 in the original) x n_cols <= 4 columns in the
// type's vec_dot_type (y, y_stride bytes apart); s[c * s_stride + r] as
// vec_dot_tile gives it. The SIMD kernel where the build has one, else the
// plain reference: unpack the 8 rows, then one scalar dot per row and column.
void mg_repack_tile(enum mg_type type, int64_t n, float * s, size_t s_stride, const void * x, const void * y,
                    size_t y_stride, int n_cols);
void mg_repack_tile_ref(enum mg_type type, int64_t n, float * s, size_t s_stride, const void * x, const void * y,
                        size_t y_stride, int n_cols);
