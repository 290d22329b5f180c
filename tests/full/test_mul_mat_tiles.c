// test_mul_mat_tiles.c - mul_mat through tiles (full/compute.c,
// mul_mat_tiled and mul_mat_gemm_float) against one dot product per output
// element, to the bit.
//
// full/ computes a product in tiles of up to 8 weight rows x 4 columns, in row
// blocks, with the rows shared among threads. None of that may change a
// number: every output element must be exactly the dot product the chapter-07
// loop computes, vec_dot(row i of W, column j of x converted to W's
// vec_dot_type). The reference here is that loop, written out: the columns
// converted with the table's from_float (as mul_mat's init does), then one
// vec_dot per element. vec_dot itself is checked against the scalar kernels
// in test_vec_simd.c.
//
// Except where llama.cpp takes another order: float weights (F32, F16, BF16)
// with 2 or more columns go to its tinyBLAS when its conditions hold
// (mg_gemm_float_applies, and for F32 the columns contiguous), and so to
// full/gemm_float.c. There the reference element is mg_gemm_float_dot, the
// scalar reference of that order (checked against the SIMD kernel in
// test_gemm_float.c).
//
// Shapes: all 14 weight types on a small matrix (whole tiles and a remainder
// of rows; 45 rows, and 44 where tinyBLAS takes the float types) with 1 to 70
// columns and 1 to 4 threads; the MiniMind shapes (768 x 2432, and 2432 x 768
// for the 32-element types) with 1 and 70 columns; weights shared by several
// activation matrices (broadcast, as in GQA); activation rows with gaps
// between them; rows that tinyBLAS refuses (k not a multiple of its step).
#include "gemm_float.h"
#include "harness.h"
#include "mg.h"

#include <stdlib.h>
#include <string.h>

static const enum mg_type ALL_TYPES[] = {
    MG_TYPE_F32,  MG_TYPE_F16,  MG_TYPE_BF16, MG_TYPE_Q4_0, MG_TYPE_Q4_1, MG_TYPE_Q5_0, MG_TYPE_Q5_1,
    MG_TYPE_Q8_0, MG_TYPE_IQ4_NL, MG_TYPE_Q2_K, MG_TYPE_Q3_K, MG_TYPE_Q4_K, MG_TYPE_Q5_K, MG_TYPE_Q6_K,
};
#define N_TYPES (sizeof(ALL_TYPES) / sizeof(ALL_TYPES[0]))

// The types of the bench models (tools/llama-cpp-baseline.tsv).
static const enum mg_type BENCH_TYPES[] = {
    MG_TYPE_F32, MG_TYPE_F16, MG_TYPE_Q8_0, MG_TYPE_Q4_0, MG_TYPE_Q5_0, MG_TYPE_Q4_K, MG_TYPE_Q6_K,
};
#define N_BENCH_TYPES (sizeof(BENCH_TYPES) / sizeof(BENCH_TYPES[0]))

struct mm_case {
    enum mg_type type;
    int64_t      k, m, n;   // W {k, m, w2}, x {k, n, x2}: out {m, n, x2}
    int64_t      w2, x2;    // x2 a multiple of w2 (each W matrix serves x2 / w2 of x's)
    size_t       x_gap;     // bytes between x's rows beyond the row itself (0: contiguous)
};

// Random weights: N(0,1) floats in the type (quantized by its from_float).
static struct mg_tensor * random_weights(struct mg_context * ctx, const struct mm_case * c, uint64_t * rng) {
    struct mg_tensor * w  = mg_new_tensor_3d(ctx, c->type, c->k, c->m, c->w2);
    const int64_t      nw = c->k * c->m * c->w2;
    float *            wf = malloc(sizeof(float) * (size_t) nw);
    ck_assert_ptr_nonnull(wf);
    for (int64_t i = 0; i < nw; i++) wf[i] = mg_test_rand_normal(rng);
    if (c->type == MG_TYPE_F32) memcpy(w->data, wf, mg_nbytes(w));
    else mg_get_type_traits(c->type)->from_float(wf, w->data, nw);
    free(wf);
    return w;
}

// Random activations, 3 * N(0,1): a tensor of their own, or a view whose rows
// sit x_gap bytes apart inside a bigger one.
static struct mg_tensor * random_activations(struct mg_context * ctx, const struct mm_case * c, uint64_t * rng) {
    struct mg_tensor * x;
    if (c->x_gap == 0) {
        x = mg_new_tensor_3d(ctx, MG_TYPE_F32, c->k, c->n, c->x2);
    } else {
        const int64_t      pad  = (int64_t) (c->x_gap / sizeof(float));
        struct mg_tensor * wide = mg_new_tensor_3d(ctx, MG_TYPE_F32, c->k + pad, c->n, c->x2);
        x = mg_view_3d(ctx, wide, c->k, c->n, c->x2, wide->nb[1], wide->nb[2], 0);
    }
    for (int64_t b = 0; b < c->x2; b++) {
        for (int64_t j = 0; j < c->n; j++) {
            for (int64_t i = 0; i < c->k; i++) mg_set_f32_nd(x, i, j, b, 0, 3.0f * mg_test_rand_normal(rng));
        }
    }
    return x;
}

// Whether llama.cpp's mul_mat gives this product to tinyBLAS: F32 columns are
// read in place (so only when contiguous), F16/BF16 ones after conversion.
static bool takes_gemm_float(const struct mm_case * c) {
    const bool in_place = mg_get_type_traits_cpu(c->type)->from_float == NULL;
    if (in_place && c->x_gap != 0) return false;
    return mg_gemm_float_applies(c->type, c->m, c->n, c->k);
}

// out[b][j][i] = vec_dot(row i of W's matrix b / r2, column j of x's matrix b
// converted), one element at a time; mg_gemm_float_dot instead where tinyBLAS
// takes the product.
static float * reference_product(const struct mm_case * c, const struct mg_tensor * w, const struct mg_tensor * x) {
    const struct mg_type_traits_cpu * cpu     = mg_get_type_traits_cpu(c->type);
    const size_t                      row_out = mg_row_size(cpu->vec_dot_type, c->k);
    char *                            col     = malloc(row_out);
    float *                           out     = malloc(sizeof(float) * (size_t) (c->m * c->n * c->x2));
    ck_assert(col && out);
    const int64_t r2   = c->x2 / c->w2;
    const bool    gemm = takes_gemm_float(c);
    for (int64_t b = 0; b < c->x2; b++) {
        for (int64_t j = 0; j < c->n; j++) {
            const float * xj = (const float *) ((const char *) x->data + j * x->nb[1] + b * x->nb[2]);
            if (cpu->from_float == NULL) memcpy(col, xj, row_out);
            else cpu->from_float(xj, col, c->k);
            for (int64_t i = 0; i < c->m; i++) {
                const char * wi = (const char *) w->data + i * w->nb[1] + (b / r2) * w->nb[2];
                float * o = &out[(b * c->n + j) * c->m + i];
                if (gemm) mg_gemm_float_dot(c->type, c->k, o, wi, col);
                else cpu->vec_dot(c->k, o, wi, col);
            }
        }
    }
    free(col);
    return out;
}

// mul_mat with each thread count against the reference, every element to the bit.
static void check_case(const struct mm_case * c, const int * threads, int n_threads_counts, uint64_t seed) {
    const size_t w_bytes = mg_row_size(c->type, c->k) * (size_t) (c->m * c->w2);
    const size_t x_bytes = (size_t) (c->k * 4 + (int64_t) c->x_gap) * (size_t) (c->n * c->x2);
    const size_t y_bytes = sizeof(float) * (size_t) (c->m * c->n * c->x2);
    struct mg_context * ctx =
        mg_init((struct mg_init_params) {.mem_size = w_bytes + 3 * x_bytes + 2 * y_bytes + (1 << 20)});
    ck_assert_ptr_nonnull(ctx);
    uint64_t           rng = seed;
    struct mg_tensor * w   = random_weights(ctx, c, &rng);
    struct mg_tensor * x   = random_activations(ctx, c, &rng);
    float *            ref = reference_product(c, w, x);

    struct mg_tensor * y = mg_mul_mat(ctx, w, x);
    struct mg_cgraph * g = mg_new_graph(ctx);
    mg_build_forward_expand(g, y);
    mg_graph_compute_with_ctx(ctx, g, 1);   // the first run gives y its bytes
    for (int t = 0; t < n_threads_counts; t++) {
        memset(y->data, 0xff, mg_nbytes(y));   // NaNs: an element nobody writes cannot pass
        mg_graph_compute_with_ctx(ctx, g, mg_test_threads(threads[t]));
        for (int64_t b = 0; b < c->x2; b++) {
            for (int64_t j = 0; j < c->n; j++) {
                const float * got  = (const float *) ((const char *) y->data + j * y->nb[1] + b * y->nb[2]);
                const float * want = ref + (b * c->n + j) * c->m;
                for (int64_t i = 0; i < c->m; i++) {
                    if (memcmp(&got[i], &want[i], sizeof(float)) == 0) continue;
                    ck_abort_msg("%s W {%lld, %lld, %lld} x {%lld, %lld, %lld}, %d threads: out[%lld, %lld, %lld] is "
                                 "%.9g, %s %.9g",
                                 mg_type_name(c->type), (long long) c->k, (long long) c->m, (long long) c->w2,
                                 (long long) c->k, (long long) c->n, (long long) c->x2, threads[t], (long long) i,
                                 (long long) j, (long long) b, got[i],
                                 takes_gemm_float(c) ? "tinyBLAS order" : "vec_dot", want[i]);
                }
            }
        }
    }
    free(ref);
    mg_free(ctx);
}

static const int ONE_TO_FOUR[] = {1, 2, 3, 4};

// 45 rows: 5 tiles of 8 and 5 rows over; every column count a tile group can
// end with, and a batch of 70 (17 groups of 4 and 2 over). 45 is no multiple
// of 4, so float weights stay with vec_dot; with 44 rows tinyBLAS takes them
// (11 tiles of 4 rows; column groups of 6 with every remainder).
START_TEST(test_small_all_types) {
    const int64_t columns[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 31, 64, 70};
    const int64_t rows[]    = {45, 44};
    for (size_t r = 0; r < 2; r++) {
        for (size_t k = 0; k < sizeof(columns) / sizeof(columns[0]); k++) {
            const struct mm_case c = {ALL_TYPES[_i], 256, rows[r], columns[k], 1, 1, 0};
            check_case(&c, ONE_TO_FOUR, 4, 100 + 1000 * r + 10 * (uint64_t) _i + k);
        }
    }
}
END_TEST

// The MiniMind FFN: 2432 rows of 768 (gate, up); one token and a batch of 70.
START_TEST(test_minimind_ffn) {
    const int64_t columns[] = {1, 70};
    for (size_t k = 0; k < 2; k++) {
        const struct mm_case c = {BENCH_TYPES[_i], 768, 2432, columns[k], 1, 1, 0};
        const int            threads[] = {1, 3};
        check_case(&c, threads, 2, 200 + 10 * (uint64_t) _i + k);
    }
}
END_TEST

// Rows of 2432 (ffn_down), for the types that fit them (2432 is not a
// multiple of 256: MiniMind's ffn_down is Q8_0 or Q5_0 in a Q4_K_M file).
START_TEST(test_minimind_ffn_down) {
    const enum mg_type types[] = {MG_TYPE_F32, MG_TYPE_F16, MG_TYPE_Q8_0, MG_TYPE_Q4_0, MG_TYPE_Q5_0};
    for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
        const struct mm_case c = {types[t], 2432, 768, 70, 1, 1, 0};
        const int            threads[] = {2, 4};
        check_case(&c, threads, 2, 300 + t);
    }
}
END_TEST

// Each of 2 weight matrices serves 2 of the 4 activation matrices; and
// activation rows 48 bytes apart (a view), which F32 weights read in place
// (so tinyBLAS does not take them: llama.cpp asks for contiguous columns).
// The float cases with k = 64 and m = 12 or 16 are tinyBLAS's; k = 40 and
// 100 are not multiples of its step, nor is 48 of BF16's 32 (AVX512-BF16).
START_TEST(test_broadcast_and_strided_columns) {
    const struct mm_case cases[] = {
        {MG_TYPE_Q4_0, 64, 13, 6, 2, 4, 0},   {MG_TYPE_Q6_K, 256, 17, 5, 2, 4, 0}, {MG_TYPE_F16, 40, 9, 7, 2, 4, 0},
        {MG_TYPE_F32, 100, 19, 11, 1, 2, 48}, {MG_TYPE_Q8_0, 96, 16, 9, 1, 1, 48}, {MG_TYPE_F16, 64, 12, 7, 2, 4, 0},
        {MG_TYPE_F16, 64, 12, 7, 2, 4, 48},   {MG_TYPE_BF16, 64, 16, 5, 1, 2, 0},  {MG_TYPE_F32, 64, 16, 9, 2, 4, 0},
        {MG_TYPE_F32, 64, 16, 9, 1, 1, 48},   {MG_TYPE_BF16, 48, 16, 5, 1, 1, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) check_case(&cases[i], ONE_TO_FOUR, 4, 400 + i);
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s  = suite_create("mul_mat_tiles");
    TCase * tc = tcase_create("vs_vec_dot");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_small_all_types, 0, (int) N_TYPES);
    tcase_add_loop_test(tc, test_minimind_ffn, 0, (int) N_BENCH_TYPES);
    tcase_add_test(tc, test_minimind_ffn_down);
    tcase_add_test(tc, test_broadcast_and_strided_columns);
    suite_add_tcase(s, tc);
    return s;
}
