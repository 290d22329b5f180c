// Generated from full/galloc_svg.c by tools/chapgen. In a class, edit this copy freely (make chapters will not overwrite your edits); to change the engine, edit full/galloc_svg.c and run make chapters.
// galloc_svg.c - the compute buffer's plan as a picture: a memory map over time.
//
// Time runs right (one column per node step), the buffer's offset runs up,
// and every planned tensor is a box: the bytes it holds, from the step that
// makes it to the step after its last reader. A box that starts where an
// earlier one ended, at the same height, is reuse; the dashed line on top is
// the peak, the buffer's size. Where two boxes share a column they never
// share a row: that is what the allocator guarantees, and what the test of
// this picture checks (tests/05_galloc/test_galloc_svg.c). Boxes are coloured
// like the op's box in the DOT drawing (dot.c), and hovering one in a browser
// shows its name, op, bytes and steps. ggml has no such picture; its
// allocator's debug output (ggml-alloc.c, AT_PRINTF) is the text version.
#define _POSIX_C_SOURCE 200809L
#include "galloc.h"
#include "svg.h"
#include "trace.h"   // mg_demo_switch

#include <stdlib.h>
#include <string.h>

enum { MAP_WIDTH = 960, MAP_LEFT = 80, MAP_RIGHT = 20, MAP_TOP = 50, MAP_HEIGHT = 360, MAP_BOTTOM = 50 };

static const char * box_colour(const struct mg_tensor * t) {
    if (t->flags & MG_TENSOR_FLAG_INPUT) return "#b6d7a8";   // as in the DOT drawing: inputs green,
    if (t->op == MG_OP_NONE) return "#f4cccc";               // other leafs pink,
    return mg_op_dot_colour(t->op);                          // results by their op's family
}

// The offset axis: 0 at the bottom, the peak at the top, a tick every quarter.
static void draw_axes(struct mg_svg * svg, size_t peak, int n_steps, double col) {
    const double bottom = MAP_TOP + MAP_HEIGHT;
    mg_svg_line(svg, MAP_LEFT, MAP_TOP, MAP_LEFT, bottom, "#000000", false, NULL);
    mg_svg_line(svg, MAP_LEFT, bottom, MAP_LEFT + col * n_steps, bottom, "#000000", false, NULL);
    for (int q = 0; q <= 4; q++) {
        const double y = bottom - MAP_HEIGHT * q / 4.0;
        mg_svg_line(svg, MAP_LEFT - 4, y, MAP_LEFT, y, "#000000", false, NULL);
        mg_svg_text(svg, MAP_LEFT - 6, y + 3, 10, "end", "%zu", peak * (size_t) q / 4);
    }
    const int every = n_steps <= 20 ? 1 : (n_steps + 19) / 20;
    for (int s = 0; s < n_steps; s += every) {
        mg_svg_text(svg, MAP_LEFT + col * (s + 0.5), bottom + 14, 9, "middle", "%d", s);
    }
    mg_svg_text(svg, MAP_LEFT + col * n_steps / 2, bottom + 32, 11, "middle", "node step (time)");
    mg_svg_text(svg, 14, MAP_TOP - 8, 11, "start", "offset (bytes)");
}

static void draw_box(struct mg_svg * svg, const struct mg_gallocr_lifetime * l, double col, double scale) {
    const struct mg_tensor * t = l->tensor;
    const double x = MAP_LEFT + col * l->first, w = col * (l->end - l->first);
    const double h = scale * (double) l->size, y = MAP_TOP + MAP_HEIGHT - scale * (double) (l->offset + l->size);
    char attrs[192], title[256];
    snprintf(attrs, sizeof(attrs), "class=\"tensor\" data-offset=\"%zu\" data-size=\"%zu\" data-first=\"%d\" "
                                   "data-end=\"%d\" data-handed-over=\"%d\"", l->offset, l->size, l->first, l->end,
             l->handed_over);
    snprintf(title, sizeof(title), "%s (%s): %zu bytes at %zu, steps %d..%d%s", t->name, mg_op_name(t->op), l->size,
             l->offset, l->first, l->end - 1, l->handed_over ? ", then written over in place" : "");
    mg_svg_rect(svg, x, y, w, h, box_colour(t), attrs, title);
    const double text_w = 5.5 * (double) strlen(t->name);   // about 5.5 pixels a character at size 9
    if (text_w + 4 <= w && h >= 11) mg_svg_text(svg, x + w / 2, y + h / 2 + 3, 9, "middle", "%s", t->name);
}

bool mg_gallocr_dump_svg(const struct mg_gallocr * ga, const struct mg_cgraph * g, const char * title, const char * path) {
    const int n = mg_gallocr_lifetimes(ga, g, NULL, 0);
    struct mg_gallocr_lifetime * lt = malloc((size_t) (n > 0 ? n : 1) * sizeof(*lt));
    MG_ASSERT(lt != NULL);
    mg_gallocr_lifetimes(ga, g, lt, n);

    const size_t peak    = mg_gallocr_get_buffer_size(ga);
    const int    n_steps = g->n_nodes > 0 ? g->n_nodes : 1;
    const double col     = (double) (MAP_WIDTH - MAP_LEFT - MAP_RIGHT) / n_steps;
    const double scale   = peak > 0 ? MAP_HEIGHT / (double) peak : 0.0;
    struct mg_svg svg;
    if (!mg_svg_begin(&svg, path, MAP_WIDTH, MAP_TOP + MAP_HEIGHT + MAP_BOTTOM)) {
        free(lt);
        return false;
    }
    mg_svg_text(&svg, MAP_LEFT, 18, 13, "start", "%s: %d tensors planned in a %zu-byte buffer (their sum: %zu bytes)",
                title, n, peak, mg_gallocr_get_sum_size(ga));
    draw_axes(&svg, peak, n_steps, col);
    for (int i = 0; i < n; i++) draw_box(&svg, &lt[i], col, scale);

    char attrs[64];
    snprintf(attrs, sizeof(attrs), "class=\"peak\" data-bytes=\"%zu\"", peak);
    mg_svg_line(&svg, MAP_LEFT, MAP_TOP, MAP_LEFT + col * n_steps, MAP_TOP, "#cc0000", true, attrs);
    mg_svg_text(&svg, MAP_LEFT + col * n_steps, MAP_TOP - 4, 11, "end", "peak %zu bytes", peak);
    free(lt);
    return mg_svg_end(&svg);
}

bool mg_gallocr_dump_svg_env(const struct mg_gallocr * ga, const struct mg_cgraph * g, const char * name) {
    const char * dir = mg_demo_switch("MG_SVG");
    if (dir == NULL) return false;
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s.svg", dir, name);
    if (!mg_gallocr_dump_svg(ga, g, name, path)) {
        fprintf(stderr, "MG_SVG: %s\n", mg_last_error());
        return false;
    }
    fprintf(stderr, "wrote %s\n", mg_quote(path));
    return true;
}
