//@file full
// cmd_mkmodel.c - mg mkmodel: a llama, qwen2, qwen3 or qwen3moe GGUF with random weights and a
// real vocabulary (MiniMind's by default, or any byte-level BPE tokenizer.json
// folder: hf_tokenizer.c), written by our own GGUF writer. For tests and
// benchmarks: speed depends on the shapes and types, not on the values.
#include "cli.h"
#include "gguf_writer.h"
#include "hf_tokenizer.h"
#include "memmap.h"
#include "outfile.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef MG_DATA_DIR
#define MG_DATA_DIR "data"
#endif

static const char * usage =
    "usage: mg mkmodel [--preset NAME] [--arch NAME] [--n-layer N --n-embd N ...] [--n-expert N --n-expert-used N\n"
    "                  --n-ff-exp N] [--type TYPE] [--seed N]\n"
    "                  [--vocab DIR] [--untied] [--pre NAME] [--rng NAME] [--init NAME] -o OUT.gguf\n"
    "\n"
    "--arch writes a llama, qwen2, qwen3 or qwen3moe model (default: the preset's, else qwen3): qwen3 has q/k\n"
    "norms, qwen2 q/k/v biases, llama neither (and RoPE on pairs (2i, 2i+1) instead of NEOX's (i, i + D/2));\n"
    "qwen3moe is qwen3 with a mixture of experts for its feed-forward: a router (ffn_gate_inp, F32) picks\n"
    "--n-expert-used of --n-expert SwiGLU experts of width --n-ff-exp (default n_ff / n_expert_used) per token.\n"
    "Presets (qwen3 unless said; rope base 1e6, RMS eps 1e-6 unless said; the vocabulary comes from --vocab):\n"
    "  tiny        2 layers, n_embd 256, 4 heads / 2 KV heads of 64, n_ff 768, context 512, tied (the test fixtures')\n"
    "  tiny2       2 layers, n_embd 512, 8 heads / 2 KV heads of 64, n_ff 1408, context 512, untied, --pre qwen2,\n"
    "              --rng sum4, --init scaled (the second shape of tests/fixtures/golden2)\n"
    "  minimind    8 layers, n_embd 768, 8 heads / 4 KV heads of 96, n_ff 2432, context 32768, tied (MiniMind-3)\n"
    "  qwen3-0.6b  28 layers, n_embd 1024, 16 heads / 8 KV heads of 128, n_ff 3072, context 40960, tied (Qwen3-0.6B)\n"
    "  tiny-llama  llama: tiny2's shape (untied, qwen2 pre, sum4, scaled), rope base 5e5, RMS eps 1e-5 and\n"
    "              Llama 3's rope_freqs.weight (factor 32, original context 8192): a golden shape\n"
    "  tiny-qwen2  qwen2: 2 layers, n_embd 512, 8 heads / 4 KV heads of 64, n_ff 1408, context 512, tied, q/k/v\n"
    "              biases, qwen2 pre, sum4, scaled: a golden shape\n"
    "  llama3.2-1b   llama: 16 layers, n_embd 2048, 32 heads / 8 KV heads of 64, n_ff 8192, context 131072, tied,\n"
    "                rope base 5e5, RMS eps 1e-5, rope_freqs.weight (Llama 3.2 1B's config.json)\n"
    "  smollm2-135m  llama: 30 layers, n_embd 576, 9 heads / 3 KV heads of 64, n_ff 1536, context 8192, tied,\n"
    "                rope base 1e5, RMS eps 1e-5 (SmolLM2-135M's config.json)\n"
    "  qwen2.5-0.5b  qwen2: 24 layers, n_embd 896, 14 heads / 2 KV heads of 64, n_ff 4864, context 32768, tied,\n"
    "                q/k/v biases (Qwen2.5-0.5B's config.json)\n"
    "  tiny-qwen3moe  qwen3moe: 2 layers, n_embd 512, 8 heads / 2 KV heads of 64, 8 experts of width 256, 2 used,\n"
    "                n_ff 512, context 512, untied, qwen2 pre, sum4, scaled: a golden shape (every row a multiple\n"
    "                of 256, every row count of 8, so every K-quant and repacking applies)\n"
    "  qwen3-30b-a3b qwen3moe: 48 layers, n_embd 2048, 32 heads / 4 KV heads of 128, 128 experts of width 768,\n"
    "                8 used, n_ff 6144, context 40960, untied (Qwen3-30B-A3B's config.json)\n"
    "The shape flags override the preset's values (--n-layer 2 cuts a real shape down to fit); without --preset, --n-layer, --n-embd, --n-head and --n-ff\n"
    "are needed (--n-head-kv defaults to --n-head, --head-dim to n_embd / n_head, --n-ctx to 4096).\n"
    "Weights are random from the seed, with mean 0; --init picks their sizes:\n"
    "  flat        standard deviation 0.02 for every matrix, norms 1 (the default; logits of std ~0.5)\n"
    "  scaled      1/sqrt(row width) for the layers' matrices, 0.25 for token_embd and output, norms\n"
    "              1 + 0.1 x random (logits of std ~5, as the fixtures' tiny model)\n"
    "--rng picks how they are drawn:\n"
    "  box-muller  normal numbers through log and cos (the default): their last bit is the C library's, so\n"
    "              another libm may write other bytes\n"
    "  sum4        the sum of four uniform 16-bit integers, centred, times one float scale (near normal):\n"
    "              integer arithmetic and one rounding, the same bytes on every machine\n"
    "--untied gives the model its own output matrix (output.weight, random like the rest) instead of\n"
    "reading the logits through token_embd. --pre writes tokenizer.ggml.pre: gpt-2, qwen2, llama-bpe or smollm\n"
    "(default: the one tokenizer.json names; qwen2 and smollm split digits one by one, llama-bpe in threes, gpt-2\n"
    "keeps runs). TYPE is the type of every matrix (f32, f16, bf16,\n"
    "q8_0, q4_0, q4_k, q6_k, ...); a matrix whose rows do not split into TYPE's blocks falls back to q8_0 (f16\n"
    "when they do not split into 32s either). The vocabulary is read from DIR/tokenizer.json (and\n"
    "tokenizer_config.json, config.json when present; default: the project's data/minimind): the embedding\n"
    "has one row per token, added tokens included, and the pre-tokenizer follows tokenizer.json's regex.";

struct preset {
    const char * name;
    int n_layer, n_embd, n_head, n_head_kv, head_dim, n_ff, n_ctx;
    bool         untied;   // an output.weight of its own
    const char * pre;      // tokenizer.ggml.pre, or NULL: the one tokenizer.json's regex names
    const char * rng;      // "box-muller" or "sum4"
    const char * init;     // "flat" or "scaled"
    const char * arch;     // general.architecture: "llama", "qwen2", or NULL: qwen3
    float        rope_base, rms_eps;   // 0: 1e6 and 1e-6
    int          llama3_ctx;           // > 0: Llama 3's rope_freqs.weight, for this original context
    int          n_expert, n_expert_used, n_ff_exp;   // qwen3moe's experts (0: a dense model)
};

static const struct preset presets[] = {
    {"tiny",       2,  256,  4,  2, 64,  768,  512,   false, NULL,    "box-muller", "flat", NULL, 0, 0, 0, 0, 0, 0},
    // The second shape of the goldens: wider, GQA 4:1, its own output matrix,
    // the qwen2 pre-tokenizer; n_ff 1408 (not a multiple of 256) sends
    // ffn_down through llama-quantize's fallback types in the K-quant mixes.
    // Bit-reproducible (sum4), so the test makes its master instead of vendoring 49 MB.
    {"tiny2",      2,  512,  8,  2, 64,  1408, 512,   true,  "qwen2", "sum4",       "scaled", NULL, 0, 0, 0, 0, 0, 0},
    {"minimind",   8,  768,  8,  4, 96,  2432, 32768, false, NULL,    "box-muller", "flat", NULL, 0, 0, 0, 0, 0, 0},
    {"qwen3-0.6b", 28, 1024, 16, 8, 128, 3072, 40960, false, NULL,    "box-muller", "flat", NULL, 0, 0, 0, 0, 0, 0},   // Qwen3-0.6B's config.json
    // The golden shapes of the other architectures (tests/full/test_golden2.c).
    {"tiny-llama", 2,  512,  8,  2, 64,  1408, 512,   true,  "qwen2", "sum4", "scaled", "llama", 5e5f, 1e-5f, 8192, 0, 0, 0},
    {"tiny-qwen2", 2,  512,  8,  4, 64,  1408, 512,   false, "qwen2", "sum4", "scaled", "qwen2", 1e6f, 1e-6f, 0, 0, 0, 0},
    // The real shapes, from their config.json (cut down with --n-layer).
    {"llama3.2-1b",  16, 2048, 32, 8, 64, 8192, 131072, false, NULL, "box-muller", "flat", "llama", 5e5f, 1e-5f, 8192, 0, 0, 0},
    {"smollm2-135m", 30, 576,  9,  3, 64, 1536, 8192,   false, NULL, "box-muller", "flat", "llama", 1e5f, 1e-5f, 0, 0, 0, 0},
    {"qwen2.5-0.5b", 24, 896,  14, 2, 64, 4864, 32768,  false, NULL, "box-muller", "flat", "qwen2", 1e6f, 1e-6f, 0, 0, 0, 0},
    // qwen3moe: tiny2's attention, 8 experts of 256 (2 used) in place of its
    // feed-forward; every row 256 or 512 wide and every row count a multiple
    // of 8, so the K-quants, the repacked layouts and llama-quantize's
    // n_expert == 8 rules all apply. Bit-reproducible (sum4), like tiny2.
    {"tiny-qwen3moe", 2, 512, 8, 2, 64, 512, 512, true, "qwen2", "sum4", "scaled", "qwen3moe", 1e6f, 1e-6f, 0, 8, 2, 256},
    // Qwen3-30B-A3B's config.json (num_experts 128, num_experts_per_tok 8, moe_intermediate_size 768).
    {"qwen3-30b-a3b", 48, 2048, 32, 4, 128, 6144, 40960, true, NULL, "box-muller", "flat", "qwen3moe", 1e6f, 1e-6f, 0,
     128, 8, 768},
};
enum { N_PRESETS = sizeof(presets) / sizeof(presets[0]) };

// llama.cpp's llama_ftype for a file whose matrices are all of one type.
static uint32_t file_type_of(enum mg_type type) {
    switch (type) {
        case MG_TYPE_F32:  return 0;
        case MG_TYPE_F16:  return 1;
        case MG_TYPE_Q4_0: return 2;
        case MG_TYPE_Q8_0: return 7;
        case MG_TYPE_Q4_K: return 14;   // Q4_K_S
        case MG_TYPE_Q6_K: return 18;
        case MG_TYPE_BF16: return 32;
        case MG_TYPE_Q4_1: return 3;
        case MG_TYPE_Q5_0: return 8;
        case MG_TYPE_Q5_1: return 9;
        case MG_TYPE_Q2_K: return 10;
        case MG_TYPE_Q3_K: return 11;   // Q3_K_S
        case MG_TYPE_Q5_K: return 16;   // Q5_K_S
        case MG_TYPE_IQ4_NL: return 25;
        default: return 0;
    }
}

// Deterministic random numbers from xorshift64*.
struct rng {
    uint64_t state;
    bool     sum4;   // --rng sum4, else box-muller
};

static uint64_t rng_next(struct rng * r) {
    r->state ^= r->state >> 12;
    r->state ^= r->state << 25;
    r->state ^= r->state >> 27;
    return r->state * 0x2545F4914F6CDD1Dull;
}

static double rng_uniform(struct rng * r) {
    return ((double) (rng_next(r) >> 11) + 0.5) / 9007199254740992.0;
}

// Box-Muller: normal, but log and cos are the C library's, and a libm may
// round their last bit otherwise, which can move a weight by one float ulp.
static float rng_box_muller(struct rng * r, float std) {
    const double u1 = rng_uniform(r), u2 = rng_uniform(r);
    return (float) (sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2)) * std;
}

// Irwin-Hall with 4 terms: the four 16-bit quarters of one draw, summed and
// centred, an integer in -131070..131070 (converted to float exactly), times
// std / sd with sd = sqrt(4 (65536^2 - 1) / 12) = 37837.23: integer work and
// two correctly rounded float operations (IEEE 754, no libm), so the same
// bits on every machine. Near normal (bounded at 3.46 sd), fine for weights.
static float rng_sum4(struct rng * r, float std) {
    const uint64_t u = rng_next(r);
    const int32_t  s = (int32_t) (u & 0xFFFF) + (int32_t) (u >> 16 & 0xFFFF) + (int32_t) (u >> 32 & 0xFFFF) +
                      (int32_t) (u >> 48 & 0xFFFF) - 131070;
    const float scale = std / 37837.23f;
    return (float) s * scale;
}

static float rng_weight(struct rng * r, float std) {
    return r->sum4 ? rng_sum4(r, std) : rng_box_muller(r, std);
}

struct model_writer {
    struct mg_gguf_writer * w;
    struct rng              rng;
    enum mg_type            type;
    bool                    scaled;    // --init scaled, else flat
    void **                 buffers;   // tensor data, kept until the file is written
    int                     n_buffers;
    bool                    count_only;   // add nothing: only sum the bytes into n_bytes (the first pass)
    uint64_t                n_bytes;
};

// In the counting pass, the bytes a tensor would take; true if it was that pass.
static bool counted(struct model_writer * mw, uint64_t bytes) {
    if (mw->count_only) mw->n_bytes += bytes;
    return mw->count_only;
}

// n_dims {ne0, ne1, ne2} random weights of standard deviation std, in type
// when its rows split into blocks (else q8_0, else f16): a matrix (ne2 1,
// n_dims 2) or a stack of ne2 matrices (qwen3moe's experts, n_dims 3).
static bool add_weights(struct model_writer * mw, const char * name, int n_dims, const int64_t ne[3], float std,
                        enum mg_type type) {
    const int64_t ne0 = ne[0], rows = ne[1] * ne[2];
    if (ne0 % mg_blck_size(type) != 0) type = MG_TYPE_Q8_0;
    if (ne0 % mg_blck_size(type) != 0) type = MG_TYPE_F16;
    const struct mg_type_traits * tt = mg_get_type_traits(type);
    const size_t row_size = mg_row_size(type, ne0);
    if (counted(mw, (uint64_t) row_size * (uint64_t) rows)) return true;
    char *  data = malloc(row_size * (size_t) rows);
    float * row  = malloc((size_t) ne0 * sizeof(float));
    if (data == NULL || row == NULL) {
        fprintf(stderr, "mg mkmodel: out of memory for %s\n", mg_quote(name));
        free(data);
        free(row);
        return false;
    }
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t i = 0; i < ne0; i++) row[i] = rng_weight(&mw->rng, std);
        if (type == MG_TYPE_F32) {
            memcpy(data + (size_t) r * row_size, row, row_size);
        } else {
            tt->from_float(row, data + (size_t) r * row_size, ne0);
        }
    }
    free(row);
    mw->buffers[mw->n_buffers++] = data;
    return mg_gguf_writer_add_tensor(mw->w, name, type, n_dims, ne, data);
}

// The standard deviation of a layer's weights with rows of ne0: flat 0.02;
// scaled 1/sqrt(fan-in), so a layer keeps its input's size (sqrtf and the
// division round correctly). wide: token_embd or output, whose rows are read
// whole as an embedding or as one logit each (scaled: 0.25).
static float weight_std(const struct model_writer * mw, int64_t ne0, bool wide) {
    return !mw->scaled ? 0.02f : wide ? 0.25f : 1.0f / sqrtf((float) ne0);
}

// A {ne0, ne1} matrix of random weights in the requested type.
static bool add_matrix(struct model_writer * mw, const char * name, int64_t ne0, int64_t ne1, bool wide) {
    return add_weights(mw, name, 2, (const int64_t[3]) {ne0, ne1, 1}, weight_std(mw, ne0, wide), mw->type);
}

// The n floats of a 1-D F32 tensor, to be filled and handed to add_vector; NULL after saying why.
static float * new_vector(const char * name, int64_t n) {
    float * data = malloc((size_t) n * sizeof(float));
    if (data == NULL) fprintf(stderr, "mg mkmodel: out of memory for %s\n", mg_quote(name));
    return data;
}

// A filled vector into the file, F32 as llama.cpp's converter keeps 1-D tensors; mw frees it.
static bool add_vector(struct model_writer * mw, const char * name, int64_t n, float * data) {
    mw->buffers[mw->n_buffers++] = data;
    return mg_gguf_writer_add_tensor(mw->w, name, MG_TYPE_F32, 1, &n, data);
}

static bool add_norm(struct model_writer * mw, const char * name, int64_t n) {
    if (counted(mw, (uint64_t) n * sizeof(float))) return true;
    float * data = new_vector(name, n);
    if (data == NULL) return false;
    for (int64_t i = 0; i < n; i++) data[i] = mw->scaled ? 1.0f + rng_weight(&mw->rng, 0.1f) : 1.0f;
    return add_vector(mw, name, n, data);
}

static const char * arch_of(const struct preset * p) {
    return p->arch != NULL ? p->arch : "qwen3";
}

// "<arch>.<suffix>" into buf: every hyper-parameter key has the architecture's prefix.
static const char * key(char * buf, size_t size, const struct preset * p, const char * suffix) {
    snprintf(buf, size, "%s.%s", arch_of(p), suffix);
    return buf;
}

static bool add_hparams(struct mg_gguf_writer * w, const struct preset * p, enum mg_type type) {
    char name[64], k[96];
    snprintf(name, sizeof(name), "mg-%s-%s", p->name, mg_type_name(type));
    bool ok = mg_gguf_writer_set_str(w, "general.architecture", arch_of(p)) &&
              mg_gguf_writer_set_str(w, "general.name", name);
    ok = ok && mg_gguf_writer_set_u32(w, key(k, sizeof(k), p, "block_count"), (uint32_t) p->n_layer);
    ok = ok && mg_gguf_writer_set_u32(w, key(k, sizeof(k), p, "context_length"), (uint32_t) p->n_ctx);
    ok = ok && mg_gguf_writer_set_u32(w, key(k, sizeof(k), p, "embedding_length"), (uint32_t) p->n_embd);
    ok = ok && mg_gguf_writer_set_u32(w, key(k, sizeof(k), p, "feed_forward_length"), (uint32_t) p->n_ff);
    ok = ok && mg_gguf_writer_set_u32(w, key(k, sizeof(k), p, "attention.head_count"), (uint32_t) p->n_head);
    ok = ok && mg_gguf_writer_set_u32(w, key(k, sizeof(k), p, "attention.head_count_kv"), (uint32_t) p->n_head_kv);
    ok = ok && mg_gguf_writer_set_u32(w, key(k, sizeof(k), p, "attention.key_length"), (uint32_t) p->head_dim);
    ok = ok && mg_gguf_writer_set_u32(w, key(k, sizeof(k), p, "attention.value_length"), (uint32_t) p->head_dim);
    if (p->arch != NULL) {   // llama.cpp's converter writes it for llama and qwen2 (rope.dimension_count)
        ok = ok && mg_gguf_writer_set_u32(w, key(k, sizeof(k), p, "rope.dimension_count"), (uint32_t) p->head_dim);
    }
    ok = ok && mg_gguf_writer_set_f32(w, key(k, sizeof(k), p, "rope.freq_base"), p->rope_base > 0 ? p->rope_base : 1e6f);
    ok = ok && mg_gguf_writer_set_f32(w, key(k, sizeof(k), p, "attention.layer_norm_rms_epsilon"),
                                      p->rms_eps > 0 ? p->rms_eps : 1e-6f);
    if (p->n_expert > 0) {   // the keys llama.cpp's qwen3moe loader reads (llama_model_base::load_hparams, qwen3moe.cpp)
        ok = ok && mg_gguf_writer_set_u32(w, key(k, sizeof(k), p, "expert_count"), (uint32_t) p->n_expert);
        ok = ok && mg_gguf_writer_set_u32(w, key(k, sizeof(k), p, "expert_used_count"), (uint32_t) p->n_expert_used);
        ok = ok && mg_gguf_writer_set_u32(w, key(k, sizeof(k), p, "expert_feed_forward_length"), (uint32_t) p->n_ff_exp);
    }
    ok = ok && mg_gguf_writer_set_u32(w, "general.file_type", file_type_of(type));
    if (mg_get_type_traits(type)->is_quantized) ok = ok && mg_gguf_writer_set_u32(w, "general.quantization_version", 2);
    return ok;
}

// "blk.<il>.<what>.weight" into buf.
static const char * layer_tensor(char * buf, size_t size, int il, const char * what) {
    snprintf(buf, size, "blk.%d.%s.weight", il, what);
    return buf;
}

// A bias of n random values (std 0.1 scaled, 0.02 flat), F32 as llama.cpp's converter keeps 1-D tensors.
static bool add_bias(struct model_writer * mw, const char * name, int64_t n) {
    if (counted(mw, (uint64_t) n * sizeof(float))) return true;
    float * data = new_vector(name, n);
    if (data == NULL) return false;
    for (int64_t i = 0; i < n; i++) data[i] = rng_weight(&mw->rng, mw->scaled ? 0.1f : 0.02f);
    return add_vector(mw, name, n, data);
}

// Llama 3's frequency factors, one per rotated pair, as llama.cpp's converter
// computes them from config.json's rope_scaling (convert_hf_to_gguf.py,
// LlamaModel.generate_extra_tensors; Llama 3.x: factor 32, low_freq_factor 1,
// high_freq_factor 4): pairs of short wavelength keep their angle, long ones
// turn 32 times slower, and the ones between are blended.
static bool add_llama3_rope_freqs(struct model_writer * mw, const struct preset * p) {
    const double factor = 32.0, low_freq_factor = 1.0, high_freq_factor = 4.0, old_ctx = p->llama3_ctx;
    const double low_freq_wavelen = old_ctx / low_freq_factor, high_freq_wavelen = old_ctx / high_freq_factor;
    const double base = p->rope_base > 0 ? p->rope_base : 1e6;
    const int64_t n = p->head_dim / 2;
    if (counted(mw, (uint64_t) n * sizeof(float))) return true;
    float * data = new_vector("rope_freqs.weight", n);
    if (data == NULL) return false;
    for (int64_t i = 0; i < n; i++) {
        const double freq    = 1.0 / pow(base, (double) (2 * i) / p->head_dim);
        const double wavelen = 2.0 * 3.141592653589793 / freq;
        double f = 1.0;
        if (wavelen > low_freq_wavelen) {
            f = factor;
        } else if (wavelen >= high_freq_wavelen) {
            const double smooth = (old_ctx / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
            f = 1.0 / ((1.0 - smooth) / factor + smooth);
        }
        data[i] = (float) f;
    }
    return add_vector(mw, "rope_freqs.weight", n, data);
}

static const char * layer_bias(char * buf, size_t size, int il, const char * what) {
    snprintf(buf, size, "blk.%d.%s.bias", il, what);
    return buf;
}

// qwen3moe's feed-forward: the router, F32 as llama.cpp's converter keeps it
// (ffn_gate_inp), then the experts' three stacks (llama.cpp's names and
// shapes: llama_model_qwen3moe::load_arch_tensors). The router's weights are
// 2/sqrt(E) whatever --init says: its logits then have a standard deviation
// near 2, so the softmax over the experts is far from flat and the top-k
// choice is clear.
static bool add_experts(struct model_writer * mw, const struct preset * p, int il) {
    const int64_t E = p->n_embd, F = p->n_ff_exp, X = p->n_expert;
    char n[MG_MAX_NAME];
    bool ok = add_weights(mw, layer_tensor(n, sizeof(n), il, "ffn_gate_inp"), 2, (const int64_t[3]) {E, X, 1},
                          2.0f / sqrtf((float) E), MG_TYPE_F32);
    ok = ok && add_weights(mw, layer_tensor(n, sizeof(n), il, "ffn_gate_exps"), 3, (const int64_t[3]) {E, F, X},
                           weight_std(mw, E, false), mw->type);
    ok = ok && add_weights(mw, layer_tensor(n, sizeof(n), il, "ffn_up_exps"), 3, (const int64_t[3]) {E, F, X},
                           weight_std(mw, E, false), mw->type);
    ok = ok && add_weights(mw, layer_tensor(n, sizeof(n), il, "ffn_down_exps"), 3, (const int64_t[3]) {F, E, X},
                           weight_std(mw, F, false), mw->type);
    return ok;
}

static bool add_tensors(struct model_writer * mw, const struct preset * p, int64_t n_vocab) {
    const int64_t E = p->n_embd, F = p->n_ff, D = p->head_dim, H = p->n_head, Hkv = p->n_head_kv;
    const char *  arch = arch_of(p);
    bool ok = add_matrix(mw, "token_embd.weight", E, n_vocab, true);   // also the output matrix unless untied
    if (p->llama3_ctx > 0) ok = ok && add_llama3_rope_freqs(mw, p);
    char n[MG_MAX_NAME];
    for (int il = 0; ok && il < p->n_layer; il++) {
        ok = ok && add_norm(mw, layer_tensor(n, sizeof(n), il, "attn_norm"), E);
        ok = ok && add_matrix(mw, layer_tensor(n, sizeof(n), il, "attn_q"), E, D * H, false);
        ok = ok && add_matrix(mw, layer_tensor(n, sizeof(n), il, "attn_k"), E, D * Hkv, false);
        ok = ok && add_matrix(mw, layer_tensor(n, sizeof(n), il, "attn_v"), E, D * Hkv, false);
        if (strcmp(arch, "qwen2") == 0) {   // Qwen2's q/k/v projections have biases
            ok = ok && add_bias(mw, layer_bias(n, sizeof(n), il, "attn_q"), D * H);
            ok = ok && add_bias(mw, layer_bias(n, sizeof(n), il, "attn_k"), D * Hkv);
            ok = ok && add_bias(mw, layer_bias(n, sizeof(n), il, "attn_v"), D * Hkv);
        }
        ok = ok && add_matrix(mw, layer_tensor(n, sizeof(n), il, "attn_output"), D * H, E, false);
        if (strcmp(arch, "qwen3") == 0 || strcmp(arch, "qwen3moe") == 0) {   // Qwen3's per-head norms of Q and K
            ok = ok && add_norm(mw, layer_tensor(n, sizeof(n), il, "attn_q_norm"), D);
            ok = ok && add_norm(mw, layer_tensor(n, sizeof(n), il, "attn_k_norm"), D);
        }
        ok = ok && add_norm(mw, layer_tensor(n, sizeof(n), il, "ffn_norm"), E);
        if (p->n_expert > 0) {
            ok = ok && add_experts(mw, p, il);
            continue;
        }
        ok = ok && add_matrix(mw, layer_tensor(n, sizeof(n), il, "ffn_gate"), E, F, false);
        ok = ok && add_matrix(mw, layer_tensor(n, sizeof(n), il, "ffn_up"), E, F, false);
        ok = ok && add_matrix(mw, layer_tensor(n, sizeof(n), il, "ffn_down"), F, E, false);
    }
    ok = ok && add_norm(mw, "output_norm.weight", E);
    // llama.cpp's qwen3 loader reads output.weight when present, else token_embd (llama-model.cpp, TENSOR_DUPLICATED)
    return ok && (!p->untied || add_matrix(mw, "output.weight", E, n_vocab, true));
}

#define UNSET INT_MIN   // a shape flag not given

// qwen3moe needs its experts (from the preset or the flags), the dense
// architectures have none; an expert width not given is n_ff / n_expert_used,
// as llama.cpp's qwen3moe loader takes it. False after printing why.
static bool choose_experts(const char * cmd, struct preset * shape) {
    const bool moe = shape->arch != NULL && strcmp(shape->arch, "qwen3moe") == 0;
    if (!moe) {
        if (shape->n_expert > 0 || shape->n_expert_used > 0 || shape->n_ff_exp > 0) {
            fprintf(stderr, "mg %s: --n-expert, --n-expert-used and --n-ff-exp are for --arch qwen3moe, not %s\n", cmd,
                    arch_of(shape));
            return false;
        }
        shape->n_expert = shape->n_expert_used = shape->n_ff_exp = 0;
        return true;
    }
    if (shape->n_expert == UNSET || shape->n_expert == 0 || shape->n_expert_used == UNSET ||
        shape->n_expert_used == 0) {
        fprintf(stderr, "mg %s: --arch qwen3moe needs --n-expert and --n-expert-used (or --preset tiny-qwen3moe)\n",
                cmd);
        return false;
    }
    if ((shape->n_ff_exp == UNSET || shape->n_ff_exp == 0) && shape->n_expert_used > 0) {
        shape->n_ff_exp = shape->n_ff / shape->n_expert_used;
    }
    return true;
}

// The shape: the preset's, each field a flag gave replaced; without a
// preset the four main flags are required. False after printing why.
static bool choose_shape(const char * cmd, const char * preset_name, const struct preset * flags,
                         struct preset * shape) {
    static const struct preset none = {"custom", UNSET, UNSET, UNSET, UNSET, UNSET, UNSET, 4096, false, NULL, "box-muller",
                                       "flat", NULL, 0.0f, 0.0f, 0, 0, 0, 0};
    const struct preset * base = preset_name ? NULL : &none;
    for (size_t i = 0; preset_name && i < N_PRESETS; i++) {
        if (strcmp(preset_name, presets[i].name) == 0) base = &presets[i];
    }
    if (base == NULL) {
        fprintf(stderr, "mg %s: --preset '%s': not a preset (tiny, tiny2, minimind, qwen3-0.6b, tiny-llama, tiny-qwen2, "
                        "llama3.2-1b, smollm2-135m, qwen2.5-0.5b, tiny-qwen3moe, qwen3-30b-a3b)\n", cmd,
                mg_quote(preset_name));
        return false;
    }
    *shape = *base;
#define TAKE_FLAG(field) if (flags->field != UNSET) shape->field = flags->field
    TAKE_FLAG(n_layer);
    TAKE_FLAG(n_embd);
    TAKE_FLAG(n_head);
    TAKE_FLAG(n_head_kv);
    TAKE_FLAG(head_dim);
    TAKE_FLAG(n_ff);
    TAKE_FLAG(n_ctx);
    shape->untied = shape->untied || flags->untied;
    if (flags->pre != NULL) shape->pre = flags->pre;
    if (flags->rng != NULL) shape->rng = flags->rng;
    if (flags->init != NULL) shape->init = flags->init;
    if (flags->arch != NULL && strcmp(flags->arch, arch_of(shape)) != 0) {
        shape->arch       = strcmp(flags->arch, "qwen3") == 0 ? NULL : flags->arch;
        shape->llama3_ctx = 0;   // another architecture than the preset's: no Llama 3 factors
        shape->n_expert = shape->n_expert_used = shape->n_ff_exp = 0;   // nor the preset's experts
    }
    TAKE_FLAG(n_expert);
    TAKE_FLAG(n_expert_used);
    TAKE_FLAG(n_ff_exp);
#undef TAKE_FLAG
    if (preset_name == NULL &&
        (shape->n_layer == UNSET || shape->n_embd == UNSET || shape->n_head == UNSET || shape->n_ff == UNSET)) {
        fprintf(stderr, "mg %s: give --preset tiny|tiny2|minimind|qwen3-0.6b, or --n-layer, --n-embd, --n-head and "
                        "--n-ff\n", cmd);
        return false;
    }
    if (shape->n_head_kv == UNSET) shape->n_head_kv = shape->n_head;
    if (shape->head_dim == UNSET && shape->n_head > 0) shape->head_dim = shape->n_embd / shape->n_head;
    return choose_experts(cmd, shape);
}

// The experts' sizes: as llama.cpp's loader takes them (1 <= used <= count <= LLAMA_MAX_EXPERTS, 512).
static bool check_experts(const char * cmd, const struct preset * p) {
    const struct { const char * flag; int value, limit; } sizes[] = {
        {"--n-expert", p->n_expert, 512}, {"--n-expert-used", p->n_expert_used, p->n_expert},
        {"--n-ff-exp", p->n_ff_exp, 262144},
    };
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        if (sizes[i].value < 1 || sizes[i].value > sizes[i].limit) {
            fprintf(stderr, "mg %s: %s %d: must be in 1..%d%s\n", cmd, sizes[i].flag, sizes[i].value, sizes[i].limit,
                    i == 1 ? " (--n-expert)" : i == 0 ? " (llama.cpp's LLAMA_MAX_EXPERTS)" : "");
            return false;
        }
    }
    return true;
}

// Each size in 1..limit, n_head a multiple of n_head_kv, head_dim even (RoPE rotates pairs).
static bool check_shape(const char * cmd, const struct preset * p) {
    const struct { const char * flag; int value, limit; } sizes[] = {
        {"--n-layer", p->n_layer, 1024},      {"--n-embd", p->n_embd, 65536}, {"--n-head", p->n_head, 1024},
        {"--n-head-kv", p->n_head_kv, 1024}, {"--head-dim", p->head_dim, 4096}, {"--n-ff", p->n_ff, 262144},
        {"--n-ctx", p->n_ctx, 1 << 24},
    };
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        if (sizes[i].value < 1 || sizes[i].value > sizes[i].limit) {
            fprintf(stderr, "mg %s: %s %d: must be in 1..%d\n", cmd, sizes[i].flag, sizes[i].value, sizes[i].limit);
            return false;
        }
    }
    if (p->n_head % p->n_head_kv != 0) {
        fprintf(stderr, "mg %s: --n-head %d is not a multiple of --n-head-kv %d\n", cmd, p->n_head, p->n_head_kv);
        return false;
    }
    if (p->arch != NULL && strcmp(p->arch, "llama") != 0 && strcmp(p->arch, "qwen2") != 0 &&
        strcmp(p->arch, "qwen3moe") != 0) {
        fprintf(stderr, "mg %s: --arch '%s': not an architecture mkmodel writes (llama, qwen2, qwen3, qwen3moe)\n",
                cmd, mg_quote(p->arch));
        return false;
    }
    if (p->n_expert > 0 && !check_experts(cmd, p)) return false;
    if (p->arch != NULL && strcmp(p->arch, "qwen2") == 0 && p->head_dim * p->n_head != p->n_embd) {
        // llama.cpp's qwen2 loader makes attn_q and attn_output n_embd x n_embd
        fprintf(stderr, "mg %s: qwen2 needs --head-dim x --n-head = --n-embd (%d x %d != %d)\n", cmd, p->head_dim,
                p->n_head, p->n_embd);
        return false;
    }
    if (p->head_dim % 2 != 0) {
        fprintf(stderr, "mg %s: --head-dim %d: must be even (RoPE rotates pairs)\n", cmd, p->head_dim);
        return false;
    }
    // Three of the pre-tokenizers vocab.c runs (pre_names[]), all for a byte-level BPE vocabulary.
    if (p->pre != NULL && strcmp(p->pre, "gpt-2") != 0 && strcmp(p->pre, "qwen2") != 0 &&
        strcmp(p->pre, "llama-bpe") != 0 && strcmp(p->pre, "smollm") != 0) {
        fprintf(stderr, "mg %s: --pre '%s': not a pre-tokenizer mkmodel writes (gpt-2, qwen2, llama-bpe, smollm)\n",
                cmd, mg_quote(p->pre));
        return false;
    }
    if (strcmp(p->rng, "box-muller") != 0 && strcmp(p->rng, "sum4") != 0) {
        fprintf(stderr, "mg %s: --rng '%s': not a generator (box-muller, sum4)\n", cmd, mg_quote(p->rng));
        return false;
    }
    if (strcmp(p->init, "flat") != 0 && strcmp(p->init, "scaled") != 0) {
        fprintf(stderr, "mg %s: --init '%s': not a weight scale (flat, scaled)\n", cmd, mg_quote(p->init));
        return false;
    }
    return true;
}

// The file just written, read back by the engine's own loader, must load and
// turn plain text into tokens and back: a tokenizer.json the writer took but
// the loader refuses (a merge without a space) or that cannot spell text
// (no byte tokens) gives a model nothing can use. False after saying why.
static bool loads_and_tokenizes(const char * cmd, const char * path, const char * out) {
    struct mg_model * m = mg_model_load(path);
    if (m == NULL) {
        fprintf(stderr, "mg %s: the model written for %s does not load: %s\n", cmd, mg_quote(out), cli_last_error());
        return false;
    }
    static const char text[] = "Hello, world: 42 times.";
    int32_t       ids[64];
    const int32_t n  = mg_tokenize(m->vocab, text, (int32_t) strlen(text), ids, 64, false, false);
    char          back[256];
    int32_t       len = 0;
    for (int32_t i = 0; i < n && len < (int32_t) sizeof(back) - 64; i++) {
        const int32_t k = mg_token_to_piece(m->vocab, ids[i], back + len, (int32_t) sizeof(back) - len, false);
        len += k > 0 ? k : 0;
    }
    const bool ok = n > 0 && len == (int32_t) strlen(text) && memcmp(back, text, (size_t) len) == 0;
    if (!ok && n == INT32_MIN) {
        fprintf(stderr, "mg %s: the vocabulary written for %s cannot spell plain text ('%s'): %s\n", cmd, mg_quote(out),
                text, cli_last_error());
    } else if (!ok) {
        back[len] = '\0';   // the pieces of a hostile tokenizer.json may hold control bytes: quoted
        fprintf(stderr, "mg %s: the vocabulary written for %s cannot spell plain text ('%s' gives %d tokens that read "
                        "back as '%s'); is it a byte-level BPE tokenizer.json?\n", cmd, mg_quote(out), text, n,
                mg_quote(back));
    }
    mg_model_free(m);
    return ok;
}

// Written beside OUT, checked by loading it, then renamed into place (outfile.h).
static bool write_checked(const char * cmd, struct mg_gguf_writer * w, const char * target) {
    struct mg_outfile out;
    FILE * f = mg_outfile_open(&out, target);
    bool   ok = f != NULL && mg_gguf_writer_write_stream(w, f, target);
    if (f != NULL && ok && fflush(f) != 0) {
        mg_set_error("%s: write failed", target);
        ok = false;
    }
    if (!ok) {
        fprintf(stderr, "mg %s: %s\n", cmd, cli_last_error());
        mg_outfile_abort(&out);
        return false;
    }
    if (!loads_and_tokenizes(cmd, out.tmp, target)) {
        mg_outfile_abort(&out);
        return false;
    }
    if (!mg_outfile_commit(&out)) {
        fprintf(stderr, "mg %s: %s\n", cmd, cli_last_error());
        return false;
    }
    return true;
}

// The weights are all held in memory until the file is written, and the
// file is as large: both are checked before a weight is drawn (--n-embd
// 65536 --n-ff 65536 --n-layer 1024 asked for 50 TB and ran until killed).
// A counting pass of add_tensors gives the bytes. False after saying why
// (count_only stays set then, so the caller prints nothing more).
static bool fits(const char * cmd, struct model_writer * mw, const struct preset * p, int64_t n_vocab,
                 const char * target) {
    mw->count_only = true;
    add_tensors(mw, p, n_vocab);
    const uint64_t bytes = mw->n_bytes;
    const char *   what;
    const uint64_t limit = mg_memory_limit(&what);
    if (bytes > limit) {
        fprintf(stderr, "mg %s: the weights of this shape are %llu bytes (%.1f GiB), more than %s, %llu bytes "
                        "(%.1f GiB): give smaller --n-layer, --n-embd, --n-ff, or a smaller --type\n", cmd,
                (unsigned long long) bytes, (double) bytes / (1u << 30), what, (unsigned long long) limit,
                (double) limit / (1u << 30));
        return false;
    }
    if (!mg_outfile_room("--output", target, bytes)) {
        fprintf(stderr, "mg %s: %s\n", cmd, cli_last_error());
        return false;
    }
    mw->count_only = false;
    return true;
}

int cmd_mkmodel(int argc, char ** argv) {
    const char * cmd = "mkmodel";
    const char * preset_name = NULL, * type_name = "f32", * out = NULL, * vocab_dir = MG_DATA_DIR "/minimind";
    uint64_t seed = 1;
    struct preset flags = {"flags", UNSET, UNSET, UNSET, UNSET, UNSET, UNSET, UNSET, false, NULL, NULL, NULL, NULL,
                           0.0f, 0.0f, 0, UNSET, UNSET, UNSET};
    const struct cli_option opts[] = {
        {NULL, "--preset", CLI_STRING, &preset_name, "tiny, tiny2, minimind, qwen3-0.6b, tiny-llama, tiny-qwen2, "
                                                     "llama3.2-1b, smollm2-135m, qwen2.5-0.5b, tiny-qwen3moe, "
                                                     "qwen3-30b-a3b"},
        {NULL, "--arch", CLI_STRING, &flags.arch, "llama, qwen2, qwen3 or qwen3moe (default: the preset's, else qwen3)"},
        {NULL, "--n-layer", CLI_INT, &flags.n_layer, "layers"},
        {NULL, "--n-embd", CLI_INT, &flags.n_embd, "embedding width"},
        {NULL, "--n-head", CLI_INT, &flags.n_head, "query heads"},
        {NULL, "--n-head-kv", CLI_INT, &flags.n_head_kv, "key/value heads"},
        {NULL, "--head-dim", CLI_INT, &flags.head_dim, "width of one head"},
        {NULL, "--n-ff", CLI_INT, &flags.n_ff, "feed-forward width"},
        {NULL, "--n-ctx", CLI_INT, &flags.n_ctx, "context length written to the file"},
        {NULL, "--n-expert", CLI_INT, &flags.n_expert, "qwen3moe: experts per layer"},
        {NULL, "--n-expert-used", CLI_INT, &flags.n_expert_used, "qwen3moe: experts each token goes through"},
        {NULL, "--n-ff-exp", CLI_INT, &flags.n_ff_exp, "qwen3moe: one expert's width (default n_ff / n_expert_used)"},
        {NULL, "--type", CLI_STRING, &type_name, "type of the matrices (default f32)"},
        {"-s", "--seed", CLI_U64, &seed, "random seed (default 1)"},
        {"-o", "--output", CLI_OUT_FILE, &out, "the GGUF file to write"},
        {NULL, "--vocab", CLI_IN_DIR, &vocab_dir, "directory with tokenizer.json (and tokenizer_config.json)"},
        {NULL, "--untied", CLI_FLAG, &flags.untied, "an output.weight of its own (default: tied to token_embd)"},
        {NULL, "--pre", CLI_STRING, &flags.pre, "tokenizer.ggml.pre: gpt-2, qwen2, llama-bpe or smollm (default: tokenizer.json's)"},
        {NULL, "--rng", CLI_STRING, &flags.rng, "box-muller (default) or sum4 (the same bytes on every machine)"},
        {NULL, "--init", CLI_STRING, &flags.init, "weight sizes: flat (default, 0.02) or scaled (1/sqrt(fan-in))"},
    };
    const char * positional[1];
    int n_positional;
    if (!cli_parse(argc, argv, usage, opts, (int) (sizeof(opts) / sizeof(opts[0])), positional, 0, &n_positional)) {
        return 1;
    }
    struct preset shape;
    if (!choose_shape(cmd, preset_name, &flags, &shape) || !check_shape(cmd, &shape)) return 1;
    const struct preset * p = &shape;
    enum mg_type type;
    if (out == NULL) {
        fprintf(stderr, "mg %s: give -o OUT.gguf\n", cmd);
        return 1;
    }
    if (!cli_parse_type(type_name, &type) || mg_get_type_traits_cpu(type) == NULL) {
        fprintf(stderr, "mg %s: '%s' is not a weight type this engine can write and run\n", cmd, mg_quote(type_name));
        return 1;
    }
    const char * target = out;   // checked by cli_parse (not --vocab's files); a symlink's target
    struct mg_hf_vocab * vocab = mg_hf_vocab_load(vocab_dir);
    if (vocab == NULL) {
        fprintf(stderr, "mg %s: %s\n", cmd, cli_last_error());
        return 1;
    }
    struct model_writer mw = {.w      = mg_gguf_writer_new(),
                              .rng    = {seed * 0x9E3779B97F4A7C15ull + 1, strcmp(p->rng, "sum4") == 0},
                              .type   = type,
                              .scaled = strcmp(p->init, "scaled") == 0};
    mw.buffers = calloc((size_t) (16 + 14 * p->n_layer), sizeof(void *));
    bool ok = mw.buffers != NULL && fits(cmd, &mw, p, vocab->n_tokens, target);
    ok = ok && add_hparams(mw.w, p, type) && mg_hf_vocab_add_to_gguf(vocab, mw.w, p->pre) &&
         add_tensors(&mw, p, vocab->n_tokens);
    if (!ok && !mw.count_only) fprintf(stderr, "mg %s: %s\n", cmd, cli_last_error());
    ok = ok && write_checked(cmd, mw.w, target);
    if (ok) {
        printf("wrote %s: %s, preset %s, %s matrices, %lld tensors, %lld tokens, pre-tokenizer %s, %s, rng %s, init %s, "
               "seed %llu\n",
               out, arch_of(p), p->name, mg_type_name(type), (long long) mg_gguf_writer_n_tensors(mw.w),
               (long long) vocab->n_tokens, p->pre != NULL ? p->pre : vocab->pre, p->untied ? "untied" : "tied",
               p->rng, p->init, (unsigned long long) seed);
        if (vocab->normalizer[0] != '\0') {
            printf("note: tokenizer.json normalizes text (%s) and GGUF has no key for it; llama.cpp skips it%s\n",
                   vocab->normalizer,
                   strcmp(vocab->normalizer, "NFC") == 0 ? " (mg tokenize/run --normalize nfc applies it)" : "");
        }
    }
    for (int i = 0; i < mw.n_buffers; i++) free(mw.buffers[i]);
    free(mw.buffers);
    mg_gguf_writer_free(mw.w);
    mg_hf_vocab_free(vocab);
    return ok ? 0 : 1;
}
