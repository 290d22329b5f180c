#version 450
#extension GL_GOOGLE_include_directive : require
// get_rows.comp - d row k = row ids[k] of a, decoded to F32: the token
// embeddings' lookup (MG_OP_GET_ROWS, ggml-vulkan's get_rows.comp). a is F32,
// F16, Q8_0 or Q4_0 (type: 0, 1, 8, 2, ggml's numbers), decoded with the
// arithmetic of mg_dequantize_row_*: the same floats as the CPU's. One
// invocation per element of d.
layout(local_size_x = 256) in;

#include "index.glsl"

layout(std430, binding = 0) readonly buffer A { uint a[]; };
layout(std430, binding = 1) readonly buffer I { int ids[]; };
layout(std430, binding = 3) writeonly buffer D { float d[]; };

layout(push_constant) uniform Params {
    uint ne0, n;            // d's row length, d's elements
    uint a_off, a_nb1;      // in bytes
    uint ids_off, d_off;    // in ints, in floats
    uint a_rows, type;
} p;

#include "bytes.glsl"

// Element i0 of the row starting at byte r.
float decode(uint r, uint i0) {
    if (p.type == 0u) return uintBitsToFloat(a[(r >> 2) + i0]);
    if (p.type == 1u) return half_at(r + 2u * i0);
    const uint j = i0 % 32u;
    if (p.type == 8u) {   // Q8_0: 34-byte blocks, d * q
        const uint blk = r + (i0 / 32u) * 34u;
        return float(int8_at(blk + 2u + j)) * half_at(blk);
    }
    const uint blk = r + (i0 / 32u) * 18u;   // Q4_0: 18-byte blocks, d * (code - 8)
    const uint q   = byte_at(blk + 2u + j % 16u);
    return float(int(j < 16u ? q & 15u : q >> 4) - 8) * half_at(blk);
}

void main() {
    const uint i = invocation_index();
    if (i >= p.n) return;
    const uint i0 = i % p.ne0, k = i / p.ne0;
    const int  row = ids[p.ids_off + k];
    // An index out of range gives 0 (the CPU backend stops there).
    d[p.d_off + i] = row >= 0 && uint(row) < p.a_rows ? decode(p.a_off + uint(row) * p.a_nb1, i0) : 0.0;
}
