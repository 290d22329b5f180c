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
// 2. The float part is a fixed order: the order of llama.cpp's x86 build on
//    the machine it was built for (an ulp anywhere flips a later activation
//    rounding: docs/numerics.md). Float rows: ggml-cpu/vec.cpp with the mapping of
//    simd-mappings.h the ISA picks (AVX-512 here), and its AVX512-BF16 path
//    for BF16. Q8_0, Q4_1, Q5_0, Q5_1, Q6_K, Q2_K, Q3_K, Q5_K: the AVX2 paths
//    of ggml-cpu/arch/x86/quants.c, each block's 8 int lane sums FMA'd into 8
//    float lanes, summed at the end (hsum_float_8). Q4_0, IQ4_NL and Q4_K,
//    which llama.cpp repacks: one FMA per block of the block's exact integer
//    sum, one chain over the blocks (its gemv), which lets a tile hold 8 rows
//    in the 8 lanes of a register. Repacked Q4_K and Q2_K (repack.c) in
//    whole groups of 4 columns: the FMAs per 64 (Q4_K) or 128 (Q2_K)
//    elements, as ggml's repacked gemm; Q2_K below 4 columns: its gemv. Where the scalar reference (vec.c) spells
//    out the same steps the results are equal; elsewhere they differ by float
//    rounding only, and the test (tests/full/test_vec_simd.c) bounds it.
//
// 3. Every kernel is written once for 1 to 4 activation columns, and the
//    tiles once for 8 weight rows (4 at a time where each output keeps 8
//    lanes: "Tiles in ggml's lane order"). A weight block is loaded and unpacked once,
//    then multiplied with the block of each column, and every dot product
//    keeps its own accumulators, updated by the same float instructions in the
//    same order as alone. That is why vec_dot_cols and vec_dot_tile give, to
//    the bit, what vec_dot gives, and a prompt evaluated as a batch gives the
//    logits of one token at a time. Except for float weights: with 2 or more
//    columns, llama.cpp's mul_mat gives F32, F16 and BF16 products to its
//    tinyBLAS (llamafile sgemm), which adds in another order (one 16-lane
//    accumulator per output), so full/ gives them to gemm_float.c instead of
//    these tiles, and breaks this rule on purpose: there a batch equals
//    llama.cpp's batch, not one token at a time (docs/numerics.md, item 4).
//
// The activation converters (F32 -> F16, BF16, Q8_0, Q8_1, Q8_K) give the
// same bits as their scalar references for finite input.
//
// What costs time here (measured on a Zen 5 that runs 512-bit instructions
// as two 256-bit halves): the number of vector instructions per block. So the
// registers are 256 bits wide (AVX-512 is used for its instructions: 32
// registers, mask moves, VNNI, BF16 dots), block scales come from a table
// rather than F16C, and nibbles are unpacked with one shift. In a tile the
// per-row work (unpacking, transposing) is shared by the columns and the
// per-column work (broadcasts, scales) by the 8 rows: Q4_0 8 x 4 tiles run
// at about 22 multiply-adds a cycle, where one row at a time ran at 8.
//
// Reading guide. The file has six parts, each under a banner of dashes;
// search for the banner's first words:
//
//   "Helpers shared by the kernels"  the F16 table, horizontal sums, nibble
//                                    unpacking, the int8 dot products
//                                    (dot_u8_s8, dot_s8_s8) with and without VNNI
//   "Activation converters"          F32 rows -> F16, BF16, Q8_0, Q8_1, Q8_K, which
//                                    mul_mat does once per column of b
//   "Float rows"                     F32, F16 (dot_float, tile_float), BF16
//   "32-element blocks"              Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL: ONE set of
//                                    kernels, the type a compile-time constant
//                                    argument (unpack_codes switches on it)
//   "K-quants x Q8_K"                Q2_K, Q3_K, Q4_K, Q5_K, Q6_K: a kernel each
//   "Tiles in ggml's lane order"     the tiles of Q8_0, Q4_1, Q5_0, Q5_1 (lane_panel_32)
//                                    and Q6_K (lane_tile_q6_K)
//
// The macros only make entry points: ENTRY_POINTS(name, kernel) writes
// mg_vec_dot_<name>_simd (one column) and mg_vec_dot_cols_<name>_simd (2-4
// columns) around one always-inline kernel; ENTRY_POINTS_32 adds the tile for
// the 32-element family, TILE_BY_ROWS a row-by-row tile for the types without
// one. The code to read is the kernel they name. Step into one, for example
// Q8_0 weights and one token (decoding: the tile entry point hands the rows
// to vec_dot_cols one by one, see LANE_TILE_ENTRY):
//
//   mg_vec_dot_q8_0_q8_0_simd          ENTRY_POINTS(q8_0_q8_0, dot_q8_0_lanes)
//     dot_q8_0_lanes                   per block: 32 int8 products into 8 int32
//                                      lanes (dot_s8_s8), made float and FMA'd
//                                      with dW * dA into 8 float lanes;
//                                      hsum_float_8 at the end
//   scalar twin: mg_vec_dot_q8_0_q8_0 (vec.c, the same lanes one by one); ggml:
//   ggml_vec_dot_q8_0_q8_0 (ggml-cpu/arch/x86/quants.c)
//
// then the same type for a prompt, 8 rows x up to 4 columns:
// mg_vec_dot_tile_q8_0_q8_0_simd -> lane_panel_32 (the same lanes, one
// register of 8 per output, two passes of 4 rows x 4 columns; mul_mat calls
// it as mg_vec_dot_panel_q8_0_q8_0_simd with a row block's tiles at once,
// so the columns' share is worked out once for all of them). The tiles
// with 8 rows in the 8 lanes of a register are Q4_0's and IQ4_NL's:
// mg_vec_dot_tile_q4_0_q8_0_simd -> tile_32 -> tile_block_32 (tile_codes
// transposes 8 rows' codes so that row r is lane r). For the
// K-quants read dot_q4_K_q8_K, then tile_q4_K -> tile_block_q4_K (ggml:
// ggml_vec_dot_q4_K_q8_K; its tile is the counterpart of
// ggml_gemm_q4_K_8x8_q8_K, ggml-cpu/arch/x86/repack.cpp). Each kernel is
// pinned by tests/full/test_vec_simd.c (SIMD against scalar, and cols and
// tiles bit-identical to vec_dot).
#include "vec.h"

// The features this file was compiled with, for cpu_level.c's check at start;
// where no SIMD twin is compiled (vec_simd.h), the kernels are vec.c's
// (aarch64 NEON: vec_neon.c's, compiled with the same flags).
#if !defined(MG_SIMD) && !defined(MG_NEON)
#define MG_SCALAR_KERNELS 1
#endif
#define MG_CPU_FEATURES_DEFINE mg_cpu_features_kernels
#include "cpu_level.h"

#if defined(MG_SIMD)

#include <immintrin.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#define MAX_COLS MG_VEC_DOT_MAX_COLS

// Every kernel is an always-inline function with the column count nc as a
// parameter; each entry point calls it with a constant nc, so the compiler
// unrolls the column loops and keeps the accumulators in registers.
#define KERNEL static inline __attribute__((always_inline))

// Put before the loops over columns and over the registers of a block: fully
// unrolled, their arrays of accumulators and unpacked codes become registers.
#define UNROLLED _Pragma("GCC unroll 8")

// Call kernel(args..., nc) with nc as a constant 1..4: each column count gets
// its own copy of the (always inlined) kernel, its column loops unrolled.
#define WITH_CONST_COLS(nc, kernel, ...)                                 \
    switch (nc) {                                   \
    case 1: kernel(__VA_ARGS__, 1); break;          \
    case 2: kernel(__VA_ARGS__, 2); break;          \
    case 3: kernel(__VA_ARGS__, 3); break;          \
    default: kernel(__VA_ARGS__, 4); break;         \
    }

// The two entry points of a kernel: vec_dot (one column) and vec_dot_cols
// (n_cols columns, a copy of the kernel for each count).
#define ENTRY_POINTS(name, kernel)                                                                        \
    void mg_vec_dot_##name##_simd(int64_t n, float * s, const void * x, const void * y) {                \
        kernel(n, s, x, y, 0, 1);                                                                         \
    }                                                                                                     \
    void mg_vec_dot_cols_##name##_simd(int64_t n, float * s, const void * x, const void * y, size_t ys, \
                                       int nc) {                                                          \
        MG_ASSERT(nc >= 1 && nc <= MAX_COLS);                                                             \
        WITH_CONST_COLS(nc, kernel, n, s, x, y, ys);                                                      \
    }

// The tile entry point of a type without a tile kernel: its vec_dot_cols, row by row.
#define TILE_BY_ROWS(name)                                                                                  \
    void mg_vec_dot_tile_##name##_simd(int64_t n, float * s, size_t ss, const void * x, size_t xs, int nr, \
                                       const void * y, size_t ys, int nc) {                                 \
        mg_vec_dot_tile_by_rows(mg_vec_dot_cols_##name##_simd, n, s, ss, x, xs, nr, y, ys, nc);             \
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

// 8 F16 values (8 rows' scales, say) as 8 floats: the halves go into one
// register, element by element, and F16C converts them together (exactly,
// the floats of f16()). Eight table floats would be stored one by one and
// loaded as a vector, a store-forwarding stall: in the Q8_0 prompt tile that
// was a quarter of the time on Zen 4 (perf).
KERNEL __m256 halves_x8(const uint16_t h[8]) {
    const __m128i halves = _mm_setr_epi16((short) h[0], (short) h[1], (short) h[2], (short) h[3], (short) h[4],
                                          (short) h[5], (short) h[6], (short) h[7]);
    return _mm256_cvtph_ps(halves);
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

// acc plus 8 int32 lanes: lane k = sum over bytes 4k..4k+3 of u * s, with u
// read as unsigned and s as signed bytes. VNNI does it in one instruction;
// AVX2 needs maddubs (pairs into int16) and madd (pairs of pairs into int32).
// maddubs saturates at +-32767, which a pair here never reaches: the largest
// is 2 * 128 * 127 (a Q8_0 weight of -128 against an activation of +-127;
// activation codes stay within -127..127).
KERNEL __m256i dot_u8_s8_acc(__m256i acc, __m256i u, __m256i s) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpbusd_epi32(acc, u, s);
#elif defined(__AVXVNNI__)
    return _mm256_dpbusd_avx_epi32(acc, u, s);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
#endif
}

KERNEL __m256i dot_u8_s8(__m256i u, __m256i s) {
    return dot_u8_s8_acc(_mm256_setzero_si256(), u, s);
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

// F16 -> F32 on 16 lanes at once (flash attention's value rows). Every half
// is exactly a float, so F16C's conversion and mg_fp16_to_fp32 agree on all
// inputs, NaN included (both keep the payload, quieted).
void mg_fp16_to_fp32_row_simd(const void * vx, float * y, int64_t n) {
    const mg_fp16_t * x = vx;
    int64_t           i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) (x + i))));
    for (; i < n; i++) y[i] = mg_fp16_to_fp32(x[i]);
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
// mg_vec_dot_bf16 (vec.c). ggml: ggml_vec_dot_f32/_f16 (vec.cpp) with the
// mapping of simd-mappings.h that the build's ISA picks, as ggml's does:
//  - AVX2 (GGML_F32_STEP 32, GGML_F32_EPR 8): 4 accumulators of 8 lanes take
//    every 4th group of 8 products; at the end they are added (0+2) + (1+3)
//    and the 8 lanes summed by GGML_F32x8_REDUCE's horizontal adds;
//  - AVX-512 (GGML_F32_STEP 64, GGML_F32_EPR 16): 4 accumulators of 16
//    lanes (dot_float: 4 registers of 16; the tiles: 8 registers of 8, the
//    16-lane accumulator j being registers 2j and 2j+1); added (0+2),
//    (1+3), then (0+1), and the 16 lanes summed as GCC's
//    _mm512_reduce_add_ps does: upper 8 + lower 8, then hsum_float_8.
// The leftover n % STEP elements are added one by one. llama.cpp built for
// this machine (-march=native, AVX-512) takes the second: a kq dot of 64 or a
// V row of the cache summed in the other order is 1 ulp away at times, and
// that flips a later activation rounding (docs/numerics.md).
// ---------------------------------------------------------------------------

#define F32_LANES 8
#if defined(__AVX512F__)
#define F32_ACCS 8   // registers of 8 lanes: 4 accumulators of 16
#else
#define F32_ACCS 4
#endif
#define F32_STEP (F32_ACCS * F32_LANES)   // GGML_F32_STEP

KERNEL __m256 load_f16_8(const mg_fp16_t * p) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) p));
}

#if F32_ACCS == 4
// GGML_F32x8_REDUCE's last step: halves, then two horizontal adds.
KERNEL float reduce_8(__m256 v) {
    const __m128 h4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 h2 = _mm_hadd_ps(h4, h4);
    return _mm_cvtss_f32(_mm_hadd_ps(h2, h2));
}
#endif

// GGML_F32_VEC_REDUCE of the accumulators, in the mapping's order (above).
KERNEL float reduce_accs(const __m256 acc[F32_ACCS]) {
#if F32_ACCS == 8
    const __m256 lo = _mm256_add_ps(_mm256_add_ps(acc[0], acc[4]), _mm256_add_ps(acc[2], acc[6]));
    const __m256 hi = _mm256_add_ps(_mm256_add_ps(acc[1], acc[5]), _mm256_add_ps(acc[3], acc[7]));
    return hsum_float_8(_mm256_add_ps(hi, lo));
#else
    return reduce_8(_mm256_add_ps(_mm256_add_ps(acc[0], acc[2]), _mm256_add_ps(acc[1], acc[3])));
#endif
}

KERNEL __m256 load_8(enum mg_type type, const void * row, int64_t i) {
    return type == MG_TYPE_F32 ? _mm256_loadu_ps((const float *) row + i) : load_f16_8((const mg_fp16_t *) row + i);
}

// The end of a float dot product: the reduced sum plus the products of the
// elements from np on, one by one; in float for F32, in double for F16
// (ggml's ggml_vec_dot_f32 and ggml_vec_dot_f16 differ just there).
KERNEL float add_leftovers(enum mg_type type, float reduced, const void * x, const void * y, int64_t np, int64_t n) {
    if (type == MG_TYPE_F32) {
        const float * xf  = x;
        const float * yf  = y;
        float         sum = reduced;
        for (int64_t i = np; i < n; i++) sum += xf[i] * yf[i];
        return sum;
    }
    const mg_fp16_t * xh  = x;
    const mg_fp16_t * yh  = y;
    double            sum = reduced;
    // F16C here, not the table: these are two random loads per element of
    // 256 KB apart, on the path of a chain of dependent double additions.
    for (int64_t i = np; i < n; i++) sum += (double) (_cvtsh_ss(xh[i]) * _cvtsh_ss(yh[i]));
    return (float) sum;
}

#if F32_ACCS == 8
// With AVX-512 a row's dot product keeps its 4 accumulators of 16 lanes in 4
// registers of 16, as ggml's own mapping does, and loads a whole cache line
// of an F32 row at a time. The sums are the same as with 8 registers of 8
// (accumulator j is their 2j and 2j+1; reduce_accs_16 adds in reduce_accs's
// order). Only decode's speed changes, which streams F32 rows from memory:
// on an Intel Xeon with AVX-512, rows of 768 over 256 MiB read 32 bytes at a
// time ran at 13.6-14.5 GB/s, 64 at a time at 15.9-17.4, and a plain sum of
// the same bytes (tools/bandwidth.c's loop) at 16.2-17.4. The tiles (below)
// keep their registers of 8: they work from cache.
KERNEL __m512 load_16(enum mg_type type, const void * row, int64_t i) {
    return type == MG_TYPE_F32 ? _mm512_loadu_ps((const float *) row + i)
                               : _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) ((const mg_fp16_t *) row + i)));
}

KERNEL float reduce_accs_16(const __m512 acc[4]) {
    const __m512 sum = _mm512_add_ps(_mm512_add_ps(acc[0], acc[2]), _mm512_add_ps(acc[1], acc[3]));
    const __m256 hi  = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(sum), 1));
    return hsum_float_8(_mm256_add_ps(hi, _mm512_castps512_ps256(sum)));
}

// One F32 or F16 row (F16 widened by F16C) against up to 4 columns.
KERNEL void dot_float(enum mg_type type, int64_t n, float * s, const void * x, const void * vy, size_t ys, int nc) {
    enum { ACCS = F32_ACCS / 2, LANES = 2 * F32_LANES };
    const void * y[MAX_COLS];
    __m512       acc[MAX_COLS][ACCS];
    UNROLLED for (int c = 0; c < nc; c++) {
        y[c] = column(vy, ys, c);
        UNROLLED for (int j = 0; j < ACCS; j++) acc[c][j] = _mm512_setzero_ps();
    }
    const int64_t np = n - n % F32_STEP;
    for (int64_t i = 0; i < np; i += F32_STEP) {
        UNROLLED for (int j = 0; j < ACCS; j++) {
            const __m512 xv = load_16(type, x, i + j * LANES);
            UNROLLED for (int c = 0; c < nc; c++) {
                acc[c][j] = _mm512_fmadd_ps(xv, load_16(type, y[c], i + j * LANES), acc[c][j]);
            }
        }
    }
    UNROLLED for (int c = 0; c < nc; c++) s[c] = add_leftovers(type, reduce_accs_16(acc[c]), x, y[c], np, n);
}
#else
// One F32 or F16 row (F16 widened by F16C) against up to 4 columns.
KERNEL void dot_float(enum mg_type type, int64_t n, float * s, const void * x, const void * vy, size_t ys, int nc) {
    const void * y[MAX_COLS];
    __m256       acc[MAX_COLS][F32_ACCS];
    UNROLLED for (int c = 0; c < nc; c++) {
        y[c] = column(vy, ys, c);
        UNROLLED for (int j = 0; j < F32_ACCS; j++) acc[c][j] = _mm256_setzero_ps();
    }
    const int64_t np = n - n % F32_STEP;
    for (int64_t i = 0; i < np; i += F32_STEP) {
        UNROLLED for (int j = 0; j < F32_ACCS; j++) {
            const __m256 xv = load_8(type, x, i + j * F32_LANES);
            UNROLLED for (int c = 0; c < nc; c++) {
                acc[c][j] = _mm256_fmadd_ps(xv, load_8(type, y[c], i + j * F32_LANES), acc[c][j]);
            }
        }
    }
    UNROLLED for (int c = 0; c < nc; c++) s[c] = add_leftovers(type, reduce_accs(acc[c]), x, y[c], np, n);
}
#endif

KERNEL void dot_f32(int64_t n, float * s, const void * x, const void * y, size_t ys, int nc) {
    dot_float(MG_TYPE_F32, n, s, x, y, ys, nc);
}
ENTRY_POINTS(f32, dot_f32)

KERNEL void dot_f16(int64_t n, float * s, const void * x, const void * y, size_t ys, int nc) {
    dot_float(MG_TYPE_F16, n, s, x, y, ys, nc);
}
ENTRY_POINTS(f16, dot_f16)

// A tile of float rows. Each dot product keeps vec_dot's 4 accumulators (the
// 8 elements at 32k + 8j go to accumulator j) and its reduction; with 4 rows
// and 4 columns that would be 64 accumulators, more than there are registers.
// So the tile passes over its rows once per accumulator: pass j computes
// accumulator j of all 16 dot products, 16 registers, each weight load
// serving 4 columns and each activation load 4 rows. Every accumulator still
// takes the same FMAs in the same order as in vec_dot. (With 2 columns, 2
// accumulators of each fit at once: two passes.) One column has no such
// tile: rows_float_one_column, below, takes each row's SIMD part alone.
//
// The passes go over the rows FLOAT_TILE_CHUNK elements at a time, the
// accumulators set aside in memory in between, so that the chunk of the 4
// rows and 4 columns stays in L1 for all its passes. Whole rows would not:
// ffn_down's (2432 elements) make 39 KB in F16, 78 KB in F32, which the
// passes read from L2 four times over (on the bench machine such a product
// ran at 55-60 GFLOP/s, against ~90 for rows of 768; in chunks of 512, ~93).
// v, which the compiler must now keep in a register: an empty asm statement
// that claims to change it. Without it GCC folds a value loaded once into
// every instruction that uses it, loading it again each time, and a tile is
// all about loading each row once.
KERNEL __m256 in_register(__m256 v) {
#if defined(__AVX512VL__)
    __asm__("" : "+v"(v));   // any of the 32 registers
#else
    __asm__("" : "+x"(v));
#endif
    return v;
}

#define FLOAT_TILE_ROWS  4
#define FLOAT_TILE_CHUNK 512   // elements of a row per round of passes (a multiple of F32_STEP)

KERNEL void tile_float(enum mg_type type, int64_t n, float * s, size_t ss, const void * x, size_t xs, int nr,
                       const void * vy, size_t ys, int nc) {
    const char * xr[FLOAT_TILE_ROWS];   // rows beyond nr repeat the last one; their results are dropped
    UNROLLED for (int r = 0; r < FLOAT_TILE_ROWS; r++) xr[r] = (const char *) x + (size_t) (r < nr ? r : nr - 1) * xs;
    const void * y[MAX_COLS];
    UNROLLED for (int c = 0; c < nc; c++) y[c] = column(vy, ys, c);
    const int     per_pass = 16 / (FLOAT_TILE_ROWS * nc) >= 4 ? 4 : 16 / (FLOAT_TILE_ROWS * nc) >= 2 ? 2 : 1;
    const int64_t np       = n - n % F32_STEP;
    _Alignas(32) float part[F32_ACCS][FLOAT_TILE_ROWS][MAX_COLS][F32_LANES];   // accumulator j of dot product (r, c)
    for (int64_t i0 = 0; i0 < np; i0 += FLOAT_TILE_CHUNK) {
        const int64_t i1 = i0 + FLOAT_TILE_CHUNK < np ? i0 + FLOAT_TILE_CHUNK : np;
        UNROLLED for (int j0 = 0; j0 < F32_ACCS; j0 += per_pass) {
            __m256 acc[4][FLOAT_TILE_ROWS][MAX_COLS];
            UNROLLED for (int jj = 0; jj < per_pass; jj++) {
                UNROLLED for (int r = 0; r < FLOAT_TILE_ROWS; r++) {
                    UNROLLED for (int c = 0; c < nc; c++) {
                        acc[jj][r][c] = i0 == 0 ? _mm256_setzero_ps() : _mm256_load_ps(part[j0 + jj][r][c]);
                    }
                }
            }
            for (int64_t i = i0; i < i1; i += F32_STEP) {
                UNROLLED for (int jj = 0; jj < per_pass; jj++) {
                    const int64_t k = i + (j0 + jj) * F32_LANES;
                    __m256        xv[FLOAT_TILE_ROWS], yv[MAX_COLS];
                    UNROLLED for (int r = 0; r < FLOAT_TILE_ROWS; r++) xv[r] = in_register(load_8(type, xr[r], k));
                    UNROLLED for (int c = 0; c < nc; c++) yv[c] = in_register(load_8(type, y[c], k));
                    UNROLLED for (int c = 0; c < nc; c++) {
                        UNROLLED for (int r = 0; r < FLOAT_TILE_ROWS; r++) {
                            acc[jj][r][c] = _mm256_fmadd_ps(xv[r], yv[c], acc[jj][r][c]);
                        }
                    }
                }
            }
            UNROLLED for (int jj = 0; jj < per_pass; jj++) {
                UNROLLED for (int r = 0; r < FLOAT_TILE_ROWS; r++) {
                    UNROLLED for (int c = 0; c < nc; c++) _mm256_store_ps(part[j0 + jj][r][c], acc[jj][r][c]);
                }
            }
            // part must stay in memory: otherwise GCC keeps all 64 of its
            // vectors in registers across the chunks, spilling some of them,
            // and pointers too, inside the loop (a third slower).
            __asm__("" : : : "memory");
        }
    }
    // The end of dot_float, per dot product.
    for (int r = 0; r < nr; r++) {
        UNROLLED for (int c = 0; c < nc; c++) {
            __m256 a[F32_ACCS];   // (a row shorter than F32_STEP had no chunk: it is all leftovers)
            UNROLLED for (int j = 0; j < F32_ACCS; j++) {
                a[j] = np > 0 ? _mm256_load_ps(part[j][r][c]) : _mm256_setzero_ps();
            }
            s[(size_t) c * ss + (size_t) r] = add_leftovers(type, reduce_accs(a), xr[r], y[c], np, n);
        }
    }
}

// Eight registers of 8 floats as the columns of the 8 x 8 matrix they were
// the rows of: v[j] becomes element j of every former row, in row order.
KERNEL void transpose_8x8(__m256 v[8]) {
    __m256 t[8], u[8];
    for (int i = 0; i < 8; i += 2) {   // pairs of rows interleaved
        t[i]     = _mm256_unpacklo_ps(v[i], v[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(v[i], v[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {   // then fours: each 128-bit half holds one column of 4 rows
        u[i]     = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int j = 0; j < 4; j++) {   // rows 0-3 and 4-7 of a column side by side
        v[j]     = _mm256_permute2f128_ps(u[j], u[j + 4], 0x20);
        v[j + 4] = _mm256_permute2f128_ps(u[j], u[j + 4], 0x31);
    }
}

// Elements i .. i+7 of 8 rows times the same elements of y, each product
// rounded to float as dot_float's leftovers round it, then turned
// (transpose_8x8) so that p[j] holds element i+j of every row, row r in lane r.
KERNEL void products_by_element(enum mg_type type, const char * const xr[8], const void * y, int64_t i, __m256 p[8]) {
    const __m256 yv = load_8(type, y, i);
    UNROLLED for (int r = 0; r < 8; r++) p[r] = _mm256_mul_ps(load_8(type, xr[r], i), yv);
    transpose_8x8(p);
}

// One column against up to 8 float rows: decode's attention, a query head
// against every cached key (K . q) or every value row (V^T . p). Each row's
// dot product is dot_float's, to the bit; only the order of the work
// changes. dot_float adds the elements past the last whole F32_STEP one by
// one into the reduced sum (in double for F16), and a row of keys of 96
// (MiniMind's head_dim: 64, then 32 left over) spent most of its time on
// those scalar steps. Here the SIMD parts go row by row as before; then the
// leftovers go 8 elements of the 8 rows at a time: the products rounded to
// float as alone, turned so that each register holds one element of every
// row (transpose_8x8), and added in element order into 8 sums side by side,
// one lane a row: each the same additions in the same order as alone. (On
// the bench machine: MiniMind's K . q at 256 cached positions, 124 us a
// layer row by row.) Rows beyond nr repeat the last; their lanes are dropped.
KERNEL void rows_float_one_column(enum mg_type type, int64_t n, float * s, const void * x, size_t xs, int nr,
                                  const void * y) {
    enum { ROWS = MG_VEC_DOT_MAX_ROWS };
    const int64_t np = n - n % F32_STEP;
    const char *  xr[ROWS];
    float         sum[ROWS];   // for F32: the sums
    double        dsum[ROWS];  // for F16
    UNROLLED for (int r = 0; r < ROWS; r++) {
        xr[r] = (const char *) x + (size_t) (r < nr ? r : nr - 1) * xs;
        dot_float(type, np, &sum[r], xr[r], y, 0, 1);   // up to np: no leftovers, just the reduced sum
        dsum[r] = sum[r];
    }
    int64_t i = np;
    if (type == MG_TYPE_F32) {
        __m256 acc = _mm256_loadu_ps(sum);
        for (; i + F32_LANES <= n; i += F32_LANES) {
            __m256 p[ROWS];
            products_by_element(type, xr, y, i, p);
            UNROLLED for (int j = 0; j < F32_LANES; j++) acc = _mm256_add_ps(acc, p[j]);
        }
        _mm256_storeu_ps(sum, acc);
        for (; i < n; i++) {
            UNROLLED for (int r = 0; r < ROWS; r++) sum[r] += ((const float *) xr[r])[i] * ((const float *) y)[i];
        }
        for (int r = 0; r < nr; r++) s[r] = sum[r];
        return;
    }
    __m256d lo = _mm256_loadu_pd(dsum), hi = _mm256_loadu_pd(dsum + 4);
    for (; i + F32_LANES <= n; i += F32_LANES) {
        __m256 p[ROWS];
        products_by_element(type, xr, y, i, p);
        UNROLLED for (int j = 0; j < F32_LANES; j++) {
            lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(p[j])));
            hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(p[j], 1)));
        }
    }
    _mm256_storeu_pd(dsum, lo);
    _mm256_storeu_pd(dsum + 4, hi);
    for (; i < n; i++) {
        const float yi = _cvtsh_ss(((const mg_fp16_t *) y)[i]);
        UNROLLED for (int r = 0; r < ROWS; r++) dsum[r] += (double) (_cvtsh_ss(((const mg_fp16_t *) xr[r])[i]) * yi);
    }
    for (int r = 0; r < nr; r++) s[r] = (float) dsum[r];
}

// Up to 8 rows as tiles of 4. One column: rows with leftovers together
// (rows_float_one_column), rows without them one by one, each row's vec_dot
// streaming its weights in order.
#define TILE_ENTRY_FLOAT(name, type)                                                                        \
    void mg_vec_dot_tile_##name##_simd(int64_t n, float * s, size_t ss, const void * x, size_t xs, int nr, \
                                       const void * y, size_t ys, int nc) {                                 \
        MG_ASSERT(nr >= 1 && nr <= MG_VEC_DOT_MAX_ROWS && nc >= 1 && nc <= MAX_COLS);                      \
        if (nc == 1 && n % F32_STEP != 0) {                                                                 \
            rows_float_one_column(type, n, s, x, xs, nr, y);                                                \
            return;                                                                                         \
        }                                                                                                   \
        if (nc == 1) {                                                                                      \
            mg_vec_dot_tile_by_rows(mg_vec_dot_cols_##name##_simd, n, s, ss, x, xs, nr, y, ys, nc);         \
            return;                                                                                         \
        }                                                                                                   \
        for (int r0 = 0; r0 < nr; r0 += FLOAT_TILE_ROWS) {                                                  \
            const int    rows = nr - r0 < FLOAT_TILE_ROWS ? nr - r0 : FLOAT_TILE_ROWS;                      \
            const char * xr0  = (const char *) x + (size_t) r0 * xs;                                        \
            switch (nc) {                                                                                   \
            case 2: tile_float(type, n, s + r0, ss, xr0, xs, rows, y, ys, 2); break;                        \
            case 3: tile_float(type, n, s + r0, ss, xr0, xs, rows, y, ys, 3); break;                        \
            default: tile_float(type, n, s + r0, ss, xr0, xs, rows, y, ys, 4); break;                       \
            }                                                                                               \
        }                                                                                                   \
    }

TILE_ENTRY_FLOAT(f32, MG_TYPE_F32)
TILE_ENTRY_FLOAT(f16, MG_TYPE_F16)

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
TILE_BY_ROWS(bf16)

// ---------------------------------------------------------------------------
// 32-element blocks x Q8_0/Q8_1: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, one
// set of kernels for all six. Each dot product is, block by block,
//
//     S        = the sum of (weight code - offset) * (activation code), exact in int
//     acc[b%4] = fma(dW * dA, float(S), acc[b % 4])
//
// in four accumulators, so that four blocks are in flight, and at the end
// s = (acc[0] + acc[2]) + (acc[1] + acc[3]), plus for Q4_1/Q5_1 the sum over
// the blocks, in order, of mW * sA (their min against Q8_1's s; ggml: summs).
// That is the scalar order of vec.c (ggml's *_generic) with an FMA per block
// and the blocks dealt out to four sums; ggml's AVX2 kernels instead keep
// the float sums of 8 lanes per block.
//
// Two kernels compute it, with the same float operations per dot product:
//
// - dot_blocks_32, one weight row against up to 4 columns (vec_dot,
//   vec_dot_cols): a block's 32 products land in 8 int lanes; the lanes of 4
//   blocks are summed together into their 4 S, and one FMA on 4 lanes
//   updates the 4 accumulators;
//
// - tile_32, 8 weight rows against up to 4 columns (vec_dot_tile), with the
//   rows in the 8 lanes: the codes of 8 rows are transposed so that lane r
//   holds codes 4j..4j+3 of row r, and one dot-product instruction with
//   activation codes 4j..4j+3 broadcast to every lane adds them to row r's S.
//   8 such instructions make S for 8 rows, with no horizontal sums, and then
//   one conversion, one multiply and one FMA scale 8 dot products. (ggml gets
//   rows into lanes by repacking the weights when it loads a model:
//   ggml_gemv_q4_0_8x8_q8_0 and friends; here the tile pays for a transpose,
//   except for Q4_0 weights repacked by the loader, repack.c: tile_codes_x8.)
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

KERNEL bool signed_codes(enum mg_type type) {
    return type == MG_TYPE_Q8_0 || type == MG_TYPE_IQ4_NL;
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

// Block b of an activation row: Q8_1 (against a min) starts d, s, codes; Q8_0 d, codes.
KERNEL const mg_fp16_t * act_header(enum mg_type type, const void * row, int64_t b) {
    return has_min(type) ? &((const struct mg_block_q8_1 *) row)[b].d : &((const struct mg_block_q8_0 *) row)[b].d;
}

KERNEL const int8_t * act_codes(enum mg_type type, const void * row, int64_t b) {
    return has_min(type) ? ((const struct mg_block_q8_1 *) row)[b].qs : ((const struct mg_block_q8_0 *) row)[b].qs;
}

// The int lanes of weight block b against activation block qy: 8 lanes of 4
// products each, (code - offset) * activation. They come out the same
// whichever way they are computed, so each case takes the cheapest: unsigned
// codes meet the activations directly; an offset comes off as offset * (the
// sum of each 4 activation codes), one more dot product per column, cheaper
// than the sign trick with one column and dearer with several, where the
// sign trick shares |x| between them.
struct block_codes {
    __m256i codes;   // as unpack_codes gives them
    __m256i qx;      // codes - offset, signed
    __m256i ax;      // |qx|, for the sign trick
};

KERNEL struct block_codes load_block_codes(enum mg_type type, const void * x, int64_t b) {
    struct block_codes w;
    const int          offset = code_offset(type);
    w.codes                   = unpack_codes(type, x, b);
    w.qx                      = offset != 0 ? _mm256_sub_epi8(w.codes, _mm256_set1_epi8((char) offset)) : w.codes;
    w.ax                      = _mm256_sign_epi8(w.qx, w.qx);
    return w;
}

KERNEL __m256i block_lanes(enum mg_type type, const struct block_codes * w, __m256i qy, int nc) {
    const int offset = code_offset(type);
    if (has_min(type) || (offset != 0 && nc == 1)) {
        const __m256i lanes = dot_u8_s8(w->codes, qy);
        return offset != 0 ? _mm256_sub_epi32(lanes, dot_u8_s8(_mm256_set1_epi8((char) offset), qy)) : lanes;
    }
    return dot_s8_s8(w->ax, w->qx, qy);
}

// One weight row's block b against each column: acc[c] (one chain over the
// blocks) and summs[c] take the block's step.
KERNEL void add_block_32(enum mg_type type, const void * x, int64_t b, const void * const y[], int nc, float acc[],
                         float summs[]) {
    const struct block_codes w  = load_block_codes(type, x, b);
    const float              dx = f16(block_header(type, x, b)[0]);
    UNROLLED for (int c = 0; c < nc; c++) {
        const __m256i lanes = block_lanes(type, &w, load_256(act_codes(type, y[c], b)), nc);
        acc[c]              = fmaf(dx * f16(act_header(type, y[c], b)[0]), (float) hsum_i32_8(lanes), acc[c]);
        if (has_min(type)) summs[c] += f16(block_header(type, x, b)[1]) * f16(act_header(type, y[c], b)[1]);
    }
}

KERNEL void dot_blocks_32(enum mg_type type, int64_t n, float * s, const void * x, const void * vy, size_t ys, int nc) {
    const void * y[MAX_COLS];
    float        acc[MAX_COLS];
    float        summs[MAX_COLS];
    UNROLLED for (int c = 0; c < nc; c++) {
        y[c]     = column(vy, ys, c);
        acc[c]   = 0.0f;
        summs[c] = 0.0f;
    }
    // One chain of FMAs over the blocks, as ggml's repacked gemv adds (the
    // two types left here, Q4_0 and IQ4_NL, are repacked by llama.cpp's x86
    // build): every block goes to accumulator 0.
    for (int64_t b = 0; b < n / 32; b++) add_block_32(type, x, b, y, nc, acc, summs);
    UNROLLED for (int c = 0; c < nc; c++) {
        s[c] = acc[c];
        if (has_min(type)) s[c] += summs[c];
    }
}

// [low half of a | low half of b] and [high half of a | high half of b].
KERNEL __m256i low_halves(__m256i a, __m256i b) {
#if defined(__AVX512VL__)
    return _mm256_shuffle_i32x4(a, b, 0);   // AVX-512 has it for all 32 registers
#else
    return _mm256_permute2x128_si256(a, b, 0x20);
#endif
}

KERNEL __m256i high_halves(__m256i a, __m256i b) {
#if defined(__AVX512VL__)
    return _mm256_shuffle_i32x4(a, b, 3);
#else
    return _mm256_permute2x128_si256(a, b, 0x31);
#endif
}

// [high half of a | low half of a].
KERNEL __m256i swap_halves(__m256i a) {
#if defined(__AVX512VL__)
    return _mm256_shuffle_i32x4(a, a, 1);
#else
    return _mm256_permute2x128_si256(a, a, 0x01);
#endif
}

// 4 registers, each [row k | row k + 4] (4 int32 of each row) -> 4 registers,
// register j holding int32 number j of rows 0..7, row r in lane r: two rounds
// of shuffles within the 128-bit halves.
KERNEL void transpose_4x4_halves(const __m256i p[4], __m256i out[4]) {
    const __m256i t0 = _mm256_unpacklo_epi32(p[0], p[1]);   // rows 0 1 (| 4 5): int32 0 0 1 1
    const __m256i t1 = _mm256_unpackhi_epi32(p[0], p[1]);   //                   int32 2 2 3 3
    const __m256i t2 = _mm256_unpacklo_epi32(p[2], p[3]);   // rows 2 3 (| 6 7)
    const __m256i t3 = _mm256_unpackhi_epi32(p[2], p[3]);
    out[0]           = _mm256_unpacklo_epi64(t0, t2);
    out[1]           = _mm256_unpackhi_epi64(t0, t2);
    out[2]           = _mm256_unpacklo_epi64(t1, t3);
    out[3]           = _mm256_unpackhi_epi64(t1, t3);
}

// 8 rows of 8 int32 -> 8 registers, register j holding int32 number j of
// every row, row r in lane r: the halves first, then 4 x 4 within them.
KERNEL void transpose_8x8_i32(__m256i v[8]) {
    __m256i lo[4], hi[4];
    UNROLLED for (int k = 0; k < 4; k++) {
        lo[k] = low_halves(v[k], v[k + 4]);    // int32 0..3 of rows k | k + 4
        hi[k] = high_halves(v[k], v[k + 4]);   // int32 4..7
    }
    transpose_4x4_halves(lo, v);
    transpose_4x4_halves(hi, v + 4);
}

// 16 bytes at p (row k) and at p + 4 * stride (row k + 4): [row k | row k + 4].
KERNEL __m256i load_rows_k_k4(const char * p, size_t stride) {
    return _mm256_loadu2_m128i((const __m128i *) (p + 4 * stride), (const __m128i *) p);
}

// How tile_32 makes a block's codes meet the activations. With VNNI the
// signed codes of Q8_0 and IQ4_NL move up by 128 (their top bit flipped) to
// unsigned bytes, and 128 joins the offsets; AVX2's maddubs would saturate on
// pairs of such products, so without VNNI they keep their sign and take the
// sign trick.
#if (defined(__AVX512VNNI__) && defined(__AVX512VL__)) || defined(__AVXVNNI__)
#define TILE_SHIFTS_SIGNED 1
#else
#define TILE_SHIFTS_SIGNED 0
#endif

KERNEL int tile_offset(enum mg_type type) {
    return signed_codes(type) && TILE_SHIFTS_SIGNED ? 128 : code_offset(type);
}

// The codes of block b of 8 rows (xb: the block of row 0; rows xs bytes
// apart), transposed: w[j], lane r, holds codes 4j .. 4j+3 of row r.
KERNEL void tile_codes(enum mg_type type, const char * xb, size_t xs, __m256i w[8]) {
    switch (type) {
    case MG_TYPE_Q4_0:
    case MG_TYPE_Q4_1:
    case MG_TYPE_IQ4_NL: {
        // The 16 bytes of nibbles are transposed as they are, then split: the
        // low nibbles of int32 j are codes 4j..4j+3, the high ones 16 + 4j...
        const size_t at = type == MG_TYPE_Q4_1 ? offsetof(struct mg_block_q4_1, qs)
                          : type == MG_TYPE_Q4_0 ? offsetof(struct mg_block_q4_0, qs)
                                                 : offsetof(struct mg_block_iq4_nl, qs);
        __m256i p[4], q[4];
        UNROLLED for (int k = 0; k < 4; k++) p[k] = load_rows_k_k4(xb + (size_t) k * xs + at, xs);
        transpose_4x4_halves(p, q);
        const __m256i m4 = _mm256_set1_epi8(0x0f);
        UNROLLED for (int j = 0; j < 4; j++) {
            w[j]     = _mm256_and_si256(q[j], m4);
            w[j + 4] = _mm256_and_si256(_mm256_srli_epi16(q[j], 4), m4);
        }
        if (type == MG_TYPE_IQ4_NL) {
            const __m128i levels = _mm_loadu_si128((const __m128i *) mg_kvalues_iq4nl);
            UNROLLED for (int j = 0; j < 8; j++) w[j] = _mm256_shuffle_epi8(_mm256_set_m128i(levels, levels), w[j]);
        }
        break;
    }
    case MG_TYPE_Q8_0: {   // 32 bytes: each 16-byte half of the rows as above
        const size_t at = offsetof(struct mg_block_q8_0, qs);
        __m256i      p[4], q[4];
        UNROLLED for (int k = 0; k < 4; k++) p[k] = load_rows_k_k4(xb + (size_t) k * xs + at, xs);
        transpose_4x4_halves(p, w);
        UNROLLED for (int k = 0; k < 4; k++) q[k] = load_rows_k_k4(xb + (size_t) k * xs + at + 16, xs);
        transpose_4x4_halves(q, w + 4);
        break;
    }
    default: {   // Q5_0, Q5_1: unpacked row by row, then transposed
        UNROLLED for (int r = 0; r < 8; r++) w[r] = unpack_codes(type, xb + (size_t) r * xs, 0);
        transpose_8x8_i32(w);
        break;
    }
    }
    if (signed_codes(type) && TILE_SHIFTS_SIGNED) {
        UNROLLED for (int j = 0; j < 8; j++) w[j] = _mm256_xor_si256(w[j], _mm256_set1_epi8((char) 0x80));
    }
}

// The same from a repacked Q4_0 group (repack.c): the 4 x 32 bytes after
// the 8 scales already hold, in int32 lane r, bytes 4j..4j+3 of row r's
// codes, which the transpose above makes; only the nibble split is left.
KERNEL void tile_codes_x8(const char * group, __m256i w[8]) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    UNROLLED for (int j = 0; j < 4; j++) {
        const __m256i q = load_256(group + 16 + 32 * j);
        w[j]            = _mm256_and_si256(q, m4);
        w[j + 4]        = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
    }
}

// The F16 at byte `at` of 8 rows' blocks, as 8 floats (row r in lane r).
KERNEL __m256 rows_f16_x8(const char * xb, size_t xs, size_t at) {
    uint16_t h[8];
    UNROLLED for (int r = 0; r < 8; r++) memcpy(&h[r], xb + (size_t) r * xs + at, sizeof(h[r]));
    return halves_x8(h);
}

// -offset * (the sum of the 32 activation codes of block b of each column),
// what turns a sum of unsigned codes times activations into S: in every lane
// of out[c]. The 8 lane sums of several columns are added up together, in
// one transpose-and-add.
KERNEL void minus_offset_sums(enum mg_type type, const char * y, size_t ys, int64_t b, int nc, int offset,
                              __m256i out[]) {
    if (nc == 1) {   // one column: its 8 lanes added up on their own
        __m256i t = dot_u8_s8(_mm256_set1_epi8((char) offset), load_256(act_codes(type, y, b)));
        t         = _mm256_add_epi32(t, _mm256_shuffle_epi32(t, _MM_SHUFFLE(1, 0, 3, 2)));
        t         = _mm256_add_epi32(t, _mm256_shuffle_epi32(t, _MM_SHUFFLE(2, 3, 0, 1)));
        out[0]    = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_add_epi32(t, swap_halves(t)));
        return;
    }
    __m256i t[4];
    UNROLLED for (int c = 0; c < 4; c++) {   // 8 lanes of offset * 4 codes; missing columns 0
        t[c] = c < nc ? dot_u8_s8(_mm256_set1_epi8((char) offset), load_256(act_codes(type, y + (size_t) c * ys, b)))
                      : _mm256_setzero_si256();
    }
    const __m256i t01 = _mm256_add_epi32(_mm256_unpacklo_epi32(t[0], t[1]), _mm256_unpackhi_epi32(t[0], t[1]));
    const __m256i t23 = _mm256_add_epi32(_mm256_unpacklo_epi32(t[2], t[3]), _mm256_unpackhi_epi32(t[2], t[3]));
    __m256i       sum = _mm256_add_epi32(_mm256_unpacklo_epi64(t01, t23), _mm256_unpackhi_epi64(t01, t23));
    sum               = _mm256_add_epi32(sum, swap_halves(sum));   // lane c: the total of column c
    sum               = _mm256_sub_epi32(_mm256_setzero_si256(), sum);
    UNROLLED for (int c = 0; c < nc; c++) {
        switch (c) {   // the shuffle wants a constant
        case 0: out[c] = _mm256_shuffle_epi32(sum, 0x00); break;
        case 1: out[c] = _mm256_shuffle_epi32(sum, 0x55); break;
        case 2: out[c] = _mm256_shuffle_epi32(sum, 0xaa); break;
        default: out[c] = _mm256_shuffle_epi32(sum, 0xff); break;
        }
    }
}

// Four activation codes (as one int32) in all 8 lanes.
KERNEL __m256i broadcast_4_codes(const int8_t * qa) {
    int32_t four;
    memcpy(&four, qa, sizeof(four));
    return _mm256_set1_epi32(four);
}

// Block b of 8 weight rows (x, rows xs bytes apart; row r in lane r) against
// block b of each column (y, ys bytes apart): acc[c] and summs[c] take the
// steps of add_block_32 for all 8 rows at once.
//
// x8: the rows are repacked (repack.c): x is their first 144-byte group, and
// group b holds block b of all 8 rows, laid out as w and dx want them.
KERNEL void tile_block_32(enum mg_type type, bool x8, const char * x, size_t xs, const char * y, size_t ys, int nc,
                          int64_t b, __m256 acc[], __m256 summs[]) {
    const char * xb = x + (size_t) b * block_bytes(type) * (x8 ? 8 : 1);
    __m256i      w[8];
    if (x8) {
        tile_codes_x8(xb, w);
    } else {
        tile_codes(type, xb, xs, w);   // w[j], lane r: codes 4j .. 4j+3 of row r
    }
    const bool sign_trick = signed_codes(type) && !TILE_SHIFTS_SIGNED;
    __m256i    abs_w[8];
    if (sign_trick) {
        UNROLLED for (int j = 0; j < 8; j++) abs_w[j] = _mm256_sign_epi8(w[j], w[j]);
    }
    const __m256 dx     = x8 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) xb)) : rows_f16_x8(xb, xs, 0);
    const int    offset = tile_offset(type);
    __m256i      minus_offset[MAX_COLS];
    if (offset != 0) minus_offset_sums(type, y, ys, b, nc, offset, minus_offset);
    UNROLLED for (int c = 0; c < nc; c++) {
        const char *      yc  = y + (size_t) c * ys;
        const mg_fp16_t * hy  = act_header(type, yc, b);
        const int8_t *    qa  = act_codes(type, yc, b);
        // Four independent chains of dot products, so that they overlap; the
        // integer sums are exact in any order.
        __m256i part[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(),
                           _mm256_setzero_si256()};
        UNROLLED for (int j = 0; j < 8; j++) {
            const __m256i a = broadcast_4_codes(qa + 4 * j);
            part[j % 4]     = sign_trick ? _mm256_add_epi32(part[j % 4], dot_s8_s8(abs_w[j], w[j], a))
                                         : dot_u8_s8_acc(part[j % 4], w[j], a);
        }
        __m256i sum = _mm256_add_epi32(_mm256_add_epi32(part[0], part[1]), _mm256_add_epi32(part[2], part[3]));
        if (offset != 0) sum = _mm256_add_epi32(sum, minus_offset[c]);
        acc[c] = _mm256_fmadd_ps(_mm256_mul_ps(dx, f16_x8(hy[0])), _mm256_cvtepi32_ps(sum), acc[c]);
        if (has_min(type)) summs[c] = _mm256_add_ps(summs[c], _mm256_mul_ps(rows_f16_x8(xb, xs, 2), f16_x8(hy[1])));
    }
}

// Reads the bytes of 8 rows in memory order, one load per cache line, and
// throws them away: the rows are then in cache for a tile. A tile reads its
// rows side by side, 8 short streams, and the hardware prefetchers, made for
// long sequential streams, then fall behind: on the bench machine a one-token
// Q4_0 product read its weights from memory at 10 GB/s that way, and at 20
// GB/s with this walk first. (A layout with the rows of a tile interleaved,
// which ggml makes when it loads a model, reads in order by itself: the
// loader makes one for Q4_0, repack.c, and those tiles skip this walk.)
KERNEL void read_lines(const char * p, size_t bytes) {
    for (size_t at = 0; at < bytes; at += 64) (void) *(const volatile char *) (p + at);
}

KERNEL void read_in_order(const char * x, size_t xs, size_t row_bytes) {
    if (xs == row_bytes) {   // the 8 rows are one stretch of memory
        read_lines(x, 8 * row_bytes);
        return;
    }
    UNROLLED for (int r = 0; r < 8; r++) read_lines(x + (size_t) r * xs, row_bytes);
}

// 8 weight rows against nc columns: acc[k][c], the accumulators of the blocks
// k mod 4, for all 8 rows.
KERNEL void tile_32(enum mg_type type, bool x8, int64_t n, float * s, size_t ss, const void * x, size_t xs,
                    const void * y, size_t ys, int nc) {
    if (nc == 1 && !x8) read_in_order(x, xs, (size_t) (n / 32) * block_bytes(type));   // one token: weights from memory
    __m256 acc[MAX_COLS], summs[MAX_COLS];
    UNROLLED for (int c = 0; c < nc; c++) {
        acc[c]   = _mm256_setzero_ps();
        summs[c] = _mm256_setzero_ps();
    }
    // One chain over the blocks per output, as ggml_gemv/gemm_q4_0_8x8_q8_0.
    for (int64_t b = 0; b < n / 32; b++) tile_block_32(type, x8, x, xs, y, ys, nc, b, acc, summs);
    UNROLLED for (int c = 0; c < nc; c++) {
        __m256 r8 = acc[c];
        if (has_min(type)) r8 = _mm256_add_ps(r8, summs[c]);
        _mm256_storeu_ps(s + (size_t) c * ss, r8);
    }
}

// One token (one column) takes the tile only where it pays. A tile reads its
// 8 rows in order first (read_in_order) and then computes, so memory and
// arithmetic take turns; one row at a time they overlap, and memory streams
// in order by itself. The tile wins where its arithmetic saving is large and
// the wait short: rows of 4- and 5-bit codes up to 576 bytes (rows of 768 in
// MiniMind; measured on the bench machine: Q4_0 20 GB/s against 15). Q8_0
// rows (a byte a weight) and longer rows stream faster one by one.
#define TILE_ONE_COLUMN_MAX_ROW_BYTES 576

KERNEL bool one_column_by_rows(enum mg_type type, int64_t n) {
    return type == MG_TYPE_Q8_0 || (size_t) (n / 32) * block_bytes(type) > TILE_ONE_COLUMN_MAX_ROW_BYTES;
}

// The entry points of a type: vec_dot and vec_dot_cols from dot_blocks_32,
// vec_dot_tile from tile_32 (fewer than 8 rows, or one column where the rows
// are better read one by one: from dot_blocks_32, row by row).
#define ENTRY_POINTS_32(name, type)                                                                              \
    KERNEL void dot_##name(int64_t n, float * s, const void * x, const void * y, size_t ys, int nc) {            \
        dot_blocks_32(type, n, s, x, y, ys, nc);                                                                 \
    }                                                                                                            \
    ENTRY_POINTS(name, dot_##name)                                                                               \
    void mg_vec_dot_tile_##name##_simd(int64_t n, float * s, size_t ss, const void * x, size_t xs, int nr,      \
                                       const void * y, size_t ys, int nc) {                                      \
        MG_ASSERT(nr >= 1 && nr <= MG_VEC_DOT_MAX_ROWS && nc >= 1 && nc <= MAX_COLS);                           \
        if (nr < 8 || (nc == 1 && one_column_by_rows(type, n))) {                                                \
            mg_vec_dot_tile_by_rows(mg_vec_dot_cols_##name##_simd, n, s, ss, x, xs, nr, y, ys, nc);            \
            return;                                                                                              \
        }                                                                                                        \
        WITH_CONST_COLS(nc, tile_32, type, false, n, s, ss, x, xs, y, ys);                                       \
    }

ENTRY_POINTS_32(q4_0_q8_0, MG_TYPE_Q4_0)

// Q8_0 x Q8_0 in ggml's x86 order (ggml_vec_dot_q8_0_q8_0, AVX2 path, and
// llamafile's tinyBLAS_Q0_AVX for prompts, which adds alike): per block, 8
// int lanes of 4 products each, turned to float and FMA'd with dW * dA into
// 8 float lanes; hsum_float_8 at the end. The scalar mg_vec_dot_q8_0_q8_0
// does the same operations one lane at a time.
KERNEL void dot_q8_0_lanes(int64_t n, float * s, const void * vx, const void * vy, size_t ys, int nc) {
    const struct mg_block_q8_0 * x = vx;
    __m256 acc[MAX_COLS];
    UNROLLED for (int c = 0; c < nc; c++) acc[c] = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / MG_QK8_0; b++) {
        const __m256i qx = load_256(x[b].qs);
        const __m256i ax = _mm256_sign_epi8(qx, qx);
        const float   dx = f16(x[b].d);
        UNROLLED for (int c = 0; c < nc; c++) {
            const struct mg_block_q8_0 * y = column(vy, ys, c);
            const __m256 q = _mm256_cvtepi32_ps(dot_s8_s8(ax, qx, load_256(y[b].qs)));
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(dx * f16(y[b].d)), q, acc[c]);
        }
    }
    UNROLLED for (int c = 0; c < nc; c++) s[c] = hsum_float_8(acc[c]);
}
ENTRY_POINTS(q8_0_q8_0, dot_q8_0_lanes)   // its tile: lane_panel_32, below ("Tiles in ggml's lane order")

// Q4_1, Q5_0, Q5_1 the same way (ggml_vec_dot_q4_1_q8_1, _q5_0_q8_0,
// _q5_1_q8_1, AVX2 paths): the codes unpacked to 32 bytes (Q5_0's made
// signed, q - 16), 8 exact int lanes per block, FMA'd with dW * dA into 8
// float lanes; Q4_1 and Q5_1 add up mW * sA on the side (fused, as GCC
// compiles ggml's line) and add it after hsum_float_8. Scalar: vec.c.
KERNEL void dot_lanes_32(enum mg_type type, int64_t n, float * s, const void * x, const void * vy, size_t ys,
                         int nc) {
    const bool min = has_min(type), sgn = type == MG_TYPE_Q5_0;
    __m256     acc[MAX_COLS];
    float      summs[MAX_COLS];
    UNROLLED for (int c = 0; c < nc; c++) {
        acc[c]   = _mm256_setzero_ps();
        summs[c] = 0.0f;
    }
    for (int64_t b = 0; b < n / 32; b++) {
        __m256i qx = unpack_codes(type, x, b);
        if (sgn) qx = _mm256_sub_epi8(qx, _mm256_set1_epi8(16));
        const __m256i           ax = sgn ? _mm256_sign_epi8(qx, qx) : qx;
        const mg_fp16_t * const hx = block_header(type, x, b);
        const float             dx = f16(hx[0]);
        UNROLLED for (int c = 0; c < nc; c++) {
            const void *      y  = column(vy, ys, c);
            const mg_fp16_t * hy = act_header(type, y, b);
            const __m256i     qy = load_256(act_codes(type, y, b));
            const __m256i     li = sgn ? dot_s8_s8(ax, qx, qy) : dot_u8_s8(qx, qy);
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(dx * f16(hy[0])), _mm256_cvtepi32_ps(li), acc[c]);
            if (min) summs[c] = fmaf(f16(hx[1]), f16(hy[1]), summs[c]);
        }
    }
    UNROLLED for (int c = 0; c < nc; c++) s[c] = min ? hsum_float_8(acc[c]) + summs[c] : hsum_float_8(acc[c]);
}

#define ENTRY_POINTS_LANES(name, type)                                                                 \
    KERNEL void dot_##name(int64_t n, float * s, const void * x, const void * y, size_t ys, int nc) { \
        dot_lanes_32(type, n, s, x, y, ys, nc);                                                        \
    }                                                                                                  \
    ENTRY_POINTS(name, dot_##name)

ENTRY_POINTS_LANES(q4_1_q8_1, MG_TYPE_Q4_1)
ENTRY_POINTS_LANES(q5_0_q8_0, MG_TYPE_Q5_0)
ENTRY_POINTS_LANES(q5_1_q8_1, MG_TYPE_Q5_1)   // their tiles: lane_panel_32, below

ENTRY_POINTS_32(iq4_nl_q8_0, MG_TYPE_IQ4_NL)

// The tile of a repacked Q4_0 matrix (repack.c): always 8 rows, and one
// column too takes the tile, since the group reads in memory order.
void mg_vec_dot_tile_q4_0x8_q8_0_simd(int64_t n, float * s, size_t ss, const void * x, const void * y, size_t ys,
                                      int nc) {
    MG_ASSERT(nc >= 1 && nc <= MAX_COLS);
    WITH_CONST_COLS(nc, tile_32, MG_TYPE_Q4_0, true, n, s, ss, x, 0, y, ys);
}

// ---------------------------------------------------------------------------
// K-quants x Q8_K (ggml: the AVX2 paths of ggml_vec_dot_q*_K_q8_K). Codes are
// unpacked 32 at a time, in element order, as unsigned bytes; maddubs
// multiplies them with 32 activation codes into 16 pair sums (int16, far from
// saturating), and madd with the sub-block scales (int16) turns those into 8
// int32 lanes of scaled sums. The lanes of a whole super-block are added as
// integers, then
//     acc = fma(dW * dA, float(lanes), acc)
// once per super-block (8 float lanes, ggml's order), except in Q4_K and Q6_K,
// the bench models' K-quants, which have tiles: there the 8 lanes are summed
// into one exact integer first, so that a tile can hold 8 rows in the lanes.
// Q8_K's bsums pay for the mins of Q2_K/Q4_K/Q5_K (and Q6_K's -32 in a tile).
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
TILE_BY_ROWS(q2_K_q8_K)

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
TILE_BY_ROWS(q3_K_q8_K)

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
// (sub-block 2j+1). Each dot product is, super-block by super-block,
//
//     S    = the sum over the 8 sub-blocks j of sc_j * (codes . activations)
//     M    = the sum over j of m_j * (the sum of sub-block j's activations,
//            two of Q8_K's bsums), both exact in int
//     acc  = fma(dW * dA, float(S), acc)
//     accm = fma(dminW * dA, float(M), accm)
//
// and s = acc - accm at the end. (ggml's AVX2 kernel keeps 8 float lanes of
// S and 4 of M per dot product; two plain sums are what lets a tile put 8
// rows in the lanes.) In one row, the 8 int lanes of S and the 4 of M are
// summed per super-block.
KERNEL int hsum_i32_4(__m128i x) {
    x = _mm_add_epi32(x, _mm_unpackhi_epi64(x, x));
    x = _mm_add_epi32(x, _mm_shuffle_epi32(x, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(x);
}

KERNEL void dot_q4_K_q8_K(int64_t n, float * s, const void * vx, const void * vy, size_t ys, int nc) {
    const struct mg_block_q4_K * x = vx;
    const struct mg_block_q8_K * y[MAX_COLS];
    float                        acc[MAX_COLS], acc_m[MAX_COLS];
    UNROLLED for (int c = 0; c < nc; c++) {
        y[c]     = column(vy, ys, c);
        acc[c]   = 0.0f;
        acc_m[c] = 0.0f;
    }
    const __m256i m4 = _mm256_set1_epi8(0xf);
    for (int64_t i = 0; i < n / MG_QK_K; i++) {
        const float dx = f16(x[i].d), dminx = f16(x[i].dmin);
        uint32_t    sm[4];
        k4_scales_mins(x[i].scales, sm);
        const __m128i mins = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *) &sm[2]));
        int32_t       scale_pairs[8];
        k4_scale_pairs(sm, scale_pairs);
        __m256i sumi[MAX_COLS];
        UNROLLED for (int c = 0; c < nc; c++) sumi[c] = _mm256_setzero_si256();
        UNROLLED for (int j = 0; j < 4; j++) {
            const __m256i bits     = load_256(x[i].qs + 32 * j);
            const __m256i q_lo     = _mm256_and_si256(bits, m4);
            const __m256i q_hi     = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
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
            const __m256i bsums = load_256(y[c][i].bsums);
            const __m128i pairs = _mm_hadd_epi16(_mm256_castsi256_si128(bsums), _mm256_extracti128_si256(bsums, 1));
            const int     m     = hsum_i32_4(_mm_madd_epi16(mins, pairs));
            acc[c]              = fmaf(dx * y[c][i].d, (float) hsum_i32_8(sumi[c]), acc[c]);
            acc_m[c]            = fmaf(dminx * y[c][i].d, (float) m, acc_m[c]);
        }
    }
    UNROLLED for (int c = 0; c < nc; c++) s[c] = acc[c] - acc_m[c];
}
ENTRY_POINTS(q4_K_q8_K, dot_q4_K_q8_K)

// acc + the 8 int32 lanes of pairs of int16 products a * b (VNNI: one instruction).
KERNEL __m256i dot_i16_acc(__m256i acc, __m256i a, __m256i b) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpwssd_epi32(acc, a, b);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
#endif
}

// Byte k of every int32 lane, as an int32; bytes k and k+1 as two int16s. The
// byte shuffle counts within 128-bit halves: int32 lane d starts at byte 4d.
KERNEL __m256i byte_of_each_i32(__m256i v, int k) {
    const __m256i lane_start = _mm256_setr_epi32(0, 4, 8, 12, 0, 4, 8, 12);
    return _mm256_shuffle_epi8(v, _mm256_add_epi32(_mm256_set1_epi32((int) (0x80808000u | (uint32_t) k)), lane_start));
}

KERNEL __m256i byte_pair_of_each_i32(__m256i v, int k) {
    const __m256i lane_start = _mm256_setr_epi32(0, 0x40004, 0x80008, 0xc000c, 0, 0x40004, 0x80008, 0xc000c);
    const __m256i pick       = _mm256_set1_epi32((int) (0x80008000u | (uint32_t) (k + 1) << 16 | (uint32_t) k));
    return _mm256_shuffle_epi8(v, _mm256_add_epi32(pick, lane_start));
}

// k4_scales_mins for 8 rows at once, row r in lane r, from a[t] (lane r:
// bytes 4t .. 4t+3 of row r's 12 bytes of packed scales and mins): sc[0]
// holds scales 0..3 (a byte each), sc[1] scales 4..7, mn[0] and mn[1] the mins.
KERNEL void k4_scales_mins_lanes(const __m256i a[3], __m256i sc[2], __m256i mn[2]) {
    const __m256i low6 = _mm256_set1_epi32(0x3f3f3f3f), low4 = _mm256_set1_epi32(0x0f0f0f0f);
    const __m256i top2 = _mm256_set1_epi32(0x03030303);
    sc[0] = _mm256_and_si256(a[0], low6);
    sc[1] = _mm256_or_si256(_mm256_and_si256(a[2], low4),
                            _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(a[0], 6), top2), 4));
    mn[0] = _mm256_and_si256(a[1], low6);
    mn[1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(a[2], 4), low4),
                            _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(a[1], 6), top2), 4));
}

// Where tile_block_q4_K finds super-block i of its 8 rows. In the file's
// layout: x + i * 144, rows xs bytes apart, so every piece is transposed into
// lanes first. Repacked (x8, repack.c): group i, x + i * 1152, where each
// piece is one 32-byte load in lane order already.
KERNEL void k4_scales_mins_8(bool x8, const char * xb, size_t xs, __m256i sc[2], __m256i mn[2]) {
    __m256i a[4];   // a[t]: bytes 4t .. 4t+3 of the scales of every row
    if (x8) {
        UNROLLED for (int t = 0; t < 3; t++) a[t] = load_256(xb + 32 + 32 * t);
    } else {
        const size_t at = offsetof(struct mg_block_q4_K, scales);
        __m256i      p[4];   // 16 bytes a row: the 12 bytes of scales and 4 of codes
        UNROLLED for (int k = 0; k < 4; k++) p[k] = load_rows_k_k4(xb + (size_t) k * xs + at, xs);
        transpose_4x4_halves(p, a);
    }
    k4_scales_mins_lanes(a, sc, mn);
}

// The code bytes of elements 64 chunk .. 64 chunk + 63: w[j], lane r, holds
// bytes 4j .. 4j+3 of them in row r.
KERNEL void k4_code_bytes_8(bool x8, const char * xb, size_t xs, int chunk, __m256i w[8]) {
    if (x8) {
        UNROLLED for (int j = 0; j < 8; j++) w[j] = load_256(xb + 128 + 256 * chunk + 32 * j);
        return;
    }
    UNROLLED for (int r = 0; r < 8; r++) {
        w[r] = load_256(xb + (size_t) r * xs + offsetof(struct mg_block_q4_K, qs) + 32 * (size_t) chunk);
    }
    transpose_8x8_i32(w);
}

// Super-block i of 8 Q4_K rows (x, xs bytes apart, or repacked: x8) against
// super-block i of each column: acc[c] and acc_m[c] take the steps of
// dot_q4_K_q8_K for all 8 rows. The code bytes of each 64 elements, 8 rows in
// the lanes, are split into nibbles; each sub-block's S, summed by dot
// products against 4 broadcast activation codes, is multiplied by its 8
// rows' scales.
//
// gemm: the order of ggml's repacked gemm (ggml_gemm_q4_K_8x8_q8_K, x86),
// which llama.cpp gives every whole group of 4 tokens: the FMAs come once per
// 64 elements (the two sub-blocks of a chunk), acc += float(S_chunk) * dW dA
// and acc_m += float(M_chunk) * dminW dA, instead of once per super-block
// (its gemv, ggml_gemv_q4_K_8x8_q8_K, and dot_q4_K_q8_K). Only the float
// steps differ; the integer sums are the same.
KERNEL void tile_block_q4_K(bool x8, bool gemm, const char * x, size_t xs, const char * y, size_t ys, int nc,
                            int64_t i, __m256 acc[], __m256 acc_m[]) {
    const char * xb = x + (size_t) i * sizeof(struct mg_block_q4_K) * (x8 ? 8 : 1);
    __m256i      sc4[2], mn4[2];
    k4_scales_mins_8(x8, xb, xs, sc4, mn4);
    // The same floats either way: F16 -> F32 is exact.
    const __m256 dx = x8 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) xb))
                         : rows_f16_x8(xb, xs, offsetof(struct mg_block_q4_K, d));
    const __m256 dm = x8 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) (xb + 16)))
                         : rows_f16_x8(xb, xs, offsetof(struct mg_block_q4_K, dmin));
    __m256i      mins[4];   // lane r: the mins of sub-blocks 2t and 2t+1 of row r, as int16s
    UNROLLED for (int t = 0; t < 4; t++) mins[t] = byte_pair_of_each_i32(mn4[t / 2], 2 * (t % 2));
    const struct mg_block_q8_K * yb[MAX_COLS];
    __m256i                      sum[MAX_COLS], msum[MAX_COLS], pairs[MAX_COLS];
    __m256                       d[MAX_COLS], dmin[MAX_COLS];
    UNROLLED for (int c = 0; c < nc; c++) {
        yb[c]   = (const struct mg_block_q8_K *) (y + (size_t) c * ys) + i;
        sum[c]  = _mm256_setzero_si256();
        msum[c] = _mm256_setzero_si256();
        // The 8 sums of sub-blocks' activations (pairs of bsums), as int16s:
        // int32 t of `pairs` holds those of sub-blocks 2t, 2t+1 (t = 0, 1 in
        // the low half, 2, 3 at int32 4, 5 in the high half).
        const __m256i sums16 = _mm256_madd_epi16(load_256(yb[c]->bsums), _mm256_set1_epi16(1));
        pairs[c]             = _mm256_packs_epi32(sums16, sums16);
        const __m256 dy      = _mm256_set1_ps(yb[c]->d);
        d[c]                 = _mm256_mul_ps(dx, dy);
        dmin[c]              = _mm256_mul_ps(dm, dy);
    }
    const __m256i m4 = _mm256_set1_epi8(0xf);
    UNROLLED for (int chunk = 0; chunk < 4; chunk++) {   // elements 64 chunk .. 64 chunk + 63
        __m256i lo[8], hi[8];
        k4_code_bytes_8(x8, xb, xs, chunk, lo);
        UNROLLED for (int j = 0; j < 8; j++) {   // lane r: codes 4j .. 4j+3 of sub-block 2 chunk (lo), 2 chunk + 1 (hi)
            hi[j] = _mm256_and_si256(_mm256_srli_epi16(lo[j], 4), m4);
            lo[j] = _mm256_and_si256(lo[j], m4);
        }
        const __m256i sc_lo = byte_of_each_i32(sc4[chunk / 2], 2 * (chunk % 2));
        const __m256i sc_hi = byte_of_each_i32(sc4[chunk / 2], 2 * (chunk % 2) + 1);
        UNROLLED for (int c = 0; c < nc; c++) {
            const int8_t * q8 = yb[c]->qs + 64 * chunk;
            __m256i        t_lo[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
            __m256i        t_hi[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
            UNROLLED for (int j = 0; j < 8; j++) {
                t_lo[j % 2] = dot_u8_s8_acc(t_lo[j % 2], lo[j], broadcast_4_codes(q8 + 4 * j));
                t_hi[j % 2] = dot_u8_s8_acc(t_hi[j % 2], hi[j], broadcast_4_codes(q8 + 32 + 4 * j));
            }
            const __m256i s_lo = _mm256_mullo_epi32(_mm256_add_epi32(t_lo[0], t_lo[1]), sc_lo);
            const __m256i s_hi = _mm256_mullo_epi32(_mm256_add_epi32(t_hi[0], t_hi[1]), sc_hi);
            const int     t    = chunk;   // the mins of sub-blocks 2t, 2t+1 against their activation sums
            const __m256i pair = _mm256_permutevar8x32_epi32(pairs[c], _mm256_set1_epi32(t < 2 ? t : t + 2));
            if (gemm) {
                const __m256i m = dot_i16_acc(_mm256_setzero_si256(), mins[t], pair);
                acc[c]          = _mm256_fmadd_ps(d[c], _mm256_cvtepi32_ps(_mm256_add_epi32(s_lo, s_hi)), acc[c]);
                acc_m[c]        = _mm256_fmadd_ps(dmin[c], _mm256_cvtepi32_ps(m), acc_m[c]);
            } else {
                sum[c]  = _mm256_add_epi32(sum[c], _mm256_add_epi32(s_lo, s_hi));
                msum[c] = dot_i16_acc(msum[c], mins[t], pair);
            }
        }
    }
    if (gemm) return;
    UNROLLED for (int c = 0; c < nc; c++) {
        acc[c]   = _mm256_fmadd_ps(d[c], _mm256_cvtepi32_ps(sum[c]), acc[c]);
        acc_m[c] = _mm256_fmadd_ps(dmin[c], _mm256_cvtepi32_ps(msum[c]), acc_m[c]);
    }
}

// One column reads the file's 8 rows in order first (read_in_order); the
// repacked groups are in order already.
KERNEL void tile_q4_K(bool x8, bool gemm, int64_t n, float * s, size_t ss, const void * x, size_t xs, const void * y,
                      size_t ys, int nc) {
    if (nc == 1 && !x8) read_in_order(x, xs, (size_t) (n / MG_QK_K) * sizeof(struct mg_block_q4_K));
    __m256 acc[MAX_COLS], acc_m[MAX_COLS];
    UNROLLED for (int c = 0; c < nc; c++) {
        acc[c]   = _mm256_setzero_ps();
        acc_m[c] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < n / MG_QK_K; i++) tile_block_q4_K(x8, gemm, x, xs, y, ys, nc, i, acc, acc_m);
    UNROLLED for (int c = 0; c < nc; c++) _mm256_storeu_ps(s + (size_t) c * ss, _mm256_sub_ps(acc[c], acc_m[c]));
}

void mg_vec_dot_tile_q4_K_q8_K_simd(int64_t n, float * s, size_t ss, const void * x, size_t xs, int nr,
                                    const void * y, size_t ys, int nc) {
    MG_ASSERT(nr >= 1 && nr <= MG_VEC_DOT_MAX_ROWS && nc >= 1 && nc <= MAX_COLS);
    const size_t row_bytes = (size_t) (n / MG_QK_K) * sizeof(struct mg_block_q4_K);
    if (nr < 8 || (nc == 1 && row_bytes > TILE_ONE_COLUMN_MAX_ROW_BYTES)) {
        mg_vec_dot_tile_by_rows(mg_vec_dot_cols_q4_K_q8_K_simd, n, s, ss, x, xs, nr, y, ys, nc);
        return;
    }
    WITH_CONST_COLS(nc, tile_q4_K, false, false, n, s, ss, x, xs, y, ys);
}

// The tile of a repacked Q4_K matrix (repack.c): always 8 rows, and one
// column too takes the tile, whatever the row length, since the groups read
// in memory order.
void mg_vec_dot_tile_q4_Kx8_q8_K_simd(int64_t n, float * s, size_t ss, const void * x, const void * y, size_t ys,
                                      int nc) {
    MG_ASSERT(nc >= 1 && nc <= MAX_COLS);
    WITH_CONST_COLS(nc, tile_q4_K, true, false, n, s, ss, x, 0, y, ys);
}

// The same tile in the order of ggml's repacked gemm (tile_block_q4_K,
// gemm), for the whole groups of 4 columns (repack.c, mg_repack_tile_q4_K).
void mg_gemm_tile_q4_Kx8_q8_K_simd(int64_t n, float * s, size_t ss, const void * x, const void * y, size_t ys,
                                   int nc) {
    MG_ASSERT(nc >= 1 && nc <= MAX_COLS);
    WITH_CONST_COLS(nc, tile_q4_K, true, true, n, s, ss, x, 0, y, ys);
}

// Q2_K repacked (repack.c, third drawing), ggml's q2_K_8x8 kernels, which
// llama.cpp's x86 build uses where it has AVX-512 (ggml_gemv_q2_K_8x8_q8_K,
// ggml_gemm_q2_K_8x8_q8_K). Super-block i of 8 rows is one 672-byte group:
// the 8 d at 0, the 8 dmin at 16, bytes 4t..4t+3 of each row's 16 scale bytes
// at 32 + 32t, bytes 4j..4j+3 of its 64 code bytes at 160 + 32j (row r at 4r
// in each). Per dot product and super-block, as the scalar mg_gemv_q2_K_q8_K
// (repack.c):
//
//     S = the sum over the 16 sub-blocks j of sc_j * (codes . activations)
//     M = the sum over j of m_j * bsums_j, both exact in int
//     acc = fma(float(S), dW * dA, acc), acc_m = fma(float(M), dminW * dA, acc_m)
//
// and s = acc - acc_m at the end. The gemm (whole groups of 4 columns) takes
// the two FMAs once per 128 elements instead (mg_gemm_q2_K_q8_K). Code byte
// 32h + l holds the 2-bit codes of elements 128h + 32k + l, k = 0..3, so
// shifting the 32 bytes j = 8h .. 8h+7 by 2k gives, in lane r, elements
// 128h + 32k + 4g .. +3 of row r (g = j - 8h): 4 dot products of 4 codes
// make a sub-block of 16.
KERNEL void tile_block_q2_K(bool gemm, const char * xb, const char * y, size_t ys, int nc, int64_t i, __m256 acc[],
                            __m256 acc_m[]) {
    const __m256 dx = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) xb));
    const __m256 dm = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) (xb + 16)));
    __m256i      sm[4];   // sm[t], lane r: scale bytes 4t .. 4t+3 of row r (scale | min << 4)
    UNROLLED for (int t = 0; t < 4; t++) sm[t] = load_256(xb + 32 + 32 * t);
    const struct mg_block_q8_K * yb[MAX_COLS];
    __m256i                      sum[MAX_COLS], msum[MAX_COLS];
    __m256                       d[MAX_COLS], dmin[MAX_COLS];
    UNROLLED for (int c = 0; c < nc; c++) {
        yb[c]           = (const struct mg_block_q8_K *) (y + (size_t) c * ys) + i;
        sum[c]          = _mm256_setzero_si256();
        msum[c]         = _mm256_setzero_si256();
        const __m256 dy = _mm256_set1_ps(yb[c]->d);
        d[c]            = _mm256_mul_ps(dx, dy);
        dmin[c]         = _mm256_mul_ps(dm, dy);
    }
    const __m256i m3 = _mm256_set1_epi8(3), low4 = _mm256_set1_epi32(0xf);
    UNROLLED for (int h = 0; h < 2; h++) {   // elements 128h .. 128h + 127
        __m256i bits[8];
        UNROLLED for (int g = 0; g < 8; g++) bits[g] = load_256(xb + 160 + 32 * (8 * h + g));
        UNROLLED for (int k = 0; k < 4; k++) {   // elements 128h + 32k .. +31: sub-blocks j0 = 8h + 2k and j0 + 1
            const int     j0 = 8 * h + 2 * k;
            const __m256i b0 = byte_of_each_i32(sm[j0 / 4], j0 % 4), b1 = byte_of_each_i32(sm[j0 / 4], j0 % 4 + 1);
            const __m256i sc0 = _mm256_and_si256(b0, low4), sc1 = _mm256_and_si256(b1, low4);
            const __m256i mn0 = _mm256_srli_epi32(b0, 4), mn1 = _mm256_srli_epi32(b1, 4);
            __m256i       q[8];
            UNROLLED for (int g = 0; g < 8; g++) q[g] = _mm256_and_si256(_mm256_srli_epi16(bits[g], 2 * k), m3);
            UNROLLED for (int c = 0; c < nc; c++) {
                const int8_t * q8 = yb[c]->qs + 128 * h + 32 * k;
                __m256i        t0 = _mm256_setzero_si256(), t1 = _mm256_setzero_si256();
                UNROLLED for (int g = 0; g < 4; g++) {
                    t0 = dot_u8_s8_acc(t0, q[g], broadcast_4_codes(q8 + 4 * g));
                    t1 = dot_u8_s8_acc(t1, q[g + 4], broadcast_4_codes(q8 + 16 + 4 * g));
                }
                sum[c] = _mm256_add_epi32(sum[c], _mm256_add_epi32(_mm256_mullo_epi32(t0, sc0), _mm256_mullo_epi32(t1, sc1)));
                const __m256i m0 = _mm256_mullo_epi32(mn0, _mm256_set1_epi32(yb[c]->bsums[j0]));
                const __m256i m1 = _mm256_mullo_epi32(mn1, _mm256_set1_epi32(yb[c]->bsums[j0 + 1]));
                msum[c]          = _mm256_add_epi32(msum[c], _mm256_add_epi32(m0, m1));
            }
        }
        if (!gemm && h == 0) continue;
        UNROLLED for (int c = 0; c < nc; c++) {   // the gemm after each half, the gemv after both
            acc[c]   = _mm256_fmadd_ps(d[c], _mm256_cvtepi32_ps(sum[c]), acc[c]);
            acc_m[c] = _mm256_fmadd_ps(dmin[c], _mm256_cvtepi32_ps(msum[c]), acc_m[c]);
            sum[c]   = _mm256_setzero_si256();
            msum[c]  = _mm256_setzero_si256();
        }
    }
}

KERNEL void tile_q2_K(bool gemm, int64_t n, float * s, size_t ss, const void * x, const void * y, size_t ys, int nc) {
    __m256 acc[MAX_COLS], acc_m[MAX_COLS];
    UNROLLED for (int c = 0; c < nc; c++) {
        acc[c]   = _mm256_setzero_ps();
        acc_m[c] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < n / MG_QK_K; i++) {
        tile_block_q2_K(gemm, (const char *) x + (size_t) i * 8 * sizeof(struct mg_block_q2_K), y, ys, nc, i, acc,
                        acc_m);
    }
    UNROLLED for (int c = 0; c < nc; c++) _mm256_storeu_ps(s + (size_t) c * ss, _mm256_sub_ps(acc[c], acc_m[c]));
}

// The tile of a repacked Q2_K matrix in the gemv's order (fewer than 4
// columns, and one token), and in the gemm's (whole groups of 4).
void mg_vec_dot_tile_q2_Kx8_q8_K_simd(int64_t n, float * s, size_t ss, const void * x, const void * y, size_t ys,
                                      int nc) {
    MG_ASSERT(nc >= 1 && nc <= MAX_COLS);
    WITH_CONST_COLS(nc, tile_q2_K, false, n, s, ss, x, y, ys);
}

void mg_gemm_tile_q2_Kx8_q8_K_simd(int64_t n, float * s, size_t ss, const void * x, const void * y, size_t ys,
                                   int nc) {
    MG_ASSERT(nc >= 1 && nc <= MAX_COLS);
    WITH_CONST_COLS(nc, tile_q2_K, true, n, s, ss, x, y, ys);
}

// 16 in the bytes whose bit `bit` is set in qh, 0 elsewhere (the 5th bit of Q5_K).
KERNEL __m256i fifth_bit_16(__m256i qh, int bit) {
    const __m256i set = _mm256_and_si256(qh, _mm256_set1_epi8((char) (1 << bit)));
    return _mm256_slli_epi16(_mm256_srli_epi16(set, bit), 4);   // the bit to position 4 (the shifts stay within bytes)
}

// Q5_K (scalar: mg_vec_dot_q5_K_q8_K): Q4_K plus a 5th bit, bit 2j (low
// nibbles) or 2j+1 (high nibbles) of qh[l], moved up to 16. The mins go into
// a scalar float sum here (ggml: summs), one FMA per super-block.
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
            // ggml's `summs += dmin * summ`, which GCC contracts into one FMA (a
            // second rounding here was 1 ulp off from the second super-block on)
            summs[c] = fmaf(dmin, (float) summ, summs[c]);
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
TILE_BY_ROWS(q5_K_q8_K)

// 32 six-bit codes of Q6_K: the low nibbles of low4, and bits shift..shift+1 of qh above them.
KERNEL __m256i six_bit_codes(__m256i low4, __m256i qh, int shift) {
    const __m256i high2 = _mm256_and_si256(_mm256_srli_epi16(qh, shift), _mm256_set1_epi8(3));
    return _mm256_or_si256(_mm256_and_si256(low4, _mm256_set1_epi8(0xf)), _mm256_slli_epi16(high2, 4));
}

// Half h of a Q6_K super-block: its 128 codes as four registers of 32 signed
// bytes (q[0] elements 128h + 0..31, q[1] + 32..63, q[2] + 64..95, q[3] +
// 96..127) and, for each, 16 int16 scales: that of sub-block 8h+2k eight
// times, then that of 8h+2k+1 (dot_q6_K_q8_K and its lane-order tile).
KERNEL void q6_K_half(const struct mg_block_q6_K * x, __m128i scales, int h, __m256i q[4], __m256i sc[4]) {
    const __m256i ql0 = load_256(x->ql + 64 * h);
    const __m256i ql1 = load_256(x->ql + 64 * h + 32);
    const __m256i qh  = load_256(x->qh + 32 * h);
    q[0] = six_bit_codes(ql0, qh, 0);
    q[1] = six_bit_codes(ql1, qh, 2);
    q[2] = six_bit_codes(_mm256_srli_epi16(ql0, 4), qh, 4);
    q[3] = six_bit_codes(_mm256_srli_epi16(ql1, 4), qh, 6);
    UNROLLED for (int k = 0; k < 4; k++) {
        const int     j    = 8 * h + 2 * k;
        const __m128i pick = _mm_set_epi64x((long long) (0x0101010101010101ull * (uint64_t) (j + 1)),
                                            (long long) (0x0101010101010101ull * (uint64_t) j));
        sc[k] = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(scales, pick));
    }
}

// Q6_K (scalar: mg_vec_dot_q6_K_q8_K), ggml's AVX2 kernel: in each half of
// 128 elements, 4 low bits from ql (64 bytes: two registers, low and high
// nibbles) and 2 high bits from qh (32 bytes, 4 codes per byte) make 4
// registers of 32 codes 0..63; maddubs with the activations, madd with each
// 16-element sub-block's signed scale: 8 int lanes. The codes' -32 comes off
// per lane through Q8_K's bsums (madd with the scales, times 32); then, per
// super-block, acc = fma(dA * dW, float(lanes), acc) in 8 float lanes, and
// hsum_float_8 at the end.
KERNEL void dot_q6_K_q8_K(int64_t n, float * s, const void * vx, const void * vy, size_t ys, int nc) {
    const struct mg_block_q6_K * x = vx;
    const struct mg_block_q8_K * y[MAX_COLS];
    __m256                       acc[MAX_COLS];
    UNROLLED for (int c = 0; c < nc; c++) {
        y[c]   = column(vy, ys, c);
        acc[c] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < n / MG_QK_K; i++) {
        const float   dx        = f16(x[i].d);
        const __m128i scales    = _mm_loadu_si128((const __m128i *) x[i].scales);
        const __m256i scales_16 = _mm256_cvtepi8_epi16(scales);
        __m256i       sumi[MAX_COLS];
        UNROLLED for (int c = 0; c < nc; c++) sumi[c] = _mm256_setzero_si256();
        UNROLLED for (int h = 0; h < 2; h++) {
            __m256i q[4], sc[4];
            q6_K_half(&x[i], scales, h, q, sc);
            UNROLLED for (int c = 0; c < nc; c++) {
                const int8_t * q8 = y[c][i].qs + 128 * h;
                __m256i        p[4];
                UNROLLED for (int k = 0; k < 4; k++) {
                    p[k] = _mm256_madd_epi16(sc[k], _mm256_maddubs_epi16(q[k], load_256(q8 + 32 * k)));
                }
                sumi[c] = _mm256_add_epi32(sumi[c], _mm256_add_epi32(p[0], p[1]));
                sumi[c] = _mm256_add_epi32(sumi[c], _mm256_add_epi32(p[2], p[3]));
            }
        }
        UNROLLED for (int c = 0; c < nc; c++) {
            const __m256i bsums  = load_256(y[c][i].bsums);
            const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(bsums, scales_16), 5);
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(y[c][i].d * dx), _mm256_cvtepi32_ps(_mm256_sub_epi32(sumi[c], offset)),
                                     acc[c]);
        }
    }
    UNROLLED for (int c = 0; c < nc; c++) s[c] = hsum_float_8(acc[c]);
}
ENTRY_POINTS(q6_K_q8_K, dot_q6_K_q8_K)   // its tile: lane_tile_q6_K, below

// ---------------------------------------------------------------------------
// Tiles in ggml's lane order: Q8_0, Q4_1, Q5_0, Q5_1 (vec_dot: dot_q8_0_lanes,
// dot_lanes_32) and Q6_K (dot_q6_K_q8_K). Their vec_dot keeps 8 float lanes
// per dot product, so a tile cannot put 8 rows in the lanes of one register,
// as tile_32 does: each of its outputs keeps its own register of 8 lanes and
// takes, block by block, the FMA vec_dot does,
//
//     acc(r, c) = fma(dW(r) * dA(c), float(lanes(r, c)), acc(r, c))
//
// with the same 8 exact int lanes, and hsum_float_8 at the end. What a tile
// saves is the rest: each weight block is loaded and unpacked once for the
// tile's columns, each activation block once for its rows, and the scales
// dW * dA of a stretch of blocks are multiplied beforehand, 8 rows (Q6_K: 4)
// in one vector multiply, so that the FMA reads its scale straight from
// memory (AVX-512 broadcasts it as part of the FMA).
//
// 4 rows x 4 columns of 8 lanes are 16 registers, half of AVX-512's 32 (16
// would be all of AVX2's): the other half holds the codes, the activations
// and the conversions. 8 rows would need all 32 for the accumulators alone,
// so a tile of 8 rows is two passes of 4 (llama.cpp's x86 prompt kernel,
// llamafile's tinyBLAS_Q0_AVX, takes tiles of 4 x 4 for the same reason).
//
// The int lanes. With VNNI one instruction (vpdpbusd) adds 4 products of
// unsigned by signed bytes to each lane. The weight codes are made unsigned
// with a bias (Q8_0's move up by 128, Q5_0's are kept 0..31 rather than
// -16..15), and each lane starts from -bias * (its 4 activation codes' sum),
// worked out once per column: lane k is then exactly the sum of products
// vec_dot's sign trick gives (activation codes stay within -127..127, so the
// sign trick never wraps). Without VNNI the lanes are vec_dot's instructions.
// ---------------------------------------------------------------------------

#define LANE_TILE_ROWS  4    // rows per pass
#define LANE_TILE_CHUNK 32   // blocks (super-blocks for Q6_K) whose scales are multiplied ahead at a time
#define LANE_PANEL_TILES (MG_VEC_DOT_PANEL_ROWS / 8)   // tiles of 8 rows in one panel (lane_panel_32)

#if (defined(__AVX512VNNI__) && defined(__AVX512VL__)) || defined(__AVXVNNI__)
#define LANE_TILE_VNNI 1
#else
#define LANE_TILE_VNNI 0
#endif

// What the weight codes are lifted by to be unsigned bytes (VNNI).
KERNEL int lane_bias(enum mg_type type) {
    return type == MG_TYPE_Q8_0 ? 128 : type == MG_TYPE_Q5_0 ? 16 : 0;
}

// Weight block b of a row, ready for lanes(): q the codes as the lanes take
// them, a = |q| for the sign trick (AVX2 with signed codes).
struct lane_codes {
    __m256i q, a;
};

KERNEL struct lane_codes lane_codes_of(enum mg_type type, const void * row, int64_t b) {
    struct lane_codes w;
    w.q = unpack_codes(type, row, b);   // Q8_0 signed; Q4_1 0..15; Q5_0, Q5_1 0..31
#if LANE_TILE_VNNI
    if (type == MG_TYPE_Q8_0) w.q = _mm256_xor_si256(w.q, _mm256_set1_epi8((char) 0x80));   // + 128
    w.a = w.q;
#else
    if (type == MG_TYPE_Q5_0) w.q = _mm256_sub_epi8(w.q, _mm256_set1_epi8(16));   // as dot_lanes_32
    w.a = has_min(type) ? w.q : _mm256_sign_epi8(w.q, w.q);
#endif
    return w;
}

// Do this build's lanes start from -bias * (the activations' sums)? (VNNI, Q8_0 and Q5_0.)
KERNEL bool lane_biased(enum mg_type type) {
    return LANE_TILE_VNNI && lane_bias(type) != 0;
}

// Where the lanes of activation block qy start: -bias * (each 4 codes' sum).
KERNEL __m256i lane_start(enum mg_type type, __m256i qy) {
    const int bias = LANE_TILE_VNNI ? lane_bias(type) : 0;
    if (bias == 0) return _mm256_setzero_si256();
    return _mm256_sub_epi32(_mm256_setzero_si256(), dot_u8_s8(_mm256_set1_epi8((char) bias), qy));
}

// The 8 int lanes of a weight block against an activation block: those of
// dot_q8_0_lanes and dot_lanes_32, to the integer.
KERNEL __m256i lanes(enum mg_type type, const struct lane_codes * w, __m256i qy, __m256i start) {
#if LANE_TILE_VNNI
    (void) type;
    return dot_u8_s8_acc(start, w->q, qy);
#else
    (void) start;
    return has_min(type) ? dot_u8_s8(w->q, qy) : dot_s8_s8(w->a, w->q, qy);
#endif
}

// The F16 at element `at` (0: d, 1: m) of block b's header in 8 rows, as 8 floats.
KERNEL __m256 rows_header_x8(enum mg_type type, const char * const xr[], int64_t b, int at) {
    uint16_t h[8];
    UNROLLED for (int r = 0; r < 8; r++) h[r] = block_header(type, xr[r], b)[at];
    return halves_x8(h);
}

// What a stretch of the columns' blocks gives every tile of a panel, worked
// out once for all of them: each block's dA, Q8_1's s, and the lanes' start.
struct lane_cols {
    _Alignas(32) int32_t start[LANE_TILE_CHUNK][MAX_COLS][8];   // lane_start of each column's block
    float                dy[LANE_TILE_CHUNK][MAX_COLS];         // dA
    float                sy[LANE_TILE_CHUNK][MAX_COLS];         // Q8_1's s (Q4_1, Q5_1)
};

// One tile's accumulators, waiting in memory between stretches.
struct lane_acc {
    _Alignas(32) float part[2][LANE_TILE_ROWS][MAX_COLS][8];   // pass p, row r, column c: 8 lanes
    _Alignas(32) float summs[MAX_COLS][8];                     // lane r: the summs of row r (Q4_1, Q5_1)
};

KERNEL void lane_cols_of(enum mg_type type, const void * const y[], int nc, int64_t b0, int64_t b1,
                         struct lane_cols * lc) {
    for (int64_t b = b0; b < b1; b++) {
        UNROLLED for (int c = 0; c < nc; c++) {
            const mg_fp16_t * hy = act_header(type, y[c], b);
            lc->dy[b - b0][c]    = f16(hy[0]);
            if (has_min(type)) lc->sy[b - b0][c] = f16(hy[1]);
            if (lane_biased(type)) {
                _mm256_store_si256((__m256i *) lc->start[b - b0][c], lane_start(type, load_256(act_codes(type, y[c], b))));
            }
        }
    }
}

// One tile of 8 rows (xr) over the stretch b0..b1: first what its rows share,
// each column's scales dW * dA for all 8 rows (one multiply) and Q4_1/Q5_1's
// summs, then one pass over the stretch for rows 0-3 and one for rows 4-7.
KERNEL void lane_tile_stretch(enum mg_type type, const char * const xr[], int passes, const void * const y[], int nc,
                              int64_t b0, int64_t b1, const struct lane_cols * lc, struct lane_acc * a) {
    enum { ROWS = 2 * LANE_TILE_ROWS };
    const bool          min    = has_min(type);
    const bool          biased = lane_biased(type);
    _Alignas(32) float  scale[LANE_TILE_CHUNK][MAX_COLS][ROWS];   // dW(r) * dA(c) of each block
    for (int64_t b = b0; b < b1; b++) {
        const __m256 dx = rows_header_x8(type, xr, b, 0);
        const __m256 mx = min ? rows_header_x8(type, xr, b, 1) : _mm256_setzero_ps();
        UNROLLED for (int c = 0; c < nc; c++) {
            _mm256_store_ps(scale[b - b0][c], _mm256_mul_ps(dx, _mm256_set1_ps(lc->dy[b - b0][c])));
            if (min) {   // fmaf(mW, sA, summs)
                const __m256 was = b == 0 ? _mm256_setzero_ps() : _mm256_load_ps(a->summs[c]);
                const __m256 sum = _mm256_fmadd_ps(mx, _mm256_set1_ps(lc->sy[b - b0][c]), was);
                _mm256_store_ps(a->summs[c], sum);
            }
        }
    }
    for (int p = 0; p < passes; p++) {
        const char * const * xp = xr + LANE_TILE_ROWS * p;
        __m256               acc[LANE_TILE_ROWS][MAX_COLS];
        UNROLLED for (int r = 0; r < LANE_TILE_ROWS; r++) {
            UNROLLED for (int c = 0; c < nc; c++) acc[r][c] = b0 == 0 ? _mm256_setzero_ps() : _mm256_load_ps(a->part[p][r][c]);
        }
        for (int64_t b = b0; b < b1; b++) {
            __m256i qy[MAX_COLS], st[MAX_COLS];
            UNROLLED for (int c = 0; c < nc; c++) {
                qy[c] = load_256(act_codes(type, y[c], b));
                st[c] = biased ? _mm256_load_si256((const __m256i *) lc->start[b - b0][c]) : _mm256_setzero_si256();
                // In a register from here on: GCC would otherwise fold the
                // load into each of the 4 rows' dot products, and 4 loads
                // of 32 bytes for one are what bounds this loop on Zen 4
                // (two vector loads a cycle).
                __asm__("" : "+v"(qy[c]));
            }
            UNROLLED for (int r = 0; r < LANE_TILE_ROWS; r++) {
                const struct lane_codes w = lane_codes_of(type, xp[r], b);
                UNROLLED for (int c = 0; c < nc; c++) {
                    const __m256 q = _mm256_cvtepi32_ps(lanes(type, &w, qy[c], st[c]));
                    acc[r][c] = _mm256_fmadd_ps(_mm256_set1_ps(scale[b - b0][c][LANE_TILE_ROWS * p + r]), q, acc[r][c]);
                }
            }
        }
        UNROLLED for (int r = 0; r < LANE_TILE_ROWS; r++) {
            UNROLLED for (int c = 0; c < nc; c++) _mm256_store_ps(a->part[p][r][c], acc[r][c]);
        }
        // part must stay in memory: otherwise GCC tries to keep both
        // passes' 32 accumulators in registers, and spills in the loop.
        __asm__("" : : : "memory");
    }
}

// A panel: up to LANE_PANEL_TILES tiles of 8 rows (nr rows; the missing rows
// of the last tile repeat its last row, their results dropped) against nc
// columns, in stretches of LANE_TILE_CHUNK blocks. What the columns give a
// stretch (lane_cols_of) is worked out once for every tile of the panel, not
// once per tile: in a Q8_0 prompt that was a fifth of the tile's time (perf,
// Zen 4). Each output still takes vec_dot's FMAs in vec_dot's order.
KERNEL void lane_panel_32(enum mg_type type, int64_t n, float * s, size_t ss, const char * x, size_t xs, int nr,
                          const void * vy, size_t ys, int nc) {
    enum { ROWS = 2 * LANE_TILE_ROWS };
    const int    n_tiles = (nr + ROWS - 1) / ROWS;
    const void * y[MAX_COLS];
    UNROLLED for (int c = 0; c < nc; c++) y[c] = column(vy, ys, c);
    struct lane_acc  acc[LANE_PANEL_TILES];   // the first stretch starts them from zero (no memset: 18 KB a call)
    struct lane_cols lc;
    const int64_t nb = n / 32;
    MG_ASSERT(nb > 0);   // so that a first stretch runs: rows of blocks hold at least one
    for (int64_t b0 = 0; b0 < nb; b0 += LANE_TILE_CHUNK) {
        const int64_t b1 = b0 + LANE_TILE_CHUNK < nb ? b0 + LANE_TILE_CHUNK : nb;
        lane_cols_of(type, y, nc, b0, b1, &lc);
        for (int t = 0; t < n_tiles; t++) {
            const int    rows = nr - ROWS * t < ROWS ? nr - ROWS * t : ROWS;
            const char * xr[ROWS];
            UNROLLED for (int r = 0; r < ROWS; r++) xr[r] = x + (size_t) (ROWS * t + (r < rows ? r : rows - 1)) * xs;
            lane_tile_stretch(type, xr, rows > LANE_TILE_ROWS ? 2 : 1, y, nc, b0, b1, &lc, &acc[t]);
        }
    }
    for (int t = 0; t < n_tiles; t++) {
        const int rows = nr - ROWS * t < ROWS ? nr - ROWS * t : ROWS;
        UNROLLED for (int c = 0; c < nc; c++) {
            for (int r = 0; r < rows; r++) {
                const float sum = hsum_float_8(_mm256_load_ps(acc[t].part[r / LANE_TILE_ROWS][r % LANE_TILE_ROWS][c]));
                s[(size_t) c * ss + (size_t) (ROWS * t + r)] = has_min(type) ? sum + acc[t].summs[c][r] : sum;
            }
        }
    }
}

// Q6_K: per super-block and output, the lanes of dot_q6_K_q8_K: maddubs of
// the codes with the activations, each sub-block's scale applied by madd,
// minus 32 * (bsums . scales) per lane. Here that last part is where the
// lanes start, bsums . (-32 * scales) (a scale times 32 still fits an int16),
// and with VNNI madd and the add after it are one instruction (vpdpwssd).
KERNEL void lane_tile_q6_K(int64_t n, float * s, size_t ss, const char * x, size_t xs, int nr, const void * vy,
                           size_t ys, int nc) {
    const struct mg_block_q6_K * xr[LANE_TILE_ROWS];
    UNROLLED for (int r = 0; r < LANE_TILE_ROWS; r++) {
        xr[r] = (const struct mg_block_q6_K *) (x + (size_t) (r < nr ? r : nr - 1) * xs);
    }
    const struct mg_block_q8_K * y[MAX_COLS];
    __m256                       acc[LANE_TILE_ROWS][MAX_COLS];
    UNROLLED for (int c = 0; c < nc; c++) {
        y[c] = column(vy, ys, c);
        UNROLLED for (int r = 0; r < LANE_TILE_ROWS; r++) acc[r][c] = _mm256_setzero_ps();
    }
    const int64_t nb = n / MG_QK_K;
    _Alignas(16) float scale[LANE_TILE_CHUNK][MAX_COLS][LANE_TILE_ROWS];   // dA(c) * dW(r)
    for (int64_t i0 = 0; i0 < nb; i0 += LANE_TILE_CHUNK) {
        const int64_t i1 = i0 + LANE_TILE_CHUNK < nb ? i0 + LANE_TILE_CHUNK : nb;
        for (int64_t i = i0; i < i1; i++) {
            const __m128 dx = _mm_setr_ps(f16(xr[0][i].d), f16(xr[1][i].d), f16(xr[2][i].d), f16(xr[3][i].d));
            UNROLLED for (int c = 0; c < nc; c++) _mm_store_ps(scale[i - i0][c], _mm_mul_ps(_mm_set1_ps(y[c][i].d), dx));
        }
        for (int64_t i = i0; i < i1; i++) {
            UNROLLED for (int r = 0; r < LANE_TILE_ROWS; r++) {
                const struct mg_block_q6_K * xb        = &xr[r][i];
                const __m128i                scales    = _mm_loadu_si128((const __m128i *) xb->scales);
                const __m256i                minus_32s = _mm256_mullo_epi16(_mm256_cvtepi8_epi16(scales), _mm256_set1_epi16(-32));
                __m256i                      sumi[MAX_COLS];
                UNROLLED for (int c = 0; c < nc; c++) {
                    sumi[c] = dot_i16_acc(_mm256_setzero_si256(), load_256(y[c][i].bsums), minus_32s);
                }
                UNROLLED for (int h = 0; h < 2; h++) {   // as dot_q6_K_q8_K
                    __m256i q[4], sc[4];
                    q6_K_half(xb, scales, h, q, sc);
                    UNROLLED for (int c = 0; c < nc; c++) {
                        const int8_t * q8 = y[c][i].qs + 128 * h;
                        UNROLLED for (int k = 0; k < 4; k++) {
                            sumi[c] = dot_i16_acc(sumi[c], sc[k], _mm256_maddubs_epi16(q[k], load_256(q8 + 32 * k)));
                        }
                    }
                }
                UNROLLED for (int c = 0; c < nc; c++) {
                    acc[r][c] = _mm256_fmadd_ps(_mm256_set1_ps(scale[i - i0][c][r]), _mm256_cvtepi32_ps(sumi[c]), acc[r][c]);
                }
            }
        }
    }
    UNROLLED for (int c = 0; c < nc; c++) {
        UNROLLED for (int r = 0; r < LANE_TILE_ROWS; r++) {
            if (r < nr) s[(size_t) c * ss + (size_t) r] = hsum_float_8(acc[r][c]);
        }
    }
}

// The tile entry points, nc a constant in each copy. One column goes row by
// row: a token's product uses each weight once, so a tile would share only
// the activation loads, and rows read one after another stream from memory
// faster (see read_in_order).
#define LANE_TILE_ENTRY(fn, cols_fn, kernel, max_rows, rows_per_call)                                 \
    void fn(int64_t n, float * s, size_t ss, const void * x, size_t xs, int nr, const void * y, size_t ys, \
            int nc) {                                                                                     \
        MG_ASSERT(nr >= 1 && nr <= (max_rows) && nc >= 1 && nc <= MAX_COLS);                              \
        if (nc == 1) {   /* one token: row by row (see above) */                                          \
            for (int r0 = 0; r0 < nr; r0 += MG_VEC_DOT_MAX_ROWS) {                                        \
                const int rows = nr - r0 < MG_VEC_DOT_MAX_ROWS ? nr - r0 : MG_VEC_DOT_MAX_ROWS;          \
                mg_vec_dot_tile_by_rows(cols_fn, n, s + r0, ss, (const char *) x + (size_t) r0 * xs, xs, rows, \
                                        y, ys, 1);                                                        \
            }                                                                                             \
            return;                                                                                       \
        }                                                                                                 \
        for (int r0 = 0; r0 < nr; r0 += (rows_per_call)) {                                                \
            const int    rows = nr - r0 < (rows_per_call) ? nr - r0 : (rows_per_call);                    \
            const char * xr0  = (const char *) x + (size_t) r0 * xs;                                      \
            float *      s0   = s + r0;                                                                   \
            switch (nc) {                                                                                 \
            case 2: kernel(n, s0, ss, xr0, xs, rows, y, ys, 2); break;                                    \
            case 3: kernel(n, s0, ss, xr0, xs, rows, y, ys, 3); break;                                    \
            default: kernel(n, s0, ss, xr0, xs, rows, y, ys, 4); break;                                   \
            }                                                                                             \
        }                                                                                                 \
    }

// The 32-element types: a tile (up to 8 rows) and a panel (up to
// MG_VEC_DOT_PANEL_ROWS rows) are the same kernel, lane_panel_32.
#define LANE_TILE_ENTRY_32(name, type)                                                                    \
    KERNEL void lane_panel_##name(int64_t n, float * s, size_t ss, const char * x, size_t xs, int nr,     \
                                  const void * y, size_t ys, int nc) {                                     \
        lane_panel_32(type, n, s, ss, x, xs, nr, y, ys, nc);                                               \
    }                                                                                                      \
    LANE_TILE_ENTRY(mg_vec_dot_tile_##name##_simd, mg_vec_dot_cols_##name##_simd, lane_panel_##name,      \
                    MG_VEC_DOT_MAX_ROWS, MG_VEC_DOT_MAX_ROWS)                                              \
    LANE_TILE_ENTRY(mg_vec_dot_panel_##name##_simd, mg_vec_dot_cols_##name##_simd, lane_panel_##name,     \
                    MG_VEC_DOT_PANEL_ROWS, MG_VEC_DOT_PANEL_ROWS)

LANE_TILE_ENTRY_32(q8_0_q8_0, MG_TYPE_Q8_0)
LANE_TILE_ENTRY_32(q4_1_q8_1, MG_TYPE_Q4_1)
LANE_TILE_ENTRY_32(q5_0_q8_0, MG_TYPE_Q5_0)
LANE_TILE_ENTRY_32(q5_1_q8_1, MG_TYPE_Q5_1)
LANE_TILE_ENTRY(mg_vec_dot_tile_q6_K_q8_K_simd, mg_vec_dot_cols_q6_K_q8_K_simd, lane_tile_q6_K, MG_VEC_DOT_MAX_ROWS,
                LANE_TILE_ROWS)

#endif // MG_SIMD
