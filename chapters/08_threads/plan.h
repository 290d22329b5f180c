// Generated from full/plan.h by tools/chapgen. In a class, edit this copy freely (make chapters will not overwrite your edits); to change the engine, edit full/plan.h and run make chapters.
// plan.h - before running a graph, decide how many shares each node is split
// into and how much scratch memory the busiest node needs.
//
//     struct mg_cplan plan = mg_graph_plan(g, n_threads);
//     plan.work_data = malloc(plan.work_size);      // one buffer for every node
//     mg_graph_compute(g, &plan);
//
// Some kernels need temporary space: mul_mat converts its activations into
// the weights' format (F16, Q8_0) once instead of inside every dot product;
// softmax builds its scaled row. Nodes run one at a time, so they can all
// share ONE work buffer, sized for the node that needs the most, not the sum
// (ggml-cpu.c: ggml_graph_plan, struct ggml_cplan).
#pragma once

#include "graph.h"

#include "threadpool.h"   // mg_graph_compute, which runs on plan.threadpool

struct mg_cplan {
    size_t work_size;   // bytes: the max over nodes, plus a cache line per share
    void * work_data;   // the caller provides it (at least work_size bytes)
    int    n_threads;
    struct mg_threadpool * threadpool;   // NULL: a pool is made for this one compute
};

// How many shares node is split into with n_threads threads (1 for views).
int    mg_node_n_tasks(const struct mg_tensor * node, int n_threads);
// Scratch bytes node needs when split into n_tasks shares.
size_t mg_node_work_size(const struct mg_tensor * node, int n_tasks);

struct mg_cplan mg_graph_plan(const struct mg_cgraph * g, int n_threads);
