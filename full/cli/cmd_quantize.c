//@file full
// cmd_quantize.c - mg quantize: a GGUF model rewritten with quantized weights.
//
//     $ mg quantize tiny-f32.gguf tiny-q4_k_m.gguf Q4_K_M
//     [  1/ 24] output_norm.weight        f32             [256]              0.00 MiB (kept)
//     [  2/ 24] token_embd.weight         f32 -> q6_K     [256, 6400]        6.25 MiB ->    1.28 MiB
//     [  3/ 24] blk.0.attn_k.weight       f32 -> q4_K     [256, 128]         0.12 MiB ->    0.02 MiB
//     ...
//     mg quantize: wrote 24 tensors, 12.26 MiB -> 2.19 MiB (32.00 -> 5.71 bits per weight)
//
// It is llama-quantize (llama.cpp tools/quantize, src/llama-quant.cpp) redone:
// the same TYPE names with the same meaning, the same per-tensor choices, the
// same reference quantizers (quants*.c, bit-exact with ggml's), the same tensor
// order and metadata. So `mg quantize` and `llama-quantize` given the same
// input and TYPE write the same bytes (tests/full/test_quantize.c checks this
// against the fixtures llama-quantize made).
//
// A TYPE names a *file type* (llama.cpp's enum llama_ftype), not one tensor
// type. Q4_K_M, for instance, means "mostly Q4_K": every matrix is Q4_K except
// where llama_tensor_get_type_impl knows better (the tied embedding in Q6_K,
// attn_v and ffn_down of some layers in Q6_K). Even the single-type names carry
// llama-quantize's rules: Q4_0 puts a tied token_embd in Q6_K, and Q3_K, Q4_K,
// Q5_K are llama-quantize's aliases of the _M mixes. --pure turns the rules
// off: every matrix gets TYPE's own tensor type (llama-quantize --pure).
//
// A matrix whose rows do not split into that type's blocks (MiniMind's ffn_down
// has rows of 2432 = 9.5 x 256) falls back to a 32-element type, as
// llama-quantize's tensor_type_fallback does. Vectors (norms) are copied as
// they are.
#define _POSIX_C_SOURCE 200809L   // sysconf
#include "cli.h"
#include "gguf_writer.h"
#include "memmap.h"

#include <ctype.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

static const char * usage =
    "usage: mg quantize [options] IN.gguf OUT.gguf TYPE\n"
    "\n"
    "Writes IN's weights in TYPE, the way llama-quantize does (same names, same per-tensor choices,\n"
    "same bytes). IN's matrices must be F32, F16 or BF16 (quantized ones need --allow-requantize).\n"
    "\n"
    "TYPE (any case; the number is general.file_type, llama.cpp's llama_ftype):\n"
    "   0  F32      1  F16     32  BF16\n"
    "   2  Q4_0     3  Q4_1     8  Q5_0     9  Q5_1     7  Q8_0    25  IQ4_NL    18  Q6_K\n"
    "  10  Q2_K    11  Q3_K_S  12  Q3_K_M  13  Q3_K_L  14  Q4_K_S  15  Q4_K_M   16  Q5_K_S  17  Q5_K_M\n"
    "      Q3_K, Q4_K, Q5_K are aliases of Q3_K_M, Q4_K_M, Q5_K_M (as in llama-quantize)\n"
    "Quantized TYPEs follow llama-quantize's rules: a tied token_embd (or output.weight) gets Q6_K,\n"
    "the _M mixes give attn_v and ffn_down of some layers more bits, and so on. --pure gives every\n"
    "matrix TYPE's own tensor type instead. Vectors (norms) are copied unchanged.";

// ---------------------------------------------------------------------------
// TYPE: a file type (llama.cpp include/llama.h, enum llama_ftype) and the
// tensor type most matrices get (llama-quant.cpp, llama_ftype_get_default_type)
// ---------------------------------------------------------------------------

enum ftype {
    FTYPE_ALL_F32 = 0,
    FTYPE_F16     = 1,
    FTYPE_Q4_0    = 2,
    FTYPE_Q4_1    = 3,
    FTYPE_Q8_0    = 7,
    FTYPE_Q5_0    = 8,
    FTYPE_Q5_1    = 9,
    FTYPE_Q2_K    = 10,
    FTYPE_Q3_K_S  = 11,
    FTYPE_Q3_K_M  = 12,
    FTYPE_Q3_K_L  = 13,
    FTYPE_Q4_K_S  = 14,
    FTYPE_Q4_K_M  = 15,
    FTYPE_Q5_K_S  = 16,
    FTYPE_Q5_K_M  = 17,
    FTYPE_Q6_K    = 18,
    FTYPE_IQ4_NL  = 25,
    FTYPE_BF16    = 32,
};

struct quant_option {
    char         name[8];   // as llama-quantize spells it
    enum ftype   ftype;
    enum mg_type type;   // the tensor type of "most" matrices
};

// The names of llama-quantize's QUANT_OPTIONS (tools/quantize/quantize.cpp)
// that are not plain tensor type names. A tensor type name (f16, q8_0, ...)
// goes through cli_parse_type and ftype_of_type; Q2_K is here because in
// llama-quantize it is a mix, not "Q2_K everywhere".
static const struct quant_option mixes[] = {
    {"Q2_K",   FTYPE_Q2_K,   MG_TYPE_Q2_K},
    {"Q3_K_S", FTYPE_Q3_K_S, MG_TYPE_Q3_K},
    {"Q3_K_M", FTYPE_Q3_K_M, MG_TYPE_Q3_K},
    {"Q3_K_L", FTYPE_Q3_K_L, MG_TYPE_Q3_K},
    {"Q3_K",   FTYPE_Q3_K_M, MG_TYPE_Q3_K},   // alias
    {"Q4_K_S", FTYPE_Q4_K_S, MG_TYPE_Q4_K},
    {"Q4_K_M", FTYPE_Q4_K_M, MG_TYPE_Q4_K},
    {"Q4_K",   FTYPE_Q4_K_M, MG_TYPE_Q4_K},   // alias
    {"Q5_K_S", FTYPE_Q5_K_S, MG_TYPE_Q5_K},
    {"Q5_K_M", FTYPE_Q5_K_M, MG_TYPE_Q5_K},
    {"Q5_K",   FTYPE_Q5_K_M, MG_TYPE_Q5_K},   // alias
};

// The file type whose matrices are all of one tensor type; -1 for a type that
// is no weight type (q8_1, q8_K, i32: activations and indices only).
static int ftype_of_type(enum mg_type type) {
    switch (type) {
        case MG_TYPE_F32:    return FTYPE_ALL_F32;
        case MG_TYPE_F16:    return FTYPE_F16;
        case MG_TYPE_BF16:   return FTYPE_BF16;
        case MG_TYPE_Q4_0:   return FTYPE_Q4_0;
        case MG_TYPE_Q4_1:   return FTYPE_Q4_1;
        case MG_TYPE_Q5_0:   return FTYPE_Q5_0;
        case MG_TYPE_Q5_1:   return FTYPE_Q5_1;
        case MG_TYPE_Q8_0:   return FTYPE_Q8_0;
        case MG_TYPE_Q6_K:   return FTYPE_Q6_K;
        case MG_TYPE_IQ4_NL: return FTYPE_IQ4_NL;
        default:             return -1;
    }
}

static bool parse_quant_option(const char * name, struct quant_option * out) {
    for (size_t i = 0; i < sizeof(mixes) / sizeof(mixes[0]); i++) {
        if (strcasecmp(name, mixes[i].name) == 0) {
            *out = mixes[i];
            return true;
        }
    }
    enum mg_type type;
    if (!cli_parse_type(name, &type) || ftype_of_type(type) < 0) return false;
    *out = (struct quant_option) {.ftype = (enum ftype) ftype_of_type(type), .type = type};
    for (size_t i = 0; i + 1 < sizeof(out->name) && mg_type_name(type)[i]; i++) {
        out->name[i] = (char) toupper((unsigned char) mg_type_name(type)[i]);   // "q4_0" -> "Q4_0"
    }
    return true;
}

// ---------------------------------------------------------------------------
// Which tensors are quantized (llama-quant.cpp, tensor_allows_quantization)
// ---------------------------------------------------------------------------

// ggml_n_dims: the number of dimensions once trailing 1s are dropped, so a
// {256, 1} "matrix" counts as the vector it is.
static int n_dims_of(const struct mg_gguf_tensor_info * t) {
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
static bool allows_quantization(const struct mg_gguf_tensor_info * t) {
    static const char * const keep[] = {
        "_norm.weight",          // norms, even when stored 2-D
        "ffn_gate_inp.weight",   // expert routers
        "position_embd",         // learned positions
        "token_types.weight",
        "attn_rel_b.weight",     // T5 relative position bias
        "ssm_conv1d",            // Mamba's small convolutions
    };
    if (n_dims_of(t) < 2 || !ends_with(t->name, "weight")) return false;
    for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++) {
        if (strstr(t->name, keep[i]) != NULL) return false;
    }
    return true;
}

// ---------------------------------------------------------------------------
// The mixes (llama-quant.cpp, llama_tensor_get_type_impl), for a dense model
// without an importance matrix. Rules for other ftypes (IQ2/IQ3, ...), for
// experts (n_expert == 8), Falcon and LLaMA-70B are left out: none of them can
// apply to a TYPE above and a Qwen3 model. ggml-org/llama.cpp master and the
// fixtures' llama.cpp (unslothai fork, d32676d7) have the same rules here.
// ---------------------------------------------------------------------------

// llama-quant.cpp, tensor_category / tensor_get_category (the categories some
// rule of the ftypes above looks at).
enum category {
    CAT_OTHER,
    CAT_TOKEN_EMBD,
    CAT_OUTPUT,
    CAT_ATTN_V,        // also the fused attn_qkv and attn_kv_b: category_is_attn_v
    CAT_ATTN_OUTPUT,
    CAT_FFN_DOWN,
};

static enum category category_of(const char * name) {
    if (strcmp(name, "output.weight") == 0) return CAT_OUTPUT;
    if (strcmp(name, "token_embd.weight") == 0 || strcmp(name, "per_layer_token_embd.weight") == 0) {
        return CAT_TOKEN_EMBD;
    }
    if (strstr(name, "attn_qkv.weight") || strstr(name, "attn_kv_b.weight") || strstr(name, "attn_v.weight")) {
        return CAT_ATTN_V;
    }
    if (strstr(name, "attn_output.weight")) return CAT_ATTN_OUTPUT;
    if (strstr(name, "ffn_down")) return CAT_FFN_DOWN;
    return CAT_OTHER;
}

// What the rules need to know about the model, and llama-quant.cpp's counters
// (quantize_state_impl): the i-th attn_v / ffn_down seen, in writing order
// (which is layer order, see compare_tensors).
struct mix_state {
    enum ftype ftype;
    bool       tied_embeddings;   // no output.weight: token_embd is the output matrix too
    int        n_gqa;             // n_head / n_head_kv
    int        n_layer;
    int        n_attn_v, i_attn_v;
    int        i_ffn_down;
};

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
// into every attention output, so the mixes spend bits there.
static enum mg_type attn_v_rule(const struct mix_state * s, enum mg_type type, int i) {
    switch (s->ftype) {
        case FTYPE_Q2_K:   return s->n_gqa >= 4 ? MG_TYPE_Q4_K : MG_TYPE_Q3_K;
        case FTYPE_Q3_K_M: return i < 2 ? MG_TYPE_Q5_K : MG_TYPE_Q4_K;
        case FTYPE_Q3_K_L: return MG_TYPE_Q5_K;
        case FTYPE_IQ4_NL: return s->n_gqa >= 4 ? MG_TYPE_Q5_K : type;
        case FTYPE_Q4_K_M:
        case FTYPE_Q5_K_M: return use_more_bits(i, s->n_attn_v) ? MG_TYPE_Q6_K : type;
        case FTYPE_Q4_K_S: return i < 4 ? MG_TYPE_Q5_K : type;
        default:           return type;
    }
}

// ffn_down sums n_ff products, so its rounding errors add up: more bits in the
// layers use_more_bits picks (or the first ones).
static enum mg_type ffn_down_rule(const struct mix_state * s, enum mg_type type, int i) {
    const int n = s->n_layer;
    switch (s->ftype) {
        case FTYPE_Q2_K:   return MG_TYPE_Q3_K;
        case FTYPE_Q3_K_M: return i < n / 16 ? MG_TYPE_Q5_K : MG_TYPE_Q4_K;
        case FTYPE_Q3_K_L: return MG_TYPE_Q5_K;
        case FTYPE_Q4_K_M:
        case FTYPE_Q5_K_M: return use_more_bits(i, n) ? MG_TYPE_Q6_K : type;
        case FTYPE_IQ4_NL:
        case FTYPE_Q4_K_S: return i < n / 8 ? MG_TYPE_Q5_K : type;
        default:           return type;
    }
}

static enum mg_type attn_output_rule(const struct mix_state * s, enum mg_type type) {
    switch (s->ftype) {
        case FTYPE_Q2_K:   return MG_TYPE_Q3_K;
        case FTYPE_Q3_K_M: return MG_TYPE_Q4_K;
        case FTYPE_Q3_K_L: return MG_TYPE_Q5_K;
        default:           return type;
    }
}

// One tensor through the rules; tensors must come in writing order (the counters).
static enum mg_type mix_type(struct mix_state * s, const struct mg_gguf_tensor_info * t, enum mg_type type) {
    const enum category cat = category_of(t->name);
    if (cat == CAT_OUTPUT || (cat == CAT_TOKEN_EMBD && s->tied_embeddings)) return output_rule(type, t->ne[0]);
    switch (cat) {
        case CAT_ATTN_V:      return attn_v_rule(s, type, s->i_attn_v++);
        case CAT_FFN_DOWN:    return ffn_down_rule(s, type, s->i_ffn_down++);
        case CAT_ATTN_OUTPUT: return attn_output_rule(s, type);
        default:              return type;
    }
}

// llama-quant.cpp, tensor_type_fallback: rows that do not split into 256-element
// super-blocks take the 32-element type of about the same size; rows that do
// not split into 32 either are stored as F16. MG_TYPE_COUNT when llama-quantize
// has no fallback (it stops with an error).
static enum mg_type shape_fallback(enum mg_type type, int64_t ne0) {
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

// ---------------------------------------------------------------------------
// The plan: every tensor, in llama-quantize's order, with its new type
// ---------------------------------------------------------------------------

struct tensor_plan {
    const struct mg_gguf_tensor_info * in;
    enum mg_type wanted;     // what the rules asked for
    enum mg_type type;       // what it becomes (wanted, or its shape fallback)
    bool         convert;    // false: the bytes are copied unchanged
    size_t       nbytes;     // new size
    void *       data;       // the new bytes (when converted)
    double       err2, x2;   // --stats: sums of squared errors and of squared weights
};

// llama_model_loader's weight_name_comparer: by layer number ("blk.N."; other
// tensors count as layer -1, so they come first), then by name.
static int layer_of(const char * name) {
    int layer = -1;
    if (sscanf(name, "blk.%d.", &layer) != 1) layer = -1;
    return layer;
}

static int compare_tensors(const void * a, const void * b) {
    const struct tensor_plan * x = a, * y = b;
    const int lx = layer_of(x->in->name), ly = layer_of(y->in->name);
    if (lx != ly) return lx < ly ? -1 : 1;
    return strcmp(x->in->name, y->in->name);
}

// n_layer and n_gqa from the hyper-parameters, as llama_model's hparams has them.
static void read_hparams(const struct mg_gguf * g, struct mix_state * s) {
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
    mg_clear_error();
}

struct options {
    const char *       in, * out;
    struct quant_option qo;
    bool               pure, allow_requantize, stats, dry_run;
    int                n_threads;
};

static const char * type_name(int type_id) {
    const char * name = mg_gguf_ggml_type_name(type_id);
    return name ? name : "?";
}

// Decide every tensor's type. False (after saying why) for a tensor that would
// have to be converted and cannot be.
static bool plan_tensors(const struct options * o, const struct mg_gguf * g, struct tensor_plan * plan, int n) {
    struct mix_state s = {.ftype = o->qo.ftype, .tied_embeddings = true, .n_gqa = 1};
    read_hparams(g, &s);
    int n_blk = 0;   // layers named in tensors, for a file without block_count
    for (int i = 0; i < n; i++) {
        const enum category cat = category_of(plan[i].in->name);
        if (cat == CAT_OUTPUT) s.tied_embeddings = false;
        if (cat == CAT_ATTN_V) s.n_attn_v++;
        if (layer_of(plan[i].in->name) >= n_blk) n_blk = layer_of(plan[i].in->name) + 1;
    }
    if (s.n_layer <= 0) s.n_layer = n_blk;
    const bool quantized = mg_get_type_traits(o->qo.type)->is_quantized;
    for (int i = 0; i < n; i++) {
        struct tensor_plan *               p  = &plan[i];
        const struct mg_gguf_tensor_info * in = p->in;
        p->wanted = p->type = (enum mg_type) in->type;
        if (allows_quantization(in)) {
            p->wanted = o->qo.type;
            if (quantized && !o->pure) p->wanted = mix_type(&s, in, p->wanted);
            p->type = quantized ? shape_fallback(p->wanted, in->ne[0]) : p->wanted;
            if (p->type == MG_TYPE_COUNT) {
                fprintf(stderr, "mg quantize: %s: rows of %lld elements do not split into %s blocks of %lld, and "
                        "llama-quantize has no fallback for %s\n", in->name, (long long) in->ne[0],
                        mg_type_name(p->wanted), (long long) mg_blck_size(p->wanted), mg_type_name(p->wanted));
                return false;
            }
        }
        p->convert = (int) p->type != in->type;
        p->nbytes  = p->convert ? mg_row_size(p->type, in->ne[0]) * (size_t) (in->ne[1] * in->ne[2] * in->ne[3])
                                : in->nbytes;
        if (!p->convert) continue;
        const struct mg_type_traits * src = mg_type_is_supported(in->type) ? mg_get_type_traits(in->type) : NULL;
        if (src == NULL || src->to_float == NULL) {
            fprintf(stderr, "mg quantize: %s: cannot read type %s (this engine does not decode it)\n", in->name,
                    type_name(in->type));
            return false;
        }
        if (src->is_quantized && !o->allow_requantize) {
            fprintf(stderr, "mg quantize: %s is already quantized (%s); requantizing to %s loses more than quantizing "
                    "from F32/F16/BF16 would. Use --allow-requantize to do it anyway\n", in->name,
                    type_name(in->type), mg_type_name(p->type));
            return false;
        }
    }
    return true;
}

// ---------------------------------------------------------------------------
// Converting rows: F32 in the middle, every row on its own (so any number of
// threads writes the same bytes)
// ---------------------------------------------------------------------------

struct convert_job {
    struct tensor_plan * p;
    int64_t              row0, row1;
    float *              x, * y;     // two rows of scratch
    bool                 stats;
    double               err2, x2;
};

static void * convert_rows(void * arg) {
    struct convert_job *               job = arg;
    const struct mg_gguf_tensor_info * in  = job->p->in;
    const enum mg_type                 src_type = (enum mg_type) in->type, dst_type = job->p->type;
    const struct mg_type_traits *      src = mg_get_type_traits(src_type), * dst = mg_get_type_traits(dst_type);
    const int64_t                      n = in->ne[0];
    const size_t                       src_row = mg_row_size(src_type, n), dst_row = mg_row_size(dst_type, n);
    for (int64_t r = job->row0; r < job->row1; r++) {
        char * out = (char *) job->p->data + (size_t) r * dst_row;
        src->to_float((const char *) in->data + (size_t) r * src_row, job->x, n);
        if (dst_type == MG_TYPE_F32) {
            memcpy(out, job->x, dst_row);   // F32 has no from_float: it is the format in the middle
        } else {
            dst->from_float(job->x, out, n);
        }
        if (job->stats) {
            dst->to_float(out, job->y, n);
            for (int64_t i = 0; i < n; i++) {
                const double d = (double) job->x[i] - (double) job->y[i];
                job->err2 += d * d;
                job->x2 += (double) job->x[i] * (double) job->x[i];
            }
        }
    }
    return NULL;
}

// Convert one tensor on up to n_threads threads, each a band of rows.
static bool convert_tensor(struct tensor_plan * p, int n_threads, bool stats) {
    const struct mg_gguf_tensor_info * in = p->in;
    const int64_t n_rows = in->ne[1] * in->ne[2] * in->ne[3];
    const int     n_jobs = (int) (n_rows < n_threads ? n_rows : n_threads);
    p->data = malloc(p->nbytes);
    struct convert_job * jobs = calloc((size_t) n_jobs, sizeof(*jobs));
    pthread_t *          tids = calloc((size_t) n_jobs, sizeof(*tids));
    bool *               started = calloc((size_t) n_jobs, sizeof(*started));
    const size_t         ne0 = (size_t) in->ne[0];
    float *              scratch = malloc((size_t) n_jobs * 2 * ne0 * sizeof(float));
    const bool           ok = p->data && jobs && tids && started && scratch;
    if (!ok) {
        fprintf(stderr, "mg quantize: out of memory converting %s (%zu bytes)\n", in->name, p->nbytes);
    }
    for (int j = 0; ok && j < n_jobs; j++) {
        float * x = scratch + (size_t) j * 2 * ne0;
        jobs[j] = (struct convert_job) {
            .p = p, .row0 = n_rows * j / n_jobs, .row1 = n_rows * (j + 1) / n_jobs,
            .x = x, .y = x + ne0, .stats = stats,
        };
        // The last band runs here; a thread that cannot start runs here too.
        started[j] = j < n_jobs - 1 && pthread_create(&tids[j], NULL, convert_rows, &jobs[j]) == 0;
        if (!started[j]) convert_rows(&jobs[j]);
    }
    for (int j = 0; ok && j < n_jobs; j++) {
        if (started[j]) pthread_join(tids[j], NULL);
        p->err2 += jobs[j].err2;
        p->x2 += jobs[j].x2;
    }
    free(scratch);
    free(started);
    free(tids);
    free(jobs);
    return ok;
}

// ---------------------------------------------------------------------------
// Progress and totals
// ---------------------------------------------------------------------------

static int64_t n_elements(const struct mg_gguf_tensor_info * t) {
    return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

static int digits(int n) {
    int d = 1;
    while (n >= 10) n /= 10, d++;
    return d;
}

// [ 12/ 29] blk.1.attn_q.weight  f32 -> q4_K  [768, 768]  2.25 MiB -> 0.32 MiB
static void print_progress(const struct tensor_plan * p, int i, int n, int name_width, bool stats) {
    const struct mg_gguf_tensor_info * in = p->in;
    const int w = digits(n) < 3 ? 3 : digits(n);
    char      shape[MG_SHAPE_STR_MAX], types[40];
    if (p->convert) {
        snprintf(types, sizeof(types), "%s -> %s", type_name(in->type), mg_type_name(p->type));
    } else {
        snprintf(types, sizeof(types), "%s", type_name(in->type));
    }
    mg_shape_str(in->ne, n_dims_of(in), ", ", shape, sizeof(shape));   // "[768, 768]": no trailing 1s
    printf("[%*d/%*d] %-*s  %-14s  %-14s", w, i + 1, w, n, name_width, in->name, types, shape);
    if (!p->convert) {
        printf("  %7.2f MiB (kept)\n", mg_mib(in->nbytes));
        return;
    }
    printf("  %7.2f MiB -> %7.2f MiB", mg_mib(in->nbytes), mg_mib(p->nbytes));
    if (p->wanted != p->type) {
        printf("  (%s needs rows of a multiple of %lld)", mg_type_name(p->wanted), (long long) mg_blck_size(p->wanted));
    }
    if (stats) {
        const double rms = sqrt(p->err2 / (double) n_elements(in)), rms_x = sqrt(p->x2 / (double) n_elements(in));
        printf("  rms error %.3e (%.3f%% of the weights' rms)", rms, rms_x > 0 ? 100.0 * rms / rms_x : 0.0);
    }
    printf("\n");
}

// ---------------------------------------------------------------------------
// The command
// ---------------------------------------------------------------------------

// split.count > 1: this file is one shard of a model (llama-gguf-split).
static bool check_not_split(const struct mg_gguf * g) {
    uint32_t n_split = 1;
    if (mg_gguf_find_key(g, "split.count") >= 0 && mg_gguf_get_u32(g, "split.count", &n_split) && n_split > 1) {
        fprintf(stderr, "mg quantize: %s is one of %u shards; merge them first (llama-gguf-split --merge)\n",
                mg_gguf_path(g), n_split);
        return false;
    }
    mg_clear_error();
    return true;
}

static bool write_output(const struct options * o, const struct mg_gguf * g, const struct tensor_plan * plan, int n) {
    static const char * const split_keys[] = {"split.no", "split.count", "split.tensors.count", NULL};
    struct mg_gguf_writer * w = mg_gguf_writer_new();
    // llama-quantize copies every pair, then sets these two (so they end up last).
    bool ok = w && mg_gguf_writer_copy_kvs(w, g, split_keys) &&
              mg_gguf_writer_set_u32(w, "general.quantization_version", 2) &&
              mg_gguf_writer_set_u32(w, "general.file_type", (uint32_t) o->qo.ftype);
    for (int i = 0; ok && i < n; i++) {
        const struct mg_gguf_tensor_info * in = plan[i].in;
        ok = mg_gguf_writer_add_tensor(w, in->name, plan[i].convert ? (int) plan[i].type : in->type, n_dims_of(in),
                                       in->ne, plan[i].convert ? plan[i].data : in->data);
    }
    ok = ok && mg_gguf_writer_write(w, o->out);
    if (!ok) fprintf(stderr, "mg quantize: %s\n", w ? mg_last_error() : "out of memory");
    mg_gguf_writer_free(w);
    return ok;
}

static bool parse_args(int argc, char ** argv, struct options * o) {
    long n_cpu = sysconf(_SC_NPROCESSORS_ONLN);
    o->n_threads = n_cpu > 0 ? (int) (n_cpu < 512 ? n_cpu : 512) : 1;
    const struct cli_option opts[] = {
        {NULL, "--pure", CLI_FLAG, &o->pure, "every matrix in TYPE's own tensor type: no mix rules"},
        {NULL, "--allow-requantize", CLI_FLAG, &o->allow_requantize, "accept quantized input matrices"},
        {NULL, "--stats", CLI_FLAG, &o->stats, "print each tensor's RMS quantization error"},
        {NULL, "--dry-run", CLI_FLAG, &o->dry_run, "show the types and sizes; write nothing"},
        {"-t", "--threads", CLI_INT, &o->n_threads, "threads (default: all cores)"},
    };
    const char * pos[3];
    int          n_pos;
    if (!cli_parse(argc, argv, usage, opts, (int) (sizeof(opts) / sizeof(opts[0])), pos, 3, &n_pos)) return false;
    if (n_pos != 3) {
        fprintf(stderr, "mg quantize: give IN.gguf OUT.gguf TYPE (see mg quantize --help)\n");
        return false;
    }
    o->in  = pos[0];
    o->out = pos[1];
    if (!parse_quant_option(pos[2], &o->qo)) {
        fprintf(stderr, "mg quantize: unknown TYPE '%s'; choose F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, "
                "Q6_K, Q2_K, Q3_K_S, Q3_K_M, Q3_K_L, Q4_K_S, Q4_K_M, Q5_K_S or Q5_K_M\n", pos[2]);
        return false;
    }
    if (o->n_threads < 1 || o->n_threads > 512) {
        fprintf(stderr, "mg quantize: --threads must be 1..512, got %d\n", o->n_threads);
        return false;
    }
    return true;
}

int cmd_quantize(int argc, char ** argv) {
    struct options o = {0};
    if (!parse_args(argc, argv, &o)) return 1;
    char * target = NULL;   // OUT, or a symlink's target (cli_output_path)
    if (!o.dry_run && (target = cli_output_path("quantize", o.out, o.in)) == NULL) return 1;
    if (target != NULL) o.out = target;
    struct mg_gguf * g = mg_gguf_open(o.in);
    if (g == NULL) {
        fprintf(stderr, "mg quantize: %s\n", mg_last_error());
        free(target);
        return 1;
    }
    const int            n    = (int) mg_gguf_n_tensors(g);
    struct tensor_plan * plan = calloc((size_t) (n > 0 ? n : 1), sizeof(*plan));
    int                  name_width = 0;
    for (int i = 0; plan && i < n; i++) {
        plan[i].in = mg_gguf_tensor(g, i);
        const int len = (int) strlen(plan[i].in->name);
        name_width = len > name_width ? len : name_width;
    }
    if (plan) qsort(plan, (size_t) n, sizeof(*plan), compare_tensors);
    bool ok = plan != NULL && check_not_split(g) && plan_tensors(&o, g, plan, n);
    if (ok) {
        printf("mg quantize: %s -> %s as %s (general.file_type %d%s), %d thread%s\n", o.in,
               o.dry_run ? "(dry run)" : o.out, o.qo.name, (int) o.qo.ftype, o.pure ? ", --pure" : "", o.n_threads,
               o.n_threads == 1 ? "" : "s");
    }
    size_t  size_in = 0, size_out = 0;
    int64_t n_weights = 0, n_converted = 0;
    double  err2 = 0, x2 = 0;
    for (int i = 0; ok && i < n; i++) {
        struct tensor_plan * p = &plan[i];
        if (p->convert && !o.dry_run) ok = convert_tensor(p, o.n_threads, o.stats);
        if (!ok) break;
        print_progress(p, i, n, name_width, o.stats && !o.dry_run);
        size_in += p->in->nbytes;
        size_out += p->nbytes;
        n_weights += n_elements(p->in);
        n_converted += p->convert ? n_elements(p->in) : 0;
        err2 += p->err2;
        x2 += p->x2;
    }
    if (ok && !o.dry_run) ok = write_output(&o, g, plan, n);
    if (ok) {
        const double w = n_weights > 0 ? (double) n_weights : 1.0;
        printf("mg quantize: %s %d tensors, %.2f MiB -> %.2f MiB (%.2f -> %.2f bits per weight)\n",
               o.dry_run ? "would write" : "wrote", n, mg_mib(size_in), mg_mib(size_out), 8.0 * (double) size_in / w,
               8.0 * (double) size_out / w);
        if (o.stats && !o.dry_run && x2 > 0) {
            printf("mg quantize: rms error over all converted weights %.3e (%.3f%% of their rms)\n",
                   sqrt(err2 / (double) n_converted), 100.0 * sqrt(err2 / x2));
        }
    }
    for (int i = 0; plan && i < n; i++) free(plan[i].data);
    free(plan);
    mg_gguf_close(g);
    free(target);
    return ok ? 0 : 1;
}
