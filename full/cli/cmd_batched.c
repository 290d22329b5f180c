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
    "usage: mg batched-bench -m MODEL.gguf [-npp 128] [-ntg 128] [-npl 1,2,4,8,16] [-pps] [-kvu] [-t N] [-c N] [-fa]\n"
    "\n"
    "For every prompt size PP, generation length TG and parallel level B (comma lists): B sequences\n"
    "of PP prompt tokens are evaluated in one batch (-pps: one prompt shared by all B, stored once),\n"
    "then TG steps each decode one token of every sequence in one batch of B. Prints\n"
    "llama-batched-bench's table: the times and speeds of the prompt (S_PP), of generation (S_TG,\n"
    "all B sequences together) and of both (S). As in llama-batched-bench, each sequence has a stream of\n"
    "n_ctx / B_max cells of its own, attention reading only those (-kvu: one pool for all; with -fa and\n"
    "-pps there is always one pool here).\n"
    "\n"
    "--llama-batched-bench PATH races llama.cpp's llama-batched-bench on the same file in the same\n"
    "run: --rounds times ours then theirs (same -npp/-ntg/-npl/-t/-c/-fa/-kvu, F16 K/V), then one table\n"
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
        fprintf(stderr, "mg batched-bench: PP %d, TG %d, B %d: %s\n", c->pp, c->tg, c->pl, cli_last_error());
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
                         bool unified, double timeout_s, struct bb_race * r, int round) {
    char * argv[24] = {(char *) exe, "-m", (char *) model, "-c", (char *) a->n_ctx, "-npp", (char *) a->npp,
                       "-ntg", (char *) a->ntg, "-npl", (char *) a->npl, "-t", (char *) a->n_threads,
                       "-fa", fa ? "on" : "off", "-ctk", "f16", "-ctv", "f16"};
    int n_args = 19;
    if (unified) argv[n_args++] = "-kvu";   // the same cache as ours: one pool, or llama's default, a stream per sequence
    if (shared) argv[n_args++] = "-pps";
    argv[n_args] = NULL;
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
                    mg_quote(exe));
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
    bool         kv_unified;      // -kvu: one pool of cells, not a stream per sequence
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

// Without -c the cache is sized for the largest case: when it cannot be
// made, the flags that asked for it are named (the session's error names -c,
// which the user never gave).
static void bb_say_largest_case(const char * cmd, const struct bb_race * race, int n_ctx) {
    for (int i = 0; i < race->n_cases; i++) {
        const struct bb_case * c = &race->cases[i];
        if (!bb_need_fits(c, n_ctx - 1)) {   // the case that needs all n_ctx cells
            fprintf(stderr, "mg %s: the case -npp %d -ntg %d -npl %d needs a cache of %d cells (%s), and %s; give "
                            "smaller lists, or a -c that skips the cases that do not fit\n", cmd, c->pp, c->tg, c->pl,
                    n_ctx, c->shared ? "PP + B x TG" : "B x (PP + TG)", cli_last_error());
            return;
        }
    }
    fprintf(stderr, "mg %s: %s\n", cmd, cli_last_error());
}

// The lists of -npp, -ntg and -npl, parsed.
struct bb_lists {
    int npp[MAX_LIST], ntg[MAX_LIST], npl[MAX_LIST];
    int n_pp, n_tg, n_pl;
};

// One comma list flag: its count, or 0 after saying which flag, its value
// and what it takes ("-npl 1,,2", "-npl 0", "-npl 65").
static int bb_list(const char * cmd, const char * flag, const char * text, int * out, long lo, long hi) {
    const int n = cli_parse_int_list(text, out, MAX_LIST, lo, hi);
    if (n > 0) return n;
    fprintf(stderr, "mg %s: %s '%s': need a comma list of at most %d whole numbers in %ld..%ld\n", cmd, flag,
            mg_quote(text),
            MAX_LIST, lo, hi);
    return 0;
}

static int bb_max(const int * v, int n) {
    int m = v[0];
    for (int i = 1; i < n; i++) m = v[i] > m ? v[i] : m;
    return m;
}

// The options and their checks. False after printing why.
static bool bb_parse(const char * cmd, int argc, char ** argv, struct cli_engine_opts * e, struct bb_opts * o,
                     struct bb_lists * l) {
    struct cli_option opts[32];
    int n_opts = 0;
    opts[n_opts++] = (struct cli_option) {NULL, "-npp", CLI_STRING, &o->npp, "prompt sizes (default 128)"};
    opts[n_opts++] = (struct cli_option) {NULL, "-ntg", CLI_STRING, &o->ntg, "generation lengths (default 128)"};
    opts[n_opts++] = (struct cli_option) {NULL, "-npl", CLI_STRING, &o->npl, "parallel levels (default 1,2,4,8,16)"};
    opts[n_opts++] = (struct cli_option) {"-pps", "--pp-shared", CLI_FLAG, &o->shared,
                                          "one prompt shared by all sequences, stored once (implies -kvu)"};
    opts[n_opts++] = (struct cli_option) {"-kvu", "--kv-unified", CLI_FLAG, &o->kv_unified,
                                          "one pool of cells for all sequences (default: a stream per sequence, "
                                          "as llama-batched-bench; flash attention always uses one pool)"};
    opts[n_opts++] = (struct cli_option) {NULL, "--llama-batched-bench", CLI_IN_FILE, &o->llama,
                                          "race this llama-batched-bench on the same file"};
    opts[n_opts++] = (struct cli_option) {NULL, "--rounds", CLI_INT, &o->rounds, "rounds of the race (default 3)"};
    opts[n_opts++] = (struct cli_option) {NULL, "--rival-timeout", CLI_FLOAT, &o->rival_timeout,
                                          "seconds one llama-batched-bench run may take before it is killed (default 3600)"};
    if (!cli_parse_engine_command(cmd, argc, argv, bb_usage, opts, n_opts, e, NULL)) return false;
    l->n_pp = bb_list(cmd, "-npp", o->npp, l->npp, 1, 1 << 16);
    l->n_tg = l->n_pp > 0 ? bb_list(cmd, "-ntg", o->ntg, l->ntg, 0, 1 << 16) : 0;
    l->n_pl = l->n_tg > 0 ? bb_list(cmd, "-npl", o->npl, l->npl, 1, MAX_PARALLEL) : 0;
    if (l->n_pp <= 0 || l->n_tg <= 0 || l->n_pl <= 0) return false;   // said
    return cli_race_options(cmd, "--llama-batched-bench", o->llama, MAX_ROUNDS, &o->rounds, &o->rival_timeout);
}

// Keeps the cases that fit in n_ctx cells, in order. Skipped as
// llama-batched-bench skips them, but said: an empty table with exit 0 reads
// as success, so none fitting is an error naming the -c that would do.
static bool bb_keep_fitting(const char * cmd, struct bb_race * race, int n_ctx) {
    int n_fit = 0, need_min = 0;
    for (int i = 0; i < race->n_cases; i++) {
        const struct bb_case * c = &race->cases[i];
        const int need = (c->shared ? c->pp : c->pl * c->pp) + c->pl * c->tg;
        need_min = i == 0 || need < need_min ? need : need_min;
        if (bb_need_fits(c, n_ctx)) race->cases[n_fit++] = *c;
    }
    if (n_fit == 0) {
        fprintf(stderr, "mg %s: no case fits in the %d cells of -c: the smallest needs %d (B x PP + B x TG); give -c %d "
                        "or more\n", cmd, n_ctx, need_min, need_min);
        return false;
    }
    if (n_fit < race->n_cases) {
        fprintf(stderr, "mg %s: note: %d of %d cases need more than the %d cells of -c and are skipped\n", cmd,
                race->n_cases - n_fit, race->n_cases, n_ctx);
    }
    race->n_cases = n_fit;
    return true;
}

// Warm up as llama-batched-bench does: 16 tokens of one sequence.
static bool bb_warm_up(const char * cmd, struct mg_session * s, int n_vocab) {
    int32_t   warm[16];
    const int room   = mg_session_n_ctx(s) / mg_session_n_stream(s);   // sequence 0's cells (its stream's)
    const int n_warm = room < 16 ? room : 16;
    for (int i = 0; i < n_warm; i++) warm[i] = bench_token(i, n_vocab);
    if (mg_decode(s, warm, n_warm, false)) return true;
    fprintf(stderr, "mg %s: the warm-up failed: %s\n", cmd, cli_last_error());
    return false;
}

// llama-batched-bench's arguments for the same cases and cache.
static void bb_rival_args_fill(const struct bb_lists * l, int n_ctx, int n_threads, struct bb_rival_args * a) {
    bb_join(l->npp, l->n_pp, a->npp, sizeof(a->npp));
    bb_join(l->ntg, l->n_tg, a->ntg, sizeof(a->ntg));
    bb_join(l->npl, l->n_pl, a->npl, sizeof(a->npl));
    snprintf(a->n_ctx, sizeof(a->n_ctx), "%d", n_ctx);
    snprintf(a->n_threads, sizeof(a->n_threads), "%d", n_threads);
}

static void bb_print_table_head(void) {
    printf("|%6s | %6s | %4s | %6s | %8s | %8s | %8s | %8s | %8s | %8s |\n", "PP", "TG", "B", "N_KV", "T_PP s",
           "S_PP t/s", "T_TG s", "S_TG t/s", "T s", "S t/s");
    printf("|-------|--------|------|--------|----------|----------|----------|----------|----------|----------|\n");
}

int cmd_batched_bench(int argc, char ** argv) {
    const char * cmd = "batched-bench";
    struct cli_engine_opts e = cli_engine_defaults();
    struct bb_opts o = {.npp = "128", .ntg = "128", .npl = "1,2,4,8,16", .llama = NULL, .shared = false,
                     .rounds = CLI_ROUNDS_UNSET, .rival_timeout = CLI_RIVAL_TIMEOUT_UNSET};
    struct bb_lists l;
    if (!bb_parse(cmd, argc, argv, &e, &o, &l)) return 1;
    static struct bb_race race;   // large: not on the stack
    const int n_ctx_req = bb_cases(l.npp, l.n_pp, l.ntg, l.n_tg, l.npl, l.n_pl, o.shared, &race);
    // The cache holds the largest case, unless -c says otherwise (then larger cases are skipped, as llama's are).
    struct mg_session_params params = cli_session_params(&e);
    if (params.n_ctx <= 0) params.n_ctx = n_ctx_req;
    params.n_seq_max  = bb_max(l.npl, l.n_pl);   // a stream per sequence, unless one pool is asked for
    params.kv_unified = o.kv_unified || o.shared;
    struct mg_model * m = cli_load_model(cmd, e.model, !e.no_repack, !e.no_huge_pages, NULL);
    if (m == NULL) return 1;
    struct mg_session * s = mg_session_new(m, params);
    if (s == NULL && e.n_ctx <= 0) bb_say_largest_case(cmd, &race, n_ctx_req);
    else if (s == NULL) fprintf(stderr, "mg %s: %s\n", cmd, cli_last_error());
    bool ok = s != NULL && bb_keep_fitting(cmd, &race, mg_session_n_ctx(s)) && bb_warm_up(cmd, s, m->hp.n_vocab);
    const bool racing = o.llama != NULL;
    if (ok) {
        printf("\nmg %s: n_kv_max = %d, n_batch = %d, flash_attn = %d, is_pp_shared = %d, n_threads = %d, "
               "kv_unified = %d, n_stream = %d\n\n", cmd, mg_session_n_ctx(s), params.n_batch, params.flash_attn,
               o.shared, params.n_threads, mg_session_n_stream(s) == 1, mg_session_n_stream(s));
        if (!racing) bb_print_table_head();
    }
    struct bb_rival_args rival;
    if (ok) bb_rival_args_fill(&l, mg_session_n_ctx(s), params.n_threads, &rival);
    for (int round = 0; ok && round < (racing ? o.rounds : 1); round++) {
        for (int i = 0; ok && i < race.n_cases; i++) ok = bb_run(s, &race.cases[i], m->hp.n_vocab, racing, &race.ours[i][round]);
        if (ok && racing) {
            ok = bb_run_llama(o.llama, e.model, &rival, params.flash_attn, o.shared, mg_session_n_stream(s) == 1,
                              o.rival_timeout, &race, round);
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
    bool               failed;   // its logits were not finite (said on stderr)
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
    // The start of a character the model never finished: dropped and said, as mg run does
    // (cli_stream_flush), not printed as a broken character.
    char tail[16];
    const int32_t n_tail = mg_detok_flush(&q->detok, tail, sizeof(tail));
    if (n_tail > 0) {
        fprintf(stderr, "[sequence %d: the text was cut mid-character: %d byte%s of an unfinished UTF-8 character "
                        "not printed]\n", index, n_tail, n_tail == 1 ? "" : "s");
    }
    q->done = true;
    printf("--- sequence %d: %d tokens generated (%s)\n", index, q->n_gen, why);
    cli_print_text(q->prompt, strlen(q->prompt));
    if (q->text != NULL) cli_print_text(q->text, q->len);
    printf("\n");
    fflush(stdout);
}

// Take the next token of sequence q from its logits; false when it ends.
static bool par_sample(struct par_seq * q, int index, const struct mg_model * m, const float * logits, int n_predict,
                       bool ignore_eos) {
    if (!mg_logits_finite(logits, 1, m->hp.n_vocab, q->n_past - 1)) {
        fprintf(stderr, "mg parallel: sequence %d: %s\n", index, cli_last_error());
        q->failed = true;
        par_finish(q, index, "stopped: logits not finite");
        return false;
    }
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

// Everything one mg parallel run holds, freed by par_run_free.
struct par_run {
    struct cli_engine_opts   e;
    struct cli_sampling_opts smp;
    const char *             prompts[MAX_PARALLEL];
    int                      n_prompts, n_predict;
    bool                     ignore_eos;
    char *                   file_text;   // -f FILE's text; prompts[] point into it
    struct mg_model *        m;
    struct mg_session *      s;
    struct par_seq *         q;           // [n_prompts]
    int32_t *                tok, * pos, * seq;   // the batch: the prompts' tokens, then one per sequence a step
    bool *                   keep;
    int                      n_total;     // the prompts' tokens
};

// The prompts (-p repeated, or -f one per line) and the options. False after printing why.
static bool par_parse(const char * cmd, int argc, char ** argv, struct par_run * r) {
    const char * prompt_file = NULL, * unused = NULL;
    // -p may repeat: collect every one before handing the rest to the parser.
    char ** rest   = malloc((size_t) argc * sizeof(char *));
    int     n_rest = 0;
    for (int i = 0; i < argc; i++) {
        if ((strcmp(argv[i], "-p") == 0 || strcmp(argv[i], "--prompt") == 0) && i + 1 < argc) {
            if (r->n_prompts < MAX_PARALLEL) r->prompts[r->n_prompts] = argv[i + 1];
            r->n_prompts++, i++;   // all counted, so that too many is said, not cut
        } else {
            rest[n_rest++] = argv[i];
        }
    }
    struct cli_option opts[40];
    int n_opts = 0;
    opts[n_opts++] = (struct cli_option) {"-p", "--prompt", CLI_STRING, &unused, "a prompt (repeat for several)"};
    opts[n_opts++] = (struct cli_option) {"-f", "--file", CLI_IN_FILE, &prompt_file, "prompts, one per line"};
    opts[n_opts++] = (struct cli_option) {"-n", "--n-predict", CLI_INT, &r->n_predict, "tokens per sequence (default 64)"};
    opts[n_opts++] = (struct cli_option) {NULL, "--ignore-eos", CLI_FLAG, &r->ignore_eos,
                                          "do not stop at end-of-generation tokens"};
    const bool parsed = cli_parse_engine_command(cmd, n_rest, rest, par_usage, opts, n_opts, &r->e, &r->smp);
    free(rest);
    if (!parsed || !par_count_ok(cmd, r->n_prompts, "given with -p")) return false;
    if (prompt_file != NULL) {
        size_t len;
        if (r->n_prompts > 0) {
            fprintf(stderr, "mg %s: give the prompts with -p or with -f, not both\n", cmd);
            return false;
        }
        if ((r->file_text = cli_read_file(cmd, prompt_file, &len)) == NULL) return false;
        r->n_prompts = split_lines(r->file_text, r->prompts, MAX_PARALLEL);
        if (!par_count_ok(cmd, r->n_prompts, "in -f (one per line)")) return false;
    }
    if (r->n_prompts == 0 || r->n_predict < 1) {
        fprintf(stderr, "mg %s: need at least one prompt (-p TEXT, repeated, or -f FILE) and -n >= 1\n", cmd);
        return false;
    }
    return true;
}

// All prompts in one batch, each keeping its last logits, and a sampler per
// sequence (seed + its index). False after printing why.
static bool par_prompts_batch(const char * cmd, struct par_run * r) {
    const struct cli_sampling_opts * smp = &r->smp;
    for (int i = 0; i < r->n_prompts; i++) {
        // At most 3 tokens per byte (an invalid byte becomes U+FFFD's three byte tokens) and a BOS.
        const size_t len = strlen(r->prompts[i]), room = 3 * len + 2;
        if (!par_reserve(cmd, &r->tok, &r->pos, &r->seq, &r->keep, (size_t) r->n_total + room)) return false;
        int32_t * tok = r->tok + r->n_total;
        const int32_t n = mg_tokenize(r->m->vocab, r->prompts[i], (int32_t) len, tok, (int32_t) room, true, true);
        if (n <= 0) {
            fprintf(stderr, "mg %s: prompt %d %s\n", cmd, i, n == INT32_MIN ? cli_last_error() : "gives no tokens");
            return false;
        }
        struct par_seq * q = &r->q[i];
        q->prompt  = r->prompts[i];
        q->sampler = mg_sampler_new((struct mg_sampler_params) {smp->p.temp, smp->p.top_k, smp->p.top_p, smp->p.min_p,
                                                                smp->p.repeat_penalty, smp->p.repeat_last_n,
                                                                smp->p.seed + (uint64_t) i}, r->m->hp.n_vocab);
        mg_detok_init(&q->detok, false);
        for (int k = 0; k < n; k++) {
            mg_sampler_accept(q->sampler, tok[k]);
            const int at = r->n_total + k;
            r->pos[at] = k, r->seq[at] = i, r->keep[at] = k == n - 1;
        }
        q->n_past = n;
        r->n_total += n;
    }
    return true;
}

// One batch per step, the next token of every unfinished sequence, until all
// are done or the context is full (then what was made is printed). *n_generated
// counts the tokens decoded. False after printing why.
static bool par_generate(const char * cmd, struct par_run * r, int n_active, int * n_generated) {
    int32_t idx[MAX_PARALLEL];
    while (n_active > 0) {
        int n = 0;
        for (int i = 0; i < r->n_prompts; i++) {
            if (r->q[i].done) continue;
            idx[n] = i, r->tok[n] = r->q[i].next, r->pos[n] = r->q[i].n_past++, r->seq[n] = i, r->keep[n] = true;
            n++;
        }
        if (mg_session_cells_used(r->s) + n > mg_session_n_ctx(r->s)) {   // as mg run: stop, and print what was made
            fprintf(stderr, "mg %s: the context (-c %d) is full: %d unfinished sequence%s stop here\n", cmd,
                    mg_session_n_ctx(r->s), n, n == 1 ? "" : "s");
            for (int k = 0; k < n; k++) par_finish(&r->q[idx[k]], idx[k], "context full");
            return true;
        }
        if (!mg_decode_batch(r->s, &(struct mg_batch) {n, r->tok, r->pos, r->seq, r->keep})) {
            fprintf(stderr, "mg %s: step with %d sequences: %s\n", cmd, n, cli_last_error());
            return false;
        }
        *n_generated += n;
        for (int k = 0; k < n; k++) {
            if (!par_sample(&r->q[idx[k]], idx[k], r->m, mg_get_logits_ith(r->s, k), r->n_predict, r->ignore_eos)) {
                n_active--;
            }
        }
    }
    return true;
}

static void par_run_free(struct par_run * r) {
    for (int i = 0; r->q != NULL && i < r->n_prompts; i++) {
        mg_sampler_free(r->q[i].sampler);
        free(r->q[i].text);
    }
    free(r->q);
    free(r->tok);
    free(r->pos);
    free(r->seq);
    free(r->keep);
    free(r->file_text);
    mg_session_free(r->s);
    mg_model_free(r->m);
}

// The model, its session and a sequence per prompt. False after printing why.
static bool par_set_up(const char * cmd, struct par_run * r) {
    r->m = cli_load_model(cmd, r->e.model, !r->e.no_repack, !r->e.no_huge_pages, NULL);
    if (r->m == NULL) return false;
    r->s = mg_session_new(r->m, cli_session_params(&r->e));
    r->q = calloc((size_t) r->n_prompts, sizeof(struct par_seq));
    if (r->s == NULL || r->q == NULL) {
        fprintf(stderr, "mg %s: %s\n", cmd, r->s == NULL ? cli_last_error() : "out of memory");
        return false;
    }
    return true;
}

int cmd_parallel(int argc, char ** argv) {
    const char *   cmd = "parallel";
    struct par_run r   = {.e = cli_engine_defaults(), .smp = cli_sampling_defaults(), .n_predict = 64};
    bool ok = par_parse(cmd, argc, argv, &r) && par_set_up(cmd, &r) && par_prompts_batch(cmd, &r);
    const double t0 = mg_time_ms();
    if (ok && !mg_decode_batch(r.s, &(struct mg_batch) {r.n_total, r.tok, r.pos, r.seq, r.keep})) {
        fprintf(stderr, "mg %s: the prompts: %s\n", cmd, cli_last_error());
        ok = false;
    }
    const double prompt_ms = mg_time_ms() - t0;
    int n_active = 0, n_generated = 0;
    for (int i = 0, row = 0; ok && i < r.n_prompts; i++) {
        row += r.q[i].n_past;
        n_active += par_sample(&r.q[i], i, r.m, mg_get_logits_ith(r.s, row - 1), r.n_predict, r.ignore_eos);
    }
    const double t1 = mg_time_ms();
    ok = ok && par_generate(cmd, &r, n_active, &n_generated);
    const double gen_ms = mg_time_ms() - t1;
    for (int i = 0; ok && i < r.n_prompts; i++) ok = !r.q[i].failed;
    if (ok) {
        fprintf(stderr, "\nmg %s: %d sequences; prompts %d tokens in %.2f ms (%.2f t/s); generation %d tokens in "
                        "%.2f ms (%.2f t/s, all sequences together); %d cache cells used\n", cmd, r.n_prompts,
                r.n_total, prompt_ms, 1e3 * r.n_total / prompt_ms, n_generated, gen_ms,
                gen_ms > 0 ? 1e3 * n_generated / gen_ms : 0.0, mg_session_cells_used(r.s));
    }
    par_run_free(&r);
    return ok ? 0 : 1;
}
