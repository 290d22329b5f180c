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

// One test case of a suite, its tests in order: MG_TCASE(s, "views",
// test_view_1d, test_view_2d) stands for tcase_create("views"), one
// tcase_add_test per test and suite_add_tcase. Returns the test case (for a
// timeout or a fixture).
#define MG_TCASE(s, name, ...) mg_test_add_tcase((s), (name), (const TTest * const[]){__VA_ARGS__, NULL})
TCase * mg_test_add_tcase(Suite * s, const char * name, const TTest * const * tests);

// A test that cannot run here (no Graphviz, a build without the instructions
// it is about) says so and returns: MG_TEST_SKIP("why") prints
//     skipped: TEST (FILE:LINE): why
// on stdout. Check 0.15 has no skipped state, so the test counts as passed;
// the line is what keeps it from passing in silence.
#define MG_TEST_SKIP(why)                                       \
    do {                                                        \
        mg_test_print_skip(__func__, __FILE__, __LINE__, why);  \
        return;                                                 \
    } while (0)
void mg_test_print_skip(const char * test, const char * file, int line, const char * why);

// 1 in a build with AddressSanitizer or ThreadSanitizer (make asan, make tsan),
// whose binaries map terabytes of shadow memory at start and so cannot run
// under an address-space limit (ulimit -v).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define MG_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define MG_TEST_SANITIZED 1
#endif
#endif
#ifndef MG_TEST_SANITIZED
#define MG_TEST_SANITIZED 0
#endif

// A path inside tests/fixtures ($MG_FIXTURES overrides the directory).
// The returned string is one of 16 static buffers, used in turn: the last 16
// stay valid (enough for one command line's worth).
const char * mg_test_fixture(const char * rel);

// A path inside the project's root directory (for vendored data, READMEs);
// 16 buffers in turn, as mg_test_fixture.
const char * mg_test_root(const char * rel);

// The threads a test that shares work among n threads may start: n, or at
// most $MG_TEST_MAX_THREADS (make test-aarch64 sets 1: under qemu-user the
// pool's spinning workers crawl; the split itself is tested natively).
int mg_test_threads(int n);

// The mg binary the full/ tests run: $MG_BIN, else the mg of the build folder
// this test binary is in ($(BUILD)/tests/.. : build-asan/mg for make asan),
// else full/build/mg. The returned string is static.
const char * mg_test_mg_bin(void);

// ---------------------------------------------------------------------------
// The command line as a user runs it (the full/ tests of mg): a directory of
// its own per test, and mg as a child process with its exit status, stdout
// and stderr.
// ---------------------------------------------------------------------------

// Makes a fresh directory /tmp/mg_test_TAG_XXXXXX and writes its path into
// dir (size bytes, 64 is plenty); the test fails if it cannot.
void mg_test_make_dir(char * dir, size_t size, const char * tag);

// Removes dir and everything in it. Check runs a teardown only after a test
// passed, so a failed test leaves its directory (mg's stdout.txt and
// stderr.txt) in /tmp for a look.
void mg_test_remove_dir(const char * dir);

// dir/name, in one of 16 static buffers used in turn (the last 16 stay valid).
const char * mg_test_path_in(const char * dir, const char * name);

struct mg_test_run {
    int    status;    // the exit code, or -1 if mg did not exit normally (a crash)
    char * out;       // stdout, NUL-terminated
    size_t out_len;   // its length (a NUL byte inside counts)
    char * err;       // stderr, NUL-terminated
};

// Runs mg (mg_test_mg_bin) with the arguments fmt, printf-style shell words
// (quote paths with ''), as the shell line
//     PREFIX exec MG ARGS > DIR/stdout.txt 2> DIR/stderr.txt < STDIN
// prefix: shell text run first (ulimit, export, trap), or NULL; stdin_path:
// NULL for /dev/null. exec makes the shell become mg, so a crash shows as a
// signal (status -1), not as the shell's exit code. The test fails if mg is
// not built or its output cannot be read. Free the run with mg_test_run_free.
struct mg_test_run mg_test_run_mg(const char * dir, const char * prefix, const char * stdin_path, const char * fmt, ...)
    __attribute__((format(printf, 4, 5)));
void mg_test_run_free(struct mg_test_run * r);

// A clear error, as the project's rule asks of bad input: mg ARGS exits with
// status 1, prints nothing on stdout and one line on stderr that starts with
// "mg " and contains every non-NULL fragment.
void mg_test_expect_mg_error(const char * dir, const char * fragment1, const char * fragment2, const char * fmt, ...)
    __attribute__((format(printf, 4, 5)));

// How many '\n' s holds.
int mg_test_count_lines(const char * s);

// How many temporary files of full/'s writer (outfile.h: DIR/.NAME.XXXXXX)
// for the output path are in its directory: 0 after any run, whatever it did.
int mg_test_count_temp_files(const char * path);

// Reads a whole file; NULL if it cannot. The caller frees.
void * mg_test_read_file(const char * path, size_t * size);

// Deterministic random numbers (xorshift64*), so failures reproduce.
uint64_t mg_test_rand_u64(uint64_t * state);
float    mg_test_rand_uniform(uint64_t * state, float lo, float hi);
float    mg_test_rand_normal(uint64_t * state);
void     mg_test_fill_uniform(float * x, size_t n, uint64_t * state, float lo, float hi);
void     mg_test_fill_normal(float * x, size_t n, uint64_t * state);

// sqrt(mean((y - x)^2)) in double: the error of a round trip x -> y.
double mg_test_rms_error(const float * x, const float * y, size_t n);

// The numbers of the JSON value after "key" in json (the fixtures' goldens): a
// number or (nested) arrays of numbers, flattened in reading order. Returns
// how many there are (at most max are stored in out), or -1 if the key is
// missing or its array is not closed.
int mg_test_json_numbers(const char * json, const char * key, double * out, int max);

// The sha256 of n bytes, as 64 hex digits and a NUL.
void mg_test_sha256_hex(const void * bytes, size_t n, char out[65]);
// The sha256 a fixture table records for name (tsv relative to tests/fixtures,
// rows "NAME BYTES SHA256": tests/fixtures/golden2/models.tsv); fails the test
// when there is no such row.
void mg_test_recorded_sha256(const char * tsv, const char * name, char out[65]);
