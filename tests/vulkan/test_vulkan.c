// test_vulkan.c - the Vulkan backend (full/vulkan/backend_vulkan.c and
// ops_vulkan.c), built and run only by make VULKAN=1 test-vulkan, on
// whatever Vulkan driver the machine has (Mesa's lavapipe in CI): the device
// in the registry, device memory through the staging buffer, copies across
// memories, ADD and MUL computed by shaders against the same arithmetic done
// here in plain C (IEEE addition and multiplication are correctly rounded in
// Vulkan too, so the results must be equal, not close) and a recorded graph
// submitted again; every other shader against the CPU backend on odd shapes
// (the quantized matrix products also against dequantized weights and the
// CPU's scalar dot products, and their activation quantizers byte for byte
// against the CPU's), run twice for the same bits; a graph the scheduler
// splits between the device and the CPU; and -ngl through the command line.
#define _POSIX_C_SOURCE 200809L   // access, mkdir
#include "harness.h"
#include "arena.h"
#include "backend.h"
#include "backend_sched.h"
#include "ops.h"
#include "quants.h"
#include "vec.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

// The first Vulkan device; the test fails (it does not skip) without one:
// make test-vulkan is asked for on a machine that has a driver.
static mg_backend_dev_t vulkan_device(void) {
    mg_backend_dev_t dev = mg_backend_dev_by_name("Vulkan0");
    ck_assert_msg(dev != NULL, "no Vulkan device: %s (install mesa-vulkan-drivers for lavapipe)",
                  mg_backend_vulkan_status());
    return dev;
}

START_TEST(test_device_in_the_registry) {
    mg_backend_dev_t dev = vulkan_device();
    ck_assert_int_eq(mg_backend_dev_type(dev), MG_BACKEND_DEVICE_TYPE_GPU);
    ck_assert(strlen(mg_backend_dev_description(dev)) > 0);
    size_t free_bytes = 0, total = 0;
    mg_backend_dev_memory(dev, &free_bytes, &total);
    ck_assert_uint_gt(total, 0);
    // The CPU is still last, after every Vulkan device.
    ck_assert_ptr_eq(mg_backend_dev_get(mg_backend_dev_count() - 1), mg_backend_cpu_device());
    mg_backend_buffer_type_t buft = mg_backend_dev_buffer_type(dev);
    ck_assert(!mg_backend_buft_is_host(buft));
    ck_assert(mg_backend_dev_supports_buft(dev, buft));
    ck_assert(!mg_backend_dev_supports_buft(dev, mg_backend_cpu_buffer_type()));
    ck_assert(!mg_backend_dev_supports_buft(mg_backend_cpu_device(), buft));
}
END_TEST

START_TEST(test_device_memory_round_trip) {
    mg_backend_buffer_t buf = mg_backend_buft_alloc_buffer(mg_backend_dev_buffer_type(vulkan_device()), 4096);
    ck_assert_msg(buf != NULL, "%s", mg_last_error());
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 4 * mg_tensor_overhead(), .no_alloc = true});
    struct mg_tensor *  t   = mg_new_tensor_1d(ctx, MG_TYPE_F32, 256);
    char *              base = mg_backend_buffer_get_base(buf);
    ck_assert(mg_backend_tensor_alloc(buf, t, base + 1024));
    float in[256], out[256];
    for (int i = 0; i < 256; i++) in[i] = (float) i * 0.5f - 17.0f;
    mg_backend_tensor_set(t, in, 0, sizeof in);
    memset(out, 0, sizeof out);
    mg_backend_tensor_get(t, out, 0, sizeof out);
    ck_assert_mem_eq(in, out, sizeof in);
    mg_backend_tensor_get(t, out, 10 * sizeof(float), sizeof(float));   // one float, at an offset
    ck_assert_float_eq(out[0], in[10]);

    mg_backend_buffer_clear(buf, 0x5a);
    unsigned char bytes[1024];
    mg_backend_tensor_get(t, bytes, 0, sizeof bytes);
    for (size_t i = 0; i < sizeof bytes; i++) ck_assert_uint_eq(bytes[i], 0x5a);
    mg_free(ctx);
    mg_backend_buffer_free(buf);
}
END_TEST

// Host -> device -> device -> host: every path of mg_backend_tensor_copy.
START_TEST(test_copies_across_memories) {
    mg_backend_buffer_type_t vk  = mg_backend_dev_buffer_type(vulkan_device());
    mg_backend_buffer_t      d1  = mg_backend_buft_alloc_buffer(vk, 256);
    mg_backend_buffer_t      d2  = mg_backend_buft_alloc_buffer(vk, 256);
    mg_backend_buffer_t      h   = mg_backend_buft_alloc_buffer(mg_backend_cpu_buffer_type(), 512);
    struct mg_context *      ctx = mg_init((struct mg_init_params) {.mem_size = 8 * mg_tensor_overhead(), .no_alloc = true});
    struct mg_tensor * src = mg_new_tensor_1d(ctx, MG_TYPE_F32, 32), * a = mg_new_tensor_1d(ctx, MG_TYPE_F32, 32);
    struct mg_tensor * b = mg_new_tensor_1d(ctx, MG_TYPE_F32, 32), * back = mg_new_tensor_1d(ctx, MG_TYPE_F32, 32);
    ck_assert(mg_backend_tensor_alloc(h, src, mg_backend_buffer_get_base(h)));
    ck_assert(mg_backend_tensor_alloc(h, back, (char *) mg_backend_buffer_get_base(h) + 256));
    ck_assert(mg_backend_tensor_alloc(d1, a, mg_backend_buffer_get_base(d1)));
    ck_assert(mg_backend_tensor_alloc(d2, b, mg_backend_buffer_get_base(d2)));
    float in[32];
    for (int i = 0; i < 32; i++) in[i] = 1.0f / (float) (i + 1);
    mg_backend_tensor_set(src, in, 0, sizeof in);
    mg_backend_tensor_copy(src, a);
    mg_backend_tensor_copy(a, b);
    mg_backend_tensor_copy(b, back);
    ck_assert_mem_eq(back->data, in, sizeof in);
    mg_free(ctx);
    mg_backend_buffer_free(d1);
    mg_backend_buffer_free(d2);
    mg_backend_buffer_free(h);
}
END_TEST

// s = a + b, p = s * r (r one row, repeated over the rows of s), on the device.
START_TEST(test_add_and_mul_on_the_device) {
    mg_backend_dev_t    dev = vulkan_device();
    struct mg_context * ctx = mg_init((struct mg_init_params) {
        .mem_size = 16 * mg_tensor_overhead() + mg_graph_overhead_custom(16), .no_alloc = true});
    struct mg_tensor * a = mg_new_tensor_2d(ctx, MG_TYPE_F32, 300, 7);   // more than one group of 256
    struct mg_tensor * b = mg_new_tensor_2d(ctx, MG_TYPE_F32, 300, 7);
    struct mg_tensor * r = mg_new_tensor_2d(ctx, MG_TYPE_F32, 300, 1);
    struct mg_tensor * s = mg_add(ctx, a, b);
    struct mg_tensor * p = mg_mul(ctx, s, r);
    struct mg_cgraph * g = mg_new_graph_custom(ctx, 16);
    mg_build_forward_expand(g, p);

    mg_backend_buffer_t buf  = mg_backend_buft_alloc_buffer(mg_backend_dev_buffer_type(dev), 5 * 8448);
    char *              base = mg_backend_buffer_get_base(buf);
    struct mg_tensor *  all[] = {a, b, r, s, p};
    for (int i = 0; i < 5; i++) ck_assert(mg_backend_tensor_alloc(buf, all[i], base + i * 8448));

    static float av[2100], bv[2100], rv[300], pv[2100];
    for (int i = 0; i < 2100; i++) av[i] = (float) (i % 97) * 0.37f - 9.0f, bv[i] = 1.0f / (float) (i + 3);
    for (int i = 0; i < 300; i++) rv[i] = (float) (i % 13) - 6.5f;
    mg_backend_tensor_set(a, av, 0, sizeof av);
    mg_backend_tensor_set(b, bv, 0, sizeof bv);
    mg_backend_tensor_set(r, rv, 0, sizeof rv);

    mg_backend_t be = mg_backend_dev_init(dev);
    ck_assert_msg(be != NULL, "%s", mg_last_error());
    ck_assert_str_eq(mg_backend_name(be), "Vulkan0");
    ck_assert(mg_backend_supports_op(be, s) && mg_backend_supports_op(be, p));
    // Computed twice, new inputs the second time: recorded once, then the
    // same command buffer submitted again, which must see the new values.
    int64_t recorded0, reused0, recorded, reused;
    mg_backend_vulkan_graph_counts(&recorded0, &reused0);
    for (int run = 0; run < 2; run++) {
        if (run == 1) {
            for (int i = 0; i < 2100; i++) av[i] = (float) (i % 31) * -0.5f + 2.0f;
            mg_backend_tensor_set(a, av, 0, sizeof av);
        }
        ck_assert_msg(mg_backend_graph_compute(be, g), "%s", mg_last_error());
        mg_backend_tensor_get(p, pv, 0, sizeof pv);
        for (int i = 0; i < 2100; i++) {
            const float sum = av[i] + bv[i];
            ck_assert_msg(pv[i] == sum * rv[i % 300], "run %d: p[%d] = %a, not %a", run, i, pv[i], sum * rv[i % 300]);
        }
    }
    mg_backend_vulkan_graph_counts(&recorded, &reused);
    ck_assert_int_eq(recorded - recorded0, 1);
    ck_assert_int_eq(reused - reused0, 1);
    mg_backend_free(be);
    mg_backend_buffer_free(buf);
    mg_free(ctx);
}
END_TEST

// One op on the device and on the CPU, from the same inputs: every tensor of
// the graph in one buffer of the backend's type, inputs set, graph computed,
// the result read back. make_op builds the node from the leafs in[0..n_in),
// F32 unless types says otherwise (types NULL: all F32; values[i] then points
// at that type's elements). in_place: the result over in[0]'s bytes, as the
// graph allocator places an op of ggml_op_can_inplace's list whose input dies.
typedef struct mg_tensor * (*make_op_fn)(struct mg_context * ctx, struct mg_tensor ** in);

static void run_op(mg_backend_dev_t dev, make_op_fn make_op, int n_in, const enum mg_type * types,
                   const int64_t ne[][4], float ** values, float * out, size_t out_n, bool in_place) {
    struct mg_context * ctx = mg_init((struct mg_init_params) {
        .mem_size = 16 * mg_tensor_overhead() + mg_graph_overhead_custom(16), .no_alloc = true});
    struct mg_tensor * in[4];
    for (int i = 0; i < n_in; i++) in[i] = mg_new_tensor(ctx, types != NULL ? types[i] : MG_TYPE_F32, 4, ne[i]);
    struct mg_tensor * t = make_op(ctx, in);
    struct mg_cgraph * g = mg_new_graph_custom(ctx, 16);
    mg_build_forward_expand(g, t);
    ck_assert_uint_eq(mg_nbytes(t), out_n * sizeof(float));

    size_t total = 0;
    for (int i = 0; i < n_in; i++) total += (mg_nbytes(in[i]) + 255) / 256 * 256;
    total += (mg_nbytes(t) + 255) / 256 * 256;
    mg_backend_buffer_t buf  = mg_backend_buft_alloc_buffer(mg_backend_dev_buffer_type(dev), total);
    char *              base = mg_backend_buffer_get_base(buf);
    size_t              used = 0;
    for (int i = 0; i <= n_in; i++) {
        struct mg_tensor * x = i < n_in ? in[i] : t;
        ck_assert(mg_backend_tensor_alloc(buf, x, i == n_in && in_place ? (char *) in[0]->data : base + used));
        used += (mg_nbytes(x) + 255) / 256 * 256;
        if (i < n_in) mg_backend_tensor_set(x, values[i], 0, mg_nbytes(x));
    }
    for (int i = 0; i < g->n_nodes; i++) {   // views read their source's bytes (ggml_backend_view_init)
        struct mg_tensor * v = g->nodes[i];
        if (v->view_src != NULL && v->data == NULL) {
            v->data   = (char *) v->view_src->data + v->view_offs;
            v->buffer = v->view_src->buffer;
        }
    }
    mg_backend_t be = mg_backend_dev_init(dev);
    ck_assert_msg(mg_backend_supports_op(be, t), "%s does not support %s", mg_backend_dev_name(dev), mg_op_name(t->op));
    ck_assert_msg(mg_backend_graph_compute(be, g), "%s", mg_last_error());
    mg_backend_tensor_get(t, out, 0, mg_nbytes(t));
    mg_backend_free(be);
    mg_backend_buffer_free(buf);
    mg_free(ctx);
}

// on_dev[i] within rel of on_cpu[i] for every i, with one ck_assert naming
// the first element off (a call per element costs seconds on 2^24 of them).
static void expect_near(const float * on_dev, const float * on_cpu, size_t n, float rel) {
    size_t bad = n;
    for (size_t i = 0; i < n && bad == n; i++) {
        if (!(fabsf(on_dev[i] - on_cpu[i]) <= rel * (1.0f + fabsf(on_cpu[i])))) bad = i;
    }
    ck_assert_msg(bad == n, "[%zu] device %.9g, CPU %.9g", bad, on_dev[bad < n ? bad : 0], on_cpu[bad < n ? bad : 0]);
}

// The device's result within rel of the CPU's, element by element, and the
// same bits when the device runs it again (and when it runs it in place).
static void expect_typed_like_cpu(make_op_fn make_op, int n_in, const enum mg_type * types, const int64_t ne[][4],
                                  float ** values, size_t out_n, float rel, bool in_place) {
    float * on_dev = malloc(out_n * sizeof(float)), * again = malloc(out_n * sizeof(float));
    float * on_cpu = malloc(out_n * sizeof(float));
    run_op(vulkan_device(), make_op, n_in, types, ne, values, on_dev, out_n, false);
    run_op(vulkan_device(), make_op, n_in, types, ne, values, again, out_n, in_place);
    run_op(mg_backend_cpu_device(), make_op, n_in, types, ne, values, on_cpu, out_n, false);
    expect_near(on_dev, on_cpu, out_n, rel);
    ck_assert_mem_eq(on_dev, again, out_n * sizeof(float));
    free(on_dev), free(again), free(on_cpu);
}

static void expect_like_cpu(make_op_fn make_op, int n_in, const int64_t ne[][4], float ** values, size_t out_n,
                            float rel) {
    expect_typed_like_cpu(make_op, n_in, NULL, ne, values, out_n, rel, false);
}

static float * random_values(size_t n, uint64_t seed) {
    float * v = malloc(n * sizeof(float));
    mg_test_fill_uniform(v, n, &seed, -2.0f, 2.0f);
    return v;
}

static struct mg_tensor * make_silu(struct mg_context * ctx, struct mg_tensor ** in) { return mg_silu(ctx, in[0]); }
static struct mg_tensor * make_rms_norm(struct mg_context * ctx, struct mg_tensor ** in) {
    return mg_rms_norm(ctx, in[0], 1e-6f);
}
static struct mg_tensor * make_mul_mat(struct mg_context * ctx, struct mg_tensor ** in) {
    return mg_mul_mat(ctx, in[0], in[1]);
}

START_TEST(test_silu_rms_norm_mul_mat_like_the_cpu) {
    const int64_t ne_x[1][4] = {{1000, 3, 2, 1}};   // rows longer than a workgroup, several rows
    float *       x[1]       = {random_values(6000, 1)};
    expect_like_cpu(make_silu, 1, ne_x, x, 6000, 1e-6f);
    expect_like_cpu(make_rms_norm, 1, ne_x, x, 6000, 1e-5f);
    // a {K=96, M=40, 2 matrices} times b {K=96, N=5, 4 matrices}: each of a's serves two of b's.
    const int64_t ne_ab[2][4] = {{96, 40, 2, 1}, {96, 5, 4, 1}};
    float *       ab[2]       = {random_values(96 * 40 * 2, 2), random_values(96 * 5 * 4, 3)};
    expect_like_cpu(make_mul_mat, 2, ne_ab, ab, 40 * 5 * 4, 1e-5f);
    free(x[0]);
    free(ab[0]);
    free(ab[1]);
}
END_TEST

// The attention's other ops, on odd shapes: SWIGLU; ROPE in both pair
// layouts, positions up to 200, 32 of 48 elements turned (the rest copied),
// also in place (the graph allocator's choice when its input dies); SOFT_MAX
// of scaled scores plus a causal mask whose -inf entries must give exact
// zeros (in place too), rows of 37 and of 300 (more than a workgroup); CONT
// of a permuted view, which must copy every float exactly.
static struct mg_tensor * make_swiglu(struct mg_context * ctx, struct mg_tensor ** in) {
    return mg_swiglu(ctx, in[0], in[1]);
}
static struct mg_tensor * make_rope_neox(struct mg_context * ctx, struct mg_tensor ** in) {
    return mg_rope(ctx, in[0], in[1], 32, MG_ROPE_NEOX, 1000000.0f, 1.0f);
}
static struct mg_tensor * make_rope_normal(struct mg_context * ctx, struct mg_tensor ** in) {
    return mg_rope(ctx, in[0], in[1], 32, MG_ROPE_NORMAL, 10000.0f, 0.5f);
}
static struct mg_tensor * make_soft_max(struct mg_context * ctx, struct mg_tensor ** in) {
    return mg_soft_max_ext(ctx, in[0], in[1], 0.125f);
}
static struct mg_tensor * make_soft_max_plain(struct mg_context * ctx, struct mg_tensor ** in) {
    return mg_soft_max(ctx, in[0]);
}
static struct mg_tensor * make_cont(struct mg_context * ctx, struct mg_tensor ** in) {
    return mg_cont(ctx, mg_permute(ctx, in[0], 0, 2, 1, 3));
}

START_TEST(test_swiglu_rope_soft_max_cont_like_the_cpu) {
    const int64_t ne_ab[2][4] = {{1000, 3, 2, 1}, {1000, 3, 2, 1}};
    float *       ab[2]       = {random_values(6000, 4), random_values(6000, 5)};
    expect_like_cpu(make_swiglu, 2, ne_ab, ab, 6000, 2e-6f);

    const enum mg_type rope_types[2] = {MG_TYPE_F32, MG_TYPE_I32};
    const int64_t      ne_rope[2][4] = {{48, 3, 5, 1}, {5, 1, 1, 1}};
    int32_t            pos[5]        = {0, 1, 7, 63, 200};
    float *            rope_in[2]    = {random_values(48 * 3 * 5, 6), (float *) pos};
    expect_typed_like_cpu(make_rope_neox, 2, rope_types, ne_rope, rope_in, 48 * 3 * 5, 1e-5f, true);
    expect_typed_like_cpu(make_rope_normal, 2, rope_types, ne_rope, rope_in, 48 * 3 * 5, 1e-5f, true);

    // Scores {n_kv 37, T 5, H 3}; mask row t allows positions 0 .. 32 + t.
    const int64_t ne_sm[2][4] = {{37, 5, 3, 1}, {37, 8, 1, 1}};
    float *       mask        = malloc(37 * 8 * sizeof(float));
    for (int t = 0; t < 8; t++) {
        for (int k = 0; k < 37; k++) mask[t * 37 + k] = k <= 32 + t ? 0.0f : -INFINITY;
    }
    float * sm[2] = {random_values(37 * 5 * 3, 7), mask};
    for (size_t i = 0; i < 37 * 5 * 3; i++) sm[0][i] *= 20.0f;   // scores as large as attention's
    expect_typed_like_cpu(make_soft_max, 2, NULL, ne_sm, sm, 37 * 5 * 3, 1e-6f, true);
    const int64_t ne_long[1][4] = {{300, 2, 2, 1}};
    float *       sm_long[1]    = {random_values(1200, 8)};
    expect_like_cpu(make_soft_max_plain, 1, ne_long, sm_long, 1200, 1e-6f);

    const int64_t ne_c[1][4] = {{7, 5, 3, 2}};
    float *       c[1]       = {random_values(210, 9)};
    expect_like_cpu(make_cont, 1, ne_c, c, 210, 0.0f);
    free(ab[0]), free(ab[1]), free(rope_in[0]), free(sm[0]), free(mask), free(sm_long[0]), free(c[0]);
}
END_TEST

// One device run (not two, as above: these are large) against the CPU's.
static void expect_once_like_cpu(make_op_fn make_op, const int64_t ne[][4], float ** values, size_t out_n, float rel) {
    float * on_dev = malloc(out_n * sizeof(float)), * on_cpu = malloc(out_n * sizeof(float));
    run_op(vulkan_device(), make_op, 1, NULL, ne, values, on_dev, out_n, false);
    run_op(mg_backend_cpu_device(), make_op, 1, NULL, ne, values, on_cpu, out_n, false);
    expect_near(on_dev, on_cpu, out_n, rel);
    free(on_dev), free(on_cpu);
}

// Dispatches of more than 65535 workgroups, the most a dimension is sure
// to take, spread over x and y (ops_vulkan.c: spread_groups; index.glsl):
// SILU of 65536 * 256 + 300 floats, an invocation per element, and RMS_NORM
// and SOFT_MAX of 70,000 rows, a workgroup per row. Every element, the last
// groups' included, must be the CPU's (a group the grid's numbering missed
// would leave its elements unwritten).
START_TEST(test_dispatches_beyond_65535_groups) {
    const int64_t n_big        = 65536 * 256 + 300;
    const int64_t ne_big[1][4] = {{n_big, 1, 1, 1}};
    float *       big[1]       = {random_values((size_t) n_big, 10)};
    expect_once_like_cpu(make_silu, ne_big, big, (size_t) n_big, 1e-6f);
    const int64_t ne_rows[1][4] = {{8, 70000, 1, 1}};
    float *       rows[1]       = {random_values(8 * 70000, 11)};
    expect_once_like_cpu(make_rms_norm, ne_rows, rows, 8 * 70000, 1e-5f);
    expect_once_like_cpu(make_soft_max_plain, ne_rows, rows, 8 * 70000, 1e-6f);
    free(big[0]), free(rows[0]);
}
END_TEST

// SET_ROWS of src {ne0, n1, n2} into rows idx[] of an F32 or F16 dst
// {ne0, rows}, both in the device's memory (as a cache on the device would
// be), against the CPU's bytes: equal, F16 rounding included. dst starts
// filled with a pattern, so the rows not written must keep it.
static void expect_set_rows_like_cpu(enum mg_type dst_type, int64_t ne0, int64_t n1, int64_t n2, int64_t rows,
                                     const int32_t * idx, const float * src_values) {
    unsigned char * got[2] = {NULL, NULL};
    size_t          bytes  = 0;
    for (int run = 0; run < 2; run++) {
        mg_backend_dev_t    dev = run == 0 ? vulkan_device() : mg_backend_cpu_device();
        struct mg_context * ctx = mg_init((struct mg_init_params) {
            .mem_size = 8 * mg_tensor_overhead() + mg_graph_overhead_custom(8), .no_alloc = true});
        struct mg_tensor * dst = mg_new_tensor_2d(ctx, dst_type, ne0, rows);
        struct mg_tensor * src = mg_new_tensor_3d(ctx, MG_TYPE_F32, ne0, n1, n2);
        struct mg_tensor * ids = mg_new_tensor_1d(ctx, MG_TYPE_I32, n1 * n2);
        struct mg_tensor * t   = mg_set_rows(ctx, dst, src, ids);
        struct mg_cgraph * g   = mg_new_graph_custom(ctx, 8);
        mg_build_forward_expand(g, t);
        mg_backend_buffer_t buf  = mg_backend_buft_alloc_buffer(mg_backend_dev_buffer_type(dev), 3 * 4096);
        char *              base = mg_backend_buffer_get_base(buf);
        ck_assert(mg_nbytes(dst) <= 4096 && mg_nbytes(src) <= 4096);
        ck_assert(mg_backend_tensor_alloc(buf, dst, base) && mg_backend_tensor_alloc(buf, src, base + 4096) &&
                  mg_backend_tensor_alloc(buf, ids, base + 8192));
        t->data = dst->data, t->buffer = dst->buffer;   // the result is dst's bytes (ggml_backend_view_init)
        bytes   = mg_nbytes(dst);
        got[run] = malloc(bytes);
        for (size_t i = 0; i < bytes; i++) got[run][i] = (unsigned char) (i * 37 + 11);
        mg_backend_tensor_set(dst, got[run], 0, bytes);
        mg_backend_tensor_set(src, src_values, 0, mg_nbytes(src));
        mg_backend_tensor_set(ids, idx, 0, mg_nbytes(ids));
        mg_backend_t be = mg_backend_dev_init(dev);
        ck_assert_msg(mg_backend_supports_op(be, t), "%s: SET_ROWS into %s", mg_backend_dev_name(dev),
                      mg_type_name(dst_type));
        ck_assert_msg(mg_backend_graph_compute(be, g), "%s", mg_last_error());
        mg_backend_tensor_get(dst, got[run], 0, bytes);
        mg_backend_free(be);
        mg_backend_buffer_free(buf);
        mg_free(ctx);
    }
    ck_assert_mem_eq(got[0], got[1], bytes);
    free(got[0]), free(got[1]);
}

// K's store (rows of 6 values, a src of 2 x 3 rows), V's (rows of one F16:
// neighbouring halves of a word written by different invocations), and
// values that round to F16 in every way: ties, subnormals, overflow to inf.
START_TEST(test_set_rows_like_the_cpu) {
    float * k = random_values(36, 11);
    k[0] = 65520.0f, k[1] = -1e-6f, k[2] = 1.0f + 1.0f / 2048.0f, k[3] = 3e-8f, k[4] = 65504.0f, k[5] = 1e-5f;
    const int32_t k_idx[6] = {8, 0, 3, 5, 1, 6};
    expect_set_rows_like_cpu(MG_TYPE_F16, 6, 3, 2, 9, k_idx, k);
    expect_set_rows_like_cpu(MG_TYPE_F32, 6, 3, 2, 9, k_idx, k);
    float * v = random_values(33, 12);
    int32_t v_idx[33];
    for (int i = 0; i < 33; i++) v_idx[i] = (i * 7) % 40;   // scattered over 40 rows, 7 untouched
    expect_set_rows_like_cpu(MG_TYPE_F16, 1, 33, 1, 40, v_idx, v);
    free(k), free(v);
}
END_TEST

// GET_ROWS of an F32, F16, Q8_0 or Q4_0 table, rows picked out of order and
// twice: the same floats as the CPU's (both decode with one multiplication).
static struct mg_tensor * make_get_rows(struct mg_context * ctx, struct mg_tensor ** in) {
    return mg_get_rows(ctx, in[0], in[1]);
}

static void expect_get_rows_like_cpu(enum mg_type type, int64_t ne0, int64_t rows) {
    const enum mg_type types[2] = {type, MG_TYPE_I32};
    const int64_t      ne[2][4] = {{ne0, rows, 1, 1}, {5, 1, 1, 1}};
    int32_t            ids[5]   = {(int32_t) rows - 1, 0, 2, 0, 1};
    float *            table    = random_values((size_t) (ne0 * rows), 13);
    void *             packed   = malloc((size_t) (ne0 * rows) * sizeof(float));
    if (type == MG_TYPE_Q8_0) mg_quantize_row_q8_0_ref(table, packed, ne0 * rows);
    else if (type == MG_TYPE_Q4_0) mg_quantize_row_q4_0_ref(table, packed, ne0 * rows);
    else if (type == MG_TYPE_F16) mg_fp32_to_fp16_row(table, packed, ne0 * rows);
    else memcpy(packed, table, (size_t) (ne0 * rows) * sizeof(float));
    float * in[2] = {packed, (float *) ids};
    expect_typed_like_cpu(make_get_rows, 2, types, ne, in, (size_t) (ne0 * 5), 0.0f, false);
    free(table), free(packed);
}

START_TEST(test_get_rows_like_the_cpu) {
    expect_get_rows_like_cpu(MG_TYPE_F32, 37, 6);
    expect_get_rows_like_cpu(MG_TYPE_F16, 37, 6);    // rows of 74 bytes: off a word
    expect_get_rows_like_cpu(MG_TYPE_Q8_0, 96, 7);   // rows of 3 blocks, 102 bytes
    expect_get_rows_like_cpu(MG_TYPE_Q4_0, 64, 5);
}
END_TEST

// One element of a quantized product against the CPU's scalar dot product
// of weight row ra (of aq) and activation row rb (of bq, quantized by the
// CPU): vec.c's mg_vec_dot_*, the float steps the shader copies. Q4_K's
// are multiplies and adds, which Vulkan rounds correctly, so its bits are
// the CPU's; the others fuse some steps, fmaf on the CPU, fma() in GLSL,
// which Vulkan lets a driver do in two roundings (lavapipe's LLVM fuses
// some and not others): there, within 1e-6 of mag, the sum of |a_k b_k|.
static void expect_like_cpu_dot(enum mg_type type, int64_t K, const void * aq, const void * bq, int64_t ra, int64_t rb,
                                float got, double mag) {
    const bool    q8_0 = type == MG_TYPE_Q8_0 || type == MG_TYPE_Q4_0;
    mg_vec_dot_fn dot  = type == MG_TYPE_Q8_0 ? mg_vec_dot_q8_0_q8_0
                       : type == MG_TYPE_Q4_0 ? mg_vec_dot_q4_0_q8_0
                       : type == MG_TYPE_Q4_K ? mg_vec_dot_q4_K_q8_K
                                              : mg_vec_dot_q6_K_q8_K;
    float ref;
    dot(K, &ref, (const char *) aq + mg_row_size(type, K) * (size_t) ra,
        (const char *) bq + mg_row_size(q8_0 ? MG_TYPE_Q8_0 : MG_TYPE_Q8_K, K) * (size_t) rb);
    if (type == MG_TYPE_Q4_K) {
        ck_assert_msg(got == ref, "q4_K K %lld rows %lld, %lld: %a, the CPU's dot %a", (long long) K, (long long) ra,
                      (long long) rb, got, ref);
    } else {
        ck_assert_msg(fabs(got - ref) <= 1e-6 * mag, "%s K %lld rows %lld, %lld: %.9g, the CPU's dot %.9g",
                      mg_type_name(type), (long long) K, (long long) ra, (long long) rb, got, ref);
    }
}

// Weights of a type (F16, Q8_0, Q4_0, Q4_K, Q6_K) a {K, M, 2} times F32 b
// {K, N, 4} on the device, against a reference made here: a's rows
// dequantized, b's rows quantized as the CPU quantizes activations for that
// type and dequantized again (Q8_0 for Q8_0 and Q4_0 weights, Q8_K for the
// K-quants; F16 weights: b as it is), then an F32 product summed in double.
// The shaders do the same arithmetic (integer products of codes, exact, times
// the scales), only summed in float in another order, so each element agrees
// to 1e-5 of the sum of |a_k b_k|: K float additions of rounding 6e-8 each
// could exceed that only in the worst case (K > 166, all errors one way);
// random signs leave about sqrt(K) of them, under 2e-6 for K = 768. (Against
// b not rounded, the quantized types are ~1e-2 off: what the rounding of the
// activations costs.) For the quantized types, also each element against
// the CPU's scalar dot product of the same blocks (expect_like_cpu_dot), and
// the CPU backend's own mul_mat on the same inputs, whose SIMD kernels add
// their floats in lanes of their own: within 1e-4.
static void expect_like_dequantized(enum mg_type type, int64_t K, int64_t M, int64_t N, uint64_t seed) {
    mg_backend_dev_t    dev = vulkan_device();
    struct mg_context * ctx = mg_init((struct mg_init_params) {
        .mem_size = 8 * mg_tensor_overhead() + mg_graph_overhead_custom(8), .no_alloc = true});
    struct mg_tensor * a = mg_new_tensor_3d(ctx, type, K, M, 2);
    struct mg_tensor * b = mg_new_tensor_3d(ctx, MG_TYPE_F32, K, N, 4);
    struct mg_tensor * t = mg_mul_mat(ctx, a, b);
    struct mg_cgraph * g = mg_new_graph_custom(ctx, 8);
    mg_build_forward_expand(g, t);
    const size_t        na = (mg_nbytes(a) + 255) / 256 * 256, nb = (mg_nbytes(b) + 255) / 256 * 256;
    mg_backend_buffer_t buf  = mg_backend_buft_alloc_buffer(mg_backend_dev_buffer_type(dev), na + nb + mg_nbytes(t));
    char *              base = mg_backend_buffer_get_base(buf);
    ck_assert(mg_backend_tensor_alloc(buf, a, base) && mg_backend_tensor_alloc(buf, b, base + na) &&
              mg_backend_tensor_alloc(buf, t, base + na + nb));

    float * av = random_values((size_t) (K * M * 2), seed), * bv = random_values((size_t) (K * N * 4), seed + 1);
    void *  aq = malloc(mg_nbytes(a));
    float * ad = malloc((size_t) (K * M * 2) * sizeof(float)), * out = malloc(mg_nbytes(t));
    float * bd = malloc((size_t) (K * N * 4) * sizeof(float));   // b as the product sees it
    void *  bq = malloc((size_t) (K * N * 4) * sizeof(float));   // more than Q8_0 or Q8_K needs
    if (type == MG_TYPE_Q8_0 || type == MG_TYPE_Q4_0) {
        mg_quantize_row_q8_0(bv, bq, K * N * 4);
        mg_dequantize_row_q8_0(bq, bd, K * N * 4);
    } else if (type == MG_TYPE_Q4_K || type == MG_TYPE_Q6_K) {
        mg_quantize_row_q8_K(bv, bq, K * N * 4);
        mg_dequantize_row_q8_K(bq, bd, K * N * 4);
    } else {
        memcpy(bd, bv, (size_t) (K * N * 4) * sizeof(float));
    }
    if (type == MG_TYPE_Q8_0) {
        mg_quantize_row_q8_0_ref(av, aq, K * M * 2);
        mg_dequantize_row_q8_0(aq, ad, K * M * 2);
    } else if (type == MG_TYPE_Q4_0) {
        mg_quantize_row_q4_0_ref(av, aq, K * M * 2);
        mg_dequantize_row_q4_0(aq, ad, K * M * 2);
    } else if (type == MG_TYPE_Q4_K) {
        mg_quantize_row_q4_K_ref(av, aq, K * M * 2);
        mg_dequantize_row_q4_K(aq, ad, K * M * 2);
    } else if (type == MG_TYPE_Q6_K) {
        mg_quantize_row_q6_K_ref(av, aq, K * M * 2);
        mg_dequantize_row_q6_K(aq, ad, K * M * 2);
    } else {
        mg_fp32_to_fp16_row(av, aq, K * M * 2);
        mg_fp16_to_fp32_row(aq, ad, K * M * 2);
    }
    mg_backend_tensor_set(a, aq, 0, mg_nbytes(a));
    mg_backend_tensor_set(b, bv, 0, mg_nbytes(b));
    mg_backend_t be = mg_backend_dev_init(dev);
    ck_assert(mg_backend_supports_op(be, t));
    ck_assert_msg(mg_backend_graph_compute(be, g), "%s", mg_last_error());
    mg_backend_tensor_get(t, out, 0, mg_nbytes(t));
    for (int64_t i2 = 0; i2 < 4; i2++) {
        for (int64_t n = 0; n < N; n++) {
            for (int64_t m = 0; m < M; m++) {
                const float * ar = ad + ((i2 / 2) * M + m) * K, * br = bd + (i2 * N + n) * K;
                double        ref = 0, mag = 0;
                for (int64_t k = 0; k < K; k++) ref += (double) ar[k] * br[k], mag += fabs((double) ar[k] * br[k]);
                const float got = out[(i2 * N + n) * M + m];
                if (type != MG_TYPE_F16) expect_like_cpu_dot(type, K, aq, bq, (i2 / 2) * M + m, i2 * N + n, got, mag);
                ck_assert_msg(fabs(got - ref) <= 1e-5 * (mag + 1e-30), "%s K %lld M %lld N %lld [%lld,%lld,%lld]: %.9g, not %.9g",
                              mg_type_name(type), (long long) K, (long long) M, (long long) N, (long long) m, (long long) n, (long long) i2,
                              got, ref);
            }
        }
    }
    mg_backend_free(be);
    mg_backend_buffer_free(buf);
    mg_free(ctx);
    if (type != MG_TYPE_F16) {   // and the CPU backend's mul_mat: near (its SIMD kernels add in lanes of their own)
        const enum mg_type types[2] = {type, MG_TYPE_F32};
        const int64_t      ne[2][4] = {{K, M, 2, 1}, {K, N, 4, 1}};
        float *            values[2] = {aq, bv};
        expect_typed_like_cpu(make_mul_mat, 2, types, ne, values, (size_t) (M * N * 4), 1e-4f, false);
    }
    free(av), free(bv), free(aq), free(ad), free(bd), free(bq), free(out);
}

// K one block and several (odd counts: rows of 34-byte blocks start off a
// 4-byte word), M and N odd, M more than a workgroup's worth with N.
START_TEST(test_mul_mat_q8_0_like_dequantized) {
    expect_like_dequantized(MG_TYPE_Q8_0, 32, 7, 3, 10);
    expect_like_dequantized(MG_TYPE_Q8_0, 96, 33, 5, 20);
    expect_like_dequantized(MG_TYPE_Q8_0, 256, 129, 1, 30);
    expect_like_dequantized(MG_TYPE_Q8_0, 160, 64, 9, 40);
}
END_TEST

// Q4_0: 18-byte blocks, as for Q8_0 rows start mid-word.
START_TEST(test_mul_mat_q4_0_like_dequantized) {
    expect_like_dequantized(MG_TYPE_Q4_0, 32, 7, 3, 80);
    expect_like_dequantized(MG_TYPE_Q4_0, 96, 33, 5, 90);
    expect_like_dequantized(MG_TYPE_Q4_0, 256, 129, 1, 100);
}
END_TEST

// The K-quants: super-blocks of 256 weights, 144 bytes (Q4_K, scales and
// mins in 6 bits) and 210 bytes (Q6_K: its rows start off a word); one and
// three super-blocks per row, M and N odd.
START_TEST(test_mul_mat_k_quants_like_dequantized) {
    static const struct {
        enum mg_type type;
        int          k, m, n, seed;
    } cases[] = {
        {MG_TYPE_Q4_K, 256, 7, 3, 110}, {MG_TYPE_Q4_K, 768, 33, 5, 120},
        {MG_TYPE_Q6_K, 256, 7, 3, 130}, {MG_TYPE_Q6_K, 768, 33, 5, 140},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        expect_like_dequantized(cases[i].type, cases[i].k, cases[i].m, cases[i].n, cases[i].seed);
    }
}
END_TEST

// F16 rows of odd K start on half a word.
START_TEST(test_mul_mat_f16_like_dequantized) {
    expect_like_dequantized(MG_TYPE_F16, 33, 7, 3, 50);
    expect_like_dequantized(MG_TYPE_F16, 96, 33, 5, 60);
    expect_like_dequantized(MG_TYPE_F16, 255, 129, 2, 70);
}
END_TEST

// The activation quantizers the quantized matmuls run first (quantize_q8_0.comp,
// quantize_q8_k.comp): the device's blocks equal the CPU's byte for byte
// (mg_quantize_row_q8_0 and mg_quantize_row_q8_K: the codes, the scales and
// Q8_K's sums), on rows of random values and on the cases a rounding rule
// shows itself in: a row of zeros, values near FLT_MAX (Q8_0's fp16 scale
// overflows to inf) and tiny ones, the largest value negative or tied with
// its opposite (Q8_K's sign comes from the first), exact halves (ties go to
// the even code), a scale whose division is inexact.
static void fill_quantizer_cases(float * x, int64_t K, int64_t rows, uint64_t seed) {
    mg_test_fill_uniform(x, (size_t) (K * rows), &seed, -2.0f, 2.0f);
    for (int64_t k = 0; k < K; k++) {
        x[1 * K + k] = 0.0f;                                            // row 1: zeros
        x[2 * K + k] *= 1e30f;                                          // row 2: huge, one near FLT_MAX
        x[3 * K + k] *= 1e-30f;                                         // row 3: tiny
        x[4 * K + k] = (float) (k % 9) * 0.5f - 2.0f;                   // row 4: halves ...
        x[5 * K + k] = x[5 * K + k] * 0.1f;                              // row 5: the largest negative, tied
    }
    x[2 * K + 7] = 3.0e38f;
    for (int64_t k = 0; k < K; k += 32) {
        x[4 * K + k + 3] = 127.0f;                                      // ... with a scale of 1: x * id is x
        x[5 * K + k + 5] = -7.0f, x[5 * K + k + 9] = 7.0f;
    }
    x[6 * K + 11] = 3.0f;                                               // row 6: 127 / 3 is inexact
}

static void expect_quantized_like_cpu(enum mg_type type, int64_t K, int64_t rows, uint64_t seed) {
    mg_backend_dev_t    dev = vulkan_device();
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 4 * mg_tensor_overhead(), .no_alloc = true});
    struct mg_tensor *  x   = mg_new_tensor_2d(ctx, MG_TYPE_F32, K, rows);
    struct mg_tensor *  q   = mg_new_tensor_2d(ctx, type, K, rows);
    const size_t        nx  = (mg_nbytes(x) + 255) / 256 * 256;
    mg_backend_buffer_t buf = mg_backend_buft_alloc_buffer(mg_backend_dev_buffer_type(dev), nx + mg_nbytes(q));
    char *              base = mg_backend_buffer_get_base(buf);
    ck_assert(mg_backend_tensor_alloc(buf, x, base) && mg_backend_tensor_alloc(buf, q, base + nx));
    float * xv = malloc(mg_nbytes(x));
    char *  on_cpu = malloc(mg_nbytes(q)), * on_dev = malloc(mg_nbytes(q));
    fill_quantizer_cases(xv, K, rows, seed);
    (type == MG_TYPE_Q8_0 ? mg_quantize_row_q8_0 : mg_quantize_row_q8_K)(xv, on_cpu, K * rows);
    mg_backend_buffer_clear(buf, 0xa5);   // a byte the shader leaves alone shows
    mg_backend_tensor_set(x, xv, 0, mg_nbytes(x));
    mg_backend_t be = mg_backend_dev_init(dev);
    ck_assert_msg(mg_backend_vulkan_quantize(be, x, q), "%s", mg_last_error());
    mg_backend_tensor_get(q, on_dev, 0, mg_nbytes(q));
    const size_t block = mg_type_size(type);
    for (size_t i = 0; i < mg_nbytes(q); i++) {
        ck_assert_msg(on_dev[i] == on_cpu[i], "%s K %lld: byte %zu (block %zu, byte %zu of it): device 0x%02x, CPU 0x%02x",
                      mg_type_name(type), (long long) K, i, i / block, i % block, (unsigned char) on_dev[i],
                      (unsigned char) on_cpu[i]);
    }
    // x's type is refused, with the reason.
    ck_assert(!mg_backend_vulkan_quantize(be, q, x));
    ck_assert_msg(strstr(mg_last_error(), "F32 rows into Q8_0 or Q8_K") != NULL, "%s", mg_last_error());
    free(xv), free(on_cpu), free(on_dev);
    mg_backend_free(be);
    mg_backend_buffer_free(buf);
    mg_free(ctx);
}

// Q8_0: 3 blocks a row, 7 rows: 21 blocks, the last of its pair alone.
START_TEST(test_quantize_activations_like_the_cpu) {
    expect_quantized_like_cpu(MG_TYPE_Q8_0, 96, 7, 150);
    expect_quantized_like_cpu(MG_TYPE_Q8_0, 64, 7, 160);
    expect_quantized_like_cpu(MG_TYPE_Q8_0, 96, 300, 161);    // many random rows
    expect_quantized_like_cpu(MG_TYPE_Q8_K, 256, 300, 162);
    expect_quantized_like_cpu(MG_TYPE_Q8_K, 256, 7, 170);
    expect_quantized_like_cpu(MG_TYPE_Q8_K, 768, 7, 180);
}
END_TEST

// An op with no shader is refused by supports_op (the scheduler keeps it on
// the CPU) and by graph_compute, naming the node.
START_TEST(test_ops_without_a_shader_are_refused) {
    mg_backend_dev_t    dev = vulkan_device();
    struct mg_context * ctx = mg_init((struct mg_init_params) {
        .mem_size = 8 * mg_tensor_overhead() + mg_graph_overhead_custom(8), .no_alloc = true});
    struct mg_tensor * x = mg_new_tensor_1d(ctx, MG_TYPE_F32, 8);
    struct mg_tensor * y = mg_set_name(mg_gelu(ctx, x), "y");
    struct mg_cgraph * g = mg_new_graph_custom(ctx, 8);
    mg_build_forward_expand(g, y);
    mg_backend_buffer_t buf = mg_backend_buft_alloc_buffer(mg_backend_dev_buffer_type(dev), 256);
    ck_assert(mg_backend_tensor_alloc(buf, x, mg_backend_buffer_get_base(buf)));
    ck_assert(mg_backend_tensor_alloc(buf, y, (char *) mg_backend_buffer_get_base(buf) + 64));
    mg_backend_t be = mg_backend_dev_init(dev);
    ck_assert(!mg_backend_supports_op(be, y));
    ck_assert(!mg_backend_graph_compute(be, g));
    ck_assert_msg(strstr(mg_last_error(), "'y' (GELU f32) has no shader yet") != NULL, "%s", mg_last_error());
    mg_backend_free(be);
    mg_backend_buffer_free(buf);
    mg_free(ctx);
}
END_TEST

// The ops of a MoE layer have no shader: supports_op refuses them, so the
// scheduler keeps them on the CPU. So is get_rows of {1, n_expert, T} by ids
// {n_used, T} (get_rows.comp reads one matrix); the embedding lookup stays.
START_TEST(test_moe_ops_stay_on_the_cpu) {
    mg_backend_dev_t    dev = vulkan_device();
    struct mg_context * ctx = mg_init((struct mg_init_params) {
        .mem_size = 32 * mg_tensor_overhead(), .no_alloc = true});
    struct mg_tensor * logits = mg_new_tensor_2d(ctx, MG_TYPE_F32, 8, 3);         // {n_expert, T}
    struct mg_tensor * ids    = mg_new_tensor_2d(ctx, MG_TYPE_I32, 2, 3);         // {n_used, T}
    struct mg_tensor * as     = mg_new_tensor_3d(ctx, MG_TYPE_Q8_0, 64, 16, 8);   // {K, N, n_expert}
    struct mg_tensor * b      = mg_new_tensor_3d(ctx, MG_TYPE_F32, 64, 1, 3);
    struct mg_tensor * moe[]  = {
        mg_argsort(ctx, logits, MG_SORT_ORDER_DESC), mg_clamp(ctx, logits, -1.0f, 1.0f), mg_mul_mat_id(ctx, as, b, ids),
        mg_get_rows(ctx, mg_reshape_3d(ctx, logits, 1, 8, 3), ids),
    };
    for (size_t i = 0; i < sizeof(moe) / sizeof(moe[0]); i++) {
        ck_assert_msg(!mg_backend_dev_supports_op(dev, moe[i]), "%s claims %s", mg_backend_dev_name(dev),
                      mg_op_name(moe[i]->op));
    }
    struct mg_tensor * lookup = mg_get_rows(ctx, logits, mg_new_tensor_1d(ctx, MG_TYPE_I32, 2));
    ck_assert(mg_backend_dev_supports_op(dev, lookup));
    mg_free(ctx);
}
END_TEST

// x (input) + W (device) -> relu (CPU: no shader) -> * R (device) -> + itself:
// three splits, three copies; the result bit for bit the CPU's alone. (RELU,
// not SQR: SQR on the device is the graded exercise, exercises/vulkan, whose
// test is this graph in one split.)
struct split_graph {
    struct mg_context * ctx;
    struct mg_cgraph *  g;
    struct mg_tensor *  x, *W, *R, *s, *t, *u, *v;
    mg_backend_buffer_t weights;
};

static void build_split_graph(struct split_graph * k, mg_backend_buffer_type_t weights_buft, const float * W,
                              const float * R) {
    k->ctx = mg_init((struct mg_init_params) {.mem_size = 16 * mg_tensor_overhead() + mg_graph_overhead_custom(32),
                                              .no_alloc = true});
    k->x = mg_set_name(mg_new_tensor_2d(k->ctx, MG_TYPE_F32, 64, 3), "x");
    k->W = mg_set_name(mg_new_tensor_2d(k->ctx, MG_TYPE_F32, 64, 3), "W");
    k->R = mg_set_name(mg_new_tensor_2d(k->ctx, MG_TYPE_F32, 64, 1), "R");
    k->x->flags |= MG_TENSOR_FLAG_INPUT;
    k->s = mg_set_name(mg_add(k->ctx, k->x, k->W), "s");
    k->t = mg_set_name(mg_relu(k->ctx, k->s), "t");
    k->u = mg_set_name(mg_mul(k->ctx, k->t, k->R), "u");
    k->v = mg_set_name(mg_add(k->ctx, k->u, k->u), "v");
    k->v->flags |= MG_TENSOR_FLAG_OUTPUT;
    k->g = mg_new_graph_custom(k->ctx, 32);
    mg_build_forward_expand(k->g, k->v);
    k->weights = mg_backend_buft_alloc_buffer(weights_buft, 1024);
    char * base = mg_backend_buffer_get_base(k->weights);
    ck_assert(mg_backend_tensor_alloc(k->weights, k->W, base));
    ck_assert(mg_backend_tensor_alloc(k->weights, k->R, base + 768));
    mg_backend_tensor_set(k->W, W, 0, 64 * 3 * sizeof(float));
    mg_backend_tensor_set(k->R, R, 0, 64 * sizeof(float));
}

// v of the graph above for input x, with the scheduler over backends[0..n).
static void run_split_graph(mg_backend_t * backends, int n, mg_backend_buffer_type_t weights_buft, const float * x,
                            const float * W, const float * R, float * v, int * n_splits, int * n_copies) {
    struct split_graph k;
    build_split_graph(&k, weights_buft, W, R);
    struct mg_sched * sched = mg_sched_new(backends, n, 32);
    ck_assert_msg(sched != NULL && mg_sched_alloc_graph(sched, k.g), "%s", mg_last_error());
    *n_splits = mg_sched_n_splits(sched);
    *n_copies = mg_sched_n_copies(sched);
    mg_backend_tensor_set(k.x, x, 0, 64 * 3 * sizeof(float));
    ck_assert_msg(mg_sched_graph_compute(sched, k.g), "%s", mg_last_error());
    mg_backend_tensor_get(k.v, v, 0, 64 * 3 * sizeof(float));
    mg_sched_free(sched);
    mg_backend_buffer_free(k.weights);
    mg_free(k.ctx);
}

START_TEST(test_scheduler_splits_between_device_and_cpu) {
    mg_backend_dev_t dev = vulkan_device();
    mg_backend_t     backends[2] = {mg_backend_dev_init(dev), mg_backend_cpu_init()};
    float x[192], W[192], R[64], v_split[192], v_cpu[192];
    for (int i = 0; i < 192; i++) x[i] = (float) (i % 29) * 0.21f - 3.0f, W[i] = (float) (i % 7) * -0.4f + 1.0f;
    for (int i = 0; i < 64; i++) R[i] = 0.5f + (float) (i % 5);
    int n_splits, n_copies;
    run_split_graph(backends, 2, mg_backend_dev_buffer_type(dev), x, W, R, v_split, &n_splits, &n_copies);
    ck_assert_int_eq(n_splits, 3);   // Vulkan0: s | CPU: t | Vulkan0: u v
    ck_assert_int_eq(n_copies, 3);   // x to the device, s to the CPU, t back
    run_split_graph(&backends[1], 1, mg_backend_cpu_buffer_type(), x, W, R, v_cpu, &n_splits, &n_copies);
    ck_assert_int_eq(n_splits, 1);
    ck_assert_mem_eq(v_split, v_cpu, sizeof v_cpu);
    for (int i = 0; i < 192; i++) {   // and the arithmetic, in plain C: every step correctly rounded
        const float s = x[i] + W[i], u = (s > 0.0f ? s : 0.0f) * R[i % 64];
        ck_assert_msg(v_split[i] == u + u, "v[%d] %a, %a", i, v_split[i], u + u);
    }
    mg_backend_free(backends[0]);
    mg_backend_free(backends[1]);
}
END_TEST

// ---------------------------------------------------------------------------
// -ngl through the command line: an F32 model's logits with every layer
// offloaded, and with one, against the CPU's.
// ---------------------------------------------------------------------------

static char dir[64];
static void setup(void) { mg_test_make_dir(dir, sizeof dir, "vulkan"); }
static void teardown(void) { mg_test_remove_dir(dir); }

// mg logits ... -o NAME.bin with these extra flags; the floats read back.
static float * logits_of(const char * model, const char * name, const char * flags, size_t * n) {
    struct mg_test_run r = mg_test_run_mg(dir, NULL, NULL,
                                          "logits -m '%s' -p '床前明月光，疑是地上霜' --all -c 64 -t 2 -o '%s' %s",
                                          model, mg_test_path_in(dir, name), flags);
    ck_assert_msg(r.status == 0, "mg logits %s: %s", flags, r.err);
    mg_test_run_free(&r);
    size_t bytes = 0;
    float * v    = mg_test_read_file(mg_test_path_in(dir, name), &bytes);
    ck_assert_ptr_nonnull(v);
    *n = bytes / sizeof(float);
    return v;
}

static float * logits_with(const char * name, const char * flags, size_t * n) {
    return logits_of(mg_test_path_in(dir, "f32.gguf"), name, flags, n);
}

static float max_abs_diff(const float * a, const float * b, size_t n) {
    float worst = 0;
    for (size_t i = 0; i < n; i++) worst = fmaxf(worst, fabsf(a[i] - b[i]));
    return worst;
}

START_TEST(test_ngl_logits_like_the_cpu) {
    struct mg_test_run r = mg_test_run_mg(dir, NULL, NULL, "mkmodel --preset tiny --type f32 --init scaled --untied "
                                          "--seed 3 -o '%s'", mg_test_path_in(dir, "f32.gguf"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    mg_test_run_free(&r);
    // The F32 path end to end (weights, activations, cache): within 1e-3 of the CPU.
    size_t n_cpu, n99, n1, n99b;
    float * cpu  = logits_with("cpu.bin", "--kv-type f32", &n_cpu);
    float * g99  = logits_with("g99.bin", "--kv-type f32 -ngl 99", &n99);
    float * g1   = logits_with("g1.bin", "--kv-type f32 -ngl 1 -dev Vulkan0", &n1);
    float * g99b = logits_with("g99b.bin", "--kv-type f32 -ngl 99", &n99b);
    ck_assert_uint_eq(n99, n_cpu);
    ck_assert_uint_eq(n1, n_cpu);
    ck_assert_uint_gt(n_cpu, 6400);   // every position's logits
    ck_assert_msg(max_abs_diff(cpu, g99, n_cpu) <= 1e-3f, "-ngl 99: %g", max_abs_diff(cpu, g99, n_cpu));
    ck_assert_msg(max_abs_diff(cpu, g1, n_cpu) <= 1e-3f, "-ngl 1: %g", max_abs_diff(cpu, g1, n_cpu));
    ck_assert_mem_eq(g99, g99b, n99 * sizeof(float));   // no reduction depends on timing: the same bits each run
    // With the default F16 cache, a key that differs in its last float bit can
    // round to the neighbouring F16 (a relative 5e-4): the logits move more.
    size_t n16c, n16g;
    float * c16 = logits_with("c16.bin", "", &n16c);
    float * g16 = logits_with("g16.bin", "-ngl 99", &n16g);
    ck_assert_msg(max_abs_diff(c16, g16, n16c) <= 2e-2f, "-ngl 99, F16 cache: %g", max_abs_diff(c16, g16, n16c));
    free(cpu), free(g99), free(g1), free(g99b), free(c16), free(g16);
}
END_TEST

// mg run's greedy text with every layer on the device is the CPU's; --dot
// still draws, and --svg (the memory map, not drawn yet for a scheduled
// graph) is refused before the run, so no file the user asked for is missing
// after an exit 0.
START_TEST(test_ngl_run_text) {
    struct mg_test_run r = mg_test_run_mg(dir, NULL, NULL, "mkmodel --preset tiny --type f32 --init scaled --untied "
                                          "--seed 3 -o '%s'", mg_test_path_in(dir, "f32.gguf"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    mg_test_run_free(&r);
    ck_assert_int_eq(mkdir(mg_test_path_in(dir, "dot"), 0700), 0);
    ck_assert_int_eq(mkdir(mg_test_path_in(dir, "svg"), 0700), 0);
    const char * run = "run -m '%s' -p '床前明月光' -n 16 --temp 0 -c 64 --kv-type f32 %s";
    struct mg_test_run cpu = mg_test_run_mg(dir, NULL, NULL, run, mg_test_path_in(dir, "f32.gguf"), "");
    char flags[512];
    snprintf(flags, sizeof flags, "-ngl 99 --dot '%s'", mg_test_path_in(dir, "dot"));
    struct mg_test_run gpu = mg_test_run_mg(dir, NULL, NULL, run, mg_test_path_in(dir, "f32.gguf"), flags);
    ck_assert_msg(cpu.status == 0 && gpu.status == 0, "%s\n%s", cpu.err, gpu.err);
    ck_assert_str_eq(gpu.out, cpu.out);
    ck_assert_msg(access(mg_test_path_in(dir, "dot/decode.dot"), R_OK) == 0, "no decode.dot");
    mg_test_run_free(&cpu);
    mg_test_run_free(&gpu);
    snprintf(flags, sizeof flags, "-ngl 99 --svg '%s'", mg_test_path_in(dir, "svg"));
    struct mg_test_run svg = mg_test_run_mg(dir, NULL, NULL, run, mg_test_path_in(dir, "f32.gguf"), flags);
    ck_assert_msg(svg.status == 1 && strstr(svg.err, "not drawn yet") != NULL && svg.out[0] == '\0', "exit %d: %s",
                  svg.status, svg.err);
    mg_test_run_free(&svg);
}
END_TEST

// mg's text with each of the -ngl flags given is the CPU's (no flag), every
// run exits 0, and each run's stderr holds `must_say` (when not NULL) too.
static void expect_text_like_the_cpu(const char * run, const char * model, const char * const * ngl, int n_ngl,
                                     const char * must_say) {
    struct mg_test_run cpu = mg_test_run_mg(dir, NULL, NULL, run, model, "");
    ck_assert_msg(cpu.status == 0, "%s", cpu.err);
    ck_assert_msg(must_say == NULL || strstr(cpu.err, must_say) != NULL, "no '%s' in:\n%s", must_say, cpu.err);
    for (int i = 0; i < n_ngl; i++) {
        struct mg_test_run gpu = mg_test_run_mg(dir, NULL, NULL, run, model, ngl[i]);
        ck_assert_msg(gpu.status == 0, "%s: %s", ngl[i], gpu.err);
        ck_assert_msg(must_say == NULL || strstr(gpu.err, must_say) != NULL, "%s: no '%s' in:\n%s", ngl[i], must_say,
                      gpu.err);
        ck_assert_msg(strcmp(gpu.out, cpu.out) == 0, "%s: the text differs from the CPU's:\n%s\n---\n%s", ngl[i],
                      gpu.out, cpu.out);
        mg_test_run_free(&gpu);
    }
    mg_test_run_free(&cpu);
}

// The demo model (Q8_0 matrices) with every layer, two, one and none on the device:
// make run's greedy text is the CPU's. Both quantize the activations to
// Q8_0 the same way (test_quantize_activations_like_the_cpu), but the float
// ops before them (RMS_NORM's sum, ROPE's sin and cos, SOFT_MAX's exp) add
// and round in the device's order, and a last-bit difference now and then
// moves an activation across a rounding boundary: one Q8_0 code apart, a
// step of 1/127 of its block's largest. Compounded over the layers: measured
// 0.141 at most (0.017 on average) at -ngl 99 on logits up to 15, bounded
// here by 0.25 (under 2% of the largest logit).
// Two runs give the same bits.
START_TEST(test_ngl_demo_model_q8_0) {
    const char * q8  = mg_test_root("models/fortune-toy-q8_0.gguf");
    const char * run = "run -m '%s' -p '床前明月光' -n 48 --temp 0 %s";
    const char * const ngl[] = {"-ngl 99", "-ngl 1", "-ngl 2", "-ngl 0"};
    expect_text_like_the_cpu(run, q8, ngl, 4, NULL);
    size_t  n_cpu, n99, n99b;
    float * c   = logits_of(q8, "q8c.bin", "", &n_cpu);
    float * g   = logits_of(q8, "q8g.bin", "-ngl 99", &n99);
    float * gb  = logits_of(q8, "q8gb.bin", "-ngl 99", &n99b);
    ck_assert_uint_eq(n99, n_cpu);
    ck_assert_uint_eq(n99b, n_cpu);
    ck_assert_msg(max_abs_diff(c, g, n_cpu) <= 0.25f, "-ngl 99: %g", max_abs_diff(c, g, n_cpu));
    ck_assert_mem_eq(g, gb, n99 * sizeof(float));
    free(c), free(g), free(gb);
}
END_TEST

// The scheduler's splits and copies for the demo model's prompt graph (5
// tokens of '床前明月光', a 4-layer model: n_embd 256, K and V rows of 128
// floats (2 KV heads of 64), the cache read over n_kv = 64 positions), as
// MG_TRACE=sched prints them: "graph of N nodes: S splits, C copies, B bytes".
// With each offloaded layer's KV cache on the device, SET_ROWS into it and
// the attention over it run there too: no layer's K or V crosses to the CPU
// and back (before: 18 splits, 19 copies, 353,044 bytes at -ngl 99; 7
// splits, 9 copies, 99,220 bytes at -ngl 1).
enum { DEMO_T = 5, DEMO_EMBD = 256, DEMO_EMBD_KV = 128, DEMO_N_KV = 64 };

static void prompt_graph_counts(const char * err, int * splits, int * copies, long * bytes) {
    const char * g = strstr(err, "] graph of ");
    ck_assert_msg(g != NULL, "no scheduler trace in:\n%s", err);
    int nodes;
    ck_assert_int_eq(sscanf(g, "] graph of %d nodes: %d splits, %d copies, %ld bytes", &nodes, splits, copies, bytes),
                     4);
}

// Every op of a split's "(OP name, OP name, ...)" list in [ops, end) is the
// embeddings' row lookup, the one op left where its (host) memory is.
static bool only_embedding_lookup(const char * ops, const char * end) {
    for (const char * op = ops; op != NULL && op < end;) {
        if (strncmp(op, "GET_ROWS inp_embd", 17) != 0) return false;
        const char * next = strstr(op, ", ");
        op = next != NULL ? next + 2 : NULL;
    }
    return true;
}

START_TEST(test_ngl_demo_graph_splits) {
    const char * cmd = "run -m '%s' -p '床前明月光' -n 2 --temp 0 %s --trace sched";
    const char * q8  = mg_test_root("models/fortune-toy-q8_0.gguf");
    struct mg_test_run r = mg_test_run_mg(dir, NULL, NULL, cmd, q8, "-ngl 99");
    ck_assert_msg(r.status == 0, "%s", r.err);
    int splits, copies, cpu_splits = 0, graphs = 0;
    long bytes;
    prompt_graph_counts(r.err, &splits, &copies, &bytes);
    // -ngl 99: the lookup on the CPU, everything else one device split, whose
    // inputs are the embeddings' rows, the positions, the K and V store
    // indices (one per row, one per value) and the mask, 4 bytes each.
    ck_assert_int_eq(splits, 2);
    ck_assert_int_eq(copies, 5);
    ck_assert_int_eq(bytes, 4L * DEMO_T * (DEMO_EMBD + 1 + 1 + DEMO_EMBD_KV + DEMO_N_KV));
    for (const char * g = strstr(r.err, "] graph of "); g != NULL; g = strstr(g + 1, "] graph of ")) graphs++;
    for (const char * line = strstr(r.err, ": CPU, nodes "); line != NULL; line = strstr(line + 1, ": CPU, nodes ")) {
        const char * ops = strchr(line, '('), * end = strchr(line, ')');
        ck_assert(ops != NULL && end != NULL && ops < end);
        ck_assert_msg(only_embedding_lookup(ops + 1, end), "on the CPU: %.*s", (int) (end + 1 - line), line);
        cpu_splits++;
    }
    ck_assert_int_eq(graphs, 2);   // the prompt's and the decode step's
    ck_assert_int_eq(cpu_splits, graphs);
    mg_test_run_free(&r);
    // -ngl 1: layers 0-2 and the output on the CPU, layer 3 between them on
    // the device. In: the residual's two halves (its ADD moved up to the
    // device), the positions, the store indices, the mask; out: the last
    // token's normed row for the output matrix.
    r = mg_test_run_mg(dir, NULL, NULL, cmd, q8, "-ngl 1");
    ck_assert_msg(r.status == 0, "%s", r.err);
    prompt_graph_counts(r.err, &splits, &copies, &bytes);
    ck_assert_int_eq(splits, 3);
    ck_assert_int_eq(copies, 7);
    ck_assert_int_eq(bytes, 4L * DEMO_T * (2 * DEMO_EMBD + 1 + 1 + DEMO_EMBD_KV + DEMO_N_KV) + 4L * DEMO_EMBD);
    mg_test_run_free(&r);
}
END_TEST

// Token by token (-b 1: a graph per token, reused, each storing its K and V
// at the next cell of the device's cache and reading the cells before it):
// the F32 model's logits within 1e-3 of the CPU's, as for the whole prompt
// (measured 2.0e-5 with every layer on the device, 8.6e-6 with one).
START_TEST(test_ngl_token_by_token) {
    struct mg_test_run r = mg_test_run_mg(dir, NULL, NULL, "mkmodel --preset tiny --type f32 --init scaled --untied "
                                          "--seed 3 -o '%s'", mg_test_path_in(dir, "f32.gguf"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    mg_test_run_free(&r);
    size_t n_cpu, n99, n1;
    float * cpu = logits_with("b1_cpu.bin", "--kv-type f32 -b 1", &n_cpu);
    float * g99 = logits_with("b1_g99.bin", "--kv-type f32 -b 1 -ngl 99", &n99);
    float * g1  = logits_with("b1_g1.bin", "--kv-type f32 -b 1 -ngl 1", &n1);
    ck_assert_uint_eq(n99, n_cpu);
    ck_assert_uint_eq(n1, n_cpu);
    ck_assert_uint_gt(n_cpu, 6400);   // every position's logits
    ck_assert_msg(max_abs_diff(cpu, g99, n_cpu) <= 1e-3f, "-b 1 -ngl 99: %g", max_abs_diff(cpu, g99, n_cpu));
    ck_assert_msg(max_abs_diff(cpu, g1, n_cpu) <= 1e-3f, "-b 1 -ngl 1: %g", max_abs_diff(cpu, g1, n_cpu));
    free(cpu), free(g99), free(g1);
}
END_TEST

// A context shift with the cache on the device: the CPU turns the keys (the
// K-shift) in the host bytes the offloaded layers kept, the device's values
// copied there and back (session.c, apply_k_shift). 60 tokens in a context
// of 16 shift it 6 times; the text is the CPU's at -ngl 1 and 99 (a key
// left unturned on the device, or turned from stale host bytes, changes it).
START_TEST(test_ngl_context_shift_like_the_cpu) {
    const char * q8  = mg_test_root("models/fortune-toy-q8_0.gguf");
    const char * run = "run -m '%s' -p '床前明月光' -n 60 -c 16 --context-shift --temp 0 %s";
    const char * const ngl[] = {"-ngl 1", "-ngl 99"};
    expect_text_like_the_cpu(run, q8, ngl, 2, "context shifts   =         6 ");
}
END_TEST

// An F16 model with every layer on the device: the CPU's greedy text, logits
// within 5e-2 (0.016 measured, on logits up to 17: the CPU rounds the
// activations to F16 for its F16 dot products, the shader keeps them F32, and
// the default F16 cache adds the rounding test_ngl_logits_like_the_cpu allows).
START_TEST(test_ngl_f16_model) {
    struct mg_test_run r = mg_test_run_mg(dir, NULL, NULL, "mkmodel --preset tiny --type f16 --init scaled --untied "
                                          "--seed 3 -o '%s'", mg_test_path_in(dir, "f16.gguf"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    mg_test_run_free(&r);
    const char * f16 = mg_test_path_in(dir, "f16.gguf");
    const char * run = "run -m '%s' -p '床前明月光' -n 16 --temp 0 -c 64 %s";
    struct mg_test_run cpu = mg_test_run_mg(dir, NULL, NULL, run, f16, "");
    struct mg_test_run gpu = mg_test_run_mg(dir, NULL, NULL, run, f16, "-ngl 99");
    ck_assert_msg(cpu.status == 0 && gpu.status == 0, "%s\n%s", cpu.err, gpu.err);
    ck_assert_str_eq(gpu.out, cpu.out);
    mg_test_run_free(&cpu), mg_test_run_free(&gpu);
    size_t  nc, ng;
    float * c = logits_of(f16, "f16c.bin", "", &nc);
    float * g = logits_of(f16, "f16g.bin", "-ngl 99", &ng);
    ck_assert_uint_eq(ng, nc);
    ck_assert_msg(max_abs_diff(c, g, nc) <= 5e-2f, "-ngl 99: %g", max_abs_diff(c, g, nc));
    free(c), free(g);
}
END_TEST

// Q4_K and Q6_K models with every layer on the device: the logits near the
// CPU's, the same bits on every run. Near, not within 1e-3: both multiply
// K-quant weights by activations quantized to Q8_K, the same way, but the
// other ops' floats, added in another order, differ in the last bits, and
// now and then such a bit moves an activation across a rounding boundary of
// Q8_K's (one scale per 256 values: a step of 1/127 of the largest): a code
// one apart, an error a million times the bit's. Measured 0.38 (Q4_K) and
// 0.36 (Q6_K) at most, 0.06 on average, on logits up to 17.5 (0.43 and 0.48
// when the shaders multiplied F32 activations). The shaders' own arithmetic
// is checked tightly above (test_mul_mat_k_quants_like_dequantized).
static void expect_k_quant_model_near_cpu(const char * type) {
    char name[32], cpu_bin[32], g_bin[32], gb_bin[32];
    snprintf(name, sizeof name, "%s.gguf", type);
    struct mg_test_run r = mg_test_run_mg(dir, NULL, NULL, "mkmodel --preset tiny --type %s --init scaled --untied "
                                          "--seed 3 -o '%s'", type, mg_test_path_in(dir, name));
    ck_assert_msg(r.status == 0, "%s", r.err);
    mg_test_run_free(&r);
    snprintf(cpu_bin, sizeof cpu_bin, "%s_c.bin", type);
    snprintf(g_bin, sizeof g_bin, "%s_g.bin", type);
    snprintf(gb_bin, sizeof gb_bin, "%s_gb.bin", type);
    size_t  nc, ng, ngb;
    float * c  = logits_of(mg_test_path_in(dir, name), cpu_bin, "", &nc);
    float * g  = logits_of(mg_test_path_in(dir, name), g_bin, "-ngl 99", &ng);
    float * gb = logits_of(mg_test_path_in(dir, name), gb_bin, "-ngl 99", &ngb);
    ck_assert_uint_eq(ng, nc);
    ck_assert_uint_eq(ngb, nc);
    ck_assert_msg(max_abs_diff(c, g, nc) <= 0.75f, "%s -ngl 99: %g", type, max_abs_diff(c, g, nc));
    ck_assert_mem_eq(g, gb, ng * sizeof(float));
    free(c), free(g), free(gb);
}

START_TEST(test_ngl_k_quant_models) {
    expect_k_quant_model_near_cpu("q4_k");
    expect_k_quant_model_near_cpu("q6_k");
}
END_TEST

// ---------------------------------------------------------------------------
// Perplexity on held-out text (data/heldout/, which the demo model never saw)
// through the device, against the CPU's on the same file: within 0.2 %, for
// the demo model and for the other offloadable types quantized from its F16
// parent. Lavapipe scores about 70 tokens a second, so CI scores
// VK_PPL_CHUNKS chunks of 256 (2 by default; make VULKAN=1 test-vulkan-ppl
// scores the 60 a perplexity run on this text uses). Both round the
// activations of the quantized matmuls to 8 bits the same way (Q8_0, Q8_K:
// test_quantize_activations_like_the_cpu), so what is left between them is
// the float order of the other ops, which the rounding to 8 bits magnifies
// now and then into a code one apart; an op wrong on the device would move
// the perplexity by far more. (Before the shaders rounded the activations,
// they multiplied F32 ones, and Q6_K's perplexity was 0.4 % off the CPU's.)
// Measured on 60 chunks (mg perplexity -f data/heldout/dhammapada.txt -c 256
// -b 256 --chunks 60 -t 2, then with -ngl 99 on lavapipe), the CPU | device:
// Q8_0 (the demo) 75.6980 | 75.6973, Q4_0 76.4272 | 76.4255, Q4_K_M
// 76.2997 | 76.2410 (-0.08 %), Q6_K 76.1654 | 76.1041 (-0.08 %).
// ---------------------------------------------------------------------------

static int ppl_chunks(void) {
    const char * env = getenv("VK_PPL_CHUNKS");
    const int    n   = env != NULL && *env ? atoi(env) : 0;
    return n > 0 ? n : 2;
}

// mg perplexity's final estimate for model with flags (-ngl N, or none).
static double perplexity_of(const char * model, const char * flags) {
    struct mg_test_run r = mg_test_run_mg(dir, NULL, NULL, "perplexity -m '%s' -f '%s' -c 256 -b 256 --chunks %d -t 2 %s",
                                          model, mg_test_root("data/heldout/dhammapada.txt"), ppl_chunks(), flags);
    ck_assert_msg(r.status == 0, "mg perplexity %s: %s", flags, r.err);
    const char * at = strstr(r.out, "Final estimate: PPL = ");
    ck_assert_msg(at != NULL, "no final estimate in:\n%s", r.out);
    const double ppl = strtod(at + strlen("Final estimate: PPL = "), NULL);
    mg_test_run_free(&r);
    ck_assert_msg(ppl > 1 && isfinite(ppl), "PPL %g", ppl);
    return ppl;
}

// model's perplexity with flags within 0.2 % of the CPU's on the same file.
static void expect_perplexity_like_the_cpu(const char * model, const char * flags) {
    const double cpu = perplexity_of(model, ""), dev = perplexity_of(model, flags);
    ck_assert_msg(fabs(dev / cpu - 1) < 0.002, "%s %s: PPL %.4f, the CPU's %.4f (%+.3f %%)", model, flags, dev, cpu,
                  100 * (dev / cpu - 1));
}

// type quantized from the demo model's F16 parent by mg quantize; its path.
static const char * quantized_demo_model(const char * type) {
    char name[32];
    snprintf(name, sizeof name, "toy-%s.gguf", type);
    const char * path = mg_test_path_in(dir, name);
    struct mg_test_run r = mg_test_run_mg(dir, NULL, NULL, "quantize '%s' '%s' %s",
                                          mg_test_root("models/fortune-toy-f16.gguf"), path, type);
    ck_assert_msg(r.status == 0, "mg quantize %s: %s", type, r.err);
    mg_test_run_free(&r);
    return path;
}

START_TEST(test_ngl_perplexity_like_the_cpu) {
    const char * q8 = mg_test_root("models/fortune-toy-q8_0.gguf");
    expect_perplexity_like_the_cpu(q8, "-ngl 99");
    expect_perplexity_like_the_cpu(q8, "-ngl 1");
    expect_perplexity_like_the_cpu(quantized_demo_model("q4_0"), "-ngl 99");
    expect_perplexity_like_the_cpu(quantized_demo_model("q4_k_m"), "-ngl 99");   // Q4_K and Q6_K weights
    if (ppl_chunks() < 60) return;   // CI's short run: every quantized shader and a split graph
    expect_perplexity_like_the_cpu(mg_test_root("models/fortune-toy-f16.gguf"), "-ngl 99");
    expect_perplexity_like_the_cpu(quantized_demo_model("q6_k"), "-ngl 99");
}
END_TEST

// What offloading cannot do yet is refused with the reason.
START_TEST(test_ngl_refusals) {
    struct mg_test_run q = mg_test_run_mg(dir, NULL, NULL, "mkmodel --preset tiny --type q5_k -o '%s'",
                                          mg_test_path_in(dir, "q5_k.gguf"));
    ck_assert_msg(q.status == 0, "%s", q.err);
    mg_test_run_free(&q);
    mg_test_expect_mg_error(dir, "-ngl 99", "is q5_K: offloading needs F32, F16, Q8_0, Q4_0, Q4_K or Q6_K weights for now",
                            "run -m '%s' -p hi -n 1 -ngl 99", mg_test_path_in(dir, "q5_k.gguf"));
    struct mg_test_run r = mg_test_run_mg(dir, NULL, NULL, "mkmodel --preset tiny --type f32 -o '%s'",
                                          mg_test_path_in(dir, "f32.gguf"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    mg_test_run_free(&r);
    ck_assert_int_eq(mkdir(mg_test_path_in(dir, "dump"), 0700), 0);
    mg_test_expect_mg_error(dir, "-ngl 99", "--dump-tensors", "logits -m '%s' -p hi -ngl 99 --dump-tensors '%s'",
                            mg_test_path_in(dir, "f32.gguf"), mg_test_path_in(dir, "dump"));
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("vulkan");
    TCase * tc = MG_TCASE(s, "vulkan", test_device_in_the_registry, test_device_memory_round_trip,
                             test_copies_across_memories, test_add_and_mul_on_the_device,
                             test_silu_rms_norm_mul_mat_like_the_cpu, test_swiglu_rope_soft_max_cont_like_the_cpu, test_dispatches_beyond_65535_groups,
                             test_set_rows_like_the_cpu, test_get_rows_like_the_cpu, test_mul_mat_q8_0_like_dequantized, test_mul_mat_f16_like_dequantized,
                             test_mul_mat_q4_0_like_dequantized, test_mul_mat_k_quants_like_dequantized,
                             test_quantize_activations_like_the_cpu, test_ops_without_a_shader_are_refused,
                             test_moe_ops_stay_on_the_cpu,
                             test_scheduler_splits_between_device_and_cpu);
    tcase_set_timeout(tc, 120);
    TCase * cli = MG_TCASE(s, "ngl", test_ngl_logits_like_the_cpu, test_ngl_run_text, test_ngl_demo_model_q8_0, test_ngl_demo_graph_splits,
                           test_ngl_token_by_token, test_ngl_context_shift_like_the_cpu,
                           test_ngl_f16_model,
                           test_ngl_k_quant_models, test_ngl_refusals);
    tcase_set_timeout(cli, 300);
    tcase_add_checked_fixture(cli, setup, teardown);
    TCase * ppl = MG_TCASE(s, "perplexity", test_ngl_perplexity_like_the_cpu);
    tcase_set_timeout(ppl, 3600);   // VK_PPL_CHUNKS=60 scores 15,360 tokens per run on lavapipe
    tcase_add_checked_fixture(ppl, setup, teardown);
    return s;
}
