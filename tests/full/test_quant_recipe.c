// test_quant_recipe.c - llama-quantize's recipe as library code
// (full/quant_recipe.c), without the binary: the type it gives each tensor of
// the fixtures' model against the files llama-quantize wrote from it
// (tiny-q8_0, tiny-q4_k_m), its shape fallbacks and option names against
// llama.cpp's tables (src/llama-quant.cpp tensor_type_fallback, tools/quantize
// QUANT_OPTIONS), and the writing order against llama_model_loader's.
#include "harness.h"
#include "gguf.h"
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

Suite * mg_test_suite(void) {
    Suite * s = suite_create("quant_recipe");
    MG_TCASE(s, "recipe", test_q8_0_types_are_llama_quantize_types, test_q4_k_m_types_are_llama_quantize_types,
                test_shape_fallbacks, test_option_names, test_tensor_order);
    return s;
}
