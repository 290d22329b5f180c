// test_quants.c - half floats and the Q4_0 / Q8_0 blocks of chapter 01.
//
// The F16 conversions are checked against IEEE 754 itself: every half is
// decoded by a formula written here in double, and F32 -> F16 rounding is
// compared with a nearest-half search over that decoded table. The blocks are
// checked against bytes and values worked out by hand, and against error
// bounds that follow from how each format rounds.
#include "harness.h"
#include "quants.h"

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

static float float_of(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

static bool half_is_nan(uint16_t h) {
    return (h & 0x7c00) == 0x7c00 && (h & 0x03ff) != 0;
}

// The value of a half from its definition: sign, 5-bit exponent with bias 15,
// 10-bit fraction, subnormals at exponent 0. NaN for NaNs.
static double half_value(uint16_t h) {
    const int exp  = (h >> 10) & 31;
    const int frac = h & 1023;
    double    v;
    if (exp == 31) {
        v = frac ? NAN : INFINITY;
    } else if (exp == 0) {
        v = ldexp(frac, -24);
    } else {
        v = ldexp(1024 + frac, exp - 25);
    }
    return (h & 0x8000) ? -v : v;
}

// F32 -> F16 the slow, obvious way: find the two halves around |f| and take
// the nearer one, the one with an even bit pattern on a tie. Values from
// 65520 up round past 65504 (the largest half) and become inf.
static uint16_t nearest_half(float f) {
    const uint16_t sign = signbit(f) ? 0x8000 : 0;
    const double   a    = fabs((double) f);
    if (a >= 65520.0) return sign | 0x7c00;
    uint16_t lo = 0, hi = 0x7bff;   // the largest half <= a is in [lo, hi]
    while (lo < hi) {
        const uint16_t mid = (uint16_t) ((lo + hi + 1) / 2);
        if (half_value(mid) <= a) lo = mid;
        else hi = (uint16_t) (mid - 1);
    }
    if (lo == 0x7bff) return sign | 0x7bff;
    // Both differences are exact in double (Sterbenz: the halves are within a
    // factor 2 of a, or below is 0 and a < 2^-24).
    const double below = a - half_value(lo), above = half_value((uint16_t) (lo + 1)) - a;
    const uint16_t h = below < above ? lo : above < below ? (uint16_t) (lo + 1) : (lo & 1) ? (uint16_t) (lo + 1) : lo;
    return sign | h;
}

// ---------------------------------------------------------------------------
// F16
// ---------------------------------------------------------------------------

START_TEST(test_f16_edge_values) {
    const struct {
        float    in;
        uint16_t out;
        const char * what;
    } cases[] = {
        {0.0f, 0x0000, "zero"},
        {-0.0f, 0x8000, "negative zero keeps its sign"},
        {1.0f, 0x3c00, "one"},
        {-1.5f, 0xbe00, "-1.5"},
        {0x1p-24f, 0x0001, "smallest subnormal"},
        {1023 * 0x1p-24f, 0x03ff, "largest subnormal"},
        {0x1p-14f, 0x0400, "smallest normal"},
        {0x1p-25f, 0x0000, "half of the smallest subnormal: a tie, to even (zero)"},
        {0x1.000002p-25f, 0x0001, "just above that tie"},
        {-0x1p-26f, 0x8000, "a tiny negative number underflows to -0"},
        {3 * 0x1p-25f, 0x0002, "1.5 subnormal units: tie, to even (2)"},
        {5 * 0x1p-25f, 0x0002, "2.5 subnormal units: tie, to even (2)"},
        {1023.5f * 0x1p-24f, 0x0400, "tie between the largest subnormal and the smallest normal"},
        {1.0f + 0x1p-11f, 0x3c00, "tie between 1 and 1+2^-10: to even (1)"},
        {1.0f + 3 * 0x1p-11f, 0x3c02, "tie between 1+2^-10 and 1+2^-9: to even (up)"},
        {1.0f + 0x1p-11f + 0x1p-23f, 0x3c01, "just above a tie rounds up"},
        {65504.0f, 0x7bff, "largest half"},
        {65519.0f, 0x7bff, "65519 rounds down to 65504"},
        {65520.0f, 0x7c00, "65520 is the tie with 65536: to inf"},
        {1e9f, 0x7c00, "overflow"},
        {-1e9f, 0xfc00, "negative overflow"},
        {INFINITY, 0x7c00, "inf"},
        {-INFINITY, 0xfc00, "-inf"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const uint16_t got = mg_fp32_to_fp16(cases[i].in);
        ck_assert_msg(got == cases[i].out, "%s: %a -> 0x%04x, want 0x%04x", cases[i].what, (double) cases[i].in, got,
                      cases[i].out);
    }

    ck_assert(mg_fp16_to_fp32(0x0001) == 0x1p-24f);
    ck_assert(mg_fp16_to_fp32(0x03ff) == 1023 * 0x1p-24f);
    ck_assert(mg_fp16_to_fp32(0x7bff) == 65504.0f);
    ck_assert(mg_fp16_to_fp32(0x7c00) == INFINITY);
    ck_assert(mg_fp16_to_fp32(0xfc00) == -INFINITY);
    ck_assert(mg_fp16_to_fp32(0x8000) == 0.0f && signbit(mg_fp16_to_fp32(0x8000)));
}
END_TEST

// Including signalling NaNs whose only payload bit is one that F16 drops.
START_TEST(test_f16_nan_stays_nan) {
    const uint32_t nans[] = {0x7fc00000, 0x7f800001, 0xffc00000, 0xff800001};
    for (size_t i = 0; i < sizeof(nans) / sizeof(nans[0]); i++) {
        const uint16_t h = mg_fp32_to_fp16(float_of(nans[i]));
        ck_assert_msg(half_is_nan(h), "NaN 0x%08x became 0x%04x", nans[i], h);
        ck_assert_msg((h >> 15) == (nans[i] >> 31), "NaN 0x%08x lost its sign: 0x%04x", nans[i], h);
    }
    ck_assert(isnan(mg_fp16_to_fp32(0x7e00)));
    ck_assert(isnan(mg_fp16_to_fp32(0x7c01)));
    ck_assert(isnan(mg_fp16_to_fp32(0xfe00)) && signbit(mg_fp16_to_fp32(0xfe00)));
}
END_TEST

// Every one of the 65536 halves decodes to its IEEE value.
START_TEST(test_f16_decode_exhaustive) {
    for (uint32_t h = 0; h <= 0xffff; h++) {
        const float  got  = mg_fp16_to_fp32((mg_fp16_t) h);
        const double want = half_value((uint16_t) h);
        if (isnan(want)) {
            ck_assert_msg(isnan(got) && !signbit(got) == !signbit(want), "0x%04x should decode to NaN", h);
        } else {
            ck_assert_msg((double) got == want && !signbit(got) == !signbit(want), "0x%04x -> %a, want %a", h,
                          (double) got, want);
        }
    }
}
END_TEST

// ... and survives the trip back (NaNs may lose their payload, not their NaN-ness).
START_TEST(test_f16_round_trip_exhaustive) {
    for (uint32_t h = 0; h <= 0xffff; h++) {
        const uint16_t back = mg_fp32_to_fp16(mg_fp16_to_fp32((mg_fp16_t) h));
        if (half_is_nan((uint16_t) h)) {
            ck_assert_msg(half_is_nan(back) && (back >> 15) == (h >> 15), "NaN 0x%04x came back as 0x%04x", h, back);
        } else {
            ck_assert_msg(back == h, "0x%04x came back as 0x%04x", h, back);
        }
    }
}
END_TEST

// Rounding of arbitrary floats, from far below the subnormals to past the
// overflow threshold, against the nearest-half search.
START_TEST(test_f16_rounding_matches_nearest_half) {
    uint64_t rng = 2024;
    for (int i = 0; i < 1000000; i++) {
        // A random sign and mantissa with an exponent from 2^-28 to 2^17.
        const uint32_t r    = (uint32_t) mg_test_rand_u64(&rng);
        const uint32_t exp  = 99 + (uint32_t) (mg_test_rand_u64(&rng) % 46);
        const float    f    = float_of((r & 0x807fffff) | (exp << 23));
        const uint16_t got  = mg_fp32_to_fp16(f);
        const uint16_t want = nearest_half(f);
        ck_assert_msg(got == want, "%a -> 0x%04x, want 0x%04x", (double) f, got, want);
    }
}
END_TEST

// ---------------------------------------------------------------------------
// Q4_0
// ---------------------------------------------------------------------------

START_TEST(test_block_sizes) {
    ck_assert_uint_eq(offsetof(struct mg_block_q4_0, qs), 2);
    ck_assert_uint_eq(offsetof(struct mg_block_q8_0, qs), 2);
    ck_assert_uint_eq(mg_type_size(MG_TYPE_Q4_0), 18);
    ck_assert_int_eq(mg_blck_size(MG_TYPE_Q4_0), 32);
    ck_assert_uint_eq(mg_row_size(MG_TYPE_Q4_0, 4096), 4096 / 32 * 18);
    ck_assert_uint_eq(mg_type_size(MG_TYPE_Q8_0), 34);
    ck_assert_int_eq(mg_blck_size(MG_TYPE_Q8_0), 32);
    ck_assert_uint_eq(mg_row_size(MG_TYPE_Q8_0, 4096), 4096 / 32 * 34);
    ck_assert_uint_eq(mg_type_size(MG_TYPE_F16), 2);
}
END_TEST

// x[j] = 0.25 * (j % 16 - 8): the largest |x| is -2 (at j = 0, first of two),
// so d = -2 / -8 = 0.25 and every value sits exactly on a code.
START_TEST(test_q4_0_hand_computed_exact) {
    float x[32], y[32];
    for (int j = 0; j < 32; j++) x[j] = 0.25f * (float) (j % 16 - 8);
    struct mg_block_q4_0 b;
    mg_quantize_row_q4_0_ref(x, &b, 32);
    ck_assert_uint_eq(b.d, 0x3400);   // 0.25
    for (int j = 0; j < 16; j++) ck_assert_uint_eq(b.qs[j], (unsigned) (j | j << 4));
    mg_dequantize_row_q4_0(&b, y, 32);
    for (int j = 0; j < 32; j++) ck_assert_float_eq(y[j], x[j]);
}
END_TEST

// Rounding worked out by hand. The largest |x| is x[0] = -1, so d = 0.125 and
// code = trunc(x / 0.125 + 8.5), clamped to 15.
START_TEST(test_q4_0_hand_computed_rounding) {
    float x[32] = {0};
    x[0]  = -1.0f;      // -8 + 8.5 = 0.5    -> 0  -> -1
    x[1]  = 1.0f;       //  8 + 8.5 = 16.5   -> 16 -> clamped to 15 -> 0.875
    x[2]  = 0.3f;       //  2.4 + 8.5 = 10.9 -> 10 -> 0.25
    x[3]  = -0.3f;      // -2.4 + 8.5 = 6.1  -> 6  -> -0.25
    x[4]  = 0.0625f;    //  0.5 + 8.5 = 9    -> 9  -> 0.125 (half a step rounds up)
    x[5]  = -0.0625f;   // -0.5 + 8.5 = 8    -> 8  -> 0     (... towards +inf)
    x[20] = 0.9f;       //  7.2 + 8.5 = 15.7 -> 15 -> 0.875
    struct mg_block_q4_0 b;
    mg_quantize_row_q4_0_ref(x, &b, 32);
    ck_assert_uint_eq(b.d, 0x3000);   // 0.125
    const uint8_t codes[32] = {0, 15, 10, 6, 9, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8,
                               8, 8, 8, 8, 15, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8};
    for (int j = 0; j < 16; j++) ck_assert_uint_eq(b.qs[j], (unsigned) (codes[j] | codes[j + 16] << 4));
    float y[32];
    mg_dequantize_row_q4_0(&b, y, 32);
    const float want[7][2] = {{0, -1.0f}, {1, 0.875f}, {2, 0.25f}, {3, -0.25f}, {4, 0.125f}, {5, 0.0f}, {20, 0.875f}};
    for (int i = 0; i < 7; i++) ck_assert_float_eq(y[(int) want[i][0]], want[i][1]);
}
END_TEST

// The scale's sign comes from the FIRST element of largest magnitude, which
// then decodes exactly; the other side gets only +7 steps.
START_TEST(test_q4_0_first_strict_maximum) {
    float x[32] = {0}, y[32];
    struct mg_block_q4_0 b;

    x[3] = -2.0f, x[10] = 2.0f;   // -2 comes first: d = -2 / -8 = +0.25
    mg_quantize_row_q4_0_ref(x, &b, 32);
    ck_assert_uint_eq(b.d, 0x3400);
    mg_dequantize_row_q4_0(&b, y, 32);
    ck_assert_float_eq(y[3], -2.0f);
    ck_assert_float_eq(y[10], 1.75f);

    x[3] = 2.0f, x[10] = -2.0f;   // now +2 comes first: d = -0.25
    mg_quantize_row_q4_0_ref(x, &b, 32);
    ck_assert_uint_eq(b.d, 0xb400);
    mg_dequantize_row_q4_0(&b, y, 32);
    ck_assert_float_eq(y[3], 2.0f);
    ck_assert_float_eq(y[10], -1.75f);
}
END_TEST

START_TEST(test_q4_0_zero_block) {
    float x[32] = {0}, y[32];
    struct mg_block_q4_0 b;
    memset(&b, 0xff, sizeof(b));
    mg_quantize_row_q4_0_ref(x, &b, 32);
    ck_assert_uint_eq(b.d, 0x8000);   // d = 0 / -8 = -0, as ggml writes it
    for (int j = 0; j < 16; j++) ck_assert_uint_eq(b.qs[j], 0x88);   // code 8 = zero
    mg_dequantize_row_q4_0(&b, y, 32);
    for (int j = 0; j < 32; j++) ck_assert_float_eq(y[j], 0.0f);
}
END_TEST

// Each element lands on the nearest of the 16 levels (q - 8) * d, computed from
// the scale this test expects, d = max / -8. The quantizer works with the
// unrounded d and decodes with the F16 one, which moves a level by at most
// 8 * |d_f16 - d|; the level +8 does not exist, so x near -max may be a whole
// step away.
START_TEST(test_q4_0_round_trip_bound) {
    uint64_t rng  = 7;
    const int n   = 32 * 512;
    static float x[32 * 512], y[32 * 512];
    static struct mg_block_q4_0 q[512];
    for (int i = 0; i < n; i++) x[i] = mg_test_rand_uniform(&rng, -3.0f, 3.0f) * (float) (1 + i / 2048);
    mg_quantize_row_q4_0_ref(x, q, n);
    mg_dequantize_row_q4_0(q, y, n);
    for (int b = 0; b < n / 32; b++) {
        const float * xb = x + 32 * b;
        double        max = 0;
        for (int j = 0; j < 32; j++) {
            if (fabs(xb[j]) > fabs(max)) max = xb[j];
        }
        const double d    = max / -8;
        const double dh   = mg_fp16_to_fp32(q[b].d);
        const double move = 8 * fabs(dh - d) + 1e-6 * fabs(max);
        ck_assert_msg(fabs(dh - d) <= fabs(d) * 0x1p-11, "block %d: d = %g, stored %g", b, d, dh);
        for (int j = 0; j < 32; j++) {
            // distance from x to the nearest level (q - 8) * d, q = 0..15
            double best = INFINITY;
            for (int c = 0; c < 16; c++) best = fmin(best, fabs(xb[j] - (c - 8) * d));
            const double err = fabs((double) y[32 * b + j] - xb[j]);
            ck_assert_msg(err <= best + move, "block %d elem %d: x %g y %g, nearest level %g away", b, j, xb[j],
                          y[32 * b + j], best);
            ck_assert_msg(err <= fabs(d) + move, "block %d elem %d: error %g above one step %g", b, j, err, d);
        }
    }
}
END_TEST

// ---------------------------------------------------------------------------
// Q8_0
// ---------------------------------------------------------------------------

// amax = 127 makes d = 1 exactly, so codes are the values themselves.
START_TEST(test_q8_0_hand_computed_exact) {
    float x[32], y[32];
    x[0] = 127.0f;
    for (int j = 1; j < 32; j++) x[j] = (float) (j - 16);
    struct mg_block_q8_0 b;
    mg_quantize_row_q8_0_ref(x, &b, 32);
    ck_assert_uint_eq(b.d, 0x3c00);
    ck_assert_int_eq(b.qs[0], 127);
    for (int j = 1; j < 32; j++) ck_assert_int_eq(b.qs[j], j - 16);
    mg_dequantize_row_q8_0(&b, y, 32);
    for (int j = 0; j < 32; j++) ck_assert_float_eq(y[j], x[j]);
}
END_TEST

// The reference rounds with roundf: halves go away from zero.
START_TEST(test_q8_0_ref_rounds_half_away_from_zero) {
    float x[32] = {127.0f, 2.5f, -2.5f, 0.5f, -0.5f, 126.5f, 1.4999999f, -3.5f};
    struct mg_block_q8_0 b;
    mg_quantize_row_q8_0_ref(x, &b, 32);
    ck_assert_uint_eq(b.d, 0x3c00);
    const int want[8] = {127, 3, -3, 1, -1, 127, 1, -4};
    for (int j = 0; j < 8; j++) ck_assert_msg(b.qs[j] == want[j], "x = %g -> %d, want %d", x[j], b.qs[j], want[j]);
}
END_TEST

START_TEST(test_q8_0_zero_block) {
    float x[32] = {0}, y[32];
    struct mg_block_q8_0 b;
    memset(&b, 0x55, sizeof(b));
    mg_quantize_row_q8_0_ref(x, &b, 32);
    ck_assert_uint_eq(b.d, 0);
    for (int j = 0; j < 32; j++) ck_assert_int_eq(b.qs[j], 0);
    mg_dequantize_row_q8_0(&b, y, 32);
    for (int j = 0; j < 32; j++) ck_assert_float_eq(y[j], 0.0f);
}
END_TEST

// |x - y| <= d/2 with d = amax/127, plus 127 * |d_f16 - d| for decoding with
// the F16 scale; the element of largest magnitude gets code +-127.
START_TEST(test_q8_0_round_trip_bound) {
    uint64_t rng = 11;
    const int n  = 32 * 512;
    static float x[32 * 512], y[32 * 512];
    static struct mg_block_q8_0 q[512];
    for (int i = 0; i < n; i++) x[i] = mg_test_rand_normal(&rng) * (float) (1 + i / 4096);
    mg_quantize_row_q8_0_ref(x, q, n);
    mg_dequantize_row_q8_0(q, y, n);
    for (int b = 0; b < n / 32; b++) {
        double amax = 0;
        int    jmax = 0;
        for (int j = 0; j < 32; j++) {
            if (fabs(x[32 * b + j]) > amax) amax = fabs(x[32 * b + j]), jmax = j;
        }
        const double d  = amax / 127;
        const double dh = mg_fp16_to_fp32(q[b].d);
        ck_assert_int_eq(abs(q[b].qs[jmax]), 127);
        for (int j = 0; j < 32; j++) {
            const double err = fabs((double) y[32 * b + j] - x[32 * b + j]);
            ck_assert_msg(err <= 0.5 * d + 127 * fabs(dh - d) + 1e-6 * amax, "block %d elem %d: error %g, d %g", b, j,
                          err, d);
        }
    }
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("quants");
    TCase * f16 = MG_TCASE(s, "f16", test_f16_edge_values, test_f16_nan_stays_nan, test_f16_decode_exhaustive,
                              test_f16_round_trip_exhaustive, test_f16_rounding_matches_nearest_half);
    tcase_set_timeout(f16, 60);

    TCase * blocks = MG_TCASE(s, "blocks", test_block_sizes, test_q4_0_hand_computed_exact,
                                 test_q4_0_hand_computed_rounding, test_q4_0_first_strict_maximum,
                                 test_q4_0_zero_block, test_q4_0_round_trip_bound, test_q8_0_hand_computed_exact,
                                 test_q8_0_ref_rounds_half_away_from_zero, test_q8_0_zero_block,
                                 test_q8_0_round_trip_bound);
    tcase_set_timeout(blocks, 60);
    return s;
}
