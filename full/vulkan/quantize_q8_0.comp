#version 450
#extension GL_GOOGLE_include_directive : require
// quantize_q8_0.comp - activations to Q8_0 blocks (34 bytes: an fp16 scale
// d, 32 int8 codes) for Q8_0 and Q4_0 weights, by the CPU's rule
// (quants.c, mg_quantize_row_q8_0, ggml's x86 quantize_row_q8_0):
//   amax = max |x|,  d = amax / 127,  id = 127 / amax (0 if amax is 0),
//   code = nearest_int(x * id), stored d = fp16(d).
// Two blocks are 68 bytes, 17 whole words: each invocation makes a pair,
// so that no two invocations write parts of one word.
#include "quantize_q8.glsl"

// A block's scale and the factor of its codes (as the CPU computes them).
struct scaled { uint x0; float id; uint d_half; };

scaled scale_block(uint g) {
    const uint nb = p.K / 32u, x0 = block_start(g / nb, g % nb, 32u);
    uint amax = 0u;
    for (uint j = 0; j < 32u; j++) amax = max(amax, abs_bits(x[x0 + j]));
    const float a = uintBitsToFloat(amax);
    return scaled(x0, amax != 0u ? div_rn(127.0, a) : 0.0, fp16_bits(div_rn(a, 127.0)));
}

// Byte i (0..33) of a block: the fp16 scale, then the codes.
uint block_byte(scaled s, uint i) {
    if (i < 2u) return (s.d_half >> (8u * i)) & 0xffu;
    return uint(clamp(nearest_int(uintBitsToFloat(x[s.x0 + i - 2u]) * s.id), -128, 127)) & 0xffu;
}

void main() {
    const uint pair = invocation_index(), g = 2u * pair;
    const uint n_blocks = p.K / 32u * p.ne1 * p.ne2 * p.ne3;
    if (g >= n_blocks) return;
    const bool   two = g + 1u < n_blocks;
    const scaled b0 = scale_block(g), b1 = two ? scale_block(g + 1u) : b0;
    // A last block alone: its 34 bytes end in word 8, half of which is past
    // the blocks (but not past the buffer: tensors start 64-byte aligned).
    for (uint w = 0; w < (two ? 17u : 9u); w++) {
        uint word = 0u;
        for (uint k = 0; k < 4u; k++) {
            const uint i = 4u * w + k;   // byte of the pair
            word |= (i < 34u ? block_byte(b0, i) : two ? block_byte(b1, i - 34u) : 0u) << (8u * k);
        }
        q[p.q_off + 17u * pair + w] = word;
    }
}
