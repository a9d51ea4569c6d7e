// Small host-side helpers shared by train_gpt_cpu.c, train_gpt.cu and test_gpt.c:
// one clear message and a non-zero exit for every failure, checked file I/O.
#pragma once
#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE  // clock_gettime, fsync, strdup under -std=c11 when a header comes first
#endif
#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifdef FAIL_LONGJMP
// Fuzz harnesses (dev/fuzz/) build with -DFAIL_LONGJMP: fail() returns to the harness
// through fail_jump instead of exiting, and prints nothing when fail_quiet is set.
#include <setjmp.h>
static jmp_buf fail_jump;
static int fail_quiet;
#endif

// Print "error: <message>" and exit(1). Every user-facing failure goes through here.
__attribute__((noreturn, format(printf, 1, 2))) static inline void fail(const char *fmt, ...) {
#ifdef FAIL_LONGJMP
    if (fail_quiet) longjmp(fail_jump, 1);
#endif
    fflush(stdout);  // what was printed before the error comes before it
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

// s read as one whole integer (a sign, digits, nothing else): 1 and its value in *v; 0 when
// it is not one; -1 when it is past 64 bits.
static inline int text_int(const char *s, long long *v) {
    char *end;
    errno = 0;
    *v = strtoll(s, &end, 10);
    if (!*s || *end || (*s != '-' && *s != '+' && (*s < '0' || *s > '9'))) return 0;
    return errno == ERANGE ? -1 : 1;
}

// A number a user typed (a flag's value, an environment variable: `what` names it), read
// strictly: the whole text one number, in [lo, hi]; anything else is one line and exit 1.
static inline long long parse_int_in(const char *what, const char *s, long long lo, long long hi) {
    long long v;
    int got = text_int(s, &v);
    if (!got) fail("%s expects an integer, got '%s'", what, s);
    if (got < 0 || v < lo || v > hi) fail("%s: %s is out of range (%lld to %lld)", what, s, lo, hi);
    return v;
}

static inline double parse_number_in(const char *what, const char *s, double lo, double hi) {
    char *end;
    double v = strtod(s, &end);
    if (!*s || *end || !isfinite(v) || (*s != '-' && *s != '+' && *s != '.' && (*s < '0' || *s > '9')))
        fail("%s expects a number, got '%s'", what, s);
    if (!(v >= lo && v <= hi)) fail("%s: %s is out of range (%g to %g)", what, s, lo, hi);
    return v;
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

// A large zeroed buffer (the CPU trainer's parameters, gradients, moments, activations),
// in transparent huge pages where the kernel gives them (a hint: madvise, for THP set to
// "madvise" as it often is; refused or ignored, the buffer is the same). With 4 KB pages,
// a product that walks a column block of the 412 MB dlogits (the LM head's weight
// gradient) touches a new page every row, and every one misses the TLB.
#define HUGE_PAGE ((size_t)2 << 20)
static inline void *big_calloc(size_t n, size_t size) {
    if (size && n > (SIZE_MAX - HUGE_PAGE) / size) fail("out of memory: %zu elements of %zu bytes", n, size);
    size_t bytes = n * size;
    if (bytes < HUGE_PAGE) return xcalloc(n, size);
    bytes = (bytes + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
    void *p = aligned_alloc(HUGE_PAGE, bytes);
    if (!p) fail("out of memory allocating %zu bytes", bytes);
#ifdef MADV_HUGEPAGE
    madvise(p, bytes, MADV_HUGEPAGE);
#endif
    memset(p, 0, bytes);  // after the hint: the first touch maps the pages
    return p;
}

// A grow-only buffer: buf when it holds `bytes` already (*cap, in bytes), else a larger one
// (the old contents are not kept).
static inline void *grow_buffer(void *buf, size_t *cap, size_t bytes) {
    if (bytes <= *cap) return buf;
    free(buf);
    *cap = bytes;
    return xmalloc(bytes);
}

static inline FILE *xfopen(const char *path, const char *mode) {
    FILE *f = fopen(path, mode);
    if (!f) fail("cannot open '%s' (mode %s): %s", path, mode, strerror(errno));
    return f;
}

// Read exactly n bytes or fail naming the file and what was being read.
static inline void xfread(void *dst, size_t n, FILE *f, const char *path, const char *what) {
    if (n && fread(dst, 1, n, f) != n) fail("'%s' is truncated: could not read %s (%zu bytes)", path, what, n);
}

static inline void xfwrite(const void *src, size_t n, FILE *f, const char *path) {
    if (n && fwrite(src, 1, n, f) != n) fail("writing '%s' failed: %s (disk full?)", path, strerror(errno));
}

// fsync the folder holding path, so a rename into it survives a power loss.
static inline void fsync_parent_dir(const char *path) {
    char dir[1200];
    snprintf(dir, sizeof(dir), "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) *(slash == dir ? slash + 1 : slash) = 0;
    else snprintf(dir, sizeof(dir), ".");
    int fd = open(dir, O_RDONLY);
    if (fd < 0) return;
    if (fsync(fd) != 0 && errno != EINVAL)
        fprintf(stderr, "warning: fsync of folder '%s' failed (%s): the rename may not survive a power loss\n", dir, strerror(errno));
    close(fd);
}

// An output file written whole or not at all: writes go to "<path>.tmp"; out_close checks
// every write, flushes, fsyncs and renames it over <path>. Any failure removes the .tmp,
// leaves <path> as it was and stops with the reason (a full disk, a file-size limit).
typedef struct {
    FILE *f;
    char path[1200], tmp[1210];
} OutFile;

static inline void out_abort(OutFile *o, const char *what) {
    int err = errno;
    if (o->f) fclose(o->f);
    o->f = NULL;
    remove(o->tmp);
    fail("writing '%s' failed while %s: %s; '%s' was left as it was", o->tmp, what, err ? strerror(err) : "I/O error", o->path);
}

static inline void out_open(OutFile *o, const char *path) {
    snprintf(o->path, sizeof(o->path), "%s", path);
    snprintf(o->tmp, sizeof(o->tmp), "%s.tmp", path);
    o->f = fopen(o->tmp, "wb");
    if (!o->f) fail("cannot create '%s': %s", o->tmp, strerror(errno));
}

static inline void out_write(OutFile *o, const void *src, size_t n) {
    errno = 0;
    if (n && fwrite(src, 1, n, o->f) != n) out_abort(o, "writing");
}

// every write checked, flushed and fsync'd, and <path>.tmp left for a commit that renames it
static inline void out_close_tmp(OutFile *o) {
    errno = 0;
    if (ferror(o->f)) out_abort(o, "writing");
    if (fflush(o->f) != 0 || fsync(fileno(o->f)) != 0) out_abort(o, "flushing to disk");
    FILE *f = o->f;
    o->f = NULL;
    if (fclose(f) != 0) out_abort(o, "closing");
}

static inline void out_close(OutFile *o) {
    out_close_tmp(o);
    if (rename(o->tmp, o->path) != 0) out_abort(o, "renaming it over the old file");
    fsync_parent_dir(o->path);
}

// A JSON string: in quotes, with '"', '\\' and control characters escaped (every string a
// user gives, such as a path or a tag, goes through here).
static inline void json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

// A JSON number, or null for NaN and Inf (which JSON cannot hold).
static inline void json_number(FILE *f, const char *fmt, double v) {
    if (isfinite(v)) fprintf(f, fmt, v);
    else fputs("null", f);
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

