// Generated from full/demos/07_scratch.c by tools/chapgen. In a class, edit this copy freely (make chapters will not overwrite your edits); to change the engine, edit full/demos/07_scratch.c and run make chapters.
// Chapter 07 demo: a network with F16, Q8_0 and Q4_0 weights. Its matmuls
// convert their activations in a shared work buffer, planned once as the max
// over nodes; and their results stay close to a plain F32 computation.
#include "mg.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { N_IN = 256, N_HIDDEN = 512, N_OUT = 64, N_BATCH = 8 };

// A weight matrix of the given type holding the values of an F32 matrix.
static struct mg_tensor * weights_as(struct mg_context * ctx, const struct mg_tensor * w32, enum mg_type type,
                                     const char * name) {
    struct mg_tensor * w = mg_set_name(mg_new_tensor_2d(ctx, type, w32->ne[0], w32->ne[1]), name);
    const struct mg_type_traits * tt = mg_get_type_traits(type);
    for (int64_t r = 0; r < w32->ne[1]; r++) {
        tt->from_float((const float *) ((const char *) w32->data + r * w32->nb[1]), (char *) w->data + r * w->nb[1],
                       w32->ne[0]);
    }
    return w;
}

// The same weights decoded back to F32: what an engine that dequantizes would multiply.
static struct mg_tensor * decoded(struct mg_context * ctx, const struct mg_tensor * w) {
    struct mg_tensor * d = mg_new_tensor_2d(ctx, MG_TYPE_F32, w->ne[0], w->ne[1]);
    for (int64_t r = 0; r < w->ne[1]; r++) {
        mg_get_type_traits(w->type)->to_float((const char *) w->data + r * w->nb[1],
                                              (float *) ((char *) d->data + r * d->nb[1]), w->ne[0]);
    }
    return d;
}

static struct mg_tensor * random_f32(struct mg_context * ctx, int64_t ne0, int64_t ne1, float scale) {
    struct mg_tensor * t = mg_new_tensor_2d(ctx, MG_TYPE_F32, ne0, ne1);
    for (int64_t i = 0; i < mg_nelements(t); i++) mg_set_f32_1d(t, i, scale * ((float) rand() / (float) RAND_MAX - 0.5f));
    return t;
}

static struct mg_tensor * network(struct mg_context * ctx, struct mg_tensor * x, struct mg_tensor * w1,
                                  struct mg_tensor * w2, struct mg_tensor * w3) {
    struct mg_tensor * h = mg_silu(ctx, mg_mul_mat(ctx, w1, x));
    h = mg_rms_norm(ctx, mg_mul_mat(ctx, w2, h), 1e-6f);
    return mg_soft_max(ctx, mg_mul_mat(ctx, w3, h));
}

int main(void) {
    srand(7);
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 64 * 1024 * 1024});
    struct mg_tensor * x = mg_set_name(random_f32(ctx, N_IN, N_BATCH, 2.0f), "x");
    struct mg_tensor * w1 = weights_as(ctx, random_f32(ctx, N_IN, N_HIDDEN, 0.2f), MG_TYPE_F16, "w1 (f16)");
    struct mg_tensor * w2 = weights_as(ctx, random_f32(ctx, N_HIDDEN, N_IN, 0.2f), MG_TYPE_Q8_0, "w2 (q8_0)");
    struct mg_tensor * w3 = weights_as(ctx, random_f32(ctx, N_IN, N_OUT, 0.2f), MG_TYPE_Q4_0, "w3 (q4_0)");

    printf("== The plan: scratch bytes per node, and the one buffer they share ==\n");
    struct mg_tensor * out = mg_set_name(network(ctx, x, w1, w2, w3), "out");
    struct mg_cgraph * g   = mg_new_graph(ctx);
    mg_build_forward_expand(g, out);
    const int n_threads = 2;
    struct mg_cplan plan = mg_graph_plan(g, n_threads);
    size_t sum = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        sum += mg_node_work_size(g->nodes[i], mg_node_n_tasks(g->nodes[i], n_threads));
    }
    printf("work buffer %zu bytes for %d nodes; giving each node its own would take %zu\n", plan.work_size,
           g->n_nodes, sum);

    mg_graph_compute_with_ctx(ctx, g, n_threads);

    printf("\n== Quantized matmuls against F32 matmuls of the decoded weights ==\n");
    struct mg_tensor * ref   = network(ctx, x, decoded(ctx, w1), decoded(ctx, w2), decoded(ctx, w3));
    struct mg_cgraph * g_ref = mg_new_graph(ctx);
    mg_build_forward_expand(g_ref, ref);
    mg_graph_compute_with_ctx(ctx, g_ref, n_threads);
    float max_diff = 0.0f, max_p = 0.0f;
    for (int64_t i = 0; i < mg_nelements(out); i++) {
        max_diff = fmaxf(max_diff, fabsf(mg_get_f32_1d(out, i) - mg_get_f32_1d(ref, i)));
        max_p    = fmaxf(max_p, mg_get_f32_1d(ref, i));
    }
    printf("output probabilities: max %.4f, largest difference %.2e\n", (double) max_p, (double) max_diff);
    printf("(the difference is the rounding of the activations to F16 and Q8_0 before each dot product)\n");
    mg_free(ctx);
    return 0;
}
