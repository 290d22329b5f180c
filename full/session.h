//@file 09
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
    //@+ full flash-attn
    bool         flash_attn;   // attention with an online softmax (mg_flash_attn)
    //@- full flash-attn
    //@+ full streams
    // Per-sequence streams (llama.cpp's n_seq_max and kv_unified): with
    // n_seq_max > 1 and kv_unified false, the cache is n_seq_max streams of
    // n_ctx / n_seq_max cells, sequence s in stream s alone (kv_cache.h), and
    // sequence ids must be below n_seq_max. Plain attention on the CPU only:
    // with flash_attn or n_gpu_layers the cache stays one pool (not yet).
    // Defaults: n_seq_max 1, one pool.
    int          n_seq_max;
    bool         kv_unified;
    //@- full streams
    //@+ full backend
    // -ngl: the weights of the last n_gpu_layers layers in gpu_device's memory
    // (offload.h), and the graph run by the scheduler over that device's
    // backend and the CPU (backend_sched.h). 0: the CPU alone, as before.
    int                      n_gpu_layers;
    struct mg_backend_device * gpu_device;
    //@- full backend
    //@+ full eval-callback
    // Shown every node of every graph right after it is computed (its data is
    // valid during the call only: the allocator reuses the memory), as
    // llama.cpp's cb_eval; the graph then runs node by node. NULL: none.
    void (*cb_eval)(const struct mg_tensor * node, void * user_data);
    void * cb_eval_user_data;
    //@- full eval-callback
    //@+ full dot-extras
    // Where mg_session_dump_dot and mg_session_dump_svg write (mg --dot DIR,
    // --svg DIR); NULL: the demo switches $MG_DOT and $MG_SVG, as in chapter
    // 09. dot_layers >= 0 draws only the first dot_layers layers (-1: all).
    const char * dot_dir;
    int          dot_layers;
    const char * svg_dir;
    //@- full dot-extras
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
    //@+ full shift
    int    n_k_shifts;           // K-shift graphs run (one per decode that follows mg_session_seq_add)
    //@- full shift
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
//@+ full logits-finite
// Whether logits[n_rows][n_vocab], the rows of token positions pos0,
// pos0+1, ..., are all finite. NaN or inf (weights holding them, or a
// computation that overflows) would be sampled, printed or written as if
// they were scores; false with mg_last_error() naming the first position
// and token id. (llama.cpp does not check; its --check-tensors checks the
// weights at load.)
bool mg_logits_finite(const float * logits, int n_rows, int n_vocab, int pos0);
//@- full logits-finite

int  mg_session_n_past(const struct mg_session * s);   // positions filled
int  mg_session_n_ctx (const struct mg_session * s);
//@+ full streams
int mg_session_n_stream(const struct mg_session * s);   // the cache's streams (1: one pool)
//@- full streams
void mg_session_rewind(struct mg_session * s, int n_past);   // forget positions >= n_past

//@+ full seqs
// Many sequences in one session (llama.cpp's llama_batch and
// llama_memory_seq_*). mg_decode above is sequence 0 at positions n_past..;
// a batch may mix sequences and positions: token i is at position pos[i] of
// sequence seq_id[i] (0..MG_MAX_SEQ-1), and each sequence attends only to its
// own cells. Decoding N sequences one token each is one graph of N tokens:
// the weights are read once for all of them, which is why batching
// sequences costs little more than one in decode.
struct mg_batch {
    int             n_tokens;
    const int32_t * token;
    const int32_t * pos;
    const int32_t * seq_id;
    const bool *    logits;   // keep token i's logits; NULL: only the last token's
};

// False, with mg_last_error(), when the batch is malformed or does not fit in
// the free cells; nothing is computed or changed then.
bool          mg_decode_batch(struct mg_session * s, const struct mg_batch * b);
// Token i's logits from the last decode ([n_vocab]), or NULL if not kept.
const float * mg_get_logits_ith(const struct mg_session * s, int i);

// Positions p0 <= pos < p1 (p1 < 0: to the end) of a sequence (seq < 0: all).
void mg_session_seq_rm(struct mg_session * s, int seq, int p0, int p1);
//@+ full streams
// With streams (n_seq_max > 1, kv_unified off) two sequences share no cells:
// copying one into another's stream is not built yet (llama.cpp copies the
// rows), so mg_session_seq_cp then returns false, changing nothing, with
// mg_last_error() saying so.
//@- full streams
bool mg_session_seq_cp(struct mg_session * s, int src, int dst, int p0, int p1);   // shared, not copied
void mg_session_seq_keep(struct mg_session * s, int seq);
int  mg_session_seq_pos_max(const struct mg_session * s, int seq);   // -1: empty
int  mg_session_cells_used(const struct mg_session * s);             // cells holding any sequence
//@- full seqs

//@+ full shift
// Move positions p0 <= pos < p1 (p0 < 0: from 0, p1 < 0: to the end) of
// sequence seq by delta (llama_memory_seq_add); positions that become
// negative are removed. The cached keys hold RoPE's rotation by the old
// position, so the next decode first rotates them by delta (one small graph
// over every layer's K; values carry no position and stay). The context
// shift of a long generation: mg_session_seq_rm(s, 0, n_keep, n_keep + n)
// then mg_session_seq_add(s, 0, n_keep + n, -1, -n). False, with
// mg_last_error() and nothing changed, for a sequence id outside
// 0..MG_MAX_SEQ-1, p1 < p0, an overflow, or a position that seq shares with
// another sequence (moving it would move theirs).
bool mg_session_seq_add(struct mg_session * s, int seq, int p0, int p1, int delta);
//@- full shift

struct mg_session_stats mg_session_get_stats(const struct mg_session * s);
const struct mg_model * mg_session_model(const struct mg_session * s);
const struct mg_cgraph * mg_session_graph(const struct mg_session * s);   // the last graph run (NULL before any)

// Write the current graph as <name>.dot into $MG_DOT (see graph.h), or into
// params.dot_dir where full/ has it.
bool mg_session_dump_dot(const struct mg_session * s, const char * name);

// Record every graph the session runs into tl (timeline.h; NULL: stop).
struct mg_timeline;
void mg_session_set_timeline(struct mg_session * s, struct mg_timeline * tl);

//@+ full memory-model
// The memory of this session and its model, region by region, with the
// pointers between them counted (memmap.h). Call after a decode.
struct mg_memory_model;
void mg_session_memory_model(const struct mg_session * s, struct mg_memory_model * mm);
//@- full memory-model

// Write the current graph's compute-buffer plan as <name>.svg into $MG_SVG
// (see galloc.h), or into params.svg_dir where full/ has it.
bool mg_session_dump_svg(const struct mg_session * s, const char * name);
