// Generated from full/vocab.c by tools/chapgen. In a class, edit this copy freely (make chapters will not overwrite your edits); to change the engine, edit full/vocab.c and run make chapters.
// vocab.c - the byte-level BPE tokenizer of vocab.h.
//
// Mirrors llama.cpp's src/llama-vocab.cpp for vocabularies of type BPE:
// llama_vocab::impl::load (keys, defaults, token attributes, end-of-generation
// set, special-token cache), tokenizer_st_partition, llm_tokenizer_bpe_session
// (tokenize, add_new_bigram, the llm_bigram_bpe priority queue),
// find_bpe_rank, token_to_piece and llama_decode_text.
#include "vocab.h"
#include "gguf.h"
#include "tensor.h"
#include "trace.h"
#include "unicode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------
// Growable arrays, for the scratch of one mg_tokenize call and for building.
// ---------------------------------------------------------------------------

// Room for need (>= 1) elements, the capacity doubled as it grows. NULL
// when memory runs out or the byte count overflows; the old array is then
// kept as it was (realloc's rule), so its owner can still free it. A text
// has no size limit of its own, so this can fail: every array below keeps a
// sticky `failed` flag, as a FILE keeps its error flag, a push after a
// failed one does nothing, and the owner checks the flag once at the end
// (mg_tokenize then fails with an error, instead of the process aborting).
static void * grow(void * ptr, size_t * cap, size_t need, size_t elem_size) {
    if (need <= *cap) return ptr;
    size_t cap_new = *cap ? *cap : 16;
    while (cap_new < need) {
        if (cap_new > SIZE_MAX / 2) return NULL;
        cap_new *= 2;
    }
    if (cap_new > SIZE_MAX / elem_size) return NULL;
    void * bigger = realloc(ptr, cap_new * elem_size);
    if (bigger != NULL) *cap = cap_new;
    return bigger;
}

struct bytes {
    char * data;
    size_t n;
    size_t cap;
    bool   failed;   // an append ran out of memory
};

static void bytes_append(struct bytes * b, const void * src, size_t n) {
    char * data = b->failed ? NULL : grow(b->data, &b->cap, b->n + n + 1, 1);   // + 1: room for a NUL
    if (data == NULL) {
        b->failed = true;
        return;
    }
    b->data = data;
    memcpy(b->data + b->n, src, n);
    b->n += n;
}

struct ids {
    int32_t * data;
    size_t    n;
    size_t    cap;
    bool      failed;   // a push ran out of memory
};

static void ids_push(struct ids * ids, int32_t id) {
    int32_t * data = ids->failed ? NULL : grow(ids->data, &ids->cap, ids->n + 1, sizeof(int32_t));
    if (data == NULL) {
        ids->failed = true;
        return;
    }
    ids->data = data;
    ids->data[ids->n++] = id;
}

// ---------------------------------------------------------------------------
// The vocabulary
// ---------------------------------------------------------------------------

struct token {
    size_t   text;        // offset of the NUL-terminated text in vocab->text
    uint32_t text_len;
    size_t   piece;       // offset in vocab->pieces of what the token prints (with special = true)
    uint32_t piece_len;
    int32_t  attr;        // enum mg_token_attr bits
    bool     eog;
};

// A merge "left right": both halves live in vocab->merge_text, as the text
// of the merge with its space replaced by a NUL.
struct merge {
    size_t   left;        // offset in vocab->merge_text
    uint32_t left_len;
    uint32_t right_len;   // the right half starts at left + left_len + 1
};

// An open-addressing hash table of ids (-1 = empty slot), where llama.cpp
// has std::unordered_map. The key of an id (a token's text, a merge's two
// halves) is read from the vocabulary, so the table itself is just integers:
// 2 MB of slots for a 150,000-token vocabulary, and one probe on average.
struct table {
    int32_t * slots;
    size_t    mask;       // slot count - 1 (a power of two)
};

struct mg_vocab {
    int32_t        n_tokens;
    struct token * tokens;
    char *         text;          // every token text, each followed by a NUL
    char *         pieces;        // every token's printed bytes
    struct table   by_text;       // token text -> id (llama.cpp token_to_id)

    int32_t        n_merges;
    struct merge * merges;        // by rank
    char *         merge_text;
    struct table   by_pair;       // (left, right) -> rank (llama.cpp bpe_ranks)

    enum mg_pretok pre_type;
    char *         pre;           // as the file spells it, "" if absent
    int32_t        special[MG_SPECIAL_COUNT];
    bool           add_bos;
    bool           add_eos;
    int32_t *      special_order; // CONTROL, USER_DEFINED and UNKNOWN tokens, longest text first
    int32_t        n_special_order;
    char *         chat_template;
};

// FNV-1a: simple, and good enough for strings this short.
static uint64_t hash_bytes(uint64_t h, const char * s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        h ^= (uint8_t) s[i];
        h *= 0x100000001B3ull;
    }
    return h;
}

#define HASH_START 0xCBF29CE484222325ull

static uint64_t hash_pair(const char * left, size_t left_len, const char * right, size_t right_len) {
    uint64_t h = hash_bytes(HASH_START, left, left_len);
    h = hash_bytes(h, " ", 1);
    return hash_bytes(h, right, right_len);
}

static void table_init(struct table * t, size_t n_keys) {
    size_t n_slots = 16;
    while (n_slots < 2 * n_keys) n_slots *= 2;   // at most half full: short probe runs
    t->slots = malloc(n_slots * sizeof(int32_t));
    MG_ASSERT(t->slots != NULL);
    for (size_t i = 0; i < n_slots; i++) t->slots[i] = -1;
    t->mask = n_slots - 1;
}

static const char * token_text(const struct mg_vocab * v, int32_t id) {
    return v->text + v->tokens[id].text;
}

static const char * merge_left(const struct mg_vocab * v, int32_t rank) {
    return v->merge_text + v->merges[rank].left;
}

static const char * merge_right(const struct mg_vocab * v, int32_t rank) {
    return merge_left(v, rank) + v->merges[rank].left_len + 1;
}

int32_t mg_vocab_find(const struct mg_vocab * v, const char * text, size_t len) {
    for (size_t i = hash_bytes(HASH_START, text, len) & v->by_text.mask; ; i = (i + 1) & v->by_text.mask) {
        int32_t id = v->by_text.slots[i];
        if (id < 0) return -1;
        if (v->tokens[id].text_len == len && memcmp(token_text(v, id), text, len) == 0) return id;
    }
}

// The rank of the merge (left, right), or -1 (llama.cpp find_bpe_rank).
static int32_t find_merge(const struct mg_vocab * v, const char * left, size_t left_len, const char * right,
                          size_t right_len) {
    const struct table * t = &v->by_pair;
    for (size_t i = hash_pair(left, left_len, right, right_len) & t->mask; ; i = (i + 1) & t->mask) {
        int32_t rank = t->slots[i];
        if (rank < 0) return -1;
        const struct merge * m = &v->merges[rank];
        if (m->left_len == left_len && m->right_len == right_len && memcmp(merge_left(v, rank), left, left_len) == 0
            && memcmp(merge_right(v, rank), right, right_len) == 0) {
            return rank;
        }
    }
}

void mg_vocab_free(struct mg_vocab * v) {
    if (v == NULL) return;
    free(v->tokens);
    free(v->text);
    free(v->pieces);
    free(v->by_text.slots);
    free(v->merges);
    free(v->merge_text);
    free(v->by_pair.slots);
    free(v->pre);
    free(v->special_order);
    free(v->chat_template);
    free(v);
}

// ---------------------------------------------------------------------------
// Building: tokens, merges, attributes, special tokens, printed pieces.
// ---------------------------------------------------------------------------

static char * copy_string(const char * s) {
    size_t n = strlen(s);
    char * c = malloc(n + 1);
    MG_ASSERT(c != NULL);
    memcpy(c, s, n + 1);
    return c;
}

static size_t text_length(const char * const * texts, const uint32_t * lens, int32_t i) {
    return lens ? lens[i] : strlen(texts[i]);
}

// Token texts into one buffer, and the text -> id table. An empty text
// becomes "[EMPTY_<id>]" as in llama.cpp; two tokens with one text are an
// error (llama.cpp asserts that its text -> id map has one entry per token).
static bool build_tokens(struct mg_vocab * v, const struct mg_vocab_params * p, const char * where) {
    struct bytes text = {0};
    v->tokens = calloc((size_t) p->n_tokens, sizeof(struct token));
    MG_ASSERT(v->tokens != NULL);
    for (int32_t id = 0; id < p->n_tokens; id++) {
        size_t len = text_length(p->tokens, p->token_lens, id);
        char empty[32];
        const char * src = p->tokens[id];
        if (len == 0) {
            len = (size_t) snprintf(empty, sizeof(empty), "[EMPTY_%d]", id);
            src = empty;
        }
        v->tokens[id].text = text.n;
        v->tokens[id].text_len = (uint32_t) len;
        bytes_append(&text, src, len);
        bytes_append(&text, "", 1);
    }
    v->text = text.data;
    if (text.failed) {
        mg_set_error("%s: tokenizer.ggml.tokens: out of memory for the texts of %d tokens", where, p->n_tokens);
        return false;
    }

    table_init(&v->by_text, (size_t) p->n_tokens);
    for (int32_t id = 0; id < p->n_tokens; id++) {
        const char * s = token_text(v, id);
        size_t len = v->tokens[id].text_len;
        int32_t other = mg_vocab_find(v, s, len);
        if (other >= 0) {
            mg_set_error("%s: tokenizer.ggml.tokens: tokens %d and %d have the same text '%s'", where, other, id, s);
            return false;
        }
        size_t i = hash_bytes(HASH_START, s, len) & v->by_text.mask;
        while (v->by_text.slots[i] >= 0) i = (i + 1) & v->by_text.mask;
        v->by_text.slots[i] = id;
    }
    return true;
}

// "left right" -> rank. The split is at the first space after the first
// byte, so a merge may start with a space (llama.cpp: word.find(' ', 1)). A
// merge without such a space can never apply; it keeps its rank number. A
// pair listed twice keeps its first (best) rank, like bpe_ranks.emplace.
static bool build_merges(struct mg_vocab * v, const struct mg_vocab_params * p, const char * where) {
    struct bytes text = {0};
    v->n_merges = p->n_merges;
    v->merges = calloc((size_t) p->n_merges + 1, sizeof(struct merge));
    MG_ASSERT(v->merges != NULL);
    for (int32_t rank = 0; rank < p->n_merges; rank++) {
        const char * s = p->merges[rank];
        size_t len = text_length(p->merges, p->merge_lens, rank);
        const char * space = len > 1 ? memchr(s + 1, ' ', len - 1) : NULL;
        size_t left_len = space ? (size_t) (space - s) : 0;
        size_t right_len = space ? len - left_len - 1 : 0;
        v->merges[rank] = (struct merge) { text.n, (uint32_t) left_len, (uint32_t) right_len };
        bytes_append(&text, s, left_len);
        bytes_append(&text, "", 1);
        bytes_append(&text, space ? space + 1 : "", right_len);
        bytes_append(&text, "", 1);
    }
    v->merge_text = text.data;
    if (text.failed) {
        mg_set_error("%s: tokenizer.ggml.merges: out of memory for the texts of %d merges", where, p->n_merges);
        return false;
    }

    table_init(&v->by_pair, (size_t) p->n_merges);
    for (int32_t rank = 0; rank < p->n_merges; rank++) {
        const struct merge * m = &v->merges[rank];
        if (m->left_len == 0) continue;
        if (find_merge(v, merge_left(v, rank), m->left_len, merge_right(v, rank), m->right_len) >= 0) continue;
        size_t i = hash_pair(merge_left(v, rank), m->left_len, merge_right(v, rank), m->right_len) & v->by_pair.mask;
        while (v->by_pair.slots[i] >= 0) i = (i + 1) & v->by_pair.mask;
        v->by_pair.slots[i] = rank;
    }
    return true;
}

static int32_t attr_of_type(int32_t type) {
    switch (type) {
        case MG_TOKEN_TYPE_NORMAL:       return MG_TOKEN_ATTR_NORMAL;
        case MG_TOKEN_TYPE_UNKNOWN:      return MG_TOKEN_ATTR_UNKNOWN;
        case MG_TOKEN_TYPE_CONTROL:      return MG_TOKEN_ATTR_CONTROL;
        case MG_TOKEN_TYPE_USER_DEFINED: return MG_TOKEN_ATTR_USER_DEFINED;
        case MG_TOKEN_TYPE_UNUSED:       return MG_TOKEN_ATTR_UNUSED;
        case MG_TOKEN_TYPE_BYTE:         return MG_TOKEN_ATTR_BYTE;
        default:                         return MG_TOKEN_ATTR_UNDEFINED;
    }
}

// The texts llama.cpp recognises when a file does not name a token's role,
// for each role (llama_vocab::impl::load, "auto-detect special tokens by text").
static const char * const eot_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>", "_<EOT>",
    "[EOT]", "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>", "<end_of_utterance>", NULL,
};
static const char * const eom_texts[] = { "<|eom_id|>", NULL };
static const char * const fim_pre_texts[] = {
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>", "<PRE>",
    "\xE2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>", NULL,
};
static const char * const fim_suf_texts[] = {
    "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81hole\xEF\xBD\x9C>", "<SUF>",
    "\xE2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>", NULL,
};
static const char * const fim_mid_texts[] = {
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>", "<MID>",
    "\xE2\x96\x81<MID>", "<|code_middle|>", "<|middle|>", NULL,
};
static const char * const fim_pad_texts[] = { "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", NULL };
static const char * const fim_rep_texts[] = {
    "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", NULL,
};
static const char * const fim_sep_texts[] = { "<|file_sep|>", NULL };

// Tokens that end generation whatever the file says (special_eog_ids).
static const char * const eog_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>",
    "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
    "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>", "[e~[", NULL,
};

static const struct {
    const char *         key;      // tokenizer.ggml.<key>
    const char * const * texts;    // recognised by text when the key is absent (NULL: never)
} special_info[MG_SPECIAL_COUNT] = {
    [MG_SPECIAL_BOS]     = { "tokenizer.ggml.bos_token_id",     NULL },
    [MG_SPECIAL_EOS]     = { "tokenizer.ggml.eos_token_id",     NULL },
    [MG_SPECIAL_EOT]     = { "tokenizer.ggml.eot_token_id",     eot_texts },
    [MG_SPECIAL_EOM]     = { "tokenizer.ggml.eom_token_id",     eom_texts },
    [MG_SPECIAL_UNK]     = { "tokenizer.ggml.unknown_token_id", NULL },
    [MG_SPECIAL_PAD]     = { "tokenizer.ggml.padding_token_id", NULL },
    [MG_SPECIAL_FIM_PRE] = { "tokenizer.ggml.fim_pre_token_id", fim_pre_texts },
    [MG_SPECIAL_FIM_SUF] = { "tokenizer.ggml.fim_suf_token_id", fim_suf_texts },
    [MG_SPECIAL_FIM_MID] = { "tokenizer.ggml.fim_mid_token_id", fim_mid_texts },
    [MG_SPECIAL_FIM_PAD] = { "tokenizer.ggml.fim_pad_token_id", fim_pad_texts },
    [MG_SPECIAL_FIM_REP] = { "tokenizer.ggml.fim_rep_token_id", fim_rep_texts },
    [MG_SPECIAL_FIM_SEP] = { "tokenizer.ggml.fim_sep_token_id", fim_sep_texts },
};

static bool text_in(const char * text, size_t len, const char * const * list) {
    for (; *list; list++) {
        if (strlen(*list) == len && memcmp(text, *list, len) == 0) return true;
    }
    return false;
}

// Special-token roles the file left open are filled by text, and the tokens
// found that way become CONTROL even if their type said otherwise (llama.cpp
// "control-looking token ... its type will be overridden"). llama.cpp takes
// the first match in the iteration order of a hash map, i.e. any match; we
// take the lowest id. Then the end-of-generation set.
static void find_special_tokens(struct mg_vocab * v) {
    for (int which = 0; which < MG_SPECIAL_COUNT; which++) {
        if (v->special[which] >= 0 || special_info[which].texts == NULL) continue;
        for (int32_t id = 0; id < v->n_tokens; id++) {
            if (text_in(token_text(v, id), v->tokens[id].text_len, special_info[which].texts)) {
                v->special[which] = id;
                v->tokens[id].attr |= MG_TOKEN_ATTR_CONTROL;
                break;
            }
        }
    }

    for (int32_t id = 0; id < v->n_tokens; id++) {
        if (text_in(token_text(v, id), v->tokens[id].text_len, eog_texts)) {
            v->tokens[id].eog = true;
            v->tokens[id].attr |= MG_TOKEN_ATTR_CONTROL;
        }
    }
    const enum mg_special_token eog_roles[] = {
        MG_SPECIAL_EOS, MG_SPECIAL_EOT, MG_SPECIAL_EOM, MG_SPECIAL_FIM_PAD, MG_SPECIAL_FIM_REP, MG_SPECIAL_FIM_SEP,
    };
    for (size_t i = 0; i < sizeof(eog_roles) / sizeof(eog_roles[0]); i++) {
        int32_t id = v->special[eog_roles[i]];
        if (id >= 0) v->tokens[id].eog = true;
    }
}

// The tokens that are cut out of the text before BPE, longest text first, so
// that "<|im_start|>" wins over a shorter token that is a part of it. Equal
// lengths keep id order (llama.cpp's std::sort leaves their order open).
struct by_len {
    uint32_t len;
    int32_t  id;
};

static int compare_longest_first(const void * pa, const void * pb) {
    const struct by_len * a = pa;
    const struct by_len * b = pb;
    if (a->len != b->len) return a->len > b->len ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

static void build_special_order(struct mg_vocab * v) {
    const int32_t special_attrs = MG_TOKEN_ATTR_CONTROL | MG_TOKEN_ATTR_USER_DEFINED | MG_TOKEN_ATTR_UNKNOWN;
    struct by_len * order = malloc((size_t) v->n_tokens * sizeof(struct by_len));
    v->special_order = malloc((size_t) v->n_tokens * sizeof(int32_t));
    MG_ASSERT(order != NULL && v->special_order != NULL);
    int32_t n = 0;
    for (int32_t id = 0; id < v->n_tokens; id++) {
        if (v->tokens[id].attr & special_attrs) order[n++] = (struct by_len) { v->tokens[id].text_len, id };
    }
    qsort(order, (size_t) n, sizeof(order[0]), compare_longest_first);
    for (int32_t i = 0; i < n; i++) v->special_order[i] = order[i].id;
    v->n_special_order = n;
    free(order);
}

// What a NORMAL token prints: its text read in GPT-2's byte alphabet, one
// byte per character (llama_decode_text). A character outside the alphabet
// cannot come from bytes; llama.cpp prints it as "[UNK_BYTE_0x<its UTF-8 in
// hex><the whole token text>]", and so do we.
static void decode_token_text(const char * text, size_t len, struct bytes * out) {
    for (size_t pos = 0; pos < len; ) {
        uint32_t cpt = mg_utf8_decode(text, len, &pos);
        int byte = mg_unicode_cpt_to_byte(cpt);
        if (byte >= 0) {
            char c = (char) byte;
            bytes_append(out, &c, 1);
            continue;
        }
        char utf8[4];
        size_t n = mg_utf8_encode(cpt, utf8);
        char hex[16];
        bytes_append(out, "[UNK_BYTE_0x", 12);
        for (size_t k = 0; k < n; k++) {
            snprintf(hex, sizeof(hex), "%02x", (uint8_t) utf8[k]);
            bytes_append(out, hex, 2);
        }
        bytes_append(out, text, len);
        bytes_append(out, "]", 1);
    }
}

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// What every token prints with special = true, computed once (llama.cpp
// builds the same cache_token_to_piece at load).
static bool build_pieces(struct mg_vocab * v, const char * where) {
    struct bytes out = {0};
    for (int32_t id = 0; id < v->n_tokens; id++) {
        struct token * t = &v->tokens[id];
        const char * text = token_text(v, id);
        t->piece = out.n;
        if (t->attr & (MG_TOKEN_ATTR_CONTROL | MG_TOKEN_ATTR_UNKNOWN | MG_TOKEN_ATTR_USER_DEFINED)) {
            bytes_append(&out, text, t->text_len);
        } else if (t->attr & MG_TOKEN_ATTR_NORMAL) {
            decode_token_text(text, t->text_len, &out);
        } else if ((t->attr & MG_TOKEN_ATTR_BYTE) && t->text_len >= 4) {
            // "<0x0A>": llama.cpp token_to_byte reads up to two hex digits at offset 3.
            int value = 0;
            for (int k = 3; k < 5 && k < (int) t->text_len && hex_digit(text[k]) >= 0; k++) {
                value = 16 * value + hex_digit(text[k]);
            }
            char c = (char) value;
            bytes_append(&out, &c, 1);
        }
        // UNDEFINED and UNUSED tokens print nothing.
        t->piece_len = (uint32_t) (out.n - t->piece);
    }
    v->pieces = out.data ? out.data : calloc(1, 1);
    if (out.failed || v->pieces == NULL) {
        mg_set_error("%s: out of memory for the printed pieces of %d tokens", where, v->n_tokens);
        return false;
    }
    return true;
}

// tokenizer.ggml.pre -> pre-tokenizer (llama_vocab::impl::load). Only the
// names whose regex we implement and that need nothing else are listed.
static const struct {
    const char *   name;
    enum mg_pretok type;
} pre_names[] = {
    { "gpt-2",            MG_PRETOK_GPT2 },
    { "phi-2",            MG_PRETOK_GPT2 },
    { "mpt",              MG_PRETOK_GPT2 },
    { "olmo",             MG_PRETOK_GPT2 },
    { "jais",             MG_PRETOK_GPT2 },
    { "jina-es",          MG_PRETOK_GPT2 },
    { "jina-de",          MG_PRETOK_GPT2 },
    { "gigachat",         MG_PRETOK_GPT2 },
    { "a.x-4.0",          MG_PRETOK_GPT2 },
    { "mellum",           MG_PRETOK_GPT2 },
    { "exaone4",          MG_PRETOK_GPT2 },
    { "trillion",         MG_PRETOK_GPT2 },
    { "granite-docling",  MG_PRETOK_GPT2 },
    { "qwen2",            MG_PRETOK_QWEN2 },
    { "deepseek-r1-qwen", MG_PRETOK_QWEN2 },
    { "kormo",            MG_PRETOK_QWEN2 },
    { "f2llmv2",          MG_PRETOK_QWEN2 },
    { "megrez",           MG_PRETOK_QWEN2 },
    { "stablelm2",        MG_PRETOK_QWEN2 },
    { "hunyuan",          MG_PRETOK_QWEN2 },
    { "solar-open",       MG_PRETOK_QWEN2 },
};

static bool pre_type_of(const char * pre, enum mg_pretok * type, const char * where) {
    if (pre == NULL || pre[0] == '\0') {
        mg_set_error("%s: tokenizer.ggml.pre is missing: llama.cpp then runs its DEFAULT pre-tokenizer "
                     "(four regexes), which this chapter leaves to full/", where);
        return false;
    }
    for (size_t i = 0; i < sizeof(pre_names) / sizeof(pre_names[0]); i++) {
        if (strcmp(pre, pre_names[i].name) == 0) {
            *type = pre_names[i].type;
            return true;
        }
    }
    if (strcmp(pre, "gpt2") == 0) {
        mg_set_error("%s: tokenizer.ggml.pre: unknown pre-tokenizer type 'gpt2' (as in llama.cpp); did you mean "
                     "'gpt-2'? \"gpt2\" is a value of tokenizer.ggml.model, not of tokenizer.ggml.pre", where);
    } else {
        mg_set_error("%s: tokenizer.ggml.pre: unknown or unsupported pre-tokenizer type '%s' (supported: "
                     "gpt-2 and its aliases, qwen2 and its aliases"
                     ")", where, pre);
    }
    return false;
}

// Input validation: a token type outside llama_token_type (0..6) and a merge
// that is not "left right" are broken files, refused with the index and the
// value. (llama.cpp reads an unknown type as UNDEFINED and a merge without a
// space as the pair ("", ""), both silently; no converter writes either.)
static bool check_types_and_merges(const struct mg_vocab_params * p, const char * where) {
    for (int32_t id = 0; p->token_types != NULL && id < p->n_tokens; id++) {
        const int32_t t = p->token_types[id];
        if (t < MG_TOKEN_TYPE_UNDEFINED || t > MG_TOKEN_TYPE_BYTE) {
            mg_set_error("%s: tokenizer.ggml.token_type[%d] = %d is not a token type (0..6)", where, id, t);
            return false;
        }
    }
    for (int32_t rank = 0; rank < p->n_merges; rank++) {
        const char * m   = p->merges[rank];
        const size_t len = text_length(p->merges, p->merge_lens, rank);
        const char * space = len > 1 ? memchr(m + 1, ' ', len - 1) : NULL;
        if (space == NULL || space == m + len - 1) {
            mg_set_error("%s: tokenizer.ggml.merges[%d] = '%.*s' is not two texts separated by a space", where, rank,
                         (int) (len < 64 ? len : 64), m);
            return false;
        }
    }
    return true;
}

static struct mg_vocab * vocab_build(const struct mg_vocab_params * p, const char * where) {
    if (p->n_tokens <= 0 || p->tokens == NULL) {
        mg_set_error("%s: tokenizer.ggml.tokens: no tokens", where);
        return NULL;
    }
    if (p->n_merges < 0 || (p->n_merges > 0 && p->merges == NULL)) {
        mg_set_error("%s: tokenizer.ggml.merges: %d merges but no array", where, p->n_merges);
        return NULL;
    }
    struct mg_vocab * v = calloc(1, sizeof(*v));
    MG_ASSERT(v != NULL);
    v->n_tokens = p->n_tokens;
    v->pre = copy_string(p->pre ? p->pre : "");
    v->chat_template = p->chat_template ? copy_string(p->chat_template) : NULL;
    v->add_bos = p->add_bos;
    v->add_eos = p->add_eos;
    if (!pre_type_of(p->pre, &v->pre_type, where) || !build_tokens(v, p, where)) {
        mg_vocab_free(v);
        return NULL;
    }
    if (!check_types_and_merges(p, where) || !build_merges(v, p, where)) {
        mg_vocab_free(v);
        return NULL;
    }

    for (int32_t id = 0; id < v->n_tokens; id++) {
        v->tokens[id].attr = p->token_types ? attr_of_type(p->token_types[id]) : MG_TOKEN_ATTR_NORMAL;
    }
    for (int which = 0; which < MG_SPECIAL_COUNT; which++) {
        int32_t id = p->special[which];
        v->special[which] = id >= 0 && id < v->n_tokens ? id : -1;   // out of range: as if absent
    }
    find_special_tokens(v);
    if ((v->add_bos && v->special[MG_SPECIAL_BOS] < 0) || (v->add_eos && v->special[MG_SPECIAL_EOS] < 0)) {
        mg_set_error("%s: tokenizer.ggml.add_%s_token is true but there is no %s token", where,
                     v->add_bos && v->special[MG_SPECIAL_BOS] < 0 ? "bos" : "eos",
                     v->add_bos && v->special[MG_SPECIAL_BOS] < 0 ? "bos" : "eos");
        mg_vocab_free(v);
        return NULL;
    }
    build_special_order(v);
    if (!build_pieces(v, where)) {
        mg_vocab_free(v);
        return NULL;
    }
    return v;
}

struct mg_vocab_params mg_vocab_default_params(void) {
    struct mg_vocab_params p;
    memset(&p, 0, sizeof(p));
    for (int i = 0; i < MG_SPECIAL_COUNT; i++) p.special[i] = -1;
    return p;
}

struct mg_vocab * mg_vocab_new(const struct mg_vocab_params * params) {
    return vocab_build(params, "vocab");
}

// ---------------------------------------------------------------------------
// Loading from GGUF
// ---------------------------------------------------------------------------

// A NUL-terminated copy of a string value, or NULL if the key is absent.
// *ok turns false (with an error) if the key exists with another type.
static char * gguf_string(const struct mg_gguf * g, const char * key, bool * ok) {
    if (mg_gguf_find_key(g, key) < 0) return NULL;
    const char * s;
    uint64_t len;
    if (!mg_gguf_get_str(g, key, &s, &len)) {
        *ok = false;
        return NULL;
    }
    char * c = malloc(len + 1);
    MG_ASSERT(c != NULL);
    memcpy(c, s, len);
    c[len] = '\0';
    return c;
}

// A string array: pointers into the mapping and their lengths (the caller frees both arrays).
static bool gguf_string_array(const struct mg_gguf * g, const char * key, const char *** strs, uint32_t ** lens,
                              int32_t * n) {
    const char * path = mg_gguf_path(g);
    int64_t i = mg_gguf_find_key(g, key);
    if (i < 0) {
        mg_set_error("%s: %s: missing", path, key);
        return false;
    }
    if (mg_gguf_kv_type(g, i) != MG_GGUF_TYPE_ARRAY || mg_gguf_arr_type(g, i) != MG_GGUF_TYPE_STRING) {
        mg_set_error("%s: %s: expected an array of strings, found %s", path, key,
                     mg_gguf_type_name(mg_gguf_kv_type(g, i)));
        return false;
    }
    uint64_t count = mg_gguf_arr_n(g, i);
    if (count > INT32_MAX) {
        mg_set_error("%s: %s: %llu entries is too many", path, key, (unsigned long long) count);
        return false;
    }
    *n = (int32_t) count;
    *strs = malloc((count + 1) * sizeof(char *));
    *lens = malloc((count + 1) * sizeof(uint32_t));
    MG_ASSERT(*strs != NULL && *lens != NULL);
    for (uint64_t j = 0; j < count; j++) {
        uint64_t len;
        (*strs)[j] = mg_gguf_arr_str(g, i, j, &len);
        if (len > UINT32_MAX) {
            mg_set_error("%s: %s[%llu]: a string of %llu bytes", path, key, (unsigned long long) j,
                         (unsigned long long) len);
            return false;
        }
        (*lens)[j] = (uint32_t) len;
    }
    return true;
}

// tokenizer.ggml.token_type: one int32 per token (the converter writes int32).
static int32_t * gguf_token_types(const struct mg_gguf * g, int32_t n_tokens, bool * ok) {
    const char * key = "tokenizer.ggml.token_type";
    int64_t i = mg_gguf_find_key(g, key);
    if (i < 0) return NULL;
    enum mg_gguf_type type = mg_gguf_kv_type(g, i) == MG_GGUF_TYPE_ARRAY ? mg_gguf_arr_type(g, i) : MG_GGUF_TYPE_COUNT;
    if (type != MG_GGUF_TYPE_INT32 && type != MG_GGUF_TYPE_UINT32) {
        mg_set_error("%s: %s: expected an array of i32", mg_gguf_path(g), key);
        *ok = false;
        return NULL;
    }
    if (mg_gguf_arr_n(g, i) < (uint64_t) n_tokens) {
        mg_set_error("%s: %s: %llu types for %d tokens", mg_gguf_path(g), key,
                     (unsigned long long) mg_gguf_arr_n(g, i), n_tokens);
        *ok = false;
        return NULL;
    }
    int32_t * types = malloc((size_t) n_tokens * sizeof(int32_t));
    MG_ASSERT(types != NULL);
    memcpy(types, mg_gguf_arr_data(g, i), (size_t) n_tokens * sizeof(int32_t));   // little-endian, like the file
    return types;
}

struct mg_vocab * mg_vocab_load(const struct mg_gguf * g) {
    const char * path = mg_gguf_path(g);
    bool ok = true;
    struct mg_vocab_params p = mg_vocab_default_params();
    struct mg_vocab * v = NULL;
    uint32_t * token_lens = NULL, * merge_lens = NULL;
    const char ** tokens = NULL, ** merges = NULL;

    char * model = gguf_string(g, "tokenizer.ggml.model", &ok);
    char * pre = gguf_string(g, "tokenizer.ggml.pre", &ok);
    char * chat_template = gguf_string(g, "tokenizer.chat_template", &ok);
    if (!ok) goto done;
    if (model == NULL) {
        mg_set_error("%s: tokenizer.ggml.model: missing (the file has no tokenizer)", path);
        goto done;
    }
    if (strcmp(model, "gpt2") != 0) {
        mg_set_error("%s: tokenizer.ggml.model: '%s' is not supported (only 'gpt2', byte-level BPE)", path, model);
        goto done;
    }
    if (!gguf_string_array(g, "tokenizer.ggml.tokens", &tokens, &token_lens, &p.n_tokens)) goto done;
    if (!gguf_string_array(g, "tokenizer.ggml.merges", &merges, &merge_lens, &p.n_merges)) goto done;
    p.tokens = tokens;
    p.token_lens = token_lens;
    p.merges = merges;
    p.merge_lens = merge_lens;
    p.pre = pre;
    p.chat_template = chat_template;
    p.token_types = gguf_token_types(g, p.n_tokens, &ok);
    if (!ok) goto done;

    // A "gpt2" tokenizer without bos/eos keys uses id 11 for both (llama.cpp's default).
    p.special[MG_SPECIAL_BOS] = p.special[MG_SPECIAL_EOS] = 11;
    for (int which = 0; which < MG_SPECIAL_COUNT; which++) {
        const char * key = special_info[which].key;
        uint32_t id;
        if (mg_gguf_find_key(g, key) < 0) continue;
        if (!mg_gguf_get_u32(g, key, &id)) goto done;
        if (id < (uint32_t) p.n_tokens) {
            p.special[which] = (int32_t) id;
        } else {
            // llama.cpp warns ("bad special token") and keeps the default id; so do we, said on stderr.
            const int32_t fallback = p.special[which] < p.n_tokens ? p.special[which] : -1;
            char instead[48] = "ignored";
            if (fallback >= 0) snprintf(instead, sizeof(instead), "using the default id %d", fallback);
            fprintf(stderr, "mg: warning: %s: %s = %u is out of range (the vocabulary has %d tokens): %s\n",
                    mg_quote(path),
                    key, id, p.n_tokens, instead);
            p.special[which] = fallback;
        }
    }
    if (mg_gguf_find_key(g, "tokenizer.ggml.add_bos_token") >= 0
        && !mg_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &p.add_bos)) goto done;
    if (mg_gguf_find_key(g, "tokenizer.ggml.add_eos_token") >= 0
        && !mg_gguf_get_bool(g, "tokenizer.ggml.add_eos_token", &p.add_eos)) goto done;

    v = vocab_build(&p, path);

done:
    free((void *) p.token_types);
    free(tokens);
    free(token_lens);
    free(merges);
    free(merge_lens);
    free(model);
    free(pre);
    free(chat_template);
    return v;
}

// ---------------------------------------------------------------------------
// Questions
// ---------------------------------------------------------------------------

int32_t mg_vocab_n_tokens(const struct mg_vocab * v) { return v->n_tokens; }
int32_t mg_vocab_n_merges(const struct mg_vocab * v) { return v->n_merges; }
const char * mg_vocab_pre(const struct mg_vocab * v) { return v->pre; }
const char * mg_vocab_chat_template(const struct mg_vocab * v) { return v->chat_template; }

const char * mg_vocab_token_text(const struct mg_vocab * v, int32_t token) {
    return token >= 0 && token < v->n_tokens ? token_text(v, token) : NULL;
}

int32_t mg_vocab_token_attr(const struct mg_vocab * v, int32_t token) {
    return token >= 0 && token < v->n_tokens ? v->tokens[token].attr : MG_TOKEN_ATTR_UNDEFINED;
}

int32_t mg_vocab_special(const struct mg_vocab * v, enum mg_special_token which) {
    return (int) which >= 0 && (int) which < MG_SPECIAL_COUNT ? v->special[which] : -1;
}

int32_t mg_vocab_bos(const struct mg_vocab * v) { return v->special[MG_SPECIAL_BOS]; }
int32_t mg_vocab_eos(const struct mg_vocab * v) { return v->special[MG_SPECIAL_EOS]; }
int32_t mg_vocab_eot(const struct mg_vocab * v) { return v->special[MG_SPECIAL_EOT]; }
bool mg_vocab_add_bos(const struct mg_vocab * v) { return v->add_bos; }
bool mg_vocab_add_eos(const struct mg_vocab * v) { return v->add_eos; }

bool mg_vocab_is_eog(const struct mg_vocab * v, int32_t token) {
    return token >= 0 && token < v->n_tokens && v->tokens[token].eog;
}

// ---------------------------------------------------------------------------
// BPE (llm_tokenizer_bpe_session::tokenize)
// ---------------------------------------------------------------------------

// A symbol is a stretch word[start, start + len) of the piece being merged,
// linked to its neighbours. Merging makes the left symbol longer and the
// right one empty, so a symbol's start never moves.
struct symbol {
    int32_t  prev;
    int32_t  next;
    uint32_t start;
    uint32_t len;
};

// A candidate merge of two neighbouring symbols (llm_bigram_bpe).
struct bigram {
    int32_t  rank;
    int32_t  left;
    int32_t  right;
    uint32_t len;        // left.len + right.len when it was found
};

// The scratch of one mg_tokenize call.
struct session {
    uint32_t *       cpts;
    size_t           cpts_cap;
    struct mg_pieces pieces;
    struct bytes     word;
    struct symbol *  symbols;
    size_t           symbols_cap;
    struct bigram *  heap;         // a binary min-heap
    size_t           heap_n;
    size_t           heap_cap;
    struct ids       out;
    bool             failed;               // the heap, symbols or code points ran out of memory
    int              missing;              // the first byte of the text the vocabulary has no token for, or -1
    char             missing_spelled[8];   // its character in the byte alphabet
};

// The priority order: the lowest rank first; on a tie, the leftmost pair
// (llm_bigram_bpe::comparator). Ties happen when one merge applies in two
// places ("a a a": the left "a a" merges first).
static bool bigram_before(const struct bigram * a, const struct bigram * b) {
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static void heap_push(struct session * s, struct bigram b) {
    struct bigram * heap = s->failed ? NULL : grow(s->heap, &s->heap_cap, s->heap_n + 1, sizeof(struct bigram));
    if (heap == NULL) {
        s->failed = true;
        return;
    }
    s->heap = heap;
    size_t i = s->heap_n++;
    while (i > 0 && bigram_before(&b, &s->heap[(i - 1) / 2])) {
        s->heap[i] = s->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    s->heap[i] = b;
}

static struct bigram heap_pop(struct session * s) {
    struct bigram top = s->heap[0];
    struct bigram last = s->heap[--s->heap_n];
    size_t i = 0;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= s->heap_n) break;
        if (child + 1 < s->heap_n && bigram_before(&s->heap[child + 1], &s->heap[child])) child++;
        if (!bigram_before(&s->heap[child], &last)) break;
        s->heap[i] = s->heap[child];
        i = child;
    }
    if (s->heap_n > 0) s->heap[i] = last;
    return top;
}

// Queues the merge of symbols left and right if the vocabulary has one (add_new_bigram).
static void add_bigram(const struct mg_vocab * v, struct session * s, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const struct symbol * l = &s->symbols[left];
    const struct symbol * r = &s->symbols[right];
    const char * word = s->word.data;
    int32_t rank = find_merge(v, word + l->start, l->len, word + r->start, r->len);
    if (rank < 0) return;
    heap_push(s, (struct bigram) { rank, left, right, l->len + r->len });
}

// The final symbols of a piece become tokens. A symbol that is no token
// (a vocabulary whose merges make strings it lacks, or that lacks a byte's
// character) falls back to the tokens of its single bytes, one byte of the
// spelled-out text at a time, as llama.cpp does. Where one of those is no
// token either, llama.cpp drops it and the text silently loses a byte; here
// the first such byte is kept in s->missing and mg_tokenize fails, naming it.
static void emit_symbol(const struct mg_vocab * v, struct session * s, const struct symbol * sym) {
    const char * text = s->word.data + sym->start;
    int32_t id = mg_vocab_find(v, text, sym->len);
    if (id >= 0) {
        ids_push(&s->out, id);
        return;
    }
    for (uint32_t k = 0; k < sym->len; k++) {
        int32_t byte_id = mg_vocab_find(v, text + k, 1);
        if (byte_id >= 0) {
            ids_push(&s->out, byte_id);
        } else if (s->missing < 0) {
            // The character of the byte alphabet that byte k is part of, and the text's byte it spells.
            uint32_t at = k;
            while (at > 0 && ((uint8_t) text[at] & 0xC0) == 0x80) at--;
            size_t         end = at;
            const uint32_t cpt = mg_utf8_decode(text, sym->len, &end);
            s->missing = mg_unicode_cpt_to_byte(cpt);
            snprintf(s->missing_spelled, sizeof(s->missing_spelled), "%.*s", (int) (end - at), text + at);
        }
    }
}

// MG_TRACE=bpe: the ids out[from..] that the last piece became.
static void trace_ids(const struct ids * out, size_t from) {
    char line[256];
    size_t n = 0;
    for (size_t i = from; i < out->n; i++) {
        if (n + 16 > sizeof(line)) {   // an id is at most 11 characters and a space
            snprintf(line + n, sizeof(line) - n, " ...");
            break;
        }
        n += (size_t) snprintf(line + n, sizeof(line) - n, " %d", out->data[i]);
    }
    mg_trace(MG_TRACE_BPE, "  ids:%s", line);
}

// MG_TRACE=bpe: the symbols of a word as "[a] [b] ...", in the byte
// alphabet, cut short on a long piece. Only called when the trace is on.
static void trace_symbols(const struct session * s, const char * what) {
    char line[512] = "";
    size_t n = 0;
    for (int32_t i = 0; i >= 0; i = s->symbols[i].next) {
        const struct symbol * sym = &s->symbols[i];
        if (n + sym->len + 8 > sizeof(line)) {   // room for " [...]" and " ..." checked before writing
            snprintf(line + n, sizeof(line) - n, " ...");
            break;
        }
        n += (size_t) snprintf(line + n, sizeof(line) - n, "%s[%.*s]", n ? " " : "", (int) sym->len,
                               s->word.data + sym->start);
    }
    mg_trace(MG_TRACE_BPE, "  %s %s", what, line);
}

// BPE-merges s->word (one pre-tokenizer piece in the byte alphabet).
static void bpe_word(const struct mg_vocab * v, struct session * s) {
    const bool trace = mg_trace_on(MG_TRACE_BPE);   // one test per piece: nothing more when off
    const char * word = s->word.data;
    const uint32_t len = (uint32_t) s->word.n;

    // The starting symbols are the characters of the word.
    int32_t n = 0;
    for (uint32_t pos = 0; pos < len; n++) {
        uint8_t lead = (uint8_t) word[pos];
        uint32_t char_len = lead < 0xC0 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
        if (char_len > len - pos) char_len = len - pos;
        struct symbol * symbols = grow(s->symbols, &s->symbols_cap, (size_t) n + 1, sizeof(struct symbol));
        if (symbols == NULL) {
            s->failed = true;
            return;
        }
        s->symbols = symbols;
        s->symbols[n] = (struct symbol) { n - 1, pos + char_len < len ? n + 1 : -1, pos, char_len };
        pos += char_len;
    }

    s->heap_n = 0;
    for (int32_t i = 1; i < n; i++) add_bigram(v, s, i - 1, i);
    if (trace) trace_symbols(s, "symbols:");

    while (s->heap_n > 0) {
        struct bigram b = heap_pop(s);
        struct symbol * left = &s->symbols[b.left];
        struct symbol * right = &s->symbols[b.right];
        // Stale: one side was merged away, or changed since the pair was
        // queued. llama.cpp compares the texts left + right and b's; as both
        // start where left starts, equal lengths mean equal texts.
        if (left->len == 0 || right->len == 0 || left->len + right->len != b.len) continue;

        const uint32_t right_len = right->len;
        left->len += right->len;
        right->len = 0;
        left->next = right->next;
        if (right->next >= 0) s->symbols[right->next].prev = b.left;

        add_bigram(v, s, left->prev, b.left);
        add_bigram(v, s, b.left, left->next);
        if (trace) {
            char what[160];
            snprintf(what, sizeof(what), "merge rank %5d: [%.*s] + [%.*s] ->", b.rank, (int) (b.len - right_len),
                     word + left->start, (int) right_len, word + left->start + (b.len - right_len));
            trace_symbols(s, what);
        }
    }

    const size_t first_id = s->out.n;
    for (int32_t i = 0; i < n; i++) {
        if (s->symbols[i].len > 0) emit_symbol(v, s, &s->symbols[i]);
    }
    if (trace) trace_ids(&s->out, first_id);
}

// Pre-tokenizes and merges one stretch of text that holds no special token.
static void tokenize_text(const struct mg_vocab * v, struct session * s, const char * text, size_t len) {
    uint32_t * cpts = s->failed ? NULL : grow(s->cpts, &s->cpts_cap, len + 1, sizeof(uint32_t));
    if (cpts == NULL) {
        s->failed = true;
        return;
    }
    s->cpts = cpts;
    const size_t n = mg_utf8_to_cpts(text, len, s->cpts);
    mg_pretokenize(v->pre_type, s->cpts, n, &s->pieces);
    if (s->pieces.failed) {
        s->failed = true;
        return;
    }
    const bool trace = mg_trace_on(MG_TRACE_BPE);
    if (trace) {
        mg_trace(MG_TRACE_BPE, "pre-tokenizer '%s': %zu code points -> %zu piece%s", v->pre, n, s->pieces.n,
                 s->pieces.n == 1 ? "" : "s");
    }

    size_t start = 0;
    for (size_t i = 0; i < s->pieces.n; i++) {
        // The piece's bytes, each spelled as its character of the byte alphabet.
        // The bytes are those of the decoded code points, so an invalid byte
        // arrives here as U+FFFD's EF BF BD (unicode_byte_encoding_process).
        s->word.n = 0;
        char hex[3 * 24 + 8] = "";
        size_t n_hex = 0, n_bytes = 0;
        for (size_t k = start; k < start + s->pieces.len[i]; k++) {
            char utf8[4], spelled[4];
            size_t nb = mg_utf8_encode(s->cpts[k], utf8);
            for (size_t j = 0; j < nb; j++) {
                bytes_append(&s->word, spelled, mg_utf8_encode(mg_unicode_byte_to_cpt((uint8_t) utf8[j]), spelled));
                if (trace && n_bytes++ < 24) {
                    n_hex += (size_t) snprintf(hex + n_hex, sizeof(hex) - n_hex, " %02x", (unsigned) (uint8_t) utf8[j]);
                }
            }
        }
        if (trace) {
            size_t shown = s->word.n < 96 ? s->word.n : 96;   // a long piece: its start, cut between characters
            while (shown < s->word.n && ((uint8_t) s->word.data[shown] & 0xC0) == 0x80) shown--;
            mg_trace(MG_TRACE_BPE, "piece %zu: %zu byte%s%s%s, spelled '%.*s'%s", i, n_bytes, n_bytes == 1 ? "" : "s",
                     hex, n_bytes > 24 ? " ..." : "", (int) shown, s->word.data, shown < s->word.n ? " ..." : "");
        }
        start += s->pieces.len[i];
        bpe_word(v, s);
    }
}

// ---------------------------------------------------------------------------
// Special tokens (tokenizer_st_partition)
// ---------------------------------------------------------------------------

// A stretch of the input: text[start, start + len) still to tokenize
// (token < 0), or a special token found there.
struct fragment {
    int32_t token;
    size_t  start;
    size_t  len;
};

struct fragments {
    struct fragment * data;
    size_t            n;
    size_t            cap;
    bool              failed;   // a push ran out of memory
};

static void fragments_push(struct fragments * f, int32_t token, size_t start, size_t len) {
    if (token < 0 && len == 0) return;
    struct fragment * data = f->failed ? NULL : grow(f->data, &f->cap, f->n + 1, sizeof(struct fragment));
    if (data == NULL) {
        f->failed = true;
        return;
    }
    f->data = data;
    f->data[f->n++] = (struct fragment) { token, start, len };
}

// The first occurrence of needle in hay, or NULL.
static const char * find_bytes(const char * hay, size_t n, const char * needle, size_t m) {
    if (m == 0 || m > n) return NULL;
    const char * last = hay + (n - m);
    for (const char * p = hay; p <= last; p++) {
        p = memchr(p, needle[0], (size_t) (last - p) + 1);
        if (p == NULL) return NULL;
        if (memcmp(p, needle, m) == 0) return p;
    }
    return NULL;
}

// Cuts every occurrence of the special tokens out of the text, token by
// token in special_order: an earlier (longer) token is found first, and a
// later one is only looked for in the text left between.
static void partition(const struct mg_vocab * v, const char * text, size_t len, bool parse_special,
                      struct fragments * f) {
    struct fragments next = {0};
    f->n = 0;
    fragments_push(f, -1, 0, len);
    for (int32_t k = 0; k < v->n_special_order; k++) {
        const int32_t id = v->special_order[k];
        const struct token * t = &v->tokens[id];
        if (!parse_special && (t->attr & (MG_TOKEN_ATTR_CONTROL | MG_TOKEN_ATTR_UNKNOWN))) {
            continue;   // USER_DEFINED tokens are cut out even then
        }
        next.n = 0;
        for (size_t i = 0; i < f->n; i++) {
            struct fragment fr = f->data[i];
            const char * hit;
            while (fr.token < 0 && (hit = find_bytes(text + fr.start, fr.len, token_text(v, id), t->text_len))) {
                size_t left = (size_t) (hit - (text + fr.start));
                fragments_push(&next, -1, fr.start, left);
                fragments_push(&next, id, 0, 0);
                fr.start += left + t->text_len;
                fr.len -= left + t->text_len;
            }
            if (fr.token >= 0 || fr.len > 0) fragments_push(&next, fr.token, fr.start, fr.len);
        }
        struct fragments swap = *f;
        *f = next;
        next = swap;
        if (next.failed) f->failed = true;   // next held the list before this token: keep its failure
    }
    free(next.data);
}

// The text's ids into s->out (the caller frees s->out.data, whatever the
// result); the other buffers of the session are freed here. False after
// mg_set_error.
static bool tokenize_session(const struct mg_vocab * v, const char * text, size_t len, bool add_special,
                             bool parse_special, struct session * s) {
    memset(s, 0, sizeof(*s));
    struct fragments f = {0};
    s->missing = -1;

    if (add_special && v->add_bos) ids_push(&s->out, v->special[MG_SPECIAL_BOS]);
    partition(v, text, len, parse_special, &f);
    for (size_t i = 0; i < f.n; i++) {
        if (f.data[i].token >= 0) {
            if (mg_trace_on(MG_TRACE_BPE)) {
                mg_trace(MG_TRACE_BPE, "special token '%s' cut out before BPE: id %d", token_text(v, f.data[i].token),
                         f.data[i].token);
            }
            ids_push(&s->out, f.data[i].token);
        } else {
            tokenize_text(v, s, text + f.data[i].start, f.data[i].len);
        }
    }
    if (add_special && v->add_eos) ids_push(&s->out, v->special[MG_SPECIAL_EOS]);

    bool ok = true;
    if (s->failed || s->out.failed || s->word.failed || f.failed) {
        mg_set_error("mg_tokenize: out of memory tokenizing a text of %zu bytes", len);
        ok = false;
    } else if (s->missing >= 0) {
        mg_set_error("the vocabulary has no token for the byte 0x%02X (spelled '%s' in GPT-2's byte alphabet), so "
                     "the text cannot be tokenized without losing it (llama.cpp drops it silently)",
                     (unsigned) s->missing, s->missing_spelled);
        ok = false;
    } else if (s->out.n > (size_t) INT32_MAX) {
        mg_set_error("mg_tokenize: %zu tokens do not fit in an int32_t", s->out.n);
        ok = false;
    }
    free(f.data);
    free(s->cpts);
    mg_pieces_free(&s->pieces);
    free(s->word.data);
    free(s->symbols);
    free(s->heap);
    return ok;
}

int32_t mg_tokenize(const struct mg_vocab * v, const char * text, int32_t text_len, int32_t * tokens, int32_t n_max,
                    bool add_special, bool parse_special) {
    const size_t len = text == NULL ? 0 : text_len < 0 ? strlen(text) : (size_t) text_len;
    struct session s;
    int32_t result;
    if (!tokenize_session(v, text, len, add_special, parse_special, &s)) {
        result = INT32_MIN;
    } else if ((int64_t) s.out.n > (int64_t) n_max) {
        result = -(int32_t) s.out.n;
    } else {
        if (s.out.n > 0) memcpy(tokens, s.out.data, s.out.n * sizeof(int32_t));
        result = (int32_t) s.out.n;
    }
    free(s.out.data);
    return result;
}

// ---------------------------------------------------------------------------
// Ids -> text
// ---------------------------------------------------------------------------

// The bytes token prints; *len = 0 for CONTROL/UNKNOWN tokens unless special.
static const char * token_piece(const struct mg_vocab * v, int32_t token, bool special, size_t * len) {
    if (token < 0 || token >= v->n_tokens) {
        mg_set_error("token id %d is out of range (the vocabulary has %d tokens)", token, v->n_tokens);
        *len = 0;
        return "";
    }
    const struct token * t = &v->tokens[token];
    const bool hidden = !special && (t->attr & (MG_TOKEN_ATTR_CONTROL | MG_TOKEN_ATTR_UNKNOWN));
    *len = hidden ? 0 : t->piece_len;
    return v->pieces + t->piece;
}

int32_t mg_token_to_piece(const struct mg_vocab * v, int32_t token, char * buf, int32_t size, bool special) {
    size_t len;
    const char * piece = token_piece(v, token, special, &len);
    if ((int64_t) len > (int64_t) size) return -(int32_t) len;
    if (len > 0) memcpy(buf, piece, len);
    return (int32_t) len;
}

void mg_detok_init(struct mg_detok * d, bool special) {
    memset(d, 0, sizeof(*d));
    d->special = special;
}

// How many bytes at the end of a stream (whose last bytes are tail[0..n),
// n <= 3) are the start of a character that is not finished yet: a lead byte
// followed by fewer continuation bytes than it announces.
static int32_t unfinished_len(const uint8_t * tail, int32_t n) {
    for (int32_t k = 1; k <= n; k++) {
        uint8_t b = tail[n - k];
        if ((b & 0xC0) == 0x80) continue;   // a continuation byte: look further back
        int32_t need = b >= 0xF0 && b < 0xF8 ? 4 : b >= 0xE0 && b < 0xF0 ? 3 : b >= 0xC0 && b < 0xE0 ? 2 : 1;
        return need > k ? k : 0;
    }
    return 0;   // only continuation bytes: nothing that could still complete
}

int32_t mg_detok_push(struct mg_detok * d, const struct mg_vocab * v, int32_t token, char * out, int32_t out_size) {
    size_t piece_len;
    const char * piece = token_piece(v, token, d->special, &piece_len);
    const int64_t total = d->n_pending + (int64_t) piece_len;

    // The last (up to) three bytes of pending + piece decide what to hold back.
    uint8_t tail[3];
    int32_t n_tail = total < 3 ? (int32_t) total : 3;
    for (int32_t k = 0; k < n_tail; k++) {
        int64_t at = total - n_tail + k;   // index in pending + piece
        tail[k] = (uint8_t) (at < d->n_pending ? d->pending[at] : piece[at - d->n_pending]);
    }
    const int32_t hold = unfinished_len(tail, n_tail);
    const int64_t n_out = total - hold;
    if (n_out > (int64_t) out_size) return -(int32_t) n_out;

    // out = (pending + piece) minus the held tail; the tail becomes pending.
    const int64_t n_from_pending = n_out < d->n_pending ? n_out : d->n_pending;
    for (int64_t i = 0; i < n_from_pending; i++) out[i] = d->pending[i];
    for (int64_t i = n_from_pending; i < n_out; i++) out[i] = piece[i - d->n_pending];
    for (int32_t i = 0; i < hold; i++) d->pending[i] = (char) tail[n_tail - hold + i];
    d->n_pending = hold;
    return (int32_t) n_out;
}

int32_t mg_detok_flush(struct mg_detok * d, char * out, int32_t out_size) {
    if (d->n_pending > out_size) return -d->n_pending;
    for (int32_t i = 0; i < d->n_pending; i++) out[i] = d->pending[i];
    int32_t n = d->n_pending;
    d->n_pending = 0;
    return n;
}
