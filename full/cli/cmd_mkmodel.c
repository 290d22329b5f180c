//@file full
// cmd_mkmodel.c - mg mkmodel: a Qwen3-shaped GGUF with random weights and a
// real vocabulary (MiniMind's by default, or any byte-level BPE tokenizer.json
// folder: hf_tokenizer.c), written by our own GGUF writer. For tests and
// benchmarks: speed depends on the shapes and types, not on the values.
#include "cli.h"
#include "gguf_writer.h"
#include "hf_tokenizer.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef MG_DATA_DIR
#define MG_DATA_DIR "data"
#endif

static const char * usage =
    "usage: mg mkmodel [--preset NAME] [--n-layer N --n-embd N ...] [--type TYPE] [--seed N] [--vocab DIR]\n"
    "                  -o OUT.gguf\n"
    "\n"
    "Presets (tied embeddings, rope base 1e6, RMS eps 1e-6; the vocabulary comes from --vocab):\n"
    "  tiny        2 layers, n_embd 256, 4 heads / 2 KV heads of 64, n_ff 768, context 512 (the test fixtures')\n"
    "  minimind    8 layers, n_embd 768, 8 heads / 4 KV heads of 96, n_ff 2432, context 32768 (MiniMind-3)\n"
    "  qwen3-0.6b  28 layers, n_embd 1024, 16 heads / 8 KV heads of 128, n_ff 3072, context 40960 (Qwen3-0.6B)\n"
    "The shape flags override the preset's values; without --preset, --n-layer, --n-embd, --n-head and --n-ff\n"
    "are needed (--n-head-kv defaults to --n-head, --head-dim to n_embd / n_head, --n-ctx to 4096).\n"
    "Weights are N(0, 0.02^2) from the seed (norms are 1). TYPE is the type of every matrix (f32, f16, bf16,\n"
    "q8_0, q4_0, q4_k, q6_k, ...); a matrix whose rows do not split into TYPE's blocks falls back to q8_0 (f16\n"
    "when they do not split into 32s either). The vocabulary is read from DIR/tokenizer.json (and\n"
    "tokenizer_config.json, config.json when present; default: the project's data/minimind): the embedding\n"
    "has one row per token, added tokens included, and the pre-tokenizer follows tokenizer.json's regex.";

struct preset {
    const char * name;
    int n_layer, n_embd, n_head, n_head_kv, head_dim, n_ff, n_ctx;
};

static const struct preset presets[] = {
    {"tiny",       2,  256,  4,  2, 64,  768,  512},
    {"minimind",   8,  768,  8,  4, 96,  2432, 32768},
    {"qwen3-0.6b", 28, 1024, 16, 8, 128, 3072, 40960},   // Qwen3-0.6B's config.json
};

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

// Deterministic normal numbers: xorshift64* and Box-Muller.
struct rng {
    uint64_t state;
};

static double rng_uniform(struct rng * r) {
    r->state ^= r->state >> 12;
    r->state ^= r->state << 25;
    r->state ^= r->state >> 27;
    return ((double) ((r->state * 0x2545F4914F6CDD1Dull) >> 11) + 0.5) / 9007199254740992.0;
}

static float rng_normal(struct rng * r, float std) {
    const double u1 = rng_uniform(r), u2 = rng_uniform(r);
    return (float) (sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2)) * std;
}

struct model_writer {
    struct mg_gguf_writer * w;
    struct rng              rng;
    enum mg_type            type;
    void **                 buffers;   // tensor data, kept until the file is written
    int                     n_buffers;
};

// A {ne0, ne1} matrix of random weights, in the requested type when its rows split into blocks.
static bool add_matrix(struct model_writer * mw, const char * name, int64_t ne0, int64_t ne1) {
    enum mg_type type = mw->type;
    if (ne0 % mg_blck_size(type) != 0) type = MG_TYPE_Q8_0;
    if (ne0 % mg_blck_size(type) != 0) type = MG_TYPE_F16;
    const struct mg_type_traits * tt = mg_get_type_traits(type);
    const size_t row_size = mg_row_size(type, ne0);
    char *  data = malloc(row_size * (size_t) ne1);
    float * row  = malloc((size_t) ne0 * sizeof(float));
    if (data == NULL || row == NULL) {
        fprintf(stderr, "mg mkmodel: out of memory for %s\n", name);
        return false;
    }
    for (int64_t r = 0; r < ne1; r++) {
        for (int64_t i = 0; i < ne0; i++) row[i] = rng_normal(&mw->rng, 0.02f);
        if (type == MG_TYPE_F32) {
            memcpy(data + (size_t) r * row_size, row, row_size);
        } else {
            tt->from_float(row, data + (size_t) r * row_size, ne0);
        }
    }
    free(row);
    mw->buffers[mw->n_buffers++] = data;
    const int64_t ne[2] = {ne0, ne1};
    return mg_gguf_writer_add_tensor(mw->w, name, type, 2, ne, data);
}

static bool add_norm(struct model_writer * mw, const char * name, int64_t n) {
    float * data = malloc((size_t) n * sizeof(float));
    for (int64_t i = 0; i < n; i++) data[i] = 1.0f;
    mw->buffers[mw->n_buffers++] = data;
    return mg_gguf_writer_add_tensor(mw->w, name, MG_TYPE_F32, 1, &n, data);
}

static bool add_hparams(struct mg_gguf_writer * w, const struct preset * p, enum mg_type type) {
    char name[64];
    snprintf(name, sizeof(name), "mg-%s-%s", p->name, mg_type_name(type));
    bool ok = mg_gguf_writer_set_str(w, "general.architecture", "qwen3") && mg_gguf_writer_set_str(w, "general.name", name);
    ok = ok && mg_gguf_writer_set_u32(w, "qwen3.block_count", (uint32_t) p->n_layer);
    ok = ok && mg_gguf_writer_set_u32(w, "qwen3.context_length", (uint32_t) p->n_ctx);
    ok = ok && mg_gguf_writer_set_u32(w, "qwen3.embedding_length", (uint32_t) p->n_embd);
    ok = ok && mg_gguf_writer_set_u32(w, "qwen3.feed_forward_length", (uint32_t) p->n_ff);
    ok = ok && mg_gguf_writer_set_u32(w, "qwen3.attention.head_count", (uint32_t) p->n_head);
    ok = ok && mg_gguf_writer_set_u32(w, "qwen3.attention.head_count_kv", (uint32_t) p->n_head_kv);
    ok = ok && mg_gguf_writer_set_u32(w, "qwen3.attention.key_length", (uint32_t) p->head_dim);
    ok = ok && mg_gguf_writer_set_u32(w, "qwen3.attention.value_length", (uint32_t) p->head_dim);
    ok = ok && mg_gguf_writer_set_f32(w, "qwen3.rope.freq_base", 1e6f);
    ok = ok && mg_gguf_writer_set_f32(w, "qwen3.attention.layer_norm_rms_epsilon", 1e-6f);
    ok = ok && mg_gguf_writer_set_u32(w, "general.file_type", file_type_of(type));
    if (mg_get_type_traits(type)->is_quantized) ok = ok && mg_gguf_writer_set_u32(w, "general.quantization_version", 2);
    return ok;
}

// "blk.<il>.<what>.weight" into buf.
static const char * layer_tensor(char * buf, size_t size, int il, const char * what) {
    snprintf(buf, size, "blk.%d.%s.weight", il, what);
    return buf;
}

static bool add_tensors(struct model_writer * mw, const struct preset * p, int64_t n_vocab) {
    const int64_t E = p->n_embd, F = p->n_ff, D = p->head_dim, H = p->n_head, Hkv = p->n_head_kv;
    bool ok = add_matrix(mw, "token_embd.weight", E, n_vocab);   // also the output matrix (tied)
    char n[MG_MAX_NAME];
    for (int il = 0; ok && il < p->n_layer; il++) {
        ok = ok && add_norm(mw, layer_tensor(n, sizeof(n), il, "attn_norm"), E);
        ok = ok && add_matrix(mw, layer_tensor(n, sizeof(n), il, "attn_q"), E, D * H);
        ok = ok && add_matrix(mw, layer_tensor(n, sizeof(n), il, "attn_k"), E, D * Hkv);
        ok = ok && add_matrix(mw, layer_tensor(n, sizeof(n), il, "attn_v"), E, D * Hkv);
        ok = ok && add_matrix(mw, layer_tensor(n, sizeof(n), il, "attn_output"), D * H, E);
        ok = ok && add_norm(mw, layer_tensor(n, sizeof(n), il, "attn_q_norm"), D);
        ok = ok && add_norm(mw, layer_tensor(n, sizeof(n), il, "attn_k_norm"), D);
        ok = ok && add_norm(mw, layer_tensor(n, sizeof(n), il, "ffn_norm"), E);
        ok = ok && add_matrix(mw, layer_tensor(n, sizeof(n), il, "ffn_gate"), E, F);
        ok = ok && add_matrix(mw, layer_tensor(n, sizeof(n), il, "ffn_up"), E, F);
        ok = ok && add_matrix(mw, layer_tensor(n, sizeof(n), il, "ffn_down"), F, E);
    }
    return ok && add_norm(mw, "output_norm.weight", E);
}

#define UNSET INT_MIN   // a shape flag not given

// The shape: the preset's, each field a flag gave replaced; without a
// preset the four main flags are required. False after printing why.
static bool choose_shape(const char * cmd, const char * preset_name, const struct preset * flags,
                         struct preset * shape) {
    static const struct preset none = {"custom", UNSET, UNSET, UNSET, UNSET, UNSET, UNSET, 4096};
    const struct preset * base = preset_name ? NULL : &none;
    for (size_t i = 0; preset_name && i < sizeof(presets) / sizeof(presets[0]); i++) {
        if (strcmp(preset_name, presets[i].name) == 0) base = &presets[i];
    }
    if (base == NULL) {
        fprintf(stderr, "mg %s: --preset '%s': not a preset (tiny, minimind, qwen3-0.6b)\n", cmd, preset_name);
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
#undef TAKE_FLAG
    if (preset_name == NULL &&
        (shape->n_layer == UNSET || shape->n_embd == UNSET || shape->n_head == UNSET || shape->n_ff == UNSET)) {
        fprintf(stderr, "mg %s: give --preset tiny|minimind|qwen3-0.6b, or --n-layer, --n-embd, --n-head and "
                        "--n-ff\n", cmd);
        return false;
    }
    if (shape->n_head_kv == UNSET) shape->n_head_kv = shape->n_head;
    if (shape->head_dim == UNSET && shape->n_head > 0) shape->head_dim = shape->n_embd / shape->n_head;
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
    if (p->head_dim % 2 != 0) {
        fprintf(stderr, "mg %s: --head-dim %d: must be even (RoPE rotates pairs)\n", cmd, p->head_dim);
        return false;
    }
    return true;
}

int cmd_mkmodel(int argc, char ** argv) {
    const char * cmd = "mkmodel";
    const char * preset_name = NULL, * type_name = "f32", * out = NULL, * vocab_dir = MG_DATA_DIR "/minimind";
    uint64_t seed = 1;
    struct preset flags = {"flags", UNSET, UNSET, UNSET, UNSET, UNSET, UNSET, UNSET};
    const struct cli_option opts[] = {
        {NULL, "--preset", CLI_STRING, &preset_name, "tiny, minimind or qwen3-0.6b"},
        {NULL, "--n-layer", CLI_INT, &flags.n_layer, "layers"},
        {NULL, "--n-embd", CLI_INT, &flags.n_embd, "embedding width"},
        {NULL, "--n-head", CLI_INT, &flags.n_head, "query heads"},
        {NULL, "--n-head-kv", CLI_INT, &flags.n_head_kv, "key/value heads"},
        {NULL, "--head-dim", CLI_INT, &flags.head_dim, "width of one head"},
        {NULL, "--n-ff", CLI_INT, &flags.n_ff, "feed-forward width"},
        {NULL, "--n-ctx", CLI_INT, &flags.n_ctx, "context length written to the file"},
        {NULL, "--type", CLI_STRING, &type_name, "type of the matrices (default f32)"},
        {"-s", "--seed", CLI_U64, &seed, "random seed (default 1)"},
        {"-o", "--output", CLI_STRING, &out, "the GGUF file to write"},
        {NULL, "--vocab", CLI_STRING, &vocab_dir, "directory with tokenizer.json (and tokenizer_config.json)"},
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
        fprintf(stderr, "mg %s: '%s' is not a weight type this engine can write and run\n", cmd, type_name);
        return 1;
    }
    char * target = cli_output_path(cmd, out, NULL);   // before any work; a symlink is written through
    if (target == NULL) return 1;
    struct mg_hf_vocab * vocab = mg_hf_vocab_load(vocab_dir);
    if (vocab == NULL) {
        fprintf(stderr, "mg %s: %s\n", cmd, mg_last_error());
        free(target);
        return 1;
    }
    struct model_writer mw = {.w = mg_gguf_writer_new(), .rng = {seed * 0x9E3779B97F4A7C15ull + 1}, .type = type};
    mw.buffers = calloc((size_t) (16 + 11 * p->n_layer), sizeof(void *));
    bool ok = add_hparams(mw.w, p, type) && mg_hf_vocab_add_to_gguf(vocab, mw.w, NULL) &&
              add_tensors(&mw, p, vocab->n_tokens) && mg_gguf_writer_write(mw.w, target);
    if (!ok) {
        fprintf(stderr, "mg %s: %s\n", cmd, mg_last_error());
    } else {
        printf("wrote %s: preset %s, %s matrices, %lld tensors, %lld tokens, pre-tokenizer %s, seed %llu\n", out,
               p->name, mg_type_name(type), (long long) mg_gguf_writer_n_tensors(mw.w), (long long) vocab->n_tokens,
               vocab->pre, (unsigned long long) seed);
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
    free(target);
    return ok ? 0 : 1;
}
