//@file 03
// compute.c - one kernel per op (ggml-cpu/ops.cpp and ggml-cpu.c).
//
// These are the plain scalar kernels: each reads its inputs through their
// strides, so it works on any view, and writes only rows [r0, r1) of its
// share. They are the reference that faster kernels are tested against.
#include "compute.h"
#include "ops.h"
#include "quants.h"
//@+ 07 vec-include
#include "vec.h"
//@- 07 vec-include
//@+ full ops-simd
#include "ops_simd.h"
//@- full ops-simd
//@+ full repack
#include "repack.h"
//@- full repack
//@+ full gemm-float
#include "gemm_float.h"
//@- full gemm-float
#if 0 //@old 03..04 naive-data
#include "arena.h"
#endif //@old naive-data

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

#if 0 //@old 03..09 binary-row
// Row rd of dst = row ra of a op row rb of b, element by element through the
// strides; b's row repeats over a's (its index taken modulo its length).
static void binary_row(const struct mg_tensor * dst, char * rd, const char * ra, const char * rb) {
    const struct mg_tensor * a = dst->src[0], * b = dst->src[1];
    for (int64_t i0 = 0; i0 < dst->ne[0]; i0++) {
        set_f32(rd, dst, i0, apply_binary(dst->op, get_f32(ra, a, i0), get_f32(rb, b, i0 % b->ne[0])));
    }
}
#endif //@old binary-row
//@+ full contiguous-rows
// The common case, rows of packed floats and b as long as a: one tight loop
// per op that the compiler turns into vector code (the general loop asks
// which op it is for every element).
static bool rows_are_packed(const struct mg_tensor * a, const struct mg_tensor * b, const struct mg_tensor * dst) {
    return a->nb[0] == sizeof(float) && dst->nb[0] == sizeof(float) &&
           (b == NULL || (b->nb[0] == sizeof(float) && b->ne[0] == dst->ne[0]));
}

static void binary_row_packed(enum mg_op op, int64_t n, float * d, const float * x, const float * y) {
    switch (op) {
        case MG_OP_ADD: for (int64_t i = 0; i < n; i++) d[i] = x[i] + y[i]; break;
        case MG_OP_SUB: for (int64_t i = 0; i < n; i++) d[i] = x[i] - y[i]; break;
        case MG_OP_MUL: for (int64_t i = 0; i < n; i++) d[i] = x[i] * y[i]; break;
        case MG_OP_DIV: for (int64_t i = 0; i < n; i++) d[i] = x[i] / y[i]; break;
        default: MG_ASSERT(false && "not a binary op");
    }
}

// Row rd of dst = row ra of a op row rb of b: packed rows by the tight
// loops above, any other layout element by element through the strides, b's
// row repeating over a's (its index taken modulo its length).
static void binary_row(const struct mg_tensor * dst, char * rd, const char * ra, const char * rb) {
    const struct mg_tensor * a = dst->src[0], * b = dst->src[1];
    if (rows_are_packed(a, b, dst)) {
        binary_row_packed(dst->op, dst->ne[0], (float *) rd, (const float *) ra, (const float *) rb);
        return;
    }
    for (int64_t i0 = 0; i0 < dst->ne[0]; i0++) {
        set_f32(rd, dst, i0, apply_binary(dst->op, get_f32(ra, a, i0), get_f32(rb, b, i0 % b->ne[0])));
    }
}
//@- full contiguous-rows

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

#if 0 //@old 03..06 soft-max-row
// Where the scaled row is built: in the output row itself, which is then
// turned into probabilities in place (chapter 07 moves it to the work buffer).
static float * soft_max_row(const struct mg_compute_params * p, float * rd, int64_t n) {
    MG_UNUSED(p);
    MG_UNUSED(n);
    return rd;
}
#endif //@old soft-max-row
//@+ 07 soft-max-row
// Where the scaled row is built: in this share's own slice of the work
// buffer, so the output row is written exactly once.
static float * soft_max_row(const struct mg_compute_params * p, float * rd, int64_t n) {
    MG_UNUSED(rd);
    return (float *) p->wdata + (size_t) p->ith * (size_t) (n + MG_CACHE_LINE / sizeof(float));
}
//@- 07 soft-max-row

#if 0 //@old 03..05 soft-max-scale
// w = row ra of a, times the op's scale. (i1, the row's place in its matrix,
// picks the mask's row once chapter 06 adds a mask.)
static void soft_max_scaled_row(const struct mg_tensor * dst, const char * ra, int64_t i1, float * w) {
    const struct mg_tensor * a     = dst->src[0];
    const float              scale = mg_get_op_param_f32(dst, 0);
    MG_UNUSED(i1);
    for (int64_t i0 = 0; i0 < a->ne[0]; i0++) w[i0] = get_f32(ra, a, i0) * scale;
}
#endif //@old soft-max-scale
//@+ 06 soft-max-mask
#if 0 //@old 06..09 soft-max-mask-2d
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
#endif //@old soft-max-mask-2d
//@+ full soft-max-mask-4d
// w = row ra of a, times the op's scale, plus the mask's row (src[1], if
// any). As in ggml, the mask is {n, rows, m2, m3} and broadcast over a's
// matrices: row i1 of matrix (i2, i3) adds mask row i1 of matrix
// (i2 % m2, i3 % m3). A mask of one matrix serves every head, as in
// chapter 06; per-sequence streams give each stream a matrix of its own,
// shared by the stream's heads (llama.cpp: kq_mask {n_kv, n_tps, 1, n_stream}).
static void soft_max_scaled_row(const struct mg_tensor * dst, const char * ra, int64_t i1, int64_t i2, int64_t i3,
                                float * w) {
    const struct mg_tensor * a     = dst->src[0];
    const struct mg_tensor * mask  = dst->src[1];
    const float              scale = mg_get_op_param_f32(dst, 0);
    const int64_t            n     = a->ne[0];
    if (mask == NULL) {
        for (int64_t i0 = 0; i0 < n; i0++) w[i0] = get_f32(ra, a, i0) * scale;
        return;
    }
    // The mask row first, as floats, into w (from chapter 07 on, w is the
    // work buffer's and overlaps neither row), then each element scaled and
    // its mask added, as one pass would: a row at a time, the F16 mask turns
    // to floats in SIMD instead of through a call per element.
    const char * rm = row_ptr(mask, i1, i2 % mask->ne[2], i3 % mask->ne[3]);
    if (mask->type == MG_TYPE_F16) {
#ifdef MG_SIMD
        mg_fp16_to_fp32_row_simd(rm, w, n);   // the same floats, 8 at a time
#else
        mg_fp16_to_fp32_row(rm, w, n);
#endif
    } else {
        memcpy(w, rm, (size_t) n * sizeof(float));
    }
    if (a->nb[0] == sizeof(float)) {   // packed rows (every kq): a loop the compiler turns to SIMD
        const float * x = (const float *) ra;
        for (int64_t i0 = 0; i0 < n; i0++) w[i0] = x[i0] * scale + w[i0];
        return;
    }
    for (int64_t i0 = 0; i0 < n; i0++) w[i0] = get_f32(ra, a, i0) * scale + w[i0];
}
//@- full soft-max-mask-4d
//@- 06 soft-max-mask

#if 0 //@old 03..09 soft-max-exp
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
#endif //@old soft-max-exp
//@+ full soft-max-exp
// rd[i] = e^(w[i] - max) with the level's exp (ops_simd.h), eight lanes at a
// time; returns their sum. ggml_vec_soft_max_f32 adds each vector of exps in
// float (16 on AVX-512, 8 on AVX2: MG_GGML_LANES), and only those sums in
// double; the last n % lanes one by one. Summing all of them in double
// instead is 1 ulp away in 1 of ~30 probabilities, which matters
// (docs/numerics.md).
static double soft_max_exp_row(int64_t n, float * rd, const float * w, float max) {
    mg_exp_row(n, rd, w, max);
    double  sum = 0.0;
    int64_t i0  = 0;
    for (; i0 + MG_GGML_LANES <= n; i0 += MG_GGML_LANES) sum += (double) mg_level_sum_lanes(rd + i0);
    for (; i0 < n; i0++) sum += (double) rd[i0];
    return sum;
}
//@- full soft-max-exp

#if 0 //@old 03..09 forward-soft-max
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
#endif //@old forward-soft-max
//@+ full soft-max-mask-4d
// The largest of w's n values (ggml_vec_max_f32, whose MAX is a > b ? a : b;
// fmaxf is a call). The largest is the largest in any order, so 8 running
// maxima side by side, which the compiler keeps in one register, instead of
// one chain of n compares.
static float row_max(const float * w, int64_t n) {
    float   m[8] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    int64_t i0   = 0;
    for (; i0 + 8 <= n; i0 += 8) {
        for (int j = 0; j < 8; j++) m[j] = w[i0 + j] > m[j] ? w[i0 + j] : m[j];
    }
    for (; i0 < n; i0++) m[0] = w[i0] > m[0] ? w[i0] : m[0];
    float max = m[0];
    for (int j = 1; j < 8; j++) max = m[j] > max ? m[j] : max;
    return max;
}

// softmax(x * scale + mask) per row: subtract the row's max before exp so
// that no exp overflows, sum in double, multiply by the inverse
// (ggml_compute_forward_soft_max_f32). In full/ the mask row depends on the
// matrix too (soft_max_scaled_row).
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
        soft_max_scaled_row(dst, ra, i1, i2, i3, w);
        const float inv_sum = (float) (1.0 / soft_max_exp_row(n, rd, w, row_max(w, n)));
        for (int64_t i0 = 0; i0 < n; i0++) rd[i0] *= inv_sum;
    }
}
//@- full soft-max-mask-4d

// ---------------------------------------------------------------------------
// Matrix multiplication
// ---------------------------------------------------------------------------

#if 0 //@old 03..06 dot-f32
// The dot product of two float rows, accumulated in order.
static void dot_f32(int64_t n, float * s, const float * x, const float * y) {
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++) sum += x[i] * y[i];
    *s = sum;
}
#endif //@old dot-f32

//@+ 07 mul-mat-init
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
//@- 07 mul-mat-init

//@+ full mul-mat-tiled
// full/ computes every product in tiles of up to 8 weight rows x 4 columns
// (vec_dot_tile): the kernel loads and unpacks each weight block once for all
// the tile's columns and each activation block once for all its rows. Each
// output element is still, to the bit, the one dot product vec_dot computes,
// so a batch gives the logits of one token at a time, and the thread count
// never changes a result. (Float weights with 2 or more columns go to
// mul_mat_gemm_float below instead, in llama.cpp's batch order.)
//
// Around the tiles, the loops keep both operands in cache. A share (its rows
// of a, whole tiles) is walked in blocks of rows that stay in L2; each block
// meets every group of 4 columns, and each group, once in L1, serves all the
// tiles of the block. (On the bench machine, with 1 MB of L2 and 32 KB of L1
// per core, blocks of 128 KB of weights made pp64 3-10% faster than blocks
// that fit L1, and 512 KB slower again.) One token (one column) just walks
// the rows, 8 at a time, reading every weight once.
enum { MUL_MAT_TILE_ROWS = MG_VEC_DOT_MAX_ROWS, MUL_MAT_TILE_COLS = MG_VEC_DOT_MAX_COLS };
#define MUL_MAT_BLOCK_BYTES (128 * 1024)   // the weight rows of a row block

static int64_t min_i64(int64_t x, int64_t y) {
    return x < y ? x : y;
}

// This share's rows of a: whole tiles, split as evenly as the tiles allow.
static void mul_mat_share(int64_t n_rows, const struct mg_compute_params * p, int64_t * r0, int64_t * r1) {
    int64_t t0, t1;
    mg_split_rows((n_rows + MUL_MAT_TILE_ROWS - 1) / MUL_MAT_TILE_ROWS, p->ith, p->nth, &t0, &t1);
    *r0 = min_i64(t0 * MUL_MAT_TILE_ROWS, n_rows);
    *r1 = min_i64(t1 * MUL_MAT_TILE_ROWS, n_rows);
}

// What both kernels below (mul_mat_tiled, mul_mat_gemm_float) start from:
// the operands, how b's matrices share a's, where consecutive columns of b
// are, and this thread's share of a's rows.
struct mul_mat_job {
    const struct mg_tensor * a, * b;
    int64_t r2, r3;      // b's matrices per matrix of a, in dims 2 and 3 (broadcasting, as in GQA)
    size_t  y_stride;    // from one column of a matrix of b to the next, in vec_dot's type
    int64_t r0, r1;      // this share's rows of a
};

static struct mul_mat_job mul_mat_job_of(const struct mg_compute_params * p, const struct mg_tensor * dst,
                                         const struct mg_type_traits_cpu * cpu) {
    const struct mg_tensor * a = dst->src[0];
    const struct mg_tensor * b = dst->src[1];
    MG_ASSERT(dst->nb[0] == sizeof(float) && dst->nb[1] % sizeof(float) == 0);
    struct mul_mat_job job = {.a = a, .b = b, .r2 = b->ne[2] / a->ne[2], .r3 = b->ne[3] / a->ne[3]};
    // Converted rows are packed in the work buffer; rows already of the right
    // type are b's own.
    job.y_stride = b->type == cpu->vec_dot_type ? b->nb[1] : mg_row_size(cpu->vec_dot_type, b->ne[0]);
    mul_mat_share(a->ne[1], p, &job.r0, &job.r1);
    return job;
}

static void mul_mat_tiled(const struct mg_compute_params * p, struct mg_tensor * dst,
                          const struct mg_type_traits_cpu * cpu) {
    const struct mul_mat_job job = mul_mat_job_of(p, dst, cpu);
    const struct mg_tensor * a = job.a, * b = job.b;
    const int64_t r2 = job.r2, r3 = job.r3, r0 = job.r0, r1 = job.r1;
    const size_t  y_stride = job.y_stride;
    const size_t  s_stride = dst->nb[1] / sizeof(float);   // from one column's results to the next
    const size_t  tile     = MUL_MAT_TILE_ROWS * mg_row_size(a->type, a->ne[0]);   // bytes of a tile's rows
    const int64_t tiles    = tile < MUL_MAT_BLOCK_BYTES ? (int64_t) (MUL_MAT_BLOCK_BYTES / tile) : 1;
    const int64_t block    = MUL_MAT_TILE_ROWS * tiles;   // rows of a row block
    for (int64_t i13 = 0; i13 < b->ne[3]; i13++) {
        for (int64_t i12 = 0; i12 < b->ne[2]; i12++) {
            for (int64_t ib = r0; ib < r1; ib += block) {
                const int64_t ie = min_i64(ib + block, r1);
                // With several groups of columns, each tile call also asks for
                // a slice of the next row block, so that block is in cache when
                // its turn comes instead of arriving from memory during its
                // first group (on the bench machine, F16 and F32 rows of 768,
                // weights larger than L3: ~10% faster). Not for one column,
                // which only streams the rows once.
                const bool    ahead   = b->ne[1] > MUL_MAT_TILE_COLS && ie < r1 && a->repacked == NULL;
                const char *  next    = ahead ? row_ptr(a, ie, i12 / r2, i13 / r3) : NULL;
                const size_t  n_next  = ahead ? (size_t) (min_i64(ie + block, r1) - ie) * a->nb[1] : 0;
                const int64_t n_tiles = (ie - ib + MUL_MAT_TILE_ROWS - 1) / MUL_MAT_TILE_ROWS;
                const int64_t calls   = n_tiles * ((b->ne[1] + MUL_MAT_TILE_COLS - 1) / MUL_MAT_TILE_COLS);
                const size_t  slice   = (n_next / (size_t) calls + 63) & ~(size_t) 63;   // whole cache lines
                size_t        fetched = 0;
                for (int64_t j = 0; j < b->ne[1]; j += MUL_MAT_TILE_COLS) {
                    const int    n_cols = (int) min_i64(b->ne[1] - j, MUL_MAT_TILE_COLS);
                    const char * y      = mul_mat_b_row(p, b, cpu->vec_dot_type, j, i12, i13);
                    float *      s      = (float *) row_ptr(dst, j, i12, i13);
                    // A panel (vec.h) takes many tiles in one call where the
                    // kernel has one: it shares the columns' work between them.
                    const bool    panel = cpu->vec_dot_panel != NULL && n_cols > 1 && a->repacked == NULL;
                    const int64_t step  = panel ? MG_VEC_DOT_PANEL_ROWS : MUL_MAT_TILE_ROWS;
                    for (int64_t i01 = ib; i01 < ie; i01 += step) {
                        const int    n_rows = (int) min_i64(ie - i01, step);
                        const size_t ask    = slice * (size_t) ((n_rows + MUL_MAT_TILE_ROWS - 1) / MUL_MAT_TILE_ROWS);
                        for (size_t end = fetched + ask; fetched < end && fetched < n_next; fetched += 64) {
                            __builtin_prefetch(next + fetched);
                        }
                        // Q4_0/Q4_K/Q2_K in groups of 8 rows (repack.c): tiles are whole. The
                        // columns go in groups of 4 from j = 0, so a 4-column tile is one of
                        // llama.cpp's gemm groups and a smaller one its gemv rest (repack.c).
                        if (a->repacked != NULL) {
                            MG_ASSERT(n_rows == MUL_MAT_TILE_ROWS);
                            const size_t at = (size_t) i01 * a->nb[1] + (size_t) (i12 / r2) * a->nb[2] +
                                              (size_t) (i13 / r3) * a->nb[3];   // the group starts where row i01 did
                            mg_repack_tile(a->type, a->ne[0], s + i01, s_stride, (const char *) a->repacked + at, y,
                                           y_stride, n_cols);
                            continue;
                        }
                        (panel ? cpu->vec_dot_panel : cpu->vec_dot_tile)(a->ne[0], s + i01, s_stride,
                                                                         row_ptr(a, i01, i12 / r2, i13 / r3),
                                                                         a->nb[1], n_rows, y, y_stride, n_cols);
                    }
                }
            }
        }
    }
}
//@- full mul-mat-tiled

//@+ full gemm-float
// Float weights (F32, F16, BF16) and a batch of columns: where llama.cpp's
// mul_mat hands the product to llamafile_sgemm, so do we (gemm_float.c), and
// the outputs are added in tinyBLAS's order instead of vec_dot's. Its
// conditions: the columns in the weights' type, read where tinyBLAS reads
// them (b itself only when it is contiguous; converted rows are always packed
// in the work buffer), n >= 2, k a multiple of its step, m of 4. Anything
// else goes to the tiles above, vec_dot's order, as llama.cpp falls back to
// its own loop over vec_dot.
static bool mul_mat_takes_gemm_float(const struct mg_tensor * a, const struct mg_tensor * b,
                                     const struct mg_type_traits_cpu * cpu) {
    if (cpu->vec_dot_type != a->type) return false;   // quantized weights: not this kernel
    if (b->type != cpu->vec_dot_type && b->type != MG_TYPE_F32) return false;
    if (b->type == cpu->vec_dot_type && !mg_is_contiguous(b)) return false;
    return mg_gemm_float_applies(a->type, a->ne[1], b->ne[1], a->ne[0]);
}

// Each share takes whole tiles of rows (mul_mat_share: multiples of 8), for
// every matrix, so no output is split between threads.
static void mul_mat_gemm_float(const struct mg_compute_params * p, struct mg_tensor * dst,
                               const struct mg_type_traits_cpu * cpu) {
    const struct mul_mat_job job = mul_mat_job_of(p, dst, cpu);
    const struct mg_tensor * a = job.a, * b = job.b;
    for (int64_t i13 = 0; i13 < b->ne[3]; i13++) {
        for (int64_t i12 = 0; i12 < b->ne[2]; i12++) {
            mg_gemm_float(a->type, a->ne[0], row_ptr(a, 0, i12 / job.r2, i13 / job.r3), a->nb[1], job.r0, job.r1,
                          mul_mat_b_row(p, b, cpu->vec_dot_type, 0, i12, i13), job.y_stride, b->ne[1],
                          (float *) row_ptr(dst, 0, i12, i13), dst->nb[1] / sizeof(float));
        }
    }
}
//@- full gemm-float

// dst[i, j] = dot(row i of a, row j of b), for every matrix. a's matrix i02
// serves b's matrices i02*r2 .. i02*r2 + r2-1 (broadcasting, as in GQA).
// Each share takes whole rows of a, so a dot product is never split between
// threads and the result does not depend on the thread count.
#if 0 //@old 03..06 mul-mat-f32
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
#endif //@old mul-mat-f32
#if 0 //@old 07..09 mul-mat-rows
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
#endif //@old mul-mat-rows
//@+ full mul-mat-tiled
// full/ keeps the contract and changes the walk: float weights with a batch
// of columns go to tinyBLAS's order (mul_mat_gemm_float), everything else to
// tiles of 8 rows x 4 columns (mul_mat_tiled); both take b, the broadcast
// ratios and each share's whole tiles of rows themselves.
static void forward_mul_mat(const struct mg_compute_params * p, struct mg_tensor * dst) {
    const struct mg_tensor * a = dst->src[0];
    MG_ASSERT(a->nb[0] == mg_type_size(a->type) && "rows of a must be contiguous");
    const struct mg_type_traits_cpu * cpu = mg_get_type_traits_cpu(a->type);
    MG_ASSERT(cpu != NULL && cpu->vec_dot != NULL && "no dot product for this weight type");
    if (mul_mat_takes_gemm_float(a, dst->src[1], cpu)) {
        mul_mat_gemm_float(p, dst, cpu);
        return;
    }
    mul_mat_tiled(p, dst, cpu);
}
//@- full mul-mat-tiled

//@+ full moe
// ---------------------------------------------------------------------------
// Mixture of experts: argsort, clamp, mul_mat_id
// ---------------------------------------------------------------------------

// Does index x come before index y in the row v (sorted ASC or DESC)?
static bool argsort_before(const float * v, int32_t x, int32_t y, bool desc) {
    return desc ? v[x] > v[y] : v[x] < v[y];
}

// idx[0..n) sorted by v: a bottom-up merge sort, ping-ponging between idx
// and tmp. Ties keep the lower index first (a merge sort is stable, and idx
// starts as 0..n-1). ggml sorts with std::sort, which leaves the order of
// equal values unspecified: where a row has ties, llama.cpp may order them
// either way; with none (the router's probabilities, in practice) both agree.
static void argsort_row(const float * v, int32_t * idx, int32_t * tmp, int64_t n, bool desc) {
    int32_t * from = idx, * to = tmp;
    for (int64_t width = 1; width < n; width *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * width) {
            const int64_t mid = min_i64(lo + width, n), hi = min_i64(lo + 2 * width, n);
            int64_t       i = lo, j = mid, k = lo;
            while (i < mid && j < hi) to[k++] = argsort_before(v, from[j], from[i], desc) ? from[j++] : from[i++];
            while (i < mid) to[k++] = from[i++];
            while (j < hi) to[k++] = from[j++];
        }
        int32_t * swap = from;
        from = to;
        to   = swap;
    }
    if (from != idx) memcpy(idx, from, (size_t) n * sizeof(int32_t));
}

// Scratch of one share of argsort: a row's values and the merge's second buffer.
size_t mg_argsort_work_size(const struct mg_tensor * t) {
    return (size_t) t->ne[0] * (sizeof(float) + sizeof(int32_t));
}

// Per row: the indices 0..n-1 sorted by the row's values
// (ggml_compute_forward_argsort_f32). The row is copied into this share's
// slice of the work buffer first, so any strides will do.
static void forward_argsort(const struct mg_compute_params * p, struct mg_tensor * dst) {
    const struct mg_tensor * a    = dst->src[0];
    const int64_t            n    = a->ne[0];
    const bool               desc = mg_get_op_param_i32(dst, 0) == MG_SORT_ORDER_DESC;
    const size_t             per  = (mg_argsort_work_size(dst) + MG_CACHE_LINE - 1) / MG_CACHE_LINE * MG_CACHE_LINE;
    MG_ASSERT(dst->nb[0] == sizeof(int32_t) && p->wsize >= per * (size_t) p->nth);
    float *   v   = (float *) ((char *) p->wdata + per * (size_t) p->ith);
    int32_t * tmp = (int32_t *) (v + n);
    int64_t   r0, r1;
    mg_split_rows(mg_nrows(a), p->ith, p->nth, &r0, &r1);
    for (int64_t ir = r0; ir < r1; ir++) {
        int64_t i1, i2, i3;
        unravel_row(a, ir, &i1, &i2, &i3);
        const char * ra  = row_ptr(a, i1, i2, i3);
        int32_t *    idx = (int32_t *) row_ptr(dst, i1, i2, i3);
        for (int64_t i0 = 0; i0 < n; i0++) {
            v[i0]   = get_f32(ra, a, i0);
            idx[i0] = (int32_t) i0;
        }
        argsort_row(v, idx, tmp, n, desc);
    }
}

// min(max(x, lo), hi) as ggml_compute_forward_clamp_f32 writes it,
// MAX(MIN(x, hi), lo): a NaN comes out as hi.
static void forward_clamp(const struct mg_compute_params * p, struct mg_tensor * dst) {
    const struct mg_tensor * a  = dst->src[0];
    const float              lo = mg_get_op_param_f32(dst, 0), hi = mg_get_op_param_f32(dst, 1);
    int64_t r0, r1;
    mg_split_rows(mg_nrows(a), p->ith, p->nth, &r0, &r1);
    for (int64_t ir = r0; ir < r1; ir++) {
        int64_t i1, i2, i3;
        unravel_row(a, ir, &i1, &i2, &i3);
        const char * ra = row_ptr(a, i1, i2, i3);
        char *       rd = row_ptr(dst, i1, i2, i3);
        for (int64_t i0 = 0; i0 < a->ne[0]; i0++) {
            const float x = get_f32(ra, a, i0);
            const float m = x < hi ? x : hi;
            set_f32(rd, dst, i0, m > lo ? m : lo);
        }
    }
}

// mul_mat_id (ggml_compute_forward_mul_mat_id, ggml-cpu.c) in two phases, as
// ggml does them. Init: every share converts its rows of b into the
// weights' vec_dot_type (the same from_float as mul_mat's), and share 0
// groups the picks by expert, so that each expert's weights are read once for
// all the tokens that picked it. Forward: every expert with picks has its
// rows split between the shares in whole tiles of 8; one row times one pick
// is one vec_dot (ggml calls vec_dot with nrc = 1 here, for every type: no
// tinyBLAS), so each output has the bits of mul_mat of that expert's matrix
// by that one column. Up to 4 picks of an expert share a tile call
// (vec_dot_tile, each output still vec_dot's to the bit, vec.h): their
// columns are gathered into this share's slice of the work buffer first,
// as the tile wants them one stride apart. With the weights repacked (3-D,
// repack.c), the repacked gemv of llama.cpp's forward_mul_mat_id instead:
// mg_repack_tile one column at a time (4 columns would take its gemm's
// order), again what mul_mat gives for one column.
//
// The work buffer: the converted rows of b (when b is not already of the
// vec_dot_type), then, from a cache line on, the grouping: n_as + 1 starts,
// and the picks (i, t) of expert e at pairs starts[e] .. starts[e+1]-1;
// then, from a cache line on, one slice per share for 4 gathered columns.
struct mul_mat_id_work {
    size_t    b_bytes;   // converted rows of b, rounded up to a cache line (0: b is read as it is)
    int32_t * starts;    // [n_as + 1]
    int32_t * picks;     // [2 * n_used * T]: i, t of each pick, grouped by expert
    char *    gather;    // this share's MUL_MAT_TILE_COLS columns, one vec_dot_type row apart
};

static bool mul_mat_id_converts_b(const struct mg_tensor * t) {
    return t->src[1]->type != mg_get_type_traits_cpu(t->src[0]->type)->vec_dot_type;
}

static size_t round_up_line(size_t bytes) {
    return (bytes + MG_CACHE_LINE - 1) / MG_CACHE_LINE * MG_CACHE_LINE;
}

static size_t mul_mat_id_b_bytes(const struct mg_tensor * t) {
    if (!mul_mat_id_converts_b(t)) return 0;
    const enum mg_type vdt = mg_get_type_traits_cpu(t->src[0]->type)->vec_dot_type;
    return round_up_line(mg_row_size(vdt, t->src[1]->ne[0]) * (size_t) mg_nrows(t->src[1]));
}

static size_t mul_mat_id_group_bytes(const struct mg_tensor * t) {
    const int64_t n_as = t->src[0]->ne[2], n_picks = mg_nelements(t->src[2]);
    return round_up_line((size_t) (n_as + 1 + 2 * n_picks) * sizeof(int32_t));
}

static size_t mul_mat_id_gather_bytes(const struct mg_tensor * t) {
    const enum mg_type vdt = mg_get_type_traits_cpu(t->src[0]->type)->vec_dot_type;
    return round_up_line(MUL_MAT_TILE_COLS * mg_row_size(vdt, t->src[1]->ne[0]));
}

size_t mg_mul_mat_id_work_size(const struct mg_tensor * t, int n_tasks) {
    return mul_mat_id_b_bytes(t) + mul_mat_id_group_bytes(t) + (size_t) n_tasks * mul_mat_id_gather_bytes(t);
}

static struct mul_mat_id_work mul_mat_id_work_of(const struct mg_compute_params * p, const struct mg_tensor * t) {
    MG_ASSERT(p->wsize >= mg_mul_mat_id_work_size(t, p->nth) && "mul_mat_id: the plan's work buffer is too small");
    struct mul_mat_id_work w = {.b_bytes = mul_mat_id_b_bytes(t)};
    w.starts = (int32_t *) ((char *) p->wdata + w.b_bytes);
    w.picks  = w.starts + t->src[0]->ne[2] + 1;
    w.gather = (char *) p->wdata + w.b_bytes + mul_mat_id_group_bytes(t) + (size_t) p->ith * mul_mat_id_gather_bytes(t);
    return w;
}

static int32_t mul_mat_id_pick(const struct mg_tensor * ids, int64_t i, int64_t t) {
    return *(const int32_t *) ((const char *) ids->data + i * ids->nb[0] + t * ids->nb[1]);
}

// Share 0's part of init: a counting sort of the picks by expert, token by
// token (ggml's matrix_rows, in the same order).
static void mul_mat_id_group(const struct mg_tensor * dst, const struct mul_mat_id_work * w) {
    const struct mg_tensor * ids  = dst->src[2];
    const int64_t            n_as = dst->src[0]->ne[2];
    memset(w->starts, 0, (size_t) (n_as + 1) * sizeof(int32_t));
    for (int64_t t = 0; t < ids->ne[1]; t++) {
        for (int64_t i = 0; i < ids->ne[0]; i++) {
            const int32_t e = mul_mat_id_pick(ids, i, t);
            if (e < 0 || e >= n_as) {
                mg_abort(__FILE__, __LINE__, "mul_mat_id: ids[%lld, %lld] = %d is not an expert of %s (0..%lld)",
                         (long long) i, (long long) t, e, dst->src[0]->name, (long long) n_as - 1);
            }
            w->starts[e + 1]++;
        }
    }
    for (int64_t e = 0; e < n_as; e++) w->starts[e + 1] += w->starts[e];
    // Fill each expert's range; starts[e] walks forward and ends at its end,
    // which is where expert e+1 began, so shifting back restores them.
    for (int64_t t = 0; t < ids->ne[1]; t++) {
        for (int64_t i = 0; i < ids->ne[0]; i++) {
            const int32_t at   = w->starts[mul_mat_id_pick(ids, i, t)]++;
            w->picks[2 * at]     = (int32_t) i;
            w->picks[2 * at + 1] = (int32_t) t;
        }
    }
    for (int64_t e = n_as; e > 0; e--) w->starts[e] = w->starts[e - 1];
    w->starts[0] = 0;
}

static void mul_mat_id_init(const struct mg_compute_params * p, struct mg_tensor * dst) {
    const struct mg_tensor *          as  = dst->src[0];
    const struct mg_tensor *          b   = dst->src[1];
    const struct mg_type_traits_cpu * cpu = mg_get_type_traits_cpu(as->type);
    MG_ASSERT(cpu != NULL && cpu->vec_dot != NULL && "mul_mat_id: no dot product for this weight type");
    const struct mul_mat_id_work w = mul_mat_id_work_of(p, dst);
    if (p->ith == 0) mul_mat_id_group(dst, &w);
    if (!mul_mat_id_converts_b(dst)) return;
    MG_ASSERT(b->nb[0] == sizeof(float));
    const size_t row_size = mg_row_size(cpu->vec_dot_type, b->ne[0]);
    int64_t r0, r1;
    mg_split_rows(mg_nrows(b), p->ith, p->nth, &r0, &r1);
    for (int64_t ir = r0; ir < r1; ir++) {
        int64_t i1, i2, i3;
        unravel_row(b, ir, &i1, &i2, &i3);
        cpu->from_float((const float *) row_ptr(b, i1, i2, i3), (char *) p->wdata + (size_t) ir * row_size, b->ne[0]);
    }
}

// Column (i % n_b, t) of b in the vec_dot_type: converted in the work
// buffer, or b's own row.
static const char * mul_mat_id_b_row(const struct mg_compute_params * p, const struct mg_tensor * b,
                                     enum mg_type vec_dot_type, int64_t i, int64_t t) {
    const int64_t i11 = i % b->ne[1];
    if (b->type == vec_dot_type) return row_ptr(b, i11, t, 0);
    return (const char *) p->wdata + (size_t) (t * b->ne[1] + i11) * mg_row_size(vec_dot_type, b->ne[0]);
}

// Repacked experts: rows [r0, r1) of expert e (whole groups of 8) times one
// column y, s[i01] for each row: llama.cpp's gemv, as mul_mat_tiled gives it
// for a single column.
static void mul_mat_id_rows_repacked(const struct mg_tensor * as, int64_t e, int64_t r0, int64_t r1, const char * y,
                                     float * s) {
    for (int64_t i01 = r0; i01 < r1; i01 += MUL_MAT_TILE_ROWS) {
        MG_ASSERT(r1 - i01 >= MUL_MAT_TILE_ROWS);
        const size_t at = (size_t) e * as->nb[2] + (size_t) i01 * as->nb[1];   // where the group's rows were
        mg_repack_tile(as->type, as->ne[0], s + i01, 1, (const char *) as->repacked + at, y, 1, 1);
    }
}

// Rows [r0, r1) of expert e times n_cols <= 4 columns gathered y_stride apart:
// a tile at a time, its 8 x n_cols results scattered to the picks' columns s[c].
static void mul_mat_id_rows_tiled(const struct mg_tensor * as, const struct mg_type_traits_cpu * cpu, int64_t e,
                                  int64_t r0, int64_t r1, const char * y, size_t y_stride, int n_cols,
                                  float * const * s) {
    float tile[MUL_MAT_TILE_COLS * MUL_MAT_TILE_ROWS];
    for (int64_t i01 = r0; i01 < r1; i01 += MUL_MAT_TILE_ROWS) {
        const int n_rows = (int) min_i64(r1 - i01, MUL_MAT_TILE_ROWS);
        cpu->vec_dot_tile(as->ne[0], tile, MUL_MAT_TILE_ROWS, row_ptr(as, i01, e, 0), as->nb[1], n_rows, y, y_stride,
                          n_cols);
        for (int c = 0; c < n_cols; c++) memcpy(s[c] + i01, tile + c * MUL_MAT_TILE_ROWS, (size_t) n_rows * sizeof(float));
    }
}

// Picks k0 .. k0+n_cols-1 of w's grouping: their columns of b copied into
// w->gather, one row_size apart, and where their results go.
static void mul_mat_id_gather(const struct mg_compute_params * p, const struct mg_tensor * dst,
                              const struct mul_mat_id_work * w, enum mg_type vec_dot_type, int32_t k0, int n_cols,
                              float ** s) {
    const struct mg_tensor * b        = dst->src[1];
    const size_t             row_size = mg_row_size(vec_dot_type, b->ne[0]);
    for (int c = 0; c < n_cols; c++) {
        const int64_t i = w->picks[2 * (k0 + c)], t = w->picks[2 * (k0 + c) + 1];
        memcpy(w->gather + (size_t) c * row_size, mul_mat_id_b_row(p, b, vec_dot_type, i, t), row_size);
        s[c] = (float *) row_ptr(dst, i, t, 0);
    }
}

static void forward_mul_mat_id(const struct mg_compute_params * p, struct mg_tensor * dst) {
    const struct mg_tensor *          as  = dst->src[0];
    const struct mg_tensor *          b   = dst->src[1];
    const struct mg_type_traits_cpu * cpu = mg_get_type_traits_cpu(as->type);
    MG_ASSERT(as->nb[0] == mg_type_size(as->type) && "mul_mat_id: rows of as must be contiguous");
    MG_ASSERT(dst->nb[0] == sizeof(float));
    const struct mul_mat_id_work w        = mul_mat_id_work_of(p, dst);
    const size_t                 row_size = mg_row_size(cpu->vec_dot_type, b->ne[0]);
    int64_t r0, r1;
    mul_mat_share(as->ne[1], p, &r0, &r1);
    const size_t  tile  = MUL_MAT_TILE_ROWS * mg_row_size(as->type, as->ne[0]);
    const int64_t block = MUL_MAT_TILE_ROWS * (tile < MUL_MAT_BLOCK_BYTES ? (int64_t) (MUL_MAT_BLOCK_BYTES / tile) : 1);
    for (int64_t e = 0; e < as->ne[2]; e++) {
        // A block of the expert's rows stays in cache while every pick of it passes.
        for (int64_t ib = r0; ib < r1; ib += block) {
            const int64_t ie = min_i64(ib + block, r1);
            if (as->repacked != NULL) {
                for (int32_t k = w.starts[e]; k < w.starts[e + 1]; k++) {
                    const int64_t i = w.picks[2 * k], t = w.picks[2 * k + 1];
                    mul_mat_id_rows_repacked(as, e, ib, ie, mul_mat_id_b_row(p, b, cpu->vec_dot_type, i, t),
                                             (float *) row_ptr(dst, i, t, 0));
                }
                continue;
            }
            for (int32_t k = w.starts[e]; k < w.starts[e + 1]; k += MUL_MAT_TILE_COLS) {
                const int n_cols = (int) min_i64(w.starts[e + 1] - k, MUL_MAT_TILE_COLS);
                float *   s[MUL_MAT_TILE_COLS];
                mul_mat_id_gather(p, dst, &w, cpu->vec_dot_type, k, n_cols, s);
                mul_mat_id_rows_tiled(as, cpu, e, ib, ie, w.gather, row_size, n_cols, s);
            }
        }
    }
}
//@- full moe

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

#if 0 //@old 03..09 copy
static void forward_copy(const struct mg_compute_params * p, struct mg_tensor * dst) {
    const struct mg_tensor * src = dst->src[0];
    MG_ASSERT(mg_blck_size(src->type) == 1 && mg_blck_size(dst->type) == 1 && "copies of plain types only");
    copy_elements(p, src, dst);
}
#endif //@old copy
//@+ full contiguous-rows
// Same shape, rows of packed elements, and a type change a row can do at
// once: the same type (a cont after a permute: a memcpy of the row, instead
// of locating every element by division), or F16 to F32 and back (as the
// K-shift casts an F16 cache: convert_element's conversions, a row at a
// time, F16C where built for it).
static bool copies_by_rows(const struct mg_tensor * src, const struct mg_tensor * dst) {
    const bool same_layout = mg_are_same_shape(src, dst) && src->nb[0] == mg_type_size(src->type) &&
                             dst->nb[0] == mg_type_size(dst->type);
    const bool f16_f32 = (src->type == MG_TYPE_F16 && dst->type == MG_TYPE_F32) ||
                         (src->type == MG_TYPE_F32 && dst->type == MG_TYPE_F16);
    return same_layout && (src->type == dst->type || f16_f32);
}

static void copy_row(const struct mg_tensor * src, const struct mg_tensor * dst, char * rd, const char * rs) {
    if (src->type == dst->type) {
        memcpy(rd, rs, (size_t) dst->ne[0] * dst->nb[0]);
    } else if (dst->type == MG_TYPE_F16) {
        mg_get_type_traits_cpu(MG_TYPE_F16)->from_float((const float *) rs, rd, dst->ne[0]);
    } else {
        mg_get_type_traits(MG_TYPE_F16)->to_float(rs, (float *) rd, dst->ne[0]);
    }
}

// full/ copies row by row where copies_by_rows allows it; anything else goes
// element by element.
static void forward_copy(const struct mg_compute_params * p, struct mg_tensor * dst) {
    const struct mg_tensor * src = dst->src[0];
    MG_ASSERT(mg_blck_size(src->type) == 1 && mg_blck_size(dst->type) == 1 && "copies of plain types only");
    if (!copies_by_rows(src, dst)) {
        copy_elements(p, src, dst);
        return;
    }
    int64_t r0, r1;
    mg_split_rows(mg_nrows(dst), p->ith, p->nth, &r0, &r1);
    for (int64_t ir = r0; ir < r1; ir++) {
        int64_t i1, i2, i3;
        unravel_row(dst, ir, &i1, &i2, &i3);
        copy_row(src, dst, row_ptr(dst, i1, i2, i3), row_ptr(src, i1, i2, i3));
    }
}
//@- full contiguous-rows

#if 0 //@old 03..09 get-rows
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
#endif //@old get-rows
//@+ full moe
// Row ids[k, j, l] of a's matrix (j, l), decoded to F32, becomes row (k, j, l)
// of dst (ggml_compute_forward_get_rows): with 1-D ids, the embedding
// lookup; with ids {n_used, T} and a {1, n_expert, T}, each token's picked
// expert weights.
static void forward_get_rows(const struct mg_compute_params * p, struct mg_tensor * dst) {
    const struct mg_tensor *      a   = dst->src[0];
    const struct mg_tensor *      ids = dst->src[1];
    const struct mg_type_traits * tt  = mg_get_type_traits(a->type);
    MG_ASSERT(tt->to_float != NULL && a->nb[0] == tt->type_size);
    int64_t k0, k1;
    mg_split_rows(mg_nelements(ids), p->ith, p->nth, &k0, &k1);
    for (int64_t k = k0; k < k1; k++) {
        const int64_t i = k % ids->ne[0], j = k / ids->ne[0] % ids->ne[1], l = k / (ids->ne[0] * ids->ne[1]);
        const int32_t row = *(const int32_t *) ((const char *) ids->data + i * ids->nb[0] + j * ids->nb[1] + l * ids->nb[2]);
        MG_ASSERT(row >= 0 && row < a->ne[1] && "get_rows: row index out of range");
        tt->to_float(row_ptr(a, row, j, l), (float *) row_ptr(dst, i, j, l), a->ne[0]);
    }
}
//@- full moe

//@+ 06 attention-ops
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

#if 0 //@old 06..09 rope-token-angles
// The angles of one token's position, from the node's parameters.
static void rope_token_angles(const struct mg_tensor * dst, int32_t position, float * cos_t, float * sin_t) {
    rope_angles((float) position, mg_get_op_param_i32(dst, 0), mg_get_op_param_f32(dst, 2),
                mg_get_op_param_f32(dst, 3), cos_t, sin_t);
}
#endif //@old rope-token-angles
//@+ full rope-freqs
// As rope_angles, each pair's angle divided by its factor first (Llama 3):
// ggml_rope_cache_init hands rope_yarn theta/ff, which scales it by freq_scale.
static void rope_angles_ff(float pos, int n_rot, float freq_base, float freq_scale, const float * ff,
                           float * cos_out, float * sin_out) {
    const float theta_scale = powf(freq_base, -2.0f / (float) n_rot);
    float theta = pos;
    for (int i = 0; i < n_rot / 2; i++) {
        cos_out[i] = cosf(theta / ff[i] * freq_scale);
        sin_out[i] = sinf(theta / ff[i] * freq_scale);
        theta *= theta_scale;
    }
}

// The angles of one token's position, from the node's parameters, each
// divided by its pair's factor when the node has them (src[2], Llama 3).
static void rope_token_angles(const struct mg_tensor * dst, int32_t position, float * cos_t, float * sin_t) {
    const int   n_rot      = mg_get_op_param_i32(dst, 0);
    const float freq_base  = mg_get_op_param_f32(dst, 2);
    const float freq_scale = mg_get_op_param_f32(dst, 3);
    if (dst->src[2] != NULL) {
        rope_angles_ff((float) position, n_rot, freq_base, freq_scale, (const float *) dst->src[2]->data, cos_t, sin_t);
    } else {
        rope_angles((float) position, n_rot, freq_base, freq_scale, cos_t, sin_t);
    }
}
//@- full rope-freqs

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

#if 0 //@old 06..09 rope-row
// One row. Here every row goes through the strides; full/ gives packed NEOX
// rows a vector loop in this place.
static void rope_row(const struct mg_tensor * dst, const char * ra, char * rd, const float * cos_t,
                     const float * sin_t) {
    rope_row_strided(dst, ra, rd, cos_t, sin_t);
}
#endif //@old rope-row
//@+ full rope-pairs
// One row: packed NEOX rows by mg_rope_pairs (ops_simd.h, the same fused
// steps eight pairs at a time), any other row through the strides.
static void rope_row(const struct mg_tensor * dst, const char * ra, char * rd, const float * cos_t,
                     const float * sin_t) {
    const struct mg_tensor * a     = dst->src[0];
    const int                n_rot = mg_get_op_param_i32(dst, 0);
    const int                half  = n_rot / 2;
    if (mg_get_op_param_i32(dst, 1) == MG_ROPE_NEOX && a->nb[0] == sizeof(float) && dst->nb[0] == sizeof(float)) {
        const float * x = (const float *) ra;
        float *       y = (float *) rd;
        mg_rope_pairs(half, y, y + half, x, x + half, cos_t, sin_t);
        memmove(y + n_rot, x + n_rot, (size_t) (a->ne[0] - n_rot) * sizeof(float));
        return;
    }
    rope_row_strided(dst, ra, rd, cos_t, sin_t);
}
//@- full rope-pairs

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
//@- 06 attention-ops

//@+ 09 set-rows
#if 0 //@old 09..09 set-row
// Row rs of src, converted element by element to dst's type, into row rd of dst.
static void set_row(const struct mg_tensor * src, const struct mg_tensor * dst, const char * rs, char * rd) {
    for (int64_t i0 = 0; i0 < src->ne[0]; i0++) {
        convert_element(rs + i0 * src->nb[0], src->type, rd + i0 * dst->nb[0], dst->type);
    }
}
#endif //@old set-row
//@+ full contiguous-rows
// Row rs of src, converted to dst's type, into row rd of dst: packed F32 rows
// into an F16 cache a row at a time (F16C when built for it), any other row
// element by element.
static void set_row(const struct mg_tensor * src, const struct mg_tensor * dst, const char * rs, char * rd) {
    if (src->nb[0] == sizeof(float) && dst->type == MG_TYPE_F16) {
        mg_get_type_traits_cpu(MG_TYPE_F16)->from_float((const float *) rs, rd, src->ne[0]);
        return;
    }
    for (int64_t i0 = 0; i0 < src->ne[0]; i0++) {
        convert_element(rs + i0 * src->nb[0], src->type, rd + i0 * dst->nb[0], dst->type);
    }
}
//@- full contiguous-rows

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
//@- 09 set-rows
#if 0 //@old 09..09 set-rows-op
// Row r of src, converted to dst's type, into row idx[r] of dst.
static void forward_set_rows(const struct mg_compute_params * p, struct mg_tensor * dst) {
    int64_t r0, r1;
    mg_split_rows(mg_nrows(dst->src[0]), p->ith, p->nth, &r0, &r1);
    set_rows_one_by_one(dst->src[0], dst, (const int32_t *) dst->src[1]->data, r0, r1);
}
#endif //@old set-rows-op
//@+ full element-rows
// Rows of one element, F32 into an F16 tensor, src packed: the transposed V
// store, where every element of a token's V is a row of its own. The
// elements go through the row converter 256 at a time (one call, F16C when
// built for it, the same halves as one by one) and are then put in place;
// row by row, a call per element cost more than the element (pp512 on the
// 0.6B shape at 1 thread: v_store 176 -> 119 ms of ~4 s).
static void set_element_rows_f16(const struct mg_tensor * src, struct mg_tensor * dst, const int32_t * idx, int64_t r0,
                                 int64_t r1) {
    enum { CHUNK = 256 };
    const float * x = src->data;
    mg_fp16_t     half[CHUNK];
    for (int64_t c0 = r0; c0 < r1; c0 += CHUNK) {
        const int64_t n = r1 - c0 < CHUNK ? r1 - c0 : CHUNK;
        mg_get_type_traits_cpu(MG_TYPE_F16)->from_float(x + c0, half, n);
        for (int64_t k = 0; k < n; k++) {
            const int32_t row = idx[c0 + k];
            MG_ASSERT(row >= 0 && row < dst->ne[1] && "set_rows: row index out of range");
            *(mg_fp16_t *) ((char *) dst->data + (size_t) row * dst->nb[1]) = half[k];
        }
    }
}

// Row r of src, converted to dst's type, into row idx[r] of dst: rows of
// one element F32 -> F16 a chunk at a time, any other one by one.
static void forward_set_rows(const struct mg_compute_params * p, struct mg_tensor * dst) {
    const struct mg_tensor * src = dst->src[0];
    const int32_t *          idx = dst->src[1]->data;
    int64_t r0, r1;
    mg_split_rows(mg_nrows(src), p->ith, p->nth, &r0, &r1);
    if (src->ne[0] == 1 && src->type == MG_TYPE_F32 && dst->type == MG_TYPE_F16 && mg_is_contiguous(src)) {
        set_element_rows_f16(src, dst, idx, r0, r1);
    } else {
        set_rows_one_by_one(src, dst, idx, r0, r1);
    }
}
//@- full element-rows

// ---------------------------------------------------------------------------
// Dispatch
// ---------------------------------------------------------------------------

#if 0 //@old 03..05 dispatch
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
#endif //@old dispatch
//@+ 06 op-table
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
#if 0 //@old 06..09 index-count
static int64_t index_count(const struct mg_tensor * t) { return t->src[1]->ne[0]; }   // get_rows: one row per index
#endif //@old index-count
//@+ full moe
static int64_t index_count(const struct mg_tensor * t) { return mg_nelements(t->src[1]); }   // get_rows: one row per index
//@- full moe
//@+ 09 set-rows
static int64_t source_rows(const struct mg_tensor * t) { return mg_nrows(t->src[0]); }   // set_rows: rows of src
//@- 09 set-rows

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
    //@+ 09 set-rows
    [MG_OP_SET_ROWS]  = {forward_set_rows, source_rows},
    //@- 09 set-rows
    //@+ full fused-ops
    [MG_OP_SWIGLU]     = {mg_compute_forward_swiglu, mg_nrows},
    [MG_OP_FLASH_ATTN] = {mg_compute_forward_flash_attn, mg_flash_attn_n_blocks},
    //@- full fused-ops
    //@+ full moe
    [MG_OP_ARGSORT]    = {forward_argsort, mg_nrows},
    [MG_OP_CLAMP]      = {forward_clamp, mg_nrows},
    [MG_OP_MUL_MAT_ID] = {forward_mul_mat_id, weight_rows},   // every expert's rows are split, as mul_mat's
    //@- full moe
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
//@- 06 op-table

//@+ 07 init-phase
#if 0 //@old 07..09 init-ops
bool mg_compute_needs_init(const struct mg_tensor * t) {
    if (t->op != MG_OP_MUL_MAT) return false;
    const struct mg_type_traits_cpu * cpu = mg_get_type_traits_cpu(t->src[0]->type);
    return cpu != NULL && t->src[1]->type != cpu->vec_dot_type;
}

void mg_compute_forward_init(const struct mg_compute_params * p, struct mg_tensor * t) {
    if (t->op == MG_OP_MUL_MAT) mul_mat_init(p, t);
}
#endif //@old init-ops
//@+ full moe
// full/ adds mul_mat_id, whose init also groups the picks by expert.
bool mg_compute_needs_init(const struct mg_tensor * t) {
    if (t->op == MG_OP_MUL_MAT_ID) return true;   // it always groups the picks by expert first
    if (t->op != MG_OP_MUL_MAT) return false;
    const struct mg_type_traits_cpu * cpu = mg_get_type_traits_cpu(t->src[0]->type);
    return cpu != NULL && t->src[1]->type != cpu->vec_dot_type;
}

void mg_compute_forward_init(const struct mg_compute_params * p, struct mg_tensor * t) {
    if (t->op == MG_OP_MUL_MAT) mul_mat_init(p, t);
    if (t->op == MG_OP_MUL_MAT_ID) mul_mat_id_init(p, t);
}
//@- full moe
//@- 07 init-phase

#if 0 //@old 03..04 naive-data
void mg_place_result(struct mg_context * ctx, struct mg_tensor * t) {
    if (t->data != NULL) return;   // placed by an earlier compute: reuse it
    if (t->view_src != NULL) {
        t->data = (char *) t->view_src->data + t->view_offs;
        return;
    }
    t->data = mg_context_alloc(ctx, MG_OBJECT_DATA, mg_nbytes(t));
    MG_ASSERT(t->data != NULL && "the context is too small for this result");
}
#endif //@old naive-data

#if 0 //@old 03..03 naive-compute
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
#endif //@old naive-compute
