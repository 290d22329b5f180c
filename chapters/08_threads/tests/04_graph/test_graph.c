// test_graph.c - building the graph (order, dedupe, leafs and nodes, names),
// running it, tracing it and drawing it.
//
// The order is checked as a property on hundreds of random DAGs: every src of
// a node is a leaf or an earlier node, every tensor reachable from the roots
// is held exactly once, and use counts equal the src slots that point at each
// tensor, counted here by brute force. Running is checked against a naive
// evaluator in double that knows nothing of the graph: it follows the order
// the test built the tensors in.
#define _DEFAULT_SOURCE   // mkdtemp
#include "harness.h"
#include "mg.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

static struct mg_context * new_ctx(void) {
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 8 * 1024 * 1024});
    ck_assert_ptr_nonnull(ctx);
    return ctx;
}

static float at(const struct mg_tensor * t, int64_t i0, int64_t i1) {
    return *(const float *) ((const char *) t->data + i0 * (int64_t) t->nb[0] + i1 * (int64_t) t->nb[1]);
}

static struct mg_tensor * new_matrix(struct mg_context * ctx, int64_t ne0, int64_t ne1, const char * name,
                                     uint64_t * rng) {
    struct mg_tensor * t = mg_new_tensor_2d(ctx, MG_TYPE_F32, ne0, ne1);
    mg_test_fill_uniform(t->data, (size_t) (ne0 * ne1), rng, -1.0f, 1.0f);
    if (name != NULL) mg_set_name(t, name);
    return t;
}

static int index_in(struct mg_tensor * const * arr, int n, const struct mg_tensor * t) {
    for (int i = 0; i < n; i++) {
        if (arr[i] == t) return i;
    }
    return -1;
}

// How many src slots of g's nodes point at t: the use count, by brute force.
static int count_uses(const struct mg_cgraph * g, const struct mg_tensor * t) {
    int uses = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        for (int j = 0; j < MG_MAX_SRC; j++) uses += g->nodes[i]->src[j] == t;
    }
    return uses;
}

// Every src of node i is a leaf or a node before i; no tensor is held twice;
// leafs have no op and nodes have one.
static void check_topological(const struct mg_cgraph * g) {
    for (int i = 0; i < g->n_leafs; i++) {
        ck_assert_int_eq(g->leafs[i]->op, MG_OP_NONE);
        ck_assert_int_eq(index_in(g->leafs, i, g->leafs[i]), -1);
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const struct mg_tensor * node = g->nodes[i];
        ck_assert_int_ne(node->op, MG_OP_NONE);
        ck_assert_msg(index_in(g->nodes, i, node) == -1, "node %d is held twice", i);
        ck_assert_int_eq(index_in(g->leafs, g->n_leafs, node), -1);
        for (int j = 0; j < MG_MAX_SRC; j++) {
            const struct mg_tensor * s = node->src[j];
            if (s == NULL) continue;
            ck_assert_msg(index_in(g->nodes, i, s) >= 0 || index_in(g->leafs, g->n_leafs, s) >= 0,
                          "src %d of node %d (%s) is neither a leaf nor an earlier node", j, i, mg_op_name(node->op));
        }
    }
}

// ---------------------------------------------------------------------------
// Random DAGs of 4x4 matrices, with a reference value for every tensor
// ---------------------------------------------------------------------------

enum { N = 4, NN = N * N, POOL_MAX = 128 };

// Each tensor the test made, its value computed here in double, and a bound
// `mag` on the sum of |terms| behind each element: float rounding anywhere in
// the computation of an element stays within a small multiple of eps * mag.
struct pool {
    struct mg_tensor * t[POOL_MAX];
    double             val[POOL_MAX][NN];   // element (i0, i1) at i0 + N*i1
    double             mag[POOL_MAX][NN];
    int                n;
};

static int pool_add(struct pool * p, struct mg_tensor * t) {
    ck_assert_int_lt(p->n, POOL_MAX);
    p->t[p->n] = t;
    return p->n++;
}

static int pool_index(const struct pool * p, const struct mg_tensor * t) {
    return index_in((struct mg_tensor * const *) p->t, p->n, t);
}

static double max_mag(const struct pool * p, int a) {
    double m = 0;
    for (int k = 0; k < NN; k++) m = fmax(m, p->mag[a][k]);
    return m;
}

static void add_leaf(struct pool * p, struct mg_context * ctx, uint64_t * rng) {
    struct mg_tensor * t = mg_new_tensor_2d(ctx, MG_TYPE_F32, N, N);
    const int i = pool_add(p, t);
    for (int k = 0; k < NN; k++) {
        const float v = mg_test_rand_uniform(rng, -1.0f, 1.0f);
        ((float *) t->data)[k] = v;
        p->val[i][k] = v;
        p->mag[i][k] = fabs(v);
    }
}

// mul_mat wants whole rows in both operands: a transposed operand gets a cont.
static int rows_ready(struct pool * p, struct mg_context * ctx, int a) {
    if (!mg_is_transposed(p->t[a])) return a;
    const int c = pool_add(p, mg_cont(ctx, p->t[a]));
    memcpy(p->val[c], p->val[a], sizeof(p->val[c]));
    memcpy(p->mag[c], p->mag[a], sizeof(p->mag[c]));
    return c;
}

enum rand_op { R_ADD, R_SUB, R_MUL, R_MUL_MAT, R_RELU, R_SCALE, R_SQR, R_SOFT_MAX, R_TRANSPOSE, R_CONT, N_RAND_OPS };

// One random op over random earlier tensors; its reference value alongside.
static void add_random_op(struct pool * p, struct mg_context * ctx, uint64_t * rng) {
    int a = (int) (mg_test_rand_u64(rng) % (uint64_t) p->n);
    int b = (int) (mg_test_rand_u64(rng) % (uint64_t) p->n);
    enum rand_op op = (enum rand_op) (mg_test_rand_u64(rng) % N_RAND_OPS);
    // Products of large values would make the tolerance meaningless: add instead.
    if ((op == R_MUL || op == R_MUL_MAT || op == R_SQR) && (max_mag(p, a) > 20 || max_mag(p, b) > 20)) op = R_ADD;
    if (op == R_MUL_MAT) {
        a = rows_ready(p, ctx, a);
        b = rows_ready(p, ctx, b);
    }
    struct mg_tensor * ta = p->t[a], * tb = p->t[b], * t = NULL;
    switch (op) {
        case R_ADD:       t = mg_add(ctx, ta, tb);       break;
        case R_SUB:       t = mg_sub(ctx, ta, tb);       break;
        case R_MUL:       t = mg_mul(ctx, ta, tb);       break;
        case R_MUL_MAT:   t = mg_mul_mat(ctx, ta, tb);   break;
        case R_RELU:      t = mg_relu(ctx, ta);          break;
        case R_SCALE:     t = mg_scale(ctx, ta, 0.5f);   break;
        case R_SQR:       t = mg_sqr(ctx, ta);           break;
        case R_SOFT_MAX:  t = mg_soft_max(ctx, ta);      break;
        case R_TRANSPOSE: t = mg_transpose(ctx, ta);     break;
        case R_CONT:      t = mg_cont(ctx, ta);          break;
        case N_RAND_OPS:  break;
    }
    const int o = pool_add(p, t);
    const double * va = p->val[a], * vb = p->val[b], * ma = p->mag[a], * mb = p->mag[b];
    double * v = p->val[o], * m = p->mag[o];
    for (int i1 = 0; i1 < N; i1++) {
        double row_mag = 0, row_max = -INFINITY, row_sum = 0;
        for (int i0 = 0; i0 < N; i0++) {
            row_mag = fmax(row_mag, ma[i0 + N * i1]);
            row_max = fmax(row_max, va[i0 + N * i1]);
        }
        for (int i0 = 0; i0 < N; i0++) row_sum += exp(va[i0 + N * i1] - row_max);
        for (int i0 = 0; i0 < N; i0++) {
            const int k = i0 + N * i1;
            switch (op) {
                case R_ADD:   v[k] = va[k] + vb[k]; m[k] = ma[k] + mb[k];         break;
                case R_SUB:   v[k] = va[k] - vb[k]; m[k] = ma[k] + mb[k];         break;
                case R_MUL:   v[k] = va[k] * vb[k]; m[k] = 2 * ma[k] * mb[k];     break;
                case R_RELU:  v[k] = fmax(va[k], 0); m[k] = ma[k];                break;
                case R_SCALE: v[k] = 0.5 * va[k];   m[k] = 0.5 * ma[k];           break;
                case R_SQR:   v[k] = va[k] * va[k]; m[k] = 2 * ma[k] * ma[k];     break;
                case R_CONT:  v[k] = va[k];         m[k] = ma[k];                 break;
                case R_TRANSPOSE: v[k] = va[i1 + N * i0]; m[k] = ma[i1 + N * i0]; break;
                case R_SOFT_MAX:
                    // An error d in the inputs moves p by at most p * 2 * max|d|.
                    v[k] = exp(va[k] - row_max) / row_sum;
                    m[k] = v[k] * (1 + 2 * row_mag);
                    break;
                case R_MUL_MAT:   // out(i0, i1) = dot(row i0 of a, row i1 of b)
                    v[k] = 0;
                    m[k] = 0;
                    for (int c = 0; c < N; c++) {
                        v[k] += va[c + N * i0] * vb[c + N * i1];
                        m[k] += 2 * ma[c + N * i0] * mb[c + N * i1];
                    }
                    break;
                case N_RAND_OPS: break;
            }
        }
    }
}

static void build_random_pool(struct pool * p, struct mg_context * ctx, uint64_t * rng) {
    p->n = 0;
    const int n_leafs = 1 + (int) (mg_test_rand_u64(rng) % 6);
    const int n_ops = 1 + (int) (mg_test_rand_u64(rng) % 40);
    for (int i = 0; i < n_leafs; i++) add_leaf(p, ctx, rng);
    for (int i = 0; i < n_ops; i++) add_random_op(p, ctx, rng);
}

// Marks every pool tensor reachable from t through src[] (the test's own walk).
static void mark_reachable(const struct pool * p, const struct mg_tensor * t, bool * seen) {
    const int i = pool_index(p, t);
    ck_assert_int_ge(i, 0);
    if (seen[i]) return;
    seen[i] = true;
    for (int j = 0; j < MG_MAX_SRC; j++) {
        if (t->src[j] != NULL) mark_reachable(p, t->src[j], seen);
    }
}

// ---------------------------------------------------------------------------
// Building
// ---------------------------------------------------------------------------

START_TEST(test_random_dags_topological_order) {
    uint64_t rng = 2024;
    for (int dag = 0; dag < 300; dag++) {
        struct mg_context * ctx = new_ctx();
        static struct pool p;
        build_random_pool(&p, ctx, &rng);
        // The last tensor, and up to two more picked at random (possibly leafs or
        // tensors the first root already holds).
        struct mg_cgraph * g = mg_new_graph_custom(ctx, 2 * POOL_MAX);
        bool reachable[POOL_MAX] = {false};
        const int n_roots = 1 + (int) (mg_test_rand_u64(&rng) % 3);
        for (int r = 0; r < n_roots; r++) {
            struct mg_tensor * root = r == 0 ? p.t[p.n - 1] : p.t[mg_test_rand_u64(&rng) % (uint64_t) p.n];
            mg_build_forward_expand(g, root);
            mark_reachable(&p, root, reachable);
        }
        check_topological(g);
        int n_reachable = 0;
        for (int i = 0; i < p.n; i++) {
            n_reachable += reachable[i];
            const bool held =
                index_in(g->nodes, g->n_nodes, p.t[i]) >= 0 || index_in(g->leafs, g->n_leafs, p.t[i]) >= 0;
            ck_assert_msg(held == reachable[i], "dag %d: tensor %d (%s) %s", dag, i, mg_op_name(p.t[i]->op),
                          reachable[i] ? "is reachable but not in the graph" : "is in the graph but not reachable");
            ck_assert_int_eq(mg_graph_contains(g, p.t[i]), reachable[i]);
            ck_assert_msg(mg_graph_use_count(g, p.t[i]) == (reachable[i] ? count_uses(g, p.t[i]) : 0),
                          "dag %d: tensor %d has use count %d, its src slots say %d", dag, i,
                          mg_graph_use_count(g, p.t[i]), count_uses(g, p.t[i]));
        }
        ck_assert_int_eq(g->n_nodes + g->n_leafs, n_reachable);
        mg_free(ctx);
    }
}
END_TEST

START_TEST(test_shared_subexpression_held_once) {
    uint64_t rng = 3;
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * x = new_matrix(ctx, 5, 3, "x", &rng);
    struct mg_tensor * s = mg_sqr(ctx, x);            // the shared tensor
    struct mg_tensor * a = mg_relu(ctx, s);
    struct mg_tensor * b = mg_scale(ctx, s, 2.0f);
    struct mg_tensor * out = mg_add(ctx, a, b);       // a diamond: out <- a, b <- s <- x
    struct mg_cgraph * g = mg_new_graph(ctx);
    mg_build_forward_expand(g, out);
    ck_assert_int_eq(g->n_leafs, 1);
    ck_assert_int_eq(g->n_nodes, 4);
    ck_assert_ptr_eq(g->leafs[0], x);
    ck_assert_ptr_eq(g->nodes[0], s);
    ck_assert_ptr_eq(g->nodes[3], out);
    ck_assert_int_eq(mg_graph_use_count(g, s), 2);
    ck_assert_int_eq(mg_graph_use_count(g, x), 1);
    ck_assert_int_eq(mg_graph_use_count(g, a), 1);
    ck_assert_int_eq(mg_graph_use_count(g, b), 1);
    ck_assert_int_eq(mg_graph_use_count(g, out), 0);

    // Expanding again adds nothing; a second result reading s adds one node and one use.
    mg_build_forward_expand(g, out);
    ck_assert_int_eq(g->n_nodes, 4);
    struct mg_tensor * twice = mg_mul(ctx, s, s);   // one node, two src slots
    mg_build_forward_expand(g, twice);
    ck_assert_int_eq(g->n_nodes, 5);
    ck_assert_int_eq(g->n_leafs, 1);
    ck_assert_ptr_eq(g->nodes[4], twice);
    ck_assert_int_eq(mg_graph_use_count(g, s), 4);
    ck_assert_int_eq(mg_graph_use_count(g, twice), 0);
    check_topological(g);
    mg_free(ctx);
}
END_TEST

START_TEST(test_leafs_and_nodes_classified) {
    uint64_t rng = 4;
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * W = new_matrix(ctx, 4, 3, "W", &rng);
    struct mg_tensor * x = new_matrix(ctx, 3, 2, "x", &rng);
    struct mg_tensor * Wt = mg_transpose(ctx, W);          // a view: a node, though it computes nothing
    struct mg_tensor * y = mg_mul_mat(ctx, mg_cont(ctx, Wt), x);
    struct mg_cgraph * g = mg_new_graph(ctx);
    mg_build_forward_expand(g, y);
    ck_assert_int_eq(g->n_leafs, 2);
    ck_assert_int_eq(g->n_nodes, 3);
    ck_assert_int_ge(index_in(g->leafs, g->n_leafs, W), 0);
    ck_assert_int_ge(index_in(g->leafs, g->n_leafs, x), 0);
    ck_assert_ptr_eq(g->nodes[0], Wt);
    ck_assert_int_eq(g->nodes[1]->op, MG_OP_CONT);
    ck_assert_ptr_eq(g->nodes[2], y);
    check_topological(g);
    // A graph of one leaf alone.
    struct mg_cgraph * g1 = mg_new_graph(ctx);
    mg_build_forward_expand(g1, x);
    ck_assert_int_eq(g1->n_leafs, 1);
    ck_assert_int_eq(g1->n_nodes, 0);
    mg_free(ctx);
}
END_TEST

START_TEST(test_auto_names_only_for_unnamed) {
    uint64_t rng = 5;
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * W = new_matrix(ctx, 3, 3, "W", &rng);
    struct mg_tensor * x = new_matrix(ctx, 3, 3, NULL, &rng);
    struct mg_tensor * b = new_matrix(ctx, 3, 3, NULL, &rng);
    struct mg_tensor * wx = mg_mul_mat(ctx, W, x);                     // unnamed
    struct mg_tensor * h = mg_set_name(mg_add(ctx, wx, b), "h");       // named
    struct mg_tensor * out = mg_relu(ctx, h);                          // unnamed
    ck_assert_str_eq(x->name, "");
    ck_assert_str_eq(wx->name, "");
    struct mg_cgraph * g = mg_new_graph(ctx);
    mg_build_forward_expand(g, out);
    // leafs: W, x, b; nodes: wx, h, out.
    ck_assert_str_eq(W->name, "W");
    ck_assert_str_eq(x->name, "leaf_1");
    ck_assert_str_eq(b->name, "leaf_2");
    ck_assert_str_eq(wx->name, "node_0");
    ck_assert_str_eq(h->name, "h");
    ck_assert_str_eq(out->name, "node_2");
    mg_free(ctx);
}
END_TEST

START_TEST(test_graph_clear_and_rebuild) {
    uint64_t rng = 6;
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * x = new_matrix(ctx, 4, 4, "x", &rng);
    struct mg_tensor * y = new_matrix(ctx, 4, 4, "y", &rng);
    struct mg_tensor * out = mg_soft_max(ctx, mg_add(ctx, mg_mul_mat(ctx, x, y), x));
    struct mg_cgraph * g = mg_new_graph(ctx);
    mg_build_forward_expand(g, out);
    const int n_nodes = g->n_nodes, n_leafs = g->n_leafs;
    struct mg_tensor * nodes[8], * leafs[8];
    memcpy(nodes, g->nodes, (size_t) n_nodes * sizeof(nodes[0]));
    memcpy(leafs, g->leafs, (size_t) n_leafs * sizeof(leafs[0]));
    ck_assert_int_eq(mg_graph_use_count(g, x), 2);

    mg_graph_clear(g);
    ck_assert_int_eq(g->n_nodes, 0);
    ck_assert_int_eq(g->n_leafs, 0);
    ck_assert(!mg_graph_contains(g, out));
    ck_assert(!mg_graph_contains(g, x));
    ck_assert_int_eq(mg_graph_use_count(g, x), 0);

    mg_build_forward_expand(g, out);   // the same arrays as the first time, and no stale uses
    ck_assert_int_eq(g->n_nodes, n_nodes);
    ck_assert_int_eq(g->n_leafs, n_leafs);
    ck_assert_int_eq(memcmp(g->nodes, nodes, (size_t) n_nodes * sizeof(nodes[0])), 0);
    ck_assert_int_eq(memcmp(g->leafs, leafs, (size_t) n_leafs * sizeof(leafs[0])), 0);
    ck_assert_int_eq(mg_graph_use_count(g, x), 2);
    mg_free(ctx);
}
END_TEST

// ---------------------------------------------------------------------------
// Running
// ---------------------------------------------------------------------------

START_TEST(test_random_dags_compute_matches_naive) {
    uint64_t rng = 77;
    for (int dag = 0; dag < 60; dag++) {
        struct mg_context * ctx = new_ctx();
        static struct pool p;
        build_random_pool(&p, ctx, &rng);
        const int r = p.n - 1;
        struct mg_tensor * root = p.t[r];
        struct mg_cgraph * g = mg_new_graph_custom(ctx, 2 * POOL_MAX);
        mg_build_forward_expand(g, root);
        mg_graph_compute_with_ctx(ctx, g, 1);
        ck_assert_ptr_nonnull(root->data);
        for (int i1 = 0; i1 < N; i1++) {
            for (int i0 = 0; i0 < N; i0++) {
                const int k = i0 + N * i1;
                const double got = at(root, i0, i1), want = p.val[r][k];
                ck_assert_msg(fabs(got - want) <= 1e-4 * p.mag[r][k] + 1e-30,
                              "dag %d (%d tensors, root %s) at (%d,%d): got %.9g, want %.9g (mag %.3g)", dag, p.n,
                              mg_op_name(root->op), i0, i1, got, want, p.mag[r][k]);
            }
        }
        mg_free(ctx);
    }
}
END_TEST

// An in-place result read along two paths: the graph holds it once, so it
// runs once (chapter 03's recursive mg_compute ran it once per path, and so
// added b to a twice).
START_TEST(test_inplace_on_two_paths_runs_once) {
    struct mg_context * ctx = new_ctx();
    struct mg_tensor * a = mg_new_tensor_1d(ctx, MG_TYPE_F32, 3);
    struct mg_tensor * b = mg_new_tensor_1d(ctx, MG_TYPE_F32, 3);
    for (int i = 0; i < 3; i++) {
        mg_set_f32_1d(a, i, (float) (i + 1));
        mg_set_f32_1d(b, i, 10.0f);
    }
    struct mg_tensor * y = mg_add_inplace(ctx, a, b);   // a += b
    struct mg_tensor * out = mg_add(ctx, y, mg_scale(ctx, y, 2.0f));
    struct mg_cgraph * g = mg_new_graph(ctx);
    mg_build_forward_expand(g, out);
    ck_assert_int_eq(g->n_nodes, 3);
    ck_assert_int_eq(mg_graph_use_count(g, y), 2);
    mg_graph_compute_with_ctx(ctx, g, 1);
    for (int i = 0; i < 3; i++) {
        ck_assert_float_eq(mg_get_f32_1d(a, i), (float) (i + 11));
        ck_assert_float_eq(mg_get_f32_1d(out, i), 3.0f * (float) (i + 11));
    }
    mg_free(ctx);
}
END_TEST

struct mlp {
    struct mg_tensor * x, * W1, * b1, * W2, * b2;
};

// probs = soft_max(W2 silu(rms_norm(W1 x + b1)) + b2), for 3 inputs of 8.
static struct mg_tensor * build_mlp(struct mg_context * ctx, const struct mlp * m) {
    struct mg_tensor * h = mg_silu(ctx, mg_rms_norm(ctx, mg_add(ctx, mg_mul_mat(ctx, m->W1, m->x), m->b1), 1e-5f));
    return mg_soft_max(ctx, mg_add(ctx, mg_mul_mat(ctx, m->W2, h), m->b2));
}

static double naive_mlp(const struct mlp * m, int64_t o, int64_t j) {
    double h[16], logits[5];
    double sum_sq = 0;
    for (int i = 0; i < 16; i++) {
        h[i] = at(m->b1, i, 0);
        for (int k = 0; k < 8; k++) h[i] += (double) at(m->W1, k, i) * at(m->x, k, j);
        sum_sq += h[i] * h[i];
    }
    for (int i = 0; i < 16; i++) {
        h[i] /= sqrt(sum_sq / 16 + 1e-5);
        h[i] = h[i] / (1 + exp(-h[i]));
    }
    double max = -INFINITY, sum = 0;
    for (int i = 0; i < 5; i++) {
        logits[i] = at(m->b2, i, 0);
        for (int k = 0; k < 16; k++) logits[i] += (double) at(m->W2, k, i) * h[k];
        max = fmax(max, logits[i]);
    }
    for (int i = 0; i < 5; i++) sum += exp(logits[i] - max);
    return exp(logits[o] - max) / sum;
}

START_TEST(test_graph_compute_equals_mg_compute_and_naive) {
    uint64_t rng = 8;
    struct mg_context * ctx = new_ctx();
    const struct mlp m = {
        .x = new_matrix(ctx, 8, 3, "x", &rng),   .W1 = new_matrix(ctx, 8, 16, "W1", &rng),
        .b1 = new_matrix(ctx, 16, 1, "b1", &rng), .W2 = new_matrix(ctx, 16, 5, "W2", &rng),
        .b2 = new_matrix(ctx, 5, 1, "b2", &rng),
    };
    struct mg_tensor * by_graph = build_mlp(ctx, &m);
    struct mg_tensor * by_compute = build_mlp(ctx, &m);   // the same expression, built twice
    struct mg_cgraph * g = mg_new_graph(ctx);
    mg_build_forward_expand(g, by_graph);
    ck_assert_int_eq(g->n_nodes, 7);
    ck_assert_int_eq(g->n_leafs, 5);
    mg_graph_compute_with_ctx(ctx, g, 1);
    mg_compute(ctx, by_compute);
    ck_assert(by_graph->data != by_compute->data);
    ck_assert_int_eq(memcmp(by_graph->data, by_compute->data, 5 * 3 * sizeof(float)), 0);
    for (int64_t j = 0; j < 3; j++) {
        for (int64_t o = 0; o < 5; o++) ck_assert_double_eq_tol(at(by_graph, o, j), naive_mlp(&m, o, j), 1e-5);
    }
    mg_free(ctx);
}
END_TEST

// ---------------------------------------------------------------------------
// relu(W x + b): the order, seen in the arrays and in the traces
// ---------------------------------------------------------------------------

struct relu_layer {
    struct mg_tensor * W, * x, * wx, * b, * h, * out;
};

static struct relu_layer build_relu_layer(struct mg_context * ctx, uint64_t * rng) {
    struct relu_layer r;
    r.W   = new_matrix(ctx, 3, 2, "W", rng);
    r.x   = new_matrix(ctx, 3, 1, "x", rng);
    r.wx  = mg_set_name(mg_mul_mat(ctx, r.W, r.x), "wx");
    r.b   = new_matrix(ctx, 2, 1, "b", rng);
    r.h   = mg_set_name(mg_add(ctx, r.wx, r.b), "wx+b");
    r.out = mg_set_name(mg_relu(ctx, r.h), "out");
    return r;
}

START_TEST(test_relu_layer_order_in_arrays) {
    uint64_t rng = 9;
    struct mg_context * ctx = new_ctx();
    struct relu_layer r = build_relu_layer(ctx, &rng);
    struct mg_cgraph * g = mg_new_graph(ctx);
    mg_build_forward_expand(g, r.out);
    ck_assert_int_eq(g->n_leafs, 3);
    ck_assert_int_eq(g->n_nodes, 3);
    ck_assert_ptr_eq(g->leafs[0], r.W);
    ck_assert_ptr_eq(g->leafs[1], r.x);
    ck_assert_ptr_eq(g->leafs[2], r.b);
    ck_assert_ptr_eq(g->nodes[0], r.wx);
    ck_assert_ptr_eq(g->nodes[1], r.h);
    ck_assert_ptr_eq(g->nodes[2], r.out);
    mg_free(ctx);
}
END_TEST

// The lines of f that start with prefix, with the prefix cut off.
static int read_trace(FILE * f, const char * prefix, char lines[][128], int max_lines) {
    rewind(f);
    char line[256];
    int n = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        ck_assert_msg(line[0] == '[', "not a trace line: %s", line);
        if (strncmp(line, prefix, strlen(prefix)) != 0) continue;
        ck_assert_int_lt(n, max_lines);
        snprintf(lines[n++], 128, "%s", line + strlen(prefix));
    }
    return n;
}

START_TEST(test_relu_layer_order_in_graph_trace) {
    uint64_t rng = 10;
    struct mg_context * ctx = new_ctx();
    struct relu_layer r = build_relu_layer(ctx, &rng);
    FILE * f = tmpfile();
    ck_assert_ptr_nonnull(f);
    mg_trace_set_stream(f);
    ck_assert(mg_trace_set("graph"));
    struct mg_cgraph * g = mg_new_graph(ctx);
    mg_build_forward_expand(g, r.out);
    mg_trace_set("");
    mg_trace_set_stream(NULL);

    char lines[16][128];
    const int n = read_trace(f, "[graph] ", lines, 16);
    ck_assert_int_eq(n, 6);
    const char * kinds[6] = {"leaf", "leaf", "node", "leaf", "node", "node"};
    const int indices[6] = {0, 1, 0, 2, 1, 2};
    const char * names[6] = {"W", "x", "wx", "b", "wx+b", "out"};
    for (int i = 0; i < 6; i++) {
        char kind[16], name[64];
        int index = -1;
        ck_assert_msg(sscanf(lines[i], "%15s %d %63s", kind, &index, name) == 3, "line %d: %s", i, lines[i]);
        ck_assert_str_eq(kind, kinds[i]);
        ck_assert_int_eq(index, indices[i]);
        ck_assert_str_eq(name, names[i]);
    }
    fclose(f);
    mg_free(ctx);
}
END_TEST

START_TEST(test_exec_trace_runs_nodes_in_order) {
    uint64_t rng = 11;
    struct mg_context * ctx = new_ctx();
    struct relu_layer r = build_relu_layer(ctx, &rng);
    struct mg_cgraph * g = mg_new_graph(ctx);
    mg_build_forward_expand(g, r.out);
    FILE * f = tmpfile();
    mg_trace_set_stream(f);
    ck_assert(mg_trace_set("exec"));
    mg_graph_compute_with_ctx(ctx, g, 1);
    mg_trace_set("");
    mg_trace_set_stream(NULL);

    char lines[16][128];
    ck_assert_int_eq(read_trace(f, "[exec] ", lines, 16), 3);
    const char * ops[3] = {"MUL_MAT", "ADD", "RELU"};
    const char * names[3] = {"wx", "wx+b", "out"};
    for (int i = 0; i < 3; i++) {
        char op[32], name[64];
        int index = -1;
        ck_assert_msg(sscanf(lines[i], "#%d %31s %63s", &index, op, name) == 3, "line %d: %s", i, lines[i]);
        ck_assert_int_eq(index, i);
        ck_assert_str_eq(op, ops[i]);
        ck_assert_str_eq(name, names[i]);
    }
    // And the values: relu(W x + b) by hand.
    for (int64_t i = 0; i < 2; i++) {
        double s = at(r.b, i, 0);
        for (int64_t k = 0; k < 3; k++) s += (double) at(r.W, k, i) * at(r.x, k, 0);
        ck_assert_double_eq_tol(at(r.out, i, 0), (s > 0 ? s : 0), 1e-6);
    }
    fclose(f);
    mg_free(ctx);
}
END_TEST

// The shape as the exec trace, the DOT boxes and mg info print it: every size
// with its separator, only n_dims of them, and never past the buffer.
START_TEST(test_shape_str) {
    const int64_t ne[4] = {4096, 3, 1, 1};
    char          buf[MG_SHAPE_STR_MAX];
    ck_assert_str_eq(mg_shape_str(ne, 4, ",", buf, sizeof(buf)), "[4096,3,1,1]");
    ck_assert_str_eq(mg_shape_str(ne, 2, ", ", buf, sizeof(buf)), "[4096, 3]");
    ck_assert_str_eq(mg_shape_str(ne, 0, ",", buf, sizeof(buf)), "[]");
    // The longest shape there is fits in MG_SHAPE_STR_MAX bytes.
    const int64_t widest[4] = {INT64_MIN, INT64_MIN, INT64_MIN, INT64_MIN};
    ck_assert_uint_eq(strlen(mg_shape_str(widest, 4, ", ", buf, sizeof(buf))), 2 + 4 * 20 + 3 * 2);
    // A buffer too small: the text is cut, and still ends in a NUL inside it.
    char small[9];
    memset(small, 'x', sizeof(small));
    ck_assert_str_eq(mg_shape_str(ne, 4, ",", small + 1, sizeof(small) - 1), "[4096,3");
    ck_assert_int_eq(small[0], 'x');
}
END_TEST

// ---------------------------------------------------------------------------
// DOT output
// ---------------------------------------------------------------------------

struct dot_dir {
    char dir[64];
    char path[96];
};

static void dot_dir_new(struct dot_dir * d) {
    snprintf(d->dir, sizeof(d->dir), "/tmp/mg_test_dot_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(d->dir));
    snprintf(d->path, sizeof(d->path), "%s/g.dot", d->dir);
}

static void dot_dir_remove(struct dot_dir * d) {
    char cmd[160];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d->dir);
    ck_assert_int_eq(system(cmd), 0);
}

// A graph with a diamond, a view and an op reading one tensor twice.
static struct mg_tensor * build_drawable(struct mg_context * ctx, uint64_t * rng) {
    struct mg_tensor * W = new_matrix(ctx, 4, 4, "W", rng);
    struct mg_tensor * x = new_matrix(ctx, 4, 2, "x", rng);
    struct mg_tensor * s = mg_set_name(mg_mul_mat(ctx, W, x), "s");
    struct mg_tensor * t = mg_transpose(ctx, s);
    struct mg_tensor * u = mg_mul(ctx, mg_cont(ctx, t), mg_cont(ctx, t));
    struct mg_tensor * v = mg_add(ctx, mg_relu(ctx, s), mg_sqr(ctx, s));
    return mg_add(ctx, mg_sum_rows(ctx, u), mg_sum_rows(ctx, mg_transpose(ctx, v)));
}

// "n3" -> nodes[3], "l1" -> leafs[1], anything else -> NULL.
static const struct mg_tensor * tensor_of_id(const struct mg_cgraph * g, const char * id) {
    int i = -1;
    char extra;
    if (sscanf(id, "n%d%c", &i, &extra) == 1 && i >= 0 && i < g->n_nodes) return g->nodes[i];
    if (sscanf(id, "l%d%c", &i, &extra) == 1 && i >= 0 && i < g->n_leafs) return g->leafs[i];
    return NULL;
}

START_TEST(test_dot_statements_and_edges) {
    uint64_t rng = 12;
    struct mg_context * ctx = new_ctx();
    struct mg_cgraph * g = mg_new_graph(ctx);
    mg_build_forward_expand(g, build_drawable(ctx, &rng));
    struct dot_dir d;
    dot_dir_new(&d);
    ck_assert(mg_graph_dump_dot(g, d.path));

    FILE * f = fopen(d.path, "r");
    ck_assert_ptr_nonnull(f);
    int node_seen[64] = {0}, leaf_seen[64] = {0};
    int n_src_edges = 0;
    int edge_seen[64][MG_MAX_SRC] = {{0}};
    char line[4096];
    bool closed = false;
    while (fgets(line, sizeof(line), f) != NULL) {
        char id[32], to[32];
        int j = -1;
        if (strcmp(line, "}\n") == 0) closed = true;
        if (sscanf(line, " %31s -> %31s [label=\"src%d\"", id, to, &j) == 3) {
            // One edge per src: from the src's id to the node that reads it.
            const struct mg_tensor * src = tensor_of_id(g, id);
            int i = -1;
            ck_assert_msg(sscanf(to, "n%d", &i) == 1 && i >= 0 && i < g->n_nodes, "edge to %s", to);
            ck_assert_msg(j >= 0 && j < MG_MAX_SRC && g->nodes[i]->src[j] == src && src != NULL, "wrong edge: %s",
                          line);
            edge_seen[i][j]++;
            n_src_edges++;
        } else if (sscanf(line, " %31s [", id) == 1 && strstr(line, " -> ") == NULL) {
            int i = -1;
            char extra;
            if (sscanf(id, "n%d%c", &i, &extra) == 1) {
                ck_assert_msg(i >= 0 && i < g->n_nodes, "node statement %s", id);
                node_seen[i]++;
            } else if (sscanf(id, "l%d%c", &i, &extra) == 1) {
                ck_assert_msg(i >= 0 && i < g->n_leafs, "leaf statement %s", id);
                leaf_seen[i]++;
            }
        }
    }
    fclose(f);
    ck_assert(closed);
    int n_srcs = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        ck_assert_msg(node_seen[i] == 1, "node n%d has %d statements", i, node_seen[i]);
        for (int j = 0; j < MG_MAX_SRC; j++) {
            if (g->nodes[i]->src[j] == NULL) continue;
            n_srcs++;
            ck_assert_msg(edge_seen[i][j] == 1, "src%d of n%d has %d edges", j, i, edge_seen[i][j]);
        }
    }
    for (int i = 0; i < g->n_leafs; i++) {
        ck_assert_msg(leaf_seen[i] == 1, "leaf l%d has %d statements", i, leaf_seen[i]);
    }
    ck_assert_int_eq(n_src_edges, n_srcs);
    ck_assert_int_ge(n_srcs, 15);   // the drawing really has the edges of the diamond and the views
    dot_dir_remove(&d);
    mg_free(ctx);
}
END_TEST

START_TEST(test_dot_is_the_same_for_the_same_graph) {
    struct dot_dir d1, d2;
    dot_dir_new(&d1);
    dot_dir_new(&d2);
    const char * paths[2] = {d1.path, d2.path};
    for (int run = 0; run < 2; run++) {
        uint64_t rng = 13;   // same values, different addresses
        struct mg_context * ctx = new_ctx();
        if (run == 1) mg_new_tensor_1d(ctx, MG_TYPE_F32, 1000);   // shift every address
        struct mg_cgraph * g = mg_new_graph(ctx);
        mg_build_forward_expand(g, build_drawable(ctx, &rng));
        ck_assert(mg_graph_dump_dot(g, paths[run]));
        mg_free(ctx);
    }
    size_t n1 = 0, n2 = 0;
    char * a = mg_test_read_file(d1.path, &n1);
    char * b = mg_test_read_file(d2.path, &n2);
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_gt(n1, 100);
    ck_assert_uint_eq(n1, n2);
    ck_assert_int_eq(memcmp(a, b, n1), 0);
    free(a);
    free(b);
    dot_dir_remove(&d1);
    dot_dir_remove(&d2);
}
END_TEST

START_TEST(test_dot_renders_with_graphviz) {
    if (system("command -v dot > /dev/null 2>&1") != 0) {
        MG_TEST_SKIP("Graphviz 'dot' is not installed, rendering not checked");
    }
    uint64_t rng = 14;
    struct mg_context * ctx = new_ctx();
    struct mg_cgraph * g = mg_new_graph(ctx);
    mg_build_forward_expand(g, build_drawable(ctx, &rng));
    struct dot_dir d;
    dot_dir_new(&d);
    ck_assert(mg_graph_dump_dot(g, d.path));
    char cmd[512], svg[128];
    snprintf(svg, sizeof(svg), "%s/g.svg", d.dir);
    snprintf(cmd, sizeof(cmd), "dot -Tsvg '%s' -o '%s'", d.path, svg);
    ck_assert_int_eq(system(cmd), 0);
    size_t n = 0;
    char * s = mg_test_read_file(svg, &n);
    ck_assert_ptr_nonnull(s);
    ck_assert_ptr_nonnull(strstr(s, "<svg"));
    free(s);
    dot_dir_remove(&d);
    mg_free(ctx);
}
END_TEST

START_TEST(test_dot_unwritable_path) {
    uint64_t rng = 15;
    struct mg_context * ctx = new_ctx();
    struct mg_cgraph * g = mg_new_graph(ctx);
    mg_build_forward_expand(g, build_drawable(ctx, &rng));
    const char * path = "/nonexistent-mg-test-dir/g.dot";
    mg_clear_error();
    ck_assert(!mg_graph_dump_dot(g, path));
    ck_assert_msg(strstr(mg_last_error(), path) != NULL, "the message does not name the file: %s", mg_last_error());
    struct stat st;
    ck_assert_int_ne(stat(path, &st), 0);
    mg_free(ctx);
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("graph");

    MG_TCASE(s, "build", test_random_dags_topological_order, test_shared_subexpression_held_once,
                test_leafs_and_nodes_classified, test_auto_names_only_for_unnamed, test_graph_clear_and_rebuild);

    MG_TCASE(s, "run", test_random_dags_compute_matches_naive, test_inplace_on_two_paths_runs_once,
                test_graph_compute_equals_mg_compute_and_naive);

    MG_TCASE(s, "relu_layer", test_relu_layer_order_in_arrays, test_relu_layer_order_in_graph_trace,
                test_exec_trace_runs_nodes_in_order, test_shape_str);

    MG_TCASE(s, "dot", test_dot_statements_and_edges, test_dot_is_the_same_for_the_same_graph,
                test_dot_renders_with_graphviz, test_dot_unwritable_path);
    return s;
}
