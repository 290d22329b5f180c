//@file 04
// graph.h - the computation graph: every tensor a result needs, in an order
// that computes each input before its first use.
//
//     struct mg_tensor * out = mg_relu(ctx, mg_add(ctx, mg_mul_mat(ctx, W, x), b));
//     struct mg_cgraph * g = mg_new_graph(ctx);
//     mg_build_forward_expand(g, out);      // depth-first from out:
//     //   leafs: W, x, b                    (no op: data set by us)
//     //   nodes: W*x, W*x+b, out            (in the order they must run)
//     mg_graph_compute_with_ctx(ctx, g, 1); // run the nodes in that order
//     mg_graph_dump_dot(g, "relu.dot");     // draw it (make graph renders it)
//
// Building the order once and walking a flat array afterwards is ggml's
// ggml_cgraph (ggml.c, ggml_build_forward_expand / ggml_visit_parents): a
// tensor reached along two paths is visited once (a hash set remembers what
// was seen), and everything later chapters do - plan memory, plan scratch,
// split work between threads - is a loop over this array.
#pragma once

#include "tensor.h"

#define MG_DEFAULT_GRAPH_SIZE 2048   // nodes (and leafs) a graph holds unless asked (ggml's default)

// Open addressing over tensor pointers: slot of t, or where it would go.
struct mg_hash_set {
    size_t              size;   // slots, always more than twice the graph size
    struct mg_tensor ** keys;   // NULL = empty slot
};

// The slot of visited that holds t, or the empty slot where t would go. Later
// chapters keep per-tensor facts in arrays indexed by this slot.
size_t mg_hash_find(const struct mg_hash_set * set, const struct mg_tensor * t);

struct mg_cgraph {
    int size;                    // capacity of nodes[] and of leafs[]
    int n_nodes;
    int n_leafs;

    struct mg_tensor ** nodes;   // tensors with an op, each after all of its inputs
    struct mg_tensor ** leafs;   // tensors without one: weights, inputs, constants

    struct mg_hash_set visited;  // every tensor of the graph, node or leaf
    int32_t *          use_counts;   // per slot of visited: how many srcs of nodes point at it
};

// A graph whose arrays live in ctx (an object of type graph in the arena).
struct mg_cgraph * mg_new_graph(struct mg_context * ctx);
struct mg_cgraph * mg_new_graph_custom(struct mg_context * ctx, int size);
size_t             mg_graph_overhead_custom(int size);   // arena bytes that graph takes

// Add t and everything it needs that is not in g yet. Call it for every
// result you want (the graph keeps all of them).
void mg_build_forward_expand(struct mg_cgraph * g, struct mg_tensor * t);

// Forget all nodes and leafs so the graph can be built again in place.
void mg_graph_clear(struct mg_cgraph * g);

// How many times nodes of g read t (0 for a tensor the graph does not hold,
// and for the results nobody reads: the outputs).
int32_t mg_graph_use_count(const struct mg_cgraph * g, const struct mg_tensor * t);
bool    mg_graph_contains (const struct mg_cgraph * g, const struct mg_tensor * t);

// Run every node in order, giving results their data from ctx.
void mg_graph_compute_with_ctx(struct mg_context * ctx, struct mg_cgraph * g, int n_threads);

// The MG_TRACE=exec line of node i, printed just before it runs.
void mg_graph_trace_node(int i, const struct mg_tensor * t);

// A table of the nodes (index, op, name, shape, srcs), then of the leafs.
void mg_graph_print(FILE * f, const struct mg_cgraph * g);

// Write g as a Graphviz file: leafs and nodes drawn differently, op and shape
// in every box, an edge from each src to its user, views dashed. False, with
// mg_last_error() saying why, when the file cannot be written.
bool mg_graph_dump_dot(const struct mg_cgraph * g, const char * path);

// If $MG_DOT names a directory, write g there as <name>.dot (and say so on
// stderr). This is how demos and `mg --dot` leave drawings behind.
bool mg_graph_dump_dot_env(const struct mg_cgraph * g, const char * name);

//@+ full dot-extras
// What a drawing may add (mg_graph_dump_dot_ext): each node's offset in the
// compute buffer (galloc: the graph's last plan), its time (node_us[i], e.g.
// from a timeline), and, for graphs whose tensors are named by layer
// ("attn_norm-3", "blk.3.attn_q.weight", as llama.cpp names them), one
// cluster per layer, drawing only layers below max_layers (-1: all) so that
// one layer of a real model stays readable.
//
// A graph the scheduler planned (sched, after mg_sched_alloc_graph) is drawn
// by split instead of by layer: one cluster per split, filled with its
// backend's colour, and each copy the scheduler inserted as a box of its own
// in the split that reads it, fed by the tensor it copies, with its bytes;
// a second legend names each backend's colour. A scheduler over one backend
// has nothing to split: it is drawn as if sched were NULL, byte for byte.
struct mg_gallocr;
struct mg_sched;
struct mg_dot_extras {
    const struct mg_gallocr * galloc;     // NULL: no offsets
    const struct mg_sched *   sched;      // NULL: one backend, the clusters are layers
    const double *            node_us;    // [n_nodes], NULL: no times
    int                       max_layers;
};
bool mg_graph_dump_dot_ext(const struct mg_cgraph * g, const char * path, const struct mg_dot_extras * x);

// The layer node i is drawn in (-1: outside the layers), as the clusters above.
int mg_graph_node_layer(const struct mg_cgraph * g, int i);

// The fill of the clusters of backend i (the index given to mg_sched_new):
// pale, so that the op colours of the boxes inside still show.
const char * mg_backend_dot_colour(int backend);
//@- full dot-extras

// The fill colour of an op's box ("#f6b26b" for mul_mat): one per op family.
// NULL only for MG_OP_COUNT; every op has one (tests/04_graph/test_op_colours.c).
const char * mg_op_dot_colour(enum mg_op op);
