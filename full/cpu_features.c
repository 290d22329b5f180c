//@file full
// cpu_features.c - the instruction-set features the engine's files were
// compiled with (ARCH_CFLAGS); vec_simd.c records its own (SIMD_CFLAGS).
// cpu_level.c compares both with the CPU's before main.
#define MG_CPU_FEATURES_DEFINE mg_cpu_features_engine
#include "cpu_level.h"
