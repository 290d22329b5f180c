//@file 09
// unicode.h - the Unicode a byte-level BPE tokenizer needs: UTF-8, character
// classes, GPT-2's byte <-> character map, and the pre-tokenizers that cut
// text into words before BPE sees it.
//
// Worked example: pre-tokenizing "Hello  world's 2024!" with GPT-2's rules.
//
//     uint32_t cpts[32];
//     size_t n = mg_utf8_to_cpts("Hello  world's 2024!", 20, cpts);   // 20 code points
//     struct mg_pieces pieces = {0};
//     mg_pretokenize(MG_PRETOK_GPT2, cpts, n, &pieces);
//     // pieces.len = {5, 1, 6, 2, 5, 1}:
//     //   "Hello" " " " world" "'s" " 2024" "!"
//     //   the first of the two spaces stands alone, so that the second can
//     //   start " world" (the regex's \s+(?!\S)); "'s" is a contraction.
//     mg_pieces_free(&pieces);
//
// Then every piece's UTF-8 bytes are spelled with GPT-2's byte alphabet
// (mg_unicode_byte_to_cpt: ' ' -> U+0120 'Ġ', '\n' -> U+010A 'Ċ'), which is
// the form the vocabulary and the merges are stored in; see vocab.c.
//
// Everything here mirrors llama.cpp's src/unicode.cpp, so that our token ids
// are the ids llama.cpp produces for the same text.
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// ---------------------------------------------------------------------------
// Character classes. One general-category flag per code point (from
// UnicodeData.txt), plus the White_Space bit. The values are llama.cpp's
// unicode_cpt_flags, so its regexes read the same here: \p{L} is LETTER, \s
// is WHITESPACE, and so on.
// ---------------------------------------------------------------------------

enum mg_unicode_flag {
    MG_UNICODE_UNDEFINED   = 0x0001,   // unassigned (Cn), or beyond U+10FFFF
    MG_UNICODE_NUMBER      = 0x0002,   // \p{N}: Nd Nl No
    MG_UNICODE_LETTER      = 0x0004,   // \p{L}: Lu Ll Lt Lm Lo
    MG_UNICODE_SEPARATOR   = 0x0008,   // \p{Z}: Zs Zl Zp
    MG_UNICODE_MARK        = 0x0010,   // \p{M}: Mn Mc Me
    MG_UNICODE_PUNCTUATION = 0x0020,   // \p{P}: Pc Pd Ps Pe Pi Pf Po
    MG_UNICODE_SYMBOL      = 0x0040,   // \p{S}: Sm Sc Sk So
    MG_UNICODE_CONTROL     = 0x0080,   // \p{C}: Cc Cf Co Cs
    MG_UNICODE_WHITESPACE  = 0x0100,   // \s: the White_Space property (25 code points)
};

// The generated table (unicode_data.c, written by tools/gen_unicode.c):
// sorted, non-overlapping rows; code points in no row are MG_UNICODE_UNDEFINED.
struct mg_unicode_range {
    uint32_t first;
    uint32_t last;    // inclusive
    uint16_t flags;
};
extern const struct mg_unicode_range mg_unicode_ranges[];
extern const int                     mg_unicode_n_ranges;
extern const char                    mg_unicode_version[];   // "15.0.0+15.1": see tools/gen_unicode.c

// The flags of any code point (never 0: at least MG_UNICODE_UNDEFINED).
uint16_t mg_unicode_flags(uint32_t cpt);

// ---------------------------------------------------------------------------
// UTF-8.
//
// Decoding is lenient and never fails, exactly like llama.cpp's
// unicode_cpts_from_utf8: a byte that does not start a complete sequence
// becomes U+FFFD and decoding resumes at the next byte. Like llama.cpp it
// checks only the shape of a sequence (lead byte, continuation bytes), so
// overlong forms decode to the value they spell ("\xC0\xAF" is '/') and
// surrogates decode to themselves. One difference: a 4-byte sequence above
// U+10FFFF (lead F4 with a large second byte, or F5..F7) makes llama.cpp throw
// an exception out of its tokenizer; here its lead byte becomes U+FFFD.
// ---------------------------------------------------------------------------

#define MG_UNICODE_REPLACEMENT 0xFFFDu

// Decodes the code point at s[*pos] (with *pos < len) and advances *pos.
uint32_t mg_utf8_decode(const char * s, size_t len, size_t * pos);

// Decodes all of s into cpts, which must have room for len code points.
// Returns the number of code points.
size_t mg_utf8_to_cpts(const char * s, size_t len, uint32_t * cpts);

// Writes the 1-4 byte UTF-8 form of cpt (<= 0x10FFFF) and returns its length.
size_t mg_utf8_encode(uint32_t cpt, char out[4]);

// ---------------------------------------------------------------------------
// GPT-2's byte-level alphabet (llama.cpp unicode_byte_to_utf8_map). The 188
// printable bytes 0x21-0x7E, 0xA1-0xAC, 0xAE-0xFF stand for themselves; the
// other 68 map, in byte order, to U+0100, U+0101, ...: 0x00 -> U+0100,
// ' ' -> U+0120 'Ġ', '\n' -> U+010A 'Ċ', 0xAD -> U+0143.
// ---------------------------------------------------------------------------

uint32_t mg_unicode_byte_to_cpt(uint8_t byte);
int      mg_unicode_cpt_to_byte(uint32_t cpt);   // the inverse; -1 if cpt is none of the 256

// ---------------------------------------------------------------------------
// Pre-tokenizers (llama.cpp unicode_regex_split). Each cuts a code point
// sequence into pieces with one or more regexes; every match of a regex is a
// piece and so is every stretch between matches. A pipeline of several regexes
// applies each one to every piece the previous one produced.
//
//   GPT2     's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
//   QWEN2    (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}
//            | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//@+ full pretok-default
//   DEFAULT  [\p{P}\$\+<=>\^~\|]+   then GPT2   then \p{N}+   then [0-9][0-9][0-9]
//@- full pretok-default
//@+ full llama-bpe
//   LLAMA3   QWEN2's with \p{N}{1,3} for \p{N}: digits in groups of up to three
//   SMOLLM   \p{N}   then GPT2: every digit a piece of its own first
//@- full llama-bpe
//
// None of this uses a regex engine: like llama.cpp's hand-written matchers,
// each regex is a loop that tries the alternatives in order at each position.
// ---------------------------------------------------------------------------

//@+ full pretok-default
#define MG_HAS_PRETOK_DEFAULT 1   // chapter 09 leaves llama.cpp's DEFAULT pipeline to full/
//@- full pretok-default
enum mg_pretok {
    //@+ full pretok-default
    MG_PRETOK_DEFAULT,   // tokenizer.ggml.pre missing or "default" (MG_HAS_PRETOK_DEFAULT)
    //@- full pretok-default
    MG_PRETOK_GPT2,      // "gpt-2" and the names that use its regex
    MG_PRETOK_QWEN2,     // "qwen2" and its aliases (Qwen3 models)
    //@+ full llama-bpe
    MG_PRETOK_LLAMA3,    // "llama-bpe" and its aliases (Llama 3)
    MG_PRETOK_SMOLLM,    // "smollm" (SmolLM, SmolLM2)
    //@- full llama-bpe
};

const char * mg_pretok_name(enum mg_pretok type);   // "default", "gpt2", "qwen2" (full/: "llama3")

// A list of piece lengths, in code points; the pieces are consecutive.
struct mg_pieces {
    uint32_t * len;   // 32 bits, half of a size_t: a long text of short pieces holds one per code point
    size_t     n;
    size_t     cap;
    bool       failed;   // a push ran out of memory: the pieces are incomplete (the caller checks)
};

void mg_pieces_push(struct mg_pieces * p, size_t len);   // ignores len 0; sets failed when memory runs out
void mg_pieces_free(struct mg_pieces * p);

// Replaces out's contents with the pieces of cpts[0..n). The lengths add up to n.
void mg_pretokenize(enum mg_pretok type, const uint32_t * cpts, size_t n, struct mg_pieces * out);
