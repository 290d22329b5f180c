// test_repack.c - Q4_0 weights repacked into groups of 8 interleaved rows
// (full/repack.c) change where the bytes are, never a result.
//
// - the layout: repacking and unpacking give back the original blocks, and a
//   group holds the bytes where repack.c's drawing puts them;
// - which tensors qualify (rows % 8 == 0, Q4_0, 2-D), and which do not;
// - the repacked tile (SIMD, or the reference in the scalar build) against
//   the reference: unpack, then one vec_dot per row and column;
// - mul_mat with the weight's repacked copy against mul_mat without it, to
//   the bit, for 1..70 columns and 1..4 threads, on several shapes;
// - a model: the loader repacks its Q4_0 matrices (unless MG_NO_REPACK=1 or
//   the scalar build) and the logits stay bit-identical.
#define _POSIX_C_SOURCE 200809L   // setenv, mkdtemp
#include "harness.h"
#include "mg.h"
#include "repack.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// A Q4_0 matrix of random N(0,1) weights, rows x n.
static struct mg_tensor * random_q4_0(struct mg_context * ctx, int64_t n, int64_t rows, uint64_t * rng) {
    struct mg_tensor * w  = mg_new_tensor_2d(ctx, MG_TYPE_Q4_0, n, rows);
    float *            wf = malloc(sizeof(float) * (size_t) (n * rows));
    ck_assert_ptr_nonnull(wf);
    for (int64_t i = 0; i < n * rows; i++) wf[i] = mg_test_rand_normal(rng);
    mg_get_type_traits(MG_TYPE_Q4_0)->from_float(wf, w->data, n * rows);
    free(wf);
    return w;
}

// The copy mul_mat reads, made the way the loader makes it.
static void * repacked_copy(const struct mg_tensor * w) {
    ck_assert(mg_repack_q4_0_fits(w));
    void * copy = malloc(mg_nbytes(w));
    ck_assert_ptr_nonnull(copy);
    mg_repack_q4_0(copy, w->data, w->ne[0], w->ne[1]);
    return copy;
}

START_TEST(test_round_trip) {
    const int64_t shapes[][2] = {{32, 8}, {64, 16}, {256, 48}, {768, 2432}, {2432, 768}};
    uint64_t      rng         = 11;
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
        struct mg_context * ctx  = mg_init((struct mg_init_params) {.mem_size = 4u << 20});
        struct mg_tensor *  w    = random_q4_0(ctx, shapes[i][0], shapes[i][1], &rng);
        void *              copy = repacked_copy(w);
        void *              back = malloc(mg_nbytes(w));
        ck_assert_ptr_nonnull(back);
        if (shapes[i][1] > 8) ck_assert(memcmp(copy, w->data, mg_nbytes(w)) != 0);   // it did move something
        mg_unpack_q4_0(back, copy, w->ne[0], w->ne[1]);
        ck_assert_msg(memcmp(back, w->data, mg_nbytes(w)) == 0, "round trip of {%lld, %lld}",
                      (long long) shapes[i][0], (long long) shapes[i][1]);
        free(back);
        free(copy);
        mg_free(ctx);
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
    uint8_t *                    copy = repacked_copy(w);
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

START_TEST(test_fits) {
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 1u << 20});
    ck_assert(mg_repack_q4_0_fits(mg_new_tensor_2d(ctx, MG_TYPE_Q4_0, 64, 16)));
    ck_assert(!mg_repack_q4_0_fits(mg_new_tensor_2d(ctx, MG_TYPE_Q4_0, 64, 45)));   // rows not a multiple of 8
    ck_assert(!mg_repack_q4_0_fits(mg_new_tensor_2d(ctx, MG_TYPE_Q4_0, 64, 4)));
    ck_assert(!mg_repack_q4_0_fits(mg_new_tensor_2d(ctx, MG_TYPE_Q8_0, 64, 16)));   // not Q4_0
    ck_assert(!mg_repack_q4_0_fits(mg_new_tensor_3d(ctx, MG_TYPE_Q4_0, 64, 16, 2)));   // not 2-D
    struct mg_tensor * wide = mg_new_tensor_2d(ctx, MG_TYPE_Q4_0, 128, 16);
    ck_assert(!mg_repack_q4_0_fits(mg_view_2d(ctx, wide, 64, 16, wide->nb[1], 0)));   // rows with gaps
    mg_free(ctx);
}
END_TEST

// The tile on its own: every column count, the SIMD kernel (or, in the
// scalar build, the reference itself) against the reference, to the bit.
START_TEST(test_tile_vs_reference) {
    const int64_t n     = 768;
    uint64_t      rng   = 13;
    const size_t  ys    = mg_row_size(MG_TYPE_Q8_0, n);
    struct mg_context * ctx  = mg_init((struct mg_init_params) {.mem_size = 1u << 20});
    struct mg_tensor *  w    = random_q4_0(ctx, n, 8, &rng);
    void *              copy = repacked_copy(w);
    char *              y    = malloc(4 * ys);
    float *             xf   = malloc(sizeof(float) * (size_t) n);
    ck_assert(y && xf);
    for (int c = 0; c < 4; c++) {
        for (int64_t i = 0; i < n; i++) xf[i] = 3.0f * mg_test_rand_normal(&rng);
        mg_get_type_traits_cpu(MG_TYPE_Q4_0)->from_float(xf, y + c * ys, n);
    }
    for (int nc = 1; nc <= 4; nc++) {
        float got[4 * 9], want[4 * 9];
        memset(got, 0xff, sizeof(got));
        memset(want, 0xff, sizeof(want));
        mg_repack_tile_q4_0(n, got, 9, copy, y, ys, nc);
        mg_repack_tile_q4_0_ref(n, want, 9, copy, y, ys, nc);
        for (int c = 0; c < nc; c++) {
            for (int r = 0; r < 8; r++) {
                ck_assert_msg(memcmp(&got[c * 9 + r], &want[c * 9 + r], sizeof(float)) == 0,
                              "%d columns: row %d column %d is %.9g, the reference %.9g", nc, r, c, got[c * 9 + r],
                              want[c * 9 + r]);
            }
        }
    }
    free(xf);
    free(y);
    free(copy);
    mg_free(ctx);
}
END_TEST

// mul_mat of W {n, rows} with x {n, cols}: the same graph computed with and
// without W->repacked, every element to the bit.
static void check_mul_mat(int64_t n, int64_t rows, const int64_t * cols, int n_cols, uint64_t seed) {
    uint64_t            rng = seed;
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 32u << 20});
    ck_assert_ptr_nonnull(ctx);
    struct mg_tensor * w    = random_q4_0(ctx, n, rows, &rng);
    void *             copy = mg_repack_q4_0_fits(w) ? repacked_copy(w) : NULL;
    for (int k = 0; k < n_cols; k++) {
        struct mg_tensor * x = mg_new_tensor_2d(ctx, MG_TYPE_F32, n, cols[k]);
        for (int64_t i = 0; i < n * cols[k]; i++) ((float *) x->data)[i] = 3.0f * mg_test_rand_normal(&rng);
        struct mg_tensor * y = mg_mul_mat(ctx, w, x);
        struct mg_cgraph * g = mg_new_graph(ctx);
        mg_build_forward_expand(g, y);
        w->repacked = NULL;
        mg_graph_compute_with_ctx(ctx, g, 1);
        float * want = malloc(mg_nbytes(y));
        ck_assert_ptr_nonnull(want);
        memcpy(want, y->data, mg_nbytes(y));
        w->repacked = copy;
        for (int t = 1; t <= 4; t++) {
            memset(y->data, 0xff, mg_nbytes(y));   // NaNs: an element nobody writes cannot pass
            mg_graph_compute_with_ctx(ctx, g, t);
            for (int64_t i = 0; i < rows * cols[k]; i++) {
                ck_assert_msg(memcmp(&((float *) y->data)[i], &want[i], sizeof(float)) == 0,
                              "W {%lld, %lld} x %lld columns, %d threads: element %lld is %.9g, unrepacked %.9g",
                              (long long) n, (long long) rows, (long long) cols[k], t, (long long) i,
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
    int64_t cols[70];
    for (int k = 0; k < 70; k++) cols[k] = k + 1;
    check_mul_mat(256, 48, cols, 70, 21);
}
END_TEST

// MiniMind's shapes (gate/up, down), one row group (8 rows), and 45 rows
// (not a multiple of 8: not repacked, mul_mat as before).
START_TEST(test_mul_mat_shapes) {
    const int64_t cols[] = {1, 2, 3, 4, 5, 9, 64, 70};
    const int     nc     = (int) (sizeof(cols) / sizeof(cols[0]));
    check_mul_mat(768, 2432, cols, nc, 22);
    check_mul_mat(2432, 768, cols, nc, 23);
    check_mul_mat(32, 8, cols, nc, 24);
    check_mul_mat(96, 24, cols, nc, 25);
    check_mul_mat(256, 45, cols, nc, 26);
}
END_TEST

// A model: the tiny fixture quantized to Q4_0 by mg quantize, loaded with and
// without repacking; its Q4_0 matrices repacked (SIMD build) and the logits
// of a batch the same to the bit.
static float * model_logits(const char * path, bool repack, int * n_repacked, int * n_out) {
    if (repack) unsetenv("MG_NO_REPACK");
    else setenv("MG_NO_REPACK", "1", 1);
    struct mg_model * m = mg_model_load(path);
    unsetenv("MG_NO_REPACK");
    ck_assert_msg(m != NULL, "%s", mg_last_error());
    *n_repacked = m->n_repacked;
    struct mg_session_params p = mg_session_default_params();
    p.n_threads                = 2;
    p.n_ctx                    = 64;
    struct mg_session * s      = mg_session_new(m, p);
    ck_assert_ptr_nonnull(s);
    const int32_t tokens[] = {5, 17, 300, 42, 1000, 7, 99};
    const int     n_tok    = (int) (sizeof(tokens) / sizeof(tokens[0]));
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

START_TEST(test_model) {
    char dir[] = "/tmp/mg_test_repack_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char path[256], cmd[2048];
    snprintf(path, sizeof(path), "%s/tiny-q4_0.gguf", dir);
    const char * bin = getenv("MG_BIN");
    snprintf(cmd, sizeof(cmd), "'%s' quantize '%s' '%s' q4_0 > /dev/null 2>&1",
             bin && *bin ? bin : mg_test_root("full/build/mg"), mg_test_fixture("models/tiny-f32.gguf"), path);
    ck_assert_msg(system(cmd) == 0, "%s failed", cmd);
    int     on_repacked, off_repacked, n_on, n_off;
    float * on  = model_logits(path, true, &on_repacked, &n_on);
    float * off = model_logits(path, false, &off_repacked, &n_off);
    ck_assert_int_eq(off_repacked, 0);
#if defined(MG_SIMD)
    ck_assert_int_ge(on_repacked, 14);   // 7 matrices in each of 2 layers
#else
    ck_assert_int_eq(on_repacked, 0);    // the scalar build keeps the original layout
#endif
    ck_assert_int_eq(n_on, n_off);
    ck_assert(memcmp(on, off, sizeof(float) * (size_t) n_on) == 0);
    free(on);
    free(off);
    unlink(path);
    rmdir(dir);
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s  = suite_create("repack");
    TCase * tc = tcase_create("q4_0x8");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_round_trip);
    tcase_add_test(tc, test_layout);
    tcase_add_test(tc, test_fits);
    tcase_add_test(tc, test_tile_vs_reference);
    tcase_add_test(tc, test_mul_mat_all_columns);
    tcase_add_test(tc, test_mul_mat_shapes);
    tcase_add_test(tc, test_model);
    suite_add_tcase(s, tc);
    return s;
}
