//@file full
// json.h - a small, strict JSON parser (RFC 8259): enough to read Hugging Face
// tokenizer.json and tokenizer_config.json files.
//
//     struct mg_json * doc = mg_json_parse_file("tokenizer.json");
//     if (!doc) { fprintf(stderr, "%s\n", mg_last_error()); exit(1); }
//     //   e.g. "tokenizer.json:12:5: expected ':' after an object key"
//     const struct mg_json * vocab = mg_json_get(mg_json_get(doc, "model"), "vocab");
//     for (size_t i = 0; vocab && i < vocab->n; i++)
//         printf("%s -> %g\n", vocab->keys[i], vocab->items[i].number);
//     mg_json_free(doc);
//
// The whole document becomes a tree of struct mg_json values. Strings are
// decoded to UTF-8 (every escape, including \uXXXX surrogate pairs), so a
// token's text is exactly its bytes. Anything RFC 8259 does not allow is an
// error with a line and column: trailing commas, comments, single quotes,
// leading zeros, control characters in strings, lone surrogates, invalid
// UTF-8, and text after the value. Nesting is limited to MG_JSON_MAX_DEPTH,
// and a document to MG_JSON_MAX_VALUES values: each costs about 64 bytes
// parsed, so a 60 MB file of 30 M numbers would take 2 GB; Qwen3's
// tokenizer.json, the largest this engine reads, has under a million. (A
// build may set a smaller limit: the fuzzers' sets 4096, so that inputs of
// at most 64 KB reach it.)
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MG_JSON_MAX_DEPTH 128
// mg_json_parse_file reads regular files of at most this many bytes (the
// largest tokenizer.json files on the Hugging Face hub are tens of MB).
#define MG_JSON_MAX_BYTES (1ull << 30)
#ifndef MG_JSON_MAX_VALUES
#define MG_JSON_MAX_VALUES (4u << 20)
#endif

enum mg_json_type {
    MG_JSON_NULL,
    MG_JSON_BOOL,
    MG_JSON_NUMBER,
    MG_JSON_STRING,
    MG_JSON_ARRAY,
    MG_JSON_OBJECT,
};

struct mg_json {
    enum mg_json_type type;
    bool              boolean;   // BOOL
    double            number;    // NUMBER
    char *            str;       // STRING: UTF-8, NUL-terminated; may hold NULs (from \u0000): use len
    size_t            len;       // STRING: bytes in str
    size_t            n;         // ARRAY: elements, OBJECT: members
    struct mg_json *  items;     // ARRAY: the elements; OBJECT: the member values, in file order
    char **           keys;      // OBJECT: the member keys, NUL-terminated, in file order
    size_t *          key_lens;  // OBJECT: bytes in each key
};

// Parse len bytes of text; name is used in error messages ("name:line:col: ...").
// NULL, with mg_last_error() set, on any error.
struct mg_json * mg_json_parse(const char * text, size_t len, const char * name);
struct mg_json * mg_json_parse_file(const char * path);
void             mg_json_free(struct mg_json * v);

// The member of an object with this key; NULL if obj is NULL, not an object,
// or has no such key. When a key repeats, the last one wins (as in Python's json).
const struct mg_json * mg_json_get(const struct mg_json * obj, const char * key);

// A number that is an integer in [-2^53, 2^53] (exact in a double), as int64.
bool mg_json_get_int(const struct mg_json * v, int64_t * out);

// "null", "bool", "number", "string", "array", "object".
const char * mg_json_type_name(enum mg_json_type type);
