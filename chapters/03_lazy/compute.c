// Generated from full/compute.c by tools/chapgen. In a class, edit this copy freely (make chapters will not overwrite your edits); to change the engine, edit full/compute.c and run make chapters.
// compute.c - one kernel per op (ggml-cpu/ops.cpp and ggml-cpu.c).
//
// These are the plain scalar kernels: each reads its inputs through their
// strides, so it works on any view, and writes only rows [r0, r1) of its
// share. They are the reference that faster kernels are tested against.
#include "compute.h"
#include "ops.h"
#include "quants.h"
#include "arena.h"

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

// Where the scaled row is built: in the output row itself, which is then
// turned into probabilities in place (chapter 07 moves it to the work buffer).
static float * soft_max_row(const struct mg_compute_params * p, float * rd, int64_t n) {
    MG_UNUSED(p);
    MG_UNUSED(n);
    return rd;
}

// w = row ra of a, times the op's scale. (i1, the row's place in its matrix,
// picks the mask's row once chapter 06 adds a mask.)
static void soft_max_scaled_row(const struct mg_tensor * dst, const char * ra, int64_t i1, float * w) {
    const struct mg_tensor * a     = dst->src[0];
    const float              scale = mg_get_op_param_f32(dst, 0);
    MG_UNUSED(i1);
    for (int64_t i0 = 0; i0 < a->ne[0]; i0++) w[i0] = get_f32(ra, a, i0) * scale;
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

// The dot product of two float rows, accumulated in order.
static void dot_f32(int64_t n, float * s, const float * x, const float * y) {
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++) sum += x[i] * y[i];
    *s = sum;
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
    MG_ASSERT(a->type == MG_TYPE_F32 && "until chapter 07, mul_mat multiplies F32 only");
    MG_ASSERT(b->nb[0] == sizeof(float) && "rows of b must be contiguous");
    int64_t r0, r1;
    mg_split_rows(a->ne[1], p->ith, p->nth, &r0, &r1);
    for (int64_t i13 = 0; i13 < b->ne[3]; i13++) {
        for (int64_t i12 = 0; i12 < b->ne[2]; i12++) {
            for (int64_t i11 = 0; i11 < b->ne[1]; i11++) {
                const float * b_row = (const float *) row_ptr(b, i11, i12, i13);
                float * out = (float *) row_ptr(dst, i11, i12, i13);
                for (int64_t i01 = r0; i01 < r1; i01++) {
                    const char * a_row = row_ptr(a, i01, i12 / r2, i13 / r3);
                    dot_f32(a->ne[0], &out[i01], (const float *) a_row, b_row);
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
// Dispatch
// ---------------------------------------------------------------------------

// The rows a node's work is split by (threads take shares of them). No
// default: a new op must say how it splits (-Wswitch).
int64_t mg_compute_n_rows(const struct mg_tensor * t) {
    switch (t->op) {
        case MG_OP_MUL_MAT:  return t->src[0]->ne[1];
        case MG_OP_CONT:
        case MG_OP_CPY:      return mg_nelements(t);
        case MG_OP_GET_ROWS: return t->src[1]->ne[0];
        case MG_OP_NONE:
        case MG_OP_VIEW:
        case MG_OP_RESHAPE:
        case MG_OP_PERMUTE:
        case MG_OP_TRANSPOSE:
        case MG_OP_ADD:
        case MG_OP_SUB:
        case MG_OP_MUL:
        case MG_OP_DIV:
        case MG_OP_SCALE:
        case MG_OP_SQR:
        case MG_OP_SQRT:
        case MG_OP_RELU:
        case MG_OP_SILU:
        case MG_OP_GELU:
        case MG_OP_SUM_ROWS:
        case MG_OP_RMS_NORM:
        case MG_OP_SOFT_MAX: return mg_nrows(t);   // one row of the result per row
        case MG_OP_COUNT:    break;
    }
    MG_ASSERT(false && "MG_OP_COUNT is not an op");
    return 0;
}

void mg_compute_forward(const struct mg_compute_params * p, struct mg_tensor * t) {
    // No default: with -Wswitch, an op added to enum mg_op without a case
    // here is a compile error, like the static_assert on the op tables.
    switch (t->op) {
        case MG_OP_NONE:
        case MG_OP_VIEW:
        case MG_OP_RESHAPE:
        case MG_OP_PERMUTE:
        case MG_OP_TRANSPOSE: break;   // nothing to compute: the bytes are already there
        case MG_OP_ADD:
        case MG_OP_SUB:
        case MG_OP_MUL:
        case MG_OP_DIV:       forward_binary(p, t);   break;
        case MG_OP_SCALE:
        case MG_OP_SQR:
        case MG_OP_SQRT:
        case MG_OP_RELU:
        case MG_OP_SILU:
        case MG_OP_GELU:      forward_unary(p, t);    break;
        case MG_OP_SUM_ROWS:  forward_sum_rows(p, t); break;
        case MG_OP_RMS_NORM:  forward_rms_norm(p, t); break;
        case MG_OP_SOFT_MAX:  forward_soft_max(p, t); break;
        case MG_OP_MUL_MAT:   forward_mul_mat(p, t);  break;
        case MG_OP_CONT:
        case MG_OP_CPY:       forward_copy(p, t);     break;
        case MG_OP_GET_ROWS:  forward_get_rows(p, t); break;
        case MG_OP_COUNT:     MG_ASSERT(false && "MG_OP_COUNT is not an op");
    }
}

void mg_place_result(struct mg_context * ctx, struct mg_tensor * t) {
    if (t->data != NULL) return;   // placed by an earlier compute: reuse it
    if (t->view_src != NULL) {
        t->data = (char *) t->view_src->data + t->view_offs;
        return;
    }
    t->data = mg_context_alloc(ctx, MG_OBJECT_DATA, mg_nbytes(t));
    MG_ASSERT(t->data != NULL && "the context is too small for this result");
}

// Inputs first, then t itself: a depth-first walk. An input used twice is
// computed twice - wasted work, and wrong work when it is in place: with
// y = add_inplace(a, b), out = add(y, y) adds b to a twice. Nothing records
// the order either. Chapter 04's graph visits every tensor once and fixes both.
void mg_compute(struct mg_context * ctx, struct mg_tensor * t) {
    for (int i = 0; i < MG_MAX_SRC; i++) {
        if (t->src[i] != NULL) mg_compute(ctx, t->src[i]);
    }
    if (t->op == MG_OP_NONE) return;   // a leaf: its data was set by the caller
    mg_place_result(ctx, t);
    const struct mg_compute_params one_share = {.ith = 0, .nth = 1};
    mg_compute_forward(&one_share, t);
}
