// fuzz_cli.c - bytes in as a command line (arguments separated by NUL bytes),
// parsed against mg run's table: its own flags, the engine flags and the
// sampling flags (cli_parse, cli_engine_setup, cli_sampling_setup), without
// running anything. Properties: no crash; a refused line says why on stderr
// (not checked here: the test of each message is in tests/full/test_hostile.c);
// an accepted line gives values that the engine can be given: threads in
// 1..512, a context and batch size >= 0 and >= 1, finite sampling numbers.
#include "fuzz.h"

#include "cli.h"
#include "trace.h"

#include <math.h>
#include <string.h>

int LLVMFuzzerInitialize(int * argc, char *** argv) {
    (void) argc;
    (void) argv;
    return 0;
}

enum { MAX_ARGS = 24 };

int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    if (size > 2048) return 0;
    char * text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0';
    char * argv[MAX_ARGS + 1] = {"run"};
    int argc = 1;
    for (size_t at = 0; at < size && argc < MAX_ARGS; at += strlen(text + at) + 1) {
        argv[argc++] = text + at;
        // --help prints the usage and --help-table the option table, then exit: that is what they are for.
        if (strcmp(text + at, "--help") == 0 || strcmp(text + at, "-h") == 0 || strcmp(text + at, "--help-table") == 0) {
            goto out;
        }
    }
    argv[argc] = NULL;

    struct cli_engine_opts e = cli_engine_defaults();
    struct cli_sampling_opts smp = cli_sampling_defaults();
    const char * prompt = NULL, * prompt_file = NULL;
    int n_predict = 128;
    bool ignore_eos = false;
    struct cli_option opts[32];
    int n_opts = 0;
    opts[n_opts++] = (struct cli_option) {"-p", "--prompt", CLI_STRING, &prompt, "the prompt"};
    opts[n_opts++] = (struct cli_option) {"-f", "--file", CLI_STRING, &prompt_file, "a prompt file"};
    opts[n_opts++] = (struct cli_option) {"-n", "--n-predict", CLI_INT, &n_predict, "tokens"};
    opts[n_opts++] = (struct cli_option) {NULL, "--ignore-eos", CLI_FLAG, &ignore_eos, "no stop"};
    n_opts += cli_engine_options(&e, opts + n_opts);
    n_opts += cli_sampling_options(&smp, opts + n_opts);
    const char * positional[1];
    int n_positional;
    if (cli_parse(argc, argv, "usage", opts, n_opts, positional, 0, &n_positional) &&
        cli_engine_setup("run", &e) && cli_sampling_setup("run", &smp)) {
        FUZZ_CHECK(e.n_threads >= 1 && e.n_threads <= 512, "threads %d", e.n_threads);
        FUZZ_CHECK(e.n_ctx >= 0 && e.n_batch >= 1, "ctx %d batch %d", e.n_ctx, e.n_batch);
        FUZZ_CHECK(isfinite(smp.p.temp) && isfinite(smp.p.top_p) && isfinite(smp.p.min_p) &&
                   isfinite(smp.p.repeat_penalty), "a sampling number that is not finite");
        struct mg_session_params sp = cli_session_params(&e);
        FUZZ_CHECK(sp.n_ctx == e.n_ctx, "n_ctx");
    }
    mg_trace_set("");   // --trace changes a global: back to nothing for the next input
out:
    free(text);
    return 0;
}
