#version 450
#extension GL_GOOGLE_include_directive : require
// mul_mat_q8_0.comp - mul_mat with Q8_0 weights. A Q8_0 block (quants.h,
// struct mg_block_q8_0, ggml's block_q8_0) is 34 bytes: an fp16 scale d, then
// 32 int8 codes q; weight j is d * q[j]. For each block of the row it adds
// d * sum(q[j] * b[k + j]), the activations staying F32 (ggml-vulkan's
// mul_mat_vec.comp with the q8_0 dequant funcs does the same per block; the
// CPU instead quantizes b to Q8_0 first).
#include "mul_mat_quant.glsl"

float row_dot(uint ra, uint rb) {
    float sum = 0.0;
    for (uint ib = 0; ib < p.K / 32u; ib++) {
        const uint blk = ra + ib * 34u;
        float s = 0.0;
        for (uint j = 0; j < 32u; j++) s += float(int8_at(blk + 2u + j)) * b[rb + ib * 32u + j];
        sum += half_at(blk) * s;
    }
    return sum;
}
