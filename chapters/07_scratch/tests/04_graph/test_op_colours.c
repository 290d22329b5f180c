// test_op_colours.c - every op has a DOT colour, and a drawing names each
// node's op by the op tables' name and symbol.
//
// dot.c's colour switch has no default, so -Wswitch names an op without a
// colour at compile time; this checks what the compiler cannot: that the
// colour is a real one, and that the symbol table is what the drawing shows.
#define _DEFAULT_SOURCE   // mkdtemp
#include "harness.h"
#include "mg.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static bool is_hex_colour(const char * c) {
    if (c == NULL || strlen(c) != 7 || c[0] != '#') return false;
    for (int i = 1; i < 7; i++) {
        if (!isxdigit((unsigned char) c[i])) return false;
    }
    return true;
}

START_TEST(test_every_op_has_a_colour) {
    for (int op = 0; op < MG_OP_COUNT; op++) {
        const char * c = mg_op_dot_colour((enum mg_op) op);
        ck_assert_msg(is_hex_colour(c), "op %s has no DOT colour (dot.c: mg_op_dot_colour)", mg_op_name((enum mg_op) op));
    }
    ck_assert_ptr_null(mg_op_dot_colour(MG_OP_COUNT));
    // The families the legend names are told apart.
    ck_assert_str_ne(mg_op_dot_colour(MG_OP_MUL_MAT), mg_op_dot_colour(MG_OP_ADD));
    ck_assert_str_ne(mg_op_dot_colour(MG_OP_ADD), mg_op_dot_colour(MG_OP_SOFT_MAX));
    ck_assert_str_ne(mg_op_dot_colour(MG_OP_VIEW), mg_op_dot_colour(MG_OP_ADD));
}
END_TEST

// Each computed node's box starts with "#i NAME symbol" and is filled with its op's colour.
START_TEST(test_drawing_shows_name_symbol_and_colour) {
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 1024 * 1024});
    struct mg_tensor * W = mg_set_name(mg_new_tensor_2d(ctx, MG_TYPE_F32, 3, 3), "W");
    struct mg_tensor * x = mg_set_name(mg_new_tensor_2d(ctx, MG_TYPE_F32, 3, 3), "x");
    struct mg_tensor * h = mg_add(ctx, mg_mul_mat(ctx, W, x), mg_sqr(ctx, mg_transpose(ctx, mg_cont(ctx, x))));
    struct mg_tensor * out = mg_soft_max(ctx, mg_relu(ctx, mg_scale(ctx, h, 0.5f)));
    struct mg_cgraph * g = mg_new_graph(ctx);
    mg_build_forward_expand(g, mg_sum_rows(ctx, mg_cpy(ctx, out, mg_new_tensor_2d(ctx, MG_TYPE_F32, 3, 3))));

    char dir[] = "/tmp/mg_test_colours_XXXXXX", path[64];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/g.dot", dir);
    ck_assert(mg_graph_dump_dot(g, path));
    size_t size;
    char * text = mg_test_read_file(path, &size);
    ck_assert_ptr_nonnull(text);
    for (int i = 0; i < g->n_nodes; i++) {
        const enum mg_op op = g->nodes[i]->op;
        char want[256], sym[128];
        size_t n = 0;   // the symbol as the record label escapes it
        for (const char * c = mg_op_symbol(op); *c && n + 2 < sizeof(sym); c++) {
            if (strchr("{}|<>\"\\", *c)) sym[n++] = '\\';
            sym[n++] = *c;
        }
        sym[n] = '\0';
        snprintf(want, sizeof(want), "  n%d [shape=record, style=filled, fillcolor=\"%s\"", i, mg_op_dot_colour(op));
        ck_assert_msg(strstr(text, want) != NULL, "no '%s'", want);
        snprintf(want, sizeof(want), "label=\"{#%d %s %s | ", i, mg_op_name(op), sym);
        ck_assert_msg(strstr(text, want) != NULL, "no '%s'", want);
    }
    ck_assert_int_ge(g->n_nodes, 9);
    free(text);
    unlink(path);
    rmdir(dir);
    mg_free(ctx);
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("op_colours");
    MG_TCASE(s, "dot", test_every_op_has_a_colour, test_drawing_shows_name_symbol_and_colour);
    return s;
}
