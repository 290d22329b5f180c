// test_ex1_split_even.c - chapter 08, exercise 1:
//
//     void mg_split_rows_even(int64_t nrows, int ith, int nth, int64_t * r0, int64_t * r1);
//
// Like mg_split_rows, thread ith of nth gets the rows [r0, r1), the shares in
// thread order and covering [0, nrows) exactly; but the remainder is spread:
// the first nrows % nth threads get one row more, so no two shares differ by
// more than one row. Graded by `make grade`; declared weak. Checked on the
// README's shares and on every nrows < 200 for nth = 1..9.
#include "harness.h"
#include "mg.h"

void mg_split_rows_even(int64_t nrows, int ith, int nth, int64_t * r0, int64_t * r1) __attribute__((weak));

static void require_function(void) {
    ck_assert_msg(mg_split_rows_even != NULL, "mg_split_rows_even is not defined yet (threadpool.c, declared in threadpool.h)");
}

START_TEST(split_even_exists) {
    require_function();
}
END_TEST

// 32 rows on 3 threads: mg_split_rows gives 11, 11, 10; so does the even split.
// 1,536 rows: 512 each. 10 rows on 4 threads: 3, 3, 2, 2 (mg_split_rows: 3, 3, 3, 1).
START_TEST(worked_shares) {
    require_function();
    int64_t r0, r1;
    mg_split_rows_even(32, 2, 3, &r0, &r1);
    ck_assert_int_eq(r0, 22);
    ck_assert_int_eq(r1, 32);
    mg_split_rows_even(1536, 1, 3, &r0, &r1);
    ck_assert_int_eq(r0, 512);
    ck_assert_int_eq(r1, 1024);
    const int64_t want[5] = {0, 3, 6, 8, 10};
    for (int ith = 0; ith < 4; ith++) {
        mg_split_rows_even(10, ith, 4, &r0, &r1);
        ck_assert_int_eq(r0, want[ith]);
        ck_assert_int_eq(r1, want[ith + 1]);
    }
}
END_TEST

START_TEST(every_split_is_even_and_exact) {
    require_function();
    for (int64_t nrows = 0; nrows < 200; nrows++) {
        for (int nth = 1; nth <= 9; nth++) {
            int64_t next = 0, smallest = INT64_MAX, largest = 0;
            for (int ith = 0; ith < nth; ith++) {
                int64_t r0 = -1, r1 = -1;
                mg_split_rows_even(nrows, ith, nth, &r0, &r1);
                ck_assert_msg(r0 == next && r1 >= r0, "%lld rows, thread %d of %d: [%lld, %lld), expected to start at %lld",
                              (long long) nrows, ith, nth, (long long) r0, (long long) r1, (long long) next);
                next = r1;
                if (r1 - r0 < smallest) smallest = r1 - r0;
                if (r1 - r0 > largest) largest = r1 - r0;
                // The larger shares come first.
                ck_assert_int_eq(r1 - r0, nrows / nth + (ith < nrows % nth));
            }
            ck_assert_int_eq(next, nrows);
            ck_assert_int_le(largest - smallest, 1);
        }
    }
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("08_threads ex1 split_even");
    TCase * tc = tcase_create("split_even");
    tcase_add_test(tc, split_even_exists);
    tcase_add_test(tc, worked_shares);
    tcase_add_test(tc, every_split_is_even_and_exact);
    suite_add_tcase(s, tc);
    return s;
}
