// Generated from full/plan.c by tools/chapgen. In a class, edit this copy freely (make chapters will not overwrite your edits); to change the engine, edit full/plan.c and run make chapters.
// plan.c - per-node task counts and scratch sizes (ggml_graph_plan).
#include "plan.h"
#include "compute.h"
#include "trace.h"
#include "threadpool.h"
#include "vec.h"

int mg_node_n_tasks(const struct mg_tensor * node, int n_threads) {
    if (node->op == MG_OP_NONE || mg_op_is_view(node->op)) return 1;   // nothing to split
    return n_threads;
}

size_t mg_node_work_size(const struct mg_tensor * node, int n_tasks) {
    switch (node->op) {
        case MG_OP_MUL_MAT: {
            // Every row of the activations, converted to the weights' vec_dot_type.
            if (!mg_compute_needs_init(node)) return 0;
            const struct mg_type_traits_cpu * cpu = mg_get_type_traits_cpu(node->src[0]->type);
            return mg_row_size(cpu->vec_dot_type, node->src[1]->ne[0]) * (size_t) mg_nrows(node->src[1]);
        }
        case MG_OP_SOFT_MAX:
            // One row per share, each padded to its own cache line so that two
            // threads never write the same line.
            return (size_t) n_tasks * ((size_t) node->ne[0] * sizeof(float) + MG_CACHE_LINE);
        case MG_OP_SET_ROWS:
        case MG_OP_ROPE:
        case MG_OP_NONE: case MG_OP_VIEW: case MG_OP_RESHAPE: case MG_OP_PERMUTE: case MG_OP_TRANSPOSE:
        case MG_OP_CONT: case MG_OP_CPY: case MG_OP_GET_ROWS:
        case MG_OP_ADD: case MG_OP_SUB: case MG_OP_MUL: case MG_OP_DIV:
        case MG_OP_SCALE: case MG_OP_SQR: case MG_OP_SQRT: case MG_OP_RELU: case MG_OP_SILU: case MG_OP_GELU:
        case MG_OP_SUM_ROWS: case MG_OP_RMS_NORM:
        case MG_OP_COUNT:
            return 0;   // no scratch: they read their inputs and write their result directly
    }
    return 0;   // a value outside the enum
}

struct mg_cplan mg_graph_plan(const struct mg_cgraph * g, int n_threads) {
    MG_ASSERT(n_threads >= 1);
    size_t max_work = 0;
    int    max_node = -1;
    mg_trace(MG_TRACE_SCRATCH, "%4s  %-10s %-24s %5s %10s", "#", "op", "name", "tasks", "scratch");
    for (int i = 0; i < g->n_nodes; i++) {
        const struct mg_tensor * node    = g->nodes[i];
        const int                n_tasks = mg_node_n_tasks(node, n_threads);
        const size_t             work    = mg_node_work_size(node, n_tasks);
        if (work > 0) {
            mg_trace(MG_TRACE_SCRATCH, "%4d  %-10s %-24s %5d %10zu", i, mg_op_name(node->op), node->name, n_tasks, work);
        }
        if (work > max_work) {
            max_work = work;
            max_node = i;
        }
    }
    struct mg_cplan plan = {.n_threads = n_threads};
    // The max, not the sum: nodes run one at a time and each may use all of it.
    // The extra cache line per thread is room to align every share's slice.
    plan.work_size = max_work > 0 ? max_work + (size_t) MG_CACHE_LINE * (size_t) n_threads : 0;
    mg_trace(MG_TRACE_SCRATCH, "work buffer: %zu bytes (max %zu at node %d + %d x %d cache-line padding)",
             plan.work_size, max_work, max_node, n_threads, MG_CACHE_LINE);
    return plan;
}
