// test_arena.c - the context as one buffer, mapped files, and the trace switch.
//
// The arena is checked against the layout ggml_new_object gives: every object
// is a header of mg_tensor_overhead() - sizeof(tensor, aligned) bytes, then its
// payload; payloads are MG_MEM_ALIGN-aligned and laid end to end, so the used
// size is the sum of what was asked, each rounded up. With a buffer the test
// provides, these are real addresses the test can predict. Mapped files are
// compared with the bytes the test wrote; trace lines with the addresses the
// arena handed out.
#define _DEFAULT_SOURCE   // mkstemp, mkdtemp
#include "harness.h"
#include "mg.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

static size_t align16(size_t n) {
    return (n + MG_MEM_ALIGN - 1) / MG_MEM_ALIGN * MG_MEM_ALIGN;
}

// The tensor header inside its object, and the object header before it.
static size_t tensor_header_size(void) {
    return align16(sizeof(struct mg_tensor));
}

static size_t object_header_size(void) {
    return mg_tensor_overhead() - tensor_header_size();
}

static bool is_aligned(const void * p) {
    return (uintptr_t) p % MG_MEM_ALIGN == 0;
}

// A context over memory the test owns, so addresses can be predicted.
struct owned_arena {
    void *              buf;
    size_t              size;
    struct mg_context * ctx;
};

static struct owned_arena owned_arena_new(size_t size, bool no_alloc) {
    struct owned_arena a = {.buf = aligned_alloc(MG_MEM_ALIGN, size), .size = size};
    ck_assert_ptr_nonnull(a.buf);
    a.ctx = mg_init((struct mg_init_params) {.mem_size = size, .mem_buffer = a.buf, .no_alloc = no_alloc});
    ck_assert_ptr_nonnull(a.ctx);
    return a;
}

static void owned_arena_free(struct owned_arena * a) {
    mg_free(a->ctx);
    free(a->buf);   // still ours: mg_free must not have freed it
}

// The number after `key` in s (e.g. "asked for " -> 1234); -1 if absent.
static long long number_after(const char * s, const char * key) {
    const char * p = strstr(s, key);
    return p ? strtoll(p + strlen(key), NULL, 10) : -1;
}

// The number just before `key` in s (e.g. " left" in "96 left"); -1 if absent.
static long long number_before(const char * s, const char * key) {
    const char * p = strstr(s, key);
    if (p == NULL) return -1;
    while (p > s && p[-1] >= '0' && p[-1] <= '9') p--;
    return strtoll(p, NULL, 10);
}

// Writes n bytes to a new temporary file; its path goes into path (>= 32 bytes).
static void write_temp_file(char * path, const void * bytes, size_t n) {
    strcpy(path, "/tmp/mg_test_arena_XXXXXX");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(fd, (const char *) bytes + done, n - done);
        ck_assert_int_gt(w, 0);
        done += (size_t) w;
    }
    close(fd);
}

// ---------------------------------------------------------------------------
// Bump allocation
// ---------------------------------------------------------------------------

START_TEST(test_objects_laid_end_to_end) {
    struct owned_arena a = owned_arena_new(64 * 1024, false);
    // Sizes that need padding: 28, 6, 18, 4 and 924 bytes of data.
    struct mg_tensor * t[5] = {
        mg_new_tensor_1d(a.ctx, MG_TYPE_F32, 7),       mg_new_tensor_1d(a.ctx, MG_TYPE_F16, 3),
        mg_new_tensor_1d(a.ctx, MG_TYPE_Q4_0, 32),     mg_new_tensor_1d(a.ctx, MG_TYPE_F32, 1),
        mg_new_tensor_2d(a.ctx, MG_TYPE_F32, 33, 7),
    };
    const size_t data_bytes[5] = {28, 6, 18, 4, 924};
    size_t offset = 0;   // where the next object header starts
    for (int k = 0; k < 5; k++) {
        ck_assert_ptr_nonnull(t[k]);
        ck_assert_uint_eq(mg_nbytes(t[k]), data_bytes[k]);
        ck_assert_msg((char *) t[k] == (char *) a.buf + offset + object_header_size(),
                      "tensor %d at +%td, expected +%zu", k, (char *) t[k] - (char *) a.buf,
                      offset + object_header_size());
        ck_assert_ptr_eq(t[k]->data, (char *) t[k] + tensor_header_size());   // data right behind its header
        ck_assert(is_aligned(t[k]));
        ck_assert(is_aligned(t[k]->data));
        offset += mg_tensor_overhead() + align16(data_bytes[k]);
    }
    ck_assert_uint_eq(mg_used_mem(a.ctx), offset);
    ck_assert_int_eq(mg_n_objects(a.ctx), 5);
    ck_assert_uint_eq(mg_get_mem_size(a.ctx), 64 * 1024);
    owned_arena_free(&a);
}
END_TEST

START_TEST(test_owned_buffer_payloads_aligned_and_summed) {
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 1000 * 1000 + 3});
    ck_assert_ptr_nonnull(ctx);
    ck_assert_uint_ge(mg_get_mem_size(ctx), 1000 * 1000 + 3);
    uint64_t rng = 7;
    size_t used = 0;
    struct mg_tensor * prev = NULL;
    for (int k = 0; k < 50; k++) {
        const int64_t n = 1 + (int64_t) (mg_test_rand_u64(&rng) % 300);
        struct mg_tensor * t = mg_new_tensor_1d(ctx, k % 2 ? MG_TYPE_F16 : MG_TYPE_F32, n);
        ck_assert_ptr_nonnull(t);
        ck_assert(is_aligned(t) && is_aligned(t->data));
        used += mg_tensor_overhead() + align16(mg_nbytes(t));
        if (prev != NULL) {
            // Each object starts where the previous one's payload ended.
            ck_assert_ptr_eq((char *) t, (char *) prev->data + align16(mg_nbytes(prev)) + object_header_size());
        }
        prev = t;
    }
    ck_assert_uint_eq(mg_used_mem(ctx), used);
    ck_assert_int_eq(mg_n_objects(ctx), 50);
    mg_free(ctx);
}
END_TEST

START_TEST(test_context_alloc_aligned) {
    struct owned_arena a = owned_arena_new(4096, false);
    void * p1 = mg_context_alloc(a.ctx, MG_OBJECT_TENSOR, 1);
    void * p2 = mg_context_alloc(a.ctx, MG_OBJECT_TENSOR, 17);
    void * p3 = mg_context_alloc(a.ctx, MG_OBJECT_TENSOR, 0);
    ck_assert_ptr_eq(p1, (char *) a.buf + object_header_size());
    ck_assert_ptr_eq(p2, (char *) p1 + MG_MEM_ALIGN + object_header_size());
    ck_assert_ptr_eq(p3, (char *) p2 + 2 * MG_MEM_ALIGN + object_header_size());
    ck_assert_uint_eq(mg_used_mem(a.ctx), 3 * object_header_size() + 3 * MG_MEM_ALIGN);
    owned_arena_free(&a);
}
END_TEST

START_TEST(test_user_buffer_is_used_and_kept) {
    struct owned_arena a = owned_arena_new(8192, false);
    memset(a.buf, 0xAB, a.size);
    struct mg_tensor * t = mg_new_tensor_1d(a.ctx, MG_TYPE_F32, 16);
    ck_assert_ptr_eq(t, (char *) a.buf + object_header_size());
    ck_assert((char *) t->data >= (char *) a.buf && (char *) t->data + 64 <= (char *) a.buf + a.size);
    for (int i = 0; i < 16; i++) mg_set_f32_1d(t, i, (float) i);
    ck_assert_float_eq(((float *) ((char *) a.buf + mg_tensor_overhead()))[5], 5.0f);   // the values are in our buffer
    mg_free(a.ctx);
    ck_assert_float_eq(((float *) ((char *) a.buf + mg_tensor_overhead()))[5], 5.0f);   // ... and still ours
    free(a.buf);
}
END_TEST

START_TEST(test_full_arena_returns_null_with_numbers) {
    const size_t size = 2 * mg_tensor_overhead() + 512;
    struct owned_arena a = owned_arena_new(size, false);
    ck_assert_ptr_nonnull(mg_new_tensor_1d(a.ctx, MG_TYPE_F32, 64));   // 256 bytes of data
    const size_t used = mg_used_mem(a.ctx);
    ck_assert_uint_eq(used, mg_tensor_overhead() + 256);

    mg_clear_error();
    ck_assert_ptr_null(mg_new_tensor_1d(a.ctx, MG_TYPE_F32, 100));    // 400 more do not fit
    const char * e = mg_last_error();
    ck_assert_msg(number_after(e, "asked for ") == (long long) (mg_tensor_overhead() + 400), "message: %s", e);
    ck_assert_msg(number_before(e, " left") == (long long) (size - used), "message: %s", e);
    ck_assert_uint_eq(mg_used_mem(a.ctx), used);   // a failed request takes nothing
    ck_assert_int_eq(mg_n_objects(a.ctx), 1);

    // What is left still serves a request that fits it exactly.
    ck_assert_ptr_nonnull(mg_new_tensor_1d(a.ctx, MG_TYPE_F32, 64));
    ck_assert_uint_eq(mg_used_mem(a.ctx), size);
    ck_assert_ptr_null(mg_context_alloc(a.ctx, MG_OBJECT_TENSOR, 1));
    e = mg_last_error();
    ck_assert_msg(number_after(e, "asked for ") == (long long) (object_header_size() + MG_MEM_ALIGN), "message: %s", e);
    ck_assert_msg(number_before(e, " left") == 0, "message: %s", e);
    owned_arena_free(&a);
}
END_TEST

// ---------------------------------------------------------------------------
// no_alloc and placing tensors later
// ---------------------------------------------------------------------------

START_TEST(test_no_alloc_costs_headers_only) {
    struct owned_arena a = owned_arena_new(6 * mg_tensor_overhead(), true);
    ck_assert(mg_get_no_alloc(a.ctx));
    struct mg_tensor * big = mg_new_tensor_2d(a.ctx, MG_TYPE_F32, 4096, 4096);   // 64 MiB if it had data
    struct mg_tensor * q   = mg_new_tensor_2d(a.ctx, MG_TYPE_Q4_0, 4096, 1024);
    struct mg_tensor * v   = mg_view_1d(a.ctx, big, 10, 40);
    ck_assert_ptr_nonnull(big);
    ck_assert_ptr_nonnull(q);
    ck_assert_ptr_nonnull(v);
    ck_assert_ptr_null(big->data);
    ck_assert_ptr_null(q->data);
    ck_assert_ptr_null(v->data);   // a view of nothing is nothing yet
    ck_assert_uint_eq(mg_nbytes(big), 4096u * 4096u * 4u);   // the shape still says how much it will need
    ck_assert_uint_eq(mg_used_mem(a.ctx), 3 * mg_tensor_overhead());
    // n headers fit in n * mg_tensor_overhead() bytes, exactly.
    for (int k = 0; k < 3; k++) ck_assert_ptr_nonnull(mg_new_tensor_1d(a.ctx, MG_TYPE_F32, 1000));
    ck_assert_uint_eq(mg_used_mem(a.ctx), a.size);
    ck_assert_ptr_null(mg_new_tensor_1d(a.ctx, MG_TYPE_F32, 1));
    owned_arena_free(&a);
}
END_TEST

static bool ranges_overlap(const struct mg_tensor * a, const struct mg_tensor * b) {
    const char * a0 = a->data, * b0 = b->data;
    return a0 < b0 + mg_nbytes(b) && b0 < a0 + mg_nbytes(a);
}

START_TEST(test_alloc_ctx_tensors_one_buffer) {
    const size_t size = 16 * mg_tensor_overhead();
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = size, .no_alloc = true});
    struct mg_tensor * t[4] = {
        mg_set_name(mg_new_tensor_2d(ctx, MG_TYPE_F32, 7, 3), "a"),     // 84 bytes
        mg_set_name(mg_new_tensor_1d(ctx, MG_TYPE_F16, 5), "b"),        // 10
        mg_set_name(mg_new_tensor_2d(ctx, MG_TYPE_Q8_0, 64, 2), "c"),   // 136
        mg_set_name(mg_new_tensor_1d(ctx, MG_TYPE_F32, 1), "d"),        // 4
    };
    struct mg_tensor * v  = mg_view_1d(ctx, t[0], 5, 8);
    struct mg_tensor * vt = mg_transpose(ctx, t[0]);
    float outside[3] = {1, 2, 3};
    struct mg_tensor * e = mg_new_tensor_1d(ctx, MG_TYPE_F32, 3);
    e->data = outside;   // already placed: must be left where it is

    struct mg_buffer * buf = mg_alloc_ctx_tensors(ctx);
    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_eq(buf->size, 96 + 16 + 144 + 16);
    for (int i = 0; i < 4; i++) {
        const char * d = t[i]->data;
        ck_assert_ptr_nonnull(d);
        ck_assert(is_aligned(d));
        ck_assert_msg(d >= (char *) buf->data && d + mg_nbytes(t[i]) <= (char *) buf->data + buf->size,
                      "%s is outside the buffer", t[i]->name);
        for (int j = 0; j < i; j++) {
            ck_assert_msg(!ranges_overlap(t[i], t[j]), "%s overlaps %s", t[i]->name, t[j]->name);
        }
    }
    ck_assert_ptr_eq(v->data, (char *) t[0]->data + 8);
    ck_assert_ptr_eq(vt->data, t[0]->data);
    ck_assert_ptr_eq(e->data, outside);
    // Writing every tensor whole and reading them all back shows no bytes are shared.
    for (int i = 0; i < 4; i++) memset(t[i]->data, 0x10 + i, mg_nbytes(t[i]));
    for (int i = 0; i < 4; i++) {
        for (size_t k = 0; k < mg_nbytes(t[i]); k++) ck_assert_int_eq(((unsigned char *) t[i]->data)[k], 0x10 + i);
    }
    mg_buffer_free(buf);
    mg_free(ctx);
}
END_TEST

START_TEST(test_walk_and_find_by_name) {
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 64 * 1024});
    ck_assert_ptr_null(mg_get_first_tensor(ctx));
    struct mg_tensor * a = mg_set_name(mg_new_tensor_1d(ctx, MG_TYPE_F32, 3), "a");
    struct mg_tensor * b = mg_set_name(mg_new_tensor_2d(ctx, MG_TYPE_F16, 2, 2), "blk.0.attn_q.weight");
    struct mg_tensor * c = mg_set_name(mg_view_1d(ctx, a, 2, 4), "c");
    ck_assert_ptr_eq(mg_get_first_tensor(ctx), a);
    ck_assert_ptr_eq(mg_get_next_tensor(ctx, a), b);
    ck_assert_ptr_eq(mg_get_next_tensor(ctx, b), c);
    ck_assert_ptr_null(mg_get_next_tensor(ctx, c));
    ck_assert_ptr_eq(mg_get_tensor(ctx, "blk.0.attn_q.weight"), b);
    ck_assert_ptr_eq(mg_get_tensor(ctx, "c"), c);
    ck_assert_ptr_eq(mg_get_tensor(ctx, "a"), a);
    ck_assert_ptr_null(mg_get_tensor(ctx, "blk.0.attn_q"));
    ck_assert_ptr_null(mg_get_tensor(ctx, "nope"));
    mg_free(ctx);
}
END_TEST

// ---------------------------------------------------------------------------
// Mapped files
// ---------------------------------------------------------------------------

START_TEST(test_mmap_gives_the_file_bytes) {
    enum { N = 10007 };
    static unsigned char bytes[N];
    uint64_t rng = 99;
    for (int i = 0; i < N; i++) bytes[i] = (unsigned char) mg_test_rand_u64(&rng);
    char path[64];
    write_temp_file(path, bytes, N);
    struct mg_mmap * m = mg_mmap_open(path);
    unlink(path);   // the mapping keeps the file alive
    ck_assert_ptr_nonnull(m);
    ck_assert_uint_eq(m->size, N);
    ck_assert_int_eq(memcmp(m->addr, bytes, N), 0);

    // A tensor whose data is the file: no copy, the floats read straight from the mapping.
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 4 * mg_tensor_overhead(), .no_alloc = true});
    struct mg_tensor * t = mg_new_tensor_1d(ctx, MG_TYPE_F32, 100);
    t->data = (char *) m->addr + 64;
    for (int i = 0; i < 100; i++) {
        float want;
        memcpy(&want, bytes + 64 + 4 * i, sizeof(want));
        ck_assert_mem_eq(&(float) {mg_get_f32_1d(t, i)}, &want, sizeof(want));
    }
    mg_free(ctx);
    mg_mmap_close(m);
}
END_TEST

START_TEST(test_mmap_missing_file_error) {
    char path[64];
    write_temp_file(path, "x", 1);
    unlink(path);   // a name that surely does not exist now
    mg_clear_error();
    ck_assert_ptr_null(mg_mmap_open(path));
    const char * e = mg_last_error();
    ck_assert_msg(strstr(e, path) != NULL, "the message does not name the file: %s", e);
    ck_assert_msg(strstr(e, strerror(ENOENT)) != NULL, "the message does not give the reason: %s", e);
}
END_TEST

START_TEST(test_mmap_directory_error) {
    char dir[] = "/tmp/mg_test_dir_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    mg_clear_error();
    struct mg_mmap * m = mg_mmap_open(dir);
    rmdir(dir);
    ck_assert_ptr_null(m);
    const char * e = mg_last_error();
    ck_assert_msg(strstr(e, dir) != NULL, "the message does not name the path: %s", e);
    ck_assert_msg(strstr(e, "regular file") != NULL || strstr(e, "directory") != NULL,
                  "the message does not say what is wrong: %s", e);
}
END_TEST

START_TEST(test_touching_mapped_pages_faults) {
    const long page = sysconf(_SC_PAGESIZE);
    const size_t n = (size_t) page * 64;
    unsigned char * bytes = malloc(n);
    for (size_t i = 0; i < n; i++) bytes[i] = (unsigned char) (i * 31 + i / 4096);
    char path[64];
    write_temp_file(path, bytes, n);
    struct mg_mmap * m = mg_mmap_open(path);
    unlink(path);
    ck_assert_ptr_nonnull(m);

    long minor0, major0, minor1, major1;
    mg_page_faults(&minor0, &major0);
    unsigned long sum = 0, want = 0;
    for (size_t i = 0; i < n; i += (size_t) page) {
        sum += ((volatile unsigned char *) m->addr)[i];   // the first touch of each page
        want += bytes[i];
    }
    mg_page_faults(&minor1, &major1);
    ck_assert_uint_eq(sum, want);
    ck_assert_msg(minor1 + major1 >= minor0 + major0 + 1, "no page fault: minor %ld -> %ld, major %ld -> %ld", minor0,
                  minor1, major0, major1);
    ck_assert_int_ge(minor1, minor0);
    ck_assert_int_ge(major1, major0);
    mg_mmap_close(m);
    free(bytes);
}
END_TEST

// ---------------------------------------------------------------------------
// Tracing
// ---------------------------------------------------------------------------

START_TEST(test_trace_alloc_lines_per_object) {
    FILE * f = tmpfile();
    ck_assert_ptr_nonnull(f);
    mg_trace_set_stream(f);
    ck_assert(mg_trace_set("alloc"));
    ck_assert(mg_trace_on(MG_TRACE_ALLOC));
    struct owned_arena a = owned_arena_new(64 * 1024, false);
    struct mg_tensor * t[3] = {
        mg_new_tensor_1d(a.ctx, MG_TYPE_F32, 5), mg_new_tensor_2d(a.ctx, MG_TYPE_F16, 3, 3),
        mg_new_tensor_1d(a.ctx, MG_TYPE_F32, 64),
    };
    ck_assert(mg_trace_set(""));   // off again: the next object must not be traced
    ck_assert(!mg_trace_on(MG_TRACE_ALLOC));
    mg_new_tensor_1d(a.ctx, MG_TYPE_F32, 1);
    mg_trace_set_stream(NULL);

    rewind(f);
    char line[512];
    int n_lines = 0, n_objects = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        n_lines++;
        ck_assert_msg(strncmp(line, "[alloc] ", 8) == 0, "not an alloc line: %s", line);
        if (strstr(line, "object") == NULL) continue;
        ck_assert_int_lt(n_objects, 3);
        // The line gives the payload's offset and size: the tensor header and its data.
        const struct mg_tensor * tk = t[n_objects];
        ck_assert_msg(number_after(line, "offset") == (long long) ((char *) tk - (char *) a.buf), "line: %s", line);
        ck_assert_msg(number_after(line, "size") == (long long) (tensor_header_size() + align16(mg_nbytes(tk))),
                      "line: %s", line);
        n_objects++;
    }
    ck_assert_int_eq(n_objects, 3);
    ck_assert_int_ge(n_lines, 3);
    fclose(f);
    owned_arena_free(&a);
}
END_TEST

START_TEST(test_trace_unknown_category_is_named) {
    mg_clear_error();
    ck_assert(!mg_trace_set("alloc,bogus"));
    ck_assert_msg(strstr(mg_last_error(), "bogus") != NULL, "message: %s", mg_last_error());
    ck_assert(!mg_trace_set("allocx"));
    ck_assert_msg(strstr(mg_last_error(), "allocx") != NULL, "message: %s", mg_last_error());
    ck_assert(mg_trace_set("all"));
    ck_assert(mg_trace_on(MG_TRACE_ALLOC));
    ck_assert(mg_trace_set(""));
    ck_assert(!mg_trace_on(MG_TRACE_ALLOC));
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("arena");

    MG_TCASE(s, "bump", test_objects_laid_end_to_end, test_owned_buffer_payloads_aligned_and_summed,
                test_context_alloc_aligned, test_user_buffer_is_used_and_kept,
                test_full_arena_returns_null_with_numbers);

    MG_TCASE(s, "no_alloc", test_no_alloc_costs_headers_only, test_alloc_ctx_tensors_one_buffer,
                test_walk_and_find_by_name);

    MG_TCASE(s, "mmap", test_mmap_gives_the_file_bytes, test_mmap_missing_file_error, test_mmap_directory_error,
                test_touching_mapped_pages_faults);

    MG_TCASE(s, "trace", test_trace_alloc_lines_per_object, test_trace_unknown_category_is_named);
    return s;
}
