//@file full
// memmap.h - the whole memory of a run, region by region, with the pointers
// between them: the picture of the engine's memory model, measured.
//
//     struct mg_memory_model mm;
//     mg_session_memory_model(s, &mm);          // session.h: after a decode
//     mg_memory_model_print(stderr, &mm);       // the table in mg run's summary
//     mg_memory_model_dump_svg(&mm, "mem.svg"); // mg run --memory-map mem.svg
//
// Tensor headers (struct mg_tensor) live in arenas (chapter 02): the model's
// weights in one, each graph's nodes in another. A header's data pointer goes
// somewhere else: a weight's into the mapped GGUF file (or into the repacked
// copy of its rows), a node's into the compute buffer the graph allocator
// planned (chapter 05), a view of the cache into the KV cache (chapter 06).
// A repacked weight has a second pointer, to its copy (tensor->repacked).
// The work buffer (chapter 07) is reached through the plan, not a tensor.
// The counts of those pointers are measured by walking every header and
// asking which region its data lies in.
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct mg_context;

enum mg_mem_region {
    MG_MEM_MODEL_HEADERS,   // the weights' tensor headers (the model's arena)
    MG_MEM_MAPPED_FILE,     // the GGUF file, mapped: every weight's bytes as stored
    MG_MEM_REPACKED,        // copies of Q4_0/Q4_K/Q2_K weights with rows interleaved by 8 (repack.h)
    MG_MEM_GRAPH_HEADERS,   // the current graph's tensor headers (its arena)
    MG_MEM_COMPUTE,         // the compute buffer: every intermediate result (galloc's peak)
    MG_MEM_WORK,            // the work buffer: per-node scratch (the plan's max)
    MG_MEM_KV,              // the KV cache
    MG_MEM_N,
};

struct mg_memory_region {
    const char * name;
    const void * base;   // NULL: not one block we can point into (the arenas' headers)
    size_t       bytes;
};

struct mg_memory_model {
    struct mg_memory_region region[MG_MEM_N];
    int n_tensors[MG_MEM_N];            // headers in each header region
    int pointers[MG_MEM_N][MG_MEM_N];   // [from][to]: headers in `from` whose data lies in `to`
};

// Count where the data of every tensor of ctx lies, as pointers from region
// `from`. The regions' base and bytes must be filled in first.
void mg_memory_model_count(struct mg_memory_model * mm, const struct mg_context * ctx, enum mg_mem_region from);

// The region holding address p, or MG_MEM_N if none does.
enum mg_mem_region mg_memory_model_find(const struct mg_memory_model * mm, const void * p);

// Bytes in MiB (2^20), the unit of every size mg prints beside the bytes.
static inline double mg_mib(size_t bytes) {
    return (double) bytes / (1024.0 * 1024.0);
}

// The most memory one buffer of this process can ever have resident: the
// machine's physical memory, or the process's address-space or data limit
// (ulimit -v, ulimit -d) when lower; *what names which (for messages).
// Checked before a buffer sized from user input is allocated (the KV cache,
// mkmodel's weights): with overcommit a calloc beyond it may succeed and the
// process be killed later.
uint64_t mg_memory_limit(const char ** what);

void mg_memory_model_print(FILE * f, const struct mg_memory_model * mm);
bool mg_memory_model_dump_svg(const struct mg_memory_model * mm, const char * path);
