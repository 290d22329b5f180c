// test_perplexity.c - mg perplexity, run as a user runs it (a child process),
// against figures this test computes on its own: a naive perplexity from the
// session's logits with a plain log-softmax in double, the logits file read
// back by hand, KL divergence properties (0 against itself, larger for fewer
// bits), the clear errors for a bad base file, and llama-perplexity's own
// figure for the same file and text (tests/fixtures/perplexity/README.md).
//
// The model is the vendored demo model's F16 parent, the text the held-out
// excerpt in data/heldout/ (the model never saw it); -c 64 and a few chunks
// keep every run well under a second.
//
// The binary: $MG_BIN if set, else the mg next to this test's build folder,
// else full/build/mg, run through harness.h's mg_test_run_mg (as test_cli.c).
#define _POSIX_C_SOURCE 200809L
#include "harness.h"
#include "model.h"
#include "perplexity_eval.h"
#include "session.h"
#include "vocab.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { N_CTX = 64, N_CHUNKS = 4, FIRST = N_CTX / 2, N_SCORED = N_CTX - 1 - FIRST };

static const char * model_f16  = "models/fortune-toy-f16.gguf";
static const char * model_q8_0 = "models/fortune-toy-q8_0.gguf";
static const char * heldout    = "data/heldout/dhammapada.txt";

// ---------------------------------------------------------------------------
// Running mg (harness.h: mg_test_run_mg, as test_cli.c)
// ---------------------------------------------------------------------------

static char dir[64];   // a fresh directory per test (mg_test_make_dir)

static void setup(void) {
    mg_test_make_dir(dir, sizeof(dir), "ppl");
}

static void teardown(void) {
    mg_test_remove_dir(dir);
}

#define in_dir(name) mg_test_path_in(dir, name)
#define mg(...)      mg_test_run_mg(dir, NULL, NULL, __VA_ARGS__)

static struct mg_test_run mg_ok(const char * args) {
    struct mg_test_run r = mg("%s", args);
    ck_assert_msg(r.status == 0, "mg %s: exit status %d:\n%.2000s", args, r.status, r.err);
    return r;
}

// A failure: exit 1, nothing on stdout, one line on stderr with fragment.
#define expect_error(fragment, ...) mg_test_expect_mg_error(dir, fragment, NULL, __VA_ARGS__)

// The number after key in text (the first occurrence), or NAN.
static double number_after(const char * text, const char * key) {
    const char * p = strstr(text, key);
    return p ? strtod(p + strlen(key), NULL) : NAN;
}

// The running estimates "[1]x,[2]y,...": how many, into out[].
static int running_estimates(const char * text, double * out, int max) {
    int n = 0;
    for (const char * p = text; n < max && (p = strchr(p, '[')) != NULL; p++) {
        char * end;
        const long k = strtol(p + 1, &end, 10);
        if (end[0] != ']' || k != n + 1) continue;
        out[n++] = strtod(end + 1, NULL);
    }
    return n;
}

static bool close_rel(double a, double b, double rel) {
    return fabs(a - b) <= rel * fabs(b);
}

static void write_bytes(const char * path, const void * p, size_t n) {
    FILE * f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(p, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

// ---------------------------------------------------------------------------
// The naive reference: the text's tokens, each chunk in one decode call from a
// fresh session, a plain log-softmax in double.
// ---------------------------------------------------------------------------

struct reference {
    double running[N_CHUNKS];
    double ppl, err;
    int32_t tokens[N_CHUNKS * N_CTX];
};

// log p(i) = logits[i] - log_norm(logits): the max and log of the sum of exps.
static double log_norm(const float * logits, int n) {
    double max = logits[0];
    for (int i = 1; i < n; i++) max = logits[i] > max ? logits[i] : max;
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += exp((double) logits[i] - max);
    return max + log(sum);
}

static double ref_log_softmax(const float * logits, int n, int32_t tok) {
    return (double) logits[tok] - log_norm(logits, n);
}

// Rows of the scored positions of every chunk, [N_CHUNKS][N_SCORED][n_vocab], for the file test.
static float * ref_logits;

static void reference(struct reference * r) {
    struct mg_model * m = mg_model_load_from_file(mg_test_root(model_f16), mg_model_default_params());
    ck_assert_ptr_nonnull(m);
    const int n_vocab = m->hp.n_vocab;
    size_t len;
    char * text = mg_test_read_file(mg_test_root(heldout), &len);
    ck_assert_ptr_nonnull(text);
    int32_t * all = malloc((len + 2) * sizeof(int32_t));
    const int32_t n = mg_tokenize(m->vocab, text, (int32_t) len, all, (int32_t) len + 2, true, false);
    ck_assert_int_ge(n, N_CHUNKS * N_CTX);
    memcpy(r->tokens, all, sizeof(r->tokens));
    free(ref_logits);
    ref_logits = malloc((size_t) N_CHUNKS * N_SCORED * (size_t) n_vocab * sizeof(float));

    double nll = 0.0, nll2 = 0.0;
    int    count = 0;
    for (int c = 0; c < N_CHUNKS; c++) {
        struct mg_session_params p = mg_session_default_params();
        p.n_ctx = N_CTX;
        p.n_batch = N_CTX;
        p.n_threads = 1;
        struct mg_session * s = mg_session_new(m, p);
        ck_assert_ptr_nonnull(s);
        int32_t chunk[N_CTX];
        memcpy(chunk, all + c * N_CTX, sizeof(chunk));
        if (mg_vocab_add_bos(m->vocab)) chunk[0] = mg_vocab_bos(m->vocab);   // llama.cpp's rule (not this vocab's)
        ck_assert(mg_decode(s, chunk, N_CTX, true));
        const float * logits = mg_get_logits(s);
        for (int i = FIRST; i < N_CTX - 1; i++) {
            const float * row = logits + (size_t) i * (size_t) n_vocab;
            memcpy(ref_logits + ((size_t) c * N_SCORED + (size_t) (i - FIRST)) * (size_t) n_vocab, row,
                   (size_t) n_vocab * sizeof(float));
            const double v = -ref_log_softmax(row, n_vocab, all[c * N_CTX + i + 1]);
            nll += v;
            nll2 += v * v;
            count++;
        }
        r->running[c] = exp(nll / count);
        mg_session_free(s);
    }
    const double mean = nll / count, var = nll2 / count - mean * mean;
    r->ppl = exp(mean);
    r->err = sqrt(var / (count - 1)) * r->ppl;
    free(all);
    free(text);
    mg_model_free(m);
}

static char * ppl_args(const char * model, const char * extra) {
    static char a[4][4096];
    static int  next;
    char * out = a[next++ % 4];
    snprintf(out, 4096, "perplexity -m '%s' -f '%s' -c %d --chunks %d %s", mg_test_root(model), mg_test_root(heldout),
             N_CTX, N_CHUNKS, extra);
    return out;
}

// ---------------------------------------------------------------------------
// Perplexity
// ---------------------------------------------------------------------------

START_TEST(test_ppl_matches_naive_reference) {
    struct reference ref;
    reference(&ref);
    struct mg_test_run r = mg_ok(ppl_args(model_f16, "-b 64 -t 2"));
    double running[N_CHUNKS + 1];
    ck_assert_int_eq(running_estimates(r.out, running, N_CHUNKS + 1), N_CHUNKS);
    for (int c = 0; c < N_CHUNKS; c++) {
        ck_assert_msg(close_rel(running[c], ref.running[c], 1e-4), "chunk %d: mg %.4f, reference %.6f", c + 1,
                      running[c], ref.running[c]);
    }
    const double ppl = number_after(r.out, "Final estimate: PPL = "), err = number_after(r.out, "+/- ");
    ck_assert_msg(close_rel(ppl, ref.ppl, 1e-4), "PPL: mg %.4f, reference %.6f", ppl, ref.ppl);
    ck_assert_msg(close_rel(err, ref.err, 1e-3), "error: mg %.5f, reference %.6f", err, ref.err);
    // a trained model on a text it never saw: far better than uniform over 6400 tokens, far from perfect
    ck_assert(ppl > 10 && ppl < 1000);
    ck_assert_msg(strstr(r.err, "tokens per second") != NULL, "no speed line: %s", r.err);
    mg_test_run_free(&r);
}
END_TEST

// The library's side without the binary (perplexity_eval.h): the chunks
// evaluated and scored there against the same naive reference, then KL
// divergence against rows saved from the same model, whose figures follow from
// comparing a model with itself: PPL equal to the base's, KL near 0, the same
// top token everywhere.
START_TEST(test_library_matches_naive_reference) {
    struct reference ref;
    reference(&ref);
    struct mg_model * m = mg_model_load_from_file(mg_test_root(model_f16), mg_model_default_params());
    ck_assert_ptr_nonnull(m);
    struct mg_session_params p = mg_session_default_params();
    p.n_ctx     = N_CTX;
    p.n_threads = 2;
    struct mg_ppl_eval ev;
    ck_assert_msg(mg_ppl_eval_init(&ev, m, p, 24, true), "%s", mg_last_error());   // batches of 24, 24 and 16
    ck_assert_int_eq(ev.n_scored, N_SCORED);
    struct mg_outfile  out;
    FILE *             f    = mg_ppl_logits_file_create(&out, in_dir("base.bin"), N_CTX, m->hp.n_vocab, N_CHUNKS, ref.tokens);
    struct mg_ppl_sums sums = {0};
    ck_assert_msg(f != NULL, "%s", mg_last_error());
    for (int c = 0; c < N_CHUNKS; c++) {
        ck_assert_msg(mg_ppl_eval_chunk(&ev, ref.tokens + c * N_CTX), "%s", mg_last_error());
        mg_ppl_score_chunk(&ev, ref.tokens + c * N_CTX, true, &sums);
        ck_assert(mg_ppl_write_rows(f, ev.rows, ev.n_scored, ev.n_vocab));
        ck_assert_msg(close_rel(mg_ppl_so_far(&sums), ref.running[c], 1e-5), "chunk %d: %.6f, reference %.6f", c + 1,
                      mg_ppl_so_far(&sums), ref.running[c]);
    }
    ck_assert_msg(mg_outfile_commit(&out), "%s", mg_last_error());
    struct mg_ppl_estimate ppl;
    ck_assert(mg_ppl_final(&sums, &ppl));
    ck_assert_msg(close_rel(ppl.value, ref.ppl, 1e-5) && close_rel(ppl.err, ref.err, 1e-4), "PPL %.6f +/- %.6f",
                  ppl.value, ppl.err);

    struct mg_logits_base b;
    ck_assert_msg(mg_ppl_base_open(in_dir("base.bin"), m->hp.n_vocab, &b), "%s", mg_last_error());
    ck_assert(mg_ppl_base_same_tokens(&b, ref.tokens, N_CHUNKS * N_CTX, "text", "base"));
    int32_t other[N_CHUNKS * N_CTX];
    memcpy(other, ref.tokens, sizeof(other));
    other[70] = other[70] == 5 ? 6 : 5;
    ck_assert(!mg_ppl_base_same_tokens(&b, other, N_CHUNKS * N_CTX, "text", "base"));
    ck_assert_msg(strstr(mg_last_error(), "text does not match base: the tokens differ at 70") != NULL, "%s",
                  mg_last_error());
    struct mg_kld_sums k = {0};
    float              klds[N_CHUNKS * N_SCORED], p_diffs[N_CHUNKS * N_SCORED];
    for (int c = 0; c < N_CHUNKS; c++) {
        ck_assert(mg_ppl_eval_chunk(&ev, b.tokens + c * N_CTX));
        ck_assert_msg(mg_ppl_kld_chunk(&ev, &b, b.tokens + c * N_CTX, c, &k, klds, p_diffs), "%s", mg_last_error());
    }
    const struct mg_kld_figures fig = mg_ppl_kld_figures(&k);
    ck_assert_uint_eq(k.count, N_CHUNKS * N_SCORED);
    ck_assert_msg(close_rel(fig.ppl.value, ref.ppl, 1e-5), "PPL %.6f", fig.ppl.value);
    ck_assert_msg(close_rel(fig.ppl_base.value, ref.ppl, 1e-3), "PPL base %.6f", fig.ppl_base.value);   // 16-bit rows
    ck_assert_msg(fig.kld.value >= 0 && fig.kld.value < 1e-4, "KL of a model from itself: %g", fig.kld.value);
    ck_assert_msg(fig.same_top.value == 1.0, "same top token %.4f", fig.same_top.value);
    ck_assert(fabs(fig.ln_ratio.value) < 1e-3 && fabs(fig.p_diff.value) < 1e-3);
    mg_ppl_base_close(&b);
    mg_ppl_eval_free(&ev);
    mg_model_free(m);
}
END_TEST

// The engine's results do not depend on the thread count or on where the
// batches split (chapter 08; the rows of a matmul are independent): the same
// printed figures and the same saved log-probabilities, byte for byte.
START_TEST(test_same_for_threads_and_batches) {
    static const char * variants[] = {"-t 1 -b 64", "-t 2 -b 64", "-t 2 -b 16", "-t 1 -b 7"};
    char * first_out = NULL, * first_file = NULL;
    size_t first_size = 0;
    for (int v = 0; v < 4; v++) {
        char extra[256];
        snprintf(extra, sizeof(extra), "%s --save-logits '%s'", variants[v], in_dir("l.bin"));
        struct mg_test_run r = mg_ok(ppl_args(model_f16, extra));
        size_t size;
        char * file = mg_test_read_file(in_dir("l.bin"), &size);
        ck_assert_ptr_nonnull(file);
        if (v == 0) {
            first_out = strdup(r.out);
            first_file = file;
            first_size = size;
        } else {
            ck_assert_msg(strcmp(r.out, first_out) == 0, "%s prints\n%s\nbut %s prints\n%s", variants[v], r.out,
                          variants[0], first_out);
            ck_assert_msg(size == first_size && memcmp(file, first_file, size) == 0,
                          "%s saves other log-probabilities than %s", variants[v], variants[0]);
            free(file);
        }
        mg_test_run_free(&r);
    }
    free(first_out);
    free(first_file);
}
END_TEST

// ---------------------------------------------------------------------------
// The logits file
// ---------------------------------------------------------------------------

// Read back by hand: the header, the tokens, and every saved row against the
// reference log-softmax (within one quantization step).
START_TEST(test_logits_file_round_trips) {
    struct reference ref;
    reference(&ref);
    char extra[256];
    snprintf(extra, sizeof(extra), "--save-logits '%s'", in_dir("base.bin"));
    struct mg_test_run r = mg_ok(ppl_args(model_f16, extra));
    // with --save-logits the PPL is the same (llama.cpp rounds log(sum) to float there: to print precision)
    ck_assert(close_rel(number_after(r.out, "Final estimate: PPL = "), ref.ppl, 1e-4));
    mg_test_run_free(&r);

    size_t size;
    uint8_t * f = mg_test_read_file(in_dir("base.bin"), &size);
    ck_assert_ptr_nonnull(f);
    enum { N_VOCAB = 6400, NV = N_VOCAB + 4 };
    const size_t header = 20 + sizeof(ref.tokens);
    ck_assert_uint_eq(size, header + (size_t) N_CHUNKS * N_SCORED * NV * 2);
    ck_assert(memcmp(f, "_logits_", 8) == 0);
    int32_t h[3];
    memcpy(h, f + 8, sizeof(h));
    ck_assert_int_eq(h[0], N_CTX);
    ck_assert_int_eq(h[1], N_VOCAB);
    ck_assert_int_eq(h[2], N_CHUNKS);
    ck_assert(memcmp(f + 20, ref.tokens, sizeof(ref.tokens)) == 0);
    for (int row = 0; row < N_CHUNKS * N_SCORED; row++) {
        const uint8_t * p = f + header + (size_t) row * NV * 2;
        float scale, min_lp;
        memcpy(&scale, p, 4);
        memcpy(&min_lp, p + 4, 4);
        ck_assert(scale > 0 && scale <= 16.5f / 65535);
        const float * logits = ref_logits + (size_t) row * N_VOCAB;
        const double  norm   = log_norm(logits, N_VOCAB);
        double total = 0.0;
        for (int i = 0; i < N_VOCAB; i++) {
            uint16_t q;
            memcpy(&q, p + 8 + 2 * i, 2);
            const double lp = min_lp + scale * q, want = (double) logits[i] - norm;
            if (q > 0) {
                ck_assert_msg(fabs(lp - want) <= 0.51 * scale + 1e-5, "row %d token %d: saved %f, log p %f", row, i,
                              lp, want);
                total += exp(lp);
            } else {
                ck_assert_msg(want <= min_lp + 0.51 * scale + 1e-5, "row %d token %d: %f dropped", row, i, want);
            }
        }
        ck_assert_msg(fabs(total - 1.0) < 1e-3, "row %d: the saved probabilities add up to %f", row, total);
    }
    free(f);
}
END_TEST

// ---------------------------------------------------------------------------
// KL divergence
// ---------------------------------------------------------------------------

struct kld {
    double mean, max, same_top, ppl, ppl_base, ln_ratio;
};

static struct kld kl_against(const char * model, const char * base) {
    char args[8192];
    snprintf(args, sizeof(args), "perplexity -m '%s' --kl-base '%s' -t 2", model, base);
    struct mg_test_run r = mg_ok(args);
    const struct kld k = {
        number_after(r.out, "Mean    KLD:"), number_after(r.out, "Maximum KLD:"), number_after(r.out, "Same top p:"),
        number_after(r.out, "Mean PPL(Q)                   :"), number_after(r.out, "Mean PPL(base)                :"),
        number_after(r.out, "Mean ln(PPL(Q)/PPL(base))     :"),
    };
    ck_assert_msg(!isnan(k.mean) && !isnan(k.max) && !isnan(k.same_top) && !isnan(k.ppl) && !isnan(k.ln_ratio),
                  "missing figures in:\n%s", r.out);
    mg_test_run_free(&r);
    return k;
}

START_TEST(test_kl_against_itself_and_others) {
    char extra[256];
    snprintf(extra, sizeof(extra), "--save-logits '%s'", in_dir("base.bin"));
    struct mg_test_run r = mg_ok(ppl_args(model_f16, extra));
    const double ppl = number_after(r.out, "Final estimate: PPL = ");
    mg_test_run_free(&r);

    // Against itself: only the 16-bit rounding of the saved log-probabilities.
    const struct kld self = kl_against(mg_test_root(model_f16), in_dir("base.bin"));
    ck_assert_msg(fabs(self.mean) < 1e-5 && self.max < 1e-4, "KL of a model against itself: mean %g max %g", self.mean,
                  self.max);
    ck_assert_msg(self.same_top == 100.0, "same top %f %%", self.same_top);
    ck_assert(close_rel(self.ppl, ppl, 1e-4) && close_rel(self.ppl_base, ppl, 1e-4));
    ck_assert(fabs(self.ln_ratio) < 1e-4);

    // Fewer bits, further away: Q8_0 (vendored), then Q4_0 made from the F16 here.
    char args[8192];
    snprintf(args, sizeof(args), "quantize '%s' '%s' q4_0", mg_test_root(model_f16), in_dir("q4_0.gguf"));
    r = mg_ok(args);
    mg_test_run_free(&r);
    const struct kld q8 = kl_against(mg_test_root(model_q8_0), in_dir("base.bin"));
    const struct kld q4 = kl_against(in_dir("q4_0.gguf"), in_dir("base.bin"));
    ck_assert_msg(q8.mean > 10 * fabs(self.mean) && q8.mean > 1e-5, "KL Q8_0 %g, self %g", q8.mean, self.mean);
    ck_assert_msg(q4.mean > 2 * q8.mean, "KL Q4_0 %g, Q8_0 %g", q4.mean, q8.mean);
    ck_assert(q4.max > q4.mean && q4.same_top < 100.0 && q4.same_top > 50.0);
    ck_assert(close_rel(q8.ppl_base, ppl, 1e-4));   // the base's PPL is read from the file
}
END_TEST

START_TEST(test_kl_bad_base_files) {
    char extra[256];
    snprintf(extra, sizeof(extra), "--save-logits '%s'", in_dir("base.bin"));
    struct mg_test_run r = mg_ok(ppl_args(model_f16, extra));
    mg_test_run_free(&r);
    size_t size;
    uint8_t * f = mg_test_read_file(in_dir("base.bin"), &size);
    ck_assert_ptr_nonnull(f);
    const char * m = mg_test_root(model_f16);

    write_bytes(in_dir("short.bin"), f, size - 100);
    expect_error("truncated", "perplexity -m '%s' --kl-base '%s'", m, in_dir("short.bin"));
    write_bytes(in_dir("short.bin"), f, 14);
    expect_error("not a logits file", "perplexity -m '%s' --kl-base '%s'", m, in_dir("short.bin"));

    uint8_t * g = malloc(size);
    memcpy(g, f, size);
    const int32_t other_vocab = 6401, more_chunks = N_CHUNKS + 1;
    memcpy(g + 12, &other_vocab, 4);
    write_bytes(in_dir("vocab.bin"), g, size);
    expect_error("vocabulary of 6401 tokens, this model has 6400", "perplexity -m '%s' --kl-base '%s'", m,
                 in_dir("vocab.bin"));
    memcpy(g, f, size);
    memcpy(g + 16, &more_chunks, 4);   // a header that promises more than the file holds
    write_bytes(in_dir("chunks.bin"), g, size);
    expect_error("truncated", "perplexity -m '%s' --kl-base '%s'", m, in_dir("chunks.bin"));
    memcpy(g, f, size);
    g[0] = 'X';
    write_bytes(in_dir("magic.bin"), g, size);
    expect_error("not a logits file", "perplexity -m '%s' --kl-base '%s'", m, in_dir("magic.bin"));
    free(g);

    // The text given beside the base must be the one it was saved from.
    char * text = mg_test_read_file(mg_test_root(heldout), &size);
    write_bytes(in_dir("other.txt"), text + 1, size - 1);
    expect_error("does not match", "perplexity -m '%s' --kl-base '%s' -f '%s'", m, in_dir("base.bin"),
                 in_dir("other.txt"));
    expect_error("saved with -c 64", "perplexity -m '%s' --kl-base '%s' -c 128", m, in_dir("base.bin"));
    expect_error("do not go together", "perplexity -m '%s' --kl-base '%s' --save-logits '%s'", m, in_dir("base.bin"),
                 in_dir("x.bin"));
    free(text);
    free(f);
}
END_TEST

// ---------------------------------------------------------------------------
// Against llama-perplexity (tests/fixtures/perplexity/README.md: the command)
// ---------------------------------------------------------------------------

// The same file, the same text, the same options: llama.cpp's final figure
// to 1e-4 relative, its running estimates to 3e-4 (the first ones average
// only 63 tokens). Both engines round differently in places (llama.cpp's F16
// matmuls go through llamafile's tinyBLAS, its CPU flash attention
// accumulates V in F16; our scalar build adds in another order than our SIMD
// one), so the fourth decimal can differ; the README records by how much.
START_TEST(test_ppl_matches_llama_cpp) {
    char * ref = mg_test_read_file(mg_test_fixture("perplexity/fortune-toy-f16.c128.llama.txt"), NULL);
    ck_assert_msg(ref != NULL, "no llama.cpp reference in tests/fixtures/perplexity");
    double want[9], got[9];
    ck_assert_int_eq(running_estimates(ref, want, 9), 8);
    const double want_ppl = number_after(ref, "Final estimate: PPL = "), want_err = number_after(ref, "+/- ");
    char args[8192];
    snprintf(args, sizeof(args), "perplexity -m '%s' -f '%s' -c 128 -b 128 -t 2 --chunks 8", mg_test_root(model_f16),
             mg_test_root(heldout));
    struct mg_test_run r = mg_ok(args);
    ck_assert_int_eq(running_estimates(r.out, got, 9), 8);
    for (int c = 0; c < 8; c++) {
        ck_assert_msg(close_rel(got[c], want[c], 3e-4), "chunk %d: mg %.4f, llama.cpp %.4f", c + 1, got[c], want[c]);
    }
    const double ppl = number_after(r.out, "Final estimate: PPL = "), err = number_after(r.out, "+/- ");
    ck_assert_msg(close_rel(ppl, want_ppl, 1e-4), "PPL: mg %.4f, llama.cpp %.4f", ppl, want_ppl);
    ck_assert_msg(close_rel(err, want_err, 1e-3), "error: mg %.5f, llama.cpp %.5f", err, want_err);
    mg_test_run_free(&r);
    free(ref);
}
END_TEST

// The table in chapter 07's README is the committed output of make
// quant-table, line for line (so the lesson cannot drift from its table).
START_TEST(test_readme_shows_the_committed_table) {
    char * table = mg_test_read_file(mg_test_root("chapters/07_scratch/quant-table.md"), NULL);
    char * readme = mg_test_read_file(mg_test_root("chapters/07_scratch/README.md"), NULL);
    ck_assert(table != NULL && readme != NULL);
    int rows = 0;
    for (char * line = strtok(table, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        if (line[0] != '|') continue;
        ck_assert_msg(strstr(readme, line) != NULL, "chapter 07's README lacks the table row:\n%s", line);
        rows++;
    }
    ck_assert_int_ge(rows, 10);
    ck_assert(strstr(readme, "quant-kl.svg") != NULL);
    free(table);
    free(readme);
}
END_TEST

START_TEST(test_bad_options) {
    struct mg_test_run r = mg_ok("--help");
    ck_assert_msg(strstr(r.out, "\n  perplexity ") != NULL, "mg --help does not list perplexity:\n%s", r.out);
    mg_test_run_free(&r);
    r = mg_ok("perplexity --help");
    ck_assert(strncmp(r.out, "usage: mg perplexity", 20) == 0 && strstr(r.out, "--kl-base") != NULL);
    mg_test_run_free(&r);

    const char * m = mg_test_root(model_f16);
    expect_error("no text", "perplexity -m '%s'", m);
    expect_error("needs at least 512", "perplexity -m '%s' -f '%s' -c 256", m, mg_test_fixture("prompts/fox.txt"));
    expect_error("--ctx-size must be at least 4", "perplexity -m '%s' -f '%s' -c 2", m, mg_test_root(heldout));
    expect_error("--chunks must be at least 1", "perplexity -m '%s' -f '%s' --chunks 0", m, mg_test_root(heldout));
    expect_error("cannot read", "perplexity -m '%s' -f '%s'", m, in_dir("missing.txt"));
}
END_TEST

// mg_ppl_eval_init is the library's door: a chunk too short to score a
// position (n_ctx < 4) or a batch of 0 tokens (the decode loop would never
// end) is refused by name; without with_rows no rows buffer is made.
START_TEST(test_eval_init_checks_its_arguments) {
    struct mg_model * m = mg_model_load_from_file(mg_test_root(model_f16), mg_model_default_params());
    ck_assert_ptr_nonnull(m);
    struct mg_session_params p = mg_session_default_params();
    struct mg_ppl_eval       ev;
    p.n_ctx = 3;
    ck_assert(!mg_ppl_eval_init(&ev, m, p, 8, false));
    ck_assert_msg(strstr(mg_last_error(), "n_ctx 3") != NULL, "%s", mg_last_error());
    p.n_ctx = 32;
    ck_assert(!mg_ppl_eval_init(&ev, m, p, 0, false));
    ck_assert_msg(strstr(mg_last_error(), "n_batch 0") != NULL, "%s", mg_last_error());
    ck_assert_msg(mg_ppl_eval_init(&ev, m, p, 8, false), "%s", mg_last_error());
    ck_assert_ptr_null(ev.rows);
    mg_ppl_eval_free(&ev);
    mg_model_free(m);
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("perplexity");
    TCase * t = MG_TCASE(s, "perplexity", test_ppl_matches_naive_reference, test_library_matches_naive_reference, test_eval_init_checks_its_arguments,
                            test_same_for_threads_and_batches,
                            test_logits_file_round_trips, test_kl_against_itself_and_others, test_kl_bad_base_files,
                            test_ppl_matches_llama_cpp, test_readme_shows_the_committed_table, test_bad_options);
    tcase_set_timeout(t, 300);
    tcase_add_checked_fixture(t, setup, teardown);
    return s;
}
