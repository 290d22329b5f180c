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

// The ops that need scratch, and how much (ggml_graph_plan's switch). From
// chapter 09 on they are a table, an op a row: every other op reads its
// inputs and writes its result directly, and needs none.
static size_t mul_mat_work_size(const struct mg_tensor * node, int n_tasks) {
    MG_UNUSED(n_tasks);   // each row is converted once, whoever converts it
    // Every row of the activations, converted to the weights' vec_dot_type.
    if (!mg_compute_needs_init(node)) return 0;
    const struct mg_type_traits_cpu * cpu = mg_get_type_traits_cpu(node->src[0]->type);
    return mg_row_size(cpu->vec_dot_type, node->src[1]->ne[0]) * (size_t) mg_nrows(node->src[1]);
}

static size_t soft_max_work_size(const struct mg_tensor * node, int n_tasks) {
    // One row per share, each padded to its own cache line so that two
    // threads never write the same line.
    return (size_t) n_tasks * ((size_t) node->ne[0] * sizeof(float) + MG_CACHE_LINE);
}

typedef size_t (*work_size_fn)(const struct mg_tensor * node, int n_tasks);

static const work_size_fn work_size_of_op[MG_OP_COUNT] = {
    [MG_OP_MUL_MAT]    = mul_mat_work_size,
    [MG_OP_SOFT_MAX]   = soft_max_work_size,
};

size_t mg_node_work_size(const struct mg_tensor * node, int n_tasks) {
    const work_size_fn size_of = (unsigned) node->op < MG_OP_COUNT ? work_size_of_op[node->op] : NULL;
    return size_of != NULL ? size_of(node, n_tasks) : 0;   // NULL: no scratch
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
