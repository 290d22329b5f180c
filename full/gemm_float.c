//@file full
// gemm_float.c - float weights x a batch of columns, added as llama.cpp's
// tinyBLAS adds them (ggml-cpu/llamafile/sgemm.cpp: llamafile_sgemm and
// tinyBLAS<KN, D, V, TA, TB, TC>::gemm_bloc).
//
// What llama.cpp does (ggml_compute_forward_mul_mat, ggml-cpu.c, built with
// GGML_USE_LLAMAFILE, the default): before its own loop over vec_dot it asks
// llamafile_sgemm to take the product, once with the activations as they are
// (F32) and, if that is refused, once more after converting them to the
// weights' vec_dot_type. tinyBLAS takes it when
//
//   - there are at least 2 columns (one token is left to vec_dot: "only
//     enable sgemm for prompt processing");
//   - the columns have the weights' type: F32 x F32 (the activations as
//     they are, when contiguous), F16 x F16 and BF16 x BF16 (after the
//     conversion; the x86 build has no F16 x F32 kernel);
//   - k is a multiple of KN and the weight rows m a multiple of 4.
//
// Its kernel for an RM x RN tile keeps one vector accumulator per output,
// Cv[j][i], and walks k in steps of KN:
//
//     for (l = 0; l < k; l += KN) Cv[j][i] = madd(load(A row i + l), load(B col j + l), Cv[j][i]);
//     C[j][i] = hsum(Cv[j][i]);
//
// On this project's machine (AVX-512 with AVX512-BF16, GCC):
//
//   F32   tinyBLAS<16, __m512, __m512, float, ...>: lane t of the accumulator
//         takes elements t, t + 16, t + 32, ..., each with one FMA;
//   F16   tinyBLAS<16, __m512, __m512, ggml_fp16_t, ...>: the same, each
//         16 halves widened exactly by vcvtph2ps first;
//   BF16  tinyBLAS<32, __m512, __m512bh, ggml_bf16_t, ...>: madd is
//         _mm512_dpbf16_ps, so lane t takes the pair (2t, 2t + 1) of each
//         32 elements: first the odd product, then the even one, each a
//         fused add (the product of two bf16 is exact in float), with
//         denormal inputs read as zero and denormal results flushed to zero;
//   hsum  _mm512_reduce_add_ps as GCC writes it: the upper 8 lanes onto the
//         lower 8, then 4 onto 4, then (0 + 2) + (1 + 3).
//
// An AVX2 build of llama.cpp uses 8 lanes (tinyBLAS<8, __m256, ...>, BF16
// widened and FMA'd like F16) and hsum(__m256): the same halving from 8. An
// AVX-512 build without AVX512-BF16 takes BF16 like F16. mg_gemm_float_order
// gives the one of this build; the scalar build (no SIMD) takes the order of
// the AVX-512 + BF16 build, the machine the fixtures were made on.
//
// The tiles (RM x RN), the blocking and the threads change which outputs are
// computed together, never the additions inside one output: the tiling here
// is ours (4 rows x 6 columns on AVX-512, 4 x 3 on AVX2, as many accumulators
// as the registers hold), and any output equals mg_gemm_float_dot on the same
// rows, to the bit (tests/full/test_gemm_float.c).
#include "gemm_float.h"

#include "vec.h"   // MG_SIMD (vec_simd.h)

#include <math.h>
#include <string.h>

#if defined(MG_SIMD)
#include <immintrin.h>
#endif

// ---------------------------------------------------------------------------
// The order, and when it applies
// ---------------------------------------------------------------------------

#if defined(MG_NEON)
#define GEMM_LANES 4   // F32: tinyBLAS<4, float32x4_t, ...>; F16 has 8 half lanes (f16_lanes)
#elif !defined(MG_SIMD) || defined(__AVX512F__)
#define GEMM_LANES 16
#else
#define GEMM_LANES 8
#endif
#if defined(MG_NEON)
#define GEMM_BF16_PAIRS 0
#elif !defined(MG_SIMD) || defined(__AVX512BF16__)
#define GEMM_BF16_PAIRS 1   // BF16 multiplies pairs of elements per lane (vdpbf16ps)
#else
#define GEMM_BF16_PAIRS 0
#endif

// llama.cpp's NEON build (armv8.2-a+dotprod+fp16) has tinyBLAS for F32 x F32
// (4 float lanes, from 4 columns on: "if (n < 4) return false") and for F16 x
// F16 with FP16 arithmetic (tinyBLAS<8, float16x8_t, ...>: 8 HALF lanes, each
// vfmaq_f16 rounded to half, from 8 columns on), none for BF16; its hsum is
// vaddvq_f32, neighbours first, the F16 lanes widened and low 4 + high 4 first.
#if defined(MG_NEON)
#define GEMM_F16_LANES 8
#define GEMM_MIN_COLS(type) ((type) == MG_TYPE_F16 ? 8 : 4)
#else
#define GEMM_F16_LANES GEMM_LANES
#define GEMM_MIN_COLS(type) 2
#endif

// Elements of k per multiply-add step (0: no kernel for the type).
static inline int step_of(enum mg_type type) {
    switch (type) {
        case MG_TYPE_F32:  return GEMM_LANES;
        case MG_TYPE_F16:  return GEMM_F16_LANES;
#if defined(MG_NEON)
        case MG_TYPE_BF16: return 0;
#else
        case MG_TYPE_BF16: return GEMM_BF16_PAIRS ? 2 * GEMM_LANES : GEMM_LANES;
#endif
        default:           return 0;
    }
}

struct mg_gemm_float_order mg_gemm_float_order(enum mg_type type) {
    const int step = step_of(type);
    return (struct mg_gemm_float_order) {step > 0 ? (type == MG_TYPE_F16 ? GEMM_F16_LANES : GEMM_LANES) : 0, step};
}

bool mg_gemm_float_applies(enum mg_type type, int64_t m, int64_t n, int64_t k) {
    const int step = step_of(type);
    return step > 0 && n >= GEMM_MIN_COLS(type) && k % step == 0 && m % 4 == 0;
}

// ---------------------------------------------------------------------------
// The scalar reference: one output, lane by lane
// ---------------------------------------------------------------------------

static float element(enum mg_type type, const void * row, int64_t i) {
    switch (type) {
        case MG_TYPE_F16:  return mg_fp16_to_fp32(((const mg_fp16_t *) row)[i]);
        case MG_TYPE_BF16: return mg_bf16_to_fp32(((const mg_bf16_t *) row)[i]);
        default:           return ((const float *) row)[i];
    }
}

// vdpbf16ps reads a denormal as zero and writes zero for a denormal (Intel
// SDM: "DAZ in, FTZ out"), whatever MXCSR says.
static float flush_denormal(float v) {
    return fpclassify(v) == FP_SUBNORMAL ? copysignf(0.0f, v) : v;
}

// acc + a_odd * b_odd + a_even * b_even, as one lane of _mm512_dpbf16_ps.
static float dot_pair_bf16(float acc, float a_even, float b_even, float a_odd, float b_odd) {
    float t = flush_denormal(fmaf(flush_denormal(a_odd), flush_denormal(b_odd), flush_denormal(acc)));
    return flush_denormal(fmaf(flush_denormal(a_even), flush_denormal(b_even), t));
}

// The lanes summed by halving: 16 as GCC's _mm512_reduce_add_ps, 8 as
// tinyBLAS's hsum(__m256). Lane i and lane i + half first, down to one.
static float sum_lanes(float * acc, int lanes) {
    for (int half = lanes / 2; half >= 1; half /= 2) {
        for (int i = 0; i < half; i++) acc[i] = acc[i] + acc[i + half];
    }
    return acc[0];
}

#if defined(MG_NEON)
#include <arm_neon.h>

// One output of tinyBLAS on NEON: F32 lane t takes elements t, t + 4, ...
// with vfmaq_f32 and hsum is vaddvq_f32 ((0 + 1) + (2 + 3)); F16 lane t of 8
// takes t, t + 8, ... with vfmaq_f16 (rounded to half), and hsum widens the
// 8 halves and adds lanes t and t + 4 in float before vaddvq_f32.
static float neon_gemm_dot(enum mg_type type, int64_t k, const void * w_row, const void * x_col) {
    if (type == MG_TYPE_F16) {
        float16x8_t acc = vdupq_n_f16(0.0f);
        for (int64_t l = 0; l < k; l += 8) {
            acc = vfmaq_f16(acc, vld1q_f16((const __fp16 *) w_row + l), vld1q_f16((const __fp16 *) x_col + l));
        }
        return vaddvq_f32(vaddq_f32(vcvt_f32_f16(vget_low_f16(acc)), vcvt_f32_f16(vget_high_f16(acc))));
    }
    float32x4_t acc = vdupq_n_f32(0.0f);
    for (int64_t l = 0; l < k; l += 4) {
        acc = vfmaq_f32(acc, vld1q_f32((const float *) w_row + l), vld1q_f32((const float *) x_col + l));
    }
    return vaddvq_f32(acc);
}
#endif

void mg_gemm_float_dot(enum mg_type type, int64_t k, float * s, const void * w_row, const void * x_col) {
    const struct mg_gemm_float_order o = mg_gemm_float_order(type);
#if defined(MG_NEON)
    MG_ASSERT(o.step > 0 && k % o.step == 0);
    *s = neon_gemm_dot(type, k, w_row, x_col);
    return;
#endif
    MG_ASSERT(o.step > 0 && k % o.step == 0);
    float acc[16] = {0};
    for (int64_t l = 0; l < k; l += o.step) {
        for (int t = 0; t < o.lanes; t++) {
            if (o.step == o.lanes) {
                acc[t] = fmaf(element(type, w_row, l + t), element(type, x_col, l + t), acc[t]);
            } else {   // pairs: lane t takes elements 2t and 2t + 1 of the step
                const int64_t e = l + 2 * t;
                acc[t] = dot_pair_bf16(acc[t], element(type, w_row, e), element(type, x_col, e),
                                       element(type, w_row, e + 1), element(type, x_col, e + 1));
            }
        }
    }
    *s = sum_lanes(acc, o.lanes);
}

// ---------------------------------------------------------------------------
// The SIMD kernel: a tile of 4 weight rows x up to GEMM_COLS columns
// ---------------------------------------------------------------------------

#define GEMM_ROWS 4   // tinyBLAS's RM, and why it asks for m % 4 == 0

#if defined(MG_SIMD)

#define KERNEL   static inline __attribute__((always_inline))
#define UNROLLED _Pragma("GCC unroll 8")

#if GEMM_LANES == 16
// 6 x 4 accumulators, 4 row vectors and one column vector: 29 of the 32 registers.
#define GEMM_COLS 6
typedef __m512 vfloat;

KERNEL vfloat v_zero(void) {
    return _mm512_setzero_ps();
}

// 16 elements from element i of a row: floats as they are, halves widened
// (exact). BF16 in pairs: 32 raw halves for vdpbf16ps; otherwise widened.
KERNEL vfloat v_load(enum mg_type type, const char * row, int64_t i) {
    switch (type) {
        case MG_TYPE_F16: return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) ((const mg_fp16_t *) row + i)));
        case MG_TYPE_BF16:
#if GEMM_BF16_PAIRS
            return _mm512_loadu_ps((const mg_bf16_t *) row + i);
#else
            return _mm512_castsi512_ps(_mm512_slli_epi32(
                _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *) ((const mg_bf16_t *) row + i))), 16));
#endif
        default: return _mm512_loadu_ps((const float *) row + i);
    }
}

KERNEL vfloat v_madd(enum mg_type type, vfloat a, vfloat b, vfloat acc) {
#if GEMM_BF16_PAIRS
    if (type == MG_TYPE_BF16) return _mm512_dpbf16_ps(acc, (__m512bh) a, (__m512bh) b);
#else
    (void) type;
#endif
    return _mm512_fmadd_ps(a, b, acc);
}

// _mm512_reduce_add_ps in GCC's order, spelled out (clang's intrinsic adds
// in another order): upper 8 + lower 8, 4 + 4, then (0 + 2) + (1 + 3).
KERNEL float v_sum(vfloat v) {
    const __m256 h8 = _mm256_add_ps(_mm512_extractf32x8_ps(v, 1), _mm512_castps512_ps256(v));
    const __m128 h4 = _mm_add_ps(_mm256_extractf128_ps(h8, 1), _mm256_castps256_ps128(h8));
    const __m128 h2 = _mm_add_ps(h4, _mm_movehl_ps(h4, h4));
    return _mm_cvtss_f32(_mm_add_ss(h2, _mm_movehdup_ps(h2)));
}
#else
// AVX2: 16 registers, so 3 x 4 accumulators (tinyBLAS's 4 x 3 as well).
#define GEMM_COLS 3
typedef __m256 vfloat;

KERNEL vfloat v_zero(void) {
    return _mm256_setzero_ps();
}

KERNEL vfloat v_load(enum mg_type type, const char * row, int64_t i) {
    switch (type) {
        case MG_TYPE_F16: return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) ((const mg_fp16_t *) row + i)));
        case MG_TYPE_BF16:
            return _mm256_castsi256_ps(_mm256_slli_epi32(
                _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *) ((const mg_bf16_t *) row + i))), 16));
        default: return _mm256_loadu_ps((const float *) row + i);
    }
}

KERNEL vfloat v_madd(enum mg_type type, vfloat a, vfloat b, vfloat acc) {
    (void) type;
    return _mm256_fmadd_ps(a, b, acc);
}

// tinyBLAS's hsum(__m256): halves, then (0 + 2) + (1 + 3).
KERNEL float v_sum(vfloat v) {
    const __m128 h4 = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
    const __m128 h2 = _mm_add_ps(h4, _mm_movehl_ps(h4, h4));
    return _mm_cvtss_f32(_mm_add_ss(h2, _mm_movehdup_ps(h2)));
}
#endif

// Keep v in a register: without this GCC folds a row vector loaded once into
// every FMA that uses it, loading it again each time (see vec_simd.c).
KERNEL vfloat in_register(vfloat v) {
#if defined(__AVX512F__)
    __asm__("" : "+v"(v));
#else
    __asm__("" : "+x"(v));
#endif
    return v;
}

// One step of l for the tile: the 4 row vectors held in registers and each
// column streamed past them (nc >= 4: 4 + 1 registers besides the
// accumulators, 29 of AVX-512's 32 at 4 x 6).
KERNEL void gemm_step_rows_held(enum mg_type type, int64_t l, const char * w, size_t lda, const char * x, size_t ldb,
                                vfloat acc[][GEMM_ROWS], int nc) {
    vfloat wv[GEMM_ROWS];
    UNROLLED for (int i = 0; i < GEMM_ROWS; i++) wv[i] = in_register(v_load(type, w + (size_t) i * lda, l));
    UNROLLED for (int j = 0; j < nc; j++) {
        const vfloat xv = in_register(v_load(type, x + (size_t) j * ldb, l));
        UNROLLED for (int i = 0; i < GEMM_ROWS; i++) acc[j][i] = v_madd(type, wv[i], xv, acc[j][i]);
    }
}

// The same step with the nc column vectors held and each row streamed past
// them (nc < 4: nc + 1 registers besides the accumulators, so AVX2's 4 x 3
// tile is its 16 registers exactly; holding the rows would need 17, and GCC
// would keep one accumulator in memory, a store and a load every step).
KERNEL void gemm_step_cols_held(enum mg_type type, int64_t l, const char * w, size_t lda, const char * x, size_t ldb,
                                vfloat acc[][GEMM_ROWS], int nc) {
    vfloat xv[GEMM_COLS];
    UNROLLED for (int j = 0; j < nc; j++) xv[j] = in_register(v_load(type, x + (size_t) j * ldb, l));
    UNROLLED for (int i = 0; i < GEMM_ROWS; i++) {
        const vfloat wv = in_register(v_load(type, w + (size_t) i * lda, l));
        UNROLLED for (int j = 0; j < nc; j++) acc[j][i] = v_madd(type, wv, xv[j], acc[j][i]);
    }
}

// tinyBLAS's gemm_bloc<4, nc>: out[j * ldc + i] for 4 rows and nc columns,
// over the elements [l0, l1) of k. Like gemm_bloc ("help compiler for op
// order"), the smaller side of the tile stays in registers; either way each
// accumulator takes the same multiply-adds in the same order. A chunk that
// does not start at 0 picks the accumulators up from part, one that does not
// end at k leaves them there (stored and loaded as they are, to the bit), and
// the last one sums their lanes into out.
KERNEL void gemm_tile(enum mg_type type, int64_t k, int64_t l0, int64_t l1, const char * w, size_t lda, const char * x,
                      size_t ldb, float * out, size_t ldc, int nc, vfloat part[GEMM_COLS][GEMM_ROWS]) {
    const int64_t step = step_of(type);
    vfloat        acc[GEMM_COLS][GEMM_ROWS];
    UNROLLED for (int j = 0; j < nc; j++) {
        UNROLLED for (int i = 0; i < GEMM_ROWS; i++) acc[j][i] = l0 == 0 ? v_zero() : part[j][i];
    }
    for (int64_t l = l0; l < l1; l += step) {
        if (nc >= GEMM_ROWS) {
            gemm_step_rows_held(type, l, w, lda, x, ldb, acc, nc);
        } else {
            gemm_step_cols_held(type, l, w, lda, x, ldb, acc, nc);
        }
    }
    if (l1 < k) {
        UNROLLED for (int j = 0; j < nc; j++) {
            UNROLLED for (int i = 0; i < GEMM_ROWS; i++) part[j][i] = acc[j][i];
        }
        return;
    }
    UNROLLED for (int j = 0; j < nc; j++) {
        UNROLLED for (int i = 0; i < GEMM_ROWS; i++) out[(size_t) j * ldc + (size_t) i] = v_sum(acc[j][i]);
    }
}

// One copy of the tile per type and column count, the loops unrolled.
#if GEMM_COLS == 6
#define GEMM_TILE_CASES(type)                                                     \
    case 1: gemm_tile(type, k, l0, l1, w, lda, x, ldb, out, ldc, 1, part); break; \
    case 2: gemm_tile(type, k, l0, l1, w, lda, x, ldb, out, ldc, 2, part); break; \
    case 3: gemm_tile(type, k, l0, l1, w, lda, x, ldb, out, ldc, 3, part); break; \
    case 4: gemm_tile(type, k, l0, l1, w, lda, x, ldb, out, ldc, 4, part); break; \
    case 5: gemm_tile(type, k, l0, l1, w, lda, x, ldb, out, ldc, 5, part); break; \
    default: gemm_tile(type, k, l0, l1, w, lda, x, ldb, out, ldc, 6, part); break;
#else
#define GEMM_TILE_CASES(type)                                                     \
    case 1: gemm_tile(type, k, l0, l1, w, lda, x, ldb, out, ldc, 1, part); break; \
    case 2: gemm_tile(type, k, l0, l1, w, lda, x, ldb, out, ldc, 2, part); break; \
    default: gemm_tile(type, k, l0, l1, w, lda, x, ldb, out, ldc, 3, part); break;
#endif
#define GEMM_TILE_ENTRY(name, type)                                                                             \
    static void gemm_tile_##name(int64_t k, int64_t l0, int64_t l1, const char * w, size_t lda, const char * x, \
                                 size_t ldb, float * out, size_t ldc, int nc, vfloat part[][GEMM_ROWS]) {       \
        switch (nc) { GEMM_TILE_CASES(type) }                                                                   \
    }
GEMM_TILE_ENTRY(f32, MG_TYPE_F32)
GEMM_TILE_ENTRY(f16, MG_TYPE_F16)
GEMM_TILE_ENTRY(bf16, MG_TYPE_BF16)

typedef void (*gemm_tile_fn)(int64_t k, int64_t l0, int64_t l1, const char * w, size_t lda, const char * x, size_t ldb,
                             float * out, size_t ldc, int nc, vfloat part[][GEMM_ROWS]);

static gemm_tile_fn tile_of(enum mg_type type) {
    switch (type) {
        case MG_TYPE_F32:  return gemm_tile_f32;
        case MG_TYPE_F16:  return gemm_tile_f16;
        case MG_TYPE_BF16: return gemm_tile_bf16;
        default:           MG_ASSERT(false && "no float gemm for this type");
    }
}
#else
#define GEMM_COLS 6
typedef float vfloat;   // unused: the scalar build takes k in one chunk

// The scalar build: the tile as one reference dot product per output.
static void gemm_tile_ref(enum mg_type type, int64_t k, const char * w, size_t lda, const char * x, size_t ldb,
                          float * out, size_t ldc, int nc) {
    for (int j = 0; j < nc; j++) {
        for (int i = 0; i < GEMM_ROWS; i++) {
            mg_gemm_float_dot(type, k, &out[(size_t) j * ldc + (size_t) i], w + (size_t) i * lda, x + (size_t) j * ldb);
        }
    }
}
#endif

// ---------------------------------------------------------------------------
// The product: tiles in row blocks that stay in L2
// ---------------------------------------------------------------------------

// As mul_mat_tiled (compute.c): a block of weight rows (about 128 KB) meets
// every group of columns, and each group, once loaded, serves all the tiles
// of the block. While a block is worked on, each tile call also asks for a
// slice of the next block's rows, so that block is in cache when its turn
// comes instead of arriving from memory during its first group of columns
// (mul_mat_tiled does the same; at AVX2, 12 matrices of 2432 x 768 in turn,
// larger than L3 together, 64 columns: F32 and F16 ~10% faster).
#define GEMM_BLOCK_BYTES (128 * 1024)

// Prefetch the next slice (ask bytes) of the n_next bytes at next.
static void prefetch_slice(const char * next, size_t n_next, size_t ask, size_t * fetched) {
    for (size_t end = *fetched + ask; *fetched < end && *fetched < n_next; *fetched += 64) {
        __builtin_prefetch(next + *fetched);
    }
}

// Long rows are walked in chunks of k, so that a chunk of a tile's rows and
// of its columns (GEMM_ROWS + GEMM_COLS rows of the chunk) fits the 32 KB of
// L1 while the block's tiles take their turns with the same columns. With
// k = 2432 (MiniMind's ffn_down) a tile's F32 rows and columns are 68 KB at
// AVX2, and every tile read the columns from L2 again: 12 such matrices in
// turn, 64 columns, ran at ~73 GFLOP/s, in 3 chunks at ~88 (rows of 768
// stay one chunk). Between chunks the block's tiles keep their accumulators
// in part, stored and loaded as they are; the scalar build takes k whole.
#define GEMM_CHUNK_BYTES (32 * 1024)
#define GEMM_MAX_TILES   16   // tiles of a row block when k is chunked

// Elements of k per chunk: k split evenly into the fewest chunks that fit
// GEMM_CHUNK_BYTES, each a whole number of steps.
static int64_t chunk_of(enum mg_type type, int64_t k) {
#if defined(MG_SIMD)
    const int64_t step  = step_of(type);
    const int64_t most  = (int64_t) (GEMM_CHUNK_BYTES / ((GEMM_ROWS + GEMM_COLS) * mg_type_size(type)));
    const int64_t count = (k + most - 1) / most;
    const int64_t even  = (k + count - 1) / count;
    return (even + step - 1) / step * step;
#else
    (void) type;
    return k;
#endif
}

void mg_gemm_float(enum mg_type type, int64_t k, const void * w, size_t lda, int64_t r0, int64_t r1, const void * x,
                   size_t ldb, int64_t n, float * out, size_t ldc) {
    MG_ASSERT(r0 % GEMM_ROWS == 0 && r1 % GEMM_ROWS == 0 && step_of(type) > 0);
    const int64_t chunk      = chunk_of(type, k);
    const size_t  tile_bytes = GEMM_ROWS * mg_row_size(type, k);
    int64_t       tiles      = tile_bytes < GEMM_BLOCK_BYTES ? (int64_t) (GEMM_BLOCK_BYTES / tile_bytes) : 1;
    if (chunk < k && tiles > GEMM_MAX_TILES) tiles = GEMM_MAX_TILES;
    const int64_t block = GEMM_ROWS * tiles;   // rows of a row block
    // A block's accumulators between chunks: 6 KB at AVX2, 24 KB at AVX-512.
    vfloat part[GEMM_MAX_TILES][GEMM_COLS][GEMM_ROWS];
#if defined(MG_SIMD)
    const gemm_tile_fn tile = tile_of(type);
#endif
    for (int64_t ib = r0; ib < r1; ib += block) {
        const int64_t ie     = ib + block < r1 ? ib + block : r1;
        const int64_t ne     = ie + block < r1 ? ie + block : r1;   // the next block: rows [ie, ne)
        const char *  next   = (const char *) w + (size_t) ie * lda;
        // Not for one column group, which streams the rows once (as mul_mat_tiled).
        const size_t  n_next = n > GEMM_COLS ? (size_t) (ne - ie) * lda : 0;
        const int64_t calls  = (ie - ib) / GEMM_ROWS * ((n + GEMM_COLS - 1) / GEMM_COLS) * ((k + chunk - 1) / chunk);
        const size_t  slice  = (n_next / (size_t) calls + 63) & ~(size_t) 63;   // whole cache lines per call
        size_t        fetched = 0;
        for (int64_t j = 0; j < n; j += GEMM_COLS) {
            const int    nc = (int) (n - j < GEMM_COLS ? n - j : GEMM_COLS);
            const char * xj = (const char *) x + (size_t) j * ldb;
            for (int64_t l0 = 0; l0 < k; l0 += chunk) {
                const int64_t l1 = l0 + chunk < k ? l0 + chunk : k;
                for (int64_t i = ib; i < ie; i += GEMM_ROWS) {
                    const char * wi = (const char *) w + (size_t) i * lda;
                    float *      oi = out + (size_t) j * ldc + (size_t) i;
                    prefetch_slice(next, n_next, slice, &fetched);
#if defined(MG_SIMD)
                    // part holds accumulators between chunks only: a block of one chunk may have more tiles.
                    tile(k, l0, l1, wi, lda, xj, ldb, oi, ldc, nc, chunk < k ? part[(i - ib) / GEMM_ROWS] : NULL);
#else
                    (void) part, (void) l1;   // one chunk: l0 = 0, l1 = k
                    gemm_tile_ref(type, k, wi, lda, xj, ldb, oi, ldc, nc);
#endif
                }
            }
        }
    }
}
