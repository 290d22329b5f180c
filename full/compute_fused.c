//@file full
// compute_fused.c - kernels that do in one pass what a chain of ops does in
// several: SwiGLU and flash attention (ggml-cpu/ops.cpp: ggml_compute_forward_swiglu,
// ggml_compute_forward_flash_attn_ext_f16).
#include "compute.h"
#include "quants.h"
#include "ops_simd.h"
#include "vec.h"
#include "vec_simd.h"
#include "gemm_float.h"

#include <math.h>
#include <string.h>

// silu(a) * b, with the exp of the same lanes as mg_compute_forward's SILU
// (ggml_vec_swiglu_f32), so that fusing changes no bit of the result.
void mg_compute_forward_swiglu(const struct mg_compute_params * p, struct mg_tensor * dst) {
    const struct mg_tensor * a = dst->src[0];
    const struct mg_tensor * b = dst->src[1];
    const int64_t n = dst->ne[0];
    MG_ASSERT(a->nb[0] == sizeof(float) && b->nb[0] == sizeof(float) && dst->nb[0] == sizeof(float));
    int64_t r0, r1;
    mg_split_rows(mg_nrows(dst), p->ith, p->nth, &r0, &r1);
    for (int64_t ir = r0; ir < r1; ir++) {
        const int64_t i1 = ir % dst->ne[1], i2 = ir / dst->ne[1] % dst->ne[2], i3 = ir / (dst->ne[1] * dst->ne[2]);
        const float * x = (const float *) ((const char *) a->data + i1 * a->nb[1] + i2 * a->nb[2] + i3 * a->nb[3]);
        const float * g = (const float *) ((const char *) b->data + i1 * b->nb[1] + i2 * b->nb[2] + i3 * b->nb[3]);
        float *       y = (float *) ((char *) dst->data + i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3]);
        mg_swiglu_row(n, y, x, g);   // ggml's 16-lane loop rule for the exp, eight lanes at a time
    }
}

// ---------------------------------------------------------------------------
// Flash attention
// ---------------------------------------------------------------------------
//
// The work is cut into blocks of query rows that share one KV head: with
// grouped-query attention the G = n_head / n_head_kv query heads of a KV head
// read the same keys and values, and so do the consecutive tokens of a
// prompt. A block takes up to FA_ROWS such rows (tokens t0.. times those G
// heads) through the keys FA_KEYS at a time, so every key and value row is
// read and converted once per block instead of once per query row
// (ggml_compute_forward_flash_attn_ext_tiled does the same with tiles of
// one head's tokens; a decode step there splits the keys between threads).
// For each tile of keys:
//   scores  = the block's queries . the tile's keys   (a small matrix product)
//   softmax = online: each row keeps its running max M and sum S, and its
//             output is rescaled whenever a tile raises M
//   output += softmax weights x the tile's values      (another product)
// No row of n_kv scores is ever stored: only FA_ROWS x FA_KEYS of them.

enum {
    FA_KEYS = 64,   // keys scored together (GGML_FA_TILE_KV)
    FA_ROWS = 64,   // query rows in a block at most (GGML_FA_TILE_Q)
};

// The block shape of this node: G query heads per KV head, and how many
// consecutive tokens a block takes (at least one, so a block may exceed
// FA_ROWS when G does).
static int64_t fa_group(const struct mg_tensor * node) { return node->src[0]->ne[2] / node->src[1]->ne[2]; }
static int64_t fa_block_tokens(const struct mg_tensor * node) {
    const int64_t n = FA_ROWS / fa_group(node);
    return n > 0 ? n : 1;
}
static int64_t fa_block_rows(const struct mg_tensor * node) { return fa_block_tokens(node) * fa_group(node); }

// Blocks are numbered KV head first, so that a decode step (one token) gives
// each thread its own KV heads; they are the "rows" shares split.
int64_t mg_flash_attn_n_blocks(const struct mg_tensor * node) {
    const int64_t n_tokens = node->src[0]->ne[1];
    return (n_tokens + fa_block_tokens(node) - 1) / fa_block_tokens(node) * node->src[1]->ne[2];
}

// The scratch of one share, in floats: the block's queries (in K's dot-product
// type, at most F32), its scores, its outputs, one tile of values as F32, and
// each row's running max and sum.
struct fa_scratch {
    void *  q_conv;   // rows x D
    float * score;    // rows x FA_KEYS
    float * acc;      // rows x D
    float * v32;      // FA_KEYS x D
    float * row_max;  // rows
    float * row_sum;  // rows
};

static size_t fa_scratch_floats(int64_t rows, int64_t D) { return (size_t) (rows * (2 * D + FA_KEYS + 2) + FA_KEYS * D); }

size_t mg_flash_attn_work_size(const struct mg_tensor * node) {
    return fa_scratch_floats(fa_block_rows(node), node->src[0]->ne[0]) * sizeof(float) + MG_CACHE_LINE;
}

static struct fa_scratch fa_scratch_at(float * work, int64_t rows, int64_t D) {
    struct fa_scratch w;
    w.q_conv  = work;
    w.score   = work + rows * D;
    w.acc     = w.score + rows * FA_KEYS;
    w.v32     = w.acc + rows * D;
    w.row_max = w.v32 + FA_KEYS * D;
    w.row_sum = w.row_max + rows;
    return w;
}

// One block: tokens [t0, t0 + nt) of the query heads of KV head hk. Row
// r = tt * G + g is token t0 + tt of query head hk * G + g.
struct fa_block {
    int64_t t0, nt, hk, G, rows;
};

// The block's queries in the keys' dot-product type: F16 keys get the query
// rounded to F16, as llama.cpp does.
static void fa_load_queries(const struct mg_tensor * q, const struct mg_type_traits_cpu * cpu, size_t q_row_size,
                            const struct fa_block * b, void * q_conv) {
    const int64_t D = q->ne[0];
    for (int64_t r = 0; r < b->rows; r++) {
        const int64_t t = b->t0 + r / b->G, h = b->hk * b->G + r % b->G;
        const float * qr  = (const float *) ((const char *) q->data + t * q->nb[1] + h * q->nb[2]);
        void *        dst = (char *) q_conv + r * q_row_size;
        if (cpu->from_float != NULL) {
            cpu->from_float(qr, dst, D);
        } else {
            memcpy(dst, qr, (size_t) D * sizeof(float));
        }
    }
}

// True when every key of [j0, j0 + n) is masked for every token of the block:
// the tile can be skipped (most of a causal prompt's upper triangle).
static bool fa_tile_masked(const struct mg_tensor * mask, const struct fa_block * b, int64_t j0, int64_t n) {
    if (mask == NULL) return false;
    for (int64_t tt = 0; tt < b->nt; tt++) {
        const float * m = (const float *) ((const char *) mask->data + (b->t0 + tt) * mask->nb[1]) + j0;
        for (int64_t j = 0; j < n; j++) {
            if (m[j] != -INFINITY) return false;
        }
    }
    return true;
}

// score[r][j] = q_r . k_(j0+j) for the tile's n keys, then * scale + mask;
// the columns n..FA_KEYS of a short last tile are -INFINITY. A whole tile of
// 4k keys goes through mg_gemm_float (tinyBLAS's kernel, as llama.cpp's
// plain attention uses for K.Q), the rest one dot product at a time.
static void fa_score_tile(const struct mg_tensor * k, const struct mg_tensor * mask,
                          const struct mg_type_traits_cpu * cpu, size_t q_row_size, float scale,
                          const struct fa_block * b, int64_t j0, int64_t n, const void * q_conv, float * score) {
    const int64_t D  = k->ne[0];
    const char *  k0 = (const char *) k->data + j0 * k->nb[1] + b->hk * k->nb[2];
    if (n % 4 == 0 && mg_gemm_float_applies(k->type, n, b->rows, D)) {
        mg_gemm_float(k->type, D, k0, k->nb[1], 0, n, q_conv, q_row_size, b->rows, score, FA_KEYS);
    } else {
        for (int64_t r = 0; r < b->rows; r++) {
            for (int64_t j = 0; j < n; j++) {
                cpu->vec_dot(D, &score[r * FA_KEYS + j], k0 + j * k->nb[1], (const char *) q_conv + r * q_row_size);
            }
        }
    }
    for (int64_t r = 0; r < b->rows; r++) {
        float *       s = score + r * FA_KEYS;
        const float * m = mask ? (const float *) ((const char *) mask->data + (b->t0 + r / b->G) * mask->nb[1]) + j0
                               : NULL;
        for (int64_t j = 0; j < n; j++) s[j] = s[j] * scale + (m ? m[j] : 0.0f);
        for (int64_t j = n; j < FA_KEYS; j++) s[j] = -INFINITY;
    }
}

// The online softmax of one row for one tile: raise the running max if the
// tile's scores do (and shrink the output and sum accumulated so far), then
// turn the scores into weights e^(s - M) and add them to the sum. Returns
// false when the whole row of the tile is masked (its weights stay unused).
static bool fa_softmax_tile_row(float * s, float * acc, int64_t D, float * row_max, float * row_sum) {
    float tile_max = -INFINITY;
    for (int j = 0; j < FA_KEYS; j++) tile_max = s[j] > tile_max ? s[j] : tile_max;   // fmaxf would be a call
    if (tile_max == -INFINITY) return false;
    if (tile_max > *row_max) {
        const float shrink = *row_max == -INFINITY ? 0.0f : mg_expf(*row_max - tile_max);   // old terms, new max
        for (int64_t d = 0; d < D; d++) acc[d] *= shrink;
        *row_sum *= shrink;
        *row_max = tile_max;
    }
    mg_exp_row(FA_KEYS, s, s, *row_max);   // masked keys: e^-inf = 0
    float sum = 0.0f;
    for (int j = 0; j < FA_KEYS; j++) sum += s[j];
    *row_sum += sum;
    return true;
}

// The tile's n value rows as F32, one after another (v32[j * D + d]).
static void fa_load_values(const struct mg_tensor * v, const struct fa_block * b, int64_t j0, int64_t n, float * v32) {
    const int64_t D = v->ne[0];
    mg_to_float_fn to_f32 = mg_get_type_traits(v->type)->to_float;
#ifdef MG_SIMD
    if (v->type == MG_TYPE_F16) to_f32 = mg_fp16_to_fp32_row_simd;   // the same floats, 8 at a time
#endif
    for (int64_t j = 0; j < n; j++) to_f32((const char *) v->data + (j0 + j) * v->nb[1] + b->hk * v->nb[2], v32 + j * D, D);
}

static void fa_attend_block(const struct mg_tensor * dst, const struct fa_block * b, struct fa_scratch * w) {
    const struct mg_tensor * q = dst->src[0], * k = dst->src[1], * v = dst->src[2], * mask = dst->src[3];
    const float   scale = mg_get_op_param_f32(dst, 0);
    const int64_t D     = q->ne[0];
    const struct mg_type_traits_cpu * cpu = mg_get_type_traits_cpu(k->type);
    const size_t  q_row_size = cpu->from_float != NULL ? mg_row_size(cpu->vec_dot_type, D) : D * sizeof(float);
    fa_load_queries(q, cpu, q_row_size, b, w->q_conv);
    for (int64_t r = 0; r < b->rows; r++) {
        w->row_max[r] = -INFINITY;
        w->row_sum[r] = 0.0f;
    }
    memset(w->acc, 0, (size_t) (b->rows * D) * sizeof(float));
    for (int64_t j0 = 0; j0 < k->ne[1]; j0 += FA_KEYS) {
        const int64_t n = k->ne[1] - j0 < FA_KEYS ? k->ne[1] - j0 : FA_KEYS;
        if (fa_tile_masked(mask, b, j0, n)) continue;
        fa_score_tile(k, mask, cpu, q_row_size, scale, b, j0, n, w->q_conv, w->score);
        fa_load_values(v, b, j0, n, w->v32);
        for (int64_t r = 0; r < b->rows; r++) {
            float * s = w->score + r * FA_KEYS, * acc = w->acc + r * D;
            if (fa_softmax_tile_row(s, acc, D, &w->row_max[r], &w->row_sum[r])) mg_weighted_rows_add(n, D, s, w->v32, acc);   // acc += s . V
        }
    }
    for (int64_t r = 0; r < b->rows; r++) {
        const int64_t t = b->t0 + r / b->G, h = b->hk * b->G + r % b->G;
        float *       out = (float *) ((char *) dst->data + h * dst->nb[1] + t * dst->nb[2]);
        const float   S   = w->row_sum[r];
        for (int64_t d = 0; d < D; d++) out[d] = S > 0.0f ? w->acc[r * D + d] / S : 0.0f;
    }
}

void mg_compute_forward_flash_attn(const struct mg_compute_params * p, struct mg_tensor * dst) {
    const struct mg_tensor * q = dst->src[0], * k = dst->src[1], * mask = dst->src[3];
    const int64_t n_tokens = q->ne[1], D = q->ne[0];
    MG_ASSERT(mask == NULL || mask->type == MG_TYPE_F32);
    MG_ASSERT(q->nb[0] == sizeof(float) && k->nb[0] == mg_type_size(k->type));
    MG_ASSERT(q->ne[2] % k->ne[2] == 0);
    // This share's slice of the work buffer, on its own cache line.
    const size_t slice = (mg_flash_attn_work_size(dst) + MG_CACHE_LINE - 1) / MG_CACHE_LINE * MG_CACHE_LINE;
    MG_ASSERT(p->wsize >= slice * (size_t) p->nth);
    const int64_t     block_tokens = fa_block_tokens(dst), G = fa_group(dst);
    struct fa_scratch w = fa_scratch_at((float *) ((char *) p->wdata + slice * (size_t) p->ith), block_tokens * G, D);
    int64_t i0, i1;
    mg_split_rows(mg_flash_attn_n_blocks(dst), p->ith, p->nth, &i0, &i1);
    for (int64_t i = i0; i < i1; i++) {
        struct fa_block b;
        b.hk   = i % k->ne[2];
        b.t0   = i / k->ne[2] * block_tokens;
        b.nt   = n_tokens - b.t0 < block_tokens ? n_tokens - b.t0 : block_tokens;
        b.G    = G;
        b.rows = b.nt * G;
        fa_attend_block(dst, &b, &w);
    }
}
