// Generated from full/graph.c by tools/chapgen. In a class, edit this copy freely (make chapters will not overwrite your edits); to change the engine, edit full/graph.c and run make chapters.
// graph.c - building the graph (ggml.c: ggml_new_graph_custom,
// ggml_visit_parents, ggml_build_forward_expand, ggml_graph_print) and running
// it node by node.
#include "graph.h"
#include "arena.h"
#include "compute.h"
#include "trace.h"
#include "galloc.h"

#include <inttypes.h>
#include <string.h>

// ---------------------------------------------------------------------------
// The visited set: open addressing with linear probing over pointers.
// ---------------------------------------------------------------------------

static size_t hash_slot_of(const struct mg_tensor * t, size_t size) {
    // Tensors are at least 16-byte aligned: drop those zero bits, then mix.
    return (size_t) (((uintptr_t) t >> 4) * 0x9E3779B97F4A7C15ull % size);
}

size_t mg_hash_find(const struct mg_hash_set * set, const struct mg_tensor * t) {
    size_t i = hash_slot_of(t, set->size);
    while (set->keys[i] != NULL && set->keys[i] != t) {
        i = (i + 1) % set->size;
    }
    return i;
}

// ---------------------------------------------------------------------------
// Creating a graph: one arena object holds the struct and its arrays.
// ---------------------------------------------------------------------------

static size_t hash_size_for(int graph_size) {
    return (size_t) graph_size * 2 + 1;   // at most half full: probes stay short
}

size_t mg_graph_overhead_custom(int size) {
    const size_t n_slots = hash_size_for(size);
    return sizeof(struct mg_cgraph) + 2 * (size_t) size * sizeof(struct mg_tensor *) +
           n_slots * (sizeof(struct mg_tensor *) + sizeof(int32_t)) + 2 * MG_MEM_ALIGN;
}

struct mg_cgraph * mg_new_graph_custom(struct mg_context * ctx, int size) {
    char * mem = mg_context_alloc(ctx, MG_OBJECT_GRAPH, mg_graph_overhead_custom(size));
    MG_ASSERT(mem != NULL && "the context is too small for a graph of this size");
    memset(mem, 0, mg_graph_overhead_custom(size));

    struct mg_cgraph * g = (struct mg_cgraph *) mem;
    const size_t n_slots = hash_size_for(size);
    char * p = mem + sizeof(*g);
    g->size         = size;
    g->nodes        = (struct mg_tensor **) p;  p += (size_t) size * sizeof(struct mg_tensor *);
    g->leafs        = (struct mg_tensor **) p;  p += (size_t) size * sizeof(struct mg_tensor *);
    g->visited.size = n_slots;
    g->visited.keys = (struct mg_tensor **) p;  p += n_slots * sizeof(struct mg_tensor *);
    g->use_counts   = (int32_t *) p;
    return g;
}

struct mg_cgraph * mg_new_graph(struct mg_context * ctx) {
    return mg_new_graph_custom(ctx, MG_DEFAULT_GRAPH_SIZE);
}

void mg_graph_clear(struct mg_cgraph * g) {
    g->n_nodes = 0;
    g->n_leafs = 0;
    memset(g->visited.keys, 0, g->visited.size * sizeof(struct mg_tensor *));
    memset(g->use_counts, 0, g->visited.size * sizeof(int32_t));
}

// ---------------------------------------------------------------------------
// Building: a post-order depth-first walk.
// ---------------------------------------------------------------------------

// Visit t's inputs first, then t: when t is appended, everything it reads is
// already in the arrays. The visited set makes a shared input appear once.
static void visit(struct mg_cgraph * g, struct mg_tensor * t) {
    const size_t slot = mg_hash_find(&g->visited, t);
    if (g->visited.keys[slot] == t) return;   // seen along another path
    g->visited.keys[slot] = t;

    for (int i = 0; i < MG_MAX_SRC; i++) {
        if (t->src[i] == NULL) continue;
        visit(g, t->src[i]);
        g->use_counts[mg_hash_find(&g->visited, t->src[i])]++;
    }

    if (t->op == MG_OP_NONE) {
        MG_ASSERT(g->n_leafs < g->size && "too many leafs: use mg_new_graph_custom with a larger size");
        if (t->name[0] == '\0') mg_format_name(t, "leaf_%d", g->n_leafs);
        g->leafs[g->n_leafs++] = t;
        mg_trace(MG_TRACE_GRAPH, "leaf %3d  %s", g->n_leafs - 1, t->name);
    } else {
        MG_ASSERT(g->n_nodes < g->size && "too many nodes: use mg_new_graph_custom with a larger size");
        if (t->name[0] == '\0') mg_format_name(t, "node_%d", g->n_nodes);
        g->nodes[g->n_nodes++] = t;
        mg_trace(MG_TRACE_GRAPH, "node %3d  %s = %s", g->n_nodes - 1, t->name, mg_op_name(t->op));
    }
}

void mg_build_forward_expand(struct mg_cgraph * g, struct mg_tensor * t) {
    visit(g, t);
}

int32_t mg_graph_use_count(const struct mg_cgraph * g, const struct mg_tensor * t) {
    const size_t slot = mg_hash_find(&g->visited, t);
    return g->visited.keys[slot] == t ? g->use_counts[slot] : 0;
}

bool mg_graph_contains(const struct mg_cgraph * g, const struct mg_tensor * t) {
    return g->visited.keys[mg_hash_find(&g->visited, t)] == t;
}

// ---------------------------------------------------------------------------
// Running
// ---------------------------------------------------------------------------

void mg_graph_trace_node(int i, const struct mg_tensor * t) {
    if (!mg_trace_on(MG_TRACE_EXEC)) return;
    char shape[MG_SHAPE_STR_MAX];
    mg_trace(MG_TRACE_EXEC, "#%-3d %-9s %-20s %s %s", i, mg_op_name(t->op), t->name, mg_type_name(t->type),
             mg_shape_str(t->ne, MG_MAX_DIMS, ",", shape, sizeof(shape)));
}

static bool graph_is_placed(const struct mg_cgraph * g) {
    for (int i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i]->data == NULL) return false;
    }
    return true;
}

// Plan the results' bytes once: one buffer of the plan's peak size, carved
// from ctx, serves every later run of this graph (chapter 05).
static void place_results_in_ctx(struct mg_context * ctx, struct mg_cgraph * g) {
    if (graph_is_placed(g)) return;
    struct mg_gallocr * ga   = mg_gallocr_new(0);
    const size_t        size = mg_gallocr_reserve(ga, g);
    void *              base = mg_context_alloc(ctx, MG_OBJECT_BUFFER, size);
    MG_ASSERT(base != NULL && "the context is too small for this graph's compute buffer");
    mg_gallocr_place(ga, g, base);
    mg_gallocr_free(ga);
}

void mg_graph_compute_with_ctx(struct mg_context * ctx, struct mg_cgraph * g, int n_threads) {
    MG_UNUSED(n_threads);   // one thread until chapter 08
    place_results_in_ctx(ctx, g);
    const struct mg_compute_params one_share = {.ith = 0, .nth = 1};
    for (int i = 0; i < g->n_nodes; i++) {
        mg_graph_trace_node(i, g->nodes[i]);
        mg_compute_forward(&one_share, g->nodes[i]);
    }
}

// The same walk, run again and again: the graph is built once, and only the
// values in its inputs change between computes.
void mg_compute(struct mg_context * ctx, struct mg_tensor * t) {
    struct mg_cgraph * g = mg_new_graph(ctx);
    mg_build_forward_expand(g, t);
    mg_graph_compute_with_ctx(ctx, g, 1);
}

// ---------------------------------------------------------------------------
// Printing
// ---------------------------------------------------------------------------

void mg_graph_print(FILE * f, const struct mg_cgraph * g) {
    char shape[MG_SHAPE_STR_MAX];
    fprintf(f, "graph: %d nodes, %d leafs\n", g->n_nodes, g->n_leafs);
    fprintf(f, "%4s  %-10s %-24s %-18s %4s  %s\n", "#", "op", "name", "shape", "uses", "srcs");
    for (int i = 0; i < g->n_nodes; i++) {
        const struct mg_tensor * t = g->nodes[i];
        fprintf(f, "%4d  %-10s %-24s %-18s %4d ", i, mg_op_name(t->op), t->name,
                mg_shape_str(t->ne, MG_MAX_DIMS, ",", shape, sizeof(shape)), mg_graph_use_count(g, t));
        for (int j = 0; j < MG_MAX_SRC; j++) {
            if (t->src[j] != NULL) fprintf(f, " %s", t->src[j]->name);
        }
        fprintf(f, "\n");
    }
    fprintf(f, "%4s  %-10s %-24s %-18s %4s\n", "#", "leaf", "name", "shape", "uses");
    for (int i = 0; i < g->n_leafs; i++) {
        const struct mg_tensor * t = g->leafs[i];
        fprintf(f, "%4d  %-10s %-24s %-18s %4d\n", i, mg_type_name(t->type), t->name,
                mg_shape_str(t->ne, MG_MAX_DIMS, ",", shape, sizeof(shape)), mg_graph_use_count(g, t));
    }
}
