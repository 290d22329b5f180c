//@file full
// offload.h - -ngl N: the weights of the model's last N layers (and, when N
// is more than the layers, the output norm and matrix) copied into a device's
// memory, so that the scheduler runs their ops there (llama.cpp:
// llama_model::load_tensors, n_gpu_layers and i_gpu_start = n_layer - N).
//
//     struct mg_offload * o = mg_offload_weights(model, dev, 99);   // every layer, and the output
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

// NULL, with mg_last_error() naming the tensor, for a weight of a type the
// device's backend has no shader for (the Vulkan backend: see offload.c)
// or when its memory runs out; the model is unchanged then.
struct mg_offload * mg_offload_weights(struct mg_model * m, mg_backend_dev_t dev, int n_gpu_layers);

// Every moved weight back at its host bytes (still mapped), the device buffer freed. NULL is fine.
void mg_offload_restore(struct mg_offload * o);

int    mg_offload_n_tensors(const struct mg_offload * o);
size_t mg_offload_bytes(const struct mg_offload * o);
