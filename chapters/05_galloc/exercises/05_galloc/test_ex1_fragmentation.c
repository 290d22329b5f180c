// test_ex1_fragmentation.c - chapter 05, exercise 1: how fragmented is the buffer?
//
//     size_t mg_dyn_alloc_free_bytes   (const struct mg_dyn_alloc * a);  // free bytes below the peak
//     size_t mg_dyn_alloc_largest_free (const struct mg_dyn_alloc * a);  // the longest free run below the peak
//     double mg_dyn_alloc_fragmentation(const struct mg_dyn_alloc * a);  // 1 - largest / free (0 when nothing is free)
//
// "Below the peak" is inside the buffer the plan needs (max_size): the holes,
// and the front of the tail when it starts below the peak. Graded by `make
// grade`; declared weak, so the test links without them and fails with a
// message. Checked on a worked example and on random request sequences
// against range_model.h, which knows only the live ranges.
#include "harness.h"
#include "mg.h"
#include "range_model.h"

#include <math.h>

size_t mg_dyn_alloc_free_bytes   (const struct mg_dyn_alloc * a) __attribute__((weak));
size_t mg_dyn_alloc_largest_free (const struct mg_dyn_alloc * a) __attribute__((weak));
double mg_dyn_alloc_fragmentation(const struct mg_dyn_alloc * a) __attribute__((weak));

static void require_functions(void) {
    ck_assert_msg(mg_dyn_alloc_free_bytes != NULL, "mg_dyn_alloc_free_bytes is not defined yet (galloc.c, declared in galloc.h)");
    ck_assert_msg(mg_dyn_alloc_largest_free != NULL, "mg_dyn_alloc_largest_free is not defined yet (galloc.c)");
    ck_assert_msg(mg_dyn_alloc_fragmentation != NULL, "mg_dyn_alloc_fragmentation is not defined yet (galloc.c)");
}

START_TEST(functions_exist) {
    require_functions();
}
END_TEST

// 32, 8, 16, 8 bytes at 0, 32, 40, 56 (peak 64); free the first and the third:
// holes [0, 32) and [40, 56), 48 bytes free, 32 in one piece.
START_TEST(the_worked_example) {
    require_functions();
    struct mg_dyn_alloc a;
    mg_dyn_alloc_reset(&a, 8);
    ck_assert_uint_eq(mg_dyn_alloc_free_bytes(&a), 0);
    ck_assert_uint_eq(mg_dyn_alloc_largest_free(&a), 0);
    ck_assert(mg_dyn_alloc_fragmentation(&a) == 0.0);
    const size_t o32 = mg_dyn_alloc_alloc(&a, 32), o8 = mg_dyn_alloc_alloc(&a, 8);
    const size_t o16 = mg_dyn_alloc_alloc(&a, 16), o8b = mg_dyn_alloc_alloc(&a, 8);
    ck_assert_uint_eq(mg_dyn_alloc_free_bytes(&a), 0);   // full: no hole
    ck_assert(mg_dyn_alloc_fragmentation(&a) == 0.0);
    mg_dyn_alloc_free(&a, o32, 32);
    mg_dyn_alloc_free(&a, o16, 16);
    ck_assert_uint_eq(mg_dyn_alloc_free_bytes(&a), 48);
    ck_assert_uint_eq(mg_dyn_alloc_largest_free(&a), 32);
    ck_assert_msg(fabs(mg_dyn_alloc_fragmentation(&a) - 1.0 / 3.0) < 1e-12, "fragmentation %g, expected 1/3",
                  mg_dyn_alloc_fragmentation(&a));
    // Freeing the last range gives [40, 64) back to the tail: it still counts, up to the peak.
    mg_dyn_alloc_free(&a, o8b, 8);
    ck_assert_uint_eq(mg_dyn_alloc_free_bytes(&a), 56);
    ck_assert_uint_eq(mg_dyn_alloc_largest_free(&a), 32);
    mg_dyn_alloc_free(&a, o8, 8);   // everything free: one run of 64, nothing fragmented
    ck_assert_uint_eq(mg_dyn_alloc_free_bytes(&a), 64);
    ck_assert_uint_eq(mg_dyn_alloc_largest_free(&a), 64);
    ck_assert(mg_dyn_alloc_fragmentation(&a) == 0.0);
}
END_TEST

START_TEST(random_requests_against_the_model) {
    require_functions();
    uint64_t rng = 0xf4a9;
    for (int round = 0; round < 200; round++) {
        struct mg_dyn_alloc a;
        struct range_model m;
        const size_t align = (size_t) 1 << (mg_test_rand_u64(&rng) % 6);   // 1 .. 32
        mg_dyn_alloc_reset(&a, align);
        model_reset(&m, align);
        for (int step = 0; step < 120; step++) {
            if (m.n > 0 && (m.n >= 60 || mg_test_rand_u64(&rng) % 5 < 2)) {
                size_t off, size;
                model_free(&m, (int) (mg_test_rand_u64(&rng) % (uint64_t) m.n), &off, &size);
                mg_dyn_alloc_free(&a, off, size);
            } else {
                const size_t size = 1 + mg_test_rand_u64(&rng) % 200;
                const size_t want = model_alloc(&m, size, false);
                ck_assert_uint_eq(mg_dyn_alloc_alloc(&a, size), want);
            }
            size_t free_bytes, largest;
            model_free_below_peak(&m, &free_bytes, &largest);
            ck_assert_msg(mg_dyn_alloc_free_bytes(&a) == free_bytes, "round %d step %d: %zu free bytes, expected %zu",
                          round, step, mg_dyn_alloc_free_bytes(&a), free_bytes);
            ck_assert_msg(mg_dyn_alloc_largest_free(&a) == largest, "round %d step %d: largest run %zu, expected %zu",
                          round, step, mg_dyn_alloc_largest_free(&a), largest);
            const double frag = free_bytes ? 1.0 - (double) largest / (double) free_bytes : 0.0;
            ck_assert_msg(fabs(mg_dyn_alloc_fragmentation(&a) - frag) < 1e-12, "round %d step %d: fragmentation %g, expected %g",
                          round, step, mg_dyn_alloc_fragmentation(&a), frag);
        }
    }
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("05_galloc ex1 fragmentation");
    TCase * tc = tcase_create("fragmentation");
    tcase_add_test(tc, functions_exist);   // 0 points: only a start
    tcase_add_test(tc, the_worked_example);
    tcase_add_test(tc, random_requests_against_the_model);
    suite_add_tcase(s, tc);
    return s;
}
