//@file full
// offload.h - -ngl N: the weights of the model's last N layers (and, when N
// is more than the layers, the output norm and matrix) copied into a device's
// memory, so that the scheduler runs their ops there (llama.cpp:
// llama_model::load_tensors, n_gpu_layers and i_gpu_start = n_layer - N).
//
//     struct mg_offload * o = mg_offload_weights(model, dev, 99);   // every layer, and the output
//     mg_offload_kv_cache(o, kv, dev, 99);                          // their KV cache too
//     ...a session whose scheduler has dev's backend first...
//     mg_offload_restore(o);                                        // the model as it was
//
// The token embeddings stay in host memory, as in llama.cpp: their op is a
// row lookup, cheapest where the token ids are. A tied output matrix (the
// embeddings again) gets a copy of its own on the device, as llama.cpp
// duplicates it: model->output points at that copy until mg_offload_restore.
#pragma once

#include "backend.h"
#include "model.h"

struct mg_offload;
struct mg_kv_cache;

// NULL, with mg_last_error() naming the tensor, for a weight of a type the
// device's backend has no shader for (the Vulkan backend: see offload.c)
// or when its memory runs out; the model is unchanged then.
struct mg_offload * mg_offload_weights(struct mg_model * m, mg_backend_dev_t dev, int n_gpu_layers);

// Every moved weight back at its host bytes (still mapped), the device buffer freed. NULL is fine.
void mg_offload_restore(struct mg_offload * o);

// The KV cache of the same layers into the device's memory too (llama.cpp:
// llama_kv_cache puts each layer's K and V in its layer's device), zeroed,
// so that the stores into the cache and the attention over it run on the
// device; the other layers' cache stays in host memory. Put back by
// mg_offload_restore, with o's weights. False, with mg_last_error(), when
// the device's memory runs out.
bool mg_offload_kv_cache(struct mg_offload * o, struct mg_kv_cache * kv, mg_backend_dev_t dev, int n_gpu_layers);

// For the K-shift, which the CPU computes on the cached keys: the moved
// layers' keys copied into the host bytes they kept and their tensors
// pointed there, then copied back to the same places on the device (views
// made before, like a reused decode graph's, stay valid).
void mg_offload_keys_to_host(struct mg_offload * o);
void mg_offload_keys_to_device(struct mg_offload * o);

int    mg_offload_n_tensors(const struct mg_offload * o);
size_t mg_offload_bytes(const struct mg_offload * o);
int    mg_offload_kv_layers(const struct mg_offload * o);   // layers whose cache is on the device
size_t mg_offload_kv_bytes(const struct mg_offload * o);
