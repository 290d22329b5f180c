// make_seeds.c - the seed corpus of the GGUF harness, written by our own GGUF
// writer: small but complete Qwen3 files (a byte-level vocabulary of 256
// bytes + 3 merges + 3 special tokens, one layer, n_embd 32) in several
// tensor types, tied and untied, and a vocabulary-only file. Each reaches the
// tensor table and the tensor data, so mutations start from files that load.
//
//     make_seeds OUT_DIR
#include "gguf_writer.h"
#include "tensor.h"
#include "unicode.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { E = 32, H = 2, HKV = 1, D = 16, F = 64, N_SPECIAL = 3, N_VOCAB = 256 + 3 + N_SPECIAL };

static int utf8(uint32_t cp, char * out) {
    if (cp < 0x80) { out[0] = (char) cp; return 1; }
    out[0] = (char) (0xC0 | cp >> 6);
    out[1] = (char) (0x80 | (cp & 0x3F));
    return 2;   // the byte alphabet stays below U+0800
}

static bool add_vocab(struct mg_gguf_writer * w) {
    static char texts[N_VOCAB][16];
    const char * tokens[N_VOCAB];
    int32_t types[N_VOCAB];
    for (int b = 0; b < 256; b++) {
        texts[b][utf8(mg_unicode_byte_to_cpt((uint8_t) b), texts[b])] = '\0';
        types[b] = 1;
    }
    static const char * const merged[] = {"he", "ll", "Ġh"};
    static const char * const merges[] = {"h e", "l l", "Ġ h"};
    static const char * const special[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
    for (int i = 0; i < 3; i++) {
        snprintf(texts[256 + i], sizeof(texts[0]), "%s", merged[i]);
        types[256 + i] = 1;
        snprintf(texts[259 + i], sizeof(texts[0]), "%s", special[i]);
        types[259 + i] = 3;
    }
    for (int i = 0; i < N_VOCAB; i++) tokens[i] = texts[i];
    return mg_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2") &&
           mg_gguf_writer_set_str(w, "tokenizer.ggml.pre", "qwen2") &&
           mg_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", tokens, NULL, N_VOCAB) &&
           mg_gguf_writer_set_arr_data(w, "tokenizer.ggml.token_type", MG_GGUF_TYPE_INT32, types, N_VOCAB) &&
           mg_gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", merges, NULL, 3) &&
           mg_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 259) &&
           mg_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 261) &&
           mg_gguf_writer_set_u32(w, "tokenizer.ggml.padding_token_id", 259) &&
           mg_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", false) &&
           mg_gguf_writer_set_str(w, "tokenizer.chat_template", "{{ '<|im_start|>' }}");
}

static bool add_hparams(struct mg_gguf_writer * w) {
    return mg_gguf_writer_set_str(w, "general.architecture", "qwen3") &&
           mg_gguf_writer_set_str(w, "general.name", "fuzz seed") &&
           mg_gguf_writer_set_u32(w, "qwen3.block_count", 1) &&
           mg_gguf_writer_set_u32(w, "qwen3.context_length", 64) &&
           mg_gguf_writer_set_u32(w, "qwen3.embedding_length", E) &&
           mg_gguf_writer_set_u32(w, "qwen3.feed_forward_length", F) &&
           mg_gguf_writer_set_u32(w, "qwen3.attention.head_count", H) &&
           mg_gguf_writer_set_u32(w, "qwen3.attention.head_count_kv", HKV) &&
           mg_gguf_writer_set_u32(w, "qwen3.attention.key_length", D) &&
           mg_gguf_writer_set_u32(w, "qwen3.attention.value_length", D) &&
           mg_gguf_writer_set_f32(w, "qwen3.attention.layer_norm_rms_epsilon", 1e-6f) &&
           mg_gguf_writer_set_f32(w, "qwen3.rope.freq_base", 1e6f);
}

// Tensor data lives until the writer has written the file.
static void * datas[64];
static int n_datas;

static bool add(struct mg_gguf_writer * w, const char * name, enum mg_type type, int64_t ne0, int64_t ne1) {
    const int64_t n = ne0 * (ne1 > 0 ? ne1 : 1);
    float * x = malloc((size_t) n * sizeof(float));
    for (int64_t i = 0; i < n; i++) x[i] = ne1 > 0 ? 0.05f * sinf((float) i * 0.37f) : 1.0f;
    const struct mg_type_traits * t = mg_get_type_traits(type);
    void * y = malloc((size_t) (n / t->blck_size) * t->type_size);
    if (type == MG_TYPE_F32) memcpy(y, x, (size_t) n * sizeof(float));
    else t->from_float(x, y, n);
    free(x);
    datas[n_datas++] = y;
    const int64_t ne[2] = {ne0, ne1};
    return mg_gguf_writer_add_tensor(w, name, type, ne1 > 0 ? 2 : 1, ne, y);
}

static bool add_tensors(struct mg_gguf_writer * w, enum mg_type type, bool tied) {
    return add(w, "token_embd.weight", type, E, N_VOCAB) && add(w, "output_norm.weight", MG_TYPE_F32, E, 0) &&
           (tied || add(w, "output.weight", type, E, N_VOCAB)) &&
           add(w, "blk.0.attn_norm.weight", MG_TYPE_F32, E, 0) && add(w, "blk.0.attn_q.weight", type, E, D * H) &&
           add(w, "blk.0.attn_k.weight", type, E, D * HKV) && add(w, "blk.0.attn_v.weight", type, E, D * HKV) &&
           add(w, "blk.0.attn_output.weight", type, D * H, E) &&
           add(w, "blk.0.attn_q_norm.weight", MG_TYPE_F32, D, 0) &&
           add(w, "blk.0.attn_k_norm.weight", MG_TYPE_F32, D, 0) &&
           add(w, "blk.0.ffn_norm.weight", MG_TYPE_F32, E, 0) && add(w, "blk.0.ffn_gate.weight", type, E, F) &&
           add(w, "blk.0.ffn_up.weight", type, E, F) && add(w, "blk.0.ffn_down.weight", type, F, E);
}

static bool write_seed(const char * dir, const char * name, enum mg_type type, bool tied, bool vocab_only) {
    struct mg_gguf_writer * w = mg_gguf_writer_new();
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s.gguf", dir, name);
    bool ok = add_hparams(w) && add_vocab(w) && (vocab_only || add_tensors(w, type, tied)) &&
              mg_gguf_writer_write(w, path);
    if (!ok) fprintf(stderr, "make_seeds: %s: %s\n", path, mg_last_error());
    mg_gguf_writer_free(w);
    while (n_datas > 0) free(datas[--n_datas]);
    return ok;
}

int main(int argc, char ** argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: make_seeds OUT_DIR\n");
        return 1;
    }
    const struct { const char * name; enum mg_type type; bool tied, vocab_only; } seeds[] = {
        {"qwen3-f32-tied", MG_TYPE_F32, true, false},   {"qwen3-f32", MG_TYPE_F32, false, false},
        {"qwen3-f16", MG_TYPE_F16, true, false},        {"qwen3-bf16", MG_TYPE_BF16, true, false},
        {"qwen3-q8_0", MG_TYPE_Q8_0, true, false},      {"qwen3-q4_0", MG_TYPE_Q4_0, false, false},
        {"qwen3-q4_1", MG_TYPE_Q4_1, true, false},      {"qwen3-q5_0", MG_TYPE_Q5_0, true, false},
        {"qwen3-iq4_nl", MG_TYPE_IQ4_NL, true, false},  {"vocab-only", MG_TYPE_F32, true, true},
    };
    for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) {
        if (!write_seed(argv[1], seeds[i].name, seeds[i].type, seeds[i].tied, seeds[i].vocab_only)) return 1;
    }
    printf("make_seeds: %zu files in %s\n", sizeof(seeds) / sizeof(seeds[0]), argv[1]);
    return 0;
}
