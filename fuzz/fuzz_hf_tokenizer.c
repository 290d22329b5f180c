// fuzz_hf_tokenizer.c - bytes in as tokenizer.json (the first byte decides
// whether a tokenizer_config.json, the real MiniMind one, sits beside it):
// mg_hf_vocab_load reads it or says why, naming the file. A vocabulary that
// loads is also turned into GGUF metadata (mg_hf_vocab_add_to_gguf).
#define _GNU_SOURCE   // mkdtemp
#include "fuzz.h"

#include "gguf_writer.h"
#include "hf_tokenizer.h"
#include "tensor.h"

#include <string.h>
#include <unistd.h>

static char dir[64];
static char * config;
static size_t config_len;

static void write_file(const char * path, const void * data, size_t size) {
    FILE * f = fopen(path, "wb");
    if (f == NULL || fwrite(data, 1, size, f) != size || fclose(f) != 0) {
        fprintf(stderr, "fuzz_hf_tokenizer: cannot write %s\n", path);
        abort();
    }
}

static void clean_up(void) {
    char p[128];
    snprintf(p, sizeof(p), "%s/tokenizer.json", dir);
    unlink(p);
    snprintf(p, sizeof(p), "%s/tokenizer_config.json", dir);
    unlink(p);
    rmdir(dir);
}

int LLVMFuzzerInitialize(int * argc, char *** argv) {
    (void) argc;
    (void) argv;
    snprintf(dir, sizeof(dir), "/tmp/mg_fuzz_hf_XXXXXX");
    if (mkdtemp(dir) == NULL) abort();
    atexit(clean_up);
    char path[4096];
    snprintf(path, sizeof(path), "%s/data/minimind/tokenizer_config.json", MG_FUZZ_ROOT);
    FILE * f = fopen(path, "rb");
    if (f == NULL) abort();
    config = malloc(1 << 16);
    config_len = fread(config, 1, 1 << 16, f);
    fclose(f);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    if (size < 1) return 0;
    char p[128];
    snprintf(p, sizeof(p), "%s/tokenizer_config.json", dir);
    if (data[0] & 1) write_file(p, config, config_len);
    else unlink(p);
    snprintf(p, sizeof(p), "%s/tokenizer.json", dir);
    write_file(p, data + 1, size - 1);
    struct mg_hf_vocab * v = mg_hf_vocab_load(dir);
    if (v == NULL) {
        FUZZ_CHECK(strstr(mg_last_error(), dir) != NULL, "error '%s' does not name the file", mg_last_error());
        return 0;
    }
    struct mg_gguf_writer * w = mg_gguf_writer_new();
    mg_hf_vocab_add_to_gguf(v, w, "qwen2");
    mg_gguf_writer_free(w);
    mg_hf_vocab_free(v);
    return 0;
}
