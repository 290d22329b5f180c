// test_model_quantize.c - mg_model_quantize (full/quantize.c), the library
// function behind mg quantize, called without the binary: the files it writes
// against the sha256 of llama-quantize's files from the same input
// (tests/fixtures/golden2/models.tsv), its progress reports against the file
// it wrote, its error sums against the errors recomputed from that file, and
// every bad parameter or path refused by name with no file left behind.
#include "harness.h"
#include "gguf.h"
#include "mg.h"
#include "outfile.h"
#include "quantize.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static char dir[64], tiny_f32[512];

static void setup(void) {
    snprintf(tiny_f32, sizeof(tiny_f32), "%s", mg_test_fixture("models/tiny-f32.gguf"));
    mg_test_make_dir(dir, sizeof(dir), "model_quantize");
}

static void teardown(void) {
    mg_test_remove_dir(dir);
}

static bool exists(const char * path) {
    struct stat st;
    return stat(path, &st) == 0;
}

static void file_sha256(const char * path, char out[65]) {
    size_t          size;
    unsigned char * bytes = mg_test_read_file(path, &size);
    ck_assert_msg(bytes != NULL, "cannot read %s", path);
    mg_test_sha256_hex(bytes, size, out);
    free(bytes);
}

static struct mg_quantize_params params_for(const char * type, int n_threads) {
    struct mg_quant_option    o;
    struct mg_quantize_params p = mg_quantize_default_params();
    ck_assert_msg(mg_quant_option_parse(type, &o), "no TYPE %s", type);
    p.ftype     = o.ftype;
    p.n_threads = n_threads;
    return p;
}

// ---------------------------------------------------------------------------
// The bytes: llama-quantize's, for every type it was asked for, on 1..3 threads
// ---------------------------------------------------------------------------

// The rows of models.tsv but f32 (the master itself).
static const char * const types[] = {"f16",    "bf16",   "q8_0",   "q4_0",   "q4_1", "q5_0",  "q5_1",
                                     "q2_k",   "q3_k_m", "q4_k_m", "q5_k_m", "q6_k", "iq4_nl"};

START_TEST(test_every_type_is_llama_quantize_s) {
    const char *                    type = types[_i];
    const struct mg_quantize_params p    = params_for(type, 1 + _i % 3);   // the bytes may not depend on it
    const char *                    out  = mg_test_path_in(dir, "out.gguf");
    ck_assert_msg(mg_model_quantize(tiny_f32, out, &p), "%s: %s", type, mg_last_error());
    char got[65], want[65];
    file_sha256(out, got);
    mg_test_recorded_sha256("golden2/models.tsv", type, want);
    ck_assert_msg(strcmp(got, want) == 0, "%s on %d threads: sha256 %s, llama-quantize's file has %s", type,
                  p.n_threads, got, want);
}
END_TEST

// ---------------------------------------------------------------------------
// A mixture of experts: mg mkmodel --preset tiny-qwen3moe (bit-reproducible),
// quantized, against llama-quantize's files of the same master
// (golden2/models-tiny-qwen3moe.tsv: all 13 types, compared with cmp when it
// was recorded). The types here cover every rule llama-quantize has for 8
// experts (attn_v and attn_k in Q8_0, attn_output in Q5_K, ffn_down_exps as
// ffn_down) and every 3-D quantizer family; 57 MB each, so not all 13.
// ---------------------------------------------------------------------------

static char moe_dir[64], moe_master[1100];

static void setup_moe_master(void) {
    mg_test_make_dir(moe_dir, sizeof(moe_dir), "model_quantize_moe");
    snprintf(moe_master, sizeof(moe_master), "%s", mg_test_path_in(moe_dir, "tiny-qwen3moe-f32.gguf"));
    struct mg_test_run r = mg_test_run_mg(moe_dir, NULL, NULL, "mkmodel --preset tiny-qwen3moe -o '%s'", moe_master);
    ck_assert_msg(r.status == 0, "mkmodel --preset tiny-qwen3moe: %s", r.err);
    mg_test_run_free(&r);
}

static void teardown_moe_master(void) {
    mg_test_remove_dir(moe_dir);
}

static const char * const moe_types[] = {"f32", "q8_0", "q4_0", "q2_k", "q3_k_m", "q4_k_m", "iq4_nl"};

START_TEST(test_qwen3moe_is_llama_quantize_s) {
    const char * type = moe_types[_i];
    char         got[65], want[65];
    if (_i == 0) {   // the master itself, as mg mkmodel draws it (sum4: the same bytes on every machine)
        file_sha256(moe_master, got);
    } else {
        const struct mg_quantize_params p   = params_for(type, 1 + _i % 2);
        const char *                    out = mg_test_path_in(dir, "moe.gguf");
        ck_assert_msg(mg_model_quantize(moe_master, out, &p), "%s: %s", type, mg_last_error());
        file_sha256(out, got);
    }
    mg_test_recorded_sha256("golden2/models-tiny-qwen3moe.tsv", type, want);
    ck_assert_msg(strcmp(got, want) == 0, "tiny-qwen3moe %s: sha256 %s, llama-quantize's file has %s", type, got, want);
}
END_TEST

// ---------------------------------------------------------------------------
// The progress reports, against the file written
// ---------------------------------------------------------------------------

enum { MAX_TENSORS = 64 };

struct reports {
    int    n_planned, n_done, n_tensor;
    bool   planned_first, in_order;
    char   path[512];
    int    n_tensors;
    char   names[MAX_TENSORS][64];
    int    types[MAX_TENSORS];
    size_t nbytes[MAX_TENSORS];
    double err2[MAX_TENSORS];
    struct mg_quantize_progress done;   // the report at MG_QUANTIZE_DONE
};

static void record(const struct mg_quantize_progress * p, void * user_data) {
    struct reports * r = user_data;
    switch (p->stage) {
        case MG_QUANTIZE_PLANNED:
            r->planned_first = r->n_tensor == 0 && r->n_done == 0;
            r->n_planned++;
            r->n_tensors = p->n_tensors;
            snprintf(r->path, sizeof(r->path), "%s", p->path ? p->path : "(null)");
            break;
        case MG_QUANTIZE_TENSOR:
            ck_assert_int_lt(p->i, MAX_TENSORS);
            r->in_order = r->in_order && p->i == r->n_tensor;
            snprintf(r->names[p->i], sizeof(r->names[p->i]), "%s", p->tensor->in->name);
            r->types[p->i]  = (int) p->tensor->type;
            r->nbytes[p->i] = p->tensor->nbytes;
            r->err2[p->i]   = p->tensor->err2;
            r->n_tensor++;
            break;
        case MG_QUANTIZE_DONE:
            r->n_done++;
            r->done = *p;
            break;
    }
}

// sum (x - y)^2 over tensor q of the written file against x of the input, dequantized here.
static double error_in_file(const struct mg_gguf_tensor_info * q, const struct mg_gguf_tensor_info * x) {
    const int64_t n = x->ne[0] * x->ne[1] * x->ne[2] * x->ne[3];
    float *       y = malloc((size_t) n * sizeof(float));
    ck_assert_ptr_nonnull(y);
    mg_get_type_traits((enum mg_type) q->type)->to_float(q->data, y, n);
    double e = 0;
    for (int64_t i = 0; i < n; i++) {
        const double d = (double) ((const float *) x->data)[i] - (double) y[i];
        e += d * d;
    }
    free(y);
    return e;
}

// tiny-f32 quantized to out as type, every report recorded into r.
static void quantize_recorded(const char * type, bool stats, bool dry_run, const char * out, struct reports * r) {
    struct mg_quantize_params p = params_for(type, 2);
    p.stats         = stats;
    p.dry_run       = dry_run;
    p.progress      = record;
    p.progress_data = r;
    *r              = (struct reports) {.in_order = true};
    ck_assert_msg(mg_model_quantize(tiny_f32, out, &p), "%s", mg_last_error());
}

START_TEST(test_progress_is_the_file) {
    struct reports r;
    const char *   out = mg_test_path_in(dir, "q4_k_m.gguf");
    quantize_recorded("Q4_K_M", true, false, out, &r);
    ck_assert(r.planned_first && r.in_order);
    ck_assert_int_eq(r.n_planned, 1);
    ck_assert_int_eq(r.n_done, 1);
    ck_assert_str_eq(r.path, out);

    struct mg_gguf * q = mg_gguf_open(out), * x = mg_gguf_open(tiny_f32);
    ck_assert_msg(q != NULL && x != NULL, "%s", mg_last_error());
    ck_assert_int_eq(r.n_tensors, mg_gguf_n_tensors(q));
    ck_assert_int_eq(r.n_tensor, r.n_tensors);
    size_t  size_in = 0, size_out = 0;
    int64_t n_weights = 0;
    for (int i = 0; i < r.n_tensors; i++) {
        // Reported in the order written, with the type and size written.
        const struct mg_gguf_tensor_info * qt = mg_gguf_tensor(q, i), * xt = mg_gguf_find_tensor(x, qt->name);
        ck_assert_str_eq(r.names[i], qt->name);
        ck_assert_int_eq(r.types[i], qt->type);
        ck_assert_uint_eq(r.nbytes[i], qt->nbytes);
        size_in += xt->nbytes;
        size_out += qt->nbytes;
        n_weights += xt->ne[0] * xt->ne[1] * xt->ne[2] * xt->ne[3];
        if (qt->type == xt->type) continue;
        const double e = error_in_file(qt, xt);
        ck_assert_msg(e > 0 && r.err2[i] > 0.999999 * e && r.err2[i] < 1.000001 * e, "%s: err2 %g, the file's %g",
                      qt->name, r.err2[i], e);
    }
    ck_assert_uint_eq(r.done.size_in, size_in);
    ck_assert_uint_eq(r.done.size_out, size_out);
    ck_assert_int_eq(r.done.n_weights, n_weights);
    mg_gguf_close(q);
    mg_gguf_close(x);
}
END_TEST

START_TEST(test_dry_run_writes_nothing) {
    struct reports r;
    const char *   out = mg_test_path_in(dir, "never.gguf");
    quantize_recorded("Q8_0", false, true, out, &r);
    ck_assert(!exists(out));
    ck_assert_str_eq(r.path, "(null)");
    ck_assert_int_eq(r.n_tensor, r.n_tensors);
    ck_assert_int_eq(r.n_done, 1);
    ck_assert_uint_gt(r.done.size_out, 0);
    ck_assert_uint_lt(r.done.size_out, r.done.size_in);   // Q8_0 is smaller than F32
}
END_TEST

// A library call may write the same path again (the CLI's rule that two
// outputs of one command may not be one file is not the library's).
START_TEST(test_same_output_twice) {
    const char *                    out = mg_test_path_in(dir, "again.gguf");
    const struct mg_quantize_params q8  = params_for("Q8_0", 2), q4 = params_for("Q4_0", 2);
    ck_assert_msg(mg_model_quantize(tiny_f32, out, &q8), "%s", mg_last_error());
    ck_assert_msg(mg_model_quantize(tiny_f32, out, &q4), "%s", mg_last_error());
    char got[65], want[65];
    file_sha256(out, got);
    mg_test_recorded_sha256("golden2/models.tsv", "q4_0", want);
    ck_assert_str_eq(got, want);
    ck_assert_int_eq(mg_test_count_temp_files(out), 0);
}
END_TEST

// One call's input is not remembered by the next: a -> b, then b -> a (a
// library in a long-lived process quantizes one file after another).
START_TEST(test_inputs_do_not_pile_up) {
    const char *                    a   = mg_test_path_in(dir, "a.gguf");
    const char *                    b   = mg_test_path_in(dir, "b.gguf");
    const struct mg_quantize_params f16 = params_for("F16", 1);
    ck_assert_msg(mg_model_quantize(tiny_f32, a, &f16), "%s", mg_last_error());
    ck_assert_msg(mg_model_quantize(a, b, &f16), "%s", mg_last_error());
    ck_assert_msg(mg_model_quantize(b, a, &f16), "b -> a: %s", mg_last_error());
    ck_assert_msg(!mg_model_quantize(a, a, &f16), "a -> a was accepted");   // within one call still refused
}
END_TEST

// ---------------------------------------------------------------------------
// Refusals: false, an error naming the parameter, the file or the tensor, and no file
// ---------------------------------------------------------------------------

static void expect_refused(const char * in, const char * out, const struct mg_quantize_params * p, const char * what) {
    ck_assert_msg(!mg_model_quantize(in, out, p), "accepted; expected an error naming '%s'", what);
    ck_assert_msg(strstr(mg_last_error(), what) != NULL, "no '%s' in: %s", what, mg_last_error());
    ck_assert_msg(!exists(out), "%s was written", out);
    ck_assert_int_eq(mg_test_count_temp_files(out), 0);
}

START_TEST(test_bad_parameters) {
    const char *              out = mg_test_path_in(dir, "out.gguf");
    struct mg_quantize_params p   = params_for("Q8_0", 1);
    p.ftype = (enum mg_ftype) 99;
    expect_refused(tiny_f32, out, &p, "ftype 99");
    p.ftype = (enum mg_ftype) 4;   // llama.cpp's retired MOSTLY_Q4_1_SOME_F16
    expect_refused(tiny_f32, out, &p, "ftype 4");
    p = params_for("Q8_0", 0);
    expect_refused(tiny_f32, out, &p, "n_threads must be 1..512, got 0");
    p = params_for("Q8_0", 513);
    expect_refused(tiny_f32, out, &p, "n_threads must be 1..512, got 513");
}
END_TEST

START_TEST(test_bad_paths) {
    const struct mg_quantize_params p   = params_for("Q8_0", 1);
    const char *                    out = mg_test_path_in(dir, "out.gguf");
    expect_refused(mg_test_path_in(dir, "missing.gguf"), out, &p, "No such file or directory");
    expect_refused(mg_test_fixture("README.md"), out, &p, "magic");
    expect_refused(tiny_f32, mg_test_path_in(dir, "nodir/out.gguf"), &p, "does not exist");
    // The input itself, by another name: refused before any work, and left as it was.
    char copy[128], same[192], before[65], after[65];
    snprintf(copy, sizeof(copy), "%s/copy.gguf", dir);
    snprintf(same, sizeof(same), "%s/./copy.gguf", dir);
    ck_assert_msg(mg_model_quantize(tiny_f32, copy, &p), "%s", mg_last_error());
    file_sha256(copy, before);
    ck_assert(!mg_model_quantize(copy, same, &p));
    ck_assert_msg(strstr(mg_last_error(), "is the same file as the input") != NULL, "%s", mg_last_error());
    file_sha256(copy, after);
    ck_assert_str_eq(before, after);
    ck_assert_int_eq(mg_test_count_temp_files(copy), 0);
}
END_TEST

// A quantized input is refused unless allow_requantize (the error names it: the CLI says --allow-requantize).
START_TEST(test_requantize_needs_allowing) {
    const char *              q8  = mg_test_path_in(dir, "q8_0.gguf");
    const char *              out = mg_test_path_in(dir, "q4_0.gguf");
    struct mg_quantize_params p   = params_for("Q8_0", 2);
    ck_assert_msg(mg_model_quantize(tiny_f32, q8, &p), "%s", mg_last_error());
    p = params_for("Q4_0", 2);
    expect_refused(q8, out, &p, "allow_requantize");
    ck_assert(strstr(mg_last_error(), "is already quantized (q8_0)") != NULL);
    p.allow_requantize = true;
    ck_assert_msg(mg_model_quantize(q8, out, &p), "%s", mg_last_error());
    ck_assert(exists(out));
}
END_TEST

// Each test in a directory of its own, with time for its quantizations.
static void in_own_dir(TCase * tc, int timeout) {
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, timeout);
}

Suite * mg_test_suite(void) {
    Suite * s  = suite_create("model_quantize");
    TCase * tc = tcase_create("bytes");
    tcase_add_loop_test(tc, test_every_type_is_llama_quantize_s, 0, (int) (sizeof(types) / sizeof(types[0])));
    suite_add_tcase(s, tc);
    in_own_dir(tc, 300);
    TCase * moe = tcase_create("qwen3moe");
    tcase_add_unchecked_fixture(moe, setup_moe_master, teardown_moe_master);   // one master for every type
    tcase_add_loop_test(moe, test_qwen3moe_is_llama_quantize_s, 0, (int) (sizeof(moe_types) / sizeof(moe_types[0])));
    suite_add_tcase(s, moe);
    in_own_dir(moe, 300);
    in_own_dir(MG_TCASE(s, "reports", test_progress_is_the_file, test_dry_run_writes_nothing, test_same_output_twice,
                        test_inputs_do_not_pile_up), 120);
    in_own_dir(MG_TCASE(s, "refusals", test_bad_parameters, test_bad_paths, test_requantize_needs_allowing), 120);
    return s;
}
