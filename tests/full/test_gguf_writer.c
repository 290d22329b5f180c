// test_gguf_writer.c - files written by gguf_writer.c, read back by the reader
// and by hand: every value type, the layout ggml insists on, and what is left
// on disk when writing fails.
#define _POSIX_C_SOURCE 200809L   // setrlimit, signal
#include "harness.h"
#include "gguf_writer.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];   // the test's directory (mg_test_make_dir), its files by mg_test_path_in

// How many entries a directory holds (not . and ..).
static int n_entries(const char * path) {
    DIR * d = opendir(path);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    for (struct dirent * e; (e = readdir(d)) != NULL;) n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

static uint64_t le(const uint8_t * p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static size_t pad(size_t n, size_t a) {
    return (n + a - 1) / a * a;
}

// ---------------------------------------------------------------------------
// Every kind of value, and tensors of four types
// ---------------------------------------------------------------------------

static const uint8_t  arr_u8[]  = {0, 1, 255};
static const int8_t   arr_i8[]  = {-128, 0, 127};
static const uint16_t arr_u16[] = {1, 65535};
static const int16_t  arr_i16[] = {-32768, 5};
static const uint32_t arr_u32[] = {7, 4000000000u};
static const int32_t  arr_i32[] = {-1, 2147483647, 3};
static const float    arr_f32[] = {1.5f, -0.0f, 1e-30f};
static const bool     arr_bool[] = {true, false, true};
static const uint64_t arr_u64[] = {18446744073709551615ull};
static const int64_t  arr_i64[] = {INT64_MIN, 42};
static const double   arr_f64[] = {3.141592653589793, -2.5e300};
static const char * const arr_str[] = {"a", "", "\xe4\xbd\xa0\xe5\xa5\xbd"};   // "a", "", "你好"

// The little-endian bytes a C array of numbers must become, built the slow way.
static void expect_le_array(const void * got, const void * values, size_t n, size_t size, bool is_float,
                            bool is_bool) {
    const uint8_t * g = got;
    for (size_t i = 0; i < n; i++) {
        uint64_t want = 0;
        if (is_bool) {
            want = ((const bool *) values)[i] ? 1 : 0;
        } else if (is_float && size == 4) {
            uint32_t bits;
            memcpy(&bits, (const float *) values + i, 4);
            want = bits;
        } else {
            memcpy(&want, (const uint8_t *) values + i * size, size);   // the host is little-endian (x86, arm64)
        }
        ck_assert_msg(le(g + i * size, (int) size) == want, "element %zu", i);
    }
}

struct tensor_spec {
    const char * name;
    int          type;
    int          n_dims;
    int64_t      ne[4];
    size_t       nbytes;   // computed by hand from the type's block layout
};

static const struct tensor_spec tensors[] = {
    {"f32.weight",  0, 2, {5, 3, 1, 1},    5 * 3 * 4},          // 60 bytes: padded to 64
    {"q8_0.weight", 8, 2, {64, 2, 1, 1},   64 / 32 * 34 * 2},   // 136: padded to 160
    {"q4_K.weight", 12, 3, {256, 1, 2, 1}, 144 * 2},            // 288
    {"i32.index",   26, 1, {7, 1, 1, 1},   7 * 4},              // 28: padded to 32
};
#define N_TENSORS 4

static uint8_t * tensor_data[N_TENSORS];

static struct mg_gguf_writer * build_everything(uint32_t alignment) {
    struct mg_gguf_writer * w = mg_gguf_writer_new();
    ck_assert(mg_gguf_writer_set_u8(w, "t.u8", 200));
    ck_assert(mg_gguf_writer_set_i8(w, "t.i8", -100));
    ck_assert(mg_gguf_writer_set_u16(w, "t.u16", 60000));
    ck_assert(mg_gguf_writer_set_i16(w, "t.i16", -30000));
    ck_assert(mg_gguf_writer_set_u32(w, "t.u32", 4000000000u));
    ck_assert(mg_gguf_writer_set_i32(w, "t.i32", -2000000000));
    ck_assert(mg_gguf_writer_set_f32(w, "t.f32", 3.25f));
    ck_assert(mg_gguf_writer_set_bool(w, "t.bool", true));
    ck_assert(mg_gguf_writer_set_u64(w, "t.u64", (1ull << 63) + 5));
    ck_assert(mg_gguf_writer_set_i64(w, "t.i64", INT64_MIN));
    ck_assert(mg_gguf_writer_set_f64(w, "t.f64", -1.0 / 3.0));
    ck_assert(mg_gguf_writer_set_str(w, "t.str", "qwen3"));
    ck_assert(mg_gguf_writer_set_strn(w, "t.strn", "a\0b", 3));
    if (alignment != 32) ck_assert(mg_gguf_writer_set_u32(w, "general.alignment", alignment));
    ck_assert(mg_gguf_writer_set_arr_data(w, "a.u8", MG_GGUF_TYPE_UINT8, arr_u8, 3));
    ck_assert(mg_gguf_writer_set_arr_data(w, "a.i8", MG_GGUF_TYPE_INT8, arr_i8, 3));
    ck_assert(mg_gguf_writer_set_arr_data(w, "a.u16", MG_GGUF_TYPE_UINT16, arr_u16, 2));
    ck_assert(mg_gguf_writer_set_arr_data(w, "a.i16", MG_GGUF_TYPE_INT16, arr_i16, 2));
    ck_assert(mg_gguf_writer_set_arr_data(w, "a.u32", MG_GGUF_TYPE_UINT32, arr_u32, 2));
    ck_assert(mg_gguf_writer_set_arr_data(w, "a.i32", MG_GGUF_TYPE_INT32, arr_i32, 3));
    ck_assert(mg_gguf_writer_set_arr_data(w, "a.f32", MG_GGUF_TYPE_FLOAT32, arr_f32, 3));
    ck_assert(mg_gguf_writer_set_arr_data(w, "a.bool", MG_GGUF_TYPE_BOOL, arr_bool, 3));
    ck_assert(mg_gguf_writer_set_arr_data(w, "a.u64", MG_GGUF_TYPE_UINT64, arr_u64, 1));
    ck_assert(mg_gguf_writer_set_arr_data(w, "a.i64", MG_GGUF_TYPE_INT64, arr_i64, 2));
    ck_assert(mg_gguf_writer_set_arr_data(w, "a.f64", MG_GGUF_TYPE_FLOAT64, arr_f64, 2));
    ck_assert(mg_gguf_writer_set_arr_data(w, "a.empty", MG_GGUF_TYPE_INT32, arr_i32, 0));
    ck_assert(mg_gguf_writer_set_arr_str(w, "a.str", arr_str, NULL, 3));

    uint64_t rng = 1234;
    for (int i = 0; i < N_TENSORS; i++) {
        tensor_data[i] = malloc(tensors[i].nbytes);
        for (size_t k = 0; k < tensors[i].nbytes; k++) tensor_data[i][k] = (uint8_t) mg_test_rand_u64(&rng);
        ck_assert_msg(mg_gguf_writer_add_tensor(w, tensors[i].name, tensors[i].type, tensors[i].n_dims,
                                                tensors[i].ne, tensor_data[i]), "%s", mg_last_error());
    }
    return w;
}

static void free_tensor_data(void) {
    for (int i = 0; i < N_TENSORS; i++) free(tensor_data[i]);
}

static void check_everything(const char * path, uint32_t alignment) {
    struct mg_gguf * g = mg_gguf_open(path);
    ck_assert_msg(g != NULL, "%s", mg_last_error());
    ck_assert_uint_eq(mg_gguf_alignment(g), alignment);

    // Scalars, through the typed getters and byte for byte.
    uint32_t u32;
    int32_t i32;
    uint64_t u64;
    float f32;
    bool b;
    ck_assert(mg_gguf_get_u32(g, "t.u8", &u32) && u32 == 200);
    ck_assert(mg_gguf_get_i32(g, "t.i8", &i32) && i32 == -100);
    ck_assert(mg_gguf_get_u32(g, "t.u16", &u32) && u32 == 60000);
    ck_assert(mg_gguf_get_i32(g, "t.i16", &i32) && i32 == -30000);
    ck_assert(mg_gguf_get_u32(g, "t.u32", &u32) && u32 == 4000000000u);
    ck_assert(mg_gguf_get_i32(g, "t.i32", &i32) && i32 == -2000000000);
    ck_assert(mg_gguf_get_f32(g, "t.f32", &f32) && f32 == 3.25f);
    ck_assert(mg_gguf_get_bool(g, "t.bool", &b) && b);
    ck_assert(mg_gguf_get_u64(g, "t.u64", &u64) && u64 == (1ull << 63) + 5);
    size_t size;
    const uint8_t * raw = mg_gguf_kv_raw(g, mg_gguf_find_key(g, "t.i64"), &size);
    ck_assert(size == 8 && le(raw, 8) == 1ull << 63);
    raw = mg_gguf_kv_raw(g, mg_gguf_find_key(g, "t.f64"), &size);
    double third = -1.0 / 3.0;
    ck_assert(size == 8 && memcmp(raw, &third, 8) == 0);
    const char * str;
    uint64_t len;
    ck_assert(mg_gguf_get_str(g, "t.str", &str, &len) && len == 5 && memcmp(str, "qwen3", 5) == 0);
    ck_assert(mg_gguf_get_str(g, "t.strn", &str, &len) && len == 3 && memcmp(str, "a\0b", 3) == 0);
    const char * types[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "u64", "i64", "f64", "str"};
    for (int i = 0; i < 12; i++) ck_assert_str_eq(mg_gguf_type_name(mg_gguf_kv_type(g, i)), types[i]);

    // Arrays.
    const struct {
        const char *      key;
        enum mg_gguf_type type;
        const void *      values;
        size_t            n, size;
        bool              f, b;   // floats, bools
    } arrays[] = {
        {"a.u8", MG_GGUF_TYPE_UINT8, arr_u8, 3, 1, false, false},
        {"a.i8", MG_GGUF_TYPE_INT8, arr_i8, 3, 1, false, false},
        {"a.u16", MG_GGUF_TYPE_UINT16, arr_u16, 2, 2, false, false},
        {"a.i16", MG_GGUF_TYPE_INT16, arr_i16, 2, 2, false, false},
        {"a.u32", MG_GGUF_TYPE_UINT32, arr_u32, 2, 4, false, false},
        {"a.i32", MG_GGUF_TYPE_INT32, arr_i32, 3, 4, false, false},
        {"a.f32", MG_GGUF_TYPE_FLOAT32, arr_f32, 3, 4, true, false},
        {"a.bool", MG_GGUF_TYPE_BOOL, arr_bool, 3, 1, false, true},
        {"a.u64", MG_GGUF_TYPE_UINT64, arr_u64, 1, 8, false, false},
        {"a.i64", MG_GGUF_TYPE_INT64, arr_i64, 2, 8, false, false},
        {"a.f64", MG_GGUF_TYPE_FLOAT64, arr_f64, 2, 8, true, false},
        {"a.empty", MG_GGUF_TYPE_INT32, arr_i32, 0, 4, false, false},
    };
    for (size_t i = 0; i < sizeof(arrays) / sizeof(arrays[0]); i++) {
        int64_t k = mg_gguf_find_key(g, arrays[i].key);
        ck_assert_int_ge(k, 0);
        ck_assert_int_eq(mg_gguf_kv_type(g, k), MG_GGUF_TYPE_ARRAY);
        ck_assert_int_eq(mg_gguf_arr_type(g, k), arrays[i].type);
        ck_assert_uint_eq(mg_gguf_arr_n(g, k), arrays[i].n);
        expect_le_array(mg_gguf_arr_data(g, k), arrays[i].values, arrays[i].n, arrays[i].size, arrays[i].f,
                        arrays[i].b);
    }
    int64_t k = mg_gguf_find_key(g, "a.str");
    ck_assert_uint_eq(mg_gguf_arr_n(g, k), 3);
    for (uint64_t j = 0; j < 3; j++) {
        str = mg_gguf_arr_str(g, k, j, &len);
        ck_assert_uint_eq(len, strlen(arr_str[j]));
        ck_assert(memcmp(str, arr_str[j], len) == 0);
    }

    // Tensors: offsets are the running sum of padded sizes, data is the source.
    ck_assert_int_eq(mg_gguf_n_tensors(g), N_TENSORS);
    size_t offset = 0;
    for (int i = 0; i < N_TENSORS; i++) {
        const struct mg_gguf_tensor_info * t = mg_gguf_tensor(g, i);
        ck_assert_str_eq(t->name, tensors[i].name);
        ck_assert_int_eq(t->type, tensors[i].type);
        ck_assert_int_eq(t->n_dims, tensors[i].n_dims);
        for (int j = 0; j < 4; j++) ck_assert_int_eq(t->ne[j], tensors[i].ne[j]);
        ck_assert_uint_eq(t->nbytes, tensors[i].nbytes);
        ck_assert_uint_eq(t->offset, offset);
        ck_assert(memcmp(t->data, tensor_data[i], t->nbytes) == 0);
        offset += pad(tensors[i].nbytes, alignment);
    }
    ck_assert_uint_eq(mg_gguf_data_offset(g) % alignment, 0);
    ck_assert_uint_eq(mg_gguf_file_size(g), mg_gguf_data_offset(g) + offset);
    mg_gguf_close(g);

    // The raw bytes: the header, and zeros in every padding gap.
    size_t n;
    uint8_t * file = mg_test_read_file(path, &n);
    ck_assert(memcmp(file, "GGUF", 4) == 0);
    ck_assert_uint_eq(le(file + 4, 4), 3);
    ck_assert_uint_eq(le(file + 8, 8), N_TENSORS);
    g = mg_gguf_open(path);
    size_t data = mg_gguf_data_offset(g);
    for (int i = 0; i < N_TENSORS; i++) {
        const struct mg_gguf_tensor_info * t = mg_gguf_tensor(g, i);
        size_t end = data + t->offset + t->nbytes;
        size_t next = i + 1 < N_TENSORS ? data + mg_gguf_tensor(g, i + 1)->offset : n;
        for (size_t p = end; p < next; p++) ck_assert_msg(file[p] == 0, "padding byte %zu is %d", p, file[p]);
    }
    mg_gguf_close(g);
    free(file);
}

START_TEST(test_every_value_and_tensor) {
    mg_test_make_dir(dir, sizeof(dir), "writer");
    const uint32_t alignments[] = {32, 64, 1};
    for (int a = 0; a < 3; a++) {
        struct mg_gguf_writer * w = build_everything(alignments[a]);
        ck_assert_int_eq(mg_gguf_writer_n_tensors(w), N_TENSORS);
        const char * path = mg_test_path_in(dir, "all.gguf");
        ck_assert_msg(mg_gguf_writer_write(w, path), "%s", mg_last_error());
        ck_assert_int_eq(n_entries(dir), 1);   // all.gguf alone: the temporary file was renamed
        check_everything(path, alignments[a]);
        mg_gguf_writer_free(w);
        free_tensor_data();
        remove(path);
    }
    rmdir(dir);
}
END_TEST

START_TEST(test_set_replaces_and_moves_to_end) {
    struct mg_gguf_writer * w = mg_gguf_writer_new();
    ck_assert(mg_gguf_writer_set_u32(w, "x", 1));
    ck_assert(mg_gguf_writer_set_u32(w, "y", 2));
    ck_assert(mg_gguf_writer_set_str(w, "x", "now a string"));
    ck_assert_int_eq(mg_gguf_writer_n_kv(w), 2);
    mg_test_make_dir(dir, sizeof(dir), "writer");
    ck_assert(mg_gguf_writer_write(w, mg_test_path_in(dir, "r.gguf")));
    struct mg_gguf * g = mg_gguf_open(mg_test_path_in(dir, "r.gguf"));
    ck_assert_msg(g != NULL, "%s", mg_last_error());
    ck_assert_str_eq(mg_gguf_key(g, 0), "y");
    ck_assert_str_eq(mg_gguf_key(g, 1), "x");
    ck_assert_int_eq(mg_gguf_kv_type(g, 1), MG_GGUF_TYPE_STRING);
    ck_assert_int_eq(mg_gguf_n_tensors(g), 0);
    // No tensors, no padding: the file ends with the last pair, like llama.cpp's vocab files.
    ck_assert_uint_eq(mg_gguf_file_size(g), 24 + (8 + 1 + 4 + 4) + (8 + 1 + 4 + 8 + 12));
    mg_gguf_close(g);
    remove(mg_test_path_in(dir, "r.gguf"));
    rmdir(dir);
    mg_gguf_writer_free(w);
}
END_TEST

START_TEST(test_rejects_bad_input) {
    struct mg_gguf_writer * w = mg_gguf_writer_new();
    ck_assert(!mg_gguf_writer_set_u32(w, "", 1));
    ck_assert(!mg_gguf_writer_set_u32(w, "general.alignment", 48));
    ck_assert_msg(strstr(mg_last_error(), "power of 2"), "%s", mg_last_error());
    ck_assert(!mg_gguf_writer_set_i32(w, "general.alignment", 64));
    ck_assert_msg(strstr(mg_last_error(), "must be u32"), "%s", mg_last_error());
    ck_assert(!mg_gguf_writer_set_arr_data(w, "a", MG_GGUF_TYPE_STRING, "x", 1));
    ck_assert_int_eq(mg_gguf_writer_n_kv(w), 0);

    float data[64] = {0};
    int64_t ne[2] = {32, 2};
    ck_assert(mg_gguf_writer_add_tensor(w, "t", MG_TYPE_F32, 2, ne, data));
    ck_assert(!mg_gguf_writer_add_tensor(w, "t", MG_TYPE_F32, 2, ne, data));
    ck_assert_msg(strstr(mg_last_error(), "'t'"), "%s", mg_last_error());
    ck_assert(!mg_gguf_writer_add_tensor(w, "", MG_TYPE_F32, 2, ne, data));
    char name64[65];
    memset(name64, 'n', 64);
    name64[64] = '\0';
    ck_assert(!mg_gguf_writer_add_tensor(w, name64, MG_TYPE_F32, 2, ne, data));
    name64[63] = '\0';
    ck_assert(mg_gguf_writer_add_tensor(w, name64, MG_TYPE_F32, 2, ne, data));   // 63 bytes is the most
    ck_assert(!mg_gguf_writer_add_tensor(w, "u", 4, 2, ne, data));
    ck_assert(!mg_gguf_writer_add_tensor(w, "u", MG_TYPE_F32, 0, ne, data));
    ck_assert(!mg_gguf_writer_add_tensor(w, "u", MG_TYPE_F32, 5, ne, data));
    int64_t bad[2] = {33, 1};
    ck_assert(!mg_gguf_writer_add_tensor(w, "u", MG_TYPE_Q8_0, 2, bad, data));
    ck_assert_msg(strstr(mg_last_error(), "ne[0] = 33"), "%s", mg_last_error());
    bad[0] = 0;
    ck_assert(!mg_gguf_writer_add_tensor(w, "u", MG_TYPE_F32, 2, bad, data));
    ck_assert_int_eq(mg_gguf_writer_n_tensors(w), 2);
    mg_gguf_writer_free(w);
}
END_TEST

// Copy a fixture's metadata, drop one key, override another: the result must
// hold the same bytes, with the overridden key last (where llama-quantize puts it).
START_TEST(test_copy_kvs) {
    struct mg_gguf * src = mg_gguf_open(mg_test_fixture("models/tiny-f32.gguf"));
    ck_assert_ptr_nonnull(src);
    struct mg_gguf_writer * w = mg_gguf_writer_new();
    const char * skip[] = {"general.name", NULL};
    ck_assert(mg_gguf_writer_copy_kvs(w, src, skip));
    ck_assert(mg_gguf_writer_set_u32(w, "general.file_type", 7));
    mg_test_make_dir(dir, sizeof(dir), "writer");
    ck_assert(mg_gguf_writer_write(w, mg_test_path_in(dir, "copy.gguf")));
    struct mg_gguf * g = mg_gguf_open(mg_test_path_in(dir, "copy.gguf"));
    ck_assert_msg(g != NULL, "%s", mg_last_error());
    ck_assert_int_eq(mg_gguf_n_kv(g), mg_gguf_n_kv(src) - 1);
    ck_assert_int_eq(mg_gguf_find_key(g, "general.name"), -1);
    ck_assert_str_eq(mg_gguf_key(g, mg_gguf_n_kv(g) - 1), "general.file_type");
    uint32_t ft;
    ck_assert(mg_gguf_get_u32(g, "general.file_type", &ft) && ft == 7);
    for (int64_t i = 0; i < mg_gguf_n_kv(src); i++) {
        const char * key = mg_gguf_key(src, i);
        if (strcmp(key, "general.name") == 0 || strcmp(key, "general.file_type") == 0) continue;
        int64_t j = mg_gguf_find_key(g, key);
        ck_assert_int_ge(j, 0);
        ck_assert_int_eq(mg_gguf_kv_type(g, j), mg_gguf_kv_type(src, i));
        size_t na, nb;
        const void * a = mg_gguf_kv_raw(src, i, &na);
        const void * b = mg_gguf_kv_raw(g, j, &nb);
        ck_assert_uint_eq(na, nb);
        ck_assert_msg(memcmp(a, b, na) == 0, "%s differs", key);
    }
    mg_gguf_close(g);
    mg_gguf_close(src);
    mg_gguf_writer_free(w);
    remove(mg_test_path_in(dir, "copy.gguf"));
    rmdir(dir);
}
END_TEST

// ---------------------------------------------------------------------------
// Failures leave nothing behind
// ---------------------------------------------------------------------------

static struct mg_gguf_writer * small_writer(float * data) {
    struct mg_gguf_writer * w = mg_gguf_writer_new();
    mg_gguf_writer_set_str(w, "general.architecture", "qwen3");
    int64_t ne[1] = {4096};
    ck_assert(mg_gguf_writer_add_tensor(w, "w", MG_TYPE_F32, 1, ne, data));
    return w;
}

START_TEST(test_no_such_directory) {
    static float data[4096];
    struct mg_gguf_writer * w = small_writer(data);
    ck_assert(!mg_gguf_writer_write(w, "/nonexistent-mg-dir/out.gguf"));
    ck_assert_msg(strstr(mg_last_error(), "/nonexistent-mg-dir/out.gguf: cannot create a temporary file"), "%s",
                  mg_last_error());
    mg_gguf_writer_free(w);
}
END_TEST

// The temporary file is written, but renaming it fails (the target is a
// directory): it must be removed, and the directory left alone.
START_TEST(test_rename_fails) {
    static float data[4096];
    struct mg_gguf_writer * w = small_writer(data);
    mg_test_make_dir(dir, sizeof(dir), "writer");
    const char * target = mg_test_path_in(dir, "a-directory");
    ck_assert_int_eq(mkdir(target, 0700), 0);
    ck_assert(!mg_gguf_writer_write(w, target));
    ck_assert_msg(strstr(mg_last_error(), "cannot rename"), "%s", mg_last_error());
    ck_assert_int_eq(n_entries(dir), 1);   // the directory alone: no temporary file left
    struct stat st;
    ck_assert(stat(target, &st) == 0 && S_ISDIR(st.st_mode));
    rmdir(target);
    rmdir(dir);
    mg_gguf_writer_free(w);
}
END_TEST

// A full device: /dev/full accepts the open and fails every write with ENOSPC.
START_TEST(test_dev_full) {
    static float data[4096];
    struct mg_gguf_writer * w = small_writer(data);
    FILE * f = fopen("/dev/full", "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert(!mg_gguf_writer_write_stream(w, f, "/dev/full"));
    ck_assert_msg(strstr(mg_last_error(), "/dev/full: write failed"), "%s", mg_last_error());
    ck_assert_msg(strstr(mg_last_error(), strerror(ENOSPC)), "%s", mg_last_error());
    fclose(f);
    mg_gguf_writer_free(w);

    // A file small enough to sit in the stream's buffer: only the flush can fail.
    w = mg_gguf_writer_new();
    ck_assert(mg_gguf_writer_set_u8(w, "k", 1));
    f = fopen("/dev/full", "wb");
    ck_assert(!mg_gguf_writer_write_stream(w, f, "/dev/full"));
    ck_assert_msg(strstr(mg_last_error(), strerror(ENOSPC)), "%s", mg_last_error());
    fclose(f);
    mg_gguf_writer_free(w);
}
END_TEST

// A disk that fills up half way, through the path API: a file-size limit
// makes writes past 4 KB fail (EFBIG). The old file at the path must survive
// untouched, and no temporary file may remain.
START_TEST(test_disk_fills_up) {
    static float data[4096];   // 16 KB of tensor data
    struct mg_gguf_writer * w = small_writer(data);
    mg_test_make_dir(dir, sizeof(dir), "writer");
    const char * path = mg_test_path_in(dir, "model.gguf");
    FILE * old = fopen(path, "wb");
    fputs("the previous model", old);
    fclose(old);

    struct rlimit saved;
    getrlimit(RLIMIT_FSIZE, &saved);
    struct rlimit limit = {4096, saved.rlim_max};
    signal(SIGXFSZ, SIG_IGN);   // get EFBIG instead of being killed
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &limit), 0);
    bool ok = mg_gguf_writer_write(w, path);
    setrlimit(RLIMIT_FSIZE, &saved);

    ck_assert(!ok);
    ck_assert_msg(strstr(mg_last_error(), "model.gguf: write failed"), "%s", mg_last_error());
    ck_assert_int_eq(n_entries(dir), 1);   // the old file alone: no temporary file left
    size_t n;
    char * text = mg_test_read_file(path, &n);
    ck_assert(text != NULL && strcmp(text, "the previous model") == 0);
    free(text);
    remove(path);
    rmdir(dir);
    mg_gguf_writer_free(w);
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("gguf_writer");
    MG_TCASE(s, "writer", test_every_value_and_tensor, test_set_replaces_and_moves_to_end, test_rejects_bad_input,
                test_copy_kvs, test_no_such_directory, test_rename_fails, test_dev_full, test_disk_fills_up);
    return s;
}
