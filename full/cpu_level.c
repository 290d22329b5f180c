//@file full
// cpu_level.c - the level this engine was compiled for, and what the CPU has.
//
// This file alone is compiled for its architecture's baseline (full/Makefile:
// no -march), so its code runs on any CPU of the architecture, and its
// constructor runs before main: a binary built for AVX-512 started on an AVX2
// laptop names what is missing and exits, instead of dying of SIGILL.
#define _GNU_SOURCE
#include "cpu_level.h"

#include <stdio.h>
#include <stdlib.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

// The XCR0 register: which register states the operating system saves (AVX's
// ymm halves, AVX-512's zmm and mask registers). A CPU feature is usable only
// when the OS saves its registers too.
static uint64_t xcr0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (uint64_t) hi << 32 | lo;
}

// CPUID leaf 1 and leaf 7 (subleaves 0 and 1), bit by bit as Intel's SDM
// (vol. 2A, CPUID) numbers them.
uint32_t mg_cpu_features_present(void) {
    unsigned a, b, c, d;
    uint32_t f = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    const int os_avx    = (c >> 27 & 1) && (xcr0() & 0x6) == 0x6;      // OSXSAVE; xmm and ymm state
    const int os_avx512 = os_avx && (xcr0() & 0xe0) == 0xe0;          // opmask, zmm halves, zmm16-31
    if (os_avx && (c >> 28 & 1)) f |= MG_CPU_AVX;
    if (os_avx && (c >> 12 & 1)) f |= MG_CPU_FMA;
    if (os_avx && (c >> 29 & 1)) f |= MG_CPU_F16C;
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
        if (os_avx && (b >> 5 & 1)) f |= MG_CPU_AVX2;
        if (b >> 8 & 1) f |= MG_CPU_BMI2;
        if (os_avx512) {
            if (b >> 16 & 1) f |= MG_CPU_AVX512F;
            if (b >> 17 & 1) f |= MG_CPU_AVX512DQ;
            if (b >> 28 & 1) f |= MG_CPU_AVX512CD;
            if (b >> 30 & 1) f |= MG_CPU_AVX512BW;
            if (b >> 31 & 1) f |= MG_CPU_AVX512VL;
            if (c >> 1 & 1) f |= MG_CPU_AVX512VBMI;
            if (c >> 11 & 1) f |= MG_CPU_AVX512VNNI;
        }
        if (a >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d)) {
            if (os_avx && (a >> 4 & 1)) f |= MG_CPU_AVXVNNI;
            if (os_avx512 && (a >> 5 & 1)) f |= MG_CPU_AVX512BF16;
        }
    }
    return f;
}
#elif defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>

// Linux reports the CPU's features in the auxiliary vector (HWCAP_* bits of
// asm/hwcap.h): ASIMDDP is SDOT/UDOT, ASIMDHP FP16 vector arithmetic.
uint32_t mg_cpu_features_present(void) {
    const unsigned long hw = getauxval(AT_HWCAP);
    uint32_t            f  = 0;
    if (hw & (1ul << 20)) f |= MG_CPU_DOTPROD;   // HWCAP_ASIMDDP
    if (hw & (1ul << 10)) f |= MG_CPU_FP16;      // HWCAP_ASIMDHP
    return f;
}
#else
// Elsewhere we cannot ask: assume the CPU has what the build was given.
uint32_t mg_cpu_features_present(void) {
    return mg_cpu_features_kernels | mg_cpu_features_engine;
}
#endif

const char * mg_cpu_feature_name(uint32_t bit) {
    static const char * const names[] = {
        "avx", "avx2", "fma", "f16c", "bmi2", "avx512f", "avx512dq", "avx512cd", "avx512bw", "avx512vl",
        "avx512vbmi", "avx512vnni", "avx512bf16", "avxvnni", "dotprod", "fp16",
    };
    for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (bit == 1u << i) return names[i];
    }
    return bit == MG_CPU_SCALAR ? "scalar" : "?";
}

const char * mg_cpu_level(void) {
    const uint32_t k      = mg_cpu_features_kernels | mg_cpu_features_engine;
    const uint32_t avx2   = MG_CPU_AVX2 | MG_CPU_FMA | MG_CPU_F16C;
    const uint32_t avx512 = avx2 | MG_CPU_AVX512F | MG_CPU_AVX512BW | MG_CPU_AVX512VL | MG_CPU_AVX512VNNI |
                            MG_CPU_AVX512BF16;
    if (k & MG_CPU_SCALAR) return "scalar";
    if ((k & avx512) == avx512) return "avx512";
    if ((k & avx2) == avx2 && !(k & MG_CPU_AVX512F)) return "avx2";
    if ((k & (MG_CPU_DOTPROD | MG_CPU_FP16)) == (MG_CPU_DOTPROD | MG_CPU_FP16)) return "neon";
    return "other";
}

// Before main: every feature the compiler was allowed to use must be here.
__attribute__((constructor)) static void check_cpu_at_start(void) {
    const uint32_t need    = (mg_cpu_features_kernels | mg_cpu_features_engine) & ~(uint32_t) MG_CPU_SCALAR;
    const uint32_t missing = need & ~mg_cpu_features_present();
    if (missing == 0) return;
    fprintf(stderr, "mg: this binary was compiled for the '%s' level, and this CPU lacks:", mg_cpu_level());
    for (uint32_t bit = 1; bit != 0 && bit <= missing; bit <<= 1) {
        if (missing & bit) fprintf(stderr, " %s", mg_cpu_feature_name(bit));
    }
    fprintf(stderr, "\nmg: build it for this machine (make clean; make: -march=native), or the portable "
                    "engine (make SCALAR=1)\n");
    exit(1);
}
