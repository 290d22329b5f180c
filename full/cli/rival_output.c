//@file full
// rival_output.c - reading back what llama-bench and llama-batched-bench
// print, for the races of mg bench --llama-bench and mg batched-bench
// --llama-batched-bench (cli.h). Another program's output is input like any
// other: a line may be cut short, a field missing, a number absurd, so each
// row says whether its figures are usable, and the callers name what was not.
// The fuzz harness fuzz/fuzz_rival.c feeds these functions random text.
#define _POSIX_C_SOURCE 200809L   // clock_gettime (timeline.h, through cli.h)
#include "cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_CSV_FIELDS = 64 };

bool cli_rate_usable(double v) {
    return isfinite(v) && v > 0.0 && v < 1e9;
}

// The next line of text (NUL-terminated in place), or NULL at the end.
static char * next_line(char ** rest) {
    char * line = *rest;
    if (line == NULL || *line == '\0') return NULL;
    char * nl = strchr(line, '\n');
    *rest     = nl ? nl + 1 : NULL;
    if (nl) *nl = '\0';
    return line;
}

// Split one CSV line (llama-bench quotes every field) into at most max
// fields, in place. A quote left open takes the rest of the line.
static int split_csv(char * line, char ** fields, int max) {
    int    n = 0;
    char * p = line;
    while (*p && n < max) {
        if (*p == '"') {
            fields[n++] = ++p;
            while (*p && *p != '"') p++;
            if (*p) *p++ = '\0';
        } else {
            fields[n++] = p;
            while (*p && *p != ',') p++;
        }
        if (*p == ',') *p++ = '\0';
    }
    return n;
}

static int field_index(char ** names, int n, const char * name) {
    for (int i = 0; i < n; i++) {
        if (strcmp(names[i], name) == 0) return i;
    }
    return -1;
}

// llama-bench writes flash_attn as a number or as true/false, by version.
static bool csv_true(const char * v) {
    return strcmp(v, "1") == 0 || strcmp(v, "true") == 0 || strcmp(v, "on") == 0;
}

// A whole field as a number: "12.5" is, "12.5x", "" and "nan" are not usable.
static bool field_number(const char * text, double * out) {
    char *       end;
    const double v = strtod(text, &end);
    if (end == text || *end != '\0') return false;
    *out = v;
    return true;
}

// A whole field as an int in [0, 2^31): llama-bench's counts.
static bool field_count(const char * text, int * out) {
    double v;
    if (!field_number(text, &v) || !(v >= 0.0) || v >= 2147483648.0 || v != floor(v)) return false;
    *out = (int) v;
    return true;
}

bool cli_llama_bench_csv_begin(struct llama_bench_csv * c, char * text) {
    char * names[MAX_CSV_FIELDS];
    c->rest           = text;
    char * header     = next_line(&c->rest);
    c->n_names        = header ? split_csv(header, names, MAX_CSV_FIELDS) : 0;
    c->col_prompt     = field_index(names, c->n_names, "n_prompt");
    c->col_gen        = field_index(names, c->n_names, "n_gen");
    c->col_depth      = field_index(names, c->n_names, "n_depth");
    c->col_threads    = field_index(names, c->n_names, "n_threads");
    c->col_fa         = field_index(names, c->n_names, "flash_attn");
    c->col_ts         = field_index(names, c->n_names, "avg_ts");
    return c->col_prompt >= 0 && c->col_gen >= 0 && c->col_depth >= 0 && c->col_threads >= 0 && c->col_fa >= 0 &&
           c->col_ts >= 0;
}

bool cli_llama_bench_csv_next(struct llama_bench_csv * c, struct llama_bench_row * row) {
    char * v[MAX_CSV_FIELDS];
    for (char * line; (line = next_line(&c->rest)) != NULL;) {
        if (split_csv(line, v, MAX_CSV_FIELDS) < c->n_names) continue;
        if (!field_count(v[c->col_prompt], &row->n_prompt) || !field_count(v[c->col_gen], &row->n_gen) ||
            !field_count(v[c->col_depth], &row->n_depth) || !field_count(v[c->col_threads], &row->n_threads)) {
            continue;
        }
        row->flash_attn = csv_true(v[c->col_fa]);
        row->avg_ts     = NAN;   // until read
        row->usable     = field_number(v[c->col_ts], &row->avg_ts) && cli_rate_usable(row->avg_ts);
        return true;
    }
    return false;
}

bool cli_batched_bench_line(const char * line, struct batched_bench_row * row) {
    double t_pp, t_tg;
    if (sscanf(line, "| %d | %d | %d | %d | %lf | %lf | %lf | %lf |", &row->pp, &row->tg, &row->pl, &row->n_kv, &t_pp,
               &row->s_pp, &t_tg, &row->s_tg) != 8) {
        return false;
    }
    row->usable = cli_rate_usable(row->s_pp) && (cli_rate_usable(row->s_tg) || (row->tg == 0 && row->s_tg == 0.0));
    return true;
}
