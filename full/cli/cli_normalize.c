//@file full
// cli_normalize.c - --normalize nfc: the prompt in Unicode NFC before it is
// tokenized, as a Hugging Face tokenizer with an NFC normalizer (Qwen2, Qwen3)
// sees it. GGUF has no key for the normalizer and llama.cpp skips it, so it
// is off by default (unicode_nfc.h says why it matters: "e" + U+0301 vs "é").
#include "cli.h"
#include "unicode_nfc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool cli_normalize(const char * cmd, const char * mode, char ** text, size_t * len) {
    if (mode == NULL) return true;
    if (strcmp(mode, "nfc") != 0) {
        fprintf(stderr, "mg %s: --normalize '%s': only 'nfc' is supported (canonical composition, as tokenizer.json's "
                        "NFC normalizer)\n", cmd, mg_quote(mode));
        return false;
    }
    if (text == NULL) return true;   // only checking the flag
    size_t n;
    char * normalized = mg_utf8_nfc(*text, *len, &n);
    free(*text);
    *text = normalized;
    *len  = n;
    return true;
}

char * cli_prompt_text_normalized(const char * cmd, const char * prompt, const char * prompt_file,
                                  const char * normalize, size_t * len) {
    char * text = cli_prompt_text(cmd, prompt, prompt_file, len);
    if (text == NULL) return NULL;
    if (!cli_normalize(cmd, normalize, &text, len)) {
        free(text);
        return NULL;
    }
    return text;
}
