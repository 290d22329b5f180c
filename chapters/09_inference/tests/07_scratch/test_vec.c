// test_vec.c - the CPU type traits and the dot-product kernels of chapter 07.
//
// Three kinds of check:
//   - each vec_dot against a double-precision dot product of the two rows
//     decoded to floats (the weight row, and the activation row after its
//     conversion to vec_dot_type), within the rounding its float steps allow;
//   - each vec_dot against the formula of docs/formats.md 2.6 written out here,
//     to the bit: ggml's float evaluation order is part of the contract;
//   - the x86 rule of the Q8_0 activation quantizer (127/amax, ties to even),
//     against a naive version written here and on constructed ties.
#include "harness.h"
#include "vec.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_N 4096

// A weight row and an activation row of n elements in the given weight type,
// both converted as a matmul would, with the decoded floats of each.
struct rows {
    int64_t n;
    uint8_t w[MAX_N * 4];    // weight row, in its type
    uint8_t a[MAX_N * 4];    // activation row, in vec_dot_type
    float   wf[MAX_N];       // the weight row decoded
    float   af[MAX_N];       // the activation row decoded
    float   a_f32[MAX_N];    // the activations before conversion
};

static struct rows R;

// Gaussian rows, or (aligned) rows whose elements share a random sign and
// have magnitudes near the block maximum: the per-block integer sums then
// reach 13 and more significant bits, and the order of the float multiplies
// that follow starts to matter.
static void make_rows_of(enum mg_type type, int64_t n, uint64_t seed, bool aligned) {
    uint64_t rng = seed;
    float    w[MAX_N];
    for (int64_t i = 0; i < n; i++) {
        if (aligned) {
            const float sign = (mg_test_rand_u64(&rng) & 1) ? 1.0f : -1.0f;
            w[i]       = sign * mg_test_rand_uniform(&rng, 0.85f, 1.0f);
            R.a_f32[i] = sign * mg_test_rand_uniform(&rng, 0.85f, 1.0f) * 3.0f;
        } else {
            w[i]       = mg_test_rand_normal(&rng);
            R.a_f32[i] = mg_test_rand_normal(&rng) * 3.0f;
        }
    }
    R.n = n;
    const struct mg_type_traits *     tw = mg_get_type_traits(type);
    const struct mg_type_traits_cpu * tc = mg_get_type_traits_cpu(type);
    ck_assert_ptr_nonnull(tc);
    if (type == MG_TYPE_F32) memcpy(R.w, w, (size_t) n * sizeof(float));
    else tw->from_float(w, R.w, n);
    tw->to_float(R.w, R.wf, n);
    if (tc->from_float) tc->from_float(R.a_f32, R.a, n);
    else memcpy(R.a, R.a_f32, (size_t) n * sizeof(float));
    mg_get_type_traits(tc->vec_dot_type)->to_float(R.a, R.af, n);
}

static void make_rows(enum mg_type type, int64_t n, uint64_t seed) {
    make_rows_of(type, n, seed, false);
}

// The exact dot of the decoded rows, and the sum of |terms|, which bounds every
// partial sum a float accumulation goes through.
static double exact_dot(double * magnitude) {
    double dot = 0, mag = 0;
    for (int64_t i = 0; i < R.n; i++) {
        dot += (double) R.wf[i] * R.af[i];
        mag += fabs((double) R.wf[i] * R.af[i]);
    }
    *magnitude = mag;
    return dot;
}

// In full/'s SIMD build (vec_simd.h) the table holds the SIMD twins of the
// kernels named here; TABLE_KERNEL names the one the table should hold.
#if defined(MG_SIMD)
#define TABLE_KERNEL(f) f##_simd
#else
#define TABLE_KERNEL(f) f
#endif
// full/'s aarch64 NEON build (vec_neon.c) has twins for some of them only:
// TABLE_KERNEL_N names those (F16 and Q8_0 dots, the Q8_0 converter).
#if defined(MG_NEON)
#define TABLE_KERNEL_N(f) f##_neon
#else
#define TABLE_KERNEL_N(f) TABLE_KERNEL(f)
#endif

// A scalar kernel by name: its float order is what the order tests pin down
// (the SIMD twins add in another order; tests/full/test_vec_simd.c checks them).
static float run_scalar(mg_vec_dot_fn vec_dot) {
    float s = NAN;
    vec_dot(R.n, &s, R.w, R.a);
    return s;
}

static float run_vec_dot(enum mg_type type) {
    float s = NAN;
    mg_get_type_traits_cpu(type)->vec_dot(R.n, &s, R.w, R.a);
    return s;
}

// ---------------------------------------------------------------------------
// The table
// ---------------------------------------------------------------------------

START_TEST(test_traits_table) {
    const struct mg_type_traits_cpu * t = mg_get_type_traits_cpu(MG_TYPE_F32);
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(t->vec_dot_type, MG_TYPE_F32);
    ck_assert_ptr_null(t->from_float);

    t = mg_get_type_traits_cpu(MG_TYPE_F16);
    ck_assert_int_eq(t->vec_dot_type, MG_TYPE_F16);
    ck_assert(t->from_float == TABLE_KERNEL(mg_fp32_to_fp16_row));
    ck_assert(t->vec_dot == TABLE_KERNEL_N(mg_vec_dot_f16));

    t = mg_get_type_traits_cpu(MG_TYPE_Q4_0);
    ck_assert_int_eq(t->vec_dot_type, MG_TYPE_Q8_0);
    ck_assert(t->from_float == TABLE_KERNEL_N(mg_quantize_row_q8_0));   // the x86 rule, not _ref (NEON: ARM's)
    ck_assert(t->vec_dot == TABLE_KERNEL(mg_vec_dot_q4_0_q8_0));

    t = mg_get_type_traits_cpu(MG_TYPE_Q8_0);
    ck_assert_int_eq(t->vec_dot_type, MG_TYPE_Q8_0);
    ck_assert(t->from_float == TABLE_KERNEL_N(mg_quantize_row_q8_0));
    ck_assert(t->vec_dot == TABLE_KERNEL_N(mg_vec_dot_q8_0_q8_0));

    ck_assert_ptr_null(mg_get_type_traits_cpu(MG_TYPE_I32));
    ck_assert_ptr_null(mg_get_type_traits_cpu((enum mg_type) 17));   // not a type this engine has
    ck_assert_ptr_null(mg_get_type_traits_cpu(MG_TYPE_COUNT));
}
END_TEST

// ---------------------------------------------------------------------------
// Against the exact dot of the decoded rows
// ---------------------------------------------------------------------------

// Lengths that are 1, 3, 5, 11, 128 blocks of 32: odd counts catch a kernel
// that assumes pairs of blocks.
static const int64_t block_lengths[] = {32, 96, 160, 352, 4096};

START_TEST(test_vec_dot_f32_accuracy) {
    const int64_t lengths[] = {1, 7, 33, 96, 1000, 4096};
    for (size_t k = 0; k < sizeof(lengths) / sizeof(lengths[0]); k++) {
        make_rows(MG_TYPE_F32, lengths[k], 100 + k);
        double       mag;
        const double want = exact_dot(&mag);
        // one rounding per product and per addition, each <= 2^-24 of a partial sum <= mag
        const double tol = (double) (2 * R.n + 1) * 0x1p-24 * mag;
        const float  got = run_vec_dot(MG_TYPE_F32);
        ck_assert_msg(fabs(got - want) <= tol, "n %lld: %g vs %g (tol %g)", (long long) R.n, got, want, tol);
    }
}
END_TEST

START_TEST(test_vec_dot_f16_accuracy) {
    const int64_t lengths[] = {1, 7, 33, 96, 1000, 4096};
    for (size_t k = 0; k < sizeof(lengths) / sizeof(lengths[0]); k++) {
        make_rows(MG_TYPE_F16, lengths[k], 200 + k);
        double       mag;
        const double want = exact_dot(&mag);
        // products rounded to float (2^-24 each), a double sum, one final rounding
        double tol = 0x1p-24 * mag + 0x1p-24 * fabs(want) + 1e-30;
#if defined(MG_NEON)
        // full/'s NEON twin adds as ggml's NEON build does: in half precision
        // (2^-11 a rounding), n / 32 steps per accumulator and the reduction
        tol = ((double) R.n / 32 + 10) * 0x1p-11 * mag + 1e-30;
#endif
        const float  got = run_vec_dot(MG_TYPE_F16);
        ck_assert_msg(fabs(got - want) <= tol, "n %lld: %g vs %g (tol %g)", (long long) R.n, got, want, tol);
    }
}
END_TEST

static void check_block_type_accuracy(enum mg_type type, uint64_t seed) {
    for (size_t k = 0; k < sizeof(block_lengths) / sizeof(block_lengths[0]); k++) {
        make_rows(type, block_lengths[k], seed + k);
        double       mag;
        const double want = exact_dot(&mag);
        // per block: the int sum is exact, then two multiplies and one addition
        const double tol = (double) (3 * (R.n / 32) + 1) * 0x1p-24 * mag;
        const float  got = run_vec_dot(type);
        ck_assert_msg(fabs(got - want) <= tol, "%s n %lld: %g vs %g (tol %g)", mg_type_name(type), (long long) R.n,
                      got, want, tol);
        ck_assert_msg(fabs(got - want) <= 1e-5 * mag, "%s n %lld: %g vs %g", mg_type_name(type), (long long) R.n,
                      got, want);
    }
}

START_TEST(test_vec_dot_q4_0_accuracy) {
    check_block_type_accuracy(MG_TYPE_Q4_0, 300);
}
END_TEST

START_TEST(test_vec_dot_q8_0_accuracy) {
    check_block_type_accuracy(MG_TYPE_Q8_0, 400);
}
END_TEST

// ---------------------------------------------------------------------------
// ggml's float order (docs/formats.md 2.6), to the bit
// ---------------------------------------------------------------------------

START_TEST(test_vec_dot_f32_order) {
    make_rows(MG_TYPE_F32, 1000, 500);
    const float * x   = (const float *) R.w;
    float         acc = 0;   // one float accumulator, in order
    for (int64_t i = 0; i < R.n; i++) acc += x[i] * R.a_f32[i];
    ck_assert_float_eq(run_scalar(mg_vec_dot_f32), acc);
}
END_TEST

START_TEST(test_vec_dot_f16_order) {
    make_rows(MG_TYPE_F16, 1000, 501);
    double acc = 0;   // each product in float, the sum in double
    for (int64_t i = 0; i < R.n; i++) acc += (double) (R.wf[i] * R.af[i]);
    ck_assert_float_eq(run_scalar(mg_vec_dot_f16), (float) acc);
}
END_TEST

// Rows for the order tests: mostly one to three blocks of aligned data, where
// a difference of one rounding in one block's term is not lost in the
// rounding of a large sum; every fourth a long Gaussian row.
static void make_order_rows(enum mg_type type, int k, uint64_t seed) {
    if (k % 4 == 0) make_rows_of(type, 4096, seed, false);
    else make_rows_of(type, 32 * (k % 4), seed, true);
}

// Q4_0, as llama.cpp's repacked gemv: acc = fma(dW * dA, S, acc) with S the exact int sum of (q - 8) * a per block.
// S is summed as q * a and a apart (S = sum q * a - 8 * sum a): GCC 12 miscompiles the loop
// of (q - 8) * a when it may use VNNI (tools/vnni_canary.c), and this reference once failed so.
START_TEST(test_vec_dot_q4_0_order) {
    for (int k = 0; k < 200; k++) {
        make_order_rows(MG_TYPE_Q4_0, k, 510 + (uint64_t) k);
        const struct mg_block_q4_0 * w   = (const void *) R.w;
        const struct mg_block_q8_0 * a   = (const void *) R.a;
        float                        acc = 0;
        for (int64_t b = 0; b < R.n / 32; b++) {
            int qa = 0, sa = 0;
            for (int j = 0; j < 32; j++) {
                const int q = j < 16 ? (w[b].qs[j] & 15) : (w[b].qs[j - 16] >> 4);
                qa += q * a[b].qs[j];
                sa += a[b].qs[j];
            }
            const int S = qa - 8 * sa;
            acc = fmaf(mg_fp16_to_fp32(w[b].d) * mg_fp16_to_fp32(a[b].d), (float) S, acc);
        }
        ck_assert_float_eq(run_scalar(mg_vec_dot_q4_0_q8_0), acc);
    }
}
END_TEST

// Q8_0, ggml's x86 order: 8 lanes of 4 products per block, lane += (dW * dA) * S_lane
// fused, then the lanes summed halves first: ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7)).
START_TEST(test_vec_dot_q8_0_order) {
    for (int k = 0; k < 200; k++) {
        make_order_rows(MG_TYPE_Q8_0, k, 1520 + (uint64_t) k);
        const struct mg_block_q8_0 * w        = (const void *) R.w;
        const struct mg_block_q8_0 * a        = (const void *) R.a;
        float                        lane[8]  = {0};
        for (int64_t b = 0; b < R.n / 32; b++) {
            const float d = mg_fp16_to_fp32(w[b].d) * mg_fp16_to_fp32(a[b].d);
            for (int l = 0; l < 8; l++) {
                int S = 0;
                for (int j = 4 * l; j < 4 * l + 4; j++) S += w[b].qs[j] * a[b].qs[j];
                lane[l] = fmaf(d, (float) S, lane[l]);
            }
        }
        const float acc = ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
        ck_assert_float_eq(run_scalar(mg_vec_dot_q8_0_q8_0), acc);
    }
}
END_TEST

// ---------------------------------------------------------------------------
// The Q8_0 activation quantizer (x86 rule)
// ---------------------------------------------------------------------------

// With amax = 127, d = 1 and id = 127/127 = 1: every x below is an exact tie
// or an exact integer. Ties go to the even neighbour, where _ref (roundf) goes
// away from zero.
START_TEST(test_q8_0_activations_round_ties_to_even) {
    float x[32] = {127.0f, 2.5f, -2.5f, 3.5f, 0.5f, -0.5f, 126.5f, -1.5f, 1.4999999f, 7.0f};
    const int want_x86[10] = {127, 2, -2, 4, 0, 0, 126, -2, 1, 7};
    const int want_ref[10] = {127, 3, -3, 4, 1, -1, 127, -2, 1, 7};
    struct mg_block_q8_0 bx, br;
    mg_quantize_row_q8_0(x, &bx, 32);
    mg_quantize_row_q8_0_ref(x, &br, 32);
    ck_assert_uint_eq(bx.d, 0x3c00);
    ck_assert_uint_eq(br.d, 0x3c00);
    for (int j = 0; j < 10; j++) {
        ck_assert_msg(bx.qs[j] == want_x86[j], "x86 rule: %g -> %d, want %d", x[j], bx.qs[j], want_x86[j]);
        ck_assert_msg(br.qs[j] == want_ref[j], "reference: %g -> %d, want %d", x[j], br.qs[j], want_ref[j]);
    }
    // Scaled by 2^-3: still exact ties, now with d = 0.125 and id = 8.
    for (int j = 0; j < 32; j++) x[j] *= 0.125f;
    mg_quantize_row_q8_0(x, &bx, 32);
    ck_assert_uint_eq(bx.d, 0x3000);
    for (int j = 0; j < 10; j++) ck_assert_int_eq(bx.qs[j], want_x86[j]);
}
END_TEST

// The rule written naively: d = amax/127 stored as F16, q = round-half-even(x * (127/amax)).
START_TEST(test_q8_0_activations_match_naive_x86_rule) {
    uint64_t rng = 600;
    for (int k = 0; k < 2000; k++) {
        float x[32];
        for (int j = 0; j < 32; j++) x[j] = mg_test_rand_normal(&rng) * (float) (1 + k % 7);
        if (k % 10 == 0) x[k % 32] = 0;   // some zeros too
        struct mg_block_q8_0 b;
        mg_quantize_row_q8_0(x, &b, 32);
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
        const float id = 127.0f / amax;
        ck_assert_uint_eq(b.d, mg_fp32_to_fp16(amax / 127.0f));
        for (int j = 0; j < 32; j++) {
            const float v = x[j] * id;
            ck_assert_msg(b.qs[j] == (int) nearbyintf(v), "block %d elem %d: %.9g -> %d", k, j, v, b.qs[j]);
        }
    }
}
END_TEST

// The inverse scale is 127/amax, not 1/d: find an amax where the two differ in
// the last bit and an x that the difference pushes across a rounding boundary.
START_TEST(test_q8_0_activations_inverse_scale) {
    int found = 0;
    for (int i = 0; i < 100000 && !found; i++) {
        const float amax   = 1.0f + (float) i * 0x1p-13f;
        const float id_x86 = 127.0f / amax;
        const float id_ref = 1.0f / (amax / 127.0f);
        if (id_x86 == id_ref) continue;
        for (int k = 1; k < 126 && !found; k++) {
            // Walk x one ulp at a time across the point where x * id_x86 = k + 0.5.
            float v = nextafterf(((float) k + 0.5f) / id_x86, 0.0f);
            for (int back = 0; back < 4; back++) v = nextafterf(v, 0.0f);
            for (int step = 0; step < 9 && !found; step++, v = nextafterf(v, 1000.0f)) {
                const float p_x86 = v * id_x86, p_ref = v * id_ref;
                if (p_x86 == (float) k + 0.5f || p_ref == (float) k + 0.5f) continue;   // no ties here
                if (nearbyintf(p_x86) == roundf(p_ref)) continue;
                float in[32] = {amax, v};
                struct mg_block_q8_0 bx, br;
                mg_quantize_row_q8_0(in, &bx, 32);
                mg_quantize_row_q8_0_ref(in, &br, 32);
                ck_assert_int_eq(bx.qs[1], (int) nearbyintf(p_x86));
                ck_assert_int_eq(br.qs[1], (int) roundf(p_ref));
                ck_assert_int_ne(bx.qs[1], br.qs[1]);
                found = 1;
            }
        }
    }
    ck_assert_msg(found, "found no x for which 127/amax and 1/(amax/127) give different codes");
}
END_TEST

START_TEST(test_q8_0_activations_zero_block) {
    float x[64] = {0};
    x[40] = 1.0f;   // the second block is not zero
    struct mg_block_q8_0 b[2];
    memset(b, 0x55, sizeof(b));
    mg_quantize_row_q8_0(x, b, 64);
    ck_assert_uint_eq(b[0].d, 0);
    for (int j = 0; j < 32; j++) ck_assert_int_eq(b[0].qs[j], 0);
    ck_assert_int_eq(b[1].qs[8], 127);
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("vec");
    TCase * tc = tcase_create("traits");
    tcase_add_test(tc, test_traits_table);
    suite_add_tcase(s, tc);

    tc = tcase_create("accuracy");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_vec_dot_f32_accuracy);
    tcase_add_test(tc, test_vec_dot_f16_accuracy);
    tcase_add_test(tc, test_vec_dot_q4_0_accuracy);
    tcase_add_test(tc, test_vec_dot_q8_0_accuracy);
    suite_add_tcase(s, tc);

    tc = tcase_create("order");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_vec_dot_f32_order);
    tcase_add_test(tc, test_vec_dot_f16_order);
    tcase_add_test(tc, test_vec_dot_q4_0_order);
    tcase_add_test(tc, test_vec_dot_q8_0_order);
    suite_add_tcase(s, tc);

    tc = tcase_create("q8_0-activations");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_q8_0_activations_round_ties_to_even);
    tcase_add_test(tc, test_q8_0_activations_match_naive_x86_rule);
    tcase_add_test(tc, test_q8_0_activations_inverse_scale);
    tcase_add_test(tc, test_q8_0_activations_zero_block);
    suite_add_tcase(s, tc);
    return s;
}
