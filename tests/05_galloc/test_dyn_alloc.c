// test_dyn_alloc.c - the allocator under the graph allocator: free blocks of
// one growing address range (galloc.h, struct mg_dyn_alloc).
//
// Every expectation below is worked out by hand from the rules the header
// states: sizes round up to the alignment; a request takes the smallest free
// block that fits, and only when no hole fits, the front of the tail (which
// is how the buffer grows, and what max_size records); a freed range merges
// with the free block before it and the one after it when they touch.
// The free list is read back through mg_dyn_alloc_describe, whose format is
// part of the lesson's trace.
#include "harness.h"
#include "mg.h"

#include <string.h>

static const char * describe(const struct mg_dyn_alloc * a) {
    static char buf[1024];
    return mg_dyn_alloc_describe(a, buf, sizeof(buf));
}

// Five 16-byte blocks A..E laid end to end at 0, 16, 32, 48, 64.
static void five_blocks(struct mg_dyn_alloc * a, size_t offs[5]) {
    mg_dyn_alloc_reset(a, 16);
    for (int i = 0; i < 5; i++) offs[i] = mg_dyn_alloc_alloc(a, 16);
}

START_TEST(test_reset_is_one_infinite_tail) {
    struct mg_dyn_alloc a;
    mg_dyn_alloc_reset(&a, 32);
    ck_assert_int_eq(a.n_free_blocks, 1);
    ck_assert_uint_eq(a.alignment, 32);
    ck_assert_uint_eq(a.max_size, 0);
    ck_assert_str_eq(describe(&a), "[0, inf)");
}
END_TEST

START_TEST(test_allocations_are_laid_end_to_end) {
    struct mg_dyn_alloc a;
    size_t offs[5];
    five_blocks(&a, offs);
    for (int i = 0; i < 5; i++) ck_assert_uint_eq(offs[i], 16 * (size_t) i);
    ck_assert_uint_eq(a.max_size, 80);
    ck_assert_str_eq(describe(&a), "[80, inf)");
}
END_TEST

START_TEST(test_sizes_round_up_to_the_alignment) {
    struct mg_dyn_alloc a;
    mg_dyn_alloc_reset(&a, 16);
    ck_assert_uint_eq(mg_dyn_alloc_alloc(&a, 10), 0);
    ck_assert_uint_eq(mg_dyn_alloc_alloc(&a, 1), 16);    // not 10: 10 bytes took 16
    ck_assert_uint_eq(mg_dyn_alloc_alloc(&a, 17), 32);   // 17 bytes take 32
    ck_assert_uint_eq(mg_dyn_alloc_alloc(&a, 16), 64);
    ck_assert_uint_eq(a.max_size, 80);
    // Freeing with the unrounded size gives back the rounded block.
    mg_dyn_alloc_free(&a, 32, 17);
    ck_assert_str_eq(describe(&a), "[32, 64) [80, inf)");
}
END_TEST

START_TEST(test_alignment_4_keeps_float_granularity) {
    struct mg_dyn_alloc a;
    mg_dyn_alloc_reset(&a, 4);
    ck_assert_uint_eq(mg_dyn_alloc_alloc(&a, 8), 0);
    ck_assert_uint_eq(mg_dyn_alloc_alloc(&a, 6), 8);
    ck_assert_uint_eq(mg_dyn_alloc_alloc(&a, 4), 16);
    ck_assert_uint_eq(a.max_size, 20);
}
END_TEST

START_TEST(test_free_without_neighbours_adds_a_hole) {
    struct mg_dyn_alloc a;
    size_t offs[5];
    five_blocks(&a, offs);
    mg_dyn_alloc_free(&a, offs[1], 16);   // B: A and C are still taken
    ck_assert_int_eq(a.n_free_blocks, 2);
    ck_assert_str_eq(describe(&a), "[16, 32) [80, inf)");
    mg_dyn_alloc_free(&a, offs[3], 16);   // D: C and E are still taken
    ck_assert_int_eq(a.n_free_blocks, 3);
    ck_assert_str_eq(describe(&a), "[16, 32) [48, 64) [80, inf)");
}
END_TEST

START_TEST(test_free_at_offset_zero_has_no_previous) {
    struct mg_dyn_alloc a;
    size_t offs[5];
    five_blocks(&a, offs);
    mg_dyn_alloc_free(&a, offs[0], 16);
    ck_assert_str_eq(describe(&a), "[0, 16) [80, inf)");
}
END_TEST

START_TEST(test_free_merges_with_previous) {
    struct mg_dyn_alloc a;
    size_t offs[5];
    five_blocks(&a, offs);
    mg_dyn_alloc_free(&a, offs[1], 16);
    mg_dyn_alloc_free(&a, offs[2], 16);   // C starts where the hole of B ends
    ck_assert_int_eq(a.n_free_blocks, 2);
    ck_assert_str_eq(describe(&a), "[16, 48) [80, inf)");
}
END_TEST

START_TEST(test_free_merges_with_next) {
    struct mg_dyn_alloc a;
    size_t offs[5];
    five_blocks(&a, offs);
    mg_dyn_alloc_free(&a, offs[2], 16);
    mg_dyn_alloc_free(&a, offs[1], 16);   // B ends where the hole of C starts
    ck_assert_int_eq(a.n_free_blocks, 2);
    ck_assert_str_eq(describe(&a), "[16, 48) [80, inf)");
}
END_TEST

START_TEST(test_free_merges_with_both) {
    struct mg_dyn_alloc a;
    size_t offs[5];
    five_blocks(&a, offs);
    mg_dyn_alloc_free(&a, offs[1], 16);
    mg_dyn_alloc_free(&a, offs[3], 16);
    mg_dyn_alloc_free(&a, offs[2], 16);   // C closes the gap between the holes of B and D
    ck_assert_int_eq(a.n_free_blocks, 2);
    ck_assert_str_eq(describe(&a), "[16, 64) [80, inf)");
}
END_TEST

START_TEST(test_free_merges_into_the_tail) {
    struct mg_dyn_alloc a;
    size_t offs[5];
    five_blocks(&a, offs);
    mg_dyn_alloc_free(&a, offs[4], 16);   // E touches the tail
    ck_assert_int_eq(a.n_free_blocks, 1);
    ck_assert_str_eq(describe(&a), "[64, inf)");
    mg_dyn_alloc_free(&a, offs[3], 16);
    ck_assert_str_eq(describe(&a), "[48, inf)");
    ck_assert_uint_eq(a.max_size, 80);   // the peak is history: freeing does not lower it
}
END_TEST

START_TEST(test_free_everything_gives_back_one_tail) {
    struct mg_dyn_alloc a;
    size_t offs[5];
    five_blocks(&a, offs);
    const int order[5] = {3, 0, 4, 1, 2};
    for (int i = 0; i < 5; i++) mg_dyn_alloc_free(&a, offs[order[i]], 16);
    ck_assert_int_eq(a.n_free_blocks, 1);
    ck_assert_str_eq(describe(&a), "[0, inf)");
}
END_TEST

// Holes of 48, 16 and 32 bytes, in that order of offset, then the tail.
static void holes_48_16_32(struct mg_dyn_alloc * a) {
    mg_dyn_alloc_reset(a, 16);
    const size_t h48 = mg_dyn_alloc_alloc(a, 48);   //   0
    mg_dyn_alloc_alloc(a, 16);                      //  48 (kept)
    const size_t h16 = mg_dyn_alloc_alloc(a, 16);   //  64
    mg_dyn_alloc_alloc(a, 16);                      //  80 (kept)
    const size_t h32 = mg_dyn_alloc_alloc(a, 32);   //  96
    mg_dyn_alloc_alloc(a, 16);                      // 128 (kept)
    mg_dyn_alloc_free(a, h48, 48);
    mg_dyn_alloc_free(a, h16, 16);
    mg_dyn_alloc_free(a, h32, 32);
}

START_TEST(test_best_fit_takes_the_smallest_hole_that_fits) {
    struct mg_dyn_alloc a;
    holes_48_16_32(&a);
    ck_assert_str_eq(describe(&a), "[0, 48) [64, 80) [96, 128) [144, inf)");
    ck_assert_uint_eq(mg_dyn_alloc_alloc(&a, 16), 64);   // the 16-byte hole, not the first (48) one
    ck_assert_str_eq(describe(&a), "[0, 48) [96, 128) [144, inf)");
    ck_assert_uint_eq(mg_dyn_alloc_alloc(&a, 20), 96);   // 20 -> 32: the 32-byte hole fits exactly
    ck_assert_str_eq(describe(&a), "[0, 48) [144, inf)");
}
END_TEST

START_TEST(test_best_fit_splits_a_larger_hole_from_its_front) {
    struct mg_dyn_alloc a;
    holes_48_16_32(&a);
    ck_assert_uint_eq(mg_dyn_alloc_alloc(&a, 33), 0);   // 33 -> 48: only the 48-byte hole is big enough
    ck_assert_uint_eq(mg_dyn_alloc_alloc(&a, 24), 96);  // 24 -> 32: the 32-byte hole, not the 16 one
    ck_assert_str_eq(describe(&a), "[64, 80) [144, inf)");
    mg_dyn_alloc_free(&a, 0, 48);
    ck_assert_uint_eq(mg_dyn_alloc_alloc(&a, 32), 0);   // front of the 48 hole; 16 bytes remain
    ck_assert_str_eq(describe(&a), "[32, 48) [64, 80) [144, inf)");
}
END_TEST

START_TEST(test_best_fit_prefers_a_hole_to_the_tail) {
    struct mg_dyn_alloc a;
    holes_48_16_32(&a);
    const size_t peak = a.max_size;
    ck_assert_uint_eq(peak, 144);
    // The tail is "infinitely" large, but a hole that fits always wins.
    ck_assert_uint_eq(mg_dyn_alloc_alloc(&a, 48), 0);
    ck_assert_uint_eq(mg_dyn_alloc_alloc(&a, 32), 96);
    ck_assert_uint_eq(mg_dyn_alloc_alloc(&a, 16), 64);
    ck_assert_uint_eq(a.max_size, peak);   // holes reused: the buffer did not grow
    ck_assert_str_eq(describe(&a), "[144, inf)");
}
END_TEST

START_TEST(test_tail_grows_when_no_hole_fits) {
    struct mg_dyn_alloc a;
    holes_48_16_32(&a);
    ck_assert_uint_eq(mg_dyn_alloc_alloc(&a, 64), 144);   // bigger than every hole
    ck_assert_uint_eq(a.max_size, 208);
    ck_assert_str_eq(describe(&a), "[0, 48) [64, 80) [96, 128) [208, inf)");
    ck_assert_uint_eq(mg_dyn_alloc_alloc(&a, 1), 64);     // 1 -> 16: back into a hole
    ck_assert_uint_eq(a.max_size, 208);
}
END_TEST

START_TEST(test_reset_forgets_everything) {
    struct mg_dyn_alloc a;
    holes_48_16_32(&a);
    mg_dyn_alloc_reset(&a, 16);
    ck_assert_uint_eq(a.max_size, 0);
    ck_assert_str_eq(describe(&a), "[0, inf)");
    ck_assert_uint_eq(mg_dyn_alloc_alloc(&a, 16), 0);
}
END_TEST

START_TEST(test_describe_truncates_safely) {
    struct mg_dyn_alloc a;
    holes_48_16_32(&a);
    char small[8];
    memset(small, 'x', sizeof(small));
    mg_dyn_alloc_describe(&a, small, sizeof(small));
    ck_assert_uint_lt(strlen(small), sizeof(small));   // terminated inside the buffer
    ck_assert(strncmp(small, "[0, 48)", sizeof(small) - 1) == 0);
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("dyn_alloc");

    MG_TCASE(s, "alloc", test_reset_is_one_infinite_tail, test_allocations_are_laid_end_to_end,
                test_sizes_round_up_to_the_alignment, test_alignment_4_keeps_float_granularity,
                test_reset_forgets_everything, test_describe_truncates_safely);

    MG_TCASE(s, "free", test_free_without_neighbours_adds_a_hole, test_free_at_offset_zero_has_no_previous,
                test_free_merges_with_previous, test_free_merges_with_next, test_free_merges_with_both,
                test_free_merges_into_the_tail, test_free_everything_gives_back_one_tail);

    MG_TCASE(s, "best_fit", test_best_fit_takes_the_smallest_hole_that_fits,
                test_best_fit_splits_a_larger_hole_from_its_front, test_best_fit_prefers_a_hole_to_the_tail,
                test_tail_grows_when_no_hole_fits);
    return s;
}
