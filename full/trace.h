//@file 02
// trace.h - one switch for every chapter's tracing.
//
//     MG_TRACE=alloc,graph ./demo        (or MG_TRACE=all)
//
// Each category prints lines that start with "[category] " on stderr, so a
// trace can be read next to the program's own output and compared by tests.
// The switch is read at run time, the way llama.cpp's eval-callback is, not
// compiled in the way ggml-alloc's AT_PRINTF is.
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

enum mg_trace_category {
    MG_TRACE_ALLOC   = 1 << 0,   // arena objects, graph-allocator decisions
    //@+ 04 trace-graph
    MG_TRACE_GRAPH   = 1 << 1,   // graph building
    MG_TRACE_EXEC    = 1 << 2,   // each node as it is computed
    //@- 04 trace-graph
    //@+ 06 trace-kv
    MG_TRACE_KV      = 1 << 3,   // KV cache writes and reads
    //@- 06 trace-kv
    //@+ 07 trace-scratch
    MG_TRACE_SCRATCH = 1 << 4,   // the work-buffer plan
    //@- 07 trace-scratch
    //@+ 08 trace-threads
    MG_TRACE_THREADS = 1 << 5,   // which thread took which rows; wake-ups
    //@- 08 trace-threads
    //@+ 09 trace-infer
    MG_TRACE_INFER   = 1 << 6,   // decode calls, graph reuse
    MG_TRACE_BPE     = 1 << 7,   // the tokenizer: special tokens, pieces, every merge
    MG_TRACE_SAMPLE  = 1 << 8,   // the sampler's candidates after each stage
    //@- 09 trace-infer
    //@+ full trace-sched
    MG_TRACE_SCHED   = 1 << 9,   // the scheduler: backend per node, splits, copies between backends
    //@- full trace-sched
    //@+ full moe
    MG_TRACE_MOE     = 1 << 10,  // mixture of experts: each token's experts and weights, per layer
    //@- full moe
};

// Turn categories on from a comma-separated list ("alloc,graph", "all", "");
// false, with mg_last_error() naming the word, for an unknown category.
bool mg_trace_set(const char * spec);

// Whether a category is on. The first call reads $MG_TRACE.
bool mg_trace_on(enum mg_trace_category cat);

// The value of one of the demos' switches (MG_TRACE, MG_DOT, MG_SVG,
// MG_TRACE_JSON), or NULL when it is unset or empty. The switches are the
// only environment the library reads, and this is the one place that reads
// it; a program with flags of its own (full/'s mg) passes them as parameters.
const char * mg_demo_switch(const char * name);

// Where trace lines go (stderr unless a test captures them).
void mg_trace_set_stream(FILE * f);

// Print one "[category] ..." line (the newline is added) if the category is on.
void mg_trace(enum mg_trace_category cat, const char * fmt, ...) __attribute__((format(printf, 2, 3)));
