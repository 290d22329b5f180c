// test_galloc_trace.c - the lesson's example, line by line: the plan of
// relu(W x + b) with W 2x2, so that every result is 2 floats (8 bytes).
//
// With alignment 4 and parent reuse off, walking the graph in order:
//   node 0  wx   = W x     alloc 8 bytes at 0      free list [8, inf)
//   node 1  wx+b = wx + b  alloc 8 bytes at 8      free list [16, inf)
//           wx has no reader left: free it         free list [0, 8) [16, inf)
//   node 2  out  = relu    best fit: the hole at 0 free list [16, inf)
//           wx+b has no reader left: free it       free list [8, inf)
//   peak 16 bytes, where one buffer per result (chapter 04) takes 24.
// With parent reuse on, wx+b is written over wx (its only reader, same size)
// and out over wx+b: one 8-byte block serves all three.
//
// The expected lines are written out here; the test captures the real ones
// with mg_trace_set_stream and keeps the planner's lines (alloc, free,
// reuse, peak), not the arena's object lines.
#define _DEFAULT_SOURCE
#include "harness.h"
#include "mg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct relu_layer {
    struct mg_context * ctx;
    struct mg_tensor *  W, * x, * b, * wx, * h, * out;
    struct mg_cgraph *  g;
};

static struct relu_layer relu_layer_new(void) {
    struct relu_layer l;
    l.ctx = mg_init((struct mg_init_params) {.mem_size = 1024 * 1024});
    ck_assert_ptr_nonnull(l.ctx);
    l.W = mg_set_name(mg_new_tensor_2d(l.ctx, MG_TYPE_F32, 2, 2), "W");
    l.x = mg_set_name(mg_new_tensor_1d(l.ctx, MG_TYPE_F32, 2), "x");
    l.b = mg_set_name(mg_new_tensor_1d(l.ctx, MG_TYPE_F32, 2), "b");
    const float w[4] = {1, -2, 3, 0.5f}, x[2] = {1, 2}, b[2] = {-1, 1};
    for (int i = 0; i < 4; i++) mg_set_f32_1d(l.W, i, w[i]);
    for (int i = 0; i < 2; i++) mg_set_f32_1d(l.x, i, x[i]);
    for (int i = 0; i < 2; i++) mg_set_f32_1d(l.b, i, b[i]);
    l.wx  = mg_set_name(mg_mul_mat(l.ctx, l.W, l.x), "wx");
    l.h   = mg_set_name(mg_add(l.ctx, l.wx, l.b), "wx+b");
    l.out = mg_set_name(mg_relu(l.ctx, l.h), "out");
    l.g   = mg_new_graph(l.ctx);
    mg_build_forward_expand(l.g, l.out);
    return l;
}

// The planner's trace lines of mg_gallocr_alloc_graph, one per line.
static char * planner_trace(struct mg_gallocr * ga, struct mg_cgraph * g) {
    FILE * f = tmpfile();
    ck_assert_ptr_nonnull(f);
    ck_assert(mg_trace_set("alloc"));
    mg_trace_set_stream(f);
    const bool ok = mg_gallocr_alloc_graph(ga, g);
    mg_trace_set_stream(NULL);
    mg_trace_set("");
    ck_assert(ok);

    static const char * kept[] = {"[alloc] alloc ", "[alloc] free ", "[alloc] reuse ", "[alloc] peak "};
    char * out = calloc(1, 8192);
    ck_assert_ptr_nonnull(out);
    char line[512];
    rewind(f);
    while (fgets(line, sizeof(line), f) != NULL) {
        for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++) {
            if (strncmp(line, kept[i], strlen(kept[i])) == 0) {
                strncat(out, line, 8192 - strlen(out) - 1);
                break;
            }
        }
    }
    fclose(f);
    return out;
}

static const char * expected_plain =
    "[alloc] alloc wx                8 bytes at      0   free: [8, inf)\n"
    "[alloc] alloc wx+b              8 bytes at      8   free: [16, inf)\n"
    "[alloc] free  wx                8 bytes at      0   free: [0, 8) [16, inf)\n"
    "[alloc] alloc out               8 bytes at      0   free: [16, inf)\n"
    "[alloc] free  wx+b              8 bytes at      8   free: [8, inf)\n"
    "[alloc] peak 16 bytes for 3 results of 24 bytes\n";

static const char * expected_reuse =
    "[alloc] alloc wx                8 bytes at      0   free: [8, inf)\n"
    "[alloc] reuse wx           for wx+b (8 bytes at 0)\n"
    "[alloc] reuse wx+b         for out (8 bytes at 0)\n"
    "[alloc] peak 8 bytes for 3 results of 24 bytes\n";

START_TEST(test_lesson_trace_parent_reuse_off) {
    struct relu_layer   l  = relu_layer_new();
    struct mg_gallocr * ga = mg_gallocr_new(4);
    mg_gallocr_set_reuse_parent(ga, false);
    char * trace = planner_trace(ga, l.g);
    ck_assert_str_eq(trace, expected_plain);
    free(trace);
    mg_gallocr_free(ga);
    mg_free(l.ctx);
}
END_TEST

START_TEST(test_lesson_trace_parent_reuse_on) {
    struct relu_layer   l  = relu_layer_new();
    struct mg_gallocr * ga = mg_gallocr_new(4);
    mg_gallocr_set_reuse_parent(ga, true);
    char * trace = planner_trace(ga, l.g);
    ck_assert_str_eq(trace, expected_reuse);
    free(trace);
    mg_gallocr_free(ga);
    mg_free(l.ctx);
}
END_TEST

START_TEST(test_parent_reuse_is_on_by_default) {
    struct relu_layer   l  = relu_layer_new();
    struct mg_gallocr * ga = mg_gallocr_new(4);
    char * trace = planner_trace(ga, l.g);
    ck_assert_str_eq(trace, expected_reuse);
    free(trace);
    mg_gallocr_free(ga);
    mg_free(l.ctx);
}
END_TEST

// The same plan read through the API instead of the trace.
START_TEST(test_lesson_offsets_and_sizes) {
    struct relu_layer   l  = relu_layer_new();
    struct mg_gallocr * ga = mg_gallocr_new(4);
    mg_gallocr_set_reuse_parent(ga, false);
    ck_assert(mg_gallocr_alloc_graph(ga, l.g));
    size_t off_wx, off_h, off_out, off;
    ck_assert(mg_gallocr_get_offset(ga, l.g, l.wx, &off_wx));
    ck_assert(mg_gallocr_get_offset(ga, l.g, l.h, &off_h));
    ck_assert(mg_gallocr_get_offset(ga, l.g, l.out, &off_out));
    ck_assert_uint_eq(off_wx, 0);
    ck_assert_uint_eq(off_h, 8);
    ck_assert_uint_eq(off_out, 0);
    ck_assert(!mg_gallocr_get_offset(ga, l.g, l.W, &off));   // leafs keep their own data
    ck_assert(!mg_gallocr_get_offset(ga, l.g, l.x, &off));
    ck_assert_uint_eq(mg_gallocr_get_buffer_size(ga), 16);
    ck_assert_uint_eq(mg_gallocr_get_sum_size(ga), 24);
    // The data pointers are the offsets in one buffer.
    ck_assert_ptr_eq((char *) l.h->data - 8, (char *) l.wx->data);
    ck_assert_ptr_eq(l.out->data, l.wx->data);
    mg_gallocr_free(ga);
    mg_free(l.ctx);
}
END_TEST

START_TEST(test_lesson_offsets_with_parent_reuse) {
    struct relu_layer   l  = relu_layer_new();
    struct mg_gallocr * ga = mg_gallocr_new(4);
    ck_assert(mg_gallocr_alloc_graph(ga, l.g));
    size_t off;
    ck_assert(mg_gallocr_get_offset(ga, l.g, l.wx, &off));
    ck_assert_uint_eq(off, 0);
    ck_assert(mg_gallocr_get_offset(ga, l.g, l.h, &off));
    ck_assert_uint_eq(off, 0);
    ck_assert(mg_gallocr_get_offset(ga, l.g, l.out, &off));
    ck_assert_uint_eq(off, 0);
    ck_assert_uint_eq(mg_gallocr_get_buffer_size(ga), 8);
    ck_assert_uint_eq(mg_gallocr_get_sum_size(ga), 24);
    mg_gallocr_free(ga);
    mg_free(l.ctx);
}
END_TEST

// W x = [1*1 - 2*2, 3*1 + 0.5*2] = [-3, 4]; + b = [-4, 5]; relu = [0, 5].
static void check_lesson_result(bool reuse) {
    struct relu_layer   l  = relu_layer_new();
    struct mg_gallocr * ga = mg_gallocr_new(4);
    mg_gallocr_set_reuse_parent(ga, reuse);
    ck_assert(mg_gallocr_alloc_graph(ga, l.g));
    mg_graph_compute_with_ctx(l.ctx, l.g, 1);
    ck_assert_float_eq(mg_get_f32_1d(l.out, 0), 0.0f);
    ck_assert_float_eq(mg_get_f32_1d(l.out, 1), 5.0f);
    // A second x through the same plan: W [2, -1] = [4, 5.5]; + b = [3, 6.5].
    mg_set_f32_1d(l.x, 0, 2.0f);
    mg_set_f32_1d(l.x, 1, -1.0f);
    mg_graph_compute_with_ctx(l.ctx, l.g, 1);
    ck_assert_float_eq(mg_get_f32_1d(l.out, 0), 3.0f);
    ck_assert_float_eq(mg_get_f32_1d(l.out, 1), 6.5f);
    mg_gallocr_free(ga);
    mg_free(l.ctx);
}

START_TEST(test_lesson_result_parent_reuse_off) {
    check_lesson_result(false);
}
END_TEST

START_TEST(test_lesson_result_parent_reuse_on) {
    check_lesson_result(true);
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("galloc_trace");
    MG_TCASE(s, "lesson", test_lesson_trace_parent_reuse_off, test_lesson_trace_parent_reuse_on,
                test_parent_reuse_is_on_by_default, test_lesson_offsets_and_sizes,
                test_lesson_offsets_with_parent_reuse, test_lesson_result_parent_reuse_off,
                test_lesson_result_parent_reuse_on);
    return s;
}
