//@file 05
// galloc.c - planning the compute buffer (ggml-alloc.c: ggml_dyn_tallocr,
// ggml_gallocr_allocate_node, ggml_gallocr_free_node, ggml_gallocr_alloc_graph_impl).
#include "galloc.h"
#include "arena.h"
#include "trace.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------
// The dynamic allocator: offsets in an imaginary buffer that can grow.
// ---------------------------------------------------------------------------

#define TAIL_END (SIZE_MAX / 2)   // where the tail block "ends": nothing will ever reach it

static size_t align_up(size_t n, size_t align) {
    return (n + align - 1) / align * align;
}

void mg_dyn_alloc_reset(struct mg_dyn_alloc * a, size_t alignment) {
    a->alignment     = alignment;
    a->n_free_blocks = 1;
    a->free_blocks[0] = (struct mg_free_block) {.offset = 0, .size = TAIL_END};
    a->max_size      = 0;
}

static void remove_block(struct mg_dyn_alloc * a, int i) {
    for (int j = i; j < a->n_free_blocks - 1; j++) a->free_blocks[j] = a->free_blocks[j + 1];
    a->n_free_blocks--;
}

//@+ 05 dyn-alloc
// Best fit: the smallest free block that is big enough, searching all blocks
// but the tail. Only when none fits does the tail give up its front, which
// is the buffer growing. Preferring holes keeps the peak low.
size_t mg_dyn_alloc_alloc(struct mg_dyn_alloc * a, size_t size) {
    size = align_up(size, a->alignment);
    int best = -1;
    for (int i = 0; i < a->n_free_blocks - 1; i++) {
        if (a->free_blocks[i].size >= size && (best < 0 || a->free_blocks[i].size < a->free_blocks[best].size)) {
            best = i;
        }
    }
    if (best < 0) best = a->n_free_blocks - 1;   // the tail: always big enough

    struct mg_free_block * block = &a->free_blocks[best];
    const size_t offset = block->offset;
    block->offset += size;
    block->size   -= size;
    if (block->size == 0) remove_block(a, best);   // never the tail: it is infinite

    if (offset + size > a->max_size) a->max_size = offset + size;
    return offset;
}
//@- 05 dyn-alloc

// Give [offset, offset+size) back, keeping the list sorted, and merge it with
// the block before and/or after it when they touch: without merging, freed
// space would splinter into holes too small to use.
void mg_dyn_alloc_free(struct mg_dyn_alloc * a, size_t offset, size_t size) {
    size = align_up(size, a->alignment);
    int i = 0;   // the first block after the freed range
    while (i < a->n_free_blocks && a->free_blocks[i].offset < offset) i++;

    const bool touches_prev = i > 0 && a->free_blocks[i - 1].offset + a->free_blocks[i - 1].size == offset;
    const bool touches_next = i < a->n_free_blocks && offset + size == a->free_blocks[i].offset;

    if (touches_prev && touches_next) {
        a->free_blocks[i - 1].size += size + a->free_blocks[i].size;
        remove_block(a, i);
    } else if (touches_prev) {
        a->free_blocks[i - 1].size += size;
    } else if (touches_next) {
        a->free_blocks[i].offset = offset;
        a->free_blocks[i].size  += size;
    } else {
        MG_ASSERT(a->n_free_blocks < MG_GALLOC_MAX_FREE_BLOCKS && "too many free blocks");
        for (int j = a->n_free_blocks; j > i; j--) a->free_blocks[j] = a->free_blocks[j - 1];
        a->free_blocks[i] = (struct mg_free_block) {.offset = offset, .size = size};
        a->n_free_blocks++;
    }
}

const char * mg_dyn_alloc_describe(const struct mg_dyn_alloc * a, char * buf, size_t size) {
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; i < a->n_free_blocks && n < size; i++) {
        const struct mg_free_block * b = &a->free_blocks[i];
        if (i == a->n_free_blocks - 1) {
            n += (size_t) snprintf(buf + n, size - n, "%s[%zu, inf)", i ? " " : "", b->offset);
        } else {
            n += (size_t) snprintf(buf + n, size - n, "%s[%zu, %zu)", i ? " " : "", b->offset, b->offset + b->size);
        }
    }
    return buf;
}

// ---------------------------------------------------------------------------
// What the planner knows about each tensor, indexed by its graph hash slot.
// ---------------------------------------------------------------------------

struct tensor_info {
    int    n_children;   // nodes that have yet to read it
    int    n_views;      // views of it that are still alive
    bool   planned;      // the plan gave it an offset
    bool   live;         // ... and it holds those bytes right now
    size_t offset;
    size_t size;
    int    first, end;    // its lifetime, in node steps [first, end): for pictures (galloc_svg.c)
    bool   handed_over;   // it ended by giving its bytes to a result written over it
};

struct mg_gallocr {
    uint32_t             id;           // stamped on every tensor it places (tensor->galloc_id)
    struct mg_dyn_alloc  alloc;
    bool                 reuse_parent;
    struct tensor_info * info;         // one per slot of the planned graph's hash set
    size_t               info_size;
    size_t               peak;
    size_t               sum;
    int                  n_reserves;
    int                  step;         // the node being planned: when lifetimes begin and end

    struct mg_tensor **  planned_nodes;   // what was planned, to recognise the same graph ...
    size_t *             planned_sizes;   // ... with the same sizes (a new graph may reuse old addresses)
    int                  planned_n_nodes;
    int                  planned_n_leafs;

    struct mg_buffer *   buffer;          // ours, for mg_gallocr_alloc_graph
};

struct mg_gallocr * mg_gallocr_new(size_t alignment) {
    static _Atomic uint32_t next_id = 1;   // never 0, never reused while the program runs
    struct mg_gallocr * ga = calloc(1, sizeof(*ga));
    MG_ASSERT(ga != NULL);
    ga->id = next_id++;
    mg_dyn_alloc_reset(&ga->alloc, alignment ? alignment : MG_GALLOC_DEFAULT_ALIGN);
    ga->reuse_parent = true;
    return ga;
}

void mg_gallocr_free(struct mg_gallocr * ga) {
    if (ga == NULL) return;
    free(ga->info);
    free(ga->planned_nodes);
    free(ga->planned_sizes);
    mg_buffer_free(ga->buffer);
    free(ga);
}

void mg_gallocr_set_reuse_parent(struct mg_gallocr * ga, bool reuse) {
    ga->reuse_parent = reuse;
}

static struct tensor_info * info_of(struct mg_gallocr * ga, const struct mg_cgraph * g, const struct mg_tensor * t) {
    return &ga->info[mg_hash_find(&g->visited, t)];
}

// A tensor the plan must give bytes to: not a view (a view's bytes are its
// source's), and either without data or with data this allocator placed in an
// earlier plan - replanning may move those. The stamp, not the address, tells
// which: an old buffer may be gone, and a new one may sit where it was.
static bool needs_bytes(const struct mg_gallocr * ga, const struct mg_tensor * t) {
    return t->view_src == NULL && (t->data == NULL || t->galloc_id == ga->id);
}

// Ops whose kernels may write their result over an input of the same size:
// element i of the output depends only on element i (or the row) of the input
// (ggml_op_can_inplace). A table, an op a row, each saying why; an op
// without a row may not (false, the safe answer).
static const bool op_can_inplace[MG_OP_COUNT] = {
    [MG_OP_ADD]   = true, [MG_OP_SUB]  = true, [MG_OP_MUL] = true, [MG_OP_DIV] = true,
    [MG_OP_SCALE] = true, [MG_OP_SQR]  = true, [MG_OP_SQRT] = true,
    [MG_OP_RELU]  = true, [MG_OP_SILU] = true, [MG_OP_GELU] = true,
    [MG_OP_RMS_NORM] = true, [MG_OP_SOFT_MAX] = true,
    //@+ 06 attention-ops
    [MG_OP_ROPE]     = true,
    //@- 06 attention-ops
    [MG_OP_NONE]     = false,   // a leaf is not computed
    [MG_OP_VIEW]     = false, [MG_OP_RESHAPE] = false,
    [MG_OP_PERMUTE]  = false, [MG_OP_TRANSPOSE] = false,   // views hold no bytes of their own
    [MG_OP_MUL_MAT]  = false,   // every output reads a whole row of both inputs
    [MG_OP_SUM_ROWS] = false,   // the result is smaller than the input
    [MG_OP_CONT]     = false, [MG_OP_CPY] = false,   // reads in one layout, writes in another
    [MG_OP_GET_ROWS] = false,   // reads rows picked by index
    //@+ 09 set-rows
    [MG_OP_SET_ROWS] = false,   // its result is a view of the cache
    //@- 09 set-rows
    //@+ full fused-ops
    [MG_OP_SWIGLU]     = false,   // two inputs; ggml's list has no GLU op either
    [MG_OP_FLASH_ATTN] = false,   // reads all of K and V for every output
    //@- full fused-ops
    //@+ full moe
    [MG_OP_ARGSORT]    = false,   // I32 result, and each output reads the whole row
    [MG_OP_CLAMP]      = false,   // could, but ggml_op_can_inplace does not list it: same plans as llama.cpp
    [MG_OP_MUL_MAT_ID] = false,   // as mul_mat
    //@- full moe
};

bool mg_op_can_inplace(enum mg_op op) {
    return (unsigned) op < MG_OP_COUNT && op_can_inplace[op];
}

static void trace_step(struct mg_gallocr * ga, const char * what, const struct mg_tensor * t, size_t size, size_t offset) {
    if (!mg_trace_on(MG_TRACE_ALLOC)) return;
    char free_list[512];
    mg_trace(MG_TRACE_ALLOC, "%-5s %-12s %6zu bytes at %6zu   free: %s", what, t->name, size, offset,
             mg_dyn_alloc_describe(&ga->alloc, free_list, sizeof(free_list)));
}

// Same type, same shape, same strides: element i of one is element i of the other.
static bool same_layout(const struct mg_tensor * a, const struct mg_tensor * b) {
    if (a->type != b->type) return false;
    for (int i = 0; i < MG_MAX_DIMS; i++) {
        if (a->ne[i] != b->ne[i] || a->nb[i] != b->nb[i]) return false;
    }
    return true;
}

//@+ 05 dying-parent
// The input that t may take over: an input whose last reader is t, laid out
// exactly like t (so element i is written where element i was read), that is
// neither a leaf nor an output nor viewed (ggml: ggml_are_same_layout).
static struct mg_tensor * dying_parent(struct mg_gallocr * ga, const struct mg_cgraph * g, const struct mg_tensor * t,
                                       size_t size) {
    if (!ga->reuse_parent || !mg_op_can_inplace(t->op)) return NULL;
    for (int i = 0; i < MG_MAX_SRC; i++) {
        struct mg_tensor * p = t->src[i];
        if (p == NULL || p->op == MG_OP_NONE || p->view_src != NULL) continue;
        if (p->flags & MG_TENSOR_FLAG_OUTPUT) continue;
        const struct tensor_info * pi = info_of(ga, g, p);
        if (pi->live && pi->n_children == 1 && pi->n_views == 0 && pi->size == size && same_layout(p, t)) return p;
    }
    return NULL;
}
//@- 05 dying-parent

static void allocate_tensor(struct mg_gallocr * ga, const struct mg_cgraph * g, struct mg_tensor * t) {
    struct tensor_info * ti = info_of(ga, g, t);
    if (ti->planned || !needs_bytes(ga, t)) return;
    const size_t size = align_up(mg_nbytes(t), ga->alloc.alignment);
    struct mg_tensor * parent = dying_parent(ga, g, t, size);
    if (parent != NULL) {
        struct tensor_info * pi = info_of(ga, g, parent);
        pi->live   = false;   // its bytes are t's now: freeing parent must not free them
        pi->end    = ga->step;
        pi->handed_over = true;
        ti->offset = pi->offset;
        mg_trace(MG_TRACE_ALLOC, "reuse %-12s for %s (%zu bytes at %zu)", parent->name, t->name, size, ti->offset);
    } else {
        ti->offset = mg_dyn_alloc_alloc(&ga->alloc, size);
        trace_step(ga, "alloc", t, size, ti->offset);
    }
    ti->size    = size;
    ti->planned = true;
    ti->live    = true;
    ti->first   = ga->step;
    ti->end     = -1;   // until freed: to the end of the graph
    ga->sum    += size;
}

// Leafs (weights, inputs) and outputs keep their bytes for the caller.
static void free_tensor(struct mg_gallocr * ga, const struct mg_cgraph * g, struct mg_tensor * t) {
    struct tensor_info * ti = info_of(ga, g, t);
    if (!ti->live || t->op == MG_OP_NONE) return;
    if (t->flags & MG_TENSOR_FLAG_OUTPUT) return;
    mg_dyn_alloc_free(&ga->alloc, ti->offset, ti->size);
    ti->live = false;
    ti->end  = ga->step + 1;   // freed after this node ran: the next node may have its bytes
    trace_step(ga, "free", t, ti->size, ti->offset);
}

// p has no readers left. A view holds no bytes itself, but it keeps its
// source alive: the source goes when its last view and last reader are gone.
static void release(struct mg_gallocr * ga, const struct mg_cgraph * g, struct mg_tensor * p) {
    if (p->view_src != NULL) {
        struct tensor_info * si = info_of(ga, g, p->view_src);
        si->n_views--;
        if (si->n_children == 0 && si->n_views == 0) free_tensor(ga, g, p->view_src);
    } else {
        free_tensor(ga, g, p);
    }
}

static void ensure_info(struct mg_gallocr * ga, const struct mg_cgraph * g) {
    if (ga->info_size < g->visited.size) {
        free(ga->info);
        ga->info = malloc(g->visited.size * sizeof(struct tensor_info));
        MG_ASSERT(ga->info != NULL);
        ga->info_size = g->visited.size;
    }
    memset(ga->info, 0, g->visited.size * sizeof(struct tensor_info));
}

static void remember_graph(struct mg_gallocr * ga, const struct mg_cgraph * g) {
    free(ga->planned_nodes);
    free(ga->planned_sizes);
    ga->planned_nodes = malloc((size_t) (g->n_nodes + 1) * sizeof(struct mg_tensor *));
    ga->planned_sizes = malloc((size_t) (g->n_nodes + 1) * sizeof(size_t));
    MG_ASSERT(ga->planned_nodes != NULL && ga->planned_sizes != NULL);
    memcpy(ga->planned_nodes, g->nodes, (size_t) g->n_nodes * sizeof(struct mg_tensor *));
    for (int i = 0; i < g->n_nodes; i++) ga->planned_sizes[i] = mg_nbytes(g->nodes[i]);
    ga->planned_n_nodes = g->n_nodes;
    ga->planned_n_leafs = g->n_leafs;
}

//@+ 05 reserve
size_t mg_gallocr_reserve(struct mg_gallocr * ga, struct mg_cgraph * g) {
    mg_dyn_alloc_reset(&ga->alloc, ga->alloc.alignment);
    ensure_info(ga, g);
    ga->sum = 0;
    ga->n_reserves++;

    // Who reads what: a tensor dies when its last reader has run.
    for (int i = 0; i < g->n_nodes; i++) {
        struct mg_tensor * node = g->nodes[i];
        for (int j = 0; j < MG_MAX_SRC; j++) {
            if (node->src[j] != NULL) info_of(ga, g, node->src[j])->n_children++;
        }
        if (node->view_src != NULL) info_of(ga, g, node->view_src)->n_views++;
    }

    // Inputs first, at the bottom of the buffer: nothing computed later may
    // land on them before they are read.
    ga->step = 0;
    for (int i = 0; i < g->n_leafs; i++) {
        if (g->leafs[i]->flags & MG_TENSOR_FLAG_INPUT) allocate_tensor(ga, g, g->leafs[i]);
    }

    for (int i = 0; i < g->n_nodes; i++) {
        struct mg_tensor * node = g->nodes[i];
        ga->step = i;
        for (int j = 0; j < MG_MAX_SRC; j++) {
            if (node->src[j] != NULL) allocate_tensor(ga, g, node->src[j]);
        }
        allocate_tensor(ga, g, node);
        for (int j = 0; j < MG_MAX_SRC; j++) {
            struct mg_tensor * p = node->src[j];
            if (p == NULL) continue;
            struct tensor_info * pi = info_of(ga, g, p);
            pi->n_children--;
            if (pi->n_children == 0 && pi->n_views == 0) release(ga, g, p);
        }
    }

    ga->peak = ga->alloc.max_size;
    remember_graph(ga, g);
    mg_trace(MG_TRACE_ALLOC, "peak %zu bytes for %d results of %zu bytes", ga->peak, g->n_nodes, ga->sum);
    return ga->peak;
}
//@- 05 reserve

static void place_tensor(const struct mg_gallocr * ga, struct mg_tensor * t, char * base, size_t offset) {
    t->data      = base + offset;
    t->galloc_id = ga->id;
}

void mg_gallocr_place(struct mg_gallocr * ga, struct mg_cgraph * g, void * base) {
    for (int i = 0; i < g->n_leafs; i++) {
        struct tensor_info * ti = info_of(ga, g, g->leafs[i]);
        if (ti->planned) place_tensor(ga, g->leafs[i], base, ti->offset);
    }
    // Nodes are in execution order, so a view's source is placed before the view.
    for (int i = 0; i < g->n_nodes; i++) {
        struct mg_tensor * t = g->nodes[i];
        if (t->view_src != NULL) {
            t->data = t->view_src->data != NULL ? (char *) t->view_src->data + t->view_offs : NULL;
        } else if (info_of(ga, g, t)->planned) {
            place_tensor(ga, t, base, info_of(ga, g, t)->offset);
        }
    }
}

// The same tensors at the same addresses with the same sizes. Addresses alone
// are not enough: a graph rebuilt in a fresh context often lands exactly where
// the last one was, with other shapes (ggml_gallocr_needs_realloc checks sizes too).
static bool is_planned_graph(const struct mg_gallocr * ga, const struct mg_cgraph * g) {
    if (ga->planned_nodes == NULL || ga->planned_n_nodes != g->n_nodes || ga->planned_n_leafs != g->n_leafs) {
        return false;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        if (ga->planned_nodes[i] != g->nodes[i] || ga->planned_sizes[i] != mg_nbytes(g->nodes[i])) return false;
    }
    return true;
}

bool mg_gallocr_alloc_graph(struct mg_gallocr * ga, struct mg_cgraph * g) {
    if (!is_planned_graph(ga, g)) mg_gallocr_reserve(ga, g);
    if (ga->buffer == NULL || ga->buffer->size < ga->peak) {
        // A bigger plan than the buffer we have: grow it (ggml reallocates too).
        mg_buffer_free(ga->buffer);
        ga->buffer = mg_buffer_new(ga->peak);
        if (ga->buffer == NULL) return false;
        mg_trace(MG_TRACE_ALLOC, "compute buffer: %zu bytes", ga->peak);
    }
    mg_gallocr_place(ga, g, ga->buffer->data);
    return true;
}

size_t mg_gallocr_get_buffer_size(const struct mg_gallocr * ga) {
    return ga->peak;
}

size_t mg_gallocr_get_sum_size(const struct mg_gallocr * ga) {
    return ga->sum;
}

int mg_gallocr_n_reserves(const struct mg_gallocr * ga) {
    return ga->n_reserves;
}

//@+ full galloc-buffer
const struct mg_buffer * mg_gallocr_get_buffer(const struct mg_gallocr * ga) {
    return ga->buffer;
}
//@- full galloc-buffer

bool mg_gallocr_get_offset(const struct mg_gallocr * ga, const struct mg_cgraph * g, const struct mg_tensor * t,
                           size_t * offset) {
    if (!mg_graph_contains(g, t)) return false;
    const struct tensor_info * ti = &ga->info[mg_hash_find(&g->visited, t)];
    if (!ti->planned) return false;
    *offset = ti->offset;
    return true;
}

// The lifetimes of the last plan, leafs first, then nodes in order: what
// galloc_svg.c draws and what tests check the plan with.
int mg_gallocr_lifetimes(const struct mg_gallocr * ga, const struct mg_cgraph * g, struct mg_gallocr_lifetime * out,
                         int max) {
    int n = 0;
    for (int k = 0; k < g->n_leafs + g->n_nodes; k++) {
        const struct mg_tensor * t  = k < g->n_leafs ? g->leafs[k] : g->nodes[k - g->n_leafs];
        const struct tensor_info * ti = &ga->info[mg_hash_find(&g->visited, t)];
        if (!ti->planned) continue;
        if (n < max) {
            out[n] = (struct mg_gallocr_lifetime) {
                .tensor = t, .offset = ti->offset, .size = ti->size, .first = ti->first,
                .end = ti->end < 0 ? g->n_nodes : ti->end, .handed_over = ti->handed_over,
            };
        }
        n++;
    }
    return n;
}
