// test_threadpool.c - the persistent pool: many graphs back to back, pools
// made and freed, more threads than a plan uses, the counters, idle workers
// that sleep and wake, and graphs that end (or are freed) at awkward moments.
//
// Results are checked exactly: the graphs multiply small integers, so every
// sum is an exact float whatever order the threads add in, and the test's
// own integer arithmetic is the reference. A deadlock or lost wake-up shows
// as a test that never finishes: the test cases have short timeouts.
#define _DEFAULT_SOURCE   // usleep
#include "harness.h"
#include "mg.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// ---------------------------------------------------------------------------
// y = relu(W1 x + b) then W2 y, doubled: {K, N} -> {M2, N}, in integers
// ---------------------------------------------------------------------------

struct int_mlp {
    struct mg_context * ctx;
    struct mg_gallocr * ga;
    struct mg_cgraph *  g;
    struct mg_tensor *  x, * W1, * b, * W2, * out;
    int                 K, M, M2, N;
};

static int rand_int(uint64_t * rng, int lo, int hi) {
    return lo + (int) (mg_test_rand_u64(rng) % (uint64_t) (hi - lo + 1));
}

static void fill_ints(struct mg_tensor * t, uint64_t * rng, int lo, int hi) {
    for (int64_t i = 0; i < mg_nelements(t); i++) ((float *) t->data)[i] = (float) rand_int(rng, lo, hi);
}

static struct int_mlp int_mlp_new(int K, int M, int M2, int N, uint64_t seed) {
    struct int_mlp m = {.K = K, .M = M, .M2 = M2, .N = N};
    uint64_t rng = seed;
    m.ctx = mg_init((struct mg_init_params) {.mem_size = 1024 * 1024});
    ck_assert_ptr_nonnull(m.ctx);
    m.x  = mg_new_tensor_2d(m.ctx, MG_TYPE_F32, K, N);
    m.W1 = mg_new_tensor_2d(m.ctx, MG_TYPE_F32, K, M);
    m.b  = mg_new_tensor_1d(m.ctx, MG_TYPE_F32, M);
    m.W2 = mg_new_tensor_2d(m.ctx, MG_TYPE_F32, M, M2);
    fill_ints(m.x, &rng, -2, 2);
    fill_ints(m.W1, &rng, -1, 1);
    fill_ints(m.b, &rng, -3, 3);
    fill_ints(m.W2, &rng, -1, 1);
    struct mg_tensor * h = mg_relu(m.ctx, mg_add(m.ctx, mg_mul_mat(m.ctx, m.W1, m.x), m.b));
    m.out = mg_scale(m.ctx, mg_mul_mat(m.ctx, m.W2, h), 2.0f);
    m.g   = mg_new_graph(m.ctx);
    mg_build_forward_expand(m.g, m.out);
    m.ga = mg_gallocr_new(0);
    ck_assert(mg_gallocr_alloc_graph(m.ga, m.g));
    return m;
}

static void int_mlp_free(struct int_mlp * m) {
    mg_gallocr_free(m->ga);
    mg_free(m->ctx);
}

static const float * f32(const struct mg_tensor * t) {
    return t->data;
}

// out[j, n] = 2 * sum_i W2[i, j] * relu(b[i] + sum_k W1[k, i] x[k, n]), in integers.
static void check_int_mlp(const struct int_mlp * m) {
    for (int n = 0; n < m->N; n++) {
        long long h[256];
        for (int i = 0; i < m->M; i++) {
            long long s = (long long) f32(m->b)[i];
            for (int k = 0; k < m->K; k++) {
                s += (long long) f32(m->W1)[i * m->K + k] * (long long) f32(m->x)[n * m->K + k];
            }
            h[i] = s > 0 ? s : 0;
        }
        for (int j = 0; j < m->M2; j++) {
            long long s = 0;
            for (int i = 0; i < m->M; i++) s += (long long) f32(m->W2)[j * m->M + i] * h[i];
            const float got = f32(m->out)[n * m->M2 + j];
            ck_assert_msg(got == (float) (2 * s), "out[%d, %d] = %g, expected %lld", j, n, (double) got, 2 * s);
        }
    }
}

static void compute(struct mg_cgraph * g, struct mg_threadpool * tp, int n_threads) {
    struct mg_cplan plan = mg_graph_plan(g, n_threads);
    plan.threadpool = tp;
    plan.work_data  = plan.work_size > 0 ? malloc(plan.work_size) : NULL;
    mg_graph_compute(g, &plan);
    free(plan.work_data);
}

// ---------------------------------------------------------------------------
// Back to back
// ---------------------------------------------------------------------------

#define N_GRAPHS 8

static void make_graphs(struct int_mlp * m, uint64_t * rng) {
    for (int i = 0; i < N_GRAPHS; i++) {
        m[i] = int_mlp_new(rand_int(rng, 1, 64), rand_int(rng, 1, 48), rand_int(rng, 1, 48), rand_int(rng, 1, 6),
                           (uint64_t) i + 1);
    }
}

static void free_graphs(struct int_mlp * m) {
    for (int i = 0; i < N_GRAPHS; i++) int_mlp_free(&m[i]);
}

// Graphs of random sizes on one pool, each with a random number of threads
// and fresh inputs, as fast as they come, then with random pauses of up to a
// few milliseconds (about when idle workers stop spinning and go to sleep: a
// wake-up lost there would hang). Each compute must see its own inputs and
// finish before the next starts.
static void run_back_to_back(int pool_size, int n_computes, int max_pause_us, uint64_t seed) {
    uint64_t       rng = seed;
    struct int_mlp m[N_GRAPHS];
    make_graphs(m, &rng);
    struct mg_threadpool * tp = mg_threadpool_new(pool_size);
    for (int c = 0; c < n_computes; c++) {
        struct int_mlp * mm = &m[rand_int(&rng, 0, N_GRAPHS - 1)];
        fill_ints(mm->x, &rng, -2, 2);
        compute(mm->g, tp, rand_int(&rng, 1, pool_size));
        check_int_mlp(mm);
        if (max_pause_us > 0) usleep((useconds_t) rand_int(&rng, 0, max_pause_us));
    }
    ck_assert_uint_eq(mg_threadpool_get_stats(tp).n_graphs, (uint64_t) n_computes);
    mg_threadpool_free(tp);
    free_graphs(m);
}

START_TEST(test_thousands_of_computes_on_one_pool) {
    run_back_to_back(2, 3000, 0, 42);
}
END_TEST

// More threads than this machine may have cores: the barrier must yield.
START_TEST(test_computes_on_an_oversubscribed_pool) {
    run_back_to_back(4, 200, 0, 43);
}
END_TEST

START_TEST(test_computes_with_pauses_between_them) {
    run_back_to_back(3, 150, 4000, 44);
}
END_TEST

// A decode loop builds each step's graph in a fresh context and frees it as
// soon as the compute returns. By then no worker may still touch the graph.
START_TEST(test_graph_freed_right_after_compute) {
    uint64_t               rng = 7;
    struct mg_threadpool * tp  = mg_threadpool_new(3);
    for (int c = 0; c < 500; c++) {
        struct int_mlp m = int_mlp_new(rand_int(&rng, 1, 32), rand_int(&rng, 1, 16), rand_int(&rng, 1, 16),
                                       rand_int(&rng, 1, 4), (uint64_t) c);
        compute(m.g, tp, rand_int(&rng, 2, 3));
        check_int_mlp(&m);
        int_mlp_free(&m);
    }
    mg_threadpool_free(tp);
}
END_TEST

// ---------------------------------------------------------------------------
// Pools of every size, made and freed
// ---------------------------------------------------------------------------

START_TEST(test_pools_created_and_freed_in_a_loop) {
    struct int_mlp m = int_mlp_new(24, 16, 8, 3, 1);
    for (int i = 0; i < 120; i++) {
        const int              n  = 1 + i % 6;   // up to 6 threads on a machine that may have 2 cores
        struct mg_threadpool * tp = mg_threadpool_new(n);
        ck_assert_int_eq(mg_threadpool_n_threads(tp), n);
        if (i % 3 != 0) {   // and every third pool is freed without ever running a graph
            uint64_t rng = (uint64_t) i;
            fill_ints(m.x, &rng, -2, 2);
            compute(m.g, tp, n);
            check_int_mlp(&m);
        }
        mg_threadpool_free(tp);
    }
    int_mlp_free(&m);
}
END_TEST

START_TEST(test_plan_without_pool_makes_one_per_compute) {
    struct int_mlp m = int_mlp_new(40, 20, 10, 5, 2);
    for (int i = 0; i < 40; i++) {
        uint64_t rng = (uint64_t) i + 100;
        fill_ints(m.x, &rng, -2, 2);
        compute(m.g, NULL, 1 + i % 4);
        check_int_mlp(&m);
    }
    int_mlp_free(&m);
}
END_TEST

// ---------------------------------------------------------------------------
// More threads than the plan, and the counters
// ---------------------------------------------------------------------------

START_TEST(test_pool_with_more_threads_than_the_plan) {
    struct int_mlp         m  = int_mlp_new(33, 17, 9, 4, 3);
    struct mg_threadpool * tp = mg_threadpool_new(4);
    for (int round = 0; round < 10; round++) {
        for (int n = 1; n <= 3; n++) {
            const struct mg_threadpool_stats before = mg_threadpool_get_stats(tp);
            uint64_t rng = (uint64_t) (round * 10 + n);
            fill_ints(m.x, &rng, -2, 2);
            compute(m.g, tp, n);
            check_int_mlp(&m);
            const struct mg_threadpool_stats after = mg_threadpool_get_stats(tp);
            ck_assert_uint_eq(after.n_graphs, before.n_graphs + 1);
            // Only the n - 1 workers the plan uses were counted as woken for it.
            ck_assert_uint_eq(after.wakeups_spin + after.wakeups_sleep,
                              before.wakeups_spin + before.wakeups_sleep + (uint64_t) (n - 1));
        }
    }
    mg_threadpool_free(tp);
    int_mlp_free(&m);
}
END_TEST

START_TEST(test_stats_count_graphs_and_wakeups) {
    struct int_mlp         m  = int_mlp_new(16, 8, 8, 2, 4);
    struct mg_threadpool * tp = mg_threadpool_new(3);
    const struct mg_threadpool_stats fresh = mg_threadpool_get_stats(tp);
    ck_assert_uint_eq(fresh.n_graphs, 0);
    ck_assert_uint_eq(fresh.wakeups_spin + fresh.wakeups_sleep, 0);
    for (uint64_t k = 1; k <= 25; k++) {
        compute(m.g, tp, 3);
        const struct mg_threadpool_stats s = mg_threadpool_get_stats(tp);
        ck_assert_uint_eq(s.n_graphs, k);
        ck_assert_uint_eq(s.wakeups_spin + s.wakeups_sleep, 2 * k);   // two workers per graph
    }
    check_int_mlp(&m);
    mg_threadpool_free(tp);
    int_mlp_free(&m);
}
END_TEST

// Workers spin for a while after a graph, then sleep on the condition
// variable. After half a second of idleness (far longer than the spinning,
// even under a sanitizer) they sleep, and a new graph must wake them.
START_TEST(test_idle_workers_sleep_and_are_woken) {
    struct int_mlp         m  = int_mlp_new(16, 8, 8, 2, 5);
    struct mg_threadpool * tp = mg_threadpool_new(3);
    for (int round = 0; round < 3; round++) {
        const struct mg_threadpool_stats before = mg_threadpool_get_stats(tp);
        usleep(500 * 1000);
        uint64_t rng = (uint64_t) round;
        fill_ints(m.x, &rng, -2, 2);
        compute(m.g, tp, 3);
        check_int_mlp(&m);
        const struct mg_threadpool_stats after = mg_threadpool_get_stats(tp);
        ck_assert_uint_ge(after.wakeups_sleep, before.wakeups_sleep + 1);
    }
    mg_threadpool_free(tp);
    int_mlp_free(&m);
}
END_TEST

// A graph with no nodes (its only tensor is a leaf) computes nothing and has
// no barrier: the pool must still be in step for the graph after it.
START_TEST(test_empty_graph_between_real_ones) {
    struct int_mlp      m   = int_mlp_new(20, 12, 6, 3, 6);
    struct mg_context * ctx = mg_init((struct mg_init_params) {.mem_size = 1024 * 1024});
    struct mg_cgraph *  empty = mg_new_graph(ctx);
    mg_build_forward_expand(empty, mg_new_tensor_1d(ctx, MG_TYPE_F32, 4));
    ck_assert_int_eq(empty->n_nodes, 0);
    struct mg_threadpool * tp = mg_threadpool_new(2);
    for (int i = 0; i < 300; i++) {
        compute(empty, tp, 2);
        uint64_t rng = (uint64_t) i;
        fill_ints(m.x, &rng, -2, 2);
        compute(m.g, tp, 2);
        check_int_mlp(&m);
    }
    mg_threadpool_free(tp);
    mg_free(ctx);
    int_mlp_free(&m);
}
END_TEST

// Asking a pool for more threads than it has is a bug in the caller: abort.
START_TEST(test_plan_wants_more_threads_than_the_pool) {
    struct int_mlp         m  = int_mlp_new(8, 4, 4, 1, 7);
    struct mg_threadpool * tp = mg_threadpool_new(2);
    ck_assert_ptr_nonnull(freopen("/dev/null", "w", stderr));   // the abort message is expected
    compute(m.g, tp, 3);
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("threadpool");

    TCase * loops = MG_TCASE(s, "back_to_back", test_thousands_of_computes_on_one_pool,
                                test_computes_on_an_oversubscribed_pool, test_computes_with_pauses_between_them,
                                test_graph_freed_right_after_compute, test_pools_created_and_freed_in_a_loop,
                                test_plan_without_pool_makes_one_per_compute);
    tcase_set_timeout(loops, 60);

    TCase * counters = MG_TCASE(s, "counters", test_pool_with_more_threads_than_the_plan,
                                   test_stats_count_graphs_and_wakeups, test_idle_workers_sleep_and_are_woken);
    tcase_set_timeout(counters, 30);

    TCase * edges = tcase_create("edges");
    tcase_set_timeout(edges, 30);
    tcase_add_test(edges, test_empty_graph_between_real_ones);
    tcase_add_test_raise_signal(edges, test_plan_wants_more_threads_than_the_pool, SIGABRT);
    suite_add_tcase(s, edges);
    return s;
}
