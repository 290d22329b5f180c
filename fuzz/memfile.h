// memfile.h - fuzz bytes as a file the engine can open by path (and mmap):
// a memfd, named /proc/self/fd/N. No disk, no clean-up race between runs.
#pragma once
#ifndef _GNU_SOURCE
#define _GNU_SOURCE   // memfd_create
#endif
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

struct memfile {
    int  fd;
    char path[64];
};

static inline struct memfile memfile_new(const uint8_t * data, size_t size) {
    struct memfile m;
    m.fd = memfd_create("fuzz", 0);
    if (m.fd < 0) abort();
    for (size_t done = 0; done < size;) {
        const ssize_t n = write(m.fd, data + done, size - done);
        if (n <= 0) abort();
        done += (size_t) n;
    }
    snprintf(m.path, sizeof(m.path), "/proc/self/fd/%d", m.fd);
    return m;
}

static inline void memfile_free(struct memfile * m) {
    close(m->fd);
}
