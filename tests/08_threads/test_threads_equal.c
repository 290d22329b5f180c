// test_threads_equal.c - the same graph on 1, 2, 3 and 4 threads gives the
// same bits.
//
// Every kernel gives each thread whole rows, and no dot product or row
// reduction is split between threads (compute.h), so the thread count may
// change who computes a value but never how it is rounded. Checked on two
// families of random graphs: the allocator's random DAGs (random_dag.h, with
// their results placed by the graph allocator, views and in-place ops) and
// random layer stacks (random_net.h: quantized matmuls with their init phase,
// softmax with scratch, rope, ...). Each is computed on pools of every size,
// and on one 4-thread pool with plans for 1 to 4 threads.
#include "../05_galloc/random_dag.h"
#include "../07_scratch/random_net.h"

static void compute_on(struct mg_cgraph * g, struct mg_threadpool * tp, int n_threads) {
    struct mg_cplan plan = mg_graph_plan(g, n_threads);
    plan.threadpool = tp;
    plan.work_data  = plan.work_size > 0 ? malloc(plan.work_size) : NULL;
    if (plan.work_data != NULL) memset(plan.work_data, 0xff, plan.work_size);   // NaN: scratch is never read unwritten
    mg_graph_compute(g, &plan);
    free(plan.work_data);
}

static void assert_same_floats(const float * want, const float * got, size_t n, uint64_t seed, int n_threads,
                               const char * what) {
    for (size_t i = 0; i < n; i++) {
        ck_assert_msg(memcmp(&want[i], &got[i], sizeof(float)) == 0,
                      "seed %llu, %s, %d threads: value %zu is %.9g, one thread gives %.9g", (unsigned long long) seed,
                      what, n_threads, i, (double) got[i], (double) want[i]);
    }
}

// ---------------------------------------------------------------------------
// Random DAGs, placed by the graph allocator
// ---------------------------------------------------------------------------

#define N_DAGS 60

static float * dag_run(struct rdag * d, uint64_t seed, struct mg_threadpool * tp, int n_threads) {
    rdag_set_inputs(d, seed);
    compute_on(d->g, tp, n_threads);
    return rdag_collect_results(d);
}

START_TEST(test_random_dags_same_bits_on_every_pool_size) {
    for (uint64_t seed = 1; seed <= N_DAGS; seed++) {
        struct rdag         d  = rdag_new(seed, 4 + (int) (seed * 7 % 37));
        struct mg_gallocr * ga = mg_gallocr_new(0);
        ck_assert(mg_gallocr_alloc_graph(ga, d.g));
        struct mg_threadpool * tp1  = mg_threadpool_new(1);
        float *                want = dag_run(&d, seed, tp1, 1);
        mg_threadpool_free(tp1);
        for (int n = 2; n <= 4; n++) {
            struct mg_threadpool * tp  = mg_threadpool_new(n);
            float *                got = dag_run(&d, seed, tp, n);
            assert_same_floats(want, got, rdag_results_count(&d), seed, n, "random DAG");
            free(got);
            mg_threadpool_free(tp);
        }
        free(want);
        mg_gallocr_free(ga);
        rdag_free(&d);
    }
}
END_TEST

// The graphs outlive the pool: freeing a graph while a pool that ran it is
// alive is test_threadpool.c's test_graph_freed_right_after_compute.
START_TEST(test_random_dags_same_bits_on_one_pool) {
    struct rdag *         d  = calloc(N_DAGS, sizeof(struct rdag));
    struct mg_gallocr **  ga = calloc(N_DAGS, sizeof(struct mg_gallocr *));
    struct mg_threadpool * tp = mg_threadpool_new(4);
    for (int i = 0; i < N_DAGS; i++) {
        const uint64_t seed = 100 + (uint64_t) i;
        d[i]  = rdag_new(seed, 4 + (int) (seed * 7 % 37));
        ga[i] = mg_gallocr_new(0);
        ck_assert(mg_gallocr_alloc_graph(ga[i], d[i].g));
        float * want = dag_run(&d[i], seed, tp, 1);
        for (int n = 2; n <= 4; n++) {
            float * got = dag_run(&d[i], seed, tp, n);
            assert_same_floats(want, got, rdag_results_count(&d[i]), seed, n, "random DAG, one pool");
            free(got);
        }
        free(want);
    }
    mg_threadpool_free(tp);
    for (int i = 0; i < N_DAGS; i++) {
        mg_gallocr_free(ga[i]);
        rdag_free(&d[i]);
    }
    free(ga);
    free(d);
}
END_TEST

// ---------------------------------------------------------------------------
// Random layer stacks: quantized matmuls, softmax, rope, ...
// ---------------------------------------------------------------------------

#define N_NETS 30

static float * net_output(const struct net * n) {
    const struct mg_tensor * out = n->g->nodes[n->g->n_nodes - 1];
    float *                  v   = malloc(mg_nbytes(out));
    memcpy(v, out->data, mg_nbytes(out));
    return v;
}

static void poison_results(struct net * n) {
    for (int i = 0; i < n->g->n_nodes; i++) {
        struct mg_tensor * t = n->g->nodes[i];
        if (t->view_src == NULL) memset(t->data, 0xff, mg_nbytes(t));
    }
}

START_TEST(test_random_nets_same_bits_on_every_thread_count) {
    struct net *           nets = calloc(N_NETS, sizeof(struct net));
    struct mg_threadpool * big  = mg_threadpool_new(4);   // outlives the graphs it runs, as above
    for (int i = 0; i < N_NETS; i++) {
        const uint64_t         seed = 1 + (uint64_t) i;
        struct net *           n    = &nets[i];
        struct mg_threadpool * tp1  = mg_threadpool_new(1);
        *n = net_new(seed);
        compute_on(n->g, tp1, 1);
        mg_threadpool_free(tp1);
        float *      want  = net_output(n);
        const size_t count = mg_nbytes(n->g->nodes[n->g->n_nodes - 1]) / sizeof(float);
        for (int k = 2; k <= 4; k++) {
            poison_results(n);
            struct mg_threadpool * tp = mg_threadpool_new(k);
            compute_on(n->g, tp, k);
            mg_threadpool_free(tp);
            float * got = net_output(n);
            assert_same_floats(want, got, count, seed, k, "random net, own pool");
            free(got);
        }
        for (int k = 1; k <= 4; k++) {
            poison_results(n);
            compute_on(n->g, big, k);
            float * got = net_output(n);
            assert_same_floats(want, got, count, seed, k, "random net, 4-thread pool");
            free(got);
        }
        free(want);
    }
    mg_threadpool_free(big);
    for (int i = 0; i < N_NETS; i++) net_free(&nets[i]);
    free(nets);
}
END_TEST

// No pool in the plan: mg_graph_compute makes one for this compute.
START_TEST(test_plan_without_pool_gives_the_same_bits) {
    for (uint64_t seed = 1; seed <= 10; seed++) {
        struct net n = net_new(seed);
        compute_on(n.g, NULL, 1);
        float *      want  = net_output(&n);
        const size_t count = mg_nbytes(n.g->nodes[n.g->n_nodes - 1]) / sizeof(float);
        for (int k = 2; k <= 4; k++) {
            poison_results(&n);
            compute_on(n.g, NULL, k);
            float * got = net_output(&n);
            assert_same_floats(want, got, count, seed, k, "pool per compute");
            free(got);
        }
        free(want);
        net_free(&n);
    }
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("threads_equal");
    TCase * tc = MG_TCASE(s, "same_bits", test_random_dags_same_bits_on_every_pool_size,
                             test_random_dags_same_bits_on_one_pool, test_random_nets_same_bits_on_every_thread_count,
                             test_plan_without_pool_gives_the_same_bits);
    tcase_set_timeout(tc, 120);
    return s;
}
