// test_kquants_quantize.c - the Q4_K and Q6_K quantizers, which only full/
// has (chapter 09 reads K-quant weights; mg quantize and mg mkmodel write
// them). Moved from tests/09_inference/test_kquants.c with them.
//
// Checked against a decoder written from docs/formats.md 2.4 (kquant_elems.h)
// and against the fixture models, which llama-quantize made from
// tiny-f32.gguf: quantizing tiny-f32's tensors here must give the same bytes.
#include "harness.h"
#include "fixture_quants.h"
#include "kquant_elems.h"
#include "gguf.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define RT_N (256 * 64)
static float rt_x[RT_N], rt_y[RT_N];

// The distance from x to the nearest level step * q - offset, q in [qmin, qmax].
static double grid_distance(double x, double step, double offset, int qmin, int qmax) {
    double best = INFINITY;
    for (int q = qmin; q <= qmax; q++) best = fmin(best, fabs(x - (step * q - offset)));
    return best;
}

// The K-quant quantizers choose every code last, against the scales as they
// are decoded: each element must land on the nearest level of its sub-block's
// grid (up to the rounding of one float division). Sub-blocks whose scale
// quantized to 0 keep their fit codes; they decode to -offset and are rare.
//
// On N(0,1) data the RMS error must stay below 1.5 * 2^-b, b = bits per code
// (4 for Q4_K, 6 for Q6_K; the rest of the bits per weight pay for scales): an
// ideal b-bit uniform quantizer over a Gaussian block's range (about 4.2
// standard deviations for 32 samples) has RMS range / (2^b sqrt 12) = 1.2 * 2^-b.
START_TEST(test_q4_K_round_trip) {
    static struct mg_block_q4_K q[RT_N / 256];
    uint64_t rng = 31;
    mg_test_fill_normal(rt_x, RT_N, &rng);
    mg_quantize_row_q4_K_ref(rt_x, q, RT_N);
    mg_dequantize_row_q4_K(q, rt_y, RT_N);
    int zero_steps = 0;
    for (int e = 0; e < RT_N; e++) {
        const struct elem el = q4_K_elem(&q[e / 256], e % 256);
        if (el.step == 0) {
            zero_steps++;
            continue;
        }
        const double dist = grid_distance(rt_x[e], el.step, el.offset, 0, 15);
        const double err  = fabs((double) rt_y[e] - rt_x[e]);
        ck_assert_msg(err <= dist + 1e-5 * (el.step + el.offset), "elem %d: x %g y %g, nearest level %g away", e,
                      rt_x[e], rt_y[e], dist);
    }
    ck_assert_int_le(zero_steps, RT_N / 100);
    ck_assert_double_le(mg_test_rms_error(rt_x, rt_y, RT_N), 1.5 * 0x1p-4);
}
END_TEST

START_TEST(test_q6_K_round_trip) {
    static struct mg_block_q6_K q[RT_N / 256];
    uint64_t rng = 32;
    mg_test_fill_normal(rt_x, RT_N, &rng);
    mg_quantize_row_q6_K_ref(rt_x, q, RT_N);
    mg_dequantize_row_q6_K(q, rt_y, RT_N);
    int zero_steps = 0;
    for (int e = 0; e < RT_N; e++) {
        const struct elem el = q6_K_elem(&q[e / 256], e % 256);
        if (el.step == 0) {
            zero_steps++;
            continue;
        }
        const double dist = grid_distance(rt_x[e], el.step, 0, -32, 31);
        const double err  = fabs((double) rt_y[e] - rt_x[e]);
        ck_assert_msg(err <= dist + 1e-5 * fabs(el.step), "elem %d: x %g y %g, nearest level %g away", e, rt_x[e],
                      rt_y[e], dist);
    }
    ck_assert_int_le(zero_steps, RT_N / 100);
    ck_assert_double_le(mg_test_rms_error(rt_x, rt_y, RT_N), 1.5 * 0x1p-6);
}
END_TEST

START_TEST(test_k_quants_zero_block) {
    float x[256] = {0}, y[256];
    struct mg_block_q4_K b4;
    struct mg_block_q6_K b6;
    struct mg_block_q8_K b8;
    memset(&b4, 0x5a, sizeof(b4));
    memset(&b6, 0x5a, sizeof(b6));
    memset(&b8, 0x5a, sizeof(b8));
    mg_quantize_row_q4_K_ref(x, &b4, 256);
    mg_quantize_row_q6_K_ref(x, &b6, 256);
    mg_quantize_row_q8_K_ref(x, &b8, 256);
    ck_assert_uint_eq(b4.d, 0);
    ck_assert_uint_eq(b4.dmin, 0);
    mg_dequantize_row_q4_K(&b4, y, 256);
    for (int e = 0; e < 256; e++) ck_assert_float_eq(y[e], 0.0f);
    const uint8_t zero6[sizeof(b6)] = {0};   // ggml writes an all-zero Q6_K block
    ck_assert_mem_eq(&b6, zero6, sizeof(b6));
    ck_assert_float_eq(b8.d, 0.0f);
    for (int e = 0; e < 256; e++) ck_assert_int_eq(b8.qs[e], 0);
    for (int j = 0; j < 16; j++) ck_assert_int_eq(b8.bsums[j], 0);
}
END_TEST

// tiny-q4_k_m: Q6_K for token_embd, blk.1.attn_v and blk.1.ffn_down; Q4_K for the other 12.
START_TEST(test_fixture_q4_K_q6_K_bytes) {
    const enum mg_type types[] = {MG_TYPE_Q4_K, MG_TYPE_Q6_K};
    const int          want[]  = {12, 3};
    check_fixture_bytes("models/tiny-q4_k_m.gguf", types, want, 2);
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("kquants_quantize");
    TCase * tc = MG_TCASE(s, "quantize", test_q4_K_round_trip, test_q6_K_round_trip, test_k_quants_zero_block,
                             test_fixture_q4_K_q6_K_bytes);
    tcase_set_timeout(tc, 120);
    return s;
}
