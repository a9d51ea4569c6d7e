// Named-tensor files: the checkpoint format, the PyTorch reference file and tensor dumps.
// Layout (little-endian), documented for Python in dev/tensorfile.py and in doc/formats.md:
//   int32 magic 20261121, int32 version 2, int32 kind, int32 n_tensors
//   per tensor: int32 name_len, name bytes, int32 dtype (0 f32, 1 i32, 2 u64),
//               int32 ndim, int32 shape[ndim], zero bytes up to the next multiple of 64
//               (file offset), data (row-major)
//   int32 end marker 0x454E4421 ("!DNE"), uint32 CRC-32 of every byte before it
// Tensor data starts 64-byte aligned in the file and in the reader's buffer, so it is
// read in place as float/int arrays. Version 1 (no padding, no checksum) is still read.
// Writes go to "<path>.tmp", are flushed and fsync'd, then renamed over <path> and the
// folder fsync'd: a crash never leaves a half-written file where a good one was, and a
// failed write removes the .tmp and leaves <path> as it was.
#pragma once
#include "utils.h"

#define TF_MAGIC 20261121
#define TF_VERSION 2
#define TF_END 0x454E4421
#define TF_ALIGN 64
enum { TF_KIND_REFERENCE = 1, TF_KIND_CHECKPOINT = 2, TF_KIND_DUMP = 3 };
enum { TF_F32 = 0, TF_I32 = 1, TF_U64 = 2 };
#define TF_MAX_NDIM 6
#define TF_MAX_NAME 128

static inline size_t tf_dtype_size(int dtype) { return dtype == TF_U64 ? 8 : 4; }
static inline const char *tf_dtype_name(int dtype) { return dtype == TF_F32 ? "f32" : dtype == TF_I32 ? "i32" : "u64"; }

// CRC-32 with zlib's polynomial (Python's zlib.crc32 gives the same value), eight bytes
// per table step ("slicing by 8", about 2 GB/s on one core).
static uint32_t crc32_tab[8][256];
static inline uint32_t crc32_update(uint32_t crc, const void *data, size_t n) {
    if (!crc32_tab[0][1]) {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            crc32_tab[0][i] = c;
        }
        for (int t = 1; t < 8; t++)
            for (int i = 0; i < 256; i++) crc32_tab[t][i] = (crc32_tab[t - 1][i] >> 8) ^ crc32_tab[0][crc32_tab[t - 1][i] & 255];
    }
    const unsigned char *p = (const unsigned char *)data;
    crc = ~crc;
    for (; n >= 8; n -= 8, p += 8) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + 4, 4);
        lo ^= crc;
        crc = crc32_tab[7][lo & 255] ^ crc32_tab[6][(lo >> 8) & 255] ^ crc32_tab[5][(lo >> 16) & 255] ^ crc32_tab[4][lo >> 24] ^
              crc32_tab[3][hi & 255] ^ crc32_tab[2][(hi >> 8) & 255] ^ crc32_tab[1][(hi >> 16) & 255] ^ crc32_tab[0][hi >> 24];
    }
    while (n--) crc = (crc >> 8) ^ crc32_tab[0][(crc ^ *p++) & 255];
    return ~crc;
}

typedef struct {
    OutFile o;
    int n_expected, n_written;
    uint32_t crc;
    uint64_t off;  // bytes written
} TensorWriter;

static inline void tw_write(TensorWriter *w, const void *src, size_t n) {
    out_write(&w->o, src, n);
    w->crc = crc32_update(w->crc, src, n);
    w->off += n;
}

static inline void tw_open(TensorWriter *w, const char *path, int kind, int n_tensors) {
    out_open(&w->o, path);
    w->n_expected = n_tensors;
    w->n_written = 0;
    w->crc = 0;
    w->off = 0;
    int32_t h[4] = {TF_MAGIC, TF_VERSION, kind, n_tensors};
    tw_write(w, h, sizeof(h));
}

static inline void tw_add(TensorWriter *w, const char *name, int dtype, int ndim, const int *shape, const void *data) {
    static const unsigned char zeros[TF_ALIGN] = {0};
    int32_t len = (int32_t)strlen(name), dt = dtype, nd = ndim;
    size_t n = 1;
    tw_write(w, &len, 4);
    tw_write(w, name, len);
    tw_write(w, &dt, 4);
    tw_write(w, &nd, 4);
    for (int i = 0; i < ndim; i++) {
        int32_t s = shape[i];
        tw_write(w, &s, 4);
        n *= (size_t)shape[i];
    }
    tw_write(w, zeros, (TF_ALIGN - w->off % TF_ALIGN) % TF_ALIGN);
    tw_write(w, data, n * tf_dtype_size(dtype));
    w->n_written++;
}

// 1-D convenience
static inline void tw_add1(TensorWriter *w, const char *name, int dtype, int n, const void *data) {
    tw_add(w, name, dtype, 1, &n, data);
}

static inline void tw_close(TensorWriter *w) {
    if (w->n_written != w->n_expected)
        fail("internal: '%s' declared %d tensors but wrote %d", w->o.path, w->n_expected, w->n_written);
    int32_t end = TF_END;
    tw_write(w, &end, 4);
    uint32_t crc = w->crc;
    tw_write(w, &crc, 4);
    out_close(&w->o);
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

// A regular file opened for reading, with its size; a clear error for anything else.
static inline FILE *open_regular_file(const char *path, const char *what, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) fail("cannot open %s '%s': %s", what, path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) fail("%s '%s' is not a regular file (a folder?)", what, path);
    *size = (size_t)sb.st_size;
    return f;
}

static inline void *aligned_buffer(size_t n) {
    void *p = NULL;
    if (posix_memalign(&p, TF_ALIGN, n ? n : 1) != 0) fail("out of memory allocating %zu bytes", n);
    return p;
}

// Version 1 files have no padding: move each tensor's data to an aligned buffer.
static inline void tf_align_v1(TensorFile *tf) {
    size_t total = 0;
    for (int i = 0; i < tf->n; i++) total += (tf->t[i].numel * tf_dtype_size(tf->t[i].dtype) + TF_ALIGN - 1) / TF_ALIGN * TF_ALIGN;
    unsigned char *buf = (unsigned char *)aligned_buffer(total), *p = buf;
    for (int i = 0; i < tf->n; i++) {
        size_t nb = tf->t[i].numel * tf_dtype_size(tf->t[i].dtype);
        memcpy(p, tf->t[i].data, nb);
        tf->t[i].data = p;
        p += (nb + TF_ALIGN - 1) / TF_ALIGN * TF_ALIGN;
    }
    free(tf->buf);
    tf->buf = buf;
}

// Reads and validates the whole file (structure, then the checksum); any defect is a
// clear error naming the file.
static inline void tf_load(TensorFile *tf, const char *path, int expected_kind) {
    snprintf(tf->path, sizeof(tf->path), "%s", path);
    size_t size;
    FILE *f = open_regular_file(path, "tensor file", &size);
    tf->buf = (unsigned char *)aligned_buffer(size);
    xfread(tf->buf, size, f, path, "the file");
    fclose(f);
    size_t off = 0;
#define TF_TAKE(dst, nbytes, what)                                                                   \
    do {                                                                                             \
        if ((size_t)(nbytes) > size - off) fail("'%s' is truncated (while reading %s)", path, what); \
        memcpy(dst, tf->buf + off, nbytes);                                                          \
        off += (size_t)(nbytes);                                                                     \
    } while (0)
    int32_t h[4];
    TF_TAKE(h, 16, "the header");
    if (h[0] != TF_MAGIC) fail("'%s' is not a tensor file of this project (magic %d, expected %d)", path, h[0], TF_MAGIC);
    if (h[1] != 1 && h[1] != TF_VERSION)
        fail("'%s' has tensor-file version %d; this build reads versions 1 and %d", path, h[1], TF_VERSION);
    int v1 = h[1] == 1;
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
            if (e->shape[d] && e->numel > size / (size_t)e->shape[d])
                fail("'%s' is truncated: tensor '%s' is larger than the file", path, e->name);
            e->numel *= (size_t)e->shape[d];
        }
        size_t pad = v1 ? 0 : (TF_ALIGN - off % TF_ALIGN) % TF_ALIGN;
        size_t nbytes = e->numel * tf_dtype_size(dt);
        if (pad > size - off || nbytes > size - off - pad)
            fail("'%s' is truncated: tensor '%s' needs %zu bytes, %zu left", path, e->name, nbytes, size - off);
        e->data = tf->buf + off + pad;
        off += pad + nbytes;
    }
    int32_t end;
    uint32_t stored = 0;
    TF_TAKE(&end, 4, "the end marker");
    if (end != TF_END) fail("'%s' is corrupt: bad end marker", path);
    if (!v1) TF_TAKE(&stored, 4, "the checksum");
    if (off != size) fail("'%s' is corrupt: %zu unexpected bytes after the end marker", path, size - off);
#undef TF_TAKE
    if (v1) {
        fprintf(stderr, "note: '%s' is a version-1 tensor file: it has no checksum, so its contents cannot be verified\n", path);
        tf_align_v1(tf);
        return;
    }
    uint32_t crc = crc32_update(0, tf->buf, size - 4);
    if (crc != stored)
        fail("'%s' is corrupt: its CRC-32 is %08x, the file records %08x (changed or damaged after it was written)", path,
             crc, stored);
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

// A ragged array of token sequences (the evaluation files of kind 3): int32 `tokens` and
// `offsets` (count + 1 of them: 0 first, the token count last), sequence i being
// tokens[offsets[i] .. offsets[i+1]), min_len..max_len tokens long, every token in
// [0, vocab_size). Returns the tokens and *offsets_out; fails naming the flag, the file
// and the sequence (`item` i).
static inline const int *tf_ragged(const TensorFile *tf, const char *tokens, const char *offsets, int count, int min_len,
                                   int max_len, int vocab_size, const char *flag, const char *item, const int **offsets_out) {
    const int *off = (const int *)tf_get(tf, offsets, TF_I32, (size_t)count + 1);
    const TensorEntry *e = tf_find(tf, tokens);
    if (!e || e->dtype != TF_I32 || off[0] != 0 || (long)e->numel != off[count])
        fail("%s: '%s' has inconsistent %s and %s", flag, tf->path, tokens, offsets);
    for (int i = 0; i < count; i++) {
        long n = (long)off[i + 1] - off[i];
        if (n < min_len || n > max_len)
            fail("%s: '%s': %s %d has %ld tokens, outside [%d, %d]%s", flag, tf->path, item, i, n, min_len, max_len,
                 n < 0 ? " (decreasing offsets)" : "");
    }
    const int *tok = (const int *)e->data;
    for (long i = 0; i < (long)e->numel; i++)
        if (tok[i] < 0 || tok[i] >= vocab_size)
            fail("%s: '%s' has token %d at index %ld of %s, outside the vocab size %d (another tokenizer?)", flag, tf->path,
                 tok[i], i, tokens, vocab_size);
    *offsets_out = off;
    return tok;
}
