//@file full
// perplexity_eval.h - the model's side of mg perplexity (cli/cmd_perplexity.c
// parses and prints): a chunk of tokens evaluated from an empty cache, batch
// by batch, and what each chunk scores, as llama-perplexity's perplexity()
// and kl_divergence() do (llama.cpp tools/perplexity/perplexity.cpp). The
// arithmetic of one position and the saved-logits file are perplexity.h's.
//
//     struct mg_ppl_eval ev;
//     mg_ppl_eval_init(&ev, model, session_params, n_batch, with_rows);   // chunks of session_params.n_ctx
//     struct mg_ppl_sums sums = {0};
//     for (int c = 0; c < n_chunk; c++) {
//         mg_ppl_eval_chunk(&ev, tokens + c * n_ctx);
//         mg_ppl_score_chunk(&ev, tokens + c * n_ctx, false, &sums);
//     }
//     struct mg_ppl_estimate ppl;
//     mg_ppl_final(&sums, &ppl);                                 // PPL = ppl.value +/- ppl.err
//     mg_ppl_eval_free(&ev);
#pragma once

#include "model.h"
#include "perplexity.h"
#include "session.h"

#include <stdbool.h>
#include <stdint.h>

// The session a chunk runs in, and the logits of the positions it scores.
struct mg_ppl_eval {
    struct mg_session * s;
    int                 n_ctx;      // tokens per chunk
    int                 n_batch;
    int                 first;      // the first position whose logits are kept: n_ctx/2
    int                 n_scored;   // positions scored per chunk: first..n_ctx-2 predict first+1..n_ctx-1
    int                 n_vocab;
    int32_t             bos;        // replaces a chunk's first token, or -1 (no add_bos)
    int32_t *           batch;      // [n_batch] token ids of one batch
    float *             logits;     // [n_ctx - first][n_vocab] logits of the kept positions
    uint16_t *          rows;       // [n_scored][mg_ppl_row_slots(n_vocab)]: a chunk's saved (or base) rows
};

// A session of p (p.n_ctx: the chunk size, at least 4) for m and the buffers
// of one chunk; n_batch (at least 1) is cut to n_ctx. with_rows: the rows
// buffer too, which saving (mg_ppl_score_chunk's save) and mg_ppl_kld_chunk
// need. False after mg_set_error, with ev freed.
bool mg_ppl_eval_init(struct mg_ppl_eval * ev, struct mg_model * m, struct mg_session_params p, int n_batch,
                      bool with_rows);
void mg_ppl_eval_free(struct mg_ppl_eval * ev);

// Chunk tokens[0..n_ctx) from an empty cache, batch by batch (its first token
// BOS when the vocabulary adds one), keeping the logits of the scored
// positions. False after mg_set_error (a decode that failed, logits that are
// not finite).
bool mg_ppl_eval_chunk(struct mg_ppl_eval * ev, const int32_t * tokens);

// perplexity(): the negative log-likelihoods of the tokens a chunk scores.
struct mg_ppl_sums {
    double nll, nll2;
    size_t count;
};

// Adds the chunk just evaluated (tokens: its tokens) to sums; with save, its
// rows for --save-logits go to ev->rows (init with with_rows).
void mg_ppl_score_chunk(struct mg_ppl_eval * ev, const int32_t * tokens, bool save, struct mg_ppl_sums * sums);
// exp(mean NLL) so far: the running estimate printed after each chunk.
double mg_ppl_so_far(const struct mg_ppl_sums * sums);
// The final estimate: PPL and its error, PPL times the standard error of the
// mean NLL. False after mg_set_error when the variance is not positive.
bool mg_ppl_final(const struct mg_ppl_sums * sums, struct mg_ppl_estimate * ppl);

// kl_divergence(): the chunk just evaluated (tokens: its tokens, chunk number
// c from 0) against the base's next rows, added to k; klds[] and p_diffs[]
// get each scored position's KL divergence and delta-p. False after
// mg_set_error when the rows cannot be read or are not valid.
bool mg_ppl_kld_chunk(struct mg_ppl_eval * ev, struct mg_logits_base * b, const int32_t * tokens, int c,
                      struct mg_kld_sums * k, float * klds, float * p_diffs);

// The figures of kl_divergence()'s table and closing statistics, from its sums
// (fractions, not percent).
struct mg_kld_figures {
    struct mg_ppl_estimate ppl, ppl_base;   // PPL of this model and of the base
    double                 cor;             // the correlation of their ln(PPL)s
    struct mg_ppl_estimate ln_ratio;        // ln(PPL / PPL base)
    struct mg_ppl_estimate ppl_ratio;       // PPL / PPL base
    struct mg_ppl_estimate ppl_diff;        // PPL - PPL base
    struct mg_ppl_estimate kld;             // mean KL divergence from the base
    struct mg_ppl_estimate p_diff;          // mean p - p base of the right token
    struct mg_ppl_estimate rms_p_diff;      // its root mean square
    struct mg_ppl_estimate same_top;        // how often both models' top tokens agree
};
struct mg_kld_figures mg_ppl_kld_figures(const struct mg_kld_sums * k);

// Whether text_path's tokens[0..n) hold the base's tokens (its chunks) from
// the start. False after mg_set_error naming both files and where they part.
bool mg_ppl_base_same_tokens(const struct mg_logits_base * b, const int32_t * tokens, int n, const char * text_path,
                             const char * base_path);
