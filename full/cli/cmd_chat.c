//@file full
// cmd_chat.c - mg chat: a conversation, one turn after another, the KV cache
// keeping everything said so far (llama-cli's conversation mode).
#define _POSIX_C_SOURCE 200809L
#include "cli.h"
#include "vocab.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char * usage =
    "usage: mg chat -m MODEL.gguf [--system TEXT] [--think | --no-think] [options]\n"
    "\n"
    "Reads one user message per line from stdin and answers it. Each turn is written in the\n"
    "ChatML form that Qwen3's and MiniMind's templates produce:\n"
    "  <|im_start|>user\\n...<|im_end|>\\n<|im_start|>assistant\\n\n"
    "and only the new turn's tokens are evaluated: earlier turns stay in the KV cache. Thinking\n"
    "follows the template's default (Qwen3: on, MiniMind: off) unless --think/--no-think says\n"
    "otherwise; with it off, an empty <think></think> block is put before the answer. Type /reset\n"
    "to start over, /exit (or end of input) to stop.";

struct chat {
    struct mg_model *   m;
    struct mg_session * s;
    struct mg_sampler * sampler;
    int                 n_predict;
    bool                think;
    const char *        normalize;    // --normalize: NULL or "nfc"
    bool                start_over;   // the last answer was cut: the next message begins a new conversation
    bool                failed;       // logits not finite: the model cannot answer, mg chat stops (printed)
    int                 n_unanswered; // messages too long for the whole context: said, and the exit status is 1
};

// What a turn's evaluation came to.
enum fed {
    FED,           // evaluated, the cache holds it
    NO_ROOM,       // does not fit after what the cache holds (nothing was evaluated)
    FAILED,        // an error, already printed
};

// Evaluate text (special tokens parsed) after what the cache holds.
static enum fed feed(struct chat * c, const char * turn_text, int32_t * n_tokens) {
    size_t len  = strlen(turn_text);
    char * text = malloc(len + 1);
    MG_ASSERT(text != NULL);
    memcpy(text, turn_text, len + 1);
    cli_normalize("chat", c->normalize, &text, &len);   // the mode was checked at the start
    int32_t   n      = 0;
    int32_t * tokens = cli_tokenize("chat", c->m->vocab, text, len, false, true, &n);
    free(text);
    if (tokens == NULL) return FAILED;
    *n_tokens = n;
    enum fed result = FED;
    if (mg_session_n_past(c->s) + n > mg_session_n_ctx(c->s)) {
        result = NO_ROOM;
    } else if (n > 0) {
        for (int i = 0; i < n; i++) mg_sampler_accept(c->sampler, tokens[i]);
        if (!mg_decode(c->s, tokens, n, false)) {
            fprintf(stderr, "mg chat: %s\n", cli_last_error());
            result = FAILED;
        }
    }
    free(tokens);
    return result;
}

// Generate the answer; the cache ends with the turn closed by <|im_end|>\n.
// An answer that fills the context is cut there, and said so.
static void answer(struct chat * c) {
    struct mg_detok detok;
    mg_detok_init(&detok, false);
    const int32_t im_end = mg_vocab_find(c->m->vocab, "<|im_end|>", 10);
    bool closed = false, full = false;
    int32_t n;
    for (int i = 0; c->n_predict < 0 || i < c->n_predict; i++) {   // -1: until an end token or a full context
        if (!mg_logits_finite(mg_get_logits(c->s), 1, c->m->hp.n_vocab, mg_session_n_past(c->s) - 1)) {
            fflush(stdout);
            fprintf(stderr, "\nmg chat: %s\n", cli_last_error());
            c->failed = true;
            return;
        }
        const int32_t next = mg_sampler_sample(c->sampler, mg_get_logits(c->s));
        if (mg_vocab_is_eog(c->m->vocab, next)) {
            closed = next == im_end && mg_session_n_past(c->s) < mg_session_n_ctx(c->s) &&
                     mg_decode(c->s, &next, 1, false);
            break;
        }
        cli_stream_token(&detok, c->m->vocab, next);
        if (mg_session_n_past(c->s) >= mg_session_n_ctx(c->s) || !mg_decode(c->s, &next, 1, false)) {
            full = true;
            break;
        }
    }
    cli_stream_flush(&detok);
    printf("\n");
    fflush(stdout);
    if (full || feed(c, closed ? "\n" : "<|im_end|>\n", &n) != FED) {
        fprintf(stderr, "[mg chat: the context (-c %d) is full%s; the next message starts a new conversation]\n",
                mg_session_n_ctx(c->s), full ? ": the answer was cut" : "");
        c->start_over = true;   // a turn left open would confuse the model
    }
}

static char * turn_text(const char * system, const char * user, bool first, bool think) {
    const size_t need = strlen(user) + (system ? strlen(system) : 0) + 128;
    char * text = malloc(need);
    MG_ASSERT(text != NULL);
    int len = 0;
    if (first && system != NULL) {
        len += snprintf(text + len, need - (size_t) len, "<|im_start|>system\n%s<|im_end|>\n", system);
    }
    len += snprintf(text + len, need - (size_t) len, "<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n", user);
    if (!think) snprintf(text + len, need - (size_t) len, "<think>\n\n</think>\n\n");
    return text;
}

// One exchange. A message that does not fit after the conversation so far
// starts a new conversation (said so); one that does not fit even in an empty
// context is not answered (said so), and the conversation stays as it was.
static void turn(struct chat * c, const char * system, const char * user) {
    const int n_ctx = mg_session_n_ctx(c->s);
    if (c->start_over) mg_session_rewind(c->s, 0);
    c->start_over = false;
    int32_t   n     = 0;
    char *    text  = turn_text(system, user, mg_session_n_past(c->s) == 0, c->think);
    enum fed  fed   = feed(c, text, &n);
    if (fed == NO_ROOM && mg_session_n_past(c->s) > 0) {
        const int n_past = mg_session_n_past(c->s);
        free(text);
        text = turn_text(system, user, true, c->think);
        int32_t n_fresh = 0;
        mg_session_rewind(c->s, 0);
        fed = feed(c, text, &n_fresh);
        if (fed == FED) {
            fprintf(stderr, "[mg chat: the conversation (%d tokens) and this message (%d) do not fit in the context "
                            "(-c %d): starting a new conversation]\n", n_past, n, n_ctx);
        } else {
            mg_session_rewind(c->s, 0);
        }
        n = n_fresh;
    }
    if (fed == NO_ROOM) {
        fprintf(stderr, "[mg chat: this message is %d tokens with its template, more than the context holds (-c %d): "
                        "not answered; a shorter message, or a larger -c]\n", n, n_ctx);
        c->n_unanswered++;
    } else if (fed == FED) {
        answer(c);
    }
    free(text);
}

enum { MAX_MESSAGE = 1 << 20 };

// One line of stdin into *line (NUL-terminated, the newline kept): its
// length, -1 at the end (or a read error: ferror says), -2 for a line longer
// than MAX_MESSAGE bytes (getline would grow without bound on /dev/zero).
static ssize_t read_message(char ** line, size_t * cap) {
    size_t n = 0;
    for (int ch; (ch = getchar()) != EOF;) {
        if (n + 2 > *cap) {
            if (n >= MAX_MESSAGE) return -2;
            const size_t bigger = *cap ? 2 * *cap : 256;
            char *       p      = realloc(*line, bigger);
            if (p == NULL) return -2;
            *line = p, *cap = bigger;
        }
        (*line)[n++] = (char) ch;
        if (ch == '\n') break;
    }
    if (n == 0) return -1;
    (*line)[n] = '\0';
    return (ssize_t) n;
}

// One turn per line of standard input until its end or /exit (/reset
// forgets the conversation). 0 at the end of the input, errno when reading
// failed, -1 for a line too long to be a message.
static int chat_loop(struct chat * c, const char * cmd, const char * system) {
    const bool interactive = isatty(STDIN_FILENO);
    char * line = NULL;
    size_t cap  = 0;
    int    read_error = 0;
    for (;;) {
        if (interactive) {
            printf("> ");
            fflush(stdout);
        }
        ssize_t n = read_message(&line, &cap);
        if (n == -2) {
            fprintf(stderr, "mg %s: a message of more than %d bytes (no newline in them) on standard input: one "
                            "message per line\n", cmd, MAX_MESSAGE);
            read_error = -1;
            break;
        }
        if (n < 0) {
            read_error = ferror(stdin) ? errno : 0;
            break;
        }
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
        if (strcmp(line, "/exit") == 0) break;
        if (strcmp(line, "/reset") == 0 || n == 0) {
            if (n > 0) mg_session_rewind(c->s, 0);
            continue;
        }
        turn(c, system, line);
        if (c->failed) break;
    }
    free(line);
    return read_error;
}

int cmd_chat(int argc, char ** argv) {
    const char * cmd = "chat";
    struct cli_engine_opts   e   = cli_engine_defaults();
    struct cli_sampling_opts smp = cli_sampling_defaults();
    const char * system = NULL, * normalize = NULL;
    bool think = false, no_think = false;
    int  n_predict = 512;
    struct cli_option opts[32];
    int n_opts = 0;
    opts[n_opts++] = (struct cli_option) {NULL, "--system", CLI_STRING, &system, "a system message"};
    opts[n_opts++] = (struct cli_option) {NULL, "--think", CLI_FLAG, &think, "let the model think first"};
    opts[n_opts++] = (struct cli_option) {NULL, "--no-think", CLI_FLAG, &no_think, "skip thinking"};
    opts[n_opts++] = (struct cli_option) {NULL, "--normalize", CLI_STRING, &normalize, "nfc: the text in Unicode NFC first (default: as given)"};
    opts[n_opts++] = (struct cli_option) {"-n", "--n-predict", CLI_INT, &n_predict, "at most this many tokens per answer (512; -1: until an end token)"};
    if (!cli_parse_engine_command(cmd, argc, argv, usage, opts, n_opts, &e, &smp)) return 1;
    if (!cli_not_both(cmd, think, "--think", no_think, "--no-think")) return 1;
    if (!cli_normalize(cmd, normalize, NULL, NULL)) return 1;
    if (n_predict == 0 || n_predict < -1) {   // 0 would give empty answers, and say nothing
        fprintf(stderr, "mg %s: -n must be at least 1 token per answer, or -1 (until an end token), got %d\n", cmd,
                n_predict);
        return 1;
    }
    struct chat c = {.n_predict = n_predict, .normalize = normalize};
    c.m = cli_load_model(cmd, e.model, !e.no_repack, !e.no_huge_pages, NULL);
    if (c.m == NULL) return 1;
    const char * tmpl = mg_vocab_chat_template(c.m->vocab);
    if (tmpl == NULL || strstr(tmpl, "<|im_start|>") == NULL) {
        fprintf(stderr, "mg %s: the model has no ChatML chat template (<|im_start|>): use mg run instead\n", cmd);
        mg_model_free(c.m);
        return 1;
    }
    // MiniMind's template thinks only when asked (open_thinking); Qwen3's unless told not to.
    c.think = think || (!no_think && strstr(tmpl, "open_thinking") == NULL);
    c.s = cli_session_new(cmd, c.m, &e);
    if (c.s == NULL) {
        mg_model_free(c.m);
        return 1;
    }
    c.sampler = mg_sampler_new(smp.p, c.m->hp.n_vocab);
    const int read_error = chat_loop(&c, cmd, system);
    // getline's -1 is also a read error (stdin a directory: EISDIR): said, not taken for the end of the input.
    // A message too long for the context was not answered: the chat goes on
    // (a shorter one may follow), but the exit status says that not every
    // message got an answer. llama-cli does the same for a prompt longer than
    // the context ("prompt is too long", exit 1); llama-simple-chat stops with
    // "context size exceeded" and exit 0, which a script cannot tell from success.
    if (c.n_unanswered > 0) {
        fprintf(stderr, "mg %s: %d message%s not answered: longer than the context (-c %d)\n", cmd, c.n_unanswered,
                c.n_unanswered == 1 ? " was" : "s were", mg_session_n_ctx(c.s));
    }
    const int status = read_error != 0 || c.failed || c.n_unanswered > 0 ? 1 : 0;
    if (read_error > 0) fprintf(stderr, "mg %s: cannot read the messages from standard input: %s\n", cmd, strerror(read_error));
    mg_sampler_free(c.sampler);
    mg_session_free(c.s);
    mg_model_free(c.m);
    return status;
}
