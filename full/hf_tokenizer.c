//@file full
// hf_tokenizer.c - tokenizer.json + tokenizer_config.json -> tokenizer.ggml.*
//
// Follows llama.cpp's converter step by step: get_vocab_base builds the token
// list and types, SpecialVocab reads the merges from tokenizer.json and the
// special tokens, add_*_token flags and chat template from tokenizer_config.json,
// and _set_vocab_gpt2 writes them in that order.
#define _POSIX_C_SOURCE 200809L   // stat
#include "hf_tokenizer.h"
#include "json.h"
#include "mmap.h"   // mg_open_regular

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static char * copy_bytes(const char * s, size_t n) {
    char * c = malloc(n + 1);
    MG_ASSERT(c != NULL);
    memcpy(c, s, n);
    c[n] = '\0';
    return c;
}

static char * join_path(const char * dir, const char * file) {
    size_t n = strlen(dir) + 1 + strlen(file) + 1;
    char * path = malloc(n);
    MG_ASSERT(path != NULL);
    snprintf(path, n, "%s/%s", dir, file);
    return path;
}

// Whether path names something (a file, a FIFO, ...): the optional files
// are read when they exist, and checked by the reader (mg_open_regular), so
// a FIFO is an error, never an open that waits for a writer.
static bool exists(const char * path) {
    struct stat st;
    return stat(path, &st) == 0;
}

// The whole file, NUL-terminated; NULL after mg_set_error if it is not a
// regular file of at most 16 MiB (a chat template is a few KB).
static char * read_whole_file(const char * path, size_t * len) {
    uint64_t size;
    FILE *   f = mg_open_regular(path, 16u << 20, &size);
    if (f == NULL) return NULL;
    char * text = malloc((size_t) size + 1);
    const size_t n = text != NULL ? fread(text, 1, (size_t) size, f) : 0;
    const bool ok = text != NULL && n == size && !ferror(f);
    fclose(f);
    if (!ok) {
        mg_set_error("%s: cannot read its %llu bytes", path, (unsigned long long) size);
        free(text);
        return NULL;
    }
    text[n] = '\0';
    *len = n;
    return text;
}

// An optional JSON file: *doc is NULL when it does not exist; false when it
// exists but is not valid JSON.
static bool parse_optional(const char * dir, const char * file, struct mg_json ** doc) {
    char * path = join_path(dir, file);
    const bool there = exists(path);
    *doc = there ? mg_json_parse_file(path) : NULL;
    const bool ok = !there || *doc != NULL;
    free(path);
    return ok;
}

// ---------------------------------------------------------------------------
// Tokens and their types (convert_hf_to_gguf.py: get_vocab_base)
// ---------------------------------------------------------------------------

static bool has_prefix(const char * s, size_t len, const char * prefix) {
    size_t n = strlen(prefix);
    return len >= n && memcmp(s, prefix, n) == 0;
}

static bool has_suffix(const char * s, size_t len, const char * suffix) {
    size_t n = strlen(suffix);
    return len >= n && memcmp(s + len - n, suffix, n) == 0;
}

static bool equals(const char * s, size_t len, const char * word) {
    return len == strlen(word) && memcmp(s, word, len) == 0;
}

// does_token_look_special: added tokens some models forgot to mark special.
static bool looks_special(const char * s, size_t len) {
    return equals(s, len, "<pad>") || equals(s, len, "<mask>") || equals(s, len, "<2mass>") ||
           equals(s, len, "[@BOS@]") ||
           (has_prefix(s, len, "<|") && has_suffix(s, len, "|>")) ||
           (has_prefix(s, len, "<\xEF\xBD\x9C") && has_suffix(s, len, "\xEF\xBD\x9C>")) ||   // "<｜...｜>"
           (has_prefix(s, len, "<unused") && has_suffix(s, len, ">"));
}

// User-defined tokens are stored pre-normalized: SentencePiece's U+2581 "▁" becomes a space.
static void replace_sentencepiece_spaces(char * s, size_t * len) {
    size_t o = 0;
    for (size_t i = 0; i < *len; i++) {
        if (*len - i >= 3 && memcmp(s + i, "\xE2\x96\x81", 3) == 0) {
            s[o++] = ' ';
            i += 2;
        } else {
            s[o++] = s[i];
        }
    }
    s[o] = '\0';
    *len = o;
}

// A token id from JSON: an integer in [0, limit).
static bool token_id(const struct mg_json * v, int64_t limit, int64_t * id) {
    return mg_json_get_int(v, id) && *id >= 0 && *id < limit;
}

// n_vocab: config.json's vocab_size when given, else one past the largest id.
static bool count_tokens(const struct mg_json * vocab, const struct mg_json * added, const struct mg_json * config,
                         const char * path, int64_t * n) {
    const int64_t max_tokens = 1 << 30;
    int64_t id;
    if (mg_json_get_int(mg_json_get(config, "vocab_size"), n) && *n > 0 && *n <= max_tokens) return true;
    *n = 0;
    for (size_t i = 0; i < vocab->n; i++) {
        if (!token_id(&vocab->items[i], max_tokens, &id)) {
            mg_set_error("%s: model.vocab['%s']: the id must be an integer in 0..2^30", path, vocab->keys[i]);
            return false;
        }
        if (id + 1 > *n) *n = id + 1;
    }
    for (size_t i = 0; added && i < added->n; i++) {
        if (token_id(mg_json_get(&added->items[i], "id"), max_tokens, &id) && id + 1 > *n) *n = id + 1;
    }
    // Ids far past the number of tokens given make a vocabulary of holes
    // (one id of 99999999 would ask for a hundred million placeholder tokens
    // and gigabytes): real files have a few (padding to a multiple of 64 or 128).
    const int64_t n_given = (int64_t) vocab->n + (added ? (int64_t) added->n : 0);
    if (*n > 2 * n_given + 1024) {
        mg_set_error("%s: the largest token id is %" PRId64 ", but only %" PRId64 " tokens are given: ids must run "
                     "from 0 with few gaps", path, *n - 1, n_given);
        return false;
    }
    return true;
}

static bool read_vocab(struct mg_hf_vocab * v, const struct mg_json * vocab, const char * path) {
    for (size_t i = 0; i < vocab->n; i++) {
        int64_t id;
        if (!token_id(&vocab->items[i], v->n_tokens, &id)) {
            mg_set_error("%s: model.vocab['%s']: the id must be an integer in 0..%" PRId64, path, vocab->keys[i],
                         v->n_tokens - 1);
            return false;
        }
        if (v->tokens[id] != NULL) {
            mg_set_error("%s: model.vocab: id %" PRId64 " is given to both '%s' and '%s'", path, id, v->tokens[id],
                         vocab->keys[i]);
            return false;
        }
        v->tokens[id] = copy_bytes(vocab->keys[i], vocab->key_lens[i]);
        v->token_lens[id] = vocab->key_lens[i];
        v->token_types[id] = MG_HF_TOKEN_NORMAL;
    }
    return true;
}

// model.vocab's keys, sorted, to find one given twice: JSON allows it, and a
// reader keeps one of the two ids (the last, in HF's serde maps), so the
// other id would be a token no text can reach. We say so instead.
struct vocab_key {
    const char * text;
    size_t       len;
    size_t       index;
};

static int cmp_vocab_key(const void * pa, const void * pb) {
    const struct vocab_key * a = pa, * b = pb;
    const int c = memcmp(a->text, b->text, a->len < b->len ? a->len : b->len);
    if (c != 0) return c;
    return (a->len > b->len) - (a->len < b->len);
}

static bool vocab_keys_unique(const struct mg_json * vocab, const char * path) {
    struct vocab_key * k = malloc((vocab->n ? vocab->n : 1) * sizeof(*k));
    if (k == NULL) {
        mg_set_error("%s: model.vocab: out of memory for %zu tokens", path, vocab->n);
        return false;
    }
    for (size_t i = 0; i < vocab->n; i++) k[i] = (struct vocab_key) {vocab->keys[i], vocab->key_lens[i], i};
    qsort(k, vocab->n, sizeof(*k), cmp_vocab_key);
    bool unique = true;
    for (size_t i = 1; unique && i < vocab->n; i++) {
        if (cmp_vocab_key(&k[i - 1], &k[i]) == 0) {
            int64_t a, b;
            mg_json_get_int(&vocab->items[k[i - 1].index], &a);
            mg_json_get_int(&vocab->items[k[i].index], &b);
            mg_set_error("%s: model.vocab: the token '%s' is given twice (ids %" PRId64 " and %" PRId64
                         "); each token must appear once", path, k[i].text, a, b);
            unique = false;
        }
    }
    free(k);
    return unique;
}

// Added tokens override the vocabulary at their ids (HF's get_vocab), and
// decide the CONTROL / USER_DEFINED types.
static bool read_added_tokens(struct mg_hf_vocab * v, const struct mg_json * added, const char * path) {
    for (size_t i = 0; added && i < added->n; i++) {
        const struct mg_json * item = &added->items[i];
        const struct mg_json * content = mg_json_get(item, "content");
        const struct mg_json * special = mg_json_get(item, "special");
        int64_t id;
        if (!token_id(mg_json_get(item, "id"), v->n_tokens, &id) || content == NULL ||
            content->type != MG_JSON_STRING || content->len == 0) {   // an empty token could never be matched
            mg_set_error("%s: added_tokens[%zu]: needs an \"id\" in 0..%" PRId64 " and a non-empty string \"content\"",
                         path, i, v->n_tokens - 1);
            return false;
        }
        free(v->tokens[id]);
        v->tokens[id] = copy_bytes(content->str, content->len);
        v->token_lens[id] = content->len;
        bool is_special = special != NULL && special->type == MG_JSON_BOOL && special->boolean;
        if (is_special || looks_special(content->str, content->len)) {
            v->token_types[id] = MG_HF_TOKEN_CONTROL;
        } else {
            replace_sentencepiece_spaces(v->tokens[id], &v->token_lens[id]);
            v->token_types[id] = MG_HF_TOKEN_USER_DEFINED;
        }
    }
    return true;
}

static bool read_tokens(struct mg_hf_vocab * v, const struct mg_json * tok, const struct mg_json * config,
                        const char * path) {
    const struct mg_json * model = mg_json_get(tok, "model");
    const struct mg_json * type = mg_json_get(model, "type");
    const struct mg_json * vocab = mg_json_get(model, "vocab");
    const struct mg_json * added = mg_json_get(tok, "added_tokens");
    if (type == NULL || type->type != MG_JSON_STRING || strcmp(type->str, "BPE") != 0) {
        mg_set_error("%s: model.type must be \"BPE\" (only byte-level BPE tokenizers are supported)", path);
        return false;
    }
    if (vocab == NULL || vocab->type != MG_JSON_OBJECT) {
        mg_set_error("%s: model.vocab must be an object mapping token text to id", path);
        return false;
    }
    if (added != NULL && added->type != MG_JSON_ARRAY) {
        mg_set_error("%s: added_tokens must be an array", path);
        return false;
    }
    if (!count_tokens(vocab, added, config, path, &v->n_tokens)) return false;

    size_t n = (size_t) v->n_tokens;
    v->tokens = calloc(n, sizeof(v->tokens[0]));
    v->token_lens = calloc(n, sizeof(v->token_lens[0]));
    v->token_types = calloc(n, sizeof(v->token_types[0]));
    MG_ASSERT(v->tokens != NULL && v->token_lens != NULL && v->token_types != NULL);
    if (!vocab_keys_unique(vocab, path) || !read_vocab(v, vocab, path) || !read_added_tokens(v, added, path)) {
        return false;
    }

    // Ids no token has: the converter's "[PAD<id>]" placeholders.
    for (int64_t id = 0; id < v->n_tokens; id++) {
        if (v->tokens[id] != NULL) continue;
        char pad[32];
        int len = snprintf(pad, sizeof(pad), "[PAD%" PRId64 "]", id);
        v->tokens[id] = copy_bytes(pad, (size_t) len);
        v->token_lens[id] = (size_t) len;
        v->token_types[id] = MG_HF_TOKEN_UNUSED;
    }
    return true;
}

// ---------------------------------------------------------------------------
// Merges (gguf-py SpecialVocab._try_load_from_tokenizer_json)
// ---------------------------------------------------------------------------

// Since transformers 4.45 a merge may be a pair ["A", "B"], which allows
// spaces inside the parts; GGUF keeps "A B" strings, so a space inside a part
// is written as U+0120 ("Ġ", the byte-level stand-in for a space).
static char * join_merge_pair(const struct mg_json * a, const struct mg_json * b, size_t * len) {
    char * s = malloc(2 * (a->len + b->len) + 2);   // each space grows to 2 bytes
    MG_ASSERT(s != NULL);
    size_t o = 0;
    for (int part = 0; part < 2; part++) {
        const struct mg_json * p = part == 0 ? a : b;
        if (part == 1) s[o++] = ' ';
        for (size_t i = 0; i < p->len; i++) {
            if (p->str[i] == ' ') {
                s[o++] = '\xC4';
                s[o++] = '\xA0';
            } else {
                s[o++] = p->str[i];
            }
        }
    }
    s[o] = '\0';
    *len = o;
    return s;
}

static bool read_merges(struct mg_hf_vocab * v, const struct mg_json * tok, const char * path) {
    const struct mg_json * merges = mg_json_get(mg_json_get(tok, "model"), "merges");
    if (merges == NULL) return true;
    if (merges->type != MG_JSON_ARRAY) {
        mg_set_error("%s: model.merges must be an array", path);
        return false;
    }
    v->merges = calloc(merges->n + 1, sizeof(v->merges[0]));
    v->merge_lens = calloc(merges->n + 1, sizeof(v->merge_lens[0]));
    MG_ASSERT(v->merges != NULL && v->merge_lens != NULL);
    for (size_t i = 0; i < merges->n; i++) {
        const struct mg_json * m = &merges->items[i];
        if (m->type == MG_JSON_STRING) {
            v->merges[i] = copy_bytes(m->str, m->len);
            v->merge_lens[i] = m->len;
        } else if (m->type == MG_JSON_ARRAY && m->n == 2 && m->items[0].type == MG_JSON_STRING &&
                   m->items[1].type == MG_JSON_STRING) {
            v->merges[i] = join_merge_pair(&m->items[0], &m->items[1], &v->merge_lens[i]);
        } else {
            mg_set_error("%s: model.merges[%zu] must be \"A B\" or [\"A\", \"B\"]", path, i);
            return false;
        }
        v->n_merges = (int64_t) i + 1;
    }
    return true;
}

// ---------------------------------------------------------------------------
// The pre-tokenizer: which of llama.cpp's names gives the same pieces
// ---------------------------------------------------------------------------

// llama.cpp's converter picks tokenizer.ggml.pre by running the HF tokenizer
// on a probe text and hashing the ids (get_vocab_base_pre). Without the HF
// library we read tokenizer.json's pre_tokenizer instead and accept exactly
// the two byte-level regexes vocab.c implements, compared as strings:
// GPT-2's (HF's ByteLevel with use_regex, MiniMind) and Qwen2's (a Split
// before a regex-less ByteLevel, Qwen2/2.5/3). Anything else would be
// tokenized differently from the model's training, so it is refused.
static const char gpt2_regex[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
static const char qwen2_regex[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char llama3_regex[] =   // Qwen2's with \p{N}{1,3} (Llama 3)
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

static bool json_is(const struct mg_json * v, const char * str) {
    return v != NULL && v->type == MG_JSON_STRING && v->len == strlen(str) && memcmp(v->str, str, v->len) == 0;
}

// A boolean member, or def when it is absent.
static bool json_flag(const struct mg_json * obj, const char * key, bool def) {
    const struct mg_json * v = mg_json_get(obj, key);
    return v != NULL && v->type == MG_JSON_BOOL ? v->boolean : def;
}

// A ByteLevel step: maps bytes to symbols; with use_regex it also splits by GPT-2's regex.
static bool check_byte_level(const struct mg_json * step, bool want_regex, const char * path, const char * where) {
    if (json_flag(step, "add_prefix_space", false)) {
        mg_set_error("%s: %s: ByteLevel with add_prefix_space is not supported (llama.cpp adds no space)", path,
                     where);
        return false;
    }
    if (json_flag(step, "use_regex", true) != want_regex) {
        mg_set_error("%s: %s: ByteLevel with use_regex %s is not supported here (%s)", path, where,
                     want_regex ? "false" : "true",
                     want_regex ? "nothing would split the text" : "a Split before it already splits");
        return false;
    }
    return true;
}

// "gpt-2" or "qwen2" for a Split step's regex, or NULL with the error set.
static const char * pre_of_split(const struct mg_json * split, const char * path) {
    const struct mg_json * regex = mg_json_get(mg_json_get(split, "pattern"), "Regex");
    if (regex == NULL || regex->type != MG_JSON_STRING) {
        mg_set_error("%s: pre_tokenizer.pretokenizers[0]: a Split needs pattern.Regex (a String pattern is not "
                     "supported)", path);
        return NULL;
    }
    if (!json_is(mg_json_get(split, "behavior"), "Isolated") || json_flag(split, "invert", false)) {
        mg_set_error("%s: pre_tokenizer.pretokenizers[0]: only a Split with behavior \"Isolated\" and invert "
                     "false is supported", path);
        return NULL;
    }
    if (json_is(regex, qwen2_regex)) return "qwen2";
    if (json_is(regex, llama3_regex)) return "llama-bpe";
    if (json_is(regex, gpt2_regex)) return "gpt-2";
    mg_set_error("%s: pre_tokenizer: the Split regex '%s' is not Qwen2's, Llama 3's or GPT-2's, the three this "
                 "engine can reproduce (tokenizer.ggml.pre 'qwen2', 'llama-bpe' or 'gpt-2')", path, regex->str);
    return NULL;
}

static bool read_pre_tokenizer(struct mg_hf_vocab * v, const struct mg_json * tok, const char * path) {
    const struct mg_json * pre = mg_json_get(tok, "pre_tokenizer");
    const struct mg_json * type = mg_json_get(pre, "type");
    if (json_is(type, "ByteLevel")) {   // MiniMind, GPT-2
        if (!check_byte_level(pre, true, path, "pre_tokenizer")) return false;
        v->pre = "gpt-2";
        return true;
    }
    const struct mg_json * steps = mg_json_get(pre, "pretokenizers");
    if (json_is(type, "Sequence") && steps != NULL && steps->type == MG_JSON_ARRAY) {
        if (steps->n == 1 && json_is(mg_json_get(&steps->items[0], "type"), "ByteLevel")) {
            if (!check_byte_level(&steps->items[0], true, path, "pre_tokenizer.pretokenizers[0]")) return false;
            v->pre = "gpt-2";
            return true;
        }
        if (steps->n == 2 && json_is(mg_json_get(&steps->items[0], "type"), "Split") &&
            json_is(mg_json_get(&steps->items[1], "type"), "ByteLevel")) {   // Qwen2, Qwen3
            v->pre = pre_of_split(&steps->items[0], path);
            return v->pre != NULL && check_byte_level(&steps->items[1], false, path, "pre_tokenizer.pretokenizers[1]");
        }
        const struct mg_json * digits = &steps->items[0];
        // SmolLM, SmolLM2: every digit alone first, then GPT-2's ByteLevel regex
        if (steps->n == 2 && json_is(mg_json_get(digits, "type"), "Digits") &&
            json_flag(digits, "individual_digits", false) && json_is(mg_json_get(&steps->items[1], "type"), "ByteLevel")) {
            v->pre = "smollm";
            return check_byte_level(&steps->items[1], true, path, "pre_tokenizer.pretokenizers[1]");
        }
    }
    mg_set_error("%s: pre_tokenizer: only ByteLevel, or a Sequence of a regex Split (or Digits) and ByteLevel, is "
                 "supported (found %s)", path, type && type->type == MG_JSON_STRING ? type->str
                                   : pre && pre->type != MG_JSON_NULL ? "no type" : "none");
    return false;
}

// The normalizer's type ("NFC", "Sequence", ...): GGUF has no key for it and
// llama.cpp skips it; mg tokenize --normalize nfc can apply NFC.
static void read_normalizer(struct mg_hf_vocab * v, const struct mg_json * tok) {
    const struct mg_json * type = mg_json_get(mg_json_get(tok, "normalizer"), "type");
    if (type != NULL && type->type == MG_JSON_STRING) snprintf(v->normalizer, sizeof(v->normalizer), "%s", type->str);
}

// ---------------------------------------------------------------------------
// Special tokens, add_*_token, chat template (SpecialVocab)
// ---------------------------------------------------------------------------

// tokenizer_config.json's names ("bos" for bos_token / add_bos_token), in
// SpecialVocab's order. eot has no entry there: it is set to eos below.
static const char * const special_names[MG_HF_SPECIAL_COUNT] = {
    [MG_HF_SPECIAL_BOS] = "bos", [MG_HF_SPECIAL_EOS] = "eos", [MG_HF_SPECIAL_EOT] = NULL,
    [MG_HF_SPECIAL_UNK] = "unk", [MG_HF_SPECIAL_SEP] = "sep", [MG_HF_SPECIAL_PAD] = "pad",
    [MG_HF_SPECIAL_CLS] = "cls", [MG_HF_SPECIAL_MASK] = "mask",
};

// The text of tokenizer_config.json's "<name>_token": a string, or an object
// with a string "content". NULL when absent, null or empty.
static const struct mg_json * special_text(const struct mg_json * config, const char * name) {
    char key[32];
    snprintf(key, sizeof(key), "%s_token", name);
    const struct mg_json * entry = mg_json_get(config, key);
    if (entry != NULL && entry->type == MG_JSON_OBJECT) entry = mg_json_get(entry, "content");
    if (entry == NULL || entry->type != MG_JSON_STRING || entry->len == 0) return NULL;
    return entry;
}

// The id of the first added token whose content is text, or -1.
static int64_t added_token_id(const struct mg_json * added, const struct mg_json * text) {
    for (size_t i = 0; added && i < added->n; i++) {
        const struct mg_json * content = mg_json_get(&added->items[i], "content");
        bool same = content && content->type == MG_JSON_STRING && content->len == text->len &&
                    memcmp(content->str, text->str, text->len) == 0;
        int64_t id;
        if (same && mg_json_get_int(mg_json_get(&added->items[i], "id"), &id)) return id;
    }
    return -1;
}

static int config_flag(const struct mg_json * config, const char * name) {
    char key[32];
    snprintf(key, sizeof(key), "add_%s_token", name);
    const struct mg_json * flag = mg_json_get(config, key);
    return flag != NULL && flag->type == MG_JSON_BOOL ? flag->boolean : -1;
}

static void read_specials(struct mg_hf_vocab * v, const struct mg_json * tok, const struct mg_json * config,
                          const struct mg_json * model_config) {
    const struct mg_json * added = mg_json_get(tok, "added_tokens");
    for (int s = 0; s < MG_HF_SPECIAL_COUNT; s++) {
        const char * name = special_names[s];
        if (name == NULL) continue;
        const struct mg_json * text = special_text(config, name);
        // Encoder models name cls/sep instead of bos/eos.
        if (text == NULL && s == MG_HF_SPECIAL_BOS) text = special_text(config, "cls");
        if (text == NULL && s == MG_HF_SPECIAL_EOS) text = special_text(config, "sep");
        int64_t id = text ? added_token_id(added, text) : -1;
        if (id < 0) {   // config.json's "<name>_token_id" is the fallback (_try_load_from_config_json)
            char key[32];
            snprintf(key, sizeof(key), "%s_token_id", name);
            if (!mg_json_get_int(mg_json_get(model_config, key), &id)) id = -1;
        }
        if (id >= 0 && id < v->n_tokens) v->special[s] = id;   // ids past the vocabulary are skipped
    }
    v->special[MG_HF_SPECIAL_EOT] = v->special[MG_HF_SPECIAL_EOS];
    v->add_bos = config_flag(config, "bos");
    v->add_eos = config_flag(config, "eos");
    v->add_sep = config_flag(config, "sep");
}

// tokenizer_config.json's chat_template wins over chat_template.jinja
// (optional: false only when it exists and cannot be read, or is not text;
// a list of named templates, as some models ship, is not read yet).
static bool read_chat_template(struct mg_hf_vocab * v, const struct mg_json * config, const char * dir) {
    const struct mg_json * t = mg_json_get(config, "chat_template");
    if (t != NULL && t->type != MG_JSON_STRING && t->type != MG_JSON_NULL) {
        mg_set_error("%s/tokenizer_config.json: chat_template must be a string (or null), not %s", dir,
                     t->type == MG_JSON_ARRAY ? "a list of named templates (not supported)" : "a number, bool or object");
        return false;
    }
    if (t != NULL && t->type == MG_JSON_STRING) {
        v->chat_template = copy_bytes(t->str, t->len);
        v->chat_template_len = t->len;
        return true;
    }
    char * path = join_path(dir, "chat_template.jinja");
    const bool there = exists(path);
    if (there) v->chat_template = read_whole_file(path, &v->chat_template_len);
    free(path);
    return !there || v->chat_template != NULL;
}

// ---------------------------------------------------------------------------
// The public functions
// ---------------------------------------------------------------------------

struct mg_hf_vocab * mg_hf_vocab_load(const char * dir) {
    char * path = join_path(dir, "tokenizer.json");
    struct mg_json * tok = mg_json_parse_file(path);
    struct mg_json * config = NULL;         // tokenizer_config.json
    struct mg_json * model_config = NULL;   // config.json
    struct mg_hf_vocab * v = calloc(1, sizeof(*v));
    MG_ASSERT(v != NULL);
    for (int s = 0; s < MG_HF_SPECIAL_COUNT; s++) v->special[s] = -1;

    bool ok = tok != NULL && parse_optional(dir, "tokenizer_config.json", &config) &&
              parse_optional(dir, "config.json", &model_config) &&
              read_tokens(v, tok, model_config, path) && read_merges(v, tok, path) &&
              read_pre_tokenizer(v, tok, path);
    if (ok) {
        read_normalizer(v, tok);
        read_specials(v, tok, config, model_config);
        ok = read_chat_template(v, config, dir);
    }
    mg_json_free(tok);
    mg_json_free(config);
    mg_json_free(model_config);
    free(path);
    if (!ok) {
        mg_hf_vocab_free(v);
        return NULL;
    }
    return v;
}

void mg_hf_vocab_free(struct mg_hf_vocab * v) {
    if (v == NULL) return;
    for (int64_t i = 0; v->tokens && i < v->n_tokens; i++) free(v->tokens[i]);
    for (int64_t i = 0; v->merges && i < v->n_merges; i++) free(v->merges[i]);
    free(v->tokens);
    free(v->token_lens);
    free(v->token_types);
    free(v->merges);
    free(v->merge_lens);
    free(v->chat_template);
    free(v);
}

// The GGUF keys (llama-arch.cpp, LLM_KV_NAMES; "seperator" is llama.cpp's spelling).
static const char * const special_keys[MG_HF_SPECIAL_COUNT] = {
    [MG_HF_SPECIAL_BOS]  = "tokenizer.ggml.bos_token_id",
    [MG_HF_SPECIAL_EOS]  = "tokenizer.ggml.eos_token_id",
    [MG_HF_SPECIAL_EOT]  = "tokenizer.ggml.eot_token_id",
    [MG_HF_SPECIAL_UNK]  = "tokenizer.ggml.unknown_token_id",
    [MG_HF_SPECIAL_SEP]  = "tokenizer.ggml.seperator_token_id",
    [MG_HF_SPECIAL_PAD]  = "tokenizer.ggml.padding_token_id",
    [MG_HF_SPECIAL_CLS]  = "tokenizer.ggml.cls_token_id",
    [MG_HF_SPECIAL_MASK] = "tokenizer.ggml.mask_token_id",
};

bool mg_hf_vocab_add_to_gguf(const struct mg_hf_vocab * v, struct mg_gguf_writer * w, const char * pre) {
    bool ok = mg_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2") &&
              mg_gguf_writer_set_str(w, "tokenizer.ggml.pre", pre != NULL ? pre : v->pre) &&
              mg_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", (const char * const *) v->tokens, v->token_lens,
                                         (size_t) v->n_tokens) &&
              mg_gguf_writer_set_arr_data(w, "tokenizer.ggml.token_type", MG_GGUF_TYPE_INT32, v->token_types,
                                          (size_t) v->n_tokens);
    if (ok && v->n_merges > 0) {
        ok = mg_gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", (const char * const *) v->merges, v->merge_lens,
                                        (size_t) v->n_merges);
    }
    for (int s = 0; ok && s < MG_HF_SPECIAL_COUNT; s++) {
        if (v->special[s] >= 0) ok = mg_gguf_writer_set_u32(w, special_keys[s], (uint32_t) v->special[s]);
    }
    if (ok && v->add_bos >= 0) ok = mg_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", v->add_bos);
    if (ok && v->add_eos >= 0) ok = mg_gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", v->add_eos);
    if (ok && v->add_sep >= 0) ok = mg_gguf_writer_set_bool(w, "tokenizer.ggml.add_sep_token", v->add_sep);
    if (ok && v->chat_template != NULL) {
        ok = mg_gguf_writer_set_strn(w, "tokenizer.chat_template", v->chat_template, v->chat_template_len);
    }
    return ok;
}
