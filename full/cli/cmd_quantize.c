//@file full
// cmd_quantize.c - mg quantize (not yet: the quantization issue adds it).
#include "cli.h"

#include <stdio.h>

int cmd_quantize(int argc, char ** argv) {
    (void) argc;
    (void) argv;
    fprintf(stderr, "mg quantize: not yet implemented\n");
    return 1;
}
