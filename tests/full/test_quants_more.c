// test_quants_more.c - the formats only full/ has: Q4_1, Q5_0, Q5_1, Q8_1,
// Q2_K, Q3_K, Q5_K, IQ4_NL, and their dot products.
//
// For every type: the block size and field offsets; a block built by hand and
// decoded to values worked out by hand; random blocks decoded by a decoder
// written here from docs/FACTS.md 2.3/2.4, to the bit; a round trip in which
// every element must land on (or, for the 32-element types that quantize with
// the unrounded scale, within the F16 rounding of) the nearest level of its
// block, and whose RMS error on N(0,1) data stays below 1.5 * 2^-b for b-bit
// codes; and vec_dot against both the exact dot of the decoded rows and the
// FACTS 2.6 formula in ggml's float order.
//
// Why 1.5 * 2^-b: an ideal b-bit uniform quantizer over the range of a block
// of Gaussian samples (about 4.2 standard deviations for 32 samples) has RMS
// error range / (2^b sqrt 12), about 1.2 * 2^-b. The other bpw - b bits per
// weight pay for scales and mins; they make the error no smaller, and a good
// format should not be more than 25% worse than the ideal quantizer.
#include "harness.h"
#include "vec.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------
// Decoders written from FACTS 2.3 and 2.4. Each gives element e of a row as
// step * q - offset, with q the code as the format centres it.
// ---------------------------------------------------------------------------

struct elem {
    int   q;
    float step;
    float offset;
};

static float elem_value(struct elem el) {
    return el.step * (float) el.q - el.offset;
}

static const int8_t K_IQ4NL[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// The low 4 bits of element i of a 32-element block.
static int nibble(const uint8_t * qs, int i) {
    return i < 16 ? qs[i] & 15 : qs[i - 16] >> 4;
}

// Bit i of qh read as a little-endian u32.
static int bit_of_qh(const uint8_t * qh, int i) {
    const uint32_t u = (uint32_t) qh[0] | (uint32_t) qh[1] << 8 | (uint32_t) qh[2] << 16 | (uint32_t) qh[3] << 24;
    return (u >> i) & 1;
}

static struct elem q4_1_elem(const void * row, int e) {
    const struct mg_block_q4_1 * b = (const struct mg_block_q4_1 *) row + e / 32;
    return (struct elem) {nibble(b->qs, e % 32), mg_fp16_to_fp32(b->d), -mg_fp16_to_fp32(b->m)};
}

static struct elem q5_0_elem(const void * row, int e) {
    const struct mg_block_q5_0 * b = (const struct mg_block_q5_0 *) row + e / 32;
    return (struct elem) {(nibble(b->qs, e % 32) | bit_of_qh(b->qh, e % 32) << 4) - 16, mg_fp16_to_fp32(b->d), 0};
}

static struct elem q5_1_elem(const void * row, int e) {
    const struct mg_block_q5_1 * b = (const struct mg_block_q5_1 *) row + e / 32;
    return (struct elem) {nibble(b->qs, e % 32) | bit_of_qh(b->qh, e % 32) << 4, mg_fp16_to_fp32(b->d),
                          -mg_fp16_to_fp32(b->m)};
}

static struct elem q8_1_elem(const void * row, int e) {
    const struct mg_block_q8_1 * b = (const struct mg_block_q8_1 *) row + e / 32;
    return (struct elem) {b->qs[e % 32], mg_fp16_to_fp32(b->d), 0};
}

// IQ4_NL's "code" is the table value K[q].
static struct elem iq4_nl_elem(const void * row, int e) {
    const struct mg_block_iq4_nl * b = (const struct mg_block_iq4_nl *) row + e / 32;
    return (struct elem) {K_IQ4NL[nibble(b->qs, e % 32)], mg_fp16_to_fp32(b->d), 0};
}

// K-quants: e = 128h + 32k + l within a super-block.
static int two_bits(const uint8_t * qs, int e) {
    const int h = e / 128, k = (e % 128) / 32, l = e % 32;
    return (qs[32 * h + l] >> (2 * k)) & 3;
}

static struct elem q2_K_elem(const void * row, int e) {
    const struct mg_block_q2_K * b  = (const struct mg_block_q2_K *) row + e / 256;
    const int                    j  = (e % 256) / 16;
    return (struct elem) {two_bits(b->qs, e % 256), mg_fp16_to_fp32(b->d) * (float) (b->scales[j] & 15),
                          mg_fp16_to_fp32(b->dmin) * (float) (b->scales[j] >> 4)};
}

static int q3_K_scale_of(const uint8_t * s, int j) {
    const int low4  = j < 8 ? s[j] & 15 : s[j - 8] >> 4;
    const int high2 = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (low4 | high2 << 4) - 32;
}

static struct elem q3_K_elem(const void * row, int e) {
    const struct mg_block_q3_K * b    = (const struct mg_block_q3_K *) row + e / 256;
    const int                    r    = e % 256;
    const int                    high = (b->hmask[r % 32] >> (r / 32)) & 1;
    return (struct elem) {two_bits(b->qs, r) - (high ? 0 : 4),
                          mg_fp16_to_fp32(b->d) * (float) q3_K_scale_of(b->scales, r / 16), 0};
}

static void k4_scale_min(const uint8_t * s, int j, int * sc, int * m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m  = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
        *m  = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

static struct elem q5_K_elem(const void * row, int e) {
    const struct mg_block_q5_K * b = (const struct mg_block_q5_K *) row + e / 256;
    const int                    r = e % 256;
    const uint8_t                byte = b->qs[32 * (r / 64) + r % 32];
    const int                    q4   = (r % 64) < 32 ? byte & 15 : byte >> 4;
    const int                    bit  = (b->qh[r % 32] >> (r / 32)) & 1;
    int                          sc, m;
    k4_scale_min(b->scales, r / 32, &sc, &m);
    return (struct elem) {q4 + 16 * bit, mg_fp16_to_fp32(b->d) * (float) sc, mg_fp16_to_fp32(b->dmin) * (float) m};
}

// ---------------------------------------------------------------------------
// The types under test
// ---------------------------------------------------------------------------

struct qtype {
    enum mg_type type;
    const char * name;
    int64_t      block;                  // elements per block
    size_t       bytes;                  // per block
    int          code_bits;              // b
    int          qmin, qmax;             // the codes elem() returns (IQ4_NL: table values)
    struct elem (*elem)(const void * row, int e);
    bool         scale_from_fit;         // 32-element types: codes chosen with the unrounded scale
};

static const struct qtype QTYPES[] = {
    {MG_TYPE_Q4_1, "q4_1", 32, 20, 4, 0, 15, q4_1_elem, true},
    {MG_TYPE_Q5_0, "q5_0", 32, 22, 5, -16, 15, q5_0_elem, true},
    {MG_TYPE_Q5_1, "q5_1", 32, 24, 5, 0, 31, q5_1_elem, true},
    {MG_TYPE_Q8_1, "q8_1", 32, 36, 8, -127, 127, q8_1_elem, true},
    {MG_TYPE_Q2_K, "q2_K", 256, 84, 2, 0, 3, q2_K_elem, false},
    {MG_TYPE_Q3_K, "q3_K", 256, 110, 3, -4, 3, q3_K_elem, false},
    {MG_TYPE_Q5_K, "q5_K", 256, 176, 5, 0, 31, q5_K_elem, false},
    {MG_TYPE_IQ4_NL, "iq4_nl", 32, 18, 4, 0, 0, iq4_nl_elem, true},
};
#define N_QTYPES ((int) (sizeof(QTYPES) / sizeof(QTYPES[0])))

// The distance from x to the nearest level of el's block.
static double grid_distance(const struct qtype * t, double x, struct elem el) {
    double best = INFINITY;
    if (t->type == MG_TYPE_IQ4_NL) {
        for (int i = 0; i < 16; i++) best = fmin(best, fabs(x - (double) el.step * K_IQ4NL[i]));
        return best;
    }
    for (int q = t->qmin; q <= t->qmax; q++) best = fmin(best, fabs(x - ((double) el.step * q - el.offset)));
    return best;
}

// ---------------------------------------------------------------------------
// Sizes and layouts
// ---------------------------------------------------------------------------

START_TEST(test_sizes) {
    for (int i = 0; i < N_QTYPES; i++) {
        const struct qtype * t = &QTYPES[i];
        ck_assert_str_eq(mg_type_name(t->type), t->name);
        ck_assert_int_eq(mg_blck_size(t->type), t->block);
        ck_assert_uint_eq(mg_type_size(t->type), t->bytes);
        ck_assert_uint_eq(mg_row_size(t->type, 1024), 1024 / t->block * t->bytes);
    }
    ck_assert_uint_eq(offsetof(struct mg_block_q4_1, m), 2);
    ck_assert_uint_eq(offsetof(struct mg_block_q4_1, qs), 4);
    ck_assert_uint_eq(offsetof(struct mg_block_q5_0, qh), 2);
    ck_assert_uint_eq(offsetof(struct mg_block_q5_0, qs), 6);
    ck_assert_uint_eq(offsetof(struct mg_block_q5_1, qh), 4);
    ck_assert_uint_eq(offsetof(struct mg_block_q5_1, qs), 8);
    ck_assert_uint_eq(offsetof(struct mg_block_q8_1, s), 2);
    ck_assert_uint_eq(offsetof(struct mg_block_q8_1, qs), 4);
    ck_assert_uint_eq(offsetof(struct mg_block_q2_K, qs), 16);
    ck_assert_uint_eq(offsetof(struct mg_block_q2_K, d), 80);
    ck_assert_uint_eq(offsetof(struct mg_block_q2_K, dmin), 82);
    ck_assert_uint_eq(offsetof(struct mg_block_q3_K, qs), 32);
    ck_assert_uint_eq(offsetof(struct mg_block_q3_K, scales), 96);
    ck_assert_uint_eq(offsetof(struct mg_block_q3_K, d), 108);
    ck_assert_uint_eq(offsetof(struct mg_block_q5_K, scales), 4);
    ck_assert_uint_eq(offsetof(struct mg_block_q5_K, qh), 16);
    ck_assert_uint_eq(offsetof(struct mg_block_q5_K, qs), 48);
    ck_assert_uint_eq(offsetof(struct mg_block_iq4_nl, qs), 2);
    for (int i = 0; i < 16; i++) ck_assert_int_eq(mg_kvalues_iq4nl[i], K_IQ4NL[i]);
}
END_TEST

// ---------------------------------------------------------------------------
// Blocks built by hand
// ---------------------------------------------------------------------------

// qs[j] = j | (15 - j) << 4 (element j has code j, element 16 + j code 15 - j).
static void fill_nibbles_up_down(uint8_t * qs) {
    for (int j = 0; j < 16; j++) qs[j] = (uint8_t) (j | (15 - j) << 4);
}

START_TEST(test_hand_built_32_blocks) {
    float y[32];

    struct mg_block_q4_1 b41 = {.d = 0x3800, .m = 0xc000};   // d = 0.5, m = -2
    fill_nibbles_up_down(b41.qs);
    mg_dequantize_row_q4_1(&b41, y, 32);
    ck_assert_float_eq(y[0], -2.0f);     // 0 * 0.5 - 2
    ck_assert_float_eq(y[3], -0.5f);     // 3 * 0.5 - 2
    ck_assert_float_eq(y[16], 5.5f);     // 15 * 0.5 - 2
    ck_assert_float_eq(y[31], -2.0f);    // 0 * 0.5 - 2

    // 5-bit codes: element j has nibble j (j < 16) or j - 16; the 5th bit is
    // set only for elements 0 and 31 (qh = 0x80000001, little-endian).
    struct mg_block_q5_0 b50 = {.d = 0x3400, .qh = {0x01, 0x00, 0x00, 0x80}};   // d = 0.25
    for (int j = 0; j < 16; j++) b50.qs[j] = (uint8_t) (j | j << 4);
    mg_dequantize_row_q5_0(&b50, y, 32);
    ck_assert_float_eq(y[0], 0.0f);      // (0 + 16 - 16) * 0.25
    ck_assert_float_eq(y[1], -3.75f);    // (1 - 16) * 0.25
    ck_assert_float_eq(y[16], -4.0f);    // (0 - 16) * 0.25
    ck_assert_float_eq(y[31], 3.75f);    // (15 + 16 - 16) * 0.25

    struct mg_block_q5_1 b51 = {.d = 0x3c00, .m = 0x3800, .qh = {0x01, 0x00, 0x00, 0x80}};   // d = 1, m = 0.5
    for (int j = 0; j < 16; j++) b51.qs[j] = (uint8_t) (j | j << 4);
    mg_dequantize_row_q5_1(&b51, y, 32);
    ck_assert_float_eq(y[0], 16.5f);
    ck_assert_float_eq(y[1], 1.5f);
    ck_assert_float_eq(y[16], 0.5f);
    ck_assert_float_eq(y[31], 31.5f);

    struct mg_block_q8_1 b81 = {.d = 0x3800, .s = 0};
    for (int j = 0; j < 32; j++) b81.qs[j] = (int8_t) (j - 16);
    mg_dequantize_row_q8_1(&b81, y, 32);
    ck_assert_float_eq(y[0], -8.0f);
    ck_assert_float_eq(y[31], 7.5f);

    struct mg_block_iq4_nl bnl = {.d = 0x3800};   // d = 0.5
    fill_nibbles_up_down(bnl.qs);
    mg_dequantize_row_iq4_nl(&bnl, y, 32);
    ck_assert_float_eq(y[0], -63.5f);    // 0.5 * K[0]
    ck_assert_float_eq(y[8], 0.5f);      // 0.5 * K[8]
    ck_assert_float_eq(y[16], 56.5f);    // 0.5 * K[15]
    ck_assert_float_eq(y[31], -63.5f);   // 0.5 * K[0]
}
END_TEST

static void set_two_bits(uint8_t * qs, int e, int q) {
    const int h = e / 128, k = (e % 128) / 32, l = e % 32;
    qs[32 * h + l] = (uint8_t) ((qs[32 * h + l] & ~(3 << (2 * k))) | q << (2 * k));
}

START_TEST(test_hand_built_q2_K) {
    struct mg_block_q2_K b;
    memset(&b, 0, sizeof(b));
    b.d    = 0x3c00;   // 1
    b.dmin = 0x3800;   // 0.5
    for (int j = 0; j < 16; j++) b.scales[j] = (uint8_t) (j | (15 - j) << 4);   // sc_j = j, m_j = 15 - j
    for (int e = 0; e < 256; e++) set_two_bits(b.qs, e, e % 4);
    float y[256];
    mg_dequantize_row_q2_K(&b, y, 256);
    ck_assert_float_eq(y[0], -7.5f);     // 0 * 0 - 0.5 * 15
    ck_assert_float_eq(y[37], -4.5f);    // 2 * 1 - 0.5 * 13
    ck_assert_float_eq(y[130], 14.0f);   // 8 * 2 - 0.5 * 7 ... e=130: j = 8, q = 2: 16 - 3.5 = 12.5
}
END_TEST
