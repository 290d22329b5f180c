//@file full
// gguf_writer.c - GGUF files out (ggml's gguf_write_to_buf, gguf-py's GGUFWriter).
//
// Every value is encoded into its file bytes when it is set, so writing is a
// plain walk: header, pairs, tensor infos, padding, data. Numbers are written
// little-endian byte by byte, whatever the host.
#define _POSIX_C_SOURCE 200809L
#include "gguf_writer.h"
#include "outfile.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GGUF_VERSION           3
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_LENGTH        (1ull << 30)   // ggml's limit on string lengths and array counts

// ---------------------------------------------------------------------------
// A growing byte buffer: where values are encoded
// ---------------------------------------------------------------------------

struct bytes {
    uint8_t * p;
    size_t    n;
    size_t    cap;
};

static void put_bytes(struct bytes * b, const void * src, size_t n) {
    if (b->n + n > b->cap) {
        while (b->n + n > b->cap) b->cap = b->cap ? 2 * b->cap : 64;
        b->p = realloc(b->p, b->cap);
        MG_ASSERT(b->p != NULL);
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}

// The low nbytes of v, least significant byte first.
static void put_le(struct bytes * b, uint64_t v, size_t nbytes) {
    uint8_t le[8];
    for (size_t i = 0; i < nbytes; i++) le[i] = (uint8_t) (v >> (8 * i));
    put_bytes(b, le, nbytes);
}

static void put_string(struct bytes * b, const char * s, size_t len) {
    put_le(b, len, 8);
    put_bytes(b, s, len);
}

// ---------------------------------------------------------------------------
// The writer
// ---------------------------------------------------------------------------

struct writer_kv {
    char *            key;
    enum mg_gguf_type type;
    struct bytes      value;   // the bytes that follow the type field in the file
};

struct writer_tensor {
    char         name[MG_MAX_NAME];
    int          type;
    int          n_dims;
    int64_t      ne[MG_MAX_DIMS];
    size_t       nbytes;
    const void * data;   // borrowed
};

struct mg_gguf_writer {
    struct writer_kv *     kv;
    int64_t                n_kv;
    int64_t                kv_cap;
    struct writer_tensor * tensors;
    int64_t                n_tensors;
    int64_t                tensor_cap;
    uint32_t               alignment;
};

struct mg_gguf_writer * mg_gguf_writer_new(void) {
    struct mg_gguf_writer * w = calloc(1, sizeof(*w));
    MG_ASSERT(w != NULL);
    w->alignment = GGUF_DEFAULT_ALIGNMENT;
    return w;
}

void mg_gguf_writer_free(struct mg_gguf_writer * w) {
    if (w == NULL) return;
    for (int64_t i = 0; i < w->n_kv; i++) {
        free(w->kv[i].key);
        free(w->kv[i].value.p);
    }
    free(w->kv);
    free(w->tensors);
    free(w);
}

int64_t mg_gguf_writer_n_kv(const struct mg_gguf_writer * w)      { return w->n_kv; }
int64_t mg_gguf_writer_n_tensors(const struct mg_gguf_writer * w) { return w->n_tensors; }

static void remove_key(struct mg_gguf_writer * w, const char * key) {
    for (int64_t i = 0; i < w->n_kv; i++) {
        if (strcmp(w->kv[i].key, key) != 0) continue;
        free(w->kv[i].key);
        free(w->kv[i].value.p);
        memmove(&w->kv[i], &w->kv[i + 1], (size_t) (w->n_kv - i - 1) * sizeof(w->kv[0]));
        w->n_kv--;
        return;
    }
}

// general.alignment places every tensor, so the writer checks it as the
// reader will (a u32 power of 2) and uses it.
static bool take_alignment(struct mg_gguf_writer * w, enum mg_gguf_type type, const struct bytes * value) {
    if (type != MG_GGUF_TYPE_UINT32) {
        mg_set_error("gguf writer: general.alignment must be u32, not %s", mg_gguf_type_name(type));
        return false;
    }
    uint32_t a = (uint32_t) value->p[0] | (uint32_t) value->p[1] << 8 | (uint32_t) value->p[2] << 16 |
                 (uint32_t) value->p[3] << 24;
    if (a == 0 || (a & (a - 1)) != 0) {
        mg_set_error("gguf writer: general.alignment = %u is not a power of 2", a);
        return false;
    }
    w->alignment = a;
    return true;
}

// Takes ownership of value (freed on failure too).
static bool set_kv(struct mg_gguf_writer * w, const char * key, enum mg_gguf_type type, struct bytes value) {
    size_t key_len = strlen(key);
    bool ok = true;
    if (key_len == 0) {
        mg_set_error("gguf writer: empty keys are not allowed");
        ok = false;
    } else if (key_len > GGUF_MAX_LENGTH) {
        mg_set_error("gguf writer: a key of %zu bytes is over GGUF's limit of 2^30", key_len);
        ok = false;
    } else if (strcmp(key, "general.alignment") == 0) {
        ok = take_alignment(w, type, &value);
    }
    if (!ok) {
        free(value.p);
        return false;
    }

    remove_key(w, key);   // ggml's gguf_set_val_*: a key set again moves to the end
    if (w->n_kv == w->kv_cap) {
        w->kv_cap = w->kv_cap ? 2 * w->kv_cap : 16;
        w->kv = realloc(w->kv, (size_t) w->kv_cap * sizeof(w->kv[0]));
        MG_ASSERT(w->kv != NULL);
    }
    struct writer_kv * kv = &w->kv[w->n_kv++];
    kv->key = malloc(key_len + 1);
    MG_ASSERT(kv->key != NULL);
    memcpy(kv->key, key, key_len + 1);
    kv->type = type;
    kv->value = value;
    return true;
}

static bool set_scalar(struct mg_gguf_writer * w, const char * key, enum mg_gguf_type type, uint64_t bits, size_t n) {
    struct bytes value = {0};
    put_le(&value, bits, n);
    return set_kv(w, key, type, value);
}

static uint32_t f32_bits(float f)  { uint32_t b; memcpy(&b, &f, 4); return b; }
static uint64_t f64_bits(double d) { uint64_t b; memcpy(&b, &d, 8); return b; }

bool mg_gguf_writer_set_u8(struct mg_gguf_writer * w, const char * key, uint8_t v) {
    return set_scalar(w, key, MG_GGUF_TYPE_UINT8, v, 1);
}

bool mg_gguf_writer_set_i8(struct mg_gguf_writer * w, const char * key, int8_t v) {
    return set_scalar(w, key, MG_GGUF_TYPE_INT8, (uint8_t) v, 1);
}

bool mg_gguf_writer_set_u16(struct mg_gguf_writer * w, const char * key, uint16_t v) {
    return set_scalar(w, key, MG_GGUF_TYPE_UINT16, v, 2);
}

bool mg_gguf_writer_set_i16(struct mg_gguf_writer * w, const char * key, int16_t v) {
    return set_scalar(w, key, MG_GGUF_TYPE_INT16, (uint16_t) v, 2);
}

bool mg_gguf_writer_set_u32(struct mg_gguf_writer * w, const char * key, uint32_t v) {
    return set_scalar(w, key, MG_GGUF_TYPE_UINT32, v, 4);
}

bool mg_gguf_writer_set_i32(struct mg_gguf_writer * w, const char * key, int32_t v) {
    return set_scalar(w, key, MG_GGUF_TYPE_INT32, (uint32_t) v, 4);
}

bool mg_gguf_writer_set_f32(struct mg_gguf_writer * w, const char * key, float v) {
    return set_scalar(w, key, MG_GGUF_TYPE_FLOAT32, f32_bits(v), 4);
}

bool mg_gguf_writer_set_bool(struct mg_gguf_writer * w, const char * key, bool v) {
    return set_scalar(w, key, MG_GGUF_TYPE_BOOL, v ? 1 : 0, 1);
}

bool mg_gguf_writer_set_u64(struct mg_gguf_writer * w, const char * key, uint64_t v) {
    return set_scalar(w, key, MG_GGUF_TYPE_UINT64, v, 8);
}

bool mg_gguf_writer_set_i64(struct mg_gguf_writer * w, const char * key, int64_t v) {
    return set_scalar(w, key, MG_GGUF_TYPE_INT64, (uint64_t) v, 8);
}

bool mg_gguf_writer_set_f64(struct mg_gguf_writer * w, const char * key, double v) {
    return set_scalar(w, key, MG_GGUF_TYPE_FLOAT64, f64_bits(v), 8);
}

bool mg_gguf_writer_set_strn(struct mg_gguf_writer * w, const char * key, const char * str, size_t len) {
    if (len > GGUF_MAX_LENGTH) {
        mg_set_error("gguf writer: '%s': a string of %zu bytes is over GGUF's limit of 2^30", key, len);
        return false;
    }
    struct bytes value = {0};
    put_string(&value, str, len);
    return set_kv(w, key, MG_GGUF_TYPE_STRING, value);
}

bool mg_gguf_writer_set_str(struct mg_gguf_writer * w, const char * key, const char * str) {
    return mg_gguf_writer_set_strn(w, key, str, strlen(str));
}

// Element i of a C array of GGUF type t, as the bits to write.
static uint64_t element_bits(enum mg_gguf_type t, const void * data, size_t i) {
    switch (t) {
        case MG_GGUF_TYPE_UINT8:   return ((const uint8_t  *) data)[i];
        case MG_GGUF_TYPE_INT8:    return (uint8_t)  ((const int8_t   *) data)[i];
        case MG_GGUF_TYPE_UINT16:  return ((const uint16_t *) data)[i];
        case MG_GGUF_TYPE_INT16:   return (uint16_t) ((const int16_t  *) data)[i];
        case MG_GGUF_TYPE_UINT32:  return ((const uint32_t *) data)[i];
        case MG_GGUF_TYPE_INT32:   return (uint32_t) ((const int32_t  *) data)[i];
        case MG_GGUF_TYPE_FLOAT32: return f32_bits(((const float *) data)[i]);
        case MG_GGUF_TYPE_BOOL:    return ((const bool *) data)[i] ? 1 : 0;
        case MG_GGUF_TYPE_UINT64:  return ((const uint64_t *) data)[i];
        case MG_GGUF_TYPE_INT64:   return (uint64_t) ((const int64_t *) data)[i];
        case MG_GGUF_TYPE_FLOAT64: return f64_bits(((const double *) data)[i]);
        default: MG_ASSERT(false);
    }
    return 0;
}

// Bytes of one element of a numeric type in the file.
static size_t element_size(enum mg_gguf_type t) {
    switch (t) {
        case MG_GGUF_TYPE_UINT8: case MG_GGUF_TYPE_INT8: case MG_GGUF_TYPE_BOOL:    return 1;
        case MG_GGUF_TYPE_UINT16: case MG_GGUF_TYPE_INT16:                          return 2;
        case MG_GGUF_TYPE_UINT32: case MG_GGUF_TYPE_INT32: case MG_GGUF_TYPE_FLOAT32: return 4;
        case MG_GGUF_TYPE_UINT64: case MG_GGUF_TYPE_INT64: case MG_GGUF_TYPE_FLOAT64: return 8;
        default: return 0;
    }
}

bool mg_gguf_writer_set_arr_data(struct mg_gguf_writer * w, const char * key, enum mg_gguf_type elem,
                                 const void * data, size_t n) {
    if (element_size(elem) == 0) {
        mg_set_error("gguf writer: '%s': arrays of %s are not numeric arrays", key, mg_gguf_type_name(elem));
        return false;
    }
    if (n > GGUF_MAX_LENGTH) {
        mg_set_error("gguf writer: '%s': %zu elements are over GGUF's limit of 2^30", key, n);
        return false;
    }
    struct bytes value = {0};
    put_le(&value, elem, 4);
    put_le(&value, n, 8);
    for (size_t i = 0; i < n; i++) put_le(&value, element_bits(elem, data, i), element_size(elem));
    return set_kv(w, key, MG_GGUF_TYPE_ARRAY, value);
}

bool mg_gguf_writer_set_arr_str(struct mg_gguf_writer * w, const char * key, const char * const * strs,
                                const size_t * lens, size_t n) {
    if (n > GGUF_MAX_LENGTH) {
        mg_set_error("gguf writer: '%s': %zu elements are over GGUF's limit of 2^30", key, n);
        return false;
    }
    struct bytes value = {0};
    put_le(&value, MG_GGUF_TYPE_STRING, 4);
    put_le(&value, n, 8);
    for (size_t i = 0; i < n; i++) {
        size_t len = lens ? lens[i] : strlen(strs[i]);
        if (len > GGUF_MAX_LENGTH) {
            mg_set_error("gguf writer: '%s': element %zu of %zu bytes is over GGUF's limit of 2^30", key, i, len);
            free(value.p);
            return false;
        }
        put_string(&value, strs[i], len);
    }
    return set_kv(w, key, MG_GGUF_TYPE_ARRAY, value);
}

static bool in_list(const char * key, const char * const * list) {
    for (; list && *list; list++) {
        if (strcmp(key, *list) == 0) return true;
    }
    return false;
}

bool mg_gguf_writer_copy_kvs(struct mg_gguf_writer * w, const struct mg_gguf * g, const char * const * skip) {
    for (int64_t i = 0; i < mg_gguf_n_kv(g); i++) {
        const char * key = mg_gguf_key(g, i);
        if (in_list(key, skip)) continue;
        size_t size;
        const void * raw = mg_gguf_kv_raw(g, i, &size);
        struct bytes value = {0};
        put_bytes(&value, raw, size);   // the reader validated these bytes
        if (!set_kv(w, key, mg_gguf_kv_type(g, i), value)) return false;
    }
    return true;
}

// ---------------------------------------------------------------------------
// Tensors
// ---------------------------------------------------------------------------

static bool tensor_error(const char * name, const char * fmt, ...) {
    char message[160];
    va_list args;
    va_start(args, fmt);
    vsnprintf(message, sizeof(message), fmt, args);
    va_end(args);
    mg_set_error("gguf writer: tensor '%.64s': %s", name, message);
    return false;
}

bool mg_gguf_writer_add_tensor(struct mg_gguf_writer * w, const char * name, int type, int n_dims,
                               const int64_t * ne, const void * data) {
    MG_ASSERT(data != NULL);
    size_t name_len = strlen(name);
    if (name_len == 0 || name_len >= MG_MAX_NAME) {
        return tensor_error(name, "the name has %zu bytes, it must have 1..%d", name_len, MG_MAX_NAME - 1);
    }
    for (int64_t i = 0; i < w->n_tensors; i++) {
        if (strcmp(w->tensors[i].name, name) == 0) return tensor_error(name, "an earlier tensor has this name");
    }
    if (n_dims < 1 || n_dims > MG_MAX_DIMS) {
        return tensor_error(name, "n_dims = %d, it must be 1..%d", n_dims, MG_MAX_DIMS);
    }
    int64_t blck = mg_gguf_ggml_blck_size(type);
    if (blck == 0) return tensor_error(name, "type %d is not a ggml type", type);

    struct writer_tensor t = {.type = type, .n_dims = n_dims, .data = data, .ne = {1, 1, 1, 1}};
    memcpy(t.name, name, name_len + 1);
    int64_t nelements = 1;
    for (int j = 0; j < n_dims; j++) {
        if (ne[j] <= 0) return tensor_error(name, "ne[%d] = %" PRId64 ", every dimension must be > 0", j, ne[j]);
        if (ne[j] > INT64_MAX / nelements) return tensor_error(name, "the element count overflows int64");
        nelements *= ne[j];
        t.ne[j] = ne[j];
    }
    if (t.ne[0] % blck != 0) {
        return tensor_error(name, "ne[0] = %" PRId64 " is not a multiple of the %s block size %" PRId64, t.ne[0],
                            mg_gguf_ggml_type_name(type), blck);
    }
    int64_t size = (int64_t) mg_gguf_ggml_type_size(type);
    if (nelements / blck > INT64_MAX / size) return tensor_error(name, "the byte size overflows int64");
    t.nbytes = (size_t) (nelements / blck * size);

    if (w->n_tensors == w->tensor_cap) {
        w->tensor_cap = w->tensor_cap ? 2 * w->tensor_cap : 16;
        w->tensors = realloc(w->tensors, (size_t) w->tensor_cap * sizeof(w->tensors[0]));
        MG_ASSERT(w->tensors != NULL);
    }
    w->tensors[w->n_tensors++] = t;
    return true;
}

// ---------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------

// A stream that remembers its first error, so the writing code reads straight.
struct out {
    FILE *       f;
    const char * name;
    size_t       pos;     // bytes written so far
    int          error;   // errno of the first failure, 0 if none
};

static void out_write(struct out * o, const void * p, size_t n) {
    if (o->error || n == 0) return;
    if (fwrite(p, 1, n, o->f) != n) {
        o->error = errno ? errno : EIO;
        return;
    }
    o->pos += n;
}

static void out_bytes(struct out * o, const struct bytes * b) {
    out_write(o, b->p, b->n);
}

static void out_padding(struct out * o, size_t alignment) {
    static const uint8_t zeros[256];
    size_t pad = (alignment - o->pos % alignment) % alignment;
    while (pad > 0) {
        size_t n = pad < sizeof(zeros) ? pad : sizeof(zeros);
        out_write(o, zeros, n);
        pad -= n;
    }
}

static size_t padded(size_t n, size_t alignment) {
    return n + (alignment - n % alignment) % alignment;
}

bool mg_gguf_writer_write_stream(const struct mg_gguf_writer * w, FILE * f, const char * name) {
    struct out o = {.f = f, .name = name};
    struct bytes head = {0};

    // Header and key/value pairs.
    put_bytes(&head, "GGUF", 4);
    put_le(&head, GGUF_VERSION, 4);
    put_le(&head, (uint64_t) w->n_tensors, 8);
    put_le(&head, (uint64_t) w->n_kv, 8);
    for (int64_t i = 0; i < w->n_kv; i++) {
        put_string(&head, w->kv[i].key, strlen(w->kv[i].key));
        put_le(&head, w->kv[i].type, 4);
        put_bytes(&head, w->kv[i].value.p, w->kv[i].value.n);
    }

    // Tensor infos: offsets are the running sum of the padded sizes.
    uint64_t offset = 0;
    for (int64_t i = 0; i < w->n_tensors; i++) {
        const struct writer_tensor * t = &w->tensors[i];
        put_string(&head, t->name, strlen(t->name));
        put_le(&head, (uint64_t) t->n_dims, 4);
        for (int j = 0; j < t->n_dims; j++) put_le(&head, (uint64_t) t->ne[j], 8);
        put_le(&head, (uint64_t) t->type, 4);
        put_le(&head, offset, 8);
        offset += padded(t->nbytes, w->alignment);
    }
    out_bytes(&o, &head);
    free(head.p);

    // The data section, only when there is data (as in llama.cpp's vocab-only files).
    if (w->n_tensors > 0) out_padding(&o, w->alignment);
    for (int64_t i = 0; i < w->n_tensors; i++) {
        out_write(&o, w->tensors[i].data, w->tensors[i].nbytes);
        out_padding(&o, w->alignment);
    }

    if (!o.error && fflush(f) != 0) o.error = errno ? errno : EIO;
    if (!o.error && ferror(f)) o.error = EIO;
    if (o.error) {
        mg_set_error("%s: write failed after %zu bytes: %s", name, o.pos, strerror(o.error));
        return false;
    }
    return true;
}

// A temporary file beside path, fsync'd and renamed over it only when complete (outfile.h).
bool mg_gguf_writer_write(const struct mg_gguf_writer * w, const char * path) {
    struct mg_outfile out;
    FILE * f = mg_outfile_open(&out, path);
    if (f == NULL) return false;
    if (!mg_gguf_writer_write_stream(w, f, path)) {
        mg_outfile_abort(&out);
        return false;
    }
    return mg_outfile_commit(&out);
}
