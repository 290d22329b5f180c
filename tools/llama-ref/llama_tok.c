// llama_tok.c - llama.cpp's token ids for a list of strings, in the format of
// llama.cpp's tokenizer fixtures (models/ggml-vocab-*.gguf.inp/.out): IN holds
// the strings, each followed by "\n__ggml_vocab_test__\n"; OUT gets one line
// per string, each id preceded by a space. No BOS, special tokens not parsed
// (as test-tokenizer-0 tokenizes).
//
//   cc -std=gnu11 -O2 -I$L/include -I$L/ggml/include tools/llama-ref/llama_tok.c
//      -L$L/build-avx512/bin -lllama -lggml -lggml-base -Wl,-rpath,$L/build-avx512/bin -o llama_tok
//   ./llama_tok VOCAB.gguf IN.inp OUT.out
#include "llama.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char * read_all(const char * path, size_t * len) {
    FILE * f = fopen(path, "rb");
    if (f == NULL) return NULL;
    fseek(f, 0, SEEK_END);
    const long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char * b = malloc((size_t) n + 1);
    if (b == NULL || fread(b, 1, (size_t) n, f) != (size_t) n) exit(1);
    fclose(f);
    b[n] = '\0';
    *len = (size_t) n;
    return b;
}

int main(int argc, char ** argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: llama_tok VOCAB.gguf IN.inp OUT.out\n");
        return 1;
    }
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    struct llama_model * model = llama_model_load_from_file(argv[1], mp);
    if (model == NULL) return 1;
    const struct llama_vocab * vocab = llama_model_get_vocab(model);
    size_t len;
    char * inp = read_all(argv[2], &len);
    FILE * out = fopen(argv[3], "w");
    if (inp == NULL || out == NULL) return 1;
    static const char sep[] = "\n__ggml_vocab_test__\n";
    int n_cases = 0;
    for (char *p = inp, *end; (end = strstr(p, sep)) != NULL; p = end + strlen(sep), n_cases++) {
        const int32_t n_text = (int32_t) (end - p);
        int32_t n_max = n_text + 16;
        llama_token * ids = malloc((size_t) n_max * sizeof(llama_token));
        const int32_t n = llama_tokenize(vocab, p, n_text, ids, n_max, false, false);
        if (n < 0) return 1;
        for (int32_t i = 0; i < n; i++) fprintf(out, " %d", ids[i]);
        fprintf(out, "\n");
        free(ids);
    }
    fclose(out);
    fprintf(stderr, "llama_tok: %d strings\n", n_cases);
    llama_model_free(model);
    return 0;
}
