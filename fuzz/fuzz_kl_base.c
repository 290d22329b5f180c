// fuzz_kl_base.c - bytes in as a --kl-base file (llama-perplexity's
// --kl-divergence-base format), read by full/perplexity.c the way mg
// perplexity --kl-base reads it. The model's vocabulary size is taken from the
// file's own header, so that mutations get past the size check. Properties:
//   - mg_ppl_base_open opens the file or says why (mg_last_error), naming the
//     file, and leaves nothing open;
//   - an opened file has every token id in the vocabulary, and all the rows
//     its header promises can be read (a truncated file fails at the open);
//   - a row that mg_ppl_row_ok accepts gives a finite KL divergence and a finite
//     delta-p against any finite logits (no nan, no inf printed).
#define _GNU_SOURCE   // memfd_create (memfile.h)
#include "fuzz.h"
#include "memfile.h"

#include "mg.h"
#include "perplexity.h"

#include <math.h>
#include <string.h>

int LLVMFuzzerInitialize(int * argc, char *** argv) {
    (void) argc;
    (void) argv;
    return 0;
}

// Every row of the file against made-up logits: those the check accepts must give finite figures.
static void check_rows(struct mg_logits_base * b) {
    const int  n_scored = b->n_ctx - 1 - b->n_ctx / 2;
    uint16_t * rows     = malloc((size_t) n_scored * (size_t) mg_ppl_row_slots(b->n_vocab) * sizeof(uint16_t));
    float *    logits   = malloc((size_t) b->n_vocab * sizeof(float));
    if (rows == NULL || logits == NULL) abort();
    for (int i = 0; i < b->n_vocab; i++) logits[i] = 3.0f * sinf((float) i);
    struct mg_kld_sums k = {0};
    for (int c = 0; c < b->n_chunk; c++) {
        FUZZ_CHECK(mg_ppl_base_read_rows(b, rows, n_scored), "chunk %d of %d cannot be read after the open", c, b->n_chunk);
        for (int i = 0; i < n_scored; i++) {
            const uint16_t * row = rows + (size_t) i * (size_t) mg_ppl_row_slots(b->n_vocab);
            if (!mg_ppl_row_ok(row, b->n_vocab)) continue;
            const int32_t tok = b->tokens[(size_t) c * (size_t) b->n_ctx + (size_t) (b->n_ctx / 2 + i + 1)];
            float         kld, p_diff;
            mg_ppl_kld_add(&k, logits, b->n_vocab, row, tok, &kld, &p_diff);
            FUZZ_CHECK(isfinite(kld) && isfinite(p_diff), "an accepted row gives KLD %g, delta-p %g", kld, p_diff);
        }
    }
    FUZZ_CHECK(isfinite(k.sum_kld) && isfinite(k.sum_nll_base), "the sums are not finite");
    free(rows);
    free(logits);
}

int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    int32_t n_vocab = 1;
    if (size >= 16) memcpy(&n_vocab, data + 12, 4);
    if (n_vocab < 1) n_vocab = 1;
    struct memfile    mf = memfile_new(data, size);
    struct mg_logits_base b;
    if (mg_ppl_base_open(mf.path, n_vocab, &b)) {
        for (size_t i = 0; i < (size_t) b.n_chunk * (size_t) b.n_ctx; i++) {
            FUZZ_CHECK(b.tokens[i] >= 0 && b.tokens[i] < b.n_vocab, "token %zu is %d", i, b.tokens[i]);
        }
        check_rows(&b);
        mg_ppl_base_close(&b);
    } else {
        FUZZ_CHECK(strstr(mg_last_error(), mf.path) != NULL, "the error does not name the file: \"%s\"",
                   mg_last_error());
        FUZZ_CHECK(b.f == NULL && b.tokens == NULL, "a failed open left the file or the tokens behind");
    }
    memfile_free(&mf);
    return 0;
}
