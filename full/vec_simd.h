//@file full
// vec_simd.h - the SIMD twins of vec.c's kernels (vec_simd.c), and the switch
// that turns them on.
//
// They exist when the compiler targets AVX2 + FMA + F16C (full/Makefile builds
// with -march=native) and nobody asked for the scalar engine with -DMG_SCALAR.
// Then MG_SIMD is defined and vec.c's table points at them:
//
//     mg_vec_dot_q4_0_q8_0        the scalar reference (vec.c), ggml's *_generic order
//     mg_vec_dot_q4_0_q8_0_simd   the same dot product, its floats added in SIMD
//                                 lanes: equal up to rounding (vec_simd.c says how)
//     mg_vec_dot_cols_q4_0_q8_0_simd
//                                 up to 4 activation columns per weight row, each
//                                 column bit-identical to mg_vec_dot_q4_0_q8_0_simd
//     mg_vec_dot_tile_q4_0_q8_0_simd
//                                 up to 8 weight rows x 4 columns, each result
//                                 bit-identical to mg_vec_dot_q4_0_q8_0_simd
//
// The activation converters are bit-identical to their scalar references
// (mg_quantize_row_q8_0 and friends) for finite input.
#pragma once

#include <stddef.h>
#include <stdint.h>

#if !defined(MG_SCALAR) && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define MG_SIMD 1

// Activation converters (the from_float of the CPU table).
void mg_fp32_to_fp16_row_simd (const float * x, void * y, int64_t n);
void mg_fp32_to_bf16_row_simd (const float * x, void * y, int64_t n);
void mg_fp16_to_fp32_row_simd (const void * x, float * y, int64_t n);   // exact, as mg_fp16_to_fp32_row
void mg_quantize_row_q8_0_simd(const float * x, void * y, int64_t n);
void mg_quantize_row_q8_1_simd(const float * x, void * y, int64_t n);
void mg_quantize_row_q8_K_simd(const float * x, void * y, int64_t n);

// One weight row . one activation row (mg_vec_dot_fn).
void mg_vec_dot_f32_simd        (int64_t n, float * s, const void * x, const void * y);
void mg_vec_dot_f16_simd        (int64_t n, float * s, const void * x, const void * y);
void mg_vec_dot_bf16_simd       (int64_t n, float * s, const void * x, const void * y);
void mg_vec_dot_q4_0_q8_0_simd  (int64_t n, float * s, const void * x, const void * y);
void mg_vec_dot_q4_1_q8_1_simd  (int64_t n, float * s, const void * x, const void * y);
void mg_vec_dot_q5_0_q8_0_simd  (int64_t n, float * s, const void * x, const void * y);
void mg_vec_dot_q5_1_q8_1_simd  (int64_t n, float * s, const void * x, const void * y);
void mg_vec_dot_q8_0_q8_0_simd  (int64_t n, float * s, const void * x, const void * y);
void mg_vec_dot_iq4_nl_q8_0_simd(int64_t n, float * s, const void * x, const void * y);
void mg_vec_dot_q2_K_q8_K_simd  (int64_t n, float * s, const void * x, const void * y);
void mg_vec_dot_q3_K_q8_K_simd  (int64_t n, float * s, const void * x, const void * y);
void mg_vec_dot_q4_K_q8_K_simd  (int64_t n, float * s, const void * x, const void * y);
void mg_vec_dot_q5_K_q8_K_simd  (int64_t n, float * s, const void * x, const void * y);
void mg_vec_dot_q6_K_q8_K_simd  (int64_t n, float * s, const void * x, const void * y);

// One weight row . up to 4 activation rows (mg_vec_dot_cols_fn).
void mg_vec_dot_cols_f32_simd        (int64_t n, float * s, const void * x, const void * y, size_t ys, int nc);
void mg_vec_dot_cols_f16_simd        (int64_t n, float * s, const void * x, const void * y, size_t ys, int nc);
void mg_vec_dot_cols_bf16_simd       (int64_t n, float * s, const void * x, const void * y, size_t ys, int nc);
void mg_vec_dot_cols_q4_0_q8_0_simd  (int64_t n, float * s, const void * x, const void * y, size_t ys, int nc);
void mg_vec_dot_cols_q4_1_q8_1_simd  (int64_t n, float * s, const void * x, const void * y, size_t ys, int nc);
void mg_vec_dot_cols_q5_0_q8_0_simd  (int64_t n, float * s, const void * x, const void * y, size_t ys, int nc);
void mg_vec_dot_cols_q5_1_q8_1_simd  (int64_t n, float * s, const void * x, const void * y, size_t ys, int nc);
void mg_vec_dot_cols_q8_0_q8_0_simd  (int64_t n, float * s, const void * x, const void * y, size_t ys, int nc);
void mg_vec_dot_cols_iq4_nl_q8_0_simd(int64_t n, float * s, const void * x, const void * y, size_t ys, int nc);
void mg_vec_dot_cols_q2_K_q8_K_simd  (int64_t n, float * s, const void * x, const void * y, size_t ys, int nc);
void mg_vec_dot_cols_q3_K_q8_K_simd  (int64_t n, float * s, const void * x, const void * y, size_t ys, int nc);
void mg_vec_dot_cols_q4_K_q8_K_simd  (int64_t n, float * s, const void * x, const void * y, size_t ys, int nc);
void mg_vec_dot_cols_q5_K_q8_K_simd  (int64_t n, float * s, const void * x, const void * y, size_t ys, int nc);
void mg_vec_dot_cols_q6_K_q8_K_simd  (int64_t n, float * s, const void * x, const void * y, size_t ys, int nc);

// Up to 8 weight rows . up to 4 activation rows (mg_vec_dot_tile_fn).
void mg_vec_dot_tile_f32_simd        (int64_t n, float * s, size_t ss, const void * x, size_t xs, int nr,
                                      const void * y, size_t ys, int nc);
void mg_vec_dot_tile_f16_simd        (int64_t n, float * s, size_t ss, const void * x, size_t xs, int nr,
                                      const void * y, size_t ys, int nc);
void mg_vec_dot_tile_bf16_simd       (int64_t n, float * s, size_t ss, const void * x, size_t xs, int nr,
                                      const void * y, size_t ys, int nc);
void mg_vec_dot_tile_q4_0_q8_0_simd  (int64_t n, float * s, size_t ss, const void * x, size_t xs, int nr,
                                      const void * y, size_t ys, int nc);
void mg_vec_dot_tile_q4_1_q8_1_simd  (int64_t n, float * s, size_t ss, const void * x, size_t xs, int nr,
                                      const void * y, size_t ys, int nc);
void mg_vec_dot_tile_q5_0_q8_0_simd  (int64_t n, float * s, size_t ss, const void * x, size_t xs, int nr,
                                      const void * y, size_t ys, int nc);
void mg_vec_dot_tile_q5_1_q8_1_simd  (int64_t n, float * s, size_t ss, const void * x, size_t xs, int nr,
                                      const void * y, size_t ys, int nc);
void mg_vec_dot_tile_q8_0_q8_0_simd  (int64_t n, float * s, size_t ss, const void * x, size_t xs, int nr,
                                      const void * y, size_t ys, int nc);
void mg_vec_dot_tile_iq4_nl_q8_0_simd(int64_t n, float * s, size_t ss, const void * x, size_t xs, int nr,
                                      const void * y, size_t ys, int nc);
void mg_vec_dot_tile_q2_K_q8_K_simd  (int64_t n, float * s, size_t ss, const void * x, size_t xs, int nr,
                                      const void * y, size_t ys, int nc);
void mg_vec_dot_tile_q3_K_q8_K_simd  (int64_t n, float * s, size_t ss, const void * x, size_t xs, int nr,
                                      const void * y, size_t ys, int nc);
void mg_vec_dot_tile_q4_K_q8_K_simd  (int64_t n, float * s, size_t ss, const void * x, size_t xs, int nr,
                                      const void * y, size_t ys, int nc);
void mg_vec_dot_tile_q5_K_q8_K_simd  (int64_t n, float * s, size_t ss, const void * x, size_t xs, int nr,
                                      const void * y, size_t ys, int nc);
void mg_vec_dot_tile_q6_K_q8_K_simd  (int64_t n, float * s, size_t ss, const void * x, size_t xs, int nr,
                                      const void * y, size_t ys, int nc);
// Panels (vec.h: MG_VEC_DOT_PANEL_ROWS rows at most) of the types whose tile
// is lane_panel_32.
void mg_vec_dot_panel_q4_1_q8_1_simd (int64_t n, float * s, size_t ss, const void * x, size_t xs, int nr,
                                      const void * y, size_t ys, int nc);
void mg_vec_dot_panel_q5_0_q8_0_simd (int64_t n, float * s, size_t ss, const void * x, size_t xs, int nr,
                                      const void * y, size_t ys, int nc);
void mg_vec_dot_panel_q5_1_q8_1_simd (int64_t n, float * s, size_t ss, const void * x, size_t xs, int nr,
                                      const void * y, size_t ys, int nc);
void mg_vec_dot_panel_q8_0_q8_0_simd (int64_t n, float * s, size_t ss, const void * x, size_t xs, int nr,
                                      const void * y, size_t ys, int nc);
// 8 rows of a repacked Q4_0 matrix (repack.c; x: their first group) . up to 4 activation rows.
void mg_vec_dot_tile_q4_0x8_q8_0_simd(int64_t n, float * s, size_t ss, const void * x, const void * y, size_t ys,
                                      int nc);
// 8 rows of a repacked Q4_K matrix (repack.c; x: their first group) . up to 4 Q8_K activation rows.
void mg_vec_dot_tile_q4_Kx8_q8_K_simd(int64_t n, float * s, size_t ss, const void * x, const void * y, size_t ys,
                                      int nc);
// The same in the order of ggml's repacked gemm, for whole groups of 4 columns (repack.c).
void mg_gemm_tile_q4_Kx8_q8_K_simd(int64_t n, float * s, size_t ss, const void * x, const void * y, size_t ys,
                                   int nc);
// 8 rows of a repacked Q2_K matrix (repack.c) . up to 4 Q8_K activation rows: gemv's order, gemm's.
void mg_vec_dot_tile_q2_Kx8_q8_K_simd(int64_t n, float * s, size_t ss, const void * x, const void * y, size_t ys,
                                      int nc);
void mg_gemm_tile_q2_Kx8_q8_K_simd(int64_t n, float * s, size_t ss, const void * x, const void * y, size_t ys,
                                   int nc);
#elif !defined(MG_SCALAR) && defined(__aarch64__) && defined(__ARM_NEON) && defined(__ARM_FEATURE_DOTPROD) && \
    defined(__ARM_FEATURE_FP16_VECTOR_ARITHMETIC)
// aarch64 with dot product and FP16 arithmetic (armv8.2-a+dotprod+fp16):
// vec_neon.c's kernels, in the orders of llama.cpp's NEON build, for the
// types that have one; the others keep vec.c's scalar kernels (vec.c's table).
#define MG_NEON 1

void mg_quantize_row_q8_0_neon(const float * x, void * y, int64_t n);
void mg_quantize_row_q8_1_neon(const float * x, void * y, int64_t n);
void mg_quantize_row_q8_K_neon(const float * x, void * y, int64_t n);
void mg_vec_dot_q4_1_q8_1_neon(int64_t n, float * s, const void * x, const void * y);
void mg_vec_dot_q5_0_q8_0_neon(int64_t n, float * s, const void * x, const void * y);
void mg_vec_dot_cols_q5_0_q8_0_neon(int64_t n, float * s, const void * x, const void * y, size_t ys, int nc);
void mg_vec_dot_tile_q5_0_q8_0_neon(int64_t n, float * s, size_t ss, const void * x, size_t xs, int nr,
                                    const void * y, size_t ys, int nc);
void mg_vec_dot_q5_1_q8_1_neon(int64_t n, float * s, const void * x, const void * y);
void mg_vec_dot_cols_q5_1_q8_1_neon(int64_t n, float * s, const void * x, const void * y, size_t ys, int nc);
void mg_vec_dot_tile_q5_1_q8_1_neon(int64_t n, float * s, size_t ss, const void * x, size_t xs, int nr,
                                    const void * y, size_t ys, int nc);
void mg_vec_dot_q2_K_q8_K_neon(int64_t n, float * s, const void * x, const void * y);
void mg_vec_dot_cols_q2_K_q8_K_neon(int64_t n, float * s, const void * x, const void * y, size_t ys, int nc);
void mg_vec_dot_tile_q2_K_q8_K_neon(int64_t n, float * s, size_t ss, const void * x, size_t xs, int nr,
                                    const void * y, size_t ys, int nc);
void mg_vec_dot_q3_K_q8_K_neon(int64_t n, float * s, const void * x, const void * y);
void mg_vec_dot_cols_q3_K_q8_K_neon(int64_t n, float * s, const void * x, const void * y, size_t ys, int nc);
void mg_vec_dot_tile_q3_K_q8_K_neon(int64_t n, float * s, size_t ss, const void * x, size_t xs, int nr,
                                    const void * y, size_t ys, int nc);
void mg_vec_dot_q6_K_q8_K_neon(int64_t n, float * s, const void * x, const void * y);
void mg_vec_dot_cols_q6_K_q8_K_neon(int64_t n, float * s, const void * x, const void * y, size_t ys, int nc);
void mg_vec_dot_tile_q6_K_q8_K_neon(int64_t n, float * s, size_t ss, const void * x, size_t xs, int nr,
                                    const void * y, size_t ys, int nc);
void mg_vec_dot_cols_q4_1_q8_1_neon(int64_t n, float * s, const void * x, const void * y, size_t ys, int nc);
void mg_vec_dot_tile_q4_1_q8_1_neon(int64_t n, float * s, size_t ss, const void * x, size_t xs, int nr,
                                    const void * y, size_t ys, int nc);
void mg_vec_dot_f32_neon      (int64_t n, float * s, const void * x, const void * y);
void mg_vec_dot_f16_neon      (int64_t n, float * s, const void * x, const void * y);
void mg_vec_dot_q8_0_q8_0_neon(int64_t n, float * s, const void * x, const void * y);
void mg_vec_dot_cols_f32_neon      (int64_t n, float * s, const void * x, const void * y, size_t ys, int nc);
void mg_vec_dot_cols_f16_neon      (int64_t n, float * s, const void * x, const void * y, size_t ys, int nc);
void mg_vec_dot_cols_q8_0_q8_0_neon(int64_t n, float * s, const void * x, const void * y, size_t ys, int nc);
void mg_vec_dot_tile_f32_neon      (int64_t n, float * s, size_t ss, const void * x, size_t xs, int nr,
                                    const void * y, size_t ys, int nc);
void mg_vec_dot_tile_f16_neon      (int64_t n, float * s, size_t ss, const void * x, size_t xs, int nr,
                                    const void * y, size_t ys, int nc);
void mg_vec_dot_tile_q8_0_q8_0_neon(int64_t n, float * s, size_t ss, const void * x, size_t xs, int nr,
                                    const void * y, size_t ys, int nc);
// The rows llama.cpp repacks on this target (repack.c): Q4_0 and Q8_0 rows .
// one Q8_0 column in the order of ggml_gemv_q4_0_4x4_q8_0 / _q8_0_4x4_q8_0
// (gemv: single tokens and a batch's n % 4 columns) and of their gemm (whole
// groups of 4 columns).
void mg_gemv_q4_0_q8_0_neon(int64_t n, float * s, const void * x, const void * y);
void mg_gemv_q8_0_q8_0_neon(int64_t n, float * s, const void * x, const void * y);
void mg_gemm_q8_0_q8_0_neon(int64_t n, float * s, const void * x, const void * y);
void mg_gemv_iq4_nl_q8_0_neon(int64_t n, float * s, const void * x, const void * y);   // gemv and gemm
#endif
