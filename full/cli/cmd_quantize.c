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
// against the fixtures llama-quantize made).
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
#define _POSIX_C_SOURCE 200809L   // sysconf
#include "cli.h"
#include "gguf_writer.h"
#include "memmap.h"
#include "outfile.h"
#include "quant_recipe.h"

#include <ctype.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

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
// The plan: every tensor, in llama-quantize's order, with its new type
// ---------------------------------------------------------------------------

struct tensor_plan {
    const struct mg_gguf_tensor_info * in;
    enum mg_type wanted;     // what the rules asked for
    enum mg_type type;       // what it becomes (wanted, or its shape fallback)
    bool         convert;    // false: the bytes are copied unchanged
    size_t       nbytes;     // new size
    void *       data;       // the new bytes (when converted)
    double       err2, x2;   // --stats: sums of squared errors and of squared weights
};


// The writing order (mg_quant_tensor_order), for qsort.
static int compare_tensors(const void * a, const void * b) {
    const struct tensor_plan * x = a, * y = b;
    return mg_quant_tensor_order(x->in->name, y->in->name);
}

struct options {
    const char *       in, * out;
    struct mg_quant_option qo;
    bool               pure, allow_requantize, stats, dry_run;
    int                n_threads;
};

static const char * type_name(int type_id) {
    const char * name = mg_gguf_ggml_type_name(type_id);
    return name ? name : "?";
}

// Decide every tensor's type. False (after saying why) for a tensor that would
// have to be converted and cannot be.
static bool plan_tensors(const struct options * o, const struct mg_gguf * g, struct tensor_plan * plan, int n) {
    struct mg_quant_mix mix;
    mg_quant_mix_init(&mix, g, &o->qo, o->pure);
    for (int i = 0; i < n; i++) {
        struct tensor_plan *               p  = &plan[i];
        const struct mg_gguf_tensor_info * in = p->in;
        p->type = mg_quant_tensor_type(&mix, in, &p->wanted);
        if (p->type == MG_TYPE_COUNT) {
            fprintf(stderr, "mg quantize: %s\n", cli_last_error());
            return false;
        }
        p->convert = (int) p->type != in->type;
        p->nbytes  = p->convert ? mg_row_size(p->type, in->ne[0]) * (size_t) (in->ne[1] * in->ne[2] * in->ne[3])
                                : in->nbytes;
        if (!p->convert) continue;
        const struct mg_type_traits * src = mg_type_is_supported(in->type) ? mg_get_type_traits(in->type) : NULL;
        if (src == NULL || src->to_float == NULL) {
            fprintf(stderr, "mg quantize: %s: cannot read type %s (this engine does not decode it)\n",
                    mg_quote(in->name),
                    type_name(in->type));
            return false;
        }
        if (src->is_quantized && !o->allow_requantize) {
            fprintf(stderr, "mg quantize: %s is already quantized (%s); requantizing to %s loses more than quantizing "
                    "from F32/F16/BF16 would. Use --allow-requantize to do it anyway\n", in->name,
                    type_name(in->type), mg_type_name(p->type));
            return false;
        }
    }
    return true;
}

// ---------------------------------------------------------------------------
// Converting rows: F32 in the middle, every row on its own (so any number of
// threads writes the same bytes)
// ---------------------------------------------------------------------------

struct convert_job {
    struct tensor_plan * p;
    int64_t              row0, row1;
    float *              x, * y;     // two rows of scratch
    bool                 stats;
    double               err2, x2;
    int64_t              bad_row, bad_col;   // the first value that is not finite, or -1
};

static void * convert_rows(void * arg) {
    struct convert_job *               job = arg;
    const struct mg_gguf_tensor_info * in  = job->p->in;
    const enum mg_type                 src_type = (enum mg_type) in->type, dst_type = job->p->type;
    const struct mg_type_traits *      src = mg_get_type_traits(src_type), * dst = mg_get_type_traits(dst_type);
    const int64_t                      n = in->ne[0];
    const size_t                       src_row = mg_row_size(src_type, n), dst_row = mg_row_size(dst_type, n);
    for (int64_t r = job->row0; r < job->row1; r++) {
        char * out = (char *) job->p->data + (size_t) r * dst_row;
        src->to_float((const char *) in->data + (size_t) r * src_row, job->x, n);
        for (int64_t i = 0; job->bad_row < 0 && i < n; i++) {
            if (!isfinite(job->x[i])) job->bad_row = r, job->bad_col = i;
        }
        if (dst_type == MG_TYPE_F32) {
            memcpy(out, job->x, dst_row);   // F32 has no from_float: it is the format in the middle
        } else {
            dst->from_float(job->x, out, n);
        }
        if (job->stats) {
            dst->to_float(out, job->y, n);
            for (int64_t i = 0; i < n; i++) {
                const double d = (double) job->x[i] - (double) job->y[i];
                job->err2 += d * d;
                job->x2 += (double) job->x[i] * (double) job->x[i];
            }
        }
    }
    return NULL;
}

// Convert one tensor on up to n_threads threads, each a band of rows.
static bool convert_tensor(struct tensor_plan * p, int n_threads, bool stats) {
    const struct mg_gguf_tensor_info * in = p->in;
    const int64_t n_rows = in->ne[1] * in->ne[2] * in->ne[3];
    const int     n_jobs = (int) (n_rows < n_threads ? n_rows : n_threads);
    p->data = malloc(p->nbytes);
    struct convert_job * jobs = calloc((size_t) n_jobs, sizeof(*jobs));
    pthread_t *          tids = calloc((size_t) n_jobs, sizeof(*tids));
    bool *               started = calloc((size_t) n_jobs, sizeof(*started));
    const size_t         ne0 = (size_t) in->ne[0];
    float *              scratch = malloc((size_t) n_jobs * 2 * ne0 * sizeof(float));
    const bool           ok = p->data && jobs && tids && started && scratch;
    if (!ok) {
        fprintf(stderr, "mg quantize: out of memory converting %s (%zu bytes)\n", mg_quote(in->name), p->nbytes);
    }
    for (int j = 0; ok && j < n_jobs; j++) {
        float * x = scratch + (size_t) j * 2 * ne0;
        jobs[j] = (struct convert_job) {
            .p = p, .row0 = n_rows * j / n_jobs, .row1 = n_rows * (j + 1) / n_jobs,
            .x = x, .y = x + ne0, .stats = stats, .bad_row = -1, .bad_col = -1,
        };
        // The last band runs here; a thread that cannot start runs here too.
        started[j] = j < n_jobs - 1 && pthread_create(&tids[j], NULL, convert_rows, &jobs[j]) == 0;
        if (!started[j]) convert_rows(&jobs[j]);
    }
    int bad = -1;   // the first band with a value that is not finite
    for (int j = 0; ok && j < n_jobs; j++) {
        if (started[j]) pthread_join(tids[j], NULL);
        p->err2 += jobs[j].err2;
        p->x2 += jobs[j].x2;
        if (bad < 0 && jobs[j].bad_row >= 0) bad = j;
    }
    // NaN or inf in the weights: llama-quantize refuses them too (ggml_validate_row_data on what it wrote).
    if (ok && bad >= 0) {
        fprintf(stderr, "mg quantize: %s: row %lld, element %lld is not a finite number; the model's weights are "
                        "damaged\n", mg_quote(in->name), (long long) jobs[bad].bad_row, (long long) jobs[bad].bad_col);
    }
    const bool finite = bad < 0;
    free(scratch);
    free(started);
    free(tids);
    free(jobs);
    return ok && finite;
}

// ---------------------------------------------------------------------------
// Progress and totals
// ---------------------------------------------------------------------------

static int64_t n_elements(const struct mg_gguf_tensor_info * t) {
    return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

static int digits(int n) {
    int d = 1;
    while (n >= 10) n /= 10, d++;
    return d;
}

// [ 12/ 29] blk.1.attn_q.weight  f32 -> q4_K  [768, 768]  2.25 MiB -> 0.32 MiB
static void print_progress(const struct tensor_plan * p, int i, int n, int name_width, bool stats) {
    const struct mg_gguf_tensor_info * in = p->in;
    const int w = digits(n) < 3 ? 3 : digits(n);
    char      shape[MG_SHAPE_STR_MAX], types[40];
    if (p->convert) {
        snprintf(types, sizeof(types), "%s -> %s", type_name(in->type), mg_type_name(p->type));
    } else {
        snprintf(types, sizeof(types), "%s", type_name(in->type));
    }
    mg_shape_str(in->ne, mg_quant_n_dims(in), ", ", shape, sizeof(shape));   // "[768, 768]": no trailing 1s
    printf("[%*d/%*d] %-*s  %-14s  %-14s", w, i + 1, w, n, name_width, in->name, types, shape);
    if (!p->convert) {
        printf("  %7.2f MiB (kept)\n", mg_mib(in->nbytes));
        return;
    }
    printf("  %7.2f MiB -> %7.2f MiB", mg_mib(in->nbytes), mg_mib(p->nbytes));
    if (p->wanted != p->type) {
        printf("  (%s needs rows of a multiple of %lld)", mg_type_name(p->wanted), (long long) mg_blck_size(p->wanted));
    }
    if (stats) {
        const double rms = sqrt(p->err2 / (double) n_elements(in)), rms_x = sqrt(p->x2 / (double) n_elements(in));
        printf("  rms error %.3e (%.3f%% of the weights' rms)", rms, rms_x > 0 ? 100.0 * rms / rms_x : 0.0);
    }
    printf("\n");
}

// ---------------------------------------------------------------------------
// The command
// ---------------------------------------------------------------------------

// split.count > 1: this file is one shard of a model (llama-gguf-split).
static bool check_not_split(const struct mg_gguf * g) {
    uint32_t n_split = 1;
    if (mg_gguf_find_key(g, "split.count") >= 0 && mg_gguf_get_u32(g, "split.count", &n_split) && n_split > 1) {
        fprintf(stderr, "mg quantize: %s is one of %u shards; merge them first (llama-gguf-split --merge)\n",
                mg_quote(mg_gguf_path(g)), n_split);
        return false;
    }
    mg_clear_error();
    return true;
}

static bool write_output(const struct options * o, const struct mg_gguf * g, const struct tensor_plan * plan, int n) {
    static const char * const split_keys[] = {"split.no", "split.count", "split.tensors.count", NULL};
    struct mg_gguf_writer * w = mg_gguf_writer_new();
    // llama-quantize copies every pair, then sets these two (so they end up last).
    bool ok = w && mg_gguf_writer_copy_kvs(w, g, split_keys) &&
              mg_gguf_writer_set_u32(w, "general.quantization_version", 2) &&
              mg_gguf_writer_set_u32(w, "general.file_type", (uint32_t) o->qo.ftype);
    for (int i = 0; ok && i < n; i++) {
        const struct mg_gguf_tensor_info * in = plan[i].in;
        ok = mg_gguf_writer_add_tensor(w, in->name, plan[i].convert ? (int) plan[i].type : in->type, mg_quant_n_dims(in),
                                       in->ne, plan[i].convert ? plan[i].data : in->data);
    }
    ok = ok && mg_gguf_writer_write(w, o->out);
    if (!ok) fprintf(stderr, "mg quantize: %s\n", w ? cli_last_error() : "out of memory");
    mg_gguf_writer_free(w);
    return ok;
}

static bool parse_args(int argc, char ** argv, struct options * o) {
    long n_cpu = sysconf(_SC_NPROCESSORS_ONLN);
    o->n_threads = n_cpu > 0 ? (int) (n_cpu < 512 ? n_cpu : 512) : 1;
    const struct cli_option opts[] = {
        {NULL, "--pure", CLI_FLAG, &o->pure, "every matrix in TYPE's own tensor type: no mix rules"},
        {NULL, "--allow-requantize", CLI_FLAG, &o->allow_requantize, "accept quantized input matrices"},
        {NULL, "--stats", CLI_FLAG, &o->stats, "print each tensor's RMS quantization error"},
        {NULL, "--dry-run", CLI_FLAG, &o->dry_run, "show the types and sizes; write nothing"},
        {"-t", "--threads", CLI_INT, &o->n_threads, "threads (default: all cores)"},
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
    if (o->n_threads < 1 || o->n_threads > 512) {
        fprintf(stderr, "mg quantize: --threads must be 1..512, got %d\n", o->n_threads);
        return false;
    }
    return true;
}

// The converted tensors are held in memory until the file is written, and
// the file holds every tensor: both sizes are known from the plan, so they
// are checked before any row is converted. False after saying why.
static bool output_fits(const char * out, const struct tensor_plan * plan, int n) {
    uint64_t file = 0, held = 0;
    for (int i = 0; i < n; i++) {
        file += plan[i].nbytes;
        held += plan[i].convert ? plan[i].nbytes : 0;
    }
    const char *   what;
    const uint64_t limit = mg_memory_limit(&what);
    if (held > limit) {
        fprintf(stderr, "mg quantize: the converted tensors are %llu bytes, more than %s, %llu bytes\n",
                (unsigned long long) held, what, (unsigned long long) limit);
        return false;
    }
    if (!mg_outfile_room(NULL, out, file)) {
        fprintf(stderr, "mg quantize: %s\n", cli_last_error());
        return false;
    }
    return true;
}

int cmd_quantize(int argc, char ** argv) {
    struct options o = {0};
    if (!parse_args(argc, argv, &o)) return 1;
    char * target = NULL;   // OUT, or a symlink's target (cli_output_path)
    if (!o.dry_run && (target = cli_output_path("quantize", o.out, o.in)) == NULL) return 1;
    if (target != NULL) o.out = target;
    struct mg_gguf * g = mg_gguf_open(o.in);
    if (g == NULL) {
        fprintf(stderr, "mg quantize: %s\n", cli_last_error());
        free(target);
        return 1;
    }
    const int            n    = (int) mg_gguf_n_tensors(g);
    struct tensor_plan * plan = calloc((size_t) (n > 0 ? n : 1), sizeof(*plan));
    int                  name_width = 0;
    for (int i = 0; plan && i < n; i++) {
        plan[i].in = mg_gguf_tensor(g, i);
        const int len = (int) strlen(plan[i].in->name);
        name_width = len > name_width ? len : name_width;
    }
    if (plan) qsort(plan, (size_t) n, sizeof(*plan), compare_tensors);
    bool ok = plan != NULL && check_not_split(g) && plan_tensors(&o, g, plan, n);
    ok = ok && (o.dry_run || output_fits(o.out, plan, n));
    if (ok) {
        printf("mg quantize: %s -> %s as %s (general.file_type %d%s), %d thread%s\n", o.in,
               o.dry_run ? "(dry run)" : o.out, o.qo.name, (int) o.qo.ftype, o.pure ? ", --pure" : "", o.n_threads,
               o.n_threads == 1 ? "" : "s");
    }
    size_t  size_in = 0, size_out = 0;
    int64_t n_weights = 0, n_converted = 0;
    double  err2 = 0, x2 = 0;
    for (int i = 0; ok && i < n; i++) {
        struct tensor_plan * p = &plan[i];
        if (p->convert && !o.dry_run) ok = convert_tensor(p, o.n_threads, o.stats);
        if (!ok) break;
        print_progress(p, i, n, name_width, o.stats && !o.dry_run);
        size_in += p->in->nbytes;
        size_out += p->nbytes;
        n_weights += n_elements(p->in);
        n_converted += p->convert ? n_elements(p->in) : 0;
        err2 += p->err2;
        x2 += p->x2;
    }
    if (ok && !o.dry_run) ok = write_output(&o, g, plan, n);
    if (ok) {
        const double w = n_weights > 0 ? (double) n_weights : 1.0;
        printf("mg quantize: %s %d tensors, %.2f MiB -> %.2f MiB (%.2f -> %.2f bits per weight)\n",
               o.dry_run ? "would write" : "wrote", n, mg_mib(size_in), mg_mib(size_out), 8.0 * (double) size_in / w,
               8.0 * (double) size_out / w);
        if (o.stats && !o.dry_run && x2 > 0) {
            printf("mg quantize: rms error over all converted weights %.3e (%.3f%% of their rms)\n",
                   sqrt(err2 / (double) n_converted), 100.0 * sqrt(err2 / x2));
        }
    }
    for (int i = 0; plan && i < n; i++) free(plan[i].data);
    free(plan);
    mg_gguf_close(g);
    free(target);
    return ok ? 0 : 1;
}
