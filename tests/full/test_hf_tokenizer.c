// test_hf_tokenizer.c - tokenizer metadata made from MiniMind's tokenizer.json
// must equal the fixtures' (made by llama.cpp's converter) key by key and byte
// by byte; the converter's rules on small made-up tokenizers; and the JSON
// parser underneath.
#define _POSIX_C_SOURCE 200809L
#include "harness.h"
#include "hf_tokenizer.h"
#include "json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[64];   // the test's directory (mg_test_make_dir), its files by mg_test_path_in

static void write_text(const char * path, const char * text) {
    FILE * f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

// The vocabulary's keys, written by our writer and read back.
static struct mg_gguf * vocab_to_gguf(const struct mg_hf_vocab * v, const char * path) {
    struct mg_gguf_writer * w = mg_gguf_writer_new();
    ck_assert_msg(mg_hf_vocab_add_to_gguf(v, w, NULL), "%s", mg_last_error());   // the pre v's regex chose
    ck_assert_msg(mg_gguf_writer_write(w, path), "%s", mg_last_error());
    mg_gguf_writer_free(w);
    struct mg_gguf * g = mg_gguf_open(path);
    ck_assert_msg(g != NULL, "%s", mg_last_error());
    return g;
}

// ---------------------------------------------------------------------------
// MiniMind against the fixture
// ---------------------------------------------------------------------------

START_TEST(test_minimind_equals_fixture) {
    struct mg_hf_vocab * v = mg_hf_vocab_load(mg_test_root("data/minimind"));
    ck_assert_msg(v != NULL, "%s", mg_last_error());
    mg_test_make_dir(dir, sizeof(dir), "hf");
    struct mg_gguf * ours = vocab_to_gguf(v, mg_test_path_in(dir, "vocab.gguf"));
    struct mg_gguf * fixture = mg_gguf_open(mg_test_fixture("models/tiny-f32.gguf"));
    ck_assert_ptr_nonnull(fixture);

    // Every tokenizer key of the fixture, in the same order, same type, same bytes.
    int64_t j = 0;
    for (int64_t i = 0; i < mg_gguf_n_kv(fixture); i++) {
        const char * key = mg_gguf_key(fixture, i);
        if (strncmp(key, "tokenizer.", 10) != 0) continue;
        ck_assert_msg(j < mg_gguf_n_kv(ours), "we lack %s", key);
        ck_assert_str_eq(mg_gguf_key(ours, j), key);
        ck_assert_msg(mg_gguf_kv_type(ours, j) == mg_gguf_kv_type(fixture, i), "%s: type %s, want %s", key,
                      mg_gguf_type_name(mg_gguf_kv_type(ours, j)), mg_gguf_type_name(mg_gguf_kv_type(fixture, i)));
        if (mg_gguf_kv_type(fixture, i) == MG_GGUF_TYPE_ARRAY) {
            ck_assert_int_eq(mg_gguf_arr_type(ours, j), mg_gguf_arr_type(fixture, i));
            ck_assert_uint_eq(mg_gguf_arr_n(ours, j), mg_gguf_arr_n(fixture, i));
        }
        size_t na, nb;
        const void * a = mg_gguf_kv_raw(ours, j, &na);
        const void * b = mg_gguf_kv_raw(fixture, i, &nb);
        ck_assert_msg(na == nb && memcmp(a, b, na) == 0, "%s: the values differ", key);
        j++;
    }
    ck_assert_int_eq(j, 13);                       // model, pre, tokens, types, merges, 5 ids, 2 flags, template
    ck_assert_int_eq(j, mg_gguf_n_kv(ours));       // and nothing else

    // The README's facts, from the structure itself.
    ck_assert_int_eq(v->n_tokens, 6400);
    ck_assert_int_eq(v->n_merges, 6108);
    ck_assert_str_eq(v->pre, "gpt-2");       // ByteLevel with use_regex, as the fixture's converter wrote
    ck_assert_str_eq(v->normalizer, "");
    ck_assert_str_eq(v->tokens[1], "<|im_start|>");
    ck_assert_str_eq(v->tokens[25], "<think>");
    for (int id = 0; id < 40; id++) {
        int want = id <= 20 || (id >= 27 && id <= 35) ? MG_HF_TOKEN_CONTROL : id <= 26 ? MG_HF_TOKEN_USER_DEFINED
                                                                                        : MG_HF_TOKEN_NORMAL;
        ck_assert_msg(v->token_types[id] == want, "token %d '%s' has type %d", id, v->tokens[id], v->token_types[id]);
    }
    ck_assert_int_eq(v->special[MG_HF_SPECIAL_BOS], 1);
    ck_assert_int_eq(v->special[MG_HF_SPECIAL_EOS], 2);
    ck_assert_int_eq(v->special[MG_HF_SPECIAL_EOT], 2);
    ck_assert_int_eq(v->special[MG_HF_SPECIAL_UNK], 0);
    ck_assert_int_eq(v->special[MG_HF_SPECIAL_PAD], 0);
    ck_assert_int_eq(v->special[MG_HF_SPECIAL_SEP], -1);
    ck_assert_int_eq(v->add_bos, 0);
    ck_assert_int_eq(v->add_eos, 0);
    ck_assert_ptr_nonnull(v->chat_template);

    mg_gguf_close(ours);
    mg_gguf_close(fixture);
    mg_hf_vocab_free(v);
    remove(mg_test_path_in(dir, "vocab.gguf"));
    rmdir(dir);
}
END_TEST

// ---------------------------------------------------------------------------
// The converter's rules, on made-up tokenizers
// ---------------------------------------------------------------------------

START_TEST(test_converter_rules) {
    mg_test_make_dir(dir, sizeof(dir), "hf");
    // Id 5 has no token; "<|x|>" is added but not special; "<a\u2581b>" is a
    // plain added token with a SentencePiece space; merges come as pairs, one
    // with a space inside a part.
    write_text(mg_test_path_in(dir, "tokenizer.json"),
               "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2, \"<|x|>\": 3},\n"
               "  \"merges\": [[\"a\", \"b\"], [\"a b\", \"c\"]]},\n"
               " \"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false},\n"
               " \"added_tokens\": [\n"
               "  {\"id\": 3, \"content\": \"<|x|>\", \"special\": false},\n"
               "  {\"id\": 4, \"content\": \"<a\\u2581b>\", \"special\": false},\n"
               "  {\"id\": 6, \"content\": \"</s>\", \"special\": true}]}");
    write_text(mg_test_path_in(dir, "tokenizer_config.json"),
               "{\"eos_token\": {\"content\": \"</s>\"}, \"pad_token\": \"<missing>\", \"add_bos_token\": true}");
    write_text(mg_test_path_in(dir, "chat_template.jinja"), "{{ messages }}");

    struct mg_hf_vocab * v = mg_hf_vocab_load(dir);
    ck_assert_msg(v != NULL, "%s", mg_last_error());
    ck_assert_int_eq(v->n_tokens, 7);
    ck_assert_str_eq(v->tokens[5], "[PAD5]");
    ck_assert_int_eq(v->token_types[5], MG_HF_TOKEN_UNUSED);
    ck_assert_int_eq(v->token_types[0], MG_HF_TOKEN_NORMAL);
    ck_assert_int_eq(v->token_types[3], MG_HF_TOKEN_CONTROL);        // looks special
    ck_assert_int_eq(v->token_types[4], MG_HF_TOKEN_USER_DEFINED);
    ck_assert_str_eq(v->tokens[4], "<a b>");                          // U+2581 became a space
    ck_assert_int_eq(v->token_types[6], MG_HF_TOKEN_CONTROL);        // marked special
    ck_assert_int_eq(v->n_merges, 2);
    ck_assert_str_eq(v->merges[0], "a b");
    ck_assert_str_eq(v->merges[1], "a\xC4\xA0" "b c");               // the inner space became U+0120
    ck_assert_int_eq(v->special[MG_HF_SPECIAL_EOS], 6);
    ck_assert_int_eq(v->special[MG_HF_SPECIAL_EOT], 6);
    ck_assert_int_eq(v->special[MG_HF_SPECIAL_BOS], -1);
    ck_assert_int_eq(v->special[MG_HF_SPECIAL_PAD], -1);             // not an added token
    ck_assert_int_eq(v->add_bos, 1);
    ck_assert_int_eq(v->add_eos, -1);
    ck_assert_str_eq(v->chat_template, "{{ messages }}");

    // What gets written: the keys in the converter's order, add_bos only.
    struct mg_gguf * g = vocab_to_gguf(v, mg_test_path_in(dir, "v.gguf"));
    const char * keys[] = {"tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens",
                           "tokenizer.ggml.token_type", "tokenizer.ggml.merges", "tokenizer.ggml.eos_token_id",
                           "tokenizer.ggml.eot_token_id", "tokenizer.ggml.add_bos_token", "tokenizer.chat_template"};
    ck_assert_int_eq(mg_gguf_n_kv(g), 9);
    for (int i = 0; i < 9; i++) ck_assert_str_eq(mg_gguf_key(g, i), keys[i]);
    mg_gguf_close(g);
    mg_hf_vocab_free(v);

    // Broken inputs name the file and the problem.
    write_text(mg_test_path_in(dir, "tokenizer.json"), "{\"model\": {\"type\": \"Unigram\", \"vocab\": {}}}");
    ck_assert_ptr_null(mg_hf_vocab_load(dir));
    ck_assert_msg(strstr(mg_last_error(), "tokenizer.json: model.type"), "%s", mg_last_error());
    write_text(mg_test_path_in(dir, "tokenizer.json"), "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 0}}}");
    ck_assert_ptr_null(mg_hf_vocab_load(dir));
    ck_assert_msg(strstr(mg_last_error(), "id 0 is given to both 'a' and 'b'"), "%s", mg_last_error());
    write_text(mg_test_path_in(dir, "tokenizer.json"), "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": -1}}}");
    ck_assert_ptr_null(mg_hf_vocab_load(dir));
    ck_assert_msg(strstr(mg_last_error(), "model.vocab['a']"), "%s", mg_last_error());
    write_text(mg_test_path_in(dir, "tokenizer.json"), "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [1]}}");
    ck_assert_ptr_null(mg_hf_vocab_load(dir));
    ck_assert_msg(strstr(mg_last_error(), "model.merges[0]"), "%s", mg_last_error());
    write_text(mg_test_path_in(dir, "tokenizer.json"), "{\"model\": {\"type\": \"BPE\",\n \"vocab\": {\"a\": 0,}}}");
    ck_assert_ptr_null(mg_hf_vocab_load(dir));
    ck_assert_msg(strstr(mg_last_error(), "tokenizer.json:2:19:"), "%s", mg_last_error());

    remove(mg_test_path_in(dir, "tokenizer.json"));
    remove(mg_test_path_in(dir, "tokenizer_config.json"));
    remove(mg_test_path_in(dir, "chat_template.jinja"));
    remove(mg_test_path_in(dir, "v.gguf"));
    rmdir(dir);
}
END_TEST

// ---------------------------------------------------------------------------
// The pre-tokenizer, chosen from tokenizer.json's regex
// ---------------------------------------------------------------------------

// The regexes as tokenizer.json spells them (JSON-escaped): HF's ByteLevel
// pattern, and Qwen2/Qwen3's Split pattern.
#define GPT2_JSON "'s|'t|'re|'ve|'m|'ll|'d| ?\\\\p{L}+| ?\\\\p{N}+| ?[^\\\\s\\\\p{L}\\\\p{N}]+|\\\\s+(?!\\\\S)|\\\\s+"
#define QWEN2_JSON                                                                                         \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*" \
    "|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+"
// Llama 3's: Qwen2's with \p{N}{1,3}
#define LLAMA3_JSON                                                                                        \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}{1,3}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*" \
    "|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+"
#define SPLIT(regex) \
    "{\"type\": \"Split\", \"pattern\": {\"Regex\": \"" regex "\"}, \"behavior\": \"Isolated\", \"invert\": false}"
#define BYTE_LEVEL(use_regex) "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": " use_regex "}"

// Load a one-token tokenizer.json with this pre_tokenizer (and normalizer).
static struct mg_hf_vocab * load_with(const char * pre_tokenizer, const char * normalizer) {
    char text[2048];
    snprintf(text, sizeof(text),
             "{\"normalizer\": %s, \"pre_tokenizer\": %s,\n"
             " \"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}}",
             normalizer, pre_tokenizer);
    write_text(mg_test_path_in(dir, "tokenizer.json"), text);
    return mg_hf_vocab_load(dir);
}

static void expect_pre(const char * pre_tokenizer, const char * want) {
    struct mg_hf_vocab * v = load_with(pre_tokenizer, "null");
    ck_assert_msg(v != NULL, "%s: %s", pre_tokenizer, mg_last_error());
    ck_assert_str_eq(v->pre, want);
    mg_hf_vocab_free(v);
}

static void expect_refused(const char * pre_tokenizer, const char * message) {
    ck_assert_ptr_null(load_with(pre_tokenizer, "null"));
    ck_assert_msg(strstr(mg_last_error(), "tokenizer.json: pre_tokenizer") && strstr(mg_last_error(), message),
                  "%s", mg_last_error());
}

START_TEST(test_pre_tokenizer_choice) {
    mg_test_make_dir(dir, sizeof(dir), "hf");
    expect_pre(BYTE_LEVEL("true"), "gpt-2");                                       // MiniMind, GPT-2
    expect_pre("{\"type\": \"Sequence\", \"pretokenizers\": [" BYTE_LEVEL("true") "]}", "gpt-2");
    expect_pre("{\"type\": \"Sequence\", \"pretokenizers\": [" SPLIT(QWEN2_JSON) ", " BYTE_LEVEL("false") "]}",
               "qwen2");                                                             // Qwen2, Qwen3
    expect_pre("{\"type\": \"Sequence\", \"pretokenizers\": [" SPLIT(GPT2_JSON) ", " BYTE_LEVEL("false") "]}",
               "gpt-2");
    expect_pre("{\"type\": \"Sequence\", \"pretokenizers\": [" SPLIT(LLAMA3_JSON) ", " BYTE_LEVEL("false") "]}",
               "llama-bpe");                                                         // Llama 3
    expect_pre("{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Digits\", \"individual_digits\": true}, "
               BYTE_LEVEL("true") "]}",
               "smollm");                                                            // SmolLM2

    // A regex of its own (a part of Llama 3's, \p{N}{1,3}, alone): refused, with the regex named.
    expect_refused("{\"type\": \"Sequence\", \"pretokenizers\": [" SPLIT("\\\\p{N}{1,3}") ", " BYTE_LEVEL("false")
                   "]}",
                   "the Split regex '\\p{N}{1,3}' is not Qwen2's, Llama 3's or GPT-2's");
    // One character off Qwen2's (no trailing \s+): still refused, the strings differ.
    expect_refused("{\"type\": \"Sequence\", \"pretokenizers\": [" SPLIT("(?i:'s|'t|'re|'ve|'m|'ll|'d)") ", "
                   BYTE_LEVEL("false") "]}",
                   "is not Qwen2's, Llama 3's or GPT-2's");
    expect_refused("{\"type\": \"Metaspace\"}", "(found Metaspace)");
    expect_refused("null", "(found none)");
    expect_refused("{\"type\": \"ByteLevel\", \"add_prefix_space\": true}", "add_prefix_space");
    expect_refused(BYTE_LEVEL("false"), "use_regex false");
    expect_refused("{\"type\": \"Sequence\", \"pretokenizers\": [" SPLIT(QWEN2_JSON) ", " BYTE_LEVEL("true") "]}",
                   "use_regex true");

    // The normalizer's type is kept (GGUF cannot carry it).
    struct mg_hf_vocab * v = load_with(BYTE_LEVEL("true"), "{\"type\": \"NFC\"}");
    ck_assert_msg(v != NULL, "%s", mg_last_error());
    ck_assert_str_eq(v->normalizer, "NFC");
    mg_hf_vocab_free(v);
    remove(mg_test_path_in(dir, "tokenizer.json"));
    rmdir(dir);
}
END_TEST

// ---------------------------------------------------------------------------
// The JSON parser
// ---------------------------------------------------------------------------

static struct mg_json * parse(const char * text) {
    return mg_json_parse(text, strlen(text), "t.json");
}

START_TEST(test_json_values) {
    struct mg_json * v = parse(" {\"a\": [1, -2.5e2, 0, true, false, null], \"b\": {}, \"c\": [], \"a\": \"last\"} ");
    ck_assert_ptr_nonnull(v);
    ck_assert_int_eq(v->type, MG_JSON_OBJECT);
    ck_assert_uint_eq(v->n, 4);
    const struct mg_json * a = &v->items[0];
    ck_assert_int_eq(a->type, MG_JSON_ARRAY);
    ck_assert_uint_eq(a->n, 6);
    ck_assert(a->items[0].number == 1.0 && a->items[1].number == -250.0 && a->items[2].number == 0.0);
    ck_assert(a->items[3].type == MG_JSON_BOOL && a->items[3].boolean);
    ck_assert(a->items[4].type == MG_JSON_BOOL && !a->items[4].boolean);
    ck_assert_int_eq(a->items[5].type, MG_JSON_NULL);
    ck_assert_str_eq(mg_json_get(v, "a")->str, "last");   // the last duplicate wins
    ck_assert_int_eq(mg_json_get(v, "b")->type, MG_JSON_OBJECT);
    ck_assert_ptr_null(mg_json_get(v, "z"));
    int64_t i;
    ck_assert(mg_json_get_int(&a->items[1], &i) && i == -250);
    ck_assert(!mg_json_get_int(&a->items[3], &i));
    mg_json_free(v);

    v = parse("[0.5, 1e400]");
    ck_assert(!mg_json_get_int(&v->items[0], &i));
    ck_assert(!mg_json_get_int(&v->items[1], &i));   // infinity
    mg_json_free(v);
}
END_TEST

START_TEST(test_json_strings) {
    // Every escape, a BMP \u, a surrogate pair, raw UTF-8, and \u0000.
    struct mg_json * v = parse("\"q\\\" b\\\\ s\\/ \\b\\f\\n\\r\\t "
                               "\\u00e9 \\u4f60 \\ud83d\\ude00 \xe5\xa5\xbd \\u0000!\"");
    ck_assert_ptr_nonnull(v);
    const char want[] = "q\" b\\ s/ \b\f\n\r\t \xc3\xa9 \xe4\xbd\xa0 \xf0\x9f\x98\x80 \xe5\xa5\xbd \0!";
    ck_assert_uint_eq(v->len, sizeof(want) - 1);
    ck_assert(memcmp(v->str, want, v->len) == 0);
    mg_json_free(v);
}
END_TEST

START_TEST(test_json_errors) {
    const struct { const char * text; const char * where; const char * what; } bad[] = {
        {"[1, 2,]", "t.json:1:7:", "expected a value"},
        {"{\"a\": 1,}", "t.json:1:9:", "expected a string key"},
        {"{\"a\" 1}", "t.json:1:6:", "expected ':'"},
        {"[1 2]", "t.json:1:4:", "expected ',' or ']'"},
        {"01", "t.json:1:1:", "leading zeros"},
        {"1.", "t.json:1:3:", "digit after '.'"},
        {"-", "t.json:1:1:", "'-' must be followed"},
        {"\"abc", "t.json:1:1:", "unterminated string"},
        {"\"a\nb\"", "t.json:1:3:", "control character"},
        {"\"\\x\"", "t.json:1:2:", "unknown escape"},
        {"\"\\u12g4\"", "t.json:1:6:", "four hex digits"},
        {"\"\\ud83d\"", "t.json:1:2:", "not followed by a low surrogate"},
        {"\"\\ude00\"", "t.json:1:2:", "lone low surrogate"},
        {"\"\xc3\x28\"", "t.json:1:2:", "invalid UTF-8"},
        {"\"\xed\xa0\x80\"", "t.json:1:2:", "invalid UTF-8"},   // an encoded surrogate
        {"\"\xc0\xaf\"", "t.json:1:2:", "invalid UTF-8"},       // overlong
        {"tru", "t.json:1:1:", "true, false or null"},
        {"{} x", "t.json:1:4:", "after the value"},
        {"", "t.json:1:1:", "expected a value, found the end"},
        {"// no comments\n1", "t.json:1:1:", "expected a value"},
        {"[\n  1,\n  'x']", "t.json:3:3:", "expected a value"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ck_assert_msg(parse(bad[i].text) == NULL, "accepted: %s", bad[i].text);
        ck_assert_msg(strstr(mg_last_error(), bad[i].where) != NULL, "%s: want %s in %s", bad[i].text, bad[i].where,
                      mg_last_error());
        ck_assert_msg(strstr(mg_last_error(), bad[i].what) != NULL, "%s: want %s in %s", bad[i].text, bad[i].what,
                      mg_last_error());
    }

    // The depth limit: MG_JSON_MAX_DEPTH nested arrays are fine, one more is not.
    char deep[2 * MG_JSON_MAX_DEPTH + 8];
    for (int n = MG_JSON_MAX_DEPTH; n <= MG_JSON_MAX_DEPTH + 1; n++) {
        memset(deep, '[', (size_t) n);
        memset(deep + n, ']', (size_t) n);
        struct mg_json * v = mg_json_parse(deep, 2 * (size_t) n, "deep");
        if (n == MG_JSON_MAX_DEPTH) {
            ck_assert_msg(v != NULL, "%s", mg_last_error());
            mg_json_free(v);
        } else {
            ck_assert_ptr_null(v);
            ck_assert_msg(strstr(mg_last_error(), "nested deeper"), "%s", mg_last_error());
        }
    }
}
END_TEST

// The parser reads the real files: the counts a Python json.load gives.
START_TEST(test_json_reads_minimind) {
    struct mg_json * t = mg_json_parse_file(mg_test_root("data/minimind/tokenizer.json"));
    ck_assert_msg(t != NULL, "%s", mg_last_error());
    ck_assert_uint_eq(mg_json_get(mg_json_get(t, "model"), "vocab")->n, 6400);
    ck_assert_uint_eq(mg_json_get(mg_json_get(t, "model"), "merges")->n, 6108);
    ck_assert_uint_eq(mg_json_get(t, "added_tokens")->n, 36);
    mg_json_free(t);
    ck_assert_ptr_null(mg_json_parse_file("/nonexistent/tokenizer.json"));
    ck_assert_msg(strstr(mg_last_error(), "/nonexistent/tokenizer.json: cannot open"), "%s", mg_last_error());
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("hf_tokenizer");
    TCase * tc = MG_TCASE(s, "hf_tokenizer", test_minimind_equals_fixture, test_converter_rules,
                             test_pre_tokenizer_choice, test_json_values, test_json_strings, test_json_errors,
                             test_json_reads_minimind);
    tcase_set_timeout(tc, 30);
    return s;
}
