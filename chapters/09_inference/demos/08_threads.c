// Generated from full/demos/08_threads.c by tools/chapgen. In a class, edit this copy freely (make chapters will not overwrite your edits); to change the engine, edit full/demos/08_threads.c and run make chapters.
// Chapter 08 demo: the same graph on 1, 2 and 4 threads of one persistent
// pool: bit-identical results, and the time each takes.
#define _POSIX_C_SOURCE 200809L
#include "mg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { N_EMBD = 512, N_FF = 1536, N_TOKENS = 32, N_LAYERS = 4, N_RUNS = 5 };

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec * 1e3 + (double) ts.tv_nsec / 1e6;
}

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
    const char *         json_path = getenv("MG_TRACE_JSON"), * svg_dir = getenv("MG_SVG");
    const bool           want_json = json_path != NULL && json_path[0] != '\0';
    const bool           want_svg  = svg_dir != NULL && svg_dir[0] != '\0';
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
            const double t0 = now_ms();
            mg_graph_compute(g, &plan);
            const double dt = now_ms() - t0;
            if (dt < best) best = dt;
        }
        if (getenv("MG_TRACE") != NULL) mg_trace_set(getenv("MG_TRACE"));
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
    return 0;
}
