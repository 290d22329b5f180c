// test_tensor.c - tensor headers, the type table, and zero-copy views.
//
// Every view is checked two ways: its ne/nb against the numbers the stride
// rule gives by hand, and its values against the root tensor read at the
// index that a naive computation says the view element comes from. The root
// is filled with its own logical index ("iota"), so a value says exactly which
// element was read. Quantization itself is tested in test_quants.c; here only
// element access of quantized tensors is.
#include "harness.h"
#include "mg.h"

#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

static struct mg_context * new_ctx(void) {
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 4 * 1024 * 1024});
    ck_assert_ptr_nonnull(ctx);
    return ctx;
}

// Element k (logical order) of a fresh F32 tensor gets the value k.
static void fill_iota(struct mg_tensor * t) {
    float * p = t->data;
    for (int64_t k = 0; k < mg_nelements(t); k++) p[k] = (float) k;
}

// The logical index of (i0, i1, i2, i3) in a packed tensor of shape ne.
static int64_t flat_index(const int64_t ne[4], int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return i0 + ne[0] * (i1 + ne[1] * (i2 + ne[2] * i3));
}

static void assert_shape(const struct mg_tensor * t, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
    ck_assert_msg(t->ne[0] == ne0 && t->ne[1] == ne1 && t->ne[2] == ne2 && t->ne[3] == ne3,
                  "ne = [%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 "], expected [%" PRId64 ",%" PRId64 ",%" PRId64
                  ",%" PRId64 "]",
                  t->ne[0], t->ne[1], t->ne[2], t->ne[3], ne0, ne1, ne2, ne3);
}

static void assert_strides(const struct mg_tensor * t, size_t nb0, size_t nb1, size_t nb2, size_t nb3) {
    ck_assert_msg(t->nb[0] == nb0 && t->nb[1] == nb1 && t->nb[2] == nb2 && t->nb[3] == nb3,
                  "nb = [%zu,%zu,%zu,%zu], expected [%zu,%zu,%zu,%zu]", t->nb[0], t->nb[1], t->nb[2], t->nb[3], nb0,
                  nb1, nb2, nb3);
}

// A view reads its root's bytes: same root, the offset it was given, the
// data pointer that offset gives, and the operand it was made from.
static void assert_view_of(const struct mg_tensor * v, const struct mg_tensor * root, const struct mg_tensor * parent,
                           enum mg_op op, size_t offset) {
    ck_assert_ptr_eq(v->view_src, root);
    ck_assert_uint_eq(v->view_offs, offset);
    ck_assert_ptr_eq(v->data, (char *) root->data + offset);
    ck_assert_ptr_eq(v->src[0], parent);
    ck_assert_int_eq(v->op, op);
}

// ---------------------------------------------------------------------------
// Fresh tensors and the type table
// ---------------------------------------------------------------------------

START_TEST(test_new_tensor_packed_strides_f32) {
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * t = mg_new_tensor_4d(ctx, MG_TYPE_F32, 5, 3, 2, 7);
    assert_shape(t, 5, 3, 2, 7);
    assert_strides(t, 4, 20, 60, 120);
    ck_assert_ptr_nonnull(t->data);
    ck_assert_ptr_null(t->view_src);
    ck_assert_int_eq(t->op, MG_OP_NONE);
    ck_assert_int_eq(mg_nelements(t), 210);
    ck_assert_int_eq(mg_nrows(t), 42);
    ck_assert_uint_eq(mg_nbytes(t), 840);
    ck_assert_int_eq(mg_n_dims(t), 4);
    mg_free(ctx);
}
END_TEST

START_TEST(test_new_tensor_low_dims_fill_with_ones) {
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * a = mg_new_tensor_1d(ctx, MG_TYPE_F32, 7);
    struct mg_tensor * b = mg_new_tensor_2d(ctx, MG_TYPE_F16, 5, 3);
    struct mg_tensor * c = mg_new_tensor_3d(ctx, MG_TYPE_F32, 2, 1, 3);
    const int64_t ne[2] = {4, 6};
    struct mg_tensor * d = mg_new_tensor(ctx, MG_TYPE_F32, 2, ne);
    assert_shape(a, 7, 1, 1, 1);
    assert_strides(a, 4, 28, 28, 28);
    assert_shape(b, 5, 3, 1, 1);
    assert_strides(b, 2, 10, 30, 30);
    assert_shape(c, 2, 1, 3, 1);
    assert_strides(c, 4, 8, 8, 24);
    assert_shape(d, 4, 6, 1, 1);
    ck_assert_int_eq(mg_n_dims(a), 1);
    ck_assert_int_eq(mg_n_dims(b), 2);
    ck_assert_int_eq(mg_n_dims(c), 3);   // a middle dim of 1 does not lower the count
    ck_assert(mg_are_same_shape(d, mg_new_tensor_2d(ctx, MG_TYPE_F16, 4, 6)));
    ck_assert(!mg_are_same_shape(d, mg_new_tensor_2d(ctx, MG_TYPE_F32, 6, 4)));
    mg_free(ctx);
}
END_TEST

START_TEST(test_new_tensor_quantized_strides) {
    struct mg_context * ctx = new_ctx();
    // A row of 64 elements is 2 blocks: nb[0] steps one block, nb[1] one row.
    struct mg_tensor * q4 = mg_new_tensor_3d(ctx, MG_TYPE_Q4_0, 64, 3, 2);
    assert_strides(q4, 18, 36, 108, 216);
    ck_assert_uint_eq(mg_nbytes(q4), 216);
    struct mg_tensor * q8 = mg_new_tensor_2d(ctx, MG_TYPE_Q8_0, 96, 2);
    assert_strides(q8, 34, 102, 204, 204);
    ck_assert_uint_eq(mg_nbytes(q8), 204);
    ck_assert(mg_is_contiguous(q4));
    ck_assert(mg_is_contiguous(q8));
    mg_free(ctx);
}
END_TEST

START_TEST(test_type_table) {
    // ggml's ids (they are written into GGUF files), names, block and type sizes.
    const struct {
        enum mg_type type;
        int          id;
        const char * name;
        int64_t      blck;
        size_t       size;
        bool         quantized;
        size_t       row_of_256;
    } expected[] = {
        {MG_TYPE_F32, 0, "f32", 1, 4, false, 1024},
        {MG_TYPE_F16, 1, "f16", 1, 2, false, 512},
        {MG_TYPE_Q4_0, 2, "q4_0", 32, 18, true, 144},
        {MG_TYPE_Q8_0, 8, "q8_0", 32, 34, true, 272},
    };
    for (size_t i = 0; i < sizeof(expected) / sizeof(expected[0]); i++) {
        const enum mg_type type = expected[i].type;
        const struct mg_type_traits * tt = mg_get_type_traits(type);
        ck_assert_int_eq((int) type, expected[i].id);
        ck_assert(mg_type_is_supported(expected[i].id));
        ck_assert_ptr_nonnull(tt);
        ck_assert_str_eq(tt->name, expected[i].name);
        ck_assert_str_eq(mg_type_name(type), expected[i].name);
        ck_assert_int_eq(tt->blck_size, expected[i].blck);
        ck_assert_int_eq(mg_blck_size(type), expected[i].blck);
        ck_assert_uint_eq(tt->type_size, expected[i].size);
        ck_assert_uint_eq(mg_type_size(type), expected[i].size);
        ck_assert_int_eq(tt->is_quantized, expected[i].quantized);
        ck_assert_ptr_nonnull(tt->to_float);
        ck_assert_uint_eq(mg_row_size(type, 256), expected[i].row_of_256);
        ck_assert_uint_eq(mg_row_size(type, 32), expected[i].row_of_256 / 8);
    }
    // F16 and the block formats can be encoded; F32 needs no encoder.
    ck_assert_ptr_nonnull(mg_get_type_traits(MG_TYPE_F16)->from_float);
    ck_assert_ptr_nonnull(mg_get_type_traits(MG_TYPE_Q4_0)->from_float);
    ck_assert_ptr_nonnull(mg_get_type_traits(MG_TYPE_Q8_0)->from_float);
}
END_TEST

START_TEST(test_type_name_of_unsupported_ids) {
    // 4 and 5 were ggml's removed Q4_2/Q4_3; 17 is an IQ type no chapter has; 42 is the last id.
    ck_assert_str_eq(mg_type_name((enum mg_type) 4), "type-4");
    ck_assert_str_eq(mg_type_name((enum mg_type) 17), "type-17");
    ck_assert_str_eq(mg_type_name((enum mg_type) 42), "type-42");
    const int bad_ids[] = {-1, 4, 5, 17, 42, MG_TYPE_COUNT, 1000};
    for (size_t i = 0; i < sizeof(bad_ids) / sizeof(bad_ids[0]); i++) {
        ck_assert_msg(!mg_type_is_supported(bad_ids[i]), "id %d claimed supported", bad_ids[i]);
        ck_assert_ptr_null(mg_get_type_traits((enum mg_type) bad_ids[i]));
    }
}
END_TEST

// ---------------------------------------------------------------------------
// Views: shapes, strides, and the values they read
// ---------------------------------------------------------------------------

START_TEST(test_view_1d) {
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * root = mg_new_tensor_2d(ctx, MG_TYPE_F32, 10, 4);
    fill_iota(root);
    struct mg_tensor * v = mg_view_1d(ctx, root, 7, 13 * sizeof(float));   // starts at (3, 1)
    assert_shape(v, 7, 1, 1, 1);
    assert_strides(v, 4, 28, 28, 28);
    assert_view_of(v, root, root, MG_OP_VIEW, 52);
    for (int64_t i = 0; i < 7; i++) ck_assert_float_eq(mg_get_f32_nd(v, i, 0, 0, 0), (float) (13 + i));
    mg_free(ctx);
}
END_TEST

START_TEST(test_view_2d) {
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * root = mg_new_tensor_3d(ctx, MG_TYPE_F32, 10, 4, 3);
    fill_iota(root);
    // A 4x3 window starting at (2, 1, 0), rows as far apart as the root's.
    const size_t off = 2 * root->nb[0] + 1 * root->nb[1];
    struct mg_tensor * v = mg_view_2d(ctx, root, 4, 3, root->nb[1], off);
    assert_shape(v, 4, 3, 1, 1);
    assert_strides(v, 4, 40, 120, 120);
    assert_view_of(v, root, root, MG_OP_VIEW, off);
    for (int64_t i1 = 0; i1 < 3; i1++) {
        for (int64_t i0 = 0; i0 < 4; i0++) {
            ck_assert_float_eq(mg_get_f32_nd(v, i0, i1, 0, 0), (float) flat_index(root->ne, i0 + 2, i1 + 1, 0, 0));
        }
    }
    mg_free(ctx);
}
END_TEST

START_TEST(test_view_3d) {
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * root = mg_new_tensor_3d(ctx, MG_TYPE_F32, 10, 4, 3);
    fill_iota(root);
    // A 3x2x2 box starting at (5, 2, 1).
    const size_t off = 5 * root->nb[0] + 2 * root->nb[1] + 1 * root->nb[2];
    struct mg_tensor * v = mg_view_3d(ctx, root, 3, 2, 2, root->nb[1], root->nb[2], off);
    assert_shape(v, 3, 2, 2, 1);
    assert_strides(v, 4, 40, 160, 320);
    assert_view_of(v, root, root, MG_OP_VIEW, off);
    for (int64_t i2 = 0; i2 < 2; i2++) {
        for (int64_t i1 = 0; i1 < 2; i1++) {
            for (int64_t i0 = 0; i0 < 3; i0++) {
                ck_assert_float_eq(mg_get_f32_nd(v, i0, i1, i2, 0),
                                   (float) flat_index(root->ne, i0 + 5, i1 + 2, i2 + 1, 0));
            }
        }
    }
    mg_free(ctx);
}
END_TEST

START_TEST(test_view_4d) {
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * root = mg_new_tensor_4d(ctx, MG_TYPE_F32, 6, 5, 4, 3);
    fill_iota(root);
    // Every other row (nb1 = 2 rows) of a 2x3x2x2 box starting at (1, 0, 2, 1).
    const size_t off = 1 * root->nb[0] + 2 * root->nb[2] + 1 * root->nb[3];
    struct mg_tensor * v = mg_view_4d(ctx, root, 2, 3, 2, 2, 2 * root->nb[1], root->nb[2], root->nb[3], off);
    assert_shape(v, 2, 3, 2, 2);
    assert_strides(v, 4, 48, 120, 480);
    assert_view_of(v, root, root, MG_OP_VIEW, off);
    for (int64_t i3 = 0; i3 < 2; i3++) {
        for (int64_t i2 = 0; i2 < 2; i2++) {
            for (int64_t i1 = 0; i1 < 3; i1++) {
                for (int64_t i0 = 0; i0 < 2; i0++) {
                    ck_assert_float_eq(mg_get_f32_nd(v, i0, i1, i2, i3),
                                       (float) flat_index(root->ne, i0 + 1, 2 * i1, i2 + 2, i3 + 1));
                }
            }
        }
    }
    mg_free(ctx);
}
END_TEST

START_TEST(test_reshape_1d_to_4d) {
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * root = mg_new_tensor_2d(ctx, MG_TYPE_F32, 6, 4);
    fill_iota(root);
    struct mg_tensor * r1 = mg_reshape_1d(ctx, root, 24);
    struct mg_tensor * r2 = mg_reshape_2d(ctx, root, 8, 3);
    struct mg_tensor * r3 = mg_reshape_3d(ctx, root, 2, 3, 4);
    struct mg_tensor * r4 = mg_reshape_4d(ctx, root, 2, 3, 2, 2);
    assert_shape(r1, 24, 1, 1, 1);
    assert_strides(r1, 4, 96, 96, 96);
    assert_shape(r2, 8, 3, 1, 1);
    assert_strides(r2, 4, 32, 96, 96);
    assert_shape(r3, 2, 3, 4, 1);
    assert_strides(r3, 4, 8, 24, 96);
    assert_shape(r4, 2, 3, 2, 2);
    assert_strides(r4, 4, 8, 24, 48);
    struct mg_tensor * all[] = {r1, r2, r3, r4};
    for (int k = 0; k < 4; k++) {
        assert_view_of(all[k], root, root, MG_OP_RESHAPE, 0);
        ck_assert(mg_is_contiguous(all[k]));
        // The same bytes counted in a new shape: logical order does not change.
        for (int64_t i = 0; i < 24; i++) ck_assert_float_eq(mg_get_f32_1d(all[k], i), (float) i);
    }
    mg_free(ctx);
}
END_TEST

START_TEST(test_transpose_shape_and_strides) {
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * m = mg_new_tensor_3d(ctx, MG_TYPE_F32, 3, 2, 5);
    struct mg_tensor * t = mg_transpose(ctx, m);
    assert_shape(t, 2, 3, 5, 1);
    assert_strides(t, 12, 4, 24, 120);
    assert_view_of(t, m, m, MG_OP_TRANSPOSE, 0);
    ck_assert(mg_is_transposed(t));
    ck_assert(!mg_is_transposed(m));
    ck_assert(!mg_is_contiguous(t));
    mg_free(ctx);
}
END_TEST

START_TEST(test_transpose_reads_transposed_values) {
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * m = mg_new_tensor_2d(ctx, MG_TYPE_F32, 3, 2);   // rows {1 2 3} {4 5 6}
    for (int i = 0; i < 6; i++) ((float *) m->data)[i] = (float) (i + 1);
    struct mg_tensor * t = mg_transpose(ctx, m);
    for (int64_t i1 = 0; i1 < 3; i1++) {
        for (int64_t i0 = 0; i0 < 2; i0++) {
            ck_assert_float_eq(mg_get_f32_nd(t, i0, i1, 0, 0), mg_get_f32_nd(m, i1, i0, 0, 0));
        }
    }
    // In t's logical order the columns of m come out one after another.
    const float expected[6] = {1, 4, 2, 5, 3, 6};
    for (int64_t k = 0; k < 6; k++) ck_assert_float_eq(mg_get_f32_1d(t, k), expected[k]);
    // Transposing twice gives m's shape and strides back, still over m's bytes.
    struct mg_tensor * tt = mg_transpose(ctx, t);
    assert_shape(tt, 3, 2, 1, 1);
    assert_strides(tt, 4, 12, 24, 24);
    ck_assert_ptr_eq(tt->view_src, m);
    ck_assert_ptr_eq(tt->src[0], t);
    mg_free(ctx);
}
END_TEST

START_TEST(test_permute_all_24_orders) {
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * root = mg_new_tensor_4d(ctx, MG_TYPE_F32, 2, 3, 4, 5);   // all dims different
    fill_iota(root);
    int n_orders = 0;
    for (int a0 = 0; a0 < 4; a0++) {
        for (int a1 = 0; a1 < 4; a1++) {
            for (int a2 = 0; a2 < 4; a2++) {
                for (int a3 = 0; a3 < 4; a3++) {
                    if (a0 == a1 || a0 == a2 || a0 == a3 || a1 == a2 || a1 == a3 || a2 == a3) continue;
                    n_orders++;
                    const int axes[4] = {a0, a1, a2, a3};
                    struct mg_tensor * p = mg_permute(ctx, root, a0, a1, a2, a3);
                    assert_view_of(p, root, root, MG_OP_PERMUTE, 0);
                    // Dimension d of root is dimension axes[d] of p: count and stride.
                    for (int d = 0; d < 4; d++) {
                        ck_assert_int_eq(p->ne[axes[d]], root->ne[d]);
                        ck_assert_uint_eq(p->nb[axes[d]], root->nb[d]);
                    }
                    // Element j of p is element i of root with i[d] = j[axes[d]].
                    int64_t j[4];
                    for (j[3] = 0; j[3] < p->ne[3]; j[3]++) {
                        for (j[2] = 0; j[2] < p->ne[2]; j[2]++) {
                            for (j[1] = 0; j[1] < p->ne[1]; j[1]++) {
                                for (j[0] = 0; j[0] < p->ne[0]; j[0]++) {
                                    const int64_t want = flat_index(root->ne, j[axes[0]], j[axes[1]], j[axes[2]],
                                                                    j[axes[3]]);
                                    ck_assert_msg(mg_get_f32_nd(p, j[0], j[1], j[2], j[3]) == (float) want,
                                                  "permute(%d,%d,%d,%d) at (%" PRId64 ",%" PRId64 ",%" PRId64
                                                  ",%" PRId64 ")",
                                                  a0, a1, a2, a3, j[0], j[1], j[2], j[3]);
                                }
                            }
                        }
                    }
                    // Only the identity order stays contiguous.
                    ck_assert_int_eq(mg_is_contiguous(p), a0 == 0 && a1 == 1 && a2 == 2 && a3 == 3);
                }
            }
        }
    }
    ck_assert_int_eq(n_orders, 24);
    mg_free(ctx);
}
END_TEST

START_TEST(test_view_chain_flattens_to_root) {
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * root = mg_new_tensor_2d(ctx, MG_TYPE_F32, 16, 8);
    fill_iota(root);
    // v1 starts at root (2, 1), v2 at v1 (1, 1), v3 at v2 (1, 0): root (4, 2).
    const size_t off1 = 2 * root->nb[0] + 1 * root->nb[1];
    struct mg_tensor * v1 = mg_view_2d(ctx, root, 8, 4, root->nb[1], off1);
    const size_t off2 = 1 * v1->nb[0] + 1 * v1->nb[1];
    struct mg_tensor * v2 = mg_view_2d(ctx, v1, 4, 2, v1->nb[1], off2);
    const size_t off3 = 1 * v2->nb[0];
    struct mg_tensor * v3 = mg_view_1d(ctx, v2, 3, off3);
    assert_view_of(v1, root, root, MG_OP_VIEW, off1);
    assert_view_of(v2, root, v1, MG_OP_VIEW, off1 + off2);
    assert_view_of(v3, root, v2, MG_OP_VIEW, off1 + off2 + off3);
    ck_assert_ptr_null(root->view_src);
    for (int64_t k = 0; k < 3; k++) {
        ck_assert_float_eq(mg_get_f32_nd(v3, k, 0, 0, 0), (float) flat_index(root->ne, 4 + k, 2, 0, 0));
    }
    // The other view ops flatten too.
    struct mg_tensor * t = mg_transpose(ctx, v2);
    struct mg_tensor * p = mg_permute(ctx, t, 1, 0, 2, 3);
    assert_view_of(t, root, v2, MG_OP_TRANSPOSE, off1 + off2);
    assert_view_of(p, root, t, MG_OP_PERMUTE, off1 + off2);
    mg_free(ctx);
}
END_TEST

// ---------------------------------------------------------------------------
// Contiguity and byte spans
// ---------------------------------------------------------------------------

START_TEST(test_is_contiguous_cases) {
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * m = mg_new_tensor_4d(ctx, MG_TYPE_F32, 4, 3, 2, 2);
    ck_assert(mg_is_contiguous(m));
    ck_assert(!mg_is_contiguous(mg_transpose(ctx, m)));
    ck_assert(!mg_is_contiguous(mg_permute(ctx, m, 0, 2, 1, 3)));
    // A window of whole rows is contiguous; a window inside rows is not.
    ck_assert(mg_is_contiguous(mg_view_2d(ctx, m, 4, 2, m->nb[1], m->nb[1])));
    ck_assert(!mg_is_contiguous(mg_view_2d(ctx, m, 3, 2, m->nb[1], 0)));
    ck_assert(mg_is_contiguous(mg_view_1d(ctx, m, 5, 4 * sizeof(float))));
    ck_assert(mg_is_contiguous(mg_view_2d(ctx, m, 3, 2, 3 * sizeof(float), 0)));   // packed 3x2 over the bytes

    // Dimensions of size 1 are never stepped, so their strides do not matter.
    struct mg_tensor * col = mg_new_tensor_2d(ctx, MG_TYPE_F32, 3, 1);
    ck_assert(mg_is_contiguous(mg_transpose(ctx, col)));   // {1, 3}, nb = {12, 4}
    struct mg_tensor * a = mg_new_tensor_4d(ctx, MG_TYPE_F32, 4, 1, 3, 1);
    ck_assert(mg_is_contiguous(mg_permute(ctx, a, 0, 2, 1, 3)));   // {4, 3, 1, 1}
    ck_assert(mg_is_contiguous(mg_permute(ctx, a, 0, 3, 2, 1)));
    ck_assert(mg_is_contiguous(mg_permute(ctx, a, 1, 0, 2, 3)));    // {1, 4, 3, 1}, nb {16, 4, 16, 48}
    struct mg_tensor * b = mg_new_tensor_4d(ctx, MG_TYPE_F32, 4, 1, 3, 2);
    ck_assert(!mg_is_contiguous(mg_permute(ctx, b, 0, 1, 3, 2)));   // {4, 1, 2, 3}, nb {4, 16, 48, 16}
    // One row picked with a stride that is not the packed one: still contiguous.
    ck_assert(mg_is_contiguous(mg_view_2d(ctx, m, 4, 1, 1000, m->nb[1])));

    // Quantized: a view of whole rows is contiguous, one of half rows is not.
    struct mg_tensor * q = mg_new_tensor_2d(ctx, MG_TYPE_Q8_0, 64, 4);
    ck_assert(mg_is_contiguous(mg_view_2d(ctx, q, 64, 2, q->nb[1], q->nb[1])));
    ck_assert(!mg_is_contiguous(mg_view_2d(ctx, q, 32, 2, q->nb[1], 0)));
    mg_free(ctx);
}
END_TEST

// The bytes from a view's first byte to just past its last element, found by
// visiting every element (types with one element per block).
static size_t naive_span(const struct mg_tensor * t) {
    size_t end = 0;
    for (int64_t i3 = 0; i3 < t->ne[3]; i3++) {
        for (int64_t i2 = 0; i2 < t->ne[2]; i2++) {
            for (int64_t i1 = 0; i1 < t->ne[1]; i1++) {
                for (int64_t i0 = 0; i0 < t->ne[0]; i0++) {
                    const size_t off = (size_t) (i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3]);
                    if (off + mg_type_size(t->type) > end) end = off + mg_type_size(t->type);
                }
            }
        }
    }
    return end;
}

START_TEST(test_nbytes_of_strided_views) {
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * root = mg_new_tensor_3d(ctx, MG_TYPE_F32, 10, 4, 3);
    struct mg_tensor * v2 = mg_view_2d(ctx, root, 4, 3, root->nb[1], 0);
    ck_assert_uint_eq(mg_nbytes(v2), 2 * 40 + 4 * 4);   // two whole rows, then 4 floats
    ck_assert_uint_eq(mg_nbytes(v2), naive_span(v2));
    struct mg_tensor * v4 = mg_view_4d(ctx, root, 2, 2, 2, 1, 2 * root->nb[1], root->nb[2], root->nb[3], 4);
    ck_assert_uint_eq(mg_nbytes(v4), naive_span(v4));
    ck_assert_uint_eq(mg_nbytes(v4), 160 + 80 + 8);
    struct mg_tensor * q = mg_new_tensor_2d(ctx, MG_TYPE_Q4_0, 64, 5);
    ck_assert_uint_eq(mg_nbytes(mg_view_2d(ctx, q, 32, 3, 2 * q->nb[1], 0)), 4 * 36 + 18);
    mg_free(ctx);
}
END_TEST

// A transposed or permuted view spans the same bytes as its root: ggml_nbytes
// counts type_size + sum((ne[i]-1) * nb[i]) for one-element blocks.
START_TEST(test_nbytes_of_transposed_and_permuted_views) {
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * m = mg_new_tensor_2d(ctx, MG_TYPE_F32, 3, 2);
    struct mg_tensor * t = mg_transpose(ctx, m);
    ck_assert_uint_eq(naive_span(t), 24);
    ck_assert_uint_eq(mg_nbytes(t), 24);
    struct mg_tensor * a = mg_new_tensor_4d(ctx, MG_TYPE_F32, 2, 3, 4, 5);
    for (int k = 0; k < 4; k++) {
        struct mg_tensor * p = k == 0 ? mg_permute(ctx, a, 1, 0, 2, 3) : k == 1 ? mg_permute(ctx, a, 3, 2, 1, 0)
                                     : k == 2 ? mg_permute(ctx, a, 2, 0, 3, 1) : mg_permute(ctx, a, 0, 1, 3, 2);
        ck_assert_uint_eq(naive_span(p), mg_nbytes(a));
        ck_assert_msg(mg_nbytes(p) == mg_nbytes(a), "permutation %d: nbytes %zu, the root spans %zu", k,
                      mg_nbytes(p), mg_nbytes(a));
    }
    mg_free(ctx);
}
END_TEST

// ---------------------------------------------------------------------------
// Element access through nb
// ---------------------------------------------------------------------------

START_TEST(test_set_through_view_writes_root) {
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * root = mg_new_tensor_2d(ctx, MG_TYPE_F32, 6, 4);
    memset(root->data, 0, mg_nbytes(root));
    struct mg_tensor * v = mg_view_2d(ctx, root, 3, 2, root->nb[1], 2 * root->nb[0] + 1 * root->nb[1]);
    for (int64_t i1 = 0; i1 < 2; i1++) {
        for (int64_t i0 = 0; i0 < 3; i0++) mg_set_f32_nd(v, i0, i1, 0, 0, (float) (100 + 10 * i1 + i0));
    }
    for (int64_t i1 = 0; i1 < 4; i1++) {
        for (int64_t i0 = 0; i0 < 6; i0++) {
            const bool inside = i0 >= 2 && i0 < 5 && i1 >= 1 && i1 < 3;
            const float want = inside ? (float) (100 + 10 * (i1 - 1) + (i0 - 2)) : 0.0f;
            ck_assert_float_eq(mg_get_f32_nd(root, i0, i1, 0, 0), want);
        }
    }
    // Logical-order access on the view walks the same window.
    ck_assert_float_eq(mg_get_f32_1d(v, 4), 111.0f);
    mg_set_f32_1d(v, 5, -7.0f);
    ck_assert_float_eq(mg_get_f32_nd(root, 4, 2, 0, 0), -7.0f);
    mg_free(ctx);
}
END_TEST

START_TEST(test_set_through_transpose_writes_root) {
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * m = mg_new_tensor_2d(ctx, MG_TYPE_F16, 3, 2);
    struct mg_tensor * t = mg_transpose(ctx, m);
    for (int64_t k = 0; k < 6; k++) mg_set_f32_1d(t, k, 0.5f * (float) k);   // halves are exact in F16
    // t's element (i0, i1) is m's (i1, i0), so k = i0 + 2*i1 lands at m[i1 + 3*i0].
    const float expected_m[6] = {0.0f, 1.0f, 2.0f, 0.5f, 1.5f, 2.5f};
    for (int64_t k = 0; k < 6; k++) ck_assert_float_eq(mg_get_f32_1d(m, k), expected_m[k]);
    const uint16_t * h = m->data;
    ck_assert_uint_eq(h[1], 0x3c00);   // 1.0 as IEEE half, written at m's element 1
    mg_free(ctx);
}
END_TEST

// Element i of a quantized row, decoded by hand from the block bytes.
static float q8_0_element(const void * row, int64_t i) {
    const struct mg_block_q8_0 * b = (const struct mg_block_q8_0 *) row + i / 32;
    return mg_fp16_to_fp32(b->d) * (float) b->qs[i % 32];
}

static float q4_0_element(const void * row, int64_t i) {
    const struct mg_block_q4_0 * b = (const struct mg_block_q4_0 *) row + i / 32;
    const int j = (int) (i % 32);
    const int code = j < 16 ? b->qs[j] & 0x0f : b->qs[j - 16] >> 4;
    return mg_fp16_to_fp32(b->d) * (float) (code - 8);
}

static void check_quantized_access(enum mg_type type, float (*element)(const void *, int64_t)) {
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * q = mg_new_tensor_2d(ctx, type, 96, 3);
    const struct mg_type_traits * tt = mg_get_type_traits(type);
    uint64_t rng = 1234;
    float x[96], decoded[96];
    for (int64_t r = 0; r < 3; r++) {
        mg_test_fill_uniform(x, 96, &rng, -3.0f, 3.0f);
        tt->from_float(x, (char *) q->data + r * q->nb[1], 96);
    }
    for (int64_t r = 0; r < 3; r++) {
        const char * row = (const char *) q->data + r * q->nb[1];
        tt->to_float(row, decoded, 96);
        for (int64_t i = 0; i < 96; i++) {
            const float got = mg_get_f32_nd(q, i, r, 0, 0);
            ck_assert_msg(got == element(row, i), "%s row %" PRId64 " element %" PRId64 ": %g vs %g by hand",
                          mg_type_name(type), r, i, (double) got, (double) element(row, i));
            ck_assert_float_eq(got, decoded[i]);
            ck_assert_float_eq(mg_get_f32_1d(q, r * 96 + i), got);
        }
    }
    // Through a view of rows 1..2, element (i, 0) is row 1's element i.
    struct mg_tensor * v = mg_view_2d(ctx, q, 96, 2, q->nb[1], q->nb[1]);
    for (int64_t i = 0; i < 96; i++) ck_assert_float_eq(mg_get_f32_nd(v, i, 1, 0, 0), mg_get_f32_nd(q, i, 2, 0, 0));
    mg_free(ctx);
}

START_TEST(test_q8_0_element_access_equals_dequantize) {
    check_quantized_access(MG_TYPE_Q8_0, q8_0_element);
}
END_TEST

START_TEST(test_q4_0_element_access_equals_dequantize) {
    check_quantized_access(MG_TYPE_Q4_0, q4_0_element);
}
END_TEST

// ---------------------------------------------------------------------------
// Names and the describe line
// ---------------------------------------------------------------------------

START_TEST(test_names_set_format_truncate) {
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * t = mg_new_tensor_1d(ctx, MG_TYPE_F32, 4);
    ck_assert_str_eq(mg_get_name(t), "");
    ck_assert_ptr_eq(mg_set_name(t, "attn_norm"), t);
    ck_assert_str_eq(mg_get_name(t), "attn_norm");
    ck_assert_ptr_eq(mg_format_name(t, "%s-%d", "attn_norm", 3), t);
    ck_assert_str_eq(mg_get_name(t), "attn_norm-3");

    char long_name[101];
    for (int i = 0; i < 100; i++) long_name[i] = (char) ('a' + i % 26);
    long_name[100] = '\0';
    mg_set_name(t, long_name);
    ck_assert_uint_eq(strlen(mg_get_name(t)), 63);
    ck_assert_int_eq(strncmp(mg_get_name(t), long_name, 63), 0);
    mg_format_name(t, "blk.%d.%s", 7, long_name);
    ck_assert_uint_eq(strlen(mg_get_name(t)), 63);
    ck_assert_int_eq(strncmp(mg_get_name(t), "blk.7.abcdef", 12), 0);
    mg_free(ctx);
}
END_TEST

START_TEST(test_describe_line) {
    struct mg_context * ctx = new_ctx();
    char buf[256];
    struct mg_tensor * m = mg_set_name(mg_new_tensor_2d(ctx, MG_TYPE_F32, 3, 2), "m");
    ck_assert_str_eq(mg_tensor_describe(m, buf, sizeof(buf)), "m: f32 ne=[3,2,1,1] nb=[4,12,24,24]");
    struct mg_tensor * t = mg_set_name(mg_transpose(ctx, m), "mT");
    ck_assert_str_eq(mg_tensor_describe(t, buf, sizeof(buf)),
                     "mT: f32 ne=[2,3,1,1] nb=[12,4,24,24] op=TRANSPOSE (view of m +0)");
    struct mg_tensor * v = mg_set_name(mg_view_1d(ctx, m, 2, 8), "v");
    ck_assert_str_eq(mg_tensor_describe(v, buf, sizeof(buf)),
                     "v: f32 ne=[2,1,1,1] nb=[4,8,8,8] op=VIEW (view of m +8)");
    struct mg_tensor * q = mg_new_tensor_2d(ctx, MG_TYPE_Q4_0, 64, 2);
    ck_assert_str_eq(mg_tensor_describe(q, buf, sizeof(buf)), "(unnamed): q4_0 ne=[64,2,1,1] nb=[18,36,72,72]");
    // A short buffer gets a terminated prefix, not an overflow.
    char small[12];
    memset(small, 'x', sizeof(small));
    ck_assert_ptr_eq(mg_tensor_describe(t, small, 10), small);
    ck_assert_str_eq(small, "mT: f32 n");
    ck_assert_int_eq(small[10], 'x');
    mg_free(ctx);
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("tensor");

    MG_TCASE(s, "basics", test_new_tensor_packed_strides_f32, test_new_tensor_low_dims_fill_with_ones,
                test_new_tensor_quantized_strides, test_type_table, test_type_name_of_unsupported_ids);

    MG_TCASE(s, "views", test_view_1d, test_view_2d, test_view_3d, test_view_4d, test_reshape_1d_to_4d,
                test_transpose_shape_and_strides, test_transpose_reads_transposed_values, test_permute_all_24_orders,
                test_view_chain_flattens_to_root);

    MG_TCASE(s, "layout", test_is_contiguous_cases, test_nbytes_of_strided_views,
                test_nbytes_of_transposed_and_permuted_views);

    MG_TCASE(s, "access", test_set_through_view_writes_root, test_set_through_transpose_writes_root,
                test_q8_0_element_access_equals_dequantize, test_q4_0_element_access_equals_dequantize);

    MG_TCASE(s, "names", test_names_set_format_truncate, test_describe_line);
    return s;
}
