// Generated from full/demos/04_graph.c by tools/chapgen. In a class, edit this copy freely (make chapters will not overwrite your edits); to change the engine, edit full/demos/04_graph.c and run make chapters.
// Chapter 04 demo: the graph of relu(W x + b) - its order, its table, its
// drawing - and a bigger graph to draw: a two-layer MLP.
#include "mg.h"

#include <stdio.h>

static void relu_layer(struct mg_context * ctx) {
    struct mg_tensor * W = mg_set_name(mg_new_tensor_2d(ctx, MG_TYPE_F32, 3, 2), "W");
    struct mg_tensor * x = mg_set_name(mg_new_tensor_1d(ctx, MG_TYPE_F32, 3), "x");
    struct mg_tensor * b = mg_set_name(mg_new_tensor_1d(ctx, MG_TYPE_F32, 2), "b");
    const float w_values[6] = {1, -1, 0.5f, -2, 1, 1};
    const float x_values[3] = {1, 2, 3};
    for (int i = 0; i < 6; i++) mg_set_f32_1d(W, i, w_values[i]);
    for (int i = 0; i < 3; i++) mg_set_f32_1d(x, i, x_values[i]);
    mg_set_f32_1d(b, 0, 0.5f);
    mg_set_f32_1d(b, 1, -1.0f);

    struct mg_tensor * out = mg_relu(ctx, mg_add(ctx, mg_mul_mat(ctx, W, x), b));
    mg_set_name(out, "out");
    mg_set_name(out->src[0], "wx+b");
    mg_set_name(out->src[0]->src[0], "wx");

    printf("== relu(W x + b): depth-first from out, inputs before users ==\n");
    struct mg_cgraph * g = mg_new_graph(ctx);
    mg_build_forward_expand(g, out);
    printf("order:");
    // Leafs and nodes were appended as the walk met them; replaying the walk's
    // rule (all inputs of a node, then the node) gives the full order.
    for (int i = 0; i < g->n_nodes; i++) {
        const struct mg_tensor * node = g->nodes[i];
        for (int j = 0; j < MG_MAX_SRC; j++) {
            if (node->src[j] != NULL && node->src[j]->op == MG_OP_NONE) printf(" %s,", node->src[j]->name);
        }
        printf(" %s%s", node->name, i + 1 < g->n_nodes ? "," : "\n");
    }
    mg_graph_print(stdout, g);

    mg_graph_compute_with_ctx(ctx, g, 1);
    printf("out = [%g, %g]\n", (double) mg_get_f32_1d(out, 0), (double) mg_get_f32_1d(out, 1));
    mg_graph_dump_dot_env(g, "relu");
}

// x -> relu(W1 x + b1) -> W2 . + b2 -> softmax, for 4 inputs at once.
static void two_layer_mlp(struct mg_context * ctx) {
    printf("\n== A two-layer MLP with a shared input: every tensor once ==\n");
    const int n_in = 8, n_hidden = 16, n_out = 4, n_batch = 4;
    struct mg_tensor * x  = mg_set_name(mg_new_tensor_2d(ctx, MG_TYPE_F32, n_in, n_batch), "x");
    struct mg_tensor * W1 = mg_set_name(mg_new_tensor_2d(ctx, MG_TYPE_F32, n_in, n_hidden), "W1");
    struct mg_tensor * b1 = mg_set_name(mg_new_tensor_1d(ctx, MG_TYPE_F32, n_hidden), "b1");
    struct mg_tensor * W2 = mg_set_name(mg_new_tensor_2d(ctx, MG_TYPE_F32, n_hidden, n_out), "W2");
    struct mg_tensor * b2 = mg_set_name(mg_new_tensor_1d(ctx, MG_TYPE_F32, n_out), "b2");
    struct mg_tensor * leaves[] = {x, W1, b1, W2, b2};
    for (int k = 0; k < 5; k++) {
        for (int64_t i = 0; i < mg_nelements(leaves[k]); i++) mg_set_f32_1d(leaves[k], i, 0.1f * (float) ((i * 7 + k) % 5 - 2));
    }
    struct mg_tensor * h1     = mg_set_name(mg_relu(ctx, mg_add(ctx, mg_mul_mat(ctx, W1, x), b1)), "h1");
    struct mg_tensor * logits = mg_set_name(mg_add(ctx, mg_mul_mat(ctx, W2, h1), b2), "logits");
    struct mg_tensor * probs  = mg_set_name(mg_soft_max(ctx, logits), "probs");
    // A second result that shares h1: the graph holds h1 once, used twice.
    struct mg_tensor * energy = mg_set_name(mg_sum_rows(ctx, mg_sqr(ctx, h1)), "energy");

    struct mg_cgraph * g = mg_new_graph(ctx);
    mg_build_forward_expand(g, probs);
    mg_build_forward_expand(g, energy);
    mg_graph_print(stdout, g);
    printf("h1 is read by %d nodes\n", mg_graph_use_count(g, h1));
    mg_graph_compute_with_ctx(ctx, g, 1);
    printf("probs of the first input: %.4f %.4f %.4f %.4f\n", (double) mg_get_f32_nd(probs, 0, 0, 0, 0),
           (double) mg_get_f32_nd(probs, 1, 0, 0, 0), (double) mg_get_f32_nd(probs, 2, 0, 0, 0),
           (double) mg_get_f32_nd(probs, 3, 0, 0, 0));
    mg_graph_dump_dot_env(g, "mlp");
}

int main(void) {
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 4 * 1024 * 1024});
    relu_layer(ctx);
    two_layer_mlp(ctx);
    mg_free(ctx);
    return 0;
}
