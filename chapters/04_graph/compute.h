// Generated from full/compute.h by tools/chapgen. In a class, edit this copy freely (make chapters will not overwrite your edits); to change the engine, edit full/compute.h and run make chapters.
// compute.h - the kernels: how each op turns its inputs into its output.
//
// mg_compute_forward(params, t) computes t from t->src[] (ggml-cpu.c,
// ggml_compute_forward). Every kernel computes only its share of the output
// rows, chosen by params->ith out of params->nth, so that several threads can
// run one op side by side without writing the same bytes. Until chapter 08
// there is one share (ith 0 of nth 1), and the rows are the whole tensor.
#pragma once

#include "tensor.h"

struct mg_compute_params {
    int ith;   // which share this call computes: 0 .. nth-1
    int nth;   // how many shares the op is split into
};

// Rows [*r0, *r1) of nrows are share ith of nth (as even as possible).
static inline void mg_split_rows(int64_t nrows, int ith, int nth, int64_t * r0, int64_t * r1) {
    const int64_t per_share = (nrows + nth - 1) / nth;
    *r0 = per_share * ith < nrows ? per_share * ith : nrows;
    *r1 = *r0 + per_share < nrows ? *r0 + per_share : nrows;
}

// How many "rows" t's kernel splits between shares: output rows for most
// ops, rows of src0 for mul_mat, elements for copies, indices for get_rows.
int64_t mg_compute_n_rows(const struct mg_tensor * t);

// Compute this call's share of t. Views (and leafs) need nothing.
void mg_compute_forward(const struct mg_compute_params * params, struct mg_tensor * t);

// Compute t and everything it depends on, giving results their data from ctx.
void mg_compute(struct mg_context * ctx, struct mg_tensor * t);

// Give t its bytes: a view points into its source, anything else gets fresh
// bytes from ctx the first time (chapter 05 plans this instead).
void mg_place_result(struct mg_context * ctx, struct mg_tensor * t);

// e^x as ggml computes it on x86 for softmax and SiLU (ggml_v_expf), so our
// results track llama.cpp's to the last bit where it matters.
float mg_expf(float x);
