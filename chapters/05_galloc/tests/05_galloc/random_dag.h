// random_dag.h - random computation graphs for the allocator and thread tests.
//
// A graph is grown from a few INPUT leafs (no data: the allocator places
// them) and weight leafs (with their own data) by random chapter-03 ops:
// element-wise (broadcast and in-place variants too), scale, relu, silu,
// gelu, sqrt of non-negative values, rms_norm, soft_max, sum_rows, mul_mat,
// and the zero-copy views (transpose, permute, reshape, a row range, cont).
// Shapes are small and random. Some roots and some intermediate results are
// flagged OUTPUT. Everything here uses only what chapter 05 has, so the
// header serves the tests of every later chapter too.
//
// Header-only on purpose: every test file is its own program (tools/engine.mk);
// static inline, so that a file using only some of it compiles without warnings.
#pragma once

#include "harness.h"
#include "mg.h"

#include <stdlib.h>
#include <string.h>

#define RDAG_MAX_POOL    96
#define RDAG_MAX_INPUTS  4
#define RDAG_MAX_RESULTS 32
#define RDAG_GRAPH_SIZE  512

struct rdag {
    struct mg_context * ctx;    // no_alloc: every header and the graph (and ch07+ work buffers)
    struct mg_context * wctx;   // weight leafs, with their data
    struct mg_cgraph *  g;
    struct mg_tensor *  inputs[RDAG_MAX_INPUTS];
    int                 n_inputs;
    struct mg_tensor *  results[RDAG_MAX_RESULTS];   // roots and OUTPUT-flagged nodes: read after compute
    int                 n_results;
};

struct rdag_builder {
    struct rdag *      d;
    uint64_t           rng;
    struct mg_tensor * pool[RDAG_MAX_POOL];
    bool               nonneg[RDAG_MAX_POOL];   // every value >= 0 (so sqrt is safe)
    int                n_pool;
};

static inline int64_t rdag_int(uint64_t * rng, int64_t lo, int64_t hi) {   // inclusive
    return lo + (int64_t) (mg_test_rand_u64(rng) % (uint64_t) (hi - lo + 1));
}

static inline bool rdag_chance(uint64_t * rng, int percent) {
    return rdag_int(rng, 0, 99) < percent;
}

// The tensor whose bytes t reads: itself, or the root of its view chain.
static inline struct mg_tensor * rdag_storage(struct mg_tensor * t) {
    return t->view_src != NULL ? t->view_src : t;
}

// In-place ops may only write over computed results: a weight written over
// would change the next compute's inputs.
static inline bool rdag_is_computed(struct mg_tensor * t) {
    return rdag_storage(t)->op != MG_OP_NONE;
}

static inline void rdag_push(struct rdag_builder * b, struct mg_tensor * t, bool nonneg) {
    if (b->n_pool == RDAG_MAX_POOL) {   // forget the oldest: keeps the graph deep, not wide
        memmove(b->pool, b->pool + 1, (RDAG_MAX_POOL - 1) * sizeof(b->pool[0]));
        memmove(b->nonneg, b->nonneg + 1, (RDAG_MAX_POOL - 1) * sizeof(b->nonneg[0]));
        b->n_pool--;
    }
    b->pool[b->n_pool]   = t;
    b->nonneg[b->n_pool] = nonneg;
    b->n_pool++;
}

static inline int rdag_pick(struct rdag_builder * b) {
    // Favour recent tensors, so that chains form.
    if (rdag_chance(&b->rng, 60)) return b->n_pool - 1 - (int) rdag_int(&b->rng, 0, b->n_pool > 3 ? 3 : b->n_pool - 1);
    return (int) rdag_int(&b->rng, 0, b->n_pool - 1);
}

static inline struct mg_tensor * rdag_weight(struct rdag_builder * b, const int64_t ne[4], float lo, float hi) {
    struct mg_tensor * w = mg_new_tensor_4d(b->d->wctx, MG_TYPE_F32, ne[0], ne[1], ne[2], ne[3]);
    ck_assert_ptr_nonnull(w);
    mg_test_fill_uniform(w->data, (size_t) mg_nelements(w), &b->rng, lo, hi);
    return w;
}

static inline bool rdag_can_repeat(const struct mg_tensor * small, const struct mg_tensor * big) {
    for (int i = 0; i < MG_MAX_DIMS; i++) {
        if (big->ne[i] % small->ne[i] != 0) return false;
    }
    return true;
}

// b operand of a binary op on a: a computed tensor that broadcasts over a
// when the pool has one, otherwise a weight of a's shape, of one row, or of
// one element.
static inline struct mg_tensor * rdag_second_operand(struct rdag_builder * b, struct mg_tensor * a, bool for_div) {
    if (!for_div && rdag_chance(&b->rng, 60)) {
        int candidates[RDAG_MAX_POOL], n = 0;
        for (int i = 0; i < b->n_pool; i++) {
            if (rdag_can_repeat(b->pool[i], a)) candidates[n++] = i;
        }
        if (n > 0) return b->pool[candidates[rdag_int(&b->rng, 0, n - 1)]];
    }
    int64_t ne[4] = {a->ne[0], a->ne[1], a->ne[2], a->ne[3]};
    const int64_t kind = rdag_int(&b->rng, 0, 2);
    if (kind >= 1) ne[1] = ne[2] = ne[3] = 1;   // one row, added to every row
    if (kind == 2) ne[0] = 1;                   // one element
    // Divisors stay away from zero so that no inf or NaN hides a wrong value.
    return for_div ? rdag_weight(b, ne, 1.0f, 2.0f) : rdag_weight(b, ne, -1.0f, 1.0f);
}

static inline void rdag_binary(struct rdag_builder * b) {
    static const enum mg_op ops[4] = {MG_OP_ADD, MG_OP_SUB, MG_OP_MUL, MG_OP_DIV};
    const enum mg_op op = ops[rdag_int(&b->rng, 0, 3)];
    struct mg_context * ctx = b->d->ctx;
    const int           ia  = rdag_pick(b);
    struct mg_tensor *  a   = b->pool[ia];
    struct mg_tensor *  c   = rdag_second_operand(b, a, op == MG_OP_DIV);
    // Never in place over bytes the op also reads through another view: the
    // result would depend on the order rows are written (and on threads).
    const bool inplace = rdag_is_computed(a) && rdag_storage(c) != rdag_storage(a) && rdag_chance(&b->rng, 25);
    struct mg_tensor * t = NULL;
    switch (op) {
        case MG_OP_ADD: t = inplace ? mg_add_inplace(ctx, a, c) : mg_add(ctx, a, c); break;
        case MG_OP_SUB: t = inplace ? mg_sub_inplace(ctx, a, c) : mg_sub(ctx, a, c); break;
        case MG_OP_MUL: t = inplace ? mg_mul_inplace(ctx, a, c) : mg_mul(ctx, a, c); break;
        default:        t = inplace ? mg_div_inplace(ctx, a, c) : mg_div(ctx, a, c); break;
    }
    rdag_push(b, t, false);
}

static inline void rdag_unary(struct rdag_builder * b) {
    struct mg_context * ctx = b->d->ctx;
    const int           ia  = rdag_pick(b);
    struct mg_tensor *  a   = b->pool[ia];
    const bool inplace = rdag_is_computed(a) && rdag_chance(&b->rng, 25);
    struct mg_tensor * t = NULL;
    bool nonneg = false;
    switch (rdag_int(&b->rng, 0, 8)) {
        case 0: {
            const float s = mg_test_rand_uniform(&b->rng, -1.5f, 1.5f);
            t = inplace ? mg_scale_inplace(ctx, a, s) : mg_scale(ctx, a, s);
            break;
        }
        case 1: t = inplace ? mg_sqr_inplace(ctx, a) : mg_sqr(ctx, a); nonneg = true; break;
        case 2: t = inplace ? mg_relu_inplace(ctx, a) : mg_relu(ctx, a); nonneg = true; break;
        case 3: t = inplace ? mg_silu_inplace(ctx, a) : mg_silu(ctx, a); break;
        case 4: t = inplace ? mg_gelu_inplace(ctx, a) : mg_gelu(ctx, a); break;
        case 5: t = inplace ? mg_rms_norm_inplace(ctx, a, 1e-5f) : mg_rms_norm(ctx, a, 1e-5f); break;
        case 6:
            // The soft_max kernel writes whole rows through nb[0] == 4.
            if (inplace && a->nb[0] == sizeof(float)) t = mg_soft_max_inplace(ctx, a);
            else t = mg_soft_max(ctx, a);
            nonneg = true;
            break;
        case 7: t = mg_sum_rows(ctx, a); break;
        default:
            if (!b->nonneg[ia]) return;
            t = inplace ? mg_sqrt_inplace(ctx, a) : mg_sqrt(ctx, a);
            nonneg = true;
            break;
    }
    rdag_push(b, t, nonneg);
}

// a's matrices are shared by b's (b->ne[2] a multiple of a->ne[2]), as in GQA.
static inline bool rdag_mul_mat_fits(const struct mg_tensor * a, const struct mg_tensor * b) {
    return a->ne[0] == b->ne[0] && a->nb[0] == sizeof(float) && !mg_is_transposed(a) && b->ne[2] % a->ne[2] == 0 &&
           b->ne[3] % a->ne[3] == 0;
}

static inline void rdag_mul_mat(struct rdag_builder * b) {
    const int ib = rdag_pick(b);
    struct mg_tensor * y = b->pool[ib];
    if (y->nb[0] != sizeof(float)) y = mg_cont(b->d->ctx, y);   // the kernel reads rows of b contiguously
    struct mg_tensor * w = NULL;
    if (rdag_chance(&b->rng, 40)) {
        for (int i = b->n_pool - 1; i >= 0 && w == NULL; i--) {
            if (b->pool[i] != y && rdag_mul_mat_fits(b->pool[i], y)) w = b->pool[i];
        }
    }
    if (w == NULL) {
        const int64_t ne[4] = {y->ne[0], rdag_int(&b->rng, 1, 7), rdag_chance(&b->rng, 30) ? 1 : y->ne[2], 1};
        w = rdag_weight(b, ne, -1.0f, 1.0f);
    }
    rdag_push(b, mg_mul_mat(b->d->ctx, w, y), false);
}

static inline void rdag_view(struct rdag_builder * b) {
    struct mg_context * ctx = b->d->ctx;
    const int           ia  = rdag_pick(b);
    struct mg_tensor *  a   = b->pool[ia];
    struct mg_tensor *  t   = NULL;
    switch (rdag_int(&b->rng, 0, 4)) {
        case 0: t = mg_transpose(ctx, a); break;
        case 1: t = mg_permute(ctx, a, 1, 2, 0, 3); break;
        case 2: t = mg_cont(ctx, a); break;
        case 3:
            if (!mg_is_contiguous(a)) return;
            if (a->ne[0] % 2 == 0) t = mg_reshape_3d(ctx, a, a->ne[0] / 2, 2 * a->ne[1], a->ne[2] * a->ne[3]);
            else t = mg_reshape_2d(ctx, a, a->ne[0] * a->ne[1], a->ne[2] * a->ne[3]);
            break;
        default: {
            if (!mg_is_contiguous(a) || a->ne[2] * a->ne[3] != 1 || a->ne[1] < 2) return;
            const int64_t r0 = rdag_int(&b->rng, 0, a->ne[1] - 1);
            const int64_t n  = rdag_int(&b->rng, 1, a->ne[1] - r0);
            t = mg_view_2d(ctx, a, a->ne[0], n, a->nb[1], (size_t) r0 * a->nb[1]);
            break;
        }
    }
    rdag_push(b, t, b->nonneg[ia]);
}

static inline void rdag_add_result(struct rdag * d, struct mg_tensor * t) {
    for (int i = 0; i < d->n_results; i++) {
        if (d->results[i] == t) return;
    }
    if (d->n_results < RDAG_MAX_RESULTS) d->results[d->n_results++] = t;
}

// A random graph of about n_ops ops. Inputs have no data until placed.
static inline struct rdag rdag_new(uint64_t seed, int n_ops) {
    struct rdag d = {0};
    d.ctx  = mg_init((struct mg_init_params) {.mem_size = 1024 * 1024, .no_alloc = true});
    d.wctx = mg_init((struct mg_init_params) {.mem_size = 1024 * 1024});
    ck_assert_ptr_nonnull(d.ctx);
    ck_assert_ptr_nonnull(d.wctx);
    struct rdag_builder b = {.d = &d, .rng = seed * 0x9E3779B97F4A7C15ull + 1};

    d.n_inputs = (int) rdag_int(&b.rng, 1, RDAG_MAX_INPUTS);
    for (int i = 0; i < d.n_inputs; i++) {
        struct mg_tensor * in = mg_new_tensor_3d(d.ctx, MG_TYPE_F32, rdag_int(&b.rng, 1, 8), rdag_int(&b.rng, 1, 4),
                                                 rdag_int(&b.rng, 1, 2));
        mg_format_name(in, "in%d", i);
        in->flags |= MG_TENSOR_FLAG_INPUT;
        d.inputs[i] = in;
        rdag_push(&b, in, false);
    }
    for (int i = 0; i < n_ops; i++) {
        const int64_t kind = rdag_int(&b.rng, 0, 9);
        if (kind < 3) rdag_binary(&b);
        else if (kind < 6) rdag_unary(&b);
        else if (kind < 8) rdag_mul_mat(&b);
        else rdag_view(&b);
    }

    // Roots: the newest tensor and a few others; intermediates may be OUTPUTs too.
    d.g = mg_new_graph_custom(d.ctx, RDAG_GRAPH_SIZE);
    rdag_add_result(&d, b.pool[b.n_pool - 1]);
    const int n_roots = (int) rdag_int(&b.rng, 0, 3);
    for (int i = 0; i < n_roots; i++) rdag_add_result(&d, b.pool[rdag_int(&b.rng, 0, b.n_pool - 1)]);
    for (int i = 0; i < d.n_results; i++) mg_build_forward_expand(d.g, d.results[i]);
    // A result that other nodes read is freed after its last reader unless
    // flagged: the caller reads it after compute, so it is an OUTPUT.
    for (int i = 0; i < d.n_results; i++) {
        struct mg_tensor * s = rdag_storage(d.results[i]);
        if (mg_graph_use_count(d.g, d.results[i]) > 0 && s->op != MG_OP_NONE) s->flags |= MG_TENSOR_FLAG_OUTPUT;
    }
    // An input no op reads is still the caller's: it stays in the graph, as a leaf.
    for (int i = 0; i < d.n_inputs; i++) mg_build_forward_expand(d.g, d.inputs[i]);
    for (int i = 0; i < d.g->n_nodes; i++) {
        struct mg_tensor * t = d.g->nodes[i];
        if (t->view_src == NULL && rdag_chance(&b.rng, 15)) {
            t->flags |= MG_TENSOR_FLAG_OUTPUT;
            rdag_add_result(&d, t);
        }
    }
    return d;
}

static inline void rdag_free(struct rdag * d) {
    mg_free(d->ctx);
    mg_free(d->wctx);
}

// Inputs get values from a seed, the same whatever their bytes' address.
static inline void rdag_set_inputs(struct rdag * d, uint64_t seed) {
    for (int i = 0; i < d->n_inputs; i++) {
        uint64_t rng = seed + (uint64_t) i * 7919;
        mg_test_fill_uniform(d->inputs[i]->data, (size_t) mg_nelements(d->inputs[i]), &rng, -1.0f, 1.0f);
    }
}

// Every result's values, read through its strides, in logical order.
static inline size_t rdag_results_count(const struct rdag * d) {
    size_t n = 0;
    for (int i = 0; i < d->n_results; i++) n += (size_t) mg_nelements(d->results[i]);
    return n;
}

static inline float * rdag_collect_results(const struct rdag * d) {
    float * out = malloc((rdag_results_count(d) + 1) * sizeof(float));
    ck_assert_ptr_nonnull(out);
    size_t k = 0;
    for (int r = 0; r < d->n_results; r++) {
        const struct mg_tensor * t = d->results[r];
        for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
            for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
                for (int64_t i1 = 0; i1 < t->ne[1]; i1++)
                    for (int64_t i0 = 0; i0 < t->ne[0]; i0++) out[k++] = mg_get_f32_nd(t, i0, i1, i2, i3);
    }
    return out;
}

// Chapter 04's way: every result, and every input, its own malloc'd bytes.
// Returns the blocks to free; views point into their sources.
static inline void ** rdag_place_naive(struct rdag * d) {
    void ** blocks = calloc((size_t) (d->g->n_nodes + d->n_inputs + 1), sizeof(void *));
    ck_assert_ptr_nonnull(blocks);
    int n = 0;
    for (int i = 0; i < d->n_inputs; i++) d->inputs[i]->data = blocks[n++] = malloc(mg_nbytes(d->inputs[i]));
    for (int i = 0; i < d->g->n_nodes; i++) {
        struct mg_tensor * t = d->g->nodes[i];
        if (t->view_src != NULL) {
            t->data = (char *) t->view_src->data + t->view_offs;
        } else {
            t->data = blocks[n++] = malloc(mg_nbytes(t));
            ck_assert_ptr_nonnull(t->data);
        }
    }
    return blocks;
}

// Forget every placement, so that a new one starts from scratch.
static inline void rdag_unplace(struct rdag * d, void ** blocks) {
    for (int i = 0; i < d->n_inputs; i++) d->inputs[i]->data = NULL;
    for (int i = 0; i < d->g->n_nodes; i++) d->g->nodes[i]->data = NULL;
    if (blocks != NULL) {
        for (int i = 0; blocks[i] != NULL; i++) free(blocks[i]);
        free(blocks);
    }
}
