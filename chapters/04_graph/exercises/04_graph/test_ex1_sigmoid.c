// test_ex1_sigmoid.c - chapter 04, exercise 1: mg_sigmoid and mg_sigmoid_inplace.
//
// Graded by `make grade`. The functions are declared weak, so this test links
// against a chapter that does not have them yet and fails with a message; the
// op is found through mg_op_name, so the test needs no MG_OP_SIGMOID either.
// Values are checked against the formula in double, 1 / (1 + e^-x).
#include "harness.h"
#include "mg.h"

#include <math.h>

struct mg_tensor * mg_sigmoid        (struct mg_context * ctx, struct mg_tensor * a) __attribute__((weak));
struct mg_tensor * mg_sigmoid_inplace(struct mg_context * ctx, struct mg_tensor * a) __attribute__((weak));

#define N 101   // x = -10 .. 10 in steps of 0.2

static struct mg_context * new_ctx(void) {
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 1024 * 1024});
    ck_assert_ptr_nonnull(ctx);
    return ctx;
}

static struct mg_tensor * new_inputs(struct mg_context * ctx) {
    struct mg_tensor * x = mg_new_tensor_1d(ctx, MG_TYPE_F32, N);
    for (int i = 0; i < N; i++) ((float *) x->data)[i] = -10.0f + 0.2f * (float) i;
    return x;
}

static double sigmoid_ref(double x) { return 1.0 / (1.0 + exp(-x)); }

static void compute(struct mg_context * ctx, struct mg_tensor * out) {
    struct mg_cgraph * g = mg_new_graph(ctx);
    mg_build_forward_expand(g, out);
    mg_graph_compute_with_ctx(ctx, g, 1);
}

START_TEST(sigmoid_exists) {
    ck_assert_msg(mg_sigmoid != NULL, "mg_sigmoid is not defined yet (ops.c, declared in ops.h)");
    ck_assert_msg(mg_sigmoid_inplace != NULL, "mg_sigmoid_inplace is not defined yet (ops.c)");
}
END_TEST

START_TEST(sigmoid_is_a_new_op_with_a_name_and_a_symbol) {
    ck_assert_msg(mg_sigmoid != NULL, "mg_sigmoid is not defined yet");
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * x = new_inputs(ctx);
    struct mg_tensor * y = mg_sigmoid(ctx, x);
    ck_assert_ptr_eq(y->src[0], x);
    ck_assert_msg(y->op > MG_OP_NONE && y->op < MG_OP_COUNT, "op %d is not in enum mg_op", (int) y->op);
    ck_assert_str_eq(mg_op_name(y->op), "SIGMOID");
    ck_assert_str_ne(mg_op_symbol(y->op), "");
    for (int op = 0; op < MG_OP_COUNT; op++) {   // the op is new: no other op has its name or symbol
        if (op == (int) y->op) continue;
        ck_assert_str_ne(mg_op_name((enum mg_op) op), "SIGMOID");
        ck_assert_msg(mg_op_symbol((enum mg_op) op) == NULL ||
                          strcmp(mg_op_symbol((enum mg_op) op), mg_op_symbol(y->op)) != 0,
                      "%s has the same symbol as SIGMOID", mg_op_name((enum mg_op) op));
    }
    ck_assert_ptr_null(y->data);   // lazy: nothing computed before the graph runs
    mg_free(ctx);
}
END_TEST

START_TEST(sigmoid_values) {
    ck_assert_msg(mg_sigmoid != NULL, "mg_sigmoid is not defined yet");
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * x = new_inputs(ctx);
    struct mg_tensor * y = mg_sigmoid(ctx, x);
    compute(ctx, y);
    ck_assert_int_eq(y->ne[0], N);
    ck_assert_ptr_ne(y->data, x->data);
    for (int i = 0; i < N; i++) {
        const float xi = ((const float *) x->data)[i];
        const float yi = ((const float *) y->data)[i];
        ck_assert_msg(fabs(yi - sigmoid_ref(xi)) < 1e-6, "sigmoid(%g) = %.9g, expected %.9g", xi, yi,
                      sigmoid_ref(xi));
        ck_assert_float_eq(((const float *) x->data)[i], xi);   // the input is untouched
    }
    mg_free(ctx);
}
END_TEST

// A 2-D input through a transposed view: the kernel must read through nb[].
START_TEST(sigmoid_of_a_transposed_view) {
    ck_assert_msg(mg_sigmoid != NULL, "mg_sigmoid is not defined yet");
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * m = mg_new_tensor_2d(ctx, MG_TYPE_F32, 4, 3);
    for (int i = 0; i < 12; i++) ((float *) m->data)[i] = (float) i - 6.0f;
    struct mg_tensor * y = mg_sigmoid(ctx, mg_transpose(ctx, m));
    compute(ctx, y);
    ck_assert_int_eq(y->ne[0], 3);
    ck_assert_int_eq(y->ne[1], 4);
    for (int i1 = 0; i1 < 4; i1++) {
        for (int i0 = 0; i0 < 3; i0++) {
            const float got = mg_get_f32_nd(y, i0, i1, 0, 0);
            const double want = sigmoid_ref(((const float *) m->data)[i0 * 4 + i1]);
            ck_assert_msg(fabs(got - want) < 1e-6, "y[%d,%d] = %g, expected %g", i0, i1, got, want);
        }
    }
    mg_free(ctx);
}
END_TEST

START_TEST(sigmoid_inplace_writes_over_its_operand) {
    ck_assert_msg(mg_sigmoid_inplace != NULL, "mg_sigmoid_inplace is not defined yet");
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * x = new_inputs(ctx);
    float before[N];
    memcpy(before, x->data, sizeof before);
    struct mg_tensor * y = mg_sigmoid_inplace(ctx, x);
    ck_assert_str_eq(mg_op_name(y->op), "SIGMOID");
    ck_assert_ptr_eq(y->view_src, x);   // the result is a view of x
    compute(ctx, y);
    ck_assert_ptr_eq(y->data, x->data);
    for (int i = 0; i < N; i++) {
        ck_assert_msg(fabs(((const float *) y->data)[i] - sigmoid_ref(before[i])) < 1e-6, "sigmoid(%g)", before[i]);
    }
    mg_free(ctx);
}
END_TEST

// sigmoid(-x) = 1 - sigmoid(x), and the graph of relu(sigmoid(x)) - sigmoid(x) is all zeros.
START_TEST(sigmoid_in_a_graph) {
    ck_assert_msg(mg_sigmoid != NULL, "mg_sigmoid is not defined yet");
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * x   = new_inputs(ctx);
    struct mg_tensor * s   = mg_sigmoid(ctx, x);
    struct mg_tensor * sn  = mg_sigmoid(ctx, mg_scale(ctx, x, -1.0f));
    struct mg_tensor * one = mg_add(ctx, s, sn);
    struct mg_tensor * d   = mg_sub(ctx, mg_relu(ctx, s), s);
    struct mg_cgraph * g = mg_new_graph(ctx);
    mg_build_forward_expand(g, one);
    mg_build_forward_expand(g, d);
    mg_graph_compute_with_ctx(ctx, g, 1);
    for (int i = 0; i < N; i++) {
        ck_assert_msg(fabsf(((const float *) one->data)[i] - 1.0f) < 1e-6f, "sigmoid(x) + sigmoid(-x) != 1 at %d", i);
        ck_assert_float_eq(((const float *) d->data)[i], 0.0f);
    }
    ck_assert_int_eq(mg_graph_use_count(g, s), 3);   // read by the add, the relu and the sub
    mg_free(ctx);
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("04_graph ex1 sigmoid");
    TCase * tc = tcase_create("sigmoid");
    tcase_add_test(tc, sigmoid_exists);
    tcase_add_test(tc, sigmoid_is_a_new_op_with_a_name_and_a_symbol);
    tcase_add_test(tc, sigmoid_values);
    tcase_add_test(tc, sigmoid_of_a_transposed_view);
    tcase_add_test(tc, sigmoid_inplace_writes_over_its_operand);
    tcase_add_test(tc, sigmoid_in_a_graph);
    suite_add_tcase(s, tc);
    return s;
}
