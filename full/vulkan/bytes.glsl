// bytes.glsl - reading packed weights (#include'd after the shader binds
// them as `uint a[]`): blocks are rarely 4-byte aligned (34, 18, 144, 210
// bytes), so they are bound as 32-bit words and read by the byte.
uint  byte_at(uint i)  { return (a[i >> 2] >> ((i & 3u) * 8u)) & 0xffu; }
int   int8_at(uint i)  { return int(byte_at(i) << 24) >> 24; }   // sign-extended
float half_at(uint i)  { return unpackHalf2x16(a[i >> 2] >> ((i & 2u) * 8u)).x; }   // i is even
#ifdef B_Q8
// The same for the quantized activations (mul_mat_quant.glsl's B_Q8), and
// the two wider fields of a Q8_K block: its F32 d, its int16 sums.
int   b_int8_at(uint i)  { return int(((bq[i >> 2] >> ((i & 3u) * 8u)) & 0xffu) << 24) >> 24; }
float b_half_at(uint i)  { return unpackHalf2x16(bq[i >> 2] >> ((i & 2u) * 8u)).x; }   // i is even
float b_float_at(uint i) { return uintBitsToFloat(bq[i >> 2]); }                        // i is a multiple of 4
int   b_int16_at(uint i) { return int((bq[i >> 2] >> ((i & 2u) * 8u)) << 16) >> 16; }   // i is even
// The 4 int8 codes of the word at byte i (a multiple of 4): one load, not 4.
ivec4 b_int8x4_at(uint i) {
    const uint w = bq[i >> 2];
    return ivec4(int(w << 24), int(w << 16), int(w << 8), int(w)) >> 24;
}
#endif
