// Generated from full/demos/03_lazy.c by tools/chapgen. In a class, edit this copy freely (make chapters will not overwrite your edits); to change the engine, edit full/demos/03_lazy.c and run make chapters.
// Chapter 03 demo: build relu(W x + b) once, compute it for three inputs.
#include "mg.h"

#include <stdio.h>

static void print_row(const char * label, const struct mg_tensor * t) {
    printf("%-8s", label);
    for (int64_t i = 0; i < mg_nelements(t); i++) printf(" %7.3f", (double) mg_get_f32_1d(t, i));
    printf("\n");
}

int main(void) {
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 256 * 1024});

    // W: 2 rows of 3 (a layer from 3 inputs to 2 outputs), x: 3 inputs, b: 2 biases.
    struct mg_tensor * W = mg_set_name(mg_new_tensor_2d(ctx, MG_TYPE_F32, 3, 2), "W");
    struct mg_tensor * x = mg_set_name(mg_new_tensor_1d(ctx, MG_TYPE_F32, 3), "x");
    struct mg_tensor * b = mg_set_name(mg_new_tensor_1d(ctx, MG_TYPE_F32, 2), "b");
    const float w_values[6] = {1, -1, 0.5f, -2, 1, 1};
    for (int i = 0; i < 6; i++) mg_set_f32_1d(W, i, w_values[i]);
    mg_set_f32_1d(b, 0, 0.5f);
    mg_set_f32_1d(b, 1, -1.0f);

    printf("== Building: each call records an op, computes nothing ==\n");
    struct mg_tensor * wx  = mg_set_name(mg_mul_mat(ctx, W, x), "wx");
    struct mg_tensor * h   = mg_set_name(mg_add(ctx, wx, b), "wx+b");
    struct mg_tensor * out = mg_set_name(mg_relu(ctx, h), "out");
    char line[256];
    for (const struct mg_tensor * t = out; t != NULL; t = t->src[0]) {
        printf("%-50s data: %s\n", mg_tensor_describe(t, line, sizeof(line)), t->data ? "yes" : "not yet");
    }

    printf("\n== Computing: the same three nodes, three different x ==\n");
    const float xs[3][3] = {{1, 2, 3}, {-1, 0, 1}, {0.5f, 0.5f, -4}};
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < 3; i++) mg_set_f32_1d(x, i, xs[k][i]);
        mg_compute(ctx, out);
        print_row("x", x);
        print_row("wx", wx);
        print_row("wx+b", h);
        print_row("out", out);
        printf("\n");
    }
    printf("nodes built: 3; computes: 3; rebuilt: 0\n");
    mg_free(ctx);
    return 0;
}
