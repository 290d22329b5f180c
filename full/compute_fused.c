//@file full
// compute_fused.c - kernels that do in one pass what a chain of ops does in
// several: SwiGLU and flash attention (ggml-cpu/ops.cpp: ggml_compute_forward_swiglu,
// ggml_compute_forward_flash_attn_ext_f16).
#include "compute.h"
#include "quants.h"
#include "ops_simd.h"
#include "vec.h"
#include "vec_simd.h"

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

enum { FA_TILE = 32 };   // keys scored together before the running softmax is updated

// Scratch one share needs: the query in K's dot-product format, a tile of
// scores, the output accumulator and one value row decoded to F32.
size_t mg_flash_attn_work_size(const struct mg_tensor * node) {
    const int64_t D = node->src[0]->ne[0];
    return (size_t) D * sizeof(float) * 3 + FA_TILE * sizeof(float) + MG_CACHE_LINE;
}

// The scores of one tile of keys: dot products of the query with each key,
// scaled, plus the mask. A masked key (-INFINITY) is not computed at all:
// with a padded cache most keys of a short sequence are masked.
static float score_tile(const struct mg_tensor * k, const struct mg_tensor * mask, const struct mg_type_traits_cpu * cpu,
                        const void * q_conv, float scale, int64_t t, int64_t hk, int64_t j0, int64_t n, float * s) {
    float tile_max = -INFINITY;
    for (int64_t j = 0; j < n; j++) {
        const float m = mask ? *(const float *) ((const char *) mask->data + t * mask->nb[1] + (j0 + j) * mask->nb[0])
                             : 0.0f;
        if (m == -INFINITY) {
            s[j] = -INFINITY;
            continue;
        }
        cpu->vec_dot(k->ne[0], &s[j], (const char *) k->data + (j0 + j) * k->nb[1] + hk * k->nb[2], q_conv);
        s[j] = s[j] * scale + m;
        tile_max = fmaxf(tile_max, s[j]);
    }
    return tile_max;
}

// One query row against all keys, with the softmax computed on the fly: keep
// the running max M and sum S, and rescale the accumulated output whenever a
// tile raises M. The row of n_kv scores is never stored, only one tile of it.
static void attend_one(const struct mg_tensor * q, const struct mg_tensor * k, const struct mg_tensor * v,
                       const struct mg_tensor * mask, float scale, int64_t t, int64_t h, float * out, float * work) {
    const int64_t D  = q->ne[0];
    const int64_t hk = h / (q->ne[2] / k->ne[2]);   // the KV head this query head shares
    const struct mg_type_traits_cpu * cpu = mg_get_type_traits_cpu(k->type);
    float * q_conv = work;                 // D floats: room for the query as F16 or F32
    float * s      = work + D;             // FA_TILE scores
    float * acc    = s + FA_TILE;          // D floats
    float * v_row  = acc + D;              // D floats
    const float * qr = (const float *) ((const char *) q->data + t * q->nb[1] + h * q->nb[2]);
    if (cpu->from_float != NULL) {
        cpu->from_float(qr, q_conv, D);   // F16 keys: the query rounded to F16, as llama.cpp does
    } else {
        memcpy(q_conv, qr, (size_t) D * sizeof(float));
    }
    mg_to_float_fn v_to_f32 = mg_get_type_traits(v->type)->to_float;
#ifdef MG_SIMD
    if (v->type == MG_TYPE_F16) v_to_f32 = mg_fp16_to_fp32_row_simd;   // the same floats, 8 at a time
#endif
    float M = -INFINITY, S = 0.0f;
    for (int64_t d = 0; d < D; d++) acc[d] = 0.0f;
    for (int64_t j0 = 0; j0 < k->ne[1]; j0 += FA_TILE) {
        const int64_t n        = k->ne[1] - j0 < FA_TILE ? k->ne[1] - j0 : FA_TILE;
        const float   tile_max = score_tile(k, mask, cpu, q_conv, scale, t, hk, j0, n, s);
        if (tile_max == -INFINITY) continue;   // the whole tile is masked
        if (tile_max > M) {
            const float shrink = M == -INFINITY ? 0.0f : mg_expf(M - tile_max);   // old terms against the new max
            for (int64_t d = 0; d < D; d++) acc[d] *= shrink;
            S *= shrink;
            M = tile_max;
        }
        for (int64_t j = 0; j < n; j++) {
            if (s[j] == -INFINITY) continue;
            const float w = mg_expf(s[j] - M);
            const char * vr = (const char *) v->data + (j0 + j) * v->nb[1] + hk * v->nb[2];
            if (v->nb[0] == mg_type_size(v->type)) {
                v_to_f32(vr, v_row, D);
            } else {
                for (int64_t d = 0; d < D; d++) v_to_f32(vr + d * v->nb[0], &v_row[d], 1);
            }
            for (int64_t d = 0; d < D; d++) acc[d] += w * v_row[d];
            S += w;
        }
    }
    for (int64_t d = 0; d < D; d++) out[d] = S > 0.0f ? acc[d] / S : 0.0f;
}

void mg_compute_forward_flash_attn(const struct mg_compute_params * p, struct mg_tensor * dst) {
    const struct mg_tensor * q = dst->src[0], * k = dst->src[1], * v = dst->src[2], * mask = dst->src[3];
    const float   scale    = mg_get_op_param_f32(dst, 0);
    const int64_t n_tokens = q->ne[1], n_head = q->ne[2];
    MG_ASSERT(mask == NULL || mask->type == MG_TYPE_F32);
    MG_ASSERT(q->nb[0] == sizeof(float) && k->nb[0] == mg_type_size(k->type));
    // This share's slice of the work buffer, on its own cache line.
    const size_t slice = (mg_flash_attn_work_size(dst) + MG_CACHE_LINE - 1) / MG_CACHE_LINE * MG_CACHE_LINE;
    MG_ASSERT(p->wsize >= slice * (size_t) p->nth);
    float * work = (float *) ((char *) p->wdata + slice * (size_t) p->ith);
    int64_t r0, r1;
    mg_split_rows(n_tokens * n_head, p->ith, p->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const int64_t t = r / n_head, h = r % n_head;
        float * out = (float *) ((char *) dst->data + h * dst->nb[1] + t * dst->nb[2]);
        attend_one(q, k, v, mask, scale, t, h, out, work);
    }
}
