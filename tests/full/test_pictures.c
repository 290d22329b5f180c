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
#include "memmap.h"

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

// The model in a session of 64 tokens on n_threads threads: the tests below
// decode a few tokens and look at what the session drew or recorded.
static struct mg_session * session_of(struct mg_model * m, int n_threads, const char * dot_dir, int dot_layers) {
    struct mg_session_params p = mg_session_default_params();
    p.n_threads  = n_threads;
    p.n_ctx      = 64;
    p.dot_dir    = dot_dir;
    p.dot_layers = dot_layers;
    struct mg_session * s = mg_session_new(m, p);
    ck_assert_msg(s != NULL, "%s", mg_last_error());
    return s;
}

static struct mg_session * small_session(const char * model_file, int n_threads, struct mg_model ** m) {
    *m = mg_model_load_from_file(model_file, mg_model_default_params());
    ck_assert_msg(*m != NULL, "%s", mg_last_error());
    return session_of(*m, n_threads, NULL, -1);
}

START_TEST(test_session_trace_counts_the_graph) {
    struct mg_model *    m;
    struct mg_session *  s  = small_session(model_path(), 2, &m);
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

// The memory model's table, against the structs it measures: every region's
// size as the model, the session and the file say, and every pointer counted
// by walking the model's tensors and the graph's nodes and leafs.
static bool in_region(const struct mg_memory_model * mm, enum mg_mem_region r, const void * p) {
    const char * base = mm->region[r].base;
    return base != NULL && (const char *) p >= base && (const char *) p < base + mm->region[r].bytes;
}

static void check_memory_model(const char * model_file) {
    struct mg_model *   m;
    struct mg_session * s = small_session(model_file, 1, &m);
    const int32_t prompt[3] = {1968, 311, 234}, next = 832;
    ck_assert(mg_decode(s, prompt, 3, false) && mg_decode(s, &next, 1, false));
    struct mg_memory_model mm;
    mg_session_memory_model(s, &mm);
    const struct mg_session_stats st = mg_session_get_stats(s);

    ck_assert_uint_eq(mm.region[MG_MEM_MODEL_HEADERS].bytes, mg_used_mem(m->ctx));
    ck_assert_uint_eq(mm.region[MG_MEM_MAPPED_FILE].bytes, mg_gguf_file_size(m->gguf));
    ck_assert_uint_eq(mm.region[MG_MEM_REPACKED].bytes, m->n_repacked_bytes);
    ck_assert_uint_eq(mm.region[MG_MEM_COMPUTE].bytes, st.compute_buffer_size);
    ck_assert_uint_eq(mm.region[MG_MEM_WORK].bytes, st.work_size);
    ck_assert_uint_eq(mm.region[MG_MEM_KV].bytes, st.kv_size);

    // Weights: into the mapping exactly where the file puts them; the repacked
    // ones also into their copy.
    int n_weights = 0, n_in_file = 0, n_repacked = 0;
    for (const struct mg_tensor * t = mg_get_first_tensor(m->ctx); t != NULL; t = mg_get_next_tensor(m->ctx, t)) {
        n_weights++;
        const struct mg_gguf_tensor_info * info = mg_gguf_find_tensor(m->gguf, t->name);
        n_in_file += info != NULL && info->data == t->data;
        n_repacked += t->repacked != NULL && in_region(&mm, MG_MEM_REPACKED, t->repacked);
    }
    ck_assert_int_eq(mm.n_tensors[MG_MEM_MODEL_HEADERS], n_weights);
    ck_assert_int_eq(n_in_file, n_weights);
    ck_assert_int_eq(mm.pointers[MG_MEM_MODEL_HEADERS][MG_MEM_MAPPED_FILE], n_in_file);
    ck_assert_int_eq(n_repacked, m->n_repacked);
    ck_assert_int_eq(mm.pointers[MG_MEM_MODEL_HEADERS][MG_MEM_REPACKED], m->n_repacked);

    // The graph: every node and input reaches the compute buffer or the KV cache.
    const struct mg_cgraph * g = mg_session_graph(s);
    int n_compute = 0, n_kv = 0, n_graph = 0, n_caches = 0;
    for (int k = 0; k < g->n_nodes + g->n_leafs; k++) {
        const struct mg_tensor * t = k < g->n_nodes ? g->nodes[k] : g->leafs[k - g->n_nodes];
        if (mg_get_tensor(m->ctx, t->name) == t) continue;   // a weight: counted above
        if (t->op == MG_OP_NONE && in_region(&mm, MG_MEM_KV, t->data)) {
            n_caches++;   // a layer's K or V itself: its header is the cache's, not the graph's
            continue;
        }
        n_graph++;
        n_compute += in_region(&mm, MG_MEM_COMPUTE, t->data);
        n_kv += in_region(&mm, MG_MEM_KV, t->data);
    }
    ck_assert_int_eq(n_caches, 2 * m->hp.n_layer);
    ck_assert_int_eq(n_compute + n_kv, n_graph);
    ck_assert_int_eq(mm.pointers[MG_MEM_GRAPH_HEADERS][MG_MEM_COMPUTE], n_compute);
    ck_assert_int_eq(mm.pointers[MG_MEM_GRAPH_HEADERS][MG_MEM_KV], n_kv);
    ck_assert_int_ge(n_kv, 2 * m->hp.n_layer);   // at least a view of every layer's K and V
    ck_assert_int_ge(mm.n_tensors[MG_MEM_GRAPH_HEADERS], n_graph);

    char dir[] = "/tmp/mg_test_memmap_XXXXXX", path[96];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/mem.svg", dir);
    ck_assert(mg_memory_model_dump_svg(&mm, path));
    size_t size;
    char * svg = mg_test_read_file(path, &size);
    ck_assert_ptr_nonnull(svg);
    int n_regions = 0, n_arrows = 0;
    for (const char * q = svg; (q = strstr(q, "class=\"region\"")) != NULL; q++) n_regions++;
    for (const char * q = svg; (q = strstr(q, "class=\"pointers\"")) != NULL; q++) n_arrows++;
    ck_assert_int_eq(n_regions, MG_MEM_N);
    ck_assert_int_eq(n_arrows, (n_in_file > 0) + (m->n_repacked > 0) + (n_compute > 0) + (n_kv > 0));
    ck_assert(strcmp(svg + size - 7, "</svg>\n") == 0);
    free(svg);
    unlink(path);
    rmdir(dir);
    mg_session_free(s);
    mg_model_free(m);
}

START_TEST(test_memory_model_q8_0) {
    check_memory_model(model_path());
}
END_TEST

START_TEST(test_memory_model_repacked) {
    check_memory_model(mg_test_fixture("models/tiny-q4_k_m.gguf"));   // Q4_K: repacked copies
}
END_TEST

// The DOT drawing of a decode step with the extras (offsets, times, one
// cluster per layer), written where the session's dot_dir says; with
// dot_layers = 1 (mg --dot-layers 1) cut after layer 0.
static char * dump_decode_dot(struct mg_session * s, const char * dir) {
    ck_assert(mg_session_dump_dot(s, "decode"));
    char path[128];
    snprintf(path, sizeof(path), "%s/decode.dot", dir);
    size_t size;
    char * text = mg_test_read_file(path, &size);
    ck_assert_ptr_nonnull(text);
    unlink(path);
    return text;
}

START_TEST(test_dot_layers_offsets_and_times) {
    struct mg_model *    m;
    char dir[] = "/tmp/mg_test_dot_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    m = mg_model_load_from_file(model_path(), mg_model_default_params());
    ck_assert_msg(m != NULL, "%s", mg_last_error());
    struct mg_session *  s  = session_of(m, 2, dir, -1);
    struct mg_timeline * tl = mg_timeline_new();
    mg_session_set_timeline(s, tl);
    const int32_t prompt[3] = {1968, 311, 234}, next = 832;
    ck_assert(mg_decode(s, prompt, 3, false) && mg_decode(s, &next, 1, false));
    const struct mg_cgraph * g = mg_session_graph(s);
    const size_t buffer = mg_session_get_stats(s).compute_buffer_size;

    // Whole: a cluster per layer, every node drawn, each computed one with its place and time.
    char * all = dump_decode_dot(s, dir);
    int n_clusters = 0;
    for (const char * q = all; (q = strstr(q, "subgraph cluster_layer")) != NULL; q++) n_clusters++;
    ck_assert_int_eq(n_clusters, m->hp.n_layer);
    for (int i = 0; i < g->n_nodes; i++) {
        char key[32];
        snprintf(key, sizeof(key), "\n  n%d [", i);
        const char * line = strstr(all, key);
        ck_assert_msg(line != NULL, "node %d is not drawn", i);
        const char * eol = strchr(line + 1, '\n');
        const char * at  = strstr(line, " | at ");
        const char * us  = strstr(line, " us}");
        if (g->nodes[i]->view_src == NULL) {
            ck_assert_msg(at != NULL && at < eol, "node %d has no offset", i);
            size_t offset = 0;
            ck_assert(sscanf(at, " | at %zu in the compute buffer", &offset) == 1);
            ck_assert_uint_le(offset + mg_nbytes(g->nodes[i]), buffer);
            ck_assert_msg(us != NULL && us < eol, "node %d has no time", i);
        } else {
            ck_assert_msg(at == NULL || at > eol, "view %d drawn with an offset of its own", i);
        }
    }
    free(all);

    // --dot-layers 1: layer 0 and what comes before it; nothing that needs layer 1.
    // The same steps in a session that draws one layer: the same graph.
    struct mg_session * s1 = session_of(m, 2, dir, 1);
    ck_assert(mg_decode(s1, prompt, 3, false) && mg_decode(s1, &next, 1, false));
    ck_assert_int_eq(mg_session_graph(s1)->n_nodes, g->n_nodes);
    char * one = dump_decode_dot(s1, dir);
    mg_session_free(s1);
    int n_drawn = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        char key[32];
        snprintf(key, sizeof(key), "\n  n%d [", i);
        const bool drawn = strstr(one, key) != NULL;
        n_drawn += drawn;
        if (drawn) ck_assert_int_le(mg_graph_node_layer(g, i), 0);
        if (strcmp(g->nodes[i]->name, "l_out-0") == 0) ck_assert(drawn);
        if (mg_graph_node_layer(g, i) == 1) ck_assert(!drawn);
    }
    ck_assert_int_gt(n_drawn, 20);
    ck_assert_int_lt(n_drawn, g->n_nodes / 2);
    // Every edge joins two drawn boxes.
    for (const char * q = one; (q = strstr(q, " -> ")) != NULL; q++) {
        const char * bol = q;
        while (bol > one && bol[-1] != '\n') bol--;
        char from[16], to[16], key[32];
        ck_assert(sscanf(bol, " %15s -> %15s", from, to) == 2);
        snprintf(key, sizeof(key), "\n  %s [", from);
        ck_assert_msg(strstr(one, key) != NULL, "an edge from %s, which is not drawn", from);
        snprintf(key, sizeof(key), "\n  %s [", to);
        ck_assert_msg(strstr(one, key) != NULL, "an edge to %s, which is not drawn", to);
    }
    ck_assert_int_eq(strstr(one, "subgraph cluster_layer1") == NULL, 1);
    free(one);
    rmdir(dir);
    mg_session_free(s);
    mg_timeline_free(tl);
    mg_model_free(m);
}
END_TEST

static bool ends_an_svg(const char * path) {
    size_t size;
    char * text = mg_test_read_file(path, &size);
    const bool ok = text != NULL && strncmp(text, "<?xml", 5) == 0 && size > 7 && strcmp(text + size - 7, "</svg>\n") == 0;
    free(text);
    return ok;
}

// `mg run` with every picture option: each file is written and parses, the
// summary ends with the memory table, and an unwritable path is an error
// that names its option before anything runs.
START_TEST(test_mg_run_writes_every_picture) {
    char dir[64], path[128];
    mg_test_make_dir(dir, sizeof(dir), "run_pictures");
    struct mg_test_run r = mg_test_run_mg(dir, NULL, NULL,
                                          "run -m '%s' -p 'The quick brown fox' -n 3 --temp 0 -t 2 --svg '%s' "
                                          "--trace-json '%s/t.json' --memory-map '%s/m.svg'",
                                          mg_test_fixture("models/tiny-q4_k_m.gguf"), dir, dir, dir);
    ck_assert_msg(r.status == 0, "mg run: exit status %d: %.1500s", r.status, r.err);
    const char * svgs[] = {"prompt-alloc.svg", "decode-alloc.svg", "m.svg"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, svgs[i]);
        ck_assert_msg(ends_an_svg(path), "%s is not a whole SVG", path);
    }
    snprintf(path, sizeof(path), "%s/t.json", dir);
    struct mg_json * doc = mg_json_parse_file(path);
    ck_assert_msg(doc != NULL, "%s", mg_last_error());
    const struct mg_json * ev = mg_json_get(doc, "traceEvents");
    ck_assert(ev != NULL && ev->type == MG_JSON_ARRAY && ev->n > 100);
    int n_graphs = 0;   // the prompt and two decode steps, on each of the 2 threads
    for (size_t i = 0; i < ev->n; i++) n_graphs += strcmp(str_of(mg_json_get(&ev->items[i], "name")), "graph") == 0;
    ck_assert_int_eq(n_graphs, 3 * 2);
    mg_json_free(doc);
    ck_assert_ptr_nonnull(strstr(r.err, "mg: memory model"));
    ck_assert_ptr_nonnull(strstr(r.err, "mg:   repacked weights"));
    mg_test_run_free(&r);

    mg_test_expect_mg_error(dir, "--memory-map", "does not exist",
                            "run -m '%s' -p x -n 1 --memory-map '%s/no/such/dir/m.svg'",
                            mg_test_fixture("models/tiny-q4_k_m.gguf"), dir);
    mg_test_remove_dir(dir);
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("pictures");
    TCase * tc = MG_TCASE(s, "session", test_session_trace_counts_the_graph, test_memory_model_q8_0,
                             test_memory_model_repacked, test_dot_layers_offsets_and_times,
                             test_mg_run_writes_every_picture);
    tcase_set_timeout(tc, 120);
    return s;
}
