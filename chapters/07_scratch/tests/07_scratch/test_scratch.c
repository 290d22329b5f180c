// test_scratch.c - the work buffer and the split into shares, run by an
// executor written here: node by node, every share of init, then every share
// of the forward pass, one after another (what chapter 08's threads do side
// by side).
//
// Three claims, each checked bit for bit against the same executor run with
// one share and a clean work buffer:
//   - filling the work buffer with NaN bytes before every node changes
//     nothing: no kernel reads scratch it did not write in this node;
//   - filling every result with NaN bytes before its node changes nothing:
//     the shares together write every element;
//   - 1, 2, 3 or 4 shares give the same bits: a share is a set of whole rows,
//     and no dot product or row reduction is ever split.
// And mg_graph_compute agrees with this executor.
//
// The graphs are random stacks of layers (random_net.h) in which every kernel
// with scratch, and most without, takes part.
#include "random_net.h"

#include <math.h>

enum poison { POISON_NONE = 0, POISON_WORK = 1, POISON_RESULTS = 2 };

// Node by node: init for every share, then forward for every share.
static void run_serial(struct mg_cgraph * g, int n_threads, int poison) {
    const struct mg_cplan plan = mg_graph_plan(g, n_threads);
    void * work = plan.work_size > 0 ? malloc(plan.work_size) : NULL;
    for (int i = 0; i < g->n_nodes; i++) {
        struct mg_tensor * node    = g->nodes[i];
        const int          n_tasks = mg_node_n_tasks(node, n_threads);
        if ((poison & POISON_WORK) && work != NULL) memset(work, 0xff, plan.work_size);
        if ((poison & POISON_RESULTS) && node->view_src == NULL) memset(node->data, 0xff, mg_nbytes(node));
        if (mg_compute_needs_init(node)) {
            for (int ith = 0; ith < n_tasks; ith++) {
                const struct mg_compute_params p = {.ith = ith, .nth = n_tasks, .wsize = plan.work_size, .wdata = work};
                mg_compute_forward_init(&p, node);
            }
        }
        for (int ith = 0; ith < n_tasks; ith++) {
            const struct mg_compute_params p = {.ith = ith, .nth = n_tasks, .wsize = plan.work_size, .wdata = work};
            mg_compute_forward(&p, node);
        }
    }
    free(work);
}

// Every result's bytes, one after another.
static size_t results_size(const struct mg_cgraph * g) {
    size_t n = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i]->view_src == NULL) n += mg_nbytes(g->nodes[i]);
    }
    return n;
}

static char * snapshot(const struct mg_cgraph * g) {
    char * s = malloc(results_size(g) + 1);
    size_t k = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const struct mg_tensor * t = g->nodes[i];
        if (t->view_src != NULL) continue;
        memcpy(s + k, t->data, mg_nbytes(t));
        k += mg_nbytes(t);
    }
    return s;
}

static void assert_same_results(const struct mg_cgraph * g, const char * want, uint64_t seed, const char * what) {
    size_t k = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const struct mg_tensor * t = g->nodes[i];
        if (t->view_src != NULL) continue;
        ck_assert_msg(memcmp(want + k, t->data, mg_nbytes(t)) == 0, "seed %llu, %s: node %d (%s, %s) differs",
                      (unsigned long long) seed, what, i, mg_op_name(t->op), t->name);
        k += mg_nbytes(t);
    }
}

// The reference run must itself be clean: no NaN anywhere.
static void assert_finite(const struct mg_cgraph * g, uint64_t seed) {
    for (int i = 0; i < g->n_nodes; i++) {
        const struct mg_tensor * t = g->nodes[i];
        if (t->view_src != NULL) continue;
        for (int64_t k = 0; k < mg_nelements(t); k++) {
            ck_assert_msg(isfinite(((const float *) t->data)[k]), "seed %llu: node %d (%s) value %lld is not finite",
                          (unsigned long long) seed, i, mg_op_name(t->op), (long long) k);
        }
    }
}

#define N_NETS 40

static void check_against_one_share(int poison, const char * what) {
    for (uint64_t seed = 1; seed <= N_NETS; seed++) {
        struct net n = net_new(seed);
        run_serial(n.g, 1, POISON_NONE);
        assert_finite(n.g, seed);
        char * want = snapshot(n.g);
        for (int n_threads = 1; n_threads <= 4; n_threads++) {
            run_serial(n.g, n_threads, poison);
            char label[64];
            snprintf(label, sizeof(label), "%s, %d shares", what, n_threads);
            assert_same_results(n.g, want, seed, label);
        }
        free(want);
        net_free(&n);
    }
}

START_TEST(test_shares_give_the_same_bits) {
    check_against_one_share(POISON_NONE, "clean");
}
END_TEST

START_TEST(test_nan_work_buffer_changes_nothing) {
    check_against_one_share(POISON_WORK, "NaN work buffer");
}
END_TEST

START_TEST(test_shares_write_every_element) {
    check_against_one_share(POISON_RESULTS, "NaN results");
}
END_TEST

START_TEST(test_graph_compute_matches_the_serial_run) {
    for (uint64_t seed = 1; seed <= N_NETS; seed++) {
        struct net n = net_new(seed);
        run_serial(n.g, 1, POISON_NONE);
        char * want = snapshot(n.g);
        for (int i = 0; i < n.g->n_nodes; i++) {   // forget the values
            if (n.g->nodes[i]->view_src == NULL) memset(n.g->nodes[i]->data, 0xff, mg_nbytes(n.g->nodes[i]));
        }
        struct mg_cplan plan = mg_graph_plan(n.g, 1);
        plan.work_data = plan.work_size > 0 ? malloc(plan.work_size) : NULL;
        if (plan.work_data != NULL) memset(plan.work_data, 0xff, plan.work_size);
        mg_graph_compute(n.g, &plan);
        assert_same_results(n.g, want, seed, "mg_graph_compute");
        free(plan.work_data);
        free(want);
        net_free(&n);
    }
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("scratch");
    TCase * tc = MG_TCASE(s, "executor", test_shares_give_the_same_bits, test_nan_work_buffer_changes_nothing,
                             test_shares_write_every_element, test_graph_compute_matches_the_serial_run);
    tcase_set_timeout(tc, 120);
    return s;
}
