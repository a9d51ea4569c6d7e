// Named-tensor files: the checkpoint format, the PyTorch reference file and tensor dumps.
// Layout (little-endian), documented for Python in dev/tensorfile.py:
//   int32 magic 20261121, int32 version 1, int32 kind, int32 n_tensors
//   per tensor: int32 name_len, name bytes, int32 dtype (0 f32, 1 i32, 2 u64),
//               int32 ndim, int32 shape[ndim], data (row-major)
//   int32 end marker 0x454E4421 ("!DNE")
// Writes go to "<path>.tmp", are flushed and fsync'd, then renamed over <path>:
// a crash never leaves a half-written file where a good one was.
#pragma once
#include "utils.h"
#include <unistd.h>

#define TF_MAGIC 20261121
#define TF_VERSION 1
#define TF_END 0x454E4421
enum { TF_KIND_REFERENCE = 1, TF_KIND_CHECKPOINT = 2, TF_KIND_DUMP = 3 };
enum { TF_F32 = 0, TF_I32 = 1, TF_U64 = 2 };
#define TF_MAX_NDIM 6
#define TF_MAX_NAME 128

static inline size_t tf_dtype_size(int dtype) { return dtype == TF_U64 ? 8 : 4; }
static inline const char *tf_dtype_name(int dtype) { return dtype == TF_F32 ? "f32" : dtype == TF_I32 ? "i32" : "u64"; }

typedef struct {
    FILE *f;
    char path[1200], tmp[1210];
    int n_expected, n_written;
} TensorWriter;

static inline void tw_open(TensorWriter *w, const char *path, int kind, int n_tensors) {
    snprintf(w->path, sizeof(w->path), "%s", path);
    snprintf(w->tmp, sizeof(w->tmp), "%s.tmp", path);
    w->f = xfopen(w->tmp, "wb");
    w->n_expected = n_tensors;
    w->n_written = 0;
    int32_t h[4] = {TF_MAGIC, TF_VERSION, kind, n_tensors};
    xfwrite(h, sizeof(h), w->f, w->tmp);
}

static inline void tw_add(TensorWriter *w, const char *name, int dtype, int ndim, const int *shape, const void *data) {
    int32_t len = (int32_t)strlen(name), dt = dtype, nd = ndim;
    size_t n = 1;
    xfwrite(&len, 4, w->f, w->tmp);
    xfwrite(name, len, w->f, w->tmp);
    xfwrite(&dt, 4, w->f, w->tmp);
    xfwrite(&nd, 4, w->f, w->tmp);
    for (int i = 0; i < ndim; i++) {
        int32_t s = shape[i];
        xfwrite(&s, 4, w->f, w->tmp);
        n *= (size_t)shape[i];
    }
    xfwrite(data, n * tf_dtype_size(dtype), w->f, w->tmp);
    w->n_written++;
}

// 1-D convenience
static inline void tw_add1(TensorWriter *w, const char *name, int dtype, int n, const void *data) {
    tw_add(w, name, dtype, 1, &n, data);
}

static inline void tw_close(TensorWriter *w) {
    if (w->n_written != w->n_expected)
        fail("internal: '%s' declared %d tensors but wrote %d", w->path, w->n_expected, w->n_written);
    int32_t end = TF_END;
    xfwrite(&end, 4, w->f, w->tmp);
    if (fflush(w->f) != 0 || fsync(fileno(w->f)) != 0) fail("flushing '%s' failed (disk full?)", w->tmp);
    fclose(w->f);
    if (rename(w->tmp, w->path) != 0) fail("cannot rename '%s' to '%s'", w->tmp, w->path);
}

typedef struct {
    char name[TF_MAX_NAME];
    int dtype, ndim, shape[TF_MAX_NDIM];
    size_t numel;
    const void *data;
} TensorEntry;

typedef struct {
    char path[1200];
    int kind, n;
    TensorEntry *t;
    unsigned char *buf;
} TensorFile;

// Reads and validates the whole file; any defect is a clear error naming the file.
static inline void tf_load(TensorFile *tf, const char *path, int expected_kind) {
    snprintf(tf->path, sizeof(tf->path), "%s", path);
    FILE *f = fopen(path, "rb");
    if (!f) fail("cannot open tensor file '%s'", path);
    size_t size = (size_t)file_size(f);
    tf->buf = (unsigned char *)xmalloc(size);
    xfread(tf->buf, size, f, path, "the file");
    fclose(f);
    size_t off = 0;
#define TF_TAKE(dst, nbytes, what)                                                                   \
    do {                                                                                             \
        if (off + (size_t)(nbytes) > size) fail("'%s' is truncated (while reading %s)", path, what); \
        memcpy(dst, tf->buf + off, nbytes);                                                          \
        off += (size_t)(nbytes);                                                                     \
    } while (0)
    int32_t h[4];
    TF_TAKE(h, 16, "the header");
    if (h[0] != TF_MAGIC) fail("'%s' is not a tensor file of this project (magic %d, expected %d)", path, h[0], TF_MAGIC);
    if (h[1] != TF_VERSION) fail("'%s' has tensor-file version %d; this build reads version %d", path, h[1], TF_VERSION);
    if (expected_kind && h[2] != expected_kind)
        fail("'%s' is a tensor file of kind %d, expected kind %d (1 reference, 2 checkpoint, 3 dump)", path, h[2],
             expected_kind);
    if (h[3] < 0 || h[3] > 100000) fail("'%s' is corrupt: %d tensors", path, h[3]);
    tf->kind = h[2];
    tf->n = h[3];
    tf->t = (TensorEntry *)xcalloc(tf->n, sizeof(TensorEntry));
    for (int i = 0; i < tf->n; i++) {
        TensorEntry *e = &tf->t[i];
        int32_t len, dt, nd;
        TF_TAKE(&len, 4, "a tensor name length");
        if (len <= 0 || len >= TF_MAX_NAME) fail("'%s' is corrupt: tensor %d has a name of length %d", path, i, len);
        TF_TAKE(e->name, len, "a tensor name");
        e->name[len] = 0;
        TF_TAKE(&dt, 4, e->name);
        TF_TAKE(&nd, 4, e->name);
        if (dt < 0 || dt > 2) fail("'%s' is corrupt: tensor '%s' has dtype %d", path, e->name, dt);
        if (nd < 0 || nd > TF_MAX_NDIM) fail("'%s' is corrupt: tensor '%s' has %d dims", path, e->name, nd);
        e->dtype = dt;
        e->ndim = nd;
        e->numel = 1;
        for (int d = 0; d < nd; d++) {
            TF_TAKE(&e->shape[d], 4, e->name);
            if (e->shape[d] < 0) fail("'%s' is corrupt: tensor '%s' has a negative dim", path, e->name);
            e->numel *= (size_t)e->shape[d];
        }
        size_t nbytes = e->numel * tf_dtype_size(dt);
        if (off + nbytes > size)
            fail("'%s' is truncated: tensor '%s' needs %zu bytes, %zu left", path, e->name, nbytes, size - off);
        e->data = tf->buf + off;
        off += nbytes;
    }
    int32_t end;
    TF_TAKE(&end, 4, "the end marker");
    if (end != TF_END) fail("'%s' is corrupt: bad end marker", path);
    if (off != size) fail("'%s' is corrupt: %zu unexpected bytes after the end marker", path, size - off);
#undef TF_TAKE
}

static inline void tf_free(TensorFile *tf) {
    free(tf->t);
    free(tf->buf);
    tf->t = NULL;
    tf->buf = NULL;
}

static inline const TensorEntry *tf_find(const TensorFile *tf, const char *name) {
    for (int i = 0; i < tf->n; i++)
        if (strcmp(tf->t[i].name, name) == 0) return &tf->t[i];
    return NULL;
}

// The tensor `name` with exactly `numel` elements of `dtype`, or a clear error.
static inline const void *tf_get(const TensorFile *tf, const char *name, int dtype, size_t numel) {
    const TensorEntry *e = tf_find(tf, name);
    if (!e) fail("'%s' has no tensor named '%s'", tf->path, name);
    if (e->dtype != dtype) fail("'%s': tensor '%s' is %s, expected %s", tf->path, name, tf_dtype_name(e->dtype), tf_dtype_name(dtype));
    if (e->numel != numel)
        fail("'%s': tensor '%s' has %zu elements, expected %zu (a checkpoint of another config?)", tf->path, name,
             e->numel, numel);
    return e->data;
}
