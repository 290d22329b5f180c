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
