// test_ex2_top_n_sigma.c - chapter 09, exercise 2: the top-n-sigma filter.
//
//     void mg_sampler_set_top_n_sigma(struct mg_sampler * s, float n);   // <= 0: off
//
// Keep only the tokens whose logit is at least max - n * sigma, sigma being
// the standard deviation of all the logits (population, over the finite
// ones), after the penalties and before top-k and temperature (llama.cpp:
// llama_sampler_top_n_sigma_apply). Graded by `make grade`; declared weak.
// Checked by drawing: with the other filters off, every draw must come from
// the set this test works out in double, and every member of it must be
// drawn; the set does not depend on the temperature.
#include "harness.h"
#include "mg.h"

#include <math.h>

void mg_sampler_set_top_n_sigma(struct mg_sampler * s, float n) __attribute__((weak));

#define N_VOCAB 200
#define DRAWS   4000

static void require_function(void) {
    ck_assert_msg(mg_sampler_set_top_n_sigma != NULL, "mg_sampler_set_top_n_sigma is not defined yet (sampling.c, declared in sampling.h)");
}

START_TEST(function_exists) {
    require_function();
}
END_TEST

// Normal logits with no value close to the threshold (float and double agree on every token).
static double make_logits(float * logits, float n_sigma, uint64_t * rng) {
    for (;;) {
        double mean = 0.0, var = 0.0, max = -INFINITY;
        for (int i = 0; i < N_VOCAB; i++) logits[i] = 2.0f * mg_test_rand_normal(rng);
        for (int i = 0; i < N_VOCAB; i++) mean += logits[i] / N_VOCAB;
        for (int i = 0; i < N_VOCAB; i++) var += (logits[i] - mean) * (logits[i] - mean) / N_VOCAB;
        for (int i = 0; i < N_VOCAB; i++) max = fmax(max, logits[i]);
        const double threshold = max - n_sigma * sqrt(var);
        bool clear = true;
        for (int i = 0; i < N_VOCAB; i++) clear = clear && fabs(logits[i] - threshold) > 1e-3;
        if (clear) return threshold;
    }
}

static struct mg_sampler * new_sampler(float temp, float n_sigma, uint64_t seed) {
    struct mg_sampler_params p = {.temp = temp, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f,
                                  .repeat_penalty = 1.0f, .repeat_last_n = 64, .seed = seed};
    struct mg_sampler * s = mg_sampler_new(p, N_VOCAB);
    mg_sampler_set_top_n_sigma(s, n_sigma);
    return s;
}

static void draws_stay_in_the_set(float temp, float n_sigma, uint64_t seed) {
    uint64_t rng = seed;
    float logits[N_VOCAB];
    const double threshold = make_logits(logits, n_sigma, &rng);
    int n_kept = 0;
    for (int i = 0; i < N_VOCAB; i++) n_kept += logits[i] >= threshold;
    ck_assert_msg(n_kept > 1 && n_kept < N_VOCAB / 2, "a poor test case: %d kept", n_kept);
    struct mg_sampler * s = new_sampler(temp, n_sigma, seed);
    int drawn[N_VOCAB] = {0};
    for (int d = 0; d < DRAWS; d++) {
        const int32_t t = mg_sampler_sample(s, logits);
        ck_assert_msg(logits[t] >= threshold, "temp %g, n %g: drew token %d, logit %g below max - n*sigma = %g", temp,
                      n_sigma, t, logits[t], threshold);
        drawn[t]++;
    }
    // The members' probabilities are within a factor e^(n sigma / temp) of each other: all are drawn.
    for (int i = 0; i < N_VOCAB; i++) {
        if (logits[i] >= threshold) ck_assert_msg(drawn[i] > 0, "token %d (logit %g) kept but never drawn", i, logits[i]);
    }
    mg_sampler_free(s);
}

START_TEST(one_sigma) {
    require_function();
    draws_stay_in_the_set(1.0f, 1.0f, 21);
}
END_TEST

START_TEST(the_set_does_not_depend_on_temperature) {
    require_function();
    draws_stay_in_the_set(3.0f, 1.0f, 22);
    draws_stay_in_the_set(1.5f, 1.5f, 23);
}
END_TEST

// Off (n <= 0) keeps everything: with a flat distribution every token is drawn.
START_TEST(off_keeps_every_token) {
    require_function();
    float logits[N_VOCAB];
    for (int i = 0; i < N_VOCAB; i++) logits[i] = (float) (i % 3) * 0.1f;
    struct mg_sampler * s = new_sampler(1.0f, 0.0f, 24);
    int drawn[N_VOCAB] = {0};
    for (int d = 0; d < 20 * N_VOCAB; d++) drawn[mg_sampler_sample(s, logits)]++;
    for (int i = 0; i < N_VOCAB; i++) ck_assert_msg(drawn[i] > 0, "token %d never drawn with top-n-sigma off", i);
    mg_sampler_free(s);
}
END_TEST

// Greedy is untouched: the best token is always kept.
START_TEST(greedy_is_unchanged) {
    require_function();
    uint64_t rng = 25;
    float logits[N_VOCAB];
    struct mg_sampler * s = new_sampler(0.0f, 0.5f, 25);
    for (int step = 0; step < 20; step++) {
        make_logits(logits, 0.5f, &rng);
        ck_assert_int_eq(mg_sampler_sample(s, logits), mg_argmax(logits, N_VOCAB));
    }
    mg_sampler_free(s);
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("09_inference ex2 top_n_sigma");
    TCase * tc = tcase_create("top_n_sigma");
    tcase_add_test(tc, function_exists);   // 0 points: only a start
    tcase_add_test(tc, one_sigma);
    tcase_add_test(tc, the_set_does_not_depend_on_temperature);
    tcase_add_test(tc, off_keeps_every_token);
    tcase_add_test(tc, greedy_is_unchanged);
    suite_add_tcase(s, tc);
    return s;
}
