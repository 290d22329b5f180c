//@file full
// quant_recipe.h - llama-quantize's recipe: which type each tensor of a model
// gets for a TYPE such as Q4_K_M (mg quantize; cli/cmd_quantize.c converts
// the rows). The same choices as llama.cpp's src/llama-quant.cpp, so that both
// tools write the same bytes from the same file.
//
//     struct mg_quant_option o;
//     mg_quant_option_parse("Q4_K_M", &o);            // file type 15, mostly Q4_K
//     struct mg_quant_mix mix;
//     mg_quant_mix_init(&mix, gguf, &o, false);      // the model's layers, GQA, tied output
//     for each tensor t in mg_quant_tensor_order:     // the counters need that order
//         enum mg_type wanted, type = mg_quant_tensor_type(&mix, t, &wanted);
//
// A TYPE names a *file type* (llama.cpp's enum llama_ftype), not one tensor
// type: Q4_K_M means "mostly Q4_K", with the tied embedding in Q6_K and attn_v
// and ffn_down of some layers in Q6_K.
#pragma once

#include "gguf.h"
#include "tensor.h"

#include <stdbool.h>

// llama.cpp include/llama.h, enum llama_ftype (the number is general.file_type).
enum mg_ftype {
    MG_FTYPE_ALL_F32 = 0,
    MG_FTYPE_F16     = 1,
    MG_FTYPE_Q4_0    = 2,
    MG_FTYPE_Q4_1    = 3,
    MG_FTYPE_Q8_0    = 7,
    MG_FTYPE_Q5_0    = 8,
    MG_FTYPE_Q5_1    = 9,
    MG_FTYPE_Q2_K    = 10,
    MG_FTYPE_Q3_K_S  = 11,
    MG_FTYPE_Q3_K_M  = 12,
    MG_FTYPE_Q3_K_L  = 13,
    MG_FTYPE_Q4_K_S  = 14,
    MG_FTYPE_Q4_K_M  = 15,
    MG_FTYPE_Q5_K_S  = 16,
    MG_FTYPE_Q5_K_M  = 17,
    MG_FTYPE_Q6_K    = 18,
    MG_FTYPE_IQ4_NL  = 25,
    MG_FTYPE_BF16    = 32,
};

// A TYPE as llama-quantize's QUANT_OPTIONS spell it, and the tensor type most matrices get.
struct mg_quant_option {
    char         name[8];   // as llama-quantize spells it
    enum mg_ftype   ftype;
    enum mg_type type;   // the tensor type of "most" matrices
};

// name: a mix (Q4_K_M, Q3_K, ...: any case) or a weight type name (q8_0, f16,
// ...). False for anything else (q8_1, q8_K, i32 are no weight types).
bool mg_quant_option_parse(const char * name, struct mg_quant_option * out);
// The option of a file type (general.file_type), as mg_model_quantize gets it:
// Q4_K_M for 15, Q8_0 for 7. False for a number that is no file type this
// engine writes.
bool mg_quant_option_of_ftype(enum mg_ftype ftype, struct mg_quant_option * out);

// What the rules need to know about the model, and llama-quant.cpp's counters
// (quantize_state_impl): the i-th attn_v / ffn_down seen, in writing order
// (which is layer order, see compare_tensors).
struct mg_quant_mix {
    enum mg_ftype ftype;
    enum mg_type  type;               // the option's tensor type
    bool          pure;               // --pure: every matrix in type, no rules
    bool       tied_embeddings;   // no output.weight: token_embd is the output matrix too
    int        n_gqa;             // n_head / n_head_kv
    int        n_layer;
    int        n_expert;          // ARCH.expert_count (0: a dense model); some rules are for n_expert == 8
    int        n_attn_v, i_attn_v;
    int        i_ffn_down;
};

// Reads what the rules need from the model: n_layer and n_gqa from its
// hyper-parameters, whether output.weight exists, how many attn_v there are.
void mg_quant_mix_init(struct mg_quant_mix * s, const struct mg_gguf * g, const struct mg_quant_option * o, bool pure);

// The type tensor t becomes; *wanted is what the rules asked for before the
// shape fallback (rows that do not split into the type's blocks). Tensors
// must come in mg_quant_tensor_order (the rules count attn_v and ffn_down).
// A tensor that is not quantized keeps its type. MG_TYPE_COUNT after
// mg_set_error when the rows fit no block and llama-quantize has no fallback.
enum mg_type mg_quant_tensor_type(struct mg_quant_mix * s, const struct mg_gguf_tensor_info * t, enum mg_type * wanted);

// llama_model_loader's weight_name_comparer (the order llama-quantize writes
// tensors in): by layer number ("blk.N."; others first), then by name.
int mg_quant_tensor_order(const char * a, const char * b);

// Whether t is quantized at all: matrices named *weight, but not norms,
// routers, positions and the like (tensor_allows_quantization).
bool mg_quant_allows(const struct mg_gguf_tensor_info * t);

// tensor_type_fallback: type if rows of ne0 split into its blocks, else the
// 32-element type of about the same size, else F16; MG_TYPE_COUNT when
// llama-quantize has no fallback for type.
enum mg_type mg_quant_shape_fallback(enum mg_type type, int64_t ne0);

// ggml_n_dims: the number of dimensions once trailing 1s are dropped, so a
// {256, 1} "matrix" counts as the vector it is.
int mg_quant_n_dims(const struct mg_gguf_tensor_info * t);
