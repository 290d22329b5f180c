#version 450
#extension GL_GOOGLE_include_directive : require
// mul_mat_q8_0.comp - mul_mat with Q8_0 weights. A Q8_0 block (quants.h,
// struct mg_block_q8_0, ggml's block_q8_0) is 34 bytes: an fp16 scale d, then
// 32 int8 codes q; weight j is d * q[j]. The activations come quantized to
// Q8_0 too (quantize_q8_0.comp, as the CPU rounds them), so each block is a
// sum of 32 integer products, times dW * dA: the steps of the CPU's
// mg_vec_dot_q8_0_q8_0 (vec.c, ggml's AVX2 order), float for float: 8 lanes
// of 4 products, each added to its float lane with one fused multiply-add,
// the lanes summed at the end in halves then pairs (mg_hsum_lanes_8).
// `precise`: no other multiply and add may be fused (the CPU is built with
// -ffp-contract=off).
#define B_Q8
#include "mul_mat_quant.glsl"

// Lane l of a block: its 4 integer products 4l .. 4l + 3.
int lane(uint wa, uint wb, uint l) {
    int s = 0;
    for (uint j = 2u + 4u * l; j < 6u + 4u * l; j++) s += int8_at(wa + j) * b_int8_at(wb + j);
    return s;
}

// The 8 lanes as two vec4 (lanes 0-3, 4-7): a local array indexed by a
// loop variable would live in memory on some drivers (lavapipe), vectors in
// registers.
float row_dot(uint ra, uint rb) {
    precise vec4 lo = vec4(0.0), hi = vec4(0.0);
    for (uint ib = 0; ib < p.K / 32u; ib++) {
        const uint   wa = ra + ib * 34u, wb = rb + ib * 34u;
        precise float d = half_at(wa) * b_half_at(wb);
        lo = fma(vec4(d), vec4(lane(wa, wb, 0u), lane(wa, wb, 1u), lane(wa, wb, 2u), lane(wa, wb, 3u)), lo);
        hi = fma(vec4(d), vec4(lane(wa, wb, 4u), lane(wa, wb, 5u), lane(wa, wb, 6u), lane(wa, wb, 7u)), hi);
    }
    precise vec4  r   = hi + lo;                      // lanes l + 4 and l, as mg_hsum_lanes_8
    precise float sum = (r.x + r.z) + (r.y + r.w);
    return sum;
}
