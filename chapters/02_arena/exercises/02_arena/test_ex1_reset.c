// test_ex1_reset.c - chapter 02, exercise 1: void mg_reset(struct mg_context * ctx).
//
// Forget every object but keep the buffer (ggml_reset), so that one context
// can hold each decode step's graph in turn. Graded by `make grade`; declared
// weak, so the test links without it and fails with a message.
#include "harness.h"
#include "mg.h"

void mg_reset(struct mg_context * ctx) __attribute__((weak));

static void require_function(void) {
    ck_assert_msg(mg_reset != NULL, "mg_reset is not defined yet (arena.c, declared in arena.h)");
}

START_TEST(reset_exists) {
    require_function();
}
END_TEST

START_TEST(reset_forgets_every_object) {
    require_function();
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 64 * 1024});
    struct mg_tensor * a = mg_set_name(mg_new_tensor_1d(ctx, MG_TYPE_F32, 100), "a");
    mg_set_name(mg_new_tensor_2d(ctx, MG_TYPE_F16, 8, 8), "b");
    ck_assert_int_eq(mg_n_objects(ctx), 2);
    void * first_header = a;
    void * first_data   = a->data;
    mg_reset(ctx);
    ck_assert_int_eq(mg_n_objects(ctx), 0);
    ck_assert_uint_eq(mg_used_mem(ctx), 0);
    ck_assert_uint_eq(mg_get_mem_size(ctx), 64 * 1024);   // the buffer is kept
    ck_assert_ptr_null(mg_get_first_tensor(ctx));
    ck_assert_ptr_null(mg_get_tensor(ctx, "a"));
    ck_assert_ptr_null(mg_get_tensor(ctx, "b"));
    // The next tensor is object #0 again, in the very same bytes.
    struct mg_tensor * c = mg_set_name(mg_new_tensor_1d(ctx, MG_TYPE_F32, 100), "c");
    ck_assert_ptr_eq(c, first_header);
    ck_assert_ptr_eq(c->data, first_data);
    ck_assert_int_eq(mg_n_objects(ctx), 1);
    ck_assert_ptr_eq(mg_get_first_tensor(ctx), c);
    ck_assert_ptr_null(mg_get_next_tensor(ctx, c));
    ck_assert_ptr_eq(mg_get_tensor(ctx, "c"), c);
    mg_free(ctx);
}
END_TEST

// Full, reset, full again, a thousand times: the same number of tensors fits each time.
START_TEST(a_full_context_is_reused) {
    require_function();
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 16 * 1024});
    int first = -1;
    for (int round = 0; round < 1000; round++) {
        int n = 0;
        while (mg_new_tensor_1d(ctx, MG_TYPE_F32, 16 + round % 7) != NULL) n++;
        if (first < 0) first = n;
        if (round % 7 == 0) ck_assert_int_eq(n, first);   // the same sizes as round 0
        ck_assert_int_eq(mg_n_objects(ctx), n);
        mg_reset(ctx);
    }
    ck_assert_int_gt(first, 10);
    mg_free(ctx);
}
END_TEST

// A no_alloc context stays no_alloc, and a caller's buffer stays the caller's.
START_TEST(reset_keeps_the_settings) {
    require_function();
    static _Alignas(16) char buffer[8192];
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = sizeof buffer, .mem_buffer = buffer,
                                                               .no_alloc = true});
    struct mg_tensor * t = mg_new_tensor_2d(ctx, MG_TYPE_F32, 1000, 1000);
    ck_assert_ptr_null(t->data);
    mg_reset(ctx);
    ck_assert(mg_get_no_alloc(ctx));
    t = mg_new_tensor_2d(ctx, MG_TYPE_F32, 1000, 1000);
    ck_assert_ptr_nonnull(t);
    ck_assert_ptr_null(t->data);
    ck_assert((char *) t >= buffer && (char *) t < buffer + sizeof buffer);
    mg_free(ctx);
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("02_arena ex1 reset");
    TCase * tc = tcase_create("reset");
    tcase_add_test(tc, reset_exists);
    tcase_add_test(tc, reset_forgets_every_object);
    tcase_add_test(tc, a_full_context_is_reused);
    tcase_add_test(tc, reset_keeps_the_settings);
    suite_add_tcase(s, tc);
    return s;
}
