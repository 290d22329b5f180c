// test_gemm_float.c - the float matrix product in tinyBLAS's order
// (full/gemm_float.c) against its scalar reference, and the order itself.
//
//   - mg_gemm_float (the SIMD tiles: 4 rows x up to 6 columns, in row
//     blocks) against mg_gemm_float_dot, one scalar dot product per output,
//     to the bit: F32, F16 and BF16, random rows, every column count of a
//     tile and several tiles (2 to 13 columns), k of 1 to 76 steps, and
//     rows long enough to be walked in chunks of k, row ranges that start
//     inside the matrix, rows and columns apart;
//   - BF16 with denormal inputs and pairs that cancel: the AVX512-BF16
//     instruction reads denormals as zero, flushes denormal results and adds
//     the odd product of a pair before the even one, and so must the reference;
//   - the order on a worked example: a sum that depends on which lane each
//     element lands in, with the value the lanes give (not a sequential sum's);
//   - when the kernel applies: llamafile_sgemm's conditions (n >= 2, k a
//     multiple of the step, m of 4).
//
// In a scalar build mg_gemm_float is the reference itself: the first test
// then compares it with itself, the others still check the order.
#include "gemm_float.h"
#include "harness.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const enum mg_type FLOAT_TYPES[] = {MG_TYPE_F32, MG_TYPE_F16, MG_TYPE_BF16};

// Row r of a random matrix in the type: N(0, 1) floats, rounded to it.
static void *random_rows(enum mg_type type, int64_t k, int64_t rows, size_t stride, uint64_t * rng) {
    char *  m   = calloc((size_t) rows, stride);
    float * row = malloc(sizeof(float) * (size_t) k);
    ck_assert(m && row);
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t i = 0; i < k; i++) row[i] = mg_test_rand_normal(rng);
        char * dst = m + (size_t) r * stride;
        if (type == MG_TYPE_F32) memcpy(dst, row, sizeof(float) * (size_t) k);
        else if (type == MG_TYPE_F16) mg_fp32_to_fp16_row(row, dst, k);
        else mg_fp32_to_bf16_row(row, dst, k);
    }
    free(row);
    return m;
}

// mg_gemm_float over rows [r0, r1) of m, n columns, against the reference per output.
static void check_product(enum mg_type type, int64_t k, int64_t m, int64_t r0, int64_t r1, int64_t n, size_t gap,
                          uint64_t seed) {
    uint64_t     rng = seed;
    const size_t row = mg_row_size(type, k) + gap;
    void *       w   = random_rows(type, k, m, row, &rng);
    void *       x   = random_rows(type, k, n, row, &rng);
    const size_t ldc = (size_t) m + 3;   // result columns apart too
    float *      out = malloc(sizeof(float) * ldc * (size_t) n);
    ck_assert_ptr_nonnull(out);
    memset(out, 0xff, sizeof(float) * ldc * (size_t) n);   // NaNs: an output nobody writes cannot pass
    mg_gemm_float(type, k, w, row, r0, r1, x, row, n, out, ldc);
    for (int64_t j = 0; j < n; j++) {
        for (int64_t i = r0; i < r1; i++) {
            float want;
            mg_gemm_float_dot(type, k, &want, (const char *) w + (size_t) i * row, (const char *) x + (size_t) j * row);
            const float got = out[(size_t) j * ldc + (size_t) i];
            ck_assert_msg(memcmp(&got, &want, sizeof(float)) == 0,
                          "%s k %lld, rows [%lld, %lld), %lld columns: out[%lld, %lld] is %a, the reference %a",
                          mg_type_name(type), (long long) k, (long long) r0, (long long) r1, (long long) n,
                          (long long) i, (long long) j, got, want);
        }
    }
    free(w);
    free(x);
    free(out);
}

START_TEST(test_simd_equals_reference) {
    const enum mg_type type  = FLOAT_TYPES[_i];
    const int64_t      step  = mg_gemm_float_order(type).step;
    const int64_t      steps[] = {1, 2, 3, 5, 48, 76};   // k = step * these: 76 * 16 = 1216, no multiple of 64
    const int64_t      cols[]  = {2, 3, 4, 5, 6, 7, 12, 13};
    for (size_t s = 0; s < sizeof(steps) / sizeof(steps[0]); s++) {
        for (size_t c = 0; c < sizeof(cols) / sizeof(cols[0]); c++) {
            check_product(type, step * steps[s], 24, 0, 24, cols[c], 0, 10 * s + c);
        }
    }
    // Rows 8..20 of 28 (a thread's share), rows and columns with gaps between them.
    check_product(type, 3 * step, 28, 8, 20, 9, 40, 99);
    // One row block of 128 KB is 4 * 2432 * 4 bytes x 3 tiles for F32: several blocks.
    check_product(type, 2432, 40, 0, 40, 7, 0, 98);
    // Rows longer than a chunk of k for every type and level (gemm_float.c:
    // chunk_of), split into several chunks, the last one shorter.
    check_product(type, 8192 + 3 * step, 12, 0, 12, 5, 0, 97);
}
END_TEST

// BF16 pairs where the instruction's rules show: denormal weights and
// activations (read as zero), a lane whose sum is denormal (flushed to zero),
// and a pair (+2^24, -2^24) after a 1 that survives only if the pair is added
// even first (the instruction adds the odd product first: the 1 is lost).
START_TEST(test_bf16_denormals_and_pair_order) {
    if (mg_gemm_float_order(MG_TYPE_BF16).step != 2 * mg_gemm_float_order(MG_TYPE_BF16).lanes) {
        MG_TEST_SKIP("this build's BF16 kernel does not multiply pairs (no AVX512-BF16)");
    }
    enum { K = 64, M = 4, N = 3 };
    mg_bf16_t w[M * K], x[N * K];
    uint64_t  rng = 7;
    for (int i = 0; i < M * K; i++) w[i] = mg_fp32_to_bf16(mg_test_rand_normal(&rng));
    for (int i = 0; i < N * K; i++) x[i] = mg_fp32_to_bf16(mg_test_rand_normal(&rng));
    for (int i = 0; i < K; i += 7) w[i] = 0x0003;        // a denormal weight
    for (int i = 3; i < N * K; i += 11) x[i] = 0x8041;   // a negative denormal activation
    // Row 2 x column 1, lane 0: 1 * 1 in the first step, then the pair of elements 32 (even) and 33 (odd).
    for (int i = 0; i < K; i++) w[2 * K + i] = 0;
    w[2 * K + 0] = x[K + 0] = mg_fp32_to_bf16(1.0f);
    w[2 * K + 32] = mg_fp32_to_bf16(4096.0f), x[K + 32] = mg_fp32_to_bf16(-4096.0f);
    w[2 * K + 33] = mg_fp32_to_bf16(4096.0f), x[K + 33] = mg_fp32_to_bf16(4096.0f);
    // Row 3 x column 2: the one product 2^-70 * 2^-70 = 2^-140, a denormal.
    for (int i = 0; i < K; i++) w[3 * K + i] = 0;
    w[3 * K + 2] = x[2 * K + 2] = mg_fp32_to_bf16(0x1p-70f);
    float out[N * M];
    mg_gemm_float(MG_TYPE_BF16, K, w, K * sizeof(mg_bf16_t), 0, M, x, K * sizeof(mg_bf16_t), N, out, M);
    for (int j = 0; j < N; j++) {
        for (int i = 0; i < M; i++) {
            float want;
            mg_gemm_float_dot(MG_TYPE_BF16, K, &want, w + i * K, x + j * K);
            ck_assert_msg(memcmp(&out[j * M + i], &want, sizeof(float)) == 0, "out[%d, %d] is %a, the reference %a", i,
                          j, out[j * M + i], want);
        }
    }
    ck_assert_float_eq(out[1 * M + 2], 0.0f);   // the 1 was lost: odd first
    ck_assert_float_eq(out[2 * M + 3], 0.0f);   // 2^-140 flushed
}
END_TEST

// F32, k = 32, weights all 1: 2^24 at element 0, 1 at element 16, -2^24 at
// element 1. In order the sum is 1. In tinyBLAS's 16 lanes, lane 0 holds
// fma(1, 1, 2^24) = 2^24 (2^24 + 1 rounds to even) and lane 1 -2^24, and the
// lanes sum to 0: the 1 is lost, exactly as in llama.cpp's batch.
START_TEST(test_order_worked_example) {
    if (mg_gemm_float_order(MG_TYPE_F32).lanes != 16) {
        MG_TEST_SKIP("the worked example is for 16 lanes, this build's F32 kernel has 8 (AVX2)");
    }
    float w[2][32], x[2][32];
    for (int i = 0; i < 32; i++) w[0][i] = w[1][i] = 1.0f, x[0][i] = x[1][i] = 0.0f;
    x[0][0] = 0x1p24f, x[0][16] = 1.0f, x[0][1] = -0x1p24f;
    float sequential = 0.0f;
    for (int i = 0; i < 32; i++) sequential += w[0][i] * x[0][i];
    ck_assert_float_eq(sequential, 1.0f);
    float s;
    mg_gemm_float_dot(MG_TYPE_F32, 32, &s, w[0], x[0]);
    ck_assert_float_eq(s, 0.0f);
    float out[2 * 4];
    float w4[4][32];
    for (int r = 0; r < 4; r++) memcpy(w4[r], w[0], sizeof(w4[r]));
    mg_gemm_float(MG_TYPE_F32, 32, w4, sizeof(w4[0]), 0, 4, x, sizeof(x[0]), 2, out, 4);
    ck_assert_float_eq(out[0], 0.0f);   // column 0
    ck_assert_float_eq(out[4], 0.0f);   // column 1: all zeros
}
END_TEST

START_TEST(test_applies_as_llamafile_sgemm) {
    for (size_t t = 0; t < 3; t++) {
        const enum mg_type type = FLOAT_TYPES[t];
        const int64_t      step = mg_gemm_float_order(type).step;
        ck_assert(step == 8 || step == 16 || step == 32);
        ck_assert(mg_gemm_float_applies(type, 64, 2, 4 * step));
        ck_assert(!mg_gemm_float_applies(type, 64, 1, 4 * step));          // one token: vec_dot
        ck_assert(!mg_gemm_float_applies(type, 62, 8, 4 * step));          // rows not a multiple of 4
        ck_assert(!mg_gemm_float_applies(type, 64, 8, 4 * step + step / 2));   // k not a multiple of the step
    }
    ck_assert(!mg_gemm_float_applies(MG_TYPE_Q8_0, 64, 8, 256));   // not a float type
    ck_assert_int_eq(mg_gemm_float_order(MG_TYPE_Q4_0).step, 0);
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s  = suite_create("gemm_float");
    TCase * tc = tcase_create("gemm_float");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, test_simd_equals_reference, 0, 3);
    tcase_add_test(tc, test_bf16_denormals_and_pair_order);
    tcase_add_test(tc, test_order_worked_example);
    tcase_add_test(tc, test_applies_as_llamafile_sgemm);
    suite_add_tcase(s, tc);
    return s;
}
