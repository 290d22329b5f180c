// test_backend.c - the backend interface (full/backend.h) through its CPU
// implementation: the registry, a CPU buffer's set/get/clear, tensor copies,
// and a graph computed by the CPU backend, planned once or each time.
//
// Values are checked against what was written or against sums done here in
// plain C, never against the backend's own earlier output. Then the command
// line: mg --list-devices in llama.cpp's format, and -ngl / -dev refused
// with a reason in a build that has only the CPU.
#include "harness.h"
#include "arena.h"
#include "backend.h"
#include "ops.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

START_TEST(test_registry_has_the_cpu_last) {
    const size_t n = mg_backend_dev_count();
    ck_assert_uint_ge(n, 1);
    mg_backend_dev_t cpu = mg_backend_dev_get(n - 1);
    ck_assert_ptr_eq(cpu, mg_backend_cpu_device());
    ck_assert_str_eq(mg_backend_dev_name(cpu), "CPU");
    ck_assert_int_eq(mg_backend_dev_type(cpu), MG_BACKEND_DEVICE_TYPE_CPU);
    ck_assert_ptr_null(mg_backend_dev_get(n));
    ck_assert_ptr_eq(mg_backend_dev_by_name("cpu"), cpu);   // names compare without case, as in ggml
    size_t free_bytes = 0, total = 0;
    mg_backend_dev_memory(cpu, &free_bytes, &total);
    ck_assert_uint_gt(total, 0);
    ck_assert_uint_le(free_bytes, total);
    ck_assert(strlen(mg_backend_dev_description(cpu)) > 0);
}
END_TEST

START_TEST(test_unknown_device_names_the_known_ones) {
    ck_assert_ptr_null(mg_backend_dev_by_name("Vulkan7"));
    ck_assert_msg(strstr(mg_last_error(), "'Vulkan7'") != NULL && strstr(mg_last_error(), "CPU") != NULL, "%s",
                  mg_last_error());
}
END_TEST

// A 2x3 F32 tensor header in a no_alloc context, to be placed in a buffer.
static struct mg_tensor * header_2x3(struct mg_context * ctx, const char * name) {
    return mg_set_name(mg_new_tensor_2d(ctx, MG_TYPE_F32, 3, 2), name);
}

START_TEST(test_cpu_buffer_set_get_clear) {
    mg_backend_buffer_type_t buft = mg_backend_cpu_buffer_type();
    ck_assert(mg_backend_buft_is_host(buft));
    ck_assert_uint_eq(mg_backend_buft_get_alignment(buft), 64);
    mg_backend_buffer_t buf = mg_backend_buft_alloc_buffer(buft, 100);
    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_eq(mg_backend_buffer_get_size(buf), 100);
    ck_assert_uint_eq((uintptr_t) mg_backend_buffer_get_base(buf) % 64, 0);

    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 4 * mg_tensor_overhead(), .no_alloc = true});
    struct mg_tensor *  t   = header_2x3(ctx, "t");
    char *              base = mg_backend_buffer_get_base(buf);
    ck_assert(mg_backend_tensor_alloc(buf, t, base + 64));
    ck_assert_ptr_eq(t->buffer, buf);

    const float in[6] = {1, -2, 3.5f, 0, 1e-7f, -1e30f};
    float       out[6];
    mg_backend_tensor_set(t, in, 0, sizeof in);
    mg_backend_tensor_get(t, out, 0, sizeof out);
    ck_assert_mem_eq(in, out, sizeof in);
    mg_backend_tensor_get(t, out, 2 * sizeof(float), sizeof(float));   // a part, at an offset
    ck_assert_float_eq(out[0], 3.5f);

    mg_backend_buffer_clear(buf, 0xab);
    uint8_t bytes[24];
    mg_backend_tensor_get(t, bytes, 0, sizeof bytes);
    for (size_t i = 0; i < sizeof bytes; i++) ck_assert_uint_eq(bytes[i], 0xab);

    // 24 bytes at offset 80 of a 100-byte buffer do not fit.
    struct mg_tensor * u = header_2x3(ctx, "u");
    ck_assert(!mg_backend_tensor_alloc(buf, u, base + 80));
    ck_assert_msg(strstr(mg_last_error(), "'u'") != NULL && strstr(mg_last_error(), "does not fit") != NULL, "%s",
                  mg_last_error());
    ck_assert_ptr_null(u->data);
    mg_free(ctx);
    mg_backend_buffer_free(buf);
}
END_TEST

START_TEST(test_tensor_copy_between_buffers) {
    mg_backend_buffer_t a = mg_backend_buft_alloc_buffer(mg_backend_cpu_buffer_type(), 64);
    mg_backend_buffer_t b = mg_backend_buft_alloc_buffer(mg_backend_cpu_buffer_type(), 64);
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 4 * mg_tensor_overhead(), .no_alloc = true});
    struct mg_tensor *  src = header_2x3(ctx, "src");
    struct mg_tensor *  dst = header_2x3(ctx, "dst");
    ck_assert(mg_backend_tensor_alloc(a, src, mg_backend_buffer_get_base(a)));
    ck_assert(mg_backend_tensor_alloc(b, dst, mg_backend_buffer_get_base(b)));
    const float in[6] = {6, 5, 4, 3, 2, 1};
    float       out[6] = {0};
    mg_backend_tensor_set(src, in, 0, sizeof in);
    mg_backend_tensor_copy(src, dst);
    mg_backend_tensor_get(dst, out, 0, sizeof out);
    ck_assert_mem_eq(in, out, sizeof in);
    mg_free(ctx);
    mg_backend_buffer_free(a);
    mg_backend_buffer_free(b);
}
END_TEST

// c = a + b, with every tensor in one CPU buffer, computed by the CPU
// backend: once through graph_compute, twice through one plan.
START_TEST(test_cpu_backend_computes_a_graph) {
    struct mg_context * ctx = mg_init((struct mg_init_params) {
        .mem_size = 8 * mg_tensor_overhead() + mg_graph_overhead_custom(16), .no_alloc = true});
    struct mg_tensor * a = header_2x3(ctx, "a");
    struct mg_tensor * b = header_2x3(ctx, "b");
    struct mg_tensor * c = mg_add(ctx, a, b);
    struct mg_cgraph * g = mg_new_graph_custom(ctx, 16);
    mg_build_forward_expand(g, c);

    mg_backend_buffer_t buf  = mg_backend_buft_alloc_buffer(mg_backend_cpu_buffer_type(), 3 * 64);
    char *              base = mg_backend_buffer_get_base(buf);
    ck_assert(mg_backend_tensor_alloc(buf, a, base));
    ck_assert(mg_backend_tensor_alloc(buf, b, base + 64));
    ck_assert(mg_backend_tensor_alloc(buf, c, base + 128));

    mg_backend_t be = mg_backend_dev_init(mg_backend_cpu_device());
    ck_assert_ptr_nonnull(be);
    ck_assert_str_eq(mg_backend_name(be), "CPU");
    ck_assert(mg_backend_is_cpu(be));
    ck_assert(mg_backend_supports_op(be, c));
    ck_assert(mg_backend_supports_buft(be, mg_backend_cpu_buffer_type()));

    const float av[6] = {1, 2, 3, 4, 5, 6}, bv[6] = {0.5f, -1, 10, -4, 0, 1e6f};
    float       cv[6];
    mg_backend_tensor_set(a, av, 0, sizeof av);
    mg_backend_tensor_set(b, bv, 0, sizeof bv);
    ck_assert(mg_backend_graph_compute(be, g));
    mg_backend_synchronize(be);
    mg_backend_tensor_get(c, cv, 0, sizeof cv);
    for (int i = 0; i < 6; i++) ck_assert_float_eq(cv[i], av[i] + bv[i]);

    mg_backend_graph_plan_t plan = mg_backend_graph_plan_create(be, g);
    ck_assert_ptr_nonnull(plan);
    for (int run = 0; run < 2; run++) {
        const float bw[6] = {(float) run, 1, 2, 3, 4, 5};
        mg_backend_tensor_set(b, bw, 0, sizeof bw);
        ck_assert(mg_backend_graph_plan_compute(be, plan));
        mg_backend_tensor_get(c, cv, 0, sizeof cv);
        for (int i = 0; i < 6; i++) ck_assert_float_eq(cv[i], av[i] + bw[i]);
    }
    mg_backend_graph_plan_free(be, plan);
    mg_backend_free(be);
    mg_backend_buffer_free(buf);
    mg_free(ctx);
}
END_TEST

static char dir[64];
static void setup(void) { mg_test_make_dir(dir, sizeof dir, "backend"); }
static void teardown(void) { mg_test_remove_dir(dir); }

// Whether this build has a device besides the CPU (make VULKAN=1 on a
// machine with a Vulkan driver); the default build has none.
static bool have_gpu(void) { return mg_backend_dev_count() > 1; }

// llama.cpp lists the devices that are not the CPU (common_print_available_devices):
// "  NAME: DESCRIPTION (TOTAL MiB, FREE MiB free)", or "(none)".
START_TEST(test_list_devices) {
    struct mg_test_run r = mg_test_run_mg(dir, NULL, NULL, "--list-devices");
    ck_assert_int_eq(r.status, 0);
    char expected[4096] = "Available devices:\n";
    for (size_t i = 0; i + 1 < mg_backend_dev_count(); i++) {
        mg_backend_dev_t dev = mg_backend_dev_get(i);
        size_t free_bytes, total;
        mg_backend_dev_memory(dev, &free_bytes, &total);
        const size_t used = strlen(expected);
        snprintf(expected + used, sizeof expected - used, "  %s: %s (%zu MiB, %zu MiB free)\n", mg_backend_dev_name(dev),
                 mg_backend_dev_description(dev), total >> 20, free_bytes >> 20);
    }
    if (!have_gpu()) strcat(expected, "  (none)\n");
    ck_assert_str_eq(r.out, expected);
    mg_test_run_free(&r);
}
END_TEST

START_TEST(test_device_flags_refused_clearly) {
    const char * model = mg_test_root("models/fortune-toy-q8_0.gguf");
    // Without a GPU device -ngl has nothing to offload to (with one, the demo
    // model offloads: tests/vulkan's test_ngl_demo_model_q8_0).
    if (!have_gpu()) mg_test_expect_mg_error(dir, "-ngl 99", "no GPU device", "run -m '%s' -p hi -n 1 -ngl 99", model);
    mg_test_expect_mg_error(dir, "-ngl must be 0 or more", "-1", "run -m '%s' -p hi -n 1 -ngl -1", model);
    mg_test_expect_mg_error(dir, "-dev Vulkan7", "this build has: ", "run -m '%s' -p hi -n 1 -dev Vulkan7", model);
    mg_test_expect_mg_error(dir, "-dev CPU", "names a GPU device", "logits -m '%s' -p hi -dev CPU", model);
    // -ngl 0 is the CPU, as without it.
    struct mg_test_run r = mg_test_run_mg(dir, NULL, NULL, "run -m '%s' -p hi -n 2 --temp 0 -ngl 0", model);
    ck_assert_msg(r.status == 0, "%s", r.err);
    mg_test_run_free(&r);
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("backend");
    MG_TCASE(s, "backend", test_registry_has_the_cpu_last, test_unknown_device_names_the_known_ones,
                test_cpu_buffer_set_get_clear, test_tensor_copy_between_buffers, test_cpu_backend_computes_a_graph);
    TCase * cli = MG_TCASE(s, "cli", test_list_devices, test_device_flags_refused_clearly);
    tcase_set_timeout(cli, 120);
    tcase_add_checked_fixture(cli, setup, teardown);
    return s;
}
