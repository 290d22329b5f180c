//@file full
// ops_vulkan.c - the ops of the Vulkan backend: which shader runs a node
// (op_of), on which shapes and types it may (the supports_* functions: the
// scheduler keeps every other node on the CPU), and the push constants it
// is given (the params_* functions, in the order of each shader's Params
// block). The device, memory and command buffers are backend_vulkan.c's.
// The shaders are vulkan/*.comp, compiled to SPIR-V by glslc at build time
// and read from MG_VK_SHADER_DIR (ggml-vulkan's vulkan-shaders/, which it
// embeds in the library instead).
//
// What runs so far, F32 activations throughout: ADD and MUL (the second
// operand broadcast), SILU, SWIGLU, RMS_NORM, ROPE (NEOX and NORMAL),
// SOFT_MAX with a mask and a scale, CONT, and MUL_MAT with F32, F16, Q8_0,
// Q4_0, Q4_K or Q6_K weights (F16 also for the attention over an F16 KV
// cache; for the quantized weights, the activations are first quantized as
// the CPU quantizes them, into the device's scratch buffer: two dispatches,
// record_mul_mat_q8), SET_ROWS into an F32 or F16 cache in device memory, and GET_ROWS
// of F32, F16, Q8_0 and Q4_0 rows. The token embeddings stay in host memory
// (offload.h), so the scheduler keeps their lookup on the CPU in a model's
// graph; an offloaded layer's KV cache is in device memory
// (mg_offload_kv_cache), so its stores and the attention run here.
#define _POSIX_C_SOURCE 200809L
#include "vulkan_internal.h"
#include "ops.h"   // enum mg_rope_mode

#include <math.h>
#include <stdio.h>
#include <string.h>

#ifndef MG_VK_SHADER_DIR
#error "MG_VK_SHADER_DIR must name the directory of the compiled shaders (full/Makefile sets it)"
#endif

// A shader per entry; MUL_MAT has one per weight type (mul_mat_op).
enum vk_op {
    VK_OP_ADD, VK_OP_MUL, VK_OP_SILU, VK_OP_SWIGLU, VK_OP_RMS_NORM, VK_OP_ROPE, VK_OP_SOFT_MAX, VK_OP_CONT,
    VK_OP_SET_ROWS, VK_OP_GET_ROWS,
    VK_OP_MUL_MAT, VK_OP_MUL_MAT_Q8_0, VK_OP_MUL_MAT_F16, VK_OP_MUL_MAT_Q4_0, VK_OP_MUL_MAT_Q4_K, VK_OP_MUL_MAT_Q6_K,
    VK_OP_QUANTIZE_Q8_0, VK_OP_QUANTIZE_Q8_K,   // not an op of a node: the first half of a quantized MUL_MAT
    VK_OP_COUNT
};
static const char * const vk_op_shader[VK_OP_COUNT] = {
    [VK_OP_ADD]          = "add.spv",          [VK_OP_MUL]          = "mul.spv",
    [VK_OP_SILU]         = "silu.spv",         [VK_OP_SWIGLU]       = "swiglu.spv",
    [VK_OP_RMS_NORM]     = "rms_norm.spv",     [VK_OP_ROPE]         = "rope.spv",
    [VK_OP_SOFT_MAX]     = "soft_max.spv",     [VK_OP_CONT]         = "cont.spv",
    [VK_OP_SET_ROWS]     = "set_rows.spv",     [VK_OP_GET_ROWS]     = "get_rows.spv",
    [VK_OP_MUL_MAT]      = "mul_mat.spv",      [VK_OP_MUL_MAT_Q8_0] = "mul_mat_q8_0.spv",
    [VK_OP_MUL_MAT_F16]  = "mul_mat_f16.spv",  [VK_OP_MUL_MAT_Q4_0] = "mul_mat_q4_0.spv",
    [VK_OP_MUL_MAT_Q4_K] = "mul_mat_q4_k.spv", [VK_OP_MUL_MAT_Q6_K] = "mul_mat_q6_k.spv",
    [VK_OP_QUANTIZE_Q8_0] = "quantize_q8_0.spv", [VK_OP_QUANTIZE_Q8_K] = "quantize_q8_k.spv",
};
_Static_assert((int) VK_OP_COUNT <= (int) VK_MAX_PIPELINES, "struct vk_device has a pipeline per shader");

enum { VK_GROUP = 256 };            // local_size_x of the shaders
enum { VK_MAX_GROUPS = 65535 };     // per dimension of a dispatch, on every device

// ---------------------------------------------------------------------------
// Pipelines: a shader's SPIR-V read on first use
// ---------------------------------------------------------------------------

static bool load_pipeline(struct vk_device * d, enum vk_op op) {
    if (d->pipelines[op] != VK_NULL_HANDLE) return true;
    char path[512];
    snprintf(path, sizeof path, "%s/%s", MG_VK_SHADER_DIR, vk_op_shader[op]);
    FILE * f = fopen(path, "rb");
    if (f == NULL) {
        mg_set_error("Vulkan: cannot open the shader %s (built by make VULKAN=1)", path);
        return false;
    }
    uint32_t code[16384];
    const size_t n = fread(code, 1, sizeof code, f);
    fclose(f);
    if (n == 0 || n % 4 != 0 || n == sizeof code) {
        mg_set_error("Vulkan: %s is not a SPIR-V module of at most %zu bytes", path, sizeof code - 4);
        return false;
    }
    const VkShaderModuleCreateInfo mi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, .codeSize = n, .pCode = code};
    VkShaderModule module;
    VK_TRY(vkCreateShaderModule(d->dev, &mi, NULL, &module), return false);
    const VkComputePipelineCreateInfo pi = {
        .sType  = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage  = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                   .module = module, .pName = "main"},
        .layout = d->pipeline_layout,
    };
    const VkResult r = vkCreateComputePipelines(d->dev, VK_NULL_HANDLE, 1, &pi, NULL, &d->pipelines[op]);
    vkDestroyShaderModule(d->dev, module, NULL);
    VK_TRY(r, return false);
    return true;
}

// MUL_MAT's shader by the weights' type (the F32 one refuses the others).
static int mul_mat_op(enum mg_type type) {
    return type == MG_TYPE_Q8_0 ? VK_OP_MUL_MAT_Q8_0
         : type == MG_TYPE_F16  ? VK_OP_MUL_MAT_F16
         : type == MG_TYPE_Q4_0 ? VK_OP_MUL_MAT_Q4_0
         : type == MG_TYPE_Q4_K ? VK_OP_MUL_MAT_Q4_K
         : type == MG_TYPE_Q6_K ? VK_OP_MUL_MAT_Q6_K
                                : VK_OP_MUL_MAT;
}

// The type the CPU rounds a matmul's F32 activations to before it multiplies
// them by weights of this type (vec.c's vec_dot_type, ggml's), for the types
// with a shader here: Q8_0 for Q8_0 and Q4_0, Q8_K for the K-quants. F32 for
// the rest: F32 weights, and F16 ones, whose shader keeps the activations F32
// where the CPU rounds them to F16 (a difference test_ngl_f16_model measures).
static enum mg_type activation_type(enum mg_type weights) {
    return weights == MG_TYPE_Q8_0 || weights == MG_TYPE_Q4_0 ? MG_TYPE_Q8_0
         : weights == MG_TYPE_Q4_K || weights == MG_TYPE_Q6_K ? MG_TYPE_Q8_K
                                                              : MG_TYPE_F32;
}

// The shader of a node, or -1 if none runs it.
static int op_of(const struct mg_tensor * t) {
    switch (t->op) {
        case MG_OP_ADD:      return VK_OP_ADD;
        case MG_OP_MUL:      return VK_OP_MUL;
        case MG_OP_SILU:     return VK_OP_SILU;
        case MG_OP_SWIGLU:   return VK_OP_SWIGLU;
        case MG_OP_ROPE:     return VK_OP_ROPE;
        case MG_OP_SOFT_MAX: return VK_OP_SOFT_MAX;
        case MG_OP_CONT:     return VK_OP_CONT;
        case MG_OP_SET_ROWS: return VK_OP_SET_ROWS;
        case MG_OP_GET_ROWS: return VK_OP_GET_ROWS;
        case MG_OP_RMS_NORM: return VK_OP_RMS_NORM;
        case MG_OP_MUL_MAT:  return mul_mat_op(t->src[0]->type);
        default:             return -1;
    }
}

static bool is_view_op(enum mg_op op) {
    return op == MG_OP_NONE || op == MG_OP_VIEW || op == MG_OP_RESHAPE || op == MG_OP_PERMUTE ||
           op == MG_OP_TRANSPOSE;
}

static bool all_f32(const struct mg_tensor * t, int n_src) {
    if (t->type != MG_TYPE_F32) return false;
    for (int i = 0; i < n_src; i++) {
        if (t->src[i]->type != MG_TYPE_F32) return false;
    }
    return true;
}

static bool rows_contiguous(const struct mg_tensor * t) { return t->nb[0] == 4; }

static bool fully_contiguous(const struct mg_tensor * t) {
    return t->nb[0] == 4 && t->nb[1] == 4 * (size_t) t->ne[0] && t->nb[2] == t->nb[1] * (size_t) t->ne[1] &&
           t->nb[3] == t->nb[2] * (size_t) t->ne[2];
}

// The shaders index with 32-bit unsigned integers. (A dispatch of more than
// 65535 groups, the least every device allows per dimension, is spread over
// x and y: spread_groups below.)
static bool fits_u32(const struct mg_tensor * t) { return mg_nbytes(t) < UINT32_MAX; }

// binary.comp: b repeats into a, d has a's shape.
static bool supports_binary(const struct mg_tensor * t) {
    const struct mg_tensor * a = t->src[0], * b = t->src[1];
    if (!all_f32(t, 2) || !rows_contiguous(t) || !rows_contiguous(a) || !rows_contiguous(b)) return false;
    for (int i = 0; i < MG_MAX_DIMS; i++) {
        if (a->ne[i] != t->ne[i] || b->ne[i] == 0 || a->ne[i] % b->ne[i] != 0) return false;
    }
    return fits_u32(a) && fits_u32(b) && fits_u32(t);
}

// unary.comp and rms_norm.comp: contiguous in and out.
static bool supports_rowwise(const struct mg_tensor * t) {
    return all_f32(t, 1) && fully_contiguous(t) && fully_contiguous(t->src[0]) && fits_u32(t) &&
           mg_nelements(t) == mg_nelements(t->src[0]);
}

// mul_mat.comp: F32 weights and activations, rows contiguous, ggml's broadcast.
static bool supports_mul_mat(const struct mg_tensor * t) {
    const struct mg_tensor * a = t->src[0], * b = t->src[1];
    return all_f32(t, 2) && rows_contiguous(a) && rows_contiguous(b) && rows_contiguous(t) && a->ne[2] > 0 &&
           a->ne[3] > 0 && b->ne[2] % a->ne[2] == 0 && b->ne[3] % a->ne[3] == 0 && fits_u32(a) && fits_u32(b) &&
           fits_u32(t);
}

// mul_mat_quant.glsl's shaders: weights of this type in whole blocks (blk
// values in bytes bytes) per row, consecutive within a row, rows and matrices
// anywhere at even bytes (a block's fp16 scale is read as half a word: so
// the F16 K and V views into the KV cache qualify too), F32 activations and
// result, the same broadcast as mul_mat.comp.
static bool supports_mul_mat_packed(const struct mg_tensor * t, enum mg_type type, int64_t blk, size_t bytes) {
    const struct mg_tensor * a = t->src[0], * b = t->src[1];
    const bool even = a->nb[1] % 2 == 0 && a->nb[2] % 2 == 0 && a->nb[3] % 2 == 0 &&
                      (a->view_src == NULL || a->view_offs % 2 == 0);
    return a->type == type && b->type == MG_TYPE_F32 && t->type == MG_TYPE_F32 && a->ne[0] % blk == 0 &&
           a->nb[0] == bytes && even && rows_contiguous(b) && rows_contiguous(t) && a->ne[2] > 0 && a->ne[3] > 0 &&
           b->ne[2] % a->ne[2] == 0 && b->ne[3] % a->ne[3] == 0 && fits_u32(a) &&
           fits_u32(b) && fits_u32(t);
}

// unary.comp with -DOP_SWIGLU: a, b and d contiguous, of one shape.
static bool supports_swiglu(const struct mg_tensor * t) {
    const struct mg_tensor * b = t->src[1];
    return supports_rowwise(t) && b->type == MG_TYPE_F32 && fully_contiguous(b) && fits_u32(b) &&
           mg_nelements(b) == mg_nelements(t);
}

// rope.comp: F32 rows, one I32 position per token (a's ne[2]), NEOX or
// NORMAL pairs, no frequency factors (Llama 3's src[2] stays on the CPU).
static bool supports_rope(const struct mg_tensor * t) {
    const struct mg_tensor * a = t->src[0], * pos = t->src[1];
    const int mode = mg_get_op_param_i32(t, 1), n_rot = mg_get_op_param_i32(t, 0);
    const bool pairs = n_rot > 0 && n_rot % 2 == 0 && n_rot <= a->ne[0];   // the shader's pair count per row
    return pairs && all_f32(t, 1) && rows_contiguous(a) && rows_contiguous(t) && pos->type == MG_TYPE_I32 &&
           pos->nb[0] == 4 && pos->ne[0] == a->ne[2] && t->src[2] == NULL &&
           (mode == MG_ROPE_NEOX || mode == MG_ROPE_NORMAL) && fits_u32(a) && fits_u32(t);
}

// soft_max.comp: F32 rows, a workgroup each; the mask F32 and contiguous, or
// none. One mask plane: the shader picks the mask's row by i1 alone.
static bool supports_soft_max(const struct mg_tensor * t) {
    const struct mg_tensor * a = t->src[0], * mask = t->src[1];
    const bool mask_ok = mask == NULL || (mask->type == MG_TYPE_F32 && fully_contiguous(mask) &&
                                          mask->ne[0] == a->ne[0] && mask->ne[1] >= a->ne[1] && mask->ne[2] == 1 &&
                                          mask->ne[3] == 1 && fits_u32(mask));
    return all_f32(t, 1) && rows_contiguous(a) && rows_contiguous(t) && mask_ok && fits_u32(a) && fits_u32(t);
}

// cont.comp: F32 of any float-aligned strides into a contiguous d of its shape.
static bool supports_cont(const struct mg_tensor * t) {
    const struct mg_tensor * a = t->src[0];
    bool aligned = true;
    for (int i = 0; i < MG_MAX_DIMS; i++) aligned = aligned && a->nb[i] % 4 == 0 && a->ne[i] == t->ne[i];
    return all_f32(t, 1) && aligned && fully_contiguous(t) && fits_u32(a) && fits_u32(t);
}

// set_rows.comp: F32 rows into an F32 (rows on whole words) or F16
// destination. The scheduler keeps the node where the destination's memory
// is: a cache in host memory keeps it on the CPU.
static bool supports_set_rows(const struct mg_tensor * t) {
    const struct mg_tensor * src = t->src[0], * idx = t->src[1], * dst = t->src[2];
    const bool f16 = dst->type == MG_TYPE_F16;
    return src->type == MG_TYPE_F32 && rows_contiguous(src) && idx->type == MG_TYPE_I32 && fully_contiguous(idx) &&
           (f16 || dst->type == MG_TYPE_F32) && dst->nb[0] == (f16 ? 2u : 4u) &&
           (f16 || (dst->nb[1] % 4 == 0 && t->view_offs % 4 == 0)) && fits_u32(src) && fits_u32(dst);
}

// get_rows.comp: rows of an F32, F16, Q8_0 or Q4_0 matrix (not a view), F32 out.
// One matrix and one list of ids: the 3-D lookups of a MoE layer (ids
// {n_used, T} into {1, n_expert, T}) stay on the CPU.
static bool supports_get_rows(const struct mg_tensor * t) {
    const struct mg_tensor * a = t->src[0], * ids = t->src[1];
    const bool type_ok = a->type == MG_TYPE_F32 || a->type == MG_TYPE_F16 || a->type == MG_TYPE_Q8_0 ||
                         a->type == MG_TYPE_Q4_0;
    const bool one_matrix = a->ne[2] == 1 && a->ne[3] == 1 && ids->ne[1] == 1 && ids->ne[2] == 1;
    return type_ok && one_matrix && a->view_src == NULL && a->nb[0] == mg_type_size(a->type) &&
           ids->type == MG_TYPE_I32 && fully_contiguous(ids) && t->type == MG_TYPE_F32 && fully_contiguous(t) &&
           fits_u32(a) && fits_u32(t);
}

static bool supports(const struct mg_tensor * t) {
    switch (op_of(t)) {
        case VK_OP_ADD: case VK_OP_MUL: return supports_binary(t);
        case VK_OP_SILU:                return supports_rowwise(t);
        case VK_OP_SWIGLU:              return supports_swiglu(t);
        case VK_OP_ROPE:                return supports_rope(t);
        case VK_OP_SOFT_MAX:            return supports_soft_max(t);
        case VK_OP_CONT:                return supports_cont(t);
        case VK_OP_SET_ROWS:            return supports_set_rows(t);
        case VK_OP_GET_ROWS:            return supports_get_rows(t);
        case VK_OP_RMS_NORM:            return supports_rowwise(t);
        case VK_OP_MUL_MAT:             return supports_mul_mat(t);
        case VK_OP_MUL_MAT_Q8_0:        return supports_mul_mat_packed(t, MG_TYPE_Q8_0, 32, 34);
        case VK_OP_MUL_MAT_F16:         return supports_mul_mat_packed(t, MG_TYPE_F16, 1, 2);
        case VK_OP_MUL_MAT_Q4_0:        return supports_mul_mat_packed(t, MG_TYPE_Q4_0, 32, 18);
        case VK_OP_MUL_MAT_Q4_K:        return supports_mul_mat_packed(t, MG_TYPE_Q4_K, 256, 144);
        case VK_OP_MUL_MAT_Q6_K:        return supports_mul_mat_packed(t, MG_TYPE_Q6_K, 256, 210);
        default:                        return false;
    }
}

// ---------------------------------------------------------------------------
// Push constants: each shader's Params block, field by field
// ---------------------------------------------------------------------------

static void push(struct vk_dispatch * x, uint32_t v) { x->pc[x->n_pc++] = v; }

// A tensor's strides in floats, dims 1..3 (dim 0 is 1: rows_contiguous).
static void push_strides(struct vk_dispatch * x, const struct mg_tensor * t) {
    for (int i = 1; i < MG_MAX_DIMS; i++) push(x, (uint32_t) (t->nb[i] / 4));
}

static void push_f32(struct vk_dispatch * x, float v) {
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    push(x, bits);
}

static void push_shape(struct vk_dispatch * x, const struct mg_tensor * t) {
    for (int i = 0; i < MG_MAX_DIMS; i++) push(x, (uint32_t) t->ne[i]);
}

// Where a tensor starts, for the shaders that bind their buffers as floats.
static uint32_t in_floats(size_t bytes) { return (uint32_t) (bytes / 4); }

static uint32_t groups_for(int64_t n) { return (uint32_t) ((n + VK_GROUP - 1) / VK_GROUP); }

static void params_binary(const struct mg_tensor * t, const size_t * off, struct vk_dispatch * x) {
    push_shape(x, t), push_shape(x, t->src[1]);
    push(x, in_floats(off[0])), push_strides(x, t->src[0]);
    push(x, in_floats(off[1])), push_strides(x, t->src[1]);
    push(x, in_floats(off[3])), push_strides(x, t);
    x->groups = groups_for(mg_nelements(t));
}

static void params_unary(const struct mg_tensor * t, const size_t * off, struct vk_dispatch * x) {
    push(x, (uint32_t) mg_nelements(t)), push(x, in_floats(off[0])), push(x, in_floats(off[3]));
    push(x, in_floats(off[1]));   // SWIGLU's b (a's own offset again for SILU, which has no src[1])
    x->groups = groups_for(mg_nelements(t));
}

// theta_scale as compute.c's rope_angles makes it (powf here, on the host),
// so that the angles start from the CPU's number.
static void params_rope(const struct mg_tensor * t, const size_t * off, struct vk_dispatch * x) {
    const int n_rot = mg_get_op_param_i32(t, 0);
    push_shape(x, t);
    push(x, in_floats(off[0])), push_strides(x, t->src[0]);
    push(x, in_floats(off[3])), push_strides(x, t);
    push(x, in_floats(off[1])), push(x, (uint32_t) n_rot), push(x, mg_get_op_param_i32(t, 1) == MG_ROPE_NEOX);
    push_f32(x, powf(mg_get_op_param_f32(t, 2), -2.0f / (float) n_rot));
    push_f32(x, mg_get_op_param_f32(t, 3));
    x->groups = groups_for(mg_nelements(t) / t->ne[0] * (t->ne[0] - n_rot / 2));   // an invocation per pair or copy
}

static void params_soft_max(const struct mg_tensor * t, const size_t * off, struct vk_dispatch * x) {
    const struct mg_tensor * mask = t->src[1];
    push(x, (uint32_t) t->ne[0]), push(x, (uint32_t) t->ne[1]), push(x, (uint32_t) t->ne[2]);
    push(x, in_floats(off[0])), push_strides(x, t->src[0]);
    push(x, in_floats(off[3])), push_strides(x, t);
    push(x, in_floats(off[1])), push(x, mask != NULL ? (uint32_t) (mask->nb[1] / 4) : 0), push(x, mask != NULL);
    push_f32(x, mg_get_op_param_f32(t, 0));
    push(x, (uint32_t) (t->ne[1] * t->ne[2] * t->ne[3]));
    x->groups = (uint32_t) (t->ne[1] * t->ne[2] * t->ne[3]);   // one workgroup per row
}

static void params_cont(const struct mg_tensor * t, const size_t * off, struct vk_dispatch * x) {
    push_shape(x, t);
    push(x, in_floats(off[0]));
    for (int i = 0; i < MG_MAX_DIMS; i++) push(x, (uint32_t) (t->src[0]->nb[i] / 4));
    push(x, in_floats(off[3]));
    x->groups = groups_for(mg_nelements(t));
}

static void params_rms_norm(const struct mg_tensor * t, const size_t * off, struct vk_dispatch * x) {
    push(x, (uint32_t) t->ne[0]), push(x, in_floats(off[0])), push(x, in_floats(off[3]));
    push_f32(x, mg_get_op_param_f32(t, 0));   // eps
    push(x, (uint32_t) (t->ne[1] * t->ne[2] * t->ne[3]));
    x->groups = (uint32_t) (t->ne[1] * t->ne[2] * t->ne[3]);   // one workgroup per row
}

// mul_mat.comp takes a's offset and strides in floats; the packed-weight
// shaders (a_in_bytes) in bytes: Q8_0 rows of 34-byte blocks and F16 rows of
// odd length need not start on a float. Quantized activations (b_quantized:
// at the scratch buffer's start, its rows packed by quantize_q8_*.comp) are
// located in bytes too.
static void params_mul_mat(const struct mg_tensor * t, const size_t * off, bool a_in_bytes, bool b_quantized,
                           struct vk_dispatch * x) {
    const struct mg_tensor * a = t->src[0], * b = t->src[1];
    push(x, (uint32_t) a->ne[0]), push(x, (uint32_t) t->ne[0]), push(x, (uint32_t) t->ne[1]);
    push(x, (uint32_t) t->ne[2]), push(x, (uint32_t) t->ne[3]);
    push(x, a_in_bytes ? (uint32_t) off[0] : in_floats(off[0]));
    for (int i = 1; i < MG_MAX_DIMS; i++) push(x, (uint32_t) (a_in_bytes ? a->nb[i] : a->nb[i] / 4));
    if (b_quantized) {
        const size_t row = mg_row_size(activation_type(a->type), b->ne[0]);
        push(x, 0), push(x, (uint32_t) row), push(x, (uint32_t) (row * b->ne[1]));
        push(x, (uint32_t) (row * b->ne[1] * b->ne[2]));
    } else {
        push(x, in_floats(off[1])), push_strides(x, b);
    }
    push(x, in_floats(off[3])), push_strides(x, t);
    push(x, (uint32_t) (b->ne[2] / a->ne[2])), push(x, (uint32_t) (b->ne[3] / a->ne[3]));
    x->groups = groups_for(mg_nelements(t));
}

static void params_set_rows(const struct mg_tensor * t, const size_t * off, struct vk_dispatch * x) {
    const struct mg_tensor * src = t->src[0], * dst = t->src[2];
    push(x, (uint32_t) src->ne[0]), push(x, (uint32_t) src->ne[1]), push(x, (uint32_t) src->ne[2]);
    push(x, (uint32_t) mg_nelements(src));
    push(x, in_floats(off[0])), push_strides(x, src);
    push(x, in_floats(off[1]));
    push(x, (uint32_t) off[3]), push(x, (uint32_t) dst->nb[1]);
    push(x, (uint32_t) dst->ne[1]), push(x, dst->type == MG_TYPE_F16);
    x->groups = groups_for(mg_nelements(src));
}

static void params_get_rows(const struct mg_tensor * t, const size_t * off, struct vk_dispatch * x) {
    const struct mg_tensor * a = t->src[0];
    push(x, (uint32_t) t->ne[0]), push(x, (uint32_t) mg_nelements(t));
    push(x, (uint32_t) off[0]), push(x, (uint32_t) a->nb[1]);
    push(x, in_floats(off[1])), push(x, in_floats(off[3]));
    push(x, (uint32_t) a->ne[1]), push(x, (uint32_t) a->type);   // get_rows.comp's type numbers are enum mg_type's
    x->groups = groups_for(mg_nelements(t));
}

// A dispatch of n groups as x by y groups, neither over 65535 (Vulkan's
// least maxComputeWorkGroupCount): y rows of x, as few rows as will do. The
// shaders number the groups row by row (index.glsl) and those past n, fewer
// than a row, return at once.
static void spread_groups(struct vk_dispatch * x) {
    const uint32_t n = x->groups;
    if (n <= VK_MAX_GROUPS) return;   // one row (groups_y 0 is 1)
    x->groups_y      = (n + VK_MAX_GROUPS - 1) / VK_MAX_GROUPS;
    x->groups        = (n + x->groups_y - 1) / x->groups_y;
}

// quantize_q8_*.comp: x's rows (x F32 at off_x, rows contiguous) into
// blocks of type at word q_word of the output: a pair of Q8_0 blocks or one
// Q8_K block per invocation.
static void params_quantize(const struct mg_tensor * x_t, size_t off_x, enum mg_type type, uint32_t q_word,
                            struct vk_dispatch * x) {
    push_shape(x, x_t);
    push(x, in_floats(off_x)), push_strides(x, x_t);
    push(x, q_word);
    const int64_t blocks = mg_nelements(x_t) / mg_blck_size(type);
    x->groups = groups_for(type == MG_TYPE_Q8_0 ? (blocks + 1) / 2 : blocks);
    spread_groups(x);
}

static void params_of(const struct mg_tensor * t, enum vk_op op, const size_t * off, struct vk_dispatch * x) {
    switch (op) {
        case VK_OP_ADD: case VK_OP_MUL: params_binary(t, off, x); break;
        case VK_OP_SILU: case VK_OP_SWIGLU: params_unary(t, off, x); break;
        case VK_OP_ROPE:                params_rope(t, off, x); break;
        case VK_OP_SOFT_MAX:            params_soft_max(t, off, x); break;
        case VK_OP_CONT:                params_cont(t, off, x); break;
        case VK_OP_SET_ROWS:            params_set_rows(t, off, x); break;
        case VK_OP_GET_ROWS:            params_get_rows(t, off, x); break;
        case VK_OP_RMS_NORM:            params_rms_norm(t, off, x); break;
        case VK_OP_MUL_MAT:             params_mul_mat(t, off, false, false, x); break;
        case VK_OP_MUL_MAT_F16:         params_mul_mat(t, off, true, false, x); break;
        case VK_OP_MUL_MAT_Q8_0: case VK_OP_MUL_MAT_Q4_0: case VK_OP_MUL_MAT_Q4_K: case VK_OP_MUL_MAT_Q6_K:
            params_mul_mat(t, off, true, true, x);
            break;
        case VK_OP_QUANTIZE_Q8_0: case VK_OP_QUANTIZE_Q8_K: case VK_OP_COUNT: break;   // not a node's op
    }
    spread_groups(x);
}

// ---------------------------------------------------------------------------
// A node into the command buffer
// ---------------------------------------------------------------------------

// The bytes of x's rows quantized to type as quantize_q8_*.comp writes them
// (Q8_0 in whole pairs of blocks).
static size_t quantized_bytes(const struct mg_tensor * x, enum mg_type type) {
    const int64_t blocks = mg_nelements(x) / mg_blck_size(type);
    return type == MG_TYPE_Q8_0 ? (size_t) ((blocks + 1) / 2) * 2 * 34 : (size_t) blocks * mg_type_size(type);
}

size_t vk_op_scratch_bytes(const struct mg_tensor * t) {
    if (t->op != MG_OP_MUL_MAT || !supports(t)) return 0;
    const enum mg_type type = activation_type(t->src[0]->type);
    return type == MG_TYPE_F32 ? 0 : quantized_bytes(t->src[1], type);
}

bool vk_op_supported(const struct mg_tensor * t) {
    if (is_view_op(t->op)) return true;   // nothing to compute
    return supports(t);
}

// A MUL_MAT with quantized weights, as the CPU's mul_mat_init then its dot
// products: b's rows quantized into the scratch buffer (which
// backend_vulkan.c made at least vk_op_scratch_bytes large before recording),
// then the product shader with the scratch buffer as its b. One scratch
// buffer serves every matmul of the graph: the barrier after each dispatch
// orders them (ggml-vulkan's prealloc_y).
static bool record_mul_mat_q8(struct vk_device * d, const struct mg_tensor * t, VkBuffer * bufs, const size_t * off) {
    const int op = op_of(t);
    if (!vk_record_quantize(d, t->src[1], bufs[1], off[1], activation_type(t->src[0]->type), d->scratch, 0) ||
        !load_pipeline(d, (enum vk_op) op)) {
        return false;
    }
    bufs[1] = d->scratch;
    struct vk_dispatch x = {.n_pc = 0};
    params_of(t, (enum vk_op) op, off, &x);
    return vk_dispatch(d, d->pipelines[op], bufs, &x);
}

// Bindings 0-2 the node's sources, 3 the node itself; a missing source gets
// the node's own buffer (every binding of the layout must name one).
bool vk_op_record(struct vk_device * d, const struct mg_tensor * t, int i) {
    if (is_view_op(t->op)) return true;
    const int op = op_of(t);
    if (op < 0 || !supports(t)) {
        mg_set_error("Vulkan: node %d '%s' (%s %s) has no shader yet", i, t->name, mg_op_name(t->op),
                     mg_type_name(t->type));
        return false;
    }
    VkBuffer bufs[VK_BINDINGS];
    size_t   off[VK_BINDINGS];
    if (!vk_locate(d, t, &bufs[3], &off[3])) return false;
    for (int j = 0; j < 3; j++) {
        bufs[j] = bufs[3], off[j] = off[3];
        if (t->src[j] != NULL && !vk_locate(d, t->src[j], &bufs[j], &off[j])) return false;
    }
    if (t->op == MG_OP_MUL_MAT && activation_type(t->src[0]->type) != MG_TYPE_F32) {
        return record_mul_mat_q8(d, t, bufs, off);
    }
    if (!load_pipeline(d, (enum vk_op) op)) return false;
    struct vk_dispatch x = {.n_pc = 0};
    params_of(t, (enum vk_op) op, off, &x);
    return vk_dispatch(d, d->pipelines[op], bufs, &x);
}

bool vk_record_quantize(struct vk_device * d, const struct mg_tensor * x_t, VkBuffer x_buf, size_t off_x,
                        enum mg_type type, VkBuffer q_buf, size_t off_q) {
    const enum vk_op op = type == MG_TYPE_Q8_0 ? VK_OP_QUANTIZE_Q8_0 : VK_OP_QUANTIZE_Q8_K;
    if (!load_pipeline(d, op)) return false;
    const VkBuffer     bufs[VK_BINDINGS] = {x_buf, x_buf, x_buf, q_buf};
    struct vk_dispatch x                 = {.n_pc = 0};
    params_quantize(x_t, off_x, type, (uint32_t) (off_q / 4), &x);
    return vk_dispatch(d, d->pipelines[op], bufs, &x);
}
