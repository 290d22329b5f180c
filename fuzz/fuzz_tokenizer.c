// fuzz_tokenizer.c - bytes in, tokens out, with two real vocabularies
// (MiniMind's, qwen2 pre-tokenizer; GPT-2's). The first byte picks the
// vocabulary and the flags, the rest is the text.
// Properties:
//   - mg_tokenize never writes past n_max: asked with too small a buffer it
//     returns -(the number needed), and that number is exactly what a second
//     call with a buffer of that size returns (and the same tokens each time);
//   - every id is in the vocabulary;
//   - for valid UTF-8 without special-token parsing and without BOS/EOS, the
//     pieces of the tokens put together give the input back, byte for byte,
//     and the streaming detokenizer gives the same bytes.
#include "fuzz.h"

#include "gguf.h"
#include "unicode.h"
#include "vocab.h"

#include <stdbool.h>
#include <string.h>

static struct mg_vocab * vocabs[2];

static struct mg_vocab * load(const char * rel) {
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", MG_FUZZ_ROOT, rel);
    struct mg_gguf * g = mg_gguf_open(path);
    struct mg_vocab * v = g ? mg_vocab_load(g) : NULL;
    if (v == NULL) {
        fprintf(stderr, "fuzz_tokenizer: %s\n", mg_last_error());
        abort();
    }
    mg_gguf_close(g);
    return v;
}

int LLVMFuzzerInitialize(int * argc, char *** argv) {
    (void) argc;
    (void) argv;
    vocabs[0] = load("tests/fixtures/models/tiny-q4_k_m.gguf");
    vocabs[1] = load("tests/fixtures/vocab/ggml-vocab-gpt-2.gguf");
    return 0;
}

// Strict UTF-8 (no overlongs, no surrogates, at most U+10FFFF).
static bool valid_utf8(const uint8_t * s, size_t n) {
    for (size_t i = 0; i < n;) {
        const uint8_t c = s[i];
        size_t len;
        uint32_t cp;
        if (c < 0x80) { i++; continue; }
        else if ((c & 0xE0) == 0xC0) { len = 2; cp = c & 0x1F; }
        else if ((c & 0xF0) == 0xE0) { len = 3; cp = c & 0x0F; }
        else if ((c & 0xF8) == 0xF0) { len = 4; cp = c & 0x07; }
        else return false;
        if (i + len > n) return false;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return false;
            cp = cp << 6 | (s[i + k] & 0x3F);
        }
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000)) return false;
        if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        i += len;
    }
    return true;
}

static void check_round_trip(const struct mg_vocab * v, const int32_t * ids, int32_t n, const uint8_t * text,
                             size_t len) {
    char * back = malloc(len + 1);
    char * streamed = malloc(len + 1);
    size_t n_back = 0, n_streamed = 0;
    struct mg_detok d;
    mg_detok_init(&d, false);
    for (int32_t i = 0; i < n; i++) {
        char piece[512];
        const int32_t k = mg_token_to_piece(v, ids[i], piece, sizeof(piece), false);
        FUZZ_CHECK(k >= 0, "token %d: piece of %d bytes", ids[i], k);
        FUZZ_CHECK(n_back + (size_t) k <= len, "the pieces are longer than the text (%zu bytes)", len);
        memcpy(back + n_back, piece, (size_t) k);
        n_back += (size_t) k;
        const int32_t s = mg_detok_push(&d, v, ids[i], piece, sizeof(piece));
        FUZZ_CHECK(s >= 0 && n_streamed + (size_t) s <= len, "detok_push %d", s);
        memcpy(streamed + n_streamed, piece, (size_t) s);
        n_streamed += (size_t) s;
    }
    char tail[16];
    const int32_t s = mg_detok_flush(&d, tail, sizeof(tail));
    FUZZ_CHECK(s >= 0 && n_streamed + (size_t) s <= len, "detok_flush %d", s);
    memcpy(streamed + n_streamed, tail, (size_t) s);
    n_streamed += (size_t) s;
    FUZZ_CHECK(n_back == len && memcmp(back, text, len) == 0, "round trip: %zu bytes in, %zu back", len, n_back);
    FUZZ_CHECK(n_streamed == len && memcmp(streamed, text, len) == 0, "streamed round trip: %zu bytes", n_streamed);
    free(back);
    free(streamed);
}

int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    if (size < 1 || size > 4096) return 0;
    const uint8_t flags = data[0];
    const struct mg_vocab * v = vocabs[flags & 1];
    const bool add_special = flags & 2, parse_special = flags & 4;
    const char * text = (const char *) data + 1;
    const int32_t len = (int32_t) size - 1;

    // Too small a buffer: the count needed, nothing written beyond n_max.
    int32_t probe[2] = {-7, -7};
    const int32_t need = mg_tokenize(v, text, len, probe, 1, add_special, parse_special);
    FUZZ_CHECK(need <= 1 && need != INT32_MIN, "a text of %d bytes: count %d with n_max = 1", len, need);
    FUZZ_CHECK(probe[1] == -7, "wrote past n_max = 1");
    FUZZ_CHECK(need >= 0 || probe[0] == -7, "wrote into a buffer that was too small");
    const int32_t n_needed = need < 0 ? -need : need;
    int32_t * ids = malloc(((size_t) n_needed + 1) * sizeof(int32_t));
    ids[n_needed] = -7;
    const int32_t n = mg_tokenize(v, text, len, ids, n_needed, add_special, parse_special);
    FUZZ_CHECK(n == n_needed, "asked %d, then got %d", n_needed, n);
    FUZZ_CHECK(ids[n_needed] == -7, "wrote past n_max = %d", n_needed);
    if (n_needed > 0) {
        const int32_t short_by_one = mg_tokenize(v, text, len, ids, n_needed - 1, add_special, parse_special);
        FUZZ_CHECK(short_by_one == -n_needed, "n_max %d: %d", n_needed - 1, short_by_one);
        FUZZ_CHECK(mg_tokenize(v, text, len, ids, n_needed, add_special, parse_special) == n, "not repeatable");
    }
    for (int32_t i = 0; i < n; i++) {
        FUZZ_CHECK(ids[i] >= 0 && ids[i] < mg_vocab_n_tokens(v), "id %d at %d", ids[i], i);
    }
    // Each byte of text gives at most three byte tokens (an invalid byte is
    // U+FFFD, three bytes), and BOS/EOS add two: the bound the CLI sizes by.
    FUZZ_CHECK(n <= 3 * len + 2, "%d tokens from %d bytes", n, len);
    if (!add_special && !parse_special && valid_utf8((const uint8_t *) text, (size_t) len)) {
        check_round_trip(v, ids, n, (const uint8_t *) text, (size_t) len);
    }
    free(ids);
    return 0;
}
