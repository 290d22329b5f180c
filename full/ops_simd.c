//@file full
// ops_simd.c - softmax's exp, SwiGLU and RoPE's rotation: a scalar loop that
// is the reference, and an AVX2 twin that gives the same bits.
#include "ops_simd.h"
#include "compute.h"
#include "vec_simd.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

float mg_expf_avx2(float x) {
    if (isnan(x)) return x;
    const float shift = 0x1.8p23f;
    const float z = fmaf(x, 0x1.715476p+0f, shift);
    const float n = z - shift;
    const float b = fmaf(-n, 0x1.7f7d1cp-20f, fmaf(-n, 0x1.62e4p-1f, x));
    const float u = b * b;
    const float j = fmaf(fmaf(fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
                         u, 0x1.ffffecp-1f * b);
    // ggml builds 2^n from z's bits: e = bits(z) << 23, k = e + bits(1.0f).
    uint32_t zb, kb;
    memcpy(&zb, &z, sizeof(zb));
    const uint32_t e = zb << 23;
    kb = e + 0x3f800000u;
    float k;
    memcpy(&k, &kb, sizeof(k));
    if (fabsf(n) <= 126.0f) return fmaf(j, k, k);
    if (fabsf(n) > 192.0f) return n > 0.0f ? INFINITY : 0.0f;   // s1 * s1 in ggml: overflows, or underflows to 0
    // Near the ends of the float range, 2^n as the product of two powers s2 * s1.
    const uint32_t g  = n <= 0.0f ? 0x82000000u : 0u;
    const uint32_t b1 = g + 0x7f000000u, b2 = e - g;
    float s1, s2;
    memcpy(&s1, &b1, sizeof(s1));
    memcpy(&s2, &b2, sizeof(s2));
    return fmaf(s2, j, s2) * s1;
}

float mg_level_expf(float x) {
    return MG_GGML_LANES == 16 ? mg_expf(x) : mg_expf_avx2(x);
}

float mg_level_sum_lanes(const float * x) {
    if (MG_GGML_LANES == 4) return (x[0] + x[1]) + (x[2] + x[3]);   // faddp, faddp
    float t[8];
    if (MG_GGML_LANES == 16) {
        for (int i = 0; i < 8; i++) t[i] = x[i + 8] + x[i];   // _mm512_reduce_add_ps: upper 8 onto lower 8
    } else {
        for (int i = 0; i < 8; i++) t[i] = x[i];
    }
    const float u0 = t[4] + t[0], u1 = t[5] + t[1], u2 = t[6] + t[2], u3 = t[7] + t[3];   // 4 onto 4
    return (u0 + u2) + (u1 + u3);                                                        // (0+2) + (1+3)
}

#if defined(MG_SIMD)
#include <immintrin.h>

// ggml_v_expf on eight lanes, rounded as its AVX-512 version (mg_expf) or,
// with avx2_form, as its AVX2 version (mg_expf_avx2): the same fused steps
// (FMA) and the same unfused ones as the scalar function. The split and the
// polynomial are shared; the two part at the polynomial's last step and the
// scaling by 2^n, built from exponent bits for n in [-126, 126]. Lanes outside
// that range (|x| > ~87) come from the scalar function.
static inline __m256 exp8(__m256 x, bool avx2_form) {
    const __m256 shift = _mm256_set1_ps(0x1.8p23f);
    const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), shift);
    const __m256 n = _mm256_sub_ps(z, shift);
    const __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f),
                                      _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
    const __m256 u = _mm256_mul_ps(b, b);
    const __m256 p = _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f)), u,
                                     _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f)));
    const __m256 c1 = _mm256_set1_ps(0x1.ffffecp-1f);
    __m256       r;
    if (avx2_form) {   // j = p u + c1 b;  r = j 2^n + 2^n, 2^n from z's bits
        const __m256i e = _mm256_slli_epi32(_mm256_castps_si256(z), 23);
        const __m256  k = _mm256_castsi256_ps(_mm256_add_epi32(e, _mm256_castps_si256(_mm256_set1_ps(1.0f))));
        r               = _mm256_fmadd_ps(_mm256_fmadd_ps(p, u, _mm256_mul_ps(c1, b)), k, k);
    } else {           // j = p u + (c1 b + 1);  r = j 2^n, 2^n from n
        const __m256  j = _mm256_fmadd_ps(p, u, _mm256_fmadd_ps(c1, b, _mm256_set1_ps(1.0f)));
        const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
        r               = _mm256_mul_ps(j, _mm256_castsi256_ps(e));
    }
    const __m256 in = _mm256_cmp_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), n), _mm256_set1_ps(126.0f), _CMP_LE_OQ);
    if (_mm256_movemask_ps(in) != 0xff) {   // rare: a lane near the ends of the float range
        float xs[8], rs[8];
        _mm256_storeu_ps(xs, x);
        _mm256_storeu_ps(rs, r);
        const int ok = _mm256_movemask_ps(in);
        for (int l = 0; l < 8; l++) rs[l] = (ok >> l) & 1 ? rs[l] : avx2_form ? mg_expf_avx2(xs[l]) : mg_expf(xs[l]);
        r = _mm256_loadu_ps(rs);
    }
    return r;
}

// The level's vector exp on eight lanes (mg_level_expf).
static __m256 level_exp8(__m256 x) {
    return exp8(x, MG_GGML_LANES == 8);
}
#endif

void mg_exp_row(int64_t n, float * y, const float * x, float shift) {
    const int64_t vector_end = n - n % MG_GGML_LANES;
    int64_t i = 0;
#if defined(MG_SIMD)
    const __m256 s = _mm256_set1_ps(shift);
    for (; i < vector_end; i += 8) _mm256_storeu_ps(y + i, level_exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), s)));
#endif
    for (; i < vector_end; i++) y[i] = mg_level_expf(x[i] - shift);
    for (; i < n; i++) y[i] = expf(x[i] - shift);
}

void mg_swiglu_row(int64_t n, float * y, const float * x, const float * g) {
    const int64_t vector_end = n - n % MG_GGML_LANES;
    int64_t i = 0;
#if defined(MG_SIMD)
    const __m256 one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps();
    for (; i < vector_end; i += 8) {
        const __m256 xv = _mm256_loadu_ps(x + i);
        const __m256 e  = level_exp8(_mm256_sub_ps(zero, xv));
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_div_ps(xv, _mm256_add_ps(one, e)), _mm256_loadu_ps(g + i)));
    }
#endif
    for (; i < vector_end; i++) y[i] = x[i] / (1.0f + mg_level_expf(-x[i])) * g[i];
    for (; i < n; i++) y[i] = x[i] / (1.0f + expf(-x[i])) * g[i];
}

void mg_rope_pairs(int64_t n, float * y0, float * y1, const float * x0, const float * x1, const float * cos_t,
                   const float * sin_t) {
    int64_t i = 0;
#if defined(MG_SIMD)
    for (; i + 8 <= n; i += 8) {
        const __m256 a = _mm256_loadu_ps(x0 + i), b = _mm256_loadu_ps(x1 + i);
        const __m256 c = _mm256_loadu_ps(cos_t + i), s = _mm256_loadu_ps(sin_t + i);
        _mm256_storeu_ps(y0 + i, _mm256_fmsub_ps(a, c, _mm256_mul_ps(b, s)));   // fmaf(a, c, -(b s))
        _mm256_storeu_ps(y1 + i, _mm256_fmadd_ps(a, s, _mm256_mul_ps(b, c)));   // fmaf(a, s, b c)
    }
#endif
    for (; i < n; i++) {
        const float a = x0[i], b = x1[i];
        y0[i] = fmaf(a, cos_t[i], -(b * sin_t[i]));   // fused as in ggml's build (compute.c, forward_rope)
        y1[i] = fmaf(a, sin_t[i], b * cos_t[i]);
    }
}

#if defined(MG_SIMD)
// Outputs [i0, i0 + 8 k) through all n rows in k accumulators of 8 lanes
// (k is a constant where it is called: the compiler unrolls the lane loops
// and keeps the accumulators in registers).
static inline void weighted_rows_add_8k(int k, int64_t i0, int64_t n, int64_t d, const float * w, const float * v,
                                        float * acc) {
    __m256 a[8];
    for (int r = 0; r < k; r++) a[r] = _mm256_loadu_ps(acc + i0 + 8 * r);
    for (int64_t j = 0; j < n; j++) {
        const __m256  wj = _mm256_set1_ps(w[j]);
        const float * vj = v + j * d + i0;
        for (int r = 0; r < k; r++) a[r] = _mm256_add_ps(a[r], _mm256_mul_ps(wj, _mm256_loadu_ps(vj + 8 * r)));
    }
    for (int r = 0; r < k; r++) _mm256_storeu_ps(acc + i0 + 8 * r, a[r]);
}
#endif

void mg_weighted_rows_add(int64_t n, int64_t d, const float * w, const float * v, float * acc) {
    int64_t i0 = 0;
#if defined(MG_SIMD)
    for (; i0 + 64 <= d; i0 += 64) weighted_rows_add_8k(8, i0, n, d, w, v, acc);
    for (; i0 + 8 <= d; i0 += 8) weighted_rows_add_8k(1, i0, n, d, w, v, acc);
#endif
    for (; i0 < d; i0++) {
        float a = acc[i0];
        for (int64_t j = 0; j < n; j++) a += w[j] * v[j * d + i0];
        acc[i0] = a;
    }
}
