//@file 09
// Chapter 09 demo: "你好" through a real model with the MiniMind vocabulary,
// from the GGUF file to the next tokens, with every stage of a decode call shown.
#define _POSIX_C_SOURCE 200809L
#include "mg.h"
#include "gguf.h"
#include "model.h"
#include "sampling.h"
#include "session.h"
#include "vocab.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec * 1e3 + (double) ts.tv_nsec / 1e6;
}

static void print_top_logits(const struct mg_vocab * vocab, const float * logits, int n_vocab, int k) {
    float * copy = malloc((size_t) n_vocab * sizeof(float));
    memcpy(copy, logits, (size_t) n_vocab * sizeof(float));
    for (int i = 0; i < k; i++) {
        const int32_t id = mg_argmax(copy, n_vocab);
        char piece[64];
        const int32_t n = mg_token_to_piece(vocab, id, piece, sizeof(piece) - 1, true);
        piece[n > 0 ? n : 0] = '\0';
        for (char * c = piece; *c; c++) if (*c == '\n') *c = ' ';
        printf("  %5d  %8.4f  '%s'\n", id, (double) copy[id], piece);
        copy[id] = -1e30f;
    }
    free(copy);
}

// The decode graph of the first layer alone: the same builder, told the model has one layer.
static void draw_one_layer(const struct mg_model * m) {
    struct mg_model one = *m;
    one.hp.n_layer = 1;
    struct mg_kv_cache * kv  = mg_kv_cache_new(1, 256, m->hp.head_dim, m->hp.n_head_kv, MG_TYPE_F16, 256);
    struct mg_context *  ctx = mg_init((struct mg_init_params) {.mem_size = mg_qwen3_ctx_size(&one), .no_alloc = true});
    struct mg_cgraph *   g   = mg_new_graph_custom(ctx, mg_qwen3_graph_size(&one));
    struct mg_batch_inputs in;
    mg_qwen3_build(ctx, g, &one, kv, 1, 256, false, &in);
    printf("one layer's decode graph: %d nodes, %d leafs\n", g->n_nodes, g->n_leafs);
    mg_graph_dump_dot_env(g, "decode_layer0");
    mg_free(ctx);
    mg_kv_cache_free(kv);
}

int main(int argc, char ** argv) {
    const char * path = argc > 1 ? argv[1] : "../../models/fortune-toy-q8_0.gguf";

    printf("== Loading %s ==\n", path);
    const double t0 = now_ms();
    struct mg_model * m = mg_model_load(path);
    if (m == NULL) {
        fprintf(stderr, "%s\n", mg_last_error());
        return 1;
    }
    const struct mg_model_hparams * hp = &m->hp;
    printf("loaded in %.1f ms: nothing was read yet, the weights are mapped\n", now_ms() - t0);
    printf("qwen3: %d layers, n_embd %d, %d heads over %d KV heads of %d, n_ff %d, vocab %d\n", hp->n_layer,
           hp->n_embd, hp->n_head, hp->n_head_kv, hp->head_dim, hp->n_ff, hp->n_vocab);
    printf("%lld parameters in %zu bytes of weights (%s embeddings, tied: %s)\n", (long long) m->n_params,
           m->n_weight_bytes, mg_type_name(m->tok_embd->type), m->output == m->tok_embd ? "yes" : "no");

    printf("\n== Tokenizing ==\n");
    int32_t tokens[64];
    const int32_t n_prompt = mg_tokenize(m->vocab, "你好", -1, tokens, 64, false, false);
    printf("\"你好\" -> %d token%s:", n_prompt, n_prompt == 1 ? "" : "s");
    for (int i = 0; i < n_prompt; i++) printf(" %d", tokens[i]);
    printf("  (pre-tokenizer '%s', %d merges)\n", mg_vocab_pre(m->vocab), mg_vocab_n_merges(m->vocab));

    printf("\n== The prompt: mg_decode -> mg_qwen3_build -> mg_gallocr_alloc_graph -> mg_graph_plan -> "
           "mg_graph_compute ==\n");
    struct mg_session_params params = mg_session_default_params();
    params.n_ctx     = 256;
    params.n_threads = 2;
    struct mg_session * s = mg_session_new(m, params);
    if (!mg_decode(s, tokens, n_prompt, false)) {
        fprintf(stderr, "%s\n", mg_last_error());
        return 1;
    }
    struct mg_session_stats st = mg_session_get_stats(s);
    printf("prompt graph: %d nodes; compute buffer %zu bytes (the allocator's peak); work buffer %zu bytes\n",
           st.n_nodes, st.compute_buffer_size, st.work_size);
    printf("KV cache: %zu bytes (%d positions x %zu bytes per token, F16)\n", st.kv_size, mg_session_n_ctx(s),
           st.kv_size / (size_t) mg_session_n_ctx(s));
    printf("top logits after \"你好\":\n");
    print_top_logits(m->vocab, mg_get_logits(s), hp->n_vocab, 5);

    printf("\n== Decoding 8 tokens greedily, one graph each ==\n");
    struct mg_detok detok;
    mg_detok_init(&detok, false);
    char text[256] = "你好";
    size_t len = strlen(text);
    for (int step = 0; step < 8; step++) {
        const int32_t next = mg_argmax(mg_get_logits(s), hp->n_vocab);
        len += mg_detok_push(&detok, m->vocab, next, text + len, sizeof(text) - len - 1);
        if (!mg_decode(s, &next, 1, false)) break;
    }
    len += mg_detok_flush(&detok, text + len, sizeof(text) - len - 1);
    text[len] = '\0';
    st = mg_session_get_stats(s);
    printf("text: %s\n", text);
    printf("decode graph: %d nodes; graphs built %d, reused %d\n", st.n_nodes, st.n_graphs_built, st.n_graphs_reused);
    mg_session_dump_dot(s, "decode");
    mg_session_dump_svg(s, "decode-alloc");   // MG_SVG=dir: its compute buffer, as a memory map

    printf("\n== Drawing ==\n");
    draw_one_layer(m);
    mg_session_free(s);
    mg_model_free(m);
    return 0;
}
