// test_kquants.c - BF16, the K-quants of chapter 09 (Q4_K, Q6_K, Q8_K) and
// their dot products.
//
// The block layouts are checked by a decoder written from the index formulas
// of docs/formats.md 2.4 (kquant_elems.h), independently of full/quants_k.c.
// Chapter 09 only reads Q4_K and Q6_K: the dot products run on the blocks
// llama-quantize wrote into the Q4_K_M fixture. The Q4_K/Q6_K quantizers are
// full/'s, tested in tests/full/test_kquants_quantize.c; Q8_0 quantizing
// tiny-f32's tensors must still give llama-quantize's bytes here.
#include "dot_rows.h"
#include "fixture_quants.h"
#include "kquant_elems.h"
#include "harness.h"
#include "gguf.h"
#include "vec.h"

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static float float_of(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

static uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

// ---------------------------------------------------------------------------
// BF16
// ---------------------------------------------------------------------------

START_TEST(test_bf16_edge_values) {
    const struct {
        uint32_t in;
        uint16_t out;
        const char * what;
    } cases[] = {
        {0x00000000, 0x0000, "zero"},
        {0x80000000, 0x8000, "negative zero"},
        {0x3f800000, 0x3f80, "one"},
        {0xc0000000, 0xc000, "-2"},
        {0x3f808000, 0x3f80, "1 + 2^-8: a tie, to even (down)"},
        {0x3f818000, 0x3f82, "1 + 3 * 2^-8: a tie, to even (up)"},
        {0x3f808001, 0x3f81, "just above a tie"},
        {0x3f807fff, 0x3f80, "just below a tie"},
        {0x7f800000, 0x7f80, "inf"},
        {0xff800000, 0xff80, "-inf"},
        {0x7f7fffff, 0x7f80, "FLT_MAX rounds up to inf"},
        {0x7f7f7fff, 0x7f7f, "the largest float that stays finite"},
        {0x00010000, 0x0001, "a subnormal that is exact"},
        {0x00008000, 0x0000, "half the smallest subnormal: a tie, to even (zero)"},
        {0x00018000, 0x0002, "1.5 subnormal units: a tie, to even (2)"},
        {0x7fc00000, 0x7fc0, "quiet NaN"},
        {0x7f800001, 0x7fc0, "signalling NaN whose payload is in the dropped bits: stays NaN"},
        {0xff812345, 0xffc1, "negative NaN keeps sign and top payload bits, quiet bit forced"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const uint16_t got = mg_fp32_to_bf16(float_of(cases[i].in));
        ck_assert_msg(got == cases[i].out, "%s: 0x%08x -> 0x%04x, want 0x%04x", cases[i].what, cases[i].in, got,
                      cases[i].out);
    }
    ck_assert(mg_bf16_to_fp32(0x3f80) == 1.0f);
    ck_assert(mg_bf16_to_fp32(0xc049) == -3.140625f);
    ck_assert(mg_bf16_to_fp32(0x0001) == 0x1p-133f);
    ck_assert(isinf(mg_bf16_to_fp32(0xff80)) && mg_bf16_to_fp32(0xff80) < 0);
}
END_TEST

START_TEST(test_bf16_round_trip_exhaustive) {
    for (uint32_t h = 0; h <= 0xffff; h++) {
        const float f = mg_bf16_to_fp32((mg_bf16_t) h);
        ck_assert_uint_eq(bits_of(f), h << 16);   // widening puts the bits on top
        const uint16_t back = mg_fp32_to_bf16(f);
        if (isnan(f)) {
            ck_assert_msg(isnan(mg_bf16_to_fp32(back)) && (back >> 15) == (h >> 15), "NaN 0x%04x -> 0x%04x", h, back);
        } else {
            ck_assert_msg(back == h, "0x%04x came back as 0x%04x", h, back);
        }
    }
}
END_TEST

// Against round-to-nearest-even done the long way, on random floats.
START_TEST(test_bf16_rounding_random) {
    uint64_t rng = 99;
    for (int i = 0; i < 1000000; i++) {
        const uint32_t u = (uint32_t) mg_test_rand_u64(&rng);
        if ((u & 0x7fffffff) > 0x7f800000) continue;   // NaNs are checked above
        const uint32_t lo = u & 0xffff0000, hi = lo + 0x10000;   // the two bf16 neighbours, as bits
        const uint32_t rest = u & 0xffff;
        const uint32_t want = rest < 0x8000 ? lo : rest > 0x8000 ? hi : ((lo >> 16) & 1) ? hi : lo;
        ck_assert_uint_eq(mg_fp32_to_bf16(float_of(u)), want >> 16);
    }
}
END_TEST

// ---------------------------------------------------------------------------
// Sizes
// ---------------------------------------------------------------------------

START_TEST(test_k_block_sizes) {
    ck_assert_int_eq(MG_QK_K, 256);
    ck_assert_uint_eq(mg_type_size(MG_TYPE_Q4_K), 144);
    ck_assert_uint_eq(mg_type_size(MG_TYPE_Q6_K), 210);
    ck_assert_uint_eq(mg_type_size(MG_TYPE_Q8_K), 292);
    ck_assert_uint_eq(mg_type_size(MG_TYPE_BF16), 2);
    ck_assert_int_eq(mg_blck_size(MG_TYPE_Q4_K), 256);
    ck_assert_int_eq(mg_blck_size(MG_TYPE_Q6_K), 256);
    ck_assert_int_eq(mg_blck_size(MG_TYPE_Q8_K), 256);
    ck_assert_uint_eq(mg_row_size(MG_TYPE_Q4_K, 768), 3 * 144);
    // Field order (docs/formats.md 2.4): Q4_K has d first, Q6_K at the end.
    ck_assert_uint_eq(offsetof(struct mg_block_q4_K, d), 0);
    ck_assert_uint_eq(offsetof(struct mg_block_q4_K, dmin), 2);
    ck_assert_uint_eq(offsetof(struct mg_block_q4_K, scales), 4);
    ck_assert_uint_eq(offsetof(struct mg_block_q4_K, qs), 16);
    ck_assert_uint_eq(offsetof(struct mg_block_q6_K, qh), 128);
    ck_assert_uint_eq(offsetof(struct mg_block_q6_K, scales), 192);
    ck_assert_uint_eq(offsetof(struct mg_block_q6_K, d), 208);
    ck_assert_uint_eq(offsetof(struct mg_block_q8_K, qs), 4);
    ck_assert_uint_eq(offsetof(struct mg_block_q8_K, bsums), 260);
}
END_TEST

// The packing the decoder reads, for building blocks by hand.
static void q4_K_pack_scales(uint8_t s[12], const int sc[8], const int m[8]) {
    for (int j = 0; j < 4; j++) {
        s[j]     = (uint8_t) (sc[j] | (sc[j + 4] >> 4) << 6);
        s[j + 4] = (uint8_t) (m[j] | (m[j + 4] >> 4) << 6);
        s[j + 8] = (uint8_t) ((sc[j + 4] & 15) | (m[j + 4] & 15) << 4);
    }
}

static void q4_K_set_code(struct mg_block_q4_K * b, int e, int q) {
    uint8_t * byte = &b->qs[32 * (e / 64) + e % 32];
    if ((e % 64) < 32) *byte = (uint8_t) ((*byte & 0xf0) | q);
    else *byte = (uint8_t) ((*byte & 0x0f) | q << 4);
}

static void q6_K_set_code(struct mg_block_q6_K * b, int e, int q6) {
    const int h = e / 128, r = e % 128, k = r / 32, l = r % 32;
    uint8_t * lowbyte = &b->ql[64 * h + 32 * (k & 1) + l];
    if (k < 2) *lowbyte = (uint8_t) ((*lowbyte & 0xf0) | (q6 & 15));
    else *lowbyte = (uint8_t) ((*lowbyte & 0x0f) | (q6 & 15) << 4);
    uint8_t * hb = &b->qh[32 * h + l];
    *hb = (uint8_t) ((*hb & ~(3 << (2 * k))) | (q6 >> 4) << (2 * k));
}

START_TEST(test_q4_K_hand_built_block) {
    const int sc[8] = {3, 13, 23, 33, 43, 53, 63, 17};
    const int m[8]  = {0, 5, 40, 63, 16, 31, 48, 1};
    struct mg_block_q4_K b;
    memset(&b, 0, sizeof(b));
    b.d    = 0x3c00;   // 1.0
    b.dmin = 0x3800;   // 0.5
    q4_K_pack_scales(b.scales, sc, m);
    for (int e = 0; e < 256; e++) q4_K_set_code(&b, e, (7 * e) % 16);

    float y[256];
    mg_dequantize_row_q4_K(&b, y, 256);
    // Worked by hand: element e has code 7e mod 16, sub-block e/32.
    ck_assert_float_eq(y[0], 0.0f);        // 3 * 0 - 0.5 * 0
    ck_assert_float_eq(y[37], 36.5f);      // 13 * 3 - 0.5 * 5
    ck_assert_float_eq(y[100], 364.5f);    // 33 * 12 - 0.5 * 63
    ck_assert_float_eq(y[200], 480.0f);    // 63 * 8 - 0.5 * 48
    ck_assert_float_eq(y[255], 152.5f);    // 17 * 9 - 0.5 * 1
    for (int e = 0; e < 256; e++) {
        const struct elem el = q4_K_elem(&b, e);
        ck_assert_int_eq(el.q, (7 * e) % 16);
        ck_assert_float_eq(y[e], (float) sc[e / 32] * (float) el.q - 0.5f * (float) m[e / 32]);
    }
}
END_TEST

START_TEST(test_q6_K_hand_built_block) {
    struct mg_block_q6_K b;
    memset(&b, 0, sizeof(b));
    b.d = 0x3800;   // 0.5
    for (int j = 0; j < 16; j++) b.scales[j] = (int8_t) (j - 8);
    for (int e = 0; e < 256; e++) q6_K_set_code(&b, e, (5 * e) % 64);

    float y[256];
    mg_dequantize_row_q6_K(&b, y, 256);
    ck_assert_float_eq(y[0], 128.0f);     // (0.5 * -8) * (0 - 32)
    ck_assert_float_eq(y[100], -20.0f);   // (0.5 * -2) * (52 - 32)
    ck_assert_float_eq(y[130], 0.0f);     // scale 0
    ck_assert_float_eq(y[255], 94.5f);    // (0.5 * 7) * (59 - 32)
    for (int e = 0; e < 256; e++) {
        const struct elem el = q6_K_elem(&b, e);
        ck_assert_int_eq(el.q + 32, (5 * e) % 64);
        ck_assert_float_eq(y[e], 0.5f * (float) (e / 16 - 8) * (float) el.q);
    }
}
END_TEST

START_TEST(test_q8_K_hand_built_block) {
    struct mg_block_q8_K b;
    memset(&b, 0, sizeof(b));
    b.d = -0.25f;
    for (int e = 0; e < 256; e++) b.qs[e] = (int8_t) (e - 128);
    float y[256];
    mg_dequantize_row_q8_K(&b, y, 256);
    ck_assert_float_eq(y[0], 32.0f);
    ck_assert_float_eq(y[128], 0.0f);
    ck_assert_float_eq(y[255], -31.75f);
}
END_TEST

// Random bytes with sane scales: the decoder and the library agree to the bit.
START_TEST(test_random_blocks_decode_like_facts) {
    uint64_t rng = 5;
    for (int k = 0; k < 200; k++) {
        struct mg_block_q4_K b4[2];
        struct mg_block_q6_K b6[2];
        uint8_t *            p4 = (uint8_t *) b4;
        uint8_t *            p6 = (uint8_t *) b6;
        for (size_t i = 0; i < sizeof(b4); i++) p4[i] = (uint8_t) mg_test_rand_u64(&rng);
        for (size_t i = 0; i < sizeof(b6); i++) p6[i] = (uint8_t) mg_test_rand_u64(&rng);
        for (int i = 0; i < 2; i++) {   // finite scales between 2^-8 and 2^2
            b4[i].d    = (mg_fp16_t) (0x1c00 + mg_test_rand_u64(&rng) % 0x2800);
            b4[i].dmin = (mg_fp16_t) (0x1c00 + mg_test_rand_u64(&rng) % 0x2800);
            b6[i].d    = (mg_fp16_t) (0x1c00 + mg_test_rand_u64(&rng) % 0x2800) | (k & 1) << 15;
        }
        float y4[512], y6[512];
        mg_dequantize_row_q4_K(b4, y4, 512);
        mg_dequantize_row_q6_K(b6, y6, 512);
        for (int e = 0; e < 512; e++) {
            ck_assert_float_eq(y4[e], elem_value(q4_K_elem(&b4[e / 256], e % 256)));
            ck_assert_float_eq(y6[e], elem_value(q6_K_elem(&b6[e / 256], e % 256)));
        }
    }
}
END_TEST

// ---------------------------------------------------------------------------
// Quantizers
// ---------------------------------------------------------------------------

#define RT_N (256 * 64)
static float rt_x[RT_N], rt_y[RT_N];

// Q8_K of an all-zero block: d = 0 and every code and sum 0 (ggml leaves the
// sums unset there; ours are defined).
START_TEST(test_q8_K_zero_block) {
    float x[256] = {0};
    struct mg_block_q8_K b8;
    memset(&b8, 0x5a, sizeof(b8));
    mg_quantize_row_q8_K_ref(x, &b8, 256);
    ck_assert_float_eq(b8.d, 0.0f);
    for (int e = 0; e < 256; e++) ck_assert_int_eq(b8.qs[e], 0);
    for (int j = 0; j < 16; j++) ck_assert_int_eq(b8.bsums[j], 0);
}
END_TEST

// Q8_K written naively: the signed maximum maps to -127; d = 1 / (-127 / max)
// is an F32 (negative when the maximum is positive); codes round half to even.
START_TEST(test_q8_K_matches_naive_rule) {
    uint64_t rng = 33;
    mg_test_fill_normal(rt_x, RT_N, &rng);
    for (int i = 0; i < RT_N; i += 997) rt_x[i] *= 5;   // a few outliers of either sign
    static struct mg_block_q8_K q[RT_N / 256];
    mg_quantize_row_q8_K_ref(rt_x, q, RT_N);
    mg_dequantize_row_q8_K(q, rt_y, RT_N);
    int negative_d = 0;
    for (int b = 0; b < RT_N / 256; b++) {
        const float * x   = rt_x + 256 * b;
        float         max = 0;
        for (int e = 0; e < 256; e++) {
            if (fabsf(x[e]) > fabsf(max)) max = x[e];
        }
        const float iscale = -127.f / max;
        ck_assert_float_eq(q[b].d, 1 / iscale);
        negative_d += q[b].d < 0;
        for (int e = 0; e < 256; e++) {
            const float v = nearbyintf(iscale * x[e]);
            ck_assert_int_eq(q[b].qs[e], (int) fminf(127, v));
            ck_assert_double_le(fabs((double) rt_y[256 * b + e] - x[e]), 0.5 * fabs(q[b].d) * (1 + 1e-6));
        }
        for (int j = 0; j < 16; j++) {
            int sum = 0;
            for (int e = 0; e < 16; e++) sum += q[b].qs[16 * j + e];
            ck_assert_int_eq(q[b].bsums[j], sum);
        }
    }
    ck_assert_int_gt(negative_d, 0);
    ck_assert_int_lt(negative_d, RT_N / 256);
}
END_TEST

// The bound of the K-quants above, 1.5 * 2^-8 for 8-bit codes, scaled by the
// wider range of a 256-sample block (about 5.8 standard deviations, not 4.2).
START_TEST(test_q8_K_rms) {
    uint64_t rng = 34;
    mg_test_fill_normal(rt_x, RT_N, &rng);
    static struct mg_block_q8_K q[RT_N / 256];
    mg_quantize_row_q8_K_ref(rt_x, q, RT_N);
    mg_dequantize_row_q8_K(q, rt_y, RT_N);
    ck_assert_double_le(mg_test_rms_error(rt_x, rt_y, RT_N), 1.5 * 0x1p-8 * 5.8 / 4.2);
}
END_TEST

// ---------------------------------------------------------------------------
// Dot products
// ---------------------------------------------------------------------------

static struct dot_rows dot;   // dot_rows.h

// In full/'s SIMD build (vec_simd.h) the table holds the SIMD twins of the
// kernels named here; TABLE_KERNEL names the one the table should hold.
#if defined(MG_SIMD)
#define TABLE_KERNEL(f) f##_simd
#else
#define TABLE_KERNEL(f) f
#endif
// full/'s aarch64 NEON build (vec_neon.c) has twins for some of them only:
// TABLE_KERNEL_N names those.
#if defined(MG_NEON)
#define TABLE_KERNEL_N(f) f##_neon
#else
#define TABLE_KERNEL_N(f) TABLE_KERNEL(f)
#endif

// The scalar kernel by name: its float order is what the order tests pin down
// (the SIMD twins add in another order; tests/full/test_vec_simd.c checks them
// against these).
static mg_vec_dot_fn scalar_vec_dot(enum mg_type type) {
    switch (type) {
    case MG_TYPE_Q4_K: return mg_vec_dot_q4_K_q8_K;
    case MG_TYPE_Q6_K: return mg_vec_dot_q6_K_q8_K;
    case MG_TYPE_BF16: return mg_vec_dot_bf16;
    default: ck_abort_msg("no scalar kernel for %s", mg_type_name(type)); return NULL;
    }
}

// n weights of a Q4_K or Q6_K tensor of the Q4_K_M fixture (real blocks, as
// llama-quantize wrote them), from a block that seed picks.
static const void * fixture_blocks(enum mg_type type, int64_t n, uint64_t seed) {
    static struct mg_gguf * g;
    if (g == NULL) g = mg_gguf_open(mg_test_fixture("models/tiny-q4_k_m.gguf"));
    ck_assert_msg(g != NULL, "%s", mg_last_error());
    // token_embd is Q6_K (1.6 M weights), ffn_gate of layer 0 Q4_K (196,608).
    const struct mg_gguf_tensor_info * t =
        mg_gguf_find_tensor(g, type == MG_TYPE_Q6_K ? "token_embd.weight" : "blk.0.ffn_gate.weight");
    ck_assert_int_eq(t->type, type);
    const int64_t n_blocks = t->ne[0] * t->ne[1] / MG_QK_K, want = n / MG_QK_K;
    ck_assert_int_ge(n_blocks, want);
    const int64_t first = (int64_t) ((seed * 7919) % (uint64_t) (n_blocks - want + 1));
    return (const uint8_t *) t->data + (size_t) first * mg_type_size(type);
}

// Weights of type `type` and activations as mul_mat converts them: the
// scalar kernel's result, and the exact dot of the decoded rows. BF16
// weights are converted here; the K-quants come from the fixture.
static float prepare_dot(enum mg_type type, int64_t n, uint64_t seed, bool aligned, double * exact, double * mag) {
    if (type == MG_TYPE_BF16) return dot_rows_prepare(&dot, type, n, seed, aligned, scalar_vec_dot(type), exact, mag);
    return dot_rows_prepare_blocks(&dot, type, fixture_blocks(type, n, seed), n, seed, aligned, scalar_vec_dot(type),
                                   exact, mag);
}

START_TEST(test_cpu_traits_09) {
    const struct mg_type_traits_cpu * t = mg_get_type_traits_cpu(MG_TYPE_Q4_K);
    ck_assert_int_eq(t->vec_dot_type, MG_TYPE_Q8_K);
    ck_assert(t->from_float == TABLE_KERNEL_N(mg_quantize_row_q8_K));
    ck_assert(t->vec_dot == TABLE_KERNEL(mg_vec_dot_q4_K_q8_K));
    t = mg_get_type_traits_cpu(MG_TYPE_Q6_K);
    ck_assert_int_eq(t->vec_dot_type, MG_TYPE_Q8_K);
    ck_assert(t->vec_dot == TABLE_KERNEL_N(mg_vec_dot_q6_K_q8_K));
    t = mg_get_type_traits_cpu(MG_TYPE_BF16);
    ck_assert_int_eq(t->vec_dot_type, MG_TYPE_BF16);
    ck_assert(t->from_float == TABLE_KERNEL(mg_fp32_to_bf16_row));
    ck_assert_ptr_null(mg_get_type_traits_cpu(MG_TYPE_Q8_K));   // activations only
}
END_TEST

// Lengths of 1, 3 and 16 super-blocks.
START_TEST(test_vec_dot_k_accuracy) {
    const enum mg_type types[] = {MG_TYPE_Q4_K, MG_TYPE_Q6_K};
    const int64_t      lengths[] = {256, 768, 4096};
    for (size_t t = 0; t < 2; t++) {
        for (size_t k = 0; k < 3; k++) {
            double       exact, mag;
            const float  got = prepare_dot(types[t], lengths[k], 40 + k, false, &exact, &mag);
            const double nb  = (double) lengths[k] / 256;
            // per super-block: 2 multiplies and an addition per lane (and per min), 9 final additions
            const double tol = (6 * nb + 10) * 0x1p-24 * mag;
            ck_assert_msg(fabs(got - exact) <= tol, "%s n %lld: %g vs %g (tol %g)", mg_type_name(types[t]),
                          (long long) lengths[k], got, exact, tol);
        }
    }
}
END_TEST

START_TEST(test_vec_dot_bf16_accuracy) {
    const int64_t lengths[] = {1, 33, 4096};
    for (size_t k = 0; k < 3; k++) {
        double       exact, mag;
        const float  got = prepare_dot(MG_TYPE_BF16, lengths[k], 50 + k, false, &exact, &mag);
        const double tol = 0x1p-24 * mag + 0x1p-24 * fabs(exact);
        ck_assert_msg(fabs(got - exact) <= tol, "n %lld: %g vs %g", (long long) lengths[k], got, exact);
    }
}
END_TEST

// docs/formats.md 2.6 to the bit. Q4_K: per super-block, 8 int lanes (element e into
// lane e % 8) times (dW * dA) added to 8 float lanes; mins subtracted per
// super-block as (dminW * dA) * sum_j bsums_j * m_{j/2}; lanes added at the end.
//
// Mostly one super-block of aligned data (where one rounding in one lane is
// not lost in the rounding of a large sum), every fourth a long Gaussian row.
START_TEST(test_vec_dot_q4_K_order) {
    for (int k = 0; k < 100; k++) {
        double       exact, mag;
        const int    n   = k % 4 == 0 ? DOT_N : 256;
        const float  got = prepare_dot(MG_TYPE_Q4_K, n, 60 + (uint64_t) k, k % 4 != 0, &exact, &mag);
        const struct mg_block_q4_K * w = (const void *) dot.wq;
        const struct mg_block_q8_K * a = (const void *) dot.aq;
        float lanes[8] = {0}, acc = 0;
        for (int i = 0; i < n / 256; i++) {
            int isum[8] = {0}, summ = 0;
            for (int e = 0; e < 256; e++) {
                int sc, m;
                q4_K_scale_min(w[i].scales, e / 32, &sc, &m);
                isum[e % 8] += sc * q4_K_elem(&w[i], e).q * a[i].qs[e];
                summ += m * a[i].qs[e];   // = sum over 16-groups of bsums * min
            }
            for (int l = 0; l < 8; l++) lanes[l] += (mg_fp16_to_fp32(w[i].d) * a[i].d) * (float) isum[l];
            acc -= (mg_fp16_to_fp32(w[i].dmin) * a[i].d) * (float) summ;
        }
        for (int l = 0; l < 8; l++) acc += lanes[l];
        ck_assert_float_eq(got, acc);
    }
}
END_TEST

START_TEST(test_vec_dot_q6_K_order) {
    for (int k = 0; k < 100; k++) {
        double       exact, mag;
        const int    n   = k % 4 == 0 ? DOT_N : 256;
        const float  got = prepare_dot(MG_TYPE_Q6_K, n, 170 + (uint64_t) k, k % 4 != 0, &exact, &mag);
        const struct mg_block_q6_K * w = (const void *) dot.wq;
        const struct mg_block_q8_K * a = (const void *) dot.aq;
        // ggml's x86 (AVX2) order: lane l takes elements 4l..4l+3 of every 32
        // with their unsigned codes, minus 32 * (bsums sc) of sub-blocks 2l, 2l+1;
        // each lane fused with dA * dW per super-block; hsum_float_8 at the end.
        float lanes[8] = {0};
        for (int i = 0; i < n / 256; i++) {
            int isum[8] = {0};
            for (int e = 0; e < 256; e++) {
                isum[e % 32 / 4] += w[i].scales[e / 16] * (q6_K_elem(&w[i], e).q + 32) * a[i].qs[e];
            }
            for (int l = 0; l < 8; l++) {
                int bsum[2] = {0, 0};   // Q8_K's bsums, recomputed from the codes
                for (int e = 0; e < 32; e++) bsum[e / 16] += a[i].qs[32 * l + e];
                ck_assert_int_eq(bsum[0], a[i].bsums[2 * l]);
                ck_assert_int_eq(bsum[1], a[i].bsums[2 * l + 1]);
                isum[l] -= 32 * (bsum[0] * w[i].scales[2 * l] + bsum[1] * w[i].scales[2 * l + 1]);
                lanes[l] = fmaf(a[i].d * mg_fp16_to_fp32(w[i].d), (float) isum[l], lanes[l]);
            }
        }
        const float acc = ((lanes[0] + lanes[4]) + (lanes[2] + lanes[6])) + ((lanes[1] + lanes[5]) + (lanes[3] + lanes[7]));
        ck_assert_float_eq(got, acc);
    }
}
END_TEST

START_TEST(test_vec_dot_bf16_order) {
    double      exact, mag;
    const float got = prepare_dot(MG_TYPE_BF16, 1000, 80, false, &exact, &mag);
    double      acc = 0;
    for (int i = 0; i < 1000; i++) acc += (double) (dot.wf[i] * dot.af[i]);
    ck_assert_float_eq(got, (float) acc);
}
END_TEST

// ---------------------------------------------------------------------------
// The fixtures: llama-quantize's bytes
// ---------------------------------------------------------------------------

// Every weight of tiny-q8_0 (15 matrices; the norms stay F32).
START_TEST(test_fixture_q8_0_bytes) {
    const enum mg_type types[] = {MG_TYPE_Q8_0};
    const int          want[]  = {15};
    check_fixture_bytes("models/tiny-q8_0.gguf", types, want, 1);
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("kquants");
    TCase * tc = tcase_create("bf16");
    tcase_add_test(tc, test_bf16_edge_values);
    tcase_add_test(tc, test_bf16_round_trip_exhaustive);
    tcase_add_test(tc, test_bf16_rounding_random);
    suite_add_tcase(s, tc);

    tc = tcase_create("blocks");
    tcase_add_test(tc, test_k_block_sizes);
    tcase_add_test(tc, test_q4_K_hand_built_block);
    tcase_add_test(tc, test_q6_K_hand_built_block);
    tcase_add_test(tc, test_q8_K_hand_built_block);
    tcase_add_test(tc, test_random_blocks_decode_like_facts);
    suite_add_tcase(s, tc);

    tc = tcase_create("quantize");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_q8_K_zero_block);
    tcase_add_test(tc, test_q8_K_matches_naive_rule);
    tcase_add_test(tc, test_q8_K_rms);
    suite_add_tcase(s, tc);

    tc = tcase_create("vec_dot");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_cpu_traits_09);
    tcase_add_test(tc, test_vec_dot_k_accuracy);
    tcase_add_test(tc, test_vec_dot_bf16_accuracy);
    tcase_add_test(tc, test_vec_dot_q4_K_order);
    tcase_add_test(tc, test_vec_dot_q6_K_order);
    tcase_add_test(tc, test_vec_dot_bf16_order);
    suite_add_tcase(s, tc);

    tc = tcase_create("fixtures");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_fixture_q8_0_bytes);
    suite_add_tcase(s, tc);
    return s;
}
