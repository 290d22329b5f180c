//@file 02
// mmap.c - mapping a file read-only (llama.cpp: llama_mmap in llama-mmap.cpp).
#define _DEFAULT_SOURCE
//@+ full huge-pages
#define _GNU_SOURCE   // mremap
//@- full huge-pages
#include "mmap.h"
#include "tensor.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
//@+ full huge-pages
#include <stdint.h>
#include <stdio.h>
//@- full huge-pages

// path opened read-only, its stat in *st; -1 after mg_set_error unless it
// is a regular file. O_NONBLOCK: opening a FIFO that nobody writes would
// wait forever; it is refused, as anything but a regular file (which
// ignores the flag).
static int open_regular(const char * path, struct stat * st) {
    const int fd = open(path, O_RDONLY | O_NONBLOCK);
    if (fd < 0) {
        mg_set_error("%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) {
        mg_set_error("%s: not a regular file", path);
        close(fd);
        return -1;
    }
    return fd;
}

struct mg_mmap * mg_mmap_open(const char * path) {
    struct stat st;
    const int   fd = open_regular(path, &st);
    if (fd < 0) return NULL;
    struct mg_mmap * m = calloc(1, sizeof(*m));
    MG_ASSERT(m != NULL);
    m->size = (size_t) st.st_size;
    if (m->size > 0) {
        // Read-only and shared: pages come straight from the page cache, and
        // every process that maps the file shares them.
        m->addr = mmap(NULL, m->size, PROT_READ, MAP_SHARED, fd, 0);
        if (m->addr == MAP_FAILED) {
            mg_set_error("%s: mmap of %zu bytes failed: %s", path, m->size, strerror(errno));
            free(m);
            close(fd);
            return NULL;
        }
    }
    close(fd);   // the mapping keeps the file alive
    return m;
}

//@+ full open-regular
FILE * mg_open_regular(const char * path, uint64_t max_size, uint64_t * size) {
    struct stat st;
    const int   fd = open_regular(path, &st);
    if (fd < 0) return NULL;
    if ((uint64_t) st.st_size > max_size) {
        mg_set_error("%s: %llu bytes, more than the %llu this file can be", path, (unsigned long long) st.st_size,
                     (unsigned long long) max_size);
        close(fd);
        return NULL;
    }
    FILE * f = fdopen(fd, "rb");
    if (f == NULL) {
        mg_set_error("%s: cannot open: %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    *size = (uint64_t) st.st_size;
    return f;
}
//@- full open-regular

void mg_mmap_close(struct mg_mmap * m) {
    if (m == NULL) return;
    if (m->size > 0) munmap(m->addr, m->size);
    free(m);
}

//@+ full huge-pages
bool mg_huge_pages_enabled(void) {
    FILE * f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (f == NULL) return false;
    char line[128] = "";
    const bool read = fgets(line, sizeof(line), f) != NULL;
    fclose(f);
    return read && strstr(line, "[never]") == NULL;
}

// A file mapping is made of 4 KiB pages; a decode step that streams its
// weights misses the TLB once a page, and on the bench machine a token's
// Q8_0 products read 17 GB/s from such pages and 20-21 from memory the
// kernel backs with 2 MiB pages (transparent huge pages). Those are only
// given to anonymous memory that asks (madvise), so the range is copied into
// a fresh anonymous mapping that asks, placed at the same offset within a
// 2 MiB page as the range, and then moved over the range (mremap): same
// addresses, same bytes, read-only as before, so every pointer into the
// mapping stays good. The copy costs RAM: those bytes are no longer shared
// with the page cache.
bool mg_mmap_copy_to_huge_pages(struct mg_mmap * m, size_t offset, size_t bytes) {
    const size_t page = (size_t) sysconf(_SC_PAGESIZE), huge = (size_t) 2 << 20;
    const size_t end  = (offset + bytes + page - 1) / page * page;   // the mapping covers whole pages
    const size_t from = offset / page * page;
    if (bytes == 0 || offset + bytes > m->size || !mg_huge_pages_enabled()) return false;
    const size_t len     = end - from;
    char *       target  = (char *) m->addr + from;
    char *       reserve = mmap(NULL, len + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (reserve == MAP_FAILED) return false;
    const size_t skip = ((uintptr_t) target % huge + huge - (uintptr_t) reserve % huge) % huge;
    char *       copy = reserve + skip;
    if (skip > 0) munmap(reserve, skip);   // the slack before and after the copy
    if (huge - skip > 0) munmap(copy + len, huge - skip);
    if (madvise(copy, len, MADV_HUGEPAGE) != 0) {
        munmap(copy, len);
        return false;
    }
    memcpy(copy, target, len);
    if (mprotect(copy, len, PROT_READ) != 0 || mremap(copy, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, target) == MAP_FAILED) {
        munmap(copy, len);   // the file's pages are still in place
        return false;
    }
    return true;
}
//@- full huge-pages

void mg_page_faults(long * minor, long * major) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    *minor = ru.ru_minflt;
    *major = ru.ru_majflt;
}
