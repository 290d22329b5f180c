// Generated from full/quants.h by tools/chapgen. In a class, edit this copy freely (make chapters will not overwrite your edits); to change the engine, edit full/quants.h and run make chapters.
// quants.h - half floats and the quantized block formats, bit for bit as ggml
// stores them (ggml-common.h), so a block read from a GGUF file decodes here.
//
// A quantized row is a sequence of blocks. Q4_0, for example, packs 32 floats
// into 18 bytes: one F16 scale d and 32 four-bit codes q, and element i is
// (q_i - 8) * d. Two codes share a byte: element j in the low nibble of byte j,
// element j+16 in the high nibble.
//
//     float x[32] = {...};
//     struct mg_block_q4_0 b;
//     mg_quantize_row_q4_0_ref(x, &b, 32);      // 128 bytes -> 18 bytes
//     float y[32];
//     mg_dequantize_row_q4_0(&b, y, 32);        // y is x, up to d/2 per element
//
// Every row function here has the signature of mg_to_float_fn or
// mg_from_float_fn (tensor.h) so it can sit in the type traits table.
#pragma once

#include "tensor.h"

#include <assert.h>
#include <string.h>

typedef uint16_t mg_fp16_t;   // IEEE 754 binary16, stored little-endian

// Exact widening; rounding to nearest even on the way down (docs/formats.md 2.2).
float     mg_fp16_to_fp32(mg_fp16_t h);
mg_fp16_t mg_fp32_to_fp16(float f);

void mg_fp16_to_fp32_row(const void  * x, float * y, int64_t n);
void mg_fp32_to_fp16_row(const float * x, void  * y, int64_t n);
void mg_f32_copy_row    (const void  * x, float * y, int64_t n);   // F32 "decoding" is a copy

#define MG_QK4_0 32
struct mg_block_q4_0 {
    mg_fp16_t d;                  // scale
    uint8_t   qs[MG_QK4_0 / 2];   // codes 0..15, element j low nibble, j+16 high nibble
};
static_assert(sizeof(struct mg_block_q4_0) == 18, "q4_0 block is 18 bytes");

#define MG_QK8_0 32
struct mg_block_q8_0 {
    mg_fp16_t d;                  // scale
    int8_t    qs[MG_QK8_0];       // codes -127..127
};
static_assert(sizeof(struct mg_block_q8_0) == 34, "q8_0 block is 34 bytes");

// n must be a multiple of the block size. The _ref quantizers round exactly as
// ggml's quantize_row_*_ref do, so their bytes equal llama-quantize's.
void mg_quantize_row_q4_0_ref(const float * x, void * y, int64_t n);
void mg_dequantize_row_q4_0  (const void  * x, float * y, int64_t n);
void mg_quantize_row_q8_0_ref(const float * x, void * y, int64_t n);
void mg_dequantize_row_q8_0  (const void  * x, float * y, int64_t n);

// Round to the nearest integer, ties to even, exactly as ggml's nearest_int
// (ggml-quants.c): adding 1.5 * 2^23 leaves no room for fraction bits, so the
// FPU rounds (to nearest even) and the integer can be read from the low 22
// mantissa bits. Exact for |f| < 2^22; quantizers call it on small values.
static inline int mg_nearest_int(float f) {
    const float v = f + 12582912.0f;
    int32_t     i;
    memcpy(&i, &v, sizeof(i));
    return (i & 0x007fffff) - 0x00400000;
}

// The activation side of a matmul (chapter 07): before Q4_0 or Q8_0 weights
// are multiplied, each F32 activation row is quantized to Q8_0. ggml's x86
// build (arch/x86/quants.c, quantize_row_q8_0; AVX, AVX2 and AVX-512 alike)
// does not round like the reference: it multiplies by 127/amax rather than by
// 1/d, and rounds ties to even (x = 2.5 * d gives 2, where _ref gives 3). The
// reference outputs in the fixtures were made on x86, so this is the rule.
void mg_quantize_row_q8_0(const float * x, void * y, int64_t n);

// ---------------------------------------------------------------------------
// BF16 ("brain float"): the top 16 bits of an F32. Same 8-bit exponent, so the
// same range as F32, but only 7 mantissa bits (about 3 decimal digits).
//
//     bit  15 | 14 ........ 7 | 6 ..... 0
//          s  |  exponent (8) | mantissa (7)
// ---------------------------------------------------------------------------

typedef uint16_t mg_bf16_t;

float     mg_bf16_to_fp32(mg_bf16_t h);   // exact: the bits move up by 16
mg_bf16_t mg_fp32_to_bf16(float f);       // round to nearest even; a NaN stays a (quiet) NaN

void mg_bf16_to_fp32_row(const void  * x, float * y, int64_t n);
void mg_fp32_to_bf16_row(const float * x, void  * y, int64_t n);

// ---------------------------------------------------------------------------
// K-quants (ggml-common.h): 256 elements per super-block, cut into sub-blocks
// of 16 or 32 that each get a small integer scale (and min). The super-block
// stores one F16 factor for those scales, so a 6-bit sub-block scale costs
// 6/32 bits per weight instead of the 16/32 of an F16 scale per 32 elements.
// ---------------------------------------------------------------------------

#define MG_QK_K         256   // elements per super-block
#define MG_K_SCALE_SIZE 12    // bytes holding 8 six-bit scales and 8 six-bit mins

// Q4_K, 4.5 bits per weight. Element e is in sub-block j = e/32, whose scale
// sc_j and min m_j (6 bits each) are packed in scales[12]; the value is
// (d * sc_j) * q - (dmin * m_j) with q a 4-bit code.
struct mg_block_q4_K {
    mg_fp16_t d;                         // factor of the sub-block scales
    mg_fp16_t dmin;                      // factor of the sub-block mins
    uint8_t   scales[MG_K_SCALE_SIZE];   // sc_0..7 and m_0..7, 6 bits each
    uint8_t   qs[MG_QK_K / 2];           // 64 elements per 32 bytes: low nibbles, then high
};
static_assert(sizeof(struct mg_block_q4_K) == 144, "q4_K block is 144 bytes");

// Q6_K, 6.5625 bits per weight. 16 sub-blocks of 16, each with a signed 8-bit
// scale; the value is (d * sc_j) * (q - 32) with q a 6-bit code split into 4
// low bits (ql) and 2 high bits (qh).
struct mg_block_q6_K {
    uint8_t   ql[MG_QK_K / 2];    // low 4 bits of the codes
    uint8_t   qh[MG_QK_K / 4];    // high 2 bits, four codes per byte
    int8_t    scales[MG_QK_K / 16];
    mg_fp16_t d;                  // note: at the end, unlike Q4_K
};
static_assert(sizeof(struct mg_block_q6_K) == 210, "q6_K block is 210 bytes");

// Q8_K: the activation side of every K-quant matmul. One F32 scale (which may
// be negative: it is -max/127 of the signed maximum) and the sums of each 16
// codes, precomputed so that K-quant mins cost one multiply per 16 elements.
struct mg_block_q8_K {
    float   d;
    int8_t  qs[MG_QK_K];
    int16_t bsums[MG_QK_K / 16];
};
static_assert(sizeof(struct mg_block_q8_K) == 292, "q8_K block is 292 bytes");

// The 12 bytes of Q4_K/Q5_K scales hold eight 6-bit scales sc_j and eight
// 6-bit mins m_j (ggml: get_scale_min_k4):
//   bytes 0..3  : sc_0..3 in bits 0-5; bits 6-7 carry the top 2 bits of sc_4..7
//   bytes 4..7  : m_0..3  in bits 0-5; bits 6-7 carry the top 2 bits of m_4..7
//   bytes 8..11 : the low 4 bits of sc_4..7 | the low 4 bits of m_4..7 << 4
static inline void mg_get_scale_min_k4(int j, const uint8_t * q, uint8_t * sc, uint8_t * m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m  = q[j + 4] & 63;
    } else {
        *sc = (uint8_t) ((q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4));
        *m  = (uint8_t) ((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

// n must be a multiple of MG_QK_K. The _ref quantizers are bit-exact with
// ggml's quantize_row_q*_K_ref, which is what llama-quantize runs when it has
// no importance matrix.
void mg_dequantize_row_q4_K  (const void  * x, float * y, int64_t n);
void mg_dequantize_row_q6_K  (const void  * x, float * y, int64_t n);
void mg_quantize_row_q8_K_ref(const float * x, void * y, int64_t n);
void mg_dequantize_row_q8_K  (const void  * x, float * y, int64_t n);
// Activations for K-quant matmuls: every platform uses the reference rule here.
void mg_quantize_row_q8_K    (const float * x, void * y, int64_t n);
