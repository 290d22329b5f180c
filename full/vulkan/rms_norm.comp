#version 450
#extension GL_GOOGLE_include_directive : require
// rms_norm.comp - each row of a contiguous F32 tensor divided by its root mean
// square: d = a / sqrt(mean(a^2) + eps). One workgroup of 256 invocations per
// row: each sums the squares of every 256th element, then the 256 partial sums
// are added in a fixed tree (the same order on every run: no atomics), as
// ggml-vulkan's rms_norm.comp does. The CPU sums in double: results agree to
// about 1e-6 relative.
layout(local_size_x = 256) in;

#include "index.glsl"

layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 3) writeonly buffer D { float d[]; };

layout(push_constant) uniform Params {
    uint  ne0;     // elements per row
    uint  a_off;   // where a and d start, in floats
    uint  d_off;
    float eps;
    uint  n_rows;  // a group per row, the groups past the last one idle (index.glsl)
} p;

shared float partial[256];

void main() {
    const uint row = group_index();
    const uint tid = gl_LocalInvocationID.x;
    if (row >= p.n_rows) return;   // the whole group: no barrier is left waiting
    const uint a0  = p.a_off + row * p.ne0;
    float sum = 0.0;
    for (uint i = tid; i < p.ne0; i += 256) sum += a[a0 + i] * a[a0 + i];
    partial[tid] = sum;
    barrier();
    for (uint s = 128; s > 0; s >>= 1) {
        if (tid < s) partial[tid] += partial[tid + s];
        barrier();
    }
    const float scale = 1.0 / sqrt(partial[0] / float(p.ne0) + p.eps);
    const uint  d0    = p.d_off + row * p.ne0;
    for (uint i = tid; i < p.ne0; i += 256) d[d0 + i] = a[a0 + i] * scale;
}
