// Generated from full/vec.c by tools/chapgen. In a class, edit this copy freely (make chapters will not overwrite your edits); to change the engine, edit full/vec.c and run make chapters.
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

// ggml_vec_dot_bf16, scalar path: as F16.
void mg_vec_dot_bf16(int64_t n, float * s, const void * vx, const void * vy) {
    const mg_bf16_t * x   = vx;
    const mg_bf16_t * y   = vy;
    double            sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double) (mg_bf16_to_fp32(x[i]) * mg_bf16_to_fp32(y[i]));
    *s = (float) sum;
}

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

// ---------------------------------------------------------------------------
// The table (ggml-cpu.c, type_traits_cpu[]). from_float says how mul_mat
// converts the activations for this weight type, vec_dot how it multiplies.
// ---------------------------------------------------------------------------

static const struct mg_type_traits_cpu type_traits_cpu[MG_TYPE_COUNT] = {
    [MG_TYPE_F32] = {.from_float = NULL, .vec_dot = mg_vec_dot_f32, .vec_dot_type = MG_TYPE_F32},
    [MG_TYPE_F16] = {.from_float = mg_fp32_to_fp16_row, .vec_dot = mg_vec_dot_f16, .vec_dot_type = MG_TYPE_F16},
    [MG_TYPE_Q4_0] = {
        .from_float = mg_quantize_row_q8_0, .vec_dot = mg_vec_dot_q4_0_q8_0, .vec_dot_type = MG_TYPE_Q8_0,
    },
    [MG_TYPE_Q8_0] = {
        .from_float = mg_quantize_row_q8_0, .vec_dot = mg_vec_dot_q8_0_q8_0, .vec_dot_type = MG_TYPE_Q8_0,
    },
    [MG_TYPE_BF16] = {.from_float = mg_fp32_to_bf16_row, .vec_dot = mg_vec_dot_bf16, .vec_dot_type = MG_TYPE_BF16},
    [MG_TYPE_Q4_K] = {
        .from_float = mg_quantize_row_q8_K, .vec_dot = mg_vec_dot_q4_K_q8_K, .vec_dot_type = MG_TYPE_Q8_K,
    },
    [MG_TYPE_Q6_K] = {
        .from_float = mg_quantize_row_q8_K, .vec_dot = mg_vec_dot_q6_K_q8_K, .vec_dot_type = MG_TYPE_Q8_K,
    },
};

const struct mg_type_traits_cpu * mg_get_type_traits_cpu(enum mg_type type) {
    if ((int) type < 0 || type >= MG_TYPE_COUNT || type_traits_cpu[type].vec_dot == NULL) return NULL;
    return &type_traits_cpu[type];
}
