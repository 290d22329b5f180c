// range_model.h - a naive model of mg_dyn_alloc for the chapter 05 exercises.
//
// It keeps the live ranges themselves, not a free list: the free space is
// whatever no live range covers, and the tail starts where the last live
// range ends. Best fit and first fit are worked out from that, by brute
// force, so the tests compare the allocator with something that shares none
// of its code.
#pragma once

#include <stdbool.h>
#include <stddef.h>

#define MODEL_MAX 256

struct range_model {
    size_t align;
    int    n;                   // live ranges, sorted by offset
    size_t off[MODEL_MAX];
    size_t size[MODEL_MAX];
    size_t peak;
};

static inline size_t model_align(const struct range_model * m, size_t n) {
    return (n + m->align - 1) / m->align * m->align;
}

static inline void model_reset(struct range_model * m, size_t align) {
    m->align = align;
    m->n     = 0;
    m->peak  = 0;
}

// Free run number i (0..n): the gap before live range i, or from the end of
// the last live range on (the tail, i == n).
static inline size_t model_gap_start(const struct range_model * m, int i) {
    return i == 0 ? 0 : m->off[i - 1] + m->size[i - 1];
}
static inline size_t model_gap_size(const struct range_model * m, int i) {
    return m->off[i] - model_gap_start(m, i);   // only for i < n
}

static inline size_t model_alloc(struct range_model * m, size_t size, bool first_fit) {
    size = model_align(m, size);
    int pick = -1;
    for (int i = 0; i < m->n; i++) {   // the holes, by offset; the tail is the last resort
        const size_t gap = model_gap_size(m, i);
        if (gap < size) continue;
        if (pick < 0 || (!first_fit && gap < model_gap_size(m, pick))) pick = i;
        if (first_fit) break;
    }
    const int    at     = pick < 0 ? m->n : pick;   // the new range goes before live range `at`
    const size_t offset = model_gap_start(m, at);
    for (int j = m->n; j > at; j--) {
        m->off[j]  = m->off[j - 1];
        m->size[j] = m->size[j - 1];
    }
    m->off[at]  = offset;
    m->size[at] = size;
    m->n++;
    if (offset + size > m->peak) m->peak = offset + size;
    return offset;
}

// Forget live range number i; returns its offset and (aligned) size.
static inline void model_free(struct range_model * m, int i, size_t * offset, size_t * size) {
    *offset = m->off[i];
    *size   = m->size[i];
    for (int j = i; j < m->n - 1; j++) {
        m->off[j]  = m->off[j + 1];
        m->size[j] = m->size[j + 1];
    }
    m->n--;
}

// Free bytes below the peak, and the longest free run there.
static inline void model_free_below_peak(const struct range_model * m, size_t * free_bytes, size_t * largest) {
    *free_bytes = 0;
    *largest    = 0;
    for (int i = 0; i <= m->n; i++) {
        const size_t start = model_gap_start(m, i);
        const size_t end   = i < m->n ? m->off[i] : m->peak;
        const size_t run   = end > start ? end - start : 0;
        *free_bytes += run;
        if (run > *largest) *largest = run;
    }
}
