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

// Load one shard as int32 tokens, and its loss mask into *mask_out (NULL without one; pass
// mask_out NULL to drop it); fails with a message naming the defect.
static inline int *shard_load(const char *path, int vocab_size, long *n_out, unsigned char **mask_out) {
    FILE *f = fopen(path, "rb");
    if (!f) fail("cannot open data shard '%s'", path);
    int32_t h[256];
    if (fread(h, 4, 256, f) != 256) fail("data shard '%s' is truncated: no complete 1024-byte header", path);
    int width;
    if (h[0] == SHARD_MAGIC_U16) {
        if (h[1] != 1) fail("data shard '%s': version %d with magic %d; expected version 1", path, h[1], h[0]);
        width = 2;
    } else if (h[0] == SHARD_MAGIC_U32) {
        if (h[1] != 7) fail("data shard '%s': version %d with magic %d; expected version 7", path, h[1], h[0]);
        width = 4;
    } else {
        fail("data shard '%s' has wrong magic %d (expected %d for uint16 or %d for uint32 tokens)", path, h[0],
             SHARD_MAGIC_U16, SHARD_MAGIC_U32);
    }
    long n = h[2];
    if (h[3] != 0 && h[3] != 1)
        fail("data shard '%s': header[3] is %d, neither 0 (no loss mask) nor 1 (a loss mask follows the tokens)", path, h[3]);
    int masked = h[3] == 1;
    long expect = 1024 + n * width + (masked ? n : 0), size = file_size(f);
    if (n <= 0) fail("data shard '%s' holds %ld tokens", path, n);
    const char *with = masked ? " and their mask" : "";
    if (size < expect) fail("data shard '%s' is truncated: header says %ld tokens%s (%ld bytes), file has %ld bytes", path, n, with, expect, size);
    if (size > expect) fail("data shard '%s' is corrupt: header says %ld tokens%s (%ld bytes), file has %ld bytes", path, n, with, expect, size);
    int *tok = (int *)xmalloc(n * sizeof(int));
    if (width == 2) {
        uint16_t *raw = (uint16_t *)xmalloc(n * 2);
        xfread(raw, n * 2, f, path, "tokens");
        for (long i = 0; i < n; i++) tok[i] = raw[i];
        free(raw);
    } else {
        uint32_t *raw = (uint32_t *)xmalloc(n * 4);
        xfread(raw, n * 4, f, path, "tokens");
        for (long i = 0; i < n; i++) {
            if (raw[i] > 0x7fffffffu) fail("data shard '%s': token %u at index %ld is >= vocab size %d", path, raw[i], i, vocab_size);
            tok[i] = (int)raw[i];
        }
        free(raw);
    }
    unsigned char *mask = NULL;
    if (masked) {
        mask = (unsigned char *)xmalloc(n);
        xfread(mask, n, f, path, "loss mask");
        long counted = 0;
        for (long i = 0; i < n; i++) {
            if (mask[i] > 1) fail("data shard '%s': loss mask value %d at index %ld (must be 0 or 1)", path, mask[i], i);
            counted += mask[i];
        }
        if (!counted) fail("data shard '%s': its loss mask counts no token", path);
    }
    if (mask_out) *mask_out = mask;
    else free(mask);
    fclose(f);
    for (long i = 0; i < n; i++)
        if (tok[i] < 0 || tok[i] >= vocab_size)
            fail("data shard '%s': token %d at index %ld is >= vocab size %d (use --vocab_size or the matching tokenizer)",
                 path, tok[i], i, vocab_size);
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
    if (glob(pattern, 0, NULL, &g) != 0 || g.gl_pathc == 0) fail("%s: no file matches '%s'", flag, pattern);
    s.n_files = (int)g.gl_pathc;
    s.files = (char **)xmalloc(s.n_files * sizeof(char *));
    for (int i = 0; i < s.n_files; i++) s.files[i] = strdup(g.gl_pathv[i]);  // glob sorts
    globfree(&g);
    return s;
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
