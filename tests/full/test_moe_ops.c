// test_moe_ops.c - the ops of a mixture-of-experts layer (full/ops.h, "moe"):
// argsort, argsort_top_k, clamp, mul_mat_id, and the shapes a Qwen3-MoE
// layer gives get_rows, sum_rows, mul, div, add and swiglu.
//
// - argsort against a naive stable sort (ties: lower index first), ASC and
//   DESC, on rows with many ties, through strides, with 1 and 3 threads;
//   top_k is the first k of the DESC order, a view of the whole argsort;
// - clamp against min(max(x, lo), hi), with ggml's NaN -> hi;
// - mul_mat_id, for every weight type mul_mat takes, n_b = 1 and n_b =
//   n_used, T = 1 and 7, 1, 2 and 4 threads: every output to the bit what
//   mul_mat gives for that expert's matrix times that one column (what
//   ggml-cpu's mul_mat_id computes: one vec_dot per row and pick), and near
//   a double-precision product of the decoded weights;
// - the same with the experts' weights repacked (Q4_0, Q4_K, Q2_K where
//   this build repacks them, repack.c): to the bit the repacked mul_mat of
//   the expert's matrix, repacked on its own, times one column; and a plain
//   mul_mat of a repacked 3-D stack finds each expert's groups;
// - mul_mat_id against llama.cpp's own (tests/fixtures/moe/mul_mat_id.bin,
//   made by tools/llama-ref/mul_mat_id_ref.c on an AVX-512 CPU), to the bit,
//   every type, plain and from llama.cpp's CPU_REPACK buffer, on this level;
// - get_rows of {1, n_expert, T} by ids {n_used, T}, the router weights'
//   sum_rows / div / mul broadcasts, an add of two strided views and
//   swiglu on {F, n_used, T}, each against a naive loop;
// - a whole Qwen3-MoE FFN (router softmax, top_k view as ids, get_rows,
//   normalised weights, gate/up/down mul_mat_id, swiglu, the picks' strided
//   views added) against a double-precision loop, 1 and 3 threads alike.
#include "cpu_level.h"
#include "harness.h"
#include "mg.h"
#include "repack.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const enum mg_type WEIGHT_TYPES[] = {
    MG_TYPE_F32,  MG_TYPE_F16,  MG_TYPE_BF16, MG_TYPE_Q8_0, MG_TYPE_Q4_0, MG_TYPE_Q4_1, MG_TYPE_Q5_0,
    MG_TYPE_Q5_1, MG_TYPE_Q2_K, MG_TYPE_Q3_K, MG_TYPE_Q4_K, MG_TYPE_Q5_K, MG_TYPE_Q6_K, MG_TYPE_IQ4_NL,
};
#define N_WEIGHT_TYPES (sizeof(WEIGHT_TYPES) / sizeof(WEIGHT_TYPES[0]))

static struct mg_context * new_ctx(size_t mb) {
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = mb << 20});
    ck_assert_ptr_nonnull(ctx);
    return ctx;
}

// Compute t (marked as an output, so the allocator keeps it) with n threads.
static void compute(struct mg_context * ctx, struct mg_tensor * t, int n_threads) {
    t->flags |= MG_TENSOR_FLAG_OUTPUT;
    struct mg_cgraph * g = mg_new_graph(ctx);
    mg_build_forward_expand(g, t);
    mg_graph_compute_with_ctx(ctx, g, mg_test_threads(n_threads));
}

static struct mg_tensor * random_f32(struct mg_context * ctx, int64_t n0, int64_t n1, int64_t n2, float scale,
                                     uint64_t * rng) {
    struct mg_tensor * t = mg_new_tensor_3d(ctx, MG_TYPE_F32, n0, n1, n2);
    for (int64_t i = 0; i < mg_nelements(t); i++) ((float *) t->data)[i] = scale * mg_test_rand_normal(rng);
    return t;
}

// ---------------------------------------------------------------------------
// argsort, top_k, clamp
// ---------------------------------------------------------------------------

// Insertion sort of 0..n-1 by v: stable, so ties keep the lower index first.
static void naive_argsort(const float * v, int32_t * idx, int64_t n, bool desc) {
    for (int64_t i = 0; i < n; i++) {
        int64_t j = i;
        for (; j > 0 && (desc ? v[i] > v[idx[j - 1]] : v[i] < v[idx[j - 1]]); j--) idx[j] = idx[j - 1];
        idx[j] = (int32_t) i;
    }
}

// Rows of n values from a handful (many ties), read through a view whose
// rows have gaps, sorted both ways with 1 and 3 threads.
START_TEST(test_argsort_vs_naive) {
    const int64_t lengths[] = {1, 2, 7, 16, 33, 128};
    uint64_t      rng       = 7;
    for (size_t l = 0; l < sizeof(lengths) / sizeof(lengths[0]); l++) {
        const int64_t       n    = lengths[l];
        struct mg_context * ctx  = new_ctx(8);
        struct mg_tensor *  wide = mg_new_tensor_3d(ctx, MG_TYPE_F32, n + 3, 5, 2);
        for (int64_t i = 0; i < mg_nelements(wide); i++) {
            ((float *) wide->data)[i] = (float) (mg_test_rand_u64(&rng) % 5) - 2.0f;   // -2..2
        }
        struct mg_tensor * a = mg_view_3d(ctx, wide, n, 5, 2, wide->nb[1], wide->nb[2], 0);
        for (int order = 0; order < 2; order++) {
            for (int threads = 1; threads <= 3; threads += 2) {
                struct mg_tensor * s = mg_argsort(ctx, a, order == 0 ? MG_SORT_ORDER_ASC : MG_SORT_ORDER_DESC);
                ck_assert_int_eq(s->type, MG_TYPE_I32);
                compute(ctx, s, threads);
                for (int64_t r = 0; r < 10; r++) {
                    float   v[128];
                    int32_t want[128];
                    for (int64_t i = 0; i < n; i++) v[i] = mg_get_f32_nd(a, i, r % 5, r / 5, 0);
                    naive_argsort(v, want, n, order == 1);
                    const int32_t * got = (const int32_t *) mg_element_ptr(s, 0, r % 5, r / 5, 0);
                    for (int64_t i = 0; i < n; i++) {
                        ck_assert_msg(got[i] == want[i], "n %lld, %s, %d threads, row %lld: [%lld] is %d, want %d",
                                      (long long) n, order ? "DESC" : "ASC", threads, (long long) r, (long long) i,
                                      got[i], want[i]);
                    }
                }
            }
        }
        mg_free(ctx);
    }
}
END_TEST

// top_k: a {k, rows} view of a DESC argsort, its first k per row.
START_TEST(test_argsort_top_k) {
    uint64_t            rng = 11;
    struct mg_context * ctx = new_ctx(4);
    struct mg_tensor *  a   = random_f32(ctx, 60, 9, 1, 1.0f, &rng);   // the router's {n_expert, T}
    struct mg_tensor *  top = mg_argsort_top_k(ctx, a, 8);
    ck_assert_int_eq(top->op, MG_OP_VIEW);
    ck_assert_ptr_nonnull(top->view_src);
    ck_assert_int_eq(top->view_src->op, MG_OP_ARGSORT);
    ck_assert_ptr_eq(top->src[0], top->view_src);   // the builder names it through either
    ck_assert(top->ne[0] == 8 && top->ne[1] == 9 && top->ne[2] == 1);
    top->view_src->flags |= MG_TENSOR_FLAG_OUTPUT;
    compute(ctx, top, 2);
    for (int64_t t = 0; t < 9; t++) {
        int32_t want[60];
        naive_argsort((const float *) mg_element_ptr(a, 0, t, 0, 0), want, 60, true);
        for (int64_t i = 0; i < 8; i++) ck_assert_int_eq(*(const int32_t *) mg_element_ptr(top, i, t, 0, 0), want[i]);
    }
    mg_free(ctx);
}
END_TEST

START_TEST(test_clamp) {
    struct mg_context * ctx  = new_ctx(1);
    const float         in[] = {-5.0f, -1.0f, -0.5f, 0.0f, 0.25f, 1.0f, 7.0f, INFINITY, -INFINITY, NAN};
    const int64_t       n    = sizeof(in) / sizeof(in[0]);
    struct mg_tensor *  a    = mg_new_tensor_2d(ctx, MG_TYPE_F32, n, 2);
    for (int64_t i = 0; i < 2 * n; i++) ((float *) a->data)[i] = in[i % n] * (i < n ? 1.0f : 3.0f);
    struct mg_tensor * c = mg_clamp(ctx, a, -1.0f, 2.5f);
    compute(ctx, c, 2);
    for (int64_t i = 0; i < 2 * n; i++) {
        const float x    = ((const float *) a->data)[i];
        const float want = isnan(x) ? 2.5f : x < -1.0f ? -1.0f : x > 2.5f ? 2.5f : x;   // ggml: NaN -> max
        ck_assert_msg(((const float *) c->data)[i] == want, "clamp(%g) is %g, want %g", x, ((const float *) c->data)[i],
                      want);
    }
    mg_free(ctx);
}
END_TEST

// ---------------------------------------------------------------------------
// mul_mat_id
// ---------------------------------------------------------------------------

enum { K = 256, N = 24, N_AS = 6, N_USED = 3 };

static struct mg_tensor * random_experts(struct mg_context * ctx, enum mg_type type, uint64_t * rng) {
    struct mg_tensor * as = mg_new_tensor_3d(ctx, type, K, N, N_AS);
    float *            wf = malloc(sizeof(float) * K * N * N_AS);
    ck_assert_ptr_nonnull(wf);
    for (int64_t i = 0; i < K * N * N_AS; i++) wf[i] = mg_test_rand_normal(rng);
    if (type == MG_TYPE_F32) memcpy(as->data, wf, mg_nbytes(as));
    else mg_get_type_traits(type)->from_float(wf, as->data, K * N * N_AS);
    free(wf);
    return as;
}

// ids {N_USED, T}: distinct experts per token, as top_k picks them.
static struct mg_tensor * random_ids(struct mg_context * ctx, int64_t T, uint64_t * rng) {
    struct mg_tensor * ids = mg_new_tensor_2d(ctx, MG_TYPE_I32, N_USED, T);
    for (int64_t t = 0; t < T; t++) {
        int32_t * col = (int32_t *) ids->data + t * N_USED;
        for (int i = 0; i < N_USED; i++) {
            bool again;
            do {
                col[i] = (int32_t) (mg_test_rand_u64(rng) % N_AS);
                again  = false;
                for (int j = 0; j < i; j++) again |= col[j] == col[i];
            } while (again);
        }
    }
    return ids;
}

// The weight matrix mul_mat compares against: expert e's slice, as a view
// of as, or (repacked) a 2-D tensor of its own, repacked on its own.
static struct mg_tensor * expert_matrix(struct mg_context * ctx, struct mg_tensor * as, int64_t e, bool repacked,
                                        void ** copy) {
    if (!repacked) return mg_view_2d(ctx, as, K, N, as->nb[1], (size_t) e * as->nb[2]);
    struct mg_tensor * w = mg_new_tensor_2d(ctx, as->type, K, N);
    memcpy(w->data, (const char *) as->data + (size_t) e * as->nb[2], mg_nbytes(w));
    ck_assert(mg_repack_fits(w));
    *copy = malloc(mg_nbytes(w));
    ck_assert_ptr_nonnull(*copy);
    mg_repack(*copy, w);
    w->repacked = *copy;
    return w;
}

// out[:, i, t] against mul_mat(expert ids[i, t], column (i % n_b, t) of b),
// every element to the bit; each product a graph of its own, one column.
static void check_like_dense(struct mg_context * ctx, struct mg_tensor * as, struct mg_tensor * b,
                             struct mg_tensor * ids, const struct mg_tensor * out, bool repacked, const char * what) {
    const int64_t T = ids->ne[1];
    for (int64_t t = 0; t < T; t++) {
        for (int64_t i = 0; i < N_USED; i++) {
            const int32_t      e    = ((const int32_t *) ids->data)[t * N_USED + i];
            void *             copy = NULL;
            struct mg_tensor * w    = expert_matrix(ctx, as, e, repacked, &copy);
            struct mg_tensor * col  = mg_view_2d(ctx, b, K, 1, b->nb[1], (size_t) (i % b->ne[1]) * b->nb[1] + t * b->nb[2]);
            struct mg_tensor * y    = mg_mul_mat(ctx, w, col);
            compute(ctx, y, 1);
            for (int64_t r = 0; r < N; r++) {
                const float got = *(const float *) mg_element_ptr(out, r, i, t, 0), want = ((const float *) y->data)[r];
                ck_assert_msg(memcmp(&got, &want, sizeof(float)) == 0,
                              "%s %s: out[%lld, %lld, %lld] (expert %d) is %.9g, mul_mat gives %.9g", what,
                              mg_type_name(as->type), (long long) r, (long long) i, (long long) t, e, got, want);
            }
            free(copy);
        }
    }
}

// out against sum_k w[k] x[k] in double on the decoded weights: the rounding
// of the activations (to Q8_0 / Q8_K / F16 / BF16) stays within 1% of the
// sum of |w x|, and a wrong expert or column is far outside it.
static void check_near_exact(const struct mg_tensor * as, const struct mg_tensor * b, const struct mg_tensor * ids,
                             const struct mg_tensor * out) {
    float * w = malloc(sizeof(float) * K);
    ck_assert_ptr_nonnull(w);
    for (int64_t t = 0; t < ids->ne[1]; t++) {
        for (int64_t i = 0; i < N_USED; i++) {
            const int32_t e = ((const int32_t *) ids->data)[t * N_USED + i];
            const float * x = (const float *) ((const char *) b->data + (i % b->ne[1]) * b->nb[1] + t * b->nb[2]);
            for (int64_t r = 0; r < N; r++) {
                mg_get_type_traits(as->type)->to_float((const char *) as->data + r * as->nb[1] + e * as->nb[2], w, K);
                double sum = 0.0, mag = 0.0;
                for (int64_t k = 0; k < K; k++) {
                    sum += (double) w[k] * (double) x[k];
                    mag += fabs((double) w[k] * (double) x[k]);
                }
                const double got = *(const float *) mg_element_ptr(out, r, i, t, 0);
                ck_assert_msg(fabs(got - sum) <= 1e-2 * mag + 1e-4, "%s: out[%lld, %lld, %lld] is %.6g, exact %.6g",
                              mg_type_name(as->type), (long long) r, (long long) i, (long long) t, got, sum);
            }
        }
    }
    free(w);
}

// One type: n_b 1 and N_USED, T 1 and 7, threads 1, 2, 4 (the same bits each time).
static void check_type(enum mg_type type, bool repack, uint64_t seed) {
    uint64_t rng = seed;
    for (int nb = 0; nb < 2; nb++) {
        for (int tc = 0; tc < 2; tc++) {
            const int64_t       n_b = nb == 0 ? 1 : N_USED, T = tc == 0 ? 1 : 7;
            struct mg_context * ctx = new_ctx(16);
            struct mg_tensor *  as  = random_experts(ctx, type, &rng);
            struct mg_tensor *  b   = random_f32(ctx, K, n_b, T, 1.0f, &rng);
            struct mg_tensor *  ids = random_ids(ctx, T, &rng);
            void *              copy = NULL;
            if (repack) {
                ck_assert_msg(mg_repack_fits(as), "%s {%d, %d, %d} should fit the repacked layout", mg_type_name(type),
                              K, N, N_AS);
                copy = malloc(mg_nbytes(as));
                ck_assert_ptr_nonnull(copy);
                mg_repack(copy, as);
                as->repacked = copy;
            }
            struct mg_tensor * out = mg_mul_mat_id(ctx, as, b, ids);
            ck_assert(out->ne[0] == N && out->ne[1] == N_USED && out->ne[2] == T && out->type == MG_TYPE_F32);
            const int threads[] = {1, 2, 4};
            float *   first     = malloc(mg_nbytes(out));
            ck_assert_ptr_nonnull(first);
            out->flags |= MG_TENSOR_FLAG_OUTPUT;
            struct mg_cgraph * g = mg_new_graph(ctx);
            mg_build_forward_expand(g, out);
            for (int k = 0; k < 3; k++) {
                if (out->data != NULL) memset(out->data, 0xff, mg_nbytes(out));   // NaNs: what nobody writes fails
                mg_graph_compute_with_ctx(ctx, g, mg_test_threads(threads[k]));
                if (k == 0) memcpy(first, out->data, mg_nbytes(out));
                ck_assert_msg(memcmp(first, out->data, mg_nbytes(out)) == 0, "%s: %d threads differ from 1",
                              mg_type_name(type), threads[k]);
            }
            free(first);
            check_like_dense(ctx, as, b, ids, out, repack, repack ? "repacked" : "n_b/T case");
            check_near_exact(as, b, ids, out);
            free(copy);
            mg_free(ctx);
        }
    }
}

START_TEST(test_mul_mat_id_like_dense) {
    check_type(WEIGHT_TYPES[_i], false, 1000 + (uint64_t) _i);
}
END_TEST

// The types this build repacks (Q4_0 and Q4_K; Q2_K with AVX-512; more on
// NEON), as 3-D stacks of experts.
START_TEST(test_mul_mat_id_repacked) {
    const enum mg_type types[] = {MG_TYPE_Q4_0, MG_TYPE_Q4_K, MG_TYPE_Q2_K, MG_TYPE_Q8_0, MG_TYPE_Q6_K};
    int                n_checked = 0;
    for (size_t k = 0; k < sizeof(types) / sizeof(types[0]); k++) {
        struct mg_context * ctx  = new_ctx(1);
        const bool          fits = mg_repack_fits(mg_new_tensor_3d(ctx, types[k], K, N, N_AS));
        mg_free(ctx);
        if (!fits) continue;
        check_type(types[k], true, 2000 + k);
        n_checked++;
    }
    ck_assert_int_ge(n_checked, 2);   // Q4_0 and Q4_K at least, on every build
}
END_TEST

// mul_mat (not _id) of a repacked 3-D stack by a {K, 5, n_as} batch: matrix
// e of b meets expert e's groups (at e * nb[2] in the repacked copy), each
// result the bits of that expert repacked on its own times the same 5 columns.
START_TEST(test_mul_mat_3d_repacked) {
    const enum mg_type types[] = {MG_TYPE_Q4_0, MG_TYPE_Q4_K};
    for (size_t k = 0; k < sizeof(types) / sizeof(types[0]); k++) {
        uint64_t            rng = 300 + k;
        struct mg_context * ctx = new_ctx(16);
        struct mg_tensor *  as  = random_experts(ctx, types[k], &rng);
        struct mg_tensor *  b   = random_f32(ctx, K, 5, N_AS, 1.0f, &rng);
        ck_assert(mg_repack_fits(as));
        void * copy = malloc(mg_nbytes(as));
        ck_assert_ptr_nonnull(copy);
        mg_repack(copy, as);
        as->repacked = copy;
        struct mg_tensor * y = mg_mul_mat(ctx, as, b);
        compute(ctx, y, 2);
        for (int64_t e = 0; e < N_AS; e++) {
            void *             own = NULL;
            struct mg_tensor * w   = expert_matrix(ctx, as, e, true, &own);
            struct mg_tensor * be  = mg_view_2d(ctx, b, K, 5, b->nb[1], (size_t) e * b->nb[2]);
            struct mg_tensor * ye  = mg_mul_mat(ctx, w, be);
            compute(ctx, ye, 1);
            for (int64_t j = 0; j < 5; j++) {
                for (int64_t r = 0; r < N; r++) {
                    const float got = *(const float *) mg_element_ptr(y, r, j, e, 0);
                    const float want = *(const float *) mg_element_ptr(ye, r, j, 0, 0);
                    ck_assert_msg(memcmp(&got, &want, sizeof(float)) == 0, "%s expert %lld: y[%lld, %lld] is %.9g, want %.9g",
                                  mg_type_name(types[k]), (long long) e, (long long) r, (long long) j, got, want);
                }
            }
            free(own);
        }
        free(copy);
        mg_free(ctx);
    }
}
END_TEST

// ---------------------------------------------------------------------------
// mul_mat_id against llama.cpp
// ---------------------------------------------------------------------------

// The fixture's layout: tools/llama-ref/mul_mat_id_ref.c says it.
struct fixture {
    FILE *  f;
    int32_t k, n, n_as, n_used, t, n_types;
};

static int32_t read_i32(FILE * f) {
    int32_t v = 0;
    ck_assert_int_eq(fread(&v, sizeof(v), 1, f), 1);
    return v;
}

static void read_bytes(FILE * f, void * dst, size_t n) {
    ck_assert_int_eq(fread(dst, 1, n, f), n);
}

// Types whose vec_dot in this engine adds in the order of llama.cpp's
// repacked gemv on x86 (vec_simd.c), because llama.cpp repacks every such
// matrix it loads: unrepacked here, they still give the repacked case's
// bits. Q2_K's vec_dot keeps ggml's own order (repack.h).
static bool plain_takes_repacked_order(enum mg_type type) {
    return type == MG_TYPE_Q4_0 || type == MG_TYPE_Q4_K || type == MG_TYPE_IQ4_NL;
}

// One case of the fixture, computed here with 1 and 2 threads (the same
// bits), into got_out.
static void check_fixture_case(const struct fixture * fx, enum mg_type type, const void * weights, bool repacked,
                               int n_b, float * got_out) {
    struct mg_context * ctx = new_ctx(8);
    struct mg_tensor *  as  = mg_new_tensor_3d(ctx, type, fx->k, fx->n, fx->n_as);
    struct mg_tensor *  b   = mg_new_tensor_3d(ctx, MG_TYPE_F32, fx->k, n_b, fx->t);
    struct mg_tensor *  ids = mg_new_tensor_2d(ctx, MG_TYPE_I32, fx->n_used, fx->t);
    memcpy(as->data, weights, mg_nbytes(as));
    read_bytes(fx->f, b->data, mg_nbytes(b));
    read_bytes(fx->f, ids->data, mg_nbytes(ids));
    void * copy = NULL;
    // IQ4_NL: llama.cpp repacks it, this engine keeps the file's layout and
    // adds in the repacked order anyway (repack.c), so it runs as it is.
    if (repacked && !mg_repack_fits(as)) {
        ck_assert_msg(plain_takes_repacked_order(type), "%s: llama.cpp repacks these experts, this build does not",
                      mg_type_name(type));
    } else if (repacked) {
        copy = malloc(mg_nbytes(as));
        ck_assert_ptr_nonnull(copy);
        mg_repack(copy, as);
        as->repacked = copy;
    }
    struct mg_tensor * y = mg_mul_mat_id(ctx, as, b, ids);
    y->flags |= MG_TENSOR_FLAG_OUTPUT;
    struct mg_cgraph * g = mg_new_graph(ctx);
    mg_build_forward_expand(g, y);
    for (int threads = 1; threads <= 2; threads++) {
        mg_graph_compute_with_ctx(ctx, g, mg_test_threads(threads));
        if (threads == 1) memcpy(got_out, y->data, mg_nbytes(y));
        ck_assert(memcmp(got_out, y->data, mg_nbytes(y)) == 0);
    }
    free(copy);
    mg_free(ctx);
}

static void expect_llama_bits(const float * got, const float * want, int64_t n, enum mg_type type, bool repacked,
                              bool against_repacked, int n_b) {
    for (int64_t i = 0; i < n; i++) {
        ck_assert_msg(memcmp(&got[i], &want[i], sizeof(float)) == 0,
                      "%s%s, n_b %d: out[%lld] is %.9g, llama.cpp's%s %.9g", mg_type_name(type),
                      repacked ? " repacked" : "", n_b, (long long) i, got[i], against_repacked ? " repacked" : "",
                      want[i]);
    }
}

START_TEST(test_mul_mat_id_like_llama) {
    if (strcmp(mg_cpu_level(), "avx512") != 0) {
        MG_TEST_SKIP("the fixture holds llama.cpp's AVX-512 results; this engine adds in another level's order");
    }
    struct fixture fx = {.f = fopen(mg_test_fixture("moe/mul_mat_id.bin"), "rb")};
    ck_assert_ptr_nonnull(fx.f);
    ck_assert_int_eq(read_i32(fx.f), 0x44494d4d);
    fx.k = read_i32(fx.f), fx.n = read_i32(fx.f), fx.n_as = read_i32(fx.f);
    fx.n_used = read_i32(fx.f), fx.t = read_i32(fx.f), fx.n_types = read_i32(fx.f);
    const int64_t n_out   = (int64_t) fx.n * fx.n_used * fx.t;
    float *       got     = malloc(sizeof(float) * (size_t) n_out);
    float *       want    = malloc(sizeof(float) * (size_t) n_out);
    float *       pending = malloc(sizeof(float) * (size_t) n_out * 2);   // plain results awaiting the repacked ones
    ck_assert(got && want && pending);
    int n_checked = 0;
    for (int k = 0; k < fx.n_types; k++) {
        const enum mg_type type    = (enum mg_type) read_i32(fx.f);
        const int          n_cases = read_i32(fx.f);
        ck_assert(mg_type_is_supported(type));
        const size_t w_bytes = mg_row_size(type, fx.k) * (size_t) fx.n * (size_t) fx.n_as;
        void *       weights = malloc(w_bytes);
        ck_assert_ptr_nonnull(weights);
        read_bytes(fx.f, weights, w_bytes);
        for (int c = 0; c < n_cases; c++) {
            const bool repacked = read_i32(fx.f) != 0;
            const int  n_b      = read_i32(fx.f);
            check_fixture_case(&fx, type, weights, repacked, n_b, got);
            read_bytes(fx.f, want, sizeof(float) * (size_t) n_out);
            float * mine = pending + (size_t) (n_b == 1 ? 0 : n_out);
            if (!repacked && plain_takes_repacked_order(type)) {
                memcpy(mine, got, sizeof(float) * (size_t) n_out);   // checked against the repacked case, next
                continue;
            }
            expect_llama_bits(got, want, n_out, type, repacked, repacked, n_b);
            if (repacked && plain_takes_repacked_order(type)) {
                expect_llama_bits(mine, want, n_out, type, false, true, n_b);
            }
            n_checked++;
        }
        free(weights);
    }
    ck_assert_int_ge(n_checked, 14 * 2);
    free(pending);
    free(want);
    free(got);
    fclose(fx.f);
}
END_TEST

// A pick outside 0..n_as-1 is a clear error, not a read out of bounds.
START_TEST(test_mul_mat_id_bad_id) {
    uint64_t            rng = 5;
    struct mg_context * ctx = new_ctx(4);
    struct mg_tensor *  as  = random_experts(ctx, MG_TYPE_F32, &rng);
    struct mg_tensor *  b   = random_f32(ctx, K, 1, 1, 1.0f, &rng);
    struct mg_tensor *  ids = mg_new_tensor_2d(ctx, MG_TYPE_I32, N_USED, 1);
    ((int32_t *) ids->data)[0] = 0;
    ((int32_t *) ids->data)[1] = N_AS;   // one too far
    ((int32_t *) ids->data)[2] = 1;
    compute(ctx, mg_mul_mat_id(ctx, as, b, ids), 1);
}
END_TEST

// ---------------------------------------------------------------------------
// The other ops of a MoE layer, in its shapes
// ---------------------------------------------------------------------------

// get_rows of the router's probabilities {1, n_expert, T} by ids {n_used, T}:
// row ids[i, t] of plane t (ggml_get_rows), and a wider F16 source.
START_TEST(test_get_rows_3d) {
    uint64_t            rng = 3;
    struct mg_context * ctx = new_ctx(4);
    const int64_t       T   = 5;
    struct mg_tensor *  p   = random_f32(ctx, 1, N_AS, T, 1.0f, &rng);
    struct mg_tensor *  ids = random_ids(ctx, T, &rng);
    struct mg_tensor *  w   = mg_get_rows(ctx, p, ids);
    ck_assert(w->ne[0] == 1 && w->ne[1] == N_USED && w->ne[2] == T);
    compute(ctx, w, 2);
    for (int64_t t = 0; t < T; t++) {
        for (int64_t i = 0; i < N_USED; i++) {
            const int32_t e = ((const int32_t *) ids->data)[t * N_USED + i];
            ck_assert_float_eq(mg_get_f32_nd(w, 0, i, t, 0), mg_get_f32_nd(p, 0, e, t, 0));
        }
    }
    struct mg_tensor * h = mg_new_tensor_3d(ctx, MG_TYPE_F16, 8, N_AS, T);
    for (int64_t k = 0; k < mg_nelements(h); k++) ((mg_fp16_t *) h->data)[k] = mg_fp32_to_fp16((float) k);
    struct mg_tensor * hw = mg_get_rows(ctx, h, ids);
    compute(ctx, hw, 3);
    for (int64_t t = 0; t < T; t++) {
        for (int64_t i = 0; i < N_USED; i++) {
            const int32_t e = ((const int32_t *) ids->data)[t * N_USED + i];
            for (int64_t c = 0; c < 8; c++) ck_assert_float_eq(mg_get_f32_nd(hw, c, i, t, 0), mg_get_f32_nd(h, c, e, t, 0));
        }
    }
    mg_free(ctx);
}
END_TEST

// The router weights' normalisation and use: sum_rows of {n_used, T} -> {1, T},
// div of {n_used, T} by {1, T}, and mul of {N, n_used, T} by {1, n_used, T}.
START_TEST(test_broadcasts) {
    uint64_t            rng = 9;
    struct mg_context * ctx = new_ctx(4);
    const int64_t       T   = 4;
    struct mg_tensor *  w   = random_f32(ctx, N_USED, T, 1, 1.0f, &rng);
    struct mg_tensor *  s   = mg_sum_rows(ctx, w);
    struct mg_tensor *  q   = mg_div(ctx, w, s);
    struct mg_tensor *  x   = random_f32(ctx, N, N_USED, T, 1.0f, &rng);
    struct mg_tensor *  w3  = mg_reshape_3d(ctx, q, 1, N_USED, T);
    struct mg_tensor *  y   = mg_mul(ctx, x, w3);
    s->flags |= MG_TENSOR_FLAG_OUTPUT;
    q->flags |= MG_TENSOR_FLAG_OUTPUT;
    compute(ctx, y, 2);
    for (int64_t t = 0; t < T; t++) {
        double sum = 0.0;
        for (int64_t i = 0; i < N_USED; i++) sum += mg_get_f32_nd(w, i, t, 0, 0);
        ck_assert_float_eq(mg_get_f32_nd(s, 0, t, 0, 0), (float) sum);
        for (int64_t i = 0; i < N_USED; i++) {
            const float qi = mg_get_f32_nd(w, i, t, 0, 0) / (float) sum;
            ck_assert_float_eq(mg_get_f32_nd(q, i, t, 0, 0), qi);
            for (int64_t r = 0; r < N; r++) ck_assert_float_eq(mg_get_f32_nd(y, r, i, t, 0), mg_get_f32_nd(x, r, i, t, 0) * qi);
        }
    }
    mg_free(ctx);
}
END_TEST

// The experts' outputs summed: views {E, T} of {E, n_used, T} at pick 0 and
// pick 1, rows nb[2] apart, added.
START_TEST(test_add_strided_views) {
    uint64_t            rng = 13;
    struct mg_context * ctx = new_ctx(4);
    const int64_t       E = 16, T = 5;
    struct mg_tensor *  x  = random_f32(ctx, E, N_USED, T, 1.0f, &rng);
    struct mg_tensor *  v0 = mg_view_2d(ctx, x, E, T, x->nb[2], 0);
    struct mg_tensor *  v1 = mg_view_2d(ctx, x, E, T, x->nb[2], x->nb[1]);
    struct mg_tensor *  y  = mg_add(ctx, v0, v1);
    compute(ctx, y, 2);
    for (int64_t t = 0; t < T; t++) {
        for (int64_t r = 0; r < E; r++) {
            ck_assert_float_eq(mg_get_f32_nd(y, r, t, 0, 0), mg_get_f32_nd(x, r, 0, t, 0) + mg_get_f32_nd(x, r, 1, t, 0));
        }
    }
    mg_free(ctx);
}
END_TEST

// swiglu on {F, n_used, T}: silu(a) * b per element, within a few ulps of
// the C library's expf (the kernel uses ggml's exp).
START_TEST(test_swiglu_3d) {
    uint64_t            rng = 17;
    struct mg_context * ctx = new_ctx(4);
    const int64_t       F = 40, T = 3;
    struct mg_tensor *  a = random_f32(ctx, F, N_USED, T, 2.0f, &rng);
    struct mg_tensor *  b = random_f32(ctx, F, N_USED, T, 2.0f, &rng);
    struct mg_tensor *  y = mg_swiglu(ctx, a, b);
    compute(ctx, y, 2);
    for (int64_t k = 0; k < F * N_USED * T; k++) {
        const float  x    = ((const float *) a->data)[k];
        const double want = (double) x / (1.0 + exp(-(double) x)) * (double) ((const float *) b->data)[k];
        ck_assert_msg(fabs(((const float *) y->data)[k] - want) <= 1e-5 * fabs(want) + 1e-6, "swiglu[%lld] is %g, want %g",
                      (long long) k, ((const float *) y->data)[k], want);
    }
    mg_free(ctx);
}
END_TEST

// ---------------------------------------------------------------------------
// A whole MoE FFN, as the model builder will put these ops together
// ---------------------------------------------------------------------------

enum { FFN_E = 256, FFN_F = 256, FFN_EXPERTS = 6, FFN_USED = 3, FFN_T = 5 };

struct moe_ffn {
    struct mg_tensor * x, *router, *gate, *up, *down;   // inputs: {E, T}, {E, n_expert}, {E, F, n}, {E, F, n}, {F, E, n}
    struct mg_tensor * sel, *out;                        // the picks (a top_k view) and the result {E, T}
};

static struct mg_tensor * random_stack(struct mg_context * ctx, enum mg_type type, int64_t k, int64_t n, int64_t m,
                                       float scale, uint64_t * rng) {
    struct mg_tensor * t = mg_new_tensor_3d(ctx, type, k, n, m);
    float *            f = malloc(sizeof(float) * (size_t) (k * n * m));
    ck_assert_ptr_nonnull(f);
    for (int64_t i = 0; i < k * n * m; i++) f[i] = scale * mg_test_rand_normal(rng);
    if (type == MG_TYPE_F32) memcpy(t->data, f, mg_nbytes(t));
    else mg_get_type_traits(type)->from_float(f, t->data, k * n * m);
    free(f);
    return t;
}

// llama.cpp's build_moe_ffn for Qwen3-MoE (softmax gating, top-k, weights
// normalised to sum 1, SwiGLU experts), op for op.
static struct moe_ffn build_moe_ffn(struct mg_context * ctx, uint64_t * rng) {
    struct moe_ffn m;
    m.x      = random_f32(ctx, FFN_E, FFN_T, 1, 1.0f, rng);
    // A router this small keeps the probabilities close (logits ~0.3 apart),
    // so the normalisation of the top 3 weights changes them by about half.
    m.router = random_stack(ctx, MG_TYPE_F32, FFN_E, FFN_EXPERTS, 1, 0.02f, rng);
    m.gate   = random_stack(ctx, MG_TYPE_F16, FFN_E, FFN_F, FFN_EXPERTS, 0.1f, rng);
    m.up     = random_stack(ctx, MG_TYPE_F16, FFN_E, FFN_F, FFN_EXPERTS, 0.1f, rng);
    m.down   = random_stack(ctx, MG_TYPE_F16, FFN_F, FFN_E, FFN_EXPERTS, 0.1f, rng);
    struct mg_tensor * x2     = mg_reshape_2d(ctx, m.x, FFN_E, FFN_T);
    struct mg_tensor * probs  = mg_soft_max(ctx, mg_mul_mat(ctx, mg_reshape_2d(ctx, m.router, FFN_E, FFN_EXPERTS), x2));
    m.sel                     = mg_argsort_top_k(ctx, probs, FFN_USED);                                  // {n_used, T}
    struct mg_tensor * w      = mg_get_rows(ctx, mg_reshape_3d(ctx, probs, 1, FFN_EXPERTS, FFN_T), m.sel);   // {1, n_used, T}
    struct mg_tensor * w2     = mg_reshape_2d(ctx, w, FFN_USED, FFN_T);
    struct mg_tensor * wn     = mg_div(ctx, w2, mg_sum_rows(ctx, w2));
    struct mg_tensor * xr     = mg_reshape_3d(ctx, x2, FFN_E, 1, FFN_T);
    struct mg_tensor * h      = mg_swiglu(ctx, mg_mul_mat_id(ctx, m.gate, xr, m.sel), mg_mul_mat_id(ctx, m.up, xr, m.sel));
    struct mg_tensor * experts = mg_mul(ctx, mg_mul_mat_id(ctx, m.down, h, m.sel), mg_reshape_3d(ctx, wn, 1, FFN_USED, FFN_T));
    m.out = NULL;
    for (int i = 0; i < FFN_USED; i++) {   // the picks' outputs added, each a strided view {E, T}
        struct mg_tensor * one = mg_view_2d(ctx, experts, FFN_E, FFN_T, experts->nb[2], (size_t) i * experts->nb[1]);
        m.out = m.out == NULL ? one : mg_add(ctx, m.out, one);
    }
    return m;
}

static double silu_d(double x) {
    return x / (1.0 + exp(-x));
}

// Row r of expert e of a stack, decoded.
static void stack_row(const struct mg_tensor * t, int64_t r, int64_t e, float * out) {
    mg_get_type_traits(t->type)->to_float((const char *) t->data + r * t->nb[1] + e * t->nb[2], out, t->ne[0]);
}

// The FFN of token t in double, its picks from a plain sort of its probabilities.
static void reference_moe_ffn(const struct moe_ffn * m, int64_t t, int32_t * picks, double * out) {
    float        row[FFN_F > FFN_E ? FFN_F : FFN_E];
    const float * x = (const float *) m->x->data + t * FFN_E;
    double       logit[FFN_EXPERTS], max = -INFINITY, sum = 0.0;
    for (int e = 0; e < FFN_EXPERTS; e++) {
        stack_row(m->router, e, 0, row);
        logit[e] = 0.0;
        for (int k = 0; k < FFN_E; k++) logit[e] += (double) row[k] * x[k];
        max = logit[e] > max ? logit[e] : max;
    }
    float p[FFN_EXPERTS];
    for (int e = 0; e < FFN_EXPERTS; e++) sum += exp(logit[e] - max);
    for (int e = 0; e < FFN_EXPERTS; e++) p[e] = (float) (exp(logit[e] - max) / sum);
    int32_t order[FFN_EXPERTS];
    naive_argsort(p, order, FFN_EXPERTS, true);
    double wsum = 0.0;
    for (int i = 0; i < FFN_USED; i++) wsum += p[order[i]];
    for (int k = 0; k < FFN_E; k++) out[k] = 0.0;
    for (int i = 0; i < FFN_USED; i++) {
        const int e = picks[i] = order[i];
        double    h[FFN_F];
        for (int r = 0; r < FFN_F; r++) {
            double g = 0.0, u = 0.0;
            stack_row(m->gate, r, e, row);
            for (int k = 0; k < FFN_E; k++) g += (double) row[k] * x[k];
            stack_row(m->up, r, e, row);
            for (int k = 0; k < FFN_E; k++) u += (double) row[k] * x[k];
            h[r] = silu_d(g) * u;
        }
        for (int r = 0; r < FFN_E; r++) {
            double d = 0.0;
            stack_row(m->down, r, e, row);
            for (int k = 0; k < FFN_F; k++) d += (double) row[k] * h[k];
            out[r] += d * p[e] / wsum;
        }
    }
}

START_TEST(test_moe_ffn_like_reference) {
    uint64_t            rng = 23;
    struct mg_context * ctx = new_ctx(32);
    struct moe_ffn      m   = build_moe_ffn(ctx, &rng);
    m.out->flags |= MG_TENSOR_FLAG_OUTPUT;
    m.sel->view_src->flags |= MG_TENSOR_FLAG_OUTPUT;
    struct mg_cgraph * g = mg_new_graph(ctx);
    mg_build_forward_expand(g, m.out);
    mg_graph_compute_with_ctx(ctx, g, 1);
    float * first = malloc(mg_nbytes(m.out));
    ck_assert_ptr_nonnull(first);
    memcpy(first, m.out->data, mg_nbytes(m.out));
    mg_graph_compute_with_ctx(ctx, g, mg_test_threads(3));
    ck_assert_msg(memcmp(first, m.out->data, mg_nbytes(m.out)) == 0, "3 threads differ from 1");
    for (int64_t t = 0; t < FFN_T; t++) {
        int32_t picks[FFN_USED];
        double  want[FFN_E], rms = 0.0;
        reference_moe_ffn(&m, t, picks, want);
        for (int i = 0; i < FFN_USED; i++) {
            ck_assert_int_eq(*(const int32_t *) mg_element_ptr(m.sel, i, t, 0, 0), picks[i]);
        }
        for (int r = 0; r < FFN_E; r++) rms += want[r] * want[r];
        rms = sqrt(rms / FFN_E);
        for (int r = 0; r < FFN_E; r++) {
            const double got = mg_get_f32_nd(m.out, r, t, 0, 0);
            ck_assert_msg(fabs(got - want[r]) <= 3e-3 * rms, "token %lld, out[%d] is %.6g, reference %.6g (rms %.3g)",
                          (long long) t, r, got, want[r], rms);
        }
    }
    free(first);
    mg_free(ctx);
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("moe_ops");
    MG_TCASE(s, "argsort", test_argsort_vs_naive, test_argsort_top_k);
    MG_TCASE(s, "clamp", test_clamp);
    TCase * mm = tcase_create("mul_mat_id");
    tcase_add_loop_test(mm, test_mul_mat_id_like_dense, 0, (int) N_WEIGHT_TYPES);
    tcase_add_test(mm, test_mul_mat_id_repacked);
    tcase_add_test(mm, test_mul_mat_id_like_llama);
    tcase_add_test(mm, test_mul_mat_3d_repacked);
    tcase_set_timeout(mm, 60);
    suite_add_tcase(s, mm);
    // mg_abort, with the id and the tensor named: only where each test has a
    // process of its own (not CK_FORK=no, as under qemu-user).
    const char * fork = getenv("CK_FORK");
    if (fork == NULL || strcmp(fork, "no") != 0) {
        TCase * errors = tcase_create("errors");
        tcase_add_test_raise_signal(errors, test_mul_mat_id_bad_id, SIGABRT);
        suite_add_tcase(s, errors);
    }
    MG_TCASE(s, "moe shapes", test_get_rows_3d, test_broadcasts, test_add_strided_views, test_swiglu_3d);
    MG_TCASE(s, "moe ffn", test_moe_ffn_like_reference);
    return s;
}
