// The position schedule (the PosAug hook's host side) and the learning-rate schedule.
// Both trainers call pos_schedule_step() once per optimizer step; the RoPE kernels then
// compute every angle on the fly as  angle = (alpha_l * t + offset) * inv_freq[j].
// Adding a position scheme means adding a case here, not touching a kernel.
#pragma once
#include "rng.h"
#include "utils.h"

#define MAX_LAYERS 64
#define MAX_HALF_HD 128

enum {
    POS_ROPE = 0,     // p_t = t
    POS_POSAUG,       // alpha ~ U[a,b] per optimizer step, shared by every layer
    POS_POSAUG_LOG,   // ln alpha ~ U[ln a, ln b]
    POS_FIXED,        // constant alpha
    POS_N_SCHEMES
};
static const char *POS_SCHEME_NAMES[POS_N_SCHEMES] = {"rope", "posaug", "posaug-log", "fixed"};

typedef struct {
    int scheme;
    float alpha_min, alpha_max;  // PosAug range [a,b]
    float alpha_fixed;           // for "fixed"
    float rope_base;             // B in theta_j = B^(-2j/hd)
    int head_dim, n_layer;
    uint64_t seed;
} PosConfig;

// What one step's RoPE kernels read.
typedef struct {
    float alpha[MAX_LAYERS];        // p_t = alpha[l] * t + offset
    float offset;
    float inv_freq[MAX_HALF_HD];    // theta_j, fp32
    float mscale;                   // attention factor: multiplies cos and sin (1 in training)
} PosStep;

static inline void pos_inv_freq(float *inv_freq, int head_dim, double base) {
    for (int j = 0; j < head_dim / 2; j++) inv_freq[j] = (float)pow(base, -2.0 * j / head_dim);
}

// Standard positions (alpha 1, offset 0): evaluation and plain RoPE.
static inline PosStep pos_standard(const PosConfig *pc) {
    PosStep ps;
    for (int l = 0; l < MAX_LAYERS; l++) ps.alpha[l] = 1.0f;
    ps.offset = 0.0f;
    ps.mscale = 1.0f;
    pos_inv_freq(ps.inv_freq, pc->head_dim, pc->rope_base);
    return ps;
}

// ----------------------------------------------------------------------------
// Evaluation-time RoPE scaling, through the same hook (s = factor, w = training window).
//   PI            p_t = t / s
//   NTK-aware     B' = B * s^(hd/(hd-2))
//   dynamic NTK   for a sequence of n > w tokens: B' = B * (s*n/w - (s-1))^(hd/(hd-2)); unchanged for n <= w
//   NTK-by-parts  theta'_j = (theta_j/s) * ramp_j + theta_j * (1 - ramp_j)
//   YaRN          NTK-by-parts plus an attention factor m on cos and sin: m = 0.1 ln s + 1
//                 (YaRN / Hugging Face) or m = sqrt(1 + 0.1 ln s) (the PosAug paper's text)
// ramp_j = clamp((j - low) / (high - low), 0, 1), low = floor(d(beta_fast)), high = ceil(d(beta_slow))
// clamped to [0, hd/2-1], d(r) = hd * ln(w / (2 pi r)) / (2 ln B).
enum { SCALE_NONE = 0, SCALE_PI, SCALE_NTK, SCALE_DYN_NTK, SCALE_NTK_PARTS, SCALE_YARN, SCALE_N };
static const char *SCALE_NAMES[SCALE_N] = {"none", "pi", "ntk", "dynamic-ntk", "ntk-by-parts", "yarn"};
enum { YARN_TEMP_HF = 0, YARN_TEMP_PAPER };

typedef struct {
    int method;
    float factor;                // s
    float beta_fast, beta_slow;  // YaRN ramp (32, 1)
    int temperature;             // YARN_TEMP_HF or YARN_TEMP_PAPER
    int train_window;            // w
} EvalScaling;

// YaRN's ramp boundaries in rotary dimensions j (0 <= j < hd/2).
static inline void yarn_low_high(int hd, double base, int w, double beta_fast, double beta_slow, int *low, int *high) {
    const double pi = 3.14159265358979323846;
    double d_fast = hd * log(w / (2 * pi * beta_fast)) / (2 * log(base));
    double d_slow = hd * log(w / (2 * pi * beta_slow)) / (2 * log(base));
    int lo = (int)floor(d_fast), hi = (int)ceil(d_slow), top = hd / 2 - 1;
    *low = lo < 0 ? 0 : lo > top ? top : lo;
    *high = hi < 0 ? 0 : hi > top ? top : hi;
}

// Standard positions with the scaling applied, for a sequence of seq_len tokens.
static inline PosStep pos_eval_step(const PosConfig *pc, const EvalScaling *es, int seq_len) {
    PosStep ps = pos_standard(pc);
    int hd = pc->head_dim;
    double s = es->factor, B = pc->rope_base, expo = (double)hd / (hd - 2);
    switch (es->method) {
    case SCALE_PI:
        for (int l = 0; l < MAX_LAYERS; l++) ps.alpha[l] = (float)(1.0 / s);
        break;
    case SCALE_NTK: pos_inv_freq(ps.inv_freq, hd, B * pow(s, expo)); break;
    case SCALE_DYN_NTK:
        if (seq_len > es->train_window) pos_inv_freq(ps.inv_freq, hd, B * pow(s * seq_len / es->train_window - (s - 1), expo));
        break;
    case SCALE_NTK_PARTS:
    case SCALE_YARN: {
        int low, high;
        yarn_low_high(hd, B, es->train_window, es->beta_fast, es->beta_slow, &low, &high);
        double span = high > low ? high - low : 0.001;  // as Hugging Face: avoid 0/0
        for (int j = 0; j < hd / 2; j++) {
            double ramp = (j - low) / span, theta = pow(B, -2.0 * j / hd);
            ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
            ps.inv_freq[j] = (float)(theta / s * ramp + theta * (1 - ramp));
        }
        if (es->method == SCALE_YARN && s > 1) {
            double m = 0.1 * log(s) + 1.0;
            ps.mscale = (float)(es->temperature == YARN_TEMP_PAPER ? sqrt(m) : m);
        }
        break;
    }
    default: break;
    }
    return ps;
}

// Draw this optimizer step's alpha. Counter-based (a fresh stream per step from the seed),
// so the sequence is a pure function of (seed, step): resume needs no extra state and the
// CPU and GPU trainers draw identical numbers.
static inline float pos_draw_alpha(const PosConfig *pc, long step) {
    Rng r = rng_make(pc->seed, (uint64_t)RNG_POS * 1000000007ULL + (uint64_t)step);
    float u = rng_f32(&r), a = pc->alpha_min, b = pc->alpha_max;
    switch (pc->scheme) {
    case POS_POSAUG: return a + (b - a) * u;
    case POS_POSAUG_LOG: return expf(logf(a) + (logf(b) - logf(a)) * u);
    case POS_FIXED: return pc->alpha_fixed;
    default: return 1.0f;
    }
}

// THE POSAUG HOOK (host side): positions and frequencies for optimizer step `step`.
static inline PosStep pos_schedule_step(const PosConfig *pc, long step) {
    PosStep ps = pos_standard(pc);
    float alpha = pos_draw_alpha(pc, step);
    for (int l = 0; l < pc->n_layer; l++) ps.alpha[l] = alpha;
    return ps;
}

// Linear warmup, then cosine from lr to min_lr (0-based step).
static inline float lr_at_step(long step, long warmup, long steps, float lr, float min_lr) {
    if (step < warmup) return lr * (float)(step + 1) / (float)warmup;
    double r = (double)(step - warmup) / (double)(steps - warmup > 1 ? steps - warmup : 1);
    if (r > 1.0) r = 1.0;
    return (float)(min_lr + 0.5 * (lr - min_lr) * (1.0 + cos(3.14159265358979323846 * r)));
}
