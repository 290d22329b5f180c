//@file full
// repack.c - Q4_0, Q4_K and Q2_K weight matrices in a row-interleaved layout,
// made once when a model loads (ggml: the CPU_REPACK extra buffer type,
// ggml-cpu/repack.cpp, block_q4_0x8 / block_q4_Kx8 / block_q2_Kx8 and their
// gemv and gemm). These are the types llama.cpp's x86 build repacks
// (ggml_repack_get_optimal_repack_type: Q4_0, Q4_K and IQ4_NL with AVX2, Q2_K
// with AVX-512; Q3_K, Q5_K, Q6_K and Q8_0 only on ARM); IQ4_NL's tile reads
// the file's layout here, with the same float order.
//
// Why. The tile kernel (vec_simd.c, tile_32) computes 8 weight rows at once,
// row r in SIMD lane r. In GGUF's layout the 8 rows lie one after another, so
// a tile reads 8 short streams side by side, and for every block it first has
// to transpose the codes of 8 rows into lanes. With one token (decode) the
// weights come from memory, and 8 interleaved streams defeat the hardware
// prefetchers: the tile reads the rows in order first (read_in_order), and
// then computes, so memory and arithmetic take turns. Store the 8 rows the way
// the tile wants them and both costs go: no transpose, one stream.
//
// The layout. A matrix of Q4_0 rows (n / 32 blocks each, rows % 8 == 0) is cut
// into groups of 8 rows; in each, block b of the 8 rows becomes one 144-byte
// group (8 rows x 18 bytes, the same bytes, reordered):
//
//   offset  0        16       48       80       112      144
//           +--------+--------+--------+--------+--------+
//           | d x 8  | qs 0-3 | qs 4-7 | qs 8-11| qs12-15|
//           +--------+--------+--------+--------+--------+
//   d x 8:    the F16 scales of rows 0..7 (row r at bytes 2r, 2r+1)
//   qs 4j..4j+3: bytes 4j..4j+3 of the codes of rows 0..7 (row r at 4r),
//                that is codes 4j..4j+3 (low nibbles) and 16+4j..16+4j+3
//                (high nibbles) of each row: one 32-byte load, row r in
//                int32 lane r, which is what tile_32 built by transposing.
//
// and the groups follow in order: blocks 0, 1, ... of rows 0-7, then of rows
// 8-15, and so on. Rows 8t..8t+7 start at byte 8t * row_size, as in the
// original, so a mul_mat finds a tile at the offset it already computes.
// (ggml's block_q4_0x8 interleaves 8 bytes of each row at a time, and flips
// the codes to signed, for its gemv; 4 bytes here keep this engine's tile
// arithmetic, and so its results, exactly as they were.)
//
// Q4_K (the 4-bit weights of the Q4_K_M files most hubs carry) takes the
// same idea one super-block (256 elements, 144 bytes a row) at a time. Its
// tile (vec_simd.c, tile_q4_K) wants, for 8 rows in the 8 int32 lanes: the
// 8 scales d and the 8 dmin, the 12 packed bytes of 6-bit scales and mins 4
// at a time, and the 128 code bytes 4 at a time. Super-block i of 8 rows
// becomes one 1152-byte group (8 x 144, the same bytes, reordered):
//
//   offset 0        16       32       64       96       128              1152
//          +--------+--------+--------+--------+--------+-----//-----------+
//          | d x 8  |dmin x 8| sc 0-3 | sc 4-7 | sc 8-11| qs 0-3 ... 124-127|
//          +--------+--------+--------+--------+--------+-----//-----------+
//   d x 8, dmin x 8: the F16s of rows 0..7 (row r at 2r)
//   sc 4t..4t+3:     bytes 4t..4t+3 of the 12 bytes of packed scales and
//                    mins of rows 0..7 (row r at 4r): what the tile built by
//                    transposing, each one 32-byte load
//   qs 4j..4j+3:     bytes 4j..4j+3 of the 128 code bytes of rows 0..7 (row
//                    r at 4r), at 128 + 32j: 32 parts, 8 for each 64
//                    elements (low nibbles: codes 64k + 4j' .., high: +32)
//
// The groups follow in the same order as Q4_0's: super-blocks 0, 1, ... of
// rows 0-7, then of rows 8-15, ... (ggml's block_q4_Kx8 also decodes the
// 6-bit scales into bytes and interleaves 8 code bytes at a time, for its own
// integer arithmetic; 4 bytes and the packed scales keep this engine's. The
// integer sums are exact either way; the float steps are ggml's, below.)
//
// Q2_K (84 bytes a super-block: 16 bytes of 4-bit scales and mins, 64 of
// 2-bit codes, d, dmin) the same way: super-block i of 8 rows becomes one
// 672-byte group,
//
//   offset 0        16       32       64  ...  160      192  ...        672
//          +--------+--------+--------+--//---+--------+-----//---------+
//          | d x 8  |dmin x 8| sc 0-3 | sc 12-15| qs 0-3 | ... qs 60-63  |
//          +--------+--------+--------+--//---+--------+-----//---------+
//   sc 4t..4t+3: bytes 4t..4t+3 of the 16 scale bytes of rows 0..7 (row r
//                at 4r), at 32 + 32t
//   qs 4j..4j+3: bytes 4j..4j+3 of the 64 code bytes of rows 0..7, at 160 +
//                32j (code byte 32h + l holds elements 128h + 32k + l, k < 4)
//
// Unlike Q4_0's, the repacked K-quant tiles do not add like vec_dot: they
// take the float order of ggml's repacked kernels, which llama.cpp's
// batches and decode steps meet (below, "The float order").
//
// The cost: a second copy of every repacked weight in RAM, for as long as the
// model is loaded (the mapped original stays for get_rows, `mg info`, ...):
// 31.64 MiB for MiniMind in Q4_0 (56 matrices), as llama.cpp's 31.6 MiB CPU_REPACK buffer
// for the same model; in Q4_K_M, its 40 Q4_K matrices. Loading takes a pass over those weights.
#include "repack.h"

#include "quants.h"
#include "vec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TILE_ROWS = 8, GROUP_BYTES = TILE_ROWS * sizeof(struct mg_block_q4_0) };
static_assert(GROUP_BYTES == 144, "8 Q4_0 blocks are 144 bytes");

// Can t be cut into groups: of the type, rows of whole blocks (block_elems
// each), a multiple of 8 of them per matrix, 2-D or a 3-D stack of matrices
// (a MoE layer's experts, {K, N, n_expert}), no gaps between rows or
// matrices, and loaded. A stack is repacked as ne[1] * ne[2] rows: with
// ne[1] % 8 == 0 no group of 8 crosses from one expert into the next, so
// expert e's groups start at e * nb[2], where its rows did (llama.cpp's
// repack buffer takes 3-D weights too, for MUL_MAT_ID: repack.cpp, supports_op).
static bool fits_groups(const struct mg_tensor * t, enum mg_type type, int64_t block_elems) {
    return t->type == type && t->ne[0] % block_elems == 0 && t->ne[1] % TILE_ROWS == 0 && t->ne[3] == 1 &&
           t->nb[1] == mg_row_size(t->type, t->ne[0]) && t->nb[2] == t->nb[1] * (size_t) t->ne[1] &&
           t->data != NULL;
}

bool mg_repack_q4_0_fits(const struct mg_tensor * t) {
    return fits_groups(t, MG_TYPE_Q4_0, MG_QK4_0);
}

bool mg_repack_available(void) {
#if defined(MG_SIMD) || defined(MG_NEON)
    return true;
#else
    return false;   // the scalar build keeps the original layout (the reference below still works)
#endif
}

// Block b of rows r0..r0+7 (original) <-> its 144-byte group (repacked).
static void pack_group(uint8_t * g, const struct mg_block_q4_0 * rows[TILE_ROWS], int64_t b) {
    for (int r = 0; r < TILE_ROWS; r++) {
        memcpy(g + 2 * r, &rows[r][b].d, 2);
        for (int j = 0; j < 4; j++) memcpy(g + 16 + 32 * j + 4 * r, rows[r][b].qs + 4 * j, 4);
    }
}

static void unpack_group(struct mg_block_q4_0 * rows[TILE_ROWS], const uint8_t * g, int64_t b) {
    for (int r = 0; r < TILE_ROWS; r++) {
        memcpy(&rows[r][b].d, g + 2 * r, 2);
        for (int j = 0; j < 4; j++) memcpy(rows[r][b].qs + 4 * j, g + 16 + 32 * j + 4 * r, 4);
    }
}

void mg_repack_q4_0(void * dst, const void * src, int64_t n, int64_t rows) {
    MG_ASSERT(n % MG_QK4_0 == 0 && rows % TILE_ROWS == 0);
    const int64_t nb       = n / MG_QK4_0;
    const size_t  row_size = (size_t) nb * sizeof(struct mg_block_q4_0);
    uint8_t *     g        = dst;
    for (int64_t t = 0; t < rows; t += TILE_ROWS) {
        const struct mg_block_q4_0 * x[TILE_ROWS];
        for (int r = 0; r < TILE_ROWS; r++) x[r] = (const void *) ((const char *) src + (size_t) (t + r) * row_size);
        for (int64_t b = 0; b < nb; b++, g += GROUP_BYTES) pack_group(g, x, b);
    }
}

void mg_unpack_q4_0(void * dst, const void * src, int64_t n, int64_t rows) {
    MG_ASSERT(n % MG_QK4_0 == 0 && rows % TILE_ROWS == 0);
    const int64_t   nb       = n / MG_QK4_0;
    const size_t    row_size = (size_t) nb * sizeof(struct mg_block_q4_0);
    const uint8_t * g        = src;
    for (int64_t t = 0; t < rows; t += TILE_ROWS) {
        struct mg_block_q4_0 * x[TILE_ROWS];
        for (int r = 0; r < TILE_ROWS; r++) x[r] = (void *) ((char *) dst + (size_t) (t + r) * row_size);
        for (int64_t b = 0; b < nb; b++, g += GROUP_BYTES) unpack_group(x, g, b);
    }
}

// The reference tile of any type: the 8 rows unpacked to the file's layout,
// then one scalar dot product per row and column, in the order the column
// count picks: gemm for a whole group of 4 columns, gemv for fewer (Q4_0 has
// one order, vec_dot's, for both). For tests: it mallocs.
typedef void (*unpack_fn)(void * dst, const void * src, int64_t n, int64_t rows);

#if !defined(MG_NEON)   // the NEON build's tiles read the file's layout (below)
static void tile_ref(enum mg_type type, unpack_fn unpack, mg_vec_dot_fn gemv, mg_vec_dot_fn gemm, int64_t n,
                     float * s, size_t s_stride, const void * x, const void * y, size_t y_stride, int n_cols) {
    const size_t row_size = mg_row_size(type, n);
    char *       rows     = malloc(TILE_ROWS * row_size);
    MG_ASSERT(rows != NULL);
    unpack(rows, x, n, TILE_ROWS);
    const mg_vec_dot_fn dot = n_cols == MG_VEC_DOT_MAX_COLS ? gemm : gemv;
    for (int c = 0; c < n_cols; c++) {
        for (int r = 0; r < TILE_ROWS; r++) {
            dot(n, &s[(size_t) c * s_stride + r], rows + (size_t) r * row_size, (const char *) y + c * y_stride);
        }
    }
    free(rows);
}
#endif

// ---------------------------------------------------------------------------
// Q4_K

enum { K_GROUP_BYTES = TILE_ROWS * sizeof(struct mg_block_q4_K) };
static_assert(K_GROUP_BYTES == 1152, "8 Q4_K super-blocks are 1152 bytes");
static_assert(sizeof(((struct mg_block_q4_K *) 0)->scales) == 12 && sizeof(((struct mg_block_q4_K *) 0)->qs) == 128,
              "the Q4_K drawing above");

bool mg_repack_q4_K_fits(const struct mg_tensor * t) {
    return fits_groups(t, MG_TYPE_Q4_K, MG_QK_K);
}

// n bytes between a group and a row's block, either way.
static void move_bytes(bool to_group, uint8_t * group_at, uint8_t * row_at, size_t n) {
    if (to_group) memcpy(group_at, row_at, n);
    else memcpy(row_at, group_at, n);
}

// Super-block b of rows[0..7] <-> its 1152-byte group g, by the drawing above
// (one function for both ways, so that they cannot disagree).
static void move_group_q4_K(bool to_group, uint8_t * g, char * const rows[TILE_ROWS], int64_t b) {
    for (int r = 0; r < TILE_ROWS; r++) {
        struct mg_block_q4_K * x = (struct mg_block_q4_K *) (void *) rows[r] + b;
        move_bytes(to_group, g + 2 * r, (uint8_t *) &x->d, 2);
        move_bytes(to_group, g + 16 + 2 * r, (uint8_t *) &x->dmin, 2);
        for (int t = 0; t < 3; t++) move_bytes(to_group, g + 32 + 32 * t + 4 * r, x->scales + 4 * t, 4);
        for (int j = 0; j < 32; j++) move_bytes(to_group, g + 128 + 32 * j + 4 * r, x->qs + 4 * j, 4);
    }
}

// Moves super-block b of 8 rows to or from its group (move_group_q4_K, _q2_K).
typedef void (*move_group_fn)(bool to_group, uint8_t * g, char * const rows[TILE_ROWS], int64_t b);

// All the groups of a matrix of super-blocks of block_bytes each, in order
// (to_group: rows -> groups), one group of 8 super-blocks at a time.
static void move_matrix(move_group_fn move_group, size_t block_bytes, bool to_group, uint8_t * groups, char * rows_at,
                        int64_t n, int64_t rows) {
    MG_ASSERT(n % MG_QK_K == 0 && rows % TILE_ROWS == 0);
    const int64_t nb       = n / MG_QK_K;
    const size_t  row_size = (size_t) nb * block_bytes;
    for (int64_t t = 0; t < rows; t += TILE_ROWS) {
        char * x[TILE_ROWS];
        for (int r = 0; r < TILE_ROWS; r++) x[r] = rows_at + (size_t) (t + r) * row_size;
        for (int64_t b = 0; b < nb; b++, groups += TILE_ROWS * block_bytes) move_group(to_group, groups, x, b);
    }
}

void mg_repack_q4_K(void * dst, const void * src, int64_t n, int64_t rows) {
    move_matrix(move_group_q4_K, sizeof(struct mg_block_q4_K), true, dst, (char *) src, n, rows);   // src is only read (to_group)
}

void mg_unpack_q4_K(void * dst, const void * src, int64_t n, int64_t rows) {
    move_matrix(move_group_q4_K, sizeof(struct mg_block_q4_K), false, (uint8_t *) src, dst, n, rows);   // src is only read (!to_group)
}

// ---------------------------------------------------------------------------
// The float order of ggml's repacked K-quant kernels (x86), in plain C
//
// ggml's repacked Q4_K and Q2_K kernels (arch/x86/repack.cpp) sum the integer
// products of a piece of a super-block exactly, S (codes x activations x
// sub-block scales) and M (sub-block mins x the activations' sums, from Q8_K's
// bsums), and then take two FMAs per piece:
//
//     acc  = fma(float(S), dW * dA, acc)
//     accm = fma(float(M), dminW * dA, accm)          s = acc - accm
//
// The piece is the whole super-block in the gemv (ggml_gemv_q4_K_8x8_q8_K,
// ggml_gemv_q2_K_8x8_q8_K), and smaller in the gemm: 64 elements for Q4_K
// (ggml_gemm_q4_K_8x8_q8_K), 128 for Q2_K (ggml_gemm_q2_K_8x8_q8_K). Which one
// a column meets is decided by llama.cpp's forward_mul_mat_one_chunk (repack.cpp):
// the tokens of a batch in whole groups of 4 go to the gemm, the n % 4 left
// and a single token to the gemv. mul_mat_tiled hands the columns over in
// groups of 4 from the first, so a tile of 4 columns is a gemm tile and a
// smaller one is the rest: mg_repack_tile picks the order from n_cols.

// Per sub-block of super-block x . y: S[j] and M[j] (Q4_K: 8 sub-blocks of 32).
static void q4_K_sub_sums(const struct mg_block_q4_K * x, const struct mg_block_q8_K * y, int32_t S[8], int32_t M[8]) {
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        mg_get_scale_min_k4(j, x->scales, &sc, &m);
        int32_t dot = 0;
        for (int l = 0; l < 32; l++) {   // the low nibbles of bytes 32(j/2).. hold sub-block j even, the high ones odd
            const uint8_t byte = x->qs[32 * (j / 2) + l];
            dot += (j % 2 ? byte >> 4 : byte & 0xf) * y->qs[32 * j + l];
        }
        S[j] = sc * dot;
        M[j] = m * (y->bsums[2 * j] + y->bsums[2 * j + 1]);
    }
}

// Q2_K: 16 sub-blocks of 16; element e = 128h + 32k + l is bits 2k, 2k+1 of byte 32h + l.
static void q2_K_sub_sums(const struct mg_block_q2_K * x, const struct mg_block_q8_K * y, int32_t S[16],
                          int32_t M[16]) {
    for (int j = 0; j < 16; j++) {
        int32_t dot = 0;
        for (int e = 16 * j; e < 16 * j + 16; e++) {
            const int h = e / 128, k = e % 128 / 32, l = e % 32;
            dot += ((x->qs[32 * h + l] >> (2 * k)) & 3) * y->qs[e];
        }
        S[j] = (x->scales[j] & 0xf) * dot;
        M[j] = (x->scales[j] >> 4) * y->bsums[j];
    }
}

// The two FMAs of each piece of per_piece sub-blocks.
static void fma_pieces(int n_sub, int per_piece, const int32_t S[], const int32_t M[], float d, float dmin,
                       float * acc, float * accm) {
    for (int p = 0; p < n_sub; p += per_piece) {
        int32_t s = 0, m = 0;
        for (int j = p; j < p + per_piece; j++) {
            s += S[j];
            m += M[j];
        }
        *acc  = fmaf((float) s, d, *acc);
        *accm = fmaf((float) m, dmin, *accm);
    }
}

// One Q4_K row . one Q8_K column, the gemv's order (pieces of 256) or the gemm's (64).
static float dot_q4_K_pieces(int64_t n, const void * vx, const void * vy, int per_piece) {
    const struct mg_block_q4_K * x   = vx;
    const struct mg_block_q8_K * y   = vy;
    float                        acc = 0.0f, accm = 0.0f;
    for (int64_t i = 0; i < n / MG_QK_K; i++) {
        int32_t S[8], M[8];
        q4_K_sub_sums(&x[i], &y[i], S, M);
        fma_pieces(8, per_piece, S, M, mg_fp16_to_fp32(x[i].d) * y[i].d, mg_fp16_to_fp32(x[i].dmin) * y[i].d, &acc,
                   &accm);
    }
    return acc - accm;
}

static float dot_q2_K_pieces(int64_t n, const void * vx, const void * vy, int per_piece) {
    const struct mg_block_q2_K * x   = vx;
    const struct mg_block_q8_K * y   = vy;
    float                        acc = 0.0f, accm = 0.0f;
    for (int64_t i = 0; i < n / MG_QK_K; i++) {
        int32_t S[16], M[16];
        q2_K_sub_sums(&x[i], &y[i], S, M);
        fma_pieces(16, per_piece, S, M, mg_fp16_to_fp32(x[i].d) * y[i].d, mg_fp16_to_fp32(x[i].dmin) * y[i].d, &acc,
                   &accm);
    }
    return acc - accm;
}

// ---------------------------------------------------------------------------
// The float orders of llama.cpp's NEON repacked K-quant kernels (armv8.2-a +
// dotprod: ggml_gemv_/ggml_gemm_q4_K_8x4_q8_K, q5_K_8x4, q6_K_8x4 in
// ggml-cpu/arch/arm/repack.cpp; gemv and gemm add the same way per output).
// Plain C, so every build can test them; the NEON build's tiles call them.
// Which steps are fused was read off the compiled library (objdump: fmla,
// or fmul then fadd/fsub), for GCC contracts some of ggml's intrinsics.
//
//   Q4_K, Q5_K  per 64 elements (two sub-blocks) acc = fma(d*dA, S, acc)
//               (vfmaq_f32); per super-block, after those four, acc = acc -
//               round(M * (dmin*dA)) (vmlsq_f32, which GCC does not fuse)
//   Q6_K        per super-block, S the exact sum of scale * codes . activations:
//               gemv acc = fma(S, d*dA, acc), gemm acc = acc + round(S * (d*dA))
// ---------------------------------------------------------------------------

// Q5_K's S[j], M[j] per sub-block of 32, as q4_K_sub_sums (the fifth bit
// of element e is bit e / 32 of qh[e % 32]).
static void q5_K_sub_sums(const struct mg_block_q5_K * x, const struct mg_block_q8_K * y, int32_t S[8], int32_t M[8]) {
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        mg_get_scale_min_k4(j, x->scales, &sc, &m);
        int32_t dot = 0;
        for (int l = 0; l < 32; l++) {
            const uint8_t byte = x->qs[32 * (j / 2) + l];
            const int     q    = (j % 2 ? byte >> 4 : byte & 0xf) + ((x->qh[l] >> j) & 1) * 16;
            dot += q * y->qs[32 * j + l];
        }
        S[j] = sc * dot;
        M[j] = m * (y->bsums[2 * j] + y->bsums[2 * j + 1]);
    }
}

// One super-block of the Q4_K / Q5_K NEON order: four FMAs, one per 64
// elements, then the mins subtracted once, their product rounded first.
static float add_super_block_8x4(float acc, const int32_t S[8], const int32_t M[8], float d, float dmin) {
    int32_t m = 0;
    for (int p = 0; p < 8; p += 2) {
        acc = fmaf(d, (float) (S[p] + S[p + 1]), acc);
        m += M[p] + M[p + 1];
    }
    const float mins = (float) m * dmin;
    return acc - mins;
}

void mg_dot_q4_K_8x4_q8_K(int64_t n, float * s, const void * vx, const void * vy) {
    const struct mg_block_q4_K * x   = vx;
    const struct mg_block_q8_K * y   = vy;
    float                        acc = 0.0f;
    for (int64_t i = 0; i < n / MG_QK_K; i++) {
        int32_t S[8], M[8];
        q4_K_sub_sums(&x[i], &y[i], S, M);
        acc = add_super_block_8x4(acc, S, M, mg_fp16_to_fp32(x[i].d) * y[i].d, mg_fp16_to_fp32(x[i].dmin) * y[i].d);
    }
    *s = acc;
}

void mg_dot_q5_K_8x4_q8_K(int64_t n, float * s, const void * vx, const void * vy) {
    const struct mg_block_q5_K * x   = vx;
    const struct mg_block_q8_K * y   = vy;
    float                        acc = 0.0f;
    for (int64_t i = 0; i < n / MG_QK_K; i++) {
        int32_t S[8], M[8];
        q5_K_sub_sums(&x[i], &y[i], S, M);
        acc = add_super_block_8x4(acc, S, M, mg_fp16_to_fp32(x[i].d) * y[i].d, mg_fp16_to_fp32(x[i].dmin) * y[i].d);
    }
    *s = acc;
}

// Q6_K: the exact sum of a super-block, codes - 32 (mg_dequantize_row_q6_K's layout).
static int32_t q6_K_sum(const struct mg_block_q6_K * x, const struct mg_block_q8_K * y) {
    int32_t total = 0;
    for (int h = 0; h < 2; h++) {
        const uint8_t * ql = x->ql + 64 * h;
        const uint8_t * qh = x->qh + 32 * h;
        const int8_t *  q8 = y->qs + 128 * h;
        const int8_t *  sc = x->scales + 8 * h;
        for (int l = 0; l < 32; l++) {
            const int is = l / 16;
            total += sc[is + 0] * (((ql[l] & 0xf) | (((qh[l] >> 0) & 3) << 4)) - 32) * q8[l];
            total += sc[is + 2] * (((ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4)) - 32) * q8[l + 32];
            total += sc[is + 4] * (((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32) * q8[l + 64];
            total += sc[is + 6] * (((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32) * q8[l + 96];
        }
    }
    return total;
}

// Q6_K's gemv writes acc + float(S) * (d*dA) as two vector intrinsics
// (vaddq_f32, vmulq_f32), which GCC's arm_neon.h defines as plain C operators,
// so -ffp-contract=fast fuses them into one fmla; its gemm uses vmlaq_f32,
// which stays a rounded product and a sum. Both orders, then.
static float dot_q6_K_8x4(int64_t n, const void * vx, const void * vy, bool fused) {
    const struct mg_block_q6_K * x   = vx;
    const struct mg_block_q8_K * y   = vy;
    float                        acc = 0.0f;
    for (int64_t i = 0; i < n / MG_QK_K; i++) {
        const float S = (float) q6_K_sum(&x[i], &y[i]), d = mg_fp16_to_fp32(x[i].d) * y[i].d;
        if (fused) {
            acc = fmaf(S, d, acc);
        } else {
            const float w = S * d;
            acc           = acc + w;
        }
    }
    return acc;
}

void mg_gemv_q6_K_8x4_q8_K(int64_t n, float * s, const void * x, const void * y) {
    *s = dot_q6_K_8x4(n, x, y, true);
}

void mg_gemm_q6_K_8x4_q8_K(int64_t n, float * s, const void * x, const void * y) {
    *s = dot_q6_K_8x4(n, x, y, false);
}

void mg_gemv_q4_K_q8_K(int64_t n, float * s, const void * x, const void * y) {
    *s = dot_q4_K_pieces(n, x, y, 8);
}

void mg_gemm_q4_K_q8_K(int64_t n, float * s, const void * x, const void * y) {
    *s = dot_q4_K_pieces(n, x, y, 2);
}

void mg_gemv_q2_K_q8_K(int64_t n, float * s, const void * x, const void * y) {
    *s = dot_q2_K_pieces(n, x, y, 16);
}

void mg_gemm_q2_K_q8_K(int64_t n, float * s, const void * x, const void * y) {
    *s = dot_q2_K_pieces(n, x, y, 8);
}

// ---------------------------------------------------------------------------
// Q2_K

enum { Q2_GROUP_BYTES = TILE_ROWS * sizeof(struct mg_block_q2_K) };
static_assert(Q2_GROUP_BYTES == 672, "8 Q2_K super-blocks are 672 bytes");
static_assert(sizeof(((struct mg_block_q2_K *) 0)->scales) == 16 && sizeof(((struct mg_block_q2_K *) 0)->qs) == 64,
              "the Q2_K drawing above");

bool mg_repack_q2_K_fits(const struct mg_tensor * t) {
    return fits_groups(t, MG_TYPE_Q2_K, MG_QK_K);
}

static void move_group_q2_K(bool to_group, uint8_t * g, char * const rows[TILE_ROWS], int64_t b) {
    for (int r = 0; r < TILE_ROWS; r++) {
        struct mg_block_q2_K * x = (struct mg_block_q2_K *) (void *) rows[r] + b;
        move_bytes(to_group, g + 2 * r, (uint8_t *) &x->d, 2);
        move_bytes(to_group, g + 16 + 2 * r, (uint8_t *) &x->dmin, 2);
        for (int t = 0; t < 4; t++) move_bytes(to_group, g + 32 + 32 * t + 4 * r, x->scales + 4 * t, 4);
        for (int j = 0; j < 16; j++) move_bytes(to_group, g + 160 + 32 * j + 4 * r, x->qs + 4 * j, 4);
    }
}

void mg_repack_q2_K(void * dst, const void * src, int64_t n, int64_t rows) {
    move_matrix(move_group_q2_K, sizeof(struct mg_block_q2_K), true, dst, (char *) src, n, rows);   // src is only read (to_group)
}

void mg_unpack_q2_K(void * dst, const void * src, int64_t n, int64_t rows) {
    move_matrix(move_group_q2_K, sizeof(struct mg_block_q2_K), false, (uint8_t *) src, dst, n, rows);   // src is only read (!to_group)
}

// ---------------------------------------------------------------------------
// Either type

#if defined(MG_NEON)
// ---------------------------------------------------------------------------
// aarch64 NEON: llama.cpp built for armv8.2-a+dotprod+fp16 (no i8mm, no SVE)
// repacks, by ggml_repack_get_optimal_repack_type: Q4_0 -> q4_0_4x4 and
// Q8_0 -> q8_0_4x4 (rows % 4), IQ4_NL -> iq4_nl_4x4, Q4_K, Q5_K, Q6_K ->
// *_8x4 (rows % 8); Q2_K, Q3_K, Q4_1, Q5_0, Q5_1 keep the file's layout.
// What that changes is the float order (ggml_gemv_*/ggml_gemm_*: vec_neon.c
// for Q4_0 and Q8_0, above for the K-quants), not the arithmetic a layout
// makes cheap, so this engine takes those orders and keeps the file's layout
// in the copy (the matrices with 8 rows a tile: rows % 8, which every shape
// here has).
// ---------------------------------------------------------------------------

bool mg_repack_fits(const struct mg_tensor * t) {
    return fits_groups(t, MG_TYPE_Q4_0, MG_QK4_0) || fits_groups(t, MG_TYPE_Q8_0, MG_QK8_0) ||
           fits_groups(t, MG_TYPE_Q4_K, MG_QK_K) || fits_groups(t, MG_TYPE_Q5_K, MG_QK_K) ||
           fits_groups(t, MG_TYPE_Q6_K, MG_QK_K) || fits_groups(t, MG_TYPE_IQ4_NL, MG_QK4_NL);
}

// The order of ggml's repacked kernel for a type: its gemv, or its gemm for 4 columns.
static mg_vec_dot_fn neon_repacked_dot(enum mg_type type, bool gemm) {
    switch (type) {
        case MG_TYPE_Q4_0: return mg_gemv_q4_0_q8_0_neon;   // its gemm: the same steps
        case MG_TYPE_Q8_0: return gemm ? mg_gemm_q8_0_q8_0_neon : mg_gemv_q8_0_q8_0_neon;
        case MG_TYPE_IQ4_NL: return mg_gemv_iq4_nl_q8_0_neon;   // its gemm: the same steps
        case MG_TYPE_Q4_K: return mg_dot_q4_K_8x4_q8_K;
        case MG_TYPE_Q5_K: return mg_dot_q5_K_8x4_q8_K;
        case MG_TYPE_Q6_K: return gemm ? mg_gemm_q6_K_8x4_q8_K : mg_gemv_q6_K_8x4_q8_K;
        default:           MG_ASSERT(false && "not repacked on NEON");
    }
}

void mg_repack(void * dst, const struct mg_tensor * t) {
    MG_ASSERT(mg_repack_fits(t));
    memcpy(dst, t->data, mg_nbytes(t));
}

// Rows one at a time in the order of ggml's repacked kernels: their gemm
// for a whole group of 4 columns (mul_mat hands a batch over in groups of 4
// from its first column, as llama.cpp's forward_mul_mat does), their gemv
// for the rest.
void mg_repack_tile(enum mg_type type, int64_t n, float * s, size_t s_stride, const void * x, const void * y,
                    size_t y_stride, int n_cols) {
    const mg_vec_dot_fn dot = neon_repacked_dot(type, n_cols == MG_VEC_DOT_MAX_COLS);
    const size_t        row = mg_row_size(type, n);
    for (int c = 0; c < n_cols; c++) {
        for (int r = 0; r < TILE_ROWS; r++) {
            dot(n, &s[(size_t) c * s_stride + (size_t) r], (const char *) x + (size_t) r * row,
                (const char *) y + (size_t) c * y_stride);
        }
    }
}

void mg_repack_tile_ref(enum mg_type type, int64_t n, float * s, size_t s_stride, const void * x, const void * y,
                        size_t y_stride, int n_cols) {
    mg_repack_tile(type, n, s, s_stride, x, y, y_stride, n_cols);
}
#else
bool mg_repack_fits(const struct mg_tensor * t) {
    return mg_repack_q4_0_fits(t) || mg_repack_q4_K_fits(t) || (MG_REPACK_Q2_K && mg_repack_q2_K_fits(t));
}

void mg_repack(void * dst, const struct mg_tensor * t) {
    MG_ASSERT(mg_repack_q4_0_fits(t) || mg_repack_q4_K_fits(t) || mg_repack_q2_K_fits(t));
    const int64_t rows = t->ne[1] * t->ne[2];   // every matrix of a 3-D stack, one after another
    if (t->type == MG_TYPE_Q4_K) mg_repack_q4_K(dst, t->data, t->ne[0], rows);
    else if (t->type == MG_TYPE_Q2_K) mg_repack_q2_K(dst, t->data, t->ne[0], rows);
    else mg_repack_q4_0(dst, t->data, t->ne[0], rows);
}

// The SIMD kernels (vec_simd.c) where the build has them; for the K-quants,
// the gemm's order for a whole group of 4 columns and the gemv's for fewer,
// as their references above.
void mg_repack_tile(enum mg_type type, int64_t n, float * s, size_t s_stride, const void * x, const void * y,
                    size_t y_stride, int n_cols) {
#if defined(MG_SIMD)
    const bool gemm = n_cols == MG_VEC_DOT_MAX_COLS;
    if (type == MG_TYPE_Q4_K) {
        (gemm ? mg_gemm_tile_q4_Kx8_q8_K_simd : mg_vec_dot_tile_q4_Kx8_q8_K_simd)(n, s, s_stride, x, y, y_stride, n_cols);
    } else if (type == MG_TYPE_Q2_K) {
        (gemm ? mg_gemm_tile_q2_Kx8_q8_K_simd : mg_vec_dot_tile_q2_Kx8_q8_K_simd)(n, s, s_stride, x, y, y_stride, n_cols);
    } else {
        mg_vec_dot_tile_q4_0x8_q8_0_simd(n, s, s_stride, x, y, y_stride, n_cols);
    }
#else
    mg_repack_tile_ref(type, n, s, s_stride, x, y, y_stride, n_cols);
#endif
}

void mg_repack_tile_ref(enum mg_type type, int64_t n, float * s, size_t s_stride, const void * x, const void * y,
                        size_t y_stride, int n_cols) {
    if (type == MG_TYPE_Q4_K) {
        tile_ref(type, mg_unpack_q4_K, mg_gemv_q4_K_q8_K, mg_gemm_q4_K_q8_K, n, s, s_stride, x, y, y_stride, n_cols);
    } else if (type == MG_TYPE_Q2_K) {
        tile_ref(type, mg_unpack_q2_K, mg_gemv_q2_K_q8_K, mg_gemm_q2_K_q8_K, n, s, s_stride, x, y, y_stride, n_cols);
    } else {
        const mg_vec_dot_fn vec_dot = mg_get_type_traits_cpu(MG_TYPE_Q4_0)->vec_dot;
        tile_ref(MG_TYPE_Q4_0, mg_unpack_q4_0, vec_dot, vec_dot, n, s, s_stride, x, y, y_stride, n_cols);
    }
}
#endif // MG_NEON
