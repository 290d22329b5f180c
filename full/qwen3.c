//@file 09
// qwen3.c - the Qwen3 architecture: hyper-parameters, tensors, and the
// forward pass as a graph (llama.cpp: src/models/qwen3.cpp).
//@+ full prefault
#define _DEFAULT_SOURCE   // madvise's MADV_POPULATE_READ
//@- full prefault
#include "model.h"
#include "arena.h"
#include "gguf.h"
#include "ops.h"
//@+ full repack
#include "repack.h"
//@- full repack
#include "vec.h"
#include "vocab.h"
//@+ full moe
#include "trace.h"
//@- full moe

#include <math.h>
//@+ full prefault
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>
//@- full prefault
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------
// Hyper-parameters
// ---------------------------------------------------------------------------

// Every hyper-parameter key starts with the architecture's name:
// "qwen3.block_count" (llama.cpp: LLM_KV with the arch's prefix, llama-arch.cpp).
static const char * arch_key(char * buf, size_t size, const struct mg_model_hparams * hp, const char * suffix) {
    snprintf(buf, size, "%s.%s", hp->arch_name, suffix);
    return buf;
}

static bool get_u32_as_int(const struct mg_gguf * g, const struct mg_model_hparams * hp, const char * suffix,
                           bool required, int fallback, int * out) {
    char key[96];
    arch_key(key, sizeof(key), hp, suffix);
    uint32_t v;
    if (mg_gguf_find_key(g, key) < 0) {
        if (required) {
            mg_set_error("%s: metadata key '%s' is missing", mg_gguf_path(g), key);
            return false;
        }
        *out = fallback;
        return true;
    }
    if (!mg_gguf_get_u32(g, key, &v)) return false;   // the getter says why (wrong type, an array...)
    if (v == 0 || v > (1u << 24)) {
        mg_set_error("%s: metadata '%s' = %u is out of range", mg_gguf_path(g), key, v);
        return false;
    }
    *out = (int) v;
    return true;
}

static bool get_f32(const struct mg_gguf * g, const struct mg_model_hparams * hp, const char * suffix, bool required,
                    float fallback, float * out) {
    char key[96];
    arch_key(key, sizeof(key), hp, suffix);
    if (mg_gguf_find_key(g, key) < 0) {
        if (required) {
            mg_set_error("%s: metadata key '%s' is missing", mg_gguf_path(g), key);
            return false;
        }
        *out = fallback;
        return true;
    }
    return mg_gguf_get_f32(g, key, out);
}

#if 0 //@old 09..09 one-arch
static bool find_arch(const struct mg_gguf * g, const char * arch, uint64_t arch_len, struct mg_model_hparams * hp) {
    if (arch_len != 5 || memcmp(arch, "qwen3", 5) != 0) {
        mg_set_error("%s: architecture '%.*s' is not supported (this engine runs qwen3)", mg_gguf_path(g),
                     (int) (arch_len < 64 ? arch_len : 64), arch);
        return false;
    }
    snprintf(hp->arch_name, sizeof(hp->arch_name), "qwen3");
    return true;
}
#endif //@old one-arch
//@+ full arch
// The architectures full/ runs, with what tells them apart at load time
// (llama.cpp: llama_model_rope_type in llama-model.cpp picks the rope type).
static const struct {
    const char * name;
    enum mg_arch arch;
    int          rope_type;
} archs[] = {
    {"llama", MG_ARCH_LLAMA, MG_ROPE_NORMAL},
    {"qwen2", MG_ARCH_QWEN2, MG_ROPE_NEOX},
    {"qwen3", MG_ARCH_QWEN3, MG_ROPE_NEOX},
    {"qwen3moe", MG_ARCH_QWEN3MOE, MG_ROPE_NEOX},
};

// A dense architecture's file with experts is another model's layout
// (Mixtral is "llama" with ffn_gate_inp and ffn_*_exps): not built.
static bool check_no_experts(const struct mg_gguf * g, const struct mg_model_hparams * hp) {
    int n_expert = 0;
    if (!get_u32_as_int(g, hp, "expert_count", false, 0, &n_expert)) return false;
    if (n_expert > 0) {
        mg_set_error("%s: metadata '%s.expert_count' = %d: mixture-of-experts models are not supported yet",
                     mg_gguf_path(g), hp->arch_name, n_expert);
        return false;
    }
    return true;
}

// An expert count: a u32 in 1..limit, or an error naming the file, the key and what is wrong.
static bool get_expert_count(const struct mg_gguf * g, const struct mg_model_hparams * hp, const char * suffix,
                             int limit, const char * limit_what, int * out) {
    char     key[96];
    uint32_t v;
    arch_key(key, sizeof(key), hp, suffix);
    if (mg_gguf_find_key(g, key) < 0) {
        mg_set_error("%s: metadata key '%s' is missing (a %s model needs it)", mg_gguf_path(g), key, hp->arch_name);
        return false;
    }
    if (!mg_gguf_get_u32(g, key, &v)) return false;   // the getter says why
    if (v == 0 || v > (uint32_t) limit) {
        mg_set_error("%s: metadata '%s' = %u must be in 1..%d (%s)", mg_gguf_path(g), key, v, limit, limit_what);
        return false;
    }
    *out = (int) v;
    return true;
}

// qwen3moe's experts: how many, how many each token uses, how wide
// (llama.cpp: llama_model_base::load_hparams reads expert_count and
// expert_used_count for every architecture and asserts 0 < used <= count <=
// LLAMA_MAX_EXPERTS; llama_model_qwen3moe::load_arch_hparams reads
// expert_feed_forward_length, n_ff / n_expert_used when it is absent or 0).
static bool load_expert_hparams(const struct mg_gguf * g, struct mg_model_hparams * hp) {
    int n_ff_exp = 0;
    if (!get_expert_count(g, hp, "expert_count", MG_MAX_EXPERTS, "llama.cpp's LLAMA_MAX_EXPERTS is 512",
                          &hp->n_expert) ||
        !get_expert_count(g, hp, "expert_used_count", hp->n_expert, "at most expert_count", &hp->n_expert_used) ||
        !get_u32_as_int(g, hp, "feed_forward_length", true, 0, &hp->n_ff)) {
        return false;
    }
    char key[96];
    arch_key(key, sizeof(key), hp, "expert_feed_forward_length");
    uint32_t v = 0;
    if (mg_gguf_find_key(g, key) >= 0 && !mg_gguf_get_u32(g, key, &v)) return false;
    if (v > (1u << 24)) {
        mg_set_error("%s: metadata '%s' = %u is out of range", mg_gguf_path(g), key, v);
        return false;
    }
    n_ff_exp = v > 0 ? (int) v : hp->n_ff / hp->n_expert_used;
    if (n_ff_exp == 0) {
        mg_set_error("%s: no '%s', and feed_forward_length %d / expert_used_count %d is 0", mg_gguf_path(g), key,
                     hp->n_ff, hp->n_expert_used);
        return false;
    }
    hp->n_ff_exp = n_ff_exp;
    // As qwen3moe.cpp builds it, whatever the file says: norm_w = true, and
    // hparams.expert_weights_scale, a key its load_arch_hparams never reads
    // (other MoE architectures do), so 0: not scaled.
    hp->expert_weights_norm  = true;
    hp->expert_weights_scale = 0.0f;
    return true;
}

static bool find_arch(const struct mg_gguf * g, const char * arch, uint64_t arch_len, struct mg_model_hparams * hp) {
    for (size_t i = 0; i < sizeof(archs) / sizeof(archs[0]); i++) {
        if (arch_len == strlen(archs[i].name) && memcmp(arch, archs[i].name, arch_len) == 0) {
            snprintf(hp->arch_name, sizeof(hp->arch_name), "%s", archs[i].name);
            hp->arch      = archs[i].arch;
            hp->rope_type = archs[i].rope_type;
            if (hp->arch == MG_ARCH_QWEN3MOE) return load_expert_hparams(g, hp);
            return check_no_experts(g, hp);
        }
    }
    mg_set_error("%s: architecture '%.*s' is not supported (this engine runs llama, qwen2, qwen3, qwen3moe)",
                 mg_gguf_path(g), (int) (arch_len < 64 ? arch_len : 64), arch);
    return false;
}

//@- full arch

static bool load_hparams(const struct mg_gguf * g, struct mg_model_hparams * hp) {
    const char * arch;
    uint64_t     arch_len;
    if (!mg_gguf_get_str(g, "general.architecture", &arch, &arch_len)) return false;
    if (!find_arch(g, arch, arch_len, hp)) return false;
    if (!get_u32_as_int(g, hp, "block_count", true, 0, &hp->n_layer) ||
        !get_u32_as_int(g, hp, "context_length", true, 0, &hp->n_ctx_train) ||
        !get_u32_as_int(g, hp, "embedding_length", true, 0, &hp->n_embd) ||
        !get_u32_as_int(g, hp, "feed_forward_length", true, 0, &hp->n_ff) ||
        !get_u32_as_int(g, hp, "attention.head_count", true, 0, &hp->n_head) ||
        !get_u32_as_int(g, hp, "attention.head_count_kv", false, hp->n_head, &hp->n_head_kv) ||
        !get_u32_as_int(g, hp, "attention.key_length", false, hp->n_embd / hp->n_head, &hp->head_dim) ||
        !get_f32(g, hp, "attention.layer_norm_rms_epsilon", true, 0.0f, &hp->rms_eps) ||
        !get_f32(g, hp, "rope.freq_base", false, 10000.0f, &hp->rope_freq_base)) {
        return false;
    }
    // NaN, infinite or negative values load without complaint and give NaN
    // logits (ggml asserts eps >= 0 at compute time): refused here, by name.
    if (!(hp->rms_eps >= 0.0f) || isinf(hp->rms_eps)) {
        mg_set_error("%s: metadata '%s.attention.layer_norm_rms_epsilon' = %g must be a finite number >= 0",
                     mg_gguf_path(g), hp->arch_name, (double) hp->rms_eps);
        return false;
    }
    if (!(hp->rope_freq_base > 0.0f) || isinf(hp->rope_freq_base)) {
        mg_set_error("%s: metadata '%s.rope.freq_base' = %g must be a finite number > 0", mg_gguf_path(g),
                     hp->arch_name, (double) hp->rope_freq_base);
        return false;
    }
    int value_length, n_rot;
    if (!get_u32_as_int(g, hp, "attention.value_length", false, hp->head_dim, &value_length) ||
        !get_u32_as_int(g, hp, "rope.dimension_count", false, hp->head_dim, &n_rot)) {
        return false;
    }
    if (value_length != hp->head_dim || n_rot != hp->head_dim) {
        mg_set_error("%s: key_length %d, value_length %d and rope.dimension_count %d must be equal for %s",
                     mg_gguf_path(g), hp->head_dim, value_length, n_rot, hp->arch_name);
        return false;
    }
    if (hp->n_head % hp->n_head_kv != 0) {
        mg_set_error("%s: head_count %d is not a multiple of head_count_kv %d", mg_gguf_path(g), hp->n_head,
                     hp->n_head_kv);
        return false;
    }
    // Linear rope scaling is a plain factor on the angles; YaRN is not built here.
    hp->rope_freq_scale = 1.0f;
    char scaling_key[96], factor_key[96];
    arch_key(scaling_key, sizeof(scaling_key), hp, "rope.scaling.type");
    arch_key(factor_key, sizeof(factor_key), hp, "rope.scaling.factor");
    const char * scaling = NULL;
    uint64_t     scaling_len = 0;
    if (mg_gguf_find_key(g, scaling_key) >= 0 && !mg_gguf_get_str(g, scaling_key, &scaling, &scaling_len)) {
        return false;
    }
    float factor = 0.0f;
    if (!get_f32(g, hp, "rope.scaling.factor", false, 0.0f, &factor)) return false;
    const bool is_none = scaling == NULL || (scaling_len == 4 && memcmp(scaling, "none", 4) == 0);
    const bool is_linear = scaling != NULL && scaling_len == 6 && memcmp(scaling, "linear", 6) == 0;
    if (isnan(factor) || isinf(factor) || factor < 0.0f) {
        mg_set_error("%s: metadata '%s' = %g must be a finite number >= 0", mg_gguf_path(g), factor_key,
                     (double) factor);
        return false;
    }
    if (!is_none && !is_linear) {
        mg_set_error("%s: rope scaling '%.*s' is not supported (none and linear are)", mg_gguf_path(g),
                     (int) scaling_len, scaling);
        return false;
    }
    if (is_linear && factor > 0.0f) hp->rope_freq_scale = 1.0f / factor;
    return true;
}

// ---------------------------------------------------------------------------
// Tensors
// ---------------------------------------------------------------------------

enum tensor_use {
    USE_NORM,     // multiplied element-wise: must be F32
    USE_MATMUL,   // the weights of a mul_mat: any type with a dot product
    USE_LOOKUP,   // read by get_rows: any type that decodes to F32
};

// The weights are read in place, through pointers to their C types (floats,
// blocks that start with a ggml_half): a pointer that is not a multiple of
// the type's alignment is undefined behaviour. general.alignment 1 or 2 lets
// a file put a tensor anywhere, so each one is checked. A struct's alignment
// divides its size, so the largest power of 2 dividing the block size (at
// most 8) is always enough. (ggml does not check: x86 forgives it.)
static bool aligned_in_place(const struct mg_gguf * g, const struct mg_gguf_tensor_info * info) {
    const size_t size = mg_type_size((enum mg_type) info->type);
    size_t       need = 1;
    while (need < 8 && size % (2 * need) == 0) need *= 2;
    const size_t at = mg_gguf_data_offset(g) + (size_t) info->offset;   // the mapping starts on a page
    if (at % need == 0) return true;
    mg_set_error("%s: tensor '%s' (%s) starts at file byte %zu, not a multiple of %zu, so it cannot be read in place "
                 "(general.alignment = %zu; llama.cpp's writers use 32)", mg_gguf_path(g), info->name,
                 mg_gguf_ggml_type_name(info->type), at, need, mg_gguf_alignment(g));
    return false;
}

#if 0 //@old 09..09 load-3d
// Find a tensor by name, check it, and make a header that points into the file.
static struct mg_tensor * load_tensor(struct mg_model * m, const char * name, int64_t ne0, int64_t ne1,
                                      enum tensor_use use, bool required) {
    const char * path = mg_gguf_path(m->gguf);
    const struct mg_gguf_tensor_info * info = mg_gguf_find_tensor(m->gguf, name);
    if (info == NULL) {
        if (required) mg_set_error("%s: tensor '%s' is missing", path, name);
        return NULL;
    }
    const int64_t want_ne[2] = {ne0, ne1};
    const int     n_dims     = ne1 > 0 ? 2 : 1;
    bool shape_ok = info->n_dims <= n_dims;
    for (int i = 0; i < MG_MAX_DIMS; i++) shape_ok = shape_ok && info->ne[i] == (i < n_dims ? want_ne[i] : 1);
    if (!shape_ok) {
        mg_set_error("%s: tensor '%s' has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld, 1, 1]", path, name,
                     (long long) info->ne[0], (long long) info->ne[1], (long long) info->ne[2],
                     (long long) info->ne[3], (long long) ne0, (long long) (ne1 > 0 ? ne1 : 1));
        return NULL;
    }
    const char * type_name = mg_gguf_ggml_type_name(info->type);
    const bool   known     = mg_type_is_supported(info->type);
    bool usable = known;
    if (known && use == USE_NORM)   usable = info->type == MG_TYPE_F32;
    if (known && use == USE_MATMUL) usable = mg_get_type_traits_cpu((enum mg_type) info->type) != NULL;
    if (known && use == USE_LOOKUP) usable = mg_get_type_traits((enum mg_type) info->type)->to_float != NULL;
    if (!usable) {
        mg_set_error("%s: tensor '%s' has type %s (%d), which this engine cannot use for %s", path, name,
                     type_name ? type_name : "unknown", info->type,
                     use == USE_NORM ? "a norm (F32 only)" : use == USE_MATMUL ? "a matrix multiply" : "a lookup");
        return NULL;
    }
    if (!aligned_in_place(m->gguf, info)) return NULL;
    struct mg_tensor * t = mg_new_tensor(m->ctx, (enum mg_type) info->type, n_dims, want_ne);
    MG_ASSERT(t != NULL);
    mg_set_name(t, name);
    t->data = (void *) info->data;   // the bytes stay in the mapping
    m->n_params += mg_nelements(t);
    m->n_weight_bytes += mg_nbytes(t);
    return t;
}
#endif //@old load-3d
//@+ full moe
// Find a tensor by name, check it, and make a header that points into the
// file. Up to three dimensions: ne1 = 0 for a vector, ne2 = 0 for a matrix,
// and a 3-D tensor is a stack of ne2 matrices (qwen3moe's experts, llama.cpp's
// {n_embd, n_ff_exp, n_expert}).
static struct mg_tensor * load_tensor_3d(struct mg_model * m, const char * name, int64_t ne0, int64_t ne1, int64_t ne2,
                                         enum tensor_use use, bool required) {
    const char * path = mg_gguf_path(m->gguf);
    const struct mg_gguf_tensor_info * info = mg_gguf_find_tensor(m->gguf, name);
    if (info == NULL) {
        if (required) mg_set_error("%s: tensor '%s' is missing", path, name);
        return NULL;
    }
    const int64_t want_ne[3] = {ne0, ne1 > 0 ? ne1 : 1, ne2 > 0 ? ne2 : 1};
    const int     n_dims     = ne2 > 0 ? 3 : ne1 > 0 ? 2 : 1;
    bool shape_ok = info->n_dims <= n_dims;
    for (int i = 0; i < MG_MAX_DIMS; i++) shape_ok = shape_ok && info->ne[i] == (i < 3 ? want_ne[i] : 1);
    if (!shape_ok) {
        mg_set_error("%s: tensor '%s' has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld, %lld, 1]", path, name,
                     (long long) info->ne[0], (long long) info->ne[1], (long long) info->ne[2],
                     (long long) info->ne[3], (long long) want_ne[0], (long long) want_ne[1], (long long) want_ne[2]);
        return NULL;
    }
    const char * type_name = mg_gguf_ggml_type_name(info->type);
    const bool   known     = mg_type_is_supported(info->type);
    bool usable = known;
    if (known && use == USE_NORM)   usable = info->type == MG_TYPE_F32;
    if (known && use == USE_MATMUL) usable = mg_get_type_traits_cpu((enum mg_type) info->type) != NULL;
    if (known && use == USE_LOOKUP) usable = mg_get_type_traits((enum mg_type) info->type)->to_float != NULL;
    if (!usable) {
        mg_set_error("%s: tensor '%s' has type %s (%d), which this engine cannot use for %s", path, name,
                     type_name ? type_name : "unknown", info->type,
                     use == USE_NORM ? "a norm (F32 only)" : use == USE_MATMUL ? "a matrix multiply" : "a lookup");
        return NULL;
    }
    if (!aligned_in_place(m->gguf, info)) return NULL;
    struct mg_tensor * t = mg_new_tensor(m->ctx, (enum mg_type) info->type, n_dims, want_ne);
    MG_ASSERT(t != NULL);
    mg_set_name(t, name);
    t->data = (void *) info->data;   // the bytes stay in the mapping
    m->n_params += mg_nelements(t);   // every dimension: an expert stack counts all its experts
    m->n_weight_bytes += mg_nbytes(t);
    return t;
}

static struct mg_tensor * load_tensor(struct mg_model * m, const char * name, int64_t ne0, int64_t ne1,
                                      enum tensor_use use, bool required) {
    return load_tensor_3d(m, name, ne0, ne1, 0, use, required);
}
//@- full moe

#if 0 //@old 09..09 one-arch
// Qwen3 normalises each head of Q and K (an RMS norm over D) before RoPE.
static bool load_head_tensors(struct mg_model * m, struct mg_layer * l, int il) {
    const int64_t D = m->hp.head_dim;
    char          name[MG_MAX_NAME];
    snprintf(name, sizeof(name), "blk.%d.attn_q_norm.weight", il);
    if ((l->q_norm = load_tensor(m, name, D, 0, USE_NORM, true)) == NULL) return false;
    snprintf(name, sizeof(name), "blk.%d.attn_k_norm.weight", il);
    return (l->k_norm = load_tensor(m, name, D, 0, USE_NORM, true)) != NULL;
}
#endif //@old one-arch
//@+ full arch
// blk.IL.SUFFIX, a vector of ne0: required, or optional (left NULL when the
// file has none; a file whose copy is mis-shaped is refused all the same).
static bool load_layer_vector(struct mg_model * m, struct mg_tensor ** t, int il, const char * suffix, int64_t ne0,
                              bool required) {
    char name[MG_MAX_NAME];
    snprintf(name, sizeof(name), "blk.%d.%s", il, suffix);
    *t = load_tensor(m, name, ne0, 0, USE_NORM, required);
    return *t != NULL || (!required && mg_gguf_find_tensor(m->gguf, name) == NULL);
}

// Qwen2's q/k/v biases, optional as llama.cpp's create_tensor_qkv has them
// (TENSOR_NOT_REQUIRED); Qwen2's files have them.
static bool load_qkv_biases(struct mg_model * m, struct mg_layer * l, int il) {
    const int64_t D = m->hp.head_dim, H = m->hp.n_head, Hkv = m->hp.n_head_kv;
    return load_layer_vector(m, &l->bq, il, "attn_q.bias", D * H, false) &&
           load_layer_vector(m, &l->bk, il, "attn_k.bias", D * Hkv, false) &&
           load_layer_vector(m, &l->bv, il, "attn_v.bias", D * Hkv, false);
}

// The attention tensors the architectures differ in: Qwen3 (and qwen3moe)
// normalises each head of Q and K (an RMS norm over D) before RoPE, Qwen2
// adds a bias to each of Q, K and V, llama has neither.
static bool load_head_tensors(struct mg_model * m, struct mg_layer * l, int il) {
    const int64_t D = m->hp.head_dim;
    if (m->hp.arch == MG_ARCH_QWEN2) return load_qkv_biases(m, l, il);
    if (m->hp.arch != MG_ARCH_QWEN3 && m->hp.arch != MG_ARCH_QWEN3MOE) return true;
    return load_layer_vector(m, &l->q_norm, il, "attn_q_norm.weight", D, true) &&
           load_layer_vector(m, &l->k_norm, il, "attn_k_norm.weight", D, true);
}
//@- full arch

#if 0 //@old 09..09 dense-ffn
static bool load_layer(struct mg_model * m, int il) {
    const struct mg_model_hparams * hp = &m->hp;
    const int64_t E = hp->n_embd, F = hp->n_ff, D = hp->head_dim, H = hp->n_head, Hkv = hp->n_head_kv;
    struct mg_layer * l = &m->layers[il];
    char name[MG_MAX_NAME];
#define LOAD(field, suffix, ne0, ne1, use)                                          \
    snprintf(name, sizeof(name), "blk.%d." suffix ".weight", il);                 \
    if ((l->field = load_tensor(m, name, ne0, ne1, use, true)) == NULL) return false
    LOAD(attn_norm, "attn_norm",   E,     0,     USE_NORM);
    LOAD(wq,        "attn_q",      E,     D * H, USE_MATMUL);
    LOAD(wk,        "attn_k",      E,     D * Hkv, USE_MATMUL);
    LOAD(wv,        "attn_v",      E,     D * Hkv, USE_MATMUL);
    LOAD(wo,        "attn_output", D * H, E,     USE_MATMUL);
    if (!load_head_tensors(m, l, il)) return false;
    LOAD(ffn_norm,  "ffn_norm",    E,     0,     USE_NORM);
    LOAD(ffn_gate,  "ffn_gate",    E,     F,     USE_MATMUL);
    LOAD(ffn_up,    "ffn_up",      E,     F,     USE_MATMUL);
    LOAD(ffn_down,  "ffn_down",    F,     E,     USE_MATMUL);
#undef LOAD
    return true;
}
#endif //@old dense-ffn
//@+ full moe
// qwen3moe's feed-forward: the router and three stacks of n_expert matrices
// (llama.cpp: llama_model_qwen3moe::load_arch_tensors), where the dense
// architectures have ffn_gate, ffn_up and ffn_down.
static bool load_experts(struct mg_model * m, struct mg_layer * l, int il) {
    const struct mg_model_hparams * hp = &m->hp;
    const int64_t E = hp->n_embd, F = hp->n_ff_exp, X = hp->n_expert;
    char name[MG_MAX_NAME];
    snprintf(name, sizeof(name), "blk.%d.ffn_gate_inp.weight", il);
    if ((l->ffn_gate_inp = load_tensor(m, name, E, X, USE_MATMUL, true)) == NULL) return false;
    snprintf(name, sizeof(name), "blk.%d.ffn_gate_exps.weight", il);
    if ((l->ffn_gate_exps = load_tensor_3d(m, name, E, F, X, USE_MATMUL, true)) == NULL) return false;
    snprintf(name, sizeof(name), "blk.%d.ffn_up_exps.weight", il);
    if ((l->ffn_up_exps = load_tensor_3d(m, name, E, F, X, USE_MATMUL, true)) == NULL) return false;
    snprintf(name, sizeof(name), "blk.%d.ffn_down_exps.weight", il);
    return (l->ffn_down_exps = load_tensor_3d(m, name, F, E, X, USE_MATMUL, true)) != NULL;
}

// With qwen3moe's experts in place of the dense feed-forward.
static bool load_layer(struct mg_model * m, int il) {
    const struct mg_model_hparams * hp = &m->hp;
    const int64_t E = hp->n_embd, F = hp->n_ff, D = hp->head_dim, H = hp->n_head, Hkv = hp->n_head_kv;
    struct mg_layer * l = &m->layers[il];
    char name[MG_MAX_NAME];
#define LOAD(field, suffix, ne0, ne1, use)                                          \
    snprintf(name, sizeof(name), "blk.%d." suffix ".weight", il);                 \
    if ((l->field = load_tensor(m, name, ne0, ne1, use, true)) == NULL) return false
    LOAD(attn_norm, "attn_norm",   E,     0,     USE_NORM);
    LOAD(wq,        "attn_q",      E,     D * H, USE_MATMUL);
    LOAD(wk,        "attn_k",      E,     D * Hkv, USE_MATMUL);
    LOAD(wv,        "attn_v",      E,     D * Hkv, USE_MATMUL);
    LOAD(wo,        "attn_output", D * H, E,     USE_MATMUL);
    if (!load_head_tensors(m, l, il)) return false;
    LOAD(ffn_norm,  "ffn_norm",    E,     0,     USE_NORM);
    if (hp->n_expert > 0) return load_experts(m, l, il);
    LOAD(ffn_gate,  "ffn_gate",    E,     F,     USE_MATMUL);
    LOAD(ffn_up,    "ffn_up",      E,     F,     USE_MATMUL);
    LOAD(ffn_down,  "ffn_down",    F,     E,     USE_MATMUL);
#undef LOAD
    return true;
}
//@- full moe

//@+ full arch
// Llama 3's RoPE frequency factors: one tensor for all layers (llama.cpp
// creates it per layer as TENSOR_DUPLICATED), optional, llama only.
static bool load_rope_freqs(struct mg_model * m) {
    if (m->hp.arch != MG_ARCH_LLAMA) return true;   // any other arch's file that has one is refused as unused
    m->rope_freqs = load_tensor(m, "rope_freqs.weight", m->hp.head_dim / 2, 0, USE_NORM, false);
    return m->rope_freqs != NULL || mg_gguf_find_tensor(m->gguf, "rope_freqs.weight") == NULL;
}

// A tensor the architecture does not read (attn_q_norm in a llama file)
// means the file is not what its metadata says: refused by name and shape,
// as llama.cpp refuses a file whose tensor count differs from what it
// created (llama_model_loader::done_getting_tensors). One difference: a
// q/k/v bias in a llama, qwen3 or qwen3moe file, which llama.cpp's
// build_qkv would add, is refused here, where only layer_qwen2 adds biases.
static bool is_loaded(const struct mg_model * m, const char * name) {
    for (struct mg_tensor * t = mg_get_first_tensor(m->ctx); t != NULL; t = mg_get_next_tensor(m->ctx, t)) {
        if (strcmp(t->name, name) == 0) return true;
    }
    return false;
}

static bool check_all_tensors_used(const struct mg_model * m) {
    for (int64_t i = 0; i < mg_gguf_n_tensors(m->gguf); i++) {
        const struct mg_gguf_tensor_info * info = mg_gguf_tensor(m->gguf, i);
        if (is_loaded(m, info->name)) continue;
        mg_set_error("%s: tensor '%s' [%lld, %lld, %lld, %lld] is not part of a %s model", m->path, info->name,
                     (long long) info->ne[0], (long long) info->ne[1], (long long) info->ne[2],
                     (long long) info->ne[3], m->hp.arch_name);
        return false;
    }
    return true;
}
//@- full arch

static bool load_outer_tensors(struct mg_model * m) {   // the embeddings, the last norm, the LM head
    const int64_t E = m->hp.n_embd, V = m->hp.n_vocab;
    m->tok_embd = load_tensor(m, "token_embd.weight", E, V, USE_LOOKUP, true);
    if (m->tok_embd == NULL) return false;
    m->output_norm = load_tensor(m, "output_norm.weight", E, 0, USE_NORM, true);
    if (m->output_norm == NULL) return false;
    // Without output.weight the embedding matrix doubles as the LM head (tied
    // embeddings): logits are dot products with every token's embedding.
    m->output = load_tensor(m, "output.weight", E, V, USE_MATMUL, false);
    if (m->output == NULL) {
        if (mg_gguf_find_tensor(m->gguf, "output.weight") != NULL) return false;   // present but unusable
        if (mg_get_type_traits_cpu(m->tok_embd->type) == NULL) {
            mg_set_error("%s: the embeddings (%s) double as the output, but cannot be multiplied", m->path,
                         mg_type_name(m->tok_embd->type));
            return false;
        }
        m->output = m->tok_embd;
    }
    return true;
}

#if 0 //@old 09..09 load-tensors
static bool load_tensors(struct mg_model * m) {
    if (!load_outer_tensors(m)) return false;
    m->layers = calloc((size_t) m->hp.n_layer, sizeof(struct mg_layer));
    MG_ASSERT(m->layers != NULL);
    for (int il = 0; il < m->hp.n_layer; il++) {
        if (!load_layer(m, il)) return false;
    }
    return true;
}
#endif //@old load-tensors
//@+ full arch
// With Llama 3's frequency factors, and no tensor of the file left unread.
static bool load_tensors(struct mg_model * m) {
    if (!load_outer_tensors(m) || !load_rope_freqs(m)) return false;
    m->layers = calloc((size_t) m->hp.n_layer, sizeof(struct mg_layer));
    MG_ASSERT(m->layers != NULL);
    for (int il = 0; il < m->hp.n_layer; il++) {
        if (!load_layer(m, il)) return false;
    }
    return check_all_tensors_used(m);
}
//@- full arch

//@+ full prefault
// full/: every page of the weights mapped in now, while loading, as
// llama.cpp does (llama_mmap maps with MAP_POPULATE): otherwise the first
// decode pays a page fault per 4 KiB of weights it touches (a 244 MiB F32
// model: ~62,000 faults, a third of its prompt time on the bench machine)
// and the timing summary would blame the prompt for the kernel's work.
static void prefault(const void * data, size_t bytes) {
    const uintptr_t page  = (uintptr_t) sysconf(_SC_PAGESIZE);
    const uintptr_t start = (uintptr_t) data / page * page;
#if defined(MADV_POPULATE_READ)   // Linux 5.14: the kernel maps the range in one call
    if (madvise((void *) start, (uintptr_t) data + bytes - start, MADV_POPULATE_READ) == 0) return;
#endif
    unsigned char sum = 0;   // else touch one byte per page
    for (uintptr_t at = start; at < (uintptr_t) data + bytes; at += page) sum += *(const volatile unsigned char *) at;
    (void) sum;
}

static void prefault_weights(const struct mg_model * m) {
    for (struct mg_tensor * t = mg_get_first_tensor(m->ctx); t != NULL; t = mg_get_next_tensor(m->ctx, t)) {
        if (t->data != NULL && mg_nbytes(t) > 0) prefault(t->data, mg_nbytes(t));
    }
}
//@- full prefault

//@+ full repack
// full/: the Q4_0, Q4_K and Q2_K matrices that mul_mat reads get a copy in the tile's layout
// (repack.c), all in one buffer, like llama.cpp's CPU_REPACK buffer. The
// mapped originals stay for everything else (get_rows of a tied embedding).
static int matmul_weights(struct mg_model * m, struct mg_tensor ** out) {
    int n = 0;
    for (int il = 0; il < m->hp.n_layer; il++) {
        struct mg_layer * l = &m->layers[il];
        // qwen3moe has its experts' stacks where the others have a dense
        // feed-forward (NULL); a stack is repacked where repack.c takes 3-D
        // weights, as llama.cpp's CPU_REPACK buffer takes them for MUL_MAT_ID.
        struct mg_tensor * w[] = {l->wq,       l->wk,     l->wv,           l->wo,          l->ffn_gate,
                                  l->ffn_up,   l->ffn_down, l->ffn_gate_exps, l->ffn_up_exps, l->ffn_down_exps};
        for (size_t k = 0; k < sizeof(w) / sizeof(w[0]); k++) {
            if (w[k] != NULL) out[n++] = w[k];
        }
    }
    out[n++] = m->output;
    return n;
}

static size_t align_64(size_t bytes) {
    return (bytes + 63) / 64 * 64;
}

static void repack_weights(struct mg_model * m) {
    struct mg_tensor ** w = malloc((10 * (size_t) m->hp.n_layer + 1) * sizeof(*w));   // matmul_weights' at most
    MG_ASSERT(w != NULL);
    const int n     = matmul_weights(m, w);
    size_t    total = 0;
    for (int i = 0; i < n; i++) total += mg_repack_fits(w[i]) ? align_64(mg_nbytes(w[i])) : 0;
    if (total > 0) {
        m->repack_buf = aligned_alloc(64, total);
        MG_ASSERT(m->repack_buf != NULL);
        for (int i = 0; i < n; i++) {
            if (!mg_repack_fits(w[i])) continue;
            char * dst = (char *) m->repack_buf + m->n_repacked_bytes;
            mg_repack(dst, w[i]);
            w[i]->repacked = dst;
            m->n_repacked_bytes += align_64(mg_nbytes(w[i]));
            m->n_repacked++;
        }
    }
    free(w);
}
//@- full repack

#if 0 //@old 09..09 one-arch
// Every layer has 11 tensors: attention 7 (with Q's and K's norms), the
// feed-forward 4. None is optional.
static int tensors_per_layer(const struct mg_model_hparams * hp) {
    (void) hp;
    return 11;
}

static size_t optional_tensors(const struct mg_model_hparams * hp) {
    (void) hp;
    return 0;
}
#endif //@old one-arch
//@+ full arch
static int tensors_per_layer(const struct mg_model_hparams * hp) {
    if (hp->arch == MG_ARCH_QWEN3MOE) return 12;   // qwen3's attention 8, the router and 3 expert stacks
    return hp->arch == MG_ARCH_QWEN3 ? 11 : 9;   // llama and qwen2: no q/k norms (qwen2's biases are optional)
}

// Room for the tensors a file may have or not: qwen2's q/k/v biases, llama's rope_freqs.
static size_t optional_tensors(const struct mg_model_hparams * hp) {
    return 3 * (size_t) hp->n_layer + 1;
}
//@- full arch

struct mg_model * mg_model_load(const char * path) {
    struct mg_model * m = calloc(1, sizeof(*m));
    MG_ASSERT(m != NULL);
    snprintf(m->path, sizeof(m->path), "%s", path);
    m->gguf = mg_gguf_open(path);
    if (m->gguf == NULL || !load_hparams(m->gguf, &m->hp)) goto fail;

    const char * name;
    uint64_t     name_len;
    if (mg_gguf_find_key(m->gguf, "general.name") >= 0 && mg_gguf_get_str(m->gguf, "general.name", &name, &name_len)) {
        snprintf(m->name, sizeof(m->name), "%.*s", (int) (name_len < 127 ? name_len : 127), name);
    }
    m->vocab = mg_vocab_load(m->gguf);
    if (m->vocab == NULL) goto fail;
    m->hp.n_vocab = mg_vocab_n_tokens(m->vocab);

    // The counts of the header are checked against the file before anything
    // is sized by them: the layers' tensors, plus token_embd and output_norm.
    const int per_layer = tensors_per_layer(&m->hp);
    size_t    n_tensors = 3 + (size_t) per_layer * (size_t) m->hp.n_layer;
    if (n_tensors - 1 > (size_t) mg_gguf_n_tensors(m->gguf)) {
        // Name the first layer the file lacks (found within the file's tensor count).
        char first[MG_MAX_NAME + 16] = "a layer's tensor";
        for (int il = 0; il < m->hp.n_layer; il++) {
            char name[MG_MAX_NAME];
            snprintf(name, sizeof(name), "blk.%d.attn_norm.weight", il);
            if (mg_gguf_find_tensor(m->gguf, name) == NULL) {
                snprintf(first, sizeof(first), "tensor '%s'", name);
                break;
            }
        }
        mg_set_error("%s: %s is missing: metadata '%s.block_count' = %d needs at least %zu tensors (%d per "
                     "layer, token_embd and output_norm), but the file has %lld", path, first, m->hp.arch_name,
                     m->hp.n_layer, n_tensors - 1, per_layer, (long long) mg_gguf_n_tensors(m->gguf));
        goto fail;
    }
    n_tensors += optional_tensors(&m->hp);
    m->ctx = mg_init((struct mg_init_params) {.mem_size = n_tensors * mg_tensor_overhead(), .no_alloc = true});
    if (m->ctx == NULL || !load_tensors(m)) goto fail;
    return m;

fail:
    mg_model_free(m);
    return NULL;
}

//@+ full repack
struct mg_model_params mg_model_default_params(void) {
    return (struct mg_model_params) {.repack = true, .huge_pages = true};
}

// A stretch of the file that weights take, as move_weights_to_huge_pages gathers them.
struct byte_span {
    const char * start, * end;
};

static int by_start(const void * a, const void * b) {
    const char * x = ((const struct byte_span *) a)->start, * y = ((const struct byte_span *) b)->start;
    return x < y ? -1 : x > y;
}

// The weights the kernels read from the file, into huge pages (mg_model_params):
// every tensor but the repacked ones (read from their copy) and a token_embd
// that is only looked up (a row a token), in stretches of the file as long as
// the tensors next to each other make them.
static void move_weights_to_huge_pages(struct mg_model * m) {
    int n = 0;
    for (struct mg_tensor * t = mg_get_first_tensor(m->ctx); t != NULL; t = mg_get_next_tensor(m->ctx, t)) n++;
    struct byte_span * span = malloc((size_t) (n > 0 ? n : 1) * sizeof(*span));
    MG_ASSERT(span != NULL);
    n = 0;
    for (struct mg_tensor * t = mg_get_first_tensor(m->ctx); t != NULL; t = mg_get_next_tensor(m->ctx, t)) {
        const bool read_whole = t != m->tok_embd || m->output == m->tok_embd;
        if (t->data == NULL || t->repacked != NULL || !read_whole || mg_nbytes(t) == 0) continue;
        span[n++] = (struct byte_span) {t->data, (const char *) t->data + mg_nbytes(t)};
    }
    qsort(span, (size_t) n, sizeof(*span), by_start);
    for (int i = 0; i < n;) {
        struct byte_span run = span[i++];
        while (i < n && span[i].start <= run.end + 4096) {   // next to it (the alignment's padding between)
            if (span[i].end > run.end) run.end = span[i].end;
            i++;
        }
        const size_t bytes = (size_t) (run.end - run.start);
        if (mg_gguf_copy_to_huge_pages(m->gguf, run.start, bytes)) m->n_huge_page_bytes += bytes;
    }
    free(span);
}

// llama.cpp's llama_model_load_from_file: the file as mg_model_load reads
// it, its pages read in (prefault_weights), then what the parameters ask for.
struct mg_model * mg_model_load_from_file(const char * path, struct mg_model_params params) {
    struct mg_model * m = mg_model_load(path);
    if (m == NULL) return NULL;
    prefault_weights(m);
    if (params.repack && mg_repack_available()) repack_weights(m);
    if (params.huge_pages) move_weights_to_huge_pages(m);
    return m;
}
//@- full repack

#if 0 //@old 09..09 model-free
void mg_model_free(struct mg_model * m) {
    if (m == NULL) return;
    mg_vocab_free(m->vocab);
    mg_free(m->ctx);
    mg_gguf_close(m->gguf);
    free(m->layers);
    free(m);
}
#endif //@old model-free
//@+ full repack
void mg_model_free(struct mg_model * m) {   // with the repacked copies
    if (m == NULL) return;
    free(m->repack_buf);
    mg_vocab_free(m->vocab);
    mg_free(m->ctx);
    mg_gguf_close(m->gguf);
    free(m->layers);
    free(m);
}
//@- full repack

// ---------------------------------------------------------------------------
// The forward pass. Shapes in ggml order, innermost first, as llama.cpp writes them:
// [D, H, T] = T tokens of H heads of D; Hkv KV heads, E = n_embd, F = n_ff, n_kv cached.
// ---------------------------------------------------------------------------

#if 0 //@old 09..09 moe-graph-size
int mg_qwen3_graph_size(const struct mg_model * m) {
    return 64 * m->hp.n_layer + 256;   // about 40 nodes and views per layer, with room to spare
}
#endif //@old moe-graph-size
//@+ full moe
// A mixture-of-experts layer adds the router (matmul, softmax, top-k, the
// chosen weights and their renormalisation), the experts' mul_mat_id nodes and
// their views, and one add per chosen expert to sum them (llama.cpp's
// build_moe_ffn): about 2 * n_expert_used + 30 nodes more.
int mg_qwen3_graph_size(const struct mg_model * m) {
    const int per_layer = 64 + (m->hp.n_expert > 0 ? 2 * m->hp.n_expert_used + 30 : 0);
    return per_layer * m->hp.n_layer + 256;   // about 40 nodes and views per dense layer, with room to spare
}
//@- full moe

size_t mg_qwen3_ctx_size(const struct mg_model * m) {
    const int size = mg_qwen3_graph_size(m);
    return 2 * (size_t) size * mg_tensor_overhead() + mg_graph_overhead_custom(size) + 4096;
}

static struct mg_tensor * input(struct mg_context * ctx, enum mg_type type, int64_t ne0, int64_t ne1,
                                const char * name) {
    struct mg_tensor * t = mg_new_node(ctx, type, ne1 > 0 ? 2 : 1, (const int64_t[]) {ne0, ne1 > 0 ? ne1 : 1});
    t->flags |= MG_TENSOR_FLAG_INPUT;   // placed first by the allocator, filled before each compute
    return mg_set_name(t, name);
}

// Names a node after its step, as llama.cpp's builders do with cb(cur, "Qcur", il)
// after each one (llm_graph_context::cb): "Qcur-3" in layer 3, "result_norm" for
// il < 0, so that a dump of ours and one of llama.cpp's line up name by name.
static void cb(struct mg_tensor * t, const char * name, int il) {
    if (il >= 0) mg_format_name(t, "%s-%d", name, il);
    else         mg_set_name(t, name);
}

// RMSNorm with a learned scale: (x / rms(x)) * w; the caller names the product
// (llama.cpp: llm_graph_context::build_norm with LLM_NORM_RMS).
static struct mg_tensor * norm(struct mg_context * ctx, struct mg_tensor * x, struct mg_tensor * w, float eps,
                               int il) {
    struct mg_tensor * cur = mg_rms_norm(ctx, x, eps);
    cb(cur, "norm", il);
    return mg_mul(ctx, cur, w);
}

#if 0 //@old 09..09 attn-mha
// softmax(K^T Q / sqrt(D) + mask) V over the cache, one matmul per head, each
// node named as it is built (llama.cpp: llm_graph_context::build_attn_mha;
// chapter 06's mg_attn, unnamed). q: [D, H, T], k: [D, n_kv, Hkv], v: [n_kv, D, Hkv].
static struct mg_tensor * attn_mha(struct mg_context * ctx, struct mg_tensor * q, struct mg_tensor * k,
                                   struct mg_tensor * v, struct mg_tensor * mask, float scale, int il) {
    q = mg_permute(ctx, q, 0, 2, 1, 3);                          // [D, T, H]: heads outermost
    struct mg_tensor * kq = mg_mul_mat(ctx, k, q);               // [n_kv, T, H]: every score
    cb(kq, "kq", il);
    kq = mg_soft_max_ext(ctx, kq, mask, scale);                  // [n_kv, T, H]: each row a distribution
    cb(kq, "kq_soft_max", il);
    struct mg_tensor * kqv = mg_mul_mat(ctx, v, kq);             // [D, T, H]
    struct mg_tensor * cur = mg_cont(ctx, mg_permute(ctx, kqv, 0, 2, 1, 3));   // [D, H, T]
    cb(kqv, "kqv", il);   // after the permute: that view stays " (permuted)", as chapter 09's graph shows it
    cb(cur, "kqv_out", il);
    return mg_reshape_2d(ctx, cur, cur->ne[0] * cur->ne[1], cur->ne[2]);         // [D*H, T]
}
#endif //@old attn-mha
//@+ full streams
// softmax(K^T Q / sqrt(D) + mask) V over the cache, one matmul per head, each
// node named as it is built (llama.cpp: llm_graph_context::build_attn_mha;
// chapter 06's mg_attn, unnamed). q: [D, H, T], k: [D, n_kv, Hkv], v: [n_kv, D, Hkv];
// in full/, with streams, one more dimension each: a matrix per stream
// (q: [D, H, T_s, n_s], and the result's T = T_s x n_s).
static struct mg_tensor * attn_mha(struct mg_context * ctx, struct mg_tensor * q, struct mg_tensor * k,
                                   struct mg_tensor * v, struct mg_tensor * mask, float scale, int il) {
    q = mg_permute(ctx, q, 0, 2, 1, 3);                          // [D, T, H]: heads outermost
    struct mg_tensor * kq = mg_mul_mat(ctx, k, q);               // [n_kv, T, H]: every score
    cb(kq, "kq", il);
    kq = mg_soft_max_ext(ctx, kq, mask, scale);                  // [n_kv, T, H]: each row a distribution
    cb(kq, "kq_soft_max", il);
    struct mg_tensor * kqv = mg_mul_mat(ctx, v, kq);             // [D, T, H]
    struct mg_tensor * cur = mg_cont(ctx, mg_permute(ctx, kqv, 0, 2, 1, 3));   // [D, H, T]
    cb(kqv, "kqv", il);   // after the permute: that view stays " (permuted)", as chapter 09's graph shows it
    cb(cur, "kqv_out", il);
    return mg_reshape_2d(ctx, cur, cur->ne[0] * cur->ne[1], cur->ne[2] * cur->ne[3]);   // [D*H, T], streams in turn
}
//@- full streams

#if 0 //@old 09..09 one-arch
// RoPE as Qwen3 turns its heads: NEOX pairs (i, i + D/2).
static struct mg_tensor * rotate(struct mg_context * ctx, const struct mg_model * m, struct mg_tensor * x,
                                 struct mg_tensor * pos) {
    const struct mg_model_hparams * hp = &m->hp;
    return mg_rope(ctx, x, pos, hp->head_dim, MG_ROPE_NEOX, hp->rope_freq_base, hp->rope_freq_scale);
}
#endif //@old one-arch
//@+ full arch
// What every piece of a layer reads: the graph being built, the model, the
// cache and this batch's inputs (llama.cpp: the members of llm_graph_context,
// ctx0, gf, hparams, inp_pos, ...). last_only: the last layer keeps only the
// last token's row, whose logits are all that is wanted; out_ids: it keeps
// the rows out_ids names (both llama.cpp's inp_out_ids).
struct builder {
    struct mg_context *             ctx;
    struct mg_cgraph *              g;
    const struct mg_model *         m;
    const struct mg_model_hparams * hp;
    struct mg_kv_cache *            kv;
    const struct mg_batch_inputs *  in;
    int                             n_tokens, n_kv;
    bool                            last_only;
    struct mg_tensor *              out_ids;
};

// RoPE as the architecture turns its heads: pairs (2i, 2i+1) for llama, NEOX
// pairs (i, i + D/2) for the Qwens (archs[]); Llama 3 divides each pair's
// angle by its frequency factor (llama.cpp: ggml_rope_ext, whose factors
// src/models/llama.cpp passes and qwen2.cpp and qwen3.cpp do not).
static struct mg_tensor * rotate(const struct builder * b, struct mg_tensor * x, struct mg_tensor * factors) {
    const struct mg_model_hparams * hp = b->hp;
    return mg_rope_ext(b->ctx, x, b->in->pos, factors, hp->head_dim, (enum mg_rope_mode) hp->rope_type,
                       hp->rope_freq_base, hp->rope_freq_scale);
}

// x + bias, named again as llama.cpp's build_qkv names it (Qcur-l); x itself
// where the file has no bias (qwen2's are optional, as llama.cpp's).
static struct mg_tensor * add_bias(const struct builder * b, struct mg_tensor * x, struct mg_tensor * bias,
                                   const char * name, int il) {
    if (bias == NULL) return x;
    struct mg_tensor * cur = mg_add(b->ctx, x, bias);
    cb(cur, name, il);
    return cur;
}

// An RMSNorm with its scale, named after its step: attn_norm, ffn_norm, and
// Qwen3's Qcur_normed and Kcur_normed over every head (llama.cpp:
// build_norm with LLM_NORM_RMS, then cb).
static struct mg_tensor * named_norm(const struct builder * b, struct mg_tensor * x, struct mg_tensor * w,
                                     const char * name, int il) {
    struct mg_tensor * cur = norm(b->ctx, x, w, b->hp->rms_eps, il);
    cb(cur, name, il);
    return cur;
}

// x W, named after its step (llama.cpp: build_lora_mm, then cb).
static struct mg_tensor * project(struct mg_context * ctx, struct mg_tensor * w, struct mg_tensor * cur,
                                  const char * name, int il) {
    struct mg_tensor * t = mg_mul_mat(ctx, w, cur);
    cb(t, name, il);
    return t;
}

// Attention per stream (llama.cpp with kv_unified = false): the batch's
// tokens are n_s streams' T_s each, one after another, so Q seen as
// [D, H, T_s, n_s] meets each stream's own cells as one matrix of a 4-D
// mul_mat, K [D, n_kv, Hkv, n_s] and V [n_kv, D, Hkv, n_s], and the mask
// [n_kv, T_s, 1, n_s] is one matrix per stream too. No token scores another
// sequence's cells.
static struct mg_tensor * attn_streams(const struct builder * b, int il, struct mg_tensor * q, float scale) {
    const int          n_s   = b->in->n_stream, s0 = b->in->stream0;
    struct mg_tensor * k_all = mg_kv_cache_k_streams(b->ctx, b->kv, il, b->n_kv, s0, n_s);   // [D, n_kv, Hkv, n_s]
    struct mg_tensor * v_all = mg_kv_cache_v_streams(b->ctx, b->kv, il, b->n_kv, s0, n_s);   // [n_kv, D, Hkv, n_s]
    q = mg_reshape_4d(b->ctx, q, q->ne[0], q->ne[1], q->ne[2] / n_s, n_s);                   // [D, H, T_s, n_s]
    return attn_mha(b->ctx, q, k_all, v_all, b->in->mask, scale, il);
}

// Store this batch's K and V rows in the cache, then attend over its n_kv
// positions (llama.cpp: build_attn). With V laid out like K, one fused op
// with an online softmax (ggml_flash_attn_ext); otherwise attn_mha.
static struct mg_tensor * attn_kv(const struct builder * b, int il, struct mg_tensor * q, struct mg_tensor * k,
                                  struct mg_tensor * v, float scale) {
    struct mg_context * ctx = b->ctx;
    mg_kv_cache_store_rows(ctx, b->g, b->kv, il, k, v, b->in->k_idx, b->in->v_idx);
    if (b->kv->n_stream > 1) return attn_streams(b, il, q, scale);
    struct mg_tensor * k_all = mg_kv_cache_k(ctx, b->kv, il, b->n_kv);   // [D, n_kv, Hkv]
    struct mg_tensor * v_all = mg_kv_cache_v(ctx, b->kv, il, b->n_kv);   // [n_kv, D, Hkv], or like K for flash
    if (b->kv->v_trans) return attn_mha(ctx, q, k_all, v_all, b->in->mask, scale, il);
    q = mg_permute(ctx, q, 0, 2, 1, 3);                                                 // [D, T, H]: heads outermost
    struct mg_tensor * cur = mg_flash_attn(ctx, q, k_all, v_all, b->in->mask, scale);   // [D, H, T]
    return mg_reshape_2d(ctx, cur, cur->ne[0] * cur->ne[1], cur->ne[2]);                // [D*H, T]
}
//@- full arch

// Self-attention of one layer: Q, K, V projections, per-head norms, RoPE,
// store K and V in the cache, attend over it, project back (llama.cpp:
// build_qkv, ggml_rope_ext and build_attn, as src/models/qwen3.cpp calls them).
#if 0 //@old 09..09 one-arch
static struct mg_tensor * attention(struct mg_context * ctx, struct mg_cgraph * g, const struct mg_model * m,
                                    struct mg_kv_cache * kv, int il, struct mg_tensor * cur, int n_tokens, int n_kv,
                                    const struct mg_batch_inputs * in) {
    const struct mg_model_hparams * hp = &m->hp;
    const struct mg_layer *         l  = &m->layers[il];

    struct mg_tensor * q = mg_mul_mat(ctx, l->wq, cur);   // [D*H, T]
    cb(q, "Qcur", il);
    struct mg_tensor * k = mg_mul_mat(ctx, l->wk, cur);   // [D*Hkv, T]
    cb(k, "Kcur", il);
    struct mg_tensor * v = mg_mul_mat(ctx, l->wv, cur);   // [D*Hkv, T]
    cb(v, "Vcur", il);
    q = mg_reshape_3d(ctx, q, hp->head_dim, hp->n_head, n_tokens);      // [D, H, T]
    k = mg_reshape_3d(ctx, k, hp->head_dim, hp->n_head_kv, n_tokens);   // [D, Hkv, T]
    v = mg_reshape_3d(ctx, v, hp->head_dim, hp->n_head_kv, n_tokens);   // [D, Hkv, T]

    // Qwen3 normalises every head of Q and K before rotating them.
    q = norm(ctx, q, l->q_norm, hp->rms_eps, il);
    cb(q, "Qcur_normed", il);
    k = norm(ctx, k, l->k_norm, hp->rms_eps, il);
    cb(k, "Kcur_normed", il);
    q = rotate(ctx, m, q, in->pos);
    k = rotate(ctx, m, k, in->pos);
    cb(q, "Qcur", il);
    cb(k, "Kcur", il);
    cb(v, "Vcur", il);

    mg_kv_cache_store_rows(ctx, g, kv, il, k, v, in->k_idx, in->v_idx);
    struct mg_tensor * k_all = mg_kv_cache_k(ctx, kv, il, n_kv);   // [D, n_kv, Hkv]
    struct mg_tensor * v_all = mg_kv_cache_v(ctx, kv, il, n_kv);   // [n_kv, D, Hkv]
    cur = attn_mha(ctx, q, k_all, v_all, in->mask, 1.0f / sqrtf((float) hp->head_dim), il);   // [D*H, T]
    cb(cur, "kqv_out", il);
    cur = mg_mul_mat(ctx, l->wo, cur);                                                       // [E, T]
    cb(cur, "attn_out", il);
    return cur;
}
#endif //@old one-arch
//@+ full arch
// Q, K and V of one layer: its projections [D*H, T], [D*Hkv, T], [D*Hkv, T],
// then (split_heads) its heads [D, H, T], [D, Hkv, T], [D, Hkv, T]
// (llama.cpp: the three tensors build_qkv returns).
struct qkv {
    struct mg_tensor * q, * k, * v;
};

// The three projections, named as llama.cpp's build_qkv names them.
static struct qkv project_qkv(const struct builder * b, const struct mg_layer * l, struct mg_tensor * cur, int il) {
    struct qkv x;
    x.q = project(b->ctx, l->wq, cur, "Qcur", il);   // [D*H, T]
    x.k = project(b->ctx, l->wk, cur, "Kcur", il);   // [D*Hkv, T]
    x.v = project(b->ctx, l->wv, cur, "Vcur", il);   // [D*Hkv, T]
    return x;
}

// The projections seen as heads: views, no data moves.
static struct qkv split_heads(const struct builder * b, struct qkv x) {
    const struct mg_model_hparams * hp = b->hp;
    x.q = mg_reshape_3d(b->ctx, x.q, hp->head_dim, hp->n_head, b->n_tokens);      // [D, H, T]
    x.k = mg_reshape_3d(b->ctx, x.k, hp->head_dim, hp->n_head_kv, b->n_tokens);   // [D, Hkv, T]
    x.v = mg_reshape_3d(b->ctx, x.v, hp->head_dim, hp->n_head_kv, b->n_tokens);   // [D, Hkv, T]
    return x;
}

// The rotated heads named as they go to the cache, attention over it, and
// the output projection (llama.cpp: the cb calls before build_attn, then
// build_attn with wo).
static struct mg_tensor * attend(const struct builder * b, const struct mg_layer * l, struct qkv x, int il) {
    cb(x.q, "Qcur", il);
    cb(x.k, "Kcur", il);
    cb(x.v, "Vcur", il);
    struct mg_tensor * cur = attn_kv(b, il, x.q, x.k, x.v, 1.0f / sqrtf((float) b->hp->head_dim));   // [D*H, T]
    cb(cur, "kqv_out", il);
    cur = mg_mul_mat(b->ctx, l->wo, cur);   // [E, T]
    cb(cur, "attn_out", il);
    return cur;
}
//@- full arch

// SwiGLU feed-forward: down(silu(gate(x)) * up(x)) (llama.cpp: build_ffn with
// LLM_FFN_SILU, LLM_FFN_PAR).
#if 0 //@old 09..09 swiglu
static struct mg_tensor * feed_forward(struct mg_context * ctx, const struct mg_layer * l, struct mg_tensor * cur,
                                       int il) {
    struct mg_tensor * gate = mg_mul_mat(ctx, l->ffn_gate, cur);   // [F, T]
    cb(gate, "ffn_gate", il);
    struct mg_tensor * up   = mg_mul_mat(ctx, l->ffn_up, cur);     // [F, T]
    cb(up, "ffn_up", il);
    struct mg_tensor * act  = mg_mul(ctx, mg_silu(ctx, gate), up);
    cb(act, "ffn_swiglu", il);
    return mg_mul_mat(ctx, l->ffn_down, act);                      // [E, T]: the caller names it ffn_out
}
#endif //@old swiglu
//@+ full fused-ops
static struct mg_tensor * feed_forward(struct mg_context * ctx, const struct mg_layer * l, struct mg_tensor * cur,
                                       int il) {
    struct mg_tensor * gate = project(ctx, l->ffn_gate, cur, "ffn_gate", il);   // [F, T]
    struct mg_tensor * up   = project(ctx, l->ffn_up, cur, "ffn_up", il);       // [F, T]
    struct mg_tensor * act  = mg_swiglu(ctx, gate, up);   // one pass instead of silu, then mul (ggml_swiglu_split)
    cb(act, "ffn_swiglu", il);
    return mg_mul_mat(ctx, l->ffn_down, act);   // [E, T]: the caller names it ffn_out
}
//@- full fused-ops

//@+ full moe
#ifndef MG_MAX_EXPERTS
#define MG_MAX_EXPERTS 512   // llama.cpp's LLAMA_MAX_EXPERTS
#endif

// The router's weights of each token's chosen experts: softmax over all
// experts, the top n_used picked, their probabilities renormalised to sum to
// 1 (qwen3moe's norm_w) and scaled when hp->expert_weights_scale is set
// (never for qwen3moe: its loader fixes it at 0, as llama.cpp's does). Returns the
// weights [1, n_used, T]; *selected gets the experts' ids [n_used, T]
// (llama.cpp: the first half of build_moe_ffn, softmax gating).
static struct mg_tensor * moe_route(struct mg_context * ctx, struct mg_cgraph * g, const struct mg_model * m,
                                    const struct mg_layer * l, struct mg_tensor * cur, int il,
                                    struct mg_tensor ** selected) {
    const struct mg_model_hparams * hp = &m->hp;
    const int64_t n_tokens = cur->ne[1];
    struct mg_tensor * logits = mg_mul_mat(ctx, l->ffn_gate_inp, cur);   // [n_expert, T]
    cb(logits, "ffn_moe_logits", il);
    struct mg_tensor * probs = mg_soft_max(ctx, logits);                 // [n_expert, T]
    cb(probs, "ffn_moe_probs", il);
    *selected = mg_argsort_top_k(ctx, probs, hp->n_expert_used);        // [n_used, T]: a view of the sort
    cb((*selected)->src[0], "ffn_moe_argsort", il);
    cb(*selected, "ffn_moe_topk", il);
    probs = mg_reshape_3d(ctx, probs, 1, hp->n_expert, n_tokens);        // [1, n_expert, T]: one row per expert
    struct mg_tensor * weights = mg_get_rows(ctx, probs, *selected);    // [1, n_used, T]
    cb(weights, "ffn_moe_weights", il);
    if (hp->expert_weights_norm) {
        weights = mg_reshape_2d(ctx, weights, hp->n_expert_used, n_tokens);      // [n_used, T]
        struct mg_tensor * sum = mg_sum_rows(ctx, weights);                      // [1, T]
        cb(sum, "ffn_moe_weights_sum", il);
        sum = mg_clamp(ctx, sum, 6.103515625e-5f, INFINITY);   // F16's smallest normal: never divide by 0
        cb(sum, "ffn_moe_weights_sum_clamped", il);
        weights = mg_div(ctx, weights, sum);                                     // [n_used, T]
        cb(weights, "ffn_moe_weights_norm", il);
        weights = mg_reshape_3d(ctx, weights, 1, hp->n_expert_used, n_tokens);   // [1, n_used, T]
    }
    if (hp->expert_weights_scale != 0.0f && hp->expert_weights_scale != 1.0f) {
        weights = mg_scale(ctx, weights, hp->expert_weights_scale);
        cb(weights, "ffn_moe_weights_scaled", il);
    }
    mg_build_forward_expand(g, weights);   // ggml's order: the routing before the experts
    if (mg_trace_on(MG_TRACE_MOE)) {       // kept after compute, for mg_moe_trace to read
        (*selected)->src[0]->flags |= MG_TENSOR_FLAG_OUTPUT;
        (weights->view_src ? weights->view_src : weights)->flags |= MG_TENSOR_FLAG_OUTPUT;
    }
    return weights;
}

// The mixture-of-experts feed-forward: each token through its n_used
// experts' SwiGLU, the outputs weighted by the router and summed
// (llama.cpp: llm_graph_context::build_moe_ffn with LLM_FFN_SILU, as
// src/models/qwen3moe.cpp calls it). mul_mat_id reads only the chosen
// experts' rows: a decode step touches n_used of n_expert experts.
static struct mg_tensor * moe_feed_forward(struct mg_context * ctx, struct mg_cgraph * g, const struct mg_model * m,
                                           const struct mg_layer * l, struct mg_tensor * cur, int il) {
    const int64_t n_embd = cur->ne[0], n_tokens = cur->ne[1];
    const int     n_used = m->hp.n_expert_used;
    struct mg_tensor * selected;
    struct mg_tensor * weights = moe_route(ctx, g, m, l, cur, il, &selected);   // [1, n_used, T]
    cur = mg_reshape_3d(ctx, cur, n_embd, 1, n_tokens);                          // [E, 1, T]
    struct mg_tensor * up = mg_mul_mat_id(ctx, l->ffn_up_exps, cur, selected);   // [F, n_used, T]
    cb(up, "ffn_moe_up", il);
    struct mg_tensor * gate = mg_mul_mat_id(ctx, l->ffn_gate_exps, cur, selected);   // [F, n_used, T]
    cb(gate, "ffn_moe_gate", il);
    struct mg_tensor * act = mg_swiglu(ctx, gate, up);                           // [F, n_used, T]
    cb(act, "ffn_moe_swiglu", il);
    struct mg_tensor * experts = mg_mul_mat_id(ctx, l->ffn_down_exps, act, selected);   // [E, n_used, T]
    cb(experts, "ffn_moe_down", il);
    experts = mg_mul(ctx, experts, weights);                                     // [E, n_used, T]
    cb(experts, "ffn_moe_weighted", il);
    mg_build_forward_expand(g, experts);
    // Sum over the chosen experts: one [E, T] view per slot, added in slot order.
    struct mg_tensor * slot[MG_MAX_EXPERTS] = {NULL};   // n_used <= n_expert <= MG_MAX_EXPERTS (the loader checks)
    for (int i = 0; i < n_used; i++) {
        slot[i] = mg_view_2d(ctx, experts, n_embd, n_tokens, experts->nb[2], (size_t) i * experts->nb[1]);
        mg_build_forward_expand(g, slot[i]);
    }
    struct mg_tensor * out = slot[0];
    for (int i = 1; i < n_used; i++) {
        out = mg_add(ctx, out, slot[i]);
        mg_build_forward_expand(g, out);
    }
    if (n_used == 1) out = mg_cont(ctx, out);   // a contiguous result, as the dense path gives
    cb(out, "ffn_moe_out", il);
    return out;   // [E, T]
}

static const struct mg_tensor * find_node(const struct mg_cgraph * g, const char * name) {
    for (int i = 0; i < g->n_nodes; i++) {
        if (strcmp(mg_get_name(g->nodes[i]), name) == 0) return g->nodes[i];
    }
    return NULL;
}

static const struct mg_tensor * find_leaf(const struct mg_cgraph * g, const char * name) {
    for (int i = 0; i < g->n_leafs; i++) {
        if (strcmp(mg_get_name(g->leafs[i]), name) == 0) return g->leafs[i];
    }
    return NULL;
}

// The batch's token count: the columns of the first layer's routing.
static int64_t find_layer_tokens(const struct mg_cgraph * g) {
    const struct mg_tensor * order = find_node(g, "ffn_moe_argsort-0");
    return order != NULL ? order->ne[1] : 0;
}

// The bytes of one expert's three matrices in layer il (its slices of the 3-D tensors).
static size_t expert_bytes(const struct mg_layer * l) {
    return l->ffn_gate_exps->nb[2] + l->ffn_up_exps->nb[2] + l->ffn_down_exps->nb[2];
}

// One layer's routing, from the graph just computed: each token's experts
// with their weights, then how many tokens each expert took. The weights are
// the tensor ffn_moe_weighted multiplied by (after normalising and scaling).
// Returns how many distinct experts the batch used in layer il (0: no routing found).
static int trace_layer_routing(const struct mg_cgraph * g, const struct mg_model * m, int il, const int32_t * pos) {
    char name[64];
    snprintf(name, sizeof(name), "ffn_moe_argsort-%d", il);
    const struct mg_tensor * order = find_node(g, name);
    snprintf(name, sizeof(name), "ffn_moe_weighted-%d", il);
    const struct mg_tensor * weighted = find_node(g, name);
    if (order == NULL || weighted == NULL) return 0;
    const struct mg_tensor * w = weighted->src[1];   // [1, n_used, T]
    const int n_used = m->hp.n_expert_used, n_tokens = (int) order->ne[1];
    // The last layer routes only the tokens whose logits are wanted: the
    // last one, or those out_ids names.
    const int                first   = (int) find_layer_tokens(g) - n_tokens;
    const struct mg_tensor * out_ids = first > 0 ? find_leaf(g, "inp_out_ids") : NULL;
    int count[MG_MAX_EXPERTS] = {0};
    for (int t = 0; t < n_tokens; t++) {
        char line[1024];
        const int token = out_ids != NULL ? ((const int32_t *) out_ids->data)[t] : first + t;
        int       len   = snprintf(line, sizeof(line), "layer %d pos %d:", il, pos[token]);
        for (int i = 0; i < n_used && len < (int) sizeof(line); i++) {
            const int32_t e  = *(const int32_t *) ((const char *) order->data + (size_t) t * order->nb[1] +
                                                   (size_t) i * order->nb[0]);
            const float   we = *(const float *) ((const char *) w->data + (size_t) t * w->nb[2] + (size_t) i * w->nb[1]);
            len += snprintf(line + len, sizeof(line) - (size_t) len, " %d (%.3f)", e, (double) we);
            count[e]++;
        }
        mg_trace(MG_TRACE_MOE, "%s", line);
    }
    char line[4096];
    int  len = snprintf(line, sizeof(line), "layer %d tokens per expert:", il), n_distinct = 0;
    for (int e = 0; e < m->hp.n_expert && len < (int) sizeof(line); e++) {
        if (count[e] == 0) continue;
        len += snprintf(line + len, sizeof(line) - (size_t) len, " %d:%d", e, count[e]);
        n_distinct++;
    }
    mg_trace(MG_TRACE_MOE, "%s", line);
    return n_distinct;
}

// Per layer the routing, then what it means for memory: mul_mat_id reads
// only the chosen experts' rows, so a batch reads the experts it used, not
// all of them (llama.cpp's ggml_compute_forward_mul_mat_id skips an expert
// with no rows).
void mg_moe_trace(const struct mg_cgraph * g, const struct mg_model * m, const int32_t * pos) {
    if (!mg_trace_on(MG_TRACE_MOE) || m->hp.arch != MG_ARCH_QWEN3MOE) return;
    size_t read = 0, all = 0;
    for (int il = 0; il < m->hp.n_layer; il++) {
        const size_t one = expert_bytes(&m->layers[il]);
        read += (size_t) trace_layer_routing(g, m, il, pos) * one;
        all += (size_t) m->hp.n_expert * one;
    }
    // Beside the experts, a batch reads every other matrix whole, and of
    // token_embd only its tokens' rows (get_rows), unless it is the output too.
    const int64_t n_tokens = find_layer_tokens(g);
    const size_t embd_all  = mg_nbytes(m->tok_embd);
    const size_t embd_read = m->output == m->tok_embd ? embd_all : (size_t) n_tokens * m->tok_embd->nb[1];
    const size_t rest      = m->n_weight_bytes - all - embd_all + embd_read;
    mg_trace(MG_TRACE_MOE, "experts: this batch read %zu of their %zu bytes (%.1f%%)", read, all,
             all ? 100.0 * (double) read / (double) all : 0.0);
    mg_trace(MG_TRACE_MOE, "weights read: %zu bytes (experts %zu + the rest %zu); a dense model of the same size: %zu",
             read + rest, read, rest, all + rest);
}
//@- full moe

#if 0 //@old 09..09 v-idx
static struct mg_tensor * input_v_idx(struct mg_context * ctx, const struct mg_kv_cache * kv, int n_tokens) {
    return input(ctx, MG_TYPE_I32, (int64_t) kv->head_dim * kv->n_head_kv * n_tokens, 0, "v_idxs");   // V transposed
}
#endif //@old v-idx
//@+ full flash-attn
// None when V is laid out like K (flash attention): V rows go where K rows go, by k_idxs.
static struct mg_tensor * input_v_idx(struct mg_context * ctx, const struct mg_kv_cache * kv, int n_tokens) {
    if (!kv->v_trans) return NULL;
    return input(ctx, MG_TYPE_I32, (int64_t) kv->head_dim * kv->n_head_kv * n_tokens, 0, "v_idxs");   // [D*Hkv*T]
}
//@- full flash-attn

//@+ full streams
// The mask: one row per token over the cache, or with streams one matrix per
// stream, a row per token of that stream (llama.cpp: kq_mask {n_kv, n_tps, 1, n_stream}).
static struct mg_tensor * input_mask(struct mg_context * ctx, const struct mg_kv_cache * kv, int n_kv, int n_tokens,
                                     const struct mg_batch_inputs * in) {
    if (kv->n_stream <= 1) return input(ctx, MG_TYPE_F32, n_kv, n_tokens, "kq_mask");
    MG_ASSERT(in->n_stream >= 1 && n_tokens % in->n_stream == 0);
    struct mg_tensor * t = mg_new_node(ctx, MG_TYPE_F32, 4, (const int64_t[]) {n_kv, n_tokens / in->n_stream, 1, in->n_stream});
    t->flags |= MG_TENSOR_FLAG_INPUT;
    return mg_set_name(t, "kq_mask");
}
//@- full streams

//@+ 09 build
#if 0 //@old 09..09 build-dense
struct mg_tensor * mg_qwen3_build(struct mg_context * ctx, struct mg_cgraph * g, const struct mg_model * m,
                                  struct mg_kv_cache * kv, int n_tokens, int n_kv, bool all_logits,
                                  struct mg_batch_inputs * in) {
    const struct mg_model_hparams * hp = &m->hp;
    in->tokens = input(ctx, MG_TYPE_I32, n_tokens, 0, "inp_tokens");   // [T]
    in->pos    = input(ctx, MG_TYPE_I32, n_tokens, 0, "inp_pos");      // [T]
    in->mask   = input(ctx, MG_TYPE_F32, n_kv, n_tokens, "kq_mask");   // [n_kv, T]
    in->k_idx  = input(ctx, MG_TYPE_I32, n_tokens, 0, "k_idxs");       // [T]
    in->v_idx  = input_v_idx(ctx, kv, n_tokens);                     // [D*Hkv*T]

    struct mg_tensor * inp = mg_get_rows(ctx, m->tok_embd, in->tokens);   // [E, T]
    cb(inp, "inp_embd", -1);
    for (int il = 0; il < hp->n_layer; il++) {
        // Pre-norm attention with a residual around it ...
        struct mg_tensor * cur = norm(ctx, inp, m->layers[il].attn_norm, hp->rms_eps, il);
        cb(cur, "attn_norm", il);
        cur = attention(ctx, g, m, kv, il, cur, n_tokens, n_kv, in);
        if (il == hp->n_layer - 1 && !all_logits && n_tokens > 1) {
            // Only the last token's logits are wanted: drop the other rows
            // before the last feed-forward and the LM head (llama.cpp's inp_out_ids).
            cur = mg_view_2d(ctx, cur, hp->n_embd, 1, cur->nb[1], (size_t) (n_tokens - 1) * cur->nb[1]);   // [E, 1]
            inp = mg_view_2d(ctx, inp, hp->n_embd, 1, inp->nb[1], (size_t) (n_tokens - 1) * inp->nb[1]);   // [E, 1]
        }
        struct mg_tensor * ffn_inp = mg_add(ctx, cur, inp);
        cb(ffn_inp, "ffn_inp", il);
        // ... then a pre-norm feed-forward with a residual around it.
        cur = norm(ctx, ffn_inp, m->layers[il].ffn_norm, hp->rms_eps, il);
        cb(cur, "ffn_norm", il);
        cur = feed_forward(ctx, &m->layers[il], cur, il);
        cb(cur, "ffn_out", il);
        inp = mg_add(ctx, cur, ffn_inp);
        cb(inp, "l_out", il);
    }
    struct mg_tensor * cur = norm(ctx, inp, m->output_norm, hp->rms_eps, -1);
    cb(cur, "result_norm", -1);
    cur = mg_mul_mat(ctx, m->output, cur);   // [n_vocab, T], or [n_vocab, 1] for the last token only
    cb(cur, "result_output", -1);
    cur->flags |= MG_TENSOR_FLAG_OUTPUT;
    mg_build_forward_expand(g, cur);
    return cur;
}
#endif //@old build-dense
//@+ full arch
// The attention's residual, ffn_inp. In the last layer, when only some
// tokens' logits are wanted, only their rows go on, through the feed-forward
// and the LM head (llama.cpp: ggml_get_rows with inp_out_ids): the last row
// alone is a view, several rows (the last token of each sequence in a
// batch of prompts) are gathered. Every op after this point works row by
// row, so a kept row's logits are the bits it would get with all the rows.
static struct mg_tensor * ffn_input(const struct builder * b, struct mg_tensor * cur, struct mg_tensor * inp, int il) {
    if (b->last_only && il == b->hp->n_layer - 1) {
        const size_t last = (size_t) (b->n_tokens - 1);
        cur = mg_view_2d(b->ctx, cur, b->hp->n_embd, 1, cur->nb[1], last * cur->nb[1]);   // [E, 1]
        inp = mg_view_2d(b->ctx, inp, b->hp->n_embd, 1, inp->nb[1], last * inp->nb[1]);   // [E, 1]
    } else if (b->out_ids != NULL && il == b->hp->n_layer - 1) {
        cur = mg_get_rows(b->ctx, cur, b->out_ids);   // [E, n_out]
        inp = mg_get_rows(b->ctx, inp, b->out_ids);   // [E, n_out]
    }
    struct mg_tensor * ffn_inp = mg_add(b->ctx, cur, inp);   // [E, T]
    cb(ffn_inp, "ffn_inp", il);
    return ffn_inp;
}

// The feed-forward's residual: the layer's output.
static struct mg_tensor * layer_out(const struct builder * b, struct mg_tensor * cur, struct mg_tensor * ffn_inp,
                                    int il) {
    cur = mg_add(b->ctx, cur, ffn_inp);   // [E, T]
    cb(cur, "l_out", il);
    return cur;
}

// The second half of a dense block, after the attention: its residual, the
// pre-norm SwiGLU feed-forward and its residual (llama.cpp: the lines after
// build_attn in src/models/llama.cpp, qwen2.cpp and qwen3.cpp, build_ffn).
static struct mg_tensor * ffn_dense(const struct builder * b, const struct mg_layer * l, struct mg_tensor * attn_out,
                                    struct mg_tensor * inp, int il) {
    struct mg_tensor * ffn_inp = ffn_input(b, attn_out, inp, il);            // [E, T]
    struct mg_tensor * cur     = named_norm(b, ffn_inp, l->ffn_norm, "ffn_norm", il);   // [E, T]
    cur = feed_forward(b->ctx, l, cur, il);                                  // [E, T]
    cb(cur, "ffn_out", il);
    return layer_out(b, cur, ffn_inp, il);
}

// The same with a mixture of experts in place of the one SwiGLU block
// (llama.cpp: src/models/qwen3moe.cpp, build_moe_ffn): named ffn_moe_out.
static struct mg_tensor * ffn_moe(const struct builder * b, const struct mg_layer * l, struct mg_tensor * attn_out,
                                  struct mg_tensor * inp, int il) {
    struct mg_tensor * ffn_inp = ffn_input(b, attn_out, inp, il);            // [E, T]
    struct mg_tensor * cur     = named_norm(b, ffn_inp, l->ffn_norm, "ffn_norm", il);   // [E, T]
    cur = moe_feed_forward(b->ctx, b->g, b->m, l, cur, il);                  // [E, T]
    return layer_out(b, cur, ffn_inp, il);
}

// One function per architecture, each a layer as llama.cpp's
// src/models/<arch>.cpp builds it, with its node names. They share the
// block of chapter 09 (attn_norm, Q/K/V, RoPE, attention, then the
// feed-forward half) and differ in the few lines between, qwen3moe in the
// feed-forward half too: inp [E, T] in,
// [E, T] out, or [E, 1] after the last layer when only the last token's
// logits are wanted.

// llama (src/models/llama.cpp): that block and nothing more. RoPE turns
// pairs (2i, 2i+1) (archs[]), each angle divided by Llama 3's frequency
// factor where the file has them (rope_freqs.weight).
static struct mg_tensor * layer_llama(const struct builder * b, int il, struct mg_tensor * inp) {
    const struct mg_layer * l   = &b->m->layers[il];
    struct mg_tensor *      cur = named_norm(b, inp, l->attn_norm, "attn_norm", il);   // [E, T]
    struct qkv x = split_heads(b, project_qkv(b, l, cur, il));   // [D, H, T], [D, Hkv, T], [D, Hkv, T]
    x.q = rotate(b, x.q, b->m->rope_freqs);                      // [D, H, T]
    x.k = rotate(b, x.k, b->m->rope_freqs);                      // [D, Hkv, T]
    cur = attend(b, l, x, il);                                   // [E, T]
    return ffn_dense(b, l, cur, inp, il);
}

// qwen2 (src/models/qwen2.cpp): llama's layer with NEOX RoPE (pairs i,
// i + D/2) and no frequency factors, and a bias added to each of Q, K and V
// before they are split into heads.
static struct mg_tensor * layer_qwen2(const struct builder * b, int il, struct mg_tensor * inp) {
    const struct mg_layer * l   = &b->m->layers[il];
    struct mg_tensor *      cur = named_norm(b, inp, l->attn_norm, "attn_norm", il);   // [E, T]
    struct qkv x = project_qkv(b, l, cur, il);                   // [D*H, T], [D*Hkv, T], [D*Hkv, T]
    x.q = add_bias(b, x.q, l->bq, "Qcur", il);                   // [D*H, T]
    x.k = add_bias(b, x.k, l->bk, "Kcur", il);                   // [D*Hkv, T]
    x.v = add_bias(b, x.v, l->bv, "Vcur", il);                   // [D*Hkv, T]
    x   = split_heads(b, x);                                     // [D, H, T], [D, Hkv, T], [D, Hkv, T]
    x.q = rotate(b, x.q, NULL);                                  // [D, H, T]
    x.k = rotate(b, x.k, NULL);                                  // [D, Hkv, T]
    cur = attend(b, l, x, il);                                   // [E, T]
    return ffn_dense(b, l, cur, inp, il);
}

// Qwen3's attention, from attn_norm to attn_out: every head of Q and K
// normalised (an RMS norm over D, one scale shared by the heads) before NEOX
// RoPE. qwen3moe's is the same (src/models/qwen3moe.cpp repeats qwen3.cpp's).
static struct mg_tensor * attention_qwen3(const struct builder * b, const struct mg_layer * l,
                                          struct mg_tensor * inp, int il) {
    struct mg_tensor * cur = named_norm(b, inp, l->attn_norm, "attn_norm", il);   // [E, T]
    struct qkv x = split_heads(b, project_qkv(b, l, cur, il));   // [D, H, T], [D, Hkv, T], [D, Hkv, T]
    x.q = named_norm(b, x.q, l->q_norm, "Qcur_normed", il);      // [D, H, T]
    x.k = named_norm(b, x.k, l->k_norm, "Kcur_normed", il);      // [D, Hkv, T]
    x.q = rotate(b, x.q, NULL);                                  // [D, H, T]
    x.k = rotate(b, x.k, NULL);                                  // [D, Hkv, T]
    return attend(b, l, x, il);                                  // [E, T]
}

// qwen3 (src/models/qwen3.cpp): that attention, then the dense feed-forward.
static struct mg_tensor * layer_qwen3(const struct builder * b, int il, struct mg_tensor * inp) {
    const struct mg_layer * l = &b->m->layers[il];
    return ffn_dense(b, l, attention_qwen3(b, l, inp, il), inp, il);
}

// qwen3moe (src/models/qwen3moe.cpp): the same attention, then a mixture of experts.
static struct mg_tensor * layer_qwen3moe(const struct builder * b, int il, struct mg_tensor * inp) {
    const struct mg_layer * l = &b->m->layers[il];
    return ffn_moe(b, l, attention_qwen3(b, l, inp, il), inp, il);
}

// Each architecture's layer, by general.architecture (llama.cpp:
// llama_model::build_graph calls the arch's build_arch_graph).
typedef struct mg_tensor * (*layer_fn)(const struct builder * b, int il, struct mg_tensor * inp);
static const layer_fn layer_of_arch[] = {
    [MG_ARCH_LLAMA]    = layer_llama,
    [MG_ARCH_QWEN2]    = layer_qwen2,
    [MG_ARCH_QWEN3]    = layer_qwen3,
    [MG_ARCH_QWEN3MOE] = layer_qwen3moe,
};

// full/'s builder: chapter 09's inputs, embeddings and output, and between
// them the architecture's layer n_layer times.
struct mg_tensor * mg_qwen3_build(struct mg_context * ctx, struct mg_cgraph * g, const struct mg_model * m,
                                  struct mg_kv_cache * kv, int n_tokens, int n_kv, bool all_logits,
                                  struct mg_batch_inputs * in) {
    const struct mg_model_hparams * hp = &m->hp;
    MG_ASSERT((size_t) hp->arch < sizeof(layer_of_arch) / sizeof(layer_of_arch[0]) && layer_of_arch[hp->arch]);
    in->tokens = input(ctx, MG_TYPE_I32, n_tokens, 0, "inp_tokens");   // [T]
    in->pos    = input(ctx, MG_TYPE_I32, n_tokens, 0, "inp_pos");      // [T]
    in->mask   = input_mask(ctx, kv, n_kv, n_tokens, in);            // [n_kv, T], or [n_kv, T_s, 1, n_s]
    in->k_idx  = input(ctx, MG_TYPE_I32, n_tokens, 0, "k_idxs");       // [T]
    in->v_idx  = input_v_idx(ctx, kv, n_tokens);                     // [D*Hkv*T]
    const bool some = !all_logits && in->n_out > 0 && in->n_out < n_tokens;   // rows picked by out_ids
    in->out_ids     = some ? input(ctx, MG_TYPE_I32, in->n_out, 0, "inp_out_ids") : NULL;   // [n_out]
    const bool last_only = !all_logits && !some && n_tokens > 1;
    const struct builder b = {ctx, g, m, hp, kv, in, n_tokens, n_kv, last_only, in->out_ids};

    struct mg_tensor * inp = mg_get_rows(ctx, m->tok_embd, in->tokens);   // [E, T]
    cb(inp, "inp_embd", -1);
    for (int il = 0; il < hp->n_layer; il++) inp = layer_of_arch[hp->arch](&b, il, inp);   // [E, T], [E, 1] last
    struct mg_tensor * cur = norm(ctx, inp, m->output_norm, hp->rms_eps, -1);
    cb(cur, "result_norm", -1);
    cur = mg_mul_mat(ctx, m->output, cur);   // [n_vocab, T], [n_vocab, n_out], or [n_vocab, 1] for the last token
    cb(cur, "result_output", -1);
    cur->flags |= MG_TENSOR_FLAG_OUTPUT;
    mg_build_forward_expand(g, cur);
    return cur;
}
//@- full arch
//@- 09 build
