// Shared by the harnesses in dev/fuzz/; included before any llmc header.
// 1. The readers take a path: fuzz_input_path() writes the input to a memfd and returns
//    "/proc/self/fd/N" (no file on disk, one per process).
// 2. fail() longjmps out of a reader half-way (-DFAIL_LONGJMP), past its free() and
//    fclose(). The macros at the end route the llmc headers' malloc, calloc, realloc,
//    posix_memalign, free, fopen and fclose through wrappers that remember what is live,
//    and fuzz_release() frees and closes it. Without this every failing input would leak
//    a file descriptor (after a thousand or so inputs every fopen would fail) and its
//    buffers (up to the RSS limit). A harness's own long-lived FILE is opened with
//    (fopen)(...), which the macro leaves alone.
#pragma once
#ifndef _GNU_SOURCE
#define _GNU_SOURCE  // memfd_create
#endif
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int fuzz_fd = -1;
static inline const char *fuzz_input_path(const uint8_t *data, size_t size) {
    static char path[64];
    if (fuzz_fd < 0) {
        fuzz_fd = memfd_create("fuzz_input", 0);
        if (fuzz_fd < 0) { perror("memfd_create"); abort(); }
        snprintf(path, sizeof(path), "/proc/self/fd/%d", fuzz_fd);
    }
    if (ftruncate(fuzz_fd, 0) != 0 || pwrite(fuzz_fd, data, size, 0) != (ssize_t)size) { perror("writing the input"); abort(); }
    return path;
}

// Reads of loaded data end here, so the compiler keeps them.
static volatile long fuzz_sink;

enum { FUZZ_MAX_LIVE = 1 << 16, FUZZ_MAX_FILES = 64 };
static void *fuzz_live[FUZZ_MAX_LIVE], *fuzz_files[FUZZ_MAX_FILES];
static int fuzz_n_live, fuzz_n_files;

static inline void fuzz_forget(void **list, int *n, const void *p) {
    for (int i = *n - 1; i >= 0; i--)  // newest first: readers free in reverse order mostly
        if (list[i] == p) { list[i] = list[--*n]; return; }
}
static inline void *fuzz_keep(void *p) {
    if (p && fuzz_n_live < FUZZ_MAX_LIVE) fuzz_live[fuzz_n_live++] = p;  // beyond the table: a leak at worst
    return p;
}
static inline void *fuzz_malloc(size_t n) { return fuzz_keep(malloc(n)); }
static inline void *fuzz_calloc(size_t n, size_t size) { return fuzz_keep(calloc(n, size)); }
static inline void *fuzz_realloc(void *p, size_t n) {
    void *q = realloc(p, n);
    if (q) { fuzz_forget(fuzz_live, &fuzz_n_live, p); fuzz_keep(q); }
    return q;
}
static inline int fuzz_posix_memalign(void **p, size_t align, size_t n) {
    int err = posix_memalign(p, align, n);
    if (!err) fuzz_keep(*p);
    return err;
}
static inline void fuzz_free(void *p) { fuzz_forget(fuzz_live, &fuzz_n_live, p); free(p); }
static inline FILE *fuzz_fopen(const char *path, const char *mode) {
    FILE *f = fopen(path, mode);
    if (f && fuzz_n_files < FUZZ_MAX_FILES) fuzz_files[fuzz_n_files++] = f;
    return f;
}
static inline int fuzz_fclose(FILE *f) { fuzz_forget(fuzz_files, &fuzz_n_files, f); return fclose(f); }

// Closes and frees whatever the readers left open: call after every input.
static inline void fuzz_release(void) {
    while (fuzz_n_files) fclose((FILE *)fuzz_files[--fuzz_n_files]);
    while (fuzz_n_live) free(fuzz_live[--fuzz_n_live]);
}

#define malloc(n) fuzz_malloc(n)
#define calloc(n, size) fuzz_calloc(n, size)
#define realloc(p, n) fuzz_realloc(p, n)
#define posix_memalign(p, align, n) fuzz_posix_memalign(p, align, n)
#define free(p) fuzz_free(p)
#define fopen(path, mode) fuzz_fopen(path, mode)
#define fclose(f) fuzz_fclose(f)

#ifdef SEED_MAIN
// Seed writers (-DSEED_MAIN): "<dir>/<name>" into buf, and raw bytes into such a file.
static inline const char *seed_path(char *buf, size_t n, const char *dir, const char *name) {
    snprintf(buf, n, "%s/%s", dir, name);
    return buf;
}
static inline void seed_write(const char *dir, const char *name, const void *data, size_t n) {
    char path[1024];
    FILE *f = fopen(seed_path(path, sizeof(path), dir, name), "wb");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f) != 0) { perror(path); exit(1); }
}
#endif
