// test_invalid_utf8.c - text that is not valid UTF-8 tokenizes to llama.cpp's
// ids: overlong forms ("\xC0\xAF" is '/'), a surrogate, stray continuation
// bytes, a cut-off sequence, 0xFF.
// tests/fixtures/vocab/invalid-utf8.inp holds the strings (the separator of
// llama.cpp's vocab fixtures), invalid-utf8.tiny.out llama.cpp's ids for each
// with tiny-f32's vocabulary (llama_tokenize, no BOS, no special tokens;
// tools/llama-ref/README.md, "Invalid UTF-8"). The rule both follow is
// unicode.h's: a byte that starts no complete sequence is U+FFFD, an overlong
// form is what it spells, a surrogate is its own code point. One case is not
// in the fixture: a 4-byte sequence past U+10FFFF ("\xF4\x90\x80\x80"), on
// which llama.cpp at the fixtures' commit aborts (an uncaught
// std::invalid_argument from unicode_cpt_to_utf8); ours gives U+FFFD for each
// of its bytes, checked here against the same text with U+FFFD written out.
#include "harness.h"
#include "gguf.h"
#include "vocab.h"

#include <stdlib.h>
#include <string.h>

enum { MAX_IDS = 4096 };

static struct mg_vocab * tiny_vocab(void) {
    struct mg_gguf * g = mg_gguf_open(mg_test_fixture("models/tiny-f32.gguf"));
    ck_assert_msg(g != NULL, "%s", mg_last_error());
    struct mg_vocab * v = mg_vocab_load(g);
    ck_assert_msg(v != NULL, "%s", mg_last_error());
    mg_gguf_close(g);
    return v;
}

static int32_t tokenize(const struct mg_vocab * v, const char * text, size_t len, int32_t * ids) {
    const int32_t n = mg_tokenize(v, text, (int32_t) len, ids, MAX_IDS, false, false);
    ck_assert_msg(n >= 0, "tokenize needs %d ids", -n);
    return n;
}

START_TEST(test_invalid_utf8_gives_llama_cpp_ids) {
    struct mg_vocab * v = tiny_vocab();
    size_t            inp_len, out_len;
    char *            inp = mg_test_read_file(mg_test_fixture("vocab/invalid-utf8.inp"), &inp_len);
    char *            out = mg_test_read_file(mg_test_fixture("vocab/invalid-utf8.tiny.out"), &out_len);
    ck_assert(inp != NULL && out != NULL);
    static const char sep[] = "\n__ggml_vocab_test__\n";
    static int32_t    ids[MAX_IDS];
    int               n_cases = 0;
    char *            line    = out;
    for (char *p = inp, *end; (end = strstr(p, sep)) != NULL; p = end + strlen(sep), n_cases++) {
        char * eol = strchr(line, '\n');
        ck_assert(eol != NULL);
        *eol = '\0';
        const int32_t n = tokenize(v, p, (size_t) (end - p), ids);
        char          ours[1024] = "";
        for (int32_t i = 0; i < n; i++) snprintf(ours + strlen(ours), sizeof(ours) - strlen(ours), " %d", ids[i]);
        ck_assert_msg(strcmp(ours, line) == 0, "case %d: ours \"%s\", llama.cpp's \"%s\"", n_cases, ours, line);
        line = eol + 1;
    }
    ck_assert_int_eq(n_cases, 9);
    free(inp);
    free(out);
    mg_vocab_free(v);
}
END_TEST

// Past U+10FFFF: each of the four bytes is U+FFFD, as the same text with
// the replacement characters written out tokenizes.
START_TEST(test_past_u10ffff_is_four_replacements) {
    struct mg_vocab * v = tiny_vocab();
    static const char bad[] = "ok \xF4\x90\x80\x80 end";
    static const char fffd[] = "ok \xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD end";
    static int32_t    a[MAX_IDS], b[MAX_IDS];
    const int32_t     na = tokenize(v, bad, sizeof(bad) - 1, a), nb = tokenize(v, fffd, sizeof(fffd) - 1, b);
    ck_assert_int_eq(na, nb);
    ck_assert_mem_eq(a, b, (size_t) na * sizeof(int32_t));
    mg_vocab_free(v);
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("invalid_utf8");
    MG_TCASE(s, "llama.cpp", test_invalid_utf8_gives_llama_cpp_ids, test_past_u10ffff_is_four_replacements);
    return s;
}
