// chapgen.c - writes chapters/NN_name/ from full/, guided by //@ markers.
//
// full/ is the one source of the engine. Every chapter directory is a snapshot
// of it: the lines that chapter does not have yet (or no longer has) are
// dropped, and the marker lines themselves never reach a chapter. The markers
// and their rules are described in tools/README.md; in short:
//
//   //@file 02                  (first line) the file exists from chapter 02 on
//   //@file 03..04              (first line) only chapters 03-04 have it; it
//                               lives in full/retired/ and lands at the chapter root
//   //@file full                (first line) only full/ has it
//   //@+ 05 tag ... //@- 05 tag              lines added in chapter 05
//   //@+ full tag ... //@- full tag          lines only full/ has
//   #if 0 //@old 03..04 tag ... #endif //@old tag   lines only chapters 03-04 have
//
// Besides its code, a chapter gets copies of the files tools/handout.list
// names (build rules, tests, fixtures), so that the directory works alone.
//
// Usage: chapgen [--check] [--force] [--list tools/chapters.list] full chapters
//
// The work happens in four steps: read the chapter list and the handout list,
// read and check every marked file of full/ (an error stops the program here,
// before anything is written), plan every chapter, then write them. The plan
// finds the files a run would overwrite or delete although they are not what
// chapgen last wrote there (chapters/NN_name/.chapgen records that): someone
// edited them, and then nothing is written unless --force. With --check the
// chapters are written to a temporary directory instead and compared with
// chapters/, which is left alone.
//
// Build: cc -std=c11 -Wall -Wextra -Werror -o chapgen tools/chapgen.c
#define _XOPEN_SOURCE 700   // POSIX 2008 (mkdtemp, nftw) with C11's strictness

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

// Chapters are numbered 00..99. "full" is one past every chapter, so a block
// added in chapter 05 has the range 05..full: chapter 05, every later one, full/.
enum { CHAPTER_FULL = 100 };

#define GENERATED_PREFIX "// Generated from "
// The rest of the header: where a student works and where an author does.
#define GENERATED_ADVICE "In a class, edit this copy freely (make chapters will not overwrite your edits); " \
                         "to change the engine, edit "
#define MANIFEST_NAME ".chapgen"   // in each chapter: what chapgen last wrote there
#define MAX_TAG      64   // longest block tag, with its NUL
#define MAX_DEPTH    32   // deepest nesting of blocks
#define MAX_MARKER  512   // longest line we will read as a marker

// ---------------------------------------------------------------------------
// Small helpers: errors, memory, text buffers, lines

// Every mistake in the input is reported as "file:line: what is wrong", the
// format editors and compilers use, and ends the program with status 2.
static _Noreturn void fail(const char * file, int line, const char * fmt, ...) {
    va_list args;
    if (line > 0) fprintf(stderr, "%s:%d: ", file, line);
    else          fprintf(stderr, "%s: ", file);
    va_start(args, fmt);
    vfprintf(stderr, fmt, args);
    va_end(args);
    fputc('\n', stderr);
    exit(2);
}

static _Noreturn void fail_system(const char * what, const char * path) {
    fprintf(stderr, "chapgen: cannot %s %s: %s\n", what, path, strerror(errno));
    exit(2);
}

static void * xrealloc(void * p, size_t size) {
    p = realloc(p, size ? size : 1);
    if (!p) {
        fprintf(stderr, "chapgen: out of memory\n");
        exit(2);
    }
    return p;
}

static char * xstrdup(const char * s) {
    size_t size = strlen(s) + 1;
    return memcpy(xrealloc(NULL, size), s, size);
}

static char * path_join(const char * dir, const char * name) {
    size_t size = strlen(dir) + 1 + strlen(name) + 1;
    char * path = xrealloc(NULL, size);
    snprintf(path, size, "%s/%s", dir, name);
    return path;
}

// Makes room for one more element at the end of a growable array.
#define GROW(array, count, capacity)                                        \
    do {                                                                    \
        if ((count) == (capacity)) {                                        \
            (capacity) = (capacity) ? 2 * (capacity) : 16;                  \
            (array) = xrealloc((array), (size_t) (capacity) * sizeof(*(array))); \
        }                                                                   \
    } while (0)

// A growable byte string, always NUL-terminated once anything was added.
struct buf {
    char * data;
    size_t len, cap;
};

static void buf_add(struct buf * b, const char * s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        b->cap = 2 * (b->len + n + 1);
        b->data = xrealloc(b->data, b->cap);
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

static void buf_addf(struct buf * b, const char * fmt, ...) {
    va_list args;
    va_start(args, fmt);
    int n = vsnprintf(NULL, 0, fmt, args);
    va_end(args);
    char * text = xrealloc(NULL, (size_t) n + 1);
    va_start(args, fmt);
    vsnprintf(text, (size_t) n + 1, fmt, args);
    va_end(args);
    buf_add(b, text, (size_t) n);
    free(text);
}

static bool read_file(const char * path, struct buf * out) {
    FILE * f = fopen(path, "rb");
    if (!f) return false;
    char chunk[1 << 16];
    size_t n;
    out->len = 0;
    buf_add(out, "", 0);   // an empty file still gets a (empty) string
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) buf_add(out, chunk, n);
    bool ok = !ferror(f);
    fclose(f);
    return ok;
}

// The chapters a line, block or file is present in: lo <= chapter <= hi.
struct range {
    int lo, hi;
};

static bool range_has(struct range r, int chapter) { return r.lo <= chapter && chapter <= r.hi; }

struct line {
    const char * text;   // points into the file's buffer, not NUL-terminated
    size_t len;          // including the '\n', when the line has one
    bool marker;         // marker lines never reach a chapter
    struct range range;  // the chapters that have this line
};

// Cuts text into lines; the line array is the caller's to free.
static int split_lines(const struct buf * text, struct line ** lines) {
    int n = 0, cap = 0;
    *lines = NULL;
    for (size_t at = 0; at < text->len;) {
        const char * end = memchr(text->data + at, '\n', text->len - at);
        size_t len = end ? (size_t) (end - (text->data + at)) + 1 : text->len - at;
        GROW(*lines, n, cap);
        (*lines)[n++] = (struct line) { .text = text->data + at, .len = len };
        at += len;
    }
    return n;
}

static bool line_is_blank(const struct line * ln) {
    for (size_t i = 0; i < ln->len; i++)
        if (!isspace((unsigned char) ln->text[i])) return false;
    return true;
}

// Does the line, once its leading whitespace is skipped, start with prefix?
static bool line_starts_with(const struct line * ln, const char * prefix) {
    size_t i = 0, n = strlen(prefix);
    while (i < ln->len && (ln->text[i] == ' ' || ln->text[i] == '\t')) i++;
    return ln->len - i >= n && memcmp(ln->text + i, prefix, n) == 0;
}

// Splits text[0..len) into whitespace-separated words, copied into storage.
// Returns the number of words, or -1 when the text does not fit or has more
// than max words (either way it cannot be one of the short lines we parse).
static int split_words(const char * text, size_t len, char * storage, size_t size,
                       char ** words, int max) {
    if (len >= size) return -1;
    memcpy(storage, text, len);
    storage[len] = '\0';
    int n = 0;
    for (char * p = storage;;) {
        while (*p && isspace((unsigned char) *p)) *p++ = '\0';
        if (!*p) return n;
        if (n == max) return -1;
        words[n++] = p;
        while (*p && !isspace((unsigned char) *p)) p++;
    }
}

// ---------------------------------------------------------------------------
// The chapter list: "NN name" lines, in reading order

struct chapter {
    int number;
    char dir[80];   // "05_galloc"
};

static struct chapter chapters[100];
static int n_chapters;
static const char * list_path;

static bool chapter_is_listed(int number) {
    for (int i = 0; i < n_chapters; i++)
        if (chapters[i].number == number) return true;
    return false;
}

static int last_chapter(void) { return chapters[n_chapters - 1].number; }

static bool is_two_digits(const char * s) {
    return strlen(s) == 2 && isdigit((unsigned char) s[0]) && isdigit((unsigned char) s[1]);
}

static bool is_name(const char * s, size_t max) {
    if (!*s || strlen(s) >= max) return false;
    for (; *s; s++)
        if (!isalnum((unsigned char) *s) && *s != '_' && *s != '-' && *s != '.') return false;
    return true;
}

static void read_chapter_list(const char * path) {
    struct buf text = { 0 };
    struct line * lines;
    if (!read_file(path, &text)) fail_system("read", path);
    int n = split_lines(&text, &lines);
    for (int i = 0; i < n; i++) {
        const char * hash = memchr(lines[i].text, '#', lines[i].len);
        size_t len = hash ? (size_t) (hash - lines[i].text) : lines[i].len;
        char storage[MAX_MARKER], * w[3];
        int n_words = split_words(lines[i].text, len, storage, sizeof(storage), w, 3);
        if (n_words == 0) continue;
        if (n_words != 2 || !is_two_digits(w[0]) || !is_name(w[1], 64))
            fail(path, i + 1, "expected a chapter as 'NN name', like '05 galloc'");
        int number = atoi(w[0]);
        if (n_chapters > 0 && number <= last_chapter())
            fail(path, i + 1, "chapters must be listed in increasing order");
        chapters[n_chapters].number = number;
        snprintf(chapters[n_chapters].dir, sizeof(chapters[0].dir), "%s_%s", w[0], w[1]);
        n_chapters++;
    }
    if (n_chapters == 0) fail(path, 0, "no chapters listed");
    free(lines);
    free(text.data);
    list_path = path;
}

// ---------------------------------------------------------------------------
// Markers: reading one marker line

enum marker_kind { MARK_FILE, MARK_ADD_BEGIN, MARK_ADD_END, MARK_OLD_BEGIN, MARK_OLD_END };

struct marker {
    enum marker_kind kind;
    struct range range;   // //@+ 05 gives 05..full; //@- 05 gives 05..full too
    char tag[MAX_TAG];
};

// A line that starts with //@, or a preprocessor line that mentions //@, is
// meant as a marker: it must then be exactly one of the forms, so that a typo
// is an error rather than a marker silently copied into every chapter.
static bool line_looks_like_marker(const struct line * ln) {
    if (line_starts_with(ln, "//@")) return true;
    if (!line_starts_with(ln, "#")) return false;
    for (size_t i = 0; i + 3 <= ln->len; i++)
        if (memcmp(ln->text + i, "//@", 3) == 0) return true;
    return false;
}

static const char * chapter_text(int chapter, char out[8]) {
    if (chapter == CHAPTER_FULL) return "full";
    snprintf(out, 8, "%02d", chapter);
    return out;
}

// "05" or "full".
static int parse_chapter(const char * word, const char * file, int line) {
    if (strcmp(word, "full") == 0) return CHAPTER_FULL;
    if (!is_two_digits(word))
        fail(file, line, "'%s' is not a chapter: chapters are two digits, or full", word);
    int number = atoi(word);
    if (!chapter_is_listed(number)) fail(file, line, "chapter %s is not in %s", word, list_path);
    return number;
}

// "03..04": two chapters, the first not after the second.
static struct range parse_range(const char * word, const char * file, int line) {
    const char * dots = strstr(word, "..");
    char lo[8], hi[8];
    if (!dots || dots - word >= (long) sizeof(lo) || strlen(dots + 2) >= sizeof(hi))
        fail(file, line, "'%s' is not a range of chapters like 03..04", word);
    snprintf(lo, sizeof(lo), "%.*s", (int) (dots - word), word);
    snprintf(hi, sizeof(hi), "%s", dots + 2);
    struct range r = { parse_chapter(lo, file, line), parse_chapter(hi, file, line) };
    if (r.lo == CHAPTER_FULL || r.hi == CHAPTER_FULL)
        fail(file, line, "'%s': a range names two chapters, like 03..04", word);
    if (r.lo > r.hi) fail(file, line, "'%s' ends before it starts", word);
    return r;
}

static void copy_tag(char * out, const char * word, const char * file, int line) {
    if (!is_name(word, MAX_TAG))
        fail(file, line, "'%s' is not a tag: use letters, digits, '-', '_' or '.'", word);
    strcpy(out, word);
}

static struct marker parse_marker(const struct line * ln, const char * file, int line) {
    char storage[MAX_MARKER], * w[6];
    int n = split_words(ln->text, ln->len, storage, sizeof(storage), w, 6);
    struct marker m = { 0 };
    if (n == 2 && strcmp(w[0], "//@file") == 0) {
        m.kind = MARK_FILE;
        if (strstr(w[1], "..")) {
            m.range = parse_range(w[1], file, line);
        } else {
            m.range = (struct range) { parse_chapter(w[1], file, line), CHAPTER_FULL };
        }
        return m;
    }
    if (n == 3 && (strcmp(w[0], "//@+") == 0 || strcmp(w[0], "//@-") == 0)) {
        m.kind = w[0][3] == '+' ? MARK_ADD_BEGIN : MARK_ADD_END;
        m.range = (struct range) { parse_chapter(w[1], file, line), CHAPTER_FULL };
        copy_tag(m.tag, w[2], file, line);
        return m;
    }
    if (n == 5 && strcmp(w[0], "#if") == 0 && strcmp(w[1], "0") == 0 && strcmp(w[2], "//@old") == 0) {
        m.kind = MARK_OLD_BEGIN;
        m.range = parse_range(w[3], file, line);
        copy_tag(m.tag, w[4], file, line);
        return m;
    }
    if (n == 3 && strcmp(w[0], "#endif") == 0 && strcmp(w[1], "//@old") == 0) {
        m.kind = MARK_OLD_END;
        copy_tag(m.tag, w[2], file, line);
        return m;
    }
    fail(file, line, "malformed marker: expected '//@file NN', '//@+ NN tag', '//@- NN tag', "
                     "'#if 0 //@old NN..MM tag' or '#endif //@old tag', alone on the line");
}

// ---------------------------------------------------------------------------
// Source files: reading a marked file of full/ and checking its blocks

struct block {
    enum marker_kind kind;   // MARK_ADD_BEGIN or MARK_OLD_BEGIN
    char tag[MAX_TAG];
    struct range declared;   // as written: //@+ 05 is 05..full, //@old 03..04 is 03..04
    struct range range;      // declared, clipped to the enclosing block
    int begin, end;          // line indexes of its two markers
};

struct source {
    char * path;   // for messages: full/retired/x.c, as the user spelled SRC_DIR
    char * rel;    // relative to SRC_DIR: retired/x.c
    char * out;    // relative to a chapter directory: x.c
    struct buf text;
    struct line * lines;
    int n_lines;
    struct range range;   // from the //@file line
    struct block * blocks;
    int n_blocks, cap_blocks;
};

static struct source * sources;
static int n_sources, cap_sources;
static const char * src_name;   // "full": the last part of SRC_DIR, for the header

// A block's start or end marker as it is written, for messages:
// '//@+ 05 tag', '//@- 05 tag', '//@old 03..04 tag' or '#endif //@old tag'.
static void marker_text(enum marker_kind kind, struct range declared, const char * tag, bool end,
                        char * out, size_t size) {
    char lo[8], hi[8];
    chapter_text(declared.lo, lo);
    chapter_text(declared.hi, hi);
    if (kind == MARK_ADD_BEGIN) snprintf(out, size, "'//@%c %s %s'", end ? '-' : '+', lo, tag);
    else if (end)               snprintf(out, size, "'#endif //@old %s'", tag);
    else                        snprintf(out, size, "'//@old %s..%s %s'", lo, hi, tag);
}

static void open_block(struct source * s, const struct marker * m, int at, int * stack, int * depth) {
    const int line = at + 1;
    for (int k = 0; k < *depth; k++) {
        const struct block * open = &s->blocks[stack[k]];
        if (strcmp(open->tag, m->tag) == 0)
            fail(s->path, line, "block '%s' is already open (line %d)", m->tag, open->begin + 1);
    }
    // An //@old block may end at the last chapter: it is still old, because
    // full/ (beyond every chapter) does not have it.

    // A nested block narrows its parent: it may not start before the parent
    // starts or after it ends, and an //@old block may not outlive it. An //@+
    // block inside an //@old block is allowed and ends where its parent ends.
    // The file itself is the outermost parent.
    struct range parent = *depth ? s->blocks[stack[*depth - 1]].range : s->range;
    bool fits = m->range.lo >= parent.lo && m->range.lo <= parent.hi &&
                (m->kind == MARK_ADD_BEGIN || m->range.hi <= parent.hi);
    if (!fits) {
        char inner[128], outer[128], lo[8], hi[8];
        marker_text(m->kind, m->range, m->tag, false, inner, sizeof(inner));
        if (*depth == 0)
            fail(s->path, line, "%s reaches outside the file's chapters %s..%s", inner,
                 chapter_text(parent.lo, lo), chapter_text(parent.hi, hi));
        const struct block * p = &s->blocks[stack[*depth - 1]];
        marker_text(p->kind, p->declared, p->tag, false, outer, sizeof(outer));
        fail(s->path, line, "%s does not narrow the enclosing %s (line %d)", inner, outer, p->begin + 1);
    }
    if (*depth == MAX_DEPTH) fail(s->path, line, "blocks nest deeper than %d", MAX_DEPTH);

    GROW(s->blocks, s->n_blocks, s->cap_blocks);
    struct block * b = &s->blocks[s->n_blocks];
    *b = (struct block) { .kind = m->kind, .declared = m->range, .begin = at, .end = -1 };
    b->range = (struct range) { m->range.lo, m->range.hi < parent.hi ? m->range.hi : parent.hi };
    strcpy(b->tag, m->tag);
    stack[(*depth)++] = s->n_blocks++;
}

static void close_block(struct source * s, const struct marker * m, int at, int * stack, int * depth) {
    if (*depth == 0) fail(s->path, at + 1, "end of block '%s', but no block is open", m->tag);
    struct block * b = &s->blocks[stack[*depth - 1]];
    bool same_kind = b->kind == MARK_ADD_BEGIN ? m->kind == MARK_ADD_END && m->range.lo == b->declared.lo
                                               : m->kind == MARK_OLD_END;
    if (!same_kind || strcmp(b->tag, m->tag) != 0) {
        char want[128];
        marker_text(b->kind, b->declared, b->tag, true, want, sizeof(want));
        fail(s->path, at + 1, "this does not close the open block '%s' (line %d): expected %s",
             b->tag, b->begin + 1, want);
    }
    b->end = at;
    (*depth)--;
}

// Where the file lands in a chapter: retired/ files are the old versions of
// root files and land at the root; every other path is kept as it is.
static void place_source(struct source * s) {
    const char * retired = "retired/";
    bool in_retired = strncmp(s->rel, retired, strlen(retired)) == 0;
    bool has_end = s->range.hi != CHAPTER_FULL;
    if (in_retired && !has_end)
        fail(s->path, 1, "a file in retired/ needs a last chapter: '//@file NN..MM'");
    if (!in_retired && has_end)
        fail(s->path, 1, "a file with a last chapter belongs in %s/retired/", src_name);
    s->out = xstrdup(in_retired ? s->rel + strlen(retired) : s->rel);
}

// Reads the markers of s and gives every line the range of chapters that have it.
static void parse_source(struct source * s) {
    s->n_lines = split_lines(&s->text, &s->lines);
    struct marker first = parse_marker(&s->lines[0], s->path, 1);
    if (first.kind != MARK_FILE) fail(s->path, 1, "a marked file must start with '//@file'");
    s->range = first.range;
    s->lines[0].marker = true;
    place_source(s);

    int stack[MAX_DEPTH], depth = 0;   // the open blocks, innermost last
    for (int i = 1; i < s->n_lines; i++) {
        struct line * ln = &s->lines[i];
        ln->range = depth ? s->blocks[stack[depth - 1]].range : s->range;
        if (!line_looks_like_marker(ln)) continue;
        ln->marker = true;
        struct marker m = parse_marker(ln, s->path, i + 1);
        switch (m.kind) {
            case MARK_FILE:      fail(s->path, i + 1, "'//@file' belongs on the first line only");
            case MARK_ADD_BEGIN:
            case MARK_OLD_BEGIN: open_block(s, &m, i, stack, &depth); break;
            case MARK_ADD_END:
            case MARK_OLD_END:   close_block(s, &m, i, stack, &depth); break;
        }
    }
    if (depth > 0) {
        const struct block * b = &s->blocks[stack[depth - 1]];
        char want[128];
        marker_text(b->kind, b->declared, b->tag, true, want, sizeof(want));
        fail(s->path, b->begin + 1, "block '%s' is never closed: expected %s", b->tag, want);
    }
}

// Only files whose first line is a marker take part: full/Makefile and friends
// are full/'s own build files. Reading just the first line keeps big data
// files cheap.
static bool first_line_is_marker(const char * path) {
    FILE * f = fopen(path, "rb");
    if (!f) fail_system("read", path);
    char first[MAX_MARKER] = "";
    if (!fgets(first, sizeof(first), f)) first[0] = '\0';
    fclose(f);
    struct line ln = { .text = first, .len = strlen(first) };
    return line_starts_with(&ln, "//@");
}

static void read_source(const char * path, const char * rel, void * unused) {
    (void) unused;
    if (!first_line_is_marker(path)) return;
    GROW(sources, n_sources, cap_sources);
    struct source * s = &sources[n_sources++];
    *s = (struct source) { .path = xstrdup(path), .rel = xstrdup(rel) };
    if (!read_file(path, &s->text)) fail_system("read", path);
    parse_source(s);
}

// full/retired/x.c (chapters 01..03) and full/x.c (04 on) may both land as
// x.c, but never in the same chapter.
static void check_no_two_sources_collide(void) {
    for (int i = 0; i < n_sources; i++) {
        for (int j = i + 1; j < n_sources; j++) {
            const struct source * a = &sources[i], * b = &sources[j];
            if (strcmp(a->out, b->out) != 0) continue;
            int lo = a->range.lo > b->range.lo ? a->range.lo : b->range.lo;
            int hi = a->range.hi < b->range.hi ? a->range.hi : b->range.hi;
            char c[8];
            if (lo <= hi)
                fail(b->path, 1, "lands as %s in chapter %s, and so does %s", b->out,
                     chapter_text(lo, c), a->path);
        }
    }
}

// ---------------------------------------------------------------------------
// Walking directory trees

typedef void (*visit_fn)(const char * path, const char * rel, void * ctx);

// Hidden files and build output (build/, bin/) are never sources or chapter files.
static bool is_skipped_name(const char * name) {
    return name[0] == '.' || strcmp(name, "build") == 0 || strcmp(name, "bin") == 0;
}

static int compare_names(const void * a, const void * b) {
    return strcmp(*(char * const *) a, *(char * const *) b);
}

// Calls visit for every regular file under dir, in sorted order so output and
// messages do not depend on the file system. rel is the path below the top.
static void walk_files(const char * dir, const char * rel, visit_fn visit, void * ctx) {
    DIR * d = opendir(dir);
    if (!d) return;   // a directory that does not exist has no files
    char ** names = NULL;
    int n = 0, cap = 0;
    for (struct dirent * e; (e = readdir(d));) {
        if (is_skipped_name(e->d_name)) continue;
        GROW(names, n, cap);
        names[n++] = xstrdup(e->d_name);
    }
    closedir(d);
    if (n > 0) qsort(names, (size_t) n, sizeof(*names), compare_names);
    for (int i = 0; i < n; i++) {
        char * path = path_join(dir, names[i]);
        char * sub = rel ? path_join(rel, names[i]) : xstrdup(names[i]);
        struct stat st;
        if (stat(path, &st) != 0) {
            // vanished since readdir (or a dangling link): nothing to visit
        } else if (S_ISDIR(st.st_mode)) {
            walk_files(path, sub, visit, ctx);
        } else if (S_ISREG(st.st_mode)) {
            visit(path, sub, ctx);
        }
        free(path);
        free(sub);
        free(names[i]);
    }
    free(names);
}

// ---------------------------------------------------------------------------
// Rendering: the lines of one file that one chapter has

// Removes blank lines at the end of out, but not before position keep.
static void trim_trailing_blank_lines(struct buf * out, size_t keep) {
    while (out->len > keep) {
        size_t start = out->len;
        if (out->data[start - 1] == '\n') start--;
        while (start > keep && out->data[start - 1] != '\n') start--;
        struct line last = { .text = out->data + start, .len = out->len - start };
        if (!line_is_blank(&last)) return;
        out->len = start;
        out->data[start] = '\0';
    }
}

// Appends the lines from..to-1 of s that chapter has. Dropping a block must
// not leave holes the source does not have, so a blank line is skipped when
// lines were dropped since the last line written and that line is blank too
// (or nothing was written yet), and a tail of blank lines is trimmed when the
// lines after it were dropped.
static void render_lines(const struct source * s, int chapter, int from, int to, struct buf * out) {
    size_t start = out->len;
    bool dropped = false, wrote_any = false, last_blank = false;
    for (int i = from; i < to; i++) {
        const struct line * ln = &s->lines[i];
        if (ln->marker || !range_has(ln->range, chapter)) {
            dropped = true;
            continue;
        }
        bool blank = line_is_blank(ln);
        if (blank && dropped && (!wrote_any || last_blank)) continue;
        buf_add(out, ln->text, ln->len);
        wrote_any = true;
        last_blank = blank;
        dropped = false;
    }
    if (dropped) trim_trailing_blank_lines(out, start);
}

// The whole chapter version of s, header first. False when nothing is left,
// and then the chapter does not get the file.
static bool render_file(const struct source * s, int chapter, struct buf * out) {
    out->len = 0;
    buf_addf(out, GENERATED_PREFIX "%s/%s by tools/chapgen. " GENERATED_ADVICE "%s/%s and run make chapters.\n",
             src_name, s->rel, src_name, s->rel);
    size_t header = out->len;
    render_lines(s, chapter, 1, s->n_lines, out);   // line 0 is //@file
    return out->len > header;
}

// ---------------------------------------------------------------------------
// Writing a chapter

struct chapter_stats {
    int written, unchanged, deleted;
};

static void make_parent_dirs(const char * path) {
    char * copy = xstrdup(path);
    for (char * slash = strchr(copy + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
        *slash = '\0';
        if (mkdir(copy, 0777) != 0 && errno != EEXIST) fail_system("create directory", copy);
        *slash = '/';
    }
    free(copy);
}

static bool buf_equal(const struct buf * a, const struct buf * b) {
    return a->len == b->len && (a->len == 0 || memcmp(a->data, b->data, a->len) == 0);
}

// Leaves a file whose content is already right alone, so its timestamp says
// when it really changed (and make does not rebuild what did not change).
static bool write_if_changed(const char * path, const struct buf * content) {
    struct buf old = { 0 };
    bool same = read_file(path, &old) && buf_equal(&old, content);
    free(old.data);
    if (same) return false;
    make_parent_dirs(path);
    FILE * f = fopen(path, "wb");
    if (!f) fail_system("write", path);
    if (fwrite(content->data, 1, content->len, f) != content->len || fclose(f) != 0)
        fail_system("write", path);
    return true;
}

// Files that start with the generated header were written by chapgen, at
// some time; a chapter's README.md and Makefile are written by hand.
static bool is_generated_file(const char * path) {
    FILE * f = fopen(path, "rb");
    if (!f) return false;
    char first[sizeof(GENERATED_PREFIX)] = "";
    size_t n = fread(first, 1, sizeof(first) - 1, f);
    fclose(f);
    return n == sizeof(first) - 1 && memcmp(first, GENERATED_PREFIX, n) == 0;
}

// ---------------------------------------------------------------------------
// The manifest: what chapgen last wrote in a chapter, so it never eats an edit
//
// chapters/NN_name/.chapgen lists every file chapgen wrote there with a hash
// of the content it wrote. A file whose content still has that hash is
// chapgen's own and may be replaced or deleted; any other file (edited since,
// or never recorded) is someone's work and is kept unless --force.

// FNV-1a, 64 bits: tells "what chapgen wrote" from "an edit", nothing more.
static uint64_t hash_bytes(const char * data, size_t len) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char) data[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

struct manifest_entry {
    char * rel;
    uint64_t hash;
};

struct manifest {
    struct manifest_entry * items;
    int n, cap;
};

static void read_manifest(const char * dir, struct manifest * m) {
    *m = (struct manifest) { 0 };
    char * path = path_join(dir, MANIFEST_NAME);
    struct buf text = { 0 };
    if (read_file(path, &text)) {
        struct line * lines;
        int n = split_lines(&text, &lines);
        for (int i = 0; i < n; i++) {
            if (line_is_blank(&lines[i]) || lines[i].text[0] == '#') continue;
            char storage[4096], * w[3], * end;
            int n_words = split_words(lines[i].text, lines[i].len, storage, sizeof(storage), w, 3);
            uint64_t hash = n_words == 2 ? strtoull(w[0], &end, 16) : 0;
            if (n_words != 2 || strlen(w[0]) != 16 || *end != '\0')
                fail(path, i + 1, "expected 'HASH path' (delete the file, and every file of the chapter "
                                  "counts as edited)");
            GROW(m->items, m->n, m->cap);
            m->items[m->n++] = (struct manifest_entry) { xstrdup(w[1]), hash };
        }
        free(lines);
    }
    free(text.data);
    free(path);
}

static const struct manifest_entry * manifest_find(const struct manifest * m, const char * rel) {
    for (int i = 0; i < m->n; i++)
        if (strcmp(m->items[i].rel, rel) == 0) return &m->items[i];
    return NULL;
}

static void manifest_free(struct manifest * m) {
    for (int i = 0; i < m->n; i++) free(m->items[i].rel);
    free(m->items);
    *m = (struct manifest) { 0 };
}

// Is the file at path, if it exists, exactly what chapgen last wrote at rel?
static bool file_is_as_generated(const char * path, const char * rel, const struct manifest * m) {
    const struct manifest_entry * e = manifest_find(m, rel);
    struct buf text = { 0 };
    bool same = e && read_file(path, &text) && hash_bytes(text.data, text.len) == e->hash;
    free(text.data);
    return same;
}

// ---------------------------------------------------------------------------
// What a chapter gets: its rendered sources, then the copies handout.list
// names (build rules, tests, fixtures), so the directory works alone

struct output {
    char * rel;          // the path in the chapter
    struct buf content;
    bool executable;
};

struct outputs {
    struct output * items;
    int n, cap;
};

static const struct output * outputs_find(const struct outputs * o, const char * rel) {
    for (int i = 0; i < o->n; i++)
        if (strcmp(o->items[i].rel, rel) == 0) return &o->items[i];
    return NULL;
}

static void outputs_free(struct outputs * o) {
    for (int i = 0; i < o->n; i++) free(o->items[i].rel), free(o->items[i].content.data);
    free(o->items);
    *o = (struct outputs) { 0 };
}

static int compare_outputs(const void * a, const void * b) {
    return strcmp(((const struct output *) a)->rel, ((const struct output *) b)->rel);
}

// One line of handout.list: PATH (below the project root) lands at the same
// path in the chapters of range; {chapter} stands for the chapter's own
// directory name, {upto} for each chapter's up to and including this one.
struct copy_rule {
    char * path;
    struct range range;
    bool optional;   // "optional": a missing path is fine (e.g. tools/grade.mk)
    int line;
};

static struct copy_rule * copy_rules;
static int n_copy_rules, cap_copy_rules;
static const char * handout_path;   // the list, for messages
static const char * root_dir;       // where its paths start: the project root

static void read_handout_list(const char * path, bool required) {
    struct buf text = { 0 };
    if (!read_file(path, &text)) {
        if (required) fail_system("read", path);
        return;
    }
    handout_path = path;
    struct line * lines;
    int n = split_lines(&text, &lines);
    for (int i = 0; i < n; i++) {
        const char * hash = memchr(lines[i].text, '#', lines[i].len);
        size_t len = hash ? (size_t) (hash - lines[i].text) : lines[i].len;
        char storage[MAX_MARKER], * w[4];
        int n_words = split_words(lines[i].text, len, storage, sizeof(storage), w, 4);
        if (n_words == 0) continue;
        if (n_words < 2 || (n_words == 3 && strcmp(w[2], "optional") != 0) || n_words > 3)
            fail(path, i + 1, "expected 'PATH CHAPTERS [optional]', like 'tests/harness.c 01' or "
                              "'tests/fixtures/models/tiny-f32.gguf 09..09'");
        struct range r = strstr(w[1], "..") ? parse_range(w[1], path, i + 1)
                                            : (struct range) { parse_chapter(w[1], path, i + 1), CHAPTER_FULL };
        if (w[0][0] == '/' || strstr(w[0], ".."))
            fail(path, i + 1, "'%s': paths start at the project root and stay inside it", w[0]);
        GROW(copy_rules, n_copy_rules, cap_copy_rules);
        copy_rules[n_copy_rules++] = (struct copy_rule) { xstrdup(w[0]), r, n_words == 3, i + 1 };
    }
    free(lines);
    free(text.data);
}

static char * replace_word(const char * text, const char * word, const char * with) {
    const char * at = strstr(text, word);
    if (!at) return xstrdup(text);
    struct buf out = { 0 };
    buf_add(&out, text, (size_t) (at - text));
    buf_add(&out, with, strlen(with));
    buf_add(&out, at + strlen(word), strlen(at + strlen(word)));
    return out.data;
}

struct copy_ctx {
    struct outputs * outs;
    const struct copy_rule * rule;
};

static void add_copy(const char * path, const char * rel, void * arg) {
    struct copy_ctx * ctx = arg;
    // The reference solutions are the teacher's: never part of a chapter.
    if (strncmp(rel, "exercises/solutions", strlen("exercises/solutions")) == 0)
        fail(handout_path, ctx->rule->line, "%s: exercises/solutions/ never goes into a chapter", rel);
    if (outputs_find(ctx->outs, rel))
        fail(handout_path, ctx->rule->line, "%s is in the chapter already (a source of %s/, or an "
                                            "earlier line)", rel, src_name);
    struct output o = { .rel = xstrdup(rel) };
    if (!read_file(path, &o.content)) fail_system("read", path);
    struct stat st;
    o.executable = stat(path, &st) == 0 && (st.st_mode & S_IXUSR);
    GROW(ctx->outs->items, ctx->outs->n, ctx->outs->cap);
    ctx->outs->items[ctx->outs->n++] = o;
}

// A file, or a directory copied whole (hidden files and build/ left out).
static void add_copies(const struct copy_rule * rule, const char * rel, struct outputs * outs) {
    char * path = path_join(root_dir, rel);
    struct copy_ctx ctx = { outs, rule };
    struct stat st;
    if (stat(path, &st) != 0) {
        if (!rule->optional)
            fail(handout_path, rule->line, "%s: no such file or directory (mark the line 'optional' if "
                                           "it may be missing)", path);
    } else if (S_ISDIR(st.st_mode)) {
        walk_files(path, rel, add_copy, &ctx);
    } else {
        add_copy(path, rel, &ctx);
    }
    free(path);
}

// Everything chapter ch gets, sorted by path.
static void collect_outputs(const struct chapter * ch, struct outputs * outs) {
    *outs = (struct outputs) { 0 };
    for (int i = 0; i < n_sources; i++) {
        const struct source * s = &sources[i];
        struct output o = { 0 };
        if (range_has(s->range, ch->number) && render_file(s, ch->number, &o.content)) {
            o.rel = xstrdup(s->out);
            GROW(outs->items, outs->n, outs->cap);
            outs->items[outs->n++] = o;
        } else {
            free(o.content.data);
        }
    }
    for (int i = 0; i < n_copy_rules; i++) {
        const struct copy_rule * rule = &copy_rules[i];
        if (!range_has(rule->range, ch->number)) continue;
        char * path = replace_word(rule->path, "{chapter}", ch->dir);
        if (strstr(path, "{upto}")) {
            for (int k = 0; k < n_chapters && chapters[k].number <= ch->number; k++) {
                char * one = replace_word(path, "{upto}", chapters[k].dir);
                add_copies(rule, one, outs);
                free(one);
            }
        } else {
            add_copies(rule, path, outs);
        }
        free(path);
    }
    if (outs->n > 0) qsort(outs->items, (size_t) outs->n, sizeof(*outs->items), compare_outputs);
}

static void manifest_text(const struct outputs * outs, struct buf * out) {
    out->len = 0;
    buf_addf(out, "# Written by tools/chapgen: the files make chapters wrote here, each with a hash (FNV-1a)\n"
                  "# of what it wrote, so it can tell your edits from its own output and never overwrite\n"
                  "# them (tools/README.md). Not to be edited.\n");
    for (int i = 0; i < outs->n; i++)
        buf_addf(out, "%016llx %s\n", (unsigned long long) hash_bytes(outs->items[i].content.data,
                                                                         outs->items[i].content.len),
                 outs->items[i].rel);
}

// Files that a run would overwrite or delete although they are not what
// chapgen last wrote: "edited" work, listed before anything is written.
struct lost {
    char ** path;
    const char ** why;
    int n, cap;
};

static struct lost lost;
static bool lost_in[100];   // the chapters that have such files

static void add_lost(int chapter, const char * path, const char * why) {
    lost_in[chapter] = true;
    if (lost.n == lost.cap) {
        lost.cap = lost.cap ? 2 * lost.cap : 16;
        lost.path = xrealloc(lost.path, (size_t) lost.cap * sizeof(*lost.path));
        lost.why = xrealloc(lost.why, (size_t) lost.cap * sizeof(*lost.why));
    }
    lost.path[lost.n] = xstrdup(path);
    lost.why[lost.n++] = why;
}

// A planning run only finds what would be lost; a writing run writes.
enum run_mode { RUN_PLAN, RUN_WRITE };

struct stale_ctx {
    int chapter;
    const char * chapter_dir;
    const char * shown_dir;
    const struct outputs * outs;
    const struct manifest * manifest;
    enum run_mode mode;
    struct chapter_stats * stats;
};

// A file in the chapter that this run does not make (its source was deleted,
// moved, or no longer reaches the chapter) is deleted, with the directories
// it empties, when chapgen wrote it and nobody edited it since.
static void delete_if_stale(const char * path, const char * rel, void * arg) {
    struct stale_ctx * ctx = arg;
    if (outputs_find(ctx->outs, rel)) return;
    bool ours = file_is_as_generated(path, rel, ctx->manifest);
    if (!ours && !manifest_find(ctx->manifest, rel) && !is_generated_file(path)) return;   // hand-written
    if (ctx->mode == RUN_PLAN) {
        if (!ours) {
            char * shown = path_join(ctx->shown_dir, rel);
            add_lost(ctx->chapter, shown, manifest_find(ctx->manifest, rel) ? "edited, no longer generated"
                                                              : "not recorded in " MANIFEST_NAME ", no longer generated");
            free(shown);
        }
        return;
    }
    if (unlink(path) != 0) fail_system("delete", path);
    ctx->stats->deleted++;
    char * dir = xstrdup(rel);
    for (char * slash; (slash = strrchr(dir, '/'));) {
        *slash = '\0';
        char * full_dir = path_join(ctx->chapter_dir, dir);
        int gone = rmdir(full_dir);   // fails, harmlessly, when not empty
        free(full_dir);
        if (gone != 0) break;
    }
    free(dir);
}

// ---------------------------------------------------------------------------
// README snippets: a lesson quotes code that cannot go stale

static const struct source * source_in_chapter(const char * out, int chapter) {
    for (int i = 0; i < n_sources; i++)
        if (strcmp(sources[i].out, out) == 0 && range_has(sources[i].range, chapter)) return &sources[i];
    return NULL;
}

// Appends body without the indentation all its non-blank lines share, so a
// block from inside a function reads as if it started at the margin.
static void append_dedented(struct buf * out, const struct buf * body) {
    struct line * lines;
    int n = split_lines(body, &lines);
    const struct line * first = NULL;
    size_t indent = 0;
    for (int i = 0; i < n; i++) {
        const struct line * ln = &lines[i];
        if (line_is_blank(ln)) continue;
        size_t k = 0;
        if (!first) {
            first = ln;
            while (k < ln->len && (ln->text[k] == ' ' || ln->text[k] == '\t')) k++;
        } else {
            while (k < indent && k < ln->len && ln->text[k] == first->text[k]) k++;
        }
        indent = k;
    }
    for (int i = 0; i < n; i++) {
        if (line_is_blank(&lines[i])) buf_add(out, "\n", 1);
        else                          buf_add(out, lines[i].text + indent, lines[i].len - indent);
    }
    free(lines);
}

// The body of "<!-- snippet FILE TAG -->": the one block tagged TAG in the
// chapter's FILE, as the chapter has it.
static void append_snippet(int chapter, const char * file, const char * tag,
                           const char * readme, int line, struct buf * out) {
    char c[8];
    const struct source * s = source_in_chapter(file, chapter);
    if (!s) fail(readme, line, "snippet: chapter %s has no file %s", chapter_text(chapter, c), file);
    const struct block * found = NULL;
    int count = 0;
    for (int i = 0; i < s->n_blocks; i++) {
        if (strcmp(s->blocks[i].tag, tag) == 0 && range_has(s->blocks[i].range, chapter)) {
            found = &s->blocks[i];
            count++;
        }
    }
    if (count == 0)
        fail(readme, line, "snippet: %s has no block '%s' in chapter %s", file, tag, chapter_text(chapter, c));
    if (count > 1)
        fail(readme, line, "snippet: %s has %d blocks '%s' in chapter %s; a snippet quotes one",
             file, count, tag, chapter_text(chapter, c));
    struct buf body = { 0 };
    render_lines(s, chapter, found->begin + 1, found->end, &body);
    if (body.len > 0) append_dedented(out, &body);
    free(body.data);
}

static bool line_is(const struct line * ln, const char * text) {
    struct line copy = *ln;
    size_t n = strlen(text);
    while (copy.len > 0 && isspace((unsigned char) copy.text[copy.len - 1])) copy.len--;
    size_t start = 0;
    while (start < copy.len && isspace((unsigned char) copy.text[start])) start++;
    return copy.len - start == n && memcmp(copy.text + start, text, n) == 0;
}

// The hand-written lessons whose snippet regions chapgen fills: the English
// one and, where there is one, its Chinese twin (the same regions: readme_check
// --parity sees to that).
static const char * const readme_names[] = { "README.md", "README.zh.md" };
#define N_READMES ((int) (sizeof(readme_names) / sizeof(readme_names[0])))

static bool is_readme(const char * rel) {
    for (int i = 0; i < N_READMES; i++)
        if (strcmp(rel, readme_names[i]) == 0) return true;
    return false;
}

// Refills every snippet region of the chapter's lesson `name` (README.md or
// README.zh.md), which lives in dir; messages name it as it appears under
// shown_dir. Only a writing run writes it (a planning run still finds every
// error). Returns whether it changed.
static bool fill_readme_snippets(const struct chapter * ch, const char * dir, const char * shown_dir,
                                 const char * name, enum run_mode mode) {
    char * path = path_join(dir, name);
    char * shown = path_join(shown_dir, name);
    struct buf text = { 0 }, out = { 0 };
    bool changed = false;
    if (read_file(path, &text)) {
        struct line * lines;
        int n = split_lines(&text, &lines);
        for (int i = 0; i < n; i++) {
            buf_add(&out, lines[i].text, lines[i].len);
            if (!line_starts_with(&lines[i], "<!-- snippet ")) continue;
            char storage[MAX_MARKER], * w[6];
            int n_words = split_words(lines[i].text, lines[i].len, storage, sizeof(storage), w, 6);
            if (n_words != 5 || strcmp(w[4], "-->") != 0)
                fail(shown, i + 1, "expected '<!-- snippet FILE TAG -->'");
            if (i + 1 >= n || !line_starts_with(&lines[i + 1], "```"))
                fail(shown, i + 1, "a snippet region starts with a ``` fence on the next line");
            buf_add(&out, lines[i + 1].text, lines[i + 1].len);
            append_snippet(ch->number, w[2], w[3], shown, i + 1, &out);
            int close = i + 2;
            while (close < n && !line_is(&lines[close], "```")) close++;
            if (close + 1 >= n || !line_is(&lines[close + 1], "<!-- /snippet -->"))
                fail(shown, i + 1, "snippet region does not end with a ``` line and '<!-- /snippet -->'");
            buf_add(&out, lines[close].text, lines[close].len);
            buf_add(&out, lines[close + 1].text, lines[close + 1].len);
            i = close + 1;
        }
        free(lines);
        changed = mode == RUN_WRITE ? write_if_changed(path, &out) : !buf_equal(&text, &out);
    }
    free(text.data);
    free(out.data);
    free(path);
    free(shown);
    return changed;
}

// Writes chapter ch into dir (messages name it shown_dir): every file it has,
// then deletes the generated files it should no longer have, then fills the
// README's snippets and records what it wrote in the manifest. A file that
// is not what chapgen last wrote there is someone's edit: a planning run
// lists it as lost, and a writing run (which comes only after a planning run
// found nothing, or with --force) replaces it.
static void generate_chapter(const struct chapter * ch, const char * dir, const char * shown_dir,
                             enum run_mode mode, struct chapter_stats * stats) {
    struct outputs outs;
    struct manifest manifest;
    collect_outputs(ch, &outs);
    read_manifest(dir, &manifest);
    for (int i = 0; i < outs.n; i++) {
        const struct output * o = &outs.items[i];
        char * path = path_join(dir, o->rel);
        struct buf old = { 0 };
        bool exists = read_file(path, &old);
        if (exists && buf_equal(&old, &o->content)) {
            stats->unchanged++;
        } else if (mode == RUN_PLAN) {
            if (exists && !file_is_as_generated(path, o->rel, &manifest)) {
                char * shown = path_join(shown_dir, o->rel);
                add_lost(ch->number, shown, manifest_find(&manifest, o->rel) ? "edited" : "not recorded in " MANIFEST_NAME);
                free(shown);
            }
        } else {
            write_if_changed(path, &o->content);
            if (o->executable) chmod(path, 0755);
            stats->written++;
        }
        free(old.data);
        free(path);
    }
    struct stale_ctx ctx = { ch->number, dir, shown_dir, &outs, &manifest, mode, stats };
    walk_files(dir, NULL, delete_if_stale, &ctx);
    for (int i = 0; i < N_READMES; i++)
        if (fill_readme_snippets(ch, dir, shown_dir, readme_names[i], mode)) stats->written++;
    if (mode == RUN_WRITE) {
        struct buf text = { 0 };
        char * path = path_join(dir, MANIFEST_NAME);
        manifest_text(&outs, &text);
        write_if_changed(path, &text);
        free(text.data);
        free(path);
    }
    manifest_free(&manifest);
    outputs_free(&outs);
}

// ---------------------------------------------------------------------------
// --check: generate elsewhere, compare, touch nothing

static char * temp_dir;

static int remove_entry(const char * path, const struct stat * st, int flag, struct FTW * ftw) {
    (void) st, (void) flag, (void) ftw;
    remove(path);
    return 0;
}

// Runs at exit too, so an error in the middle of a check leaves no litter.
static void remove_temp_dir(void) {
    if (!temp_dir) return;
    nftw(temp_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(temp_dir);
    temp_dir = NULL;
}

static void make_temp_dir(void) {
    const char * base = getenv("TMPDIR");
    if (!base || !*base) base = "/tmp";
    temp_dir = path_join(base, "chapgen.XXXXXX");
    if (!mkdtemp(temp_dir)) fail_system("create a directory in", base);
    atexit(remove_temp_dir);
}

struct compare_ctx {
    const char * real_dir;    // chapters/NN_name
    const char * fresh_dir;   // the same chapter, just generated
    struct manifest manifest; // chapters/NN_name/.chapgen
    int stale, edited, files;
};

static bool files_equal(const char * a, const char * b) {
    struct buf x = { 0 }, y = { 0 };
    bool equal = read_file(a, &x) && read_file(b, &y) && buf_equal(&x, &y);
    free(x.data);
    free(y.data);
    return equal;
}

// For each freshly generated file: is chapters/ missing it, or different?
// Different is "edited" when the file is not what chapgen last wrote there
// (someone's work), "stale" when it is (full/ moved on since).
static void report_missing_or_different(const char * fresh, const char * rel, void * arg) {
    struct compare_ctx * ctx = arg;
    char * real = path_join(ctx->real_dir, rel);
    bool readme = is_readme(rel);   // hand-written, copied in for its snippets
    struct stat st;
    if (!readme) ctx->files++;
    if (!files_equal(fresh, real)) {
        const char * what = readme                                           ? "stale snippets in"
                            : stat(real, &st) != 0                           ? "missing"
                            : file_is_as_generated(real, rel, &ctx->manifest) ? "stale"
                                                                             : "edited";
        if (strcmp(what, "edited") == 0) ctx->edited++;
        printf("chapgen: %-17s %s\n", what, real);
        ctx->stale++;
    }
    free(real);
}

// For each file of chapters/ that chapgen wrote: would this run still make it?
static void report_extra(const char * real, const char * rel, void * arg) {
    struct compare_ctx * ctx = arg;
    char * fresh = path_join(ctx->fresh_dir, rel);
    struct stat st;
    if ((manifest_find(&ctx->manifest, rel) || is_generated_file(real)) && stat(fresh, &st) != 0) {
        printf("chapgen: %-17s %s (no longer generated)\n", "extra", real);
        ctx->stale++;
    }
    free(fresh);
}

static int check_chapters(const char * out_dir) {
    make_temp_dir();
    struct compare_ctx total = { 0 };
    for (int i = 0; i < n_chapters; i++) {
        char * real = path_join(out_dir, chapters[i].dir);
        char * fresh = path_join(temp_dir, chapters[i].dir);
        char * real_manifest = path_join(real, MANIFEST_NAME);
        char * fresh_manifest = path_join(fresh, MANIFEST_NAME);
        for (int k = 0; k < N_READMES; k++) {
            char * real_readme = path_join(real, readme_names[k]);
            char * fresh_readme = path_join(fresh, readme_names[k]);
            struct buf readme = { 0 };
            if (read_file(real_readme, &readme)) write_if_changed(fresh_readme, &readme);
            free(readme.data);
            free(real_readme), free(fresh_readme);
        }

        struct chapter_stats unused = { 0 };
        generate_chapter(&chapters[i], fresh, real, RUN_WRITE, &unused);
        struct compare_ctx ctx = { real, fresh, { 0 }, 0, 0, 0 };
        read_manifest(real, &ctx.manifest);
        walk_files(fresh, NULL, report_missing_or_different, &ctx);
        walk_files(real, NULL, report_extra, &ctx);
        if (!files_equal(fresh_manifest, real_manifest)) {
            printf("chapgen: %-17s %s\n", "stale record", real_manifest);
            ctx.stale++;
        }
        total.stale += ctx.stale;
        total.edited += ctx.edited;
        total.files += ctx.files;
        manifest_free(&ctx.manifest);
        free(real), free(fresh), free(real_manifest), free(fresh_manifest);
    }
    remove_temp_dir();
    if (total.stale > 0) {
        printf("chapgen: STALE: %d file%s out of date in %s/; run make chapters\n", total.stale,
               total.stale == 1 ? "" : "s", out_dir);
        if (total.edited > 0)
            printf("chapgen: %d of them edited by hand since make chapters wrote them. In a class that is\n"
                   "chapgen: expected: it is your work, and make chapters will not overwrite it. To change the\n"
                   "chapgen: engine, edit %s/ (tests/, tools/ for the copies) and run make chapters; FORCE=1\n"
                   "chapgen: replaces edited files (keep them first: make exercise CHAPTER=NN, or commit).\n",
                   total.edited, src_name);
        return 1;
    }
    printf("chapgen: chapters are fresh (%d files)\n", total.files);
    return 0;
}

// ---------------------------------------------------------------------------

static _Noreturn void usage(void) {
    fprintf(stderr, "usage: chapgen [--check] [--force] [--list tools/chapters.list] [--handout FILE] [--root DIR]\n"
                    "               SRC_DIR OUT_DIR\n"
                    "  writes OUT_DIR/NN_name/ for every chapter of the list from SRC_DIR, plus the copies\n"
                    "  FILE names (default: handout.list beside the chapter list; paths from DIR, default\n"
                    "  SRC_DIR/..); refuses, writing nothing, when that would overwrite or delete a file\n"
                    "  edited since chapgen wrote it (OUT_DIR/NN_name/.chapgen), unless --force;\n"
                    "  --check compares instead of writing: exit 1 if OUT_DIR is stale\n");
    exit(2);
}

// "full" from "full", "../full/" or "/home/me/minigml/full".
static const char * last_path_part(const char * path) {
    static char part[256];
    snprintf(part, sizeof(part), "%s", path);
    size_t n = strlen(part);
    while (n > 1 && part[n - 1] == '/') part[--n] = '\0';
    const char * slash = strrchr(part, '/');
    return slash && slash[1] ? slash + 1 : part;
}

// "." from "full", "a/b" from "a/b/full/".
static char * parent_dir(const char * path) {
    char * copy = xstrdup(path);
    size_t n = strlen(copy);
    while (n > 1 && copy[n - 1] == '/') copy[--n] = '\0';
    char * slash = strrchr(copy, '/');
    if (!slash) return strcpy(copy, ".");
    if (slash == copy) slash[1] = '\0';
    else               *slash = '\0';
    return copy;
}

// Nothing was written: say which files hold someone's work and how to keep it.
static int refuse(const char * out_dir) {
    printf("chapgen: refusing to overwrite or delete %d file%s edited since make chapters wrote %s:\n",
           lost.n, lost.n == 1 ? "" : "s", lost.n == 1 ? "it" : "them");
    for (int i = 0; i < lost.n; i++) printf("chapgen:   %-40s (%s)\n", lost.path[i], lost.why[i]);
    char which[400] = "";
    for (int c = 0; c < 100; c++) {
        if (!lost_in[c]) continue;
        size_t n = strlen(which);
        snprintf(which + n, sizeof(which) - n, "%smake exercise CHAPTER=%02d", n ? ", " : "", c);
    }
    printf("chapgen: Nothing was written. To keep the edits, copy them out of %s/ first: %s\n"
           "chapgen: (a working copy in work/, which make chapters never touches), or cp -r the chapter\n"
           "chapgen: elsewhere, or commit them. Then make chapters FORCE=1 (chapgen --force) replaces\n"
           "chapgen: them with what %s/ generates.\n", out_dir, which, src_name);
    return 1;
}

int main(int argc, char ** argv) {
    bool check = false, force = false;
    const char * list = "tools/chapters.list", * handout = NULL, * root = NULL;
    const char * dirs[2];
    int n_dirs = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--check") == 0)                        check = true;
        else if (strcmp(argv[i], "--force") == 0)                   force = true;
        else if (strcmp(argv[i], "--list") == 0 && i + 1 < argc)    list = argv[++i];
        else if (strcmp(argv[i], "--handout") == 0 && i + 1 < argc) handout = argv[++i];
        else if (strcmp(argv[i], "--root") == 0 && i + 1 < argc)    root = argv[++i];
        else if (argv[i][0] == '-' || n_dirs == 2)                  usage();
        else                                                        dirs[n_dirs++] = argv[i];
    }
    if (n_dirs != 2) usage();
    const char * src_dir = dirs[0], * out_dir = dirs[1];

    read_chapter_list(list);
    struct stat st;
    if (stat(src_dir, &st) != 0 || !S_ISDIR(st.st_mode)) fail_system("read directory", src_dir);
    src_name = last_path_part(src_dir);
    root_dir = root ? root : parent_dir(src_dir);
    char * list_dir = parent_dir(list);
    char * default_handout = path_join(list_dir, "handout.list");
    read_handout_list(handout ? handout : default_handout, handout != NULL);
    walk_files(src_dir, NULL, read_source, NULL);   // every error is found here...
    check_no_two_sources_collide();

    if (check) return check_chapters(out_dir);      // ...before anything is written
    for (int i = 0; i < n_chapters; i++) {          // and so is every edit a run would lose
        struct chapter_stats unused = { 0 };
        char * dir = path_join(out_dir, chapters[i].dir);
        generate_chapter(&chapters[i], dir, dir, RUN_PLAN, &unused);
        free(dir);
    }
    if (lost.n > 0 && !force) return refuse(out_dir);
    for (int i = 0; i < n_chapters; i++) {
        struct chapter_stats stats = { 0 };
        char * dir = path_join(out_dir, chapters[i].dir);
        generate_chapter(&chapters[i], dir, dir, RUN_WRITE, &stats);
        printf("chapgen: %-14s %d written, %d unchanged, %d deleted\n", chapters[i].dir,
               stats.written, stats.unchanged, stats.deleted);
        free(dir);
    }
    if (lost.n > 0) printf("chapgen: --force: replaced or deleted %d edited file%s\n", lost.n, lost.n == 1 ? "" : "s");
    free(list_dir);
    free(default_handout);
    return 0;
}
