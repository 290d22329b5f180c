// test_vec_simd.c - the CPU table's kernels (the SIMD twins of vec_simd.c in
// a SIMD build) against the scalar references of vec.c and quants*.c.
//
//   - vec_dot, for every weight type, against the scalar kernel on the same
//     bytes: Gaussian rows, rows with all-zero and full-scale blocks, and raw
//     random blocks (every code pattern, Q8_K scales of both signs), for
//     lengths of 1, 2, 3, 7, 8, 33 and 65 blocks. The integer block sums are
//     exact in both, so they differ by float rounding only, bounded below;
//   - vec_dot_cols against vec_dot, column by column, to the bit;
//   - vec_dot_tile against vec_dot, element by element, to the bit, for every
//     count of rows (1..8) and columns (1..4), with weight rows packed or
//     apart, activation rows apart and result columns apart;
//   - the activation converters against their scalar references, to the bit,
//     on random rows, ties, zero blocks and edge values.
//
// In a scalar build (make test-scalar) the table holds the scalar kernels, and
// every comparison is of a kernel with itself: it still checks the table.
//
// The tolerance. Both kernels compute each block's integer sum exactly, scale
// it with one or two float multiplies and add it into float accumulators:
// scalar into one (or 8 lanes) in block order, SIMD into 8 or 16 lanes that
// are summed at the end. Each rounding is at most 2^-24 of a partial sum, and
// every partial sum is bounded by the sum of |terms| (mag, below), so each
// result is within (steps + 5) * 2^-24 * mag of the exact dot, steps being the
// number of additions in a row (blocks, or elements for float rows), and the
// two within twice that. For a row of 33 blocks that is about 4e-6 * mag.
#include "harness.h"
#include "vec.h"
#include "vec_simd.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------
// Every weight type of the table with its scalar kernels
// ---------------------------------------------------------------------------

struct ref {
    enum mg_type     type;
    mg_vec_dot_fn    vec_dot;      // vec.c's scalar reference
    mg_from_float_fn from_float;   // the scalar activation converter (NULL for F32)
};

static const struct ref REFS[] = {
    {MG_TYPE_F32, mg_vec_dot_f32, NULL},
    {MG_TYPE_F16, mg_vec_dot_f16, mg_fp32_to_fp16_row},
    {MG_TYPE_BF16, mg_vec_dot_bf16, mg_fp32_to_bf16_row},
    {MG_TYPE_Q4_0, mg_vec_dot_q4_0_q8_0, mg_quantize_row_q8_0},
    {MG_TYPE_Q4_1, mg_vec_dot_q4_1_q8_1, mg_quantize_row_q8_1},
    {MG_TYPE_Q5_0, mg_vec_dot_q5_0_q8_0, mg_quantize_row_q8_0},
    {MG_TYPE_Q5_1, mg_vec_dot_q5_1_q8_1, mg_quantize_row_q8_1},
    {MG_TYPE_Q8_0, mg_vec_dot_q8_0_q8_0, mg_quantize_row_q8_0},
    {MG_TYPE_IQ4_NL, mg_vec_dot_iq4_nl_q8_0, mg_quantize_row_q8_0},
    {MG_TYPE_Q2_K, mg_vec_dot_q2_K_q8_K, mg_quantize_row_q8_K},
    {MG_TYPE_Q3_K, mg_vec_dot_q3_K_q8_K, mg_quantize_row_q8_K},
    {MG_TYPE_Q4_K, mg_vec_dot_q4_K_q8_K, mg_quantize_row_q8_K},
    {MG_TYPE_Q5_K, mg_vec_dot_q5_K_q8_K, mg_quantize_row_q8_K},
    {MG_TYPE_Q6_K, mg_vec_dot_q6_K_q8_K, mg_quantize_row_q8_K},
};
#define N_REFS (sizeof(REFS) / sizeof(REFS[0]))

// Odd and even (IQ4_NL pairs its blocks); 33 and 65 run past one and two
// stretches of the lane-order tiles (LANE_TILE_CHUNK, 32 blocks, vec_simd.c).
static const int BLOCK_COUNTS[] = {1, 2, 3, 7, 8, 33, 65};
static const int FLOAT_LENGTHS[] = {1, 3, 7, 33, 64, 100, 257, 1000, 4096};   // around the 64-element SIMD step

#define N_COUNTS  (sizeof(BLOCK_COUNTS) / sizeof(BLOCK_COUNTS[0]))
#define N_FLOATS  (sizeof(FLOAT_LENGTHS) / sizeof(FLOAT_LENGTHS[0]))
#define MAX_ELEMS (33 * 256)

// Row lengths to test for a type: a list of block counts, or of lengths for float rows.
static int64_t test_length(enum mg_type type, size_t k, size_t * count) {
    const int64_t blck = mg_blck_size(type);
    if (blck == 1) {
        *count = N_FLOATS;
        return FLOAT_LENGTHS[k];
    }
    *count = N_COUNTS;
    return blck * BLOCK_COUNTS[k];
}

// ---------------------------------------------------------------------------
// Rows
// ---------------------------------------------------------------------------

enum mode {
    GAUSS,   // N(0,1) weights and 3 * N(0,1) activations, converted as mul_mat does
    EDGE,    // as GAUSS, with every 3rd weight block and every 4th activation block zero,
             // and the others scaled by powers of two (see rand_scale)
    RAW,     // raw random bytes in every code field, scales set to sane random values
};

// 2^-12 .. 2^max_exp. The F16 fields set the limits: weights up to 4.5 * 2^12
// fit a half; Q8_1's s = d * (sum of 32 codes) is up to 32 amax, which stays a
// finite half for activations up to 3 * 4.5 * 2^6.
static float rand_scale(uint64_t * rng, int max_exp) {
    return ldexpf(1.0f, (int) (mg_test_rand_u64(rng) % (uint64_t) (max_exp + 13)) - 12);
}

// A finite random float with an exponent within 2^-30 .. 2^30, random sign and mantissa.
static uint32_t rand_f32_bits(uint64_t * rng) {
    const uint32_t r    = (uint32_t) mg_test_rand_u64(rng);
    const uint32_t exp  = 127 - 30 + (uint32_t) (mg_test_rand_u64(rng) % 61);
    return (r & 0x807fffff) | exp << 23;
}

static mg_fp16_t rand_f16_scale(uint64_t * rng) {
    return mg_fp32_to_fp16(mg_test_rand_uniform(rng, 0.001f, 0.1f) * ((mg_test_rand_u64(rng) & 1) ? 1 : -1));
}

static void fill_random_bytes(uint8_t * p, size_t n, uint64_t * rng) {
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t) mg_test_rand_u64(rng);
}

// Raw weight blocks: random code bytes, and every F16 scale replaced by a
// finite random one (random bytes could make NaN or inf).
static void raw_weights(enum mg_type type, void * row, int64_t n, uint64_t * rng) {
    const size_t bytes = mg_row_size(type, n);
    fill_random_bytes(row, bytes, rng);
    const int64_t nb = n / mg_blck_size(type);
    for (int64_t b = 0; b < nb; b++) {
        switch (type) {
        case MG_TYPE_F32: {   // plain floats: finite, moderate exponents
            uint32_t * u = row;
            u[b]         = rand_f32_bits(rng);
            break;
        }
        case MG_TYPE_F16: {   // every finite half, subnormals and 65504 included
            mg_fp16_t * h = row;
            while ((h[b] & 0x7c00) == 0x7c00) h[b] = (mg_fp16_t) mg_test_rand_u64(rng);
            break;
        }
        case MG_TYPE_BF16: {   // normal bf16s of moderate range (the AVX512-BF16 dot flushes subnormals)
            mg_bf16_t * h = row;
            h[b]          = (mg_bf16_t) (rand_f32_bits(rng) >> 16);
            break;
        }
        case MG_TYPE_Q4_0: ((struct mg_block_q4_0 *) row)[b].d = rand_f16_scale(rng); break;
        case MG_TYPE_Q4_1:
            ((struct mg_block_q4_1 *) row)[b].d = rand_f16_scale(rng);
            ((struct mg_block_q4_1 *) row)[b].m = rand_f16_scale(rng);
            break;
        case MG_TYPE_Q5_0: ((struct mg_block_q5_0 *) row)[b].d = rand_f16_scale(rng); break;
        case MG_TYPE_Q5_1:
            ((struct mg_block_q5_1 *) row)[b].d = rand_f16_scale(rng);
            ((struct mg_block_q5_1 *) row)[b].m = rand_f16_scale(rng);
            break;
        case MG_TYPE_Q8_0: ((struct mg_block_q8_0 *) row)[b].d = rand_f16_scale(rng); break;   // codes include -128
        case MG_TYPE_IQ4_NL: ((struct mg_block_iq4_nl *) row)[b].d = rand_f16_scale(rng); break;
        case MG_TYPE_Q2_K:
            ((struct mg_block_q2_K *) row)[b].d    = rand_f16_scale(rng);
            ((struct mg_block_q2_K *) row)[b].dmin = rand_f16_scale(rng);
            break;
        case MG_TYPE_Q3_K: ((struct mg_block_q3_K *) row)[b].d = rand_f16_scale(rng); break;
        case MG_TYPE_Q4_K:
            ((struct mg_block_q4_K *) row)[b].d    = rand_f16_scale(rng);
            ((struct mg_block_q4_K *) row)[b].dmin = rand_f16_scale(rng);
            break;
        case MG_TYPE_Q5_K:
            ((struct mg_block_q5_K *) row)[b].d    = rand_f16_scale(rng);
            ((struct mg_block_q5_K *) row)[b].dmin = rand_f16_scale(rng);
            break;
        case MG_TYPE_Q6_K: ((struct mg_block_q6_K *) row)[b].d = rand_f16_scale(rng); break;   // scales -128..127
        default: ck_abort_msg("no raw blocks for %s", mg_type_name(type));
        }
    }
}

static int rand_code(uint64_t * rng) {
    return (int) (mg_test_rand_u64(rng) % 255) - 127;   // -127..127: what activation quantizers produce
}

// Raw activation blocks of the quantized vec_dot types, consistent in their
// derived fields: Q8_1's s = d * sum, Q8_K's bsums. Q8_K's d gets either sign.
static void raw_activations(enum mg_type type, void * row, int64_t n, uint64_t * rng) {
    switch (type) {
    case MG_TYPE_Q8_0:
        for (int64_t b = 0; b < n / 32; b++) {
            struct mg_block_q8_0 * y = (struct mg_block_q8_0 *) row + b;
            y->d                     = mg_fp32_to_fp16(fabsf(mg_fp16_to_fp32(rand_f16_scale(rng))));
            for (int j = 0; j < 32; j++) y->qs[j] = (int8_t) rand_code(rng);
        }
        break;
    case MG_TYPE_Q8_1:
        for (int64_t b = 0; b < n / 32; b++) {
            struct mg_block_q8_1 * y   = (struct mg_block_q8_1 *) row + b;
            const float            d   = fabsf(mg_fp16_to_fp32(rand_f16_scale(rng)));
            int                    sum = 0;
            for (int j = 0; j < 32; j++) sum += y->qs[j] = (int8_t) rand_code(rng);
            y->d = mg_fp32_to_fp16(d);
            y->s = mg_fp32_to_fp16(d * (float) sum);
        }
        break;
    case MG_TYPE_Q8_K:
        for (int64_t b = 0; b < n / 256; b++) {
            struct mg_block_q8_K * y = (struct mg_block_q8_K *) row + b;
            y->d                     = mg_test_rand_uniform(rng, 0.001f, 0.1f) * ((b & 1) ? 1.0f : -1.0f);
            for (int j = 0; j < 256; j++) y->qs[j] = (int8_t) rand_code(rng);
            for (int g = 0; g < 16; g++) {
                int sum = 0;
                for (int j = 0; j < 16; j++) sum += y->qs[16 * g + j];
                y->bsums[g] = (int16_t) sum;
            }
        }
        break;
    default: ck_abort_msg("no raw activations for %s", mg_type_name(type));
    }
}

// One weight row and n_cols activation rows (y_stride bytes apart) of a
// type, with the decoded floats of the weight row and of activation row 0.
struct rows {
    int64_t n;
    int     n_cols;
    size_t  x_size, y_size, y_stride;
    void *  x;     // the weight row, exactly x_size bytes (so ASan sees overreads)
    void *  y;     // n_cols activation rows
    float * xf;    // decoded weight row
    float * yf;    // decoded activation row 0
};

static void free_rows(struct rows * r) {
    free(r->x), free(r->y), free(r->xf), free(r->yf);
}

static void make_rows(const struct ref * ref, int64_t n, int n_cols, enum mode mode, uint64_t seed, struct rows * r) {
    const struct mg_type_traits_cpu * cpu  = mg_get_type_traits_cpu(ref->type);
    const enum mg_type                ytype = cpu->vec_dot_type;
    uint64_t                          rng   = seed;
    r->n = n, r->n_cols = n_cols;
    r->x_size   = mg_row_size(ref->type, n);
    r->y_size   = mg_row_size(ytype, n);
    r->y_stride = r->y_size + 16 * (size_t) (n_cols > 1);   // a gap between rows: the stride is honoured
    r->x        = malloc(r->x_size);
    r->y        = malloc(r->y_stride * (size_t) (n_cols - 1) + r->y_size);
    r->xf       = malloc((size_t) n * sizeof(float));
    r->yf       = malloc((size_t) n * sizeof(float));
    ck_assert(r->x && r->y && r->xf && r->yf);

    float * w = malloc((size_t) n * sizeof(float));
    float * a = malloc((size_t) n * sizeof(float));
    ck_assert(w && a);
    const int64_t blck = mg_blck_size(ref->type) > 1 ? mg_blck_size(ref->type) : 32;
    for (int c = 0; c < n_cols; c++) {
        char * yc = (char *) r->y + (size_t) c * r->y_stride;
        for (int64_t i = 0; i < n; i++) {
            w[i] = mg_test_rand_normal(&rng);
            a[i] = 3.0f * mg_test_rand_normal(&rng);
        }
        if (mode == EDGE) {
            for (int64_t b = 0; b < n / blck; b++) {
                const float sw = rand_scale(&rng, 12), sa = rand_scale(&rng, 6);
                for (int64_t i = b * blck; i < (b + 1) * blck; i++) {
                    w[i] = b % 3 == 1 ? 0.0f : w[i] * sw;
                    a[i] = b % 4 == 2 ? 0.0f : a[i] * sa;
                }
            }
        }
        if (c == 0) {   // one weight row for all columns
            if (mode == RAW) raw_weights(ref->type, r->x, n, &rng);
            else if (ref->type == MG_TYPE_F32) memcpy(r->x, w, (size_t) n * sizeof(float));
            else mg_get_type_traits(ref->type)->from_float(w, r->x, n);
        }
        if (mode == RAW && mg_blck_size(ytype) > 1) raw_activations(ytype, yc, n, &rng);
        else if (mode == RAW) raw_weights(ytype, yc, n, &rng);   // float rows: raw floats on both sides
        else if (ref->from_float == NULL) memcpy(yc, a, (size_t) n * sizeof(float));
        else ref->from_float(a, yc, n);
    }
    mg_get_type_traits(ref->type)->to_float(r->x, r->xf, n);
    mg_get_type_traits(ytype)->to_float(r->y, r->yf, n);
    free(w), free(a);
}

// The part of weight element e that does not scale with its code: the block
// min (Q4_1, Q5_1: x = d q + m) or minus the sub-block's min (Q2_K, Q4_K,
// Q5_K: x = d sc q - dmin m). The kernels handle the two parts apart, so the
// magnitude of the terms they add is |x - offset| + |offset| per element.
static float offset_part(enum mg_type type, const void * row, int64_t e) {
    switch (type) {
    case MG_TYPE_Q4_1: return mg_fp16_to_fp32(((const struct mg_block_q4_1 *) row)[e / 32].m);
    case MG_TYPE_Q5_1: return mg_fp16_to_fp32(((const struct mg_block_q5_1 *) row)[e / 32].m);
    case MG_TYPE_Q2_K: {
        const struct mg_block_q2_K * b = (const struct mg_block_q2_K *) row + e / 256;
        return -mg_fp16_to_fp32(b->dmin) * (float) (b->scales[e % 256 / 16] >> 4);
    }
    case MG_TYPE_Q4_K:
    case MG_TYPE_Q5_K: {
        const uint8_t * scales = type == MG_TYPE_Q4_K ? ((const struct mg_block_q4_K *) row)[e / 256].scales
                                                      : ((const struct mg_block_q5_K *) row)[e / 256].scales;
        const mg_fp16_t dmin   = type == MG_TYPE_Q4_K ? ((const struct mg_block_q4_K *) row)[e / 256].dmin
                                                      : ((const struct mg_block_q5_K *) row)[e / 256].dmin;
        uint8_t sc, m;
        mg_get_scale_min_k4((int) (e % 256 / 32), scales, &sc, &m);
        return -mg_fp16_to_fp32(dmin) * (float) m;
    }
    default: return 0.0f;
    }
}

// The sum of |terms| of the dot of weight row and activation row 0.
static double magnitude(enum mg_type type, const struct rows * r) {
    double mag = 0;
    for (int64_t i = 0; i < r->n; i++) {
        const double o = offset_part(type, r->x, i);
        mag += (fabs((double) r->xf[i] - o) + fabs(o)) * fabs((double) r->yf[i]);
    }
    return mag;
}

static uint32_t float_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

// ---------------------------------------------------------------------------
// vec_dot against the scalar reference
// ---------------------------------------------------------------------------

static void check_vec_dot(const struct ref * ref, enum mode mode, uint64_t seed) {
    const struct mg_type_traits_cpu * cpu = mg_get_type_traits_cpu(ref->type);
    size_t                            count;
    test_length(ref->type, 0, &count);
    for (size_t k = 0; k < count; k++) {
        const int64_t n = test_length(ref->type, k, &count);
        struct rows   r;
        make_rows(ref, n, 1, mode, seed + k, &r);
        float got = NAN, want = NAN;
        cpu->vec_dot(n, &got, r.x, r.y);
        ref->vec_dot(n, &want, r.x, r.y);
        const double mag   = magnitude(ref->type, &r);
        const double steps = (double) (n / mg_blck_size(ref->type));
        double       tol   = (2 * steps + 10) * 0x1p-24 * mag + 1e-30;
#if defined(MG_NEON)
        // ggml's NEON F16 dot adds in half precision (2^-11 a rounding), and
        // overflows where a partial sum passes 65504, as llama.cpp's does.
        if (ref->type == MG_TYPE_F16) {
            if (mag >= 0x1p15) {
                free_rows(&r);
                continue;
            }
            tol = (steps + 10) * 0x1p-11 * mag + 1e-30;
        }
#endif
        ck_assert_msg(isfinite(got) && fabs((double) got - (double) want) <= tol,
                      "%s mode %d n %lld: simd %.9g scalar %.9g (diff %.3g, tol %.3g, mag %.3g)",
                      mg_type_name(ref->type), (int) mode, (long long) n, got, want, fabs((double) got - (double) want),
                      tol, mag);
        free_rows(&r);
    }
}

START_TEST(test_vec_dot_gauss) {
    check_vec_dot(&REFS[_i], GAUSS, 1000 + 100 * (uint64_t) _i);
}
END_TEST

START_TEST(test_vec_dot_edge) {
    check_vec_dot(&REFS[_i], EDGE, 3000 + 100 * (uint64_t) _i);
}
END_TEST

START_TEST(test_vec_dot_raw) {
    for (uint64_t rep = 0; rep < 4; rep++) check_vec_dot(&REFS[_i], RAW, 5000 + 100 * (uint64_t) _i + 10 * rep);
}
END_TEST

// All-zero rows give exactly 0 (no stray lanes, no uninitialised accumulators).
START_TEST(test_vec_dot_zero_rows) {
    const struct ref * ref = &REFS[_i];
    const int64_t      n   = mg_blck_size(ref->type) > 1 ? 7 * mg_blck_size(ref->type) : 100;
    const struct mg_type_traits_cpu * cpu = mg_get_type_traits_cpu(ref->type);
    float * zeros = calloc((size_t) n, sizeof(float));
    void *  x     = malloc(mg_row_size(ref->type, n));
    void *  y     = malloc(mg_row_size(cpu->vec_dot_type, n));
    ck_assert(zeros && x && y);
    if (ref->type == MG_TYPE_F32) memcpy(x, zeros, (size_t) n * sizeof(float));
    else mg_get_type_traits(ref->type)->from_float(zeros, x, n);
    if (ref->from_float) ref->from_float(zeros, y, n);
    else memcpy(y, zeros, (size_t) n * sizeof(float));
    float s = NAN;
    cpu->vec_dot(n, &s, x, y);
    ck_assert_msg(s == 0.0f, "%s: %g", mg_type_name(ref->type), s);
    free(zeros), free(x), free(y);
}
END_TEST

// ---------------------------------------------------------------------------
// vec_dot_cols against vec_dot, to the bit
// ---------------------------------------------------------------------------

static void check_cols(const struct ref * ref, enum mode mode, uint64_t seed) {
    const struct mg_type_traits_cpu * cpu = mg_get_type_traits_cpu(ref->type);
    ck_assert_ptr_nonnull(cpu->vec_dot_cols);
    size_t count;
    test_length(ref->type, 0, &count);
    for (size_t k = 0; k < count; k++) {
        const int64_t n = test_length(ref->type, k, &count);
        struct rows   r;
        make_rows(ref, n, MG_VEC_DOT_MAX_COLS, mode, seed + k, &r);
        float one[MG_VEC_DOT_MAX_COLS];
        for (int c = 0; c < MG_VEC_DOT_MAX_COLS; c++) {
            cpu->vec_dot(n, &one[c], r.x, (const char *) r.y + (size_t) c * r.y_stride);
        }
        for (int nc = 1; nc <= MG_VEC_DOT_MAX_COLS; nc++) {
            float many[MG_VEC_DOT_MAX_COLS + 1];
            for (int c = 0; c <= MG_VEC_DOT_MAX_COLS; c++) many[c] = -1.0f;   // a sentinel after the last column
            cpu->vec_dot_cols(n, many, r.x, r.y, r.y_stride, nc);
            for (int c = 0; c < nc; c++) {
                ck_assert_msg(float_bits(many[c]) == float_bits(one[c]),
                              "%s mode %d n %lld, %d columns: column %d %.9g vs %.9g", mg_type_name(ref->type),
                              (int) mode, (long long) n, nc, c, many[c], one[c]);
            }
            ck_assert_msg(many[nc] == -1.0f, "%s: %d columns wrote s[%d]", mg_type_name(ref->type), nc, nc);
        }
        free_rows(&r);
    }
}

START_TEST(test_cols_bit_identical) {
    check_cols(&REFS[_i], GAUSS, 7000 + 100 * (uint64_t) _i);
    check_cols(&REFS[_i], EDGE, 8000 + 100 * (uint64_t) _i);
    check_cols(&REFS[_i], RAW, 9000 + 100 * (uint64_t) _i);
}
END_TEST

// ---------------------------------------------------------------------------
// vec_dot_tile against vec_dot, to the bit
// ---------------------------------------------------------------------------

// MG_VEC_DOT_MAX_ROWS weight rows, x_stride bytes apart (packed: one after
// another; otherwise with a gap), and MG_VEC_DOT_MAX_COLS activation rows.
struct tile_rows {
    int64_t n;
    size_t  x_stride, y_stride;
    char *  x;   // exactly the bytes of the rows and the gaps between them (ASan sees overreads)
    char *  y;
};

static void make_rows_of(const struct ref * ref, int64_t n, int n_rows, enum mode mode, uint64_t seed, bool packed,
                         struct tile_rows * t) {
    const size_t x_size = mg_row_size(ref->type, n);
    t->n                = n;
    t->y                = NULL;
    t->x_stride         = x_size + (packed ? 0 : 48);
    t->x                = malloc(t->x_stride * (size_t) (n_rows - 1) + x_size);
    ck_assert_ptr_nonnull(t->x);
    memset(t->x, 0x5a, t->x_stride * (size_t) (n_rows - 1) + x_size);
    for (int r = 0; r < n_rows; r++) {   // each weight row from its own seed
        struct rows rows;
        make_rows(ref, n, MG_VEC_DOT_MAX_COLS, mode, seed + 97 * (uint64_t) r, &rows);
        memcpy(t->x + (size_t) r * t->x_stride, rows.x, x_size);
        if (r == 0) {   // the activations of the first
            const size_t y_bytes = rows.y_stride * (MG_VEC_DOT_MAX_COLS - 1) + rows.y_size;
            t->y_stride          = rows.y_stride;
            t->y                 = malloc(y_bytes);
            ck_assert_ptr_nonnull(t->y);
            memcpy(t->y, rows.y, y_bytes);
        }
        free_rows(&rows);
    }
}

static void make_tile_rows(const struct ref * ref, int64_t n, enum mode mode, uint64_t seed, bool packed,
                           struct tile_rows * t) {
    make_rows_of(ref, n, MG_VEC_DOT_MAX_ROWS, mode, seed, packed, t);
}

// What a tile or panel call computed, for the messages.
struct tile_shape {
    enum mg_type type;
    enum mode    mode;
    int64_t      n;
    int          nr, nc;
    const char * what;
};

// s (cols columns of s_stride floats) against one (column c's vec_dot results
// at one + c * one_stride): the tile's outputs to the bit, and the sentinels
// (-1) everywhere else untouched.
static void check_tile_outputs(const struct tile_shape * t, const float * s, int s_stride, int cols,
                               const float * one, int one_stride) {
    for (int c = 0; c < cols; c++) {
        for (int r = 0; r < s_stride; r++) {
            const float got = s[c * s_stride + r];
            if (c < t->nc && r < t->nr) {
                const float want = one[c * one_stride + r];
                ck_assert_msg(float_bits(got) == float_bits(want),
                              "%s mode %d n %lld, %d x %d %s: row %d column %d is %.9g, vec_dot %.9g",
                              mg_type_name(t->type), (int) t->mode, (long long) t->n, t->nr, t->nc, t->what, r, c,
                              got, want);
            } else {
                ck_assert_msg(got == -1.0f, "%s: a %d x %d %s wrote s[%d]", mg_type_name(t->type), t->nr, t->nc,
                              t->what, c * s_stride + r);
            }
        }
    }
}

// Every tile shape against vec_dot of each row and column: the results to the
// bit, and nothing written outside them (s_stride leaves a gap after each column).
static void check_tile(const struct ref * ref, enum mode mode, uint64_t seed, bool packed) {
    const struct mg_type_traits_cpu * cpu = mg_get_type_traits_cpu(ref->type);
    ck_assert_ptr_nonnull(cpu->vec_dot_tile);
    enum { ROWS = MG_VEC_DOT_MAX_ROWS, COLS = MG_VEC_DOT_MAX_COLS, S_STRIDE = ROWS + 3 };
    size_t count;
    test_length(ref->type, 0, &count);
    for (size_t k = 0; k < count; k++) {
        const int64_t    n = test_length(ref->type, k, &count);
        struct tile_rows t;
        make_tile_rows(ref, n, mode, seed + 1000 * k, packed, &t);
        float one[COLS][ROWS];
        for (int c = 0; c < COLS; c++) {
            for (int r = 0; r < ROWS; r++) {
                cpu->vec_dot(n, &one[c][r], t.x + (size_t) r * t.x_stride, t.y + (size_t) c * t.y_stride);
            }
        }
        for (int nr = 1; nr <= ROWS; nr++) {
            for (int nc = 1; nc <= COLS; nc++) {
                float s[COLS * S_STRIDE];
                for (int i = 0; i < COLS * S_STRIDE; i++) s[i] = -1.0f;   // sentinels
                cpu->vec_dot_tile(n, s, S_STRIDE, t.x, t.x_stride, nr, t.y, t.y_stride, nc);
                const struct tile_shape shape = {ref->type, mode, n, nr, nc, packed ? "tile (packed rows)" : "tile"};
                check_tile_outputs(&shape, s, S_STRIDE, COLS, &one[0][0], ROWS);
            }
        }
        free(t.x), free(t.y);
    }
}

START_TEST(test_tile_bit_identical) {
    check_tile(&REFS[_i], GAUSS, 11000 + 100 * (uint64_t) _i, false);
    check_tile(&REFS[_i], EDGE, 12000 + 100 * (uint64_t) _i, true);
    check_tile(&REFS[_i], RAW, 13000 + 100 * (uint64_t) _i, false);
    check_tile(&REFS[_i], RAW, 14000 + 100 * (uint64_t) _i, true);
}
END_TEST

// A panel (vec.h: many tiles in one call) against vec_dot, to the bit: row
// counts that end in a whole tile, in part of one, and the largest panel.
static void check_panel(const struct ref * ref, enum mode mode, uint64_t seed, bool packed) {
    const struct mg_type_traits_cpu * cpu = mg_get_type_traits_cpu(ref->type);
    if (cpu->vec_dot_panel == NULL) return;   // this type's mul_mat takes tiles only
    enum { ROWS = MG_VEC_DOT_PANEL_ROWS, COLS = MG_VEC_DOT_MAX_COLS, S_STRIDE = ROWS + 3 };
    static float one[COLS][ROWS], s[COLS * S_STRIDE];
    const int    row_counts[] = {9, 43, 64, ROWS};
    size_t       count;
    test_length(ref->type, 0, &count);
    for (size_t k = 0; k < count; k++) {
        const int64_t    n = test_length(ref->type, k, &count);
        struct tile_rows t;
        make_rows_of(ref, n, ROWS, mode, seed + 1000 * k, packed, &t);
        for (int c = 0; c < COLS; c++) {
            for (int r = 0; r < ROWS; r++) {
                cpu->vec_dot(n, &one[c][r], t.x + (size_t) r * t.x_stride, t.y + (size_t) c * t.y_stride);
            }
        }
        for (size_t i = 0; i < sizeof(row_counts) / sizeof(row_counts[0]); i++) {
            const int nr = row_counts[i];
            for (int nc = 1; nc <= COLS; nc++) {
                for (int j = 0; j < COLS * S_STRIDE; j++) s[j] = -1.0f;   // sentinels
                cpu->vec_dot_panel(n, s, S_STRIDE, t.x, t.x_stride, nr, t.y, t.y_stride, nc);
                const struct tile_shape shape = {ref->type, mode, n, nr, nc, "panel"};
                check_tile_outputs(&shape, s, S_STRIDE, COLS, &one[0][0], ROWS);
            }
        }
        free(t.x), free(t.y);
    }
}

START_TEST(test_panel_bit_identical) {
    check_panel(&REFS[_i], GAUSS, 15000 + 100 * (uint64_t) _i, false);
    check_panel(&REFS[_i], RAW, 16000 + 100 * (uint64_t) _i, true);
}
END_TEST

// The SIMD build has panels for the types whose tile is lane_panel_32.
START_TEST(test_panel_wiring) {
#if defined(MG_SIMD)
    const enum mg_type with_panel[] = {MG_TYPE_Q8_0, MG_TYPE_Q4_1, MG_TYPE_Q5_0, MG_TYPE_Q5_1};
    for (size_t i = 0; i < sizeof(with_panel) / sizeof(with_panel[0]); i++) {
        ck_assert_msg(mg_get_type_traits_cpu(with_panel[i])->vec_dot_panel != NULL, "%s has no panel",
                      mg_type_name(with_panel[i]));
    }
#else
    for (size_t i = 0; i < N_REFS; i++) ck_assert_ptr_null(mg_get_type_traits_cpu(REFS[i].type)->vec_dot_panel);
#endif
}
END_TEST

// ---------------------------------------------------------------------------
// The table
// ---------------------------------------------------------------------------

// Each weight type's entry uses the SIMD kernels in a SIMD build and the
// scalar ones otherwise, and keeps its vec_dot_type.
START_TEST(test_table_wiring) {
    for (size_t i = 0; i < N_REFS; i++) {
        const struct mg_type_traits_cpu * cpu = mg_get_type_traits_cpu(REFS[i].type);
        ck_assert_ptr_nonnull(cpu);
        ck_assert_ptr_nonnull(cpu->vec_dot_cols);
        ck_assert_ptr_nonnull(cpu->vec_dot_tile);
#if defined(MG_SIMD)
        ck_assert_msg(cpu->vec_dot != REFS[i].vec_dot, "%s: scalar vec_dot in a SIMD build",
                      mg_type_name(REFS[i].type));
        ck_assert_msg(REFS[i].from_float == NULL || cpu->from_float != REFS[i].from_float, "%s: scalar from_float",
                      mg_type_name(REFS[i].type));
#elif defined(MG_NEON)
        // vec_neon.c has twins for these; Q4_0, IQ4_NL, Q4_K and Q5_K matrices
        // are repacked on NEON (repack.c), so their vec_dot stays the scalar one.
        const enum mg_type t = REFS[i].type;
        const bool twin = t == MG_TYPE_F32 || t == MG_TYPE_F16 || t == MG_TYPE_Q8_0 || t == MG_TYPE_Q4_1 ||
                          t == MG_TYPE_Q5_0 || t == MG_TYPE_Q5_1 || t == MG_TYPE_Q2_K || t == MG_TYPE_Q3_K ||
                          t == MG_TYPE_Q6_K;
        ck_assert_msg((cpu->vec_dot != REFS[i].vec_dot) == twin, "%s: NEON twin", mg_type_name(t));
        ck_assert_msg(REFS[i].from_float == NULL || t == MG_TYPE_F16 || t == MG_TYPE_BF16 ||
                          cpu->from_float != REFS[i].from_float,
                      "%s: the NEON activation converter", mg_type_name(t));
#else
        ck_assert(cpu->vec_dot == REFS[i].vec_dot);
        ck_assert(cpu->from_float == REFS[i].from_float);
#endif
    }
    ck_assert_int_eq(mg_get_type_traits_cpu(MG_TYPE_Q4_1)->vec_dot_type, MG_TYPE_Q8_1);
    ck_assert_int_eq(mg_get_type_traits_cpu(MG_TYPE_IQ4_NL)->vec_dot_type, MG_TYPE_Q8_0);
    ck_assert_int_eq(mg_get_type_traits_cpu(MG_TYPE_Q3_K)->vec_dot_type, MG_TYPE_Q8_K);
}
END_TEST

// ---------------------------------------------------------------------------
// Activation converters: to the bit
// ---------------------------------------------------------------------------

// The table's converter for a weight type against the scalar one, on n floats.
static void check_converter(enum mg_type weight_type, mg_from_float_fn scalar, const float * x, int64_t n,
                            const char * what) {
    const struct mg_type_traits_cpu * cpu  = mg_get_type_traits_cpu(weight_type);
    const size_t                      size = mg_row_size(cpu->vec_dot_type, n);
    uint8_t *                         got  = malloc(size);
    uint8_t *                         want = malloc(size);
    ck_assert(got && want);
    memset(got, 0xa5, size);
    memset(want, 0xa5, size);
    cpu->from_float(x, got, n);
    scalar(x, want, n);
    for (size_t i = 0; i < size; i++) {
        ck_assert_msg(got[i] == want[i], "%s -> %s (%s, n %lld): byte %zu is %02x, want %02x",
                      mg_type_name(weight_type), mg_type_name(cpu->vec_dot_type), what, (long long) n, i, got[i],
                      want[i]);
    }
    free(got), free(want);
}

// Rows of n floats: Gaussian at several scales (amax from 1e-30 up: below
// 127/FLT_MAX the x86 rule's 127/amax overflows and no rule means anything).
static void fill_gauss(float * x, int64_t n, uint64_t * rng, float scale) {
    for (int64_t i = 0; i < n; i++) x[i] = mg_test_rand_normal(rng) * scale;
}

static const float SCALES[] = {1e-30f, 1e-6f, 0.01f, 1.0f, 3.0f, 1000.0f, 1e20f};
#define N_SCALES (sizeof(SCALES) / sizeof(SCALES[0]))

START_TEST(test_fp16_row) {
    float    x[1000];
    uint64_t rng = 11;
    const int64_t lengths[] = {1, 7, 8, 9, 33, 1000};
    for (size_t s = 0; s < N_SCALES; s++) {
        for (size_t k = 0; k < 6; k++) {
            fill_gauss(x, lengths[k], &rng, SCALES[s] * 1e-3f);   // into the half range, subnormal halves included
            check_converter(MG_TYPE_F16, mg_fp32_to_fp16_row, x, lengths[k], "gauss");
        }
    }
    // Ties and edges: 1 + 2^-11 and 1 + 3 * 2^-11 are halfway between halves; 65504 is the largest half,
    // 65520 the first float that rounds to inf; 2^-25 halfway to the smallest subnormal; the default NaN.
    const float edge[] = {1.0f + 0x1p-11f, 1.0f + 0x3p-11f, -1.0f - 0x1p-11f, 65504.0f, 65519.99f, 65520.0f, -65520.0f,
                          0x1p-24f, 0x1p-25f, 0x3p-25f, 0x1p-26f, 0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN,
                          5.96e-8f, 6.1e-5f, 1e-40f, 3.4e38f};
    const int64_t ne = (int64_t) (sizeof(edge) / sizeof(edge[0]));
    for (int64_t off = 0; off < ne; off++) {   // every value at every lane position
        for (int64_t i = 0; i < ne; i++) x[i] = edge[(i + off) % ne];
        check_converter(MG_TYPE_F16, mg_fp32_to_fp16_row, x, ne, "edge");
    }
}
END_TEST

#if defined(MG_SIMD)
// F16 -> F32, 8 lanes at a time (flash attention's value rows): every one of
// the 65536 halves, at every lane position and in the scalar tail, gives the
// bits of mg_fp16_to_fp32.
START_TEST(test_fp16_to_fp32_row) {
    static mg_fp16_t h[65536 + 7];
    static float     y[65536 + 7];
    for (int off = 0; off < 8; off++) {
        const int64_t n = 65536 - off;
        for (int64_t i = 0; i < n; i++) h[i] = (mg_fp16_t) (i + off);
        mg_fp16_to_fp32_row_simd(h, y, n);
        for (int64_t i = 0; i < n; i++) {
            const float want = mg_fp16_to_fp32(h[i]);
            uint32_t a, b;
            memcpy(&a, &y[i], 4);
            memcpy(&b, &want, 4);
            ck_assert_msg(a == b, "half 0x%04x: 0x%08x, mg_fp16_to_fp32 gives 0x%08x", h[i], a, b);
        }
    }
}
END_TEST
#endif

START_TEST(test_bf16_row) {
    uint64_t rng = 12;
    float    x[1003];
    for (int rep = 0; rep < 200; rep++) {   // every bit pattern is fair game: NaN payloads, subnormals, ties
        for (int i = 0; i < 1003; i++) {
            const uint32_t u = (uint32_t) mg_test_rand_u64(&rng);
            // half of them ties or near-ties: low 16 bits 0x8000 or 0x7fff
            const uint32_t v = (i & 1) ? u : (u & 0xffff0000u) | ((u & 2) ? 0x8000u : 0x7fffu);
            memcpy(&x[i], &v, sizeof(v));
        }
        check_converter(MG_TYPE_BF16, mg_fp32_to_bf16_row, x, 1 + rep * 5, "bits");
    }
}
END_TEST

#if defined(MG_NEON)
// ggml's ARM rules, written out here as the references of the NEON converters
// (arch/arm/quants.c): Q8_0 and Q8_1 with d = amax / 127, id = 1 / d, codes
// x * id rounded to nearest even (vcvtnq_s32_f32), Q8_1's s = d * sum in
// float; Q8_K as quantize_row_q8_K_ref compiled there, each code the exact
// product iscale * x (exact in double) rounded to nearest even.
static float neon_rule_block(const float * x, int8_t * qs) {
    float amax = 0.0f;
    for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
    const float d  = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < 32; j++) qs[j] = (int8_t) nearbyintf(x[j] * id);
    return d;
}

static void neon_rule_q8_0(const float * x, void * vy, int64_t n) {
    struct mg_block_q8_0 * y = vy;
    for (int64_t b = 0; b < n / 32; b++) y[b].d = mg_fp32_to_fp16(neon_rule_block(x + 32 * b, y[b].qs));
}

static void neon_rule_q8_1(const float * x, void * vy, int64_t n) {
    struct mg_block_q8_1 * y = vy;
    for (int64_t b = 0; b < n / 32; b++) {
        const float d   = neon_rule_block(x + 32 * b, y[b].qs);
        int         sum = 0;
        for (int j = 0; j < 32; j++) sum += y[b].qs[j];
        y[b].d = mg_fp32_to_fp16(d);
        y[b].s = mg_fp32_to_fp16(d * (float) sum);
    }
}

static void neon_rule_q8_K(const float * x, void * vy, int64_t n) {
    struct mg_block_q8_K * y = vy;
    for (int64_t b = 0; b < n / 256; b++, x += 256) {
        float max = 0.0f, amax = 0.0f;
        for (int j = 0; j < 256; j++) {
            if (fabsf(x[j]) > amax) amax = fabsf(x[j]), max = x[j];
        }
        memset(&y[b], 0, sizeof(y[b]));
        if (amax == 0.0f) continue;
        const float iscale = -127.f / max;
        for (int j = 0; j < 256; j++) {
            const double q = nearbyint((double) iscale * (double) x[j]);
            y[b].qs[j]     = (int8_t) (q < 127 ? q : 127);
            y[b].bsums[j / 16] += y[b].qs[j];
        }
        y[b].d = 1 / iscale;
    }
}
#define REF_Q8_0 neon_rule_q8_0
#define REF_Q8_1 neon_rule_q8_1
#define REF_Q8_K neon_rule_q8_K
#else
#define REF_Q8_0 mg_quantize_row_q8_0
#define REF_Q8_1 mg_quantize_row_q8_1
#define REF_Q8_K mg_quantize_row_q8_K
#endif

// Q8_0 and Q8_1 by the x86 rule (NEON: ggml's ARM rule).
static void check_q8_0_and_q8_1(const float * x, int64_t n, const char * what) {
    check_converter(MG_TYPE_Q8_0, REF_Q8_0, x, n, what);
    check_converter(MG_TYPE_Q4_1, REF_Q8_1, x, n, what);
}

START_TEST(test_q8_0_q8_1_rows) {
    uint64_t rng = 13;
    float    x[33 * 32];
    for (size_t s = 0; s < N_SCALES; s++) {
        for (int nb = 1; nb <= 33; nb += 4) {
            fill_gauss(x, 32 * nb, &rng, SCALES[s]);
            if (nb > 1) memset(x + 32, 0, 32 * sizeof(float));   // a zero block
            check_q8_0_and_q8_1(x, 32 * nb, "gauss");
        }
    }
}
END_TEST

// With amax = 127 the inverse scale is 1, and k + 0.5 is an exact tie: to even.
// Scaled by powers of two they stay ties.
START_TEST(test_q8_0_q8_1_ties) {
    float x[64];
    for (int p = -10; p <= 10; p += 5) {
        for (int j = 0; j < 64; j++) x[j] = ldexpf((float) (j % 32 * 4 - 63) + 0.5f, p);
        x[0] = ldexpf(127.0f, p), x[33] = ldexpf(-127.0f, p);
        check_q8_0_and_q8_1(x, 64, "ties");
    }
}
END_TEST

START_TEST(test_q8_K_rows) {
    uint64_t rng = 14;
    float    x[9 * 256];
    for (size_t s = 0; s < N_SCALES; s++) {
        for (int nb = 1; nb <= 9; nb += 2) {
            fill_gauss(x, 256 * nb, &rng, SCALES[s]);
            if (nb > 1) memset(x + 256, 0, 256 * sizeof(float));   // a zero block: d = 0, bsums 0
            check_converter(MG_TYPE_Q4_K, REF_Q8_K, x, 256 * nb, "gauss");
        }
    }
}
END_TEST

// The scale comes from the first element of largest magnitude; with +m and -m
// both present the first one decides the sign of d. Ties to even in both
// directions: max = -127 makes the inverse scale +1, max = +127 makes it -1.
START_TEST(test_q8_K_sign_and_ties) {
    float x[4 * 256];
    for (int b = 0; b < 4; b++) {
        float * blk = x + 256 * b;
        for (int j = 0; j < 256; j++) blk[j] = (float) (j % 254 - 127) + 0.5f;   // -126.5 .. 126.5
        const float m = b % 2 ? 127.0f : -127.0f;
        blk[3 + 40 * b] = m;      // the first maximum
        blk[6 + 40 * b] = -m;     // a later one of the other sign, among the same 8 elements
        blk[200]        = -m;     // and one further on
    }
    check_converter(MG_TYPE_Q4_K, REF_Q8_K, x, 4 * 256, "ties");
    struct mg_block_q8_K y[4];
    mg_get_type_traits_cpu(MG_TYPE_Q4_K)->from_float(x, y, 4 * 256);
    ck_assert_float_eq(y[0].d, 1.0f);     // max -127: iscale 1
    ck_assert_float_eq(y[1].d, -1.0f);    // max +127: iscale -1
    ck_assert_int_eq(y[0].qs[0], -126);   // -126.5 -> -126 (even)
    ck_assert_int_eq(y[1].qs[0], 126);    // -126.5 * -1 = 126.5 -> 126
}
END_TEST

// A single non-zero element per block, anywhere: the search for the first
// maximum must look at every position.
START_TEST(test_q8_K_single_element) {
    float x[256];
    for (int pos = 0; pos < 256; pos += 7) {
        memset(x, 0, sizeof(x));
        x[pos] = pos % 2 ? 0.37f : -1e5f;
        check_converter(MG_TYPE_Q4_K, REF_Q8_K, x, 256, "single");
    }
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s  = suite_create("vec_simd");
    TCase * tc = tcase_create("table");
    tcase_add_test(tc, test_table_wiring);
    suite_add_tcase(s, tc);

    tc = tcase_create("vec_dot");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_vec_dot_gauss, 0, (int) N_REFS);
    tcase_add_loop_test(tc, test_vec_dot_edge, 0, (int) N_REFS);
    tcase_add_loop_test(tc, test_vec_dot_raw, 0, (int) N_REFS);
    tcase_add_loop_test(tc, test_vec_dot_zero_rows, 0, (int) N_REFS);
    suite_add_tcase(s, tc);

    tc = tcase_create("vec_dot_cols");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_cols_bit_identical, 0, (int) N_REFS);
    suite_add_tcase(s, tc);

    tc = tcase_create("vec_dot_tile");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, test_tile_bit_identical, 0, (int) N_REFS);
    tcase_add_loop_test(tc, test_panel_bit_identical, 0, (int) N_REFS);
    tcase_add_test(tc, test_panel_wiring);
    suite_add_tcase(s, tc);

    tc = tcase_create("converters");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_fp16_row);
#if defined(MG_SIMD)
    tcase_add_test(tc, test_fp16_to_fp32_row);
#endif
    tcase_add_test(tc, test_bf16_row);
    tcase_add_test(tc, test_q8_0_q8_1_rows);
    tcase_add_test(tc, test_q8_0_q8_1_ties);
    tcase_add_test(tc, test_q8_K_rows);
    tcase_add_test(tc, test_q8_K_sign_and_ties);
    tcase_add_test(tc, test_q8_K_single_element);
    suite_add_tcase(s, tc);
    return s;
}
