//@file 09
// gguf.c - reading a GGUF file, and checking all of it before anyone uses it.
//
// Mirrors ggml's gguf.cpp (gguf_init_from_reader and gguf_reader). The file
// is mapped read-only (mmap.h) and read front to back by a cursor that never
// steps past the end: every count, length and offset is checked against the
// bytes that are really there before it is used, and no allocation is sized
// by a number the file could inflate. Tensor data and string values stay in
// the mapping; only keys and the small per-item tables are copied.
//
// Every failure names the file, the item (kv or tensor), the field, and the
// byte offset where that field starts:
//
//     tiny.gguf: tensor 3 'blk.0.attn_q.weight': ne[1] = 0 at byte 1234 (every dimension must be > 0)
#include "gguf.h"
#include "mmap.h"

#include <assert.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define GGUF_MAGIC             "GGUF"
#define GGUF_HEADER_BYTES      24           // magic, version, tensor_count, kv_count
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_LENGTH        (1ull << 30) // ggml's limit on string lengths and array counts

// The fewest bytes one item can take in a file, so that a count can be
// checked against the bytes left before anything is allocated for it.
//   kv:          key length 8 + key >= 1 byte + value type 4 + value >= 1 byte
//   tensor info: name length 8 + name >= 1 + n_dims 4 + one ne 8 + type 4 + offset 8
#define GGUF_MIN_KV_BYTES          14
#define GGUF_MIN_TENSOR_INFO_BYTES 33

// ---------------------------------------------------------------------------
// Type tables
// ---------------------------------------------------------------------------

static const struct {
    const char * name;
    size_t       size;   // bytes of one value; 0 for the variable-length ones
} gguf_types[MG_GGUF_TYPE_COUNT] = {
    [MG_GGUF_TYPE_UINT8]   = {"u8",   1},
    [MG_GGUF_TYPE_INT8]    = {"i8",   1},
    [MG_GGUF_TYPE_UINT16]  = {"u16",  2},
    [MG_GGUF_TYPE_INT16]   = {"i16",  2},
    [MG_GGUF_TYPE_UINT32]  = {"u32",  4},
    [MG_GGUF_TYPE_INT32]   = {"i32",  4},
    [MG_GGUF_TYPE_FLOAT32] = {"f32",  4},
    [MG_GGUF_TYPE_BOOL]    = {"bool", 1},
    [MG_GGUF_TYPE_STRING]  = {"str",  0},
    [MG_GGUF_TYPE_ARRAY]   = {"arr",  0},
    [MG_GGUF_TYPE_UINT64]  = {"u64",  8},
    [MG_GGUF_TYPE_INT64]   = {"i64",  8},
    [MG_GGUF_TYPE_FLOAT64] = {"f64",  8},
};

const char * mg_gguf_type_name(enum mg_gguf_type type) {
    return (unsigned) type < MG_GGUF_TYPE_COUNT ? gguf_types[type].name : "unknown";
}

// Every ggml type id a file may name: ggml.c type_traits[] for the names and
// block sizes, ggml-common.h for the bytes per block. The engine computes only
// some of these (tensor.h); the others are here so that a file using them is
// still validated and its tensors named. Ids 4, 5, 31-33 and 36-38 were removed
// from ggml and have no entry: a file that uses them is rejected, as ggml does.
static const struct {
    const char * name;
    int64_t      blck_size;   // elements per block
    size_t       type_size;   // bytes per block
} ggml_types[MG_TYPE_COUNT] = {
    [0]  = {"f32",       1,   4},
    [1]  = {"f16",       1,   2},
    [2]  = {"q4_0",     32,  18},
    [3]  = {"q4_1",     32,  20},
    [6]  = {"q5_0",     32,  22},
    [7]  = {"q5_1",     32,  24},
    [8]  = {"q8_0",     32,  34},
    [9]  = {"q8_1",     32,  36},
    [10] = {"q2_K",    256,  84},
    [11] = {"q3_K",    256, 110},
    [12] = {"q4_K",    256, 144},
    [13] = {"q5_K",    256, 176},
    [14] = {"q6_K",    256, 210},
    [15] = {"q8_K",    256, 292},
    [16] = {"iq2_xxs", 256,  66},
    [17] = {"iq2_xs",  256,  74},
    [18] = {"iq3_xxs", 256,  98},
    [19] = {"iq1_s",   256,  50},
    [20] = {"iq4_nl",   32,  18},
    [21] = {"iq3_s",   256, 110},
    [22] = {"iq2_s",   256,  82},
    [23] = {"iq4_xs",  256, 136},
    [24] = {"i8",        1,   1},
    [25] = {"i16",       1,   2},
    [26] = {"i32",       1,   4},
    [27] = {"i64",       1,   8},
    [28] = {"f64",       1,   8},
    [29] = {"iq1_m",   256,  56},
    [30] = {"bf16",      1,   2},
    [34] = {"tq1_0",   256,  54},
    [35] = {"tq2_0",   256,  66},
    [39] = {"mxfp4",    32,  17},
    [40] = {"nvfp4",    64,  36},
    [41] = {"q1_0",    128,  18},
    [42] = {"q2_0",     64,  18},
};
static_assert(MG_TYPE_COUNT == 43, "ggml_types[] lists ggml's ids 0..42");

static bool ggml_type_known(int type_id) {
    return type_id >= 0 && type_id < MG_TYPE_COUNT && ggml_types[type_id].blck_size != 0;
}

const char * mg_gguf_ggml_type_name(int type_id) {
    return ggml_type_known(type_id) ? ggml_types[type_id].name : NULL;
}

int64_t mg_gguf_ggml_blck_size(int type_id) {
    return ggml_type_known(type_id) ? ggml_types[type_id].blck_size : 0;
}

size_t mg_gguf_ggml_type_size(int type_id) {
    return ggml_type_known(type_id) ? ggml_types[type_id].type_size : 0;
}

// ---------------------------------------------------------------------------
// The parsed file
// ---------------------------------------------------------------------------

// File offsets of the fields of one tensor info that later checks blame.
struct tensor_fields {
    size_t name_at;
    size_t offset_at;
};

struct mg_gguf_kv {
    char *            key;          // owned copy, NUL-terminated
    size_t            key_at;       // file offset of the key (its length field), for messages
    enum mg_gguf_type type;
    enum mg_gguf_type arr_type;     // ARRAY: the element type
    uint64_t          n;            // ARRAY: the element count
    size_t            value_at;     // file offset of the value, right after the type field
    size_t            value_size;   // bytes of the value in the file
    uint64_t *        str_at;       // STRING ARRAY: file offset of each element's length field
};

struct mg_gguf {
    char *                       path;
    struct mg_mmap *             map;
    const uint8_t *              bytes;   // the mapped file (NULL when it is empty)
    size_t                       size;
    uint32_t                     version;
    size_t                       alignment;
    size_t                       data_offset;
    int64_t                      n_kv;
    struct mg_gguf_kv *          kv;
    int64_t                      n_tensors;
    struct mg_gguf_tensor_info * tensors;
    struct tensor_fields *       fields;      // where each tensor info's fields are, for messages
};

// Little-endian, whatever the host: byte i has weight 256^i.
static uint64_t load_le(const uint8_t * p, size_t n) {
    uint64_t v = 0;
    for (size_t i = n; i > 0; i--) v = (v << 8) | p[i - 1];
    return v;
}

// ---------------------------------------------------------------------------
// The cursor
// ---------------------------------------------------------------------------

struct gguf_loader {
    struct mg_gguf * g;
    size_t           pos;        // the next byte to read
    char             item[160];  // what is being read, e.g. "tensor 3 'blk.0.attn_q.weight': "
};

// "<path>: <item><what> at byte <at> (<detail>)". Always returns false.
static bool fail(const struct gguf_loader * L, size_t at, const char * what, const char * detail_fmt, ...) {
    char detail[256];
    va_list args;
    va_start(args, detail_fmt);
    vsnprintf(detail, sizeof(detail), detail_fmt, args);
    va_end(args);
    mg_set_error("%s: %s%s at byte %zu (%s)", L->g->path, L->item, what, at, detail);
    return false;
}

static size_t bytes_left(const struct gguf_loader * L) {
    return L->g->size - L->pos;
}

static bool read_uint(struct gguf_loader * L, size_t nbytes, uint64_t * v, const char * what) {
    *v = 0;
    if (bytes_left(L) < nbytes) {
        return fail(L, L->pos, what, "needs %zu bytes, the file ends at byte %zu", nbytes, L->g->size);
    }
    *v = load_le(L->g->bytes + L->pos, nbytes);
    L->pos += nbytes;
    return true;
}

static bool read_u32(struct gguf_loader * L, uint32_t * v, const char * what) {
    uint64_t v64;
    if (!read_uint(L, 4, &v64, what)) return false;
    *v = (uint32_t) v64;
    return true;
}

static bool read_u64(struct gguf_loader * L, uint64_t * v, const char * what) {
    return read_uint(L, 8, v, what);
}

// A GGUF string: a u64 length, then that many bytes (no NUL). On success
// *at is the file offset of the bytes and the cursor is past them.
static bool read_string(struct gguf_loader * L, const char * what, size_t * at, uint64_t * len) {
    size_t field = L->pos;
    *at = 0;
    if (!read_u64(L, len, what)) return false;
    if (*len > GGUF_MAX_LENGTH) {
        return fail(L, field, what, "length %" PRIu64 " is over ggml's limit of 2^30 bytes", *len);
    }
    if (*len > bytes_left(L)) {
        return fail(L, field, what, "length %" PRIu64 " runs past the end of the file at byte %zu", *len, L->g->size);
    }
    *at = L->pos;
    L->pos += (size_t) *len;
    return true;
}

// ---------------------------------------------------------------------------
// Header
// ---------------------------------------------------------------------------

static bool read_header(struct gguf_loader * L, uint64_t * n_tensors, uint64_t * n_kv) {
    struct mg_gguf * g = L->g;
    if (bytes_left(L) < 4) {
        return fail(L, 0, "magic", "needs 4 bytes, the file ends at byte %zu", g->size);
    }
    if (memcmp(g->bytes, GGUF_MAGIC, 4) != 0) {
        const uint8_t * m = g->bytes;
        return fail(L, 0, "magic", "expected \"GGUF\" = 47 47 55 46, found %02x %02x %02x %02x",
                    m[0], m[1], m[2], m[3]);
    }
    L->pos = 4;

    if (!read_u32(L, &g->version, "version")) return false;
    uint32_t v = g->version;
    if (v == 0) return fail(L, 4, "version", "0 is not a GGUF version");
    if (v == 1) return fail(L, 4, "version", "GGUFv1 is not supported");
    // A big-endian file read little-endian puts the version in the high bytes (gguf.cpp).
    if ((v & 0xFFFF) == 0) return fail(L, 4, "version", "0x%08x looks byte-swapped: a big-endian file", v);
    if (v > 3) return fail(L, 4, "version", "%u is newer than 3, the newest this reader knows", v);

    if (!read_u64(L, n_tensors, "tensor_count")) return false;
    if (!read_u64(L, n_kv, "kv_count")) return false;

    // Check the counts against what the rest of the file could hold, before
    // they size anything: a 24-byte file may claim 2^60 tensors.
    uint64_t room = bytes_left(L);
    if (*n_tensors > room / GGUF_MIN_TENSOR_INFO_BYTES) {
        char what[64];
        snprintf(what, sizeof(what), "tensor_count = %" PRIu64, *n_tensors);
        return fail(L, 8, what, "the %" PRIu64 " bytes after the header hold at most %" PRIu64 " tensor infos",
                    room, room / GGUF_MIN_TENSOR_INFO_BYTES);
    }
    room -= *n_tensors * GGUF_MIN_TENSOR_INFO_BYTES;
    if (*n_kv > room / GGUF_MIN_KV_BYTES) {
        char what[64];
        snprintf(what, sizeof(what), "kv_count = %" PRIu64, *n_kv);
        return fail(L, 16, what, "the %" PRIu64 " bytes left beside %" PRIu64 " tensor infos hold at most %" PRIu64
                    " key/value pairs", room, *n_tensors, room / GGUF_MIN_KV_BYTES);
    }
    return true;
}

// ---------------------------------------------------------------------------
// Key/value pairs
// ---------------------------------------------------------------------------

static bool read_array(struct gguf_loader * L, struct mg_gguf_kv * kv) {
    size_t type_field = L->pos;
    uint32_t type;
    if (!read_u32(L, &type, "array element type")) return false;
    if (type == MG_GGUF_TYPE_ARRAY) {
        return fail(L, type_field, "array element type", "arrays of arrays are not supported (ggml rejects them)");
    }
    if (type >= MG_GGUF_TYPE_COUNT) {
        return fail(L, type_field, "array element type", "%u is not a GGUF value type (0..12)", type);
    }
    kv->arr_type = (enum mg_gguf_type) type;

    size_t count_field = L->pos;
    if (!read_u64(L, &kv->n, "array count")) return false;
    uint64_t n = kv->n;
    if (n > GGUF_MAX_LENGTH) {
        return fail(L, count_field, "array count", "%" PRIu64 " is over ggml's limit of 2^30 elements", n);
    }

    if (type != MG_GGUF_TYPE_STRING) {
        uint64_t size = gguf_types[type].size;   // n <= 2^30 and size <= 8: no overflow
        if (n * size > bytes_left(L)) {
            return fail(L, count_field, "array count", "%" PRIu64 " %s elements need %" PRIu64
                        " bytes, the file ends at byte %zu", n, gguf_types[type].name, n * size, L->g->size);
        }
        L->pos += (size_t) (n * size);
        return true;
    }

    // Strings: each one needs at least its 8-byte length, which bounds the
    // table of offsets allocated below by the size of the file.
    if (n > bytes_left(L) / 8) {
        return fail(L, count_field, "array count", "%" PRIu64 " strings need at least %" PRIu64
                    " bytes, the file ends at byte %zu", n, n * 8, L->g->size);
    }
    if (n == 0) return true;
    kv->str_at = malloc(n * sizeof(uint64_t));
    MG_ASSERT(kv->str_at != NULL);
    for (uint64_t j = 0; j < n; j++) {
        char what[48];
        snprintf(what, sizeof(what), "array element %" PRIu64, j);
        kv->str_at[j] = L->pos;
        size_t at;
        uint64_t len;
        if (!read_string(L, what, &at, &len)) return false;
    }
    return true;
}

static bool read_value(struct gguf_loader * L, struct mg_gguf_kv * kv) {
    if (kv->type == MG_GGUF_TYPE_ARRAY) return read_array(L, kv);
    if (kv->type == MG_GGUF_TYPE_STRING) {
        size_t at;
        uint64_t len;
        return read_string(L, "value", &at, &len);
    }
    size_t size = gguf_types[kv->type].size;
    if (bytes_left(L) < size) {
        return fail(L, L->pos, "value", "needs %zu bytes, the file ends at byte %zu", size, L->g->size);
    }
    L->pos += size;
    return true;
}

// general.alignment decides where the data starts and where every tensor may
// be, so it must be right: a u32, a power of 2 (gguf.cpp; the spec adds "a
// multiple of 8", which ggml does not enforce, so neither do we).
static bool check_alignment(struct gguf_loader * L, const struct mg_gguf_kv * kv, size_t type_field) {
    if (kv->type != MG_GGUF_TYPE_UINT32) {
        return fail(L, type_field, "value type", "general.alignment must be u32, not %s", gguf_types[kv->type].name);
    }
    uint32_t a = (uint32_t) load_le(L->g->bytes + kv->value_at, 4);
    if (a == 0 || (a & (a - 1)) != 0) {
        return fail(L, kv->value_at, "value", "alignment %u is not a power of 2", a);
    }
    L->g->alignment = a;
    return true;
}

static bool read_kv(struct gguf_loader * L, int64_t i) {
    struct mg_gguf_kv * kv = &L->g->kv[i];
    snprintf(L->item, sizeof(L->item), "kv %" PRId64 ": ", i);

    kv->key_at = L->pos;
    size_t key;
    uint64_t key_len;
    if (!read_string(L, "key", &key, &key_len)) return false;
    if (key_len == 0) return fail(L, kv->key_at, "key", "empty keys are not allowed");
    if (memchr(L->g->bytes + key, '\0', key_len)) return fail(L, kv->key_at, "key", "contains a NUL byte");
    kv->key = malloc(key_len + 1);   // key_len <= 2^30 and inside the file
    MG_ASSERT(kv->key != NULL);
    memcpy(kv->key, L->g->bytes + key, key_len);
    kv->key[key_len] = '\0';
    snprintf(L->item, sizeof(L->item), "kv %" PRId64 " '%.100s': ", i, kv->key);

    size_t type_field = L->pos;
    uint32_t type;
    if (!read_u32(L, &type, "value type")) return false;
    if (type >= MG_GGUF_TYPE_COUNT) {
        return fail(L, type_field, "value type", "%u is not a GGUF value type (0..12)", type);
    }
    kv->type = (enum mg_gguf_type) type;
    kv->value_at = L->pos;
    if (!read_value(L, kv)) return false;
    kv->value_size = L->pos - kv->value_at;

    if (strcmp(kv->key, "general.alignment") == 0) return check_alignment(L, kv, type_field);
    return true;
}

// Names are checked for duplicates by sorting (name, index) pairs: neighbours
// with equal names are duplicates, and the later index is the one to blame.
struct named_index {
    const char * name;
    int64_t      index;
};

static int compare_named_index(const void * a, const void * b) {
    const struct named_index * x = a;
    const struct named_index * y = b;
    int c = strcmp(x->name, y->name);
    if (c != 0) return c;
    return (x->index > y->index) - (x->index < y->index);
}

// The index of the first item (in file order) whose name an earlier item
// already has, or -1. name(g, i) is item i's name: a kv's key, a tensor's name.
static int64_t first_duplicate(const struct mg_gguf * g, int64_t n,
                               const char * (*name)(const struct mg_gguf * g, int64_t i)) {
    if (n < 2) return -1;
    struct named_index * items = malloc((size_t) n * sizeof(items[0]));
    MG_ASSERT(items != NULL);
    for (int64_t i = 0; i < n; i++) items[i] = (struct named_index) {name(g, i), i};
    qsort(items, (size_t) n, sizeof(items[0]), compare_named_index);
    int64_t first = -1;
    for (int64_t k = 1; k < n; k++) {
        bool dup = strcmp(items[k - 1].name, items[k].name) == 0;
        if (dup && (first < 0 || items[k].index < first)) first = items[k].index;
    }
    free(items);
    return first;
}

static const char * kv_key(const struct mg_gguf * g, int64_t i) {
    return g->kv[i].key;
}

static bool check_unique_keys(struct gguf_loader * L) {
    struct mg_gguf * g = L->g;
    int64_t dup = first_duplicate(g, g->n_kv, kv_key);
    if (dup < 0) return true;
    snprintf(L->item, sizeof(L->item), "kv %" PRId64 " '%.100s': ", dup, g->kv[dup].key);
    return fail(L, g->kv[dup].key_at, "key", "an earlier kv has the same key");
}

static bool read_kvs(struct gguf_loader * L, uint64_t n_kv) {
    struct mg_gguf * g = L->g;
    g->kv = calloc(n_kv > 0 ? n_kv : 1, sizeof(g->kv[0]));   // n_kv was checked against the file size
    if (g->kv == NULL) {
        mg_set_error("%s: out of memory for %" PRIu64 " key/value pairs", g->path, n_kv);
        return false;
    }
    for (uint64_t i = 0; i < n_kv; i++) {
        g->n_kv = (int64_t) i + 1;   // so that close() frees what this one allocates
        if (!read_kv(L, (int64_t) i)) return false;
    }
    L->item[0] = '\0';
    return check_unique_keys(L);
}

// ---------------------------------------------------------------------------
// Tensor infos
// ---------------------------------------------------------------------------

static bool read_tensor_name(struct gguf_loader * L, struct mg_gguf_tensor_info * t) {
    size_t field = L->pos;
    size_t at;
    uint64_t len;
    if (!read_string(L, "name", &at, &len)) return false;
    if (len == 0) return fail(L, field, "name", "tensor names cannot be empty");
    if (len >= MG_MAX_NAME) {
        return fail(L, field, "name", "%" PRIu64 " bytes, ggml allows at most %d (GGML_MAX_NAME = %d with the NUL)",
                    len, MG_MAX_NAME - 1, MG_MAX_NAME);
    }
    if (memchr(L->g->bytes + at, '\0', len)) return fail(L, field, "name", "contains a NUL byte");
    memcpy(t->name, L->g->bytes + at, len);
    t->name[len] = '\0';
    return true;
}

// n_dims, then ne[0..n_dims): each > 0 and their product an int64.
static bool read_tensor_shape(struct gguf_loader * L, struct mg_gguf_tensor_info * t, size_t * ne0_at) {
    size_t field = L->pos;
    uint32_t n_dims;
    if (!read_u32(L, &n_dims, "n_dims")) return false;
    if (n_dims == 0 || n_dims > MG_MAX_DIMS) {
        char what[32];
        snprintf(what, sizeof(what), "n_dims = %u", n_dims);
        return fail(L, field, what, "must be 1..%d", MG_MAX_DIMS);
    }
    t->n_dims = (int) n_dims;

    int64_t nelements = 1;
    for (int j = 0; j < MG_MAX_DIMS; j++) t->ne[j] = 1;
    for (int j = 0; j < (int) n_dims; j++) {
        char what[48];
        snprintf(what, sizeof(what), "ne[%d]", j);
        field = L->pos;
        if (j == 0) *ne0_at = field;
        uint64_t ne;
        if (!read_u64(L, &ne, what)) return false;
        snprintf(what, sizeof(what), "ne[%d] = %" PRIu64, j, ne);
        if (ne == 0) return fail(L, field, what, "every dimension must be > 0");
        if (ne > (uint64_t) (INT64_MAX / nelements)) {
            return fail(L, field, what, "the element count overflows int64");
        }
        t->ne[j] = (int64_t) ne;
        nelements *= (int64_t) ne;
    }
    return true;
}

// The type id, ne[0] against its block size, and the byte size.
static bool read_tensor_type(struct gguf_loader * L, struct mg_gguf_tensor_info * t, size_t ne0_at) {
    size_t field = L->pos;
    uint32_t type;
    if (!read_u32(L, &type, "type")) return false;
    if (type >= MG_TYPE_COUNT || !ggml_type_known((int) type)) {
        char what[32];
        snprintf(what, sizeof(what), "type = %u", type);
        return fail(L, field, what, "not a ggml type id (ids 4, 5, 31-33 and 36-38 were removed, ids end at %d)",
                    MG_TYPE_COUNT - 1);
    }
    t->type = (int) type;

    int64_t blck = ggml_types[type].blck_size;
    size_t  size = ggml_types[type].type_size;
    if (t->ne[0] % blck != 0) {
        char what[48];
        snprintf(what, sizeof(what), "ne[0] = %" PRId64, t->ne[0]);
        return fail(L, ne0_at, what, "not a multiple of the %s block size %" PRId64, ggml_types[type].name, blck);
    }
    // Blocks always fit in int64 (there are fewer blocks than elements); bytes may not.
    int64_t blocks = t->ne[0] / blck * t->ne[1] * t->ne[2] * t->ne[3];
    if (blocks > INT64_MAX / (int64_t) size) {
        char what[48];
        snprintf(what, sizeof(what), "type = %s", ggml_types[type].name);
        return fail(L, field, what, "%" PRId64 " blocks of %zu bytes: the byte size overflows int64", blocks, size);
    }
    t->nbytes = (size_t) blocks * size;
    return true;
}

static bool read_tensor_info(struct gguf_loader * L, int64_t i) {
    struct mg_gguf * g = L->g;
    struct mg_gguf_tensor_info * t = &g->tensors[i];
    snprintf(L->item, sizeof(L->item), "tensor %" PRId64 ": ", i);
    g->fields[i].name_at = L->pos;
    if (!read_tensor_name(L, t)) return false;
    snprintf(L->item, sizeof(L->item), "tensor %" PRId64 " '%s': ", i, t->name);

    size_t ne0_at = 0;
    if (!read_tensor_shape(L, t, &ne0_at)) return false;
    if (!read_tensor_type(L, t, ne0_at)) return false;

    g->fields[i].offset_at = L->pos;
    if (!read_u64(L, &t->offset, "offset")) return false;
    if (t->offset % g->alignment != 0) {
        char what[48];
        snprintf(what, sizeof(what), "offset = %" PRIu64, t->offset);
        return fail(L, g->fields[i].offset_at, what, "not a multiple of the alignment %zu", g->alignment);
    }
    return true;
}

static const char * tensor_name(const struct mg_gguf * g, int64_t i) {
    return g->tensors[i].name;
}

static bool check_unique_names(struct gguf_loader * L) {
    struct mg_gguf * g = L->g;
    int64_t dup = first_duplicate(g, g->n_tensors, tensor_name);
    if (dup < 0) return true;
    snprintf(L->item, sizeof(L->item), "tensor %" PRId64 " '%s': ", dup, g->tensors[dup].name);
    return fail(L, g->fields[dup].name_at, "name", "an earlier tensor has the same name");
}

static bool read_tensor_infos(struct gguf_loader * L, uint64_t n_tensors) {
    struct mg_gguf * g = L->g;
    size_t n = n_tensors > 0 ? (size_t) n_tensors : 1;   // n_tensors was checked against the file size
    g->tensors = calloc(n, sizeof(g->tensors[0]));
    g->fields = calloc(n, sizeof(g->fields[0]));
    if (g->tensors == NULL || g->fields == NULL) {
        mg_set_error("%s: out of memory for %" PRIu64 " tensor infos", g->path, n_tensors);
        return false;
    }
    g->n_tensors = (int64_t) n_tensors;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        if (!read_tensor_info(L, i)) return false;
    }
    L->item[0] = '\0';
    return check_unique_names(L);
}

// ---------------------------------------------------------------------------
// Tensor data
// ---------------------------------------------------------------------------

// The data section starts at the next multiple of the alignment. Each tensor
// must lie inside the file (llama-model-loader's bounds check). ggml's own
// reader also wants the offsets to be exactly the running sum of the padded
// sizes; we only require that no two tensors overlap, which is what matters
// for reading them.
//@+ 09 gguf-place
static bool place_tensor_data(struct gguf_loader * L) {
    struct mg_gguf * g = L->g;
    g->data_offset = L->pos + (g->alignment - L->pos % g->alignment) % g->alignment;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        struct mg_gguf_tensor_info * t = &g->tensors[i];
        bool inside = g->data_offset <= g->size && t->offset <= g->size - g->data_offset &&
                      t->nbytes <= g->size - g->data_offset - t->offset;
        if (!inside) {
            char what[48];
            snprintf(what, sizeof(what), "offset = %" PRIu64, t->offset);
            snprintf(L->item, sizeof(L->item), "tensor %" PRId64 " '%s': ", i, t->name);
            return fail(L, g->fields[i].offset_at, what, "its %zu bytes from byte %zu + %" PRIu64
                        " run past the end of the file at byte %zu", t->nbytes, g->data_offset, t->offset, g->size);
        }
        t->data = g->bytes + g->data_offset + t->offset;
    }
    L->item[0] = '\0';
    return true;
}
//@- 09 gguf-place

struct tensor_span {
    uint64_t offset;
    uint64_t end;
    int64_t  index;
};

static int compare_span(const void * a, const void * b) {
    const struct tensor_span * x = a;
    const struct tensor_span * y = b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

// Sorted by offset, each tensor must end before the next one starts.
static bool check_no_overlap(struct gguf_loader * L) {
    struct mg_gguf * g = L->g;
    if (g->n_tensors < 2) return true;
    struct tensor_span * spans = malloc((size_t) g->n_tensors * sizeof(spans[0]));
    MG_ASSERT(spans != NULL);
    for (int64_t i = 0; i < g->n_tensors; i++) {
        const struct mg_gguf_tensor_info * t = &g->tensors[i];
        spans[i] = (struct tensor_span) {t->offset, t->offset + t->nbytes, i};
    }
    qsort(spans, (size_t) g->n_tensors, sizeof(spans[0]), compare_span);
    bool ok = true;
    for (int64_t k = 1; k < g->n_tensors && ok; k++) {
        if (spans[k - 1].end <= spans[k].offset) continue;
        const struct mg_gguf_tensor_info * a = &g->tensors[spans[k - 1].index];
        const struct mg_gguf_tensor_info * b = &g->tensors[spans[k].index];
        char what[48];
        snprintf(what, sizeof(what), "offset = %" PRIu64, b->offset);
        snprintf(L->item, sizeof(L->item), "tensor %" PRId64 " '%s': ", spans[k].index, b->name);
        ok = fail(L, g->fields[spans[k].index].offset_at, what, "overlaps tensor %" PRId64 " '%s', data bytes %" PRIu64
                  "..%" PRIu64, spans[k - 1].index, a->name, a->offset, spans[k - 1].end);
    }
    free(spans);
    return ok;
}

// ---------------------------------------------------------------------------
// Open and close
// ---------------------------------------------------------------------------

struct mg_gguf * mg_gguf_open(const char * path) {
    struct mg_mmap * map = mg_mmap_open(path);
    if (map == NULL) return NULL;

    struct mg_gguf * g = calloc(1, sizeof(*g));
    MG_ASSERT(g != NULL);
    g->path = malloc(strlen(path) + 1);
    MG_ASSERT(g->path != NULL);
    strcpy(g->path, path);
    g->map = map;
    g->bytes = map->addr;
    g->size = map->size;
    g->alignment = GGUF_DEFAULT_ALIGNMENT;

    //@+ 09 gguf-open
    struct gguf_loader L = {.g = g};
    uint64_t n_tensors = 0, n_kv = 0;
    bool ok = read_header(&L, &n_tensors, &n_kv) &&
              read_kvs(&L, n_kv) &&
              read_tensor_infos(&L, n_tensors) &&
              place_tensor_data(&L) &&
              check_no_overlap(&L);
    //@- 09 gguf-open
    if (!ok) {
        mg_gguf_close(g);
        return NULL;
    }
    return g;
}

void mg_gguf_close(struct mg_gguf * g) {
    if (g == NULL) return;
    for (int64_t i = 0; i < g->n_kv; i++) {
        free(g->kv[i].key);
        free(g->kv[i].str_at);
    }
    free(g->kv);
    free(g->tensors);
    free(g->fields);
    mg_mmap_close(g->map);
    free(g->path);
    free(g);
}

const char * mg_gguf_path(const struct mg_gguf * g)        { return g->path; }
uint32_t     mg_gguf_version(const struct mg_gguf * g)     { return g->version; }
size_t       mg_gguf_alignment(const struct mg_gguf * g)   { return g->alignment; }
size_t       mg_gguf_data_offset(const struct mg_gguf * g) { return g->data_offset; }
size_t       mg_gguf_file_size(const struct mg_gguf * g)   { return g->size; }

//@+ full huge-pages
bool mg_gguf_copy_to_huge_pages(struct mg_gguf * g, const void * data, size_t bytes) {
    const uint8_t * at = data;
    if (at < g->bytes || at > g->bytes + g->size) return false;
    return mg_mmap_copy_to_huge_pages(g->map, (size_t) (at - g->bytes), bytes);
}
//@- full huge-pages

// ---------------------------------------------------------------------------
// Metadata
// ---------------------------------------------------------------------------

int64_t mg_gguf_n_kv(const struct mg_gguf * g) {
    return g->n_kv;
}

int64_t mg_gguf_find_key(const struct mg_gguf * g, const char * key) {
    for (int64_t i = 0; i < g->n_kv; i++) {
        if (strcmp(g->kv[i].key, key) == 0) return i;
    }
    return -1;
}

static const struct mg_gguf_kv * kv_at(const struct mg_gguf * g, int64_t i) {
    MG_ASSERT(i >= 0 && i < g->n_kv);
    return &g->kv[i];
}

const char * mg_gguf_key(const struct mg_gguf * g, int64_t i) {
    return kv_at(g, i)->key;
}

enum mg_gguf_type mg_gguf_kv_type(const struct mg_gguf * g, int64_t i) {
    return kv_at(g, i)->type;
}

//@+ full gguf-raw
const void * mg_gguf_kv_raw(const struct mg_gguf * g, int64_t i, size_t * size) {
    const struct mg_gguf_kv * kv = kv_at(g, i);
    *size = kv->value_size;
    return g->bytes + kv->value_at;
}
//@- full gguf-raw

// The kv for key, or NULL with a message.
static const struct mg_gguf_kv * find_kv(const struct mg_gguf * g, const char * key) {
    int64_t i = mg_gguf_find_key(g, key);
    if (i < 0) {
        mg_set_error("%s: key '%s' not found", g->path, key);
        return NULL;
    }
    return &g->kv[i];
}

static bool wrong_type(const struct mg_gguf * g, const struct mg_gguf_kv * kv, const char * want) {
    mg_set_error("%s: key '%s' is %s, wanted %s", g->path, kv->key, gguf_types[kv->type].name, want);
    return false;
}

static bool is_integer_type(enum mg_gguf_type t) {
    switch (t) {
        case MG_GGUF_TYPE_UINT8:  case MG_GGUF_TYPE_INT8:
        case MG_GGUF_TYPE_UINT16: case MG_GGUF_TYPE_INT16:
        case MG_GGUF_TYPE_UINT32: case MG_GGUF_TYPE_INT32:
        case MG_GGUF_TYPE_UINT64: case MG_GGUF_TYPE_INT64:
            return true;
        default:
            return false;
    }
}

static bool is_signed_type(enum mg_gguf_type t) {
    return t == MG_GGUF_TYPE_INT8 || t == MG_GGUF_TYPE_INT16 || t == MG_GGUF_TYPE_INT32 || t == MG_GGUF_TYPE_INT64;
}

// An integer kv's value, widened: *negative and its magnitude.
static void integer_value(const struct mg_gguf * g, const struct mg_gguf_kv * kv, bool * negative,
                          uint64_t * magnitude) {
    size_t size = gguf_types[kv->type].size;
    uint64_t bits = load_le(g->bytes + kv->value_at, size);
    uint64_t sign_bit = 1ull << (8 * size - 1);
    *negative = is_signed_type(kv->type) && (bits & sign_bit) != 0;
    // Two's complement of the value's own width: the magnitude is 2^width - bits.
    *magnitude = *negative ? (size == 8 ? ~bits + 1 : (sign_bit << 1) - bits) : bits;
}

// Any integer kv whose value lies in [-min_magnitude, max].
static bool get_integer(const struct mg_gguf * g, const char * key, const char * want,
                        uint64_t min_magnitude, uint64_t max, bool * negative, uint64_t * magnitude) {
    const struct mg_gguf_kv * kv = find_kv(g, key);
    if (kv == NULL) return false;
    if (!is_integer_type(kv->type)) return wrong_type(g, kv, want);
    integer_value(g, kv, negative, magnitude);
    bool fits = *negative ? *magnitude <= min_magnitude : *magnitude <= max;
    if (!fits) {
        mg_set_error("%s: key '%s' = %s%" PRIu64 " (%s) does not fit in %s", g->path, key, *negative ? "-" : "",
                     *magnitude, gguf_types[kv->type].name, want);
        return false;
    }
    return true;
}

bool mg_gguf_get_u32(const struct mg_gguf * g, const char * key, uint32_t * out) {
    bool negative;
    uint64_t m;
    if (!get_integer(g, key, "u32", 0, UINT32_MAX, &negative, &m)) return false;
    *out = (uint32_t) m;
    return true;
}

bool mg_gguf_get_i32(const struct mg_gguf * g, const char * key, int32_t * out) {
    bool negative;
    uint64_t m;
    if (!get_integer(g, key, "i32", (uint64_t) INT32_MAX + 1, INT32_MAX, &negative, &m)) return false;
    *out = negative ? (int32_t) (-(int64_t) m) : (int32_t) m;
    return true;
}

bool mg_gguf_get_u64(const struct mg_gguf * g, const char * key, uint64_t * out) {
    bool negative;
    uint64_t m;
    if (!get_integer(g, key, "u64", 0, UINT64_MAX, &negative, &m)) return false;
    *out = m;
    return true;
}

bool mg_gguf_get_f32(const struct mg_gguf * g, const char * key, float * out) {
    const struct mg_gguf_kv * kv = find_kv(g, key);
    if (kv == NULL) return false;
    if (kv->type != MG_GGUF_TYPE_FLOAT32) return wrong_type(g, kv, "f32");
    uint32_t bits = (uint32_t) load_le(g->bytes + kv->value_at, 4);
    memcpy(out, &bits, sizeof(*out));
    return true;
}

bool mg_gguf_get_bool(const struct mg_gguf * g, const char * key, bool * out) {
    const struct mg_gguf_kv * kv = find_kv(g, key);
    if (kv == NULL) return false;
    if (kv->type != MG_GGUF_TYPE_BOOL) return wrong_type(g, kv, "bool");
    *out = g->bytes[kv->value_at] != 0;   // any nonzero byte is true, as in ggml
    return true;
}

bool mg_gguf_get_str(const struct mg_gguf * g, const char * key, const char ** str, uint64_t * len) {
    const struct mg_gguf_kv * kv = find_kv(g, key);
    if (kv == NULL) return false;
    if (kv->type != MG_GGUF_TYPE_STRING) return wrong_type(g, kv, "str");
    *len = load_le(g->bytes + kv->value_at, 8);
    *str = (const char *) g->bytes + kv->value_at + 8;
    return true;
}

// ---------------------------------------------------------------------------
// Arrays
// ---------------------------------------------------------------------------

static const struct mg_gguf_kv * array_at(const struct mg_gguf * g, int64_t i) {
    const struct mg_gguf_kv * kv = kv_at(g, i);
    MG_ASSERT(kv->type == MG_GGUF_TYPE_ARRAY);
    return kv;
}

enum mg_gguf_type mg_gguf_arr_type(const struct mg_gguf * g, int64_t i) {
    return array_at(g, i)->arr_type;
}

uint64_t mg_gguf_arr_n(const struct mg_gguf * g, int64_t i) {
    return array_at(g, i)->n;
}

const void * mg_gguf_arr_data(const struct mg_gguf * g, int64_t i) {
    const struct mg_gguf_kv * kv = array_at(g, i);
    MG_ASSERT(kv->arr_type != MG_GGUF_TYPE_STRING);
    return g->bytes + kv->value_at + 4 + 8;   // after the element type and the count
}

const char * mg_gguf_arr_str(const struct mg_gguf * g, int64_t i, uint64_t j, uint64_t * len) {
    const struct mg_gguf_kv * kv = array_at(g, i);
    MG_ASSERT(kv->arr_type == MG_GGUF_TYPE_STRING && j < kv->n);
    *len = load_le(g->bytes + kv->str_at[j], 8);
    return (const char *) g->bytes + kv->str_at[j] + 8;
}

// ---------------------------------------------------------------------------
// Rendering a value for humans
// ---------------------------------------------------------------------------

// One scalar of type t stored at p, as text.
static void scalar_to_string(enum mg_gguf_type t, const uint8_t * p, char * buf, size_t size) {
    uint64_t bits = load_le(p, gguf_types[t].size);
    switch (t) {
        case MG_GGUF_TYPE_UINT8:   snprintf(buf, size, "%u", (unsigned) (uint8_t) bits); break;
        case MG_GGUF_TYPE_INT8:    snprintf(buf, size, "%d", (int) (int8_t) bits); break;
        case MG_GGUF_TYPE_UINT16:  snprintf(buf, size, "%u", (unsigned) (uint16_t) bits); break;
        case MG_GGUF_TYPE_INT16:   snprintf(buf, size, "%d", (int) (int16_t) bits); break;
        case MG_GGUF_TYPE_UINT32:  snprintf(buf, size, "%" PRIu32, (uint32_t) bits); break;
        case MG_GGUF_TYPE_INT32:   snprintf(buf, size, "%" PRId32, (int32_t) (uint32_t) bits); break;
        case MG_GGUF_TYPE_UINT64:  snprintf(buf, size, "%" PRIu64, bits); break;
        case MG_GGUF_TYPE_INT64:   snprintf(buf, size, "%" PRId64, (int64_t) bits); break;
        case MG_GGUF_TYPE_BOOL:    snprintf(buf, size, "%s", bits ? "true" : "false"); break;
        case MG_GGUF_TYPE_FLOAT32: {
            uint32_t b32 = (uint32_t) bits;
            float f;
            memcpy(&f, &b32, sizeof(f));
            snprintf(buf, size, "%g", (double) f);
            break;
        }
        case MG_GGUF_TYPE_FLOAT64: {
            double d;
            memcpy(&d, &bits, sizeof(d));
            snprintf(buf, size, "%g", d);
            break;
        }
        default: MG_ASSERT(false);
    }
}

// A string on one line: control bytes escaped, cut with "..." when too long.
static void string_to_string(const char * s, uint64_t len, char * buf, size_t size) {
    size_t o = 0;
    for (uint64_t k = 0; k < len; k++) {
        unsigned char c = (unsigned char) s[k];
        char esc[8];
        if (c == '\n')     snprintf(esc, sizeof(esc), "\\n");
        else if (c == '\t') snprintf(esc, sizeof(esc), "\\t");
        else if (c < 0x20 || c == 0x7f) snprintf(esc, sizeof(esc), "\\x%02x", c);
        else { esc[0] = (char) c; esc[1] = '\0'; }
        size_t n = strlen(esc);
        if (o + n + 4 > size) {   // keep room for "..." and the NUL
            snprintf(buf + o, size - o, "...");
            return;
        }
        memcpy(buf + o, esc, n);
        o += n;
    }
    buf[o] = '\0';
}

const char * mg_gguf_kv_to_string(const struct mg_gguf * g, int64_t i, char * buf, size_t size) {
    const struct mg_gguf_kv * kv = kv_at(g, i);
    if (size == 0) return buf;
    if (size < 8) {   // too small for anything useful
        buf[0] = '\0';
        return buf;
    }
    const uint8_t * value = g->bytes + kv->value_at;
    if (kv->type == MG_GGUF_TYPE_STRING) {
        string_to_string((const char *) value + 8, load_le(value, 8), buf, size);
    } else if (kv->type != MG_GGUF_TYPE_ARRAY) {
        scalar_to_string(kv->type, value, buf, size);
    } else if (kv->arr_type == MG_GGUF_TYPE_STRING) {
        snprintf(buf, size, "[%" PRIu64 " strings]", kv->n);
    } else if (kv->n > 8) {
        snprintf(buf, size, "[%" PRIu64 " %s]", kv->n, gguf_types[kv->arr_type].name);
    } else {
        // Short numeric arrays (per-layer head counts, say) are shown in full.
        size_t o = (size_t) snprintf(buf, size, "[");
        const uint8_t * p = value + 4 + 8;
        for (uint64_t j = 0; j < kv->n && o < size; j++) {
            char item[64];
            scalar_to_string(kv->arr_type, p + j * gguf_types[kv->arr_type].size, item, sizeof(item));
            o += (size_t) snprintf(buf + o, size - o, "%s%s", j > 0 ? ", " : "", item);
        }
        if (o < size) snprintf(buf + o, size - o, "]");
    }
    return buf;
}

// ---------------------------------------------------------------------------
// Tensors
// ---------------------------------------------------------------------------

int64_t mg_gguf_n_tensors(const struct mg_gguf * g) {
    return g->n_tensors;
}

const struct mg_gguf_tensor_info * mg_gguf_tensor(const struct mg_gguf * g, int64_t i) {
    MG_ASSERT(i >= 0 && i < g->n_tensors);
    return &g->tensors[i];
}

const struct mg_gguf_tensor_info * mg_gguf_find_tensor(const struct mg_gguf * g, const char * name) {
    for (int64_t i = 0; i < g->n_tensors; i++) {
        if (strcmp(g->tensors[i].name, name) == 0) return &g->tensors[i];
    }
    return NULL;
}
