// test_op_inplace.c - every op has a parent-reuse rule, and the rule is safe.
//
// galloc.c's mg_op_can_inplace is a table, an op a row: an op without a row
// may not (the safe answer). What no table can check is that a rule is right:
// an op that may be written over its input must give the same bytes whether
// it is or not. This computes each such op of this chapter that chapter 03's
// builders make, once with parent reuse (the result lands on its input) and
// once without, and compares.
#include "harness.h"
#include "mg.h"

#include <string.h>

START_TEST(test_every_op_has_a_rule) {
    for (int op = 0; op < MG_OP_COUNT; op++) {
        const bool inplace = mg_op_can_inplace((enum mg_op) op);
        // What holds no bytes, or reads more than element i to write element i, may not.
        if (op == MG_OP_NONE || mg_op_is_view((enum mg_op) op) || op == MG_OP_MUL_MAT || op == MG_OP_SUM_ROWS ||
            op == MG_OP_GET_ROWS || op == MG_OP_CPY || op == MG_OP_CONT) {
            ck_assert_msg(!inplace, "%s must not be computed in place", mg_op_name((enum mg_op) op));
        }
    }
    ck_assert(!mg_op_can_inplace(MG_OP_COUNT));
    ck_assert(mg_op_can_inplace(MG_OP_ADD) && mg_op_can_inplace(MG_OP_RELU));   // the lesson's example
}
END_TEST

typedef struct mg_tensor * (*unary_fn)(struct mg_context *, struct mg_tensor *);

static struct mg_tensor * scale_half(struct mg_context * ctx, struct mg_tensor * a) { return mg_scale(ctx, a, 0.5f); }
static struct mg_tensor * rms(struct mg_context * ctx, struct mg_tensor * a) { return mg_rms_norm(ctx, a, 1e-5f); }
static struct mg_tensor * add_b(struct mg_context * ctx, struct mg_tensor * a) {
    return mg_add(ctx, a, mg_sqr(ctx, a));
}
static struct mg_tensor * sub_b(struct mg_context * ctx, struct mg_tensor * a) { return mg_sub(ctx, a, mg_sqr(ctx, a)); }
static struct mg_tensor * mul_b(struct mg_context * ctx, struct mg_tensor * a) { return mg_mul(ctx, a, mg_sqr(ctx, a)); }
static struct mg_tensor * div_b(struct mg_context * ctx, struct mg_tensor * a) {
    return mg_div(ctx, a, mg_scale(ctx, mg_sqr(ctx, a), 2.0f));
}

// f(wx) where wx is a computed {4, 3} result whose only reader is f: parent
// reuse puts f's result on wx's bytes exactly when the rule says it may.
static void run(unary_fn f, bool reuse, float out[12], enum mg_op * op, bool * reused) {
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 1024 * 1024});
    struct mg_tensor * W = mg_new_tensor_2d(ctx, MG_TYPE_F32, 4, 4);
    struct mg_tensor * x = mg_new_tensor_2d(ctx, MG_TYPE_F32, 4, 3);
    uint64_t rng = 5;
    mg_test_fill_uniform(W->data, 16, &rng, 0.1f, 1.0f);
    mg_test_fill_uniform(x->data, 12, &rng, 0.1f, 1.0f);
    struct mg_tensor * wx = mg_mul_mat(ctx, W, x);
    struct mg_tensor * y  = f(ctx, wx);
    y->flags |= MG_TENSOR_FLAG_OUTPUT;
    struct mg_cgraph * g = mg_new_graph(ctx);
    mg_build_forward_expand(g, y);
    struct mg_gallocr * ga = mg_gallocr_new(0);
    mg_gallocr_set_reuse_parent(ga, reuse);
    ck_assert(mg_gallocr_alloc_graph(ga, g));
    mg_graph_compute_with_ctx(ctx, g, 1);
    memcpy(out, y->data, 12 * sizeof(float));
    *op = y->op;
    *reused = y->data == wx->data;
    mg_gallocr_free(ga);
    mg_free(ctx);
}

START_TEST(test_inplace_ops_give_the_same_bytes) {
    const unary_fn fns[] = {mg_relu, mg_silu, mg_gelu, mg_sqr, mg_sqrt, mg_soft_max, scale_half, rms,
                            add_b, sub_b, mul_b, div_b};
    bool seen[MG_OP_COUNT] = {false};
    for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
        float with[12], without[12];
        enum mg_op op;
        bool reused, reused_off;
        run(fns[i], true, with, &op, &reused);
        run(fns[i], false, without, &op, &reused_off);
        ck_assert_msg(!reused_off, "%s: reuse off, yet the result sits on its input", mg_op_name(op));
        ck_assert_msg(reused == mg_op_can_inplace(op), "%s: reused %d, rule %d", mg_op_name(op), reused,
                      mg_op_can_inplace(op));
        for (int k = 0; k < 12; k++) {
            ck_assert_msg(with[k] == without[k], "%s in place: [%d] = %g, out of place %g", mg_op_name(op), k,
                          (double) with[k], (double) without[k]);
        }
        seen[op] = true;
    }
    // Every op this test can build with one input that the rule allows was tried.
    for (int op = 0; op < MG_OP_COUNT; op++) {
        if (op <= MG_OP_GET_ROWS && mg_op_can_inplace((enum mg_op) op)) {
            ck_assert_msg(seen[op], "%s may be computed in place, but is not tried here", mg_op_name((enum mg_op) op));
        }
    }
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("op_inplace");
    MG_TCASE(s, "inplace", test_every_op_has_a_rule, test_inplace_ops_give_the_same_bytes);
    return s;
}
