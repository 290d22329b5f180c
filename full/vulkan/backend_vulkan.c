//@file full
// backend_vulkan.c - a backend on any Vulkan device (a GPU, or Mesa's lavapipe
// on the CPU for the tests), through Vulkan's C API: the devices in the
// registry, buffers in device memory reached through a staging buffer, and
// graphs recorded into one command buffer of compute dispatches
// (ggml-vulkan/ggml-vulkan.cpp, in C and much smaller). Built only with
// `make VULKAN=1` (full/Makefile).
//
// This file is the plumbing: devices, memory, commands, the backend
// interface. Which ops run, and how, is ops_vulkan.c (the shaders are
// vulkan/*.comp, compiled to SPIR-V by glslc at build time); the two meet in
// vulkan_internal.h. An op ops_vulkan.c has no shader for is refused by
// supports_op, so the scheduler keeps it on the CPU (what -ngl offloads runs
// through it: offload.h).
#define _POSIX_C_SOURCE 200809L
#include "vulkan_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// return nothing in the interface, as in ggml): stop with the reason.
static void vk_abort(void) {
    fprintf(stderr, "mg: %s\n", mg_last_error());
    abort();
}

enum { VK_MAX_DEVICES = 8 };
static VkInstance       vk_instance;
static struct vk_device vk_devices[VK_MAX_DEVICES];
static int              vk_n_devices;
static char             vk_status[256] = "not enumerated";

// ---------------------------------------------------------------------------
// The device: queue, command buffer, pipeline layout, made on first use
// ---------------------------------------------------------------------------

static bool find_memory_type(const struct vk_device * d, uint32_t type_bits, VkMemoryPropertyFlags want, uint32_t * out) {
    VkPhysicalDeviceMemoryProperties mp;
    vkGetPhysicalDeviceMemoryProperties(d->phys, &mp);
    for (uint32_t i = 0; i < mp.memoryTypeCount; i++) {
        if ((type_bits & (1u << i)) && (mp.memoryTypes[i].propertyFlags & want) == want) {
            *out = i;
            return true;
        }
    }
    return false;
}

// A buffer and its memory, bound (device-local for tensors, host-visible for staging).
static bool make_buffer(struct vk_device * d, size_t size, VkMemoryPropertyFlags want, VkBuffer * buf,
                        VkDeviceMemory * mem) {
    const VkBufferCreateInfo bi = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
        .size  = size,
        .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                 VK_BUFFER_USAGE_TRANSFER_DST_BIT,
        .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
    };
    VK_TRY(vkCreateBuffer(d->dev, &bi, NULL, buf), return false);
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(d->dev, *buf, &req);
    uint32_t type = 0;
    if (!find_memory_type(d, req.memoryTypeBits, want, &type)) {
        vkDestroyBuffer(d->dev, *buf, NULL);
        mg_set_error("Vulkan: %s has no memory type with flags 0x%x", d->name, (unsigned) want);
        return false;
    }
    const VkMemoryAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = req.size, .memoryTypeIndex = type};
    const VkResult r = vkAllocateMemory(d->dev, &ai, NULL, mem);
    if (r != VK_SUCCESS) {
        vkDestroyBuffer(d->dev, *buf, NULL);
        mg_set_error("Vulkan: %s: cannot allocate %zu bytes of device memory (VkResult %d)", d->name, size, r);
        return false;
    }
    VK_TRY(vkBindBufferMemory(d->dev, *buf, *mem, 0), return false);
    return true;
}

static bool make_pipeline_layout(struct vk_device * d) {
    VkDescriptorSetLayoutBinding bindings[VK_BINDINGS];
    for (uint32_t i = 0; i < VK_BINDINGS; i++) {
        bindings[i] = (VkDescriptorSetLayoutBinding) {
            .binding = i, .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, .descriptorCount = 1,
            .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
    }
    const VkDescriptorSetLayoutCreateInfo li = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, .bindingCount = VK_BINDINGS, .pBindings = bindings};
    VK_TRY(vkCreateDescriptorSetLayout(d->dev, &li, NULL, &d->set_layout), return false);
    const VkPushConstantRange   push = {VK_SHADER_STAGE_COMPUTE_BIT, 0, VK_PUSH_BYTES};
    const VkPipelineLayoutCreateInfo pi = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, .setLayoutCount = 1, .pSetLayouts = &d->set_layout,
        .pushConstantRangeCount = 1, .pPushConstantRanges = &push};
    VK_TRY(vkCreatePipelineLayout(d->dev, &pi, NULL, &d->pipeline_layout), return false);
    return true;
}

static bool open_device(struct vk_device * d) {
    if (d->dev != VK_NULL_HANDLE) return true;
    const float                   priority = 1.0f;
    const VkDeviceQueueCreateInfo qi       = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, .queueFamilyIndex = d->queue_family, .queueCount = 1,
        .pQueuePriorities = &priority};
    const VkDeviceCreateInfo di = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .queueCreateInfoCount = 1, .pQueueCreateInfos = &qi};
    VK_TRY(vkCreateDevice(d->phys, &di, NULL, &d->dev), return false);
    vkGetDeviceQueue(d->dev, d->queue_family, 0, &d->queue);
    const VkCommandPoolCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
        .queueFamilyIndex = d->queue_family};
    VK_TRY(vkCreateCommandPool(d->dev, &ci, NULL, &d->cmd_pool), return false);
    const VkCommandBufferAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, .commandPool = d->cmd_pool,
        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1};
    VK_TRY(vkAllocateCommandBuffers(d->dev, &ai, &d->cmd), return false);
    const VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VK_TRY(vkCreateFence(d->dev, &fi, NULL, &d->fence), return false);
    return make_pipeline_layout(d);
}

// ---------------------------------------------------------------------------
// Commands: recorded into the one command buffer, submitted, waited for.
// Everything is synchronous, as the CPU backend is (no synchronize needed).
// ---------------------------------------------------------------------------

static bool begin_commands(struct vk_device * d) {
    const VkCommandBufferBeginInfo bi = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO, .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    VK_TRY(vkResetCommandBuffer(d->cmd, 0), return false);
    VK_TRY(vkBeginCommandBuffer(d->cmd, &bi), return false);
    return true;
}

static bool submit(struct vk_device * d, VkCommandBuffer cmd) {
    const VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cmd};
    VK_TRY(vkQueueSubmit(d->queue, 1, &si, d->fence), return false);
    VK_TRY(vkWaitForFences(d->dev, 1, &d->fence, VK_TRUE, UINT64_MAX), return false);
    VK_TRY(vkResetFences(d->dev, 1, &d->fence), return false);
    return true;
}

static bool submit_and_wait(struct vk_device * d) {
    VK_TRY(vkEndCommandBuffer(d->cmd), return false);
    return submit(d, d->cmd);
}

// The staging buffer, at least size bytes (it only grows).
static bool staging_reserve(struct vk_device * d, size_t size) {
    if (size <= d->staging_size) return true;
    if (d->staging != VK_NULL_HANDLE) {
        vkUnmapMemory(d->dev, d->staging_mem);
        vkDestroyBuffer(d->dev, d->staging, NULL);
        vkFreeMemory(d->dev, d->staging_mem, NULL);
        d->staging = VK_NULL_HANDLE, d->staging_size = 0;
    }
    if (!make_buffer(d, size, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT, &d->staging,
                     &d->staging_mem)) {
        return false;
    }
    VK_TRY(vkMapMemory(d->dev, d->staging_mem, 0, VK_WHOLE_SIZE, 0, &d->staging_map), return false);
    d->staging_size = size;
    return true;
}

// ---------------------------------------------------------------------------
// Buffers: device memory. tensor->data is a fake address, base + offset, as
// in ggml-vulkan (vk_ptr_base): it orders tensors and measures offsets, and
// is never dereferenced.
// ---------------------------------------------------------------------------

static char * const vk_fake_base = (char *) 0x1000;

struct vk_buffer {
    struct vk_device * d;
    VkBuffer           buf;
    VkDeviceMemory     mem;
};

static size_t offset_of(const struct mg_tensor * t) { return (size_t) ((const char *) t->data - vk_fake_base); }

static void forget_recordings(struct vk_device * d);

static void vk_buffer_free(mg_backend_buffer_t buf) {
    struct vk_buffer * b = buf->context;
    forget_recordings(b->d);   // they may name this buffer in their descriptor sets
    vkDestroyBuffer(b->d->dev, b->buf, NULL);
    vkFreeMemory(b->d->dev, b->mem, NULL);
    free(b);
    free(buf);
}

static void * vk_buffer_get_base(mg_backend_buffer_t buf) {
    (void) buf;
    return vk_fake_base;
}

// Host -> staging -> device (ggml_vk_buffer_write through its staging buffer).
static void vk_buffer_set_tensor(mg_backend_buffer_t buf, struct mg_tensor * t, const void * data, size_t offset,
                                 size_t size) {
    struct vk_buffer * b = buf->context;
    if (!staging_reserve(b->d, size) || !begin_commands(b->d)) vk_abort();
    memcpy(b->d->staging_map, data, size);
    const VkBufferCopy region = {0, offset_of(t) + offset, size};
    vkCmdCopyBuffer(b->d->cmd, b->d->staging, b->buf, 1, &region);
    if (!submit_and_wait(b->d)) vk_abort();
}

static void vk_buffer_get_tensor(mg_backend_buffer_t buf, const struct mg_tensor * t, void * data, size_t offset,
                                 size_t size) {
    struct vk_buffer * b = buf->context;
    if (!staging_reserve(b->d, size) || !begin_commands(b->d)) vk_abort();
    const VkBufferCopy region = {offset_of(t) + offset, 0, size};
    vkCmdCopyBuffer(b->d->cmd, b->buf, b->d->staging, 1, &region);
    if (!submit_and_wait(b->d)) vk_abort();
    memcpy(data, b->d->staging_map, size);
}

static void vk_buffer_clear(mg_backend_buffer_t buf, uint8_t value) {
    struct vk_buffer * b = buf->context;
    if (!begin_commands(b->d)) vk_abort();
    vkCmdFillBuffer(b->d->cmd, b->buf, 0, VK_WHOLE_SIZE, 0x01010101u * value);
    if (!submit_and_wait(b->d)) vk_abort();
}

static const char * vk_buft_get_name(mg_backend_buffer_type_t buft) {
    return ((struct vk_device *) buft->context)->name;
}

static mg_backend_buffer_t vk_buft_alloc_buffer(mg_backend_buffer_type_t buft, size_t size) {
    struct vk_device * d = buft->context;
    if (!open_device(d)) return NULL;
    struct vk_buffer *         b   = calloc(1, sizeof *b);
    struct mg_backend_buffer * buf = malloc(sizeof *buf);
    // A whole number of 4-byte words (vkCmdFillBuffer's unit), at least one.
    const size_t rounded = size < 4 ? 4 : (size + 3) / 4 * 4;
    if (b == NULL || buf == NULL ||
        !make_buffer(d, rounded, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, &b->buf, &b->mem)) {
        free(b);
        free(buf);
        return NULL;
    }
    b->d = d;
    *buf = (struct mg_backend_buffer) {
        .iface   = {vk_buffer_free, vk_buffer_get_base, vk_buffer_set_tensor, vk_buffer_get_tensor, vk_buffer_clear},
        .buft    = buft,
        .context = b,
        .size    = size,
    };
    return buf;
}

// Tensors start where a storage-buffer descriptor could start (at least 64).
static size_t vk_buft_get_alignment(mg_backend_buffer_type_t buft) {
    const struct vk_device * d = buft->context;
    const size_t             a = (size_t) d->props.limits.minStorageBufferOffsetAlignment;
    return a > 64 ? a : 64;
}

static bool vk_buft_is_host(mg_backend_buffer_type_t buft) {
    (void) buft;
    return false;
}

// Which VkBuffer holds t, and where t starts in it.
bool vk_locate(const struct vk_device * d, const struct mg_tensor * t, VkBuffer * buf, size_t * offset) {
    const struct mg_tensor *  owner = t->view_src != NULL ? t->view_src : t;
    const mg_backend_buffer_t b     = owner->buffer;
    if (b == NULL || b->buft != &d->buft) {
        mg_set_error("Vulkan: tensor '%s' is not in %s memory", t->name, d->name);
        return false;
    }
    *buf    = ((struct vk_buffer *) b->context)->buf;
    *offset = offset_of(t);
    return true;
}

// One dispatch: a descriptor set with the node's buffers (bound whole: the
// shaders add the tensors' offsets themselves, which keeps clear of the
// offset alignment rules of descriptors), the push constants, and a barrier
// so that the next dispatch sees what this one wrote.
bool vk_dispatch(struct vk_device * d, VkPipeline pipeline, const VkBuffer bufs[VK_BINDINGS],
                 const struct vk_dispatch * x) {
    VkDescriptorSet                   set;
    const VkDescriptorSetAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO, .descriptorPool = d->rec_pool,
        .descriptorSetCount = 1, .pSetLayouts = &d->set_layout};
    VK_TRY(vkAllocateDescriptorSets(d->dev, &ai, &set), return false);
    VkDescriptorBufferInfo infos[VK_BINDINGS];
    VkWriteDescriptorSet   writes[VK_BINDINGS];
    for (uint32_t i = 0; i < VK_BINDINGS; i++) {
        infos[i]  = (VkDescriptorBufferInfo) {bufs[i], 0, VK_WHOLE_SIZE};
        writes[i] = (VkWriteDescriptorSet) {
            .sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, .dstSet = set, .dstBinding = i, .descriptorCount = 1,
            .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, .pBufferInfo = &infos[i]};
    }
    vkUpdateDescriptorSets(d->dev, VK_BINDINGS, writes, 0, NULL);
    vkCmdBindPipeline(d->rec_cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
    vkCmdBindDescriptorSets(d->rec_cmd, VK_PIPELINE_BIND_POINT_COMPUTE, d->pipeline_layout, 0, 1, &set, 0, NULL);
    vkCmdPushConstants(d->rec_cmd, d->pipeline_layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, x->n_pc * 4, x->pc);
    vkCmdDispatch(d->rec_cmd, x->groups, x->groups_y > 0 ? x->groups_y : 1, 1);
    const VkMemoryBarrier barrier = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT};
    vkCmdPipelineBarrier(d->rec_cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1,
                         &barrier, 0, NULL, 0, NULL);
    return true;
}

// ---------------------------------------------------------------------------
// The backend
// ---------------------------------------------------------------------------

static const char * vk_backend_get_name(mg_backend_t backend) {
    return ((struct vk_device *) backend->device->context)->name;
}

static void vk_backend_free(mg_backend_t backend) { free(backend); }

// ---------------------------------------------------------------------------
// Recordings: a graph recorded once into a command buffer of its own and
// submitted again while it stays the same, as a reused decode graph does
// (ggml-vulkan records per compute; a CUDA graph is what ggml-cuda reuses).
// ---------------------------------------------------------------------------

// Everything a recording was made from: per node its tensor, op, parameters,
// and where it and its sources are and how they are laid out (the push
// constants and descriptor sets come from these and nothing else).
static void key_tensor(uint64_t * k, size_t * n, const struct mg_tensor * t) {
    const struct mg_tensor * owner = t->view_src != NULL ? t->view_src : t;
    k[(*n)++] = (uint64_t) (uintptr_t) t;
    k[(*n)++] = (uint64_t) (uintptr_t) t->data;
    k[(*n)++] = (uint64_t) (uintptr_t) owner->buffer;
    k[(*n)++] = (uint64_t) t->type;
    for (int i = 0; i < MG_MAX_DIMS; i++) k[(*n)++] = (uint64_t) t->ne[i], k[(*n)++] = (uint64_t) t->nb[i];
}

enum { KEY_PER_TENSOR = 4 + 2 * MG_MAX_DIMS, KEY_PARAMS = MG_MAX_OP_PARAMS / sizeof(int32_t) };
enum { KEY_PER_NODE = 1 + KEY_PARAMS + 4 * KEY_PER_TENSOR };   // op, params, the node and 3 sources

static uint64_t * graph_key(const struct mg_cgraph * g, size_t * n) {
    uint64_t * k = malloc(((size_t) g->n_nodes * KEY_PER_NODE + 1) * sizeof *k);
    *n           = 0;
    if (k == NULL) return NULL;
    k[(*n)++] = (uint64_t) g->n_nodes;
    for (int i = 0; i < g->n_nodes; i++) {
        const struct mg_tensor * t = g->nodes[i];
        k[(*n)++] = (uint64_t) t->op;
        for (int j = 0; j < KEY_PARAMS; j++) k[(*n)++] = (uint64_t) (uint32_t) t->op_params[j];
        key_tensor(k, n, t);
        for (int j = 0; j < 3; j++) {
            if (t->src[j] != NULL) key_tensor(k, n, t->src[j]);
            else for (int m = 0; m < KEY_PER_TENSOR; m++) k[(*n)++] = 0;
        }
    }
    return k;
}

static void free_recording(struct vk_device * d, struct vk_recording * r) {
    if (r->pool != VK_NULL_HANDLE) vkDestroyDescriptorPool(d->dev, r->pool, NULL);
    r->pool = VK_NULL_HANDLE;
    free(r->key);
    r->key = NULL;
}

// A buffer is going away: no recording may name it again.
static void forget_recordings(struct vk_device * d) {
    for (int i = 0; i < VK_MAX_RECORDINGS; i++) free_recording(d, &d->recordings[i]);
}

static struct vk_recording * find_recording(struct vk_device * d, const uint64_t * key, size_t n_key) {
    for (int i = 0; i < VK_MAX_RECORDINGS; i++) {
        const struct vk_recording * r = &d->recordings[i];
        if (r->key != NULL && r->n_key == n_key && memcmp(r->key, key, n_key * sizeof *key) == 0) {
            return &d->recordings[i];
        }
    }
    return NULL;
}

// g into the next slot (the oldest recording makes way): a descriptor pool
// with a set per node, one dispatch per node that computes something, a
// barrier after each.
static bool record_graph(struct vk_device * d, const struct mg_cgraph * g, struct vk_recording * r) {
    if (r->cmd == VK_NULL_HANDLE) {
        const VkCommandBufferAllocateInfo ai = {
            .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, .commandPool = d->cmd_pool,
            .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1};
        VK_TRY(vkAllocateCommandBuffers(d->dev, &ai, &r->cmd), return false);
    }
    const uint32_t                   sets = g->n_nodes > 0 ? 2 * (uint32_t) g->n_nodes : 1;   // a quantized matmul: 2
    const VkDescriptorPoolSize       size = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, sets * VK_BINDINGS};
    const VkDescriptorPoolCreateInfo dp   = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO, .maxSets = sets, .poolSizeCount = 1, .pPoolSizes = &size};
    VK_TRY(vkCreateDescriptorPool(d->dev, &dp, NULL, &r->pool), return false);
    const VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    VK_TRY(vkResetCommandBuffer(r->cmd, 0), return false);
    VK_TRY(vkBeginCommandBuffer(r->cmd, &bi), return false);
    d->rec_cmd = r->cmd, d->rec_pool = r->pool;
    for (int i = 0; i < g->n_nodes; i++) {
        if (!vk_op_record(d, g->nodes[i], i)) {
            vkEndCommandBuffer(r->cmd);
            return false;
        }
    }
    VK_TRY(vkEndCommandBuffer(r->cmd), return false);
    return true;
}

// The scratch buffer, at least size bytes: it only grows, and when it does
// the recordings that name the old one are forgotten (they are not running:
// every submit is waited for).
static bool scratch_reserve(struct vk_device * d, size_t size) {
    if (size <= d->scratch_size) return true;
    forget_recordings(d);
    if (d->scratch != VK_NULL_HANDLE) {
        vkDestroyBuffer(d->dev, d->scratch, NULL);
        vkFreeMemory(d->dev, d->scratch_mem, NULL);
        d->scratch = VK_NULL_HANDLE, d->scratch_size = 0;
    }
    if (!make_buffer(d, size, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, &d->scratch, &d->scratch_mem)) return false;
    d->scratch_size = size;
    return true;
}

// The most scratch any node of g uses (nodes run one after another).
static size_t graph_scratch_bytes(const struct mg_cgraph * g) {
    size_t most = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const size_t n = vk_op_scratch_bytes(g->nodes[i]);
        most           = n > most ? n : most;
    }
    return most;
}

// The graph as recorded before if nothing in it changed, else recorded now;
// one submit, one wait.
static bool vk_backend_graph_compute(mg_backend_t backend, struct mg_cgraph * g) {
    struct vk_device * d = backend->device->context;
    if (2 * g->n_nodes > VK_MAX_SETS) {
        mg_set_error("Vulkan: a graph of %d nodes (at most %d per compute)", g->n_nodes, VK_MAX_SETS / 2);
        return false;
    }
    if (!scratch_reserve(d, graph_scratch_bytes(g))) return false;
    size_t     n_key = 0;
    uint64_t * key   = graph_key(g, &n_key);
    if (key == NULL) {
        mg_set_error("Vulkan: out of memory for the key of a graph of %d nodes", g->n_nodes);
        return false;
    }
    struct vk_recording * r = find_recording(d, key, n_key);
    if (r != NULL) {
        free(key);
        d->n_reused++;
        return submit(d, r->cmd);
    }
    r = &d->recordings[d->next_recording];
    d->next_recording = (d->next_recording + 1) % VK_MAX_RECORDINGS;
    free_recording(d, r);
    if (!record_graph(d, g, r)) {
        free(key);
        free_recording(d, r);
        return false;
    }
    r->key = key, r->n_key = n_key;
    d->n_recorded++;
    return submit(d, r->cmd);
}

static mg_backend_t vk_dev_init_backend(mg_backend_dev_t dev) {
    if (!open_device(dev->context)) return NULL;
    struct mg_backend * be = malloc(sizeof *be);
    if (be == NULL) {
        mg_set_error("cannot allocate a Vulkan backend");
        return NULL;
    }
    *be = (struct mg_backend) {
        .iface   = {vk_backend_get_name, vk_backend_free, vk_backend_graph_compute, NULL, NULL, NULL, NULL},
        .device  = dev,
        .context = NULL,
    };
    return be;
}

// ---------------------------------------------------------------------------
// The device in the registry
// ---------------------------------------------------------------------------

static const char * vk_dev_get_name(mg_backend_dev_t dev) { return ((struct vk_device *) dev->context)->name; }

static const char * vk_dev_get_description(mg_backend_dev_t dev) {
    return ((struct vk_device *) dev->context)->props.deviceName;   // "llvmpipe (LLVM 15.0.6, 256 bits)"
}

// The device-local heaps. Without VK_EXT_memory_budget there is no "free"
// figure; ggml-vulkan reports the heap size for both then, and so do we.
static void vk_dev_get_memory(mg_backend_dev_t dev, size_t * free_bytes, size_t * total) {
    const struct vk_device * d = dev->context;
    *free_bytes = d->memory_total;
    *total      = d->memory_total;
}

static enum mg_backend_dev_type vk_dev_get_type(mg_backend_dev_t dev) {
    (void) dev;
    return MG_BACKEND_DEVICE_TYPE_GPU;   // its own memory, whatever the hardware (lavapipe is a CPU)
}

static mg_backend_buffer_type_t vk_dev_get_buffer_type(mg_backend_dev_t dev) {
    return &((struct vk_device *) dev->context)->buft;
}

static bool vk_dev_supports_op(mg_backend_dev_t dev, const struct mg_tensor * t) {
    (void) dev;
    return vk_op_supported(t);
}

static bool vk_dev_supports_buft(mg_backend_dev_t dev, mg_backend_buffer_type_t buft) {
    return buft == &((struct vk_device *) dev->context)->buft;
}

static size_t device_local_bytes(VkPhysicalDevice phys) {
    VkPhysicalDeviceMemoryProperties mp;
    vkGetPhysicalDeviceMemoryProperties(phys, &mp);
    size_t total = 0;
    for (uint32_t i = 0; i < mp.memoryHeapCount; i++) {
        if (mp.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) total += (size_t) mp.memoryHeaps[i].size;
    }
    return total;
}

// A queue family that runs compute shaders, or false.
static bool compute_queue_family(VkPhysicalDevice phys, uint32_t * out) {
    uint32_t n = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(phys, &n, NULL);
    VkQueueFamilyProperties families[16];
    if (n > 16) n = 16;
    vkGetPhysicalDeviceQueueFamilyProperties(phys, &n, families);
    for (uint32_t i = 0; i < n; i++) {
        if (families[i].queueFlags & VK_QUEUE_COMPUTE_BIT) {
            *out = i;
            return true;
        }
    }
    return false;
}

static void add_device(VkPhysicalDevice phys) {
    struct vk_device * d = &vk_devices[vk_n_devices];
    uint32_t           family;
    if (!compute_queue_family(phys, &family)) return;
    d->phys         = phys;
    d->queue_family = family;
    vkGetPhysicalDeviceProperties(phys, &d->props);
    d->memory_total = device_local_bytes(phys);
    snprintf(d->name, sizeof d->name, "Vulkan%d", vk_n_devices);
    d->buft = (struct mg_backend_buffer_type) {
        .iface   = {vk_buft_get_name, vk_buft_alloc_buffer, vk_buft_get_alignment, vk_buft_is_host},
        .device  = &d->device,
        .context = d,
    };
    d->device = (struct mg_backend_device) {
        .iface   = {vk_dev_get_name, vk_dev_get_description, vk_dev_get_memory, vk_dev_get_type, vk_dev_init_backend,
                    vk_dev_get_buffer_type, vk_dev_supports_op, vk_dev_supports_buft},
        .context = d,
    };
    mg_backend_dev_register(&d->device);
    vk_n_devices++;
}

// Called once by the registry (backend.c): an instance, and every physical
// device with a compute queue, in the driver's order. Unlike llama.cpp, CPU
// devices (lavapipe) are listed too: they are how this backend is tested.
void mg_backend_vulkan_register_devices(void) {
    const VkApplicationInfo app = {
        .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .pApplicationName = "minigml", .apiVersion = VK_API_VERSION_1_1};
    const VkInstanceCreateInfo ii = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app};
    VkResult r = vkCreateInstance(&ii, NULL, &vk_instance);
    if (r != VK_SUCCESS) {
        snprintf(vk_status, sizeof vk_status, "no Vulkan driver (vkCreateInstance: VkResult %d)", r);
        return;
    }
    uint32_t         n = VK_MAX_DEVICES;
    VkPhysicalDevice phys[VK_MAX_DEVICES];
    r = vkEnumeratePhysicalDevices(vk_instance, &n, phys);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
        snprintf(vk_status, sizeof vk_status, "vkEnumeratePhysicalDevices: VkResult %d", r);
        return;
    }
    for (uint32_t i = 0; i < n; i++) add_device(phys[i]);
    snprintf(vk_status, sizeof vk_status, "%d device%s", vk_n_devices, vk_n_devices == 1 ? "" : "s");
}

const char * mg_backend_vulkan_status(void) { return vk_status; }

// The activation quantizer of the quantized matmuls on its own: x's F32 rows
// into q's Q8_0 or Q8_K blocks, both tensors in the backend's device memory,
// recorded into a command buffer used once.
bool mg_backend_vulkan_quantize(mg_backend_t backend, const struct mg_tensor * x, struct mg_tensor * q) {
    struct vk_device * d = backend->device->context;
    if (x->type != MG_TYPE_F32 || x->nb[0] != sizeof(float) || (q->type != MG_TYPE_Q8_0 && q->type != MG_TYPE_Q8_K) ||
        !mg_is_contiguous(q) || mg_nelements(q) != mg_nelements(x) || x->ne[0] != q->ne[0] ||
        x->ne[0] % mg_blck_size(q->type) != 0) {
        mg_set_error("Vulkan: cannot quantize %s '%s' into %s '%s' (F32 rows into Q8_0 or Q8_K of the same shape)",
                     mg_type_name(x->type), x->name, mg_type_name(q->type), q->name);
        return false;
    }
    VkBuffer x_buf, q_buf;
    size_t   off_x, off_q;
    if (!vk_locate(d, x, &x_buf, &off_x) || !vk_locate(d, q, &q_buf, &off_q)) return false;
    const VkDescriptorPoolSize       size = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, VK_BINDINGS};
    const VkDescriptorPoolCreateInfo dp   = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO, .maxSets = 1, .poolSizeCount = 1, .pPoolSizes = &size};
    VK_TRY(vkCreateDescriptorPool(d->dev, &dp, NULL, &d->rec_pool), return false);
    d->rec_cmd = d->cmd;
    const bool ok = begin_commands(d) && vk_record_quantize(d, x, x_buf, off_x, q->type, q_buf, off_q) &&
                    submit_and_wait(d);
    vkDestroyDescriptorPool(d->dev, d->rec_pool, NULL);
    d->rec_pool = VK_NULL_HANDLE;
    return ok;
}

void mg_backend_vulkan_graph_counts(int64_t * recorded, int64_t * reused) {
    *recorded = 0, *reused = 0;
    for (int i = 0; i < vk_n_devices; i++) *recorded += vk_devices[i].n_recorded, *reused += vk_devices[i].n_reused;
}
