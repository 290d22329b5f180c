#version 450
#extension GL_GOOGLE_include_directive : require
// quantize_q8_k.comp - activations to Q8_K blocks for Q4_K and Q6_K weights
// (292 bytes, 73 words: an F32 scale d, 256 int8 codes, 16 int16 sums of 16
// codes each), by the CPU's rule (quants_k.c, mg_quantize_row_q8_K, ggml's
// quantize_row_q8_K_ref):
//   max = the first value of the largest |x|, with its sign,
//   iscale = -127 / max,  code = min(127, nearest_int(iscale * x)),
//   d = 1 / iscale;  a block of zeros is all zero bytes.
// One invocation per block.
#include "quantize_q8.glsl"

// The 16 codes of group s into their 4 words; their sum.
int put_codes(uint x0, float iscale, uint out0, uint s) {
    int sum = 0;
    for (uint w = 4u * s; w < 4u * s + 4u; w++) {
        uint word = 0u;
        for (uint k = 0; k < 4u; k++) {
            const int c = min(127, nearest_int(iscale * uintBitsToFloat(x[x0 + 4u * w + k])));
            sum += c;
            word |= (uint(c) & 0xffu) << (8u * k);
        }
        q[out0 + 1u + w] = word;
    }
    return sum;
}

void main() {
    const uint g = invocation_index(), nb = p.K / 256u;
    if (g >= nb * p.ne1 * p.ne2 * p.ne3) return;
    const uint x0 = block_start(g / nb, g % nb, 256u), out0 = p.q_off + 73u * g;
    uint amax = 0u, max_bits = 0u;
    for (uint j = 0; j < 256u; j++) {
        if (abs_bits(x[x0 + j]) > amax) amax = abs_bits(x[x0 + j]), max_bits = x[x0 + j];
    }
    if (amax == 0u) {
        for (uint i = 0; i < 73u; i++) q[out0 + i] = 0u;
        return;
    }
    const float iscale = div_rn(-127.0, uintBitsToFloat(max_bits));
    for (uint s = 0; s < 16u; s += 2u) {   // two groups of 16 codes, then their two sums in one word
        const int sum0 = put_codes(x0, iscale, out0, s), sum1 = put_codes(x0, iscale, out0, s + 1u);
        q[out0 + 65u + s / 2u] = (uint(sum0) & 0xffffu) | (uint(sum1) << 16);
    }
    q[out0] = floatBitsToUint(div_rn(1.0, iscale));
}
