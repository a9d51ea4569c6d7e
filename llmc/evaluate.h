// The paper's per-position evaluation (PosAug paper, Section 3), driven the same way by
// both trainers: n contiguous validation sequences of length L_eval at offsets 0, L_eval,
// 2 L_eval, ...; one full causal pass each at standard positions; loss(i) averaged over
// the sequences; in-distribution, OOD and cliff; a CSV and a JSON summary.
#pragma once
#include <unistd.h>
#include "config.h"
#include "dataloader.h"
#include "metrics.h"

// Fills losses[i] (i < L) with the loss of predicting tokens[i+1] at position i.
typedef void (*SequenceLossFn)(void *model, const int *tokens, int L, float *losses);

static inline void evaluate_per_position(SequenceLossFn fn, void *model, const int *val, long n_val, int L_eval,
                                         int n_seq, double *loss_out) {
    if ((long)n_seq * L_eval + 1 > n_val)
        fail("--val_data has %ld tokens; the evaluation needs %ld (--eval_n %d x --eval_len %d + 1)", n_val,
             (long)n_seq * L_eval + 1, n_seq, L_eval);
    float *losses = (float *)xmalloc(L_eval * sizeof(float));
    for (int i = 0; i < L_eval; i++) loss_out[i] = 0.0;
    double t0 = wall_time();
    for (int s = 0; s < n_seq; s++) {
        fn(model, val + (long)s * L_eval, L_eval, losses);
        for (int i = 0; i < L_eval; i++) loss_out[i] += (double)losses[i] / n_seq;
        if (isatty(2)) {
            char eta[32];
            format_duration((wall_time() - t0) / (s + 1) * (n_seq - s - 1), eta, sizeof(eta));
            fprintf(stderr, "\reval: sequence %d/%d, ETA %s   ", s + 1, n_seq, eta);
        }
    }
    if (isatty(2)) fprintf(stderr, "\n");
    free(losses);
}

// A terminal picture of loss(i): mean loss in 16 equal position buckets, as bars on a
// fixed scale (full width = ln V, the loss of a uniform guess) so runs compare by eye.
static inline void print_loss_bars(const double *loss, int L_eval, int w, int V) {
    enum { NB = 16, WIDTH = 50 };
    double mean[NB], top = log((double)V);
    for (int k = 0; k < NB; k++) {
        int lo = (int)((long)L_eval * k / NB), hi = (int)((long)L_eval * (k + 1) / NB);
        mean[k] = mean_range(loss, lo, hi);
    }
    printf("loss by position (the training window ends at %d):\n", w);
    for (int k = 0; k < NB; k++) {
        int lo = (int)((long)L_eval * k / NB), hi = (int)((long)L_eval * (k + 1) / NB);
        int n = (int)(WIDTH * fmin(mean[k] / top, 1.0) + 0.5);
        printf("  %6d-%-6d %s ", lo, hi - 1, lo < w ? "in " : "OOD");
        for (int i = 0; i < n; i++) fputs("#", stdout);
        printf(" %.3f\n", mean[k]);
    }
}

static inline void run_evaluation(const Config *c, SequenceLossFn fn, void *model) {
    if (!c->eval_len) return;
    long n_val;
    int *val = val_stream_load(c->val_data, c->V, &n_val);
    double *loss = (double *)xmalloc(c->eval_len * sizeof(double));
    double t0 = wall_time();
    evaluate_per_position(fn, model, val, n_val, c->eval_len, c->eval_n, loss);
    CliffSummary s = cliff_summary(loss, c->eval_len, c->T, c->indist_start);
    char tag[64];
    snprintf(tag, sizeof(tag), "eval_L%d", c->eval_len);
    write_eval_files(c->out_dir, tag, loss, c->eval_len, c->T, c->indist_start, c->eval_n,
                     POS_SCHEME_NAMES[c->pos_scheme], s);
    print_loss_bars(loss, c->eval_len, c->T, c->V);
    printf("eval (%s, L_eval %d, %d sequences, %.1fs): in-dist %.4f | OOD %.4f | cliff %.4f\n",
           POS_SCHEME_NAMES[c->pos_scheme], c->eval_len, c->eval_n, wall_time() - t0, s.in_dist, s.ood, s.cliff);
    printf("wrote %s/%s.csv and %s/%s.json\n", c->out_dir, tag, c->out_dir, tag);
    free(loss);
    free(val);
}
