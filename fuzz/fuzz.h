// fuzz.h - what the fuzz harnesses share.
//
// Each harness defines LLVMFuzzerTestOneInput (libFuzzer's entry point): bytes
// in, and either a result that satisfies the harness's properties or a clear
// error; anything else (a crash, a sanitizer report, a broken property) is a
// bug. The same entry points are built twice: with -fsanitize=fuzzer for
// `make fuzz`, and with replay.c's main for `make test`, which runs them over
// the regression inputs in tests/fuzz-regressions/<harness>/.
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#ifndef MG_FUZZ_ROOT
#define MG_FUZZ_ROOT "."
#endif

int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size);
int LLVMFuzzerInitialize(int * argc, char *** argv);

// A property that does not hold: say which, and abort (libFuzzer saves the input).
#define FUZZ_CHECK(cond, ...)                                                           \
    do {                                                                                \
        if (!(cond)) {                                                                  \
            fprintf(stderr, "%s:%d: property failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                               \
            fprintf(stderr, "\n");                                                      \
            abort();                                                                    \
        }                                                                               \
    } while (0)
