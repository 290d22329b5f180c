//@file 08
// threadpool.h - threads that live as long as the pool and run every graph.
//
//     struct mg_threadpool * tp = mg_threadpool_new(4);
//     struct mg_cplan plan = mg_graph_plan(g, 4);
//     plan.threadpool = tp;
//     plan.work_data  = malloc(plan.work_size);
//     for (...) mg_graph_compute(g, &plan);   // no thread is created here
//     mg_threadpool_free(tp);
//
// Starting threads costs tens of microseconds; a decode step of a small model
// takes about a millisecond and runs hundreds of nodes. So the threads are
// made once, and between graphs they wait: first by spinning a little (a new
// graph often comes right away), then asleep on a condition variable (so an
// idle pool burns no CPU). The caller's thread is worker 0 and works too.
// Inside a graph every thread walks all nodes, computes its share (ith of nth)
// of each, and waits at a barrier before the next node, which may read what
// any thread wrote (ggml-cpu.c: ggml_graph_compute_thread, ggml_barrier).
#pragma once

#include <stdint.h>

struct mg_threadpool;
struct mg_cgraph;
struct mg_cplan;

// Run g on plan->threadpool, or on a pool made for this one call when it is
// NULL: every thread walks all nodes, computes its share of each (init, then
// forward pass) and waits at a barrier before the next (threadpool.c;
// ggml-cpu.c: ggml_graph_compute).
void mg_graph_compute(struct mg_cgraph * g, const struct mg_cplan * plan);

struct mg_threadpool * mg_threadpool_new(int n_threads);   // n_threads >= 1, counting the caller
void                   mg_threadpool_free(struct mg_threadpool * tp);
int                    mg_threadpool_n_threads(const struct mg_threadpool * tp);

struct mg_threadpool_stats {
    uint64_t n_graphs;        // graphs run by this pool
    uint64_t wakeups_spin;    // a worker saw a new graph while still spinning
    uint64_t wakeups_sleep;   // a worker had gone to sleep and was woken
};

// Counters so far (call between graphs).
struct mg_threadpool_stats mg_threadpool_get_stats(const struct mg_threadpool * tp);

// Record every graph this pool runs from now on into tl (timeline.h), as one
// more pool of tracks; NULL stops recording. Call between graphs; tl must
// outlive the recording.
struct mg_timeline;
void mg_threadpool_set_timeline(struct mg_threadpool * tp, struct mg_timeline * tl);
