// test_galloc_random.c - the graph allocator on hundreds of random graphs
// (random_dag.h), checked against facts the test works out for itself:
//
//   (a) no two tensors alive at the same time share a byte. Liveness comes
//       from the graph order alone: a result is born at its node, and dies
//       after the last node that reads it, reads a view of it, or writes into
//       it in place; inputs, OUTPUT-flagged results and the results nobody
//       reads (the graph's roots, which the caller reads) live to the end.
//       With parent reuse on, exactly one overlap is allowed: a node of an
//       in-place-capable op written over a source it reads in its own shape
//       and whose last reader it is (ggml_gallocr_allocate_node's rule).
//   (b) the results equal, bit for bit, those of chapter 04's allocation, in
//       which every result has its own malloc'd bytes (the allocator leaves
//       tensors that have data alone). The compute buffer is filled with NaN
//       bytes first, so a result read before it was written shows.
//   (c) the peak is at most the sum, every planned tensor lies inside it, and
//       the peak is reached by some tensor (no unused tail).
#include "random_dag.h"

#define N_DAGS 300

static const size_t alignments[4] = {4, 16, 32, 64};

static size_t align_up(size_t n, size_t a) {
    return (n + a - 1) / a * a;
}

// The ops whose result may be written over a source (ggml_op_can_inplace).
static bool op_can_inplace(enum mg_op op) {
    switch (op) {
        case MG_OP_ADD: case MG_OP_SUB: case MG_OP_MUL: case MG_OP_DIV:
        case MG_OP_SCALE: case MG_OP_SQR: case MG_OP_SQRT:
        case MG_OP_RELU: case MG_OP_SILU: case MG_OP_GELU:
        case MG_OP_RMS_NORM: case MG_OP_SOFT_MAX:
            return true;
        default:
            return false;
    }
}

// One tensor the plan gave bytes to, and when it needs them.
struct life {
    struct mg_tensor * t;
    size_t             off;
    size_t             size;   // mg_nbytes: the bytes that must not be touched
    int                born;   // node index (-1: before the first node)
    int                last;   // last node index that needs its bytes (n_nodes: after the end)
};

static bool reads(const struct mg_tensor * node, const struct mg_tensor * storage) {
    for (int k = 0; k < MG_MAX_SRC; k++) {
        const struct mg_tensor * s = node->src[k];
        if (s != NULL && (s == storage || s->view_src == storage)) return true;
    }
    return false;
}

// A root is a node nobody reads; its storage is what the caller reads after compute.
static bool is_root_storage(const struct mg_cgraph * g, const struct mg_tensor * storage) {
    for (int i = 0; i < g->n_nodes; i++) {
        struct mg_tensor * n = g->nodes[i];
        if (mg_graph_use_count(g, n) == 0 && rdag_storage(n) == storage) return true;
    }
    return false;
}

static int last_need(const struct mg_cgraph * g, const struct mg_tensor * t, int born) {
    int last = born;
    for (int j = 0; j < g->n_nodes; j++) {
        if (reads(g->nodes[j], t) || g->nodes[j]->view_src == t) last = j;
    }
    return last;
}

// Every tensor that must have an offset gets one, and only those.
static int collect_lives(const struct rdag * d, const struct mg_gallocr * ga, struct life * lives) {
    const struct mg_cgraph * g = d->g;
    int n = 0;
    for (int i = 0; i < d->n_inputs; i++) {
        struct life * l = &lives[n++];
        *l = (struct life) {.t = d->inputs[i], .size = mg_nbytes(d->inputs[i]), .born = -1, .last = g->n_nodes};
        ck_assert_msg(mg_gallocr_get_offset(ga, g, l->t, &l->off), "input %s has no offset", l->t->name);
    }
    for (int i = 0; i < g->n_leafs; i++) {
        size_t off;
        if (!(g->leafs[i]->flags & MG_TENSOR_FLAG_INPUT)) {
            ck_assert_msg(!mg_gallocr_get_offset(ga, g, g->leafs[i], &off), "weight %s was planned", g->leafs[i]->name);
        }
    }
    for (int i = 0; i < g->n_nodes; i++) {
        struct mg_tensor * t = g->nodes[i];
        size_t off;
        if (t->view_src != NULL) {
            ck_assert_msg(!mg_gallocr_get_offset(ga, g, t, &off), "view %s was planned", t->name);
            continue;
        }
        struct life * l = &lives[n++];
        *l = (struct life) {.t = t, .size = mg_nbytes(t), .born = i, .last = last_need(g, t, i)};
        if ((t->flags & MG_TENSOR_FLAG_OUTPUT) || is_root_storage(g, t)) l->last = g->n_nodes;
        ck_assert_msg(mg_gallocr_get_offset(ga, g, t, &l->off), "node %d %s has no offset", i, t->name);
    }
    return n;
}

// B written over its dying source A, as parent reuse may do: B's op works
// element by element (or row by row), and it reads A (or a view of A's
// first bytes) in exactly B's shape, so each element is read before it is
// overwritten.
static bool is_allowed_reuse(const struct life * a, const struct life * b) {
    if (b->born < 0 || a->born < 0 || a->last != b->born || a->off != b->off) return false;
    if (!op_can_inplace(b->t->op)) return false;
    for (int k = 0; k < MG_MAX_SRC; k++) {
        const struct mg_tensor * s = b->t->src[k];
        if (s == NULL || !mg_are_same_shape(s, b->t)) continue;
        if (s == a->t) return true;
        if (s->view_src == a->t && s->view_offs == 0 && mg_is_contiguous(s)) return true;
    }
    return false;
}

static bool overlap(size_t a0, size_t a1, size_t b0, size_t b1) {
    return a0 < b1 && b0 < a1;
}

static void check_no_live_overlap(const struct rdag * d, const struct mg_gallocr * ga, bool reuse, uint64_t seed) {
    struct life lives[RDAG_GRAPH_SIZE + RDAG_MAX_INPUTS];
    const int n = collect_lives(d, ga, lives);
    for (int i = 0; i < n; i++) {
        for (int j = i + 1; j < n; j++) {
            const struct life * a = &lives[i], * b = &lives[j];
            if (a->born > b->born) {
                const struct life * tmp = a;
                a = b;
                b = tmp;
            }
            const bool same_time  = a->born <= b->last && b->born <= a->last;
            const bool same_bytes = overlap(a->off, a->off + a->size, b->off, b->off + b->size);
            if (!same_time || !same_bytes) continue;
            ck_assert_msg(reuse && is_allowed_reuse(a, b),
                          "seed %llu: %s [%zu, %zu) alive %d..%d overlaps %s [%zu, %zu) alive %d..%d",
                          (unsigned long long) seed, a->t->name, a->off, a->off + a->size, a->born, a->last,
                          b->t->name, b->off, b->off + b->size, b->born, b->last);
        }
    }
}

static void check_sizes(const struct rdag * d, const struct mg_gallocr * ga, size_t align, uint64_t seed) {
    struct life lives[RDAG_GRAPH_SIZE + RDAG_MAX_INPUTS];
    const int    n    = collect_lives(d, ga, lives);
    const size_t peak = mg_gallocr_get_buffer_size(ga);
    size_t sum = 0, highest = 0;
    for (int i = 0; i < n; i++) {
        const size_t end = lives[i].off + align_up(lives[i].size, align);
        ck_assert_msg(lives[i].off % align == 0, "seed %llu: %s at %zu, alignment %zu", (unsigned long long) seed,
                      lives[i].t->name, lives[i].off, align);
        ck_assert_msg(end <= peak, "seed %llu: %s ends at %zu, past the buffer (%zu)", (unsigned long long) seed,
                      lives[i].t->name, end, peak);
        sum += align_up(lives[i].size, align);
        if (end > highest) highest = end;
    }
    ck_assert_uint_eq(mg_gallocr_get_sum_size(ga), sum);
    ck_assert_uint_le(peak, sum);
    ck_assert_uint_eq(peak, highest);
}

static struct mg_gallocr * plan(struct rdag * d, size_t align, bool reuse) {
    struct mg_gallocr * ga = mg_gallocr_new(align);
    mg_gallocr_set_reuse_parent(ga, reuse);
    ck_assert(mg_gallocr_alloc_graph(ga, d->g));
    return ga;
}

static int random_n_ops(uint64_t seed) {
    return 4 + (int) (seed * 7 % 37);
}

START_TEST(test_random_dags_no_live_overlap) {
    for (uint64_t seed = 1; seed <= N_DAGS; seed++) {
        struct rdag d = rdag_new(seed, random_n_ops(seed));
        for (int reuse = 0; reuse < 2; reuse++) {
            struct mg_gallocr * ga = plan(&d, alignments[(seed + (uint64_t) reuse) % 4], reuse);
            check_no_live_overlap(&d, ga, reuse, seed);
            mg_gallocr_free(ga);
            rdag_unplace(&d, NULL);
        }
        rdag_free(&d);
    }
}
END_TEST

START_TEST(test_random_dags_peak_at_most_sum) {
    int n_smaller = 0;
    for (uint64_t seed = 1; seed <= N_DAGS; seed++) {
        struct rdag d = rdag_new(seed, random_n_ops(seed));
        for (int reuse = 0; reuse < 2; reuse++) {
            const size_t        align = alignments[(seed + (uint64_t) reuse) % 4];
            struct mg_gallocr * ga    = plan(&d, align, reuse);
            check_sizes(&d, ga, align, seed);
            n_smaller += mg_gallocr_get_buffer_size(ga) < mg_gallocr_get_sum_size(ga);
            mg_gallocr_free(ga);
            rdag_unplace(&d, NULL);
        }
        rdag_free(&d);
    }
    // Not a property of every graph, but of most: a planner that never reused
    // anything would pass every check above.
    ck_assert_int_gt(n_smaller, N_DAGS);
}
END_TEST

// The inputs were placed first: together they tile [0, S), S the sum of
// their aligned sizes, so nothing computed can sit under them.
START_TEST(test_random_dags_inputs_at_the_bottom) {
    for (uint64_t seed = 1; seed <= N_DAGS; seed++) {
        struct rdag d = rdag_new(seed, random_n_ops(seed));
        const size_t        align = alignments[seed % 4];
        struct mg_gallocr * ga    = plan(&d, align, true);
        bool covered[RDAG_MAX_INPUTS] = {false};
        size_t end = 0;
        for (int k = 0; k < d.n_inputs; k++) {   // find the input that starts at end, n times
            int found = -1;
            for (int i = 0; i < d.n_inputs; i++) {
                size_t off;
                ck_assert(mg_gallocr_get_offset(ga, d.g, d.inputs[i], &off));
                if (!covered[i] && off == end) found = i;
            }
            ck_assert_msg(found >= 0, "seed %llu: no input starts at %zu", (unsigned long long) seed, end);
            covered[found] = true;
            end += align_up(mg_nbytes(d.inputs[found]), align);
        }
        for (int i = 0; i < d.g->n_nodes; i++) {
            size_t off;
            if (mg_gallocr_get_offset(ga, d.g, d.g->nodes[i], &off)) {
                ck_assert_msg(off >= end, "seed %llu: node %s at %zu, under the inputs [0, %zu)",
                              (unsigned long long) seed, d.g->nodes[i]->name, off, end);
            }
        }
        mg_gallocr_free(ga);
        rdag_unplace(&d, NULL);
        rdag_free(&d);
    }
}
END_TEST

static void assert_same_bits(const float * expected, const float * got, size_t n, uint64_t seed, const char * what) {
    for (size_t i = 0; i < n; i++) {
        ck_assert_msg(memcmp(&expected[i], &got[i], sizeof(float)) == 0,
                      "seed %llu (%s): result value %zu is %.9g, chapter 04's allocation gives %.9g",
                      (unsigned long long) seed, what, i, (double) got[i], (double) expected[i]);
    }
}

// Fill the whole compute buffer with NaN bytes: a value read before it was
// written, or overwritten too early, then cannot match by luck.
static void poison_buffer(struct rdag * d, const struct mg_gallocr * ga) {
    size_t off;
    ck_assert(mg_gallocr_get_offset(ga, d->g, d->inputs[0], &off));
    memset((char *) d->inputs[0]->data - off, 0xff, mg_gallocr_get_buffer_size(ga));
}

START_TEST(test_random_dags_match_naive_allocation) {
    for (uint64_t seed = 1; seed <= N_DAGS; seed++) {
        struct rdag d = rdag_new(seed, random_n_ops(seed));
        void ** blocks = rdag_place_naive(&d);
        rdag_set_inputs(&d, seed);
        mg_graph_compute_with_ctx(d.ctx, d.g, 1);
        float * expected = rdag_collect_results(&d);
        rdag_unplace(&d, blocks);

        for (int reuse = 0; reuse < 2; reuse++) {
            struct mg_gallocr * ga = plan(&d, alignments[(seed + (uint64_t) reuse) % 4], reuse);
            poison_buffer(&d, ga);
            rdag_set_inputs(&d, seed);
            mg_graph_compute_with_ctx(d.ctx, d.g, 1);
            float * got = rdag_collect_results(&d);
            const char * what = reuse ? "parent reuse on" : "parent reuse off";
            assert_same_bits(expected, got, rdag_results_count(&d), seed, what);
            free(got);
            mg_gallocr_free(ga);
            rdag_unplace(&d, NULL);
        }
        free(expected);
        rdag_free(&d);
    }
}
END_TEST

// Inputs are never freed (and the generator writes nothing in place over
// them): after compute they still hold what the caller set.
START_TEST(test_random_dags_inputs_survive) {
    for (uint64_t seed = 1; seed <= N_DAGS; seed += 3) {
        struct rdag d = rdag_new(seed, random_n_ops(seed));
        struct mg_gallocr * ga = plan(&d, 16, true);
        rdag_set_inputs(&d, seed);
        mg_graph_compute_with_ctx(d.ctx, d.g, 1);
        for (int i = 0; i < d.n_inputs; i++) {
            uint64_t rng = seed + (uint64_t) i * 7919;   // rdag_set_inputs' values, again
            const float * v = d.inputs[i]->data;
            for (int64_t k = 0; k < mg_nelements(d.inputs[i]); k++) {
                const float want = mg_test_rand_uniform(&rng, -1.0f, 1.0f);
                ck_assert_msg(memcmp(&v[k], &want, sizeof(float)) == 0, "seed %llu: input %d value %lld changed",
                              (unsigned long long) seed, i, (long long) k);
            }
        }
        mg_gallocr_free(ga);
        rdag_unplace(&d, NULL);
        rdag_free(&d);
    }
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("galloc_random");
    TCase * tc = MG_TCASE(s, "random_dags", test_random_dags_no_live_overlap, test_random_dags_peak_at_most_sum,
                             test_random_dags_inputs_at_the_bottom, test_random_dags_match_naive_allocation,
                             test_random_dags_inputs_survive);
    tcase_set_timeout(tc, 120);
    return s;
}
