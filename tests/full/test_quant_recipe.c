// test_quant_recipe.c - llama-quantize's recipe as library code
// (full/quant_recipe.c), without the binary: the type it gives each tensor of
// the fixtures' model against the files llama-quantize wrote from it
// (tiny-q8_0, tiny-q4_k_m), its shape fallbacks and option names against
// llama.cpp's tables (src/llama-quant.cpp tensor_type_fallback, tools/quantize
// QUANT_OPTIONS), the writing order against llama_model_loader's, and the
// rules for mixtures of experts (qwen3moe) tensor by tensor against a table
// read off llama-quant.cpp's llama_tensor_get_type_impl (mg quantize's files
// of a whole qwen3moe model are compared with llama-quantize's in
// test_model_quantize.c).
#include "harness.h"
#include "gguf.h"
#include "gguf_writer.h"
#include "mg.h"
#include "quant_recipe.h"

#include <stdlib.h>
#include <string.h>

static int compare_infos(const void * a, const void * b) {
    const struct mg_gguf_tensor_info * const * x = a, * const * y = b;
    return mg_quant_tensor_order((*x)->name, (*y)->name);
}

// Every tensor of tiny-f32 through the recipe for TYPE, in writing order,
// against the type the same tensor has in llama-quantize's output.
static void check_against_llama_quantize(const char * type_name, const char * reference) {
    struct mg_gguf * f32 = mg_gguf_open(mg_test_fixture("models/tiny-f32.gguf"));
    struct mg_gguf * ref = mg_gguf_open(mg_test_fixture(reference));
    ck_assert_msg(f32 != NULL && ref != NULL, "%s", mg_last_error());
    struct mg_quant_option o;
    ck_assert(mg_quant_option_parse(type_name, &o));
    struct mg_quant_mix mix;
    mg_quant_mix_init(&mix, f32, &o, false);
    const int n = (int) mg_gguf_n_tensors(f32);
    const struct mg_gguf_tensor_info ** order = malloc((size_t) n * sizeof(*order));
    for (int i = 0; i < n; i++) order[i] = mg_gguf_tensor(f32, i);
    qsort(order, (size_t) n, sizeof(*order), compare_infos);
    int n_quantized = 0;
    for (int i = 0; i < n; i++) {
        enum mg_type wanted;
        const enum mg_type type = mg_quant_tensor_type(&mix, order[i], &wanted);
        const struct mg_gguf_tensor_info * theirs = mg_gguf_find_tensor(ref, order[i]->name);
        ck_assert_msg(theirs != NULL, "%s is not in %s", order[i]->name, reference);
        ck_assert_msg((int) type == theirs->type, "%s %s: ours %s, llama-quantize's %s", type_name, order[i]->name,
                      mg_type_name(type), mg_gguf_ggml_type_name(theirs->type));
        n_quantized += (int) type != order[i]->type;
        // A tensor of llama-quantize's file is where it writes it: the same order.
        ck_assert_str_eq(mg_gguf_tensor(ref, i)->name, order[i]->name);
    }
    ck_assert_int_gt(n_quantized, 0);
    free(order);
    mg_gguf_close(f32);
    mg_gguf_close(ref);
}

START_TEST(test_q8_0_types_are_llama_quantize_types) {
    check_against_llama_quantize("Q8_0", "models/tiny-q8_0.gguf");
}
END_TEST

START_TEST(test_q4_k_m_types_are_llama_quantize_types) {
    check_against_llama_quantize("q4_k_m", "models/tiny-q4_k_m.gguf");
}
END_TEST

// tensor_type_fallback: rows of 2432 (MiniMind's ffn_down: 9.5 blocks of
// 256) take the 32-element type of about the same size; rows of 100 fit no
// block and become F16; Q8_0 has no fallback in llama-quantize.
START_TEST(test_shape_fallbacks) {
    static const struct {
        enum mg_type type;
        int64_t      ne0;
        enum mg_type expect;
    } cases[] = {
        {MG_TYPE_Q4_K, 2432, MG_TYPE_Q5_0}, {MG_TYPE_Q5_K, 2432, MG_TYPE_Q5_1}, {MG_TYPE_Q6_K, 2432, MG_TYPE_Q8_0},
        {MG_TYPE_Q2_K, 2432, MG_TYPE_Q4_0}, {MG_TYPE_Q3_K, 2432, MG_TYPE_Q4_0}, {MG_TYPE_Q4_K, 100, MG_TYPE_F16},
        {MG_TYPE_Q4_K, 512, MG_TYPE_Q4_K},  {MG_TYPE_Q8_0, 100, MG_TYPE_COUNT},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const enum mg_type got = mg_quant_shape_fallback(cases[i].type, cases[i].ne0);
        ck_assert_msg(got == cases[i].expect, "%s with rows of %lld: %s", mg_type_name(cases[i].type),
                      (long long) cases[i].ne0, got == MG_TYPE_COUNT ? "none" : mg_type_name(got));
    }
}
END_TEST

// llama-quantize's TYPE names: any case, the K aliases are the _M mixes, and
// the file type numbers are llama_ftype's.
START_TEST(test_option_names) {
    static const struct {
        const char * name;
        int          ftype;
        enum mg_type type;
    } cases[] = {
        {"Q4_K_M", 15, MG_TYPE_Q4_K}, {"q4_k", 15, MG_TYPE_Q4_K}, {"Q3_K", 12, MG_TYPE_Q3_K}, {"Q5_K", 17, MG_TYPE_Q5_K},
        {"Q2_K", 10, MG_TYPE_Q2_K},   {"q8_0", 7, MG_TYPE_Q8_0},  {"BF16", 32, MG_TYPE_BF16}, {"f32", 0, MG_TYPE_F32},
        {"IQ4_NL", 25, MG_TYPE_IQ4_NL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct mg_quant_option o;
        ck_assert_msg(mg_quant_option_parse(cases[i].name, &o), "%s", cases[i].name);
        ck_assert_int_eq((int) o.ftype, cases[i].ftype);
        ck_assert_int_eq((int) o.type, (int) cases[i].type);
    }
    struct mg_quant_option o;
    ck_assert(!mg_quant_option_parse("q8_1", &o));   // an activation type, no weight type
    ck_assert(!mg_quant_option_parse("Q4_K_X", &o));
}
END_TEST

// llama_model_loader's order: tensors outside the blocks first, then layer by
// layer in number order (blk.10 after blk.2), by name within a layer.
START_TEST(test_tensor_order) {
    ck_assert_int_lt(mg_quant_tensor_order("token_embd.weight", "blk.0.attn_q.weight"), 0);
    ck_assert_int_lt(mg_quant_tensor_order("blk.2.ffn_up.weight", "blk.10.attn_k.weight"), 0);
    ck_assert_int_lt(mg_quant_tensor_order("blk.3.attn_k.weight", "blk.3.attn_q.weight"), 0);
    ck_assert_int_lt(mg_quant_tensor_order("output.weight", "token_embd.weight"), 0);
}
END_TEST

// ---------------------------------------------------------------------------
// Mixtures of experts: a qwen3moe model of 8 layers (rows of 256, so no shape
// fallback), with 8 or 128 experts, 8 heads over 2 KV heads (n_gqa 4)
// ---------------------------------------------------------------------------

static char moe_dir[64];

// The model's header and tensors (zeros: the rules read names, shapes and
// keys only). skip: a tensor left out, or NULL.
static const char * write_moe_model(const char * name, int n_expert, const char * skip) {
    enum { E = 256, ROWS = 8, N_LAYER = 8 };
    static float zeros[E * ROWS * 128];
    struct mg_gguf_writer * w = mg_gguf_writer_new();
    ck_assert(mg_gguf_writer_set_str(w, "general.architecture", "qwen3moe"));
    ck_assert(mg_gguf_writer_set_u32(w, "qwen3moe.block_count", N_LAYER));
    ck_assert(mg_gguf_writer_set_u32(w, "qwen3moe.attention.head_count", 8));
    ck_assert(mg_gguf_writer_set_u32(w, "qwen3moe.attention.head_count_kv", 2));
    ck_assert(mg_gguf_writer_set_u32(w, "qwen3moe.expert_count", (uint32_t) n_expert));
    const int64_t matrix[3] = {E, ROWS, 1}, router[3] = {E, n_expert, 1}, stack[3] = {E, ROWS, n_expert};
    ck_assert(mg_gguf_writer_add_tensor(w, "token_embd.weight", MG_TYPE_F32, 2, matrix, zeros));
    ck_assert(mg_gguf_writer_add_tensor(w, "output.weight", MG_TYPE_F32, 2, matrix, zeros));
    ck_assert(mg_gguf_writer_add_tensor(w, "output_norm.weight", MG_TYPE_F32, 1, matrix, zeros));
    static const char * const matrices[] = {"attn_q", "attn_k", "attn_v", "attn_output"};
    static const char * const stacks[]   = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
    char t[MG_MAX_NAME];
    for (int il = 0; il < N_LAYER; il++) {
        snprintf(t, sizeof(t), "blk.%d.attn_norm.weight", il);
        ck_assert(mg_gguf_writer_add_tensor(w, t, MG_TYPE_F32, 1, matrix, zeros));
        for (int i = 0; i < 4; i++) {
            snprintf(t, sizeof(t), "blk.%d.%s.weight", il, matrices[i]);
            ck_assert(mg_gguf_writer_add_tensor(w, t, MG_TYPE_F32, 2, matrix, zeros));
        }
        snprintf(t, sizeof(t), "blk.%d.ffn_gate_inp.weight", il);
        ck_assert(mg_gguf_writer_add_tensor(w, t, MG_TYPE_F32, 2, router, zeros));
        for (int i = 0; i < 3; i++) {
            snprintf(t, sizeof(t), "blk.%d.%s.weight", il, stacks[i]);
            if (skip == NULL || strcmp(t, skip) != 0) ck_assert(mg_gguf_writer_add_tensor(w, t, MG_TYPE_F32, 3, stack, zeros));
        }
    }
    const char * path = mg_test_path_in(moe_dir, name);
    ck_assert_msg(mg_gguf_writer_write(w, path), "%s", mg_last_error());
    mg_gguf_writer_free(w);
    return path;
}

// The type the recipe for TYPE gives tensor `name` of the model at path,
// every tensor planned in writing order as mg quantize does (the counters).
static enum mg_type moe_type(const char * path, const char * type_name, const char * name) {
    struct mg_gguf * g = mg_gguf_open(path);
    ck_assert_msg(g != NULL, "%s", mg_last_error());
    struct mg_quant_option o;
    ck_assert(mg_quant_option_parse(type_name, &o));
    struct mg_quant_mix mix;
    mg_quant_mix_init(&mix, g, &o, false);
    const int n = (int) mg_gguf_n_tensors(g);
    const struct mg_gguf_tensor_info ** order = malloc((size_t) n * sizeof(*order));
    for (int i = 0; i < n; i++) order[i] = mg_gguf_tensor(g, i);
    qsort(order, (size_t) n, sizeof(*order), compare_infos);
    enum mg_type found = MG_TYPE_COUNT;
    for (int i = 0; i < n; i++) {
        enum mg_type       wanted;
        const enum mg_type type = mg_quant_tensor_type(&mix, order[i], &wanted);
        if (strcmp(order[i]->name, name) == 0) found = type;
    }
    free(order);
    mg_gguf_close(g);
    ck_assert_msg(found != MG_TYPE_COUNT, "no tensor %s", name);
    return found;
}

// llama-quant.cpp, llama_tensor_get_type_impl, read rule by rule for these
// files. use_more_bits over 8 layers picks 0, 3, 6, 7. With n_expert == 8:
// attn_v and attn_k are Q8_0 in every quantized mix; attn_output is Q5_K in
// Q2_K, Q3_K_M, IQ4_NL, Q4_K_M (not Q3_K_L, nor Q4_0); ffn_down_exps counts as
// ffn_down. With 128 experts the dense rules (n_gqa 4) apply. The router is
// never quantized.
static const struct {
    int          n_expert;
    const char * type;
    const char * tensor;
    enum mg_type expect;
} moe_cases[] = {
    {8, "Q4_K_M", "blk.0.attn_v.weight", MG_TYPE_Q8_0},         {8, "Q4_K_M", "blk.5.attn_k.weight", MG_TYPE_Q8_0},
    {8, "Q4_K_M", "blk.2.attn_q.weight", MG_TYPE_Q4_K},         {8, "Q4_K_M", "blk.2.attn_output.weight", MG_TYPE_Q5_K},
    {8, "Q4_K_M", "blk.0.ffn_down_exps.weight", MG_TYPE_Q6_K},  {8, "Q4_K_M", "blk.1.ffn_down_exps.weight", MG_TYPE_Q4_K},
    {8, "Q4_K_M", "blk.3.ffn_down_exps.weight", MG_TYPE_Q6_K},  {8, "Q4_K_M", "blk.7.ffn_down_exps.weight", MG_TYPE_Q6_K},
    {8, "Q4_K_M", "blk.4.ffn_gate_exps.weight", MG_TYPE_Q4_K},  {8, "Q4_K_M", "blk.4.ffn_up_exps.weight", MG_TYPE_Q4_K},
    {8, "Q4_K_M", "blk.4.ffn_gate_inp.weight", MG_TYPE_F32},    {8, "Q4_K_M", "output.weight", MG_TYPE_Q6_K},
    {8, "Q4_K_M", "token_embd.weight", MG_TYPE_Q4_K},
    {8, "Q3_K_M", "blk.1.attn_v.weight", MG_TYPE_Q8_0},         {8, "Q3_K_M", "blk.1.attn_output.weight", MG_TYPE_Q5_K},
    {8, "Q3_K_M", "blk.0.ffn_down_exps.weight", MG_TYPE_Q4_K},  {8, "Q3_K_M", "blk.6.ffn_gate_exps.weight", MG_TYPE_Q3_K},
    {8, "Q3_K_L", "blk.1.attn_output.weight", MG_TYPE_Q3_K},    {8, "Q3_K_L", "blk.2.ffn_down_exps.weight", MG_TYPE_Q5_K},
    {8, "Q3_K_L", "blk.2.attn_v.weight", MG_TYPE_Q8_0},
    {8, "Q2_K", "blk.2.attn_output.weight", MG_TYPE_Q5_K},      {8, "Q2_K", "blk.2.ffn_down_exps.weight", MG_TYPE_Q3_K},
    {8, "Q2_K", "blk.2.attn_k.weight", MG_TYPE_Q8_0},           {8, "Q2_K", "blk.2.attn_q.weight", MG_TYPE_Q2_K},
    {8, "IQ4_NL", "blk.0.ffn_down_exps.weight", MG_TYPE_Q5_K},  {8, "IQ4_NL", "blk.1.ffn_down_exps.weight", MG_TYPE_IQ4_NL},
    {8, "IQ4_NL", "blk.1.attn_output.weight", MG_TYPE_Q5_K},    {8, "IQ4_NL", "blk.1.attn_v.weight", MG_TYPE_Q8_0},
    {8, "Q4_0", "blk.1.attn_v.weight", MG_TYPE_Q8_0},           {8, "Q4_0", "blk.1.attn_k.weight", MG_TYPE_Q8_0},
    {8, "Q4_0", "blk.1.attn_output.weight", MG_TYPE_Q4_0},      {8, "Q4_0", "blk.1.ffn_down_exps.weight", MG_TYPE_Q4_0},
    {8, "Q8_0", "blk.1.ffn_gate_inp.weight", MG_TYPE_F32},      {8, "F16", "blk.1.ffn_gate_inp.weight", MG_TYPE_F32},
    {8, "F16", "blk.1.attn_v.weight", MG_TYPE_F16},             {8, "F16", "blk.1.ffn_down_exps.weight", MG_TYPE_F16},
    {128, "Q4_K_M", "blk.0.attn_v.weight", MG_TYPE_Q6_K},       {128, "Q4_K_M", "blk.1.attn_v.weight", MG_TYPE_Q4_K},
    {128, "Q4_K_M", "blk.1.attn_k.weight", MG_TYPE_Q4_K},       {128, "Q4_K_M", "blk.1.attn_output.weight", MG_TYPE_Q4_K},
    {128, "Q4_K_M", "blk.3.ffn_down_exps.weight", MG_TYPE_Q6_K}, {128, "Q4_K_M", "blk.4.ffn_down_exps.weight", MG_TYPE_Q4_K},
    {128, "Q3_K_M", "blk.1.attn_v.weight", MG_TYPE_Q5_K},       {128, "Q3_K_M", "blk.2.attn_v.weight", MG_TYPE_Q4_K},
    {128, "Q3_K_M", "blk.1.attn_output.weight", MG_TYPE_Q4_K},
    {128, "Q2_K", "blk.1.attn_v.weight", MG_TYPE_Q4_K},         {128, "Q2_K", "blk.1.attn_k.weight", MG_TYPE_Q2_K},
    {128, "Q2_K", "blk.1.attn_output.weight", MG_TYPE_Q3_K},
};

START_TEST(test_moe_types) {
    mg_test_make_dir(moe_dir, sizeof(moe_dir), "recipe_moe");
    const char * paths[2];
    char         p8[1100], p128[1100];
    snprintf(p8, sizeof(p8), "%s", write_moe_model("x8.gguf", 8, NULL));
    snprintf(p128, sizeof(p128), "%s", write_moe_model("x128.gguf", 128, NULL));
    paths[0] = p8;
    paths[1] = p128;
    for (size_t i = 0; i < sizeof(moe_cases) / sizeof(moe_cases[0]); i++) {
        const enum mg_type got = moe_type(paths[moe_cases[i].n_expert == 8 ? 0 : 1], moe_cases[i].type, moe_cases[i].tensor);
        ck_assert_msg(got == moe_cases[i].expect, "%d experts, %s: %s is %s, llama-quantize gives %s", moe_cases[i].n_expert,
                      moe_cases[i].type, moe_cases[i].tensor, mg_type_name(got), mg_type_name(moe_cases[i].expect));
    }
    mg_test_remove_dir(moe_dir);
}
END_TEST

// With experts, ffn_down's layer is the number in its name (llama-quant.cpp's
// layer_info), not its place among the ffn_downs: a file without blk.0's
// stack still gives blk.3 (use_more_bits) Q6_K and blk.1 Q4_K, where counting
// would make blk.1 the first (Q6_K) and blk.3 the third (Q4_K).
START_TEST(test_moe_ffn_down_layer_from_name) {
    mg_test_make_dir(moe_dir, sizeof(moe_dir), "recipe_moe");
    const char * path = write_moe_model("gap.gguf", 8, "blk.0.ffn_down_exps.weight");
    ck_assert_int_eq(moe_type(path, "Q4_K_M", "blk.1.ffn_down_exps.weight"), MG_TYPE_Q4_K);
    ck_assert_int_eq(moe_type(path, "Q4_K_M", "blk.3.ffn_down_exps.weight"), MG_TYPE_Q6_K);
    ck_assert_int_eq(moe_type(path, "Q4_K_M", "blk.2.ffn_down_exps.weight"), MG_TYPE_Q4_K);
    mg_test_remove_dir(moe_dir);
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("quant_recipe");
    MG_TCASE(s, "recipe", test_q8_0_types_are_llama_quantize_types, test_q4_k_m_types_are_llama_quantize_types,
                test_shape_fallbacks, test_option_names, test_tensor_order, test_moe_types,
                test_moe_ffn_down_layer_from_name);
    return s;
}
