// test_safety.c - nothing a user types runs a command, crashes mg or destroys
// a file: rival programs are started without a shell and within a time
// limit, outputs never land on an input, sizes are checked before anything is
// allocated. Each case runs mg as a user runs it (a child process, harness.h)
// and checks what can be seen from outside: files that exist or not, their
// bytes, the exit status and the message.
#define _DEFAULT_SOURCE   // symlink, link, chmod
#include "harness.h"
#include "gguf.h"
#include "gguf_writer.h"
#include "outfile.h"
#include "repack.h"
#include "vocab.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
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

// ---------------------------------------------------------------------------
// Outputs: never an input, written beside and renamed, no symlink followed
// ---------------------------------------------------------------------------

// FNV-1a of a file's bytes and its size: "byte-identical" before and after.
struct digest {
    uint64_t hash;
    size_t   size;
};

static struct digest digest_of(const char * path) {
    size_t size = 0;
    unsigned char * b = mg_test_read_file(path, &size);
    ck_assert_msg(b != NULL, "cannot read %s", path);
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < size; i++) h = (h ^ b[i]) * 1099511628211ull;
    free(b);
    return (struct digest) {h, size};
}

static void expect_unchanged(const char * path, struct digest before) {
    const struct digest now = digest_of(path);
    ck_assert_msg(now.hash == before.hash && now.size == before.size, "%s was changed (%zu bytes, was %zu)", path,
                  now.size, before.size);
}

static bool is_link(const char * path) {
    struct stat st;
    return lstat(path, &st) == 0 && S_ISLNK(st.st_mode);
}

// 20 KB of the held-out text (the t.txt), as a file in the test directory.
static const char * text_file(void) {
    size_t size;
    char * text = mg_test_read_file(mg_test_root("data/heldout/dhammapada.txt"), &size);
    ck_assert_ptr_nonnull(text);
    const char * path = in_dir("t.txt");
    write_file(path, text, size < 20000 ? size : 20000);
    free(text);
    return path;
}

// C1, D1-D4: an output flag aimed at an input, by its path, a relative path,
// a symlink or a hard link, is refused before any work; every input keeps its bytes.
START_TEST(test_output_is_an_input) {
    char m[128], t[128], p[128];   // kept: in_dir's buffers are reused after 16 calls
    snprintf(m, sizeof(m), "%s", in_dir("m.gguf"));
    snprintf(t, sizeof(t), "%s", text_file());
    snprintf(p, sizeof(p), "%s", in_dir("p.txt"));
    copy_file(model(), m);
    write_file(p, "hello there", 11);
    ck_assert_int_eq(symlink("m.gguf", in_dir("link.gguf")), 0);
    ck_assert_int_eq(link(m, in_dir("hard.gguf")), 0);
    const struct digest dm = digest_of(m), dt = digest_of(t), dp = digest_of(p);
    char relative[128];
    snprintf(relative, sizeof(relative), "%s/../%s/m.gguf", dir, strrchr(dir, '/') + 1);
    const char * const aims[] = {m, relative, in_dir("link.gguf"), in_dir("hard.gguf")};
    for (size_t i = 0; i < sizeof(aims) / sizeof(aims[0]); i++) {
        expect_error("--save-logits", "same file", "perplexity -m '%s' -f '%s' -c 128 -b 128 --chunks 1 --save-logits '%s'",
                     m, t, aims[i]);
        expect_error("--trace-json", "same file", "run -m '%s' -p hello -n 4 --trace-json '%s'", m, aims[i]);
        expect_error("--memory-map", "same file", "run -m '%s' -p hello -n 4 --memory-map '%s'", m, aims[i]);
        expect_error("--output", "same file", "logits -m '%s' -p hello -o '%s'", m, aims[i]);
    }
    expect_error("--trace-json", "same file", "run -m '%s' -f '%s' -n 4 --trace-json '%s'", m, p, p);
    expect_error("--save-logits", "same file", "perplexity -m '%s' -f '%s' -c 128 --save-logits '%s'", m, t, t);
    expect_unchanged(m, dm);
    expect_unchanged(t, dt);
    expect_unchanged(p, dp);

    // mkmodel -o into its own --vocab folder: the tokenizer it reads.
    ck_assert_int_eq(mkdir(in_dir("vocab"), 0755), 0);
    copy_file(mg_test_root("data/minimind/tokenizer.json"), in_dir("vocab/tokenizer.json"));
    copy_file(mg_test_root("data/minimind/tokenizer_config.json"), in_dir("vocab/tokenizer_config.json"));
    const struct digest dv = digest_of(in_dir("vocab/tokenizer.json"));
    expect_error("--output", "same file", "mkmodel --preset tiny --vocab '%s' -o '%s'", in_dir("vocab"),
                 in_dir("vocab/tokenizer.json"));
    expect_unchanged(in_dir("vocab/tokenizer.json"), dv);
}
END_TEST

// D2: an existing output is replaced only by a complete result: a run that
// fails after the check leaves it as it was, and no temporary file.
START_TEST(test_failed_run_keeps_old_output) {
    const char * old = in_dir("trace.json");
    write_file(old, "the old trace", 13);
    const struct digest before = digest_of(old);
    // 18 prompt tokens do not fit in -c 16: the run fails after the outputs were checked.
    expect_error("16", NULL, "run -m '%s' -c 16 -f '%s' -n 4 --trace-json '%s' --memory-map '%s'", model(),
                 mg_test_fixture("prompts/fox.txt"), old, in_dir("map.svg"));
    expect_unchanged(old, before);
    ck_assert_int_ne(access(in_dir("map.svg"), F_OK), 0);
    ck_assert_int_eq(mg_test_count_temp_files(old), 0);
    ck_assert_int_eq(mg_test_count_temp_files(in_dir("map.svg")), 0);
    // Names no rename can end at are refused before the run, not after it.
    expect_error("--trace-json", "not a file name", "run -m '%s' -p hi -n 1 --trace-json ''", model());
    expect_error("--output", "not a file name", "logits -m '%s' -p hi -o '%s/'", model(), in_dir("new"));
}
END_TEST

// D5: --save-logits over an old file, killed mid-run: the old file is whole
// and the temporary file is gone.
START_TEST(test_killed_run_keeps_old_output) {
    const char * old = in_dir("old.kld");
    write_file(old, "the old logits", 14);
    const struct digest before = digest_of(old);
    char prefix[64];
    snprintf(prefix, sizeof(prefix), "(sleep 2; kill -TERM $$) &");   // $$ is mg after the harness's exec
    struct mg_test_run r = mg_test_run_mg(dir, prefix, NULL, "perplexity -m '%s' -f '%s' -c 128 -t 1 --save-logits '%s'",
                                          mg_test_root("models/fortune-toy-q8_0.gguf"),
                                          mg_test_root("data/heldout/dhammapada.txt"), old);
    ck_assert_msg(r.status == -1, "perplexity was not killed (exit %d): make the run longer", r.status);
    mg_test_run_free(&r);
    expect_unchanged(old, before);
    ck_assert_int_eq(mg_test_count_temp_files(old), 0);

    // Killed by the file size limit (SIGXFSZ) half way through the write: the same.
    r = mg_test_run_mg(dir, "ulimit -f 200;", NULL, "perplexity -m '%s' -f '%s' -c 128 -t 1 --chunks 4 --save-logits '%s'",
                       mg_test_root("models/fortune-toy-q8_0.gguf"), mg_test_root("data/heldout/dhammapada.txt"), old);
    ck_assert_msg(r.status == -1, "perplexity was not stopped by ulimit -f (exit %d): %s", r.status, r.err);
    mg_test_run_free(&r);
    expect_unchanged(old, before);
    ck_assert_int_eq(mg_test_count_temp_files(old), 0);
}
END_TEST

// Row 8 of the second probe: the temporary file was left behind when SIGQUIT
// (Ctrl-\), SIGUSR1 or SIGALRM ended the run (only INT, TERM, HUP, PIPE and
// XFSZ removed it); and an output name of 250 bytes made the temporary name
// ".NAME.XXXXXX" longer than NAME_MAX, so it could not be written at all.
START_TEST(test_other_signals_and_long_names) {
    static const char * const sigs[] = {"QUIT", "USR1", "ALRM"};
    const char * out = in_dir("new.kld");
    for (int i = 0; i < 3; i++) {
        char prefix[64];
        snprintf(prefix, sizeof(prefix), "(sleep 2; kill -%s $$) &", sigs[i]);   // $$ is mg after the harness's exec
        struct mg_test_run r = mg_test_run_mg(dir, prefix, NULL, "perplexity -m '%s' -f '%s' -c 128 -t 1 --save-logits '%s'",
                                              mg_test_root("models/fortune-toy-q8_0.gguf"),
                                              mg_test_root("data/heldout/dhammapada.txt"), out);
        ck_assert_msg(r.status == -1, "SIG%s: perplexity was not killed (exit %d): make the run longer", sigs[i], r.status);
        mg_test_run_free(&r);
        ck_assert_msg(mg_test_count_temp_files(out) == 0, "SIG%s left the temporary file of %s", sigs[i], out);
        ck_assert_int_ne(access(out, F_OK), 0);
    }
    char name[251];
    memset(name, 'n', 250);
    name[250] = '\0';
    struct mg_test_run r = mg("logits -m '%s' -p hi -o '%s'", model(), in_dir(name));
    ck_assert_msg(r.status == 0, "a 250-byte output name: exit %d: %s", r.status, r.err);
    mg_test_run_free(&r);
    ck_assert_int_gt(digest_of(in_dir(name)).size, 0);
    ck_assert_int_eq(mg_test_count_temp_files(in_dir(name)), 0);
}
END_TEST

// A copy of the tiny F32 model at path whose output_norm.weight holds value
// at element 7: every logit of every position is then not finite. (F32: a
// quantized model's Q8_0 activations would hide the NaN, as in ggml: the
// block's scale is an fmaxf, which skips it.)
static void model_with_weight(const char * path, float value) {
    copy_file(mg_test_fixture("models/tiny-f32.gguf"), path);
    struct mg_gguf * g = mg_gguf_open(path);
    ck_assert_ptr_nonnull(g);
    const struct mg_gguf_tensor_info * t = mg_gguf_find_tensor(g, "output_norm.weight");
    ck_assert_msg(t != NULL && t->type == 0, "the tiny model has no F32 output_norm.weight");
    const long at = (long) (mg_gguf_data_offset(g) + t->offset + 7 * sizeof(float));
    mg_gguf_close(g);
    FILE * f = fopen(path, "r+b");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fseek(f, at, SEEK_SET), 0);
    ck_assert_uint_eq(fwrite(&value, sizeof(value), 1, f), 1);
    ck_assert_int_eq(fclose(f), 0);
}

// Row 1: a model whose weights hold NaN or inf made every command print or
// write nan (or sample from it) and exit 0. Now the first position whose
// logits are not finite is an error, named with its token position.
START_TEST(test_non_finite_logits) {
    const char * t = text_file();
    char base[128], bad[128], prompt[128];
    snprintf(base, sizeof(base), "%s", in_dir("base.kld"));
    snprintf(bad, sizeof(bad), "%s", in_dir("bad.gguf"));
    snprintf(prompt, sizeof(prompt), "%s", in_dir("prompt.txt"));
    write_file(prompt, "hello there\n", 12);
    struct mg_test_run r = mg("perplexity -m '%s' -f '%s' -c 16 -b 16 --chunks 2 -t 1 --save-logits '%s'", model(), t, base);
    ck_assert_msg(r.status == 0, "%s", r.err);
    mg_test_run_free(&r);
    r = mg("tokenize -m '%s' -f '%s'", model(), prompt);   // the prompt's last position: its token count - 1
    ck_assert_int_eq(r.status, 0);
    char last[64];
    snprintf(last, sizeof(last), "token position %d ", mg_test_count_lines(r.out) - 1);
    mg_test_run_free(&r);
    const float values[] = {NAN, INFINITY};
    for (int v = 0; v < 2; v++) {
        model_with_weight(bad, values[v]);
        expect_failure("not finite", last, "run -m '%s' -f '%s' -n 4 -t 1", bad, prompt);
        expect_error("not finite", last, "logits -m '%s' -f '%s' -t 1 -o '%s'", bad, prompt, in_dir("out.bin"));
        expect_error("not finite", "token position 0 ", "logits -m '%s' -f '%s' -t 1 --all", bad, prompt);
        ck_assert_int_ne(access(in_dir("out.bin"), F_OK), 0);
        expect_failure("not finite", "chunk 1", "perplexity -m '%s' --kl-base '%s' -t 1", bad, base);
        expect_failure("not finite", "chunk 1", "perplexity -m '%s' -f '%s' -c 16 -b 16 --chunks 1 -t 1", bad, t);
        expect_failure("not finite", "sequence 0", "parallel -m '%s' -p hi -n 2 -t 1", bad);
        struct mg_test_run c = mg_test_run_mg(dir, NULL, prompt, "chat -m '%s' -n 4 -t 1", bad);
        ck_assert_msg(c.status == 1 && strstr(c.err, "not finite") != NULL, "chat: exit %d: %s", c.status, c.err);
        mg_test_run_free(&c);
    }
}
END_TEST

// Row 2: a vocabulary without the token of a byte (here 'z') dropped that
// byte from the text it tokenized, silently (llama.cpp does). mkmodel makes
// one (it spells its check text, "Hello, world: 42 times.", with the byte
// characters below); tokenizing a 'z' is then an error naming the byte.
START_TEST(test_missing_byte_token) {
    static const char json[] =
        "{\"version\":\"1.0\",\"added_tokens\":[],\"normalizer\":null,\"pre_tokenizer\":{\"type\":\"ByteLevel\","
        "\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":true},\"post_processor\":null,"
        "\"decoder\":{\"type\":\"ByteLevel\"},\"model\":{\"type\":\"BPE\",\"vocab\":{\"H\":0,\"e\":1,\"l\":2,\"o\":3,"
        "\",\":4,\"\\u0120\":5,\"w\":6,\"r\":7,\"d\":8,\":\":9,\"4\":10,\"2\":11,\"t\":12,\"i\":13,\"m\":14,\"s\":15,"
        "\".\":16,\"ll\":17},\"merges\":[\"l l\"]}}";
    ck_assert_int_eq(mkdir(in_dir("vocab"), 0755), 0);
    write_file(in_dir("vocab/tokenizer.json"), json, sizeof(json) - 1);
    char m[128];
    snprintf(m, sizeof(m), "%s", in_dir("m.gguf"));
    struct mg_test_run r = mg("mkmodel --preset tiny --vocab '%s' -o '%s'", in_dir("vocab"), m);
    ck_assert_msg(r.status == 0, "mkmodel: %s", r.err);
    mg_test_run_free(&r);
    r = mg("tokenize -m '%s' -p 'Hello world' --no-bos", m);   // every byte has its token: H e ll o Ġ w o r l d
    ck_assert_msg(r.status == 0 && mg_test_count_lines(r.out) == 10, "exit %d: %s%s", r.status, r.out, r.err);
    mg_test_run_free(&r);
    expect_error("byte 0x7A", "'z'", "tokenize -m '%s' -p 'Hello zone'", m);
    expect_error("byte 0x7A", "'z'", "run -m '%s' -p 'Hello zone' -n 1", m);
}
END_TEST

// Row 3: general.alignment 1 lets a file put a tensor at any byte; the engine
// read F32 weights through a misaligned float pointer (undefined behaviour,
// which x86 forgives). The tiny model rewritten with alignment 1 and a pad
// key of 0..3 bytes, until output_norm.weight (F32) starts at a byte that is
// not a multiple of 4: loading then names the tensor, the byte, and the key
// with its value.
START_TEST(test_misaligned_tensor_data) {
    struct mg_gguf * src = mg_gguf_open(model());
    ck_assert_ptr_nonnull(src);
    const char * out = in_dir("a1.gguf");
    size_t at = 0;
    for (int pad = 0; pad < 4; pad++) {
        struct mg_gguf_writer * w = mg_gguf_writer_new();
        ck_assert(mg_gguf_writer_copy_kvs(w, src, NULL));
        ck_assert(mg_gguf_writer_set_u32(w, "general.alignment", 1));
        ck_assert(mg_gguf_writer_set_str(w, "test.pad", &"xxx"[3 - pad]));
        for (int64_t i = 0; i < mg_gguf_n_tensors(src); i++) {
            const struct mg_gguf_tensor_info * t = mg_gguf_tensor(src, i);
            ck_assert(mg_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data));
        }
        ck_assert_msg(mg_gguf_writer_write(w, out), "%s", mg_last_error());
        mg_gguf_writer_free(w);
        struct mg_gguf * g = mg_gguf_open(out);
        ck_assert_msg(g != NULL, "%s", mg_last_error());
        ck_assert_uint_eq(mg_gguf_alignment(g), 1);
        const struct mg_gguf_tensor_info * norm = mg_gguf_find_tensor(g, "output_norm.weight");
        ck_assert_ptr_nonnull(norm);
        at = mg_gguf_data_offset(g) + norm->offset;
        mg_gguf_close(g);
        if (at % 4 != 0) break;
    }
    mg_gguf_close(src);
    ck_assert_msg(at % 4 != 0, "no pad put output_norm.weight off a multiple of 4");
    // The first tensor loaded that is off (token_embd.weight, Q8_0, may be the one) is named.
    expect_error("cannot be read in place", "general.alignment = 1", "run -m '%s' -p hi -n 1", out);
    expect_error("not a multiple of", "a1.gguf: tensor '", "logits -m '%s' -p hi", out);
}
END_TEST

// The "repacked = ..." line of mg run's report, the run started after the
// shell commands in prefix and given the flags.
static char * repacked_line(const char * prefix, const char * flags) {
    struct mg_test_run r = mg_test_run_mg(dir, prefix, NULL, "run -m '%s' -p hi -n 1 -t 1 %s",
                                          mg_test_fixture("models/tiny-q4_k_m.gguf"), flags);
    ck_assert_msg(r.status == 0, "%s %s: %s", prefix, flags, r.err);
    const char * line = strstr(r.err, "repacked  ");
    ck_assert_msg(line != NULL, "no repacked line: %s", r.err);
    char * out = strndup(line, strcspn(line, "\n"));
    mg_test_run_free(&r);
    return out;
}

// Row 5: limits that were silent. MG_NO_REPACK was read by its first
// character ("false" turned repacking off); now no variable of the
// environment turns repacking off: the loader takes a parameter
// (mg_model_params.repack), which --no-repack sets. bench --baseline read 256
// lines and dropped the rest; perplexity --chunks N past the text's or the
// base file's chunks scored fewer without a word.
START_TEST(test_silent_limits) {
    char * unset = repacked_line("unset MG_NO_REPACK;", "");
    char * env   = repacked_line("export MG_NO_REPACK=1;", "");
    char * flag  = repacked_line("", "--no-repack");
    ck_assert_msg(strcmp(env, unset) == 0, "MG_NO_REPACK=1 changed repacking: '%s', unset: '%s'", env, unset);
    ck_assert_msg(strstr(flag, " 0 Q4_0") != NULL, "--no-repack: %s", flag);
    if (mg_repack_available()) ck_assert_msg(strstr(unset, " 0 Q4_0") == NULL, "not repacked by default: %s", unset);
    free(unset);
    free(env);
    free(flag);

    FILE * f = fopen(in_dir("baseline.txt"), "w");
    ck_assert_ptr_nonnull(f);
    for (int i = 0; i < 300; i++) fprintf(f, "model%d pp8 1 %d.5\n", i, 100 + i);
    ck_assert_int_eq(fclose(f), 0);
    expect_error("--baseline", "more than 256 figures", "bench -m '%s' -p 8 -n 2 -r 1 -t 1 --baseline '%s'", model(),
                 in_dir("baseline.txt"));

    const char * t = text_file();
    char base[128];
    snprintf(base, sizeof(base), "%s", in_dir("base.kld"));
    struct mg_test_run r = mg("perplexity -m '%s' -f '%s' -c 16 -b 16 --chunks 2 -t 1 --save-logits '%s'", model(), t, base);
    ck_assert_msg(r.status == 0, "%s", r.err);
    mg_test_run_free(&r);
    r = mg("perplexity -m '%s' --kl-base '%s' --chunks 5 -t 1", model(), base);
    ck_assert_msg(r.status == 0 && strstr(r.err, "--chunks 5") && strstr(r.err, "only 2 chunks") && strstr(r.err, base),
                  "exit %d: %s", r.status, r.err);
    mg_test_run_free(&r);
    r = mg("perplexity -m '%s' -f '%s' -c 1024 --chunks 100 -t 1", model(), t);
    ck_assert_msg(r.status == 0 && strstr(r.err, "--chunks 100") && strstr(r.err, "the text holds only"), "exit %d: %s",
                  r.status, r.err);
    mg_test_run_free(&r);
}
END_TEST

// Row 6: batched-bench's lists and an empty -m gave messages that named
// neither the flag nor the value ("-npp, -ntg and -npl take comma lists",
// "mg run: : cannot open"); "1,2," was taken as "1,2".
START_TEST(test_messages_name_flag_and_value) {
    static const struct {
        const char * flag, * value, * range;
    } lists[] = {
        {"-npl", "1,,2", "1..64"}, {"-npl", "0", "1..64"},  {"-npl", "1,2,", "1..64"},
        {"-npl", " 1", "1..64"},   {"-npp", "0", "1..65536"}, {"-ntg", "-1", "0..65536"},
    };
    for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
        char said[64];
        snprintf(said, sizeof(said), "%s '%s'", lists[i].flag, lists[i].value);
        expect_error(said, lists[i].range, "batched-bench -m '%s' %s '%s' -t 1", model(), lists[i].flag, lists[i].value);
    }
    expect_error("-p 1,2,", NULL, "bench -m '%s' -p 1,2, -n 2 -r 1 -t 1", model());
    expect_error("-m ''", "empty name", "run -m '' -p hi");
    expect_error("-m ''", "empty name", "batched-bench -m '' -npp 8 -ntg 2 -npl 1");
    expect_error("-f ''", "empty name", "perplexity -m '%s' -f ''", model());
}
END_TEST

// Row 7: a KV cache larger than the machine or the process may hold was
// only refused when calloc failed (with overcommit it may not), and
// batched-bench, which sizes its cache from -npp/-ntg/-npl, named -c, a
// flag the user never gave. 2^31-1 positions of the tiny model's 1 KiB are
// 2 TiB, beyond any machine this runs on; ulimit -v 1 GB is below the 4 GiB
// that 64 sequences of 65536 prompt tokens need.
START_TEST(test_kv_cache_checked_against_memory) {
    expect_failure("more than this machine's memory", "bytes", "run -m '%s' -p hi -n 1 -c 2147483647", model());
    if (MG_TEST_SANITIZED) MG_TEST_SKIP("the ulimit -v case: a sanitizer's shadow memory cannot be mapped under it");
    struct mg_test_run r = mg_test_run_mg(dir, "ulimit -v 1000000;", NULL,
                                          "batched-bench -m '%s' -npp 65536 -ntg 0 -npl 64 -t 1", model());
    ck_assert_msg(r.status == 1, "exit %d: %s", r.status, r.err);
    ck_assert_msg(strstr(r.err, "-npp 65536 -ntg 0 -npl 64") != NULL && strstr(r.err, "4294967296 bytes") != NULL &&
                      strstr(r.err, "ulimit -v") != NULL, "%s", r.err);
    mg_test_run_free(&r);
}
END_TEST

// Probe: mkmodel held every weight in memory before writing, unchecked:
// --n-embd 65536 --n-ff 65536 asked for 114 GiB and ran until the kernel
// killed it (--n-layer 1024: 112 TiB). The bytes are now counted first and
// refused beyond the memory limit (ulimit -v 4 GB here, so that a binary
// without the check fails fast instead of eating the machine).
START_TEST(test_mkmodel_size_checked_first) {
    if (MG_TEST_SANITIZED) MG_TEST_SKIP("ulimit -v: a sanitizer's shadow memory cannot be mapped under it");
    struct mg_test_run r = mg_test_run_mg(dir, "ulimit -v 4000000;", NULL,
                                          "mkmodel --n-layer 1 --n-embd 65536 --n-head 64 --n-ff 65536 -o '%s'",
                                          in_dir("big.gguf"));
    ck_assert_msg(r.status == 1, "exit %d: %s", r.status, r.err);
    // F32: token_embd (6400 tokens of MiniMind's vocabulary) and seven 65536 x 65536 matrices (q, k, v, output,
    // gate, up, down; 64 heads of 65536 / 64), the norms: 3 of 65536 and 2 of the head width 1024.
    const uint64_t E = 65536, bytes = 4 * (6400 * E + 7 * E * E + 3 * E + 2 * 1024);
    char said[64];
    snprintf(said, sizeof(said), "%llu bytes", (unsigned long long) bytes);
    ck_assert_msg(strstr(r.err, said) != NULL && strstr(r.err, "ulimit -v") != NULL && strstr(r.err, "--n-embd") != NULL,
                  "'%s' not in: %s", said, r.err);
    mg_test_run_free(&r);
    ck_assert_int_ne(access(in_dir("big.gguf"), F_OK), 0);
    ck_assert_int_eq(mg_test_count_temp_files(in_dir("big.gguf")), 0);
}
END_TEST

static bool bytes_contain(const char * buf, size_t len, const char * needle) {
    const size_t n = strlen(needle);
    for (size_t i = 0; i + n <= len; i++) {
        if (memcmp(buf + i, needle, n) == 0) return true;
    }
    return false;
}

// Probe: bench kept 16 -m models and quietly let the parser keep only the
// last of the rest; bench -m '' got past the empty-name check; its -r,
// --rounds and --kv-type shared one message that named no value; tokenize
// --json ignored --pieces; logits --top beyond the vocabulary said "top
// 100000" and printed fewer (and took top x n_vocab steps).
START_TEST(test_probe_bench_tokenize_logits) {
    char args[8192] = "bench";
    for (int i = 0; i < 17; i++) snprintf(args + strlen(args), sizeof(args) - strlen(args), " -m '%s'", model());
    expect_error("more than 16 models", NULL, "%s -p 8 -n 0 -r 1 -t 1", args);
    expect_error("-m ''", "empty name", "bench -m '' -p 8 -n 0 -r 1");
    expect_error("-r 0", "1..1000", "bench -m '%s' -p 8 -r 0", model());
    expect_error("--rounds 99", "1..20", "bench -m '%s' -p 8 --rounds 99", model());
    expect_error("--kv-type 'q8'", NULL, "bench -m '%s' -p 8 --kv-type q8", model());
    expect_error("--json", "--pieces", "tokenize -m '%s' -p hi --json --pieces", model());
    struct mg_gguf * g = mg_gguf_open(model());
    ck_assert_ptr_nonnull(g);
    const int64_t k = mg_gguf_find_key(g, "tokenizer.ggml.tokens");
    ck_assert_int_ge(k, 0);
    const int n_vocab = (int) mg_gguf_arr_n(g, k);
    mg_gguf_close(g);
    struct mg_test_run r = mg("logits -m '%s' -p hi --top %d", model(), 10 * n_vocab);
    char head[64];
    snprintf(head, sizeof(head), "top %d of the last position:", n_vocab);
    ck_assert_msg(r.status == 0 && strstr(r.out, head) != NULL, "'%s' not in: %.300s", head, r.out);
    // Every rank up to n_vocab, none past it (the pieces may hold NUL bytes and newlines: search all out_len bytes).
    char last[32], past[32];
    snprintf(last, sizeof(last), "\n%3d  ", n_vocab);
    snprintf(past, sizeof(past), "\n%3d  ", n_vocab + 1);
    ck_assert_msg(bytes_contain(r.out, r.out_len, last) && !bytes_contain(r.out, r.out_len, past), "ranks: %.300s", r.out);
    mg_test_run_free(&r);
}
END_TEST

// Probe: the writer remembered at most 256 inputs, so a --vocab folder of
// 5000 files left most of them unprotected: mkmodel -o DIR/tokenizer_config.json
// replaced the file it had read (when readdir listed it late). And mg info
// --tensors-only --metadata-only printed the header alone, rc 0.
START_TEST(test_probe_many_inputs_and_info) {
    ck_assert_int_eq(mkdir(in_dir("vocab"), 0755), 0);
    copy_file(mg_test_root("data/minimind/tokenizer.json"), in_dir("vocab/tokenizer.json"));
    copy_file(mg_test_root("data/minimind/tokenizer_config.json"), in_dir("vocab/tokenizer_config.json"));
    for (int i = 0; i < 5000; i++) {
        char name[32];
        snprintf(name, sizeof(name), "vocab/f%d", i);
        write_file(in_dir(name), "", 0);
    }
    const char * const read[] = {"vocab/tokenizer.json", "vocab/tokenizer_config.json"};
    for (int i = 0; i < 2; i++) {
        char path[128];
        snprintf(path, sizeof(path), "%s", in_dir(read[i]));
        const struct digest before = digest_of(path);
        expect_error("--output", "same file", "mkmodel --preset tiny --vocab '%s' -o '%s'", in_dir("vocab"), path);
        expect_unchanged(path, before);
    }
    expect_error("--tensors-only", "--metadata-only", "info '%s' --tensors-only --metadata-only", model());

    // parallel printed the unfinished start of a character (a broken UTF-8 byte pair) where mg run drops
    // it and says so: greedy "你好" then one token ends mid-character with this model. The same text as run's.
    struct mg_test_run r = mg("run -m '%s' -p 你好 -n 1 --temp 0 -t 1", model());
    struct mg_test_run p = mg("parallel -m '%s' -p 你好 -n 1 --temp 0 -t 1", model());
    ck_assert_msg(r.status == 0 && p.status == 0, "%s%s", r.err, p.err);
    ck_assert_msg(strstr(r.err, "cut mid-character") != NULL, "the case no longer ends mid-character: %s", r.err);
    const char * text = strchr(p.out, '\n');
    ck_assert_msg(text != NULL && strncmp(text + 1, r.out, strlen(r.out)) == 0, "parallel:\n%s\nrun:\n%s", p.out, r.out);
    ck_assert_msg(strstr(p.err, "cut mid-character") != NULL, "%s", p.err);
    mg_test_run_free(&r);
    mg_test_run_free(&p);
}
END_TEST

// Probe: --keep without --context-shift and --trace-steps without
// --trace-json were accepted and did nothing; -o - made a file named '-'
// where a user of other tools expects standard output.
START_TEST(test_probe_flags_that_need_another) {
    expect_error("--keep 2", "--context-shift", "run -m '%s' -p hi -n 2 --keep 2", model());
    expect_error("--trace-steps 5", "--trace-json", "run -m '%s' -p hi -n 2 --trace-steps 5", model());
    struct mg_test_run r = mg("run -m '%s' -p hi -n 2 -c 64 -t 1 --context-shift --keep 1 --trace-json '%s' --trace-steps 1",
                              model(), in_dir("t.json"));
    ck_assert_msg(r.status == 0, "both given: %s", r.err);
    mg_test_run_free(&r);
    char prefix[96];
    snprintf(prefix, sizeof(prefix), "cd '%s';", dir);   // where a file '-' would be made
    r = mg_test_run_mg(dir, prefix, NULL, "logits -m '%s' -p hi -o -", model());
    ck_assert_msg(r.status == 1 && strstr(r.err, "--output '-'") != NULL && strstr(r.err, "./-") != NULL, "exit %d: %s",
                  r.status, r.err);
    mg_test_run_free(&r);
    ck_assert_int_ne(access(in_dir("-"), F_OK), 0);
    r = mg_test_run_mg(dir, prefix, NULL, "logits -m '%s' -p hi -o ./-", model());   // the file, named as a path
    ck_assert_msg(r.status == 0 && access(in_dir("-"), F_OK) == 0, "exit %d: %s", r.status, r.err);
    mg_test_run_free(&r);
}
END_TEST

// Probe: results of a known size (perplexity --save-logits, mkmodel's
// model) were written until the disk, shared with everything else, was full,
// and only then failed. The free space is checked first (mg_outfile_room):
// no folder has 2^62 bytes free; every one has room for 1 byte.
START_TEST(test_probe_free_space_checked_first) {
    const char * out = in_dir("x.kld");
    ck_assert(mg_outfile_room("--save-logits", out, 1));
    ck_assert(!mg_outfile_room("--save-logits", out, (uint64_t) 1 << 62));
    char said[64];
    snprintf(said, sizeof(said), "needs %llu bytes", (unsigned long long) ((uint64_t) 1 << 62));
    ck_assert_msg(strstr(mg_last_error(), "--save-logits") && strstr(mg_last_error(), said) && strstr(mg_last_error(), dir),
                  "%s", mg_last_error());
    // With room, perplexity and mkmodel still write their files.
    struct mg_test_run r = mg("perplexity -m '%s' -f '%s' -c 16 --chunks 2 -t 1 --save-logits '%s'", model(), text_file(), out);
    ck_assert_msg(r.status == 0 && digest_of(out).size > 0, "%s", r.err);
    mg_test_run_free(&r);
    r = mg("mkmodel --preset tiny -o '%s'", in_dir("m.gguf"));
    ck_assert_msg(r.status == 0 && digest_of(in_dir("m.gguf")).size > 0, "%s", r.err);
    mg_test_run_free(&r);
}
END_TEST

// D6: symlinks planted inside output directories are replaced, never
// followed; a file output that is a symlink to a non-input is written through.
START_TEST(test_no_symlink_followed_in_output_dirs) {
    char m[128];   // kept: in_dir's buffers are reused after 16 calls
    snprintf(m, sizeof(m), "%s", in_dir("m.gguf"));
    copy_file(model(), m);
    const struct digest dm = digest_of(m);
    ck_assert_int_eq(mkdir(in_dir("svg"), 0755), 0);
    ck_assert_int_eq(mkdir(in_dir("dump"), 0755), 0);
    ck_assert_int_eq(mkdir(in_dir("dot"), 0755), 0);
    ck_assert_int_eq(symlink("../m.gguf", in_dir("svg/prompt-alloc.svg")), 0);
    ck_assert_int_eq(symlink("../m.gguf", in_dir("dump/order.txt")), 0);
    ck_assert_int_eq(symlink("../m.gguf", in_dir("dot/prompt.dot")), 0);
    struct mg_test_run r = mg("run -m '%s' -p hello -n 2 --temp 0 --svg '%s' --dot '%s' --dump-tensors '%s'", m,
                              in_dir("svg"), in_dir("dot"), in_dir("dump"));
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    mg_test_run_free(&r);
    expect_unchanged(m, dm);
    const char * const planted[] = {in_dir("svg/prompt-alloc.svg"), in_dir("dump/order.txt"), in_dir("dot/prompt.dot")};
    for (int i = 0; i < 3; i++) {
        ck_assert_msg(!is_link(planted[i]), "%s is still a symlink: nothing was written there", planted[i]);
        ck_assert_int_gt(digest_of(planted[i]).size, 0);
    }

    // A --trace-json that is a symlink to another file: the link stays, its target gets the trace.
    write_file(in_dir("target.json"), "old", 3);
    ck_assert_int_eq(symlink("target.json", in_dir("trace.json")), 0);
    r = mg("run -m '%s' -p hello -n 2 --temp 0 --trace-json '%s'", m, in_dir("trace.json"));
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    mg_test_run_free(&r);
    ck_assert(is_link(in_dir("trace.json")));
    size_t n;
    char * trace = mg_test_read_file(in_dir("target.json"), &n);
    ck_assert_msg(trace != NULL && strstr(trace, "traceEvents") != NULL, "the target did not get the trace");
    free(trace);
    expect_unchanged(m, dm);
}
END_TEST

// W4 and a folder that holds an input: output folders are checked before
// any work, --svg as --dot and --dump-tensors.
START_TEST(test_output_dirs_checked_first) {
    char m[128];
    snprintf(m, sizeof(m), "%s", in_dir("m.gguf"));
    copy_file(model(), m);
    write_file(in_dir("plain"), "x", 1);
    const char * const flags[] = {"--svg", "--dot", "--dump-tensors"};
    for (int i = 0; i < 3; i++) {
        expect_error(flags[i], "not a directory", "run -m '%s' -p hi -n 1 %s '%s'", m, flags[i], in_dir("plain"));
        expect_error(flags[i], "no such directory", "run -m '%s' -p hi -n 1 %s '%s'", m, flags[i], in_dir("nope"));
        // The model's own folder: a drawing named like it would replace it.
        expect_error(flags[i], "holds the input", "run -m '%s' -p hi -n 1 %s '%s'", m, flags[i], dir);
    }
}
END_TEST

// ---------------------------------------------------------------------------
// Sizes: checked before allocating, an error that names -c and the bytes
// ---------------------------------------------------------------------------

// C2: a context no machine holds is a clear error from every command that
// makes a session, never an assertion (status -1: killed by SIGABRT).
START_TEST(test_huge_context) {
    static const char * const sizes[] = {"2147483647", "1073741824", "300000000"};
    const char * q8 = mg_test_root("models/fortune-toy-q8_0.gguf");
    const char * asan = "export ASAN_OPTIONS=allocator_may_return_null=1;";   // ASan aborts on a failed malloc otherwise
    for (int i = 0; i < 3; i++) {
        char args[6][512];
        snprintf(args[0], sizeof(args[0]), "run -m '%s' -p hi -n 2 -c %s", q8, sizes[i]);
        snprintf(args[1], sizeof(args[1]), "batched-bench -m '%s' -npp 8 -ntg 2 -npl 1 -c %s", q8, sizes[i]);
        snprintf(args[2], sizeof(args[2]), "parallel -m '%s' -p hi -n 2 -c %s", q8, sizes[i]);
        snprintf(args[3], sizeof(args[3]), "chat -m '%s' -n 2 -c %s", q8, sizes[i]);
        snprintf(args[4], sizeof(args[4]), "logits -m '%s' -p hi -c %s", q8, sizes[i]);
        snprintf(args[5], sizeof(args[5]), "perplexity -m '%s' -f '%s' -c %s", q8,
                 mg_test_root("data/heldout/dhammapada.txt"), sizes[i]);
        for (int k = 0; k < 6; k++) {
            struct mg_test_run r = mg_test_run_mg(dir, asan, mg_test_fixture("prompts/fox.txt"), "%s", args[k]);
            ck_assert_msg(r.status == 1, "mg %s: exit status %d (a crash is -1): %s", args[k], r.status, r.err);
            ck_assert_msg(strstr(r.err, "-c") != NULL, "mg %s: the message does not name -c: %s", args[k], r.err);
            ck_assert_msg(k == 5 || (strstr(r.err, "KV cache") != NULL && strstr(r.err, "bytes") != NULL),
                          "mg %s: the message does not say which buffer and how big: %s", args[k], r.err);
            mg_test_run_free(&r);
        }
    }
}
END_TEST

// ---------------------------------------------------------------------------
// Every output flag of every command, from mg's own tables
// ---------------------------------------------------------------------------

// The files the commands below read (copies, in the test directory): every
// one is an input of every command line that names it, and stdin.txt of all
// (it is given as standard input to each run).
static const char * const input_files[] = {"model.gguf", "prompt.txt", "text.txt", "base.kld", "vocab/tokenizer.json",
                                           "vocab/tokenizer_config.json", "bandwidth.txt", "baseline.txt", "stdin.txt"};
enum { N_INPUT_FILES = sizeof(input_files) / sizeof(input_files[0]) };

// A command line that runs each command on those inputs (relative paths: mg
// runs in the test directory). The output flags are not here: they come from
// `mg CMD --help-table`, so a new one is tested without a line of this test.
// A command mg --help lists and this table does not is a failure.
static const struct {
    const char * cmd, * args;
} base_lines[] = {
    {"run", "-m model.gguf -f prompt.txt -n 2 --temp 0 -c 64 -t 1"},
    {"chat", "-m model.gguf -n 2 --temp 0 -c 64 -t 1"},
    {"info", "model.gguf"},
    {"tokenize", "-m model.gguf -f prompt.txt"},
    {"logits", "-m model.gguf -f prompt.txt -t 1"},
    {"mkmodel", "--preset tiny --vocab vocab"},
    {"quantize", "model.gguf out.gguf q8_0"},
    {"bench", "-m model.gguf -p 8 -n 2 -t 1 -r 1 --bandwidth bandwidth.txt --baseline baseline.txt"},
    {"batched-bench", "-m model.gguf -npp 8 -ntg 2 -npl 1 -t 1"},
    {"parallel", "-m model.gguf -f prompt.txt -n 2 --temp 0 -t 1"},
    {"perplexity", "-m model.gguf -f text.txt -c 16 -b 16 --chunks 1 -t 1"},
    {"perplexity", "-m model.gguf --kl-base base.kld --chunks 1 -t 1"},
};
enum { N_BASE_LINES = sizeof(base_lines) / sizeof(base_lines[0]) };

// Whether args names the input file (as a word; a vocab/ file by its folder).
static bool names_input(const char * args, const char * file) {
    if (strcmp(file, "stdin.txt") == 0) return true;
    char word[64];
    snprintf(word, sizeof(word), "%.*s", (int) strcspn(file, "/"), file);
    for (const char * p = strstr(args, word); p != NULL; p = strstr(p + 1, word)) {
        const char end = p[strlen(word)];
        if ((p == args || p[-1] == ' ') && (end == ' ' || end == '\0')) return true;
    }
    return false;
}

// The commands `mg --help` lists, into names (at most max); how many.
static int listed_commands(char names[][32], int max) {
    struct mg_test_run r = mg("--help");
    ck_assert_int_eq(r.status, 0);
    const char * p = strstr(r.out, "commands:\n");
    ck_assert_ptr_nonnull(p);
    int n = 0;
    for (p = strchr(p, '\n') + 1; *p == ' ' && n < max; p = strchr(p, '\n') + 1) {
        ck_assert_int_eq(sscanf(p, " %31s", names[n]), 1);
        n++;
    }
    mg_test_run_free(&r);
    return n;
}

// The output flags of cmd's table (mg CMD --help-table: name, short name, kind).
static int output_flags(const char * cmd, char flags[][48], int max) {
    struct mg_test_run r = mg("%s --help-table", cmd);
    ck_assert_msg(r.status == 0, "mg %s --help-table: exit %d: %s", cmd, r.status, r.err);
    int n = 0;
    for (char * line = r.out; line && *line && n < max;) {
        char * nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        char name[48], shortname[16], kind[16];
        ck_assert_msg(sscanf(line, "%47s %15s %15s", name, shortname, kind) == 3, "mg %s --help-table: '%s'", cmd, line);
        if (strcmp(kind, "out-file") == 0 || strcmp(kind, "out-dir") == 0) snprintf(flags[n++], sizeof(flags[0]), "%s", name);
        line = nl ? nl + 1 : NULL;
    }
    mg_test_run_free(&r);
    return n;
}

static void make_inputs(struct digest * digests) {
    copy_file(model(), in_dir("model.gguf"));
    copy_file(mg_test_fixture("prompts/fox.txt"), in_dir("prompt.txt"));
    text_file();
    rename(in_dir("t.txt"), in_dir("text.txt"));
    ck_assert_int_eq(mkdir(in_dir("vocab"), 0755), 0);
    copy_file(mg_test_root("data/minimind/tokenizer.json"), in_dir("vocab/tokenizer.json"));
    copy_file(mg_test_root("data/minimind/tokenizer_config.json"), in_dir("vocab/tokenizer_config.json"));
    write_file(in_dir("bandwidth.txt"), "1 10.0\n", 7);
    write_file(in_dir("baseline.txt"), "tiny-q8_0.gguf pp8 1 100.0\n", 27);
    write_file(in_dir("stdin.txt"), "hello\n", 6);
    struct mg_test_run r = mg("perplexity -m '%s' -f '%s' -c 16 -b 16 --chunks 1 -t 1 --save-logits '%s'",
                              in_dir("model.gguf"), in_dir("text.txt"), in_dir("base.kld"));
    ck_assert_msg(r.status == 0, "making base.kld: %s", r.err);
    mg_test_run_free(&r);
    ck_assert_int_eq(mkdir(in_dir("links"), 0755), 0);
    for (int i = 0; i < N_INPUT_FILES; i++) {
        digests[i] = digest_of(in_dir(input_files[i]));
        char link_path[128], hard[128];
        snprintf(link_path, sizeof(link_path), "links/%d.sym", i);
        snprintf(hard, sizeof(hard), "links/%d.hard", i);
        ck_assert_int_eq(symlink(in_dir(input_files[i]), in_dir(link_path)), 0);
        ck_assert_int_eq(link(in_dir(input_files[i]), in_dir(hard)), 0);
    }
}

// mg CMD ARGS FLAG AIM, in the test directory with stdin.txt as its input:
// refused (exit 1, the flag named), and every input as it was.
static void expect_refused(const char * cmd, const char * args, const char * flag, const char * aim,
                           const struct digest * digests) {
    char prefix[128];
    snprintf(prefix, sizeof(prefix), "cd '%s';", dir);
    struct mg_test_run r = mg_test_run_mg(dir, prefix, in_dir("stdin.txt"), "%s %s %s '%s'", cmd, args, flag, aim);
    ck_assert_msg(r.status == 1 && strstr(r.err, flag) != NULL, "mg %s %s %s %s: exit %d, not refused: %.1000s", cmd,
                  args, flag, aim, r.status, r.err);
    mg_test_run_free(&r);
    for (int i = 0; i < N_INPUT_FILES; i++) {
        const struct digest now = digest_of(in_dir(input_files[i]));
        ck_assert_msg(now.hash == digests[i].hash && now.size == digests[i].size, "mg %s %s %s %s changed the input %s",
                      cmd, args, flag, aim, input_files[i]);
    }
}

// Issue item 5: each output flag of each command aimed at each of its inputs
// (by name, ./name, a symlink, a hard link) and at the folder that holds them.
START_TEST(test_every_output_flag_spares_every_input) {
    struct digest digests[N_INPUT_FILES];
    make_inputs(digests);
    char commands[32][32];
    const int n_commands = listed_commands(commands, 32);
    int n_outputs = 0, n_runs = 0;
    for (int c = 0; c < n_commands; c++) {
        bool known = false;
        for (int b = 0; b < N_BASE_LINES; b++) known = known || strcmp(base_lines[b].cmd, commands[c]) == 0;
        ck_assert_msg(known, "mg %s has no command line in base_lines[]: add one, and its outputs are tested", commands[c]);
        char flags[32][48];
        const int n_flags = output_flags(commands[c], flags, 32);
        n_outputs += n_flags;
        for (int b = 0; b < N_BASE_LINES; b++) {
            if (strcmp(base_lines[b].cmd, commands[c]) != 0) continue;
            for (int f = 0; f < n_flags; f++) {
                expect_refused(commands[c], base_lines[b].args, flags[f], ".", digests);
                for (int i = 0; i < N_INPUT_FILES; i++) {
                    if (!names_input(base_lines[b].args, input_files[i])) continue;
                    char dot_name[64], sym[32], hard[32];
                    snprintf(dot_name, sizeof(dot_name), "./%s", input_files[i]);
                    snprintf(sym, sizeof(sym), "links/%d.sym", i);
                    snprintf(hard, sizeof(hard), "links/%d.hard", i);
                    const char * const aims[] = {input_files[i], dot_name, sym, hard};
                    for (int a = 0; a < 4; a++, n_runs++) {
                        expect_refused(commands[c], base_lines[b].args, flags[f], aims[a], digests);
                    }
                }
            }
        }
    }
    // The tables were read: run alone has --trace-json, --memory-map, --dump-tensors, --dot and --svg.
    ck_assert_msg(n_outputs >= 5 && n_runs > 0, "only %d output flags found, %d runs", n_outputs, n_runs);
}
END_TEST

// ---------------------------------------------------------------------------
// No silent results: a limit is named when hit, a bad value is refused
// ---------------------------------------------------------------------------

// W1: more prompts than one cache holds sequences is an error naming the
// limit, by -p and by -f, never the first 64 run and the rest dropped.
START_TEST(test_parallel_too_many_prompts) {
    FILE * f = fopen(in_dir("70.txt"), "w");
    ck_assert_ptr_nonnull(f);
    for (int i = 0; i < 70; i++) fprintf(f, "line %d\n", i);
    fclose(f);
    expect_error("70 prompts", "at most 64", "parallel -m '%s' -f '%s' -n 1", model(), in_dir("70.txt"));
    char args[2048] = "";
    for (int i = 0, n = 0; i < 70; i++) n += snprintf(args + n, sizeof(args) - (size_t) n, " -p x%d", i);
    expect_error("70 prompts", "at most 64", "parallel -m '%s' %s -n 1", model(), args);
}
END_TEST

// W2: when the context fills, the text each sequence made so far is printed
// (as mg run stops at a full context), not dropped with exit 1.
START_TEST(test_parallel_full_context_keeps_text) {
    struct mg_test_run r = mg("parallel -m '%s' -p hi -p yo -n 100000 --ignore-eos -c 40 --temp 0 -t 1", model());
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    ck_assert_msg(strstr(r.err, "-c 40") && strstr(r.err, "full"), "the stop is not said: %s", r.err);
    int n = 0;
    for (const char * p = r.out; (p = strstr(p, "--- sequence ")) != NULL; p++) n++;
    ck_assert_msg(n == 2, "expected both sequences' text, got %d:\n%s", n, r.out);
    ck_assert_msg(strstr(r.out, "\nhi") && strstr(r.out, "\nyo"), "the prompts are not printed:\n%s", r.out);
    mg_test_run_free(&r);
}
END_TEST

// W3: 8 invalid bytes are 8 U+FFFD (3 byte tokens each): perplexity sizes
// its buffer by the count, and scores them (or says the text is too short).
START_TEST(test_perplexity_invalid_bytes) {
    write_file(in_dir("ff.txt"), "\xff\xff\xff\xff\xff\xff\xff\xff", 8);
    struct mg_test_run r = mg("perplexity -m '%s' -f '%s' -c 8 -t 1", model(), in_dir("ff.txt"));
    ck_assert_msg(r.status == 0 && strstr(r.out, "Final estimate: PPL = ") != NULL, "exit %d:\n%s%s", r.status, r.out,
                  r.err);
    ck_assert_msg(strstr(r.err, "too big") == NULL, "%s", r.err);
    mg_test_run_free(&r);
}
END_TEST

// W5: batched-bench whose every case needs more than -c: an error naming -c
// and what the smallest case needs, not an empty table with exit 0.
START_TEST(test_batched_bench_nothing_fits) {
    // 4 x 64 prompt tokens + 4 x 16 generated = 320 cells.
    expect_failure("-c", "320", "batched-bench -m '%s' -npp 64 -ntg 16 -npl 4 -c 32 -t 1", model());
    struct mg_test_run r = mg("batched-bench -m '%s' -npp 4,64 -ntg 2 -npl 1 -c 32 -t 1", model());
    ck_assert_msg(r.status == 0 && strstr(r.err, "1 of 2 cases") != NULL, "a skipped case is not said: %s", r.err);
    mg_test_run_free(&r);
}
END_TEST

// W8: a --bandwidth or --baseline file that is a directory or holds no usable
// line is an error, not a table without the column.
START_TEST(test_bench_unusable_reference_files) {
    write_file(in_dir("junk.txt"), "junk\n1 inf\n", 11);
    const char * const flags[] = {"--bandwidth", "--baseline"};
    for (int i = 0; i < 2; i++) {
        expect_error(flags[i], in_dir("junk.txt"), "bench -m '%s' -p 8 -n 0 -r 1 -t 1 %s '%s'", model(), flags[i],
                     in_dir("junk.txt"));
        expect_error(flags[i], dir, "bench -m '%s' -p 8 -n 0 -r 1 -t 1 %s '%s'", model(), flags[i], dir);
    }
}
END_TEST

// W9: -n values that would give empty answers, a directory as the messages,
// and -n -2 (not a second spelling of -1) are refused with the reason.
START_TEST(test_chat_and_run_n) {
    expect_error("-n", "got 0", "chat -m '%s' -n 0", model());
    expect_error("-n", "got -2", "chat -m '%s' -n -2", model());
    expect_error("-n", "got -2", "run -m '%s' -p hi -n -2", model());
    struct mg_test_run r = mg_test_run_mg(dir, NULL, dir, "chat -m '%s' -n 4", model());
    ck_assert_msg(r.status == 1 && strstr(r.err, "standard input") != NULL, "chat < DIR: exit %d: %s", r.status, r.err);
    mg_test_run_free(&r);
}
END_TEST

// W11: bench deeper than the trained context warns, as the other commands do.
START_TEST(test_bench_depth_warns) {
    struct mg_test_run r = mg("bench -m '%s' -p 0 -n 1 -d 520 -r 1 -t 1", model());
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    ck_assert_msg(strstr(r.err, "warning") && strstr(r.err, "521") && strstr(r.err, "512"), "no warning: %s", r.err);
    mg_test_run_free(&r);
}
END_TEST

// W6: mkmodel reads what it wrote back with the engine's loader before the
// rename: a vocabulary the loader refuses (a merge without a space) or that
// cannot spell plain text (no byte tokens) is an error, and no file is left.
// So is a token given twice in model.vocab (a duplicate JSON key).
START_TEST(test_mkmodel_checks_what_it_wrote) {
    static const char * const models[] = {
        "\"vocab\":{\"a\":0,\"b\":1},\"merges\":[\"a b\",\"ab\"]",   // the loader refuses merges[1]
        "\"vocab\":{\"a\":0,\"b\":1},\"merges\":[\"a b\"]",          // loads, but has no byte tokens
        "\"vocab\":{\"a\":0,\"b\":1,\"a\":2},\"merges\":[]",          // 'a' twice: id 0 or 2 unreachable
        "\"vocab\":{\"a\":0,\"b\":99999999},\"merges\":[]",           // a hundred million holes
    };
    static const char * const said[] = {"does not load", "cannot spell plain text", "the token 'a' is given twice",
                                        "the largest token id is 99999999"};
    ck_assert_int_eq(mkdir(in_dir("vocab"), 0755), 0);
    for (int i = 0; i < 4; i++) {
        char json[1024];
        const int n = snprintf(json, sizeof(json),
                               "{\"version\":\"1.0\",\"added_tokens\":[],\"normalizer\":null,\"pre_tokenizer\":{\"type\":"
                               "\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":true},"
                               "\"post_processor\":null,\"decoder\":{\"type\":\"ByteLevel\"},\"model\":{\"type\":\"BPE\",%s}}",
                               models[i]);
        write_file(in_dir("vocab/tokenizer.json"), json, (size_t) n);
        const char * names = i < 2 ? in_dir("out.gguf") : in_dir("vocab/tokenizer.json");   // what the error names
        expect_error(said[i], names, "mkmodel --preset tiny --vocab '%s' -o '%s'", in_dir("vocab"),
                     in_dir("out.gguf"));
        ck_assert_int_ne(access(in_dir("out.gguf"), F_OK), 0);
        ck_assert_int_eq(mg_test_count_temp_files(in_dir("out.gguf")), 0);
    }
}
END_TEST

// W7: a --kl-base file whose rows are damaged (all 0xFF: a NaN scale; an
// infinite scale; probabilities above 1) is an error naming the chunk, not a
// table of nan, inf or a KL divergence of 0.
START_TEST(test_kl_base_damaged_rows) {
    const char * t = text_file();
    char base[128], bad[128];
    snprintf(base, sizeof(base), "%s", in_dir("base.kld"));
    snprintf(bad, sizeof(bad), "%s", in_dir("bad.kld"));
    struct mg_test_run r = mg("perplexity -m '%s' -f '%s' -c 16 -b 16 --chunks 2 -t 1 --save-logits '%s'", model(), t, base);
    ck_assert_msg(r.status == 0, "%s", r.err);
    mg_test_run_free(&r);
    size_t size;
    unsigned char * b = mg_test_read_file(base, &size);
    ck_assert_ptr_nonnull(b);
    const size_t rows_at = 8 + 3 * 4 + 2 * 16 * 4;   // magic, n_ctx n_vocab n_chunk, the tokens of 2 chunks of 16
    ck_assert_uint_gt(size, rows_at);
    for (int kind = 0; kind < 3; kind++) {
        unsigned char * d = malloc(size);
        memcpy(d, b, size);
        if (kind == 0) memset(d + rows_at, 0xFF, size - rows_at);
        const float inf = INFINITY, big = 1e-3f;   // big: 65535 steps of it span 65 nats, not 16
        if (kind == 1) memcpy(d + rows_at, &inf, 4);
        if (kind == 2) memcpy(d + rows_at, &big, 4);
        write_file(bad, d, size);
        free(d);
        expect_failure("--kl-base", "chunk 1", "perplexity -m '%s' --kl-base '%s' -t 1", model(), bad);
    }
    free(b);
    r = mg("perplexity -m '%s' --kl-base '%s' -t 1", model(), base);   // the undamaged file still reads
    ck_assert_msg(r.status == 0 && strstr(r.out, "Mean    KLD:") != NULL, "%s", r.err);
    mg_test_run_free(&r);
}
END_TEST

// W4 for the other commands: --dot, --svg and --dot-layers given to a command
// that draws nothing are refused, not accepted and ignored.
START_TEST(test_drawing_flags_only_where_drawn) {
    const char * const lines[] = {"logits -m '%s' -p hi", "chat -m '%s' -n 1", "parallel -m '%s' -p hi -n 1",
                                  "batched-bench -m '%s' -npp 8 -ntg 1 -npl 1"};
    const char * const flags[] = {"--dot", "--svg", "--dot-layers"};
    for (int i = 0; i < 4; i++) {
        for (int f = 0; f < 3; f++) {
            char args[256];
            snprintf(args, sizeof(args), lines[i], model());
            if (f == 2) expect_error(flags[f], "draws no graphs", "%s %s 1", args, flags[f]);
            else expect_error(flags[f], "draws no graphs", "%s %s '%s'", args, flags[f], dir);
        }
    }
}
END_TEST

// W10: invalid UTF-8 follows one rule, llama.cpp's (vocab.h, unicode.h): a
// byte that starts no complete sequence is U+FFFD; an overlong form is the
// character it spells; a surrogate is its own three bytes. Each case is
// compared with the text it must equal, not with a list of ids.
START_TEST(test_invalid_utf8_rule) {
    static const struct {
        const char * bytes, * same_as;
    } cases[] = {
        {"a\xff" "b", "a\xef\xbf\xbd" "b"},   // FF: U+FFFD
        {"a\xc0\xaf" "b", "a/b"},              // overlong '/', 2 bytes
        {"a\xe0\x80\xaf" "b", "a/b"},          // overlong '/', 3 bytes
        {"a\xe4\xbd" "b", "a\xef\xbf\xbd\xef\xbf\xbd" "b"},   // a cut 3-byte sequence: each byte U+FFFD
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        write_file(in_dir("a.txt"), cases[i].bytes, strlen(cases[i].bytes));
        write_file(in_dir("b.txt"), cases[i].same_as, strlen(cases[i].same_as));
        struct mg_test_run a = mg("tokenize -m '%s' -f '%s' --no-bos", model(), in_dir("a.txt"));
        struct mg_test_run b = mg("tokenize -m '%s' -f '%s' --no-bos", model(), in_dir("b.txt"));
        ck_assert_msg(a.status == 0 && b.status == 0, "case %zu: %s%s", i, a.err, b.err);
        ck_assert_msg(strcmp(a.out, b.out) == 0, "case %zu: the ids differ:\n%s---\n%s", i, a.out, b.out);
        mg_test_run_free(&a);
        mg_test_run_free(&b);
    }
}
END_TEST

// R1: a long run's --trace-json is bounded by --trace-steps (the prompt and
// the first N decode steps), and says so, instead of growing with -n.
START_TEST(test_trace_json_bounded) {
    const int steps[] = {0, 5};
    for (int i = 0; i < 2; i++) {
        struct mg_test_run r = mg("run -m '%s' -p hi -n 40 --ignore-eos --temp 0 -t 1 -c 64 --trace-steps %d --trace-json '%s'",
                                  model(), steps[i], in_dir("t.json"));
        ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
        ck_assert_msg(strstr(r.err, "--trace-steps") != NULL, "the bound is not said: %s", r.err);
        mg_test_run_free(&r);
        char * json = mg_test_read_file(in_dir("t.json"), NULL);
        ck_assert_ptr_nonnull(json);
        int n_graphs = 0;   // one graph slice per run on the one thread: the prompt, then each recorded step
        for (const char * p = json; (p = strstr(p, "\"name\":\"graph\"")) != NULL; p++) n_graphs++;
        free(json);
        ck_assert_msg(n_graphs == 1 + steps[i], "--trace-steps %d: %d graphs in the trace", steps[i], n_graphs);
    }
}
END_TEST

// R2: a tokenizer.json of millions of tiny values is refused at the JSON
// value limit (json.h), with the file's line and column, before it takes
// gigabytes of memory.
START_TEST(test_json_value_limit) {
    ck_assert_int_eq(mkdir(in_dir("vocab"), 0755), 0);
    FILE * f = fopen(in_dir("vocab/tokenizer.json"), "w");
    ck_assert_ptr_nonnull(f);
    fputs("{\"model\":{\"vocab\":[0", f);
    for (int i = 0; i < 5000000; i++) fputs(",0", f);   // 10 MB, 5 M values: beyond the limit
    fputs("]}}", f);
    ck_assert_int_eq(fclose(f), 0);
    expect_error("tokenizer.json:1:", "values", "mkmodel --preset tiny --vocab '%s' -o '%s'", in_dir("vocab"),
                 in_dir("out.gguf"));
}
END_TEST

// A second probe: an output named /dev/stdout or /proc/self/fd/N, or the file
// the shell redirected stdout into, was renamed over (">> journal.log" lost
// its lines); two output flags on one file, or a file inside another flag's
// folder, lost one of them. Each is now an error before any work.
static int sh(const char * fmt, ...) {
    char    cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    const int status = system(cmd);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

// Row 4: text printed to a terminal (the prompt echoed, generated text,
// token pieces) went out raw, so an ESC sequence in it could retitle the
// window or rewrite the screen. On a terminal (script(1) gives mg one)
// control characters are now printed escaped; to a file they stay as they
// are, so output still compares byte for byte.
START_TEST(test_terminal_escapes) {
    if (sh("command -v script > /dev/null") != 0) {
        mg_test_print_skip("test_terminal_escapes", __FILE__, __LINE__, "no script(1) to give mg a terminal");
        return;
    }
    static const char text[] = "\x1b]0;pwned\x07\x1b[2Jok \xc2\x9b" "1m end";
    write_file(in_dir("p.txt"), text, sizeof(text) - 1);
    const char * const lines[] = {"run -m '%s' -n 0 -f '%s'", "tokenize -m '%s' -f '%s' --pieces"};
    for (int i = 0; i < 2; i++) {
        char args[1024], fmt[256];
        snprintf(fmt, sizeof(fmt), "%s", lines[i]);
        snprintf(args, sizeof(args), fmt, model(), in_dir("p.txt"));
        ck_assert_int_eq(sh("script -qec \"'%s' %s\" /dev/null > '%s' 2> /dev/null", mg_test_mg_bin(), args, in_dir("tty")), 0);
        size_t n;
        char * out = mg_test_read_file(in_dir("tty"), &n);
        ck_assert_ptr_nonnull(out);
        ck_assert_msg(memchr(out, 0x1b, n) == NULL && memchr(out, 0x07, n) == NULL, "mg %s: ESC or BEL reached the terminal", args);
        // run prints the text whole; tokenize one piece a line.
        const char * shown = i == 0 ? "\\x1b]0;pwned\\x07\\x1b[2Jok \\u009b1m end" : "'\\x1b'";
        ck_assert_msg(strstr(out, shown) != NULL, "mg %s: '%s' is not shown: %s", args, shown, out);
        ck_assert_msg(strstr(out, "\xc2\x9b") == NULL, "mg %s: the C1 CSI reached the terminal", args);
        free(out);
    }
    // F5..FF start no UTF-8 character: each byte escaped, not passed on as the lead of one.
    write_file(in_dir("f5.txt"), "a\xf5\x80\x80" "b", 5);
    ck_assert_int_eq(sh("script -qec \"'%s' run -m '%s' -n 0 -f '%s'\" /dev/null > '%s' 2> /dev/null", mg_test_mg_bin(),
                        model(), in_dir("f5.txt"), in_dir("tty")), 0);
    char * f5 = mg_test_read_file(in_dir("tty"), NULL);
    ck_assert_msg(f5 != NULL && strstr(f5, "a\\xf5\\x80\\x80b") != NULL, "%s", f5 ? f5 : "");
    free(f5);
    struct mg_test_run r = mg("run -m '%s' -n 0 -f '%s'", model(), in_dir("p.txt"));   // a file: the bytes as they are
    ck_assert_msg(r.status == 0 && strncmp(r.out, text, sizeof(text) - 1) == 0, "exit %d: %s", r.status, r.err);
    mg_test_run_free(&r);
}
END_TEST

START_TEST(test_output_is_a_descriptor_or_a_redirect) {
    const char * journal = in_dir("journal.log");
    write_file(journal, "1\n2\n3\n", 6);
    const struct digest before = digest_of(journal);
    ck_assert_int_eq(sh("'%s' run -m '%s' -p hello -n 2 --trace-json /dev/stdout >> '%s' 2> '%s'", mg_test_mg_bin(),
                        model(), journal, in_dir("err")), 1);
    expect_unchanged(journal, before);
    ck_assert_int_eq(sh("'%s' logits -m '%s' -p hi -o /proc/self/fd/5 5>> '%s' 2> '%s'", mg_test_mg_bin(), model(),
                        journal, in_dir("err")), 1);
    expect_unchanged(journal, before);
    ck_assert_int_eq(symlink("/dev/stderr", in_dir("link")), 0);
    expect_error("in /dev or /proc", "--output", "logits -m '%s' -p hi -o '%s'", model(), in_dir("link"));
    // The file stdout is redirected into: the text the command prints would be replaced.
    ck_assert_int_eq(sh("'%s' logits -m '%s' -p hi -o '%s' >> '%s' 2> '%s'", mg_test_mg_bin(), model(), journal,
                        journal, in_dir("err")), 1);
    expect_unchanged(journal, before);
    size_t n;
    char * err = mg_test_read_file(in_dir("err"), &n);
    ck_assert_msg(err != NULL && strstr(err, "standard output") != NULL, "%s", err ? err : "(no stderr)");
    free(err);
}
END_TEST

START_TEST(test_two_outputs_on_one_file) {
    expect_error("also written by --trace-json", NULL, "run -m '%s' -p hello -n 2 --trace-json '%s' --memory-map '%s'",
                 model(), in_dir("dup"), in_dir("dup"));
    ck_assert_int_ne(access(in_dir("dup"), F_OK), 0);
    ck_assert_int_eq(mkdir(in_dir("D"), 0755), 0);
    expect_error("--dump-tensors", "--output", "logits -m '%s' -p hi -o '%s' --dump-tensors '%s'", model(),
                 in_dir("D/order.txt"), in_dir("D"));
    ck_assert_int_ne(access(in_dir("D/order.txt"), F_OK), 0);
}
END_TEST

// What a command prints on stdout must get there: a full disk made rc 0
// with a cut-off file.
START_TEST(test_stdout_write_error_fails) {
    ck_assert_int_eq(sh("'%s' info '%s' > /dev/full 2> '%s'", mg_test_mg_bin(), model(), in_dir("err")), 1);
    size_t n;
    char * err = mg_test_read_file(in_dir("err"), &n);
    ck_assert_msg(err != NULL && strstr(err, "cannot write the standard output") != NULL, "%s", err ? err : "");
    free(err);
}
END_TEST

// A rival named by a bare name that is a file in the current directory is
// that file, not the program of that name in PATH (--llama-bench true ran
// /usr/bin/true).
START_TEST(test_rival_bare_name_is_the_local_file) {
    const char * script = in_dir("true");
    char         text[1024];
    const int    n = snprintf(text, sizeof(text), "#!/bin/sh\ntouch '%s'\n", in_dir("ran"));
    write_file(script, text, (size_t) n);
    ck_assert_int_eq(chmod(script, 0755), 0);
    sh("cd '%s' && '%s' bench -m '%s' -p 4 -n 4 -t 1 -r 1 --rounds 1 --llama-bench true > /dev/null 2>&1",
       in_dir(""), mg_test_mg_bin(), model());
    ck_assert_msg(access(in_dir("ran"), F_OK) == 0, "the local ./true did not run");
}
END_TEST

// Endless input is bounded: a chat message is at most 1 MiB (getline grew to
// gigabytes on /dev/zero), and the figure files of bench are small text files
// (fgets read /dev/zero forever).
START_TEST(test_endless_input_is_bounded) {
    ck_assert_int_eq(sh("timeout 60 '%s' chat -m '%s' < /dev/zero > /dev/null 2> '%s'", mg_test_mg_bin(), model(),
                        in_dir("err")), 1);
    size_t n;
    char * err = mg_test_read_file(in_dir("err"), &n);
    ck_assert_msg(err != NULL && strstr(err, "a message of more than 1048576 bytes") != NULL, "%s", err ? err : "");
    free(err);
    expect_error("--bandwidth /dev/zero", "at most 1 MiB", "bench -m '%s' -p 4 -n 4 -r 1 --bandwidth /dev/zero",
                 model());
    expect_error("--baseline /dev/zero", "at most 1 MiB", "bench -m '%s' -p 4 -n 4 -r 1 --baseline /dev/zero",
                 model());
}
END_TEST

// Counts that mean nothing are refused, not printed or ignored: --top -1 (it
// printed "top -1"), --dot-layers -5, and --dot-layers without --dot.
START_TEST(test_meaningless_counts_refused) {
    expect_error("--top must be >= 0", NULL, "logits -m '%s' -p hi --top -1", model());
    expect_error("--dot-layers -5", ">= 0", "run -m '%s' -p hi -n 2 --dot-layers -5", model());
    expect_error("--dot-layers 1", "--dot DIR", "run -m '%s' -p hi -n 2 --dot-layers 1", model());
}
END_TEST

// Names a user types or a file holds (a path, a flag's value) went into
// error messages raw: a file named ESC "[2J" cleared the screen of whoever
// read the error. Every such name is now quoted (mg_quote): a control byte is
// shown as \xNN, and the message stays one line.
static void expect_quoted(const char * fmt, ...) __attribute__((format(printf, 1, 2)));
static void expect_quoted(const char * fmt, ...) {
    char    args[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof(args), fmt, ap);
    va_end(ap);
    struct mg_test_run r = mg("%s", args);
    ck_assert_msg(r.status == 1, "mg %s: exit status %d: %s", args, r.status, r.err);
    ck_assert_msg(strchr(r.err, 0x1b) == NULL && strchr(r.err, '\r') == NULL, "mg %s: ESC or CR in: %s", args, r.err);
    ck_assert_msg(strstr(r.err, "\\x1b[2J") != NULL, "mg %s: the name is not shown quoted: %s", args, r.err);
    ck_assert_msg(mg_test_count_lines(r.err) == 1, "mg %s: more than one line: %s", args, r.err);
    mg_test_run_free(&r);
}

START_TEST(test_names_quoted_in_messages) {
    const char * missing = in_dir("\x1b[2J\rfake.gguf");
    const char * junk    = in_dir("\x1b[2Jjunk.gguf");
    write_file(junk, "GGUF\x03\x00\x00\x00garbage", 16);
    expect_quoted("run -m '%s' -p hi -n 1", missing);
    expect_quoted("info '%s'", missing);
    expect_quoted("info '%s'", junk);
    expect_quoted("tokenize -m '%s' -p hi", junk);
    expect_quoted("run -m '%s' -n 1 -f '%s'", model(), in_dir("\x1b[2J.txt"));
    expect_quoted("run -m '%s' -p hi -n 1 --kv-type '\x1b[2J'", model());
    expect_quoted("run -m '%s' -p hi -n '\x1b[2J'", model());
    expect_quoted("run --\x1b[2J");
}
END_TEST

// A chat message longer than the whole context was said to be "not
// answered", and mg chat still exited 0: a script feeding it messages could
// not tell. The chat goes on (the next message is answered), and the exit
// status is 1 with a last line that counts what was not answered.
START_TEST(test_chat_unanswered_message_fails) {
    char long_line[4096] = "";
    for (int i = 0; i < 40; i++) strcat(long_line, "hello there ");
    char text[4200];
    const int n = snprintf(text, sizeof(text), "%s\nhi\n", long_line);
    write_file(in_dir("msgs.txt"), text, (size_t) n);
    struct mg_test_run r = mg_test_run_mg(dir, NULL, in_dir("msgs.txt"), "chat -m '%s' -c 32 -n 2 -t 1", model());
    ck_assert_msg(r.status == 1, "exit %d: %s", r.status, r.err);
    ck_assert_msg(strstr(r.err, "not answered; a shorter message") != NULL, "%s", r.err);
    ck_assert_msg(strstr(r.err, "mg chat: 1 message was not answered: longer than the context (-c 32)") != NULL, "%s",
                  r.err);
    ck_assert_msg(r.out_len > 1, "the short message after it was not answered: '%s'", r.out);
    mg_test_run_free(&r);
}
END_TEST

// --seed -1 was refused ("needs a whole number"); llama.cpp takes it as
// "pick a random seed". Accepted now, and the seed picked is printed so that
// the same run can be made again with it.
START_TEST(test_seed_minus_one_is_random_and_printed) {
    const char * run = "run -m '%s' -p hello -n 12 -t 1 --temp 1.5 --top-k 0 --top-p 1 --min-p 0 --seed %s";
    struct mg_test_run a = mg(run, model(), "-1");
    ck_assert_msg(a.status == 0, "exit %d: %s", a.status, a.err);
    const char * said = strstr(a.err, "--seed -1: the seed is ");
    ck_assert_msg(said != NULL, "no seed printed: %s", a.err);
    unsigned long long seed = 0;
    ck_assert_int_eq(sscanf(said, "--seed -1: the seed is %llu", &seed), 1);
    char again[32];
    snprintf(again, sizeof(again), "%llu", seed);
    struct mg_test_run b = mg(run, model(), again);
    ck_assert_msg(b.status == 0, "exit %d: %s", b.status, b.err);
    ck_assert_msg(a.out_len == b.out_len && memcmp(a.out, b.out, a.out_len) == 0, "--seed %s: '%s', -1 gave '%s'",
                  again, b.out, a.out);
    mg_test_run_free(&a);
    mg_test_run_free(&b);
    expect_error("--seed", "or -1 (random), got '-2'", "run -m '%s' -p hi -n 1 --seed -2", model());
}
END_TEST

// ---------------------------------------------------------------------------
// A third probe: FIFOs and devices as inputs, a full disk under a drawing,
// the seed that stands for -1, a tokenizer out of memory
// ---------------------------------------------------------------------------

// mg ARGS under timeout(1), after the shell code pre: its exit status (124:
// still running at the limit, killed), stdout in in_dir("out"), and stderr
// read into err.
static int mg_within(int seconds, const char * pre, char * err, size_t err_size, const char * fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int mg_within(int seconds, const char * pre, char * err, size_t err_size, const char * fmt, ...) {
    char    args[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof(args), fmt, ap);
    va_end(ap);
    char out[128], errf[128];
    snprintf(out, sizeof(out), "%s", in_dir("out"));
    snprintf(errf, sizeof(errf), "%s", in_dir("err"));
    const int status = sh("%s timeout %d '%s' %s > '%s' 2> '%s' < /dev/null", pre, seconds, mg_test_mg_bin(), args, out,
                          errf);
    char * text = mg_test_read_file(errf, NULL);
    snprintf(err, err_size, "%s", text ? text : "");
    free(text);
    return status;
}

// A FIFO nobody writes, as a model, a --kl-base file or a --vocab folder's
// JSON, blocked open() forever (the old mg hung until timeout(1) killed it:
// status 124). They must be regular files, and say so at once. A prompt
// file may be a pipe (-f <(cmd), a FIFO someone writes): mg waits a bounded
// time for a writer, then says nobody came; with a writer it reads it.
START_TEST(test_fifo_inputs_do_not_hang) {
    char fifo[128], err[4096];
    snprintf(fifo, sizeof(fifo), "%s", in_dir("fifo"));
    ck_assert_int_eq(mkfifo(fifo, 0644), 0);
    ck_assert_int_eq(mkdir(in_dir("vocab"), 0755), 0);
    copy_file(mg_test_root("data/minimind/tokenizer.json"), in_dir("vocab/tokenizer.json"));
    ck_assert_int_eq(mkfifo(in_dir("vocab/tokenizer_config.json"), 0644), 0);
    char lines[5][512];
    snprintf(lines[0], sizeof(lines[0]), "info '%s'", fifo);
    snprintf(lines[1], sizeof(lines[1]), "run -m '%s' -p hi -n 1", fifo);
    snprintf(lines[2], sizeof(lines[2]), "quantize '%s' '%s' q8_0", fifo, in_dir("q.gguf"));
    snprintf(lines[3], sizeof(lines[3]), "perplexity -m '%s' --kl-base '%s' -t 1", model(), fifo);
    snprintf(lines[4], sizeof(lines[4]), "mkmodel --preset tiny --vocab '%s' -o '%s'", in_dir("vocab"), in_dir("o.gguf"));
    for (int i = 0; i < 5; i++) {
        const int status = mg_within(30, "", err, sizeof(err), "%s", lines[i]);
        ck_assert_msg(status == 1 && strstr(err, "not a regular file") != NULL, "mg %s: exit %d (124: hung): %s",
                      lines[i], status, err);
    }
    int status = mg_within(60, "", err, sizeof(err), "run -m '%s' -f '%s' -n 1", model(), fifo);
    ck_assert_msg(status == 1 && strstr(err, "nobody opened for writing") != NULL, "exit %d (124: hung): %s", status,
                  err);
    // A FIFO written a second after mg opened it reads as the text it was given.
    char writer[256];
    snprintf(writer, sizeof(writer), "(sleep 1; timeout 60 sh -c \"printf hello > '%s'\") &", fifo);
    status = mg_within(60, writer, err, sizeof(err), "tokenize -m '%s' -f '%s'", model(), fifo);
    char * ids = mg_test_read_file(in_dir("out"), NULL);
    struct mg_test_run p = mg("tokenize -m '%s' -p hello", model());
    ck_assert_msg(status == 0 && p.status == 0 && ids != NULL && strcmp(ids, p.out) == 0, "exit %d: %s\n%s---\n%s",
                  status, err, ids ? ids : "", p.out);
    free(ids);
    mg_test_run_free(&p);
}
END_TEST

// A --vocab folder whose tokenizer.json is /dev/zero was read into a buffer
// doubled until malloc failed: an abort (under ulimit -v), or the machine's
// memory. A JSON file must be a regular file.
START_TEST(test_vocab_device_refused) {
    ck_assert_int_eq(mkdir(in_dir("vocab"), 0755), 0);
    ck_assert_int_eq(symlink("/dev/zero", in_dir("vocab/tokenizer.json")), 0);
    char err[4096];
    const int status = mg_within(60, MG_TEST_SANITIZED ? "" : "ulimit -v 2000000;", err, sizeof(err),
                                 "mkmodel --preset tiny --vocab '%s' -o '%s'", in_dir("vocab"), in_dir("o.gguf"));
    ck_assert_msg(status == 1 && strstr(err, "tokenizer.json: not a regular file") != NULL, "exit %d: %s", status, err);
    ck_assert_int_ne(access(in_dir("o.gguf"), F_OK), 0);
}
END_TEST

// --dot and --svg files that could not be written (a full disk; here a file
// size limit, EFBIG) were said on stderr, and mg run still exited 0: a
// script could not tell the drawings were missing. Exit 1 now, the text
// still printed, and no temporary file left.
START_TEST(test_drawing_write_failure_fails) {
    ck_assert_int_eq(mkdir(in_dir("d"), 0755), 0);
    // 8 KiB: the short stdout and stderr fit, a drawing of the prompt's graph (tens of KiB) does not.
    struct mg_test_run r = mg_test_run_mg(dir, "trap '' XFSZ; ulimit -f 8;", NULL,
                                          "run -m '%s' -p hi -n 2 --temp 0 -t 1 --dot '%s' --svg '%s'", model(),
                                          in_dir("d"), in_dir("d"));
    ck_assert_msg(r.status == 1 && strstr(r.err, "not written") != NULL, "exit %d: %s", r.status, r.err);
    ck_assert_msg(strncmp(r.out, "hi", 2) == 0, "the text is not printed: '%s'", r.out);
    mg_test_run_free(&r);
    static const char * const names[] = {"prompt.dot", "prompt-alloc.svg", "decode.dot", "decode-alloc.svg"};
    for (int i = 0; i < 4; i++) {
        char path[128];
        snprintf(path, sizeof(path), "%s/%s", in_dir("d"), names[i]);
        ck_assert_int_eq(mg_test_count_temp_files(path), 0);
    }
    r = mg("run -m '%s' -p hi -n 2 --temp 0 -t 1 --dot '%s' --svg '%s'", model(), in_dir("d"), in_dir("d"));
    ck_assert_msg(r.status == 0, "with room: exit %d: %s", r.status, r.err);
    mg_test_run_free(&r);
}
END_TEST

// --seed 18446744073709551615 (2^64 - 1) is how --seed -1 is held: it was
// taken as "random", and the seed printed was another one. Refused now.
START_TEST(test_seed_that_means_random_refused) {
    expect_error("--seed 18446744073709551615", "stands for -1", "run -m '%s' -p hi -n 1 --seed 18446744073709551615",
                 model());
    struct mg_test_run r = mg("run -m '%s' -p hi -n 1 --seed 18446744073709551614", model());
    ck_assert_msg(r.status == 0 && strstr(r.err, "the seed is") == NULL, "exit %d: %s", r.status, r.err);
    mg_test_run_free(&r);
}
END_TEST

// bench and batched-bench took --rounds and --rival-timeout without the
// rival they are about (--llama-bench, --llama-batched-bench), and did
// nothing with them: the user thought a race was run. Refused now, naming
// the flag it needs; with the rival, the same values race (test_rival_timeout).
START_TEST(test_race_flags_need_a_rival) {
    expect_error("--rounds 3", "give --llama-bench PATH", "bench -m '%s' -p 4 -n 0 -r 1 -t 1 --rounds 3", model());
    expect_error("--rival-timeout 5", "give --llama-bench PATH", "bench -m '%s' -p 4 -n 0 -r 1 -t 1 --rival-timeout 5",
                 model());
    expect_error("--rounds 3", "give --llama-batched-bench PATH",
                 "batched-bench -m '%s' -npp 4 -ntg 1 -npl 1 -t 1 --rounds 3", model());
    expect_error("--rival-timeout 5", "give --llama-batched-bench PATH",
                 "batched-bench -m '%s' -npp 4 -ntg 1 -npl 1 -t 1 --rival-timeout 5", model());
}
END_TEST

// Values taken loosely, each a silent result: strtol skips leading blanks, so
// -n " 3" was 3 (a list flag refused " 3"); --trace "" traced nothing without
// a word; "mg --version extra" ignored the extra word.
START_TEST(test_loose_values_refused) {
    expect_error("-n", "' 3'", "run -m '%s' -p hi -n ' 3' -t 1", model());
    expect_error("--temp", "' 0.5'", "run -m '%s' -p hi -n 1 --temp ' 0.5' -t 1", model());
    expect_error("--seed", "' 7'", "run -m '%s' -p hi -n 1 --seed ' 7' -t 1", model());
    expect_error("--trace", "names no category", "run -m '%s' -p hi -n 1 -t 1 --trace ''", model());
    expect_error("--trace", "names no category", "run -m '%s' -p hi -n 1 -t 1 --trace ,", model());
    expect_error("--version", "'extra'", "--version extra");
    expect_error("--list-devices", "'extra'", "--list-devices extra");
}
END_TEST

// A tokenizer folder that says something it cannot mean: a chat_template
// that is a number was ignored (the model had no template, rc 0), and an
// added token with empty text was written into the vocabulary, where no text
// can ever match it. Both refused, by key, and no model written.
START_TEST(test_vocab_odd_values_refused) {
    ck_assert_int_eq(mkdir(in_dir("v1"), 0755), 0);
    copy_file(mg_test_root("data/minimind/tokenizer.json"), in_dir("v1/tokenizer.json"));
    write_file(in_dir("v1/tokenizer_config.json"), "{\"chat_template\": 5}", 20);
    expect_error("chat_template", "must be a string", "mkmodel --preset tiny --vocab '%s' -o '%s'", in_dir("v1"),
                 in_dir("o.gguf"));
    ck_assert_int_ne(access(in_dir("o.gguf"), F_OK), 0);

    ck_assert_int_eq(mkdir(in_dir("v2"), 0755), 0);
    size_t n = 0;
    char * json = mg_test_read_file(mg_test_root("data/minimind/tokenizer.json"), &n);
    ck_assert_ptr_nonnull(json);
    const char * at = strstr(json, "\"content\": \"<|endoftext|>\"");
    ck_assert_ptr_nonnull(at);
    const size_t head = (size_t) (at - json);
    FILE * f = fopen(in_dir("v2/tokenizer.json"), "wb");
    ck_assert_ptr_nonnull(f);
    fwrite(json, 1, head, f);
    fputs("\"content\": \"\"", f);
    fputs(at + strlen("\"content\": \"<|endoftext|>\""), f);
    fclose(f);
    free(json);
    expect_error("added_tokens[0]", "non-empty", "mkmodel --preset tiny --vocab '%s' -o '%s'", in_dir("v2"),
                 in_dir("o.gguf"));
    ck_assert_int_ne(access(in_dir("o.gguf"), F_OK), 0);
}
END_TEST

// With stderr or stdout closed (mg ... 2>&-), the next file mg opened took
// that descriptor: --dump-tensors' order.txt held the timings and "wrote"
// lines instead of the tensor names, and mg exited 0. The closed
// descriptors are now held by /dev/null, so order.txt is what a run with
// both open writes; a closed stdout still fails (exit 1), as before.
START_TEST(test_closed_standard_descriptors) {
    static const char * const cases[][2] = {{"open", "> /dev/null 2> /dev/null"}, {"no_stderr", "> /dev/null 2>&-"},
                                            {"no_stdout", ">&- 2> /dev/null"}};
    char * want = NULL;
    for (int i = 0; i < 3; i++) {
        char folder[128], order[160];
        snprintf(folder, sizeof(folder), "%s", in_dir(cases[i][0]));
        ck_assert_int_eq(mkdir(folder, 0755), 0);
        const int status = sh("'%s' run -m '%s' -p hi -n 2 --temp 0 -t 1 --dump-tensors '%s' --dot '%s' %s",
                              mg_test_mg_bin(), model(), folder, folder, cases[i][1]);
        ck_assert_msg(status == (i == 2 ? 1 : 0), "%s: exit %d", cases[i][0], status);
        snprintf(order, sizeof(order), "%s/order.txt", folder);
        char * got = mg_test_read_file(order, NULL);
        ck_assert_msg(got != NULL && strncmp(got, "inp_embd\n", 9) == 0, "%s: order.txt: %.300s", cases[i][0],
                      got ? got : "(none)");
        if (i == 0) want = got;
        else {
            ck_assert_msg(strcmp(got, want) == 0, "%s: order.txt differs from the run with both open", cases[i][0]);
            free(got);
        }
    }
    free(want);
}
END_TEST

// The tokenizer's arrays grow with the text and have no limit of their own:
// running out of memory in one aborted the process (vocab.c's grow asserted).
// The library call now fails with an error; a child process under a memory
// limit tokenizes 64 MiB of random bytes (up to 41 bytes of memory each).
START_TEST(test_tokenizer_out_of_memory_is_an_error) {
    if (MG_TEST_SANITIZED) MG_TEST_SKIP("RLIMIT_AS: a sanitizer's shadow memory cannot be mapped under it");
    struct mg_gguf * g = mg_gguf_open(model());
    ck_assert_ptr_nonnull(g);
    struct mg_vocab * v = mg_vocab_load(g);
    ck_assert_ptr_nonnull(v);
    enum { SIZE = 64 << 20 };
    char * text = malloc(SIZE);
    ck_assert_ptr_nonnull(text);
    for (size_t i = 0; i < SIZE; i++) text[i] = (char) (rand() & 0xFF);
    fflush(NULL);
    const pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        long pages = 0;   // the address space in use now, plus 128 MiB
        FILE * statm = fopen("/proc/self/statm", "r");
        if (statm == NULL || fscanf(statm, "%ld", &pages) != 1) _exit(3);
        fclose(statm);
        const struct rlimit lim = {(rlim_t) pages * (rlim_t) sysconf(_SC_PAGESIZE) + (128u << 20), RLIM_INFINITY};
        if (setrlimit(RLIMIT_AS, &lim) != 0) _exit(3);
        int32_t   n   = 0;
        int32_t * ids = mg_tokenize_alloc(v, text, SIZE, true, false, &n);
        _exit(ids == NULL && strstr(mg_last_error(), "out of memory") != NULL ? 0 : 2);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child %s %d (2: no error, 3: no limit set)",
                  WIFEXITED(status) ? "exited with" : "was killed by signal",
                  WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    free(text);
    mg_vocab_free(v);
    mg_gguf_close(g);
}
END_TEST

// The peak resident memory of this test's children so far, in bytes.
static uint64_t children_peak_rss(void) {
    struct rusage ru;
    ck_assert_int_eq(getrusage(RUSAGE_CHILDREN, &ru), 0);
    return (uint64_t) ru.ru_maxrss * 1024;
}

// tokenize -f held the ids twice (a buffer of one id per byte beside the
// tokenizer's own array) and read a file into a buffer grown by doubling:
// 20 MB of English took 196 MB (9.8 bytes per byte), 20 MB of random bytes
// 455 MB, and under ulimit -v it aborted ("vocab.c: assertion failed").
// Now the ids are held once (mg_tokenize_alloc), a file is read into a buffer
// of its size, a piece length is 4 bytes (not a size_t), and the memory the
// tokenizer may need is checked first: 149 MB and 276 MB.
START_TEST(test_tokenize_memory_bounded) {
    size_t n_text;
    char * dham = mg_test_read_file(mg_test_root("data/heldout/dhammapada.txt"), &n_text);
    ck_assert_ptr_nonnull(dham);
    enum { SIZE = 20 * 1000 * 1000 };
    char * big = malloc(SIZE);
    for (size_t o = 0; o < SIZE; o += n_text) memcpy(big + o, dham, SIZE - o < n_text ? SIZE - o : n_text);
    write_file(in_dir("big.txt"), big, SIZE);
    for (size_t i = 0; i < SIZE; i++) big[i] = (char) (rand() & 0xFF);
    write_file(in_dir("random.bin"), big, SIZE);
    free(big);
    free(dham);
    ck_assert_int_eq(sh("'%s' tokenize -m '%s' -f '%s' > /dev/null 2> '%s'", mg_test_mg_bin(), model(),
                        in_dir("big.txt"), in_dir("err")), 0);
    const double per_byte = (double) children_peak_rss() / SIZE;
    if (!MG_TEST_SANITIZED) {
        ck_assert_msg(per_byte < 8.5, "tokenize -f: %.1f bytes of memory per byte of text", per_byte);
    }
    if (MG_TEST_SANITIZED) MG_TEST_SKIP("the ulimit -v case: a sanitizer's shadow memory cannot be mapped under it");
    struct mg_test_run r = mg_test_run_mg(dir, "ulimit -v 500000;", NULL, "tokenize -m '%s' -f '%s'", model(),
                                          in_dir("random.bin"));
    ck_assert_msg(r.status == 1, "exit %d: %.500s", r.status, r.err);
    ck_assert_msg(strstr(r.err, "random.bin is 20000000 bytes: tokenizing it may need up to") != NULL &&
                      strstr(r.err, "ulimit -v") != NULL, "%s", r.err);
    mg_test_run_free(&r);
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
    tcase_add_test(rivals, test_rival_bare_name_is_the_local_file);
    suite_add_tcase(s, rivals);

    TCase * outputs = tcase_create("outputs");
    tcase_set_timeout(outputs, 300);
    tcase_add_checked_fixture(outputs, setup, teardown);
    tcase_add_test(outputs, test_output_is_an_input);
    tcase_add_test(outputs, test_failed_run_keeps_old_output);
    tcase_add_test(outputs, test_killed_run_keeps_old_output);
    tcase_add_test(outputs, test_no_symlink_followed_in_output_dirs);
    tcase_add_test(outputs, test_output_dirs_checked_first);
    tcase_add_test(outputs, test_every_output_flag_spares_every_input);
    tcase_add_test(outputs, test_output_is_a_descriptor_or_a_redirect);
    tcase_add_test(outputs, test_two_outputs_on_one_file);
    tcase_add_test(outputs, test_stdout_write_error_fails);
    suite_add_tcase(s, outputs);

    TCase * sizes = tcase_create("sizes");
    tcase_set_timeout(sizes, 300);
    tcase_add_checked_fixture(sizes, setup, teardown);
    tcase_add_test(sizes, test_huge_context);
    suite_add_tcase(s, sizes);

    TCase * silent = tcase_create("silent");
    tcase_set_timeout(silent, 300);
    tcase_add_checked_fixture(silent, setup, teardown);
    tcase_add_test(silent, test_parallel_too_many_prompts);
    tcase_add_test(silent, test_parallel_full_context_keeps_text);
    tcase_add_test(silent, test_perplexity_invalid_bytes);
    tcase_add_test(silent, test_batched_bench_nothing_fits);
    tcase_add_test(silent, test_bench_unusable_reference_files);
    tcase_add_test(silent, test_chat_and_run_n);
    tcase_add_test(silent, test_bench_depth_warns);
    tcase_add_test(silent, test_mkmodel_checks_what_it_wrote);
    tcase_add_test(silent, test_kl_base_damaged_rows);
    tcase_add_test(silent, test_drawing_flags_only_where_drawn);
    tcase_add_test(silent, test_invalid_utf8_rule);
    tcase_add_test(silent, test_trace_json_bounded);
    tcase_add_test(silent, test_json_value_limit);
    tcase_add_test(silent, test_endless_input_is_bounded);
    tcase_add_test(silent, test_meaningless_counts_refused);
    suite_add_tcase(s, silent);

    // The rows a second probe left open (signals, long names, non-finite
    // logits, byte tokens, alignment, terminal escapes, silent limits).
    TCase * probe2 = tcase_create("probe2");
    tcase_set_timeout(probe2, 300);
    tcase_add_checked_fixture(probe2, setup, teardown);
    tcase_add_test(probe2, test_other_signals_and_long_names);
    tcase_add_test(probe2, test_non_finite_logits);
    tcase_add_test(probe2, test_missing_byte_token);
    tcase_add_test(probe2, test_misaligned_tensor_data);
    tcase_add_test(probe2, test_terminal_escapes);
    tcase_add_test(probe2, test_silent_limits);
    tcase_add_test(probe2, test_messages_name_flag_and_value);
    tcase_add_test(probe2, test_kv_cache_checked_against_memory);
    tcase_add_test(probe2, test_mkmodel_size_checked_first);
    tcase_add_test(probe2, test_probe_bench_tokenize_logits);
    tcase_add_test(probe2, test_probe_many_inputs_and_info);
    tcase_add_test(probe2, test_probe_flags_that_need_another);
    tcase_add_test(probe2, test_probe_free_space_checked_first);
    suite_add_tcase(s, probe2);

    TCase * left = tcase_create("leftovers");   // names quoted, chat's full context, --seed -1, tokenize's memory
    tcase_set_timeout(left, 300);
    tcase_add_checked_fixture(left, setup, teardown);
    tcase_add_test(left, test_names_quoted_in_messages);
    tcase_add_test(left, test_chat_unanswered_message_fails);
    tcase_add_test(left, test_seed_minus_one_is_random_and_printed);
    tcase_add_test(left, test_tokenize_memory_bounded);
    suite_add_tcase(s, left);

    TCase * probe3 = tcase_create("probe3");   // FIFOs and devices, drawings on a full disk, the seed, out of memory
    tcase_set_timeout(probe3, 300);
    tcase_add_checked_fixture(probe3, setup, teardown);
    tcase_add_test(probe3, test_fifo_inputs_do_not_hang);
    tcase_add_test(probe3, test_vocab_device_refused);
    tcase_add_test(probe3, test_drawing_write_failure_fails);
    tcase_add_test(probe3, test_seed_that_means_random_refused);
    tcase_add_test(probe3, test_race_flags_need_a_rival);
    tcase_add_test(probe3, test_closed_standard_descriptors);
    tcase_add_test(probe3, test_loose_values_refused);
    tcase_add_test(probe3, test_vocab_odd_values_refused);
    tcase_add_test(probe3, test_tokenizer_out_of_memory_is_an_error);
    suite_add_tcase(s, probe3);

    return s;
}
