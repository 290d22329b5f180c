// vnni_canary.c - the GCC 12 miscompile that tools/engine.mk's NO_AUTO_VNNI
// keeps out of every build, as a program: it prints the sum a plain loop
// computes and exits 1 when it is wrong.
//
// The loop is the dot product of a Q4_0 block as ggml's scalar code writes it:
// (x & 15) - 8 is a weight code in [-8, 7], y an int8 activation. GCC 12.2 at
// -O2 with VNNI enabled (-mavxvnni, or -mavx512vnni -mavx512vl -mavx512bw; so
// -march=native on such a CPU, or -march=alderlake, icelake-server,
// sapphirerapids) narrows the subtraction to bytes, then multiplies those bytes
// with vpdpbusd, which reads its first operand as UNSIGNED bytes: every code
// below zero counts 256 too much. With x all zero and y all one the sum is
// 32 * (0 - 8) = -256; the miscompiled loop returns 31 * 256 - 256 = 7936.
// The C is well defined (no overflow, no aliasing), so this is the compiler's
// fault, and a cast to int8_t does not help; clang 14 compiles it correctly.
//
// full/Makefile's check-auto-vnni runs it built with the engine's own flags,
// and compiles it for the VNNI -march values to show no VNNI instruction is
// emitted whatever -march is given.
#include <stdio.h>

__attribute__((noinline)) static int dot_q4_0_codes(const unsigned char * x, const signed char * y) {
    int s = 0;
    for (int j = 0; j < 32; j++) s += ((x[j] & 15) - 8) * y[j];
    return s;
}

int main(void) {
    unsigned char x[32];
    signed char   y[32];
    for (int j = 0; j < 32; j++) x[j] = 0, y[j] = 1;
    const int s = dot_q4_0_codes(x, y);
    printf("vnni_canary: sum %d, expected -256: %s\n", s, s == -256 ? "ok" : "WRONG (the compiler miscompiled the loop)");
    return s == -256 ? 0 : 1;
}
