// Token shards in llm.c's format, so its data pipelines work here unchanged:
//   256 int32 header: [0] magic 20240520 + [1] version 1 (uint16 tokens)
//                  or [0] magic 20240801 + [1] version 7 (uint32 tokens); [2] token count
//   then the tokens. Documents are separated by the end-of-text token.
// Every token is checked against the vocab size when a shard is loaded.
#pragma once
#include "utils.h"
#include <glob.h>
#include "rng.h"

#define SHARD_MAGIC_U16 20240520
#define SHARD_MAGIC_U32 20240801

// Load one shard as int32 tokens; fails with a message naming the defect.
static inline int *shard_load(const char *path, int vocab_size, long *n_out) {
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
    long expect = 1024 + n * width, size = file_size(f);
    if (n <= 0) fail("data shard '%s' holds %ld tokens", path, n);
    if (size < expect) fail("data shard '%s' is truncated: header says %ld tokens (%ld bytes), file has %ld bytes", path, n, expect, size);
    if (size > expect) fail("data shard '%s' is corrupt: header says %ld tokens (%ld bytes), file has %ld bytes", path, n, expect, size);
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
    int *sample_order; int n_samples;
} DataLoader;

static inline void loader_load_current(DataLoader *d) {
    Rng r = rng_make(d->seed, RNG_DATA * 1000003ULL + (uint64_t)d->epoch);
    rng_permute(&r, d->shard_order, d->shards.n_files);
    int s = d->shard_order[d->shard_pos];
    if (s != d->cur_shard) {
        free(d->tokens);
        d->tokens = shard_load(d->shards.files[s], d->vocab_size, &d->n_tokens);
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

// Fill B rows of T+1 tokens: inputs are row[0..T-1], targets row[1..T].
static inline void loader_next_batch(DataLoader *d, int B, int *rows /* (B,T+1) */) {
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
    }
}

static inline void loader_free(DataLoader *d) {
    for (int i = 0; i < d->shards.n_files; i++) free(d->shards.files[i]);
    free(d->shards.files);
    free(d->shard_order);
    free(d->tokens);
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

// The validation stream: every matching shard, concatenated in file-name order.
static inline int *val_stream_load(const char *pattern, int vocab_size, long *n_out) {
    ShardList s = shards_glob(pattern, "--val_data");
    long total = 0;
    int *all = NULL;
    for (int i = 0; i < s.n_files; i++) {
        long n;
        int *t = shard_load(s.files[i], vocab_size, &n);
        all = (int *)realloc(all, (total + n) * sizeof(int));
        if (!all) fail("out of memory loading validation data");
        memcpy(all + total, t, n * sizeof(int));
        total += n;
        free(t);
        free(s.files[i]);
    }
    free(s.files);
    *n_out = total;
    return all;
}
