// The parameter contract (names, shapes, which ones AdamW decays) and checkpoints,
// shared by both trainers so a checkpoint from either loads in the other.
// A checkpoint is a tensor file (llmc/tensorfile.h) of kind 2:
//   meta.config_i  int32 [V, Vp, C, L, NH, NKV, F, T, pos_scheme, pe]
//   meta.config_f  f32   [rope_base, rms_eps, alpha_min, alpha_max, alpha_fixed]
//   meta.state     u64   [step, seed, data_epoch, data_shard, data_sample]
//   param.<name>, adam_m.<name>, adam_v.<name>   f32, stacked shapes below
// Written to a temporary file, flushed, then renamed.
#pragma once
#include "config.h"
#include "tensorfile.h"

// The encoding a run has at a step (DroPE switches it off).
static inline int pe_at_step_cfg(const Config *c, long step) {
    return c->drope_step > 0 && step >= c->drope_step ? PE_NOPE : c->pe;
}

// Parameters: one contiguous buffer per kind (weights, grads, moments), a named view per
// tensor, stacked over layers.
enum { P_WTE, P_ATTN_NORM, P_WQ, P_WK, P_WV, P_WO, P_MLP_NORM, P_W_GATE, P_W_UP, P_W_DOWN, P_FINAL_NORM, NP };
static const char *PARAM_NAMES[NP] = {"wte", "attn_norm", "wq", "wk", "wv", "wo",
                                      "mlp_norm", "w_gate", "w_up", "w_down", "final_norm"};
static const int PARAM_DECAY[NP] = {1, 0, 1, 1, 1, 1, 0, 1, 1, 1, 0};  // AdamW decays matrices only

typedef struct {
    int ndim, shape[3];
    size_t numel;
} Shape;

static inline void param_shapes(const Config *c, Shape s[NP]) {
    int hd = c->C / c->NH, L = c->L;
    int t[NP][4] = {  // ndim, shape
        {2, c->Vp, c->C, 0},       {2, L, c->C, 0},           {3, L, c->NH * hd, c->C},
        {3, L, c->NKV * hd, c->C}, {3, L, c->NKV * hd, c->C}, {3, L, c->C, c->NH * hd},
        {2, L, c->C, 0},           {3, L, c->F, c->C},        {3, L, c->F, c->C},
        {3, L, c->C, c->F},        {1, c->C, 0, 0},
    };
    for (int i = 0; i < NP; i++) {
        s[i].ndim = t[i][0];
        s[i].numel = 1;
        for (int d = 0; d < 3; d++) s[i].shape[d] = t[i][d + 1];
        for (int d = 0; d < s[i].ndim; d++) s[i].numel *= (size_t)s[i].shape[d];
    }
}

// Seeded init, identical in both trainers: N(0, 0.02) for matrices and wte (its padded
// rows V..Vp-1 zero), wo and w_down scaled by 1/sqrt(2L), norm gains 1.
static inline void param_init(const Config *c, float *const *views, uint64_t seed) {
    Shape shapes[NP];
    param_shapes(c, shapes);
    Rng r = rng_make(seed, RNG_INIT);
    float proj = 0.02f / sqrtf(2.0f * c->L);
    for (int i = 0; i < NP; i++) {
        float *p = views[i], std = (i == P_WO || i == P_W_DOWN) ? proj : 0.02f;
        for (size_t j = 0; j < shapes[i].numel; j++) p[j] = PARAM_DECAY[i] ? std * rng_normal(&r) : 1.0f;
    }
    memset(views[P_WTE] + (size_t)c->V * c->C, 0, (size_t)(c->Vp - c->V) * c->C * sizeof(float));
}

typedef struct {
    long step;  // optimizer steps completed
    long data_epoch;
    int data_shard, data_sample;
    int pos_scheme, pe;  // the scheme, encoding and seed the checkpoint was trained with
    float alpha_min, alpha_max, alpha_fixed;
    long long seed;
} TrainState;

enum { CKI_V, CKI_VP, CKI_C, CKI_L, CKI_NH, CKI_NKV, CKI_F, CKI_T, CKI_POS, CKI_PE, CKI_N };
static const char *CKI_NAMES[CKI_N] = {"--vocab_size", "padded vocab", "--n_embd", "--n_layer", "--n_head",
                                       "--n_kv_head", "--ffn_hidden", "--seq_len", "--pos", "--pe"};
static const char *CK_GROUPS[3] = {"param", "adam_m", "adam_v"};

// params, m, v: host arrays of NP views each; m and v NULL to write weights only.
static inline void checkpoint_save(const Config *c, const TrainState *st, const char *path, float *const *params,
                                   float *const *m, float *const *v) {
    Shape shapes[NP];
    param_shapes(c, shapes);
    int32_t ci[CKI_N] = {c->V, c->Vp, c->C, c->L, c->NH, c->NKV, c->F, c->T, c->pos_scheme, pe_at_step_cfg(c, st->step)};
    float cf[5] = {c->rope_base, c->rms_eps, c->alpha_min, c->alpha_max, c->alpha_fixed};
    uint64_t state[5] = {(uint64_t)st->step, (uint64_t)c->seed, (uint64_t)st->data_epoch, (uint64_t)st->data_shard,
                         (uint64_t)st->data_sample};
    int groups = m ? 3 : 1;
    float *const *bufs[3] = {params, m, v};
    TensorWriter w;
    tw_open(&w, path, TF_KIND_CHECKPOINT, 3 + groups * NP);
    tw_add1(&w, "meta.config_i", TF_I32, CKI_N, ci);
    tw_add1(&w, "meta.config_f", TF_F32, 5, cf);
    tw_add1(&w, "meta.state", TF_U64, 5, state);
    char name[TF_MAX_NAME];
    for (int gi = 0; gi < groups; gi++)
        for (int i = 0; i < NP; i++) {
            snprintf(name, sizeof(name), "%s.%s", CK_GROUPS[gi], PARAM_NAMES[i]);
            tw_add(&w, name, TF_F32, shapes[i].ndim, shapes[i].shape, bufs[gi][i]);
        }
    tw_close(&w);
}

// Loads weights, the training state into st, and the moments when m and v are given
// (resuming training: then the seed must match too). The checkpoint's
// model must match the command line; a mismatch names the flag. The position scheme may
// differ (PosAug fine-tuning from a baseline).
static inline void checkpoint_load(const Config *c, TrainState *st, const char *path, float **params, float **m,
                                   float **v) {
    Shape shapes[NP];
    param_shapes(c, shapes);
    TensorFile tf;
    tf_load(&tf, path, TF_KIND_CHECKPOINT);
    const int32_t *ci = (const int32_t *)tf_get(&tf, "meta.config_i", TF_I32, CKI_N);
    const float *cf = (const float *)tf_get(&tf, "meta.config_f", TF_F32, 5);
    const uint64_t *state = (const uint64_t *)tf_get(&tf, "meta.state", TF_U64, 5);
    int32_t want[CKI_N] = {c->V, c->Vp, c->C, c->L, c->NH, c->NKV, c->F, c->T, c->pos_scheme, c->pe};
    for (int i = 0; i < CKI_POS; i++)  // the scheme and the encoding may change (PosAug fine-tuning, DroPE)
        if (ci[i] != want[i])
            fail("checkpoint '%s' is of another config: it has %s %d, this run has %d", path, CKI_NAMES[i], ci[i], want[i]);
    if (cf[0] != c->rope_base) fail("checkpoint '%s' was trained with --rope_base %g, this run has %g", path, cf[0], c->rope_base);
    int groups = m ? 3 : 1;
    float **bufs[3] = {params, m, v};
    char name[TF_MAX_NAME];
    for (int gi = 0; gi < groups; gi++)
        for (int i = 0; i < NP; i++) {
            snprintf(name, sizeof(name), "%s.%s", CK_GROUPS[gi], PARAM_NAMES[i]);
            memcpy(bufs[gi][i], tf_get(&tf, name, TF_F32, shapes[i].numel), shapes[i].numel * sizeof(float));
        }
    if (m && (long long)state[1] != c->seed)
        fail("checkpoint '%s' was trained with --seed %llu; resume with the same seed", path, (unsigned long long)state[1]);
    st->step = (long)state[0];
    st->data_epoch = (long)state[2];
    st->data_shard = (int)state[3];
    st->data_sample = (int)state[4];
    st->pos_scheme = ci[CKI_POS];
    st->pe = ci[CKI_PE];
    st->seed = (long long)state[1];
    st->alpha_min = cf[2];
    st->alpha_max = cf[3];
    st->alpha_fixed = cf[4];
    tf_free(&tf);
}

// Evaluating or sampling a checkpoint: label results with the scheme and seed it was
// trained with.
static inline void adopt_checkpoint_scheme(Config *c, const TrainState *st) {
    c->seed = st->seed;
    c->pe = st->pe;
    c->drope_step = 0;
    c->pos_scheme = st->pos_scheme;
    c->alpha_min = st->alpha_min;
    c->alpha_max = st->alpha_max;
    c->alpha_fixed = st->alpha_fixed;
}

// The run's log.jsonl: new, or on resume cut back to the steps the checkpoint holds
// (steps logged after it, before a crash, are run again and logged again).
static inline FILE *open_run_log(const char *path, long resume_step) {
    if (resume_step > 0) {
        FILE *f = fopen(path, "r");
        if (f) {
            long n = file_size(f);
            char *buf = (char *)xcalloc(n + 1, 1), *keep = (char *)xcalloc(n + 1, 1);
            xfread(buf, n, f, path, "the log");
            fclose(f);
            size_t used = 0;
            for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
                long step;
                if (sscanf(line, "{\"step\": %ld", &step) == 1 && step <= resume_step) {
                    size_t len = strlen(line);
                    memcpy(keep + used, line, len);
                    keep[used + len] = '\n';
                    used += len + 1;
                }
            }
            FILE *out = xfopen(path, "w");
            xfwrite(keep, used, out, path);
            free(buf);
            free(keep);
            return out;
        }
    }
    return xfopen(path, "w");
}

// A test case file (the input part of dev/reference_tiny.bin, kind 1): config_i
// [V, Vp, C, L, NH, NKV, F, T, B, micro, steps, warmup], config_f [rope_base, rms_eps, lr,
// min_lr, weight_decay, beta1, beta2, adam_eps, grad_clip, check_alpha], alphas, tokens,
// initial weights, and optionally pos_kind int32 [1] (0 RoPE, 1 NoPE, 2 ALiBi with the
// distances multiplied by the alphas). Both trainers' --dump_case read it.
static inline void config_from_case(Config *c, const TensorFile *tf, int *micro) {
    const int32_t *ci = (const int32_t *)tf_get(tf, "config_i", TF_I32, 12);
    const float *cf = (const float *)tf_get(tf, "config_f", TF_F32, 10);
    config_defaults(c);
    c->V = ci[0]; c->Vp = ci[1]; c->C = ci[2]; c->L = ci[3]; c->NH = ci[4]; c->NKV = ci[5]; c->F = ci[6]; c->T = ci[7];
    c->B = ci[8]; c->total_batch = ci[8] * ci[9]; c->steps = ci[10]; c->warmup = ci[11];
    c->rope_base = cf[0]; c->rms_eps = cf[1]; c->lr = cf[2]; c->min_lr = cf[3]; c->weight_decay = cf[4];
    c->beta1 = cf[5]; c->beta2 = cf[6]; c->adam_eps = cf[7]; c->grad_clip = cf[8];
    *micro = ci[9];
    const TensorEntry *pk = tf_find(tf, "pos_kind");  // 0 RoPE, 1 NoPE, 2 ALiBi (distances times the case's alphas)
    if (pk) {
        int kind = *(const int32_t *)tf_get(tf, "pos_kind", TF_I32, 1);
        if (kind < 0 || kind > 2) fail("'%s': unknown pos_kind %d", tf->path, kind);
        c->pe = kind == 1 ? PE_NOPE : kind == 2 ? PE_ALIBI : PE_ROPE;
    }
}

