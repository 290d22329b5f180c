//@file full
// backend_sched.h - one graph, several backends: which node runs where, the graph cut
// into runs of nodes on one backend ("splits"), and the tensors copied between
// them (ggml-backend.cpp: ggml_backend_sched).
//
//     mg_backend_t backends[] = {gpu, cpu};          // by priority; the CPU last
//     struct mg_sched * s = mg_sched_new(backends, 2, 4096);
//     mg_sched_set_tensor_backend(s, tokens, 1);     // optional: pin a tensor
//     mg_sched_alloc_graph(s, g);                    // assign, split, copy, plan memory
//     ...fill the graph's inputs...
//     mg_sched_graph_compute(s, g);                  // per split: copy its inputs in, run it
//
// How a node gets its backend, in the order ggml decides (the passes of
// ggml_backend_sched_split_graph; MG_TRACE=sched prints the outcome):
//   1. a tensor whose bytes already live somewhere (a weight) belongs to the
//      first backend that can read that memory; a node that reads a weight
//      goes where the weight is, if that backend can run it; the graph's
//      inputs (token ids, positions) go to the CPU;
//   2. every other node takes the backend of the node before it, if that
//      backend can run it: first spreading the GPU's nodes down and up the
//      graph, then everyone's (so a GPU layer's norms and adds stay on the
//      GPU and the CPU is not interrupted by one-op splits);
//   3. a node moves to a backend of higher priority that can run it and
//      read all of its inputs where they are;
//   4. views go where their source is, leafs where their first user is.
// Then the nodes are cut wherever the backend changes, and each split lists
// the tensors it reads from a backend whose memory it cannot read: those are
// copied in before it runs, into a tensor named "BACKEND#name#0" as in ggml.
//
// Memory: the graph allocator plans one compute buffer for the whole graph;
// the CPU's tensors stay in it, and each backend without host memory gets a
// buffer of the same size where its tensors sit at the planned offsets.
// What is simpler than ggml (not yet): that per-device buffer is as big as
// the whole plan (ggml plans one per backend), copies are kept for the
// whole graph (ggml's live only as long as needed), one copy of the inputs
// (no pipelining, ggml's n_copies), and no op offload by batch size.
#pragma once

#include "backend.h"

struct mg_sched;

// At most MG_SCHED_MAX_BACKENDS backends, the last a CPU backend (it can run
// every op); graph_size bounds the nodes of the graphs it will see. NULL, with
// mg_last_error(), for a bad list.
#define MG_SCHED_MAX_BACKENDS 8
struct mg_sched * mg_sched_new(mg_backend_t * backends, int n_backends, int graph_size);
void              mg_sched_free(struct mg_sched * sched);   // NULL is fine

// Pin t to backends[i] before mg_sched_alloc_graph (ggml_backend_sched_set_tensor_backend).
void mg_sched_set_tensor_backend(struct mg_sched * sched, struct mg_tensor * t, int i);
// The backend t was given by the last mg_sched_alloc_graph, -1 if none.
int  mg_sched_get_tensor_backend(const struct mg_sched * sched, const struct mg_tensor * t);

// Assign, split, insert copies and plan the compute buffer. The graph's nodes
// then read the copies (their src[] are rewired, as ggml does), so a graph is
// given to one scheduler once; build a new graph for a new shape. False, with
// mg_last_error(), when a node has no backend that can run it or memory runs out.
bool mg_sched_alloc_graph(struct mg_sched * sched, struct mg_cgraph * g);

// Run the graph given to mg_sched_alloc_graph: for each split in order, its
// copies, then its nodes on its backend. False, with mg_last_error(), if a
// backend fails.
bool mg_sched_graph_compute(struct mg_sched * sched, struct mg_cgraph * g);

// What the last mg_sched_alloc_graph decided.
struct mg_sched_split {
    int                 backend;     // index into the backends given to mg_sched_new
    int                 i_start;     // nodes [i_start, i_end) of the graph
    int                 i_end;
    int                 n_inputs;
    struct mg_tensor ** inputs;      // [n_inputs] tensors of another backend it reads ...
    struct mg_tensor ** copies;      // [n_inputs] ... and their copies in this one
};
int                           mg_sched_n_splits(const struct mg_sched * sched);
const struct mg_sched_split * mg_sched_get_split(const struct mg_sched * sched, int i);
int                           mg_sched_n_copies(const struct mg_sched * sched);      // over all splits
size_t                        mg_sched_copy_bytes(const struct mg_sched * sched);    // per compute
mg_backend_t                  mg_sched_get_backend(const struct mg_sched * sched, int i);
int                           mg_sched_n_backends(const struct mg_sched * sched);   // as given to mg_sched_new
