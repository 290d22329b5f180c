//@file full
// hf_tokenizer.h - a GGUF file's tokenizer metadata, made from a Hugging Face
// tokenizer the way llama.cpp's converter makes it (convert_hf_to_gguf.py:
// _set_vocab_gpt2, get_vocab_base; gguf-py: SpecialVocab).
//
//     struct mg_hf_vocab * v = mg_hf_vocab_load("data/minimind");
//     //   reads tokenizer.json and tokenizer_config.json: 6400 tokens, 6108 merges,
//     //   bos 1 "<|im_start|>", eos 2 "<|im_end|>", unk = pad = 0, the chat template
//     struct mg_gguf_writer * w = mg_gguf_writer_new();
//     mg_gguf_writer_set_str(w, "general.architecture", "qwen3");   // ... the model's keys
//     mg_hf_vocab_add_to_gguf(v, w, NULL);   // ... then these (v->pre: "gpt-2" from its regex)
//     mg_hf_vocab_free(v);
//
// Only byte-level BPE tokenizers (model type "BPE", GGUF model "gpt2": Qwen,
// MiniMind, GPT-2) are supported. Token types follow the converter: an added
// token that is marked special, or looks like a control token ("<|...|>"),
// is CONTROL; other added tokens are USER_DEFINED; the rest are NORMAL, and
// ids no token has become "[PAD<id>]" with type UNUSED.
//
// What the converter does not do and we do: eot is set to eos (the fixtures,
// made by the reference converter, carry tokenizer.ggml.eot_token_id = eos).
// What it does and we do not: re-encode non-normalized added tokens through
// the HF tokenizer, read the post_processor template for add_bos/add_eos, and
// write named chat templates (a chat_template given as a list).
#pragma once

#include "gguf_writer.h"

// llama.h, enum llama_token_type: the values of tokenizer.ggml.token_type.
enum mg_hf_token_type {
    MG_HF_TOKEN_UNDEFINED    = 0,
    MG_HF_TOKEN_NORMAL       = 1,
    MG_HF_TOKEN_UNKNOWN      = 2,
    MG_HF_TOKEN_CONTROL      = 3,
    MG_HF_TOKEN_USER_DEFINED = 4,
    MG_HF_TOKEN_UNUSED       = 5,
    MG_HF_TOKEN_BYTE         = 6,
};

// The special tokens a GGUF file can name, in the order the converter writes them.
enum mg_hf_special {
    MG_HF_SPECIAL_BOS,
    MG_HF_SPECIAL_EOS,
    MG_HF_SPECIAL_EOT,
    MG_HF_SPECIAL_UNK,
    MG_HF_SPECIAL_SEP,
    MG_HF_SPECIAL_PAD,
    MG_HF_SPECIAL_CLS,
    MG_HF_SPECIAL_MASK,
    MG_HF_SPECIAL_COUNT,
};

struct mg_hf_vocab {
    int64_t   n_tokens;
    char **   tokens;        // by id, NUL-terminated (token_lens has the length)
    size_t *  token_lens;
    int32_t * token_types;   // enum mg_hf_token_type, by id
    int64_t   n_merges;
    char **   merges;        // "A B", by rank, NUL-terminated
    size_t *  merge_lens;
    int64_t   special[MG_HF_SPECIAL_COUNT];   // token ids, -1 when absent
    int       add_bos;       // tokenizer_config.json's add_bos_token: 1, 0, or -1 when absent
    int       add_eos;
    int       add_sep;
    char *    chat_template; // NULL when there is none
    size_t    chat_template_len;
    const char * pre;        // tokenizer.ggml.pre for tokenizer.json's pre_tokenizer: "gpt-2" or "qwen2"
    char      normalizer[32];   // tokenizer.json's normalizer type ("NFC"), "" when none
};

// Read dir/tokenizer.json, and dir/tokenizer_config.json, dir/config.json and
// dir/chat_template.jinja when they exist. NULL, with mg_last_error() naming
// the file and what is wrong, on failure, and for a pre_tokenizer whose
// splitting vocab.c cannot reproduce (only GPT-2's and Qwen2's regexes).
struct mg_hf_vocab * mg_hf_vocab_load(const char * dir);
void                 mg_hf_vocab_free(struct mg_hf_vocab * v);

// Set tokenizer.ggml.* and tokenizer.chat_template in w, in the converter's
// order: model "gpt2", pre, tokens, token_type (i32), merges, the special ids,
// add_bos/add_eos/add_sep, chat_template. pre names the pre-tokenizer; NULL
// takes v->pre, which load chose by comparing tokenizer.json's regex with the
// GPT-2 and Qwen2 ones (llama.cpp's converter hashes the HF tokenizer's
// output on a probe text instead, which needs the HF library).
bool mg_hf_vocab_add_to_gguf(const struct mg_hf_vocab * v, struct mg_gguf_writer * w, const char * pre);
