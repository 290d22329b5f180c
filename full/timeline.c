//@file 08
// timeline.c - recording slices per thread, and writing them as a Chrome
// trace (the "trace event format": one JSON object per slice, "ph":"X").
#define _POSIX_C_SOURCE 200809L
#include "timeline.h"
#include "plan.h"
#include "svg.h"
//@+ full outfile
#include "outfile.h"
//@- full outfile

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

// What a slice's args say about its node, copied when the graph starts.
struct node_info {
    enum mg_op   op;
    enum mg_type type;
    int64_t      ne[MG_MAX_DIMS];
    char         name[MG_MAX_NAME];
};

struct node_table {
    struct node_info * nodes;
    int                n_nodes;
};

struct graph_run {
    int table, pool, n_active;
};

struct pool_tracks {
    int                        n_threads;
    struct mg_timeline_track * tracks;
};

struct mg_timeline {
    uint64_t             t_start;   // the trace's zero
    struct pool_tracks * pools;
    int                  n_pools;
    struct node_table *  tables;    // one per distinct graph (a reused graph shares its table)
    int                  n_tables;
    struct graph_run *   runs;
    int                  n_runs, cap_runs;
};

struct mg_timeline * mg_timeline_new(void) {
    struct mg_timeline * tl = calloc(1, sizeof(*tl));
    MG_ASSERT(tl != NULL);
    struct mg_timeline_track any = {0};   // mg_timeline_now reads the clock for any non-NULL track
    tl->t_start = mg_timeline_now(&any);
    return tl;
}

void mg_timeline_free(struct mg_timeline * tl) {
    if (tl == NULL) return;
    for (int p = 0; p < tl->n_pools; p++) {
        for (int i = 0; i < tl->pools[p].n_threads; i++) free(tl->pools[p].tracks[i].slices);
        free(tl->pools[p].tracks);
    }
    for (int i = 0; i < tl->n_tables; i++) free(tl->tables[i].nodes);
    free(tl->pools);
    free(tl->tables);
    free(tl->runs);
    free(tl);
}

int mg_timeline_add_pool(struct mg_timeline * tl, int n_threads) {
    tl->pools = realloc(tl->pools, (size_t) (tl->n_pools + 1) * sizeof(*tl->pools));
    MG_ASSERT(tl->pools != NULL);
    struct pool_tracks * p = &tl->pools[tl->n_pools];
    p->n_threads = n_threads;
    p->tracks    = calloc((size_t) n_threads, sizeof(*p->tracks));
    MG_ASSERT(p->tracks != NULL);
    return tl->n_pools++;
}

struct mg_timeline_track * mg_timeline_track(struct mg_timeline * tl, int pool, int ith) {
    return tl == NULL ? NULL : &tl->pools[pool].tracks[ith];
}

static void describe_node(struct node_info * info, const struct mg_tensor * t) {
    info->op   = t->op;
    info->type = t->type;
    memcpy(info->ne, t->ne, sizeof(info->ne));
    memcpy(info->name, t->name, sizeof(info->name));
}

// The table of g's nodes: the last one if it describes the same nodes (a
// reused graph), else a new one.
static int table_of(struct mg_timeline * tl, const struct mg_cgraph * g) {
    if (tl->n_tables > 0) {
        const struct node_table * last = &tl->tables[tl->n_tables - 1];
        bool same = last->n_nodes == g->n_nodes;
        for (int i = 0; same && i < g->n_nodes; i++) {
            struct node_info info;
            describe_node(&info, g->nodes[i]);
            same = last->nodes[i].op == info.op && last->nodes[i].type == info.type &&
                   memcmp(last->nodes[i].ne, info.ne, sizeof(info.ne)) == 0 && strcmp(last->nodes[i].name, info.name) == 0;
        }
        if (same) return tl->n_tables - 1;
    }
    tl->tables = realloc(tl->tables, (size_t) (tl->n_tables + 1) * sizeof(*tl->tables));
    MG_ASSERT(tl->tables != NULL);
    struct node_table * t = &tl->tables[tl->n_tables];
    t->n_nodes = g->n_nodes;
    t->nodes   = malloc((size_t) (g->n_nodes > 0 ? g->n_nodes : 1) * sizeof(*t->nodes));
    MG_ASSERT(t->nodes != NULL);
    for (int i = 0; i < g->n_nodes; i++) describe_node(&t->nodes[i], g->nodes[i]);
    return tl->n_tables++;
}

//@+ full timeline-node-times
static bool table_describes(const struct node_table * t, const struct mg_cgraph * g) {
    if (t->n_nodes != g->n_nodes) return false;
    for (int i = 0; i < g->n_nodes; i++) {
        struct node_info info;
        describe_node(&info, g->nodes[i]);
        if (t->nodes[i].op != info.op || strcmp(t->nodes[i].name, info.name) != 0 ||
            memcmp(t->nodes[i].ne, info.ne, sizeof(info.ne)) != 0) {
            return false;
        }
    }
    return true;
}

bool mg_timeline_node_us(const struct mg_timeline * tl, const struct mg_cgraph * g, double * out) {
    int table = -1;
    for (int t = tl->n_tables - 1; t >= 0 && table < 0; t--) {
        if (table_describes(&tl->tables[t], g)) table = t;
    }
    if (table < 0) return false;
    double * slowest = calloc((size_t) g->n_nodes + 1, sizeof(double));   // this run's, per node
    MG_ASSERT(slowest != NULL);
    int n_runs = 0;
    for (int i = 0; i < g->n_nodes; i++) out[i] = 0.0;
    for (int r = 0; r < tl->n_runs; r++) {
        if (tl->runs[r].table != table) continue;
        n_runs++;
        for (int i = 0; i < g->n_nodes; i++) slowest[i] = 0.0;
        const struct pool_tracks * pt = &tl->pools[tl->runs[r].pool];
        for (int th = 0; th < tl->runs[r].n_active; th++) {
            for (int k = 0; k < pt->tracks[th].n; k++) {
                const struct mg_timeline_slice * s = &pt->tracks[th].slices[k];
                if (s->run != r || s->kind != MG_SLICE_NODE) continue;
                const double us = (double) (s->t1 - s->t0) / 1e3;
                if (us > slowest[s->node]) slowest[s->node] = us;
            }
        }
        for (int i = 0; i < g->n_nodes; i++) out[i] += slowest[i];
    }
    for (int i = 0; i < g->n_nodes; i++) out[i] /= n_runs;
    free(slowest);
    return n_runs > 0;
}
//@- full timeline-node-times

void mg_timeline_begin_graph(struct mg_timeline * tl, int pool, const struct mg_cgraph * g, int n_active) {
    if (tl->n_runs == tl->cap_runs) {
        tl->cap_runs = tl->cap_runs ? 2 * tl->cap_runs : 64;
        tl->runs     = realloc(tl->runs, (size_t) tl->cap_runs * sizeof(*tl->runs));
        MG_ASSERT(tl->runs != NULL);
    }
    tl->runs[tl->n_runs] = (struct graph_run) {.table = table_of(tl, g), .pool = pool, .n_active = n_active};
    // At most an init, its barrier, the forward pass and its barrier per node, and the graph.
    const int need = 4 * g->n_nodes + 1;
    for (int i = 0; i < n_active; i++) {
        struct mg_timeline_track * tr = &tl->pools[pool].tracks[i];
        if (tr->cap - tr->n < need) {
            tr->cap    = tr->n + need > 2 * tr->cap ? tr->n + need : 2 * tr->cap;
            tr->slices = realloc(tr->slices, (size_t) tr->cap * sizeof(*tr->slices));
            MG_ASSERT(tr->slices != NULL);
        }
        tr->run = tl->n_runs;
    }
    tl->n_runs++;
}

// ---------------------------------------------------------------------------
// JSON
// ---------------------------------------------------------------------------

static void put_json_string(FILE * f, const char * s) {
    fputc('"', f);
    for (; *s; s++) {
        const unsigned char c = (unsigned char) *s;
        if (c == '"' || c == '\\') {
            fprintf(f, "\\%c", c);
        } else if (c < 0x20) {
            fprintf(f, "\\u%04x", c);
        } else {
            fputc(c, f);
        }
    }
    fputc('"', f);
}

static const char * slice_name(const struct mg_timeline_slice * s, const struct node_info * node) {
    switch ((enum mg_slice_kind) s->kind) {
        case MG_SLICE_GRAPH:   return "graph";
        case MG_SLICE_NODE:    return mg_op_name(node->op);   // slices of one op share a colour in Perfetto
        case MG_SLICE_INIT:    return "init";
        case MG_SLICE_BARRIER: return "barrier";
    }
    return "?";
}

static void put_slice(FILE * f, const struct mg_timeline * tl, int pool, int ith, const struct mg_timeline_slice * s) {
    const struct graph_run *  run   = &tl->runs[s->run];
    const struct node_table * table = &tl->tables[run->table];
    const struct node_info *  node  = s->node >= 0 ? &table->nodes[s->node] : NULL;
    // Microseconds since the timeline began, to the nanosecond.
    const double ts = (double) (s->t0 - tl->t_start) / 1e3, dur = (double) (s->t1 - s->t0) / 1e3;
    fprintf(f, ",\n{\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,\"name\":", pool, ith, ts, dur);
    put_json_string(f, slice_name(s, node));
    fprintf(f, ",\"args\":{\"run\":%d", s->run);
    if (node == NULL) {
        fprintf(f, ",\"nodes\":%d,\"threads\":%d", table->n_nodes, run->n_active);
    } else {
        fprintf(f, ",\"node\":%d,\"op\":", s->node);
        put_json_string(f, mg_op_name(node->op));
        fprintf(f, ",\"name\":");
        put_json_string(f, node->name);
        char shape[MG_SHAPE_STR_MAX];
        fprintf(f, ",\"shape\":%s,\"type\":", mg_shape_str(node->ne, MG_MAX_DIMS, ",", shape, sizeof(shape)));
        put_json_string(f, mg_type_name(node->type));
    }
    fprintf(f, "}}");
}

bool mg_timeline_write_json(const struct mg_timeline * tl, const char * path) {
#if 0 //@old 08..09 plain-fopen
    FILE * f = fopen(path, "w");
    if (f == NULL) {
        mg_set_error("%s: cannot write: %s", path, strerror(errno));
        return false;
    }
#endif //@old plain-fopen
    //@+ full outfile
    struct mg_outfile out;   // a temporary file, renamed over path when complete (outfile.h)
    FILE * f = mg_outfile_open(&out, path);
    if (f == NULL) return false;
    //@- full outfile
    fprintf(f, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[");
    for (int p = 0; p < tl->n_pools; p++) {
        fprintf(f, "%s\n{\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"name\":\"process_name\",\"args\":{\"name\":\"pool %d: %d "
                   "thread%s\"}}", p == 0 ? "" : ",", p, p, tl->pools[p].n_threads, tl->pools[p].n_threads == 1 ? "" : "s");
        for (int i = 0; i < tl->pools[p].n_threads; i++) {
            fprintf(f, ",\n{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"thread_name\",\"args\":{\"name\":\"thread %d%s\"}}",
                    p, i, i, i == 0 ? " (the caller)" : "");
            const struct mg_timeline_track * tr = &tl->pools[p].tracks[i];
            for (int k = 0; k < tr->n; k++) put_slice(f, tl, p, i, &tr->slices[k]);
        }
    }
    fprintf(f, "\n]}\n");
#if 0 //@old 08..09 plain-fopen
    const bool ok = !ferror(f);
    if (fclose(f) != 0 || !ok) {
        mg_set_error("%s: write failed: %s", path, strerror(errno));
        return false;
    }
    return true;
#endif //@old plain-fopen
    //@+ full outfile
    return mg_outfile_commit(&out);
    //@- full outfile
}

// ---------------------------------------------------------------------------
// SVG: one run, a row per thread
// ---------------------------------------------------------------------------

enum { TL_WIDTH = 960, TL_LEFT = 130, TL_RIGHT = 20, TL_TOP = 40, TL_ROW = 30, TL_BOTTOM = 40 };

static const char * slice_colour(const struct mg_timeline_slice * s, const struct node_info * node) {
    switch ((enum mg_slice_kind) s->kind) {
        case MG_SLICE_NODE:    return mg_op_dot_colour(node->op);
        case MG_SLICE_INIT:    return "#fff2cc";
        case MG_SLICE_BARRIER: return "#d9d9d9";
        case MG_SLICE_GRAPH:   return "#ffffff";
    }
    return "#ffffff";
}

bool mg_timeline_dump_svg(const struct mg_timeline * tl, int pool, const char * title, const char * path) {
    int run = -1;
    for (int r = 0; r < tl->n_runs; r++) {
        if (tl->runs[r].pool == pool) run = r;
    }
    if (run < 0) {
        mg_set_error("%s: pool %d ran no graph", path, pool);
        return false;
    }
    const struct pool_tracks * pt = &tl->pools[pool];
    const int n_threads = tl->runs[run].n_active;
    uint64_t t_min = UINT64_MAX, t_max = 0;
    for (int i = 0; i < n_threads; i++) {
        for (int k = 0; k < pt->tracks[i].n; k++) {
            const struct mg_timeline_slice * s = &pt->tracks[i].slices[k];
            if (s->run != run) continue;
            if (s->t0 < t_min) t_min = s->t0;
            if (s->t1 > t_max) t_max = s->t1;
        }
    }
    const double span  = t_max > t_min ? (double) (t_max - t_min) : 1.0;
    const double scale = (TL_WIDTH - TL_LEFT - TL_RIGHT) / span;
    struct mg_svg svg;
    if (!mg_svg_begin(&svg, path, TL_WIDTH, TL_TOP + TL_ROW * n_threads + TL_BOTTOM)) return false;
    const struct node_table * table = &tl->tables[tl->runs[run].table];
    mg_svg_text(&svg, TL_LEFT, 18, 13, "start", "%s: %d nodes on %d thread%s in %.1f us (grey: waiting at a barrier)",
                title, table->n_nodes, n_threads, n_threads == 1 ? "" : "s", span / 1e3);
    for (int i = 0; i < n_threads; i++) {
        const double y = TL_TOP + TL_ROW * i;
        mg_svg_text(&svg, TL_LEFT - 8, y + TL_ROW / 2 + 4, 11, "end", "thread %d", i);
        for (int k = 0; k < pt->tracks[i].n; k++) {
            const struct mg_timeline_slice * s = &pt->tracks[i].slices[k];
            if (s->run != run || s->kind == MG_SLICE_GRAPH) continue;
            const struct node_info * node = &table->nodes[s->node];
            const double x = TL_LEFT + scale * (double) (s->t0 - t_min), w = scale * (double) (s->t1 - s->t0);
            char tip[160];
            snprintf(tip, sizeof(tip), "%s #%d %s %s: %.1f us", slice_name(s, node), s->node, mg_op_name(node->op),
                     node->name, (double) (s->t1 - s->t0) / 1e3);
            mg_svg_rect(&svg, x, y + 3, w, TL_ROW - 6, slice_colour(s, node), "class=\"slice\"", tip);
            const char * label = mg_op_name(node->op);
            if (s->kind == MG_SLICE_NODE && 6.0 * (double) strlen(label) + 4 <= w) {
                mg_svg_text(&svg, x + w / 2, y + TL_ROW / 2 + 3, 9, "middle", "%s", label);
            }
        }
    }
    const double bottom = TL_TOP + TL_ROW * n_threads;
    mg_svg_line(&svg, TL_LEFT, bottom + 2, TL_WIDTH - TL_RIGHT, bottom + 2, "#000000", false, NULL);
    for (int q = 0; q <= 4; q++) {
        const double x = TL_LEFT + (TL_WIDTH - TL_LEFT - TL_RIGHT) * q / 4.0;
        mg_svg_line(&svg, x, bottom + 2, x, bottom + 6, "#000000", false, NULL);
        mg_svg_text(&svg, x, bottom + 18, 10, "middle", "%.0f us", span / 1e3 * q / 4.0);
    }
    return mg_svg_end(&svg);
}
