#version 450
#extension GL_GOOGLE_include_directive : require
// set_rows.comp - row r of F32 src into row idx[r] of dst, converted to dst's
// type, F32 or F16: how K and V are stored into a cache in device memory
// (MG_OP_SET_ROWS, ggml_set_rows; ggml-vulkan's copy_to_quant.comp family).
// One invocation per element of src. dst is bound as 32-bit words, its
// offset and strides in bytes: an F16 element is half a word, and two
// invocations may write the two halves of one word (V is stored one element
// per row), so each half is written with an atomicAnd that clears it and an
// atomicOr that sets it, which leave the other half alone.
//
// The F32 -> F16 rounding is done here in integers, to nearest with ties to
// even as quants.c's mg_fp32_to_fp16 (and F16C) do: GLSL leaves
// packHalf2x16's rounding to the driver.
layout(local_size_x = 256) in;

#include "index.glsl"

layout(std430, binding = 0) readonly buffer S { float s[]; };
layout(std430, binding = 1) readonly buffer I { int idx[]; };
layout(std430, binding = 3) buffer D { uint d[]; };

layout(push_constant) uniform Params {
    uint ne0, ne1, ne2, n;              // src's shape; n its elements
    uint s_off, s_nb1, s_nb2, s_nb3;    // in floats
    uint idx_off;                       // in ints
    uint d_off, d_nb1;                  // in bytes
    uint d_rows, d_f16;
} p;

// v >> shift, rounded to nearest, ties to even.
uint round_shift_rne(uint v, uint shift) {
    const uint kept = v >> shift, rest = v & ((1u << shift) - 1u), halfway = 1u << (shift - 1u);
    return kept + ((rest > halfway || (rest == halfway && (kept & 1u) != 0u)) ? 1u : 0u);
}

uint f32_to_f16(float f) {
    const uint x = floatBitsToUint(f), sign = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;
    if (a > 0x7f800000u) return sign | 0x7e00u;                          // NaN
    if (a >= 0x477ff000u) return sign | 0x7c00u;                         // rounds past 65504: inf
    if (a >= 0x38800000u) return sign | round_shift_rne(a - ((127u - 15u) << 23), 13u);   // normal
    if (a < 0x33000000u) return sign;                                    // rounds to zero
    return sign | round_shift_rne((a & 0x7fffffu) | 0x800000u, 126u - (a >> 23));       // subnormal
}

void main() {
    const uint i = invocation_index();
    if (i >= p.n) return;
    const uint i0 = i % p.ne0, r = i / p.ne0;
    const uint i1 = r % p.ne1, i2 = (r / p.ne1) % p.ne2, i3 = r / (p.ne1 * p.ne2);
    const float x   = s[p.s_off + i0 + i1 * p.s_nb1 + i2 * p.s_nb2 + i3 * p.s_nb3];
    const int   row = idx[p.idx_off + r];
    if (row < 0 || uint(row) >= p.d_rows) return;   // out of range: nothing (the CPU backend stops there)
    const uint at = p.d_off + uint(row) * p.d_nb1;
    if (p.d_f16 == 0u) {
        d[at / 4u + i0] = floatBitsToUint(x);
        return;
    }
    const uint byte = at + 2u * i0, shift = (byte & 2u) * 8u;
    atomicAnd(d[byte / 4u], ~(0xffffu << shift));
    atomicOr(d[byte / 4u], f32_to_f16(x) << shift);
}
