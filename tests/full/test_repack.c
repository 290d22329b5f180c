// test_repack.c - Q4_0, Q4_K and Q2_K weights repacked into groups of 8
// interleaved rows (full/repack.c). For Q4_0 that changes where the bytes are,
// never a result. For Q4_K and Q2_K the repacked tiles also take the float
// order of ggml's repacked kernels (the gemv's below 4 columns, the gemm's
// for whole groups of 4), which is not vec_dot's: they are checked against
// the scalar references of those orders (repack.c, mg_gemv_* / mg_gemm_*).
//
// - the layout: repacking and unpacking give back the original blocks, and a
//   group holds the bytes where repack.c's drawing puts them;
// - which tensors qualify (rows % 8 == 0, Q4_0, Q4_K or Q2_K, 2-D or a 3-D
//   stack of experts), and which do not;
// - the repacked tile (SIMD, or the reference in the scalar build) against
//   the reference (mg_repack_tile_ref), to the bit, for 1 to 4 columns;
// - mul_mat with the weight's repacked copy against the reference tiles
//   (8 rows x the 4-column groups from column 0), to the bit, for 1..24 and
//   up to 70 columns and 1..3 threads, on several shapes; a matrix that does
//   not qualify against mul_mat as it was;
// - a model, in Q4_0, Q4_K and Q2_K: the loader repacks its matrices (unless
//   --no-repack or the scalar build); the logits of Q4_0 and of Q4_K below
//   4 tokens (the gemv's order is vec_dot's there) stay bit-identical.
//
// On aarch64 (MG_NEON) the loader keeps the file's layout and mul_mat takes
// the orders of ggml's NEON repacked kernels for more types (repack.c): the
// layout is still checked (its functions are plain C), which tensors qualify
// and mul_mat against the reference tiles are checked at that level, and the
// x86 tile kernels' tests are left out (NEON's tile is its own reference).
#define _POSIX_C_SOURCE 200809L   // setenv, mkdtemp
#include "harness.h"
#include "mg.h"
#include "repack.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// A matrix of random N(0,1) weights in `type`, rows x n.
static struct mg_tensor * random_matrix(struct mg_context * ctx, enum mg_type type, int64_t n, int64_t rows,
                                        uint64_t * rng) {
    struct mg_tensor * w  = mg_new_tensor_2d(ctx, type, n, rows);
    float *            wf = malloc(sizeof(float) * (size_t) (n * rows));
    ck_assert_ptr_nonnull(wf);
    for (int64_t i = 0; i < n * rows; i++) wf[i] = mg_test_rand_normal(rng);
    mg_get_type_traits(type)->from_float(wf, w->data, n * rows);
    free(wf);
    return w;
}

static struct mg_tensor * random_q4_0(struct mg_context * ctx, int64_t n, int64_t rows, uint64_t * rng) {
    return random_matrix(ctx, MG_TYPE_Q4_0, n, rows, rng);
}

// The copy mul_mat reads, made the way the loader makes it (on NEON the
// file's layout: the loader copies, the kernels take ggml's NEON orders).
static void * repacked_copy(const struct mg_tensor * w) {
    ck_assert(mg_repack_fits(w) || (w->type == MG_TYPE_Q2_K && mg_repack_q2_K_fits(w)));
    void * copy = malloc(mg_nbytes(w));
    ck_assert_ptr_nonnull(copy);
    mg_repack(copy, w);
    return copy;
}

// The x86 layout of groups of 8 rows, made by the plain C functions every
// build has (so the layout is checked on NEON too, where the loader does not
// use it).
static void * grouped_copy(const struct mg_tensor * w) {
    void * copy = malloc(mg_nbytes(w));
    ck_assert_ptr_nonnull(copy);
    if (w->type == MG_TYPE_Q4_K) mg_repack_q4_K(copy, w->data, w->ne[0], w->ne[1]);
    else if (w->type == MG_TYPE_Q2_K) mg_repack_q2_K(copy, w->data, w->ne[0], w->ne[1]);
    else mg_repack_q4_0(copy, w->data, w->ne[0], w->ne[1]);
    return copy;
}

static void check_round_trip(enum mg_type type, int64_t n, int64_t rows, uint64_t * rng) {
    struct mg_context * ctx  = mg_init((struct mg_init_params) {.mem_size = 4u << 20});
    struct mg_tensor *  w    = random_matrix(ctx, type, n, rows, rng);
    void *              copy = grouped_copy(w);
    void *              back = malloc(mg_nbytes(w));
    ck_assert_ptr_nonnull(back);
    if (rows > 8) ck_assert(memcmp(copy, w->data, mg_nbytes(w)) != 0);   // it did move something
    if (type == MG_TYPE_Q4_K) mg_unpack_q4_K(back, copy, n, rows);
    else if (type == MG_TYPE_Q2_K) mg_unpack_q2_K(back, copy, n, rows);
    else mg_unpack_q4_0(back, copy, n, rows);
    ck_assert_msg(memcmp(back, w->data, mg_nbytes(w)) == 0, "round trip of %s {%lld, %lld}", mg_type_name(type),
                  (long long) n, (long long) rows);
    free(back);
    free(copy);
    mg_free(ctx);
}

START_TEST(test_round_trip) {
    const int64_t shapes[][2] = {{32, 8}, {64, 16}, {256, 48}, {768, 2432}, {2432, 768}};
    uint64_t      rng         = 11;
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
        check_round_trip(MG_TYPE_Q4_0, shapes[i][0], shapes[i][1], &rng);
    }
    const int64_t k_shapes[][2] = {{256, 8}, {512, 16}, {768, 2048}, {2048, 768}};
    for (size_t i = 0; i < sizeof(k_shapes) / sizeof(k_shapes[0]); i++) {
        check_round_trip(MG_TYPE_Q4_K, k_shapes[i][0], k_shapes[i][1], &rng);
        check_round_trip(MG_TYPE_Q2_K, k_shapes[i][0], k_shapes[i][1], &rng);
    }
}
END_TEST

// Rows 8..15, block 1 of a {64, 16} matrix: the second group of the second
// tile, at byte (2 + 1) * 144. Row r's scale at 2r, its code bytes 4j..4j+3
// at 16 + 32j + 4r.
START_TEST(test_layout) {
    struct mg_context *          ctx  = mg_init((struct mg_init_params) {.mem_size = 1u << 20});
    uint64_t                     rng  = 12;
    struct mg_tensor *           w    = random_q4_0(ctx, 64, 16, &rng);
    uint8_t *                    copy = grouped_copy(w);
    const struct mg_block_q4_0 * x    = w->data;
    const uint8_t *              g    = copy + 3 * 144;
    for (int r = 0; r < 8; r++) {
        const struct mg_block_q4_0 * blk = &x[(8 + r) * 2 + 1];
        ck_assert(memcmp(g + 2 * r, &blk->d, 2) == 0);
        for (int j = 0; j < 4; j++) ck_assert(memcmp(g + 16 + 32 * j + 4 * r, blk->qs + 4 * j, 4) == 0);
    }
    free(copy);
    mg_free(ctx);
}
END_TEST

// Row r's fields of a K-quant super-block, where the drawings in repack.c put
// them in its group g: d at 2r, dmin at 16 + 2r, scale bytes 4t..4t+3 at
// 32 + 32t + 4r, code bytes 4j..4j+3 at qs_at + 32j + 4r.
static void check_k_group_row(const uint8_t * g, int r, const void * d, const void * dmin, const uint8_t * scales,
                              int scale_words, const uint8_t * qs, int qs_at, int qs_words) {
    ck_assert(memcmp(g + 2 * r, d, 2) == 0);
    ck_assert(memcmp(g + 16 + 2 * r, dmin, 2) == 0);
    for (int t = 0; t < scale_words; t++) ck_assert(memcmp(g + 32 + 32 * t + 4 * r, scales + 4 * t, 4) == 0);
    for (int j = 0; j < qs_words; j++) ck_assert(memcmp(g + qs_at + 32 * j + 4 * r, qs + 4 * j, 4) == 0);
}

// Rows 8..15, super-block 1 of a {512, 16} Q4_K or Q2_K matrix: the second
// group of the second tile, group 3 (at byte 3 * 1152 for Q4_K, 3 * 672 for
// Q2_K). Q4_K: 3 words of scales, 32 of codes from byte 128; Q2_K: 4 and 16
// from byte 160.
START_TEST(test_layout_k) {
    const struct {
        enum mg_type type;
        uint64_t     seed;
        size_t       group_bytes;
    } cases[] = {{MG_TYPE_Q4_K, 14, 1152}, {MG_TYPE_Q2_K, 15, 672}};
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        struct mg_context * ctx  = mg_init((struct mg_init_params) {.mem_size = 1u << 20});
        uint64_t            rng  = cases[k].seed;
        struct mg_tensor *  w    = random_matrix(ctx, cases[k].type, 512, 16, &rng);
        uint8_t *           copy = grouped_copy(w);
        const uint8_t *     g    = copy + 3 * cases[k].group_bytes;
        for (int r = 0; r < 8; r++) {
            const int b = (8 + r) * 2 + 1;   // row 8 + r, super-block 1
            if (cases[k].type == MG_TYPE_Q4_K) {
                const struct mg_block_q4_K * blk = (const struct mg_block_q4_K *) w->data + b;
                check_k_group_row(g, r, &blk->d, &blk->dmin, blk->scales, 3, blk->qs, 128, 32);
            } else {
                const struct mg_block_q2_K * blk = (const struct mg_block_q2_K *) w->data + b;
                check_k_group_row(g, r, &blk->d, &blk->dmin, blk->scales, 4, blk->qs, 160, 16);
            }
        }
        free(copy);
        mg_free(ctx);
    }
}
END_TEST

START_TEST(test_fits) {
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 1u << 20});
    ck_assert(mg_repack_q4_0_fits(mg_new_tensor_2d(ctx, MG_TYPE_Q4_0, 64, 16)));
    ck_assert(!mg_repack_q4_0_fits(mg_new_tensor_2d(ctx, MG_TYPE_Q4_0, 64, 45)));   // rows not a multiple of 8
    ck_assert(!mg_repack_q4_0_fits(mg_new_tensor_2d(ctx, MG_TYPE_Q4_0, 64, 4)));
    ck_assert(!mg_repack_q4_0_fits(mg_new_tensor_2d(ctx, MG_TYPE_Q8_0, 64, 16)));   // not Q4_0
    ck_assert(mg_repack_q4_0_fits(mg_new_tensor_3d(ctx, MG_TYPE_Q4_0, 64, 16, 2)));    // a stack of experts
    ck_assert(!mg_repack_q4_0_fits(mg_new_tensor_3d(ctx, MG_TYPE_Q4_0, 64, 12, 2)));   // a group would cross experts
    ck_assert(!mg_repack_q4_0_fits(mg_new_tensor_4d(ctx, MG_TYPE_Q4_0, 64, 16, 2, 2)));   // 4-D
    struct mg_tensor * deep = mg_new_tensor_3d(ctx, MG_TYPE_Q4_0, 64, 24, 2);
    ck_assert(!mg_repack_q4_0_fits(mg_view_3d(ctx, deep, 64, 16, 2, deep->nb[1], deep->nb[2], 0)));   // experts with gaps
    struct mg_tensor * wide = mg_new_tensor_2d(ctx, MG_TYPE_Q4_0, 128, 16);
    ck_assert(!mg_repack_q4_0_fits(mg_view_2d(ctx, wide, 64, 16, wide->nb[1], 0)));   // rows with gaps
    ck_assert(mg_repack_q4_K_fits(mg_new_tensor_2d(ctx, MG_TYPE_Q4_K, 768, 16)));
    ck_assert(!mg_repack_q4_K_fits(mg_new_tensor_2d(ctx, MG_TYPE_Q4_0, 256, 16)));
    ck_assert(mg_repack_q2_K_fits(mg_new_tensor_2d(ctx, MG_TYPE_Q2_K, 256, 128)));
    ck_assert(!mg_repack_q2_K_fits(mg_new_tensor_2d(ctx, MG_TYPE_Q4_K, 256, 16)));
    mg_free(ctx);
}
END_TEST

// Which tensors the loader repacks at this build's level: llama.cpp's choice
// for the same target (ggml_repack_get_optimal_repack_type).
START_TEST(test_fits_at_level) {
    struct mg_context * ctx    = mg_init((struct mg_init_params) {.mem_size = 1u << 20});
    struct mg_tensor *  wide_k = mg_new_tensor_2d(ctx, MG_TYPE_Q4_K, 512, 16);
    ck_assert(mg_repack_fits(mg_new_tensor_2d(ctx, MG_TYPE_Q4_K, 256, 8)));
    ck_assert(mg_repack_fits(mg_new_tensor_2d(ctx, MG_TYPE_Q4_0, 64, 16)));
    ck_assert(!mg_repack_fits(mg_new_tensor_2d(ctx, MG_TYPE_Q4_K, 256, 12)));       // rows not a multiple of 8
    ck_assert(mg_repack_fits(mg_new_tensor_3d(ctx, MG_TYPE_Q4_K, 256, 16, 2)));    // a stack of experts (MUL_MAT_ID)
    ck_assert(!mg_repack_fits(mg_new_tensor_3d(ctx, MG_TYPE_Q4_K, 256, 4, 4)));    // a group would cross experts
    ck_assert(!mg_repack_fits(mg_view_2d(ctx, wide_k, 256, 16, wide_k->nb[1], 0)));   // rows with gaps
    ck_assert(!mg_repack_fits(mg_new_tensor_2d(ctx, MG_TYPE_Q2_K, 256, 20)));      // rows not a multiple of 8
    ck_assert(!mg_repack_fits(mg_new_tensor_2d(ctx, MG_TYPE_Q3_K, 256, 16)));      // repacked by neither
    ck_assert(!mg_repack_fits(mg_new_tensor_2d(ctx, MG_TYPE_Q4_1, 256, 16)));
#if defined(MG_NEON)
    // q4_0_4x4, q8_0_4x4, iq4_nl_4x4 and the K-quants' 8x4 (no i8mm, no SVE).
    ck_assert(mg_repack_fits(mg_new_tensor_2d(ctx, MG_TYPE_Q8_0, 64, 16)));
    ck_assert(mg_repack_fits(mg_new_tensor_2d(ctx, MG_TYPE_IQ4_NL, 64, 16)));
    ck_assert(mg_repack_fits(mg_new_tensor_2d(ctx, MG_TYPE_Q5_K, 256, 16)));
    ck_assert(mg_repack_fits(mg_new_tensor_2d(ctx, MG_TYPE_Q6_K, 256, 16)));
    ck_assert(!mg_repack_fits(mg_new_tensor_2d(ctx, MG_TYPE_Q2_K, 768, 8)));       // x86 only
#else
    // q4_0_8x8, q4_K_8x8 and (AVX-512) q2_K_8x8.
    ck_assert(!mg_repack_fits(mg_new_tensor_2d(ctx, MG_TYPE_Q8_0, 64, 16)));
    ck_assert(!mg_repack_fits(mg_new_tensor_2d(ctx, MG_TYPE_Q6_K, 256, 16)));
    ck_assert(mg_repack_fits(mg_new_tensor_2d(ctx, MG_TYPE_Q2_K, 768, 8)) == MG_REPACK_Q2_K);   // AVX-512 only
    ck_assert(mg_repack_fits(mg_new_tensor_3d(ctx, MG_TYPE_Q2_K, 256, 16, 2)) == MG_REPACK_Q2_K);   // experts too
#endif
    mg_free(ctx);
}
END_TEST

#if !defined(MG_NEON)   // NEON's tile is its own reference: rows one at a time in ggml's NEON orders
// The tile on its own: every column count, the SIMD kernel (or, in the
// scalar build, the reference itself) against the reference, to the bit.
static void check_tile(enum mg_type type, int64_t n, uint64_t seed) {
    uint64_t            rng   = seed;
    const enum mg_type  ytype = mg_get_type_traits_cpu(type)->vec_dot_type;
    const size_t        ys    = mg_row_size(ytype, n);
    struct mg_context * ctx   = mg_init((struct mg_init_params) {.mem_size = 1u << 20});
    struct mg_tensor *  w     = random_matrix(ctx, type, n, 8, &rng);
    void *              copy  = repacked_copy(w);
    char *              y     = malloc(4 * ys);
    float *             xf    = malloc(sizeof(float) * (size_t) n);
    ck_assert(y && xf);
    for (int c = 0; c < 4; c++) {
        for (int64_t i = 0; i < n; i++) xf[i] = 3.0f * mg_test_rand_normal(&rng);
        mg_get_type_traits_cpu(type)->from_float(xf, y + c * ys, n);   // to its vec_dot_type
    }
    for (int nc = 1; nc <= 4; nc++) {
        float got[4 * 9], want[4 * 9];
        memset(got, 0xff, sizeof(got));
        memset(want, 0xff, sizeof(want));
        mg_repack_tile(type, n, got, 9, copy, y, ys, nc);
        mg_repack_tile_ref(type, n, want, 9, copy, y, ys, nc);
        for (int c = 0; c < nc; c++) {
            for (int r = 0; r < 8; r++) {
                ck_assert_msg(memcmp(&got[c * 9 + r], &want[c * 9 + r], sizeof(float)) == 0,
                              "%s n %lld, %d columns: row %d column %d is %.9g, the reference %.9g",
                              mg_type_name(type), (long long) n, nc, r, c, got[c * 9 + r], want[c * 9 + r]);
            }
        }
    }
    free(xf);
    free(y);
    free(copy);
    mg_free(ctx);
}

START_TEST(test_tile_vs_reference) {
    check_tile(MG_TYPE_Q4_0, 768, 13);
}
END_TEST

// Q4_K: one super-block, MiniMind's rows (3), and long rows (8: one column
// of the file's layout goes row by row there, the repacked one tiles).
START_TEST(test_tile_vs_reference_q4_K) {
    check_tile(MG_TYPE_Q4_K, 256, 31);
    check_tile(MG_TYPE_Q4_K, 768, 32);
    check_tile(MG_TYPE_Q4_K, 2048, 33);
}
END_TEST

// Q2_K: one super-block, the fixtures' rows (256), and rows of 768 (ffn_down's).
START_TEST(test_tile_vs_reference_q2_K) {
    check_tile(MG_TYPE_Q2_K, 256, 34);
    check_tile(MG_TYPE_Q2_K, 768, 35);
    check_tile(MG_TYPE_Q2_K, 2048, 36);
}
END_TEST
#endif

// Raw bytes, every code and scale pattern the formats allow (the quantizer
// above makes only some), and every extreme: weights of random bytes with
// small F16 factors, Q8_K activations of random codes in -127..127 (all of
// them +-127 in `extreme`) with their bsums. SIMD tile against the scalar
// reference of the same order, to the bit.
#if !defined(MG_NEON)
static void raw_k_rows(enum mg_type type, void * rows, int64_t n, uint64_t * rng) {
    const size_t row_size = mg_row_size(type, n);
    uint8_t *    p        = rows;
    for (size_t i = 0; i < 8 * row_size; i++) p[i] = (uint8_t) mg_test_rand_u64(rng);
    for (int64_t b = 0; b < 8 * (n / MG_QK_K); b++) {
        const mg_fp16_t d = mg_fp32_to_fp16(mg_test_rand_uniform(rng, 0.001f, 0.1f)), dmin = mg_fp32_to_fp16(0.05f);
        if (type == MG_TYPE_Q4_K) {
            ((struct mg_block_q4_K *) rows)[b].d    = d;
            ((struct mg_block_q4_K *) rows)[b].dmin = dmin;
        } else {
            ((struct mg_block_q2_K *) rows)[b].d    = d;
            ((struct mg_block_q2_K *) rows)[b].dmin = dmin;
        }
    }
}
#endif

static void raw_q8_K(struct mg_block_q8_K * y, int64_t n, bool extreme, uint64_t * rng) {
    for (int64_t b = 0; b < n / MG_QK_K; b++) {
        y[b].d = mg_test_rand_uniform(rng, 0.001f, 0.1f) * ((mg_test_rand_u64(rng) & 1) ? 1 : -1);
        for (int j = 0; j < MG_QK_K; j++) {
            y[b].qs[j] = (int8_t) (extreme ? ((mg_test_rand_u64(rng) & 1) ? 127 : -127)
                                           : (int) (mg_test_rand_u64(rng) % 255) - 127);
        }
        for (int g = 0; g < MG_QK_K / 16; g++) {
            int sum = 0;
            for (int j = 0; j < 16; j++) sum += y[b].qs[16 * g + j];
            y[b].bsums[g] = (int16_t) sum;
        }
    }
}

#if !defined(MG_NEON)
static void check_tile_raw(enum mg_type type, int64_t n, bool extreme, uint64_t seed) {
    uint64_t     rng      = seed;
    const size_t row_size = mg_row_size(type, n), ys = mg_row_size(MG_TYPE_Q8_K, n);
    char *       rows     = malloc(8 * row_size);
    char *       copy     = malloc(8 * row_size);
    char *       y        = malloc(4 * ys);
    ck_assert(rows && copy && y);
    raw_k_rows(type, rows, n, &rng);
    if (type == MG_TYPE_Q4_K) mg_repack_q4_K(copy, rows, n, 8);
    else mg_repack_q2_K(copy, rows, n, 8);
    for (int c = 0; c < 4; c++) raw_q8_K((struct mg_block_q8_K *) (y + c * ys), n, extreme, &rng);
    for (int nc = 1; nc <= 4; nc++) {
        float got[32], want[32];
        mg_repack_tile(type, n, got, 8, copy, y, ys, nc);
        mg_repack_tile_ref(type, n, want, 8, copy, y, ys, nc);
        for (int i = 0; i < 8 * nc; i++) {
            ck_assert_msg(memcmp(&got[i], &want[i], sizeof(float)) == 0,
                          "%s raw%s n %lld, %d columns: row %d column %d is %.9g, the reference %.9g",
                          mg_type_name(type), extreme ? " extreme" : "", (long long) n, nc, i % 8, i / 8, got[i],
                          want[i]);
        }
    }
    free(y);
    free(copy);
    free(rows);
}

START_TEST(test_tile_raw_bytes) {
    for (int k = 0; k < 8; k++) {
        check_tile_raw(MG_TYPE_Q4_K, 256 * (1 + k % 3), k % 2, 60 + (uint64_t) k);
        check_tile_raw(MG_TYPE_Q2_K, 256 * (1 + k % 3), k % 2, 70 + (uint64_t) k);
    }
}
END_TEST
#endif

// The two orders are not the same floats: on these random rows, the gemm's
// tile (4 columns) and the gemv's (the same 4 columns, 3 + 1) part in some
// elements, so the order a tile takes is visible (and the test above sees it).
static int count_order_differences(enum mg_type type, int64_t n, uint64_t seed) {
    uint64_t            rng   = seed;
    const size_t        ys    = mg_row_size(MG_TYPE_Q8_K, n);
    struct mg_context * ctx   = mg_init((struct mg_init_params) {.mem_size = 1u << 20});
    struct mg_tensor *  w     = random_matrix(ctx, type, n, 8, &rng);
    void *              copy  = repacked_copy(w);
    char *              y     = malloc(4 * ys);
    float *             xf    = malloc(sizeof(float) * (size_t) n);
    ck_assert(y && xf);
    for (int c = 0; c < 4; c++) {
        for (int64_t i = 0; i < n; i++) xf[i] = 3.0f * mg_test_rand_normal(&rng);
        mg_quantize_row_q8_K(xf, y + c * ys, n);
    }
    float gemm[32], gemv[32];
    mg_repack_tile_ref(type, n, gemm, 8, copy, y, ys, 4);
    mg_repack_tile_ref(type, n, gemv, 8, copy, y, ys, 3);
    mg_repack_tile_ref(type, n, gemv + 24, 8, copy, y + 3 * ys, ys, 1);
    int differ = 0;
    for (int i = 0; i < 32; i++) differ += memcmp(&gemm[i], &gemv[i], sizeof(float)) != 0;
    free(xf);
    free(y);
    free(copy);
    mg_free(ctx);
    return differ;
}

START_TEST(test_gemm_order_is_not_gemv_order) {
#if defined(MG_NEON)
    ck_assert_int_gt(count_order_differences(MG_TYPE_Q6_K, 2048, 37), 0);   // the only NEON K-quant gemm of its own
#else
    ck_assert_int_gt(count_order_differences(MG_TYPE_Q4_K, 2048, 37), 0);
    ck_assert_int_gt(count_order_differences(MG_TYPE_Q2_K, 2048, 38), 0);
#endif
}
END_TEST

// What mul_mat must give for W {n, rows} (its repacked copy) x the quantized
// columns y: the reference tile of every 8 rows x every group of up to 4
// columns from column 0 (llama.cpp's forward_mul_mat_one_chunk: the gemm for
// whole groups of 4, the gemv for the rest).
static void reference_mul_mat(enum mg_type type, int64_t n, int64_t rows, int64_t cols, const void * copy,
                              const float * x, float * want) {
    const enum mg_type ytype = mg_get_type_traits_cpu(type)->vec_dot_type;
    const size_t       ys    = mg_row_size(ytype, n);
    char *             y     = malloc(ys * (size_t) cols);
    ck_assert_ptr_nonnull(y);
    for (int64_t c = 0; c < cols; c++) mg_get_type_traits_cpu(type)->from_float(x + c * n, y + c * ys, n);
    const size_t row_size = mg_row_size(type, n);
    for (int64_t j = 0; j < cols; j += 4) {
        const int n_cols = cols - j < 4 ? (int) (cols - j) : 4;
        for (int64_t r = 0; r < rows; r += 8) {
            mg_repack_tile_ref(type, n, want + j * rows + r, (size_t) rows, (const char *) copy + r * row_size,
                               y + j * ys, ys, n_cols);
        }
    }
    free(y);
}

// mul_mat of W {n, rows} with x {n, cols}, with W->repacked, against the
// reference tiles (or, for a W that does not qualify, against mul_mat
// without a copy), every element to the bit.
static void check_mul_mat(enum mg_type type, int64_t n, int64_t rows, const int64_t * cols, int n_cols,
                          uint64_t seed) {
    uint64_t            rng = seed;
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 32u << 20});
    ck_assert_ptr_nonnull(ctx);
    struct mg_tensor * w    = random_matrix(ctx, type, n, rows, &rng);
    void *             copy = mg_repack_fits(w) ? repacked_copy(w) : NULL;
    for (int k = 0; k < n_cols; k++) {
        struct mg_tensor * x = mg_new_tensor_2d(ctx, MG_TYPE_F32, n, cols[k]);
        for (int64_t i = 0; i < n * cols[k]; i++) ((float *) x->data)[i] = 3.0f * mg_test_rand_normal(&rng);
        struct mg_tensor * y = mg_mul_mat(ctx, w, x);
        struct mg_cgraph * g = mg_new_graph(ctx);
        mg_build_forward_expand(g, y);
        w->repacked = NULL;
        mg_graph_compute_with_ctx(ctx, g, 1);   // without the copy (and y gets its memory)
        float * want = malloc(mg_nbytes(y));
        ck_assert_ptr_nonnull(want);
        if (copy != NULL) reference_mul_mat(type, n, rows, cols[k], copy, x->data, want);
        else memcpy(want, y->data, mg_nbytes(y));
        w->repacked = copy;
        for (int t = 1; t <= mg_test_threads(3); t++) {   // 3 threads: shares of unequal length
            memset(y->data, 0xff, mg_nbytes(y));   // NaNs: an element nobody writes cannot pass
            mg_graph_compute_with_ctx(ctx, g, t);
            for (int64_t i = 0; i < rows * cols[k]; i++) {
                ck_assert_msg(memcmp(&((float *) y->data)[i], &want[i], sizeof(float)) == 0,
                              "%s W {%lld, %lld} x %lld columns, %d threads: element %lld is %.9g, the reference %.9g",
                              mg_type_name(type), (long long) n, (long long) rows, (long long) cols[k], t, (long long) i,
                              ((float *) y->data)[i], want[i]);
            }
        }
        w->repacked = NULL;
        free(want);
    }
    free(copy);
    mg_free(ctx);
}

START_TEST(test_mul_mat_all_columns) {
    // Every remainder of the 4-column tiles, then both sides of larger column
    // blocks (kept short: under ASan this suite is CI's slowest).
    int64_t cols[32];
    int     nc = 0;
    for (int k = 1; k <= 24; k++) cols[nc++] = k;
    const int64_t more[] = {31, 32, 33, 63, 64, 65, 70};
    for (size_t k = 0; k < sizeof(more) / sizeof(more[0]); k++) cols[nc++] = more[k];
    check_mul_mat(MG_TYPE_Q4_0, 256, 48, cols, nc, 21);
    check_mul_mat(MG_TYPE_Q4_K, 256, 48, cols, nc, 41);
    check_mul_mat(MG_TYPE_Q4_K, 768, 16, cols, nc, 42);
    check_mul_mat(MG_TYPE_Q2_K, 256, 48, cols, nc, 51);   // on NEON: not repacked
#if defined(MG_NEON)
    check_mul_mat(MG_TYPE_Q8_0, 256, 48, cols, nc, 57);
    check_mul_mat(MG_TYPE_IQ4_NL, 256, 48, cols, nc, 58);
    check_mul_mat(MG_TYPE_Q5_K, 256, 48, cols, nc, 59);
    check_mul_mat(MG_TYPE_Q6_K, 256, 48, cols, nc, 60);
#endif
}
END_TEST

// MiniMind's shapes (gate/up, down), one row group (8 rows), and 45 rows
// (not a multiple of 8: not repacked, mul_mat as before).
START_TEST(test_mul_mat_shapes) {
    const int64_t cols[] = {1, 3, 4, 5, 70};
    const int     nc     = (int) (sizeof(cols) / sizeof(cols[0]));
    check_mul_mat(MG_TYPE_Q4_0, 768, 2432, cols, nc, 22);
    check_mul_mat(MG_TYPE_Q4_0, 2432, 768, cols, nc, 23);
    check_mul_mat(MG_TYPE_Q4_0, 32, 8, cols, nc, 24);
    check_mul_mat(MG_TYPE_Q4_0, 96, 24, cols, nc, 25);
    check_mul_mat(MG_TYPE_Q4_0, 256, 45, cols, nc, 26);
}
END_TEST

// Q4_K: MiniMind's attention and gate/up shapes, a Q4_K_S-like ffn_down
// (rows of 2048), one row group, and 45 rows (not repacked).
START_TEST(test_mul_mat_shapes_q4_K) {
    const int64_t cols[] = {1, 3, 4, 5, 70};
    const int     nc     = (int) (sizeof(cols) / sizeof(cols[0]));
    check_mul_mat(MG_TYPE_Q4_K, 768, 768, cols, nc, 43);
    check_mul_mat(MG_TYPE_Q4_K, 768, 2048, cols, nc, 44);
    check_mul_mat(MG_TYPE_Q4_K, 2048, 768, cols, nc, 45);
    check_mul_mat(MG_TYPE_Q4_K, 256, 8, cols, nc, 46);
    check_mul_mat(MG_TYPE_Q4_K, 512, 45, cols, nc, 47);
}
END_TEST

// Q2_K: the fixtures' shapes (attn_q, attn_k, ffn_gate/up), one row group,
// and 20 rows (not repacked).
START_TEST(test_mul_mat_shapes_q2_K) {
    const int64_t cols[] = {1, 3, 4, 5, 70};
    const int     nc     = (int) (sizeof(cols) / sizeof(cols[0]));
    check_mul_mat(MG_TYPE_Q2_K, 256, 256, cols, nc, 52);
    check_mul_mat(MG_TYPE_Q2_K, 256, 128, cols, nc, 53);
    check_mul_mat(MG_TYPE_Q2_K, 256, 768, cols, nc, 54);
    check_mul_mat(MG_TYPE_Q2_K, 768, 8, cols, nc, 55);
    check_mul_mat(MG_TYPE_Q2_K, 512, 20, cols, nc, 56);
}
END_TEST

// A model: the tiny fixture quantized by mg quantize, loaded with and
// without repacking; its matrices repacked (SIMD build), and the logits of a
// batch of n_tok tokens (at most 7) and of one more token.
static float * model_logits(const char * path, bool repack, int n_tok, int * n_repacked, int * n_out) {
    struct mg_model_params mp = mg_model_default_params();
    mp.repack                 = repack;
    struct mg_model * m       = mg_model_load_from_file(path, mp);
    ck_assert_msg(m != NULL, "%s", mg_last_error());
    *n_repacked = m->n_repacked;
    struct mg_session_params p = mg_session_default_params();
    p.n_threads                = mg_test_threads(2);
    p.n_ctx                    = 64;
    struct mg_session * s      = mg_session_new(m, p);
    ck_assert_ptr_nonnull(s);
    const int32_t tokens[] = {5, 17, 300, 42, 1000, 7, 99};
    ck_assert(n_tok <= (int) (sizeof(tokens) / sizeof(tokens[0])));
    ck_assert(mg_decode(s, tokens, n_tok, true));
    const size_t n_vocab = (size_t) m->hp.n_vocab;
    *n_out               = (n_tok + 1) * m->hp.n_vocab;
    float * out          = malloc(sizeof(float) * (size_t) *n_out);
    ck_assert_ptr_nonnull(out);
    memcpy(out, mg_get_logits(s), sizeof(float) * n_vocab * (size_t) n_tok);
    const int32_t next = 3;   // and one token on its own (decode: one column)
    ck_assert(mg_decode(s, &next, 1, false));
    memcpy(out + n_vocab * (size_t) n_tok, mg_get_logits(s), sizeof(float) * n_vocab);
    mg_session_free(s);
    mg_model_free(m);
    return out;
}

// The tiny fixture quantized by mg quantize to `type` (extra options first),
// its logits with and without repacking, and how many matrices were repacked.
// same_bits: the logits must be equal to the bit; otherwise (Q2_K, whose
// vec_dot keeps ggml's AVX2 lanes and whose repacked tiles the q2_K_8x8 order)
// they differ by float rounding only, far below the 2e-2 of the goldens.
static void check_model(const char * options, const char * type, int n_tok, bool same_bits, int min_repacked) {
    char dir[] = "/tmp/mg_test_repack_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char path[256], cmd[2048];
    snprintf(path, sizeof(path), "%s/tiny-%s.gguf", dir, type);
    snprintf(cmd, sizeof(cmd), "'%s' quantize %s '%s' '%s' %s > /dev/null 2>&1", mg_test_mg_bin(), options, mg_test_fixture("models/tiny-f32.gguf"),
             path, type);
    ck_assert_msg(system(cmd) == 0, "%s failed", cmd);
    int     on_repacked, off_repacked, n_on, n_off;
    float * on  = model_logits(path, true, n_tok, &on_repacked, &n_on);
    float * off = model_logits(path, false, n_tok, &off_repacked, &n_off);
    ck_assert_int_eq(off_repacked, 0);
#if defined(MG_SIMD) || defined(MG_NEON)
    ck_assert_int_ge(on_repacked, min_repacked);
#else
    (void) min_repacked;
    ck_assert_int_eq(on_repacked, 0);    // the scalar build keeps the original layout
#endif
    ck_assert_int_eq(n_on, n_off);
    if (same_bits) {
        ck_assert_msg(memcmp(on, off, sizeof(float) * (size_t) n_on) == 0, "%s: logits differ", type);
    } else {
        double worst = 0.0;
        for (int i = 0; i < n_on; i++) worst = fmax(worst, fabs((double) on[i] - off[i]));
        ck_assert_msg(worst < 2e-3, "%s: logits differ by %g", type, worst);
    }
    free(on);
    free(off);
    unlink(path);
    rmdir(dir);
}

START_TEST(test_model) {
    check_model("", "q4_0", 7, true, 14);   // 7 matrices in each of 2 layers
}
END_TEST

// Q4_K's repacked kernels take vec_dot's order below 4 columns on x86 (the
// gemv's), so the logits keep their bits there; NEON's q4_K_8x4 adds in an
// order of its own at every column count, and the logits differ by rounding.
#if defined(MG_NEON)
#define Q4_K_SAME_BITS false
#else
#define Q4_K_SAME_BITS true
#endif

// --pure: every matrix Q4_K, the tied token_embd/output too (mul_mat reads
// its repacked copy, get_rows the original): 7 x 2 + 1. A batch of 3 tokens:
// all of them in the gemv's order (4 would be a gemm group).
START_TEST(test_model_q4_K) {
    check_model("--pure", "q4_k_m", 3, Q4_K_SAME_BITS, 15);
}
END_TEST

// The real Q4_K_M mix: Q4_K beside Q6_K matrices, which stay as they are on
// x86 (NEON repacks both).
START_TEST(test_model_q4_K_M) {
    check_model("", "q4_k_m", 3, Q4_K_SAME_BITS, 12);
}
END_TEST

// Q2_K: attn_q, attn_k, ffn_gate and ffn_up of each layer are Q2_K (the rest
// Q3_K, and Q6_K for token_embd): 4 x 2, repacked in an AVX-512 build only
// (MG_REPACK_Q2_K), where the logits then differ by rounding; elsewhere none.
// On NEON only the Q6_K output matrix is (q6_K_8x4, whose gemv keeps the bits here).
START_TEST(test_model_q2_K) {
#if defined(MG_NEON)
    check_model("", "q2_k", 7, true, 1);
#else
    check_model("", "q2_k", 7, !MG_REPACK_Q2_K, MG_REPACK_Q2_K ? 8 : 0);
#endif
}
END_TEST

// The float orders of llama.cpp's NEON repacked K-quant kernels (repack.c,
// mg_dot_q4_K_8x4_q8_K, ...: plain C, so every build checks them) against the
// scalar vec_dot on the same bytes: both compute the same exact integers per
// sub-block and differ by float rounding only. Each of the at most 4 * blocks
// + 10 roundings is within 2^-24 of a partial sum, and every partial sum is
// bounded by mag = sum |a| (|d sc q| + |dmin m|) (the scaled codes and the
// mins apart: they nearly cancel), so the two are within twice that.
static double k_magnitude(enum mg_type type, const void * row, const struct mg_block_q8_K * y, int64_t n) {
    float * w = malloc((size_t) n * sizeof(float));
    float * a = malloc((size_t) n * sizeof(float));
    ck_assert(w && a);
    mg_get_type_traits(type)->to_float(row, w, n);
    mg_get_type_traits(MG_TYPE_Q8_K)->to_float(y, a, n);
    double mag = 0;
    for (int64_t e = 0; e < n; e++) {
        double min = 0;   // dmin * m of e's sub-block (Q4_K and Q5_K: d, dmin, scales[12] first)
        if (type != MG_TYPE_Q6_K) {
            const struct mg_block_q4_K * b = (const struct mg_block_q4_K *) ((const char *) row +
                                                                             (size_t) (e / MG_QK_K) * mg_type_size(type));
            uint8_t sc, m;
            mg_get_scale_min_k4((int) (e % MG_QK_K / 32), b->scales, &sc, &m);
            min = (double) mg_fp16_to_fp32(b->dmin) * m;
        }
        mag += fabs((double) a[e]) * (fabs((double) w[e] + min) + fabs(min));
    }
    free(w), free(a);
    return mag;
}

START_TEST(test_neon_k_orders_near_vec_dot) {
    const enum mg_type  types[] = {MG_TYPE_Q4_K, MG_TYPE_Q5_K, MG_TYPE_Q6_K, MG_TYPE_Q6_K};
    const mg_vec_dot_fn neon[]  = {mg_dot_q4_K_8x4_q8_K, mg_dot_q5_K_8x4_q8_K, mg_gemv_q6_K_8x4_q8_K,
                                   mg_gemm_q6_K_8x4_q8_K};
    const mg_vec_dot_fn ref[]   = {mg_vec_dot_q4_K_q8_K, mg_vec_dot_q5_K_q8_K, mg_vec_dot_q6_K_q8_K,
                                   mg_vec_dot_q6_K_q8_K};
    uint64_t            rng     = 77;
    for (int t = 0; t < 4; t++) {
        for (int64_t nb = 1; nb <= 9; nb += 4) {
            const int64_t n = nb * MG_QK_K;
            float *       x = malloc((size_t) n * sizeof(float));
            void *        w = malloc(mg_row_size(types[t], n));
            struct mg_block_q8_K * y = malloc(mg_row_size(MG_TYPE_Q8_K, n));
            ck_assert(x && w && y);
            for (int64_t i = 0; i < n; i++) x[i] = mg_test_rand_normal(&rng) + 0.3f;   // mins at work
            mg_get_type_traits(types[t])->from_float(x, w, n);
            raw_q8_K(y, n, false, &rng);
            float got, want;
            neon[t](n, &got, w, y);
            ref[t](n, &want, w, y);
            const double tol = 2 * (4.0 * (double) nb + 10) * 0x1p-24 * k_magnitude(types[t], w, y, n);
            ck_assert_msg(fabs((double) got - (double) want) <= tol, "%s (%d) n %lld: %.9g, vec_dot %.9g (tol %.3g)",
                          mg_type_name(types[t]), t, (long long) n, got, want, tol);
            free(x), free(w), free(y);
        }
    }
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s      = suite_create("repack");
    TCase * layout = tcase_create("layout");
    tcase_add_test(layout, test_round_trip);
    tcase_add_test(layout, test_layout);
    tcase_add_test(layout, test_layout_k);
    tcase_add_test(layout, test_fits);
    tcase_add_test(layout, test_fits_at_level);
    suite_add_tcase(s, layout);
    TCase * kernels = tcase_create("tile and mul_mat");
    tcase_set_timeout(kernels, 600);
#if !defined(MG_NEON)
    tcase_add_test(kernels, test_tile_vs_reference);
    tcase_add_test(kernels, test_tile_vs_reference_q4_K);
    tcase_add_test(kernels, test_tile_vs_reference_q2_K);
    tcase_add_test(kernels, test_tile_raw_bytes);
#endif
    tcase_add_test(kernels, test_gemm_order_is_not_gemv_order);
    tcase_add_test(kernels, test_neon_k_orders_near_vec_dot);
    tcase_add_test(kernels, test_mul_mat_all_columns);
    tcase_add_test(kernels, test_mul_mat_shapes);
    tcase_add_test(kernels, test_mul_mat_shapes_q4_K);
    tcase_add_test(kernels, test_mul_mat_shapes_q2_K);
    suite_add_tcase(s, kernels);
    TCase * models = tcase_create("models");
    tcase_set_timeout(models, 600);
    tcase_add_test(models, test_model);
    tcase_add_test(models, test_model_q4_K);
    tcase_add_test(models, test_model_q4_K_M);
    tcase_add_test(models, test_model_q2_K);
    suite_add_tcase(s, models);
    return s;
}
