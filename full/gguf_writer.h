//@file full
// gguf_writer.h - building a GGUF file in memory and writing it out.
//
//     struct mg_gguf_writer * w = mg_gguf_writer_new();
//     mg_gguf_writer_set_str(w, "general.architecture", "qwen3");
//     mg_gguf_writer_set_u32(w, "qwen3.block_count", 2);
//     int64_t ne[2] = {256, 6400};
//     mg_gguf_writer_add_tensor(w, "token_embd.weight", MG_TYPE_F32, 2, ne, embd);   // embd is borrowed
//     if (!mg_gguf_writer_write(w, "tiny.gguf")) fprintf(stderr, "%s\n", mg_last_error());
//     mg_gguf_writer_free(w);
//
// The file is written in the order the calls were made: header, key/value
// pairs, tensor infos, padding to general.alignment (default 32), then each
// tensor's data padded to the alignment. Offsets are exactly the running sum
// of the padded sizes, which is what ggml's reader (gguf.cpp) insists on, so
// llama.cpp loads these files (gguf-py's GGUFWriter lays them out the same way).
//
// Metadata values are copied in when set. Tensor data is borrowed: the pointer
// must stay valid until the file is written (a model's weights are not copied
// a second time).
//
// Setting a key that is already set removes the old pair and appends the new
// one, as ggml's gguf_set_val_* do: copy a model's metadata, then set
// general.file_type, and it ends up last, where llama-quantize puts it.
//
// mg_gguf_writer_write writes "<path>.tmp" and renames it over path only when
// everything was written, so a failure (a full disk, say) never leaves a
// half-written model behind: the temporary file is removed and the error names
// the file and the reason.
#pragma once

#include "gguf.h"

struct mg_gguf_writer;

struct mg_gguf_writer * mg_gguf_writer_new(void);
void                    mg_gguf_writer_free(struct mg_gguf_writer * w);

// Key/value pairs. false (with mg_last_error()) for an empty key, a string over
// GGUF's 2^30-byte limit, or a general.alignment that is not a u32 power of 2.
bool mg_gguf_writer_set_u8  (struct mg_gguf_writer * w, const char * key, uint8_t  v);
bool mg_gguf_writer_set_i8  (struct mg_gguf_writer * w, const char * key, int8_t   v);
bool mg_gguf_writer_set_u16 (struct mg_gguf_writer * w, const char * key, uint16_t v);
bool mg_gguf_writer_set_i16 (struct mg_gguf_writer * w, const char * key, int16_t  v);
bool mg_gguf_writer_set_u32 (struct mg_gguf_writer * w, const char * key, uint32_t v);
bool mg_gguf_writer_set_i32 (struct mg_gguf_writer * w, const char * key, int32_t  v);
bool mg_gguf_writer_set_f32 (struct mg_gguf_writer * w, const char * key, float    v);
bool mg_gguf_writer_set_bool(struct mg_gguf_writer * w, const char * key, bool     v);
bool mg_gguf_writer_set_u64 (struct mg_gguf_writer * w, const char * key, uint64_t v);
bool mg_gguf_writer_set_i64 (struct mg_gguf_writer * w, const char * key, int64_t  v);
bool mg_gguf_writer_set_f64 (struct mg_gguf_writer * w, const char * key, double   v);
bool mg_gguf_writer_set_str (struct mg_gguf_writer * w, const char * key, const char * str);   // NUL-terminated
bool mg_gguf_writer_set_strn(struct mg_gguf_writer * w, const char * key, const char * str, size_t len);

// An array of n numbers of type elem (any type but STRING and ARRAY), given
// as a C array of the matching C type (uint8_t, int32_t, float, bool, ...).
bool mg_gguf_writer_set_arr_data(struct mg_gguf_writer * w, const char * key, enum mg_gguf_type elem,
                                 const void * data, size_t n);
// An array of n strings; lens may be NULL for NUL-terminated strings.
bool mg_gguf_writer_set_arr_str (struct mg_gguf_writer * w, const char * key, const char * const * strs,
                                 const size_t * lens, size_t n);

// Copy every key/value pair of g, in its order, except the keys in skip (a
// NULL-terminated list, or NULL). To override a key, set it afterwards.
bool mg_gguf_writer_copy_kvs(struct mg_gguf_writer * w, const struct mg_gguf * g, const char * const * skip);

// A tensor info and its data (borrowed). type is a ggml type id; ne[0] must be
// a multiple of its block size. false for a bad name (empty, >= 64 bytes, a
// duplicate), n_dims outside 1..4, an ne <= 0, or an unknown type.
bool mg_gguf_writer_add_tensor(struct mg_gguf_writer * w, const char * name, int type, int n_dims,
                               const int64_t * ne, const void * data);

int64_t mg_gguf_writer_n_kv(const struct mg_gguf_writer * w);
int64_t mg_gguf_writer_n_tensors(const struct mg_gguf_writer * w);

// Write the file: to path.tmp, then renamed to path. false, with nothing left
// behind, on any error.
bool mg_gguf_writer_write(const struct mg_gguf_writer * w, const char * path);
// Write to an open stream (name is used in messages). The stream is flushed
// but not closed.
bool mg_gguf_writer_write_stream(const struct mg_gguf_writer * w, FILE * f, const char * name);
