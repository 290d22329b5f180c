// Generated from full/retired/context_malloc.c by tools/chapgen. In a class, edit this copy freely (make chapters will not overwrite your edits); to change the engine, edit full/retired/context_malloc.c and run make chapters.
// context_malloc.c - chapter 01's stand-in for a context.
//
// Every tensor is its own malloc, and the context only remembers them so that
// mg_free can give them back. It works, and it is what chapter 02 replaces:
// one malloc per tensor costs a system call's worth of bookkeeping each time,
// scatters tensors over the heap, and cannot tell you how much memory a model
// needs before you load it.
#include "tensor.h"

#include <stdlib.h>
#include <string.h>

struct object {
    struct object * next;
    struct mg_tensor tensor;   // data, when there is any, follows right after
};

struct mg_context {
    struct object * objects;   // most recent first
    bool            no_alloc;
};

struct mg_context * mg_init(struct mg_init_params params) {
    struct mg_context * ctx = calloc(1, sizeof(*ctx));
    MG_ASSERT(ctx != NULL);
    ctx->no_alloc = params.no_alloc;   // mem_size and mem_buffer wait for chapter 02
    return ctx;
}

void mg_free(struct mg_context * ctx) {
    if (ctx == NULL) return;
    for (struct object * o = ctx->objects, * next; o != NULL; o = next) {
        next = o->next;
        free(o);
    }
    free(ctx);
}

bool mg_get_no_alloc(const struct mg_context * ctx) {
    return ctx->no_alloc;
}

struct mg_tensor * mg_context_new_tensor_obj(struct mg_context * ctx, size_t data_size, void ** data) {
    const size_t header = (sizeof(struct object) + 15) / 16 * 16;   // keep the data 16-byte aligned
    struct object * o = calloc(1, header + data_size);
    if (o == NULL) {
        mg_set_error("out of memory: asked for %zu bytes", header + data_size);
        return NULL;
    }
    o->next      = ctx->objects;
    ctx->objects = o;
    *data = data_size > 0 ? (char *) o + header : NULL;
    return &o->tensor;
}
