//@file full
// compute_fused.c - kernels that do in one pass what a chain of ops does in
// several: SwiGLU and flash attention (ggml-cpu/ops.cpp: ggml_compute_forward_swiglu,
// ggml_compute_forward_flash_attn_ext_f16).
#include "compute.h"
#include "quants.h"

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
        const int64_t vector_end = n - n % 16;   // ggml's 16-lane loop; the tail uses libm's expf
        for (int64_t i = 0; i < n; i++) {
            const float e = i < vector_end ? mg_expf(-x[i]) : expf(-x[i]);
            y[i] = x[i] / (1.0f + e) * g[i];
        }
    }
}

static float load_as_f32(const char * p, enum mg_type type) {
    return type == MG_TYPE_F16 ? mg_fp16_to_fp32(*(const mg_fp16_t *) p) : *(const float *) p;
}

// One query row against all keys, with the softmax computed on the fly: keep
// the running max M and sum S, rescale the accumulated output whenever M
// grows. The {n_kv} row of scores is never stored.
static void attend_one(const struct mg_tensor * q, const struct mg_tensor * k, const struct mg_tensor * v,
                       const struct mg_tensor * mask, float scale, int64_t t, int64_t h, float * out, float * acc) {
    const int64_t D  = q->ne[0];
    const int64_t hk = h / (q->ne[2] / k->ne[2]);   // the KV head this query head shares
    const char *  qr = (const char *) q->data + t * q->nb[1] + h * q->nb[2];
    float M = -INFINITY, S = 0.0f;
    for (int64_t d = 0; d < D; d++) acc[d] = 0.0f;
    for (int64_t j = 0; j < k->ne[1]; j++) {
        const float m = mask ? *(const float *) ((const char *) mask->data + t * mask->nb[1] + j * mask->nb[0]) : 0.0f;
        if (m == -INFINITY) continue;
        const char * kr = (const char *) k->data + j * k->nb[1] + hk * k->nb[2];
        float s = 0.0f;
        for (int64_t d = 0; d < D; d++) {
            s += load_as_f32(qr + d * q->nb[0], q->type) * load_as_f32(kr + d * k->nb[0], k->type);
        }
        s = s * scale + m;
        float w = 1.0f;
        if (s > M) {
            const float shrink = M == -INFINITY ? 0.0f : expf(M - s);   // old terms, measured against the new max
            for (int64_t d = 0; d < D; d++) acc[d] *= shrink;
            S *= shrink;
            M = s;
        } else {
            w = expf(s - M);
        }
        const char * vr = (const char *) v->data + j * v->nb[1] + hk * v->nb[2];
        for (int64_t d = 0; d < D; d++) acc[d] += w * load_as_f32(vr + d * v->nb[0], v->type);
        S += w;
    }
    for (int64_t d = 0; d < D; d++) out[d] = S > 0.0f ? acc[d] / S : 0.0f;
}

void mg_compute_forward_flash_attn(const struct mg_compute_params * p, struct mg_tensor * dst) {
    const struct mg_tensor * q = dst->src[0], * k = dst->src[1], * v = dst->src[2], * mask = dst->src[3];
    const float scale = mg_get_op_param_f32(dst, 0);
    const int64_t D = q->ne[0], n_tokens = q->ne[1], n_head = q->ne[2];
    float acc[1024];
    MG_ASSERT(D <= 1024 && (mask == NULL || mask->type == MG_TYPE_F32));
    int64_t r0, r1;
    mg_split_rows(n_tokens * n_head, p->ith, p->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const int64_t t = r / n_head, h = r % n_head;
        float * out = (float *) ((char *) dst->data + h * dst->nb[1] + t * dst->nb[2]);
        attend_one(q, k, v, mask, scale, t, h, out, acc);
    }
}
