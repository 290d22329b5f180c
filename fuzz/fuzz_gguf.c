// fuzz_gguf.c - bytes in as a GGUF file: mg_gguf_open reads it or says why,
// and mg_model_load builds a model from it or says why. A model that loads
// also runs: a session of 8 positions decodes one token, whatever its weights.
// Properties: no crash or sanitizer report; a failure always leaves a
// message that names the file; every key and tensor of an opened file can be
// read back (mg gguf's printer) without a crash; no file is left open. A
// vocabulary may lack the token of a byte: tokenizing "hi" then fails with
// the error that names it (tests/fuzz-regressions/gguf/vocab-without-the-byte-h).
#define _GNU_SOURCE   // memfd_create (memfile.h)
#include "fuzz.h"
#include "memfile.h"

#include "gguf.h"
#include "model.h"
#include "sampling.h"
#include "session.h"
#include "vocab.h"

#include <dirent.h>
#include <stdint.h>
#include <string.h>

int LLVMFuzzerInitialize(int * argc, char *** argv) {
    (void) argc;
    (void) argv;
    return 0;
}

static void expect_error_naming(const char * path) {
    const char * e = mg_last_error();
    FUZZ_CHECK(e != NULL && strstr(e, path) != NULL, "error '%s' does not name %s", e ? e : "(null)", path);
}

static void read_everything(const struct mg_gguf * g) {
    char buf[256];
    for (int64_t i = 0; i < mg_gguf_n_kv(g); i++) {
        FUZZ_CHECK(mg_gguf_key(g, i) != NULL, "key %lld", (long long) i);
        mg_gguf_kv_to_string(g, i, buf, sizeof(buf));
    }
    for (int64_t i = 0; i < mg_gguf_n_tensors(g); i++) {
        const struct mg_gguf_tensor_info * t = mg_gguf_tensor(g, i);
        FUZZ_CHECK(t != NULL && mg_gguf_find_tensor(g, t->name) != NULL, "tensor %lld", (long long) i);
        // The data of every tensor lies inside the file (mg_gguf_open's promise).
        const uint8_t * p = t->data;
        if (t->nbytes > 0) {
            volatile uint8_t sum = p[0] ^ p[t->nbytes - 1];
            (void) sum;
        }
    }
}

static void run_model(struct mg_model * m) {
    struct mg_session_params sp = mg_session_default_params();
    sp.n_ctx = 8;
    sp.n_threads = 1;
    struct mg_session * s = mg_session_new(m, sp);
    if (s == NULL) return;   // too big to allocate: an error, not a crash
    int32_t ids[16];
    mg_clear_error();
    const int32_t n = mg_tokenize(m->vocab, "hi", 2, ids, 16, true, false);
    if (n == INT32_MIN) {   // a vocabulary without the token of 'h' or 'i': an error that names the byte (vocab.h)
        const char * e = mg_last_error();
        FUZZ_CHECK(strstr(e, "byte") != NULL, "tokenize 'hi' failed with the message '%s'", e);
        mg_session_free(s);
        return;
    }
    FUZZ_CHECK(n >= 0 && n <= 16, "tokenize 'hi': %d", n);
    if (n > 0 && n < 8) {
        if (mg_decode(s, ids, n, false)) {
            const float * logits = mg_get_logits(s);
            FUZZ_CHECK(logits != NULL, "no logits after a decode");
            const int32_t best = mg_argmax(logits, m->hp.n_vocab);
            FUZZ_CHECK(best >= 0 && best < m->hp.n_vocab, "argmax %d", best);
        }
    }
    mg_session_free(s);
}

// How many files this process has open: a load or a run that fails must
// close what it opened (a leaked descriptor per bad file ends, some
// thousands of files later, in memfd_create failing).
static int open_fds(void) {
    DIR * d = opendir("/proc/self/fd");
    if (d == NULL) return -1;
    int n = 0;
    while (readdir(d) != NULL) n++;
    closedir(d);
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    const int fds_before = open_fds();
    struct memfile f = memfile_new(data, size);
    // No message left over from an earlier input (or from this one's open)
    // may stand in for the message a failure owes.
    mg_clear_error();
    struct mg_gguf * g = mg_gguf_open(f.path);
    if (g == NULL) {
        expect_error_naming(f.path);
    } else {
        read_everything(g);
        mg_gguf_close(g);
        mg_clear_error();
        struct mg_model * m = mg_model_load(f.path);
        if (m == NULL) {
            expect_error_naming(f.path);
        } else {
            run_model(m);
            mg_model_free(m);
        }
    }
    memfile_free(&f);
    const int fds_after = open_fds();
    FUZZ_CHECK(fds_after == fds_before, "%d files open before, %d after", fds_before, fds_after);
    return 0;
}
