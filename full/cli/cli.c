//@file full
// cli.c - option parsing and the pieces every mg command shares.
#define _XOPEN_SOURCE 700   // realpath
#include "cli.h"
#include "backend.h"
#include "memmap.h"
#include "npy.h"
#include "outfile.h"
#include "vocab.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

// ---------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------

static bool is_text(enum cli_kind k) {   // a const char * value
    return k >= CLI_STRING;
}

static void print_usage(const char * usage, const struct cli_option * opts, int n_opts) {
    printf("%s\n\noptions:\n", usage);
    for (int i = 0; i < n_opts; i++) {
        char names[64];
        snprintf(names, sizeof(names), "%s%s%s%s", opts[i].short_name ? opts[i].short_name : "",
                 opts[i].short_name ? ", " : "    ", opts[i].long_name,
                 opts[i].kind == CLI_FLAG ? "" : is_text(opts[i].kind) ? " S" : " N");
        printf("  %-28s %s\n", names, opts[i].help);
    }
    printf("  %-28s %s\n", "    --help", "this text");
    printf("  %-28s %s\n", "    --help-table", "the options as a table: name, short name, kind (in-file, out-file, ...)");
}

static const char * kind_name(enum cli_kind k) {
    static const char * const names[] = {"flag", "int", "float", "u64", "seed", "string", "in-file", "in-dir",
                                         "out-file", "out-dir"};
    return names[k];
}

// --help-table: the table as data, for tests and scripts (one option a line, tab-separated).
static void print_table(const struct cli_option * opts, int n_opts) {
    for (int i = 0; i < n_opts; i++) {
        printf("%s\t%s\t%s\n", opts[i].long_name, opts[i].short_name ? opts[i].short_name : "-",
               kind_name(opts[i].kind));
    }
}

// The resolved paths of output flags (a symlink's target) live as long as the
// command; kept here so that they stay reachable until exit.
static char * resolved_outputs[32];
static int    n_resolved_outputs = 0;

// Every file the table names, before any work: the inputs remembered first,
// then each output checked against them (outfile.h). False after printing why.
static bool check_files(const char * cmd, const struct cli_option * opts, int n_opts) {
    mg_outfile_clear_inputs();
    for (int i = 0; i < n_opts; i++) {
        const char * v = is_text(opts[i].kind) ? *(const char **) opts[i].value : NULL;
        if (v != NULL && (opts[i].kind == CLI_IN_FILE || opts[i].kind == CLI_IN_DIR)) mg_outfile_input(v);
    }
    for (int i = 0; i < n_opts; i++) {
        const char * v = is_text(opts[i].kind) ? *(const char **) opts[i].value : NULL;
        if (v == NULL) continue;
        if (opts[i].kind == CLI_OUT_DIR && !mg_outfile_check_dir(opts[i].long_name, v)) {
            fprintf(stderr, "mg %s: %s\n", cmd, cli_last_error());
            return false;
        }
        if (opts[i].kind != CLI_OUT_FILE) continue;
        char * target = mg_outfile_check(opts[i].long_name, v);
        if (target == NULL) {
            fprintf(stderr, "mg %s: %s\n", cmd, cli_last_error());
            return false;
        }
        if (strcmp(target, v) == 0 || n_resolved_outputs == 32) {
            free(target);   // (32 symlinked outputs in one command: the link's own path is written, still checked)
        } else {
            resolved_outputs[n_resolved_outputs++] = target;
            *(const char **) opts[i].value = target;
        }
    }
    return true;
}

static const struct cli_option * find_option(const char * arg, const struct cli_option * opts, int n_opts) {
    for (int i = 0; i < n_opts; i++) {
        if ((opts[i].short_name && strcmp(arg, opts[i].short_name) == 0) || strcmp(arg, opts[i].long_name) == 0) {
            return &opts[i];
        }
    }
    return NULL;
}

// Parse one option's value, strictly: "12x" is not a number, "nan" and "inf"
// are not usable numbers, and a whole number beyond the type's range is
// called too large (or too small), with the limit. arg is the flag as typed.
static bool set_value(const char * cmd, const struct cli_option * o, const char * arg, const char * text) {
    char * end = NULL;
    errno = 0;
    // strto* skip leading blanks: " 3" would be taken as 3 where a list flag refuses it.
    const bool numeric = o->kind == CLI_INT || o->kind == CLI_U64 || o->kind == CLI_SEED || o->kind == CLI_FLOAT;
    if (numeric && isspace((unsigned char) text[0])) goto not_a_number;
    if (o->kind == CLI_SEED && strcmp(text, "-1") == 0) {
        *(uint64_t *) o->value = CLI_SEED_RANDOM;
        return true;
    }
    switch (o->kind) {
        case CLI_FLAG:
            *(bool *) o->value = true;
            return true;
        case CLI_IN_FILE:
        case CLI_IN_DIR:
            if (text[0] == '\0') {   // else "mg run: : cannot open", naming nothing
                fprintf(stderr, "mg %s: %s '': an empty name, not a %s\n", cmd, arg,
                        o->kind == CLI_IN_FILE ? "file" : "directory");
                return false;
            }
            *(const char **) o->value = text;
            return true;
        case CLI_STRING:
        case CLI_OUT_FILE:
        case CLI_OUT_DIR:
            *(const char **) o->value = text;
            return true;
        case CLI_INT: {
            const long long v = strtoll(text, &end, 10);
            if (end != text && *end == '\0' && (errno == ERANGE || v < INT_MIN || v > INT_MAX)) {
                const bool big = text[0] != '-';
                fprintf(stderr, "mg %s: %s %s is too %s, at %s %d\n", cmd, arg, mg_quote(text), big ? "large" : "small",
                        big ? "most" : "least", big ? INT_MAX : INT_MIN);
                return false;
            }
            if (errno == 0 && end != text && *end == '\0') {
                *(int *) o->value = (int) v;
                return true;
            }
            break;
        }
        case CLI_SEED:   // -1 (random) is taken before the switch; any other seed is a u64
        case CLI_U64: {
            const unsigned long long v = strtoull(text, &end, 10);
            if (end != text && *end == '\0' && text[0] != '-' && errno == ERANGE) {
                fprintf(stderr, "mg %s: %s %s is too large, at most %llu\n", cmd, arg, mg_quote(text),
                        (unsigned long long) UINT64_MAX);
                return false;
            }
            // 2^64-1 is how -1 is held: taken as a seed, it silently gave a random one.
            if (o->kind == CLI_SEED && errno == 0 && end != text && *end == '\0' && v == CLI_SEED_RANDOM) {
                fprintf(stderr, "mg %s: %s %s is the value that stands for -1 (a random seed): give 0..%llu, or -1\n",
                        cmd, arg, mg_quote(text), (unsigned long long) CLI_SEED_RANDOM - 1);
                return false;
            }
            if (errno == 0 && end != text && *end == '\0' && text[0] != '-') {
                *(uint64_t *) o->value = (uint64_t) v;
                return true;
            }
            break;
        }
        case CLI_FLOAT: {
            const float v = strtof(text, &end);
            if (end != text && *end == '\0' && !isfinite(v)) {
                fprintf(stderr, "mg %s: %s needs a finite number, got '%s'\n", cmd, arg, mg_quote(text));
                return false;
            }
            if (errno == 0 && end != text && *end == '\0') {
                *(float *) o->value = v;
                return true;
            }
            break;
        }
    }
not_a_number:
    fprintf(stderr, "mg %s: %s needs a %s, got '%s'\n", cmd, arg,
            o->kind == CLI_FLOAT  ? "number"
            : o->kind == CLI_SEED ? "whole number >= 0, or -1 (random)"
                                  : "whole number",
            mg_quote(text));
    return false;
}

bool cli_parse(int argc, char ** argv, const char * usage, const struct cli_option * opts, int n_opts,
               const char ** positional, int max_positional, int * n_positional) {
    const char * cmd = argv[0];
    *n_positional = 0;
    for (int i = 1; i < argc; i++) {
        const char * arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            print_usage(usage, opts, n_opts);
            exit(0);
        }
        if (strcmp(arg, "--help-table") == 0) {
            print_table(opts, n_opts);
            exit(0);
        }
        if (arg[0] == '-' && arg[1] != '\0') {
            const struct cli_option * o = find_option(arg, opts, n_opts);
            if (o == NULL) {
                fprintf(stderr, "mg %s: unknown option '%s' (see mg %s --help)\n", cmd, mg_quote(arg), cmd);
                return false;
            }
            if (o->kind != CLI_FLAG && i + 1 >= argc) {
                fprintf(stderr, "mg %s: %s needs a value\n", cmd, arg);
                return false;
            }
            if (!set_value(cmd, o, arg, o->kind == CLI_FLAG ? NULL : argv[++i])) return false;
        } else if (*n_positional < max_positional) {
            positional[(*n_positional)++] = arg;
        } else {
            fprintf(stderr, "mg %s: unexpected argument '%s' (see mg %s --help)\n", cmd, mg_quote(arg), cmd);
            return false;
        }
    }
    return check_files(cmd, opts, n_opts);
}

// ---------------------------------------------------------------------------
// Engine and sampling options
// ---------------------------------------------------------------------------

struct cli_engine_opts cli_engine_defaults(void) {
    const struct mg_session_params p = mg_session_default_params();
    return (struct cli_engine_opts) {
        .model = NULL, .n_threads = p.n_threads, .n_ctx = 0, .n_batch = p.n_batch, .kv_type = "f16", .dot_layers = -1,
    };
}

int cli_engine_options(struct cli_engine_opts * e, struct cli_option * out) {
    const struct cli_option rows[] = {
        {"-m", "--model", CLI_IN_FILE, &e->model, "GGUF model file"},
        {"-t", "--threads", CLI_INT, &e->n_threads, "threads (default: all cores)"},
        {"-c", "--ctx-size", CLI_INT, &e->n_ctx, "context size in tokens (default: min(4096, the model's))"},
        {"-b", "--batch-size", CLI_INT, &e->n_batch, "tokens per graph when reading a prompt (default 512)"},
        {NULL, "--kv-type", CLI_STRING, &e->kv_type, "KV cache type: f16 (default, as llama.cpp) or f32"},
        {"-fa", "--flash-attn", CLI_FLAG, &e->flash_attn, "flash attention: an online softmax over the cache"},
        {NULL, "--no-repack", CLI_FLAG, &e->no_repack, "keep Q4_0/Q4_K/Q2_K weights as in the file (no 8-row repacking)"},
        {NULL, "--no-huge-pages", CLI_FLAG, &e->no_huge_pages, "read the weights from the file's mapping (no copy into huge pages)"},
        {NULL, "--trace", CLI_STRING, &e->trace, "trace categories, e.g. infer,alloc,graph (like MG_TRACE)"},
        {NULL, "--dot", CLI_OUT_DIR, &e->dot, "write Graphviz drawings of the graphs into this directory"},
        {NULL, "--svg", CLI_OUT_DIR, &e->svg, "write the compute buffer's memory maps (SVG) into this directory"},
        {NULL, "--dot-layers", CLI_INT, &e->dot_layers, "with --dot: draw only the first N layers, each in a box"},
        {"-ngl", "--n-gpu-layers", CLI_INT, &e->n_gpu_layers, "layers to put on a GPU device (default 0; needs one: mg --list-devices)"},
        {"-dev", "--device", CLI_STRING, &e->device, "the GPU device for -ngl, by name (mg --list-devices)"},
    };
    const int n = (int) (sizeof(rows) / sizeof(rows[0]));
    memcpy(out, rows, sizeof(rows));
    return n;
}

// The device -ngl offloads to: -dev's, else the first that is not the CPU
// (the registry lists GPUs first, as llama.cpp uses them), or NULL.
static mg_backend_dev_t cli_gpu_device(const struct cli_engine_opts * e) {
    if (e->device != NULL) return mg_backend_dev_by_name(e->device);
    for (size_t i = 0; i < mg_backend_dev_count(); i++) {
        if (mg_backend_dev_type(mg_backend_dev_get(i)) != MG_BACKEND_DEVICE_TYPE_CPU) return mg_backend_dev_get(i);
    }
    return NULL;
}

// -ngl and -dev, checked against the registry (backend.h). With no GPU
// device in this build, -ngl N > 0 says so rather than running on the CPU
// in silence (llama.cpp ignores it with a warning).
static bool cli_devices_setup(const char * cmd, const struct cli_engine_opts * e) {
    if (e->n_gpu_layers < 0) {
        fprintf(stderr, "mg %s: -ngl must be 0 or more, got %d\n", cmd, e->n_gpu_layers);
        return false;
    }
    mg_backend_dev_t dev = NULL;
    if (e->device != NULL) {
        if ((dev = mg_backend_dev_by_name(e->device)) == NULL) {
            fprintf(stderr, "mg %s: -dev %s: %s (mg --list-devices)\n", cmd, mg_quote(e->device), cli_last_error());
            return false;
        }
        if (mg_backend_dev_type(dev) == MG_BACKEND_DEVICE_TYPE_CPU) {
            fprintf(stderr, "mg %s: -dev %s: the CPU runs whatever no device takes; -dev names a GPU device "
                    "(mg --list-devices)\n", cmd, mg_quote(e->device));
            return false;
        }
    }
    if (e->n_gpu_layers == 0 && dev == NULL) return true;
    bool have_gpu = false;
    for (size_t i = 0; i < mg_backend_dev_count(); i++) {
        have_gpu |= mg_backend_dev_type(mg_backend_dev_get(i)) != MG_BACKEND_DEVICE_TYPE_CPU;
    }
    if (!have_gpu) {
        fprintf(stderr, "mg %s: -ngl %d: this mg has no GPU device, only the CPU (mg --list-devices; make "
                "VULKAN=1 builds one with the Vulkan backend)\n", cmd, e->n_gpu_layers);
        return false;
    }
    return true;
}

// The parameters whose names library errors carry, and the flag that sets each.
static const struct {
    const char * param, * flag;
} param_flags[] = {{"n_ctx", "-c"}, {"n_gpu_layers", "-ngl"}, {"cb_eval", "--dump-tensors"}, {"n_threads", "--threads"},
                   {"allow_requantize", "--allow-requantize"}};

// The flag for the parameter named at p, or NULL. Only a word of the
// message's prose counts (after a space or '(' and before a space or one of
// ");,"), never a part of a file name such as n_ctx.gguf.
static const char * flag_at(const char * text, const char * p, size_t * len) {
    if (p > text && p[-1] != ' ' && p[-1] != '(') return NULL;
    for (size_t i = 0; i < sizeof(param_flags) / sizeof(param_flags[0]); i++) {
        *len = strlen(param_flags[i].param);
        if (strncmp(p, param_flags[i].param, *len) == 0 && strchr(" );,", p[*len]) != NULL) return param_flags[i].flag;
    }
    return NULL;
}

const char * cli_last_error(void) {
    static char text[2048];
    const char * msg = mg_last_error();
    size_t       n   = 0;
    for (const char * p = msg; *p != '\0' && n + 1 < sizeof(text);) {
        size_t       len  = 0;
        const char * flag = flag_at(msg, p, &len);
        if (flag != NULL && n + strlen(flag) + 1 < sizeof(text)) {
            memcpy(text + n, flag, strlen(flag));
            n += strlen(flag);
            p += len;
        } else {
            text[n++] = *p++;
        }
    }
    text[n] = '\0';
    return text;
}

bool cli_engine_setup(const char * cmd, const struct cli_engine_opts * e) {
    if (e->model == NULL) {
        fprintf(stderr, "mg %s: no model: give one with -m FILE.gguf\n", cmd);
        return false;
    }
    if (e->n_threads < 1 || e->n_threads > 512) {
        fprintf(stderr, "mg %s: --threads must be 1..512, got %d\n", cmd, e->n_threads);
        return false;
    }
    if (e->n_ctx < 0 || e->n_batch < 1) {
        fprintf(stderr, "mg %s: --ctx-size must be >= 0 and --batch-size >= 1\n", cmd);
        return false;
    }
    if (strcmp(e->kv_type, "f16") != 0 && strcmp(e->kv_type, "f32") != 0) {
        fprintf(stderr, "mg %s: --kv-type must be f16 or f32, got '%s'\n", cmd, mg_quote(e->kv_type));
        return false;
    }
    if (!cli_devices_setup(cmd, e)) return false;
    if (e->trace != NULL && strspn(e->trace, ",") == strlen(e->trace)) {   // MG_TRACE="" is off; a flag typed means on
        fprintf(stderr, "mg %s: --trace '%s' names no category (e.g. --trace infer,alloc; all for every one)\n", cmd,
                mg_quote(e->trace));
        return false;
    }
    if (e->trace != NULL && !mg_trace_set(e->trace)) {
        fprintf(stderr, "mg %s: --trace: %s\n", cmd, cli_last_error());
        return false;
    }
    // A drawing flag given to a command that draws nothing would be a silent result.
    if (!e->draws && (e->dot != NULL || e->svg != NULL || e->dot_layers >= 0)) {
        fprintf(stderr, "mg %s: %s: this command draws no graphs (mg run does)\n", cmd,
                e->dot != NULL ? "--dot" : e->svg != NULL ? "--svg" : "--dot-layers");
        return false;
    }
    if (e->svg != NULL && e->n_gpu_layers > 0) {   // refused before any work, not a missing file after the run
        fprintf(stderr, "mg %s: --svg with -ngl %d: the memory map of a graph the scheduler runs is not drawn yet "
                        "(--dot draws its splits; drop -ngl for the memory map)\n", cmd, e->n_gpu_layers);
        return false;
    }
    if (e->dot_layers < -1 || (e->dot_layers >= 0 && e->dot == NULL)) {   // -1: not given
        fprintf(stderr, "mg %s: --dot-layers %d: %s\n", cmd, e->dot_layers,
                e->dot_layers < -1 ? "the number of layers must be >= 0" : "it draws with --dot DIR: give that too");
        return false;
    }
    return true;
}

struct mg_session_params cli_session_params(const struct cli_engine_opts * e) {
    struct mg_session_params p = mg_session_default_params();
    p.n_ctx      = e->n_ctx;
    p.n_batch    = e->n_batch;
    p.n_threads  = e->n_threads;
    p.kv_type    = strcmp(e->kv_type, "f32") == 0 ? MG_TYPE_F32 : MG_TYPE_F16;
    p.flash_attn = e->flash_attn;
    p.n_gpu_layers = e->n_gpu_layers;
    p.gpu_device   = e->n_gpu_layers > 0 ? cli_gpu_device(e) : NULL;
    p.dot_dir      = e->dot;
    p.dot_layers   = e->dot_layers;
    p.svg_dir      = e->svg;
    return p;
}

struct mg_model * cli_load_model(const char * cmd, const char * path, bool repack, bool huge_pages, double * load_ms) {
    const double           t0 = mg_time_ms();
    struct mg_model_params p  = mg_model_default_params();
    p.repack                  = repack;
    p.huge_pages              = huge_pages;
    struct mg_model * m = mg_model_load_from_file(path, p);
    if (m == NULL) {
        fprintf(stderr, "mg %s: %s\n", cmd, cli_last_error());
        return NULL;
    }
    if (load_ms) *load_ms = mg_time_ms() - t0;
    return m;
}

struct cli_sampling_opts cli_sampling_defaults(void) {
    struct cli_sampling_opts s = {.p = mg_sampler_default_params()};
    s.p.seed = (uint64_t) time(NULL);
    return s;
}

int cli_sampling_options(struct cli_sampling_opts * s, struct cli_option * out) {
    const struct cli_option rows[] = {
        {NULL, "--temp", CLI_FLOAT, &s->p.temp, "temperature (default 0.8; 0 = greedy)"},
        {NULL, "--top-k", CLI_INT, &s->p.top_k, "keep the k most likely tokens (default 40; 0 = off)"},
        {NULL, "--top-p", CLI_FLOAT, &s->p.top_p, "keep the likeliest tokens up to this probability (0.95)"},
        {NULL, "--min-p", CLI_FLOAT, &s->p.min_p, "drop tokens below this fraction of the best one (0.05)"},
        {NULL, "--repeat-penalty", CLI_FLOAT, &s->p.repeat_penalty, "penalise recent tokens (default 1 = off)"},
        {NULL, "--repeat-last-n", CLI_INT, &s->p.repeat_last_n, "how many recent tokens it looks at (64)"},
        {"-s", "--seed", CLI_SEED, &s->p.seed, "random seed (default: from the clock; -1: a random one, printed)"},
    };
    memcpy(out, rows, sizeof(rows));
    return (int) (sizeof(rows) / sizeof(rows[0]));
}

// Each flag checked on its own, so the message names it. Not-a-number and
// infinities never get here (set_value refuses them). A temperature of 0 is
// greedy decoding; llama.cpp also treats a negative one as greedy, but here a
// negative temperature is refused as a likely typo: 0 says greedy.
bool cli_parse_engine_command(const char * cmd, int argc, char ** argv, const char * usage, struct cli_option * opts,
                              int n_opts, struct cli_engine_opts * e, struct cli_sampling_opts * smp) {
    n_opts += cli_engine_options(e, opts + n_opts);
    if (smp != NULL) n_opts += cli_sampling_options(smp, opts + n_opts);
    const char * positional[1];
    int          n_positional;
    if (!cli_parse(argc, argv, usage, opts, n_opts, positional, 0, &n_positional)) return false;
    return cli_engine_setup(cmd, e) && (smp == NULL || cli_sampling_setup(cmd, smp));
}

bool cli_not_both(const char * cmd, bool a, const char * a_flag, bool b, const char * b_flag) {
    if (!(a && b)) return true;
    fprintf(stderr, "mg %s: %s and %s contradict each other\n", cmd, a_flag, b_flag);
    return false;
}

// A seed for --seed -1: from the kernel's random source, else from the clock
// and the process id. 32 bits, as llama.cpp's seeds, so it is short to type
// back; never CLI_SEED_RANDOM itself.
static uint64_t random_seed(void) {
    uint32_t seed = 0;
    if (getrandom(&seed, sizeof(seed), 0) != (ssize_t) sizeof(seed)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        seed = (uint32_t) ts.tv_nsec ^ (uint32_t) ts.tv_sec ^ ((uint32_t) getpid() << 16);
    }
    return seed;
}

bool cli_sampling_setup(const char * cmd, struct cli_sampling_opts * s) {
    if (s->p.seed == CLI_SEED_RANDOM) {
        s->p.seed = random_seed();
        fprintf(stderr, "mg %s: --seed -1: the seed is %llu (--seed %llu repeats this run)\n", cmd,
                (unsigned long long) s->p.seed, (unsigned long long) s->p.seed);
    }
    const struct mg_sampler_params * p = &s->p;
    const char * why = NULL;
    char value[64] = "";
    if (!(p->temp >= 0.0f) || !isfinite(p->temp)) {
        why = "--temp must be >= 0 (0 = greedy)";
        snprintf(value, sizeof(value), "%g", (double) p->temp);
    } else if (!(p->top_p > 0.0f && p->top_p <= 1.0f)) {
        why = "--top-p must be in (0, 1] (1 = off)";
        snprintf(value, sizeof(value), "%g", (double) p->top_p);
    } else if (!(p->min_p >= 0.0f && p->min_p < 1.0f)) {
        why = "--min-p must be in [0, 1) (0 = off)";
        snprintf(value, sizeof(value), "%g", (double) p->min_p);
    } else if (!(p->repeat_penalty > 0.0f) || !isfinite(p->repeat_penalty)) {
        why = "--repeat-penalty must be a finite number > 0 (1 = off)";
        snprintf(value, sizeof(value), "%g", (double) p->repeat_penalty);
    } else if (p->repeat_last_n < 0) {
        why = "--repeat-last-n must be >= 0";
        snprintf(value, sizeof(value), "%d", p->repeat_last_n);
    } else if (p->top_k < 0) {
        why = "--top-k must be >= 0 (0 = off)";
        snprintf(value, sizeof(value), "%d", p->top_k);
    }
    if (why != NULL) {
        fprintf(stderr, "mg %s: %s, got %s\n", cmd, why, value);
        return false;
    }
    return true;
}

// ---------------------------------------------------------------------------
// Small things
// ---------------------------------------------------------------------------

bool cli_parse_type(const char * name, enum mg_type * out) {
    for (int id = 0; id < MG_TYPE_COUNT; id++) {
        if (mg_type_is_supported(id) && strcasecmp(name, mg_type_name((enum mg_type) id)) == 0) {
            *out = (enum mg_type) id;
            return true;
        }
    }
    return false;
}

enum { FIFO_WAIT_S = 10 };   // how long a FIFO nobody has opened for writing is waited for

// A FIFO opened without blocking (fd): false, after saying so, if nobody
// opens it for writing within FIFO_WAIT_S seconds. A writer already there
// (a read would block: EAGAIN) is waited for as long as it takes, as any
// pipe; a first byte already read is handed back in *first (-1 if none).
static bool fifo_has_writer(const char * cmd, const char * path, int fd, int * first) {
    unsigned char c;
    ssize_t n;
    do n = read(fd, &c, 1);   // no writer: 0 at once (EOF); a writer, nothing written yet: EAGAIN
    while (n < 0 && errno == EINTR);
    *first = n == 1 ? c : -1;
    if (n < 0 && errno != EAGAIN) {
        fprintf(stderr, "mg %s: cannot read %s: %s\n", cmd, mg_quote(path), strerror(errno));
        return false;
    }
    if (n != 0) return true;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int ready;
    do ready = poll(&p, 1, FIFO_WAIT_S * 1000);   // a signal restarts the wait (a rare, longer wait is fine)
    while (ready < 0 && errno == EINTR);
    if (ready > 0) return true;   // data, or a writer that came and left (EOF)
    fprintf(stderr, "mg %s: %s is a FIFO that nobody opened for writing within %d s\n", cmd, mg_quote(path),
            FIFO_WAIT_S);
    return false;
}

// The message for a failed open, fstat, fcntl or fdopen of path (errno says
// which), and fd closed if it was opened.
static FILE * input_error(const char * cmd, const char * path, int fd) {
    fprintf(stderr, "mg %s: cannot read %s: %s\n", cmd, mg_quote(path), strerror(errno));
    if (fd >= 0) close(fd);
    return NULL;
}

// path opened for reading. A FIFO nobody writes blocked open() forever: the
// open does not wait, and fifo_has_writer waits a bounded time instead;
// then reads block again, as on any pipe (mg run -f <(cmd) works).
static FILE * open_text_input(const char * cmd, const char * path) {
    const int fd = open(path, O_RDONLY | O_NONBLOCK);
    struct stat st;
    int first = -1;
    if (fd < 0 || fstat(fd, &st) != 0) return input_error(cmd, path, fd);
    if (S_ISFIFO(st.st_mode) && !fifo_has_writer(cmd, path, fd, &first)) {   // it said why
        close(fd);
        return NULL;
    }
    if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) return input_error(cmd, path, fd);
    FILE * f = fdopen(fd, "rb");
    if (f == NULL) return input_error(cmd, path, fd);
    if (first >= 0) ungetc(first, f);
    return f;
}

char * cli_read_file(const char * cmd, const char * path, size_t * len) {
    FILE * f = open_text_input(cmd, path);
    if (f == NULL) return NULL;
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {   // fopen opens a directory; reading it fails
        fprintf(stderr, "mg %s: %s is a directory, not a file\n", cmd, mg_quote(path));
        fclose(f);
        return NULL;
    }
    // At most what cli_tokenize takes: /dev/zero or a runaway pipe ends with a message, not out of memory.
    const size_t max = (size_t) INT32_MAX / 4;
    // A regular file's buffer is its size (and one byte to see it grew): the
    // doubling that a pipe needs would hold up to twice the text.
    size_t cap = 4096, n = 0;
    if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && (uint64_t) st.st_size < max) cap = (size_t) st.st_size + 2;
    char * buf = malloc(cap);
    for (size_t got; buf != NULL && (got = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
        n += got;
        if (n > max) {
            fprintf(stderr, "mg %s: %s is larger than %zu bytes, the most a prompt can be\n", cmd, mg_quote(path), max);
            free(buf);
            fclose(f);
            return NULL;
        }
        if (n + 1 == cap) {
            char * bigger = realloc(buf, cap *= 2);
            if (bigger == NULL) free(buf);
            buf = bigger;
        }
    }
    const int read_error = ferror(f) ? errno : 0;
    fclose(f);
    if (buf == NULL || read_error != 0) {
        if (read_error != 0) fprintf(stderr, "mg %s: cannot read %s: %s\n", cmd, mg_quote(path), strerror(read_error));
        else fprintf(stderr, "mg %s: %s is too big to read\n", cmd, mg_quote(path));
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

char * cli_prompt_text(const char * cmd, const char * prompt, const char * prompt_file, size_t * len) {
    if ((prompt == NULL) == (prompt_file == NULL)) {
        fprintf(stderr, "mg %s: give the prompt with either -p TEXT or -f FILE\n", cmd);
        return NULL;
    }
    if (prompt_file != NULL) {
        char * text = cli_read_file(cmd, prompt_file, len);
        if (text != NULL && !cli_tokenize_fits(cmd, mg_quote(prompt_file), *len)) {   // said with the file's name
            free(text);
            return NULL;
        }
        return text;
    }
    *len = strlen(prompt);
    return strdup(prompt);
}

static bool stdout_is_tty(void) {
    static int tty = -1;   // asked once: stdout does not change under a running command
    if (tty < 0) tty = isatty(STDOUT_FILENO);
    return tty == 1;
}

void cli_print_text(const char * text, size_t len) {
    if (!stdout_is_tty()) {
        fwrite(text, 1, len, stdout);
        return;
    }
    for (size_t i = 0; i < len;) {
        const unsigned char c = (unsigned char) text[i];
        if (c < 0x80) {
            if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7F) printf("\\x%02x", c);
            else putchar(c);
            i++;
            continue;
        }
        // A whole UTF-8 character goes as it is, but for the C1 controls; a
        // byte that starts none (a piece cut mid-character, a lone 0x9B:
        // CSI to a terminal in 8-bit mode) is \xHH.
        const size_t n = c >= 0xF5 ? 0 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;   // 80..C1, F5..FF start none
        size_t k = 1;
        while (n > 0 && k < n && i + k < len && ((unsigned char) text[i + k] & 0xC0) == 0x80) k++;
        if (n == 0 || k < n) {
            printf("\\x%02x", c);
            i++;
        } else if (c == 0xC2 && (unsigned char) text[i + 1] <= 0x9F) {
            printf("\\u%04x", (unsigned char) text[i + 1]);   // U+0080..U+009F
            i += 2;
        } else {
            fwrite(text + i, 1, n, stdout);
            i += n;
        }
    }
}

void cli_stream_token(struct mg_detok * d, const struct mg_vocab * vocab, int32_t token) {
    char buf[256];
    const int32_t n = mg_detok_push(d, vocab, token, buf, sizeof(buf));
    if (n > 0) {
        cli_print_text(buf, (size_t) n);
        fflush(stdout);
    }
}

// At the end of a generation, what mg_detok still holds back is the start of
// a character the model never finished (it holds back nothing else). Printing
// it would end the text on a broken character (a terminal shows U+FFFD); say
// on stderr that the text was cut instead, and drop the bytes.
void cli_stream_flush(struct mg_detok * d) {
    char buf[16];
    const int32_t n = mg_detok_flush(d, buf, sizeof(buf));
    if (n > 0) {
        char hex[3 * 4 + 1] = "";
        for (int32_t i = 0, len = 0; i < n && i < 4; i++) {
            len += snprintf(hex + len, sizeof(hex) - (size_t) len, "%s%02x", i ? " " : "", (unsigned) (uint8_t) buf[i]);
        }
        fflush(stdout);
        fprintf(stderr, "\n[the text was cut mid-character: the %d byte%s %s of an unfinished UTF-8 character "
                        "are not printed]\n", n, n == 1 ? "" : "s", hex);
    }
    fflush(stdout);
}

void cli_print_timings(const struct mg_session * s, double load_ms, int n_prompt, double prompt_ms, int n_eval,
                       double eval_ms) {
    const struct mg_session_stats st = mg_session_get_stats(s);
    fprintf(stderr, "\nmg: load time        = %9.2f ms\n", load_ms);
    fprintf(stderr, "mg: prompt eval time = %9.2f ms / %5d tokens (%8.2f ms per token, %8.2f tokens per second)\n",
            prompt_ms, n_prompt, n_prompt ? prompt_ms / n_prompt : 0.0, prompt_ms > 0 ? 1e3 * n_prompt / prompt_ms : 0.0);
    fprintf(stderr, "mg:        eval time = %9.2f ms / %5d runs   (%8.2f ms per token, %8.2f tokens per second)\n",
            eval_ms, n_eval, n_eval ? eval_ms / n_eval : 0.0, eval_ms > 0 ? 1e3 * n_eval / eval_ms : 0.0);
    fprintf(stderr, "mg: graphs           = %9d built, %d reused (%d nodes in the last)\n", st.n_graphs_built,
            st.n_graphs_reused, st.n_nodes);
    fprintf(stderr, "mg: memory           = %9.2f MiB compute buffer (peak), %.2f MiB work buffer, %.2f MiB KV cache\n",
            mg_mib(st.compute_buffer_size), mg_mib(st.work_size), mg_mib(st.kv_size));
    fprintf(stderr, "mg: weights          = %9.2f MiB mapped from %s\n", mg_mib(mg_session_model(s)->n_weight_bytes),
            mg_quote(mg_session_model(s)->path));
    const struct mg_model * m = mg_session_model(s);
    fprintf(stderr, "mg: repacked         = %9.2f MiB: %d Q4_0/Q4_K/Q2_K matrices in groups of 8 rows (%s)\n",
            mg_mib(m->n_repacked_bytes), m->n_repacked, m->n_repacked > 0 ? "--no-repack to compare" : "off or none");
    fprintf(stderr, "mg: huge pages       = %9.2f MiB of the weights copied into memory backed by 2 MiB pages (%s)\n",
            mg_mib(m->n_huge_page_bytes), m->n_huge_page_bytes > 0 ? "--no-huge-pages to compare" : "off or unavailable");
}

bool cli_race_options(const char * cmd, const char * rival_flag, const char * rival, int max_rounds, int * rounds,
                      float * rival_timeout) {
    const bool rounds_given = *rounds != CLI_ROUNDS_UNSET, timeout_given = !isnan(*rival_timeout);
    if (rounds_given && (*rounds < 1 || *rounds > max_rounds)) {
        fprintf(stderr, "mg %s: --rounds %d: must be in 1..%d\n", cmd, *rounds, max_rounds);
        return false;
    }
    if (timeout_given && !(*rival_timeout > 0.0f)) {
        fprintf(stderr, "mg %s: --rival-timeout must be > 0 seconds, got %g\n", cmd, (double) *rival_timeout);
        return false;
    }
    if (rival == NULL && (rounds_given || timeout_given)) {
        if (rounds_given) fprintf(stderr, "mg %s: --rounds %d", cmd, *rounds);
        else fprintf(stderr, "mg %s: --rival-timeout %g", cmd, (double) *rival_timeout);
        fprintf(stderr, ": it says how to race a rival: give %s PATH too\n", rival_flag);
        return false;
    }
    if (!rounds_given) *rounds = 3;
    if (!timeout_given) *rival_timeout = (float) CLI_RIVAL_TIMEOUT_S;
    return true;
}

// ---------------------------------------------------------------------------
// Tokenizing and sessions, with the checks every command needs
// ---------------------------------------------------------------------------

// The most the tokenizer holds per byte of text, all at once: the text
// itself (1), its code points (4, in an array grown by doubling: 8), the
// pre-tokenizer's pieces (at most one per code point, 4 bytes each,
// doubling: 8) and the ids (up to 3 per byte, U+FFFD's byte tokens for an
// invalid byte, 4 bytes each, doubling: 24). Random bytes come to 14 bytes of
// peak RSS per byte, English text to 8; the limit is checked against this
// bound, so that running out of memory mid-tokenization (an abort) cannot
// happen below the limit.
enum { TOKENIZE_BYTES_PER_BYTE = 41 };

bool cli_tokenize_fits(const char * cmd, const char * name, size_t len) {
    const char *   what;
    const uint64_t limit = mg_memory_limit(&what);
    const uint64_t need  = (uint64_t) len * TOKENIZE_BYTES_PER_BYTE + (1u << 20);
    if (need <= limit) return true;
    fprintf(stderr, "mg %s: %s is %zu bytes: tokenizing it may need up to %llu bytes, more than %s, %llu bytes\n",
            cmd, name, len, (unsigned long long) need, what, (unsigned long long) limit);
    return false;
}

// mg_tokenize_alloc, with the length and the memory it needs checked first.
// NULL after printing why.
int32_t * cli_tokenize(const char * cmd, const struct mg_vocab * vocab, const char * text, size_t len,
                       bool add_special, bool parse_special, int32_t * n_tokens) {
    if (len > (size_t) INT32_MAX / 4) {
        fprintf(stderr, "mg %s: the text is %zu bytes; at most %d can be tokenized\n", cmd, len, INT32_MAX / 4);
        return NULL;
    }
    if (!cli_tokenize_fits(cmd, "the text", len)) return NULL;
    int32_t * ids = mg_tokenize_alloc(vocab, text, len, add_special, parse_special, n_tokens);
    if (ids == NULL) fprintf(stderr, "mg %s: cannot tokenize the text (%zu bytes): %s\n", cmd, len, cli_last_error());
    return ids;
}

// mg_session_new, with llama.cpp's warning when -c goes beyond the context
// the model was trained with (llama_context: "possible training context overflow").
struct mg_session * cli_session_new(const char * cmd, struct mg_model * m, const struct cli_engine_opts * e) {
    return cli_session_new_dumping(cmd, m, e, NULL, NULL);
}

struct mg_session * cli_session_new_dumping(const char * cmd, struct mg_model * m, const struct cli_engine_opts * e,
                                            const char * dump_dir, struct mg_npy_dumper * dumper) {
    struct mg_session_params p = cli_session_params(e);
    if (dump_dir != NULL) {   // --dump-tensors: every node's result through the eval callback (npy.h)
        if (!mg_npy_dumper_open(dumper, dump_dir)) {
            fprintf(stderr, "mg %s: %s\n", cmd, cli_last_error());
            return NULL;
        }
        p.cb_eval           = mg_npy_dump_node;
        p.cb_eval_user_data = dumper;
    }
    if (p.n_ctx > m->hp.n_ctx_train) {
        fprintf(stderr, "mg %s: warning: -c %d is larger than the context the model was trained with (%d): "
                        "possible training context overflow\n", cmd, p.n_ctx, m->hp.n_ctx_train);
    }
    struct mg_session * s = mg_session_new(m, p);
    if (s == NULL) fprintf(stderr, "mg %s: %s\n", cmd, cli_last_error());
    return s;
}

// "1,2,4" -> {1, 2, 4}: the comma lists of mg bench and mg batched-bench, as
// llama-bench takes them. Each value in lo..hi; -1 on anything else.
int cli_parse_int_list(const char * text, int * out, int max, long lo, long hi) {
    int n = 0;
    for (const char * p = text;; p++) {
        char * end;
        // Each item starts with a digit or '-' (strtol would skip spaces and take '+').
        if (!(*p == '-' || (*p >= '0' && *p <= '9'))) return -1;
        errno = 0;
        const long v = strtol(p, &end, 10);
        if (end == p || errno == ERANGE || v < lo || v > hi || (*end != ',' && *end != '\0') || n == max) return -1;
        out[n++] = (int) v;
        if (*end == '\0') return n;
        p = end;   // at the comma: "1,2," and "1,,2" fail at the next item
    }
}
