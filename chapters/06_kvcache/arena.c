// Generated from full/arena.c by tools/chapgen. In a class, edit this copy freely (make chapters will not overwrite your edits); to change the engine, edit full/arena.c and run make chapters.
// arena.c - the context: one buffer, object headers in a list, bump allocation.
//
// Mirrors ggml.c: ggml_init, ggml_new_object, ggml_used_mem,
// ggml_get_first_tensor, and ggml-backend's ggml_backend_alloc_ctx_tensors.
#include "arena.h"
#include "trace.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

struct mg_context {
    size_t             mem_size;
    void *             mem_buffer;
    bool               mem_buffer_owned;   // we malloc'd it, so we free it
    bool               no_alloc;
    int                n_objects;
    struct mg_object * objects_begin;
    struct mg_object * objects_end;        // the last object: new ones go right after it
};

static size_t align_up(size_t n, size_t align) {
    return (n + align - 1) / align * align;
}

// The object header itself is padded so that payloads stay aligned.
static size_t object_header_size(void) {
    return align_up(sizeof(struct mg_object), MG_MEM_ALIGN);
}

size_t mg_tensor_overhead(void) {
    return object_header_size() + align_up(sizeof(struct mg_tensor), MG_MEM_ALIGN);
}

struct mg_context * mg_init(struct mg_init_params params) {
    struct mg_context * ctx = calloc(1, sizeof(*ctx));
    MG_ASSERT(ctx != NULL);
    ctx->mem_size         = align_up(params.mem_size, MG_MEM_ALIGN);
    ctx->mem_buffer       = params.mem_buffer;
    ctx->mem_buffer_owned = params.mem_buffer == NULL;
    ctx->no_alloc         = params.no_alloc;
    if (ctx->mem_buffer_owned && ctx->mem_size > 0) {
        // One allocation for everything this context will ever hold.
        ctx->mem_buffer = aligned_alloc(MG_MEM_ALIGN, ctx->mem_size);
        if (ctx->mem_buffer == NULL) {
            mg_set_error("cannot allocate a context of %zu bytes", ctx->mem_size);
            free(ctx);
            return NULL;
        }
    }
    mg_trace(MG_TRACE_ALLOC, "context: %zu bytes%s", ctx->mem_size, ctx->no_alloc ? " (no_alloc: headers only)" : "");
    return ctx;
}

void mg_free(struct mg_context * ctx) {
    if (ctx == NULL) return;
    if (ctx->mem_buffer_owned) free(ctx->mem_buffer);
    free(ctx);
}

bool mg_get_no_alloc(const struct mg_context * ctx) {
    return ctx->no_alloc;
}

size_t mg_get_mem_size(const struct mg_context * ctx) {
    return ctx->mem_size;
}

size_t mg_used_mem(const struct mg_context * ctx) {
    return ctx->objects_end == NULL ? 0 : ctx->objects_end->offs + ctx->objects_end->size;
}

int mg_n_objects(const struct mg_context * ctx) {
    return ctx->n_objects;
}

static const char * object_type_name(enum mg_object_type type) {
    switch (type) {
        case MG_OBJECT_TENSOR: return "tensor";
        case MG_OBJECT_DATA:   return "data";
        case MG_OBJECT_GRAPH:  return "graph";
        case MG_OBJECT_BUFFER: return "buffer";
    }
    return "?";
}

// The whole allocator: the new object starts where the last one ended. O(1),
// no search, no fragmentation; the price is that nothing is freed alone.
static struct mg_object * new_object(struct mg_context * ctx, enum mg_object_type type, size_t size) {
    const size_t cur_end   = mg_used_mem(ctx);
    const size_t size_need = align_up(size, MG_MEM_ALIGN);
    const size_t needed    = object_header_size() + size_need;
    if (cur_end + needed > ctx->mem_size) {
        mg_set_error("context full: asked for %zu bytes (%zu header + %zu payload), %zu left of %zu",
                     needed, object_header_size(), size_need, ctx->mem_size - cur_end, ctx->mem_size);
        return NULL;
    }
    struct mg_object * obj = (struct mg_object *) ((char *) ctx->mem_buffer + cur_end);
    *obj = (struct mg_object) {
        .offs = cur_end + object_header_size(),
        .size = size_need,
        .next = NULL,
        .type = type,
    };
    if (ctx->objects_end != NULL) {
        ctx->objects_end->next = obj;
    } else {
        ctx->objects_begin = obj;
    }
    ctx->objects_end = obj;
    ctx->n_objects++;
    mg_trace(MG_TRACE_ALLOC, "object #%d %-6s offset %6zu  size %6zu  used %zu/%zu", ctx->n_objects - 1,
             object_type_name(type), obj->offs, obj->size, mg_used_mem(ctx), ctx->mem_size);
    return obj;
}

void * mg_context_alloc(struct mg_context * ctx, enum mg_object_type type, size_t size) {
    struct mg_object * obj = new_object(ctx, type, size);
    if (obj == NULL) return NULL;
    return (char *) ctx->mem_buffer + obj->offs;   // not zeroed: data is written before it is read
}

struct mg_tensor * mg_context_new_tensor_obj(struct mg_context * ctx, size_t data_size, void ** data) {
    // [object header][tensor header][data ...]: data sits right behind its header.
    const size_t tensor_size = align_up(sizeof(struct mg_tensor), MG_MEM_ALIGN);
    struct mg_tensor * t = mg_context_alloc(ctx, MG_OBJECT_TENSOR, tensor_size + data_size);
    if (t == NULL) return NULL;
    memset(t, 0, sizeof(*t));
    *data = data_size > 0 ? (char *) t + tensor_size : NULL;
    return t;
}

// ---------------------------------------------------------------------------
// Walking the arena
// ---------------------------------------------------------------------------

static struct mg_tensor * tensor_of(const struct mg_context * ctx, const struct mg_object * obj) {
    return (struct mg_tensor *) ((char *) ctx->mem_buffer + obj->offs);
}

static const struct mg_object * next_tensor_object(const struct mg_object * obj) {
    while (obj != NULL && obj->type != MG_OBJECT_TENSOR) obj = obj->next;
    return obj;
}

struct mg_tensor * mg_get_first_tensor(const struct mg_context * ctx) {
    const struct mg_object * obj = next_tensor_object(ctx->objects_begin);
    return obj ? tensor_of(ctx, obj) : NULL;
}

struct mg_tensor * mg_get_next_tensor(const struct mg_context * ctx, const struct mg_tensor * t) {
    // The object header sits right before its payload.
    const struct mg_object * obj = (const struct mg_object *) ((const char *) t - object_header_size());
    obj = next_tensor_object(obj->next);
    return obj ? tensor_of(ctx, obj) : NULL;
}

struct mg_tensor * mg_get_tensor(const struct mg_context * ctx, const char * name) {
    for (struct mg_tensor * t = mg_get_first_tensor(ctx); t != NULL; t = mg_get_next_tensor(ctx, t)) {
        if (strcmp(t->name, name) == 0) return t;
    }
    return NULL;
}

void mg_arena_print(FILE * f, const struct mg_context * ctx) {
    fprintf(f, "%4s %8s %8s  %-6s  %s\n", "#", "offset", "size", "type", "name");
    int i = 0;
    for (const struct mg_object * obj = ctx->objects_begin; obj != NULL; obj = obj->next, i++) {
        const char * name = obj->type == MG_OBJECT_TENSOR ? tensor_of(ctx, obj)->name : "";
        fprintf(f, "%4d %8zu %8zu  %-6s  %s\n", i, obj->offs, obj->size, object_type_name(obj->type),
                name[0] ? name : (obj->type == MG_OBJECT_TENSOR ? "(unnamed)" : ""));
    }
    fprintf(f, "used %zu of %zu bytes (%.1f%%), %d objects, %zu bytes of headers\n", mg_used_mem(ctx),
            ctx->mem_size, ctx->mem_size ? 100.0 * (double) mg_used_mem(ctx) / (double) ctx->mem_size : 0.0,
            ctx->n_objects, (size_t) ctx->n_objects * object_header_size());
}

// ---------------------------------------------------------------------------
// Buffers
// ---------------------------------------------------------------------------

struct mg_buffer * mg_buffer_new(size_t size) {
    struct mg_buffer * buf = calloc(1, sizeof(*buf));
    MG_ASSERT(buf != NULL);
    buf->size = size;
    buf->data = size > 0 ? aligned_alloc(MG_MEM_ALIGN * 4, align_up(size, MG_MEM_ALIGN * 4)) : NULL;
    if (size > 0 && buf->data == NULL) {
        mg_set_error("cannot allocate a buffer of %zu bytes", size);
        free(buf);
        return NULL;
    }
    if (buf->data) memset(buf->data, 0, size);
    return buf;
}

void mg_buffer_free(struct mg_buffer * buf) {
    if (buf == NULL) return;
    free(buf->data);
    free(buf);
}

// Pass 1 sums, pass 2 places: the same two passes ggml-backend makes, so one
// malloc serves every weight of a model.
struct mg_buffer * mg_alloc_ctx_tensors(struct mg_context * ctx) {
    size_t total = 0;
    for (struct mg_tensor * t = mg_get_first_tensor(ctx); t != NULL; t = mg_get_next_tensor(ctx, t)) {
        if (t->data == NULL && t->view_src == NULL) total += align_up(mg_nbytes(t), MG_MEM_ALIGN);
    }
    struct mg_buffer * buf = mg_buffer_new(total);
    if (buf == NULL) return NULL;
    size_t offset = 0;
    for (struct mg_tensor * t = mg_get_first_tensor(ctx); t != NULL; t = mg_get_next_tensor(ctx, t)) {
        if (t->data == NULL && t->view_src == NULL) {
            t->data = (char *) buf->data + offset;
            mg_trace(MG_TRACE_ALLOC, "buffer: %-24s offset %8zu  size %8zu", t->name, offset, mg_nbytes(t));
            offset += align_up(mg_nbytes(t), MG_MEM_ALIGN);
        }
    }
    // Views were made before their source had data: point them at it now.
    for (struct mg_tensor * t = mg_get_first_tensor(ctx); t != NULL; t = mg_get_next_tensor(ctx, t)) {
        if (t->data == NULL && t->view_src != NULL && t->view_src->data != NULL) {
            t->data = (char *) t->view_src->data + t->view_offs;
        }
    }
    return buf;
}
