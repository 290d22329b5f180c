// Generated from full/demos/08_threads.c by tools/chapgen. In a class, edit this copy freely (make chapters will not overwrite your edits); to change the engine, edit full/demos/08_threads.c and run make chapters.
// Chapter 08 demo: the same graph on 1, 2 and 4 threads of one persistent
// pool: bit-identical results, and the time each takes. Then one matmul on
// 1, 2 and 4 threads against the same dot products split along k, the way a
// split reduction would add them: then the thread count changes the bits.
#define _POSIX_C_SOURCE 200809L
#include "mg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { N_EMBD = 512, N_FF = 1536, N_TOKENS = 32, N_LAYERS = 4, N_RUNS = 5 };

static struct mg_tensor * random_matrix(struct mg_context * ctx, enum mg_type type, int64_t ne0, int64_t ne1) {
    struct mg_tensor * t = mg_new_tensor_2d(ctx, type, ne0, ne1);
    float * row = malloc((size_t) ne0 * sizeof(float));
    for (int64_t r = 0; r < ne1; r++) {
        for (int64_t i = 0; i < ne0; i++) row[i] = 0.1f * ((float) rand() / (float) RAND_MAX - 0.5f);
        if (type == MG_TYPE_F32) {
            memcpy((char *) t->data + r * t->nb[1], row, (size_t) ne0 * sizeof(float));
        } else {
            mg_get_type_traits(type)->from_float(row, (char *) t->data + r * t->nb[1], ne0);
        }
    }
    free(row);
    return t;
}

// A stack of SwiGLU feed-forward blocks with residuals and norms: the shape
// of most of an LLM's work.
static struct mg_tensor * build(struct mg_context * ctx, struct mg_tensor * x) {
    struct mg_tensor * cur = x;
    for (int l = 0; l < N_LAYERS; l++) {
        struct mg_tensor * h    = mg_rms_norm(ctx, cur, 1e-6f);
        struct mg_tensor * gate = mg_mul_mat(ctx, random_matrix(ctx, MG_TYPE_Q8_0, N_EMBD, N_FF), h);
        struct mg_tensor * up   = mg_mul_mat(ctx, random_matrix(ctx, MG_TYPE_Q8_0, N_EMBD, N_FF), h);
        struct mg_tensor * ff   = mg_mul(ctx, mg_silu(ctx, gate), up);
        cur = mg_add(ctx, cur, mg_mul_mat(ctx, random_matrix(ctx, MG_TYPE_Q8_0, N_FF, N_EMBD), ff));
    }
    return mg_format_name(mg_soft_max(ctx, cur), "out");
}

// ---------------------------------------------------------------------------
// Why shares take whole rows: one matmul's dot products, each computed by one
// thread in one order, against the same dot products split along k.
// ---------------------------------------------------------------------------

enum { SPLIT_K = 4096, SPLIT_ROWS = 256 };

static uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

// Row r of w times x with k split into n_parts contiguous parts, as n_parts
// threads would compute it: each part summed in order (as mg_vec_dot_f32
// does), then the partial sums added in thread order after a barrier.
static float dot_split_k(const float * w, const float * x, int n_parts) {
    float total = 0.0f;
    for (int t = 0; t < n_parts; t++) {
        float part = 0.0f;
        for (int i = t * SPLIT_K / n_parts; i < (t + 1) * SPLIT_K / n_parts; i++) part += w[i] * x[i];
        total += part;
    }
    return total;
}

static bool three_different(float a, float b, float c) {
    return bits_of(a) != bits_of(b) && bits_of(a) != bits_of(c) && bits_of(b) != bits_of(c);
}

static int count_differing(const float * a, const float * b, int n) {
    int d = 0;
    for (int i = 0; i < n; i++) d += bits_of(a[i]) != bits_of(b[i]);
    return d;
}

static void split_k(void) {
    printf("\n== One matmul (%d rows of %d, F32), whole rows per thread or k split between threads ==\n",
           SPLIT_ROWS, SPLIT_K);
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 16 * 1024 * 1024});
    struct mg_tensor *  w   = random_matrix(ctx, MG_TYPE_F32, SPLIT_K, SPLIT_ROWS);
    struct mg_tensor *  x   = random_matrix(ctx, MG_TYPE_F32, SPLIT_K, 1);
    struct mg_tensor *  y   = mg_mul_mat(ctx, w, x);
    struct mg_cgraph *  g   = mg_new_graph(ctx);
    mg_build_forward_expand(g, y);
    const int n_threads[] = {1, 2, 4};
    float     rows[3][SPLIT_ROWS], split[3][SPLIT_ROWS];
    for (int k = 0; k < 3; k++) {
        mg_graph_compute_with_ctx(ctx, g, n_threads[k]);
        memcpy(rows[k], y->data, sizeof(rows[k]));
        for (int r = 0; r < SPLIT_ROWS; r++) {
            split[k][r] = dot_split_k((const float *) ((const char *) w->data + r * w->nb[1]), x->data, n_threads[k]);
        }
    }
    for (int k = 1; k < 3; k++) {
        printf("whole rows, %d threads: %3d of %d outputs differ from 1 thread\n", n_threads[k],
               count_differing(rows[k], rows[0], SPLIT_ROWS), SPLIT_ROWS);
    }
    // In one part, the split is the chapters' mg_vec_dot_f32 itself; full/'s SIMD twin adds in lanes.
    const int n_one_part = count_differing(split[0], rows[0], SPLIT_ROWS);
    printf("k split,    1 thread : %3d of %d outputs differ from whole rows (%s)\n", n_one_part, SPLIT_ROWS,
           n_one_part == 0 ? "the same arithmetic" : "this build's vec_dot adds in SIMD lanes");
    for (int k = 1; k < 3; k++) {
        printf("k split,    %d threads: %3d of %d outputs differ from 1 thread\n", n_threads[k],
               count_differing(split[k], rows[0], SPLIT_ROWS), SPLIT_ROWS);
    }
    // The first row whose three sums (whole, 2 parts, 4 parts) are three different floats.
    int r = 0;
    while (r < SPLIT_ROWS - 1 && !three_different(rows[0][r], split[1][r], split[2][r])) r++;
    const bool same_rows = bits_of(rows[1][r]) == bits_of(rows[0][r]) && bits_of(rows[2][r]) == bits_of(rows[0][r]);
    printf("row %d: whole rows %.9f (bits 0x%08x) on 1, 2 and 4 threads%s\n", r, (double) rows[0][r],
           bits_of(rows[0][r]), same_rows ? "" : " (NOT all)");
    for (int k = 1; k < 3; k++) {
        printf("       k split on %d threads %.9f (bits 0x%08x)\n", n_threads[k], (double) split[k][r],
               bits_of(split[k][r]));
    }
    mg_free(ctx);
}

int main(void) {
    srand(1);
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 64 * 1024 * 1024});
    struct mg_tensor *  x   = mg_set_name(random_matrix(ctx, MG_TYPE_F32, N_EMBD, N_TOKENS), "x");
    struct mg_tensor *  out = build(ctx, x);
    struct mg_cgraph *  g   = mg_new_graph(ctx);
    mg_build_forward_expand(g, out);
    struct mg_gallocr * ga = mg_gallocr_new(0);
    mg_gallocr_alloc_graph(ga, g);

    // MG_TRACE_JSON=file: every run of every pool as a Chrome trace (timeline.h);
    // MG_SVG=dir: the last run on each pool as a picture, threads-N.svg.
    const char *         json_path = mg_demo_switch("MG_TRACE_JSON"), * svg_dir = mg_demo_switch("MG_SVG");
    const bool           want_json = json_path != NULL;
    const bool           want_svg  = svg_dir != NULL;
    struct mg_timeline * timeline  = want_json || want_svg ? mg_timeline_new() : NULL;

    printf("== %d feed-forward layers, %d tokens, Q8_0 weights: %d nodes ==\n", N_LAYERS, N_TOKENS, g->n_nodes);
    const int thread_counts[] = {1, 2, 4};
    float *   first = NULL;
    for (int k = 0; k < 3; k++) {
        const int              n  = thread_counts[k];
        struct mg_threadpool * tp = mg_threadpool_new(n);
        struct mg_cplan        plan = mg_graph_plan(g, n);
        plan.threadpool = tp;
        plan.work_data  = malloc(plan.work_size);
        if (timeline != NULL) mg_threadpool_set_timeline(tp, timeline);   // this pool is the timeline's pool k
        double best = 1e30;
        for (int run = 0; run < N_RUNS; run++) {
            if (run == 1) mg_trace_set("");   // one traced run per thread count is plenty
            const double t0 = mg_time_ms();
            mg_graph_compute(g, &plan);
            const double dt = mg_time_ms() - t0;
            if (dt < best) best = dt;
        }
        if (mg_demo_switch("MG_TRACE") != NULL) mg_trace_set(mg_demo_switch("MG_TRACE"));
        bool same = true;
        if (first == NULL) {
            first = malloc(mg_nbytes(out));
            memcpy(first, out->data, mg_nbytes(out));
        } else {
            same = memcmp(first, out->data, mg_nbytes(out)) == 0;
        }
        const struct mg_threadpool_stats st = mg_threadpool_get_stats(tp);
        printf("%d thread%s: best of %d runs %7.2f ms   result %s   workers woke %llu times spinning, %llu from sleep\n",
               n, n > 1 ? "s" : " ", N_RUNS, best, k == 0 ? "(the reference)" : same ? "bit-identical  " : "DIFFERENT",
               (unsigned long long) st.wakeups_spin, (unsigned long long) st.wakeups_sleep);
        free(plan.work_data);
        mg_threadpool_free(tp);
    }
    printf("(this machine has %ld cores: more threads than cores cannot be faster)\n", sysconf(_SC_NPROCESSORS_ONLN));
    for (int k = 0; want_svg && k < 3; k++) {
        char path[4096], title[64];
        snprintf(path, sizeof(path), "%s/threads-%d.svg", svg_dir, thread_counts[k]);
        snprintf(title, sizeof(title), "%d thread%s", thread_counts[k], thread_counts[k] > 1 ? "s" : "");
        if (mg_timeline_dump_svg(timeline, k, title, path)) fprintf(stderr, "wrote %s\n", path);
        else fprintf(stderr, "MG_SVG: %s\n", mg_last_error());
    }
    if (want_json) {
        if (mg_timeline_write_json(timeline, json_path)) {
            fprintf(stderr, "wrote %s (open it in https://ui.perfetto.dev or chrome://tracing)\n", json_path);
        } else {
            fprintf(stderr, "MG_TRACE_JSON: %s\n", mg_last_error());
        }
    }
    mg_timeline_free(timeline);
    free(first);
    mg_gallocr_free(ga);
    mg_free(ctx);
    split_k();
    return 0;
}
