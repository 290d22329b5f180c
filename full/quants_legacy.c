//@file full
// quants_legacy.c - the rest of ggml's 32-element formats: Q4_1, Q5_0, Q5_1,
// Q8_1 and IQ4_NL (ggml-quants.c). Q4_0 and Q8_0 are in quants.c.
//
// The "_1" types add a per-block minimum m, so a block whose values are all
// positive (or all negative) does not waste half its codes; the "5" types add a
// fifth bit per code, kept apart in qh. IQ4_NL keeps Q4_0's layout but its 16
// codes index a non-uniform table.
#include "quants.h"

#include <float.h>
#include <math.h>
#include <string.h>

// q truncated (not rounded: the callers already added 0.5) and clamped to hi.
static uint8_t trunc_clamp(float v, int hi) {
    const int q = (int8_t) v;
    return (uint8_t) (q < hi ? q : hi);
}

// The smallest and largest of a block: the "_1" types' levels span [min, max].
static void block_min_max(const float * x, int n, float * min, float * max) {
    *min = FLT_MAX;
    *max = -FLT_MAX;
    for (int j = 0; j < n; j++) {
        if (x[j] < *min) *min = x[j];
        if (x[j] > *max) *max = x[j];
    }
}

static void set_qh(uint8_t qh[4], uint32_t bits) {
    for (int k = 0; k < 4; k++) qh[k] = (uint8_t) (bits >> (8 * k));
}

// ---------------------------------------------------------------------------
// Q4_1: 32 elements -> 20 bytes (5 bits per weight).
//
//   offset 0: d   F16   step
//   offset 2: m   F16   the block minimum
//   offset 4: qs[16]    element j low nibble, element j+16 high nibble
//
//   x[i] = q[i] * d + m,  q = 0..15
// ---------------------------------------------------------------------------

// ggml: quantize_row_q4_1_ref. The 16 levels span [min, max] exactly.
void mg_quantize_row_q4_1_ref(const float * x, void * vy, int64_t n) {
    struct mg_block_q4_1 * y = vy;
    for (int64_t b = 0; b < n / MG_QK4_1; b++, x += MG_QK4_1) {
        float min, max;
        block_min_max(x, MG_QK4_1, &min, &max);
        const float d  = (max - min) / 15;
        const float id = d ? 1.0f / d : 0.0f;
        y[b].d = mg_fp32_to_fp16(d);
        y[b].m = mg_fp32_to_fp16(min);
        for (int j = 0; j < MG_QK4_1 / 2; j++) {
            const uint8_t q0 = trunc_clamp((x[j] - min) * id + 0.5f, 15);
            const uint8_t q1 = trunc_clamp((x[j + MG_QK4_1 / 2] - min) * id + 0.5f, 15);
            y[b].qs[j] = (uint8_t) (q0 | (q1 << 4));
        }
    }
}

void mg_dequantize_row_q4_1(const void * vx, float * y, int64_t n) {
    const struct mg_block_q4_1 * x = vx;
    for (int64_t b = 0; b < n / MG_QK4_1; b++, y += MG_QK4_1) {
        const float d = mg_fp16_to_fp32(x[b].d);
        const float m = mg_fp16_to_fp32(x[b].m);
        for (int j = 0; j < MG_QK4_1 / 2; j++) {
            y[j]                = (x[b].qs[j] & 0xf) * d + m;
            y[j + MG_QK4_1 / 2] = (x[b].qs[j] >> 4) * d + m;
        }
    }
}

// ---------------------------------------------------------------------------
// Q5_0: 32 elements -> 22 bytes (5.5 bits per weight).
//
//   offset 0: d   F16
//   offset 2: qh[4]     bit j (little-endian u32) = bit 4 of the code of element j
//   offset 6: qs[16]    low 4 bits: element j low nibble, element j+16 high nibble
//
//   x[i] = (q[i] - 16) * d,  q = 0..31
// ---------------------------------------------------------------------------

// ggml: quantize_row_q5_0_ref. Q4_0's rule with 32 levels: the value of largest
// magnitude maps to code 0, i.e. -16 * d.
void mg_quantize_row_q5_0_ref(const float * x, void * vy, int64_t n) {
    struct mg_block_q5_0 * y = vy;
    for (int64_t b = 0; b < n / MG_QK5_0; b++, x += MG_QK5_0) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < MG_QK5_0; j++) {
            if (amax < fabsf(x[j])) {
                amax = fabsf(x[j]);
                max  = x[j];
            }
        }
        const float d  = max / -16;
        const float id = d ? 1.0f / d : 0.0f;
        y[b].d = mg_fp32_to_fp16(d);
        uint32_t qh = 0;
        for (int j = 0; j < MG_QK5_0 / 2; j++) {
            const uint8_t q0 = trunc_clamp(x[j] * id + 16.5f, 31);
            const uint8_t q1 = trunc_clamp(x[j + MG_QK5_0 / 2] * id + 16.5f, 31);
            y[b].qs[j] = (uint8_t) ((q0 & 0xf) | ((q1 & 0xf) << 4));
            qh |= (uint32_t) (q0 >> 4) << j;
            qh |= (uint32_t) (q1 >> 4) << (j + MG_QK5_0 / 2);
        }
        set_qh(y[b].qh, qh);
    }
}

void mg_dequantize_row_q5_0(const void * vx, float * y, int64_t n) {
    const struct mg_block_q5_0 * x = vx;
    for (int64_t b = 0; b < n / MG_QK5_0; b++, y += MG_QK5_0) {
        const float d = mg_fp16_to_fp32(x[b].d);
        for (int j = 0; j < MG_QK5_0 / 2; j++) {
            const int q0 = (x[b].qs[j] & 0xf) | (mg_qh_bit(x[b].qh, j) << 4);
            const int q1 = (x[b].qs[j] >> 4) | (mg_qh_bit(x[b].qh, j + MG_QK5_0 / 2) << 4);
            y[j]                = (q0 - 16) * d;
            y[j + MG_QK5_0 / 2] = (q1 - 16) * d;
        }
    }
}

// ---------------------------------------------------------------------------
// Q5_1: 32 elements -> 24 bytes (6 bits per weight).
//
//   offset 0: d   F16
//   offset 2: m   F16
//   offset 4: qh[4]     5th bits, as Q5_0
//   offset 8: qs[16]    low 4 bits, as Q5_0
//
//   x[i] = q[i] * d + m,  q = 0..31
// ---------------------------------------------------------------------------

// ggml: quantize_row_q5_1_ref. No clamp: (max - min) * id + 0.5 is 31.5 at most.
void mg_quantize_row_q5_1_ref(const float * x, void * vy, int64_t n) {
    struct mg_block_q5_1 * y = vy;
    for (int64_t b = 0; b < n / MG_QK5_1; b++, x += MG_QK5_1) {
        float min, max;
        block_min_max(x, MG_QK5_1, &min, &max);
        const float d  = (max - min) / 31;
        const float id = d ? 1.0f / d : 0.0f;
        y[b].d = mg_fp32_to_fp16(d);
        y[b].m = mg_fp32_to_fp16(min);
        uint32_t qh = 0;
        for (int j = 0; j < MG_QK5_1 / 2; j++) {
            const uint8_t q0 = (uint8_t) ((x[j] - min) * id + 0.5f);
            const uint8_t q1 = (uint8_t) ((x[j + MG_QK5_1 / 2] - min) * id + 0.5f);
            y[b].qs[j] = (uint8_t) ((q0 & 0xf) | ((q1 & 0xf) << 4));
            qh |= (uint32_t) ((q0 & 0x10) >> 4) << j;
            qh |= (uint32_t) ((q1 & 0x10) >> 4) << (j + MG_QK5_1 / 2);
        }
        set_qh(y[b].qh, qh);
    }
}

void mg_dequantize_row_q5_1(const void * vx, float * y, int64_t n) {
    const struct mg_block_q5_1 * x = vx;
    for (int64_t b = 0; b < n / MG_QK5_1; b++, y += MG_QK5_1) {
        const float d = mg_fp16_to_fp32(x[b].d);
        const float m = mg_fp16_to_fp32(x[b].m);
        for (int j = 0; j < MG_QK5_1 / 2; j++) {
            const int q0 = (x[b].qs[j] & 0xf) | (mg_qh_bit(x[b].qh, j) << 4);
            const int q1 = (x[b].qs[j] >> 4) | (mg_qh_bit(x[b].qh, j + MG_QK5_1 / 2) << 4);
            y[j]                = q0 * d + m;
            y[j + MG_QK5_1 / 2] = q1 * d + m;
        }
    }
}

// ---------------------------------------------------------------------------
// Q8_1: 32 elements -> 36 bytes; activations only (for Q4_1 and Q5_1 weights).
//
//   offset 0: d   F16
//   offset 2: s   F16   d * (sum of the 32 codes)
//   offset 4: qs[32]    int8 codes
//
//   x[i] = q[i] * d.  A Q4_1 weight block contributes sum (q_w d_w + m_w) q_a d_a
//   = d_w d_a sum q_w q_a + m_w * s: s saves a pass over the codes.
// ---------------------------------------------------------------------------

// ggml: quantize_row_q8_1_ref (Q8_0's reference rule, plus s).
void mg_quantize_row_q8_1_ref(const float * x, void * vy, int64_t n) {
    struct mg_block_q8_1 * y = vy;
    for (int64_t b = 0; b < n / MG_QK8_1; b++, x += MG_QK8_1) {
        float amax = 0.0f;
        for (int j = 0; j < MG_QK8_1; j++) amax = fmaxf(amax, fabsf(x[j]));
        const float d  = amax / 127;
        const float id = d ? 1.0f / d : 0.0f;
        y[b].d = mg_fp32_to_fp16(d);
        int sum = 0;
        for (int j = 0; j < MG_QK8_1; j++) {
            y[b].qs[j] = (int8_t) roundf(x[j] * id);
            sum += y[b].qs[j];
        }
        y[b].s = mg_fp32_to_fp16(sum * d);
    }
}

// The x86 rule (arch/x86/quants.c, quantize_row_q8_1): as mg_quantize_row_q8_0.
void mg_quantize_row_q8_1(const float * x, void * vy, int64_t n) {
    struct mg_block_q8_1 * y = vy;
    for (int64_t b = 0; b < n / MG_QK8_1; b++, x += MG_QK8_1) {
        float amax = 0.0f;
        for (int j = 0; j < MG_QK8_1; j++) amax = fmaxf(amax, fabsf(x[j]));
        const float d  = amax / 127.0f;
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        y[b].d = mg_fp32_to_fp16(d);
        int sum = 0;
        for (int j = 0; j < MG_QK8_1; j++) {
            const int q = mg_nearest_int(x[j] * id);
            y[b].qs[j]  = (int8_t) (q < -128 ? -128 : q > 127 ? 127 : q);
            sum += y[b].qs[j];
        }
        y[b].s = mg_fp32_to_fp16(d * sum);
    }
}

void mg_dequantize_row_q8_1(const void * vx, float * y, int64_t n) {
    const struct mg_block_q8_1 * x = vx;
    for (int64_t b = 0; b < n / MG_QK8_1; b++, y += MG_QK8_1) {
        const float d = mg_fp16_to_fp32(x[b].d);
        for (int j = 0; j < MG_QK8_1; j++) y[j] = x[b].qs[j] * d;
    }
}

// ---------------------------------------------------------------------------
// IQ4_NL: 32 elements -> 18 bytes (4.5 bits per weight), Q4_0's layout.
//
//   offset 0: d   F16
//   offset 2: qs[16]    element j low nibble, element j+16 high nibble
//
//   x[i] = d * K[q[i]], with the 16 levels K below: denser near zero, where
//   most weights of a trained network are.
// ---------------------------------------------------------------------------

const int8_t mg_kvalues_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// The index of the level nearest to v (ggml: best_index_int8); on a tie
// between two levels, the upper one.
static int best_index_iq4nl(float v) {
    const int8_t * K = mg_kvalues_iq4nl;
    if (v <= K[0]) return 0;
    if (v >= K[15]) return 15;
    int lo = 0, hi = 15;   // K[lo] <= v < K[hi]
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (v < K[mid]) hi = mid;
        else lo = mid;
    }
    return v - K[hi - 1] < K[hi] - v ? hi - 1 : hi;
}

// With weights w = x^2: how well the scale 1/id fits, as the least-squares
// scale sum(w q x) / sum(w q^2) and the score (sum w q x)^2 / sum(w q^2).
struct iq4nl_fit {
    float sumqx, sumq2;
};

static struct iq4nl_fit iq4nl_try(const float * x, const float * w, float id, uint8_t * L) {
    struct iq4nl_fit f = {0, 0};
    for (int j = 0; j < MG_QK4_NL; ++j) {
        const int   l = best_index_iq4nl(id * x[j]);
        const float q = mg_kvalues_iq4nl[l];
        if (L) L[j] = (uint8_t) l;
        f.sumqx += w[j] * q * x[j];
        f.sumq2 += w[j] * q * q;
    }
    return f;
}

// ggml: quantize_row_iq4_nl_impl for one 32-block without importance weights,
// with ntry = 7, as quantize_iq4_nl (llama-quantize) calls it. The first guess
// maps the value of largest magnitude onto +127 (past the top level, 113); then
// 15 scales that map it onto -127-7 .. -127+7 are tried. Each guess is scored by
// the least-squares fit of its codes, and the best fit's scale wins. The codes
// are chosen once more against that final (unrounded) scale.
static void quantize_block_iq4_nl(const float * x, struct mg_block_iq4_nl * y) {
    const int ntry = 7;
    float     weight[MG_QK4_NL];
    uint8_t   L[MG_QK4_NL];
    float     amax = 0, max = 0;
    for (int j = 0; j < MG_QK4_NL; ++j) {
        weight[j]      = x[j] * x[j];
        const float ax = fabsf(x[j]);
        if (ax > amax) {
            amax = ax;
            max  = x[j];
        }
    }

    float scale = 0;
    if (amax >= 1e-15f) {   // ggml: GROUP_MAX_EPS; below it the block is all zero
        const float     d0   = -max / mg_kvalues_iq4nl[0];
        struct iq4nl_fit fit = iq4nl_try(x, weight, 1 / d0, NULL);
        scale                = fit.sumq2 > 0 ? fit.sumqx / fit.sumq2 : 0.f;
        float best           = scale * fit.sumqx;
        for (int itry = -ntry; itry <= ntry; ++itry) {
            fit = iq4nl_try(x, weight, (itry + mg_kvalues_iq4nl[0]) / max, NULL);
            if (fit.sumq2 > 0 && fit.sumqx * fit.sumqx > best * fit.sumq2) {
                scale = fit.sumqx / fit.sumq2;
                best  = scale * fit.sumqx;
            }
        }
    }
    y->d = mg_fp32_to_fp16(scale);
    iq4nl_try(x, weight, scale ? 1 / scale : 0, L);
    for (int j = 0; j < MG_QK4_NL / 2; ++j) y->qs[j] = (uint8_t) (L[j] | (L[j + MG_QK4_NL / 2] << 4));
}

void mg_quantize_row_iq4_nl_ref(const float * x, void * vy, int64_t n) {
    struct mg_block_iq4_nl * y = vy;
    for (int64_t b = 0; b < n / MG_QK4_NL; b++) quantize_block_iq4_nl(x + b * MG_QK4_NL, &y[b]);
}

void mg_dequantize_row_iq4_nl(const void * vx, float * y, int64_t n) {
    const struct mg_block_iq4_nl * x = vx;
    for (int64_t b = 0; b < n / MG_QK4_NL; b++, y += MG_QK4_NL) {
        const float d = mg_fp16_to_fp32(x[b].d);
        for (int j = 0; j < MG_QK4_NL / 2; j++) {
            y[j]                 = d * mg_kvalues_iq4nl[x[b].qs[j] & 0xf];
            y[j + MG_QK4_NL / 2] = d * mg_kvalues_iq4nl[x[b].qs[j] >> 4];
        }
    }
}
