// Generated from full/demos/09_inference.c by tools/chapgen. In a class, edit this copy freely (make chapters will not overwrite your edits); to change the engine, edit full/demos/09_inference.c and run make chapters.
// Chapter 09 demo: a real model in five parts, each one a section of the
// chapter's README.
//
//     demo_09_inference MODEL               all five parts, in reading order
//     demo_09_inference PART MODEL          one part: gguf, model, bpe, decode or sample
//
//   gguf    the file byte by byte: header, a key/value pair, a tensor info,
//           the padding, the data; what mg_gguf_open reads and refuses
//   model   the hyper-parameters, the weights of one layer, one layer's graph
//   bpe     the tokenizer on "你好" and on English, merge by merge (MG_TRACE=bpe)
//   decode  the batch's inputs, the KV cache across calls, graph reuse, logits
//   sample  greedy, then the sampler's candidates after each stage (MG_TRACE=sample)
#define _POSIX_C_SOURCE 200809L
#include "mg.h"
#include "gguf.h"
#include "mmap.h"
#include "model.h"
#include "sampling.h"
#include "session.h"
#include "unicode.h"
#include "vocab.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// ---------------------------------------------------------------------------
// Part 1: GGUF, byte by byte
// ---------------------------------------------------------------------------

// A little-endian integer of n bytes at p (GGUF is little-endian throughout).
static uint64_t le(const uint8_t * p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

// Bytes [from, to) of the file as hex and ASCII, 16 to a line, each line
// starting at a multiple of 16 (bytes outside the range are left blank).
static void hexdump(const uint8_t * f, size_t from, size_t to) {
    for (size_t line = from & ~(size_t) 15; line < to; line += 16) {
        printf("  %08zx ", line);
        for (size_t i = line; i < line + 16; i++) {
            if (i == line + 8) printf(" ");
            if (i >= from && i < to) printf(" %02x", f[i]);
            else printf("   ");
        }
        printf("  |");
        for (size_t i = line; i < line + 16 && i < to; i++) {
            printf("%c", i < from ? ' ' : isprint(f[i]) ? f[i] : '.');
        }
        printf("|\n");
    }
}

// The size of a value of GGUF type `type` stored at f + at. The walk trusts
// the file: mg_gguf_open has checked every length in it before we get here.
static size_t value_size(const uint8_t * f, size_t at, uint32_t type) {
    static const uint8_t fixed[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};   // by enum mg_gguf_type
    if (type == MG_GGUF_TYPE_STRING) return 8 + le(f + at, 8);
    if (type == MG_GGUF_TYPE_ARRAY) {
        const uint32_t elem = (uint32_t) le(f + at, 4);
        const uint64_t n    = le(f + at + 4, 8);
        size_t size = 12;
        for (uint64_t i = 0; i < n; i++) size += value_size(f, at + size, elem);
        return size;
    }
    return fixed[type];
}

// A copy of the file with one field changed, opened by mg_gguf_open: what does it say?
static void try_broken_copy(const uint8_t * f, size_t size, size_t at, uint64_t value, int nbytes, const char * what) {
    char path[] = "/tmp/demo_09_XXXXXX";
    const int fd = mkstemp(path);
    if (fd < 0) return;
    uint8_t * copy = malloc(size);
    memcpy(copy, f, size);
    for (int i = 0; i < nbytes; i++) copy[at + (size_t) i] = (uint8_t) (value >> (8 * i));
    const bool written = write(fd, copy, size) == (ssize_t) size;
    close(fd);
    free(copy);
    struct mg_gguf * g = written ? mg_gguf_open(path) : NULL;
    const char * msg = mg_last_error();
    // The message starts with the file's name: print a fixed one for it.
    if (strncmp(msg, path, strlen(path)) == 0) msg += strlen(path);
    printf("  %s:\n    copy.gguf%s\n", what, g != NULL ? ": accepted?!" : msg);
    mg_gguf_close(g);
    unlink(path);
}

static bool part_gguf(const char * path) {
    printf("== Part 1: the GGUF file, byte by byte ==\n");
    // The reader first: it maps the file and checks every field, so the walk
    // below can follow the lengths without checking them again.
    struct mg_gguf * g = mg_gguf_open(path);
    if (g == NULL) return false;
    const struct mg_mmap * map = mg_mmap_open(path);
    if (map == NULL) return false;
    const uint8_t * f = map->addr;
    printf("%zu bytes, mapped at once; this walk reads them through the mapping\n\n", map->size);

    printf("-- the header: magic, version, tensor count, key/value count --\n");
    hexdump(f, 0, 24);
    const uint64_t n_tensors = le(f + 8, 8), n_kv = le(f + 16, 8);
    printf("  0: magic \"%.4s\"   4: version %u (u32)   8: %llu tensors (u64)   16: %llu key/value pairs (u64)\n\n", f,
           (unsigned) le(f + 4, 4), (unsigned long long) n_tensors, (unsigned long long) n_kv);

    printf("-- the first key/value pair: key (u64 length + bytes), value type (u32), value --\n");
    size_t at = 24;
    const uint64_t key_len = le(f + at, 8);
    const uint32_t type    = (uint32_t) le(f + at + 8 + key_len, 4);
    const size_t   end     = at + 8 + key_len + 4 + value_size(f, at + 8 + key_len + 4, type);
    hexdump(f, at, end);
    printf("  %zu: key length %llu   %zu: \"%.*s\"   %zu: type %u (%s)   %zu: length %llu   %zu: \"%.*s\"\n\n", at,
           (unsigned long long) key_len, at + 8, (int) key_len, f + at + 8, at + 8 + key_len, (unsigned) type,
           mg_gguf_type_name(type), at + 12 + key_len, (unsigned long long) le(f + at + 12 + key_len, 8),
           at + 20 + key_len, (int) le(f + at + 12 + key_len, 8), f + at + 20 + key_len);

    printf("-- every key: where it starts, its type, its value --\n");
    size_t merges_at = 0;   // where the key tokenizer.ggml.merges starts
    for (uint64_t i = 0; i < n_kv; i++) {
        const uint64_t len = le(f + at, 8);
        const uint32_t t   = (uint32_t) le(f + at + 8 + len, 4);
        char value[64];
        printf("  %7zu  %-40.*s %-4s %s\n", at, (int) len, f + at + 8, mg_gguf_type_name(t),
               mg_gguf_kv_to_string(g, (int64_t) i, value, sizeof(value)));
        if (len == 21 && memcmp(f + at + 8, "tokenizer.ggml.merges", 21) == 0) merges_at = at;
        at += 8 + len + 4 + value_size(f, at + 8 + len + 4, t);
    }
    const size_t infos = at;
    printf("the tensor infos start at byte %zu\n\n", infos);

    if (merges_at > 0) {
        // An array value: element type (u32), element count (u64), the elements.
        printf("-- an array value (tokenizer.ggml.merges): element type (u32), count (u64), then the elements --\n");
        const size_t   type_at = merges_at + 8 + 21, v = type_at + 4;
        const uint32_t elem    = (uint32_t) le(f + v, 4);
        const uint64_t count   = le(f + v + 4, 8);
        const size_t   first   = v + 12, second = first + 8 + le(f + first, 8);
        const size_t   third   = second + 8 + le(f + second, 8);
        hexdump(f, type_at, third);
        printf("  %zu: type %u (%s)   %zu: element type %u (%s)   %zu: %llu elements   %zu: \"%.*s\"   %zu: \"%.*s\" ...\n\n",
               type_at, (unsigned) le(f + type_at, 4), mg_gguf_type_name((uint32_t) le(f + type_at, 4)), v,
               (unsigned) elem, mg_gguf_type_name(elem), v + 4, (unsigned long long) count, first,
               (int) le(f + first, 8), f + first + 8, second, (int) le(f + second, 8), f + second + 8);
    }

    printf("-- the first tensor info: name, n_dims (u32), ne[] (u64 each), type (u32), offset (u64) --\n");
    const uint64_t name_len = le(f + at, 8);
    const uint32_t n_dims   = (uint32_t) le(f + at + 8 + name_len, 4);
    const size_t   info_end = at + 8 + name_len + 4 + 8 * n_dims + 4 + 8;
    hexdump(f, at, info_end);
    printf("  %zu: \"%.*s\"   %zu: %u dims:", at + 8, (int) name_len, f + at + 8, at + 8 + name_len, (unsigned) n_dims);
    for (uint32_t d = 0; d < n_dims; d++) printf(" %llu", (unsigned long long) le(f + at + 12 + name_len + 8 * d, 8));
    const uint32_t ttype  = (uint32_t) le(f + info_end - 12, 4);
    const uint64_t offset = le(f + info_end - 8, 8);
    printf("   %zu: type %u (%s)   %zu: offset %llu\n", info_end - 12, (unsigned) ttype,
           mg_gguf_ggml_type_name((int) ttype), info_end - 8, (unsigned long long) offset);
    for (uint64_t i = 0; i < n_tensors; i++) {
        const uint64_t len = le(f + at, 8);
        at += 8 + len + 4 + 8 * le(f + at + 8 + len, 4) + 4 + 8;
    }
    printf("... %llu more tensor infos; they end at byte %zu\n\n", (unsigned long long) n_tensors - 1, at);

    printf("-- alignment: zero bytes up to the next multiple of %zu, then the data --\n", mg_gguf_alignment(g));
    const size_t data = (at + mg_gguf_alignment(g) - 1) / mg_gguf_alignment(g) * mg_gguf_alignment(g);
    hexdump(f, at - 8, data + 32);
    float first[2];
    memcpy(first, f + data + offset, sizeof(first));   // f32 on a little-endian machine, as GGUF stores it
    printf("  %zu: %zu bytes of padding   %zu: the data section; %.*s (offset %llu) starts it: %.4f %.4f ...\n", at,
           data - at, data, (int) name_len, f + infos + 8, (unsigned long long) offset, (double) first[0],
           (double) first[1]);

    const struct mg_gguf_tensor_info * t0 = mg_gguf_tensor(g, 0);
    const bool same = mg_gguf_version(g) == le(f + 4, 4) && (uint64_t) mg_gguf_n_kv(g) == n_kv &&
                      (uint64_t) mg_gguf_n_tensors(g) == n_tensors && mg_gguf_data_offset(g) == data &&
                      t0->offset == offset && t0->type == (int) ttype &&
                      memcmp(t0->data, f + data + offset, t0->nbytes) == 0;
    printf("mg_gguf_open read the same: version, %lld keys, %lld tensors, data at byte %zu, %s at offset %llu: %s\n",
           (long long) mg_gguf_n_kv(g), (long long) mg_gguf_n_tensors(g), mg_gguf_data_offset(g), t0->name,
           (unsigned long long) t0->offset, same ? "yes" : "NO");
    printf("it read %zu bytes (header, metadata, tensor infos); the %zu bytes of weights stay on disk until used\n\n",
           data, map->size - data);

    printf("-- what the reader refuses: copies with one field changed --\n");
    try_broken_copy(f, map->size, 4, 4, 4, "version 4");
    try_broken_copy(f, map->size, info_end - 12, 99, 4, "the first tensor's type 99");
    try_broken_copy(f, map->size, info_end - 8, map->size, 8, "the first tensor's offset past the end");
    try_broken_copy(f, map->size, infos + 8 + name_len, 5, 4, "the first tensor with 5 dims");
    mg_mmap_close((struct mg_mmap *) map);
    mg_gguf_close(g);
    printf("\n");
    return true;
}

// ---------------------------------------------------------------------------
// Part 2: the model and the Qwen3 builder
// ---------------------------------------------------------------------------

static void print_weight(const char * what, const struct mg_tensor * t) {
    char shape[48];
    if (t->ne[1] == 1) snprintf(shape, sizeof(shape), "{%lld}", (long long) t->ne[0]);
    else snprintf(shape, sizeof(shape), "{%lld, %lld}", (long long) t->ne[0], (long long) t->ne[1]);
    printf("  %-26s %-8s %-5s %-13s %8zu bytes\n", t->name, what, mg_type_name(t->type), shape, mg_nbytes(t));
}

// One layer's decode graph: the same builder, told the model has one layer.
static void print_one_layer(const struct mg_model * m) {
    struct mg_model one = *m;
    one.hp.n_layer = 1;
    struct mg_kv_cache * kv  = mg_kv_cache_new(1, 256, m->hp.head_dim, m->hp.n_head_kv, MG_TYPE_F16, 32);
    struct mg_context *  ctx = mg_init((struct mg_init_params) {.mem_size = mg_qwen3_ctx_size(&one), .no_alloc = true});
    struct mg_cgraph *   g   = mg_new_graph_custom(ctx, mg_qwen3_graph_size(&one));
    struct mg_batch_inputs in;
    mg_qwen3_build(ctx, g, &one, kv, 1, 32, false, &in);
    printf("one layer's decode graph (1 token over 32 cache positions): %d nodes, %d leafs, in build order\n",
           g->n_nodes, g->n_leafs);
    for (int i = 0; i < g->n_nodes; i++) {
        const struct mg_tensor * n = g->nodes[i];
        char shape[48];
        snprintf(shape, sizeof(shape), "{%lld, %lld, %lld}", (long long) n->ne[0], (long long) n->ne[1],
                 (long long) n->ne[2]);
        printf("  %2d %-12s %-18s %-16s <-", i, mg_op_name(n->op), n->name, shape);
        for (int s = 0; s < MG_MAX_SRC && n->src[s] != NULL; s++) printf(" %s", n->src[s]->name);
        printf("\n");
    }
    mg_graph_dump_dot_env(g, "decode_layer0");
    mg_free(ctx);
    mg_kv_cache_free(kv);
}

static void part_model(const struct mg_model * m) {
    const struct mg_model_hparams * hp = &m->hp;
    printf("== Part 2: the model and the Qwen3 builder ==\n");
    printf("hyper-parameters (load_hparams):\n");
    printf("  qwen3.block_count                       %8d  layers\n", hp->n_layer);
    printf("  qwen3.embedding_length                  %8d  E, the residual stream's width\n", hp->n_embd);
    printf("  qwen3.attention.head_count              %8d  H query heads\n", hp->n_head);
    printf("  qwen3.attention.head_count_kv           %8d  Hkv KV heads (H/Hkv = %d query heads share one)\n",
           hp->n_head_kv, hp->n_head / hp->n_head_kv);
    printf("  qwen3.attention.key_length              %8d  D, the head size\n", hp->head_dim);
    printf("  qwen3.feed_forward_length               %8d  F, the SwiGLU width\n", hp->n_ff);
    printf("  qwen3.rope.freq_base                    %8.0f  RoPE's base\n", (double) hp->rope_freq_base);
    printf("  qwen3.attention.layer_norm_rms_epsilon  %8.0e  RMSNorm's epsilon\n", (double) hp->rms_eps);
    printf("  tokenizer.ggml.tokens (array length)    %8d  n_vocab\n", hp->n_vocab);
    printf("  qwen3.context_length                    %8d  trained context\n", hp->n_ctx_train);
    printf("the weights of layer 0 (ggml order: {row length, rows}), pointers into the mapping:\n");
    const struct mg_layer * l = &m->layers[0];
    print_weight("a-norm", l->attn_norm);
    print_weight("Wq", l->wq);
    print_weight("Wk", l->wk);
    print_weight("Wv", l->wv);
    print_weight("q-norm", l->q_norm);
    print_weight("k-norm", l->k_norm);
    print_weight("Wo", l->wo);
    print_weight("f-norm", l->ffn_norm);
    print_weight("Wgate", l->ffn_gate);
    print_weight("Wup", l->ffn_up);
    print_weight("Wdown", l->ffn_down);
    printf("and outside the layers:\n");
    print_weight("E_tok", m->tok_embd);
    print_weight("out-norm", m->output_norm);
    printf("  output.weight: %s\n", m->output == m->tok_embd ? "absent, so token_embd.weight is the output projection "
                                                              "too (tied embeddings)" : "present");
    printf("%lld parameters in %zu bytes of weights\n", (long long) m->n_params, m->n_weight_bytes);
    print_one_layer(m);
    printf("\n");
}

// ---------------------------------------------------------------------------
// Part 3: the tokenizer
// ---------------------------------------------------------------------------

// Tokenizes text with the bpe trace on, whatever MG_TRACE says, and prints the ids.
static void traced_tokenize(const struct mg_vocab * v, const char * text, bool parse_special) {
    int32_t ids[64];
    mg_trace_set("bpe");
    const int32_t n = mg_tokenize(v, text, -1, ids, 64, false, parse_special);
    const char * env = mg_demo_switch("MG_TRACE");
    mg_trace_set(env != NULL ? env : "");
    printf("mg_tokenize -> %d token%s:", n, n == 1 ? "" : "s");
    for (int32_t i = 0; i < n; i++) printf(" %d", ids[i]);
    printf("\n");
}

static void part_bpe(const struct mg_model * m) {
    const struct mg_vocab * v = m->vocab;
    printf("== Part 3: the tokenizer ==\n");
    printf("%d tokens, %d merges, pre-tokenizer '%s'\n", mg_vocab_n_tokens(v), mg_vocab_n_merges(v), mg_vocab_pre(v));

    // 1. The pre-tokenizer cuts the text into pieces; BPE never merges across them.
    const char * text = "Hello world's 2024 tokenizers!  你好\n";
    uint32_t cpts[64];
    const size_t n_cpts = mg_utf8_to_cpts(text, strlen(text), cpts);
    struct mg_pieces pieces = {0};
    // The demo model's files say "gpt-2"; Qwen3's say "qwen2" (vocab.c knows their aliases).
    mg_pretokenize(strcmp(mg_vocab_pre(v), "qwen2") == 0 ? MG_PRETOK_QWEN2 : MG_PRETOK_GPT2, cpts, n_cpts, &pieces);
    printf("the pre-tokenizer's pieces of \"Hello world's 2024 tokenizers!  你好\\n\":");
    for (size_t i = 0, k = 0; i < pieces.n; k += pieces.len[i++]) {
        char utf8[64];
        size_t len = 0;
        for (size_t j = k; j < k + pieces.len[i]; j++) len += mg_utf8_encode(cpts[j], utf8 + len);
        printf(" [");
        for (size_t j = 0; j < len; j++) printf(utf8[j] == '\n' ? "\\n" : "%c", utf8[j]);
        printf("]");
    }
    printf("\n");
    mg_pieces_free(&pieces);

    // 2. Bytes to symbols: every byte is spelled as one printable character.
    printf("GPT-2's byte alphabet (mg_unicode_byte_to_cpt):");
    static const uint8_t bytes[] = {'A', ' ', '\n', 0xe4, 0xbd, 0xa0};
    for (size_t i = 0; i < sizeof(bytes); i++) {
        char spelled[4];
        const size_t len = mg_utf8_encode(mg_unicode_byte_to_cpt(bytes[i]), spelled);
        printf("  %02x -> U+%04X '%.*s'", bytes[i], (unsigned) mg_unicode_byte_to_cpt(bytes[i]), (int) len, spelled);
    }
    printf("\n");
    // Which bytes move: the runs of bytes whose code point is not the byte itself.
    printf("the bytes it moves:");
    int n_moved = 0;
    for (int b = 0; b < 256; b++) {
        if (mg_unicode_byte_to_cpt((uint8_t) b) == (uint32_t) b) continue;
        int e = b;
        while (e + 1 < 256 && mg_unicode_byte_to_cpt((uint8_t) (e + 1)) != (uint32_t) (e + 1)) e++;
        printf(e > b ? "  %02x..%02x -> U+%04X..U+%04X" : "  %02x -> U+%04X", b, e > b ? (unsigned) e :
               (unsigned) mg_unicode_byte_to_cpt((uint8_t) b), (unsigned) mg_unicode_byte_to_cpt((uint8_t) b),
               (unsigned) mg_unicode_byte_to_cpt((uint8_t) e));
        n_moved += e - b + 1;
        b = e;
    }
    printf("; %d moved, the other %d stay themselves\n", n_moved, 256 - n_moved);
    // A merge is one string of tokenizer.ggml.merges, "left right"; its rank is its index.
    const int64_t km = mg_gguf_find_key(m->gguf, "tokenizer.ggml.merges");
    if (km >= 0) {
        printf("merges are strings \"left right\", the rank is the index:");
        static const uint64_t ranks[] = {0, 5, 15};   // 5 and 15: the first merges of the traces below
        for (size_t i = 0; i < sizeof(ranks) / sizeof(ranks[0]); i++) {
            uint64_t len = 0;
            const char * t = mg_gguf_arr_str(m->gguf, km, ranks[i], &len);
            printf("  [%llu] \"%.*s\"", (unsigned long long) ranks[i], (int) len, t);
        }
        printf("\n");
    }
    printf("\n");

    // 3. The merge loop, on "你好" and on an English word.
    printf("-- \"你好\" --\n");
    traced_tokenize(v, "你好", false);
    printf("-- \" tokenizers\" --\n");
    traced_tokenize(v, " tokenizers", false);
    // 4. Special tokens are cut out first, when parse_special asks.
    printf("-- \"<|im_start|>user\\n你好\", parse_special = true --\n");
    traced_tokenize(v, "<|im_start|>user\n你好", true);
    printf("\n");
}

// ---------------------------------------------------------------------------
// Part 4: decode calls
// ---------------------------------------------------------------------------

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

// What set_inputs writes for a batch of n tokens at position pos0: the mask
// and the K/V store indices, filled here by the same kv_cache.c functions.
static void print_batch_inputs(const struct mg_model * m, int pos0, int n) {
    struct mg_kv_cache * kv  = mg_kv_cache_new(1, 256, m->hp.head_dim, m->hp.n_head_kv, MG_TYPE_F16, 32);
    const int            n_kv = mg_kv_cache_n_kv(kv, pos0 + n);
    struct mg_context *  ctx = mg_init((struct mg_init_params) {.mem_size = 1 << 20});
    struct mg_tensor * mask  = mg_new_tensor_2d(ctx, MG_TYPE_F32, n_kv, n);
    struct mg_tensor * k_idx = mg_new_tensor_1d(ctx, MG_TYPE_I32, n);
    struct mg_tensor * v_idx = mg_new_tensor_1d(ctx, MG_TYPE_I32, (int64_t) m->hp.head_dim * m->hp.n_head_kv * n);
    mg_kv_cache_fill_mask(mask, pos0, n);
    mg_kv_cache_fill_store_idx(kv, k_idx, v_idx, pos0);
    printf("inputs of a batch of %d at position %d: inp_pos", n, pos0);
    for (int t = 0; t < n; t++) printf(" %d", pos0 + t);
    printf("; k_idxs");
    for (int t = 0; t < n; t++) printf(" %d", ((const int32_t *) k_idx->data)[t]);
    printf("; v_idxs");
    for (int t = 0; t < 3; t++) printf(" %d", ((const int32_t *) v_idx->data)[t]);
    printf(" ...\n");
    printf("kq_mask {%d, %d}, the first 12 columns ('0' attends, '-' is -inf):\n", n_kv, n);
    for (int t = 0; t < n; t++) {
        printf("  token %d:", t);
        for (int j = 0; j < 12; j++) printf(" %c", ((const float *) mask->data)[t * n_kv + j] == 0.0f ? '0' : '-');
        printf(" ...\n");
    }
    mg_free(ctx);
    mg_kv_cache_free(kv);
}

static bool part_decode(struct mg_model * m) {
    const struct mg_model_hparams * hp = &m->hp;
    printf("== Part 4: decode calls ==\n");
    int32_t prompt[16];
    const int32_t n_prompt = mg_tokenize(m->vocab, "床前明月光", -1, prompt, 16, false, false);
    printf("prompt \"床前明月光\": %d tokens:", n_prompt);
    for (int i = 0; i < n_prompt; i++) printf(" %d", prompt[i]);
    printf("\n");
    print_batch_inputs(m, 0, n_prompt);
    print_batch_inputs(m, n_prompt, 1);

    struct mg_session_params params = mg_session_default_params();
    params.n_ctx     = 256;
    params.n_threads = 2;
    struct mg_session * s = mg_session_new(m, params);
    if (s == NULL) return false;
    printf("\n-- mg_decode(prompt): mg_qwen3_build -> mg_gallocr_alloc_graph -> mg_graph_plan -> mg_graph_compute --\n");
    if (!mg_decode(s, prompt, n_prompt, false)) return false;
    struct mg_session_stats st = mg_session_get_stats(s);
    printf("prompt graph: %d nodes; compute buffer %zu bytes (the allocator's peak); work buffer %zu bytes\n",
           st.n_nodes, st.compute_buffer_size, st.work_size);
    printf("KV cache: %zu bytes (%d positions x %zu bytes per token, F16); %d positions filled\n", st.kv_size,
           mg_session_n_ctx(s), st.kv_size / (size_t) mg_session_n_ctx(s), mg_session_n_past(s));
    printf("logits out: %d floats for the last token; the best five:\n", hp->n_vocab);
    print_top_logits(m->vocab, mg_get_logits(s), hp->n_vocab, 5);

    printf("\n-- 30 greedy steps, one mg_decode(1 token) each --\n");
    struct mg_detok detok;
    mg_detok_init(&detok, false);
    char text[512] = "床前明月光";
    size_t len = strlen(text);
    for (int step = 0; step < 30; step++) {
        const int32_t next = mg_argmax(mg_get_logits(s), hp->n_vocab);
        len += (size_t) mg_detok_push(&detok, m->vocab, next, text + len, (int32_t) (sizeof(text) - len - 1));
        if (!mg_decode(s, &next, 1, false)) return false;
    }
    text[len] = '\0';   // an unfinished last character stays held back in detok, not printed
    st = mg_session_get_stats(s);
    printf("text: %s\n", text);
    if (detok.n_pending > 0) printf("(and %d bytes of a character the last step did not finish)\n", detok.n_pending);
    printf("%d decode calls, %d positions filled; graphs built %d, reused %d\n", st.n_decode_calls,
           mg_session_n_past(s), st.n_graphs_built, st.n_graphs_reused);
    mg_session_dump_dot(s, "decode");
    mg_session_dump_svg(s, "decode-alloc");   // MG_SVG=dir: its compute buffer, as a memory map
    mg_session_free(s);
    printf("\n");
    return true;
}

// ---------------------------------------------------------------------------
// Part 5: sampling
// ---------------------------------------------------------------------------

// One draw with these parameters, the sampler traced (MG_TRACE=sample).
static int32_t traced_sample(struct mg_sampler_params p, int32_t n_vocab, const float * logits, const int32_t * seen,
                             int n_seen) {
    struct mg_sampler * smp = mg_sampler_new(p, n_vocab);
    for (int i = 0; i < n_seen; i++) mg_sampler_accept(smp, seen[i]);
    mg_trace_set("sample");
    const int32_t token = mg_sampler_sample(smp, logits);
    const char * env = mg_demo_switch("MG_TRACE");
    mg_trace_set(env != NULL ? env : "");
    mg_sampler_free(smp);
    return token;
}

// Whether bytes are whole UTF-8 characters (a byte-level token may be a part of one).
static bool whole_characters(const uint8_t * p, int32_t n) {
    for (int32_t i = 0; i < n;) {
        const int need = p[i] < 0x80 ? 1 : p[i] >= 0xC2 && p[i] < 0xE0 ? 2 : p[i] >= 0xE0 && p[i] < 0xF0 ? 3
                       : p[i] >= 0xF0 && p[i] < 0xF5 ? 4 : 0;
        if (need == 0 || i + need > n) return false;
        for (int k = 1; k < need; k++) if ((p[i + k] & 0xC0) != 0x80) return false;
        i += need;
    }
    return true;
}

// A token as "id 'text'", or "id <e3 80>" for the bytes of part of a character.
static void print_piece(const struct mg_vocab * v, int32_t id) {
    char piece[64];
    int32_t n = mg_token_to_piece(v, id, piece, sizeof(piece) - 1, true);
    n = n > 0 ? n : 0;
    if (whole_characters((const uint8_t *) piece, n)) {
        printf(" %d '%.*s'", id, n, piece);
        return;
    }
    printf(" %d <", id);
    for (int32_t i = 0; i < n; i++) printf("%s%02x", i ? " " : "", (unsigned) (uint8_t) piece[i]);
    printf(">");
}

static bool part_sample(struct mg_model * m) {
    const int32_t n_vocab = m->hp.n_vocab;
    printf("== Part 5: sampling ==\n");
    int32_t prompt[16];
    const int32_t n_prompt = mg_tokenize(m->vocab, "你好", -1, prompt, 16, false, false);
    struct mg_session_params params = mg_session_default_params();
    params.n_ctx     = 64;
    params.n_threads = 2;
    struct mg_session * s = mg_session_new(m, params);
    if (s == NULL || !mg_decode(s, prompt, n_prompt, false)) return false;
    const float * logits = mg_get_logits(s);

    printf("the logits after \"你好\": greedy (temperature 0) takes the first highest:");
    print_piece(m->vocab, mg_argmax(logits, n_vocab));
    printf("\n");
    printf("the eight highest, as the lists below show them first:");
    float * copy = malloc((size_t) n_vocab * sizeof(float));
    memcpy(copy, logits, (size_t) n_vocab * sizeof(float));
    for (int i = 0; i < 8; i++) {
        const int32_t id = mg_argmax(copy, n_vocab);
        print_piece(m->vocab, id);
        copy[id] = -INFINITY;
    }
    free(copy);
    printf("\n\n");

    struct mg_sampler_params p = mg_sampler_default_params();
    p.seed = 1;
    printf("-- llama.cpp's defaults: top-k %d, top-p %.2f, min-p %.2f, temperature %.2f, seed 1 --\n", p.top_k,
           (double) p.top_p, (double) p.min_p, (double) p.temp);
    int32_t token = traced_sample(p, n_vocab, logits, NULL, 0);
    printf("drawn:");
    print_piece(m->vocab, token);
    printf("\n");

    p.top_k = 5;
    p.top_p = 0.70f;
    p.min_p = 0.30f;
    p.temp  = 1.5f;
    printf("-- tighter: top-k %d, top-p %.2f, min-p %.2f, and a hotter temperature %.2f --\n", p.top_k,
           (double) p.top_p, (double) p.min_p, (double) p.temp);
    token = traced_sample(p, n_vocab, logits, NULL, 0);
    printf("drawn:");
    print_piece(m->vocab, token);
    printf("\n");

    p = mg_sampler_default_params();
    p.seed           = 1;
    p.repeat_penalty = 1.5f;
    const int32_t seen[] = {302, 296};
    printf("-- repetition penalty %.2f after the text used", (double) p.repeat_penalty);
    print_piece(m->vocab, seen[0]);
    printf(" and");
    print_piece(m->vocab, seen[1]);
    printf(" (defaults otherwise) --\n");
    token = traced_sample(p, n_vocab, logits, seen, 2);
    printf("drawn:");
    print_piece(m->vocab, token);
    printf("\n\n");
    mg_session_free(s);
    return true;
}

// ---------------------------------------------------------------------------

int main(int argc, char ** argv) {
    static const char * const parts[] = {"gguf", "model", "bpe", "decode", "sample"};
    const char * part = NULL;
    const char * path = "../../models/fortune-toy-q8_0.gguf";
    for (int i = 1; i < argc; i++) {
        bool is_part = false;
        for (size_t k = 0; k < sizeof(parts) / sizeof(parts[0]); k++) is_part |= strcmp(argv[i], parts[k]) == 0;
        if (is_part) part = argv[i];
        else path = argv[i];
    }
    const bool all = part == NULL;
    if ((all || strcmp(part, "gguf") == 0) && !part_gguf(path)) {
        fprintf(stderr, "%s\n", mg_last_error());
        return 1;
    }
    if (!all && strcmp(part, "gguf") == 0) return 0;

    struct mg_model * m = mg_model_load(path);
    if (m == NULL) {
        fprintf(stderr, "%s\n", mg_last_error());
        return 1;
    }
    bool ok = true;
    if (all || strcmp(part, "model") == 0) part_model(m);
    if (all || strcmp(part, "bpe") == 0) part_bpe(m);
    if (ok && (all || strcmp(part, "decode") == 0)) ok = part_decode(m);
    if (ok && (all || strcmp(part, "sample") == 0)) ok = part_sample(m);
    if (!ok) fprintf(stderr, "%s\n", mg_last_error());
    mg_model_free(m);
    return ok ? 0 : 1;
}
