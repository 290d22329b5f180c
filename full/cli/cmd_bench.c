//@file full
// cmd_bench.c - mg bench: tokens per second, measured the way llama-bench
// measures them (tools/llama-bench/llama-bench.cpp), so the two can be put
// side by side; with --llama-bench, raced against it in the same run.
//
// One "test" is llama-bench's: ppN evaluates an N-token prompt as one batch,
// tgN generates N tokens one at a time, both after the cache was filled to a
// depth d (the "@ dD" tests; the fill is not timed). Every test runs once to
// warm up, then -r times; the table shows mean +- standard deviation.
#define _POSIX_C_SOURCE 200809L
#include "cli.h"
#include "gguf.h"
#include "memmap.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char * usage =
    "usage: mg bench -m MODEL.gguf [-m MODEL2.gguf ...] [-p 64] [-n 64] [-d 0] [-t 1,2] [-fa 0] [-r 5]\n"
    "                [--kv-type f16] [-ngl 0] [-dev NAME] [--bandwidth FILE] [--llama-bench PATH --rounds 3]\n"
    "                [--baseline FILE]\n"
    "\n"
    "-p, -n, -d, -t and -fa take comma lists, as llama-bench's do; every combination is a test.\n"
    "ppN evaluates an N-token prompt as one batch (in graphs of at most 512 tokens), tgN generates\n"
    "N tokens one at a time; with -d D both start from a cache already filled to D positions (not\n"
    "timed). Each test is run once to warm up, then -r times: mean +- standard deviation in tokens/s.\n"
    "For generation the table also gives the weight bandwidth it implies (weight bytes x tokens/s);\n"
    "--bandwidth FILE (lines \"threads GB/s\", as tools/bandwidth prints) adds it as % of that bound.\n"
    "\n"
    "--llama-bench PATH races llama.cpp's llama-bench on the same files in the same run: --rounds\n"
    "times, ours then theirs for each model, with the same tests and repetitions; the table gives\n"
    "both, the ratio of the means and its min-max over the rounds. -ngl and -dev go to both engines\n"
    "(llama-bench's own default is -ngl 99, so it is always passed).\n"
    "--baseline FILE prints figures taken at another time (\"model test threads t/s\") beside ours,\n"
    "as a reference only: this machine's speed varies 2x from day to day, so no ratio is made.";

enum {
    MAX_MODELS = 16,
    MAX_LIST   = 16,
    MAX_TESTS  = 512,
    MAX_ROUNDS = 20,
    MAX_TOKENS = 65536,
};

// ---------------------------------------------------------------------------
// Lists and the tests they make
// ---------------------------------------------------------------------------

struct bench_test {
    int  n_prompt, n_gen, n_depth;   // one of n_prompt / n_gen is 0, as in llama-bench
    int  n_threads;
    bool flash_attn;
};

static void test_name(const struct bench_test * t, char * out, size_t size) {
    const int n = snprintf(out, size, "%s%d", t->n_prompt > 0 ? "pp" : "tg", t->n_prompt > 0 ? t->n_prompt : t->n_gen);
    if (t->n_depth > 0) snprintf(out + n, size - (size_t) n, " @ d%d", t->n_depth);
}

struct bench_lists {
    int prompt[MAX_LIST], gen[MAX_LIST], depth[MAX_LIST], threads[MAX_LIST], fa[MAX_LIST];
    int n_prompt, n_gen, n_depth, n_threads, n_fa;
};

// llama-bench's order: for each thread count, flash-attn setting and depth,
// the prompt tests, then the generation tests. A size of 0 is no test.
static int make_tests(const struct bench_lists * l, struct bench_test * out) {
    int n = 0;
    for (int ti = 0; ti < l->n_threads; ti++)
        for (int fi = 0; fi < l->n_fa; fi++)
            for (int di = 0; di < l->n_depth; di++) {
                const struct bench_test base = {0, 0, l->depth[di], l->threads[ti], l->fa[fi] != 0};
                for (int i = 0; i < l->n_prompt && n < MAX_TESTS; i++) {
                    if (l->prompt[i] == 0) continue;
                    out[n] = base;
                    out[n++].n_prompt = l->prompt[i];
                }
                for (int i = 0; i < l->n_gen && n < MAX_TESTS; i++) {
                    if (l->gen[i] == 0) continue;
                    out[n] = base;
                    out[n++].n_gen = l->gen[i];
                }
            }
    return n;
}

// ---------------------------------------------------------------------------
// Our side: a session per thread count and flash-attn setting
// ---------------------------------------------------------------------------

struct measurement {
    double mean, stddev;
};

static struct measurement summarize(const double * v, int n) {
    double sum = 0.0, sq = 0.0;
    for (int i = 0; i < n; i++) sum += v[i];
    const double mean = sum / n;
    for (int i = 0; i < n; i++) sq += (v[i] - mean) * (v[i] - mean);
    return (struct measurement) {mean, n > 1 ? sqrt(sq / (n - 1)) : 0.0};
}

// Any tokens will do: speed depends on the shapes, not on the ids.
static int32_t bench_token(int i, int n_vocab) {
    return (int32_t) (((long long) i * 7919 + 11) % n_vocab);
}

// Fill the cache to `depth` positions, untimed (llama-bench's depth run).
// The positions before depth are kept by every rewind that follows.
static bool fill_depth(struct mg_session * s, int depth, int n_vocab) {
    mg_session_rewind(s, 0);
    int32_t chunk[512];
    for (int done = 0; done < depth;) {
        const int n = depth - done < 512 ? depth - done : 512;
        for (int i = 0; i < n; i++) chunk[i] = bench_token(done + i, n_vocab);
        if (!mg_decode(s, chunk, n, false)) return false;
        done += n;
    }
    return true;
}

// One timed run of a test from the cache at its depth. Tokens/s, or -1.
static double run_once(struct mg_session * s, const struct bench_test * t, const int32_t * tokens) {
    mg_session_rewind(s, t->n_depth);
    const double t0 = mg_time_ms();
    if (t->n_prompt > 0) {
        if (!mg_decode(s, tokens, t->n_prompt, false)) return -1.0;   // split into graphs of n_batch
    } else {
        for (int i = 0; i < t->n_gen; i++) {
            if (!mg_decode(s, &tokens[i], 1, false)) return -1.0;
        }
    }
    const int n = t->n_prompt > 0 ? t->n_prompt : t->n_gen;
    return 1e3 * n / (mg_time_ms() - t0);
}

static int ctx_needed(const struct bench_test * tests, int n_tests) {
    int n_ctx = 0;
    for (int i = 0; i < n_tests; i++) {
        const int need = tests[i].n_depth + tests[i].n_prompt + tests[i].n_gen;
        if (need > n_ctx) n_ctx = need;
    }
    return n_ctx;
}

// Run every test on one model; results[i] gets test i's mean and deviation.
// Sessions are made per (threads, flash-attn) and the depth fill is redone
// only when the depth changes, as llama-bench caches its depth state.
static bool bench_model(struct mg_model * m, const struct bench_test * tests, int n_tests, int reps,
                        const struct mg_session_params * base, struct measurement * results) {
    struct mg_session * s = NULL;
    int  cur_threads = -1, cur_depth = -1;
    bool cur_fa = false, ok = true;
    int32_t * tokens = malloc(MAX_TOKENS * sizeof(int32_t));
    double *  tps    = malloc((size_t) reps * sizeof(double));
    for (int i = 0; i < MAX_TOKENS; i++) tokens[i] = bench_token(i + 1, m->hp.n_vocab);
    for (int i = 0; i < n_tests && ok; i++) {
        const struct bench_test * t = &tests[i];
        if (s == NULL || t->n_threads != cur_threads || t->flash_attn != cur_fa) {
            mg_session_free(s);
            struct mg_session_params params = *base;   // kv_type, n_gpu_layers and gpu_device
            params.n_threads  = t->n_threads;
            params.n_ctx      = ctx_needed(tests, n_tests);
            params.n_batch    = 512;   // llama-bench's n_ubatch
            params.flash_attn = t->flash_attn;
            s = mg_session_new(m, params);
            if (s == NULL) {
                ok = false;
                break;
            }
            cur_threads = t->n_threads;
            cur_fa      = t->flash_attn;
            cur_depth   = -1;
        }
        if (t->n_depth != cur_depth) {
            ok = fill_depth(s, t->n_depth, m->hp.n_vocab);
            cur_depth = t->n_depth;
        }
        ok = ok && run_once(s, t, tokens) > 0;   // warm-up: pages mapped, graphs built, caches warm
        for (int r = 0; r < reps && ok; r++) {
            tps[r] = run_once(s, t, tokens);
            ok     = tps[r] > 0;
        }
        if (ok) results[i] = summarize(tps, reps);
    }
    mg_session_free(s);
    free(tps);
    free(tokens);
    return ok;
}

// ---------------------------------------------------------------------------
// llama.cpp's side: llama-bench run on the same file, its CSV read back
// ---------------------------------------------------------------------------

static void join_list(const int * v, int n, char * out, size_t size) {
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < n && used < size; i++) used += (size_t) snprintf(out + used, size - used, i ? ",%d" : "%d", v[i]);
}

// Each CSV row of llama-bench's output (cli_llama_bench_csv_next): its mean
// t/s into theirs[] at the index of the matching test. Returns the rows whose
// avg_ts was not a usable number.
static int read_llama_bench_csv(char * text, const struct bench_test * tests, int n_tests, double * theirs) {
    struct llama_bench_csv csv;
    struct llama_bench_row row;
    int                    n_bad = 0;
    if (!cli_llama_bench_csv_begin(&csv, text)) return 0;
    while (cli_llama_bench_csv_next(&csv, &row)) {
        for (int i = 0; i < n_tests; i++) {
            const struct bench_test * x = &tests[i];
            if (row.n_prompt == x->n_prompt && row.n_gen == x->n_gen && row.n_depth == x->n_depth &&
                row.n_threads == x->n_threads && row.flash_attn == x->flash_attn) {
                if (row.usable) theirs[i] = row.avg_ts;
                else n_bad++;
            }
        }
    }
    return n_bad;
}

// Run llama-bench with our tests' lists on one model (an argv, no shell:
// cli_run_child) and put each row's mean t/s into theirs[] at the index of
// the matching test. False, with the reason printed, when it fails, hangs,
// prints nothing usable or leaves one of our tests without a row.
static bool run_llama_bench(const char * exe, const char * model, const struct bench_lists * l,
                            const struct bench_test * tests, int n_tests, int reps, const char * kv, int n_gpu_layers,
                            const char * device, double timeout_s, double * theirs) {
    char p[256], n[256], d[256], t[256], fa[64], r[16], ngl[16];
    join_list(l->prompt, l->n_prompt, p, sizeof(p));
    join_list(l->gen, l->n_gen, n, sizeof(n));
    join_list(l->depth, l->n_depth, d, sizeof(d));
    join_list(l->threads, l->n_threads, t, sizeof(t));
    join_list(l->fa, l->n_fa, fa, sizeof(fa));
    snprintf(r, sizeof(r), "%d", reps);
    snprintf(ngl, sizeof(ngl), "%d", n_gpu_layers);
    char * const argv[] = {(char *) exe, "-m", (char *) model, "-p", p, "-n", n, "-d", d, "-t", t, "-fa", fa,
                           "-r", r, "-ctk", (char *) kv, "-ctv", (char *) kv, "-ngl", ngl, "-o", "csv",
                           device != NULL ? "-dev" : NULL, (char *) device, NULL};
    for (int i = 0; i < n_tests; i++) theirs[i] = -1.0;
    struct cli_child c;
    if (!cli_run_child("bench", argv, timeout_s, 64u << 20, &c)) {
        cli_child_free(&c);
        return false;
    }
    const bool said_nothing = c.len == 0;
    const int  n_bad        = read_llama_bench_csv(c.out, tests, n_tests, theirs);
    const int  status       = c.status;
    cli_child_free(&c);
    for (int i = 0; i < n_tests; i++) {
        if (theirs[i] < 0) {
            char name[48];
            test_name(&tests[i], name, sizeof(name));
            fprintf(stderr, "mg bench: llama-bench gave no result for %s at %d threads (exit status %d; %s) from %s\n",
                    mg_quote(name), tests[i].n_threads, status,
                    said_nothing ? "it printed nothing on stdout"
                    : n_bad > 0  ? "its avg_ts was not a number in (0, 1e9)"
                                 : "its CSV has no row for it",
                    mg_quote(exe));
            return false;
        }
    }
    return true;
}

// ---------------------------------------------------------------------------
// Figures from elsewhere: another time's baseline, the machine's bandwidth
// ---------------------------------------------------------------------------

struct baseline {
    char   model[128];
    char   test[32];
    int    threads;
    double tps;
};

enum { MAX_BASELINES = 256 };
static struct baseline baselines[MAX_BASELINES];
static int             n_baselines = 0;

// A small text file of figures, opened: NULL for anything but a regular file
// of at most 1 MiB (/dev/zero would feed fgets empty lines forever).
static FILE * open_figures(const char * path) {
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > (1 << 20)) return NULL;
    return fopen(path, "r");
}

// False when the file cannot be read (a directory: fgets fails with EISDIR),
// or holds no usable line: a reference that silently adds nothing is a wrong
// table. More figures than MAX_BASELINES are refused (said here), not cut:
// the rows past the limit would print without their reference.
static bool load_baselines(const char * cmd, const char * path, bool * too_many) {
    FILE * f = open_figures(path);
    if (f == NULL) return false;
    char line[512];
    struct baseline b;
    while (fgets(line, sizeof(line), f)) {
        if (line[0] == '#' || sscanf(line, "%127s %31s %d %lf", b.model, b.test, &b.threads, &b.tps) != 4 ||
            !cli_rate_usable(b.tps)) {
            continue;
        }
        if (n_baselines == MAX_BASELINES) {
            fprintf(stderr, "mg %s: --baseline %s: more than %d figures; at most %d are read\n", cmd, mg_quote(path),
                    MAX_BASELINES, MAX_BASELINES);
            *too_many = true;
            break;
        }
        baselines[n_baselines++] = b;
    }
    const bool ok = !ferror(f) && n_baselines > 0 && !*too_many;
    fclose(f);
    return ok;
}

static const struct baseline * find_baseline(const char * model, const char * test, int threads) {
    for (int i = 0; i < n_baselines; i++) {
        if (strcmp(baselines[i].model, model) == 0 && strcmp(baselines[i].test, test) == 0 &&
            baselines[i].threads == threads) {
            return &baselines[i];
        }
    }
    return NULL;
}

static double bandwidth_gbs[MAX_LIST + 1];   // by thread count; 0 = not measured

// tools/bandwidth's output: lines "threads GB/s" (others are comments).
static bool load_bandwidth(const char * path) {
    FILE * f = open_figures(path);
    if (f == NULL) return false;
    char line[256];
    int threads, n = 0;
    double gbs;
    while (fgets(line, sizeof(line), f)) {
        if (line[0] != '#' && sscanf(line, "%d %lf", &threads, &gbs) == 2 && threads >= 1 && threads <= MAX_LIST &&
            cli_rate_usable(gbs)) {
            bandwidth_gbs[threads] = gbs;
            n++;
        }
    }
    const bool ok = !ferror(f) && n > 0;   // as load_baselines: nothing usable is an error
    fclose(f);
    return ok;
}

// ---------------------------------------------------------------------------
// The table
// ---------------------------------------------------------------------------

struct bench_row {
    const char * model;   // file name
    double       weight_bytes;   // all of the model's weights
    double       decode_bytes;   // those one decode step reads (decode_weight_bytes)
    struct bench_test test;
    double ours[MAX_ROUNDS], theirs[MAX_ROUNDS];
    double ours_sd;       // of the last round (the only one without --llama-bench)
};

static const char * base_name(const char * path) {
    const char * slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

// The decode bound: generating a token reads every weight once (an MoE
// model: its chosen experts' only), so weights/s over the machine's read
// bandwidth is how close decode gets.
static void print_weight_rate(const struct bench_row * r, double tps) {
    if (r->test.n_gen == 0) {
        printf(" %10s |", "");
        return;
    }
    const double gbs = r->decode_bytes * tps / 1e9;
    const double bw  = r->test.n_threads <= MAX_LIST ? bandwidth_gbs[r->test.n_threads] : 0.0;
    if (bw > 0) {
        printf(" %5.1f GB/s %3.0f%% |", gbs, 100.0 * gbs / bw);
    } else {
        printf(" %5.1f GB/s |", gbs);
    }
}

static void print_header(bool race, bool bw) {
    printf("| %-26s | %10s | %-14s | %2s | %2s | %19s | %*s |", "model", "weights", "test", "t", "fa", race ? "ours t/s" : "t/s",
           bw ? 15 : 10, "weights/s");
    if (race) printf(" %10s | %6s | %13s |", "llama.cpp", "ratio", "ratio min-max");
    if (!race && n_baselines > 0) printf(" %16s |", "reference t/s *");
    printf("\n|----------------------------|-----------:|----------------|---:|---:|--------------------:|%s|",
           bw ? "----------------:" : "-----------:");
    if (race) printf("-----------:|-------:|--------------:|");
    if (!race && n_baselines > 0) printf("-----------------:|");
    printf("\n");
}

static void print_row(const struct bench_row * r, int n_rounds, bool race) {
    char name[48];
    test_name(&r->test, name, sizeof(name));
    double ours[MAX_ROUNDS];
    for (int i = 0; i < n_rounds; i++) ours[i] = r->ours[i];
    const struct measurement mo = summarize(ours, n_rounds);
    printf("| %-26s | %6.1f MiB | %-14s | %2d | %2d | %9.2f ± %7.2f |", r->model, r->weight_bytes / (1024.0 * 1024.0), name,
           r->test.n_threads, r->test.flash_attn ? 1 : 0, mo.mean, race ? mo.stddev : r->ours_sd);
    print_weight_rate(r, mo.mean);
    if (race) {
        double theirs_sum = 0, lo = INFINITY, hi = 0;
        for (int i = 0; i < n_rounds; i++) {
            const double ratio = r->ours[i] / r->theirs[i];
            theirs_sum += r->theirs[i];
            lo = ratio < lo ? ratio : lo;
            hi = ratio > hi ? ratio : hi;
        }
        const double theirs = theirs_sum / n_rounds;
        printf(" %10.2f | %5.2fx | %5.2f-%5.2fx |", theirs, mo.mean / theirs, lo, hi);
    } else if (n_baselines > 0) {
        const struct baseline * b = r->test.n_depth == 0 && !r->test.flash_attn
                                        ? find_baseline(r->model, name, r->test.n_threads) : NULL;
        if (b != NULL) {
            printf(" %16.2f |", b->tps);
        } else {
            printf(" %16s |", "");
        }
    }
    printf("\n");
    fflush(stdout);
}

// ---------------------------------------------------------------------------
// The command
// ---------------------------------------------------------------------------

struct bench_opts {
    const char * prompt, * gen, * depth, * threads, * fa, * kv, * baseline, * bandwidth, * llama_bench;
    int    reps, rounds;
    bool   no_repack;
    bool   no_huge_pages;
    double rival_timeout;   // seconds
    int          n_gpu_layers;   // -ngl, for both engines
    const char * device;         // -dev
};

// -m may repeat: collect every one before handing the rest to the parser.
// More than MAX_MODELS (the 17th went to the parser, which kept the last),
// or an empty name, is -1 after saying so.
static int take_models(const char * cmd, int argc, char ** argv, const char ** models, char ** rest, int * n_rest) {
    int n_models = 0;
    *n_rest = 0;
    for (int i = 0; i < argc; i++) {
        if ((strcmp(argv[i], "-m") == 0 || strcmp(argv[i], "--model") == 0) && i + 1 < argc) {
            if (n_models == MAX_MODELS || argv[i + 1][0] == '\0') {
                fprintf(stderr, n_models == MAX_MODELS ? "mg %s: more than %d models (-m); at most %d in one run\n"
                                                       : "mg %s: -m '': an empty name, not a file\n", cmd,
                        MAX_MODELS, MAX_MODELS);
                return -1;
            }
            models[n_models++] = argv[++i];
        } else {
            rest[(*n_rest)++] = argv[i];
        }
    }
    return n_models;
}

static bool parse_lists(const char * cmd, const struct bench_opts * o, struct bench_lists * l) {
    const struct {
        const char * flag, * text;
        int * out, * n;
        long lo, hi;
    } lists[] = {
        {"-p", o->prompt, l->prompt, &l->n_prompt, 0, MAX_TOKENS},
        {"-n", o->gen, l->gen, &l->n_gen, 0, MAX_TOKENS},
        {"-d", o->depth, l->depth, &l->n_depth, 0, MAX_TOKENS},
        {"-t", o->threads, l->threads, &l->n_threads, 1, 512},
        {"-fa", o->fa, l->fa, &l->n_fa, 0, 1},
    };
    for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
        *lists[i].n = cli_parse_int_list(lists[i].text, lists[i].out, MAX_LIST, lists[i].lo, lists[i].hi);
        if (*lists[i].n <= 0) {
            fprintf(stderr, "mg %s: %s %s: need a comma list of at most %d whole numbers in %ld..%ld\n", cmd,
                    lists[i].flag, mg_quote(lists[i].text), MAX_LIST, lists[i].lo, lists[i].hi);
            return false;
        }
    }
    return true;
}

// Everything a bench run holds: its options, models, tests and table.
struct bench_run {
    struct bench_opts  o;
    const char *       models[MAX_MODELS];
    int                n_models;
    struct bench_lists lists;
    struct bench_test  tests[MAX_TESTS];
    int                n_tests;
    struct mg_session_params base;   // what every test's session starts from: --kv-type, -ngl, -dev
    bool               race, have_bw;
    int                n_rounds;
    struct bench_row * rows;   // [n_models * n_tests]
};

// The options, their lists and tests, and the figures from files. False after printing why.
static bool bench_parse(const char * cmd, int argc, char ** argv, struct bench_run * b) {
    struct bench_opts * o             = &b->o;
    float               rival_timeout = (float) o->rival_timeout;
    const char *        model         = NULL;
    char **             rest          = malloc((size_t) argc * sizeof(char *));
    int                 n_rest;
    b->n_models = take_models(cmd, argc, argv, b->models, rest, &n_rest);
    if (b->n_models < 0) {
        free(rest);
        return false;
    }
    const struct cli_option opts[] = {
        {"-m", "--model", CLI_IN_FILE, &model, "a GGUF model (repeat for several)"},
        {"-p", "--n-prompt", CLI_STRING, &o->prompt, "prompt sizes for ppN, comma-separated (default 64; 0 = none)"},
        {"-n", "--n-gen", CLI_STRING, &o->gen, "generation lengths for tgN (default 64; 0 = none)"},
        {"-d", "--n-depth", CLI_STRING, &o->depth, "cache depths the tests start from (default 0)"},
        {"-t", "--threads", CLI_STRING, &o->threads, "thread counts (default 1,2)"},
        {"-fa", "--flash-attn", CLI_STRING, &o->fa, "flash attention off/on: 0, 1 or 0,1 (default 0)"},
        {"-r", "--repetitions", CLI_INT, &o->reps, "timed runs per test (default 5)"},
        {NULL, "--kv-type", CLI_STRING, &o->kv, "KV cache type: f16 (default) or f32"},
        {"-ngl", "--n-gpu-layers", CLI_INT, &o->n_gpu_layers, "layers on a GPU device, ours and llama-bench's (default 0)"},
        {"-dev", "--device", CLI_STRING, &o->device, "the GPU device for -ngl, by name (mg --list-devices)"},
        {NULL, "--bandwidth", CLI_IN_FILE, &o->bandwidth, "read bandwidth per thread count, from tools/bandwidth"},
        {NULL, "--llama-bench", CLI_IN_FILE, &o->llama_bench, "race this llama-bench on the same files"},
        {NULL, "--rounds", CLI_INT, &o->rounds, "rounds of the race, ours then theirs (default 3)"},
        {NULL, "--rival-timeout", CLI_FLOAT, &rival_timeout, "seconds one llama-bench run may take before it is killed (default 3600)"},
        {NULL, "--baseline", CLI_IN_FILE, &o->baseline, "figures from another time (model test threads t/s)"},
        {NULL, "--no-repack", CLI_FLAG, &o->no_repack, "keep Q4_0/Q4_K/Q2_K weights as in the file (no 8-row repacking)"},
        {NULL, "--no-huge-pages", CLI_FLAG, &o->no_huge_pages, "read the weights from the file's mapping (no copy into huge pages)"},
    };
    const char * positional[1];
    int          n_positional;
    const bool   parsed = cli_parse(n_rest, rest, usage, opts, (int) (sizeof(opts) / sizeof(opts[0])), positional, 0,
                                    &n_positional);
    free(rest);
    if (!parsed || !parse_lists(cmd, o, &b->lists) ||
        !cli_race_options(cmd, "--llama-bench", o->llama_bench, MAX_ROUNDS, &o->rounds, &rival_timeout)) {
        return false;
    }
    o->rival_timeout = rival_timeout;
    if (b->n_models == 0) {
        fprintf(stderr, "mg %s: need -m MODEL\n", cmd);
        return false;
    }
    if (o->reps < 1 || o->reps > 1000) {
        fprintf(stderr, "mg %s: -r %d: must be in 1..1000\n", cmd, o->reps);
        return false;
    }
    if (strcmp(o->kv, "f16") != 0 && strcmp(o->kv, "f32") != 0) {
        fprintf(stderr, "mg %s: --kv-type '%s': f16 or f32\n", cmd, mg_quote(o->kv));
        return false;
    }
    b->n_tests = make_tests(&b->lists, b->tests);
    if (b->n_tests == 0) {
        fprintf(stderr, "mg %s: -p and -n are all 0: nothing to measure\n", cmd);
        return false;
    }
    return true;
}

// --baseline and --bandwidth read, and what the run will print. False after printing why.
static bool bench_set_up(const char * cmd, struct bench_run * b) {
    const struct bench_opts * o = &b->o;
    struct cli_engine_opts e = cli_engine_defaults();   // -ngl and -dev checked as every command checks them
    e.model        = b->models[0];
    e.n_gpu_layers = o->n_gpu_layers;
    e.device       = o->device;
    if (!cli_engine_setup(cmd, &e)) return false;
    b->base         = cli_session_params(&e);
    b->base.kv_type = strcmp(o->kv, "f32") == 0 ? MG_TYPE_F32 : MG_TYPE_F16;
    bool too_many = false;
    if (o->baseline != NULL && !load_baselines(cmd, o->baseline, &too_many)) {
        if (too_many) return false;   // said
        fprintf(stderr, "mg %s: --baseline %s: not a text file of at most 1 MiB, or no line \"model test threads t/s\" in it\n", cmd,
                mg_quote(o->baseline));
        return false;
    }
    if (o->bandwidth != NULL && !load_bandwidth(o->bandwidth)) {
        fprintf(stderr, "mg %s: --bandwidth %s: not a text file of at most 1 MiB, or no line \"threads GB/s\" (GB/s > 0) in it\n", cmd,
                mg_quote(o->bandwidth));
        return false;
    }
    b->race     = o->llama_bench != NULL;
    b->n_rounds = b->race ? o->rounds : 1;
    for (int t = 1; t <= MAX_LIST; t++) b->have_bw = b->have_bw || bandwidth_gbs[t] > 0;
    b->rows = calloc((size_t) b->n_models * (size_t) b->n_tests, sizeof(struct bench_row));
    if (b->rows == NULL) fprintf(stderr, "mg %s: out of memory\n", cmd);
    return b->rows != NULL;
}

// The warnings a model's load deserves, once (on stderr: the table stays llama-bench's).
static void bench_warn(const char * cmd, const struct bench_run * b, const char * path, const struct mg_model * m) {
    const int need = ctx_needed(b->tests, b->n_tests);
    if (need > m->hp.n_ctx_train) {   // as the other commands warn about -c (llama.cpp too)
        fprintf(stderr, "mg %s: warning: %s: the tests need %d positions (-d + -p or -n), more than the %d the "
                        "model was trained with: possible training context overflow\n", cmd, mg_quote(path), need,
                m->hp.n_ctx_train);
    }
    if (m->n_repacked > 0) {
        fprintf(stderr, "mg %s: %s: %d Q4_0/Q4_K/Q2_K matrices repacked in groups of 8 rows (%.2f MiB; --no-repack to compare)\n",
                cmd, mg_quote(path), m->n_repacked, mg_mib(m->n_repacked_bytes));
    }
}

// The weight bytes one decode step reads: every weight, except that of each
// layer's expert stacks a token reads only its n_expert_used experts
// (mul_mat_id skips the others), so an MoE model's bound is set by its
// active weights, not its size.
static double decode_weight_bytes(const struct mg_model * m) {
    double bytes = (double) m->n_weight_bytes;
    if (m->hp.n_expert == 0) return bytes;
    for (int il = 0; il < m->hp.n_layer; il++) {
        const struct mg_layer * l   = &m->layers[il];
        const double            one = (double) (l->ffn_gate_exps->nb[2] + l->ffn_up_exps->nb[2] + l->ffn_down_exps->nb[2]);
        bytes -= (double) (m->hp.n_expert - m->hp.n_expert_used) * one;
    }
    return bytes;
}

// One model in one round: our tests, then (racing) llama-bench's, into its
// rows of the table (printed at once when not racing). False after printing why.
static bool bench_one_model(const char * cmd, struct bench_run * b, int mi, int round, struct measurement * ours,
                            double * theirs) {
    const char *      path = b->models[mi];
    struct mg_model * m    = cli_load_model(cmd, path, !b->o.no_repack, !b->o.no_huge_pages, NULL);
    if (m == NULL) return false;
    if (round == 0) bench_warn(cmd, b, path, m);
    const bool   ok           = bench_model(m, b->tests, b->n_tests, b->o.reps, &b->base, ours);
    const double weight_bytes = (double) m->n_weight_bytes, decode_bytes = decode_weight_bytes(m);
    mg_model_free(m);
    if (!ok) {
        fprintf(stderr, "mg %s: %s: %s\n", cmd, mg_quote(path), cli_last_error());
        return false;
    }
    if (b->race && !run_llama_bench(b->o.llama_bench, path, &b->lists, b->tests, b->n_tests, b->o.reps, b->o.kv,
                                    b->o.n_gpu_layers, b->o.device, b->o.rival_timeout, theirs)) {
        return false;
    }
    for (int i = 0; i < b->n_tests; i++) {
        struct bench_row * r = &b->rows[mi * b->n_tests + i];
        r->model        = base_name(path);
        r->weight_bytes = weight_bytes;
        r->decode_bytes = decode_bytes;
        r->test         = b->tests[i];
        r->ours[round]  = ours[i].mean;
        r->ours_sd      = ours[i].stddev;
        if (b->race) r->theirs[round] = theirs[i];
        else print_row(r, 1, false);
    }
    if (b->race) fprintf(stderr, "mg %s: round %d of %d: %s done\n", cmd, round + 1, b->n_rounds,
                         mg_quote(base_name(path)));
    return true;
}

// After the last round: the race's table, or the note a baseline needs.
static void bench_print_end(const struct bench_run * b) {
    if (b->race) {
        print_header(true, b->have_bw);
        for (int i = 0; i < b->n_models * b->n_tests; i++) print_row(&b->rows[i], b->n_rounds, true);
        printf("\nours and llama.cpp's measured in turn on the same files, %d round%s of -r %d each; ratio = ours / "
               "llama.cpp's mean, min-max over the rounds\n", b->n_rounds, b->n_rounds == 1 ? "" : "s", b->o.reps);
    } else if (n_baselines > 0) {
        printf("\n* reference: llama.cpp measured at another time (%s), a reference from another machine state, "
               "not a ratio: this machine's speed varies up to 2x from day to day; set LLAMA_BENCH to race it in the "
               "same run\n", b->o.baseline);
    }
}

int cmd_bench(int argc, char ** argv) {
    const char *             cmd = "bench";
    static struct bench_run  b;   // large: not on the stack
    b = (struct bench_run) {.o = {"64", "64", "0", "1,2", "0", "f16", NULL, NULL, NULL, 5, CLI_ROUNDS_UNSET, false, false,
                                   CLI_RIVAL_TIMEOUT_UNSET, 0, NULL}};
    if (!bench_parse(cmd, argc, argv, &b) || !bench_set_up(cmd, &b)) {
        free(b.rows);
        return 1;
    }
    struct measurement * ours   = malloc((size_t) b.n_tests * sizeof(struct measurement));
    double *             theirs = malloc((size_t) b.n_tests * sizeof(double));
    bool                 ok     = ours != NULL && theirs != NULL;
    if (ok && !b.race) print_header(false, b.have_bw);   // rows stream as they are measured
    for (int round = 0; ok && round < b.n_rounds; round++) {
        for (int mi = 0; ok && mi < b.n_models; mi++) ok = bench_one_model(cmd, &b, mi, round, ours, theirs);
    }
    if (ok) bench_print_end(&b);
    free(b.rows);
    free(ours);
    free(theirs);
    return ok ? 0 : 1;
}
