// The training loop both trainers run: data order, the position schedule, the learning
// rate, logging (terminal and log.jsonl), validation and checkpoints. The trainer gives
// its model through three functions.
#pragma once
#include "checkpoint.h"
#include "config.h"
#include "dataloader.h"
#include "schedule.h"
#include <signal.h>  // after utils.h (through checkpoint.h), which sets the feature macros

// Model FLOPs per trained token, the convention of MFU (and of make bench): 6 per weight
// (2 forward, 4 backward; wte counted once, as the LM head, padded rows included since
// the product computes them) plus causal attention's two T x T products, forward and
// backward: 6 * L * T * NH * hd (half of 12 L T d, the causal mask skipping the rest).
// A GRU has only its weights' 6 per weight (its gates' elementwise work is not counted).
static inline double model_flops_per_token(const Config *c) {
    Shape s[NP];
    param_shapes(c, s);
    double n = 0;
    for (int i = 0; i < NP; i++) n += (double)s[i].numel;
    double attention = c->arch == ARCH_GRU ? 0.0 : 6.0 * c->L * c->T * (double)(c->NH * (c->C / c->NH));
    return 6.0 * n + attention;
}

typedef struct {
    void *model;
    // forward and backward over rows (accum, B, T+1); returns the mean loss, *norm the gradient
    // norm. weights (accum, B, T), with loss-masked data: each target's share of the step's
    // loss (llmc/dataloader.h's loss_weights); NULL: every target's share is 1/(accum B T).
    float (*gradients)(void *model, const int *rows, const float *weights, int accum, const PosStep *ps, float *norm);
    // clip with that norm, then one AdamW step; t is the 1-based step count
    void (*update)(void *model, float lr, int t, float norm);
    // mean validation loss over `batches` (B,T) windows; val_mask (n_val) or NULL: only the
    // targets it marks count (the mean is over the counted targets of all the windows)
    float (*val_loss)(void *model, const int *val, const unsigned char *val_mask, long n_val, int batches);
    void (*save)(void *model, const TrainState *st, const char *path);
    double flops_per_token, peak_flops;  // peak_flops > 0: log MFU, else GFLOP/s
    // more fields (", \"key\": value") for the first log.jsonl line this process writes, or NULL
    void (*first_log_fields)(void *model, FILE *log);
} TrainModel;

static inline void print_run_header(const Config *c, const char *where) {
    if (c->arch == ARCH_GRU) printf("--arch gru (no positions)");
    else printf("--pe %s --pos %s", PE_NAMES[c->pe], POS_SCHEME_NAMES[c->pos_scheme]);
    switch (POS_SCHEME_SHOW[c->pos_scheme]) {  // the scheme's parameters (llmc/schedule.h's POS_TABLE)
    case SHOW_SET: printf(" (alpha set %s)", c->alpha_set); break;
    case SHOW_RANGE: printf(" (alpha range [%g, %g])", c->alpha_min, c->alpha_max); break;
    default: break;
    }
#define POS_PARAM_SHOW(field, ctype, argtype, flag, def, scheme, check, must, help) \
    if (c->pos_scheme == scheme) printf(" (%s %g)", &(flag)[2], (double)c->field);
    POS_PARAM_TABLE(POS_PARAM_SHOW)
#undef POS_PARAM_SHOW
    if (c->pose_scaling)
        printf(" (%s x%g, train and evaluation)", POSE_SCALING_NAMES[c->pose_scaling], (double)c->pose_target / c->T);
    if (c->drope_step) printf(" | DroPE from step %d", c->drope_step);
    if (c->qk_norm) printf(" | QK-norm");
    printf(" | batch %d x %d (micro %d, accum %d) | %d steps | %.1f MFLOP per token | %s | out %s\n", c->total_batch, c->T,
           c->B, c->total_batch / c->B, c->steps, model_flops_per_token(c) / 1e6, where, c->out_dir);
}

// A graceful stop: the first SIGINT or SIGTERM lets the step finish, saves a checkpoint and
// exits (128 + the signal) saying how to resume; a second one ends the process at once.
static volatile sig_atomic_t stop_signal;
static void on_stop_signal(int sig) {
    if (stop_signal) {
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    stop_signal = sig;
    static const char msg[] = "\nstopping after this step, with a checkpoint (again to stop at once)\n";
    if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0) {}  // only async-signal-safe calls here
}
static inline void stop_signals(void (*handler)(int)) {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

// Trains from st->step; returns 1 when cfg->steps were reached, 0 after --stop_after.
static inline int run_training(const Config *cfg, TrainState *st, const TrainModel *m, const char *where) {
    PosConfig pc = pos_config_of(cfg);
    int accum = cfg->total_batch / cfg->B;
    print_run_header(cfg, where);
    DataLoader dl;
    loader_init(&dl, cfg->train_data, cfg->V, cfg->T, (uint64_t)cfg->seed);
    if (st->step > 0) loader_seek(&dl, st->data_epoch, st->data_shard, st->data_sample);
    long n_val = 0;
    unsigned char *val_mask = NULL;
    int *val = cfg->val_every ? val_stream_load(cfg->val_data, cfg->V, &n_val, &val_mask) : NULL;
    if (val && n_val < (long)cfg->B * cfg->T + 1)
        fail("--val_data has %ld tokens, fewer than one validation batch (%d x %d + 1); lower --batch_size or set --val_every 0",
             n_val, cfg->B, cfg->T);
    int *rows = (int *)xmalloc((size_t)cfg->total_batch * (cfg->T + 1) * sizeof(int));  // (accum,B,T+1)
    unsigned char *masks = dl.masked ? (unsigned char *)xmalloc((size_t)cfg->total_batch * (cfg->T + 1)) : NULL;
    float *weights = dl.masked ? (float *)xmalloc((size_t)cfg->total_batch * cfg->T * sizeof(float)) : NULL;
    if (dl.masked) printf("loss mask: only the targets the shards' masks mark count in the loss\n");
    char log_path[1100], ckpt_path[1100];
    snprintf(log_path, sizeof(log_path), "%s/log.jsonl", cfg->out_dir);
    snprintf(ckpt_path, sizeof(ckpt_path), "%s/checkpoint.bin", cfg->out_dir);
    char stale[1200];
    snprintf(stale, sizeof(stale), "%s.tmp", ckpt_path);
    if (remove(stale) == 0) printf("removed '%s', left by an interrupted save\n", stale);
    FILE *log = open_run_log(log_path, st->step);
    long saved = strcmp(cfg->resume, ckpt_path) == 0 ? st->step : -1;  // the newest checkpoint at ckpt_path
    stop_signal = 0;
    stop_signals(on_stop_signal);
    double t_start = wall_time();
    long first = st->step;
    long last = cfg->stop_after ? (cfg->stop_after < cfg->steps ? cfg->stop_after : cfg->steps) : cfg->steps;
    for (long step = st->step; step < last; step++) {
        double t0 = wall_time();
        PosStep ps = pos_schedule_step(&pc, step);  // the PosAug hook: this step's positions
        loader_next_batch(&dl, cfg->total_batch, rows, masks);
        if (masks) loss_weights(weights, masks, cfg->total_batch, cfg->T);  // a step with no counted target: all 0
        float lr = lr_at_step(step, cfg->warmup, cfg->steps, cfg->lr, cfg->min_lr), norm;
        float loss = m->gradients(m->model, rows, weights, accum, &ps, &norm);
        if (!isfinite(loss) || !isfinite(norm)) {  // stop before the update: the weights stay finite
            char last[1300];
            if (saved >= 0) snprintf(last, sizeof(last), "the last checkpoint ('%s', step %ld) is intact", ckpt_path, saved);
            else snprintf(last, sizeof(last), "no checkpoint was written by this run");
            fail("step %ld: the %s is %g, so the update was not applied; %s. The run diverged: lower --lr (now %g) or check the data",
                 step + 1, isfinite(loss) ? "gradient norm" : "loss", isfinite(loss) ? norm : loss, last, cfg->lr);
        }
        m->update(m->model, lr, (int)step + 1, norm);
        double dt = wall_time() - t0, elapsed = wall_time() - t_start;
        double tok_s = (double)cfg->total_batch * cfg->T / dt;
        char eta[32], mfu[64] = "";
        format_duration(elapsed / (step + 1 - first) * (cfg->steps - step - 1), eta, sizeof(eta));
        if (m->peak_flops > 0)
            snprintf(mfu, sizeof(mfu), " | MFU %.1f%% (of %.0f TFLOP/s)", 100 * tok_s * m->flops_per_token / m->peak_flops,
                     m->peak_flops / 1e12);
        else
            snprintf(mfu, sizeof(mfu), " | %.1f GFLOP/s", tok_s * m->flops_per_token / 1e9);
        printf("step %5ld/%d | loss %.4f | lr %.2e | norm %.3f | alpha %.3f | %.1f ms | %.0f tok/s%s | ETA %s\n", step + 1,
               cfg->steps, loss, lr, norm, ps.alpha[0], dt * 1e3, tok_s, mfu, eta);
        fprintf(log, "{\"step\": %ld, \"loss\": %.9g, \"lr\": %.6e, \"grad_norm\": %.6f, \"alpha\": %.6f, \"ms\": %.2f, \"tok_s\": %.1f",
                step + 1, loss, lr, norm, ps.alpha[0], dt * 1e3, tok_s);
        fprintf(log, ", \"gflops\": %.2f", tok_s * m->flops_per_token / 1e9);
        if (m->peak_flops > 0) fprintf(log, ", \"mfu\": %.4f", tok_s * m->flops_per_token / m->peak_flops);
        if (val && ((step + 1) % cfg->val_every == 0 || step + 1 == cfg->steps)) {
            float vl = m->val_loss(m->model, val, val_mask, n_val, cfg->val_batches);
            printf("step %5ld/%d | val loss %.4f\n", step + 1, cfg->steps, vl);
            fprintf(log, ", \"val_loss\": %.6f", vl);
        }
        if (step == first && m->first_log_fields) m->first_log_fields(m->model, log);
        fprintf(log, "}\n");
        if (fflush(log) != 0 || ferror(log)) fail("writing '%s' failed: %s (disk full?)", log_path, strerror(errno));
        st->step = step + 1;
        st->data_epoch = dl.epoch;
        st->data_shard = dl.shard_pos;
        st->data_sample = dl.sample_pos;
        if ((cfg->ckpt_every && st->step % cfg->ckpt_every == 0) || st->step == last || stop_signal) {
            m->save(m->model, st, ckpt_path);
            saved = st->step;
            printf("saved %s (step %ld)\n", ckpt_path, st->step);
        }
        if (stop_signal) {
            printf("stopped by %s after step %ld of %d; continue with --resume %s\n", stop_signal == SIGINT ? "SIGINT" : "SIGTERM",
                   st->step, cfg->steps, ckpt_path);
            exit(128 + stop_signal);
        }
    }
    stop_signals(SIG_DFL);  // the evaluation has nothing to save on the way out
    if (fclose(log) != 0) fail("writing '%s' failed: %s (disk full?)", log_path, strerror(errno));
    free(rows);
    free(masks);
    free(weights);
    free(val);
    free(val_mask);
    loader_free(&dl);
    if (st->step < cfg->steps) {
        printf("stopped after step %ld of %d (--stop_after); continue with --resume %s\n", st->step, cfg->steps, ckpt_path);
        return 0;
    }
    return 1;
}
