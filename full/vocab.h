//@file 09
// vocab.h - the byte-level BPE tokenizer (llama.cpp's llm_tokenizer_bpe):
// text -> token ids and back, for GGUF files with tokenizer.ggml.model "gpt2"
// (Qwen3, MiniMind, GPT-2).
//
// Worked example with the MiniMind vocabulary of the test models:
//
//     struct mg_gguf  * g = mg_gguf_open("tiny-f32.gguf");
//     struct mg_vocab * v = mg_vocab_load(g);           // copies what it needs
//     mg_gguf_close(g);
//     int32_t ids[64];
//     int32_t n = mg_tokenize(v, "<|im_start|>user\n你好", -1, ids, 64, false, true);
//     // n = 5, ids = {1, 832, 311, 234, 1968}:
//     //   "<|im_start|>" (1) is a special token, cut out before anything else
//     //   (parse_special); "user", "\n" and "你好" are pre-tokenizer pieces;
//     //   BPE merges "user" into "us" + "er" (832, 311), "\n" is 234, and
//     //   the six bytes of "你好" end as the single token 1968.
//     char piece[16];
//     int32_t len = mg_token_to_piece(v, 1968, piece, sizeof(piece), false);   // 6 bytes: "你好"
//     mg_vocab_free(v);
//
// The way text becomes ids (mg_tokenize):
//   1. special tokens: their exact texts are cut out of the text first,
//      longest first (only USER_DEFINED ones unless parse_special);
//   2. each remaining stretch is decoded from UTF-8 and cut into pieces by
//      the pre-tokenizer that tokenizer.ggml.pre names (unicode.h);
//   3. each piece's bytes are spelled in GPT-2's byte alphabet and merged by
//      BPE: repeatedly join the adjacent pair with the best (lowest) merge rank;
//   4. each final symbol is looked up as a token.
// The ids agree with llama.cpp's llama_tokenize for the same GGUF and flags.
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct mg_gguf;
struct mg_vocab;

// tokenizer.ggml.token_type values (llama.h, enum llama_token_type).
enum mg_token_type {
    MG_TOKEN_TYPE_UNDEFINED    = 0,
    MG_TOKEN_TYPE_NORMAL       = 1,
    MG_TOKEN_TYPE_UNKNOWN      = 2,
    MG_TOKEN_TYPE_CONTROL      = 3,   // <|im_start|>: never produced from plain text
    MG_TOKEN_TYPE_USER_DEFINED = 4,   // <think>: always cut out of text, always printed
    MG_TOKEN_TYPE_UNUSED       = 5,
    MG_TOKEN_TYPE_BYTE         = 6,   // "<0x0A>": one raw byte
};

// A token's attributes, as bits (llama.h, enum llama_token_attr). A token can
// have more than one: llama.cpp adds CONTROL to end-of-turn tokens whose type
// says NORMAL.
enum mg_token_attr {
    MG_TOKEN_ATTR_UNDEFINED    = 0,
    MG_TOKEN_ATTR_UNKNOWN      = 1 << 0,
    MG_TOKEN_ATTR_UNUSED       = 1 << 1,
    MG_TOKEN_ATTR_NORMAL       = 1 << 2,
    MG_TOKEN_ATTR_CONTROL      = 1 << 3,
    MG_TOKEN_ATTR_USER_DEFINED = 1 << 4,
    MG_TOKEN_ATTR_BYTE         = 1 << 5,
};

// Tokens with a role. Each has a GGUF key "tokenizer.ggml.<key>_token_id".
enum mg_special_token {
    MG_SPECIAL_BOS,
    MG_SPECIAL_EOS,
    MG_SPECIAL_EOT,
    MG_SPECIAL_EOM,
    MG_SPECIAL_UNK,
    MG_SPECIAL_PAD,
    MG_SPECIAL_FIM_PRE,
    MG_SPECIAL_FIM_SUF,
    MG_SPECIAL_FIM_MID,
    MG_SPECIAL_FIM_PAD,
    MG_SPECIAL_FIM_REP,
    MG_SPECIAL_FIM_SEP,
    MG_SPECIAL_COUNT,
};

// ---------------------------------------------------------------------------
// Making a vocabulary
// ---------------------------------------------------------------------------

// From an opened GGUF (the tokenizer.* keys; docs/tokenizer.md section 1). The
// vocabulary keeps copies, so the file may be closed afterwards. NULL, with
// mg_last_error() naming the key and the problem, for bad or unsupported
// metadata (a tokenizer that is not "gpt2", an unknown pre-tokenizer, ...).
struct mg_vocab * mg_vocab_load(const struct mg_gguf * g);

// From arrays in memory (tests, models made by our own tools).
struct mg_vocab_params {
    int32_t              n_tokens;
    const char * const * tokens;         // token texts by id, in GPT-2's byte alphabet
    const uint32_t *     token_lens;     // byte lengths, or NULL if the texts are NUL-terminated
    const int32_t *      token_types;    // enum mg_token_type by id, or NULL: all NORMAL
    int32_t              n_merges;
    const char * const * merges;         // "left right"; the rank of a merge is its index
    const uint32_t *     merge_lens;     // or NULL: NUL-terminated
    const char *         pre;            // tokenizer.ggml.pre, or NULL when the file has none
    int32_t              special[MG_SPECIAL_COUNT];   // ids, -1 for none
    bool                 add_bos;        // mg_tokenize(add_special) prepends bos
    bool                 add_eos;        // ... and appends eos
    const char *         chat_template;  // or NULL
};

// No tokens, no merges, pre NULL, every special id -1, add_bos = add_eos = false.
struct mg_vocab_params mg_vocab_default_params(void);

struct mg_vocab * mg_vocab_new(const struct mg_vocab_params * params);
void              mg_vocab_free(struct mg_vocab * vocab);

// ---------------------------------------------------------------------------
// Questions
// ---------------------------------------------------------------------------

int32_t      mg_vocab_n_tokens(const struct mg_vocab * vocab);
int32_t      mg_vocab_n_merges(const struct mg_vocab * vocab);
const char * mg_vocab_pre(const struct mg_vocab * vocab);            // as in the file ("" if none)
const char * mg_vocab_chat_template(const struct mg_vocab * vocab);  // NULL if none

// A token's text as stored (byte alphabet for normal tokens), NUL-terminated;
// NULL for an id out of range.
const char * mg_vocab_token_text(const struct mg_vocab * vocab, int32_t token);
int32_t      mg_vocab_token_attr(const struct mg_vocab * vocab, int32_t token);   // enum mg_token_attr bits

// The exact token whose text is text[0..len), or -1.
int32_t mg_vocab_find(const struct mg_vocab * vocab, const char * text, size_t len);

int32_t mg_vocab_special(const struct mg_vocab * vocab, enum mg_special_token which);   // -1 if none
int32_t mg_vocab_bos(const struct mg_vocab * vocab);
int32_t mg_vocab_eos(const struct mg_vocab * vocab);
int32_t mg_vocab_eot(const struct mg_vocab * vocab);
bool    mg_vocab_add_bos(const struct mg_vocab * vocab);
bool    mg_vocab_add_eos(const struct mg_vocab * vocab);

// End of generation (docs/tokenizer.md section 2): eos, eot, eom, the FIM pad/rep/sep
// tokens, and every token whose text is on llama.cpp's list of end-of-turn
// texts ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", ...).
bool mg_vocab_is_eog(const struct mg_vocab * vocab, int32_t token);

// ---------------------------------------------------------------------------
// Text -> ids
// ---------------------------------------------------------------------------

// Tokenizes text[0..text_len) (text_len < 0: text is NUL-terminated) into
// tokens[0..n_max). Returns the number of tokens, or -(the number needed) if
// n_max is too small; then nothing useful was written (llama_tokenize's
// convention). add_special: add bos/eos where the vocabulary asks for it.
// parse_special: CONTROL token texts in the text become those tokens.
// Any bytes are accepted, decoded by llama.cpp's one rule (unicode.h,
// mg_utf8_decode): a byte that starts no complete sequence is U+FFFD (three
// byte tokens); an overlong form is what it spells ("\xC0\xAF" is '/') and a
// surrogate is itself (its three bytes), as llama.cpp tokenizes them.
// INT32_MIN, with mg_last_error() naming the byte, when the vocabulary has
// no token for a byte of the text (llama.cpp drops it and loses the byte).
int32_t mg_tokenize(const struct mg_vocab * vocab, const char * text, int32_t text_len, int32_t * tokens,
                    int32_t n_max, bool add_special, bool parse_special);
//@+ full tokenize-alloc
// The same into an array of exactly the ids' count (*n_tokens, may be 0;
// the caller frees it): a long text is tokenized once, and its ids are held
// once, not in a buffer sized by a guess beside the tokenizer's own. NULL
// after mg_set_error.
int32_t * mg_tokenize_alloc(const struct mg_vocab * vocab, const char * text, size_t len, bool add_special,
                            bool parse_special, int32_t * n_tokens);
//@- full tokenize-alloc

// ---------------------------------------------------------------------------
// Ids -> text
// ---------------------------------------------------------------------------

// The bytes of one token into buf (not NUL-terminated). Returns their number,
// or -(the number needed) if size is too small. special: CONTROL and UNKNOWN
// tokens give their text; otherwise they give nothing (USER_DEFINED tokens
// always give their text). A piece may be part of a UTF-8 character.
int32_t mg_token_to_piece(const struct mg_vocab * vocab, int32_t token, char * buf, int32_t size, bool special);

// Streaming detokenizer: holds back the bytes of a UTF-8 character that a
// token started and a later token finishes, so that what comes out is always
// whole characters (and can be printed as it comes).
//
//     struct mg_detok d;
//     mg_detok_init(&d, false);
//     for each generated id:  n = mg_detok_push(&d, vocab, id, out, sizeof(out)); fwrite(out, 1, n, stdout);
//     n = mg_detok_flush(&d, out, sizeof(out));   // the bytes of an unfinished character, if any
//
// The concatenation of everything pushed and flushed equals the concatenation
// of mg_token_to_piece over the same tokens.
struct mg_detok {
    bool    special;      // render CONTROL tokens (as mg_token_to_piece)
    int32_t n_pending;    // bytes of an unfinished character, held back
    char    pending[4];
};

void mg_detok_init(struct mg_detok * d, bool special);

// Appends token's bytes to what is held back and writes out every complete
// character. Returns the bytes written, or -(the number needed) if out_size is
// too small (then nothing changed; retry with a larger buffer).
int32_t mg_detok_push(struct mg_detok * d, const struct mg_vocab * vocab, int32_t token, char * out,
                      int32_t out_size);

// Writes out whatever is held back, finished or not. Same return convention.
int32_t mg_detok_flush(struct mg_detok * d, char * out, int32_t out_size);
