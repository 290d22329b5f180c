//@file full
// npy.c - write and read float32 .npy files (see npy.h).
#include "npy.h"
#include "outfile.h"
#include "tensor.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char npy_magic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

bool mg_npy_write_f32(const char * path, const float * data, int n_dims, const int64_t * shape) {
    MG_ASSERT(n_dims >= 1 && n_dims <= MG_NPY_MAX_DIMS);
    char   dims[128] = "";
    size_t used      = 0;
    size_t n         = 1;
    for (int d = 0; d < n_dims; d++) {
        // A one-axis shape is written (N,), as Python spells a 1-tuple.
        used += (size_t) snprintf(dims + used, sizeof(dims) - used, "%lld%s", (long long) shape[d],
                                  n_dims == 1 ? "," : d + 1 < n_dims ? ", " : "");
        n *= (size_t) shape[d];
    }
    char header[256];
    int  len = snprintf(header, sizeof(header), "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }", dims);
    // Pad with spaces so that preamble + dict + '\n' is a multiple of 64 bytes.
    const int total = (10 + len + 1 + 63) / 64 * 64;
    while (10 + len < total - 1) header[len++] = ' ';
    header[len++] = '\n';
    const unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char) (len & 0xff),
                                   (unsigned char) (len >> 8)};
    struct mg_outfile out;   // a temporary file renamed over path (outfile.h): a planted symlink is replaced, not followed
    FILE * f = mg_outfile_open(&out, path);
    if (f == NULL) return false;
    // The data is little-endian float32: the host's floats on the machines this engine runs on.
    const bool ok = fwrite(pre, 1, sizeof(pre), f) == sizeof(pre) && fwrite(header, 1, (size_t) len, f) == (size_t) len &&
                    fwrite(data, sizeof(float), n, f) == n;
    if (!ok) {
        mg_set_error("cannot write %s: %s", path, strerror(errno));
        mg_outfile_abort(&out);
        return false;
    }
    return mg_outfile_commit(&out);
}

// The value of 'key' in the header dict: the text right after "'key':".
static const char * dict_value(const char * dict, const char * key) {
    char quoted[32];
    snprintf(quoted, sizeof(quoted), "'%s':", key);
    const char * p = strstr(dict, quoted);
    if (p == NULL) return NULL;
    p += strlen(quoted);
    while (*p == ' ') p++;
    return p;
}

// "(18, 256)" or "(6400,)" or "()" into shape[]; false if it is not a tuple of numbers.
static bool parse_shape(const char * p, struct mg_npy * a) {
    if (*p++ != '(') return false;
    a->n_dims = 0;
    a->n      = 1;
    while (*p == ' ') p++;
    while (*p != ')') {
        char * end;
        const long long v = strtoll(p, &end, 10);
        if (end == p || v < 0 || a->n_dims == MG_NPY_MAX_DIMS) return false;
        a->shape[a->n_dims++] = v;
        a->n *= v;
        p = end;
        while (*p == ' ') p++;
        if (*p == ',') p++;
        while (*p == ' ') p++;
        if (*p == '\0') return false;
    }
    return true;
}

bool mg_npy_read_f32(const char * path, struct mg_npy * a) {
    memset(a, 0, sizeof(*a));
    FILE * f = fopen(path, "rb");
    if (f == NULL) {
        mg_set_error("cannot open %s: %s", path, strerror(errno));
        return false;
    }
    unsigned char pre[10];
    char          dict[65536];
    bool          ok  = fread(pre, 1, sizeof(pre), f) == sizeof(pre) && memcmp(pre, npy_magic, 6) == 0 && pre[6] == 1;
    const size_t  len = ok ? (size_t) pre[8] | (size_t) pre[9] << 8 : 0;
    if (!ok) {
        mg_set_error("%s: not a .npy file of format 1.x (no \\x93NUMPY magic at offset 0)", path);
    } else if (fread(dict, 1, len, f) != len) {
        mg_set_error("%s: the header of %zu bytes at offset 10 is cut short", path, len);
        ok = false;
    } else {
        dict[len]               = '\0';
        const char * descr      = dict_value(dict, "descr");
        const char * fortran    = dict_value(dict, "fortran_order");
        const char * shape_text = dict_value(dict, "shape");
        if (descr == NULL || strncmp(descr, "'<f4'", 5) != 0) {
            mg_set_error("%s: descr is not '<f4' (only little-endian float32 is read)", path);
            ok = false;
        } else if (fortran == NULL || strncmp(fortran, "False", 5) != 0) {
            mg_set_error("%s: fortran_order is not False", path);
            ok = false;
        } else if (shape_text == NULL || !parse_shape(shape_text, a)) {
            mg_set_error("%s: the shape in the header is not a tuple of at most %d sizes", path, MG_NPY_MAX_DIMS);
            ok = false;
        }
    }
    if (ok) {
        a->data = malloc((size_t) (a->n > 0 ? a->n : 1) * sizeof(float));
        if (a->data == NULL || fread(a->data, sizeof(float), (size_t) a->n, f) != (size_t) a->n) {
            mg_set_error("%s: fewer than the %lld float32 values its shape says after offset %zu", path,
                         (long long) a->n, 10 + len);
            ok = false;
        }
    }
    fclose(f);
    if (!ok) mg_npy_free(a);
    return ok;
}

void mg_npy_free(struct mg_npy * a) {
    free(a->data);
    a->data = NULL;
}

// ---------------------------------------------------------------------------
// Graph dumps
// ---------------------------------------------------------------------------

bool mg_npy_write_tensor(const char * path, const struct mg_tensor * t) {
    const int n_dims = mg_n_dims(t);
    int64_t   shape[MG_NPY_MAX_DIMS];
    for (int d = 0; d < n_dims; d++) shape[d] = t->ne[n_dims - 1 - d];
    float * v = malloc((size_t) mg_nelements(t) * sizeof(float));
    if (v == NULL) {
        mg_set_error("cannot write %s: out of memory", path);
        return false;
    }
    size_t k = 0;
    for (int64_t i3 = 0; i3 < t->ne[3]; i3++) {
        for (int64_t i2 = 0; i2 < t->ne[2]; i2++) {
            for (int64_t i1 = 0; i1 < t->ne[1]; i1++) {
                for (int64_t i0 = 0; i0 < t->ne[0]; i0++) v[k++] = mg_get_f32_nd(t, i0, i1, i2, i3);
            }
        }
    }
    const bool ok = mg_npy_write_f32(path, v, n_dims, shape);
    free(v);
    return ok;
}

bool mg_npy_dumper_open(struct mg_npy_dumper * d, const char * dir) {
    memset(d, 0, sizeof(*d));
    snprintf(d->dir, sizeof(d->dir), "%s", dir);
    char path[1100];
    snprintf(path, sizeof(path), "%s/order.txt", dir);
    struct mg_outfile * order = malloc(sizeof(*order));
    d->order = order;
    if (order == NULL || mg_outfile_open(order, path) == NULL) {
        if (order == NULL) mg_set_error("%s: out of memory", path);
        free(order);
        d->order = NULL;
        return false;
    }
    d->active = true;
    return true;
}

void mg_npy_dumper_close(struct mg_npy_dumper * d) {
    struct mg_outfile * order = d->order;
    if (order != NULL && !mg_outfile_commit(order)) d->n_failed++;   // the list of what was written, whatever the run did
    free(order);
    free(d->names);
    d->order = NULL;
    d->names = NULL;
}

// How many names written so far are `base` or `base.N`.
static int times_seen(const struct mg_npy_dumper * d, const char * base) {
    const size_t bl = strlen(base);
    int          n  = 0;
    for (int i = 0; i < d->n_written; i++) {
        n += strncmp(d->names[i], base, bl) == 0 && (d->names[i][bl] == '\0' || d->names[i][bl] == '.');
    }
    return n;
}

void mg_npy_dump_node(const struct mg_tensor * node, void * user) {
    struct mg_npy_dumper * d = user;
    const bool readable = node->type == MG_TYPE_F32 || node->type == MG_TYPE_F16 || node->type == MG_TYPE_BF16;
    if (!d->active || !readable || node->name[0] == '\0' || mg_op_is_view(node->op)) return;
    if (d->n_written == d->names_cap) {
        d->names_cap = d->names_cap ? 2 * d->names_cap : 256;
        d->names     = realloc(d->names, (size_t) d->names_cap * sizeof(d->names[0]));
        MG_ASSERT(d->names != NULL);
    }
    // File names: the node's name with characters a path cannot hold replaced.
    char base[64];
    size_t k = 0;
    for (const char * c = node->name; *c && k + 1 < sizeof(base); c++) {
        base[k++] = (*c == ' ' || *c == '/' || *c == '(' || *c == ')') ? '_' : *c;
    }
    base[k] = '\0';
    const int seen = times_seen(d, base);
    char * name = d->names[d->n_written];
    if (seen == 0) snprintf(name, sizeof(d->names[0]), "%s", base);
    else snprintf(name, sizeof(d->names[0]), "%s.%d", base, seen);
    char path[1200];
    snprintf(path, sizeof(path), "%s/%s.npy", d->dir, name);
    if (!mg_npy_write_tensor(path, node)) {
        d->n_failed++;
        return;
    }
    fprintf(((struct mg_outfile *) d->order)->f, "%s\n", name);
    d->n_written++;
}
