//@file full
// vulkan_internal.h - what the two halves of the Vulkan backend share, and
// nothing else includes: backend_vulkan.c (the device, its memory, command
// buffers, the backend interface) and ops_vulkan.c (the shaders, which op
// each one runs, their parameters). ggml-vulkan keeps both in one
// ggml-vulkan.cpp of 10000 lines; split, each half reads on its own.
//
//     backend_vulkan.c                        ops_vulkan.c
//     graph_compute: for each node ... -----> vk_op_record(d, node)
//                                               which shader, what params
//     vk_locate(d, t)        <-----------------  where t's bytes are
//     vk_dispatch(d, ...)    <-----------------  one descriptor set, one dispatch
#pragma once

#include "backend.h"

#include <vulkan/vulkan.h>

// One failing Vulkan call: say which, with its VkResult, and fail.
#define VK_TRY(call, fail)                                                          \
    do {                                                                            \
        const VkResult vk_try_result = (call);                                      \
        if (vk_try_result != VK_SUCCESS) {                                          \
            mg_set_error("Vulkan: %s failed (VkResult %d)", #call, vk_try_result);  \
            fail;                                                                   \
        }                                                                           \
    } while (0)

enum { VK_BINDINGS = 4 };           // src0, src1, src2, dst: one layout for every shader
enum { VK_PUSH_BYTES = 128 };       // the minimum every device guarantees
enum { VK_MAX_SETS = 8192 };        // descriptor sets (dispatches) per graph: at most 2 per node
enum { VK_MAX_PIPELINES = 32 };     // one per shader (ops_vulkan.c's enum vk_op)
enum { VK_MAX_RECORDINGS = 32 };    // graphs kept recorded per device (a -ngl 99 graph's device splits)

// A graph recorded into a command buffer of its own, submitted again for as
// long as nothing it was recorded from changes (backend_vulkan.c).
struct vk_recording {
    VkCommandBuffer  cmd;
    VkDescriptorPool pool;    // its descriptor sets, one per dispatch
    uint64_t *       key;     // what it was recorded from (graph_key); NULL: slot free
    size_t           n_key;
};

struct vk_device {
    // Found at enumeration.
    VkPhysicalDevice           phys;
    VkPhysicalDeviceProperties props;
    uint32_t                   queue_family;
    size_t                     memory_total;
    char                       name[16];   // "Vulkan0"

    // Made on first use (open_device).
    VkDevice              dev;
    VkQueue               queue;
    VkCommandPool         cmd_pool;
    VkCommandBuffer       cmd;
    VkFence               fence;
    VkDescriptorSetLayout set_layout;
    VkPipelineLayout      pipeline_layout;
    VkCommandBuffer       rec_cmd;      // the recording being made: where vk_dispatch records ...
    VkDescriptorPool      rec_pool;     // ... and allocates its descriptor sets
    VkPipeline            pipelines[VK_MAX_PIPELINES];   // made by ops_vulkan.c on first use
    VkBuffer              staging;      // host-visible memory every transfer goes through
    VkDeviceMemory        staging_mem;
    void *                staging_map;
    size_t                staging_size;
    VkBuffer              scratch;      // device memory for the quantized activations of a matmul
    VkDeviceMemory        scratch_mem;
    size_t                scratch_size;
    struct vk_recording   recordings[VK_MAX_RECORDINGS];
    int                   next_recording;           // the slot the next new graph takes
    int64_t               n_recorded, n_reused;     // graph computes that recorded, that reused

    struct mg_backend_buffer_type buft;
    struct mg_backend_device      device;
};

// What one dispatch needs besides its buffers: the push constants (the
// shader's Params block, in order) and how many workgroups in x and y.
struct vk_dispatch {
    uint32_t pc[VK_PUSH_BYTES / 4];
    uint32_t n_pc;
    uint32_t groups;
    uint32_t groups_y;   // 0 is 1
};

// backend_vulkan.c: which VkBuffer of d holds t's bytes, and at which byte
// offset t starts in it; false, naming t, when t is not in d's memory.
bool vk_locate(const struct vk_device * d, const struct mg_tensor * t, VkBuffer * buf, size_t * offset);

// backend_vulkan.c: record one dispatch of pipeline into d's recording,
// bufs[i] bound at binding i, then a barrier so that the next dispatch sees
// what this one wrote.
bool vk_dispatch(struct vk_device * d, VkPipeline pipeline, const VkBuffer bufs[VK_BINDINGS],
                 const struct vk_dispatch * x);

// ops_vulkan.c: the scratch bytes node t's dispatches use (quantized
// activations), 0 for most; backend_vulkan.c makes the scratch buffer as
// large as the largest node of a graph needs before recording it.
size_t vk_op_scratch_bytes(const struct mg_tensor * t);

// ops_vulkan.c: record the quantization of x's F32 rows (x_t, at byte off_x
// of x_buf) into Q8_0 or Q8_K blocks at byte off_q of q_buf, in the CPU's
// layout: the first half of a quantized matmul, and on its own for the tests
// (mg_backend_vulkan_quantize).
bool vk_record_quantize(struct vk_device * d, const struct mg_tensor * x_t, VkBuffer x_buf, size_t off_x,
                        enum mg_type type, VkBuffer q_buf, size_t off_q);

// ops_vulkan.c: does a shader run t (views: true, nothing to run)?
bool vk_op_supported(const struct mg_tensor * t);
// ops_vulkan.c: node i of a graph into d's command buffer (a view: nothing);
// false, naming the node, for one no shader runs.
bool vk_op_record(struct vk_device * d, const struct mg_tensor * t, int i);
