// Generated from full/demos/06_kvcache.c by tools/chapgen. In a class, edit this copy freely (make chapters will not overwrite your edits); to change the engine, edit full/demos/06_kvcache.c and run make chapters.
// Chapter 06 demo: one attention layer generating step by step, once with a
// KV cache and once recomputing everything: the same outputs, very different work.
#include "mg.h"
#include "kv_cache.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

enum { N_EMBD = 64, N_HEAD = 4, N_HEAD_KV = 2, HEAD_DIM = 16, N_STEPS = 8 };

struct layer {
    struct mg_tensor * wq, * wk, * wv, * wo;   // {N_EMBD, rows}: one row per output
};

static float pseudo_random(uint32_t * state) {
    *state = *state * 1664525u + 1013904223u;
    return (float) (*state >> 8) / (float) (1u << 24) - 0.5f;
}

static struct mg_tensor * random_matrix(struct mg_context * ctx, int64_t ne0, int64_t ne1, const char * name,
                                        uint32_t * seed) {
    struct mg_tensor * t = mg_set_name(mg_new_tensor_2d(ctx, MG_TYPE_F32, ne0, ne1), name);
    for (int64_t i = 0; i < mg_nelements(t); i++) mg_set_f32_1d(t, i, pseudo_random(seed) * 0.5f);
    return t;
}

// Multiply-adds of a graph: each mul_mat output element is one row-length dot product.
static long long count_macs(const struct mg_cgraph * g) {
    long long macs = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const struct mg_tensor * t = g->nodes[i];
        if (t->op == MG_OP_MUL_MAT) macs += (long long) t->src[0]->ne[0] * mg_nelements(t);
    }
    return macs;
}

static struct mg_tensor * positions(struct mg_context * ctx, int pos0, int n) {
    struct mg_tensor * pos = mg_set_name(mg_new_tensor_1d(ctx, MG_TYPE_I32, n), "pos");
    for (int i = 0; i < n; i++) mg_set_i32_1d(pos, i, pos0 + i);
    return pos;
}

// Q, K, V of tokens x ({N_EMBD, T}), rotated to their positions.
static void project(struct mg_context * ctx, const struct layer * L, struct mg_tensor * x, struct mg_tensor * pos,
                    struct mg_tensor ** q, struct mg_tensor ** k, struct mg_tensor ** v) {
    const int64_t T = x->ne[1];
    *q = mg_reshape_3d(ctx, mg_mul_mat(ctx, L->wq, x), HEAD_DIM, N_HEAD, T);
    *k = mg_reshape_3d(ctx, mg_mul_mat(ctx, L->wk, x), HEAD_DIM, N_HEAD_KV, T);
    *v = mg_reshape_3d(ctx, mg_mul_mat(ctx, L->wv, x), HEAD_DIM, N_HEAD_KV, T);
    *q = mg_rope(ctx, *q, pos, HEAD_DIM, MG_ROPE_NEOX, 10000.0f, 1.0f);
    *k = mg_rope(ctx, *k, pos, HEAD_DIM, MG_ROPE_NEOX, 10000.0f, 1.0f);
}

// Step p with the cache: one token in, its K and V stored, attention over p+1.
static long long step_with_cache(const struct layer * L, struct mg_kv_cache * kv, const float * x_p, int p,
                                 float * out) {
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 8 * 1024 * 1024});
    struct mg_tensor *  x   = mg_new_tensor_2d(ctx, MG_TYPE_F32, N_EMBD, 1);
    memcpy(x->data, x_p, N_EMBD * sizeof(float));
    struct mg_tensor * q, * k, * v;
    project(ctx, L, x, positions(ctx, p, 1), &q, &k, &v);

    struct mg_cgraph * g = mg_new_graph(ctx);
    mg_kv_cache_store(ctx, g, kv, 0, k, v, p);
    const int          n_kv = mg_kv_cache_n_kv(kv, p + 1);
    struct mg_tensor * mask = mg_new_tensor_2d(ctx, MG_TYPE_F32, n_kv, 1);
    mg_kv_cache_fill_mask(mask, p, 1);
    struct mg_tensor * k_all = mg_kv_cache_k(ctx, kv, 0, n_kv);   // positions 0..p, this one included
    struct mg_tensor * v_all = mg_kv_cache_v(ctx, kv, 0, n_kv);
    struct mg_tensor * attn  = mg_attn(ctx, q, k_all, v_all, mask, 1.0f / sqrtf(HEAD_DIM));
    struct mg_tensor * y = mg_mul_mat(ctx, L->wo, attn);
    mg_build_forward_expand(g, y);
    mg_graph_compute_with_ctx(ctx, g, 1);
    memcpy(out, y->data, N_EMBD * sizeof(float));
    const long long macs = count_macs(g);
    mg_free(ctx);
    return macs;
}

// Step p without it: all p+1 tokens again, with a causal mask, keep the last output.
static long long step_without_cache(const struct layer * L, const float (*xs)[N_EMBD], int p, float * out) {
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 8 * 1024 * 1024});
    const int           T   = p + 1;
    struct mg_tensor *  x   = mg_new_tensor_2d(ctx, MG_TYPE_F32, N_EMBD, T);
    memcpy(x->data, xs, (size_t) T * N_EMBD * sizeof(float));
    struct mg_tensor * q, * k, * v;
    project(ctx, L, x, positions(ctx, 0, T), &q, &k, &v);
    struct mg_tensor * mask = mg_new_tensor_2d(ctx, MG_TYPE_F32, T, T);
    mg_kv_cache_fill_mask(mask, 0, T);
    struct mg_tensor * k_heads = mg_permute(ctx, k, 0, 2, 1, 3);                   // {D, T, Hkv}
    struct mg_tensor * v_rows  = mg_cont(ctx, mg_permute(ctx, v, 1, 2, 0, 3));     // {T, D, Hkv}
    struct mg_tensor * attn    = mg_attn(ctx, q, k_heads, v_rows, mask, 1.0f / sqrtf(HEAD_DIM));
    struct mg_tensor * y       = mg_mul_mat(ctx, L->wo, attn);
    struct mg_cgraph * g       = mg_new_graph(ctx);
    mg_build_forward_expand(g, y);
    mg_graph_compute_with_ctx(ctx, g, 1);
    memcpy(out, (const char *) y->data + (size_t) p * y->nb[1], N_EMBD * sizeof(float));
    const long long macs = count_macs(g);
    mg_free(ctx);
    return macs;
}

int main(void) {
    uint32_t seed = 42;
    struct mg_context * wctx = mg_init((struct mg_init_params) {.mem_size = 1024 * 1024});
    const struct layer L = {
        .wq = random_matrix(wctx, N_EMBD, N_HEAD * HEAD_DIM, "wq", &seed),
        .wk = random_matrix(wctx, N_EMBD, N_HEAD_KV * HEAD_DIM, "wk", &seed),
        .wv = random_matrix(wctx, N_EMBD, N_HEAD_KV * HEAD_DIM, "wv", &seed),
        .wo = random_matrix(wctx, N_HEAD * HEAD_DIM, N_EMBD, "wo", &seed),
    };
    float xs[N_STEPS][N_EMBD];
    for (int t = 0; t < N_STEPS; t++) {
        for (int i = 0; i < N_EMBD; i++) xs[t][i] = pseudo_random(&seed);
    }

    struct mg_kv_cache * kv = mg_kv_cache_new(1, 64, HEAD_DIM, N_HEAD_KV, MG_TYPE_F32, 1);
    printf("== One attention layer (%d heads sharing %d KV heads, head_dim %d), %d decode steps ==\n", N_HEAD,
           N_HEAD_KV, HEAD_DIM, N_STEPS);
    printf("%4s  %10s  %12s  %12s\n", "step", "max |diff|", "MACs cached", "MACs recomp.");
    long long total_cached = 0, total_recomputed = 0;
    for (int p = 0; p < N_STEPS; p++) {
        float with[N_EMBD], without[N_EMBD];
        const long long macs_with    = step_with_cache(&L, kv, xs[p], p, with);
        const long long macs_without = step_without_cache(&L, (const float (*)[N_EMBD]) xs, p, without);
        float max_diff = 0.0f;
        for (int i = 0; i < N_EMBD; i++) max_diff = fmaxf(max_diff, fabsf(with[i] - without[i]));
        printf("%4d  %10.2e  %12lld  %12lld\n", p, (double) max_diff, macs_with, macs_without);
        total_cached += macs_with;
        total_recomputed += macs_without;
    }
    printf("total MACs: %lld with the cache, %lld without (%.1fx)\n", total_cached, total_recomputed,
           (double) total_recomputed / (double) total_cached);
    printf("the cached step grows by %d MACs per position (Q.K and P.V); recomputing grows with the square\n",
           2 * N_HEAD * HEAD_DIM);

    printf("\n== What the cache costs ==\n");
    printf("bytes per token = 2 (K and V) x layers x KV heads x head_dim x bytes per value\n");
    printf("this layer:  2 x 1 x %d x %d x 4 (F32) = %zu bytes\n", N_HEAD_KV, HEAD_DIM,
           mg_kv_cache_bytes_per_token(kv));
    const size_t llama_7b = 2ull * 32 * 32 * 128 * 2;
    printf("a 7B model (32 layers, 32 KV heads, head_dim 128, F16): %zu bytes = %zu KiB per token, %.1f GiB at 4096\n",
           llama_7b, llama_7b / 1024, (double) llama_7b * 4096 / (1024.0 * 1024 * 1024));
    mg_kv_cache_free(kv);
    mg_free(wctx);
    return 0;
}
