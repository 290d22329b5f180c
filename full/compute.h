//@file 03
// compute.h - the kernels: how each op turns its inputs into its output.
//
// mg_compute_forward(params, t) computes t from t->src[] (ggml-cpu.c,
// ggml_compute_forward). Every kernel computes only its share of the output
// rows, chosen by params->ith out of params->nth, so that several threads can
// run one op side by side without writing the same bytes. Until chapter 08
// there is one share (ith 0 of nth 1), and the rows are the whole tensor.
#pragma once

#include "tensor.h"

//@+ 07 params-work
#define MG_CACHE_LINE 64   // bytes; shares of the work buffer start on their own line
//@- 07 params-work

struct mg_compute_params {
    int ith;   // which share this call computes: 0 .. nth-1
    int nth;   // how many shares the op is split into
    //@+ 07 params-work
    size_t wsize;   // the shared work buffer planned in chapter 07 (plan.c)
    void * wdata;
    //@- 07 params-work
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

//@+ 07 init-phase
// Some ops prepare shared data before any share can run: mul_mat converts its
// activations into the weights' vec_dot_type once, into the work buffer (the
// "INIT" task of older ggml). Every share of init must finish before any
// share of the forward pass starts.
bool mg_compute_needs_init(const struct mg_tensor * t);
void mg_compute_forward_init(const struct mg_compute_params * params, struct mg_tensor * t);
//@- 07 init-phase

//@+ full fused-ops
// Kernels of the fused ops (compute_fused.c).
void mg_compute_forward_swiglu    (const struct mg_compute_params * params, struct mg_tensor * t);
void mg_compute_forward_flash_attn(const struct mg_compute_params * params, struct mg_tensor * t);
size_t mg_flash_attn_work_size(const struct mg_tensor * t);   // scratch bytes per share
int64_t mg_flash_attn_n_blocks(const struct mg_tensor * t);   // blocks of query rows sharing a KV head
//@- full fused-ops
//@+ full moe
// Scratch of the MoE ops (compute.c), for the plan: argsort's per share, mul_mat_id's in all for n_tasks shares.
size_t mg_argsort_work_size(const struct mg_tensor * t);
size_t mg_mul_mat_id_work_size(const struct mg_tensor * t, int n_tasks);
//@- full moe

// Compute t and everything it depends on, giving results their data from ctx.
void mg_compute(struct mg_context * ctx, struct mg_tensor * t);

#if 0 //@old 03..04 naive-data
// Give t its bytes: a view points into its source, anything else gets fresh
// bytes from ctx the first time (chapter 05 plans this instead).
void mg_place_result(struct mg_context * ctx, struct mg_tensor * t);
#endif //@old naive-data

// e^x as ggml computes it on x86 for softmax and SiLU (ggml_v_expf), so our
// results track llama.cpp's to the last bit where it matters.
float mg_expf(float x);
