// Generated from full/quants_k.c by tools/chapgen. In a class, edit this copy freely (make chapters will not overwrite your edits); to change the engine, edit full/quants_k.c and run make chapters.
// quants_k.c - the K-quants: 256-element super-blocks (ggml-quants.c, "2-6 bit
// quantization in super-blocks").
//
// A K-quant spends its bits in two layers. Each sub-block of 16 or 32 weights
// gets its own scale (and, for the asymmetric types, its own min), fitted by a
// small least-squares search; those scales are then themselves quantized to
// 4, 6 or 8 bits against one F16 factor per super-block. The codes are chosen
// last, against the scales exactly as they will be decoded.
//
// The quantizers reproduce ggml's quantize_row_q*_K_ref bit for bit, which is
// what llama-quantize runs without an importance matrix. That is only possible
// because every float expression below is evaluated in ggml's order, without
// fused multiply-adds (build with -ffp-contract=off): a different rounding in
// the fit can pick a different scale, and then every code in the block moves.
#include "quants.h"

#include <math.h>
#include <string.h>

// A sub-block whose largest |x| is below this is all zero (ggml: GROUP_MAX_EPS).
#define GROUP_MAX_EPS 1e-15f

static int min_int(int a, int b) { return a < b ? a : b; }
static int max_int(int a, int b) { return a > b ? a : b; }
static int clamp_int(int v, int lo, int hi) { return max_int(lo, min_int(hi, v)); }

// ---------------------------------------------------------------------------
// Fitting a scale to a sub-block
// ---------------------------------------------------------------------------

// Asymmetric fit (ggml: make_qkx2_quants): find scale > 0 and min <= 0 so that
// x ~ scale * L + min with L in 0..nmax, minimizing sum w * |error| (use_mad) or
// sum w * error^2. Tries nstep+1 grids, from "nmax + rmin steps span the data"
// up by rdelta each time, and for each grid solves the 2x2 least squares for
// (scale, min) given its codes. Returns the scale; *neg_min gets -min (>= 0).
static float make_qkx2_quants(int n, int nmax, const float * x, const float * weights, uint8_t * L,
                              float * neg_min, uint8_t * Laux, float rmin, float rdelta, int nstep, bool use_mad) {
    float min   = x[0];
    float max   = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        const float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0) min = 0;   // the grid always reaches zero
    if (max == min) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        *neg_min = -min;
        return 0.0f;
    }

    // The starting point: nmax steps span [min, max] exactly.
    float iscale     = nmax / (max - min);
    float scale      = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; ++i) {
        const int l = mg_nearest_int(iscale * (x[i] - min));
        L[i]        = (uint8_t) clamp_int(l, 0, nmax);
        float diff  = scale * L[i] + min - x[i];
        diff        = use_mad ? fabsf(diff) : diff * diff;
        best_error += weights[i] * diff;
    }
    if (nstep < 1) {
        *neg_min = -min;
        return scale;
    }

    for (int is = 0; is <= nstep; ++is) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            const int l = clamp_int(mg_nearest_int(iscale * (x[i] - min)), 0, nmax);
            Laux[i]     = (uint8_t) l;
            const float w = weights[i];
            sum_l  += w * l;
            sum_l2 += w * l * l;
            sum_xl += w * l * x[i];
        }
        // Weighted least squares of x on (L, 1).
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min   = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {   // a positive min is not allowed: refit the scale alone
                this_min   = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; ++i) {
                float diff = this_scale * Laux[i] + this_min - x[i];
                diff       = use_mad ? fabsf(diff) : diff * diff;
                cur_error += weights[i] * diff;
            }
            if (cur_error < best_error) {
                for (int i = 0; i < n; ++i) L[i] = Laux[i];
                best_error = cur_error;
                scale      = this_scale;
                min        = this_min;
            }
        }
    }
    *neg_min = -min;
    return scale;
}

// Symmetric fit with weights x^2 (ggml: make_qx_quants with rmse_type 1 and no
// importance weights, the only way Q6_K calls it). The element of largest |x|
// anchors the grid at -nmax; 19 nearby grids are tried and the one with the
// best (sum w x l)^2 / (sum w l^2) wins, i.e. the least weighted squared error
// after the optimal rescale. Codes come back in L as l + nmax (0..2*nmax-1).
static float make_qx_quants(int n, int nmax, const float * x, int8_t * L) {
    float max  = 0;
    float amax = 0;
    for (int i = 0; i < n; ++i) {
        const float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max  = x[i];
        }
    }
    if (amax < GROUP_MAX_EPS) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.0f;
    }
    float iscale = -nmax / max;
    float sumlx  = 0;
    float suml2  = 0;
    for (int i = 0; i < n; ++i) {
        const int l = clamp_int(mg_nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i]        = (int8_t) (l + nmax);
        const float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    float best  = scale * sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0) continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; ++i) {
            const int l   = clamp_int(mg_nearest_int(iscale * x[i]), -nmax, nmax - 1);
            const float w = x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; ++i) {
                L[i] = (int8_t) (nmax + clamp_int(mg_nearest_int(iscale * x[i]), -nmax, nmax - 1));
            }
            scale = sumlx / suml2;
            best  = scale * sumlx;
        }
    }
    return scale;
}

// The inverse of mg_get_scale_min_k4 (quants.h), for j = 0..7 in order: the
// calls for j >= 4 add their top bits to bytes the calls for j < 4 wrote.
static void set_scale_min_k4(int j, uint8_t * q, uint8_t sc, uint8_t m) {
    if (j < 4) {
        q[j]     = sc;
        q[j + 4] = m;
    } else {
        q[j + 4] = (uint8_t) ((sc & 0xf) | ((m & 0xf) << 4));
        q[j - 4] |= (uint8_t) ((sc >> 4) << 6);
        q[j]     |= (uint8_t) ((m >> 4) << 6);
    }
}

// The fit of one 32-element sub-block of Q4_K/Q5_K, weighted by rms(x) + |x|
// so that large weights count more without the small ones being ignored.
static float fit_sub_block_32(const float * x, int nmax, float rmin, int nstep, uint8_t * L, float * neg_min) {
    float   weights[32];
    uint8_t Laux[32];
    float   sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += x[l] * x[l];
    const float av_x = sqrtf(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + fabsf(x[l]);
    return make_qkx2_quants(32, nmax, x, weights, L, neg_min, Laux, rmin, 0.1f, nstep, false);
}

// The part Q4_K and Q5_K share: fit 8 sub-blocks, quantize their scales and
// mins to 6 bits against d = max_scale/63 and dmin = max_min/63, store them,
// then choose each code against the decoded (F16-rounded) d and dmin.
static void quantize_q45_K_scales_and_codes(const float * x, int nmax, float rmin, int nstep,
                                            mg_fp16_t * d_out, mg_fp16_t * dmin_out, uint8_t * scales,
                                            uint8_t * L) {
    float mins[MG_QK_K / 32];
    float sub_scales[MG_QK_K / 32];
    float max_scale = 0;   // scales are never negative: the min absorbs the offset
    float max_min   = 0;
    for (int j = 0; j < MG_QK_K / 32; ++j) {
        sub_scales[j] = fit_sub_block_32(x + 32 * j, nmax, rmin, nstep, L + 32 * j, &mins[j]);
        if (sub_scales[j] > max_scale) max_scale = sub_scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }

    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min   = max_min > 0 ? 63.f / max_min : 0.f;
    for (int j = 0; j < MG_QK_K / 32; ++j) {
        // Through uint8_t first, as ggml does, then clamp to 6 bits.
        uint8_t ls = (uint8_t) mg_nearest_int(inv_scale * sub_scales[j]);
        uint8_t lm = (uint8_t) mg_nearest_int(inv_min * mins[j]);
        ls = ls < 63 ? ls : 63;
        lm = lm < 63 ? lm : 63;
        set_scale_min_k4(j, scales, ls, lm);
    }
    *d_out    = mg_fp32_to_fp16(max_scale / 63.f);
    *dmin_out = mg_fp32_to_fp16(max_min / 63.f);

    for (int j = 0; j < MG_QK_K / 32; ++j) {
        uint8_t sc, m;
        mg_get_scale_min_k4(j, scales, &sc, &m);
        const float d = mg_fp16_to_fp32(*d_out) * sc;
        if (!d) continue;   // a zero scale: keep the fit's codes (they decode to -dm anyway)
        const float dm = mg_fp16_to_fp32(*dmin_out) * m;
        for (int ii = 0; ii < 32; ++ii) {
            L[32 * j + ii] = (uint8_t) clamp_int(mg_nearest_int((x[32 * j + ii] + dm) / d), 0, nmax);
        }
    }
}

// ---------------------------------------------------------------------------
// Q4_K: 256 elements -> 144 bytes (4.5 bits per weight).
//
//   offset   0: d     F16   factor of the 8 sub-block scales
//   offset   2: dmin  F16   factor of the 8 sub-block mins
//   offset   4: scales[12]  sc_j, m_j: 6 bits each (quants.h, mg_get_scale_min_k4)
//   offset  16: qs[128]     4-bit codes; chunk c = 0..3 is qs[32c .. 32c+31]:
//                           low nibbles = elements 64c .. 64c+31  (sub-block 2c)
//                           high nibbles = elements 64c+32 .. 64c+63 (sub-block 2c+1)
//
//   x[e] = (d * sc_j) * q[e] - (dmin * m_j),  j = e / 32
// ---------------------------------------------------------------------------

void mg_quantize_row_q4_K_ref(const float * x, void * vy, int64_t n) {
    struct mg_block_q4_K * y = vy;
    for (int64_t i = 0; i < n / MG_QK_K; i++, x += MG_QK_K) {
        uint8_t L[MG_QK_K];
        quantize_q45_K_scales_and_codes(x, 15, -1.f, 20, &y[i].d, &y[i].dmin, y[i].scales, L);
        uint8_t * q = y[i].qs;
        for (int j = 0; j < MG_QK_K; j += 64, q += 32) {
            for (int l = 0; l < 32; ++l) q[l] = (uint8_t) (L[j + l] | (L[j + l + 32] << 4));
        }
    }
}

void mg_dequantize_row_q4_K(const void * vx, float * y, int64_t n) {
    const struct mg_block_q4_K * x = vx;
    for (int64_t i = 0; i < n / MG_QK_K; i++) {
        const float     d   = mg_fp16_to_fp32(x[i].d);
        const float     min = mg_fp16_to_fp32(x[i].dmin);
        const uint8_t * q   = x[i].qs;
        for (int c = 0; c < 4; c++, q += 32) {   // a chunk of 32 bytes holds two sub-blocks
            uint8_t sc, m;
            mg_get_scale_min_k4(2 * c, x[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            mg_get_scale_min_k4(2 * c + 1, x[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xf) - m1;
            for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
        }
    }
}

// ---------------------------------------------------------------------------
// Q6_K: 256 elements -> 210 bytes (6.5625 bits per weight).
//
//   offset   0: ql[128]    low 4 bits; half h = 0,1 uses ql[64h .. 64h+63]:
//                          ql[64h + l]      low nibble: e = 128h + l       (k = 0)
//                          ql[64h + 32 + l] low nibble: e = 128h + 32 + l  (k = 1)
//                          ql[64h + l]      high nibble: e = 128h + 64 + l (k = 2)
//                          ql[64h + 32 + l] high nibble: e = 128h + 96 + l (k = 3)
//   offset 128: qh[64]     high 2 bits: bits 2k..2k+1 of qh[32h + l] for k = 0..3
//   offset 192: scales[16] int8, one per 16 elements
//   offset 208: d   F16
//
//   x[e] = (d * scales[e/16]) * (q[e] - 32)
// ---------------------------------------------------------------------------

void mg_quantize_row_q6_K_ref(const float * x, void * vy, int64_t n) {
    struct mg_block_q6_K * y = vy;
    for (int64_t i = 0; i < n / MG_QK_K; i++, x += MG_QK_K) {
        int8_t L[MG_QK_K];
        float  scales[MG_QK_K / 16];
        float  max_scale     = 0;   // the sub-block scale of largest magnitude, with its sign
        float  max_abs_scale = 0;
        for (int ib = 0; ib < MG_QK_K / 16; ++ib) {
            scales[ib]            = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib);
            const float abs_scale = fabsf(scales[ib]);
            if (abs_scale > max_abs_scale) {
                max_abs_scale = abs_scale;
                max_scale     = scales[ib];
            }
        }
        if (max_abs_scale < GROUP_MAX_EPS) {
            memset(&y[i], 0, sizeof(y[i]));
            continue;
        }

        // The largest scale becomes -128 (so d may be negative).
        const float iscale = -128.f / max_scale;
        y[i].d = mg_fp32_to_fp16(1 / iscale);
        for (int ib = 0; ib < MG_QK_K / 16; ++ib) {
            y[i].scales[ib] = (int8_t) min_int(127, mg_nearest_int(iscale * scales[ib]));
        }

        for (int j = 0; j < MG_QK_K / 16; ++j) {
            const float d = mg_fp16_to_fp32(y[i].d) * y[i].scales[j];
            if (!d) continue;
            for (int ii = 0; ii < 16; ++ii) {
                L[16 * j + ii] = (int8_t) (clamp_int(mg_nearest_int(x[16 * j + ii] / d), -32, 31) + 32);
            }
        }

        uint8_t * ql = y[i].ql;
        uint8_t * qh = y[i].qh;
        for (int j = 0; j < MG_QK_K; j += 128, ql += 64, qh += 32) {
            for (int l = 0; l < 32; ++l) {
                const uint8_t q0 = (uint8_t) L[j + l];
                const uint8_t q1 = (uint8_t) L[j + l + 32];
                const uint8_t q2 = (uint8_t) L[j + l + 64];
                const uint8_t q3 = (uint8_t) L[j + l + 96];
                ql[l]      = (uint8_t) ((q0 & 0xf) | ((q2 & 0xf) << 4));
                ql[l + 32] = (uint8_t) ((q1 & 0xf) | ((q3 & 0xf) << 4));
                qh[l]      = (uint8_t) ((q0 >> 4) | ((q1 >> 4) << 2) | ((q2 >> 4) << 4) | ((q3 >> 4) << 6));
            }
        }
    }
}

void mg_dequantize_row_q6_K(const void * vx, float * y, int64_t n) {
    const struct mg_block_q6_K * x = vx;
    for (int64_t i = 0; i < n / MG_QK_K; i++) {
        const float     d  = mg_fp16_to_fp32(x[i].d);
        const uint8_t * ql = x[i].ql;
        const uint8_t * qh = x[i].qh;
        const int8_t *  sc = x[i].scales;
        for (int h = 0; h < 2; h++, y += 128, ql += 64, qh += 32, sc += 8) {
            for (int l = 0; l < 32; ++l) {
                const int is = l / 16;
                const int q0 = ((ql[l] & 0xf) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q1 = ((ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q2 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q3 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l]      = d * sc[is + 0] * q0;
                y[l + 32] = d * sc[is + 2] * q1;
                y[l + 64] = d * sc[is + 4] * q2;
                y[l + 96] = d * sc[is + 6] * q3;
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Q8_K: 256 elements -> 292 bytes; activations only.
//
//   offset   0: d   F32 (= -max/127 of the signed maximum; negative when it is positive)
//   offset   4: qs[256]     int8 codes -127..127
//   offset 260: bsums[16]   int16, sum of qs[16j .. 16j+15]
//
//   x[e] = d * qs[e]
// ---------------------------------------------------------------------------

void mg_quantize_row_q8_K_ref(const float * x, void * vy, int64_t n) {
    struct mg_block_q8_K * y = vy;
    for (int64_t i = 0; i < n / MG_QK_K; i++, x += MG_QK_K) {
        float max  = 0;
        float amax = 0;
        for (int j = 0; j < MG_QK_K; ++j) {
            const float ax = fabsf(x[j]);
            if (ax > amax) {
                amax = ax;
                max  = x[j];
            }
        }
        if (!amax) {
            // ggml leaves bsums unset here; we zero them so a block is always defined.
            memset(&y[i], 0, sizeof(y[i]));
            continue;
        }
        // -127 rather than -128: the signed maximum lands on -127 and no code
        // is ever -128, which keeps the SIMD kernels' int8 tricks safe.
        const float iscale = -127.f / max;
        for (int j = 0; j < MG_QK_K; ++j) {
            y[i].qs[j] = (int8_t) min_int(127, mg_nearest_int(iscale * x[j]));
        }
        for (int j = 0; j < MG_QK_K / 16; ++j) {
            int sum = 0;
            for (int ii = 0; ii < 16; ++ii) sum += y[i].qs[16 * j + ii];
            y[i].bsums[j] = (int16_t) sum;
        }
        y[i].d = 1 / iscale;
    }
}

void mg_dequantize_row_q8_K(const void * vx, float * y, int64_t n) {
    const struct mg_block_q8_K * x = vx;
    for (int64_t i = 0; i < n / MG_QK_K; i++) {
        for (int j = 0; j < MG_QK_K; ++j) *y++ = x[i].d * x[i].qs[j];
    }
}

// ggml-cpu's quantize_row_q8_K: the reference rule on every platform.
void mg_quantize_row_q8_K(const float * x, void * y, int64_t n) {
    mg_quantize_row_q8_K_ref(x, y, n);
}
