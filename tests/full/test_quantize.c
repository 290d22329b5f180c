// test_quantize.c - mg quantize, run as a command (full/build/mg) and judged by
// its output files: against the files llama-quantize made from the same input
// (tiny-q8_0, tiny-q4_k_m), against llama-quant.cpp's rules worked out by hand
// for the fixtures' shape, against error bounds that follow from each type's
// bits per weight, and on every way it can fail.
//
// $MG_BIN runs another build of mg (say, one built with -fsanitize=address).
#define _POSIX_C_SOURCE 200809L   // mkdtemp, fork, setrlimit, signal
#include "harness.h"
#include "gguf.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[64], log_path[128];
static char mg_bin[512], tiny_f32[512], tiny_q8_0[512], tiny_q4_k_m[512];

static char * log_text;   // the log file as last read; NULL after a new command

static void forget_log(void) {
    free(log_text);
    log_text = NULL;
}

static void setup(void) {
    snprintf(mg_bin, sizeof(mg_bin), "%s", mg_test_mg_bin());
    snprintf(tiny_f32, sizeof(tiny_f32), "%s", mg_test_fixture("models/tiny-f32.gguf"));
    snprintf(tiny_q8_0, sizeof(tiny_q8_0), "%s", mg_test_fixture("models/tiny-q8_0.gguf"));
    snprintf(tiny_q4_k_m, sizeof(tiny_q4_k_m), "%s", mg_test_fixture("models/tiny-q4_k_m.gguf"));
    ck_assert_msg(access(mg_bin, X_OK) == 0, "%s is missing: build it with make -C full", mg_bin);
    mg_test_make_dir(dir, sizeof(dir), "quantize");
    snprintf(log_path, sizeof(log_path), "%s/log", dir);
}

static void teardown(void) {
    forget_log();
    mg_test_remove_dir(dir);
}

#define in_dir(name) mg_test_path_in(dir, name)

static bool exists(const char * path) {
    struct stat st;
    return stat(path, &st) == 0;
}

// Run "mg ARGS" with stdout and stderr into dir/log; its exit status.
static int mg(const char * args) {
    char cmd[8192];
    snprintf(cmd, sizeof(cmd), "'%s' %s > '%s' 2>&1", mg_bin, args, log_path);
    forget_log();
    const int status = system(cmd);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// What the last command printed (NUL-terminated, valid until the next one).
static const char * mg_log(void) {
    if (log_text == NULL) log_text = mg_test_read_file(log_path, NULL);
    return log_text ? log_text : "";
}

static int quantize(const char * flags, const char * in, const char * out, const char * type) {
    char args[4096];
    snprintf(args, sizeof(args), "quantize %s '%s' '%s' %s", flags, in, out, type);
    return mg(args);
}

// A failed command: non-zero, said why (a line naming the command and `what`),
// and left nothing behind: no output, no half-written temporary.
static void expect_failure(int status, const char * out, const char * what) {
    const char * log = mg_log();
    ck_assert_msg(status != 0, "exit status 0; log:\n%s", log);
    ck_assert_msg(status < 128, "killed by signal %d; log:\n%s", status - 128, log);
    ck_assert_msg(strstr(log, "mg quantize: ") != NULL && strstr(log, what) != NULL, "no '%s' in:\n%s", what, log);
    ck_assert_msg(!exists(out), "%s was left behind", out);
    ck_assert_msg(mg_test_count_temp_files(out) == 0, "a temporary file of %s was left behind", out);
}

// ---------------------------------------------------------------------------
// Reading results
// ---------------------------------------------------------------------------

static int64_t nrows(const struct mg_gguf_tensor_info * t) {
    return t->ne[1] * t->ne[2] * t->ne[3];
}

// sqrt(mean((x - dequant(q))^2)) of a tensor against the F32 weights it came
// from, dequantized here row by row with the type traits; *rms_x gets sqrt(mean(x^2)).
static double rms_error(const struct mg_gguf_tensor_info * q, const struct mg_gguf_tensor_info * x, double * rms_x) {
    ck_assert_int_eq(x->type, MG_TYPE_F32);
    ck_assert_msg(mg_type_is_supported(q->type), "%s: type %d", q->name, q->type);
    const struct mg_type_traits * tr  = mg_get_type_traits((enum mg_type) q->type);
    const int64_t                 n   = x->ne[0];
    const size_t                  row = mg_row_size((enum mg_type) q->type, n);
    float *                       y   = malloc((size_t) n * sizeof(float));
    double                        e2 = 0, x2 = 0;
    for (int64_t r = 0; r < nrows(x); r++) {
        const float * xr = (const float *) x->data + r * n;
        tr->to_float((const char *) q->data + (size_t) r * row, y, n);
        for (int64_t i = 0; i < n; i++) {
            e2 += ((double) xr[i] - y[i]) * ((double) xr[i] - y[i]);
            x2 += (double) xr[i] * xr[i];
        }
    }
    free(y);
    const double count = (double) (n * nrows(x));
    if (rms_x) *rms_x = sqrt(x2 / count);
    return sqrt(e2 / count);
}

static uint32_t get_u32(const struct mg_gguf * g, const char * key) {
    uint32_t v = 0;
    ck_assert_msg(mg_gguf_get_u32(g, key, &v), "%s: %s", key, mg_last_error());
    return v;
}

static struct mg_gguf * open_ok(const char * path) {
    struct mg_gguf * g = mg_gguf_open(path);
    ck_assert_msg(g != NULL, "%s", mg_last_error());
    return g;
}

// ---------------------------------------------------------------------------
// Against llama-quantize's own output
// ---------------------------------------------------------------------------

// The reference rounding is deterministic, and mg quantize mirrors the order of
// tensors and keys, so the whole file comes out as llama-quantize wrote it.
static void expect_same_tensors(const char * ours_path, const char * ref_path) {
    struct mg_gguf * ours = open_ok(ours_path), * ref = open_ok(ref_path);
    ck_assert_int_eq(mg_gguf_n_tensors(ours), mg_gguf_n_tensors(ref));
    for (int64_t i = 0; i < mg_gguf_n_tensors(ref); i++) {
        const struct mg_gguf_tensor_info * r = mg_gguf_tensor(ref, i);
        const struct mg_gguf_tensor_info * o = mg_gguf_find_tensor(ours, r->name);
        ck_assert_msg(o != NULL, "no %s", r->name);
        ck_assert_msg(o->type == r->type, "%s: type %s, llama-quantize wrote %s", r->name,
                      mg_gguf_ggml_type_name(o->type), mg_gguf_ggml_type_name(r->type));
        for (int d = 0; d < MG_MAX_DIMS; d++) ck_assert_int_eq(o->ne[d], r->ne[d]);
        ck_assert_uint_eq(o->nbytes, r->nbytes);
        ck_assert_msg(memcmp(o->data, r->data, r->nbytes) == 0, "%s: data differs", r->name);
    }
    mg_gguf_close(ours);
    mg_gguf_close(ref);
    size_t ours_n = 0, ref_n = 0;
    char * a = mg_test_read_file(ours_path, &ours_n), * b = mg_test_read_file(ref_path, &ref_n);
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(ours_n, ref_n);
    ck_assert_msg(memcmp(a, b, ref_n) == 0, "same tensors, but the files differ (metadata or order)");
    free(a);
    free(b);
}

START_TEST(test_q8_0_is_llama_quantize_output) {
    const char * out = in_dir("q8_0.gguf");
    ck_assert_msg(quantize("-t 3", tiny_f32, out, "Q8_0") == 0, "%s", mg_log());
    expect_same_tensors(out, tiny_q8_0);
}
END_TEST

START_TEST(test_q4_k_m_is_llama_quantize_output) {
    const char * out = in_dir("q4_k_m.gguf");
    ck_assert_msg(quantize("-t 1", tiny_f32, out, "q4_k_m") == 0, "%s", mg_log());

    // As asked of any correct quantizer: the fixture's tensor types, and each
    // tensor's RMS error within 1% of the error of llama-quantize's bytes.
    struct mg_gguf * ours = open_ok(out), * ref = open_ok(tiny_q4_k_m), * f32 = open_ok(tiny_f32);
    for (int64_t i = 0; i < mg_gguf_n_tensors(ref); i++) {
        const struct mg_gguf_tensor_info * r = mg_gguf_tensor(ref, i);
        const struct mg_gguf_tensor_info * o = mg_gguf_find_tensor(ours, r->name);
        const struct mg_gguf_tensor_info * x = mg_gguf_find_tensor(f32, r->name);
        ck_assert_msg(o != NULL && x != NULL, "no %s", r->name);
        ck_assert_msg(o->type == r->type, "%s: %s, llama-quantize chose %s", r->name, mg_gguf_ggml_type_name(o->type),
                      mg_gguf_ggml_type_name(r->type));
        const double e_ours = rms_error(o, x, NULL), e_ref = rms_error(r, x, NULL);
        ck_assert_msg(fabs(e_ours - e_ref) <= 0.01 * e_ref, "%s: rms error %g, llama-quantize's %g", r->name, e_ours,
                      e_ref);
    }
    mg_gguf_close(ours);
    mg_gguf_close(ref);
    mg_gguf_close(f32);
    // And in fact every byte is llama-quantize's.
    expect_same_tensors(out, tiny_q4_k_m);
}
END_TEST

// ---------------------------------------------------------------------------
// Every TYPE: the types llama-quant.cpp's rules give the fixture's shape, by hand
// ---------------------------------------------------------------------------

// The tiny model: 2 layers, n_head 4 / n_head_kv 2 (n_gqa 2, so no rule that
// needs n_gqa >= 4 fires), tied embeddings, every row a multiple of 256 (no
// shape fallback). From llama_tensor_get_type_impl (src/llama-quant.cpp):
//   - a tied token_embd is the output matrix: Q6_K for every quantized ftype but Q8_0;
//   - use_more_bits(i, 2) is false for layer 0 and true for layer 1 (i >= 7*2/8 = 1);
//   - Q2_K: attn_v Q3_K (n_gqa < 4), ffn_down Q3_K, attn_output Q3_K;
//   - Q3_K_M: attn_v Q5_K in the first 2, ffn_down Q4_K (layer >= 2/16 = 0), attn_output Q4_K;
//   - Q3_K_L: attn_v, ffn_down, attn_output Q5_K;
//   - Q4_K_S: attn_v Q5_K in the first 4, ffn_down Q5_K only below layer 2/8 = 0 (none);
//   - Q4_K_M / Q5_K_M: attn_v and ffn_down Q6_K where use_more_bits (layer 1);
//   - IQ4_NL: attn_v Q5_K only if n_gqa >= 4, ffn_down Q5_K only below layer 0: none.
// --pure skips all of that: every matrix is the TYPE's own tensor type.
struct expect {
    const char * type;       // as typed on the command line
    const char * flags;
    uint32_t     file_type;  // llama_ftype
    int          token_embd, attn_v[2], ffn_down[2], attn_output, other;
};

#define ALL(t) t, {t, t}, {t, t}, t, t
#define PURE(name, ftype, t) {name, "--pure", ftype, ALL(t)}
enum { F32 = MG_TYPE_F32, F16 = MG_TYPE_F16, BF16 = MG_TYPE_BF16, Q4_0 = MG_TYPE_Q4_0, Q4_1 = MG_TYPE_Q4_1,
       Q5_0 = MG_TYPE_Q5_0, Q5_1 = MG_TYPE_Q5_1, Q8_0 = MG_TYPE_Q8_0, Q2_K = MG_TYPE_Q2_K, Q3_K = MG_TYPE_Q3_K,
       Q4_K = MG_TYPE_Q4_K, Q5_K = MG_TYPE_Q5_K, Q6_K = MG_TYPE_Q6_K, IQ4_NL = MG_TYPE_IQ4_NL };

static const struct expect expects[] = {
    {"f32",    "", 0,  ALL(F32)},
    {"F16",    "", 1,  ALL(F16)},
    {"bf16",   "", 32, ALL(BF16)},
    {"Q4_0",   "", 2,  Q6_K, {Q4_0, Q4_0}, {Q4_0, Q4_0}, Q4_0, Q4_0},
    {"q4_1",   "", 3,  Q6_K, {Q4_1, Q4_1}, {Q4_1, Q4_1}, Q4_1, Q4_1},
    {"Q5_0",   "", 8,  Q6_K, {Q5_0, Q5_0}, {Q5_0, Q5_0}, Q5_0, Q5_0},
    {"Q5_1",   "", 9,  Q6_K, {Q5_1, Q5_1}, {Q5_1, Q5_1}, Q5_1, Q5_1},
    {"IQ4_NL", "", 25, Q6_K, {IQ4_NL, IQ4_NL}, {IQ4_NL, IQ4_NL}, IQ4_NL, IQ4_NL},
    {"Q6_K",   "", 18, ALL(Q6_K)},
    {"Q2_K",   "", 10, Q6_K, {Q3_K, Q3_K}, {Q3_K, Q3_K}, Q3_K, Q2_K},
    {"Q3_K_S", "", 11, Q6_K, {Q3_K, Q3_K}, {Q3_K, Q3_K}, Q3_K, Q3_K},
    {"Q3_K_M", "", 12, Q6_K, {Q5_K, Q5_K}, {Q4_K, Q4_K}, Q4_K, Q3_K},
    {"q3_k",   "", 12, Q6_K, {Q5_K, Q5_K}, {Q4_K, Q4_K}, Q4_K, Q3_K},   // llama-quantize's alias of Q3_K_M
    {"Q3_K_L", "", 13, Q6_K, {Q5_K, Q5_K}, {Q5_K, Q5_K}, Q5_K, Q3_K},
    {"Q4_K_S", "", 14, Q6_K, {Q5_K, Q5_K}, {Q4_K, Q4_K}, Q4_K, Q4_K},
    {"Q4_K",   "", 15, Q6_K, {Q4_K, Q6_K}, {Q4_K, Q6_K}, Q4_K, Q4_K},   // alias of Q4_K_M
    {"Q5_K_S", "", 16, Q6_K, {Q5_K, Q5_K}, {Q5_K, Q5_K}, Q5_K, Q5_K},
    {"Q5_K_M", "", 17, Q6_K, {Q5_K, Q6_K}, {Q5_K, Q6_K}, Q5_K, Q5_K},
    PURE("q4_0", 2, Q4_0),   PURE("q4_1", 3, Q4_1),   PURE("q5_0", 8, Q5_0),   PURE("q5_1", 9, Q5_1),
    PURE("q8_0", 7, Q8_0),   PURE("iq4_nl", 25, IQ4_NL), PURE("q2_k", 10, Q2_K), PURE("q3_k", 12, Q3_K),
    PURE("q4_k", 15, Q4_K),  PURE("q5_k", 17, Q5_K),  PURE("q6_k", 18, Q6_K),  PURE("f16", 1, F16),
};

static int expected_type(const struct expect * e, const char * name) {
    int layer = -1;
    sscanf(name, "blk.%d.", &layer);
    if (strcmp(name, "token_embd.weight") == 0) return e->token_embd;
    if (strstr(name, "attn_v.weight")) return e->attn_v[layer];
    if (strstr(name, "ffn_down.weight")) return e->ffn_down[layer];
    if (strstr(name, "attn_output.weight")) return e->attn_output;
    return e->other;
}

// The largest rms(error) / rms(weights) a tensor of this type may have.
// - F32: none (a copy). F16 and BF16 round each weight to nearest with 10 and 7
//   stored mantissa bits: every relative error is at most 2^-11 or 2^-8, so
//   the ratio of the RMS values is too.
// - Block types with b bits per weight spend at most 1 bit of it on scales (Q4_1:
//   two F16 per 32 weights), so each weight gets a code of >= b - 1 bits: at least
//   2^(b-1) levels spread over the block's range, at most 2 amax. Rounding to the
//   nearest level leaves an error uniform over one step, RMS = step / sqrt(12), so
//   rms(error) <= 2 amax / 2^(b-1) / sqrt(12) = 1.155 (amax / rms) 2^-b. For these
//   normally distributed weights the largest of a 32- or 256-element block is
//   below 3.5 standard deviations, so the bound is 4 * 2^-b. (Measured: 1.6-2.5
//   * 2^-b, Q4_1 the highest.)
static double error_bound(int type) {
    switch (type) {
        case F32:  return 0.0;
        case F16:  return ldexp(1.0, -11);
        case BF16: return ldexp(1.0, -8);
        default: {
            const enum mg_type t   = (enum mg_type) type;
            const double       bpw = 8.0 * (double) mg_type_size(t) / (double) mg_blck_size(t);
            return 4.0 * pow(2.0, -bpw);
        }
    }
}

START_TEST(test_every_type) {
    const struct expect * e = &expects[_i];
    char                  name[64], run[4096];
    snprintf(name, sizeof(name), "out-%s%s.gguf", e->type, e->flags);
    const char * out = in_dir(name);
    ck_assert_msg(quantize(e->flags, tiny_f32, out, e->type) == 0, "%s %s: %s", e->type, e->flags, mg_log());

    struct mg_gguf * q = open_ok(out), * x = open_ok(tiny_f32);
    ck_assert_uint_eq(get_u32(q, "general.file_type"), e->file_type);
    ck_assert_uint_eq(get_u32(q, "general.quantization_version"), 2);
    ck_assert_int_eq(mg_gguf_n_tensors(q), mg_gguf_n_tensors(x));
    for (int64_t i = 0; i < mg_gguf_n_tensors(x); i++) {
        const struct mg_gguf_tensor_info * xt = mg_gguf_tensor(x, i);
        const struct mg_gguf_tensor_info * qt = mg_gguf_find_tensor(q, xt->name);
        ck_assert_msg(qt != NULL, "%s: no %s", e->type, xt->name);
        if (xt->n_dims == 1) {   // norms are copied as they are
            ck_assert_int_eq(qt->type, F32);
            ck_assert_msg(memcmp(qt->data, xt->data, xt->nbytes) == 0, "%s changed", xt->name);
            continue;
        }
        ck_assert_msg(qt->type == expected_type(e, xt->name), "%s %s: %s is %s, expected %s", e->type, e->flags,
                      xt->name, mg_gguf_ggml_type_name(qt->type), mg_gguf_ggml_type_name(expected_type(e, xt->name)));
        double rms_x;
        const double err = rms_error(qt, xt, &rms_x);
        ck_assert_msg(err <= error_bound(qt->type) * rms_x, "%s %s: %s (%s): rms error %.3g = %.3g of rms, bound %.3g",
                      e->type, e->flags, xt->name, mg_gguf_ggml_type_name(qt->type), err, err / rms_x,
                      error_bound(qt->type));
    }
    mg_gguf_close(q);
    mg_gguf_close(x);

    // And the engine runs it. One thread: this checks the file, not the thread pool.
    snprintf(run, sizeof(run), "run -t 1 -m '%s' -p hi -n 2 --temp 0", out);
    ck_assert_msg(mg(run) == 0, "mg run on %s %s:\n%s", e->type, e->flags, mg_log());
}
END_TEST

// ---------------------------------------------------------------------------
// The MiniMind shape: rows of 2432 do not split into 256-element super-blocks
// ---------------------------------------------------------------------------

// docs/perf/llama-cpp.md (llama-quantize on this shape): Q4_K_M gives a Q6_K
// token_embd, ffn_down falls back to Q8_0 in layers 0, 3, 6, 7 (Q6_K wanted)
// and to Q5_0 in layers 1, 2, 4, 5 (Q4_K wanted), and the tensors take
// 42241536 bytes (llama-bench's model_size). attn_v follows use_more_bits over
// its 8 layers: Q6_K in 0, 3, 6, 7. The input is F16 here: read through to_float.
START_TEST(test_minimind_q4_k_m_fallbacks) {
    const char * f16 = in_dir("mm-f16.gguf"), * out = in_dir("mm-q4_k_m.gguf");
    char         args[4096];
    snprintf(args, sizeof(args), "mkmodel --preset minimind --type f16 -o '%s'", f16);
    ck_assert_msg(mg(args) == 0, "%s", mg_log());
    ck_assert_msg(quantize("", f16, out, "Q4_K_M") == 0, "%s", mg_log());

    struct mg_gguf * g = open_ok(out);
    size_t           total = 0;
    char             name[64];
    for (int64_t i = 0; i < mg_gguf_n_tensors(g); i++) total += mg_gguf_tensor(g, i)->nbytes;
    ck_assert_uint_eq(total, 42241536);
    ck_assert_int_eq(mg_gguf_find_tensor(g, "token_embd.weight")->type, Q6_K);
    for (int il = 0; il < 8; il++) {
        const bool more = il == 0 || il == 3 || il == 6 || il == 7;
        snprintf(name, sizeof(name), "blk.%d.ffn_down.weight", il);
        ck_assert_msg(mg_gguf_find_tensor(g, name)->type == (more ? Q8_0 : Q5_0), "%s", name);
        snprintf(name, sizeof(name), "blk.%d.attn_v.weight", il);
        ck_assert_msg(mg_gguf_find_tensor(g, name)->type == (more ? Q6_K : Q4_K), "%s", name);
        snprintf(name, sizeof(name), "blk.%d.ffn_up.weight", il);
        ck_assert_int_eq(mg_gguf_find_tensor(g, name)->type, Q4_K);
    }
    mg_gguf_close(g);
    ck_assert_msg(strstr(mg_log(), "(q6_K needs rows of a multiple of 256)") != NULL, "%s", mg_log());
}
END_TEST

// ---------------------------------------------------------------------------
// Metadata, progress, --stats, --dry-run
// ---------------------------------------------------------------------------

// Every pair of the input is copied byte for byte, except general.file_type,
// which moves to the end after general.quantization_version (as llama-quantize).
START_TEST(test_metadata_copied) {
    const char * out = in_dir("q5_k_s.gguf");
    ck_assert_msg(quantize("", tiny_f32, out, "Q5_K_S") == 0, "%s", mg_log());
    struct mg_gguf * in = open_ok(tiny_f32), * q = open_ok(out);
    ck_assert_int_eq(mg_gguf_n_kv(q), mg_gguf_n_kv(in) + 1);
    int64_t j = 0;
    for (int64_t i = 0; i < mg_gguf_n_kv(in); i++) {
        if (strcmp(mg_gguf_key(in, i), "general.file_type") == 0) continue;
        ck_assert_str_eq(mg_gguf_key(q, j), mg_gguf_key(in, i));
        size_t       na, nb;
        const void * a = mg_gguf_kv_raw(in, i, &na), * b = mg_gguf_kv_raw(q, j, &nb);
        ck_assert_int_eq(mg_gguf_kv_type(q, j), mg_gguf_kv_type(in, i));
        ck_assert_uint_eq(na, nb);
        ck_assert_msg(memcmp(a, b, na) == 0, "%s changed", mg_gguf_key(in, i));
        j++;
    }
    ck_assert_str_eq(mg_gguf_key(q, j), "general.quantization_version");
    ck_assert_str_eq(mg_gguf_key(q, j + 1), "general.file_type");
    ck_assert_uint_eq(get_u32(q, "general.file_type"), 16);
    mg_gguf_close(in);
    mg_gguf_close(q);
}
END_TEST

// The line of one tensor, from the last log.
static const char * log_line(const char * needle, char * buf, size_t size) {
    const char * at = strstr(mg_log(), needle);
    ck_assert_msg(at != NULL, "no '%s' in:\n%s", needle, mg_log());
    const char * start = at;
    while (start > mg_log() && start[-1] != '\n') start--;
    const char * end = strchr(at, '\n');
    snprintf(buf, size, "%.*s", (int) (end ? end - start : (long) strlen(start)), start);
    return buf;
}

// The progress lines and totals, with numbers worked out from the fixtures:
// attn_q is 256 x 256 F32 = 0.25 MiB, and 256 x 256 / 256 Q4_K blocks of 144
// bytes = 36864 bytes = 0.04 MiB; tiny-q4_k_m's tensors take 2294016 bytes
// (2.19 MiB, 8 * 2294016 / 3212800 = 5.71 bits per weight). The --stats error
// of a tensor is the one computed here from the file.
START_TEST(test_progress_and_stats) {
    const char * out = in_dir("q4_k_m.gguf");
    char         line[512];
    ck_assert_msg(quantize("--stats", tiny_f32, out, "Q4_K_M") == 0, "%s", mg_log());
    log_line(" blk.0.attn_q.weight ", line, sizeof(line));
    ck_assert_msg(strncmp(line, "[  7/ 24] blk.0.attn_q.weight ", 30) == 0, "%s", line);
    ck_assert_msg(strstr(line, " f32 -> q4_K ") && strstr(line, " [256, 256] ") && strstr(line, " 0.25 MiB -> ") &&
                  strstr(line, " 0.04 MiB"), "%s", line);

    struct mg_gguf * q = open_ok(out), * x = open_ok(tiny_f32);
    double           rms_x;
    const double     err = rms_error(mg_gguf_find_tensor(q, "blk.0.attn_q.weight"),
                                     mg_gguf_find_tensor(x, "blk.0.attn_q.weight"), &rms_x);
    mg_gguf_close(q);
    mg_gguf_close(x);
    double printed = 0, percent = 0;
    const char * at = strstr(line, "rms error ");
    ck_assert_msg(at && sscanf(at, "rms error %lf (%lf%%", &printed, &percent) == 2, "%s", line);
    ck_assert_msg(fabs(printed - err) <= 1e-3 * err, "printed %g, the file's error is %g", printed, err);
    ck_assert_msg(fabs(percent - 100 * err / rms_x) <= 1e-3 * percent + 1e-3, "printed %g%%", percent);

    log_line(" blk.0.attn_norm.weight ", line, sizeof(line));
    ck_assert_msg(strstr(line, "(kept)") != NULL, "%s", line);
    log_line("wrote 24 tensors", line, sizeof(line));
    ck_assert_msg(strstr(line, "12.26 MiB -> 2.19 MiB (32.00 -> 5.71 bits per weight)") != NULL, "%s", line);
}
END_TEST

START_TEST(test_dry_run_writes_nothing) {
    const char * out = in_dir("dry.gguf");
    char         line[512];
    ck_assert_msg(quantize("--dry-run", tiny_f32, out, "Q4_K_M") == 0, "%s", mg_log());
    ck_assert(!exists(out));
    log_line(" blk.1.ffn_down.weight ", line, sizeof(line));
    ck_assert_msg(strstr(line, "f32 -> q6_K") != NULL, "%s", line);
    log_line("would write 24 tensors", line, sizeof(line));
}
END_TEST

// Requantizing: refused by default, naming the first tensor it would touch;
// with --allow-requantize, a Q8_0 model becomes a Q4_K_M one. A tensor that
// keeps its type is a copy, not a requantization: Q8_0 to Q8_0 is allowed.
START_TEST(test_requantize) {
    const char * out = in_dir("re.gguf");
    expect_failure(quantize("", tiny_q8_0, out, "Q4_K_M"), out, "token_embd.weight is already quantized (q8_0)");
    ck_assert(strstr(mg_log(), "--allow-requantize") != NULL);

    ck_assert_msg(quantize("--allow-requantize", tiny_q8_0, out, "Q4_K_M") == 0, "%s", mg_log());
    struct mg_gguf * g = open_ok(out), * ref = open_ok(tiny_q4_k_m);
    for (int64_t i = 0; i < mg_gguf_n_tensors(ref); i++) {
        const struct mg_gguf_tensor_info * r = mg_gguf_tensor(ref, i);
        ck_assert_int_eq(mg_gguf_find_tensor(g, r->name)->type, r->type);
    }
    mg_gguf_close(g);
    mg_gguf_close(ref);

    const char * copy = in_dir("copy.gguf");
    ck_assert_msg(quantize("", tiny_q8_0, copy, "Q8_0") == 0, "%s", mg_log());
    expect_same_tensors(copy, tiny_q8_0);
}
END_TEST

// Weights that are not finite numbers (a damaged file: one NaN in
// blk.0.attn_q.weight) are refused, naming the tensor, the row and the
// element, where the quantizers would write NaN blocks with rc 0.
// llama-quantize refuses them too (its check of the rows it wrote).
START_TEST(test_nan_weights_refused) {
    const char * nan_model = in_dir("nan.gguf");
    size_t       size;
    unsigned char * bytes = mg_test_read_file(tiny_f32, &size);
    ck_assert_ptr_nonnull(bytes);
    struct mg_gguf * g = open_ok(tiny_f32);
    const struct mg_gguf_tensor_info * t = mg_gguf_find_tensor(g, "blk.0.attn_q.weight");
    ck_assert(t != NULL && t->type == MG_TYPE_F32);
    const size_t at   = mg_gguf_data_offset(g) + (size_t) t->offset + (size_t) (3 * t->ne[0] + 5) * sizeof(float);
    const float  nan_ = NAN;
    memcpy(bytes + at, &nan_, sizeof(float));   // row 3, element 5
    mg_gguf_close(g);
    FILE * f = fopen(nan_model, "wb");
    ck_assert(f != NULL && fwrite(bytes, 1, size, f) == size && fclose(f) == 0);
    free(bytes);
    const char * out = in_dir("out.gguf");
    expect_failure(quantize("", nan_model, out, "Q8_0"), out, "blk.0.attn_q.weight: row 3, element 5 is not a finite number");
}
END_TEST

// ---------------------------------------------------------------------------
// Failures: non-zero, a message, and nothing left on disk
// ---------------------------------------------------------------------------

START_TEST(test_bad_input) {
    const char * out = in_dir("out.gguf");
    expect_failure(quantize("", tiny_f32, out, "Q9_X"), out, "unknown TYPE 'Q9_X'");
    expect_failure(quantize("", tiny_f32, out, "q8_K"), out, "unknown TYPE 'q8_K'");   // activations only
    expect_failure(quantize("", in_dir("missing.gguf"), out, "Q8_0"), out, "No such file or directory");
    expect_failure(quantize("", mg_test_fixture("README.md"), out, "Q8_0"), out, "magic");
    expect_failure(quantize("", tiny_f32, out, ""), out, "give IN.gguf OUT.gguf TYPE");
    expect_failure(quantize("--threads 0", tiny_f32, out, "Q8_0"), out, "--threads must be 1..512");
}
END_TEST

START_TEST(test_unwritable_output) {
    const char * nodir = in_dir("no/such/dir/out.gguf");
    expect_failure(quantize("", tiny_f32, nodir, "Q8_0"), nodir, "does not exist");

    // A regular file where the directory should be.
    FILE * f = fopen(in_dir("file"), "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    const char * under_file = in_dir("file/out.gguf");
    expect_failure(quantize("", tiny_f32, under_file, "Q8_0"), under_file, "is not a directory");

    // The output is an existing directory: refused before any work, nothing written.
    const char * as_dir = in_dir("outdir");
    ck_assert_int_eq(mkdir(as_dir, 0755), 0);
    const int    status = quantize("", tiny_f32, as_dir, "Q8_0");
    ck_assert_msg(status != 0 && status < 128, "status %d: %s", status, mg_log());
    ck_assert_msg(strstr(mg_log(), "mg quantize: ") && strstr(mg_log(), as_dir), "%s", mg_log());
    ck_assert_msg(strstr(mg_log(), "is a directory") && !strstr(mg_log(), "tensors"), "%s", mg_log());
    ck_assert_msg(mg_test_count_temp_files(as_dir) == 0, "a temporary file of %s left behind", as_dir);
}
END_TEST

// A full disk, made with RLIMIT_FSIZE: writes past 1 MB fail with EFBIG (the
// output needs 3.6 MB). The limit and the ignored SIGXFSZ carry over exec.
START_TEST(test_full_disk) {
    const char * out = in_dir("full.gguf");
    const pid_t  pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        if (!freopen(log_path, "w", stdout) || dup2(fileno(stdout), 2) < 0) _exit(99);
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit limit = {1 << 20, 1 << 20};
        if (setrlimit(RLIMIT_FSIZE, &limit) != 0) _exit(98);
        execl(mg_bin, mg_bin, "quantize", tiny_f32, out, "Q8_0", (char *) NULL);
        _exit(97);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    forget_log();
    ck_assert_msg(WIFEXITED(status), "killed by signal %d", WTERMSIG(status));
    ck_assert_int_lt(WEXITSTATUS(status), 97);
    expect_failure(WEXITSTATUS(status), out, "File too large");
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("quantize");
    TCase * tc = tcase_create("llama-quantize");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_q8_0_is_llama_quantize_output);
    tcase_add_test(tc, test_q4_k_m_is_llama_quantize_output);
    tcase_add_test(tc, test_minimind_q4_k_m_fallbacks);
    suite_add_tcase(s, tc);

    tc = tcase_create("types");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, test_every_type, 0, (int) (sizeof(expects) / sizeof(expects[0])));
    suite_add_tcase(s, tc);

    tc = tcase_create("output");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_metadata_copied);
    tcase_add_test(tc, test_progress_and_stats);
    tcase_add_test(tc, test_dry_run_writes_nothing);
    tcase_add_test(tc, test_requantize);
    suite_add_tcase(s, tc);

    tc = tcase_create("errors");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_bad_input);
    tcase_add_test(tc, test_nan_weights_refused);
    tcase_add_test(tc, test_unwritable_output);
    tcase_add_test(tc, test_full_disk);
    suite_add_tcase(s, tc);
    return s;
}
