// Token shards in llm.c's format, so its data pipelines work here unchanged:
//   256 int32 header: [0] magic 20240520 + [1] version 1 (uint16 tokens)
//                  or [0] magic 20240801 + [1] version 7 (uint32 tokens); [2] token count
//   then the tokens. Documents are separated by the end-of-text token.
//   Our extension: header[3] = 1 says a loss mask follows the tokens, one byte (0 or 1) per
//   token: 1 when the token counts in the loss as a target (answers of a task). llm.c's own
//   reader refuses such a shard (its size check); header[3] = 0 is the plain format.
// Every token is checked against the vocab size when a shard is loaded.
#pragma once
#include "utils.h"
#include <glob.h>
#include "rng.h"

#define SHARD_MAGIC_U16 20240520
#define SHARD_MAGIC_U32 20240801

// A shard's header, checked against its file size: its token count and width, and whether
// a loss mask follows. Returns the file positioned at the tokens, or NULL with the defect
// in err (shard_load fails with it; shards_check collects it from parallel threads).
typedef struct {
    long n;
    int width, masked;
} ShardHeader;

static inline FILE *shard_open(const char *path, ShardHeader *sh, char *err, size_t n_err) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, n_err, "cannot open data shard '%s'", path);
        return NULL;
    }
    int32_t h[256];
    if (fread(h, 4, 256, f) != 256) snprintf(err, n_err, "data shard '%s' is truncated: no complete 1024-byte header", path);
    else if (h[0] == SHARD_MAGIC_U16 && h[1] != 1)
        snprintf(err, n_err, "data shard '%s': version %d with magic %d; expected version 1", path, h[1], h[0]);
    else if (h[0] == SHARD_MAGIC_U32 && h[1] != 7)
        snprintf(err, n_err, "data shard '%s': version %d with magic %d; expected version 7", path, h[1], h[0]);
    else if (h[0] != SHARD_MAGIC_U16 && h[0] != SHARD_MAGIC_U32)
        snprintf(err, n_err, "data shard '%s' has wrong magic %d (expected %d for uint16 or %d for uint32 tokens)", path, h[0],
                 SHARD_MAGIC_U16, SHARD_MAGIC_U32);
    else if (h[3] != 0 && h[3] != 1)
        snprintf(err, n_err, "data shard '%s': header[3] is %d, neither 0 (no loss mask) nor 1 (a loss mask follows the tokens)",
                 path, h[3]);
    else if (h[2] <= 0)
        snprintf(err, n_err, "data shard '%s' holds %d tokens", path, h[2]);
    else {
        sh->n = h[2];
        sh->width = h[0] == SHARD_MAGIC_U16 ? 2 : 4;
        sh->masked = h[3] == 1;
        long expect = 1024 + sh->n * sh->width + (sh->masked ? sh->n : 0), size = file_size(f);
        const char *with = sh->masked ? " and their mask" : "";
        if (size == expect) return f;
        snprintf(err, n_err, "data shard '%s' is %s: header says %ld tokens%s (%ld bytes), file has %ld bytes", path,
                 size < expect ? "truncated" : "corrupt", sh->n, with, expect, size);
    }
    fclose(f);
    return NULL;
}

// The first token of raw (n, width 2 or 4) at or past vocab_size, or -1.
static inline long first_bad_token(const void *raw, long n, int width, int vocab_size) {
    uint32_t max = 0;
    if (width == 2) {
        const uint16_t *t = (const uint16_t *)raw;
        for (long i = 0; i < n; i++) max = t[i] > max ? t[i] : max;  // vectorized
    } else {
        const uint32_t *t = (const uint32_t *)raw;
        for (long i = 0; i < n; i++) max = t[i] > max ? t[i] : max;
    }
    if (max < (uint32_t)vocab_size) return -1;
    for (long i = 0; i < n; i++)
        if ((width == 2 ? ((const uint16_t *)raw)[i] : ((const uint32_t *)raw)[i]) >= (uint32_t)vocab_size) return i;
    return -1;
}

// The first loss-mask value of m (n) that is neither 0 nor 1, or -1; adds the 1s to *counted.
static inline long first_bad_mask(const unsigned char *m, long n, long *counted) {
    for (long i = 0; i < n; i++) {
        if (m[i] > 1) return i;
        *counted += m[i];
    }
    return -1;
}

static inline void bad_token_message(char *err, size_t n_err, const char *path, const void *raw, int width, long i,
                                     long offset, int vocab_size) {
    uint32_t v = width == 2 ? ((const uint16_t *)raw)[i] : ((const uint32_t *)raw)[i];
    snprintf(err, n_err, "data shard '%s': token %u at index %ld is >= vocab size %d (use --vocab_size or the matching tokenizer)",
             path, v, offset + i, vocab_size);
}

// Load one shard as int32 tokens, and its loss mask into *mask_out (NULL without one; pass
// mask_out NULL to drop it); fails with a message naming the defect.
static inline int *shard_load(const char *path, int vocab_size, long *n_out, unsigned char **mask_out) {
    ShardHeader sh;
    char err[1400];
    FILE *f = shard_open(path, &sh, err, sizeof(err));
    if (!f) fail("%s", err);
    long n = sh.n;
    void *raw = xmalloc(n * sh.width);
    xfread(raw, n * sh.width, f, path, "tokens");
    long bad = first_bad_token(raw, n, sh.width, vocab_size);
    if (bad >= 0) {
        bad_token_message(err, sizeof(err), path, raw, sh.width, bad, 0, vocab_size);
        fail("%s", err);
    }
    int *tok = (int *)xmalloc(n * sizeof(int));
    for (long i = 0; i < n; i++) tok[i] = sh.width == 2 ? ((uint16_t *)raw)[i] : (int)((uint32_t *)raw)[i];
    free(raw);
    unsigned char *mask = NULL;
    if (sh.masked) {
        mask = (unsigned char *)xmalloc(n);
        xfread(mask, n, f, path, "loss mask");
        long counted = 0, bad = first_bad_mask(mask, n, &counted);
        if (bad >= 0) fail("data shard '%s': loss mask value %d at index %ld (must be 0 or 1)", path, mask[bad], bad);
        if (!counted) fail("data shard '%s': its loss mask counts no token", path);
    }
    if (mask_out) *mask_out = mask;
    else free(mask);
    fclose(f);
    *n_out = n;
    return tok;
}

typedef struct {
    char **files;
    int n_files;
} ShardList;

static inline ShardList shards_glob(const char *pattern, const char *flag) {
    glob_t g;
    ShardList s = {NULL, 0};
    if (glob(pattern, 0, NULL, &g) != 0 || g.gl_pathc == 0) {
        if (pattern[0] == '/') fail("%s: no file matches '%s'", flag, pattern);
        char cwd[1024];
        if (!getcwd(cwd, sizeof(cwd))) snprintf(cwd, sizeof(cwd), "?");
        fail("%s: no file matches '%s' in %s (the path is relative to the current folder; the built-in corpus is "
             "data/builtin/ of the repository, made by `make`)", flag, pattern, cwd);
    }
    s.n_files = (int)g.gl_pathc;
    s.files = (char **)xmalloc(s.n_files * sizeof(char *));
    for (int i = 0; i < s.n_files; i++) s.files[i] = strdup(g.gl_pathv[i]);  // glob sorts
    globfree(&g);
    return s;
}

// Every shard a glob matches, checked through before training starts, so a bad token in
// the last shard stops the run at once, not hours in: each header against its file size,
// every token below the vocab size, every mask value. The shards are read in chunks of 4M
// tokens (none held whole), every chunk of every shard in parallel; the first defect in
// file order is the one reported, as shard_load words it. Returns the token count.
static inline double shards_check(const char *pattern, const char *flag, int vocab_size) {
    const long CHUNK = 1 << 22;
    enum { ERR = 1400 };
    ShardList s = shards_glob(pattern, flag);
    typedef struct { int file; long off, n; } Piece;
    ShardHeader *sh = (ShardHeader *)xcalloc(s.n_files, sizeof(ShardHeader));
    char *err = (char *)xcalloc(s.n_files, ERR);  // a defect per shard
    long n_pieces = 0;
    double total = 0;
    for (int i = 0; i < s.n_files; i++) {
        FILE *f = shard_open(s.files[i], &sh[i], err + (size_t)i * ERR, ERR);
        if (!f) continue;
        fclose(f);
        n_pieces += (sh[i].n + CHUNK - 1) / CHUNK;
        total += (double)sh[i].n;
    }
    Piece *pc = (Piece *)xmalloc((n_pieces ? n_pieces : 1) * sizeof(Piece));
    long k = 0;
    for (int i = 0; i < s.n_files; i++)
        for (long off = 0; !err[(size_t)i * ERR] && off < sh[i].n; off += CHUNK) {
            pc[k].file = i;
            pc[k].off = off;
            pc[k++].n = sh[i].n - off < CHUNK ? sh[i].n - off : CHUNK;
        }
    char *perr = (char *)xcalloc(k ? k : 1, ERR);  // a defect per piece
    long *counted = (long *)xcalloc(k ? k : 1, sizeof(long));
#ifdef _OPENMP  // the CPU trainer; train_gpt.cu reads them one after another
#pragma omp parallel
#endif
    {
        unsigned char *buf = (unsigned char *)xmalloc((size_t)CHUNK * 4);
#ifdef _OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
        for (long j = 0; j < k; j++) {
            const Piece *p = &pc[j];
            const ShardHeader *h = &sh[p->file];
            const char *path = s.files[p->file];
            char *e = perr + (size_t)j * ERR;
            int fd = open(path, O_RDONLY);
            size_t bytes = (size_t)p->n * h->width;
            if (fd < 0 || pread(fd, buf, bytes, 1024 + p->off * h->width) != (ssize_t)bytes) {
                snprintf(e, ERR, "data shard '%s': cannot read its tokens at index %ld", path, p->off);
            } else {
                long bad = first_bad_token(buf, p->n, h->width, vocab_size);
                if (bad >= 0) bad_token_message(e, ERR, path, buf, h->width, bad, p->off, vocab_size);
            }
            if (!e[0] && h->masked) {
                long bad = -1;
                if (pread(fd, buf, p->n, 1024 + h->n * h->width + p->off) != (ssize_t)p->n)
                    snprintf(e, ERR, "data shard '%s': cannot read its loss mask at index %ld", path, p->off);
                else if ((bad = first_bad_mask(buf, p->n, &counted[j])) >= 0)
                    snprintf(e, ERR, "data shard '%s': loss mask value %d at index %ld (must be 0 or 1)", path, buf[bad],
                             p->off + bad);
            }
            if (fd >= 0) close(fd);
        }
        free(buf);
    }
    long j = 0;
    for (int i = 0; i < s.n_files; i++) {
        if (err[(size_t)i * ERR]) fail("%s", err + (size_t)i * ERR);
        long marked = 0;
        for (; j < k && pc[j].file == i; j++) {
            if (perr[(size_t)j * ERR]) fail("%s", perr + (size_t)j * ERR);
            marked += counted[j];
        }
        if (sh[i].masked && !marked) fail("data shard '%s': its loss mask counts no token", s.files[i]);
    }
    for (int i = 0; i < s.n_files; i++) free(s.files[i]);
    free(s.files);
    free(sh);
    free(err);
    free(pc);
    free(perr);
    free(counted);
    return total;
}

// Training order: each epoch visits the shards in a seeded random order and, within a
// shard, its windows of T+1 tokens (stride T) in a seeded random order. The position
// (epoch, shard_pos, sample_pos) is the whole state: a resumed run recomputes the
// same permutations from the seed.
typedef struct {
    ShardList shards;
    int vocab_size, T;
    uint64_t seed;
    long epoch;
    int shard_pos, sample_pos;
    int *shard_order;             // (n_files) this epoch's shard order
    int cur_shard;                // loaded shard index or -1
    int *tokens; long n_tokens;   // the loaded shard
    unsigned char *mask;          // its loss mask, or NULL (every token counts)
    int masked;                   // some shard has a mask: batches come with masks
    int *sample_order; int n_samples;
} DataLoader;

static inline void loader_load_current(DataLoader *d) {
    Rng r = rng_make(d->seed, RNG_DATA * 1000003ULL + (uint64_t)d->epoch);
    rng_permute(&r, d->shard_order, d->shards.n_files);
    int s = d->shard_order[d->shard_pos];
    if (s != d->cur_shard) {
        free(d->tokens);
        free(d->mask);
        d->tokens = shard_load(d->shards.files[s], d->vocab_size, &d->n_tokens, &d->mask);
        d->cur_shard = s;
    }
    d->n_samples = (int)((d->n_tokens - 1) / d->T);
    if (d->n_samples < 1) fail("data shard '%s' has %ld tokens, fewer than one window of %d", d->shards.files[s], d->n_tokens, d->T + 1);
    free(d->sample_order);
    d->sample_order = (int *)xmalloc(d->n_samples * sizeof(int));
    Rng r2 = rng_make(d->seed, RNG_DATA * 7919ULL + (uint64_t)d->epoch * 65537ULL + (uint64_t)s);
    rng_permute(&r2, d->sample_order, d->n_samples);
}

static inline void loader_init(DataLoader *d, const char *pattern, int vocab_size, int T, uint64_t seed) {
    memset(d, 0, sizeof(*d));
    d->shards = shards_glob(pattern, "--train_data");
    d->vocab_size = vocab_size;
    d->T = T;
    d->seed = seed;
    d->cur_shard = -1;
    d->shard_order = (int *)xmalloc(d->shards.n_files * sizeof(int));
    for (int i = 0; i < d->shards.n_files; i++) {  // header[3] of each shard (shard_load checks the rest)
        FILE *f = fopen(d->shards.files[i], "rb");
        int32_t h[4];
        if (f && fread(h, 4, 4, f) == 4 && h[3] == 1) d->masked = 1;
        if (f) fclose(f);
    }
    loader_load_current(d);
}

// Jump to a saved position (from a checkpoint).
static inline void loader_seek(DataLoader *d, long epoch, int shard_pos, int sample_pos) {
    if (shard_pos < 0 || shard_pos >= d->shards.n_files) fail("checkpoint data position: shard %d of %d (different --train_data?)", shard_pos, d->shards.n_files);
    d->epoch = epoch;
    d->shard_pos = shard_pos;
    loader_load_current(d);
    if (sample_pos < 0 || sample_pos > d->n_samples) fail("checkpoint data position: sample %d of %d (different --train_data?)", sample_pos, d->n_samples);
    d->sample_pos = sample_pos;
}

// Fill B rows of T+1 tokens: inputs are row[0..T-1], targets row[1..T]; masks (B,T+1),
// when given, get the loss mask of the same tokens (1 where a shard has none).
static inline void loader_next_batch(DataLoader *d, int B, int *rows /* (B,T+1) */, unsigned char *masks) {
    for (int b = 0; b < B; b++) {
        if (d->sample_pos >= d->n_samples) {
            d->sample_pos = 0;
            if (++d->shard_pos >= d->shards.n_files) {
                d->shard_pos = 0;
                d->epoch++;
            }
            loader_load_current(d);
        }
        long off = (long)d->sample_order[d->sample_pos++] * d->T;
        memcpy(rows + (size_t)b * (d->T + 1), d->tokens + off, (d->T + 1) * sizeof(int));
        if (masks && d->mask) memcpy(masks + (size_t)b * (d->T + 1), d->mask + off, d->T + 1);
        else if (masks) memset(masks + (size_t)b * (d->T + 1), 1, d->T + 1);
    }
}

// Per-target weights of one step from its masks (rows, T+1): w (rows, T) = mask / (the
// step's counted targets), so the step's loss is the mean over its counted targets however
// it is split into micro-batches. Returns that count (0: every weight 0).
static inline long loss_weights(float *w, const unsigned char *masks, int rows, int T) {
    long count = 0;
    for (long i = 0; i < (long)rows * (T + 1); i++) count += i % (T + 1) != 0 && masks[i];
    for (int r = 0; r < rows; r++)
        for (int t = 0; t < T; t++) w[(size_t)r * T + t] = count ? masks[(size_t)r * (T + 1) + t + 1] / (float)count : 0.0f;
    return count;
}

static inline void loader_free(DataLoader *d) {
    for (int i = 0; i < d->shards.n_files; i++) free(d->shards.files[i]);
    free(d->shards.files);
    free(d->shard_order);
    free(d->tokens);
    free(d->mask);
    free(d->sample_order);
}

// Tokens in the shards a glob matches, from their headers: the largest shard and the total.
// No match counts 0 (the loader names the missing file later).
static inline void shard_token_counts(const char *pattern, double *largest, double *total) {
    *largest = *total = 0;
    glob_t g;
    if (glob(pattern, 0, NULL, &g) != 0) return;
    for (size_t i = 0; i < g.gl_pathc; i++) {
        FILE *f = fopen(g.gl_pathv[i], "rb");
        int32_t h[3];
        if (f && fread(h, 4, 3, f) == 3 && h[2] > 0) {
            *total += h[2];
            if (h[2] > *largest) *largest = h[2];
        }
        if (f) fclose(f);
    }
    globfree(&g);
}

// The validation stream: every matching shard, concatenated in file-name order. *mask_out:
// the shards' loss masks in the same order (a shard without one counts every token), or
// NULL when no shard has one.
static inline int *val_stream_load(const char *pattern, int vocab_size, long *n_out, unsigned char **mask_out) {
    ShardList s = shards_glob(pattern, "--val_data");
    long total = 0;
    int *all = NULL, masked = 0;
    unsigned char *mask = NULL;  // every shard's (all ones without one); dropped if none has one
    for (int i = 0; i < s.n_files; i++) {
        long n;
        unsigned char *m = NULL;
        int *t = shard_load(s.files[i], vocab_size, &n, &m);
        all = (int *)realloc(all, (total + n) * sizeof(int));
        mask = (unsigned char *)realloc(mask, total + n);
        if (!all || !mask) fail("out of memory loading validation data");
        memcpy(all + total, t, n * sizeof(int));
        if (m) memcpy(mask + total, m, n);
        else memset(mask + total, 1, n);
        masked |= m != NULL;
        total += n;
        free(t);
        free(m);
        free(s.files[i]);
    }
    free(s.files);
    if (!masked) {
        free(mask);
        mask = NULL;
    }
    *n_out = total;
    *mask_out = mask;
    return all;
}
