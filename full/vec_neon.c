//@file full
// vec_neon.c - the kernels of vec.c again for aarch64 NEON (dot product +
// FP16 arithmetic: armv8.2-a+dotprod+fp16), each adding its floats in the
// order of llama.cpp's NEON build, so the engine agrees with that build to
// the bit (tests/full/test_golden2.c, the golden2-neon set).
//
// The rules are vec_simd.c's: the integer part of a block is exact however
// the lanes split it; the float part follows ggml's NEON code step by step,
// each fused multiply-add where ggml's compiled code has one (fmla, vfmaq_*)
// and a rounded product then a sum where it has two instructions. The trap
// in that code: GCC's vmlaq_f32 / vmlaq_n_f32 / vmlsq_f32 are NOT fused (fmul,
// then fadd), vfmaq_f32 is, and so are vaddq_f32(acc, vmulq_f32(a, b)) and a
// plain C `sum += a * b` (ggml is built with -std=gnu11 / gnu++17, so
// -ffp-contract=fast, and those intrinsics are C operators in arm_neon.h).
// objdump -d of the built libggml-cpu.so settles each case. This file is
// compiled with -ffp-contract=off: every fusion below is an explicit fmaf or
// vfmaq_*.
//
// What is here, and the ggml function each one mirrors:
//
//   mg_quantize_row_q8_0_neon     quantize_row_q8_0 (arch/arm/quants.c): d = amax / 127,
//                                 id = 1 / d, codes rounded to nearest even (vcvtnq_s32_f32);
//                                 the scalar one takes x86's id = 127 / amax
//   mg_vec_dot_f32_neon           ggml_vec_dot_f32 with simd-mappings.h's NEON mapping
//   mg_vec_dot_f16_neon           ggml_vec_dot_f16: the products summed IN HALF PRECISION
//   mg_quantize_row_q8_1_neon     quantize_row_q8_1: the same codes, s = d * their sum
//   mg_quantize_row_q8_K_neon     quantize_row_q8_K_ref as GCC compiles it on ARM: each code
//                                 the exact product rounded (a fused multiply-add)
//   mg_vec_dot_q8_0_q8_0_neon     ggml_vec_dot_q8_0_q8_0 (arch/arm/quants.c), for Q8_0
//                                 matrices llama.cpp does not repack (a tied output)
//   mg_vec_dot_q4_1_q8_1_neon     ggml_vec_dot_q4_1_q8_1
//   mg_vec_dot_q5_0_q8_0_neon     ggml_vec_dot_q5_0_q8_0, _q5_1_q8_1 (never repacked)
//   mg_vec_dot_q2_K_q8_K_neon     ggml_vec_dot_q2_K_q8_K, _q3_K_q8_K (never repacked)
//   mg_vec_dot_q6_K_q8_K_neon     ggml_vec_dot_q6_K_q8_K (Q6_K rows llama.cpp does not repack)
//   mg_gemv_iq4_nl_q8_0_neon      ggml_gemv_iq4_nl_4x4_q8_0 and its gemm
//   mg_gemv_q4_0_q8_0_neon        ggml_gemv_q4_0_4x4_q8_0 and ggml_gemm_q4_0_4x4_q8_0
//   mg_gemv_q8_0_q8_0_neon        ggml_gemv_q8_0_4x4_q8_0 (arch/arm/repack.cpp)
//   mg_gemm_q8_0_q8_0_neon        ggml_gemm_q8_0_4x4_q8_0
//
// Each scalar reference stays in vec.c (the order of ggml's *_generic C);
// the tests compare the two within a rounding bound, and the golden test
// compares the engine with llama.cpp's NEON build.
#include "vec.h"

#if defined(MG_NEON)
#include <arm_neon.h>
#include <math.h>
#include <string.h>

// ---------------------------------------------------------------------------
// Activations
// ---------------------------------------------------------------------------

// One block of 32: d = amax / 127 (in float; the block stores it as F16),
// id = 1 / d, codes x * id rounded to nearest EVEN (vcvtnq_s32_f32).
static float quantize_block_q8(const float * x, int8_t qs[32]) {
    float32x4_t amax = vdupq_n_f32(0.0f);
    for (int j = 0; j < 8; j++) amax = vmaxq_f32(amax, vabsq_f32(vld1q_f32(x + 4 * j)));   // max: any order
    const float d  = vmaxvq_f32(amax) / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < 8; j++) {
        int32_t q[4];
        vst1q_s32(q, vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(x + 4 * j), id)));
        for (int l = 0; l < 4; l++) qs[4 * j + l] = (int8_t) q[l];
    }
    return d;
}

// quantize_row_q8_0 (arch/arm/quants.c).
void mg_quantize_row_q8_0_neon(const float * x, void * vy, int64_t n) {
    struct mg_block_q8_0 * y = vy;
    for (int64_t i = 0; i < n / MG_QK8_0; i++) y[i].d = mg_fp32_to_fp16(quantize_block_q8(x + i * MG_QK8_0, y[i].qs));
}

// quantize_row_q8_1 (arch/arm/quants.c): quantize_row_q8_0's codes, and
// s = d * (the sum of the codes), d still in float, for Q4_1 and Q5_1.
void mg_quantize_row_q8_1_neon(const float * x, void * vy, int64_t n) {
    struct mg_block_q8_1 * y = vy;
    for (int64_t i = 0; i < n / MG_QK8_1; i++) {
        const float d   = quantize_block_q8(x + i * MG_QK8_1, y[i].qs);
        int32_t     sum = 0;
        for (int j = 0; j < MG_QK8_1; j++) sum += y[i].qs[j];
        y[i].d = mg_fp32_to_fp16(d);
        y[i].s = mg_fp32_to_fp16(d * (float) sum);
    }
}

// quantize_row_q8_K: on ARM quantize_row_q8_K_ref (ggml-quants.c), and for
// the repacked K-quants' groups of 4 rows ggml_quantize_mat_q8_K_4x4, which
// compute the codes as nearest_int(iscale * x): its magic-number rounding
// `fval + 12582912.f` inlined after the product, which GCC (-ffp-contract=fast)
// fuses into one fmla / fmadd. So a code is the EXACT product rounded to the
// nearest integer, not the rounded product: they part where iscale * x rounds
// onto a half (-75.5 once in tiny2's first attention output). The reference
// (mg_quantize_row_q8_K_ref) keeps the two roundings, as ggml's C spells it.
void mg_quantize_row_q8_K_neon(const float * x, void * vy, int64_t n) {
    struct mg_block_q8_K * y = vy;
    for (int64_t i = 0; i < n / MG_QK_K; i++, x += MG_QK_K) {
        float max = 0.0f, amax = 0.0f;
        for (int j = 0; j < MG_QK_K; ++j) {
            if (fabsf(x[j]) > amax) {
                amax = fabsf(x[j]);
                max  = x[j];
            }
        }
        memset(&y[i], 0, sizeof(y[i]));
        if (amax == 0.0f) continue;
        const float iscale = -127.f / max;
        for (int j = 0; j < MG_QK_K; ++j) {
            const float v = fmaf(iscale, x[j], 12582912.0f);   // 1.5 * 2^23: the integer in the low bits
            int32_t     bits;
            memcpy(&bits, &v, sizeof(bits));
            const int q = (bits & 0x007fffff) - 0x00400000;
            y[i].qs[j]  = (int8_t) (q < 127 ? q : 127);
            y[i].bsums[j / 16] += y[i].qs[j];
        }
        y[i].d = 1 / iscale;
    }
}

// ---------------------------------------------------------------------------
// Float rows
// ---------------------------------------------------------------------------

// ggml_vec_dot_f32, NEON: GGML_F32_STEP 16 = 4 accumulators of 4 lanes, one
// vfmaq_f32 each per 16 elements; GGML_F32x4_REDUCE: (0 + 2), (1 + 3), then
// those two, then vaddvq_f32 ((l0 + l1) + (l2 + l3)); the n % 16 rest added to
// that float one by one, each a fused multiply-add (GCC contracts
// `sumf += x[i]*y[i]`).
void mg_vec_dot_f32_neon(int64_t n, float * s, const void * vx, const void * vy) {
    const float * x  = vx;
    const float * y  = vy;
    const int64_t np = n & ~(int64_t) 15;
    float32x4_t   acc[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    for (int64_t i = 0; i < np; i += 16) {
        for (int j = 0; j < 4; j++) acc[j] = vfmaq_f32(acc[j], vld1q_f32(x + i + 4 * j), vld1q_f32(y + i + 4 * j));
    }
    acc[0]     = vaddq_f32(acc[0], acc[2]);
    acc[1]     = vaddq_f32(acc[1], acc[3]);
    acc[0]     = vaddq_f32(acc[0], acc[1]);
    float sumf = vaddvq_f32(acc[0]);
    for (int64_t i = np; i < n; i++) sumf = fmaf(x[i], y[i], sumf);
    *s = sumf;
}

// ggml_vec_dot_f16 with FP16 vector arithmetic: GGML_F16_STEP 32 = 4
// accumulators of 8 HALF lanes, vfmaq_f16 (each sum rounded to half);
// GGML_F16x8_REDUCE in half as the F32 one, then the 8 lanes widened, low 4 +
// high 4 in float, vaddvq_f32, into a double; the n % 32 rest in double.
void mg_vec_dot_f16_neon(int64_t n, float * s, const void * vx, const void * vy) {
    const __fp16 * x  = vx;
    const __fp16 * y  = vy;
    const int64_t  np = n & ~(int64_t) 31;
    float16x8_t    acc[4];
    for (int j = 0; j < 4; j++) acc[j] = vdupq_n_f16(0.0f);
    for (int64_t i = 0; i < np; i += 32) {
        for (int j = 0; j < 4; j++) acc[j] = vfmaq_f16(acc[j], vld1q_f16(x + i + 8 * j), vld1q_f16(y + i + 8 * j));
    }
    acc[0]      = vaddq_f16(acc[0], acc[2]);
    acc[1]      = vaddq_f16(acc[1], acc[3]);
    acc[0]      = vaddq_f16(acc[0], acc[1]);
    double sumf = (double) vaddvq_f32(vaddq_f32(vcvt_f32_f16(vget_low_f16(acc[0])), vcvt_f32_f16(vget_high_f16(acc[0]))));
    for (int64_t i = np; i < n; i++) sumf += (double) ((float) x[i] * (float) y[i]);
    *s = (float) sumf;
}

// ---------------------------------------------------------------------------
// Q8_0
// ---------------------------------------------------------------------------

// The 4 int lanes of vdotq_s32 over a block's two halves: lane l takes
// elements 4l..4l+3 and 16+4l..16+4l+3.
static inline int32x4_t block_lanes_q8_0(const int8_t * a, const int8_t * b) {
    return vaddq_s32(vdotq_s32(vdupq_n_s32(0), vld1q_s8(a), vld1q_s8(b)),
                     vdotq_s32(vdupq_n_s32(0), vld1q_s8(a + 16), vld1q_s8(b + 16)));
}

// The exact int sum of a block's 32 code products.
static inline int32_t block_sum_q8_0(const int8_t * a, const int8_t * b) {
    return vaddvq_s32(block_lanes_q8_0(a, b));
}

// ggml_vec_dot_q8_0_q8_0, NEON: two 4-lane float accumulators, the even
// blocks in one and the odd in the other, each block's lanes times dW*dA
// added with vmlaq_n_f32 (a product, then a sum: not fused); the sum is
// vaddvq(even) + vaddvq(odd), and an odd last block fused into it (C).
void mg_vec_dot_q8_0_q8_0_neon(int64_t n, float * s, const void * vx, const void * vy) {
    const struct mg_block_q8_0 * x  = vx;
    const struct mg_block_q8_0 * y  = vy;
    const int64_t                nb = n / MG_QK8_0;
    float32x4_t                  acc0 = vdupq_n_f32(0.0f), acc1 = vdupq_n_f32(0.0f);
    int64_t                      ib = 0;
    for (; ib + 1 < nb; ib += 2) {
        const float d0 = mg_fp16_to_fp32(x[ib].d) * mg_fp16_to_fp32(y[ib].d);
        const float d1 = mg_fp16_to_fp32(x[ib + 1].d) * mg_fp16_to_fp32(y[ib + 1].d);
        acc0 = vaddq_f32(acc0, vmulq_n_f32(vcvtq_f32_s32(block_lanes_q8_0(x[ib].qs, y[ib].qs)), d0));
        acc1 = vaddq_f32(acc1, vmulq_n_f32(vcvtq_f32_s32(block_lanes_q8_0(x[ib + 1].qs, y[ib + 1].qs)), d1));
    }
    float sumf = vaddvq_f32(acc0) + vaddvq_f32(acc1);
    for (; ib < nb; ib++) {
        const float d = mg_fp16_to_fp32(x[ib].d) * mg_fp16_to_fp32(y[ib].d);
        sumf          = fmaf((float) block_sum_q8_0(x[ib].qs, y[ib].qs), d, sumf);
    }
    *s = sumf;
}

// ---------------------------------------------------------------------------
// Q4_1
// ---------------------------------------------------------------------------

// The 4 int lanes of a Q4_1 block (codes 0..15) . a Q8_1 block, as Q8_0's.
static inline int32x4_t block_lanes_q4_1(const struct mg_block_q4_1 * x, const int8_t * a) {
    const uint8x16_t q  = vld1q_u8(x->qs);
    const int8x16_t  lo = vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0x0f)));
    const int8x16_t  hi = vreinterpretq_s8_u8(vshrq_n_u8(q, 4));
    return vdotq_s32(vdotq_s32(vdupq_n_s32(0), lo, vld1q_s8(a)), hi, vld1q_s8(a + 16));
}

// ggml_vec_dot_q4_1_q8_1, NEON, as Q8_0's two accumulators (vmlaq_n_f32:
// not fused), plus the mins of each pair of blocks in one float, summs +=
// m0 s0 + m1 s1, which GCC compiles as summs + fma(m0, s0, m1 s1); the sum
// is (vaddvq(even) + vaddvq(odd)) + summs; an odd last block adds
// fma(dW dA, S, m s).
void mg_vec_dot_q4_1_q8_1_neon(int64_t n, float * s, const void * vx, const void * vy) {
    const struct mg_block_q4_1 * x  = vx;
    const struct mg_block_q8_1 * y  = vy;
    const int64_t                nb = n / MG_QK8_1;
    float32x4_t                  acc0 = vdupq_n_f32(0.0f), acc1 = vdupq_n_f32(0.0f);
    float                        summs = 0.0f;
    int64_t                      ib    = 0;
    for (; ib + 1 < nb; ib += 2) {
        const struct mg_block_q4_1 *x0 = &x[ib], *x1 = &x[ib + 1];
        const struct mg_block_q8_1 *y0 = &y[ib], *y1 = &y[ib + 1];
        const float m1s1 = mg_fp16_to_fp32(x1->m) * mg_fp16_to_fp32(y1->s);
        summs            = summs + fmaf(mg_fp16_to_fp32(x0->m), mg_fp16_to_fp32(y0->s), m1s1);
        const float d0   = mg_fp16_to_fp32(x0->d) * mg_fp16_to_fp32(y0->d);
        const float d1   = mg_fp16_to_fp32(x1->d) * mg_fp16_to_fp32(y1->d);
        acc0 = vaddq_f32(acc0, vmulq_n_f32(vcvtq_f32_s32(block_lanes_q4_1(x0, y0->qs)), d0));
        acc1 = vaddq_f32(acc1, vmulq_n_f32(vcvtq_f32_s32(block_lanes_q4_1(x1, y1->qs)), d1));
    }
    float sumf = (vaddvq_f32(acc0) + vaddvq_f32(acc1)) + summs;
    for (; ib < nb; ib++) {
        const float d  = mg_fp16_to_fp32(x[ib].d) * mg_fp16_to_fp32(y[ib].d);
        const float ms = mg_fp16_to_fp32(x[ib].m) * mg_fp16_to_fp32(y[ib].s);
        sumf           = sumf + fmaf(d, (float) vaddvq_s32(block_lanes_q4_1(&x[ib], y[ib].qs)), ms);
    }
    *s = sumf;
}

// ---------------------------------------------------------------------------
// Q5_0, Q5_1: their codes unpacked to bytes in element order, then Q8_0's
// and Q4_1's float steps (ggml_vec_dot_q5_0_q8_0, _q5_1_q8_1: the same lanes)
// ---------------------------------------------------------------------------

// Element j < 16: the low nibble of qs[j], j + 16 the high one; the fifth bit
// is bit j of qh. minus: 16 for Q5_0 (signed codes), 0 for Q5_1.
static void codes_q5(const uint8_t qh_bytes[4], const uint8_t qs[16], int minus, int8_t q[32]) {
    uint32_t qh;
    memcpy(&qh, qh_bytes, sizeof(qh));
    for (int j = 0; j < 16; j++) {
        q[j]      = (int8_t) (((qs[j] & 0xf) | (((qh >> j) & 1) << 4)) - minus);
        q[j + 16] = (int8_t) (((qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - minus);
    }
}

// As mg_vec_dot_q8_0_q8_0_neon, with Q5_0 codes.
void mg_vec_dot_q5_0_q8_0_neon(int64_t n, float * s, const void * vx, const void * vy) {
    const struct mg_block_q5_0 * x  = vx;
    const struct mg_block_q8_0 * y  = vy;
    const int64_t                nb = n / MG_QK8_0;
    float32x4_t                  acc0 = vdupq_n_f32(0.0f), acc1 = vdupq_n_f32(0.0f);
    int64_t                      ib = 0;
    int8_t                       q0[32], q1[32];
    for (; ib + 1 < nb; ib += 2) {
        codes_q5(x[ib].qh, x[ib].qs, 16, q0);
        codes_q5(x[ib + 1].qh, x[ib + 1].qs, 16, q1);
        const float d0 = mg_fp16_to_fp32(x[ib].d) * mg_fp16_to_fp32(y[ib].d);
        const float d1 = mg_fp16_to_fp32(x[ib + 1].d) * mg_fp16_to_fp32(y[ib + 1].d);
        acc0 = vaddq_f32(acc0, vmulq_n_f32(vcvtq_f32_s32(block_lanes_q8_0(q0, y[ib].qs)), d0));
        acc1 = vaddq_f32(acc1, vmulq_n_f32(vcvtq_f32_s32(block_lanes_q8_0(q1, y[ib + 1].qs)), d1));
    }
    float sumf = vaddvq_f32(acc0) + vaddvq_f32(acc1);
    for (; ib < nb; ib++) {
        codes_q5(x[ib].qh, x[ib].qs, 16, q0);
        const float d = mg_fp16_to_fp32(x[ib].d) * mg_fp16_to_fp32(y[ib].d);
        sumf          = fmaf(d, (float) block_sum_q8_0(q0, y[ib].qs), sumf);
    }
    *s = sumf;
}

// ggml_vec_dot_q5_1_q8_1, NEON: as Q4_1's, but the mins in two floats, one
// per accumulator (summs0 = fma(m0, s0, summs0)), added last:
// ((vaddvq(even) + vaddvq(odd)) + summs0) + summs1.
void mg_vec_dot_q5_1_q8_1_neon(int64_t n, float * s, const void * vx, const void * vy) {
    const struct mg_block_q5_1 * x  = vx;
    const struct mg_block_q8_1 * y  = vy;
    const int64_t                nb = n / MG_QK8_1;
    float32x4_t                  acc0 = vdupq_n_f32(0.0f), acc1 = vdupq_n_f32(0.0f);
    float                        summs0 = 0.0f, summs1 = 0.0f;
    int64_t                      ib = 0;
    int8_t                       q0[32], q1[32];
    for (; ib + 1 < nb; ib += 2) {
        summs0 = fmaf(mg_fp16_to_fp32(x[ib].m), mg_fp16_to_fp32(y[ib].s), summs0);
        summs1 = fmaf(mg_fp16_to_fp32(x[ib + 1].m), mg_fp16_to_fp32(y[ib + 1].s), summs1);
        codes_q5(x[ib].qh, x[ib].qs, 0, q0);
        codes_q5(x[ib + 1].qh, x[ib + 1].qs, 0, q1);
        const float d0 = mg_fp16_to_fp32(x[ib].d) * mg_fp16_to_fp32(y[ib].d);
        const float d1 = mg_fp16_to_fp32(x[ib + 1].d) * mg_fp16_to_fp32(y[ib + 1].d);
        acc0 = vaddq_f32(acc0, vmulq_n_f32(vcvtq_f32_s32(block_lanes_q8_0(q0, y[ib].qs)), d0));
        acc1 = vaddq_f32(acc1, vmulq_n_f32(vcvtq_f32_s32(block_lanes_q8_0(q1, y[ib + 1].qs)), d1));
    }
    float sumf = ((vaddvq_f32(acc0) + vaddvq_f32(acc1)) + summs0) + summs1;
    for (; ib < nb; ib++) {
        codes_q5(x[ib].qh, x[ib].qs, 0, q0);
        const float d  = mg_fp16_to_fp32(x[ib].d) * mg_fp16_to_fp32(y[ib].d);
        const float ms = mg_fp16_to_fp32(x[ib].m) * mg_fp16_to_fp32(y[ib].s);
        sumf           = sumf + fmaf(d, (float) block_sum_q8_0(q0, y[ib].qs), ms);
    }
    *s = sumf;
}

// ---------------------------------------------------------------------------
// K-quants x Q8_K
// ---------------------------------------------------------------------------

// A Q6_K super-block's codes minus 32, in element order (mg_dequantize_row_q6_K's layout).
static void codes_q6_K(const struct mg_block_q6_K * x, int8_t q[MG_QK_K]) {
    for (int h = 0; h < 2; h++) {
        const uint8_t * ql = x->ql + 64 * h;
        const uint8_t * qh = x->qh + 32 * h;
        int8_t *        qb = q + 128 * h;
        for (int l = 0; l < 32; l++) {
            qb[l]      = (int8_t) (((ql[l] & 0xf) | (((qh[l] >> 0) & 3) << 4)) - 32);
            qb[l + 32] = (int8_t) (((ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4)) - 32);
            qb[l + 64] = (int8_t) (((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
            qb[l + 96] = (int8_t) (((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
        }
    }
}

// The exact int sum of a super-block: sum over the 16 groups of 16 of
// scale * (codes . activations). ggml takes it as isum - 32 * isum_mins
// (unsigned codes, the -32 through bsums): the same integer.
static int32_t super_block_sum_q6_K(const struct mg_block_q6_K * x, const struct mg_block_q8_K * y) {
    int8_t q[MG_QK_K];
    codes_q6_K(x, q);
    int32_t total = 0;
    for (int g = 0; g < MG_QK_K / 16; g++) {
        const int32x4_t lanes = vdotq_s32(vdupq_n_s32(0), vld1q_s8(q + 16 * g), vld1q_s8(y->qs + 16 * g));
        total += vaddvq_s32(lanes) * x->scales[g];
    }
    return total;
}

// ggml_vec_dot_q2_K_q8_K, NEON: per super-block two fused steps, the mins
// first: sum = fma(M, -(dA * dmin), sum), then sum = fma(S, dA * d, sum);
// S = sum of (sc & 15) * codes . activations per group of 16, M = sum of
// (sc >> 4) * bsums (exact integers). Element 128h + 32k + l is bits 2k of
// qs[32h + l].
void mg_vec_dot_q2_K_q8_K_neon(int64_t n, float * s, const void * vx, const void * vy) {
    const struct mg_block_q2_K * x   = vx;
    const struct mg_block_q8_K * y   = vy;
    float                        sum = 0.0f;
    for (int64_t i = 0; i < n / MG_QK_K; i++) {
        int32_t S = 0, M = 0;
        for (int g = 0; g < 16; g++) {
            int32_t dot = 0;
            for (int e = 16 * g; e < 16 * g + 16; e++) {
                dot += ((x[i].qs[32 * (e / 128) + e % 32] >> (2 * (e % 128 / 32))) & 3) * y[i].qs[e];
            }
            S += (x[i].scales[g] & 0xf) * dot;
            M += (x[i].scales[g] >> 4) * y[i].bsums[g];
        }
        const float d    = y[i].d * mg_fp16_to_fp32(x[i].d);
        const float dmin = -(y[i].d * mg_fp16_to_fp32(x[i].dmin));
        sum              = fmaf((float) M, dmin, sum);
        sum              = fmaf((float) S, d, sum);
    }
    *s = sum;
}

// ggml_vec_dot_q3_K_q8_K, NEON: sum = fma(S, dA * d, sum) per super-block,
// S the exact sum of scale * (code - 4 where the high bit is 0) * activation.
void mg_vec_dot_q3_K_q8_K_neon(int64_t n, float * s, const void * vx, const void * vy) {
    const struct mg_block_q3_K * x   = vx;
    const struct mg_block_q8_K * y   = vy;
    float                        sum = 0.0f;
    for (int64_t i = 0; i < n / MG_QK_K; i++) {
        int32_t         S  = 0;
        const int8_t *  q8 = y[i].qs;
        const uint8_t * q  = x[i].qs;
        uint8_t         m  = 1;
        int             is = 0;
        for (int h = 0; h < 2; h++, q += 32) {   // mg_dequantize_row_q3_K's walk
            for (int shift = 0; shift < 8; shift += 2, m <<= 1) {
                for (int half = 0; half < 2; half++) {
                    const int sc  = mg_q3_K_scale(x[i].scales, is++);
                    int32_t   dot = 0;
                    for (int l = 16 * half; l < 16 * half + 16; ++l) {
                        dot += (((q[l] >> shift) & 3) - ((x[i].hmask[l] & m) ? 0 : 4)) * *q8++;
                    }
                    S += sc * dot;
                }
            }
        }
        sum = fmaf((float) S, y[i].d * mg_fp16_to_fp32(x[i].d), sum);
    }
    *s = sum;
}

// ggml_vec_dot_q6_K_q8_K, NEON: one float, per super-block
// sum += d_all * y.d * (isum - 32 * isum_mins), which GCC compiles as
// fma(d_all * y.d, (float) that integer, sum).
void mg_vec_dot_q6_K_q8_K_neon(int64_t n, float * s, const void * vx, const void * vy) {
    const struct mg_block_q6_K * x   = vx;
    const struct mg_block_q8_K * y   = vy;
    float                        sum = 0.0f;
    for (int64_t i = 0; i < n / MG_QK_K; i++) {
        sum = fmaf(mg_fp16_to_fp32(x[i].d) * y[i].d, (float) super_block_sum_q6_K(&x[i], &y[i]), sum);
    }
    *s = sum;
}

// ---------------------------------------------------------------------------
// The repacked orders (llama.cpp's CPU_REPACK buffer on this target)
// ---------------------------------------------------------------------------

// The Q4_0 codes of a block as signed bytes, in element order.
static inline void unpack_q4_0(const struct mg_block_q4_0 * b, int8_t q[32]) {
    for (int j = 0; j < 16; j++) {
        q[j]      = (int8_t) ((b->qs[j] & 0xf) - 8);
        q[j + 16] = (int8_t) ((b->qs[j] >> 4) - 8);
    }
}

// ggml_gemv_q4_0_4x4_q8_0: per block the exact int sum (vcvtq_n_f32_s32 of
// 16 times it, / 16: exact), fused into one accumulator with dA*dW
// (vfmaq_f32). Its gemm (inline assembly) does the same per output: fmul of
// the scales, scvtf #4, fmla.
void mg_gemv_q4_0_q8_0_neon(int64_t n, float * s, const void * vx, const void * vy) {
    const struct mg_block_q4_0 * x   = vx;
    const struct mg_block_q8_0 * y   = vy;
    float                        acc = 0.0f;
    for (int64_t ib = 0; ib < n / MG_QK8_0; ib++) {
        int8_t q[32];
        unpack_q4_0(&x[ib], q);
        const float d = mg_fp16_to_fp32(y[ib].d) * mg_fp16_to_fp32(x[ib].d);
        acc           = fmaf((float) block_sum_q8_0(q, y[ib].qs), d, acc);
    }
    *s = acc;
}

// ggml_gemv_q8_0_4x4_q8_0: the same chain as Q4_0's, fused (vfmaq_f32).
void mg_gemv_q8_0_q8_0_neon(int64_t n, float * s, const void * vx, const void * vy) {
    const struct mg_block_q8_0 * x   = vx;
    const struct mg_block_q8_0 * y   = vy;
    float                        acc = 0.0f;
    for (int64_t ib = 0; ib < n / MG_QK8_0; ib++) {
        const float d = mg_fp16_to_fp32(y[ib].d) * mg_fp16_to_fp32(x[ib].d);
        acc           = fmaf((float) block_sum_q8_0(x[ib].qs, y[ib].qs), d, acc);
    }
    *s = acc;
}

// ggml_gemm_q8_0_4x4_q8_0: the chain again, but added with vmlaq_f32, which
// GCC does not fuse: acc + round(dW*dA * S).
void mg_gemm_q8_0_q8_0_neon(int64_t n, float * s, const void * vx, const void * vy) {
    const struct mg_block_q8_0 * x   = vx;
    const struct mg_block_q8_0 * y   = vy;
    float                        acc = 0.0f;
    for (int64_t ib = 0; ib < n / MG_QK8_0; ib++) {
        const float d = mg_fp16_to_fp32(x[ib].d) * mg_fp16_to_fp32(y[ib].d);
        const float p = d * (float) block_sum_q8_0(x[ib].qs, y[ib].qs);
        acc           = acc + p;
    }
    *s = acc;
}

// ggml_gemv_iq4_nl_4x4_q8_0 and its gemm: per block acc = acc +
// round((dA*dW) * S) (vmlaq_f32 after vmulq_f32: not fused).
void mg_gemv_iq4_nl_q8_0_neon(int64_t n, float * s, const void * vx, const void * vy) {
    const struct mg_block_iq4_nl * x   = vx;
    const struct mg_block_q8_0 *   y   = vy;
    float                          acc = 0.0f;
    for (int64_t ib = 0; ib < n / MG_QK8_0; ib++) {
        int8_t q[32];
        for (int j = 0; j < 16; j++) {
            q[j]      = mg_kvalues_iq4nl[x[ib].qs[j] & 0xf];
            q[j + 16] = mg_kvalues_iq4nl[x[ib].qs[j] >> 4];
        }
        const float d = mg_fp16_to_fp32(y[ib].d) * mg_fp16_to_fp32(x[ib].d);
        const float p = d * (float) block_sum_q8_0(q, y[ib].qs);
        acc           = acc + p;
    }
    *s = acc;
}

// ---------------------------------------------------------------------------
// Several columns, tiles: one dot at a time (bit-identical to vec_dot)
// ---------------------------------------------------------------------------

#define NEON_COLS_AND_TILE(name)                                                                                     \
    void mg_vec_dot_cols_##name##_neon(int64_t n, float * s, const void * x, const void * y, size_t ys, int nc) {    \
        for (int c = 0; c < nc; c++) mg_vec_dot_##name##_neon(n, &s[c], x, (const char *) y + (size_t) c * ys);     \
    }                                                                                                                \
    void mg_vec_dot_tile_##name##_neon(int64_t n, float * s, size_t ss, const void * x, size_t xs, int nr,           \
                                       const void * y, size_t ys, int nc) {                                          \
        mg_vec_dot_tile_by_rows(mg_vec_dot_cols_##name##_neon, n, s, ss, x, xs, nr, y, ys, nc);                      \
    }
NEON_COLS_AND_TILE(f32)
NEON_COLS_AND_TILE(f16)
NEON_COLS_AND_TILE(q8_0_q8_0)
NEON_COLS_AND_TILE(q4_1_q8_1)
NEON_COLS_AND_TILE(q6_K_q8_K)
NEON_COLS_AND_TILE(q5_0_q8_0)
NEON_COLS_AND_TILE(q5_1_q8_1)
NEON_COLS_AND_TILE(q2_K_q8_K)
NEON_COLS_AND_TILE(q3_K_q8_K)

#else
// Not an aarch64 NEON build: vec_simd.c records the kernels' features.
typedef int mg_vec_neon_unused;
#endif // MG_NEON
