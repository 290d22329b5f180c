#version 450
#extension GL_GOOGLE_include_directive : require
// mul_mat_q6_k.comp - mul_mat with Q6_K weights. A Q6_K super-block
// (quants.h, struct mg_block_q6_K, ggml's block_q6_K) is 210 bytes for 256
// weights, each a 6-bit code q split in two:
//   byte   0: ql[128]     low 4 bits; weight e = 128h + 32k + l (h = 0..1,
//                         k = 0..3, l = 0..31) in ql[64h + 32(k & 1) + l],
//                         the low nibble for k < 2, the high one above
//   byte 128: qh[64]      high 2 bits: bits 2k, 2k+1 of qh[32h + l]
//   byte 192: scales[16]  int8, one per 16 weights
//   byte 208: d           fp16
//   weight e = (d * scales[e / 16]) * (q - 32)
// Each weight is decoded with that arithmetic, as mg_dequantize_row_q6_K
// does, then multiplied by the F32 activation (ggml-vulkan:
// mul_mat_vec_q6_k.comp).
#include "mul_mat_quant.glsl"

float row_dot(uint ra, uint rb) {
    float sum = 0.0;
    for (uint ib = 0; ib < p.K / 256u; ib++) {
        const uint  blk = ra + ib * 210u, kb = rb + ib * 256u;
        const float d   = half_at(blk + 208u);
        for (uint e = 0; e < 256u; e++) {
            const uint h = e >> 7, k = (e >> 5) & 3u, l = e & 31u;
            const uint lo = (byte_at(blk + 64u * h + 32u * (k & 1u) + l) >> (4u * (k >> 1))) & 15u;
            const uint hi = (byte_at(blk + 128u + 32u * h + l) >> (2u * k)) & 3u;
            const int  q  = int(lo | (hi << 4)) - 32;
            sum += (d * float(int8_at(blk + 192u + e / 16u))) * float(q) * b[kb + e];
        }
    }
    return sum;
}
