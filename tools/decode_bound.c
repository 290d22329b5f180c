// decode_bound.c - what holds a decode step of a model back on this machine:
// its memory, or its arithmetic. Two passes over the weights one decode step
// reads, each half of what a decode step does:
//
//   read pass    every weight matrix once, in the model's order, each split
//                into the threads' row shares as mul_mat splits it (tiles of
//                8 rows), a barrier after each matrix, and no arithmetic:
//                each thread sums its bytes as tools/bandwidth.c does. The
//                bytes are the ones the kernels read (a repacked copy where
//                the model has one), so this is decode's memory traffic and
//                hand-offs alone.
//   kernel pass  the same kernels (mul_mat of each kind of matrix the model
//                has: type, row length, repacked or not) on one decode
//                column, over and over on the first rows of the matrix, few
//                enough that every thread's share stays in its L2 cache: the
//                arithmetic alone, memory out of the way.
//
// If a core overlapped the two perfectly, decode would run at the slower of
// the two; if not at all, at "one after the other" (a token's time is the
// read pass's plus the kernel pass's). `mg bench` in the same run says where
// decode actually is (full/Makefile's bench-qwen06 runs both).
//
//     build/decode_bound -m MODEL.gguf [-m MODEL2.gguf ...] [-t 1,2]
//
// It prints one markdown table, a row per model and thread count, in GB/s of
// weights (bytes read per token x tokens/s, as mg bench's weights/s column).
#define _POSIX_C_SOURCE 200809L
#include "arena.h"
#include "compute.h"
#include "galloc.h"
#include "graph.h"
#include "model.h"
#include "plan.h"
#include "threadpool.h"
#include "vec.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum {
    MAX_MODELS     = 8,
    MAX_THREADS    = 64,
    PASSES         = 8,            // best of PASSES - 1: the first warms the pages and the TLB
    KERNEL_REPEATS = 16,           // mul_mats of the same rows in one graph
    KERNEL_RUNS    = 20,           // graphs timed, best of them
    L2_SHARE       = 256 * 1024,   // bytes of weights per thread in the kernel pass: in any L2 of 512 KiB or more
    MAX_KINDS      = 16,
};

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double) t.tv_sec + 1e-9 * (double) t.tv_nsec;
}

// The bytes mul_mat reads for a weight: its repacked copy if it has one.
static const char * weight_bytes(const struct mg_tensor * t) {
    return t->repacked != NULL ? t->repacked : t->data;
}

// Does a decode step read all of t? Every weight but token_embd, of which it
// reads one row (get_rows), unless it is the output matrix too.
static bool read_whole(const struct mg_model * m, const struct mg_tensor * t) {
    return t != m->tok_embd || m->output == m->tok_embd;
}

// ---------------------------------------------------------------------------
// The read pass.

// A thread's share of one matrix: rows split in tiles of 8, as mul_mat_share does.
static void row_share(const struct mg_tensor * t, int ith, int nth, size_t * off, size_t * n) {
    const int64_t rows  = mg_nelements(t) / t->ne[0];
    const int64_t tiles = (rows + MG_VEC_DOT_MAX_ROWS - 1) / MG_VEC_DOT_MAX_ROWS;
    int64_t       t0, t1;
    mg_split_rows(tiles, ith, nth, &t0, &t1);
    const int64_t r0 = t0 * MG_VEC_DOT_MAX_ROWS < rows ? t0 * MG_VEC_DOT_MAX_ROWS : rows;
    const int64_t r1 = t1 * MG_VEC_DOT_MAX_ROWS < rows ? t1 * MG_VEC_DOT_MAX_ROWS : rows;
    const size_t  row = mg_nbytes(t) / (size_t) rows;
    *off              = (size_t) r0 * row;
    *n                = (size_t) (r1 - r0) * row;
}

// Whole cache lines, one 64-byte vector a load (one AVX-512 register, two
// AVX2 or four NEON ones), in 8 independent lanes: as tools/bandwidth.c's
// loop compiles, so the two read memory the same way. (Eight sums of 8
// bytes each, loaded one by one, read half as fast on an Intel Xeon.)
typedef uint64_t line_u64 __attribute__((vector_size(64)));

static uint64_t sum_bytes(const char * p, size_t n) {
    line_u64 acc = {0};
    size_t   i   = 0;
    for (; i + 64 <= n; i += 64) {
        line_u64 w;
        memcpy(&w, p + i, sizeof(w));   // any alignment
        acc += w;
    }
    uint64_t s = 0;
    for (; i < n; i++) s += (unsigned char) p[i];
    for (int k = 0; k < 8; k++) s += acc[k];
    return s;
}

struct read_team {
    const struct mg_model * m;
    int                     n_threads;
    _Alignas(64) atomic_int count;   // the barrier, as threadpool.c's: arrivals, then a phase that moves
    _Alignas(64) atomic_int phase;
    _Alignas(64) atomic_int start;   // pass number the workers are asked for; -1: quit
    _Alignas(64) atomic_int done;    // workers finished with the current pass
    uint64_t                sums[MAX_THREADS];
};

static void team_barrier(struct read_team * team) {
    if (team->n_threads == 1) return;
    const int phase = atomic_load(&team->phase);
    if (atomic_fetch_add(&team->count, 1) == team->n_threads - 1) {
        atomic_store(&team->count, 0);
        atomic_fetch_add(&team->phase, 1);
        return;
    }
    while (atomic_load(&team->phase) == phase) {}
}

// Thread ith's share of every matrix, a barrier after each.
static void read_pass(struct read_team * team, int ith) {
    uint64_t s = 0;
    for (struct mg_tensor * t = mg_get_first_tensor(team->m->ctx); t != NULL; t = mg_get_next_tensor(team->m->ctx, t)) {
        if (!read_whole(team->m, t)) continue;
        size_t off, n;
        row_share(t, ith, team->n_threads, &off, &n);
        s += sum_bytes(weight_bytes(t) + off, n);
        team_barrier(team);
    }
    team->sums[ith] += s;
}

struct worker_arg {
    struct read_team * team;
    int                ith;
};

static void * read_worker(void * p) {
    const struct worker_arg * a    = p;
    int                       seen = 0;
    for (;;) {
        int want;
        while ((want = atomic_load(&a->team->start)) == seen) {}
        if (want < 0) return NULL;
        seen = want;
        read_pass(a->team, a->ith);
        atomic_fetch_add(&a->team->done, 1);
    }
}

// Best time of one read pass on n_threads threads (the caller is thread 0).
static double time_read_pass(const struct mg_model * m, int n_threads, uint64_t * check) {
    static struct read_team team;
    memset(&team, 0, sizeof(team));
    team.m         = m;
    team.n_threads = n_threads;
    pthread_t         tid[MAX_THREADS];
    struct worker_arg args[MAX_THREADS];
    for (int i = 1; i < n_threads; i++) {
        args[i] = (struct worker_arg) {&team, i};
        pthread_create(&tid[i], NULL, read_worker, &args[i]);
    }
    double best = 1e30;
    for (int r = 0; r < PASSES; r++) {
        atomic_store(&team.done, 0);
        const double t0 = now_s();
        atomic_store(&team.start, r + 1);
        read_pass(&team, 0);
        while (atomic_load(&team.done) < n_threads - 1) {}
        const double s = now_s() - t0;
        if (r > 0 && s < best) best = s;
    }
    atomic_store(&team.start, -1);
    for (int i = 1; i < n_threads; i++) pthread_join(tid[i], NULL);
    for (int i = 0; i < n_threads; i++) *check += team.sums[i];
    return best;
}

// ---------------------------------------------------------------------------
// The kernel pass.

// A kind of matrix: what decides which kernel mul_mat runs and how fast.
struct kind {
    const struct mg_tensor * first;   // the first matrix of this kind
    size_t                   bytes;   // all matrices of this kind, read per token
    double                   gbs;     // the kernel pass's rate on it
};

static bool same_kind(const struct mg_tensor * a, const struct mg_tensor * b) {
    return a->type == b->type && a->ne[0] == b->ne[0] && (a->repacked == NULL) == (b->repacked == NULL);
}

// The model's matrices (2-D and more, 8 rows or more) by kind; the rest
// (norm vectors) is not multiplied. Returns how many kinds.
static int find_kinds(const struct mg_model * m, struct kind kinds[MAX_KINDS]) {
    int n = 0;
    for (struct mg_tensor * t = mg_get_first_tensor(m->ctx); t != NULL; t = mg_get_next_tensor(m->ctx, t)) {
        if (!read_whole(m, t) || t->ne[1] < MG_VEC_DOT_MAX_ROWS) continue;
        int k = 0;
        while (k < n && !same_kind(kinds[k].first, t)) k++;
        if (k == n) {
            if (n == MAX_KINDS) continue;
            kinds[n++] = (struct kind) {t, 0, 0.0};
        }
        kinds[k].bytes += mg_nbytes(t);
    }
    return n;
}

// KERNEL_REPEATS mul_mats of the first rows of w (every thread's share
// about L2_SHARE bytes) by one column, timed on the engine's thread pool.
static double time_kernel(const struct mg_tensor * w, int n_threads, struct mg_threadpool * tp) {
    const size_t  row    = w->nb[1];
    int64_t       rows   = (int64_t) ((size_t) L2_SHARE * (size_t) n_threads / row) / 8 * 8;
    const int64_t w_rows = mg_nelements(w) / w->ne[0];
    rows                 = rows < 8 ? 8 : rows > w_rows / 8 * 8 ? w_rows / 8 * 8 : rows;
    const size_t mem = (size_t) (KERNEL_REPEATS + 4) * mg_tensor_overhead() + mg_graph_overhead_custom(2 * KERNEL_REPEATS + 8) +
                       (size_t) rows * row + (size_t) (KERNEL_REPEATS + 1) * (size_t) (w->ne[0] + rows) * sizeof(float);
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = mem});
    if (ctx == NULL) return 0.0;
    // The weight's first rows, read where the model keeps them (the
    // repacked layout keeps groups of 8 rows together, so they come first
    // there too); the bytes made for a are not used.
    struct mg_tensor * a = mg_new_tensor_2d(ctx, w->type, w->ne[0], rows);
    a->data              = w->data;
    a->repacked          = w->repacked;
    struct mg_tensor * x = mg_new_tensor_1d(ctx, MG_TYPE_F32, w->ne[0]);
    for (int64_t i = 0; i < w->ne[0]; i++) ((float *) x->data)[i] = (float) ((i * 37) % 17 - 8) / 8.0f;
    struct mg_cgraph * g = mg_new_graph_custom(ctx, 2 * KERNEL_REPEATS + 8);
    for (int r = 0; r < KERNEL_REPEATS; r++) mg_build_forward_expand(g, mg_mul_mat(ctx, a, x));
    struct mg_gallocr * ga = mg_gallocr_new(0);   // the products' memory (ops made none)
    if (ga == NULL || !mg_gallocr_alloc_graph(ga, g)) {
        mg_gallocr_free(ga);
        mg_free(ctx);
        return 0.0;
    }
    struct mg_cplan plan = mg_graph_plan(g, n_threads);
    plan.threadpool      = tp;
    plan.work_data       = malloc(plan.work_size > 0 ? plan.work_size : 1);
    double best          = 1e30;
    for (int r = 0; r < KERNEL_RUNS && plan.work_data != NULL; r++) {
        const double t0 = now_s();
        mg_graph_compute(g, &plan);
        const double s = now_s() - t0;
        if (r > 0 && s < best) best = s;
    }
    free(plan.work_data);
    mg_gallocr_free(ga);
    mg_free(ctx);
    return (double) KERNEL_REPEATS * (double) rows * (double) row / best / 1e9;
}

// ---------------------------------------------------------------------------

static size_t bytes_per_token(const struct mg_model * m) {
    size_t n = 0;
    for (struct mg_tensor * t = mg_get_first_tensor(m->ctx); t != NULL; t = mg_get_next_tensor(m->ctx, t)) {
        if (read_whole(m, t)) n += mg_nbytes(t);
    }
    return n;
}

static const char * base_name(const char * path) {
    const char * slash = strrchr(path, '/');
    return slash != NULL ? slash + 1 : path;
}

static void one_row(const char * path, const struct mg_model * m, int n_threads, uint64_t * check) {
    const double bytes = (double) bytes_per_token(m);
    const double read  = bytes / time_read_pass(m, n_threads, check) / 1e9;
    struct kind  kinds[MAX_KINDS];
    const int    n_kinds = find_kinds(m, kinds);
    struct mg_threadpool * tp = mg_threadpool_new(n_threads);
    double kernel_s = 0.0, kernel_bytes = 0.0;   // a token's kernel time, bytes-weighted over the kinds
    for (int k = 0; k < n_kinds; k++) {
        kinds[k].gbs = time_kernel(kinds[k].first, n_threads, tp);
        kernel_s += (double) kinds[k].bytes / (kinds[k].gbs * 1e9);
        kernel_bytes += (double) kinds[k].bytes;
    }
    mg_threadpool_free(tp);
    const double kernel = kernel_bytes / kernel_s / 1e9;
    const double serial = 1.0 / (1.0 / read + 1.0 / kernel);
    printf("| %-26s | %2d | %10.1f MiB | %14.1f | %16.1f | %24.1f |", base_name(path), n_threads,
           bytes / (1024.0 * 1024.0), read, kernel, serial);
    for (int k = 0; k < n_kinds; k++) {
        printf("%s %s%s x%lld: %.0f", k ? ";" : "", mg_type_name(kinds[k].first->type),
               kinds[k].first->repacked ? " repacked" : "", (long long) kinds[k].first->ne[0], kinds[k].gbs);
    }
    printf(" |");
    printf("\n");
    fflush(stdout);
}

static int usage(void) {
    fprintf(stderr, "usage: decode_bound -m MODEL.gguf [-m MODEL2.gguf ...] [-t 1,2]\n");
    return 2;
}

int main(int argc, char ** argv) {
    const char * models[MAX_MODELS];
    int          n_models = 0;
    const char * list     = "1,2";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-m") == 0 && i + 1 < argc && n_models < MAX_MODELS) {
            models[n_models++] = argv[++i];
        } else if (strcmp(argv[i], "-t") == 0 && i + 1 < argc) {
            list = argv[++i];
        } else {
            fprintf(stderr, "decode_bound: unknown or incomplete argument \"%s\"\n", argv[i]);
            return usage();
        }
    }
    if (n_models == 0) return usage();
    int threads[MAX_THREADS], n_list = 0;
    for (const char * p = list; *p != '\0' && n_list < MAX_THREADS;) {
        char *     end;
        const long t = strtol(p, &end, 10);
        if (end == p || t < 1 || t > MAX_THREADS || (*end != ',' && *end != '\0')) {
            fprintf(stderr, "decode_bound: -t wants thread counts like 1,2 (each 1..%d), not \"%s\"\n", MAX_THREADS, list);
            return 2;
        }
        threads[n_list++] = (int) t;
        p                 = *end == ',' ? end + 1 : end;
    }
    printf("| %-26s | %2s | %14s | %14s | %16s | %24s | %s |\n", "model", "t", "read per token",
           "read pass GB/s", "kernel pass GB/s", "one after the other GB/s",
           "kernel pass by kind of matrix (type, row length: GB/s)");
    printf("|%s|---:|---:|---:|---:|---:|---|\n", "----------------------------");
    uint64_t check = 0;
    for (int i = 0; i < n_models; i++) {
        struct mg_model * m = mg_model_load_from_file(models[i], mg_model_default_params());
        if (m == NULL) {
            fprintf(stderr, "decode_bound: %s\n", mg_last_error());
            return 1;
        }
        for (int j = 0; j < n_list; j++) one_row(models[i], m, threads[j], &check);
        mg_model_free(m);
    }
    return check == 42 ? 3 : 0;   // uses the sums, so the reads cannot be dropped
}
