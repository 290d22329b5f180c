// rounding.glsl - the two roundings the activation quantizers need exactly as
// the CPU does them (#include'd by quantize_q8_0.comp and quantize_q8_k.comp).
// Vulkan makes float addition and multiplication correctly rounded, but lets
// a division be 2.5 ulp off and leaves the rounding of packHalf2x16 to the
// driver; one ulp in a block's scale can move a code by one. So both are
// done here on the bits, with integers alone, as IEEE defines them.

// Round v, which has `shift` (1..31) extra low bits, to nearest, ties to
// even; sticky: bits below those were dropped already and were not all zero.
uint round_shift_rne(uint v, uint shift, bool sticky) {
    const uint kept = v >> shift, rest = v & ((1u << shift) - 1u), halfway = 1u << (shift - 1u);
    const bool up = rest > halfway || (rest == halfway && (sticky || (kept & 1u) == 1u));
    return kept + (up ? 1u : 0u);
}

// A float's magnitude as a 24-bit mantissa with its leading 1 at bit 23 and
// an exponent (biased as the field; subnormals normalized below 1).
void unpack_float(uint bits, out uint mant, out int e) {
    e    = int(bits >> 23);
    mant = bits & 0x7fffffu;
    if (e == 0) {
        const int s = 23 - findMSB(mant);
        mant <<= uint(s), e = 1 - s;
    } else {
        mant |= 0x800000u;
    }
}

// a / b rounded to nearest even (a, b finite, b not zero): the mantissas
// divided bit by bit, long division on paper, 26 quotient bits and whether
// anything remained, then rounded once, to a normal or a subnormal float or
// to infinity.
float div_rn(float a, float b) {
    const uint ua = floatBitsToUint(a), ub = floatBitsToUint(b);
    const uint sign = (ua ^ ub) & 0x80000000u;
    if ((ua & 0x7fffffffu) == 0u) return uintBitsToFloat(sign);
    uint ma, mb;
    int  ea, eb;
    unpack_float(ua & 0x7fffffffu, ma, ea);
    unpack_float(ub & 0x7fffffffu, mb, eb);
    int e = ea - eb + 127;                 // the quotient's exponent field when ma >= mb
    if (ma < mb) ma <<= 1, e -= 1;         // now 1 <= ma / mb < 2
    uint q = 0u, r = ma;
    for (int i = 0; i < 26; i++) {         // q = floor(ma / mb * 2^25)
        q <<= 1;
        if (r >= mb) r -= mb, q |= 1u;
        r <<= 1;
    }
    if (e >= 255) return uintBitsToFloat(sign | 0x7f800000u);
    if (e >= 1) {                          // normal: keep 24 of q's 26 bits (a carry bumps e, to inf at most)
        return uintBitsToFloat(sign | ((uint(e - 1) << 23) + round_shift_rne(q, 2u, r != 0u)));
    }
    const int shift = 3 - e;               // subnormal: units of 2^-149
    if (shift > 26) return uintBitsToFloat(sign);   // below half the smallest subnormal
    return uintBitsToFloat(sign | round_shift_rne(q, uint(shift), r != 0u));
}

// f as an fp16, rounded to nearest even, in the low 16 bits (quants.c's
// mg_fp32_to_fp16, ggml's FP32_TO_FP16 with F16C): f not NaN.
uint fp16_bits(float f) {
    const uint x = floatBitsToUint(f), sign = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;
    if (a >= 0x477ff000u) return sign | 0x7c00u;                  // >= 65520: inf
    if (a >= 0x38800000u) return sign | round_shift_rne(a - ((127u - 15u) << 23), 13u, false);
    if (a < 0x33000000u) return sign;                              // below 2^-25: zero
    return sign | round_shift_rne((a & 0x7fffffu) | 0x800000u, 126u - (a >> 23), false);   // subnormal half
}
