//@file 09
// model.h - a Qwen3-family model, loaded from a GGUF file, and its graph.
//
//     struct mg_model * m = mg_model_load("MiniMind-3-Q8_0.gguf");
//     if (!m) { fprintf(stderr, "%s\n", mg_last_error()); exit(1); }
//     // m->hp: 8 layers, n_embd 768, 8 heads over 4 KV heads of 96 ...
//     // m->layers[3].wq: {768, 768} q8_0, its data inside the mapped file
//     mg_model_free(m);
//
// Loading reads the hyper-parameters from the metadata, finds every tensor by
// its GGUF name, checks its shape and type, and points a tensor header at its
// bytes in the mapping: nothing is copied, so a model "loads" in milliseconds
// and its pages are read from disk as the first forward pass touches them
// (llama.cpp: llama_model_base::load_hparams in src/llama-model.cpp for the
// keys every architecture has, then src/models/qwen3.cpp's load_arch_hparams
// and load_arch_tensors).
#pragma once

#include "graph.h"
#include "kv_cache.h"

struct mg_gguf;
struct mg_vocab;

//@+ full arch
// The architectures full/ runs (general.architecture), each built by a
// layer function of its own in qwen3.c (layer_llama, ...). They share one
// block (pre-norm attention, then a pre-norm SwiGLU feed-forward, each with
// a residual) and differ inside attention (llama.cpp: src/models/llama.cpp,
// qwen2.cpp, qwen3.cpp):
//   llama  RoPE on pairs (2i, 2i+1); Llama 3's per-pair frequency factors
//          (rope_freqs.weight)
//   qwen2  NEOX RoPE (pairs i, i + D/2); q/k/v biases
//   qwen3  NEOX RoPE; an RMS norm on every head of Q and K
//   qwen3moe  qwen3's attention; the feed-forward is a mixture of experts:
//          a router picks n_expert_used of n_expert SwiGLU blocks per token
//          (llama.cpp: src/models/qwen3moe.cpp, build_moe_ffn)
enum mg_arch {
    MG_ARCH_LLAMA,
    MG_ARCH_QWEN2,
    MG_ARCH_QWEN3,
    MG_ARCH_QWEN3MOE,
};
//@- full arch
//@+ full moe
// The most experts a layer may have (llama.cpp's LLAMA_MAX_EXPERTS, src/llama-hparams.h):
// the loader refuses a file with more, so per-expert arrays can be this long.
#define MG_MAX_EXPERTS 512
//@- full moe

struct mg_model_hparams {
    char  arch_name[16];     // general.architecture: the prefix of every key below ("qwen3")
    //@+ full arch
    enum mg_arch arch;
    int   rope_type;         // enum mg_rope_mode: MG_ROPE_NORMAL for llama, MG_ROPE_NEOX for the Qwens
    //@- full arch
    int   n_layer;           // qwen3.block_count
    int   n_embd;            // qwen3.embedding_length: E
    int   n_ff;              // qwen3.feed_forward_length: F
    int   n_head;            // qwen3.attention.head_count: H
    int   n_head_kv;         // qwen3.attention.head_count_kv: Hkv (H/Hkv query heads share one KV head)
    int   head_dim;          // qwen3.attention.key_length: D (Qwen3-0.6B: 128, not E/H = 64)
    int   n_vocab;           // the number of tokens
    int   n_ctx_train;       // qwen3.context_length
    float rope_freq_base;    // qwen3.rope.freq_base
    float rope_freq_scale;   // 1 / qwen3.rope.scaling.factor for linear scaling, else 1
    float rms_eps;           // qwen3.attention.layer_norm_rms_epsilon
    //@+ full moe
    // Mixture of experts (qwen3moe; 0 / false for the dense architectures).
    int   n_expert;              // qwen3moe.expert_count: experts per layer (llama.cpp's LLAMA_MAX_EXPERTS: 512)
    int   n_expert_used;         // qwen3moe.expert_used_count: experts each token goes through (1..n_expert)
    int   n_ff_exp;              // qwen3moe.expert_feed_forward_length: F_exp, one expert's width
                                 // (absent: n_ff / n_expert_used, as llama.cpp)
    float expert_weights_scale;  // the chosen experts' weights times it (0: none); qwen3moe: always 0, as llama.cpp
    bool  expert_weights_norm;   // the chosen experts' weights renormalised to sum 1 (qwen3moe: always,
                                 // as qwen3moe.cpp passes norm_w = true to build_moe_ffn)
    //@- full moe
};

// One transformer block. Shapes in ggml order: {row length, rows}.
struct mg_layer {
    struct mg_tensor * attn_norm;   // {E}
    struct mg_tensor * wq;          // {E, D*H}
    struct mg_tensor * wk;          // {E, D*Hkv}
    struct mg_tensor * wv;          // {E, D*Hkv}
    struct mg_tensor * wo;          // {D*H, E}
    struct mg_tensor * q_norm;      // {D}, shared by all heads (full/: NULL for llama and qwen2)
    struct mg_tensor * k_norm;      // {D}
    struct mg_tensor * ffn_norm;    // {E}
    struct mg_tensor * ffn_gate;    // {E, F}
    struct mg_tensor * ffn_up;      // {E, F}
    struct mg_tensor * ffn_down;    // {F, E}
    //@+ full arch
    struct mg_tensor * bq;          // {D*H} or NULL: attn_q.bias (qwen2's, optional as in llama.cpp)
    struct mg_tensor * bk;          // {D*Hkv} or NULL
    struct mg_tensor * bv;          // {D*Hkv} or NULL
    //@- full arch
    //@+ full moe
    // qwen3moe's experts (NULL for the dense architectures), 3-D: one {E, F_exp}
    // or {F_exp, E} matrix per expert, stacked along ne[2] (llama.cpp's layout).
    struct mg_tensor * ffn_gate_inp;    // {E, n_expert}: the router, F32 (llama-quantize never quantizes it)
    struct mg_tensor * ffn_gate_exps;   // {E, F_exp, n_expert}
    struct mg_tensor * ffn_up_exps;     // {E, F_exp, n_expert}
    struct mg_tensor * ffn_down_exps;   // {F_exp, E, n_expert}
    //@- full moe
};

struct mg_model {
    char                    path[1024];
    char                    name[128];     // general.name, if any
    struct mg_model_hparams hp;
    struct mg_gguf *        gguf;          // the mapped file: every weight's bytes live there
    struct mg_context *     ctx;           // the weights' headers (no_alloc)
    struct mg_vocab *       vocab;

    struct mg_tensor * tok_embd;      // {E, n_vocab}
    struct mg_tensor * output_norm;   // {E}
    struct mg_tensor * output;        // {E, n_vocab}: output.weight, or tok_embd when tied
    struct mg_layer *  layers;        // [n_layer]
    //@+ full arch
    struct mg_tensor * rope_freqs;    // {D/2} or NULL: Llama 3's frequency factors, one per rotated pair
    //@- full arch

    int64_t n_params;
    size_t  n_weight_bytes;
    //@+ full repack
    void * repack_buf;           // the repacked copies of the Q4_0/Q4_K/Q2_K weights (repack.h), freed with the model
    size_t n_repacked_bytes;     // their size (0: none repacked)
    int    n_repacked;           // how many weight matrices
    size_t n_huge_page_bytes;    // bytes of the file moved into huge pages (mg_model_params.huge_pages)
    //@- full repack
};

// NULL, with mg_last_error() naming the file and what is wrong (an
// unsupported architecture or tensor type, a missing or mis-shaped tensor).
struct mg_model * mg_model_load(const char * path);
//@+ full repack
// What loading does beyond reading the file, as llama_model_params says it
// for llama.cpp. repack: the Q4_0/Q4_K/Q2_K matrices also in the 8-row
// layouts of repack.h, as llama.cpp's CPU_REPACK buffer holds them (its
// use_extra_bufts; llama-cli --no-repack turns it off), in builds whose
// kernels read them (mg_repack_available). huge_pages: the weights the
// kernels read from the file (not the repacked ones, not a token_embd that
// is only looked up) moved into memory backed by 2 MiB pages, at the same
// addresses (mmap.h): a copy in RAM, no longer shared with the page cache,
// that saves decode a TLB miss every 4 KiB (llama.cpp keeps the mapping;
// mg --no-huge-pages does too). mg_model_load is the file as it is
// (chapter 09's loader): neither.
struct mg_model_params {
    bool repack;
    bool huge_pages;
};
struct mg_model_params mg_model_default_params(void);   // repack and huge_pages on
struct mg_model *      mg_model_load_from_file(const char * path, struct mg_model_params params);
//@- full repack
void              mg_model_free(struct mg_model * m);

// The inputs of one batch's graph. The caller fills them before each compute.
struct mg_batch_inputs {
    struct mg_tensor * tokens;   // I32 {T}: token ids
    struct mg_tensor * pos;      // I32 {T}: their positions
    struct mg_tensor * mask;     // F32 {n_kv, T}: the causal mask over the cache
    struct mg_tensor * k_idx;    // I32 {T}: cache rows for K (mg_kv_cache_fill_store_idx)
    struct mg_tensor * v_idx;    // I32 {D*Hkv*T}: cache elements for V
    //@+ full out-ids
    // Some rows of a batch, neither all nor only the last: several sequences'
    // last tokens (llama.cpp: inp_out_ids). n_out, set by the caller before the
    // build, is how many (0: as all_logits says); the build makes out_ids,
    // I32 {n_out}, the tokens' indices in the batch, filled before each compute.
    int                n_out;
    struct mg_tensor * out_ids;
    //@- full out-ids
    //@+ full streams
    // With per-sequence streams (kv->n_stream > 1): the batch holds n_stream
    // streams' tokens, n_tokens / n_stream of each, stream by stream, starting
    // at stream stream0 (llama.cpp: split_equal's ubatch and its sinfo.s0).
    // Set by the caller before the build; the mask is then F32 {n_kv, T_s, 1, n_stream}.
    int n_stream;
    int stream0;
    //@- full streams
};

// Build the forward pass of a batch of n_tokens tokens attending over n_kv
// cache positions into g (the analogue of llama.cpp's llm_build_qwen3). Makes
// the inputs in ctx and returns the logits: {n_vocab, n_tokens} with
// all_logits, else {n_vocab, 1} for the last token only.
//@+ full out-ids
// In full/, without all_logits and with in->n_out > 0: {n_vocab, n_out}, the
// rows in->out_ids names.
//@- full out-ids
struct mg_tensor * mg_qwen3_build(struct mg_context * ctx, struct mg_cgraph * g, const struct mg_model * m,
                                  struct mg_kv_cache * kv, int n_tokens, int n_kv, bool all_logits,
                                  struct mg_batch_inputs * in);

//@+ full moe
// After the graph of a batch ran: print the routing of every MoE layer,
// token by token (pos: each token's position), and the bytes of weights the
// batch read (the "moe" trace category; nothing for a dense model or with
// the trace off).
void mg_moe_trace(const struct mg_cgraph * g, const struct mg_model * m, const int32_t * pos);
//@- full moe

// Graph size and context size that mg_qwen3_build needs for this model.
int    mg_qwen3_graph_size(const struct mg_model * m);
size_t mg_qwen3_ctx_size(const struct mg_model * m);
