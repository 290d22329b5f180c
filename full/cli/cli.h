//@file full
// cli.h - what the mg commands share: option parsing, loading, timing.
#pragma once

#include "mg.h"
#include "model.h"
#include "sampling.h"
#include "session.h"
#include "vocab.h"

#include <limits.h>
#include <math.h>
#include <stdbool.h>

// mg_last_error() as a user of mg reads it: the library names its parameters
// (n_ctx, n_gpu_layers, cb_eval), the commands their flags (-c, -ngl,
// --dump-tensors), so each parameter name is replaced by the flag that sets it.
// The text lives until the next call.
const char * cli_last_error(void);

// Each command is a function with main's signature (argv[0] is its name).
int cmd_run(int argc, char ** argv);
int cmd_chat(int argc, char ** argv);
int cmd_info(int argc, char ** argv);
int cmd_tokenize(int argc, char ** argv);
int cmd_logits(int argc, char ** argv);
int cmd_mkmodel(int argc, char ** argv);
int cmd_quantize(int argc, char ** argv);
int cmd_bench(int argc, char ** argv);
int cmd_batched_bench(int argc, char ** argv);
int cmd_parallel(int argc, char ** argv);
int cmd_perplexity(int argc, char ** argv);

// ---------------------------------------------------------------------------
// Options: a table per command, parsed in one place so that every command
// reports a wrong flag the same way and has a --help made from the table.
// ---------------------------------------------------------------------------

// The last five are all a const char *; the path kinds say what the value is
// to the file system. Every file a command reads or writes is named in its
// table with its kind, so that cli_parse can check all of them before any
// work (outfile.h), and a test can find every output flag of every command
// (mg CMD --help-table) without a list of its own.
enum cli_kind {
    CLI_FLAG,       // bool, no value
    CLI_INT,        // int
    CLI_FLOAT,      // float
    CLI_U64,        // uint64_t
    CLI_SEED,       // uint64_t, or -1: CLI_SEED_RANDOM (a random seed, picked and printed by cli_sampling_setup)
    CLI_STRING,     // const char *: text, not a file
    CLI_IN_FILE,    // a file the command reads: no output may be it
    CLI_IN_DIR,     // a directory whose files the command reads (mkmodel --vocab)
    CLI_OUT_FILE,   // a file the command writes (temporary file + rename, never an input)
    CLI_OUT_DIR,    // a directory the command writes files into (it must hold no input)
};

struct cli_option {
    const char *  short_name;   // "-m", or NULL
    const char *  long_name;    // "--model"
    enum cli_kind kind;
    void *        value;        // where the parsed value goes (its current value is the default)
    const char *  help;
};

// Parse argv[1..] against opts; arguments that are not options go to
// positional[] (at most max_positional). --help prints usage and exits 0;
// --help-table prints the table, one option a line (long name, short name,
// kind), and exits 0. A wrong option prints "mg <cmd>: ..." and returns
// false. Then the files: every CLI_IN_* value is remembered as an input
// (mg_outfile_input), and every CLI_OUT_FILE / CLI_OUT_DIR value is checked
// against them (mg_outfile_check, _check_dir), before the command does any
// work; a CLI_OUT_FILE value that is a symlink is replaced by its target's
// path (the file written through it).
bool cli_parse(int argc, char ** argv, const char * usage, const struct cli_option * opts, int n_opts,
               const char ** positional, int max_positional, int * n_positional);

// ---------------------------------------------------------------------------
// What running a model needs, and the options that set it.
// ---------------------------------------------------------------------------

struct cli_engine_opts {
    const char * model;
    int          n_threads;
    int          n_ctx;
    int          n_batch;
    const char * kv_type;    // "f16" or "f32"
    const char * trace;      // MG_TRACE categories
    const char * dot;        // directory for graph drawings
    const char * svg;        // directory for memory maps of the compute buffer
    int          dot_layers; // draw only this many layers (-1: all)
    bool         flash_attn;
    bool         no_repack;  // keep Q4_0/Q4_K/Q2_K weights in the file's layout (mg_model_params.repack off)
    bool         no_huge_pages;  // keep the weights in the file's mapping (mg_model_params.huge_pages off)
    bool         draws;      // the command writes --dot/--svg drawings (mg run); set before parsing
    int          n_gpu_layers;   // -ngl: layers whose weights and cache go to a GPU device (0: none)
    const char * device;         // -dev: which GPU device (backend.h's registry names)
};

struct cli_engine_opts cli_engine_defaults(void);

// Append the rows of these options to a command's table; returns how many.
int cli_engine_options(struct cli_engine_opts * e, struct cli_option * out);

// Apply --trace and --dot, check the engine options. False after printing why.
bool cli_engine_setup(const char * cmd, const struct cli_engine_opts * e);

// The session parameters these options ask for.
struct mg_session_params cli_session_params(const struct cli_engine_opts * e);

// Load the model (repacked unless --no-repack), or print the reason and return NULL.
struct mg_model * cli_load_model(const char * cmd, const char * path, bool repack, bool huge_pages, double * load_ms);

struct cli_sampling_opts {
    struct mg_sampler_params p;
};

// --seed -1, as llama.cpp takes it (LLAMA_DEFAULT_SEED, 0xFFFFFFFF there):
// "pick a random seed". The seed picked is printed on stderr, so that the
// run can be repeated with it.
#define CLI_SEED_RANDOM UINT64_MAX

struct cli_sampling_opts cli_sampling_defaults(void);
int cli_sampling_options(struct cli_sampling_opts * s, struct cli_option * out);

bool cli_sampling_setup(const char * cmd, struct cli_sampling_opts * s);

// The start every command that runs the model shares: the engine options (and,
// with smp, the sampling options) appended to opts[0..n_opts) (the caller's
// array has room for them), the command line parsed (no positional
// arguments), then both sets checked. False after printing why.
bool cli_parse_engine_command(const char * cmd, int argc, char ** argv, const char * usage, struct cli_option * opts,
                              int n_opts, struct cli_engine_opts * e, struct cli_sampling_opts * smp);

// Two flags that cannot both be given (--think and --no-think): false after
// saying so.
bool cli_not_both(const char * cmd, bool a, const char * a_flag, bool b, const char * b_flag);

// ---------------------------------------------------------------------------
// Small things
// ---------------------------------------------------------------------------

// "1,2,4" -> {1, 2, 4}, each value in lo..hi; -1 on anything else (a comma list as llama-bench takes).
int cli_parse_int_list(const char * text, int * out, int max, long lo, long hi);

// A type by its ggml name ("q8_0", "Q4_K", "f16"; any case). False if unknown.
bool cli_parse_type(const char * name, enum mg_type * out);

// The whole file at path (NUL-terminated, *len bytes), or NULL after printing why.
char * cli_read_file(const char * cmd, const char * path, size_t * len);

// A prompt from -p or -f: exactly one of them must be given.
char * cli_prompt_text(const char * cmd, const char * prompt, const char * prompt_file, size_t * len);

// Whether tokenizing len bytes fits in the memory this process may use
// (mg_memory_limit), at the tokenizer's most per byte; false after printing
// why, naming name (a file, or "the text") and the bytes it may need.
bool cli_tokenize_fits(const char * cmd, const char * name, size_t len);

// The tokens of text[0..len) (mg_tokenize's flags), in a buffer sized by the
// count mg_tokenize asks for; *n_tokens may be 0. NULL after printing why.
int32_t * cli_tokenize(const char * cmd, const struct mg_vocab * vocab, const char * text, size_t len,
                       bool add_special, bool parse_special, int32_t * n_tokens);

// A session for the engine options; warns when -c is beyond the model's
// trained context (as llama.cpp). NULL after printing why.
struct mg_session * cli_session_new(const char * cmd, struct mg_model * m, const struct cli_engine_opts * e);
// The same, and with dump_dir (--dump-tensors) every node's result written
// by dumper as .npy files (npy.h); NULL after printing why.
struct mg_npy_dumper;
struct mg_session * cli_session_new_dumping(const char * cmd, struct mg_model * m, const struct cli_engine_opts * e,
                                            const char * dump_dir, struct mg_npy_dumper * dumper);


// ---------------------------------------------------------------------------
// Other programs (cli_spawn.c): never through a shell
// ---------------------------------------------------------------------------

// What a child printed on stdout (NUL-terminated; "" if nothing) and how it ended.
struct cli_child {
    char * out;
    size_t len, cap;
    int    status;      // its exit status, or -1 if a signal ended it
    bool   timed_out;   // killed at the deadline
    bool   too_big;     // killed for printing more than max_out bytes
};

// Runs argv[0] (a path, or a name looked up in PATH) with the arguments argv
// (NULL-terminated) as they are: no shell reads them. stdin and stderr are
// /dev/null; stdout is collected into c. After timeout_s seconds, or max_out
// bytes, the child and its process group are killed. False after printing
// why (it could not start, hung, or printed too much); a child that ran but
// failed returns true with its status: the caller judges its output.
bool cli_run_child(const char * cmd, char * const * argv, double timeout_s, size_t max_out, struct cli_child * c);
void cli_child_free(struct cli_child * c);

// What llama.cpp's benchmark tools print, read back (rival_output.c). The
// text comes from another program, so every figure is checked: a rate is
// usable only if finite, above 0 and below 1e9 (0, inf or a 300-digit figure
// would make a ratio of nothing).
bool cli_rate_usable(double v);

// One row of `llama-bench -o csv`: the test it ran and its mean t/s.
struct llama_bench_row {
    int    n_prompt, n_gen, n_depth, n_threads;
    bool   flash_attn;
    double avg_ts;
    bool   usable;   // avg_ts was a usable rate
};

// llama-bench's CSV, row by row (in place: text is cut into lines). _begin
// reads the header and is false if a column we need is missing; _next is
// false at the end. Rows with fewer fields than the header are skipped.
struct llama_bench_csv {
    char * rest;
    int    n_names;
    int    col_prompt, col_gen, col_depth, col_threads, col_fa, col_ts;
};
bool cli_llama_bench_csv_begin(struct llama_bench_csv * c, char * text);
bool cli_llama_bench_csv_next(struct llama_bench_csv * c, struct llama_bench_row * row);

// One row of llama-batched-bench's table:
//   |  PP |  TG |  B | N_KV | T_PP s | S_PP t/s | T_TG s | S_TG t/s | ...
struct batched_bench_row {
    int    pp, tg, pl, n_kv;
    double s_pp, s_tg;
    bool   usable;   // S_PP usable, and S_TG too (or 0 for a run with no generation)
};
// False for a line that is not such a row (a header, a rule, a log line).
bool cli_batched_bench_line(const char * line, struct batched_bench_row * row);

// The default of --rival-timeout: long enough for a real llama-bench run, short of forever.
#define CLI_RIVAL_TIMEOUT_S 3600.0

// --rounds and --rival-timeout, which say how a rival is raced: the values
// the command starts them at (not given), checked here. Given without the
// rival (rival_flag, e.g. --llama-bench: rival NULL) they did nothing
// without a word; now an error. Not given, they get their defaults (3
// rounds, CLI_RIVAL_TIMEOUT_S). False after saying why.
#define CLI_ROUNDS_UNSET INT_MIN
#define CLI_RIVAL_TIMEOUT_UNSET NAN   // the parser refuses nan: no value typed is this
bool cli_race_options(const char * cmd, const char * rival_flag, const char * rival, int max_rounds, int * rounds,
                      float * rival_timeout);

// Text a model made (or a user typed) to stdout. When stdout is a terminal,
// control characters other than \n and \t (C0, DEL, and C1 U+0080..U+009F)
// are printed as \xHH or \u00HH: a generated ESC sequence could otherwise
// retitle the window, move the cursor, hide text or, on some terminals,
// answer back with keystrokes. To a file or a pipe the bytes go as they are,
// so output compares byte for byte. (llama.cpp prints them raw.)
void cli_print_text(const char * text, size_t len);

// Print one token's text to stdout as it streams (whole UTF-8 characters only).
void cli_stream_token(struct mg_detok * d, const struct mg_vocab * vocab, int32_t token);
void cli_stream_flush(struct mg_detok * d);

// llama.cpp-style summary of a run, on stderr.
void cli_print_timings(const struct mg_session * s, double load_ms, int n_prompt, double prompt_ms, int n_eval,
                       double eval_ms);

// --normalize MODE for a prompt (cli_normalize.c): NULL leaves *text as it
// is; "nfc" replaces *text (malloc'd) and *len with their NFC form; text NULL
// only checks MODE. False after printing why.
bool cli_normalize(const char * cmd, const char * mode, char ** text, size_t * len);

// A prompt from -p or -f (cli_prompt_text), then in the form --normalize
// asks for (NULL: as given). NULL after printing why. (In cli_normalize.c,
// so that what links cli.c alone, as the fuzzers, needs no NFC tables.)
char * cli_prompt_text_normalized(const char * cmd, const char * prompt, const char * prompt_file,
                                  const char * normalize, size_t * len);
