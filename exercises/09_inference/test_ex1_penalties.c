// test_ex1_penalties.c - chapter 09, exercise 1: frequency and presence penalties.
//
//     void mg_sampler_set_penalties(struct mg_sampler * s, float freq, float present);
//
// A token seen c times among the last repeat_last_n accepted tokens loses
// c * freq + (c > 0 ? present : 0) from its logit, after the repetition
// penalty (llama.cpp: llama_sampler_penalties_apply). Graded by `make grade`;
// declared weak, so the test links without it and fails with a message.
// Checked with greedy decoding, whose choice this test works out itself: the
// first largest penalized logit, with counts kept here from what it accepted.
#include "harness.h"
#include "mg.h"

void mg_sampler_set_penalties(struct mg_sampler * s, float freq, float present) __attribute__((weak));

#define N_VOCAB 64

static void require_function(void) {
    ck_assert_msg(mg_sampler_set_penalties != NULL, "mg_sampler_set_penalties is not defined yet (sampling.c, declared in sampling.h)");
}

START_TEST(function_exists) {
    require_function();
}
END_TEST

// The token greedy decoding must pick: penalties recomputed from the window.
static int32_t expected_greedy(const float * logits, const int32_t * window, int n_window, float repeat, float freq,
                               float present) {
    int32_t best = -1;
    float   best_logit = 0.0f;
    for (int32_t id = 0; id < N_VOCAB; id++) {
        int count = 0;
        for (int j = 0; j < n_window; j++) count += window[j] == id;
        float l = logits[id];
        if (count > 0 && repeat != 1.0f) l = l <= 0.0f ? l * repeat : l / repeat;
        l -= (float) count * freq + (float) (count > 0) * present;
        if (best < 0 || l > best_logit) {
            best       = id;
            best_logit = l;
        }
    }
    return best;
}

static void run_greedy(float repeat, float freq, float present, int last_n, uint64_t seed) {
    struct mg_sampler_params p = mg_sampler_default_params();
    p.temp           = 0.0f;
    p.repeat_penalty = repeat;
    p.repeat_last_n  = last_n;
    struct mg_sampler * s = mg_sampler_new(p, N_VOCAB);
    mg_sampler_set_penalties(s, freq, present);
    int32_t history[400];
    int n_history = 0;
    uint64_t rng = seed;
    for (int i = 0; i < 20; i++) {   // a "prompt": the penalties see it too
        const int32_t t = (int32_t) (mg_test_rand_u64(&rng) % 8);   // a few tokens, repeated
        mg_sampler_accept(s, t);
        history[n_history++] = t;
    }
    float logits[N_VOCAB];
    for (int step = 0; step < 300; step++) {
        mg_test_fill_uniform(logits, N_VOCAB, &rng, -4.0f, 4.0f);
        for (int id = 0; id < 8; id++) logits[id] += 3.0f;   // the repeated tokens are tempting
        const int n_window = n_history < last_n ? n_history : last_n;
        const int32_t want = expected_greedy(logits, history + n_history - n_window, n_window, repeat, freq, present);
        const int32_t got  = mg_sampler_sample(s, logits);
        ck_assert_msg(got == want, "repeat %g freq %g present %g last_n %d, step %d: token %d, expected %d", repeat,
                      freq, present, last_n, step, got, want);
        history[n_history++] = got;
    }
    mg_sampler_free(s);
}

START_TEST(frequency_penalty_alone) {
    require_function();
    run_greedy(1.0f, 0.7f, 0.0f, 64, 11);
}
END_TEST

START_TEST(presence_penalty_alone) {
    require_function();
    run_greedy(1.0f, 0.0f, 1.5f, 64, 12);
}
END_TEST

START_TEST(all_three_and_a_short_window) {
    require_function();
    run_greedy(1.3f, 0.4f, 0.8f, 16, 13);
    run_greedy(1.1f, 1.0f, 0.0f, 3, 14);
}
END_TEST

START_TEST(zero_penalties_change_nothing) {
    require_function();
    struct mg_sampler * s = mg_sampler_new((struct mg_sampler_params) {.temp = 0.0f, .repeat_penalty = 1.0f,
                                                                       .repeat_last_n = 64}, N_VOCAB);
    mg_sampler_set_penalties(s, 0.0f, 0.0f);
    uint64_t rng = 15;
    float logits[N_VOCAB];
    for (int step = 0; step < 50; step++) {
        mg_test_fill_uniform(logits, N_VOCAB, &rng, -4.0f, 4.0f);
        ck_assert_int_eq(mg_sampler_sample(s, logits), mg_argmax(logits, N_VOCAB));
    }
    mg_sampler_free(s);
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("09_inference ex1 penalties");
    TCase * tc = tcase_create("penalties");
    tcase_add_test(tc, function_exists);   // 0 points: only a start
    tcase_add_test(tc, frequency_penalty_alone);
    tcase_add_test(tc, presence_penalty_alone);
    tcase_add_test(tc, all_three_and_a_short_window);
    tcase_add_test(tc, zero_penalties_change_nothing);
    suite_add_tcase(s, tc);
    return s;
}
