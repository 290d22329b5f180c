// bytes.glsl - reading packed weights (#include'd after the shader binds
// them as `uint a[]`): blocks are rarely 4-byte aligned (34, 18, 144, 210
// bytes), so they are bound as 32-bit words and read by the byte.
uint  byte_at(uint i)  { return (a[i >> 2] >> ((i & 3u) * 8u)) & 0xffu; }
int   int8_at(uint i)  { return int(byte_at(i) << 24) >> 24; }   // sign-extended
float half_at(uint i)  { return unpackHalf2x16(a[i >> 2] >> ((i & 2u) * 8u)).x; }   // i is even
