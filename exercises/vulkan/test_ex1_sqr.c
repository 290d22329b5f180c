// test_ex1_sqr.c - the Vulkan backend's exercise: MG_OP_SQR (y = x * x, an
// op the CPU backend has always run) ported to the Vulkan backend, in
// full/vulkan/ops_vulkan.c and a shader of vulkan/*.comp.
//
// Graded by `make -C full VULKAN=1 grade` on the first Vulkan device (Mesa's
// lavapipe in CI). Three checks, one per thing a port must get right:
//   - the device says it can run the node (supports_op), and only when the
//     shader can read it (contiguous F32: a transposed input is refused);
//   - the shader's result has the CPU backend's bits: x * x is one
//     correctly rounded multiplication on both sides, so anything else (pow,
//     a wrong index, a missing offset) shows;
//   - the scheduler, which asks supports_op, keeps the node on the device:
//     the graph of tests/vulkan's scheduler test is one split, not three.
// Nothing new is named here: SQR and everything called exist on the
// untouched engine, which fails each check with a message instead.
#include "harness.h"
#include "arena.h"
#include "backend.h"
#include "backend_sched.h"
#include "ops.h"

#include <string.h>

static mg_backend_dev_t vulkan_device(void) {
    mg_backend_dev_t dev = mg_backend_dev_by_name("Vulkan0");
    ck_assert_msg(dev != NULL, "no Vulkan device: %s (install mesa-vulkan-drivers for lavapipe)",
                  mg_backend_vulkan_status());
    return dev;
}

static struct mg_context * no_alloc_ctx(int n_tensors) {
    return mg_init((struct mg_init_params) {
        .mem_size = (size_t) n_tensors * mg_tensor_overhead() + mg_graph_overhead_custom(32), .no_alloc = true});
}

START_TEST(supports_sqr) {
    mg_backend_dev_t    dev = vulkan_device();
    struct mg_context * ctx = no_alloc_ctx(8);
    struct mg_tensor *  x   = mg_new_tensor_2d(ctx, MG_TYPE_F32, 300, 7);
    struct mg_tensor *  y   = mg_sqr(ctx, x);
    ck_assert_msg(mg_backend_dev_supports_op(dev, y),
                  "%s does not support SQR of a contiguous F32 [300, 7] (ops_vulkan.c: op_of and supports)",
                  mg_backend_dev_name(dev));
    struct mg_tensor * yt = mg_sqr(ctx, mg_transpose(ctx, x));
    ck_assert_msg(!mg_backend_dev_supports_op(dev, yt),
                  "%s claims SQR of a transposed (not contiguous) input: a shader that reads element i at "
                  "a_off + i cannot, so supports must refuse it and leave it to the CPU",
                  mg_backend_dev_name(dev));
    mg_free(ctx);
}
END_TEST

// y = sqr(x) computed by dev's backend, x and y at nonzero offsets of one
// buffer of dev's memory (as the graph allocator places them), n elements
// in [300, 7, 2]: more than one workgroup of 256, and not a multiple of it.
enum { NE0 = 300, NE1 = 7, NE2 = 2, N = NE0 * NE1 * NE2 };

static void sqr_on(mg_backend_dev_t dev, const float * in, float * out) {
    struct mg_context * ctx = no_alloc_ctx(8);
    struct mg_tensor *  x   = mg_new_tensor_3d(ctx, MG_TYPE_F32, NE0, NE1, NE2);
    struct mg_tensor *  y   = mg_sqr(ctx, x);
    struct mg_cgraph *  g   = mg_new_graph_custom(ctx, 32);
    mg_build_forward_expand(g, y);
    const size_t        bytes = (N * sizeof(float) + 255) / 256 * 256;
    mg_backend_buffer_t buf   = mg_backend_buft_alloc_buffer(mg_backend_dev_buffer_type(dev), 256 + 2 * bytes + 256);
    ck_assert_msg(buf != NULL, "%s", mg_last_error());
    char * base = mg_backend_buffer_get_base(buf);
    ck_assert(mg_backend_tensor_alloc(buf, x, base + 256));
    ck_assert(mg_backend_tensor_alloc(buf, y, base + 256 + bytes));
    mg_backend_buffer_clear(buf, 0x7f);   // 0x7f7f7f7f: 3.4e38, no square of [-3, 3], where nothing was written
    mg_backend_tensor_set(x, in, 0, N * sizeof(float));
    mg_backend_t be = mg_backend_dev_init(dev);
    ck_assert_msg(be != NULL, "%s", mg_last_error());
    ck_assert_msg(mg_backend_graph_compute(be, g), "%s cannot compute SQR: %s", mg_backend_dev_name(dev),
                  mg_last_error());
    mg_backend_tensor_get(y, out, 0, N * sizeof(float));
    mg_backend_free(be);
    mg_backend_buffer_free(buf);
    mg_free(ctx);
}

START_TEST(sqr_like_the_cpu) {
    static float in[N], on_cpu[N], on_dev[N];
    uint64_t     seed = 26;
    mg_test_fill_uniform(in, N, &seed, -3.0f, 3.0f);
    in[0] = -0.0f, in[1] = 1e20f, in[2] = 1e-30f;   // a signed zero, an overflow to inf, an underflow
    sqr_on(vulkan_device(), in, on_dev);
    sqr_on(mg_backend_cpu_device(), in, on_cpu);
    for (int i = 0; i < N; i++) {
        ck_assert_msg(memcmp(&on_dev[i], &on_cpu[i], sizeof(float)) == 0,
                      "y[%d]: the device gives %a, the CPU %a (x = %a): x * x, one correctly rounded product, "
                      "has the same bits on both; is y written at d_off + i from a_off + i?",
                      i, on_dev[i], on_cpu[i], in[i]);
    }
}
END_TEST

// tests/vulkan's scheduler graph: x (an input) + W (device) -> sqr -> * R
// (device) -> + itself. Before the port SQR has no shader, so the scheduler
// cuts the graph in three (device, CPU, device) with three copies; after it,
// one split on the device, and the one copy is x's.
START_TEST(scheduler_keeps_sqr_on_the_device) {
    mg_backend_dev_t    dev = vulkan_device();
    struct mg_context * ctx = no_alloc_ctx(16);
    struct mg_tensor * x = mg_set_name(mg_new_tensor_2d(ctx, MG_TYPE_F32, 64, 3), "x");
    struct mg_tensor * W = mg_set_name(mg_new_tensor_2d(ctx, MG_TYPE_F32, 64, 3), "W");
    struct mg_tensor * R = mg_set_name(mg_new_tensor_2d(ctx, MG_TYPE_F32, 64, 1), "R");
    x->flags |= MG_TENSOR_FLAG_INPUT;
    struct mg_tensor * s = mg_add(ctx, x, W);
    struct mg_tensor * t = mg_set_name(mg_sqr(ctx, s), "t");
    struct mg_tensor * u = mg_mul(ctx, t, R);
    struct mg_tensor * v = mg_add(ctx, u, u);
    v->flags |= MG_TENSOR_FLAG_OUTPUT;
    struct mg_cgraph * g = mg_new_graph_custom(ctx, 32);
    mg_build_forward_expand(g, v);
    mg_backend_buffer_t weights = mg_backend_buft_alloc_buffer(mg_backend_dev_buffer_type(dev), 1024);
    ck_assert(mg_backend_tensor_alloc(weights, W, mg_backend_buffer_get_base(weights)));
    ck_assert(mg_backend_tensor_alloc(weights, R, (char *) mg_backend_buffer_get_base(weights) + 768));

    mg_backend_t      backends[2] = {mg_backend_dev_init(dev), mg_backend_cpu_init()};
    struct mg_sched * sched       = mg_sched_new(backends, 2, 32);
    ck_assert_msg(sched != NULL && mg_sched_alloc_graph(sched, g), "%s", mg_last_error());
    const int where = mg_sched_get_tensor_backend(sched, t);
    ck_assert_msg(where == 0, "the scheduler put SQR on %s, not %s: does supports_op say yes?",
                  where >= 0 ? mg_backend_name(backends[where]) : "no backend", mg_backend_name(backends[0]));
    ck_assert_msg(mg_sched_n_splits(sched) == 1 && mg_sched_n_copies(sched) == 1,
                  "%d splits and %d copies; with SQR on the device, one split and one copy (x)",
                  mg_sched_n_splits(sched), mg_sched_n_copies(sched));
    mg_sched_free(sched);
    mg_backend_free(backends[0]);
    mg_backend_free(backends[1]);
    mg_backend_buffer_free(weights);
    mg_free(ctx);
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s  = suite_create("vulkan ex1 sqr");
    TCase * tc = tcase_create("sqr");
    tcase_add_test(tc, supports_sqr);                        // 2 points
    tcase_add_test(tc, sqr_like_the_cpu);                    // 5 points
    tcase_add_test(tc, scheduler_keeps_sqr_on_the_device);   // 3 points
    suite_add_tcase(s, tc);
    return s;
}
