// harness.h - what every test file shares.
//
// Each tests/NN_name/test_*.c file is one Check suite: it defines
// mg_test_suite() and is linked with harness.c, whose main() runs the suite and
// prints Check's summary line. Tests of chapter NN are built against chapter NN,
// every later chapter and full/ (see tools/engine.mk), so they may only use
// what chapter NN already has.
#pragma once

#include <check.h>
#include <stdint.h>
#include <stddef.h>

Suite * mg_test_suite(void);

// A path inside tests/fixtures ($MG_FIXTURES overrides the directory).
// The returned string is static: copy it before calling again.
const char * mg_test_fixture(const char * rel);

// A path inside the project's root directory (for vendored data, READMEs).
const char * mg_test_root(const char * rel);

// The mg binary the full/ tests run: $MG_BIN, else the mg of the build folder
// this test binary is in ($(BUILD)/tests/.. : build-asan/mg for make asan),
// else full/build/mg. The returned string is static.
const char * mg_test_mg_bin(void);

// Reads a whole file; NULL if it cannot. The caller frees.
void * mg_test_read_file(const char * path, size_t * size);

// Deterministic random numbers (xorshift64*), so failures reproduce.
uint64_t mg_test_rand_u64(uint64_t * state);
float    mg_test_rand_uniform(uint64_t * state, float lo, float hi);
float    mg_test_rand_normal(uint64_t * state);
void     mg_test_fill_uniform(float * x, size_t n, uint64_t * state, float lo, float hi);

// The numbers of the JSON value after "key" in json (the fixtures' goldens): a
// number or (nested) arrays of numbers, flattened in reading order. Returns
// how many there are (at most max are stored in out), or -1 if the key is
// missing or its array is not closed.
int mg_test_json_numbers(const char * json, const char * key, double * out, int max);
