// Generated from full/dot.c by tools/chapgen. In a class, edit this copy freely (make chapters will not overwrite your edits); to change the engine, edit full/dot.c and run make chapters.
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
        case MG_OP_ROPE:      return "#ffe599";   // attention's own ops
        case MG_OP_COUNT:     break;
    }
    return NULL;   // MG_OP_COUNT, or a value outside the enum
}

static void put_shape(FILE * f, const struct mg_tensor * t) {
    char shape[MG_SHAPE_STR_MAX];
    fprintf(f, "%s %s %zu B", mg_type_name(t->type), mg_shape_str(t->ne, MG_MAX_DIMS, ",", shape, sizeof(shape)),
            mg_nbytes(t));
}

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
    fprintf(f, "outside");   // a view_src the graph does not hold (cannot happen for built graphs)
}

static void put_leaf(FILE * f, const struct mg_cgraph * g, int i) {
    const struct mg_tensor * t = g->leafs[i];
    const char * colour = "#f4cccc";   // weights and constants: pink, like ggml's
    if (t->flags & MG_TENSOR_FLAG_INPUT) colour = "#b6d7a8";   // inputs set before every run: green
    fprintf(f, "  l%d [shape=record, style=\"rounded,filled\", fillcolor=\"%s\", label=\"{", i, colour);
    put_escaped(f, t->name);
    fprintf(f, " | ");
    put_shape(f, t);
    fprintf(f, "}\"];\n");
}

static void put_node(FILE * f, const struct mg_cgraph * g, int i) {
    const struct mg_tensor * t = g->nodes[i];
    fprintf(f, "  n%d [shape=record, style=filled, fillcolor=\"%s\"", i, mg_op_dot_colour(t->op));
    if (t->flags & MG_TENSOR_FLAG_OUTPUT) fprintf(f, ", penwidth=3");
    fprintf(f, ", label=\"{#%d %s ", i, mg_op_name(t->op));
    put_escaped(f, mg_op_symbol(t->op));   // "ADD x+y": the op table's symbol says what it computes
    fprintf(f, " | ");
    put_escaped(f, t->name);
    fprintf(f, " | ");
    put_shape(f, t);
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
    FILE * f = fopen(path, "w");
    if (f == NULL) {
        mg_set_error("%s: cannot write: %s", path, strerror(errno));
        return false;
    }
    fprintf(f, "digraph G {\n  newrank=true;\n  rankdir=TB;\n  node [fontname=\"Helvetica\", fontsize=10];\n");
    fprintf(f, "  // %d nodes, %d leafs\n", g->n_nodes, g->n_leafs);
    for (int i = 0; i < g->n_leafs; i++) put_leaf(f, g, i);
    for (int i = 0; i < g->n_nodes; i++) put_node(f, g, i);
    for (int i = 0; i < g->n_nodes; i++) put_edges(f, g, i);
    fprintf(f, "  subgraph cluster_legend {\n    label=\"legend\"; fontsize=10; style=dashed;\n"
               "    legend [shape=plaintext, label=<<table border=\"0\" cellspacing=\"2\">"
               "<tr><td bgcolor=\"#f4cccc\">weight / constant</td></tr>"
               "<tr><td bgcolor=\"#b6d7a8\">input</td></tr>"
               "<tr><td bgcolor=\"#f6b26b\">mul_mat</td></tr>"
               "<tr><td bgcolor=\"#9fc5e8\">element-wise</td></tr>"
               "<tr><td bgcolor=\"#b4a7d6\">row reduction</td></tr>"
               "<tr><td bgcolor=\"#eeeeee\">view (free)</td></tr>"
               "<tr><td bgcolor=\"#ffffff\">data movement</td></tr>"
               "<tr><td bgcolor=\"#ffe599\">attention (rope)</td></tr>"
               "</table>>];\n  }\n");
    fprintf(f, "}\n");
    const bool ok = fclose(f) == 0;
    if (!ok) mg_set_error("%s: write failed: %s", path, strerror(errno));
    return ok;
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
