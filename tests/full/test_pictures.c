// test_pictures.c - the pictures of a real run: the Chrome trace of a session
// (--trace-json) and the memory maps mg run writes (--svg), parsed back.
//
// The trace is read with full/'s JSON parser (json.h): every slice has a
// non-negative time, each thread's slices nest, and a decode step's slices
// are one per node each thread computed, counted from the session's graph.
#define _POSIX_C_SOURCE 200809L   // mkdtemp
#include "harness.h"
#include "mg.h"
#include "json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char * model_path(void) {
    static char p[4096];
    snprintf(p, sizeof(p), "%s", mg_test_root("models/fortune-toy-q8_0.gguf"));
    return p;
}

static const char * str_of(const struct mg_json * v) {
    return v != NULL && v->type == MG_JSON_STRING ? v->str : "";
}

static int64_t int_of(const struct mg_json * v) {
    int64_t x = -1;
    ck_assert_msg(mg_json_get_int(v, &x), "not an integer");
    return x;
}

struct tslice {
    int64_t t0, t1;   // nanoseconds
    int     tid;
    bool    graph;
};

static int by_track_then_start(const void * a, const void * b) {
    const struct tslice * x = a, * y = b;
    if (x->tid != y->tid) return x->tid - y->tid;
    if (x->t0 != y->t0) return x->t0 < y->t0 ? -1 : 1;
    return x->t1 > y->t1 ? -1 : x->t1 < y->t1;
}

// Nested or disjoint on every track, graph slices outermost.
static void check_nesting(struct tslice * s, int n) {
    qsort(s, (size_t) n, sizeof(*s), by_track_then_start);
    int64_t graph_end = -1;
    int64_t last_end  = -1;
    for (int i = 0; i < n; i++) {
        if (i > 0 && s[i].tid != s[i - 1].tid) graph_end = last_end = -1;
        if (s[i].graph) {
            ck_assert_msg(s[i].t0 >= graph_end, "two graph slices overlap on thread %d", s[i].tid);
            graph_end = s[i].t1;
            last_end  = s[i].t0;
        } else {
            ck_assert_msg(s[i].t0 >= last_end && s[i].t1 <= graph_end, "a slice on thread %d at %lld is not inside its "
                          "graph or overlaps the one before", s[i].tid, (long long) s[i].t0);
            last_end = s[i].t1;
        }
    }
}

START_TEST(test_session_trace_counts_the_graph) {
    struct mg_model * m = mg_model_load(model_path());
    ck_assert_msg(m != NULL, "%s", mg_last_error());
    struct mg_session_params p = mg_session_default_params();
    p.n_threads = 2;
    p.n_ctx     = 64;
    struct mg_session *  s  = mg_session_new(m, p);
    struct mg_timeline * tl = mg_timeline_new();
    mg_session_set_timeline(s, tl);
    const int32_t prompt[4] = {1968, 311, 234, 832};
    ck_assert(mg_decode(s, prompt, 4, false));
    for (int i = 0; i < 3; i++) {
        const int32_t next = 100 + i;
        ck_assert(mg_decode(s, &next, 1, false));
    }
    const struct mg_cgraph * g = mg_session_graph(s);   // the decode graph: the last three runs
    int want_nodes[2] = {0, 0};
    for (int i = 0; i < g->n_nodes; i++) {
        for (int ith = 0; ith < 2; ith++) {
            want_nodes[ith] += ith < mg_node_n_tasks(g->nodes[i], 2) && !mg_op_is_view(g->nodes[i]->op);
        }
    }

    char dir[] = "/tmp/mg_test_pictures_XXXXXX", path[96];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/trace.json", dir);
    ck_assert(mg_timeline_write_json(tl, path));
    struct mg_json * doc = mg_json_parse_file(path);
    ck_assert_msg(doc != NULL, "%s", mg_last_error());
    const struct mg_json * ev = mg_json_get(doc, "traceEvents");
    ck_assert(ev != NULL && ev->type == MG_JSON_ARRAY);

    int got_nodes[4][2] = {{0}};   // [run][thread]
    int n_slices = 0;
    struct tslice * sl = calloc(ev->n, sizeof(*sl));
    for (size_t i = 0; i < ev->n; i++) {
        const struct mg_json * e = &ev->items[i];
        if (strcmp(str_of(mg_json_get(e, "ph")), "X") != 0) continue;
        const double ts = mg_json_get(e, "ts")->number, dur = mg_json_get(e, "dur")->number;
        ck_assert(ts >= 0 && dur >= 0);
        const int tid = (int) int_of(mg_json_get(e, "tid"));
        ck_assert(tid == 0 || tid == 1);
        const char * name = str_of(mg_json_get(e, "name"));
        const struct mg_json * args = mg_json_get(e, "args");
        const int run = (int) int_of(mg_json_get(args, "run"));
        ck_assert(run >= 0 && run < 4);
        sl[n_slices++] = (struct tslice) {.t0 = llround(ts * 1e3), .t1 = llround(ts * 1e3) + llround(dur * 1e3),
                                          .tid = tid, .graph = strcmp(name, "graph") == 0};
        if (strcmp(name, "graph") == 0 || strcmp(name, "barrier") == 0 || strcmp(name, "init") == 0) continue;
        got_nodes[run][tid]++;
        const int node = (int) int_of(mg_json_get(args, "node"));
        if (run >= 1) {   // a decode step: the args describe the graph's node
            ck_assert(node >= 0 && node < g->n_nodes);
            ck_assert_str_eq(str_of(mg_json_get(args, "op")), mg_op_name(g->nodes[node]->op));
            ck_assert_str_eq(str_of(mg_json_get(args, "name")), g->nodes[node]->name);
            const struct mg_json * shape = mg_json_get(args, "shape");
            ck_assert(shape != NULL && shape->n == 4);
            for (int d = 0; d < 4; d++) ck_assert_int_eq(int_of(&shape->items[d]), g->nodes[node]->ne[d]);
        }
    }
    for (int run = 1; run < 4; run++) {
        for (int ith = 0; ith < 2; ith++) ck_assert_int_eq(got_nodes[run][ith], want_nodes[ith]);
    }
    ck_assert_int_gt(got_nodes[0][0], 0);
    check_nesting(sl, n_slices);
    free(sl);
    mg_json_free(doc);
    unlink(path);
    rmdir(dir);
    mg_session_free(s);
    mg_timeline_free(tl);
    mg_model_free(m);
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("pictures");
    TCase * tc = tcase_create("session");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_session_trace_counts_the_graph);
    suite_add_tcase(s, tc);
    return s;
}
