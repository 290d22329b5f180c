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
// The activations come quantized to Q8_K (quantize_q8_k.comp, as on the
// CPU), and each super-block is the CPU's mg_vec_dot_q4_K_q8_K (vec.c):
// integer sums sc_j * q * y in 8 lanes (element l of a chunk in lane l % 8),
// the mins through the activations' 16-element sums, then in float
// lanes += (dW * dA) * lane, sum -= (dminW * dA) * mins, and at the end
// sum + lane 0 + ... + lane 7 (`precise`: nothing fused, as on the CPU).
#define B_Q8
#include "mul_mat_quant.glsl"

// Sub-block j's 6-bit scale and min from the 12 bytes at s (mg_get_scale_min_k4):
// j < 4 in the low 6 bits of bytes j and j + 4; j >= 4 split over a nibble of
// byte j + 4 and the top 2 bits of bytes j - 4 and j.
uvec2 scale_min(uint s, uint j) {
    if (j < 4u) return uvec2(byte_at(s + j) & 63u, byte_at(s + j + 4u) & 63u);
    return uvec2((byte_at(s + j + 4u) & 15u) | ((byte_at(s + j - 4u) >> 6) << 4),
                 (byte_at(s + j + 4u) >> 4) | ((byte_at(s + j) >> 6) << 4));
}

// Elements l .. l + 3 of chunk c (sub-blocks 2c, low nibbles, and 2c + 1,
// high), their codes times their activation codes and sub-block scales.
ivec4 chunk_terms(uint wa, uint wb, uint c, uint l, int sc_lo, int sc_hi) {
    const uint  at = wa + 16u + 32u * c + l;
    const ivec4 q  = ivec4(byte_at(at), byte_at(at + 1u), byte_at(at + 2u), byte_at(at + 3u));
    return sc_lo * ((q & 15) * b_int8x4_at(wb + 4u + 64u * c + l)) +
           sc_hi * ((q >> 4) * b_int8x4_at(wb + 4u + 64u * c + 32u + l));
}

// The 8 lanes as two vectors (lanes 0-3, 4-7; see mul_mat_q8_0.comp).
float row_dot(uint ra, uint rb) {
    precise vec4  lo = vec4(0.0), hi = vec4(0.0);
    precise float sum = 0.0;
    for (uint ib = 0; ib < p.K / 256u; ib++) {
        const uint wa = ra + ib * 144u, wb = rb + ib * 292u;   // Q8_K: d, qs[256] at 4, bsums[16] at 260
        ivec4      ilo = ivec4(0), ihi = ivec4(0);
        for (uint c = 0; c < 4u; c++) {
            const int sc_lo = int(scale_min(wa + 4u, 2u * c).x), sc_hi = int(scale_min(wa + 4u, 2u * c + 1u).x);
            for (uint l = 0; l < 32u; l += 8u) {   // element l + i in lane i
                ilo += chunk_terms(wa, wb, c, l, sc_lo, sc_hi);
                ihi += chunk_terms(wa, wb, c, l + 4u, sc_lo, sc_hi);
            }
        }
        int summ = 0;
        for (uint j = 0; j < 16u; j++) summ += b_int16_at(wb + 260u + 2u * j) * int(scale_min(wa + 4u, j / 2u).y);
        const float   dy = b_float_at(wb);
        precise float d  = half_at(wa) * dy;
        lo += d * vec4(ilo), hi += d * vec4(ihi);
        precise float dmin = half_at(wa + 2u) * dy;
        sum -= dmin * float(summ);
    }
    sum += lo.x, sum += lo.y, sum += lo.z, sum += lo.w;
    sum += hi.x, sum += hi.y, sum += hi.z, sum += hi.w;
    return sum;
}
