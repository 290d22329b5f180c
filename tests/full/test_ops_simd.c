// test_ops_simd.c - the SIMD rows of softmax, SwiGLU and RoPE (ops_simd.c)
// give exactly the bits of the scalar formulas they stand for; and set_rows
// with rows of one element (the transposed V store, which converts 256
// elements at a time, compute.c) puts each element where a naive loop does.
#include "harness.h"
#include "mg.h"
#include "ops_simd.h"

#include <math.h>
#include <string.h>

enum { MAX_N = 300 };

static bool same_bits(float a, float b) {
    return memcmp(&a, &b, sizeof(a)) == 0;
}

// Random values over a range wide enough to reach the exp's edges: e^x under-
// and overflows past about -104 and +88, where the vector code falls back.
static void fill(float * x, int n, uint64_t * rng, float lo, float hi) {
    mg_test_fill_uniform(x, (size_t) n, rng, lo, hi);
}

START_TEST(test_exp_row_matches_scalar) {
    uint64_t rng = 42;
    float x[MAX_N], y[MAX_N];
    const float ranges[][2] = {{-2, 2}, {-20, 5}, {-110, 95}};
    for (int r = 0; r < 3; r++) {
        for (int n = 1; n <= MAX_N; n += 7) {
            fill(x, n, &rng, ranges[r][0], ranges[r][1]);
            const float shift = x[0] * 0.5f;
            mg_exp_row(n, y, x, shift);
            for (int i = 0; i < n; i++) {
                // The row rule: the level's vector exp for the first n - n % lanes, libm after.
                const float want = i < n - n % MG_GGML_LANES ? mg_level_expf(x[i] - shift) : expf(x[i] - shift);
                ck_assert_msg(same_bits(y[i], want), "n %d i %d x %a: %a, want %a", n, i, (double) x[i],
                              (double) y[i], (double) want);
            }
        }
    }
}
END_TEST

START_TEST(test_exp_row_edges) {
    float x[16] = {0.0f, -0.0f, 1.0f, -1.0f, 88.0f, 89.0f, -103.0f, -105.0f, -150.0f, 200.0f, -200.0f,
                   INFINITY, -INFINITY, 1e-30f, -87.5f, 0.5f};
    float y[16];
    mg_exp_row(16, y, x, 0.0f);
    for (int i = 0; i < 16; i++) {
        ck_assert_msg(same_bits(y[i], mg_level_expf(x[i])), "x %a: %a, want %a", (double) x[i], (double) y[i],
                      (double) mg_level_expf(x[i]));
    }
    ck_assert(y[12] == 0.0f);          // e^-inf
    ck_assert(isinf(y[11]));           // e^inf
    ck_assert(y[0] == 1.0f);           // e^0, exactly
}
END_TEST

// ggml_v_expf's two x86 versions (mg_expf: AVX-512, mg_expf_avx2: AVX2) are
// both within 3 ulp of e^x over the normal range, and yet round apart often
// enough to matter: that is why each level has its own golden set.
static double ulps_from_exp(float got, float x) {
    const double want = exp((double) x);
    return fabs((double) got - want) / ((double) nextafterf((float) want, INFINITY) - (float) want);
}

START_TEST(test_expf_versions) {
    int differ = 0;
    for (float x = -87.0f; x < 88.0f; x += 0.01171875f) {
        ck_assert_msg(ulps_from_exp(mg_expf(x), x) <= 3.0, "mg_expf(%a) = %a", (double) x, (double) mg_expf(x));
        ck_assert_msg(ulps_from_exp(mg_expf_avx2(x), x) <= 3.0, "mg_expf_avx2(%a) = %a", (double) x,
                      (double) mg_expf_avx2(x));
        differ += !same_bits(mg_expf(x), mg_expf_avx2(x));
    }
    ck_assert_int_gt(differ, 100);   // of about 15000
    ck_assert(mg_expf_avx2(-INFINITY) == 0.0f && isinf(mg_expf_avx2(INFINITY)) && mg_expf_avx2(0.0f) == 1.0f);
    ck_assert(mg_expf_avx2(-100.0f) > 0.0f && ulps_from_exp(mg_expf_avx2(88.5f), 88.5f) <= 3.0);   // |n| > 126
}
END_TEST

START_TEST(test_swiglu_row_matches_scalar) {
    uint64_t rng = 7;
    float x[MAX_N], g[MAX_N], y[MAX_N];
    for (int n = 1; n <= MAX_N; n += 5) {
        fill(x, n, &rng, -12.0f, 12.0f);
        fill(g, n, &rng, -3.0f, 3.0f);
        mg_swiglu_row(n, y, x, g);
        for (int i = 0; i < n; i++) {
            const float e    = i < n - n % MG_GGML_LANES ? mg_level_expf(-x[i]) : expf(-x[i]);
            const float want = x[i] / (1.0f + e) * g[i];
            ck_assert_msg(same_bits(y[i], want), "n %d i %d: %a, want %a", n, i, (double) y[i], (double) want);
        }
    }
}
END_TEST

START_TEST(test_rope_pairs_matches_scalar_and_works_in_place) {
    uint64_t rng = 11;
    float x[2 * MAX_N], c[MAX_N], s[MAX_N], y[2 * MAX_N];
    for (int n = 1; n <= MAX_N; n += 3) {
        fill(x, 2 * n, &rng, -4.0f, 4.0f);
        fill(c, n, &rng, -1.0f, 1.0f);
        fill(s, n, &rng, -1.0f, 1.0f);
        mg_rope_pairs(n, y, y + n, x, x + n, c, s);
        for (int i = 0; i < n; i++) {
            // Fused as llama.cpp's build fuses ggml's rotate_pairs (compute.c, forward_rope).
            const float want0 = fmaf(x[i], c[i], -(x[n + i] * s[i]));
            const float want1 = fmaf(x[i], s[i], x[n + i] * c[i]);
            ck_assert(same_bits(y[i], want0));
            ck_assert(same_bits(y[n + i], want1));
        }
        mg_rope_pairs(n, x, x + n, x, x + n, c, s);   // in place: the same result
        ck_assert(memcmp(x, y, (size_t) (2 * n) * sizeof(float)) == 0);
    }
}
END_TEST

// The value side of flash attention: each output is acc + w0 v0 + w1 v1 + ...
// in that order, every product rounded before it is added.
START_TEST(test_weighted_rows_add_matches_scalar) {
    enum { MAX_ROWS = 70, MAX_D = 140 };
    static float w[MAX_ROWS], v[MAX_ROWS * MAX_D], acc[MAX_D], want[MAX_D];
    uint64_t rng = 11;
    const int row_counts[] = {1, 2, 7, 64, 70}, widths[] = {1, 5, 8, 63, 64, 96, 128, 140};
    for (size_t a = 0; a < sizeof(row_counts) / sizeof(row_counts[0]); a++) {
        for (size_t b = 0; b < sizeof(widths) / sizeof(widths[0]); b++) {
            const int n = row_counts[a], d = widths[b];
            fill(w, n, &rng, 0.0f, 1.0f);
            fill(v, n * d, &rng, -3.0f, 3.0f);
            fill(acc, d, &rng, -1.0f, 1.0f);
            for (int i = 0; i < d; i++) {
                float sum = acc[i];
                for (int j = 0; j < n; j++) {
                    const volatile float product = w[j] * v[j * d + i];   // rounded on its own, never fused
                    sum += product;
                }
                want[i] = sum;
            }
            mg_weighted_rows_add(n, d, w, v, acc);
            for (int i = 0; i < d; i++) {
                ck_assert_msg(same_bits(acc[i], want[i]), "n %d d %d i %d: %a, want %a", n, d, i, (double) acc[i],
                              (double) want[i]);
            }
        }
    }
}
END_TEST

// set_rows of rows of one element, F32 into F16, each at a distinct random
// row, against mg_fp32_to_fp16 element by element; every other row keeps
// its sentinel. A packed src (the batched path, over several 256-element
// chunks) and a strided view (row by row), 1 and 2 threads.
START_TEST(test_set_rows_of_one_element) {
    enum { M = 600, N_DST = 1000, SENTINEL = 0x7bff };
    uint64_t rng = 7;
    for (int strided = 0; strided < 2; strided++) {
        for (int threads = 1; threads <= 2; threads++) {
            struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 1 << 20});
            struct mg_tensor *  dst = mg_new_tensor_2d(ctx, MG_TYPE_F16, 1, N_DST);
            struct mg_tensor *  all = mg_new_tensor_2d(ctx, MG_TYPE_F32, strided ? 2 : 1, M);
            struct mg_tensor *  src = strided ? mg_view_2d(ctx, all, 1, M, all->nb[1], 0) : all;
            struct mg_tensor *  ids = mg_new_tensor_1d(ctx, MG_TYPE_I32, M);
            fill(all->data, (int) mg_nelements(all), &rng, -70000.0f, 70000.0f);   // past F16's range too
            int32_t row_of[N_DST];
            for (int i = 0; i < N_DST; i++) row_of[i] = i;
            for (int i = N_DST - 1; i > 0; i--) {   // a random permutation; its first M are the rows
                const int j = (int) (mg_test_rand_u64(&rng) % (uint64_t) (i + 1)), t = row_of[i];
                row_of[i] = row_of[j], row_of[j] = t;
            }
            memcpy(ids->data, row_of, M * sizeof(int32_t));
            for (int i = 0; i < N_DST; i++) ((mg_fp16_t *) dst->data)[i] = SENTINEL;
            struct mg_tensor * out = mg_set_rows(ctx, dst, src, ids);
            out->flags |= MG_TENSOR_FLAG_OUTPUT;
            struct mg_cgraph * g = mg_new_graph(ctx);
            mg_build_forward_expand(g, out);
            mg_graph_compute_with_ctx(ctx, g, mg_test_threads(threads));
            mg_fp16_t want[N_DST];
            for (int i = 0; i < N_DST; i++) want[i] = SENTINEL;
            for (int r = 0; r < M; r++) {
                want[row_of[r]] = mg_fp32_to_fp16(*(const float *) ((const char *) src->data + r * src->nb[1]));
            }
            for (int i = 0; i < N_DST; i++) {
                ck_assert_msg(((const mg_fp16_t *) dst->data)[i] == want[i], "strided %d threads %d row %d: %#x, want %#x",
                              strided, threads, i, ((const mg_fp16_t *) dst->data)[i], want[i]);
            }
            mg_free(ctx);
        }
    }
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("ops_simd");
    MG_TCASE(s, "ops_simd", test_exp_row_matches_scalar, test_exp_row_edges, test_expf_versions,
                test_swiglu_row_matches_scalar, test_rope_pairs_matches_scalar_and_works_in_place,
                test_weighted_rows_add_matches_scalar, test_set_rows_of_one_element);
    return s;
}
