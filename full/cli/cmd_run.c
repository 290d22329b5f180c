//@file full
// cmd_run.c - mg run: a prompt in, its continuation streamed out (llama-completion).
#include "cli.h"
#include "memmap.h"
#include "npy.h"
#include "vocab.h"

#include <errno.h>
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
        fprintf(stderr, "\nmg %s: context shift: %s\n", cmd, mg_last_error());
        return false;
    }
    return true;
}

int cmd_run(int argc, char ** argv) {
    const char * cmd = "run";
    struct cli_engine_opts   e   = cli_engine_defaults();
    e.draws                      = true;   // the prompt's and a decode step's graph (--dot, --svg)
    struct cli_sampling_opts smp = cli_sampling_defaults();
    const char * prompt = NULL, * prompt_file = NULL, * normalize = NULL, * trace_json = NULL, * memory_map = NULL,
               * dump_dir = NULL;
    int  n_predict = 128, n_keep = 0, trace_steps = 256;
    bool ignore_eos = false, no_display_prompt = false, no_special = false, ctx_shift = false, no_ctx_shift = false;

    struct cli_option opts[40];   // room for the engine and sampling options too
    int n_opts = 0;
    opts[n_opts++] = (struct cli_option) {"-p", "--prompt", CLI_STRING, &prompt, "the prompt"};
    opts[n_opts++] = (struct cli_option) {"-f", "--file", CLI_IN_FILE, &prompt_file, "read the prompt from a file"};
    opts[n_opts++] = (struct cli_option) {"-n", "--n-predict", CLI_INT, &n_predict,
                                          "tokens to generate (default 128; -1: until an end token or a full context)"};
    opts[n_opts++] = (struct cli_option) {NULL, "--ignore-eos", CLI_FLAG, &ignore_eos,
                                          "do not stop at end-of-generation tokens"};
    opts[n_opts++] = (struct cli_option) {NULL, "--no-display-prompt", CLI_FLAG, &no_display_prompt,
                                          "print only the generated text"};
    opts[n_opts++] = (struct cli_option) {NULL, "--normalize", CLI_STRING, &normalize, "nfc: the text in Unicode NFC first (default: as given)"};
    opts[n_opts++] = (struct cli_option) {NULL, "--trace-json", CLI_OUT_FILE, &trace_json,
                                          "write every thread's time per node as a Chrome trace (Perfetto)"};
    opts[n_opts++] = (struct cli_option) {NULL, "--trace-steps", CLI_INT, &trace_steps,
                                          "with --trace-json: record the prompt and at most N decode steps (256)"};
    opts[n_opts++] = (struct cli_option) {NULL, "--memory-map", CLI_OUT_FILE, &memory_map,
                                          "draw the run's memory regions and the pointers between them (SVG)"};
    opts[n_opts++] = (struct cli_option) {NULL, "--no-special", CLI_FLAG, &no_special,
                                          "do not parse special tokens in the prompt (default: parse them)"};
    opts[n_opts++] = (struct cli_option) {NULL, "--dump-tensors", CLI_OUT_DIR, &dump_dir,
                                          "write the prompt's intermediate tensors as .npy files here"};
    opts[n_opts++] = (struct cli_option) {NULL, "--context-shift", CLI_FLAG, &ctx_shift,
                                          "when the context is full, drop half of it and go on (default: stop)"};
    opts[n_opts++] = (struct cli_option) {NULL, "--no-context-shift", CLI_FLAG, &no_ctx_shift,
                                          "stop when the context is full (the default, as llama-completion)"};
    opts[n_opts++] = (struct cli_option) {NULL, "--keep", CLI_INT, &n_keep,
                                          "prompt tokens a context shift keeps (default 0, -1: all; BOS always)"};
    if (!cli_parse_engine_command(cmd, argc, argv, usage, opts, n_opts, &e, &smp)) return 1;
    if (!cli_not_both(cmd, ctx_shift, "--context-shift", no_ctx_shift, "--no-context-shift")) return 1;
    if (n_predict < -1) {   // -2 is a typo, not a second way to say -1
        fprintf(stderr, "mg %s: -n must be >= 0, or -1 (until an end token or a full context), got %d\n", cmd, n_predict);
        return 1;
    }
    if (trace_steps < 0) {
        fprintf(stderr, "mg %s: --trace-steps must be >= 0, got %d\n", cmd, trace_steps);
        return 1;
    }
    if (n_keep < -1) {
        fprintf(stderr, "mg %s: --keep must be -1 (all of the prompt) or >= 0, got %d\n", cmd, n_keep);
        return 1;
    }
    size_t text_len;
    char * text = cli_prompt_text_normalized(cmd, prompt, prompt_file, normalize, &text_len);
    if (text == NULL) return 1;

    // Everything below is released at `done`, whichever way the run ends.
    int                 status  = 1;
    struct mg_session * s       = NULL;
    struct mg_sampler * sampler = NULL;
    int32_t *           tokens  = NULL;
    struct mg_timeline * timeline = NULL;
    struct mg_npy_dumper dumper   = {0};
    double              load_ms;
    struct mg_model *   m = cli_load_model(cmd, e.model, &load_ms);
    if (m == NULL) goto done;
    s = cli_session_new_dumping(cmd, m, &e, dump_dir, &dumper);
    if (s == NULL) goto done;

    if (trace_json != NULL) {
        timeline = mg_timeline_new();
        mg_session_set_timeline(s, timeline);
    }

    // Tokenize as llama-completion does: special tokens parsed (unless --no-special), BOS added if the
    // vocabulary asks.
    const int n_ctx = mg_session_n_ctx(s);
    int32_t   n_prompt = 0;
    tokens = cli_tokenize(cmd, m->vocab, text, text_len, true, !no_special, &n_prompt);
    if (tokens == NULL) goto done;
    if (n_prompt == 0) {
        fprintf(stderr, "mg %s: the prompt is empty\n", cmd);
        goto done;
    }
    if (n_prompt >= n_ctx) {
        fprintf(stderr, "mg %s: the prompt is %d tokens, but the context holds %d: use a larger -c (the model "
                        "was trained with %d)\n", cmd, n_prompt, n_ctx, m->hp.n_ctx_train);
        goto done;
    }
    // As llama-completion: --keep counts prompt tokens after BOS, which is always kept; -1 or more than the
    // prompt keeps all of it.
    if (n_keep < 0 || n_keep > n_prompt) n_keep = n_prompt;
    else n_keep += mg_vocab_add_bos(m->vocab);
    if (!no_display_prompt) {
        fwrite(text, 1, text_len, stdout);
        fflush(stdout);
    }

    sampler = mg_sampler_new(smp.p, m->hp.n_vocab);
    for (int i = 0; i < n_prompt; i++) mg_sampler_accept(sampler, tokens[i]);

    double t0 = mg_time_ms();
    if (!mg_decode(s, tokens, n_prompt, false)) {
        fprintf(stderr, "mg %s: %s\n", cmd, mg_last_error());
        goto done;
    }
    const double prompt_ms = mg_time_ms() - t0;
    if (timeline != NULL && trace_steps == 0) mg_session_set_timeline(s, NULL);   // the prompt alone
    dumper.active          = false;   // the prompt only
    if (dumper.n_failed > 0) {
        fprintf(stderr, "mg %s: %d tensors not written: %s\n", cmd, dumper.n_failed, mg_last_error());
        goto done;
    }
    mg_session_dump_dot(s, "prompt");
    mg_session_dump_svg(s, "prompt-alloc");

    struct mg_detok detok;
    mg_detok_init(&detok, false);
    int    n_eval  = 0, n_shifts = 0;
    double eval_ms = 0.0;
    for (int i = 0; n_predict < 0 || i < n_predict; i++) {
        const int32_t next = mg_sampler_sample(sampler, mg_get_logits(s));
        if (!ignore_eos && mg_vocab_is_eog(m->vocab, next)) break;
        cli_stream_token(&detok, m->vocab, next);
        if (n_predict >= 0 && i + 1 == n_predict) break;   // the last token needs no decode
        if (mg_session_n_past(s) >= n_ctx) {
            if (!ctx_shift) {
                fprintf(stderr, "\n[context full: %d tokens, and context shift is off (--context-shift) => stopping]",
                        n_ctx);
                break;
            }
            if (!context_shift(cmd, s, n_keep)) goto done;
            n_shifts++;
        }
        t0 = mg_time_ms();
        if (!mg_decode(s, &next, 1, false)) {
            fprintf(stderr, "\nmg %s: %s\n", cmd, mg_last_error());
            goto done;
        }
        eval_ms += mg_time_ms() - t0;
        // A trace grows by every thread's slices of every step: bounded, so a long run's file and memory are not.
        if (timeline != NULL && n_eval + 1 == trace_steps) mg_session_set_timeline(s, NULL);
        if (n_eval++ == 0) {
            mg_session_dump_dot(s, "decode");
            mg_session_dump_svg(s, "decode-alloc");
        }
    }
    cli_stream_flush(&detok);
    printf("\n");
    cli_print_timings(s, load_ms, n_prompt, prompt_ms, n_eval, eval_ms);
    if (ctx_shift) {
        fprintf(stderr, "mg: context shifts   = %9d (keeping the first %d tokens; %d K-shift graphs run)\n", n_shifts,
                n_keep, mg_session_get_stats(s).n_k_shifts);
    }
    struct mg_memory_model mm;
    mg_session_memory_model(s, &mm);
    mg_memory_model_print(stderr, &mm);
    status = 0;
    if (memory_map != NULL) {
        if (mg_memory_model_dump_svg(&mm, memory_map)) {
            fprintf(stderr, "mg %s: wrote %s\n", cmd, memory_map);
        } else {
            fprintf(stderr, "mg %s: --memory-map: %s\n", cmd, mg_last_error());
            status = 1;
        }
    }
    if (timeline != NULL) {
        if (mg_timeline_write_json(timeline, trace_json)) {
            fprintf(stderr, "mg %s: wrote %s (open it in https://ui.perfetto.dev or chrome://tracing)\n", cmd, trace_json);
            if (n_eval > trace_steps) {
                fprintf(stderr, "mg %s: --trace-json holds the prompt and the first %d of %d decode steps (--trace-steps)\n",
                        cmd, trace_steps, n_eval);
            }
        } else {
            fprintf(stderr, "mg %s: --trace-json: %s\n", cmd, mg_last_error());
            status = 1;
        }
    }

done:
    mg_npy_dumper_close(&dumper);
    mg_sampler_free(sampler);
    mg_session_free(s);
    mg_timeline_free(timeline);   // after the session: its pool records into it
    mg_model_free(m);
    free(tokens);
    free(text);
    return status;
}
