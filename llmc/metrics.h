// The paper's per-position metrics (PosAug paper, Section 3), shared by both trainers.
//   loss(i): mean over sequences of the loss predicting token i+1 at query position i
//   in-distribution: mean of loss(i) for indist_start <= i < w
//   out-of-distribution: mean of loss(i) for w <= i < L_eval
//   cliff = OOD - in-distribution
#pragma once
#include "utils.h"

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

// Per-position CSV (one row per position) and a JSON summary, both in the run folder.
static inline void write_eval_files(const char *out_dir, const char *tag, const double *loss, int L_eval, int w,
                             int indist_start, int n_seq, const char *pos_scheme, CliffSummary s) {
    char path[1100];
    snprintf(path, sizeof(path), "%s/%s.csv", out_dir, tag);
    FILE *f = xfopen(path, "w");
    fprintf(f, "position,loss\n");
    for (int i = 0; i < L_eval; i++) fprintf(f, "%d,%.6f\n", i, loss[i]);
    fclose(f);
    snprintf(path, sizeof(path), "%s/%s.json", out_dir, tag);
    f = xfopen(path, "w");
    fprintf(f, "{\"variant\": \"full\", \"L_eval\": %d, \"train_window\": %d, \"n_sequences\": %d, \"indist_start\": %d, "
               "\"pos_scheme\": \"%s\", \"in_dist\": %.6f, \"ood\": %.6f, \"cliff\": %.6f}\n",
            L_eval, w, n_seq, indist_start, pos_scheme, s.in_dist, s.ood, s.cliff);
    fclose(f);
}
