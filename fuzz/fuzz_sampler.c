// fuzz_sampler.c - random logits (NaN and infinities included) and random
// sampling parameters, as far as mg's flag checks (cli_sampling_setup) let
// them through. Properties: the token drawn is always in the vocabulary, and
// a seeded sampler repeats itself exactly.
#include "fuzz.h"

#include "cli.h"
#include "sampling.h"

#include <math.h>
#include <string.h>

int LLVMFuzzerInitialize(int * argc, char *** argv) {
    (void) argc;
    (void) argv;
    return 0;
}

struct header {
    float    temp, top_p, min_p, repeat_penalty;
    int32_t  top_k, repeat_last_n;
    uint64_t seed;
    uint16_t n_vocab;
    uint8_t  n_accept;
};

int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    struct header h;
    if (size < sizeof(h)) return 0;
    memcpy(&h, data, sizeof(h));
    data += sizeof(h);
    size -= sizeof(h);
    struct cli_sampling_opts o = {.p = mg_sampler_default_params()};
    o.p.temp = h.temp;
    o.p.top_p = h.top_p;
    o.p.min_p = h.min_p;
    o.p.repeat_penalty = h.repeat_penalty;
    o.p.top_k = h.top_k;
    o.p.repeat_last_n = h.repeat_last_n % 4096;
    o.p.seed = h.seed;
    if (!cli_sampling_setup("fuzz", &o)) return 0;   // mg refuses these flags
    const int32_t n_vocab = 1 + h.n_vocab % 1024;

    // The logits: the bytes that are left, then zeros.
    float * logits = calloc((size_t) n_vocab, sizeof(float));
    memcpy(logits, data, size < (size_t) n_vocab * sizeof(float) ? size : (size_t) n_vocab * sizeof(float));
    struct mg_sampler * a = mg_sampler_new(o.p, n_vocab);
    struct mg_sampler * b = mg_sampler_new(o.p, n_vocab);
    for (int i = 0; i < h.n_accept; i++) {
        const int32_t t = (int32_t) ((h.seed >> (i % 48)) % (uint64_t) n_vocab);
        mg_sampler_accept(a, t);
        mg_sampler_accept(b, t);
    }
    for (int step = 0; step < 3; step++) {
        const int32_t ta = mg_sampler_sample(a, logits);
        const int32_t tb = mg_sampler_sample(b, logits);
        FUZZ_CHECK(ta >= 0 && ta < n_vocab, "token %d of %d", ta, n_vocab);
        FUZZ_CHECK(ta == tb, "the same seed drew %d and %d", ta, tb);
        logits[ta] = -INFINITY;
    }
    const int32_t best = mg_argmax(logits, n_vocab);
    FUZZ_CHECK(best >= 0 && best < n_vocab, "argmax %d", best);
    mg_sampler_free(a);
    mg_sampler_free(b);
    free(logits);
    return 0;
}
