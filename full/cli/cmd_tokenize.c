//@file full
// cmd_tokenize.c - mg tokenize: the ids a prompt becomes.
#include "cli.h"
#include "gguf.h"
#include "vocab.h"

#include <stdio.h>
#include <stdlib.h>

static const char * usage =
    "usage: mg tokenize -m MODEL.gguf (-p TEXT | -f FILE) [--json] [--pieces] [--no-special] [--no-bos]\n"
    "\n"
    "Prints one token id per line (with --pieces, also its text), or a JSON array with --json.\n"
    "As llama-tokenize: special tokens in the text are parsed unless --no-special, and BOS is added\n"
    "where the vocabulary asks for it unless --no-bos.\n"
    "Only the vocabulary is read, so this works for any GGUF with a gpt2-style tokenizer.";

int cmd_tokenize(int argc, char ** argv) {
    const char * cmd = "tokenize";
    const char * model = NULL, * prompt = NULL, * prompt_file = NULL, * normalize = NULL;
    bool json = false, pieces = false, no_special = false, no_bos = false;
    const struct cli_option opts[] = {
        {"-m", "--model", CLI_IN_FILE, &model, "GGUF file whose vocabulary to use"},
        {"-p", "--prompt", CLI_STRING, &prompt, "the text"},
        {"-f", "--file", CLI_IN_FILE, &prompt_file, "read the text from a file"},
        {NULL, "--json", CLI_FLAG, &json, "print a JSON array of ids"},
        {NULL, "--pieces", CLI_FLAG, &pieces, "print each token's text next to its id"},
        {NULL, "--no-special", CLI_FLAG, &no_special, "do not recognise special tokens (<|im_start|>, ...) in the text"},
        {NULL, "--no-bos", CLI_FLAG, &no_bos, "do not add BOS even if the vocabulary asks for it"},
        {NULL, "--normalize", CLI_STRING, &normalize, "nfc: the text in Unicode NFC first (default: as given)"},
    };
    const char * positional[1];
    int n_positional;
    if (!cli_parse(argc, argv, usage, opts, (int) (sizeof(opts) / sizeof(opts[0])), positional, 0, &n_positional)) {
        return 1;
    }
    if (model == NULL) {
        fprintf(stderr, "mg %s: no model: give one with -m FILE.gguf\n", cmd);
        return 1;
    }
    if (!cli_not_both(cmd, json, "--json", pieces, "--pieces")) return 1;   // --json printed ids alone, --pieces ignored
    size_t len;
    char * text = cli_prompt_text_normalized(cmd, prompt, prompt_file, normalize, &len);
    if (text == NULL) return 1;
    struct mg_gguf * g = mg_gguf_open(model);
    struct mg_vocab * vocab = g ? mg_vocab_load(g) : NULL;
    if (vocab == NULL) {
        fprintf(stderr, "mg %s: %s\n", cmd, cli_last_error());
        mg_gguf_close(g);
        free(text);
        return 1;
    }
    int32_t   n   = 0;
    int32_t * ids = cli_tokenize(cmd, vocab, text, len, !no_bos, !no_special, &n);
    if (ids == NULL) {
        free(text);
        mg_vocab_free(vocab);
        mg_gguf_close(g);
        return 1;
    }
    if (json) printf("[");
    for (int32_t i = 0; i < n; i++) {
        if (json) {
            printf("%s%d", i ? ", " : "", ids[i]);
        } else if (pieces) {
            char piece[256];
            const int32_t k = mg_token_to_piece(vocab, ids[i], piece, sizeof(piece), true);
            printf("%6d '", ids[i]);
            cli_print_text(piece, k > 0 ? (size_t) k : 0);
            printf("'\n");
        } else {
            printf("%d\n", ids[i]);
        }
    }
    if (json) printf("]\n");
    free(ids);
    free(text);
    mg_vocab_free(vocab);
    mg_gguf_close(g);
    return 0;
}
