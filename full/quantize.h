//@file full
// quantize.h - a GGUF model rewritten with quantized weights: the library side
// of mg quantize, as llama.cpp's llama_model_quantize (src/llama-quant.cpp)
// is the library side of its tools/quantize. The command only parses its
// arguments, calls mg_model_quantize and prints what the progress callback
// tells it (cli/cmd_quantize.c).
//
//     struct mg_quantize_params p = mg_quantize_default_params();
//     p.ftype = MG_FTYPE_Q4_K_M;                  // mg_quant_option_parse("Q4_K_M", &o): o.ftype
//     if (!mg_model_quantize("tiny-f32.gguf", "tiny-q4_k_m.gguf", &p)) {
//         ...mg_last_error()...                   // names the file, the tensor or the parameter
//     }
//
// Every tensor gets the type quant_recipe.c's rules give it (llama-quantize's
// per-tensor choices, mixes and shape fallbacks); its rows go through F32 to
// the reference quantizers of quants*.c (bit-exact with ggml's), in bands of
// rows on n_threads threads; the tensors and the metadata are written in
// llama-quantize's order. So the same input and ftype give llama-quantize's
// bytes, on any number of threads.
#pragma once

#include "gguf.h"
#include "quant_recipe.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// One tensor as it is planned and converted.
struct mg_quantize_tensor {
    const struct mg_gguf_tensor_info * in;   // the input's name, type, shape, bytes
    enum mg_type wanted;    // what the rules asked for
    enum mg_type type;      // what it becomes (wanted, or its shape fallback)
    bool         convert;   // false: the bytes are copied unchanged
    size_t       nbytes;    // its size in the output
    void *       data;      // the new bytes (when converted), held until the file is written
    double       err2, x2;  // with stats: sums of squared errors and of squared weights
};

// When the progress callback is called.
enum mg_quantize_stage {
    MG_QUANTIZE_PLANNED,   // every type chosen and the output checked; nothing converted yet
    MG_QUANTIZE_TENSOR,    // tensor i converted (or, with dry_run, planned)
    MG_QUANTIZE_DONE,      // the file written (with dry_run: every tensor planned)
};

// What the progress callback is told.
struct mg_quantize_progress {
    enum mg_quantize_stage            stage;
    const char *                      path;         // the file written: fname_out or its symlink's target (NULL with dry_run)
    int                               i;            // MG_QUANTIZE_TENSOR: the tensor's place in writing order
    int                               n_tensors;
    int                               name_width;   // the longest tensor name, in bytes (for a table)
    const struct mg_quantize_tensor * tensor;       // MG_QUANTIZE_TENSOR: tensor i; NULL otherwise
    // The totals over the tensors done so far (at MG_QUANTIZE_DONE, all of them).
    size_t  size_in, size_out;
    int64_t n_weights, n_converted;
    double  err2, x2;
};

typedef void (*mg_quantize_progress_callback)(const struct mg_quantize_progress * p, void * user_data);

// llama.cpp's llama_model_quantize_params, the part this engine has.
struct mg_quantize_params {
    enum mg_ftype ftype;              // the file type to write (general.file_type)
    int           n_threads;          // 1..512 threads converting the rows
    bool          pure;               // every matrix in ftype's own tensor type: no mix rules
    bool          allow_requantize;   // accept quantized input matrices
    bool          stats;              // measure each converted tensor's error (err2, x2)
    bool          dry_run;            // plan and report; convert and write nothing
    mg_quantize_progress_callback progress;        // NULL: no reports
    void *                        progress_data;   // handed to progress
};

// ftype Q5_1 (as llama_model_quantize_default_params), every core, no options, no callback.
struct mg_quantize_params mg_quantize_default_params(void);

// Reads fname_inp and writes it, quantized as params asks, to fname_out:
// through outfile.c (a temporary file beside it, fsync'd and renamed over it
// when complete), never over fname_inp, after checking before any work that
// the output can be written, that the converted tensors fit in memory and the
// file on the disk. False after mg_set_error (naming the file, the tensor, or
// the parameter: "n_threads", "allow_requantize"), with fname_out as it was.
bool mg_model_quantize(const char * fname_inp, const char * fname_out, const struct mg_quantize_params * params);
