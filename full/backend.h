//@file full
// backend.h - where a graph runs and where its bytes live: devices, buffer
// types, buffers and backends, after ggml's ggml-backend.h.
//
//     mg_backend_dev_t dev = mg_backend_dev_by_name("CPU");   // the registry
//     mg_backend_t     be  = mg_backend_dev_init(dev);        // a stream of work on it
//     mg_backend_buffer_t buf = mg_backend_buft_alloc_buffer(mg_backend_dev_buffer_type(dev), bytes);
//     mg_backend_tensor_alloc(buf, t, mg_backend_buffer_get_base(buf));   // t's bytes live there now
//     mg_backend_tensor_set(t, host_data, 0, nbytes);         // bytes in ...
//     mg_backend_graph_compute(be, g);                        // ... the graph run ...
//     mg_backend_tensor_get(t, host_data, 0, nbytes);         // ... bytes out
//
// Four objects, each answering one question:
//   - a device (ggml_backend_dev_t) is a piece of hardware the registry
//     found: its name ("CPU", "Vulkan0"), how much memory it has, which ops
//     it can run and which memory it can read;
//   - a buffer type (ggml_backend_buffer_type_t) is a kind of memory: host
//     RAM, or memory on a device that the CPU cannot dereference;
//   - a buffer (ggml_backend_buffer_t) is one allocation of that kind;
//     tensors are placed inside it, and their bytes are reached only through
//     its functions (set, get, clear), because a device pointer means
//     nothing to the CPU;
//   - a backend (ggml_backend_t) runs whole graphs on a device.
// Each object is a struct of function pointers (its "interface") and a
// context pointer that only its implementation understands: backend_cpu.c
// is one implementation, a GPU API is another, and the scheduler (backend_sched.h)
// sees only the interface.
//
// Why a whole graph per call and not an op per call: a GPU is driven by
// command buffers that are recorded, submitted and waited for; a call per op
// would pay that round trip 150 times per token. So the only compute entry
// point takes a graph, and the CPU backend's is one call into the same
// mg_graph_compute the engine always ran (nothing is added per node).
#pragma once

#include "graph.h"

typedef struct mg_backend_buffer_type * mg_backend_buffer_type_t;
typedef struct mg_backend_buffer *      mg_backend_buffer_t;
typedef struct mg_backend *             mg_backend_t;
typedef struct mg_backend_device *      mg_backend_dev_t;
typedef void *                          mg_backend_graph_plan_t;   // what a backend's plan is, only it knows

// ---------------------------------------------------------------------------
// Buffer types and buffers (ggml_backend_buffer_type_i, ggml_backend_buffer_i)
// ---------------------------------------------------------------------------

struct mg_backend_buffer_type_i {
    const char * (*get_name)(mg_backend_buffer_type_t buft);
    // NULL, with mg_last_error(), when the memory is not there.
    mg_backend_buffer_t (*alloc_buffer)(mg_backend_buffer_type_t buft, size_t size);
    size_t (*get_alignment)(mg_backend_buffer_type_t buft);   // tensors start at multiples of it
    bool   (*is_host)(mg_backend_buffer_type_t buft);         // may the CPU read tensor->data directly?
};

struct mg_backend_buffer_type {
    struct mg_backend_buffer_type_i iface;
    mg_backend_dev_t                device;
    void *                          context;
};

struct mg_backend_buffer_i {
    void   (*free_buffer)(mg_backend_buffer_t buf);
    void * (*get_base)(mg_backend_buffer_t buf);   // what tensor->data is an offset from
    // Bytes [offset, offset+size) of t, which lives in buf, from or to host memory.
    void   (*set_tensor)(mg_backend_buffer_t buf, struct mg_tensor * t, const void * data, size_t offset, size_t size);
    void   (*get_tensor)(mg_backend_buffer_t buf, const struct mg_tensor * t, void * data, size_t offset, size_t size);
    void   (*clear)(mg_backend_buffer_t buf, uint8_t value);   // every byte of the buffer
};

struct mg_backend_buffer {
    struct mg_backend_buffer_i iface;
    mg_backend_buffer_type_t   buft;
    void *                     context;
    size_t                     size;
};

const char *        mg_backend_buft_name(mg_backend_buffer_type_t buft);
mg_backend_buffer_t mg_backend_buft_alloc_buffer(mg_backend_buffer_type_t buft, size_t size);
size_t              mg_backend_buft_get_alignment(mg_backend_buffer_type_t buft);
bool                mg_backend_buft_is_host(mg_backend_buffer_type_t buft);

void   mg_backend_buffer_free(mg_backend_buffer_t buf);   // NULL is fine
void * mg_backend_buffer_get_base(mg_backend_buffer_t buf);
size_t mg_backend_buffer_get_size(mg_backend_buffer_t buf);
void   mg_backend_buffer_clear(mg_backend_buffer_t buf, uint8_t value);
bool   mg_backend_buffer_is_host(mg_backend_buffer_t buf);

// Place t at addr inside buf (ggml_backend_tensor_alloc): t->data = addr,
// t->buffer = buf. False, with mg_last_error(), if t does not fit there.
bool mg_backend_tensor_alloc(mg_backend_buffer_t buf, struct mg_tensor * t, void * addr);

// t's bytes from or to host memory, wherever t lives (ggml_backend_tensor_set,
// _get): a tensor with no buffer is in our own host memory (a context, a
// mapped file) and is memcpy'd. Out-of-range requests are programming errors
// and abort, as in ggml.
void mg_backend_tensor_set(struct mg_tensor * t, const void * data, size_t offset, size_t size);
void mg_backend_tensor_get(const struct mg_tensor * t, void * data, size_t offset, size_t size);
// src's bytes into dst, of the same size, across any two buffers
// (ggml_backend_tensor_copy): directly when one side is host memory,
// through a host bounce buffer otherwise.
void mg_backend_tensor_copy(const struct mg_tensor * src, struct mg_tensor * dst);

// The buffer type a tensor's memory is of: its buffer's, or the CPU's for a
// tensor in our own host memory (t->buffer NULL).
mg_backend_buffer_type_t mg_backend_tensor_buft(const struct mg_tensor * t);

// ---------------------------------------------------------------------------
// Backends (ggml_backend_i)
// ---------------------------------------------------------------------------

struct mg_backend_i {
    const char * (*get_name)(mg_backend_t backend);
    void         (*free)(mg_backend_t backend);
    // Run every node of g, whose tensors live in memory this backend reads.
    // False, with mg_last_error(), on a device error.
    bool (*graph_compute)(mg_backend_t backend, struct mg_cgraph * g);
    // Wait until the work submitted so far is done (NULL: every call returns
    // only when its work is done, as the CPU's do).
    void (*synchronize)(mg_backend_t backend);
    // Optional (NULL: not offered): a graph computed many times, like a
    // session's reused decode graph, planned once - its work buffer sized,
    // its shares chosen - and then computed by one call per run
    // (ggml_backend_graph_plan_create, _plan_compute; ggml's CPU backend
    // offers them, and so does ours).
    mg_backend_graph_plan_t (*graph_plan_create)(mg_backend_t backend, struct mg_cgraph * g);
    void (*graph_plan_free)(mg_backend_t backend, mg_backend_graph_plan_t plan);
    bool (*graph_plan_compute)(mg_backend_t backend, mg_backend_graph_plan_t plan);
};

struct mg_backend {
    struct mg_backend_i iface;
    mg_backend_dev_t    device;
    void *              context;
};

const char *     mg_backend_name(mg_backend_t backend);
void             mg_backend_free(mg_backend_t backend);   // NULL is fine
mg_backend_dev_t mg_backend_get_device(mg_backend_t backend);
bool             mg_backend_graph_compute(mg_backend_t backend, struct mg_cgraph * g);
void             mg_backend_synchronize(mg_backend_t backend);
// The device's answers, asked through the backend (ggml_backend_supports_op, _supports_buft).
bool mg_backend_supports_op  (mg_backend_t backend, const struct mg_tensor * op);
bool mg_backend_supports_buft(mg_backend_t backend, mg_backend_buffer_type_t buft);
mg_backend_buffer_type_t mg_backend_get_default_buffer_type(mg_backend_t backend);
// NULL, with mg_last_error(), when the backend offers no plans or memory runs out.
mg_backend_graph_plan_t mg_backend_graph_plan_create(mg_backend_t backend, struct mg_cgraph * g);
void                    mg_backend_graph_plan_free(mg_backend_t backend, mg_backend_graph_plan_t plan);   // NULL is fine
bool                    mg_backend_graph_plan_compute(mg_backend_t backend, mg_backend_graph_plan_t plan);

// ---------------------------------------------------------------------------
// Devices and the registry (ggml_backend_device_i, ggml_backend_dev_*)
// ---------------------------------------------------------------------------

enum mg_backend_dev_type {
    MG_BACKEND_DEVICE_TYPE_CPU,   // the host CPU, always there, always last in the registry
    MG_BACKEND_DEVICE_TYPE_GPU,   // its own memory: tensors reach it through buffers
};

struct mg_backend_device_i {
    const char * (*get_name)(mg_backend_dev_t dev);          // "CPU", "Vulkan0": what -dev takes
    const char * (*get_description)(mg_backend_dev_t dev);   // the hardware, in the vendor's words
    void (*get_memory)(mg_backend_dev_t dev, size_t * free, size_t * total);
    enum mg_backend_dev_type (*get_type)(mg_backend_dev_t dev);
    mg_backend_t (*init_backend)(mg_backend_dev_t dev);       // NULL, with mg_last_error(), on failure
    mg_backend_buffer_type_t (*get_buffer_type)(mg_backend_dev_t dev);   // its memory
    // Can it compute this node (its op, its types, its shapes)?
    bool (*supports_op)(mg_backend_dev_t dev, const struct mg_tensor * op);
    // Can its kernels read memory of this type directly?
    bool (*supports_buft)(mg_backend_dev_t dev, mg_backend_buffer_type_t buft);
};

struct mg_backend_device {
    struct mg_backend_device_i iface;
    void *                     context;
};

const char *             mg_backend_dev_name(mg_backend_dev_t dev);
const char *             mg_backend_dev_description(mg_backend_dev_t dev);
void                     mg_backend_dev_memory(mg_backend_dev_t dev, size_t * free, size_t * total);
enum mg_backend_dev_type mg_backend_dev_type(mg_backend_dev_t dev);
mg_backend_t             mg_backend_dev_init(mg_backend_dev_t dev);
mg_backend_buffer_type_t mg_backend_dev_buffer_type(mg_backend_dev_t dev);
bool mg_backend_dev_supports_op  (mg_backend_dev_t dev, const struct mg_tensor * op);
bool mg_backend_dev_supports_buft(mg_backend_dev_t dev, mg_backend_buffer_type_t buft);

// The registry: every device this build knows, GPUs first in the order found,
// the CPU last (ggml_backend_dev_count, _get, _by_name). The first call
// enumerates them.
size_t           mg_backend_dev_count(void);
mg_backend_dev_t mg_backend_dev_get(size_t i);
// NULL, with mg_last_error() naming the devices there are, for an unknown name.
mg_backend_dev_t mg_backend_dev_by_name(const char * name);
// Add a device before the CPU (how a test's fake device joins; ggml_backend_register).
void             mg_backend_dev_register(mg_backend_dev_t dev);

// ---------------------------------------------------------------------------
// The CPU backend (backend_cpu.c; ggml-cpu.cpp's ggml_backend_cpu_*)
// ---------------------------------------------------------------------------

mg_backend_dev_t         mg_backend_cpu_device(void);
mg_backend_buffer_type_t mg_backend_cpu_buffer_type(void);   // host memory, 64-byte aligned
mg_backend_t             mg_backend_cpu_init(void);           // threads: all cores, its own pool
bool                     mg_backend_is_cpu(mg_backend_t backend);
// Run on this many threads of this pool (NULL: a pool of its own); the
// session hands the CPU backend its pool (ggml_backend_cpu_set_threadpool).
struct mg_threadpool;
void mg_backend_cpu_set_threadpool(mg_backend_t backend, struct mg_threadpool * pool, int n_threads);

// The work buffer every CPU graph shares (the largest planned so far), for
// the memory map.
void mg_backend_cpu_work_buffer(mg_backend_t backend, void ** data, size_t * size);
// The CPU plan behind a plan of the CPU backend: its shares and work size.
const struct mg_cplan * mg_backend_cpu_plan_cplan(mg_backend_graph_plan_t plan);

#ifdef MG_VULKAN
// ---------------------------------------------------------------------------
// The Vulkan backend (vulkan/backend_vulkan.c, make VULKAN=1): its devices
// join the registry as "Vulkan0", "Vulkan1", ...; this says what the
// enumeration found ("1 device", "no Vulkan driver (...)").
// ---------------------------------------------------------------------------
const char * mg_backend_vulkan_status(void);
// Graph computes on every Vulkan device so far that recorded a command
// buffer, and that submitted one recorded before (the same graph again).
void mg_backend_vulkan_graph_counts(int64_t * recorded, int64_t * reused);
// What a Vulkan backend's quantized matmuls do first, on its own (for the
// tests): x's F32 rows quantized into q's Q8_0 or Q8_K blocks as the CPU
// quantizes activations (mg_quantize_row_q8_0, mg_quantize_row_q8_K), x and
// q in the backend's device memory; false with the reason otherwise.
bool mg_backend_vulkan_quantize(mg_backend_t backend, const struct mg_tensor * x, struct mg_tensor * q);
#endif
