//@file full
// main.c - mg: one binary, one command per job (like git).
#define _POSIX_C_SOURCE 200809L   // fcntl, open
#include "backend.h"
#include "cli.h"
#include "cpu_level.h"
#include "outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const struct {
    const char * name;
    int (*run)(int argc, char ** argv);
    const char * help;
} commands[] = {
    {"run",      cmd_run,      "complete a prompt, streaming the text, then print timings"},
    {"chat",     cmd_chat,     "talk to a chat model (Qwen3 / MiniMind chat template), turn by turn"},
    {"info",     cmd_info,     "the metadata and tensor table of a GGUF file"},
    {"tokenize", cmd_tokenize, "text to token ids (one per line, or JSON)"},
    {"logits",   cmd_logits,   "evaluate a prompt and write its logits (float32, little-endian) + the top-k"},
    {"mkmodel",  cmd_mkmodel,  "write a GGUF with random weights (presets tiny, minimind) and the MiniMind vocab"},
    {"quantize", cmd_quantize, "convert a GGUF's weights to another type (Q8_0, Q4_K_M, ...)"},
    {"bench",    cmd_bench,    "tokens per second for prompt processing and generation, like llama-bench"},
    {"batched-bench", cmd_batched_bench, "N sequences decoded in one batch: llama-batched-bench's table"},
    {"parallel", cmd_parallel, "complete several prompts at once, one batch per step"},
    {"perplexity", cmd_perplexity, "perplexity of a text, and KL divergence from a base model, like llama-perplexity"},
};
enum { N_COMMANDS = sizeof(commands) / sizeof(commands[0]) };

static void usage(FILE * f) {
    fprintf(f, "usage: mg COMMAND [options]     (mg COMMAND --help for its options; mg --version; mg --list-devices)\n\ncommands:\n");
    for (int i = 0; i < N_COMMANDS; i++) fprintf(f, "  %-13s %s\n", commands[i].name, commands[i].help);
}

// The instruction-set level the kernels were compiled for (cpu_level.h) and
// their features: which golden set the tests compare with.
static int print_version(void) {
    printf("mg (minigml): level %s, compiled with", mg_cpu_level());
    const uint32_t features = mg_cpu_features_kernels | mg_cpu_features_engine;
    for (uint32_t bit = 1; bit != 0 && bit <= features; bit <<= 1) {
        if (features & bit) printf(" %s", mg_cpu_feature_name(bit));
    }
    printf(features == 0 ? " the baseline only\n" : "\n");
    return 0;
}

// The devices of the registry (backend.h), in llama.cpp's words and format
// (common_print_available_devices): GPU devices only, since the CPU is
// always there; "(none)" for a build that has only the CPU.
static int print_devices(void) {
    const size_t mib = 1024 * 1024;
    printf("Available devices:\n");
    int n_listed = 0;
    for (size_t i = 0; i < mg_backend_dev_count(); i++) {
        mg_backend_dev_t dev = mg_backend_dev_get(i);
        if (mg_backend_dev_type(dev) == MG_BACKEND_DEVICE_TYPE_CPU) continue;
        size_t free_bytes = 0, total = 0;
        mg_backend_dev_memory(dev, &free_bytes, &total);
        printf("  %s: %s (%zu MiB, %zu MiB free)\n", mg_backend_dev_name(dev), mg_backend_dev_description(dev),
               total / mib, free_bytes / mib);
        n_listed++;
    }
    if (n_listed == 0) printf("  (none)\n");
#ifdef MG_VULKAN
    mg_backend_dev_count();   // enumerated by now; say what Vulkan found when it found nothing
    if (n_listed == 0) fprintf(stderr, "mg: Vulkan: %s\n", mg_backend_vulkan_status());
#endif
    return 0;
}

// A command's status, made a failure when what it printed did not all reach
// stdout (a full disk, /dev/full, a closed pipe): rc 0 with a cut-off file
// would read as success.
static int stdout_written(const char * cmd, int status) {
    if (fflush(stdout) == 0 && !ferror(stdout)) return status;
    fprintf(stderr, "mg %s: cannot write the standard output: %s\n", cmd, strerror(errno));
    return 1;
}

// A standard descriptor the caller closed (mg ... 2>&-) is the number the
// next open() returns: an output file (the --dump-tensors order, a drawing)
// then received what mg prints to stderr or stdout, with exit status 0.
// Each closed one is taken by /dev/null opened the wrong way round (0 for
// writing, 1 and 2 for reading), so that no file gets its number and every
// read or write on it still fails (EBADF) as on a closed descriptor.
static void hold_standard_descriptors(void) {
    for (int fd = 0; fd <= 2; fd++) {   // ascending: the lower ones are open, so open() returns fd itself
        if (fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
        const int got = open("/dev/null", fd == 0 ? O_WRONLY : O_RDONLY);
        if (got > fd) {
            dup2(got, fd);
            close(got);
        }
    }
}

int main(int argc, char ** argv) {
    hold_standard_descriptors();
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 1 : 0;
    }
    const bool bare_flag = strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "--list-devices") == 0;
    if (bare_flag && argc > 2) {   // "mg --version extra": the extra word would be ignored without a word
        fprintf(stderr, "mg %s takes nothing after it, got '%s'\n", argv[1], mg_quote(argv[2]));
        return 1;
    }
    if (strcmp(argv[1], "--version") == 0) return print_version();
    if (strcmp(argv[1], "--list-devices") == 0) return print_devices();
    mg_outfile_remove_on_signal();   // Ctrl-C or kill mid-write: no temporary file left behind
    for (int i = 0; i < N_COMMANDS; i++) {
        if (strcmp(argv[1], commands[i].name) == 0) return stdout_written(argv[1], commands[i].run(argc - 1, argv + 1));
    }
    fprintf(stderr, "mg: unknown command '%s'\n\n", mg_quote(argv[1]));
    usage(stderr);
    return 1;
}
