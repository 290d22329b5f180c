// test_moe_trace.c - the "moe" trace category (qwen3.c's mg_moe_trace) on a
// real mixture-of-experts run: mg logits on `mg mkmodel --preset
// tiny-qwen3moe`, the prompt in one batch, with --trace moe and
// --dump-tensors; layer 0 (the last layer routes only the last token). What the trace says is checked against what the graph
// computed: each token's experts are the two largest of the router's
// probabilities (the ffn_moe_probs dump), their weights those probabilities
// renormalised, the per-expert counts add up, and the bytes it says the
// batch read are the chosen experts' slices, counted here from the tensors'
// shapes. The logits themselves are asserted against llama.cpp's in
// test_golden2.c (shape tiny-qwen3moe).
#include "harness.h"
#include "gguf.h"
#include "model.h"
#include "npy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static char dir[64];

static void setup(void) {
    mg_test_make_dir(dir, sizeof(dir), "moe_trace");
}

static void teardown(void) {
    mg_test_remove_dir(dir);
}

#define in_dir(name) mg_test_path_in(dir, name)

enum { N_EXPERT = 8, N_USED = 2, MAX_TOKENS = 32 };

struct routing {
    int   n_tokens;
    int   expert[MAX_TOKENS][N_USED];
    float weight[MAX_TOKENS][N_USED];
    int   count[N_EXPERT];   // from the "tokens per expert" line
    long long read, all;     // from the "experts: this batch read X of their Y bytes" line
};

// Parse the trace lines of layer 0 of the first batch in err.
static void parse_routing(const char * err, struct routing * r) {
    memset(r, 0, sizeof(*r));
    bool counted = false, bytes = false;
    for (const char * line = err; line != NULL && *line != '\0';) {
        const char * end = strchr(line, '\n');
        int pos, e0, e1, n;
        float w0, w1;
        if (sscanf(line, "[moe] layer 0 pos %d: %d (%f) %d (%f)%n", &pos, &e0, &w0, &e1, &w1, &n) == 5) {
            ck_assert_msg(pos == r->n_tokens && pos < MAX_TOKENS, "positions out of order at %d", pos);
            r->expert[pos][0] = e0, r->weight[pos][0] = w0;
            r->expert[pos][1] = e1, r->weight[pos][1] = w1;
            r->n_tokens++;
        } else if (!counted && strncmp(line, "[moe] layer 0 tokens per expert:", 32) == 0) {
            counted = true;
            for (const char * p = line + 32; p < (end ? end : p + strlen(p));) {
                int e, c, used;
                if (sscanf(p, " %d:%d%n", &e, &c, &used) != 2) break;
                ck_assert_msg(e >= 0 && e < N_EXPERT, "expert %d", e);
                r->count[e] = c;
                p += used;
            }
        } else if (!bytes && sscanf(line, "[moe] experts: this batch read %lld of their %lld bytes", &r->read,
                                    &r->all) == 2) {
            bytes = true;
        }
        line = end ? end + 1 : NULL;
    }
    ck_assert_msg(r->n_tokens > 1 && counted && bytes, "trace incomplete:\n%s", err);
}

// The bytes of one expert's gate, up and down slices of layer 0.
static long long expert_bytes(const struct mg_model * m) {
    const struct mg_layer * l = &m->layers[0];
    const struct mg_tensor * t[3] = {l->ffn_gate_exps, l->ffn_up_exps, l->ffn_down_exps};
    long long bytes = 0;
    for (int i = 0; i < 3; i++) bytes += (long long) mg_row_size(t[i]->type, t[i]->ne[0]) * t[i]->ne[1];
    return bytes;
}

START_TEST(test_trace_is_what_the_graph_computed) {
    const char * model = in_dir("moe.gguf");
    struct mg_test_run mk = mg_test_run_mg(dir, NULL, NULL, "mkmodel --preset tiny-qwen3moe -o '%s'", model);
    ck_assert_msg(mk.status == 0, "%s", mk.err);
    mg_test_run_free(&mk);
    ck_assert(mkdir(in_dir("dump"), 0755) == 0);
    struct mg_test_run r = mg_test_run_mg(dir, NULL, NULL,
                                          "logits -m '%s' -p 'The quick brown fox jumps over the lazy dog.' -t 2 "
                                          "--trace moe --dump-tensors '%s'", model, in_dir("dump"));
    ck_assert_msg(r.status == 0, "%s", r.err);
    struct routing rt;
    parse_routing(r.err, &rt);
    mg_test_run_free(&r);

    struct mg_npy probs;   // [T, n_expert]: the router's softmax, as the graph computed it
    ck_assert_msg(mg_npy_read_f32(in_dir("dump/ffn_moe_probs-0.npy"), &probs), "%s", mg_last_error());
    ck_assert_int_eq(probs.shape[0], rt.n_tokens);
    ck_assert_int_eq(probs.shape[1], N_EXPERT);
    int count[N_EXPERT] = {0}, distinct = 0;
    for (int t = 0; t < rt.n_tokens; t++) {
        const float * p = probs.data + (size_t) t * N_EXPERT;
        // The two largest probabilities, found here by a plain scan.
        int best = 0, second = -1;
        for (int e = 1; e < N_EXPERT; e++) best = p[e] > p[best] ? e : best;
        for (int e = 0; e < N_EXPERT; e++) {
            if (e != best && (second < 0 || p[e] > p[second])) second = e;
        }
        ck_assert_msg(rt.expert[t][0] == best && rt.expert[t][1] == second, "pos %d: traced %d %d, router's top 2 %d %d",
                      t, rt.expert[t][0], rt.expert[t][1], best, second);
        const float sum = p[best] + p[second];
        ck_assert_float_eq_tol(rt.weight[t][0], p[best] / sum, 6e-4f);   // printed with 3 decimals
        ck_assert_float_eq_tol(rt.weight[t][1], p[second] / sum, 6e-4f);
        count[best]++, count[second]++;
    }
    for (int e = 0; e < N_EXPERT; e++) {
        ck_assert_msg(rt.count[e] == count[e], "expert %d: traced %d tokens, routed %d", e, rt.count[e], count[e]);
        distinct += count[e] > 0;
    }
    mg_npy_free(&probs);

    struct mg_model * m = mg_model_load(model);
    ck_assert_msg(m != NULL, "%s", mg_last_error());
    // Every layer's experts, of the same shape; layer 1 (the last) routes the
    // last token only: its two experts, always two different ones.
    ck_assert_int_eq(m->hp.n_layer, 2);
    ck_assert_int_eq(rt.all, 2LL * N_EXPERT * expert_bytes(m));
    ck_assert_int_eq(rt.read, (long long) (distinct + N_USED) * expert_bytes(m));
    mg_model_free(m);
}
END_TEST

// mg bench's weights/s column on an MoE model: tokens/s times the bytes a
// decode step reads, which are all the file's tensors but, of each layer's
// expert stacks, only n_used of the n_expert experts (counted here from the
// GGUF's tensor table and the experts' shapes), not the whole file.
START_TEST(test_bench_rate_counts_the_chosen_experts) {
    const char * model = in_dir("moe.gguf");
    struct mg_test_run mk = mg_test_run_mg(dir, NULL, NULL, "mkmodel --preset tiny-qwen3moe --type q8_0 -o '%s'", model);
    ck_assert_msg(mk.status == 0, "%s", mk.err);
    mg_test_run_free(&mk);
    struct mg_gguf * g = mg_gguf_open(model);
    ck_assert_msg(g != NULL, "%s", mg_last_error());
    double file_bytes = 0;
    for (int64_t i = 0; i < mg_gguf_n_tensors(g); i++) file_bytes += (double) mg_gguf_tensor(g, i)->nbytes;
    mg_gguf_close(g);
    struct mg_model * m = mg_model_load(model);
    ck_assert_msg(m != NULL, "%s", mg_last_error());
    const double decode_bytes = file_bytes - (double) m->hp.n_layer * (N_EXPERT - N_USED) * (double) expert_bytes(m);
    mg_model_free(m);

    struct mg_test_run r = mg_test_run_mg(dir, NULL, NULL, "bench -m '%s' -p 0 -n 8 -t 1 -r 2", model);
    ck_assert_msg(r.status == 0, "%s", r.err);
    const char * row = strstr(r.out, "| moe.gguf");
    ck_assert_msg(row != NULL, "no row for moe.gguf:\n%s", r.out);
    // | model | weights | test | t | fa | t/s ± sd | weights/s |
    const char * p = row;
    for (int bars = 0; bars < 5 && p != NULL; bars++) p = strchr(p + 1, '|');
    ck_assert_ptr_nonnull(p);
    double tps, sd, gbs;
    ck_assert_int_eq(sscanf(p + 1, " %lf ± %lf | %lf GB/s", &tps, &sd, &gbs), 3);
    mg_test_run_free(&r);
    const double want = tps * decode_bytes / 1e9, whole_file = tps * file_bytes / 1e9;
    const double tol  = 0.051 + 0.002 * want;   // printed with one decimal; t/s with two
    ck_assert_msg(fabs(gbs - want) <= tol, "weights/s %.1f GB/s, the chosen experts' bytes at %.2f t/s are %.2f GB/s",
                  gbs, tps, want);
    ck_assert_msg(fabs(whole_file - want) > 2 * tol, "the model's experts are too small to tell the two apart");
}
END_TEST

// A dense model prints no moe lines with the category on.
START_TEST(test_dense_model_traces_nothing) {
    const char * model = in_dir("dense.gguf");
    struct mg_test_run mk = mg_test_run_mg(dir, NULL, NULL, "mkmodel --preset tiny2 --n-layer 1 -o '%s'", model);
    ck_assert_msg(mk.status == 0, "%s", mk.err);
    mg_test_run_free(&mk);
    struct mg_test_run r = mg_test_run_mg(dir, NULL, NULL, "logits -m '%s' -p 'fox' -t 1 --trace moe", model);
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_msg(strstr(r.err, "[moe]") == NULL, "a dense model traced:\n%s", r.err);
    mg_test_run_free(&r);
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s  = suite_create("moe_trace");
    TCase * tc = tcase_create("moe_trace");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_trace_is_what_the_graph_computed);
    tcase_add_test(tc, test_dense_model_traces_nothing);
    tcase_add_test(tc, test_bench_rate_counts_the_chosen_experts);
    suite_add_tcase(s, tc);
    return s;
}
