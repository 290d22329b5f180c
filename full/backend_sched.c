//@file full
// backend_sched.c - the scheduler of backend_sched.h: five passes over the graph assign a
// backend to every tensor, the fifth cuts the splits and inserts copies
// (ggml-backend.cpp: ggml_backend_sched_split_graph, _compute_splits).
#include "backend_sched.h"
#include "arena.h"
#include "galloc.h"
#include "trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct pin {
    const struct mg_tensor * t;
    int                      backend;
};

struct mg_sched {
    mg_backend_t backends[MG_SCHED_MAX_BACKENDS];
    int          n_backends;
    int          graph_size;

    struct pin * pins;   // mg_sched_set_tensor_backend's wishes, applied at the next alloc
    int          n_pins;
    int          pins_capacity;

    // The last graph given to mg_sched_alloc_graph, and what was decided for it.
    const struct mg_cgraph * graph;
    int *                    ids;        // per slot of graph->visited: the backend, -1 none yet
    struct mg_tensor **      copy_of;    // per slot and backend: the tensor's copy there, or NULL
    struct mg_sched_split *  splits;
    int                      n_splits;
    struct mg_tensor **      inputs;     // every split's inputs, one after the other
    struct mg_tensor **      copies;     // and their copies
    int                      n_copies;
    size_t                   copy_bytes;

    mg_backend_buffer_t device_bufs[MG_SCHED_MAX_BACKENDS];   // per backend without host memory, or NULL
    struct mg_context * ctx;      // the copies' headers and the graph that includes them
    struct mg_cgraph *  graph2;   // the caller's nodes, with the copies as leafs: what is allocated and run
    struct mg_gallocr * galloc;
};

struct mg_sched * mg_sched_new(mg_backend_t * backends, int n_backends, int graph_size) {
    if (n_backends < 1 || n_backends > MG_SCHED_MAX_BACKENDS) {
        mg_set_error("scheduler: %d backends (1 to %d)", n_backends, MG_SCHED_MAX_BACKENDS);
        return NULL;
    }
    if (!mg_backend_is_cpu(backends[n_backends - 1])) {
        mg_set_error("scheduler: the last backend must be the CPU (it is %s)", mg_backend_name(backends[n_backends - 1]));
        return NULL;
    }
    struct mg_sched * sched = calloc(1, sizeof *sched);
    if (sched == NULL || (sched->galloc = mg_gallocr_new(0)) == NULL) {
        free(sched);
        mg_set_error("scheduler: out of memory");
        return NULL;
    }
    memcpy(sched->backends, backends, (size_t) n_backends * sizeof backends[0]);
    sched->n_backends = n_backends;
    sched->graph_size = graph_size > 0 ? graph_size : MG_DEFAULT_GRAPH_SIZE;
    return sched;
}

static void forget_graph(struct mg_sched * sched) {
    free(sched->ids);
    free(sched->copy_of);
    free(sched->splits);
    free(sched->inputs);
    free(sched->copies);
    mg_free(sched->ctx);
    for (int b = 0; b < MG_SCHED_MAX_BACKENDS; b++) {
        mg_backend_buffer_free(sched->device_bufs[b]);
        sched->device_bufs[b] = NULL;
    }
    sched->ids = NULL, sched->copy_of = NULL, sched->splits = NULL, sched->inputs = NULL, sched->copies = NULL;
    sched->ctx = NULL, sched->graph2 = NULL, sched->graph = NULL;
    sched->n_splits = 0, sched->n_copies = 0, sched->copy_bytes = 0;
}

void mg_sched_free(struct mg_sched * sched) {
    if (sched == NULL) return;
    forget_graph(sched);
    mg_gallocr_free(sched->galloc);
    free(sched->pins);
    free(sched);
}

void mg_sched_set_tensor_backend(struct mg_sched * sched, struct mg_tensor * t, int i) {
    if (i < 0 || i >= sched->n_backends) {
        fprintf(stderr, "mg: scheduler: backend %d of %d for tensor '%s'\n", i, sched->n_backends, mg_quote(t->name));
        abort();
    }
    if (sched->n_pins == sched->pins_capacity) {
        sched->pins_capacity = sched->pins_capacity ? 2 * sched->pins_capacity : 16;
        sched->pins          = realloc(sched->pins, (size_t) sched->pins_capacity * sizeof *sched->pins);
        if (sched->pins == NULL) abort();
    }
    sched->pins[sched->n_pins++] = (struct pin) {t, i};
}

// The backend of t, as a place that can be written: every tensor a graph
// holds has a slot in its hash set (graph.h), and ids[] is indexed by it.
static int * id_of(const struct mg_sched * sched, const struct mg_tensor * t) {
    return &sched->ids[mg_hash_find(&sched->graph->visited, t)];
}

int mg_sched_get_tensor_backend(const struct mg_sched * sched, const struct mg_tensor * t) {
    if (sched->graph == NULL || !mg_graph_contains(sched->graph, t)) return -1;
    return *id_of(sched, t);
}

static bool is_view_op(enum mg_op op) {
    return op == MG_OP_VIEW || op == MG_OP_RESHAPE || op == MG_OP_PERMUTE || op == MG_OP_TRANSPOSE;
}

// Bytes that are already somewhere before the graph runs: weights, the KV
// cache, views of them. A graph allocator's earlier placement does not count
// (it will place the tensor again).
static bool is_preallocated(const struct mg_tensor * t) {
    const struct mg_tensor * owner = t->view_src != NULL ? t->view_src : t;
    return owner->data != NULL && owner->galloc_id == 0;
}

// The first backend that can read t's memory and run op (ggml_backend_sched_backend_from_buffer).
static int backend_from_buffer(const struct mg_sched * sched, const struct mg_tensor * t, const struct mg_tensor * op) {
    const mg_backend_buffer_type_t buft = mg_backend_tensor_buft(t);
    for (int i = 0; i < sched->n_backends; i++) {
        if (mg_backend_supports_buft(sched->backends[i], buft) && mg_backend_supports_op(sched->backends[i], op)) {
            return i;
        }
    }
    return -1;
}

// Can backends[b] read t where it will be? Its own memory's type, or the
// default memory of the backend it was given (ggml_backend_sched_buffer_supported).
static bool buffer_supported(const struct mg_sched * sched, const struct mg_tensor * t, int b) {
    mg_backend_buffer_type_t buft = NULL;
    if (is_preallocated(t)) {
        buft = mg_backend_tensor_buft(t);
    } else {
        int id = *id_of(sched, t);
        if (id == -1 && t->view_src != NULL) id = *id_of(sched, t->view_src);
        if (id != -1) buft = mg_backend_get_default_buffer_type(sched->backends[id]);
    }
    return buft != NULL && mg_backend_supports_buft(sched->backends[b], buft);
}

// Pass 1 for one tensor (ggml_backend_sched_backend_id_from_cur): where
// its bytes are, the CPU for a graph input, else where its first weight is.
// -1: decided later. False, with mg_last_error(), for memory nobody reads.
static bool backend_from_cur(const struct mg_sched * sched, const struct mg_tensor * t, int * out) {
    *out = -1;
    if (is_preallocated(t)) {
        *out = backend_from_buffer(sched, t, t);
        if (*out == -1) {
            mg_set_error("scheduler: tensor '%s' is in %s memory, which no backend given can read and run %s on",
                         t->name, mg_backend_buft_name(mg_backend_tensor_buft(t)), mg_op_name(t->op));
            return false;
        }
        return true;
    }
    if (t->flags & MG_TENSOR_FLAG_INPUT) {
        *out = sched->n_backends - 1;   // filled by the caller in host memory: the CPU's
        return true;
    }
    for (int j = 0; j < MG_MAX_SRC; j++) {
        const struct mg_tensor * src = t->src[j];
        if (src != NULL && src->op == MG_OP_NONE && is_preallocated(src)) {
            // Moving a weight costs more than moving the activation: run the op where the weight is.
            *out = backend_from_buffer(sched, src, t);
            return true;
        }
    }
    return true;
}

static void set_if_supported(const struct mg_sched * sched, const struct mg_tensor * node, int b, int * id) {
    if (mg_backend_supports_op(sched->backends[b], node)) *id = b;
}

// Pass 2, one sweep (ggml's four loops of "expand"): every unassigned node
// after (down) or before (up) an assigned one takes its backend if it can.
// gpu_only: spread only the backends before the CPU, so that the CPU
// does not pull a GPU layer's norms back from the GPU.
static void expand(struct mg_sched * sched, const struct mg_cgraph * g, bool down, bool gpu_only) {
    int cur = -1;
    for (int k = 0; k < g->n_nodes; k++) {
        const struct mg_tensor * node = g->nodes[down ? k : g->n_nodes - 1 - k];
        if (is_view_op(node->op)) continue;
        int * id = id_of(sched, node);
        if (*id != -1) {
            cur = gpu_only && *id == sched->n_backends - 1 ? -1 : *id;
        } else if (cur != -1) {
            set_if_supported(sched, node, cur, id);
        }
    }
}

// Pass 3 (ggml's "upgrade"): a node moves to a backend of higher priority
// that runs it and reads every one of its sources where they are.
static void upgrade(struct mg_sched * sched, const struct mg_cgraph * g) {
    for (int i = 0; i < g->n_nodes; i++) {
        const struct mg_tensor * node = g->nodes[i];
        int *                    id   = id_of(sched, node);
        if (is_view_op(node->op) || *id <= 0) continue;
        for (int b = 0; b < *id; b++) {
            bool readable = mg_backend_supports_op(sched->backends[b], node);
            for (int j = 0; j < MG_MAX_SRC && readable; j++) {
                if (node->src[j] != NULL) readable = buffer_supported(sched, node->src[j], b);
            }
            if (readable) {
                *id = b;
                break;
            }
        }
    }
}

// Pass 4: views where their source is, leafs where their first user is,
// anything left on the first backend that runs it.
static bool assign_rest(struct mg_sched * sched, const struct mg_cgraph * g) {
    for (int i = 0; i < g->n_nodes; i++) {
        struct mg_tensor * node = g->nodes[i];
        int *              id   = id_of(sched, node);
        if (node->view_src != NULL && *id == -1) *id = *id_of(sched, node->view_src);
        for (int j = 0; j < MG_MAX_SRC; j++) {
            const struct mg_tensor * src = node->src[j];
            if (src == NULL) continue;
            int * src_id = id_of(sched, src);
            if (*src_id == -1) *src_id = src->view_src != NULL ? *id_of(sched, src->view_src) : *id;
        }
        for (int b = 0; b < sched->n_backends && *id == -1; b++) set_if_supported(sched, node, b, id);
        if (*id == -1) {
            mg_set_error("scheduler: no backend can run node %d '%s' (%s %s)", i, node->name, mg_op_name(node->op),
                         mg_type_name(node->type));
            return false;
        }
    }
    return true;
}

static bool assign_backends(struct mg_sched * sched, const struct mg_cgraph * g) {
    for (size_t s = 0; s < g->visited.size; s++) sched->ids[s] = -1;
    for (int p = 0; p < sched->n_pins; p++) {
        if (mg_graph_contains(g, sched->pins[p].t)) *id_of(sched, sched->pins[p].t) = sched->pins[p].backend;
    }
    // Pass 1: the leafs and nodes whose place follows from their memory or their weights.
    for (int k = 0; k < g->n_leafs + g->n_nodes; k++) {
        const struct mg_tensor * t  = k < g->n_leafs ? g->leafs[k] : g->nodes[k - g->n_leafs];
        int *                    id = id_of(sched, t);
        if (*id == -1 && !backend_from_cur(sched, t, id)) return false;
    }
    expand(sched, g, true, true);     // pass 2: the GPUs' nodes down ...
    expand(sched, g, false, true);    // ... and up,
    expand(sched, g, true, false);    // then everyone's down ...
    expand(sched, g, false, false);   // ... and up
    upgrade(sched, g);                // pass 3
    return assign_rest(sched, g);     // pass 4
}

// A tensor like src, with its strides, in the context of the copies
// (ggml_dup_tensor_layout): the bytes are copied as they are.
static struct mg_tensor * dup_layout(struct mg_sched * sched, const struct mg_tensor * src, int backend) {
    struct mg_tensor * copy = mg_new_tensor(sched->ctx, src->type, MG_MAX_DIMS, src->ne);
    if (copy == NULL) return NULL;
    memcpy(copy->nb, src->nb, sizeof copy->nb);
    mg_format_name(copy, "%s#%s#0", mg_backend_name(sched->backends[backend]), src->name);
    copy->flags |= MG_TENSOR_FLAG_INPUT;   // placed before the nodes and kept for the whole graph
    return copy;
}

static struct mg_sched_split * start_split(struct mg_sched * sched, int backend, int i_start) {
    struct mg_sched_split * split = &sched->splits[sched->n_splits++];
    *split = (struct mg_sched_split) {
        .backend = backend,
        .i_start = i_start,
        .inputs  = sched->inputs + sched->n_copies,
        .copies  = sched->copies + sched->n_copies,
    };
    return split;
}

// Pass 5: a new split where the backend changes; every source a split's node
// reads from a backend whose memory its own cannot read is copied in once per
// backend, and the node reads the copy.
static bool cut_splits(struct mg_sched * sched, const struct mg_cgraph * g) {
    struct mg_sched_split * split = NULL;
    for (int i = 0; i < g->n_nodes; i++) {
        struct mg_tensor * node = g->nodes[i];
        if (is_view_op(node->op)) continue;   // computes nothing: stays in whatever split it falls in
        const int id = *id_of(sched, node);
        if (split == NULL) {
            split = start_split(sched, id, 0);
        } else if (id != split->backend) {
            split->i_end = i;
            split        = start_split(sched, id, i);
        }
        for (int j = 0; j < MG_MAX_SRC; j++) {
            struct mg_tensor * src = node->src[j];
            if (src == NULL) continue;
            const size_t slot = mg_hash_find(&g->visited, src);
            if (sched->ids[slot] == id || buffer_supported(sched, src, id)) continue;
            struct mg_tensor ** copy = &sched->copy_of[slot * (size_t) sched->n_backends + (size_t) id];
            if (*copy == NULL) {
                if ((*copy = dup_layout(sched, src, id)) == NULL) return false;
                // The copy is made when the split starts, which the graph
                // allocator does not see: it could give src's bytes to a later
                // tensor before then. Marked as an output, src keeps them
                // (ggml puts the copy in the graph instead).
                struct mg_tensor * owner = src->view_src != NULL ? src->view_src : src;
                if (!is_preallocated(owner)) owner->flags |= MG_TENSOR_FLAG_OUTPUT;
                split->inputs[split->n_inputs] = src;
                split->copies[split->n_inputs] = *copy;
                split->n_inputs++;
                sched->n_copies++;
                sched->copy_bytes += mg_nbytes(src);
            }
            node->src[j] = *copy;
        }
    }
    if (split != NULL) split->i_end = g->n_nodes;
    return true;
}

// The caller's nodes in the caller's order, with the copies as new leafs:
// expanding node by node in order visits every source before its user, so
// node i of this graph is node i of the caller's. A leaf that only a copy
// reads (the token ids, read on a GPU) is no node's source any more: it is
// added first, so that the allocator still gives it bytes.
static bool build_graph2(struct mg_sched * sched, const struct mg_cgraph * g) {
    sched->graph2 = mg_new_graph_custom(sched->ctx, g->size + sched->n_copies);
    if (sched->graph2 == NULL) return false;
    for (int k = 0; k < sched->n_copies; k++) {
        if (sched->inputs[k]->op == MG_OP_NONE) mg_build_forward_expand(sched->graph2, sched->inputs[k]);
    }
    for (int i = 0; i < g->n_nodes; i++) mg_build_forward_expand(sched->graph2, g->nodes[i]);
    if (sched->graph2->n_nodes != g->n_nodes) {
        mg_set_error("scheduler: the graph has %d nodes, its copy %d", g->n_nodes, sched->graph2->n_nodes);
        return false;
    }
    return true;
}

// Move t from the host plan to backend b's buffer, at the offset the plan gave it.
static bool rehome(struct mg_sched * sched, struct mg_tensor * t, int b, const char * host_base, size_t host_size) {
    const char * at = t->data;
    if (t->view_src != NULL || at == NULL || at < host_base || at >= host_base + host_size) return true;   // not planned here
    char * base = mg_backend_buffer_get_base(sched->device_bufs[b]);
    return mg_backend_tensor_alloc(sched->device_bufs[b], t, base + (at - host_base));
}

// The graph allocator plans one host buffer. A backend whose memory is not
// host memory (a GPU) gets a buffer of its own as big as that plan, and its
// tensors move there at the offsets the plan gave them: the plan keeps apart
// any two tensors alive at the same time, whichever backend they are on.
// (ggml plans one buffer per backend; this one wastes the bytes the other
// backends' tensors take in it - not yet as small as ggml's.) Views then
// follow their sources.
static bool give_devices_their_memory(struct mg_sched * sched) {
    const struct mg_buffer * host = mg_gallocr_get_buffer(sched->galloc);
    const char *             base = host->data;
    const struct mg_cgraph * g    = sched->graph;
    for (int b = 0; b < sched->n_backends; b++) {
        mg_backend_buffer_type_t buft = mg_backend_get_default_buffer_type(sched->backends[b]);
        if (mg_backend_buft_is_host(buft)) continue;
        if ((sched->device_bufs[b] = mg_backend_buft_alloc_buffer(buft, host->size)) == NULL) return false;
        for (int s = 0; s < sched->n_splits; s++) {
            const struct mg_sched_split * split = &sched->splits[s];
            for (int k = 0; k < split->n_inputs && split->backend == b; k++) {
                if (!rehome(sched, split->copies[k], b, base, host->size)) return false;
            }
        }
        for (int k = 0; k < g->n_leafs + g->n_nodes; k++) {
            struct mg_tensor * t = k < g->n_leafs ? g->leafs[k] : g->nodes[k - g->n_leafs];
            if (*id_of(sched, t) == b && !rehome(sched, t, b, base, host->size)) return false;
        }
    }
    for (int i = 0; i < g->n_nodes; i++) {
        struct mg_tensor * t = g->nodes[i];
        if (t->view_src != NULL) t->data = (char *) t->view_src->data + t->view_offs;
    }
    return true;
}

// "CPU2: nodes 0..2 (MUL_MAT y, ADD y2)": what MG_TRACE=sched shows of a split.
static void trace_split(const struct mg_sched * sched, const struct mg_cgraph * g, int s) {
    const struct mg_sched_split * split = &sched->splits[s];
    char nodes[512] = "";
    size_t used = 0;
    for (int i = split->i_start; i < split->i_end && used < sizeof nodes - 8; i++) {
        if (is_view_op(g->nodes[i]->op)) continue;
        used += (size_t) snprintf(nodes + used, sizeof nodes - used, "%s%s %s", used ? ", " : "",
                                  mg_op_name(g->nodes[i]->op), g->nodes[i]->name);
    }
    if (used >= sizeof nodes - 8) snprintf(nodes + sizeof nodes - 8, 8, ", ...");
    mg_trace(MG_TRACE_SCHED, "  split %d: %s, nodes %d..%d (%s)", s, mg_backend_name(sched->backends[split->backend]),
             split->i_start, split->i_end - 1, nodes);
    for (int k = 0; k < split->n_inputs; k++) {
        const struct mg_tensor * in = split->inputs[k];
        mg_trace(MG_TRACE_SCHED, "    copy in %s from %s: %zu bytes", in->name,
                 mg_backend_name(sched->backends[mg_sched_get_tensor_backend(sched, in)]), mg_nbytes(in));
    }
}

bool mg_sched_alloc_graph(struct mg_sched * sched, struct mg_cgraph * g) {
    forget_graph(sched);
    const size_t slots     = g->visited.size;
    const size_t max_copies = (size_t) (g->n_nodes + g->n_leafs) * (size_t) sched->n_backends;
    sched->graph   = g;
    sched->ids     = malloc(slots * sizeof *sched->ids);
    sched->copy_of = calloc(slots * (size_t) sched->n_backends, sizeof *sched->copy_of);
    sched->splits  = calloc((size_t) g->n_nodes + 1, sizeof *sched->splits);
    sched->inputs  = calloc(max_copies + 1, sizeof *sched->inputs);
    sched->copies  = calloc(max_copies + 1, sizeof *sched->copies);
    sched->ctx     = mg_init((struct mg_init_params) {
        .mem_size = (max_copies + 1) * mg_tensor_overhead() + mg_graph_overhead_custom(g->size + (int) max_copies),
        .no_alloc = true});
    if (sched->ids == NULL || sched->copy_of == NULL || sched->splits == NULL || sched->inputs == NULL ||
        sched->copies == NULL || sched->ctx == NULL) {
        forget_graph(sched);
        mg_set_error("scheduler: out of memory for a graph of %d nodes", g->n_nodes);
        return false;
    }
    // Results placed by an earlier plan go back to the host plan first.
    for (int k = 0; k < g->n_leafs + g->n_nodes; k++) {
        struct mg_tensor * t = k < g->n_leafs ? g->leafs[k] : g->nodes[k - g->n_leafs];
        if (t->view_src == NULL && !is_preallocated(t)) t->buffer = NULL;
    }
    if (!assign_backends(sched, g) || !cut_splits(sched, g) || !build_graph2(sched, g) ||
        !mg_gallocr_alloc_graph(sched->galloc, sched->graph2) || !give_devices_their_memory(sched)) {
        return false;
    }
    mg_trace(MG_TRACE_SCHED, "graph of %d nodes: %d split%s, %d cop%s, %zu bytes copied per compute", g->n_nodes,
             sched->n_splits, sched->n_splits == 1 ? "" : "s", sched->n_copies, sched->n_copies == 1 ? "y" : "ies",
             sched->copy_bytes);
    for (int s = 0; s < sched->n_splits; s++) trace_split(sched, g, s);
    return true;
}

bool mg_sched_graph_compute(struct mg_sched * sched, struct mg_cgraph * g) {
    if (g != sched->graph || sched->graph2 == NULL) {
        mg_set_error("scheduler: compute of a graph it did not allocate (call mg_sched_alloc_graph first)");
        return false;
    }
    for (int s = 0; s < sched->n_splits; s++) {
        const struct mg_sched_split * split   = &sched->splits[s];
        mg_backend_t                  backend = sched->backends[split->backend];
        for (int k = 0; k < split->n_inputs; k++) mg_backend_tensor_copy(split->inputs[k], split->copies[k]);
        // The split as a graph of its own: a window on the node array, as
        // ggml_graph_view makes one.
        struct mg_cgraph view = *sched->graph2;
        view.nodes            = sched->graph2->nodes + split->i_start;
        view.n_nodes          = split->i_end - split->i_start;
        if (!mg_backend_graph_compute(backend, &view)) return false;
        mg_backend_synchronize(backend);
    }
    return true;
}

int mg_sched_n_splits(const struct mg_sched * sched) { return sched->n_splits; }

const struct mg_sched_split * mg_sched_get_split(const struct mg_sched * sched, int i) {
    return i >= 0 && i < sched->n_splits ? &sched->splits[i] : NULL;
}

int          mg_sched_n_copies(const struct mg_sched * sched) { return sched->n_copies; }
size_t       mg_sched_copy_bytes(const struct mg_sched * sched) { return sched->copy_bytes; }
mg_backend_t mg_sched_get_backend(const struct mg_sched * sched, int i) { return sched->backends[i]; }
int          mg_sched_n_backends(const struct mg_sched * sched) { return sched->n_backends; }
