//@file full
// unicode_nfc.c - NFC: decompose, order the marks, compose (unicode_nfc.h).
#include "unicode_nfc.h"
#include "tensor.h"   // MG_ASSERT
#include "unicode.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

// Hangul syllables, by arithmetic (The Unicode Standard, section 3.12).
enum {
    HANGUL_S_BASE  = 0xAC00,
    HANGUL_L_BASE  = 0x1100,
    HANGUL_V_BASE  = 0x1161,
    HANGUL_T_BASE  = 0x11A7,   // one before the first trailing consonant: T = 0 means none
    HANGUL_L_COUNT = 19,
    HANGUL_V_COUNT = 21,
    HANGUL_T_COUNT = 28,
    HANGUL_N_COUNT = HANGUL_V_COUNT * HANGUL_T_COUNT,   // 588 syllables per leading consonant
    HANGUL_S_COUNT = HANGUL_L_COUNT * HANGUL_N_COUNT,   // 11172
};

// The three tables are sorted, so each lookup is a bsearch; a comparator says on which side of a
// row the code point (or pair) falls, 0 inside it.
static int cmp_ccc_range(const void * key, const void * row) {
    const uint32_t                   cpt = *(const uint32_t *) key;
    const struct mg_nfc_ccc_range *  r   = row;
    return cpt < r->first ? -1 : cpt > r->last ? 1 : 0;
}

static int cmp_decomposition(const void * key, const void * row) {
    const uint32_t                       cpt = *(const uint32_t *) key;
    const struct mg_nfc_decomposition *  d   = row;
    return cpt < d->cpt ? -1 : cpt > d->cpt ? 1 : 0;
}

static int cmp_composition(const void * key, const void * row) {
    const uint32_t *                   pair = key;   // first, second
    const struct mg_nfc_composition *  c    = row;
    if (pair[0] != c->first) {
        return pair[0] < c->first ? -1 : 1;
    }
    return pair[1] < c->second ? -1 : pair[1] > c->second ? 1 : 0;
}

uint8_t mg_nfc_ccc(uint32_t cpt) {
    const struct mg_nfc_ccc_range * r =
        bsearch(&cpt, mg_nfc_ccc_ranges, (size_t) mg_nfc_n_ccc_ranges, sizeof(*r), cmp_ccc_range);
    return r != NULL ? r->ccc : 0;
}

static const struct mg_nfc_decomposition * find_decomposition(uint32_t cpt) {
    return bsearch(&cpt, mg_nfc_decompositions, (size_t) mg_nfc_n_decompositions, sizeof(mg_nfc_decompositions[0]),
                   cmp_decomposition);
}

uint32_t mg_nfc_compose(uint32_t first, uint32_t second) {
    // Hangul: L + V -> LV, LV + T -> LVT.
    if (first >= HANGUL_L_BASE && first < HANGUL_L_BASE + HANGUL_L_COUNT && second >= HANGUL_V_BASE &&
        second < HANGUL_V_BASE + HANGUL_V_COUNT) {
        return HANGUL_S_BASE + ((first - HANGUL_L_BASE) * HANGUL_V_COUNT + (second - HANGUL_V_BASE)) * HANGUL_T_COUNT;
    }
    if (first >= HANGUL_S_BASE && first < HANGUL_S_BASE + HANGUL_S_COUNT && (first - HANGUL_S_BASE) % HANGUL_T_COUNT == 0 &&
        second > HANGUL_T_BASE && second < HANGUL_T_BASE + HANGUL_T_COUNT) {
        return first + (second - HANGUL_T_BASE);
    }
    const uint32_t                    pair[2] = { first, second };
    const struct mg_nfc_composition * c =
        bsearch(pair, mg_nfc_compositions, (size_t) mg_nfc_n_compositions, sizeof(*c), cmp_composition);
    return c != NULL ? c->cpt : 0;
}

// A growing array of code points.
struct cpts {
    uint32_t * v;
    size_t     n, cap;
};

static void push(struct cpts * c, uint32_t cpt) {
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 64;
        c->v   = realloc(c->v, c->cap * sizeof(c->v[0]));
        MG_ASSERT(c->v != NULL);
    }
    c->v[c->n++] = cpt;
}

// Step 1: the full canonical decomposition of cpt, appended.
static void decompose(uint32_t cpt, struct cpts * out) {
    if (cpt >= HANGUL_S_BASE && cpt < HANGUL_S_BASE + HANGUL_S_COUNT) {
        const uint32_t s = cpt - HANGUL_S_BASE;
        push(out, HANGUL_L_BASE + s / HANGUL_N_COUNT);
        push(out, HANGUL_V_BASE + s % HANGUL_N_COUNT / HANGUL_T_COUNT);
        if (s % HANGUL_T_COUNT != 0) push(out, HANGUL_T_BASE + s % HANGUL_T_COUNT);
        return;
    }
    const struct mg_nfc_decomposition * d = find_decomposition(cpt);
    if (d == NULL) {
        push(out, cpt);
        return;
    }
    decompose(d->first, out);   // the first part may decompose further (U+1E69 -> U+1E63 U+0307 -> s ...)
    if (d->second != 0) decompose(d->second, out);
}

// Step 2: within each run of marks (ccc > 0), a stable sort by ccc. Runs are
// short (a mark or two), so insertion sort; a long run (text made of nothing
// but marks) takes a counting sort instead, which stays linear.
enum { SHORT_RUN = 16 };

static void sort_run_by_counting(uint32_t * v, size_t n) {
    size_t     start[257] = {0};
    uint32_t * sorted     = malloc(n * sizeof(v[0]));
    MG_ASSERT(sorted != NULL);
    for (size_t i = 0; i < n; i++) start[mg_nfc_ccc(v[i]) + 1]++;
    for (int c = 1; c < 257; c++) start[c] += start[c - 1];
    for (size_t i = 0; i < n; i++) sorted[start[mg_nfc_ccc(v[i])]++] = v[i];   // in order: stable
    memcpy(v, sorted, n * sizeof(v[0]));
    free(sorted);
}

static void sort_run_by_insertion(uint32_t * v, size_t n) {
    for (size_t i = 1; i < n; i++) {
        const uint32_t cpt = v[i];
        const uint8_t  cc  = mg_nfc_ccc(cpt);
        size_t j = i;
        while (j > 0 && mg_nfc_ccc(v[j - 1]) > cc) {
            v[j] = v[j - 1];
            j--;
        }
        v[j] = cpt;
    }
}

static void canonical_order(struct cpts * c) {
    size_t i = 0;
    while (i < c->n) {
        if (mg_nfc_ccc(c->v[i]) == 0) {
            i++;
            continue;
        }
        size_t end = i;
        while (end < c->n && mg_nfc_ccc(c->v[end]) != 0) end++;
        if (end - i > SHORT_RUN) {
            sort_run_by_counting(c->v + i, end - i);
        } else {
            sort_run_by_insertion(c->v + i, end - i);
        }
        i = end;
    }
}

// Step 3: canonical composition, in place. starter is the index of the last
// starter kept; last_cc the class of the last code point kept after it. A
// code point is blocked from the starter when something between them has a
// class of 0 or >= its own.
static void compose(struct cpts * c) {
    size_t  kept    = 0;
    size_t  starter = SIZE_MAX;
    uint8_t last_cc = 0;
    for (size_t i = 0; i < c->n; i++) {
        const uint32_t cpt = c->v[i];
        const uint8_t  cc  = mg_nfc_ccc(cpt);
        if (starter != SIZE_MAX) {
            const bool adjacent = kept == starter + 1;
            if (adjacent || (last_cc != 0 && last_cc < cc)) {
                const uint32_t composite = mg_nfc_compose(c->v[starter], cpt);
                if (composite != 0) {
                    c->v[starter] = composite;
                    continue;
                }
            }
        }
        if (cc == 0) starter = kept;
        last_cc       = cc;
        c->v[kept++] = cpt;
    }
    c->n = kept;
}

// A growing byte string.
struct bytes {
    char * v;
    size_t n, cap;
};

static void append(struct bytes * b, const char * s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        while (b->n + n + 1 > b->cap) b->cap = b->cap ? 2 * b->cap : 256;
        b->v = realloc(b->v, b->cap);
        MG_ASSERT(b->v != NULL);
    }
    memcpy(b->v + b->n, s, n);
    b->n += n;
    b->v[b->n] = '\0';
}

// Normalizes the code points gathered so far and appends them as UTF-8.
static void flush_run(struct cpts * run, struct bytes * out) {
    canonical_order(run);
    compose(run);
    for (size_t i = 0; i < run->n; i++) {
        char u[4];
        append(out, u, mg_utf8_encode(run->v[i], u));
    }
    run->n = 0;
}

// Whether s[pos..pos+n) is a well-formed UTF-8 sequence for cpt (not an
// overlong form, not a surrogate, not U+FFFD standing for bad bytes).
static bool well_formed(const char * s, size_t pos, size_t n, uint32_t cpt) {
    char u[4];
    return cpt <= 0x10FFFF && !(cpt >= 0xD800 && cpt <= 0xDFFF) && mg_utf8_encode(cpt, u) == n &&
           memcmp(u, s + pos, n) == 0;
}

char * mg_utf8_nfc(const char * s, size_t len, size_t * out_len) {
    struct cpts  run = {0};
    struct bytes out = {0};
    append(&out, "", 0);
    size_t pos = 0;
    while (pos < len) {
        const size_t   at  = pos;
        const uint32_t cpt = mg_utf8_decode(s, len, &pos);
        if (!well_formed(s, at, pos - at, cpt)) {   // bad bytes: as they are
            flush_run(&run, &out);
            append(&out, s + at, pos - at);
            continue;
        }
        decompose(cpt, &run);
    }
    flush_run(&run, &out);
    free(run.v);
    *out_len = out.n;
    return out.v;
}
