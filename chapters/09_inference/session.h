// Generated from full/session.h by tools/chapgen. In a class, edit this copy freely (make chapters will not overwrite your edits); to change the engine, edit full/session.h and run make chapters.
// session.h - running a model: the KV cache, the compute buffers, the thread
// pool, and decode calls that feed it tokens (llama.cpp's llama_context).
//
//     struct mg_session * s = mg_session_new(model, mg_session_default_params());
//     mg_decode(s, prompt, n_prompt, false);        // the prompt as one batch (or several)
//     const float * logits = mg_get_logits(s);      // next-token scores, [n_vocab]
//     int32_t next = ...sample...;
//     mg_decode(s, &next, 1, false);                // one token: the decode graph is reused
//     mg_session_free(s);
//
// What one mg_decode call does, for each batch of at most n_batch tokens:
//   1. find or build the graph: a batch of the same shape as last time (same
//      token count, same padded cache length) reuses the built graph and its
//      memory plan; anything else builds it with mg_qwen3_build (model.h),
//      plans its compute buffer (galloc.h) and its work buffer (plan.h);
//   2. fill the inputs: token ids, positions, the causal mask, where K and V go;
//   3. run it on the session's thread pool (threadpool.h);
//   4. copy out the logits.
#pragma once

#include "model.h"

struct mg_session_params {
    int          n_ctx;        // positions the KV cache holds (0: min(4096, the model's))
    int          n_batch;      // at most this many tokens per graph
    int          n_threads;
    enum mg_type kv_type;      // F16 like llama.cpp, or F32
};

struct mg_session_params mg_session_default_params(void);

struct mg_session_stats {
    int    n_decode_calls;
    int    n_graphs_built;
    int    n_graphs_reused;
    int    n_nodes;              // of the last graph
    int    n_kv;                 // cache positions the last graph attends over (padded)
    size_t compute_buffer_size;  // the largest compute buffer planned so far
    size_t work_size;            // the largest work buffer planned so far
    size_t kv_size;              // the KV cache's bytes
    double t_build_ms;           // building and planning graphs
    double t_compute_ms;         // running them
};

struct mg_session;

// NULL, with mg_last_error(), if the cache or buffers cannot be allocated.
struct mg_session * mg_session_new(struct mg_model * m, struct mg_session_params params);
void                mg_session_free(struct mg_session * s);

// Evaluate n_tokens tokens at positions n_past, n_past+1, ...; all_logits
// keeps every token's logits, otherwise only the last one's. False, with
// mg_last_error(), if they do not fit in the context (nothing is computed then).
bool mg_decode(struct mg_session * s, const int32_t * tokens, int n_tokens, bool all_logits);

// The logits of the last mg_decode: [n_vocab] for its last token, or
// [n_tokens][n_vocab] after all_logits.
const float * mg_get_logits(const struct mg_session * s);

int  mg_session_n_past(const struct mg_session * s);   // positions filled
int  mg_session_n_ctx (const struct mg_session * s);
void mg_session_rewind(struct mg_session * s, int n_past);   // forget positions >= n_past

struct mg_session_stats mg_session_get_stats(const struct mg_session * s);
const struct mg_model * mg_session_model(const struct mg_session * s);
const struct mg_cgraph * mg_session_graph(const struct mg_session * s);   // the last graph run (NULL before any)

// Write the current graph as <name>.dot into $MG_DOT (see graph.h), or into
// params.dot_dir where full/ has it.
bool mg_session_dump_dot(const struct mg_session * s, const char * name);

// Record every graph the session runs into tl (timeline.h; NULL: stop).
struct mg_timeline;
void mg_session_set_timeline(struct mg_session * s, struct mg_timeline * tl);

// Write the current graph's compute-buffer plan as <name>.svg into $MG_SVG
// (see galloc.h), or into params.svg_dir where full/ has it.
bool mg_session_dump_svg(const struct mg_session * s, const char * name);
