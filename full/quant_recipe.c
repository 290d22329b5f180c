//@file full
// quant_recipe.c - which type each tensor of a model gets when it is
// quantized (quant_recipe.h): llama-quantize's recipe, rule for rule
// (llama.cpp src/llama-quant.cpp: llama_ftype_get_default_type,
// tensor_allows_quantization, llama_tensor_get_type_impl, tensor_type_fallback).
#define _POSIX_C_SOURCE 200809L   // strcasecmp
#include "quant_recipe.h"
#include "mg.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

// ---------------------------------------------------------------------------
// TYPE: a file type (llama.cpp include/llama.h, enum llama_ftype) and the
// tensor type most matrices get (llama-quant.cpp, llama_ftype_get_default_type)
// ---------------------------------------------------------------------------



// The names of llama-quantize's QUANT_OPTIONS (tools/quantize/quantize.cpp)
// that are not plain tensor type names. A tensor type name (f16, q8_0, ...)
// goes through type_of_name and ftype_of_type; Q2_K is here because in
// llama-quantize it is a mix, not "Q2_K everywhere".
static const struct mg_quant_option mixes[] = {
    {"Q2_K",   MG_FTYPE_Q2_K,   MG_TYPE_Q2_K},
    {"Q3_K_S", MG_FTYPE_Q3_K_S, MG_TYPE_Q3_K},
    {"Q3_K_M", MG_FTYPE_Q3_K_M, MG_TYPE_Q3_K},
    {"Q3_K_L", MG_FTYPE_Q3_K_L, MG_TYPE_Q3_K},
    {"Q3_K",   MG_FTYPE_Q3_K_M, MG_TYPE_Q3_K},   // alias
    {"Q4_K_S", MG_FTYPE_Q4_K_S, MG_TYPE_Q4_K},
    {"Q4_K_M", MG_FTYPE_Q4_K_M, MG_TYPE_Q4_K},
    {"Q4_K",   MG_FTYPE_Q4_K_M, MG_TYPE_Q4_K},   // alias
    {"Q5_K_S", MG_FTYPE_Q5_K_S, MG_TYPE_Q5_K},
    {"Q5_K_M", MG_FTYPE_Q5_K_M, MG_TYPE_Q5_K},
    {"Q5_K",   MG_FTYPE_Q5_K_M, MG_TYPE_Q5_K},   // alias
};

// The file type whose matrices are all of one tensor type; -1 for a type that
// is no weight type (q8_1, q8_K, i32: activations and indices only).
static int ftype_of_type(enum mg_type type) {
    switch (type) {
        case MG_TYPE_F32:    return MG_FTYPE_ALL_F32;
        case MG_TYPE_F16:    return MG_FTYPE_F16;
        case MG_TYPE_BF16:   return MG_FTYPE_BF16;
        case MG_TYPE_Q4_0:   return MG_FTYPE_Q4_0;
        case MG_TYPE_Q4_1:   return MG_FTYPE_Q4_1;
        case MG_TYPE_Q5_0:   return MG_FTYPE_Q5_0;
        case MG_TYPE_Q5_1:   return MG_FTYPE_Q5_1;
        case MG_TYPE_Q8_0:   return MG_FTYPE_Q8_0;
        case MG_TYPE_Q6_K:   return MG_FTYPE_Q6_K;
        case MG_TYPE_IQ4_NL: return MG_FTYPE_IQ4_NL;
        default:             return -1;
    }
}

// A tensor type by its name, any case ("q4_0", "Q4_0").
static bool type_of_name(const char * name, enum mg_type * out) {
    for (int id = 0; id < MG_TYPE_COUNT; id++) {
        if (mg_type_is_supported(id) && strcasecmp(name, mg_type_name((enum mg_type) id)) == 0) {
            *out = (enum mg_type) id;
            return true;
        }
    }
    return false;
}

bool mg_quant_option_parse(const char * name, struct mg_quant_option * out) {
    for (size_t i = 0; i < sizeof(mixes) / sizeof(mixes[0]); i++) {
        if (strcasecmp(name, mixes[i].name) == 0) {
            *out = mixes[i];
            return true;
        }
    }
    enum mg_type type;
    if (!type_of_name(name, &type) || ftype_of_type(type) < 0) return false;
    *out = (struct mg_quant_option) {.ftype = (enum mg_ftype) ftype_of_type(type), .type = type};
    for (size_t i = 0; i + 1 < sizeof(out->name) && mg_type_name(type)[i]; i++) {
        out->name[i] = (char) toupper((unsigned char) mg_type_name(type)[i]);   // "q4_0" -> "Q4_0"
    }
    return true;
}

bool mg_quant_option_of_ftype(enum mg_ftype ftype, struct mg_quant_option * out) {
    for (size_t i = 0; i < sizeof(mixes) / sizeof(mixes[0]); i++) {
        if (mixes[i].ftype == ftype) {   // the _M name comes before its alias
            *out = mixes[i];
            return true;
        }
    }
    for (int id = 0; id < MG_TYPE_COUNT; id++) {
        if (mg_type_is_supported(id) && ftype_of_type((enum mg_type) id) == (int) ftype) {
            return mg_quant_option_parse(mg_type_name((enum mg_type) id), out);
        }
    }
    return false;
}

// ---------------------------------------------------------------------------
// Which tensors are quantized (llama-quant.cpp, tensor_allows_quantization)
// ---------------------------------------------------------------------------

// ggml_n_dims: the number of dimensions once trailing 1s are dropped, so a
// {256, 1} "matrix" counts as the vector it is.
int mg_quant_n_dims(const struct mg_gguf_tensor_info * t) {
    for (int d = MG_MAX_DIMS - 1; d > 0; d--) {
        if (t->ne[d] > 1) return d + 1;
    }
    return 1;
}

static bool ends_with(const char * s, const char * suffix) {
    const size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

// Only matrices named *weight are quantized; of llama-quantize's exceptions,
// these are the ones a text model can have.
bool mg_quant_allows(const struct mg_gguf_tensor_info * t) {
    static const char * const keep[] = {
        "_norm.weight",          // norms, even when stored 2-D
        "ffn_gate_inp.weight",   // expert routers
        "position_embd",         // learned positions
        "token_types.weight",
        "attn_rel_b.weight",     // T5 relative position bias
        "ssm_conv1d",            // Mamba's small convolutions
    };
    if (mg_quant_n_dims(t) < 2 || !ends_with(t->name, "weight")) return false;
    for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++) {
        if (strstr(t->name, keep[i]) != NULL) return false;
    }
    return true;
}

// ---------------------------------------------------------------------------
// The mixes (llama-quant.cpp, llama_tensor_get_type_impl), without an
// importance matrix, for dense models and mixtures of experts (qwen3moe).
// Rules for other ftypes (IQ2/IQ3, MXFP4_MOE, ...), Falcon and LLaMA-70B are
// left out: none of them can apply to a TYPE above and a Qwen3 model.
// ggml-org/llama.cpp master and the fixtures' llama.cpp (unslothai fork,
// d32676d7) have the same rules here.
// ---------------------------------------------------------------------------

// llama-quant.cpp, tensor_category / tensor_get_category (the categories some
// rule of the ftypes above looks at).
enum category {
    CAT_OTHER,
    CAT_TOKEN_EMBD,
    CAT_OUTPUT,
    CAT_ATTN_V,        // also the fused attn_qkv and attn_kv_b: category_is_attn_v
    CAT_ATTN_K,
    CAT_ATTN_OUTPUT,
    CAT_FFN_DOWN,      // also the experts' ffn_down_exps
};

static enum category category_of(const char * name) {
    if (strcmp(name, "output.weight") == 0) return CAT_OUTPUT;
    if (strcmp(name, "token_embd.weight") == 0 || strcmp(name, "per_layer_token_embd.weight") == 0) {
        return CAT_TOKEN_EMBD;
    }
    if (strstr(name, "attn_qkv.weight") || strstr(name, "attn_kv_b.weight") || strstr(name, "attn_v.weight")) {
        return CAT_ATTN_V;
    }
    if (strstr(name, "attn_k.weight")) return CAT_ATTN_K;
    if (strstr(name, "attn_output.weight")) return CAT_ATTN_OUTPUT;
    if (strstr(name, "ffn_down")) return CAT_FFN_DOWN;
    return CAT_OTHER;
}


// llama-quant.cpp, use_more_bits: the first and last eighth of the layers and
// every third one in between get more bits (for 8 layers: 0, 3, 6, 7).
static bool use_more_bits(int i_layer, int n_layer) {
    return i_layer < n_layer / 8 || i_layer >= 7 * n_layer / 8 || (i_layer - n_layer / 8) % 3 == 2;
}

// The output matrix decides next-token probabilities directly, so every mix
// keeps it at Q6_K (or Q8_0 when already asked for, or when its rows do not
// split into TYPE's blocks).
static enum mg_type output_rule(enum mg_type type, int64_t ne0) {
    if (ne0 % mg_blck_size(type) != 0) return MG_TYPE_Q8_0;
    return type == MG_TYPE_Q8_0 ? MG_TYPE_Q8_0 : MG_TYPE_Q6_K;
}

// attn_v is small (n_head_kv heads, not n_head) and its rounding goes straight
// into every attention output, so the mixes spend bits there; a model of 8
// experts keeps attn_v and attn_k in Q8_0 whatever the mix ("for the
// 8-expert model, bumping this to Q8_0 trades just ~128MB", llama-quant.cpp:
// the attention is a small part of such a model).
static enum mg_type attn_v_rule(const struct mg_quant_mix * s, enum mg_type type, int i) {
    if (s->n_expert == 8) return MG_TYPE_Q8_0;
    switch (s->ftype) {
        case MG_FTYPE_Q2_K:   return s->n_gqa >= 4 ? MG_TYPE_Q4_K : MG_TYPE_Q3_K;
        case MG_FTYPE_Q3_K_M: return i < 2 ? MG_TYPE_Q5_K : MG_TYPE_Q4_K;
        case MG_FTYPE_Q3_K_L: return MG_TYPE_Q5_K;
        case MG_FTYPE_IQ4_NL: return s->n_gqa >= 4 ? MG_TYPE_Q5_K : type;
        case MG_FTYPE_Q4_K_M:
        case MG_FTYPE_Q5_K_M: return use_more_bits(i, s->n_attn_v) ? MG_TYPE_Q6_K : type;
        case MG_FTYPE_Q4_K_S: return i < 4 ? MG_TYPE_Q5_K : type;
        default:           return type;
    }
}

// ffn_down sums n_ff products, so its rounding errors add up: more bits in the
// layers use_more_bits picks (or the first ones).
static enum mg_type ffn_down_rule(const struct mg_quant_mix * s, enum mg_type type, int i) {
    const int n = s->n_layer;
    switch (s->ftype) {
        case MG_FTYPE_Q2_K:   return MG_TYPE_Q3_K;
        case MG_FTYPE_Q3_K_M: return i < n / 16 ? MG_TYPE_Q5_K : MG_TYPE_Q4_K;
        case MG_FTYPE_Q3_K_L: return MG_TYPE_Q5_K;
        case MG_FTYPE_Q4_K_M:
        case MG_FTYPE_Q5_K_M: return use_more_bits(i, n) ? MG_TYPE_Q6_K : type;
        case MG_FTYPE_IQ4_NL:
        case MG_FTYPE_Q4_K_S: return i < n / 8 ? MG_TYPE_Q5_K : type;
        default:           return type;
    }
}

static enum mg_type attn_k_rule(const struct mg_quant_mix * s, enum mg_type type) {
    return s->n_expert == 8 ? MG_TYPE_Q8_0 : type;
}

// With 8 experts, attn_output gets Q5_K in the low mixes (the ftypes
// llama-quant.cpp lists there; Q3_K_L is not among them and keeps Q3_K).
static enum mg_type attn_output_rule_8_experts(const struct mg_quant_mix * s, enum mg_type type) {
    switch (s->ftype) {
        case MG_FTYPE_Q2_K:
        case MG_FTYPE_Q3_K_S:
        case MG_FTYPE_Q3_K_M:
        case MG_FTYPE_IQ4_NL:
        case MG_FTYPE_Q4_K_S:
        case MG_FTYPE_Q4_K_M: return MG_TYPE_Q5_K;
        default:              return type;
    }
}

static enum mg_type attn_output_rule(const struct mg_quant_mix * s, enum mg_type type) {
    if (s->n_expert == 8) return attn_output_rule_8_experts(s, type);
    switch (s->ftype) {
        case MG_FTYPE_Q2_K:   return MG_TYPE_Q3_K;
        case MG_FTYPE_Q3_K_M: return MG_TYPE_Q4_K;
        case MG_FTYPE_Q3_K_L: return MG_TYPE_Q5_K;
        default:           return type;
    }
}

static int layer_of(const char * name);

// The layer of the i-th ffn_down: i itself in a dense model (one per layer,
// in writing order); with experts, the number in its name, as llama-quant.cpp's
// layer_info reads it ("experts in the FFN of Mixtral-8x7B are not
// consecutive" in some files, so counting does not work there).
static int ffn_down_layer(const struct mg_quant_mix * s, const char * name, int i) {
    return s->n_expert > 1 ? layer_of(name) : i;
}

// One tensor through the rules; tensors must come in writing order (the counters).
static enum mg_type mix_type(struct mg_quant_mix * s, const struct mg_gguf_tensor_info * t, enum mg_type type) {
    const enum category cat = category_of(t->name);
    if (cat == CAT_OUTPUT || (cat == CAT_TOKEN_EMBD && s->tied_embeddings)) return output_rule(type, t->ne[0]);
    switch (cat) {
        case CAT_ATTN_V:      return attn_v_rule(s, type, s->i_attn_v++);
        case CAT_ATTN_K:      return attn_k_rule(s, type);
        case CAT_FFN_DOWN:    return ffn_down_rule(s, type, ffn_down_layer(s, t->name, s->i_ffn_down++));
        case CAT_ATTN_OUTPUT: return attn_output_rule(s, type);
        default:              return type;
    }
}

// llama-quant.cpp, tensor_type_fallback: rows that do not split into 256-element
// super-blocks take the 32-element type of about the same size; rows that do
// not split into 32 either are stored as F16. MG_TYPE_COUNT when llama-quantize
// has no fallback (it stops with an error).
enum mg_type mg_quant_shape_fallback(enum mg_type type, int64_t ne0) {
    if (ne0 % mg_blck_size(type) == 0) return type;
    enum mg_type fb;
    switch (type) {
        case MG_TYPE_Q2_K:
        case MG_TYPE_Q3_K: fb = MG_TYPE_Q4_0; break;
        case MG_TYPE_Q4_K: fb = MG_TYPE_Q5_0; break;
        case MG_TYPE_Q5_K: fb = MG_TYPE_Q5_1; break;
        case MG_TYPE_Q6_K: fb = MG_TYPE_Q8_0; break;
        default:           return MG_TYPE_COUNT;
    }
    return ne0 % mg_blck_size(fb) == 0 ? fb : MG_TYPE_F16;
}


// llama_model_loader's weight_name_comparer: by layer number ("blk.N."; other
// tensors count as layer -1, so they come first), then by name.
static int layer_of(const char * name) {
    int layer = -1;
    if (sscanf(name, "blk.%d.", &layer) != 1) layer = -1;
    return layer;
}

int mg_quant_tensor_order(const char * a, const char * b) {
    const int la = layer_of(a), lb = layer_of(b);
    if (la != lb) return la < lb ? -1 : 1;
    return strcmp(a, b);
}

// n_layer, n_gqa and n_expert from the hyper-parameters, as llama_model's hparams has them.
static void read_hparams(const struct mg_gguf * g, struct mg_quant_mix * s) {
    const char * arch = "";
    uint64_t     arch_len = 0;
    char         key[128];
    uint32_t     v = 0, n_head = 0, n_head_kv = 0;
    mg_gguf_get_str(g, "general.architecture", &arch, &arch_len);
    const int a = (int) (arch_len < 64 ? arch_len : 64);
    snprintf(key, sizeof(key), "%.*s.block_count", a, arch);
    if (mg_gguf_get_u32(g, key, &v)) s->n_layer = (int) v;
    snprintf(key, sizeof(key), "%.*s.attention.head_count", a, arch);
    mg_gguf_get_u32(g, key, &n_head);
    snprintf(key, sizeof(key), "%.*s.attention.head_count_kv", a, arch);
    if (!mg_gguf_get_u32(g, key, &n_head_kv)) n_head_kv = n_head;   // llama.cpp's default
    s->n_gqa = n_head_kv > 0 ? (int) (n_head / n_head_kv) : 1;
    snprintf(key, sizeof(key), "%.*s.expert_count", a, arch);   // read for every architecture, as llama.cpp does
    if (mg_gguf_find_key(g, key) >= 0 && mg_gguf_get_u32(g, key, &v)) s->n_expert = (int) v;
    mg_clear_error();
}

void mg_quant_mix_init(struct mg_quant_mix * s, const struct mg_gguf * g, const struct mg_quant_option * o, bool pure) {
    *s = (struct mg_quant_mix) {.ftype = o->ftype, .type = o->type, .pure = pure, .tied_embeddings = true, .n_gqa = 1};
    read_hparams(g, s);
    int n_blk = 0;   // layers named in tensors, for a file without block_count
    for (int64_t i = 0; i < mg_gguf_n_tensors(g); i++) {
        const char *        name = mg_gguf_tensor(g, i)->name;
        const enum category cat  = category_of(name);
        if (cat == CAT_OUTPUT) s->tied_embeddings = false;
        if (cat == CAT_ATTN_V) s->n_attn_v++;
        if (layer_of(name) >= n_blk) n_blk = layer_of(name) + 1;
    }
    if (s->n_layer <= 0) s->n_layer = n_blk;
}

enum mg_type mg_quant_tensor_type(struct mg_quant_mix * s, const struct mg_gguf_tensor_info * t, enum mg_type * wanted) {
    *wanted = (enum mg_type) t->type;
    if (!mg_quant_allows(t)) return *wanted;
    const bool quantized = mg_get_type_traits(s->type)->is_quantized;
    *wanted = quantized && !s->pure ? mix_type(s, t, s->type) : s->type;
    const enum mg_type type = quantized ? mg_quant_shape_fallback(*wanted, t->ne[0]) : *wanted;
    if (type == MG_TYPE_COUNT) {
        mg_set_error("%s: rows of %lld elements do not split into %s blocks of %lld, and llama-quantize has no "
                     "fallback for %s", t->name, (long long) t->ne[0], mg_type_name(*wanted),
                     (long long) mg_blck_size(*wanted), mg_type_name(*wanted));
    }
    return type;
}
