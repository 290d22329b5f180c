//@file full
// cmd_info.c - mg info: what is inside a GGUF file, without loading a model.
#include "cli.h"
#include "gguf.h"
#include "memmap.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static const char * usage =
    "usage: mg info FILE.gguf [--tensors-only | --metadata-only]\n"
    "\n"
    "Prints the header, every metadata key with its type and value, and the tensor table\n"
    "(name, type, shape, bytes, offset). Works for any valid GGUF, including types this engine\n"
    "cannot compute.";

// A key or tensor name from the file, left-aligned in width columns:
// through cli_print_text, since a hostile file's names may hold ESC sequences
// (the values are escaped by mg_gguf_kv_to_string already).
static void print_name(const char * name, int width) {
    const size_t len = strlen(name);
    cli_print_text(name, len);
    printf("%*s", len < (size_t) width ? width - (int) len : 0, "");
}

static void print_metadata(const struct mg_gguf * g) {
    printf("\nmetadata: %lld keys\n", (long long) mg_gguf_n_kv(g));
    char value[200];
    for (int64_t i = 0; i < mg_gguf_n_kv(g); i++) {
        mg_gguf_kv_to_string(g, i, value, sizeof(value));
        printf("  ");
        print_name(mg_gguf_key(g, i), 44);
        printf(" %-4s ", mg_gguf_type_name(mg_gguf_kv_type(g, i)));
        cli_print_text(value, strlen(value));   // C1 controls are not escaped there
        printf("\n");
    }
}

static void print_tensors(const struct mg_gguf * g) {
    printf("\ntensors: %lld\n", (long long) mg_gguf_n_tensors(g));
    printf("  %4s  %-32s %-8s %-26s %12s %12s\n", "#", "name", "type", "shape", "bytes", "offset");
    int64_t n_elements = 0;
    size_t  n_bytes    = 0;
    for (int64_t i = 0; i < mg_gguf_n_tensors(g); i++) {
        const struct mg_gguf_tensor_info * t = mg_gguf_tensor(g, i);
        char shape[MG_SHAPE_STR_MAX];
        mg_shape_str(t->ne, t->n_dims, ", ", shape, sizeof(shape));
        const char * type = mg_gguf_ggml_type_name(t->type);
        printf("  %4lld  ", (long long) i);
        print_name(t->name, 32);
        printf(" %-8s %-26s %12zu %12" PRIu64 "%s\n", type ? type : "?", shape, t->nbytes, t->offset,
               mg_type_is_supported(t->type) ? "" : "  (not supported here)");
        n_elements += t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
        n_bytes += t->nbytes;
    }
    printf("total: %" PRId64 " elements in %zu bytes (%.2f MiB, %.3f bits per weight)\n", n_elements, n_bytes,
           mg_mib(n_bytes), n_elements ? 8.0 * (double) n_bytes / (double) n_elements : 0.0);
}

int cmd_info(int argc, char ** argv) {
    bool tensors_only = false, metadata_only = false;
    const struct cli_option opts[] = {
        {NULL, "--tensors-only", CLI_FLAG, &tensors_only, "only the tensor table"},
        {NULL, "--metadata-only", CLI_FLAG, &metadata_only, "only the metadata"},
    };
    const char * positional[1];
    int n_positional;
    if (!cli_parse(argc, argv, usage, opts, 2, positional, 1, &n_positional)) return 1;
    if (n_positional != 1) {
        fprintf(stderr, "mg info: give one GGUF file (see mg info --help)\n");
        return 1;
    }
    if (!cli_not_both("info", tensors_only, "--tensors-only", metadata_only, "--metadata-only")) return 1;   // printed the header alone
    struct mg_gguf * g = mg_gguf_open(positional[0]);
    if (g == NULL) {
        fprintf(stderr, "mg info: %s\n", cli_last_error());
        return 1;
    }
    printf("%s: GGUF v%u, %zu bytes, alignment %zu, data at byte %zu\n", positional[0], mg_gguf_version(g),
           mg_gguf_file_size(g), mg_gguf_alignment(g), mg_gguf_data_offset(g));
    if (!tensors_only) print_metadata(g);
    if (!metadata_only) print_tensors(g);
    mg_gguf_close(g);
    return 0;
}
