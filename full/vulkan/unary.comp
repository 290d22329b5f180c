#version 450
#extension GL_GOOGLE_include_directive : require
// unary.comp - d = f(a) element by element for contiguous F32 tensors, one
// invocation per element; compiled with -DOP_SILU for MG_OP_SILU, x / (1 + e^-x)
// (ggml-vulkan's silu.comp), and with -DOP_SWIGLU for MG_OP_SWIGLU, silu(a) * b
// with b of a's shape (ggml-vulkan's swiglu.comp). The shader's exp is the
// driver's, not ggml's ggml_v_expf: results agree with the CPU's to a few
// units in the last place.
layout(local_size_x = 256) in;

#include "index.glsl"

layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };   // SWIGLU's b
layout(std430, binding = 3) writeonly buffer D { float d[]; };

layout(push_constant) uniform Params {
    uint n;       // elements
    uint a_off;   // where a and d start in their buffers, in floats
    uint d_off;
    uint b_off;   // SWIGLU only
} p;

void main() {
    const uint i = invocation_index();
    if (i >= p.n) return;
    const float x = a[p.a_off + i];
#if defined(OP_SILU)
    d[p.d_off + i] = x / (1.0 + exp(-x));
#elif defined(OP_SWIGLU)
    d[p.d_off + i] = x / (1.0 + exp(-x)) * b[p.b_off + i];
#endif
}
