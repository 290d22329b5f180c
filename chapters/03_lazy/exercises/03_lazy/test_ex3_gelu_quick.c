// test_ex3_gelu_quick.c - chapter 03, exercise 3: mg_gelu_quick and mg_gelu_quick_inplace.
//
// Graded by `make grade`. The functions are declared weak, so this test links
// against a chapter that does not have them yet and fails with a message; the
// op is found through mg_op_name, so the test needs no MG_OP_GELU_QUICK
// either. GELU's fast approximation x * sigmoid(1.702 x) (ggml_gelu_quick),
// checked against that formula in double.
#include "harness.h"
#include "mg.h"

#include <math.h>

struct mg_tensor * mg_gelu_quick        (struct mg_context * ctx, struct mg_tensor * a) __attribute__((weak));
struct mg_tensor * mg_gelu_quick_inplace(struct mg_context * ctx, struct mg_tensor * a) __attribute__((weak));

#define N 101   // x = -5 .. 5 in steps of 0.1

static struct mg_context * new_ctx(void) {
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 1024 * 1024});
    ck_assert_ptr_nonnull(ctx);
    return ctx;
}

static struct mg_tensor * new_inputs(struct mg_context * ctx) {
    struct mg_tensor * x = mg_new_tensor_1d(ctx, MG_TYPE_F32, N);
    for (int i = 0; i < N; i++) ((float *) x->data)[i] = -5.0f + 0.1f * (float) i;
    return x;
}

// x * sigmoid(1.702 x) in double; float rounding allowed.
static void assert_gelu_quick(float x, float y) {
    const double want = x / (1.0 + exp(-1.702 * x));
    ck_assert_msg(fabs(y - want) <= 1e-6 * (1.0 + fabs(want)), "gelu_quick(%g) = %.9g, expected %.9g", x, y, want);
}

START_TEST(gelu_quick_exists) {
    ck_assert_msg(mg_gelu_quick != NULL, "mg_gelu_quick is not defined yet (ops.c, declared in ops.h)");
    ck_assert_msg(mg_gelu_quick_inplace != NULL, "mg_gelu_quick_inplace is not defined yet (ops.c)");
}
END_TEST

START_TEST(gelu_quick_is_a_new_op_with_a_name_and_a_symbol) {
    ck_assert_msg(mg_gelu_quick != NULL, "mg_gelu_quick is not defined yet");
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * x = new_inputs(ctx);
    struct mg_tensor * y = mg_gelu_quick(ctx, x);
    ck_assert_ptr_eq(y->src[0], x);
    ck_assert_msg(y->op > MG_OP_NONE && y->op < MG_OP_COUNT, "op %d is not in enum mg_op", (int) y->op);
    ck_assert_str_eq(mg_op_name(y->op), "GELU_QUICK");
    ck_assert_str_ne(mg_op_symbol(y->op), "");
    for (int op = 0; op < MG_OP_COUNT; op++) {
        if (op == (int) y->op) continue;
        ck_assert_str_ne(mg_op_name((enum mg_op) op), "GELU_QUICK");
        ck_assert_msg(strcmp(mg_op_symbol((enum mg_op) op), mg_op_symbol(y->op)) != 0, "%s has the same symbol as GELU_QUICK",
                      mg_op_name((enum mg_op) op));
    }
    ck_assert_ptr_null(y->data);   // lazy: nothing computed yet
    mg_free(ctx);
}
END_TEST

START_TEST(gelu_quick_values) {
    ck_assert_msg(mg_gelu_quick != NULL, "mg_gelu_quick is not defined yet");
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * x = new_inputs(ctx);
    struct mg_tensor * y = mg_gelu_quick(ctx, x);
    mg_compute(ctx, y);
    ck_assert_ptr_ne(y->data, x->data);
    for (int i = 0; i < N; i++) assert_gelu_quick(((const float *) x->data)[i], ((const float *) y->data)[i]);
    mg_free(ctx);
}
END_TEST

START_TEST(gelu_quick_of_a_transposed_view) {
    ck_assert_msg(mg_gelu_quick != NULL, "mg_gelu_quick is not defined yet");
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * m = mg_new_tensor_2d(ctx, MG_TYPE_F32, 4, 3);
    for (int i = 0; i < 12; i++) ((float *) m->data)[i] = 0.5f * (float) i - 3.0f;
    struct mg_tensor * y = mg_gelu_quick(ctx, mg_transpose(ctx, m));
    mg_compute(ctx, y);
    for (int i1 = 0; i1 < 4; i1++)
        for (int i0 = 0; i0 < 3; i0++) assert_gelu_quick(((const float *) m->data)[i0 * 4 + i1], mg_get_f32_nd(y, i0, i1, 0, 0));
    mg_free(ctx);
}
END_TEST

START_TEST(gelu_quick_inplace_writes_over_its_operand) {
    ck_assert_msg(mg_gelu_quick_inplace != NULL, "mg_gelu_quick_inplace is not defined yet");
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * x = new_inputs(ctx);
    float before[N];
    memcpy(before, x->data, sizeof before);
    struct mg_tensor * y = mg_gelu_quick_inplace(ctx, x);
    ck_assert_str_eq(mg_op_name(y->op), "GELU_QUICK");
    ck_assert_ptr_eq(y->view_src, x);
    mg_compute(ctx, y);
    ck_assert_ptr_eq(y->data, x->data);
    for (int i = 0; i < N; i++) assert_gelu_quick(before[i], ((const float *) y->data)[i]);
    mg_free(ctx);
}
END_TEST

// gelu_quick(x) - gelu_quick(-x) = x, as for every x * sigmoid(k x), through a small computation.
START_TEST(gelu_quick_minus_its_mirror_is_x) {
    ck_assert_msg(mg_gelu_quick != NULL, "mg_gelu_quick is not defined yet");
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * x = new_inputs(ctx);
    struct mg_tensor * z = mg_sub(ctx, mg_gelu_quick(ctx, x), mg_gelu_quick(ctx, mg_scale(ctx, x, -1.0f)));
    mg_compute(ctx, z);
    for (int i = 0; i < N; i++) {
        const float xi = ((const float *) x->data)[i];
        ck_assert_msg(fabsf(((const float *) z->data)[i] - xi) <= 2e-6f * (1.0f + fabsf(xi)), "at x = %g: %g", xi, ((const float *) z->data)[i]);
    }
    mg_free(ctx);
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("03_lazy ex3 gelu_quick");
    TCase * tc = tcase_create("gelu_quick");
    tcase_add_test(tc, gelu_quick_exists);
    tcase_add_test(tc, gelu_quick_is_a_new_op_with_a_name_and_a_symbol);
    tcase_add_test(tc, gelu_quick_values);
    tcase_add_test(tc, gelu_quick_of_a_transposed_view);
    tcase_add_test(tc, gelu_quick_inplace_writes_over_its_operand);
    tcase_add_test(tc, gelu_quick_minus_its_mirror_is_x);
    suite_add_tcase(s, tc);
    return s;
}
