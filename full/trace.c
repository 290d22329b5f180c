//@file 02
// trace.c - the MG_TRACE switch.
#include "trace.h"
#include "tensor.h"

#include <stdlib.h>
#include <string.h>

static const struct {
    enum mg_trace_category cat;
    const char *           name;
} categories[] = {
    {MG_TRACE_ALLOC,   "alloc"},
    //@+ 04 trace-graph
    {MG_TRACE_GRAPH,   "graph"},
    {MG_TRACE_EXEC,    "exec"},
    //@- 04 trace-graph
    //@+ 06 trace-kv
    {MG_TRACE_KV,      "kv"},
    //@- 06 trace-kv
    //@+ 07 trace-scratch
    {MG_TRACE_SCRATCH, "scratch"},
    //@- 07 trace-scratch
    //@+ 08 trace-threads
    {MG_TRACE_THREADS, "threads"},
    //@- 08 trace-threads
    //@+ 09 trace-infer
    {MG_TRACE_INFER,   "infer"},
    {MG_TRACE_BPE,     "bpe"},
    {MG_TRACE_SAMPLE,  "sample"},
    //@- 09 trace-infer
    //@+ full trace-sched
    {MG_TRACE_SCHED,   "sched"},
    //@- full trace-sched
    //@+ full moe
    {MG_TRACE_MOE,     "moe"},
    //@- full moe
};
enum { N_CATEGORIES = sizeof(categories) / sizeof(categories[0]) };

static int    enabled     = 0;
static bool   initialized = false;
static FILE * stream      = NULL;

bool mg_trace_set(const char * spec) {
    int mask = 0;
    const char * p = spec ? spec : "";
    while (*p) {
        size_t len = strcspn(p, ",");
        bool found = false;
        if (len == 3 && strncmp(p, "all", 3) == 0) {
            mask = ~0;
            found = true;
        }
        for (int i = 0; i < N_CATEGORIES && !found; i++) {
            if (strlen(categories[i].name) == len && strncmp(p, categories[i].name, len) == 0) {
                mask |= categories[i].cat;
                found = true;
            }
        }
        if (!found && len > 0) {
            char known[128] = "all";
            for (int i = 0; i < N_CATEGORIES; i++) {
                strncat(known, ", ", sizeof(known) - strlen(known) - 1);
                strncat(known, categories[i].name, sizeof(known) - strlen(known) - 1);
            }
            mg_set_error("unknown trace category '%.*s' (known: %s)", (int) len, p, known);
            return false;
        }
        p += len;
        if (*p == ',') p++;
    }
    enabled     = mask;
    initialized = true;
    return true;
}

const char * mg_demo_switch(const char * name) {
    const char * value = getenv(name);
    return value != NULL && value[0] != '\0' ? value : NULL;
}

bool mg_trace_on(enum mg_trace_category cat) {
    if (!initialized) {
        initialized = true;
        const char * env = mg_demo_switch("MG_TRACE");
        if (env != NULL && !mg_trace_set(env)) {
            fprintf(stderr, "MG_TRACE: %s\n", mg_last_error());
        }
    }
    return (enabled & (int) cat) != 0;
}

void mg_trace_set_stream(FILE * f) {
    stream = f;
}

static const char * category_name(enum mg_trace_category cat) {
    for (int i = 0; i < N_CATEGORIES; i++) {
        if (categories[i].cat == cat) return categories[i].name;
    }
    return "?";
}

void mg_trace(enum mg_trace_category cat, const char * fmt, ...) {
    if (!mg_trace_on(cat)) return;
    FILE * f = stream ? stream : stderr;
    fflush(stdout);   // keep the program's own output and the trace in the order they happened
    fprintf(f, "[%s] ", category_name(cat));
    va_list args;
    va_start(args, fmt);
    vfprintf(f, fmt, args);
    va_end(args);
    fputc('\n', f);
}
