//@file 09
// gguf.h - reading GGUF files (the format llama.cpp loads models from).
//
//     struct mg_gguf * g = mg_gguf_open("model.gguf");
//     if (!g) { fprintf(stderr, "%s\n", mg_last_error()); exit(1); }
//     uint32_t n_layer;
//     mg_gguf_get_u32(g, "qwen3.block_count", &n_layer);
//     const struct mg_gguf_tensor_info * t = mg_gguf_find_tensor(g, "token_embd.weight");
//     // t->data points into the read-only mapping of the file: nothing was copied
//     mg_gguf_close(g);
//
// A GGUF file is: header, key/value metadata, tensor infos, padding, tensor
// data (layout in docs/formats.md section 1). mg_gguf_open validates all of it
// before returning, so later code can trust every count, length and offset.
// Every failure is NULL plus an mg_last_error() message that names the file,
// the field and its byte offset.
#pragma once

#include "tensor.h"

enum mg_gguf_type {
    MG_GGUF_TYPE_UINT8   = 0,
    MG_GGUF_TYPE_INT8    = 1,
    MG_GGUF_TYPE_UINT16  = 2,
    MG_GGUF_TYPE_INT16   = 3,
    MG_GGUF_TYPE_UINT32  = 4,
    MG_GGUF_TYPE_INT32   = 5,
    MG_GGUF_TYPE_FLOAT32 = 6,
    MG_GGUF_TYPE_BOOL    = 7,
    MG_GGUF_TYPE_STRING  = 8,
    MG_GGUF_TYPE_ARRAY   = 9,
    MG_GGUF_TYPE_UINT64  = 10,
    MG_GGUF_TYPE_INT64   = 11,
    MG_GGUF_TYPE_FLOAT64 = 12,
    MG_GGUF_TYPE_COUNT,
};

const char * mg_gguf_type_name(enum mg_gguf_type type);   // "u32", "str", "arr", ...

// ggml's whole type table, for every id a file may name, including types this
// engine cannot compute (ggml.c type_traits[]): "q4_K", "iq2_xxs", ... NULL
// (and 0) for an id ggml does not define, such as the removed ids 4, 5, 31-33
// and 36-38, or anything >= 43. Safe for any int read from a file.
const char * mg_gguf_ggml_type_name(int type_id);
int64_t      mg_gguf_ggml_blck_size(int type_id);   // elements per block
size_t       mg_gguf_ggml_type_size(int type_id);   // bytes per block

// One tensor as the file describes it.
struct mg_gguf_tensor_info {
    char         name[MG_MAX_NAME];
    int          type;                // a ggml type id (may be one this engine cannot compute)
    int          n_dims;
    int64_t      ne[MG_MAX_DIMS];     // missing dims are 1
    uint64_t     offset;              // from the start of the data section
    size_t       nbytes;
    const void * data;                // inside the mapping
};

struct mg_gguf;

struct mg_gguf * mg_gguf_open(const char * path);
void             mg_gguf_close(struct mg_gguf * g);

const char * mg_gguf_path(const struct mg_gguf * g);
uint32_t     mg_gguf_version(const struct mg_gguf * g);
size_t       mg_gguf_alignment(const struct mg_gguf * g);
size_t       mg_gguf_data_offset(const struct mg_gguf * g);   // file offset of the data section
size_t       mg_gguf_file_size(const struct mg_gguf * g);
//@+ full huge-pages
// Bytes [data, data + bytes) of the mapped file (a tensor's data, say) moved
// into memory backed by huge pages, at the same addresses (mmap.h,
// mg_mmap_copy_to_huge_pages). False, nothing changed, where that cannot be.
bool mg_gguf_copy_to_huge_pages(struct mg_gguf * g, const void * data, size_t bytes);
//@- full huge-pages

// Metadata. Keys are looked up by exact name; -1 when absent.
int64_t           mg_gguf_n_kv(const struct mg_gguf * g);
int64_t           mg_gguf_find_key(const struct mg_gguf * g, const char * key);
const char *      mg_gguf_key(const struct mg_gguf * g, int64_t i);        // NUL-terminated
enum mg_gguf_type mg_gguf_kv_type(const struct mg_gguf * g, int64_t i);

// Typed getters by key: false (and mg_last_error() naming the key, its type and
// the wanted type) when the key is absent or has another type. Integer getters
// accept any integer type whose value fits in the requested one.
bool mg_gguf_get_u32 (const struct mg_gguf * g, const char * key, uint32_t * out);
bool mg_gguf_get_i32 (const struct mg_gguf * g, const char * key, int32_t  * out);
bool mg_gguf_get_u64 (const struct mg_gguf * g, const char * key, uint64_t * out);
bool mg_gguf_get_f32 (const struct mg_gguf * g, const char * key, float    * out);
bool mg_gguf_get_bool(const struct mg_gguf * g, const char * key, bool     * out);
// A string value: points into the mapping, NOT NUL-terminated; *len is its length.
bool mg_gguf_get_str (const struct mg_gguf * g, const char * key, const char ** str, uint64_t * len);

// Arrays (by kv index): element type, count, and the elements.
enum mg_gguf_type mg_gguf_arr_type(const struct mg_gguf * g, int64_t i);
uint64_t          mg_gguf_arr_n   (const struct mg_gguf * g, int64_t i);
const void *      mg_gguf_arr_data(const struct mg_gguf * g, int64_t i);  // numeric arrays: packed LE elements (unaligned)
const char *      mg_gguf_arr_str (const struct mg_gguf * g, int64_t i, uint64_t j, uint64_t * len); // string arrays

// The value of kv i rendered for humans ("qwen3", "28", "[151936 strings]").
const char * mg_gguf_kv_to_string(const struct mg_gguf * g, int64_t i, char * buf, size_t size);
//@+ full gguf-raw
// The value of kv i exactly as the file stores it (the bytes after its type
// field), so gguf_writer.c can copy metadata to a new file unchanged.
const void * mg_gguf_kv_raw(const struct mg_gguf * g, int64_t i, size_t * size);
//@- full gguf-raw

// Tensors, in file order.
int64_t                            mg_gguf_n_tensors(const struct mg_gguf * g);
const struct mg_gguf_tensor_info * mg_gguf_tensor(const struct mg_gguf * g, int64_t i);
const struct mg_gguf_tensor_info * mg_gguf_find_tensor(const struct mg_gguf * g, const char * name);
