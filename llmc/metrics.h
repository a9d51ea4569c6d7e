// The paper's per-position metrics (PosAug paper, Section 3), shared by both trainers.
//   loss(i): mean over sequences of the loss predicting token i+1 at query position i
//   in-distribution: mean of loss(i) for indist_start <= i < w
//   out-of-distribution: mean of loss(i) for w <= i < L_eval
//   cliff = OOD - in-distribution;  penalty = in-dist / baseline in-dist - 1
//   G(C) = mean over W <= i < C of loss_W(i) - loss(i)   (loss_W: W-token context)
//   entropy ratio = mean attention entropy at OOD positions / at in-distribution positions
#pragma once
#include "utils.h"
#include <math.h>

typedef struct {
    double in_dist, ood, cliff;
} CliffSummary;

static inline double mean_range(const double *x, int lo, int hi) {
    double s = 0;
    for (int i = lo; i < hi; i++) s += x[i];
    return hi > lo ? s / (hi - lo) : NAN;
}

static inline CliffSummary cliff_summary(const double *loss, int L_eval, int w, int indist_start) {
    CliffSummary s;
    s.in_dist = mean_range(loss, indist_start, w < L_eval ? w : L_eval);
    s.ood = mean_range(loss, w, L_eval);
    s.cliff = s.ood - s.in_dist;
    return s;
}

static inline double context_gain(const double *loss_window, const double *loss_full, int W, int C) {
    double s = 0;
    for (int i = W; i < C; i++) s += loss_window[i] - loss_full[i];
    return C > W ? s / (C - W) : NAN;
}

static inline double entropy_ratio(const double *entropy, int L_eval, int w, int indist_start) {
    return mean_range(entropy, w, L_eval) / mean_range(entropy, indist_start, w < L_eval ? w : L_eval);
}

// The in-distribution loss of another run's evaluation JSON (for the penalty).
static inline double read_json_number(const char *path, const char *key) {
    FILE *f = fopen(path, "r");
    if (!f) fail("--baseline: cannot open '%s'", path);
    char buf[65536];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = 0;
    fclose(f);
    char pat[128];
    snprintf(pat, sizeof(pat), "\"%s\": ", key);
    char *p = strstr(buf, pat);
    double v;
    if (!p || sscanf(p + strlen(pat), "%lf", &v) != 1) fail("--baseline: '%s' has no number \"%s\"", path, key);
    return v;
}
