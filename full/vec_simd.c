//@file full
// vec_simd.c - the dot-product kernels of vec.c again, with x86 SIMD: AVX2 +
// FMA + F16C as the base, AVX-512 and VNNI where the build has them (chosen
// at compile time; full/Makefile compiles with -march=native).
//
// Three rules make these kernels safe to swap in for the scalar ones:
//
// 1. The integer part is exact. Each block's sum of code products is an
//    integer that no instruction here can round or overflow, so it does not
//    matter how the lanes split it up.
//
// 2. The float part is a fixed order, close to ggml's x86 kernels: where the
//    scalar *_generic order adds each block into one float, these FMA each
//    block's 8 lane sums into 8 float lanes and sum the lanes at the end. For
//    the float rows and the K-quants that is ggml's own order, operation by
//    operation (ggml-cpu/vec.cpp with the AVX mappings of simd-mappings.h, and
//    its AVX512-BF16 path for BF16; ggml-cpu/arch/x86/quants.c, AVX2 paths),
//    so the same on every machine with AVX2 except for BF16. The 32-element
//    formats split the blocks between two accumulators, as ggml's IQ4_NL
//    kernel does, where ggml's Q4_0/Q8_0/... kernels use one (see there).
//    SIMD and scalar results differ by float rounding only; the test
//    (tests/full/test_vec_simd.c) bounds it.
//
// 3. Every kernel is written once for 1 to 4 activation columns. A weight
//    block is loaded and unpacked once, then multiplied with the block of
//    each column, and every column keeps its own accumulators, updated by the
//    same float instructions in the same order as with one column. That is why
//    vec_dot_cols gives, column by column, exactly what vec_dot gives, and a
//    prompt evaluated as a batch gives the logits of one token at a time.
//
// The activation converters (F32 -> F16, BF16, Q8_0, Q8_1, Q8_K) give the
// same bits as their scalar references for finite input.
//
// What costs time here (measured on a Zen 5 that runs 512-bit instructions
// as two 256-bit halves): the number of vector instructions per block. So the
// registers are 256 bits wide (AVX-512 is used for its instructions: 32
// registers, mask moves, VNNI, BF16 dots), block scales come from a table
// rather than F16C, and nibbles are unpacked with one shift.
#include "vec.h"

#if defined(MG_SIMD)

#include <immintrin.h>
#include <string.h>

#define MAX_COLS MG_VEC_DOT_MAX_COLS

// Every kernel is an always-inline function with the column count nc as a
// parameter; each entry point calls it with a constant nc, so the compiler
// unrolls the column loops and keeps the accumulators in registers.
#define KERNEL static inline __attribute__((always_inline))

// Put before the loops over columns and over the registers of a block: fully
// unrolled, their arrays of accumulators and unpacked codes become registers.
#define UNROLLED _Pragma("GCC unroll 8")

// The two entry points of a kernel: vec_dot (one column) and vec_dot_cols
// (n_cols columns, a copy of the kernel for each count).
#define ENTRY_POINTS(name, kernel)                                                                        \
    void mg_vec_dot_##name##_simd(int64_t n, float * s, const void * x, const void * y) {                \
        kernel(n, s, x, y, 0, 1);                                                                         \
    }                                                                                                     \
    void mg_vec_dot_cols_##name##_simd(int64_t n, float * s, const void * x, const void * y, size_t ys, \
                                       int nc) {                                                          \
        MG_ASSERT(nc >= 1 && nc <= MAX_COLS);                                                             \
        switch (nc) {                                                                                     \
        case 1: kernel(n, s, x, y, ys, 1); break;                                                         \
        case 2: kernel(n, s, x, y, ys, 2); break;                                                         \
        case 3: kernel(n, s, x, y, ys, 3); break;                                                         \
        default: kernel(n, s, x, y, ys, 4); break;                                                        \
        }                                                                                                 \
    }

// 32 bytes from anywhere (no alignment needed).
KERNEL __m256i load_256(const void * p) {
    return _mm256_loadu_si256((const __m256i *) p);
}

// Activation row c of a multi-column call.
KERNEL const void * column(const void * y, size_t y_stride, int c) {
    return (const char *) y + (size_t) c * y_stride;
}

// ---------------------------------------------------------------------------
// Helpers shared by the kernels
// ---------------------------------------------------------------------------

// Every F16 value as a float (ggml: ggml_table_f32_f16), for the block
// scales: one load, where F16C needs a move into a vector register and a
// conversion, which costs the kernels more than the table's 256 KB of cache.
// Filled at program start by F16C, 8 values at a time (exactly).
static float f32_of_f16[1 << 16];

__attribute__((constructor)) static void fill_f32_of_f16(void) {
    for (int h = 0; h < (1 << 16); h += 8) {
        const __m128i halves = _mm_add_epi16(_mm_set1_epi16((short) h), _mm_setr_epi16(0, 1, 2, 3, 4, 5, 6, 7));
        _mm256_storeu_ps(f32_of_f16 + h, _mm256_cvtph_ps(halves));
    }
}

KERNEL float f16(mg_fp16_t h) {
    return f32_of_f16[h];
}

// The same in all 8 lanes, straight from the table (a broadcast load).
KERNEL __m256 f16_x8(mg_fp16_t h) {
    return _mm256_broadcast_ss(&f32_of_f16[h]);
}

// The 8 lanes of x summed as ggml's hsum_float_8 does: halves, then pairs.
KERNEL float hsum_float_8(__m256 x) {
    __m128 r = _mm_add_ps(_mm256_extractf128_ps(x, 1), _mm256_castps256_ps128(x));
    r        = _mm_add_ps(r, _mm_movehl_ps(r, r));   // lanes 0+2, 1+3
    r        = _mm_add_ss(r, _mm_movehdup_ps(r));    // (0+2) + (1+3)
    return _mm_cvtss_f32(r);
}

// The largest of 8 lanes (order is irrelevant for a maximum).
KERNEL float hmax_float_8(__m256 x) {
    __m128 r = _mm_max_ps(_mm256_extractf128_ps(x, 1), _mm256_castps256_ps128(x));
    r        = _mm_max_ps(r, _mm_movehl_ps(r, r));
    r        = _mm_max_ss(r, _mm_movehdup_ps(r));
    return _mm_cvtss_f32(r);
}

KERNEL int hsum_i32_8(__m256i x) {
    __m128i r = _mm_add_epi32(_mm256_extracti128_si256(x, 1), _mm256_castsi256_si128(x));
    r         = _mm_add_epi32(r, _mm_unpackhi_epi64(r, r));
    r         = _mm_add_epi32(r, _mm_shuffle_epi32(r, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(r);
}

// 16 bytes of 4-bit codes -> 32 bytes, one code each: byte j < 16 gets the low
// nibble of qs[j] (element j), byte j + 16 its high nibble (element j + 16).
// The 16 bytes are loaded into both 128-bit halves, the high half is shifted
// right by 4 bits (as 64-bit lanes: each byte's high nibble moves down, bits of
// its neighbour move into its top), and the mask keeps the low 4 bits.
KERNEL __m256i unpack_nibbles_32(const uint8_t * qs) {
    const __m256i twice = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *) qs));
    return _mm256_and_si256(_mm256_srlv_epi64(twice, _mm256_setr_epi64x(0, 0, 4, 4)), _mm256_set1_epi8(0x0f));
}

// 32 bits (qh, read little-endian) -> 32 bytes, 0xff where bit j is set.
KERNEL __m256i spread_bits_32(const uint8_t * qh) {
    uint32_t bits;
    memcpy(&bits, qh, sizeof(bits));
#if defined(__AVX512BW__) && defined(__AVX512VL__)
    return _mm256_movm_epi8(bits);   // AVX-512 has an instruction for exactly this
#else
    // Byte j takes byte j/8 of the bits (the shuffle stays within 128-bit
    // halves, and both halves hold all 4 bytes), then tests its bit j%8.
    const __m256i byte_of_j = _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303);
    const __m256i bytes     = _mm256_shuffle_epi8(_mm256_set1_epi32((int) bits), byte_of_j);
    const __m256i bit_of_j  = _mm256_set1_epi64x((long long) 0x8040201008040201);
    return _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit_of_j), bit_of_j);
#endif
}

// 8 int32 lanes: lane k = sum over bytes 4k..4k+3 of u * s, with u read as
// unsigned and s as signed bytes. VNNI does it in one instruction; AVX2 needs
// maddubs (pairs into int16) and madd (pairs of pairs into int32). maddubs
// saturates at +-32767, which a pair here never reaches: the largest is
// 2 * 128 * 127 (a Q8_0 weight of -128 against an activation of +-127;
// activation codes stay within -127..127).
KERNEL __m256i dot_u8_s8(__m256i u, __m256i s) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#elif defined(__AVXVNNI__)
    return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), u, s);
#else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}

// The same for two signed operands, by the sign trick: x * y = |x| * (y with
// x's sign), and |x| fits an unsigned byte. abs_x = _mm256_sign_epi8(x, x) is
// the weight's part, computed once per block for all columns.
KERNEL __m256i dot_s8_s8(__m256i abs_x, __m256i x, __m256i y) {
    return dot_u8_s8(abs_x, _mm256_sign_epi8(y, x));
}

// (p[0] + p[1]) + (p[2] + p[3]), lane by lane.
KERNEL __m256i sum4_i32(const __m256i p[4]) {
    return _mm256_add_epi32(_mm256_add_epi32(p[0], p[1]), _mm256_add_epi32(p[2], p[3]));
}

// A byte-shuffle control that copies int16 number lo into every int16 of the
// low 128-bit half and int16 number hi into every int16 of the high half.
KERNEL __m256i pick_i16(int lo, int hi) {
    return _mm256_set_m128i(_mm_set1_epi16((short) (2 * hi | (2 * hi + 1) << 8)),
                            _mm_set1_epi16((short) (2 * lo | (2 * lo + 1) << 8)));
}

// ---------------------------------------------------------------------------
// Activation converters. Scalar references: mg_fp32_to_fp16_row,
// mg_fp32_to_bf16_row (quants.c), mg_quantize_row_q8_0 (quants.c),
// mg_quantize_row_q8_1 (quants_legacy.c), mg_quantize_row_q8_K (quants_k.c).
// ---------------------------------------------------------------------------

// F16C's conversion rounds to nearest even, as mg_fp32_to_fp16 does, and
// overflows to inf the same way; only NaN payloads other than the default
// quiet NaN come out differently (F16C keeps their top bits).
void mg_fp32_to_fp16_row_simd(const float * x, void * vy, int64_t n) {
    mg_fp16_t * y = vy;
    int64_t     i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
        _mm_storeu_si128((__m128i *) (y + i), h);
    }
    for (; i < n; i++) y[i] = mg_fp32_to_fp16(x[i]);
}

// mg_fp32_to_bf16 on 8 lanes at once: the same integer formula (round to
// nearest even by adding 0x7fff plus the lowest kept bit; NaN kept quiet).
// Not AVX512-BF16's conversion instruction, which flushes subnormals.
void mg_fp32_to_bf16_row_simd(const float * x, void * vy, int64_t n) {
    mg_bf16_t * y = vy;
    int64_t     i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256i u       = load_256(x + i);
        const __m256i top     = _mm256_srli_epi32(u, 16);
        const __m256i odd     = _mm256_and_si256(top, _mm256_set1_epi32(1));
        const __m256i bias    = _mm256_add_epi32(odd, _mm256_set1_epi32(0x7fff));
        const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(u, bias), 16);
        const __m256i quiet   = _mm256_or_si256(top, _mm256_set1_epi32(0x40));
        const __m256i is_nan  = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
                                                   _mm256_set1_epi32(0x7f800000));
        const __m256i h32     = _mm256_blendv_epi8(rounded, quiet, is_nan);   // 8 values < 0x10000
        // Pack to 16 bits: packus works within 128-bit halves, the permute
        // brings the two results together.
        const __m256i h16 = _mm256_permute4x64_epi64(_mm256_packus_epi32(h32, h32), _MM_SHUFFLE(3, 1, 2, 0));
        _mm_storeu_si128((__m128i *) (y + i), _mm256_castsi256_si128(h16));
    }
    for (; i < n; i++) y[i] = mg_fp32_to_bf16(x[i]);
}

// One block of 32 activations by the x86 rule (ggml: quantize_row_q8_0, AVX2
// path): d = amax/127, codes = x * (127/amax) rounded half to even. Stores the
// codes and returns d; *code_sum gets the sum of the stored codes.
KERNEL float quantize_block_q8(const float * x, int8_t qs[32], int * code_sum) {
    __m256 v[4];
    __m256 amax8 = _mm256_setzero_ps();
    UNROLLED for (int k = 0; k < 4; k++) {
        v[k]  = _mm256_loadu_ps(x + 8 * k);
        amax8 = _mm256_max_ps(amax8, _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v[k]));   // |x|: clear the sign bit
    }
    const float amax = hmax_float_8(amax8);
    const float d    = amax / 127.0f;
    const float id   = amax != 0.0f ? 127.0f / amax : 0.0f;

    __m256i q[4];
    UNROLLED for (int k = 0; k < 4; k++) {
        // One multiply and one rounding, exactly as the scalar x[j] * id and
        // mg_nearest_int; the products are within +-127, so the conversion
        // and the saturating packs below never clamp.
        const __m256 r = _mm256_round_ps(_mm256_mul_ps(v[k], _mm256_set1_ps(id)),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        q[k]           = _mm256_cvtps_epi32(r);
    }
    // int32 -> int16 -> int8. The packs work within 128-bit halves, which
    // leaves the 4-byte groups in the order 0 2 4 6 1 3 5 7; the permute
    // puts them back.
    const __m256i q16   = _mm256_packs_epi32(q[0], q[1]);
    const __m256i q16b  = _mm256_packs_epi32(q[2], q[3]);
    const __m256i q8    = _mm256_packs_epi16(q16, q16b);
    const __m256i codes = _mm256_permutevar8x32_epi32(q8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i *) qs, codes);
    *code_sum = hsum_i32_8(dot_u8_s8(_mm256_set1_epi8(1), codes));
    return d;
}

void mg_quantize_row_q8_0_simd(const float * x, void * vy, int64_t n) {
    struct mg_block_q8_0 * y = vy;
    for (int64_t b = 0; b < n / MG_QK8_0; b++) {
        int         sum;
        const float d = quantize_block_q8(x + b * MG_QK8_0, y[b].qs, &sum);
        y[b].d        = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
    }
}

// Q8_1 adds s = d * (sum of the codes), both rounded to F16 (ggml: quantize_row_q8_1).
void mg_quantize_row_q8_1_simd(const float * x, void * vy, int64_t n) {
    struct mg_block_q8_1 * y = vy;
    for (int64_t b = 0; b < n / MG_QK8_1; b++) {
        int         sum;
        const float d = quantize_block_q8(x + b * MG_QK8_1, y[b].qs, &sum);
        y[b].d        = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
        y[b].s        = _cvtss_sh(d * (float) sum, _MM_FROUND_TO_NEAREST_INT);
    }
}

// Q8_K: the reference rule on every platform (ggml has no SIMD version of
// it). The scale comes from the signed value of largest magnitude, the first
// one when several tie (the scalar loop keeps the first strict maximum), so
// the vectors find the maximum |x| and then its first position.
void mg_quantize_row_q8_K_simd(const float * x, void * vy, int64_t n) {
    struct mg_block_q8_K * y     = vy;
    const __m256           nosign = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int64_t i = 0; i < n / MG_QK_K; i++, x += MG_QK_K) {
        __m256 amax8 = _mm256_setzero_ps();
        for (int k = 0; k < MG_QK_K; k += 8) {
            amax8 = _mm256_max_ps(amax8, _mm256_and_ps(_mm256_loadu_ps(x + k), nosign));
        }
        const float amax = hmax_float_8(amax8);
        if (amax == 0.0f) {
            memset(&y[i], 0, sizeof(y[i]));   // as the scalar version: d = 0, codes and bsums 0
            continue;
        }
        int first = 0;
        for (int k = 0; k < MG_QK_K; k += 8) {
            const __m256 ax   = _mm256_and_ps(_mm256_loadu_ps(x + k), nosign);
            const int    mask = _mm256_movemask_ps(_mm256_cmp_ps(ax, _mm256_set1_ps(amax), _CMP_EQ_OQ));
            if (mask != 0) {
                first = k + __builtin_ctz((unsigned) mask);
                break;
            }
        }
        const float  iscale = -127.0f / x[first];
        const __m256 scale  = _mm256_set1_ps(iscale);
        for (int k = 0; k < MG_QK_K; k += 32) {
            __m256i q[4];
            UNROLLED for (int j = 0; j < 4; j++) {
                const __m256 r = _mm256_round_ps(_mm256_mul_ps(scale, _mm256_loadu_ps(x + k + 8 * j)),
                                                 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                q[j]           = _mm256_min_epi32(_mm256_cvtps_epi32(r), _mm256_set1_epi32(127));
            }
            const __m256i q8 = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
            _mm256_storeu_si256((__m256i *) (y[i].qs + k),
                                _mm256_permutevar8x32_epi32(q8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
        }
        for (int j = 0; j < MG_QK_K / 16; j++) {
            const __m256i codes = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *) (y[i].qs + 16 * j)));
            y[i].bsums[j]       = (int16_t) hsum_i32_8(_mm256_madd_epi16(codes, _mm256_set1_epi16(1)));
        }
        y[i].d = 1 / iscale;
    }
}

// ---------------------------------------------------------------------------
// Float rows. Scalar references: mg_vec_dot_f32, mg_vec_dot_f16,
// mg_vec_dot_bf16 (vec.c). ggml: ggml_vec_dot_f32/_f16/_bf16 (vec.cpp) with
// the AVX mappings of simd-mappings.h (GGML_F32_STEP 32, GGML_F32_EPR 8): 4
// accumulators of 8 lanes take every 4th group of 8 products; at the end
// they are added (0+2) + (1+3), the lanes summed, and the leftover n % 32
// elements added one by one. (ggml's AVX-512 mapping takes 64 at a time; on a
// machine that splits 512-bit instructions it is no faster, and it leaves
// the last 32 of a 96-element attention head to the slow one-by-one loop.)
// ---------------------------------------------------------------------------

#define F32_LANES 8
#define F32_STEP  (4 * F32_LANES)   // GGML_F32_STEP

KERNEL __m256 load_f16_8(const mg_fp16_t * p) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) p));
}

// GGML_F32x8_REDUCE's last step: halves, then two horizontal adds.
KERNEL float reduce_8(__m256 v) {
    const __m128 h4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 h2 = _mm_hadd_ps(h4, h4);
    return _mm_cvtss_f32(_mm_hadd_ps(h2, h2));
}

KERNEL float reduce_4(const __m256 acc[4]) {
    return reduce_8(_mm256_add_ps(_mm256_add_ps(acc[0], acc[2]), _mm256_add_ps(acc[1], acc[3])));
}

// F32: the leftovers are added in float.
KERNEL void dot_f32(int64_t n, float * s, const void * vx, const void * vy, size_t ys, int nc) {
    const float * x = vx;
    const float * y[MAX_COLS];
    __m256        acc[MAX_COLS][4];
    UNROLLED for (int c = 0; c < nc; c++) {
        y[c] = column(vy, ys, c);
        UNROLLED for (int j = 0; j < 4; j++) acc[c][j] = _mm256_setzero_ps();
    }
    const int64_t np = n - n % F32_STEP;
    for (int64_t i = 0; i < np; i += F32_STEP) {
        UNROLLED for (int j = 0; j < 4; j++) {
            const __m256 xv = _mm256_loadu_ps(x + i + j * F32_LANES);
            UNROLLED for (int c = 0; c < nc; c++) {
                acc[c][j] = _mm256_fmadd_ps(xv, _mm256_loadu_ps(y[c] + i + j * F32_LANES), acc[c][j]);
            }
        }
    }
    UNROLLED for (int c = 0; c < nc; c++) {
        float sum = reduce_4(acc[c]);
        for (int64_t i = np; i < n; i++) sum += x[i] * y[c][i];
        s[c] = sum;
    }
}
ENTRY_POINTS(f32, dot_f32)

// F16: rows widened by F16C; the reduced sum and the leftovers in double.
KERNEL void dot_f16(int64_t n, float * s, const void * vx, const void * vy, size_t ys, int nc) {
    const mg_fp16_t * x = vx;
    const mg_fp16_t * y[MAX_COLS];
    __m256            acc[MAX_COLS][4];
    UNROLLED for (int c = 0; c < nc; c++) {
        y[c] = column(vy, ys, c);
        UNROLLED for (int j = 0; j < 4; j++) acc[c][j] = _mm256_setzero_ps();
    }
    const int64_t np = n - n % F32_STEP;
    for (int64_t i = 0; i < np; i += F32_STEP) {
        UNROLLED for (int j = 0; j < 4; j++) {
            const __m256 xv = load_f16_8(x + i + j * F32_LANES);
            UNROLLED for (int c = 0; c < nc; c++) {
                acc[c][j] = _mm256_fmadd_ps(xv, load_f16_8(y[c] + i + j * F32_LANES), acc[c][j]);
            }
        }
    }
    UNROLLED for (int c = 0; c < nc; c++) {
        double sum = reduce_4(acc[c]);
        for (int64_t i = np; i < n; i++) sum += (double) (f16(x[i]) * f16(y[c][i]));
        s[c] = (float) sum;
    }
}
ENTRY_POINTS(f16, dot_f16)

// BF16: a bf16 becomes a float by moving its bits up 16.
KERNEL float bf16(mg_bf16_t h) {
    return mg_bf16_to_fp32(h);
}

#if defined(__AVX512BF16__)
// _mm512_reduce_add_ps as GCC and clang define it: halves, halves, pairs.
KERNEL float reduce_16(__m512 v) {
    const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
    const __m256 h8 = _mm256_add_ps(_mm512_castps512_ps256(v), hi);
    const __m128 h4 = _mm_add_ps(_mm256_castps256_ps128(h8), _mm256_extractf128_ps(h8, 1));
    const __m128 h2 = _mm_add_ps(h4, _mm_movehl_ps(h4, h4));
    return _mm_cvtss_f32(_mm_add_ss(h2, _mm_movehdup_ps(h2)));
}

// ggml's AVX512-BF16 path: vdpbf16ps multiplies bf16 pairs and adds both
// products to a float lane (each product is exact in float; denormals are
// flushed), 2 accumulators of 16 lanes, each reduced into a double.
KERNEL void dot_bf16(int64_t n, float * s, const void * vx, const void * vy, size_t ys, int nc) {
    const mg_bf16_t * x = vx;
    const mg_bf16_t * y[MAX_COLS];
    __m512            acc[MAX_COLS][2];
    UNROLLED for (int c = 0; c < nc; c++) {
        y[c]      = column(vy, ys, c);
        acc[c][0] = _mm512_setzero_ps();
        acc[c][1] = _mm512_setzero_ps();
    }
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        const __m512i x0 = _mm512_loadu_si512(x + i), x1 = _mm512_loadu_si512(x + i + 32);
        UNROLLED for (int c = 0; c < nc; c++) {
            acc[c][0] = _mm512_dpbf16_ps(acc[c][0], (__m512bh) x0, (__m512bh) _mm512_loadu_si512(y[c] + i));
            acc[c][1] = _mm512_dpbf16_ps(acc[c][1], (__m512bh) x1, (__m512bh) _mm512_loadu_si512(y[c] + i + 32));
        }
    }
    UNROLLED for (int c = 0; c < nc; c++) {
        double sum = 0;
        sum += reduce_16(acc[c][0]);
        sum += reduce_16(acc[c][1]);
        for (int64_t k = i; k < n; k++) sum += (double) (bf16(x[k]) * bf16(y[c][k]));
        s[c] = (float) sum;
    }
}
#else
// ggml's AVX2 path: 4 accumulators of 8 lanes, multiply then add.
KERNEL __m256 load_bf16_8(const mg_bf16_t * p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *) p)), 16));
}

KERNEL void dot_bf16(int64_t n, float * s, const void * vx, const void * vy, size_t ys, int nc) {
    const mg_bf16_t * x = vx;
    const mg_bf16_t * y[MAX_COLS];
    __m256            acc[MAX_COLS][4];
    UNROLLED for (int c = 0; c < nc; c++) {
        y[c] = column(vy, ys, c);
        UNROLLED for (int j = 0; j < 4; j++) acc[c][j] = _mm256_setzero_ps();
    }
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        UNROLLED for (int j = 0; j < 4; j++) {
            const __m256 xv = load_bf16_8(x + i + 8 * j);
            UNROLLED for (int c = 0; c < nc; c++) {
                acc[c][j] = _mm256_add_ps(_mm256_mul_ps(xv, load_bf16_8(y[c] + i + 8 * j)), acc[c][j]);
            }
        }
    }
    UNROLLED for (int c = 0; c < nc; c++) {
        const __m256 all = _mm256_add_ps(_mm256_add_ps(acc[c][0], acc[c][2]), _mm256_add_ps(acc[c][1], acc[c][3]));
        double       sum = 0;
        sum += hsum_float_8(all);
        for (int64_t k = i; k < n; k++) sum += (double) (bf16(x[k]) * bf16(y[c][k]));
        s[c] = (float) sum;
    }
}
#endif
ENTRY_POINTS(bf16, dot_bf16)

// ---------------------------------------------------------------------------
// 32-element blocks x Q8_0/Q8_1: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, one
// kernel for all six. Per block the weight codes are unpacked into one
// register of 32 bytes in element order (the activation codes already are),
// a dot product gives 8 lane sums of 4 products each, and
//     acc = fma(dW * dA, float(lane sums), acc)
// adds them to 8 float lanes, summed once at the end. The types differ only
// in how a block unpacks (unpack_codes) and in the min of Q4_1/Q5_1, whose
// products with Q8_1's s go into a scalar sum (ggml: summs).
//
// ggml's AVX2 kernels (ggml_vec_dot_q4_0_q8_0 and the others) keep one
// accumulator, so each block waits for the previous block's FMA (4 cycles);
// we keep two, even blocks in one and odd blocks in the other, and add them
// before the lanes are summed, as ggml's IQ4_NL kernel does (ggml adds an odd
// last block in scalar code; we add it to the even accumulator).
// ---------------------------------------------------------------------------

// The codes of weight block b as 32 bytes in element order: unsigned for the
// types whose value is code * d minus a fixed offset (Q4_0: q - 8, Q5_0:
// q - 16) or plus a min (Q4_1, Q5_1), signed for Q8_0 and IQ4_NL.
KERNEL __m256i unpack_codes(enum mg_type type, const void * row, int64_t b) {
    switch (type) {
    case MG_TYPE_Q4_0: return unpack_nibbles_32(((const struct mg_block_q4_0 *) row)[b].qs);
    case MG_TYPE_Q4_1: return unpack_nibbles_32(((const struct mg_block_q4_1 *) row)[b].qs);
    case MG_TYPE_Q5_0: {   // nibble | 16 * bit
        const struct mg_block_q5_0 * x = (const struct mg_block_q5_0 *) row + b;
        const __m256i fifth = _mm256_and_si256(spread_bits_32(x->qh), _mm256_set1_epi8(0x10));
        return _mm256_or_si256(unpack_nibbles_32(x->qs), fifth);
    }
    case MG_TYPE_Q5_1: {
        const struct mg_block_q5_1 * x = (const struct mg_block_q5_1 *) row + b;
        const __m256i fifth = _mm256_and_si256(spread_bits_32(x->qh), _mm256_set1_epi8(0x10));
        return _mm256_or_si256(unpack_nibbles_32(x->qs), fifth);
    }
    case MG_TYPE_Q8_0: return load_256(((const struct mg_block_q8_0 *) row)[b].qs);
    case MG_TYPE_IQ4_NL: {   // the 16 levels fit a 128-bit register: one byte shuffle looks up all 32 codes
        const __m128i levels = _mm_loadu_si128((const __m128i *) mg_kvalues_iq4nl);
        const __m256i codes  = unpack_nibbles_32(((const struct mg_block_iq4_nl *) row)[b].qs);
        return _mm256_shuffle_epi8(_mm256_set_m128i(levels, levels), codes);
    }
    default: __builtin_unreachable();
    }
}

// The offset subtracted from the unsigned codes of Q4_0 and Q5_0 (0 for the others).
KERNEL int code_offset(enum mg_type type) {
    return type == MG_TYPE_Q4_0 ? 8 : type == MG_TYPE_Q5_0 ? 16 : 0;
}

KERNEL bool has_min(enum mg_type type) {
    return type == MG_TYPE_Q4_1 || type == MG_TYPE_Q5_1;
}

KERNEL size_t block_bytes(enum mg_type type) {
    switch (type) {
    case MG_TYPE_Q4_0: return sizeof(struct mg_block_q4_0);
    case MG_TYPE_Q4_1: return sizeof(struct mg_block_q4_1);
    case MG_TYPE_Q5_0: return sizeof(struct mg_block_q5_0);
    case MG_TYPE_Q5_1: return sizeof(struct mg_block_q5_1);
    case MG_TYPE_Q8_0: return sizeof(struct mg_block_q8_0);
    case MG_TYPE_IQ4_NL: return sizeof(struct mg_block_iq4_nl);
    default: __builtin_unreachable();
    }
}

// Every block of this family starts with its F16 scale d; Q4_1/Q5_1 follow it with the min m.
KERNEL const mg_fp16_t * block_header(enum mg_type type, const void * row, int64_t b) {
    return (const mg_fp16_t *) ((const char *) row + (size_t) b * block_bytes(type));
}

// Weight block b against block b of each column, into acc[c]; summs[c] gets m * s.
//
// The integer lanes come out the same whichever way they are computed, so each
// case takes the cheapest: unsigned codes meet the activations directly; an
// offset comes off as offset * (the sum of each 4 activation codes), which is
// one more dot product per column, cheaper than the sign trick with one column
// and dearer with several, where the sign trick shares |x| between them.
KERNEL void add_block_32(enum mg_type type, const void * x, int64_t b, const void * const y[], int nc,
                         __m256 acc[], float summs[]) {
    const mg_fp16_t * hx           = block_header(type, x, b);
    const __m256i     codes        = unpack_codes(type, x, b);
    const int         offset       = code_offset(type);
    const bool        unsigned_dot = has_min(type) || (offset != 0 && nc == 1);
    const __m256i     qx           = offset != 0 ? _mm256_sub_epi8(codes, _mm256_set1_epi8((char) offset)) : codes;
    const __m256i     ax           = _mm256_sign_epi8(qx, qx);   // |x|, for the sign trick
    UNROLLED for (int c = 0; c < nc; c++) {
        // Q8_1 (with the min) starts d, s, codes; Q8_0 d, codes.
        const mg_fp16_t * hy = has_min(type) ? &((const struct mg_block_q8_1 *) y[c])[b].d
                                             : &((const struct mg_block_q8_0 *) y[c])[b].d;
        const int8_t *    qs = has_min(type) ? ((const struct mg_block_q8_1 *) y[c])[b].qs
                                             : ((const struct mg_block_q8_0 *) y[c])[b].qs;
        const __m256i     qy = load_256(qs);
        __m256i           lanes;
        if (unsigned_dot) {
            lanes = dot_u8_s8(codes, qy);
            if (offset != 0) lanes = _mm256_sub_epi32(lanes, dot_u8_s8(_mm256_set1_epi8((char) offset), qy));
        } else {
            lanes = dot_s8_s8(ax, qx, qy);
        }
        if (has_min(type)) summs[c] += f16(hx[1]) * f16(hy[1]);
        acc[c] = _mm256_fmadd_ps(_mm256_mul_ps(f16_x8(hx[0]), f16_x8(hy[0])), _mm256_cvtepi32_ps(lanes), acc[c]);
    }
}

KERNEL void dot_blocks_32(enum mg_type type, int64_t n, float * s, const void * x, const void * vy, size_t ys, int nc) {
    const void * y[MAX_COLS];
    __m256       even[MAX_COLS], odd[MAX_COLS];
    float        summs[MAX_COLS];
    UNROLLED for (int c = 0; c < nc; c++) {
        y[c]     = column(vy, ys, c);
        even[c]  = _mm256_setzero_ps();
        odd[c]   = _mm256_setzero_ps();
        summs[c] = 0.0f;
    }
    const int64_t nb = n / 32;
    int64_t       b  = 0;
    for (; b + 1 < nb; b += 2) {
        add_block_32(type, x, b, y, nc, even, summs);
        add_block_32(type, x, b + 1, y, nc, odd, summs);
    }
    if (b < nb) add_block_32(type, x, b, y, nc, even, summs);
    UNROLLED for (int c = 0; c < nc; c++) {
        s[c] = hsum_float_8(_mm256_add_ps(even[c], odd[c]));
        if (has_min(type)) s[c] += summs[c];
    }
}

KERNEL void dot_q4_0_q8_0(int64_t n, float * s, const void * x, const void * y, size_t ys, int nc) {
    dot_blocks_32(MG_TYPE_Q4_0, n, s, x, y, ys, nc);
}
ENTRY_POINTS(q4_0_q8_0, dot_q4_0_q8_0)

KERNEL void dot_q4_1_q8_1(int64_t n, float * s, const void * x, const void * y, size_t ys, int nc) {
    dot_blocks_32(MG_TYPE_Q4_1, n, s, x, y, ys, nc);
}
ENTRY_POINTS(q4_1_q8_1, dot_q4_1_q8_1)

KERNEL void dot_q5_0_q8_0(int64_t n, float * s, const void * x, const void * y, size_t ys, int nc) {
    dot_blocks_32(MG_TYPE_Q5_0, n, s, x, y, ys, nc);
}
ENTRY_POINTS(q5_0_q8_0, dot_q5_0_q8_0)

KERNEL void dot_q5_1_q8_1(int64_t n, float * s, const void * x, const void * y, size_t ys, int nc) {
    dot_blocks_32(MG_TYPE_Q5_1, n, s, x, y, ys, nc);
}
ENTRY_POINTS(q5_1_q8_1, dot_q5_1_q8_1)

KERNEL void dot_q8_0_q8_0(int64_t n, float * s, const void * x, const void * y, size_t ys, int nc) {
    dot_blocks_32(MG_TYPE_Q8_0, n, s, x, y, ys, nc);
}
ENTRY_POINTS(q8_0_q8_0, dot_q8_0_q8_0)

KERNEL void dot_iq4_nl_q8_0(int64_t n, float * s, const void * x, const void * y, size_t ys, int nc) {
    dot_blocks_32(MG_TYPE_IQ4_NL, n, s, x, y, ys, nc);
}
ENTRY_POINTS(iq4_nl_q8_0, dot_iq4_nl_q8_0)

// ---------------------------------------------------------------------------
// K-quants x Q8_K (ggml: the AVX2 paths of ggml_vec_dot_q*_K_q8_K). Codes are
// unpacked 32 at a time, in element order, as unsigned bytes; maddubs
// multiplies them with 32 activation codes into 16 pair sums (int16, far from
// saturating), and madd with the sub-block scales (int16) turns those into 8
// int32 lanes of scaled sums. The lanes of a whole super-block are added as
// integers, then
//     acc = fma(dW * dA, float(lanes), acc)
// once per super-block. Q8_K's bsums pay for the mins of Q2_K/Q4_K/Q5_K.
// ---------------------------------------------------------------------------

// Q2_K (scalar: mg_vec_dot_q2_K_q8_K): in each half of 128 elements, 32 bytes
// hold 4 codes each, for the elements l, l+32, l+64, l+96 (bits 0-1, 2-3,
// 4-5, 6-7 of byte l): shift and mask give 32 consecutive elements at a time,
// two sub-blocks of 16 whose scales pick_i16 spreads over the two halves.
KERNEL void dot_q2_K_q8_K(int64_t n, float * s, const void * vx, const void * vy, size_t ys, int nc) {
    const struct mg_block_q2_K * x = vx;
    const struct mg_block_q8_K * y[MAX_COLS];
    __m256                       acc[MAX_COLS];
    UNROLLED for (int c = 0; c < nc; c++) {
        y[c]   = column(vy, ys, c);
        acc[c] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < n / MG_QK_K; i++) {
        const float   dx       = f16(x[i].d), dminx = f16(x[i].dmin);
        const __m128i packed   = _mm_loadu_si128((const __m128i *) x[i].scales);   // scale | min << 4
        const __m256i mins     = _mm256_cvtepi8_epi16(_mm_and_si128(_mm_srli_epi16(packed, 4), _mm_set1_epi8(0xf)));
        const __m256i scales16 = _mm256_cvtepi8_epi16(_mm_and_si128(packed, _mm_set1_epi8(0xf)));
        // scales[h]: the 8 scales of half h, in both 128-bit halves
        const __m256i scales[2] = {_mm256_permute2x128_si256(scales16, scales16, 0x00),
                                   _mm256_permute2x128_si256(scales16, scales16, 0x11)};
        float   d[MAX_COLS];
        __m256i sumi[MAX_COLS];
        UNROLLED for (int c = 0; c < nc; c++) {
            const __m256i bsums = load_256(y[c][i].bsums);
            const float   dmin  = -y[c][i].d * dminx;
            acc[c]  = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(_mm256_madd_epi16(mins, bsums)), acc[c]);
            d[c]    = y[c][i].d * dx;
            sumi[c] = _mm256_setzero_si256();
        }
        UNROLLED for (int h = 0; h < 2; h++) {
            const __m256i bits = load_256(x[i].qs + 32 * h);
            __m256i       q[4], sc[4];
            UNROLLED for (int k = 0; k < 4; k++) {
                q[k]  = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * k), _mm256_set1_epi8(3));
                sc[k] = _mm256_shuffle_epi8(scales[h], pick_i16(2 * k, 2 * k + 1));
            }
            UNROLLED for (int c = 0; c < nc; c++) {
                const int8_t * q8 = y[c][i].qs + 128 * h;
                __m256i        p[4];
                UNROLLED for (int k = 0; k < 4; k++) {
                    const __m256i a = load_256(q8 + 32 * k);
                    p[k]            = _mm256_madd_epi16(sc[k], _mm256_maddubs_epi16(q[k], a));
                }
                sumi[c] = _mm256_add_epi32(sumi[c], sum4_i32(p));
            }
        }
        UNROLLED for (int c = 0; c < nc; c++) {
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(d[c]), _mm256_cvtepi32_ps(sumi[c]), acc[c]);
        }
    }
    UNROLLED for (int c = 0; c < nc; c++) s[c] = hsum_float_8(acc[c]);
}
ENTRY_POINTS(q2_K_q8_K, dot_q2_K_q8_K)

// The 16 signed scales of a Q3_K block (mg_q3_K_scale, all at once): the low
// 4 bits of scale j are the low nibble of byte j (j < 8) or the high nibble of
// byte j-8, its top 2 bits sit in bytes 8..11, 2 bits per group of 4 scales.
// Working on 4 bytes at a time: the result's int32 number g holds scales
// 4g..4g+3. (ggml: the aux/kmask trick of ggml_vec_dot_q3_K_q8_K.)
KERNEL __m128i q3_K_scales(const uint8_t * packed) {
    uint32_t a[3];
    memcpy(a, packed, sizeof(a));
    const uint32_t low4 = 0x0f0f0f0f, top2 = 0x03030303;
    const __m128i  s    = _mm_setr_epi32((int) ((a[0] & low4) | ((a[2] >> 0 & top2) << 4)),
                                         (int) ((a[1] & low4) | ((a[2] >> 2 & top2) << 4)),
                                         (int) ((a[0] >> 4 & low4) | ((a[2] >> 4 & top2) << 4)),
                                         (int) ((a[1] >> 4 & low4) | ((a[2] >> 6 & top2) << 4)));
    return _mm_sub_epi8(s, _mm_set1_epi8(32));
}

// Q3_K (scalar: mg_vec_dot_q3_K_q8_K): the 2 low bits as Q2_K; a clear high
// bit means -4, so (low2 - 4 * !high) . a = low2 . a - (4 * !high) . a, two
// maddubs with unsigned left operands, subtracted.
KERNEL void dot_q3_K_q8_K(int64_t n, float * s, const void * vx, const void * vy, size_t ys, int nc) {
    const struct mg_block_q3_K * x = vx;
    const struct mg_block_q8_K * y[MAX_COLS];
    __m256                       acc[MAX_COLS];
    UNROLLED for (int c = 0; c < nc; c++) {
        y[c]   = column(vy, ys, c);
        acc[c] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < n / MG_QK_K; i++) {
        const float   dx        = f16(x[i].d);
        const __m256i scales16  = _mm256_cvtepi8_epi16(q3_K_scales(x[i].scales));
        const __m256i scales[2] = {_mm256_permute2x128_si256(scales16, scales16, 0x00),
                                   _mm256_permute2x128_si256(scales16, scales16, 0x11)};
        const __m256i hbits     = load_256(x[i].hmask);
        __m256i       sumi[MAX_COLS];
        UNROLLED for (int c = 0; c < nc; c++) sumi[c] = _mm256_setzero_si256();
        UNROLLED for (int h = 0; h < 2; h++) {
            const __m256i bits = load_256(x[i].qs + 32 * h);
            __m256i       low[4], minus4[4], sc[4];
            UNROLLED for (int k = 0; k < 4; k++) {
                const int     bit  = 4 * h + k;   // element 128h + 32k + l has its high bit at bit 4h+k of hmask[l]
                const __m256i clear = _mm256_andnot_si256(hbits, _mm256_set1_epi8((char) (1 << bit)));
                low[k]    = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * k), _mm256_set1_epi8(3));
                minus4[k] = _mm256_slli_epi16(_mm256_srli_epi16(clear, bit), 2);   // 4 where the bit is clear, else 0
                sc[k]     = _mm256_shuffle_epi8(scales[h], pick_i16(2 * k, 2 * k + 1));
            }
            UNROLLED for (int c = 0; c < nc; c++) {
                const int8_t * q8 = y[c][i].qs + 128 * h;
                __m256i        p[4];
                UNROLLED for (int k = 0; k < 4; k++) {
                    const __m256i a = load_256(q8 + 32 * k);
                    p[k] = _mm256_sub_epi16(_mm256_maddubs_epi16(low[k], a), _mm256_maddubs_epi16(minus4[k], a));
                    p[k] = _mm256_madd_epi16(sc[k], p[k]);
                }
                sumi[c] = _mm256_add_epi32(sumi[c], sum4_i32(p));
            }
        }
        UNROLLED for (int c = 0; c < nc; c++) {
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(y[c][i].d * dx), _mm256_cvtepi32_ps(sumi[c]), acc[c]);
        }
    }
    UNROLLED for (int c = 0; c < nc; c++) s[c] = hsum_float_8(acc[c]);
}
ENTRY_POINTS(q3_K_q8_K, dot_q3_K_q8_K)

// The 6-bit scales and mins of a Q4_K/Q5_K block (mg_get_scale_min_k4, all at
// once): out[0..1] hold sc_0..7 as bytes, out[2..3] m_0..7. Scales and mins
// 0..3 are the low 6 bits of bytes 0..3 and 4..7; 4..7 take their low 4 bits
// from the nibbles of bytes 8..11 and their top 2 from bits 6-7 of bytes 0..7.
KERNEL void k4_scales_mins(const uint8_t * packed, uint32_t out[4]) {
    uint32_t a[3];
    memcpy(a, packed, sizeof(a));
    const uint32_t low6 = 0x3f3f3f3f, low4 = 0x0f0f0f0f, top2 = 0x03030303;
    out[0] = a[0] & low6;
    out[1] = (a[2] & low4) | ((a[0] >> 6 & top2) << 4);
    out[2] = a[1] & low6;
    out[3] = (a[2] >> 4 & low4) | ((a[1] >> 6 & top2) << 4);
}

// The scale of each sub-block in both 16-bit halves of a 32-bit word (sc *
// 0x10001): broadcast to a register, it is madd's multiplier for the 16 pair
// sums of one sub-block (ggml shuffles the scale out with a control table).
KERNEL void k4_scale_pairs(const uint32_t sm[4], int32_t pairs[8]) {
    const __m256i sc = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *) sm));
    _mm256_storeu_si256((__m256i *) pairs, _mm256_mullo_epi32(sc, _mm256_set1_epi32(0x10001)));
}

// Q4_K (scalar: mg_vec_dot_q4_K_q8_K): 32 bytes of codes hold 64 elements,
// the low nibbles the first 32 (sub-block 2j), the high nibbles the next 32
// (sub-block 2j+1). The mins: bsums pairs added (hadd) meet the 8 mins in one
// madd, and go into their own 4-lane accumulator (ggml: acc_m).
KERNEL void dot_q4_K_q8_K(int64_t n, float * s, const void * vx, const void * vy, size_t ys, int nc) {
    const struct mg_block_q4_K * x = vx;
    const struct mg_block_q8_K * y[MAX_COLS];
    __m256                       acc[MAX_COLS];
    __m128                       acc_m[MAX_COLS];
    UNROLLED for (int c = 0; c < nc; c++) {
        y[c]     = column(vy, ys, c);
        acc[c]   = _mm256_setzero_ps();
        acc_m[c] = _mm_setzero_ps();
    }
    const __m256i m4 = _mm256_set1_epi8(0xf);
    for (int64_t i = 0; i < n / MG_QK_K; i++) {
        const float dx = f16(x[i].d), dminx = f16(x[i].dmin);
        uint32_t    sm[4];
        k4_scales_mins(x[i].scales, sm);
        const __m128i mins = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *) &sm[2]));
        int32_t       scale_pairs[8];
        k4_scale_pairs(sm, scale_pairs);
        float         d[MAX_COLS];
        __m256i       sumi[MAX_COLS];
        UNROLLED for (int c = 0; c < nc; c++) {
            const __m256i bsums = load_256(y[c][i].bsums);
            const __m128i pairs = _mm_hadd_epi16(_mm256_castsi256_si128(bsums), _mm256_extracti128_si256(bsums, 1));
            const float   dmin  = -y[c][i].d * dminx;
            acc_m[c] = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(_mm_madd_epi16(mins, pairs)), acc_m[c]);
            d[c]     = y[c][i].d * dx;
            sumi[c]  = _mm256_setzero_si256();
        }
        UNROLLED for (int j = 0; j < 4; j++) {
            const __m256i bits    = load_256(x[i].qs + 32 * j);
            const __m256i q_lo    = _mm256_and_si256(bits, m4);
            const __m256i q_hi    = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
            const __m256i scale_lo = _mm256_set1_epi32(scale_pairs[2 * j]);
            const __m256i scale_hi = _mm256_set1_epi32(scale_pairs[2 * j + 1]);
            UNROLLED for (int c = 0; c < nc; c++) {
                const int8_t * q8 = y[c][i].qs + 64 * j;
                const __m256i  lo = _mm256_madd_epi16(scale_lo, _mm256_maddubs_epi16(q_lo, load_256(q8)));
                const __m256i  hi = _mm256_madd_epi16(scale_hi, _mm256_maddubs_epi16(q_hi, load_256(q8 + 32)));
                sumi[c] = _mm256_add_epi32(sumi[c], _mm256_add_epi32(lo, hi));
            }
        }
        UNROLLED for (int c = 0; c < nc; c++) {
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(d[c]), _mm256_cvtepi32_ps(sumi[c]), acc[c]);
        }
    }
    UNROLLED for (int c = 0; c < nc; c++) {
        __m128 m = _mm_add_ps(acc_m[c], _mm_movehl_ps(acc_m[c], acc_m[c]));
        m        = _mm_add_ss(m, _mm_movehdup_ps(m));
        s[c]     = hsum_float_8(acc[c]) + _mm_cvtss_f32(m);
    }
}
ENTRY_POINTS(q4_K_q8_K, dot_q4_K_q8_K)

// 16 in the bytes whose bit `bit` is set in qh, 0 elsewhere (the 5th bit of Q5_K).
KERNEL __m256i fifth_bit_16(__m256i qh, int bit) {
    const __m256i set = _mm256_and_si256(qh, _mm256_set1_epi8((char) (1 << bit)));
    return _mm256_slli_epi16(_mm256_srli_epi16(set, bit), 4);   // the bit to position 4 (the shifts stay within bytes)
}

// Q5_K (scalar: mg_vec_dot_q5_K_q8_K): Q4_K plus a 5th bit, bit 2j (low
// nibbles) or 2j+1 (high nibbles) of qh[l], moved up to 16. The mins go into
// a scalar float sum here (ggml: summs).
KERNEL void dot_q5_K_q8_K(int64_t n, float * s, const void * vx, const void * vy, size_t ys, int nc) {
    const struct mg_block_q5_K * x = vx;
    const struct mg_block_q8_K * y[MAX_COLS];
    __m256                       acc[MAX_COLS];
    float                        summs[MAX_COLS];
    UNROLLED for (int c = 0; c < nc; c++) {
        y[c]     = column(vy, ys, c);
        acc[c]   = _mm256_setzero_ps();
        summs[c] = 0.0f;
    }
    const __m256i m4 = _mm256_set1_epi8(0xf);
    for (int64_t i = 0; i < n / MG_QK_K; i++) {
        const float dx = f16(x[i].d), dminx = f16(x[i].dmin);
        uint32_t    sm[4];
        k4_scales_mins(x[i].scales, sm);
        const __m128i mins  = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *) &sm[2]));
        const __m256i hbits = load_256(x[i].qh);
        int32_t       scale_pairs[8];
        k4_scale_pairs(sm, scale_pairs);
        float         d[MAX_COLS];
        __m256i       sumi[MAX_COLS];
        UNROLLED for (int c = 0; c < nc; c++) {
            const __m256i bsums = load_256(y[c][i].bsums);
            const __m128i pairs = _mm_hadd_epi16(_mm256_castsi256_si128(bsums), _mm256_extracti128_si256(bsums, 1));
            const __m128i prod  = _mm_madd_epi16(mins, pairs);
            const __m128i sum2  = _mm_add_epi32(prod, _mm_unpackhi_epi64(prod, prod));
            const int     summ  = _mm_cvtsi128_si32(_mm_add_epi32(sum2, _mm_shuffle_epi32(sum2, 1)));
            const float   dmin  = -y[c][i].d * dminx;
            summs[c] += dmin * (float) summ;
            d[c]    = y[c][i].d * dx;
            sumi[c] = _mm256_setzero_si256();
        }
        UNROLLED for (int j = 0; j < 4; j++) {
            const __m256i bits     = load_256(x[i].qs + 32 * j);
            const __m256i q_lo     = _mm256_add_epi8(_mm256_and_si256(bits, m4), fifth_bit_16(hbits, 2 * j));
            const __m256i q_hi     = _mm256_add_epi8(_mm256_and_si256(_mm256_srli_epi16(bits, 4), m4),
                                                     fifth_bit_16(hbits, 2 * j + 1));
            const __m256i scale_lo = _mm256_set1_epi32(scale_pairs[2 * j]);
            const __m256i scale_hi = _mm256_set1_epi32(scale_pairs[2 * j + 1]);
            UNROLLED for (int c = 0; c < nc; c++) {
                const int8_t * q8 = y[c][i].qs + 64 * j;
                const __m256i  lo = _mm256_madd_epi16(scale_lo, _mm256_maddubs_epi16(q_lo, load_256(q8)));
                const __m256i  hi = _mm256_madd_epi16(scale_hi, _mm256_maddubs_epi16(q_hi, load_256(q8 + 32)));
                sumi[c] = _mm256_add_epi32(sumi[c], _mm256_add_epi32(lo, hi));
            }
        }
        UNROLLED for (int c = 0; c < nc; c++) {
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(d[c]), _mm256_cvtepi32_ps(sumi[c]), acc[c]);
        }
    }
    UNROLLED for (int c = 0; c < nc; c++) s[c] = hsum_float_8(acc[c]) + summs[c];
}
ENTRY_POINTS(q5_K_q8_K, dot_q5_K_q8_K)

// 32 six-bit codes of Q6_K: the low nibbles of low4, and bits shift..shift+1 of qh above them.
KERNEL __m256i six_bit_codes(__m256i low4, __m256i qh, int shift) {
    const __m256i high2 = _mm256_and_si256(_mm256_srli_epi16(qh, shift), _mm256_set1_epi8(3));
    return _mm256_or_si256(_mm256_and_si256(low4, _mm256_set1_epi8(0xf)), _mm256_slli_epi16(high2, 4));
}

// Q6_K (scalar: mg_vec_dot_q6_K_q8_K): in each half of 128 elements, 4 low
// bits from ql (64 bytes: two registers, low and high nibbles) and 2 high bits
// from qh (32 bytes, 4 codes per byte) make 4 registers of 32 codes 0..63.
// (q - 32) . a = q . a - 32 . a, both maddubs with unsigned left operands;
// each 16-element sub-block has its own signed 8-bit scale.
KERNEL void dot_q6_K_q8_K(int64_t n, float * s, const void * vx, const void * vy, size_t ys, int nc) {
    const struct mg_block_q6_K * x = vx;
    const struct mg_block_q8_K * y[MAX_COLS];
    __m256                       acc[MAX_COLS];
    UNROLLED for (int c = 0; c < nc; c++) {
        y[c]   = column(vy, ys, c);
        acc[c] = _mm256_setzero_ps();
    }
    const __m256i m32 = _mm256_set1_epi8(32);
    for (int64_t i = 0; i < n / MG_QK_K; i++) {
        const float   dx     = f16(x[i].d);
        const __m128i scales = _mm_loadu_si128((const __m128i *) x[i].scales);
        __m256i       sumi[MAX_COLS];
        UNROLLED for (int c = 0; c < nc; c++) sumi[c] = _mm256_setzero_si256();
        UNROLLED for (int h = 0; h < 2; h++) {
            const __m256i ql0 = load_256(x[i].ql + 64 * h);
            const __m256i ql1 = load_256(x[i].ql + 64 * h + 32);
            const __m256i qh  = load_256(x[i].qh + 32 * h);
            __m256i       q[4], sc[4];
            q[0] = six_bit_codes(ql0, qh, 0);   // elements 128h + 0..31
            q[1] = six_bit_codes(ql1, qh, 2);   //              + 32..63
            q[2] = six_bit_codes(_mm256_srli_epi16(ql0, 4), qh, 4);
            q[3] = six_bit_codes(_mm256_srli_epi16(ql1, 4), qh, 6);
            UNROLLED for (int k = 0; k < 4; k++) {
                // 16 int16: the scale of sub-block 8h+2k eight times, then that of 8h+2k+1
                const int     j    = 8 * h + 2 * k;
                const __m128i pick = _mm_set_epi64x((long long) (0x0101010101010101ull * (uint64_t) (j + 1)),
                                                    (long long) (0x0101010101010101ull * (uint64_t) j));
                sc[k] = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(scales, pick));
            }
            UNROLLED for (int c = 0; c < nc; c++) {
                const int8_t * q8 = y[c][i].qs + 128 * h;
                __m256i        p[4];
                UNROLLED for (int k = 0; k < 4; k++) {
                    const __m256i a = load_256(q8 + 32 * k);
                    p[k] = _mm256_sub_epi16(_mm256_maddubs_epi16(q[k], a), _mm256_maddubs_epi16(m32, a));
                    p[k] = _mm256_madd_epi16(sc[k], p[k]);
                }
                sumi[c] = _mm256_add_epi32(sumi[c], _mm256_add_epi32(p[0], p[1]));
                sumi[c] = _mm256_add_epi32(sumi[c], _mm256_add_epi32(p[2], p[3]));
            }
        }
        UNROLLED for (int c = 0; c < nc; c++) {
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(y[c][i].d * dx), _mm256_cvtepi32_ps(sumi[c]), acc[c]);
        }
    }
    UNROLLED for (int c = 0; c < nc; c++) s[c] = hsum_float_8(acc[c]);
}
ENTRY_POINTS(q6_K_q8_K, dot_q6_K_q8_K)

#endif // MG_SIMD
