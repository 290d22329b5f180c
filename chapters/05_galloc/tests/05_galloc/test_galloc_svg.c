// test_galloc_svg.c - the memory-map picture (galloc_svg.c), read back.
//
// The picture is parsed as XML-ish text by a checker here (every tag closed,
// in order), and its boxes are held to what they claim: one per tensor the
// plan gave bytes to (counted from the graph, not from the allocator), each
// where mg_gallocr_get_offset says, alive over every step that reads it, and,
// the allocator's real invariant, no two boxes whose steps overlap share a
// byte. The dashed line is the peak the allocator reports. Random graphs
// (random_dag.h) give hundreds of plans; relu(Wx+b) gives the lesson's.
#define _DEFAULT_SOURCE   // mkdtemp
#include "harness.h"
#include "mg.h"
#include "random_dag.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// ---------------------------------------------------------------------------
// An XML-ish checker: tags balance, and the boxes and the peak line are found.
// ---------------------------------------------------------------------------

#define MAX_BOXES 1024

struct box {
    size_t offset, size;
    int    first, end;
    bool   handed_over;   // its bytes went to a result computed over it, at step end
};

struct picture {
    struct box boxes[MAX_BOXES];
    int        n_boxes;
    long long  peak;   // -1: no peak line
};

static long long attr_num(const char * tag, size_t len, const char * name) {
    char key[32];
    snprintf(key, sizeof(key), " %s=\"", name);
    const char * p = strstr(tag, key);
    ck_assert_msg(p != NULL && p < tag + len, "no %s in %.*s", name, (int) len, tag);
    return strtoll(p + strlen(key), NULL, 10);
}

// Parses svg text; fails the test at the first tag that does not balance.
static void parse_picture(const char * text, struct picture * pic) {
    char stack[64][16];
    int depth = 0;
    pic->n_boxes = 0;
    pic->peak    = -1;
    for (const char * p = text; (p = strchr(p, '<')) != NULL;) {
        const char * end = strchr(p, '>');
        ck_assert_msg(end != NULL, "an unclosed '<' at byte %td", p - text);
        const size_t len = (size_t) (end - p + 1);
        ck_assert_msg(memchr(p + 1, '<', len - 1) == NULL, "a '<' inside a tag at byte %td", p - text);
        if (p[1] == '?') {   // the <?xml ...?> declaration
            ck_assert(end[-1] == '?');
        } else if (p[1] == '/') {
            ck_assert_msg(depth > 0, "a closing tag with nothing open at byte %td", p - text);
            depth--;
            ck_assert_msg(strncmp(p + 2, stack[depth], strlen(stack[depth])) == 0, "</%.*s> closes <%s>",
                          (int) len - 3, p + 2, stack[depth]);
        } else {
            char name[16] = {0};
            sscanf(p + 1, "%15[a-z]", name);
            ck_assert_msg(name[0] != '\0', "a tag without a name at byte %td", p - text);
            if (strcmp(name, "rect") == 0 && strstr(p, "class=\"tensor\"") != NULL &&
                strstr(p, "class=\"tensor\"") < end) {
                ck_assert(pic->n_boxes < MAX_BOXES);
                struct box * b = &pic->boxes[pic->n_boxes++];
                b->offset = (size_t) attr_num(p, len, "data-offset");
                b->size   = (size_t) attr_num(p, len, "data-size");
                b->first  = (int) attr_num(p, len, "data-first");
                b->end    = (int) attr_num(p, len, "data-end");
                b->handed_over = attr_num(p, len, "data-handed-over") != 0;
            }
            if (strcmp(name, "line") == 0 && strstr(p, "class=\"peak\"") != NULL && strstr(p, "class=\"peak\"") < end) {
                ck_assert_msg(pic->peak < 0, "two peak lines");
                pic->peak = attr_num(p, len, "data-bytes");
            }
            if (end[-1] != '/') {
                ck_assert(depth < 64);
                strcpy(stack[depth++], name);
            }
        }
        p = end + 1;
    }
    ck_assert_msg(depth == 0, "<%s> is never closed", depth > 0 ? stack[depth - 1] : "");
}

// Writes the plan's picture to a temporary file and parses it back.
static void draw_and_parse(const struct mg_gallocr * ga, const struct mg_cgraph * g, struct picture * pic) {
    char dir[] = "/tmp/mg_test_svg_XXXXXX", path[64];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/map.svg", dir);
    ck_assert(mg_gallocr_dump_svg(ga, g, "test", path));
    size_t size;
    char * text = mg_test_read_file(path, &size);
    ck_assert_ptr_nonnull(text);
    ck_assert(strncmp(text, "<?xml", 5) == 0 && strstr(text, "<svg ") != NULL);
    parse_picture(text, pic);
    free(text);
    unlink(path);
    rmdir(dir);
}

// ---------------------------------------------------------------------------
// What the boxes must say
// ---------------------------------------------------------------------------

static const struct mg_tensor * storage_of(const struct mg_tensor * t) {
    return t->view_src != NULL ? t->view_src : t;
}

// The last step that reads t's bytes (through a view or not); -1 if none does.
static int last_read(const struct mg_cgraph * g, const struct mg_tensor * t) {
    int last = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        for (int j = 0; j < MG_MAX_SRC; j++) {
            if (g->nodes[i]->src[j] != NULL && storage_of(g->nodes[i]->src[j]) == t) last = i;
        }
    }
    return last;
}

// needs[] (from before planning): which leafs and nodes had no bytes and are
// no views, in the order the picture draws them (leafs, then nodes).
static void check_picture(const struct mg_gallocr * ga, const struct mg_cgraph * g, const bool * needs,
                          const struct picture * pic) {
    int n_needed = 0;
    for (int k = 0; k < g->n_leafs + g->n_nodes; k++) n_needed += needs[k];
    ck_assert_int_eq(pic->n_boxes, n_needed);
    ck_assert_int_eq(pic->peak, (long long) mg_gallocr_get_buffer_size(ga));

    int b = 0;
    size_t top = 0;
    for (int k = 0; k < g->n_leafs + g->n_nodes; k++) {
        if (!needs[k]) continue;
        const struct mg_tensor * t = k < g->n_leafs ? g->leafs[k] : g->nodes[k - g->n_leafs];
        const struct box * bx = &pic->boxes[b++];
        size_t offset;
        ck_assert(mg_gallocr_get_offset(ga, g, t, &offset));
        ck_assert_uint_eq(bx->offset, offset);
        ck_assert_uint_ge(bx->size, mg_nbytes(t));
        if (bx->offset + bx->size > top) top = bx->offset + bx->size;
        // Born at its own step (inputs before the first), alive through its last read.
        const int born = k < g->n_leafs ? 0 : k - g->n_leafs;
        ck_assert_msg(bx->first == born, "%s born at %d, drawn from %d", t->name, born, bx->first);
        ck_assert_int_le(bx->end, g->n_nodes);
        // Alive through the step that last reads it; one written over in place
        // ends at that step, where the result that took its bytes begins.
        if (bx->handed_over) {
            ck_assert_msg(bx->end == last_read(g, t), "%s handed over at %d, last read at %d", t->name, bx->end,
                          last_read(g, t));
        } else {
            ck_assert_msg(bx->end > last_read(g, t), "%s is read at step %d but drawn dead from %d", t->name,
                          last_read(g, t), bx->end);
        }
        if (t->flags & (MG_TENSOR_FLAG_OUTPUT | MG_TENSOR_FLAG_INPUT)) ck_assert_int_eq(bx->end, g->n_nodes);
        ck_assert_int_lt(bx->first, bx->end);
    }
    ck_assert_uint_eq(top, mg_gallocr_get_buffer_size(ga));

    // The invariant: overlapping steps, disjoint bytes.
    for (int i = 0; i < pic->n_boxes; i++) {
        for (int j = 0; j < i; j++) {
            const struct box * p = &pic->boxes[i], * q = &pic->boxes[j];
            const bool same_time  = p->first < q->end && q->first < p->end;
            const bool same_bytes = p->offset < q->offset + q->size && q->offset < p->offset + p->size;
            ck_assert_msg(!(same_time && same_bytes), "boxes %d [%zu+%zu, steps %d..%d) and %d [%zu+%zu, steps %d..%d) "
                          "overlap", i, p->offset, p->size, p->first, p->end, j, q->offset, q->size, q->first, q->end);
        }
    }
}

static bool * needs_bytes(const struct mg_cgraph * g) {
    bool * needs = calloc((size_t) (g->n_leafs + g->n_nodes), sizeof(bool));
    ck_assert_ptr_nonnull(needs);
    for (int k = 0; k < g->n_leafs + g->n_nodes; k++) {
        const struct mg_tensor * t = k < g->n_leafs ? g->leafs[k] : g->nodes[k - g->n_leafs];
        needs[k] = t->data == NULL && t->view_src == NULL;
    }
    return needs;
}

// relu(Wx+b) as the lesson plans it, with parent reuse off and on.
START_TEST(test_relu_layer_picture) {
    for (int reuse = 0; reuse < 2; reuse++) {
        struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 1024 * 1024, .no_alloc = true});
        struct mg_context * wctx = mg_init((struct mg_init_params) {.mem_size = 1024 * 1024});
        struct mg_tensor * W = mg_new_tensor_2d(wctx, MG_TYPE_F32, 2, 2);
        struct mg_tensor * x = mg_set_name(mg_new_tensor_1d(ctx, MG_TYPE_F32, 2), "x");
        struct mg_tensor * b = mg_new_tensor_1d(wctx, MG_TYPE_F32, 2);
        x->flags |= MG_TENSOR_FLAG_INPUT;
        struct mg_tensor * out = mg_relu(ctx, mg_add(ctx, mg_mul_mat(ctx, W, x), b));
        out->flags |= MG_TENSOR_FLAG_OUTPUT;
        struct mg_cgraph * g = mg_new_graph(ctx);
        mg_build_forward_expand(g, out);
        bool * needs = needs_bytes(g);
        struct mg_gallocr * ga = mg_gallocr_new(4);
        mg_gallocr_set_reuse_parent(ga, reuse);
        mg_gallocr_reserve(ga, g);
        struct picture pic;
        draw_and_parse(ga, g, &pic);
        check_picture(ga, g, needs, &pic);
        ck_assert_int_eq(pic.n_boxes, 4);   // x, wx, wx+b, out
        // Parent reuse: wx+b and out sit on wx's bytes, each starting where the last ended.
        if (reuse) {
            for (int i = 2; i < 4; i++) {
                ck_assert(pic.boxes[i - 1].handed_over);
                ck_assert_uint_eq(pic.boxes[i].offset, pic.boxes[1].offset);
                ck_assert_int_eq(pic.boxes[i].first, pic.boxes[i - 1].end);
            }
        }
        free(needs);
        mg_gallocr_free(ga);
        mg_free(ctx);
        mg_free(wctx);
    }
}
END_TEST

START_TEST(test_random_graph_pictures) {
    int n_reused_bytes = 0;
    for (uint64_t seed = 1; seed <= 150; seed++) {
        struct rdag d = rdag_new(seed, 4 + (int) (seed % 25));
        bool * needs = needs_bytes(d.g);
        struct mg_gallocr * ga = mg_gallocr_new(0);
        mg_gallocr_set_reuse_parent(ga, seed % 2 == 0);
        mg_gallocr_reserve(ga, d.g);
        struct picture pic;
        draw_and_parse(ga, d.g, &pic);
        check_picture(ga, d.g, needs, &pic);
        // Reuse is visible: a box at an offset an earlier, finished box held.
        for (int i = 0; i < pic.n_boxes; i++) {
            for (int j = 0; j < pic.n_boxes; j++) {
                if (pic.boxes[j].end <= pic.boxes[i].first && pic.boxes[j].offset == pic.boxes[i].offset) {
                    n_reused_bytes++;
                    j = pic.n_boxes;
                }
            }
        }
        free(needs);
        mg_gallocr_free(ga);
        rdag_free(&d);
    }
    ck_assert_int_gt(n_reused_bytes, 100);   // the pictures do show reuse, often
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("galloc_svg");
    MG_TCASE(s, "picture", test_relu_layer_picture, test_random_graph_pictures);
    return s;
}
