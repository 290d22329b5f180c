//@file 09
// session.c - decode calls: build or reuse a graph, fill its inputs, run it
// (llama.cpp: llama_context::decode, llm_graph_result::can_reuse).
#define _POSIX_C_SOURCE 200809L
#include "session.h"
#include "arena.h"
//@+ full backend
#include "backend.h"
#include "backend_sched.h"
#include "offload.h"
//@- full backend
#include "galloc.h"
//@+ full memory-model
#include "gguf.h"
#include "memmap.h"
//@- full memory-model
#include "plan.h"
#include "threadpool.h"
#include "timeline.h"
#include "trace.h"
#include "vocab.h"

//@+ full logits-finite
#include <math.h>
//@- full logits-finite
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct mg_session {
    struct mg_model *        model;
    struct mg_session_params params;
    struct mg_kv_cache *     kv;
    struct mg_threadpool *   threadpool;
    struct mg_gallocr *      galloc;
#if 0 //@old 09..09 n-past-field
    int                      n_past;
#endif //@old n-past-field

    // The current graph, and the shape it was built for.
    struct mg_context *    graph_ctx;
    struct mg_cgraph *     graph;
    struct mg_batch_inputs in;
    struct mg_tensor *     logits_out;
    int                    graph_n_tokens;
    int                    graph_n_kv;
    bool                   graph_all_logits;
    struct mg_cplan        plan;
    void *                 work;
    size_t                 work_capacity;
    //@+ full backend
    // The CPU backend runs the graph (backend.h): the plan above is its plan's.
    mg_backend_t            cpu;
    mg_backend_graph_plan_t cpu_plan;
    // With -ngl: the device's backend, the scheduler over it and the CPU, and
    // the weights moved to the device (put back by mg_session_free).
    mg_backend_t            gpu;
    struct mg_sched *       sched;
    struct mg_offload *     offload;
    //@- full backend

    float *                 logits;   // what mg_get_logits returns
    size_t                  logits_capacity;
    struct mg_session_stats stats;
    //@+ full seqs
    // The batch being decoded: where its current graph's tokens sit.
    struct {
        const int32_t * pos;     // [n] positions
        const int32_t * seq;     // [n] sequence ids
        int32_t *       cells;   // [n] the cells they were given
        const int32_t * row;     // [n] their rows in logits, or -1 (logits_row from the batch's first)
    } ub;
    int32_t * logits_row;        // token i's row in logits, or -1
    int       logits_rows_n;
    //@- full seqs
    //@+ full dot-extras
    struct mg_timeline *    timeline;   // what mg_session_set_timeline gave, for the drawings' times
    //@- full dot-extras
};

static const struct mg_session_params default_params = {   // n_ctx 0: the model's (llama_context_default_params)
    .n_batch = 512,
    .kv_type = MG_TYPE_F16,
    //@+ full dot-extras
    .dot_layers = -1,
    //@- full dot-extras
};

struct mg_session_params mg_session_default_params(void) {
    const long               cores = sysconf(_SC_NPROCESSORS_ONLN);
    struct mg_session_params p     = default_params;
    p.n_threads                    = cores > 0 ? (int) cores : 1;
    return p;
}

// What the graph just built was made for (the next decode reuses it if it
// asks for the same), and the counts of mg_session_get_stats.
static void note_graph_built(struct mg_session * s, int n_tokens, int n_kv, bool all_logits) {
    s->graph_n_tokens   = n_tokens;
    s->graph_n_kv       = n_kv;
    s->graph_all_logits = all_logits;
    s->stats.n_graphs_built++;
    s->stats.n_nodes = s->graph->n_nodes;
    s->stats.n_kv    = n_kv;
}

// What every session computes with: the workers, the compute buffer, the
// graph's context and the work buffer (the KV cache and the logits, what
// the session keeps between decodes, are freed beside it).
static void free_compute_state(struct mg_session * s) {
    mg_threadpool_free(s->threadpool);
    mg_gallocr_free(s->galloc);
    mg_free(s->graph_ctx);
    free(s->work);
}

//@+ full backend
// -ngl: the layers' weights to the device, its backend, and a scheduler over
// it and the CPU (llama_context makes its ggml_backend_sched the same way).
static bool offload_layers(struct mg_session * s) {
    const struct mg_session_params * p = &s->params;
    if (p->gpu_device == NULL) {
        mg_set_error("n_gpu_layers %d: no device given to offload to", p->n_gpu_layers);
        return false;
    }
    if (p->cb_eval != NULL) {
        mg_set_error("n_gpu_layers %d: the eval callback (cb_eval) with offloaded layers is not yet supported",
                     p->n_gpu_layers);
        return false;
    }
    char cause[256];
    if ((s->offload = mg_offload_weights(s->model, p->gpu_device, p->n_gpu_layers)) == NULL ||
        !mg_offload_kv_cache(s->offload, s->kv, p->gpu_device, p->n_gpu_layers) ||
        (s->gpu = mg_backend_dev_init(p->gpu_device)) == NULL) {
        snprintf(cause, sizeof cause, "%s", mg_last_error());
        mg_set_error("n_gpu_layers %d: %s", p->n_gpu_layers, cause);
        return false;
    }
    mg_backend_t backends[2] = {s->gpu, s->cpu};
    s->sched = mg_sched_new(backends, 2, mg_qwen3_graph_size(s->model));
    const int n_kv = mg_offload_kv_layers(s->offload);
    mg_trace(MG_TRACE_SCHED, "-ngl %d: %d weight tensors, %zu bytes, and the KV cache of %d layer%s, %zu bytes, "
             "moved to %s", p->n_gpu_layers, mg_offload_n_tensors(s->offload), mg_offload_bytes(s->offload), n_kv,
             n_kv == 1 ? "" : "s", mg_offload_kv_bytes(s->offload), mg_backend_dev_name(p->gpu_device));
    return s->sched != NULL;
}

// The CPU backend on the session's thread pool, and with -ngl a device's.
static bool init_backends(struct mg_session * s) {
    s->cpu = mg_backend_cpu_init();
    if (s->cpu == NULL) return false;
    mg_backend_cpu_set_threadpool(s->cpu, s->threadpool, s->params.n_threads);
    return s->params.n_gpu_layers <= 0 || offload_layers(s);
}
//@- full backend

//@+ full streams
// How many streams the cache has: n_seq_max with kv_unified off, for plain
// attention on the CPU; otherwise one pool.
static int session_streams(const struct mg_session_params * p) {
    const bool streams = p->n_seq_max > 1 && !p->kv_unified && !p->flash_attn && p->n_gpu_layers == 0;
    return streams ? p->n_seq_max : 1;
}

// n_seq_max within the sequence ids a cell can hold, and with streams a
// context that splits evenly (llama.cpp: n_ctx_seq = n_ctx / n_seq_max).
static bool check_streams(const struct mg_session_params * p) {
    if (p->n_seq_max > MG_MAX_SEQ) {
        mg_set_error("n_seq_max %d: at most %d sequences", p->n_seq_max, MG_MAX_SEQ);
        return false;
    }
    const int n_stream = session_streams(p);
    if (p->n_ctx % n_stream != 0) {
        mg_set_error("n_ctx %d is not a multiple of n_seq_max %d: each sequence's stream holds n_ctx / n_seq_max "
                     "cells (or one pool for all sequences: kv_unified, mg batched-bench -kvu)", p->n_ctx, n_stream);
        return false;
    }
    return true;
}

int mg_session_n_stream(const struct mg_session * s) {
    return s->kv->n_stream > 1 ? s->kv->n_stream : 1;
}
//@- full streams

//@+ full size-check
// K and V of one position in every layer, in 64 bits.
static uint64_t kv_bytes_per_token(const struct mg_model * m, enum mg_type kv_type) {
    return 2 * (uint64_t) m->hp.n_layer * (uint64_t) m->hp.head_dim * (uint64_t) m->hp.n_head_kv *
           mg_type_size(kv_type);
}

// A cache larger than the machine's memory, or than the process may map
// (ulimit -v, ulimit -d), can never be resident: with overcommit its calloc
// may still succeed, and the run then thrashes or is killed by the OOM killer
// half way. Refused before anything is allocated, naming the limit.
static bool kv_fits_in_memory(int n_ctx, uint64_t per_token) {
    const uint64_t bytes = (uint64_t) n_ctx * per_token;
    const char *   what;
    const uint64_t limit = mg_memory_limit(&what);
    if (bytes <= limit) return true;
    mg_set_error("the KV cache of %d positions (n_ctx) x %llu bytes = %llu bytes (%.1f MiB) is more than %s, %llu bytes "
                 "(%.1f MiB); use a smaller n_ctx", n_ctx, (unsigned long long) per_token, (unsigned long long) bytes,
                 (double) bytes / (1u << 20), what, (unsigned long long) limit, (double) limit / (1u << 20));
    return false;
}

// The cache's shape (check_streams) and its bytes in 64 bits, checked
// before anything is allocated: on a
// 32-bit size_t, -c times the bytes per position could wrap to a small
// buffer that the graph then writes past.
static bool kv_fits(const struct mg_model * m, const struct mg_session_params * p) {
    if (!check_streams(p)) return false;   // and the streams split it evenly
    const uint64_t per_token = kv_bytes_per_token(m, p->kv_type);
    if (per_token != 0 && (uint64_t) p->n_ctx > (uint64_t) (SIZE_MAX / 2) / per_token) {
        mg_set_error("the KV cache of %d positions (n_ctx) x %llu bytes does not fit in this machine's address space; "
                     "use a smaller n_ctx", p->n_ctx, (unsigned long long) per_token);
        return false;
    }
    return kv_fits_in_memory(p->n_ctx, per_token);
}
//@- full size-check


//@+ full flash-attn
// n_kv padded to a multiple of 64, GGML_F32_STEP of the AVX-512 mapping
// (vec_simd.c): the decode graph keeps its shape for 64 steps at a time, and
// the dot product of a V row with a softmax row takes the vector order
// llama.cpp's 256 positions take, the zeros beyond adding nothing. A cache
// for flash attention stores V like K. NULL, saying which buffer and how big,
// when it cannot be had: it grows with -c (n_ctx).
static struct mg_kv_cache * new_kv_cache(const struct mg_model * m, const struct mg_session_params * p) {
    const struct mg_model_hparams * hp = &m->hp;
    const int n_stream = session_streams(p);
    struct mg_kv_cache * kv = n_stream > 1 ? mg_kv_cache_new_streams(hp->n_layer, p->n_ctx, hp->head_dim, hp->n_head_kv,
                                                                     p->kv_type, 64, n_stream)
                            : (p->flash_attn ? mg_kv_cache_new_flash : mg_kv_cache_new)(hp->n_layer, p->n_ctx,
                                                                                       hp->head_dim, hp->n_head_kv,
                                                                                       p->kv_type, 64);
    if (kv == NULL) {
        char cause[256];
        snprintf(cause, sizeof(cause), "%s", mg_last_error());
        const uint64_t per_token = kv_bytes_per_token(m, p->kv_type);
        mg_set_error("cannot allocate the KV cache: %d positions (n_ctx) x %llu bytes = %.1f MiB (%s); use a smaller "
                     "n_ctx", p->n_ctx, (unsigned long long) per_token,
                     (double) per_token * (double) p->n_ctx / (1024.0 * 1024.0), cause);
    }
    return kv;
}
//@- full flash-attn

#if 0 //@old 09..09 session-new
struct mg_session * mg_session_new(struct mg_model * m, struct mg_session_params params) {
    if (params.n_ctx <= 0) params.n_ctx = m->hp.n_ctx_train < 4096 ? m->hp.n_ctx_train : 4096;
    if (params.n_batch <= 0) params.n_batch = 512;
    if (params.n_threads <= 0) params.n_threads = 1;
    struct mg_session * s = calloc(1, sizeof(*s));
    MG_ASSERT(s != NULL);
    s->model  = m;
    s->params = params;
    // n_kv padded to a multiple of 32: the decode graph keeps its shape for 32
    // steps at a time, so it can be reused, and every real position of a
    // softmax row falls in ggml's 16-wide vector loop, as in llama.cpp (which
    // pads to 256: the masked rest changes nothing but the work).
    s->kv = mg_kv_cache_new(m->hp.n_layer, params.n_ctx, m->hp.head_dim, m->hp.n_head_kv, params.kv_type, 32);
    if (s->kv == NULL) {
        // Say which buffer and how big: the KV cache grows with -c (n_ctx).
        const size_t per_token = 2 * (size_t) m->hp.n_layer * (size_t) m->hp.head_dim * (size_t) m->hp.n_head_kv *
                                 mg_type_size(params.kv_type);
        char cause[256];
        snprintf(cause, sizeof(cause), "%s", mg_last_error());
        mg_set_error("cannot allocate the KV cache: %d positions (n_ctx) x %zu bytes = %.1f MiB (%s); use a smaller n_ctx",
                     params.n_ctx, per_token, (double) per_token * (double) params.n_ctx / (1024.0 * 1024.0), cause);
        free(s);
        return NULL;
    }
    s->threadpool = mg_threadpool_new(params.n_threads);
    s->galloc     = mg_gallocr_new(0);
    s->stats.kv_size = mg_kv_cache_bytes(s->kv);
    return s;
}
#endif //@old session-new
//@+ full backend
// full/ checks the cache's size before anything is allocated (kv_fits), and
// runs graphs through backends (init_backends).
struct mg_session * mg_session_new(struct mg_model * m, struct mg_session_params params) {
    if (params.n_ctx <= 0) params.n_ctx = m->hp.n_ctx_train < 4096 ? m->hp.n_ctx_train : 4096;
    if (params.n_batch <= 0) params.n_batch = 512;
    if (params.n_threads <= 0) params.n_threads = 1;
    struct mg_kv_cache * kv = kv_fits(m, &params) ? new_kv_cache(m, &params) : NULL;
    if (kv == NULL) return NULL;
    struct mg_session * s = calloc(1, sizeof(*s));
    MG_ASSERT(s != NULL);
    *s = (struct mg_session) {.model = m, .params = params, .kv = kv, .stats.kv_size = mg_kv_cache_bytes(kv)};
    s->threadpool = mg_threadpool_new(params.n_threads);
    s->galloc     = mg_gallocr_new(0);
    if (!init_backends(s)) {
        mg_session_free(s);
        return NULL;
    }
    return s;
}

//@- full backend

#if 0 //@old 09..09 session-free
void mg_session_free(struct mg_session * s) {
    if (s == NULL) return;
    mg_kv_cache_free(s->kv);
    free_compute_state(s);
    free(s->logits);
    free(s);
}
#endif //@old session-free

//@+ full backend
// full/ adds the backends: the CPU plan, the scheduler and the backends go
// first, then the weights moved to a device are put back into the model.
static void free_backends(struct mg_session * s) {
    if (s->cpu != NULL) mg_backend_graph_plan_free(s->cpu, s->cpu_plan);
    mg_sched_free(s->sched);
    mg_backend_free(s->gpu);
    mg_backend_free(s->cpu);
    mg_offload_restore(s->offload);
}

void mg_session_free(struct mg_session * s) {
    if (s == NULL) return;
    free_backends(s);
    mg_kv_cache_free(s->kv);
    free_compute_state(s);
    free(s->logits);
    free(s->logits_row);   // the batch's rows in logits (the seqs block)
    free(s);
}
//@- full backend

#if 0 //@old 09..09 session-plan
// The compute buffer (the graph allocator), the plan and its work buffer.
static bool alloc_graph(struct mg_session * s) {
    if (!mg_gallocr_alloc_graph(s->galloc, s->graph)) return false;
    s->plan = mg_graph_plan(s->graph, s->params.n_threads);
    if (s->plan.work_size > s->work_capacity) {
        free(s->work);
        s->work          = malloc(s->plan.work_size);
        s->work_capacity = s->plan.work_size;
        if (s->work == NULL) {
            mg_set_error("cannot allocate a work buffer of %zu bytes", s->plan.work_size);
            return false;
        }
    }
    s->plan.work_data  = s->work;
    s->plan.threadpool = s->threadpool;
    mg_trace(MG_TRACE_INFER, "  graph built: %d nodes, %d leafs; compute buffer %zu bytes; work buffer %zu bytes",
             s->graph->n_nodes, s->graph->n_leafs, mg_gallocr_get_buffer_size(s->galloc), s->plan.work_size);
    return true;
}
#endif //@old session-plan
//@+ full backend
// With offloaded layers (-ngl) the scheduler plans the graph instead of the
// graph allocator and the CPU plan: its splits, its copies, its buffers.
static bool alloc_graph_sched(struct mg_session * s) {
    if (!mg_sched_alloc_graph(s->sched, s->graph)) return false;
    s->plan = (struct mg_cplan) {0};
    mg_trace(MG_TRACE_INFER, "  graph built: %d nodes, %d leafs; %d splits, %d copies of %zu bytes", s->graph->n_nodes,
             s->graph->n_leafs, mg_sched_n_splits(s->sched), mg_sched_n_copies(s->sched),
             mg_sched_copy_bytes(s->sched));
    return true;
}

// The same buffers, the plan made by the CPU backend (backend_cpu.c), which
// keeps the one work buffer as this function did in chapter 09.
static bool alloc_graph(struct mg_session * s) {
    if (s->sched != NULL) return alloc_graph_sched(s);
    if (!mg_gallocr_alloc_graph(s->galloc, s->graph)) return false;
    mg_backend_graph_plan_free(s->cpu, s->cpu_plan);
    s->cpu_plan = mg_backend_graph_plan_create(s->cpu, s->graph);
    if (s->cpu_plan == NULL) return false;
    s->plan = *mg_backend_cpu_plan_cplan(s->cpu_plan);
    mg_trace(MG_TRACE_INFER, "  graph built: %d nodes, %d leafs; compute buffer %zu bytes; work buffer %zu bytes",
             s->graph->n_nodes, s->graph->n_leafs, mg_gallocr_get_buffer_size(s->galloc), s->plan.work_size);
    return true;
}
//@- full backend

// Build the graph of a batch of this shape, plan both buffers.
static bool build_graph(struct mg_session * s, int n_tokens, int n_kv, bool all_logits) {
    const struct mg_model * m = s->model;
    mg_free(s->graph_ctx);
    s->graph_ctx = mg_init((struct mg_init_params) {.mem_size = mg_qwen3_ctx_size(m), .no_alloc = true});
    if (s->graph_ctx == NULL) return false;
    s->graph      = mg_new_graph_custom(s->graph_ctx, mg_qwen3_graph_size(m));
    s->logits_out = mg_qwen3_build(s->graph_ctx, s->graph, m, s->kv, n_tokens, n_kv, all_logits, &s->in);
    if (!alloc_graph(s)) return false;

    note_graph_built(s, n_tokens, n_kv, all_logits);
    if (mg_gallocr_get_buffer_size(s->galloc) > s->stats.compute_buffer_size) {
        s->stats.compute_buffer_size = mg_gallocr_get_buffer_size(s->galloc);
    }
    if (s->plan.work_size > s->stats.work_size) s->stats.work_size = s->plan.work_size;
    return true;
}

#if 0 //@old 09..09 set-inputs
static void set_inputs(struct mg_session * s, const int32_t * tokens, int n_tokens) {
    memcpy(s->in.tokens->data, tokens, (size_t) n_tokens * sizeof(int32_t));
    for (int i = 0; i < n_tokens; i++) ((int32_t *) s->in.pos->data)[i] = s->n_past + i;
    mg_kv_cache_fill_mask(s->in.mask, s->n_past, n_tokens);
    mg_kv_cache_fill_store_idx(s->kv, s->in.k_idx, s->in.v_idx, s->n_past);
}
#endif //@old set-inputs
//@+ full seqs
// The same inputs from the batch's own positions, sequences and cells: for
// one sequence at positions n_past.. the cells are n_past.. too (first fit),
// and every input equals chapter 09's.
static void set_inputs(struct mg_session * s, const int32_t * tokens, int n_tokens) {
    memcpy(s->in.tokens->data, tokens, (size_t) n_tokens * sizeof(int32_t));
    memcpy(s->in.pos->data, s->ub.pos, (size_t) n_tokens * sizeof(int32_t));
    if (s->kv->n_stream > 1) {
        mg_kv_cache_fill_mask_streams(s->kv, s->in.mask, s->ub.pos, s->ub.seq, n_tokens, s->in.stream0, s->in.n_stream);
    } else {
        mg_kv_cache_fill_mask_seqs(s->kv, s->in.mask, s->ub.pos, s->ub.seq, n_tokens);
    }
    mg_kv_cache_fill_store_idx_cells(s->kv, s->in.k_idx, s->in.v_idx, s->ub.cells);
    if (s->in.out_ids != NULL) {   // the kept tokens, in order
        int32_t * ids = (int32_t *) s->in.out_ids->data;
        for (int i = 0, j = 0; i < n_tokens; i++) {
            if (s->ub.row[i] >= 0) ids[j++] = i;
        }
    }
}
//@- full seqs

//@+ full eval-callback
// The graph one node at a time, each a one-node view of it on the same plan,
// so that the callback sees a node before a later one reuses its memory
// (ggml_backend_sched_compute_splits does the same with ggml_graph_view).
static void compute_observed(struct mg_session * s) {
    for (int i = 0; i < s->graph->n_nodes; i++) {
        struct mg_cgraph one = *s->graph;
        one.nodes            = s->graph->nodes + i;
        one.n_nodes          = 1;
        mg_graph_compute(&one, &s->plan);
        s->params.cb_eval(s->graph->nodes[i], s->params.cb_eval_user_data);
    }
}
//@- full eval-callback

#if 0 //@old 09..09 session-compute
// The graph on the session's thread pool, then its logits out (it cannot fail).
static bool run_graph(struct mg_session * s, float * logits_dst) {
    mg_graph_compute(s->graph, &s->plan);
    memcpy(logits_dst, s->logits_out->data, mg_nbytes(s->logits_out));
    return true;
}
#endif //@old session-compute
//@+ full backend
// One call per graph: the CPU backend's plan_compute is mg_graph_compute
// on the plan above, nothing added per node (an eval callback sees a node at
// a time). Then the logits, from wherever they are: a device's memory when
// the output is offloaded.
static bool run_graph(struct mg_session * s, float * logits_dst) {
    if (s->params.cb_eval != NULL) {
        compute_observed(s);
    } else if (!(s->sched != NULL ? mg_sched_graph_compute(s->sched, s->graph)
                                  : mg_backend_graph_plan_compute(s->cpu, s->cpu_plan))) {
        return false;
    }
    mg_moe_trace(s->graph, s->model, s->ub.pos);   // with --trace moe, the experts each token went through
    mg_backend_tensor_get(s->logits_out, logits_dst, 0, mg_nbytes(s->logits_out));
    return true;
}
//@- full backend

//@+ 09 decode-batch
// The can_reuse test: the same shape gives the same graph, and a graph
// reads everything that changes between steps from its inputs.
static bool can_reuse(const struct mg_session * s, int n_tokens, int n_kv, bool all_logits) {
    return s->graph != NULL && n_tokens == s->graph_n_tokens && n_kv == s->graph_n_kv &&
           all_logits == s->graph_all_logits;
}

// The graph of a batch of this shape: the current one when it can be
// reused. A long generation reuses it hundreds of times: the first few are traced.
static bool reuse_or_build_graph(struct mg_session * s, int n_tokens, int n_kv, bool all_logits) {
    if (!can_reuse(s, n_tokens, n_kv, all_logits)) return build_graph(s, n_tokens, n_kv, all_logits);
    s->stats.n_graphs_reused++;
    if (s->stats.n_graphs_reused <= 3) {
        mg_trace(MG_TRACE_INFER, "  graph reused%s", s->stats.n_graphs_reused == 3 ? " (further reuses are "
                                                                                    "counted, not traced)" : "");
    }
    return true;
}

// One batch: at most n_batch tokens, one graph.
static bool decode_batch(struct mg_session * s, const int32_t * tokens, int n_tokens, int pos0, int n_kv,
                         bool all_logits, float * logits_dst) {
    if (s->stats.n_graphs_reused < 3 || !can_reuse(s, n_tokens, n_kv, all_logits)) {   // not a line per token
        mg_trace(MG_TRACE_INFER, "decode: %d token%s at position %d%s (attending over %d cache positions)", n_tokens,
                 n_tokens == 1 ? "" : "s", pos0, n_tokens == 1 ? "" : "..", n_kv);
    }
    const double t0 = mg_time_ms();
    if (!reuse_or_build_graph(s, n_tokens, n_kv, all_logits)) return false;
    set_inputs(s, tokens, n_tokens);
    const double t1 = mg_time_ms();
    if (!run_graph(s, logits_dst)) return false;
    s->stats.t_build_ms += t1 - t0;
    s->stats.t_compute_ms += mg_time_ms() - t1;
    return true;
}
//@- 09 decode-batch

#if 0 //@old 09..09 decode-one-seq
bool mg_decode(struct mg_session * s, const int32_t * tokens, int n_tokens, bool all_logits) {
    const int n_vocab = s->model->hp.n_vocab;
    if (n_tokens <= 0) {
        mg_set_error("mg_decode: no tokens");
        return false;
    }
    if (s->n_past + n_tokens > s->params.n_ctx) {
        mg_set_error("context full: %d positions used, %d more asked, the context holds %d (use a larger n_ctx)",
                     s->n_past, n_tokens, s->params.n_ctx);
        return false;
    }
    for (int i = 0; i < n_tokens; i++) {
        if (tokens[i] < 0 || tokens[i] >= n_vocab) {
            mg_set_error("token %d at index %d is not in the vocabulary (0..%d)", tokens[i], i, n_vocab - 1);
            return false;
        }
    }
    const size_t n_floats = (size_t) n_vocab * (all_logits ? (size_t) n_tokens : 1);
    if (n_floats > s->logits_capacity) {
        free(s->logits);
        s->logits          = malloc(n_floats * sizeof(float));
        s->logits_capacity = n_floats;
        MG_ASSERT(s->logits != NULL);
    }
    s->stats.n_decode_calls++;
    for (int done = 0; done < n_tokens;) {
        const int n = n_tokens - done < s->params.n_batch ? n_tokens - done : s->params.n_batch;
        const int n_kv = mg_kv_cache_n_kv(s->kv, s->n_past + n);   // the positions filled once it is in
        float * dst = s->logits + (all_logits ? (size_t) done * (size_t) n_vocab : 0);
        if (!decode_batch(s, tokens + done, n, s->n_past, n_kv, all_logits, dst)) return false;
        s->n_past += n;
        done += n;
    }
    return true;
}
#endif //@old decode-one-seq
//@+ full seqs
static bool grow_logits(struct mg_session * s, size_t n_floats) {
    if (n_floats <= s->logits_capacity) return true;
    free(s->logits);
    s->logits          = malloc(n_floats * sizeof(float));
    s->logits_capacity = s->logits != NULL ? n_floats : 0;
    if (s->logits == NULL) mg_set_error("cannot allocate %zu logits", n_floats);
    return s->logits != NULL;
}

//@+ full streams
// With streams: every sequence id has a stream, and every stream room for its tokens.
static bool check_batch_streams(const struct mg_session * s, const struct mg_batch * b) {
    const int n_stream = s->kv->n_stream, size = mg_kv_cache_stream_size(s->kv);
    int       want[MG_MAX_SEQ] = {0};
    for (int i = 0; i < b->n_tokens; i++) {
        if (b->seq_id[i] >= n_stream) {
            mg_set_error("sequence id %d at index %d: this session has streams for sequences 0..%d (n_seq_max %d)",
                         b->seq_id[i], i, n_stream - 1, n_stream);
            return false;
        }
        want[b->seq_id[i]]++;
    }
    for (int q = 0; q < n_stream; q++) {
        int used = 0;
        for (int c = q * size; c < (q + 1) * size; c++) used += s->kv->cells[c].pos >= 0;
        if (want[q] > size - used) {
            mg_set_error("context full: sequence %d's stream holds %d positions, %d used, %d more asked (n_ctx / "
                         "n_seq_max = %d)", q, size, used, want[q], size);
            return false;
        }
    }
    return true;
}
//@- full streams

// Everything that can be wrong with a batch, checked before anything changes.
static bool check_batch(const struct mg_session * s, const struct mg_batch * b) {
    const int n_vocab = s->model->hp.n_vocab;
    if (b->n_tokens <= 0) {
        mg_set_error("mg_decode: no tokens");
        return false;
    }
    for (int i = 0; i < b->n_tokens; i++) {
        if (b->token[i] < 0 || b->token[i] >= n_vocab) {
            mg_set_error("token %d at index %d is not in the vocabulary (0..%d)", b->token[i], i, n_vocab - 1);
            return false;
        }
        if (b->seq_id[i] < 0 || b->seq_id[i] >= MG_MAX_SEQ) {
            mg_set_error("sequence id %d at index %d is not in 0..%d", b->seq_id[i], i, MG_MAX_SEQ - 1);
            return false;
        }
        if (b->pos[i] < 0) {
            mg_set_error("position %d at index %d is negative", b->pos[i], i);
            return false;
        }
    }
    if (s->kv->n_stream > 1 && !check_batch_streams(s, b)) return false;
    const int n_free = s->params.n_ctx - mg_kv_cache_cells_used(s->kv);
    if (b->n_tokens > n_free) {
        mg_set_error("context full: %d positions used, %d more asked, the context holds %d (use a larger n_ctx)",
                     s->params.n_ctx - n_free, b->n_tokens, s->params.n_ctx);
        return false;
    }
    return true;
}

// Which rows of s->logits hold which token's logits: every asked token's,
// in order, or the last token's alone in row 0.
static int plan_logit_rows(struct mg_session * s, const struct mg_batch * b) {
    if (b->n_tokens > s->logits_rows_n) {
        free(s->logits_row);
        s->logits_row    = malloc((size_t) b->n_tokens * sizeof(int32_t));
        s->logits_rows_n = b->n_tokens;
        MG_ASSERT(s->logits_row != NULL);
    }
    int n_rows = 0;
    for (int i = 0; i < b->n_tokens; i++) {
        const bool keep = b->logits != NULL ? b->logits[i] : i == b->n_tokens - 1;
        s->logits_row[i] = keep ? n_rows++ : -1;
    }
    return n_rows;
}

// Do the kept rows of tokens from..from+n-1 fill consecutive logits rows, in
// order? Always, in a batch's own order; with streams, tokens go in the
// graphs' order, and a graph's kept rows may come out of order.
static bool kept_in_order(const struct mg_session * s, int from, int n) {
    int last = -1;
    for (int i = from; i < from + n; i++) {
        if (s->logits_row[i] < 0) continue;
        if (last >= 0 && s->logits_row[i] != last + 1) return false;
        last = s->logits_row[i];
    }
    return true;
}

static int n_kept(const struct mg_session * s, int from, int n) {
    int kept = 0;
    for (int i = from; i < from + n; i++) kept += s->logits_row[i] >= 0;
    return kept;
}

// Where the logits of the graph of tokens from..from+n-1 go. A graph gives
// its last token's row, or with *all every row. Straight into s->logits when
// the rows it gives are the kept ones, in order; otherwise into *tmp, from
// which the caller picks the kept rows (with none kept, a prompt chunk that
// does not end the batch, its last row is computed for nothing, as in
// chapter 09).
static float * logits_dst(struct mg_session * s, int from, int n, bool * all, float ** tmp) {
    const size_t n_vocab = (size_t) s->model->hp.n_vocab;
    const int    kept    = n_kept(s, from, n);
    const int    first   = s->logits_row[from], last = s->logits_row[from + n - 1];
    *all = kept > 0 && !(kept == 1 && last >= 0);
    *tmp = NULL;
    if (kept == 1 && last >= 0) return s->logits + (size_t) last * n_vocab;
    if (kept == n && first + n - 1 == last && kept_in_order(s, from, n)) return s->logits + (size_t) first * n_vocab;
    if (kept > 0 && s->in.n_out == kept) {   // the graph gives the kept rows alone, in order (out_ids)
        *all = false;
        for (int i = from; i < from + n; i++) {
            if (s->logits_row[i] >= 0) return s->logits + (size_t) s->logits_row[i] * n_vocab;
        }
    }
    *tmp = malloc((size_t) (*all ? n : 1) * n_vocab * sizeof(float));
    MG_ASSERT(*tmp != NULL);
    return *tmp;
}

// Which rows the next graph gives (model.h, in.n_out): with some tokens
// kept, but neither all of them nor the last alone, just those (llama.cpp's
// inp_out_ids: a batch of B prompts keeps each one's last token, and its
// last feed-forward and LM head then run on B rows, not on every token's).
// A graph built for other rows is not reused.
static void want_rows(struct mg_session * s, int from, int n) {
    const int  kept = n_kept(s, from, n);
    const bool some = kept > 0 && kept < n && !(kept == 1 && s->logits_row[from + n - 1] >= 0) &&
                      kept_in_order(s, from, n);
    const int  want = some ? kept : 0;
    if (s->in.n_out != want) {
        s->in.n_out = want;
        s->graph    = NULL;   // rebuilt by the next decode (its context is freed then)
    }
}

//@+ full shift
// The K-shift (llama.cpp: llama_kv_cache::update with do_shift): after
// mg_session_seq_add, rotate the cached keys by each cell's shift, in a graph
// of its own with its own compute buffer, freed right after: shifts are rare,
// and the decode graph and its plan stay as they were, ready for reuse.
static bool k_shift_on_host(struct mg_session * s) {
    if (!mg_kv_cache_shift_pending(s->kv)) {   // the moved cells are gone since
        mg_kv_cache_reset_shift(s->kv);
        return true;
    }
    const struct mg_model_hparams * hp   = &s->model->hp;
    const int                       size = 8 * hp->n_layer + 16;   // view, cast, rope, cpy per layer
    struct mg_context * ctx = mg_init((struct mg_init_params) {
        .mem_size = 2 * (size_t) size * mg_tensor_overhead() + mg_graph_overhead_custom(size), .no_alloc = true});
    struct mg_gallocr * ga = mg_gallocr_new(0);
    if (ctx == NULL || ga == NULL) {
        mg_free(ctx);
        mg_gallocr_free(ga);
        mg_set_error("K-shift: cannot allocate its graph");
        return false;
    }
    const double       t0    = mg_time_ms();
    struct mg_cgraph * g     = mg_new_graph_custom(ctx, size);
    // The rotation the model's graph gives keys (qwen3.c, rotate): the arch's pairs, n_rot = head_dim.
    struct mg_tensor * shift = mg_kv_cache_build_shift(ctx, g, s->kv, s->model->rope_freqs, hp->head_dim,
                                                       (enum mg_rope_mode) hp->rope_type, hp->rope_freq_base,
                                                       hp->rope_freq_scale);
    bool ok = mg_gallocr_alloc_graph(ga, g);
    struct mg_cplan plan = mg_graph_plan(g, s->params.n_threads);
    void * work = ok && plan.work_size > 0 ? malloc(plan.work_size) : NULL;
    if (ok && plan.work_size > 0 && work == NULL) ok = false;
    if (ok) {
        plan.work_data  = work;
        plan.threadpool = s->threadpool;
        mg_kv_cache_fill_shift(s->kv, shift);
        mg_graph_compute(g, &plan);
        mg_kv_cache_reset_shift(s->kv);
        s->stats.n_k_shifts++;
        mg_trace(MG_TRACE_KV, "K-shift: %d layers' keys rotated, %d nodes, %zu bytes of compute buffer, %.2f ms",
                 hp->n_layer, g->n_nodes, mg_gallocr_get_buffer_size(ga), mg_time_ms() - t0);
    } else {
        char cause[256];
        snprintf(cause, sizeof(cause), "%s", mg_last_error());
        mg_set_error("K-shift: cannot allocate its compute buffer (%s)", cause);
    }
    free(work);
    mg_gallocr_free(ga);
    mg_free(ctx);
    return ok;
}

// With -ngl the offloaded layers' cache is in the device's memory: the CPU
// turns their keys in the host bytes they kept, the device's keys copied
// there and back (llama.cpp runs the shift graph through its scheduler, on
// each layer's device; a shift is rare, and this keeps one K-shift for every
// placement of the cache).
static bool apply_k_shift(struct mg_session * s) {
    if (s->offload != NULL) mg_offload_keys_to_host(s->offload);
    const bool ok = k_shift_on_host(s);
    if (s->offload != NULL) mg_offload_keys_to_device(s->offload);
    return ok;
}
//@- full shift

// One graph: tokens from..from+n-1 of the batch, s->ub pointing at their
// positions, sequences, cells and logits rows; the asked rows land in
// s->logits.
static bool decode_rows(struct mg_session * s, const int32_t * tokens, int from, int n, int n_kv) {
    const size_t n_vocab = (size_t) s->model->hp.n_vocab;
    want_rows(s, from, n);
    bool    all;
    float * tmp;
    float * dst = logits_dst(s, from, n, &all, &tmp);
    const bool ok = decode_batch(s, tokens, n, s->ub.pos[0], n_kv, all, dst);
    if (ok && tmp != NULL && all) {   // the graph's rows came out together: keep the asked ones
        for (int i = from; i < from + n; i++) {
            if (s->logits_row[i] >= 0) {
                memcpy(s->logits + (size_t) s->logits_row[i] * n_vocab, tmp + (size_t) (i - from) * n_vocab,
                       n_vocab * sizeof(float));
            }
        }
    }
    free(tmp);
    return ok;
}

//@+ full streams
// A graph of a batch split for streams: the run of sequences s0 .. s0+n_s-1
// and k tokens of each.
struct stream_ubatch {
    int s0, n_s, k;
};

// llama.cpp's equal split (llama_batch_allocr::split_equal with sequential
// ubatches, as kv_unified = false asks): each graph takes the lowest sequence
// with tokens left and the ones right after it that have tokens left too,
// and the same number k of tokens of each, at most n_batch in all, stream by
// stream, each sequence's tokens in batch order. order[] gets the batch's
// indices in that order, ubs[] the graphs; returns how many.
static int split_equal(const struct mg_batch * b, int n_batch, int32_t * order, struct stream_ubatch * ubs) {
    int count[MG_MAX_SEQ] = {0}, first[MG_MAX_SEQ], taken[MG_MAX_SEQ] = {0};
    for (int i = 0; i < b->n_tokens; i++) count[b->seq_id[i]]++;
    int32_t * by_seq = malloc((size_t) b->n_tokens * sizeof(int32_t));   // the batch's indices, sequence by sequence
    MG_ASSERT(by_seq != NULL);
    for (int q = 0, at = 0; q < MG_MAX_SEQ; at += count[q++]) first[q] = at;
    int fill[MG_MAX_SEQ];
    memcpy(fill, first, sizeof(fill));
    for (int i = 0; i < b->n_tokens; i++) by_seq[fill[b->seq_id[i]]++] = i;
    int n_ub = 0;
    for (int done = 0; done < b->n_tokens; n_ub++) {
        int s0 = 0;
        while (taken[s0] == count[s0]) s0++;
        int n_s = 0, k = b->n_tokens;
        for (; s0 + n_s < MG_MAX_SEQ && taken[s0 + n_s] < count[s0 + n_s] && n_s < n_batch; n_s++) {
            const int left = count[s0 + n_s] - taken[s0 + n_s];
            k = left < k ? left : k;
        }
        k = k < n_batch / n_s ? k : n_batch / n_s;
        for (int j = 0; j < n_s; j++) {
            for (int t = 0; t < k; t++) order[done++] = by_seq[first[s0 + j] + taken[s0 + j] + t];
            taken[s0 + j] += k;
        }
        ubs[n_ub] = (struct stream_ubatch) {s0, n_s, k};
    }
    free(by_seq);
    return n_ub;
}

// How many cells of each stream s0 .. s0+n_s-1 a graph reads: the furthest
// used cell of any of them, padded, within a stream.
static int streams_n_kv(const struct mg_kv_cache * kv, int s0, int n_s) {
    int end = 0;
    for (int j = 0; j < n_s; j++) {
        const int e = mg_kv_cache_stream_end(kv, s0 + j);
        end         = e > end ? e : end;
    }
    const int n_kv = mg_kv_cache_n_kv(kv, end), size = mg_kv_cache_stream_size(kv);
    return n_kv < size ? n_kv : size;
}

// The batch with streams: split equally, its tokens permuted into the
// graphs' order (and with them which logits row each fills), then graph by
// graph as mg_decode_batch does. A graph built for other streams is not reused.
static bool decode_batch_streams(struct mg_session * s, const struct mg_batch * b) {
    const int n  = b->n_tokens;
    int32_t * p  = malloc((size_t) n * 6 * sizeof(int32_t));
    struct stream_ubatch * ubs = malloc((size_t) n * sizeof(*ubs));
    MG_ASSERT(p != NULL && ubs != NULL);
    int32_t * order = p, * tok = p + n, * pos = p + 2 * n, * seq = p + 3 * n, * row = p + 4 * n, * cells = p + 5 * n;
    const int n_ub = split_equal(b, s->params.n_batch, order, ubs);
    for (int i = 0; i < n; i++) {
        tok[i] = b->token[order[i]], pos[i] = b->pos[order[i]], seq[i] = b->seq_id[order[i]];
        row[i] = s->logits_row[order[i]];
    }
    int32_t * batch_rows = s->logits_row;   // the batch's own order, what mg_get_logits_ith reads afterwards
    s->logits_row        = row;
    bool ok              = true;
    for (int u = 0, from = 0; u < n_ub && ok; from += ubs[u].n_s * ubs[u].k, u++) {
        const int k = ubs[u].n_s * ubs[u].k;
        MG_ASSERT(mg_kv_cache_find_cells_seqs(s->kv, k, seq + from, cells + from));   // check_batch counted them
        for (int i = from; i < from + k; i++) s->kv->cells[cells[i]] = (struct mg_kv_cell) {pos[i], 1ull << seq[i], 0};
        s->ub.pos   = pos + from;
        s->ub.seq   = seq + from;
        s->ub.cells = cells + from;
        s->ub.row   = row + from;
        if (s->in.n_stream != ubs[u].n_s || s->in.stream0 != ubs[u].s0) {
            s->in.n_stream = ubs[u].n_s;
            s->in.stream0  = ubs[u].s0;
            s->graph       = NULL;   // rebuilt by the next decode
        }
        ok = decode_rows(s, tok + from, from, k, streams_n_kv(s->kv, ubs[u].s0, ubs[u].n_s));
    }
    s->logits_row = batch_rows;
    free(ubs);
    free(p);
    return ok;
}
//@- full streams

bool mg_decode_batch(struct mg_session * s, const struct mg_batch * b) {
    if (!check_batch(s, b)) return false;
    if (s->kv->has_shift && !apply_k_shift(s)) return false;
    const size_t n_vocab = (size_t) s->model->hp.n_vocab;
    const int    n_rows  = plan_logit_rows(s, b);
    int32_t *    cells   = malloc((size_t) b->n_tokens * sizeof(int32_t));
    if (cells == NULL || !grow_logits(s, (size_t) (n_rows > 0 ? n_rows : 1) * n_vocab)) {
        free(cells);
        return false;
    }
    s->stats.n_decode_calls++;
    if (s->kv->n_stream > 1) {
        free(cells);
        return decode_batch_streams(s, b);
    }
    bool ok = true;
    for (int done = 0; done < b->n_tokens && ok;) {
        const int n = b->n_tokens - done < s->params.n_batch ? b->n_tokens - done : s->params.n_batch;
        // The cells first, tagged before the mask is made: a token sees the
        // earlier tokens of its sequence in the same batch.
        MG_ASSERT(mg_kv_cache_find_cells(s->kv, n, cells + done));   // check_batch counted them
        for (int i = done; i < done + n; i++) {
            s->kv->cells[cells[i]] = (struct mg_kv_cell) {b->pos[i], 1ull << b->seq_id[i], 0};
        }
        s->ub.pos   = b->pos + done;
        s->ub.seq   = b->seq_id + done;
        s->ub.cells = cells + done;
        s->ub.row   = s->logits_row + done;
        const int n_kv = mg_kv_cache_n_kv(s->kv, mg_kv_cache_cells_end(s->kv));   // every cell in use, these too
        ok = decode_rows(s, b->token + done, done, n, n_kv);
        done += n;
    }
    free(cells);
    return ok;
}

const float * mg_get_logits_ith(const struct mg_session * s, int i) {
    if (i < 0 || i >= s->logits_rows_n || s->logits_row[i] < 0) return NULL;
    return s->logits + (size_t) s->logits_row[i] * (size_t) s->model->hp.n_vocab;
}

// Chapter 09's call: sequence 0, the next positions.
bool mg_decode(struct mg_session * s, const int32_t * tokens, int n_tokens, bool all_logits) {
    if (n_tokens <= 0) {
        mg_set_error("mg_decode: no tokens");
        return false;
    }
    int32_t * pos  = malloc((size_t) n_tokens * sizeof(int32_t));
    int32_t * seq  = calloc((size_t) n_tokens, sizeof(int32_t));
    bool *    keep = NULL;
    if (all_logits) {
        keep = malloc((size_t) n_tokens);
        MG_ASSERT(keep != NULL);
        memset(keep, 1, (size_t) n_tokens);
    }
    MG_ASSERT(pos != NULL && seq != NULL);
    const int n_past = mg_session_n_past(s);
    for (int i = 0; i < n_tokens; i++) pos[i] = n_past + i;
    const struct mg_batch b = {n_tokens, tokens, pos, seq, keep};
    const bool ok = mg_decode_batch(s, &b);
    free(pos);
    free(seq);
    free(keep);
    return ok;
}
//@- full seqs

const float * mg_get_logits(const struct mg_session * s) {
    return s->logits;
}

//@+ full logits-finite
bool mg_logits_finite(const float * logits, int n_rows, int n_vocab, int pos0) {
    for (int r = 0; r < n_rows; r++) {
        const float * row = logits + (size_t) r * (size_t) n_vocab;
        for (int i = 0; i < n_vocab; i++) {
            if (isfinite(row[i])) continue;
            mg_set_error("the logits at token position %d are not finite (token %d: %s): the model's weights or its "
                         "computation hold NaN or inf (dumping the tensors with cb_eval shows the first that does)",
                         pos0 + r, i, isnan(row[i]) ? "nan" : row[i] > 0 ? "inf" : "-inf");
            return false;
        }
    }
    return true;
}
//@- full logits-finite

#if 0 //@old 09..09 n-past-get
int mg_session_n_past(const struct mg_session * s) {
    return s->n_past;
}
#endif //@old n-past-get
//@+ full seqs
int mg_session_n_past(const struct mg_session * s) {   // sequence 0's
    return mg_kv_cache_seq_pos_max(s->kv, 0) + 1;
}
//@- full seqs

int mg_session_n_ctx(const struct mg_session * s) {
    return s->params.n_ctx;
}

// Positions >= n_past are forgotten simply by being overwritten later: the
// mask of every later batch hides whatever they still hold.
#if 0 //@old 09..09 rewind
void mg_session_rewind(struct mg_session * s, int n_past) {
    MG_ASSERT(n_past >= 0 && n_past <= s->n_past);
    s->n_past = n_past;
}
#endif //@old rewind
//@+ full seqs
void mg_session_rewind(struct mg_session * s, int n_past) {   // sequence 0's cells from n_past on are freed
    MG_ASSERT(n_past >= 0 && n_past <= mg_session_n_past(s));
    mg_kv_cache_seq_rm(s->kv, 0, n_past, -1);
}
//@- full seqs

//@+ full seqs
void mg_session_seq_rm(struct mg_session * s, int seq, int p0, int p1) {
    mg_kv_cache_seq_rm(s->kv, seq, p0, p1);
}
bool mg_session_seq_cp(struct mg_session * s, int src, int dst, int p0, int p1) {
    if (s->kv->n_stream > 1 && src != dst) {
        mg_set_error("sequence %d copied to sequence %d: with streams (n_seq_max %d) each sequence's cells stay in "
                     "its own stream, and copying them across is not built yet (use one pool: kv_unified)",
                     src, dst, s->kv->n_stream);
        return false;
    }
    mg_kv_cache_seq_cp(s->kv, src, dst, p0, p1);
    return true;
}
void mg_session_seq_keep(struct mg_session * s, int seq) {
    mg_kv_cache_seq_keep(s->kv, seq);
}
int mg_session_seq_pos_max(const struct mg_session * s, int seq) {
    return mg_kv_cache_seq_pos_max(s->kv, seq);
}
int mg_session_cells_used(const struct mg_session * s) {
    return mg_kv_cache_cells_used(s->kv);
}
//@- full seqs

//@+ full shift
bool mg_session_seq_add(struct mg_session * s, int seq, int p0, int p1, int delta) {
    return mg_kv_cache_seq_add(s->kv, seq, p0, p1, delta);
}
//@- full shift

struct mg_session_stats mg_session_get_stats(const struct mg_session * s) {
    return s->stats;
}

const struct mg_model * mg_session_model(const struct mg_session * s) {
    return s->model;
}

const struct mg_cgraph * mg_session_graph(const struct mg_session * s) {
    return s->graph;
}

#if 0 //@old 09..09 session-dot
bool mg_session_dump_dot(const struct mg_session * s, const char * name) {
    return s->graph != NULL && mg_graph_dump_dot_env(s->graph, name);
}
#endif //@old session-dot
//@+ full dot-extras
// The folder a drawing goes to: the session's parameter (mg --dot, --svg),
// else the demo switch, as chapter 09 reads it.
static const char * drawing_dir(const char * param, const char * demo_switch) {
    return param != NULL && param[0] != '\0' ? param : mg_demo_switch(demo_switch);
}

// With each node's offset, its time when a timeline records, and the layer
// clusters; params.dot_layers = N (mg --dot-layers N) draws only the first N layers.
bool mg_session_dump_dot(const struct mg_session * s, const char * name) {
    const char * dir = drawing_dir(s->params.dot_dir, "MG_DOT");
    if (s->graph == NULL || dir == NULL) return false;
    double * us = s->timeline != NULL ? malloc(((size_t) s->graph->n_nodes + 1) * sizeof(double)) : NULL;
    if (us != NULL && !mg_timeline_node_us(s->timeline, s->graph, us)) {
        free(us);
        us = NULL;
    }
    // A graph the scheduler planned (-ngl) has no offsets in the session's allocator.
    const struct mg_dot_extras x = {.galloc = s->sched == NULL ? s->galloc : NULL, .sched = s->sched, .node_us = us,
                                    .max_layers = s->params.dot_layers};
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s.dot", dir, name);
    const bool ok = mg_graph_dump_dot_ext(s->graph, path, &x);
    free(us);
    if (!ok) {
        fprintf(stderr, "dot: %s\n", mg_last_error());
        return false;
    }
    fprintf(stderr, "wrote %s\n", mg_quote(path));
    return true;
}
//@- full dot-extras

//@+ full memory-model
// The mapping's first byte, from any tensor's place in the file.
static const void * mapping_base(const struct mg_gguf * g) {
    if (mg_gguf_n_tensors(g) == 0) return NULL;
    const struct mg_gguf_tensor_info * t = mg_gguf_tensor(g, 0);
    return (const char *) t->data - t->offset - mg_gguf_data_offset(g);
}

void mg_session_memory_model(const struct mg_session * s, struct mg_memory_model * mm) {
    const struct mg_model *  m  = s->model;
    const struct mg_buffer * cb = mg_gallocr_get_buffer(s->galloc);
    memset(mm, 0, sizeof(*mm));
    mm->region[MG_MEM_MODEL_HEADERS] = (struct mg_memory_region) {"model tensor headers", NULL, mg_used_mem(m->ctx)};
    mm->region[MG_MEM_MAPPED_FILE]   = (struct mg_memory_region) {"mapped GGUF file", mapping_base(m->gguf),
                                                                  mg_gguf_file_size(m->gguf)};
    mm->region[MG_MEM_REPACKED]      = (struct mg_memory_region) {"repacked weights", m->repack_buf, m->n_repacked_bytes};
    mm->region[MG_MEM_GRAPH_HEADERS] = (struct mg_memory_region) {"graph tensor headers", NULL,
                                                                  s->graph_ctx ? mg_used_mem(s->graph_ctx) : 0};
    mm->region[MG_MEM_COMPUTE]       = (struct mg_memory_region) {"compute buffer", cb ? cb->data : NULL, cb ? cb->size : 0};
    void * work      = NULL;
    size_t work_size = 0;
    mg_backend_cpu_work_buffer(s->cpu, &work, &work_size);
    mm->region[MG_MEM_WORK]          = (struct mg_memory_region) {"work buffer", work, work_size};
    mm->region[MG_MEM_KV]            = (struct mg_memory_region) {"KV cache", s->kv->buf->data, s->kv->buf->size};
    mg_memory_model_count(mm, m->ctx, MG_MEM_MODEL_HEADERS);
    if (s->graph_ctx != NULL) mg_memory_model_count(mm, s->graph_ctx, MG_MEM_GRAPH_HEADERS);
}
//@- full memory-model

#if 0 //@old 09..09 set-timeline
void mg_session_set_timeline(struct mg_session * s, struct mg_timeline * tl) {
    mg_threadpool_set_timeline(s->threadpool, tl);
}
#endif //@old set-timeline
//@+ full dot-extras
void mg_session_set_timeline(struct mg_session * s, struct mg_timeline * tl) {   // kept for the drawings' times
    mg_threadpool_set_timeline(s->threadpool, tl);
    s->timeline = tl;
}
//@- full dot-extras

#if 0 //@old 09..09 session-svg
bool mg_session_dump_svg(const struct mg_session * s, const char * name) {
    return s->graph != NULL && mg_gallocr_dump_svg_env(s->galloc, s->graph, name);
}
#endif //@old session-svg
//@+ full dot-extras
bool mg_session_dump_svg(const struct mg_session * s, const char * name) {
    const char * dir = drawing_dir(s->params.svg_dir, "MG_SVG");
    if (s->graph == NULL || dir == NULL) return false;
    if (s->sched != NULL) {
        fprintf(stderr, "svg: %s: the memory map of a graph run by the scheduler (offloaded layers) is not yet "
                        "drawn\n", mg_quote(name));
        return false;
    }
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s.svg", dir, name);
    if (!mg_gallocr_dump_svg(s->galloc, s->graph, name, path)) {
        fprintf(stderr, "svg: %s\n", mg_last_error());
        return false;
    }
    fprintf(stderr, "wrote %s\n", mg_quote(path));
    return true;
}
//@- full dot-extras
