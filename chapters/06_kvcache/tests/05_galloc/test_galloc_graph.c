// test_galloc_graph.c - the graph allocator's contracts on small graphs whose
// results the test computes itself:
//   - inputs are placed first and keep their bytes; OUTPUT results are never
//     freed; a view keeps its source alive;
//   - parent reuse writes a result over a dying source only when that is
//     safe: same shape (a broadcast source of the same rounded size is not);
//   - the same graph is planned once; a bigger graph grows the buffer; going
//     back and forth between graphs re-plans every tensor of the graph at
//     hand, whatever an earlier plan did with it.
// Values are small integers, so every sum is exact in float and the
// reference below is exact whatever order the kernels add in.
#include "harness.h"
#include "mg.h"

#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------
// An MLP of integer weights: out = relu(W_L ... relu(W_1 x + b_1) ... + b_L)
// ---------------------------------------------------------------------------

#define MLP_MAX_LAYERS 8

struct mlp {
    struct mg_context * ctx;
    int                 width, batch, depth;
    struct mg_tensor *  x, * out;
    struct mg_tensor *  W[MLP_MAX_LAYERS], * b[MLP_MAX_LAYERS], * h[MLP_MAX_LAYERS];
    struct mg_cgraph *  g;
};

static float small_int(uint64_t * rng, int lo, int hi) {
    return (float) (lo + (int) (mg_test_rand_u64(rng) % (uint64_t) (hi - lo + 1)));
}

static struct mlp mlp_new(int width, int batch, int depth, uint64_t seed) {
    struct mlp m = {.width = width, .batch = batch, .depth = depth};
    m.ctx = mg_init((struct mg_init_params) {.mem_size = 8 * 1024 * 1024});
    ck_assert_ptr_nonnull(m.ctx);
    uint64_t rng = seed;
    m.x = mg_set_name(mg_new_tensor_2d(m.ctx, MG_TYPE_F32, width, batch), "x");
    for (int64_t i = 0; i < mg_nelements(m.x); i++) mg_set_f32_1d(m.x, i, small_int(&rng, -3, 3));
    struct mg_tensor * cur = m.x;
    for (int l = 0; l < depth; l++) {
        m.W[l] = mg_format_name(mg_new_tensor_2d(m.ctx, MG_TYPE_F32, width, width), "W%d", l);
        m.b[l] = mg_format_name(mg_new_tensor_1d(m.ctx, MG_TYPE_F32, width), "b%d", l);
        for (int64_t i = 0; i < mg_nelements(m.W[l]); i++) mg_set_f32_1d(m.W[l], i, small_int(&rng, -1, 1));
        for (int64_t i = 0; i < width; i++) mg_set_f32_1d(m.b[l], i, small_int(&rng, -2, 2));
        cur = m.h[l] = mg_format_name(mg_relu(m.ctx, mg_add(m.ctx, mg_mul_mat(m.ctx, m.W[l], cur), m.b[l])), "h%d", l);
    }
    m.out = cur;
    m.g   = mg_new_graph(m.ctx);
    mg_build_forward_expand(m.g, m.out);
    return m;
}

// The same network in double, straight from the weights' values.
static void mlp_reference(const struct mlp * m, double * out) {
    const int w = m->width;
    double *  cur = malloc(sizeof(double) * (size_t) (w * m->batch));
    double *  nxt = malloc(sizeof(double) * (size_t) (w * m->batch));
    for (int i = 0; i < w * m->batch; i++) cur[i] = mg_get_f32_1d(m->x, i);
    for (int l = 0; l < m->depth; l++) {
        for (int n = 0; n < m->batch; n++) {
            for (int r = 0; r < w; r++) {
                double s = mg_get_f32_1d(m->b[l], r);
                for (int k = 0; k < w; k++) s += mg_get_f32_nd(m->W[l], k, r, 0, 0) * cur[n * w + k];
                nxt[n * w + r] = s > 0 ? s : 0;
            }
        }
        double * t = cur;
        cur = nxt;
        nxt = t;
    }
    memcpy(out, cur, sizeof(double) * (size_t) (w * m->batch));
    free(cur);
    free(nxt);
}

static void check_mlp_result(const struct mlp * m) {
    double * want = malloc(sizeof(double) * (size_t) (m->width * m->batch));
    mlp_reference(m, want);
    for (int i = 0; i < m->width * m->batch; i++) {
        ck_assert_msg(mg_get_f32_1d(m->out, i) == (float) want[i], "out[%d] = %g, expected %g", i,
                      (double) mg_get_f32_1d(m->out, i), want[i]);
    }
    free(want);
}

// After a plan, every result of g lies in one buffer at its planned offset.
static void check_placed_by(const struct mg_gallocr * ga, const struct mg_cgraph * g) {
    const char * base = NULL;
    for (int i = 0; i < g->n_nodes; i++) {
        const struct mg_tensor * t = g->nodes[i];
        size_t off;
        if (t->view_src != NULL) {
            ck_assert_ptr_eq(t->data, (char *) t->view_src->data + t->view_offs);
            continue;
        }
        ck_assert_msg(mg_gallocr_get_offset(ga, g, t, &off), "%s was not planned", t->name);
        ck_assert_uint_le(off + mg_nbytes(t), mg_gallocr_get_buffer_size(ga));
        if (base == NULL) base = (const char *) t->data - off;
        ck_assert_msg((const char *) t->data == base + off, "%s is not at its planned offset", t->name);
    }
}

static void alloc_compute_check(struct mg_gallocr * ga, struct mlp * m) {
    ck_assert(mg_gallocr_alloc_graph(ga, m->g));
    check_placed_by(ga, m->g);
    mg_graph_compute_with_ctx(m->ctx, m->g, 1);
    check_mlp_result(m);
}

// ---------------------------------------------------------------------------
// Planning once, growing, and going back and forth
// ---------------------------------------------------------------------------

START_TEST(test_same_graph_twice_does_not_replan) {
    struct mlp          m  = mlp_new(8, 2, 3, 1);
    struct mg_gallocr * ga = mg_gallocr_new(0);
    ck_assert_int_eq(mg_gallocr_n_reserves(ga), 0);
    alloc_compute_check(ga, &m);
    ck_assert_int_eq(mg_gallocr_n_reserves(ga), 1);
    void * out_data = m.out->data;
    for (int64_t i = 0; i < mg_nelements(m.x); i++) mg_set_f32_1d(m.x, i, (float) (i % 5) - 2.0f);   // new x
    alloc_compute_check(ga, &m);
    ck_assert_int_eq(mg_gallocr_n_reserves(ga), 1);
    ck_assert_ptr_eq(m.out->data, out_data);
    mg_gallocr_free(ga);
    mg_free(m.ctx);
}
END_TEST

START_TEST(test_reserve_plans_every_time_it_is_called) {
    struct mlp          m    = mlp_new(8, 2, 3, 2);
    struct mg_gallocr * ga   = mg_gallocr_new(0);
    const size_t        peak = mg_gallocr_reserve(ga, m.g);
    ck_assert_uint_eq(peak, mg_gallocr_get_buffer_size(ga));
    ck_assert_uint_eq(mg_gallocr_reserve(ga, m.g), peak);   // the same plan again
    ck_assert_int_eq(mg_gallocr_n_reserves(ga), 2);
    alloc_compute_check(ga, &m);   // planned last time: no third plan
    ck_assert_int_eq(mg_gallocr_n_reserves(ga), 2);
    mg_gallocr_free(ga);
    mg_free(m.ctx);
}
END_TEST

START_TEST(test_a_different_graph_is_planned) {
    struct mlp          a  = mlp_new(8, 2, 3, 3);
    struct mlp          b  = mlp_new(8, 2, 3, 4);   // the same shapes, other tensors
    struct mg_gallocr * ga = mg_gallocr_new(0);
    alloc_compute_check(ga, &a);
    alloc_compute_check(ga, &b);
    ck_assert_int_eq(mg_gallocr_n_reserves(ga), 2);
    mg_gallocr_free(ga);
    mg_free(a.ctx);
    mg_free(b.ctx);
}
END_TEST

START_TEST(test_bigger_graph_grows_the_buffer) {
    struct mlp          small = mlp_new(4, 1, 2, 5);
    struct mlp          big   = mlp_new(32, 8, 4, 6);
    struct mg_gallocr * ga    = mg_gallocr_new(0);
    alloc_compute_check(ga, &small);
    const size_t small_size = mg_gallocr_get_buffer_size(ga);
    alloc_compute_check(ga, &big);
    ck_assert_uint_gt(mg_gallocr_get_buffer_size(ga), small_size);
    // Two layers of 32x8 floats are alive at once at the peak.
    ck_assert_uint_ge(mg_gallocr_get_buffer_size(ga), 2 * 32 * 8 * sizeof(float));
    mg_gallocr_free(ga);
    mg_free(small.ctx);
    mg_free(big.ctx);
}
END_TEST

// A graph placed by an earlier plan, planned again after another graph grew
// the buffer: its tensors must move into the new buffer, not keep pointers
// into the old one.
START_TEST(test_small_big_small_replans_into_the_grown_buffer) {
    struct mlp          small = mlp_new(4, 1, 2, 7);
    struct mlp          big   = mlp_new(32, 8, 4, 8);
    struct mg_gallocr * ga    = mg_gallocr_new(0);
    alloc_compute_check(ga, &small);
    alloc_compute_check(ga, &big);
    alloc_compute_check(ga, &small);
    alloc_compute_check(ga, &big);
    mg_gallocr_free(ga);
    mg_free(small.ctx);
    mg_free(big.ctx);
}
END_TEST

// The other way round: the buffer does not shrink, but the small plan covers
// only its front. Planning the big graph again must not mistake its results
// beyond that front for tensors with data of their own.
START_TEST(test_big_small_big_replans_every_result) {
    struct mlp          small = mlp_new(4, 1, 2, 9);
    struct mlp          big   = mlp_new(32, 8, 4, 10);
    struct mg_gallocr * ga    = mg_gallocr_new(0);
    alloc_compute_check(ga, &big);
    alloc_compute_check(ga, &small);
    alloc_compute_check(ga, &big);
    alloc_compute_check(ga, &small);
    mg_gallocr_free(ga);
    mg_free(small.ctx);
    mg_free(big.ctx);
}
END_TEST

START_TEST(test_place_into_caller_memory) {
    struct mlp          m    = mlp_new(8, 3, 3, 11);
    struct mg_gallocr * ga   = mg_gallocr_new(32);
    const size_t        size = mg_gallocr_reserve(ga, m.g);
    char *              mem  = aligned_alloc(32, (size + 31) / 32 * 32);
    ck_assert_ptr_nonnull(mem);
    memset(mem, 0xff, size);   // NaN bytes: whatever is read before written shows
    mg_gallocr_place(ga, m.g, mem);
    for (int i = 0; i < m.g->n_nodes; i++) {
        size_t off;
        if (mg_gallocr_get_offset(ga, m.g, m.g->nodes[i], &off)) ck_assert_ptr_eq(m.g->nodes[i]->data, mem + off);
    }
    mg_graph_compute_with_ctx(m.ctx, m.g, 1);
    check_mlp_result(&m);
    mg_gallocr_free(ga);
    mg_free(m.ctx);
    free(mem);
}
END_TEST

// ---------------------------------------------------------------------------
// What is never freed, and what must not be reused
// ---------------------------------------------------------------------------

// A chain of same-size element-wise nodes: each would love the bytes of the
// one before. h1 is flagged OUTPUT, so nothing may take them.
static void check_output_survives(bool reuse) {
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 1024 * 1024});
    struct mg_tensor *  x   = mg_set_name(mg_new_tensor_1d(ctx, MG_TYPE_F32, 8), "x");
    for (int i = 0; i < 8; i++) mg_set_f32_1d(x, i, (float) i - 3.0f);
    struct mg_tensor * h1 = mg_set_name(mg_scale(ctx, x, 2.0f), "h1");
    h1->flags |= MG_TENSOR_FLAG_OUTPUT;
    struct mg_tensor * cur = mg_relu(ctx, h1);
    for (int i = 0; i < 5; i++) cur = mg_scale(ctx, mg_add(ctx, cur, x), 0.5f);
    struct mg_cgraph * g = mg_new_graph(ctx);
    mg_build_forward_expand(g, cur);

    struct mg_gallocr * ga = mg_gallocr_new(4);
    mg_gallocr_set_reuse_parent(ga, reuse);
    ck_assert(mg_gallocr_alloc_graph(ga, g));
    size_t h1_off;
    ck_assert(mg_gallocr_get_offset(ga, g, h1, &h1_off));
    for (int i = 0; i < g->n_nodes; i++) {
        size_t off;
        if (g->nodes[i] != h1 && mg_gallocr_get_offset(ga, g, g->nodes[i], &off)) {
            ck_assert_msg(off + mg_nbytes(g->nodes[i]) <= h1_off || off >= h1_off + mg_nbytes(h1),
                          "%s shares the bytes of the output h1", g->nodes[i]->name);
        }
    }
    mg_graph_compute_with_ctx(ctx, g, 1);
    for (int i = 0; i < 8; i++) ck_assert_float_eq(mg_get_f32_1d(h1, i), 2.0f * ((float) i - 3.0f));
    mg_gallocr_free(ga);
    mg_free(ctx);
}

START_TEST(test_output_survives_parent_reuse_off) {
    check_output_survives(false);
}
END_TEST

START_TEST(test_output_survives_parent_reuse_on) {
    check_output_survives(true);
}
END_TEST

// x and y are inputs (no data until placed). y is read first, x only by the
// last node: x must sit below everything and still hold its values at the end.
START_TEST(test_inputs_first_and_kept_until_read) {
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 1024 * 1024, .no_alloc = true});
    struct mg_tensor *  x   = mg_set_name(mg_new_tensor_1d(ctx, MG_TYPE_F32, 6), "x");
    struct mg_tensor *  y   = mg_set_name(mg_new_tensor_1d(ctx, MG_TYPE_F32, 6), "y");
    x->flags |= MG_TENSOR_FLAG_INPUT;
    y->flags |= MG_TENSOR_FLAG_INPUT;
    struct mg_tensor * cur = mg_sqr(ctx, y);
    for (int i = 0; i < 6; i++) cur = mg_relu(ctx, mg_scale(ctx, cur, 1.0f));
    struct mg_tensor * out = mg_add(ctx, cur, x);
    struct mg_cgraph * g   = mg_new_graph(ctx);
    mg_build_forward_expand(g, out);

    struct mg_gallocr * ga = mg_gallocr_new(16);
    ck_assert(mg_gallocr_alloc_graph(ga, g));
    size_t x_off, y_off;
    ck_assert(mg_gallocr_get_offset(ga, g, x, &x_off));
    ck_assert(mg_gallocr_get_offset(ga, g, y, &y_off));
    const size_t inputs_end = 2 * 32;   // two inputs of 24 bytes, 32 each at alignment 16
    ck_assert_uint_lt(x_off, inputs_end);
    ck_assert_uint_lt(y_off, inputs_end);
    for (int i = 0; i < g->n_nodes; i++) {
        size_t off;
        if (mg_gallocr_get_offset(ga, g, g->nodes[i], &off)) ck_assert_uint_ge(off, inputs_end);
    }
    for (int i = 0; i < 6; i++) {
        mg_set_f32_1d(x, i, (float) (10 * i));
        mg_set_f32_1d(y, i, (float) i - 2.0f);
    }
    mg_graph_compute_with_ctx(ctx, g, 1);
    for (int i = 0; i < 6; i++) {
        ck_assert_float_eq(mg_get_f32_1d(x, i), (float) (10 * i));
        ck_assert_float_eq(mg_get_f32_1d(y, i), (float) i - 2.0f);
        ck_assert_float_eq(mg_get_f32_1d(out, i), ((float) i - 2.0f) * ((float) i - 2.0f) + (float) (10 * i));
    }
    mg_gallocr_free(ga);
    mg_free(ctx);
}
END_TEST

// s is only read through a view that is read late: the view keeps s alive.
START_TEST(test_view_keeps_its_source_alive) {
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 1024 * 1024});
    struct mg_tensor *  x   = mg_set_name(mg_new_tensor_2d(ctx, MG_TYPE_F32, 4, 2), "x");
    for (int i = 0; i < 8; i++) mg_set_f32_1d(x, i, (float) i);
    struct mg_tensor * s   = mg_set_name(mg_scale(ctx, x, 3.0f), "s");
    struct mg_tensor * row = mg_view_1d(ctx, s, 4, 4 * sizeof(float));   // row 1 of s
    struct mg_tensor * cur = mg_scale(ctx, x, 1.0f);
    for (int i = 0; i < 6; i++) cur = mg_scale(ctx, mg_relu(ctx, cur), 1.0f);   // results of s's size
    struct mg_tensor * out = mg_add(ctx, mg_view_1d(ctx, cur, 4, 0), row);
    struct mg_cgraph * g   = mg_new_graph(ctx);
    mg_build_forward_expand(g, out);
    for (int reuse = 0; reuse < 2; reuse++) {
        struct mg_gallocr * ga = mg_gallocr_new(4);
        mg_gallocr_set_reuse_parent(ga, reuse);
        for (int i = 0; i < g->n_nodes; i++) g->nodes[i]->data = NULL;   // plan from scratch
        ck_assert(mg_gallocr_alloc_graph(ga, g));
        mg_graph_compute_with_ctx(ctx, g, 1);
        for (int i = 0; i < 4; i++) ck_assert_float_eq(mg_get_f32_1d(out, i), (float) i + 3.0f * (float) (4 + i));
        mg_gallocr_free(ga);
    }
    mg_free(ctx);
}
END_TEST

// b is a computed {2, 1} that add broadcasts over a's two rows. At alignment
// 16 its 8 bytes round to 16, the size of a + b: same size, different shape.
// Writing a + b over b would destroy b's row before the second row reads it
// (ggml_gallocr_allocate_node asks ggml_are_same_layout, not the size).
START_TEST(test_parent_reuse_needs_the_same_shape) {
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 1024 * 1024});
    struct mg_tensor *  a   = mg_set_name(mg_new_tensor_2d(ctx, MG_TYPE_F32, 2, 2), "a");
    struct mg_tensor *  y   = mg_set_name(mg_new_tensor_1d(ctx, MG_TYPE_F32, 2), "y");
    const float av[4] = {1, 2, 3, 4}, yv[2] = {10, 20};
    for (int i = 0; i < 4; i++) mg_set_f32_1d(a, i, av[i]);
    for (int i = 0; i < 2; i++) mg_set_f32_1d(y, i, yv[i]);
    struct mg_tensor * b   = mg_set_name(mg_scale(ctx, y, 1.0f), "b");   // computed, read only by the add
    struct mg_tensor * sum = mg_set_name(mg_add(ctx, a, b), "a+b");
    struct mg_cgraph * g   = mg_new_graph(ctx);
    mg_build_forward_expand(g, sum);

    struct mg_gallocr * ga = mg_gallocr_new(16);
    ck_assert(mg_gallocr_alloc_graph(ga, g));
    size_t b_off, sum_off;
    ck_assert(mg_gallocr_get_offset(ga, g, b, &b_off));
    ck_assert(mg_gallocr_get_offset(ga, g, sum, &sum_off));
    mg_graph_compute_with_ctx(ctx, g, 1);
    const float want[4] = {11, 22, 13, 24};
    for (int i = 0; i < 4; i++) ck_assert_float_eq(mg_get_f32_1d(sum, i), want[i]);
    ck_assert_msg(sum_off >= b_off + 8 || sum_off + 16 <= b_off, "a+b at %zu overlaps b at %zu, which it reads",
                  sum_off, b_off);
    mg_gallocr_free(ga);
    mg_free(ctx);
}
END_TEST

// The reuse that is allowed: same shape, in-place-capable op, last reader.
START_TEST(test_parent_reuse_takes_a_dying_same_shape_source) {
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 1024 * 1024});
    struct mg_tensor *  x   = mg_set_name(mg_new_tensor_2d(ctx, MG_TYPE_F32, 3, 2), "x");
    for (int i = 0; i < 6; i++) mg_set_f32_1d(x, i, (float) i - 2.0f);
    struct mg_tensor * s   = mg_set_name(mg_scale(ctx, x, 2.0f), "s");
    struct mg_tensor * r   = mg_set_name(mg_relu(ctx, s), "r");        // s's last reader, same shape
    struct mg_tensor * sum = mg_set_name(mg_sum_rows(ctx, r), "sum");  // not element-wise: no reuse
    struct mg_cgraph * g   = mg_new_graph(ctx);
    mg_build_forward_expand(g, sum);
    struct mg_gallocr * ga = mg_gallocr_new(4);
    ck_assert(mg_gallocr_alloc_graph(ga, g));
    size_t s_off, r_off, sum_off;
    ck_assert(mg_gallocr_get_offset(ga, g, s, &s_off));
    ck_assert(mg_gallocr_get_offset(ga, g, r, &r_off));
    ck_assert(mg_gallocr_get_offset(ga, g, sum, &sum_off));
    ck_assert_uint_eq(r_off, s_off);
    ck_assert(sum_off >= r_off + 24 || sum_off + 8 <= r_off);   // r is still being read by sum_rows
    mg_graph_compute_with_ctx(ctx, g, 1);
    // relu(2 * [-2 -1 0; 1 2 3]) = [0 0 0; 2 4 6]: row sums 0 and 12.
    ck_assert_float_eq(mg_get_f32_1d(sum, 0), 0.0f);
    ck_assert_float_eq(mg_get_f32_1d(sum, 1), 12.0f);
    mg_gallocr_free(ga);
    mg_free(ctx);
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("galloc_graph");

    MG_TCASE(s, "plans", test_same_graph_twice_does_not_replan, test_reserve_plans_every_time_it_is_called,
                test_a_different_graph_is_planned, test_bigger_graph_grows_the_buffer,
                test_small_big_small_replans_into_the_grown_buffer, test_big_small_big_replans_every_result,
                test_place_into_caller_memory);

    MG_TCASE(s, "lifetimes", test_output_survives_parent_reuse_off, test_output_survives_parent_reuse_on,
                test_inputs_first_and_kept_until_read, test_view_keeps_its_source_alive,
                test_parent_reuse_needs_the_same_shape, test_parent_reuse_takes_a_dying_same_shape_source);
    return s;
}
