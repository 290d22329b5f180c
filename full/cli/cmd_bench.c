//@file full
// cmd_bench.c - mg bench: tokens per second, measured the way llama-bench
// measures them, so the two can be put side by side.
#define _POSIX_C_SOURCE 200809L   // setenv
#include "cli.h"
#include "gguf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char * usage =
    "usage: mg bench -m MODEL.gguf [-m MODEL2.gguf ...] [-p 64] [-n 64] [-t 1,2] [-r 5] [--kv-type f16]\n"
    "\n"
    "For every model and thread count: ppN evaluates an N-token prompt as one batch into an empty\n"
    "cache, tgN generates N tokens one at a time; each is run once to warm up, then -r times.\n"
    "Prints a markdown table of mean +- standard deviation in tokens per second, and for generation\n"
    "the weight bandwidth it implies (weight bytes read per token x tokens per second), to hold\n"
    "against the machine's memory bandwidth.";

#define MAX_MODELS    16
#define MAX_THREADS   16
#define MAX_BASELINES 256

// Another engine's figures to compare with: "model test threads tokens/s" per line.
struct baseline {
    char   model[128];
    char   test[16];
    int    threads;
    double tps;
};
static struct baseline baselines[MAX_BASELINES];
static int             n_baselines = 0;

static bool load_baselines(const char * path) {
    FILE * f = fopen(path, "r");
    if (f == NULL) return false;
    char line[512];
    while (fgets(line, sizeof(line), f) && n_baselines < MAX_BASELINES) {
        struct baseline * b = &baselines[n_baselines];
        if (line[0] != '#' && sscanf(line, "%127s %15s %d %lf", b->model, b->test, &b->threads, &b->tps) == 4) {
            n_baselines++;
        }
    }
    fclose(f);
    return true;
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

// "1,2,4" -> {1, 2, 4}
static int parse_list(const char * text, int * out, int max) {
    int n = 0;
    for (const char * p = text; *p && n < max;) {
        char * end;
        const long v = strtol(p, &end, 10);
        if (end == p || v < 1 || v > 512 || (*end != ',' && *end != '\0')) return -1;
        out[n++] = (int) v;
        p = *end == ',' ? end + 1 : end;
    }
    return n;
}

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

// One timed run: pp evaluates n tokens at once, tg n tokens one by one. Tokens/s.
static double run_once(struct mg_session * s, const int32_t * tokens, int n, bool batch) {
    mg_session_rewind(s, 0);
    const double t0 = cli_now_ms();
    if (batch) {
        if (!mg_decode(s, tokens, n, false)) return -1.0;
    } else {
        for (int i = 0; i < n; i++) {
            if (!mg_decode(s, &tokens[i], 1, false)) return -1.0;
        }
    }
    return 1e3 * n / (cli_now_ms() - t0);
}

static bool bench_one(struct mg_model * m, const char * path, int n_threads, int n_prompt, int n_gen, int reps,
                      enum mg_type kv_type) {
    struct mg_session_params params = mg_session_default_params();
    params.n_threads = n_threads;
    params.n_ctx     = 512;
    params.n_batch   = 512;
    params.kv_type   = kv_type;
    struct mg_session * s = mg_session_new(m, params);
    if (s == NULL) return false;
    const int n_max = n_prompt > n_gen ? n_prompt : n_gen;
    int32_t * tokens = malloc((size_t) n_max * sizeof(int32_t));
    for (int i = 0; i < n_max; i++) tokens[i] = (int32_t) ((i * 7919 + 11) % m->hp.n_vocab);   // any tokens will do
    double * tps = malloc((size_t) reps * sizeof(double));
    const char * name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    for (int test = 0; test < 2; test++) {
        const bool batch = test == 0;
        const int  n     = batch ? n_prompt : n_gen;
        if (n <= 0) continue;
        run_once(s, tokens, n, batch);   // warm-up: pages mapped, graphs built, caches warm
        for (int r = 0; r < reps; r++) tps[r] = run_once(s, tokens, n, batch);
        const struct measurement mt = summarize(tps, reps);
        char test_name[16];
        snprintf(test_name, sizeof(test_name), "%s%d", batch ? "pp" : "tg", n);
        printf("| %-28s | %8.2f MiB | %-6s | %2d | %9.2f ± %7.2f |", name,
               (double) m->n_weight_bytes / (1024.0 * 1024.0), test_name, n_threads, mt.mean, mt.stddev);
        if (batch) {
            printf("           |");
        } else {
            printf(" %6.1f GB/s |", (double) m->n_weight_bytes * mt.mean / 1e9);
        }
        if (n_baselines > 0) {
            const struct baseline * b = find_baseline(name, test_name, n_threads);
            if (b != NULL) {
                printf(" %9.2f | %5.2fx |", b->tps, mt.mean / b->tps);
            } else {
                printf(" %9s | %6s |", "", "");
            }
        }
        printf("\n");
        fflush(stdout);
    }
    free(tps);
    free(tokens);
    mg_session_free(s);
    return true;
}

int cmd_bench(int argc, char ** argv) {
    const char * cmd = "bench";
    const char * models[MAX_MODELS];
    int          n_models = 0;
    const char * model = NULL, * threads_text = "1,2", * kv_text = "f16", * baseline_path = NULL;
    int n_prompt = 64, n_gen = 64, reps = 5;
    bool no_repack = false;
    // -m may repeat: collect every one before handing the rest to the parser.
    char ** rest = malloc((size_t) argc * sizeof(char *));
    int     n_rest = 0;
    for (int i = 0; i < argc; i++) {
        if ((strcmp(argv[i], "-m") == 0 || strcmp(argv[i], "--model") == 0) && i + 1 < argc && n_models < MAX_MODELS) {
            models[n_models++] = argv[++i];
        } else {
            rest[n_rest++] = argv[i];
        }
    }
    const struct cli_option opts[] = {
        {"-m", "--model", CLI_STRING, &model, "a GGUF model (repeat for several)"},
        {"-p", "--n-prompt", CLI_INT, &n_prompt, "prompt tokens for ppN (default 64; 0 = skip)"},
        {"-n", "--n-gen", CLI_INT, &n_gen, "generated tokens for tgN (default 64; 0 = skip)"},
        {"-t", "--threads", CLI_STRING, &threads_text, "thread counts, comma-separated (default 1,2)"},
        {"-r", "--repetitions", CLI_INT, &reps, "timed runs per test (default 5)"},
        {NULL, "--kv-type", CLI_STRING, &kv_text, "KV cache type: f16 (default) or f32"},
        {NULL, "--baseline", CLI_STRING, &baseline_path, "another engine's figures (model test threads t/s)"},
        {NULL, "--no-repack", CLI_FLAG, &no_repack, "keep Q4_0/Q4_K weights as in the file (no 8-row repacking)"},
    };
    const char * positional[1];
    int n_positional;
    const bool parsed = cli_parse(n_rest, rest, usage, opts, (int) (sizeof(opts) / sizeof(opts[0])), positional, 0,
                                  &n_positional);
    free(rest);
    if (!parsed) return 1;
    int threads[MAX_THREADS];
    const int n_threads = parse_list(threads_text, threads, MAX_THREADS);
    if (n_models == 0 || n_threads <= 0 || reps < 1 || n_prompt < 0 || n_gen < 0 || n_prompt > 512 || n_gen > 512 ||
        (strcmp(kv_text, "f16") != 0 && strcmp(kv_text, "f32") != 0)) {
        fprintf(stderr, "mg %s: need -m MODEL, -t like 1,2, -r >= 1, -p and -n in 0..512, --kv-type f16|f32\n", cmd);
        return 1;
    }
    const enum mg_type kv_type = strcmp(kv_text, "f32") == 0 ? MG_TYPE_F32 : MG_TYPE_F16;
    if (no_repack) setenv("MG_NO_REPACK", "1", 1);   // read by the loader (repack.h)
    if (baseline_path != NULL && !load_baselines(baseline_path)) {
        fprintf(stderr, "mg %s: cannot read the baseline %s\n", cmd, baseline_path);
        return 1;
    }
    printf("| %-28s | %12s | %-6s | %2s | %19s | %11s |", "model", "weights", "test", "t", "t/s", "weights/s");
    if (n_baselines > 0) printf(" %9s | %6s |", "baseline", "ratio");
    printf("\n|------------------------------|-------------:|--------|---:|--------------------:|------------:|");
    if (n_baselines > 0) printf("----------:|-------:|");
    printf("\n");
    for (int i = 0; i < n_models; i++) {
        struct mg_model * m = cli_load_model(cmd, models[i], NULL);
        if (m == NULL) return 1;
        if (m->n_repacked > 0) {   // on stderr: the table stays llama-bench's
            fprintf(stderr, "mg %s: %s: %d Q4_0/Q4_K matrices repacked in groups of 8 rows (%.2f MiB; --no-repack to compare)\n",
                    cmd, models[i], m->n_repacked, (double) m->n_repacked_bytes / (1024.0 * 1024.0));
        }
        for (int t = 0; t < n_threads; t++) {
            if (!bench_one(m, models[i], threads[t], n_prompt, n_gen, reps, kv_type)) {
                fprintf(stderr, "mg %s: %s\n", cmd, mg_last_error());
                return 1;
            }
        }
        mg_model_free(m);
    }
    return 0;
}
