#version 450
#extension GL_GOOGLE_include_directive : require
// mul_mat_q4_0.comp - mul_mat with Q4_0 weights. A Q4_0 block (quants.h,
// struct mg_block_q4_0, ggml's block_q4_0) is 18 bytes: an fp16 scale d, then
// 16 bytes qs of two 4-bit codes each; weight j of the block is
// d * ((qs[j] & 15) - 8) for j < 16 and d * ((qs[j - 16] >> 4) - 8) above.
// For each block it adds d * sum(code * b), the activations staying F32
// (ggml-vulkan's mul_mat_vec.comp with the q4_0 dequant funcs; the CPU
// quantizes b to Q8_0).
#include "mul_mat_quant.glsl"

float row_dot(uint ra, uint rb) {
    float sum = 0.0;
    for (uint ib = 0; ib < p.K / 32u; ib++) {
        const uint blk = ra + ib * 18u, kb = rb + ib * 32u;
        float s = 0.0;
        for (uint j = 0; j < 16u; j++) {
            const uint q = byte_at(blk + 2u + j);
            s += float(int(q & 15u) - 8) * b[kb + j] + float(int(q >> 4) - 8) * b[kb + j + 16u];
        }
        sum += half_at(blk) * s;
    }
    return sum;
}
