// llmc/cuda/variants.cuh: which variant of each kernel family ran. A family's constant
// (FLASH_FWD_VARIANT, RMSNORM_BWD_VARIANT, SWIGLU_VARIANT, ROPE_VARIANT, ADAMW_VARIANT,
// CLASSIFIER_VARIANT) asks for a variant; its *_variant_for function says which one a call can take and, when it
// falls back to a lower one, why; its launcher notes every choice here. The first fallback
// of a family is printed when it happens. The trainer prints its plan at startup and writes
// what ran into log.jsonl (doc/formats.md); dev/cuda fails a version that did not run the
// variant it names, so a fallback is never timed as the variant asked for.
#pragma once
#include <stdio.h>

enum { VF_FLASH_FWD, VF_FLASH_BWD, VF_RMSNORM_BWD, VF_SWIGLU, VF_ROPE, VF_ADAMW, VF_CLASSIFIER, VF_N };

typedef struct {
    const char *name;      // the family, as log.jsonl names it
    int last;              // the variant the last launch ran
    const char *last_why;  // why the last launch fell back (NULL: it ran what it asked for)
    unsigned ran;          // bit v: some launch ran variant v
    const char *why;       // the first fallback's reason (NULL: none yet)
} VariantUse;

static inline VariantUse *variant_uses(void) {
    static VariantUse u[VF_N] = {{"flash_forward", 0, NULL, 0, NULL}, {"flash_backward", 0, NULL, 0, NULL},
                                 {"rmsnorm_backward", 0, NULL, 0, NULL}, {"swiglu", 0, NULL, 0, NULL},
                                 {"rope", 0, NULL, 0, NULL}, {"adamw", 0, NULL, 0, NULL},
                                 {"classifier", 0, NULL, 0, NULL}};
    return u;
}

// A *_variant_for function's fallback: the reason into *why (when asked), the variant it runs
static inline int variant_fallback(const char **why, const char *reason, int v) {
    if (why) *why = reason;
    return v;
}

// A launch of family f asked for variant `asked` and runs `ran` (why: the reason when they
// differ); returns ran
static inline int variant_note(int f, int asked, int ran, const char *why) {
    VariantUse *u = &variant_uses()[f];
    u->last = ran;
    u->last_why = ran != asked ? (why ? why : "no reason given") : NULL;
    u->ran |= 1u << ran;
    if (u->last_why && !u->why) {
        u->why = u->last_why;
        printf("kernel variant: %s runs v%d, not v%d: %s\n", u->name, ran, asked, u->why);
    }
    return ran;
}
