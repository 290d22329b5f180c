// test_plan.c - the graph plan: how many shares each node is split into and
// how big the one shared work buffer must be.
//
// The scratch a node needs, worked out by hand from what its kernel keeps
// there (compute.c):
//   mul_mat with weights whose vec_dot_type is not F32 (F16, Q8_0, Q4_0):
//       every row of the activations converted to that type,
//       row_size(vec_dot_type, K) * rows of b;  F32 weights: nothing;
//   soft_max: one row of floats per share, each followed by a cache line,
//       n_tasks * (ne0 * 4 + 64);
//   everything else: nothing.
// Nodes run one after another, so they share one buffer: the plan asks for
// the largest need, not the sum, plus one cache line per thread so that each
// share's slice can start on its own line.
#include "harness.h"
#include "mg.h"

#include <stdlib.h>

static struct mg_tensor * weights(struct mg_context * ctx, enum mg_type type, int64_t k, int64_t m, uint64_t seed) {
    struct mg_tensor * w = mg_new_tensor_2d(ctx, type, k, m);
    float *            f = malloc(sizeof(float) * (size_t) (k * m));
    uint64_t rng = seed;
    mg_test_fill_uniform(f, (size_t) (k * m), &rng, -1.0f, 1.0f);
    if (type == MG_TYPE_F32) memcpy(w->data, f, sizeof(float) * (size_t) (k * m));
    else mg_get_type_traits(type)->from_float(f, w->data, k * m);
    free(f);
    return w;
}

struct planned {
    struct mg_context * ctx;
    struct mg_cgraph *  g;
    struct mg_tensor *  mm_f32, * mm_f16, * mm_q8, * mm_q4, * sm, * add;
};

// x {64, 5}; four matmuls (F32, F16, Q8_0, Q4_0 weights {64, 16}); a softmax
// of the F32 one ({16, 5}); an add.
static struct planned planned_graph(void) {
    struct planned p;
    p.ctx = mg_init((struct mg_init_params) {.mem_size = 4 * 1024 * 1024});
    struct mg_tensor * x = mg_new_tensor_2d(p.ctx, MG_TYPE_F32, 64, 5);
    uint64_t rng = 1;
    mg_test_fill_uniform(x->data, 64 * 5, &rng, -1.0f, 1.0f);
    p.mm_f32 = mg_mul_mat(p.ctx, weights(p.ctx, MG_TYPE_F32, 64, 16, 2), x);
    p.mm_f16 = mg_mul_mat(p.ctx, weights(p.ctx, MG_TYPE_F16, 64, 16, 3), x);
    p.mm_q8  = mg_mul_mat(p.ctx, weights(p.ctx, MG_TYPE_Q8_0, 64, 16, 4), x);
    p.mm_q4  = mg_mul_mat(p.ctx, weights(p.ctx, MG_TYPE_Q4_0, 64, 16, 5), x);
    p.sm     = mg_soft_max(p.ctx, p.mm_f32);
    p.add    = mg_add(p.ctx, mg_add(p.ctx, mg_add(p.ctx, p.sm, p.mm_f16), p.mm_q8), p.mm_q4);
    p.g      = mg_new_graph(p.ctx);
    mg_build_forward_expand(p.g, p.add);
    return p;
}

START_TEST(test_node_work_sizes_by_hand) {
    struct planned p = planned_graph();
    ck_assert_uint_eq(mg_node_work_size(p.mm_f32, 3), 0);              // F32 rows are used as they are
    ck_assert_uint_eq(mg_node_work_size(p.mm_f16, 3), 64 * 2 * 5);     // 5 rows of 64 halves
    ck_assert_uint_eq(mg_node_work_size(p.mm_q8, 3), 2 * 34 * 5);      // 5 rows of two 34-byte Q8_0 blocks
    ck_assert_uint_eq(mg_node_work_size(p.mm_q4, 3), 2 * 34 * 5);      // Q4_0 meets Q8_0 activations
    ck_assert_uint_eq(mg_node_work_size(p.sm, 3), 3 * (16 * 4 + 64));  // a row and a cache line per share
    ck_assert_uint_eq(mg_node_work_size(p.sm, 1), 1 * (16 * 4 + 64));
    ck_assert_uint_eq(mg_node_work_size(p.add, 3), 0);
    mg_free(p.ctx);
}
END_TEST

START_TEST(test_work_size_is_the_max_plus_padding) {
    struct planned p = planned_graph();
    struct mg_cplan plan = mg_graph_plan(p.g, 3);
    ck_assert_int_eq(plan.n_threads, 3);
    // max(0, 640, 340, 340, 384) = 640 (the F16 matmul), + 3 cache lines.
    ck_assert_uint_eq(plan.work_size, 640 + 3 * 64);
    // (The sum would be 640 + 340 + 340 + 384 = 1704.)
    plan = mg_graph_plan(p.g, 1);
    ck_assert_uint_eq(plan.work_size, 640 + 64);
    mg_free(p.ctx);
}
END_TEST

// A wide softmax overtakes the matmuls, and its need grows with the shares.
START_TEST(test_work_size_follows_the_biggest_node) {
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 4 * 1024 * 1024});
    struct mg_tensor *  x   = mg_new_tensor_2d(ctx, MG_TYPE_F32, 64, 2);
    struct mg_tensor *  s   = mg_new_tensor_2d(ctx, MG_TYPE_F32, 300, 2);
    struct mg_tensor *  out = mg_add(ctx, mg_soft_max(ctx, s),
                                     mg_sum_rows(ctx, mg_mul_mat(ctx, weights(ctx, MG_TYPE_Q8_0, 64, 8, 1), x)));
    struct mg_cgraph * g = mg_new_graph(ctx);
    mg_build_forward_expand(g, out);
    for (int n = 1; n <= 4; n++) {
        const struct mg_cplan plan = mg_graph_plan(g, n);
        ck_assert_uint_eq(plan.work_size, (size_t) n * (300 * 4 + 64) + (size_t) n * 64);
    }
    mg_free(ctx);
}
END_TEST

START_TEST(test_no_scratch_no_work_buffer) {
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 1024 * 1024});
    struct mg_tensor *  x   = mg_new_tensor_2d(ctx, MG_TYPE_F32, 8, 3);
    struct mg_tensor *  out = mg_relu(ctx, mg_add(ctx, mg_mul_mat(ctx, weights(ctx, MG_TYPE_F32, 8, 4, 1), x),
                                                  mg_new_tensor_1d(ctx, MG_TYPE_F32, 4)));
    struct mg_cgraph * g = mg_new_graph(ctx);
    mg_build_forward_expand(g, out);
    for (int n = 1; n <= 4; n++) ck_assert_uint_eq(mg_graph_plan(g, n).work_size, 0);
    mg_free(ctx);
}
END_TEST

// Views compute nothing: one task. Ops are split into one share per thread.
START_TEST(test_views_are_one_task) {
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 1024 * 1024});
    struct mg_tensor *  x   = mg_new_tensor_2d(ctx, MG_TYPE_F32, 8, 3);
    ck_assert_int_eq(mg_node_n_tasks(mg_transpose(ctx, x), 4), 1);
    ck_assert_int_eq(mg_node_n_tasks(mg_reshape_1d(ctx, x, 24), 4), 1);
    ck_assert_int_eq(mg_node_n_tasks(mg_view_1d(ctx, x, 8, 0), 4), 1);
    ck_assert_int_eq(mg_node_n_tasks(mg_permute(ctx, x, 1, 0, 2, 3), 4), 1);
    ck_assert_int_eq(mg_node_n_tasks(mg_relu(ctx, x), 4), 4);
    ck_assert_int_eq(mg_node_n_tasks(mg_relu(ctx, x), 1), 1);
    mg_free(ctx);
}
END_TEST

// The need of a node by the rules at the top of this file.
static size_t expected_need(const struct mg_tensor * node, int n_tasks) {
    if (node->op == MG_OP_SOFT_MAX) return (size_t) n_tasks * ((size_t) node->ne[0] * 4 + 64);
    if (node->op != MG_OP_MUL_MAT) return 0;
    const int64_t k = node->src[1]->ne[0], rows = mg_nrows(node->src[1]);
    switch (node->src[0]->type) {
        case MG_TYPE_F16:  return (size_t) (k * 2 * rows);
        case MG_TYPE_Q8_0:
        case MG_TYPE_Q4_0: return (size_t) (k / 32 * 34 * rows);
        default:           return 0;
    }
}

// On random layer stacks: each node's need follows the rules, and the plan
// is the max of the needs, each with its node's task count, plus the padding.
START_TEST(test_work_size_is_max_on_random_graphs) {
    static const enum mg_type types[4] = {MG_TYPE_F32, MG_TYPE_F16, MG_TYPE_Q8_0, MG_TYPE_Q4_0};
    for (uint64_t seed = 1; seed <= 50; seed++) {
        uint64_t rng = seed;
        struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 16 * 1024 * 1024});
        const int64_t batch = 1 + (int64_t) (mg_test_rand_u64(&rng) % 6);
        int64_t       width = 32 * (1 + (int64_t) (mg_test_rand_u64(&rng) % 4));
        struct mg_tensor * cur = mg_new_tensor_2d(ctx, MG_TYPE_F32, width, batch);
        const int n_layers = 2 + (int) (mg_test_rand_u64(&rng) % 4);
        for (int l = 0; l < n_layers; l++) {
            const int64_t next = 32 * (1 + (int64_t) (mg_test_rand_u64(&rng) % 6));
            const enum mg_type type = types[mg_test_rand_u64(&rng) % 4];
            cur = mg_mul_mat(ctx, weights(ctx, type, width, next, seed + (uint64_t) l), cur);
            if (mg_test_rand_u64(&rng) % 2) cur = mg_soft_max(ctx, cur);
            else cur = mg_silu(ctx, cur);
            width = next;
        }
        struct mg_cgraph * g = mg_new_graph(ctx);
        mg_build_forward_expand(g, cur);
        for (int n = 1; n <= 4; n++) {
            size_t max = 0;
            for (int i = 0; i < g->n_nodes; i++) {
                const int    n_tasks = mg_node_n_tasks(g->nodes[i], n);
                const size_t w       = mg_node_work_size(g->nodes[i], n_tasks);
                ck_assert_uint_eq(w, expected_need(g->nodes[i], n_tasks));
                max = w > max ? w : max;
            }
            const struct mg_cplan plan = mg_graph_plan(g, n);
            ck_assert_uint_eq(plan.work_size, max > 0 ? max + (size_t) n * MG_CACHE_LINE : 0);
        }
        mg_free(ctx);
    }
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("plan");
    MG_TCASE(s, "work_size", test_node_work_sizes_by_hand, test_work_size_is_the_max_plus_padding,
                test_work_size_follows_the_biggest_node, test_no_scratch_no_work_buffer, test_views_are_one_task,
                test_work_size_is_max_on_random_graphs);
    return s;
}
