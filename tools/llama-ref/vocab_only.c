// vocab_only.c - a GGUF's metadata without its tensors: the vocabulary-only
// files of tests/fixtures/vocab/ (as llama.cpp's models/ggml-vocab-*.gguf),
// which both engines load for their tokenizer alone.
//
//   cc -std=c11 -O2 -Ifull tools/llama-ref/vocab_only.c full/build/libmg.a -lm -pthread -o vocab_only
//   ./vocab_only MODEL.gguf OUT.gguf
#include "gguf.h"
#include "gguf_writer.h"
#include "tensor.h"

#include <stdio.h>

int main(int argc, char ** argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: vocab_only MODEL.gguf OUT.gguf\n");
        return 1;
    }
    struct mg_gguf * g = mg_gguf_open(argv[1]);
    if (g == NULL) {
        fprintf(stderr, "vocab_only: %s\n", mg_last_error());
        return 1;
    }
    struct mg_gguf_writer * w = mg_gguf_writer_new();
    const char * const skip[] = {NULL};
    FILE * f = fopen(argv[2], "wb");
    const bool ok = f != NULL && mg_gguf_writer_copy_kvs(w, g, skip) && mg_gguf_writer_write_stream(w, f, argv[2]);
    if (f == NULL || !ok || fclose(f) != 0) {
        fprintf(stderr, "vocab_only: %s: %s\n", argv[2], f == NULL ? "cannot open" : mg_last_error());
        return 1;
    }
    mg_gguf_writer_free(w);
    mg_gguf_close(g);
    return 0;
}
