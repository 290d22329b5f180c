// readme_check.c - does a README still show what its demo prints?
//
//     readme_check README.md demo-output.txt
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
// lines). Trailing spaces do not count. Exit 0 when every excerpt matches,
// 1 (naming the README line that did not) otherwise.
#define _POSIX_C_SOURCE 200809L
#include <stdbool.h>
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

int main(int argc, char ** argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s README.md demo-output.txt\n", argv[0]);
        return 2;
    }
    struct lines readme = {0}, out = {0};
    if (!read_lines(argv[1], &readme) || !read_lines(argv[2], &out)) {
        fprintf(stderr, "readme_check: cannot read %s or %s\n", argv[1], argv[2]);
        return 2;
    }
    int n_excerpts = 0, n_lines = 0, bad = 0;
    for (int i = 0; i < readme.n; i++) {
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
    if (!bad) printf("%s: %d demo excerpt(s), %d lines, match the demo's output\n", argv[1], n_excerpts, n_lines);
    free_lines(&readme);
    free_lines(&out);
    return bad;
}
