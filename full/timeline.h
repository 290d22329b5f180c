//@file 08
// timeline.h - where the time goes: every thread's slices, as a Chrome trace.
//
//     struct mg_timeline * tl = mg_timeline_new();
//     mg_threadpool_set_timeline(tp, tl);        // this pool's threads record from now on
//     mg_graph_compute(g, &plan);                // ... as often as you like
//     mg_timeline_write_json(tl, "trace.json");  // open in https://ui.perfetto.dev or chrome://tracing
//     mg_timeline_free(tl);                      // after the pools that record into it
//
// Each thread of the pool is one track; each node a thread computed is one
// slice on its track (op, name, shape, type in its args), and so is each wait
// at a barrier, inside one slice per graph. A picture of chapter 08 at work:
// who computed what, how evenly the rows were shared, how long the fast
// threads waited for the slow one. The times come from
// clock_gettime(CLOCK_MONOTONIC). Every thread writes only its own track,
// into room the caller made before the graph started, so recording takes no
// lock; with no timeline set, a thread does one NULL test per node. (ggml has
// no built-in trace; llama.cpp users reach for perf or GGML_SCHED debug output.)
#pragma once

#include "graph.h"

#include <stdint.h>
#include <time.h>

enum mg_slice_kind {
    MG_SLICE_GRAPH,     // one graph, from the thread's start to its last barrier
    MG_SLICE_NODE,      // its share of one node's forward pass
    MG_SLICE_INIT,      // its share of a node's init phase (mul_mat converting its activations)
    MG_SLICE_BARRIER,   // waiting for the other threads
};

struct mg_timeline_slice {
    uint64_t t0, t1;   // nanoseconds, CLOCK_MONOTONIC
    int32_t  node;     // index in the graph (-1 for a graph slice)
    int32_t  run;      // which graph run (mg_timeline_begin_graph) it belongs to
    int32_t  kind;     // enum mg_slice_kind
};

// One thread's slices. Only that thread writes it, while a graph runs.
struct mg_timeline_track {
    struct mg_timeline_slice * slices;
    int                        n, cap;
    int                        n_dropped;   // slices that found no room (never, unless the caller forgot to reserve)
    int                        run;         // the run being recorded
};

struct mg_timeline;

struct mg_timeline * mg_timeline_new(void);
void                 mg_timeline_free(struct mg_timeline * tl);

// A pool's tracks: n_threads of them, one "process" of the trace per pool.
// Returns the pool's index (the JSON's pid).
int mg_timeline_add_pool(struct mg_timeline * tl, int n_threads);
struct mg_timeline_track * mg_timeline_track(struct mg_timeline * tl, int pool, int ith);

// Called by the pool before it starts g on n_active threads: remembers each
// node's op, name and shape (the graph may be gone when the file is written)
// and makes room on every track for this graph's slices.
void mg_timeline_begin_graph(struct mg_timeline * tl, int pool, const struct mg_cgraph * g, int n_active);

// Write every recorded slice as Chrome trace-event JSON. False, with
// mg_last_error(), if path cannot be written.
bool mg_timeline_write_json(const struct mg_timeline * tl, const char * path);

// The last graph run of a pool as an SVG picture (svg.h): one row per
// thread, time to the right, a box per slice coloured like its op in the DOT
// drawing, barrier waits grey. False, with mg_last_error(), if it cannot be written.
bool mg_timeline_dump_svg(const struct mg_timeline * tl, int pool, const char * title, const char * path);

//@+ full timeline-node-times
// Each node's wall time in microseconds, averaged over the recorded runs of
// the graph g describes now (the slowest thread's slice per run, since the
// barrier waits for it), into out[n_nodes]; false if g never ran recorded.
bool mg_timeline_node_us(const struct mg_timeline * tl, const struct mg_cgraph * g, double * out);
//@- full timeline-node-times

// Milliseconds on the same clock, for the timings a program prints (decode
// calls, demos, mg's summaries): differences between two calls are what count.
static inline double mg_time_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec * 1e3 + (double) ts.tv_nsec / 1e6;
}

// The slice recorder: one NULL test when tracing is off.
static inline uint64_t mg_timeline_now(const struct mg_timeline_track * tr) {
    if (tr == NULL) return 0;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

// A slice from t0 (an earlier mg_timeline_now) to now; returns now.
static inline uint64_t mg_timeline_record(struct mg_timeline_track * tr, enum mg_slice_kind kind, int node, uint64_t t0) {
    if (tr == NULL) return 0;
    const uint64_t t1 = mg_timeline_now(tr);
    if (tr->n < tr->cap) {
        tr->slices[tr->n++] = (struct mg_timeline_slice) {.t0 = t0, .t1 = t1, .node = node, .run = tr->run, .kind = kind};
    } else {
        tr->n_dropped++;
    }
    return t1;
}
