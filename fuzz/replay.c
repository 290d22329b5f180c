// replay.c - main() for a harness built without libFuzzer: runs its entry
// point once per file named on the command line (directories: every file in
// them), the way `make test` replays tests/fuzz-regressions/. Exit 0 when
// every input passed (a failure aborts, like under libFuzzer).
#define _DEFAULT_SOURCE   // DT_REG
#include "fuzz.h"

#include <dirent.h>
#include <string.h>
#include <sys/stat.h>

static int replay_file(const char * path) {
    FILE * f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "replay: cannot open %s\n", path);
        return 1;
    }
    size_t cap = 4096, n = 0;
    uint8_t * buf = malloc(cap);
    for (size_t got; buf != NULL && (got = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += got;
        if (n == cap) buf = realloc(buf, cap *= 2);
    }
    fclose(f);
    if (buf == NULL) return 1;
    LLVMFuzzerTestOneInput(buf, n);
    free(buf);
    return 0;
}

static int cmp_str(const void * a, const void * b) {
    return strcmp(*(char * const *) a, *(char * const *) b);
}

int main(int argc, char ** argv) {
    LLVMFuzzerInitialize(&argc, &argv);
    int failed = 0, n_inputs = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
            DIR * d = opendir(argv[i]);
            char ** names = NULL;
            size_t n = 0;
            for (struct dirent * e; d != NULL && (e = readdir(d)) != NULL;) {
                if (e->d_name[0] == '.') continue;
                names = realloc(names, (n + 1) * sizeof(*names));
                names[n] = malloc(strlen(argv[i]) + strlen(e->d_name) + 2);
                sprintf(names[n++], "%s/%s", argv[i], e->d_name);
            }
            if (d != NULL) closedir(d);
            qsort(names, n, sizeof(*names), cmp_str);   // the same order every time
            for (size_t j = 0; j < n; j++) {
                failed |= replay_file(names[j]);
                n_inputs++;
                free(names[j]);
            }
            free(names);
        } else {
            failed |= replay_file(argv[i]);
            n_inputs++;
        }
    }
    printf("%s: %d inputs replayed%s\n", argv[0], n_inputs, failed ? ", some could not be read" : ", all passed");
    return failed;
}
