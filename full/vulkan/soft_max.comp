#version 450
#extension GL_GOOGLE_include_directive : require
// soft_max.comp - softmax(a * scale + mask) along each row of an F32 tensor
// a {ne0, ne1, ne2, ne3}; row i1 of every matrix adds mask row i1 (an F32
// {ne0, >= ne1}, the causal mask of attention), or nothing when has_mask is
// 0. One workgroup of 256 per row, in three passes over it: the largest
// value (so that no exp overflows), then each exp(v - max) into d and their
// sum, then d times 1/sum; the partial results of the 256 invocations are
// combined in a fixed tree (the same order every run), as ggml-vulkan's
// soft_max.comp does. The CPU sums in double: results agree to about 1e-6.
layout(local_size_x = 256) in;

#include "index.glsl"

layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer M { float mask[]; };
layout(std430, binding = 3) buffer D { float d[]; };

layout(push_constant) uniform Params {
    uint  ne0, ne1, ne2;
    uint  a_off, a_nb1, a_nb2, a_nb3;   // in floats
    uint  d_off, d_nb1, d_nb2, d_nb3;
    uint  m_off, m_nb1, has_mask;
    float scale;
    uint  n_rows;   // ne1 * ne2 * ne3: a group per row, the groups past the last one idle (index.glsl)
} p;

shared float partial[256];

float value(uint ra, uint rm, uint i0) {
    return a[ra + i0] * p.scale + (p.has_mask != 0u ? mask[rm + i0] : 0.0);
}

// partial[0] = the max (is_max) or sum of every invocation's partial[tid].
void reduce(uint tid, bool is_max) {
    barrier();
    for (uint s = 128; s > 0; s >>= 1) {
        if (tid < s) partial[tid] = is_max ? max(partial[tid], partial[tid + s]) : partial[tid] + partial[tid + s];
        barrier();
    }
}

void main() {
    const uint row = group_index(), tid = gl_LocalInvocationID.x;
    if (row >= p.n_rows) return;   // the whole group: no barrier is left waiting
    const uint i1 = row % p.ne1, i2 = (row / p.ne1) % p.ne2, i3 = row / (p.ne1 * p.ne2);
    const uint ra = p.a_off + i1 * p.a_nb1 + i2 * p.a_nb2 + i3 * p.a_nb3;
    const uint rd = p.d_off + i1 * p.d_nb1 + i2 * p.d_nb2 + i3 * p.d_nb3;
    const uint rm = p.m_off + i1 * p.m_nb1;
    float m = -1.0 / 0.0;   // -inf
    for (uint i0 = tid; i0 < p.ne0; i0 += 256) m = max(m, value(ra, rm, i0));
    partial[tid] = m;
    reduce(tid, true);
    const float row_max = partial[0];
    barrier();   // every invocation has read partial[0] before it is reused
    float sum = 0.0;
    for (uint i0 = tid; i0 < p.ne0; i0 += 256) {
        const float e = exp(value(ra, rm, i0) - row_max);
        d[rd + i0] = e;
        sum += e;
    }
    partial[tid] = sum;
    reduce(tid, false);
    const float inv_sum = 1.0 / partial[0];
    for (uint i0 = tid; i0 < p.ne0; i0 += 256) d[rd + i0] *= inv_sum;   // this invocation's own elements
}
