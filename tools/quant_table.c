// quant_table.c - the quantization table of `make quant-table`: reads what
// mg quantize, mg perplexity (plain and --kl-base), mg bench and, where it was
// run, llama-perplexity printed for each type, and writes a markdown table and
// an SVG chart of KL divergence against bits per weight.
//
//     quant_table DIR NOTE TYPE...
//
// For each TYPE it reads, in DIR:
//   TYPE.gguf    the model file (its size)
//   TYPE.quant   mg quantize's output: "... -> B bits per weight)"
//   TYPE.ppl     mg perplexity's: "Final estimate: PPL = x +/- e"
//   TYPE.kld     mg perplexity --kl-base's: "Mean    KLD:", "Same top p:", "Mean ln(PPL(Q)/PPL(base))"
//   TYPE.bench   mg bench's markdown rows "| ppN |" and "| tgN |"
//   TYPE.llama   llama-perplexity's output (optional): its "Final estimate"
// and writes DIR/quant-table.md (NOTE is its first paragraph) and
// DIR/quant-kl.svg. A missing figure is a dash, not an error: the table shows
// what was measured.
//
// The SVG is written by hand: a plot area, a log-scale y axis (KL spans
// several decades), one labelled point per type. No library.
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct row {
    const char * type;
    double       mib, bpw, ppl, ppl_err, llama_ppl, llama_err, kld, kld_err, ln_ratio, same_top, pp, pp_sd, tg, tg_sd;
    char         pp_name[16], tg_name[16];
};

static char * read_text(const char * dir, const char * type, const char * ext) {
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s.%s", dir, type, ext);
    FILE * f = fopen(path, "rb");
    if (f == NULL) return NULL;
    size_t cap = 1 << 16, n = 0;
    char * buf = malloc(cap);
    for (size_t got; (got = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
        n += got;
        if (n + 1 == cap) buf = realloc(buf, cap *= 2);
    }
    fclose(f);
    buf[n] = '\0';
    return buf;
}

// The number after the LAST occurrence of key (mg quantize prints a line per
// tensor; the summary comes last), or NAN.
static double after_last(const char * text, const char * key, double * err_after) {
    if (text == NULL) return NAN;
    const char * hit = NULL;
    for (const char * p = text; (p = strstr(p, key)) != NULL; p++) hit = p;
    if (hit == NULL) return NAN;
    char * end;
    const double v = strtod(hit + strlen(key), &end);
    if (end == hit + strlen(key)) return NAN;
    if (err_after) {   // "x +/- e" or "x ± e"
        const char * pm = strstr(end, "+/-");
        const char * pu = strstr(end, "\xc2\xb1");
        const char * nl = strchr(end, '\n');
        const char * at = pm && (!nl || pm < nl) ? pm + 3 : pu && (!nl || pu < nl) ? pu + 2 : NULL;
        *err_after = at ? strtod(at, NULL) : NAN;
    }
    return v;
}

// From mg bench's table: the t/s of the row whose test starts with prefix ("pp", "tg").
static double bench_tps(const char * text, const char * prefix, char * name, double * sd) {
    if (text == NULL) return NAN;
    for (const char * line = text; *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : line + strlen(line)) {
        // | model | weights | test | t | t/s | ...
        const char * cells[6];
        int          n = 0;
        for (const char * p = line; *p && *p != '\n' && n < 6; p++) {
            if (*p == '|') cells[n++] = p + 1;
        }
        if (n < 6) continue;
        const char * test = cells[2];
        while (*test == ' ') test++;
        if (strncmp(test, prefix, strlen(prefix)) != 0 || test[strlen(prefix)] < '0' || test[strlen(prefix)] > '9') {
            continue;
        }
        sscanf(test, "%15s", name);
        char * end;
        const double v = strtod(cells[4], &end);
        const char * pm = strstr(end, "\xc2\xb1");   // "1234.5 ± 67.8"
        *sd = pm && pm < cells[5] ? strtod(pm + 2, NULL) : NAN;
        return v;
    }
    return NAN;
}

static void read_row(const char * dir, struct row * r) {
    char        path[4096];
    struct stat st;
    snprintf(path, sizeof(path), "%s/%s.gguf", dir, r->type);
    r->mib = stat(path, &st) == 0 ? (double) st.st_size / (1024.0 * 1024.0) : NAN;
    char * q = read_text(dir, r->type, "quant");
    r->bpw = after_last(q, "-> ", NULL);   // "(16.01 -> 4.89 bits per weight)": the last arrow of the file
    free(q);
    char * p = read_text(dir, r->type, "ppl");
    r->ppl = after_last(p, "Final estimate: PPL = ", &r->ppl_err);
    free(p);
    char * l = read_text(dir, r->type, "llama");
    r->llama_ppl = after_last(l, "Final estimate: PPL = ", &r->llama_err);
    free(l);
    char * k = read_text(dir, r->type, "kld");
    r->kld      = after_last(k, "Mean    KLD:", &r->kld_err);
    r->same_top = after_last(k, "Same top p:", NULL);
    r->ln_ratio = after_last(k, "Mean ln(PPL(Q)/PPL(base))     :", NULL);
    free(k);
    char * b = read_text(dir, r->type, "bench");
    strcpy(r->pp_name, "pp");
    strcpy(r->tg_name, "tg");
    r->pp = bench_tps(b, "pp", r->pp_name, &r->pp_sd);
    r->tg = bench_tps(b, "tg", r->tg_name, &r->tg_sd);
    free(b);
}

// A figure with fmt, or a dash when it was not measured.
static void cell(FILE * f, const char * fmt, double v) {
    fputs(" | ", f);
    if (isnan(v)) fputs("—", f);
    else fprintf(f, fmt, v);
}

static void write_table(FILE * f, const char * note, const struct row * rows, int n) {
    fprintf(f, "%s\n\n", note);
    fprintf(f, "| type | file MiB | bits/weight | PPL (mg) | PPL (llama.cpp) | ln(PPL/PPL F16) | mean KL from F16 "
               "| same top-1 | %s t/s | %s t/s |\n", rows[0].pp_name, rows[0].tg_name);
    fprintf(f, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int i = 0; i < n; i++) {
        const struct row * r = &rows[i];
        fprintf(f, "| %s", r->type);
        cell(f, "%.2f", r->mib);
        cell(f, "%.2f", r->bpw);
        if (isnan(r->ppl)) cell(f, "%f", NAN);
        else fprintf(f, " | %.4f ± %.4f", r->ppl, r->ppl_err);
        if (isnan(r->llama_ppl)) cell(f, "%f", NAN);
        else fprintf(f, " | %.4f ± %.4f", r->llama_ppl, r->llama_err);
        cell(f, "%+.5f", r->ln_ratio);
        if (isnan(r->kld)) cell(f, "%f", NAN);
        else fprintf(f, " | %.6f ± %.6f", r->kld, r->kld_err);
        cell(f, "%.2f %%", r->same_top);
        if (isnan(r->pp)) cell(f, "%f", NAN);
        else fprintf(f, " | %.0f ± %.0f", r->pp, r->pp_sd);
        if (isnan(r->tg)) cell(f, "%f", NAN);
        else fprintf(f, " | %.0f ± %.0f", r->tg, r->tg_sd);
        fprintf(f, " |\n");
    }
}

// ---------------------------------------------------------------------------
// The chart
// ---------------------------------------------------------------------------

enum { W = 760, H = 470, LEFT = 80, RIGHT = 730, TOP = 50, BOTTOM = 390 };

struct box {
    double x0, y0, x1, y1;
};

static bool overlaps(struct box a, struct box b) {
    return a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1;
}

// A point's colour by family: K-quants, the legacy 32-block types, IQ4_NL, floats.
static const char * colour(const char * type) {
    if (strstr(type, "_K")) return "#1f77b4";
    if (type[0] == 'Q') return "#ff7f0e";
    if (type[0] == 'I') return "#2ca02c";
    return "#7f7f7f";
}

// Is this point on the chart? A KL that does not stand out of its own noise
// (the base itself, F32 from F16) has no place on a log scale.
// And the 16-bit types sit so far right that they would squeeze all the
// others into a corner: they are named under the chart instead.
static bool plotted(const struct row * r) {
    return !isnan(r->bpw) && r->bpw < 12 && !isnan(r->kld) && r->kld > 0 && r->kld > 2 * r->kld_err;
}

static void write_svg(FILE * f, const char * title, const struct row * rows, int n) {
    double x_min = INFINITY, x_max = 0, lo = INFINITY, hi = -INFINITY;
    for (int i = 0; i < n; i++) {
        if (!plotted(&rows[i])) continue;
        x_min = fmin(x_min, rows[i].bpw);
        x_max = fmax(x_max, rows[i].bpw);
        lo    = fmin(lo, log10(rows[i].kld));
        hi    = fmax(hi, log10(rows[i].kld));
    }
    if (lo > hi) lo = -6, hi = -1;
    // the axis spans the types plotted, with a little room, not 0..x_max
    x_min = x_min <= x_max ? floor(x_min - 0.25) : 0;
    x_max = ceil(x_max + 0.5);
    if (x_min < 0) x_min = 0;
    const double x_step = x_max - x_min > 8 ? 2 : 1;
    const double y_lo = floor(lo), y_hi = ceil(hi) > floor(lo) ? ceil(hi) : floor(lo) + 1;
#define PX(b) (LEFT + ((b) - x_min) / (x_max - x_min) * (RIGHT - LEFT))
#define PY(k) (BOTTOM - (log10(k) - y_lo) / (y_hi - y_lo) * (BOTTOM - TOP))
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "font-family=\"sans-serif\" font-size=\"12\">\n", W, H, W, H);
    fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", W, H);
    fprintf(f, "<text x=\"%d\" y=\"28\" font-size=\"15\" font-weight=\"bold\">%s</text>\n", LEFT, title);
    // grid and ticks: a line per decade of KL, a tick every bit (or 2)
    for (double d = y_lo; d <= y_hi + 1e-9; d++) {
        const double y = PY(pow(10, d));
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", LEFT, y, RIGHT, y);
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">1e%d</text>\n", LEFT - 6, y + 4, (int) d);
    }
    for (double b = x_min; b <= x_max + 1e-9; b += x_step) {
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#ddd\"/>\n", PX(b), TOP, PX(b), BOTTOM);
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g</text>\n", PX(b), BOTTOM + 16, b);
    }
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#333\"/>\n", LEFT, TOP,
            RIGHT - LEFT, BOTTOM - TOP);
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">bits per weight</text>\n", (LEFT + RIGHT) / 2,
            BOTTOM + 36);
    fprintf(f, "<text transform=\"translate(22 %d) rotate(-90)\" text-anchor=\"middle\">mean KL divergence from F16 "
               "(log scale)</text>\n", (TOP + BOTTOM) / 2);
    // points first, then labels placed where they collide with nothing placed so far
    struct box placed[64];
    int        n_placed = 0;
    for (int i = 0; i < n; i++) {
        if (!plotted(&rows[i])) continue;
        const double x = PX(rows[i].bpw), y = PY(rows[i].kld);
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4.5\" fill=\"%s\"/>\n", x, y, colour(rows[i].type));
        if (n_placed < 64) placed[n_placed++] = (struct box) {x - 5, y - 5, x + 5, y + 5};
    }
    static const char * legend[][2] = {{"#1f77b4", "K-quants"}, {"#ff7f0e", "32-weight blocks"}, {"#2ca02c", "IQ4_NL"}};
    for (int i = 0; i < 3; i++) {
        const int lx = RIGHT - 130, ly = TOP + 16 + 16 * i;
        fprintf(f, "<circle cx=\"%d\" cy=\"%d\" r=\"4.5\" fill=\"%s\"/><text x=\"%d\" y=\"%d\">%s</text>\n", lx,
                ly - 4, legend[i][0], lx + 9, ly, legend[i][1]);
    }
    if (n_placed < 64) placed[n_placed++] = (struct box) {RIGHT - 140, TOP, RIGHT, TOP + 58};
    for (int i = 0; i < n; i++) {
        if (!plotted(&rows[i])) continue;
        // Try spots around the point, nearest first (right, left, above, below,
        // then the corners), further out each round; a label away from its
        // point gets a thin line to it.
        const double x = PX(rows[i].bpw), y = PY(rows[i].kld), w = 7.2 * (double) strlen(rows[i].type), h = 12;
        double lx = x + 7, ly = y + 4;
        bool   found = false;
        int    round = 0;
        for (; round < 6 && !found; round++) {
            const double d = 16.0 * round;
            const double cand[][2] = {{x + 7 + d, y + 4},     {x - 7 - w - d, y + 4}, {x - w / 2, y - 8 - d},
                                      {x - w / 2, y + 17 + d}, {x + 7 + d, y - 9 - d}, {x + 7 + d, y + 17 + d},
                                      {x - 7 - w - d, y - 9 - d}, {x - 7 - w - d, y + 17 + d}};
            for (int c = 0; c < 8 && !found; c++) {
                const struct box bx = {cand[c][0], cand[c][1] - h + 2, cand[c][0] + w, cand[c][1] + 2};
                bool free_spot = bx.x0 > LEFT && bx.x1 < RIGHT && bx.y0 > TOP && bx.y1 < BOTTOM;
                for (int j = 0; free_spot && j < n_placed; j++) free_spot = !overlaps(bx, placed[j]);
                if (free_spot) {
                    lx = cand[c][0], ly = cand[c][1];
                    found = true;
                }
            }
        }
        const struct box bx = {lx, ly - h + 2, lx + w, ly + 2};
        if (n_placed < 64) placed[n_placed++] = bx;
        if (found && round > 1) {   // from the point to the nearest point of the label's box
            const double ex = fmax(bx.x0, fmin(x, bx.x1)), ey = fmax(bx.y0, fmin(y, bx.y1));
            fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#999\" stroke-width=\"0.8\"/>\n",
                    x, y, ex, ey);
        }
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", lx, ly, rows[i].type);
    }
    // the types that are not on the chart, and the colours
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"11\" fill=\"#555\">not shown:", LEFT, BOTTOM + 58);
    const char * sep = " ";
    for (int i = 0; i < n; i++) {   // first the ones off the right edge, with their figures
        const struct row * r = &rows[i];
        if (plotted(r) || isnan(r->kld) || !(r->kld > 2 * r->kld_err)) continue;
        fprintf(f, "%s%s (%.2f bits, KL %.1e)", sep, r->type, r->bpw, r->kld);
        sep = ", ";
    }
    int n_noise = 0;
    for (int i = 0; i < n; i++) {   // then the ones whose KL is noise
        const struct row * r = &rows[i];
        if (plotted(r) || (!isnan(r->kld) && r->kld > 2 * r->kld_err)) continue;
        fprintf(f, "%s%s", n_noise++ ? ", " : sep[0] == ',' ? "; " : " ", r->type);
    }
    if (n_noise) fprintf(f, " (KL within the noise of the 16-bit saved base)");
    fprintf(f, "</text>\n");
    fprintf(f, "</svg>\n");
#undef PX
#undef PY
}

int main(int argc, char ** argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: quant_table DIR NOTE TYPE...\n");
        return 1;
    }
    const char * dir = argv[1], * note = argv[2];
    const int    n   = argc - 3;
    struct row * rows = calloc((size_t) n, sizeof(struct row));
    for (int i = 0; i < n; i++) {
        rows[i].type = argv[3 + i];
        read_row(dir, &rows[i]);
        if (isnan(rows[i].ppl)) fprintf(stderr, "quant_table: warning: no PPL for %s in %s\n", rows[i].type, dir);
    }
    char path[4096];
    snprintf(path, sizeof(path), "%s/quant-table.md", dir);
    FILE * md = fopen(path, "w");
    snprintf(path, sizeof(path), "%s/quant-kl.svg", dir);
    FILE * svg = fopen(path, "w");
    if (md == NULL || svg == NULL) {
        fprintf(stderr, "quant_table: cannot write into %s\n", dir);
        return 1;
    }
    write_table(md, note, rows, n);
    write_svg(svg, "What each quantization of fortune-toy costs: KL divergence from F16", rows, n);
    if (fclose(md) != 0 || fclose(svg) != 0) {
        fprintf(stderr, "quant_table: cannot write into %s\n", dir);
        return 1;
    }
    printf("wrote %s/quant-table.md and %s/quant-kl.svg (%d types)\n", dir, dir, n);
    free(rows);
    return 0;
}
