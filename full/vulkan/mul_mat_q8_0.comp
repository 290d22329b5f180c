#version 450
// mul_mat_q8_0.comp - mul_mat.comp with Q8_0 weights a {K, M} and F32 b {K, N}.
// A Q8_0 block (quants.h, struct mg_block_q8_0, ggml's block_q8_0) is 34
// bytes: an fp16 scale d, then 32 int8 codes q; weight j is d * q[j]. Blocks
// are not 4-byte aligned, so a is bound as 32-bit words and each invocation
// picks its bytes out of them (a_off and a's strides are in bytes here). One
// invocation per element of d, as in mul_mat.comp: for each block of row m it
// adds d * sum(q[j] * b[k + j]), the activations staying F32 (ggml-vulkan's
// mul_mat_vec.comp with the q8_0 dequant funcs does the same per block, with
// a workgroup per row; the CPU instead quantizes b to Q8_0 first).
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

uint byte_at(uint i) { return (a[i >> 2] >> ((i & 3u) * 8u)) & 0xffu; }
int  code_at(uint i) { return int(byte_at(i) << 24) >> 24; }      // sign-extend int8
float scale_at(uint i) { return unpackHalf2x16(a[i >> 2] >> ((i & 2u) * 8u)).x; }  // i is even

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
    for (uint ib = 0; ib < p.K / 32u; ib++) {
        const uint blk = ra + ib * 34u;
        float s = 0.0;
        for (uint j = 0; j < 32u; j++) s += float(code_at(blk + 2u + j)) * b[rb + ib * 32u + j];
        sum += scale_at(blk) * s;
    }
    d[p.d_off + m + n * p.d_nb1 + i2 * p.d_nb2 + i3 * p.d_nb3] = sum;
}
