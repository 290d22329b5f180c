#version 450
#extension GL_GOOGLE_include_directive : require
// mul_mat_q4_0.comp - mul_mat with Q4_0 weights. A Q4_0 block (quants.h,
// struct mg_block_q4_0, ggml's block_q4_0) is 18 bytes: an fp16 scale d, then
// 16 bytes qs of two 4-bit codes each; weight j of the block is
// d * ((qs[j] & 15) - 8) for j < 16 and d * ((qs[j - 16] >> 4) - 8) above.
// The activations come quantized to Q8_0 (quantize_q8_0.comp, as on the
// CPU), and each block is the CPU's mg_vec_dot_q4_0_q8_0 (vec.c): the exact
// integer sum S of code * activation code (as sum code * y - 8 * sum y),
// then sum = fma(dW * dA, S, sum), one chain over the blocks.
#define B_Q8
#include "mul_mat_quant.glsl"

float row_dot(uint ra, uint rb) {
    precise float sum = 0.0;
    for (uint ib = 0; ib < p.K / 32u; ib++) {
        const uint wa = ra + ib * 18u, wb = rb + ib * 34u;
        int sumi = 0, suma = 0;
        for (uint j = 0; j < 16u; j++) {
            const uint q = byte_at(wa + 2u + j);
            const int  y0 = b_int8_at(wb + 2u + j), y1 = b_int8_at(wb + 18u + j);
            sumi += int(q & 15u) * y0 + int(q >> 4) * y1;
            suma += y0 + y1;
        }
        sumi -= 8 * suma;
        precise float d = half_at(wa) * b_half_at(wb);
        sum = fma(d, float(sumi), sum);
    }
    return sum;
}
