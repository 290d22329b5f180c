// test_sched.c - the scheduler (full/backend_sched.h) on a known graph, with a
// second backend made here: "CPU2", a fake device that runs only MUL_MAT and
// ADD and whose memory the CPU may not read directly (its buffer type says
// it is not host memory, as a GPU's would), so every crossing is a copy and
// CPU2's tensors get a buffer of CPU2's type from the scheduler.
//
//     x (input)  W1 (CPU2)       b (CPU2)        W2 (CPU)
//        \       /                  |               |
//      y = W1 x   y2 = y + y   z = silu(y2)   w = z + b   o = W2 w
//      ---------- CPU2 -----   --- CPU ---    -- CPU2 --  -- CPU --
//
// The splits, the copies and their bytes follow from ggml's rules (backend_sched.h)
// and are asserted as derived by hand there; o is checked against the same
// arithmetic done here in plain C, and bit for bit against the same graph
// run on the CPU alone (scheduling moves bytes, it must not change them).
#define _POSIX_C_SOURCE 200809L   // fileno, mkstemp
#include "harness.h"
#include "arena.h"
#include "backend.h"
#include "ops.h"
#include "plan.h"
#include "graph.h"
#include "backend_sched.h"
#include "trace.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// ---------------------------------------------------------------------------
// The fake device: malloc'd memory reached through set/get, the engine's own
// kernels on one thread, and a count of what it ran.
// ---------------------------------------------------------------------------

static int cpu2_nodes_run = 0;
static int cpu2_unsupported_run = 0;

static void buf_free(mg_backend_buffer_t buf) {
    free(buf->context);
    free(buf);
}
static void * buf_base(mg_backend_buffer_t buf) { return buf->context; }
static void buf_set(mg_backend_buffer_t buf, struct mg_tensor * t, const void * d, size_t off, size_t n) {
    (void) buf;
    memcpy((char *) t->data + off, d, n);
}
static void buf_get(mg_backend_buffer_t buf, const struct mg_tensor * t, void * d, size_t off, size_t n) {
    (void) buf;
    memcpy(d, (const char *) t->data + off, n);
}
static void buf_clear(mg_backend_buffer_t buf, uint8_t v) { memset(buf->context, v, buf->size); }

static const char * buft_name(mg_backend_buffer_type_t buft) {
    (void) buft;
    return "CPU2";
}
static mg_backend_buffer_t buft_alloc(mg_backend_buffer_type_t buft, size_t size) {
    struct mg_backend_buffer * buf = malloc(sizeof *buf);
    *buf = (struct mg_backend_buffer) {{buf_free, buf_base, buf_set, buf_get, buf_clear}, buft, calloc(1, size), size};
    return buf;
}
static size_t buft_align(mg_backend_buffer_type_t buft) {
    (void) buft;
    return 64;
}
static bool buft_is_host(mg_backend_buffer_type_t buft) {
    (void) buft;
    return false;   // the point of the fake: the CPU must not read it directly
}
static struct mg_backend_buffer_type cpu2_buft = {{buft_name, buft_alloc, buft_align, buft_is_host}, NULL, NULL};

static bool cpu2_supports_op(mg_backend_dev_t dev, const struct mg_tensor * op) {
    (void) dev;
    switch (op->op) {
        case MG_OP_NONE: case MG_OP_VIEW: case MG_OP_RESHAPE: case MG_OP_PERMUTE: case MG_OP_TRANSPOSE:
        case MG_OP_MUL_MAT: case MG_OP_ADD: return true;
        default: return false;
    }
}

static const char * be_name(mg_backend_t be) {
    (void) be;
    return "CPU2";
}
static void be_free(mg_backend_t be) { free(be); }
static bool be_compute(mg_backend_t be, struct mg_cgraph * g) {
    for (int i = 0; i < g->n_nodes; i++) {
        if (!mg_backend_supports_op(be, g->nodes[i])) cpu2_unsupported_run++;
        cpu2_nodes_run++;
    }
    struct mg_cplan plan = mg_graph_plan(g, 1);
    plan.work_data       = plan.work_size ? malloc(plan.work_size) : NULL;
    mg_graph_compute(g, &plan);
    free(plan.work_data);
    return true;
}

static const char * dev_name(mg_backend_dev_t dev) {
    (void) dev;
    return "CPU2";
}
static const char * dev_desc(mg_backend_dev_t dev) {
    (void) dev;
    return "a test's fake device: MUL_MAT and ADD only";
}
static void dev_memory(mg_backend_dev_t dev, size_t * free_bytes, size_t * total) {
    (void) dev;
    *free_bytes = 1 << 20, *total = 1 << 20;
}
static enum mg_backend_dev_type dev_type(mg_backend_dev_t dev) {
    (void) dev;
    return MG_BACKEND_DEVICE_TYPE_GPU;
}
static struct mg_backend_device cpu2_device;
static mg_backend_t dev_init(mg_backend_dev_t dev) {
    struct mg_backend * be = malloc(sizeof *be);
    *be = (struct mg_backend) {{be_name, be_free, be_compute, NULL, NULL, NULL, NULL}, dev, NULL};
    return be;
}
static mg_backend_buffer_type_t dev_buft(mg_backend_dev_t dev) {
    (void) dev;
    return &cpu2_buft;
}
static bool dev_supports_buft(mg_backend_dev_t dev, mg_backend_buffer_type_t buft) {
    (void) dev;
    return buft == &cpu2_buft;
}
static struct mg_backend_device cpu2_device = {
    {dev_name, dev_desc, dev_memory, dev_type, dev_init, dev_buft, cpu2_supports_op, dev_supports_buft}, NULL};

// ---------------------------------------------------------------------------
// The graph of the drawing at the top, its weights placed and filled.
// ---------------------------------------------------------------------------

struct known_graph {
    struct mg_context * ctx;
    struct mg_cgraph *  g;
    struct mg_tensor *  x, *W1, *b, *W2, *y, *y2, *z, *w, *o;
    mg_backend_buffer_t cpu2_buf, cpu_buf;
    float               x_v[8], W1_v[12], b_v[6], W2_v[15];
};

static void place(mg_backend_buffer_t buf, size_t * used, struct mg_tensor * t, const float * v) {
    ck_assert(mg_backend_tensor_alloc(buf, t, (char *) mg_backend_buffer_get_base(buf) + *used));
    mg_backend_tensor_set(t, v, 0, mg_nbytes(t));
    *used += 64;
}

static void fill(float * v, int n, float scale, float shift) {
    for (int i = 0; i < n; i++) v[i] = scale * (float) ((i * 7) % 11 - 5) + shift;
}

// weights_on_cpu2: W1 and b in CPU2's memory (else all weights in the CPU's).
static void build_known_graph(struct known_graph * k, bool weights_on_cpu2) {
    k->ctx = mg_init((struct mg_init_params) {.mem_size = 32 * mg_tensor_overhead() + mg_graph_overhead_custom(64),
                                              .no_alloc = true});
    k->x  = mg_set_name(mg_new_tensor_2d(k->ctx, MG_TYPE_F32, 4, 2), "x");
    k->W1 = mg_set_name(mg_new_tensor_2d(k->ctx, MG_TYPE_F32, 4, 3), "W1");
    k->b  = mg_set_name(mg_new_tensor_2d(k->ctx, MG_TYPE_F32, 3, 2), "b");
    k->W2 = mg_set_name(mg_new_tensor_2d(k->ctx, MG_TYPE_F32, 3, 5), "W2");
    k->x->flags |= MG_TENSOR_FLAG_INPUT;
    k->y  = mg_set_name(mg_mul_mat(k->ctx, k->W1, k->x), "y");
    k->y2 = mg_set_name(mg_add(k->ctx, k->y, k->y), "y2");
    k->z  = mg_set_name(mg_silu(k->ctx, k->y2), "z");
    k->w  = mg_set_name(mg_add(k->ctx, k->z, k->b), "w");
    k->o  = mg_set_name(mg_mul_mat(k->ctx, k->W2, k->w), "o");
    k->o->flags |= MG_TENSOR_FLAG_OUTPUT;
    k->g = mg_new_graph_custom(k->ctx, 64);
    mg_build_forward_expand(k->g, k->o);

    fill(k->x_v, 8, 0.25f, 0.1f);
    fill(k->W1_v, 12, 0.5f, -0.2f);
    fill(k->b_v, 6, 1.0f, 0.3f);
    fill(k->W2_v, 15, -0.75f, 0.05f);
    k->cpu_buf  = mg_backend_buft_alloc_buffer(mg_backend_cpu_buffer_type(), 4 * 64);
    k->cpu2_buf = weights_on_cpu2 ? mg_backend_buft_alloc_buffer(&cpu2_buft, 4 * 64) : k->cpu_buf;
    size_t used_cpu = 0, used_cpu2 = 0;
    size_t * used_w = weights_on_cpu2 ? &used_cpu2 : &used_cpu;
    place(k->cpu2_buf, used_w, k->W1, k->W1_v);
    place(k->cpu2_buf, used_w, k->b, k->b_v);
    place(k->cpu_buf, &used_cpu, k->W2, k->W2_v);
}

static void free_known_graph(struct known_graph * k) {
    if (k->cpu2_buf != k->cpu_buf) mg_backend_buffer_free(k->cpu2_buf);
    mg_backend_buffer_free(k->cpu_buf);
    mg_free(k->ctx);
}

// o of the drawing, in plain C from the values put in.
static void reference_o(const struct known_graph * k, float o[10]) {
    float w[6];
    for (int n = 0; n < 2; n++) {
        for (int m = 0; m < 3; m++) {
            float y = 0;
            for (int i = 0; i < 4; i++) y += k->W1_v[m * 4 + i] * k->x_v[n * 4 + i];
            const float y2 = y + y;
            w[n * 3 + m]   = y2 / (1.0f + expf(-y2)) + k->b_v[n * 3 + m];
        }
        for (int m = 0; m < 5; m++) {
            float s = 0;
            for (int i = 0; i < 3; i++) s += k->W2_v[m * 3 + i] * w[n * 3 + i];
            o[n * 5 + m] = s;
        }
    }
}

static void assert_split(struct mg_sched * s, int i, const char * backend, int i_start, int i_end, const char * input,
                         const char * copy_name) {
    const struct mg_sched_split * sp = mg_sched_get_split(s, i);
    ck_assert_ptr_nonnull(sp);
    ck_assert_str_eq(mg_backend_name(mg_sched_get_backend(s, sp->backend)), backend);
    ck_assert_int_eq(sp->i_start, i_start);
    ck_assert_int_eq(sp->i_end, i_end);
    ck_assert_int_eq(sp->n_inputs, 1);
    ck_assert_str_eq(sp->inputs[0]->name, input);
    ck_assert_str_eq(sp->copies[0]->name, copy_name);
}

START_TEST(test_splits_and_copies_of_a_known_graph) {
    struct known_graph k;
    build_known_graph(&k, true);
    mg_backend_t backends[2] = {mg_backend_dev_init(&cpu2_device), mg_backend_cpu_init()};
    mg_backend_cpu_set_threadpool(backends[1], NULL, 2);
    struct mg_sched * s = mg_sched_new(backends, 2, 64);
    ck_assert_ptr_nonnull(s);
    ck_assert_msg(mg_sched_alloc_graph(s, k.g), "%s", mg_last_error());

    // Nodes in graph order: y y2 z w o (depth first from o).
    ck_assert_ptr_eq(k.g->nodes[0], k.y);
    ck_assert_ptr_eq(k.g->nodes[4], k.o);
    ck_assert_int_eq(mg_sched_get_tensor_backend(s, k.y), 0);    // pass 1: its weight W1 is on CPU2
    ck_assert_int_eq(mg_sched_get_tensor_backend(s, k.y2), 0);   // pass 2: after y, and CPU2 runs ADD
    ck_assert_int_eq(mg_sched_get_tensor_backend(s, k.z), 1);    // CPU2 has no SILU
    ck_assert_int_eq(mg_sched_get_tensor_backend(s, k.w), 0);    // pass 1: its weight b is on CPU2
    ck_assert_int_eq(mg_sched_get_tensor_backend(s, k.o), 1);    // pass 1: W2 is in the CPU's memory
    ck_assert_int_eq(mg_sched_get_tensor_backend(s, k.x), 1);    // a graph input: the CPU's

    ck_assert_int_eq(mg_sched_n_splits(s), 4);
    assert_split(s, 0, "CPU2", 0, 2, "x", "CPU2#x#0");
    assert_split(s, 1, "CPU", 2, 3, "y2", "CPU#y2#0");
    assert_split(s, 2, "CPU2", 3, 4, "z", "CPU2#z#0");
    assert_split(s, 3, "CPU", 4, 5, "w", "CPU#w#0");
    ck_assert_int_eq(mg_sched_n_copies(s), 4);
    ck_assert_uint_eq(mg_sched_copy_bytes(s), 8 * 4 + 3 * 6 * 4);   // x is 4x2 floats, y2 z w 3x2

    // CPU2's results and copies live in CPU2 memory, the CPU's in host memory.
    ck_assert_ptr_eq(mg_backend_tensor_buft(k.y), &cpu2_buft);
    ck_assert_ptr_eq(mg_backend_tensor_buft(mg_sched_get_split(s, 0)->copies[0]), &cpu2_buft);
    ck_assert_ptr_eq(mg_backend_tensor_buft(k.w), &cpu2_buft);
    ck_assert_ptr_eq(mg_backend_tensor_buft(k.z), mg_backend_cpu_buffer_type());
    ck_assert_ptr_eq(mg_backend_tensor_buft(k.o), mg_backend_cpu_buffer_type());

    mg_backend_tensor_set(k.x, k.x_v, 0, sizeof k.x_v);
    cpu2_nodes_run = cpu2_unsupported_run = 0;
    ck_assert(mg_sched_graph_compute(s, k.g));
    ck_assert_int_eq(cpu2_nodes_run, 3);   // y, y2, w
    ck_assert_int_eq(cpu2_unsupported_run, 0);

    float o[10], ref[10];
    mg_backend_tensor_get(k.o, o, 0, sizeof o);
    reference_o(&k, ref);
    for (int i = 0; i < 10; i++) ck_assert_msg(fabsf(o[i] - ref[i]) <= 1e-5f * (1 + fabsf(ref[i])), "o[%d] %g, %g", i, o[i], ref[i]);

    // The same graph on the CPU alone: the same bits.
    struct known_graph c;
    build_known_graph(&c, false);
    struct mg_sched * s1 = mg_sched_new(&backends[1], 1, 64);
    ck_assert(mg_sched_alloc_graph(s1, c.g));
    ck_assert_int_eq(mg_sched_n_splits(s1), 1);
    ck_assert_int_eq(mg_sched_n_copies(s1), 0);
    mg_backend_tensor_set(c.x, c.x_v, 0, sizeof c.x_v);
    ck_assert(mg_sched_graph_compute(s1, c.g));
    float o_cpu[10];
    mg_backend_tensor_get(c.o, o_cpu, 0, sizeof o_cpu);
    ck_assert_mem_eq(o, o_cpu, sizeof o);

    mg_sched_free(s1);
    free_known_graph(&c);
    mg_sched_free(s);
    free_known_graph(&k);
    mg_backend_free(backends[0]);
    mg_backend_free(backends[1]);
}
END_TEST

// The drawing of a planned graph (mg_graph_dump_dot_ext with the scheduler):
// one cluster per split in its backend's colour, each copy a box of its own
// in the split that reads it, fed by what it copies with its bytes, and the
// nodes that read a copy drawn reading it (never an edge from "outside").
static const char * after(const char * dot, const char * what) {
    const char * at = strstr(dot, what);
    ck_assert_msg(at != NULL, "the drawing has no \"%s\":\n%s", what, dot);
    return at;
}

// The DOT text of g: with extras x, or by the plain writer when x is NULL.
static char * draw(const struct mg_cgraph * g, const struct mg_dot_extras * x) {
    char path[] = "/tmp/mg_test_sched_dot_XXXXXX";
    const int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    const bool ok = x != NULL ? mg_graph_dump_dot_ext(g, path, x) : mg_graph_dump_dot(g, path);
    ck_assert_msg(ok, "%s", mg_last_error());
    size_t n;
    char * dot = mg_test_read_file(path, &n);
    ck_assert_ptr_nonnull(dot);
    unlink(path);
    return dot;
}

// The fill of the split cluster node i is drawn in, read back from the text:
// the fillcolor of the last "subgraph cluster_split" opened before its box.
static void cluster_fill_of_node(const char * dot, int i, char * fill, size_t size) {
    char box[32];
    snprintf(box, sizeof box, "\n  n%d [shape=record", i);
    const char * at = after(dot, box);
    const char * cluster = NULL;
    for (const char * p = strstr(dot, "subgraph cluster_split"); p != NULL && p < at; p = strstr(p + 1, "subgraph cluster_split")) {
        cluster = p;
    }
    ck_assert_msg(cluster != NULL, "n%d is in no split cluster:\n%s", i, dot);
    const char * colour = strstr(cluster, "fillcolor=\"");
    ck_assert(colour != NULL && colour < at);
    colour += strlen("fillcolor=\"");
    const size_t len = (size_t) (strchr(colour, '"') - colour);
    ck_assert_uint_lt(len, size);
    memcpy(fill, colour, len);
    fill[len] = '\0';
}

static int count_of(const char * dot, const char * what) {
    int n = 0;
    for (const char * p = strstr(dot, what); p != NULL; p = strstr(p + 1, what)) n++;
    return n;
}

START_TEST(test_dot_by_split) {
    struct known_graph k;
    build_known_graph(&k, true);
    mg_backend_t backends[2] = {mg_backend_dev_init(&cpu2_device), mg_backend_cpu_init()};
    struct mg_sched * s = mg_sched_new(backends, 2, 64);
    ck_assert(mg_sched_alloc_graph(s, k.g));
    ck_assert_int_eq(mg_sched_n_backends(s), 2);
    const struct mg_dot_extras x = {.sched = s, .max_layers = -1};
    char * dot = draw(k.g, &x);

    // Splits 0-3 in order: CPU2 (blue), CPU (green), CPU2, CPU.
    const char * s0 = after(dot, "subgraph cluster_split0 {\n  label=\"split 0: CPU2\"; style=\"rounded,filled\"; fillcolor=\"#dae8fc\"");
    const char * s1 = after(dot, "subgraph cluster_split1 {\n  label=\"split 1: CPU\"; style=\"rounded,filled\"; fillcolor=\"#d5e8d4\"");
    const char * s2 = after(dot, "subgraph cluster_split2 {\n  label=\"split 2: CPU2\"; style=\"rounded,filled\"; fillcolor=\"#dae8fc\"");
    const char * s3 = after(dot, "subgraph cluster_split3 {\n  label=\"split 3: CPU\"; style=\"rounded,filled\"; fillcolor=\"#d5e8d4\"");
    ck_assert(s0 < s1 && s1 < s2 && s2 < s3);
    // Each split holds its copy and its nodes: y y2 | z | w | o.
    const char * c0 = after(dot, "c0_0 [shape=record, style=\"dashed,filled\", fillcolor=\"#ffffff\", label=\"{copy to CPU2 | CPU2#x#0 | 32 bytes}\"]");
    const char * c1 = after(dot, "c1_0 [shape=record, style=\"dashed,filled\", fillcolor=\"#ffffff\", label=\"{copy to CPU | CPU#y2#0 | 24 bytes}\"]");
    ck_assert(s0 < c0 && c0 < s1 && s1 < c1 && c1 < s2);
    const char * n0 = after(dot, "  n0 [shape=record");
    const char * n1 = after(dot, "  n1 [shape=record");
    const char * n2 = after(dot, "  n2 [shape=record");
    const char * n4 = after(dot, "  n4 [shape=record");
    ck_assert(s0 < n0 && n0 < n1 && n1 < s1 && s1 < n2 && n2 < s2 && s3 < n4);
    // The copies' edges: from what they copy, with its bytes; the readers read the copy.
    after(dot, " -> c0_0 [style=bold, label=\"32 bytes\", fontsize=9];");
    after(dot, "  n1 -> c1_0 [style=bold, label=\"24 bytes\", fontsize=9];");
    after(dot, "  c0_0 -> n0 [label=\"src1\"");   // y = W1 x reads x's copy in CPU2
    after(dot, "  c1_0 -> n2 [label=\"src0\"");   // z = silu(y2) reads y2's copy in the CPU
    ck_assert_msg(strstr(dot, "outside") == NULL, "an edge from outside:\n%s", dot);
    // x, read only through its copy, still drawn as the input it is.
    after(dot, "  l2 [shape=record, style=\"rounded,filled\", fillcolor=\"#b6d7a8\", label=\"{x | ");
    after(dot, "  l2 -> c0_0 [style=bold");
    // Every node in the colour of the backend the scheduler gave it: y y2 w on CPU2, z o on the CPU.
    const char * want[5] = {"#dae8fc", "#dae8fc", "#d5e8d4", "#dae8fc", "#d5e8d4"};
    for (int i = 0; i < k.g->n_nodes; i++) {
        char fill[16];
        cluster_fill_of_node(dot, i, fill, sizeof fill);
        ck_assert_str_eq(fill, want[i]);
        ck_assert_str_eq(fill, mg_backend_dot_colour(mg_sched_get_tensor_backend(s, k.g->nodes[i])));
    }
    // One dashed box per copy, each with its bytes in the box and on its edge.
    ck_assert_int_eq(count_of(dot, "style=\"dashed,filled\""), mg_sched_n_copies(s));
    size_t bytes = 0;
    for (int sp = 0; sp < mg_sched_n_splits(s); sp++) {
        for (int j = 0; j < mg_sched_get_split(s, sp)->n_inputs; j++) {
            char box[64], edge[64];
            size_t b = 0;
            snprintf(box, sizeof box, "  c%d_%d [shape=record", sp, j);
            snprintf(edge, sizeof edge, " -> c%d_%d [style=bold, label=\"", sp, j);
            ck_assert_int_eq(sscanf(after(dot, edge) + strlen(edge), "%zu bytes", &b), 1);
            ck_assert_uint_eq(b, mg_nbytes(mg_sched_get_split(s, sp)->inputs[j]));
            char label[64];
            snprintf(label, sizeof label, " | %zu bytes}", b);
            ck_assert(strstr(after(dot, box), label) != NULL);
            bytes += b;
        }
    }
    ck_assert_uint_eq(bytes, mg_sched_copy_bytes(s));   // 32 + 24 + ...: 104 in all
    ck_assert_uint_eq(bytes, 104);
    // The backends' legend: each backend's name in its colour.
    after(dot, "label=\"backends\"");
    after(dot, "<tr><td bgcolor=\"#dae8fc\">0: CPU2</td></tr><tr><td bgcolor=\"#d5e8d4\">1: CPU</td></tr>");
    free(dot);
    mg_sched_free(s);
    free_known_graph(&k);
    mg_backend_free(backends[0]);
    mg_backend_free(backends[1]);
}
END_TEST

// A scheduler over the CPU alone has nothing to split: its drawing is the
// plain writer's, byte for byte (no split cluster, no backends' legend).
START_TEST(test_dot_one_backend_is_plain) {
    struct known_graph k;
    build_known_graph(&k, false);
    mg_backend_t cpu = mg_backend_cpu_init();
    struct mg_sched * s = mg_sched_new(&cpu, 1, 64);
    ck_assert(mg_sched_alloc_graph(s, k.g));
    ck_assert_int_eq(mg_sched_n_backends(s), 1);
    ck_assert_int_eq(mg_sched_n_copies(s), 0);
    const struct mg_dot_extras with_sched = {.sched = s, .max_layers = -1};
    const struct mg_dot_extras without    = {.max_layers = -1};
    char * by_sched = draw(k.g, &with_sched);
    char * plain    = draw(k.g, NULL);
    char * ext      = draw(k.g, &without);
    ck_assert_str_eq(by_sched, plain);
    ck_assert_str_eq(ext, plain);
    ck_assert_ptr_null(strstr(plain, "cluster_split"));
    ck_assert_ptr_null(strstr(plain, "cluster_backends"));
    free(by_sched);
    free(plain);
    free(ext);
    mg_sched_free(s);
    free_known_graph(&k);
    mg_backend_free(cpu);
}
END_TEST

// MG_TRACE=sched: the summary, each split with its nodes, each copy with its bytes.
START_TEST(test_sched_trace) {
    char path[] = "/tmp/mg_test_sched_XXXXXX";
    const int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert(mg_trace_set("sched"));
    fflush(stderr);
    const int saved = dup(2);
    dup2(fd, 2);

    struct known_graph k;
    build_known_graph(&k, true);
    mg_backend_t backends[2] = {mg_backend_dev_init(&cpu2_device), mg_backend_cpu_init()};
    struct mg_sched * s = mg_sched_new(backends, 2, 64);
    const bool ok = mg_sched_alloc_graph(s, k.g);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    ck_assert(ok);

    size_t n = 0;
    char * text = mg_test_read_file(path, &n);
    unlink(path);
    close(fd);
    ck_assert_ptr_nonnull(text);
    const char * expected[] = {
        "[sched] graph of 5 nodes: 4 splits, 4 copies, 104 bytes copied per compute\n",
        "[sched]   split 0: CPU2, nodes 0..1 (MUL_MAT y, ADD y2)\n",
        "[sched]     copy in x from CPU: 32 bytes\n",
        "[sched]   split 1: CPU, nodes 2..2 (SILU z)\n",
        "[sched]     copy in y2 from CPU2: 24 bytes\n",
        "[sched]   split 3: CPU, nodes 4..4 (MUL_MAT o)\n",
    };
    const char * at = text;
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++) {
        const char * hit = strstr(at, expected[i]);
        ck_assert_msg(hit != NULL, "missing, in order: %s\ntrace:\n%s", expected[i], text);
        at = hit;
    }
    free(text);
    mg_sched_free(s);
    free_known_graph(&k);
    mg_backend_free(backends[0]);
    mg_backend_free(backends[1]);
}
END_TEST

// Bad input: memory no backend given can read; a list without the CPU last.
START_TEST(test_sched_errors) {
    struct known_graph k;
    build_known_graph(&k, true);
    mg_backend_t cpu = mg_backend_cpu_init();
    struct mg_sched * s = mg_sched_new(&cpu, 1, 64);
    ck_assert(!mg_sched_alloc_graph(s, k.g));
    ck_assert_msg(strstr(mg_last_error(), "'W1'") != NULL && strstr(mg_last_error(), "CPU2 memory") != NULL, "%s",
                  mg_last_error());
    ck_assert(!mg_sched_graph_compute(s, k.g));
    ck_assert_msg(strstr(mg_last_error(), "mg_sched_alloc_graph") != NULL, "%s", mg_last_error());
    mg_sched_free(s);

    mg_backend_t wrong[2] = {cpu, mg_backend_dev_init(&cpu2_device)};
    ck_assert_ptr_null(mg_sched_new(wrong, 2, 64));
    ck_assert_msg(strstr(mg_last_error(), "last backend must be the CPU (it is CPU2)") != NULL, "%s", mg_last_error());
    mg_backend_free(wrong[1]);
    mg_backend_free(cpu);
    free_known_graph(&k);
}
END_TEST

// A registered device comes before the CPU, and -dev finds it by name.
START_TEST(test_register_device) {
    const size_t n = mg_backend_dev_count();
    mg_backend_dev_register(&cpu2_device);
    ck_assert_uint_eq(mg_backend_dev_count(), n + 1);
    ck_assert_ptr_eq(mg_backend_dev_get(n - 1), &cpu2_device);
    ck_assert_ptr_eq(mg_backend_dev_get(n), mg_backend_cpu_device());
    ck_assert_ptr_eq(mg_backend_dev_by_name("cpu2"), &cpu2_device);
}
END_TEST

Suite * mg_test_suite(void) {
    cpu2_buft.device = &cpu2_device;
    Suite * s  = suite_create("sched");
    TCase * tc = tcase_create("sched");
    tcase_add_test(tc, test_splits_and_copies_of_a_known_graph);
    tcase_add_test(tc, test_sched_trace);
    tcase_add_test(tc, test_dot_by_split);
    tcase_add_test(tc, test_dot_one_backend_is_plain);
    tcase_add_test(tc, test_sched_errors);
    tcase_add_test(tc, test_register_device);
    suite_add_tcase(s, tc);
    return s;
}
