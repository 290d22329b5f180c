// bandwidth.c - the machine's read bandwidth, STREAM-style, to hold decode against.
//
// Generating one token reads every weight once, so decode speed is bounded by
// how fast a core (or two) can stream memory. This measures that bound the way
// STREAM's read-only kernels do: each thread sums its own slice of an array far
// larger than the caches, best of several passes, bytes counted once (no
// write-allocate traffic: nothing is written). It prints one line per thread
// count, "threads GB/s", which `mg bench --bandwidth FILE` reads. The array
// asks for 2 MiB pages (transparent huge pages), as the engine's weights do
// (full/mmap.c): with 4 KiB pages a stream misses the TLB every page, and the
// bound would be that of a slower memory than the one decode reads.
//
//     cc -O2 -march=native -pthread tools/bandwidth.c -o build/bandwidth
//     build/bandwidth 1,2 > build/bandwidth.txt
#define _DEFAULT_SOURCE   // madvise
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

enum {
    ARRAY_BYTES = 1 << 30,   // 1 GiB: 30x this machine's L3
    PASSES      = 8,         // the first warms the pages and the TLB
    MAX_THREADS = 64,
};

struct slice {
    const uint64_t * data;
    size_t           n;
    uint64_t         sum;   // kept, so the compiler cannot drop the reads
};

// Eight independent sums: the adds vectorize, and no chain limits the loads.
static void * sum_slice(void * arg) {
    struct slice * s = arg;
    uint64_t acc[8] = {0};
    for (size_t i = 0; i + 8 <= s->n; i += 8) {
        for (int k = 0; k < 8; k++) acc[k] += s->data[i + k];
    }
    s->sum = 0;
    for (int k = 0; k < 8; k++) s->sum += acc[k];
    return NULL;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double) t.tv_sec + 1e-9 * (double) t.tv_nsec;
}

// One pass: every thread reads its share once. Seconds.
static double pass(const uint64_t * data, size_t n, int n_threads, uint64_t * check) {
    pthread_t    tid[MAX_THREADS];
    struct slice sl[MAX_THREADS];
    const size_t per = n / (size_t) n_threads;
    const double t0  = now_s();
    for (int t = 0; t < n_threads; t++) {
        sl[t] = (struct slice) {data + (size_t) t * per, per, 0};
        pthread_create(&tid[t], NULL, sum_slice, &sl[t]);
    }
    for (int t = 0; t < n_threads; t++) {
        pthread_join(tid[t], NULL);
        *check += sl[t].sum;
    }
    return now_s() - t0;
}

int main(int argc, char ** argv) {
    const char * list = argc > 1 ? argv[1] : "1,2";
    const size_t n    = ARRAY_BYTES / sizeof(uint64_t);
    uint64_t *   data = aligned_alloc((size_t) 2 << 20, ARRAY_BYTES);
    if (data == NULL) {
        fprintf(stderr, "bandwidth: cannot allocate %d bytes\n", ARRAY_BYTES);
        return 1;
    }
#if defined(MADV_HUGEPAGE)
    (void) madvise(data, ARRAY_BYTES, MADV_HUGEPAGE);   // a hint: 4 KiB pages where the kernel has none
#endif
    for (size_t i = 0; i < n; i++) data[i] = i;   // touched: real pages, not the zero page
    printf("# read bandwidth, STREAM-style sum over %d MiB, best of %d passes (tools/bandwidth.c)\n",
           ARRAY_BYTES >> 20, PASSES - 1);
    printf("# threads GB/s\n");
    uint64_t check = 0;
    for (const char * p = list; *p;) {
        char *     end;
        const long t = strtol(p, &end, 10);
        if (end == p || t < 1 || t > MAX_THREADS) {
            fprintf(stderr, "bandwidth: thread counts like 1,2 (each 1..%d), not \"%s\"\n", MAX_THREADS, list);
            return 1;
        }
        double best = 1e30;
        for (int r = 0; r < PASSES; r++) {
            const double s = pass(data, n, (int) t, &check);
            if (r > 0 && s < best) best = s;
        }
        printf("%ld %.1f\n", t, (double) ARRAY_BYTES / best / 1e9);
        fflush(stdout);
        p = *end == ',' ? end + 1 : end;
    }
    free(data);
    return check == 42 ? 2 : 0;   // never 42 for this data; uses the sum
}
