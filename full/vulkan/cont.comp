#version 450
#extension GL_GOOGLE_include_directive : require
// cont.comp - an F32 tensor of any strides (a permuted view: the attention's
// heads put back in order) copied into contiguous d of the same shape, one
// invocation per element (MG_OP_CONT; ggml-vulkan's copy.comp).
layout(local_size_x = 256) in;

#include "index.glsl"

layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 3) writeonly buffer D { float d[]; };

layout(push_constant) uniform Params {
    uint ne0, ne1, ne2, ne3;
    uint a_off, a_nb0, a_nb1, a_nb2, a_nb3;   // in floats
    uint d_off;
} p;

void main() {
    const uint i = invocation_index();
    if (i >= p.ne0 * p.ne1 * p.ne2 * p.ne3) return;
    const uint i0 = i % p.ne0;
    const uint i1 = (i / p.ne0) % p.ne1;
    const uint i2 = (i / (p.ne0 * p.ne1)) % p.ne2;
    const uint i3 = i / (p.ne0 * p.ne1 * p.ne2);
    d[p.d_off + i] = a[p.a_off + i0 * p.a_nb0 + i1 * p.a_nb1 + i2 * p.a_nb2 + i3 * p.a_nb3];
}
