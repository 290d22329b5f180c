// test_vocab.c - tests of the byte-level BPE tokenizer (vocab.h) and its
// Unicode support (unicode.h).
//
// Where the expected values come from:
//   - llama.cpp's own tokenizer test for GPT-2 (fixtures/vocab/*.inp/.out, 46 strings);
//   - llama.cpp's token ids for the fixture prompts (fixtures/README.md, golden/*.json);
//   - pre-tokenizer splits worked out by hand from the regexes of docs/tokenizer.md 3,
//     each with its reasoning in a comment;
//   - small vocabularies and GGUF files written here, whose answers follow
//     from the rules of docs/tokenizer.md by hand;
//   - properties (bytes -> tokens -> bytes gives the bytes back; invalid
//     UTF-8 comes back as llama.cpp's U+FFFD normalization, computed here);
//   - a slow reference BPE written here, for a synthetic 150,000-token vocabulary.
//
// Build and run from the project root:
//
//   gcc -std=c11 -O2 -Wall -Wextra -Werror -ffp-contract=off -Ifull -Itests -DMG_TEST_ROOT="\"$PWD\""
//       tests/09_inference/test_vocab.c tests/harness.c full/vocab.c full/unicode.c full/unicode_data.c
//       full/gguf.c full/mmap.c full/tensor.c full/arena.c full/trace.c full/quants*.c
//       $(pkg-config --cflags --libs check) -lm -o /tmp/test_vocab && /tmp/test_vocab
//
// (one command, on one line).

#ifndef _XOPEN_SOURCE
#define _XOPEN_SOURCE 700   // hsearch, mkstemp
#endif

#include "harness.h"

#include "gguf.h"
#include "tensor.h"
#include "trace.h"
#include "unicode.h"
#include "vocab.h"

#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

#define MAX_IDS 65536

static struct mg_vocab * load_vocab(const char * rel) {
    struct mg_gguf * g = mg_gguf_open(mg_test_fixture(rel));
    ck_assert_msg(g != NULL, "%s", mg_last_error());
    struct mg_vocab * v = mg_vocab_load(g);
    ck_assert_msg(v != NULL, "%s", mg_last_error());
    mg_gguf_close(g);
    return v;
}

// The same tokens and merges as a fixture file, through mg_vocab_new, with
// another pre-tokenizer (NULL: none, i.e. the DEFAULT pipeline).
static struct mg_vocab * load_vocab_with_pre(const char * rel, const char * pre) {
    struct mg_gguf * g = mg_gguf_open(mg_test_fixture(rel));
    ck_assert_msg(g != NULL, "%s", mg_last_error());
    struct mg_vocab_params p = mg_vocab_default_params();
    int64_t kt = mg_gguf_find_key(g, "tokenizer.ggml.tokens");
    int64_t km = mg_gguf_find_key(g, "tokenizer.ggml.merges");
    int64_t ky = mg_gguf_find_key(g, "tokenizer.ggml.token_type");
    ck_assert(kt >= 0 && km >= 0 && ky >= 0);
    p.n_tokens = (int32_t) mg_gguf_arr_n(g, kt);
    p.n_merges = (int32_t) mg_gguf_arr_n(g, km);
    const char ** tokens = malloc((size_t) p.n_tokens * sizeof(char *));
    uint32_t * token_lens = malloc((size_t) p.n_tokens * sizeof(uint32_t));
    const char ** merges = malloc((size_t) p.n_merges * sizeof(char *));
    uint32_t * merge_lens = malloc((size_t) p.n_merges * sizeof(uint32_t));
    int32_t * types = malloc((size_t) p.n_tokens * sizeof(int32_t));
    for (int32_t i = 0; i < p.n_tokens; i++) {
        uint64_t len;
        tokens[i] = mg_gguf_arr_str(g, kt, (uint64_t) i, &len);
        token_lens[i] = (uint32_t) len;
    }
    for (int32_t i = 0; i < p.n_merges; i++) {
        uint64_t len;
        merges[i] = mg_gguf_arr_str(g, km, (uint64_t) i, &len);
        merge_lens[i] = (uint32_t) len;
    }
    memcpy(types, mg_gguf_arr_data(g, ky), (size_t) p.n_tokens * sizeof(int32_t));
    p.tokens = tokens;
    p.token_lens = token_lens;
    p.merges = merges;
    p.merge_lens = merge_lens;
    p.token_types = types;
    p.pre = pre;
    uint32_t id;
    if (mg_gguf_get_u32(g, "tokenizer.ggml.bos_token_id", &id)) p.special[MG_SPECIAL_BOS] = (int32_t) id;
    if (mg_gguf_get_u32(g, "tokenizer.ggml.eos_token_id", &id)) p.special[MG_SPECIAL_EOS] = (int32_t) id;
    struct mg_vocab * v = mg_vocab_new(&p);
    ck_assert_msg(v != NULL, "%s", mg_last_error());
    free(tokens);
    free(token_lens);
    free(merges);
    free(merge_lens);
    free(types);
    mg_gguf_close(g);
    return v;
}

// Tokenizes with a buffer that is always big enough; returns the count.
static int32_t tokenize(const struct mg_vocab * v, const char * text, size_t len, int32_t * ids, bool add_special,
                        bool parse_special) {
    int32_t n = mg_tokenize(v, text, (int32_t) len, ids, MAX_IDS, add_special, parse_special);
    ck_assert_msg(n >= 0, "tokenize needs %d ids", -n);
    return n;
}

// Concatenates mg_token_to_piece of every id into out (room for size bytes); returns the length.
static size_t detokenize(const struct mg_vocab * v, const int32_t * ids, int32_t n, bool special, char * out,
                         size_t size) {
    size_t len = 0;
    for (int32_t i = 0; i < n; i++) {
        int32_t k = mg_token_to_piece(v, ids[i], out + len, (int32_t) (size - len), special);
        ck_assert_msg(k >= 0, "piece of token %d does not fit", ids[i]);
        len += (size_t) k;
    }
    return len;
}

// UTF-8 of one code point, written here rather than taken from unicode.c.
static size_t put_utf8(char * out, uint32_t c) {
    if (c < 0x80) {
        out[0] = (char) c;
        return 1;
    }
    if (c < 0x800) {
        out[0] = (char) (0xC0 | (c >> 6));
        out[1] = (char) (0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        out[0] = (char) (0xE0 | (c >> 12));
        out[1] = (char) (0x80 | ((c >> 6) & 0x3F));
        out[2] = (char) (0x80 | (c & 0x3F));
        return 3;
    }
    out[0] = (char) (0xF0 | (c >> 18));
    out[1] = (char) (0x80 | ((c >> 12) & 0x3F));
    out[2] = (char) (0x80 | ((c >> 6) & 0x3F));
    out[3] = (char) (0x80 | (c & 0x3F));
    return 4;
}

static void ck_ids(const int32_t * got, int32_t n_got, const int32_t * want, int32_t n_want, const char * what) {
    ck_assert_msg(n_got == n_want, "%s: %d tokens, expected %d", what, n_got, n_want);
    for (int32_t i = 0; i < n_want; i++) {
        ck_assert_msg(got[i] == want[i], "%s: token %d is %d, expected %d", what, i, got[i], want[i]);
    }
}

// Pre-tokenizes text and compares the pieces with the NULL-terminated list.
static void check_split(enum mg_pretok type, const char * text, const char * const * want) {
    size_t len = strlen(text);
    uint32_t * cpts = malloc((len + 1) * sizeof(uint32_t));
    size_t n = mg_utf8_to_cpts(text, len, cpts);
    struct mg_pieces pieces = {0};
    mg_pretokenize(type, cpts, n, &pieces);
    size_t n_want = 0;
    while (want[n_want]) n_want++;
    ck_assert_msg(pieces.n == n_want, "%s '%s': %zu pieces, expected %zu", mg_pretok_name(type), text, pieces.n,
                  n_want);
    size_t start = 0;
    for (size_t i = 0; i < pieces.n; i++) {
        char piece[256];
        size_t k = 0;
        for (size_t c = start; c < start + pieces.len[i]; c++) k += put_utf8(piece + k, cpts[c]);
        piece[k] = '\0';
        ck_assert_msg(strcmp(piece, want[i]) == 0, "%s '%s': piece %zu is '%s', expected '%s'",
                      mg_pretok_name(type), text, i, piece, want[i]);
        start += pieces.len[i];
    }
    mg_pieces_free(&pieces);
    free(cpts);
}

#define SPLIT(type, text, ...) check_split(type, text, (const char * const[]) { __VA_ARGS__, NULL })

// ---------------------------------------------------------------------------
// Unicode
// ---------------------------------------------------------------------------

START_TEST(test_unicode_flags) {
    // General categories from UnicodeData.txt, looked up by hand.
    ck_assert_int_eq(mg_unicode_flags('A'), MG_UNICODE_LETTER);                               // Lu
    ck_assert_int_eq(mg_unicode_flags('7'), MG_UNICODE_NUMBER);                               // Nd
    ck_assert_int_eq(mg_unicode_flags('!'), MG_UNICODE_PUNCTUATION);                          // Po
    ck_assert_int_eq(mg_unicode_flags('$'), MG_UNICODE_SYMBOL);                               // Sc
    ck_assert_int_eq(mg_unicode_flags('`'), MG_UNICODE_SYMBOL);                               // Sk
    ck_assert_int_eq(mg_unicode_flags(' '), MG_UNICODE_SEPARATOR | MG_UNICODE_WHITESPACE);    // Zs
    ck_assert_int_eq(mg_unicode_flags('\n'), MG_UNICODE_CONTROL | MG_UNICODE_WHITESPACE);     // Cc
    ck_assert_int_eq(mg_unicode_flags(0x01), MG_UNICODE_CONTROL);                             // Cc
    ck_assert_int_eq(mg_unicode_flags(0x85), MG_UNICODE_CONTROL | MG_UNICODE_WHITESPACE);     // NEL
    ck_assert_int_eq(mg_unicode_flags(0xA0), MG_UNICODE_SEPARATOR | MG_UNICODE_WHITESPACE);   // NBSP
    ck_assert_int_eq(mg_unicode_flags(0x200B), MG_UNICODE_CONTROL);       // ZERO WIDTH SPACE is Cf, not White_Space
    ck_assert_int_eq(mg_unicode_flags(0x3000), MG_UNICODE_SEPARATOR | MG_UNICODE_WHITESPACE); // ideographic space
    ck_assert_int_eq(mg_unicode_flags(0x4F60), MG_UNICODE_LETTER);        // 你, inside the CJK First..Last range
    ck_assert_int_eq(mg_unicode_flags(0x20000), MG_UNICODE_LETTER);       // CJK extension B, a range of its own
    ck_assert_int_eq(mg_unicode_flags(0x0301), MG_UNICODE_MARK);          // combining acute accent, Mn
    ck_assert_int_eq(mg_unicode_flags(0x0663), MG_UNICODE_NUMBER);        // ARABIC-INDIC DIGIT THREE
    ck_assert_int_eq(mg_unicode_flags(0x00B2), MG_UNICODE_NUMBER);        // superscript two, No
    ck_assert_int_eq(mg_unicode_flags(0x00AB), MG_UNICODE_PUNCTUATION);   // «, Pi
    ck_assert_int_eq(mg_unicode_flags(0x20AC), MG_UNICODE_SYMBOL);        // €
    ck_assert_int_eq(mg_unicode_flags(0x1F600), MG_UNICODE_SYMBOL);       // 😀, So
    ck_assert_int_eq(mg_unicode_flags(0xFFFD), MG_UNICODE_SYMBOL);        // the replacement character
    ck_assert_int_eq(mg_unicode_flags(0xD800), MG_UNICODE_CONTROL);       // surrogate, Cs
    ck_assert_int_eq(mg_unicode_flags(0xE000), MG_UNICODE_CONTROL);       // private use, Co
    ck_assert_int_eq(mg_unicode_flags(0x0378), MG_UNICODE_UNDEFINED);     // unassigned
    ck_assert_int_eq(mg_unicode_flags(0x10FFFF), MG_UNICODE_UNDEFINED);   // a noncharacter: not in UnicodeData
    ck_assert_int_eq(mg_unicode_flags(0x110000), MG_UNICODE_UNDEFINED);   // beyond Unicode
    // Added in Unicode 15.1, which llama.cpp's table has and Debian 12's UCD lacks.
    ck_assert_int_eq(mg_unicode_flags(0x2EBF0), MG_UNICODE_LETTER);       // CJK extension I
    ck_assert_int_eq(mg_unicode_flags(0x31EF), MG_UNICODE_SYMBOL);
    ck_assert_int_eq(mg_unicode_flags(0x1C89), MG_UNICODE_UNDEFINED);     // added in 16.0: not in llama.cpp's table
}
END_TEST

START_TEST(test_unicode_table_shape) {
    // Sorted, disjoint, and no row with "undefined" or with no flags: the
    // binary search and the "in no row = undefined" rule depend on it.
    ck_assert_int_gt(mg_unicode_n_ranges, 1000);
    for (int i = 0; i < mg_unicode_n_ranges; i++) {
        const struct mg_unicode_range * r = &mg_unicode_ranges[i];
        ck_assert_uint_le(r->first, r->last);
        ck_assert_uint_le(r->last, 0x10FFFF);
        ck_assert_uint_ne(r->flags, 0);
        ck_assert_uint_ne(r->flags, MG_UNICODE_UNDEFINED);
        if (i > 0) ck_assert_uint_gt(r->first, mg_unicode_ranges[i - 1].last);
    }
    // White space: exactly the 25 code points of the White_Space property.
    int n_space = 0;
    for (uint32_t c = 0; c < 0x110000; c++) n_space += (mg_unicode_flags(c) & MG_UNICODE_WHITESPACE) != 0;
    ck_assert_int_eq(n_space, 25);
    ck_assert_str_eq(mg_unicode_version, "15.0.0+15.1");   // llama.cpp's table is 15.1
}
END_TEST

static size_t decode_all(const char * s, size_t len, uint32_t * out) {
    return mg_utf8_to_cpts(s, len, out);
}

START_TEST(test_utf8_decode) {
    uint32_t c[16];
    // Valid: 'a' (1 byte), 'é' (2), '你' (3), '😀' (4).
    ck_assert_uint_eq(decode_all("a\xC3\xA9\xE4\xBD\xA0\xF0\x9F\x98\x80", 10, c), 4);
    ck_assert_uint_eq(c[0], 'a');
    ck_assert_uint_eq(c[1], 0xE9);
    ck_assert_uint_eq(c[2], 0x4F60);
    ck_assert_uint_eq(c[3], 0x1F600);
    // An embedded NUL is a code point like any other.
    ck_assert_uint_eq(decode_all("a\0b", 3, c), 3);
    ck_assert_uint_eq(c[1], 0);
    // A lone continuation byte and 0xFF: one U+FFFD each.
    ck_assert_uint_eq(decode_all("\x80\xFF", 2, c), 2);
    ck_assert_uint_eq(c[0], 0xFFFD);
    ck_assert_uint_eq(c[1], 0xFFFD);
    // A truncated 3-byte sequence: the lead byte fails (its sequence is
    // incomplete), then the continuation byte fails on its own: two U+FFFD.
    ck_assert_uint_eq(decode_all("\xE4\xBD", 2, c), 2);
    ck_assert_uint_eq(c[0], 0xFFFD);
    ck_assert_uint_eq(c[1], 0xFFFD);
    // An interrupted sequence: E4 then 'x': U+FFFD, then 'x'.
    ck_assert_uint_eq(decode_all("\xE4x", 2, c), 2);
    ck_assert_uint_eq(c[0], 0xFFFD);
    ck_assert_uint_eq(c[1], 'x');
    // llama.cpp checks only the shape: the overlong C0 AF decodes to '/', and
    // the surrogate ED A0 80 to U+D800.
    ck_assert_uint_eq(decode_all("\xC0\xAF", 2, c), 1);
    ck_assert_uint_eq(c[0], '/');
    ck_assert_uint_eq(decode_all("\xED\xA0\x80", 3, c), 1);
    ck_assert_uint_eq(c[0], 0xD800);
    // Above U+10FFFF (F4 90 80 80 = 0x110000): llama.cpp would throw; here the
    // lead byte is U+FFFD and each continuation byte too.
    ck_assert_uint_eq(decode_all("\xF4\x90\x80\x80", 4, c), 4);
    for (int i = 0; i < 4; i++) ck_assert_uint_eq(c[i], 0xFFFD);
}
END_TEST

START_TEST(test_byte_alphabet) {
    // The examples of docs/tokenizer.md 5, and the ends of the three moved runs.
    ck_assert_uint_eq(mg_unicode_byte_to_cpt(' '), 0x120);    // Ġ
    ck_assert_uint_eq(mg_unicode_byte_to_cpt('\n'), 0x10A);   // Ċ
    ck_assert_uint_eq(mg_unicode_byte_to_cpt(0x00), 0x100);
    ck_assert_uint_eq(mg_unicode_byte_to_cpt(0x7F), 0x121);   // 34th moved byte
    ck_assert_uint_eq(mg_unicode_byte_to_cpt(0xA0), 0x142);
    ck_assert_uint_eq(mg_unicode_byte_to_cpt(0xAD), 0x143);   // the 68th and last
    ck_assert_uint_eq(mg_unicode_byte_to_cpt('A'), 'A');
    ck_assert_uint_eq(mg_unicode_byte_to_cpt(0xFF), 0xFF);
    // A bijection between the 256 bytes and 256 code points below U+0144.
    bool seen[0x144] = {false};
    for (int b = 0; b < 256; b++) {
        uint32_t c = mg_unicode_byte_to_cpt((uint8_t) b);
        ck_assert_uint_lt(c, 0x144);
        ck_assert(!seen[c]);
        seen[c] = true;
        ck_assert_int_eq(mg_unicode_cpt_to_byte(c), b);
    }
    ck_assert_int_eq(mg_unicode_cpt_to_byte(' '), -1);     // moved away to U+0120
    ck_assert_int_eq(mg_unicode_cpt_to_byte(0x144), -1);
    ck_assert_int_eq(mg_unicode_cpt_to_byte(0x4F60), -1);
}
END_TEST

// ---------------------------------------------------------------------------
// Pre-tokenizers, worked out by hand
// ---------------------------------------------------------------------------

START_TEST(test_split_gpt2) {
    // The example of unicode.h: the first of two spaces stands alone
    // (\s+(?!\S) backs off by one), "'s" is a contraction, " 2024" is " ?\p{N}+".
    SPLIT(MG_PRETOK_GPT2, "Hello  world's 2024!", "Hello", " ", " world", "'s", " 2024", "!");
    // Contractions are lowercase only: "'M" is not one, so "'" is a run of
    // "other" by itself and "M" a word.
    SPLIT(MG_PRETOK_GPT2, "I'M HERE", "I", "'", "M", " HERE");
    // Trailing spaces: a run at the end of the text is taken whole (\s+).
    SPLIT(MG_PRETOK_GPT2, "hi   ", "hi", "   ");
    // " ?[^\s\p{L}\p{N}]+": a space joins the punctuation after it.
    SPLIT(MG_PRETOK_GPT2, "x (y)", "x", " (", "y", ")");
}
END_TEST

START_TEST(test_split_qwen2) {
    // \p{N} has no '+': every digit is a piece. And a space before a digit is
    // no letter run, no digit, and no punctuation, so it is white space alone.
    // (GPT-2: " 123", "abc".)
    SPLIT(MG_PRETOK_QWEN2, " 123abc", " ", "1", "2", "3", "abc");
    SPLIT(MG_PRETOK_QWEN2, "2024", "2", "0", "2", "4");
    // Contractions in any case: "'M" is one. (GPT-2: "I", "'", "M", " HERE".)
    SPLIT(MG_PRETOK_QWEN2, "I'M HERE", "I", "'M", " HERE");
    SPLIT(MG_PRETOK_QWEN2, "WE'LL", "WE", "'LL");
    // [^\r\n\p{L}\p{N}]?\p{L}+: one punctuation character joins the letters
    // after it. (GPT-2: "hello", ".", "world".)
    SPLIT(MG_PRETOK_QWEN2, "hello.world", "hello", ".world");
    // The same for a full-width comma before CJK letters. (GPT-2: "你好", "，", "世界".)
    SPLIT(MG_PRETOK_QWEN2, "你好，世界", "你好", "，世界");
    // " ?[^\s\p{L}\p{N}]+[\r\n]*": punctuation takes the newlines after it.
    // (GPT-2: "end", ".", "\n", "\n", "Next": the run "\n\n" keeps its last one.)
    SPLIT(MG_PRETOK_QWEN2, "end.\n\nNext", "end", ".\n\n", "Next");
    // \s*[\r\n]+: a white-space run that holds newlines ends after the last
    // newline; "\r\n\r\n" is one piece. (GPT-2: "\r\n\r", "\n".)
    SPLIT(MG_PRETOK_QWEN2, "a\r\n\r\nb", "a", "\r\n\r\n", "b");
    // ... and the spaces before the newline go with it, the ones after it
    // are a new run: "  " (two spaces before y) keeps its last space for " y".
    // (GPT-2: "  \n " and " y".)
    SPLIT(MG_PRETOK_QWEN2, "x  \n  y", "x", "  \n", " ", " y");
    // Trailing spaces: taken whole at the end of the text.
    SPLIT(MG_PRETOK_QWEN2, "hi   ", "hi", "   ");
    SPLIT(MG_PRETOK_QWEN2, "hi   there", "hi", "  ", " there");
}
END_TEST

#if defined(MG_HAS_PRETOK_DEFAULT)   // full/ only: chapter 09 refuses a file without tokenizer.ggml.pre
START_TEST(test_split_default) {
    // 1) [\p{P}\$\+<=>\^~\|]+ cuts "(" and ")" out first, so the space before
    //    "(" stays with "x"; 2) GPT-2 then splits "x " into "x" and " ".
    //    (GPT-2 alone: "x", " (", "y", ")".)
    SPLIT(MG_PRETOK_DEFAULT, "x (y)", "x", " ", "(", "y", ")");
    // "~" is in the first regex's class, the backtick is not: " `" stays one
    // GPT-2 piece, while " ~" is cut in two.
    SPLIT(MG_PRETOK_DEFAULT, " ~x", " ", "~", "x");
    SPLIT(MG_PRETOK_DEFAULT, " `x", " `", "x");
    // 2) GPT-2 makes "12345", " and", " 1234567"; 3) \p{N}+ cuts " 1234567"
    // into " " and "1234567"; 4) [0-9][0-9][0-9] takes ASCII digits three at a
    // time from the left, the rest is a gap.
    SPLIT(MG_PRETOK_DEFAULT, "12345 and 1234567", "123", "45", " and", " ", "123", "456", "7");
    // Digits of other scripts are \p{N} but not [0-9]: no cut.
    SPLIT(MG_PRETOK_DEFAULT, "\xD9\xA1\xD9\xA2\xD9\xA3\xD9\xA4", "\xD9\xA1\xD9\xA2\xD9\xA3\xD9\xA4");
    // Unicode punctuation is \p{P}: "¿" is cut out, the space before it stays alone.
    SPLIT(MG_PRETOK_DEFAULT, "x \xC2\xBFy", "x", " ", "\xC2\xBF", "y");
    // "+=" is one run of the first regex's class.
    SPLIT(MG_PRETOK_DEFAULT, "a+=b", "a", "+=", "b");
}
END_TEST
#endif

// ---------------------------------------------------------------------------
// Fixtures: llama.cpp's ids
// ---------------------------------------------------------------------------

START_TEST(test_gpt2_vocab_fixture) {
    struct mg_vocab * v = load_vocab("vocab/ggml-vocab-gpt-2.gguf");
    ck_assert_int_eq(mg_vocab_n_tokens(v), 50257);
    ck_assert_int_eq(mg_vocab_n_merges(v), 50000);
    ck_assert_str_eq(mg_vocab_pre(v), "gpt-2");
    ck_assert(mg_vocab_is_eog(v, 50256));   // <|endoftext|>, bos = eos

    size_t inp_len, out_len;
    char * inp = mg_test_read_file(mg_test_fixture("vocab/ggml-vocab-gpt-2.gguf.inp"), &inp_len);
    char * out = mg_test_read_file(mg_test_fixture("vocab/ggml-vocab-gpt-2.gguf.out"), &out_len);
    ck_assert(inp != NULL && out != NULL);

    static const char sep[] = "\n__ggml_vocab_test__\n";
    static int32_t ids[MAX_IDS];
    static char text[1 << 16];
    int n_cases = 0;
    char * p = inp;
    char * line = out;
    for (char * end; (end = strstr(p, sep)) != NULL; p = end + strlen(sep)) {
        size_t len = (size_t) (end - p);
        char * eol = strchr(line, '\n');
        ck_assert(eol != NULL);
        *eol = '\0';
        int32_t want[4096];
        int32_t n_want = 0;
        for (char * q = line; *q; ) {
            char * next;
            long id = strtol(q, &next, 10);
            if (next == q) break;
            want[n_want++] = (int32_t) id;
            q = next;
        }
        int32_t n = tokenize(v, p, len, ids, false, false);
        char what[64];
        snprintf(what, sizeof(what), "case %d", n_cases);
        ck_ids(ids, n, want, n_want, what);
        // These are valid UTF-8, so the ids print back to the very bytes.
        size_t back = detokenize(v, ids, n, false, text, sizeof(text));
        ck_assert_uint_eq(back, len);
        ck_assert_mem_eq(text, p, len);
        line = eol + 1;
        n_cases++;
    }
    ck_assert_int_eq(n_cases, 46);
    free(inp);
    free(out);
    mg_vocab_free(v);
}
END_TEST

START_TEST(test_minimind_prompts) {
    struct mg_vocab * v = load_vocab("models/tiny-f32.gguf");
    int32_t ids[64];

    int32_t n = tokenize(v, "你好", strlen("你好"), ids, false, false);
    ck_ids(ids, n, (const int32_t[]) { 1968 }, 1, "nihao");

    const char * fox = "The quick brown fox jumps over the lazy dog.";
    static const int32_t fox_ids[] = { 750, 5658, 363, 2079, 113, 341, 2979, 1315, 457, 3385, 2141, 309, 3090, 125,
                                       124, 1041, 106, 49 };
    n = tokenize(v, fox, strlen(fox), ids, false, false);
    ck_ids(ids, n, fox_ids, 18, "fox");

    // Every golden file's prompt_tokens, for its prompt file, with the
    // reference's flags (add_special true, which adds nothing here; parse_special false).
    static const char * const models[] = { "tiny-f32", "tiny-q8_0", "tiny-q4_k_m" };
    static const char * const prompts[] = { "nihao", "fox" };
    static const char * const kinds[] = { "", ".f32kv" };
    int n_files = 0;
    for (int m = 0; m < 3; m++) {
        for (int p = 0; p < 2; p++) {
            for (int k = 0; k < 2; k++) {
                char rel[256];
                snprintf(rel, sizeof(rel), "golden/%s/%s%s.json", models[m], prompts[p], kinds[k]);
                char * json = mg_test_read_file(mg_test_fixture(rel), NULL);
                ck_assert_msg(json != NULL, "cannot read %s", rel);
                snprintf(rel, sizeof(rel), "prompts/%s.txt", prompts[p]);
                size_t len;
                char * prompt = mg_test_read_file(mg_test_fixture(rel), &len);
                ck_assert(prompt != NULL);

                char * q = strstr(json, "\"prompt_tokens\"");
                ck_assert(q != NULL);
                q = strchr(q, '[') + 1;
                int32_t want[64];
                int32_t n_want = 0;
                while (*q != ']') {
                    char * next;
                    want[n_want++] = (int32_t) strtol(q, &next, 10);
                    q = next;
                    while (*q == ',' || *q == ' ') q++;
                }
                n = tokenize(v, prompt, len, ids, true, false);
                ck_ids(ids, n, want, n_want, rel);
                free(json);
                free(prompt);
                n_files++;
            }
        }
    }
    ck_assert_int_eq(n_files, 12);
    mg_vocab_free(v);
}
END_TEST

START_TEST(test_minimind_metadata) {
    struct mg_vocab * v = load_vocab("models/tiny-f32.gguf");
    ck_assert_int_eq(mg_vocab_n_tokens(v), 6400);
    ck_assert_int_eq(mg_vocab_n_merges(v), 6108);
    ck_assert_str_eq(mg_vocab_pre(v), "gpt-2");
    ck_assert_int_eq(mg_vocab_bos(v), 1);
    ck_assert_int_eq(mg_vocab_eos(v), 2);
    ck_assert_int_eq(mg_vocab_eot(v), 2);
    ck_assert_int_eq(mg_vocab_special(v, MG_SPECIAL_UNK), 0);
    ck_assert_int_eq(mg_vocab_special(v, MG_SPECIAL_PAD), 0);
    ck_assert(!mg_vocab_add_bos(v));
    ck_assert(!mg_vocab_add_eos(v));
    ck_assert_str_eq(mg_vocab_token_text(v, 1), "<|im_start|>");
    ck_assert_str_eq(mg_vocab_token_text(v, 25), "<think>");
    ck_assert_int_eq(mg_vocab_token_attr(v, 2), MG_TOKEN_ATTR_CONTROL);
    ck_assert_int_eq(mg_vocab_token_attr(v, 25), MG_TOKEN_ATTR_USER_DEFINED);
    ck_assert_int_eq(mg_vocab_token_attr(v, 36), MG_TOKEN_ATTR_NORMAL);   // "!"
    ck_assert_int_eq(mg_vocab_find(v, "<think>", 7), 25);
    ck_assert_int_eq(mg_vocab_find(v, "<think", 6), -1);
    ck_assert_int_eq(mg_vocab_find(v, "\xC4\x8A", 2), 234);   // "Ċ", the newline
    ck_assert(strncmp(mg_vocab_chat_template(v), "{%- if tools %}", 15) == 0);

    // The end-of-generation set is exactly {0 <|endoftext|>, 2 <|im_end|>} (fixtures/README.md).
    for (int32_t id = 0; id < 6400; id++) {
        ck_assert_msg(mg_vocab_is_eog(v, id) == (id == 0 || id == 2), "is_eog(%d)", id);
    }
    ck_assert(!mg_vocab_is_eog(v, -1));
    ck_assert(!mg_vocab_is_eog(v, 6400));
    mg_vocab_free(v);
}
END_TEST

// ---------------------------------------------------------------------------
// Special tokens
// ---------------------------------------------------------------------------

static bool contains(const int32_t * ids, int32_t n, int32_t id) {
    for (int32_t i = 0; i < n; i++) {
        if (ids[i] == id) return true;
    }
    return false;
}

START_TEST(test_special_tokens) {
    struct mg_vocab * v = load_vocab("models/tiny-f32.gguf");
    const char * chat = "<|im_start|>user\n你好<|im_end|>";
    int32_t ids[64], inner[64], plain[64];
    int32_t n_inner = tokenize(v, "user\n你好", strlen("user\n你好"), inner, false, false);

    // parse_special: 1, then the text between as plain text, then 2.
    int32_t n = tokenize(v, chat, strlen(chat), ids, false, true);
    ck_assert_int_eq(n, n_inner + 2);
    ck_assert_int_eq(ids[0], 1);
    ck_assert_int_eq(ids[n - 1], 2);
    ck_ids(ids + 1, n - 2, inner, n_inner, "between the special tokens");

    // Without it the markers are ordinary text: no 1 or 2, and the ids print
    // back to the whole string.
    n = tokenize(v, chat, strlen(chat), plain, false, false);
    ck_assert(!contains(plain, n, 1) && !contains(plain, n, 2));
    char text[256];
    size_t len = detokenize(v, plain, n, false, text, sizeof(text));
    ck_assert_uint_eq(len, strlen(chat));
    ck_assert_mem_eq(text, chat, len);

    // <think> is USER_DEFINED: cut out whether or not special tokens are parsed.
    const char * think = "a<think>b";
    int32_t a[8], b[8];
    int32_t n_a = tokenize(v, "a", 1, a, false, false);
    int32_t n_b = tokenize(v, "b", 1, b, false, false);
    ck_assert_int_eq(n_a, 1);
    ck_assert_int_eq(n_b, 1);
    for (int parse = 0; parse <= 1; parse++) {
        n = tokenize(v, think, strlen(think), ids, false, parse);
        ck_ids(ids, n, (const int32_t[]) { a[0], 25, b[0] }, 3, parse ? "<think> parsed" : "<think> not parsed");
    }

    // Longest first: "<|im_end|><|im_end|>" is two tokens, and a special text
    // split by another one is not found.
    n = tokenize(v, "<|im_end|><|im_end|>", -1, ids, false, true);
    ck_ids(ids, n, (const int32_t[]) { 2, 2 }, 2, "two im_end");
    n = tokenize(v, "<|im_<think>end|>", -1, ids, false, true);
    ck_assert(contains(ids, n, 25) && !contains(ids, n, 2));

    // add_special adds nothing: MiniMind says add_bos = add_eos = false.
    int32_t with[64];
    int32_t n_with = tokenize(v, chat, strlen(chat), with, true, true);
    n = tokenize(v, chat, strlen(chat), ids, false, true);
    ck_ids(with, n_with, ids, n, "add_special");
    mg_vocab_free(v);
}
END_TEST

START_TEST(test_token_to_piece) {
    struct mg_vocab * v = load_vocab("models/tiny-f32.gguf");
    char buf[64];
    // CONTROL tokens print only when asked to.
    ck_assert_int_eq(mg_token_to_piece(v, 2, buf, sizeof(buf), false), 0);
    ck_assert_int_eq(mg_token_to_piece(v, 2, buf, sizeof(buf), true), 10);
    ck_assert_mem_eq(buf, "<|im_end|>", 10);
    // USER_DEFINED tokens always print.
    ck_assert_int_eq(mg_token_to_piece(v, 25, buf, sizeof(buf), false), 7);
    ck_assert_mem_eq(buf, "<think>", 7);
    // NORMAL tokens print their bytes: "Ċ" is a newline, 1968 is "你好".
    ck_assert_int_eq(mg_token_to_piece(v, 234, buf, sizeof(buf), false), 1);
    ck_assert_int_eq(buf[0], '\n');
    ck_assert_int_eq(mg_token_to_piece(v, 1968, buf, sizeof(buf), false), 6);
    ck_assert_mem_eq(buf, "你好", 6);
    // Too small: -(needed), as llama_token_to_piece.
    ck_assert_int_eq(mg_token_to_piece(v, 1968, buf, 5, false), -6);
    // Out of range: nothing (and an error message), no crash.
    ck_assert_int_eq(mg_token_to_piece(v, 6400, buf, sizeof(buf), true), 0);
    ck_assert_int_eq(mg_token_to_piece(v, -1, buf, sizeof(buf), true), 0);
    mg_vocab_free(v);
}
END_TEST

START_TEST(test_tokenize_small_buffer) {
    struct mg_vocab * v = load_vocab("models/tiny-f32.gguf");
    const char * fox = "The quick brown fox jumps over the lazy dog.";
    int32_t ids[18];
    ck_assert_int_eq(mg_tokenize(v, fox, -1, ids, 17, false, false), -18);
    ck_assert_int_eq(mg_tokenize(v, fox, -1, ids, 18, false, false), 18);
    ck_assert_int_eq(mg_tokenize(v, "", 0, ids, 0, false, false), 0);
    ck_assert_int_eq(mg_tokenize(v, NULL, 0, NULL, 0, false, false), 0);
    mg_vocab_free(v);
}
END_TEST

// ---------------------------------------------------------------------------
// MG_TRACE=bpe
// ---------------------------------------------------------------------------

// Tokenizes text with the bpe trace on; returns the trace (malloc'd) and the ids in ids.
static char * bpe_trace(const struct mg_vocab * v, const char * text, bool parse_special, int32_t * ids,
                        int32_t * n_ids) {
    FILE * f = tmpfile();
    ck_assert_ptr_nonnull(f);
    mg_trace_set_stream(f);
    ck_assert(mg_trace_set("bpe"));
    *n_ids = mg_tokenize(v, text, -1, ids, 256, false, parse_special);
    ck_assert(mg_trace_set(""));
    mg_trace_set_stream(NULL);
    const long size = ftell(f);
    char * out = calloc((size_t) size + 1, 1);
    rewind(f);
    ck_assert_uint_eq(fread(out, 1, (size_t) size, f), (size_t) size);
    fclose(f);
    return out;
}

// The ids the trace reports, in order: "special token ... id N" and "ids: a b c" lines.
static int32_t ids_in_trace(const char * trace, int32_t * ids) {
    int32_t n = 0;
    for (const char * line = trace; *line; line = strchr(line, '\n') + 1) {
        const char * at;
        if ((at = strstr(line, "cut out before BPE: id ")) != NULL && at < strchr(line, '\n')) {
            ids[n++] = (int32_t) atoi(at + strlen("cut out before BPE: id "));
        } else if (strncmp(line, "[bpe]   ids:", 12) == 0) {
            char * p = (char *) line + 12;
            while (*p == ' ') {
                ids[n++] = (int32_t) strtol(p, &p, 10);
            }
        }
    }
    return n;
}

// How many "[x]" symbols a trace line lists.
static int count_symbols(const char * line) {
    const char * arrow = strstr(line, "->");
    const char * eol = strchr(line, '\n');
    const char * p = arrow != NULL && arrow < eol ? arrow + 2 : strstr(line, "symbols:") + 8;
    int n = 0;
    for (; p < eol; p++) n += p[0] == ' ' && p[1] == '[';
    return n;
}

START_TEST(test_bpe_trace) {
    struct mg_vocab * v = load_vocab("models/tiny-f32.gguf");
    static const char * const texts[] = { "你好", "Hello tokenizers!", "The quick brown fox jumps over the lazy dog.",
                                          "<|im_start|>user\n你好<|im_end|>", "a  b\n\n 12345 ...  " };
    for (size_t t = 0; t < sizeof(texts) / sizeof(texts[0]); t++) {
        int32_t ids[256], traced[256], n_ids;
        char * trace = bpe_trace(v, texts[t], true, ids, &n_ids);
        // The trace's ids are mg_tokenize's, in order.
        ck_assert_int_gt(n_ids, 0);
        ck_ids(traced, ids_in_trace(trace, traced), ids, n_ids, texts[t]);
        // Within each piece every merge joins two symbols into one: the
        // symbol count drops by one per merge line, from the start line to
        // the number of ids the piece became (every final symbol is a token here).
        int n_symbols = -1;
        for (const char * line = trace; *line; line = strchr(line, '\n') + 1) {
            if (strncmp(line, "[bpe]   symbols:", 16) == 0) {
                n_symbols = count_symbols(line);
            } else if (strncmp(line, "[bpe]   merge rank", 18) == 0) {
                ck_assert_int_eq(count_symbols(line), n_symbols - 1);
                n_symbols--;
                int rank = -1;
                ck_assert_int_eq(sscanf(line, "[bpe]   merge rank %d", &rank), 1);
                ck_assert(rank >= 0 && rank < mg_vocab_n_merges(v));
            } else if (strncmp(line, "[bpe]   ids:", 12) == 0) {
                int n_here = 0;
                for (char * p = (char *) line + 12; *p == ' '; n_here++) (void) strtol(p, &p, 10);
                ck_assert_int_eq(n_here, n_symbols);
            }
        }
        free(trace);
    }

    // The seed's example, merge by merge: six bytes, five merges, one token.
    int32_t ids[256], n_ids;
    char * trace = bpe_trace(v, "你好", false, ids, &n_ids);
    ck_assert_ptr_nonnull(strstr(trace, "[bpe] piece 0: 6 bytes e4 bd a0 e5 a5 bd"));
    int n_merges = 0;
    for (const char * p = trace; (p = strstr(p, "merge rank")) != NULL; p++) n_merges++;
    ck_assert_int_eq(n_merges, 5);
    ck_assert_ptr_nonnull(strstr(trace, "[bpe]   ids: 1968\n"));
    free(trace);

    // A long piece: its lines are cut short ("..."), and its ids are still all there.
    static char word[3001];
    for (int i = 0; i < 3000; i++) word[i] = "abcdefghij"[(i * 7) % 10];
    static int32_t long_ids[4096];
    FILE * lf = tmpfile();
    mg_trace_set_stream(lf);
    ck_assert(mg_trace_set("bpe"));
    const int32_t n_long = mg_tokenize(v, word, -1, long_ids, 4096, false, false);
    ck_assert(mg_trace_set(""));
    mg_trace_set_stream(NULL);
    const long lsize = ftell(lf);
    char * ltrace = calloc((size_t) lsize + 1, 1);
    rewind(lf);
    ck_assert_uint_eq(fread(ltrace, 1, (size_t) lsize, lf), (size_t) lsize);
    fclose(lf);
    ck_assert_ptr_nonnull(strstr(ltrace, " ...\n"));
    ck_assert_int_gt(n_long, 0);
    for (const char * line = ltrace; *line; line = strchr(line, '\n') + 1) {
        ck_assert_int_le(strchr(line, '\n') - line, 700);
    }
    free(ltrace);

    // Off, the tokenizer prints nothing.
    FILE * f = tmpfile();
    mg_trace_set_stream(f);
    ck_assert(mg_trace_set("infer"));
    ck_assert_int_eq(mg_tokenize(v, "你好", -1, ids, 256, false, false), 1);
    ck_assert_int_eq(ftell(f), 0);
    ck_assert(mg_trace_set(""));
    mg_trace_set_stream(NULL);
    fclose(f);
    mg_vocab_free(v);
}
END_TEST

// ---------------------------------------------------------------------------
// Round trips and streaming
// ---------------------------------------------------------------------------

// A random valid UTF-8 string of about len bytes: runs of ASCII words,
// digits, punctuation, white space (spaces, tabs, \r\n, NBSP, ideographic
// space), CJK, emoji (some joined with ZWJ and variation selectors),
// combining marks, Cyrillic and Arabic-Indic digits.
static size_t random_text(uint64_t * rng, char * out, size_t len) {
    static const char * const ascii_punct = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";
    size_t n = 0;
    while (n + 32 < len) {
        int kind = (int) (mg_test_rand_u64(rng) % 10);
        int run = 1 + (int) (mg_test_rand_u64(rng) % 6);
        for (int i = 0; i < run; i++) {
            uint64_t r = mg_test_rand_u64(rng);
            uint32_t c;
            switch (kind) {
                case 0:  c = 'a' + (uint32_t) (r % 26); break;
                case 1:  c = 'A' + (uint32_t) (r % 26); break;
                case 2:  c = '0' + (uint32_t) (r % 10); break;
                case 3:  c = (uint32_t) ascii_punct[r % strlen(ascii_punct)]; break;
                case 4:  c = (uint32_t[]) { ' ', ' ', ' ', '\t', '\n', '\r', 0xA0, 0x3000 }[r % 8]; break;
                case 5:  c = 0x4E00 + (uint32_t) (r % 0x5200); break;              // CJK
                case 6:  c = (uint32_t[]) { 0x1F600 + (uint32_t) (r % 80), 0x200D, 0xFE0F, 0x1F680 }[r % 4]; break;
                case 7:  c = 0x0300 + (uint32_t) (r % 0x70); break;                // combining marks
                case 8:  c = 0x0410 + (uint32_t) (r % 0x40); break;                // Cyrillic
                default: c = (uint32_t[]) { 0x0660 + (uint32_t) (r % 10), '\'', 's', 0xAD }[r % 4]; break;
            }
            n += put_utf8(out + n, c);
        }
    }
    return n;
}

// Streams ids through mg_detok one at a time. Every chunk must end on a
// character boundary (the input was valid UTF-8); returns the total length.
static size_t stream(const struct mg_vocab * v, const int32_t * ids, int32_t n, char * out) {
    struct mg_detok d;
    mg_detok_init(&d, false);
    size_t len = 0;
    for (int32_t i = 0; i < n; i++) {
        int32_t k = mg_detok_push(&d, v, ids[i], out + len, 4096);
        ck_assert_int_ge(k, 0);
        // The chunk decodes without a single U+FFFD: whole characters only.
        uint32_t cpts[4096];
        size_t nc = mg_utf8_to_cpts(out + len, (size_t) k, cpts);
        for (size_t c = 0; c < nc; c++) ck_assert_uint_ne(cpts[c], 0xFFFD);
        len += (size_t) k;
    }
    ck_assert_int_eq(mg_detok_flush(&d, out + len, 16), 0);   // nothing left over
    return len;
}

static void check_round_trips(struct mg_vocab * v, uint64_t seed) {
    static char text[1 << 14], back[1 << 15];
    static int32_t ids[1 << 14];
    uint64_t rng = seed;
    for (int iter = 0; iter < 40; iter++) {
        size_t len = random_text(&rng, text, 64 + (size_t) (mg_test_rand_u64(&rng) % 4000));
        int32_t n = tokenize(v, text, len, ids, false, false);
        size_t back_len = detokenize(v, ids, n, false, back, sizeof(back));
        ck_assert_msg(back_len == len && memcmp(back, text, len) == 0, "%s: round trip %d", mg_vocab_pre(v), iter);
        back_len = stream(v, ids, n, back);
        ck_assert_msg(back_len == len && memcmp(back, text, len) == 0, "%s: stream %d", mg_vocab_pre(v), iter);
    }
}

START_TEST(test_round_trip) {
    struct mg_vocab * v = load_vocab("models/tiny-f32.gguf");
    check_round_trips(v, 1);
    mg_vocab_free(v);
    v = load_vocab("vocab/ggml-vocab-gpt-2.gguf");
    check_round_trips(v, 2);
    mg_vocab_free(v);
    // The MiniMind tokens under the two other pre-tokenizers.
    v = load_vocab_with_pre("models/tiny-f32.gguf", "qwen2");
    check_round_trips(v, 3);
    mg_vocab_free(v);
#if defined(MG_HAS_PRETOK_DEFAULT)
    v = load_vocab_with_pre("models/tiny-f32.gguf", NULL);
    check_round_trips(v, 4);
    mg_vocab_free(v);
#endif
}
END_TEST

START_TEST(test_detok_split_character) {
    // GPT-2 spells the rocket emoji (F0 9F 9A 80) with several tokens; the
    // first ones are parts of the character and must be held back.
    struct mg_vocab * v = load_vocab("vocab/ggml-vocab-gpt-2.gguf");
    int32_t ids[16];
    int32_t n = tokenize(v, "\xF0\x9F\x9A\x80", 4, ids, false, false);
    ck_ids(ids, n, (const int32_t[]) { 8582, 248, 222 }, 3, "rocket");   // from the .out fixture, case 21
    struct mg_detok d;
    mg_detok_init(&d, false);
    char out[16];
    ck_assert_int_eq(mg_detok_push(&d, v, ids[0], out, sizeof(out)), 0);   // F0 9F
    ck_assert_int_eq(mg_detok_push(&d, v, ids[1], out, 0), 0);             // + 9A: still unfinished
    ck_assert_int_eq(mg_detok_push(&d, v, ids[2], out, 3), -4);            // + 80: 4 bytes, no room
    ck_assert_int_eq(mg_detok_push(&d, v, ids[2], out, 4), 4);
    ck_assert_mem_eq(out, "\xF0\x9F\x9A\x80", 4);

    // A character that never finishes comes out on flush, as it is.
    mg_detok_init(&d, false);
    ck_assert_int_eq(mg_detok_push(&d, v, ids[0], out, sizeof(out)), 0);
    ck_assert_int_eq(mg_detok_flush(&d, out, 1), -2);
    ck_assert_int_eq(mg_detok_flush(&d, out, sizeof(out)), 2);
    ck_assert_mem_eq(out, "\xF0\x9F", 2);

    // ... and an unfinished character followed by a complete one is emitted
    // whole: what goes in comes out, valid or not.
    mg_detok_init(&d, false);
    int32_t a = mg_vocab_find(v, "a", 1);
    ck_assert_int_eq(mg_detok_push(&d, v, ids[0], out, sizeof(out)), 0);
    ck_assert_int_eq(mg_detok_push(&d, v, a, out, sizeof(out)), 3);
    ck_assert_mem_eq(out, "\xF0\x9F" "a", 3);

    // Hidden CONTROL tokens print nothing, shown ones print their text.
    mg_detok_init(&d, false);
    ck_assert_int_eq(mg_detok_push(&d, v, 50256, out, sizeof(out)), 0);
    mg_detok_init(&d, true);
    ck_assert_int_eq(mg_detok_push(&d, v, 50256, out, sizeof(out)), 13);
    ck_assert_mem_eq(out, "<|endoftext|>", 13);
    mg_vocab_free(v);
}
END_TEST

// The hold-back rule byte by byte: a byte-level vocabulary has a token for
// every single byte, so any byte sequence can be streamed one byte per token.
// Each push must print exactly the complete characters so far; an invalid
// byte never waits for anything (it cannot start or finish a character).
struct push_case {
    const char * what;
    const char * bytes;
    const char * printed;   // after each byte: how many bytes that push prints, '0'..'9'
    int          left;      // bytes still held back at the end
};

START_TEST(test_detok_hold_back_bytes) {
    struct mg_vocab * v = load_vocab("models/tiny-f32.gguf");
    int32_t byte_token[256];
    for (int b = 0; b < 256; b++) byte_token[b] = -1;
    for (int32_t id = 0; id < mg_vocab_n_tokens(v); id++) {
        char piece[8];
        if (mg_token_to_piece(v, id, piece, sizeof(piece), false) == 1 && byte_token[(uint8_t) piece[0]] < 0) {
            byte_token[(uint8_t) piece[0]] = id;
        }
    }
    for (int b = 0; b < 256; b++) ck_assert_msg(byte_token[b] >= 0, "no token for byte %02x", b);

    static const struct push_case cases[] = {
        {"ASCII",                      "ab",                         "11",   0},
        {"2-byte split",               "\xC3\xA9",                   "02",   0},   // é
        {"3-byte split",               "\xE4\xBD\xA0",               "003",  0},   // 你
        {"4-byte split",               "\xF0\x9F\x9A\x80",           "0004", 0},   // rocket
        {"3-byte, never finished",     "\xE7\xB6",                   "00",   2},   // make run's last token
        {"lone continuation byte",     "\x80" "a",                   "11",   0},
        {"invalid bytes F8, FF",       "\xF8\xFF",                   "11",   0},
        {"lead then ASCII",            "\xE4" "a",                   "02",   0},
        {"lead then another lead",     "\xE4\xC3\xA9",               "012",  0},
        {"finished, then a new lead",  "\xC3\xA9\xE4\xBD",           "0200", 2},
        {"too many continuations",     "\xC3\xA9\xA9",               "021",  0},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        const struct push_case * pc = &cases[c];
        struct mg_detok d;
        mg_detok_init(&d, false);
        char out[16], all[32];
        size_t n_all = 0;
        const size_t n = strlen(pc->bytes);
        ck_assert_uint_eq(strlen(pc->printed), n);
        for (size_t i = 0; i < n; i++) {
            const int32_t k = mg_detok_push(&d, v, byte_token[(uint8_t) pc->bytes[i]], out, sizeof(out));
            ck_assert_msg(k == pc->printed[i] - '0', "%s: byte %zu printed %d bytes, expected %c", pc->what, i, k,
                          pc->printed[i]);
            memcpy(all + n_all, out, (size_t) k);
            n_all += (size_t) k;
        }
        ck_assert_msg(d.n_pending == pc->left, "%s: %d bytes held back at the end", pc->what, d.n_pending);
        // What was printed plus what is held back is every byte pushed, in order.
        const int32_t k = mg_detok_flush(&d, all + n_all, (int32_t) (sizeof(all) - n_all));
        ck_assert_int_eq(k, pc->left);
        ck_assert_uint_eq(n_all + (size_t) k, n);
        ck_assert_mem_eq(all, pc->bytes, n);
    }
    mg_vocab_free(v);
}
END_TEST

// ---------------------------------------------------------------------------
// Invalid UTF-8
// ---------------------------------------------------------------------------

// What llama.cpp makes of any bytes before tokenizing (unicode_cpts_from_utf8,
// then unicode_cpt_to_utf8), written independently of unicode.c: sequences
// are checked for shape only; anything else is U+FFFD, one byte at a time.
// (A sequence above U+10FFFF makes llama.cpp throw; unicode.h documents that
// we treat it as invalid instead.)
static size_t llama_normalize(const uint8_t * s, size_t len, char * out) {
    size_t n = 0;
    for (size_t i = 0; i < len; ) {
        uint8_t b = s[i];
        size_t need = b < 0x80 ? 1 : (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : (b & 0xF8) == 0xF0 ? 4 : 0;
        uint32_t c = need == 1 ? b : need == 2 ? (b & 0x1Fu) : need == 3 ? (b & 0x0Fu) : (b & 0x07u);
        for (size_t k = 1; k < need; k++) {
            if (i + k >= len || (s[i + k] & 0xC0) != 0x80) need = 0;
            else c = (c << 6) | (s[i + k] & 0x3Fu);
        }
        if (need == 0 || c > 0x10FFFF) {
            n += put_utf8(out + n, 0xFFFD);
            i += 1;
        } else {
            n += put_utf8(out + n, c);
            i += need;
        }
    }
    return n;
}

START_TEST(test_invalid_utf8) {
    struct mg_vocab * gpt2 = load_vocab("vocab/ggml-vocab-gpt-2.gguf");
    struct mg_vocab * mini = load_vocab("models/tiny-f32.gguf");
    struct mg_vocab * qwen = load_vocab_with_pre("models/tiny-f32.gguf", "qwen2");
#if defined(MG_HAS_PRETOK_DEFAULT)
    struct mg_vocab * dflt = load_vocab_with_pre("models/tiny-f32.gguf", NULL);
#else
    struct mg_vocab * dflt = load_vocab_with_pre("models/tiny-f32.gguf", "gpt-2");   // the chapter has no DEFAULT
#endif
    struct mg_vocab * vocabs[] = { gpt2, mini, qwen, dflt };
    static int32_t ids[8192], again[8192];
    static char back[1 << 15], want[1 << 15];
    static uint8_t bytes[2048];

    // Known cases: each tokenizes exactly like the valid text llama.cpp turns it into.
    static const struct { const char * bad; size_t len; const char * same_as; } cases[] = {
        { "\xFF", 1, "\xEF\xBF\xBD" },                                   // 0xFF -> U+FFFD
        { "a\x80" "b", 3, "a\xEF\xBF\xBD" "b" },                         // lone continuation byte
        { "\xE4\xBD", 2, "\xEF\xBF\xBD\xEF\xBF\xBD" },                   // truncated 你: two U+FFFD
        { "\xC0\xAF", 2, "/" },                                          // overlong '/'
        { "x\xC0\x80y", 4, "x\0y" },                                     // overlong NUL is a NUL
        { "\xF4\x90\x80\x80", 4, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD" },   // > U+10FFFF
    };
    for (size_t vi = 0; vi < 4; vi++) {
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
            size_t want_len = i == 4 ? 3 : strlen(cases[i].same_as);
            int32_t n = tokenize(vocabs[vi], cases[i].bad, cases[i].len, ids, false, false);
            int32_t m = tokenize(vocabs[vi], cases[i].same_as, want_len, again, false, false);
            ck_ids(ids, n, again, m, mg_vocab_pre(vocabs[vi]));
        }
    }

    // Random bytes (NULs, continuation bytes, 0xF8-0xFF, truncated
    // sequences, pieces of real characters): no crash, the same ids twice,
    // and the ids print back llama.cpp's normalization of the bytes.
    uint64_t rng = 7;
    static const uint8_t good[] = { 0xE4, 0xBD, 0xA0, 0xF0, 0x9F, 0x98, 0x80, 0xC3, 0xA9, ' ', 'a', '\n', '\'', '1' };
    for (int iter = 0; iter < 200; iter++) {
        size_t len = (size_t) (mg_test_rand_u64(&rng) % sizeof(bytes));
        for (size_t i = 0; i < len; i++) {
            uint64_t r = mg_test_rand_u64(&rng);
            bytes[i] = r % 3 == 0 ? (uint8_t) (r >> 8) : good[(r >> 8) % sizeof(good)];
        }
        struct mg_vocab * v = vocabs[iter % 4];
        int32_t n = tokenize(v, (const char *) bytes, len, ids, false, false);
        int32_t m = tokenize(v, (const char *) bytes, len, again, false, false);
        ck_ids(ids, n, again, m, "deterministic");
        size_t back_len = detokenize(v, ids, n, false, back, sizeof(back));
        size_t want_len = llama_normalize(bytes, len, want);
        ck_assert_msg(back_len == want_len && memcmp(back, want, want_len) == 0, "%s: random bytes %d",
                      mg_vocab_pre(v), iter);
    }
    for (size_t vi = 0; vi < 4; vi++) mg_vocab_free(vocabs[vi]);
}
END_TEST

// ---------------------------------------------------------------------------
// Errors and options
// ---------------------------------------------------------------------------

static struct mg_vocab_params tiny_params(void) {
    static const char * const tokens[] = { "a", "b", "ab", "<s>", "</s>" };
    static const int32_t types[] = { 1, 1, 1, 3, 3 };
    static const char * const merges[] = { "a b" };
    struct mg_vocab_params p = mg_vocab_default_params();
    p.n_tokens = 5;
    p.tokens = tokens;
    p.token_types = types;
    p.n_merges = 1;
    p.merges = merges;
    p.pre = "gpt-2";
    return p;
}

START_TEST(test_errors) {
    struct mg_vocab_params p = tiny_params();
    p.pre = "gpt2";
    ck_assert(mg_vocab_new(&p) == NULL);
    ck_assert_msg(strstr(mg_last_error(), "'gpt2'") && strstr(mg_last_error(), "gpt-2"), "%s", mg_last_error());
    p.pre = "deepseek-llm";   // a pre-tokenizer of llama.cpp's that no engine here runs
    ck_assert(mg_vocab_new(&p) == NULL);
    ck_assert_msg(strstr(mg_last_error(), "'deepseek-llm'") != NULL, "%s", mg_last_error());

    p = tiny_params();
    static const char * const dup[] = { "a", "b", "a", "<s>", "</s>" };
    p.tokens = dup;
    ck_assert(mg_vocab_new(&p) == NULL);
    ck_assert_msg(strstr(mg_last_error(), "tokens 0 and 2") != NULL, "%s", mg_last_error());

    p = tiny_params();
    p.add_bos = true;   // but no bos token
    ck_assert(mg_vocab_new(&p) == NULL);
    ck_assert_msg(strstr(mg_last_error(), "bos") != NULL, "%s", mg_last_error());

    p = tiny_params();
    p.n_tokens = 0;
    ck_assert(mg_vocab_new(&p) == NULL);
}
END_TEST

START_TEST(test_add_special) {
    struct mg_vocab_params p = tiny_params();
    p.special[MG_SPECIAL_BOS] = 3;
    p.special[MG_SPECIAL_EOS] = 4;
    p.add_bos = true;
    p.add_eos = true;
    struct mg_vocab * v = mg_vocab_new(&p);
    ck_assert_msg(v != NULL, "%s", mg_last_error());
    int32_t ids[8];
    int32_t n = tokenize(v, "ab", 2, ids, true, false);
    ck_ids(ids, n, (const int32_t[]) { 3, 2, 4 }, 3, "bos ab eos");   // "a b" merges to "ab"
    n = tokenize(v, "ab", 2, ids, false, false);
    ck_ids(ids, n, (const int32_t[]) { 2 }, 1, "ab");
    // </s> is on llama.cpp's end-of-generation list, and is eos too.
    ck_assert(mg_vocab_is_eog(v, 4));
    ck_assert(!mg_vocab_is_eog(v, 3));
    // "ba" has no merge: two tokens.
    n = tokenize(v, "ba", 2, ids, false, false);
    ck_ids(ids, n, (const int32_t[]) { 1, 0 }, 2, "ba");
    // "c" is no token and no byte token: llama.cpp drops it (the text loses
    // a byte, silently); here it is an error that names the byte. So is a
    // space, spelled 'Ġ' (U+0120, two bytes) in the byte alphabet.
    ck_assert_int_eq(mg_tokenize(v, "bac", 3, ids, 8, false, false), INT32_MIN);
    ck_assert_msg(strstr(mg_last_error(), "byte 0x63") && strstr(mg_last_error(), "'c'"), "%s", mg_last_error());
    ck_assert_int_eq(mg_tokenize(v, "a b", 3, ids, 8, false, false), INT32_MIN);
    ck_assert_msg(strstr(mg_last_error(), "byte 0x20") && strstr(mg_last_error(), "'\xc4\xa0'"), "%s", mg_last_error());
    mg_vocab_free(v);
}
END_TEST

START_TEST(test_merge_order) {
    // Ranks decide, then position: with merges "b c" (rank 0) and "a b"
    // (rank 1), "abc" merges b+c first and then finds no "a bc" merge.
    static const char * const tokens[] = { "a", "b", "c", "ab", "bc", "abc" };
    static const char * const merges[] = { "b c", "a b", "ab c" };
    struct mg_vocab_params p = mg_vocab_default_params();
    p.n_tokens = 6;
    p.tokens = tokens;
    p.n_merges = 3;
    p.merges = merges;
    p.pre = "gpt-2";
    struct mg_vocab * v = mg_vocab_new(&p);
    ck_assert_msg(v != NULL, "%s", mg_last_error());
    int32_t ids[8];
    int32_t n = tokenize(v, "abc", 3, ids, false, false);
    ck_ids(ids, n, (const int32_t[]) { 0, 4 }, 2, "a bc");
    // Equal ranks: the leftmost pair first. "bcbc" -> "bc" "bc" (both rank 0).
    n = tokenize(v, "bcbc", 4, ids, false, false);
    ck_ids(ids, n, (const int32_t[]) { 4, 4 }, 2, "bc bc");
    mg_vocab_free(v);

    // With "a b" first instead, "abc" -> "ab" then "ab c" -> "abc".
    static const char * const merges2[] = { "a b", "b c", "ab c" };
    p.merges = merges2;
    v = mg_vocab_new(&p);
    n = tokenize(v, "abc", 3, ids, false, false);
    ck_ids(ids, n, (const int32_t[]) { 5 }, 1, "abc");
    // "aaa" with a merge "a a": the left pair merges, then "aa a" has no merge.
    mg_vocab_free(v);
    static const char * const tokens3[] = { "a", "aa" };
    static const char * const merges3[] = { "a a" };
    p.n_tokens = 2;
    p.tokens = tokens3;
    p.n_merges = 1;
    p.merges = merges3;
    v = mg_vocab_new(&p);
    n = tokenize(v, "aaa", 3, ids, false, false);
    ck_ids(ids, n, (const int32_t[]) { 1, 0 }, 2, "aa a");
    mg_vocab_free(v);

    // A merge whose result is no token: the symbol "ab" falls back to the
    // tokens of its bytes, "a" and "b".
    static const char * const tokens4[] = { "a", "b" };
    static const char * const merges4[] = { "a b" };
    p.tokens = tokens4;
    p.merges = merges4;
    v = mg_vocab_new(&p);
    n = tokenize(v, "ab", 2, ids, false, false);
    ck_ids(ids, n, (const int32_t[]) { 0, 1 }, 2, "a b");
    mg_vocab_free(v);
}
END_TEST

// ---------------------------------------------------------------------------
// mg_vocab_load on small GGUF files written here, byte by byte (GGUF v3,
// docs/formats.md section 1: header, then key/value pairs, no tensors).
// ---------------------------------------------------------------------------

struct gguf_bytes {
    unsigned char data[4096];
    size_t        n;
    uint64_t      n_kv;
};

static void put(struct gguf_bytes * b, const void * src, size_t n) {
    ck_assert(b->n + n <= sizeof(b->data));
    memcpy(b->data + b->n, src, n);   // little-endian host, like the format
    b->n += n;
}

static void put_u32(struct gguf_bytes * b, uint32_t v) { put(b, &v, 4); }
static void put_u64(struct gguf_bytes * b, uint64_t v) { put(b, &v, 8); }

static void put_str(struct gguf_bytes * b, const char * s) {
    put_u64(b, strlen(s));
    put(b, s, strlen(s));
}

static void kv_str(struct gguf_bytes * b, const char * key, const char * value) {
    put_str(b, key);
    put_u32(b, 8);   // string
    put_str(b, value);
    b->n_kv++;
}

static void kv_u32(struct gguf_bytes * b, const char * key, uint32_t value) {
    put_str(b, key);
    put_u32(b, 4);   // u32
    put_u32(b, value);
    b->n_kv++;
}

static void kv_strs(struct gguf_bytes * b, const char * key, const char * const * values, uint64_t n) {
    put_str(b, key);
    put_u32(b, 9);   // array
    put_u32(b, 8);   // of strings
    put_u64(b, n);
    for (uint64_t i = 0; i < n; i++) put_str(b, values[i]);
    b->n_kv++;
}

static void kv_i32s(struct gguf_bytes * b, const char * key, const int32_t * values, uint64_t n) {
    put_str(b, key);
    put_u32(b, 9);   // array
    put_u32(b, 5);   // of i32
    put_u64(b, n);
    put(b, values, n * sizeof(int32_t));
    b->n_kv++;
}

// Writes header + the key/values to a temporary file, opens it and loads
// the vocabulary (NULL on failure, with mg_last_error()).
static struct mg_vocab * load_gguf_bytes(const struct gguf_bytes * kvs) {
    char path[] = "/tmp/mg_test_vocab_XXXXXX";
    int fd = mkstemp(path);
    ck_assert(fd >= 0);
    FILE * f = fdopen(fd, "wb");
    uint32_t version = 3;
    uint64_t n_tensors = 0;
    fwrite("GGUF", 1, 4, f);
    fwrite(&version, 4, 1, f);
    fwrite(&n_tensors, 8, 1, f);
    fwrite(&kvs->n_kv, 8, 1, f);
    fwrite(kvs->data, 1, kvs->n, f);
    fclose(f);
    struct mg_gguf * g = mg_gguf_open(path);
    ck_assert_msg(g != NULL, "%s", mg_last_error());
    struct mg_vocab * v = mg_vocab_load(g);
    mg_gguf_close(g);
    unlink(path);
    return v;
}

static const char * const small_tokens[] = { "a", "b", "ab", "<|im_end|>" };
static const int32_t small_types[] = { 1, 1, 1, 3 };
static const char * const small_merges[] = { "a b" };

// A valid vocabulary-only file; leave_out names one key not to write.
static void small_gguf(struct gguf_bytes * b, const char * model, const char * pre, const char * leave_out) {
    memset(b, 0, sizeof(*b));
    if (model) kv_str(b, "tokenizer.ggml.model", model);
    if (pre) kv_str(b, "tokenizer.ggml.pre", pre);
    kv_strs(b, "tokenizer.ggml.tokens", small_tokens, 4);
    if (!leave_out || strcmp(leave_out, "token_type") != 0) kv_i32s(b, "tokenizer.ggml.token_type", small_types, 4);
    if (!leave_out || strcmp(leave_out, "merges") != 0) kv_strs(b, "tokenizer.ggml.merges", small_merges, 1);
}

START_TEST(test_load_gguf) {
    struct gguf_bytes b;
    small_gguf(&b, "gpt2", "qwen2", NULL);
    struct mg_vocab * v = load_gguf_bytes(&b);
    ck_assert_msg(v != NULL, "%s", mg_last_error());
    ck_assert_str_eq(mg_vocab_pre(v), "qwen2");
    int32_t ids[8];
    ck_ids(ids, tokenize(v, "ab", 2, ids, false, false), (const int32_t[]) { 2 }, 1, "ab");
    // No bos/eos keys: llama.cpp's default 11 is out of range here, so none.
    ck_assert_int_eq(mg_vocab_bos(v), -1);
    ck_assert_int_eq(mg_vocab_eos(v), -1);
    // No eot key: found by its text, and it ends generation.
    ck_assert_int_eq(mg_vocab_eot(v), 3);
    ck_assert(mg_vocab_is_eog(v, 3));
    ck_assert(mg_vocab_chat_template(v) == NULL);
    mg_vocab_free(v);

    // Keys that name tokens: in range they count, out of range they are ignored.
    small_gguf(&b, "gpt2", "gpt-2", NULL);
    kv_u32(&b, "tokenizer.ggml.eos_token_id", 2);
    kv_u32(&b, "tokenizer.ggml.bos_token_id", 99);
    kv_str(&b, "tokenizer.chat_template", "{{ messages }}");
    v = load_gguf_bytes(&b);
    ck_assert_msg(v != NULL, "%s", mg_last_error());
    ck_assert_int_eq(mg_vocab_eos(v), 2);
    ck_assert_int_eq(mg_vocab_bos(v), -1);
    ck_assert(mg_vocab_is_eog(v, 2));   // "ab" is eos, so it ends generation
    ck_assert_str_eq(mg_vocab_chat_template(v), "{{ messages }}");
    mg_vocab_free(v);

    // No pre-tokenizer key: the DEFAULT pipeline (llama.cpp warns and goes
    // on); chapter 09, which leaves that pipeline to full/, refuses the file.
    small_gguf(&b, "gpt2", NULL, NULL);
    v = load_gguf_bytes(&b);
#if defined(MG_HAS_PRETOK_DEFAULT)
    ck_assert_msg(v != NULL, "%s", mg_last_error());
    ck_assert_str_eq(mg_vocab_pre(v), "");
    mg_vocab_free(v);
#else
    ck_assert(v == NULL);
    ck_assert_msg(strstr(mg_last_error(), "tokenizer.ggml.pre is missing") != NULL, "%s", mg_last_error());
#endif

    // No token types: every token is NORMAL, so "<|im_end|>" prints as text.
    small_gguf(&b, "gpt2", "gpt-2", "token_type");
    v = load_gguf_bytes(&b);
    ck_assert_msg(v != NULL, "%s", mg_last_error());
    ck_assert_int_eq(mg_vocab_token_attr(v, 0), MG_TOKEN_ATTR_NORMAL);
    mg_vocab_free(v);
}
END_TEST

START_TEST(test_load_gguf_errors) {
    struct gguf_bytes b;
    small_gguf(&b, "llama", "gpt-2", NULL);
    ck_assert(load_gguf_bytes(&b) == NULL);
    ck_assert_msg(strstr(mg_last_error(), "tokenizer.ggml.model") && strstr(mg_last_error(), "'llama'"), "%s",
                  mg_last_error());

    small_gguf(&b, NULL, "gpt-2", NULL);
    ck_assert(load_gguf_bytes(&b) == NULL);
    ck_assert_msg(strstr(mg_last_error(), "tokenizer.ggml.model") != NULL, "%s", mg_last_error());

    small_gguf(&b, "gpt2", "gpt2", NULL);   // the model's name used as the pre-tokenizer's
    ck_assert(load_gguf_bytes(&b) == NULL);
    ck_assert_msg(strstr(mg_last_error(), "/tmp/mg_test_vocab_") && strstr(mg_last_error(), "tokenizer.ggml.pre")
                  && strstr(mg_last_error(), "'gpt-2'"), "%s", mg_last_error());

    small_gguf(&b, "gpt2", "gpt-2", "merges");
    ck_assert(load_gguf_bytes(&b) == NULL);
    ck_assert_msg(strstr(mg_last_error(), "tokenizer.ggml.merges") != NULL, "%s", mg_last_error());

    small_gguf(&b, "gpt2", "gpt-2", "token_type");
    kv_i32s(&b, "tokenizer.ggml.token_type", small_types, 3);   // one short
    ck_assert(load_gguf_bytes(&b) == NULL);
    ck_assert_msg(strstr(mg_last_error(), "tokenizer.ggml.token_type") != NULL, "%s", mg_last_error());

    small_gguf(&b, "gpt2", "gpt-2", NULL);
    kv_str(&b, "tokenizer.ggml.bos_token_id", "1");   // a string where a number belongs
    ck_assert(load_gguf_bytes(&b) == NULL);
    ck_assert_msg(strstr(mg_last_error(), "bos_token_id") != NULL, "%s", mg_last_error());

    memset(&b, 0, sizeof(b));   // tokens as one string instead of an array of them
    kv_str(&b, "tokenizer.ggml.model", "gpt2");
    kv_str(&b, "tokenizer.ggml.tokens", "a");
    kv_strs(&b, "tokenizer.ggml.merges", small_merges, 1);
    ck_assert(load_gguf_bytes(&b) == NULL);
    ck_assert_msg(strstr(mg_last_error(), "tokenizer.ggml.tokens") != NULL, "%s", mg_last_error());
}
END_TEST

// ---------------------------------------------------------------------------
// A synthetic 150,000-token vocabulary against a slow reference BPE
// ---------------------------------------------------------------------------

#define SYN_TOKENS 150000
#define SYN_MERGES 150000

struct synth {
    char ** tokens;        // NUL-terminated, in the byte alphabet
    int32_t n_tokens;
    char ** merges;        // "left right"
    int32_t n_merges;
};

// Builds the vocabulary the way BPE training grows one: start from the 256
// characters of the byte alphabet; each merge joins a "word" token (letters,
// maybe led by Ġ) with a letter token, and its result becomes a new token.
// Once there are SYN_TOKENS tokens, further merges make strings that are no
// token, which exercises the byte fallback.
static struct synth make_synth(uint64_t seed) {
    struct synth s;
    s.tokens = malloc(SYN_TOKENS * sizeof(char *));
    s.merges = malloc(SYN_MERGES * sizeof(char *));
    s.n_tokens = s.n_merges = 0;
    int32_t * left_pool = malloc(SYN_TOKENS * sizeof(int32_t));    // word tokens
    int32_t * right_pool = malloc(SYN_TOKENS * sizeof(int32_t));   // letter-only tokens
    int32_t n_left = 0, n_right = 0;
    ck_assert(hcreate(4 * (SYN_TOKENS + SYN_MERGES)) != 0);

    for (int b = 0; b < 256; b++) {
        char buf[4];
        size_t k = put_utf8(buf, mg_unicode_byte_to_cpt((uint8_t) b));
        buf[k] = '\0';
        s.tokens[s.n_tokens] = strdup(buf);
        hsearch((ENTRY) { s.tokens[s.n_tokens], NULL }, ENTER);
        if (b >= 'a' && b <= 'z') {
            left_pool[n_left++] = s.n_tokens;
            right_pool[n_right++] = s.n_tokens;
        }
        if (b == ' ') left_pool[n_left++] = s.n_tokens;   // "Ġ"
        s.n_tokens++;
    }

    uint64_t rng = seed;
    while (s.n_merges < SYN_MERGES) {
        const char * left = s.tokens[left_pool[mg_test_rand_u64(&rng) % (uint64_t) n_left]];
        // Mostly single letters on the right, so that tokens grow a letter at a time.
        uint64_t r = mg_test_rand_u64(&rng);
        const char * right = s.tokens[right_pool[r % 4 ? r % 26 : (r >> 8) % (uint64_t) n_right]];
        if (strlen(left) + strlen(right) > 16) continue;
        char merge[64], joined[64];
        snprintf(merge, sizeof(merge), "%s %s", left, right);
        snprintf(joined, sizeof(joined), "%s%s", left, right);
        if (hsearch((ENTRY) { merge, NULL }, FIND)) continue;   // each pair once
        s.merges[s.n_merges] = strdup(merge);
        hsearch((ENTRY) { s.merges[s.n_merges], NULL }, ENTER);
        s.n_merges++;
        if (s.n_tokens < SYN_TOKENS && !hsearch((ENTRY) { joined, NULL }, FIND)) {
            s.tokens[s.n_tokens] = strdup(joined);
            hsearch((ENTRY) { s.tokens[s.n_tokens], NULL }, ENTER);
            left_pool[n_left++] = s.n_tokens;
            if (strncmp(joined, "\xC4\xA0", 2) != 0) right_pool[n_right++] = s.n_tokens;
            s.n_tokens++;
        }
    }
    hdestroy();
    free(left_pool);
    free(right_pool);
    return s;
}

static void free_synth(struct synth * s) {
    for (int32_t i = 0; i < s->n_tokens; i++) free(s->tokens[i]);
    for (int32_t i = 0; i < s->n_merges; i++) free(s->merges[i]);
    free(s->tokens);
    free(s->merges);
}

// The reference: sorted arrays and bsearch instead of hash tables, and the
// textbook loop instead of a priority queue: find the best-ranked adjacent
// pair (leftmost on ties), merge it, repeat.
struct ref_entry {
    const char * text;
    int32_t      value;   // token id or merge rank
};

static int ref_compare(const void * a, const void * b) {
    return strcmp(((const struct ref_entry *) a)->text, ((const struct ref_entry *) b)->text);
}

struct ref {
    struct ref_entry * tokens;
    struct ref_entry * merges;
    int32_t            n_tokens;
    int32_t            n_merges;
};

static int32_t ref_lookup(const struct ref_entry * table, int32_t n, const char * text) {
    struct ref_entry key = { text, 0 };
    const struct ref_entry * e = bsearch(&key, table, (size_t) n, sizeof(key), ref_compare);
    return e ? e->value : -1;
}

static struct ref make_ref(const struct synth * s) {
    struct ref r = { malloc((size_t) s->n_tokens * sizeof(struct ref_entry)),
                     malloc((size_t) s->n_merges * sizeof(struct ref_entry)), s->n_tokens, s->n_merges };
    for (int32_t i = 0; i < s->n_tokens; i++) r.tokens[i] = (struct ref_entry) { s->tokens[i], i };
    for (int32_t i = 0; i < s->n_merges; i++) r.merges[i] = (struct ref_entry) { s->merges[i], i };
    qsort(r.tokens, (size_t) r.n_tokens, sizeof(struct ref_entry), ref_compare);
    qsort(r.merges, (size_t) r.n_merges, sizeof(struct ref_entry), ref_compare);
    return r;
}

// One word (already in the byte alphabet) -> ids.
static void ref_bpe_word(const struct ref * r, const char * word, int32_t * out, int32_t * n_out) {
    char sym[64][64];
    int n = 0;
    for (size_t i = 0; word[i]; ) {
        size_t k = ((uint8_t) word[i] & 0xE0) == 0xC0 ? 2 : 1;   // the alphabet has 1- and 2-byte characters
        memcpy(sym[n], word + i, k);
        sym[n++][k] = '\0';
        i += k;
    }
    for (;;) {
        int best = -1;
        int32_t best_rank = 0;
        for (int i = 0; i + 1 < n; i++) {
            char key[2 * 64 + 2];
            snprintf(key, sizeof(key), "%.63s %.63s", sym[i], sym[i + 1]);
            int32_t rank = ref_lookup(r->merges, r->n_merges, key);
            if (rank >= 0 && (best < 0 || rank < best_rank)) {
                best = i;
                best_rank = rank;
            }
        }
        if (best < 0) break;
        size_t a = strlen(sym[best]), b = strlen(sym[best + 1]);
        ck_assert(a + b < sizeof(sym[0]));
        memcpy(sym[best] + a, sym[best + 1], b + 1);
        memmove(sym[best + 1], sym[best + 2], (size_t) (n - best - 2) * sizeof(sym[0]));
        n--;
    }
    for (int i = 0; i < n; i++) {
        int32_t id = ref_lookup(r->tokens, r->n_tokens, sym[i]);
        if (id >= 0) {
            out[(*n_out)++] = id;
            continue;
        }
        for (size_t k = 0; sym[i][k]; k++) {   // the byte fallback: one byte of the spelled text
            char one[2] = { sym[i][k], '\0' };
            int32_t b = ref_lookup(r->tokens, r->n_tokens, one);
            if (b >= 0) out[(*n_out)++] = b;
        }
    }
}

// Text made of words separated by single spaces; each word joins one to
// three random letter tokens, so that long merges really apply.
static size_t synth_text(const struct synth * s, uint64_t * rng, char * out, size_t len) {
    size_t n = 0;
    while (n + 64 < len) {
        if (n > 0) out[n++] = ' ';
        int parts = 1 + (int) (mg_test_rand_u64(rng) % 3);
        for (int k = 0; k < parts; k++) {
            const char * t;
            do {
                t = s->tokens[256 + mg_test_rand_u64(rng) % (uint64_t) (s->n_tokens - 256)];
            } while (strncmp(t, "\xC4\xA0", 2) == 0 || strlen(t) > 8);   // letters only
            memcpy(out + n, t, strlen(t));
            n += strlen(t);
        }
    }
    return n;
}

START_TEST(test_synthetic_150k) {
    struct synth s = make_synth(11);
    ck_assert_int_eq(s.n_tokens, SYN_TOKENS);
    ck_assert_int_eq(s.n_merges, SYN_MERGES);
    struct mg_vocab_params p = mg_vocab_default_params();
    p.n_tokens = s.n_tokens;
    p.tokens = (const char * const *) s.tokens;
    p.n_merges = s.n_merges;
    p.merges = (const char * const *) s.merges;
    p.pre = "gpt-2";
    struct mg_vocab * v = mg_vocab_new(&p);
    ck_assert_msg(v != NULL, "%s", mg_last_error());

    // 100 KB: tokenizes, and prints back to itself.
    enum { TEXT = 100 * 1024 };
    static char text[TEXT], back[2 * TEXT];
    static int32_t ids[TEXT], want[TEXT];
    uint64_t rng = 12;
    size_t len = synth_text(&s, &rng, text, TEXT);
    int32_t n = mg_tokenize(v, text, (int32_t) len, ids, TEXT, false, false);
    ck_assert_int_gt(n, 0);
    ck_assert_int_lt(n, (int32_t) len / 2);   // the merges really merged
    size_t back_len = detokenize(v, ids, n, false, back, sizeof(back));
    ck_assert_uint_eq(back_len, len);
    ck_assert_mem_eq(back, text, len);

    // The first 20 KB against the reference. With single spaces between
    // letter words, GPT-2's pre-tokenizer makes exactly "word", " word", ...
    struct ref r = make_ref(&s);
    size_t small = 20 * 1024;
    while (text[small] != ' ') small--;
    n = mg_tokenize(v, text, (int32_t) small, ids, TEXT, false, false);
    int32_t n_want = 0;
    char word[128];
    for (size_t i = 0; i < small; ) {
        size_t k = 0;
        if (text[i] == ' ') {   // Ġ
            word[k++] = (char) 0xC4;
            word[k++] = (char) 0xA0;
            i++;
        }
        while (i < small && text[i] != ' ') word[k++] = text[i++];
        word[k] = '\0';
        ref_bpe_word(&r, word, want, &n_want);
    }
    ck_ids(ids, n, want, n_want, "synthetic vocabulary vs reference");

    // A word ending in a merge that makes no token: the fallback must match too.
    // (Found by search: a merge of rank >= the last token-making one.)
    int32_t fallback_rank = -1;
    for (int32_t i = s.n_merges - 1; i >= 0 && fallback_rank < 0; i--) {
        char joined[64];
        const char * sp = strchr(s.merges[i], ' ');
        snprintf(joined, sizeof(joined), "%.*s%s", (int) (sp - s.merges[i]), s.merges[i], sp + 1);
        if (mg_vocab_find(v, joined, strlen(joined)) < 0 && strncmp(joined, "\xC4\xA0", 2) != 0) fallback_rank = i;
    }
    ck_assert_int_ge(fallback_rank, 0);
    const char * sp = strchr(s.merges[fallback_rank], ' ');
    snprintf(word, sizeof(word), "%.*s%s", (int) (sp - s.merges[fallback_rank]), s.merges[fallback_rank], sp + 1);
    n = tokenize(v, word, strlen(word), ids, false, false);
    n_want = 0;
    ref_bpe_word(&r, word, want, &n_want);
    ck_ids(ids, n, want, n_want, "fallback word");

    free(r.tokens);
    free(r.merges);
    mg_vocab_free(v);
    free_synth(&s);
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("vocab");

    TCase * unicode = tcase_create("unicode");
    tcase_add_test(unicode, test_unicode_flags);
    tcase_add_test(unicode, test_unicode_table_shape);
    tcase_add_test(unicode, test_utf8_decode);
    tcase_add_test(unicode, test_byte_alphabet);
    tcase_add_test(unicode, test_split_gpt2);
    tcase_add_test(unicode, test_split_qwen2);
#if defined(MG_HAS_PRETOK_DEFAULT)
    tcase_add_test(unicode, test_split_default);
#endif
    suite_add_tcase(s, unicode);

    TCase * fixtures = MG_TCASE(s, "fixtures", test_gpt2_vocab_fixture, test_minimind_prompts,
                                   test_minimind_metadata);
    tcase_set_timeout(fixtures, 60);

    TCase * tokens = MG_TCASE(s, "tokens", test_special_tokens, test_token_to_piece, test_tokenize_small_buffer,
                                 test_round_trip, test_detok_split_character, test_detok_hold_back_bytes,
                                 test_bpe_trace, test_invalid_utf8, test_errors, test_add_special, test_merge_order,
                                 test_load_gguf, test_load_gguf_errors);
    tcase_set_timeout(tokens, 120);

    TCase * big = MG_TCASE(s, "synthetic", test_synthetic_150k);
    tcase_set_timeout(big, 300);
    return s;
}
