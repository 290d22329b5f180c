// Generated from full/quants.c by tools/chapgen. In a class, edit this copy freely (make chapters will not overwrite your edits); to change the engine, edit full/quants.c and run make chapters.
// quants.c - half floats and block formats (ggml-impl.h and ggml-quants.c).
//
// Each format comes as a pair: a reference quantizer that rounds exactly the
// way ggml's quantize_row_*_ref does (so our files match llama-quantize's byte
// for byte) and a dequantizer. Kernels that multiply without dequantizing
// live in vec.c (chapter 07).
#include "quants.h"

#include <math.h>
#include <string.h>

// ---------------------------------------------------------------------------
// F16 <-> F32, done on the bits so it is exact and portable.
// ---------------------------------------------------------------------------

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

static float f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

// Half: 1 sign bit, 5 exponent bits (bias 15), 10 mantissa bits. Every half
// is exactly representable as a float, so this direction never rounds.
float mg_fp16_to_fp32(mg_fp16_t h) {
    const uint32_t sign = (uint32_t) (h & 0x8000) << 16;
    const uint32_t exp  = (h >> 10) & 0x1f;
    uint32_t       mant = h & 0x3ff;
    if (exp == 0x1f) return f32_from_bits(sign | 0x7f800000 | (mant << 13));   // inf, NaN
    if (exp != 0)    return f32_from_bits(sign | ((exp + 127 - 15) << 23) | (mant << 13));
    if (mant == 0)   return f32_from_bits(sign);                                 // +-0
    // Subnormal: mant * 2^-24. Shift until the leading 1 reaches the implicit bit.
    uint32_t e = 127 - 15 + 1;
    while ((mant & 0x400) == 0) {
        mant <<= 1;
        e--;
    }
    return f32_from_bits(sign | (e << 23) | ((mant & 0x3ff) << 13));
}

// Round a value that has `shift` extra low bits to nearest, ties to even.
static uint32_t round_shift_rne(uint32_t v, uint32_t shift) {
    const uint32_t kept    = v >> shift;
    const uint32_t rest    = v & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    return kept + (rest > halfway || (rest == halfway && (kept & 1)));
}

mg_fp16_t mg_fp32_to_fp16(float f) {
    const uint32_t x    = f32_bits(f);
    const uint16_t sign = (x >> 16) & 0x8000;
    const uint32_t a    = x & 0x7fffffff;
    if (a > 0x7f800000) return sign | 0x7e00;      // NaN stays a (quiet) NaN
    if (a >= 0x477ff000) return sign | 0x7c00;     // >= 65520 rounds past 65504: inf
    if (a >= 0x38800000) {
        // A normal half: rebias the exponent (127 -> 15), drop 13 mantissa
        // bits with rounding. A carry out of the mantissa bumps the exponent,
        // which is exactly right.
        return sign | (uint16_t) round_shift_rne(a - ((127u - 15u) << 23), 13);
    }
    if (a < 0x33000000) return sign;               // below 2^-25: rounds to zero
    // A subnormal half counts units of 2^-24: take the 24-bit mantissa with
    // its implicit 1 and shift it into those units.
    const uint32_t e    = a >> 23;
    const uint32_t mant = (a & 0x7fffff) | 0x800000;
    return sign | (uint16_t) round_shift_rne(mant, 126 - e);
}

void mg_fp16_to_fp32_row(const void * x, float * y, int64_t n) {
    const mg_fp16_t * h = x;
    for (int64_t i = 0; i < n; i++) y[i] = mg_fp16_to_fp32(h[i]);
}

void mg_fp32_to_fp16_row(const float * x, void * y, int64_t n) {
    mg_fp16_t * h = y;
    for (int64_t i = 0; i < n; i++) h[i] = mg_fp32_to_fp16(x[i]);
}

void mg_f32_copy_row(const void * x, float * y, int64_t n) {
    memcpy(y, x, (size_t) n * sizeof(float));
}

// ---------------------------------------------------------------------------
// Q4_0: 32 elements -> one F16 scale + 16 bytes of 4-bit codes.
// ---------------------------------------------------------------------------

// The scale is chosen so that the element of largest magnitude maps exactly
// to code 0 (-8 * d = max): its sign decides the sign of d, which uses the
// asymmetric range -8..7 on the side where the big value is.
void mg_quantize_row_q4_0_ref(const float * x, void * vy, int64_t n) {
    struct mg_block_q4_0 * y = vy;
    for (int64_t b = 0; b < n / MG_QK4_0; b++, x += MG_QK4_0) {
        float amax = 0.0f, max = 0.0f;   // largest |x|, and x itself with its sign
        for (int j = 0; j < MG_QK4_0; j++) {
            if (amax < fabsf(x[j])) {
                amax = fabsf(x[j]);
                max  = x[j];
            }
        }
        const float d  = max / -8;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = mg_fp32_to_fp16(d);
        for (int j = 0; j < MG_QK4_0 / 2; j++) {
            // +8.5 then truncation = round to nearest, shifted into 0..16; clamp 16 to 15.
            const int q0 = (int8_t) (x[j] * id + 8.5f);
            const int q1 = (int8_t) (x[j + MG_QK4_0 / 2] * id + 8.5f);
            y[b].qs[j] = (uint8_t) ((q0 < 15 ? q0 : 15) | (q1 < 15 ? q1 : 15) << 4);
        }
    }
}

void mg_dequantize_row_q4_0(const void * vx, float * y, int64_t n) {
    const struct mg_block_q4_0 * x = vx;
    for (int64_t b = 0; b < n / MG_QK4_0; b++, y += MG_QK4_0) {
        const float d = mg_fp16_to_fp32(x[b].d);
        for (int j = 0; j < MG_QK4_0 / 2; j++) {
            y[j]                = (float) ((x[b].qs[j] & 0x0f) - 8) * d;
            y[j + MG_QK4_0 / 2] = (float) ((x[b].qs[j] >> 4) - 8) * d;
        }
    }
}

// ---------------------------------------------------------------------------
// Q8_0: 32 elements -> one F16 scale + 32 signed bytes.
// ---------------------------------------------------------------------------

void mg_quantize_row_q8_0_ref(const float * x, void * vy, int64_t n) {
    struct mg_block_q8_0 * y = vy;
    for (int64_t b = 0; b < n / MG_QK8_0; b++, x += MG_QK8_0) {
        float amax = 0.0f;
        for (int j = 0; j < MG_QK8_0; j++) amax = fmaxf(amax, fabsf(x[j]));
        const float d  = amax / 127;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = mg_fp32_to_fp16(d);
        for (int j = 0; j < MG_QK8_0; j++) {
            y[b].qs[j] = (int8_t) roundf(x[j] * id);   // roundf: ties away from zero, like ggml's reference
        }
    }
}

void mg_dequantize_row_q8_0(const void * vx, float * y, int64_t n) {
    const struct mg_block_q8_0 * x = vx;
    for (int64_t b = 0; b < n / MG_QK8_0; b++, y += MG_QK8_0) {
        const float d = mg_fp16_to_fp32(x[b].d);
        for (int j = 0; j < MG_QK8_0; j++) y[j] = (float) x[b].qs[j] * d;
    }
}
