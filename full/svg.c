//@file 05
// svg.c - the SVG writer (see svg.h).
#include "svg.h"
#include "tensor.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>

static void put_escaped(FILE * f, const char * s) {
    for (; *s; s++) {
        switch (*s) {
            case '<':  fputs("&lt;", f);   break;
            case '>':  fputs("&gt;", f);   break;
            case '&':  fputs("&amp;", f);  break;
            case '"':  fputs("&quot;", f); break;
            default:   fputc(*s, f);       break;
        }
    }
}

bool mg_svg_begin(struct mg_svg * svg, const char * path, double width, double height) {
    svg->path = path;
#if 0 //@old 05..09 plain-fopen
    svg->f    = fopen(path, "w");
    if (svg->f == NULL) {
        mg_set_error("%s: cannot write: %s", path, strerror(errno));
        return false;
    }
#endif //@old plain-fopen
    //@+ full outfile
    svg->f = mg_outfile_open(&svg->out, path);
    if (svg->f == NULL) return false;
    //@- full outfile
    fprintf(svg->f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    fprintf(svg->f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
            "font-family=\"Helvetica, Arial, sans-serif\">\n",
            width, height, width, height);
    fprintf(svg->f, "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"#ffffff\"/>\n", width, height);
    return true;
}

void mg_svg_rect(struct mg_svg * svg, double x, double y, double w, double h, const char * fill, const char * attrs,
                 const char * title) {
    fprintf(svg->f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\" stroke=\"#333333\" "
                    "stroke-width=\"0.5\"%s%s",
            x, y, w, h, fill, attrs ? " " : "", attrs ? attrs : "");
    if (title == NULL) {
        fprintf(svg->f, "/>\n");
        return;
    }
    fprintf(svg->f, "><title>");
    put_escaped(svg->f, title);
    fprintf(svg->f, "</title></rect>\n");
}

void mg_svg_line(struct mg_svg * svg, double x1, double y1, double x2, double y2, const char * stroke, bool dashed,
                 const char * attrs) {
    fprintf(svg->f, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"%s\"%s%s%s/>\n", x1, y1, x2, y2,
            stroke, dashed ? " stroke-dasharray=\"4 3\"" : "", attrs ? " " : "", attrs ? attrs : "");
}

void mg_svg_text(struct mg_svg * svg, double x, double y, double size, const char * anchor, const char * fmt, ...) {
    char buf[512];
    va_list args;
    va_start(args, fmt);
    vsnprintf(buf, sizeof(buf), fmt, args);
    va_end(args);
    fprintf(svg->f, "<text x=\"%.2f\" y=\"%.2f\" font-size=\"%.1f\" text-anchor=\"%s\">", x, y, size, anchor);
    put_escaped(svg->f, buf);
    fprintf(svg->f, "</text>\n");
}

void mg_svg_raw(struct mg_svg * svg, const char * text) {
    fputs(text, svg->f);
}

bool mg_svg_end(struct mg_svg * svg) {
    fprintf(svg->f, "</svg>\n");
#if 0 //@old 05..09 plain-fopen
    const bool ok = !ferror(svg->f);
    if (fclose(svg->f) != 0 || !ok) {
        mg_set_error("%s: write failed: %s", svg->path, strerror(errno));
        return false;
    }
#endif //@old plain-fopen
    //@+ full outfile
    svg->f = NULL;
    return mg_outfile_commit(&svg->out);
    //@- full outfile
#if 0 //@old 05..09 plain-fopen
    svg->f = NULL;
    return true;
#endif //@old plain-fopen
}
