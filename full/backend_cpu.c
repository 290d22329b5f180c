//@file full
// backend_cpu.c - the engine of chapters 01-09 as a backend: host memory as
// its buffer type, every op supported, a graph computed by the same
// mg_graph_compute on the same thread pool (ggml-cpu/ggml-cpu.cpp:
// ggml_backend_cpu_device_*, ggml_backend_cpu_graph_compute,
// ggml_backend_cpu_graph_plan_*; ggml-backend.cpp: the CPU buffer type).
#define _POSIX_C_SOURCE 200809L
#include "backend.h"
#include "plan.h"
#include "threadpool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// ---------------------------------------------------------------------------
// The CPU buffer type: malloc'd host memory. Its tensors' data pointers are
// real addresses, so set/get/clear are memcpy and memset.
// ---------------------------------------------------------------------------

enum { CPU_ALIGNMENT = 64 };   // a cache line, as ggml's TENSOR_ALIGNMENT is for AVX-512 loads

static void cpu_buffer_free(mg_backend_buffer_t buf) {
    free(buf->context);
    free(buf);
}

static void * cpu_buffer_get_base(mg_backend_buffer_t buf) { return buf->context; }

static void cpu_buffer_set_tensor(mg_backend_buffer_t buf, struct mg_tensor * t, const void * data, size_t offset,
                                  size_t size) {
    (void) buf;
    memcpy((char *) t->data + offset, data, size);
}

static void cpu_buffer_get_tensor(mg_backend_buffer_t buf, const struct mg_tensor * t, void * data, size_t offset,
                                  size_t size) {
    (void) buf;
    memcpy(data, (const char *) t->data + offset, size);
}

static void cpu_buffer_clear(mg_backend_buffer_t buf, uint8_t value) { memset(buf->context, value, buf->size); }

static const char * cpu_buft_get_name(mg_backend_buffer_type_t buft) {
    (void) buft;
    return "CPU";
}

static mg_backend_buffer_t cpu_buft_alloc_buffer(mg_backend_buffer_type_t buft, size_t size) {
    // aligned_alloc wants a multiple of the alignment; a zero-byte buffer still gets one line.
    const size_t rounded = size == 0 ? CPU_ALIGNMENT : (size + CPU_ALIGNMENT - 1) / CPU_ALIGNMENT * CPU_ALIGNMENT;
    void *                     mem = aligned_alloc(CPU_ALIGNMENT, rounded);
    struct mg_backend_buffer * buf = malloc(sizeof *buf);
    if (mem == NULL || buf == NULL) {
        free(mem);
        free(buf);
        mg_set_error("cannot allocate a CPU buffer of %zu bytes", size);
        return NULL;
    }
    *buf = (struct mg_backend_buffer) {
        .iface   = {cpu_buffer_free, cpu_buffer_get_base, cpu_buffer_set_tensor, cpu_buffer_get_tensor,
                    cpu_buffer_clear},
        .buft    = buft,
        .context = mem,
        .size    = size,
    };
    return buf;
}

static size_t cpu_buft_get_alignment(mg_backend_buffer_type_t buft) {
    (void) buft;
    return CPU_ALIGNMENT;
}

static bool cpu_buft_is_host(mg_backend_buffer_type_t buft) {
    (void) buft;
    return true;
}

static struct mg_backend_buffer_type cpu_buft = {
    .iface = {cpu_buft_get_name, cpu_buft_alloc_buffer, cpu_buft_get_alignment, cpu_buft_is_host},
};

mg_backend_buffer_type_t mg_backend_cpu_buffer_type(void) {
    cpu_buft.device = mg_backend_cpu_device();
    return &cpu_buft;
}

// ---------------------------------------------------------------------------
// The CPU backend: a thread pool and a work buffer.
// ---------------------------------------------------------------------------

struct cpu_backend {
    struct mg_threadpool * pool;        // the pool graphs run on
    bool                   own_pool;    // made here (freed here) or lent by the caller
    int                    n_threads;
    void *                 work;        // the work buffer of mg_backend_graph_compute, grown as needed
    size_t                 work_size;
};

static const char * cpu_backend_get_name(mg_backend_t backend) {
    (void) backend;
    return "CPU";
}

static void cpu_backend_free(mg_backend_t backend) {
    struct cpu_backend * ctx = backend->context;
    if (ctx->own_pool) mg_threadpool_free(ctx->pool);
    free(ctx->work);
    free(ctx);
    free(backend);
}

static bool grow_work(struct cpu_backend * ctx, size_t size) {
    if (size <= ctx->work_size) return true;
    void * work = malloc(size);
    if (work == NULL) {
        mg_set_error("cannot allocate a work buffer of %zu bytes", size);
        return false;
    }
    free(ctx->work);
    ctx->work      = work;
    ctx->work_size = size;
    return true;
}

static struct mg_threadpool * cpu_pool(struct cpu_backend * ctx) {
    if (ctx->pool == NULL) {
        ctx->pool     = mg_threadpool_new(ctx->n_threads);
        ctx->own_pool = true;
    }
    return ctx->pool;
}

// A graph seen once (a split of the scheduler): planned, then run
// (ggml_backend_cpu_graph_compute, which plans every call too).
static bool cpu_backend_graph_compute(mg_backend_t backend, struct mg_cgraph * g) {
    struct cpu_backend * ctx  = backend->context;
    struct mg_cplan      plan = mg_graph_plan(g, ctx->n_threads);
    if (!grow_work(ctx, plan.work_size)) return false;
    plan.work_data  = ctx->work;
    plan.threadpool = cpu_pool(ctx);
    mg_graph_compute(g, &plan);
    return true;
}

static mg_backend_graph_plan_t cpu_backend_graph_plan_create(mg_backend_t backend, struct mg_cgraph * g);
static void cpu_backend_graph_plan_free(mg_backend_t backend, mg_backend_graph_plan_t plan);
static bool cpu_backend_graph_plan_compute(mg_backend_t backend, mg_backend_graph_plan_t plan);

mg_backend_t mg_backend_cpu_init(void) {
    struct mg_backend *  backend = malloc(sizeof *backend);
    struct cpu_backend * ctx     = calloc(1, sizeof *ctx);
    if (backend == NULL || ctx == NULL) {
        free(backend);
        free(ctx);
        mg_set_error("cannot allocate the CPU backend");
        return NULL;
    }
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    ctx->n_threads   = cores > 0 ? (int) cores : 1;
    *backend         = (struct mg_backend) {
        .iface   = {cpu_backend_get_name, cpu_backend_free, cpu_backend_graph_compute, NULL,
                    cpu_backend_graph_plan_create, cpu_backend_graph_plan_free, cpu_backend_graph_plan_compute},
        .device  = mg_backend_cpu_device(),
        .context = ctx,
    };
    return backend;
}

bool mg_backend_is_cpu(mg_backend_t backend) {
    return backend != NULL && backend->iface.get_name == cpu_backend_get_name;
}

void mg_backend_cpu_set_threadpool(mg_backend_t backend, struct mg_threadpool * pool, int n_threads) {
    struct cpu_backend * ctx = backend->context;
    if (ctx->own_pool) mg_threadpool_free(ctx->pool);
    ctx->pool      = pool;
    ctx->own_pool  = false;
    ctx->n_threads = pool != NULL ? mg_threadpool_n_threads(pool) : (n_threads > 0 ? n_threads : 1);
}

// ---------------------------------------------------------------------------
// Plans: a graph planned once and computed many times. A plan holds no
// memory of its own: every plan and graph of this backend shares its one work
// buffer (nodes run one at a time, so do graphs), grown to the largest plan,
// as chapter 09's session kept one.
// ---------------------------------------------------------------------------

struct cpu_plan {
    struct mg_cgraph * graph;
    struct mg_cplan    cplan;
};

static mg_backend_graph_plan_t cpu_backend_graph_plan_create(mg_backend_t backend, struct mg_cgraph * g) {
    struct cpu_backend * ctx  = backend->context;
    struct cpu_plan *    plan = malloc(sizeof *plan);
    if (plan == NULL) {
        mg_set_error("cannot allocate a CPU plan");
        return NULL;
    }
    plan->graph = g;
    plan->cplan = mg_graph_plan(g, ctx->n_threads);
    if (!grow_work(ctx, plan->cplan.work_size)) {
        free(plan);
        return NULL;
    }
    plan->cplan.work_data  = ctx->work;
    plan->cplan.threadpool = cpu_pool(ctx);
    return plan;
}

static void cpu_backend_graph_plan_free(mg_backend_t backend, mg_backend_graph_plan_t plan) {
    (void) backend;
    free(plan);
}

// The whole CPU path of a decode call: the loop of chapter 08, unchanged.
// The work buffer is looked up again in case a later plan grew it.
static bool cpu_backend_graph_plan_compute(mg_backend_t backend, mg_backend_graph_plan_t p) {
    struct cpu_backend * ctx  = backend->context;
    struct cpu_plan *    plan = p;
    plan->cplan.work_data     = ctx->work;
    mg_graph_compute(plan->graph, &plan->cplan);
    return true;
}

const struct mg_cplan * mg_backend_cpu_plan_cplan(mg_backend_graph_plan_t plan) {
    return &((struct cpu_plan *) plan)->cplan;
}

void mg_backend_cpu_work_buffer(mg_backend_t backend, void ** data, size_t * size) {
    const struct cpu_backend * ctx = backend->context;
    *data = ctx->work;
    *size = ctx->work_size;
}

// ---------------------------------------------------------------------------
// The CPU device
// ---------------------------------------------------------------------------

static const char * cpu_dev_get_name(mg_backend_dev_t dev) {
    (void) dev;
    return "CPU";
}

// The "model name" line of /proc/cpuinfo, as ggml's CPU device describes
// itself on Linux; "CPU" where there is none.
static const char * cpu_dev_get_description(mg_backend_dev_t dev) {
    (void) dev;
    static char description[128] = "";
    if (description[0] != '\0') return description;
    snprintf(description, sizeof description, "CPU");
    FILE * f = fopen("/proc/cpuinfo", "r");
    if (f == NULL) return description;
    char line[256];
    while (fgets(line, sizeof line, f) != NULL) {
        const char * colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) == 0 && colon != NULL) {
            snprintf(description, sizeof description, "%s", colon + 2);
            description[strcspn(description, "\n")] = '\0';
            break;
        }
    }
    fclose(f);
    return description;
}

// Physical memory and what is available of it (ggml_backend_cpu_device_get_memory).
static void cpu_dev_get_memory(mg_backend_dev_t dev, size_t * free_bytes, size_t * total_bytes) {
    (void) dev;
    const long page = sysconf(_SC_PAGESIZE);
    const long all  = sysconf(_SC_PHYS_PAGES);
    const long avail = sysconf(_SC_AVPHYS_PAGES);
    *total_bytes = page > 0 && all > 0 ? (size_t) page * (size_t) all : 0;
    *free_bytes  = page > 0 && avail > 0 ? (size_t) page * (size_t) avail : 0;
}

static enum mg_backend_dev_type cpu_dev_get_type(mg_backend_dev_t dev) {
    (void) dev;
    return MG_BACKEND_DEVICE_TYPE_CPU;
}

static mg_backend_t cpu_dev_init_backend(mg_backend_dev_t dev) {
    (void) dev;
    return mg_backend_cpu_init();
}

static mg_backend_buffer_type_t cpu_dev_get_buffer_type(mg_backend_dev_t dev) {
    (void) dev;
    return mg_backend_cpu_buffer_type();
}

// Every op of the engine has a CPU kernel: that is what makes the CPU the
// scheduler's backend of last resort.
static bool cpu_dev_supports_op(mg_backend_dev_t dev, const struct mg_tensor * op) {
    (void) dev;
    (void) op;
    return true;
}

// The CPU reads any memory whose pointers are host addresses.
static bool cpu_dev_supports_buft(mg_backend_dev_t dev, mg_backend_buffer_type_t buft) {
    (void) dev;
    return mg_backend_buft_is_host(buft);
}

static struct mg_backend_device cpu_device = {
    .iface = {cpu_dev_get_name, cpu_dev_get_description, cpu_dev_get_memory, cpu_dev_get_type, cpu_dev_init_backend,
              cpu_dev_get_buffer_type, cpu_dev_supports_op, cpu_dev_supports_buft},
};

mg_backend_dev_t mg_backend_cpu_device(void) { return &cpu_device; }
