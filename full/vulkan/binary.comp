#version 450
#extension GL_GOOGLE_include_directive : require
// binary.comp - d = a OP b for F32 tensors, b repeated to a's shape (ggml's
// broadcasting rule: b's ne[i] divides a's). One invocation per element of d;
// compiled twice by glslc: -DOP_ADD for MG_OP_ADD, -DOP_MUL for MG_OP_MUL.
// (ggml-vulkan's add.comp and mul.comp, which share generic_binary_head.comp.)
//
// Every tensor is a whole VkBuffer plus where the tensor starts in it, in
// floats: binding the whole buffer keeps clear of the offset alignment rules
// of descriptors. Strides are in floats too; element 0 of a row is at stride 1.
layout(local_size_x = 256) in;

#include "index.glsl"

layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 3) writeonly buffer D { float d[]; };

layout(push_constant) uniform Params {
    uint ne0, ne1, ne2, ne3;            // the shape of d (and of a)
    uint b_ne0, b_ne1, b_ne2, b_ne3;    // the shape of b
    uint a_off, a_nb1, a_nb2, a_nb3;    // where a starts, its strides
    uint b_off, b_nb1, b_nb2, b_nb3;
    uint d_off, d_nb1, d_nb2, d_nb3;
} p;

void main() {
    const uint i = invocation_index();
    if (i >= p.ne0 * p.ne1 * p.ne2 * p.ne3) return;
    // The element's coordinates in d, innermost first.
    const uint i0 = i % p.ne0;
    const uint i1 = (i / p.ne0) % p.ne1;
    const uint i2 = (i / (p.ne0 * p.ne1)) % p.ne2;
    const uint i3 = i / (p.ne0 * p.ne1 * p.ne2);
    const float x = a[p.a_off + i0 + i1 * p.a_nb1 + i2 * p.a_nb2 + i3 * p.a_nb3];
    const float y = b[p.b_off + i0 % p.b_ne0 + (i1 % p.b_ne1) * p.b_nb1 + (i2 % p.b_ne2) * p.b_nb2 +
                      (i3 % p.b_ne3) * p.b_nb3];
#if defined(OP_ADD)
    d[p.d_off + i0 + i1 * p.d_nb1 + i2 * p.d_nb2 + i3 * p.d_nb3] = x + y;
#elif defined(OP_MUL)
    d[p.d_off + i0 + i1 * p.d_nb1 + i2 * p.d_nb2 + i3 * p.d_nb3] = x * y;
#endif
}
