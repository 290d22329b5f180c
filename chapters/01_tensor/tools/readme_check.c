// readme_check.c - does a README still show what its demo prints?
//
//     readme_check README.md demo-output.txt [--from CHAPTER TRACE OUTPUT]...
//     readme_check --parity README.md README.zh.md
//
// A chapter README quotes its demo between two markers:
//
//     <!-- demo-output -->
//     ```text
//     [alloc] alloc wx           8 bytes at      0   free: [8, inf)
//     ...
//     [alloc] peak 16 bytes for 3 results of 24 bytes
//     ```
//     <!-- /demo-output -->
//
// Every quoted line must appear in the output, in the same order, and lines
// that follow each other in the quote must follow each other in the output,
// except across a line that is just "..." (which stands for any number of
// lines). Trailing spaces do not count.
//
// Numbers in prose are checked too, where a marker line names them:
//
//     <!-- numbers 160 150,192 27,312 from 09_inference alloc -->
//     The decode graph of chapter 09's demo model has 160 nodes whose results
//     add up to 150,192 bytes; planned, they fit in 27,312.
//
// Each listed number must be written in the paragraph that follows (up to a
// blank line), and printed by the demo (thousands commas do not count). With
// "from CHAPTER TRACE" the numbers come from another chapter's demo run with
// MG_TRACE=TRACE: checked against the OUTPUT given by --from CHAPTER TRACE
// OUTPUT (the top-level make check-numbers does), skipped otherwise (a
// chapter copied alone has no other chapter).
//
// --parity keeps a Chinese lesson in step with its English one: README.zh.md
// must have the English file's headings (by level, in order: their text is
// in another language), its snippet regions, its demo-output blocks (byte for
// byte) and its numbers lines, in the same order (bold pseudo-headings,
// "**Title.** text", count as headings); in every section the same
// backticked spans, numbers, table rows and images (content_parity below);
// and each file's first line links to the other ("English |
// [中文](README.zh.md)" and "[English](README.md) | 中文"). Each difference is
// named with the English line it comes from.
//
// Exit 0 when everything matches, 1 (naming the README line that did not)
// otherwise. When the chapter's files differ from what make chapters wrote
// (its .chapgen manifest), the message says that after an exercise a
// mismatch is expected.
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct lines {
    char ** text;
    int *   line_no;   // where each line came from, for messages
    int     n;
};

static void rstrip(char * s) {
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' ' || s[n - 1] == '\t')) s[--n] = '\0';
}

static void push(struct lines * l, const char * s, int line_no) {
    l->text    = realloc(l->text, (size_t) (l->n + 1) * sizeof(char *));
    l->line_no = realloc(l->line_no, (size_t) (l->n + 1) * sizeof(int));
    l->text[l->n]    = strdup(s);
    l->line_no[l->n] = line_no;
    l->n++;
}

static void free_lines(struct lines * l) {
    for (int i = 0; i < l->n; i++) free(l->text[i]);
    free(l->text);
    free(l->line_no);
}

static bool read_lines(const char * path, struct lines * out) {
    FILE * f = fopen(path, "r");
    if (f == NULL) return false;
    char * buf = NULL;
    size_t cap = 0;
    int    no  = 0;
    while (getline(&buf, &cap, f) >= 0) {
        rstrip(buf);
        push(out, buf, ++no);
    }
    free(buf);
    fclose(f);
    return true;
}

// Does excerpt[from, to) match the output starting at output line at? A "..."
// line lets the match skip ahead to the next quoted line wherever it is.
static bool matches_at(const struct lines * ex, int from, int to, const struct lines * out, int at, int * failed) {
    int o = at;
    for (int e = from; e < to; e++) {
        if (strcmp(ex->text[e], "...") == 0) {
            if (e + 1 == to) return true;
            while (o < out->n && !matches_at(ex, e + 1, to, out, o, failed)) o++;
            return o < out->n;
        }
        if (o >= out->n || strcmp(ex->text[e], out->text[o]) != 0) {
            if (e > *failed) *failed = e;
            return false;
        }
        o++;
    }
    return true;
}

// Is s[at, at+n) a whole number, not a piece of a longer one or of a name
// (Q8_0, Qwen3-0.6B, 0x1F)?
static bool is_whole(const char * s, size_t at, size_t n) {
    char before = at > 0 ? s[at - 1] : ' ', after = s[at + n];
    if (isalnum((unsigned char) before) || before == '_' || before == '.') return false;
    if (isalnum((unsigned char) after) || after == '_') return false;
    if ((after == '.' || after == ',') && isdigit((unsigned char) s[at + n + 1])) return false;
    return true;
}

// Does a number start at s[at] (not inside a name such as Q8_0, x86, 0x1F)?
static bool is_whole_start(const char * s, size_t at) {
    const char before = at > 0 ? s[at - 1] : ' ';
    return !isalnum((unsigned char) before) && before != '_' && before != '.' && before != '-';
}

static bool contains_number(const char * text, const char * number) {
    size_t n = strlen(number);
    for (const char * p = strstr(text, number); p; p = strstr(p + 1, number))
        if (is_whole(text, (size_t) (p - text), n)) return true;
    return false;
}

// The text with the thousands commas of its numbers removed: 150,192 -> 150192.
static char * without_commas(const char * text) {
    char * out = strdup(text);
    size_t o = 0;
    for (size_t i = 0; text[i]; i++) {
        if (text[i] == ',' && i > 0 && isdigit((unsigned char) text[i - 1]) && isdigit((unsigned char) text[i + 1]))
            continue;
        out[o++] = text[i];
    }
    out[o] = '\0';
    return out;
}

static char * join_lines(const struct lines * l, int from, int to) {
    size_t size = 1;
    for (int i = from; i < to; i++) size += strlen(l->text[i]) + 1;
    char * text = malloc(size);
    text[0] = '\0';
    for (int i = from; i < to; i++) strcat(strcat(text, l->text[i]), "\n");
    return text;
}

struct other_output {
    const char * chapter, * trace;
    char * text;   // commas removed
};

// Checks one "<!-- numbers ... -->" marker at readme line i. Returns 1 when
// a number is wrong, 0 when all are right, -1 when it quotes a demo we do
// not have here (skipped).
static int check_numbers(const char * path, const struct lines * readme, int i, const char * own_output,
                         const struct other_output * others, int n_others, int * n_checked) {
    char * marker = strdup(readme->text[i]);
    char * words[64];
    int n = 0;
    for (char * w = strtok(marker, " "); w && n < 64; w = strtok(NULL, " ")) words[n++] = w;
    int last = n - 1, from = -1;   // words: <!-- numbers N... [from CHAPTER TRACE] -->
    for (int k = 2; k < last; k++)
        if (strcmp(words[k], "from") == 0) from = k;
    if (n < 4 || strcmp(words[last], "-->") != 0 || (from >= 0 && from != last - 3)) {
        fprintf(stderr, "%s:%d: expected '<!-- numbers N... [from CHAPTER TRACE] -->'\n", path, i + 1);
        free(marker);
        return 1;
    }
    const char * output = own_output;
    if (from >= 0) {
        output = NULL;
        for (int k = 0; k < n_others; k++)
            if (strcmp(others[k].chapter, words[from + 1]) == 0 && strcmp(others[k].trace, words[from + 2]) == 0)
                output = others[k].text;
        if (!output) {
            free(marker);
            return -1;
        }
    }
    int end = i + 1;
    while (end < readme->n && readme->text[end][0] != '\0') end++;
    char * paragraph = join_lines(readme, i + 1, end);
    int bad = 0;
    for (int k = 2; k < (from >= 0 ? from : last); k++) {
        char * plain = without_commas(words[k]);
        if (!contains_number(paragraph, words[k])) {
            fprintf(stderr, "%s:%d: %s is listed, but the paragraph below does not say it\n", path, i + 1, words[k]);
            bad = 1;
        } else if (!contains_number(output, plain)) {
            if (from >= 0)
                fprintf(stderr, "%s:%d: the paragraph says %s, but the demo of %s (MG_TRACE=%s) does not print it\n",
                        path, i + 1, words[k], words[from + 1], words[from + 2]);
            else
                fprintf(stderr, "%s:%d: the paragraph says %s, but the demo does not print it\n", path, i + 1, words[k]);
            bad = 1;
        }
        (*n_checked)++;
        free(plain);
    }
    free(paragraph);
    free(marker);
    return bad;
}

// FNV-1a, 64 bits, as tools/chapgen hashes what it writes.
static uint64_t hash_file(const char * path, bool * ok) {
    FILE * f = fopen(path, "rb");
    uint64_t h = 0xcbf29ce484222325ull;
    *ok = f != NULL;
    if (!f) return 0;
    for (int c; (c = getc(f)) != EOF;) {
        h ^= (unsigned char) c;
        h *= 0x100000001b3ull;
    }
    fclose(f);
    return h;
}

// After a failure: has someone edited this chapter since make chapters wrote
// it? Its .chapgen (beside the README) says what was written.
static void say_if_edited(const char * readme_path) {
    char dir[4096], path[8192], rel[4096];
    snprintf(dir, sizeof(dir), "%s", readme_path);
    char * slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
    else       strcpy(dir, ".");
    snprintf(path, sizeof(path), "%s/.chapgen", dir);
    FILE * f = fopen(path, "r");
    if (!f) return;
    char line[4352], names[512] = "";
    int edited = 0;
    unsigned long long want;
    while (fgets(line, sizeof(line), f)) {
        if (sscanf(line, "%16llx %4095s", &want, rel) != 2) continue;
        snprintf(path, sizeof(path), "%s/%s", dir, rel);
        bool ok;
        uint64_t h = hash_file(path, &ok);
        if (ok && h == want) continue;
        if (edited++ < 4) {
            if (names[0]) strncat(names, ", ", sizeof(names) - strlen(names) - 1);
            strncat(names, rel, sizeof(names) - strlen(names) - 1);
        }
    }
    fclose(f);
    if (edited == 0) return;
    fprintf(stderr, "readme_check: note: %d file%s of this chapter changed since make chapters wrote %s (%s%s).\n"
                    "readme_check: After an exercise the demo may print something else: this mismatch is then\n"
                    "readme_check: expected, and the tests above are what count.\n",
            edited, edited == 1 ? "" : "s", edited == 1 ? "it" : "them", names, edited > 4 ? ", ..." : "");
}

// ---------------------------------------------------------------------------
// --parity: the Chinese README has every section, snippet, excerpt and
// numbers line of the English one

enum item_kind { ITEM_HEADING, ITEM_SNIPPET, ITEM_DEMO, ITEM_NUMBERS };

struct item {
    enum item_kind kind;
    char * key;      // what must be equal in both files
    int    line_no;  // where the item starts, for messages
    const char * text;   // its first line, for messages
};

struct items {
    struct item * v;
    int n;
};

static void add_item(struct items * it, enum item_kind kind, char * key, int line_no, const char * text) {
    it->v = realloc(it->v, (size_t) (it->n + 1) * sizeof(struct item));
    it->v[it->n++] = (struct item) { kind, key, line_no, text };
}

// A heading's level (1..6) or 0: "## The problem" is 2.
static int heading_level(const char * s) {
    int k = 0;
    while (s[k] == '#') k++;
    return k >= 1 && k <= 6 && s[k] == ' ' ? k : 0;
}

static bool is_bold_heading(const struct lines * l, int i);

// The headings (outside fenced code; bold pseudo-headings too), snippet
// markers, demo-output blocks (marker, fence and every quoted line) and
// numbers markers of a README.
static void collect_items(const struct lines * l, struct items * it) {
    bool in_fence = false;
    for (int i = 0; i < l->n; i++) {
        const char * s = l->text[i];
        if (strncmp(s, "```", 3) == 0) {
            in_fence = !in_fence;
            continue;
        }
        if (in_fence) continue;
        int level = heading_level(s);
        char key[32];
        if (level > 0) {
            snprintf(key, sizeof(key), "heading %d", level);
            add_item(it, ITEM_HEADING, strdup(key), l->line_no[i], s);
        } else if (is_bold_heading(l, i)) {
            add_item(it, ITEM_HEADING, strdup("bold heading"), l->line_no[i], s);
        } else if (strncmp(s, "<!-- snippet ", 13) == 0) {
            add_item(it, ITEM_SNIPPET, strdup(s), l->line_no[i], s);
        } else if (strncmp(s, "<!-- numbers ", 13) == 0) {
            add_item(it, ITEM_NUMBERS, strdup(s), l->line_no[i], s);
        } else if (strcmp(s, "<!-- demo-output -->") == 0) {
            // The block: the marker, the opening fence, the quote, the closing fence.
            int end = i + 1;
            if (end < l->n && strncmp(l->text[end], "```", 3) == 0) {
                end++;
                while (end < l->n && strncmp(l->text[end], "```", 3) != 0) end++;
            }
            if (end >= l->n) end = l->n - 1;
            add_item(it, ITEM_DEMO, join_lines(l, i, end + 1), l->line_no[i], s);
            i = end;
        }
    }
}

static void free_items(struct items * it) {
    for (int i = 0; i < it->n; i++) free(it->v[i].key);
    free(it->v);
}

static void describe(const struct item * x, const struct lines * l, char * out, size_t size) {
    switch (x->kind) {
    case ITEM_HEADING:
        if (heading_level(x->text) > 0) snprintf(out, size, "a level-%d heading (%s)", heading_level(x->text), x->text);
        else snprintf(out, size, "a bold pseudo-heading (%.60s)", x->text);
        break;
    case ITEM_SNIPPET: snprintf(out, size, "the snippet region %s", x->text); break;
    case ITEM_NUMBERS: snprintf(out, size, "the numbers line %s", x->text); break;
    case ITEM_DEMO: {
        // Name the block by its first quoted line.
        int at = x->line_no + 1;   // line_no is 1-based: index line_no is the fence, the quote follows
        const char * first = at < l->n ? l->text[at] : "";
        snprintf(out, size, "the demo-output block that starts \"%.80s\"", first);
        break;
    }
    }
}

static const char * base_name(const char * path) {
    const char * slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

// Does the first line of a README link to its twin: "[LABEL](TWIN)"?
static bool links_to(const struct lines * l, const char * label, const char * twin) {
    char want[1024];
    snprintf(want, sizeof(want), "[%s](%s)", label, base_name(twin));
    return l->n > 0 && strstr(l->text[0], want) != NULL;
}

// ---------------------------------------------------------------------------
// --parity, the content: section by section, the same backticked spans,
// numbers, table rows and images. A section runs from a heading (or a bold
// pseudo-heading: a paragraph that opens with "**...**") to the next. The
// text is another language, but what it names, counts and shows is not.
// Allowed differences, for what a language needs: a number a Chinese
// sentence writes in digits where English writes a word ("two", "first")
// goes in a "<!-- parity: zh-only N... -->" comment in the Chinese file's
// section, one English writes in digits where Chinese writes a word ("pass
// 1" and 第一遍, "1-D" and 一维) in "<!-- parity: en-only N... -->"; a span
// that English wraps across two lines counts whole.

struct bag {
    char ** v;
    int     n;
};

static void bag_add(struct bag * b, const char * s, size_t len) {
    b->v = realloc(b->v, (size_t) (b->n + 1) * sizeof(char *));
    b->v[b->n++] = strndup(s, len);
}

static int cmp_str(const void * a, const void * b) {
    return strcmp(*(char * const *) a, *(char * const *) b);
}

static void bag_free(struct bag * b) {
    for (int i = 0; i < b->n; i++) free(b->v[i]);
    free(b->v);
}

struct section {
    int        line_no;   // of its heading (0: before the first one)
    struct bag spans, numbers, images;
    struct bag allowed, allowed_en;   // the numbers only the Chinese, or only the English, may have here
    int        n_rows;    // table rows, the rule under a table's head not counted
};

struct sections {
    struct section * v;
    int              n;
};

// A bold pseudo-heading: the line opens a paragraph with "**" and closes the bold.
static bool is_bold_heading(const struct lines * l, int i) {
    const char * s = l->text[i];
    return strncmp(s, "**", 2) == 0 && strstr(s + 2, "**") != NULL && (i == 0 || l->text[i - 1][0] == '\0');
}

static bool is_table_rule(const char * s) {
    if (s[0] != '|') return false;
    for (; *s; s++)
        if (!strchr("|-: ", *s)) return false;
    return true;
}

// The numbers of plain text (outside backticks and link targets): whole
// runs of digits with their decimal points and thousands commas.
static void add_numbers(struct bag * b, const char * text) {
    for (size_t i = 0; text[i];) {
        if (isdigit((unsigned char) text[i]) && is_whole_start(text, i)) {
            size_t j = i;
            while (isdigit((unsigned char) text[j]) ||
                   ((text[j] == '.' || text[j] == ',') && isdigit((unsigned char) text[j + 1])))
                j++;
            if (text[j] != '_') {   // "4.6x", "48th" count: a unit, not a name
                char * n = strndup(text + i, j - i);
                char * plain = without_commas(n);
                bag_add(b, plain, strlen(plain));
                free(plain);
                free(n);
            }
            i = j;
        } else {
            i++;
        }
    }
}

// One paragraph (its lines joined by spaces): its spans, images and numbers into sec.
static void add_paragraph(struct section * sec, const char * par) {
    char * plain = malloc(strlen(par) + 1);
    size_t o     = 0;
    for (size_t i = 0; par[i];) {
        if (par[i] == '`') {
            size_t n = 1;
            while (par[i + n] == '`') n++;   // ``a`b`` spans too
            const char * close = strstr(par + i + n, n == 1 ? "`" : n == 2 ? "``" : "```");
            if (close == NULL) {
                plain[o++] = par[i++];
                continue;
            }
            char * span = strndup(par + i + n, (size_t) (close - (par + i + n)));
            size_t w = 0;   // runs of spaces as one: a span English wraps across lines counts whole
            for (size_t r = 0; span[r]; r++)
                if (span[r] != ' ' || (w > 0 && span[w - 1] != ' ')) span[w++] = span[r];
            span[w] = '\0';
            bag_add(&sec->spans, span, w);
            free(span);
            i = (size_t) (close - par) + n;
            plain[o++] = ' ';
        } else if (par[i] == ']' && par[i + 1] == '(') {
            const char * close = strchr(par + i, ')');
            if (close == NULL) {
                plain[o++] = par[i++];
                continue;
            }
            if (i > 0 && strrchr(par, '!') != NULL) {
                // An image: "![alt](target)"; the alt is text, the target must match.
                const char * open = par + i;
                while (open > par && *open != '[') open--;
                if (open > par && open[-1] == '!') bag_add(&sec->images, par + i + 2, (size_t) (close - (par + i + 2)));
            }
            i = (size_t) (close - par) + 1;
            plain[o++] = ' ';
        } else {
            plain[o++] = par[i++];
        }
    }
    plain[o] = '\0';
    add_numbers(&sec->numbers, plain);
    free(plain);
}

// "<!-- parity: zh-only 2 3 -->" (or en-only): numbers this section may have in one language only.
static void add_allowed(struct bag * b, const char * s) {
    const char * p = s + strlen("<!-- parity: zh-only");
    for (char * end; *p;) {
        while (*p == ' ') p++;
        if (!isdigit((unsigned char) *p)) break;
        end = (char *) p;
        while (*end && *end != ' ') end++;
        bag_add(b, p, (size_t) (end - p));
        p = end;
    }
}

static void collect_sections(const struct lines * l, struct sections * out) {
    out->v = calloc(1, sizeof(struct section));
    out->n = 1;
    bool   in_fence = false;
    char * par      = NULL;   // the paragraph being read
    for (int i = 0; i < l->n; i++) {
        const char * s = l->text[i];
        const bool   fence = strncmp(s, "```", 3) == 0;
        const bool   heading = !in_fence && (heading_level(s) > 0 || is_bold_heading(l, i));
        const bool   ends_par = in_fence || fence || s[0] == '\0' || heading || s[0] == '|';
        struct section * sec = &out->v[out->n - 1];
        if (ends_par && par != NULL) {
            add_paragraph(sec, par);
            free(par);
            par = NULL;
        }
        if (fence) in_fence = !in_fence;
        if (in_fence || fence) continue;
        if (heading) {
            out->v = realloc(out->v, (size_t) (out->n + 1) * sizeof(struct section));
            out->v[out->n++] = (struct section) {.line_no = l->line_no[i]};
            sec = &out->v[out->n - 1];
            if (heading_level(s) > 0) {
                add_paragraph(sec, s + heading_level(s));
                continue;
            }
        }
        if (strncmp(s, "<!-- parity: zh-only", 20) == 0) {
            add_allowed(&sec->allowed, s);
        } else if (strncmp(s, "<!-- parity: en-only", 20) == 0) {
            add_allowed(&sec->allowed_en, s);
        } else if (strncmp(s, "<!--", 4) == 0) {
            continue;   // snippet, numbers and demo markers: compared as items
        } else if (s[0] == '|') {
            if (!is_table_rule(s)) sec->n_rows++;
            add_paragraph(sec, s);
        } else if (s[0] != '\0') {
            const size_t n = par ? strlen(par) : 0;
            par = realloc(par, n + strlen(s) + 2);
            if (n) par[n] = ' ';
            strcpy(par + (n ? n + 1 : 0), s);
        }
    }
    if (par != NULL) add_paragraph(&out->v[out->n - 1], par);   // the file's last paragraph
    free(par);
}

static void free_sections(struct sections * s) {
    for (int i = 0; i < s->n; i++) {
        bag_free(&s->v[i].spans);
        bag_free(&s->v[i].numbers);
        bag_free(&s->v[i].images);
        bag_free(&s->v[i].allowed);
        bag_free(&s->v[i].allowed_en);
    }
    free(s->v);
}

static bool allowed(const struct bag * a, const char * s) {
    for (int i = 0; i < a->n; i++)
        if (strcmp(a->v[i], s) == 0) return true;
    return false;
}

// What one bag holds more of than the other, printed; the number of such differences.
static int bag_diff(const char * what, struct bag * en, struct bag * zh, const struct bag * zh_allowed,
                    const struct bag * en_allowed, const char * zh_path, int zh_line, const char * en_path,
                    int en_line) {
    if (en->n > 0) qsort(en->v, (size_t) en->n, sizeof(char *), cmp_str);   // an empty bag's v is NULL, which qsort may not take
    if (zh->n > 0) qsort(zh->v, (size_t) zh->n, sizeof(char *), cmp_str);
    int bad = 0;
    for (int i = 0, j = 0; i < en->n || j < zh->n;) {
        const int c = i == en->n ? 1 : j == zh->n ? -1 : strcmp(en->v[i], zh->v[j]);
        if (c == 0) {
            i++, j++;
        } else if (c < 0) {
            if (!(en_allowed != NULL && allowed(en_allowed, en->v[i]))) {
                fprintf(stderr, "%s:%d: the section lacks the %s \"%s\" of %s:%d\n", zh_path, zh_line, what,
                        en->v[i], en_path, en_line);
                bad++;
            }
            i++;
        } else {
            if (!(zh_allowed != NULL && allowed(zh_allowed, zh->v[j]))) {
                fprintf(stderr, "%s:%d: the section has the %s \"%s\", which %s:%d does not\n", zh_path, zh_line, what,
                        zh->v[j], en_path, en_line);
                bad++;
            }
            j++;
        }
    }
    return bad;
}

// Section by section (both files have the same headings, checked first).
static int content_parity(const struct lines * en, const struct lines * zh, const char * en_path, const char * zh_path) {
    struct sections a = {0}, b = {0};
    collect_sections(en, &a);
    collect_sections(zh, &b);
    int bad = 0;
    for (int k = 0; a.n == b.n && k < a.n; k++) {   // another count: the headings' difference was named

        struct section * x = &a.v[k], * y = &b.v[k];
        const int zl = y->line_no ? y->line_no : 1, el = x->line_no ? x->line_no : 1;
        bad += bag_diff("`span`", &x->spans, &y->spans, NULL, NULL, zh_path, zl, en_path, el);
        bad += bag_diff("number", &x->numbers, &y->numbers, &y->allowed, &y->allowed_en, zh_path, zl, en_path, el);
        bad += bag_diff("image", &x->images, &y->images, NULL, NULL, zh_path, zl, en_path, el);
        if (x->n_rows != y->n_rows) {
            fprintf(stderr, "%s:%d: the section's tables have %d rows, %s:%d's %d\n", zh_path, zl, y->n_rows, en_path,
                    el, x->n_rows);
            bad++;
        }
    }
    free_sections(&a);
    free_sections(&b);
    return bad;
}

static int parity(const char * en_path, const char * zh_path) {
    struct lines en = { 0 }, zh = { 0 };
    if (!read_lines(en_path, &en) || !read_lines(zh_path, &zh)) {
        fprintf(stderr, "readme_check: cannot read %s or %s\n", en_path, zh_path);
        return 2;
    }
    int bad = 0;
    if (!links_to(&en, "中文", zh_path)) {
        fprintf(stderr, "%s:1: the first line must link to the Chinese lesson: English | [中文](%s)\n", en_path,
                base_name(zh_path));
        bad = 1;
    }
    if (!links_to(&zh, "English", en_path)) {
        fprintf(stderr, "%s:1: the first line must link to the English lesson: [English](%s) | 中文\n", zh_path,
                base_name(en_path));
        bad = 1;
    }
    struct items a = { 0 }, b = { 0 };
    collect_items(&en, &a);
    collect_items(&zh, &b);
    // The longest common subsequence of the two item lists: what is outside
    // it is missing from (or extra in) the Chinese file.
    int (*lcs)[b.n + 1] = calloc((size_t) (a.n + 1), sizeof(*lcs));
    for (int i = a.n - 1; i >= 0; i--)
        for (int j = b.n - 1; j >= 0; j--)
            lcs[i][j] = strcmp(a.v[i].key, b.v[j].key) == 0 ? lcs[i + 1][j + 1] + 1
                        : lcs[i + 1][j] >= lcs[i][j + 1]      ? lcs[i + 1][j]
                                                              : lcs[i][j + 1];
    char what[512];
    int counts[4] = { 0 };
    for (int i = 0, j = 0; i < a.n || j < b.n;) {
        if (i < a.n && j < b.n && strcmp(a.v[i].key, b.v[j].key) == 0) {
            counts[a.v[i].kind]++;
            i++, j++;
        } else if (i < a.n && (j == b.n || lcs[i + 1][j] >= lcs[i][j + 1])) {
            describe(&a.v[i], &en, what, sizeof(what));
            fprintf(stderr, "%s: lacks %s (%s:%d)%s\n", zh_path, what, en_path, a.v[i].line_no,
                    a.v[i].kind == ITEM_DEMO ? "; a demo-output block is copied byte for byte" : "");
            bad = 1;
            i++;
        } else {
            describe(&b.v[j], &zh, what, sizeof(what));
            fprintf(stderr, "%s:%d: %s is not in %s (or not at this place)\n", zh_path, b.v[j].line_no, what, en_path);
            bad = 1;
            j++;
        }
    }
    const int n_content = content_parity(&en, &zh, en_path, zh_path);
    if (n_content > 0) {
        fprintf(stderr, "%s: %d difference%s of content from %s\n", zh_path, n_content, n_content == 1 ? "" : "s",
                en_path);
        bad = 1;
    }
    if (!bad)
        printf("%s: in step with %s: %d headings, %d snippet region(s), %d demo excerpt(s), %d numbers line(s)\n",
               zh_path, en_path, counts[ITEM_HEADING], counts[ITEM_SNIPPET], counts[ITEM_DEMO], counts[ITEM_NUMBERS]);
    free(lcs);
    free_items(&a);
    free_items(&b);
    free_lines(&en);
    free_lines(&zh);
    return bad;
}

int main(int argc, char ** argv) {
    if (argc >= 2 && strcmp(argv[1], "--parity") == 0) {
        if (argc != 4) {
            fprintf(stderr, "usage: readme_check --parity README.md README.zh.md\n");
            return 2;
        }
        return parity(argv[2], argv[3]);
    }
    struct other_output others[16];
    int n_others = 0;
    for (int a = 3; a < argc; a += 4) {
        struct lines l = {0};
        if (strcmp(argv[a], "--from") != 0 || a + 3 >= argc || n_others == 16) argc = 0;   // usage below
        else if (!read_lines(argv[a + 3], &l)) {
            fprintf(stderr, "readme_check: cannot read %s\n", argv[a + 3]);
            return 2;
        } else {
            char * text = join_lines(&l, 0, l.n);
            others[n_others++] = (struct other_output) { argv[a + 1], argv[a + 2], without_commas(text) };
            free(text);
            free_lines(&l);
        }
    }
    if (argc < 3) {
        fprintf(stderr, "usage: readme_check README.md demo-output.txt [--from CHAPTER TRACE OUTPUT]...\n"
                        "       readme_check --parity README.md README.zh.md\n");
        return 2;
    }
    struct lines readme = {0}, out = {0};
    if (!read_lines(argv[1], &readme) || !read_lines(argv[2], &out)) {
        fprintf(stderr, "readme_check: cannot read %s or %s\n", argv[1], argv[2]);
        return 2;
    }
    char * out_text = join_lines(&out, 0, out.n), * own_output = without_commas(out_text);
    int n_excerpts = 0, n_lines = 0, bad = 0, n_numbers = 0, n_skipped = 0;
    for (int i = 0; i < readme.n; i++) {
        if (strncmp(readme.text[i], "<!-- numbers ", 13) == 0) {
            int r = check_numbers(argv[1], &readme, i, own_output, others, n_others, &n_numbers);
            if (r < 0) n_skipped++;
            else if (r > 0 && !bad) bad = 1;
            continue;
        }
        if (strcmp(readme.text[i], "<!-- demo-output -->") != 0) continue;
        // The quote is the fenced block right after the marker.
        int start = i + 2, end = start;
        while (end < readme.n && strncmp(readme.text[end], "```", 3) != 0) end++;
        if (i + 1 >= readme.n || strncmp(readme.text[i + 1], "```", 3) != 0 || end >= readme.n) {
            fprintf(stderr, "%s:%d: a demo-output marker must be followed by a fenced block\n", argv[1], i + 1);
            bad = 2;
            break;
        }
        n_excerpts++;
        n_lines += end - start;
        int  failed = start;
        bool found  = false;
        for (int at = 0; at < out.n && !found; at++) found = matches_at(&readme, start, end, &out, at, &failed);
        if (!found) {
            fprintf(stderr, "%s:%d: this line of the demo excerpt is not in the demo's output:\n    %s\n", argv[1],
                    readme.line_no[failed], readme.text[failed]);
            bad = 1;
        }
        i = end;
    }
    if (n_excerpts == 0) {
        fprintf(stderr, "%s: no <!-- demo-output --> excerpt to check\n", argv[1]);
        bad = 1;
    }
    if (!bad) {
        printf("%s: %d demo excerpt(s), %d lines, match the demo's output", argv[1], n_excerpts, n_lines);
        if (n_numbers > 0) printf("; so do %d number(s) in the prose", n_numbers);
        if (n_skipped > 0) printf(" (%d paragraph(s) quoting another chapter's demo: the project's make check-numbers checks them)", n_skipped);
        printf("\n");
    } else if (bad == 1) {
        say_if_edited(argv[1]);
    }
    for (int k = 0; k < n_others; k++) free(others[k].text);
    free(out_text);
    free(own_output);
    free_lines(&readme);
    free_lines(&out);
    return bad;
}
