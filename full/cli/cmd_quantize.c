//@file full
// cmd_quantize.c - mg quantize: a GGUF model rewritten with quantized weights.
//
//     $ mg quantize tiny-f32.gguf tiny-q4_k_m.gguf Q4_K_M
//     [  1/ 24] output_norm.weight        f32             [256]              0.00 MiB (kept)
//     [  2/ 24] token_embd.weight         f32 -> q6_K     [256, 6400]        6.25 MiB ->    1.28 MiB
//     [  3/ 24] blk.0.attn_k.weight       f32 -> q4_K     [256, 128]         0.12 MiB ->    0.02 MiB
//     ...
//     mg quantize: wrote 24 tensors, 12.26 MiB -> 2.19 MiB (32.00 -> 5.71 bits per weight)
//
// It is llama-quantize (llama.cpp tools/quantize, src/llama-quant.cpp) redone:
// the same TYPE names with the same meaning, the same per-tensor choices, the
// same reference quantizers (quants*.c, bit-exact with ggml's), the same tensor
// order and metadata. So `mg quantize` and `llama-quantize` given the same
// input and TYPE write the same bytes (tests/full/test_quantize.c checks this
// against the fixtures llama-quantize made). As llama-quantize is a thin
// command over llama.cpp's llama_model_quantize, this file only parses and
// prints: the work is mg_model_quantize's (quantize.c), and what it reports
// through its progress callback is printed here.
//
// A TYPE names a *file type* (llama.cpp's enum llama_ftype), not one tensor
// type. Q4_K_M, for instance, means "mostly Q4_K": every matrix is Q4_K except
// where llama_tensor_get_type_impl knows better (the tied embedding in Q6_K,
// attn_v and ffn_down of some layers in Q6_K). Even the single-type names carry
// llama-quantize's rules: Q4_0 puts a tied token_embd in Q6_K, and Q3_K, Q4_K,
// Q5_K are llama-quantize's aliases of the _M mixes. --pure turns the rules
// off: every matrix gets TYPE's own tensor type (llama-quantize --pure).
//
// A matrix whose rows do not split into that type's blocks (MiniMind's ffn_down
// has rows of 2432 = 9.5 x 256) falls back to a 32-element type, as
// llama-quantize's tensor_type_fallback does. Vectors (norms) are copied as
// they are.
#include "cli.h"
#include "memmap.h"   // mg_mib
#include "quantize.h"

#include <math.h>
#include <stdio.h>

static const char * usage =
    "usage: mg quantize [options] IN.gguf OUT.gguf TYPE\n"
    "\n"
    "Writes IN's weights in TYPE, the way llama-quantize does (same names, same per-tensor choices,\n"
    "same bytes). IN's matrices must be F32, F16 or BF16 (quantized ones need --allow-requantize).\n"
    "\n"
    "TYPE (any case; the number is general.file_type, llama.cpp's llama_ftype):\n"
    "   0  F32      1  F16     32  BF16\n"
    "   2  Q4_0     3  Q4_1     8  Q5_0     9  Q5_1     7  Q8_0    25  IQ4_NL    18  Q6_K\n"
    "  10  Q2_K    11  Q3_K_S  12  Q3_K_M  13  Q3_K_L  14  Q4_K_S  15  Q4_K_M   16  Q5_K_S  17  Q5_K_M\n"
    "      Q3_K, Q4_K, Q5_K are aliases of Q3_K_M, Q4_K_M, Q5_K_M (as in llama-quantize)\n"
    "Quantized TYPEs follow llama-quantize's rules: a tied token_embd (or output.weight) gets Q6_K,\n"
    "the _M mixes give attn_v and ffn_down of some layers more bits, and so on. --pure gives every\n"
    "matrix TYPE's own tensor type instead. Vectors (norms) are copied unchanged.";

// ---------------------------------------------------------------------------
// What the library reports, printed (mg_quantize_progress_callback)
// ---------------------------------------------------------------------------

struct options {
    const char *              in, * out;
    struct mg_quant_option    qo;       // TYPE, as given (an alias keeps its name)
    struct mg_quantize_params params;
};

static const char * type_name(int type_id) {
    const char * name = mg_gguf_ggml_type_name(type_id);
    return name ? name : "?";
}

static int digits(int n) {
    int d = 1;
    while (n >= 10) n /= 10, d++;
    return d;
}

// mg quantize: tiny-f32.gguf -> tiny-q4_k_m.gguf as Q4_K_M (general.file_type 15), 2 threads
static void print_header(const struct options * o, const struct mg_quantize_progress * p) {
    const int n_threads = o->params.n_threads;
    printf("mg quantize: %s -> %s as %s (general.file_type %d%s), %d thread%s\n", o->in,
           p->path != NULL ? p->path : "(dry run)", o->qo.name, (int) o->qo.ftype, o->params.pure ? ", --pure" : "",
           n_threads, n_threads == 1 ? "" : "s");
}

// [ 12/ 29] blk.1.attn_q.weight  f32 -> q4_K  [768, 768]  2.25 MiB -> 0.32 MiB
static void print_tensor(const struct mg_quantize_progress * p, bool stats) {
    const struct mg_quantize_tensor *  t  = p->tensor;
    const struct mg_gguf_tensor_info * in = t->in;
    const int w = digits(p->n_tensors) < 3 ? 3 : digits(p->n_tensors);
    char      shape[MG_SHAPE_STR_MAX], types[40];
    if (t->convert) {
        snprintf(types, sizeof(types), "%s -> %s", type_name(in->type), mg_type_name(t->type));
    } else {
        snprintf(types, sizeof(types), "%s", type_name(in->type));
    }
    mg_shape_str(in->ne, mg_quant_n_dims(in), ", ", shape, sizeof(shape));   // "[768, 768]": no trailing 1s
    printf("[%*d/%*d] %-*s  %-14s  %-14s", w, p->i + 1, w, p->n_tensors, p->name_width, in->name, types, shape);
    if (!t->convert) {
        printf("  %7.2f MiB (kept)\n", mg_mib(in->nbytes));
        return;
    }
    printf("  %7.2f MiB -> %7.2f MiB", mg_mib(in->nbytes), mg_mib(t->nbytes));
    if (t->wanted != t->type) {
        printf("  (%s needs rows of a multiple of %lld)", mg_type_name(t->wanted), (long long) mg_blck_size(t->wanted));
    }
    if (stats) {
        const double n = (double) (in->ne[0] * in->ne[1] * in->ne[2] * in->ne[3]);
        const double rms = sqrt(t->err2 / n), rms_x = sqrt(t->x2 / n);
        printf("  rms error %.3e (%.3f%% of the weights' rms)", rms, rms_x > 0 ? 100.0 * rms / rms_x : 0.0);
    }
    printf("\n");
}

// mg quantize: wrote 24 tensors, 12.26 MiB -> 2.19 MiB (32.00 -> 5.71 bits per weight)
static void print_totals(const struct options * o, const struct mg_quantize_progress * p) {
    const double w = p->n_weights > 0 ? (double) p->n_weights : 1.0;
    printf("mg quantize: %s %d tensors, %.2f MiB -> %.2f MiB (%.2f -> %.2f bits per weight)\n",
           o->params.dry_run ? "would write" : "wrote", p->n_tensors, mg_mib(p->size_in), mg_mib(p->size_out),
           8.0 * (double) p->size_in / w, 8.0 * (double) p->size_out / w);
    if (o->params.stats && !o->params.dry_run && p->x2 > 0) {
        printf("mg quantize: rms error over all converted weights %.3e (%.3f%% of their rms)\n",
               sqrt(p->err2 / (double) p->n_converted), 100.0 * sqrt(p->err2 / p->x2));
    }
}

static void print_progress(const struct mg_quantize_progress * p, void * user_data) {
    const struct options * o = user_data;
    switch (p->stage) {
        case MG_QUANTIZE_PLANNED: print_header(o, p); break;
        case MG_QUANTIZE_TENSOR:  print_tensor(p, o->params.stats && !o->params.dry_run); break;
        case MG_QUANTIZE_DONE:    print_totals(o, p); break;
    }
}

// ---------------------------------------------------------------------------
// The command
// ---------------------------------------------------------------------------

// The flags into o->params (whose checks are the library's: mg_model_quantize
// names n_threads, cli_last_error says --threads), TYPE into o->qo.
static bool parse_args(int argc, char ** argv, struct options * o) {
    struct mg_quantize_params * p = &o->params;
    const struct cli_option opts[] = {
        {NULL, "--pure", CLI_FLAG, &p->pure, "every matrix in TYPE's own tensor type: no mix rules"},
        {NULL, "--allow-requantize", CLI_FLAG, &p->allow_requantize, "accept quantized input matrices"},
        {NULL, "--stats", CLI_FLAG, &p->stats, "print each tensor's RMS quantization error"},
        {NULL, "--dry-run", CLI_FLAG, &p->dry_run, "show the types and sizes; write nothing"},
        {"-t", "--threads", CLI_INT, &p->n_threads, "threads (default: all cores)"},
    };
    const char * pos[3];
    int          n_pos;
    if (!cli_parse(argc, argv, usage, opts, (int) (sizeof(opts) / sizeof(opts[0])), pos, 3, &n_pos)) return false;
    if (n_pos != 3) {
        fprintf(stderr, "mg quantize: give IN.gguf OUT.gguf TYPE (see mg quantize --help)\n");
        return false;
    }
    o->in  = pos[0];
    o->out = pos[1];
    if (!mg_quant_option_parse(pos[2], &o->qo)) {
        fprintf(stderr, "mg quantize: unknown TYPE '%s'; choose F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, "
                "Q6_K, Q2_K, Q3_K_S, Q3_K_M, Q3_K_L, Q4_K_S, Q4_K_M, Q5_K_S or Q5_K_M\n", pos[2]);
        return false;
    }
    p->ftype = o->qo.ftype;
    return true;
}

int cmd_quantize(int argc, char ** argv) {
    struct options o = {.params = mg_quantize_default_params()};
    if (!parse_args(argc, argv, &o)) return 1;
    o.params.progress      = print_progress;
    o.params.progress_data = &o;
    if (!mg_model_quantize(o.in, o.out, &o.params)) {
        fprintf(stderr, "mg quantize: %s\n", cli_last_error());
        return 1;
    }
    return 0;
}
