// test_hostile.c - mg against input a hostile user would give it:
// invalid UTF-8, broken metadata, flags that are not numbers, outputs that
// are the input or a device. Each case is run as a user runs it (a child
// process): a clear message naming the file, key, flag or value, exit code 1
// (0 where the right answer is to go on, said so), and every input file
// byte-identical afterwards.
//
// The binary: $MG_BIN, else the mg of this build folder, else full/build/mg, run
// through harness.h's mg_test_run_mg (as test_cli.c).
#define _DEFAULT_SOURCE   // symlink, link, mkfifo
#include "harness.h"
#include "gguf.h"
#include "gguf_writer.h"
#include "unicode.h"
#include "vocab.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];   // a fresh directory per test (mg_test_make_dir)

static void setup(void) {
    mg_test_make_dir(dir, sizeof(dir), "hostile");
}

static void teardown(void) {
    mg_test_remove_dir(dir);
}

#define in_dir(name) mg_test_path_in(dir, name)

static void write_file(const char * path, const void * data, size_t size) {
    FILE * f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "cannot write %s", path);
    ck_assert_uint_eq(fwrite(data, 1, size, f), size);
    ck_assert_int_eq(fclose(f), 0);
}

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

// mg with the arguments (shell words), stdin from a file (or /dev/null); prefix
// is shell text run before (ulimit, trap), or "" (harness.h: mg_test_run_mg).
#define mg_with(prefix, stdin_path, ...) mg_test_run_mg(dir, prefix, stdin_path, __VA_ARGS__)
#define mg(...)                          mg_test_run_mg(dir, NULL, NULL, __VA_ARGS__)

// Exit code 1, nothing on stdout, one line on stderr with every fragment.
#define expect_error(f1, f2, ...) mg_test_expect_mg_error(dir, f1, f2, __VA_ARGS__)

static const char * model(void) {
    return mg_test_fixture("models/tiny-q4_k_m.gguf");
}

// ---------------------------------------------------------------------------
// Invalid UTF-8: each bad byte is U+FFFD, three byte tokens
// ---------------------------------------------------------------------------

// The bytes that the ids on stdout (one per line) stand for, by the vocabulary itself.
static size_t pieces_of(const struct mg_vocab * v, const char * ids_text, char * out, size_t cap, int * n_ids) {
    size_t n = 0;
    *n_ids = 0;
    for (const char * p = ids_text; *p;) {
        char * end;
        const long id = strtol(p, &end, 10);
        ck_assert_msg(end != p && *end == '\n', "not one id per line: %.200s", p);
        char piece[64];
        const int32_t k = mg_token_to_piece(v, (int32_t) id, piece, sizeof(piece), true);
        ck_assert_int_ge(k, 0);
        ck_assert_uint_le(n + (size_t) k, cap);
        memcpy(out + n, piece, (size_t) k);
        n += (size_t) k;
        (*n_ids)++;
        p = end + 1;
    }
    return n;
}

static struct mg_vocab * fixture_vocab(void) {
    struct mg_gguf * g = mg_gguf_open(model());
    ck_assert_ptr_nonnull(g);
    struct mg_vocab * v = mg_vocab_load(g);
    ck_assert_ptr_nonnull(v);
    mg_gguf_close(g);
    return v;
}

START_TEST(test_tokenize_invalid_utf8) {
    const struct digest before = digest_of(model());
    // llama.cpp tokenizes \xff\xff as two U+FFFD (EF BF BD): their tokens, exit 0.
    struct mg_test_run r = mg("tokenize -m '%s' -p \"$(printf '\\377\\377')\"", model());
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    struct mg_vocab * v = fixture_vocab();
    char bytes[64];
    int  n_ids;
    const size_t n = pieces_of(v, r.out, bytes, sizeof(bytes), &n_ids);
    ck_assert_int_ge(n_ids, 2);
    ck_assert_msg(n == 6 && memcmp(bytes, "\xEF\xBF\xBD\xEF\xBF\xBD", 6) == 0, "the tokens spell %zu other bytes", n);
    mg_test_run_free(&r);

    // 3000 invalid bytes: 9000 bytes of U+FFFD, more tokens than bytes in the text.
    char * text = malloc(3000);
    memset(text, 0xFF, 3000);
    write_file(in_dir("ff.txt"), text, 3000);
    free(text);
    r = mg("tokenize -m '%s' -f '%s'", model(), in_dir("ff.txt"));
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    char * big = malloc(9000);
    const size_t nb = pieces_of(v, r.out, big, 9000, &n_ids);
    ck_assert_msg(n_ids > 3000 + 2, "%d tokens: fewer than the bytes, were they cut?", n_ids);
    ck_assert_uint_eq(nb, 9000);
    for (size_t i = 0; i < nb; i += 3) ck_assert_int_eq(memcmp(big + i, "\xEF\xBF\xBD", 3), 0);
    free(big);
    mg_test_run_free(&r);
    mg_vocab_free(v);
    expect_unchanged(model(), before);
}
END_TEST

START_TEST(test_run_logits_invalid_utf8) {
    struct mg_test_run r = mg("logits -m '%s' -p \"$(printf '\\377\\377')\" --top 1", model());
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    ck_assert_msg(strstr(r.out, "tokens (") != NULL && strstr(r.err, "empty") == NULL, "%s %s", r.out, r.err);
    mg_test_run_free(&r);
    r = mg("run -m '%s' -p \"$(printf '\\377\\377')\" -n 2 --temp 0", model());
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    ck_assert_msg(strstr(r.err, "empty") == NULL, "%s", r.err);
    mg_test_run_free(&r);
}
END_TEST

// Two answers to two messages, the first of 40 invalid bytes (it crashed).
START_TEST(test_chat_invalid_utf8) {
    const struct digest before = digest_of(model());
    char msgs[64];
    memset(msgs, 0xFF, 40);
    memcpy(msgs + 40, "\nhello\n", 7);
    write_file(in_dir("chat.txt"), msgs, 47);
    struct mg_test_run r = mg_with("", in_dir("chat.txt"), "chat -m '%s' -n 3 --temp 0 --system \"$(printf '\\377\\377\\377')\"", model());
    ck_assert_msg(r.status == 0, "exit %d: %.1500s", r.status, r.err);
    ck_assert_msg(mg_test_count_lines(r.out) == 2, "expected two answers, got: %s", r.out);
    mg_test_run_free(&r);
    expect_unchanged(model(), before);
}
END_TEST

// ---------------------------------------------------------------------------
// Broken metadata: each refused by key and value (or warned about, as llama.cpp)
// ---------------------------------------------------------------------------

enum edit_kind { EDIT_F32, EDIT_U32, EDIT_TOKEN_TYPE, EDIT_MERGE };

// A copy of the fixture model with one key changed (every tensor kept).
static const char * variant(const char * name, const char * key, enum edit_kind kind, double value) {
    struct mg_gguf * g = mg_gguf_open(model());
    ck_assert_ptr_nonnull(g);
    struct mg_gguf_writer * w = mg_gguf_writer_new();
    const char * skip[] = {key, NULL};
    ck_assert(mg_gguf_writer_copy_kvs(w, g, skip));
    const int64_t ki = mg_gguf_find_key(g, key);
    if (kind == EDIT_F32) ck_assert(mg_gguf_writer_set_f32(w, key, (float) value));
    if (kind == EDIT_U32) ck_assert(mg_gguf_writer_set_u32(w, key, (uint32_t) value));
    if (kind == EDIT_TOKEN_TYPE) {   // token 5 gets type value
        const uint64_t n = mg_gguf_arr_n(g, ki);
        int32_t * types = malloc(n * sizeof(int32_t));
        memcpy(types, mg_gguf_arr_data(g, ki), n * sizeof(int32_t));
        types[5] = (int32_t) value;
        ck_assert(mg_gguf_writer_set_arr_data(w, key, MG_GGUF_TYPE_INT32, types, n));
        free(types);
    }
    if (kind == EDIT_MERGE) {   // merge 3 loses its space
        const uint64_t n = mg_gguf_arr_n(g, ki);
        const char ** strs = malloc(n * sizeof(char *));
        size_t * lens = malloc(n * sizeof(size_t));
        for (uint64_t j = 0; j < n; j++) {
            uint64_t len;
            strs[j] = mg_gguf_arr_str(g, ki, j, &len);
            lens[j] = (size_t) len;
        }
        strs[3] = "nospace";
        lens[3] = 7;
        ck_assert(mg_gguf_writer_set_arr_str(w, key, strs, lens, n));
        free(strs);
        free(lens);
    }
    for (int64_t i = 0; i < mg_gguf_n_tensors(g); i++) {
        const struct mg_gguf_tensor_info * t = mg_gguf_tensor(g, i);
        ck_assert(mg_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data));
    }
    const char * path = in_dir(name);
    ck_assert_msg(mg_gguf_writer_write(w, path), "%s", mg_last_error());
    mg_gguf_writer_free(w);
    mg_gguf_close(g);
    return path;
}

static void expect_load_error(const char * path, const char * f1, const char * f2) {
    const struct digest before = digest_of(path);
    expect_error(f1, f2, "run -m '%s' -p hi -n 1", path);
    expect_unchanged(path, before);
}

START_TEST(test_bad_hparams) {
    const char * eps = "qwen3.attention.layer_norm_rms_epsilon", * base = "qwen3.rope.freq_base";
    expect_load_error(variant("eps-nan.gguf", eps, EDIT_F32, (double) NAN), eps, "nan");
    expect_load_error(variant("eps-neg.gguf", eps, EDIT_F32, -1e-6), eps, "-1e-06");
    expect_load_error(variant("base-nan.gguf", base, EDIT_F32, (double) NAN), base, "nan");
    expect_load_error(variant("base-0.gguf", base, EDIT_F32, 0.0), base, "= 0 ");
    expect_load_error(variant("base-neg.gguf", base, EDIT_F32, -10000.0), base, "-10000");
}
END_TEST

// block_count 2^24 in a file of 2 layers: refused by the tensor count, before
// anything is allocated for 2^24 layers.
START_TEST(test_block_count_before_allocation) {
    const char * path = variant("layers.gguf", "qwen3.block_count", EDIT_U32, 16777216.0);
    const struct digest before = digest_of(path);
    struct mg_test_run r = mg("run -m '%s' -p hi -n 1", path);   // it said "cannot allocate a context of 59055801280 bytes"
    ck_assert_msg(r.status == 1, "exit %d: %s", r.status, r.err);
    ck_assert_msg(strstr(r.err, "qwen3.block_count") && strstr(r.err, "16777216") && strstr(r.err, "tensors"), "%s",
                  r.err);
    mg_test_run_free(&r);
    expect_unchanged(path, before);
}
END_TEST

START_TEST(test_bad_vocab) {
    expect_load_error(variant("type.gguf", "tokenizer.ggml.token_type", EDIT_TOKEN_TYPE, 7.0), "token_type[5]", "= 7");
    expect_load_error(variant("type-neg.gguf", "tokenizer.ggml.token_type", EDIT_TOKEN_TYPE, -1.0), "token_type[5]",
                      "= -1");
    expect_load_error(variant("merge.gguf", "tokenizer.ggml.merges", EDIT_MERGE, 0), "merges[3]", "'nospace'");
}
END_TEST

// Out-of-range special ids: llama.cpp warns ("bad special token") and keeps
// the default; mg does the same, and says so with the key and the value.
START_TEST(test_special_ids_out_of_range) {
    static const double ids[] = {6400.0, 2147483648.0, 4294967295.0};
    static const char * const texts[] = {"= 6400 ", "= 2147483648 ", "= 4294967295 "};
    for (int i = 0; i < 3; i++) {
        char name[32];
        snprintf(name, sizeof(name), "bos%d.gguf", i);
        const char * path = variant(name, "tokenizer.ggml.bos_token_id", EDIT_U32, ids[i]);
        struct mg_test_run r = mg("tokenize -m '%s' -p hi", path);
        ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
        ck_assert_msg(strstr(r.err, "warning") && strstr(r.err, "tokenizer.ggml.bos_token_id") &&
                      strstr(r.err, texts[i]), "no warning naming the key and %s: %s", texts[i], r.err);
        mg_test_run_free(&r);
    }
}
END_TEST

// ---------------------------------------------------------------------------
// Flags
// ---------------------------------------------------------------------------

START_TEST(test_sampling_flags) {
    static const char * const bad[][3] = {
        {"--temp", "nan", "finite"},           {"--top-p", "nan", "finite"},   {"--min-p", "nan", "finite"},
        {"--repeat-penalty", "nan", "finite"}, {"--repeat-penalty", "inf", "finite"},
        {"--temp", "-1", ">= 0"},              {"--top-p", "0", "(0, 1]"},     {"--min-p", "1", "[0, 1)"},
        {"--temp", "1e39", "finite"},          {"--repeat-penalty", "0", "> 0"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        expect_error(bad[i][0], bad[i][2], "run -m '%s' -p hi -n 1 %s %s", model(), bad[i][0], bad[i][1]);
    }
    // --temp 0 is greedy: accepted.
    struct mg_test_run r = mg("run -m '%s' -p hi -n 1 --temp 0", model());
    ck_assert_int_eq(r.status, 0);
    mg_test_run_free(&r);
}
END_TEST

START_TEST(test_context_flags) {
    expect_error("-c 2147483648", "too large, at most 2147483647", "run -m '%s' -p hi -c 2147483648", model());
    // A warning, then the error. (Under ASan, a failed malloc aborts unless told to return NULL.)
    struct mg_test_run r = mg_with("export ASAN_OPTIONS=allocator_may_return_null=1;", NULL, "run -m '%s' -p hi -c 100000000 -n 1",
                           model());
    ck_assert_msg(r.status == 1 && r.out_len == 0, "exit %d", r.status);
    const char * last = strstr(r.err, "\nmg run: ");
    ck_assert_msg(last && strstr(last, "KV cache") && strstr(last, "-c") && strstr(last, "MiB"), "%s", r.err);
    mg_test_run_free(&r);
    // Beyond the trained context (512 here): a warning, as llama.cpp, and the run goes on.
    r = mg("run -m '%s' -p hi -n 1 -c 1024 --temp 0", model());
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    ck_assert_msg(strstr(r.err, "warning") && strstr(r.err, "-c 1024") && strstr(r.err, "512"), "%s", r.err);
    mg_test_run_free(&r);
}
END_TEST

START_TEST(test_unclear_messages) {
    expect_error(dir, "is a directory", "run -m '%s' -f '%s' -n 1", model(), dir);
    expect_error("--dot /proc/nope", "no such directory", "run -m '%s' -p hi -n 1 --dot /proc/nope", model());
    write_file(in_dir("plain"), "x", 1);
    expect_error("--dot", "not a directory", "run -m '%s' -p hi -n 1 --dot '%s'", model(), in_dir("plain"));
    // logits -o the model itself would truncate the file it reads.
    const struct digest before = digest_of(model());
    expect_error("same file", NULL, "logits -m '%s' -p hi -o '%s'", model(), model());
    expect_unchanged(model(), before);
}
END_TEST

// ---------------------------------------------------------------------------
// mg quantize never destroys a file
// ---------------------------------------------------------------------------

static const char * copy_of_model(const char * name) {
    size_t size;
    void * b = mg_test_read_file(model(), &size);
    ck_assert_ptr_nonnull(b);
    const char * path = in_dir(name);
    write_file(path, b, size);
    free(b);
    return path;
}

START_TEST(test_quantize_same_file) {
    const char * in = copy_of_model("in.gguf");
    const struct digest before = digest_of(in);
    ck_assert_int_eq(symlink(in, in_dir("link.gguf")), 0);
    ck_assert_int_eq(link(in, in_dir("hard.gguf")), 0);
    expect_error("same file", NULL, "quantize '%s' '%s' q8_0", in, in);
    expect_error("same file", NULL, "quantize '%s' '%s' q8_0", in, in_dir("link.gguf"));
    expect_error("same file", NULL, "quantize '%s' '%s' q8_0", in, in_dir("hard.gguf"));
    expect_error("same file", NULL, "quantize '%s' '%s' q8_0", in_dir("link.gguf"), in);
    expect_unchanged(in, before);
}
END_TEST

START_TEST(test_quantize_not_regular) {
    const char * in = copy_of_model("in.gguf");
    const struct digest before = digest_of(in);
    ck_assert_int_eq(mkdir(in_dir("sub"), 0755), 0);
    ck_assert_int_eq(mkfifo(in_dir("fifo"), 0644), 0);
    expect_error("is a directory", NULL, "quantize '%s' '%s' q8_0", in, in_dir("sub"));
    expect_error("a fifo", NULL, "quantize '%s' '%s' q8_0", in, in_dir("fifo"));
    expect_error("/dev/null", "character device", "quantize '%s' /dev/null q8_0", in);
    struct stat st;
    ck_assert(stat("/dev/null", &st) == 0 && S_ISCHR(st.st_mode));
    ck_assert(stat(in_dir("fifo"), &st) == 0 && S_ISFIFO(st.st_mode));
    expect_error("directory", "does not exist", "quantize '%s' '%s' q8_0", in, in_dir("nope/out.gguf"));
    // mkmodel writes the same way: the same checks, before any work.
    expect_error("mg mkmodel", "character device", "mkmodel --preset tiny -o /dev/null");
    expect_error("mg mkmodel", "a fifo", "mkmodel --preset tiny -o '%s'", in_dir("fifo"));
    expect_error("is not a directory", NULL, "quantize '%s' '%s' q8_0", in, in_dir("in.gguf/out.gguf"));
    // A symlink to nowhere: refused, the link left as it is.
    ck_assert_int_eq(symlink(in_dir("missing"), in_dir("dangling")), 0);
    expect_error("symlink", NULL, "quantize '%s' '%s' q8_0", in, in_dir("dangling"));
    ck_assert(lstat(in_dir("dangling"), &st) == 0 && S_ISLNK(st.st_mode));
    expect_unchanged(in, before);
}
END_TEST

// A symlink as OUT is written through: the link stays, its target gets the file.
START_TEST(test_quantize_symlink_output) {
    const char * in = copy_of_model("in.gguf");
    const struct digest before = digest_of(in);
    write_file(in_dir("target.gguf"), "old", 3);
    ck_assert_int_eq(symlink("target.gguf", in_dir("out.gguf")), 0);
    struct mg_test_run r = mg("quantize --allow-requantize '%s' '%s' q8_0", in, in_dir("out.gguf"));
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    mg_test_run_free(&r);
    struct stat st;
    ck_assert(lstat(in_dir("out.gguf"), &st) == 0 && S_ISLNK(st.st_mode));
    ck_assert(lstat(in_dir("target.gguf"), &st) == 0 && S_ISREG(st.st_mode));
    struct mg_gguf * g = mg_gguf_open(in_dir("target.gguf"));
    ck_assert_msg(g != NULL, "%s", mg_last_error());
    struct mg_gguf * orig = mg_gguf_open(in);
    ck_assert_int_eq(mg_gguf_n_tensors(g), mg_gguf_n_tensors(orig));
    mg_gguf_close(g);
    mg_gguf_close(orig);
    ck_assert_int_eq(mg_test_count_temp_files(in_dir("target.gguf")), 0);
    expect_unchanged(in, before);
}
END_TEST

// A write that fails (the file size limit, EFBIG) is reported, and leaves
// neither the output nor its temporary file behind.
START_TEST(test_quantize_write_error) {
    const char * in = copy_of_model("in.gguf");
    const struct digest before = digest_of(in);
    struct mg_test_run r = mg_with("ulimit -f 512; trap '' XFSZ;", NULL, "quantize --allow-requantize '%s' '%s' q8_0", in, in_dir("out.gguf"));
    ck_assert_msg(r.status == 1, "exit %d: %s", r.status, r.err);
    ck_assert_msg(strstr(r.err, "out.gguf") != NULL, "%s", r.err);
    ck_assert_int_ne(access(in_dir("out.gguf"), F_OK), 0);
    ck_assert_int_eq(mg_test_count_temp_files(in_dir("out.gguf")), 0);
    mg_test_run_free(&r);
    expect_unchanged(in, before);
}
END_TEST

// ---------------------------------------------------------------------------
// Chat: a turn that does not fit is said so; the session goes on, the exit status is 1
// ---------------------------------------------------------------------------

START_TEST(test_chat_overflow) {
    // A message far longer than 64 positions, then a short one.
    char msgs[2048] = "";
    for (int i = 0; i < 100; i++) strcat(msgs, "word ");
    strcat(msgs, "\nhi\n");
    write_file(in_dir("chat.txt"), msgs, strlen(msgs));
    struct mg_test_run r = mg_with("", in_dir("chat.txt"), "chat -m '%s' -c 64 -n 4 --temp 0", model());
    ck_assert_msg(r.status == 1, "exit %d (1: a message was not answered): %s", r.status, r.err);
    ck_assert_msg(strstr(r.err, "not answered") && strstr(r.err, "-c 64"), "%s", r.err);
    ck_assert_msg(mg_test_count_lines(r.out) == 1 && r.out_len > 1, "the short message got no answer: '%s'", r.out);
    mg_test_run_free(&r);

    // Answers long enough to fill 64 positions in three turns: cut, said so, and a new conversation.
    write_file(in_dir("chat2.txt"), "hello\nhello\nhello\nhello\n", 24);
    r = mg_with("", in_dir("chat2.txt"), "chat -m '%s' -c 64 -n 30 --temp 0", model());
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    ck_assert_msg(strstr(r.err, "new conversation") != NULL, "the context filled up without a word: %s", r.err);
    ck_assert_msg(mg_test_count_lines(r.out) == 4, "four messages, four answers: %s", r.out);
    mg_test_run_free(&r);
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("full_hostile");
    TCase * utf8 = MG_TCASE(s, "invalid_utf8", test_tokenize_invalid_utf8, test_run_logits_invalid_utf8,
                               test_chat_invalid_utf8);
    tcase_add_checked_fixture(utf8, setup, teardown);

    TCase * meta = MG_TCASE(s, "metadata", test_bad_hparams, test_block_count_before_allocation, test_bad_vocab,
                               test_special_ids_out_of_range);
    tcase_add_checked_fixture(meta, setup, teardown);

    TCase * flags = MG_TCASE(s, "flags", test_sampling_flags, test_context_flags, test_unclear_messages);
    tcase_add_checked_fixture(flags, setup, teardown);

    TCase * quant = MG_TCASE(s, "quantize", test_quantize_same_file, test_quantize_not_regular,
                                test_quantize_symlink_output, test_quantize_write_error);
    tcase_add_checked_fixture(quant, setup, teardown);

    TCase * chat = MG_TCASE(s, "chat", test_chat_overflow);
    tcase_add_checked_fixture(chat, setup, teardown);
    return s;
}
