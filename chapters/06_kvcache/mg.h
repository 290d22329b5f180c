// Generated from full/mg.h by tools/chapgen. In a class, edit this copy freely (make chapters will not overwrite your edits); to change the engine, edit full/mg.h and run make chapters.
// mg.h - everything a program using the engine includes.
#pragma once

#include "tensor.h"
#include "quants.h"
#include "arena.h"
#include "mmap.h"
#include "trace.h"
#include "ops.h"
#include "compute.h"
#include "graph.h"
#include "galloc.h"
#include "svg.h"
#include "kv_cache.h"
