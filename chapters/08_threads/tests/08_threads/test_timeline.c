// test_timeline.c - the Chrome trace of the thread pool (timeline.h), read back.
//
// Random layer stacks (random_net.h: quantized matmuls with their init phase,
// views, softmax, rope) run on pools of 1 to 4 threads, and on one 4-thread
// pool with plans for fewer threads, all recorded into one timeline. The JSON
// file must parse (a small JSON checker here), and its slices must match the
// graphs: on every thread, one slice per node it computed (views compute
// nothing and have none), one per init share, one per barrier when there are
// others to wait for, one per graph; every time non-negative; the slices of a
// track disjoint or nested, and each node slice inside its graph's slice.
#define _DEFAULT_SOURCE   // mkstemp
#include "../07_scratch/random_net.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// ---------------------------------------------------------------------------
// A JSON checker: the whole text is one value (RFC 8259's grammar).
// ---------------------------------------------------------------------------

static const char * json_value(const char * p);

static const char * skip_ws(const char * p) {
    while (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t') p++;
    return p;
}

static const char * json_string(const char * p) {
    if (*p != '"') return NULL;
    for (p++; *p != '"'; p++) {
        if ((unsigned char) *p < 0x20) return NULL;
        if (*p == '\\') {
            p++;
            if (*p == 'u') {
                for (int i = 1; i <= 4; i++) {
                    if (!strchr("0123456789abcdefABCDEF", p[i]) || p[i] == '\0') return NULL;
                }
                p += 4;
            } else if (*p == '\0' || !strchr("\"\\/bfnrt", *p)) {
                return NULL;
            }
        }
    }
    return p + 1;
}

static const char * json_number(const char * p) {
    if (*p == '-') p++;
    if (*p < '0' || *p > '9') return NULL;
    while (*p >= '0' && *p <= '9') p++;
    if (*p == '.') {
        p++;
        if (*p < '0' || *p > '9') return NULL;
        while (*p >= '0' && *p <= '9') p++;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') p++;
        if (*p < '0' || *p > '9') return NULL;
        while (*p >= '0' && *p <= '9') p++;
    }
    return p;
}

// An object or an array: members separated by commas, no trailing comma.
static const char * json_container(const char * p, char close, bool keys) {
    p = skip_ws(p + 1);
    if (*p == close) return p + 1;
    for (;;) {
        if (keys) {
            p = json_string(skip_ws(p));
            if (p == NULL) return NULL;
            p = skip_ws(p);
            if (*p++ != ':') return NULL;
        }
        p = json_value(p);
        if (p == NULL) return NULL;
        p = skip_ws(p);
        if (*p == close) return p + 1;
        if (*p++ != ',') return NULL;
    }
}

static const char * json_value(const char * p) {
    p = skip_ws(p);
    switch (*p) {
        case '{': return json_container(p, '}', true);
        case '[': return json_container(p, ']', false);
        case '"': return json_string(p);
        case 't': return strncmp(p, "true", 4) == 0 ? p + 4 : NULL;
        case 'f': return strncmp(p, "false", 5) == 0 ? p + 5 : NULL;
        case 'n': return strncmp(p, "null", 4) == 0 ? p + 4 : NULL;
        default:  return json_number(p);
    }
}

static bool json_is_valid(const char * text) {
    const char * end = json_value(text);
    return end != NULL && *skip_ws(end) == '\0';
}

// ---------------------------------------------------------------------------
// The slices, one "ph":"X" event per line as timeline.c writes them
// ---------------------------------------------------------------------------

struct slice {
    int       pid, tid, run, node;
    long long t0, t1;   // nanoseconds
    char      name[32], op[32], tensor[MG_MAX_NAME];
};

static long long micros_to_ns(double us) {
    return llround(us * 1e3);
}

static int read_slices(const char * text, struct slice ** out) {
    int n = 0, cap = 1024;
    struct slice * s = malloc((size_t) cap * sizeof(*s));
    for (const char * line = text; (line = strstr(line, "{\"ph\":\"X\"")) != NULL; line++) {
        if (n == cap) s = realloc(s, (size_t) (cap *= 2) * sizeof(*s));
        struct slice * x = &s[n++];
        double ts, dur;
        ck_assert_int_eq(sscanf(line, "{\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%lf,\"dur\":%lf,\"name\":\"%31[^\"]\","
                                      "\"args\":{\"run\":%d", &x->pid, &x->tid, &ts, &dur, x->name, &x->run), 6);
        ck_assert_msg(ts >= 0 && dur >= 0, "a slice at %g lasting %g", ts, dur);
        x->t0 = micros_to_ns(ts);
        x->t1 = x->t0 + micros_to_ns(dur);
        x->node = -1;
        x->op[0] = x->tensor[0] = '\0';
        const char * args = strstr(line, "\"node\":");
        const char * eol  = strchr(line, '\n');
        if (args != NULL && (eol == NULL || args < eol)) {
            ck_assert_int_eq(sscanf(args, "\"node\":%d,\"op\":\"%31[^\"]\",\"name\":\"%63[^\"]\"", &x->node, x->op,
                                    x->tensor), 3);
        }
    }
    *out = s;
    return n;
}

// Slices of one track sorted by start, the longer first when two start together.
static int by_start(const void * a, const void * b) {
    const struct slice * x = a, * y = b;
    if (x->pid != y->pid) return x->pid - y->pid;
    if (x->tid != y->tid) return x->tid - y->tid;
    if (x->t0 != y->t0) return x->t0 < y->t0 ? -1 : 1;
    return x->t1 > y->t1 ? -1 : x->t1 < y->t1;
}

// Every track's slices are disjoint or nested; a node's slice lies inside a graph slice.
static void check_nesting(struct slice * s, int n) {
    qsort(s, (size_t) n, sizeof(*s), by_start);
    const struct slice * stack[8];
    int depth = 0;
    for (int i = 0; i < n; i++) {
        if (i > 0 && (s[i].pid != s[i - 1].pid || s[i].tid != s[i - 1].tid)) depth = 0;   // a new track
        while (depth > 0 && stack[depth - 1]->t1 <= s[i].t0) depth--;
        if (depth > 0) {
            ck_assert_msg(s[i].t1 <= stack[depth - 1]->t1, "pool %d thread %d: %s [%lld, %lld] overlaps %s [%lld, %lld]",
                          s[i].pid, s[i].tid, s[i].name, s[i].t0, s[i].t1, stack[depth - 1]->name, stack[depth - 1]->t0,
                          stack[depth - 1]->t1);
        }
        const bool is_graph = strcmp(s[i].name, "graph") == 0;
        ck_assert_msg(is_graph == (depth == 0), "pool %d thread %d: %s at %lld is %s a graph slice", s[i].pid, s[i].tid,
                      s[i].name, s[i].t0, depth == 0 ? "outside" : "inside");
        ck_assert(depth < 8);
        stack[depth++] = &s[i];
    }
}

// ---------------------------------------------------------------------------
// The test
// ---------------------------------------------------------------------------

#define N_NETS 6
#define N_RUNS 2

struct expect {   // per pool and thread: slices of each kind
    int nodes, inits, barriers, graphs;
};

// What a run of g on n_threads threads puts on thread ith's track.
static void expect_run(const struct mg_cgraph * g, int n_threads, int ith, struct expect * e) {
    e->graphs++;
    for (int i = 0; i < g->n_nodes; i++) {
        const struct mg_tensor * node    = g->nodes[i];
        const int                n_tasks = mg_node_n_tasks(node, n_threads);
        const bool               init    = mg_compute_needs_init(node);
        if (ith < n_tasks && !mg_op_is_view(node->op)) e->nodes++;
        if (ith < n_tasks && init) e->inits++;
        if (n_threads > 1) e->barriers += 1 + init;
    }
}

static void compute_on(struct mg_cgraph * g, struct mg_threadpool * tp, int n_threads) {
    struct mg_cplan plan = mg_graph_plan(g, n_threads);
    plan.threadpool = tp;
    plan.work_data  = plan.work_size > 0 ? malloc(plan.work_size) : NULL;
    for (int r = 0; r < N_RUNS; r++) mg_graph_compute(g, &plan);
    free(plan.work_data);
}

START_TEST(test_trace_json_matches_the_graphs) {
    struct mg_timeline * tl = mg_timeline_new();
    // Pools 0..3: 1..4 threads, each running every net; pool 4: 4 threads, plans for 1..4.
    static struct expect want[5][4];
    memset(want, 0, sizeof(want));
    struct mg_threadpool * pools[5];
    for (int p = 0; p < 5; p++) {
        pools[p] = mg_threadpool_new(p < 4 ? p + 1 : 4);
        mg_threadpool_set_timeline(pools[p], tl);
    }
    struct net nets[N_NETS];
    for (int k = 0; k < N_NETS; k++) {
        nets[k] = net_new(100 + (uint64_t) k);
        for (int p = 0; p < 5; p++) {
            const int n_threads = p < 4 ? p + 1 : 1 + k % 4;
            compute_on(nets[k].g, pools[p], n_threads);
            for (int r = 0; r < N_RUNS; r++) {
                for (int ith = 0; ith < n_threads; ith++) expect_run(nets[k].g, n_threads, ith, &want[p][ith]);
            }
        }
    }
    for (int p = 0; p < 5; p++) mg_threadpool_free(pools[p]);

    // The picture of pool 1's last run (the last net, 2 threads): a box per slice but the graph's.
    char svg_path[] = "/tmp/mg_test_timeline_svg_XXXXXX";
    const int svg_fd = mkstemp(svg_path);
    ck_assert_int_ge(svg_fd, 0);
    close(svg_fd);
    ck_assert(mg_timeline_dump_svg(tl, 1, "test", svg_path));
    size_t svg_size;
    char * svg = mg_test_read_file(svg_path, &svg_size);
    unlink(svg_path);
    ck_assert_ptr_nonnull(svg);
    int n_boxes = 0;
    for (const char * q = svg; (q = strstr(q, "class=\"slice\"")) != NULL; q++) n_boxes++;
    int n_open = 0, n_close = 0;
    for (const char * q = svg; (q = strstr(q, "<rect")) != NULL; q++) n_open++;
    for (const char * q = svg; (q = strstr(q, "</rect>")) != NULL; q++) n_close++;
    ck_assert_int_eq(n_close, n_boxes);   // every slice box carries its tooltip
    ck_assert_int_eq(n_open, n_boxes + 1);   // and the white background
    ck_assert(svg_size > 7 && strcmp(svg + svg_size - 7, "</svg>\n") == 0);
    struct expect last = {0};
    for (int ith = 0; ith < 2; ith++) expect_run(nets[N_NETS - 1].g, 2, ith, &last);
    ck_assert_int_eq(n_boxes, last.nodes + last.inits + last.barriers);
    free(svg);

    char path[] = "/tmp/mg_test_trace_XXXXXX";
    const int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert(mg_timeline_write_json(tl, path));
    mg_timeline_free(tl);
    size_t size;
    char * text = mg_test_read_file(path, &size);
    ck_assert_ptr_nonnull(text);
    unlink(path);
    ck_assert_msg(json_is_valid(text), "%s is not JSON", path);
    ck_assert_ptr_nonnull(strstr(text, "\"traceEvents\":["));

    struct slice * s;
    const int n = read_slices(text, &s);
    static struct expect got[5][4];
    memset(got, 0, sizeof(got));
    for (int i = 0; i < n; i++) {
        ck_assert(s[i].pid >= 0 && s[i].pid < 5 && s[i].tid >= 0 && s[i].tid < 4);
        struct expect * e = &got[s[i].pid][s[i].tid];
        if (strcmp(s[i].name, "graph") == 0) e->graphs++;
        else if (strcmp(s[i].name, "init") == 0) e->inits++;
        else if (strcmp(s[i].name, "barrier") == 0) e->barriers++;
        else {
            e->nodes++;
            ck_assert_str_eq(s[i].name, s[i].op);   // a node's slice is named after its op
        }
    }
    for (int p = 0; p < 5; p++) {
        for (int t = 0; t < 4; t++) {
            ck_assert_msg(memcmp(&got[p][t], &want[p][t], sizeof(struct expect)) == 0,
                          "pool %d thread %d: %d nodes, %d inits, %d barriers, %d graphs; want %d, %d, %d, %d", p, t,
                          got[p][t].nodes, got[p][t].inits, got[p][t].barriers, got[p][t].graphs, want[p][t].nodes,
                          want[p][t].inits, want[p][t].barriers, want[p][t].graphs);
        }
    }
    ck_assert_int_gt(want[3][3].inits, 0);   // the nets do have init phases, on every thread
    check_nesting(s, n);

    // The args name the node: its op and tensor name in the (last) graph it came from.
    const struct mg_cgraph * g = nets[N_NETS - 1].g;
    int n_checked = 0;
    for (int i = 0; i < n; i++) {
        if (s[i].node < 0 || s[i].pid != 4 || s[i].run < (int) (5 * N_NETS * N_RUNS - N_RUNS)) continue;
        ck_assert(s[i].node < g->n_nodes);
        ck_assert_str_eq(s[i].op, mg_op_name(g->nodes[s[i].node]->op));
        ck_assert_str_eq(s[i].tensor, g->nodes[s[i].node]->name);
        n_checked++;
    }
    ck_assert_int_gt(n_checked, 0);
    free(s);
    free(text);
    for (int k = 0; k < N_NETS; k++) net_free(&nets[k]);
}
END_TEST

// With no timeline set, nothing is recorded: a pool that had one and lost it stops.
START_TEST(test_no_timeline_records_nothing) {
    struct mg_timeline *   tl = mg_timeline_new();
    struct mg_threadpool * tp = mg_threadpool_new(2);
    struct net             nt = net_new(7);
    mg_threadpool_set_timeline(tp, tl);
    compute_on(nt.g, tp, 2);
    mg_threadpool_set_timeline(tp, NULL);
    compute_on(nt.g, tp, 2);
    mg_threadpool_free(tp);
    char path[] = "/tmp/mg_test_trace_XXXXXX";
    const int fd = mkstemp(path);
    close(fd);
    ck_assert(mg_timeline_write_json(tl, path));
    size_t size;
    char * text = mg_test_read_file(path, &size);
    unlink(path);
    ck_assert(json_is_valid(text));
    struct slice * s;
    const int n = read_slices(text, &s);
    int graphs = 0;
    for (int i = 0; i < n; i++) graphs += strcmp(s[i].name, "graph") == 0;
    ck_assert_int_eq(graphs, 2 * N_RUNS);   // both threads' graph slices of the first N_RUNS only
    ck_assert(!json_is_valid("{\"a\":[1,2,]}") && !json_is_valid("{\"a\":1") && json_is_valid("{\"a\":[1,-2.5e3]}"));
    free(s);
    free(text);
    net_free(&nt);
    mg_timeline_free(tl);
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("timeline");
    TCase * tc = MG_TCASE(s, "json", test_trace_json_matches_the_graphs, test_no_timeline_records_nothing);
    tcase_set_timeout(tc, 120);
    return s;
}
