//@file 09
// quants_k.c - the K-quants: 256-element super-blocks (ggml-quants.c, "2-6 bit
// quantization in super-blocks").
//
// A K-quant spends its bits in two layers. Each sub-block of 16 or 32 weights
// gets its own scale (and, for the asymmetric types, its own min), fitted by a
// small least-squares search; those scales are then themselves quantized to
// 4, 6 or 8 bits against one F16 factor per super-block. The codes are chosen
// last, against the scales exactly as they will be decoded.
//
// Chapter 09 only reads K-quant weights: it has the Q4_K and Q6_K decoders,
// the Q8_K activations and (in vec.c) the dot products. full/ adds the
// quantizers (for mg quantize and mg mkmodel), under "k-quantize" markers.
//
// The quantizers reproduce ggml's quantize_row_q*_K_ref bit for bit, which is
// what llama-quantize runs without an importance matrix. That is only possible
// because every float expression below is evaluated in ggml's order, without
// fused multiply-adds (build with -ffp-contract=off): a different rounding in
// the fit can pick a different scale, and then every code in the block moves.
#include "quants.h"

#include <math.h>
#include <string.h>

static int min_int(int a, int b) { return a < b ? a : b; }
//@+ full k-quantize
// A sub-block whose largest |x| is below this is all zero (ggml: GROUP_MAX_EPS).
#define GROUP_MAX_EPS 1e-15f

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

// The element of largest |x| (the first of equals), where the symmetric fits
// below (make_qx_quants, make_q3_quants) anchor their grid at -nmax. 0 when
// every |x| is below GROUP_MAX_EPS, and then L is all 0: such a group keeps
// scale 0, as in ggml (a nonzero anchor is at least GROUP_MAX_EPS in size).
static float grid_anchor(int n, const float * x, int8_t * L) {
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
    return max;
}

// Symmetric fit with weights x^2 (ggml: make_qx_quants with rmse_type 1 and no
// importance weights, the only way Q6_K calls it). The element of largest |x|
// anchors the grid at -nmax; 19 nearby grids are tried and the one with the
// best (sum w x l)^2 / (sum w l^2) wins, i.e. the least weighted squared error
// after the optimal rescale. Codes come back in L as l + nmax (0..2*nmax-1).
static float make_qx_quants(int n, int nmax, const float * x, int8_t * L) {
    const float max = grid_anchor(n, x, L);
    if (max == 0.0f) return 0.0f;   // every |x| below GROUP_MAX_EPS: all codes 0, scale 0
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

//@- full k-quantize
//@+ full more-quants
// Symmetric fit by coordinate descent (ggml: make_q3_quants with do_rmse): start
// like make_qx_quants, then up to 5 passes that move single codes whenever that
// raises (sum w x l)^2 / (sum w l^2). Codes come back as l + nmax.
static float make_q3_quants(int n, int nmax, const float * x, int8_t * L) {
    const float max = grid_anchor(n, x, L);
    if (max == 0.0f) return 0.0f;   // every |x| below GROUP_MAX_EPS: all codes 0, scale 0
    const float iscale = -nmax / max;
    float       sumlx  = 0;
    float       suml2  = 0;
    for (int i = 0; i < n; ++i) {
        const int l = clamp_int(mg_nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i]        = (int8_t) l;
        const float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    for (int itry = 0; itry < 5; ++itry) {
        int n_changed = 0;
        for (int i = 0; i < n; ++i) {
            const float w   = x[i] * x[i];
            float       slx = sumlx - w * x[i] * L[i];   // the sums without element i
            if (slx > 0) {
                float     sl2   = suml2 - w * L[i] * L[i];
                const int new_l = clamp_int(mg_nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
                if (new_l != L[i]) {
                    slx += w * x[i] * new_l;
                    sl2 += w * new_l * new_l;
                    if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i]  = (int8_t) new_l;
                        sumlx = slx;
                        suml2 = sl2;
                        ++n_changed;
                    }
                }
            }
        }
        if (!n_changed) break;
    }
    for (int i = 0; i < n; ++i) L[i] = (int8_t) (L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}
//@- full more-quants
//@+ full k-quantize

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

//@- full k-quantize

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

//@+ full k-quantize
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
//@- full k-quantize

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

//@+ full k-quantize
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
//@- full k-quantize

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
//@+ full more-quants

// Four 2-bit codes per byte, as Q2_K and Q3_K store them: in each half of 128
// elements, byte l (of 32) holds elements l, l+32, l+64, l+96 in bits 0-1,
// 2-3, 4-5, 6-7.
static void pack_2bit_codes(const uint8_t * L, uint8_t * qs) {
    for (int j = 0; j < MG_QK_K; j += 128) {
        for (int l = 0; l < 32; ++l) {
            qs[j / 4 + l] = (uint8_t) (L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
        }
    }
}

// ---------------------------------------------------------------------------
// Q2_K: 256 elements -> 84 bytes (2.625 bits per weight).
//
//   offset  0: scales[16]  sub-block j (16 elements): sc_j low nibble, m_j high nibble
//   offset 16: qs[64]      2-bit codes: element e = 128h + 32k + l is bits 2k..2k+1 of qs[32h + l]
//   offset 80: d     F16
//   offset 82: dmin  F16
//
//   x[e] = (d * sc_j) * q[e] - (dmin * m_j),  j = e / 16
// ---------------------------------------------------------------------------

void mg_quantize_row_q2_K_ref(const float * x, void * vy, int64_t n) {
    struct mg_block_q2_K * y = vy;
    const float q4scale = 15.f;
    for (int64_t i = 0; i < n / MG_QK_K; i++, x += MG_QK_K) {
        uint8_t L[MG_QK_K];
        uint8_t Laux[16];
        float   weights[16];
        float   mins[MG_QK_K / 16];
        float   scales[MG_QK_K / 16];
        float   max_scale = 0;
        float   max_min   = 0;
        for (int j = 0; j < MG_QK_K / 16; ++j) {
            for (int l = 0; l < 16; ++l) weights[l] = fabsf(x[16 * j + l]);
            scales[j] = make_qkx2_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, true);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }

        if (max_scale > 0) {
            const float iscale = q4scale / max_scale;
            for (int j = 0; j < MG_QK_K / 16; ++j) y[i].scales[j] = (uint8_t) mg_nearest_int(iscale * scales[j]);
            y[i].d = mg_fp32_to_fp16(max_scale / q4scale);
        } else {
            for (int j = 0; j < MG_QK_K / 16; ++j) y[i].scales[j] = 0;
            y[i].d = mg_fp32_to_fp16(0.f);
        }
        if (max_min > 0) {
            const float iscale = q4scale / max_min;
            for (int j = 0; j < MG_QK_K / 16; ++j) {
                y[i].scales[j] |= (uint8_t) (mg_nearest_int(iscale * mins[j]) << 4);
            }
            y[i].dmin = mg_fp32_to_fp16(max_min / q4scale);
        } else {
            y[i].dmin = mg_fp32_to_fp16(0.f);
        }

        for (int j = 0; j < MG_QK_K / 16; ++j) {
            const float d = mg_fp16_to_fp32(y[i].d) * (y[i].scales[j] & 0xf);
            if (!d) continue;
            const float dm = mg_fp16_to_fp32(y[i].dmin) * (y[i].scales[j] >> 4);
            for (int ii = 0; ii < 16; ++ii) {
                L[16 * j + ii] = (uint8_t) clamp_int(mg_nearest_int((x[16 * j + ii] + dm) / d), 0, 3);
            }
        }
        pack_2bit_codes(L, y[i].qs);
    }
}

void mg_dequantize_row_q2_K(const void * vx, float * y, int64_t n) {
    const struct mg_block_q2_K * x = vx;
    for (int64_t i = 0; i < n / MG_QK_K; i++) {
        const float     d   = mg_fp16_to_fp32(x[i].d);
        const float     min = mg_fp16_to_fp32(x[i].dmin);
        const uint8_t * q   = x[i].qs;
        int             is  = 0;
        for (int h = 0; h < 2; h++, q += 32) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int half = 0; half < 2; half++) {   // two sub-blocks of 16 per 32 bytes
                    const uint8_t sc = x[i].scales[is++];
                    const float   dl = d * (sc & 0xf), ml = min * (sc >> 4);
                    for (int l = 16 * half; l < 16 * half + 16; ++l) *y++ = dl * ((q[l] >> shift) & 3) - ml;
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Q3_K: 256 elements -> 110 bytes (3.4375 bits per weight).
//
//   offset   0: hmask[32]   high bit of element e: bit e/32 of hmask[e%32] (set: +0, clear: -4)
//   offset  32: qs[64]      low 2 bits, packed like Q2_K
//   offset  96: scales[12]  16 six-bit scales, stored + 32:
//                           low 4 bits:  j < 8: scales[j] & 15; j >= 8: scales[j-8] >> 4
//                           high 2 bits: bits 2(j/4)..2(j/4)+1 of scales[8 + j%4]
//   offset 108: d   F16
//
//   x[e] = (d * (sc_j - 32)) * q[e],  j = e / 16,  q = low2 - (highbit ? 0 : 4) in -4..3
// ---------------------------------------------------------------------------

void mg_quantize_row_q3_K_ref(const float * x, void * vy, int64_t n) {
    struct mg_block_q3_K * y = vy;
    for (int64_t i = 0; i < n / MG_QK_K; i++, x += MG_QK_K) {
        int8_t L[MG_QK_K];
        float  scales[MG_QK_K / 16];
        float  max_scale = 0;   // signed, of largest magnitude
        float  amax      = 0;
        for (int j = 0; j < MG_QK_K / 16; ++j) {
            scales[j]         = make_q3_quants(16, 4, x + 16 * j, L + 16 * j);
            const float scale = fabsf(scales[j]);
            if (scale > amax) {
                amax      = scale;
                max_scale = scales[j];
            }
        }

        memset(y[i].scales, 0, sizeof(y[i].scales));
        if (max_scale) {
            const float iscale = -32.f / max_scale;
            for (int j = 0; j < MG_QK_K / 16; ++j) {
                // Through int8_t first, as ggml does.
                const int8_t l = (int8_t) (clamp_int((int8_t) mg_nearest_int(iscale * scales[j]), -32, 31) + 32);
                if (j < 8) {
                    y[i].scales[j] = l & 0xf;
                } else {
                    y[i].scales[j - 8] |= (uint8_t) ((l & 0xf) << 4);
                }
                y[i].scales[j % 4 + 8] |= (uint8_t) ((l >> 4) << (2 * (j / 4)));
            }
            y[i].d = mg_fp32_to_fp16(1 / iscale);
        } else {
            y[i].d = mg_fp32_to_fp16(0.f);
        }

        for (int j = 0; j < MG_QK_K / 16; ++j) {
            const float d = mg_fp16_to_fp32(y[i].d) * mg_q3_K_scale(y[i].scales, j);
            if (!d) continue;
            for (int ii = 0; ii < 16; ++ii) {
                L[16 * j + ii] = (int8_t) (clamp_int(mg_nearest_int(x[16 * j + ii] / d), -4, 3) + 4);
            }
        }

        // Codes are 0..7 here: bit 2 goes to hmask, bits 0-1 to qs.
        uint8_t low2[MG_QK_K];
        memset(y[i].hmask, 0, sizeof(y[i].hmask));
        for (int e = 0; e < MG_QK_K; ++e) {
            if (L[e] > 3) y[i].hmask[e % 32] |= (uint8_t) (1 << (e / 32));
            low2[e] = (uint8_t) (L[e] & 3);
        }
        pack_2bit_codes(low2, y[i].qs);
    }
}

void mg_dequantize_row_q3_K(const void * vx, float * y, int64_t n) {
    const struct mg_block_q3_K * x = vx;
    for (int64_t i = 0; i < n / MG_QK_K; i++) {
        const float     d_all = mg_fp16_to_fp32(x[i].d);
        const uint8_t * q     = x[i].qs;
        const uint8_t * hm    = x[i].hmask;
        uint8_t         m     = 1;
        int             is    = 0;
        for (int h = 0; h < 2; h++, q += 32) {
            for (int shift = 0; shift < 8; shift += 2, m <<= 1) {
                for (int half = 0; half < 2; half++) {
                    const float dl = d_all * mg_q3_K_scale(x[i].scales, is++);
                    for (int l = 16 * half; l < 16 * half + 16; ++l) {
                        *y++ = dl * (((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
                    }
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Q5_K: 256 elements -> 176 bytes (5.5 bits per weight).
//
//   offset  0: d, dmin  F16, F16
//   offset  4: scales[12]  as Q4_K
//   offset 16: qh[32]      5th bit of element e: bit e/32 of qh[e%32]
//   offset 48: qs[128]     low 4 bits, as Q4_K
//
//   x[e] = (d * sc_j) * (q4[e] + 16 * bit[e]) - (dmin * m_j),  j = e / 32
// ---------------------------------------------------------------------------

void mg_quantize_row_q5_K_ref(const float * x, void * vy, int64_t n) {
    struct mg_block_q5_K * y = vy;
    for (int64_t i = 0; i < n / MG_QK_K; i++, x += MG_QK_K) {
        uint8_t L[MG_QK_K];
        quantize_q45_K_scales_and_codes(x, 31, -0.5f, 15, &y[i].d, &y[i].dmin, y[i].scales, L);
        memset(y[i].qh, 0, sizeof(y[i].qh));
        uint8_t * ql = y[i].qs;
        for (int j = 0; j < MG_QK_K; j += 64, ql += 32) {
            for (int l = 0; l < 32; ++l) {
                const int lo = L[j + l], hi = L[j + l + 32];
                if (lo > 15) y[i].qh[l] |= (uint8_t) (1 << (j / 32));
                if (hi > 15) y[i].qh[l] |= (uint8_t) (1 << (j / 32 + 1));
                ql[l] = (uint8_t) ((lo & 0xf) | ((hi & 0xf) << 4));
            }
        }
    }
}

void mg_dequantize_row_q5_K(const void * vx, float * y, int64_t n) {
    const struct mg_block_q5_K * x = vx;
    for (int64_t i = 0; i < n / MG_QK_K; i++) {
        const float     d   = mg_fp16_to_fp32(x[i].d);
        const float     min = mg_fp16_to_fp32(x[i].dmin);
        const uint8_t * ql  = x[i].qs;
        const uint8_t * qh  = x[i].qh;
        for (int c = 0; c < 4; c++, ql += 32) {
            uint8_t sc, m;
            mg_get_scale_min_k4(2 * c, x[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            mg_get_scale_min_k4(2 * c + 1, x[i].scales, &sc, &m);
            const float   d2 = d * sc, m2 = min * m;
            const uint8_t u1 = (uint8_t) (1 << (2 * c)), u2 = (uint8_t) (2 << (2 * c));
            for (int l = 0; l < 32; ++l) *y++ = d1 * ((ql[l] & 0xf) + (qh[l] & u1 ? 16 : 0)) - m1;
            for (int l = 0; l < 32; ++l) *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
        }
    }
}
//@- full more-quants
