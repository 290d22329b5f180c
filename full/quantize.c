//@file full
// quantize.c - a GGUF model rewritten with quantized weights (quantize.h):
// llama.cpp's llama_model_quantize_impl (src/llama-quant.cpp) redone. The
// recipe (which type each tensor gets) is quant_recipe.c's; this file plans
// every tensor, converts the rows on n_threads threads, and writes the file
// through gguf_writer.c (outfile.c's temporary file, fsync and rename).
#define _POSIX_C_SOURCE 200809L   // sysconf
#include "quantize.h"
#include "gguf_writer.h"
#include "memmap.h"
#include "mg.h"
#include "outfile.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { MAX_THREADS = 512 };

struct mg_quantize_params mg_quantize_default_params(void) {
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return (struct mg_quantize_params) {
        .ftype     = MG_FTYPE_Q5_1,
        .n_threads = cores > 0 ? (int) (cores < MAX_THREADS ? cores : MAX_THREADS) : 1,
    };
}

static const char * type_name(int type_id) {
    const char * name = mg_gguf_ggml_type_name(type_id);
    return name ? name : "?";
}

static int64_t n_elements(const struct mg_gguf_tensor_info * t) {
    return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

// ---------------------------------------------------------------------------
// The plan: every tensor, in llama-quantize's order, with its new type
// ---------------------------------------------------------------------------

// The writing order (mg_quant_tensor_order), for qsort.
static int compare_tensors(const void * a, const void * b) {
    const struct mg_quantize_tensor * x = a, * y = b;
    return mg_quant_tensor_order(x->in->name, y->in->name);
}

// Whether tensor p, to be converted, can be: its type can be read, and it is
// not quantized already unless allow_requantize says so. False after mg_set_error.
static bool convertible(const struct mg_quantize_tensor * p, bool allow_requantize) {
    const struct mg_gguf_tensor_info * in  = p->in;
    const struct mg_type_traits *      src = mg_type_is_supported(in->type) ? mg_get_type_traits(in->type) : NULL;
    if (src == NULL || src->to_float == NULL) {
        mg_set_error("%s: cannot read type %s (this engine does not decode it)", mg_quote(in->name), type_name(in->type));
        return false;
    }
    if (src->is_quantized && !allow_requantize) {
        mg_set_error("%s is already quantized (%s); requantizing to %s loses more than quantizing from F32/F16/BF16 "
                     "would. Use allow_requantize to do it anyway", in->name, type_name(in->type), mg_type_name(p->type));
        return false;
    }
    return true;
}

// Decide every tensor's type (plan[] is in writing order: the rules count
// attn_v and ffn_down). False after mg_set_error for a tensor that would
// have to be converted and cannot be.
static bool plan_tensors(const struct mg_quantize_params * params, const struct mg_quant_option * option,
                         const struct mg_gguf * g, struct mg_quantize_tensor * plan, int n) {
    struct mg_quant_mix mix;
    mg_quant_mix_init(&mix, g, option, params->pure);
    for (int i = 0; i < n; i++) {
        struct mg_quantize_tensor *        p  = &plan[i];
        const struct mg_gguf_tensor_info * in = p->in;
        p->type = mg_quant_tensor_type(&mix, in, &p->wanted);
        if (p->type == MG_TYPE_COUNT) return false;
        p->convert = (int) p->type != in->type;
        p->nbytes  = p->convert ? mg_row_size(p->type, in->ne[0]) * (size_t) (in->ne[1] * in->ne[2] * in->ne[3])
                                : in->nbytes;
        if (p->convert && !convertible(p, params->allow_requantize)) return false;
    }
    return true;
}

// split.count > 1: this file is one shard of a model (llama-gguf-split).
static bool check_not_split(const struct mg_gguf * g) {
    uint32_t n_split = 1;
    if (mg_gguf_find_key(g, "split.count") >= 0 && mg_gguf_get_u32(g, "split.count", &n_split) && n_split > 1) {
        mg_set_error("%s is one of %u shards; merge them first (llama-gguf-split --merge)", mg_quote(mg_gguf_path(g)),
                     n_split);
        return false;
    }
    mg_clear_error();
    return true;
}

// The converted tensors are held in memory until the file is written, and
// the file holds every tensor: both sizes are known from the plan, so they
// are checked before any row is converted. False after mg_set_error.
static bool output_fits(const char * out, const struct mg_quantize_tensor * plan, int n) {
    uint64_t file = 0, held = 0;
    for (int i = 0; i < n; i++) {
        file += plan[i].nbytes;
        held += plan[i].convert ? plan[i].nbytes : 0;
    }
    const char *   what;
    const uint64_t limit = mg_memory_limit(&what);
    if (held > limit) {
        mg_set_error("the converted tensors are %llu bytes, more than %s, %llu bytes", (unsigned long long) held, what,
                     (unsigned long long) limit);
        return false;
    }
    return mg_outfile_room(NULL, out, file);
}

// ---------------------------------------------------------------------------
// Converting rows: F32 in the middle, every row on its own (so any number of
// threads writes the same bytes)
// ---------------------------------------------------------------------------

struct convert_job {
    struct mg_quantize_tensor * p;
    int64_t                     row0, row1;
    float *                     x, * y;     // two rows of scratch
    bool                        stats;
    double                      err2, x2;
    int64_t                     bad_row, bad_col;   // the first value that is not finite, or -1
};

// The squared error of row y against row x, and x's squares, into the job's sums.
static void add_row_error(struct convert_job * job, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        const double d = (double) job->x[i] - (double) job->y[i];
        job->err2 += d * d;
        job->x2 += (double) job->x[i] * (double) job->x[i];
    }
}

// Rows row0..row1 of one tensor: to F32 with the source's to_float, then to
// the new type with its from_float (ggml's type traits, as llama-quant.cpp's
// llama_tensor_dequantize_impl and ggml_quantize_chunk do).
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
            add_row_error(job, n);
        }
    }
    return NULL;
}

// The bands' sums into p; false after mg_set_error if a band met a value that
// is not finite (llama-quantize refuses them too: ggml_validate_row_data on
// what it wrote).
static bool gather_bands(struct mg_quantize_tensor * p, const struct convert_job * jobs, int n_jobs) {
    int bad = -1;   // the first band with a value that is not finite
    for (int j = 0; j < n_jobs; j++) {
        p->err2 += jobs[j].err2;
        p->x2 += jobs[j].x2;
        if (bad < 0 && jobs[j].bad_row >= 0) bad = j;
    }
    if (bad >= 0) {
        mg_set_error("%s: row %lld, element %lld is not a finite number; the model's weights are damaged",
                     mg_quote(p->in->name), (long long) jobs[bad].bad_row, (long long) jobs[bad].bad_col);
    }
    return bad < 0;
}

// Convert one tensor on up to n_threads threads, each a band of rows. False
// after mg_set_error.
static bool convert_tensor(struct mg_quantize_tensor * p, int n_threads, bool stats) {
    const struct mg_gguf_tensor_info * in = p->in;
    const int64_t n_rows = in->ne[1] * in->ne[2] * in->ne[3];
    const int     n_jobs = (int) (n_rows < n_threads ? n_rows : n_threads);
    p->data = malloc(p->nbytes);
    struct convert_job * jobs = calloc((size_t) n_jobs, sizeof(*jobs));
    pthread_t *          tids = calloc((size_t) n_jobs, sizeof(*tids));
    bool *               started = calloc((size_t) n_jobs, sizeof(*started));
    const size_t         ne0 = (size_t) in->ne[0];
    float *              scratch = malloc((size_t) n_jobs * 2 * ne0 * sizeof(float));
    bool                 ok = p->data && jobs && tids && started && scratch;
    if (!ok) mg_set_error("out of memory converting %s (%zu bytes)", mg_quote(in->name), p->nbytes);
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
    for (int j = 0; ok && j < n_jobs; j++) {
        if (started[j]) pthread_join(tids[j], NULL);
    }
    ok = ok && gather_bands(p, jobs, n_jobs);
    free(scratch);
    free(started);
    free(tids);
    free(jobs);
    return ok;
}

// ---------------------------------------------------------------------------
// The output file
// ---------------------------------------------------------------------------

static bool write_output(const char * path, enum mg_ftype ftype, const struct mg_gguf * g,
                         const struct mg_quantize_tensor * plan, int n) {
    static const char * const split_keys[] = {"split.no", "split.count", "split.tensors.count", NULL};
    struct mg_gguf_writer * w = mg_gguf_writer_new();
    if (w == NULL) {
        mg_set_error("%s: out of memory", mg_quote(path));
        return false;
    }
    // llama-quantize copies every pair, then sets these two (so they end up last).
    bool ok = mg_gguf_writer_copy_kvs(w, g, split_keys) &&
              mg_gguf_writer_set_u32(w, "general.quantization_version", 2) &&
              mg_gguf_writer_set_u32(w, "general.file_type", (uint32_t) ftype);
    for (int i = 0; ok && i < n; i++) {
        const struct mg_gguf_tensor_info * in = plan[i].in;
        ok = mg_gguf_writer_add_tensor(w, in->name, plan[i].convert ? (int) plan[i].type : in->type, mg_quant_n_dims(in),
                                       in->ne, plan[i].convert ? plan[i].data : in->data);
    }
    ok = ok && mg_gguf_writer_write(w, path);
    mg_gguf_writer_free(w);
    return ok;
}

// ---------------------------------------------------------------------------
// The whole run
// ---------------------------------------------------------------------------

// One call of mg_model_quantize: what it read and planned, and what it reports.
struct quantize_run {
    const struct mg_quantize_params * params;
    struct mg_quant_option            option;
    struct mg_gguf *                  g;
    struct mg_quantize_tensor *       plan;       // [n], in writing order
    int                               n;
    struct mg_quantize_progress       progress;   // the totals so far
};

static void report(struct quantize_run * r, enum mg_quantize_stage stage, int i) {
    r->progress.stage  = stage;
    r->progress.i      = i;
    r->progress.tensor = stage == MG_QUANTIZE_TENSOR ? &r->plan[i] : NULL;
    if (r->params->progress != NULL) r->params->progress(&r->progress, r->params->progress_data);
}

// The parameters a caller can get wrong, checked before any work. False after mg_set_error.
static bool check_params(const struct mg_quantize_params * params, struct mg_quant_option * option) {
    if (!mg_quant_option_of_ftype(params->ftype, option)) {
        mg_set_error("ftype %d is no file type this engine writes (quant_recipe.h, enum mg_ftype)", (int) params->ftype);
        return false;
    }
    if (params->n_threads < 1 || params->n_threads > MAX_THREADS) {
        mg_set_error("n_threads must be 1..%d, got %d", MAX_THREADS, params->n_threads);
        return false;
    }
    return true;
}

// Every tensor of the input in writing order, its type and size decided. False after mg_set_error.
static bool plan_model(struct quantize_run * r) {
    r->n    = (int) mg_gguf_n_tensors(r->g);
    r->plan = calloc((size_t) (r->n > 0 ? r->n : 1), sizeof(*r->plan));
    if (r->plan == NULL) {
        mg_set_error("out of memory planning %d tensors", r->n);
        return false;
    }
    r->progress.n_tensors = r->n;
    for (int i = 0; i < r->n; i++) {
        r->plan[i].in = mg_gguf_tensor(r->g, i);
        const int len = (int) strlen(r->plan[i].in->name);
        r->progress.name_width = len > r->progress.name_width ? len : r->progress.name_width;
    }
    qsort(r->plan, (size_t) r->n, sizeof(*r->plan), compare_tensors);
    return check_not_split(r->g) && plan_tensors(r->params, &r->option, r->g, r->plan, r->n);
}

// Tensor i converted (unless dry_run), added to the totals and reported.
static bool convert_and_report(struct quantize_run * r, int i) {
    struct mg_quantize_tensor * p = &r->plan[i];
    if (p->convert && !r->params->dry_run && !convert_tensor(p, r->params->n_threads, r->params->stats)) return false;
    struct mg_quantize_progress * t = &r->progress;
    t->size_in += p->in->nbytes;
    t->size_out += p->nbytes;
    t->n_weights += n_elements(p->in);
    t->n_converted += p->convert ? n_elements(p->in) : 0;
    t->err2 += p->err2;
    t->x2 += p->x2;
    report(r, MG_QUANTIZE_TENSOR, i);
    return true;
}

static bool quantize_opened(struct quantize_run * r) {
    const bool dry_run = r->params->dry_run;
    if (!plan_model(r) || (!dry_run && !output_fits(r->progress.path, r->plan, r->n))) return false;
    report(r, MG_QUANTIZE_PLANNED, -1);
    for (int i = 0; i < r->n; i++) {
        if (!convert_and_report(r, i)) return false;
    }
    if (!dry_run && !write_output(r->progress.path, r->option.ftype, r->g, r->plan, r->n)) return false;
    report(r, MG_QUANTIZE_DONE, -1);
    return true;
}

bool mg_model_quantize(const char * fname_inp, const char * fname_out, const struct mg_quantize_params * params) {
    struct quantize_run r = {.params = params};
    if (!check_params(params, &r.option)) return false;
    char *    target = NULL;   // fname_out, or a symlink's target (outfile.h)
    const int inputs = mg_outfile_inputs_mark();
    if (!params->dry_run) {
        mg_outfile_input(fname_inp);   // so that no output replaces it, until the file is written
        if ((target = mg_outfile_target(NULL, fname_out)) == NULL) {
            mg_outfile_inputs_forget_since(inputs);
            return false;
        }
    }
    r.progress.path = target;
    r.g             = mg_gguf_open(fname_inp);
    const bool ok   = r.g != NULL && quantize_opened(&r);
    for (int i = 0; r.plan != NULL && i < r.n; i++) free(r.plan[i].data);
    free(r.plan);
    mg_gguf_close(r.g);
    free(target);
    mg_outfile_inputs_forget_since(inputs);   // the next call's input may be this call's output
    return ok;
}
