// test_ex2_sense_barrier.c - chapter 08, exercise 2: a sense-reversing barrier.
//
//     struct mg_barrier * mg_barrier_new (int n_threads);
//     void                mg_barrier_free(struct mg_barrier * b);
//     void                mg_barrier_wait(struct mg_barrier * b, bool * sense);
//
// One shared count and one shared flag. Each thread keeps its own `sense`
// (false at first) and flips it on every wait; the last thread to arrive
// resets the count and sets the shared flag to that sense, which releases the
// others, who spin until the flag equals their sense. The flag never needs
// resetting, so the barrier can be used again at once. Graded by `make
// grade`, and a second time under ThreadSanitizer (exercises.list marks it
// [tsan]); declared weak.
//
// The test gives the barrier nothing to lean on. Between two waits a thread
// touches only plain memory: it writes its slot of the round, waits, and
// reads every thread's slot of that round. No atomic of the test's own sits
// between the threads (an atomic_fetch_add of the test's next to the wait
// would order the threads itself, and a barrier that orders nothing would
// pass), so only the barrier's own acquire and release make the writes
// visible. Each thread waits a random while before it arrives, so that each
// is now and then the last, over thousands of rounds with 2, 3 and 4 threads:
//
//   - a barrier that lets a thread through early shows as a stale slot;
//   - one whose atomics order nothing (all memory_order_relaxed) passes on
//     x86, whose hardware orders the stores anyway, but not under
//     ThreadSanitizer, which reports the slots as a data race;
//   - one with a window between releasing the others and getting ready for
//     the next round (the flag published before the count is reset) loses an
//     arrival when a released thread comes back inside it, and never opens
//     again: the test says so after STALL_SECONDS without progress. Under
//     ThreadSanitizer the test holds every such window open (see stretch()).
#define _GNU_SOURCE
#include "harness.h"
#include "mg.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct mg_barrier;
struct mg_barrier * mg_barrier_new (int n_threads) __attribute__((weak));
void                mg_barrier_free(struct mg_barrier * b) __attribute__((weak));
void                mg_barrier_wait(struct mg_barrier * b, bool * sense) __attribute__((weak));

#define MAX_THREADS 4
#if defined(__SANITIZE_THREAD__)
#define ROUNDS 5000          // each round is slower there, and a lost arrival comes within the first few
#else
#define ROUNDS 20000
#endif
#define STALL_SECONDS 5      // no round ends for this long: the barrier is stuck
#ifndef STRETCH_SPINS
#define STRETCH_SPINS 5000   // under TSan, after each atomic store: a few microseconds
#endif

static void require_functions(void) {
    ck_assert_msg(mg_barrier_new != NULL, "mg_barrier_new is not defined yet (threadpool.c, declared in threadpool.h)");
    ck_assert_msg(mg_barrier_free != NULL, "mg_barrier_free is not defined yet");
    ck_assert_msg(mg_barrier_wait != NULL, "mg_barrier_wait is not defined yet");
}

struct shared {
    struct mg_barrier * barrier;
    int                 n;
    int                 slots[2][MAX_THREADS];   // plain ints: round r writes slots[r % 2]
};

struct worker {
    struct shared * sh;
    int             ith;
    uint64_t        rng;
    // Written by the worker alone and read by the main thread after the
    // join (which orders them), or, for progress, relaxed: it orders nothing.
    int             stale;        // slots of a finished round that did not hold that round's value
    int             first_stale;  // the first round with one, -1 if none
    atomic_int      progress;     // the rounds this worker has finished (for the watchdog's message)
    atomic_bool     done;
};

#if defined(__SANITIZE_THREAD__)
// Under ThreadSanitizer every atomic operation of the library is a call into
// the sanitizer (__tsan_atomic32_store, ...). These wrappers, defined in the
// test binary, take those calls first: each does the operation, then keeps the
// calling thread busy a few microseconds, as if the scheduler had taken its
// core away right after that store. A stretch of time orders nothing (no
// happens-before edge: the wrappers share no memory between threads), so a
// sound barrier passes as before; a barrier with a window after one of its
// stores (the flag published before the count is reset) has it held open on
// every round, and a released thread arrives inside it.
#include <dlfcn.h>
#include <sched.h>

typedef int tsan_mo;

// The test's own atomics (the workers' progress) are not stretched: set
// before the workers start, read-only while they run.
static const volatile void * own_lo, * own_hi;
static void own_atomics(const void * lo, const void * hi) {
    own_lo = lo;
    own_hi = hi;
}

static void stretch(const volatile void * a) {
    if ((const volatile char *) a >= (const volatile char *) own_lo && (const volatile char *) a < (const volatile char *) own_hi) return;
    for (volatile int i = 0; i < STRETCH_SPINS; i++) {
    }
    sched_yield();   // and let a thread that shares this core run
}
#define STORE(bits, T)                                                                             \
    void __tsan_atomic##bits##_store(volatile T * a, T v, tsan_mo mo);                             \
    static void (*real_store##bits)(volatile T *, T, tsan_mo);                                     \
    void __tsan_atomic##bits##_store(volatile T * a, T v, tsan_mo mo) {                            \
        real_store##bits(a, v, mo);                                                                \
        stretch(a);                                                                                 \
    }
#define RMW(bits, T, op)                                                                           \
    T __tsan_atomic##bits##_##op(volatile T * a, T v, tsan_mo mo);                                 \
    static T (*real_##op##bits)(volatile T *, T, tsan_mo);                                         \
    T __tsan_atomic##bits##_##op(volatile T * a, T v, tsan_mo mo) {                                \
        T old = real_##op##bits(a, v, mo);                                                         \
        stretch(a);                                                                                 \
        return old;                                                                                \
    }
#define CAS(bits, T, kind)                                                                         \
    int __tsan_atomic##bits##_compare_exchange_##kind(volatile T * a, T * c, T v, tsan_mo mo, tsan_mo fmo); \
    static int (*real_cas_##kind##bits)(volatile T *, T *, T, tsan_mo, tsan_mo);                   \
    int __tsan_atomic##bits##_compare_exchange_##kind(volatile T * a, T * c, T v, tsan_mo mo, tsan_mo fmo) { \
        int ok = real_cas_##kind##bits(a, c, v, mo, fmo);                                          \
        if (ok) stretch(a);                                                                         \
        return ok;                                                                                 \
    }
#define ALL(bits, T)                                                                               \
    STORE(bits, T) RMW(bits, T, exchange) RMW(bits, T, fetch_add) RMW(bits, T, fetch_sub)          \
    RMW(bits, T, fetch_and) RMW(bits, T, fetch_or) RMW(bits, T, fetch_xor)                         \
    CAS(bits, T, strong) CAS(bits, T, weak)
ALL(8, char)
ALL(16, short)
ALL(32, int)
ALL(64, long)

#define FIND(bits, name, ptr)                                                                      \
    do {                                                                                           \
        *(void **) &(ptr) = dlsym(RTLD_NEXT, "__tsan_atomic" #bits "_" name);                      \
        if ((ptr) == NULL) {                                                                       \
            fprintf(stderr, "no __tsan_atomic" #bits "_" name " in the sanitizer\n");              \
            abort();                                                                               \
        }                                                                                          \
    } while (0)
#define FIND_ALL(bits)                                                                             \
    FIND(bits, "store", real_store##bits);                                                         \
    FIND(bits, "exchange", real_exchange##bits);                                                   \
    FIND(bits, "fetch_add", real_fetch_add##bits);                                                 \
    FIND(bits, "fetch_sub", real_fetch_sub##bits);                                                 \
    FIND(bits, "fetch_and", real_fetch_and##bits);                                                 \
    FIND(bits, "fetch_or", real_fetch_or##bits);                                                   \
    FIND(bits, "fetch_xor", real_fetch_xor##bits);                                                 \
    FIND(bits, "compare_exchange_strong", real_cas_strong##bits);                                  \
    FIND(bits, "compare_exchange_weak", real_cas_weak##bits)

// Before main(), so before any atomic of the program runs and any thread starts.
__attribute__((constructor(101))) static void find_real_atomics(void) {
    FIND_ALL(8);
    FIND_ALL(16);
    FIND_ALL(32);
    FIND_ALL(64);
}
#else
static void own_atomics(const void * lo, const void * hi) {
    (void) lo;
    (void) hi;
}
#endif

static void * run(void * arg) {
    struct worker * w  = arg;
    struct shared * sh = w->sh;
    bool sense = false;
    for (int r = 0; r < ROUNDS; r++) {
        // A random while before arriving: now this thread is last, now another.
        for (volatile int d = (int) (mg_test_rand_u64(&w->rng) % 64); d > 0; d--) {
        }
        sh->slots[r % 2][w->ith] = r * MAX_THREADS + w->ith;
        mg_barrier_wait(sh->barrier, &sense);
        for (int j = 0; j < sh->n; j++) {
            if (sh->slots[r % 2][j] != r * MAX_THREADS + j) {   // written before the wait, not seen after it
                if (w->stale++ == 0) w->first_stale = r;
            }
        }
        atomic_store_explicit(&w->progress, r + 1, memory_order_relaxed);
    }
    atomic_store_explicit(&w->done, true, memory_order_relaxed);
    return NULL;
}

static void run_threads(int n) {
    struct shared sh = {.barrier = mg_barrier_new(n), .n = n};
    ck_assert_ptr_nonnull(sh.barrier);
    for (int i = 0; i < 2; i++) {
        for (int j = 0; j < MAX_THREADS; j++) sh.slots[i][j] = -1;
    }
    pthread_t     threads[MAX_THREADS];
    struct worker workers[MAX_THREADS];
    for (int i = 0; i < n; i++) {
        workers[i] = (struct worker) {.sh = &sh, .ith = i, .rng = 0x9e3779b97f4a7c15ull * (uint64_t) (i + 1) + (uint64_t) n,
                                      .first_stale = -1};
        atomic_init(&workers[i].progress, 0);
        atomic_init(&workers[i].done, false);
    }
    own_atomics(workers, workers + n);
    for (int i = 0; i < n; i++) ck_assert_int_eq(pthread_create(&threads[i], NULL, run, &workers[i]), 0);

    // The watchdog: a barrier that lost an arrival never opens again, so
    // the rounds stop advancing. Progress, not time, is what it watches: a
    // loaded machine makes the rounds slow, not stuck.
    int    last_total = -1;
    double still      = 0;
    for (;;) {
        int  total    = 0;
        bool all_done = true;
        for (int i = 0; i < n; i++) {
            total += atomic_load_explicit(&workers[i].progress, memory_order_relaxed);
            all_done = all_done && atomic_load_explicit(&workers[i].done, memory_order_relaxed);
        }
        if (all_done) break;
        still = total == last_total ? still + 0.05 : 0;
        last_total = total;
        if (still >= STALL_SECONDS) {
            char rounds[128] = "";
            for (int k = 0; k < n; k++) {
                char one[32];
                snprintf(one, sizeof(one), "%s%d", k ? ", " : "",
                         atomic_load_explicit(&workers[k].progress, memory_order_relaxed));
                strncat(rounds, one, sizeof(rounds) - strlen(rounds) - 1);
            }
            ck_abort_msg("%d threads: the barrier never opened again (for %d s no round ended; the threads had finished "
                         "%s of %d rounds): an arrival was lost, e.g. the others released before the count was reset",
                         n, STALL_SECONDS, rounds, ROUNDS);
        }
        nanosleep(&(struct timespec) {0, 50 * 1000 * 1000}, NULL);
    }
    for (int i = 0; i < n; i++) ck_assert_int_eq(pthread_join(threads[i], NULL), 0);
    for (int i = 0; i < n; i++) {
        ck_assert_msg(workers[i].stale == 0,
                      "%d threads: thread %d passed the barrier before a write of round %d was visible (%d stale slots "
                      "in %d rounds): passed before everybody arrived, or without acquiring what they wrote",
                      n, i, workers[i].first_stale, workers[i].stale, ROUNDS);
    }
    mg_barrier_free(sh.barrier);
}

START_TEST(functions_exist) {
    require_functions();
}
END_TEST

START_TEST(one_thread_never_waits) {
    require_functions();
    struct mg_barrier * b = mg_barrier_new(1);
    bool sense = false;
    for (int i = 0; i < 100; i++) mg_barrier_wait(b, &sense);
    mg_barrier_free(b);
}
END_TEST

START_TEST(two_threads) {
    require_functions();
    run_threads(2);
}
END_TEST

START_TEST(three_threads) {
    require_functions();
    run_threads(3);
}
END_TEST

START_TEST(four_threads) {
    require_functions();
    run_threads(4);
}
END_TEST

Suite * mg_test_suite(void) {
    Suite * s = suite_create("08_threads ex2 sense_barrier");
    TCase * tc = tcase_create("sense_barrier");
    tcase_set_timeout(tc, 300);   // the watchdog speaks first (STALL_SECONDS); this is for a loaded machine
    tcase_add_test(tc, functions_exist);   // 0 points: only a start
    tcase_add_test(tc, one_thread_never_waits);   // 0 points: a barrier of one never waits
    tcase_add_test(tc, two_threads);              // 6 points
    tcase_add_test(tc, three_threads);            // 7 points
    tcase_add_test(tc, four_threads);             // 7 points
    suite_add_tcase(s, tc);
    return s;
}
