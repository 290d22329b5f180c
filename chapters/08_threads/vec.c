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
};

const struct mg_type_traits_cpu * mg_get_type_traits_cpu(enum mg_type type) {
    if ((int) type < 0 || type >= MG_TYPE_COUNT || type_traits_cpu[type].vec_dot == NULL) return NULL;
    return &type_traits_cpu[type];
}
