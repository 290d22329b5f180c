//@file 01
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
//@+ 07 nearest-int
#include <string.h>
//@- 07 nearest-int

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
//@+ 07 nearest-int

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
//@- 07 nearest-int
//@+ 07 q8_0-activations

// The activation side of a matmul (chapter 07): before Q4_0 or Q8_0 weights
// are multiplied, each F32 activation row is quantized to Q8_0. ggml's x86
// build (arch/x86/quants.c, quantize_row_q8_0; AVX, AVX2 and AVX-512 alike)
// does not round like the reference: it multiplies by 127/amax rather than by
// 1/d, and rounds ties to even (x = 2.5 * d gives 2, where _ref gives 3). The
// reference outputs in the fixtures were made on x86, so this is the rule.
void mg_quantize_row_q8_0(const float * x, void * y, int64_t n);
//@- 07 q8_0-activations
//@+ 09 bf16

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
//@- 09 bf16
//@+ 09 k-quants

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
//@+ full k-quantize
void mg_quantize_row_q4_K_ref(const float * x, void * y, int64_t n);
//@- full k-quantize
void mg_dequantize_row_q4_K  (const void  * x, float * y, int64_t n);
//@+ full k-quantize
void mg_quantize_row_q6_K_ref(const float * x, void * y, int64_t n);
//@- full k-quantize
void mg_dequantize_row_q6_K  (const void  * x, float * y, int64_t n);
void mg_quantize_row_q8_K_ref(const float * x, void * y, int64_t n);
void mg_dequantize_row_q8_K  (const void  * x, float * y, int64_t n);
// Activations for K-quant matmuls: every platform uses the reference rule here.
void mg_quantize_row_q8_K    (const float * x, void * y, int64_t n);
//@- 09 k-quants
//@+ full more-quants

// ---------------------------------------------------------------------------
// The rest of the family (full only). Same conventions: in every 32-element
// format, byte qs[j] holds element j in its low nibble and element j+16 in its
// high nibble; a 5th bit, where there is one, is bit i of qh read as a
// little-endian u32.
// ---------------------------------------------------------------------------

#define MG_QK4_1 32
struct mg_block_q4_1 {             // x = q * d + m, q = 0..15
    mg_fp16_t d;
    mg_fp16_t m;                   // the block minimum
    uint8_t   qs[MG_QK4_1 / 2];
};
static_assert(sizeof(struct mg_block_q4_1) == 20, "q4_1 block is 20 bytes");

#define MG_QK5_0 32
struct mg_block_q5_0 {             // x = (q - 16) * d, q = 0..31
    mg_fp16_t d;
    uint8_t   qh[4];               // the 5th bit of each code
    uint8_t   qs[MG_QK5_0 / 2];    // the low 4 bits
};
static_assert(sizeof(struct mg_block_q5_0) == 22, "q5_0 block is 22 bytes");

#define MG_QK5_1 32
struct mg_block_q5_1 {             // x = q * d + m, q = 0..31
    mg_fp16_t d;
    mg_fp16_t m;
    uint8_t   qh[4];
    uint8_t   qs[MG_QK5_1 / 2];
};
static_assert(sizeof(struct mg_block_q5_1) == 24, "q5_1 block is 24 bytes");

// The 5th bit of element j (0..31) of a Q5_0/Q5_1 block.
static inline int mg_qh_bit(const uint8_t qh[4], int j) {
    return (qh[j / 8] >> (j % 8)) & 1;
}

#define MG_QK8_1 32
struct mg_block_q8_1 {             // activations for Q4_1/Q5_1: x = q * d
    mg_fp16_t d;
    mg_fp16_t s;                   // d * (sum of qs): pays for the weights' m in one multiply
    int8_t    qs[MG_QK8_1];
};
static_assert(sizeof(struct mg_block_q8_1) == 36, "q8_1 block is 36 bytes");

// Q2_K, 2.625 bits per weight: 16 sub-blocks of 16, a 4-bit scale and a 4-bit
// min each; x = (d * sc_j) * q - (dmin * m_j), q = 0..3.
struct mg_block_q2_K {
    uint8_t   scales[MG_QK_K / 16];   // sc_j in the low nibble, m_j in the high nibble
    uint8_t   qs[MG_QK_K / 4];        // four 2-bit codes per byte
    mg_fp16_t d;
    mg_fp16_t dmin;
};
static_assert(sizeof(struct mg_block_q2_K) == 84, "q2_K block is 84 bytes");

// Q3_K, 3.4375 bits per weight: 16 sub-blocks of 16 with a 6-bit signed scale
// (stored + 32); x = (d * (sc_j - 32)) * q, q = -4..3 from 2 low bits and a
// high bit that, when clear, subtracts 4.
struct mg_block_q3_K {
    uint8_t   hmask[MG_QK_K / 8];       // the high bits: element e is bit e/32 of hmask[e%32]
    uint8_t   qs[MG_QK_K / 4];          // the low 2 bits, four codes per byte
    uint8_t   scales[MG_K_SCALE_SIZE];  // 16 six-bit scales
    mg_fp16_t d;
};
static_assert(sizeof(struct mg_block_q3_K) == 110, "q3_K block is 110 bytes");

// The signed scale of sub-block j (0..15) of a Q3_K block, -32..31.
static inline int mg_q3_K_scale(const uint8_t * scales, int j) {
    const int low4  = j < 8 ? scales[j] & 0xf : scales[j - 8] >> 4;
    const int high2 = (scales[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (low4 | (high2 << 4)) - 32;
}

// Q5_K, 5.5 bits per weight: Q4_K plus a 5th bit per code.
struct mg_block_q5_K {
    mg_fp16_t d;
    mg_fp16_t dmin;
    uint8_t   scales[MG_K_SCALE_SIZE];
    uint8_t   qh[MG_QK_K / 8];          // element e: bit e/32 of qh[e%32]
    uint8_t   qs[MG_QK_K / 2];
};
static_assert(sizeof(struct mg_block_q5_K) == 176, "q5_K block is 176 bytes");

// IQ4_NL, 4.5 bits per weight: like Q4_0, but the 16 codes index a non-linear
// table that puts more levels near zero, where most weights are: x = d * K[q].
#define MG_QK4_NL 32
struct mg_block_iq4_nl {
    mg_fp16_t d;
    uint8_t   qs[MG_QK4_NL / 2];
};
static_assert(sizeof(struct mg_block_iq4_nl) == 18, "iq4_nl block is 18 bytes");

extern const int8_t mg_kvalues_iq4nl[16];   // ggml's kvalues_iq4nl

void mg_quantize_row_q4_1_ref  (const float * x, void * y, int64_t n);
void mg_dequantize_row_q4_1    (const void  * x, float * y, int64_t n);
void mg_quantize_row_q5_0_ref  (const float * x, void * y, int64_t n);
void mg_dequantize_row_q5_0    (const void  * x, float * y, int64_t n);
void mg_quantize_row_q5_1_ref  (const float * x, void * y, int64_t n);
void mg_dequantize_row_q5_1    (const void  * x, float * y, int64_t n);
void mg_quantize_row_q8_1_ref  (const float * x, void * y, int64_t n);
void mg_dequantize_row_q8_1    (const void  * x, float * y, int64_t n);
void mg_quantize_row_q2_K_ref  (const float * x, void * y, int64_t n);
void mg_dequantize_row_q2_K    (const void  * x, float * y, int64_t n);
void mg_quantize_row_q3_K_ref  (const float * x, void * y, int64_t n);
void mg_dequantize_row_q3_K    (const void  * x, float * y, int64_t n);
void mg_quantize_row_q5_K_ref  (const float * x, void * y, int64_t n);
void mg_dequantize_row_q5_K    (const void  * x, float * y, int64_t n);
// What llama-quantize writes (ggml's quantize_iq4_nl, 7 extra scale trials per
// block); ggml's own quantize_row_iq4_nl_ref tries none and gives other bytes.
void mg_quantize_row_iq4_nl_ref(const float * x, void * y, int64_t n);
void mg_dequantize_row_iq4_nl  (const void  * x, float * y, int64_t n);

// Activations for Q4_1/Q5_1 matmuls, with the x86 rounding of
// mg_quantize_row_q8_0 (arch/x86/quants.c, quantize_row_q8_1).
void mg_quantize_row_q8_1(const float * x, void * y, int64_t n);
//@- full more-quants
