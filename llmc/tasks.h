// Length-generalization tasks (the RFS paper's copy, reverse, addition, sort, summation;
// data/rfs_tasks.py writes them): the test file. llmc/evaluate.h's run_task_evaluation
// decodes each prompt greedily for exactly its answer's length and scores exact match.
#pragma once
#include "utils.h"
#include "config.h"
#include "tensorfile.h"

typedef struct {
    TensorFile tf;
    int n;
    const int *prompt_tokens, *prompt_offsets, *answer_tokens, *answer_offsets, *lengths;
} TaskFile;

// Loads and checks a test file (a tensor file of kind 3, doc/formats.md §11).
static inline void task_file_load(TaskFile *t, const char *path, int vocab_size) {
    tf_load(&t->tf, path, TF_KIND_DUMP);
    const TensorEntry *l = tf_find(&t->tf, "lengths");
    if (!l) fail("--task_eval: '%s' has no tensor 'lengths' (write it with data/rfs_tasks.py)", path);
    if (l->numel < 1 || l->numel > (1u << 24)) fail("--task_eval: '%s' has %zu examples", path, l->numel);
    t->n = (int)l->numel;
    t->lengths = (const int *)tf_get(&t->tf, "lengths", TF_I32, t->n);
    t->prompt_tokens = tf_ragged(&t->tf, "prompt_tokens", "prompt_offsets", t->n, 1, MAX_SEQ, vocab_size, "--task_eval",
                                 "prompt", &t->prompt_offsets);
    t->answer_tokens = tf_ragged(&t->tf, "answer_tokens", "answer_offsets", t->n, 1, MAX_SEQ, vocab_size, "--task_eval",
                                 "answer", &t->answer_offsets);
    for (int i = 0; i < t->n; i++)
        if (t->lengths[i] < 1 || t->lengths[i] > 4096) fail("--task_eval: '%s': example %d has length %d, outside [1, 4096]", path, i, t->lengths[i]);
}

// The longest prompt + answer of the file (memory plans), 0 without --task_eval.
static inline int task_longest(const Config *c) {
    if (!c->task_eval[0]) return 0;
    TaskFile t;
    task_file_load(&t, c->task_eval, c->V);
    int longest = 0;
    for (int i = 0; i < t.n; i++) {
        int n = t.prompt_offsets[i + 1] - t.prompt_offsets[i] + t.answer_offsets[i + 1] - t.answer_offsets[i];
        longest = n > longest ? n : longest;
    }
    tf_free(&t.tf);
    return longest;
}
