//@file full
// cmd_run.c - mg run: a prompt in, its continuation streamed out (llama-completion).
#include "cli.h"
#include "memmap.h"
#include "npy.h"
#include "vocab.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char * usage =
    "usage: mg run -m MODEL.gguf -p PROMPT [options]\n"
    "\n"
    "Completes the prompt, printing tokens as they come, and ends with a timing summary on stderr.\n"
    "As llama-completion: special tokens written in the prompt (<|im_start|>, ...) are recognised unless\n"
    "--no-special, and BOS is added where the vocabulary asks for it. Generation stops at an\n"
    "end-of-generation token, after -n tokens, or when the context is full (a prompt that does not\n"
    "fit is an error). With --context-shift a full context makes room instead, as llama-completion's:\n"
    "the first --keep tokens of the prompt stay, half of the rest is dropped, and the remainder moves\n"
    "down (its cached keys turned back by RoPE), so -n -1 generates until an end token.\n"
    "--dump-tensors DIR writes the prompt graph's intermediate tensors as .npy files (see mg logits --help).";

// The context shift of llama-completion (tools/completion/completion.cpp):
// keep positions 0..n_keep-1, drop the next half of what follows, and move
// the rest down over the gap (mg_session_seq_add). False when nothing can
// be dropped (--keep holds the whole context).
#define UNSET_INT INT_MIN   // an option not given (--keep, --trace-steps: checked against what they need)

static bool context_shift(const char * cmd, struct mg_session * s, int n_keep) {
    const int n_past    = mg_session_n_past(s);
    const int n_discard = (n_past - n_keep) / 2;
    if (n_discard <= 0) {
        fprintf(stderr, "\nmg %s: context full (%d tokens) and --keep %d leaves nothing to discard\n", cmd, n_past,
                n_keep);
        return false;
    }
    mg_session_seq_rm(s, 0, n_keep, n_keep + n_discard);
    if (!mg_session_seq_add(s, 0, n_keep + n_discard, n_past, -n_discard)) {
        fprintf(stderr, "\nmg %s: context shift: %s\n", cmd, cli_last_error());
        return false;
    }
    return true;
}

// mg run's own options (the engine's and the sampler's are cli.h's).
struct run_opts {
    const char * prompt, * prompt_file, * normalize, * trace_json, * memory_map, * dump_dir;
    int          n_predict, n_keep, trace_steps;
    bool         ignore_eos, no_display_prompt, no_special, ctx_shift, no_ctx_shift;
};

// Everything one run holds, freed by run_free.
struct run_state {
    struct cli_engine_opts   e;
    struct cli_sampling_opts smp;
    struct run_opts          o;
    char *                   text;   // the prompt, as given (or in NFC)
    size_t                   text_len;
    struct mg_model *        m;
    double                   load_ms;
    struct mg_session *      s;
    struct mg_timeline *     timeline;   // with --trace-json
    struct mg_npy_dumper     dumper;     // with --dump-tensors
    struct mg_sampler *      sampler;
    int32_t *                tokens;     // the prompt's
    int32_t                  n_prompt;
    double                   prompt_ms, eval_ms;
    int                      n_eval, n_shifts;
    int                      n_draw_failed;   // --dot and --svg files not written
};

// The options, their checks and the prompt's text. False after printing why.
static bool run_parse(const char * cmd, int argc, char ** argv, struct run_state * r) {
    struct run_opts * o = &r->o;
    struct cli_option opts[40];   // room for the engine and sampling options too
    int n_opts = 0;
    opts[n_opts++] = (struct cli_option) {"-p", "--prompt", CLI_STRING, &o->prompt, "the prompt"};
    opts[n_opts++] = (struct cli_option) {"-f", "--file", CLI_IN_FILE, &o->prompt_file, "read the prompt from a file"};
    opts[n_opts++] = (struct cli_option) {"-n", "--n-predict", CLI_INT, &o->n_predict,
                                          "tokens to generate (default 128; -1: until an end token or a full context)"};
    opts[n_opts++] = (struct cli_option) {NULL, "--ignore-eos", CLI_FLAG, &o->ignore_eos,
                                          "do not stop at end-of-generation tokens"};
    opts[n_opts++] = (struct cli_option) {NULL, "--no-display-prompt", CLI_FLAG, &o->no_display_prompt,
                                          "print only the generated text"};
    opts[n_opts++] = (struct cli_option) {NULL, "--normalize", CLI_STRING, &o->normalize, "nfc: the text in Unicode NFC first (default: as given)"};
    opts[n_opts++] = (struct cli_option) {NULL, "--trace-json", CLI_OUT_FILE, &o->trace_json,
                                          "write every thread's time per node as a Chrome trace (Perfetto)"};
    opts[n_opts++] = (struct cli_option) {NULL, "--trace-steps", CLI_INT, &o->trace_steps,
                                          "with --trace-json: record the prompt and at most N decode steps (256)"};
    opts[n_opts++] = (struct cli_option) {NULL, "--memory-map", CLI_OUT_FILE, &o->memory_map,
                                          "draw the run's memory regions and the pointers between them (SVG)"};
    opts[n_opts++] = (struct cli_option) {NULL, "--no-special", CLI_FLAG, &o->no_special,
                                          "do not parse special tokens in the prompt (default: parse them)"};
    opts[n_opts++] = (struct cli_option) {NULL, "--dump-tensors", CLI_OUT_DIR, &o->dump_dir,
                                          "write the prompt's intermediate tensors as .npy files here"};
    opts[n_opts++] = (struct cli_option) {NULL, "--context-shift", CLI_FLAG, &o->ctx_shift,
                                          "when the context is full, drop half of it and go on (default: stop)"};
    opts[n_opts++] = (struct cli_option) {NULL, "--no-context-shift", CLI_FLAG, &o->no_ctx_shift,
                                          "stop when the context is full (the default, as llama-completion)"};
    opts[n_opts++] = (struct cli_option) {NULL, "--keep", CLI_INT, &o->n_keep,
                                          "prompt tokens a context shift keeps (default 0, -1: all; BOS always)"};
    if (!cli_parse_engine_command(cmd, argc, argv, usage, opts, n_opts, &r->e, &r->smp)) return false;
    if (!cli_not_both(cmd, o->ctx_shift, "--context-shift", o->no_ctx_shift, "--no-context-shift")) return false;
    if (o->n_predict < -1) {   // -2 is a typo, not a second way to say -1
        fprintf(stderr, "mg %s: -n must be >= 0, or -1 (until an end token or a full context), got %d\n", cmd,
                o->n_predict);
        return false;
    }
    // Flags that only mean something beside another: given alone they were
    // ignored without a word (as --dot-layers without --dot was).
    if (o->n_keep != UNSET_INT && !o->ctx_shift) {
        fprintf(stderr, "mg %s: --keep %d: it says what a context shift keeps: give --context-shift too\n", cmd, o->n_keep);
        return false;
    }
    if (o->trace_steps != UNSET_INT && o->trace_json == NULL) {
        fprintf(stderr, "mg %s: --trace-steps %d: it bounds --trace-json FILE: give that too\n", cmd, o->trace_steps);
        return false;
    }
    if (o->n_keep == UNSET_INT) o->n_keep = 0;
    if (o->trace_steps == UNSET_INT) o->trace_steps = 256;
    if (o->trace_steps < 0) {
        fprintf(stderr, "mg %s: --trace-steps must be >= 0, got %d\n", cmd, o->trace_steps);
        return false;
    }
    if (o->n_keep < -1) {
        fprintf(stderr, "mg %s: --keep must be -1 (all of the prompt) or >= 0, got %d\n", cmd, o->n_keep);
        return false;
    }
    r->text = cli_prompt_text_normalized(cmd, o->prompt, o->prompt_file, o->normalize, &r->text_len);
    return r->text != NULL;
}

// Tokenize as llama-completion does: special tokens parsed (unless
// --no-special), BOS added if the vocabulary asks; the prompt must leave room
// in the context. --keep counts prompt tokens after BOS, which is always
// kept; -1 or more than the prompt keeps all of it.
static bool run_tokenize(const char * cmd, struct run_state * r) {
    const int n_ctx = mg_session_n_ctx(r->s);
    r->tokens = cli_tokenize(cmd, r->m->vocab, r->text, r->text_len, true, !r->o.no_special, &r->n_prompt);
    if (r->tokens == NULL) return false;
    if (r->n_prompt == 0) {
        fprintf(stderr, "mg %s: the prompt is empty\n", cmd);
        return false;
    }
    if (r->n_prompt >= n_ctx) {
        fprintf(stderr, "mg %s: the prompt is %d tokens, but the context holds %d: use a larger -c (the model "
                        "was trained with %d)\n", cmd, r->n_prompt, n_ctx, r->m->hp.n_ctx_train);
        return false;
    }
    if (r->o.n_keep < 0 || r->o.n_keep > r->n_prompt) r->o.n_keep = r->n_prompt;
    else r->o.n_keep += mg_vocab_add_bos(r->m->vocab);
    return true;
}

// The model, the session (dumping, tracing), the prompt's tokens and the sampler that has seen them.
static bool run_set_up(const char * cmd, struct run_state * r) {
    r->m = cli_load_model(cmd, r->e.model, !r->e.no_repack, !r->e.no_huge_pages, &r->load_ms);
    if (r->m == NULL) return false;
    r->s = cli_session_new_dumping(cmd, r->m, &r->e, r->o.dump_dir, &r->dumper);
    if (r->s == NULL) return false;
    if (r->o.trace_json != NULL) {
        r->timeline = mg_timeline_new();
        mg_session_set_timeline(r->s, r->timeline);
    }
    if (!run_tokenize(cmd, r)) return false;
    r->sampler = mg_sampler_new(r->smp.p, r->m->hp.n_vocab);
    for (int i = 0; i < r->n_prompt; i++) mg_sampler_accept(r->sampler, r->tokens[i]);
    return true;
}

// The graph drawn with --dot and --svg (or MG_DOT, MG_SVG). A drawing asked
// for and not written (a full disk) fails the run at its end, as
// --memory-map does, rather than exit 0 without the file; the session has
// said why on stderr.
static void run_draw(struct run_state * r, const char * dot_name, const char * svg_name) {
    const bool dot_asked = r->e.dot != NULL || mg_demo_switch("MG_DOT") != NULL;
    const bool svg_asked = r->e.svg != NULL || mg_demo_switch("MG_SVG") != NULL;
    if (dot_asked && !mg_session_dump_dot(r->s, dot_name)) r->n_draw_failed++;
    if (svg_asked && !mg_session_dump_svg(r->s, svg_name)) r->n_draw_failed++;
}

// The prompt in one decode; its tensors dumped and its graph drawn.
static bool run_prompt(const char * cmd, struct run_state * r) {
    const double t0 = mg_time_ms();
    if (!mg_decode(r->s, r->tokens, r->n_prompt, false)) {
        fprintf(stderr, "mg %s: %s\n", cmd, cli_last_error());
        return false;
    }
    r->prompt_ms = mg_time_ms() - t0;
    if (r->timeline != NULL && r->o.trace_steps == 0) mg_session_set_timeline(r->s, NULL);   // the prompt alone
    r->dumper.active = false;   // the prompt only
    if (r->dumper.n_failed > 0) {
        fprintf(stderr, "mg %s: %d tensors not written: %s\n", cmd, r->dumper.n_failed, cli_last_error());
        return false;
    }
    run_draw(r, "prompt", "prompt-alloc");
    return true;
}

// Sample, print, decode, until -n tokens, an end token, or a full context
// (shifted with --context-shift). The first decode step's graph is drawn.
static bool run_generate(const char * cmd, struct run_state * r) {
    const struct run_opts * o     = &r->o;
    const int               n_ctx = mg_session_n_ctx(r->s);
    struct mg_detok         detok;
    mg_detok_init(&detok, false);
    bool ok = true;
    for (int i = 0; o->n_predict < 0 || i < o->n_predict; i++) {
        if (!(ok = mg_logits_finite(mg_get_logits(r->s), 1, r->m->hp.n_vocab, mg_session_n_past(r->s) - 1))) {
            fflush(stdout);
            fprintf(stderr, "\nmg %s: %s\n", cmd, cli_last_error());
            break;
        }
        const int32_t next = mg_sampler_sample(r->sampler, mg_get_logits(r->s));
        if (!o->ignore_eos && mg_vocab_is_eog(r->m->vocab, next)) break;
        cli_stream_token(&detok, r->m->vocab, next);
        if (o->n_predict >= 0 && i + 1 == o->n_predict) break;   // the last token needs no decode
        if (mg_session_n_past(r->s) >= n_ctx) {
            if (!o->ctx_shift) {
                fprintf(stderr, "\n[context full: %d tokens, and context shift is off (--context-shift) => stopping]",
                        n_ctx);
                break;
            }
            if (!(ok = context_shift(cmd, r->s, o->n_keep))) break;
            r->n_shifts++;
        }
        const double t0 = mg_time_ms();
        if (!(ok = mg_decode(r->s, &next, 1, false))) {
            fprintf(stderr, "\nmg %s: %s\n", cmd, cli_last_error());
            break;
        }
        r->eval_ms += mg_time_ms() - t0;
        // A trace grows by every thread's slices of every step: bounded, so a long run's file and memory are not.
        if (r->timeline != NULL && r->n_eval + 1 == o->trace_steps) mg_session_set_timeline(r->s, NULL);
        if (r->n_eval++ == 0) run_draw(r, "decode", "decode-alloc");
    }
    if (!ok) return false;
    cli_stream_flush(&detok);
    printf("\n");
    return true;
}

// With --trace-json: the timeline written, and how much of the run it holds.
static bool run_write_trace(const char * cmd, const struct run_state * r) {
    if (!mg_timeline_write_json(r->timeline, r->o.trace_json)) {
        fprintf(stderr, "mg %s: --trace-json: %s\n", cmd, cli_last_error());
        return false;
    }
    fprintf(stderr, "mg %s: wrote %s (open it in https://ui.perfetto.dev or chrome://tracing)\n", cmd,
            mg_quote(r->o.trace_json));
    if (r->n_eval > r->o.trace_steps) {
        fprintf(stderr, "mg %s: --trace-json holds the prompt and the first %d of %d decode steps (--trace-steps)\n",
                cmd, r->o.trace_steps, r->n_eval);
    }
    return true;
}

// llama.cpp's timings, the context shifts, the memory table; then the files
// of --memory-map and --trace-json. False if one could not be written.
static bool run_report(const char * cmd, struct run_state * r) {
    cli_print_timings(r->s, r->load_ms, r->n_prompt, r->prompt_ms, r->n_eval, r->eval_ms);
    if (r->o.ctx_shift) {
        fprintf(stderr, "mg: context shifts   = %9d (keeping the first %d tokens; %d K-shift graphs run)\n",
                r->n_shifts, r->o.n_keep, mg_session_get_stats(r->s).n_k_shifts);
    }
    struct mg_memory_model mm;
    mg_session_memory_model(r->s, &mm);
    mg_memory_model_print(stderr, &mm);
    bool ok = true;
    if (r->o.memory_map != NULL) {
        if (mg_memory_model_dump_svg(&mm, r->o.memory_map)) {
            fprintf(stderr, "mg %s: wrote %s\n", cmd, mg_quote(r->o.memory_map));
        } else {
            fprintf(stderr, "mg %s: --memory-map: %s\n", cmd, cli_last_error());
            ok = false;
        }
    }
    if (r->timeline != NULL) ok = run_write_trace(cmd, r) && ok;
    if (r->n_draw_failed > 0) {
        fprintf(stderr, "mg %s: %d drawing%s of --dot or --svg not written (see above)\n", cmd, r->n_draw_failed,
                r->n_draw_failed == 1 ? "" : "s");
        ok = false;
    }
    return ok;
}

static void run_free(struct run_state * r) {
    mg_npy_dumper_close(&r->dumper);
    mg_sampler_free(r->sampler);
    mg_session_free(r->s);
    mg_timeline_free(r->timeline);   // after the session: its pool records into it
    mg_model_free(r->m);
    free(r->tokens);
    free(r->text);
}

int cmd_run(int argc, char ** argv) {
    const char *     cmd = "run";
    struct run_state r   = {.e = cli_engine_defaults(), .smp = cli_sampling_defaults(),
                            .o = {.n_predict = 128, .n_keep = UNSET_INT, .trace_steps = UNSET_INT}};   // defaults 0 and 256
    r.e.draws            = true;   // the prompt's and a decode step's graph (--dot, --svg)
    if (!run_parse(cmd, argc, argv, &r)) return 1;
    bool ok = run_set_up(cmd, &r);
    if (ok && !r.o.no_display_prompt) {
        cli_print_text(r.text, r.text_len);
        fflush(stdout);
    }
    ok = ok && run_prompt(cmd, &r) && run_generate(cmd, &r) && run_report(cmd, &r);
    run_free(&r);
    return ok ? 0 : 1;
}
