// test_session.c - decode calls and sampling: graph reuse, the context's
// limits, bad token ids, rewinding, and the sampler chain checked on
// hand-made logits whose surviving tokens and probabilities are computed here.
//
// The model is fixtures/models/tiny-f32.gguf; the prompt is the fox prompt,
// whose ids come from fixtures/README.md.
#include "harness.h"
#include "model.h"
#include "sampling.h"
#include "session.h"
#include "trace.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N_VOCAB = 6400, N_FOX = 18 };

// fixtures/README.md: "The quick brown fox jumps over the lazy dog." without BOS/EOS.
static const int32_t fox[N_FOX] = {750, 5658, 363, 2079, 113, 341, 2979, 1315, 457,
                                   3385, 2141, 309, 3090, 125, 124, 1041, 106, 49};

// A few tokens to continue with (any ids of the vocabulary would do).
static const int32_t more[4] = {3678, 2491, 955, 1505};

static const float tol = 1e-3f;   // fixtures/README.md: tiny-f32 against the F32-cache reference

static struct mg_model * model;

static void load_model(void) {
    model = mg_model_load(mg_test_fixture("models/tiny-f32.gguf"));
    ck_assert_msg(model != NULL, "%s", mg_last_error());
}

static void free_model(void) {
    mg_model_free(model);
    model = NULL;
}

static struct mg_session * new_session(int n_ctx, int n_batch) {
    struct mg_session_params p = mg_session_default_params();
    p.n_ctx     = n_ctx;
    p.n_batch   = n_batch;
    p.n_threads = 2;
    p.kv_type   = MG_TYPE_F32;
    struct mg_session * s = mg_session_new(model, p);
    ck_assert_msg(s != NULL, "%s", mg_last_error());
    return s;
}

static float * copy_logits(const struct mg_session * s, int n_rows) {
    float * c = malloc((size_t) n_rows * N_VOCAB * sizeof(float));
    ck_assert_ptr_nonnull(c);
    memcpy(c, mg_get_logits(s), (size_t) n_rows * N_VOCAB * sizeof(float));
    return c;
}

static float max_abs_diff(const float * a, const float * b, size_t n) {
    float worst = 0.0f;
    for (size_t i = 0; i < n; i++) {
        const float d = fabsf(a[i] - b[i]);
        if (!(d <= worst)) worst = d;   // NaN counts as a difference
    }
    return worst;
}

// ---------------------------------------------------------------------------
// Sessions
// ---------------------------------------------------------------------------

START_TEST(test_defaults) {
    struct mg_session_params p = mg_session_default_params();
    ck_assert_int_eq(p.n_ctx, 0);
    ck_assert_int_ge(p.n_threads, 1);
    ck_assert_int_ge(p.n_batch, 1);
    ck_assert_int_eq(p.kv_type, MG_TYPE_F16);   // llama.cpp's default
    struct mg_session * s = mg_session_new(model, p);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(mg_session_n_ctx(s), 512);   // min(4096, the model's context_length 512)
    ck_assert_int_eq(mg_session_n_past(s), 0);
    ck_assert_ptr_eq(mg_session_model(s), model);
    // K and V, every layer, every position: 2 * n_layer * n_ctx * head_dim * n_head_kv values of 2 bytes.
    ck_assert_uint_eq(mg_session_get_stats(s).kv_size, (size_t) 2 * 2 * 512 * 64 * 2 * 2);
    mg_session_free(s);

    s = new_session(100, 512);
    ck_assert_int_eq(mg_session_n_ctx(s), 100);
    ck_assert_uint_eq(mg_session_get_stats(s).kv_size, (size_t) 2 * 2 * 100 * 64 * 2 * 4);   // F32
    mg_session_free(s);
}
END_TEST

// After the prompt, N one-token decodes build one graph and reuse it N-1
// times; and the reused graph computes the right thing for its new inputs:
// the same logits as one batch over prompt + tokens.
START_TEST(test_graph_reuse) {
    enum { N = 4 };
    struct mg_session * s = new_session(512, 512);
    ck_assert(mg_decode(s, fox, N_FOX, false));
    struct mg_session_stats st0 = mg_session_get_stats(s);
    ck_assert_int_eq(st0.n_decode_calls, 1);
    ck_assert_int_eq(st0.n_graphs_built, 1);
    ck_assert_int_eq(st0.n_graphs_reused, 0);
    ck_assert_int_gt(st0.n_nodes, 0);
    ck_assert_uint_gt(st0.compute_buffer_size, 0);

    float * step_logits[N];
    for (int i = 0; i < N; i++) {
        ck_assert(mg_decode(s, &more[i], 1, false));
        step_logits[i] = copy_logits(s, 1);
    }
    struct mg_session_stats st = mg_session_get_stats(s);
    ck_assert_int_eq(st.n_decode_calls, 1 + N);
    ck_assert_int_eq(st.n_graphs_built, 2);
    ck_assert_int_eq(st.n_graphs_reused, N - 1);
    ck_assert_int_eq(mg_session_n_past(s), N_FOX + N);
    mg_session_free(s);

    int32_t all[N_FOX + N];
    memcpy(all, fox, sizeof(fox));
    memcpy(all + N_FOX, more, sizeof(more));
    s = new_session(512, 512);
    ck_assert(mg_decode(s, all, N_FOX + N, true));
    for (int i = 0; i < N; i++) {
        const float * row = mg_get_logits(s) + (size_t) (N_FOX + i) * N_VOCAB;
        const float d = max_abs_diff(step_logits[i], row, N_VOCAB);
        ck_assert_msg(d <= tol, "decode step %d (graph %s) differs from the batch by %g", i,
                      i == 0 ? "built" : "reused", (double) d);
        free(step_logits[i]);
    }
    mg_session_free(s);
}
END_TEST

// The reuse test compares the graph's shape: tokens in the batch and the
// cache length it attends over, n_past + n rounded up to the session's
// padding (32 in chapter 09, 64 in full/: read from the prompt's graph,
// which attends over one padding's worth). Crossing a multiple of it changes
// the shape, so the graph is rebuilt there and only there; the count is
// predicted from the shapes alone.
START_TEST(test_graph_rebuilt_at_padding) {
    enum { STEPS = 60 };
    struct mg_session * s = new_session(512, 512);
    int n_built = 0, last_n = -1, last_kv = -1, n_past = 0;
    ck_assert(mg_decode(s, fox, N_FOX, false));
    const int pad = mg_session_get_stats(s).n_kv;   // N_FOX < the padding
    ck_assert_msg(pad == 32 || pad == 64, "the prompt's graph attends over %d positions", pad);
    for (int call = 0; call <= STEPS; call++) {
        const int n = call == 0 ? N_FOX : 1, n_kv = (n_past + n + pad - 1) / pad * pad;
        if (n != last_n || n_kv != last_kv) n_built++;
        last_n = n, last_kv = n_kv, n_past += n;
        if (call > 0) ck_assert(mg_decode(s, &more[call % 4], 1, false));
        const struct mg_session_stats st = mg_session_get_stats(s);
        ck_assert_msg(st.n_graphs_built == n_built, "call %d (n_past %d): %d graphs built, expected %d", call, n_past,
                      st.n_graphs_built, n_built);
        ck_assert_int_eq(st.n_kv, n_kv);
        ck_assert_int_eq(st.n_graphs_built + st.n_graphs_reused, call + 1);
    }
    // The prompt, the first step, then one more at each multiple of the padding crossed.
    ck_assert_int_eq(n_built, 2 + (N_FOX + STEPS - 1) / pad);
    mg_session_free(s);
}
END_TEST

// A batch of another shape frees the previous graph and builds a new one
// right after the previous compute returned. The pool's workers must be done
// with the old graph by then: a worker that still reads it (say, its node
// count, after the last barrier) reads freed memory, and may go on to compute
// nodes of the new graph while it is being built. Alternating shapes on 4
// threads makes that moment happen a hundred times.
START_TEST(test_rebuild_right_after_compute) {
    struct mg_session_params p = mg_session_default_params();
    p.n_ctx     = 64;
    p.n_threads = 4;
    p.kv_type   = MG_TYPE_F32;
    struct mg_session * s = mg_session_new(model, p);
    ck_assert_ptr_nonnull(s);
    ck_assert(mg_decode(s, fox, 4, false));
    float * one = NULL;
    for (int round = 0; round < 50; round++) {
        mg_session_rewind(s, 4);
        ck_assert(mg_decode(s, &fox[4], 1, false));   // shape {1 token}
        if (one == NULL) {
            one = copy_logits(s, 1);
        } else {
            ck_assert(memcmp(one, mg_get_logits(s), N_VOCAB * sizeof(float)) == 0);
        }
        ck_assert(mg_decode(s, &fox[5], 2, false));   // shape {2 tokens}
    }
    ck_assert_int_eq(mg_session_get_stats(s).n_graphs_built, 1 + 100);
    free(one);
    mg_session_free(s);
}
END_TEST

// all_logits keeps every row; its last row is what a last-only decode gives.
START_TEST(test_all_logits_last_row) {
    struct mg_session * s = new_session(512, 512);
    ck_assert(mg_decode(s, fox, N_FOX, false));
    float * last = copy_logits(s, 1);
    mg_session_free(s);
    s = new_session(512, 512);
    ck_assert(mg_decode(s, fox, N_FOX, true));
    const float d = max_abs_diff(last, mg_get_logits(s) + (size_t) (N_FOX - 1) * N_VOCAB, N_VOCAB);
    ck_assert_msg(d <= tol, "last row differs by %g", (double) d);
    // The rows are different positions: the first one is not the last one.
    ck_assert_float_gt(max_abs_diff(mg_get_logits(s), last, N_VOCAB), 1.0f);
    free(last);
    mg_session_free(s);
}
END_TEST

// A prompt longer than the context: an error naming both sizes, nothing decoded.
START_TEST(test_prompt_longer_than_context) {
    struct mg_session * s = new_session(16, 512);
    mg_set_error("%s", "");
    ck_assert(!mg_decode(s, fox, N_FOX, false));
    const char * e = mg_last_error();
    ck_assert_msg(strstr(e, "18") != NULL && strstr(e, "16") != NULL, "the sizes are not named: %s", e);
    ck_assert_int_eq(mg_session_n_past(s), 0);
    ck_assert_int_eq(mg_session_get_stats(s).n_graphs_built, 0);
    // The session is still usable: the first 16 tokens fit exactly.
    ck_assert_msg(mg_decode(s, fox, 16, false), "%s", mg_last_error());
    ck_assert_int_eq(mg_session_n_past(s), 16);
    mg_session_free(s);
}
END_TEST

// Up to exactly n_ctx positions work, with the right logits at the last one;
// one more is refused without changing anything; rewinding frees the room.
START_TEST(test_context_exactly_full) {
    enum { N_CTX = N_FOX + 2 };
    struct mg_session * s = new_session(N_CTX, 512);
    ck_assert(mg_decode(s, fox, N_FOX, false));
    ck_assert(mg_decode(s, &more[0], 1, false));
    ck_assert_msg(mg_decode(s, &more[1], 1, false), "position %d of %d: %s", N_CTX - 1, N_CTX, mg_last_error());
    ck_assert_int_eq(mg_session_n_past(s), N_CTX);
    float * at_full = copy_logits(s, 1);

    ck_assert(!mg_decode(s, &more[2], 1, false));
    const char * e = mg_last_error();
    ck_assert_msg(strstr(e, "20") != NULL, "the context size is not named: %s", e);
    ck_assert_int_eq(mg_session_n_past(s), N_CTX);
    ck_assert_int_eq(mg_session_get_stats(s).n_decode_calls, 3);

    // The same tokens in a large context give the same logits at position N_CTX-1.
    struct mg_session * big = new_session(512, 512);
    int32_t all[N_CTX];
    memcpy(all, fox, sizeof(fox));
    all[N_FOX] = more[0];
    all[N_FOX + 1] = more[1];
    ck_assert(mg_decode(big, all, N_CTX, false));
    const float d = max_abs_diff(at_full, mg_get_logits(big), N_VOCAB);
    ck_assert_msg(d <= tol, "logits at the last position of a full context differ by %g", (double) d);
    mg_session_free(big);

    mg_session_rewind(s, N_CTX - 1);
    ck_assert_msg(mg_decode(s, &more[2], 1, false), "%s", mg_last_error());
    ck_assert_int_eq(mg_session_n_past(s), N_CTX);
    free(at_full);
    mg_session_free(s);
}
END_TEST

START_TEST(test_token_out_of_range) {
    struct mg_session * s = new_session(64, 512);
    const int32_t bad[] = {-1, N_VOCAB, N_VOCAB + 1000};
    for (int i = 0; i < 3; i++) {
        int32_t tokens[3] = {fox[0], bad[i], fox[1]};
        ck_assert(!mg_decode(s, tokens, 3, false));
        char id[32];
        snprintf(id, sizeof(id), "%d", bad[i]);
        ck_assert_msg(strstr(mg_last_error(), id) != NULL, "token %s is not named: %s", id, mg_last_error());
        ck_assert_int_eq(mg_session_n_past(s), 0);
    }
    const int32_t edge[2] = {0, N_VOCAB - 1};   // the first and last ids are fine
    ck_assert_msg(mg_decode(s, edge, 2, false), "%s", mg_last_error());
    ck_assert_int_eq(mg_session_n_past(s), 2);
    mg_session_free(s);
}
END_TEST

START_TEST(test_zero_tokens) {
    struct mg_session * s = new_session(64, 512);
    ck_assert(!mg_decode(s, fox, 0, false));
    ck_assert_int_eq(mg_session_n_past(s), 0);
    mg_session_free(s);
}
END_TEST

// Rewinding and decoding the same tokens gives the same logits, even after
// other tokens were written into the forgotten positions in between.
START_TEST(test_rewind) {
    struct mg_session * s = new_session(64, 512);
    ck_assert(mg_decode(s, fox, N_FOX, false));
    float * after_prompt = copy_logits(s, 1);
    ck_assert(mg_decode(s, more, 3, false));
    float * first = copy_logits(s, 1);

    mg_session_rewind(s, N_FOX);
    ck_assert_int_eq(mg_session_n_past(s), N_FOX);
    const int32_t other[2] = {5, 6000};
    ck_assert(mg_decode(s, other, 2, false));
    ck_assert_float_gt(max_abs_diff(mg_get_logits(s), first, N_VOCAB), 1.0f);   // another continuation

    mg_session_rewind(s, N_FOX);
    ck_assert(mg_decode(s, more, 3, false));
    ck_assert_msg(memcmp(mg_get_logits(s), first, N_VOCAB * sizeof(float)) == 0,
                  "the same tokens at the same positions gave other logits (max |diff| %g)",
                  (double) max_abs_diff(mg_get_logits(s), first, N_VOCAB));

    // Back into the prompt: its last 8 tokens again, as one batch.
    mg_session_rewind(s, N_FOX - 8);
    ck_assert(mg_decode(s, fox + N_FOX - 8, 8, false));
    const float d = max_abs_diff(mg_get_logits(s), after_prompt, N_VOCAB);
    ck_assert_msg(d <= tol, "re-decoding the end of the prompt differs by %g", (double) d);

    // And from nothing.
    mg_session_rewind(s, 0);
    ck_assert_int_eq(mg_session_n_past(s), 0);
    ck_assert(mg_decode(s, fox, N_FOX, false));
    ck_assert_msg(memcmp(mg_get_logits(s), after_prompt, N_VOCAB * sizeof(float)) == 0,
                  "rewind to 0 changed the prompt's logits");
    free(after_prompt);
    free(first);
    mg_session_free(s);
}
END_TEST

// ---------------------------------------------------------------------------
// Sampling, on the model's logits and on hand-made ones
// ---------------------------------------------------------------------------

// No filters, no penalty: every knob at its "off" value.
static struct mg_sampler_params plain(float temp, uint64_t seed) {
    struct mg_sampler_params p = mg_sampler_default_params();
    p.temp = temp;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.repeat_penalty = 1.0f;
    p.seed = seed;
    return p;
}

START_TEST(test_default_sampler_params) {
    // llama.cpp's defaults, as sampling.h promises.
    const struct mg_sampler_params p = mg_sampler_default_params();
    ck_assert_float_eq_tol(p.temp, 0.8f, 1e-6f);
    ck_assert_int_eq(p.top_k, 40);
    ck_assert_float_eq_tol(p.top_p, 0.95f, 1e-6f);
    ck_assert_float_eq_tol(p.min_p, 0.05f, 1e-6f);
    ck_assert_float_eq(p.repeat_penalty, 1.0f);
    ck_assert_int_eq(p.repeat_last_n, 64);
}
END_TEST

START_TEST(test_argmax) {
    const float a[] = {1.0f, 3.0f, -2.0f, 3.0f, 2.9f};
    ck_assert_int_eq(mg_argmax(a, 5), 1);   // ties: the lower id
    const float b[] = {-5.0f, -4.0f, -3.0f};
    ck_assert_int_eq(mg_argmax(b, 3), 2);   // the last one, all negative
    const float c[] = {7.0f};
    ck_assert_int_eq(mg_argmax(c, 1), 0);
    const float d[] = {-INFINITY, -INFINITY, 0.5f, -INFINITY};
    ck_assert_int_eq(mg_argmax(d, 4), 2);
}
END_TEST

// temp 0 is greedy whatever the filters say: the first highest logit.
START_TEST(test_greedy_is_argmax) {
    uint64_t rng = 42;
    float * logits = malloc(N_VOCAB * sizeof(float));
    struct mg_sampler_params p = mg_sampler_default_params();
    p.temp = 0.0f;
    struct mg_sampler * smp = mg_sampler_new(p, N_VOCAB);
    for (int round = 0; round < 50; round++) {
        mg_test_fill_uniform(logits, N_VOCAB, &rng, -10.0f, 10.0f);
        int32_t best = 0;   // a naive argmax, here
        for (int32_t i = 1; i < N_VOCAB; i++) best = logits[i] > logits[best] ? i : best;
        ck_assert_int_eq(mg_sampler_sample(smp, logits), best);
        ck_assert_int_eq(mg_argmax(logits, N_VOCAB), best);
    }
    mg_sampler_free(smp);
    free(logits);

    // On the model: greedy after the fox prompt is the reference's first greedy token (fixtures).
    struct mg_session * s = new_session(64, 512);
    ck_assert(mg_decode(s, fox, N_FOX, false));
    smp = mg_sampler_new(p, N_VOCAB);
    ck_assert_int_eq(mg_sampler_sample(smp, mg_get_logits(s)), 3678);
    ck_assert_int_eq(mg_argmax(mg_get_logits(s), N_VOCAB), 3678);
    mg_sampler_free(smp);
    mg_session_free(s);
}
END_TEST

// The same seed draws the same sequence; another seed another one.
START_TEST(test_seed_repeats) {
    enum { N = 300 };
    float * logits = malloc(N_VOCAB * sizeof(float));
    uint64_t rng = 7;
    mg_test_fill_uniform(logits, N_VOCAB, &rng, 0.0f, 1.0f);   // a broad distribution
    struct mg_sampler_params p = mg_sampler_default_params();
    p.seed = 1234;
    struct mg_sampler * a = mg_sampler_new(p, N_VOCAB);
    struct mg_sampler * b = mg_sampler_new(p, N_VOCAB);
    p.seed = 1235;
    struct mg_sampler * c = mg_sampler_new(p, N_VOCAB);
    int n_same_as_c = 0, n_distinct = 0;
    int32_t seen[N];
    for (int i = 0; i < N; i++) {
        const int32_t ta = mg_sampler_sample(a, logits), tb = mg_sampler_sample(b, logits);
        const int32_t tc = mg_sampler_sample(c, logits);
        ck_assert_int_eq(ta, tb);
        ck_assert(ta >= 0 && ta < N_VOCAB);
        n_same_as_c += ta == tc;
        bool dup = false;
        for (int j = 0; j < n_distinct && !dup; j++) dup = seen[j] == ta;
        if (!dup) seen[n_distinct++] = ta;
    }
    // top-k 40 of a flat distribution: many tokens come up, and another seed
    // agrees only by chance (about 1 in 40 draws).
    ck_assert_int_gt(n_distinct, 20);
    ck_assert_int_lt(n_same_as_c, N / 4);
    mg_sampler_free(a);
    mg_sampler_free(b);
    mg_sampler_free(c);
    free(logits);
}
END_TEST

START_TEST(test_top_k_1_is_greedy) {
    float * logits = malloc(N_VOCAB * sizeof(float));
    uint64_t rng = 99;
    struct mg_sampler_params p = plain(1.5f, 5);
    p.top_k = 1;
    struct mg_sampler * smp = mg_sampler_new(p, N_VOCAB);
    for (int round = 0; round < 50; round++) {
        mg_test_fill_uniform(logits, N_VOCAB, &rng, -3.0f, 3.0f);
        ck_assert_int_eq(mg_sampler_sample(smp, logits), mg_argmax(logits, N_VOCAB));
    }
    mg_sampler_free(smp);
    free(logits);
}
END_TEST

// The four-token distribution of the filter tests: probabilities 0.5, 0.3,
// 0.15, 0.05, given as logits log(p) + 3 (softmax ignores the shift).
static const double probs4[4] = {0.5, 0.3, 0.15, 0.05};

static void logits4(float * out) {
    for (int i = 0; i < 4; i++) out[i] = (float) (log(probs4[i]) + 3.0);
}

// Draw n tokens and check that only `kept` tokens come up, each with a
// frequency within 6 standard deviations (+ 0.005) of want[i]. want[] of the
// dropped tokens is 0.
static void check_frequencies(struct mg_sampler_params p, const double * want, const char * what) {
    enum { N = 10000 };
    float logits[4];
    logits4(logits);
    struct mg_sampler * smp = mg_sampler_new(p, 4);
    int count[4] = {0, 0, 0, 0};
    for (int i = 0; i < N; i++) {
        const int32_t t = mg_sampler_sample(smp, logits);
        ck_assert_msg(t >= 0 && t < 4, "%s: drew %d", what, t);
        count[t]++;
    }
    for (int i = 0; i < 4; i++) {
        if (want[i] == 0.0) {
            ck_assert_msg(count[i] == 0, "%s: token %d should be filtered out, drawn %d times", what, i, count[i]);
            continue;
        }
        const double f = (double) count[i] / N, sigma = sqrt(want[i] * (1.0 - want[i]) / N);
        ck_assert_msg(fabs(f - want[i]) <= 6.0 * sigma + 0.005, "%s: token %d drawn with frequency %.4f, expected %.4f",
                      what, i, f, want[i]);
    }
    mg_sampler_free(smp);
}

START_TEST(test_temperature_only) {
    // No filter: the softmax itself, 0.5 0.3 0.15 0.05.
    check_frequencies(plain(1.0f, 11), probs4, "temp 1");
    // temp 2: p^(1/2), normalised.
    double want[4], sum = 0.0;
    for (int i = 0; i < 4; i++) sum += want[i] = sqrt(probs4[i]);
    for (int i = 0; i < 4; i++) want[i] /= sum;
    check_frequencies(plain(2.0f, 12), want, "temp 2");
}
END_TEST

START_TEST(test_top_p) {
    // Cumulative 0.5, 0.8, 0.95: top-p 0.9 keeps the three tokens whose sum first reaches it.
    struct mg_sampler_params p = plain(1.0f, 21);
    p.top_p = 0.9f;
    const double want[4] = {0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0.0};
    check_frequencies(p, want, "top-p 0.9");

    // top-p 0.5 keeps only the first (it reaches 0.5 by itself).
    p.top_p = 0.5f;
    const double want1[4] = {1.0, 0.0, 0.0, 0.0};
    check_frequencies(p, want1, "top-p 0.5");

    // The filter sees the logits before temperature: with temp 0.5 the same
    // three tokens survive (not the set top-p would cut from the sharpened
    // distribution, 0.68 0.25 0.06 0.007, which stops after two), and are
    // drawn with probabilities proportional to p^2.
    p.top_p = 0.9f;
    p.temp = 0.5f;
    double want2[4] = {0.25, 0.09, 0.0225, 0.0};
    const double sum = want2[0] + want2[1] + want2[2];
    for (int i = 0; i < 3; i++) want2[i] /= sum;
    check_frequencies(p, want2, "top-p 0.9, temp 0.5");
}
END_TEST

START_TEST(test_min_p) {
    // min-p 0.4: keep p >= 0.4 * 0.5 = 0.2, that is tokens 0 and 1.
    struct mg_sampler_params p = plain(1.0f, 31);
    p.min_p = 0.4f;
    const double want[4] = {0.5 / 0.8, 0.3 / 0.8, 0.0, 0.0};
    check_frequencies(p, want, "min-p 0.4");
    // min-p 0.2: threshold 0.1 keeps three.
    p.min_p = 0.2f;
    const double want3[4] = {0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0.0};
    check_frequencies(p, want3, "min-p 0.2");
}
END_TEST

START_TEST(test_top_k) {
    struct mg_sampler_params p = plain(1.0f, 41);
    p.top_k = 2;
    const double want[4] = {0.5 / 0.8, 0.3 / 0.8, 0.0, 0.0};
    check_frequencies(p, want, "top-k 2");
}
END_TEST

// MG_TRACE=sample: the candidates left after each stage follow the
// parameters. Counted here on random logits from their own softmax.
static int stage_count(const char * trace, const char * stage) {
    const char * line = strstr(trace, stage);
    ck_assert_msg(line != NULL, "no '%s' line in:\n%s", stage, trace);
    const char * left = strstr(line, " left");
    const char * p = left;
    while (p > line && p[-1] != ' ') p--;
    return atoi(p);
}

START_TEST(test_sampler_trace_counts) {
    enum { V = 1000 };
    static float logits[V];
    static double prob[V];
    static int order[V];
    uint64_t rng = 5;
    for (int i = 0; i < V; i++) logits[i] = 3.0f * mg_test_rand_normal(&rng);
    // The order by logit (selection sort is plenty for 1000) and the probabilities.
    for (int i = 0; i < V; i++) order[i] = i;
    for (int i = 0; i < V; i++) {
        int best = i;
        for (int j = i + 1; j < V; j++) if (logits[order[j]] > logits[order[best]]) best = j;
        const int t = order[i]; order[i] = order[best]; order[best] = t;
    }
    const struct { int top_k; float top_p, min_p; } cases[] = {
        {40, 0.95f, 0.05f}, {0, 0.5f, 0.0f}, {200, 1.0f, 0.2f}, {7, 0.99f, 0.01f}, {1000, 0.8f, 0.5f},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        struct mg_sampler_params p = plain(0.7f, 3);
        p.top_k = cases[c].top_k;
        p.top_p = cases[c].top_p;
        p.min_p = cases[c].min_p;
        // Expected: top-k keeps k; top-p the shortest prefix whose softmax (over
        // those k) reaches top_p; min-p those within log(min_p) of the best.
        const int k = p.top_k > 0 && p.top_k < V ? p.top_k : V;
        double sum = 0.0;
        for (int i = 0; i < k; i++) sum += prob[i] = exp((double) logits[order[i]] - (double) logits[order[0]]);
        int n_p = k;
        if (p.top_p < 1.0f) {
            double cum = 0.0;
            for (int i = 0; i < k; i++) {
                cum += prob[i] / sum;
                if (cum >= p.top_p) { n_p = i + 1; break; }
            }
        }
        int n_min = n_p;
        if (p.min_p > 0.0f) {
            n_min = 1;
            while (n_min < n_p && prob[n_min] >= p.min_p) n_min++;
        }

        FILE * f = tmpfile();
        mg_trace_set_stream(f);
        ck_assert(mg_trace_set("sample"));
        struct mg_sampler * smp = mg_sampler_new(p, V);
        mg_sampler_sample(smp, logits);
        mg_sampler_free(smp);
        ck_assert(mg_trace_set(""));
        mg_trace_set_stream(NULL);
        char trace[8192] = "";
        rewind(f);
        trace[fread(trace, 1, sizeof(trace) - 1, f)] = '\0';
        fclose(f);
        ck_assert_int_eq(stage_count(trace, "penalty"), V);
        ck_assert_int_eq(stage_count(trace, "top-k"), k);
        ck_assert_msg(stage_count(trace, "top-p") == n_p, "case %zu: top-p left %d, expected %d", c,
                      stage_count(trace, "top-p"), n_p);
        ck_assert_msg(stage_count(trace, "min-p") == n_min, "case %zu: min-p left %d, expected %d", c,
                      stage_count(trace, "min-p"), n_min);
        ck_assert_int_eq(stage_count(trace, "temperature"), n_min);
        ck_assert_ptr_nonnull(strstr(trace, "[sample] draw: r = "));
    }
}
END_TEST

// The penalty divides a recent token's positive logit and multiplies a
// negative one, which changes the argmax here; it does not touch the caller's
// logits, and forgets tokens older than repeat_last_n.
START_TEST(test_repeat_penalty) {
    float       pos[3] = {2.0f, 1.9f, 0.5f};    // 2.0 / 1.5 = 1.33 < 1.9
    const float neg[3] = {-1.0f, -1.2f, -5.0f};  // -1.0 * 1.5 = -1.5 < -1.2
    struct mg_sampler_params p = plain(0.0f, 1);
    ck_assert_int_eq(mg_argmax(pos, 3), 0);

    p.repeat_penalty = 1.5f;
    p.repeat_last_n = 2;
    struct mg_sampler * smp = mg_sampler_new(p, 3);
    ck_assert_int_eq(mg_sampler_sample(smp, pos), 0);   // nothing seen yet
    // The draw above accepted 0: now it is penalised.
    ck_assert_int_eq(mg_sampler_sample(smp, pos), 1);
    ck_assert_float_eq(pos[0], 2.0f);   // logits are not modified
    mg_sampler_free(smp);

    smp = mg_sampler_new(p, 3);
    mg_sampler_accept(smp, 0);
    ck_assert_int_eq(mg_sampler_sample(smp, neg), 1);
    mg_sampler_free(smp);

    // Two newer tokens push 0 out of a window of 2.
    smp = mg_sampler_new(p, 3);
    mg_sampler_accept(smp, 0);
    mg_sampler_accept(smp, 2);
    mg_sampler_accept(smp, 2);
    ck_assert_int_eq(mg_sampler_sample(smp, pos), 0);
    mg_sampler_free(smp);

    // Without a penalty, history does not matter.
    p.repeat_penalty = 1.0f;
    smp = mg_sampler_new(p, 3);
    mg_sampler_accept(smp, 0);
    ck_assert_int_eq(mg_sampler_sample(smp, pos), 0);
    mg_sampler_free(smp);
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("session");

    TCase * decode = MG_TCASE(s, "decode", test_defaults, test_graph_reuse, test_graph_rebuilt_at_padding,
                                 test_rebuild_right_after_compute, test_all_logits_last_row,
                                 test_prompt_longer_than_context, test_context_exactly_full, test_token_out_of_range,
                                 test_zero_tokens, test_rewind);
    tcase_set_timeout(decode, 120);
    tcase_add_checked_fixture(decode, load_model, free_model);

    TCase * sampling = MG_TCASE(s, "sampling", test_default_sampler_params, test_argmax, test_greedy_is_argmax,
                                   test_seed_repeats, test_top_k_1_is_greedy, test_temperature_only, test_top_p,
                                   test_min_p, test_top_k, test_repeat_penalty, test_sampler_trace_counts);
    tcase_set_timeout(sampling, 120);
    tcase_add_checked_fixture(sampling, load_model, free_model);
    return s;
}
