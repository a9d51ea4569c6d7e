// Small host-side helpers shared by train_gpt_cpu.c, train_gpt.cu and test_gpt.c:
// one clear message and a non-zero exit for every failure, checked file I/O.
#pragma once
#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE  // clock_gettime, fsync, strdup under -std=c11 when a header comes first
#endif
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#ifdef FAIL_LONGJMP
// Fuzz harnesses (dev/fuzz/) build with -DFAIL_LONGJMP: fail() returns to the harness
// through fail_jump instead of exiting, and prints nothing when fail_quiet is set.
#include <setjmp.h>
static jmp_buf fail_jump;
static int fail_quiet;
#endif

// Print "error: <message>" and exit(1). Every user-facing failure goes through here.
static inline void fail(const char *fmt, ...) {
#ifdef FAIL_LONGJMP
    if (fail_quiet) longjmp(fail_jump, 1);
#endif
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "error: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
#ifdef FAIL_LONGJMP
    longjmp(fail_jump, 1);
#endif
    exit(1);
}

static inline void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) fail("out of memory allocating %zu bytes", n);
    return p;
}

static inline void *xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) fail("out of memory allocating %zu bytes", n * size);
    return p;
}

static inline FILE *xfopen(const char *path, const char *mode) {
    FILE *f = fopen(path, mode);
    if (!f) fail("cannot open '%s' (mode %s)", path, mode);
    return f;
}

// Read exactly n bytes or fail naming the file and what was being read.
static inline void xfread(void *dst, size_t n, FILE *f, const char *path, const char *what) {
    if (n && fread(dst, 1, n, f) != n) fail("'%s' is truncated: could not read %s (%zu bytes)", path, what, n);
}

static inline void xfwrite(const void *src, size_t n, FILE *f, const char *path) {
    if (n && fwrite(src, 1, n, f) != n) fail("write to '%s' failed (disk full?)", path);
}

static inline long file_size(FILE *f) {
    long cur = ftell(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, cur, SEEK_SET);
    return n;
}

static inline double wall_time(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

// "1h02m", "3m05s", "12s": for ETAs.
static inline void format_duration(double s, char *buf, size_t n) {
    if (s < 0) s = 0;
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, n, "%ldh%02ldm", t / 3600, (t % 3600) / 60);
    else if (t >= 60) snprintf(buf, n, "%ldm%02lds", t / 60, t % 60);
    else snprintf(buf, n, "%lds", t);
}

// mkdir -p; fails naming the flag when the path cannot be a folder
static inline void make_dir(const char *path) {
    char buf[1024];
    snprintf(buf, sizeof(buf), "%s", path);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') { *p = 0; mkdir(buf, 0755); *p = '/'; }
    if (mkdir(buf, 0755) != 0) {
        struct stat sb;
        if (stat(buf, &sb) != 0 || !S_ISDIR(sb.st_mode)) fail("--out_dir: cannot create '%s'", path);
    }
}

