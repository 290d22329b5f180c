// Generated from full/demos/05_galloc.c by tools/chapgen. In a class, edit this copy freely (make chapters will not overwrite your edits); to change the engine, edit full/demos/05_galloc.c and run make chapters.
// Chapter 05 demo: plan the compute buffer of relu(W x + b), then of a deep
// MLP, and compare the peak with what giving every result its own bytes costs.
#include "mg.h"

#include <stdio.h>
#include <stdlib.h>

struct relu_layer {
    struct mg_tensor * W, * x, * b, * out;
};

// relu(W x + b) with W 2x2, so that every intermediate result is 2 floats.
static struct relu_layer build_relu_layer(struct mg_context * ctx) {
    struct relu_layer l;
    l.W = mg_set_name(mg_new_tensor_2d(ctx, MG_TYPE_F32, 2, 2), "W");
    l.x = mg_set_name(mg_new_tensor_1d(ctx, MG_TYPE_F32, 2), "x");
    l.b = mg_set_name(mg_new_tensor_1d(ctx, MG_TYPE_F32, 2), "b");
    const float w[4] = {1, -2, 3, 0.5f}, x[2] = {1, 2}, b[2] = {-1, 1};
    for (int i = 0; i < 4; i++) mg_set_f32_1d(l.W, i, w[i]);
    for (int i = 0; i < 2; i++) mg_set_f32_1d(l.x, i, x[i]);
    for (int i = 0; i < 2; i++) mg_set_f32_1d(l.b, i, b[i]);
    struct mg_tensor * wx = mg_set_name(mg_mul_mat(ctx, l.W, l.x), "wx");
    struct mg_tensor * h  = mg_set_name(mg_add(ctx, wx, l.b), "wx+b");
    l.out = mg_set_name(mg_relu(ctx, h), "out");
    return l;
}

static void plan_relu_layer(struct mg_context * ctx, bool reuse_parent) {
    struct relu_layer  l = build_relu_layer(ctx);
    struct mg_cgraph * g = mg_new_graph(ctx);
    mg_build_forward_expand(g, l.out);

    // Alignment 4 (one float) keeps the numbers small enough to follow by hand;
    // the CPU default is MG_GALLOC_DEFAULT_ALIGN.
    struct mg_gallocr * ga = mg_gallocr_new(4);
    mg_gallocr_set_reuse_parent(ga, reuse_parent);
    mg_gallocr_alloc_graph(ga, g);
    mg_gallocr_dump_svg_env(ga, g, reuse_parent ? "relu-reuse-on" : "relu-reuse-off");   // MG_SVG=dir: the memory map
    printf("peak %zu bytes, where one buffer per result would need %zu\n", mg_gallocr_get_buffer_size(ga),
           mg_gallocr_get_sum_size(ga));

    mg_graph_compute_with_ctx(ctx, g, 1);   // the data is placed already: only runs
    printf("out = [%g, %g]\n", (double) mg_get_f32_1d(l.out, 0), (double) mg_get_f32_1d(l.out, 1));
    mg_gallocr_free(ga);
}

// An n_layers-deep MLP on a batch: every layer's results die as soon as the
// next layer has read them, so the peak stays at about two layers' worth.
static void plan_deep_mlp(struct mg_context * ctx, int n_layers, int width, int batch, bool reuse_parent) {
    struct mg_tensor * cur = mg_set_name(mg_new_tensor_2d(ctx, MG_TYPE_F32, width, batch), "x");
    for (int64_t i = 0; i < mg_nelements(cur); i++) mg_set_f32_1d(cur, i, 0.01f * (float) (i % 13));
    for (int l = 0; l < n_layers; l++) {
        struct mg_tensor * W = mg_format_name(mg_new_tensor_2d(ctx, MG_TYPE_F32, width, width), "W%d", l);
        struct mg_tensor * b = mg_format_name(mg_new_tensor_1d(ctx, MG_TYPE_F32, width), "b%d", l);
        for (int64_t i = 0; i < mg_nelements(W); i++) mg_set_f32_1d(W, i, 0.001f * (float) ((i * 31 + l) % 17) - 0.008f);
        for (int64_t i = 0; i < width; i++) mg_set_f32_1d(b, i, 0.01f);
        cur = mg_format_name(mg_relu(ctx, mg_add(ctx, mg_mul_mat(ctx, W, cur), b)), "h%d", l);
    }
    struct mg_cgraph * g = mg_new_graph(ctx);
    mg_build_forward_expand(g, cur);
    struct mg_gallocr * ga = mg_gallocr_new(0);
    mg_gallocr_set_reuse_parent(ga, reuse_parent);
    mg_gallocr_reserve(ga, g);
    mg_gallocr_dump_svg_env(ga, g, reuse_parent ? "mlp-reuse-on" : "mlp-reuse-off");
    const size_t peak = mg_gallocr_get_buffer_size(ga), sum = mg_gallocr_get_sum_size(ga);
    printf("%d layers x %d wide x batch %d, parent reuse %-3s: %d results, sum %7zu bytes, peak %6zu bytes (%.1fx less)\n",
           n_layers, width, batch, reuse_parent ? "on" : "off", g->n_nodes, sum, peak, (double) sum / (double) peak);
    mg_gallocr_free(ga);
}

int main(void) {
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 16 * 1024 * 1024});

    printf("== relu(W x + b): the plain allocator (parent reuse off) ==\n");
    plan_relu_layer(ctx, false);

    printf("\n== The same with ggml's parent reuse: W x + b is written over W x ==\n");
    plan_relu_layer(ctx, true);

    mg_trace_set("");   // the deep MLP would print hundreds of lines
    printf("\n== A deeper MLP: the peak against the sum of all results ==\n");
    plan_deep_mlp(ctx, 8, 256, 32, false);
    plan_deep_mlp(ctx, 8, 256, 32, true);
    mg_free(ctx);
    return 0;
}
