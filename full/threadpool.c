//@file 08
// threadpool.c - persistent workers, a spinning barrier, and the threaded
// graph loop (ggml-cpu.c: ggml_threadpool, ggml_barrier, ggml_graph_compute_thread).
#define _DEFAULT_SOURCE
#include "threadpool.h"
#include "compute.h"
#include "plan.h"
#include "timeline.h"
#include "trace.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#define SPIN_ROUNDS_BEFORE_SLEEP 100000   // about a few milliseconds of spinning for the next graph
#define SPIN_ROUNDS_BEFORE_YIELD 1000     // in a barrier: give the core away if the others are slow
#define JOB_SHIFT 10                      // the low bits of a job word count threads (< 1024)

struct worker {
    struct mg_threadpool * tp;
    int                    ith;
    pthread_t              thread;
    bool                   woke_spinning;   // how it noticed the current graph (for the trace)
};

struct mg_threadpool {
    int             n_threads;
    struct worker * workers;       // [0] is the caller's thread: it has no pthread of its own

    // A new graph is announced by bumping job. Sleeping workers are woken
    // through the mutex and condition variable; spinning ones see the new
    // value directly. The job word also carries how many threads take part,
    // so a worker that sits this graph out reads that number from the very
    // value that woke it, never from a later graph's (ggml packs n_graph the
    // same way).
    pthread_mutex_t mutex;
    pthread_cond_t  cond;
    atomic_int      job;   // (graph counter << JOB_SHIFT) | threads taking part
    atomic_bool     stop;

    // The graph being run: written before job is bumped, read only by the
    // threads taking part, which all finish before the next bump.
    struct mg_cgraph *      graph;
    const struct mg_cplan * plan;
    int                     n_active;   // the caller's copy of the job's thread count

    // The barrier's two counters, each on its own cache line: every thread
    // hammers them, and sharing a line with anything else would slow it down.
    _Alignas(MG_CACHE_LINE) atomic_int barrier_count;
    _Alignas(MG_CACHE_LINE) atomic_int barrier_phase;

    struct mg_threadpool_stats stats;

    // Where the threads record their slices (NULL: they do not), and how many
    // workers have finished recording the current graph.
    struct mg_timeline * timeline;
    int                  timeline_pool;
    atomic_int           timeline_done;
};

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();   // tells the core we are spinning: saves power, frees the sibling
#endif
}

//@+ 08 barrier
// Everyone waits until the last of n_active arrives. The last one resets the
// count and moves the phase on; the others spin until they see the phase move.
static void barrier(struct mg_threadpool * tp) {
    const int n = tp->n_active;
    if (n == 1) return;
    const int phase = atomic_load_explicit(&tp->barrier_phase, memory_order_relaxed);
    if (atomic_fetch_add_explicit(&tp->barrier_count, 1, memory_order_acq_rel) == n - 1) {
        atomic_store_explicit(&tp->barrier_count, 0, memory_order_relaxed);
        atomic_fetch_add_explicit(&tp->barrier_phase, 1, memory_order_release);
        return;
    }
    for (int spins = 0; atomic_load_explicit(&tp->barrier_phase, memory_order_acquire) == phase; spins++) {
        if (spins < SPIN_ROUNDS_BEFORE_YIELD) {
            cpu_relax();
        } else {
            sched_yield();   // more threads than cores: let the thread we wait for run
        }
    }
}
//@- 08 barrier

// A barrier, and on the timeline the wait at it (with one thread nobody waits).
// n_active is read before the barrier: after the last one the caller may start the next graph.
static void timed_barrier(struct mg_threadpool * tp, struct mg_timeline_track * tr, int node) {
    const bool     waits = tp->n_active > 1;
    const uint64_t t0    = mg_timeline_now(tr);
    barrier(tp);
    if (waits) mg_timeline_record(tr, MG_SLICE_BARRIER, node, t0);
}

static void trace_shares(int i, const struct mg_tensor * node, int n_tasks) {
    if (!mg_trace_on(MG_TRACE_THREADS)) return;
    char line[512];
    int  len = snprintf(line, sizeof(line), "#%-3d %-9s %-20s", i, mg_op_name(node->op), node->name);
    const int64_t n_rows = mg_compute_n_rows(node);
    for (int ith = 0; ith < n_tasks && len < (int) sizeof(line); ith++) {
        int64_t r0, r1;
        mg_split_rows(n_rows, ith, n_tasks, &r0, &r1);
        len += snprintf(line + len, sizeof(line) - (size_t) len, " t%d[%lld,%lld)", ith, (long long) r0, (long long) r1);
    }
    mg_trace(MG_TRACE_THREADS, "%s", line);
}

//@+ 08 graph-share
// What every thread does with a graph: all nodes in order, its share of
// each, a barrier after each, so the next node reads finished inputs.
static void compute_graph_share(struct mg_threadpool * tp, int ith) {
    struct mg_cgraph *      g       = tp->graph;
    const struct mg_cplan * plan    = tp->plan;
    // Read once: after the last barrier the caller may already free the graph,
    // so the loop must not look at it again to learn that it is done.
    const int               n_nodes = g->n_nodes;
    struct mg_timeline_track * tr   = mg_timeline_track(tp->timeline, tp->timeline_pool, ith);   // NULL: no timeline
    const uint64_t          t_graph = mg_timeline_now(tr);
    for (int i = 0; i < n_nodes; i++) {
        struct mg_tensor * node    = g->nodes[i];
        const int          n_tasks = mg_node_n_tasks(node, plan->n_threads);
        const struct mg_compute_params p = {.ith = ith, .nth = n_tasks, .wsize = plan->work_size,
                                            .wdata = plan->work_data};
        if (ith == 0) {
            mg_graph_trace_node(i, node);
            trace_shares(i, node, n_tasks);
        }
        if (mg_compute_needs_init(node)) {
            const uint64_t t = mg_timeline_now(tr);
            if (ith < n_tasks) mg_compute_forward_init(&p, node);
            if (ith < n_tasks) mg_timeline_record(tr, MG_SLICE_INIT, i, t);
            timed_barrier(tp, tr, i);   // the converted activations must be complete before any dot product
        }
        const uint64_t t = mg_timeline_now(tr);
        if (ith < n_tasks) mg_compute_forward(&p, node);
        if (ith < n_tasks && !mg_op_is_view(node->op)) mg_timeline_record(tr, MG_SLICE_NODE, i, t);
        timed_barrier(tp, tr, i);
    }
    mg_timeline_record(tr, MG_SLICE_GRAPH, -1, t_graph);
    // The caller reads the tracks once every worker has said it is done with its own.
    if (tr != NULL && ith > 0) atomic_fetch_add_explicit(&tp->timeline_done, 1, memory_order_release);
}
//@- 08 graph-share

//@+ 08 wait-for-work
// Wait for a job word other than *seen: spin first, then sleep.
static void wait_for_work(struct mg_threadpool * tp, struct worker * w, int * seen) {
    for (int spins = 0; spins < SPIN_ROUNDS_BEFORE_SLEEP; spins++) {
        const int job = atomic_load_explicit(&tp->job, memory_order_acquire);
        if (job != *seen) {
            *seen = job;
            w->woke_spinning = true;
            return;
        }
        cpu_relax();
    }
    pthread_mutex_lock(&tp->mutex);
    // Checked under the mutex that the announcer holds: a bump cannot slip
    // in between this check and the wait (no lost wake-up).
    while (atomic_load_explicit(&tp->job, memory_order_acquire) == *seen) {
        pthread_cond_wait(&tp->cond, &tp->mutex);
    }
    *seen = atomic_load_explicit(&tp->job, memory_order_acquire);
    pthread_mutex_unlock(&tp->mutex);
    w->woke_spinning = false;
}
//@- 08 wait-for-work

static void * worker_main(void * arg) {
    struct worker *        w    = arg;
    struct mg_threadpool * tp   = w->tp;
    int                    seen = 0;
    for (;;) {
        wait_for_work(tp, w, &seen);
        if (atomic_load_explicit(&tp->stop, memory_order_acquire)) break;
        const int n_active = seen & ((1 << JOB_SHIFT) - 1);
        if (w->ith < n_active) compute_graph_share(tp, w->ith);
    }
    return NULL;
}

// Publish a new job for n_active threads (or the stop signal) to every worker.
static void announce(struct mg_threadpool * tp, int n_active) {
    pthread_mutex_lock(&tp->mutex);
    const int job = atomic_load_explicit(&tp->job, memory_order_relaxed);
    atomic_store_explicit(&tp->job, ((job >> JOB_SHIFT) + 1) << JOB_SHIFT | n_active, memory_order_release);
    pthread_cond_broadcast(&tp->cond);
    pthread_mutex_unlock(&tp->mutex);
}

struct mg_threadpool * mg_threadpool_new(int n_threads) {
    MG_ASSERT(n_threads >= 1 && n_threads < (1 << JOB_SHIFT));
    struct mg_threadpool * tp = calloc(1, sizeof(*tp));
    MG_ASSERT(tp != NULL);
    tp->n_threads = n_threads;
    tp->workers   = calloc((size_t) n_threads, sizeof(struct worker));
    MG_ASSERT(tp->workers != NULL);
    pthread_mutex_init(&tp->mutex, NULL);
    pthread_cond_init(&tp->cond, NULL);
    atomic_init(&tp->job, 0);
    atomic_init(&tp->stop, false);
    atomic_init(&tp->barrier_count, 0);
    atomic_init(&tp->barrier_phase, 0);
    atomic_init(&tp->timeline_done, 0);
    for (int i = 0; i < n_threads; i++) {
        tp->workers[i] = (struct worker) {.tp = tp, .ith = i};
        if (i > 0) {
            const int rc = pthread_create(&tp->workers[i].thread, NULL, worker_main, &tp->workers[i]);
            MG_ASSERT(rc == 0 && "cannot create a worker thread");
        }
    }
    return tp;
}

void mg_threadpool_free(struct mg_threadpool * tp) {
    if (tp == NULL) return;
    atomic_store_explicit(&tp->stop, true, memory_order_release);
    announce(tp, 0);
    for (int i = 1; i < tp->n_threads; i++) pthread_join(tp->workers[i].thread, NULL);
    pthread_mutex_destroy(&tp->mutex);
    pthread_cond_destroy(&tp->cond);
    free(tp->workers);
    free(tp);
}

int mg_threadpool_n_threads(const struct mg_threadpool * tp) {
    return tp->n_threads;
}

struct mg_threadpool_stats mg_threadpool_get_stats(const struct mg_threadpool * tp) {
    return tp->stats;
}

void mg_threadpool_set_timeline(struct mg_threadpool * tp, struct mg_timeline * tl) {
    tp->timeline      = tl;
    tp->timeline_pool = tl != NULL ? mg_timeline_add_pool(tl, tp->n_threads) : 0;
}

static void run_graph(struct mg_threadpool * tp, struct mg_cgraph * g, const struct mg_cplan * plan) {
    tp->graph    = g;
    tp->plan     = plan;
    tp->n_active = plan->n_threads;
    if (tp->timeline != NULL) {
        mg_timeline_begin_graph(tp->timeline, tp->timeline_pool, g, tp->n_active);
        atomic_store_explicit(&tp->timeline_done, 0, memory_order_relaxed);
    }
    announce(tp, plan->n_threads);
    compute_graph_share(tp, 0);   // the caller is a worker too
    if (tp->timeline != NULL) {
        while (atomic_load_explicit(&tp->timeline_done, memory_order_acquire) < tp->n_active - 1) cpu_relax();
    }
    // The last barrier of the last node has been passed by everyone: the
    // workers are done with this graph, and what they recorded is visible.
    tp->stats.n_graphs++;
    for (int i = 1; i < tp->n_active; i++) {
        if (tp->workers[i].woke_spinning) tp->stats.wakeups_spin++; else tp->stats.wakeups_sleep++;
        mg_trace(MG_TRACE_THREADS, "graph %llu: t%d woke %s", (unsigned long long) tp->stats.n_graphs, i,
                 tp->workers[i].woke_spinning ? "while spinning" : "from sleep");
    }
}

void mg_graph_compute(struct mg_cgraph * g, const struct mg_cplan * plan) {
    if (g->n_nodes == 0) return;   // nothing to run, and no barrier to wait for the workers at
    struct mg_threadpool * tp = plan->threadpool;
    if (tp == NULL) tp = mg_threadpool_new(plan->n_threads);   // a pool for this one compute
    MG_ASSERT(plan->n_threads <= tp->n_threads && "the plan wants more threads than the pool has");
    run_graph(tp, g, plan);
    if (plan->threadpool == NULL) mg_threadpool_free(tp);
}
