// test_ex2_median_rows.c - chapter 07, exercise 2: a new op that needs scratch.
//
//     struct mg_tensor * mg_median_rows(struct mg_context * ctx, struct mg_tensor * a);   // {n, rows..} -> {1, rows..}
//
// The median of each row (the mean of the two middle values when n is even).
// The kernel sorts a copy of the row, so it needs scratch: a row of n floats
// per share, each padded to its own cache line, as softmax does. The op goes
// in the places every op has (enum, names, constructor, kernel) and in
// mg_node_work_size. Graded by `make grade`; mg_median_rows is declared weak
// and the op found by its name, "MEDIAN_ROWS". Checked against a median worked
// out here, with 1 to 4 shares, on rows read through a transposed view, and
// the plan against the scratch rule.
#include "harness.h"
#include "mg.h"

#include <stdlib.h>

struct mg_tensor * mg_median_rows(struct mg_context * ctx, struct mg_tensor * a) __attribute__((weak));

static void require_function(void) {
    ck_assert_msg(mg_median_rows != NULL, "mg_median_rows is not defined yet (ops.c, declared in ops.h)");
}

static int by_value(const void * a, const void * b) {
    const float x = *(const float *) a, y = *(const float *) b;
    return (x > y) - (x < y);
}

static float median_ref(const float * x, int n) {
    float s[512];
    memcpy(s, x, (size_t) n * sizeof(float));
    qsort(s, (size_t) n, sizeof(float), by_value);
    return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2.0f;
}

// Runs g with its plan on n_threads shares (chapter 07 runs them one after another).
static void run(struct mg_context * ctx, struct mg_cgraph * g, int n_threads) {
    mg_graph_compute_with_ctx(ctx, g, n_threads);
}

START_TEST(function_exists) {
    require_function();
}
END_TEST

START_TEST(a_new_op_with_a_name) {
    require_function();
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 1024 * 1024});
    struct mg_tensor * a = mg_new_tensor_2d(ctx, MG_TYPE_F32, 7, 3);
    struct mg_tensor * m = mg_median_rows(ctx, a);
    ck_assert_str_eq(mg_op_name(m->op), "MEDIAN_ROWS");
    ck_assert_str_ne(mg_op_symbol(m->op), "");
    ck_assert_ptr_eq(m->src[0], a);
    ck_assert_int_eq(m->ne[0], 1);
    ck_assert_int_eq(m->ne[1], 3);
    mg_free(ctx);
}
END_TEST

START_TEST(the_plan_counts_a_row_per_share) {
    require_function();
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 1024 * 1024});
    struct mg_tensor * a = mg_new_tensor_2d(ctx, MG_TYPE_F32, 100, 6);
    struct mg_tensor * m = mg_median_rows(ctx, a);
    for (int n_tasks = 1; n_tasks <= 8; n_tasks++) {
        ck_assert_uint_eq(mg_node_work_size(m, n_tasks), (size_t) n_tasks * (100 * sizeof(float) + MG_CACHE_LINE));
    }
    struct mg_cgraph * g = mg_new_graph(ctx);
    mg_build_forward_expand(g, m);
    for (int n_threads = 1; n_threads <= 4; n_threads++) {
        const struct mg_cplan plan = mg_graph_plan(g, n_threads);
        ck_assert_uint_eq(plan.work_size, (size_t) n_threads * (100 * sizeof(float) + MG_CACHE_LINE) +
                                              (size_t) n_threads * MG_CACHE_LINE);
    }
    mg_free(ctx);
}
END_TEST

START_TEST(medians_of_random_rows) {
    require_function();
    uint64_t rng = 0x3ed1a;
    for (int round = 0; round < 60; round++) {
        struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 4 * 1024 * 1024});
        const int n = 1 + (int) (mg_test_rand_u64(&rng) % 200), rows = 1 + (int) (mg_test_rand_u64(&rng) % 9);
        struct mg_tensor * a = mg_new_tensor_2d(ctx, MG_TYPE_F32, n, rows);
        mg_test_fill_uniform(a->data, (size_t) (n * rows), &rng, -10.0f, 10.0f);
        if (round % 3 == 0) {   // repeated values
            for (int i = 0; i < n * rows; i++) ((float *) a->data)[i] = (float) ((int) ((float *) a->data)[i] / 4);
        }
        float before[512 * 9];
        memcpy(before, a->data, (size_t) (n * rows) * sizeof(float));
        struct mg_tensor * m = mg_median_rows(ctx, a);
        struct mg_cgraph * g = mg_new_graph(ctx);
        mg_build_forward_expand(g, m);
        run(ctx, g, 1 + round % 4);
        for (int r = 0; r < rows; r++) {
            const float want = median_ref(before + r * n, n);
            ck_assert_msg(mg_get_f32_nd(m, 0, r, 0, 0) == want, "n %d, %d shares, row %d: median %g, expected %g", n,
                          1 + round % 4, r, (double) mg_get_f32_nd(m, 0, r, 0, 0), (double) want);
        }
        ck_assert_mem_eq(a->data, before, (size_t) (n * rows) * sizeof(float));   // the input is not sorted in place
        mg_free(ctx);
    }
}
END_TEST

// The columns of a matrix, through a transposed view: the kernel must read through nb.
START_TEST(medians_of_columns) {
    require_function();
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 1024 * 1024});
    struct mg_tensor * a = mg_new_tensor_2d(ctx, MG_TYPE_F32, 5, 4);   // 4 rows of 5
    for (int i = 0; i < 20; i++) ((float *) a->data)[i] = (float) ((i * 7) % 20);
    struct mg_tensor * m = mg_median_rows(ctx, mg_transpose(ctx, a));   // 5 rows of 4
    struct mg_cgraph * g = mg_new_graph(ctx);
    mg_build_forward_expand(g, m);
    run(ctx, g, 2);
    for (int c = 0; c < 5; c++) {
        float col[4];
        for (int r = 0; r < 4; r++) col[r] = ((const float *) a->data)[r * 5 + c];
        ck_assert_msg(mg_get_f32_nd(m, 0, c, 0, 0) == median_ref(col, 4), "column %d", c);
    }
    mg_free(ctx);
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("07_scratch ex2 median_rows");
    TCase * tc = tcase_create("median_rows");
    tcase_add_test(tc, function_exists);   // 0 points: only a start
    tcase_add_test(tc, a_new_op_with_a_name);
    tcase_add_test(tc, the_plan_counts_a_row_per_share);
    tcase_add_test(tc, medians_of_random_rows);
    tcase_add_test(tc, medians_of_columns);
    suite_add_tcase(s, tc);
    return s;
}
