// mul_mat_quant.glsl - what every mul_mat shader with packed weights shares
// (#include'd by mul_mat_f16.comp, mul_mat_q8_0.comp, ...): d = a x b over
// ne[0] for weights a {K, M} of some block type and F32 b {K, N}, d[n][m] the
// dot product of row m of a with row n of b, a's matrices broadcast over b's
// (b ne2 = r2 * a ne2, and so for ne3). One invocation per element of d; the
// including shader defines row_dot, the one thing that differs: how to read
// a row of its blocks (ggml-vulkan shares mul_mat_vec_base.comp the same way,
// and each type's dequant funcs).
//
// a is read by the byte (bytes.glsl); a_off and a's strides are in bytes.
// With B_Q8 defined, b is not F32 but the activations quantized to the
// weights' vec_dot_type by quantize_q8_0.comp or quantize_q8_k.comp (Q8_0 or
// Q8_K blocks, the rows one after another), read by the byte as well, and
// b_off and b's strides are in bytes too.
layout(local_size_x = 256) in;

#include "index.glsl"

layout(std430, binding = 0) readonly buffer A { uint a[]; };
#ifdef B_Q8
layout(std430, binding = 1) readonly buffer B { uint bq[]; };
#else
layout(std430, binding = 1) readonly buffer B { float b[]; };
#endif
layout(std430, binding = 3) writeonly buffer D { float d[]; };

layout(push_constant) uniform Params {
    uint K, M, N, ne2, ne3;               // d is {M, N, ne2, ne3}
    uint a_off, a_nb1, a_nb2, a_nb3;      // in bytes
    uint b_off, b_nb1, b_nb2, b_nb3;      // in floats (B_Q8: in bytes)
    uint d_off, d_nb1, d_nb2, d_nb3;
    uint r2, r3;                          // b's matrices per a's, in dims 2 and 3
} p;

#include "bytes.glsl"

// Row m of a, starting at byte ra, times row n of b, starting at float rb.
float row_dot(uint ra, uint rb);

void main() {
    const uint i = invocation_index();
    if (i >= p.M * p.N * p.ne2 * p.ne3) return;
    const uint m  = i % p.M;
    const uint n  = (i / p.M) % p.N;
    const uint i2 = (i / (p.M * p.N)) % p.ne2;
    const uint i3 = i / (p.M * p.N * p.ne2);
    const uint ra = p.a_off + m * p.a_nb1 + (i2 / p.r2) * p.a_nb2 + (i3 / p.r3) * p.a_nb3;
    const uint rb = p.b_off + n * p.b_nb1 + i2 * p.b_nb2 + i3 * p.b_nb3;
    d[p.d_off + m + n * p.d_nb1 + i2 * p.d_nb2 + i3 * p.d_nb3] = row_dot(ra, rb);
}
