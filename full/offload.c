//@file full
// offload.c - the weights of -ngl's layers in a device buffer (offload.h).
#include "offload.h"

#include "arena.h"
#include "kv_cache.h"

#include <stdio.h>
#include <stdlib.h>

struct moved {
    struct mg_tensor * t;
    void *             host_data;     // where its bytes were (the mapped file), put back by restore
    void *             device_data;   // its place on the device (a cache tensor's: mg_offload_keys_to_device)
};

struct mg_offload {
    mg_backend_buffer_t buf;
    struct moved *      moved;
    int                 n;
    size_t              bytes;
    struct mg_context * tied_ctx;     // the header of the tied output's copy, or NULL
    struct mg_model *   tied_model;   // whose output points at that copy
    // mg_offload_kv_cache: the cache's K and V of the offloaded layers.
    mg_backend_buffer_t kv_buf;
    struct moved *      kv_moved;
    int                 kv_n;         // tensors moved (K and V of each layer)
    size_t              kv_bytes;
};

enum { LAYER_TENSORS = 11 };

// The weights of layer il, in the order of struct mg_layer (q_norm, k_norm may be absent).
static int layer_tensors(const struct mg_layer * l, struct mg_tensor ** out) {
    struct mg_tensor * all[LAYER_TENSORS] = {l->attn_norm, l->wq,       l->wk,      l->wv,     l->wo,      l->q_norm,
                                             l->k_norm,    l->ffn_norm, l->ffn_gate, l->ffn_up, l->ffn_down};
    int n = 0;
    for (int i = 0; i < LAYER_TENSORS; i++) {
        if (all[i] != NULL) out[n++] = all[i];
    }
    return n;
}

// The layers -ngl n puts on the device: n_layer-n .. n_layer-1.
static int first_offloaded_layer(int n_layer, int n_gpu_layers) {
    return n_layer > n_gpu_layers ? n_layer - n_gpu_layers : 0;
}

// What -ngl n moves: layers n_layer-n .. n_layer-1, then the output when n > n_layer.
static int tensors_to_move(const struct mg_model * m, int n_gpu_layers, struct mg_tensor ** out) {
    const int first = first_offloaded_layer(m->hp.n_layer, n_gpu_layers);
    int       n     = 0;
    for (int il = first; il < m->hp.n_layer; il++) n += layer_tensors(&m->layers[il], out + n);
    if (n_gpu_layers > m->hp.n_layer) {
        out[n++] = m->output_norm;
        if (m->output != m->tok_embd) out[n++] = m->output;
    }
    return n;
}

// The device runs what it has shaders for (F32, and F16, Q8_0, Q4_0, Q4_K and
// Q6_K weights in the mul_mat_*.comp shaders); a weight it could not multiply
// would only be copied back to the CPU at every step, so it is refused.
static bool offloadable(enum mg_type type) {
    return type == MG_TYPE_F32 || type == MG_TYPE_F16 || type == MG_TYPE_Q8_0 || type == MG_TYPE_Q4_0 ||
           type == MG_TYPE_Q4_K || type == MG_TYPE_Q6_K;
}

static bool check_types(struct mg_tensor ** ts, int n, mg_backend_dev_t dev) {
    for (int i = 0; i < n; i++) {
        if (!offloadable(ts[i]->type)) {
            mg_set_error("%s is %s: offloading needs F32, F16, Q8_0, Q4_0, Q4_K or Q6_K weights for now "
                         "(%s has no %s shaders yet)",
                         ts[i]->name, mg_type_name(ts[i]->type), mg_backend_dev_name(dev),
                         mg_type_name(ts[i]->type));
            return false;
        }
    }
    return true;
}

static size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

// A tied output matrix is the token embeddings, which stay in host memory
// (their GET_ROWS is cheapest there). When the output is offloaded it gets a
// copy of its own in the device's memory, as llama.cpp's load_tensors
// duplicates token_embd for the output layer (TENSOR_DUPLICATED):
// m->output points at the copy until mg_offload_restore.
static bool wants_tied_copy(const struct mg_model * m, int n_gpu_layers) {
    return n_gpu_layers > m->hp.n_layer && m->output == m->tok_embd && offloadable(m->tok_embd->type);
}

static bool copy_tied_output(struct mg_offload * o, struct mg_model * m, char * at) {
    const struct mg_tensor * e = m->tok_embd;
    o->tied_ctx = mg_init((struct mg_init_params) {.mem_size = mg_tensor_overhead(), .no_alloc = true});
    if (o->tied_ctx == NULL) {
        mg_set_error("out of memory for the header of the output's copy on the device");
        return false;
    }
    struct mg_tensor * copy = mg_new_tensor(o->tied_ctx, e->type, 2, e->ne);
    mg_format_name(copy, "%s (output)", e->name);
    if (!mg_backend_tensor_alloc(o->buf, copy, at)) return false;
    mg_backend_tensor_set(copy, e->data, 0, mg_nbytes(e));
    m->output     = copy;
    o->tied_model = m;
    return true;
}

struct mg_offload * mg_offload_weights(struct mg_model * m, mg_backend_dev_t dev, int n_gpu_layers) {
    struct mg_tensor ** ts = malloc(((size_t) m->hp.n_layer * LAYER_TENSORS + 2) * sizeof *ts);
    struct mg_offload * o  = calloc(1, sizeof *o);
    if (ts == NULL || o == NULL) {
        free(ts);
        free(o);
        mg_set_error("out of memory");
        return NULL;
    }
    const int n = tensors_to_move(m, n_gpu_layers, ts);
    mg_backend_buffer_type_t buft  = mg_backend_dev_buffer_type(dev);
    const size_t             align = mg_backend_buft_get_alignment(buft);
    for (int i = 0; i < n; i++) o->bytes += align_up(mg_nbytes(ts[i]), align);
    const bool tied = wants_tied_copy(m, n_gpu_layers);
    if (tied) o->bytes += align_up(mg_nbytes(m->tok_embd), align);
    if (!check_types(ts, n, dev) || (o->moved = calloc((size_t) n + 1, sizeof *o->moved)) == NULL ||
        (o->buf = mg_backend_buft_alloc_buffer(buft, o->bytes)) == NULL) {
        free(ts);
        free(o->moved);
        free(o);
        return NULL;
    }
    char * at = mg_backend_buffer_get_base(o->buf);
    for (int i = 0; i < n; i++) {
        void * host = ts[i]->data;
        if (!mg_backend_tensor_alloc(o->buf, ts[i], at)) abort();   // sized above: cannot happen
        mg_backend_tensor_set(ts[i], host, 0, mg_nbytes(ts[i]));
        o->moved[o->n++] = (struct moved) {ts[i], host, at};
        at += align_up(mg_nbytes(ts[i]), align);
    }
    free(ts);
    if (!tied || copy_tied_output(o, m, at)) return o;
    mg_offload_restore(o);   // the copy's header could not be made
    return NULL;
}

// The cache of every offloaded layer in one device buffer, zeroed as the
// host cache is (a masked position's value is multiplied by 0, and 0 times
// leftover bytes read as NaN would be NaN). llama.cpp's llama_kv_cache makes
// each layer's K and V in the buffer type of the device its layer is on; the
// other layers' cache stays in host memory. The moved layers keep their host
// bytes (kv->buf holds every layer): the K-shift, which the CPU computes,
// works there (mg_offload_keys_to_host).
bool mg_offload_kv_cache(struct mg_offload * o, struct mg_kv_cache * kv, mg_backend_dev_t dev, int n_gpu_layers) {
    const int                first = first_offloaded_layer(kv->n_layer, n_gpu_layers);
    mg_backend_buffer_type_t buft  = mg_backend_dev_buffer_type(dev);
    const size_t             align = mg_backend_buft_get_alignment(buft);
    if (first >= kv->n_layer) return true;   // no layer offloaded (-ngl 0)
    size_t bytes = 0;
    for (int il = first; il < kv->n_layer; il++) bytes += align_up(mg_nbytes(kv->k[il]), align) +
                                                          align_up(mg_nbytes(kv->v[il]), align);
    o->kv_moved = calloc(2 * (size_t) (kv->n_layer - first), sizeof *o->kv_moved);
    if (o->kv_moved == NULL) {
        mg_set_error("out of memory");
        return false;
    }
    char cause[256];
    if ((o->kv_buf = mg_backend_buft_alloc_buffer(buft, bytes)) == NULL) {
        snprintf(cause, sizeof cause, "%s", mg_last_error());
        mg_set_error("the KV cache of layers %d..%d, %zu bytes, does not fit on %s (%s); use a smaller -c (n_ctx) or "
                     "-ngl", first, kv->n_layer - 1, bytes, mg_backend_dev_name(dev), cause);
        return false;
    }
    mg_backend_buffer_clear(o->kv_buf, 0);
    char * at = mg_backend_buffer_get_base(o->kv_buf);
    for (int il = first; il < kv->n_layer; il++) {
        struct mg_tensor * kv_of_layer[2] = {kv->k[il], kv->v[il]};
        for (int j = 0; j < 2; j++) {
            struct mg_tensor * t = kv_of_layer[j];
            o->kv_moved[o->kv_n++] = (struct moved) {t, t->data, at};
            if (!mg_backend_tensor_alloc(o->kv_buf, t, at)) abort();   // sized above: cannot happen
            at += align_up(mg_nbytes(t), align);
        }
    }
    o->kv_bytes = bytes;
    return true;
}

// The K-shift, a computation of the host's, reads and writes the keys in the
// host bytes the moved layers still have: the device's keys go there first,
// and come back after (ggml_backend_tensor_get, _set). V is not touched, so
// it stays where it is. kv_moved holds each layer's K, then its V.
void mg_offload_keys_to_host(struct mg_offload * o) {
    for (int i = 0; i < o->kv_n; i += 2) {
        struct mg_tensor * t = o->kv_moved[i].t;
        mg_backend_tensor_get(t, o->kv_moved[i].host_data, 0, mg_nbytes(t));
        t->data   = o->kv_moved[i].host_data;
        t->buffer = NULL;
    }
}

void mg_offload_keys_to_device(struct mg_offload * o) {
    for (int i = 0; i < o->kv_n; i += 2) {
        struct mg_tensor * t = o->kv_moved[i].t;
        if (!mg_backend_tensor_alloc(o->kv_buf, t, o->kv_moved[i].device_data)) abort();   // its own place again
        mg_backend_tensor_set(t, o->kv_moved[i].host_data, 0, mg_nbytes(t));
    }
}

void mg_offload_restore(struct mg_offload * o) {
    if (o == NULL) return;
    for (int i = 0; i < o->kv_n; i++) {   // back to their host bytes (the values the device held are gone)
        o->kv_moved[i].t->data   = o->kv_moved[i].host_data;
        o->kv_moved[i].t->buffer = NULL;
    }
    mg_backend_buffer_free(o->kv_buf);
    free(o->kv_moved);
    for (int i = 0; i < o->n; i++) {
        o->moved[i].t->data   = o->moved[i].host_data;
        o->moved[i].t->buffer = NULL;
    }
    if (o->tied_model != NULL) o->tied_model->output = o->tied_model->tok_embd;
    mg_free(o->tied_ctx);
    mg_backend_buffer_free(o->buf);
    free(o->moved);
    free(o);
}

int    mg_offload_n_tensors(const struct mg_offload * o) { return o->n; }
size_t mg_offload_bytes(const struct mg_offload * o) { return o->bytes; }
int    mg_offload_kv_layers(const struct mg_offload * o) { return o->kv_n / 2; }
size_t mg_offload_kv_bytes(const struct mg_offload * o) { return o->kv_bytes; }
