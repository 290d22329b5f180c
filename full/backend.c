//@file full
// backend.c - the interface of backend.h: each call checks what it must and
// forwards to the implementation's function pointer (ggml-backend.cpp), and
// the registry of devices (ggml-backend-reg.cpp).
#define _POSIX_C_SOURCE 200809L
#include "backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

// A programming error (a tensor outside its buffer, a copy between tensors of
// different sizes): stop with a message, as GGML_ASSERT does.
static void backend_abort(const char * what, const struct mg_tensor * t) {
    fprintf(stderr, "mg: backend: %s (tensor '%s')\n", what, mg_quote(t != NULL ? t->name : "?"));
    abort();
}

// ---------------------------------------------------------------------------
// Buffer types and buffers
// ---------------------------------------------------------------------------

const char * mg_backend_buft_name(mg_backend_buffer_type_t buft) { return buft->iface.get_name(buft); }

mg_backend_buffer_t mg_backend_buft_alloc_buffer(mg_backend_buffer_type_t buft, size_t size) {
    return buft->iface.alloc_buffer(buft, size);
}

size_t mg_backend_buft_get_alignment(mg_backend_buffer_type_t buft) { return buft->iface.get_alignment(buft); }
bool   mg_backend_buft_is_host(mg_backend_buffer_type_t buft) { return buft->iface.is_host(buft); }

void mg_backend_buffer_free(mg_backend_buffer_t buf) {
    if (buf != NULL) buf->iface.free_buffer(buf);
}

void * mg_backend_buffer_get_base(mg_backend_buffer_t buf) { return buf->iface.get_base(buf); }
size_t mg_backend_buffer_get_size(mg_backend_buffer_t buf) { return buf->size; }
void   mg_backend_buffer_clear(mg_backend_buffer_t buf, uint8_t value) { buf->iface.clear(buf, value); }
bool   mg_backend_buffer_is_host(mg_backend_buffer_t buf) { return mg_backend_buft_is_host(buf->buft); }

bool mg_backend_tensor_alloc(mg_backend_buffer_t buf, struct mg_tensor * t, void * addr) {
    const char * base = mg_backend_buffer_get_base(buf);
    const char * at   = addr;
    if (at < base || (size_t) (at - base) + mg_nbytes(t) > buf->size) {
        mg_set_error("tensor '%s' (%zu bytes) does not fit in its %s buffer of %zu bytes at offset %td", t->name,
                     mg_nbytes(t), mg_backend_buft_name(buf->buft), buf->size, at - base);
        return false;
    }
    t->data   = addr;
    t->buffer = buf;
    return true;
}

mg_backend_buffer_type_t mg_backend_tensor_buft(const struct mg_tensor * t) {
    const struct mg_tensor * owner = t->view_src != NULL ? t->view_src : t;
    return owner->buffer != NULL ? owner->buffer->buft : mg_backend_cpu_buffer_type();
}

// The buffer t's bytes are in (a view's are in its source's), or NULL.
static mg_backend_buffer_t tensor_buffer(const struct mg_tensor * t) {
    return t->view_src != NULL ? t->view_src->buffer : t->buffer;
}

static void check_range(const struct mg_tensor * t, size_t offset, size_t size) {
    if (t->data == NULL) backend_abort("tensor has no data", t);
    if (offset > mg_nbytes(t) || size > mg_nbytes(t) - offset) backend_abort("range outside the tensor", t);
}

void mg_backend_tensor_set(struct mg_tensor * t, const void * data, size_t offset, size_t size) {
    check_range(t, offset, size);
    if (size == 0) return;
    mg_backend_buffer_t buf = tensor_buffer(t);
    if (buf == NULL) {
        memcpy((char *) t->data + offset, data, size);
    } else {
        buf->iface.set_tensor(buf, t, data, offset, size);
    }
}

void mg_backend_tensor_get(const struct mg_tensor * t, void * data, size_t offset, size_t size) {
    check_range(t, offset, size);
    if (size == 0) return;
    mg_backend_buffer_t buf = tensor_buffer(t);
    if (buf == NULL) {
        memcpy(data, (const char *) t->data + offset, size);
    } else {
        buf->iface.get_tensor(buf, t, data, offset, size);
    }
}

// ggml_backend_tensor_copy: host to anything is a set, anything to host a
// get, device to device goes through host memory (ggml asks the buffer for a
// direct cpy_tensor first; no backend of ours has one yet).
void mg_backend_tensor_copy(const struct mg_tensor * src, struct mg_tensor * dst) {
    const size_t n = mg_nbytes(src);
    if (n != mg_nbytes(dst)) backend_abort("copy between tensors of different sizes", dst);
    if (mg_backend_buft_is_host(mg_backend_tensor_buft(src))) {
        mg_backend_tensor_set(dst, src->data, 0, n);
    } else if (mg_backend_buft_is_host(mg_backend_tensor_buft(dst))) {
        mg_backend_tensor_get(src, dst->data, 0, n);
    } else {
        void * bounce = malloc(n);
        if (bounce == NULL) backend_abort("no memory for a copy through the host", dst);
        mg_backend_tensor_get(src, bounce, 0, n);
        mg_backend_tensor_set(dst, bounce, 0, n);
        free(bounce);
    }
}

// ---------------------------------------------------------------------------
// Backends
// ---------------------------------------------------------------------------

const char * mg_backend_name(mg_backend_t backend) { return backend->iface.get_name(backend); }

void mg_backend_free(mg_backend_t backend) {
    if (backend != NULL) backend->iface.free(backend);
}

mg_backend_dev_t mg_backend_get_device(mg_backend_t backend) { return backend->device; }

bool mg_backend_graph_compute(mg_backend_t backend, struct mg_cgraph * g) {
    return backend->iface.graph_compute(backend, g);
}

void mg_backend_synchronize(mg_backend_t backend) {
    if (backend->iface.synchronize != NULL) backend->iface.synchronize(backend);
}

bool mg_backend_supports_op(mg_backend_t backend, const struct mg_tensor * op) {
    return mg_backend_dev_supports_op(backend->device, op);
}

bool mg_backend_supports_buft(mg_backend_t backend, mg_backend_buffer_type_t buft) {
    return mg_backend_dev_supports_buft(backend->device, buft);
}

mg_backend_graph_plan_t mg_backend_graph_plan_create(mg_backend_t backend, struct mg_cgraph * g) {
    if (backend->iface.graph_plan_create == NULL) {
        mg_set_error("backend %s makes no graph plans", mg_backend_name(backend));
        return NULL;
    }
    return backend->iface.graph_plan_create(backend, g);
}

void mg_backend_graph_plan_free(mg_backend_t backend, mg_backend_graph_plan_t plan) {
    if (plan != NULL) backend->iface.graph_plan_free(backend, plan);
}

bool mg_backend_graph_plan_compute(mg_backend_t backend, mg_backend_graph_plan_t plan) {
    return backend->iface.graph_plan_compute(backend, plan);
}

mg_backend_buffer_type_t mg_backend_get_default_buffer_type(mg_backend_t backend) {
    return mg_backend_dev_buffer_type(backend->device);
}

// ---------------------------------------------------------------------------
// Devices and the registry
// ---------------------------------------------------------------------------

const char * mg_backend_dev_name(mg_backend_dev_t dev) { return dev->iface.get_name(dev); }
const char * mg_backend_dev_description(mg_backend_dev_t dev) { return dev->iface.get_description(dev); }

void mg_backend_dev_memory(mg_backend_dev_t dev, size_t * free, size_t * total) {
    dev->iface.get_memory(dev, free, total);
}

enum mg_backend_dev_type mg_backend_dev_type(mg_backend_dev_t dev) { return dev->iface.get_type(dev); }
mg_backend_t mg_backend_dev_init(mg_backend_dev_t dev) { return dev->iface.init_backend(dev); }
mg_backend_buffer_type_t mg_backend_dev_buffer_type(mg_backend_dev_t dev) { return dev->iface.get_buffer_type(dev); }

bool mg_backend_dev_supports_op(mg_backend_dev_t dev, const struct mg_tensor * op) {
    return dev->iface.supports_op(dev, op);
}

bool mg_backend_dev_supports_buft(mg_backend_dev_t dev, mg_backend_buffer_type_t buft) {
    return dev->iface.supports_buft(dev, buft);
}

// The registry is a short fixed array: a handful of devices at most. ggml
// loads backends as shared libraries and asks each for its devices; ours
// are compiled in, so the list is made on first use. The CPU stays last:
// the scheduler reads "the last backend" as "the one that can run anything".
enum { MAX_DEVICES = 16 };
static mg_backend_dev_t devices[MAX_DEVICES];
static size_t           n_devices = 0;

#ifdef MG_VULKAN
void mg_backend_vulkan_register_devices(void);   // vulkan/backend_vulkan.c, in make VULKAN=1 builds
#endif

static void registry_init(void) {
    if (n_devices != 0) return;
    devices[n_devices++] = mg_backend_cpu_device();
#ifdef MG_VULKAN
    mg_backend_vulkan_register_devices();   // each one through mg_backend_dev_register, before the CPU
#endif
}

size_t mg_backend_dev_count(void) {
    registry_init();
    return n_devices;
}

mg_backend_dev_t mg_backend_dev_get(size_t i) {
    registry_init();
    return i < n_devices ? devices[i] : NULL;
}

void mg_backend_dev_register(mg_backend_dev_t dev) {
    registry_init();
    if (n_devices == MAX_DEVICES) backend_abort("too many devices registered", NULL);
    devices[n_devices] = devices[n_devices - 1];   // the CPU moves up one
    devices[n_devices - 1] = dev;
    n_devices++;
}

mg_backend_dev_t mg_backend_dev_by_name(const char * name) {
    registry_init();
    char known[256] = "";
    for (size_t i = 0; i < n_devices; i++) {
        // Device names compare without case, as ggml_backend_dev_by_name does.
        if (strcasecmp(mg_backend_dev_name(devices[i]), name) == 0) return devices[i];
        const size_t used = strlen(known);
        snprintf(known + used, sizeof known - used, "%s%s", i == 0 ? "" : ", ", mg_backend_dev_name(devices[i]));
    }
    mg_set_error("no device named '%s' (this build has: %s)", name, known);
    return NULL;
}
