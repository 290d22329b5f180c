//@file 02
// mmap.h - a file's bytes as memory, without reading it.
//
//     struct mg_mmap * m = mg_mmap_open("weights.bin");
//     t->data = (char *) m->addr + offset;   // a tensor whose data is the file
//
// mmap asks the kernel to make the file appear in our address space. No byte
// is read until it is touched: the first touch of each page is a page fault
// that the kernel serves from its page cache (a minor fault) or from disk (a
// major fault). Loading a 4 GB model this way takes milliseconds, and two
// processes mapping the same file share one copy in RAM (llama-mmap.cpp).
#pragma once

#include <stddef.h>
//@+ full huge-pages
#include <stdbool.h>
//@- full huge-pages
//@+ full open-regular
#include <stdint.h>
#include <stdio.h>
//@- full open-regular

struct mg_mmap {
    void * addr;   // the first byte of the file
    size_t size;   // the file's size in bytes
};

// Map a whole file read-only. NULL, with mg_last_error() naming the file and
// the reason, if it cannot be opened or mapped.
struct mg_mmap * mg_mmap_open(const char * path);
void             mg_mmap_close(struct mg_mmap * m);

//@+ full open-regular
// A regular file of at most max_size bytes, opened for reading ("rb"), its
// size in *size. NULL, with mg_last_error() naming the file, for anything
// else: a FIFO nobody writes would block the open forever, /dev/zero would
// be read forever, a directory cannot be read. For the inputs that are
// files on disk (tokenizer.json, a --kl-base file), never a pipe.
FILE * mg_open_regular(const char * path, uint64_t max_size, uint64_t * size);
//@- full open-regular

//@+ full huge-pages
// Does the kernel give anonymous memory 2 MiB pages when asked (its
// transparent huge page setting, /sys/kernel/mm/transparent_hugepage/enabled,
// is "always" or "madvise", not "never")?
bool mg_huge_pages_enabled(void);

// Bytes [offset, offset + bytes) of the mapping (widened to whole pages)
// replaced, at the same addresses, by a copy in memory the kernel may back
// with 2 MiB pages (transparent huge pages), for the TLB's sake. False, the
// mapping as it was, if the kernel has them off or a step fails.
bool mg_mmap_copy_to_huge_pages(struct mg_mmap * m, size_t offset, size_t bytes);
//@- full huge-pages

// Page faults of this process so far (getrusage): minor = served from RAM,
// major = had to wait for the disk.
void mg_page_faults(long * minor, long * major);
