//@file full
// repack.h - Q4_0 and Q4_K weights copied, at load time, into a layout that
// the tile kernel reads in memory order (ggml's CPU "extra buffer type",
// CPU_REPACK: ggml-cpu/repack.cpp, block_q4_0x8 and block_q4_Kx8). repack.c
// explains the layouts and the cost.
//
//     if (mg_repack_fits(w)) {                           // Q4_0 or Q4_K, rows % 8 == 0, ...
//         void * copy = aligned_alloc(64, mg_nbytes(w));   // the same size as the original
//         mg_repack(copy, w);
//         w->repacked = copy;                             // mul_mat now reads the copy
//     }
//
// The original bytes stay where they are (in the mapping), so get_rows, `mg
// info` and everything else that reads the weight read them as before; only
// mul_mat looks at t->repacked. Results are bit-identical either way.
#pragma once

#include "tensor.h"

// Does t qualify: Q4_0, 2-D and contiguous, rows a multiple of 8, row length
// a multiple of 32. Says nothing about whether repacking is switched on.
bool mg_repack_q4_0_fits(const struct mg_tensor * t);

// Is repacking on for models loaded from now on? Off with MG_NO_REPACK=1 in
// the environment (`mg ... --no-repack` sets it), and off in the scalar build
// (-DMG_SCALAR), whose tiles read rows one by one anyway.
bool mg_repack_enabled(void);

// Rows x (n / 32 blocks) of Q4_0 at src -> the interleaved layout at dst
// (the same number of bytes), and back. rows % 8 == 0, n % 32 == 0.
void mg_repack_q4_0(void * dst, const void * src, int64_t n, int64_t rows);
void mg_unpack_q4_0(void * dst, const void * src, int64_t n, int64_t rows);

// The tile of a repacked matrix: 8 weight rows (x: their group, at the same
// byte offset as row 0 of the 8 in the original) x n_cols <= 4 columns of
// Q8_0 (y, y_stride bytes apart); s[c * s_stride + r] as vec_dot_tile gives it.
// The SIMD kernel where the build has one, else mg_repack_tile_q4_0_ref.
void mg_repack_tile_q4_0(int64_t n, float * s, size_t s_stride, const void * x, const void * y, size_t y_stride,
                         int n_cols);

// The plain reference: unpack the 8 rows, then one vec_dot per row and column.
void mg_repack_tile_q4_0_ref(int64_t n, float * s, size_t s_stride, const void * x, const void * y,
                             size_t y_stride, int n_cols);

// Q4_K the same way: rows x (n / 256 super-blocks) at src <-> the interleaved
// layout (repack.c, second drawing). rows % 8 == 0, n % 256 == 0.
bool mg_repack_q4_K_fits(const struct mg_tensor * t);
void mg_repack_q4_K(void * dst, const void * src, int64_t n, int64_t rows);
void mg_unpack_q4_K(void * dst, const void * src, int64_t n, int64_t rows);

// The tile of a repacked Q4_K matrix against Q8_K columns, as for Q4_0.
void mg_repack_tile_q4_K(int64_t n, float * s, size_t s_stride, const void * x, const void * y, size_t y_stride,
                         int n_cols);
void mg_repack_tile_q4_K_ref(int64_t n, float * s, size_t s_stride, const void * x, const void * y,
                             size_t y_stride, int n_cols);

// Any type above, for the loader and mul_mat: does t qualify, repack it into
// dst (mg_nbytes(t) bytes), and the tile of its type.
bool mg_repack_fits(const struct mg_tensor * t);
void mg_repack(void * dst, const struct mg_tensor * t);
void mg_repack_tile(enum mg_type type, int64_t n, float * s, size_t s_stride, const void * x, const void * y,
                    size_t y_stride, int n_cols);
