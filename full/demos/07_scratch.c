//@file 07
// Chapter 07 demo: a network with F16, Q8_0 and Q4_0 weights. Its matmuls
// convert their activations in a shared work buffer, planned once as the max
// over nodes; and their results stay close to a plain F32 computation. Last,
// why the float order of a dot product matters: four orders of the same sum,
// and the Q8_0 codes that flip when a layer is summed in another order.
#include "mg.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

// ---------------------------------------------------------------------------
// Summation order. Float addition rounds after every step, so the same terms
// added in another order give another float. Each function below is one order
// a real kernel uses for the n products of a dot product (n a multiple of 32).
// ---------------------------------------------------------------------------

enum { ORDER_N = 1024, ORDER_ROWS = 16 * 1024 };   // Qwen3-0.6B's width; 16 tokens x 1024 outputs

// One running sum, term after term: this chapter's mg_vec_dot_f32, and any naive loop.
static float sum_in_order(const float * p, int n) {
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += p[i];
    return s;
}

// Halves, added recursively: a tree, what a reduction split between threads ends in.
static float sum_pairwise(const float * p, int n) {
    return n == 1 ? p[0] : sum_pairwise(p, n / 2) + sum_pairwise(p + n / 2, n - n / 2);
}

// 8 lanes, lane l adding terms l, l+8, ...; then the lanes folded as its hsum
// does: llamafile's tinyBLAS on AVX2 (sgemm.cpp), llama.cpp's F32 prompt path.
static float sum_lanes_8(const float * p, int n) {
    float l[8] = {0};
    for (int i = 0; i < n; i += 8) {
        for (int j = 0; j < 8; j++) l[j] += p[i + j];
    }
    return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}

// 4 registers of 8 lanes, then folded as GGML_F32x8_REDUCE does:
// ggml_vec_dot_f32 on AVX2 (vec.cpp), llama.cpp's path for one token.
static float sum_lanes_32(const float * p, int n) {
    float r[4][8] = {{0}};
    for (int i = 0; i < n; i += 32) {
        for (int k = 0; k < 4; k++) {
            for (int j = 0; j < 8; j++) r[k][j] += p[i + 8 * k + j];
        }
    }
    for (int j = 0; j < 8; j++) {
        r[0][j] += r[2][j];
        r[1][j] += r[3][j];
    }
    for (int j = 0; j < 8; j++) r[0][j] += r[1][j];
    float t[4];
    for (int j = 0; j < 4; j++) t[j] = r[0][j] + r[0][j + 4];
    return (t[0] + t[1]) + (t[2] + t[3]);
}

// The demo's own generator (xorshift64*), so this part does not depend on rand().
static float uniform(uint64_t * s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return (float) ((*s * 2685821657736338717ull) >> 40) / 16777216.0f - 0.5f;
}

static uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

// The products w[i] * x[i] of one dot product: weights in +-0.1, activations in +-1.
static void products(uint64_t * s, float * p) {
    for (int i = 0; i < ORDER_N; i++) {
        const float w = 0.2f * uniform(s), x = 2.0f * uniform(s);
        p[i] = w * x;
    }
}

// A layer's outputs summed in two orders, quantized to Q8_0 as the next
// matmul's activations are (mg_quantize_row_q8_0, 32 outputs per block):
// how many floats differ, how many codes flip, and the first flip.
static void order_flips_codes(float * p) {
    float *                a  = malloc(ORDER_ROWS * sizeof(float)), * b = malloc(ORDER_ROWS * sizeof(float));
    struct mg_block_q8_0 * qa = malloc(ORDER_ROWS / MG_QK8_0 * sizeof(*qa));
    struct mg_block_q8_0 * qb = malloc(ORDER_ROWS / MG_QK8_0 * sizeof(*qb));
    uint64_t s = 42;
    int n_differ = 0, n_flips = 0, first = -1;
    for (int o = 0; o < ORDER_ROWS; o++) {
        products(&s, p);
        a[o] = sum_in_order(p, ORDER_N);
        b[o] = sum_lanes_8(p, ORDER_N);
        n_differ += a[o] != b[o];
    }
    mg_quantize_row_q8_0(a, qa, ORDER_ROWS);
    mg_quantize_row_q8_0(b, qb, ORDER_ROWS);
    for (int o = 0; o < ORDER_ROWS; o++) {
        if (qa[o / MG_QK8_0].qs[o % MG_QK8_0] == qb[o / MG_QK8_0].qs[o % MG_QK8_0]) continue;
        if (first < 0) first = o;
        n_flips++;
    }
    printf("%d outputs (16 tokens x 1024 rows, %d terms each), in order and in 8 lanes: %d of them differ\n",
           ORDER_ROWS, ORDER_N, n_differ);
    printf("quantized to Q8_0 for the next matmul: %d of %d codes differ\n", n_flips, ORDER_ROWS);
    if (first >= 0) {
        // The quantizer scales by 127/amax (mg_quantize_row_q8_0), amax over the 32 outputs of the block.
        const int blk = first / MG_QK8_0, j = first % MG_QK8_0;
        float amax_a = 0.0f, amax_b = 0.0f;
        for (int i = blk * MG_QK8_0; i < (blk + 1) * MG_QK8_0; i++) {
            amax_a = fmaxf(amax_a, fabsf(a[i]));
            amax_b = fmaxf(amax_b, fabsf(b[i]));
        }
        const float da = mg_fp16_to_fp32(qa[blk].d), db = mg_fp16_to_fp32(qb[blk].d);
        printf("output %d: %.9f in order, %.9f in 8 lanes (%d ulps apart)\n", first, (double) a[first],
               (double) b[first], abs((int) (bits_of(a[first]) - bits_of(b[first]))));
        printf("  its block's amax is %s; x * 127/amax = %.6f and %.6f: codes %d and %d\n",
               amax_a == amax_b ? "the same in both" : "a little different too",
               (double) (a[first] * (127.0f / amax_a)), (double) (b[first] * (127.0f / amax_b)), qa[blk].qs[j],
               qb[blk].qs[j]);
        printf("  the next matmul reads code * d = %.6f and %.6f: %.0f times the floats' difference\n",
               (double) (qa[blk].qs[j] * da), (double) (qb[blk].qs[j] * db),
               (double) (fabsf(qa[blk].qs[j] * da - qb[blk].qs[j] * db) / fabsf(a[first] - b[first])));
    }
    free(a);
    free(b);
    free(qa);
    free(qb);
}

static void summation_order(void) {
    printf("\n== Summation order: one dot product of %d products, four orders ==\n", ORDER_N);
    float *  p = malloc(ORDER_N * sizeof(float));
    uint64_t s = 42;
    products(&s, p);
    const struct {
        const char * name;
        float (*sum)(const float *, int);
    } orders[] = {
        {"in order (this chapter's vec_dot_f32)", sum_in_order},
        {"pairwise (halves of halves)", sum_pairwise},
        {"8 lanes (tinyBLAS, AVX2: a prompt)", sum_lanes_8},
        {"32 lanes (ggml_vec_dot_f32, AVX2: a token)", sum_lanes_32},
    };
    for (int k = 0; k < 4; k++) {
        const float r = orders[k].sum(p, ORDER_N);
        printf("%-44s %.9f  (bits 0x%08x)\n", orders[k].name, (double) r, bits_of(r));
    }
    order_flips_codes(p);
    free(p);
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
    summation_order();
    return 0;
}
