// Generated from full/compute.c by tools/chapgen. In a class, edit this copy freely (make chapters will not overwrite your edits); to change the engine, edit full/compute.c and run make chapters.
// compute.c - one kernel per op (ggml-cpu/ops.cpp and ggml-cpu.c).
//
// These are the plain scalar kernels: each reads its inputs through their
// strides, so it works on any view, and writes only rows [r0, r1) of its
// share. They are the reference that faster kernels are tested against.
#include "compute.h"
#include "ops.h"
#include "quants.h"
#include "vec.h"

#include <math.h>
#include <string.h>

// ---------------------------------------------------------------------------
// Helpers: where rows live, and the exp that ggml uses.
// ---------------------------------------------------------------------------

// Row number ir of t (counting all rows of all matrices) as (i1, i2, i3).
static void unravel_row(const struct mg_tensor * t, int64_t ir, int64_t * i1, int64_t * i2, int64_t * i3) {
    *i1 = ir % t->ne[1];
    *i2 = ir / t->ne[1] % t->ne[2];
    *i3 = ir / (t->ne[1] * t->ne[2]);
}

static char * row_ptr(const struct mg_tensor * t, int64_t i1, int64_t i2, int64_t i3) {
    return (char *) t->data + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

static float get_f32(const char * row, const struct mg_tensor * t, int64_t i0) {
    return *(const float *) (row + i0 * t->nb[0]);
}

static void set_f32(char * row, const struct mg_tensor * t, int64_t i0, float v) {
    *(float *) (row + i0 * t->nb[0]) = v;
}

// A port of ggml_v_expf (ggml-cpu/vec.h, AVX-512 version), one value at a
// time. It splits x = n*ln2 + b with |b| <= ln2/2, evaluates a degree-5
// polynomial for e^b - 1, and scales by 2^n. fmaf keeps every fused step of
// the vector code fused here too; the compiler must not fuse the others
// (-ffp-contract=off), or the last bit changes.
float mg_expf(float x) {
    if (isnan(x)) return x;   // (int) NaN below would be undefined
    const float shift = 0x1.8p23f;                        // adding it rounds to an integer
    const float z = fmaf(x, 0x1.715476p+0f, shift);       // x / ln2, rounded, in the low bits
    const float n = z - shift;
    const float b = fmaf(-n, 0x1.7f7d1cp-20f, fmaf(-n, 0x1.62e4p-1f, x));   // x - n*ln2 in two parts
    const float u = b * b;
    const float j = fmaf(fmaf(fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
                         u, fmaf(0x1.ffffecp-1f, b, 1.0f));
    if (fabsf(n) > 192.0f) return n > 0.0f ? INFINITY : 0.0f;   // far out of float range
    if (fabsf(n) <= 126.0f) {
        // j * 2^n with 2^n built from its bits: exact, and no library call.
        const uint32_t bits = (uint32_t) ((int32_t) n + 127) << 23;
        float two_n;
        memcpy(&two_n, &bits, sizeof(two_n));
        return j * two_n;
    }
    return ldexpf(j, (int) n);   // results near the ends of the float range
}

// ggml's vector loops (AVX-512: 16 floats at a time) use ggml_v_expf, and the
// last n % 16 elements of a row fall to the C library's expf. Which exp an
// element gets depends on its place in the row; we do the same.
static float row_expf(float x, int64_t i, int64_t n) {
    return i < n - n % 16 ? mg_expf(x) : expf(x);
}

static float silu_f32(float x, int64_t i, int64_t n) {
    return x / (1.0f + row_expf(-x, i, n));
}

// GELU, tanh approximation (ggml_gelu_f32).
static float gelu_f32(float x) {
    const float sqrt_2_over_pi = 0.79788456080286535587989211986876f;
    return 0.5f * x * (1.0f + tanhf(sqrt_2_over_pi * x * (1.0f + 0.044715f * x * x)));
}

// ---------------------------------------------------------------------------
// Element-wise ops
// ---------------------------------------------------------------------------

static float apply_binary(enum mg_op op, float x, float y) {
    switch (op) {
        case MG_OP_ADD: return x + y;
        case MG_OP_SUB: return x - y;
        case MG_OP_MUL: return x * y;
        case MG_OP_DIV: return x / y;
        default: MG_ASSERT(false && "not a binary op");
    }
}

// Row rd of dst = row ra of a op row rb of b, element by element through the
// strides; b's row repeats over a's (its index taken modulo its length).
static void binary_row(const struct mg_tensor * dst, char * rd, const char * ra, const char * rb) {
    const struct mg_tensor * a = dst->src[0], * b = dst->src[1];
    for (int64_t i0 = 0; i0 < dst->ne[0]; i0++) {
        set_f32(rd, dst, i0, apply_binary(dst->op, get_f32(ra, a, i0), get_f32(rb, b, i0 % b->ne[0])));
    }
}

// dst = a op b, where b repeats over a (each index taken modulo b's size).
static void forward_binary(const struct mg_compute_params * p, struct mg_tensor * dst) {
    const struct mg_tensor * a = dst->src[0];
    const struct mg_tensor * b = dst->src[1];
    int64_t r0, r1;
    mg_split_rows(mg_nrows(dst), p->ith, p->nth, &r0, &r1);
    for (int64_t ir = r0; ir < r1; ir++) {
        int64_t i1, i2, i3;
        unravel_row(dst, ir, &i1, &i2, &i3);
        binary_row(dst, row_ptr(dst, i1, i2, i3), row_ptr(a, i1, i2, i3),
                   row_ptr(b, i1 % b->ne[1], i2 % b->ne[2], i3 % b->ne[3]));
    }
}

static void forward_unary(const struct mg_compute_params * p, struct mg_tensor * dst) {
    const struct mg_tensor * a = dst->src[0];
    const int64_t n = dst->ne[0];
    int64_t r0, r1;
    mg_split_rows(mg_nrows(dst), p->ith, p->nth, &r0, &r1);
    for (int64_t ir = r0; ir < r1; ir++) {
        int64_t i1, i2, i3;
        unravel_row(dst, ir, &i1, &i2, &i3);
        const char * ra = row_ptr(a, i1, i2, i3);
        char *       rd = row_ptr(dst, i1, i2, i3);
        for (int64_t i0 = 0; i0 < n; i0++) {
            const float x = get_f32(ra, a, i0);
            float y = 0.0f;
            switch (dst->op) {
                case MG_OP_SCALE: y = x * mg_get_op_param_f32(dst, 0); break;
                case MG_OP_SQR:   y = x * x;                          break;
                case MG_OP_SQRT:  y = sqrtf(x);                       break;
                case MG_OP_RELU:  y = x > 0.0f ? x : 0.0f;            break;
                case MG_OP_SILU:  y = silu_f32(x, i0, n);             break;
                case MG_OP_GELU:  y = gelu_f32(x);                    break;
                default: MG_ASSERT(false && "not a unary op");
            }
            set_f32(rd, dst, i0, y);
        }
    }
}

// ---------------------------------------------------------------------------
// Row reductions
// ---------------------------------------------------------------------------

static void forward_sum_rows(const struct mg_compute_params * p, struct mg_tensor * dst) {
    const struct mg_tensor * a = dst->src[0];
    int64_t r0, r1;
    mg_split_rows(mg_nrows(a), p->ith, p->nth, &r0, &r1);
    for (int64_t ir = r0; ir < r1; ir++) {
        int64_t i1, i2, i3;
        unravel_row(a, ir, &i1, &i2, &i3);
        const char * ra  = row_ptr(a, i1, i2, i3);
        double       sum = 0.0;   // ggml sums in ggml_float, a double
        for (int64_t i0 = 0; i0 < a->ne[0]; i0++) sum += get_f32(ra, a, i0);
        set_f32(row_ptr(dst, i1, i2, i3), dst, 0, (float) sum);
    }
}

// y = x / sqrt(mean(x^2) + eps), exactly as ggml_compute_forward_rms_norm_f32
// rounds it: squares in float, summed in double, the mean rounded to float.
static void forward_rms_norm(const struct mg_compute_params * p, struct mg_tensor * dst) {
    const struct mg_tensor * a   = dst->src[0];
    const float              eps = mg_get_op_param_f32(dst, 0);
    const int64_t            n   = a->ne[0];
    int64_t r0, r1;
    mg_split_rows(mg_nrows(a), p->ith, p->nth, &r0, &r1);
    for (int64_t ir = r0; ir < r1; ir++) {
        int64_t i1, i2, i3;
        unravel_row(a, ir, &i1, &i2, &i3);
        const char * ra  = row_ptr(a, i1, i2, i3);
        char *       rd  = row_ptr(dst, i1, i2, i3);
        double       sum = 0.0;
        for (int64_t i0 = 0; i0 < n; i0++) {
            const float x = get_f32(ra, a, i0);
            sum += (double) (x * x);
        }
        const float mean  = (float) (sum / (double) n);
        const float scale = 1.0f / sqrtf(mean + eps);
        for (int64_t i0 = 0; i0 < n; i0++) set_f32(rd, dst, i0, get_f32(ra, a, i0) * scale);
    }
}

// Where the scaled row is built: in this share's own slice of the work
// buffer, so the output row is written exactly once.
static float * soft_max_row(const struct mg_compute_params * p, float * rd, int64_t n) {
    MG_UNUSED(rd);
    return (float *) p->wdata + (size_t) p->ith * (size_t) (n + MG_CACHE_LINE / sizeof(float));
}

// w = row ra of a, times the op's scale, plus the mask's row i1 (src[1], if
// any): one mask row per row of each matrix, so row i1 of every head uses
// mask row i1. One pass reads element i0 of the input and of the mask before
// w[i0] is written, so w may sit on top of either of them.
static void soft_max_scaled_row(const struct mg_tensor * dst, const char * ra, int64_t i1, float * w) {
    const struct mg_tensor * a     = dst->src[0];
    const struct mg_tensor * mask  = dst->src[1];
    const float              scale = mg_get_op_param_f32(dst, 0);
    const char *             rm    = mask != NULL ? (const char *) mask->data + i1 * mask->nb[1] : NULL;
    for (int64_t i0 = 0; i0 < a->ne[0]; i0++) {
        float v = get_f32(ra, a, i0) * scale;
        if (rm != NULL) {
            v += mask->type == MG_TYPE_F16 ? mg_fp16_to_fp32(((const mg_fp16_t *) rm)[i0]) : ((const float *) rm)[i0];
        }
        w[i0] = v;
    }
}

// rd[i] = e^(w[i] - max); returns their sum, added in double.
static double soft_max_exp_row(int64_t n, float * rd, const float * w, float max) {
    double sum = 0.0;
    for (int64_t i0 = 0; i0 < n; i0++) {
        const float e = row_expf(w[i0] - max, i0, n);
        sum += (double) e;
        rd[i0] = e;
    }
    return sum;
}

// softmax(x * scale + mask) per row: subtract the row's max before exp so
// that no exp overflows, sum in double, multiply by the inverse
// (ggml_compute_forward_soft_max_f32).
static void forward_soft_max(const struct mg_compute_params * p, struct mg_tensor * dst) {
    const struct mg_tensor * a = dst->src[0];
    const int64_t            n = a->ne[0];
    int64_t r0, r1;
    mg_split_rows(mg_nrows(a), p->ith, p->nth, &r0, &r1);
    for (int64_t ir = r0; ir < r1; ir++) {
        int64_t i1, i2, i3;
        unravel_row(a, ir, &i1, &i2, &i3);
        const char * ra = row_ptr(a, i1, i2, i3);
        float *      rd = (float *) row_ptr(dst, i1, i2, i3);
        MG_ASSERT(dst->nb[0] == sizeof(float));
        float * w = soft_max_row(p, rd, n);
        soft_max_scaled_row(dst, ra, i1, w);
        float max = -INFINITY;
        for (int64_t i0 = 0; i0 < n; i0++) max = w[i0] > max ? w[i0] : max;   // ggml_vec_max_f32's MAX; fmaxf is a call
        const float inv_sum = (float) (1.0 / soft_max_exp_row(n, rd, w, max));
        for (int64_t i0 = 0; i0 < n; i0++) rd[i0] *= inv_sum;
    }
}

// ---------------------------------------------------------------------------
// Matrix multiplication
// ---------------------------------------------------------------------------

// Where row (i11, i12, i13) of b is found in the form the dot product wants:
// in b itself when b is already of the vec_dot_type, otherwise in the work
// buffer, where init converted all of b's rows one after another.
static const char * mul_mat_b_row(const struct mg_compute_params * p, const struct mg_tensor * b,
                                  enum mg_type vec_dot_type, int64_t i11, int64_t i12, int64_t i13) {
    if (b->type == vec_dot_type) return row_ptr(b, i11, i12, i13);
    const size_t row_size = mg_row_size(vec_dot_type, b->ne[0]);
    return (const char *) p->wdata + (size_t) ((i13 * b->ne[2] + i12) * b->ne[1] + i11) * row_size;
}

// Convert this share of b's rows (F32 activations) into the weights'
// vec_dot_type: quantized to Q8_0 for Q8_0/Q4_0 weights, rounded to F16 for
// F16 weights. Converting once here, instead of inside every dot product,
// is what the work buffer is for.
static void mul_mat_init(const struct mg_compute_params * p, struct mg_tensor * dst) {
    const struct mg_tensor *          a   = dst->src[0];
    const struct mg_tensor *          b   = dst->src[1];
    const struct mg_type_traits_cpu * cpu = mg_get_type_traits_cpu(a->type);
    if (b->type == cpu->vec_dot_type) return;
    const size_t row_size = mg_row_size(cpu->vec_dot_type, b->ne[0]);
    MG_ASSERT(b->nb[0] == sizeof(float));
    MG_ASSERT(p->wsize >= row_size * (size_t) mg_nrows(b));
    int64_t r0, r1;
    mg_split_rows(mg_nrows(b), p->ith, p->nth, &r0, &r1);
    for (int64_t ir = r0; ir < r1; ir++) {
        int64_t i1, i2, i3;
        unravel_row(b, ir, &i1, &i2, &i3);
        cpu->from_float((const float *) row_ptr(b, i1, i2, i3), (char *) p->wdata + (size_t) ir * row_size, b->ne[0]);
    }
}

// dst[i, j] = dot(row i of a, row j of b), for every matrix. a's matrix i02
// serves b's matrices i02*r2 .. i02*r2 + r2-1 (broadcasting, as in GQA).
// Each share takes whole rows of a, so a dot product is never split between
// threads and the result does not depend on the thread count.
static void forward_mul_mat(const struct mg_compute_params * p, struct mg_tensor * dst) {
    const struct mg_tensor * a = dst->src[0];
    const struct mg_tensor * b = dst->src[1];
    const int64_t r2 = b->ne[2] / a->ne[2];
    const int64_t r3 = b->ne[3] / a->ne[3];
    MG_ASSERT(a->nb[0] == mg_type_size(a->type) && "rows of a must be contiguous");
    const struct mg_type_traits_cpu * cpu = mg_get_type_traits_cpu(a->type);
    MG_ASSERT(cpu != NULL && cpu->vec_dot != NULL && "no dot product for this weight type");
    int64_t r0, r1;
    mg_split_rows(a->ne[1], p->ith, p->nth, &r0, &r1);
    for (int64_t i13 = 0; i13 < b->ne[3]; i13++) {
        for (int64_t i12 = 0; i12 < b->ne[2]; i12++) {
            for (int64_t i11 = 0; i11 < b->ne[1]; i11++) {
                const char * b_row = mul_mat_b_row(p, b, cpu->vec_dot_type, i11, i12, i13);
                float * out = (float *) row_ptr(dst, i11, i12, i13);
                for (int64_t i01 = r0; i01 < r1; i01++) {
                    const char * a_row = row_ptr(a, i01, i12 / r2, i13 / r3);
                    cpu->vec_dot(a->ne[0], &out[i01], a_row, b_row);
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Copies and lookups
// ---------------------------------------------------------------------------

// Copy one element of a plain type (F32, F16, I32) into dst's type.
static void convert_element(const char * src, enum mg_type src_type, char * dst, enum mg_type dst_type) {
    if (src_type == dst_type) {
        memcpy(dst, src, mg_type_size(src_type));
    } else if (src_type == MG_TYPE_F32 && dst_type == MG_TYPE_F16) {
        *(mg_fp16_t *) dst = mg_fp32_to_fp16(*(const float *) src);
    } else if (src_type == MG_TYPE_F16 && dst_type == MG_TYPE_F32) {
        *(float *) dst = mg_fp16_to_fp32(*(const mg_fp16_t *) src);
    } else {
        MG_ASSERT(false && "no conversion between these types");
    }
}

// Element k of t in logical order (i0 fastest), wherever its strides put it.
static char * element_in_order(const struct mg_tensor * t, int64_t k) {
    const int64_t i0 = k % t->ne[0];
    k /= t->ne[0];
    const int64_t i1 = k % t->ne[1];
    k /= t->ne[1];
    const int64_t i2 = k % t->ne[2];
    const int64_t i3 = k / t->ne[2];
    return (char *) mg_element_ptr(t, i0, i1, i2, i3);
}

// cont and cpy are the same loop: element k of the source goes to element k
// of the destination, both counted in logical order, so the shapes may differ
// as long as the counts agree (a {4, 3} tensor copies into a {12} view).
static void copy_elements(const struct mg_compute_params * p, const struct mg_tensor * src, struct mg_tensor * dst) {
    int64_t k0, k1;
    mg_split_rows(mg_nelements(dst), p->ith, p->nth, &k0, &k1);
    for (int64_t k = k0; k < k1; k++) {
        convert_element(element_in_order(src, k), src->type, element_in_order(dst, k), dst->type);
    }
}

static void forward_copy(const struct mg_compute_params * p, struct mg_tensor * dst) {
    const struct mg_tensor * src = dst->src[0];
    MG_ASSERT(mg_blck_size(src->type) == 1 && mg_blck_size(dst->type) == 1 && "copies of plain types only");
    copy_elements(p, src, dst);
}

// Row ids[k] of a, decoded to F32, becomes row k of dst: the embedding lookup.
static void forward_get_rows(const struct mg_compute_params * p, struct mg_tensor * dst) {
    const struct mg_tensor *      a   = dst->src[0];
    const struct mg_tensor *      ids = dst->src[1];
    const struct mg_type_traits * tt  = mg_get_type_traits(a->type);
    MG_ASSERT(tt->to_float != NULL && a->nb[0] == tt->type_size);
    int64_t k0, k1;
    mg_split_rows(ids->ne[0], p->ith, p->nth, &k0, &k1);
    for (int64_t k = k0; k < k1; k++) {
        const int32_t row = *(const int32_t *) ((const char *) ids->data + k * ids->nb[0]);
        MG_ASSERT(row >= 0 && row < a->ne[1] && "get_rows: row index out of range");
        tt->to_float(row_ptr(a, row, 0, 0), (float *) row_ptr(dst, k, 0, 0), a->ne[0]);
    }
}

// ---------------------------------------------------------------------------
// RoPE
// ---------------------------------------------------------------------------

// cos and sin of every pair's angle for one position. The angles are built
// the way ggml_rope_cache_init builds them, by repeated multiplication in
// float (theta_{i+1} = theta_i * theta_scale), not by pow per pair: the
// rounding of this recurrence is part of what llama.cpp computes.
static void rope_angles(float pos, int n_rot, float freq_base, float freq_scale, float * cos_out, float * sin_out) {
    const float theta_scale = powf(freq_base, -2.0f / (float) n_rot);
    float theta = pos;
    for (int i = 0; i < n_rot / 2; i++) {
        cos_out[i] = cosf(theta * freq_scale);
        sin_out[i] = sinf(theta * freq_scale);
        theta *= theta_scale;
    }
}

// The angles of one token's position, from the node's parameters.
static void rope_token_angles(const struct mg_tensor * dst, int32_t position, float * cos_t, float * sin_t) {
    rope_angles((float) position, mg_get_op_param_i32(dst, 0), mg_get_op_param_f32(dst, 2),
                mg_get_op_param_f32(dst, 3), cos_t, sin_t);
}

// Rotate each pair (x0, x1) by its angle: (x0 cos - x1 sin, x0 sin + x1 cos),
// each with one rounding less than written: llama.cpp's build lets GCC fuse
// x0 cos with the subtraction and x0 sin with the addition (its default
// -ffp-contract=fast; ours is off, so the fusions are spelled out with fmaf).
// Unfused, 1 in 5 outputs is 1 ulp away, enough to flip a later rounding.
// NEOX pairs element i with i + n_rot/2; NORMAL pairs 2i with 2i+1. The
// elements past n_rot are copied as they are.
static void rope_row_strided(const struct mg_tensor * dst, const char * ra, char * rd, const float * cos_t,
                             const float * sin_t) {
    const struct mg_tensor * a     = dst->src[0];
    const int                n_rot = mg_get_op_param_i32(dst, 0);
    const int                mode  = mg_get_op_param_i32(dst, 1);
    const int                half  = n_rot / 2;
    for (int i = 0; i < half; i++) {
        const int64_t j0 = mode == MG_ROPE_NEOX ? i : 2 * i;
        const int64_t j1 = mode == MG_ROPE_NEOX ? i + half : 2 * i + 1;
        const float   x0 = get_f32(ra, a, j0);
        const float   x1 = get_f32(ra, a, j1);
        // As ggml's rotate_pairs compiles (GCC contracts it to fused multiply-adds).
        set_f32(rd, dst, j0, fmaf(x0, cos_t[i], -(x1 * sin_t[i])));
        set_f32(rd, dst, j1, fmaf(x0, sin_t[i], x1 * cos_t[i]));
    }
    for (int64_t i0 = n_rot; i0 < a->ne[0]; i0++) set_f32(rd, dst, i0, get_f32(ra, a, i0));
}

// One row. Here every row goes through the strides; full/ gives packed NEOX
// rows a vector loop in this place.
static void rope_row(const struct mg_tensor * dst, const char * ra, char * rd, const float * cos_t,
                     const float * sin_t) {
    rope_row_strided(dst, ra, rd, cos_t, sin_t);
}

// RoPE: every row of a is a head of one token (i2), turned by the angles of
// that token's position; a share's rows come token after token, so each
// token's angles are computed once.
static void forward_rope(const struct mg_compute_params * p, struct mg_tensor * dst) {
    const struct mg_tensor * a   = dst->src[0];
    const struct mg_tensor * pos = dst->src[1];
    float cos_t[512], sin_t[512];
    MG_ASSERT(mg_get_op_param_i32(dst, 0) / 2 <= 512);
    int64_t r0, r1;
    mg_split_rows(mg_nrows(a), p->ith, p->nth, &r0, &r1);
    int64_t angles_for = -1;   // the token whose angles are in cos_t/sin_t
    for (int64_t ir = r0; ir < r1; ir++) {
        int64_t i1, i2, i3;
        unravel_row(a, ir, &i1, &i2, &i3);
        if (i2 != angles_for) {
            rope_token_angles(dst, *(const int32_t *) ((const char *) pos->data + i2 * pos->nb[0]), cos_t, sin_t);
            angles_for = i2;
        }
        rope_row(dst, row_ptr(a, i1, i2, i3), row_ptr(dst, i1, i2, i3), cos_t, sin_t);
    }
}

// Row rs of src, converted element by element to dst's type, into row rd of dst.
static void set_row(const struct mg_tensor * src, const struct mg_tensor * dst, const char * rs, char * rd) {
    for (int64_t i0 = 0; i0 < src->ne[0]; i0++) {
        convert_element(rs + i0 * src->nb[0], src->type, rd + i0 * dst->nb[0], dst->type);
    }
}

// Rows r0..r1 of src, converted to dst's type, into rows idx[r] of dst,
// one row at a time.
static void set_rows_one_by_one(const struct mg_tensor * src, struct mg_tensor * dst, const int32_t * idx, int64_t r0,
                                int64_t r1) {
    int64_t i1, i2, i3;
    unravel_row(src, r0, &i1, &i2, &i3);   // then step: the transposed V store has a row per element
    for (int64_t r = r0; r < r1; r++) {
        MG_ASSERT(idx[r] >= 0 && idx[r] < dst->ne[1] && "set_rows: row index out of range");
        set_row(src, dst, row_ptr(src, i1, i2, i3), row_ptr(dst, idx[r], 0, 0));
        if (++i1 == src->ne[1]) {
            i1 = 0;
            if (++i2 == src->ne[2]) i2 = 0, i3++;
        }
    }
}
// Row r of src, converted to dst's type, into row idx[r] of dst.
static void forward_set_rows(const struct mg_compute_params * p, struct mg_tensor * dst) {
    int64_t r0, r1;
    mg_split_rows(mg_nrows(dst->src[0]), p->ith, p->nth, &r0, &r1);
    set_rows_one_by_one(dst->src[0], dst, (const int32_t *) dst->src[1]->data, r0, r1);
}

// ---------------------------------------------------------------------------
// Dispatch
// ---------------------------------------------------------------------------

// From chapter 06 on, every chapter adds ops (RoPE here, set_rows in 09,
// full/'s fused ones), so the ops are a table, an op a row: its kernel (the
// case of ggml_compute_forward's switch) and the rows its work is split by
// (threads take shares of them). A new op without a row stops at
// op_kernel_of with its name.
static void forward_nothing(const struct mg_compute_params * p, struct mg_tensor * t) {
    MG_UNUSED(p);   // a view or a leaf: the bytes are already there
    MG_UNUSED(t);
}

static int64_t weight_rows(const struct mg_tensor * t) { return t->src[0]->ne[1]; }   // mul_mat: rows of a
static int64_t index_count(const struct mg_tensor * t) { return t->src[1]->ne[0]; }   // get_rows: one row per index
static int64_t source_rows(const struct mg_tensor * t) { return mg_nrows(t->src[0]); }   // set_rows: rows of src

struct op_kernel {
    void    (*forward)(const struct mg_compute_params * p, struct mg_tensor * t);
    int64_t (*n_rows)(const struct mg_tensor * t);
};

static const struct op_kernel op_kernels[MG_OP_COUNT] = {
    [MG_OP_NONE]      = {forward_nothing, mg_nrows},
    [MG_OP_VIEW]      = {forward_nothing, mg_nrows},
    [MG_OP_RESHAPE]   = {forward_nothing, mg_nrows},
    [MG_OP_PERMUTE]   = {forward_nothing, mg_nrows},
    [MG_OP_TRANSPOSE] = {forward_nothing, mg_nrows},
    [MG_OP_ADD]       = {forward_binary, mg_nrows},   // mg_nrows: one row of the result per row
    [MG_OP_SUB]       = {forward_binary, mg_nrows},
    [MG_OP_MUL]       = {forward_binary, mg_nrows},
    [MG_OP_DIV]       = {forward_binary, mg_nrows},
    [MG_OP_SCALE]     = {forward_unary, mg_nrows},
    [MG_OP_SQR]       = {forward_unary, mg_nrows},
    [MG_OP_SQRT]      = {forward_unary, mg_nrows},
    [MG_OP_RELU]      = {forward_unary, mg_nrows},
    [MG_OP_SILU]      = {forward_unary, mg_nrows},
    [MG_OP_GELU]      = {forward_unary, mg_nrows},
    [MG_OP_SUM_ROWS]  = {forward_sum_rows, mg_nrows},
    [MG_OP_RMS_NORM]  = {forward_rms_norm, mg_nrows},
    [MG_OP_SOFT_MAX]  = {forward_soft_max, mg_nrows},
    [MG_OP_MUL_MAT]   = {forward_mul_mat, weight_rows},
    [MG_OP_CONT]      = {forward_copy, mg_nelements},
    [MG_OP_CPY]       = {forward_copy, mg_nelements},
    [MG_OP_GET_ROWS]  = {forward_get_rows, index_count},
    [MG_OP_ROPE]      = {forward_rope, mg_nrows},
    [MG_OP_SET_ROWS]  = {forward_set_rows, source_rows},
};

static const struct op_kernel * op_kernel_of(const struct mg_tensor * t) {
    const bool known = (unsigned) t->op < MG_OP_COUNT && op_kernels[t->op].forward != NULL;
    if (!known) mg_abort(__FILE__, __LINE__, "compute.c has no kernel for op %s (a row in op_kernels[])", mg_op_name(t->op));
    return &op_kernels[t->op];
}

int64_t mg_compute_n_rows(const struct mg_tensor * t) {
    return op_kernel_of(t)->n_rows(t);
}

void mg_compute_forward(const struct mg_compute_params * p, struct mg_tensor * t) {
    op_kernel_of(t)->forward(p, t);
}

bool mg_compute_needs_init(const struct mg_tensor * t) {
    if (t->op != MG_OP_MUL_MAT) return false;
    const struct mg_type_traits_cpu * cpu = mg_get_type_traits_cpu(t->src[0]->type);
    return cpu != NULL && t->src[1]->type != cpu->vec_dot_type;
}

void mg_compute_forward_init(const struct mg_compute_params * p, struct mg_tensor * t) {
    if (t->op == MG_OP_MUL_MAT) mul_mat_init(p, t);
}
