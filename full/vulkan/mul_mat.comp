#version 450
#extension GL_GOOGLE_include_directive : require
// mul_mat.comp - d = a x b over ne[0] for F32 a {K, M} and b {K, N}: d[n][m] is
// the dot product of row m of a with row n of b (ggml's mul_mat convention),
// a's matrices broadcast over b's (b ne2 = r2 * a ne2, and so for ne3). One
// invocation per element of d, the K products added in order: the plainest
// matrix product there is (ggml-vulkan's mul_mm.comp tiles it in shared
// memory; that is the next step). Sums in another order than the CPU's
// tiles: results agree to about 1e-6 relative.
layout(local_size_x = 256) in;

#include "index.glsl"

layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 3) writeonly buffer D { float d[]; };

layout(push_constant) uniform Params {
    uint K, M, N, ne2, ne3;               // d is {M, N, ne2, ne3}
    uint a_off, a_nb1, a_nb2, a_nb3;      // in floats
    uint b_off, b_nb1, b_nb2, b_nb3;
    uint d_off, d_nb1, d_nb2, d_nb3;
    uint r2, r3;                          // b's matrices per a's, in dims 2 and 3
} p;

void main() {
    const uint i = invocation_index();
    if (i >= p.M * p.N * p.ne2 * p.ne3) return;
    const uint m  = i % p.M;
    const uint n  = (i / p.M) % p.N;
    const uint i2 = (i / (p.M * p.N)) % p.ne2;
    const uint i3 = i / (p.M * p.N * p.ne2);
    const uint ra = p.a_off + m * p.a_nb1 + (i2 / p.r2) * p.a_nb2 + (i3 / p.r3) * p.a_nb3;
    const uint rb = p.b_off + n * p.b_nb1 + i2 * p.b_nb2 + i3 * p.b_nb3;
    float sum = 0.0;
    for (uint k = 0; k < p.K; k++) sum += a[ra + k] * b[rb + k];
    d[p.d_off + m + n * p.d_nb1 + i2 * p.d_nb2 + i3 * p.d_nb3] = sum;
}
