// Generated from full/quants_k.c by tools/chapgen. In a class, edit this copy freely (make chapters will not overwrite your edits); to change the engine, edit full/quants_k.c and run make chapters.
// quants_k.c - the K-quants: 256-element super-blocks (ggml-quants.c, "2-6 bit
// quantization in super-blocks").
//
// A K-quant spends its bits in two layers. Each sub-block of 16 or 32 weights
// gets its own scale (and, for the asymmetric types, its own min), fitted by a
// small least-squares search; those scales are then themselves quantized to
// 4, 6 or 8 bits against one F16 factor per super-block. The codes are chosen
// last, against the scales exactly as they will be decoded.
//
// Chapter 09 only reads K-quant weights: it has the Q4_K and Q6_K decoders,
// the Q8_K activations and (in vec.c) the dot products. full/ adds the
// quantizers (for mg quantize and mg mkmodel), under "k-quantize" markers.
//
// The quantizers reproduce ggml's quantize_row_q*_K_ref bit for bit, which is
// what llama-quantize runs without an importance matrix. That is only possible
// because every float expression below is evaluated in ggml's order, without
// fused multiply-adds (build with -ffp-contract=off): a different rounding in
// the fit can pick a different scale, and then every code in the block moves.
#include "quants.h"

#include <math.h>
#include <string.h>

static int min_int(int a, int b) { return a < b ? a : b; }

// ---------------------------------------------------------------------------
// Q4_K: 256 elements -> 144 bytes (4.5 bits per weight).
//
//   offset   0: d     F16   factor of the 8 sub-block scales
//   offset   2: dmin  F16   factor of the 8 sub-block mins
//   offset   4: scales[12]  sc_j, m_j: 6 bits each (quants.h, mg_get_scale_min_k4)
//   offset  16: qs[128]     4-bit codes; chunk c = 0..3 is qs[32c .. 32c+31]:
//                           low nibbles = elements 64c .. 64c+31  (sub-block 2c)
//                           high nibbles = elements 64c+32 .. 64c+63 (sub-block 2c+1)
//
//   x[e] = (d * sc_j) * q[e] - (dmin * m_j),  j = e / 32
// ---------------------------------------------------------------------------

void mg_dequantize_row_q4_K(const void * vx, float * y, int64_t n) {
    const struct mg_block_q4_K * x = vx;
    for (int64_t i = 0; i < n / MG_QK_K; i++) {
        const float     d   = mg_fp16_to_fp32(x[i].d);
        const float     min = mg_fp16_to_fp32(x[i].dmin);
        const uint8_t * q   = x[i].qs;
        for (int c = 0; c < 4; c++, q += 32) {   // a chunk of 32 bytes holds two sub-blocks
            uint8_t sc, m;
            mg_get_scale_min_k4(2 * c, x[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            mg_get_scale_min_k4(2 * c + 1, x[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xf) - m1;
            for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
        }
    }
}

// ---------------------------------------------------------------------------
// Q6_K: 256 elements -> 210 bytes (6.5625 bits per weight).
//
//   offset   0: ql[128]    low 4 bits; half h = 0,1 uses ql[64h .. 64h+63]:
//                          ql[64h + l]      low nibble: e = 128h + l       (k = 0)
//                          ql[64h + 32 + l] low nibble: e = 128h + 32 + l  (k = 1)
//                          ql[64h + l]      high nibble: e = 128h + 64 + l (k = 2)
//                          ql[64h + 32 + l] high nibble: e = 128h + 96 + l (k = 3)
//   offset 128: qh[64]     high 2 bits: bits 2k..2k+1 of qh[32h + l] for k = 0..3
//   offset 192: scales[16] int8, one per 16 elements
//   offset 208: d   F16
//
//   x[e] = (d * scales[e/16]) * (q[e] - 32)
// ---------------------------------------------------------------------------

void mg_dequantize_row_q6_K(const void * vx, float * y, int64_t n) {
    const struct mg_block_q6_K * x = vx;
    for (int64_t i = 0; i < n / MG_QK_K; i++) {
        const float     d  = mg_fp16_to_fp32(x[i].d);
        const uint8_t * ql = x[i].ql;
        const uint8_t * qh = x[i].qh;
        const int8_t *  sc = x[i].scales;
        for (int h = 0; h < 2; h++, y += 128, ql += 64, qh += 32, sc += 8) {
            for (int l = 0; l < 32; ++l) {
                const int is = l / 16;
                const int q0 = ((ql[l] & 0xf) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q1 = ((ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q2 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q3 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l]      = d * sc[is + 0] * q0;
                y[l + 32] = d * sc[is + 2] * q1;
                y[l + 64] = d * sc[is + 4] * q2;
                y[l + 96] = d * sc[is + 6] * q3;
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Q8_K: 256 elements -> 292 bytes; activations only.
//
//   offset   0: d   F32 (= -max/127 of the signed maximum; negative when it is positive)
//   offset   4: qs[256]     int8 codes -127..127
//   offset 260: bsums[16]   int16, sum of qs[16j .. 16j+15]
//
//   x[e] = d * qs[e]
// ---------------------------------------------------------------------------

void mg_quantize_row_q8_K_ref(const float * x, void * vy, int64_t n) {
    struct mg_block_q8_K * y = vy;
    for (int64_t i = 0; i < n / MG_QK_K; i++, x += MG_QK_K) {
        float max  = 0;
        float amax = 0;
        for (int j = 0; j < MG_QK_K; ++j) {
            const float ax = fabsf(x[j]);
            if (ax > amax) {
                amax = ax;
                max  = x[j];
            }
        }
        if (!amax) {
            // ggml leaves bsums unset here; we zero them so a block is always defined.
            memset(&y[i], 0, sizeof(y[i]));
            continue;
        }
        // -127 rather than -128: the signed maximum lands on -127 and no code
        // is ever -128, which keeps the SIMD kernels' int8 tricks safe.
        const float iscale = -127.f / max;
        for (int j = 0; j < MG_QK_K; ++j) {
            y[i].qs[j] = (int8_t) min_int(127, mg_nearest_int(iscale * x[j]));
        }
        for (int j = 0; j < MG_QK_K / 16; ++j) {
            int sum = 0;
            for (int ii = 0; ii < 16; ++ii) sum += y[i].qs[16 * j + ii];
            y[i].bsums[j] = (int16_t) sum;
        }
        y[i].d = 1 / iscale;
    }
}

void mg_dequantize_row_q8_K(const void * vx, float * y, int64_t n) {
    const struct mg_block_q8_K * x = vx;
    for (int64_t i = 0; i < n / MG_QK_K; i++) {
        for (int j = 0; j < MG_QK_K; ++j) *y++ = x[i].d * x[i].qs[j];
    }
}

// ggml-cpu's quantize_row_q8_K: the reference rule on every platform.
void mg_quantize_row_q8_K(const float * x, void * y, int64_t n) {
    mg_quantize_row_q8_K_ref(x, y, n);
}
