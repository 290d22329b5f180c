//@file full
// ops_simd.h - the element-wise work of softmax, SwiGLU and RoPE, eight lanes
// at a time where the CPU has AVX2 (the same switch as vec_simd.h: MG_SIMD).
//
// Every function gives exactly the bits of the scalar code beside it in
// ops_simd.c (which is what chapters 03-09 run): the exp is ggml's vector
// exp (mg_expf, compute.h) lane by lane, and no multiply and add are fused
// unless the scalar code fuses them too. Tests compare the two bit for bit.
#pragma once

#include "vec_simd.h"

#include <stdint.h>

// The float lanes of ggml-cpu's vector loops (vec.cpp: softmax, SiLU, SwiGLU)
// at the level full/ is compiled for. They decide three things: which elements
// take the vector exp (the first n - n % lanes; the rest the C library's expf),
// which vector exp that is (ggml_v_expf's AVX-512 and AVX2 versions round
// differently), and how softmax adds one vector of exps in float before the
// sum goes on in double. AVX-512 F + DQ: 16, as chapters 03-09 and the scalar
// engine do; AVX2 + FMA: 8; aarch64 NEON: 4 (float32x4_t), whose vector exp
// rounds as the AVX2 one does (vec.h's two versions take the same steps).
#if defined(MG_NEON)
#define MG_GGML_LANES 4
#elif defined(MG_SIMD) && !(defined(__AVX512F__) && defined(__AVX512DQ__))
#define MG_GGML_LANES 8
#else
#define MG_GGML_LANES 16
#endif

// ggml_v_expf's AVX2 version, one value at a time: the split and polynomial of
// mg_expf (the AVX-512 version), but the polynomial's last step leaves out the
// 1, and the result is fma(j, 2^n, 2^n) rather than (j + 1) * 2^n.
float mg_expf_avx2(float x);
// The level's vector exp, one value: mg_expf, or mg_expf_avx2 where MG_GGML_LANES is 8 or 4.
float mg_level_expf(float x);
// MG_GGML_LANES floats summed in the order of the level's horizontal add
// (GCC's _mm512_reduce_add_ps; AVX2: the halves, then pairs, as ggml writes it;
// NEON: vaddvq_f32, neighbours first: (0 + 1) + (2 + 3)).
float mg_level_sum_lanes(const float * x);

// y[i] = e^(x[i] - shift), as ggml's softmax and SiLU loops compute it: the
// level's vector exp for the first n - n % MG_GGML_LANES elements, the C
// library's expf for the rest.
void mg_exp_row(int64_t n, float * y, const float * x, float shift);

// y[i] = x[i] / (1 + e^-x[i]) * g[i]: SwiGLU, with the same exp row rule.
void mg_swiglu_row(int64_t n, float * y, const float * x, const float * g);

// The rotation of RoPE's pairs: for i < n, with c = cos_t[i] and s = sin_t[i],
//   y0[i] = x0[i] c - x1[i] s,   y1[i] = x0[i] s + x1[i] c.
// y0/y1 may be x0/x1 (in place).
void mg_rope_pairs(int64_t n, float * y0, float * y1, const float * x0, const float * x1, const float * cos_t,
                   const float * sin_t);

// acc[i] += w[0] v[0][i] + w[1] v[1][i] + ... + w[n-1] v[n-1][i] for i < d,
// added in that order, each product rounded before it is added: the value
// side of flash attention (v[j] is row j, d floats apart). The SIMD twin
// keeps 64 outputs in registers while it goes through the n rows.
void mg_weighted_rows_add(int64_t n, int64_t d, const float * w, const float * v, float * acc);
