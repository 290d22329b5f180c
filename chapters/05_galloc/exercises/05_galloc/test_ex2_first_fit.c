// test_ex2_first_fit.c - chapter 05, exercise 2: first fit beside best fit.
//
//     void mg_dyn_alloc_set_first_fit(struct mg_dyn_alloc * a, bool first_fit);
//
// With first fit on, a request takes the free block with the lowest offset
// that is big enough (the tail still last); mg_dyn_alloc_reset turns it off
// again (best fit is the default). Graded by `make grade`; declared weak.
// Checked on the README's sequence (peaks 64 and 96) and on random request
// sequences, offset by offset, against range_model.h for both policies.
#include "harness.h"
#include "mg.h"
#include "range_model.h"

void mg_dyn_alloc_set_first_fit(struct mg_dyn_alloc * a, bool first_fit) __attribute__((weak));

static void require_function(void) {
    ck_assert_msg(mg_dyn_alloc_set_first_fit != NULL, "mg_dyn_alloc_set_first_fit is not defined yet (galloc.c, declared in galloc.h)");
}

START_TEST(function_exists) {
    require_function();
}
END_TEST

// 32, 8, 16, 8; free the 32 and the 16; then ask for 16 and 32.
static size_t readme_sequence(bool first_fit, size_t * off16, size_t * off32) {
    struct mg_dyn_alloc a;
    mg_dyn_alloc_reset(&a, 8);
    mg_dyn_alloc_set_first_fit(&a, first_fit);
    const size_t o32 = mg_dyn_alloc_alloc(&a, 32);
    mg_dyn_alloc_alloc(&a, 8);
    const size_t o16 = mg_dyn_alloc_alloc(&a, 16);
    mg_dyn_alloc_alloc(&a, 8);
    mg_dyn_alloc_free(&a, o32, 32);
    mg_dyn_alloc_free(&a, o16, 16);
    *off16 = mg_dyn_alloc_alloc(&a, 16);
    *off32 = mg_dyn_alloc_alloc(&a, 32);
    return a.max_size;
}

START_TEST(the_readme_sequence) {
    require_function();
    size_t o16, o32;
    ck_assert_uint_eq(readme_sequence(false, &o16, &o32), 64);   // best fit: the 16 fills [40, 56) exactly
    ck_assert_uint_eq(o16, 40);
    ck_assert_uint_eq(o32, 0);
    ck_assert_uint_eq(readme_sequence(true, &o16, &o32), 96);    // first fit: the 16 splits [0, 32) ...
    ck_assert_uint_eq(o16, 0);
    ck_assert_uint_eq(o32, 64);                                  // ... and the 32 fits nowhere but the tail
}
END_TEST

START_TEST(reset_goes_back_to_best_fit) {
    require_function();
    struct mg_dyn_alloc a;
    mg_dyn_alloc_reset(&a, 8);
    mg_dyn_alloc_set_first_fit(&a, true);
    mg_dyn_alloc_reset(&a, 8);
    const size_t o32 = mg_dyn_alloc_alloc(&a, 32);
    mg_dyn_alloc_alloc(&a, 8);
    const size_t o16 = mg_dyn_alloc_alloc(&a, 16);
    mg_dyn_alloc_alloc(&a, 8);
    mg_dyn_alloc_free(&a, o32, 32);
    mg_dyn_alloc_free(&a, o16, 16);
    ck_assert_uint_eq(mg_dyn_alloc_alloc(&a, 16), 40);
}
END_TEST

static void random_against_model(bool first_fit, uint64_t seed, size_t * sum_of_peaks) {
    uint64_t rng = seed;
    *sum_of_peaks = 0;
    for (int round = 0; round < 200; round++) {
        struct mg_dyn_alloc a;
        struct range_model m;
        mg_dyn_alloc_reset(&a, 8);
        mg_dyn_alloc_set_first_fit(&a, first_fit);
        model_reset(&m, 8);
        for (int step = 0; step < 150; step++) {
            if (m.n > 0 && (m.n >= 60 || mg_test_rand_u64(&rng) % 5 < 2)) {
                size_t off, size;
                model_free(&m, (int) (mg_test_rand_u64(&rng) % (uint64_t) m.n), &off, &size);
                mg_dyn_alloc_free(&a, off, size);
            } else {
                const size_t size = 1 + mg_test_rand_u64(&rng) % 256;
                const size_t want = model_alloc(&m, size, first_fit);
                const size_t got  = mg_dyn_alloc_alloc(&a, size);
                ck_assert_msg(got == want, "%s, round %d step %d: %zu bytes at %zu, expected %zu",
                              first_fit ? "first fit" : "best fit", round, step, size, got, want);
            }
        }
        ck_assert_uint_eq(a.max_size, m.peak);
        *sum_of_peaks += m.peak;
    }
}

START_TEST(random_requests_both_policies) {
    require_function();
    size_t best, first;
    random_against_model(false, 0xb357, &best);
    random_against_model(true, 0xb357, &first);   // the same requests
    ck_assert_msg(best != first, "first fit and best fit planned the same peaks on 200 random sequences");
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("05_galloc ex2 first fit");
    TCase * tc = tcase_create("first_fit");
    tcase_add_test(tc, function_exists);   // 0 points: only a start
    tcase_add_test(tc, the_readme_sequence);
    tcase_add_test(tc, reset_goes_back_to_best_fit);   // 0 points: a do-nothing stub passes it too
    tcase_add_test(tc, random_requests_both_policies);
    suite_add_tcase(s, tc);
    return s;
}
