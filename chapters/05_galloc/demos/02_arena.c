// Generated from full/demos/02_arena.c by tools/chapgen. In a class, edit this copy freely (make chapters will not overwrite your edits); to change the engine, edit full/demos/02_arena.c and run make chapters.
// Chapter 02 demo: one buffer holds every tensor; no_alloc contexts get
// their data later, in one piece; and a mapped file is memory that costs
// nothing until it is touched.
#define _DEFAULT_SOURCE
#include "mg.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void arena_map(void) {
    printf("== One arena, objects laid end to end ==\n");
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 2048});
    mg_set_name(mg_new_tensor_2d(ctx, MG_TYPE_F32, 3, 2), "W");
    mg_set_name(mg_new_tensor_1d(ctx, MG_TYPE_F32, 3), "x");
    mg_set_name(mg_new_tensor_1d(ctx, MG_TYPE_Q8_0, 64), "q");
    mg_arena_print(stdout, ctx);
    printf("each tensor costs %zu bytes of headers (object + tensor) before its data\n", mg_tensor_overhead());

    printf("\n== When it is full, it says so ==\n");
    struct mg_tensor * big = mg_new_tensor_1d(ctx, MG_TYPE_F32, 1000);
    printf("mg_new_tensor_1d(1000 floats) -> %s\n%s\n", big ? "a tensor" : "NULL", mg_last_error());
    mg_free(ctx);
}

static void no_alloc_then_one_buffer(void) {
    printf("\n== no_alloc: headers now, data later, all in one buffer ==\n");
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 8 * mg_tensor_overhead(), .no_alloc = true});
    struct mg_tensor * a = mg_set_name(mg_new_tensor_2d(ctx, MG_TYPE_F32, 4, 4), "a");
    struct mg_tensor * b = mg_set_name(mg_new_tensor_1d(ctx, MG_TYPE_F16, 10), "b");
    struct mg_tensor * c = mg_set_name(mg_new_tensor_1d(ctx, MG_TYPE_F32, 3), "c");
    printf("before: a->data %s, b->data %s, c->data %s\n", a->data ? "set" : "NULL", b->data ? "set" : "NULL",
           c->data ? "set" : "NULL");
    struct mg_buffer * buf = mg_alloc_ctx_tensors(ctx);
    printf("after:  one buffer of %zu bytes; a at +%ld, b at +%ld, c at +%ld\n", buf->size,
           (long) ((char *) a->data - (char *) buf->data), (long) ((char *) b->data - (char *) buf->data),
           (long) ((char *) c->data - (char *) buf->data));
    mg_arena_print(stdout, ctx);
    mg_buffer_free(buf);
    mg_free(ctx);
}

// Write n floats to a temporary file and ask the kernel to forget its pages,
// so that reading them has to go back to the disk.
static const char * make_weights_file(size_t n) {
    static char path[] = "/tmp/mg-demo-weights-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return NULL;
    float * chunk = malloc(1 << 20);
    for (size_t i = 0; i < (1 << 20) / sizeof(float); i++) chunk[i] = (float) i;
    for (size_t done = 0; done < n * sizeof(float); done += 1 << 20) {
        if (write(fd, chunk, 1 << 20) != 1 << 20) break;
    }
    free(chunk);
    fsync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
    return path;
}

static void mapped_file(void) {
    printf("\n== A 64 MiB file mapped as tensor data ==\n");
    const size_t n    = 16 * 1024 * 1024;   // floats
    const char * path = make_weights_file(n);
    struct mg_mmap * map = path ? mg_mmap_open(path) : NULL;
    if (map == NULL) {
        printf("cannot make the file: %s\n", mg_last_error());
        return;
    }
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 4 * mg_tensor_overhead(), .no_alloc = true});
    struct mg_tensor *  w   = mg_set_name(mg_new_tensor_2d(ctx, MG_TYPE_F32, 4096, (int64_t) n / 4096), "w");
    w->data = map->addr;   // the whole "load": one pointer assignment

    long minor0, major0, minor1, major1, minor2, major2;
    mg_page_faults(&minor0, &major0);
    printf("mapped %zu bytes; w->data points into the mapping\n", map->size);
    double sum = 0.0;
    for (int64_t r = 0; r < w->ne[1]; r++) sum += mg_get_f32_nd(w, 0, r, 0, 0);   // one float per 16 KiB row
    mg_page_faults(&minor1, &major1);
    for (int64_t r = 0; r < w->ne[1]; r++) sum += mg_get_f32_nd(w, 0, r, 0, 0);   // the same pages again
    mg_page_faults(&minor2, &major2);
    printf("first touch of %lld rows:  %ld minor + %ld major page faults\n", (long long) w->ne[1], minor1 - minor0,
           major1 - major0);
    printf("second touch of the same: %ld minor + %ld major page faults (the pages are mapped now)\n",
           minor2 - minor1, major2 - major1);
    printf("(sum %.0f)\n", sum);
    mg_free(ctx);
    mg_mmap_close(map);
    unlink(path);
}

int main(void) {
    arena_map();
    no_alloc_then_one_buffer();
    mapped_file();
    return 0;
}
