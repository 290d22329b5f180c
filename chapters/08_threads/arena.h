// Generated from full/arena.h by tools/chapgen. In a class, edit this copy freely (make chapters will not overwrite your edits); to change the engine, edit full/arena.h and run make chapters.
// arena.h - the context as ggml builds it: one buffer, bump allocation.
//
//     struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 1024 * 1024});
//     struct mg_tensor * a = mg_new_tensor_1d(ctx, MG_TYPE_F32, 100);   // header + 400 bytes
//     mg_arena_print(stdout, ctx);
//     //   #  offset  size  type    name
//     //   0      32   576  tensor  a
//     mg_free(ctx);                                                     // one free for all
//
// Every allocation is an object: a small header (struct mg_object) followed by
// its payload, both carved from the front of the free space. The headers form
// a linked list, so the arena can be walked (ggml_get_first_tensor). Nothing is
// ever freed alone: the whole arena goes at once. That is why allocating is
// O(1) and why a context never fragments (ggml.c, ggml_new_object).
#pragma once

#include "tensor.h"

#define MG_MEM_ALIGN 16   // every payload starts on this boundary (ggml: GGML_MEM_ALIGN)

enum mg_object_type {
    MG_OBJECT_TENSOR,   // a tensor header, and its data unless the context is no_alloc
    MG_OBJECT_DATA,     // bytes for a computed result (chapters 03-04 place results this way)
    MG_OBJECT_GRAPH,    // a graph's node and leaf arrays and its hash set
    MG_OBJECT_BUFFER,   // a compute buffer or a work buffer
};

struct mg_object {
    size_t              offs;   // where the payload starts, counted from the arena's first byte
    size_t              size;   // payload bytes, rounded up to MG_MEM_ALIGN
    struct mg_object *  next;
    enum mg_object_type type;
};

// Bytes a tensor header costs in an arena, without data: size no_alloc
// contexts with n * mg_tensor_overhead() (ggml_tensor_overhead).
size_t mg_tensor_overhead(void);

size_t mg_get_mem_size(const struct mg_context * ctx);
size_t mg_used_mem    (const struct mg_context * ctx);
int    mg_n_objects   (const struct mg_context * ctx);

// A payload of size bytes, aligned to MG_MEM_ALIGN. NULL, with mg_last_error()
// saying how much was asked and how much is left, when the arena is full.
void * mg_context_alloc(struct mg_context * ctx, enum mg_object_type type, size_t size);

// The arena map: offset, size, type and name of every object, then used/total.
void mg_arena_print(FILE * f, const struct mg_context * ctx);

// Walk the tensors of a context in creation order.
struct mg_tensor * mg_get_first_tensor(const struct mg_context * ctx);
struct mg_tensor * mg_get_next_tensor (const struct mg_context * ctx, const struct mg_tensor * t);
struct mg_tensor * mg_get_tensor      (const struct mg_context * ctx, const char * name);

// A block of memory that tensors' data lives in (ggml_backend_buffer, CPU only).
struct mg_buffer {
    void * data;
    size_t size;
};

struct mg_buffer * mg_buffer_new(size_t size);   // zeroed; NULL + mg_last_error() if malloc fails
void               mg_buffer_free(struct mg_buffer * buf);

// Give every tensor of a no_alloc context that has no data yet (and is not a
// view) a place in one new buffer: sum the sizes, allocate once, assign the
// pointers (ggml_backend_alloc_ctx_tensors). Views are pointed at their source.
struct mg_buffer * mg_alloc_ctx_tensors(struct mg_context * ctx);
