//@file full
// memmap.c - the memory model of a run, counted and drawn (see memmap.h).
#define _DEFAULT_SOURCE   // sysconf(_SC_PHYS_PAGES)
#include "memmap.h"
#include "arena.h"
#include "svg.h"

#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

uint64_t mg_memory_limit(const char ** what) {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    uint64_t   limit = pages > 0 && page > 0 ? (uint64_t) pages * (uint64_t) page : UINT64_MAX;
    *what            = "this machine's memory";
    static const struct {
        int          resource;
        const char * what;
    } rl[] = {{RLIMIT_AS, "the process's address-space limit (ulimit -v)"},
              {RLIMIT_DATA, "the process's data limit (ulimit -d)"}};
    for (size_t i = 0; i < sizeof(rl) / sizeof(rl[0]); i++) {
        struct rlimit r;
        if (getrlimit(rl[i].resource, &r) == 0 && r.rlim_cur != RLIM_INFINITY && (uint64_t) r.rlim_cur < limit) {
            limit = (uint64_t) r.rlim_cur, *what = rl[i].what;
        }
    }
    return limit;
}

enum mg_mem_region mg_memory_model_find(const struct mg_memory_model * mm, const void * p) {
    for (int r = 0; r < MG_MEM_N; r++) {
        const char * base = mm->region[r].base;
        if (base != NULL && (const char *) p >= base && (const char *) p < base + mm->region[r].bytes) {
            return (enum mg_mem_region) r;
        }
    }
    return MG_MEM_N;
}

void mg_memory_model_count(struct mg_memory_model * mm, const struct mg_context * ctx, enum mg_mem_region from) {
    for (const struct mg_tensor * t = mg_get_first_tensor(ctx); t != NULL; t = mg_get_next_tensor(ctx, t)) {
        mm->n_tensors[from]++;
        const void * targets[2] = {t->data, t->repacked};   // a repacked weight points to both copies
        for (int i = 0; i < 2; i++) {
            if (targets[i] == NULL) continue;
            const enum mg_mem_region to = mg_memory_model_find(mm, targets[i]);
            if (to != MG_MEM_N) mm->pointers[from][to]++;
        }
    }
}

void mg_memory_model_print(FILE * f, const struct mg_memory_model * mm) {
    fprintf(f, "mg: memory model     = %12s  %10s  what points into it\n", "bytes", "MiB");
    for (int r = 0; r < MG_MEM_N; r++) {
        fprintf(f, "mg:   %-22s %10zu  %10.2f ", mm->region[r].name, mm->region[r].bytes, mg_mib(mm->region[r].bytes));
        bool any = false;
        for (int from = 0; from < MG_MEM_N; from++) {
            if (mm->pointers[from][r] == 0) continue;
            fprintf(f, " %s%d %s", any ? "+ " : "", mm->pointers[from][r], from == MG_MEM_MODEL_HEADERS ? "weights" : "graph tensors");
            any = true;
        }
        if (r == MG_MEM_MODEL_HEADERS || r == MG_MEM_GRAPH_HEADERS) fprintf(f, " (%d tensor headers)", mm->n_tensors[r]);
        if (r == MG_MEM_WORK) fprintf(f, " the plan (work_data)");
        fprintf(f, "\n");
    }
}

// ---------------------------------------------------------------------------
// The picture: headers on the left, bytes on the right, arrows for pointers
// ---------------------------------------------------------------------------

enum { MM_WIDTH = 960, MM_HEIGHT = 520, BOX_H = 64, LEFT_X = 40, LEFT_W = 300, RIGHT_X = 580, RIGHT_W = 340 };

struct box_at {
    double x, y, w;
};

static struct box_at place(enum mg_mem_region r) {
    switch (r) {
        case MG_MEM_MODEL_HEADERS: return (struct box_at) {LEFT_X, 80, LEFT_W};
        case MG_MEM_GRAPH_HEADERS: return (struct box_at) {LEFT_X, 280, LEFT_W};
        case MG_MEM_MAPPED_FILE:   return (struct box_at) {RIGHT_X, 50, RIGHT_W};
        case MG_MEM_REPACKED:      return (struct box_at) {RIGHT_X, 140, RIGHT_W};
        case MG_MEM_COMPUTE:       return (struct box_at) {RIGHT_X, 240, RIGHT_W};
        case MG_MEM_KV:            return (struct box_at) {RIGHT_X, 330, RIGHT_W};
        case MG_MEM_WORK:          return (struct box_at) {RIGHT_X, 420, RIGHT_W};
        case MG_MEM_N:             break;
    }
    return (struct box_at) {0, 0, 0};
}

static const char * region_colour(enum mg_mem_region r) {
    switch (r) {
        case MG_MEM_MODEL_HEADERS:
        case MG_MEM_GRAPH_HEADERS: return "#fce5cd";
        case MG_MEM_MAPPED_FILE:   return "#f4cccc";   // weights: pink, as in the DOT drawing
        case MG_MEM_REPACKED:      return "#ead1dc";
        case MG_MEM_COMPUTE:       return "#9fc5e8";   // results
        case MG_MEM_KV:            return "#ffe599";   // attention
        case MG_MEM_WORK:          return "#d9ead3";
        case MG_MEM_N:             break;
    }
    return "#ffffff";
}

static void draw_region(struct mg_svg * svg, const struct mg_memory_model * mm, enum mg_mem_region r, size_t largest) {
    const struct box_at b = place(r);
    char attrs[192];
    snprintf(attrs, sizeof(attrs), "class=\"region\" data-region=\"%d\" data-bytes=\"%zu\"", (int) r, mm->region[r].bytes);
    mg_svg_rect(svg, b.x, b.y, b.w, BOX_H, region_colour(r), attrs, mm->region[r].name);
    // A bar for the size, in proportion to the largest region.
    const double bar = largest > 0 ? (b.w - 16) * (double) mm->region[r].bytes / (double) largest : 0;
    mg_svg_rect(svg, b.x + 8, b.y + BOX_H - 16, bar > 1 ? bar : 1, 8, "#666666", NULL, NULL);
    mg_svg_text(svg, b.x + 8, b.y + 18, 12, "start", "%s", mm->region[r].name);
    if (mm->region[r].bytes >= 1024 * 1024) {
        mg_svg_text(svg, b.x + 8, b.y + 36, 11, "start", "%zu bytes (%.2f MiB)", mm->region[r].bytes, mg_mib(mm->region[r].bytes));
    } else {
        mg_svg_text(svg, b.x + 8, b.y + 36, 11, "start", "%zu bytes (%.1f KiB)", mm->region[r].bytes,
                    (double) mm->region[r].bytes / 1024.0);
    }
    if (r == MG_MEM_MODEL_HEADERS || r == MG_MEM_GRAPH_HEADERS) {
        mg_svg_text(svg, b.x + b.w - 8, b.y + 36, 11, "end", "%d tensor headers", mm->n_tensors[r]);
    }
}

static void draw_arrow(struct mg_svg * svg, enum mg_mem_region from, enum mg_mem_region to, int n, const char * what) {
    const struct box_at a = place(from), b = place(to);
    const double x1 = a.x + a.w, y1 = a.y + BOX_H / 2, x2 = b.x, y2 = b.y + BOX_H / 2;
    char attrs[192];
    snprintf(attrs, sizeof(attrs), "class=\"pointers\" data-from=\"%d\" data-to=\"%d\" data-count=\"%d\" "
                                   "marker-end=\"url(#arrow)\"", (int) from, (int) to, n);
    mg_svg_line(svg, x1, y1, x2 - 2, y2, "#444444", false, attrs);
    mg_svg_text(svg, 0.6 * x1 + 0.4 * x2, 0.6 * y1 + 0.4 * y2 - 8, 10, "middle", "%d %s", n, what);
}

bool mg_memory_model_dump_svg(const struct mg_memory_model * mm, const char * path) {
    struct mg_svg svg;
    if (!mg_svg_begin(&svg, path, MM_WIDTH, MM_HEIGHT)) return false;
    mg_svg_raw(&svg, "<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"7\" "
                     "markerHeight=\"7\" orient=\"auto\"><path d=\"M0,0 L10,5 L0,10 z\" fill=\"#444444\"/></marker></defs>\n");
    size_t largest = 0, total = 0;
    for (int r = 0; r < MG_MEM_N; r++) {
        if (mm->region[r].bytes > largest) largest = mm->region[r].bytes;
        total += mm->region[r].bytes;
    }
    mg_svg_text(&svg, LEFT_X, 24, 14, "start", "The memory of a run: %.2f MiB in %d regions (bars: size against the largest)",
                mg_mib(total), (int) MG_MEM_N);
    mg_svg_text(&svg, LEFT_X, 60, 11, "start", "tensor headers (struct mg_tensor, in arenas)");
    mg_svg_text(&svg, RIGHT_X, 42, 11, "start", "the bytes their data pointers reach");
    for (int r = 0; r < MG_MEM_N; r++) draw_region(&svg, mm, (enum mg_mem_region) r, largest);
    for (int from = 0; from < MG_MEM_N; from++) {
        for (int to = 0; to < MG_MEM_N; to++) {
            if (mm->pointers[from][to] == 0) continue;
            draw_arrow(&svg, (enum mg_mem_region) from, (enum mg_mem_region) to, mm->pointers[from][to],
                       from == MG_MEM_MODEL_HEADERS ? "weights' data" : "tensors' data");
        }
    }
    // The work buffer is the plan's, not a tensor's.
    mg_svg_rect(&svg, LEFT_X, 420, LEFT_W, BOX_H, "#ffffff", NULL, NULL);
    mg_svg_text(&svg, LEFT_X + 8, 446, 12, "start", "the graph's plan (struct mg_cplan)");
    mg_svg_text(&svg, LEFT_X + 8, 464, 11, "start", "work_data: every node's scratch, one at a time");
    mg_svg_line(&svg, LEFT_X + LEFT_W, 452, RIGHT_X - 2, 452, "#444444", true, "marker-end=\"url(#arrow)\"");
    return mg_svg_end(&svg);
}
