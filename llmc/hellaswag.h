// HellaSwag (the PosAug paper's Table 14), scored as lm-evaluation-harness's `hellaswag`
// task: for each of the four endings, the sum of its tokens' losses given the context;
// acc picks the lowest sum, acc_norm the lowest sum per character of the ending. The file
// comes from data/hellaswag.py (a tensor file of kind 3, doc/formats.md §10); the losses
// from an EvalModel's full causal pass, so both trainers score it the same way.
#pragma once
#include "utils.h"
#include "tensorfile.h"

typedef struct {
    TensorFile tf;
    int n;  // examples
    const int *ctx_tokens, *ctx_offsets, *end_tokens, *end_offsets, *end_chars, *labels;
} HellaSwag;

#define HS_MAX_TOKENS (1 << 20)  // context + ending, far above any real example

// Loads and checks the file: offsets that start at 0, never decrease and end at the token
// counts, every token below the vocab size, labels in 0..3, no empty context or ending.
static inline void hellaswag_load(HellaSwag *h, const char *path, int vocab_size) {
    tf_load(&h->tf, path, TF_KIND_DUMP);
    const TensorEntry *l = tf_find(&h->tf, "labels");
    if (!l) fail("--hellaswag: '%s' has no tensor 'labels' (write it with data/hellaswag.py)", path);
    if (l->numel < 1 || l->numel > (1u << 24)) fail("--hellaswag: '%s' has %zu examples", path, l->numel);
    h->n = (int)l->numel;
    h->labels = (const int *)tf_get(&h->tf, "labels", TF_I32, h->n);
    h->end_chars = (const int *)tf_get(&h->tf, "end_chars", TF_I32, 4 * (size_t)h->n);
    h->ctx_tokens = tf_ragged(&h->tf, "ctx_tokens", "ctx_offsets", h->n, 1, HS_MAX_TOKENS, vocab_size, "--hellaswag",
                              "context", &h->ctx_offsets);
    h->end_tokens = tf_ragged(&h->tf, "end_tokens", "end_offsets", 4 * h->n, 1, HS_MAX_TOKENS, vocab_size, "--hellaswag",
                              "ending", &h->end_offsets);
    for (int i = 0; i < h->n; i++) {
        if (h->labels[i] < 0 || h->labels[i] > 3) fail("--hellaswag: '%s': example %d has label %d, not 0..3", path, i, h->labels[i]);
        for (int j = 0; j < 4; j++)
            if (h->end_chars[4 * i + j] < 1)
                fail("--hellaswag: '%s': ending %d of example %d has %d characters", path, j, i, h->end_chars[4 * i + j]);
    }
}

// The best of four scores (the lowest; the first on ties, as argmax over log-likelihoods).
static inline int hellaswag_pick(const double s[4]) {
    int best = 0;
    for (int j = 1; j < 4; j++)
        if (s[j] < s[best]) best = j;
    return best;
}
