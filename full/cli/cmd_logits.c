//@file full
// cmd_logits.c - mg logits: the numbers another engine can be compared with.
#include "cli.h"
#include "npy.h"
#include "outfile.h"
#include "vocab.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char * usage =
    "usage: mg logits -m MODEL.gguf (-p TEXT | -f FILE) [-o OUT.bin] [--all] [--top K] [options]\n"
    "\n"
    "Evaluates the prompt as one batch at positions 0..n-1 and writes the logits of its last position\n"
    "(or of every position with --all, position 0 first) as little-endian float32, n_vocab per row:\n"
    "the format of the test fixtures' *.logits.bin. Prints the top K of the last position.\n"
    "The prompt is tokenized as llama-simple does: special tokens written in it (<|im_start|>, ...) are\n"
    "parsed unless --no-special, and BOS is added where the vocabulary asks for it unless --no-bos.\n"
    "-b 1 evaluates it token by token instead (each token one graph, as llama.cpp with n_ubatch 1).\n"
    "--dump-tensors DIR writes every named intermediate of the graph of the prompt's last batch\n"
    "(attn_norm-0, Qcur-0, kq-0, ffn_out-0, ...) as DIR/<name>.npy, float32, in graph order in\n"
    "DIR/order.txt (tools/npy_diff compares two such folders; numpy.load opens the files).";

// rows x n_vocab floats to path (a temporary file renamed into place; the
// path was checked by cli_parse before any work). False after printing why.
static bool write_logits(const char * cmd, const char * path, const float * logits, int n_rows, int n_vocab) {
    struct mg_outfile out;
    FILE *            f        = mg_outfile_open(&out, path);
    const size_t      n_floats = (size_t) n_vocab * (size_t) n_rows;
    if (f != NULL && fwrite(logits, sizeof(float), n_floats, f) != n_floats) {
        mg_set_error("%s: write failed: %s", path, strerror(errno));
        mg_outfile_abort(&out);
        f = NULL;
    }
    if (f == NULL || !mg_outfile_commit(&out)) {
        fprintf(stderr, "mg %s: %s\n", cmd, cli_last_error());
        return false;
    }
    printf("wrote %zu floats (%d position%s x %d) to %s\n", n_floats, n_rows, n_rows > 1 ? "s" : "", n_vocab, path);
    return true;
}

// The ids of one position by logit, highest first; ties by the lower id
// (mg_argmax's order). A sort, not top x argmax: --top 151936 on Qwen3 was
// 2e10 steps. qsort has no context argument, hence the file-static row.
static const float * sort_row;

static int by_logit(const void * a, const void * b) {
    const int32_t i = *(const int32_t *) a, j = *(const int32_t *) b;
    if (sort_row[i] != sort_row[j]) return sort_row[i] > sort_row[j] ? -1 : 1;
    return (i > j) - (i < j);
}

// The top logits of one position, highest first, with their pieces. A --top
// beyond the vocabulary prints all of it, and says how many.
static bool print_top(const struct mg_vocab * vocab, const float * logits, int n_vocab, int top) {
    int32_t * ids = malloc((size_t) n_vocab * sizeof(int32_t));
    if (ids == NULL) return false;
    for (int32_t i = 0; i < n_vocab; i++) ids[i] = i;
    sort_row = logits;
    qsort(ids, (size_t) n_vocab, sizeof(int32_t), by_logit);
    if (top > n_vocab) top = n_vocab;
    printf("top %d of the last position:\n", top);
    for (int k = 0; k < top; k++) {
        const int32_t id = ids[k];
        char          small[64], * piece = small;
        int32_t       pl = mg_token_to_piece(vocab, id, piece, sizeof(small), true);
        if (pl < 0 && (piece = malloc((size_t) -pl)) != NULL) pl = mg_token_to_piece(vocab, id, piece, -pl, true);   // a long piece
        printf("%3d  %6d  %12.6f  '", k + 1, id, (double) logits[id]);
        if (piece != NULL) cli_print_text(piece, pl > 0 ? (size_t) pl : 0);
        printf("'\n");
        if (piece != small) free(piece);
    }
    free(ids);
    return true;
}

int cmd_logits(int argc, char ** argv) {
    const char * cmd = "logits";
    struct cli_engine_opts e = cli_engine_defaults();
    const char * prompt = NULL, * prompt_file = NULL, * out_path = NULL, * normalize = NULL, * dump_dir = NULL;
    bool all = false, no_special = false, no_bos = false;
    int  top = 10;
    struct cli_option opts[24];
    int n_opts = 0;
    opts[n_opts++] = (struct cli_option) {"-p", "--prompt", CLI_STRING, &prompt, "the prompt"};
    opts[n_opts++] = (struct cli_option) {"-f", "--file", CLI_IN_FILE, &prompt_file, "read the prompt from a file"};
    opts[n_opts++] = (struct cli_option) {"-o", "--output", CLI_OUT_FILE, &out_path, "write the logits here"};
    opts[n_opts++] = (struct cli_option) {NULL, "--all", CLI_FLAG, &all, "every position's logits, not only the last"};
    opts[n_opts++] = (struct cli_option) {NULL, "--top", CLI_INT, &top, "how many top logits to print (default 10)"};
    opts[n_opts++] = (struct cli_option) {NULL, "--no-special", CLI_FLAG, &no_special,
                                          "do not parse special tokens in the prompt (default: parse them)"};
    opts[n_opts++] = (struct cli_option) {NULL, "--no-bos", CLI_FLAG, &no_bos,
                                          "do not add BOS even if the vocabulary asks for it"};
    opts[n_opts++] = (struct cli_option) {NULL, "--dump-tensors", CLI_OUT_DIR, &dump_dir,
                                          "write the last batch's intermediate tensors as .npy files here"};
    opts[n_opts++] = (struct cli_option) {NULL, "--normalize", CLI_STRING, &normalize, "nfc: the text in Unicode NFC first (default: as given)"};
    if (!cli_parse_engine_command(cmd, argc, argv, usage, opts, n_opts, &e, NULL)) return 1;
    if (top < 0) {
        fprintf(stderr, "mg %s: --top must be >= 0, got %d\n", cmd, top);
        return 1;
    }
    size_t len;
    char * text = cli_prompt_text_normalized(cmd, prompt, prompt_file, normalize, &len);
    if (text == NULL) return 1;

    int                 status = 1;
    struct mg_session * s      = NULL;
    int32_t *           tokens = NULL;
    struct mg_npy_dumper dumper = {0};
    struct mg_model *   m      = cli_load_model(cmd, e.model, !e.no_repack, !e.no_huge_pages, NULL);
    if (m == NULL) goto done;
    s = cli_session_new_dumping(cmd, m, &e, dump_dir, &dumper);
    if (s == NULL) goto done;
    int32_t n = 0;
    tokens = cli_tokenize(cmd, m->vocab, text, len, !no_bos, !no_special, &n);
    if (tokens == NULL) goto done;
    // With a dump and several batches, the batches before the last are not dumped.
    const int n_last  = all || n <= 0 ? n : (n - 1) % cli_session_params(&e).n_batch + 1;
    dumper.active = false;
    bool decoded  = n > 0 && (n_last == n || mg_decode(s, tokens, n - n_last, false));
    dumper.active = true;
    decoded       = decoded && mg_decode(s, tokens + n - n_last, n_last, all);
    if (!decoded) {
        fprintf(stderr, "mg %s: %s\n", cmd, n <= 0 ? "the prompt is empty" : cli_last_error());
        goto done;
    }
    if (dump_dir != NULL) {
        printf("dumped %d tensors to %s (order.txt lists them)\n", dumper.n_written, dump_dir);
        if (dumper.n_failed > 0) {
            fprintf(stderr, "mg %s: %d tensors not written: %s\n", cmd, dumper.n_failed, cli_last_error());
            goto done;
        }
    }
    const int n_rows = all ? n : 1;
    if (!mg_logits_finite(mg_get_logits(s), n_rows, m->hp.n_vocab, n - n_rows)) {
        fprintf(stderr, "mg %s: %s\n", cmd, cli_last_error());
        goto done;
    }
    if (out_path != NULL && !write_logits(cmd, out_path, mg_get_logits(s), n_rows, m->hp.n_vocab)) goto done;
    printf("tokens (%d):", n);
    for (int i = 0; i < n; i++) printf(" %d", tokens[i]);
    printf("\n");
    if (!print_top(m->vocab, mg_get_logits(s) + (size_t) (n_rows - 1) * (size_t) m->hp.n_vocab, m->hp.n_vocab, top)) {
        fprintf(stderr, "mg %s: out of memory\n", cmd);
        goto done;
    }
    status = 0;

done:
    mg_npy_dumper_close(&dumper);
    free(tokens);
    free(text);
    mg_session_free(s);
    mg_model_free(m);
    return status;
}
