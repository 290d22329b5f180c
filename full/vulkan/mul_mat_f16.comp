#version 450
#extension GL_GOOGLE_include_directive : require
// mul_mat_f16.comp - mul_mat with F16 weights: weight k of a row starting at
// byte ra is the half at byte ra + 2k (a row of odd K starts mid-word). F32
// products added in order (ggml-vulkan's mul_mat_vec.comp with the f16
// dequant funcs, one workgroup per row there).
#include "mul_mat_quant.glsl"

float row_dot(uint ra, uint rb) {
    float sum = 0.0;
    for (uint k = 0; k < p.K; k++) sum += half_at(ra + 2u * k) * b[rb + k];
    return sum;
}
