// test_ex3_q4_1.c - chapter 01, exercise 3: Q4_1, ggml's type 3.
//
//     void mg_quantize_row_q4_1_ref(const float * x, void * y, int64_t n);   // quants.c
//     void mg_dequantize_row_q4_1  (const void  * x, float * y, int64_t n);
//
// A block is {F16 d, F16 m, 16 bytes of 4-bit codes}: 20 bytes for 32
// values, value = q * d + m, with m the block's minimum, d = (max - min) / 15,
// q = (x - m) / d + 0.5 truncated and clamped to 15, and the codes packed as
// Q4_0's (element j in the low nibble of byte j, element j + 16 in its high
// nibble). Registered in type_traits[] as id 3 ("q4_1"), so that tensors of
// the type work like Q4_0's. Graded by `make grade`; the functions are
// declared weak, so this test links against a chapter without them and fails
// with a message. The reference bytes are ggml's own quantize_row_q4_1_ref
// on the input below (tools/llama-ref/quant_ref_bytes.c, at the fixtures'
// llama.cpp commit).
#include "harness.h"
#include "mg.h"

#include <math.h>
#include <string.h>

void mg_quantize_row_q4_1_ref(const float * x, void * y, int64_t n) __attribute__((weak));
void mg_dequantize_row_q4_1(const void * x, float * y, int64_t n) __attribute__((weak));

enum { Q4_1 = 3, BLOCK = 32, BLOCK_BYTES = 20, N_BLOCKS = 4 };

// Four blocks: both signs, a constant block (max == min, so d = 0), all
// negative, and one outlier that takes all the range.
static float input(int i) {
    const int b = i / 32, j = i % 32;
    switch (b) {
        case 0:  return 2.0f * sinf(0.3f * (float) j);
        case 1:  return 0.75f;
        case 2:  return -3.0f + 2.0f * (float) j / 31.0f;
        default: return j == 17 ? 40.0f : 0.01f * (float) j;
    }
}

// ggml's quantize_row_q4_1_ref of input(0..127).
static const unsigned char ggml_bytes[N_BLOCKS * BLOCK_BYTES] = {
    0x41, 0x34, 0xf8, 0xbf, 0x07, 0x1a, 0x2c, 0x3d, 0x5e, 0x8f, 0xaf, 0xce, 0xdd, 0xfb, 0xf9, 0xf6, 0xe4, 0xc2, 0xb1, 0x80,
    0x00, 0x00, 0x00, 0x3a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x44, 0x30, 0x00, 0xc2, 0x80, 0x80, 0x91, 0x91, 0xa2, 0xa2, 0xb3, 0xb3, 0xc4, 0xc4, 0xd5, 0xd5, 0xe6, 0xe6, 0xf7, 0xf7,
    0x55, 0x41, 0x00, 0x00, 0x00, 0xf0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
};

static void require_functions(void) {
    ck_assert_msg(mg_quantize_row_q4_1_ref != NULL, "mg_quantize_row_q4_1_ref is not defined yet (quants.c, declared in quants.h)");
    ck_assert_msg(mg_dequantize_row_q4_1 != NULL, "mg_dequantize_row_q4_1 is not defined yet (quants.c, declared in quants.h)");
}

START_TEST(q4_1_functions_exist) {
    require_functions();
}
END_TEST

START_TEST(blocks_are_ggml_bytes) {
    require_functions();
    float         x[N_BLOCKS * BLOCK];
    unsigned char y[N_BLOCKS * BLOCK_BYTES];
    for (int i = 0; i < N_BLOCKS * BLOCK; i++) x[i] = input(i);
    memset(y, 0xAA, sizeof y);
    mg_quantize_row_q4_1_ref(x, y, N_BLOCKS * BLOCK);
    for (int b = 0; b < N_BLOCKS; b++) {
        for (int k = 0; k < BLOCK_BYTES; k++) {
            ck_assert_msg(y[b * BLOCK_BYTES + k] == ggml_bytes[b * BLOCK_BYTES + k],
                          "block %d, byte %d: 0x%02x, ggml writes 0x%02x (bytes 0-1 d, 2-3 m, then the codes)", b, k,
                          y[b * BLOCK_BYTES + k], ggml_bytes[b * BLOCK_BYTES + k]);
        }
    }
}
END_TEST

// ggml's bytes decode to q * d + m, each value within d/2 of the input (a
// little more: d and m are rounded to F16), and the constant block exactly.
START_TEST(dequantized_values_are_q_d_plus_m) {
    require_functions();
    float y[N_BLOCKS * BLOCK];
    mg_dequantize_row_q4_1(ggml_bytes, y, N_BLOCKS * BLOCK);
    for (int b = 0; b < N_BLOCKS; b++) {
        mg_fp16_t dh, mh;
        memcpy(&dh, ggml_bytes + b * BLOCK_BYTES, 2);
        memcpy(&mh, ggml_bytes + b * BLOCK_BYTES + 2, 2);
        const float d = mg_fp16_to_fp32(dh), m = mg_fp16_to_fp32(mh);
        for (int j = 0; j < BLOCK; j++) {
            const unsigned char byte = ggml_bytes[b * BLOCK_BYTES + 4 + j % 16];
            const int           q    = j < 16 ? byte & 0x0F : byte >> 4;
            ck_assert_msg(y[b * BLOCK + j] == (float) q * d + m, "block %d, element %d: %g, not q*d+m = %d*%g+%g", b,
                          j, (double) y[b * BLOCK + j], q, (double) d, (double) m);
            ck_assert_msg(fabsf(y[b * BLOCK + j] - input(b * BLOCK + j)) <= 0.5f * d * 1.01f + 1e-3f * fabsf(m) + 1e-6f,
                          "block %d, element %d: %g for %g, more than d/2 = %g off", b, j, (double) y[b * BLOCK + j],
                          (double) input(b * BLOCK + j), (double) (0.5f * d));
        }
    }
    ck_assert(y[32] == 0.75f && y[63] == 0.75f);
}
END_TEST

// The type in the table: 20 bytes per 32 values, and a Q4_1 tensor reads back
// through mg_get_f32_1d as the dequantizer gives it.
START_TEST(q4_1_is_a_tensor_type) {
    require_functions();
    ck_assert_msg(mg_type_is_supported(Q4_1), "type 3 is not in type_traits[] (tensor.c; MG_TYPE_Q4_1 = 3 in tensor.h)");
    ck_assert_str_eq(mg_type_name((enum mg_type) Q4_1), "q4_1");
    ck_assert_int_eq(mg_blck_size((enum mg_type) Q4_1), 32);
    ck_assert_uint_eq(mg_row_size((enum mg_type) Q4_1, 64), 40);
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 1024 * 1024});
    struct mg_tensor *  t   = mg_new_tensor_2d(ctx, (enum mg_type) Q4_1, 64, 2);
    ck_assert_uint_eq(mg_nbytes(t), sizeof ggml_bytes);
    memcpy(t->data, ggml_bytes, sizeof ggml_bytes);
    float y[N_BLOCKS * BLOCK];
    mg_dequantize_row_q4_1(ggml_bytes, y, N_BLOCKS * BLOCK);
    for (int i1 = 0; i1 < 2; i1++) {
        for (int i0 = 0; i0 < 64; i0++) ck_assert(mg_get_f32_nd(t, i0, i1, 0, 0) == y[i1 * 64 + i0]);
    }
    mg_free(ctx);
}
END_TEST

// On random rows: quantize then dequantize stays within d/2 of every value,
// and no more off than Q4_0 would be on the same rows overall (Q4_1 spends no
// level on a side without values).
START_TEST(round_trip_beats_q4_0) {
    require_functions();
    enum { N = 32 * 64 };
    static float x[N], y[N], z[N];
    static unsigned char q41[N / 32 * 20], q40[N / 32 * 18];
    uint32_t state = 12345;
    for (int i = 0; i < N; i++) {
        state = state * 1664525u + 1013904223u;
        x[i]  = (float) (state >> 8) / (float) (1u << 24) * 3.0f - 0.5f;   // mostly positive
    }
    mg_quantize_row_q4_1_ref(x, q41, N);
    mg_dequantize_row_q4_1(q41, y, N);
    mg_quantize_row_q4_0_ref(x, q40, N);
    mg_dequantize_row_q4_0(q40, z, N);
    double e41 = 0, e40 = 0;
    for (int b = 0; b < N / 32; b++) {
        mg_fp16_t dh;
        memcpy(&dh, q41 + b * 20, 2);
        const float d = mg_fp16_to_fp32(dh);
        for (int j = 0; j < 32; j++) {
            const int i = b * 32 + j;
            ck_assert_msg(fabsf(y[i] - x[i]) <= 0.5f * d * 1.01f + 2e-3f, "element %d: %g for %g (d %g)", i,
                          (double) y[i], (double) x[i], (double) d);
            e41 += (double) (y[i] - x[i]) * (y[i] - x[i]);
            e40 += (double) (z[i] - x[i]) * (z[i] - x[i]);
        }
    }
    ck_assert_msg(e41 < e40, "Q4_1's squared error %g is not below Q4_0's %g", e41, e40);
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s  = suite_create("ex3_q4_1");
    TCase * tc = tcase_create("q4_1");
    tcase_add_test(tc, q4_1_functions_exist);               // 0 points: only a start
    tcase_add_test(tc, blocks_are_ggml_bytes);              // 8 points
    tcase_add_test(tc, dequantized_values_are_q_d_plus_m);  // 4 points
    tcase_add_test(tc, q4_1_is_a_tensor_type);              // 4 points
    tcase_add_test(tc, round_trip_beats_q4_0);              // 4 points
    suite_add_tcase(s, tc);
    return s;
}
