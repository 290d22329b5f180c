//@file full
// json.c - a recursive-descent JSON parser: one function per grammar rule of
// RFC 8259 (value, object, array, string, number), a cursor over the text,
// and an error that says where the text stopped making sense.
#include "json.h"
#include "mmap.h"   // mg_open_regular
#include "tensor.h"
#include "unicode.h"   // mg_utf8_encode

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct json_parser {
    const char * text;
    size_t       len;
    size_t       pos;     // the next byte to look at
    const char * name;    // for messages
    int          depth;   // arrays and objects currently open
    size_t       n_values;   // parsed so far, at most MG_JSON_MAX_VALUES
};

// "name:line:col: message", line and column (in bytes) of the byte at pos.
static bool json_error(const struct json_parser * P, size_t pos, const char * fmt, ...) {
    int line = 1, col = 1;
    for (size_t i = 0; i < pos && i < P->len; i++) {
        if (P->text[i] == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    char message[256];
    va_list args;
    va_start(args, fmt);
    vsnprintf(message, sizeof(message), fmt, args);
    va_end(args);
    mg_set_error("%s:%d:%d: %s", P->name, line, col, message);
    return false;
}

static bool at_end(const struct json_parser * P) {
    return P->pos >= P->len;
}

static char peek(const struct json_parser * P) {
    return at_end(P) ? '\0' : P->text[P->pos];
}

static void skip_whitespace(struct json_parser * P) {
    while (!at_end(P)) {
        char c = P->text[P->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        P->pos++;
    }
}

// "end of input", or the offending character, for messages.
static const char * describe_next(const struct json_parser * P, char * buf, size_t size) {
    if (at_end(P)) return "the end of the input";
    unsigned char c = (unsigned char) P->text[P->pos];
    if (c >= 0x20 && c < 0x7f) snprintf(buf, size, "'%c'", c);
    else snprintf(buf, size, "byte 0x%02x", c);
    return buf;
}

static bool parse_value(struct json_parser * P, struct mg_json * out);

// ---------------------------------------------------------------------------
// Strings
// ---------------------------------------------------------------------------

// Bytes of the valid UTF-8 sequence at p (at most avail bytes), or 0 if it is
// not one: overlong forms, surrogates and code points past U+10FFFF are invalid.
static size_t utf8_sequence_length(const unsigned char * p, size_t avail) {
    unsigned char c = p[0];
    size_t n;
    unsigned char lo = 0x80, hi = 0xBF;   // allowed range of the second byte
    if (c < 0x80) return 1;
    else if (c >= 0xC2 && c <= 0xDF) n = 2;
    else if (c == 0xE0) { n = 3; lo = 0xA0; }
    else if (c >= 0xE1 && c <= 0xEC) n = 3;
    else if (c == 0xED) { n = 3; hi = 0x9F; }   // no UTF-16 surrogates
    else if (c >= 0xEE && c <= 0xEF) n = 3;
    else if (c == 0xF0) { n = 4; lo = 0x90; }
    else if (c >= 0xF1 && c <= 0xF3) n = 4;
    else if (c == 0xF4) { n = 4; hi = 0x8F; }   // nothing past U+10FFFF
    else return 0;
    if (avail < n) return 0;
    if (p[1] < lo || p[1] > hi) return 0;
    for (size_t k = 2; k < n; k++) {
        if ((p[k] & 0xC0) != 0x80) return 0;
    }
    return n;
}

// The four hex digits after "\u" at P->pos.
static bool parse_hex4(struct json_parser * P, uint32_t * unit) {
    if (P->len - P->pos < 4) return json_error(P, P->pos, "\\u needs four hex digits");
    *unit = 0;
    for (int k = 0; k < 4; k++) {
        char c = P->text[P->pos + k];
        uint32_t digit;
        if (c >= '0' && c <= '9') digit = (uint32_t) (c - '0');
        else if (c >= 'a' && c <= 'f') digit = (uint32_t) (c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') digit = (uint32_t) (c - 'A' + 10);
        else return json_error(P, P->pos + k, "\\u needs four hex digits");
        *unit = *unit * 16 + digit;
    }
    P->pos += 4;
    return true;
}

// After "\u": one code point, joining a UTF-16 surrogate pair "\uD83D\uDE00".
static bool parse_unicode_escape(struct json_parser * P, uint32_t * cp) {
    size_t start = P->pos - 2;   // the backslash
    uint32_t unit;
    if (!parse_hex4(P, &unit)) return false;
    if (unit >= 0xDC00 && unit <= 0xDFFF) return json_error(P, start, "lone low surrogate \\u%04X", unit);
    if (unit < 0xD800 || unit > 0xDBFF) {
        *cp = unit;
        return true;
    }
    if (P->len - P->pos < 2 || P->text[P->pos] != '\\' || P->text[P->pos + 1] != 'u') {
        return json_error(P, start, "high surrogate \\u%04X is not followed by a low surrogate", unit);
    }
    P->pos += 2;
    uint32_t low;
    if (!parse_hex4(P, &low)) return false;
    if (low < 0xDC00 || low > 0xDFFF) {
        return json_error(P, start, "high surrogate \\u%04X is followed by \\u%04X, not a low surrogate", unit, low);
    }
    *cp = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
    return true;
}

// After a backslash: one escape, appended to out.
static bool parse_escape(struct json_parser * P, char * out, size_t * o) {
    size_t start = P->pos - 1;
    if (at_end(P)) return json_error(P, start, "unfinished escape");
    char c = P->text[P->pos++];
    switch (c) {
        case '"':  out[(*o)++] = '"';  return true;
        case '\\': out[(*o)++] = '\\'; return true;
        case '/':  out[(*o)++] = '/';  return true;
        case 'b':  out[(*o)++] = '\b'; return true;
        case 'f':  out[(*o)++] = '\f'; return true;
        case 'n':  out[(*o)++] = '\n'; return true;
        case 'r':  out[(*o)++] = '\r'; return true;
        case 't':  out[(*o)++] = '\t'; return true;
        case 'u': {
            uint32_t cp = 0;
            if (!parse_unicode_escape(P, &cp)) return false;
            *o += mg_utf8_encode(cp, out + *o);   // unicode.c
            return true;
        }
        default:
            return json_error(P, start, "unknown escape '\\%c'", c);
    }
}

// A string at P->pos (the opening quote). The decoded text is never longer
// than its source (an escape of 6 or 12 bytes becomes at most 3 or 4), so one
// buffer of the source's length is enough.
static bool parse_string(struct json_parser * P, char ** str, size_t * len) {
    size_t start = P->pos++;
    size_t end = P->pos;   // find the closing quote first, stepping over escapes
    while (end < P->len && P->text[end] != '"') end += P->text[end] == '\\' ? 2 : 1;
    if (end >= P->len) return json_error(P, start, "unterminated string");

    char * out = malloc(end - P->pos + 1);
    MG_ASSERT(out != NULL);
    size_t o = 0;
    bool ok = true;
    while (ok && P->pos < end) {
        unsigned char c = (unsigned char) P->text[P->pos];
        if (c == '\\') {
            P->pos++;
            ok = parse_escape(P, out, &o);
        } else if (c < 0x20) {
            ok = json_error(P, P->pos, "control character 0x%02x in a string (escape it)", c);
        } else {
            size_t n = utf8_sequence_length((const unsigned char *) P->text + P->pos, end - P->pos);
            if (n == 0) {
                ok = json_error(P, P->pos, "invalid UTF-8 (byte 0x%02x)", c);
            } else {
                memcpy(out + o, P->text + P->pos, n);
                o += n;
                P->pos += n;
            }
        }
    }
    if (!ok) {
        free(out);
        return false;
    }
    P->pos = end + 1;
    out[o] = '\0';
    *str = out;
    *len = o;
    return true;
}

// ---------------------------------------------------------------------------
// Numbers, literals
// ---------------------------------------------------------------------------

static bool is_digit(char c) {
    return c >= '0' && c <= '9';
}

// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? checked first, then strtod
// on exactly those bytes (in the "C" locale, which is the default).
static bool parse_number(struct json_parser * P, struct mg_json * out) {
    size_t start = P->pos;
    if (peek(P) == '-') P->pos++;
    if (peek(P) == '0') {
        P->pos++;
        if (is_digit(peek(P))) return json_error(P, start, "numbers cannot have leading zeros");
    } else if (is_digit(peek(P))) {
        while (is_digit(peek(P))) P->pos++;
    } else {
        return json_error(P, start, "'-' must be followed by a digit");
    }
    if (peek(P) == '.') {
        P->pos++;
        if (!is_digit(peek(P))) return json_error(P, P->pos, "expected a digit after '.'");
        while (is_digit(peek(P))) P->pos++;
    }
    if (peek(P) == 'e' || peek(P) == 'E') {
        P->pos++;
        if (peek(P) == '+' || peek(P) == '-') P->pos++;
        if (!is_digit(peek(P))) return json_error(P, P->pos, "expected a digit in the exponent");
        while (is_digit(peek(P))) P->pos++;
    }
    size_t n = P->pos - start;
    char * copy = malloc(n + 1);   // strtod needs a NUL after the number
    MG_ASSERT(copy != NULL);
    memcpy(copy, P->text + start, n);
    copy[n] = '\0';
    out->type = MG_JSON_NUMBER;
    out->number = strtod(copy, NULL);
    free(copy);
    return true;
}

static bool parse_literal(struct json_parser * P, const char * word, struct mg_json * out) {
    size_t n = strlen(word);
    if (P->len - P->pos < n || memcmp(P->text + P->pos, word, n) != 0) {
        return json_error(P, P->pos, "unexpected word (true, false or null?)");
    }
    P->pos += n;
    if (word[0] == 'n') {
        out->type = MG_JSON_NULL;
    } else {
        out->type = MG_JSON_BOOL;
        out->boolean = word[0] == 't';
    }
    return true;
}

// ---------------------------------------------------------------------------
// Arrays and objects
// ---------------------------------------------------------------------------

// Room for one more element (and key, for objects), doubling the arrays.
static void grow(struct mg_json * v, size_t * cap) {
    if (v->n < *cap) return;
    *cap = *cap ? 2 * *cap : 4;
    v->items = realloc(v->items, *cap * sizeof(v->items[0]));
    MG_ASSERT(v->items != NULL);
    if (v->type == MG_JSON_OBJECT) {
        v->keys = realloc(v->keys, *cap * sizeof(v->keys[0]));
        v->key_lens = realloc(v->key_lens, *cap * sizeof(v->key_lens[0]));
        MG_ASSERT(v->keys != NULL && v->key_lens != NULL);
    }
}

// After '[' or '{': the separator or the end. Returns false on error; *done
// tells whether the closing bracket was found.
static bool after_element(struct json_parser * P, char close, const char * what, bool * done) {
    skip_whitespace(P);
    char c = peek(P);
    if (c == ',') {
        P->pos++;
        *done = false;
        return true;
    }
    if (c == close) {
        P->pos++;
        *done = true;
        return true;
    }
    char buf[16];
    return json_error(P, P->pos, "expected ',' or '%c' after %s, found %s", close, what,
                      describe_next(P, buf, sizeof(buf)));
}

// Enters an array or an object: sets its type and passes the opening bracket and the space after
// it. True when the closing bracket follows at once: the container is empty, and passed too.
static bool open_is_empty(struct json_parser * P, struct mg_json * out, enum mg_json_type type, char close) {
    out->type = type;
    P->pos++;   // '[' or '{'
    skip_whitespace(P);
    if (peek(P) != close) return false;
    P->pos++;
    return true;
}

// A new, zeroed element (and key) at the end of out; its index. Counted before it is parsed, so a
// failure frees what was parsed.
static size_t add_element(struct mg_json * out, size_t * cap) {
    grow(out, cap);
    size_t i = out->n;
    memset(&out->items[i], 0, sizeof(out->items[0]));
    if (out->type == MG_JSON_OBJECT) out->keys[i] = NULL;
    out->n++;
    return i;
}

static bool parse_array(struct json_parser * P, struct mg_json * out) {
    if (open_is_empty(P, out, MG_JSON_ARRAY, ']')) return true;
    size_t cap = 0;
    for (bool done = false; !done;) {
        size_t i = add_element(out, &cap);
        if (!parse_value(P, &out->items[i])) return false;
        if (!after_element(P, ']', "an array element", &done)) return false;
    }
    return true;
}

static bool parse_object(struct json_parser * P, struct mg_json * out) {
    if (open_is_empty(P, out, MG_JSON_OBJECT, '}')) return true;
    size_t cap = 0;
    for (bool done = false; !done;) {
        skip_whitespace(P);
        if (peek(P) != '"') {
            char buf[16];
            return json_error(P, P->pos, "expected a string key, found %s", describe_next(P, buf, sizeof(buf)));
        }
        size_t i = add_element(out, &cap);
        if (!parse_string(P, &out->keys[i], &out->key_lens[i])) return false;
        skip_whitespace(P);
        if (peek(P) != ':') {
            char buf[16];
            return json_error(P, P->pos, "expected ':' after an object key, found %s",
                              describe_next(P, buf, sizeof(buf)));
        }
        P->pos++;
        if (!parse_value(P, &out->items[i])) return false;
        if (!after_element(P, '}', "an object member", &done)) return false;
    }
    return true;
}

static bool parse_value(struct json_parser * P, struct mg_json * out) {
    skip_whitespace(P);
    if (++P->n_values > MG_JSON_MAX_VALUES) {   // bounded memory, whatever the file
        return json_error(P, P->pos, "more than %u values (MG_JSON_MAX_VALUES)", MG_JSON_MAX_VALUES);
    }
    char c = peek(P);
    if (c == '[' || c == '{') {
        if (P->depth >= MG_JSON_MAX_DEPTH) {
            return json_error(P, P->pos, "nested deeper than %d arrays and objects", MG_JSON_MAX_DEPTH);
        }
        P->depth++;
        bool ok = c == '[' ? parse_array(P, out) : parse_object(P, out);
        P->depth--;
        return ok;
    }
    if (c == '"') {
        out->type = MG_JSON_STRING;
        return parse_string(P, &out->str, &out->len);
    }
    if (c == '-' || is_digit(c)) return parse_number(P, out);
    if (c == 't') return parse_literal(P, "true", out);
    if (c == 'f') return parse_literal(P, "false", out);
    if (c == 'n') return parse_literal(P, "null", out);
    char buf[16];
    return json_error(P, P->pos, "expected a value, found %s", describe_next(P, buf, sizeof(buf)));
}

// ---------------------------------------------------------------------------
// The public functions
// ---------------------------------------------------------------------------

static void free_contents(struct mg_json * v) {
    free(v->str);
    for (size_t i = 0; i < v->n; i++) {
        free_contents(&v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->key_lens);
}

void mg_json_free(struct mg_json * v) {
    if (v == NULL) return;
    free_contents(v);
    free(v);
}

struct mg_json * mg_json_parse(const char * text, size_t len, const char * name) {
    struct json_parser P = {.text = text, .len = len, .name = name};
    struct mg_json * v = calloc(1, sizeof(*v));
    MG_ASSERT(v != NULL);
    bool ok = parse_value(&P, v);
    if (ok) {
        skip_whitespace(&P);
        if (!at_end(&P)) ok = json_error(&P, P.pos, "unexpected text after the value");
    }
    if (!ok) {
        mg_json_free(v);
        return NULL;
    }
    return v;
}

// A regular file only, read into a buffer of its size: a FIFO named
// tokenizer.json blocked the open forever, and /dev/zero grew the buffer
// until malloc failed.
struct mg_json * mg_json_parse_file(const char * path) {
    uint64_t size;
    FILE *   f = mg_open_regular(path, MG_JSON_MAX_BYTES, &size);
    if (f == NULL) return NULL;
    char * text = malloc((size_t) size + 1);
    if (text == NULL) {
        mg_set_error("%s: no memory for its %llu bytes", path, (unsigned long long) size);
        fclose(f);
        return NULL;
    }
    const size_t len        = fread(text, 1, (size_t) size, f);
    const bool   read_error = ferror(f) != 0 || len != size;   // a file cut while it was read
    fclose(f);
    struct mg_json * v = NULL;
    if (read_error) mg_set_error("%s: read error", path);
    else v = mg_json_parse(text, len, path);
    free(text);
    return v;
}

const struct mg_json * mg_json_get(const struct mg_json * obj, const char * key) {
    if (obj == NULL || obj->type != MG_JSON_OBJECT) return NULL;
    size_t key_len = strlen(key);
    for (size_t i = obj->n; i > 0; i--) {   // from the end: the last duplicate wins
        if (obj->key_lens[i - 1] == key_len && memcmp(obj->keys[i - 1], key, key_len) == 0) return &obj->items[i - 1];
    }
    return NULL;
}

bool mg_json_get_int(const struct mg_json * v, int64_t * out) {
    const double limit = 9007199254740992.0;   // 2^53
    if (v == NULL || v->type != MG_JSON_NUMBER) return false;
    if (!(v->number >= -limit && v->number <= limit) || floor(v->number) != v->number) return false;
    *out = (int64_t) v->number;
    return true;
}

const char * mg_json_type_name(enum mg_json_type type) {
    switch (type) {
        case MG_JSON_NULL:   return "null";
        case MG_JSON_BOOL:   return "bool";
        case MG_JSON_NUMBER: return "number";
        case MG_JSON_STRING: return "string";
        case MG_JSON_ARRAY:  return "array";
        case MG_JSON_OBJECT: return "object";
    }
    return "?";
}
