//@file full
// cpu_level.h - which instruction-set level this engine was compiled for, and
// whether the CPU it runs on has it.
//
// full/ is compiled for one CPU (-march=native by default, or ARCH_CFLAGS), and
// its kernels add in the order of llama.cpp built for the same level, so the
// level decides which golden set the tests compare with:
//
//     level     what the kernels were compiled with            llama.cpp built with
//     avx512    AVX-512 F/BW/VL + VNNI + BF16 (Zen 4, Sapphire   GGML_NATIVE=ON on such a CPU
//               Rapids)
//     avx2      AVX2 + FMA + F16C, no AVX-512 (x86-64-v3)        GGML_AVX2 GGML_FMA GGML_F16C, AVX512 off
//     neon      aarch64 with dot product and FP16 arithmetic     armv8.2-a+dotprod+fp16
//               (the kernels of vec_neon.c)
//     scalar    every kernel the plain C of vec.c (-DMG_SCALAR,   -
//               or a CPU with no SIMD twins yet)
//     other     anything else (say AVX-512 without BF16)         -
//
// A binary started on a CPU that lacks what it was compiled for would die of
// SIGILL at its first vector instruction. cpu_level.c is compiled for the
// architecture's baseline and checks, before main runs, that every feature the
// compiler was allowed to use is there; if one is not, it names it and exits 1.
#pragma once

#include <stdint.h>

// The features a translation unit was compiled with, as bits of MG_CPU_*.
enum {
    MG_CPU_AVX        = 1u << 0,
    MG_CPU_AVX2       = 1u << 1,
    MG_CPU_FMA        = 1u << 2,
    MG_CPU_F16C       = 1u << 3,
    MG_CPU_BMI2       = 1u << 4,
    MG_CPU_AVX512F    = 1u << 5,
    MG_CPU_AVX512DQ   = 1u << 6,
    MG_CPU_AVX512CD   = 1u << 7,
    MG_CPU_AVX512BW   = 1u << 8,
    MG_CPU_AVX512VL   = 1u << 9,
    MG_CPU_AVX512VBMI = 1u << 10,
    MG_CPU_AVX512VNNI = 1u << 11,
    MG_CPU_AVX512BF16 = 1u << 12,
    MG_CPU_AVXVNNI    = 1u << 13,
    MG_CPU_DOTPROD    = 1u << 14,   // aarch64: SDOT/UDOT
    MG_CPU_FP16       = 1u << 15,   // aarch64: FP16 vector arithmetic
    MG_CPU_SCALAR     = 1u << 30,   // not a feature: the kernels are vec.c's (-DMG_SCALAR, or no SIMD twin)
};

// MG_CPU_FEATURES_DEFINE: a file compiled with the flags to record defines it
// as a variable's name, then includes this header, which defines the variable
// as the features the compiler's predefined macros announce there.
#ifdef MG_CPU_FEATURES_DEFINE
const uint32_t MG_CPU_FEATURES_DEFINE = 0u
#if defined(__AVX__)
    | MG_CPU_AVX
#endif
#if defined(__AVX2__)
    | MG_CPU_AVX2
#endif
#if defined(__FMA__)
    | MG_CPU_FMA
#endif
#if defined(__F16C__)
    | MG_CPU_F16C
#endif
#if defined(__BMI2__)
    | MG_CPU_BMI2
#endif
#if defined(__AVX512F__)
    | MG_CPU_AVX512F
#endif
#if defined(__AVX512DQ__)
    | MG_CPU_AVX512DQ
#endif
#if defined(__AVX512CD__)
    | MG_CPU_AVX512CD
#endif
#if defined(__AVX512BW__)
    | MG_CPU_AVX512BW
#endif
#if defined(__AVX512VL__)
    | MG_CPU_AVX512VL
#endif
#if defined(__AVX512VBMI__)
    | MG_CPU_AVX512VBMI
#endif
#if defined(__AVX512VNNI__)
    | MG_CPU_AVX512VNNI
#endif
#if defined(__AVX512BF16__)
    | MG_CPU_AVX512BF16
#endif
#if defined(__AVXVNNI__)
    | MG_CPU_AVXVNNI
#endif
#if defined(__ARM_FEATURE_DOTPROD)
    | MG_CPU_DOTPROD
#endif
#if defined(__ARM_FEATURE_FP16_VECTOR_ARITHMETIC)
    | MG_CPU_FP16
#endif
#if defined(MG_SCALAR) || defined(MG_SCALAR_KERNELS)
    | MG_CPU_SCALAR
#endif
    ;
#endif

// What the kernels (vec_simd.c, compiled with SIMD_CFLAGS) and the rest of the
// engine (ARCH_CFLAGS) were compiled with.
extern const uint32_t mg_cpu_features_kernels;
extern const uint32_t mg_cpu_features_engine;

// "avx512", "avx2", "neon", "scalar" or "other" (the table above).
const char * mg_cpu_level(void);
// Every feature of `features` this CPU has, as MG_CPU_* bits.
uint32_t mg_cpu_features_present(void);
// The name of one MG_CPU_* bit ("avx512vnni").
const char * mg_cpu_feature_name(uint32_t bit);
