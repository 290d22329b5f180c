// Generated from full/unicode.c by tools/chapgen. In a class, edit this copy freely (make chapters will not overwrite your edits); to change the engine, edit full/unicode.c and run make chapters.
// unicode.c - UTF-8, character classes, the GPT-2 byte alphabet and the
// pre-tokenizers of unicode.h.
//
// Mirrors llama.cpp's src/unicode.cpp: unicode_cpt_from_utf8,
// unicode_cpts_from_utf8, unicode_cpt_to_utf8, unicode_cpt_flags_from_cpt,
// unicode_byte_to_utf8_map, and the splitters behind unicode_regex_split
// (unicode_regex_split_custom_gpt2 and ..._custom_qwen2).
#include "unicode.h"
#include "tensor.h"

#include <stdlib.h>

// ---------------------------------------------------------------------------
// Character classes
// ---------------------------------------------------------------------------

uint16_t mg_unicode_flags(uint32_t cpt) {
    // Binary search for the last row with first <= cpt.
    int lo = 0, hi = mg_unicode_n_ranges - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        const struct mg_unicode_range * r = &mg_unicode_ranges[mid];
        if (cpt < r->first) {
            hi = mid - 1;
        } else if (cpt > r->last) {
            lo = mid + 1;
        } else {
            return r->flags;
        }
    }
    return MG_UNICODE_UNDEFINED;
}

// ---------------------------------------------------------------------------
// UTF-8
// ---------------------------------------------------------------------------

static bool is_continuation(const char * s, size_t len, size_t i) {
    return i < len && ((uint8_t) s[i] & 0xC0) == 0x80;
}

uint32_t mg_utf8_decode(const char * s, size_t len, size_t * pos) {
    MG_ASSERT(*pos < len);
    const size_t i = *pos;
    const uint8_t b0 = (uint8_t) s[i];

    // The length a lead byte announces: 0xxxxxxx 1, 110xxxxx 2, 1110xxxx 3,
    // 11110xxx 4; a continuation byte (10xxxxxx) or 11111xxx cannot start one.
    size_t n = b0 < 0x80 ? 1 : b0 < 0xC0 ? 0 : b0 < 0xE0 ? 2 : b0 < 0xF0 ? 3 : b0 < 0xF8 ? 4 : 0;
    for (size_t k = 1; k < n; k++) {
        if (!is_continuation(s, len, i + k)) n = 0;   // truncated or interrupted
    }

    uint32_t cpt = 0;
    switch (n) {
        case 1: cpt = b0; break;
        case 2: cpt = (uint32_t) (b0 & 0x1F) << 6; break;
        case 3: cpt = (uint32_t) (b0 & 0x0F) << 12; break;
        case 4: cpt = (uint32_t) (b0 & 0x07) << 18; break;
        default: break;
    }
    for (size_t k = 1; k < n; k++) {
        cpt |= (uint32_t) ((uint8_t) s[i + k] & 0x3F) << (6 * (n - 1 - k));
    }
    if (n == 0 || cpt > 0x10FFFF) {
        *pos = i + 1;   // not a sequence: this one byte is replaced, the next byte starts afresh
        return MG_UNICODE_REPLACEMENT;
    }
    *pos = i + n;
    return cpt;
}

size_t mg_utf8_to_cpts(const char * s, size_t len, uint32_t * cpts) {
    size_t n = 0;
    for (size_t pos = 0; pos < len; ) {
        cpts[n++] = mg_utf8_decode(s, len, &pos);
    }
    return n;
}

size_t mg_utf8_encode(uint32_t cpt, char out[4]) {
    MG_ASSERT(cpt <= 0x10FFFF);
    if (cpt < 0x80) {
        out[0] = (char) cpt;
        return 1;
    }
    if (cpt < 0x800) {
        out[0] = (char) (0xC0 | (cpt >> 6));
        out[1] = (char) (0x80 | (cpt & 0x3F));
        return 2;
    }
    if (cpt < 0x10000) {
        out[0] = (char) (0xE0 | (cpt >> 12));
        out[1] = (char) (0x80 | ((cpt >> 6) & 0x3F));
        out[2] = (char) (0x80 | (cpt & 0x3F));
        return 3;
    }
    out[0] = (char) (0xF0 | (cpt >> 18));
    out[1] = (char) (0x80 | ((cpt >> 12) & 0x3F));
    out[2] = (char) (0x80 | ((cpt >> 6) & 0x3F));
    out[3] = (char) (0x80 | (cpt & 0x3F));
    return 4;
}

// ---------------------------------------------------------------------------
// GPT-2's byte alphabet. GPT-2 wanted every byte to be a visible character,
// so that a vocabulary file never holds spaces or control characters: the
// bytes that print stay themselves, and the 68 that do not are moved, in
// order, to U+0100..U+0143. Those 68 are three runs:
//     0x00..0x20 (33 bytes)  -> U+0100..U+0120
//     0x7F..0xA0 (34 bytes)  -> U+0121..U+0142
//     0xAD       (soft hyphen) -> U+0143
// ---------------------------------------------------------------------------

uint32_t mg_unicode_byte_to_cpt(uint8_t byte) {
    if (byte <= 0x20) return 0x100 + byte;
    if (byte >= 0x7F && byte <= 0xA0) return 0x121 + (byte - 0x7Fu);
    if (byte == 0xAD) return 0x143;
    return byte;
}

int mg_unicode_cpt_to_byte(uint32_t cpt) {
    if (cpt <= 0x20 || (cpt >= 0x7F && cpt <= 0xA0) || cpt == 0xAD) return -1;   // moved away
    if (cpt <= 0xFF) return (int) cpt;
    if (cpt <= 0x120) return (int) (cpt - 0x100);
    if (cpt <= 0x142) return (int) (0x7F + (cpt - 0x121));
    if (cpt == 0x143) return 0xAD;
    return -1;
}

// ---------------------------------------------------------------------------
// Pre-tokenizers
// ---------------------------------------------------------------------------

const char * mg_pretok_name(enum mg_pretok type) {
    switch (type) {
        case MG_PRETOK_GPT2:    return "gpt2";
        case MG_PRETOK_QWEN2:   return "qwen2";
    }
    return "?";
}

void mg_pieces_push(struct mg_pieces * p, size_t len) {
    if (len == 0 || p->failed) return;
    MG_ASSERT(len <= UINT32_MAX);   // a piece is part of one text, and texts are far shorter (vocab.h)
    if (p->n == p->cap) {
        const size_t cap = p->cap ? 2 * p->cap : 64;
        uint32_t *   bigger = realloc(p->len, cap * sizeof(p->len[0]));
        if (bigger == NULL) {   // the old array is kept (and freed by mg_pieces_free)
            p->failed = true;
            return;
        }
        p->len = bigger;
        p->cap = cap;
    }
    p->len[p->n++] = (uint32_t) len;
}

void mg_pieces_free(struct mg_pieces * p) {
    free(p->len);
    p->len = NULL;
    p->n = p->cap = 0;
    p->failed = false;
}

// One piece being cut further: the code points [begin, end) of cpts. The
// matchers may look one or two code points past a position, so reads go
// through cpt_at/flags_at, which answer "nothing" outside the piece, exactly
// like llama.cpp's _get_cpt (OUT_OF_RANGE) and _get_flags (all flags clear).
struct span {
    const uint32_t * cpts;
    size_t           begin;
    size_t           end;
};

#define OUT_OF_RANGE 0xFFFFFFFFu

static uint32_t cpt_at(const struct span * s, size_t pos) {
    return pos >= s->begin && pos < s->end ? s->cpts[pos] : OUT_OF_RANGE;
}

static uint16_t flags_at(const struct span * s, size_t pos) {
    return pos >= s->begin && pos < s->end ? mg_unicode_flags(s->cpts[pos]) : 0;
}

static bool is_letter(uint16_t f)  { return f & MG_UNICODE_LETTER; }
static bool is_number(uint16_t f)  { return f & MG_UNICODE_NUMBER; }
static bool is_space(uint16_t f)   { return f & MG_UNICODE_WHITESPACE; }

// [^\s\p{L}\p{N}] inside a piece (f == 0 means past its end).
static bool is_other(uint16_t f) {
    return f != 0 && !(f & (MG_UNICODE_WHITESPACE | MG_UNICODE_LETTER | MG_UNICODE_NUMBER));
}

static uint32_t ascii_lower(uint32_t c) {
    return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

// 's 't 'm 'd (2 code points) or 're 've 'll (3) at pos; 0 if none. llama.cpp
// lowercases with its Unicode table for QWEN2; only the ASCII capitals lower
// to these letters (tools/gen_unicode.c checks), so ASCII tolower is the same.
static size_t contraction_len(const struct span * s, size_t pos, bool any_case) {
    if (cpt_at(s, pos) != '\'' || pos + 1 >= s->end) return 0;
    uint32_t c1 = cpt_at(s, pos + 1);
    if (any_case) c1 = ascii_lower(c1);
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
    if (pos + 2 >= s->end) return 0;
    uint32_t c2 = cpt_at(s, pos + 2);
    if (any_case) c2 = ascii_lower(c2);
    if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return 3;
    return 0;
}

// The whitespace rules shared by GPT2 and QWEN2, for a run of white space at
// pos that no earlier rule took. Returns where the piece ends.
static size_t match_whitespace(const struct span * s, size_t pos) {
    size_t n = 0;
    while (is_space(flags_at(s, pos + n))) n++;
    // \s+(?!\S): a run followed by more text keeps its last space, which the
    // next piece then starts with (" world").
    if (n > 1 && cpt_at(s, pos + n) != OUT_OF_RANGE) return pos + n - 1;
    // \s+ (a run at the end of the piece, or a single space).
    if (n > 0) return pos + n;
    return pos + 1;   // no rule matched: the code point is a piece by itself
}

// GPT2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
// (llama.cpp unicode_regex_split_custom_gpt2)
static void split_gpt2(const struct span * s, struct mg_pieces * out) {
    size_t pos = s->begin;
    while (pos < s->end) {
        const size_t start = pos;
        const uint32_t c = cpt_at(s, pos);

        size_t n = contraction_len(s, pos, false);   // case-sensitive: "'S" is no contraction
        if (n > 0) {
            mg_pieces_push(out, n);
            pos += n;
            continue;
        }

        // The three " ?X+" rules: an optional space, then a run of one class.
        // The class is decided by the code point after the space.
        const size_t first = c == ' ' ? pos + 1 : pos;
        const uint16_t f = flags_at(s, first);
        if (is_letter(f)) {
            pos = first;
            while (is_letter(flags_at(s, pos))) pos++;
        } else if (is_number(f)) {
            pos = first;
            while (is_number(flags_at(s, pos))) pos++;
        } else if (is_other(f)) {
            pos = first;
            while (is_other(flags_at(s, pos))) pos++;
        } else {
            pos = match_whitespace(s, pos);
        }
        mg_pieces_push(out, pos - start);
    }
}

// QWEN2: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}
//        | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// (llama.cpp unicode_regex_split_custom_qwen2). Unlike GPT2: contractions in
// any case, one punctuation or space character may lead a word (".net",
// " hello"), numbers are cut into single digits, punctuation swallows the
// newlines after it, and newlines end a white-space piece. max_digits is 1
// here; full/'s Llama 3 pre-tokenizer is the same with \p{N}{1,3}: 3
// (llama.cpp unicode_regex_split_custom_llama3).
static void split_qwen2(const struct span * s, size_t max_digits, struct mg_pieces * out) {
    size_t pos = s->begin;
    while (pos < s->end) {
        const size_t start = pos;
        const uint32_t c = cpt_at(s, pos);
        const uint16_t f = flags_at(s, pos);

        size_t n = contraction_len(s, pos, true);
        if (n > 0) {
            mg_pieces_push(out, n);
            pos += n;
            continue;
        }

        // [^\r\n\p{L}\p{N}]?\p{L}+ : letters, perhaps led by one other character.
        if (c != '\r' && c != '\n' && !is_number(f) && (is_letter(f) || is_letter(flags_at(s, pos + 1)))) {
            pos++;
            while (is_letter(flags_at(s, pos))) pos++;
            mg_pieces_push(out, pos - start);
            continue;
        }

        // \p{N} : one digit (\p{N}{1,max_digits}: up to max_digits of them).
        if (is_number(f)) {
            size_t n_digits = 1;
            while (n_digits < max_digits && is_number(flags_at(s, pos + n_digits))) n_digits++;
            mg_pieces_push(out, n_digits);
            pos += n_digits;
            continue;
        }

        // ' ?[^\s\p{L}\p{N}]+[\r\n]*'. llama.cpp tests "this position is inside the
        // piece" (f != 0) rather than is_other() of the code point after the space,
        // so a space that ends the piece is taken here, alone; the result is
        // the same as the white-space rules would give.
        const size_t first = c == ' ' ? pos + 1 : pos;
        const uint16_t f2 = flags_at(s, first);
        if (f != 0 && !(f2 & (MG_UNICODE_WHITESPACE | MG_UNICODE_LETTER | MG_UNICODE_NUMBER))) {
            pos = first;
            while (is_other(flags_at(s, pos))) pos++;
            while (cpt_at(s, pos) == '\r' || cpt_at(s, pos) == '\n') pos++;
            mg_pieces_push(out, pos - start);
            continue;
        }

        // \s*[\r\n]+ : a white-space run that holds a newline ends after its last one.
        size_t n_space = 0, after_newline = 0;
        while (is_space(flags_at(s, pos + n_space))) {
            uint32_t c2 = cpt_at(s, pos + n_space);
            n_space++;
            if (c2 == '\r' || c2 == '\n') after_newline = pos + n_space;
        }
        pos = after_newline > 0 ? after_newline : match_whitespace(s, pos);
        mg_pieces_push(out, pos - start);
    }
}

enum split_step { STEP_GPT2, STEP_QWEN2,
};

// Applies one regex to every piece of in, appending the new pieces to out.
static void apply_step(enum split_step step, const uint32_t * cpts, const struct mg_pieces * in,
                       struct mg_pieces * out) {
    out->n = 0;
    size_t begin = 0;
    for (size_t i = 0; i < in->n; i++) {
        const struct span s = { cpts, begin, begin + in->len[i] };
        switch (step) {
            case STEP_GPT2:         split_gpt2(&s, out); break;
            case STEP_QWEN2:        split_qwen2(&s, 1, out); break;
        }
        begin = s.end;
    }
}

void mg_pretokenize(enum mg_pretok type, const uint32_t * cpts, size_t n, struct mg_pieces * out) {
    static const enum split_step gpt2[]  = { STEP_GPT2 };
    static const enum split_step qwen2[] = { STEP_QWEN2 };

    const enum split_step * steps = gpt2;
    size_t n_steps = 1;
    switch (type) {
        case MG_PRETOK_GPT2:    steps = gpt2;  n_steps = 1; break;
        case MG_PRETOK_QWEN2:   steps = qwen2; n_steps = 1; break;
    }

    // Start from one piece holding everything; each step cuts every piece.
    out->n = 0;
    mg_pieces_push(out, n);
    struct mg_pieces tmp = {0};
    for (size_t i = 0; i < n_steps; i++) {
        apply_step(steps[i], cpts, out, &tmp);
        struct mg_pieces swap = *out;
        *out = tmp;
        tmp = swap;
        if (tmp.failed) out->failed = true;   // cut from incomplete pieces: incomplete too
    }
    mg_pieces_free(&tmp);
}
