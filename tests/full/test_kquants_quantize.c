// test_kquants_quantize.c - the Q4_K and Q6_K quantizers, which only full/
// has (chapter 09 reads K-quant weights; mg quantize and mg mkmodel write
// them). Moved from tests/09_inference/test_kquants.c with them.
//
// Checked against a decoder written from docs/formats.md 2.4 (kquant_elems.h)
// and against the fixture models, which llama-quantize made from
// tiny-f32.gguf: quantizing tiny-f32's tensors here must give the same bytes.
#include "harness.h"
#include "kquant_elems.h"
#include "gguf.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define RT_N (256 * 64)
static float rt_x[RT_N], rt_y[RT_N];

static void fill_gaussian(float * x, int n, uint64_t seed) {
    uint64_t rng = seed;
    for (int i = 0; i < n; i++) x[i] = mg_test_rand_normal(&rng);
}

static double rms_error(const float * x, const float * y, int n) {
    double se = 0;
    for (int i = 0; i < n; i++) se += ((double) y[i] - x[i]) * ((double) y[i] - x[i]);
    return sqrt(se / n);
}

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
    fill_gaussian(rt_x, RT_N, 31);
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
    ck_assert_double_le(rms_error(rt_x, rt_y, RT_N), 1.5 * 0x1p-4);
}
END_TEST

START_TEST(test_q6_K_round_trip) {
    static struct mg_block_q6_K q[RT_N / 256];
    fill_gaussian(rt_x, RT_N, 32);
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
    ck_assert_double_le(rms_error(rt_x, rt_y, RT_N), 1.5 * 0x1p-6);
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

// Quantizes every tensor of tiny-f32.gguf that `quant_file` stores as one of
// `types` and compares the bytes; each type must have want_count tensors.
static void check_fixture(const char * quant_file, const enum mg_type * types, const int * want_count, int n_types) {
    struct mg_gguf * f32 = mg_gguf_open(mg_test_fixture("models/tiny-f32.gguf"));
    ck_assert_msg(f32 != NULL, "%s", mg_last_error());
    struct mg_gguf * qf = mg_gguf_open(mg_test_fixture(quant_file));
    ck_assert_msg(qf != NULL, "%s", mg_last_error());

    int count[8] = {0};
    for (int64_t i = 0; i < mg_gguf_n_tensors(qf); i++) {
        const struct mg_gguf_tensor_info * t = mg_gguf_tensor(qf, i);
        int                                k = 0;
        while (k < n_types && t->type != (int) types[k]) k++;
        if (k == n_types) continue;
        const struct mg_gguf_tensor_info * src = mg_gguf_find_tensor(f32, t->name);
        ck_assert_msg(src != NULL && src->type == MG_TYPE_F32, "%s: no F32 source", t->name);
        const int64_t n = src->ne[0] * src->ne[1] * src->ne[2] * src->ne[3];
        ck_assert_uint_eq(mg_row_size(types[k], n), t->nbytes);
        uint8_t * mine = malloc(t->nbytes);
        mg_get_type_traits(types[k])->from_float(src->data, mine, n);
        if (memcmp(mine, t->data, t->nbytes) != 0) {
            size_t first = 0;
            while (mine[first] == ((const uint8_t *) t->data)[first]) first++;
            ck_abort_msg("%s (%s): bytes differ from byte %zu of %zu (block %zu)", t->name, mg_type_name(types[k]),
                         first, t->nbytes, first / mg_type_size(types[k]));
        }
        free(mine);
        count[k]++;
    }
    for (int k = 0; k < n_types; k++) {
        ck_assert_msg(count[k] == want_count[k], "%s: %d %s tensors, want %d", quant_file, count[k],
                      mg_type_name(types[k]), want_count[k]);
    }
    mg_gguf_close(qf);
    mg_gguf_close(f32);
}

// tiny-q4_k_m: Q6_K for token_embd, blk.1.attn_v and blk.1.ffn_down; Q4_K for the other 12.
START_TEST(test_fixture_q4_K_q6_K_bytes) {
    const enum mg_type types[] = {MG_TYPE_Q4_K, MG_TYPE_Q6_K};
    const int          want[]  = {12, 3};
    check_fixture("models/tiny-q4_k_m.gguf", types, want, 2);
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("kquants_quantize");
    TCase * tc = tcase_create("quantize");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_q4_K_round_trip);
    tcase_add_test(tc, test_q6_K_round_trip);
    tcase_add_test(tc, test_k_quants_zero_block);
    tcase_add_test(tc, test_fixture_q4_K_q6_K_bytes);
    suite_add_tcase(s, tc);
    return s;
}
