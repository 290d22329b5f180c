// test_npy.c - the .npy writer and reader (full/npy.c), the graph dump of
// `mg logits --dump-tensors`, and tools/npy_diff finding a planted difference.
//
// The header is checked against the format's own rules (NumPy's format 1.0:
// magic, length, a dict padded so that the data starts at a multiple of 64),
// not against our reader only; values must come back bit for bit.
#define _POSIX_C_SOURCE 200809L   // mkdtemp, readlink
#include "harness.h"
#include "npy.h"
#include "tensor.h"

#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[64];

static void setup(void) {
    mg_test_make_dir(dir, sizeof(dir), "npy");
}

static void teardown(void) {
    mg_test_remove_dir(dir);
}

#define in_dir(name) mg_test_path_in(dir, name)

// A binary next to this test's build folder ($(BUILD)/tests/x -> $(BUILD)/name).
static const char * build_bin(const char * name) {
    static char bin[4096];
    char self[4000];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    ck_assert(n > 0);
    self[n] = '\0';
    snprintf(bin, sizeof(bin), "%s/%s", dirname(dirname(self)), name);
    ck_assert_msg(access(bin, X_OK) == 0, "%s is not built (make -C full builds it)", bin);
    return bin;
}

// Run a shell command; its exit status (-1: no normal exit), stdout in out.
static int run(char * out, size_t size, const char * cmd) {
    char full[8192];
    snprintf(full, sizeof(full), "%s > '%s' 2>&1", cmd, in_dir("out.txt"));
    const int ws = system(full);
    size_t len = 0;
    char * text = mg_test_read_file(in_dir("out.txt"), &len);
    ck_assert_ptr_nonnull(text);
    snprintf(out, size, "%s", text);
    free(text);
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
}

START_TEST(test_header_and_round_trip) {
    enum { N = 2 * 3 * 5 };
    float v[N];
    uint64_t st = 7;
    mg_test_fill_uniform(v, N, &st, -100.0f, 100.0f);
    v[3] = -0.0f;
    v[4] = INFINITY;
    v[5] = 1e-42f;   // a subnormal
    const char * path = in_dir("a.npy");
    ck_assert(mg_npy_write_f32(path, v, 3, (const int64_t[]) {2, 3, 5}));

    size_t size;
    unsigned char * raw = mg_test_read_file(path, &size);
    ck_assert_ptr_nonnull(raw);
    ck_assert(memcmp(raw, "\x93NUMPY\x01\x00", 8) == 0);
    const size_t hlen = raw[8] | (size_t) raw[9] << 8;
    ck_assert_uint_eq((10 + hlen) % 64, 0);           // the data starts 64-aligned
    ck_assert_uint_eq(size, 10 + hlen + N * sizeof(float));
    ck_assert_int_eq(raw[10 + hlen - 1], '\n');       // the dict ends the header with a newline
    char dict[256];
    memcpy(dict, raw + 10, hlen);
    dict[hlen] = '\0';
    ck_assert_msg(strstr(dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 5), }") == dict, "%s", dict);
    ck_assert(memcmp(raw + 10 + hlen, v, sizeof(v)) == 0);   // C order, little-endian float32 as given
    free(raw);

    struct mg_npy a;
    ck_assert_msg(mg_npy_read_f32(path, &a), "%s", mg_last_error());
    ck_assert_int_eq(a.n_dims, 3);
    ck_assert(a.shape[0] == 2 && a.shape[1] == 3 && a.shape[2] == 5 && a.n == N);
    ck_assert(memcmp(a.data, v, sizeof(v)) == 0);
    mg_npy_free(&a);

    // One axis is written as Python's 1-tuple.
    ck_assert(mg_npy_write_f32(in_dir("b.npy"), v, 1, (const int64_t[]) {N}));
    raw = mg_test_read_file(in_dir("b.npy"), &size);
    ck_assert_ptr_nonnull(strstr((char *) raw + 10, "'shape': (30,), }"));
    free(raw);
    ck_assert(mg_npy_read_f32(in_dir("b.npy"), &a));
    ck_assert(a.n_dims == 1 && a.n == N && memcmp(a.data, v, sizeof(v)) == 0);
    mg_npy_free(&a);
}
END_TEST

// A file numpy would write differently is refused with its name and the reason.
START_TEST(test_reader_refuses) {
    static const struct {
        const char * bytes;
        size_t       len;
        const char * reason;
    } bad[] = {
        {"PK\x03\x04 not npy", 13, "magic"},
        {"\x93NUMPY\x01\x00\x3a\x00{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }\n", 68, "descr"},
        {"\x93NUMPY\x01\x00\x3a\x00{'descr': '<f4', 'fortran_order': True , 'shape': (1,), }\n", 68, "fortran_order"},
        {"\x93NUMPY\x01\x00\x3a\x00{'descr': '<f4', 'fortran_order': False, 'shape': (9,), }\n", 68, "fewer"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char * path = in_dir("bad.npy");
        FILE * f = fopen(path, "wb");
        ck_assert(fwrite(bad[i].bytes, 1, bad[i].len, f) == bad[i].len);
        fclose(f);
        struct mg_npy a;
        ck_assert_msg(!mg_npy_read_f32(path, &a), "case %zu was read", i);
        ck_assert_msg(strstr(mg_last_error(), path) && strstr(mg_last_error(), bad[i].reason), "case %zu: %s", i,
                      mg_last_error());
        ck_assert_ptr_null(a.data);
    }
}
END_TEST

// The dumper writes a strided F16 view as float32 in ggml's element order,
// skips views, and numbers a repeated name.
START_TEST(test_dumper) {
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 1 << 20});
    struct mg_tensor *  h   = mg_new_tensor_2d(ctx, MG_TYPE_F16, 4, 3);
    for (int i1 = 0; i1 < 3; i1++) {
        for (int i0 = 0; i0 < 4; i0++) mg_set_f32_nd(h, i0, i1, 0, 0, (float) (10 * i1 + i0) + 0.5f);
    }
    struct mg_tensor * t = mg_transpose(ctx, h);   // {3, 4}, strided
    mg_set_name(h, "h-0");
    struct mg_npy_dumper d;
    ck_assert(mg_npy_dumper_open(&d, dir));
    mg_npy_dump_node(h, &d);
    mg_npy_dump_node(t, &d);   // a view: skipped
    mg_npy_dump_node(h, &d);   // the same name again: h-0.1
    ck_assert_int_eq(d.n_written, 2);
    mg_npy_dumper_close(&d);
    char * order = mg_test_read_file(in_dir("order.txt"), NULL);
    ck_assert_str_eq(order, "h-0\nh-0.1\n");
    free(order);

    ck_assert(mg_npy_write_tensor(in_dir("t.npy"), t));
    struct mg_npy a;
    ck_assert(mg_npy_read_f32(in_dir("t.npy"), &a));
    ck_assert(a.n_dims == 2 && a.shape[0] == 4 && a.shape[1] == 3);   // ne reversed
    for (int i1 = 0; i1 < 4; i1++) {
        for (int i0 = 0; i0 < 3; i0++) ck_assert_float_eq(a.data[i1 * 3 + i0], (float) (10 * i0 + i1) + 0.5f);
    }
    mg_npy_free(&a);
    mg_free(ctx);
}
END_TEST

// Three tensors on each side, the second differing at one planted position:
// npy_diff names it, its position and size; above the tolerance it passes.
START_TEST(test_npy_diff_finds_planted) {
    char sub_a[300], sub_b[300];
    snprintf(sub_a, sizeof(sub_a), "%s/a", dir);
    snprintf(sub_b, sizeof(sub_b), "%s/b", dir);
    char out[8192], cmd[4096];
    snprintf(cmd, sizeof(cmd), "mkdir '%s' '%s'", sub_a, sub_b);
    ck_assert_int_eq(system(cmd), 0);
    static const char * const names[] = {"attn_norm-0", "Qcur-0", "ffn_out-0"};
    for (int side = 0; side < 2; side++) {
        const char * sub = side ? sub_b : sub_a;
        char path[400];
        snprintf(path, sizeof(path), "%s/order.txt", sub);
        FILE * order = fopen(path, "w");
        for (int k = 0; k < 3; k++) {
            float v[4 * 6];
            uint64_t st = 100 + (uint64_t) k;
            mg_test_fill_uniform(v, 24, &st, -1.0f, 1.0f);
            if (side == 1 && k >= 1) v[2 * 6 + 5] += 0.25f;   // Qcur-0 at [2, 5], and everything after
            snprintf(path, sizeof(path), "%s/%s.npy", sub, names[k]);
            ck_assert(mg_npy_write_f32(path, v, 2, (const int64_t[]) {4, 6}));
            fprintf(order, "%s\n", names[k]);
        }
        fclose(order);
    }
    const char * bin = build_bin("npy_diff");
    snprintf(cmd, sizeof(cmd), "'%s' --tol 1e-3 '%s' '%s'", bin, sub_a, sub_b);
    ck_assert_int_eq(run(out, sizeof(out), cmd), 1);
    ck_assert_msg(strstr(out, "first tensor over 0.001: Qcur-0, max |diff| 0.25 at [2, 5]") != NULL, "%s", out);
    ck_assert_ptr_null(strstr(out, "ffn_out-0"));   // it stops at the first

    snprintf(cmd, sizeof(cmd), "'%s' --tol 0.3 '%s' '%s'", bin, sub_a, sub_b);
    ck_assert_int_eq(run(out, sizeof(out), cmd), 0);
    ck_assert_msg(strstr(out, "3 tensors within 0.3") != NULL, "%s", out);

    snprintf(cmd, sizeof(cmd), "'%s' '%s' '%s/none'", bin, sub_a, dir);
    ck_assert_int_eq(run(out, sizeof(out), cmd), 0);   // nothing in common: nothing differs
    ck_assert_msg(strstr(out, "only in") != NULL, "%s", out);
    snprintf(cmd, sizeof(cmd), "'%s' '%s/none' '%s'", bin, dir, sub_a);
    ck_assert_int_eq(run(out, sizeof(out), cmd), 2);
    ck_assert_msg(strstr(out, "order.txt") != NULL, "%s", out);
}
END_TEST

// mg logits --dump-tensors: the dump's result_output is the logits -o wrote,
// and comparing the dump with itself finds nothing.
START_TEST(test_mg_logits_dump) {
    const char * mg  = build_bin("mg");
    char         mgp[4096];
    snprintf(mgp, sizeof(mgp), "%s", mg);
    char out[8192], cmd[16384], model[2048];
    snprintf(model, sizeof(model), "%s", mg_test_fixture("models/tiny-q8_0.gguf"));   // one static buffer per call
    snprintf(cmd, sizeof(cmd), "'%s' logits -m '%s' -f '%s' -t 1 --kv-type f32 -o '%s' --dump-tensors '%s'", mgp,
             model, mg_test_fixture("prompts/fox.txt"), in_dir("last.bin"), dir);
    ck_assert_msg(run(out, sizeof(out), cmd) == 0, "%s", out);
    char * order = mg_test_read_file(in_dir("order.txt"), NULL);
    ck_assert_ptr_nonnull(order);
    // llama.cpp's names for the layer's intermediates, in graph order.
    const char * const want[] = {"\nattn_norm-0\n", "\nQcur_normed-0\n", "\nkq_soft_max-0\n", "\nffn_out-0\n",
                                 "\nl_out-1\n", "\nresult_output\n"};
    const char * prev = order;
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        const char * at = strstr(order, want[i]);
        ck_assert_msg(at != NULL && at >= prev, "%s missing or out of order in:\n%s", want[i], order);
        prev = at;
    }
    free(order);
    struct mg_npy a;
    ck_assert(mg_npy_read_f32(in_dir("result_output.npy"), &a));
    size_t size;
    float * logits = mg_test_read_file(in_dir("last.bin"), &size);
    ck_assert(a.n_dims == 1 && a.shape[0] == 6400 && size == 6400 * sizeof(float));
    ck_assert(memcmp(a.data, logits, size) == 0);
    free(logits);
    mg_npy_free(&a);

    snprintf(cmd, sizeof(cmd), "'%s' --tol 0 '%s' '%s'", build_bin("npy_diff"), dir, dir);
    ck_assert_msg(run(out, sizeof(out), cmd) == 0, "%s", out);
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("npy");
    TCase * tc = MG_TCASE(s, "npy", test_header_and_round_trip, test_reader_refuses, test_dumper,
                             test_npy_diff_finds_planted, test_mg_logits_dump);
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    return s;
}
