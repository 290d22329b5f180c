// Generated from full/mmap.c by tools/chapgen. In a class, edit this copy freely (make chapters will not overwrite your edits); to change the engine, edit full/mmap.c and run make chapters.
// mmap.c - mapping a file read-only (llama.cpp: llama_mmap in llama-mmap.cpp).
#define _DEFAULT_SOURCE
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

void mg_mmap_close(struct mg_mmap * m) {
    if (m == NULL) return;
    if (m->size > 0) munmap(m->addr, m->size);
    free(m);
}

void mg_page_faults(long * minor, long * major) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    *minor = ru.ru_minflt;
    *major = ru.ru_majflt;
}
