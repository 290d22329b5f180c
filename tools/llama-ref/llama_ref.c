// llama_ref.c - the reference side of the fixtures: llama.cpp's numbers for a
// GGUF and a prompt, written in the formats tests/fixtures/ uses.
//
// A tool for maintainers, built by hand against a build of llama.cpp (see
// README.md); `make test` never needs it. It loads a model, tokenizes a prompt,
// evaluates it in one batch or token by token (n_ubatch 1), and writes
//   OUT.logits.bin      the last position's logits, n_vocab little-endian float32
//   OUT.all_logits.bin  (--all, batch mode) every position's, position 0 first
//   OUT.json            tokens, top 10, 32 greedy tokens and each step's top 5
//                       (the fields of tests/fixtures/golden/*/fox.json)
// and with --dump DIR every named intermediate tensor of the prompt's (last)
// graph as DIR/<name>.npy (float32), their order in DIR/order.txt, through
// llama.cpp's eval callback (cb_eval, as its eval-callback example does).
#include "ggml-backend.h"
#include "ggml.h"
#include "llama.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_GREEDY 32

static const char * usage =
    "usage: llama_ref -m MODEL.gguf (-p TEXT | -f FILE) -o OUT [options]\n"
    "  --tokens          evaluate the prompt one token per llama_decode (n_ubatch 1); default one batch\n"
    "  --kv f32|f16      K/V cache type (default f32); flash attention is always off\n"
    "  --no-special      do not parse special tokens in the prompt (default: parse, like llama-simple)\n"
    "  --no-repack       keep weights in the file's layout (no CPU extra buffer types)\n"
    "  --all             also write every position's logits (batch mode)\n"
    "  --dump DIR        write the prompt graph's named tensors as DIR/<name>.npy and DIR/order.txt\n"
    "  -n N              greedy steps (default 32)\n"
    "  -c N              context size (default 512)\n"
    "  --ids A,B,...     the prompt as token ids instead of -p/-f text\n";

// ---------------------------------------------------------------------------
// Tensor dumps through the eval callback
// ---------------------------------------------------------------------------

struct dumper {
    const char * dir;
    bool         active;   // only the graph of the prompt's last decode call is dumped
    FILE *       order;
    int          n_written;
    char         names[4096][GGML_MAX_NAME + 16];   // written so far: a name met again gets ".1", ".2", ...
};

// Views, reshapes and permutations hold no new numbers: not dumped.
static bool is_view(const struct ggml_tensor * t) {
    return t->op == GGML_OP_VIEW || t->op == GGML_OP_RESHAPE || t->op == GGML_OP_PERMUTE ||
           t->op == GGML_OP_TRANSPOSE;
}

// One element of t at (i0, i1, i2, i3) as float, from a host copy of its bytes.
static float element(const struct ggml_tensor * t, const uint8_t * data, int64_t i0, int64_t i1, int64_t i2,
                     int64_t i3) {
    const uint8_t * p = data + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
    switch (t->type) {
        case GGML_TYPE_F32: return *(const float *) p;
        case GGML_TYPE_F16: return ggml_fp16_to_fp32(*(const ggml_fp16_t *) p);
        case GGML_TYPE_BF16: return ggml_bf16_to_fp32(*(const ggml_bf16_t *) p);
        case GGML_TYPE_I32: return (float) *(const int32_t *) p;
        default: return NAN;
    }
}

// A .npy file (format 1.0): magic, header length, a Python dict padded to 64
// bytes with spaces and a newline, then the float32 data in C order. The
// shape is ggml's ne reversed (ne[0] varies fastest), trailing 1s dropped.
static bool write_npy(const char * path, const struct ggml_tensor * t, const uint8_t * data) {
    const int n_dims = ggml_n_dims(t);
    char shape[128] = "";
    for (int d = n_dims - 1; d >= 0; d--) {
        char one[32];
        snprintf(one, sizeof(one), "%lld%s", (long long) t->ne[d], n_dims == 1 ? "," : d > 0 ? ", " : "");
        strcat(shape, one);
    }
    char header[256];
    int  len = snprintf(header, sizeof(header), "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }", shape);
    const int total = ((10 + len + 1 + 63) / 64) * 64;   // magic(6) + version(2) + length(2) + dict + '\n'
    while (10 + len < total - 1) header[len++] = ' ';
    header[len++] = '\n';
    FILE * f = fopen(path, "wb");
    if (f == NULL) return false;
    const uint8_t pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (uint8_t) (len & 0xff), (uint8_t) (len >> 8)};
    bool ok = fwrite(pre, 1, 10, f) == 10 && fwrite(header, 1, (size_t) len, f) == (size_t) len;
    for (int64_t i3 = 0; i3 < t->ne[3]; i3++) {
        for (int64_t i2 = 0; i2 < t->ne[2]; i2++) {
            for (int64_t i1 = 0; i1 < t->ne[1]; i1++) {
                for (int64_t i0 = 0; i0 < t->ne[0]; i0++) {
                    const float v = element(t, data, i0, i1, i2, i3);
                    ok = ok && fwrite(&v, sizeof(v), 1, f) == 1;
                }
            }
        }
    }
    return fclose(f) == 0 && ok;
}

// The eval callback: asked first whether we want a node's data (ask=true),
// then called again with it computed.
static bool on_tensor(struct ggml_tensor * t, bool ask, void * user) {
    struct dumper * d = user;
    const bool readable = t->type == GGML_TYPE_F32 || t->type == GGML_TYPE_F16 || t->type == GGML_TYPE_BF16;
    const bool wanted   = d->active && readable && t->name[0] != '\0' && !is_view(t) && d->n_written < 4096;
    if (ask) return wanted;
    if (!wanted) return true;   // the scheduler computed it anyway (it also asks for the graph's output)
    char base[GGML_MAX_NAME + 1], name[GGML_MAX_NAME + 16];
    size_t k = 0;
    for (const char * c = t->name; *c && k + 1 < sizeof(base); c++) {
        base[k++] = (*c == ' ' || *c == '/' || *c == '(' || *c == ')') ? '_' : *c;
    }
    base[k] = '\0';
    int seen = 0;
    for (int i = 0; i < d->n_written; i++) {
        const size_t bl = strlen(base);
        seen += strncmp(d->names[i], base, bl) == 0 && (d->names[i][bl] == '\0' || d->names[i][bl] == '.');
    }
    if (seen == 0) snprintf(name, sizeof(name), "%s", base);
    else snprintf(name, sizeof(name), "%s.%d", base, seen);
    snprintf(d->names[d->n_written], sizeof(d->names[0]), "%s", name);
    const size_t nbytes = ggml_nbytes(t);
    uint8_t *    data   = malloc(nbytes);
    ggml_backend_tensor_get(t, data, 0, nbytes);
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s.npy", d->dir, name);
    if (!write_npy(path, t, data)) fprintf(stderr, "llama_ref: cannot write %s\n", path);
    free(data);
    fprintf(d->order, "%s\n", name);
    d->n_written++;
    return true;
}

// ---------------------------------------------------------------------------
// Logits, top-k, JSON
// ---------------------------------------------------------------------------

// The k largest logits, descending; ties: the lower id first.
static void top_k(const float * logits, int n_vocab, int k, int32_t * ids) {
    for (int j = 0; j < k; j++) {
        int32_t best = -1;
        for (int32_t i = 0; i < n_vocab; i++) {
            bool taken = false;
            for (int q = 0; q < j; q++) taken = taken || ids[q] == i;
            if (!taken && (best < 0 || logits[i] > logits[best])) best = i;
        }
        ids[j] = best;
    }
}

static void print_pairs(FILE * f, const float * logits, int n_vocab, int k) {
    int32_t ids[16];
    top_k(logits, n_vocab, k, ids);
    fprintf(f, "[");
    for (int j = 0; j < k; j++) fprintf(f, "%s[%d, %.9g]", j ? ", " : "", ids[j], (double) logits[ids[j]]);
    fprintf(f, "]");
}

static char * read_file(const char * path, size_t * len) {
    FILE * f = fopen(path, "rb");
    if (f == NULL) return NULL;
    fseek(f, 0, SEEK_END);
    const long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char * s = malloc((size_t) n + 1);
    *len = fread(s, 1, (size_t) n, f);
    s[*len] = '\0';
    fclose(f);
    return s;
}

static bool write_floats(const char * path, const float * v, size_t n) {
    FILE * f = fopen(path, "wb");
    const bool ok = f != NULL && fwrite(v, sizeof(float), n, f) == n;
    return f != NULL && fclose(f) == 0 && ok;
}

// Decode tokens[0..n) at positions pos.. as one llama_decode call; logits
// for the last one only, or for all of them.
static bool decode(struct llama_context * ctx, const llama_token * tokens, int n, int pos, bool all) {
    struct llama_batch b = llama_batch_init(n, 0, 1);
    for (int i = 0; i < n; i++) {
        b.token[i]     = tokens[i];
        b.pos[i]       = pos + i;
        b.n_seq_id[i]  = 1;
        b.seq_id[i][0] = 0;
        b.logits[i]    = all || i == n - 1;
    }
    b.n_tokens = n;
    const int rc = llama_decode(ctx, b);
    llama_batch_free(b);
    if (rc != 0) fprintf(stderr, "llama_ref: llama_decode returned %d\n", rc);
    return rc == 0;
}

static bool no_progress(float progress, void * user) {
    (void) progress;
    (void) user;
    return true;   // no dots on stdout; keep loading
}

static void quiet_log(enum ggml_log_level level, const char * text, void * user) {
    (void) user;
    if (level >= GGML_LOG_LEVEL_WARN) fputs(text, stderr);
}

int main(int argc, char ** argv) {
    const char * model_path = NULL, * prompt = NULL, * prompt_file = NULL, * out = NULL, * dump_dir = NULL;
    const char * kv = "f32", * ids = NULL;
    bool tokens_mode = false, parse_special = true, repack = true, all = false;
    int  n_greedy = N_GREEDY, n_ctx = 512;
    for (int i = 1; i < argc; i++) {
        const char * a = argv[i];
        const bool   v = i + 1 < argc;
        if (strcmp(a, "-m") == 0 && v) model_path = argv[++i];
        else if (strcmp(a, "-p") == 0 && v) prompt = argv[++i];
        else if (strcmp(a, "-f") == 0 && v) prompt_file = argv[++i];
        else if (strcmp(a, "-o") == 0 && v) out = argv[++i];
        else if (strcmp(a, "--kv") == 0 && v) kv = argv[++i];
        else if (strcmp(a, "--ids") == 0 && v) ids = argv[++i];
        else if (strcmp(a, "--dump") == 0 && v) dump_dir = argv[++i];
        else if (strcmp(a, "-n") == 0 && v) n_greedy = atoi(argv[++i]);
        else if (strcmp(a, "-c") == 0 && v) n_ctx = atoi(argv[++i]);
        else if (strcmp(a, "--tokens") == 0) tokens_mode = true;
        else if (strcmp(a, "--no-special") == 0) parse_special = false;
        else if (strcmp(a, "--no-repack") == 0) repack = false;
        else if (strcmp(a, "--all") == 0) all = true;
        else {
            fprintf(stderr, "llama_ref: unknown or incomplete option '%s'\n%s", a, usage);
            return 1;
        }
    }
    if (ids != NULL && prompt == NULL && prompt_file == NULL) prompt = "";
    if (model_path == NULL || (prompt == NULL) == (prompt_file == NULL) || out == NULL ||
        (strcmp(kv, "f32") != 0 && strcmp(kv, "f16") != 0) || n_greedy < 1 || n_greedy > 256) {
        fputs(usage, stderr);
        return 1;
    }
    size_t len = 0;
    char * text = prompt ? strdup(prompt) : read_file(prompt_file, &len);
    if (text == NULL) {
        fprintf(stderr, "llama_ref: cannot read %s\n", prompt_file);
        return 1;
    }
    len = strlen(text);

    llama_log_set(quiet_log, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.use_extra_bufts           = repack;
    mp.progress_callback         = no_progress;
    struct llama_model * model   = llama_model_load_from_file(model_path, mp);
    if (model == NULL) {
        fprintf(stderr, "llama_ref: cannot load %s\n", model_path);
        return 1;
    }
    const struct llama_vocab * vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);

    static struct dumper d;   // large: not on the stack
    d.dir = dump_dir;
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx           = (uint32_t) n_ctx;
    cp.n_batch         = (uint32_t) n_ctx;
    cp.n_ubatch        = tokens_mode ? 1 : (uint32_t) n_ctx;
    cp.n_threads       = 1;
    cp.n_threads_batch = 1;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.type_k          = strcmp(kv, "f16") == 0 ? GGML_TYPE_F16 : GGML_TYPE_F32;
    cp.type_v          = cp.type_k;
    cp.no_perf         = true;
    if (dump_dir != NULL) {
        cp.cb_eval           = on_tensor;
        cp.cb_eval_user_data = &d;
        char path[4096];
        snprintf(path, sizeof(path), "%s/order.txt", dump_dir);
        d.order = fopen(path, "w");
        if (d.order == NULL) {
            fprintf(stderr, "llama_ref: cannot write %s (does the directory exist?)\n", path);
            return 1;
        }
    }
    struct llama_context * ctx = llama_init_from_model(model, cp);
    if (ctx == NULL) {
        fprintf(stderr, "llama_ref: cannot create a context\n");
        return 1;
    }

    llama_token * tokens = malloc((len + 8) * sizeof(llama_token));
    int n = 0;
    if (ids != NULL) {
        tokens = realloc(tokens, (strlen(ids) + 1) * sizeof(llama_token));
        for (const char * p = ids; *p;) {
            char * end;
            tokens[n++] = (llama_token) strtol(p, &end, 10);
            p = *end == ',' ? end + 1 : end;
            if (end == p && *p) break;
        }
    } else {
        n = llama_tokenize(vocab, text, (int32_t) len, tokens, (int32_t) len + 8, true, parse_special);
    }
    if (n <= 0 || n + n_greedy > n_ctx) {
        fprintf(stderr, "llama_ref: the prompt is %d tokens (context %d)\n", n, n_ctx);
        return 1;
    }

    // The prompt: one call, or one call per token.
    bool ok = true;
    if (tokens_mode) {
        for (int i = 0; ok && i < n; i++) {
            d.active = i == n - 1;
            ok       = decode(ctx, tokens + i, 1, i, false);
        }
    } else {
        d.active = true;
        ok       = decode(ctx, tokens, n, 0, all && !tokens_mode);
    }
    d.active = false;
    if (!ok) return 1;

    char path[4096];
    float * last = malloc((size_t) n_vocab * sizeof(float));
    memcpy(last, llama_get_logits_ith(ctx, -1), (size_t) n_vocab * sizeof(float));
    snprintf(path, sizeof(path), "%s.logits.bin", out);
    ok = write_floats(path, last, (size_t) n_vocab);
    if (all && !tokens_mode) {
        float * rows = malloc((size_t) n * (size_t) n_vocab * sizeof(float));
        for (int i = 0; i < n; i++) {
            memcpy(rows + (size_t) i * n_vocab, llama_get_logits_ith(ctx, i), (size_t) n_vocab * sizeof(float));
        }
        snprintf(path, sizeof(path), "%s.all_logits.bin", out);
        ok = ok && write_floats(path, rows, (size_t) n * (size_t) n_vocab);
        free(rows);
    }

    double mean = 0.0, var = 0.0;
    for (int i = 0; i < n_vocab; i++) mean += last[i];
    mean /= n_vocab;
    for (int i = 0; i < n_vocab; i++) var += (last[i] - mean) * (last[i] - mean);

    // Greedy: the argmax (lowest id on ties) of the current logits, fed back.
    // Step s's top 5 are the logits greedy[s] was chosen from.
    int32_t greedy[256];
    char *  steps = malloc((size_t) n_greedy * 512);
    size_t  steps_len = 0;
    bool    eog = false;
    float * cur = malloc((size_t) n_vocab * sizeof(float));
    memcpy(cur, last, (size_t) n_vocab * sizeof(float));
    for (int s = 0; ok && s < n_greedy; s++) {
        int32_t best;
        top_k(cur, n_vocab, 1, &best);
        greedy[s] = best;
        eog       = eog || llama_vocab_is_eog(vocab, best);
        FILE * mf = fmemopen(steps + steps_len, 512, "w");
        fprintf(mf, "    ");
        print_pairs(mf, cur, n_vocab, 5);
        fprintf(mf, "%s\n", s + 1 < n_greedy ? "," : "");
        steps_len += (size_t) ftell(mf);
        fclose(mf);
        if (s + 1 < n_greedy) {
            ok = decode(ctx, &best, 1, n + s, false);
            if (ok) memcpy(cur, llama_get_logits_ith(ctx, -1), (size_t) n_vocab * sizeof(float));
        }
    }
    if (!ok) return 1;

    snprintf(path, sizeof(path), "%s.json", out);
    FILE * f = fopen(path, "w");
    if (f == NULL) {
        fprintf(stderr, "llama_ref: cannot write %s\n", path);
        return 1;
    }
    const char * base = strrchr(model_path, '/');
    fprintf(f, "{\n  \"model\": \"%s\",\n  \"threads\": 1,\n  \"kv_type\": \"%s\",\n  \"flash_attn\": \"off\",\n",
            base ? base + 1 : model_path, kv);
    fprintf(f, "  \"mode\": \"%s\",\n  \"n_ubatch\": %u,\n  \"repack\": %s,\n", tokens_mode ? "tokens" : "batch",
            cp.n_ubatch, repack ? "true" : "false");
    fprintf(f, "  \"n_ctx\": %d,\n  \"add_special\": true,\n  \"parse_special\": %s,\n  \"n_vocab\": %d,\n", n_ctx,
            parse_special ? "true" : "false", n_vocab);
    fprintf(f, "  \"prompt_tokens\": [");
    for (int i = 0; i < n; i++) fprintf(f, "%s%d", i ? ", " : "", tokens[i]);
    fprintf(f, "],\n  \"last_logits_mean\": %.6f,\n  \"last_logits_std\": %.6f,\n  \"top10\": ", mean,
            sqrt(var / n_vocab));
    print_pairs(f, last, n_vocab, 10);
    fprintf(f, ",\n  \"greedy\": [");
    for (int s = 0; s < n_greedy; s++) fprintf(f, "%s%d", s ? ", " : "", greedy[s]);
    fprintf(f, "],\n  \"greedy_contains_eog\": %s,\n  \"greedy_steps_top5\": [\n", eog ? "true" : "false");
    fwrite(steps, 1, steps_len, f);
    fprintf(f, "  ]\n}\n");
    ok = fclose(f) == 0;
    if (d.order != NULL) {
        fclose(d.order);
        fprintf(stderr, "llama_ref: %d tensors in %s\n", d.n_written, dump_dir);
    }
    printf("%s: %d tokens, %s, kv %s: wrote %s.logits.bin and %s.json\n", base ? base + 1 : model_path, n,
           tokens_mode ? "token by token" : "one batch", kv, out, out);

    free(cur);
    free(steps);
    free(last);
    free(tokens);
    free(text);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return ok ? 0 : 1;
}
