// test_ex1_work_slice.c - chapter 07, exercise 1:
//
//     void * mg_work_slice(const struct mg_compute_params * p, size_t bytes);
//
// Share p->ith's own slice of bytes bytes in the work buffer p->wdata: the
// slices start at the first MG_CACHE_LINE boundary at or after wdata, one
// after another, each rounded up to whole cache lines, so that no two shares
// ever write the same line. Graded by `make grade`; declared weak. Checked as
// properties for every share count 1..8, slice sizes 1..300 and every
// misalignment of the buffer: aligned, disjoint, in share order, and inside
// the buffer that the plan's rule sizes (n_tasks * (bytes + MG_CACHE_LINE)
// for the node, plus one MG_CACHE_LINE per thread).
#include "harness.h"
#include "mg.h"

#include <stdlib.h>

void * mg_work_slice(const struct mg_compute_params * p, size_t bytes) __attribute__((weak));

static void require_function(void) {
    ck_assert_msg(mg_work_slice != NULL, "mg_work_slice is not defined yet (compute.c, declared in compute.h)");
}

START_TEST(function_exists) {
    require_function();
}
END_TEST

START_TEST(slices_are_aligned_disjoint_and_inside) {
    require_function();
    const size_t cl = MG_CACHE_LINE;
    char * base = aligned_alloc(cl, 64 * 1024);
    ck_assert_ptr_nonnull(base);
    for (int nth = 1; nth <= 8; nth++) {
        for (size_t bytes = 1; bytes <= 300; bytes += 7) {
            for (size_t mis = 0; mis < cl; mis += 4) {
                char * wdata = base + mis;
                const size_t wsize = (size_t) nth * (bytes + cl) + (size_t) nth * cl;   // the plan's rule
                const char * prev_end = wdata;
                for (int ith = 0; ith < nth; ith++) {
                    const struct mg_compute_params p = {.ith = ith, .nth = nth, .wsize = wsize, .wdata = wdata};
                    const char * s = mg_work_slice(&p, bytes);
                    ck_assert_msg(((uintptr_t) s) % cl == 0, "share %d of %d, %zu bytes: slice not on a cache line", ith,
                                  nth, bytes);
                    ck_assert_msg(s >= prev_end, "share %d of %d, %zu bytes: overlaps the share before", ith, nth, bytes);
                    ck_assert_msg(s + bytes <= wdata + wsize, "share %d of %d, %zu bytes: past the end of the buffer", ith,
                                  nth, bytes);
                    // Nothing else in the share's last cache line: the next share starts on a new one.
                    prev_end = s + (bytes + cl - 1) / cl * cl;
                }
                const struct mg_compute_params p0 = {.ith = 0, .nth = nth, .wsize = wsize, .wdata = wdata};
                ck_assert_msg((const char *) mg_work_slice(&p0, bytes) - wdata < (ptrdiff_t) cl,
                              "share 0 starts %td bytes in: more than the first boundary",
                              (const char *) mg_work_slice(&p0, bytes) - wdata);
            }
        }
    }
    free(base);
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("07_scratch ex1 work_slice");
    TCase * tc = tcase_create("work_slice");
    tcase_add_test(tc, function_exists);   // 0 points: only a start
    tcase_add_test(tc, slices_are_aligned_disjoint_and_inside);
    suite_add_tcase(s, tc);
    return s;
}
