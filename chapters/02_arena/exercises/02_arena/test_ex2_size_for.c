// test_ex2_size_for.c - chapter 02, exercise 2: the exact size of a context.
//
//     size_t mg_context_size_for(int n, const size_t * data_sizes);
//
// The smallest mem_size of a context that holds n tensors whose data take
// data_sizes[i] bytes (0 for a tensor without data: a view, or any tensor of
// a no_alloc context). llama.cpp sizes its contexts the same way:
// ggml_tensor_overhead() per tensor plus each tensor's ggml_nbytes_pad.
// Graded by `make grade`; declared weak. Checked as a property on random
// sets of tensors: in a context of exactly that size every tensor fits and
// the arena is full; MG_MEM_ALIGN bytes less and the last one does not fit.
#include "harness.h"
#include "mg.h"

size_t mg_context_size_for(int n, const size_t * data_sizes) __attribute__((weak));

static void require_function(void) {
    ck_assert_msg(mg_context_size_for != NULL, "mg_context_size_for is not defined yet (arena.c, declared in arena.h)");
}

START_TEST(size_for_exists) {
    require_function();
}
END_TEST

START_TEST(headers_only) {
    require_function();
    ck_assert_uint_eq(mg_context_size_for(0, NULL), 0);
    const size_t zeros[3] = {0, 0, 0};
    ck_assert_uint_eq(mg_context_size_for(3, zeros), 3 * mg_tensor_overhead());
}
END_TEST

struct spec {
    enum mg_type type;
    int64_t      ne0, ne1;
};

// Makes the tensors in a context of mem_size bytes; returns how many fit.
static int fill(size_t mem_size, bool no_alloc, const struct spec * specs, int n, size_t * used) {
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = mem_size, .no_alloc = no_alloc});
    ck_assert_ptr_nonnull(ctx);
    int made = 0;
    while (made < n && mg_new_tensor_2d(ctx, specs[made].type, specs[made].ne0, specs[made].ne1) != NULL) made++;
    *used = mg_used_mem(ctx);
    mg_free(ctx);
    return made;
}

START_TEST(exact_for_random_tensors) {
    require_function();
    uint64_t rng = 0xa7e4a;
    const enum mg_type types[4] = {MG_TYPE_F32, MG_TYPE_F16, MG_TYPE_Q4_0, MG_TYPE_Q8_0};
    for (int round = 0; round < 300; round++) {
        struct spec specs[20];
        size_t data[20];
        const int n = 1 + (int) (mg_test_rand_u64(&rng) % 20);
        const bool no_alloc = round % 5 == 4;
        for (int i = 0; i < n; i++) {
            specs[i].type = types[mg_test_rand_u64(&rng) % 4];
            specs[i].ne0  = mg_blck_size(specs[i].type) * (int64_t) (1 + mg_test_rand_u64(&rng) % 9);
            specs[i].ne1  = 1 + (int64_t) (mg_test_rand_u64(&rng) % 5);
            data[i] = no_alloc ? 0 : mg_row_size(specs[i].type, specs[i].ne0) * (size_t) specs[i].ne1;
        }
        const size_t size = mg_context_size_for(n, data);
        ck_assert_msg(size % MG_MEM_ALIGN == 0, "round %d: %zu is not a multiple of MG_MEM_ALIGN", round, size);
        size_t used;
        ck_assert_msg(fill(size, no_alloc, specs, n, &used) == n, "round %d: %zu bytes do not hold the %d tensors",
                      round, size, n);
        ck_assert_msg(used == size, "round %d: %zu bytes asked, %zu used: not the smallest size", round, size, used);
        ck_assert_msg(fill(size - MG_MEM_ALIGN, no_alloc, specs, n, &used) == n - 1,
                      "round %d: %zu bytes less still hold all %d tensors", round, (size_t) MG_MEM_ALIGN, n);
    }
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("02_arena ex2 size_for");
    TCase * tc = tcase_create("size_for");
    tcase_add_test(tc, size_for_exists);
    tcase_add_test(tc, headers_only);
    tcase_add_test(tc, exact_for_random_tensors);
    suite_add_tcase(s, tc);
    return s;
}
