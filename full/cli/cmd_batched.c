//@file full
// cmd_batched.c - many sequences at once: mg batched-bench measures what
// decoding N sequences in one batch costs (llama.cpp's llama-batched-bench,
// same table), and mg parallel completes N prompts at once (llama-parallel).
//
// Why it is nearly free: one decode step of one sequence reads every weight
// once to multiply it by one column; N sequences are N columns of the same
// matrix product, and the weights are read once for all of them. Only
// attention is per sequence (each token attends to its own sequence's cells,
// which the mask selects: session.h, mg_decode_batch).
#define _POSIX_C_SOURCE 200809L   // clock_gettime (timeline.h)
#include "cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_LIST = 16, MAX_PARALLEL = 64 };

// Any tokens will do for a benchmark (llama-batched-bench draws them at random).
static int32_t bench_token(int i, int n_vocab) {
    return (int32_t) (((long long) i * 7919 + 11) % n_vocab);
}

// ---------------------------------------------------------------------------
// mg batched-bench
// ---------------------------------------------------------------------------

static const char * bb_usage =
    "usage: mg batched-bench -m MODEL.gguf [-npp 128] [-ntg 128] [-npl 1,2,4,8,16] [-pps] [-t N] [-c N] [-fa]\n"
    "\n"
    "For every prompt size PP, generation length TG and parallel level B (comma lists): B sequences\n"
    "of PP prompt tokens are evaluated in one batch (-pps: one prompt shared by all B, stored once),\n"
    "then TG steps each decode one token of every sequence in one batch of B. Prints\n"
    "llama-batched-bench's table: the times and speeds of the prompt (S_PP), of generation (S_TG,\n"
    "all B sequences together) and of both (S).\n"
    "\n"
    "--llama-batched-bench PATH races llama.cpp's llama-batched-bench on the same file in the same\n"
    "run: --rounds times ours then theirs (same -npp/-ntg/-npl/-t/-c/-fa, F16 K/V), then one table\n"
    "of S_PP and S_TG for both, the ratio of the means and its min-max over the rounds.";

struct bb_case {
    int pp, tg, pl;
    bool shared;
};

// What one row measured: prompt and generation speed (t/s, all sequences together).
struct bb_speed {
    double s_pp, s_tg;
};

// Fill the batch arrays for B prompts of pp tokens (or one, shared), each keeping its last logits.
static int bb_prompt_batch(const struct bb_case * c, int n_vocab, int32_t * tok, int32_t * pos, int32_t * seq,
                           bool * keep) {
    int n = 0;
    for (int j = 0; j < (c->shared ? 1 : c->pl); j++) {
        for (int i = 0; i < c->pp; i++, n++) {
            tok[n] = bench_token(n, n_vocab), pos[n] = i, seq[n] = j, keep[n] = i == c->pp - 1;
        }
    }
    return n;
}

// One row of the table (printed unless quiet, its speeds in *out): returns false after printing why.
static bool bb_run(struct mg_session * s, const struct bb_case * c, int n_vocab, bool quiet, struct bb_speed * out) {
    const int n_max = (c->shared ? 1 : c->pl) * c->pp + c->pl;
    int32_t * tok  = malloc((size_t) n_max * sizeof(int32_t));
    int32_t * pos  = malloc((size_t) n_max * sizeof(int32_t));
    int32_t * seq  = malloc((size_t) n_max * sizeof(int32_t));
    bool *    keep = malloc((size_t) n_max);
    MG_ASSERT(tok && pos && seq && keep);
    mg_session_seq_rm(s, -1, 0, -1);   // an empty cache
    bool ok = true;
    const int n_prompt = bb_prompt_batch(c, n_vocab, tok, pos, seq, keep);
    const double t0 = mg_time_ms();
    ok = mg_decode_batch(s, &(struct mg_batch) {n_prompt, tok, pos, seq, keep});
    const double t1 = mg_time_ms();
    for (int j = 1; ok && c->shared && j < c->pl; j++) mg_session_seq_cp(s, 0, j, -1, -1);
    for (int i = 0; ok && i < c->tg; i++) {   // the pattern 0123 0123 ...: one token of every sequence per batch
        for (int j = 0; j < c->pl; j++) {
            tok[j] = bench_token(i * c->pl + j + 1, n_vocab), pos[j] = c->pp + i, seq[j] = j, keep[j] = true;
        }
        ok = mg_decode_batch(s, &(struct mg_batch) {c->pl, tok, pos, seq, keep});
    }
    const double t2 = mg_time_ms();
    if (ok) {
        const int    n_kv = (c->shared ? c->pp : c->pl * c->pp) + c->pl * c->tg;
        const double t_pp = (t1 - t0) / 1e3, t_tg = (t2 - t1) / 1e3, t = t_pp + t_tg;
        const double s_pp = (c->shared ? c->pp : c->pl * c->pp) / t_pp;
        const double s_tg = c->tg > 0 ? c->pl * c->tg / t_tg : 0.0;
        *out = (struct bb_speed) {s_pp, s_tg};
        if (!quiet) {
            printf("|%6d | %6d | %4d | %6d | %8.3f | %8.2f | %8.3f | %8.2f | %8.3f | %8.2f |\n", c->pp, c->tg, c->pl,
                   n_kv, t_pp, s_pp, t_tg, s_tg, t, n_kv / t);
            fflush(stdout);
        }
    } else {
        fprintf(stderr, "mg batched-bench: PP %d, TG %d, B %d: %s\n", c->pp, c->tg, c->pl, mg_last_error());
    }
    free(tok);
    free(pos);
    free(seq);
    free(keep);
    return ok;
}

// ---------------------------------------------------------------------------
// The race with llama-batched-bench
// ---------------------------------------------------------------------------

enum { MAX_CASES = MAX_LIST * MAX_LIST * MAX_LIST, MAX_ROUNDS = 16 };

struct bb_race {
    struct bb_case  cases[MAX_CASES];
    int             n_cases;
    struct bb_speed ours[MAX_CASES][MAX_ROUNDS], theirs[MAX_CASES][MAX_ROUNDS];
};

static void bb_join(const int * v, int n, char * out, size_t size) {
    size_t len = 0;
    out[0]     = '\0';
    for (int i = 0; i < n && len < size; i++) len += (size_t) snprintf(out + len, size - len, "%s%d", i ? "," : "", v[i]);
}

// The arguments of one llama-batched-bench run, as text (argv points into it).
struct bb_rival_args {
    char npp[256], ntg[256], npl[256], n_ctx[16], n_threads[16];
};

// Each row of llama-batched-bench's table (cli_batched_bench_line) into
// theirs[case][round]; returns the rows whose speeds were not usable numbers.
static int bb_read_table(char * text, struct bb_race * r, int round) {
    int n_bad = 0;
    for (char * line = text, * nl; line != NULL && *line; line = nl ? nl + 1 : NULL) {
        nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        struct batched_bench_row row;
        if (!cli_batched_bench_line(line, &row)) continue;
        for (int i = 0; i < r->n_cases; i++) {
            const struct bb_case * c = &r->cases[i];
            if (c->pp != row.pp || c->tg != row.tg || c->pl != row.pl) continue;
            if (row.usable) r->theirs[i][round] = (struct bb_speed) {row.s_pp, row.s_tg};
            else n_bad++;
        }
    }
    return n_bad;
}

// Run llama-batched-bench once on the same cases (an argv, no shell:
// cli_run_child); each row of its table goes to theirs[case][round]. False,
// with the reason printed, if it fails, hangs, or a case has no usable row.
static bool bb_run_llama(const char * exe, const char * model, const struct bb_rival_args * a, bool fa, bool shared,
                         double timeout_s, struct bb_race * r, int round) {
    char * const argv[] = {(char *) exe, "-m", (char *) model, "-c", (char *) a->n_ctx, "-npp", (char *) a->npp,
                           "-ntg", (char *) a->ntg, "-npl", (char *) a->npl, "-t", (char *) a->n_threads,
                           "-fa", fa ? "on" : "off", "-ctk", "f16", "-ctv", "f16", shared ? "-pps" : NULL, NULL};
    for (int i = 0; i < r->n_cases; i++) r->theirs[i][round].s_tg = -1.0;
    struct cli_child c;
    if (!cli_run_child("batched-bench", argv, timeout_s, 64u << 20, &c)) {
        cli_child_free(&c);
        return false;
    }
    const bool said_nothing = c.len == 0;
    const int  n_bad        = bb_read_table(c.out, r, round);
    const int  status       = c.status;
    cli_child_free(&c);
    for (int i = 0; i < r->n_cases; i++) {
        if (r->theirs[i][round].s_tg < 0) {
            fprintf(stderr, "mg batched-bench: llama-batched-bench gave no row for PP %d, TG %d, B %d (exit status %d; "
                            "%s) from %s\n", r->cases[i].pp, r->cases[i].tg, r->cases[i].pl, status,
                    said_nothing ? "it printed nothing on stdout"
                    : n_bad > 0  ? "its speeds were not numbers in (0, 1e9)"
                                 : "its table has no such row",
                    exe);
            return false;
        }
    }
    return true;
}

// Mean of ours / mean of theirs, and the min-max of the per-round ratios.
static void bb_print_ratio(const struct bb_speed * ours, const struct bb_speed * theirs, int n, bool tg) {
    double so = 0, st = 0, lo = 1e30, hi = 0;
    for (int i = 0; i < n; i++) {
        const double o = tg ? ours[i].s_tg : ours[i].s_pp, t = tg ? theirs[i].s_tg : theirs[i].s_pp;
        so += o, st += t;
        lo = t > 0 && o / t < lo ? o / t : lo;
        hi = t > 0 && o / t > hi ? o / t : hi;
    }
    printf(" %9.2f | %9.2f | %5.2fx | %5.2f-%5.2fx |", so / n, st / n, st > 0 ? so / st : 0.0, lo, hi);
}

static void bb_print_race(const struct bb_race * r, int n_rounds) {
    printf("\nours and llama-batched-bench's, in turn, %d rounds: means, ratio of the means, min-max of the round ratios\n",
           n_rounds);
    printf("\n| %5s | %5s | %3s | %9s | %9s | %6s | %12s | %9s | %9s | %6s | %12s |\n", "PP", "TG", "B", "ours S_PP",
           "llama", "ratio", "min-max", "ours S_TG", "llama", "ratio", "min-max");
    printf("|------:|------:|----:|----------:|----------:|-------:|-------------:|----------:|----------:|-------:|-------------:|\n");
    for (int i = 0; i < r->n_cases; i++) {
        printf("| %5d | %5d | %3d |", r->cases[i].pp, r->cases[i].tg, r->cases[i].pl);
        bb_print_ratio(r->ours[i], r->theirs[i], n_rounds, false);
        bb_print_ratio(r->ours[i], r->theirs[i], n_rounds, true);
        printf("\n");
    }
}

// ---------------------------------------------------------------------------
// The command
// ---------------------------------------------------------------------------

struct bb_opts {
    const char * npp, * ntg, * npl, * llama;
    bool         shared;
    int          rounds;
    float        rival_timeout;   // seconds
};

// The cases of the lists that fit in n_ctx (all of them when n_ctx is 0), and the cache the largest needs.
static int bb_cases(const int * npp, int n_pp, const int * ntg, int n_tg, const int * npl, int n_pl, bool shared,
                    struct bb_race * r) {
    int need_max = 0;
    r->n_cases   = 0;
    for (int a = 0; a < n_pp; a++)
        for (int b = 0; b < n_tg; b++)
            for (int c = 0; c < n_pl; c++) {
                const int need = (shared ? npp[a] : npl[c] * npp[a]) + npl[c] * ntg[b];
                need_max       = need > need_max ? need : need_max;
                r->cases[r->n_cases++] = (struct bb_case) {npp[a], ntg[b], npl[c], shared};
            }
    return need_max;
}

static bool bb_need_fits(const struct bb_case * c, int n_ctx) {
    return (c->shared ? c->pp : c->pl * c->pp) + c->pl * c->tg <= n_ctx;
}

int cmd_batched_bench(int argc, char ** argv) {
    const char * cmd = "batched-bench";
    struct cli_engine_opts e = cli_engine_defaults();
    struct bb_opts o = {.npp = "128", .ntg = "128", .npl = "1,2,4,8,16", .llama = NULL, .shared = false, .rounds = 3,
                     .rival_timeout = (float) CLI_RIVAL_TIMEOUT_S};
    struct cli_option opts[32];
    int n_opts = 0;
    opts[n_opts++] = (struct cli_option) {NULL, "-npp", CLI_STRING, &o.npp, "prompt sizes (default 128)"};
    opts[n_opts++] = (struct cli_option) {NULL, "-ntg", CLI_STRING, &o.ntg, "generation lengths (default 128)"};
    opts[n_opts++] = (struct cli_option) {NULL, "-npl", CLI_STRING, &o.npl, "parallel levels (default 1,2,4,8,16)"};
    opts[n_opts++] = (struct cli_option) {"-pps", "--pp-shared", CLI_FLAG, &o.shared,
                                          "one prompt shared by all sequences, stored once"};
    opts[n_opts++] = (struct cli_option) {NULL, "--llama-batched-bench", CLI_IN_FILE, &o.llama,
                                          "race this llama-batched-bench on the same file"};
    opts[n_opts++] = (struct cli_option) {NULL, "--rounds", CLI_INT, &o.rounds, "rounds of the race (default 3)"};
    opts[n_opts++] = (struct cli_option) {NULL, "--rival-timeout", CLI_FLOAT, &o.rival_timeout,
                                          "seconds one llama-batched-bench run may take before it is killed (default 3600)"};
    if (!cli_parse_engine_command(cmd, argc, argv, bb_usage, opts, n_opts, &e, NULL)) return 1;
    int npp[MAX_LIST], ntg[MAX_LIST], npl[MAX_LIST];
    const int n_pp = cli_parse_int_list(o.npp, npp, MAX_LIST, 1, 1 << 16), n_tg = cli_parse_int_list(o.ntg, ntg, MAX_LIST, 0, 1 << 16),
              n_pl = cli_parse_int_list(o.npl, npl, MAX_LIST, 1, MAX_PARALLEL);
    if (n_pp <= 0 || n_tg <= 0 || n_pl <= 0) {
        fprintf(stderr, "mg %s: -npp, -ntg and -npl take comma lists of whole numbers (-npl at most %d)\n", cmd,
                MAX_PARALLEL);
        return 1;
    }
    if (o.rounds < 1 || o.rounds > MAX_ROUNDS) {
        fprintf(stderr, "mg %s: --rounds must be 1..%d, got %d\n", cmd, MAX_ROUNDS, o.rounds);
        return 1;
    }
    if (!(o.rival_timeout > 0.0f)) {
        fprintf(stderr, "mg %s: --rival-timeout must be > 0 seconds, got %g\n", cmd, (double) o.rival_timeout);
        return 1;
    }
    static struct bb_race race;   // large: not on the stack
    const int n_ctx_req = bb_cases(npp, n_pp, ntg, n_tg, npl, n_pl, o.shared, &race);
    // The cache holds the largest case, unless -c says otherwise (then larger cases are skipped, as llama's are).
    struct mg_session_params params = cli_session_params(&e);
    if (params.n_ctx <= 0) params.n_ctx = n_ctx_req;
    struct mg_model * m = cli_load_model(cmd, e.model, NULL);
    if (m == NULL) return 1;
    struct mg_session * s = mg_session_new(m, params);
    if (s == NULL) {
        fprintf(stderr, "mg %s: %s\n", cmd, mg_last_error());
        mg_model_free(m);
        return 1;
    }
    int n_fit = 0, need_min = 0;   // the cases that fit, first
    for (int i = 0; i < race.n_cases; i++) {
        const struct bb_case * c = &race.cases[i];
        const int need = (c->shared ? c->pp : c->pl * c->pp) + c->pl * c->tg;
        need_min = i == 0 || need < need_min ? need : need_min;
        if (bb_need_fits(c, mg_session_n_ctx(s))) race.cases[n_fit++] = *c;
    }
    // Skipped as llama-batched-bench skips them, but said: an empty table with exit 0 reads as success.
    if (n_fit == 0) {
        fprintf(stderr, "mg %s: no case fits in the %d cells of -c: the smallest needs %d (B x PP + B x TG); give -c %d "
                        "or more\n", cmd, mg_session_n_ctx(s), need_min, need_min);
        mg_session_free(s);
        mg_model_free(m);
        return 1;
    }
    if (n_fit < race.n_cases) {
        fprintf(stderr, "mg %s: note: %d of %d cases need more than the %d cells of -c and are skipped\n", cmd,
                race.n_cases - n_fit, race.n_cases, mg_session_n_ctx(s));
    }
    race.n_cases = n_fit;
    // Warm up as llama-batched-bench does: 16 tokens of one sequence.
    int32_t   warm[16];
    const int n_warm = mg_session_n_ctx(s) < 16 ? mg_session_n_ctx(s) : 16;
    for (int i = 0; i < n_warm; i++) warm[i] = bench_token(i, m->hp.n_vocab);
    bool ok = mg_decode(s, warm, n_warm, false);
    if (!ok) fprintf(stderr, "mg %s: the warm-up failed: %s\n", cmd, mg_last_error());
    const bool racing = o.llama != NULL;
    printf("\nmg %s: n_kv_max = %d, n_batch = %d, flash_attn = %d, is_pp_shared = %d, n_threads = %d\n\n", cmd,
           mg_session_n_ctx(s), params.n_batch, params.flash_attn, o.shared, params.n_threads);
    if (!racing) {
        printf("|%6s | %6s | %4s | %6s | %8s | %8s | %8s | %8s | %8s | %8s |\n", "PP", "TG", "B", "N_KV", "T_PP s",
               "S_PP t/s", "T_TG s", "S_TG t/s", "T s", "S t/s");
        printf("|-------|--------|------|--------|----------|----------|----------|----------|----------|----------|\n");
    }
    struct bb_rival_args rival;
    bb_join(npp, n_pp, rival.npp, sizeof(rival.npp));
    bb_join(ntg, n_tg, rival.ntg, sizeof(rival.ntg));
    bb_join(npl, n_pl, rival.npl, sizeof(rival.npl));
    snprintf(rival.n_ctx, sizeof(rival.n_ctx), "%d", mg_session_n_ctx(s));
    snprintf(rival.n_threads, sizeof(rival.n_threads), "%d", params.n_threads);
    for (int round = 0; ok && round < (racing ? o.rounds : 1); round++) {
        for (int i = 0; ok && i < race.n_cases; i++) ok = bb_run(s, &race.cases[i], m->hp.n_vocab, racing, &race.ours[i][round]);
        if (ok && racing) {
            ok = bb_run_llama(o.llama, e.model, &rival, params.flash_attn, o.shared, o.rival_timeout, &race, round);
            if (ok) fprintf(stderr, "mg %s: round %d of %d done\n", cmd, round + 1, o.rounds);
        }
    }
    if (ok && racing) bb_print_race(&race, o.rounds);
    mg_session_free(s);
    mg_model_free(m);
    return ok ? 0 : 1;
}

// ---------------------------------------------------------------------------
// mg parallel
// ---------------------------------------------------------------------------

static const char * par_usage =
    "usage: mg parallel -m MODEL.gguf -p PROMPT [-p PROMPT ...] | -f FILE [-n 64] [options]\n"
    "\n"
    "Completes several prompts at once: all prompts are evaluated in one batch, then every step\n"
    "decodes one token of each unfinished sequence in one batch. -f reads one prompt per line.\n"
    "Each sequence has its own sampler (seed -s plus its index). As each sequence finishes, its\n"
    "prompt and continuation are printed; a summary with the aggregate speed goes to stderr.";

struct par_seq {
    const char *       prompt;
    struct mg_sampler * sampler;
    struct mg_detok    detok;
    char *             text;   // the continuation so far
    size_t             len, cap;
    int32_t            next;   // the token to feed at the next step
    int                n_past, n_gen;
    bool               done;
};

static void par_append(struct par_seq * q, const char * bytes, int32_t n) {
    if (n <= 0) return;
    if (q->len + (size_t) n + 1 > q->cap) {
        q->cap  = 2 * (q->len + (size_t) n + 1);
        q->text = realloc(q->text, q->cap);
        MG_ASSERT(q->text != NULL);
    }
    memcpy(q->text + q->len, bytes, (size_t) n);
    q->len += (size_t) n;
    q->text[q->len] = '\0';
}

static void par_finish(struct par_seq * q, int index, const char * why) {
    char tail[16];
    par_append(q, tail, mg_detok_flush(&q->detok, tail, sizeof(tail)));
    q->done = true;
    printf("--- sequence %d: %d tokens generated (%s)\n%s%s\n", index, q->n_gen, why, q->prompt, q->text ? q->text : "");
    fflush(stdout);
}

// Take the next token of sequence q from its logits; false when it ends.
static bool par_sample(struct par_seq * q, int index, const struct mg_model * m, const float * logits, int n_predict,
                       bool ignore_eos) {
    q->next = mg_sampler_sample(q->sampler, logits);
    if (!ignore_eos && mg_vocab_is_eog(m->vocab, q->next)) {
        par_finish(q, index, "end of generation");
        return false;
    }
    char piece[256];
    par_append(q, piece, mg_detok_push(&q->detok, m->vocab, q->next, piece, sizeof(piece)));
    if (++q->n_gen >= n_predict) {
        par_finish(q, index, "-n reached");
        return false;
    }
    return true;
}

// One line per prompt of a file (empty lines skipped); the prompts point into
// text, at most max of them. Returns how many lines there are, all counted.
static int split_lines(char * text, const char ** prompts, int max) {
    int n = 0;
    for (char * line = strtok(text, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        if (*line && n < max) prompts[n] = line;
        n += *line != '\0';
    }
    return n;
}

// One cache holds at most MAX_PARALLEL sequences (a bit each per cell): more
// prompts are an error that names the limit, never a silent cut.
static bool par_count_ok(const char * cmd, int n_prompts, const char * where) {
    if (n_prompts <= MAX_PARALLEL) return true;
    fprintf(stderr, "mg %s: %d prompts %s, but at most %d sequences run at once; split them into several runs\n", cmd,
            n_prompts, where, MAX_PARALLEL);
    return false;
}

// The batch arrays grown to n tokens; false after saying why (each array
// stays valid either way, for the caller to free).
static bool par_reserve(const char * cmd, int32_t ** tok, int32_t ** pos, int32_t ** seq, bool ** keep, size_t n) {
    const bool fits = n <= INT32_MAX / sizeof(int32_t);
    int32_t *  t    = fits ? realloc(*tok, n * sizeof(int32_t)) : NULL;
    if (t != NULL) *tok = t;
    int32_t * p = fits ? realloc(*pos, n * sizeof(int32_t)) : NULL;
    if (p != NULL) *pos = p;
    int32_t * q = fits ? realloc(*seq, n * sizeof(int32_t)) : NULL;
    if (q != NULL) *seq = q;
    bool * k = fits ? realloc(*keep, n * sizeof(bool)) : NULL;
    if (k != NULL) *keep = k;
    if (t == NULL || p == NULL || q == NULL || k == NULL) {
        fprintf(stderr, "mg %s: cannot allocate the batch of the prompts (%zu tokens at most)\n", cmd, n);
        return false;
    }
    return true;
}

int cmd_parallel(int argc, char ** argv) {
    const char * cmd = "parallel";
    struct cli_engine_opts   e   = cli_engine_defaults();
    struct cli_sampling_opts smp = cli_sampling_defaults();
    const char * prompts[MAX_PARALLEL], * prompt_file = NULL, * unused = NULL;
    int  n_prompts = 0, n_predict = 64;
    bool ignore_eos = false;
    // -p may repeat: collect every one before handing the rest to the parser.
    char ** rest = malloc((size_t) argc * sizeof(char *));
    int n_rest = 0;
    for (int i = 0; i < argc; i++) {
        if ((strcmp(argv[i], "-p") == 0 || strcmp(argv[i], "--prompt") == 0) && i + 1 < argc) {
            if (n_prompts < MAX_PARALLEL) prompts[n_prompts] = argv[i + 1];
            n_prompts++, i++;   // all counted, so that too many is said, not cut
        } else {
            rest[n_rest++] = argv[i];
        }
    }
    struct cli_option opts[40];
    int n_opts = 0;
    opts[n_opts++] = (struct cli_option) {"-p", "--prompt", CLI_STRING, &unused, "a prompt (repeat for several)"};
    opts[n_opts++] = (struct cli_option) {"-f", "--file", CLI_IN_FILE, &prompt_file, "prompts, one per line"};
    opts[n_opts++] = (struct cli_option) {"-n", "--n-predict", CLI_INT, &n_predict, "tokens per sequence (default 64)"};
    opts[n_opts++] = (struct cli_option) {NULL, "--ignore-eos", CLI_FLAG, &ignore_eos,
                                          "do not stop at end-of-generation tokens"};
    const bool parsed = cli_parse_engine_command(cmd, n_rest, rest, par_usage, opts, n_opts, &e, &smp);
    free(rest);
    if (!parsed || !par_count_ok(cmd, n_prompts, "given with -p")) return 1;
    char * file_text = NULL;
    if (prompt_file != NULL) {
        size_t len;
        if (n_prompts > 0 || (file_text = cli_read_file(cmd, prompt_file, &len)) == NULL) {
            if (n_prompts > 0) fprintf(stderr, "mg %s: give the prompts with -p or with -f, not both\n", cmd);
            return 1;
        }
        n_prompts = split_lines(file_text, prompts, MAX_PARALLEL);
        if (!par_count_ok(cmd, n_prompts, "in -f (one per line)")) {
            free(file_text);
            return 1;
        }
    }
    if (n_prompts == 0 || n_predict < 1) {
        fprintf(stderr, "mg %s: need at least one prompt (-p TEXT, repeated, or -f FILE) and -n >= 1\n", cmd);
        free(file_text);
        return 1;
    }
    double load_ms;
    struct mg_model * m = cli_load_model(cmd, e.model, &load_ms);
    if (m == NULL) {
        free(file_text);
        return 1;
    }
    struct mg_session_params params = cli_session_params(&e);
    struct mg_session * s = mg_session_new(m, params);
    struct par_seq * q = calloc((size_t) n_prompts, sizeof(struct par_seq));
    int status = s != NULL ? 0 : 1;
    if (s == NULL) fprintf(stderr, "mg %s: %s\n", cmd, mg_last_error());

    // All prompts in one batch, each keeping its last logits.
    int n_total = 0;
    int32_t * tok  = NULL, * pos = NULL, * seq = NULL;
    bool *    keep = NULL;
    for (int i = 0; i < n_prompts && status == 0; i++) {
        // At most 3 tokens per byte (an invalid byte becomes U+FFFD's three byte tokens) and a BOS.
        const size_t len = strlen(prompts[i]), room = 3 * len + 2;
        if (!par_reserve(cmd, &tok, &pos, &seq, &keep, (size_t) n_total + room)) {
            status = 1;
            break;
        }
        const int32_t n = mg_tokenize(m->vocab, prompts[i], (int32_t) len, tok + n_total, (int32_t) room, true, true);
        if (n <= 0) {
            fprintf(stderr, "mg %s: prompt %d gives no tokens\n", cmd, i);
            status = 1;
            break;
        }
        q[i].prompt  = prompts[i];
        q[i].sampler = mg_sampler_new((struct mg_sampler_params) {smp.p.temp, smp.p.top_k, smp.p.top_p, smp.p.min_p,
                                                                  smp.p.repeat_penalty, smp.p.repeat_last_n,
                                                                  smp.p.seed + (uint64_t) i}, m->hp.n_vocab);
        mg_detok_init(&q[i].detok, false);
        for (int k = 0; k < n; k++) {
            mg_sampler_accept(q[i].sampler, tok[n_total + k]);
            pos[n_total + k] = k, seq[n_total + k] = i, keep[n_total + k] = k == n - 1;
        }
        q[i].n_past = n;
        n_total += n;
    }
    const double t0 = mg_time_ms();
    if (status == 0 && !mg_decode_batch(s, &(struct mg_batch) {n_total, tok, pos, seq, keep})) {
        fprintf(stderr, "mg %s: the prompts: %s\n", cmd, mg_last_error());
        status = 1;
    }
    const double prompt_ms = mg_time_ms() - t0;
    int n_active = 0, n_generated = 0;
    for (int i = 0, row = 0; i < n_prompts && status == 0; i++) {
        row += q[i].n_past;
        n_active += par_sample(&q[i], i, m, mg_get_logits_ith(s, row - 1), n_predict, ignore_eos);
    }
    // Then one batch per step: the next token of every unfinished sequence.
    const double t1 = mg_time_ms();
    int32_t idx[MAX_PARALLEL];
    while (status == 0 && n_active > 0) {
        int n = 0;
        for (int i = 0; i < n_prompts; i++) {
            if (q[i].done) continue;
            idx[n] = i, tok[n] = q[i].next, pos[n] = q[i].n_past++, seq[n] = i, keep[n] = true;
            n++;
        }
        if (mg_session_cells_used(s) + n > mg_session_n_ctx(s)) {   // as mg run: stop, and print what was made
            fprintf(stderr, "mg %s: the context (-c %d) is full: %d unfinished sequence%s stop here\n", cmd,
                    mg_session_n_ctx(s), n, n == 1 ? "" : "s");
            for (int k = 0; k < n; k++) par_finish(&q[idx[k]], idx[k], "context full");
            break;
        }
        if (!mg_decode_batch(s, &(struct mg_batch) {n, tok, pos, seq, keep})) {
            fprintf(stderr, "mg %s: step with %d sequences: %s\n", cmd, n, mg_last_error());
            status = 1;
            break;
        }
        n_generated += n;
        for (int k = 0; k < n; k++) {
            if (!par_sample(&q[idx[k]], idx[k], m, mg_get_logits_ith(s, k), n_predict, ignore_eos)) n_active--;
        }
    }
    const double gen_ms = mg_time_ms() - t1;
    if (status == 0) {
        fprintf(stderr, "\nmg %s: %d sequences; prompts %d tokens in %.2f ms (%.2f t/s); generation %d tokens in "
                        "%.2f ms (%.2f t/s, all sequences together); %d cache cells used\n", cmd, n_prompts, n_total,
                prompt_ms, 1e3 * n_total / prompt_ms, n_generated, gen_ms, gen_ms > 0 ? 1e3 * n_generated / gen_ms : 0.0,
                mg_session_cells_used(s));
    }
    for (int i = 0; i < n_prompts; i++) {
        mg_sampler_free(q[i].sampler);
        free(q[i].text);
    }
    free(q);
    free(tok);
    free(pos);
    free(seq);
    free(keep);
    free(file_text);
    mg_session_free(s);
    mg_model_free(m);
    return status;
}
