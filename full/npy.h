//@file full
// npy.h - NumPy's .npy format for float32 arrays: what `mg logits
// --dump-tensors` writes, what tools/npy_diff reads, and what numpy.load opens.
//
// A .npy file (format 1.0) is a 10-byte preamble (\x93NUMPY, version 1.0, a
// little-endian u16 header length), a Python dict literal such as
//     {'descr': '<f4', 'fortran_order': False, 'shape': (18, 256), }
// padded with spaces and a newline so that the data starts at a multiple of
// 64 bytes, then the values in C order (the last axis varies fastest). A
// tensor of ne [ne0, ne1, ne2] is written with shape (ne2, ne1, ne0).
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MG_NPY_MAX_DIMS 4

// Write n_dims axes of shape[] (outermost first) of float32 data. False, with
// mg_last_error(), if the file cannot be written.
bool mg_npy_write_f32(const char * path, const float * data, int n_dims, const int64_t * shape);

struct mg_npy {
    int     n_dims;
    int64_t shape[MG_NPY_MAX_DIMS];   // outermost first
    int64_t n;                        // product of the shape
    float * data;                     // n values (malloc'ed)
};

// Read a float32 C-order .npy file ('<f4', fortran_order False, at most four
// axes). False, with mg_last_error() naming the file and what is wrong.
bool mg_npy_read_f32(const char * path, struct mg_npy * out);
void mg_npy_free(struct mg_npy * a);

// ---------------------------------------------------------------------------
// Dumping a graph's intermediates: a session eval callback (session.h) that
// writes every named node as DIR/<name>.npy and lists them in DIR/order.txt,
// in graph order. Views (reshape, permute, ...) hold no new numbers and are
// skipped; a name met again gets ".1", ".2", ... (llama.cpp's graph names the
// matmul, the reshape and the rope of Qcur-0 alike). tools/llama-ref writes
// the same layout from llama.cpp, and tools/npy_diff compares two of them.
// ---------------------------------------------------------------------------

struct mg_tensor;

struct mg_npy_dumper {
    char    dir[1024];
    bool    active;      // false: nodes are not written (e.g. all but the prompt's last batch)
    void *  order;       // struct mg_outfile * of DIR/order.txt (outfile.h)
    int     n_written;
    int     n_failed;
    char (*names)[80];   // the names written so far
    int     names_cap;
};

// Open DIR/order.txt (DIR must exist). False, with mg_last_error().
bool mg_npy_dumper_open(struct mg_npy_dumper * d, const char * dir);
void mg_npy_dumper_close(struct mg_npy_dumper * d);

// The callback: give it as cb_eval with the dumper as cb_eval_user_data.
void mg_npy_dump_node(const struct mg_tensor * node, void * dumper);

// One tensor (F32, F16 or BF16, any strides) as float32, shape ne reversed
// with trailing 1s dropped. False, with mg_last_error().
bool mg_npy_write_tensor(const char * path, const struct mg_tensor * t);
