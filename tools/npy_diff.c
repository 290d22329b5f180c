// npy_diff.c - the first tensor, in graph order, where two tensor dumps part.
//
//     npy_diff [--tol T] [--all] DIR_A DIR_B
//
// DIR_A and DIR_B are folders written by `mg logits --dump-tensors` or by
// tools/llama-ref (llama.cpp's side): NAME.npy files of float32 and an
// order.txt listing the names in the order the graph computed them. For each
// name of DIR_A/order.txt that DIR_B also has with the same shape, the largest
// |a - b| is found; the first tensor where it exceeds T (default 1e-5) is
// printed with the position of that difference and both values, and the exit
// status is 1. Names only one side has, or with other shapes (the two graphs
// need not lay out every node alike), are listed and skipped; two shapes of
// as many values are compared as flat arrays, and two that differ only in
// the innermost size (a cache padded to 32 or 256) on their common part. --all prints
// every compared tensor's largest difference, not only the first one over T.
// Exit 0: nothing over T; 1: a difference; 2: bad arguments or files.
//
// Why the first one: one op that rounds differently changes everything after
// it, so the first tensor over the tolerance names the op to look at.
#include "npy.h"
#include "tensor.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char * usage = "usage: npy_diff [--tol T] [--all] DIR_A DIR_B\n";

// The shape as "(18, 256)".
static void shape_text(const struct mg_npy * a, char * out, size_t size) {
    size_t k = (size_t) snprintf(out, size, "(");
    for (int d = 0; d < a->n_dims && k < size; d++) {
        k += (size_t) snprintf(out + k, size - k, "%s%lld", d ? ", " : "", (long long) a->shape[d]);
    }
    if (k < size) snprintf(out + k, size - k, ")");
}

// The flat index i as a position in the shape, outermost first: "[3, 17]".
static void position_text(const struct mg_npy * a, int64_t i, char * out, size_t size) {
    int64_t idx[MG_NPY_MAX_DIMS];
    for (int d = a->n_dims - 1; d >= 0; d--) {
        idx[d] = a->shape[d] > 0 ? i % a->shape[d] : 0;
        i      = a->shape[d] > 0 ? i / a->shape[d] : 0;
    }
    size_t k = (size_t) snprintf(out, size, "[");
    for (int d = 0; d < a->n_dims && k < size; d++) {
        k += (size_t) snprintf(out + k, size - k, "%s%lld", d ? ", " : "", (long long) idx[d]);
    }
    if (k < size) snprintf(out + k, size - k, "]");
}

static bool same_shape(const struct mg_npy * a, const struct mg_npy * b) {
    if (a->n_dims != b->n_dims) return false;
    for (int d = 0; d < a->n_dims; d++) {
        if (a->shape[d] != b->shape[d]) return false;
    }
    return true;
}

// Shapes equal but for the innermost axis (a cache length padded to 32 on
// one side, to 256 on the other): its common part is compared.
static bool same_but_inner(const struct mg_npy * a, const struct mg_npy * b) {
    if (a->n_dims != b->n_dims || a->n_dims == 0) return false;
    for (int d = 0; d + 1 < a->n_dims; d++) {
        if (a->shape[d] != b->shape[d]) return false;
    }
    return true;
}

// The largest |a - b| and where (a flat index of a); a NaN on one side only
// counts as infinite. inner_a and inner_b are the innermost sizes: only the
// first min(inner_a, inner_b) values of each innermost row are compared.
static double max_diff(const struct mg_npy * a, const struct mg_npy * b, int64_t inner_a, int64_t inner_b,
                       int64_t * where) {
    double        worst = 0.0;
    const int64_t inner = inner_a < inner_b ? inner_a : inner_b;
    *where              = 0;
    for (int64_t i = 0; i < a->n; i++) {
        const int64_t row = i / inner_a, col = i % inner_a;
        if (col >= inner) continue;
        const double x = a->data[i], y = b->data[row * inner_b + col];
        double       d = fabs(x - y);
        if (isnan(x) != isnan(y)) d = INFINITY;
        if (isnan(x) && isnan(y)) d = 0.0;
        if (x == y) d = 0.0;   // equal infinities
        if (d > worst) {
            worst  = d;
            *where = i;
        }
    }
    return worst;
}

int main(int argc, char ** argv) {
    double       tol = 1e-5;
    bool         all = false;
    const char * dirs[2];
    int          n_dirs = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--tol") == 0 && i + 1 < argc) {
            char * end;
            tol = strtod(argv[++i], &end);
            if (*end != '\0' || !(tol >= 0)) {
                fprintf(stderr, "npy_diff: --tol needs a number >= 0, got '%s'\n", argv[i]);
                return 2;
            }
        } else if (strcmp(argv[i], "--all") == 0) {
            all = true;
        } else if (argv[i][0] != '-' && n_dirs < 2) {
            dirs[n_dirs++] = argv[i];
        } else {
            fprintf(stderr, "npy_diff: unexpected argument '%s'\n%s", argv[i], usage);
            return 2;
        }
    }
    if (n_dirs != 2) {
        fputs(usage, stderr);
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof(path), "%s/order.txt", dirs[0]);
    FILE * order = fopen(path, "r");
    if (order == NULL) {
        fprintf(stderr, "npy_diff: cannot open %s (is %s a tensor dump?)\n", path, dirs[0]);
        return 2;
    }
    int  status = 0, n_compared = 0, n_skipped = 0;
    char name[512];
    while (fgets(name, sizeof(name), order) != NULL) {
        name[strcspn(name, "\r\n")] = '\0';
        if (name[0] == '\0') continue;
        struct mg_npy a, b;
        snprintf(path, sizeof(path), "%s/%s.npy", dirs[0], name);
        if (!mg_npy_read_f32(path, &a)) {
            fprintf(stderr, "npy_diff: %s\n", mg_last_error());
            status = 2;
            break;
        }
        snprintf(path, sizeof(path), "%s/%s.npy", dirs[1], name);
        char sa[96], sb[96];
        if (!mg_npy_read_f32(path, &b)) {
            printf("  %-24s only in %s\n", name, dirs[0]);
            mg_npy_free(&a);
            n_skipped++;
            continue;
        }
        shape_text(&a, sa, sizeof(sa));
        shape_text(&b, sb, sizeof(sb));
        // Other shapes of as many values (a cont before or after a reshape) are compared as flat arrays.
        const bool    flat    = !same_shape(&a, &b) && a.n == b.n;
        const bool    partial = !same_shape(&a, &b) && !flat && same_but_inner(&a, &b);
        const int64_t inner_a = partial ? a.shape[a.n_dims - 1] : a.n;
        const int64_t inner_b = partial ? b.shape[b.n_dims - 1] : b.n;
        if (!same_shape(&a, &b) && !flat && !partial) {
            printf("  %-24s shapes differ: %s and %s, skipped\n", name, sa, sb);
            n_skipped++;
        } else {
            int64_t      at;
            const double d = max_diff(&a, &b, inner_a, inner_b, &at);
            char         pos[96];
            position_text(&a, at, pos, sizeof(pos));
            n_compared++;
            if (all || d > tol) {
                char note[128] = "";
                if (flat) snprintf(note, sizeof(note), ", compared flat with %s", sb);
                if (partial) snprintf(note, sizeof(note), ", the first %lld of each row of %s", (long long) (inner_a < inner_b ? inner_a : inner_b), sb);
                const int64_t at_b = at / inner_a * inner_b + at % inner_a;
                printf("%s %-24s %-16s max |diff| %.6g at %s (%.9g vs %.9g%s)\n", d > tol ? "!" : " ", name, sa, d,
                       pos, (double) a.data[at], (double) b.data[at_b], note);
            }
            if (d > tol && status == 0) {
                printf("first tensor over %g: %s, max |diff| %.6g at %s\n", tol, name, d, pos);
                status = 1;
                if (!all) {
                    mg_npy_free(&a);
                    mg_npy_free(&b);
                    break;
                }
            }
        }
        mg_npy_free(&a);
        mg_npy_free(&b);
    }
    fclose(order);
    if (status == 0) printf("%d tensors within %g (%d skipped)\n", n_compared, tol, n_skipped);
    return status;
}
