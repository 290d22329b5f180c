// test_ops.c - every op of chapter 03 against a naive reference, and the lazy contract.
//
// The references are plain loops written here: exact float arithmetic where
// the op is one rounding (add, mul, sqr, ...), double precision where it is a
// formula (silu, gelu, rms_norm, soft_max, mul_mat) with a tolerance that
// follows from float rounding. Inputs are random, of odd shapes (1, 7, 33 in
// several dims), and for element-wise ops also transposed, permuted and
// strided views, read through their strides by the test's own index code.
//
// Only the final result of each compute is inspected: later chapters may
// reuse an intermediate's bytes once it has been read (chapter 05).
#define _DEFAULT_SOURCE   // M_PI
#include "harness.h"
#include "mg.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

static struct mg_context * new_ctx(void) {
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 32 * 1024 * 1024});
    ck_assert_ptr_nonnull(ctx);
    return ctx;
}

// Element (i0, i1, i2, i3) of an F32 tensor, found through its strides.
static float at(const struct mg_tensor * t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return *(const float *) ((const char *) t->data + i0 * (int64_t) t->nb[0] + i1 * (int64_t) t->nb[1] +
                             i2 * (int64_t) t->nb[2] + i3 * (int64_t) t->nb[3]);
}

static struct mg_tensor * new_random(struct mg_context * ctx, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3,
                                     uint64_t * rng, float lo, float hi) {
    struct mg_tensor * t = mg_new_tensor_4d(ctx, MG_TYPE_F32, ne0, ne1, ne2, ne3);
    mg_test_fill_uniform(t->data, (size_t) mg_nelements(t), rng, lo, hi);
    return t;
}

// Walks every index of a shape in logical order (i0 fastest).
#define FOR_EACH_INDEX(ne, i0, i1, i2, i3)            \
    for (int64_t i3 = 0; i3 < (ne)[3]; i3++)          \
        for (int64_t i2 = 0; i2 < (ne)[2]; i2++)      \
            for (int64_t i1 = 0; i1 < (ne)[1]; i1++)  \
                for (int64_t i0 = 0; i0 < (ne)[0]; i0++)

// out must have the shape ne and, element by element, be within
// abs_tol + rel_tol * |want| of want (both 0: bit-exact).
static void check_close(const struct mg_tensor * out, const int64_t ne[4], const double * want, double abs_tol,
                        double rel_tol, const char * what) {
    ck_assert_msg(out->ne[0] == ne[0] && out->ne[1] == ne[1] && out->ne[2] == ne[2] && out->ne[3] == ne[3],
                  "%s: wrong shape [%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 "]", what, out->ne[0], out->ne[1],
                  out->ne[2], out->ne[3]);
    ck_assert_ptr_nonnull(out->data);
    int64_t k = 0;
    FOR_EACH_INDEX(ne, i0, i1, i2, i3) {
        const double got = at(out, i0, i1, i2, i3);
        const double tol = abs_tol + rel_tol * fabs(want[k]);
        ck_assert_msg(fabs(got - want[k]) <= tol,
                      "%s at (%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 "): got %.9g, want %.9g", what, i0, i1, i2,
                      i3, got, want[k]);
        k++;
    }
}

static double * new_expected(const struct mg_tensor * like) {
    double * e = calloc((size_t) mg_nelements(like), sizeof(double));
    ck_assert_ptr_nonnull(e);
    return e;
}

// Operands of shape {5, 7, 3, 1} laid out four ways over random bytes.
enum layout { CONTIGUOUS, TRANSPOSED, PERMUTED, STRIDED, N_LAYOUTS };
static const char * const layout_names[N_LAYOUTS] = {"contiguous", "transposed", "permuted", "strided"};

static struct mg_tensor * new_operand(struct mg_context * ctx, enum layout layout, uint64_t * rng, float lo, float hi) {
    switch (layout) {
        case CONTIGUOUS: return new_random(ctx, 5, 7, 3, 1, rng, lo, hi);
        case TRANSPOSED: return mg_transpose(ctx, new_random(ctx, 7, 5, 3, 1, rng, lo, hi));
        case PERMUTED:   return mg_permute(ctx, new_random(ctx, 7, 3, 5, 1, rng, lo, hi), 1, 2, 0, 3);
        case STRIDED: {
            struct mg_tensor * z = new_random(ctx, 9, 8, 4, 1, rng, lo, hi);
            return mg_view_3d(ctx, z, 5, 7, 3, z->nb[1], z->nb[2], 2 * z->nb[0] + z->nb[1]);
        }
        case N_LAYOUTS: break;
    }
    ck_abort_msg("no such layout");
    return NULL;
}

// ---------------------------------------------------------------------------
// Element-wise binary ops
// ---------------------------------------------------------------------------

typedef struct mg_tensor * (*binary_fn)(struct mg_context *, struct mg_tensor *, struct mg_tensor *);

static float binary_ref(enum mg_op op, float x, float y) {
    switch (op) {
        case MG_OP_ADD: return x + y;
        case MG_OP_SUB: return x - y;
        case MG_OP_MUL: return x * y;
        case MG_OP_DIV: return x / y;
        default: break;
    }
    ck_abort_msg("not a binary op");
    return 0;
}

static const struct {
    enum mg_op op;
    binary_fn  fn;
    binary_fn  fn_inplace;
} binary_ops[] = {
    {MG_OP_ADD, mg_add, mg_add_inplace},
    {MG_OP_SUB, mg_sub, mg_sub_inplace},
    {MG_OP_MUL, mg_mul, mg_mul_inplace},
    {MG_OP_DIV, mg_div, mg_div_inplace},
};
enum { N_BINARY = sizeof(binary_ops) / sizeof(binary_ops[0]) };

// dst = a op b with b repeated over a; each element is one float rounding, so
// the result must be bit-exact.
static void check_binary(struct mg_context * ctx, int which, struct mg_tensor * a, struct mg_tensor * b,
                         const char * what) {
    struct mg_tensor * out = binary_ops[which].fn(ctx, a, b);
    ck_assert_ptr_null(out->data);
    mg_compute(ctx, out);
    double * want = new_expected(a);
    int64_t k = 0;
    FOR_EACH_INDEX(a->ne, i0, i1, i2, i3) {
        const float y = at(b, i0 % b->ne[0], i1 % b->ne[1], i2 % b->ne[2], i3 % b->ne[3]);
        want[k++] = binary_ref(binary_ops[which].op, at(a, i0, i1, i2, i3), y);
    }
    char label[128];
    snprintf(label, sizeof(label), "%s %s", mg_op_name(binary_ops[which].op), what);
    check_close(out, a->ne, want, 0, 0, label);
    free(want);
}

START_TEST(test_binary_odd_shapes) {
    const int64_t shapes[][4] = {{7, 33, 3, 1}, {33, 7, 1, 3}, {1, 7, 3, 5}, {33, 1, 7, 2}, {1, 1, 1, 1}};
    uint64_t rng = 11;
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
        struct mg_context * ctx = new_ctx();
        const int64_t * ne = shapes[s];
        for (int op = 0; op < N_BINARY; op++) {
            struct mg_tensor * a = new_random(ctx, ne[0], ne[1], ne[2], ne[3], &rng, -4.0f, 4.0f);
            struct mg_tensor * b = new_random(ctx, ne[0], ne[1], ne[2], ne[3], &rng, 0.25f, 4.0f);
            check_binary(ctx, op, a, b, "same shape");
        }
        mg_free(ctx);
    }
}
END_TEST

START_TEST(test_binary_broadcast) {
    const int64_t b_shapes[][4] = {{6, 1, 1, 1}, {1, 7, 1, 1}, {6, 7, 1, 1}, {1, 1, 3, 2},
                                   {3, 7, 1, 2}, {2, 1, 3, 1}, {1, 1, 1, 1}, {6, 7, 3, 2}};
    uint64_t rng = 12;
    struct mg_context * ctx = new_ctx();
    for (size_t s = 0; s < sizeof(b_shapes) / sizeof(b_shapes[0]); s++) {
        const int64_t * nb = b_shapes[s];
        for (int op = 0; op < N_BINARY; op++) {
            struct mg_tensor * a = new_random(ctx, 6, 7, 3, 2, &rng, -4.0f, 4.0f);
            struct mg_tensor * b = new_random(ctx, nb[0], nb[1], nb[2], nb[3], &rng, 0.25f, 4.0f);
            char what[64];
            snprintf(what, sizeof(what), "b=[%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 "]", nb[0], nb[1], nb[2],
                     nb[3]);
            check_binary(ctx, op, a, b, what);
        }
    }
    mg_free(ctx);
}
END_TEST

START_TEST(test_binary_non_contiguous_inputs) {
    uint64_t rng = 13;
    struct mg_context * ctx = new_ctx();
    for (int la = 0; la < N_LAYOUTS; la++) {
        for (int lb = 0; lb < N_LAYOUTS; lb++) {
            for (int op = 0; op < N_BINARY; op++) {
                struct mg_tensor * a = new_operand(ctx, (enum layout) la, &rng, -4.0f, 4.0f);
                struct mg_tensor * b = new_operand(ctx, (enum layout) lb, &rng, 0.25f, 4.0f);
                char what[64];
                snprintf(what, sizeof(what), "%s a, %s b", layout_names[la], layout_names[lb]);
                check_binary(ctx, op, a, b, what);
            }
        }
    }
    // Broadcast rows that are themselves transposed: b = {5, 2} with nb = {8, 4},
    // so b's row i1 is every other float of a 10-float buffer, starting at i1.
    struct mg_tensor * a   = mg_transpose(ctx, new_random(ctx, 14, 5, 3, 1, &rng, -4.0f, 4.0f));   // {5, 14, 3}
    struct mg_tensor * row = new_random(ctx, 10, 1, 1, 1, &rng, 0.25f, 4.0f);
    struct mg_tensor * b   = mg_transpose(ctx, mg_reshape_2d(ctx, row, 2, 5));
    for (int op = 0; op < N_BINARY; op++) check_binary(ctx, op, a, b, "transposed a, transposed rows b");
    mg_free(ctx);
}
END_TEST

// ---------------------------------------------------------------------------
// Element-wise unary ops
// ---------------------------------------------------------------------------

typedef struct mg_tensor * (*unary_fn)(struct mg_context *, struct mg_tensor *);

static struct mg_tensor * scale_by_third(struct mg_context * ctx, struct mg_tensor * a) {
    return mg_scale(ctx, a, -1.0f / 3.0f);
}
static struct mg_tensor * scale_by_third_inplace(struct mg_context * ctx, struct mg_tensor * a) {
    return mg_scale_inplace(ctx, a, -1.0f / 3.0f);
}

static double silu_ref(double x) {
    return x / (1.0 + exp(-x));
}

static double gelu_ref(double x) {
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * x * (1.0 + 0.044715 * x * x)));
}

enum unary_kind { U_RELU, U_SQR, U_SQRT, U_SCALE, U_SILU, U_GELU, N_UNARY };

// exact: one float rounding (reference in float); otherwise the double formula.
// lo, hi: the range of random inputs (sqrt wants them non-negative).
static const struct {
    const char * name;
    unary_fn     fn;
    unary_fn     fn_inplace;
    float        lo, hi;
    bool         exact;
} unary_ops[N_UNARY] = {
    [U_RELU]  = {"relu", mg_relu, mg_relu_inplace, -4.0f, 4.0f, true},
    [U_SQR]   = {"sqr", mg_sqr, mg_sqr_inplace, -4.0f, 4.0f, true},
    [U_SQRT]  = {"sqrt", mg_sqrt, mg_sqrt_inplace, 0.0f, 9.0f, true},
    [U_SCALE] = {"scale", scale_by_third, scale_by_third_inplace, -4.0f, 4.0f, true},
    [U_SILU]  = {"silu", mg_silu, mg_silu_inplace, -9.0f, 9.0f, false},
    [U_GELU]  = {"gelu", mg_gelu, mg_gelu_inplace, -6.0f, 6.0f, false},
};

static double unary_ref(int which, float x) {
    switch ((enum unary_kind) which) {
        case U_RELU:  return x > 0.0f ? x : 0.0f;
        case U_SQR:   return x * x;
        case U_SQRT:  return sqrtf(x);
        case U_SCALE: return x * (-1.0f / 3.0f);
        case U_SILU:  return silu_ref(x);
        case U_GELU:  return gelu_ref(x);
        case N_UNARY: break;
    }
    ck_abort_msg("no such op");
    return 0;
}

static void expect_unary(int which, const struct mg_tensor * a, double * want) {
    int64_t k = 0;
    FOR_EACH_INDEX(a->ne, i0, i1, i2, i3) want[k++] = unary_ref(which, at(a, i0, i1, i2, i3));
}

// Float-exact ops compare bit for bit; silu and gelu within a few ulps, more
// for gelu where 1 + tanh cancels (large negative x).
static void check_unary_result(int which, const struct mg_tensor * out, const int64_t ne[4], const double * want,
                               const char * what) {
    char label[128];
    snprintf(label, sizeof(label), "%s %s", unary_ops[which].name, what);
    if (unary_ops[which].exact) {
        check_close(out, ne, want, 0, 0, label);
    } else {
        check_close(out, ne, want, 1e-6, 1e-6, label);
    }
}

static void check_unary(struct mg_context * ctx, int which, struct mg_tensor * a, const char * what) {
    double * want = new_expected(a);
    expect_unary(which, a, want);
    struct mg_tensor * out = unary_ops[which].fn(ctx, a);
    mg_compute(ctx, out);
    check_unary_result(which, out, a->ne, want, what);
    free(want);
}

START_TEST(test_unary_odd_shapes) {
    const int64_t shapes[][4] = {{33, 7, 3, 1}, {7, 1, 33, 2}, {1, 33, 1, 7}, {17, 3, 1, 1}};
    uint64_t rng = 21;
    struct mg_context * ctx = new_ctx();
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
        for (int op = 0; op < N_UNARY; op++) {
            const int64_t * ne = shapes[s];
            check_unary(ctx, op, new_random(ctx, ne[0], ne[1], ne[2], ne[3], &rng, unary_ops[op].lo, unary_ops[op].hi),
                        "odd shape");
        }
    }
    mg_free(ctx);
}
END_TEST

START_TEST(test_unary_non_contiguous_inputs) {
    uint64_t rng = 22;
    struct mg_context * ctx = new_ctx();
    for (int l = 0; l < N_LAYOUTS; l++) {
        for (int op = 0; op < N_UNARY; op++) {
            check_unary(ctx, op, new_operand(ctx, (enum layout) l, &rng, unary_ops[op].lo, unary_ops[op].hi),
                        layout_names[l]);
        }
    }
    mg_free(ctx);
}
END_TEST

START_TEST(test_unary_special_values) {
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * a = mg_new_tensor_1d(ctx, MG_TYPE_F32, 4);
    const float x[4] = {0.0f, -0.0f, 1.0f, 4.0f};
    memcpy(a->data, x, sizeof(x));
    struct mg_tensor * r = mg_relu(ctx, a);
    struct mg_tensor * q = mg_sqrt(ctx, a);
    struct mg_tensor * s = mg_silu(ctx, a);
    struct mg_tensor * g = mg_gelu(ctx, a);
    mg_compute(ctx, r);
    mg_compute(ctx, q);
    mg_compute(ctx, s);
    mg_compute(ctx, g);
    ck_assert_float_eq(at(r, 3, 0, 0, 0), 4.0f);
    ck_assert_float_eq(at(q, 3, 0, 0, 0), 2.0f);
    ck_assert_float_eq(at(q, 2, 0, 0, 0), 1.0f);
    ck_assert_float_eq(at(s, 0, 0, 0, 0), 0.0f);   // silu(0) = 0 / 2
    ck_assert_float_eq(at(g, 0, 0, 0, 0), 0.0f);
    ck_assert_double_eq_tol(at(s, 2, 0, 0, 0), 0.7310585786300049, 1e-7);   // 1 / (1 + e^-1)
    ck_assert_double_eq_tol(at(g, 2, 0, 0, 0), 0.8411919906082768, 1e-6);   // tanh-approximated gelu(1)
    mg_free(ctx);
}
END_TEST

// ---------------------------------------------------------------------------
// Row reductions
// ---------------------------------------------------------------------------

START_TEST(test_sum_rows) {
    const int64_t shapes[][4] = {{33, 7, 3, 2}, {1, 7, 1, 3}, {7, 1, 1, 1}, {100, 3, 1, 1}};
    uint64_t rng = 31;
    struct mg_context * ctx = new_ctx();
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
        const int64_t * ne = shapes[s];
        struct mg_tensor * a = new_random(ctx, ne[0], ne[1], ne[2], ne[3], &rng, -3.0f, 3.0f);
        struct mg_tensor * out = mg_sum_rows(ctx, a);
        mg_compute(ctx, out);
        const int64_t ne_out[4] = {1, ne[1], ne[2], ne[3]};
        double * want = calloc((size_t) mg_nrows(a), sizeof(double));
        double max_abs_sum = 0;
        int64_t k = 0;
        FOR_EACH_INDEX(ne_out, j0, i1, i2, i3) {
            (void) j0;
            double sum = 0, abs_sum = 0;
            for (int64_t i0 = 0; i0 < ne[0]; i0++) {
                sum += at(a, i0, i1, i2, i3);
                abs_sum += fabs(at(a, i0, i1, i2, i3));
            }
            want[k++] = sum;
            if (abs_sum > max_abs_sum) max_abs_sum = abs_sum;
        }
        check_close(out, ne_out, want, 1e-6 * max_abs_sum, 0, "sum_rows");
        free(want);
    }
    // A transposed input sums its logical rows, which are the root's columns.
    struct mg_tensor * m = new_random(ctx, 7, 33, 1, 1, &rng, -3.0f, 3.0f);
    struct mg_tensor * out = mg_sum_rows(ctx, mg_transpose(ctx, m));
    mg_compute(ctx, out);
    for (int64_t i = 0; i < 7; i++) {
        double sum = 0;
        for (int64_t j = 0; j < 33; j++) sum += at(m, i, j, 0, 0);
        ck_assert_double_eq_tol(at(out, 0, i, 0, 0), sum, 1e-5);
    }
    mg_free(ctx);
}
END_TEST

static void expect_rms_norm(const struct mg_tensor * a, float eps, double * want) {
    int64_t k = 0;
    const int64_t rows[4] = {1, a->ne[1], a->ne[2], a->ne[3]};
    FOR_EACH_INDEX(rows, j0, i1, i2, i3) {
        (void) j0;
        double sum_sq = 0;
        for (int64_t i0 = 0; i0 < a->ne[0]; i0++) sum_sq += (double) at(a, i0, i1, i2, i3) * at(a, i0, i1, i2, i3);
        const double scale = 1.0 / sqrt(sum_sq / (double) a->ne[0] + eps);   // eps inside the root
        for (int64_t i0 = 0; i0 < a->ne[0]; i0++) want[k++] = at(a, i0, i1, i2, i3) * scale;
    }
}

START_TEST(test_rms_norm) {
    const int64_t shapes[][4] = {{33, 7, 3, 1}, {1, 7, 1, 1}, {7, 1, 33, 2}, {256, 2, 1, 1}};
    uint64_t rng = 32;
    struct mg_context * ctx = new_ctx();
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
        const int64_t * ne = shapes[s];
        struct mg_tensor * a = new_random(ctx, ne[0], ne[1], ne[2], ne[3], &rng, -3.0f, 3.0f);
        struct mg_tensor * out = mg_rms_norm(ctx, a, 1e-6f);
        mg_compute(ctx, out);
        double * want = new_expected(a);
        expect_rms_norm(a, 1e-6f, want);
        check_close(out, a->ne, want, 1e-6, 1e-5, "rms_norm");
        free(want);
    }
    struct mg_tensor * t = new_operand(ctx, PERMUTED, &rng, -3.0f, 3.0f);
    struct mg_tensor * out = mg_rms_norm(ctx, t, 1e-5f);
    mg_compute(ctx, out);
    double * want = new_expected(t);
    expect_rms_norm(t, 1e-5f, want);
    check_close(out, t->ne, want, 1e-6, 1e-5, "rms_norm of a permuted view");
    free(want);
    mg_free(ctx);
}
END_TEST

// With tiny values eps dominates: x / sqrt(mean(x^2) + eps) is about x / sqrt(eps),
// while eps anywhere else (outside the root, or added to x^2 before the mean of
// a different n) gives a different number. A zero row stays zero, not NaN.
START_TEST(test_rms_norm_eps_placement) {
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * a = mg_new_tensor_2d(ctx, MG_TYPE_F32, 4, 3);
    const float x[12] = {1e-3f, -2e-3f, 3e-3f, 4e-3f, 0, 0, 0, 0, 2, 2, 2, 2};
    memcpy(a->data, x, sizeof(x));
    const float eps = 1e-2f;
    struct mg_tensor * out = mg_rms_norm(ctx, a, eps);
    mg_compute(ctx, out);
    const double mean0 = (1e-6 + 4e-6 + 9e-6 + 16e-6) / 4;
    for (int i = 0; i < 4; i++) {
        ck_assert_double_eq_tol(at(out, i, 0, 0, 0), x[i] / sqrt(mean0 + eps), 1e-7);
        ck_assert_float_eq(at(out, i, 1, 0, 0), 0.0f);
        ck_assert_double_eq_tol(at(out, i, 2, 0, 0), 2.0 / sqrt(4.0 + eps), 1e-6);
    }
    ck_assert_double_gt(fabs(x[0] / sqrt(mean0 + eps) - x[0] / (sqrt(mean0) + eps)), 1e-3);   // the test can tell
    mg_free(ctx);
}
END_TEST

static void expect_soft_max(const struct mg_tensor * a, double * want) {
    int64_t k = 0;
    const int64_t rows[4] = {1, a->ne[1], a->ne[2], a->ne[3]};
    FOR_EACH_INDEX(rows, j0, i1, i2, i3) {
        (void) j0;
        double max = -INFINITY, sum = 0;
        for (int64_t i0 = 0; i0 < a->ne[0]; i0++) max = fmax(max, at(a, i0, i1, i2, i3));
        for (int64_t i0 = 0; i0 < a->ne[0]; i0++) sum += exp(at(a, i0, i1, i2, i3) - max);
        for (int64_t i0 = 0; i0 < a->ne[0]; i0++) want[k++] = exp(at(a, i0, i1, i2, i3) - max) / sum;
    }
}

static void check_rows_sum_to_one(const struct mg_tensor * out) {
    const int64_t rows[4] = {1, out->ne[1], out->ne[2], out->ne[3]};
    FOR_EACH_INDEX(rows, j0, i1, i2, i3) {
        (void) j0;
        double sum = 0;
        for (int64_t i0 = 0; i0 < out->ne[0]; i0++) sum += at(out, i0, i1, i2, i3);
        ck_assert_msg(fabs(sum - 1.0) <= 1e-6, "row (%" PRId64 ",%" PRId64 ",%" PRId64 ") sums to %.9f", i1, i2, i3,
                      sum);
    }
}

START_TEST(test_soft_max) {
    const int64_t shapes[][4] = {{33, 7, 3, 1}, {1, 5, 1, 1}, {7, 1, 33, 2}, {100, 3, 1, 1}};
    uint64_t rng = 33;
    struct mg_context * ctx = new_ctx();
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
        const int64_t * ne = shapes[s];
        // Large values too: without subtracting the row max, e^1000 would overflow.
        const float lo = s == 3 ? 990.0f : -5.0f, hi = s == 3 ? 1010.0f : 5.0f;
        struct mg_tensor * a = new_random(ctx, ne[0], ne[1], ne[2], ne[3], &rng, lo, hi);
        struct mg_tensor * out = mg_soft_max(ctx, a);
        mg_compute(ctx, out);
        double * want = new_expected(a);
        expect_soft_max(a, want);
        check_close(out, a->ne, want, 1e-6, 0, "soft_max");
        check_rows_sum_to_one(out);
        free(want);
    }
    struct mg_tensor * t = new_operand(ctx, TRANSPOSED, &rng, -5.0f, 5.0f);
    struct mg_tensor * out = mg_soft_max(ctx, t);
    mg_compute(ctx, out);
    double * want = new_expected(t);
    expect_soft_max(t, want);
    check_close(out, t->ne, want, 1e-6, 0, "soft_max of a transposed view");
    check_rows_sum_to_one(out);
    free(want);
    mg_free(ctx);
}
END_TEST

// ---------------------------------------------------------------------------
// Matrix multiplication
// ---------------------------------------------------------------------------

// out(i, j, i2, i3) = sum_k a(k, i, i2 / r2, i3 / r3) * b(k, j, i2, i3), in
// double; the tolerance is float rounding of a K-term sum of products.
static void check_mul_mat(struct mg_context * ctx, struct mg_tensor * a, struct mg_tensor * b, const char * what) {
    struct mg_tensor * out = mg_mul_mat(ctx, a, b);
    const int64_t ne[4] = {a->ne[1], b->ne[1], b->ne[2], b->ne[3]};
    ck_assert_msg(out->ne[0] == ne[0] && out->ne[1] == ne[1] && out->ne[2] == ne[2] && out->ne[3] == ne[3],
                  "%s: wrong shape", what);
    mg_compute(ctx, out);
    const int64_t K = a->ne[0], r2 = b->ne[2] / a->ne[2], r3 = b->ne[3] / a->ne[3];
    FOR_EACH_INDEX(ne, i, j, i2, i3) {
        double sum = 0, abs_sum = 0;
        for (int64_t k = 0; k < K; k++) {
            const double p = (double) at(a, k, i, i2 / r2, i3 / r3) * at(b, k, j, i2, i3);
            sum += p;
            abs_sum += fabs(p);
        }
        const double got = at(out, i, j, i2, i3);
        ck_assert_msg(fabs(got - sum) <= 2.0 * (double) K * FLT_EPSILON * abs_sum + 1e-30,
                      "%s at (%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 "): got %.9g, want %.9g", what, i, j, i2,
                      i3, got, sum);
    }
}

START_TEST(test_mul_mat_odd_sizes) {
    // K, M, N: rows of length K; a has M of them, b has N.
    const int64_t sizes[][3] = {{33, 7, 5}, {1, 1, 1}, {7, 33, 1}, {1, 7, 33}, {64, 3, 2}, {100, 9, 11}};
    uint64_t rng = 41;
    struct mg_context * ctx = new_ctx();
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        const int64_t K = sizes[s][0], M = sizes[s][1], N = sizes[s][2];
        struct mg_tensor * a = new_random(ctx, K, M, 1, 1, &rng, -1.0f, 1.0f);
        struct mg_tensor * b = new_random(ctx, K, N, 1, 1, &rng, -1.0f, 1.0f);
        char what[64];
        snprintf(what, sizeof(what), "mul_mat K=%" PRId64 " M=%" PRId64 " N=%" PRId64, K, M, N);
        check_mul_mat(ctx, a, b, what);
    }
    mg_free(ctx);
}
END_TEST

START_TEST(test_mul_mat_hand_computed) {
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * W = mg_new_tensor_2d(ctx, MG_TYPE_F32, 3, 2);   // rows {1 -1 0.5} {-2 1 1}
    struct mg_tensor * x = mg_new_tensor_1d(ctx, MG_TYPE_F32, 3);      // {1 2 3}
    const float w[6] = {1, -1, 0.5f, -2, 1, 1}, xv[3] = {1, 2, 3};
    memcpy(W->data, w, sizeof(w));
    memcpy(x->data, xv, sizeof(xv));
    struct mg_tensor * y = mg_mul_mat(ctx, W, x);
    mg_compute(ctx, y);
    ck_assert_int_eq(y->ne[0], 2);
    ck_assert_int_eq(y->ne[1], 1);
    ck_assert_float_eq(at(y, 0, 0, 0, 0), 0.5f);   // 1 - 2 + 1.5
    ck_assert_float_eq(at(y, 1, 0, 0, 0), 3.0f);   // -2 + 2 + 3
    mg_free(ctx);
}
END_TEST

START_TEST(test_mul_mat_broadcast_gqa) {
    // {K, M, A2, A3} x {K, N, B2, B3}: a's matrix i serves b's matrices i*r .. i*r + r-1.
    const int64_t cases[][7] = {
        {33, 7, 5, 2, 1, 6, 1},    // r2 = 3
        {33, 7, 5, 1, 2, 3, 4},    // r2 = 3, r3 = 2
        {64, 4, 3, 2, 2, 4, 2},    // r2 = 2 (2 KV heads, 4 Q heads)
        {7, 1, 1, 1, 1, 7, 1},     // one a row for seven b matrices
        {16, 3, 33, 3, 1, 3, 1},   // no broadcast, 3 matrices
    };
    uint64_t rng = 42;
    struct mg_context * ctx = new_ctx();
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        const int64_t * p = cases[c];
        struct mg_tensor * a = new_random(ctx, p[0], p[1], p[3], p[4], &rng, -1.0f, 1.0f);
        struct mg_tensor * b = new_random(ctx, p[0], p[2], p[5], p[6], &rng, -1.0f, 1.0f);
        char what[64];
        snprintf(what, sizeof(what), "mul_mat broadcast case %zu", c);
        check_mul_mat(ctx, a, b, what);
    }
    mg_free(ctx);
}
END_TEST

START_TEST(test_mul_mat_strided_operands) {
    uint64_t rng = 43;
    struct mg_context * ctx = new_ctx();
    // a: the first 33 columns of a {40, 7, 2} matrix (rows 160 bytes apart);
    // b: {33, 4, 3} permuted to {33, 3, 4}: whole rows, but matrices interleaved,
    // and twice as many matrices as a has (r2 = 2).
    struct mg_tensor * wide = new_random(ctx, 40, 7, 2, 1, &rng, -1.0f, 1.0f);
    struct mg_tensor * a = mg_view_3d(ctx, wide, 33, 7, 2, wide->nb[1], wide->nb[2], 0);
    struct mg_tensor * y = new_random(ctx, 33, 4, 3, 1, &rng, -1.0f, 1.0f);
    struct mg_tensor * b = mg_permute(ctx, y, 0, 2, 1, 3);
    ck_assert(!mg_is_contiguous(a));
    ck_assert(!mg_is_contiguous(b));
    check_mul_mat(ctx, a, b, "mul_mat of views");
    mg_free(ctx);
}
END_TEST

// ---------------------------------------------------------------------------
// Copies and lookups
// ---------------------------------------------------------------------------

START_TEST(test_cont_of_permuted) {
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * x = mg_new_tensor_4d(ctx, MG_TYPE_F32, 2, 3, 4, 5);
    for (int64_t k = 0; k < 120; k++) ((float *) x->data)[k] = (float) k;
    const int axes[4] = {2, 0, 3, 1};
    struct mg_tensor * p = mg_permute(ctx, x, axes[0], axes[1], axes[2], axes[3]);
    struct mg_tensor * c = mg_cont(ctx, p);
    ck_assert_ptr_null(c->data);
    mg_compute(ctx, c);
    ck_assert(mg_is_contiguous(c));
    ck_assert_ptr_null(c->view_src);
    ck_assert(c->data != x->data);
    // Element j of p is x's element i with i[d] = j[axes[d]]: c holds them packed.
    double * want = new_expected(c);
    int64_t k = 0;
    int64_t j[4];
    for (j[3] = 0; j[3] < p->ne[3]; j[3]++)
        for (j[2] = 0; j[2] < p->ne[2]; j[2]++)
            for (j[1] = 0; j[1] < p->ne[1]; j[1]++)
                for (j[0] = 0; j[0] < p->ne[0]; j[0]++)
                    want[k++] = (double) (j[axes[0]] + 2 * (j[axes[1]] + 3 * (j[axes[2]] + 4 * j[axes[3]])));
    check_close(c, p->ne, want, 0, 0, "cont of a permuted tensor");
    for (int64_t i = 0; i < 120; i++) ck_assert_float_eq(((float *) c->data)[i], (float) want[i]);   // packed
    free(want);
    mg_free(ctx);
}
END_TEST

START_TEST(test_cpy_between_shapes) {
    uint64_t rng = 51;
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * a = new_random(ctx, 4, 3, 1, 1, &rng, -2.0f, 2.0f);
    struct mg_tensor * b = mg_new_tensor_1d(ctx, MG_TYPE_F32, 12);
    memset(b->data, 0, 48);
    struct mg_tensor * r = mg_cpy(ctx, a, b);
    ck_assert_ptr_eq(r->data, b->data);   // the result is b's bytes
    mg_compute(ctx, r);
    for (int64_t k = 0; k < 12; k++) ck_assert_float_eq(at(b, k, 0, 0, 0), at(a, k % 4, k / 4, 0, 0));

    // From a transposed source into a {2, 6, 1, 1}: logical order on both sides.
    struct mg_tensor * t = mg_transpose(ctx, new_random(ctx, 3, 4, 1, 1, &rng, -2.0f, 2.0f));   // {4, 3}
    struct mg_tensor * d = mg_new_tensor_2d(ctx, MG_TYPE_F32, 2, 6);
    mg_compute(ctx, mg_cpy(ctx, t, d));
    for (int64_t k = 0; k < 12; k++) ck_assert_float_eq(at(d, k % 2, k / 2, 0, 0), at(t, k % 4, k / 4, 0, 0));

    // Into a transposed destination: element k of a lands at element k of the view.
    struct mg_tensor * e = mg_new_tensor_2d(ctx, MG_TYPE_F32, 3, 4);
    struct mg_tensor * et = mg_transpose(ctx, e);   // {4, 3}
    mg_compute(ctx, mg_cpy(ctx, a, et));
    for (int64_t i1 = 0; i1 < 3; i1++) {
        for (int64_t i0 = 0; i0 < 4; i0++) ck_assert_float_eq(at(e, i1, i0, 0, 0), at(a, i0, i1, 0, 0));
    }
    mg_free(ctx);
}
END_TEST

START_TEST(test_cpy_f32_to_f16) {
    uint64_t rng = 52;
    struct mg_context * ctx = new_ctx();
    // Multiples of 1/64 below 32 are exact halves: they must survive unchanged.
    struct mg_tensor * a = mg_new_tensor_2d(ctx, MG_TYPE_F32, 8, 3);
    for (int64_t k = 0; k < 24; k++) ((float *) a->data)[k] = (float) (k * 37 % 200 - 100) / 64.0f;
    struct mg_tensor * h = mg_new_tensor_2d(ctx, MG_TYPE_F16, 6, 4);
    struct mg_tensor * r = mg_cpy(ctx, a, h);
    ck_assert_int_eq(r->type, MG_TYPE_F16);
    mg_compute(ctx, r);
    const mg_fp16_t * hv = h->data;
    for (int64_t k = 0; k < 24; k++) ck_assert_float_eq(mg_fp16_to_fp32(hv[k]), ((float *) a->data)[k]);
    ck_assert_uint_eq(hv[0], 0xbe40);   // -100/64 = -(1 + 9/16): sign 0x8000, exponent 15 (0x3c00), mantissa 0x240

    // Random values round to the nearest half: within half an ulp (2^-11 relative).
    struct mg_tensor * x = new_random(ctx, 33, 7, 1, 1, &rng, -3.0f, 3.0f);
    struct mg_tensor * y = mg_new_tensor_2d(ctx, MG_TYPE_F16, 33, 7);
    mg_compute(ctx, mg_cpy(ctx, x, y));
    for (int64_t k = 0; k < 33 * 7; k++) {
        const float v = ((float *) x->data)[k];
        const mg_fp16_t got = ((mg_fp16_t *) y->data)[k];
        ck_assert_uint_eq(got, mg_fp32_to_fp16(v));
        ck_assert_double_le(fabs(mg_fp16_to_fp32(got) - v), ldexp(fabs(v), -11) + ldexp(1.0, -25));
    }
    mg_free(ctx);
}
END_TEST

static struct mg_tensor * new_ids(struct mg_context * ctx, const int32_t * ids, int n) {
    struct mg_tensor * t = mg_new_tensor_1d(ctx, MG_TYPE_I32, n);
    for (int i = 0; i < n; i++) mg_set_i32_1d(t, i, ids[i]);
    return t;
}

START_TEST(test_get_rows_f32) {
    uint64_t rng = 61;
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * a = new_random(ctx, 5, 7, 1, 1, &rng, -2.0f, 2.0f);
    const int32_t ids[5] = {6, 0, 6, 3, 1};
    struct mg_tensor * out = mg_get_rows(ctx, a, new_ids(ctx, ids, 5));
    ck_assert_ptr_null(out->data);
    mg_compute(ctx, out);
    ck_assert_int_eq(out->type, MG_TYPE_F32);
    for (int k = 0; k < 5; k++) {
        for (int64_t i = 0; i < 5; i++) ck_assert_float_eq(at(out, i, k, 0, 0), at(a, i, ids[k], 0, 0));
    }
    ck_assert_int_eq(out->ne[0], 5);
    ck_assert_int_eq(out->ne[1], 5);
    mg_free(ctx);
}
END_TEST

// A quantized row's element i decoded from the block bytes by hand.
static float q8_0_value(const void * row, int64_t i) {
    const struct mg_block_q8_0 * b = (const struct mg_block_q8_0 *) row + i / 32;
    return mg_fp16_to_fp32(b->d) * (float) b->qs[i % 32];
}

static float q4_0_value(const void * row, int64_t i) {
    const struct mg_block_q4_0 * b = (const struct mg_block_q4_0 *) row + i / 32;
    const int j = (int) (i % 32);
    const int code = j < 16 ? b->qs[j] & 0x0f : b->qs[j - 16] >> 4;
    return mg_fp16_to_fp32(b->d) * (float) (code - 8);
}

static void check_get_rows_quantized(enum mg_type type, float (*value)(const void *, int64_t)) {
    uint64_t rng = 62;
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * a = mg_new_tensor_2d(ctx, type, 64, 5);
    float x[64];
    for (int64_t r = 0; r < 5; r++) {
        mg_test_fill_uniform(x, 64, &rng, -3.0f, 3.0f);
        mg_get_type_traits(type)->from_float(x, (char *) a->data + r * a->nb[1], 64);
    }
    const int32_t ids[4] = {4, 4, 0, 2};
    struct mg_tensor * out = mg_get_rows(ctx, a, new_ids(ctx, ids, 4));
    mg_compute(ctx, out);
    ck_assert_int_eq(out->type, MG_TYPE_F32);
    for (int k = 0; k < 4; k++) {
        const char * row = (const char *) a->data + ids[k] * a->nb[1];
        for (int64_t i = 0; i < 64; i++) {
            ck_assert_msg(at(out, i, k, 0, 0) == value(row, i), "%s: row %d element %" PRId64 ": %g, want %g",
                          mg_type_name(type), k, i, (double) at(out, i, k, 0, 0), (double) value(row, i));
        }
    }
    mg_free(ctx);
}

START_TEST(test_get_rows_q8_0) {
    check_get_rows_quantized(MG_TYPE_Q8_0, q8_0_value);
}
END_TEST

START_TEST(test_get_rows_q4_0) {
    check_get_rows_quantized(MG_TYPE_Q4_0, q4_0_value);
}
END_TEST

// ---------------------------------------------------------------------------
// The lazy contract
// ---------------------------------------------------------------------------

START_TEST(test_building_computes_nothing) {
    uint64_t rng = 71;
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * W = new_random(ctx, 33, 7, 1, 1, &rng, -1.0f, 1.0f);
    struct mg_tensor * x = new_random(ctx, 33, 1, 1, 1, &rng, -1.0f, 1.0f);
    struct mg_tensor * b = new_random(ctx, 7, 1, 1, 1, &rng, -1.0f, 1.0f);
    float W0[33 * 7], x0[33], b0[7];
    memcpy(W0, W->data, sizeof(W0));
    memcpy(x0, x->data, sizeof(x0));
    memcpy(b0, b->data, sizeof(b0));

    struct mg_tensor * wx  = mg_mul_mat(ctx, W, x);
    struct mg_tensor * h   = mg_add(ctx, wx, b);
    struct mg_tensor * n   = mg_rms_norm(ctx, h, 1e-6f);
    struct mg_tensor * out = mg_soft_max(ctx, mg_scale(ctx, mg_silu(ctx, n), 2.0f));
    // Each call recorded its op and operands, and nothing else.
    ck_assert_int_eq(wx->op, MG_OP_MUL_MAT);
    ck_assert_ptr_eq(wx->src[0], W);
    ck_assert_ptr_eq(wx->src[1], x);
    ck_assert_int_eq(h->op, MG_OP_ADD);
    ck_assert_ptr_eq(h->src[0], wx);
    ck_assert_ptr_eq(h->src[1], b);
    ck_assert_int_eq(out->op, MG_OP_SOFT_MAX);
    for (struct mg_tensor * t = out; t != NULL && t->op != MG_OP_NONE; t = t->src[0]) {
        ck_assert_msg(t->data == NULL, "%s has data before any compute", mg_op_name(t->op));
    }
    ck_assert_int_eq(memcmp(W->data, W0, sizeof(W0)), 0);
    ck_assert_int_eq(memcmp(x->data, x0, sizeof(x0)), 0);
    ck_assert_int_eq(memcmp(b->data, b0, sizeof(b0)), 0);

    mg_compute(ctx, out);
    for (struct mg_tensor * t = out; t != NULL; t = t->src[0]) {
        ck_assert_msg(t->data != NULL, "%s has no data after compute", mg_op_name(t->op));
    }
    ck_assert_int_eq(memcmp(W->data, W0, sizeof(W0)), 0);   // computing does not touch inputs either
    ck_assert_int_eq(memcmp(x->data, x0, sizeof(x0)), 0);
    ck_assert_int_eq(memcmp(b->data, b0, sizeof(b0)), 0);
    check_rows_sum_to_one(out);
    mg_free(ctx);
}
END_TEST

// relu(W x + b), computed for several x without rebuilding: each result
// matches a reference of the new x.
START_TEST(test_compute_again_for_new_inputs) {
    uint64_t rng = 72;
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * W = new_random(ctx, 33, 7, 1, 1, &rng, -1.0f, 1.0f);
    struct mg_tensor * x = mg_new_tensor_2d(ctx, MG_TYPE_F32, 33, 2);
    struct mg_tensor * b = new_random(ctx, 7, 1, 1, 1, &rng, -1.0f, 1.0f);
    struct mg_tensor * out = mg_relu(ctx, mg_add(ctx, mg_mul_mat(ctx, W, x), b));
    for (int run = 0; run < 3; run++) {
        mg_test_fill_uniform(x->data, 66, &rng, -1.0f, 1.0f);
        mg_compute(ctx, out);
        for (int64_t j = 0; j < 2; j++) {
            for (int64_t i = 0; i < 7; i++) {
                double s = at(b, i, 0, 0, 0);
                for (int64_t k = 0; k < 33; k++) s += (double) at(W, k, i, 0, 0) * at(x, k, j, 0, 0);
                ck_assert_double_eq_tol(at(out, i, j, 0, 0), (s > 0 ? s : 0), 1e-5);
            }
        }
    }
    mg_free(ctx);
}
END_TEST

// ---------------------------------------------------------------------------
// In place
// ---------------------------------------------------------------------------

// The in-place result is a view of a: same bytes before and after compute,
// and afterwards a itself holds the result.
static void check_inplace_result(struct mg_context * ctx, struct mg_tensor * a, struct mg_tensor * r,
                                 const double * want, double tol, const char * what) {
    ck_assert_msg(r->data == a->data, "%s: the in-place result is not a's bytes", what);
    ck_assert_ptr_eq(r->src[0], a);
    mg_compute(ctx, r);
    ck_assert_msg(r->data == a->data, "%s: the in-place result moved", what);
    check_close(a, a->ne, want, tol, tol, what);
}

// The ordinary op on a copy of a's values leaves that copy alone.
static void check_not_inplace(struct mg_context * ctx, struct mg_tensor * a, struct mg_tensor * r,
                              const float * a_before, const double * want, double tol, const char * what) {
    mg_compute(ctx, r);
    ck_assert_msg(r->data != a->data, "%s: the ordinary op wrote over its input", what);
    ck_assert_msg(memcmp(a->data, a_before, mg_nbytes(a)) == 0, "%s: the input changed", what);
    check_close(r, a->ne, want, tol, tol, what);
}

static struct mg_tensor * copy_of(struct mg_context * ctx, const struct mg_tensor * a) {
    struct mg_tensor * c = mg_new_tensor_4d(ctx, MG_TYPE_F32, a->ne[0], a->ne[1], a->ne[2], a->ne[3]);
    memcpy(c->data, a->data, mg_nbytes(a));
    return c;
}

START_TEST(test_inplace_binary) {
    uint64_t rng = 81;
    struct mg_context * ctx = new_ctx();
    for (int op = 0; op < N_BINARY; op++) {
        struct mg_tensor * a = new_random(ctx, 7, 3, 2, 1, &rng, -4.0f, 4.0f);
        struct mg_tensor * b = new_random(ctx, 7, 1, 2, 1, &rng, 0.5f, 2.0f);   // broadcast over rows
        struct mg_tensor * a2 = copy_of(ctx, a);
        float * before = malloc(mg_nbytes(a));
        memcpy(before, a->data, mg_nbytes(a));
        double * want = new_expected(a);
        int64_t k = 0;
        FOR_EACH_INDEX(a->ne, i0, i1, i2, i3) {
            want[k++] = binary_ref(binary_ops[op].op, at(a, i0, i1, i2, i3), at(b, i0, 0, i2, 0));
        }
        check_not_inplace(ctx, a2, binary_ops[op].fn(ctx, a2, b), before, want, 0, mg_op_name(binary_ops[op].op));
        check_inplace_result(ctx, a, binary_ops[op].fn_inplace(ctx, a, b), want, 0, mg_op_name(binary_ops[op].op));
        free(want);
        free(before);
    }
    mg_free(ctx);
}
END_TEST

START_TEST(test_inplace_unary) {
    uint64_t rng = 82;
    struct mg_context * ctx = new_ctx();
    for (int op = 0; op < N_UNARY; op++) {
        struct mg_tensor * a = new_random(ctx, 33, 3, 1, 1, &rng, unary_ops[op].lo, unary_ops[op].hi);
        struct mg_tensor * a2 = copy_of(ctx, a);
        float * before = malloc(mg_nbytes(a));
        memcpy(before, a->data, mg_nbytes(a));
        double * want = new_expected(a);
        expect_unary(op, a, want);
        const double tol = unary_ops[op].exact ? 0 : 1e-6;
        check_not_inplace(ctx, a2, unary_ops[op].fn(ctx, a2), before, want, tol, unary_ops[op].name);
        check_inplace_result(ctx, a, unary_ops[op].fn_inplace(ctx, a), want, tol, unary_ops[op].name);
        free(want);
        free(before);
    }
    mg_free(ctx);
}
END_TEST

START_TEST(test_inplace_rms_norm_and_soft_max) {
    uint64_t rng = 83;
    struct mg_context * ctx = new_ctx();
    for (int which = 0; which < 2; which++) {
        struct mg_tensor * a = new_random(ctx, 33, 7, 1, 1, &rng, -3.0f, 3.0f);
        struct mg_tensor * a2 = copy_of(ctx, a);
        float before[33 * 7];
        memcpy(before, a->data, sizeof(before));
        double * want = new_expected(a);
        if (which == 0) expect_rms_norm(a, 1e-6f, want);
        else expect_soft_max(a, want);
        const char * what = which == 0 ? "rms_norm" : "soft_max";
        check_not_inplace(ctx, a2, which == 0 ? mg_rms_norm(ctx, a2, 1e-6f) : mg_soft_max(ctx, a2), before, want,
                          1e-5, what);
        check_inplace_result(ctx, a, which == 0 ? mg_rms_norm_inplace(ctx, a, 1e-6f) : mg_soft_max_inplace(ctx, a),
                             want, 1e-5, what);
        free(want);
    }
    mg_free(ctx);
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("ops");

    MG_TCASE(s, "elementwise", test_binary_odd_shapes, test_binary_broadcast, test_binary_non_contiguous_inputs,
                test_unary_odd_shapes, test_unary_non_contiguous_inputs, test_unary_special_values);

    MG_TCASE(s, "rows", test_sum_rows, test_rms_norm, test_rms_norm_eps_placement, test_soft_max);

    MG_TCASE(s, "mul_mat", test_mul_mat_odd_sizes, test_mul_mat_hand_computed, test_mul_mat_broadcast_gqa,
                test_mul_mat_strided_operands);

    MG_TCASE(s, "copies", test_cont_of_permuted, test_cpy_between_shapes, test_cpy_f32_to_f16, test_get_rows_f32,
                test_get_rows_q8_0, test_get_rows_q4_0);

    MG_TCASE(s, "lazy", test_building_computes_nothing, test_compute_again_for_new_inputs, test_inplace_binary,
                test_inplace_unary, test_inplace_rms_norm_and_soft_max);
    return s;
}
