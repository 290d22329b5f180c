//@file 05
// svg.h - a very small SVG writer: rectangles, lines and text, nothing more.
//
//     struct mg_svg svg;
//     if (!mg_svg_begin(&svg, "map.svg", 640, 480)) ...mg_last_error()...
//     mg_svg_rect(&svg, 10, 10, 100, 20, "#9fc5e8", "class=\"tensor\"", "wx: 8 bytes");
//     mg_svg_text(&svg, 12, 24, 10, "start", "wx");
//     mg_svg_end(&svg);   // false if the file could not be written
//
// SVG is text, so a picture needs no library (Graphviz draws graphs; our own
// pictures of memory and time are boxes on two axes). Every browser opens the
// files; tests read them back as XML-ish text. Coordinates are pixels, y down.
#pragma once

#include <stdbool.h>
#include <stdio.h>
//@+ full outfile
#include "outfile.h"
//@- full outfile

struct mg_svg {
    FILE * f;
    const char * path;
    //@+ full outfile
    struct mg_outfile out;   // f is its temporary file, renamed over path by mg_svg_end
    //@- full outfile
};

// Open path and write the header of a width x height picture on white.
bool mg_svg_begin(struct mg_svg * svg, const char * path, double width, double height);

// A filled box with a thin outline. attrs (may be NULL) is written inside the
// tag as is, e.g. class and data- attributes a test reads back; title (may be
// NULL) is the tooltip a browser shows on hover.
void mg_svg_rect(struct mg_svg * svg, double x, double y, double w, double h, const char * fill, const char * attrs,
                 const char * title);

// A line; dashed draws it in 4-pixel dashes. attrs as for mg_svg_rect.
void mg_svg_line(struct mg_svg * svg, double x1, double y1, double x2, double y2, const char * stroke, bool dashed,
                 const char * attrs);

// Text at (x, y), anchor "start", "middle" or "end"; <, > and & are escaped.
void mg_svg_text(struct mg_svg * svg, double x, double y, double size, const char * anchor, const char * fmt, ...)
    __attribute__((format(printf, 6, 7)));

// Text written as is (e.g. <defs> for arrow heads): the caller makes it valid.
void mg_svg_raw(struct mg_svg * svg, const char * text);

// Close the picture and the file.
bool mg_svg_end(struct mg_svg * svg);
