// Generated from full/demos/01_tensor.c by tools/chapgen. In a class, edit this copy freely (make chapters will not overwrite your edits); to change the engine, edit full/demos/01_tensor.c and run make chapters.
// Chapter 01 demo: a tensor is a header over bytes; views change the header,
// never the bytes; and a row of floats can be squeezed into blocks.
#include "mg.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

// Where element (i0, i1) of t sits, as an offset from the first byte of root.
static long offset_in(const struct mg_tensor * t, const struct mg_tensor * root, int64_t i0, int64_t i1) {
    return (long) ((const char *) mg_element_ptr(t, i0, i1, 0, 0) - (const char *) root->data);
}

static void show_addresses(const struct mg_tensor * t, const struct mg_tensor * root) {
    for (int64_t i1 = 0; i1 < t->ne[1]; i1++) {
        printf("  ");
        for (int64_t i0 = 0; i0 < t->ne[0]; i0++) {
            printf("  [%lld,%lld]=%g at byte %2ld", (long long) i0, (long long) i1,
                   (double) mg_get_f32_nd(t, i0, i1, 0, 0), offset_in(t, root, i0, i1));
        }
        printf("\n");
    }
}

static void matrix_and_transpose(struct mg_context * ctx) {
    printf("== A 2x3 matrix: 2 rows of 3 floats, stored row after row ==\n");
    struct mg_tensor * m = mg_set_name(mg_new_tensor_2d(ctx, MG_TYPE_F32, 3, 2), "m");
    for (int i = 0; i < 6; i++) mg_set_f32_1d(m, i, (float) (i + 1));
    mg_tensor_print(stdout, m);
    show_addresses(m, m);

    printf("\n== Its transpose: the same 24 bytes, the strides swapped ==\n");
    struct mg_tensor * t = mg_set_name(mg_transpose(ctx, m), "t");
    mg_tensor_print(stdout, t);
    show_addresses(t, m);
    printf("t->data == m->data: %s; bytes copied: 0\n", t->data == m->data ? "yes" : "no");
    printf("contiguous: m %s, t %s\n", mg_is_contiguous(m) ? "yes" : "no", mg_is_contiguous(t) ? "yes" : "no");

    printf("\n== The same bytes read two ways ==\n");
    struct mg_tensor * flat = mg_set_name(mg_reshape_1d(ctx, m, 6), "flat");
    struct mg_tensor * row1 = mg_set_name(mg_view_1d(ctx, m, 3, 1 * m->nb[1]), "row1");
    struct mg_tensor * col1 = mg_set_name(mg_view_2d(ctx, m, 1, 2, m->nb[1], 1 * m->nb[0]), "col1");
    mg_tensor_print(stdout, flat);
    mg_tensor_print(stdout, row1);
    mg_tensor_print(stdout, col1);

    printf("\n== A view of a view of a view points at the root ==\n");
    struct mg_tensor * v1 = mg_set_name(mg_view_1d(ctx, flat, 5, 1 * sizeof(float)), "v1");
    struct mg_tensor * v2 = mg_set_name(mg_view_1d(ctx, v1, 4, 1 * sizeof(float)), "v2");
    struct mg_tensor * v3 = mg_set_name(mg_view_1d(ctx, v2, 2, 2 * sizeof(float)), "v3");
    char line[256];
    printf("%s\n", mg_tensor_describe(v3, line, sizeof(line)));
    printf("v3 reads %g %g: offsets 4 + 4 + 8 = 16 bytes into m\n", (double) mg_get_f32_1d(v3, 0),
           (double) mg_get_f32_1d(v3, 1));
}

static void quantize_a_row(struct mg_context * ctx) {
    printf("\n== 32 floats in Q4_0: one F16 scale and 32 four-bit codes ==\n");
    float x[32];
    for (int i = 0; i < 32; i++) x[i] = sinf((float) i * 0.4f) * 3.0f;

    struct mg_tensor * q = mg_set_name(mg_new_tensor_1d(ctx, MG_TYPE_Q4_0, 32), "q");
    mg_quantize_row_q4_0_ref(x, q->data, 32);
    const struct mg_block_q4_0 * b = q->data;
    char line[256];
    printf("%s\n", mg_tensor_describe(q, line, sizeof(line)));
    printf("d = %.6f (half 0x%04x); codes:", (double) mg_fp16_to_fp32(b->d), b->d);
    for (int j = 0; j < 32; j++) printf(" %d", j < 16 ? b->qs[j] & 15 : b->qs[j - 16] >> 4);
    printf("\n");

    float y[32], max_err = 0.0f;
    mg_dequantize_row_q4_0(q->data, y, 32);
    for (int i = 0; i < 32; i++) max_err = fmaxf(max_err, fabsf(x[i] - y[i]));
    printf("x[0..3]  = %.4f %.4f %.4f %.4f\n", (double) x[0], (double) x[1], (double) x[2], (double) x[3]);
    printf("back     = %.4f %.4f %.4f %.4f\n", (double) y[0], (double) y[1], (double) y[2], (double) y[3]);
    // Codes run -8..7: the side of the largest |x| fits exactly, the other side
    // can lose a whole step to the clamp at 7, so the bound is |d|, not |d|/2.
    printf("max error %.4f (at most one step |d| = %.4f)\n", (double) max_err, (double) fabsf(mg_fp16_to_fp32(b->d)));
    printf("%zu bytes -> %zu bytes: %.1fx smaller, %.1f bits per weight\n", sizeof(x), mg_nbytes(q),
           (double) sizeof(x) / (double) mg_nbytes(q), 8.0 * (double) mg_nbytes(q) / 32.0);

    struct mg_tensor * q8 = mg_set_name(mg_new_tensor_1d(ctx, MG_TYPE_Q8_0, 32), "q8");
    mg_quantize_row_q8_0_ref(x, q8->data, 32);
    mg_dequantize_row_q8_0(q8->data, y, 32);
    max_err = 0.0f;
    for (int i = 0; i < 32; i++) max_err = fmaxf(max_err, fabsf(x[i] - y[i]));
    printf("the same row in Q8_0: %zu bytes, max error %.4f\n", mg_nbytes(q8), (double) max_err);
}

int main(void) {
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 64 * 1024});
    matrix_and_transpose(ctx);
    quantize_a_row(ctx);
    mg_free(ctx);
    return 0;
}
