// test_quants_more.c - the formats only full/ has: Q4_1, Q5_0, Q5_1, Q8_1,
// Q2_K, Q3_K, Q5_K, IQ4_NL, and their dot products.
//
// For every type: the block size and field offsets; a block built by hand and
// decoded to values worked out by hand; random blocks decoded by a decoder
// written here from docs/formats.md 2.3/2.4, to the bit; a round trip in which
// every element must land on (or, for the 32-element types that quantize with
// the unrounded scale, within the F16 rounding of) the nearest level of its
// block, and whose RMS error on N(0,1) data stays below 1.5 * 2^-b for b-bit
// codes; the quantizers' bytes against hashes of ggml's bytes for the same
// input (no fixture model holds these types); and vec_dot against both the
// exact dot of the decoded rows and the formula of docs/formats.md 2.6, in
// ggml's float order.
//
// Why 1.5 * 2^-b: an ideal b-bit uniform quantizer over the range of a block
// of Gaussian samples (about 4.2 standard deviations for 32 samples) has RMS
// error range / (2^b sqrt 12), about 1.2 * 2^-b. The other bpw - b bits per
// weight pay for scales and mins; they make the error no smaller, and a good
// format should not be more than 25% worse than the ideal quantizer.
#include "dot_rows.h"
#include "harness.h"
#include "vec.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------
// Decoders written from docs/formats.md 2.3 and 2.4. Each gives element e of a row as
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
    ck_assert_float_eq(y[0], -7.5f);     // sub-block 0: 0 * 0 - 0.5 * 15
    ck_assert_float_eq(y[37], -4.5f);    // sub-block 2, code 1: 2 * 1 - 0.5 * 13
    ck_assert_float_eq(y[130], 12.5f);   // sub-block 8, code 2: 8 * 2 - 0.5 * 7
    ck_assert_float_eq(y[255], 45.0f);   // sub-block 15, code 3: 15 * 3 - 0
    for (int e = 0; e < 256; e++) ck_assert_int_eq(q2_K_elem(&b, e).q, e % 4);
}
END_TEST

// Q3_K with signed scales sc_j = 4 (j - 8), stored + 32 in 6 bits, and codes
// q = e % 8 - 4 (low 2 bits in qs, the high bit in hmask: set means +0).
START_TEST(test_hand_built_q3_K) {
    struct mg_block_q3_K b;
    memset(&b, 0, sizeof(b));
    b.d = 0x3800;   // 0.5
    for (int j = 0; j < 16; j++) {
        const int stored = 4 * (j - 8) + 32;
        if (j < 8) b.scales[j] |= (uint8_t) (stored & 15);
        else b.scales[j - 8] |= (uint8_t) ((stored & 15) << 4);
        b.scales[8 + j % 4] |= (uint8_t) ((stored >> 4) << (2 * (j / 4)));
    }
    for (int e = 0; e < 256; e++) {
        const int u = e % 8;   // q + 4
        set_two_bits(b.qs, e, u & 3);
        if (u >= 4) b.hmask[e % 32] |= (uint8_t) (1 << (e / 32));
    }
    float y[256];
    mg_dequantize_row_q3_K(&b, y, 256);
    ck_assert_float_eq(y[0], 64.0f);      // (0.5 * -32) * -4
    ck_assert_float_eq(y[37], -12.0f);    // (0.5 * -24) * 1
    ck_assert_float_eq(y[100], 0.0f);     // (0.5 * -8) * 0
    ck_assert_float_eq(y[255], 42.0f);    // (0.5 * 28) * 3
    for (int e = 0; e < 256; e++) {
        const struct elem el = q3_K_elem(&b, e);
        ck_assert_int_eq(el.q, e % 8 - 4);
        ck_assert_float_eq(el.step, 0.5f * (float) (4 * (e / 16 - 8)));
    }
}
END_TEST

// Q5_K: Q4_K's scales (sc, m below, 6 bits each) and codes 7e mod 32.
START_TEST(test_hand_built_q5_K) {
    const int sc[8] = {3, 13, 23, 33, 43, 53, 63, 17};
    const int m[8]  = {0, 5, 40, 63, 16, 31, 48, 1};
    struct mg_block_q5_K b;
    memset(&b, 0, sizeof(b));
    b.d    = 0x3c00;   // 1
    b.dmin = 0x3800;   // 0.5
    for (int j = 0; j < 4; j++) {
        b.scales[j]     = (uint8_t) (sc[j] | (sc[j + 4] >> 4) << 6);
        b.scales[j + 4] = (uint8_t) (m[j] | (m[j + 4] >> 4) << 6);
        b.scales[j + 8] = (uint8_t) ((sc[j + 4] & 15) | (m[j + 4] & 15) << 4);
    }
    for (int e = 0; e < 256; e++) {
        const int q    = (7 * e) % 32;
        uint8_t * byte = &b.qs[32 * (e / 64) + e % 32];
        *byte |= (uint8_t) ((e % 64) < 32 ? (q & 15) : (q & 15) << 4);
        if (q >= 16) b.qh[e % 32] |= (uint8_t) (1 << (e / 32));
    }
    float y[256];
    mg_dequantize_row_q5_K(&b, y, 256);
    ck_assert_float_eq(y[37], 36.5f);      // 13 * 3 - 0.5 * 5
    ck_assert_float_eq(y[200], 1488.0f);   // 63 * 24 - 0.5 * 48
    ck_assert_float_eq(y[255], 424.5f);    // 17 * 25 - 0.5 * 1
    for (int e = 0; e < 256; e++) {
        ck_assert_int_eq(q5_K_elem(&b, e).q, (7 * e) % 32);
        ck_assert_float_eq(y[e], (float) sc[e / 32] * (float) ((7 * e) % 32) - 0.5f * (float) m[e / 32]);
    }
}
END_TEST

// Random bytes (with finite, moderate scales): the library decodes exactly as
// the decoder written from docs/formats.md does.

// A finite half between 2^-8 and 2^2, of either sign.
static mg_fp16_t random_scale(uint64_t * rng) {
    const unsigned magnitude = 0x1c00 + (unsigned) (mg_test_rand_u64(rng) % 0x2800);
    const unsigned sign      = (unsigned) (mg_test_rand_u64(rng) & 1) << 15;
    return (mg_fp16_t) (magnitude | sign);
}

// Overwrites the F16 fields of every block with random_scale()s.
static void randomize_scales(enum mg_type type, uint8_t * blocks, int n_blocks, uint64_t * rng) {
    for (int b = 0; b < n_blocks; b++) {
        const mg_fp16_t d = random_scale(rng), m = random_scale(rng);
        if (type == MG_TYPE_Q4_1) {
            struct mg_block_q4_1 * x = (struct mg_block_q4_1 *) blocks + b;
            x->d = d, x->m = m;
        } else if (type == MG_TYPE_Q5_0) {
            ((struct mg_block_q5_0 *) blocks)[b].d = d;
        } else if (type == MG_TYPE_Q5_1) {
            struct mg_block_q5_1 * x = (struct mg_block_q5_1 *) blocks + b;
            x->d = d, x->m = m;
        } else if (type == MG_TYPE_Q8_1) {
            struct mg_block_q8_1 * x = (struct mg_block_q8_1 *) blocks + b;
            x->d = d, x->s = m;
        } else if (type == MG_TYPE_Q2_K) {
            struct mg_block_q2_K * x = (struct mg_block_q2_K *) blocks + b;
            x->d = d, x->dmin = m;
        } else if (type == MG_TYPE_Q3_K) {
            ((struct mg_block_q3_K *) blocks)[b].d = d;
        } else if (type == MG_TYPE_Q5_K) {
            struct mg_block_q5_K * x = (struct mg_block_q5_K *) blocks + b;
            x->d = d, x->dmin = m;
        } else if (type == MG_TYPE_IQ4_NL) {
            ((struct mg_block_iq4_nl *) blocks)[b].d = d;
        } else {
            ck_abort_msg("no scales for %s", mg_type_name(type));
        }
    }
}

START_TEST(test_random_blocks_decode_like_facts) {
    uint64_t       rng = 17;
    static uint8_t blocks[512 * 36];
    static float   y[512];
    for (int i = 0; i < N_QTYPES; i++) {
        const struct qtype * t = &QTYPES[i];
        const int64_t        n = 512;
        for (int rep = 0; rep < 20; rep++) {
            for (size_t k = 0; k < mg_row_size(t->type, n); k++) blocks[k] = (uint8_t) mg_test_rand_u64(&rng);
            randomize_scales(t->type, blocks, (int) (n / t->block), &rng);
            mg_get_type_traits(t->type)->to_float(blocks, y, n);
            for (int e = 0; e < n; e++) {
                const float want = elem_value(t->elem(blocks, e));
                ck_assert_msg(y[e] == want, "%s elem %d: %g, the format says %g", t->name, e, y[e], want);
            }
        }
    }
}
END_TEST

// ---------------------------------------------------------------------------
// Round trips
// ---------------------------------------------------------------------------

#define RT_N (256 * 64)
static float   rt_x[RT_N], rt_y[RT_N];
static uint8_t rt_q[RT_N * 2];

static void quantize_gaussian(const struct qtype * t, uint64_t seed) {
    mg_test_fill_normal(rt_x, RT_N, &seed);
    const struct mg_type_traits * tr = mg_get_type_traits(t->type);
    tr->from_float(rt_x, rt_q, RT_N);
    tr->to_float(rt_q, rt_y, RT_N);
}

// Every element is on the nearest level of its block. The K-quants choose codes
// against the decoded scales, up to the rounding of one float division. The
// 32-element types divide by the unrounded scale (and subtract the unrounded
// min), which moves the levels they aimed at by up to |qmax| * |d_f16 - d| +
// |m_f16 - m|, each at most 2^-11 of the stored value.
START_TEST(test_round_trip_nearest_level) {
    for (int i = 0; i < N_QTYPES; i++) {
        const struct qtype * t = &QTYPES[i];
        quantize_gaussian(t, 100 + (uint64_t) i);
        int zero_steps = 0;
        for (int e = 0; e < RT_N; e++) {
            const struct elem el = t->elem(rt_q, e);
            if (el.step == 0) {   // a sub-block whose scale quantized to 0 (K-quants)
                zero_steps++;
                continue;
            }
            const double qmax  = t->type == MG_TYPE_IQ4_NL ? 127 : fmax(abs(t->qmin), abs(t->qmax));
            const double slack = t->scale_from_fit ? (qmax * fabs(el.step) + fabs(el.offset)) * 0x1p-10
                                                   : 1e-5 * (fabs(el.step) * qmax + fabs(el.offset));
            const double dist  = grid_distance(t, rt_x[e], el);
            const double err   = fabs((double) rt_y[e] - rt_x[e]);
            ck_assert_msg(err <= dist + slack, "%s elem %d: x %g y %g, nearest level %g away", t->name, e, rt_x[e],
                          rt_y[e], dist);
        }
        ck_assert_msg(zero_steps <= RT_N / 100, "%s: %d elements in zero-scale sub-blocks", t->name, zero_steps);
    }
}
END_TEST

START_TEST(test_round_trip_rms) {
    for (int i = 0; i < N_QTYPES; i++) {
        const struct qtype * t = &QTYPES[i];
        quantize_gaussian(t, 200 + (uint64_t) i);
        const double rms   = mg_test_rms_error(rt_x, rt_y, RT_N);
        const double bound = 1.5 * ldexp(1, -t->code_bits);
        ck_assert_msg(rms <= bound, "%s: RMS error %g above 1.5 * 2^-%d = %g", t->name, rms, t->code_bits, bound);
    }
}
END_TEST

// Q8_1 carries s = d * (sum of codes), rounded to F16, with the d it was
// quantized with; both rules compute it the same way.
START_TEST(test_q8_1_sum_field) {
    uint64_t rng = 300;
    for (int k = 0; k < 1000; k++) {
        float x[32];
        for (int j = 0; j < 32; j++) x[j] = mg_test_rand_normal(&rng) * (float) (1 + k % 5);
        struct mg_block_q8_1 r, a;
        mg_quantize_row_q8_1_ref(x, &r, 32);
        mg_quantize_row_q8_1(x, &a, 32);
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
        const float d = amax / 127;
        int         sum_r = 0, sum_a = 0;
        for (int j = 0; j < 32; j++) {
            ck_assert_int_eq(r.qs[j], (int) roundf(x[j] * (1.0f / d)));   // reference: roundf, 1/d
            ck_assert_int_eq(a.qs[j], (int) nearbyintf(x[j] * (127.0f / amax)));   // x86: ties to even, 127/amax
            sum_r += r.qs[j], sum_a += a.qs[j];
        }
        ck_assert_uint_eq(r.d, mg_fp32_to_fp16(d));
        ck_assert_uint_eq(a.d, mg_fp32_to_fp16(d));
        ck_assert_uint_eq(r.s, mg_fp32_to_fp16((float) sum_r * d));
        ck_assert_uint_eq(a.s, mg_fp32_to_fp16((float) sum_a * d));
    }
}
END_TEST

START_TEST(test_q8_1_activations_round_ties_to_even) {
    const float x[32] = {127.0f, 2.5f, -2.5f, 0.5f, 126.5f, -7.5f};
    struct mg_block_q8_1 a, r;
    mg_quantize_row_q8_1(x, &a, 32);
    mg_quantize_row_q8_1_ref(x, &r, 32);
    const int want_x86[6] = {127, 2, -2, 0, 126, -8};
    const int want_ref[6] = {127, 3, -3, 1, 127, -8};
    for (int j = 0; j < 6; j++) {
        ck_assert_int_eq(a.qs[j], want_x86[j]);
        ck_assert_int_eq(r.qs[j], want_ref[j]);
    }
    ck_assert_float_eq(mg_fp16_to_fp32(a.s), 245.0f);   // 127 + 2 - 2 + 0 + 126 - 8, d = 1
    ck_assert_float_eq(mg_fp16_to_fp32(r.s), 247.0f);   // 127 + 3 - 3 + 1 + 127 - 8
}
END_TEST

// The first strict maximum decides the sign of Q5_0's scale, as in Q4_0.
START_TEST(test_q5_0_first_strict_maximum) {
    float x[32] = {0}, y[32];
    struct mg_block_q5_0 b;
    x[3] = -2.0f, x[10] = 2.0f;   // d = -2 / -16 = 0.125
    mg_quantize_row_q5_0_ref(x, &b, 32);
    ck_assert_uint_eq(b.d, 0x3000);
    mg_dequantize_row_q5_0(&b, y, 32);
    ck_assert_float_eq(y[3], -2.0f);
    ck_assert_float_eq(y[10], 1.875f);   // code 32 does not exist: 15 * 0.125
    x[3] = 2.0f, x[10] = -2.0f;
    mg_quantize_row_q5_0_ref(x, &b, 32);
    ck_assert_uint_eq(b.d, 0xb000);
    mg_dequantize_row_q5_0(&b, y, 32);
    ck_assert_float_eq(y[3], 2.0f);
    ck_assert_float_eq(y[10], -1.875f);
}
END_TEST

// IQ4_NL, worked by hand: a block whose values are exactly 0.5 * K[q] for
// every level must come back unchanged (least squares finds d = 0.5 exactly).
START_TEST(test_iq4_nl_exact_levels) {
    float x[32], y[32];
    for (int j = 0; j < 32; j++) x[j] = 0.5f * (float) K_IQ4NL[(j * 5) % 16];
    struct mg_block_iq4_nl b;
    mg_quantize_row_iq4_nl_ref(x, &b, 32);
    ck_assert_uint_eq(b.d, 0x3800);
    mg_dequantize_row_iq4_nl(&b, y, 32);
    for (int j = 0; j < 32; j++) ck_assert_float_eq(y[j], x[j]);

    float z[32] = {0};
    mg_quantize_row_iq4_nl_ref(z, &b, 32);   // all zero: d = 0, codes on the level nearest 0 (K[8] = 1)
    ck_assert_uint_eq(b.d, 0);
    for (int j = 0; j < 16; j++) ck_assert_uint_eq(b.qs[j], 0x88);
}
END_TEST

// IQ4_NL is quantized the way llama-quantize does it (ggml: quantize_iq4_nl,
// 7 extra scale trials on each side), not with ggml's quantize_row_iq4_nl_ref
// (no trials). With weights x^2, each block must fit at least as well as the
// best scale that search tries: the first guess 127/max, then (t - 127)/max for
// t = -7..7, each with its nearest codes and their least-squares scale. Computed
// here in double; the slack covers rounding the winning scale to F16.
static int nearest_level(double v) {
    int best = 0;
    for (int i = 1; i < 16; i++) {
        if (fabs(v - K_IQ4NL[i]) <= fabs(v - K_IQ4NL[best])) best = i;   // ties: the upper level
    }
    return best;
}

static double iq4nl_candidate_error(const float * x, double id) {
    double sumqx = 0, sumq2 = 0, sumx2w = 0;
    int    q[32];
    for (int j = 0; j < 32; j++) {
        const double w = (double) x[j] * x[j];
        q[j] = K_IQ4NL[nearest_level(id * x[j])];
        sumqx += w * q[j] * x[j];
        sumq2 += w * q[j] * q[j];
        sumx2w += w * x[j] * x[j];
    }
    if (sumq2 <= 0) return sumx2w;
    const double d = sumqx / sumq2;
    double       err = 0;
    for (int j = 0; j < 32; j++) err += (double) x[j] * x[j] * (x[j] - d * q[j]) * (x[j] - d * q[j]);
    return err;
}

START_TEST(test_iq4_nl_scale_search) {
    uint64_t rng = 700;
    for (int k = 0; k < 2000; k++) {
        float x[32];
        for (int j = 0; j < 32; j++) x[j] = mg_test_rand_normal(&rng);
        double max = 0, energy = 0;
        for (int j = 0; j < 32; j++) {
            if (fabs(x[j]) > fabs(max)) max = x[j];
            energy += (double) x[j] * x[j] * x[j] * x[j];
        }
        double best = iq4nl_candidate_error(x, 127 / max);
        for (int t = -7; t <= 7; t++) best = fmin(best, iq4nl_candidate_error(x, (t - 127) / max));

        struct mg_block_iq4_nl b;
        mg_quantize_row_iq4_nl_ref(x, &b, 32);
        const double d   = mg_fp16_to_fp32(b.d);
        double       err = 0;
        for (int j = 0; j < 32; j++) {
            const double y = d * K_IQ4NL[nibble(b.qs, j)];
            err += (double) x[j] * x[j] * (x[j] - y) * (x[j] - y);
        }
        ck_assert_msg(err <= best + 0x1p-18 * energy, "block %d: weighted error %g, the search finds %g", k, err,
                      best);
    }
}
END_TEST

// ---------------------------------------------------------------------------
// ggml's own bytes. The quantizers above must equal ggml's bit for bit, and
// no fixture model holds these types, so the expected bytes come from ggml
// itself: the FNV-1a hashes below are of what ggml_quantize_chunk (rows of
// 1024, no importance matrix: what llama-quantize runs) and quantize_row_q8_1
// (_ref, and the AVX2 build's) wrote for these inputs, computed once with the
// libggml-base/libggml-cpu of ggml 0.25.1 (x86-64). The inputs are made with
// integer and exact float operations only, so they are the same everywhere.
// ---------------------------------------------------------------------------

static uint64_t golden_rng_next(uint64_t * s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

// Uniform in [-1, 1): a 24-bit integer times 2^-23, minus 1 (all exact).
static float golden_uniform(uint64_t * s) {
    return (float) (golden_rng_next(s) >> 40) * 0x1p-23f - 1.0f;
}

// Four rows of 8192 that reach the corners of the quantizers: bell-shaped
// values (a sum of four uniforms), all-positive values, weights with rare
// outliers, and rows where every fifth 16-element group is zero.
static void golden_input(float * x, int mode, int n) {
    uint64_t s = 0x9E3779B97F4A7C15ull + (uint64_t) mode;
    for (int i = 0; i < n; i++) {
        const float bell = golden_uniform(&s) + golden_uniform(&s) + golden_uniform(&s) + golden_uniform(&s);
        switch (mode) {
            case 0: x[i] = bell; break;
            case 1: x[i] = bell * bell * 0.5f; break;
            case 2: x[i] = bell * 0.02f + (i % 97 == 0 ? 0.25f : 0.0f); break;
            default: x[i] = (i / 16) % 5 == 0 ? 0.0f : bell * (float) (1 + i % 7); break;
        }
    }
}

// FNV-1a, 64 bits.
static uint64_t golden_hash(const void * p, size_t n) {
    const uint8_t * b = p;
    uint64_t        h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

#define GOLDEN_N 8192

static void check_golden(const char * what, mg_from_float_fn quantize, enum mg_type type, const uint64_t want[4]) {
    static float   x[GOLDEN_N];
    static uint8_t q[GOLDEN_N * 2];
    for (int mode = 0; mode < 4; mode++) {
        golden_input(x, mode, GOLDEN_N);
        quantize(x, q, GOLDEN_N);
        const uint64_t got = golden_hash(q, mg_row_size(type, GOLDEN_N));
        ck_assert_msg(got == want[mode], "%s, input %d: bytes hash to 0x%016llx, ggml's to 0x%016llx", what, mode,
                      (unsigned long long) got, (unsigned long long) want[mode]);
    }
}

START_TEST(test_quantizers_match_ggml_bytes) {
    const struct {
        enum mg_type type;
        uint64_t     want[4];
    } golden[] = {
        {MG_TYPE_Q4_1, {0x1612e5b6f1f7744cull, 0x747a11a6e46ae4f3ull, 0xef3b7d1a95246816ull, 0x0c4ed507b3f38be5ull}},
        {MG_TYPE_Q5_0, {0x6c038f40316c15c1ull, 0x3f8f2638a90aa7f2ull, 0x2fa331b24142b573ull, 0x181f630f82bb873bull}},
        {MG_TYPE_Q5_1, {0x106ccdbe15c30d27ull, 0x71329bcce335bf76ull, 0x482922d41bdefc63ull, 0x8d60ae99aa86bc18ull}},
        {MG_TYPE_Q2_K, {0x72850bcfccc65e99ull, 0x03bf7ecca4c88f27ull, 0x8193d3735f9c2865ull, 0xb5bae6d93c70377dull}},
        {MG_TYPE_Q3_K, {0x0ddc6329f97ed729ull, 0xc98b36dd64dac3ecull, 0x687cfff454009c8eull, 0x1cb208767eb9b20bull}},
        {MG_TYPE_Q5_K, {0xa4d4b4f370b4668cull, 0xc5962d86200b856aull, 0x211adc8607b40671ull, 0x35f0264bfd23d024ull}},
        {MG_TYPE_IQ4_NL, {0x4679258caefe5358ull, 0x4c2696a1f6dc49ecull, 0xbe8de79ad4be2196ull, 0xae30fc91c05b1734ull}},
    };
    for (size_t i = 0; i < sizeof(golden) / sizeof(golden[0]); i++) {
        check_golden(mg_type_name(golden[i].type), mg_get_type_traits(golden[i].type)->from_float, golden[i].type,
                     golden[i].want);
    }
    const uint64_t q8_1_ref[4] = {0xa3f454db02643da5ull, 0xba820769e561a274ull, 0xf1338c271ec5651eull,
                                  0x87bd47d9922eeacdull};
    const uint64_t q8_1_x86[4] = {0xa3f454db02643da5ull, 0xba820769e561a274ull, 0xf7eae5fd39e32b05ull,
                                  0x87bd47d9922eeacdull};
    check_golden("q8_1 reference", mg_quantize_row_q8_1_ref, MG_TYPE_Q8_1, q8_1_ref);
    check_golden("q8_1 activations (x86 rule)", mg_quantize_row_q8_1, MG_TYPE_Q8_1, q8_1_x86);
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
    case MG_TYPE_Q4_1: return mg_vec_dot_q4_1_q8_1;
    case MG_TYPE_Q5_0: return mg_vec_dot_q5_0_q8_0;
    case MG_TYPE_Q5_1: return mg_vec_dot_q5_1_q8_1;
    case MG_TYPE_IQ4_NL: return mg_vec_dot_iq4_nl_q8_0;
    case MG_TYPE_Q2_K: return mg_vec_dot_q2_K_q8_K;
    case MG_TYPE_Q3_K: return mg_vec_dot_q3_K_q8_K;
    case MG_TYPE_Q5_K: return mg_vec_dot_q5_K_q8_K;
    default: ck_abort_msg("no scalar kernel for %s", mg_type_name(type)); return NULL;
    }
}

// Weights of type `type` and activations as mul_mat converts them: the
// scalar kernel's result, and the exact dot of the decoded rows.
static float prepare_dot(enum mg_type type, int64_t n, uint64_t seed, bool aligned, double * exact, double * mag) {
    return dot_rows_prepare(&dot, type, n, seed, aligned, scalar_vec_dot(type), exact, mag);
}

START_TEST(test_cpu_traits) {
    const struct {
        enum mg_type       type, vec_dot_type;
        mg_from_float_fn   from_float;
        mg_vec_dot_fn      vec_dot;
    } want[] = {
        {MG_TYPE_Q4_1, MG_TYPE_Q8_1, TABLE_KERNEL_N(mg_quantize_row_q8_1), TABLE_KERNEL_N(mg_vec_dot_q4_1_q8_1)},
        {MG_TYPE_Q5_0, MG_TYPE_Q8_0, TABLE_KERNEL_N(mg_quantize_row_q8_0), TABLE_KERNEL_N(mg_vec_dot_q5_0_q8_0)},
        {MG_TYPE_Q5_1, MG_TYPE_Q8_1, TABLE_KERNEL_N(mg_quantize_row_q8_1), TABLE_KERNEL_N(mg_vec_dot_q5_1_q8_1)},
        {MG_TYPE_Q2_K, MG_TYPE_Q8_K, TABLE_KERNEL_N(mg_quantize_row_q8_K), TABLE_KERNEL_N(mg_vec_dot_q2_K_q8_K)},
        {MG_TYPE_Q3_K, MG_TYPE_Q8_K, TABLE_KERNEL_N(mg_quantize_row_q8_K), TABLE_KERNEL_N(mg_vec_dot_q3_K_q8_K)},
        {MG_TYPE_Q5_K, MG_TYPE_Q8_K, TABLE_KERNEL_N(mg_quantize_row_q8_K), TABLE_KERNEL(mg_vec_dot_q5_K_q8_K)},
        {MG_TYPE_IQ4_NL, MG_TYPE_Q8_0, TABLE_KERNEL_N(mg_quantize_row_q8_0), TABLE_KERNEL(mg_vec_dot_iq4_nl_q8_0)},
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        const struct mg_type_traits_cpu * t = mg_get_type_traits_cpu(want[i].type);
        ck_assert_ptr_nonnull(t);
        ck_assert_int_eq(t->vec_dot_type, want[i].vec_dot_type);
        ck_assert(t->from_float == want[i].from_float);
        ck_assert(t->vec_dot == want[i].vec_dot);
    }
    ck_assert_ptr_null(mg_get_type_traits_cpu(MG_TYPE_Q8_1));   // activations only
}
END_TEST

// Q8_1's s is d * (sum of codes) rounded to F16, and Q4_1/Q5_1 use it for
// their mins: sum_i (q_i dW + mW) a_i dA = dW dA S + mW s. So their dot moves
// away from the dot of the decoded rows by sum over blocks of mW * (s - dA sum a),
// each at most |mW s| * 2^-11. This returns that allowance (0 for other types).
static double q8_1_s_allowance(enum mg_type type, int64_t n) {
    if (type != MG_TYPE_Q4_1 && type != MG_TYPE_Q5_1) return 0;
    double allowance = 0;
    for (int64_t b = 0; b < n / 32; b++) {
        const float m = type == MG_TYPE_Q4_1 ? mg_fp16_to_fp32(((const struct mg_block_q4_1 *) dot.wq)[b].m)
                                             : mg_fp16_to_fp32(((const struct mg_block_q5_1 *) dot.wq)[b].m);
        allowance += fabs((double) m * mg_fp16_to_fp32(((const struct mg_block_q8_1 *) dot.aq)[b].s)) * 0x1p-11;
    }
    return allowance;
}

// Against the exact dot of the decoded rows, for 1, 3 and 16 super-blocks (or
// 8, 24 and 128 blocks of 32).
START_TEST(test_vec_dot_accuracy) {
    const int64_t lengths[] = {256, 768, 4096};
    for (int i = 0; i < N_QTYPES; i++) {
        const struct qtype * t = &QTYPES[i];
        if (t->type == MG_TYPE_Q8_1) continue;   // not a weight type
        for (int k = 0; k < 3; k++) {
            double       exact, mag;
            const float  got = prepare_dot(t->type, lengths[k], 400 + 10 * (uint64_t) i + (uint64_t) k, false, &exact,
                                             &mag);
            // per block: int sums, then up to 4 float operations; 10 more at the end
            const double tol = (4.0 * (double) (lengths[k] / t->block) + 10) * 0x1p-24 * mag +
                               q8_1_s_allowance(t->type, lengths[k]);
            ck_assert_msg(fabs(got - exact) <= tol, "%s n %lld: %.9g vs %.9g (tol %g)", t->name,
                          (long long) lengths[k], got, exact, tol);
        }
    }
}
END_TEST

// The 8 lanes of ggml's x86 dot products summed as hsum_float_8 does.
static float lanes_sum(const float l[8]) {
    return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}

// docs/formats.md 2.6, to the bit. Mostly one to three blocks of aligned data (where one
// rounding in one block's term is not lost in the rounding of a large sum),
// every fourth a long Gaussian row.
START_TEST(test_vec_dot_order_32_blocks) {
    for (int rep = 0; rep < 200; rep++) {
        double        exact, mag;
        const int64_t n       = rep % 4 == 0 ? DOT_N : 32 * (rep % 4);
        const bool    aligned = rep % 4 != 0;

        // Q4_1 x Q8_1, ggml's x86 order: 8 lanes of 4 products per block,
        // lane += (dW * dA) * S_lane fused; summs += mW * sA fused; then
        // ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7)) + summs.
        float got = prepare_dot(MG_TYPE_Q4_1, n, 500 + (uint64_t) rep, aligned, &exact, &mag);
        float lane[8] = {0}, summs = 0;
        for (int b = 0; b < n / 32; b++) {
            const struct mg_block_q4_1 * w = (const struct mg_block_q4_1 *) dot.wq + b;
            const struct mg_block_q8_1 * a = (const struct mg_block_q8_1 *) dot.aq + b;
            for (int l = 0; l < 8; l++) {
                int S = 0;
                for (int j = 4 * l; j < 4 * l + 4; j++) S += q4_1_elem(dot.wq, 32 * b + j).q * a->qs[j];
                lane[l] = fmaf(mg_fp16_to_fp32(w->d) * mg_fp16_to_fp32(a->d), (float) S, lane[l]);
            }
            summs = fmaf(mg_fp16_to_fp32(w->m), mg_fp16_to_fp32(a->s), summs);
        }
        float acc = lanes_sum(lane) + summs;
        ck_assert_float_eq(got, acc);

        // Q5_1 x Q8_1: the same.
        got = prepare_dot(MG_TYPE_Q5_1, n, 510 + (uint64_t) rep, aligned, &exact, &mag);
        memset(lane, 0, sizeof(lane));
        summs = 0;
        for (int b = 0; b < n / 32; b++) {
            const struct mg_block_q5_1 * w = (const struct mg_block_q5_1 *) dot.wq + b;
            const struct mg_block_q8_1 * a = (const struct mg_block_q8_1 *) dot.aq + b;
            for (int l = 0; l < 8; l++) {
                int S = 0;
                for (int j = 4 * l; j < 4 * l + 4; j++) S += q5_1_elem(dot.wq, 32 * b + j).q * a->qs[j];
                lane[l] = fmaf(mg_fp16_to_fp32(w->d) * mg_fp16_to_fp32(a->d), (float) S, lane[l]);
            }
            summs = fmaf(mg_fp16_to_fp32(w->m), mg_fp16_to_fp32(a->s), summs);
        }
        acc = lanes_sum(lane) + summs;
        ck_assert_float_eq(got, acc);

        // Q5_0 x Q8_0: the lanes of Q4_1, signed codes, no mins.
        got = prepare_dot(MG_TYPE_Q5_0, n, 520 + (uint64_t) rep, aligned, &exact, &mag);
        memset(lane, 0, sizeof(lane));
        for (int b = 0; b < n / 32; b++) {
            const struct mg_block_q5_0 * w = (const struct mg_block_q5_0 *) dot.wq + b;
            const struct mg_block_q8_0 * a = (const struct mg_block_q8_0 *) dot.aq + b;
            for (int l = 0; l < 8; l++) {
                int S = 0;
                for (int j = 4 * l; j < 4 * l + 4; j++) S += q5_0_elem(dot.wq, 32 * b + j).q * a->qs[j];
                lane[l] = fmaf(mg_fp16_to_fp32(w->d) * mg_fp16_to_fp32(a->d), (float) S, lane[l]);
            }
        }
        acc = lanes_sum(lane);
        ck_assert_float_eq(got, acc);

        // IQ4_NL x Q8_0, as llama.cpp's repacked gemv: acc = fma(dA * dW, S, acc), S over table values.
        got = prepare_dot(MG_TYPE_IQ4_NL, n, 530 + (uint64_t) rep, aligned, &exact, &mag);
        acc = 0;
        for (int b = 0; b < n / 32; b++) {
            const struct mg_block_iq4_nl * w = (const struct mg_block_iq4_nl *) dot.wq + b;
            const struct mg_block_q8_0 *   a = (const struct mg_block_q8_0 *) dot.aq + b;
            int                            S = 0;
            for (int j = 0; j < 32; j++) S += iq4_nl_elem(dot.wq, 32 * b + j).q * a->qs[j];
            acc = fmaf(mg_fp16_to_fp32(a->d) * mg_fp16_to_fp32(w->d), (float) S, acc);
        }
        ck_assert_float_eq(got, acc);
    }
}
END_TEST

START_TEST(test_vec_dot_order_k_quants) {
    for (int rep = 0; rep < 100; rep++) {
        double        exact, mag;
        const int64_t n       = rep % 4 == 0 ? DOT_N : 256;
        const bool    aligned = rep % 4 != 0;

        // Q2_K: per super-block acc += (dA * dW) * S - (dA * dminW) * sum_j bsums_j * m_j; no lanes.
        float got = prepare_dot(MG_TYPE_Q2_K, n, 600 + (uint64_t) rep, aligned, &exact, &mag);
        float acc = 0;
        for (int i = 0; i < n / 256; i++) {
            const struct mg_block_q2_K * w = (const struct mg_block_q2_K *) dot.wq + i;
            const struct mg_block_q8_K * a = (const struct mg_block_q8_K *) dot.aq + i;
            int                          S = 0, summ = 0;
            for (int e = 0; e < 256; e++) {
                S += (w->scales[e / 16] & 15) * two_bits(w->qs, e) * a->qs[e];
                summ += (w->scales[e / 16] >> 4) * a->qs[e];
            }
            acc += (a->d * mg_fp16_to_fp32(w->d)) * (float) S - (a->d * mg_fp16_to_fp32(w->dmin)) * (float) summ;
        }
        ck_assert_float_eq(got, acc);

        // Q3_K: 8 lanes of (dW * dA) * isum_l, summed at the end.
        got = prepare_dot(MG_TYPE_Q3_K, n, 610 + (uint64_t) rep, aligned, &exact, &mag);
        float lanes[8] = {0};
        for (int i = 0; i < n / 256; i++) {
            const struct mg_block_q3_K * w       = (const struct mg_block_q3_K *) dot.wq + i;
            const struct mg_block_q8_K * a       = (const struct mg_block_q8_K *) dot.aq + i;
            int                          isum[8] = {0};
            for (int e = 0; e < 256; e++) {
                isum[e % 8] += q3_K_scale_of(w->scales, e / 16) * q3_K_elem(dot.wq, 256 * i + e).q * a->qs[e];
            }
            for (int l = 0; l < 8; l++) lanes[l] += (mg_fp16_to_fp32(w->d) * a->d) * (float) isum[l];
        }
        acc = 0;
        for (int l = 0; l < 8; l++) acc += lanes[l];
        ck_assert_float_eq(got, acc);

        // Q5_K: as Q4_K: lanes, and the mins subtracted per super-block.
        got = prepare_dot(MG_TYPE_Q5_K, n, 620 + (uint64_t) rep, aligned, &exact, &mag);
        memset(lanes, 0, sizeof(lanes));
        acc = 0;
        for (int i = 0; i < n / 256; i++) {
            const struct mg_block_q5_K * w       = (const struct mg_block_q5_K *) dot.wq + i;
            const struct mg_block_q8_K * a       = (const struct mg_block_q8_K *) dot.aq + i;
            int                          isum[8] = {0}, summ = 0;
            for (int e = 0; e < 256; e++) {
                int sc, m;
                k4_scale_min(w->scales, e / 32, &sc, &m);
                isum[e % 8] += sc * q5_K_elem(dot.wq, 256 * i + e).q * a->qs[e];
                summ += m * a->qs[e];
            }
            for (int l = 0; l < 8; l++) lanes[l] += (mg_fp16_to_fp32(w->d) * a->d) * (float) isum[l];
            acc -= (mg_fp16_to_fp32(w->dmin) * a->d) * (float) summ;
        }
        for (int l = 0; l < 8; l++) acc += lanes[l];
        ck_assert_float_eq(got, acc);
    }
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s  = suite_create("quants_more");
    TCase * tc = tcase_create("blocks");
    tcase_add_test(tc, test_sizes);
    tcase_add_test(tc, test_hand_built_32_blocks);
    tcase_add_test(tc, test_hand_built_q2_K);
    tcase_add_test(tc, test_hand_built_q3_K);
    tcase_add_test(tc, test_hand_built_q5_K);
    tcase_add_test(tc, test_random_blocks_decode_like_facts);
    suite_add_tcase(s, tc);

    tc = tcase_create("quantize");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_round_trip_nearest_level);
    tcase_add_test(tc, test_round_trip_rms);
    tcase_add_test(tc, test_q8_1_sum_field);
    tcase_add_test(tc, test_q8_1_activations_round_ties_to_even);
    tcase_add_test(tc, test_q5_0_first_strict_maximum);
    tcase_add_test(tc, test_iq4_nl_exact_levels);
    tcase_add_test(tc, test_iq4_nl_scale_search);
    tcase_add_test(tc, test_quantizers_match_ggml_bytes);
    suite_add_tcase(s, tc);

    tc = tcase_create("vec_dot");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_cpu_traits);
    tcase_add_test(tc, test_vec_dot_accuracy);
    tcase_add_test(tc, test_vec_dot_order_32_blocks);
    tcase_add_test(tc, test_vec_dot_order_k_quants);
    suite_add_tcase(s, tc);
    return s;
}
