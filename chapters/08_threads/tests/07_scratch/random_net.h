// random_net.h - random stacks of layers that use every kernel with scratch:
// matmuls with F32, F16, Q8_0 and Q4_0 weights, softmax, masked softmax,
// rope, rms_norm, silu, bias adds, and a matmul through a transpose. Every
// result gets its own malloc'd bytes (chapter 04's placement), so a test can
// run and inspect the nodes in any way it likes. Uses only what chapter 07
// has; the thread tests of chapter 08 use it too.
//
// Header-only on purpose: every test file is its own program (tools/engine.mk);
// static inline, so that a file using only some of it compiles without warnings.
#pragma once

#include "harness.h"
#include "mg.h"

#include <stdlib.h>
#include <string.h>

static inline uint64_t rnd(uint64_t * rng, uint64_t n) {
    return mg_test_rand_u64(rng) % n;
}

// A {ne0, ne1} tensor of the given type holding uniform values in [-1, 1].
static inline struct mg_tensor * random_tensor(struct mg_context * ctx, enum mg_type type, int64_t ne0, int64_t ne1,
                                               uint64_t * rng) {
    struct mg_tensor * t = mg_new_tensor_2d(ctx, type, ne0, ne1);
    float *            f = malloc(sizeof(float) * (size_t) (ne0 * ne1));
    mg_test_fill_uniform(f, (size_t) (ne0 * ne1), rng, -1.0f, 1.0f);
    if (type == MG_TYPE_F32) memcpy(t->data, f, sizeof(float) * (size_t) (ne0 * ne1));
    else mg_get_type_traits(type)->from_float(f, t->data, ne0 * ne1);
    free(f);
    return t;
}

struct net {
    struct mg_context * ctx;
    struct mg_cgraph *  g;
    void **             blocks;   // every result's own bytes
    int                 n_blocks;
};

// One layer on cur {K, batch}: a matmul to {next, batch}, then one of six tails.
static inline struct mg_tensor * random_layer(struct mg_context * ctx, struct mg_tensor * cur, uint64_t * rng) {
    static const enum mg_type types[4] = {MG_TYPE_F32, MG_TYPE_F16, MG_TYPE_Q8_0, MG_TYPE_Q4_0};
    const int64_t batch = cur->ne[1];
    const int64_t next  = 32 * (1 + (int64_t) rnd(rng, 4));
    cur = mg_mul_mat(ctx, random_tensor(ctx, types[rnd(rng, 4)], cur->ne[0], next, rng), cur);   // {next, batch}
    switch (rnd(rng, 6)) {
        case 0: return mg_soft_max(ctx, mg_scale(ctx, cur, 0.5f));
        case 1: {   // a causal-style mask over the rows
            struct mg_tensor * mask = mg_new_tensor_2d(ctx, MG_TYPE_F32, next, batch);
            mg_kv_cache_fill_mask(mask, (int) (next - batch), (int) batch);
            return mg_soft_max_ext(ctx, cur, mask, 0.25f);
        }
        case 2: {   // rope over heads of 16
            struct mg_tensor * pos = mg_new_tensor_1d(ctx, MG_TYPE_I32, batch);
            for (int64_t t = 0; t < batch; t++) mg_set_i32_1d(pos, t, (int32_t) (3 * t + 1));
            struct mg_tensor * r = mg_rope(ctx, mg_reshape_3d(ctx, cur, 16, next / 16, batch), pos, 16, MG_ROPE_NEOX,
                                           10000.0f, 1.0f);
            return mg_reshape_2d(ctx, r, next, batch);
        }
        case 3: return mg_rms_norm(ctx, mg_silu(ctx, cur), 1e-6f);
        case 4: return mg_add(ctx, cur, random_tensor(ctx, MG_TYPE_F32, next, 1, rng));
        default: {   // through a transpose and back: b rows made contiguous by cont
            struct mg_tensor * t = mg_cont(ctx, mg_transpose(ctx, cur));   // {batch, next}
            struct mg_tensor * m = mg_mul_mat(ctx, random_tensor(ctx, MG_TYPE_F32, batch, batch, rng), t);
            return mg_cont(ctx, mg_transpose(ctx, m));   // {next, batch}
        }
    }
}

// Two to five layers on a random {32..128, 1..6} input, placed.
static inline struct net net_new(uint64_t seed) {
    struct net n = {0};
    uint64_t rng = seed * 1000003;
    n.ctx = mg_init((struct mg_init_params) {.mem_size = 4 * 1024 * 1024});
    ck_assert_ptr_nonnull(n.ctx);
    struct mg_tensor * cur = random_tensor(n.ctx, MG_TYPE_F32, 32 * (1 + (int64_t) rnd(&rng, 4)),
                                           1 + (int64_t) rnd(&rng, 6), &rng);
    const int n_layers = 2 + (int) rnd(&rng, 4);
    for (int l = 0; l < n_layers; l++) cur = random_layer(n.ctx, cur, &rng);
    n.g = mg_new_graph(n.ctx);
    mg_build_forward_expand(n.g, cur);

    // Chapter 04's placement: every result its own bytes, so nothing is shared.
    n.blocks = calloc((size_t) n.g->n_nodes, sizeof(void *));
    for (int i = 0; i < n.g->n_nodes; i++) {
        struct mg_tensor * t = n.g->nodes[i];
        if (t->view_src != NULL) {
            t->data = (char *) t->view_src->data + t->view_offs;
        } else {
            t->data = n.blocks[n.n_blocks++] = malloc(mg_nbytes(t));
            ck_assert_ptr_nonnull(t->data);
        }
    }
    return n;
}

static inline void net_free(struct net * n) {
    for (int i = 0; i < n->n_blocks; i++) free(n->blocks[i]);
    free(n->blocks);
    mg_free(n->ctx);
}
