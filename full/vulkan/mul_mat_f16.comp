#version 450
// mul_mat_f16.comp - mul_mat.comp with F16 weights a {K, M} and F32 b {K, N}.
// Two halves share a 32-bit word; a row of odd K starts mid-word, so a is
// bound as words, a_off and a's strides are in bytes, and weight k of a row
// starting at byte ra is the half at byte ra + 2k. One invocation per element
// of d, F32 products added in order (ggml-vulkan's mul_mat_vec.comp with the
// f16 dequant funcs, one workgroup per row there).
layout(local_size_x = 256) in;

layout(std430, binding = 0) readonly buffer A { uint a[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 3) writeonly buffer D { float d[]; };

layout(push_constant) uniform Params {
    uint K, M, N, ne2, ne3;
    uint a_off, a_nb1, a_nb2, a_nb3;      // in bytes
    uint b_off, b_nb1, b_nb2, b_nb3;      // in floats
    uint d_off, d_nb1, d_nb2, d_nb3;
    uint r2, r3;
} p;

float half_at(uint i) { return unpackHalf2x16(a[i >> 2] >> ((i & 2u) * 8u)).x; }  // i is even

void main() {
    const uint i = gl_GlobalInvocationID.x;
    if (i >= p.M * p.N * p.ne2 * p.ne3) return;
    const uint m  = i % p.M;
    const uint n  = (i / p.M) % p.N;
    const uint i2 = (i / (p.M * p.N)) % p.ne2;
    const uint i3 = i / (p.M * p.N * p.ne2);
    const uint ra = p.a_off + m * p.a_nb1 + (i2 / p.r2) * p.a_nb2 + (i3 / p.r3) * p.a_nb3;
    const uint rb = p.b_off + n * p.b_nb1 + i2 * p.b_nb2 + i3 * p.b_nb3;
    float sum = 0.0;
    for (uint k = 0; k < p.K; k++) sum += half_at(ra + 2u * k) * b[rb + k];
    d[p.d_off + m + n * p.d_nb1 + i2 * p.d_nb2 + i3 * p.d_nb3] = sum;
}
