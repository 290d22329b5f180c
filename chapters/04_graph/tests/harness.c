// harness.c - main() for every test binary, and the helpers of harness.h.
#define _DEFAULT_SOURCE   // M_PI
#include "harness.h"

#include <dirent.h>
#include <limits.h>   // NAME_MAX
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef MG_TEST_ROOT
#error "MG_TEST_ROOT must name the project root (set by tools/engine.mk)"
#endif
#ifndef MG_TEST_FIXTURES
#define MG_TEST_FIXTURES MG_TEST_ROOT "/tests/fixtures"
#endif

TCase * mg_test_add_tcase(Suite * s, const char * name, const TTest * const * tests) {
    TCase * tc = tcase_create(name);
    for (; *tests != NULL; tests++) tcase_add_test(tc, *tests);
    suite_add_tcase(s, tc);
    return tc;
}

void mg_test_print_skip(const char * test, const char * file, int line, const char * why) {
    // Check names a test's function NAME_fn: print the NAME the suite lists.
    const size_t n = strlen(test);
    const int    keep = n > 3 && strcmp(test + n - 3, "_fn") == 0 ? (int) (n - 3) : (int) n;
    const char * base = strrchr(file, '/');
    printf("skipped: %.*s (%s:%d): %s\n", keep, test, base != NULL ? base + 1 : file, line, why);
    fflush(stdout);   // before Check's own lines, and before a forked test exits
}

// The fixtures are vendored in the repository (tests/fixtures, see its
// README); $MG_FIXTURES points the tests at another copy.
static const char * fixtures_dir(void) {
    const char * dir = getenv("MG_FIXTURES");
    return dir != NULL && *dir ? dir : MG_TEST_FIXTURES;
}

// dir/rel in the next of 16 static buffers: a caller may hold the last 16.
static const char * path_in_turn(const char * dir, const char * rel) {
    static char paths[16][4096];
    static int  next;
    char *      path = paths[next++ % 16];
    snprintf(path, sizeof(paths[0]), "%s/%s", dir, rel);
    return path;
}

const char * mg_test_fixture(const char * rel) {
    return path_in_turn(fixtures_dir(), rel);
}

const char * mg_test_root(const char * rel) {
    return path_in_turn(MG_TEST_ROOT, rel);
}

int mg_test_threads(int n) {
    const char * env = getenv("MG_TEST_MAX_THREADS");
    const int    max = env != NULL && *env ? atoi(env) : 0;
    return max > 0 && max < n ? max : n;
}

const char * mg_test_mg_bin(void) {
    static char bin[4096];
    const char * env = getenv("MG_BIN");
    if (env != NULL && *env) return env;
    char self[4000];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n > 0) {
        self[n] = '\0';
        char * slash = strrchr(self, '/');             // .../$(BUILD)/tests/NAME
        if (slash != NULL) *slash = '\0';
        slash = strrchr(self, '/');                    // .../$(BUILD)/tests
        if (slash != NULL) {
            *slash = '\0';
            snprintf(bin, sizeof(bin), "%s/mg", self);
            if (access(bin, X_OK) == 0) return bin;
        }
    }
    snprintf(bin, sizeof(bin), "%s", mg_test_root("full/build/mg"));
    return bin;
}

void mg_test_make_dir(char * dir, size_t size, const char * tag) {
    snprintf(dir, size, "/tmp/mg_test_%s_XXXXXX", tag);
    ck_assert_msg(mkdtemp(dir) != NULL, "cannot make a directory %s", dir);
}

void mg_test_remove_dir(const char * dir) {
    if (dir[0] == '\0') return;
    char cmd[4200];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);   // only a directory mg_test_make_dir made
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

const char * mg_test_path_in(const char * dir, const char * name) {
    return path_in_turn(dir, name);
}

static struct mg_test_run run_mg_v(const char * dir, const char * prefix, const char * stdin_path, const char * fmt,
                                   va_list ap) {
    const char * bin = mg_test_mg_bin();
    ck_assert_msg(access(bin, X_OK) == 0, "the mg binary is not built: %s (make -C full builds it; or set MG_BIN)",
                  bin);
    char args[8192], out[4200], err[4200];
    vsnprintf(args, sizeof(args), fmt, ap);
    snprintf(out, sizeof(out), "%s/stdout.txt", dir);
    snprintf(err, sizeof(err), "%s/stderr.txt", dir);
    char * cmd = malloc(32768);
    ck_assert_ptr_nonnull(cmd);
    snprintf(cmd, 32768, "%s exec '%s' %s > '%s' 2> '%s' < '%s'", prefix ? prefix : "", bin, args, out, err,
             stdin_path ? stdin_path : "/dev/null");
    const int          ws = system(cmd);
    struct mg_test_run r  = {.status = WIFEXITED(ws) ? WEXITSTATUS(ws) : -1};
    r.out = mg_test_read_file(out, &r.out_len);
    r.err = mg_test_read_file(err, NULL);
    ck_assert_msg(r.out != NULL && r.err != NULL, "cannot read the output of: %s", cmd);
    free(cmd);
    return r;
}

struct mg_test_run mg_test_run_mg(const char * dir, const char * prefix, const char * stdin_path, const char * fmt,
                                  ...) {
    va_list ap;
    va_start(ap, fmt);
    struct mg_test_run r = run_mg_v(dir, prefix, stdin_path, fmt, ap);
    va_end(ap);
    return r;
}

void mg_test_run_free(struct mg_test_run * r) {
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}

int mg_test_count_lines(const char * s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

void mg_test_expect_mg_error(const char * dir, const char * fragment1, const char * fragment2, const char * fmt, ...) {
    char    args[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof(args), fmt, ap);
    va_end(ap);
    struct mg_test_run r = mg_test_run_mg(dir, NULL, NULL, "%s", args);
    ck_assert_msg(r.status == 1, "mg %s: exit status %d, expected 1: %.1500s", args, r.status, r.err);
    ck_assert_msg(r.out_len == 0, "mg %s printed on stdout: %.500s", args, r.out);
    ck_assert_msg(mg_test_count_lines(r.err) == 1, "mg %s: expected one line on stderr, got:\n%.1500s", args, r.err);
    ck_assert_msg(strncmp(r.err, "mg ", 3) == 0, "mg %s: the message does not say who speaks: %.1500s", args, r.err);
    ck_assert_msg(fragment1 == NULL || strstr(r.err, fragment1) != NULL, "mg %s: '%s' not in: %.1500s", args,
                  fragment1, r.err);
    ck_assert_msg(fragment2 == NULL || strstr(r.err, fragment2) != NULL, "mg %s: '%s' not in: %.1500s", args,
                  fragment2, r.err);
    mg_test_run_free(&r);
}

int mg_test_count_temp_files(const char * path) {
    char dir[4096];
    const char * slash = strrchr(path, '/');
    const char * base  = slash ? slash + 1 : path;
    snprintf(dir, sizeof(dir), "%.*s", slash ? (int) (slash - path) : 1, slash ? path : ".");
    char prefix[512];
    snprintf(prefix, sizeof(prefix), ".%.*s.", (int) (strlen(base) < NAME_MAX - 8 ? strlen(base) : NAME_MAX - 8), base);   // outfile.c cuts NAME so the name fits
    DIR * d = opendir(dir);
    if (d == NULL) return 0;
    int n = 0;
    for (struct dirent * e; (e = readdir(d)) != NULL;) n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return n;
}

void * mg_test_read_file(const char * path, size_t * size) {
    FILE * f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char * buf = malloc((size_t) n + 1);
    if (buf && fread(buf, 1, (size_t) n, f) != (size_t) n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) {
        buf[n] = '\0';
        if (size) *size = (size_t) n;
    }
    return buf;
}

uint64_t mg_test_rand_u64(uint64_t * state) {
    uint64_t x = *state ? *state : 0x9E3779B97F4A7C15ull;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545F4914F6CDD1Dull;
}

float mg_test_rand_uniform(uint64_t * state, float lo, float hi) {
    double u = (double) (mg_test_rand_u64(state) >> 11) / (double) (1ull << 53);
    return lo + (float) (u * (hi - lo));
}

float mg_test_rand_normal(uint64_t * state) {
    // Box-Muller: good enough for test data.
    double u1 = ((double) (mg_test_rand_u64(state) >> 11) + 1.0) / (double) (1ull << 53);
    double u2 = (double) (mg_test_rand_u64(state) >> 11) / (double) (1ull << 53);
    return (float) (sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
}

void mg_test_fill_uniform(float * x, size_t n, uint64_t * state, float lo, float hi) {
    for (size_t i = 0; i < n; i++) x[i] = mg_test_rand_uniform(state, lo, hi);
}

void mg_test_fill_normal(float * x, size_t n, uint64_t * state) {
    for (size_t i = 0; i < n; i++) x[i] = mg_test_rand_normal(state);
}

double mg_test_rms_error(const float * x, const float * y, size_t n) {
    double se = 0;
    for (size_t i = 0; i < n; i++) se += ((double) y[i] - x[i]) * ((double) y[i] - x[i]);
    return sqrt(se / (double) n);
}

// Enough JSON for the golden files, whose values are plain numbers and
// arrays of them: skip to the key, then walk brackets and numbers.
int mg_test_json_numbers(const char * json, const char * key, double * out, int max) {
    char quoted[128];
    snprintf(quoted, sizeof(quoted), "\"%s\"", key);
    const char * p = strstr(json, quoted);
    if (p == NULL) return -1;
    p += strlen(quoted);
    while (*p == ' ' || *p == ':') p++;
    int n = 0, depth = 0;
    do {
        if (*p == '[') {
            depth++;
            p++;
        } else if (*p == ']') {
            depth--;
            p++;
        } else if (*p == '-' || (*p >= '0' && *p <= '9')) {
            char *       end;
            const double v = strtod(p, &end);
            if (n < max) out[n] = v;
            n++;
            p = end;
        } else if (*p == '\0') {
            return -1;   // an unterminated array: a broken golden file
        } else {
            p++;
        }
    } while (depth > 0);
    return n;
}

// ---------------------------------------------------------------------------
// sha256 (FIPS 180-4): a file is the one a fixture table records
// ---------------------------------------------------------------------------

static uint32_t ror(uint32_t x, int n) {
    return (x >> n) | (x << (32 - n));
}

static void sha256_block(uint32_t h[8], const unsigned char * p) {
    static const uint32_t k[64] = {
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
        0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
        0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
        0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
        0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
        0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
        0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
    };
    uint32_t w[64];
    for (int i = 0; i < 16; i++) {
        w[i] = (uint32_t) p[4 * i] << 24 | (uint32_t) p[4 * i + 1] << 16 | (uint32_t) p[4 * i + 2] << 8 | p[4 * i + 3];
    }
    for (int i = 16; i < 64; i++) {
        const uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
        const uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i]              = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int i = 0; i < 64; i++) {
        const uint32_t t1 = hh + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) + ((e & f) ^ (~e & g)) + k[i] + w[i];
        const uint32_t t2 = (ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        hh = g;
        g  = f;
        f  = e;
        e  = d + t1;
        d  = c;
        c  = b;
        b  = a;
        a  = t1 + t2;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += hh;
}

void mg_test_sha256_hex(const void * bytes, size_t n, char out[65]) {
    const unsigned char * data = bytes;
    uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    size_t   i    = 0;
    for (; i + 64 <= n; i += 64) sha256_block(h, data + i);
    unsigned char tail[128] = {0};
    const size_t  rest      = n - i;
    memcpy(tail, data + i, rest);
    tail[rest]             = 0x80;
    const size_t tail_len  = rest + 9 <= 64 ? 64 : 128;
    const uint64_t bits    = (uint64_t) n * 8;
    for (int b = 0; b < 8; b++) tail[tail_len - 1 - b] = (unsigned char) (bits >> (8 * b));
    for (size_t t = 0; t < tail_len; t += 64) sha256_block(h, tail + t);
    for (int k = 0; k < 8; k++) snprintf(out + 8 * k, 9, "%08x", h[k]);
}

void mg_test_recorded_sha256(const char * tsv, const char * name, char out[65]) {
    char * text = mg_test_read_file(mg_test_fixture(tsv), NULL);
    ck_assert_msg(text != NULL, "cannot read %s", mg_test_fixture(tsv));
    out[0] = '\0';
    for (char * line = strtok(text, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        char      row[32], sha[65];
        long long size;
        if (sscanf(line, "%31s %lld %64s", row, &size, sha) == 3 && strcmp(row, name) == 0) snprintf(out, 65, "%s", sha);
    }
    free(text);
    ck_assert_msg(out[0] != '\0', "%s has no row for %s", tsv, name);
}

int main(void) {
    SRunner * sr = srunner_create(mg_test_suite());
    srunner_run_all(sr, CK_ENV);   // prints "100%: Checks: N, Failures: 0, Errors: 0" (CK_VERBOSITY=verbose: every check)
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
