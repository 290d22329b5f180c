// test_ex1_qwen2.c - "add an architecture": qwen2 put back into the handout,
// a copy of full/ that runs llama and qwen3 only (exercises/arch/make_handout.sh).
//
// Graded by `make grade` in the handout. The model is the tiny-qwen2 shape
// of tests/full/test_golden2.c (`mg mkmodel --preset tiny-qwen2`: 2 layers,
// 8/4 heads of 64, q/k/v biases, tied output), quantized by `mg quantize`
// into llama-quantize's exact bytes, and the answers are llama.cpp's own
// outputs for it (tests/fixtures/golden2/tiny-qwen2-*). Four checks:
//   - the file loads as qwen2: its name, NEOX RoPE (pairs i, i + D/2, as
//     llama.cpp's llama_model_rope_type gives qwen2), and every layer's
//     attn_q.bias, attn_k.bias, attn_v.bias in the model's context with
//     their shapes (a file loads only when all of its tensors are used);
//   - the graph adds each bias right after its projection, named as
//     llama.cpp's build_qkv names it: an ADD "Qcur-0" of the MUL_MAT "Qcur-0"
//     and blk.0.attn_q.bias, in every layer, for Q, K and V;
//   - the F32 model's logits against llama.cpp's, the prompt in one batch
//     (tolerance 1e-3: every bias and every rotation has to be right);
//   - the other cases: six weight types (F32, F16, Q8_0, Q4_0, Q4_K_M,
//     Q6_K), the four prompts, one batch and token by token (the KV cache
//     holds K and V with their biases added; decode steps rotate one position).
// MG_GOLDEN2_CASES (test_golden2.c's comma-separated key prefixes, such as
// "tiny-qwen2/f32/,tiny-qwen2/q4_0/fox.") narrows these cases, as
// exercises/check_solutions_arch.sh does to keep CI short.
//
// The comparisons are test_golden2.c's own, included here: the same models,
// goldens, tolerances and known differences. Its suite is renamed and not run.
#define mg_test_suite golden2_suite
#include "full/test_golden2.c"
#undef mg_test_suite

#include "arena.h"
#include "graph.h"

static const char default_cases[] = "tiny-qwen2/f32/,tiny-qwen2/f16/,tiny-qwen2/q8_0/,tiny-qwen2/q4_0/,"
                                    "tiny-qwen2/q4_k_m/,tiny-qwen2/q6_k/";

static int qwen2_shape(void) {
    for (int sh = 0; sh < N_SHAPES; sh++) {
        if (strcmp(shapes[sh].name, "tiny-qwen2") == 0) return sh;
    }
    ck_abort_msg("test_golden2.c has no tiny-qwen2 shape");
    return -1;
}

// The models test_golden2.c's setup makes for the selected cases: the six
// types by default. The F32 master is made whenever any qwen2 case runs.
// They are made by full/'s own mg (MG_BIN, unless set already): mg mkmodel
// loads the file it writes, which the handout's mg cannot do for qwen2 until
// the exercise is done (make grade in the handout builds full/'s mg first).
static void setup_exercise(void) {
    const char * cases = getenv("MG_GOLDEN2_CASES");
    if (cases == NULL || cases[0] == '\0') setenv("MG_GOLDEN2_CASES", default_cases, 1);
    const char * bin = getenv("MG_BIN");
    if (bin == NULL || bin[0] == '\0') setenv("MG_BIN", mg_test_root("full/build/mg"), 1);
    if (access(mg_test_mg_bin(), X_OK) != 0) {
        fprintf(stderr, "%s is not built: make -C %s build/mg (it makes the test's models)\n", mg_test_mg_bin(),
                mg_test_root("full"));
    }
    setup_models();
}

static struct mg_model * load_qwen2_f32(void) {
    const char * path = model_paths[qwen2_shape()][0];
    ck_assert_msg(path[0] != '\0', "no tiny-qwen2 model was made: MG_GOLDEN2_CASES selects no tiny-qwen2 case");
    struct mg_model * m = mg_model_load_from_file(path, mg_model_default_params());
    ck_assert_msg(m != NULL, "the tiny-qwen2 F32 file does not load: %s", mg_last_error());
    return m;
}

// blk.IL.attn_X.bias is in the model's context, a vector of ne0.
static void expect_bias(const struct mg_model * m, int il, const char * x, int64_t ne0) {
    char name[MG_MAX_NAME];
    snprintf(name, sizeof(name), "blk.%d.attn_%s.bias", il, x);
    const struct mg_tensor * t = mg_get_tensor(m->ctx, name);
    ck_assert_msg(t != NULL, "%s is not among the model's tensors (m->ctx): load it in load_head_tensors", name);
    ck_assert_msg(t->ne[0] == ne0 && t->ne[1] == 1, "%s is [%lld, %lld], not [%lld]", name, (long long) t->ne[0],
                  (long long) t->ne[1], (long long) ne0);
}

START_TEST(loads_qwen2) {
    struct mg_model * m = load_qwen2_f32();
    ck_assert_msg(strcmp(m->hp.arch_name, "qwen2") == 0, "arch_name is '%s', not 'qwen2'", m->hp.arch_name);
    ck_assert_msg(m->hp.rope_type == MG_ROPE_NEOX,
                  "qwen2's rope_type is %d, not MG_ROPE_NEOX (%d): Qwen2 rotates the pairs (i, i + D/2), as "
                  "llama.cpp's llama_model_rope_type says (LLAMA_ROPE_TYPE_NEOX)",
                  m->hp.rope_type, MG_ROPE_NEOX);
    const int64_t D = m->hp.head_dim;
    for (int il = 0; il < m->hp.n_layer; il++) {
        expect_bias(m, il, "q", D * m->hp.n_head);
        expect_bias(m, il, "k", D * m->hp.n_head_kv);
        expect_bias(m, il, "v", D * m->hp.n_head_kv);
    }
    mg_model_free(m);
}
END_TEST

// The node of g that adds blk.IL.attn_X.bias to the projection "Xcur-IL": an
// ADD of that name whose first operand is the MUL_MAT of that name.
static const struct mg_tensor * bias_add(const struct mg_cgraph * g, int il, const char * x, const char * cur) {
    char name[MG_MAX_NAME], bias[MG_MAX_NAME];
    snprintf(name, sizeof(name), "%s-%d", cur, il);
    snprintf(bias, sizeof(bias), "blk.%d.attn_%s.bias", il, x);
    for (int i = 0; i < g->n_nodes; i++) {
        const struct mg_tensor * t = g->nodes[i];
        if (t->op != MG_OP_ADD || strcmp(t->name, name) != 0) continue;
        const struct mg_tensor * a = t->src[0], * b = t->src[1];
        if (a != NULL && a->op == MG_OP_MUL_MAT && strcmp(a->name, name) == 0 && b != NULL &&
            strcmp(b->name, bias) == 0) {
            return t;
        }
    }
    return NULL;
}

START_TEST(biases_added_after_projections) {
    struct mg_model *        m  = load_qwen2_f32();
    struct mg_session_params sp = mg_session_default_params();
    sp.n_threads                = 1;
    sp.n_ctx                    = 64;
    struct mg_session * s = mg_session_new(m, sp);
    ck_assert_msg(s != NULL, "%s", mg_last_error());
    const int32_t tokens[] = {100, 200, 300};
    ck_assert_msg(mg_decode(s, tokens, 3, false), "%s", mg_last_error());
    const struct mg_cgraph * g = mg_session_graph(s);
    ck_assert_ptr_nonnull(g);
    static const char * const xs[3][2] = {{"q", "Qcur"}, {"k", "Kcur"}, {"v", "Vcur"}};
    for (int il = 0; il < m->hp.n_layer; il++) {
        for (int j = 0; j < 3; j++) {
            ck_assert_msg(bias_add(g, il, xs[j][0], xs[j][1]) != NULL,
                          "layer %d: no ADD node named %s-%d of the MUL_MAT %s-%d and blk.%d.attn_%s.bias in the "
                          "graph: add the bias right after the projection and name the sum as llama.cpp's build_qkv "
                          "does (cb(cur, \"%s\", il))",
                          il, xs[j][1], il, xs[j][1], il, il, xs[j][0], xs[j][1]);
        }
    }
    mg_session_free(s);
    mg_model_free(m);
}
END_TEST

// The qwen2 golden cases of type t (all types: -1) and mode (either: -1)
// that MG_GOLDEN2_CASES selects, each judged as test_golden2.c's
// test_golden_case judges it. Fails with the number that differ from
// llama.cpp and the first of them; returns how many ran.
static int run_qwen2_cases(int want_t, int want_mode, bool skip_f32_batch) {
    const int sh  = qwen2_shape();
    int       ran = 0, bad = 0;
    char      first_bad[400] = "";
    for (int t = 0; t < N_TYPES; t++) {
        for (int p = 0; p < N_PROMPTS; p++) {
            for (int mode = 0; mode < 2; mode++) {
                char key[64];
                case_key(key, sizeof(key), sh, t, p, mode);
                if ((want_t >= 0 && t != want_t) || (want_mode >= 0 && mode != want_mode) ||
                    (skip_f32_batch && t == 0 && mode == 0) || !shape_has_type(&shapes[sh], t) ||
                    !case_selected(key)) {
                    continue;
                }
                const struct level_set * own = own_level_set();
                if (own != NULL && !set_has_shape(own->dir, &shapes[sh])) own = NULL;
                const double         tol = own != NULL ? types[t].tol : types[t].loose;
                const struct outcome o   = run_case(own != NULL ? own->dir : level_sets[0].dir, sh, t, p, mode, true, tol);
                const bool ok = o.d_prompt <= tol && o.d_steps <= tol && (own == NULL || o.greedy_mismatch < 0);
                ran++;
                if (getenv("MG_GOLDEN2_VERBOSE") != NULL) {   // the figures of every case, as test_golden2.c prints them
                    printf("case %s: prompt max |dlogit| %.3g, teacher-forced steps %.3g, greedy %s\n", key, o.d_prompt,
                           o.d_steps, o.greedy_mismatch < 0 ? "equal" : "parts");
                    fflush(stdout);
                }
                if (!ok && !(own != NULL && is_known(own, key)) && bad++ == 0) {
                    snprintf(first_bad, sizeof(first_bad),
                             "%s: prompt max |dlogit| %.3g, teacher-forced steps %.3g, greedy %s (tolerance %g)", key,
                             o.d_prompt, o.d_steps, o.greedy_mismatch < 0 ? "equal" : "parts", tol);
                }
            }
        }
    }
    ck_assert_msg(bad == 0, "%d of %d cases differ from llama.cpp; the first: %s", bad, ran, first_bad);
    return ran;
}

START_TEST(f32_batch_like_llama_cpp) {
    const int ran = run_qwen2_cases(0, 0, false);
    ck_assert_msg(ran > 0, "MG_GOLDEN2_CASES selects no tiny-qwen2/f32/*.batch case");
}
END_TEST

START_TEST(every_type_both_modes) {
    const int ran = run_qwen2_cases(-1, -1, true);
    ck_assert_msg(ran > 0, "MG_GOLDEN2_CASES selects no tiny-qwen2 case beside the F32 batch ones");
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s  = suite_create("arch ex1 qwen2");
    TCase * tc = tcase_create("qwen2");
    tcase_set_timeout(tc, 600);
    tcase_add_unchecked_fixture(tc, setup_exercise, teardown_models);
    tcase_add_test(tc, loads_qwen2);                      // 2 points
    tcase_add_test(tc, biases_added_after_projections);   // 2 points
    tcase_add_test(tc, f32_batch_like_llama_cpp);         // 3 points
    tcase_add_test(tc, every_type_both_modes);            // 3 points
    suite_add_tcase(s, tc);
    return s;
}
