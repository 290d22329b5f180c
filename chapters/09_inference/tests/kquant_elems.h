// kquant_elems.h - a Q4_K / Q6_K decoder written from docs/formats.md 2.4, one
// element at a time, independently of full/quants_k.c (for
// tests/09_inference/test_kquants.c and tests/full/test_kquants_quantize.c).
#pragma once

#include "quants.h"

// ---------------------------------------------------------------------------
// A decoder written from docs/formats.md 2.4, one element at a time. For element e,
// value = step * q - offset.
// ---------------------------------------------------------------------------

struct elem {
    int   q;        // the code, centred where the format centres it
    float step;     // d * sub-block scale
    float offset;   // dmin * sub-block min (0 for symmetric formats)
};

static inline void q4_K_scale_min(const uint8_t * s, int j, int * sc, int * m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m  = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
        *m  = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

static inline struct elem q4_K_elem(const struct mg_block_q4_K * b, int e) {
    const int     c    = e / 64;
    const uint8_t byte = b->qs[32 * c + e % 32];
    int           sc, m;
    q4_K_scale_min(b->scales, e / 32, &sc, &m);
    return (struct elem) {
        .q      = (e % 64) < 32 ? (byte & 15) : (byte >> 4),
        .step   = mg_fp16_to_fp32(b->d) * (float) sc,
        .offset = mg_fp16_to_fp32(b->dmin) * (float) m,
    };
}

static inline struct elem q6_K_elem(const struct mg_block_q6_K * b, int e) {
    const int h = e / 128, r = e % 128, k = r / 32, l = r % 32;
    const uint8_t lowbyte = b->ql[64 * h + 32 * (k & 1) + l];
    const int     low4    = k < 2 ? (lowbyte & 15) : (lowbyte >> 4);
    const int     high2   = (b->qh[32 * h + l] >> (2 * k)) & 3;
    return (struct elem) {
        .q      = (low4 | high2 << 4) - 32,
        .step   = mg_fp16_to_fp32(b->d) * (float) b->scales[e / 16],
        .offset = 0,
    };
}

static inline float elem_value(struct elem el) {
    return el.step * (float) el.q - el.offset;
}

