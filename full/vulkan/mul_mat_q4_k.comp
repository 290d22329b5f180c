#version 450
#extension GL_GOOGLE_include_directive : require
// mul_mat_q4_k.comp - mul_mat with Q4_K weights. A Q4_K super-block
// (quants.h, struct mg_block_q4_K, ggml's block_q4_K) is 144 bytes for 256
// weights in 8 sub-blocks of 32:
//   byte   0: d, byte 2: dmin   fp16 factors of the sub-blocks' scales and mins
//   byte   4: scales[12]        sc_j and m_j, 6 bits each (scale_min below)
//   byte  16: qs[128]           4-bit codes: sub-block j is chunk j/2 of 32
//                               bytes, low nibbles for even j, high for odd
//   weight 32j + l = (d * sc_j) * q - dmin * m_j
// Each weight is decoded with that arithmetic, as mg_dequantize_row_q4_K does,
// then multiplied by the F32 activation (the CPU quantizes b to Q8_K instead;
// ggml-vulkan's mul_mat_vec_q4_k.comp factors the scale out of the sums).
#include "mul_mat_quant.glsl"

// Sub-block j's 6-bit scale and min from the 12 bytes at s (mg_get_scale_min_k4):
// j < 4 in the low 6 bits of bytes j and j + 4; j >= 4 split over a nibble of
// byte j + 4 and the top 2 bits of bytes j - 4 and j.
uvec2 scale_min(uint s, uint j) {
    if (j < 4u) return uvec2(byte_at(s + j) & 63u, byte_at(s + j + 4u) & 63u);
    return uvec2((byte_at(s + j + 4u) & 15u) | ((byte_at(s + j - 4u) >> 6) << 4),
                 (byte_at(s + j + 4u) >> 4) | ((byte_at(s + j) >> 6) << 4));
}

float row_dot(uint ra, uint rb) {
    float sum = 0.0;
    for (uint ib = 0; ib < p.K / 256u; ib++) {
        const uint  blk = ra + ib * 144u, kb = rb + ib * 256u;
        const float d = half_at(blk), dmin = half_at(blk + 2u);
        for (uint j = 0; j < 8u; j++) {
            const uvec2 sm    = scale_min(blk + 4u, j);
            const float dj    = d * float(sm.x), mj = dmin * float(sm.y);
            const uint  qs    = blk + 16u + 32u * (j / 2u);
            const uint  shift = 4u * (j % 2u);
            for (uint l = 0; l < 32u; l++) {
                sum += (dj * float((byte_at(qs + l) >> shift) & 15u) - mj) * b[kb + 32u * j + l];
            }
        }
    }
    return sum;
}
