// test_safety.c - nothing a user types runs a command, crashes mg or destroys
// a file: rival programs are started without a shell and within a time
// limit, outputs never land on an input, sizes are checked before anything is
// allocated. Each case runs mg as a user runs it (a child process, harness.h)
// and checks what can be seen from outside: files that exist or not, their
// bytes, the exit status and the message.
#define _DEFAULT_SOURCE   // symlink, link, chmod
#include "harness.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char dir[64];   // a fresh directory per test (mg_test_make_dir)

static void setup(void) {
    mg_test_make_dir(dir, sizeof(dir), "safety");
}

static void teardown(void) {
    mg_test_remove_dir(dir);
}

#define in_dir(name) mg_test_path_in(dir, name)
#define mg(...)      mg_test_run_mg(dir, NULL, NULL, __VA_ARGS__)
#define expect_error(f1, f2, ...) mg_test_expect_mg_error(dir, f1, f2, __VA_ARGS__)

// Exit status 1 and every non-NULL fragment on stderr (for commands that
// print a heading on stdout before the part that fails).
static void expect_failure(const char * f1, const char * f2, const char * fmt, ...) __attribute__((format(printf, 3, 4)));
static void expect_failure(const char * f1, const char * f2, const char * fmt, ...) {
    char    args[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof(args), fmt, ap);
    va_end(ap);
    struct mg_test_run r = mg("%s", args);
    ck_assert_msg(r.status == 1, "mg %s: exit status %d, expected 1: %.1500s", args, r.status, r.err);
    ck_assert_msg(f1 == NULL || strstr(r.err, f1) != NULL, "mg %s: '%s' not in: %.1500s", args, f1, r.err);
    ck_assert_msg(f2 == NULL || strstr(r.err, f2) != NULL, "mg %s: '%s' not in: %.1500s", args, f2, r.err);
    mg_test_run_free(&r);
}

static const char * model(void) {
    return mg_test_fixture("models/tiny-q8_0.gguf");
}

static void write_file(const char * path, const void * data, size_t size) {
    FILE * f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "cannot write %s", path);
    ck_assert_uint_eq(fwrite(data, 1, size, f), size);
    ck_assert_int_eq(fclose(f), 0);
}

static void copy_file(const char * from, const char * to) {
    size_t size;
    void * b = mg_test_read_file(from, &size);
    ck_assert_msg(b != NULL, "cannot read %s", from);
    write_file(to, b, size);
    free(b);
}

// s as one shell word: in single quotes, each ' written as '\'' (for the
// harness's shell line only; mg itself never sees a shell).
static const char * sh_quote(const char * s) {
    static char buf[4][1024];
    static int  turn = 0;
    char * out = buf[turn++ % 4];
    size_t n   = 0;
    out[n++]   = '\'';
    for (; *s && n + 5 < sizeof(buf[0]); s++) {
        if (*s == '\'') {
            memcpy(out + n, "'\\''", 4);
            n += 4;
        } else {
            out[n++] = *s;
        }
    }
    out[n++] = '\'';
    out[n]   = '\0';
    return out;
}

// A stand-in rival: a shell script `name` in the test directory whose body is
// `body` (it may use $ARGS, the file its arguments are written to, one per line).
static const char * rival(const char * name, const char * body) {
    const char * path = in_dir(name);
    FILE * f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "#!/bin/sh\nARGS='%s'\nfor a in \"$@\"; do printf '%%s\\n' \"$a\"; done > \"$ARGS\"\n%s", in_dir("args.txt"),
            body);
    fclose(f);
    ck_assert_int_eq(chmod(path, 0755), 0);
    return path;
}

// llama-bench's CSV for the tests pp8 and tg4 at 1 thread, with avg_ts as given.
static char * bench_csv(const char * avg_ts, char * out, size_t size) {
    snprintf(out, size,
             "echo '\"n_threads\",\"flash_attn\",\"n_prompt\",\"n_gen\",\"n_depth\",\"avg_ts\"'\n"
             "echo '\"1\",\"0\",\"8\",\"0\",\"0\",\"%s\"'\n"
             "echo '\"1\",\"0\",\"0\",\"4\",\"0\",\"%s\"'\n", avg_ts, avg_ts);
    return out;
}

static double seconds_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

// ---------------------------------------------------------------------------
// Rivals: an argv, never a shell; a time limit; output that must make sense
// ---------------------------------------------------------------------------

// A model whose name is shell code: nothing runs, and the rival gets the name
// as one argument, byte for byte.
START_TEST(test_rival_no_shell) {
    const char * name = in_dir("x'$(touch PWNED)'y.gguf");
    copy_file(model(), name);
    char csv[512];
    const char * bench = rival("rival.sh", bench_csv("100.0", csv, sizeof(csv)));
    char prefix[128];
    snprintf(prefix, sizeof(prefix), "cd '%s';", dir);   // where $(touch PWNED) would leave its file
    struct mg_test_run r = mg_test_run_mg(dir, prefix, NULL, "bench -m %s -p 8 -n 4 -t 1 -r 1 --rounds 1 --llama-bench %s",
                                          sh_quote(name), sh_quote(bench));
    ck_assert_msg(r.status == 0, "bench: exit %d: %s", r.status, r.err);
    mg_test_run_free(&r);
    ck_assert_msg(access(in_dir("PWNED"), F_OK) != 0, "the file name was run as a command: PWNED exists");
    size_t len;
    char * args = mg_test_read_file(in_dir("args.txt"), &len);
    ck_assert_ptr_nonnull(args);
    char want[512];
    snprintf(want, sizeof(want), "-m\n%s\n", name);
    ck_assert_msg(strstr(args, want) != NULL, "the rival did not get the name as one argument:\n%s", args);
    free(args);

    // batched-bench starts its rival the same way.
    const char * bb = rival("rival-bb.sh",
                            "echo '|     8 |      4 |    1 |     12 |    0.008 |  1000.00 |    0.040 |   100.00 |    0.048 |   250.00 |'\n");
    r = mg_test_run_mg(dir, prefix, NULL, "batched-bench -m %s -npp 8 -ntg 4 -npl 1 -t 1 --rounds 1 --llama-batched-bench %s",
                       sh_quote(name), sh_quote(bb));
    ck_assert_msg(r.status == 0, "batched-bench: exit %d: %s", r.status, r.err);
    mg_test_run_free(&r);
    ck_assert_msg(access(in_dir("PWNED"), F_OK) != 0, "batched-bench ran the file name as a command");
}
END_TEST

// A rival that never ends is killed at --rival-timeout, with a message; so is
// what it started (its process group).
START_TEST(test_rival_timeout) {
    const char * hang = rival("hang.sh", "sleep 60 &\nsleep 60\n");
    const double t0 = seconds_now();
    expect_error("--rival-timeout", "killed", "bench -m '%s' -p 8 -n 4 -t 1 -r 1 --rounds 1 --rival-timeout 1 --llama-bench '%s'",
                 model(), hang);
    expect_failure("--rival-timeout", "killed",
                 "batched-bench -m '%s' -npp 8 -ntg 4 -npl 1 -t 1 --rounds 1 --rival-timeout 1 --llama-batched-bench '%s'",
                 model(), hang);
    ck_assert_msg(seconds_now() - t0 < 30, "two 1-second limits took %.1f s", seconds_now() - t0);
    expect_error("--rival-timeout", "> 0", "bench -m '%s' --rival-timeout 0 --llama-bench '%s'", model(), hang);
}
END_TEST

// A rival that prints nothing, or figures no ratio can be made of, is an error
// that says so; a rival that cannot be started is named.
START_TEST(test_rival_unusable_output) {
    const char * silent = rival("silent.sh", "exit 3\n");
    expect_error("printed nothing", "exit status 3", "bench -m '%s' -p 8 -n 4 -t 1 -r 1 --rounds 1 --llama-bench '%s'", model(),
                 silent);
    expect_failure("printed nothing", NULL,
                 "batched-bench -m '%s' -npp 8 -ntg 4 -npl 1 -t 1 --rounds 1 --llama-batched-bench '%s'", model(), silent);
    static const char * const bad[] = {"0", "inf", "nan", "1e308", "-5", "12abc"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char csv[512];
        const char * b = rival("bad.sh", bench_csv(bad[i], csv, sizeof(csv)));
        expect_error("not a number", NULL, "bench -m '%s' -p 8 -n 4 -t 1 -r 1 --rounds 1 --llama-bench '%s'", model(), b);
    }
    const char * inf_bb = rival("inf-bb.sh",
                                "echo '|     8 |      4 |    1 |     12 |    0.008 |  inf |    0.040 |   0.00 |    0.048 |   250.00 |'\n");
    expect_failure("not numbers", NULL,
                 "batched-bench -m '%s' -npp 8 -ntg 4 -npl 1 -t 1 --rounds 1 --llama-batched-bench '%s'", model(), inf_bb);
    expect_error("cannot run", in_dir("missing-rival"), "bench -m '%s' -p 8 -n 4 -t 1 -r 1 --rounds 1 --llama-bench '%s'",
                 model(), in_dir("missing-rival"));
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("safety");

    TCase * rivals = tcase_create("rivals");
    tcase_set_timeout(rivals, 300);
    tcase_add_checked_fixture(rivals, setup, teardown);
    tcase_add_test(rivals, test_rival_no_shell);
    tcase_add_test(rivals, test_rival_timeout);
    tcase_add_test(rivals, test_rival_unusable_output);
    suite_add_tcase(s, rivals);

    return s;
}
