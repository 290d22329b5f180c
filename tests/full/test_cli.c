// test_cli.c - the mg command line, run as a user runs it: a child process,
// its exit status, its stdout and stderr. What it prints is compared with the
// fixtures (token ids, logits, greedy continuations, tensor counts read from
// the files' own headers), never with itself.
//
// The binary: $MG_BIN if set, else the mg next to this test's build folder
// ($(BUILD)/tests/full_test_cli -> $(BUILD)/mg, so `make asan` tests the ASan
// build of mg), else full/build/mg; the runs go through harness.h's
// mg_test_run_mg, which test_hostile.c and test_perplexity.c share.
#define _POSIX_C_SOURCE 200809L   // chmod, mkdir, access
#include "harness.h"
#include "gguf.h"
#include "model.h"
#include "session.h"
#include "vocab.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { N_VOCAB = 6400, N_FOX = 18, N_GREEDY = 32 };

static const char * const models[] = {"tiny-f32", "tiny-q8_0", "tiny-q4_k_m"};
static const float tol_f32kv[] = {1e-3f, 5e-3f, 2e-2f};   // fixtures/README.md
enum { N_MODELS = sizeof(models) / sizeof(models[0]) };

// fixtures/README.md: the fox prompt's ids.
static const int32_t fox_ids[N_FOX] = {750, 5658, 363, 2079, 113, 341, 2979, 1315, 457,
                                       3385, 2141, 309, 3090, 125, 124, 1041, 106, 49};

// ---------------------------------------------------------------------------
// Running mg
// ---------------------------------------------------------------------------

static char dir[64];   // a fresh directory per test, for outputs (mg_test_make_dir)

static void setup(void) {
    mg_test_make_dir(dir, sizeof(dir), "cli");
}

static void teardown(void) {
    mg_test_remove_dir(dir);
}

// mg with the arguments fmt (shell words: quote paths with ''), no stdin (harness.h).
#define mg(...) mg_test_run_mg(dir, NULL, NULL, __VA_ARGS__)

// A clear error: exit status 1, nothing on stdout, one line on stderr that
// names the problem (every non-NULL fragment).
#define expect_error(fragment1, fragment2, ...) mg_test_expect_mg_error(dir, fragment1, fragment2, __VA_ARGS__)

// The first line of text that contains key, or NULL.
static const char * line_with(const char * text, const char * key) {
    const char * p = strstr(text, key);
    if (p == NULL) return NULL;
    while (p > text && p[-1] != '\n') p--;
    return p;
}

// The little-endian u64 at offset off of a file (GGUF header: magic, u32
// version, then the tensor count at byte 8 and the key count at byte 16).
static uint64_t file_u64(const char * path, long off) {
    FILE * f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    uint8_t b[8];
    ck_assert_int_eq(fseek(f, off, SEEK_SET), 0);
    ck_assert_uint_eq(fread(b, 1, 8, f), 8);
    fclose(f);
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | b[i];
    return v;
}

static float * read_floats(const char * path, size_t n) {
    size_t size = 0;
    float * x = mg_test_read_file(path, &size);
    ck_assert_msg(x != NULL, "cannot read %s", path);
    ck_assert_uint_eq(size, n * sizeof(float));
    return x;
}

static float max_abs_diff(const float * a, const float * b, size_t n) {
    float worst = 0.0f;
    for (size_t i = 0; i < n; i++) {
        const float d = fabsf(a[i] - b[i]);
        if (!(d <= worst)) worst = d;
    }
    return worst;
}

// ---------------------------------------------------------------------------
// Help and errors
// ---------------------------------------------------------------------------

START_TEST(test_help) {
    struct mg_test_run r = mg("--help");
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "usage: mg"));
    static const char * const commands[] = {"run", "chat", "info", "tokenize", "logits", "mkmodel", "quantize",
                                            "bench"};
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
        char listed[32];
        snprintf(listed, sizeof(listed), "\n  %s ", commands[i]);
        ck_assert_msg(strstr(r.out, listed) != NULL, "mg --help does not list %s", commands[i]);

        struct mg_test_run h = mg("%s --help", commands[i]);
        char usage[64];
        snprintf(usage, sizeof(usage), "usage: mg %s", commands[i]);
        ck_assert_msg(h.status == 0, "mg %s --help: exit %d", commands[i], h.status);
        ck_assert_msg(strncmp(h.out, usage, strlen(usage)) == 0, "mg %s --help: %s", commands[i], h.out);
        mg_test_run_free(&h);
    }
    mg_test_run_free(&r);

    r = mg("run --help");
    static const char * const flags[] = {"--model", "--prompt", "--n-predict", "--temp", "--ctx-size", "--kv-type",
                                         "--threads", "--seed"};
    for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
        ck_assert_msg(strstr(r.out, flags[i]) != NULL, "mg run --help does not list %s", flags[i]);
    }
    mg_test_run_free(&r);
}
END_TEST

START_TEST(test_no_or_unknown_command) {
    struct mg_test_run r = mg("%s", "");   // no command at all
    ck_assert_int_gt(r.status, 0);
    ck_assert_ptr_nonnull(strstr(r.err, "usage: mg"));
    mg_test_run_free(&r);

    // The first line names the problem; the usage follows it.
    r = mg("frobnicate");
    ck_assert_int_gt(r.status, 0);
    ck_assert_int_eq(r.out_len, 0);
    const char * nl = strchr(r.err, '\n');
    ck_assert_ptr_nonnull(nl);
    const char * name = strstr(r.err, "'frobnicate'");
    ck_assert_msg(name != NULL && name < nl, "the first line does not name the command: %.1500s", r.err);
    mg_test_run_free(&r);
}
END_TEST

START_TEST(test_bad_options) {
    const char * model = mg_test_fixture("models/tiny-f32.gguf");
    expect_error("'--frobnicate'", NULL, "run --frobnicate");
    expect_error("'--frobnicate'", NULL, "info --frobnicate '%s'", model);
    expect_error("-m", "value", "run -m");
    expect_error("--temp", "value", "run -m '%s' -p hi --temp", model);
    expect_error("'abc'", NULL, "run -m '%s' -p hi -n abc", model);
    expect_error("'12x'", NULL, "run -m '%s' -p hi -t 12x", model);
    expect_error("'q4'", NULL, "run -m '%s' -p hi --kv-type q4", model);
    expect_error("-m", NULL, "run -p hi");   // no model at all
}
END_TEST

START_TEST(test_bad_model_files) {
    const char * missing = mg_test_path_in(dir, "missing.gguf");
    expect_error(missing, NULL, "run -m '%s' -p hi", missing);
    expect_error(missing, NULL, "info '%s'", missing);

    // The first 100000 bytes of a real model: metadata complete, data cut off.
    size_t size;
    char * bytes = mg_test_read_file(mg_test_fixture("models/tiny-f32.gguf"), &size);
    ck_assert_ptr_nonnull(bytes);
    const char * cut = mg_test_path_in(dir, "truncated.gguf");
    FILE * f = fopen(cut, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(bytes, 1, 100000, f), 100000);
    fclose(f);
    free(bytes);
    expect_error(cut, NULL, "run -m '%s' -p hi", cut);
    expect_error(cut, NULL, "info '%s'", cut);
    expect_error(cut, NULL, "tokenize -m '%s' -p hi", cut);
}
END_TEST

// fixtures/prompts/fox.txt is 18 tokens: it does not fit in 16 positions.
START_TEST(test_prompt_longer_than_context) {
    expect_error("18", "16", "run -m '%s' -c 16 -f '%s' -n 4", mg_test_fixture("models/tiny-f32.gguf"),
                          mg_test_fixture("prompts/fox.txt"));
}
END_TEST

// ---------------------------------------------------------------------------
// mg info
// ---------------------------------------------------------------------------

// The tensor and key counts agree with the header's (read here, bytes 8 and 16).
static void check_info_counts(const char * path) {
    struct mg_test_run r = mg("info '%s'", path);
    ck_assert_msg(r.status == 0, "mg info %s: exit status %d: %.1500s", path, r.status, r.err);
    char want[64];
    snprintf(want, sizeof(want), "\ntensors: %llu\n", (unsigned long long) file_u64(path, 8));
    ck_assert_msg(strstr(r.out, want) != NULL, "mg info %s: '%s' not in the output", path, want + 1);
    snprintf(want, sizeof(want), "\nmetadata: %llu keys\n", (unsigned long long) file_u64(path, 16));
    ck_assert_msg(strstr(r.out, want) != NULL, "mg info %s: '%s' not in the output", path, want + 1);
    mg_test_run_free(&r);
}

START_TEST(test_info_fixtures) {
    // fixtures/README.md: token_embd is F32, Q8_0, Q6_K; attn_q F32, Q8_0, Q4_K.
    static const char * const embd_type[] = {" f32 ", " q8_0 ", " q6_K "};
    static const char * const attn_q_type[] = {" f32 ", " q8_0 ", " q4_K "};
    for (int i = 0; i < N_MODELS; i++) {
        char rel[64];
        snprintf(rel, sizeof(rel), "models/%s.gguf", models[i]);
        const char * path = mg_test_fixture(rel);
        check_info_counts(path);
        struct mg_test_run r = mg("info '%s'", path);
        // 2 layers of 11 tensors, token_embd and output_norm; tied: no output.weight.
        ck_assert_ptr_nonnull(strstr(r.out, "\ntensors: 24\n"));
        const char * embd = line_with(r.out, "token_embd.weight");
        const char * wq   = line_with(r.out, "blk.1.attn_q.weight");
        ck_assert_ptr_nonnull(embd);
        ck_assert_ptr_nonnull(wq);
        const char * embd_end = strchr(embd, '\n'), * wq_end = strchr(wq, '\n');
        const char * t1 = strstr(embd, embd_type[i]), * t2 = strstr(wq, attn_q_type[i]);
        ck_assert_msg(t1 != NULL && t1 < embd_end, "%s: token_embd is not%s", models[i], embd_type[i]);
        ck_assert_msg(t2 != NULL && t2 < wq_end, "%s: attn_q is not%s", models[i], attn_q_type[i]);
        ck_assert_ptr_null(strstr(r.out, " output.weight "));
        ck_assert_ptr_nonnull(strstr(r.out, "general.architecture"));
        mg_test_run_free(&r);
    }
    check_info_counts(mg_test_fixture("vocab/ggml-vocab-gpt-2.gguf"));
    struct mg_test_run r = mg("info '%s'", mg_test_fixture("vocab/ggml-vocab-gpt-2.gguf"));
    ck_assert_ptr_nonnull(strstr(r.out, "\ntensors: 0\n"));
    ck_assert_ptr_nonnull(strstr(r.out, "[50257 strings]"));   // fixtures/README.md: 50257 tokens
    mg_test_run_free(&r);
}
END_TEST

// ---------------------------------------------------------------------------
// mg tokenize, mg logits, mg run against the fixtures
// ---------------------------------------------------------------------------

START_TEST(test_tokenize_fox) {
    const char * model = mg_test_fixture("models/tiny-q8_0.gguf");
    struct mg_test_run r = mg("tokenize -m '%s' -f '%s'", model, mg_test_fixture("prompts/fox.txt"));
    ck_assert_int_eq(r.status, 0);
    ck_assert_int_eq(mg_test_count_lines(r.out), N_FOX);
    const char * p = r.out;
    for (int i = 0; i < N_FOX; i++) {
        char * end;
        ck_assert_int_eq(strtol(p, &end, 10), fox_ids[i]);
        ck_assert(*end == '\n');
        p = end + 1;
    }
    mg_test_run_free(&r);

    r = mg("tokenize -m '%s' -f '%s' --json", model, mg_test_fixture("prompts/fox.txt"));
    ck_assert_int_eq(r.status, 0);
    ck_assert_int_eq(r.out[0], '[');
    // The numbers between '[' and ']'.
    int n = 0;
    for (const char * q = r.out + 1; *q && *q != ']';) {
        char * end;
        const long v = strtol(q, &end, 10);
        if (end == q) {
            q++;
            continue;
        }
        if (n < N_FOX) ck_assert_int_eq(v, fox_ids[n]);
        n++;
        q = end;
    }
    ck_assert_int_eq(n, N_FOX);
    ck_assert_ptr_nonnull(strchr(r.out, ']'));
    mg_test_run_free(&r);
}
END_TEST

// llama.cpp's tools parse special tokens written in a prompt by default
// (llama-tokenize, llama-simple, llama-completion): so do mg tokenize and
// mg logits, and --no-special turns it off. In the fixtures' vocabulary
// <|im_start|> is id 1 and <|im_end|> id 2 (fixtures/README.md).
START_TEST(test_special_tokens_default) {
    const char * model = mg_test_fixture("models/tiny-q8_0.gguf");
    const char * chat  = "<|im_start|>user\nhi<|im_end|>";
    struct mg_test_run r = mg("tokenize -m '%s' -p '%s'", model, chat);
    ck_assert_int_eq(r.status, 0);
    ck_assert_msg(strncmp(r.out, "1\n", 2) == 0, "the prompt does not start with <|im_start|> (1):\n%s", r.out);
    ck_assert_msg(strstr(r.out, "\n2\n") != NULL, "no <|im_end|> (2) in:\n%s", r.out);
    const int n_parsed = mg_test_count_lines(r.out);
    mg_test_run_free(&r);

    r = mg("tokenize -m '%s' -p '%s' --no-special", model, chat);
    ck_assert_int_eq(r.status, 0);
    ck_assert_msg(strncmp(r.out, "1\n", 2) != 0 && strstr(r.out, "\n2\n") == NULL && strstr(r.out, "\n1\n") == NULL,
                  "--no-special still gives the special ids:\n%s", r.out);
    ck_assert_int_gt(mg_test_count_lines(r.out), n_parsed);   // "<|im_start|>" as text is several tokens
    mg_test_run_free(&r);

    r = mg("logits -m '%s' -p '%s' -t 1 --top 1", model, chat);
    ck_assert_msg(r.status == 0, "exit status %d: %.1500s", r.status, r.err);
    char want[32];
    snprintf(want, sizeof(want), "tokens (%d): 1 ", n_parsed);
    ck_assert_msg(strstr(r.out, want) != NULL, "mg logits did not parse the special tokens:\n%.500s", r.out);
    mg_test_run_free(&r);
    r = mg("logits -m '%s' -p '%s' -t 1 --top 1 --no-special", model, chat);
    ck_assert_int_eq(r.status, 0);
    ck_assert_msg(strstr(r.out, "tokens (") != NULL && strstr(r.out, want) == NULL, "%.500s", r.out);
    mg_test_run_free(&r);
}
END_TEST

// mg logits writes what mg_decode computes (the same settings in this
// process give the same bits) and what the reference computed (within the
// README's tolerance).
START_TEST(test_logits_file) {
    const char * model = models[_i];
    char rel[128];
    snprintf(rel, sizeof(rel), "models/%s.gguf", model);
    const char * out = mg_test_path_in(dir, "last.bin");
    struct mg_test_run r = mg("logits -m '%s' -f '%s' --kv-type f32 -t 1 -o '%s'", mg_test_fixture(rel), mg_test_fixture("prompts/fox.txt"),
                      out);
    ck_assert_msg(r.status == 0, "exit status %d (-1: a crash): %.1500s", r.status, r.err);
    mg_test_run_free(&r);
    float * written = read_floats(out, N_VOCAB);

    snprintf(rel, sizeof(rel), "golden/%s/fox.f32kv.logits.bin", model);
    float * golden = read_floats(mg_test_fixture(rel), N_VOCAB);
    const float d = max_abs_diff(written, golden, N_VOCAB);
    ck_assert_msg(d <= tol_f32kv[_i], "%s: mg logits is %g from the golden", model, (double) d);

    snprintf(rel, sizeof(rel), "models/%s.gguf", model);
    struct mg_model * m = mg_model_load_from_file(mg_test_fixture(rel), mg_model_default_params());
    ck_assert_ptr_nonnull(m);
    struct mg_session_params p = mg_session_default_params();
    p.n_threads = 1;
    p.kv_type   = MG_TYPE_F32;
    struct mg_session * s = mg_session_new(m, p);
    ck_assert(mg_decode(s, fox_ids, N_FOX, false));
    ck_assert_msg(memcmp(mg_get_logits(s), written, N_VOCAB * sizeof(float)) == 0,
                  "%s: mg logits wrote other floats than mg_decode computes (max |diff| %g)", model,
                  (double) max_abs_diff(mg_get_logits(s), written, N_VOCAB));
    mg_session_free(s);
    mg_model_free(m);
    free(written);
    free(golden);
}
END_TEST

START_TEST(test_logits_all) {
    const char * out = mg_test_path_in(dir, "all.bin");
    struct mg_test_run r = mg("logits -m '%s' -f '%s' --kv-type f32 --all -t 2 -o '%s'", mg_test_fixture("models/tiny-f32.gguf"),
                      mg_test_fixture("prompts/fox.txt"), out);
    ck_assert_msg(r.status == 0, "exit status %d (-1: a crash): %.1500s", r.status, r.err);
    mg_test_run_free(&r);
    float * written = read_floats(out, (size_t) N_FOX * N_VOCAB);
    float * golden  = read_floats(mg_test_fixture("golden/tiny-f32/fox.f32kv.all_logits.bin"), (size_t) N_FOX * N_VOCAB);
    for (int pos = 0; pos < N_FOX; pos++) {
        const float d = max_abs_diff(written + (size_t) pos * N_VOCAB, golden + (size_t) pos * N_VOCAB, N_VOCAB);
        ck_assert_msg(d <= tol_f32kv[0], "position %d: %g from the golden", pos, (double) d);
    }
    free(written);
    free(golden);
}
END_TEST

// The continuation mg run prints is the reference's greedy one, up to the
// first near tie (fixtures/README.md), as text: the prompt, then the pieces.
START_TEST(test_run_greedy_matches_golden) {
    const char * model = models[_i];
    char rel[128];
    snprintf(rel, sizeof(rel), "golden/%s/fox.f32kv.json", model);
    char * json = mg_test_read_file(mg_test_fixture(rel), NULL);
    ck_assert_ptr_nonnull(json);
    double greedy[N_GREEDY], top5[N_GREEDY * 10];
    ck_assert_int_eq(mg_test_json_numbers(json, "greedy", greedy, N_GREEDY), N_GREEDY);
    ck_assert_int_eq(mg_test_json_numbers(json, "greedy_steps_top5", top5, N_GREEDY * 10), N_GREEDY * 10);
    free(json);
    int n_sure = 0;   // steps before the first golden margin under twice the tolerance
    while (n_sure < N_GREEDY && top5[n_sure * 10 + 1] - top5[n_sure * 10 + 3] >= 2.0 * tol_f32kv[_i]) n_sure++;
    ck_assert_int_ge(n_sure, 2);

    snprintf(rel, sizeof(rel), "models/%s.gguf", model);
    struct mg_test_run r = mg("run -m '%s' -f '%s' -n %d --temp 0 --kv-type f32 -t 1 --ignore-eos", mg_test_fixture(rel),
                      mg_test_fixture("prompts/fox.txt"), n_sure);
    ck_assert_msg(r.status == 0, "exit status %d (-1: a crash): %.1500s", r.status, r.err);

    // Expected text: the prompt's bytes, each token's piece, a newline.
    size_t prompt_len;
    char * prompt = mg_test_read_file(mg_test_fixture("prompts/fox.txt"), &prompt_len);
    struct mg_model * m = mg_model_load_from_file(mg_test_fixture(rel), mg_model_default_params());
    ck_assert_ptr_nonnull(m);
    char want[4096];
    size_t len = prompt_len;
    memcpy(want, prompt, prompt_len);
    for (int i = 0; i < n_sure; i++) {
        const int32_t k = mg_token_to_piece(m->vocab, (int32_t) greedy[i], want + len, (int32_t) (sizeof(want) - len),
                                            false);
        ck_assert_int_ge(k, 0);
        len += (size_t) k;
    }
    want[len++] = '\n';
    ck_assert_msg(r.out_len == len && memcmp(r.out, want, len) == 0, "%s: mg run printed\n%.1500s\nexpected\n%.*s",
                  model, r.out, (int) len, want);

    // The timing summary, and the graphs: one per decode call, built for the
    // prompt and for the first single-token step, then reused (rebuilt only
    // when the padded cache length grows).
    ck_assert_ptr_nonnull(strstr(r.err, "prompt eval time"));
    ck_assert_ptr_nonnull(strstr(r.err, "eval time"));
    const char * graphs = line_with(r.err, "graphs");
    ck_assert_ptr_nonnull(graphs);
    int built = -1, reused = -1;
    const char * eq = strchr(graphs, '=');
    ck_assert_ptr_nonnull(eq);
    ck_assert_int_eq(sscanf(eq + 1, " %d built, %d reused", &built, &reused), 2);
    ck_assert_int_eq(built + reused, n_sure);
    ck_assert_int_ge(built, n_sure > 1 ? 2 : 1);
    ck_assert_int_ge(reused, n_sure / 2 - 1);
    mg_model_free(m);
    free(prompt);
    mg_test_run_free(&r);
}
END_TEST

// Every fixture model runs with the defaults (F16 cache, all cores).
START_TEST(test_run_defaults) {
    char rel[128];
    snprintf(rel, sizeof(rel), "models/%s.gguf", models[_i]);
    struct mg_test_run r = mg("run -m '%s' -p 'Once upon a time' -n 6 --temp 0", mg_test_fixture(rel));
    ck_assert_msg(r.status == 0, "exit status %d (-1: a crash): %.1500s", r.status, r.err);
    ck_assert_msg(strncmp(r.out, "Once upon a time", 16) == 0, "%s", r.out);
    ck_assert_ptr_nonnull(strstr(r.err, "prompt eval time"));
    ck_assert_ptr_nonnull(strstr(r.err, "eval time"));
    ck_assert_ptr_nonnull(strstr(r.err, "graphs"));
    mg_test_run_free(&r);
}
END_TEST

// The "N runs" of the "eval time" line of a run's summary.
static int eval_runs(const char * err) {
    const char * line = line_with(err, "       eval time");
    ck_assert_ptr_nonnull(line);
    const char * slash = strchr(line, '/');
    ck_assert_ptr_nonnull(slash);
    int n = -1;
    ck_assert_int_eq(sscanf(slash + 1, " %d runs", &n), 1);
    return n;
}

// A run longer than its context: without --context-shift it stops when the
// context is full and says why; with it, it generates every token asked for,
// shifting as llama-completion does (keep --keep, drop half of the rest),
// and what it printed before the first shift is what the stopped run printed.
START_TEST(test_run_context_shift) {
    enum { N_CTX = 32, N_PREDICT = 60, N_KEEP = 2, N_FOX_TOKENS = 18 };
    const char * model = mg_test_fixture("models/tiny-f32.gguf");
    char args[8192];
    snprintf(args, sizeof(args), "run -m '%s' -f '%s' -c %d -n %d --temp 0 --ignore-eos -t 1", model,
             mg_test_fixture("prompts/fox.txt"), N_CTX, N_PREDICT);
    struct mg_test_run stop = mg("%s", args);
    ck_assert_msg(stop.status == 0, "exit status %d: %.1500s", stop.status, stop.err);
    ck_assert_msg(strstr(stop.err, "context full: 32 tokens") != NULL && strstr(stop.err, "--context-shift") != NULL,
                  "%.1500s", stop.err);
    ck_assert_int_eq(eval_runs(stop.err), N_CTX - N_FOX_TOKENS);   // every cell filled, then the stop

    struct mg_test_run go = mg("%s --context-shift --keep %d", args, N_KEEP);
    ck_assert_msg(go.status == 0, "exit status %d: %.1500s", go.status, go.err);
    ck_assert_ptr_null(strstr(go.err, "context full"));
    ck_assert_int_eq(eval_runs(go.err), N_PREDICT - 1);   // the last token needs no decode
    // llama-completion's rule (the model adds no BOS, so --keep 2 keeps 2):
    // when the N_CTX cells are full, drop (N_CTX - keep) / 2 after the kept ones.
    int n_past = N_FOX_TOKENS, want_shifts = 0;
    for (int i = 0; i < N_PREDICT - 1; i++) {
        if (n_past == N_CTX) n_past -= (N_CTX - N_KEEP) / 2, want_shifts++;
        n_past++;
    }
    const char * shifts = line_with(go.err, "context shifts");
    ck_assert_ptr_nonnull(shifts);
    int n_shifts = -1, keep = -1, n_graphs = -1;
    ck_assert_int_eq(sscanf(strchr(shifts, '=') + 1, " %d (keeping the first %d tokens; %d K-shift", &n_shifts, &keep,
                            &n_graphs), 3);
    ck_assert_int_eq(n_shifts, want_shifts);
    ck_assert_int_ge(want_shifts, 2);
    ck_assert_int_eq(keep, N_KEEP);
    ck_assert_int_eq(n_graphs, want_shifts);
    // The stopped run's text (less its final newline) begins the longer one.
    ck_assert_uint_gt(go.out_len, stop.out_len);
    ck_assert_msg(memcmp(go.out, stop.out, stop.out_len - 1) == 0, "before the first shift the runs differ:\n%s\n%s",
                  stop.out, go.out);
    mg_test_run_free(&stop);
    mg_test_run_free(&go);

    expect_error("--keep", "-3", "%s --context-shift --keep -3", args);
    expect_error("--context-shift", "--no-context-shift", "%s --context-shift --no-context-shift", args);
}
END_TEST

// Strict UTF-8 (shortest forms, no surrogates, at most U+10FFFF), written
// here rather than taken from unicode.c.
static bool valid_utf8(const char * s, size_t len) {
    for (size_t i = 0; i < len;) {
        const uint8_t b = (uint8_t) s[i];
        const size_t need = b < 0x80 ? 1 : (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : (b & 0xF8) == 0xF0 ? 4 : 0;
        if (need == 0 || i + need > len) return false;
        uint32_t c = need == 1 ? b : b & (0x7Fu >> need);
        for (size_t k = 1; k < need; k++) {
            if (((uint8_t) s[i + k] & 0xC0) != 0x80) return false;
            c = (c << 6) | ((uint8_t) s[i + k] & 0x3Fu);
        }
        const uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
        if (c < least[need] || c > 0x10FFFF || (c >= 0xD800 && c < 0xE000)) return false;
        i += need;
    }
    return true;
}

// make run's generation (the demo model, 48 tokens) stops after the first
// two bytes of a three-byte character. The streamed text must stay valid
// UTF-8: the two bytes are held back, not printed, and stderr says so; one
// token more finishes the character, and the text then continues with
// exactly the bytes that were held back.
START_TEST(test_run_cut_mid_character) {
    const char * model = mg_test_root("models/fortune-toy-q8_0.gguf");
    struct mg_test_run cut = mg("run -m '%s' -p '床前明月光' -n 48 --temp 0 -t 1", model);
    ck_assert_msg(cut.status == 0, "exit status %d: %.1500s", cut.status, cut.err);
    ck_assert_msg(valid_utf8(cut.out, cut.out_len), "mg run printed invalid UTF-8:\n%s", cut.out);
    const char * note = strstr(cut.err, "[the text was cut mid-character: the ");
    ck_assert_msg(note != NULL, "no note about the cut character on stderr:\n%s", cut.err);
    int n_held = 0;
    ck_assert_int_eq(sscanf(note, "[the text was cut mid-character: the %d byte", &n_held), 1);
    ck_assert_int_ge(n_held, 1);
    ck_assert_int_le(n_held, 3);
    const char * hex = strstr(note, "byte") + strlen(n_held == 1 ? "byte " : "bytes ");
    unsigned held[3];
    for (int i = 0; i < n_held; i++) ck_assert_int_eq(sscanf(hex + 3 * i, "%2x", &held[i]), 1);

    struct mg_test_run more = mg("run -m '%s' -p '床前明月光' -n 49 --temp 0 -t 1", model);
    ck_assert_msg(more.status == 0, "exit status %d: %.1500s", more.status, more.err);
    ck_assert_msg(valid_utf8(more.out, more.out_len), "mg run printed invalid UTF-8:\n%s", more.out);
    // The cut run's text (without its final newline) starts the longer one,
    // and the held-back bytes come right after it.
    const size_t n_text = cut.out_len - 1;
    ck_assert_uint_gt(more.out_len, n_text + (size_t) n_held);
    ck_assert_mem_eq(more.out, cut.out, n_text);
    for (int i = 0; i < n_held; i++) ck_assert_uint_eq((uint8_t) more.out[n_text + (size_t) i], held[i]);
    mg_test_run_free(&cut);
    mg_test_run_free(&more);
}
END_TEST

// ---------------------------------------------------------------------------
// mg mkmodel -> mg info -> mg run
// ---------------------------------------------------------------------------

// The types mkmodel writes, by the name it takes and ggml's name for them
// (ggml.c type_traits[].type_name), which mg info prints.
static const struct {
    const char * arg;
    const char * ggml_name;
} mk_types[] = {
    {"f32", "f32"},   {"f16", "f16"},   {"bf16", "bf16"}, {"q8_0", "q8_0"}, {"q4_0", "q4_0"},
    {"q4_1", "q4_1"}, {"q5_0", "q5_0"}, {"q5_1", "q5_1"}, {"q2_k", "q2_K"}, {"q3_k", "q3_K"},
    {"q4_k", "q4_K"}, {"q5_k", "q5_K"}, {"q6_k", "q6_K"}, {"iq4_nl", "iq4_nl"},
};
enum { N_MK_TYPES = sizeof(mk_types) / sizeof(mk_types[0]) };

START_TEST(test_mkmodel_round_trip) {
    const char * out = mg_test_path_in(dir, "mk.gguf");
    struct mg_test_run r = mg("mkmodel --preset tiny --type %s -s 7 -o '%s'", mk_types[_i].arg, out);
    ck_assert_msg(r.status == 0, "mkmodel --type %s: exit status %d: %.1500s", mk_types[_i].arg, r.status, r.err);
    mg_test_run_free(&r);

    check_info_counts(out);
    r = mg("info '%s'", out);
    ck_assert_ptr_nonnull(strstr(r.out, "\ntensors: 24\n"));   // the fixtures' shape
    char type[32];
    snprintf(type, sizeof(type), " %s ", mk_types[_i].ggml_name);
    for (int il = 0; il < 2; il++) {
        static const char * const mats[] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up",
                                            "ffn_down"};
        for (int j = 0; j < 7; j++) {
            char name[64];
            snprintf(name, sizeof(name), "blk.%d.%s.weight", il, mats[j]);
            const char * line = line_with(r.out, name);
            ck_assert_msg(line != NULL, "%s not listed", name);
            const char * t = strstr(line, type);
            ck_assert_msg(t != NULL && t < strchr(line, '\n'), "%s is not%s:\n%.*s", name, type,
                          (int) (strchr(line, '\n') - line), line);
        }
    }
    mg_test_run_free(&r);

    r = mg("run -m '%s' -p 'The quick brown fox' -n 4 --temp 0 -t 2", out);
    ck_assert_msg(r.status == 0, "run on a %s model: exit status %d (-1: a crash): %.1500s", mk_types[_i].arg, r.status,
                  r.err);
    ck_assert_ptr_nonnull(strstr(r.err, "eval time"));
    mg_test_run_free(&r);
}
END_TEST

START_TEST(test_mkmodel_refuses) {
    const char * out = mg_test_path_in(dir, "bad.gguf");
    expect_error("'q8_k'", NULL, "mkmodel --preset tiny --type q8_k -o '%s'", out);   // no vec_dot of its own
    expect_error("'nonsense'", NULL, "mkmodel --preset tiny --type nonsense -o '%s'", out);
    expect_error("--preset", NULL, "mkmodel --preset huge -o '%s'", out);
    ck_assert_int_ne(access(out, F_OK), 0);   // nothing written
}
END_TEST

// The lines of `mg info --metadata-only` that start with "  tokenizer.".
static char * tokenizer_lines(const char * path) {
    struct mg_test_run r = mg("info --metadata-only '%s'", path);
    ck_assert_int_eq(r.status, 0);
    char * lines = calloc(1, r.out_len + 1);
    ck_assert_ptr_nonnull(lines);
    size_t n = 0;
    for (const char * p = r.out; *p;) {
        const char * nl = strchr(p, '\n');
        const size_t len = nl ? (size_t) (nl - p) + 1 : strlen(p);
        if (strncmp(p, "  tokenizer.", 12) == 0) {
            memcpy(lines + n, p, len);
            n += len;
        }
        p += len;
    }
    mg_test_run_free(&r);
    return lines;
}

// The array key holds the same elements in a and b.
static void expect_same_array(const struct mg_gguf * a, const struct mg_gguf * b, const char * key) {
    const int64_t ia = mg_gguf_find_key(a, key), ib = mg_gguf_find_key(b, key);
    ck_assert_msg(ia >= 0 && ib >= 0, "%s missing", key);
    ck_assert_int_eq(mg_gguf_kv_type(a, ia), MG_GGUF_TYPE_ARRAY);
    ck_assert_int_eq(mg_gguf_kv_type(b, ib), MG_GGUF_TYPE_ARRAY);
    ck_assert_int_eq(mg_gguf_arr_type(a, ia), mg_gguf_arr_type(b, ib));
    const uint64_t n = mg_gguf_arr_n(a, ia);
    ck_assert_uint_eq(mg_gguf_arr_n(b, ib), n);
    if (mg_gguf_arr_type(a, ia) == MG_GGUF_TYPE_STRING) {
        for (uint64_t j = 0; j < n; j++) {
            uint64_t la, lb;
            const char * sa = mg_gguf_arr_str(a, ia, j, &la);
            const char * sb = mg_gguf_arr_str(b, ib, j, &lb);
            ck_assert_msg(la == lb && memcmp(sa, sb, la) == 0, "%s[%llu] differs", key, (unsigned long long) j);
        }
    } else {
        ck_assert_int_eq(mg_gguf_arr_type(a, ia), MG_GGUF_TYPE_INT32);
        ck_assert(memcmp(mg_gguf_arr_data(a, ia), mg_gguf_arr_data(b, ib), n * 4) == 0);
    }
}

// mkmodel's vocabulary (from data/minimind's tokenizer.json) is the fixtures' one.
START_TEST(test_mkmodel_tokenizer_metadata) {
    const char * out = mg_test_path_in(dir, "mk.gguf");
    struct mg_test_run r = mg("mkmodel --preset tiny --type q8_0 -o '%s'", out);
    ck_assert_msg(r.status == 0, "exit status %d (-1: a crash): %.1500s", r.status, r.err);
    mg_test_run_free(&r);
    const char * ref = mg_test_fixture("models/tiny-f32.gguf");
    char * want = tokenizer_lines(ref);
    char * got  = tokenizer_lines(out);
    ck_assert_int_ge(mg_test_count_lines(want), 10);
    ck_assert_msg(strcmp(want, got) == 0, "tokenizer metadata differs:\n--- fixture\n%s--- mkmodel\n%s", want, got);
    free(want);
    free(got);

    // The arrays themselves, element by element (mg info shows only their sizes).
    struct mg_gguf * a = mg_gguf_open(ref);
    struct mg_gguf * b = mg_gguf_open(out);
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    expect_same_array(a, b, "tokenizer.ggml.tokens");
    expect_same_array(a, b, "tokenizer.ggml.merges");
    expect_same_array(a, b, "tokenizer.ggml.token_type");
    const char * ta, * tb;
    uint64_t la, lb;
    ck_assert(mg_gguf_get_str(a, "tokenizer.chat_template", &ta, &la));
    ck_assert(mg_gguf_get_str(b, "tokenizer.chat_template", &tb, &lb));
    ck_assert(la == lb && memcmp(ta, tb, la) == 0);
    mg_gguf_close(a);
    mg_gguf_close(b);
}
END_TEST

// ---------------------------------------------------------------------------
// mg bench: the tests its lists make, and the race against llama-bench. No
// speed is asserted (a test never times anything): only which rows appear,
// in llama-bench's order, and that the ratio is ours over theirs.
// ---------------------------------------------------------------------------

// The "| model | weights | test | t | fa | t/s ..." rows of a bench table, as
// "test|t|fa|t/s" strings in order; returns how many.
static int bench_rows(const char * out, char rows[][64], double * tps, int max) {
    int n = 0;
    for (const char * line = out; line && *line && n < max; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        char model[64], weights[32], test[32];
        int t, fa;
        double v;
        // "| tiny-q8_0.gguf | 3.3 MiB | pp8 @ d8 | 1 | 0 | 123.4 ± 5.6 |"
        if (sscanf(line, "| %63s | %31[^|] | %31[^|] | %d | %d | %lf", model, weights, test, &t, &fa, &v) != 6) continue;
        char * end = test + strlen(test);
        while (end > test && end[-1] == ' ') *--end = '\0';
        snprintf(rows[n], 64, "%s|%d|%d", test, t, fa);
        tps[n++] = v;
    }
    return n;
}

START_TEST(test_bench_lists) {
    struct mg_test_run r = mg("bench -m '%s' -p 8,16 -n 4 -d 0,8 -t 1 -fa 0,1 -r 1", mg_test_fixture("models/tiny-q8_0.gguf"));
    ck_assert_msg(r.status == 0, "mg bench failed: %s", r.err);
    // llama-bench's order: per thread count, flash-attn setting and depth, the pp tests then the tg tests.
    const char * expected[] = {"pp8|1|0", "pp16|1|0", "tg4|1|0", "pp8 @ d8|1|0", "pp16 @ d8|1|0", "tg4 @ d8|1|0",
                               "pp8|1|1", "pp16|1|1", "tg4|1|1", "pp8 @ d8|1|1", "pp16 @ d8|1|1", "tg4 @ d8|1|1"};
    char rows[32][64];
    double tps[32];
    const int n = bench_rows(r.out, rows, tps, 32);
    ck_assert_msg(n == 12, "expected 12 rows, got %d:\n%s", n, r.out);
    for (int i = 0; i < n; i++) {
        ck_assert_msg(strcmp(rows[i], expected[i]) == 0, "row %d is %s, expected %s", i, rows[i], expected[i]);
        ck_assert_msg(tps[i] > 0 && isfinite(tps[i]), "row %d: %g tokens/s", i, tps[i]);
    }
    mg_test_run_free(&r);
    expect_error("-p", "1,a", "bench -m '%s' -p 1,a", mg_test_fixture("models/tiny-q8_0.gguf"));
    expect_error("-fa", NULL, "bench -m '%s' -fa 2", mg_test_fixture("models/tiny-q8_0.gguf"));
    expect_error("nothing to measure", NULL, "bench -m '%s' -p 0 -n 0", mg_test_fixture("models/tiny-q8_0.gguf"));
}
END_TEST

// A stand-in rival (llama-bench, llama-batched-bench) in the test directory:
// the shell script `name`, whose commands are `lines` and then `last` unless
// it is NULL (the row an incomplete stand-in leaves out). Returns its path.
static const char * fake_rival(const char * name, const char * lines, const char * last) {
    const char * path = mg_test_path_in(dir, name);
    FILE * f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "#!/bin/sh\n%s%s", lines, last != NULL ? last : "");
    fclose(f);
    ck_assert_int_eq(chmod(path, 0755), 0);
    return path;
}

// A stand-in for llama-bench: prints its CSV (header, then one quoted row per
// test, as llama-bench -o csv does) with 100 t/s for every test, or leaves
// out the tg row when asked to misbehave.
static const char * fake_llama_bench(bool complete) {
    return fake_rival(complete ? "llama-bench" : "llama-bench-short",
                      "echo '\"build_commit\",\"n_threads\",\"flash_attn\",\"n_prompt\",\"n_gen\",\"n_depth\",\"avg_ts\",\"stddev_ts\"'\n"
                      "echo '\"d32676d\",\"1\",\"0\",\"8\",\"0\",\"0\",\"100.000000\",\"1.0\"'\n",
                      complete ? "echo '\"d32676d\",\"1\",\"0\",\"0\",\"4\",\"0\",\"100.000000\",\"1.0\"'\n" : NULL);
}

START_TEST(test_bench_race) {
    const char * model = mg_test_fixture("models/tiny-q8_0.gguf");
    struct mg_test_run r = mg("bench -m '%s' -p 8 -n 4 -t 1 -r 1 --llama-bench '%s' --rounds 2", model, fake_llama_bench(true));
    ck_assert_msg(r.status == 0, "mg bench --llama-bench failed: %s", r.err);
    int n = 0;
    for (const char * line = r.out; (line = strstr(line, "| tiny-q8_0.gguf")) != NULL; line++) {
        double ours, sd, theirs, ratio;
        char test[16];
        // | model | weights | test | t | fa | ours ± sd | weights/s | llama.cpp | ratio | min-max |
        const char * p = line;
        for (int bars = 0; bars < 5 && p; bars++) p = strchr(p + 1, '|');
        ck_assert_ptr_nonnull(p);
        ck_assert_int_eq(sscanf(line, "| %*s | %*[^|] | %15s", test), 1);
        ck_assert_int_eq(sscanf(p + 1, " %lf ± %lf", &ours, &sd), 2);
        for (int bars = 0; bars < 2 && p; bars++) p = strchr(p + 1, '|');
        ck_assert_int_eq(sscanf(p + 1, " %lf | %lfx", &theirs, &ratio), 2);
        ck_assert_msg(fabs(theirs - 100.0) < 1e-9, "%s: llama.cpp column %g, the stand-in said 100", test, theirs);
        ck_assert_msg(fabs(ratio - ours / 100.0) < 0.006 + 0.001 * ratio, "%s: ratio %g for ours %g over 100", test, ratio, ours);
        n++;
    }
    ck_assert_msg(n == 2, "expected the pp8 and tg4 rows of the race, found %d:\n%s", n, r.out);
    ck_assert_msg(strstr(r.out, "2 rounds") != NULL, "the table does not say how many rounds: %s", r.out);
    mg_test_run_free(&r);
    // A llama-bench that leaves a test out: a clear error, not a ratio against nothing.
    expect_error("no result for tg4", NULL, "bench -m '%s' -p 8 -n 4 -t 1 -r 1 --llama-bench '%s' --rounds 1", model,
                          fake_llama_bench(false));
    // -ngl goes to the rival too, 0 included: llama-bench's own default is 99.
    char lines[4096];
    snprintf(lines, sizeof lines, "echo \"$*\" > '%s'\n"
             "echo '\"n_threads\",\"flash_attn\",\"n_prompt\",\"n_gen\",\"n_depth\",\"avg_ts\"'\n"
             "echo '\"1\",\"0\",\"8\",\"0\",\"0\",\"100\"'\n", mg_test_path_in(dir, "args.txt"));
    r = mg("bench -m '%s' -p 8 -n 0 -t 1 -r 1 --llama-bench '%s' --rounds 1", model,
           fake_rival("llama-bench-args", lines, NULL));
    ck_assert_msg(r.status == 0, "%s", r.err);
    mg_test_run_free(&r);
    char * args = mg_test_read_file(mg_test_path_in(dir, "args.txt"), NULL);
    ck_assert_msg(args != NULL && strstr(args, " -ngl 0 ") != NULL && strstr(args, "-dev") == NULL, "%s", args);
    free(args);
    // A build without a GPU device says so for -ngl, as mg run does.
    expect_error("-ngl 1", "no GPU device", "bench -m '%s' -p 8 -n 0 -ngl 1", model);
}
END_TEST

// mg batched-bench: one row per (PP, TG, B) with llama-batched-bench's N_KV
// (the cells the case fills: B prompts, or one shared, plus B x TG).
START_TEST(test_batched_bench_rows) {
    for (int shared = 0; shared < 2; shared++) {
        struct mg_test_run r = mg("batched-bench -m '%s' -npp 8,16 -ntg 4 -npl 1,3 -t 1 %s", mg_test_fixture("models/tiny-q8_0.gguf"),
                          shared ? "-pps" : "");
        ck_assert_msg(r.status == 0, "mg batched-bench failed: %s", r.err);
        const int pp[] = {8, 8, 16, 16}, pl[] = {1, 3, 1, 3};
        int n = 0;
        for (const char * line = r.out; (line = strstr(line, "\n|")) != NULL; line++) {
            int PP, TG, B, N_KV;
            double t_pp, s_pp;
            if (sscanf(line + 1, "| %d | %d | %d | %d | %lf | %lf", &PP, &TG, &B, &N_KV, &t_pp, &s_pp) != 6) continue;
            ck_assert_int_lt(n, 4);
            ck_assert_int_eq(PP, pp[n]);
            ck_assert_int_eq(TG, 4);
            ck_assert_int_eq(B, pl[n]);
            ck_assert_int_eq(N_KV, (shared ? pp[n] : pl[n] * pp[n]) + pl[n] * 4);
            ck_assert_msg(t_pp >= 0 && s_pp > 0, "row %d: T_PP %g, S_PP %g", n, t_pp, s_pp);
            n++;
        }
        ck_assert_msg(n == 4, "expected 4 rows, got %d:\n%s", n, r.out);
        mg_test_run_free(&r);
    }
}
END_TEST

// A stand-in for llama-batched-bench: its table, every row at S_PP 1000 and S_TG 100
// (complete), or without the B 3 rows.
static const char * fake_llama_batched_bench(bool complete) {
    return fake_rival(complete ? "llama-batched-bench" : "llama-batched-bench-short",
                      "echo '|    PP |     TG |    B |   N_KV |   T_PP s | S_PP t/s |   T_TG s | S_TG t/s |      T s |    S t/s |'\n"
                      "echo '|-------|--------|------|--------|----------|----------|----------|----------|----------|----------|'\n"
                      "echo '|     8 |      4 |    1 |     12 |    0.008 |  1000.00 |    0.040 |   100.00 |    0.048 |   250.00 |'\n",
                      complete ? "echo '|     8 |      4 |    3 |     36 |    0.024 |  1000.00 |    0.120 |   100.00 |    0.144 |   250.00 |'\n"
                               : NULL);
}

// mg batched-bench --llama-batched-bench: one row per case with both speeds and
// the ratios of ours over theirs; a rival that leaves a case out is an error.
START_TEST(test_batched_bench_race) {
    const char * model = mg_test_fixture("models/tiny-q8_0.gguf");
    struct mg_test_run r = mg("batched-bench -m '%s' -npp 8 -ntg 4 -npl 1,3 -t 1 --llama-batched-bench '%s' --rounds 2", model,
                      fake_llama_batched_bench(true));
    ck_assert_msg(r.status == 0, "mg batched-bench --llama-batched-bench failed: %s", r.err);
    ck_assert_msg(strstr(r.out, "2 rounds") != NULL, "the table does not say how many rounds: %s", r.out);
    int n = 0;
    for (const char * line = r.out; (line = strstr(line, "\n|")) != NULL; line++) {
        int PP, TG, B;
        double o_pp, t_pp, ratio_pp, o_tg, t_tg, ratio_tg;
        if (sscanf(line + 1, "| %d | %d | %d | %lf | %lf | %lfx | %*f-%*fx | %lf | %lf | %lfx", &PP, &TG, &B, &o_pp, &t_pp,
                   &ratio_pp, &o_tg, &t_tg, &ratio_tg) != 9) {
            continue;
        }
        ck_assert_int_eq(B, n == 0 ? 1 : 3);
        ck_assert_msg(t_pp == 1000.0 && t_tg == 100.0, "B %d: llama columns %g, %g; the stand-in said 1000, 100", B, t_pp, t_tg);
        ck_assert_msg(fabs(ratio_pp - o_pp / 1000.0) < 0.006 + 0.001 * ratio_pp, "B %d: S_PP ratio %g for %g", B, ratio_pp, o_pp);
        ck_assert_msg(fabs(ratio_tg - o_tg / 100.0) < 0.006 + 0.001 * ratio_tg, "B %d: S_TG ratio %g for %g", B, ratio_tg, o_tg);
        n++;
    }
    ck_assert_msg(n == 2, "expected the B 1 and B 3 rows of the race, found %d:\n%s", n, r.out);
    mg_test_run_free(&r);
    struct mg_test_run bad = mg("batched-bench -m '%s' -npp 8 -ntg 4 -npl 1,3 -t 1 --llama-batched-bench '%s' --rounds 1", model,
                        fake_llama_batched_bench(false));
    ck_assert_msg(bad.status == 1 && strstr(bad.err, "no row for PP 8, TG 4, B 3") != NULL,
                  "a rival without the B 3 row: status %d, stderr: %s", bad.status, bad.err);
    ck_assert_msg(strstr(bad.out, "ratio") == NULL, "a table of ratios against nothing:\n%s", bad.out);
    mg_test_run_free(&bad);
    // A cache smaller than the 16 tokens of the warm-up still runs its one case.
    struct mg_test_run small = mg("batched-bench -m '%s' -npp 8 -ntg 4 -npl 1 -t 1", model);
    ck_assert_msg(small.status == 0 && strstr(small.out, "|     8 |      4 |    1 |     12 |") != NULL,
                  "a 12-cell case: status %d\n%s%s", small.status, small.out, small.err);
    mg_test_run_free(&small);
}
END_TEST

// mg parallel: each prompt's greedy continuation, decoded among the others,
// is the text mg run gives for it alone.
START_TEST(test_parallel_equals_run) {
    const char * model = mg_test_root("models/fortune-toy-q8_0.gguf");
    char path[4096];
    snprintf(path, sizeof(path), "%s", model);
    const char * prompts[] = {"床前明月光", "The quick brown fox", "你好"};
    struct mg_test_run par = mg("parallel -m '%s' -p '%s' -p '%s' -p '%s' -n 12 --temp 0 -t 2", path, prompts[0], prompts[1],
                        prompts[2]);
    ck_assert_msg(par.status == 0, "mg parallel failed: %s", par.err);
    for (int i = 0; i < 3; i++) {
        struct mg_test_run one = mg("run -m '%s' -p '%s' -n 12 --temp 0 -t 1", path, prompts[i]);
        ck_assert_msg(one.status == 0, "mg run failed: %s", one.err);
        char header[64];
        snprintf(header, sizeof(header), "--- sequence %d: ", i);
        const char * block = strstr(par.out, header);
        ck_assert_msg(block != NULL, "no block for sequence %d in:\n%s", i, par.out);
        block = strchr(block, '\n') + 1;
        // mg run prints the prompt, the continuation and a newline: the same bytes as the block.
        ck_assert_msg(strncmp(block, one.out, one.out_len) == 0, "sequence %d:\nparallel: %.300s\nrun:      %.300s", i,
                      block, one.out);
        mg_test_run_free(&one);
    }
    ck_assert_msg(strstr(par.err, "3 sequences") != NULL, "no summary: %s", par.err);
    mg_test_run_free(&par);
    expect_error("prompt", NULL, "parallel -m '%s' -n 4", path);
}
END_TEST

// ---------------------------------------------------------------------------
// mkmodel with a vocabulary of the test's own: tokenizer.json -> GGUF -> ids
// ---------------------------------------------------------------------------

// GPT-2's byte-to-symbol map (llama.cpp unicode_byte_to_utf8): printable
// bytes stand for themselves, the 68 others for U+0100, U+0101, ... in order.
static uint32_t byte_symbol(int b) {
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)) return (uint32_t) b;
    int n = 0;
    for (int c = 0; c < b; c++) {
        if (!((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF))) n++;
    }
    return 256 + (uint32_t) n;
}

// A byte-level BPE tokenizer.json with Qwen2's pre-tokenizer: token id b is
// byte b's symbol (so "Ġ", the space, is 32), then one token per merge in
// rank order, then four added tokens. splitter is the Split step's regex as
// JSON spells it.
static const char * const tiny_merges[] = {"h e", "l l", "he ll", "hell o", "\\u0120 w", "o r", "\\u0120w or",
                                           "l d", "\\u0120wor ld", "\\u0120 1"};
static const char * const tiny_merged[] = {"he", "ll", "hell", "hello", "\\u0120w", "or", "\\u0120wor", "ld",
                                           "\\u0120world", "\\u01201"};
enum { N_TINY_MERGES = 10, TINY_ADDED = 256 + N_TINY_MERGES, N_TINY_VOCAB = TINY_ADDED + 4 };

static void write_tiny_tokenizer(const char * dir_path, const char * splitter) {
    char path[512];
    snprintf(path, sizeof(path), "%s/tokenizer.json", dir_path);
    FILE * f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "{\"version\": \"1.0\",\n \"added_tokens\": [\n");
    static const char * const added[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>"};
    for (int i = 0; i < 4; i++) {
        fprintf(f, "  {\"id\": %d, \"content\": \"%s\", \"special\": %s}%s\n", TINY_ADDED + i, added[i],
                i < 3 ? "true" : "false", i < 3 ? "," : "");
    }
    fprintf(f, " ],\n \"normalizer\": {\"type\": \"NFC\"},\n \"pre_tokenizer\": {\"type\": \"Sequence\", "
               "\"pretokenizers\": [\n  {\"type\": \"Split\", \"pattern\": {\"Regex\": \"%s\"}, \"behavior\": "
               "\"Isolated\", \"invert\": false},\n  {\"type\": \"ByteLevel\", \"add_prefix_space\": false, "
               "\"trim_offsets\": false, \"use_regex\": false}]},\n", splitter);
    fprintf(f, " \"model\": {\"type\": \"BPE\", \"vocab\": {");
    for (int b = 0; b < 256; b++) fprintf(f, "%s\"\\u%04x\": %d", b ? ", " : "", (unsigned) byte_symbol(b), b);
    for (int i = 0; i < N_TINY_MERGES; i++) fprintf(f, ", \"%s\": %d", tiny_merged[i], 256 + i);
    fprintf(f, "},\n  \"merges\": [");
    for (int i = 0; i < N_TINY_MERGES; i++) fprintf(f, "%s\"%s\"", i ? ", " : "", tiny_merges[i]);
    fprintf(f, "]}}\n");
    fclose(f);
    snprintf(path, sizeof(path), "%s/tokenizer_config.json", dir_path);
    f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "{\"add_bos_token\": false, \"bos_token\": null, \"eos_token\": \"<|im_end|>\", "
               "\"pad_token\": \"<|endoftext|>\"}\n");
    fclose(f);
}

#define QWEN2_REGEX_JSON                                                                                       \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*" \
    "|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+"

// The ids of `mg tokenize ARGS`, space-separated, into buf.
static const char * tokenize_ids(char * buf, size_t size, const char * fmt, const char * model, const char * text) {
    char args[1024];
    snprintf(args, sizeof(args), fmt, model, text);
    struct mg_test_run r = mg("%s", args);
    ck_assert_msg(r.status == 0, "mg %s: exit status %d: %.1500s", args, r.status, r.err);
    size_t o = 0;
    buf[0] = '\0';
    for (const char * p = r.out; *p && o + 16 < size;) {
        char * end;
        const long id = strtol(p, &end, 10);
        ck_assert_msg(end != p && *end == '\n', "mg %s: not one id per line: %.500s", args, r.out);
        o += (size_t) snprintf(buf + o, size - o, "%s%ld", o ? " " : "", id);
        p = end + 1;
    }
    mg_test_run_free(&r);
    return buf;
}

START_TEST(test_mkmodel_own_vocab) {
    const char * vocab = mg_test_path_in(dir, "vocab");
    ck_assert_int_eq(mkdir(vocab, 0700), 0);
    write_tiny_tokenizer(vocab, QWEN2_REGEX_JSON);
    const char * out = mg_test_path_in(dir, "own.gguf");
    struct mg_test_run r = mg("mkmodel --n-layer 1 --n-embd 64 --n-head 2 --n-head-kv 1 --n-ff 128 --n-ctx 256 --type q8_0 "
                      "--vocab '%s' -o '%s'", vocab, out);
    ck_assert_msg(r.status == 0, "exit status %d: %.1500s", r.status, r.err);
    ck_assert_msg(strstr(r.out, "270 tokens, pre-tokenizer qwen2"), "%s", r.out);
    ck_assert_msg(strstr(r.out, "normalizes text (NFC)"), "%s", r.out);
    mg_test_run_free(&r);

    // mg info: the shape asked for, one embedding row per token (added ones too).
    check_info_counts(out);
    r = mg("info '%s'", out);
    ck_assert_int_eq(r.status, 0);
    static const char * const want[] = {
        "qwen3.block_count                            u32  1\n",
        "qwen3.embedding_length                       u32  64\n",
        "qwen3.attention.head_count_kv                u32  1\n",
        "qwen3.attention.key_length                   u32  32\n",   // n_embd / n_head
        "qwen3.context_length                         u32  256\n",
        "tokenizer.ggml.pre                           str  qwen2\n",
        "tokenizer.ggml.tokens                        arr  [270 strings]\n",
        "tokenizer.ggml.merges                        arr  [10 strings]\n",
        "tokenizer.ggml.eos_token_id                  u32  268\n",
        "tokenizer.ggml.padding_token_id              u32  266\n",
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        ck_assert_msg(strstr(r.out, want[i]), "no line '%.*s' in:\n%.3000s", (int) strlen(want[i]) - 1, want[i], r.out);
    }
    ck_assert_msg(strstr(r.out, "tokenizer.ggml.bos_token_id") == NULL, "bos_token is null: no bos key");
    const char * embd = line_with(r.out, "token_embd.weight");
    ck_assert_msg(embd && strstr(embd, "270") && strstr(embd, "270") < strchr(embd, '\n'), "%.200s", embd);
    mg_test_run_free(&r);

    // The ids, worked out by hand from the merges and Qwen2's rules: digits
    // one by one, so " 123" is "Ġ" "1" "2" "3" and the merge "Ġ 1" never
    // applies (GPT-2's regex would give "Ġ1" = 265); bytes are their own ids.
    char ids[512];
    ck_assert_str_eq(tokenize_ids(ids, sizeof(ids), "tokenize -m '%s' -p '%s'", out, "hello world 123"),
                     "259 264 32 49 50 51");
    ck_assert_str_eq(tokenize_ids(ids, sizeof(ids), "tokenize -m '%s' -p '%s'", out, "\xE4\xBD\xA0"),   // 你
                     "228 189 160");
    ck_assert_str_eq(tokenize_ids(ids, sizeof(ids), "tokenize -m '%s' -p '%s'", out,
                                  "<|im_start|>hello<|im_end|>"),
                     "267 259 268");
    ck_assert_str_eq(tokenize_ids(ids, sizeof(ids), "tokenize -m '%s' --no-special -p '%s'", out, "<think>hello"),
                     "269 259");   // a user-defined token is matched even with --no-special

    // --normalize nfc: "e" + U+0301 (bytes 65 CC 81) becomes "é" (C3 A9), as the
    // tokenizer.json's NFC normalizer would have it; without it the bytes stay.
    ck_assert_str_eq(tokenize_ids(ids, sizeof(ids), "tokenize -m '%s' -p '%s'", out, "e\xCC\x81"), "101 204 129");
    ck_assert_str_eq(tokenize_ids(ids, sizeof(ids), "tokenize -m '%s' --normalize nfc -p '%s'", out, "e\xCC\x81"),
                     "195 169");
    ck_assert_str_eq(tokenize_ids(ids, sizeof(ids), "tokenize -m '%s' --normalize nfc -p '%s'", out,
                                  "\xEF\xAC\x81"),
                     "239 172 129");   // U+FB01 "ﬁ" is not NFC's to change
    expect_error("--normalize 'nfkc'", NULL, "tokenize -m '%s' --normalize nfkc -p x", out);
    expect_error("--normalize 'nfkc'", NULL, "run -m '%s' --normalize nfkc -p x", out);
    expect_error("--normalize 'nfkc'", NULL, "logits -m '%s' --normalize nfkc -p x", out);
    expect_error("--normalize 'nfkc'", NULL, "chat -m '%s' --normalize nfkc", out);
    expect_error("--think", "--no-think", "chat -m '%s' --think --no-think", out);   // cli_not_both

    r = mg("run -m '%s' -p 'hello world' -n 4 --temp 0 -t 2", out);
    ck_assert_msg(r.status == 0, "exit status %d (-1: a crash): %.1500s", r.status, r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "hello world"));
    ck_assert_ptr_nonnull(strstr(r.err, "eval time"));
    mg_test_run_free(&r);
    r = mg("run -m '%s' -p 'caf\x65\xCC\x81' -n 2 --temp 0 -t 2 --normalize nfc", out);
    ck_assert_msg(r.status == 0, "exit status %d (-1: a crash): %.1500s", r.status, r.err);
    ck_assert_msg(strncmp(r.out, "caf\xC3\xA9", 5) == 0, "the prompt echoed is not NFC: %.200s", r.out);
    mg_test_run_free(&r);
}
END_TEST

// A pre-tokenizer vocab.c cannot reproduce (a regex of its own) is refused by name.
START_TEST(test_mkmodel_refuses_other_regex) {
    const char * vocab = mg_test_path_in(dir, "vocab");
    ck_assert_int_eq(mkdir(vocab, 0700), 0);
    write_tiny_tokenizer(vocab, "\\\\p{N}{1,3}");
    const char * out = mg_test_path_in(dir, "bad.gguf");
    expect_error("tokenizer.json: pre_tokenizer: the Split regex '\\p{N}{1,3}'", "is not Qwen2's, Llama 3's or GPT-2's",
                          "mkmodel --preset tiny --vocab '%s' -o '%s'", vocab, out);
    ck_assert_int_ne(access(out, F_OK), 0);
    expect_error("--n-head 4 is not a multiple of --n-head-kv 3", NULL,
                          "mkmodel --preset tiny --n-head-kv 3 -o '%s'", out);
    expect_error("--n-layer", NULL, "mkmodel --n-embd 64 --n-head 2 --n-ff 128 -o '%s'", out);
    expect_error("--head-dim 7: must be even", NULL, "mkmodel --preset tiny --head-dim 7 -o '%s'", out);
    ck_assert_int_ne(access(out, F_OK), 0);
}
END_TEST

// The value column of `mg info --metadata-only`'s line for key, or NULL.
static bool metadata_has(const char * info, const char * key, const char * value) {
    const char * line = line_with(info, key);
    if (line == NULL) return false;
    const char * nl = strchr(line, '\n');
    const char * v  = strstr(line, value);
    return v != NULL && (nl == NULL || v < nl);
}

static bool same_file(const char * a, const char * b) {
    size_t na, nb;
    char * x = mg_test_read_file(a, &na);
    char * y = mg_test_read_file(b, &nb);
    const bool same = x != NULL && y != NULL && na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return same;
}

// --preset tiny2: the golden2 second shape (untied, qwen2 pre-tokenizer, sum4 generator).
START_TEST(test_mkmodel_tiny2) {
    const char * a = mg_test_path_in(dir, "a.gguf"), * b = mg_test_path_in(dir, "b.gguf"), * c = mg_test_path_in(dir, "c.gguf");
    struct mg_test_run r = mg("mkmodel --preset tiny2 -s 3 -o '%s'", a);
    ck_assert_msg(r.status == 0, "exit status %d: %.1500s", r.status, r.err);
    mg_test_run_free(&r);
    check_info_counts(a);
    r = mg("info '%s'", a);
    ck_assert_ptr_nonnull(strstr(r.out, "\ntensors: 25\n"));   // tiny's 24 and output.weight
    const char * out_line = line_with(r.out, " output.weight ");
    ck_assert_msg(out_line != NULL && strstr(out_line, "[512, 6400]") != NULL, "no output.weight [512, 6400]:\n%s",
                  r.out);
    mg_test_run_free(&r);
    r = mg("info --metadata-only '%s'", a);
    ck_assert(metadata_has(r.out, "tokenizer.ggml.pre", "qwen2"));
    ck_assert(metadata_has(r.out, "qwen3.embedding_length", " 512"));
    ck_assert(metadata_has(r.out, "qwen3.attention.head_count ", " 8"));
    ck_assert(metadata_has(r.out, "qwen3.attention.head_count_kv", " 2"));
    ck_assert(metadata_has(r.out, "qwen3.feed_forward_length", " 1408"));
    mg_test_run_free(&r);
    // qwen2 splits digits one by one, gpt-2 keeps the run: 4 ids and fewer.
    r = mg("tokenize -m '%s' -p 2024 --json", a);
    ck_assert_int_eq(r.status, 0);
    int n_qwen2 = 1;
    for (const char * q = r.out; *q; q++) n_qwen2 += *q == ',';
    mg_test_run_free(&r);
    ck_assert_int_eq(n_qwen2, 4);
    r = mg("tokenize -m '%s' -p 2024 --json", mg_test_fixture("models/tiny-f32.gguf"));
    int n_gpt2 = 1;
    for (const char * q = r.out; *q; q++) n_gpt2 += *q == ',';
    mg_test_run_free(&r);
    ck_assert_int_lt(n_gpt2, 4);

    // The same seed writes the same bytes, another seed others; flags override the preset.
    r = mg("mkmodel --preset tiny2 -s 3 -o '%s'", b);
    mg_test_run_free(&r);
    ck_assert(same_file(a, b));
    r = mg("mkmodel --preset tiny2 -s 4 --pre gpt-2 -o '%s'", c);
    ck_assert_msg(r.status == 0, "exit status %d: %.1500s", r.status, r.err);
    mg_test_run_free(&r);
    ck_assert(!same_file(a, c));
    r = mg("info --metadata-only '%s'", c);
    ck_assert(metadata_has(r.out, "tokenizer.ggml.pre", "gpt-2"));
    mg_test_run_free(&r);
    // --untied on a tied preset adds output.weight.
    r = mg("mkmodel --preset tiny --untied --type q8_0 -o '%s'", b);
    ck_assert_msg(r.status == 0, "exit status %d: %.1500s", r.status, r.err);
    mg_test_run_free(&r);
    r = mg("info '%s'", b);
    ck_assert_ptr_nonnull(strstr(r.out, "\ntensors: 25\n"));
    ck_assert_ptr_nonnull(line_with(r.out, " output.weight "));
    mg_test_run_free(&r);
    r = mg("run -m '%s' -p 'The quick brown fox' -n 2 --temp 0 -t 1", b);
    ck_assert_msg(r.status == 0, "run on an untied model: exit status %d: %.1500s", r.status, r.err);
    mg_test_run_free(&r);
}
END_TEST

START_TEST(test_mkmodel_refuses_new_flags) {
    const char * out = mg_test_path_in(dir, "bad.gguf");
    expect_error("--pre 'llama3'", "gpt-2, qwen2", "mkmodel --preset tiny --pre llama3 -o '%s'", out);
    expect_error("--rng 'mt19937'", "box-muller, sum4", "mkmodel --preset tiny --rng mt19937 -o '%s'", out);
    expect_error("--init 'xavier'", "flat, scaled", "mkmodel --preset tiny2 --init xavier -o '%s'", out);
    expect_error("--preset 'tiny3'", "tiny2", "mkmodel --preset tiny3 -o '%s'", out);
    ck_assert_int_ne(access(out, F_OK), 0);   // nothing written
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("cli");

    TCase * errors = tcase_create("errors");
    tcase_set_timeout(errors, 120);
    tcase_add_checked_fixture(errors, setup, teardown);
    tcase_add_test(errors, test_help);
    tcase_add_test(errors, test_no_or_unknown_command);
    tcase_add_test(errors, test_bad_options);
    tcase_add_test(errors, test_bad_model_files);
    tcase_add_test(errors, test_prompt_longer_than_context);
    suite_add_tcase(s, errors);

    TCase * fixtures = tcase_create("fixtures");
    tcase_set_timeout(fixtures, 300);
    tcase_add_checked_fixture(fixtures, setup, teardown);
    tcase_add_test(fixtures, test_info_fixtures);
    tcase_add_test(fixtures, test_tokenize_fox);
    tcase_add_test(fixtures, test_special_tokens_default);
    tcase_add_loop_test(fixtures, test_logits_file, 0, N_MODELS);
    tcase_add_test(fixtures, test_logits_all);
    tcase_add_loop_test(fixtures, test_run_greedy_matches_golden, 0, N_MODELS);
    tcase_add_loop_test(fixtures, test_run_defaults, 0, N_MODELS);
    tcase_add_test(fixtures, test_run_cut_mid_character);
    tcase_add_test(fixtures, test_run_context_shift);
    suite_add_tcase(s, fixtures);

    TCase * mkmodel = tcase_create("mkmodel");
    tcase_set_timeout(mkmodel, 300);
    tcase_add_checked_fixture(mkmodel, setup, teardown);
    tcase_add_loop_test(mkmodel, test_mkmodel_round_trip, 0, N_MK_TYPES);
    tcase_add_test(mkmodel, test_mkmodel_refuses);
    tcase_add_test(mkmodel, test_mkmodel_tokenizer_metadata);
    tcase_add_test(mkmodel, test_mkmodel_own_vocab);
    tcase_add_test(mkmodel, test_mkmodel_refuses_other_regex);
    tcase_add_test(mkmodel, test_mkmodel_tiny2);
    tcase_add_test(mkmodel, test_mkmodel_refuses_new_flags);
    suite_add_tcase(s, mkmodel);

    TCase * bench = tcase_create("bench");
    tcase_set_timeout(bench, 300);
    tcase_add_checked_fixture(bench, setup, teardown);
    tcase_add_test(bench, test_bench_lists);
    tcase_add_test(bench, test_bench_race);
    tcase_add_test(bench, test_batched_bench_rows);
    tcase_add_test(bench, test_batched_bench_race);
    tcase_add_test(bench, test_parallel_equals_run);
    suite_add_tcase(s, bench);
    return s;
}
