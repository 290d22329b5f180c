// mul_mat_id_ref.c - what ggml's CPU backend computes for ggml_mul_mat_id, on
// random experts of every weight type, written as tests/fixtures/moe/mul_mat_id.bin
// for tests/full/test_moe_ops.c. Linked against llama.cpp's libggml
// (tools/llama-ref/README.md, "mul_mat_id's outputs").
//
// Each type's experts are multiplied twice: from plain CPU memory (ggml's
// ggml_compute_forward_mul_mat_id: one vec_dot per row and pick) and, for
// the types the CPU_REPACK buffer takes on this CPU (Q4_0, Q4_K, IQ4_NL, and
// Q2_K with AVX-512), from that buffer, as llama.cpp loads a model's experts
// (repack.cpp's forward_mul_mat_id: one gemv per expert and pick). Each
// with b of one row per token (n_b = 1, the gate and up projections) and of
// one row per pick (n_b = n_used, the down projection), the same b and ids
// for the plain and the repacked case.
//
// The file, little-endian: int32 magic 0x44494d4d ("MMID"), K, N, n_as,
// n_used, T, n_types; then per type int32 type (ggml's id) and its number
// of cases, the weights as a GGUF file holds them (K x N x n_as of the
// type), and per case int32 repacked (0/1) and n_b, b (F32 K x n_b x T),
// ids (I32 n_used x T) and ggml's result (F32 N x n_used x T).
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { K = 256, N = 16, N_AS = 3, N_USED = 2, T = 3 };

static uint64_t rng = 88172645463325252ull;

static float uniform(void) {   // xorshift64, in [-1, 1)
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float) ((double) (rng >> 11) / 9007199254740992.0) * 2.0f - 1.0f;
}

static const enum ggml_type TYPES[] = {
    GGML_TYPE_F32,  GGML_TYPE_F16,  GGML_TYPE_BF16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0,
    GGML_TYPE_Q5_1, GGML_TYPE_Q2_K, GGML_TYPE_Q3_K, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K, GGML_TYPE_IQ4_NL,
};
#define N_TYPES (sizeof(TYPES) / sizeof(TYPES[0]))

static bool repacked_here(enum ggml_type type) {
    return type == GGML_TYPE_Q4_0 || type == GGML_TYPE_Q4_K || type == GGML_TYPE_IQ4_NL ||
           (type == GGML_TYPE_Q2_K && ggml_cpu_has_avx512());
}

// The CPU_REPACK buffer type (ggml_backend_dev_get_extra_bufts), or NULL.
static ggml_backend_buffer_type_t repack_buft(void) {
    typedef ggml_backend_buffer_type_t * (*get_extra_fn)(ggml_backend_dev_t);
    ggml_backend_dev_t cpu       = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    get_extra_fn       get_extra = (get_extra_fn) ggml_backend_reg_get_proc_address(ggml_backend_dev_backend_reg(cpu),
                                                                                     "ggml_backend_dev_get_extra_bufts");
    for (ggml_backend_buffer_type_t * b = get_extra != NULL ? get_extra(cpu) : NULL; b != NULL && *b != NULL; b++) {
        if (strcmp(ggml_backend_buft_name(*b), "CPU_REPACK") == 0) return *b;
    }
    return NULL;
}

static void put_i32(FILE * f, int32_t v) { fwrite(&v, sizeof(v), 1, f); }

// Random activations b (K x n_b x T) and picks ids (n_used x T): distinct
// experts per token, as top_k picks them.
static void random_inputs(float * b, int n_b, int32_t * ids) {
    for (int64_t i = 0; i < (int64_t) K * n_b * T; i++) b[i] = 3.0f * uniform();
    for (int t = 0; t < T; t++) {
        int32_t * col = ids + t * N_USED;
        for (int i = 0; i < N_USED; i++) {
            bool again;
            do {
                col[i] = (int32_t) ((uniform() + 1.0f) * 0.5f * N_AS) % N_AS;
                again  = false;
                for (int j = 0; j < i; j++) again |= col[j] == col[i];
            } while (again);
        }
    }
}

// One case: the experts (raw bytes of the type) in buft, 1 thread.
static void write_case(FILE * f, enum ggml_type type, ggml_backend_buffer_type_t buft, const void * raw, int n_b,
                       const float * b_in, const int32_t * ids_in) {
    struct ggml_context * wctx = ggml_init((struct ggml_init_params) {1 << 20, NULL, true});
    struct ggml_tensor *  as   = ggml_new_tensor_3d(wctx, type, K, N, N_AS);
    ggml_backend_buffer_t wbuf = ggml_backend_alloc_ctx_tensors_from_buft(wctx, buft);
    ggml_backend_tensor_set(as, raw, 0, ggml_nbytes(as));   // the repack buffer repacks here

    struct ggml_context * ctx = ggml_init((struct ggml_init_params) {16 << 20, NULL, false});
    struct ggml_tensor *  b   = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, K, n_b, T);
    struct ggml_tensor *  ids = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, N_USED, T);
    memcpy(b->data, b_in, ggml_nbytes(b));
    memcpy(ids->data, ids_in, ggml_nbytes(ids));
    struct ggml_tensor * y = ggml_mul_mat_id(ctx, as, b, ids);
    struct ggml_cgraph * g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, y);
    ggml_graph_compute_with_ctx(ctx, g, 1);

    put_i32(f, buft != ggml_backend_cpu_buffer_type());
    put_i32(f, n_b);
    fwrite(b->data, 1, ggml_nbytes(b), f);
    fwrite(ids->data, 1, ggml_nbytes(ids), f);
    fwrite(y->data, 1, ggml_nbytes(y), f);
    ggml_free(ctx);
    ggml_backend_buffer_free(wbuf);
    ggml_free(wctx);
}

int main(int argc, char ** argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUT.bin\n", argv[0]);
        return 2;
    }
    ggml_backend_buffer_type_t repack = repack_buft();
    if (repack == NULL) {
        fprintf(stderr, "no CPU_REPACK buffer type in this libggml\n");
        return 1;
    }
    FILE * f = fopen(argv[1], "wb");
    if (f == NULL) {
        perror(argv[1]);
        return 1;
    }
    const int32_t head[] = {0x44494d4d, K, N, N_AS, N_USED, T, (int32_t) N_TYPES};
    for (size_t i = 0; i < sizeof(head) / sizeof(head[0]); i++) put_i32(f, head[i]);
    for (size_t k = 0; k < N_TYPES; k++) {
        const enum ggml_type type = TYPES[k];
        const int64_t        n    = (int64_t) K * N * N_AS;
        float *              w    = malloc(sizeof(float) * (size_t) n);
        void *               raw  = malloc(ggml_row_size(type, n));
        for (int64_t i = 0; i < n; i++) w[i] = uniform();
        if (type == GGML_TYPE_F32) memcpy(raw, w, sizeof(float) * (size_t) n);
        else ggml_quantize_chunk(type, w, raw, 0, N * N_AS, K, NULL);
        put_i32(f, (int32_t) type);
        put_i32(f, 2 * (1 + (int32_t) repacked_here(type)));
        fwrite(raw, 1, ggml_row_size(type, n), f);
        for (int n_b = 1; n_b <= N_USED; n_b += N_USED - 1) {   // the same inputs plain and repacked
            float   b[K * N_USED * T];
            int32_t ids[N_USED * T];
            random_inputs(b, n_b, ids);
            for (int repacked = 0; repacked <= (int) repacked_here(type); repacked++) {
                write_case(f, type, repacked ? repack : ggml_backend_cpu_buffer_type(), raw, n_b, b, ids);
            }
        }
        free(raw);
        free(w);
    }
    fclose(f);
    printf("%s: %d types\n", argv[1], (int) N_TYPES);
    return 0;
}
