// test_ex2_graph_cost.c - chapter 04, exercise 2: what a graph costs.
//
//     int     mg_graph_count_op(const struct mg_cgraph * g, enum mg_op op);  // nodes with this op
//     int64_t mg_graph_mul_adds(const struct mg_cgraph * g);   // sum over MUL_MAT nodes of
//                                                               // src[0]->ne[0] * elements of the result
//
// Graded by `make grade`; the functions are declared weak (see test_ex1_sigmoid.c).
// Checked on the lesson's MLP (768, worked out by hand in the README), on
// graphs whose last node (the root) is a matmul, which a loop that stops one
// node short misses, and on random graphs whose cost this test tallies itself
// while building them.
#include "harness.h"
#include "mg.h"

int     mg_graph_count_op(const struct mg_cgraph * g, enum mg_op op) __attribute__((weak));
int64_t mg_graph_mul_adds(const struct mg_cgraph * g) __attribute__((weak));

static struct mg_context * new_ctx(void) {
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 16 * 1024 * 1024});
    ck_assert_ptr_nonnull(ctx);
    return ctx;
}

static void require_functions(void) {
    ck_assert_msg(mg_graph_count_op != NULL, "mg_graph_count_op is not defined yet (graph.c, declared in graph.h)");
    ck_assert_msg(mg_graph_mul_adds != NULL, "mg_graph_mul_adds is not defined yet (graph.c, declared in graph.h)");
}

START_TEST(functions_exist) {
    require_functions();
}
END_TEST

// The MLP of the lesson: x {8, 4}, h1 = relu(W1 x + b1) with W1 {8, 16}, out = soft_max(W2 h1), W2 {16, 4}.
START_TEST(the_lessons_mlp_costs_768) {
    require_functions();
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * x  = mg_new_tensor_2d(ctx, MG_TYPE_F32, 8, 4);
    struct mg_tensor * W1 = mg_new_tensor_2d(ctx, MG_TYPE_F32, 8, 16);
    struct mg_tensor * b1 = mg_new_tensor_1d(ctx, MG_TYPE_F32, 16);
    struct mg_tensor * W2 = mg_new_tensor_2d(ctx, MG_TYPE_F32, 16, 4);
    struct mg_tensor * h1 = mg_relu(ctx, mg_add(ctx, mg_mul_mat(ctx, W1, x), b1));
    struct mg_tensor * out = mg_soft_max(ctx, mg_mul_mat(ctx, W2, h1));
    struct mg_cgraph * g = mg_new_graph(ctx);
    mg_build_forward_expand(g, out);
    ck_assert_int_eq(mg_graph_mul_adds(g), 8 * 16 * 4 + 16 * 4 * 4);
    ck_assert_int_eq(mg_graph_count_op(g, MG_OP_MUL_MAT), 2);
    ck_assert_int_eq(mg_graph_count_op(g, MG_OP_ADD), 1);
    ck_assert_int_eq(mg_graph_count_op(g, MG_OP_RELU), 1);
    ck_assert_int_eq(mg_graph_count_op(g, MG_OP_SOFT_MAX), 1);
    ck_assert_int_eq(mg_graph_count_op(g, MG_OP_NONE), 0);   // leafs are not nodes
    ck_assert_int_eq(mg_graph_count_op(g, MG_OP_GELU), 0);
    mg_free(ctx);
}
END_TEST

// The root is the last node of the graph: a loop that stops one short
// (i < g->n_nodes - 1) misses it. Here the root is the matmul itself.
START_TEST(the_root_matmul_is_counted) {
    require_functions();
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * a  = mg_new_tensor_2d(ctx, MG_TYPE_F32, 32, 8);
    struct mg_tensor * b  = mg_new_tensor_2d(ctx, MG_TYPE_F32, 32, 5);
    struct mg_tensor * ab = mg_mul_mat(ctx, a, b);   // {8, 5}: 32 * 40 = 1280, the only node
    struct mg_cgraph * g = mg_new_graph(ctx);
    mg_build_forward_expand(g, ab);
    ck_assert_int_eq(g->n_nodes, 1);
    ck_assert_msg(mg_graph_mul_adds(g) == 1280, "one matmul, the only node: %lld multiply-adds, expected 1280",
                  (long long) mg_graph_mul_adds(g));
    ck_assert_msg(mg_graph_count_op(g, MG_OP_MUL_MAT) == 1, "one matmul, the only node: %d MUL_MAT nodes, expected 1",
                  mg_graph_count_op(g, MG_OP_MUL_MAT));

    // The lesson's MLP without its soft_max: the logits W2 h1 are the root, the last node.
    struct mg_tensor * x  = mg_new_tensor_2d(ctx, MG_TYPE_F32, 8, 4);
    struct mg_tensor * W1 = mg_new_tensor_2d(ctx, MG_TYPE_F32, 8, 16);
    struct mg_tensor * b1 = mg_new_tensor_1d(ctx, MG_TYPE_F32, 16);
    struct mg_tensor * W2 = mg_new_tensor_2d(ctx, MG_TYPE_F32, 16, 4);
    struct mg_tensor * logits = mg_mul_mat(ctx, W2, mg_relu(ctx, mg_add(ctx, mg_mul_mat(ctx, W1, x), b1)));
    struct mg_cgraph * g2 = mg_new_graph(ctx);
    mg_build_forward_expand(g2, logits);
    ck_assert_ptr_eq(g2->nodes[g2->n_nodes - 1], logits);
    ck_assert_msg(mg_graph_mul_adds(g2) == 768, "the MLP's logits (a matmul, the last node): %lld multiply-adds, "
                  "expected 512 + 256 = 768", (long long) mg_graph_mul_adds(g2));
    ck_assert_msg(mg_graph_count_op(g2, MG_OP_MUL_MAT) == 2, "the MLP's logits: %d MUL_MAT nodes, expected 2",
                  mg_graph_count_op(g2, MG_OP_MUL_MAT));
    mg_free(ctx);
}
END_TEST

// A node reached along two paths is one node: counted once.
START_TEST(a_shared_node_is_counted_once) {
    require_functions();
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * a  = mg_new_tensor_2d(ctx, MG_TYPE_F32, 32, 8);
    struct mg_tensor * b  = mg_new_tensor_2d(ctx, MG_TYPE_F32, 32, 5);
    struct mg_tensor * ab = mg_mul_mat(ctx, a, b);              // {8, 5}: 32 * 40 = 1280
    struct mg_tensor * y  = mg_add(ctx, ab, mg_relu(ctx, ab));  // ab read twice
    struct mg_cgraph * g = mg_new_graph(ctx);
    mg_build_forward_expand(g, y);
    mg_build_forward_expand(g, ab);   // expanding it again adds nothing
    ck_assert_int_eq(mg_graph_mul_adds(g), 1280);
    ck_assert_int_eq(mg_graph_count_op(g, MG_OP_MUL_MAT), 1);
    mg_free(ctx);
}
END_TEST

// Batched matmuls (dims 2 and 3) and views: a view costs nothing and is not a MUL_MAT.
START_TEST(batched_matmul_and_views) {
    require_functions();
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * k  = mg_new_tensor_3d(ctx, MG_TYPE_F32, 16, 6, 2);   // 2 heads of 6 rows
    struct mg_tensor * q  = mg_new_tensor_3d(ctx, MG_TYPE_F32, 16, 3, 4);   // 4 heads: 2 per k head
    struct mg_tensor * kq = mg_mul_mat(ctx, k, q);                          // {6, 3, 4}
    struct mg_tensor * t  = mg_cont(ctx, mg_transpose(ctx, mg_reshape_2d(ctx, kq, 6, 12)));
    struct mg_cgraph * g = mg_new_graph(ctx);
    mg_build_forward_expand(g, t);
    ck_assert_int_eq(mg_graph_mul_adds(g), (int64_t) 16 * 6 * 3 * 4);
    ck_assert_int_eq(mg_graph_count_op(g, MG_OP_MUL_MAT), 1);
    ck_assert_int_eq(mg_graph_count_op(g, MG_OP_TRANSPOSE), 1);
    ck_assert_int_eq(mg_graph_count_op(g, MG_OP_RESHAPE), 1);
    ck_assert_int_eq(mg_graph_count_op(g, MG_OP_CONT), 1);
    mg_free(ctx);
}
END_TEST

// Random chains: x_{i+1} = one of W x_i, x_i + x_i, relu(x_i), s * x_i; the
// expected counts are kept while building.
START_TEST(random_chains) {
    require_functions();
    uint64_t rng = 0x5eed04;
    for (int round = 0; round < 50; round++) {
        struct mg_context * ctx = new_ctx();
        int64_t rows = 1 + (int64_t) (mg_test_rand_u64(&rng) % 7);
        int64_t dim  = 1 + (int64_t) (mg_test_rand_u64(&rng) % 24);
        struct mg_tensor * x = mg_new_tensor_2d(ctx, MG_TYPE_F32, dim, rows);
        int64_t want_mul_adds = 0;
        int want[MG_OP_COUNT] = {0};
        const int n = 1 + (int) (mg_test_rand_u64(&rng) % 30);
        for (int i = 0; i < n; i++) {
            switch (mg_test_rand_u64(&rng) % 4) {
                case 0: {
                    const int64_t out_dim = 1 + (int64_t) (mg_test_rand_u64(&rng) % 24);
                    struct mg_tensor * W = mg_new_tensor_2d(ctx, MG_TYPE_F32, x->ne[0], out_dim);
                    want_mul_adds += x->ne[0] * out_dim * rows;
                    x = mg_mul_mat(ctx, W, x);
                    want[MG_OP_MUL_MAT]++;
                    break;
                }
                case 1: x = mg_add(ctx, x, x);        want[MG_OP_ADD]++;   break;
                case 2: x = mg_relu(ctx, x);          want[MG_OP_RELU]++;  break;
                default: x = mg_scale(ctx, x, 0.5f);  want[MG_OP_SCALE]++; break;
            }
        }
        struct mg_cgraph * g = mg_new_graph(ctx);
        mg_build_forward_expand(g, x);
        ck_assert_msg(mg_graph_mul_adds(g) == want_mul_adds, "round %d: %lld multiply-adds, expected %lld", round,
                      (long long) mg_graph_mul_adds(g), (long long) want_mul_adds);
        int total = 0;
        for (int op = 0; op < MG_OP_COUNT; op++) {
            ck_assert_msg(mg_graph_count_op(g, (enum mg_op) op) == want[op], "round %d: %d %s nodes, expected %d",
                          round, mg_graph_count_op(g, (enum mg_op) op), mg_op_name((enum mg_op) op), want[op]);
            total += mg_graph_count_op(g, (enum mg_op) op);
        }
        ck_assert_int_eq(total, g->n_nodes);
        mg_free(ctx);
    }
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("04_graph ex2 graph cost");
    TCase * tc = tcase_create("graph_cost");
    tcase_add_test(tc, functions_exist);   // 0 points: only a start
    tcase_add_test(tc, the_lessons_mlp_costs_768);
    tcase_add_test(tc, the_root_matmul_is_counted);
    tcase_add_test(tc, a_shared_node_is_counted_once);
    tcase_add_test(tc, batched_matmul_and_views);
    tcase_add_test(tc, random_chains);
    suite_add_tcase(s, tc);
    return s;
}
