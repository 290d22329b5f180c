// Generated from full/sampling.h by tools/chapgen. In a class, edit this copy freely (make chapters will not overwrite your edits); to change the engine, edit full/sampling.h and run make chapters.
// sampling.h - from logits to the next token (llama.cpp: common_sampler and
// the samplers of llama-sampler.cpp).
//
//     struct mg_sampler * smp = mg_sampler_new(mg_sampler_default_params(), n_vocab);
//     mg_sampler_accept(smp, prompt[i]);              // the penalties see the prompt too
//     int32_t next = mg_sampler_sample(smp, logits);  // also accepts next
//     mg_sampler_free(smp);
//
// The chain, in llama.cpp's default order: repetition penalty, top-k, top-p,
// min-p, temperature, then a random draw from what is left. The filters see
// the logits before temperature (llama.cpp differs from HF there). A
// temperature <= 0 means greedy: the first highest logit, always.
//
// The random numbers come from our own generator, so a seeded run repeats
// exactly here, but is not expected to draw llama.cpp's tokens (it uses
// std::mt19937); greedy decoding is the mode to compare engines in.
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct mg_sampler_params {
    float    temp;             // <= 0: greedy
    int      top_k;            // <= 0: off
    float    top_p;            // >= 1: off
    float    min_p;            // <= 0: off
    float    repeat_penalty;   // 1: off
    int      repeat_last_n;    // how many recent tokens the penalty looks at
    uint64_t seed;
};

// llama.cpp's defaults: temp 0.8, top_k 40, top_p 0.95, min_p 0.05, penalty 1 over 64.
struct mg_sampler_params mg_sampler_default_params(void);

struct mg_sampler;

struct mg_sampler * mg_sampler_new(struct mg_sampler_params params, int32_t n_vocab);
void                mg_sampler_free(struct mg_sampler * s);

// Remember a token for the repetition penalty (prompt tokens and generated ones).
void mg_sampler_accept(struct mg_sampler * s, int32_t token);

// Pick the next token from logits[n_vocab] (not modified) and accept it.
int32_t mg_sampler_sample(struct mg_sampler * s, const float * logits);

// The index of the first largest value: greedy decoding, and the fixtures' argmax.
int32_t mg_argmax(const float * x, int32_t n);
