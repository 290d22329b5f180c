// Generated from full/galloc.h by tools/chapgen. In a class, edit this copy freely (make chapters will not overwrite your edits); to change the engine, edit full/galloc.h and run make chapters.
// galloc.h - the graph allocator: one compute buffer, planned before running.
//
//     struct mg_gallocr * ga = mg_gallocr_new(0);   // 0: the CPU default alignment
//     mg_gallocr_alloc_graph(ga, g);                // plan offsets, size one buffer, place data
//     ... compute g as often as you like ...
//     mg_gallocr_free(ga);
//
// Chapter 04 gave every intermediate result its own bytes, so memory grew
// with the graph. But most results die young: W*x is read once, by W*x+b,
// and after that its bytes are free. Walking the graph in execution order, we
// can tell when each result is born (its node) and when it dies (when the
// last node that reads it has run), and hand dead results' bytes to new ones.
// The buffer then only needs the peak of what is alive at once
// (ggml-alloc.c: ggml_gallocr_alloc_graph, ggml_dyn_tallocr).
//
// For relu(W*x + b) with 2-float results (alignment 4, parent reuse off):
//     [alloc] alloc wx           8 bytes at      0   free: [8, inf)
//     [alloc] alloc wx+b         8 bytes at      8   free: [16, inf)
//     [alloc] free  wx           8 bytes at      0   free: [0, 8) [16, inf)
//     [alloc] alloc out          8 bytes at      0   free: [16, inf)
//     [alloc] free  wx+b         8 bytes at      8   free: [8, inf)
//     [alloc] peak 16 bytes for 3 results of 24 bytes
#pragma once

#include "graph.h"

#define MG_GALLOC_DEFAULT_ALIGN 16   // bytes: enough for SSE loads (ggml's CPU buffer alignment is larger)
#define MG_GALLOC_MAX_FREE_BLOCKS 256

// ---------------------------------------------------------------------------
// The allocator inside: free blocks of one growing address range.
// ---------------------------------------------------------------------------

struct mg_free_block {
    size_t offset;
    size_t size;
};

// Free blocks sorted by offset. The last block is the tail of the buffer and
// reaches to "infinity": taking from it is how the buffer grows.
struct mg_dyn_alloc {
    size_t               alignment;
    int                  n_free_blocks;
    struct mg_free_block free_blocks[MG_GALLOC_MAX_FREE_BLOCKS];
    size_t               max_size;    // the peak: the highest byte ever handed out
};

void   mg_dyn_alloc_reset(struct mg_dyn_alloc * a, size_t alignment);
size_t mg_dyn_alloc_alloc(struct mg_dyn_alloc * a, size_t size);   // returns the offset
void   mg_dyn_alloc_free (struct mg_dyn_alloc * a, size_t offset, size_t size);
// "[0, 8) [16, inf)" into buf.
const char * mg_dyn_alloc_describe(const struct mg_dyn_alloc * a, char * buf, size_t size);

// ---------------------------------------------------------------------------
// The graph allocator
// ---------------------------------------------------------------------------

struct mg_gallocr;

struct mg_gallocr * mg_gallocr_new(size_t alignment);   // 0 = MG_GALLOC_DEFAULT_ALIGN
void                mg_gallocr_free(struct mg_gallocr * ga);

// ggml reuses a dying input's bytes for the result of an element-wise op
// (W*x+b can be written over W*x). On by default; off shows the plain
// allocator, as in the trace above.
void mg_gallocr_set_reuse_parent(struct mg_gallocr * ga, bool reuse);

// The rule behind parent reuse: may op's result be written over its first
// input (ggml_op_can_inplace)? Every op has an answer (tests/05_galloc/test_op_inplace.c).
bool mg_op_can_inplace(enum mg_op op);

// Plan: walk g in order and give every result that needs bytes an offset.
// Returns the buffer size the plan needs (its peak).
size_t mg_gallocr_reserve(struct mg_gallocr * ga, struct mg_cgraph * g);

// Plan g if it is not the graph planned last time, grow the buffer if the
// plan needs more, and point every planned tensor at its bytes. False, with
// mg_last_error(), if the buffer cannot be allocated.
bool mg_gallocr_alloc_graph(struct mg_gallocr * ga, struct mg_cgraph * g);

// Point the tensors of the last plan into memory the caller provides (at
// least mg_gallocr_get_buffer_size bytes, aligned).
void mg_gallocr_place(struct mg_gallocr * ga, struct mg_cgraph * g, void * base);

size_t mg_gallocr_get_buffer_size(const struct mg_gallocr * ga);   // the last plan's peak
size_t mg_gallocr_get_sum_size   (const struct mg_gallocr * ga);   // what chapter 04 would have used
int    mg_gallocr_n_reserves     (const struct mg_gallocr * ga);   // how many times it planned

// The offset the last plan gave t in the buffer; false if it gave t none
// (a leaf with its own data, or a view).
bool mg_gallocr_get_offset(const struct mg_gallocr * ga, const struct mg_cgraph * g, const struct mg_tensor * t,
                           size_t * offset);

// One planned tensor's bytes and lifetime: it holds [offset, offset+size) of
// the buffer from node step first to step end (exclusive). It is born at the
// node that computes it (inputs at step 0) and dies after its last reader,
// node end-1; outputs and inputs live to the end (end = n_nodes). One that
// handed its bytes to a result written over it ends at that result's step.
// Two tensors whose steps overlap never share a byte: the plan's invariant.
struct mg_gallocr_lifetime {
    const struct mg_tensor * tensor;
    size_t offset, size;
    int    first, end;
    bool   handed_over;
};

// The lifetimes of the last plan of g (which must be the graph planned last),
// leafs first, then nodes. Returns how many there are; at most max are stored.
int mg_gallocr_lifetimes(const struct mg_gallocr * ga, const struct mg_cgraph * g, struct mg_gallocr_lifetime * out,
                         int max);

// The plan as a picture (galloc_svg.c): buffer offset up, node step right, one
// box per planned tensor, the peak as a line. False, with mg_last_error(), if
// path cannot be written.
bool mg_gallocr_dump_svg(const struct mg_gallocr * ga, const struct mg_cgraph * g, const char * title, const char * path);

// If $MG_SVG names a directory, write the plan there as <name>.svg and say so
// on stderr (as $MG_DOT does for drawings of graphs).
bool mg_gallocr_dump_svg_env(const struct mg_gallocr * ga, const struct mg_cgraph * g, const char * name);
