//@file 01
// mg.h - everything a program using the engine includes.
#pragma once

#include "tensor.h"
#include "quants.h"
//@+ 02 arena-include
#include "arena.h"
#include "mmap.h"
#include "trace.h"
//@- 02 arena-include
//@+ 03 ops-include
#include "ops.h"
#include "compute.h"
//@- 03 ops-include
//@+ 04 graph-include
#include "graph.h"
//@- 04 graph-include
//@+ 05 galloc-include
#include "galloc.h"
#include "svg.h"
//@- 05 galloc-include
//@+ 06 kv-include
#include "kv_cache.h"
//@- 06 kv-include
//@+ 07 plan-include
#include "plan.h"
#include "vec.h"
//@- 07 plan-include
//@+ 08 threadpool-include
#include "threadpool.h"
#include "timeline.h"
//@- 08 threadpool-include
//@+ 09 inference-include
#include "gguf.h"
#include "vocab.h"
#include "model.h"
#include "session.h"
#include "sampling.h"
//@- 09 inference-include
