// test_arch.c - the architectures beside qwen3: llama and qwen2 (qwen3.c's
// find_arch, load_layer, rotate). What the loader reads from each file, what
// it refuses (an unknown architecture by name, a tensor the architecture does
// not have by name and shape), and the RoPE variant Llama 3 adds (frequency
// factors) against a naive formula. The logits of both architectures are
// asserted against llama.cpp's in test_golden2.c (shapes tiny-llama, tiny-qwen2).
#include "harness.h"
#include "gguf_writer.h"
#include "model.h"
#include "ops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char dir[64];

static void setup(void) {
    mg_test_make_dir(dir, sizeof(dir), "arch");
}

static void teardown(void) {
    mg_test_remove_dir(dir);
}

#define in_dir(name) mg_test_path_in(dir, name)

// mg mkmodel ARGS -o DIR/name, which must succeed; returns the path.
static const char * mkmodel(const char * name, const char * args) {
    const char * path = in_dir(name);
    struct mg_test_run r = mg_test_run_mg(dir, NULL, NULL, "mkmodel %s -o '%s'", args, path);
    ck_assert_msg(r.status == 0, "mkmodel %s: %s", args, r.err);
    mg_test_run_free(&r);
    return path;
}

// The loader's error for path (which must not load).
static void expect_refused(const char * path, const char * fragment1, const char * fragment2) {
    struct mg_model * m = mg_model_load(path);
    ck_assert_msg(m == NULL, "%s loaded", path);
    const char * err = mg_last_error();
    ck_assert_msg(strstr(err, fragment1) != NULL && (fragment2 == NULL || strstr(err, fragment2) != NULL),
                  "error '%s' lacks '%s' / '%s'", err, fragment1, fragment2 ? fragment2 : "");
}

START_TEST(test_llama_hparams_and_tensors) {
    struct mg_model * m = mg_model_load(mkmodel("l.gguf", "--preset tiny-llama --n-layer 1"));
    ck_assert_msg(m != NULL, "%s", mg_last_error());
    ck_assert_str_eq(m->hp.arch_name, "llama");
    ck_assert_int_eq(m->hp.arch, MG_ARCH_LLAMA);
    ck_assert_int_eq(m->hp.rope_type, MG_ROPE_NORMAL);   // pairs (2i, 2i+1), llama.cpp's LLAMA_ROPE_TYPE_NORM
    ck_assert_float_eq(m->hp.rope_freq_base, 5e5f);
    ck_assert_float_eq(m->hp.rms_eps, 1e-5f);
    ck_assert_ptr_null(m->layers[0].q_norm);
    ck_assert_ptr_null(m->layers[0].bq);
    // Llama 3's factors: one per pair; the shortest wavelengths keep their
    // angle (1), the longest turn 32 times slower, and the factor never falls.
    ck_assert_ptr_nonnull(m->rope_freqs);
    ck_assert_int_eq(m->rope_freqs->ne[0], m->hp.head_dim / 2);
    const float * ff = m->rope_freqs->data;
    ck_assert_float_eq(ff[0], 1.0f);
    ck_assert_float_eq(ff[m->hp.head_dim / 2 - 1], 32.0f);
    for (int i = 1; i < m->hp.head_dim / 2; i++) ck_assert_msg(ff[i] >= ff[i - 1], "factor %d falls", i);
    mg_model_free(m);
}
END_TEST

START_TEST(test_qwen2_hparams_and_tensors) {
    struct mg_model * m = mg_model_load(mkmodel("q.gguf", "--preset tiny-qwen2 --n-layer 1"));
    ck_assert_msg(m != NULL, "%s", mg_last_error());
    ck_assert_int_eq(m->hp.arch, MG_ARCH_QWEN2);
    ck_assert_int_eq(m->hp.rope_type, MG_ROPE_NEOX);
    ck_assert_ptr_null(m->layers[0].q_norm);
    ck_assert_ptr_null(m->rope_freqs);
    ck_assert_ptr_nonnull(m->layers[0].bq);
    ck_assert_int_eq(m->layers[0].bq->ne[0], 512);   // D * H
    ck_assert_int_eq(m->layers[0].bk->ne[0], 256);   // D * Hkv: 4 KV heads of 64
    ck_assert_int_eq(m->layers[0].bv->ne[0], 256);
    ck_assert_ptr_eq(m->output, m->tok_embd);        // tied, as Qwen2.5-0.5B
    mg_model_free(m);
}
END_TEST

// --arch on a preset: qwen3's shape as llama (no q/k norms written).
START_TEST(test_mkmodel_arch_flag) {
    struct mg_model * m = mg_model_load(mkmodel("a.gguf", "--preset tiny --arch llama"));
    ck_assert_msg(m != NULL, "%s", mg_last_error());
    ck_assert_int_eq(m->hp.arch, MG_ARCH_LLAMA);
    ck_assert_ptr_null(m->layers[1].q_norm);
    ck_assert_ptr_null(m->rope_freqs);   // tiny is no Llama 3 preset
    mg_model_free(m);
    mg_test_expect_mg_error(dir, "--arch 'gpt2'", "llama, qwen2, qwen3", "mkmodel --preset tiny --arch gpt2 -o '%s'",
                            in_dir("b.gguf"));
}
END_TEST

// A file with only general.architecture: the loader stops at the name.
static const char * file_of_arch(const char * name, const char * arch) {
    const char * path = in_dir(name);
    struct mg_gguf_writer * w = mg_gguf_writer_new();
    ck_assert(mg_gguf_writer_set_str(w, "general.architecture", arch));
    FILE * f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_msg(mg_gguf_writer_write_stream(w, f, path), "%s", mg_last_error());
    ck_assert_int_eq(fclose(f), 0);
    mg_gguf_writer_free(w);
    return path;
}

START_TEST(test_unknown_arch_refused_by_name) {
    expect_refused(file_of_arch("m.gguf", "mamba"), "architecture 'mamba' is not supported", "llama, qwen2, qwen3");
    expect_refused(file_of_arch("e.gguf", "qwen3moe"), "'qwen3moe' is not supported yet", NULL);
}
END_TEST

// The bytes of path with every `from` replaced by `to` (same length), written to out.
static const char * relabel(const char * path, const char * from, const char * to, const char * out_name) {
    size_t size;
    char * b = mg_test_read_file(path, &size);
    ck_assert_ptr_nonnull(b);
    const size_t n = strlen(from);
    ck_assert_uint_eq(n, strlen(to));
    for (size_t i = 0; i + n <= size; i++) {
        if (memcmp(b + i, from, n) == 0) memcpy(b + i, to, n);
    }
    const char * out = in_dir(out_name);
    FILE * f = fopen(out, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(b, 1, size, f), size);
    ck_assert_int_eq(fclose(f), 0);
    free(b);
    return out;
}

// A qwen3 file relabelled llama (the arch's name and every key's prefix, same
// length): its q/k norms are no llama tensors, and llama.cpp refuses it too
// (done_getting_tensors: wrong number of tensors).
START_TEST(test_tensor_of_another_arch_refused) {
    const char * q3 = mkmodel("q3.gguf", "--preset tiny");
    expect_refused(relabel(q3, "qwen3", "llama", "as-llama.gguf"), "tensor 'blk.0.attn_q_norm.weight' [64, 1, 1, 1]",
                   "is not part of a llama model");
    // ... and a qwen2 file relabelled qwen3 lacks them.
    const char * q2 = mkmodel("q2.gguf", "--preset tiny-qwen2 --n-layer 1 --pre gpt-2");
    expect_refused(relabel(q2, "qwen2", "qwen3", "as-qwen3.gguf"), "tensor 'blk.0.attn_q_norm.weight' is missing", NULL);
}
END_TEST

// RoPE with frequency factors against the formula: pair i of a token at
// position p turns by p * base^(-2i/n_rot) / ff[i], in double.
START_TEST(test_rope_freq_factors_against_formula) {
    enum { D = 16, H = 2, T = 3 };
    const int32_t positions[T] = {0, 7, 300};
    for (int mode = 0; mode < 2; mode++) {
        const enum mg_rope_mode m = mode == 0 ? MG_ROPE_NORMAL : MG_ROPE_NEOX;
        struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 4 * 1024 * 1024});
        struct mg_tensor *  x   = mg_new_tensor_3d(ctx, MG_TYPE_F32, D, H, T);
        struct mg_tensor *  pos = mg_new_tensor_1d(ctx, MG_TYPE_I32, T);
        struct mg_tensor *  ff  = mg_new_tensor_1d(ctx, MG_TYPE_F32, D / 2);
        uint64_t rng = 42;
        mg_test_fill_uniform(x->data, (size_t) mg_nelements(x), &rng, -1.0f, 1.0f);
        for (int t = 0; t < T; t++) mg_set_i32_1d(pos, t, positions[t]);
        for (int i = 0; i < D / 2; i++) ((float *) ff->data)[i] = 1.0f + 4.5f * (float) i;
        struct mg_tensor * y = mg_rope_ext(ctx, x, pos, ff, D, m, 10000.0f, 1.0f);
        struct mg_cgraph * g = mg_new_graph(ctx);
        mg_build_forward_expand(g, y);
        mg_graph_compute_with_ctx(ctx, g, 1);
        for (int t = 0; t < T; t++) {
            for (int h = 0; h < H; h++) {
                for (int i = 0; i < D / 2; i++) {
                    const int    j0 = m == MG_ROPE_NEOX ? i : 2 * i;
                    const int    j1 = m == MG_ROPE_NEOX ? i + D / 2 : 2 * i + 1;
                    const double th = positions[t] * pow(10000.0, -2.0 * i / D) / (1.0 + 4.5 * i);
                    const double x0 = mg_get_f32_nd(x, j0, h, t, 0), x1 = mg_get_f32_nd(x, j1, h, t, 0);
                    const double e0 = fabs(mg_get_f32_nd(y, j0, h, t, 0) - (x0 * cos(th) - x1 * sin(th)));
                    const double e1 = fabs(mg_get_f32_nd(y, j1, h, t, 0) - (x0 * sin(th) + x1 * cos(th)));
                    // float angles at position 300: a few ulps of 300 radians
                    ck_assert_msg(e0 < 1e-4 && e1 < 1e-4, "mode %d token %d head %d pair %d: %.3g %.3g", mode, t, h, i,
                                  e0, e1);
                }
            }
        }
        mg_free(ctx);
    }
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("arch");
    TCase * tc = MG_TCASE(s, "arch", test_llama_hparams_and_tensors, test_qwen2_hparams_and_tensors,
                             test_mkmodel_arch_flag, test_unknown_arch_refused_by_name,
                             test_tensor_of_another_arch_refused, test_rope_freq_factors_against_formula);
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    return s;
}
