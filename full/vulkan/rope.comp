#version 450
#extension GL_GOOGLE_include_directive : require
// rope.comp - RoPE for an F32 tensor a {ne0, heads, tokens, ne3}: within each
// row, pair k of the first n_rot elements is turned by the angle
// pos[token] * theta_scale^k * freq_scale (pos one I32 per token). NEOX pairs
// element k with k + n_rot/2 (Qwen, ggml's GGML_ROPE_TYPE_NEOX), NORMAL pairs
// 2k with 2k + 1; elements from n_rot on are copied. One invocation per
// pair, which reads both elements before it writes either: the graph
// allocator may give d a's own bytes (ROPE is in ggml_op_can_inplace's
// list), so no invocation may read what another one writes. Invocations
// n_rot/2 .. ne0 - n_rot/2 of a row copy the elements past n_rot.
//
// As compute.c's forward_rope: theta_scale comes from the host (powf there,
// the CPU's own), the angle is built by repeated multiplication as
// ggml_rope_cache_init does, and the rotation fuses x0 cos with the
// subtraction. cos and sin are the driver's: results agree with the CPU's
// to about 1e-6 relative (ggml-vulkan's rope_neox.comp uses pow per pair).
layout(local_size_x = 256) in;

#include "index.glsl"

layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer P { int pos[]; };
layout(std430, binding = 3) buffer D { float d[]; };   // may be a itself

layout(push_constant) uniform Params {
    uint  ne0, ne1, ne2, ne3;
    uint  a_off, a_nb1, a_nb2, a_nb3;   // in floats
    uint  d_off, d_nb1, d_nb2, d_nb3;
    uint  pos_off;                      // in ints
    uint  n_rot, neox;
    float theta_scale, freq_scale;
} p;

void main() {
    const uint n_half = p.n_rot / 2u, per_row = p.ne0 - n_half;
    const uint i = invocation_index();
    if (i >= per_row * p.ne1 * p.ne2 * p.ne3) return;
    const uint k  = i % per_row;   // the pair, or (from n_half on) an element to copy
    const uint i1 = (i / per_row) % p.ne1;
    const uint i2 = (i / (per_row * p.ne1)) % p.ne2;
    const uint i3 = i / (per_row * p.ne1 * p.ne2);
    const uint ra = p.a_off + i1 * p.a_nb1 + i2 * p.a_nb2 + i3 * p.a_nb3;
    const uint rd = p.d_off + i1 * p.d_nb1 + i2 * p.d_nb2 + i3 * p.d_nb3;
    if (k >= n_half) {
        d[rd + k + n_half] = a[ra + k + n_half];
        return;
    }
    const uint j0 = p.neox != 0u ? k : 2u * k, j1 = p.neox != 0u ? k + n_half : 2u * k + 1u;
    float theta = float(pos[p.pos_off + i2]);
    for (uint n = 0; n < k; n++) theta *= p.theta_scale;
    const float c = cos(theta * p.freq_scale), s = sin(theta * p.freq_scale);
    const float x0 = a[ra + j0], x1 = a[ra + j1];
    d[rd + j0] = fma(x0, c, -(x1 * s));
    d[rd + j1] = fma(x0, s, x1 * c);
}
