// test_gguf.c - the GGUF reader: the fixture models as their README describes
// them, and hostile files built byte by byte here, each of which must be
// refused with a message naming the field and the byte where it starts.
#define _POSIX_C_SOURCE 200809L   // mkstemp, unlink
#include "harness.h"
#include "gguf.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// ---------------------------------------------------------------------------
// Helpers: files on disk, error messages
// ---------------------------------------------------------------------------

static char last_path[64];

// Writes n bytes to a fresh temporary file and opens it with the reader.
static struct mg_gguf * open_bytes(const uint8_t * p, size_t n) {
    snprintf(last_path, sizeof(last_path), "/tmp/mg_test_gguf_XXXXXX");
    int fd = mkstemp(last_path);
    ck_assert_int_ge(fd, 0);
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(fd, p + done, n - done);
        ck_assert_int_gt(w, 0);
        done += (size_t) w;
    }
    close(fd);
    struct mg_gguf * g = mg_gguf_open(last_path);
    unlink(last_path);   // the mapping keeps the file alive
    return g;
}

// The N of "at byte N" in the last error, or -1.
static long long error_offset(void) {
    const char * s = strstr(mg_last_error(), " at byte ");
    return s ? strtoll(s + strlen(" at byte "), NULL, 10) : -1;
}

// Opening must fail, and the message must name the file, contain every
// fragment, and blame byte at.
static void expect_error(const uint8_t * p, size_t n, long long at, const char * fragment1, const char * fragment2) {
    struct mg_gguf * g = open_bytes(p, n);
    ck_assert_msg(g == NULL, "a bad file was accepted (expected '%s')", fragment1);
    const char * e = mg_last_error();
    ck_assert_msg(strncmp(e, last_path, strlen(last_path)) == 0, "message does not start with the path: %s", e);
    ck_assert_msg(strstr(e, fragment1) != NULL, "'%s' not in: %s", fragment1, e);
    ck_assert_msg(fragment2 == NULL || strstr(e, fragment2) != NULL, "'%s' not in: %s", fragment2, e);
    ck_assert_msg(error_offset() == at, "expected byte %lld in: %s", at, e);
}

// ---------------------------------------------------------------------------
// A small valid GGUF, byte by byte, with the position of every field
// ---------------------------------------------------------------------------

struct buf {
    uint8_t * p;
    size_t    n;
    size_t    cap;
    size_t    starts[256];   // the offset of every field written
    int       n_starts;
};

static void grow(struct buf * b, size_t n) {
    if (b->n + n <= b->cap) return;
    b->cap = 2 * (b->n + n) + 64;
    b->p = realloc(b->p, b->cap);
    ck_assert_ptr_nonnull(b->p);
}

// A byte that is not a field of its own (string bytes, padding, data).
static void put_byte(struct buf * b, uint8_t v) {
    grow(b, 1);
    b->p[b->n++] = v;
}

// A little-endian field of nbytes; returns where it starts.
static size_t put(struct buf * b, uint64_t v, int nbytes) {
    size_t at = b->n;
    for (int i = 0; i < nbytes; i++) put_byte(b, (uint8_t) (v >> (8 * i)));
    if (b->n_starts < 256) b->starts[b->n_starts++] = at;
    return at;
}

static size_t put_str(struct buf * b, const char * s) {
    size_t at = put(b, strlen(s), 8);
    for (const char * c = s; *c; c++) put_byte(b, (uint8_t) *c);
    return at;
}

static void patch(struct buf * b, size_t at, uint64_t v, int nbytes) {
    for (int i = 0; i < nbytes; i++) b->p[at + (size_t) i] = (uint8_t) (v >> (8 * i));
}

// Where the fields of the small file are.
struct small {
    struct buf b;
    size_t key[4], type[4], value[4];
    size_t arr_elem_type, arr_count;
    size_t name[2], n_dims[2], ne[2][2], ttype[2], offset[2];
    size_t data_start;
};

// The names can be changed to build files with bad names or keys.
struct small_names {
    const char * key[4];
    const char * name[2];
};

static const struct small_names default_names = {
    {"general.architecture", "general.alignment", "tokenizer.ggml.tokens", "tokenizer.ggml.token_type"},
    {"a", "b"},
};

// 4 kvs (str, u32 alignment 32, arr[str], arr[i32]), then tensor "a": q8_0
// {32, 2} (68 bytes, padded to 96) at offset 0 and tensor "b": f32 {8} (32
// bytes) at offset 96. The file ends with b's last byte.
static void build_small(struct small * s, const struct small_names * names) {
    memset(s, 0, sizeof(*s));
    struct buf * b = &s->b;
    put(b, 0x46554747, 4);   // "GGUF"
    put(b, 3, 4);
    put(b, 2, 8);
    put(b, 4, 8);

    s->key[0] = put_str(b, names->key[0]);
    s->type[0] = put(b, 8, 4);
    s->value[0] = put_str(b, "qwen3");

    s->key[1] = put_str(b, names->key[1]);
    s->type[1] = put(b, 4, 4);
    s->value[1] = put(b, 32, 4);

    s->key[2] = put_str(b, names->key[2]);
    s->type[2] = put(b, 9, 4);
    s->value[2] = s->arr_elem_type = put(b, 8, 4);
    s->arr_count = put(b, 2, 8);
    put_str(b, "a");
    put_str(b, "bc");

    s->key[3] = put_str(b, names->key[3]);
    s->type[3] = put(b, 9, 4);
    s->value[3] = put(b, 5, 4);
    put(b, 2, 8);
    put(b, 1, 4);
    put(b, 3, 4);

    const uint32_t types[2] = {8, 0};
    const uint64_t ne[2][2] = {{32, 2}, {8, 1}};
    const uint32_t n_dims[2] = {2, 1};
    const uint64_t offsets[2] = {0, 96};
    for (int i = 0; i < 2; i++) {
        s->name[i] = put_str(b, names->name[i]);
        s->n_dims[i] = put(b, n_dims[i], 4);
        for (uint32_t j = 0; j < n_dims[i]; j++) s->ne[i][j] = put(b, ne[i][j], 8);
        s->ttype[i] = put(b, types[i], 4);
        s->offset[i] = put(b, offsets[i], 8);
    }
    ck_assert_uint_ne(b->n % 32, 0);   // so that a reader forgetting the padding is caught
    while (b->n % 32 != 0) put_byte(b, 0);
    s->data_start = b->n;
    for (int i = 0; i < 128; i++) put_byte(b, (uint8_t) (i * 7 + 1));   // 68 bytes of "a", 28 of padding, 32 of "b"
}

START_TEST(test_small_file_reads) {
    struct small s;
    build_small(&s, &default_names);
    struct mg_gguf * g = open_bytes(s.b.p, s.b.n);
    ck_assert_msg(g != NULL, "%s", mg_last_error());
    ck_assert_int_eq(mg_gguf_version(g), 3);
    ck_assert_int_eq(mg_gguf_n_kv(g), 4);
    ck_assert_int_eq(mg_gguf_n_tensors(g), 2);
    ck_assert_uint_eq(mg_gguf_alignment(g), 32);
    ck_assert_uint_eq(mg_gguf_data_offset(g), s.data_start);
    ck_assert_uint_eq(mg_gguf_file_size(g), s.b.n);

    const char * str;
    uint64_t len;
    ck_assert(mg_gguf_get_str(g, "general.architecture", &str, &len));
    ck_assert_uint_eq(len, 5);
    ck_assert(memcmp(str, "qwen3", 5) == 0);

    int64_t k = mg_gguf_find_key(g, "tokenizer.ggml.tokens");
    ck_assert_int_eq(k, 2);
    ck_assert_int_eq(mg_gguf_arr_type(g, k), MG_GGUF_TYPE_STRING);
    ck_assert_uint_eq(mg_gguf_arr_n(g, k), 2);
    str = mg_gguf_arr_str(g, k, 1, &len);
    ck_assert_uint_eq(len, 2);
    ck_assert(memcmp(str, "bc", 2) == 0);

    k = mg_gguf_find_key(g, "tokenizer.ggml.token_type");
    const uint8_t * types = mg_gguf_arr_data(g, k);
    ck_assert_int_eq(types[4], 3);   // the second i32, little-endian

    const struct mg_gguf_tensor_info * a = mg_gguf_find_tensor(g, "a");
    const struct mg_gguf_tensor_info * b = mg_gguf_tensor(g, 1);
    ck_assert_int_eq(a->type, 8);
    ck_assert_int_eq(a->n_dims, 2);
    ck_assert_int_eq(a->ne[0], 32);
    ck_assert_int_eq(a->ne[1], 2);
    ck_assert_int_eq(a->ne[2], 1);
    ck_assert_uint_eq(a->nbytes, 2 * 34);
    ck_assert_uint_eq(b->nbytes, 32);
    ck_assert(memcmp(a->data, s.b.p + s.data_start, 68) == 0);
    ck_assert(memcmp(b->data, s.b.p + s.data_start + 96, 32) == 0);
    ck_assert_ptr_eq((const uint8_t *) b->data, (const uint8_t *) a->data + 96);   // one mapping
    ck_assert_ptr_null(mg_gguf_find_tensor(g, "c"));
    mg_gguf_close(g);
    free(s.b.p);
}
END_TEST

// Cut the small file at every byte: always refused, always blaming the start
// of a field at or before the cut.
START_TEST(test_truncated_everywhere) {
    struct small s;
    build_small(&s, &default_names);
    for (size_t cut = 0; cut < s.b.n; cut++) {
        struct mg_gguf * g = open_bytes(s.b.p, cut);
        ck_assert_msg(g == NULL, "a file cut at byte %zu was accepted", cut);
        long long at = error_offset();
        ck_assert_msg(at >= 0 && at <= (long long) cut, "cut %zu: %s", cut, mg_last_error());
        bool is_field_start = false;
        for (int i = 0; i < s.b.n_starts; i++) is_field_start |= s.b.starts[i] == (size_t) at;
        ck_assert_msg(is_field_start, "cut %zu: byte %lld is not the start of a field: %s", cut, at, mg_last_error());
    }
    free(s.b.p);
}
END_TEST

START_TEST(test_bad_header) {
    struct small s;
    build_small(&s, &default_names);
    struct buf * b = &s.b;

    b->p[3] = 'G';   // "GGUG"
    expect_error(b->p, b->n, 0, "magic", "47 47 55 47");
    b->p[3] = 'F';

    const uint32_t versions[] = {0, 1, 4, 0x03000000};
    const char * why[] = {"not a GGUF version", "GGUFv1", "newer than 3", "byte-swapped"};
    for (int i = 0; i < 4; i++) {
        patch(b, 4, versions[i], 4);
        expect_error(b->p, b->n, 4, "version", why[i]);
    }
    patch(b, 4, 3, 4);

    patch(b, 8, 1ull << 60, 8);
    expect_error(b->p, b->n, 8, "tensor_count = 1152921504606846976", "at most");
    patch(b, 8, 2, 8);
    patch(b, 16, 1ull << 60, 8);
    expect_error(b->p, b->n, 16, "kv_count = 1152921504606846976", "at most");
    patch(b, 16, 4, 8);

    // Just a header that claims 2^60 tensors: refused before any allocation.
    patch(b, 8, 1ull << 60, 8);
    expect_error(b->p, 24, 8, "tensor_count", NULL);
    free(b->p);
}
END_TEST

START_TEST(test_bad_kvs) {
    struct small s;
    build_small(&s, &default_names);
    struct buf * b = &s.b;

    patch(b, s.key[0], 1ull << 40, 8);
    expect_error(b->p, b->n, (long long) s.key[0], "kv 0: key", "2^30");
    patch(b, s.key[0], 1000000, 8);
    expect_error(b->p, b->n, (long long) s.key[0], "kv 0: key", "past the end");
    patch(b, s.key[0], 20, 8);

    patch(b, s.arr_count, 1ull << 40, 8);
    expect_error(b->p, b->n, (long long) s.arr_count, "kv 2 'tokenizer.ggml.tokens': array count", "2^30");
    patch(b, s.arr_count, 1ull << 29, 8);
    expect_error(b->p, b->n, (long long) s.arr_count, "array count", "strings need");
    patch(b, s.arr_count, 2, 8);

    patch(b, s.type[0], 13, 4);
    expect_error(b->p, b->n, (long long) s.type[0], "kv 0 'general.architecture': value type", "13");
    patch(b, s.type[0], 8, 4);

    patch(b, s.arr_elem_type, 9, 4);
    expect_error(b->p, b->n, (long long) s.arr_elem_type, "array element type", "arrays of arrays");
    patch(b, s.arr_elem_type, 8, 4);

    patch(b, s.value[1], 48, 4);
    expect_error(b->p, b->n, (long long) s.value[1], "kv 1 'general.alignment': value", "power of 2");
    patch(b, s.value[1], 0, 4);
    expect_error(b->p, b->n, (long long) s.value[1], "general.alignment", "power of 2");
    patch(b, s.value[1], 32, 4);
    patch(b, s.type[1], 5, 4);   // i32, same size
    expect_error(b->p, b->n, (long long) s.type[1], "kv 1 'general.alignment': value type", "must be u32");
    free(b->p);

    struct small_names names = default_names;
    names.key[1] = "";
    build_small(&s, &names);
    expect_error(s.b.p, s.b.n, (long long) s.key[1], "kv 1: key", "empty");
    free(s.b.p);

    names = default_names;
    names.key[3] = "general.architecture";
    build_small(&s, &names);
    expect_error(s.b.p, s.b.n, (long long) s.key[3], "kv 3 'general.architecture': key", "same key");
    free(s.b.p);
}
END_TEST

START_TEST(test_bad_tensor_infos) {
    struct small s;
    build_small(&s, &default_names);
    struct buf * b = &s.b;

    patch(b, s.n_dims[0], 0, 4);
    expect_error(b->p, b->n, (long long) s.n_dims[0], "tensor 0 'a': n_dims = 0", "1..4");
    patch(b, s.n_dims[0], 5, 4);
    expect_error(b->p, b->n, (long long) s.n_dims[0], "tensor 0 'a': n_dims = 5", "1..4");
    patch(b, s.n_dims[0], 2, 4);

    patch(b, s.ne[0][1], 0, 8);
    expect_error(b->p, b->n, (long long) s.ne[0][1], "tensor 0 'a': ne[1] = 0", "> 0");
    patch(b, s.ne[0][1], 1ull << 62, 8);   // 32 * 2^62 elements
    expect_error(b->p, b->n, (long long) s.ne[0][1], "ne[1] = 4611686018427387904", "overflows");
    patch(b, s.ne[0][1], 2, 8);

    patch(b, s.ne[0][0], 33, 8);
    expect_error(b->p, b->n, (long long) s.ne[0][0], "tensor 0 'a': ne[0] = 33", "q8_0 block size 32");
    patch(b, s.ne[0][0], 32, 8);

    patch(b, s.ne[1][0], 1ull << 62, 8);   // 2^62 floats: the count fits, the bytes do not
    expect_error(b->p, b->n, (long long) s.ttype[1], "tensor 1 'b': type = f32", "byte size overflows");
    patch(b, s.ne[1][0], 8, 8);

    patch(b, s.ttype[1], 4, 4);
    expect_error(b->p, b->n, (long long) s.ttype[1], "tensor 1 'b': type = 4", "not a ggml type");
    patch(b, s.ttype[1], 99, 4);
    expect_error(b->p, b->n, (long long) s.ttype[1], "tensor 1 'b': type = 99", "not a ggml type");
    patch(b, s.ttype[1], 0, 4);

    patch(b, s.offset[1], 97, 8);
    expect_error(b->p, b->n, (long long) s.offset[1], "tensor 1 'b': offset = 97", "alignment 32");
    patch(b, s.offset[1], 1ull << 40, 8);
    expect_error(b->p, b->n, (long long) s.offset[1], "tensor 1 'b': offset = 1099511627776", "past the end");
    patch(b, s.offset[1], 64, 8);   // a spans 0..68
    expect_error(b->p, b->n, (long long) s.offset[1], "tensor 1 'b': offset = 64", "overlaps tensor 0 'a'");
    patch(b, s.offset[1], 0, 8);    // the same offset as a
    expect_error(b->p, b->n, (long long) s.offset[1], "tensor 1 'b': offset = 0", "overlaps tensor 0 'a'");
    free(b->p);

    char name64[65];
    memset(name64, 'x', 64);
    name64[64] = '\0';
    struct small_names names = default_names;
    names.name[1] = name64;
    build_small(&s, &names);
    expect_error(s.b.p, s.b.n, (long long) s.name[1], "tensor 1: name", "64 bytes");
    free(s.b.p);

    names = default_names;
    names.name[1] = "a";
    build_small(&s, &names);
    expect_error(s.b.p, s.b.n, (long long) s.name[1], "tensor 1 'a': name", "same name");
    free(s.b.p);
}
END_TEST

// Tensors need not be in offset order, only apart: ggml's running-sum rule is
// not required.
START_TEST(test_offsets_out_of_order) {
    struct small s;
    build_small(&s, &default_names);
    // b (32 bytes) first, then a (68 bytes) at 32: swap the data too.
    patch(&s.b, s.offset[0], 32, 8);
    patch(&s.b, s.offset[1], 0, 8);
    struct mg_gguf * g = open_bytes(s.b.p, s.b.n);
    ck_assert_msg(g != NULL, "%s", mg_last_error());
    ck_assert_ptr_eq((const uint8_t *) mg_gguf_tensor(g, 0)->data,
                     (const uint8_t *) mg_gguf_tensor(g, 1)->data + 32);
    mg_gguf_close(g);
    free(s.b.p);
}
END_TEST

// ---------------------------------------------------------------------------
// The fixture models
// ---------------------------------------------------------------------------

static const char * const models[3] = {"models/tiny-f32.gguf", "models/tiny-q8_0.gguf", "models/tiny-q4_k_m.gguf"};
static const size_t model_bytes[3] = {13087552, 3654496, 2530400};

// The type the fixtures README gives tensor name in model m.
static int expected_type(int m, const char * name) {
    if (strstr(name, "_norm")) return 0;   // every *_norm is F32
    if (m == 0) return 0;
    if (m == 1) return 8;                  // Q8_0
    if (strcmp(name, "token_embd.weight") == 0) return 14;   // Q6_K
    bool layer1 = strncmp(name, "blk.1.", 6) == 0;
    if (strstr(name, "attn_v") || strstr(name, "ffn_down")) return layer1 ? 14 : 12;
    return 12;                             // Q4_K
}

START_TEST(test_fixture_models) {
    int m = _i;
    struct mg_gguf * g = mg_gguf_open(mg_test_fixture(models[m]));
    ck_assert_msg(g != NULL, "%s", mg_last_error());
    ck_assert_int_eq(mg_gguf_version(g), 3);
    ck_assert_uint_eq(mg_gguf_file_size(g), model_bytes[m]);
    ck_assert_uint_eq(mg_gguf_alignment(g), 32);
    ck_assert_uint_eq(mg_gguf_data_offset(g) % 32, 0);
    ck_assert_int_eq(mg_gguf_n_tensors(g), 2 + 2 * 11);   // token_embd, output_norm, 11 per layer, tied output
    ck_assert_ptr_null(mg_gguf_find_tensor(g, "output.weight"));

    const char * str;
    uint64_t len;
    ck_assert(mg_gguf_get_str(g, "general.architecture", &str, &len));
    ck_assert(len == 5 && memcmp(str, "qwen3", 5) == 0);
    const struct { const char * key; uint32_t value; } hparams[] = {
        {"qwen3.block_count", 2}, {"qwen3.embedding_length", 256}, {"qwen3.attention.head_count", 4},
        {"qwen3.attention.head_count_kv", 2}, {"qwen3.attention.key_length", 64},
        {"qwen3.attention.value_length", 64}, {"qwen3.feed_forward_length", 768}, {"qwen3.context_length", 512},
    };
    for (size_t i = 0; i < sizeof(hparams) / sizeof(hparams[0]); i++) {
        uint32_t v = 0;
        ck_assert_msg(mg_gguf_get_u32(g, hparams[i].key, &v), "%s", mg_last_error());
        ck_assert_uint_eq(v, hparams[i].value);
    }
    float f;
    ck_assert(mg_gguf_get_f32(g, "qwen3.rope.freq_base", &f));
    ck_assert(f == 1e6f);
    ck_assert(mg_gguf_get_f32(g, "qwen3.attention.layer_norm_rms_epsilon", &f));
    ck_assert(f == 1e-6f);

    int64_t k = mg_gguf_find_key(g, "tokenizer.ggml.tokens");
    ck_assert_int_ge(k, 0);
    ck_assert_uint_eq(mg_gguf_arr_n(g, k), 6400);
    str = mg_gguf_arr_str(g, k, 1, &len);
    ck_assert(len == 12 && memcmp(str, "<|im_start|>", 12) == 0);
    k = mg_gguf_find_key(g, "tokenizer.ggml.merges");
    ck_assert_uint_eq(mg_gguf_arr_n(g, k), 6108);
    k = mg_gguf_find_key(g, "tokenizer.ggml.token_type");
    ck_assert_int_eq(mg_gguf_arr_type(g, k), MG_GGUF_TYPE_INT32);
    const uint8_t * types = mg_gguf_arr_data(g, k);
    for (int id = 0; id < 6400; id++) {
        int want = id <= 20 || (id >= 27 && id <= 35) ? 3 : id <= 26 ? 4 : 1;
        int32_t t = (int32_t) ((uint32_t) types[4 * id] | (uint32_t) types[4 * id + 1] << 8 |
                               (uint32_t) types[4 * id + 2] << 16 | (uint32_t) types[4 * id + 3] << 24);
        ck_assert_msg(t == want, "token %d has type %d", id, t);
    }
    uint32_t id;
    ck_assert(mg_gguf_get_u32(g, "tokenizer.ggml.bos_token_id", &id) && id == 1);
    ck_assert(mg_gguf_get_u32(g, "tokenizer.ggml.eos_token_id", &id) && id == 2);
    bool add_bos = true;
    ck_assert(mg_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &add_bos) && !add_bos);

    // Every tensor: its README type, its shape, its size, and its bytes in the file.
    size_t file_size;
    uint8_t * file = mg_test_read_file(mg_test_fixture(models[m]), &file_size);
    ck_assert_ptr_nonnull(file);
    for (int64_t i = 0; i < mg_gguf_n_tensors(g); i++) {
        const struct mg_gguf_tensor_info * t = mg_gguf_tensor(g, i);
        ck_assert_msg(t->type == expected_type(m, t->name), "%s has type %d", t->name, t->type);
        int64_t blck = t->type == 0 ? 1 : t->type == 8 ? 32 : 256;
        size_t block_bytes = t->type == 0 ? 4 : t->type == 8 ? 34 : t->type == 12 ? 144 : 210;
        ck_assert_uint_eq(t->nbytes, (size_t) (t->ne[0] * t->ne[1] / blck) * block_bytes);
        ck_assert(memcmp(t->data, file + mg_gguf_data_offset(g) + t->offset, 64) == 0);
    }
    free(file);
    const struct mg_gguf_tensor_info * e = mg_gguf_find_tensor(g, "token_embd.weight");
    ck_assert(e->n_dims == 2 && e->ne[0] == 256 && e->ne[1] == 6400);
    e = mg_gguf_find_tensor(g, "blk.1.attn_k.weight");
    ck_assert(e->n_dims == 2 && e->ne[0] == 256 && e->ne[1] == 128);
    e = mg_gguf_find_tensor(g, "blk.0.ffn_down.weight");
    ck_assert(e->n_dims == 2 && e->ne[0] == 768 && e->ne[1] == 256);
    e = mg_gguf_find_tensor(g, "blk.0.attn_q_norm.weight");
    ck_assert(e->n_dims == 1 && e->ne[0] == 64 && e->ne[1] == 1);
    mg_gguf_close(g);
}
END_TEST

START_TEST(test_getters) {
    struct mg_gguf * g = mg_gguf_open(mg_test_fixture("models/tiny-f32.gguf"));
    ck_assert_ptr_nonnull(g);
    int32_t i32;
    uint64_t u64;
    ck_assert(mg_gguf_get_i32(g, "qwen3.block_count", &i32) && i32 == 2);   // u32 read as i32: it fits
    ck_assert(mg_gguf_get_u64(g, "qwen3.block_count", &u64) && u64 == 2);
    float f;
    ck_assert(!mg_gguf_get_f32(g, "qwen3.block_count", &f));
    ck_assert_msg(strstr(mg_last_error(), "'qwen3.block_count' is u32, wanted f32"), "%s", mg_last_error());
    uint32_t u32;
    ck_assert(!mg_gguf_get_u32(g, "no.such.key", &u32));
    ck_assert_msg(strstr(mg_last_error(), "'no.such.key' not found"), "%s", mg_last_error());

    char buf[64];
    int64_t k = mg_gguf_find_key(g, "tokenizer.ggml.tokens");
    ck_assert_str_eq(mg_gguf_kv_to_string(g, k, buf, sizeof(buf)), "[6400 strings]");
    k = mg_gguf_find_key(g, "qwen3.block_count");
    ck_assert_str_eq(mg_gguf_kv_to_string(g, k, buf, sizeof(buf)), "2");
    k = mg_gguf_find_key(g, "general.architecture");
    ck_assert_str_eq(mg_gguf_kv_to_string(g, k, buf, sizeof(buf)), "qwen3");
    k = mg_gguf_find_key(g, "tokenizer.chat_template");
    ck_assert_uint_lt(strlen(mg_gguf_kv_to_string(g, k, buf, sizeof(buf))), sizeof(buf));
    ck_assert(strstr(buf, "...") != NULL && strchr(buf, '\n') == NULL);
    mg_gguf_close(g);

    // Signed values and range checks, in a file of our own.
    struct buf b = {0};
    put(&b, 0x46554747, 4);
    put(&b, 3, 4);
    put(&b, 0, 8);
    put(&b, 2, 8);
    put_str(&b, "neg");
    put(&b, 1, 4);     // i8
    put(&b, 0xFE, 1);  // -2
    put_str(&b, "big");
    put(&b, 10, 4);    // u64
    put(&b, 1ull << 40, 8);
    g = open_bytes(b.p, b.n);
    ck_assert_msg(g != NULL, "%s", mg_last_error());
    ck_assert(mg_gguf_get_i32(g, "neg", &i32) && i32 == -2);
    ck_assert(!mg_gguf_get_u32(g, "neg", &u32));
    ck_assert_msg(strstr(mg_last_error(), "-2"), "%s", mg_last_error());
    ck_assert(!mg_gguf_get_u32(g, "big", &u32));
    ck_assert(mg_gguf_get_u64(g, "big", &u64) && u64 == 1ull << 40);
    ck_assert_str_eq(mg_gguf_kv_to_string(g, 0, buf, sizeof(buf)), "-2");
    mg_gguf_close(g);
    free(b.p);
}
END_TEST

// ---------------------------------------------------------------------------
// tiny-f32 cut at each section boundary
// ---------------------------------------------------------------------------

static uint64_t le(const uint8_t * p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

// A value's bytes, walked independently of the reader.
static size_t skip_value(const uint8_t * p, size_t at, uint32_t type) {
    static const size_t sizes[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    if (type == 8) return at + 8 + le(p + at, 8);
    if (type != 9) return at + sizes[type];
    uint32_t elem = (uint32_t) le(p + at, 4);
    uint64_t n = le(p + at + 4, 8);
    at += 12;
    for (uint64_t i = 0; i < n; i++) at = skip_value(p, at, elem);
    return at;
}

START_TEST(test_fixture_truncated_at_boundaries) {
    size_t size;
    uint8_t * p = mg_test_read_file(mg_test_fixture("models/tiny-f32.gguf"), &size);
    ck_assert_ptr_nonnull(p);
    uint64_t n_tensors = le(p + 8, 8), n_kv = le(p + 16, 8);
    // The header check: the counts must fit in what is left at 14 and 33 bytes
    // at least per kv and per tensor info.
    size_t needed = 24 + n_tensors * 33 + n_kv * 14;

    size_t at = 24;
    char expect[96];
    for (uint64_t i = 0; i <= n_kv + n_tensors; i++) {
        // Cut right at the start of kv i / tensor info i - n_kv: it is the
        // missing field, unless the header's counts already cannot fit.
        struct mg_gguf * g = open_bytes(p, at);
        ck_assert_ptr_null(g);
        if (at < needed) {
            ck_assert_msg(strstr(mg_last_error(), "tensor_count") != NULL, "%s", mg_last_error());
            ck_assert_int_eq(error_offset(), 8);
        } else if (i < n_kv) {
            snprintf(expect, sizeof(expect), "kv %" PRIu64 ": key at byte %zu", i, at);
            ck_assert_msg(strstr(mg_last_error(), expect) != NULL, "want '%s' in %s", expect, mg_last_error());
        } else if (i < n_kv + n_tensors) {
            snprintf(expect, sizeof(expect), "tensor %" PRIu64 ": name at byte %zu", i - n_kv, at);
            ck_assert_msg(strstr(mg_last_error(), expect) != NULL, "want '%s' in %s", expect, mg_last_error());
        } else {
            // All infos read: now the first tensor's data is missing.
            ck_assert_msg(strstr(mg_last_error(), "tensor 0 'token_embd.weight': offset = 0") != NULL, "%s",
                          mg_last_error());
        }
        if (i == n_kv + n_tensors) break;
        if (i < n_kv) {
            at += 8 + le(p + at, 8);
            uint32_t type = (uint32_t) le(p + at, 4);
            at = skip_value(p, at + 4, type);
        } else {
            at += 8 + le(p + at, 8);
            uint32_t n_dims = (uint32_t) le(p + at, 4);
            at += 4 + 8 * n_dims + 4 + 8;
        }
    }
    // Inside the data: the last tensor (output_norm.weight, tensor 23) is the one cut short.
    const size_t cuts[] = {size - 1, size - 1024};
    for (int c = 0; c < 2; c++) {
        struct mg_gguf * g = open_bytes(p, cuts[c]);
        ck_assert_ptr_null(g);
        ck_assert_msg(strstr(mg_last_error(), "tensor 23 'output_norm.weight': offset") != NULL, "%s", mg_last_error());
    }
    struct mg_gguf * g = open_bytes(p, size);   // the whole file, through the same path
    ck_assert_msg(g != NULL, "%s", mg_last_error());
    mg_gguf_close(g);
    free(p);
}
END_TEST

// The demo model walked by hand, as the chapter's README walks it: every
// key, every tensor info, the padding. The reader must have found the same
// counts, the same data offset, and each tensor's name, type, shape and offset.
START_TEST(test_demo_model_walk) {
    size_t size;
    uint8_t * f = mg_test_read_file(mg_test_root("models/fortune-toy-q8_0.gguf"), &size);
    ck_assert_ptr_nonnull(f);
    struct mg_gguf * g = mg_gguf_open(mg_test_root("models/fortune-toy-q8_0.gguf"));
    ck_assert_msg(g != NULL, "%s", mg_last_error());
    ck_assert_mem_eq(f, "GGUF", 4);
    ck_assert_uint_eq(le(f + 4, 4), mg_gguf_version(g));
    const uint64_t n_tensors = le(f + 8, 8), n_kv = le(f + 16, 8);
    ck_assert_int_eq((int64_t) n_tensors, mg_gguf_n_tensors(g));
    ck_assert_int_eq((int64_t) n_kv, mg_gguf_n_kv(g));
    size_t at = 24;
    for (uint64_t i = 0; i < n_kv; i++) {
        const uint64_t len = le(f + at, 8);
        ck_assert_uint_eq(strlen(mg_gguf_key(g, (int64_t) i)), len);
        ck_assert_mem_eq(f + at + 8, mg_gguf_key(g, (int64_t) i), len);
        const uint32_t type = (uint32_t) le(f + at + 8 + len, 4);
        ck_assert_int_eq(type, mg_gguf_kv_type(g, (int64_t) i));
        at = skip_value(f, at + 8 + len + 4, type);
    }
    for (uint64_t i = 0; i < n_tensors; i++) {
        const struct mg_gguf_tensor_info * t = mg_gguf_tensor(g, (int64_t) i);
        const uint64_t len = le(f + at, 8);
        ck_assert_uint_eq(strlen(t->name), len);
        ck_assert_mem_eq(f + at + 8, t->name, len);
        at += 8 + len;
        const uint32_t n_dims = (uint32_t) le(f + at, 4);
        ck_assert_int_eq((int) n_dims, t->n_dims);
        at += 4;
        for (uint32_t d = 0; d < n_dims; d++, at += 8) ck_assert_int_eq((int64_t) le(f + at, 8), t->ne[d]);
        ck_assert_int_eq((int) le(f + at, 4), t->type);
        ck_assert_uint_eq(le(f + at + 4, 8), t->offset);
        at += 12;
    }
    // No general.alignment in this file: the default 32, and zeros up to it.
    ck_assert_int_lt(mg_gguf_find_key(g, "general.alignment"), 0);
    ck_assert_uint_eq(mg_gguf_alignment(g), 32);
    const size_t data = (at + 31) / 32 * 32;
    for (size_t i = at; i < data; i++) ck_assert_uint_eq(f[i], 0);
    ck_assert_uint_eq(mg_gguf_data_offset(g), data);
    for (int64_t i = 0; i < mg_gguf_n_tensors(g); i++) {
        const struct mg_gguf_tensor_info * t = mg_gguf_tensor(g, i);
        ck_assert(memcmp(t->data, f + data + t->offset, t->nbytes) == 0);
    }
    mg_gguf_close(g);
    free(f);
}
END_TEST

START_TEST(test_ggml_type_table) {
    // Names and block layouts: docs/formats.md 2.1, and for the others the block
    // structs of ggml-common.h added up by hand.
    const struct { int id; const char * name; int64_t blck; size_t bytes; } want[] = {
        {0, "f32", 1, 4}, {1, "f16", 1, 2}, {2, "q4_0", 32, 18}, {3, "q4_1", 32, 20}, {6, "q5_0", 32, 22},
        {7, "q5_1", 32, 24}, {8, "q8_0", 32, 34}, {9, "q8_1", 32, 36}, {10, "q2_K", 256, 84},
        {11, "q3_K", 256, 110}, {12, "q4_K", 256, 144}, {13, "q5_K", 256, 176}, {14, "q6_K", 256, 210},
        {15, "q8_K", 256, 292}, {20, "iq4_nl", 32, 18}, {30, "bf16", 1, 2}, {26, "i32", 1, 4},
        {16, "iq2_xxs", 256, 2 + 256 / 8 * 2},         // d, qs[QK_K/8] u16
        {17, "iq2_xs", 256, 2 + 256 / 8 * 2 + 256 / 32},
        {18, "iq3_xxs", 256, 2 + 3 * 256 / 8},
        {19, "iq1_s", 256, 2 + 256 / 8 + 256 / 16},
        {21, "iq3_s", 256, 2 + 256 / 4 + 256 / 32 + 256 / 8 + 256 / 64},
        {22, "iq2_s", 256, 2 + 256 / 4 + 256 / 32 + 256 / 32},
        {23, "iq4_xs", 256, 2 + 2 + 256 / 64 + 256 / 2},
        {29, "iq1_m", 256, 256 / 8 + 256 / 16 + 256 / 32},
        {34, "tq1_0", 256, (256 - 4 * 256 / 64) / 5 + 256 / 64 + 2},
        {35, "tq2_0", 256, 256 / 4 + 2},
        {39, "mxfp4", 32, 1 + 32 / 2},
        {24, "i8", 1, 1}, {25, "i16", 1, 2}, {27, "i64", 1, 8}, {28, "f64", 1, 8},
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        ck_assert_str_eq(mg_gguf_ggml_type_name(want[i].id), want[i].name);
        ck_assert_int_eq(mg_gguf_ggml_blck_size(want[i].id), want[i].blck);
        ck_assert_uint_eq(mg_gguf_ggml_type_size(want[i].id), want[i].bytes);
    }
    const int removed[] = {-1, 4, 5, 31, 32, 33, 36, 37, 38, 43, 1000};
    for (size_t i = 0; i < sizeof(removed) / sizeof(removed[0]); i++) {
        ck_assert_ptr_null(mg_gguf_ggml_type_name(removed[i]));
        ck_assert_int_eq(mg_gguf_ggml_blck_size(removed[i]), 0);
    }
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("gguf");
    TCase * tc = tcase_create("reader");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_small_file_reads);
    tcase_add_test(tc, test_truncated_everywhere);
    tcase_add_test(tc, test_bad_header);
    tcase_add_test(tc, test_bad_kvs);
    tcase_add_test(tc, test_bad_tensor_infos);
    tcase_add_test(tc, test_offsets_out_of_order);
    tcase_add_loop_test(tc, test_fixture_models, 0, 3);
    tcase_add_test(tc, test_demo_model_walk);
    tcase_add_test(tc, test_getters);
    tcase_add_test(tc, test_fixture_truncated_at_boundaries);
    tcase_add_test(tc, test_ggml_type_table);
    suite_add_tcase(s, tc);
    return s;
}
