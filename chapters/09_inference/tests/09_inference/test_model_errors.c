// test_model_errors.c - models that must not load. Each file is a fixture
// GGUF copied byte for byte and patched in one place here (a renamed tensor
// or key, a changed shape, type or value), so everything else about it is
// valid; mg_model_load must return NULL with a message that names the file
// and the tensor or key at fault, and leak nothing (run under ASan).
//
// Patches keep every length the same, so the offsets of everything after
// them stay valid: a name is renamed to another of the same length, two
// dimensions trade places, a type becomes another of the same element size.
#define _POSIX_C_SOURCE 200809L   // mkstemp
#include "harness.h"
#include "model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// ---------------------------------------------------------------------------
// A fixture's bytes, and where its strings are
// ---------------------------------------------------------------------------

struct file {
    uint8_t * p;
    size_t    n;
};

static struct file read_model(const char * name) {
    char rel[128];
    snprintf(rel, sizeof(rel), "models/%s.gguf", name);
    struct file f = {NULL, 0};
    f.p = mg_test_read_file(mg_test_fixture(rel), &f.n);
    ck_assert_msg(f.p != NULL, "cannot read %s", mg_test_fixture(rel));
    return f;
}

static uint64_t get_u64(const uint8_t * p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static void put_u32(uint8_t * p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t) (v >> (8 * i));
}

static uint32_t get_u32(const uint8_t * p) {
    return (uint32_t) p[0] | (uint32_t) p[1] << 8 | (uint32_t) p[2] << 16 | (uint32_t) p[3] << 24;
}

// A GGUF string is a u64 length and the bytes. Returns the offset just past
// the one string equal to s (a key or a tensor name), failing the test unless
// there is exactly one.
static size_t find_string(const struct file * f, const char * s) {
    const size_t len = strlen(s);
    size_t found = 0;
    int    n_found = 0;
    for (size_t i = 0; i + 8 + len <= f->n; i++) {
        if (f->p[i + 8] == (uint8_t) s[0] && get_u64(f->p + i) == len && memcmp(f->p + i + 8, s, len) == 0) {
            found = i + 8 + len;
            n_found++;
        }
    }
    ck_assert_msg(n_found == 1, "'%s' found %d times in the fixture", s, n_found);
    return found;
}

// Rename a key or tensor to another name of the same length.
static void rename_string(struct file * f, const char * from, const char * to) {
    ck_assert_uint_eq(strlen(from), strlen(to));
    const size_t end = find_string(f, from);
    memcpy(f->p + end - strlen(to), to, strlen(to));
}

// A tensor info after its name: u32 n_dims, u64 ne[n_dims], u32 type, u64 offset.
static uint8_t * tensor_info(struct file * f, const char * name) {
    return f->p + find_string(f, name);
}

static void swap_dims(struct file * f, const char * tensor) {
    uint8_t * info = tensor_info(f, tensor);
    ck_assert_uint_eq(get_u32(info), 2);
    uint8_t ne0[8];
    memcpy(ne0, info + 4, 8);
    memmove(info + 4, info + 12, 8);
    memcpy(info + 12, ne0, 8);
}

static void set_tensor_type(struct file * f, const char * tensor, uint32_t old_type, uint32_t new_type) {
    uint8_t * info = tensor_info(f, tensor);
    uint8_t * type = info + 4 + 8 * get_u32(info);
    ck_assert_uint_eq(get_u32(type), old_type);
    put_u32(type, new_type);
}

// A key/value after the key: u32 value type, then the value.
static void set_u32_value(struct file * f, const char * key, uint32_t old_value, uint32_t new_value) {
    uint8_t * kv = f->p + find_string(f, key);
    ck_assert_uint_eq(get_u32(kv), 4);   // GGUF type UINT32
    ck_assert_uint_eq(get_u32(kv + 4), old_value);
    put_u32(kv + 4, new_value);
}

static void set_value_type(struct file * f, const char * key, uint32_t old_type, uint32_t new_type) {
    uint8_t * kv = f->p + find_string(f, key);
    ck_assert_uint_eq(get_u32(kv), old_type);
    put_u32(kv, new_type);
}

// A string value of the same length: u32 type 8, u64 length, bytes.
static void set_str_value(struct file * f, const char * key, const char * old_value, const char * new_value) {
    uint8_t * kv = f->p + find_string(f, key);
    ck_assert_uint_eq(get_u32(kv), 8);   // GGUF type STRING
    ck_assert_uint_eq(get_u64(kv + 4), strlen(old_value));
    ck_assert_uint_eq(strlen(old_value), strlen(new_value));
    ck_assert(memcmp(kv + 12, old_value, strlen(old_value)) == 0);
    memcpy(kv + 12, new_value, strlen(new_value));
}

// ---------------------------------------------------------------------------
// Loading the patched bytes
// ---------------------------------------------------------------------------

static char path[64];

static void write_temp(const struct file * f, size_t n) {
    snprintf(path, sizeof(path), "/tmp/mg_test_model_XXXXXX");
    const int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    for (size_t done = 0; done < n;) {
        const ssize_t w = write(fd, f->p + done, n - done);
        ck_assert_int_gt(w, 0);
        done += (size_t) w;
    }
    close(fd);
}

// The first n bytes of f must not load; the message names the file and
// contains every non-NULL fragment.
static void expect_refused_n(struct file * f, size_t n, const char * fragment1, const char * fragment2) {
    write_temp(f, n);
    mg_set_error("%s", "");
    struct mg_model * m = mg_model_load(path);
    unlink(path);
    free(f->p);
    f->p = NULL;
    const char * e = mg_last_error();
    ck_assert_msg(m == NULL, "a bad model was accepted (expected '%s')", fragment1);
    ck_assert_msg(strstr(e, path) != NULL, "the message does not name the file %s: %s", path, e);
    ck_assert_msg(fragment1 == NULL || strstr(e, fragment1) != NULL, "'%s' not in: %s", fragment1, e);
    ck_assert_msg(fragment2 == NULL || strstr(e, fragment2) != NULL, "'%s' not in: %s", fragment2, e);
}

static void expect_refused(struct file * f, const char * fragment1, const char * fragment2) {
    expect_refused_n(f, f->n, fragment1, fragment2);
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

// The control: an unpatched copy loads, so a refusal below is the patch's doing.
START_TEST(test_unpatched_copy_loads) {
    static const char * const names[] = {"tiny-f32", "tiny-q8_0", "tiny-q4_k_m"};
    struct file f = read_model(names[_i]);
    write_temp(&f, f.n);
    struct mg_model * m = mg_model_load(path);
    unlink(path);
    ck_assert_msg(m != NULL, "%s", mg_last_error());
    ck_assert_int_eq(m->hp.n_layer, 2);
    ck_assert_int_eq(m->hp.n_embd, 256);
    ck_assert_ptr_eq(m->output, m->tok_embd);   // tied embeddings
    mg_model_free(m);
    free(f.p);
}
END_TEST

START_TEST(test_missing_tensor) {
    struct file f = read_model("tiny-f32");
    rename_string(&f, "blk.1.ffn_up.weight", "blk.1.ffn_uX.weight");
    expect_refused(&f, "'blk.1.ffn_up.weight'", "missing");

    f = read_model("tiny-q4_k_m");
    rename_string(&f, "output_norm.weight", "output_norX.weight");
    expect_refused(&f, "'output_norm.weight'", "missing");
}
END_TEST

// A layer more than the file has: the first tensor of that layer is missing.
START_TEST(test_missing_layer) {
    struct file f = read_model("tiny-q8_0");
    set_u32_value(&f, "qwen3.block_count", 2, 3);
    expect_refused(&f, "'blk.2.attn_norm.weight'", NULL);
}
END_TEST

START_TEST(test_misshaped_tensor) {
    // {256, 128} stored as {128, 256}: same bytes, wrong shape.
    struct file f = read_model("tiny-f32");
    swap_dims(&f, "blk.0.attn_k.weight");
    expect_refused(&f, "'blk.0.attn_k.weight'", "128");

    // A model whose n_embd says 128 but whose embeddings are 256 wide.
    f = read_model("tiny-f32");
    set_u32_value(&f, "qwen3.embedding_length", 256, 128);
    expect_refused(&f, "'token_embd.weight'", "256");
}
END_TEST

START_TEST(test_unsupported_type) {
    // F32 (0) -> I32 (26): the same 4 bytes an element, but no matrix multiply.
    struct file f = read_model("tiny-f32");
    set_tensor_type(&f, "blk.0.attn_q.weight", 0, 26);
    expect_refused(&f, "'blk.0.attn_q.weight'", "i32");

    f = read_model("tiny-f32");
    set_tensor_type(&f, "blk.1.ffn_down.weight", 0, 26);
    expect_refused(&f, "'blk.1.ffn_down.weight'", NULL);

    // A norm must be F32.
    f = read_model("tiny-q8_0");
    set_tensor_type(&f, "blk.0.attn_norm.weight", 0, 26);
    expect_refused(&f, "'blk.0.attn_norm.weight'", NULL);
}
END_TEST

START_TEST(test_wrong_architecture) {
    struct file f = read_model("tiny-f32");
    set_str_value(&f, "general.architecture", "qwen3", "llama");
    expect_refused(&f, "llama", NULL);

    // A vocabulary-only GGUF is not a model (architecture gpt2, no tensors).
    mg_set_error("%s", "");
    const char * vocab = mg_test_fixture("vocab/ggml-vocab-gpt-2.gguf");
    ck_assert_ptr_null(mg_model_load(vocab));
    ck_assert_msg(strstr(mg_last_error(), vocab) != NULL, "the file is not named: %s", mg_last_error());
}
END_TEST

START_TEST(test_missing_key) {
    struct file f = read_model("tiny-f32");
    rename_string(&f, "qwen3.attention.layer_norm_rms_epsilon", "qwen3.attention.layer_norm_rms_epsiloX");
    expect_refused(&f, "qwen3.attention.layer_norm_rms_epsilon", NULL);

    f = read_model("tiny-q4_k_m");
    rename_string(&f, "qwen3.attention.head_count", "qwen3.attention.head_counX");
    expect_refused(&f, "qwen3.attention.head_count", NULL);
}
END_TEST

START_TEST(test_bad_values) {
    // 4 query heads cannot share 3 KV heads.
    struct file f = read_model("tiny-f32");
    set_u32_value(&f, "qwen3.attention.head_count_kv", 2, 3);
    expect_refused(&f, "head_count_kv", NULL);

    // u32 (4) read as f32 (6): a key of the wrong type.
    f = read_model("tiny-f32");
    set_value_type(&f, "qwen3.block_count", 4, 6);
    expect_refused(&f, "qwen3.block_count", NULL);

    // No layers at all.
    f = read_model("tiny-f32");
    set_u32_value(&f, "qwen3.block_count", 2, 0);
    expect_refused(&f, "qwen3.block_count", NULL);
}
END_TEST

START_TEST(test_bad_files) {
    // Cut inside the first tensor's data.
    struct file f = read_model("tiny-q8_0");
    expect_refused_n(&f, f.n / 2, NULL, NULL);

    // Cut inside the metadata.
    f = read_model("tiny-q8_0");
    expect_refused_n(&f, 1000, NULL, NULL);

    mg_set_error("%s", "");
    ck_assert_ptr_null(mg_model_load("/nonexistent/dir/model.gguf"));
    ck_assert_msg(strstr(mg_last_error(), "/nonexistent/dir/model.gguf") != NULL, "%s", mg_last_error());
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("model_errors");
    TCase * tc = tcase_create("load");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_unpatched_copy_loads, 0, 3);
    tcase_add_test(tc, test_missing_tensor);
    tcase_add_test(tc, test_missing_layer);
    tcase_add_test(tc, test_misshaped_tensor);
    tcase_add_test(tc, test_unsupported_type);
    tcase_add_test(tc, test_wrong_architecture);
    tcase_add_test(tc, test_missing_key);
    tcase_add_test(tc, test_bad_values);
    tcase_add_test(tc, test_bad_files);
    suite_add_tcase(s, tc);
    return s;
}
