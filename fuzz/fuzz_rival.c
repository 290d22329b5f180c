// fuzz_rival.c - bytes in as what a rival benchmark printed (the first byte
// picks which): llama-bench's CSV (-o csv) or llama-batched-bench's table,
// read by full/cli/rival_output.c for mg bench --llama-bench and mg
// batched-bench --llama-batched-bench. Properties:
//   - a row marked usable has rates that are finite, above 0 and below 1e9
//     (a ratio against 0, inf or 1e308 is no figure);
//   - no more rows than lines;
//   - a row read back from the text we print for it is the same row (so
//     the reader reads what it was shown, not a neighbour's field).
#include "fuzz.h"

#include "cli.h"

#include <math.h>
#include <string.h>

static bool same_number(double a, double b) {
    return a == b || (isnan(a) && isnan(b));
}

static int count_lines(const char * text) {
    int n = 1;
    for (const char * p = text; *p; p++) n += *p == '\n';
    return n;
}

static void check_csv_row(const struct llama_bench_row * r) {
    FUZZ_CHECK(r->n_prompt >= 0 && r->n_gen >= 0 && r->n_depth >= 0 && r->n_threads >= 0, "a negative count");
    if (r->usable) FUZZ_CHECK(isfinite(r->avg_ts) && r->avg_ts > 0 && r->avg_ts < 1e9, "avg_ts %g", r->avg_ts);
    char text[512];
    snprintf(text, sizeof(text), "\"n_threads\",\"n_prompt\",\"n_gen\",\"n_depth\",\"flash_attn\",\"avg_ts\"\n"
                                 "\"%d\",\"%d\",\"%d\",\"%d\",\"%s\",\"%.17g\"\n",
             r->n_threads, r->n_prompt, r->n_gen, r->n_depth, r->flash_attn ? "true" : "false", r->avg_ts);
    struct llama_bench_csv csv;
    struct llama_bench_row again;
    FUZZ_CHECK(cli_llama_bench_csv_begin(&csv, text), "our own header is not read");
    FUZZ_CHECK(cli_llama_bench_csv_next(&csv, &again), "our own row is not read");
    FUZZ_CHECK(again.n_prompt == r->n_prompt && again.n_gen == r->n_gen && again.n_depth == r->n_depth &&
                   again.n_threads == r->n_threads && again.flash_attn == r->flash_attn && again.usable == r->usable &&
                   (!r->usable || same_number(again.avg_ts, r->avg_ts)),
               "the row printed back reads differently");
}

static void fuzz_csv(char * text) {
    const int              n_lines = count_lines(text);
    struct llama_bench_csv csv;
    struct llama_bench_row row;
    int                    n_rows = 0;
    if (!cli_llama_bench_csv_begin(&csv, text)) return;
    while (cli_llama_bench_csv_next(&csv, &row)) {
        check_csv_row(&row);
        n_rows++;
    }
    FUZZ_CHECK(n_rows < n_lines, "%d rows from %d lines (one is the header)", n_rows, n_lines);
}

static void check_table_row(const struct batched_bench_row * r) {
    if (r->usable) {
        FUZZ_CHECK(cli_rate_usable(r->s_pp), "S_PP %g", r->s_pp);
        FUZZ_CHECK(cli_rate_usable(r->s_tg) || (r->tg == 0 && r->s_tg == 0.0), "S_TG %g", r->s_tg);
    }
    char line[512];
    snprintf(line, sizeof(line), "| %d | %d | %d | %d | 1.0 | %.17g | 1.0 | %.17g |", r->pp, r->tg, r->pl, r->n_kv,
             r->s_pp, r->s_tg);
    struct batched_bench_row again;
    FUZZ_CHECK(cli_batched_bench_line(line, &again), "our own row is not read: %s", line);
    FUZZ_CHECK(again.pp == r->pp && again.tg == r->tg && again.pl == r->pl && again.n_kv == r->n_kv &&
                   same_number(again.s_pp, r->s_pp) && same_number(again.s_tg, r->s_tg) && again.usable == r->usable,
               "the row printed back reads differently: %s", line);
}

static void fuzz_table(char * text) {
    for (char * line = text, * nl; line != NULL && *line; line = nl ? nl + 1 : NULL) {
        nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        struct batched_bench_row row;
        if (cli_batched_bench_line(line, &row)) check_table_row(&row);
    }
}

int LLVMFuzzerInitialize(int * argc, char *** argv) {
    (void) argc;
    (void) argv;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    if (size < 1) return 0;
    char * text = malloc(size);   // the rest, NUL-terminated (a child's output is cut at its first NUL too)
    if (text == NULL) return 0;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    if (data[0] & 1) fuzz_table(text);
    else fuzz_csv(text);
    free(text);
    return 0;
}
