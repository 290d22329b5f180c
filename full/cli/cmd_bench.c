//@file full
// cmd_bench.c - mg bench (not yet: the fast-kernels issue adds it).
#include "cli.h"

#include <stdio.h>

int cmd_bench(int argc, char ** argv) {
    (void) argc;
    (void) argv;
    fprintf(stderr, "mg bench: not yet implemented\n");
    return 1;
}
