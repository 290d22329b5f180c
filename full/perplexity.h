//@file full
// perplexity.h - the arithmetic behind mg perplexity (cli/cmd_perplexity.c,
// llama.cpp's tools/perplexity/perplexity.cpp): the log-softmax in
// llama.cpp's precision, the saved-logits file (llama-perplexity's
// --kl-divergence-base format; mg perplexity --help gives its layout), and
// the KL divergence against a saved row. In the library, not the command, so
// that the tests and fuzz/fuzz_kl_base.c reach it without the binary.
#pragma once

#include "outfile.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

// The top logit, and its index in *argmax (if not NULL).
float mg_ppl_max_of(const float * x, int n, int * argmax);
// sum_i exp(x_i - max), the terms in float (expf) and their sum in double.
double mg_ppl_sum_exp(const float * x, int n, float max);
// -log p(tok): llama.cpp's log_softmax(n_vocab, logits, tok).
double mg_ppl_nll(const float * logits, int n_vocab, int32_t tok);
// -log p(tok) as --save-logits computes it, and the position's saved row.
double mg_ppl_nll_and_row(const float * logits, int n_vocab, int32_t tok, uint16_t * row);

// uint16 slots per saved row: 2 floats, then n_vocab rounded up to even.
int mg_ppl_row_slots(int n_vocab);
// Whether a row read from a file is one --save-logits could have written.
bool mg_ppl_row_ok(const uint16_t * row, int n_vocab);

struct mg_kld_sums {
    double sum_nll, sum_nll2, sum_nll_base, sum_nll_base2, sum_nll_nll_base;
    double sum_kld, sum_kld2;
    double sum_p_diff, sum_p_diff2, sum_p_diff4;
    size_t n_same_top, count;
};

// Adds one position against its saved row (which mg_ppl_row_ok accepted); *kld
// and *p_diff get its KL divergence and p - p_base of the right token.
void mg_ppl_kld_add(struct mg_kld_sums * k, const float * logits, int n_vocab, const uint16_t * base_row, int32_t tok,
                 float * kld, float * p_diff);

// The bytes of a saved file: the header, the tokens, and a row of slots per scored position.
uint64_t mg_ppl_logits_file_size(int n_ctx, int n_vocab, int n_chunk);
// The file's header into a temporary file beside path (outfile.h). NULL after mg_set_error.
FILE * mg_ppl_logits_file_create(struct mg_outfile * out, const char * path, int32_t n_ctx, int32_t n_vocab,
                                 int32_t n_chunk, const int32_t * tokens);
// The next n_rows saved rows (each mg_ppl_row_slots(n_vocab) uint16): false
// if they could not all be written.
bool mg_ppl_write_rows(FILE * f, const uint16_t * rows, int n_rows, int n_vocab);

// A saved file, opened for reading: its header, and the tokens it was saved
// from; the rows follow at f's position, chunk by chunk.
struct mg_logits_base {
    FILE *    f;
    int32_t   n_ctx, n_vocab, n_chunk;
    int32_t * tokens;   // [n_chunk * n_ctx]
};

// Opens a saved file and checks it against a model of n_vocab_model tokens:
// the magic, the header's figures, the vocabulary size, that the file is
// exactly as long as its header says (so a truncated file fails here, not
// mid-run) and every token id. False after mg_set_error (naming the file),
// with nothing left open.
bool mg_ppl_base_open(const char * path, int n_vocab_model, struct mg_logits_base * b);
void mg_ppl_base_close(struct mg_logits_base * b);
// The next n_rows rows of the file into rows[n_rows * mg_ppl_row_slots(n_vocab)]:
// false if the file ends first.
bool mg_ppl_base_read_rows(struct mg_logits_base * b, uint16_t * rows, int n_rows);

// ---------------------------------------------------------------------------
// The statistics of the closing table (kl_divergence()'s helpers)
// ---------------------------------------------------------------------------

// A mean and the standard error of it (mean_and_uncertainty in kl_divergence()).
struct mg_ppl_estimate {
    double value, err;
};
struct mg_ppl_estimate mg_ppl_mean_err(double sum, double sum2, size_t count);
// The covariance of two sums' terms, over count of them (0 for fewer than 10).
double mg_ppl_covariance(double suma, double sumb, double sumab, size_t count);
// sqrt of x, or 0 where rounding took x below 0 (llama.cpp prints -nan there).
double mg_ppl_sqrt_pos(double x);
// qsort's comparison of floats, ascending.
int mg_ppl_cmp_float(const void * a, const void * b);
// Of n sorted values: linear interpolation between neighbours (llama.cpp's percentile lambda).
float mg_ppl_percentile(const float * v, size_t n, float fraction);
float mg_ppl_median(const float * v, size_t n);
