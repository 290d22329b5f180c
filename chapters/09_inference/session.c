// Generated from full/session.c by tools/chapgen. In a class, edit this copy freely (make chapters will not overwrite your edits); to change the engine, edit full/session.c and run make chapters.
// session.c - decode calls: build or reuse a graph, fill its inputs, run it
// (llama.cpp: llama_context::decode, llm_graph_result::can_reuse).
#define _POSIX_C_SOURCE 200809L
#include "session.h"
#include "arena.h"
#include "galloc.h"
#include "plan.h"
#include "threadpool.h"
#include "timeline.h"
#include "trace.h"
#include "vocab.h"

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
    int                      n_past;

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

    float *                 logits;   // what mg_get_logits returns
    size_t                  logits_capacity;
    struct mg_session_stats stats;
};

static const struct mg_session_params default_params = {   // n_ctx 0: the model's (llama_context_default_params)
    .n_batch = 512,
    .kv_type = MG_TYPE_F16,
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

void mg_session_free(struct mg_session * s) {
    if (s == NULL) return;
    mg_kv_cache_free(s->kv);
    free_compute_state(s);
    free(s->logits);
    free(s);
}

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

static void set_inputs(struct mg_session * s, const int32_t * tokens, int n_tokens) {
    memcpy(s->in.tokens->data, tokens, (size_t) n_tokens * sizeof(int32_t));
    for (int i = 0; i < n_tokens; i++) ((int32_t *) s->in.pos->data)[i] = s->n_past + i;
    mg_kv_cache_fill_mask(s->in.mask, s->n_past, n_tokens);
    mg_kv_cache_fill_store_idx(s->kv, s->in.k_idx, s->in.v_idx, s->n_past);
}

// The graph on the session's thread pool, then its logits out (it cannot fail).
static bool run_graph(struct mg_session * s, float * logits_dst) {
    mg_graph_compute(s->graph, &s->plan);
    memcpy(logits_dst, s->logits_out->data, mg_nbytes(s->logits_out));
    return true;
}

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

const float * mg_get_logits(const struct mg_session * s) {
    return s->logits;
}

int mg_session_n_past(const struct mg_session * s) {
    return s->n_past;
}

int mg_session_n_ctx(const struct mg_session * s) {
    return s->params.n_ctx;
}

// Positions >= n_past are forgotten simply by being overwritten later: the
// mask of every later batch hides whatever they still hold.
void mg_session_rewind(struct mg_session * s, int n_past) {
    MG_ASSERT(n_past >= 0 && n_past <= s->n_past);
    s->n_past = n_past;
}

struct mg_session_stats mg_session_get_stats(const struct mg_session * s) {
    return s->stats;
}

const struct mg_model * mg_session_model(const struct mg_session * s) {
    return s->model;
}

const struct mg_cgraph * mg_session_graph(const struct mg_session * s) {
    return s->graph;
}

bool mg_session_dump_dot(const struct mg_session * s, const char * name) {
    return s->graph != NULL && mg_graph_dump_dot_env(s->graph, name);
}

void mg_session_set_timeline(struct mg_session * s, struct mg_timeline * tl) {
    mg_threadpool_set_timeline(s->threadpool, tl);
}

bool mg_session_dump_svg(const struct mg_session * s, const char * name) {
    return s->graph != NULL && mg_gallocr_dump_svg_env(s->galloc, s->graph, name);
}
