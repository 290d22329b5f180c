// test_seqs.c - many sequences in one session: a batch that mixes sequences
// gives each one the logits it gets when decoded alone; removing a sequence
// frees its cells; a prompt prefix copied to other sequences is stored once;
// a malformed batch changes nothing; keeping some rows of a batch gives
// them the bits they get with every row kept.
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
    model = mg_model_load_from_file(mg_test_fixture("models/tiny-f32.gguf"), mg_model_default_params());
    ck_assert_msg(model != NULL, "%s", mg_last_error());
}

static void free_model(void) {
    mg_model_free(model);
    model = NULL;
}

// A session on 2 threads; the tests below vary the context, the cache's type
// and flash attention.
static struct mg_session * new_session(bool flash_attn, int n_ctx, enum mg_type kv_type) {
    struct mg_session_params p = mg_session_default_params();
    p.n_ctx      = n_ctx;
    p.n_threads  = 2;
    p.kv_type    = kv_type;
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
    struct mg_session * s = new_session(fa, 128, MG_TYPE_F32);
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
    struct mg_session * s = new_session(fa, 128, MG_TYPE_F32);
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

// Keeping some rows of a batch (each sequence's last prompt token, and the
// first token of sequence 0, which is not the last of the batch) gives them
// the bits they get when every row is kept: the graph gathers the kept rows
// before the last feed-forward and the LM head (inp_out_ids, one row per
// kept token), and everything after works row by row. Plain and flash
// attention; the batch is longer than -b, so it runs as two graphs, each
// keeping 2 or 3 of its 14 rows.
static void decode_prompts(struct mg_session * s, const bool * keep) {
    enum { N = N_SEQ * N_PROMPT };
    int32_t tok[N], pos[N], seq[N];
    for (int q = 0; q < N_SEQ; q++) {
        for (int i = 0; i < N_PROMPT; i++) {
            const int j = q * N_PROMPT + i;
            tok[j] = prompt_token(q, i), pos[j] = i, seq[j] = q;
        }
    }
    ck_assert_msg(mg_decode_batch(s, &(struct mg_batch) {N, tok, pos, seq, keep}), "%s", mg_last_error());
}

START_TEST(test_kept_rows_equal_all_rows) {
    enum { N = N_SEQ * N_PROMPT, BATCH = N_PROMPT * 2 };
    const bool fa = _i == 1;
    bool       some[N], all[N];
    for (int j = 0; j < N; j++) some[j] = j % N_PROMPT == N_PROMPT - 1 || j == 0, all[j] = true;
    struct mg_session_params p = mg_session_default_params();
    p.n_ctx = 64, p.n_threads = 2, p.kv_type = MG_TYPE_F32, p.flash_attn = fa, p.n_batch = BATCH;
    struct mg_session * a = mg_session_new(model, p);
    struct mg_session * b = mg_session_new(model, p);
    ck_assert(a != NULL && b != NULL);
    decode_prompts(a, some);
    // The second graph (tokens BATCH..N-1) kept N_SEQ / 2 rows: it gave only those.
    const struct mg_cgraph * g = mg_session_graph(a);
    ck_assert_int_eq(g->nodes[g->n_nodes - 1]->ne[1], N_SEQ / 2);
    decode_prompts(b, all);
    int n_compared = 0;
    for (int j = 0; j < N; j++) {
        if (!some[j]) {
            ck_assert_ptr_null(mg_get_logits_ith(a, j));
            continue;
        }
        const float * kept = mg_get_logits_ith(a, j), * every = mg_get_logits_ith(b, j);
        ck_assert(kept != NULL && every != NULL);
        ck_assert_msg(memcmp(kept, every, N_VOCAB * sizeof(float)) == 0,
                      "fa=%d token %d: its logits differ when only some rows are kept (max |diff| %g)", fa, j,
                      (double) max_abs_diff(kept, every));
        n_compared++;
    }
    ck_assert_int_eq(n_compared, N_SEQ + 1);
    mg_session_free(a);
    mg_session_free(b);
}
END_TEST

// Removing a sequence frees exactly its cells; the next batch reuses them,
// and the other sequences go on as if nothing happened.
START_TEST(test_remove_frees_cells) {
    float (*ref)[N_STEPS + 1][N_VOCAB] = references(false);
    struct mg_session * s = new_session(false, 2 * N_PROMPT + 2, MG_TYPE_F32);   // room for two prompts and a little
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
    struct mg_session * s = new_session(false, 128, MG_TYPE_F32);
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
        struct mg_session * alone = new_session(false, 128, MG_TYPE_F32);
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

// Per-sequence streams (n_seq_max streams, kv_unified off): the same
// interleaved prompts and steps as test_batch_of_sequences_equals_each_alone,
// now split equally (llama.cpp's split_equal: the graphs' tokens stream by
// stream) and attended per stream, give each sequence its own decode's
// logits; then prompts of unequal lengths through graphs of at most 6
// tokens (-b 6), which takes several runs of streams and several lengths.
static struct mg_session * new_streams_session(int n_ctx, int n_batch) {
    struct mg_session_params p = mg_session_default_params();
    p.n_ctx     = n_ctx;
    p.n_batch   = n_batch;
    p.n_threads = 2;
    p.kv_type   = MG_TYPE_F32;
    p.n_seq_max = N_SEQ;
    struct mg_session * s = mg_session_new(model, p);
    ck_assert_msg(s != NULL, "%s", mg_last_error());
    ck_assert_int_eq(mg_session_n_stream(s), N_SEQ);
    return s;
}

START_TEST(test_streams_equal_each_alone) {
    float (*ref)[N_STEPS + 1][N_VOCAB] = references(false);
    struct mg_session * s = new_streams_session(128, 512);
    int32_t tok[N_SEQ * N_PROMPT], pos[N_SEQ * N_PROMPT], seq[N_SEQ * N_PROMPT];
    bool    keep[N_SEQ * N_PROMPT];
    for (int i = 0; i < N_PROMPT; i++) {
        for (int q = 0; q < N_SEQ; q++) {
            const int j = i * N_SEQ + q;
            tok[j] = prompt_token(q, i), pos[j] = i, seq[j] = q, keep[j] = i == N_PROMPT - 1;
        }
    }
    ck_assert_msg(mg_decode_batch(s, &(struct mg_batch) {N_SEQ * N_PROMPT, tok, pos, seq, keep}), "%s", mg_last_error());
    for (int q = 0; q < N_SEQ; q++) {
        const float d = max_abs_diff(mg_get_logits_ith(s, (N_PROMPT - 1) * N_SEQ + q), ref[q][0]);
        printf("[seqs] streams seq %d prompt: max |diff| %.3g\n", q, d);
        ck_assert_msg(d <= tol, "streams, sequence %d: prompt logits differ by %g", q, d);
    }
    for (int k = 0; k < N_STEPS; k++) {
        int32_t t[N_SEQ], p[N_SEQ], sq[N_SEQ];
        for (int q = 0; q < N_SEQ; q++) t[q] = step_token(q, k), p[q] = N_PROMPT + k, sq[q] = q;
        const bool all[N_SEQ] = {true, true, true, true};
        ck_assert_msg(mg_decode_batch(s, &(struct mg_batch) {N_SEQ, t, p, sq, all}), "%s", mg_last_error());
        for (int q = 0; q < N_SEQ; q++) {
            const float d = max_abs_diff(mg_get_logits_ith(s, q), ref[q][k + 1]);
            ck_assert_msg(d <= tol, "streams, sequence %d step %d: logits differ by %g", q, k, d);
        }
    }
    mg_session_free(s);

    // Unequal prompts, sequence q with N_PROMPT - q tokens, sequence 2 left
    // out (its stream stays empty between streams 1 and 3), in graphs of 6.
    s = new_streams_session(64, 6);
    int n = 0;
    int last[N_SEQ];
    for (int q = 0; q < N_SEQ; q++) {
        if (q == 2) continue;
        for (int i = 0; i < N_PROMPT - q; i++, n++) tok[n] = prompt_token(q, i), pos[n] = i, seq[n] = q, keep[n] = false;
        keep[n - 1] = true;
        last[q]     = n - 1;
    }
    ck_assert_msg(mg_decode_batch(s, &(struct mg_batch) {n, tok, pos, seq, keep}), "%s", mg_last_error());
    for (int q = 0; q < N_SEQ; q++) {
        if (q == 2) continue;
        struct mg_session * alone = new_session(false, 64, MG_TYPE_F32);
        int32_t             whole[N_PROMPT];
        for (int i = 0; i < N_PROMPT - q; i++) whole[i] = prompt_token(q, i);
        ck_assert(mg_decode(alone, whole, N_PROMPT - q, false));
        const float d = max_abs_diff(mg_get_logits_ith(s, last[q]), mg_get_logits(alone));
        ck_assert_msg(d <= tol, "streams, -b 6, sequence %d of %d tokens: logits differ by %g", q, N_PROMPT - q, d);
        mg_session_free(alone);
    }
    ck_assert_int_eq(mg_session_cells_used(s), n);
    mg_session_free(s);
    free(ref);
}
END_TEST

// What streams refuse, each changing nothing and saying why: a sequence id
// without a stream, more tokens than a sequence's stream holds (though the
// cache as a whole has room), copying a sequence into another's stream, and
// a context that does not split evenly.
START_TEST(test_streams_refusals) {
    struct mg_session * s = new_streams_session(64, 512);   // 4 streams of 16 cells
    int32_t tok[20], pos[20], seq[20];
    for (int i = 0; i < 20; i++) tok[i] = prompt_token(0, i), pos[i] = i, seq[i] = 0;
    seq[3] = N_SEQ;
    ck_assert(!mg_decode_batch(s, &(struct mg_batch) {4, tok, pos, seq, NULL}));
    ck_assert_msg(strstr(mg_last_error(), "sequence id 4 at index 3") != NULL, "%s", mg_last_error());
    seq[3] = 0;
    ck_assert(!mg_decode_batch(s, &(struct mg_batch) {17, tok, pos, seq, NULL}));
    ck_assert_msg(strstr(mg_last_error(), "sequence 0's stream holds 16 positions") != NULL, "%s", mg_last_error());
    ck_assert_int_eq(mg_session_cells_used(s), 0);
    ck_assert_msg(mg_decode_batch(s, &(struct mg_batch) {16, tok, pos, seq, NULL}), "%s", mg_last_error());
    ck_assert(!mg_session_seq_cp(s, 0, 1, 0, -1));
    ck_assert_msg(strstr(mg_last_error(), "not built yet") != NULL, "%s", mg_last_error());
    ck_assert_int_eq(mg_session_seq_pos_max(s, 1), -1);
    mg_session_free(s);
    struct mg_session_params p = mg_session_default_params();
    p.n_ctx     = 66;
    p.n_seq_max = N_SEQ;
    ck_assert(mg_session_new(model, p) == NULL);
    ck_assert_msg(strstr(mg_last_error(), "n_ctx 66 is not a multiple of n_seq_max 4") != NULL, "%s", mg_last_error());
    p.flash_attn = true;   // flash attention keeps one pool: any n_ctx
    s = mg_session_new(model, p);
    ck_assert_msg(s != NULL, "%s", mg_last_error());
    ck_assert_int_eq(mg_session_n_stream(s), 1);
    mg_session_free(s);
}
END_TEST

START_TEST(test_malformed_batch_changes_nothing) {
    struct mg_session * s = new_session(false, 64, MG_TYPE_F32);
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

// ---------------------------------------------------------------------------
// Shifting a sequence (mg_session_seq_add)
//
// The property: RoPE turns pair i of a key at position p by the angle
// p * theta_i, and q . k depends on the positions only through their
// difference. So a cache whose positions were moved by d, its keys turned by
// d more, must give the logits of the same tokens decoded from scratch at the
// moved positions. The two differ only by float rounding: turning by p then
// by d is not bit for bit a turn by p + d (each angle's cos and sin rounded,
// then multiplied out), and the prompt's own attention ran at other absolute
// angles. What a broken K-shift gives is known too: a cache NOT turned is
// what a prompt decoded at 0..n-1 holds when the steps come at n+d.. (every
// cell is visible to them either way), and turning by -d instead of +d is
// the same mistake twice as far (steps at n+2d..). Both must fail the bound.
// A shift that turned the wrong dimensions (NORMAL pairs instead of NEOX, or
// half of them) turns most pairs by wrong angles, an error of the size of
// these two; the case "tail +d" catches a shift applied to cells it should
// not touch.
// ---------------------------------------------------------------------------

enum { SHIFT_D = 5, SHIFT_FAR = 300, SHIFT_PART = 3, SHIFT_HEAD = 4 };

// Measured (make -C full build/tests/full_test_seqs; the [shift] lines):
// with the steps at positions up to 15, an F32 cache gives logits within
// 1e-5 of decoding from scratch (they have a standard deviation of about 5),
// an F16 cache within 1.3e-2, because its turned keys are rounded to F16
// twice (stored, then turned and stored again) where the reference's are
// rounded once: 2^-11 of every element. The F32 error grows with the angles
// (an angle's rounding is relative to it): 6.5e-5 with the steps at
// positions 307..309 ("+far"). The bounds leave a margin of 3-4x over the
// worst case; a cache left unturned is 8.3 off, turned the wrong way 10.3.
static const float shift_tol_f32 = 2e-4f, shift_tol_f16 = 5e-2f;

// One session's story: the prompt at first + i (+ gap from token gap_from
// on, where the tokens may go to sequence tail_seq instead of 0: they then
// do not see the head, and are copied to sequence 0 afterwards), then seq_rm
// of positions [0, rm_end), then seq_add of [add_p0, end) by add_delta, then
// N_STEPS tokens one by one from position step0.
struct shift_script {
    int first, gap_from, gap, tail_seq;
    int rm_end;
    int add_p0, add_delta;
    int step0;
};

// The steps' logits of a script; returns how many K-shifts the session ran.
static int run_script(bool fa, enum mg_type kv_type, const struct shift_script * sc, float out[N_STEPS][N_VOCAB]) {
    struct mg_session * s = new_session(fa, 64, kv_type);
    int32_t tok[N_PROMPT], pos[N_PROMPT], seq[N_PROMPT];
    for (int i = 0; i < N_PROMPT; i++) {
        tok[i] = prompt_token(7, i);
        pos[i] = sc->first + i + (i >= sc->gap_from ? sc->gap : 0);
        seq[i] = i >= sc->gap_from ? sc->tail_seq : 0;
    }
    const struct mg_batch prompt = {N_PROMPT, tok, pos, seq, NULL};
    ck_assert_msg(mg_decode_batch(s, &prompt), "%s", mg_last_error());
    if (sc->tail_seq != 0) {   // the tail joins sequence 0 and leaves its own
        mg_session_seq_cp(s, sc->tail_seq, 0, 0, -1);
        mg_session_seq_rm(s, sc->tail_seq, 0, -1);
    }
    if (sc->rm_end > 0) mg_session_seq_rm(s, 0, 0, sc->rm_end);
    if (sc->add_delta != 0) {
        ck_assert_msg(mg_session_seq_add(s, 0, sc->add_p0, -1, sc->add_delta), "%s", mg_last_error());
    }
    for (int k = 0; k < N_STEPS; k++) {
        const int32_t t = step_token(7, k), p = sc->step0 + k, q = 0;
        const struct mg_batch step = {1, &t, &p, &q, NULL};
        ck_assert_msg(mg_decode_batch(s, &step), "%s", mg_last_error());
        memcpy(out[k], mg_get_logits(s), sizeof(out[k]));
    }
    const int n_shifts = mg_session_get_stats(s).n_k_shifts;
    mg_session_free(s);
    return n_shifts;
}

static float steps_diff(float a[N_STEPS][N_VOCAB], float b[N_STEPS][N_VOCAB]) {
    float worst = 0.0f;
    for (int k = 0; k < N_STEPS; k++) {
        const float d = max_abs_diff(a[k], b[k]);
        if (!(d <= worst)) worst = d;
    }
    return worst;
}

enum { N = N_PROMPT };
static const struct {
    const char *        name;
    struct shift_script shifted, scratch;
} shift_cases[] = {
    // +d: decoded at 0..n-1, moved to d..; from scratch at d..
    {"+d", {0, N, 0, 0, 0, 0, SHIFT_D, N + SHIFT_D}, {SHIFT_D, N, 0, 0, 0, 0, 0, N + SHIFT_D}},
    // -d: decoded at d.., moved to 0..; from scratch at 0..
    {"-d", {SHIFT_D, N, 0, 0, 0, 0, -SHIFT_D, N}, {0, N, 0, 0, 0, 0, 0, N}},
    // Far: larger angles, larger rounding.
    {"+far", {0, N, 0, 0, 0, 0, SHIFT_FAR, N + SHIFT_FAR}, {SHIFT_FAR, N, 0, 0, 0, 0, 0, N + SHIFT_FAR}},
    // Only the tail moves: cells turned by d beside cells turned by 0. The
    // tail was decoded as its own sequence, so that moving it away from the
    // head changes no distance it was computed with.
    {"tail +d", {0, SHIFT_PART, 0, 1, 0, SHIFT_PART, SHIFT_D, N + SHIFT_D},
                {0, SHIFT_PART, SHIFT_D, 1, 0, 0, 0, N + SHIFT_D}},
    // The context shift: the first k positions removed, the rest moved down
    // by k. The rest was computed while it saw the removed head, so "from
    // scratch" is the same decode with the head removed and NOT shifted,
    // and the steps k later: every distance between a step and a cell is
    // the same.
    {"rm head, -k", {0, N, 0, 0, SHIFT_HEAD, SHIFT_HEAD, -SHIFT_HEAD, N - SHIFT_HEAD},
                    {0, N, 0, 0, SHIFT_HEAD, 0, 0, N}},
};
static const struct shift_script unrotated  = {0, N, 0, 0, 0, 0, 0, N + SHIFT_D};       // "+d" without the turn
static const struct shift_script wrong_sign = {0, N, 0, 0, 0, 0, 0, N + 2 * SHIFT_D};   // "+d" turned by -d

// Every case with plain and flash attention (the caches' V differ, K does
// not), with an F32 and an F16 cache.
START_TEST(test_shift_equals_decoding_at_shifted_positions) {
    const bool         fa      = _i & 1;
    const enum mg_type kv_type = _i & 2 ? MG_TYPE_F16 : MG_TYPE_F32;
    const char *       kv_name = kv_type == MG_TYPE_F16 ? "f16" : "f32";
    const float        tol_kv  = kv_type == MG_TYPE_F16 ? shift_tol_f16 : shift_tol_f32;
    float (*a)[N_VOCAB] = malloc(N_STEPS * sizeof(*a)), (*b)[N_VOCAB] = malloc(N_STEPS * sizeof(*b));
    ck_assert(a != NULL && b != NULL);
    for (size_t c = 0; c < sizeof(shift_cases) / sizeof(shift_cases[0]); c++) {
        ck_assert_int_eq(run_script(fa, kv_type, &shift_cases[c].shifted, a), 1);   // one K-shift, before step 0
        ck_assert_int_eq(run_script(fa, kv_type, &shift_cases[c].scratch, b), 0);
        const float d = steps_diff(a, b);
        printf("[shift] fa=%d kv=%s %-12s max |diff| %.3g\n", fa, kv_name, shift_cases[c].name, d);
        ck_assert_msg(d <= tol_kv, "fa=%d kv=%s %s: logits differ by %g (bound %g)", fa, kv_name,
                      shift_cases[c].name, d, tol_kv);
    }
    // The bound would catch a shift that was not done, or done the wrong way.
    run_script(fa, kv_type, &shift_cases[0].scratch, b);
    const struct shift_script * wrong[2] = {&unrotated, &wrong_sign};
    for (int w = 0; w < 2; w++) {
        run_script(fa, kv_type, wrong[w], a);
        const float d = steps_diff(a, b);
        printf("[shift] fa=%d kv=%s %-12s max |diff| %.3g\n", fa, kv_name, w == 0 ? "unturned" : "wrong sign", d);
        ck_assert_msg(d > 10 * tol_kv, "fa=%d kv=%s: a wrong K-shift (%s) is only %g off", fa, kv_name,
                      w == 0 ? "none" : "-d", d);
    }
    free(a);
    free(b);
}
END_TEST

// Positions and cells after a shift, and what seq_add refuses.
START_TEST(test_shift_positions_and_refusals) {
    struct mg_session * s = new_session(false, 64, MG_TYPE_F32);
    int32_t tok[N_PROMPT];
    for (int i = 0; i < N_PROMPT; i++) tok[i] = prompt_token(3, i);
    ck_assert(mg_decode(s, tok, N_PROMPT, false));                   // positions 0..6
    ck_assert(mg_session_seq_add(s, 0, 2, -1, 10));                  // 2..6 -> 12..16
    ck_assert_int_eq(mg_session_seq_pos_max(s, 0), N_PROMPT - 1 + 10);
    ck_assert_int_eq(mg_session_n_past(s), N_PROMPT + 10);
    ck_assert(mg_session_seq_add(s, 0, 0, 2, 0));                    // delta 0: nothing to do
    ck_assert(mg_session_seq_add(s, 0, 0, 13, -12));                 // 0, 1, 12 -> -12, -11, 0: two freed
    ck_assert_int_eq(mg_session_cells_used(s), N_PROMPT - 2);
    ck_assert_int_eq(mg_session_seq_pos_max(s, 0), 16);
    mg_session_seq_rm(s, 0, 0, 1);                                   // the cell at 0 (once 12) goes
    ck_assert_int_eq(mg_session_cells_used(s), N_PROMPT - 3);
    ck_assert(mg_session_seq_add(s, 0, -5, -1, -13));                // p0 < 0 is 0; 13..16 -> 0..3
    ck_assert_int_eq(mg_session_seq_pos_max(s, 0), 3);
    ck_assert(mg_session_seq_add(s, 0, 0, -1, -100));                // all of it before 0: all gone
    ck_assert_int_eq(mg_session_cells_used(s), 0);
    ck_assert_int_eq(mg_session_seq_pos_max(s, 0), -1);
    // Nothing was left to turn: the next decode runs no K-shift.
    const int32_t t = 5;
    ck_assert(mg_decode(s, &t, 1, false));
    ck_assert_int_eq(mg_session_get_stats(s).n_k_shifts, 0);

    // Bad arguments, and a position shared with another sequence: refused, nothing moved.
    mg_session_seq_rm(s, -1, 0, -1);
    ck_assert(mg_decode(s, tok, N_PROMPT, false));
    mg_session_seq_cp(s, 0, 1, 0, 3);                                 // 0..2 shared with sequence 1
    const struct {
        int          seq, p0, p1, delta;
        const char * says;
    } bad[] = {
        {-1, 0, -1, 1, "sequence id -1"},
        {MG_MAX_SEQ, 0, -1, 1, "sequence id 64"},
        {0, 5, 2, 1, "ends before it starts"},
        {0, 0, -1, 1, "shared with other sequences"},
        {0, 2, 4, 1, "shared with other sequences"},
        {0, 3, -1, 2147483647, "overflows"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ck_assert(!mg_session_seq_add(s, bad[i].seq, bad[i].p0, bad[i].p1, bad[i].delta));
        ck_assert_msg(strstr(mg_last_error(), bad[i].says) != NULL, "case %zu: %s", i, mg_last_error());
        ck_assert_int_eq(mg_session_seq_pos_max(s, 0), N_PROMPT - 1);
        ck_assert_int_eq(mg_session_seq_pos_max(s, 1), 2);
        ck_assert_int_eq(mg_session_cells_used(s), N_PROMPT);
    }
    ck_assert(mg_session_seq_add(s, 0, 3, -1, 1));                     // the unshared part may move
    ck_assert_int_eq(mg_session_seq_pos_max(s, 0), N_PROMPT);
    mg_session_free(s);
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s  = suite_create("seqs");
    TCase * tc = tcase_create("seqs");
    tcase_set_timeout(tc, 300);
    tcase_add_unchecked_fixture(tc, load_model, free_model);
    tcase_add_loop_test(tc, test_batch_of_sequences_equals_each_alone, 0, 2);
    tcase_add_loop_test(tc, test_kept_rows_equal_all_rows, 0, 2);
    tcase_add_test(tc, test_remove_frees_cells);
    tcase_add_test(tc, test_shared_prefix_stored_once);
    tcase_add_test(tc, test_streams_equal_each_alone);
    tcase_add_test(tc, test_streams_refusals);
    tcase_add_test(tc, test_malformed_batch_changes_nothing);
    tcase_add_loop_test(tc, test_shift_equals_decoding_at_shifted_positions, 0, 4);
    tcase_add_test(tc, test_shift_positions_and_refusals);
    suite_add_tcase(s, tc);
    return s;
}
