// test_seqs.c - many sequences in one session: a batch that mixes sequences
// gives each one the logits it gets when decoded alone; removing a sequence
// frees its cells; a prompt prefix copied to other sequences is stored once;
// a malformed batch changes nothing.
//
// The reference is always the same engine decoding one sequence at a time in
// a fresh session (chapter 09's path, itself held against llama.cpp by
// tests/09_inference/test_fixtures.c). Mixing sequences moves a sequence's
// cells apart and changes how many cells a softmax row spans, so sums over
// the cache add in another order: results agree to float rounding, well
// inside the fixtures' tolerance, not bit for bit.
#include "harness.h"
#include "model.h"
#include "session.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N_VOCAB = 6400, N_SEQ = 4, N_PROMPT = 7, N_STEPS = 3 };

static const float tol = 1e-3f;   // fixtures/README.md: tiny-f32 against an F32-cache reference

static struct mg_model * model;

static void load_model(void) {
    model = mg_model_load(mg_test_fixture("models/tiny-f32.gguf"));
    ck_assert_msg(model != NULL, "%s", mg_last_error());
}

static void free_model(void) {
    mg_model_free(model);
    model = NULL;
}

static struct mg_session * new_session(bool flash_attn, int n_ctx) {
    struct mg_session_params p = mg_session_default_params();
    p.n_ctx      = n_ctx;
    p.n_threads  = 2;
    p.kv_type    = MG_TYPE_F32;
    p.flash_attn = flash_attn;
    struct mg_session * s = mg_session_new(model, p);
    ck_assert_msg(s != NULL, "%s", mg_last_error());
    return s;
}

// Sequence q's prompt token i (different for every sequence), and its token at decode step k.
static int32_t prompt_token(int q, int i) {
    return (int32_t) ((q * 1931 + i * 577 + 101) % N_VOCAB);
}
static int32_t step_token(int q, int k) {
    return (int32_t) ((q * 389 + k * 2203 + 17) % N_VOCAB);
}

static float max_abs_diff(const float * a, const float * b) {
    float worst = 0.0f;
    for (int i = 0; i < N_VOCAB; i++) {
        const float d = fabsf(a[i] - b[i]);
        if (!(d <= worst)) worst = d;   // NaN counts as a difference
    }
    return worst;
}

// The reference: sequence q alone, prompt then steps, one logits row per stage.
static void decode_alone(bool fa, int q, float ref[N_STEPS + 1][N_VOCAB]) {
    struct mg_session * s = new_session(fa, 128);
    int32_t tokens[N_PROMPT];
    for (int i = 0; i < N_PROMPT; i++) tokens[i] = prompt_token(q, i);
    ck_assert_msg(mg_decode(s, tokens, N_PROMPT, false), "%s", mg_last_error());
    memcpy(ref[0], mg_get_logits(s), sizeof(ref[0]));
    for (int k = 0; k < N_STEPS; k++) {
        const int32_t t = step_token(q, k);
        ck_assert_msg(mg_decode(s, &t, 1, false), "%s", mg_last_error());
        memcpy(ref[k + 1], mg_get_logits(s), sizeof(ref[0]));
    }
    mg_session_free(s);
}

static float (*references(bool fa))[N_STEPS + 1][N_VOCAB] {
    float (*ref)[N_STEPS + 1][N_VOCAB] = malloc(N_SEQ * sizeof(*ref));
    ck_assert_ptr_nonnull(ref);
    for (int q = 0; q < N_SEQ; q++) decode_alone(fa, q, ref[q]);
    return ref;
}

// All prompts in one batch, then every step as one batch of N_SEQ tokens:
// each sequence's logits equal its own decode's, with plain and flash attention.
START_TEST(test_batch_of_sequences_equals_each_alone) {
    const bool fa = _i == 1;
    float (*ref)[N_STEPS + 1][N_VOCAB] = references(fa);
    struct mg_session * s = new_session(fa, 128);
    int32_t tok[N_SEQ * N_PROMPT], pos[N_SEQ * N_PROMPT], seq[N_SEQ * N_PROMPT];
    bool    keep[N_SEQ * N_PROMPT];
    // Interleaved, so each sequence's cells are spread over the cache.
    for (int i = 0; i < N_PROMPT; i++) {
        for (int q = 0; q < N_SEQ; q++) {
            const int j = i * N_SEQ + q;
            tok[j] = prompt_token(q, i), pos[j] = i, seq[j] = q, keep[j] = i == N_PROMPT - 1;
        }
    }
    const struct mg_batch prompts = {N_SEQ * N_PROMPT, tok, pos, seq, keep};
    ck_assert_msg(mg_decode_batch(s, &prompts), "%s", mg_last_error());
    ck_assert_int_eq(mg_session_cells_used(s), N_SEQ * N_PROMPT);
    for (int q = 0; q < N_SEQ; q++) {
        const int j = (N_PROMPT - 1) * N_SEQ + q;
        ck_assert_ptr_null(mg_get_logits_ith(s, j - N_SEQ));   // not asked for
        const float d = max_abs_diff(mg_get_logits_ith(s, j), ref[q][0]);
        printf("[seqs] fa=%d seq %d prompt: max |diff| %.3g\n", fa, q, d);
        ck_assert_msg(d <= tol, "fa=%d sequence %d: prompt logits differ by %g", fa, q, d);
        ck_assert_int_eq(mg_session_seq_pos_max(s, q), N_PROMPT - 1);
    }
    for (int k = 0; k < N_STEPS; k++) {
        int32_t t[N_SEQ], p[N_SEQ], sq[N_SEQ];
        for (int q = 0; q < N_SEQ; q++) t[q] = step_token(q, k), p[q] = N_PROMPT + k, sq[q] = q;
        const bool all[N_SEQ] = {true, true, true, true};
        const struct mg_batch step = {N_SEQ, t, p, sq, all};
        ck_assert_msg(mg_decode_batch(s, &step), "%s", mg_last_error());
        for (int q = 0; q < N_SEQ; q++) {
            const float d = max_abs_diff(mg_get_logits_ith(s, q), ref[q][k + 1]);
            ck_assert_msg(d <= tol, "fa=%d sequence %d step %d: logits differ by %g", fa, q, k, d);
        }
    }
    ck_assert_int_eq(mg_session_cells_used(s), N_SEQ * (N_PROMPT + N_STEPS));
    mg_session_free(s);
    free(ref);
}
END_TEST

// Removing a sequence frees exactly its cells; the next batch reuses them,
// and the other sequences go on as if nothing happened.
START_TEST(test_remove_frees_cells) {
    float (*ref)[N_STEPS + 1][N_VOCAB] = references(false);
    struct mg_session * s = new_session(false, 2 * N_PROMPT + 2);   // room for two prompts and a little
    int32_t tok[2 * N_PROMPT], pos[2 * N_PROMPT], seq[2 * N_PROMPT];
    for (int q = 0; q < 2; q++) {
        for (int i = 0; i < N_PROMPT; i++) tok[q * N_PROMPT + i] = prompt_token(q, i), pos[q * N_PROMPT + i] = i,
                                           seq[q * N_PROMPT + i] = q;
    }
    const struct mg_batch two = {2 * N_PROMPT, tok, pos, seq, NULL};
    ck_assert_msg(mg_decode_batch(s, &two), "%s", mg_last_error());
    ck_assert_int_eq(mg_session_cells_used(s), 2 * N_PROMPT);
    // A third prompt does not fit...
    int32_t t3[N_PROMPT], p3[N_PROMPT], s3[N_PROMPT];
    for (int i = 0; i < N_PROMPT; i++) t3[i] = prompt_token(2, i), p3[i] = i, s3[i] = 2;
    const struct mg_batch third = {N_PROMPT, t3, p3, s3, NULL};
    ck_assert(!mg_decode_batch(s, &third));
    ck_assert_msg(strstr(mg_last_error(), "context full") != NULL, "%s", mg_last_error());
    ck_assert_int_eq(mg_session_cells_used(s), 2 * N_PROMPT);   // and the refusal changed nothing
    // ...until sequence 0 is removed: its cells are free again and are reused.
    mg_session_seq_rm(s, 0, 0, -1);
    ck_assert_int_eq(mg_session_cells_used(s), N_PROMPT);
    ck_assert_int_eq(mg_session_seq_pos_max(s, 0), -1);
    ck_assert_msg(mg_decode_batch(s, &third), "%s", mg_last_error());
    ck_assert_int_eq(mg_session_cells_used(s), 2 * N_PROMPT);
    const float d2 = max_abs_diff(mg_get_logits(s), ref[2][0]);
    ck_assert_msg(d2 <= tol, "sequence 2 in sequence 0's old cells: logits differ by %g", d2);
    // Sequence 1 never saw any of it.
    const int32_t t = step_token(1, 0), p = N_PROMPT, q = 1;
    const struct mg_batch step = {1, &t, &p, &q, NULL};
    ck_assert_msg(mg_decode_batch(s, &step), "%s", mg_last_error());
    const float d1 = max_abs_diff(mg_get_logits(s), ref[1][1]);
    ck_assert_msg(d1 <= tol, "sequence 1 after its neighbour was replaced: logits differ by %g", d1);
    mg_session_free(s);
    free(ref);
}
END_TEST

// A prefix decoded once for sequence 0 and copied to the others is stored
// once: the cells count it once, and each sequence continued with its own
// suffix gets the logits of prefix + suffix decoded alone.
START_TEST(test_shared_prefix_stored_once) {
    enum { N_PREFIX = 5, N_SUFFIX = 3 };
    struct mg_session * s = new_session(false, 128);
    int32_t prefix[N_PREFIX];
    for (int i = 0; i < N_PREFIX; i++) prefix[i] = prompt_token(9, i);
    ck_assert(mg_decode(s, prefix, N_PREFIX, false));
    for (int q = 1; q < N_SEQ; q++) mg_session_seq_cp(s, 0, q, 0, -1);
    ck_assert_int_eq(mg_session_cells_used(s), N_PREFIX);
    int32_t tok[N_SEQ * N_SUFFIX], pos[N_SEQ * N_SUFFIX], seq[N_SEQ * N_SUFFIX];
    bool    keep[N_SEQ * N_SUFFIX];
    for (int q = 0; q < N_SEQ; q++) {
        for (int i = 0; i < N_SUFFIX; i++) {
            const int j = q * N_SUFFIX + i;
            tok[j] = step_token(q, i), pos[j] = N_PREFIX + i, seq[j] = q, keep[j] = i == N_SUFFIX - 1;
        }
    }
    const struct mg_batch suffixes = {N_SEQ * N_SUFFIX, tok, pos, seq, keep};
    ck_assert_msg(mg_decode_batch(s, &suffixes), "%s", mg_last_error());
    ck_assert_int_eq(mg_session_cells_used(s), N_PREFIX + N_SEQ * N_SUFFIX);
    for (int q = 0; q < N_SEQ; q++) {
        struct mg_session * alone = new_session(false, 128);
        int32_t whole[N_PREFIX + N_SUFFIX];
        memcpy(whole, prefix, sizeof(prefix));
        for (int i = 0; i < N_SUFFIX; i++) whole[N_PREFIX + i] = step_token(q, i);
        ck_assert(mg_decode(alone, whole, N_PREFIX + N_SUFFIX, false));
        const float d = max_abs_diff(mg_get_logits_ith(s, q * N_SUFFIX + N_SUFFIX - 1), mg_get_logits(alone));
        ck_assert_msg(d <= tol, "sequence %d on the shared prefix: logits differ by %g", q, d);
        mg_session_free(alone);
    }
    // Removing the prefix from sequence 0 keeps it for the others.
    mg_session_seq_rm(s, 0, 0, N_PREFIX);
    ck_assert_int_eq(mg_session_cells_used(s), N_PREFIX + N_SEQ * N_SUFFIX);
    mg_session_seq_keep(s, 2);   // only sequence 2: its prefix and suffix
    ck_assert_int_eq(mg_session_cells_used(s), N_PREFIX + N_SUFFIX);
    mg_session_free(s);
}
END_TEST

START_TEST(test_malformed_batch_changes_nothing) {
    struct mg_session * s = new_session(false, 64);
    const int32_t t[2] = {1, 2}, p[2] = {0, 1}, bad_seq[2] = {0, MG_MAX_SEQ}, bad_pos[2] = {0, -1}, q[2] = {0, 0};
    const int32_t bad_tok[2] = {1, N_VOCAB};
    const struct {
        struct mg_batch b;
        const char *    says;
    } cases[] = {
        {{2, t, p, bad_seq, NULL}, "sequence id"},
        {{2, t, bad_pos, q, NULL}, "position"},
        {{2, bad_tok, p, q, NULL}, "vocabulary"},
        {{0, t, p, q, NULL}, "no tokens"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        ck_assert(!mg_decode_batch(s, &cases[i].b));
        ck_assert_msg(strstr(mg_last_error(), cases[i].says) != NULL, "case %zu: %s", i, mg_last_error());
        ck_assert_int_eq(mg_session_cells_used(s), 0);
    }
    mg_session_free(s);
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s  = suite_create("seqs");
    TCase * tc = tcase_create("seqs");
    tcase_set_timeout(tc, 300);
    tcase_add_unchecked_fixture(tc, load_model, free_model);
    tcase_add_loop_test(tc, test_batch_of_sequences_equals_each_alone, 0, 2);
    tcase_add_test(tc, test_remove_frees_cells);
    tcase_add_test(tc, test_shared_prefix_stored_once);
    tcase_add_test(tc, test_malformed_batch_changes_nothing);
    suite_add_tcase(s, tc);
    return s;
}
