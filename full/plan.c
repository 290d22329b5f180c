//@file 07
// plan.c - per-node task counts and scratch sizes (ggml_graph_plan).
#include "plan.h"
#include "compute.h"
#include "trace.h"
//@+ 08 threadpool-include
#include "threadpool.h"
//@- 08 threadpool-include
#include "vec.h"

int mg_node_n_tasks(const struct mg_tensor * node, int n_threads) {
    if (node->op == MG_OP_NONE || mg_op_is_view(node->op)) return 1;   // nothing to split
    return n_threads;
}

#if 0 //@old 07..08 work-size
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
#endif //@old work-size

//@+ 09 work-size-table
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

//@+ full fused-ops
static size_t flash_attn_work_size(const struct mg_tensor * node, int n_tasks) {
    // Per share: the converted query, a tile of scores, the accumulator,
    // each share's slice rounded up to whole cache lines.
    return (size_t) n_tasks * ((mg_flash_attn_work_size(node) + MG_CACHE_LINE - 1) / MG_CACHE_LINE * MG_CACHE_LINE);
}
//@- full fused-ops
//@+ full moe
static size_t argsort_work_size(const struct mg_tensor * node, int n_tasks) {
    // Per share: a copy of the row and the merge sort's second buffer, on its own cache lines.
    return (size_t) n_tasks * ((mg_argsort_work_size(node) + MG_CACHE_LINE - 1) / MG_CACHE_LINE * MG_CACHE_LINE);
}

static size_t mul_mat_id_work_size(const struct mg_tensor * node, int n_tasks) {
    // b's rows converted once and the picks grouped once, for all shares;
    // then each share's gathered columns.
    return mg_mul_mat_id_work_size(node, n_tasks);
}
//@- full moe

typedef size_t (*work_size_fn)(const struct mg_tensor * node, int n_tasks);

static const work_size_fn work_size_of_op[MG_OP_COUNT] = {
    [MG_OP_MUL_MAT]    = mul_mat_work_size,
    [MG_OP_SOFT_MAX]   = soft_max_work_size,
    //@+ full fused-ops
    [MG_OP_FLASH_ATTN] = flash_attn_work_size,
    //@- full fused-ops
    //@+ full moe
    [MG_OP_ARGSORT]    = argsort_work_size,
    [MG_OP_MUL_MAT_ID] = mul_mat_id_work_size,
    //@- full moe
};

size_t mg_node_work_size(const struct mg_tensor * node, int n_tasks) {
    const work_size_fn size_of = (unsigned) node->op < MG_OP_COUNT ? work_size_of_op[node->op] : NULL;
    return size_of != NULL ? size_of(node, n_tasks) : 0;   // NULL: no scratch
}
//@- 09 work-size-table

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

#if 0 //@old 07..07 serial-tasks
// Chapter 07 runs the shares one after another on this thread: the split and
// the scratch buffer are real, the parallelism comes in chapter 08.
void mg_graph_compute(struct mg_cgraph * g, const struct mg_cplan * plan) {
    for (int i = 0; i < g->n_nodes; i++) {
        struct mg_tensor * node    = g->nodes[i];
        const int          n_tasks = mg_node_n_tasks(node, plan->n_threads);
        mg_graph_trace_node(i, node);
        for (int pass = 0; pass < 2; pass++) {   // pass 0: init (all shares), pass 1: forward
            if (pass == 0 && !mg_compute_needs_init(node)) continue;
            for (int ith = 0; ith < n_tasks; ith++) {
                const struct mg_compute_params p = {.ith = ith, .nth = n_tasks, .wsize = plan->work_size,
                                                    .wdata = plan->work_data};
                if (pass == 0) mg_compute_forward_init(&p, node); else mg_compute_forward(&p, node);
            }
        }
    }
}
#endif //@old serial-tasks
