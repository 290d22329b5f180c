// test_ex2_copy_packed.c - chapter 01, exercise 2:
//
//     struct mg_tensor * mg_tensor_copy_packed(struct mg_context * ctx, const struct mg_tensor * t);
//
// A new tensor of t's type and shape with packed strides, holding t's elements
// in logical order (ggml_cont's kernel, ggml_compute_forward_dup). F32 and F16
// element by element; quantized tensors whose blocks are whole (nb[0] is the
// block size) row by row. Graded by `make grade`; declared weak (see ex1).
// Each copy is compared with the source read through mg_get_f32_nd, and with
// the source's bytes.
#include "harness.h"
#include "mg.h"

struct mg_tensor * mg_tensor_copy_packed(struct mg_context * ctx, const struct mg_tensor * t) __attribute__((weak));

static struct mg_context * new_ctx(void) {
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 4 * 1024 * 1024});
    ck_assert_ptr_nonnull(ctx);
    return ctx;
}

static void require_function(void) {
    ck_assert_msg(mg_tensor_copy_packed != NULL, "mg_tensor_copy_packed is not defined yet (tensor.c, declared in tensor.h)");
}

// c is a packed copy of t: same type and shape, its own bytes, equal elements.
static void assert_packed_copy_of(const struct mg_tensor * c, const struct mg_tensor * t) {
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(c->type, t->type);
    ck_assert(mg_are_same_shape(c, t));
    ck_assert_msg(mg_is_contiguous(c), "the copy is not contiguous: nb=[%zu,%zu,%zu,%zu]", c->nb[0], c->nb[1],
                  c->nb[2], c->nb[3]);
    ck_assert_ptr_null(c->view_src);
    ck_assert_int_eq(c->op, MG_OP_NONE);
    ck_assert_ptr_nonnull(c->data);
    ck_assert_ptr_ne(c->data, t->data);
    for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < t->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < t->ne[0]; i0++) {
                    const float want = mg_get_f32_nd(t, i0, i1, i2, i3);
                    const float got  = mg_get_f32_nd(c, i0, i1, i2, i3);
                    ck_assert_msg(got == want, "element (%lld,%lld,%lld,%lld): %g, expected %g", (long long) i0,
                                  (long long) i1, (long long) i2, (long long) i3, got, want);
                }
}

START_TEST(copy_packed_exists) {
    require_function();
}
END_TEST

// The lesson's demo: m = [[1 2 3] [4 5 6]], t = transpose(m); the copy holds 1 4 2 5 3 6.
START_TEST(the_demos_transpose) {
    require_function();
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * m = mg_new_tensor_2d(ctx, MG_TYPE_F32, 3, 2);
    for (int i = 0; i < 6; i++) ((float *) m->data)[i] = (float) (i + 1);
    struct mg_tensor * t = mg_transpose(ctx, m);
    struct mg_tensor * c = mg_tensor_copy_packed(ctx, t);
    assert_packed_copy_of(c, t);
    const float want[6] = {1, 4, 2, 5, 3, 6};
    ck_assert_mem_eq(c->data, want, sizeof want);
    ck_assert_int_eq(c->nb[1], 2 * sizeof(float));
    const float source[6] = {1, 2, 3, 4, 5, 6};
    ck_assert_mem_eq(m->data, source, sizeof source);   // the source is untouched
    mg_free(ctx);
}
END_TEST

START_TEST(every_permutation_of_a_4d_tensor) {
    require_function();
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * a = mg_new_tensor_4d(ctx, MG_TYPE_F32, 2, 3, 4, 5);
    for (int i = 0; i < 120; i++) ((float *) a->data)[i] = (float) i;
    const int perms[][4] = {{0, 1, 2, 3}, {1, 0, 2, 3}, {1, 2, 0, 3}, {3, 2, 1, 0}, {2, 0, 3, 1}, {0, 3, 1, 2}};
    for (size_t p = 0; p < sizeof perms / sizeof perms[0]; p++) {
        struct mg_tensor * v = mg_permute(ctx, a, perms[p][0], perms[p][1], perms[p][2], perms[p][3]);
        assert_packed_copy_of(mg_tensor_copy_packed(ctx, v), v);
    }
    mg_free(ctx);
}
END_TEST

// A slice with an offset and a row stride wider than its rows.
START_TEST(a_slice_with_an_offset) {
    require_function();
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * a = mg_new_tensor_2d(ctx, MG_TYPE_F32, 5, 4);
    for (int i = 0; i < 20; i++) ((float *) a->data)[i] = (float) (i * i);
    struct mg_tensor * v = mg_view_2d(ctx, a, 3, 2, a->nb[1], 1 * a->nb[1] + 2 * a->nb[0]);   // rows 1-2, cols 2-4
    struct mg_tensor * c = mg_tensor_copy_packed(ctx, v);
    assert_packed_copy_of(c, v);
    const float want[6] = {7 * 7, 8 * 8, 9 * 9, 12 * 12, 13 * 13, 14 * 14};
    ck_assert_mem_eq(c->data, want, sizeof want);
    mg_free(ctx);
}
END_TEST

// F16: the copy holds the very same 16-bit codes, in the new order.
START_TEST(f16_transpose_keeps_the_codes) {
    require_function();
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * h = mg_new_tensor_2d(ctx, MG_TYPE_F16, 7, 3);
    for (int i = 0; i < 21; i++) ((mg_fp16_t *) h->data)[i] = mg_fp32_to_fp16(0.1f * (float) i - 1.0f);
    struct mg_tensor * t = mg_transpose(ctx, h);
    struct mg_tensor * c = mg_tensor_copy_packed(ctx, t);
    assert_packed_copy_of(c, t);
    for (int i1 = 0; i1 < 7; i1++)
        for (int i0 = 0; i0 < 3; i0++)
            ck_assert_uint_eq(((const mg_fp16_t *) c->data)[i1 * 3 + i0], ((const mg_fp16_t *) h->data)[i0 * 7 + i1]);
    mg_free(ctx);
}
END_TEST

// Q8_0 rows in a new order (dims 1 and 2 swapped): whole blocks copied, bytes equal.
START_TEST(quantized_rows_reordered) {
    require_function();
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * q = mg_new_tensor_3d(ctx, MG_TYPE_Q8_0, 64, 3, 2);
    uint64_t rng = 0x01c0;
    float row[64];
    for (int r = 0; r < 6; r++) {
        mg_test_fill_uniform(row, 64, &rng, -2.0f, 2.0f);
        mg_quantize_row_q8_0_ref(row, (char *) q->data + r * q->nb[1], 64);
    }
    struct mg_tensor * v = mg_permute(ctx, q, 0, 2, 1, 3);   // {64, 2, 3}
    struct mg_tensor * c = mg_tensor_copy_packed(ctx, v);
    assert_packed_copy_of(c, v);
    ck_assert_uint_eq(mg_nbytes(c), 6 * 68);
    for (int i2 = 0; i2 < 3; i2++)
        for (int i1 = 0; i1 < 2; i1++)
            ck_assert_mem_eq((const char *) c->data + (i2 * 2 + i1) * 68, mg_element_ptr(v, 0, i1, i2, 0), 68);
    mg_free(ctx);
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("01_tensor ex2 copy_packed");
    TCase * tc = tcase_create("copy_packed");
    tcase_add_test(tc, copy_packed_exists);
    tcase_add_test(tc, the_demos_transpose);
    tcase_add_test(tc, every_permutation_of_a_4d_tensor);
    tcase_add_test(tc, a_slice_with_an_offset);
    tcase_add_test(tc, f16_transpose_keeps_the_codes);
    tcase_add_test(tc, quantized_rows_reordered);
    suite_add_tcase(s, tc);
    return s;
}
