// Passkey retrieval (the format of Landmark Attention, YaRN and LongLoRA): an intro line,
// filler sentences, the needle "The pass key is K. Remember it. K is the pass key." at a
// random depth, and the question; greedy decoding; correct when the first integer of the
// output equals K. Byte-tokenizer prompts are built here; BPE prompts come pre-tokenized
// from data/passkey_prompts.py.
#pragma once
#include "utils.h"
#include <ctype.h>
#include "rng.h"
#include "tensorfile.h"

static const char *PASSKEY_INTRO =
    "There is an important info hidden inside a lot of irrelevant text. Find it and memorize them. "
    "I will quiz you about the important information there.";
static const char *PASSKEY_FILLER = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";
static const char *PASSKEY_QUESTION = "What is the pass key? The pass key is";

// Draw a key: [1, 50000], or five digits [10000, 99999].
static inline int passkey_draw_key(Rng *r, int digits) {
    return digits == 5 ? 10000 + (int)rng_below(r, 90000) : 1 + (int)rng_below(r, 50000);
}

// The prompt, in Landmark Attention's layout: intro, fillers before, needle, fillers
// after, question, joined by newlines (an empty filler part is left out), fillers within
// a part joined by spaces. As many fillers as fit in max_bytes; the needle goes after
// round(depth * n) of the n fillers. Writes the text into buf (size >= max_bytes + 1) and
// returns its length, or -1 when the prompt does not fit even without filler.
// *depth_out: the actual depth (0 when there is no filler).
static inline int passkey_build_text(char *buf, int max_bytes, int key, double depth, double *depth_out) {
    char needle[128];
    snprintf(needle, sizeof(needle), "The pass key is %d. Remember it. %d is the pass key.", key, key);
    int filler = (int)strlen(PASSKEY_FILLER);
    int fixed = (int)(strlen(PASSKEY_INTRO) + 1 + strlen(needle) + 1 + strlen(PASSKEY_QUESTION));
    if (max_bytes < fixed) return -1;
    // n fillers split into parts of a and n-a cost n*filler + (n-1 or n-2 spaces) + 1 newline per non-empty part
    int n = 0;
    for (;;) {
        int m = n + 1, a = (int)(depth * m + 0.5), cost = fixed;
        for (int part = 0; part < 2; part++) {
            int k = part ? m - a : a;
            if (k) cost += k * filler + (k - 1) + 1;
        }
        if (cost > max_bytes) break;
        n = m;
    }
    int before = (int)(depth * n + 0.5), len = 0;
    *depth_out = n ? (double)before / n : 0.0;
    size_t cap = (size_t)max_bytes + 1;  // the costs above keep len <= max_bytes
    len += snprintf(buf + len, cap - len, "%s\n", PASSKEY_INTRO);
    for (int i = 0; i < before; i++) len += snprintf(buf + len, cap - len, "%s%s", PASSKEY_FILLER, i + 1 < before ? " " : "\n");
    len += snprintf(buf + len, cap - len, "%s\n", needle);
    for (int i = before; i < n; i++) len += snprintf(buf + len, cap - len, "%s%s", PASSKEY_FILLER, i + 1 < n ? " " : "\n");
    len += snprintf(buf + len, cap - len, "%s", PASSKEY_QUESTION);
    return len;
}

// RULER's single needle (niah_single with the noise haystack: a word key, a 7-digit value),
// in RULER's layout: intro, one paragraph of fillers with the needle at a random depth,
// the question ending in the answer's prefix; correct when the value appears in the
// output (RULER's string match). Byte-tokenizer prompts are built here; BPE prompts come
// pre-tokenized from data/passkey_prompts.py --task ruler (the same file format, keys = values).
static const char *RULER_INTRO = "Some special magic numbers are hidden within the following text. Make sure to memorize "
                                 "it. I will quiz you about the numbers afterwards.";
static const char *RULER_ADJ[16] = {"ancient", "bright", "calm", "damp", "eager", "faint", "gentle", "hollow",
                                    "icy", "jolly", "keen", "lively", "mellow", "noisy", "odd", "proud"};
static const char *RULER_NOUN[16] = {"anchor", "basket", "candle", "desert", "engine", "forest", "garden", "harbor",
                                     "island", "jacket", "kettle", "ladder", "meadow", "needle", "orchard", "pillow"};

// A key ("adjective-noun", written into key, size >= 32) and a value in [1000000, 9999999].
static inline long ruler_draw(Rng *r, char *key) {
    snprintf(key, 32, "%s-%s", RULER_ADJ[rng_below(r, 16)], RULER_NOUN[rng_below(r, 16)]);
    return 1000000 + (long)rng_below(r, 9000000);
}

// The prompt with as many fillers as fit in max_bytes, the needle after round(depth * n)
// of the n fillers; returns its length, or -1 when it does not fit without filler.
static inline int ruler_build_text(char *buf, int max_bytes, const char *key, long value, double depth, double *depth_out) {
    char needle[128], question[256];
    snprintf(needle, sizeof(needle), "One of the special magic numbers for %s is: %ld.", key, value);
    snprintf(question, sizeof(question), "What is the special magic number for %s mentioned in the provided text? "
             "The special magic number for %s mentioned in the provided text is", key, key);
    int filler = (int)strlen(PASSKEY_FILLER);
    int fixed = (int)(strlen(RULER_INTRO) + 1 + strlen(needle) + 1 + strlen(question));
    if (max_bytes < fixed) return -1;
    int n = (max_bytes - fixed) / (filler + 1);  // each filler and its space
    int before = (int)(depth * n + 0.5), len = 0;
    *depth_out = n ? (double)before / n : 0.0;
    size_t cap = (size_t)max_bytes + 1;
    len += snprintf(buf + len, cap - len, "%s\n", RULER_INTRO);
    for (int i = 0; i < before; i++) len += snprintf(buf + len, cap - len, "%s ", PASSKEY_FILLER);
    len += snprintf(buf + len, cap - len, "%s", needle);
    for (int i = before; i < n; i++) len += snprintf(buf + len, cap - len, " %s", PASSKEY_FILLER);
    len += snprintf(buf + len, cap - len, "\n%s", question);
    return len;
}

// Whether the decimal value appears in text.
static inline int ruler_found(const char *text, long value) {
    char v[32];
    snprintf(v, sizeof(v), "%ld", value);
    return strstr(text, v) != NULL;
}

// The first integer in text, or -1.
static inline long passkey_first_integer(const char *text) {
    for (const char *p = text; *p; p++)
        if (isdigit((unsigned char)*p)) return strtol(p, NULL, 10);
    return -1;
}

// Pre-tokenized prompts (a tensor file of kind 3: tokens, offsets, keys, lengths, depths;
// for RULER the keys are the needles' values).
// Lengths stay below the last exact fp32 position (2^24), minus the generated tokens.
#define MAX_PROMPT ((1 << 24) - 16)
typedef struct {
    TensorFile tf;
    int n;
    const int *tokens, *offsets, *keys, *lengths;
    const float *depths;
} PasskeyPrompts;

static inline void passkey_prompts_load(PasskeyPrompts *p, const char *path, int vocab_size, const char *flag) {
    tf_load(&p->tf, path, TF_KIND_DUMP);
    const TensorEntry *k = tf_find(&p->tf, "keys");
    if (!k) fail("%s: '%s' has no tensor 'keys'", flag, path);
    if (k->numel > (1u << 24)) fail("%s: '%s' has %zu prompts, more than %d", flag, path, k->numel, 1 << 24);
    p->n = (int)k->numel;
    p->keys = (const int *)tf_get(&p->tf, "keys", TF_I32, p->n);
    p->lengths = (const int *)tf_get(&p->tf, "lengths", TF_I32, p->n);
    p->depths = (const float *)tf_get(&p->tf, "depths", TF_F32, p->n);
    p->tokens = tf_ragged(&p->tf, "tokens", "offsets", p->n, 0, MAX_PROMPT, vocab_size, flag, "prompt", &p->offsets);
    for (int i = 0; i < p->n; i++) {
        if (p->lengths[i] < 1 || p->lengths[i] > MAX_PROMPT)
            fail("%s: '%s': prompt %d has length %d, outside [1, %d]", flag, path, i, p->lengths[i], MAX_PROMPT);
        if ((long)p->offsets[i + 1] - p->offsets[i] > p->lengths[i])
            fail("%s: '%s': prompt %d has %ld tokens, more than its length %d", flag, path, i,
                 (long)p->offsets[i + 1] - p->offsets[i], p->lengths[i]);
    }
}
