//@file 07
// vec.c - dot products of a weight row with a converted activation row, the
// scalar way ggml-cpu computes them (vec.cpp, quants.c: *_generic).
//
// The integer part of each block (the sum of code products) is exact, so its
// order does not matter. The float part does: every kernel below turns its
// integer sums into floats in ggml's order, written out as in ggml, so that
// a learner can compare line by line and so that results agree to the bit.
#include "vec.h"

#include <math.h>

// ---------------------------------------------------------------------------
// Float rows
// ---------------------------------------------------------------------------

// ggml's non-SIMD build sums these float products in double; its SIMD builds
// (x86 included) sum them in float lanes. We keep one float accumulator, summed
// in order: the simplest float order, and what a naive matmul loop computes.
void mg_vec_dot_f32(int64_t n, float * s, const void * vx, const void * vy) {
    const float * x   = vx;
    const float * y   = vy;
    float         sum = 0.0f;
    for (int64_t i = 0; i < n; i++) sum += x[i] * y[i];
    *s = sum;
}

// ggml_vec_dot_f16, scalar path: each product is rounded to float, the sum is
// kept in double.
void mg_vec_dot_f16(int64_t n, float * s, const void * vx, const void * vy) {
    const mg_fp16_t * x   = vx;
    const mg_fp16_t * y   = vy;
    double            sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double) (mg_fp16_to_fp32(x[i]) * mg_fp16_to_fp32(y[i]));
    *s = (float) sum;
}
//@+ 09 vec-k-quants

// ggml_vec_dot_bf16, scalar path: as F16.
void mg_vec_dot_bf16(int64_t n, float * s, const void * vx, const void * vy) {
    const mg_bf16_t * x   = vx;
    const mg_bf16_t * y   = vy;
    double            sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double) (mg_bf16_to_fp32(x[i]) * mg_bf16_to_fp32(y[i]));
    *s = (float) sum;
}
//@- 09 vec-k-quants

// ---------------------------------------------------------------------------
// 32-element blocks x Q8_0. Per block: S = sum of (weight code) * (activation
// code), exact in int; then one or two float multiplies by the F16 scales.
// ---------------------------------------------------------------------------

// Q4_0 x Q8_0 as llama.cpp's x86 build computes it: its CPU backend repacks
// Q4_0 weights in groups of 8 rows and multiplies them with
// ggml_gemv/gemm_q4_0_8x8_q8_0 (arch/x86/repack.cpp), which per block scale
// the exact sum S once, acc = fma(S, dW * dA, acc), one chain over the blocks.
// (ggml's generic C adds (S * dW) * dA unfused: 1 ulp away at times.)
// S = sum (q - 8) * a is added as sum q * a - 8 * sum a, the same integer:
// ggml's spelling, ((q & 0xf) - 8) * a, is the loop GCC 12 vectorizes into VNNI
// wrongly (tools/vnni_canary.c), and a reference must not depend on a flag.
void mg_vec_dot_q4_0_q8_0(int64_t n, float * s, const void * vx, const void * vy) {
    const struct mg_block_q4_0 * x    = vx;
    const struct mg_block_q8_0 * y    = vy;
    float                        sumf = 0;
    for (int64_t b = 0; b < n / MG_QK4_0; b++) {
        int sumi = 0, suma = 0;
        for (int j = 0; j < MG_QK4_0 / 2; j++) {
            sumi += (x[b].qs[j] & 0xf) * y[b].qs[j] + (x[b].qs[j] >> 4) * y[b].qs[j + MG_QK4_0 / 2];
            suma += y[b].qs[j] + y[b].qs[j + MG_QK4_0 / 2];
        }
        sumi -= 8 * suma;
        sumf = fmaf(mg_fp16_to_fp32(x[b].d) * mg_fp16_to_fp32(y[b].d), (float) sumi, sumf);
    }
    *s = sumf;
}

// ggml_vec_dot_q8_0_q8_0 as ggml's x86 build computes it (AVX2 path of
// arch/x86/quants.c; llamafile's tinyBLAS_Q0_AVX adds in the same order, so
// llama.cpp's prompt and decode steps agree): each block's 32 products go
// into 8 lanes of 4 (exact ints), each lane turned to float and added to a
// float lane with one fused multiply-add by dW * dA; the 8 float lanes are
// summed at the end as hsum_float_8 does: halves, then pairs.
// (ggml's generic C, acc += S * (dW * dA) with one S per block, rounds
// differently: 2e-6 on these logits, enough to flip a later rounding.)
float mg_hsum_lanes_8(const float lanes[8]) {
    const float r0 = lanes[4] + lanes[0], r1 = lanes[5] + lanes[1];
    const float r2 = lanes[6] + lanes[2], r3 = lanes[7] + lanes[3];
    return (r0 + r2) + (r1 + r3);
}

void mg_vec_dot_q8_0_q8_0(int64_t n, float * s, const void * vx, const void * vy) {
    const struct mg_block_q8_0 * x        = vx;
    const struct mg_block_q8_0 * y        = vy;
    float                        lanes[8] = {0};
    for (int64_t b = 0; b < n / MG_QK8_0; b++) {
        const float d = mg_fp16_to_fp32(x[b].d) * mg_fp16_to_fp32(y[b].d);
        for (int l = 0; l < 8; l++) {
            int sumi = 0;
            for (int j = 4 * l; j < 4 * l + 4; j++) sumi += x[b].qs[j] * y[b].qs[j];
            lanes[l] = fmaf(d, (float) sumi, lanes[l]);
        }
    }
    *s = mg_hsum_lanes_8(lanes);
}
//@+ full more-quants

// The 32 codes of a block as ggml's x86 kernels unpack them into bytes:
// byte j holds element j (low nibbles first, then high ones).
static void q4_codes(const uint8_t qs[16], int codes[32]) {
    for (int j = 0; j < 16; j++) {
        codes[j]      = qs[j] & 0xf;
        codes[j + 16] = qs[j] >> 4;
    }
}

// One block into the 8 float lanes of ggml's x86 order (see
// mg_vec_dot_q8_0_q8_0): lane l gets the exact sum of elements 4l..4l+3,
// turned to float and fused-multiply-added with d.
static void add_block_lanes(float lanes[8], float d, const int codes[32], const int8_t * act) {
    for (int l = 0; l < 8; l++) {
        int sumi = 0;
        for (int j = 4 * l; j < 4 * l + 4; j++) sumi += codes[j] * act[j];
        lanes[l] = fmaf(d, (float) sumi, lanes[l]);
    }
}

// ggml_vec_dot_q5_0_q8_0, x86 (AVX2) order: signed codes q - 16 in lanes,
// each block's lanes += (dW * dA) * S_lane fused, summed at the end.
void mg_vec_dot_q5_0_q8_0(int64_t n, float * s, const void * vx, const void * vy) {
    const struct mg_block_q5_0 * x        = vx;
    const struct mg_block_q8_0 * y        = vy;
    float                        lanes[8] = {0};
    for (int64_t b = 0; b < n / MG_QK5_0; b++) {
        int codes[32];
        q4_codes(x[b].qs, codes);
        for (int j = 0; j < 32; j++) codes[j] = (codes[j] | (mg_qh_bit(x[b].qh, j) << 4)) - 16;
        add_block_lanes(lanes, mg_fp16_to_fp32(x[b].d) * mg_fp16_to_fp32(y[b].d), codes, y[b].qs);
    }
    *s = mg_hsum_lanes_8(lanes);
}

// IQ4_NL x Q8_0: repacked by llama.cpp's x86 build too (iq4_nl_8x8, the
// same gemv as Q4_0): acc = fma(S, dW * dA, acc), S over table values.
void mg_vec_dot_iq4_nl_q8_0(int64_t n, float * s, const void * vx, const void * vy) {
    const struct mg_block_iq4_nl * x    = vx;
    const struct mg_block_q8_0 *   y    = vy;
    float                          sumf = 0;
    for (int64_t b = 0; b < n / MG_QK4_NL; b++) {
        const float d    = mg_fp16_to_fp32(y[b].d) * mg_fp16_to_fp32(x[b].d);
        int         sumi = 0;
        for (int j = 0; j < MG_QK4_NL / 2; j++) {
            sumi += y[b].qs[j] * mg_kvalues_iq4nl[x[b].qs[j] & 0xf];
            sumi += y[b].qs[j + MG_QK4_NL / 2] * mg_kvalues_iq4nl[x[b].qs[j] >> 4];
        }
        sumf = fmaf(d, (float) sumi, sumf);
    }
    *s = sumf;
}

// ---------------------------------------------------------------------------
// Blocks with a min x Q8_1. Per block the weights are q*dW + mW, so
//   sum_i (q_i dW + mW) * a_i dA = (dW dA) * S + mW * (dA sum_i a_i)
// and Q8_1 carries sA = dA * sum_i a_i ready-made.
// ---------------------------------------------------------------------------

// ggml_vec_dot_q4_1_q8_1, x86 (AVX2) order: the codes' lanes as Q5_0, and
// the mins apart: summs += mW * sA, fused as GCC compiles ggml's line; the
// lanes summed, then summs added.
void mg_vec_dot_q4_1_q8_1(int64_t n, float * s, const void * vx, const void * vy) {
    const struct mg_block_q4_1 * x        = vx;
    const struct mg_block_q8_1 * y        = vy;
    float                        lanes[8] = {0};
    float                        summs    = 0.0f;
    for (int64_t b = 0; b < n / MG_QK4_1; b++) {
        int codes[32];
        q4_codes(x[b].qs, codes);
        summs = fmaf(mg_fp16_to_fp32(x[b].m), mg_fp16_to_fp32(y[b].s), summs);
        add_block_lanes(lanes, mg_fp16_to_fp32(x[b].d) * mg_fp16_to_fp32(y[b].d), codes, y[b].qs);
    }
    *s = mg_hsum_lanes_8(lanes) + summs;
}

// ggml_vec_dot_q5_1_q8_1, x86 (AVX2) order: as Q4_1, codes of 5 bits.
void mg_vec_dot_q5_1_q8_1(int64_t n, float * s, const void * vx, const void * vy) {
    const struct mg_block_q5_1 * x        = vx;
    const struct mg_block_q8_1 * y        = vy;
    float                        lanes[8] = {0};
    float                        summs    = 0.0f;
    for (int64_t b = 0; b < n / MG_QK5_1; b++) {
        int codes[32];
        q4_codes(x[b].qs, codes);
        for (int j = 0; j < 32; j++) codes[j] |= mg_qh_bit(x[b].qh, j) << 4;
        summs = fmaf(mg_fp16_to_fp32(x[b].m), mg_fp16_to_fp32(y[b].s), summs);
        add_block_lanes(lanes, mg_fp16_to_fp32(x[b].d) * mg_fp16_to_fp32(y[b].d), codes, y[b].qs);
    }
    *s = mg_hsum_lanes_8(lanes) + summs;
}
//@- full more-quants
//@+ 09 vec-k-quants

// ---------------------------------------------------------------------------
// K-quants x Q8_K. The integer sums go into 8 lanes (element e into lane e % 8,
// the shape of ggml's loop, which compilers vectorize), each lane times its
// sub-block scale. Per super-block, each lane is scaled by dW * dA and added
// to a float lane; the 8 float lanes are summed only at the very end. The
// mins of Q4_K/Q5_K come off per super-block through Q8_K's bsums.
// ---------------------------------------------------------------------------

static void add_lanes(float lanes[8], float d, const int32_t isum[8]) {
    for (int l = 0; l < 8; l++) lanes[l] += d * isum[l];
}

static float sum_lanes(float acc, const float lanes[8]) {
    for (int l = 0; l < 8; l++) acc += lanes[l];
    return acc;
}

// ggml_vec_dot_q4_K_q8_K_generic.
void mg_vec_dot_q4_K_q8_K(int64_t n, float * s, const void * vx, const void * vy) {
    const struct mg_block_q4_K * x        = vx;
    const struct mg_block_q8_K * y        = vy;
    float                        lanes[8] = {0};
    float                        sumf     = 0;
    for (int64_t i = 0; i < n / MG_QK_K; i++) {
        uint8_t sc[8], m[8];
        for (int j = 0; j < 8; j++) mg_get_scale_min_k4(j, x[i].scales, &sc[j], &m[j]);

        int32_t        isum[8] = {0};
        const int8_t * q8      = y[i].qs;
        for (int c = 0; c < 4; c++) {   // chunk c: sub-blocks 2c (low nibbles) and 2c+1 (high)
            for (int l = 0; l < 32; l++) {
                const uint8_t byte = x[i].qs[32 * c + l];
                isum[l % 8] += sc[2 * c] * ((byte & 0xf) * q8[64 * c + l]);
                isum[l % 8] += sc[2 * c + 1] * ((byte >> 4) * q8[64 * c + 32 + l]);
            }
        }
        int summ = 0;   // sum over 16-element groups of (their min) * (their activation sum)
        for (int j = 0; j < 16; j++) summ += y[i].bsums[j] * m[j / 2];

        add_lanes(lanes, mg_fp16_to_fp32(x[i].d) * y[i].d, isum);
        const float dmin = mg_fp16_to_fp32(x[i].dmin) * y[i].d;
        sumf -= dmin * summ;
    }
    *s = sum_lanes(sumf, lanes);
}

// ggml_vec_dot_q6_K_q8_K as ggml's x86 build computes it (AVX2 path): in
// each 32-element chunk, int lane l takes elements 4l..4l+3 times their
// sub-block scale, codes 0..63 (unsigned); the -32 of every code comes off
// afterwards through the activations' 16-element sums, lane l taking that of
// sub-blocks 2l and 2l+1: lane_l -= 32 * (bsums[2l] sc[2l] + bsums[2l+1] sc[2l+1]).
// Per super-block each lane is fused into a float lane with dA * dW; the 8
// float lanes are summed at the end (hsum_float_8). All of it is exact but
// the float steps, which are ggml's.
void mg_vec_dot_q6_K_q8_K(int64_t n, float * s, const void * vx, const void * vy) {
    const struct mg_block_q6_K * x        = vx;
    const struct mg_block_q8_K * y        = vy;
    float                        lanes[8] = {0};
    for (int64_t i = 0; i < n / MG_QK_K; i++) {
        int32_t isum[8] = {0};
        for (int h = 0; h < 2; h++) {   // each half of 128 elements: 4 chunks of 32
            const uint8_t * ql = x[i].ql + 64 * h;
            const uint8_t * qh = x[i].qh + 32 * h;
            for (int l = 0; l < 32; l++) {
                const int q[4] = {
                    (ql[l] & 0xf) | (((qh[l] >> 0) & 3) << 4), (ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4),
                    (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4), (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4),
                };
                for (int k = 0; k < 4; k++) {   // element 128h + 32k + l, sub-block 8h + 2k + l/16
                    const int e = 128 * h + 32 * k + l;
                    isum[l / 4] += x[i].scales[e / 16] * (q[k] * y[i].qs[e]);
                }
            }
        }
        for (int l = 0; l < 8; l++) {
            isum[l] -= 32 * (y[i].bsums[2 * l] * x[i].scales[2 * l] + y[i].bsums[2 * l + 1] * x[i].scales[2 * l + 1]);
        }
        const float d = y[i].d * mg_fp16_to_fp32(x[i].d);
        for (int l = 0; l < 8; l++) lanes[l] = fmaf(d, (float) isum[l], lanes[l]);
    }
    *s = mg_hsum_lanes_8(lanes);
}
//@- 09 vec-k-quants
//@+ full more-quants

// ggml_vec_dot_q2_K_q8_K_generic: no lanes; per super-block
// acc += (dA * dW) * S - (dA * dminW) * sum_j bsums_j * m_j.
void mg_vec_dot_q2_K_q8_K(int64_t n, float * s, const void * vx, const void * vy) {
    const struct mg_block_q2_K * x    = vx;
    const struct mg_block_q8_K * y    = vy;
    float                        sumf = 0;
    for (int64_t i = 0; i < n / MG_QK_K; i++) {
        const uint8_t * sc   = x[i].scales;
        int             summ = 0;
        for (int j = 0; j < 16; j++) summ += y[i].bsums[j] * (sc[j] >> 4);

        int isum = 0;
        for (int e = 0; e < MG_QK_K; e++) {   // e = 128h + 32k + l
            const int h = e / 128, k = (e % 128) / 32, l = e % 32;
            const int q = (x[i].qs[32 * h + l] >> (2 * k)) & 3;
            isum += (sc[e / 16] & 0xf) * (q * y[i].qs[e]);
        }
        const float dall = y[i].d * mg_fp16_to_fp32(x[i].d);
        const float dmin = y[i].d * mg_fp16_to_fp32(x[i].dmin);
        sumf += dall * isum - dmin * summ;
    }
    *s = sumf;
}

// ggml_vec_dot_q3_K_q8_K_generic.
void mg_vec_dot_q3_K_q8_K(int64_t n, float * s, const void * vx, const void * vy) {
    const struct mg_block_q3_K * x        = vx;
    const struct mg_block_q8_K * y        = vy;
    float                        lanes[8] = {0};
    for (int64_t i = 0; i < n / MG_QK_K; i++) {
        int32_t isum[8] = {0};
        for (int e = 0; e < MG_QK_K; e++) {   // e = 128h + 32k + l
            const int h = e / 128, k = (e % 128) / 32, l = e % 32;
            const int low2 = (x[i].qs[32 * h + l] >> (2 * k)) & 3;
            const int high = (x[i].hmask[l] >> (e / 32)) & 1;
            const int q    = low2 - (high ? 0 : 4);
            isum[e % 8] += mg_q3_K_scale(x[i].scales, e / 16) * (q * y[i].qs[e]);
        }
        add_lanes(lanes, mg_fp16_to_fp32(x[i].d) * y[i].d, isum);
    }
    *s = sum_lanes(0.0f, lanes);
}

// ggml_vec_dot_q5_K_q8_K_generic: Q4_K with a 5th bit.
void mg_vec_dot_q5_K_q8_K(int64_t n, float * s, const void * vx, const void * vy) {
    const struct mg_block_q5_K * x        = vx;
    const struct mg_block_q8_K * y        = vy;
    float                        lanes[8] = {0};
    float                        sumf     = 0;
    for (int64_t i = 0; i < n / MG_QK_K; i++) {
        uint8_t sc[8], m[8];
        for (int j = 0; j < 8; j++) mg_get_scale_min_k4(j, x[i].scales, &sc[j], &m[j]);

        int32_t        isum[8] = {0};
        const int8_t * q8      = y[i].qs;
        for (int c = 0; c < 4; c++) {
            for (int l = 0; l < 32; l++) {
                const uint8_t byte = x[i].qs[32 * c + l];
                const int     q_lo = (byte & 0xf) + 16 * ((x[i].qh[l] >> (2 * c)) & 1);
                const int     q_hi = (byte >> 4) + 16 * ((x[i].qh[l] >> (2 * c + 1)) & 1);
                isum[l % 8] += sc[2 * c] * (q_lo * q8[64 * c + l]);
                isum[l % 8] += sc[2 * c + 1] * (q_hi * q8[64 * c + 32 + l]);
            }
        }
        int summ = 0;
        for (int j = 0; j < 16; j++) summ += y[i].bsums[j] * m[j / 2];

        add_lanes(lanes, mg_fp16_to_fp32(x[i].d) * y[i].d, isum);
        const float dmin = mg_fp16_to_fp32(x[i].dmin) * y[i].d;
        sumf -= dmin * summ;
    }
    *s = sum_lanes(sumf, lanes);
}
//@- full more-quants

//@+ full dot-cols
// ---------------------------------------------------------------------------
// Several activation columns per weight row, one column at a time: what the
// table holds where there is no SIMD twin (vec_simd.c has twins that unpack
// each weight block once for all the columns). Trivially bit-identical to
// vec_dot, column by column.
// ---------------------------------------------------------------------------

#if !defined(MG_SIMD)
static void dot_cols(mg_vec_dot_fn vec_dot, int64_t n, float * s, const void * x, const void * y, size_t y_stride,
                     int n_cols) {
    for (int c = 0; c < n_cols; c++) vec_dot(n, &s[c], x, (const char *) y + (size_t) c * y_stride);
}

#if !defined(MG_NEON)   // the NEON build has its own (vec_neon.c)
static void mg_vec_dot_cols_f32(int64_t n, float * s, const void * x, const void * y, size_t ys, int nc) {
    dot_cols(mg_vec_dot_f32, n, s, x, y, ys, nc);
}

static void mg_vec_dot_cols_f16(int64_t n, float * s, const void * x, const void * y, size_t ys, int nc) {
    dot_cols(mg_vec_dot_f16, n, s, x, y, ys, nc);
}
#endif

static void mg_vec_dot_cols_bf16(int64_t n, float * s, const void * x, const void * y, size_t ys, int nc) {
    dot_cols(mg_vec_dot_bf16, n, s, x, y, ys, nc);
}

static void mg_vec_dot_cols_q4_0_q8_0(int64_t n, float * s, const void * x, const void * y, size_t ys, int nc) {
    dot_cols(mg_vec_dot_q4_0_q8_0, n, s, x, y, ys, nc);
}

#if !defined(MG_NEON)
static void mg_vec_dot_cols_q4_1_q8_1(int64_t n, float * s, const void * x, const void * y, size_t ys, int nc) {
    dot_cols(mg_vec_dot_q4_1_q8_1, n, s, x, y, ys, nc);
}
#endif

#if !defined(MG_NEON)
static void mg_vec_dot_cols_q5_0_q8_0(int64_t n, float * s, const void * x, const void * y, size_t ys, int nc) {
    dot_cols(mg_vec_dot_q5_0_q8_0, n, s, x, y, ys, nc);
}
#endif

#if !defined(MG_NEON)
static void mg_vec_dot_cols_q5_1_q8_1(int64_t n, float * s, const void * x, const void * y, size_t ys, int nc) {
    dot_cols(mg_vec_dot_q5_1_q8_1, n, s, x, y, ys, nc);
}
#endif

#if !defined(MG_NEON)
static void mg_vec_dot_cols_q8_0_q8_0(int64_t n, float * s, const void * x, const void * y, size_t ys, int nc) {
    dot_cols(mg_vec_dot_q8_0_q8_0, n, s, x, y, ys, nc);
}
#endif

static void mg_vec_dot_cols_iq4_nl_q8_0(int64_t n, float * s, const void * x, const void * y, size_t ys, int nc) {
    dot_cols(mg_vec_dot_iq4_nl_q8_0, n, s, x, y, ys, nc);
}

#if !defined(MG_NEON)
static void mg_vec_dot_cols_q2_K_q8_K(int64_t n, float * s, const void * x, const void * y, size_t ys, int nc) {
    dot_cols(mg_vec_dot_q2_K_q8_K, n, s, x, y, ys, nc);
}
#endif

#if !defined(MG_NEON)
static void mg_vec_dot_cols_q3_K_q8_K(int64_t n, float * s, const void * x, const void * y, size_t ys, int nc) {
    dot_cols(mg_vec_dot_q3_K_q8_K, n, s, x, y, ys, nc);
}
#endif

static void mg_vec_dot_cols_q4_K_q8_K(int64_t n, float * s, const void * x, const void * y, size_t ys, int nc) {
    dot_cols(mg_vec_dot_q4_K_q8_K, n, s, x, y, ys, nc);
}

static void mg_vec_dot_cols_q5_K_q8_K(int64_t n, float * s, const void * x, const void * y, size_t ys, int nc) {
    dot_cols(mg_vec_dot_q5_K_q8_K, n, s, x, y, ys, nc);
}

#if !defined(MG_NEON)
static void mg_vec_dot_cols_q6_K_q8_K(int64_t n, float * s, const void * x, const void * y, size_t ys, int nc) {
    dot_cols(mg_vec_dot_q6_K_q8_K, n, s, x, y, ys, nc);
}
#endif
#endif
//@- full dot-cols
//@+ full dot-tile

// ---------------------------------------------------------------------------
// Tiles of rows x columns, one weight row at a time through vec_dot_cols:
// the tile of every type in the scalar build, and of the types without a
// SIMD tile kernel (vec_simd.c). Bit-identical to vec_dot because
// vec_dot_cols is.
// ---------------------------------------------------------------------------

void mg_vec_dot_tile_by_rows(mg_vec_dot_cols_fn vec_dot_cols, int64_t n, float * s, size_t s_stride, const void * x,
                             size_t x_stride, int n_rows, const void * y, size_t y_stride, int n_cols) {
    MG_ASSERT(n_rows >= 1 && n_rows <= MG_VEC_DOT_MAX_ROWS && n_cols >= 1 && n_cols <= MG_VEC_DOT_MAX_COLS);
    for (int r = 0; r < n_rows; r++) {
        float row[MG_VEC_DOT_MAX_COLS];
        vec_dot_cols(n, row, (const char *) x + (size_t) r * x_stride, y, y_stride, n_cols);
        for (int c = 0; c < n_cols; c++) s[(size_t) c * s_stride + (size_t) r] = row[c];
    }
}

#if !defined(MG_SIMD)
#define TILE_ARGS int64_t n, float * s, size_t ss, const void * x, size_t xs, int nr, const void * y, size_t ys, int nc
#define TILE_PASS n, s, ss, x, xs, nr, y, ys, nc

#if !defined(MG_NEON)   // the NEON build has its own (vec_neon.c)
static void mg_vec_dot_tile_f32(TILE_ARGS) { mg_vec_dot_tile_by_rows(mg_vec_dot_cols_f32, TILE_PASS); }
static void mg_vec_dot_tile_f16(TILE_ARGS) { mg_vec_dot_tile_by_rows(mg_vec_dot_cols_f16, TILE_PASS); }
#endif
static void mg_vec_dot_tile_bf16(TILE_ARGS) { mg_vec_dot_tile_by_rows(mg_vec_dot_cols_bf16, TILE_PASS); }
static void mg_vec_dot_tile_q4_0_q8_0(TILE_ARGS) { mg_vec_dot_tile_by_rows(mg_vec_dot_cols_q4_0_q8_0, TILE_PASS); }
#if !defined(MG_NEON)
static void mg_vec_dot_tile_q4_1_q8_1(TILE_ARGS) { mg_vec_dot_tile_by_rows(mg_vec_dot_cols_q4_1_q8_1, TILE_PASS); }
#endif
#if !defined(MG_NEON)
static void mg_vec_dot_tile_q5_0_q8_0(TILE_ARGS) { mg_vec_dot_tile_by_rows(mg_vec_dot_cols_q5_0_q8_0, TILE_PASS); }
#endif
#if !defined(MG_NEON)
static void mg_vec_dot_tile_q5_1_q8_1(TILE_ARGS) { mg_vec_dot_tile_by_rows(mg_vec_dot_cols_q5_1_q8_1, TILE_PASS); }
#endif
#if !defined(MG_NEON)
static void mg_vec_dot_tile_q8_0_q8_0(TILE_ARGS) { mg_vec_dot_tile_by_rows(mg_vec_dot_cols_q8_0_q8_0, TILE_PASS); }
#endif
static void mg_vec_dot_tile_iq4_nl_q8_0(TILE_ARGS) { mg_vec_dot_tile_by_rows(mg_vec_dot_cols_iq4_nl_q8_0, TILE_PASS); }
#if !defined(MG_NEON)
static void mg_vec_dot_tile_q2_K_q8_K(TILE_ARGS) { mg_vec_dot_tile_by_rows(mg_vec_dot_cols_q2_K_q8_K, TILE_PASS); }
#endif
#if !defined(MG_NEON)
static void mg_vec_dot_tile_q3_K_q8_K(TILE_ARGS) { mg_vec_dot_tile_by_rows(mg_vec_dot_cols_q3_K_q8_K, TILE_PASS); }
#endif
static void mg_vec_dot_tile_q4_K_q8_K(TILE_ARGS) { mg_vec_dot_tile_by_rows(mg_vec_dot_cols_q4_K_q8_K, TILE_PASS); }
static void mg_vec_dot_tile_q5_K_q8_K(TILE_ARGS) { mg_vec_dot_tile_by_rows(mg_vec_dot_cols_q5_K_q8_K, TILE_PASS); }
#if !defined(MG_NEON)
static void mg_vec_dot_tile_q6_K_q8_K(TILE_ARGS) { mg_vec_dot_tile_by_rows(mg_vec_dot_cols_q6_K_q8_K, TILE_PASS); }
#endif

#undef TILE_ARGS
#undef TILE_PASS
#endif
//@- full dot-tile

// ---------------------------------------------------------------------------
// The table (ggml-cpu.c, type_traits_cpu[]). from_float says how mul_mat
// converts the activations for this weight type, vec_dot how it multiplies.
// ---------------------------------------------------------------------------

#if 0 //@old 07..09 cpu-table
static const struct mg_type_traits_cpu type_traits_cpu[MG_TYPE_COUNT] = {
    [MG_TYPE_F32] = {.from_float = NULL, .vec_dot = mg_vec_dot_f32, .vec_dot_type = MG_TYPE_F32},
    [MG_TYPE_F16] = {.from_float = mg_fp32_to_fp16_row, .vec_dot = mg_vec_dot_f16, .vec_dot_type = MG_TYPE_F16},
    [MG_TYPE_Q4_0] = {
        .from_float = mg_quantize_row_q8_0, .vec_dot = mg_vec_dot_q4_0_q8_0, .vec_dot_type = MG_TYPE_Q8_0,
    },
    [MG_TYPE_Q8_0] = {
        .from_float = mg_quantize_row_q8_0, .vec_dot = mg_vec_dot_q8_0_q8_0, .vec_dot_type = MG_TYPE_Q8_0,
    },
    //@+ 09 vec-k-quants-table
    [MG_TYPE_BF16] = {.from_float = mg_fp32_to_bf16_row, .vec_dot = mg_vec_dot_bf16, .vec_dot_type = MG_TYPE_BF16},
    [MG_TYPE_Q4_K] = {
        .from_float = mg_quantize_row_q8_K, .vec_dot = mg_vec_dot_q4_K_q8_K, .vec_dot_type = MG_TYPE_Q8_K,
    },
    [MG_TYPE_Q6_K] = {
        .from_float = mg_quantize_row_q8_K, .vec_dot = mg_vec_dot_q6_K_q8_K, .vec_dot_type = MG_TYPE_Q8_K,
    },
    //@- 09 vec-k-quants-table
};
#endif //@old cpu-table
//@+ full cpu-table
// full/: every type of the quantization family, each with its multi-column
// entry. K(f) is f's SIMD twin f##_simd when the build has them (MG_SIMD, see
// vec_simd.h) and f itself otherwise, so one table serves both builds.
// On aarch64 NEON (MG_NEON) N(f) is f's NEON twin (vec_neon.c) for the
// types that have one, and K(f) stays the scalar kernel. P(f), a panel
// (vec.h), exists only as a SIMD kernel: NULL elsewhere, and mul_mat then
// takes the tiles.
#if defined(MG_SIMD)
#define K(f) f##_simd
#define N(f) f##_simd
#define P(f) f##_simd
#elif defined(MG_NEON)
#define K(f) f
#define N(f) f##_neon
#define P(f) NULL
#else
#define K(f) f
#define N(f) f
#define P(f) NULL
#endif

static const struct mg_type_traits_cpu type_traits_cpu[MG_TYPE_COUNT] = {
    [MG_TYPE_F32] = {
        .from_float = NULL, .vec_dot_type = MG_TYPE_F32,
        .vec_dot = N(mg_vec_dot_f32), .vec_dot_cols = N(mg_vec_dot_cols_f32),
        .vec_dot_tile = N(mg_vec_dot_tile_f32),
    },
    [MG_TYPE_F16] = {
        .from_float = K(mg_fp32_to_fp16_row), .vec_dot_type = MG_TYPE_F16,
        .vec_dot = N(mg_vec_dot_f16), .vec_dot_cols = N(mg_vec_dot_cols_f16),
        .vec_dot_tile = N(mg_vec_dot_tile_f16),
    },
    [MG_TYPE_BF16] = {
        .from_float = K(mg_fp32_to_bf16_row), .vec_dot_type = MG_TYPE_BF16,
        .vec_dot = K(mg_vec_dot_bf16), .vec_dot_cols = K(mg_vec_dot_cols_bf16),
        .vec_dot_tile = K(mg_vec_dot_tile_bf16),
    },
    [MG_TYPE_Q4_0] = {
        .from_float = N(mg_quantize_row_q8_0), .vec_dot_type = MG_TYPE_Q8_0,
        .vec_dot = K(mg_vec_dot_q4_0_q8_0), .vec_dot_cols = K(mg_vec_dot_cols_q4_0_q8_0),
        .vec_dot_tile = K(mg_vec_dot_tile_q4_0_q8_0),
    },
    [MG_TYPE_Q4_1] = {
        .from_float = N(mg_quantize_row_q8_1), .vec_dot_type = MG_TYPE_Q8_1,
        .vec_dot = N(mg_vec_dot_q4_1_q8_1), .vec_dot_cols = N(mg_vec_dot_cols_q4_1_q8_1),
        .vec_dot_tile = N(mg_vec_dot_tile_q4_1_q8_1),
        .vec_dot_panel = P(mg_vec_dot_panel_q4_1_q8_1),
    },
    [MG_TYPE_Q5_0] = {
        .from_float = N(mg_quantize_row_q8_0), .vec_dot_type = MG_TYPE_Q8_0,
        .vec_dot = N(mg_vec_dot_q5_0_q8_0), .vec_dot_cols = N(mg_vec_dot_cols_q5_0_q8_0),
        .vec_dot_tile = N(mg_vec_dot_tile_q5_0_q8_0),
        .vec_dot_panel = P(mg_vec_dot_panel_q5_0_q8_0),
    },
    [MG_TYPE_Q5_1] = {
        .from_float = N(mg_quantize_row_q8_1), .vec_dot_type = MG_TYPE_Q8_1,
        .vec_dot = N(mg_vec_dot_q5_1_q8_1), .vec_dot_cols = N(mg_vec_dot_cols_q5_1_q8_1),
        .vec_dot_tile = N(mg_vec_dot_tile_q5_1_q8_1),
        .vec_dot_panel = P(mg_vec_dot_panel_q5_1_q8_1),
    },
    [MG_TYPE_Q8_0] = {
        .from_float = N(mg_quantize_row_q8_0), .vec_dot_type = MG_TYPE_Q8_0,
        .vec_dot = N(mg_vec_dot_q8_0_q8_0), .vec_dot_cols = N(mg_vec_dot_cols_q8_0_q8_0),
        .vec_dot_tile = N(mg_vec_dot_tile_q8_0_q8_0),
        .vec_dot_panel = P(mg_vec_dot_panel_q8_0_q8_0),
    },
    [MG_TYPE_IQ4_NL] = {
        .from_float = N(mg_quantize_row_q8_0), .vec_dot_type = MG_TYPE_Q8_0,
        .vec_dot = K(mg_vec_dot_iq4_nl_q8_0), .vec_dot_cols = K(mg_vec_dot_cols_iq4_nl_q8_0),
        .vec_dot_tile = K(mg_vec_dot_tile_iq4_nl_q8_0),
    },
    [MG_TYPE_Q2_K] = {
        .from_float = N(mg_quantize_row_q8_K), .vec_dot_type = MG_TYPE_Q8_K,
        .vec_dot = N(mg_vec_dot_q2_K_q8_K), .vec_dot_cols = N(mg_vec_dot_cols_q2_K_q8_K),
        .vec_dot_tile = N(mg_vec_dot_tile_q2_K_q8_K),
    },
    [MG_TYPE_Q3_K] = {
        .from_float = N(mg_quantize_row_q8_K), .vec_dot_type = MG_TYPE_Q8_K,
        .vec_dot = N(mg_vec_dot_q3_K_q8_K), .vec_dot_cols = N(mg_vec_dot_cols_q3_K_q8_K),
        .vec_dot_tile = N(mg_vec_dot_tile_q3_K_q8_K),
    },
    [MG_TYPE_Q4_K] = {
        .from_float = N(mg_quantize_row_q8_K), .vec_dot_type = MG_TYPE_Q8_K,
        .vec_dot = K(mg_vec_dot_q4_K_q8_K), .vec_dot_cols = K(mg_vec_dot_cols_q4_K_q8_K),
        .vec_dot_tile = K(mg_vec_dot_tile_q4_K_q8_K),
    },
    [MG_TYPE_Q5_K] = {
        .from_float = N(mg_quantize_row_q8_K), .vec_dot_type = MG_TYPE_Q8_K,
        .vec_dot = K(mg_vec_dot_q5_K_q8_K), .vec_dot_cols = K(mg_vec_dot_cols_q5_K_q8_K),
        .vec_dot_tile = K(mg_vec_dot_tile_q5_K_q8_K),
    },
    [MG_TYPE_Q6_K] = {
        .from_float = N(mg_quantize_row_q8_K), .vec_dot_type = MG_TYPE_Q8_K,
        .vec_dot = N(mg_vec_dot_q6_K_q8_K), .vec_dot_cols = N(mg_vec_dot_cols_q6_K_q8_K),
        .vec_dot_tile = N(mg_vec_dot_tile_q6_K_q8_K),
    },
};
#undef K
#undef N
#undef P
//@- full cpu-table

const struct mg_type_traits_cpu * mg_get_type_traits_cpu(enum mg_type type) {
    if ((int) type < 0 || type >= MG_TYPE_COUNT || type_traits_cpu[type].vec_dot == NULL) return NULL;
    return &type_traits_cpu[type];
}
