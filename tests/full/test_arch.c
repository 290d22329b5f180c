// test_arch.c - the architectures beside qwen3: llama, qwen2 and qwen3moe
// (qwen3.c's find_arch, load_layer, load_experts, rotate). What the loader
// reads from each file, what it refuses (an unknown architecture by name, a
// tensor the architecture does not have by name and shape, expert counts
// llama.cpp refuses), and the RoPE variant Llama 3 adds (frequency factors)
// against a naive formula. The logits of llama and qwen2 are asserted against
// llama.cpp's in test_golden2.c (shapes tiny-llama, tiny-qwen2).
#include "harness.h"
#include "gguf_writer.h"
#include "model.h"
#include "ops.h"
#include "repack.h"

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
    // qwen3moe is known: what stops this file is its missing expert count
    expect_refused(file_of_arch("e.gguf", "qwen3moe"), "metadata key 'qwen3moe.expert_count' is missing", NULL);
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
    // ... and relabelled llama, its biases: layer_llama adds none, so none is loaded.
    expect_refused(relabel(q2, "qwen2", "llama", "as-llama2.gguf"), "tensor 'blk.0.attn_q.bias' [512, 1, 1, 1]",
                   "is not part of a llama model");
}
END_TEST

// ---------------------------------------------------------------------------
// qwen3moe: the experts' hyper-parameters and 3-D tensors
// ---------------------------------------------------------------------------

START_TEST(test_qwen3moe_hparams_and_tensors) {
    struct mg_model * m = mg_model_load(mkmodel("moe.gguf", "--preset tiny-qwen3moe --n-layer 1"));
    ck_assert_msg(m != NULL, "%s", mg_last_error());
    const struct mg_model_hparams * hp = &m->hp;
    ck_assert_str_eq(hp->arch_name, "qwen3moe");
    ck_assert_int_eq(hp->arch, MG_ARCH_QWEN3MOE);
    ck_assert_int_eq(hp->rope_type, MG_ROPE_NEOX);   // llama.cpp: LLAMA_ROPE_TYPE_NEOX for qwen3moe
    ck_assert_int_eq(hp->n_expert, 8);
    ck_assert_int_eq(hp->n_expert_used, 2);
    ck_assert_int_eq(hp->n_ff_exp, 256);
    ck_assert_float_eq(hp->expert_weights_scale, 0.0f);   // no key: not scaled
    ck_assert(hp->expert_weights_norm);                 // qwen3moe.cpp: norm_w = true
    const struct mg_layer * l = &m->layers[0];
    ck_assert_ptr_nonnull(l->q_norm);   // qwen3's attention
    ck_assert_ptr_nonnull(l->k_norm);
    ck_assert_ptr_null(l->ffn_gate);    // no dense feed-forward
    ck_assert_ptr_null(l->ffn_up);
    ck_assert_ptr_null(l->ffn_down);
    static const struct {
        const char * what;
        int64_t      ne[3];
    } want[] = {{"router", {512, 8, 1}}, {"gate", {512, 256, 8}}, {"up", {512, 256, 8}}, {"down", {256, 512, 8}}};
    const struct mg_tensor * got[] = {l->ffn_gate_inp, l->ffn_gate_exps, l->ffn_up_exps, l->ffn_down_exps};
    for (int i = 0; i < 4; i++) {
        ck_assert_msg(got[i] != NULL, "%s", want[i].what);
        for (int d = 0; d < 3; d++) ck_assert_int_eq(got[i]->ne[d], want[i].ne[d]);
        ck_assert_int_eq(got[i]->ne[3], 1);
        ck_assert_int_eq(got[i]->type, MG_TYPE_F32);
        // the header points at the file's bytes, all the experts' included
        const struct mg_gguf_tensor_info * info = mg_gguf_find_tensor(m->gguf, got[i]->name);
        ck_assert_ptr_eq(got[i]->data, info->data);
        ck_assert_uint_eq(mg_nbytes(got[i]), info->nbytes);
    }
    ck_assert_str_eq(l->ffn_down_exps->name, "blk.0.ffn_down_exps.weight");
    // Parameters counted by hand: the embeddings and the output (untied), the
    // last norm, then the layer: norms, Q K V O, the router and 8 experts of 3.
    const int64_t E = 512, V = hp->n_vocab, D = 64, H = 8, Hkv = 2, F = 256, X = 8;
    const int64_t layer = E + E * D * H + 2 * E * D * Hkv + D * H * E + 2 * D + E + E * X + 3 * E * F * X;
    ck_assert_int_eq(m->n_params, 2 * E * V + E + layer);
    ck_assert_uint_eq(m->n_weight_bytes, 4 * (size_t) m->n_params);   // all F32
    // A MoE layer's graph has room for its router and experts on top of a dense layer's.
    ck_assert_int_ge(mg_qwen3_graph_size(m), (64 + 2 * 2 + 30) * 1 + 256);
    mg_model_free(m);
}
END_TEST

// The model as mg_model_load_from_file gives it to the engine (repacking on):
// the absent dense matrices are skipped; the attention's Q4_0 matrices are
// repacked, and the expert stacks wherever repack.c takes 3-D weights.
START_TEST(test_qwen3moe_loads_with_repacking) {
    struct mg_model * m = mg_model_load_from_file(mkmodel("moe-q.gguf", "--preset tiny-qwen3moe --n-layer 1 --type q4_0"),
                                                  mg_model_default_params());
    ck_assert_msg(m != NULL, "%s", mg_last_error());
    const struct mg_layer * l = &m->layers[0];
    ck_assert_int_eq(l->ffn_gate_exps->type, MG_TYPE_Q4_0);
    const struct mg_tensor * w[] = {l->wq, l->ffn_gate_inp, l->ffn_gate_exps, l->ffn_up_exps, l->ffn_down_exps};
    for (int i = 0; i < 5; i++) {
        const bool want = mg_repack_available() && mg_repack_fits(w[i]);
        ck_assert_msg((w[i]->repacked != NULL) == want, "%s: repacked %d, fits %d", w[i]->name, w[i]->repacked != NULL,
                      want);
    }
    ck_assert_ptr_null(l->ffn_gate_inp->repacked);   // F32: read as it is
    if (mg_repack_available()) ck_assert_ptr_nonnull(l->wq->repacked);
    mg_model_free(m);
}
END_TEST

// mg info shows what the loader reads: the expert keys and the 3-D shapes.
START_TEST(test_qwen3moe_info) {
    const char * path = mkmodel("moe-i.gguf", "--preset tiny-qwen3moe --n-layer 1");
    struct mg_test_run r = mg_test_run_mg(dir, NULL, NULL, "info '%s'", path);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_msg(strstr(r.out, "qwen3moe.expert_count") != NULL && strstr(r.out, "qwen3moe.expert_used_count") != NULL &&
                      strstr(r.out, "qwen3moe.expert_feed_forward_length") != NULL,
                  "%.2000s", r.out);
    ck_assert_msg(strstr(r.out, "blk.0.ffn_down_exps.weight") != NULL && strstr(r.out, "[256, 512, 8]") != NULL,
                  "%.4000s", r.out);
    mg_test_run_free(&r);
}
END_TEST

// path rewritten to DIR/out_name: every pair but key, then key = value (a
// u32; value < 0 leaves it out), every tensor but drop, and, with extra_as,
// a copy of blk.0.attn_q.weight under that name.
static const char * rewritten(const char * path, const char * out_name, const char * key, int64_t value,
                              const char * drop, const char * extra_as) {
    struct mg_gguf * g = mg_gguf_open(path);
    ck_assert_msg(g != NULL, "%s", mg_last_error());
    struct mg_gguf_writer * w = mg_gguf_writer_new();
    const char * skip[] = {key, NULL};
    ck_assert(mg_gguf_writer_copy_kvs(w, g, key != NULL ? skip : NULL));
    if (key != NULL && value >= 0) ck_assert(mg_gguf_writer_set_u32(w, key, (uint32_t) value));
    for (int64_t i = 0; i < mg_gguf_n_tensors(g); i++) {
        const struct mg_gguf_tensor_info * t = mg_gguf_tensor(g, i);
        if (drop != NULL && strcmp(t->name, drop) == 0) continue;
        ck_assert(mg_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data));
        if (extra_as != NULL && strcmp(t->name, "blk.0.attn_q.weight") == 0) {
            ck_assert(mg_gguf_writer_add_tensor(w, extra_as, t->type, t->n_dims, t->ne, t->data));
        }
    }
    const char * out = in_dir(out_name);
    ck_assert_msg(mg_gguf_writer_write(w, out), "%s", mg_last_error());
    mg_gguf_writer_free(w);
    mg_gguf_close(g);
    return out;
}

// What llama.cpp refuses (llama_model_base::load_hparams asserts 0 <
// expert_used_count <= expert_count <= LLAMA_MAX_EXPERTS; qwen3moe.cpp throws
// for 0 experts; create_tensor checks every name and shape), refused here by
// file, key or tensor.
START_TEST(test_qwen3moe_bad_files_refused) {
    const char * good = mkmodel("moe-b.gguf", "--preset tiny-qwen3moe --n-layer 1");
    const char * what = "qwen3moe.expert_used_count";
    expect_refused(rewritten(good, "u0.gguf", what, 0, NULL, NULL), "metadata 'qwen3moe.expert_used_count' = 0",
                   "must be in 1..8");
    expect_refused(rewritten(good, "u9.gguf", what, 9, NULL, NULL), "metadata 'qwen3moe.expert_used_count' = 9",
                   "at most expert_count");
    expect_refused(rewritten(good, "un.gguf", what, -1, NULL, NULL), "metadata key 'qwen3moe.expert_used_count' is "
                                                                     "missing", "un.gguf");
    expect_refused(rewritten(good, "x0.gguf", "qwen3moe.expert_count", 0, NULL, NULL), "'qwen3moe.expert_count' = 0",
                   NULL);
    expect_refused(rewritten(good, "x513.gguf", "qwen3moe.expert_count", 513, NULL, NULL),
                   "'qwen3moe.expert_count' = 513 must be in 1..512", "LLAMA_MAX_EXPERTS");
    // Every error names the file.
    expect_refused(rewritten(good, "x0.gguf", "qwen3moe.expert_count", 0, NULL, NULL), "x0.gguf", NULL);
    // A missing expert stack, by name.
    expect_refused(rewritten(good, "no-up.gguf", NULL, 0, "blk.0.ffn_up_exps.weight", NULL),
                   "tensor 'blk.0.ffn_up_exps.weight' is missing", NULL);
    expect_refused(rewritten(good, "no-router.gguf", NULL, 0, "blk.0.ffn_gate_inp.weight", NULL),
                   "tensor 'blk.0.ffn_gate_inp.weight' is missing", NULL);
    // Tensors that do not match the metadata: 4 experts, or experts of 128.
    expect_refused(rewritten(good, "x4.gguf", "qwen3moe.expert_count", 4, NULL, NULL),
                   "tensor 'blk.0.ffn_gate_inp.weight' has shape [512, 8, 1, 1], expected [512, 4, 1, 1]", NULL);
    expect_refused(rewritten(good, "f128.gguf", "qwen3moe.expert_feed_forward_length", 128, NULL, NULL),
                   "tensor 'blk.0.ffn_gate_exps.weight' has shape [512, 256, 8, 1], expected [512, 128, 8, 1]", NULL);
    // No expert_feed_forward_length: n_ff / n_expert_used (512 / 2 = 256, as llama.cpp): loads.
    struct mg_model * m = mg_model_load(rewritten(good, "nf.gguf", "qwen3moe.expert_feed_forward_length", -1, NULL, NULL));
    ck_assert_msg(m != NULL, "%s", mg_last_error());
    ck_assert_int_eq(m->hp.n_ff_exp, 256);
    mg_model_free(m);
    // ... but with n_ff 1024 that is 512: the experts' 256 no longer match.
    const char * nf = rewritten(good, "nf2.gguf", "qwen3moe.expert_feed_forward_length", -1, NULL, NULL);
    expect_refused(rewritten(nf, "nf3.gguf", "qwen3moe.feed_forward_length", 1024, NULL, NULL),
                   "expected [512, 512, 8, 1]", NULL);
    // A dense feed-forward matrix in a qwen3moe file is no part of it.
    expect_refused(rewritten(good, "dense.gguf", NULL, 0, NULL, "blk.0.ffn_gate.weight"),
                   "tensor 'blk.0.ffn_gate.weight' [512, 512, 1, 1]", "is not part of a qwen3moe model");
    // A dense architecture's file with experts is still refused.
    const char * q3 = mkmodel("q3e.gguf", "--preset tiny --n-layer 1");
    expect_refused(rewritten(q3, "q3e2.gguf", "qwen3.expert_count", 8, NULL, NULL), "'qwen3.expert_count' = 8",
                   "mixture-of-experts models are not supported yet");
}
END_TEST

// mkmodel's expert flags: --arch qwen3moe needs them, the dense
// architectures refuse them, and the counts are llama.cpp's.
START_TEST(test_mkmodel_expert_flags) {
    struct mg_model * m = mg_model_load(
        mkmodel("e4.gguf", "--preset tiny --n-layer 1 --arch qwen3moe --n-expert 4 --n-expert-used 2"));
    ck_assert_msg(m != NULL, "%s", mg_last_error());
    ck_assert_int_eq(m->hp.n_expert, 4);
    ck_assert_int_eq(m->hp.n_ff_exp, 768 / 2);   // tiny's n_ff / n_expert_used
    ck_assert_int_eq(m->layers[0].ffn_down_exps->ne[0], 384);
    ck_assert_int_eq(m->layers[0].ffn_down_exps->ne[2], 4);
    mg_model_free(m);
    // the preset's experts, one flag changed; --arch qwen3 drops them
    m = mg_model_load(mkmodel("e16.gguf", "--preset tiny-qwen3moe --n-layer 1 --n-embd 256 --n-head 4 --n-expert 16 "
                                          "--n-ff-exp 512"));
    ck_assert_msg(m != NULL, "%s", mg_last_error());
    ck_assert_int_eq(m->hp.n_expert, 16);
    ck_assert_int_eq(m->hp.n_expert_used, 2);
    ck_assert_int_eq(m->layers[0].ffn_up_exps->ne[1], 512);
    mg_model_free(m);
    m = mg_model_load(mkmodel("dense.gguf", "--preset tiny-qwen3moe --n-layer 1 --arch qwen3"));
    ck_assert_msg(m != NULL, "%s", mg_last_error());
    ck_assert_int_eq(m->hp.n_expert, 0);
    ck_assert_ptr_nonnull(m->layers[0].ffn_gate);
    mg_model_free(m);
    const char * out = in_dir("bad.gguf");
    mg_test_expect_mg_error(dir, "--arch qwen3moe needs --n-expert and --n-expert-used", NULL,
                            "mkmodel --preset tiny --arch qwen3moe -o '%s'", out);
    mg_test_expect_mg_error(dir, "are for --arch qwen3moe, not qwen3", NULL, "mkmodel --preset tiny --n-expert 8 -o '%s'",
                            out);
    mg_test_expect_mg_error(dir, "--n-expert-used 9: must be in 1..8", NULL,
                            "mkmodel --preset tiny-qwen3moe --n-expert-used 9 -o '%s'", out);
    mg_test_expect_mg_error(dir, "--n-expert 513: must be in 1..512", NULL,
                            "mkmodel --preset tiny-qwen3moe --n-expert 513 -o '%s'", out);
}
END_TEST

// The real shape's keys are Qwen3-30B-A3B's config.json's. Cut to one layer
// of 8 experts of 256 in Q4_0 here: one real layer (128 experts of 768) is
// 330 MB, too slow to draw for a test.
START_TEST(test_qwen3_30b_a3b_preset_keys) {
    const char * path = mkmodel("a3b.gguf", "--preset qwen3-30b-a3b --n-layer 1 --n-expert 8 --n-ff-exp 256 --type q4_0");
    struct mg_model * m = mg_model_load(path);
    ck_assert_msg(m != NULL, "%s", mg_last_error());
    const struct mg_model_hparams * hp = &m->hp;
    ck_assert_int_eq(hp->n_embd, 2048);
    ck_assert_int_eq(hp->n_head, 32);
    ck_assert_int_eq(hp->n_head_kv, 4);
    ck_assert_int_eq(hp->head_dim, 128);
    ck_assert_int_eq(hp->n_expert_used, 8);
    ck_assert_int_eq(hp->n_ff, 6144);
    ck_assert_int_eq(hp->n_ctx_train, 40960);
    ck_assert_float_eq(hp->rope_freq_base, 1e6f);
    ck_assert_float_eq(hp->rms_eps, 1e-6f);
    ck_assert_ptr_ne(m->output, m->tok_embd);   // untied, as the model
    mg_model_free(m);
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
                             test_tensor_of_another_arch_refused, test_rope_freq_factors_against_formula,
                             test_qwen3moe_hparams_and_tensors, test_qwen3moe_loads_with_repacking, test_qwen3moe_info,
                             test_qwen3moe_bad_files_refused, test_mkmodel_expert_flags, test_qwen3_30b_a3b_preset_keys);
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    return s;
}
