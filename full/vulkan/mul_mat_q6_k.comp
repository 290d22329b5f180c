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
// The activations come quantized to Q8_K (quantize_q8_k.comp, as on the
// CPU), and each super-block is the CPU's mg_vec_dot_q6_K_q8_K (vec.c,
// ggml's AVX2 order): integer lanes, lane l of a 32-element chunk taking
// elements 4l..4l+3 times their scale with codes 0..63, the -32 taken off
// through the activations' 16-element sums, each lane fused into its float
// lane with dA * dW; the 8 lanes summed at the end in halves then pairs.
#define B_Q8
#include "mul_mat_quant.glsl"

// Elements l0 .. l0 + 3 of chunk k of half h (element e = 128h + 32k + l;
// l0 a multiple of 4, so one sub-block): codes 0..63 times their activation
// codes, the sum times the sub-block's scale.
int lane(uint wa, uint wb, uint h, uint k, uint l0) {
    const uint e0 = 128u * h + 32u * k + l0, lo_at = wa + 64u * h + 32u * (k & 1u) + l0, hi_at = wa + 128u + 32u * h + l0;
    ivec4 q;
    for (uint i = 0; i < 4u; i++) {
        const uint lo = (byte_at(lo_at + i) >> (4u * (k >> 1))) & 15u, hi = (byte_at(hi_at + i) >> (2u * k)) & 3u;
        q[i] = int(lo | (hi << 4));
    }
    const ivec4 t = q * b_int8x4_at(wb + 4u + e0);
    return int8_at(wa + 192u + e0 / 16u) * (t.x + t.y + t.z + t.w);
}

// What lane l takes off for the codes' offset 32: sub-blocks 2l and 2l + 1.
int offset_32(uint wa, uint wb, uint l) {
    return 32 * (b_int16_at(wb + 260u + 4u * l) * int8_at(wa + 192u + 2u * l) +
                 b_int16_at(wb + 262u + 4u * l) * int8_at(wa + 193u + 2u * l));
}

// The 8 lanes as two vectors (lanes 0-3, 4-7; see mul_mat_q8_0.comp).
float row_dot(uint ra, uint rb) {
    precise vec4 lo = vec4(0.0), hi = vec4(0.0);
    for (uint ib = 0; ib < p.K / 256u; ib++) {
        const uint wa = ra + ib * 210u, wb = rb + ib * 292u;   // Q8_K: d, qs[256] at 4, bsums[16] at 260
        ivec4      ilo = ivec4(0), ihi = ivec4(0);
        for (uint h = 0; h < 2u; h++) {
            for (uint k = 0; k < 4u; k++) {
                ilo += ivec4(lane(wa, wb, h, k, 0u), lane(wa, wb, h, k, 4u), lane(wa, wb, h, k, 8u), lane(wa, wb, h, k, 12u));
                ihi += ivec4(lane(wa, wb, h, k, 16u), lane(wa, wb, h, k, 20u), lane(wa, wb, h, k, 24u), lane(wa, wb, h, k, 28u));
            }
        }
        ilo -= ivec4(offset_32(wa, wb, 0u), offset_32(wa, wb, 1u), offset_32(wa, wb, 2u), offset_32(wa, wb, 3u));
        ihi -= ivec4(offset_32(wa, wb, 4u), offset_32(wa, wb, 5u), offset_32(wa, wb, 6u), offset_32(wa, wb, 7u));
        precise float d = b_float_at(wb) * half_at(wa + 208u);
        lo = fma(vec4(d), vec4(ilo), lo), hi = fma(vec4(d), vec4(ihi), hi);
    }
    precise vec4  r   = hi + lo;                      // lanes l + 4 and l, as mg_hsum_lanes_8
    precise float sum = (r.x + r.z) + (r.y + r.w);
    return sum;
}
