// test_ex2_compute_once.c - chapter 03, exercise 2: compute each node once.
//
// mg_compute recurses into the operands of every node, so a tensor read along
// two paths is computed twice. That is wasted work, and wrong work when the
// tensor is computed in place: with y = add_inplace(a, b), out = add(y, y)
// adds b to a twice. After the exercise, one mg_compute call computes each
// tensor once, and the next call (new inputs) computes them all again.
// Graded by `make grade`; it uses only what the chapter has, so it builds on
// the untouched chapter and fails on its values.
#include "harness.h"
#include "mg.h"

static struct mg_context * new_ctx(void) {
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 8 * 1024 * 1024});
    ck_assert_ptr_nonnull(ctx);
    return ctx;
}

static struct mg_tensor * new_vector(struct mg_context * ctx, int n, float first, float step) {
    struct mg_tensor * t = mg_new_tensor_1d(ctx, MG_TYPE_F32, n);
    for (int i = 0; i < n; i++) ((float *) t->data)[i] = first + step * (float) i;
    return t;
}

static float at(const struct mg_tensor * t, int i) {
    return ((const float *) t->data)[i];
}

// out = y + y with y = a + b in place: 2 (a + b), and a holds a + b afterwards.
START_TEST(an_inplace_node_read_twice) {
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * a = new_vector(ctx, 8, 1.0f, 1.0f);    // 1 .. 8
    struct mg_tensor * b = new_vector(ctx, 8, 10.0f, 0.0f);   // 10
    struct mg_tensor * y = mg_add_inplace(ctx, a, b);
    struct mg_tensor * out = mg_add(ctx, y, y);
    mg_compute(ctx, out);
    for (int i = 0; i < 8; i++) {
        ck_assert_msg(at(out, i) == 2.0f * (float) (i + 1 + 10), "out[%d] = %g, expected %g: y computed more than once?",
                      i, at(out, i), 2.0f * (float) (i + 11));
        ck_assert_msg(at(a, i) == (float) (i + 11), "a[%d] = %g, expected %g", i, at(a, i), (float) (i + 11));
    }
    mg_free(ctx);
}
END_TEST

// A diamond of in-place scales, three levels deep: each level doubles once.
START_TEST(a_chain_of_inplace_diamonds) {
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * x = new_vector(ctx, 4, 1.0f, 1.0f);
    struct mg_tensor * t = x;
    for (int level = 0; level < 3; level++) {
        struct mg_tensor * s = mg_scale_inplace(ctx, t, 2.0f);   // read by both sides of the sub below
        t = mg_sub(ctx, mg_scale(ctx, s, 3.0f), s);              // 3s - s = 2s
    }
    mg_compute(ctx, t);
    // Each level: s = 2t, then 2s = 4t. Three levels: 64 x.
    for (int i = 0; i < 4; i++) {
        ck_assert_msg(at(t, i) == 64.0f * (float) (i + 1), "t[%d] = %g, expected %g", i, at(t, i), 64.0f * (float) (i + 1));
    }
    mg_free(ctx);
}
END_TEST

// The lesson's point stands: built once, computed again for new inputs.
START_TEST(a_second_call_computes_again) {
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * x  = new_vector(ctx, 6, -3.0f, 1.0f);
    struct mg_tensor * h  = mg_relu(ctx, x);
    struct mg_tensor * out = mg_add(ctx, h, mg_sqr(ctx, h));   // h read twice
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 6; i++) ((float *) x->data)[i] = (float) (round * 2 + i) - 3.0f;
        mg_compute(ctx, out);
        for (int i = 0; i < 6; i++) {
            const float v = (float) (round * 2 + i) - 3.0f;
            const float r = v > 0.0f ? v : 0.0f;
            ck_assert_msg(at(out, i) == r + r * r, "round %d: out[%d] = %g, expected %g", round, i, at(out, i), r + r * r);
        }
    }
    mg_free(ctx);
}
END_TEST

// Twenty levels of x = x + x in place would be computed about a million times
// by the plain recursion; each level must run once, doubling once.
START_TEST(twenty_levels_double_twenty_times) {
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * x = new_vector(ctx, 2, 1.0f, 1.0f);
    struct mg_tensor * t = x;
    for (int level = 0; level < 20; level++) t = mg_add_inplace(ctx, t, t);
    struct mg_tensor * out = mg_add(ctx, t, t);
    mg_compute(ctx, out);
    ck_assert_msg(at(out, 0) == 2.0f * 1048576.0f, "out[0] = %g, expected %g", at(out, 0), 2.0f * 1048576.0f);
    ck_assert_msg(at(out, 1) == 4.0f * 1048576.0f, "out[1] = %g, expected %g", at(out, 1), 4.0f * 1048576.0f);
    mg_free(ctx);
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("03_lazy ex2 compute once");
    TCase * tc = tcase_create("compute_once");
    tcase_add_test(tc, an_inplace_node_read_twice);
    tcase_add_test(tc, a_chain_of_inplace_diamonds);
    tcase_add_test(tc, a_second_call_computes_again);   // 0 points: the untouched chapter passes it already
    tcase_add_test(tc, twenty_levels_double_twenty_times);
    suite_add_tcase(s, tc);
    return s;
}
