//@file 04
// dot.c - a graph as a Graphviz drawing (ggml.c: ggml_graph_dump_dot, redone).
//
// Differences from ggml's drawing, each for the reader: ids are stable (n3,
// l2) so two runs give the same file; weights, inputs and computed nodes have
// different shapes; nodes are coloured by what kind of op they are; every box
// shows all four dims, the type and the bytes; a view is tied to the tensor
// whose bytes it reads by a dashed edge labelled with the offset.
#define _POSIX_C_SOURCE 200809L
#include "graph.h"
#include "trace.h"   // mg_demo_switch

//@+ full dot-extras
#include "backend_sched.h"
#include "galloc.h"
//@- full dot-extras
//@+ full outfile
#include "outfile.h"
//@- full outfile

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

// Record labels give { } | < > and quotes a meaning: escape them in names.
static void put_escaped(FILE * f, const char * s) {
    for (; *s; s++) {
        if (strchr("{}|<>\"\\", *s)) fputc('\\', f);
        fputc(*s, f);
    }
}

// The colour of an op's family. No default: with -Wswitch, an op added to
// enum mg_op without a colour here is a compile error.
const char * mg_op_dot_colour(enum mg_op op) {
    switch (op) {
        case MG_OP_MUL_MAT:   return "#f6b26b";   // the expensive ones
        case MG_OP_RMS_NORM:
        case MG_OP_SOFT_MAX:
        case MG_OP_SUM_ROWS:  return "#b4a7d6";   // row reductions
        case MG_OP_NONE:                          // (a leaf is drawn by put_leaf: never asked)
        case MG_OP_VIEW:
        case MG_OP_RESHAPE:
        case MG_OP_PERMUTE:
        case MG_OP_TRANSPOSE: return "#eeeeee";   // free: no arithmetic
        case MG_OP_CPY:
        case MG_OP_CONT:
        case MG_OP_GET_ROWS:  return "#ffffff";   // data movement
        case MG_OP_ADD:
        case MG_OP_SUB:
        case MG_OP_MUL:
        case MG_OP_DIV:
        case MG_OP_SCALE:
        case MG_OP_SQR:
        case MG_OP_SQRT:
        case MG_OP_RELU:
        case MG_OP_SILU:
        case MG_OP_GELU:      return "#9fc5e8";   // element-wise arithmetic
        //@+ 06 attention-ops
        case MG_OP_ROPE:      return "#ffe599";   // attention's own ops
        //@- 06 attention-ops
        //@+ 09 set-rows
        case MG_OP_SET_ROWS:  return "#ffffff";
        //@- 09 set-rows
        //@+ full fused-ops
        case MG_OP_SWIGLU:     return "#9fc5e8";
        case MG_OP_FLASH_ATTN: return "#ffe599";
        //@- full fused-ops
        //@+ full moe
        case MG_OP_CLAMP:      return "#9fc5e8";
        case MG_OP_ARGSORT:    return "#ffffff";
        case MG_OP_MUL_MAT_ID: return "#f6b26b";   // mul_mat per expert
        //@- full moe
        case MG_OP_COUNT:     break;
    }
    return NULL;   // MG_OP_COUNT, or a value outside the enum
}

static void put_shape(FILE * f, const struct mg_tensor * t) {
    char shape[MG_SHAPE_STR_MAX];
    fprintf(f, "%s %s %zu B", mg_type_name(t->type), mg_shape_str(t->ne, MG_MAX_DIMS, ",", shape, sizeof(shape)),
            mg_nbytes(t));
}

//@+ full dot-extras
// What mg_graph_dump_dot_ext adds to one drawing: set for its duration.
static _Thread_local const struct mg_dot_extras * extras;
static _Thread_local int *  node_layer;   // [n_nodes]: the layer of each node, -1 outside the layers
static _Thread_local int *  leaf_layer;   // [n_leafs]
static _Thread_local bool * node_drawn;   // [n_nodes]: false when cut by max_layers
static _Thread_local bool * leaf_drawn;   // [n_leafs]

// The N of a name like "ffn_out-3" (llama.cpp's naming, qwen3.c) or "blk.3.attn_q.weight" or
// "cache_k_l3", ignoring a view's " (reshaped)" tail; -1 for any other name.
static int layer_in_name(const char * name) {
    int n = -1, len = 0;
    if (sscanf(name, "blk.%d.%n", &n, &len) == 1 && len > 0) return n;
    if (sscanf(name, "cache_%*c_l%d%n", &n, &len) == 1 && (name[len] == '\0' || name[len] == ' ')) return n;
    const char * end = strstr(name, " (");
    if (end == NULL) end = name + strlen(name);
    const char * p = end;
    while (p > name && p[-1] >= '0' && p[-1] <= '9') p--;
    if (p == end || p == name || p[-1] != '-') return -1;
    return atoi(p);
}

// A node with no layer in its name ("node_12", " (reshaped)") belongs to the
// layer its readers are in (the norm before attn_norm-0), or, with none, to
// its sources' (the graph's end reads the last layer but is no layer: named
// nodes outside the layers keep -1).
static bool has_own_name(const struct mg_tensor * t) {
    return t->name[0] != '\0' && t->name[0] != ' ' && strncmp(t->name, "node_", 5) != 0;
}

static int index_of_node(const struct mg_cgraph * g, const struct mg_tensor * t) {
    for (int i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i] == t) return i;
    }
    return -1;
}

static int index_of_leaf(const struct mg_cgraph * g, const struct mg_tensor * t) {
    for (int i = 0; i < g->n_leafs; i++) {
        if (g->leafs[i] == t) return i;
    }
    return -1;
}

static void assign_layers(const struct mg_cgraph * g) {
    for (int i = 0; i < g->n_leafs; i++) leaf_layer[i] = layer_in_name(g->leafs[i]->name);
    for (int i = 0; i < g->n_nodes; i++) node_layer[i] = has_own_name(g->nodes[i]) ? layer_in_name(g->nodes[i]->name) : -2;
    // Unnamed nodes: the smallest layer among their readers, from the end back.
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        if (node_layer[i] != -2) continue;
        int layer = -2;
        for (int k = i + 1; k < g->n_nodes; k++) {
            for (int j = 0; j < MG_MAX_SRC; j++) {
                if (g->nodes[k]->src[j] == g->nodes[i] && (layer == -2 || node_layer[k] < layer)) layer = node_layer[k];
            }
        }
        node_layer[i] = layer;
    }
    // Unnamed nodes nobody reads: their sources' largest layer.
    for (int i = 0; i < g->n_nodes; i++) {
        if (node_layer[i] != -2) continue;
        node_layer[i] = -1;
        for (int j = 0; j < MG_MAX_SRC; j++) {
            const int s = g->nodes[i]->src[j] != NULL ? index_of_node(g, g->nodes[i]->src[j]) : -1;
            if (s >= 0 && s < i && node_layer[s] > node_layer[i]) node_layer[i] = node_layer[s];
        }
    }
}

// max_layers cuts layers >= max_layers and everything computed from them;
// a leaf is drawn when a drawn node reads it.
static void choose_drawn(const struct mg_cgraph * g, int max_layers) {
    for (int i = 0; i < g->n_leafs; i++) leaf_drawn[i] = false;
    for (int i = 0; i < g->n_nodes; i++) {
        const struct mg_tensor * t = g->nodes[i];
        bool drawn = max_layers < 0 || node_layer[i] < max_layers;
        for (int j = 0; j < MG_MAX_SRC && drawn; j++) {
            const int s = t->src[j] != NULL ? index_of_node(g, t->src[j]) : -1;
            if (s >= 0 && !node_drawn[s]) drawn = false;
        }
        node_drawn[i] = drawn;
        for (int j = 0; j < MG_MAX_SRC && drawn; j++) {
            const int l = t->src[j] != NULL ? index_of_leaf(g, t->src[j]) : -1;
            if (l >= 0) leaf_drawn[l] = true;
        }
        const int v = drawn && t->view_src != NULL ? index_of_leaf(g, t->view_src) : -1;
        if (v >= 0) leaf_drawn[v] = true;
    }
}

// The fourth field of a node's box: where the allocator put it, how long it took.
static void put_annotations(FILE * f, const struct mg_cgraph * g, int i) {
    if (extras == NULL) return;
    size_t offset;
    if (extras->galloc != NULL && mg_gallocr_get_offset(extras->galloc, g, g->nodes[i], &offset)) {
        fprintf(f, " | at %zu in the compute buffer", offset);
    }
    if (extras->node_us != NULL && extras->node_us[i] > 0) fprintf(f, " | %.1f us", extras->node_us[i]);
}

static void put_boxes(FILE * f, const struct mg_cgraph * g);
static void put_backend_legend(FILE * f);

// An HTML-like label (the legends) gives & < > a meaning: escape them in a backend's name.
static void put_html_escaped(FILE * f, const char * s) {
    for (; *s; s++) {
        if (*s == '&') fputs("&amp;", f);
        else if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else fputc(*s, f);
    }
}

// The scheduler's copies: c<split>_<input>, the id put_edges gives a node
// that reads one.
static bool put_copy_id(FILE * f, const struct mg_tensor * t) {
    const struct mg_sched * sched = extras != NULL ? extras->sched : NULL;
    for (int k = 0; sched != NULL && k < mg_sched_n_splits(sched); k++) {
        const struct mg_sched_split * sp = mg_sched_get_split(sched, k);
        for (int j = 0; j < sp->n_inputs; j++) {
            if (sp->copies[j] == t) {
                fprintf(f, "c%d_%d", k, j);
                return true;
            }
        }
    }
    return false;
}
//@- full dot-extras

// An id that is the same on every run: n<index> for nodes, l<index> for leafs.
static void put_id(FILE * f, const struct mg_cgraph * g, const struct mg_tensor * t) {
    for (int i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i] == t) {
            fprintf(f, "n%d", i);
            return;
        }
    }
    for (int i = 0; i < g->n_leafs; i++) {
        if (g->leafs[i] == t) {
            fprintf(f, "l%d", i);
            return;
        }
    }
    //@+ full dot-extras
    if (put_copy_id(f, t)) return;   // a scheduler's copy: the graph's nodes read it, the graph does not hold it
    //@- full dot-extras
    fprintf(f, "outside");   // a view_src the graph does not hold (cannot happen for built graphs)
}

static void put_leaf(FILE * f, const struct mg_cgraph * g, int i) {
    const struct mg_tensor * t = g->leafs[i];
    const char * colour = "#f4cccc";   // weights and constants: pink, like ggml's
    //@+ 05 tensor-flags
    if (t->flags & MG_TENSOR_FLAG_INPUT) colour = "#b6d7a8";   // inputs set before every run: green
    //@- 05 tensor-flags
    fprintf(f, "  l%d [shape=record, style=\"rounded,filled\", fillcolor=\"%s\", label=\"{", i, colour);
    put_escaped(f, t->name);
    fprintf(f, " | ");
    put_shape(f, t);
    fprintf(f, "}\"];\n");
}

static void put_node(FILE * f, const struct mg_cgraph * g, int i) {
    const struct mg_tensor * t = g->nodes[i];
    fprintf(f, "  n%d [shape=record, style=filled, fillcolor=\"%s\"", i, mg_op_dot_colour(t->op));
    //@+ 05 tensor-flags
    if (t->flags & MG_TENSOR_FLAG_OUTPUT) fprintf(f, ", penwidth=3");
    //@- 05 tensor-flags
    fprintf(f, ", label=\"{#%d %s ", i, mg_op_name(t->op));
    put_escaped(f, mg_op_symbol(t->op));   // "ADD x+y": the op table's symbol says what it computes
    fprintf(f, " | ");
    put_escaped(f, t->name);
    fprintf(f, " | ");
    put_shape(f, t);
    //@+ full dot-extras
    put_annotations(f, g, i);
    //@- full dot-extras
    fprintf(f, "}\"];\n");
}

static void put_edges(FILE * f, const struct mg_cgraph * g, int i) {
    const struct mg_tensor * t = g->nodes[i];
    for (int j = 0; j < MG_MAX_SRC; j++) {
        if (t->src[j] == NULL) continue;
        fprintf(f, "  ");
        put_id(f, g, t->src[j]);
        fprintf(f, " -> n%d [label=\"src%d\", fontsize=9];\n", i, j);
    }
    // A view reads its root's bytes: say which, and from where.
    if (t->view_src != NULL && t->view_src != t->src[0]) {
        fprintf(f, "  ");
        put_id(f, g, t->view_src);
        fprintf(f, " -> n%d [style=dashed, arrowhead=empty, label=\"bytes +%zu\", fontsize=9];\n", i, t->view_offs);
    } else if (t->view_src != NULL) {
        fprintf(f, "  ");
        put_id(f, g, t->view_src);
        fprintf(f, " -> n%d [style=dashed, arrowhead=empty, label=\"view +%zu\", fontsize=9, constraint=false];\n", i,
                t->view_offs);
    }
}

bool mg_graph_dump_dot(const struct mg_cgraph * g, const char * path) {
#if 0 //@old 04..09 plain-fopen
    FILE * f = fopen(path, "w");
    if (f == NULL) {
        mg_set_error("%s: cannot write: %s", path, strerror(errno));
        return false;
    }
#endif //@old plain-fopen
    //@+ full outfile
    struct mg_outfile out;   // a temporary file, renamed over path when complete (outfile.h)
    FILE * f = mg_outfile_open(&out, path);
    if (f == NULL) return false;
    //@- full outfile
    fprintf(f, "digraph G {\n  newrank=true;\n  rankdir=TB;\n  node [fontname=\"Helvetica\", fontsize=10];\n");
    fprintf(f, "  // %d nodes, %d leafs\n", g->n_nodes, g->n_leafs);
#if 0 //@old 04..09 dot-boxes
    for (int i = 0; i < g->n_leafs; i++) put_leaf(f, g, i);
    for (int i = 0; i < g->n_nodes; i++) put_node(f, g, i);
    for (int i = 0; i < g->n_nodes; i++) put_edges(f, g, i);
#endif //@old dot-boxes
    //@+ full dot-extras
    put_boxes(f, g);
    for (int i = 0; i < g->n_nodes; i++) {
        if (extras == NULL || node_drawn[i]) put_edges(f, g, i);
    }
    //@- full dot-extras
    fprintf(f, "  subgraph cluster_legend {\n    label=\"legend\"; fontsize=10; style=dashed;\n"
               "    legend [shape=plaintext, label=<<table border=\"0\" cellspacing=\"2\">"
               "<tr><td bgcolor=\"#f4cccc\">weight / constant</td></tr>"
               "<tr><td bgcolor=\"#b6d7a8\">input</td></tr>"
               "<tr><td bgcolor=\"#f6b26b\">mul_mat</td></tr>"
               "<tr><td bgcolor=\"#9fc5e8\">element-wise</td></tr>"
               "<tr><td bgcolor=\"#b4a7d6\">row reduction</td></tr>"
               "<tr><td bgcolor=\"#eeeeee\">view (free)</td></tr>"
               "<tr><td bgcolor=\"#ffffff\">data movement</td></tr>"
               //@+ 06 attention-ops
               "<tr><td bgcolor=\"#ffe599\">attention (rope)</td></tr>"
               //@- 06 attention-ops
               "</table>>];\n  }\n");
    //@+ full dot-extras
    put_backend_legend(f);
    //@- full dot-extras
    fprintf(f, "}\n");
#if 0 //@old 04..09 plain-fopen
    const bool ok = fclose(f) == 0;
    if (!ok) mg_set_error("%s: write failed: %s", path, strerror(errno));
    return ok;
#endif //@old plain-fopen
    //@+ full outfile
    return mg_outfile_commit(&out);
    //@- full outfile
}

bool mg_graph_dump_dot_env(const struct mg_cgraph * g, const char * name) {
    const char * dir = mg_demo_switch("MG_DOT");
    if (dir == NULL) return false;
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s.dot", dir, name);
    if (!mg_graph_dump_dot(g, path)) {
        fprintf(stderr, "MG_DOT: %s\n", mg_last_error());
        return false;
    }
    fprintf(stderr, "wrote %s\n", mg_quote(path));
    return true;
}

//@+ full dot-extras
// A split's fill, by backend: the first backend (the device's with -ngl) blue,
// the next green, ... one colour each for MG_SCHED_MAX_BACKENDS.
const char * mg_backend_dot_colour(int backend) {
    static const char * const colours[MG_SCHED_MAX_BACKENDS] = {"#dae8fc", "#d5e8d4", "#fff2cc", "#f8cecc",
                                                                "#e1d5e7", "#d0e0e3", "#fce5cd", "#ead1dc"};
    return colours[(unsigned) backend % MG_SCHED_MAX_BACKENDS];
}

// Split clusters only when there is something to split: a scheduler over one
// backend draws as the plain writer does.
static bool drawn_by_split(void) {
    return extras != NULL && extras->sched != NULL && mg_sched_n_backends(extras->sched) > 1;
}

// The backends' legend: one row per backend in its clusters' colour, and the
// copy's dashed box (ggml_backend_sched_print_assignments names the backends
// the same way, by their names).
static void put_backend_legend(FILE * f) {
    if (!drawn_by_split()) return;
    fprintf(f, "  subgraph cluster_backends {\n    label=\"backends\"; fontsize=10; style=dashed;\n"
               "    backends [shape=plaintext, label=<<table border=\"0\" cellspacing=\"2\">");
    for (int b = 0; b < mg_sched_n_backends(extras->sched); b++) {
        fprintf(f, "<tr><td bgcolor=\"%s\">%d: ", mg_backend_dot_colour(b), b);
        put_html_escaped(f, mg_backend_name(mg_sched_get_backend(extras->sched, b)));
        fprintf(f, "</td></tr>");
    }
    fprintf(f, "<tr><td border=\"1\" style=\"dashed\">copy between backends (bytes)</td></tr>"
               "</table>>];\n  }\n");
}

// The copy of split k's input j: a box in the split that reads it, and the
// edge from the tensor it copies, labelled with the bytes that cross.
static void put_copy(FILE * f, const struct mg_cgraph * g, int k, int j) {
    const struct mg_sched_split * sp   = mg_sched_get_split(extras->sched, k);
    const char *                  into = mg_backend_name(mg_sched_get_backend(extras->sched, sp->backend));
    fprintf(f, "  c%d_%d [shape=record, style=\"dashed,filled\", fillcolor=\"#ffffff\", label=\"{copy to ", k, j);
    put_escaped(f, into);
    fprintf(f, " | ");
    put_escaped(f, sp->copies[j]->name);
    fprintf(f, " | %zu bytes}\"];\n  ", mg_nbytes(sp->inputs[j]));
    put_id(f, g, sp->inputs[j]);
    fprintf(f, " -> c%d_%d [style=bold, label=\"%zu bytes\", fontsize=9];\n", k, j, mg_nbytes(sp->inputs[j]));
}

// A leaf only a copy reads (the token ids a device split reads through its
// copy: the nodes read the copy, not the leaf) is drawn when the split that
// copies it is, or the copy's edge would start at a box of no label.
static bool split_drawn(const struct mg_sched_split * sp) {
    for (int i = sp->i_start; i < sp->i_end; i++) {
        if (node_drawn[i]) return true;
    }
    return false;
}

static void draw_copied_leafs(const struct mg_cgraph * g) {
    for (int k = 0; k < mg_sched_n_splits(extras->sched); k++) {
        const struct mg_sched_split * sp = mg_sched_get_split(extras->sched, k);
        for (int j = 0; j < sp->n_inputs && split_drawn(sp); j++) {
            const int l = index_of_leaf(g, sp->inputs[j]);
            if (l >= 0) leaf_drawn[l] = true;
        }
    }
}

// A graph the scheduler planned: the leafs, then each split as a cluster
// filled with its backend's colour, holding its copies and its drawn nodes
// (ggml_backend_sched_print_assignments says the same in text).
static void put_splits(FILE * f, const struct mg_cgraph * g) {
    for (int i = 0; i < g->n_leafs; i++) {
        if (leaf_drawn[i]) put_leaf(f, g, i);
    }
    for (int k = 0; k < mg_sched_n_splits(extras->sched); k++) {
        const struct mg_sched_split * sp = mg_sched_get_split(extras->sched, k);
        if (!split_drawn(sp)) continue;   // a split of the layers --dot-layers cut
        fprintf(f, "  subgraph cluster_split%d {\n  label=\"split %d: ", k, k);
        put_escaped(f, mg_backend_name(mg_sched_get_backend(extras->sched, sp->backend)));
        fprintf(f, "\"; style=\"rounded,filled\"; fillcolor=\"%s\"; color=\"#999999\";\n", mg_backend_dot_colour(sp->backend));
        for (int j = 0; j < sp->n_inputs; j++) put_copy(f, g, k, j);
        for (int i = sp->i_start; i < sp->i_end; i++) {
            if (node_drawn[i]) put_node(f, g, i);
        }
        fprintf(f, "  }\n");
    }
}

// Boxes: without extras as the chapters draw them; with a scheduler's plan,
// by split; otherwise each layer's boxes inside a cluster of their own, and
// only the drawn ones.
static void put_boxes(FILE * f, const struct mg_cgraph * g) {
    if (extras == NULL) {
        for (int i = 0; i < g->n_leafs; i++) put_leaf(f, g, i);
        for (int i = 0; i < g->n_nodes; i++) put_node(f, g, i);
        return;
    }
    if (drawn_by_split()) {
        put_splits(f, g);
        return;
    }
    int n_layers = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        if (node_layer[i] + 1 > n_layers) n_layers = node_layer[i] + 1;
    }
    for (int layer = -1; layer < n_layers; layer++) {
        bool any = false;
        for (int i = 0; i < g->n_nodes; i++) any = any || (node_drawn[i] && node_layer[i] == layer);
        if (!any) continue;   // a layer cut by max_layers
        if (layer >= 0) fprintf(f, "  subgraph cluster_layer%d {\n  label=\"layer %d\"; style=rounded; color=\"#999999\";\n", layer, layer);
        for (int i = 0; i < g->n_leafs; i++) {
            if (leaf_drawn[i] && leaf_layer[i] == layer) put_leaf(f, g, i);
        }
        for (int i = 0; i < g->n_nodes; i++) {
            if (node_drawn[i] && node_layer[i] == layer) put_node(f, g, i);
        }
        if (layer >= 0) fprintf(f, "  }\n");
    }
}

bool mg_graph_dump_dot_ext(const struct mg_cgraph * g, const char * path, const struct mg_dot_extras * x) {
    node_layer = malloc((size_t) (g->n_nodes + 1) * sizeof(int));
    leaf_layer = malloc((size_t) (g->n_leafs + 1) * sizeof(int));
    node_drawn = malloc((size_t) (g->n_nodes + 1) * sizeof(bool));
    leaf_drawn = malloc((size_t) (g->n_leafs + 1) * sizeof(bool));
    MG_ASSERT(node_layer != NULL && leaf_layer != NULL && node_drawn != NULL && leaf_drawn != NULL);
    assign_layers(g);
    choose_drawn(g, x->max_layers);
    extras = x;
    if (drawn_by_split()) draw_copied_leafs(g);
    const bool ok = mg_graph_dump_dot(g, path);
    extras = NULL;
    free(node_layer);
    free(leaf_layer);
    free(node_drawn);
    free(leaf_drawn);
    return ok;
}

int mg_graph_node_layer(const struct mg_cgraph * g, int i) {
    node_layer = malloc((size_t) (g->n_nodes + 1) * sizeof(int));
    leaf_layer = malloc((size_t) (g->n_leafs + 1) * sizeof(int));
    MG_ASSERT(node_layer != NULL && leaf_layer != NULL);
    assign_layers(g);
    const int layer = node_layer[i];
    free(node_layer);
    free(leaf_layer);
    return layer;
}
//@- full dot-extras
