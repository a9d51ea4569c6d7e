// The position schedule (the PosAug hook's host side) and the learning-rate schedule.
// Both trainers call pos_schedule_step() once per optimizer step; each forward pass turns
// that step into its positions p[layer][b][t] (pos_pass), and the kernels compute every
// angle from them on the fly: angle = p * inv_freq[j], in fp32.
// Adding a position scheme means a row of POS_TABLE and its functions here, not a kernel;
// a rotary encoding, a row of PE_TABLE and of ROTARY_TABLE and its function (doc/position_hook.md,
// section 6).
#pragma once
#include "utils.h"
#include "rng.h"

#define MAX_LAYERS 64
#define MAX_HALF_HD 128

#define MAX_HEADS 64
#define MAX_ALPHA_SET 16

// The training-time position schemes (--pos), one row each: enum, name (the flag's value),
// what it does (--help prints it), which of its parameters the run header prints, its
// properties (POSF_* bits; nothing outside the tables compares with a scheme's name):
//   POSF_EXPLICIT     its positions are drawn as data, not alpha * t (the encodings that read
//                     distances times alpha cannot follow them: config.h refuses those pairs)
//   POSF_STANDARD     p_t = t, nothing drawn (what NoPE, TUPE and GRU take)
//   POSF_INTEGER      integer positions (a learned table's rows)
//   POSF_DRAWS_BASE   draws the rotary base per step; POSF_POSE_SCALING takes --pose_scaling
// the largest position its training reaches (an expression of the run's Config c, read by
// llmc/config.h: a learned table's rows, a rotary scale's range), and its three functions:
// alpha, the draw of alpha at a step from u ~ U[0,1) (pos_draw_alpha_stream); step, what the
// step changes of the standard positions (pos_schedule_step); infer, its inference positions
// (pos_eval_step). A checkpoint stores a scheme as its index: append rows, never reorder.
enum { SHOW_NONE, SHOW_RANGE, SHOW_SET };
enum { POSF_EXPLICIT = 1, POSF_STANDARD = 2, POSF_INTEGER = 4, POSF_DRAWS_BASE = 8, POSF_POSE_SCALING = 16 };
#define TRAIN_SPAN ((float)(c->T - 1))  // the training window's last token index
#define POS_TABLE(X)                                                                                                   \
    X(POS_ROPE, "rope", "p_t = t (default)", SHOW_NONE, POSF_STANDARD | POSF_INTEGER, TRAIN_SPAN, alpha_one,           \
      pos_step_alphas, pos_infer_standard)                                                                             \
    X(POS_POSAUG, "posaug", "PosAug: p_t = alpha t, alpha ~ U[a,b] per optimizer step (--alpha_range)", SHOW_RANGE, 0, \
      c->alpha_max * TRAIN_SPAN, alpha_uniform, pos_step_alphas, pos_infer_standard)                                   \
    X(POS_POSAUG_LOG, "posaug-log", "PosAug with ln alpha ~ U[ln a, ln b]", SHOW_RANGE, 0, c->alpha_max * TRAIN_SPAN,  \
      alpha_log_uniform, pos_step_alphas, pos_infer_standard)                                                          \
    X(POS_FIXED, "fixed", "a constant alpha (--alpha)", SHOW_NONE, 0, c->alpha_fixed * TRAIN_SPAN, alpha_fixed_of,     \
      pos_step_alphas, pos_infer_standard)                                                                             \
    X(POS_DISCRETE, "discrete", "alpha drawn uniformly from a set (--alpha_set)", SHOW_SET, 0,                         \
      alpha_set_max(c) * TRAIN_SPAN, alpha_discrete, pos_step_alphas, pos_infer_standard)                              \
    X(POS_CYCLE, "cycle", "alpha = set[step mod size] (--alpha_set)", SHOW_SET, 0, alpha_set_max(c) * TRAIN_SPAN,      \
      alpha_cycle, pos_step_alphas, pos_infer_standard)                                                                \
    X(POS_CURR_LINEAR, "curriculum-linear", "the range moves linearly from [1/2, 2] to [a,b] over training",           \
      SHOW_RANGE, 0, fmaxf(2.0f, c->alpha_max) * TRAIN_SPAN, alpha_curriculum_linear, pos_step_alphas,                 \
      pos_infer_standard)                                                                                              \
    X(POS_CURR_STEP, "curriculum-step", "alpha 1 for the first part of training (--curriculum_frac), then from [a,b]", \
      SHOW_RANGE, 0, fmaxf(1.0f, c->alpha_max) * TRAIN_SPAN, alpha_curriculum_step, pos_step_alphas,                   \
      pos_infer_standard)                                                                                              \
    X(POS_RANDOM_BASE, "random-base", "positions unchanged; the RoPE base B ~ U[B0/8, 8 B0] per step", SHOW_NONE,      \
      POSF_DRAWS_BASE, TRAIN_SPAN, alpha_one, pos_step_random_base, pos_infer_standard)                                \
    X(POS_RPE, "rpe", "randomized positions (not a relative encoding): T distinct sorted integers from [0, --rpe_max) " \
      "per step; p_t = t at evaluation", SHOW_NONE, POSF_EXPLICIT | POSF_INTEGER, (float)(c->rpe_max - 1), alpha_one,  \
      pos_step_rpe, pos_infer_rpe)                                                                                     \
    X(POS_RFS, "rfs", "T sorted floats U[0,1) * L per step (--rfs_scale L); (2t+1) / (2 max(T,n)) * L at inference",   \
      SHOW_NONE, POSF_EXPLICIT, c->rfs_scale, alpha_one, pos_step_rfs, pos_infer_rfs)                                  \
    X(POS_POSE, "pose", "PoSE: each sequence in two chunks, the second's positions skipped by u ~ U{0..L_t - T} "      \
      "(--pose_target L_t); p_t = t at evaluation; --pose_scaling adds PoSE's interpolation", SHOW_NONE,               \
      POSF_EXPLICIT | POSF_POSE_SCALING, (float)(c->pose_target - 1), alpha_one, pos_step_pose, pos_infer_standard)
#define POS_ENUM(e, name, what, show, props, reach, alpha, step, infer) e,
#define POS_NAME(e, name, what, show, props, reach, alpha, step, infer) name,
#define POS_WHAT_OF(e, name, what, show, props, reach, alpha, step, infer) what,
#define POS_SHOW_OF(e, name, what, show, props, reach, alpha, step, infer) show,
#define POS_PROPS_OF(e, name, what, show, props, reach, alpha, step, infer) props,
enum { POS_TABLE(POS_ENUM) POS_N_SCHEMES };

// The schemes' numeric parameters, one row each: the field (of PosConfig and of the run's
// Config), its C type and flag type, the flag, its default, the scheme that reads it (the
// run header prints it, another scheme refuses it), the check its value must pass (on v)
// and what that check says, and the --help line. From this row come the field, the flag,
// its default and check, --help, the header, and meta.flags in the checkpoint (so --resume
// continues with it). A new parameter is one row. (--alpha_range, --alpha_set and the
// choices have their own syntax, in llmc/config.h.)
#define POS_PARAM_TABLE(X)                                                                                           \
    X(alpha_fixed, float, ARG_FLOAT, "--alpha", 4.0f, POS_FIXED, v > 0, "be > 0", "alpha of --pos fixed (default 4)") \
    X(rpe_max, int, ARG_INT, "--rpe_max", 0, POS_RPE, v >= 0, "be >= 0",                                             \
      "RPE: positions drawn from [0, rpe_max) (default 8 x --seq_len)")                                             \
    X(rfs_scale, float, ARG_FLOAT, "--rfs_scale", 1000.0f, POS_RFS, v > 0, "be > 0", "RFS: positions scaled to [0, L) (1000)") \
    X(curriculum_frac, float, ARG_FLOAT, "--curriculum_frac", 0.5f, POS_CURR_STEP, v >= 0 && v <= 1, "lie in [0, 1]",  \
      "curriculum-step: part of training at alpha 1 (0.5)")                                                         \
    X(pose_target, int, ARG_INT, "--pose_target", 0, POS_POSE, v >= 0, "be >= 0",                                   \
      "PoSE: the target length L_t its skips reach (default 8 x --seq_len)")
#define POS_PARAM_FIELD(field, ctype, argtype, flag, def, scheme, check, must, help) ctype field;
static const char *POS_SCHEME_NAMES[POS_N_SCHEMES] = {POS_TABLE(POS_NAME)};
static const char *POS_SCHEME_WHAT[POS_N_SCHEMES] = {POS_TABLE(POS_WHAT_OF)};
static const int POS_SCHEME_SHOW[POS_N_SCHEMES] = {POS_TABLE(POS_SHOW_OF)};
static const int POS_PROPS[POS_N_SCHEMES] = {POS_TABLE(POS_PROPS_OF)};
// Whether scheme s has property f (POSF_*)
static inline int pos_is(int s, int f) { return (POS_PROPS[s] & f) != 0; }

// The position encodings that turn those positions into a signal (--pe), the same way: enum,
// name, what it does, and what the code around it needs to know of it (its properties,
// PEF_* bits; nothing outside the tables compares with an encoding's name):
//   PEF_POSITIONS    it reads positions at all (all but NoPE)
//   PEF_FREQ_SCALES  its frequencies theta_j can be scaled (--scaling ntk..yarn, --pose_scaling)
//   PEF_BASE_DRAWN   its base can be drawn per step (--pos random-base)
//   PEF_SLOPES       ALiBi's fixed slopes m_h on the distance
//   PEF_SINUSOIDAL   adds sinusoidal PE(p_t) to the token embedding (PEF_WINDOW_FREQS: its
//                    frequencies times C / T, tAPE's)
//   PEF_WPE_ADDED    adds a learned row wpe[p_t] to the token embedding (any integer positions)
//   PEF_UNTIED       TUPE's untied positions: wpe's rows 0..n-1 through their own projections
//   PEF_T5           reads --t5_buckets and --t5_max_distance
// and the default of --rel_clip where it reads that flag (an expression of the run's Config
// c, read by llmc/config.h; 0: it does not read it).
// How it rotates (ROTARY_TABLE below), a learned bias (llmc/attn_bias.h's BIAS_FN_TABLE) or
// relative keys (PE_KEY_TABLE there) are rows of those tables. A checkpoint stores an
// encoding as its index: append rows, never reorder.
enum {
    PEF_POSITIONS = 1, PEF_FREQ_SCALES = 2, PEF_BASE_DRAWN = 4, PEF_SLOPES = 8, PEF_SINUSOIDAL = 16,
    PEF_WINDOW_FREQS = 32, PEF_WPE_ADDED = 64, PEF_UNTIED = 128, PEF_T5 = 256
};
#define PEF_ROTARY_DEFAULTS (PEF_POSITIONS | PEF_FREQ_SCALES | PEF_BASE_DRAWN)
#define PE_TABLE(X)                                                                                                    \
    X(PE_ROPE, "rope", "rotate q and k by p_t * theta_j (default)", PEF_ROTARY_DEFAULTS, 0)                            \
    X(PE_NOPE, "nope", "none: the causal mask only", 0, 0)                                                             \
    X(PE_ALIBI, "alibi", "attention logits get -m_h * (p_i - p_j) = -m_h * alpha * (i - j)",                           \
      PEF_POSITIONS | PEF_SLOPES, 0)                                                                                   \
    X(PE_SINUSOIDAL, "sinusoidal", "PE(p_t) added to the token embedding", PEF_POSITIONS | PEF_SINUSOIDAL, 0)          \
    X(PE_LEARNED, "learned", "a trained row wpe[p_t] added to the token embedding (integer positions)",                \
      PEF_POSITIONS | PEF_WPE_ADDED, 0)                                                                                \
    X(PE_ERPE, "erpe", "eRPE: attention logits get a learned b_h[min(p_i - p_j, --rel_clip)] per layer and head",      \
      PEF_POSITIONS, c->T - 1)                                                                                         \
    X(PE_T5, "t5", "T5's bias: a learned b_h per layer and head over --t5_buckets buckets of p_i - p_j, half "         \
      "log-spaced to --t5_max_distance", PEF_POSITIONS | PEF_T5, 0)                                                    \
    X(PE_TAPE, "tape", "tAPE: sinusoidal PE(p_t) with frequencies times C / T (T the training window)",                \
      PEF_POSITIONS | PEF_SINUSOIDAL | PEF_WINDOW_FREQS, 0)                                                            \
    X(PE_SHAW, "shaw", "the PE survey's RPE (Shaw et al.; not --pos rpe): logits get q_i . r_l[min(p_i - p_j, "        \
      "--rel_clip)] / sqrt(hd), a learned key vector per clipped distance and layer", PEF_POSITIONS, 16)               \
    X(PE_TPE, "tpe", "T-PE: logits get q_i . h_l(p_i - p_j) / sqrt(hd), h_l a learned function of the real "           \
      "distance (one tanh layer of ln(1 + p_i - p_j)) per layer", PEF_POSITIONS, 0)                                    \
    X(PE_TUPE, "tupe", "TUPE (Ke et al.; integer positions): logits (q_i . k_j + (wpe[i] U^Q) . (wpe[j] U^K)) / "      \
      "sqrt(2 hd) + T5's bias: untied absolute positions through their own projections, shared by the layers",         \
      PEF_POSITIONS | PEF_UNTIED | PEF_T5, 0)                                                                          \
    X(PE_KERPLE, "kerple", "KERPLE (Chi et al.), log variant: logits get -r1_h ln(1 + r2_h (p_i - p_j)), r1, r2 > 0 "  \
      "learned per head, shared by the layers", PEF_POSITIONS, 0)                                                      \
    X(PE_FIRE, "fire", "FIRE (Li et al.): logits get f_h(psi(p_i - p_j) / psi(max(L, p_i))), psi(x) = ln(c x + 1), "   \
      "f an MLP (32 ReLU units) with an output per head, c and L = 512 m learned, per layer", PEF_POSITIONS, 0)        \
    X(PE_XPOS, "xpos", "xPos (Sun et al.): RoPE with q scaled by zeta_j^(p_t / 512) and k by zeta_j^(-p_t / 512), "    \
      "zeta_j = (2j + 0.4 hd) / (1.4 hd): logits decay with the distance", PEF_ROTARY_DEFAULTS, 0)                     \
    X(PE_KERPLE_POWER, "kerple-power", "KERPLE (Chi et al.), power variant: logits get -r1_h (p_i - p_j)^r2_h, "       \
      "r1 > 0 and 0 < r2 <= 2 learned per head, shared by the layers", PEF_POSITIONS, 0)
#define PE_ENUM(e, name, what, props, clip) e,
#define PE_NAME(e, name, what, props, clip) name,
#define PE_WHAT_OF(e, name, what, props, clip) what,
#define PE_PROPS_OF(e, name, what, props, clip) props,
enum { PE_TABLE(PE_ENUM) PE_N };
static const char *PE_NAMES[PE_N] = {PE_TABLE(PE_NAME)};
static const char *PE_WHAT[PE_N] = {PE_TABLE(PE_WHAT_OF)};
static const int PE_PROPS[PE_N] = {PE_TABLE(PE_PROPS_OF)};
// Whether encoding pe has property f (PEF_*)
static inline int pe_is(int pe, int f) { return (PE_PROPS[pe] & f) != 0; }
// The encodings with the learned position table wpe, one row per integer position: --pe
// learned adds a row to the token embedding, TUPE projects rows into every attention.
static inline int pe_has_wpe(int pe) { return pe_is(pe, PEF_WPE_ADDED | PEF_UNTIED); }
enum { LAYERS_ALL = 0, LAYERS_BOTTOM, LAYERS_TOP, LAYERS_INDEPENDENT, LAYERS_N };
static const char *POS_LAYERS_NAMES[LAYERS_N] = {"all", "bottom", "top", "independent"};
static const char *DIST_NAMES[2] = {"uniform", "log"};

// The shape of the learned relative encodings (llmc/attn_bias.h's tables read it)
typedef struct {
    int clip;        // eRPE, Shaw: distances from this one on share one bias or key (--rel_clip)
    int t5_buckets;  // T5: buckets per head (--t5_buckets)
    int t5_max;      // T5: the distance its log-spaced buckets reach (--t5_max_distance)
} RelShape;

typedef struct {
    int scheme, pe;
    long drope_step;             // > 0: from this step on the encoding is NoPE (DroPE)
    float alpha_min, alpha_max;  // PosAug range [a,b]
    float rope_base;             // B in theta_j = B^(-2j/hd)
    int head_dim, n_layer, n_head;
    uint64_t seed;
    float alpha_set[MAX_ALPHA_SET];  // discrete, cycle
    int n_alpha_set;
    int layers;                  // LAYERS_*: which layers get alpha
    int curriculum_log;          // curriculum schemes draw log-uniformly
    long total_steps;            // curriculum schemes
    int seq_len;                 // the training window T
    int step_seqs;               // sequences per optimizer step (--total_batch): a per-sequence scheme draws this many
    int rpe_per_layer;           // RPE: every layer draws its own positions
    int rpe_eval_random;         // RPE: evaluation draws random positions too (else p_t = t)
    RelShape rel;                // eRPE, Shaw, T5: the buckets of distances
    float ape_scale;             // sinusoidal frequencies times this (tAPE: C / T; else 1)
    int pose_scaling;            // PoSE: index into POSE_SCALING_NAMES (0: none)
    POS_PARAM_TABLE(POS_PARAM_FIELD)  // alpha_fixed, rpe_max, rfs_scale, curriculum_frac, ...
} PosConfig;

// One step's position recipe (the hook's output). The kernels do not read it directly:
// pos_pass() turns it into the positions of a pass, p[layer][b][t], which they read.
typedef struct {
    float alpha[MAX_LAYERS];        // p_t = alpha[l] * t + offset; ALiBi: distances times alpha[l]
    float offset;
    float inv_freq[MAX_HALF_HD];    // theta_j, fp32
    float mscale;                   // attention factor on cos and sin: 1, or YaRN's 0.1 ln s + 1 under
                                    //   --scaling yarn, revised-yarn and, in training too, --pose_scaling
                                    //   yarn (1.208 at s = 8)
    int pe;                         // PE_*: what the kernels do with the positions
    float alibi_slope[MAX_HEADS];   // m_h per query head; all 0 unless pe has PEF_SLOPES
    const float *positions;         // explicit positions p_t (RPE, RFS; host memory), or NULL:
    int n_positions;                //   layout [layer][sequence][n_positions]
    int positions_stride;           // layer l reads positions + l * stride (0: one set for all layers)
    int seq_stride;                 // sequence s of the step reads + s * seq_stride (0: shared by all sequences)
    int seq0;                       // the step's sequence that is sequence 0 of this micro-batch (pos_micro)
    RelShape rel;                   // the learned relative encodings' buckets (llmc/attn_bias.h)
    float ape_scale;                // sinusoidal frequencies times this (tAPE)
} PosStep;

// ----------------------------------------------------------------------------
// The rotary encodings: q and k rotated pair by pair (element j with j + hd/2) by an angle,
// and scaled. Each has a row of ROTARY_TABLE: its PE_*, its function, and the largest
// position |p| at which its scale stays in range (config.h refuses a run that reaches past
// it, before anything runs). The function, written once for the host and the device (the
// CPU's rope_rotate and every rope_kernel_v* call it through pe_rotary), returns the angle
// of pair j at position p and sets *scale, the factor on that pair of a query (side
// ROT_QUERY) or a key (ROT_KEY). The angle is one fp32 product with no fused multiply-add
// (MUL_RN), so that both backends round it alike; the backward is the same rotation by
// -angle with the same scale.
#ifdef __CUDACC__
#define HOST_DEVICE __host__ __device__
#else
#define HOST_DEVICE
#endif
#ifdef __CUDA_ARCH__
#define MUL_RN(a, b) __fmul_rn(a, b)
#else
#define MUL_RN(a, b) ((a) * (b))
#endif
enum { ROT_QUERY, ROT_KEY };

// RoPE (Su et al. 2021): angle p theta_j, scale 1
HOST_DEVICE static inline float rope_rotary(const PosStep *ps, float p, int j, int hd, int side, float *scale) {
    (void)hd, (void)side;
    *scale = 1.0f;
    return MUL_RN(p, ps->inv_freq[j]);
}

// xPos (Sun et al. 2023, torchscale's XPOS): RoPE's angle; queries scaled by zeta_j^(p/gamma),
// keys by zeta_j^(-p/gamma), zeta_j = (2j + 0.4 hd) / (1.4 hd) in (0, 1), gamma = 512 (its
// scale_base): the logit of query n and key m gets zeta_j^((n - m)/gamma) per pair, a decay
// with the distance. torchscale centres the exponent on the middle of the sequence, which
// cancels in q . k; here it is p itself, so the scale of the smallest zeta_0 = 2/7 stays
// within 2^(+-64) (products of scaled queries, keys and their gradients far from fp32's
// range) up to |p| = 64 ln 2 gamma / ln 3.5 = 18130: XPOS_MAX_POSITION.
#define XPOS_GAMMA 512.0f
#define XPOS_MAX_POSITION 18130.0f
HOST_DEVICE static inline float xpos_rotary(const PosStep *ps, float p, int j, int hd, int side, float *scale) {
    float zeta = (MUL_RN(2.0f, (float)j) + MUL_RN(0.4f, (float)hd)) / MUL_RN(1.4f, (float)hd);
    *scale = powf(zeta, (side == ROT_KEY ? -p : p) / XPOS_GAMMA);
    return MUL_RN(p, ps->inv_freq[j]);
}

#define ROTARY_TABLE(X)                                                                                                \
    X(PE_ROPE, rope_rotary, INFINITY)                                                                                  \
    X(PE_XPOS, xpos_rotary, XPOS_MAX_POSITION)

// The angle of pair j at position p for encoding ps->pe, and its scale on a query or key
HOST_DEVICE static inline float pe_rotary(const PosStep *ps, float p, int j, int hd, int side, float *scale) {
    switch (ps->pe) {
#define ROTARY_CASE(e, fn, reach)                                                                                      \
    case e: return fn(ps, p, j, hd, side, scale);
        ROTARY_TABLE(ROTARY_CASE)
#undef ROTARY_CASE
    }
    *scale = 1.0f;  // unreachable: the trainers rotate only for an encoding with a row
    return 0.0f;
}

// Whether encoding pe rotates q and k (it has a row of ROTARY_TABLE)
static inline int pe_rotates(int pe) {
#define ROTARY_HAS(e, fn, reach) if (pe == e) return 1;
    ROTARY_TABLE(ROTARY_HAS)
#undef ROTARY_HAS
    return 0;
}

// The largest |position| encoding pe takes (INFINITY: any)
static inline float pe_position_limit(int pe) {
#define ROTARY_LIMIT(e, fn, reach) if (pe == e) return reach;
    ROTARY_TABLE(ROTARY_LIMIT)
#undef ROTARY_LIMIT
    return INFINITY;
}

// Layer l's explicit positions (of the step's first sequence), or NULL when the positions
// are alpha * t + offset.
static inline const float *pos_layer(const PosStep *ps, int l) {
    return ps->positions ? ps->positions + (size_t)l * ps->positions_stride : NULL;
}

// The same step for micro-batch `micro` of B sequences (per-sequence positions move on).
static inline PosStep pos_micro(const PosStep *ps, int micro, int B) {
    PosStep m = *ps;
    m.seq0 = micro * B;
    return m;
}

// ----------------------------------------------------------------------------
// Positions are data: what every kernel reads, on both backends, is the positions of one
// pass over B sequences of T tokens, p[l][b][t] at  p + l * layer_stride + b * seq_stride + t
// (a stride of 0: every layer, or every sequence, reads the same row). A pass that continues
// a KV cache at position pos0 gets the positions of tokens pos0 .. pos0 + T - 1.
typedef struct {
    const float *p;   // host memory, valid until the next pos_pass
    int pos0, T, layer_stride, seq_stride;
    size_t n;         // floats in p
} PassPositions;

static inline float pass_pos(const PassPositions *pp, int l, int b, int t) {
    return pp->p[(size_t)l * pp->layer_stride + (size_t)b * pp->seq_stride + t];
}

// Whether the layers' positions differ (a row set per layer), or all read one.
static inline int pos_per_layer(const PosStep *ps, int n_layer) {
    if (ps->positions) return ps->positions_stride != 0;
    for (int l = 1; l < n_layer; l++)
        if (ps->alpha[l] != ps->alpha[0]) return 1;
    return 0;
}

// Fills the pass's positions from the step's recipe: the explicit positions of tokens
// pos0 + t, or alpha[l] * (pos0 + t) + offset in fp32 (both trainers build their host code
// without fused multiply-add, so the rounding is the same everywhere). Grow-only buffer.
static inline PassPositions pos_pass(const PosStep *ps, int n_layer, int B, int pos0, int T) {
    static float *buf;
    static size_t cap;
    int per_layer = pos_per_layer(ps, n_layer), per_seq = ps->positions && ps->seq_stride != 0;
    if (ps->positions && pos0 + T > ps->n_positions)
        fail("internal: a pass over positions %d..%d of a step that has %d", pos0, pos0 + T - 1, ps->n_positions);
    PassPositions pp = {NULL, pos0, T, per_layer ? (per_seq ? B : 1) * T : 0, per_seq ? T : 0, 0};
    int nl = per_layer ? n_layer : 1, nb = per_seq ? B : 1;
    pp.n = (size_t)nl * nb * T;
    buf = (float *)grow_buffer(buf, &cap, pp.n * sizeof(float));
    for (int l = 0; l < nl; l++)
        for (int b = 0; b < nb; b++) {
            float *dst = buf + (size_t)l * pp.layer_stride + (size_t)b * pp.seq_stride;
            if (ps->positions)
                memcpy(dst, pos_layer(ps, l) + (size_t)(ps->seq0 + b) * ps->seq_stride + pos0, (size_t)T * sizeof(float));
            else
                for (int t = 0; t < T; t++) dst[t] = ps->alpha[l] * (float)(pos0 + t) + ps->offset;
        }
    pp.p = buf;
    return pp;
}

// A learned table has a row for each integer position 0..rows-1 and nothing else: every
// position of the pass must be a row, or the pass stops with a clear message.
static inline void learned_rows_check(const PassPositions *pp, int B, int rows) {
    for (int b = 0; b < (pp->seq_stride ? B : 1); b++)
        for (int t = 0; t < pp->T; t++) {
            float p = pass_pos(pp, 0, b, t);
            if (!(p >= 0 && p < rows && p == (float)(int)p))
                fail("the learned table (--pe learned, tupe): token %d has position %g, but wpe has rows for the integer "
                     "positions 0..%d only (no row for longer inputs, no scaled positions)", pp->pos0 + t, p, rows - 1);
        }
}

// TUPE reads wpe at token indices: the pass's positions must be p_t = t, with rows for all n
// of its keys.
static inline void tupe_positions_check(const PassPositions *pp, int B, int rows, int n) {
    learned_rows_check(pp, B, rows);
    for (int b = 0; b < (pp->seq_stride ? B : 1); b++)
        for (int t = 0; t < pp->T; t++)
            if (pass_pos(pp, 0, b, t) != (float)(pp->pos0 + t))
                fail("--pe tupe reads the position table at token indices: token %d has position %g", pp->pos0 + t,
                     pass_pos(pp, 0, b, t));
    if (n > rows) fail("--pe tupe: %d keys, but wpe has rows for positions 0..%d only", n, rows - 1);
}

// The explicit positions of the current step or pass: one grow-only host buffer (a
// PosStep's positions stay valid until the next step or pass asks for them).
static inline float *pos_buffer(int n) {
    static float *buf;
    static size_t cap;
    buf = (float *)grow_buffer(buf, &cap, (size_t)n * sizeof(float));
    return buf;
}

static inline int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

// ALiBi slopes for n heads: 2^(-8(h+1)/n) for a power of two n; otherwise the slopes of
// the nearest lower power of two c, then every other slope of 2c, until n.
static inline void alibi_slopes(float *m, int n) {
    int c = 1;
    while (c * 2 <= n) c *= 2;
    for (int h = 0; h < c; h++) m[h] = (float)pow(2.0, -8.0 * (h + 1) / c);
    for (int h = c, k = 0; h < n; h++, k += 2) m[h] = (float)pow(2.0, -8.0 * (k + 1) / (2 * c));
}

// RPE: n distinct integers from [0, max), sorted (a partial Fisher-Yates shuffle).
static inline void rpe_draw(Rng *r, float *p, int n, int max) {
    int *all = (int *)xmalloc((size_t)max * sizeof(int));
    for (int i = 0; i < max; i++) all[i] = i;
    for (int t = 0; t < n; t++) {
        int j = t + (int)rng_below(r, (uint32_t)(max - t));
        int tmp = all[t]; all[t] = all[j]; all[j] = tmp;
        p[t] = (float)all[t];
    }
    free(all);
    qsort(p, n, sizeof(float), cmp_float);
}

// RPE's explicit positions: one sorted draw of n per layer (or one for all layers).
static inline void pos_set_rpe(PosStep *ps, const PosConfig *pc, Rng *r, int n) {
    int sets = pc->rpe_per_layer ? pc->n_layer : 1;
    if (n > pc->rpe_max) fail("RPE draws positions from [0, --rpe_max %d): %d tokens do not fit", pc->rpe_max, n);
    float *p = pos_buffer(sets * n);
    for (int l = 0; l < sets; l++) rpe_draw(r, p + (size_t)l * n, n, pc->rpe_max);
    ps->positions = p;
    ps->n_positions = n;
    ps->positions_stride = pc->rpe_per_layer ? n : 0;
}

static inline void pos_inv_freq(float *inv_freq, int head_dim, double base) {
    for (int j = 0; j < head_dim / 2; j++) inv_freq[j] = (float)pow(base, -2.0 * j / head_dim);
}

// The sinusoidal encodings' frequencies f_k = 10000^(-2k/C) * scale (C/2 of them), fp32 as
// both backends use them: scale 1 (--pe sinusoidal) or tAPE's C / T.
static inline void sinusoidal_freqs_host(float *f, int C, float scale) {
    for (int k = 0; k < C / 2; k++) f[k] = powf(10000.0f, -2.0f * k / C) * scale;
}

// The encodings that add sinusoidal PE(p_t) to the token embedding
static inline int pe_sinusoidal(int pe) { return pe_is(pe, PEF_SINUSOIDAL); }

static inline void pos_set_pe(PosStep *ps, int pe, int n_head) {
    ps->pe = pe;
    memset(ps->alibi_slope, 0, sizeof(ps->alibi_slope));
    if (pe_is(pe, PEF_SLOPES)) alibi_slopes(ps->alibi_slope, n_head);
}

// The encoding at a step: --pe, or NoPE once DroPE has dropped it (drope_step > 0).
static inline int pe_after_drop(int pe, long drope_step, long step) {
    return drope_step > 0 && step >= drope_step ? PE_NOPE : pe;
}

static inline int pe_at_step(const PosConfig *pc, long step) { return pe_after_drop(pc->pe, pc->drope_step, step); }

// ----------------------------------------------------------------------------
// Evaluation-time RoPE scaling, through the same hook (s = factor, w = training window).
//   PI            p_t = t / s
//   NTK-aware     B' = B * s^(hd/(hd-2))
//   dynamic NTK   for a sequence of n > w tokens: B' = B * (s*n/w - (s-1))^(hd/(hd-2)); unchanged for n <= w
//   NTK-by-parts  theta'_j = (theta_j/s) * ramp_j + theta_j * (1 - ramp_j)
//   YaRN          NTK-by-parts plus an attention factor m on cos and sin: m = 0.1 ln s + 1
//                 (YaRN / Hugging Face) or m = sqrt(1 + 0.1 ln s) (the PosAug paper's text)
//   revised YaRN  PoSE's (its modeling file's revised_yarn): theta'_j = theta_j / (ramp_j s + 1 - ramp_j),
//                 the factor on the frequency ramped instead of the frequency, YaRN's m
// ramp_j = clamp((j - low) / (high - low), 0, 1), low = max(floor(d(beta_fast)), 0),
// high = min(ceil(d(beta_slow)), hd - 1), d(r) = hd * ln(w / (2 pi r)) / (2 ln B).
enum { SCALE_NONE = 0, SCALE_PI, SCALE_NTK, SCALE_DYN_NTK, SCALE_NTK_PARTS, SCALE_YARN, SCALE_REVISED_YARN, SCALE_N };
static const char *SCALE_NAMES[SCALE_N] = {"none", "pi", "ntk", "dynamic-ntk", "ntk-by-parts", "yarn", "revised-yarn"};

// PoSE's pairing (--pose_scaling): the interpolation PoSE's scripts train and evaluate with
// (its modeling file's linear, vanilla_ntk and yarn, which is its revised YaRN), factor s = L_t / w
// (--pose_target / --seq_len), the same at every step and at evaluation. A checkpoint keeps the
// name and the --scaling it equals (meta.pose_scaling): append, never reorder.
#define POSE_SCALING_N 4
static const char *POSE_SCALING_NAMES[POSE_SCALING_N] = {"none", "linear", "ntk", "yarn"};
static const int POSE_SCALING_METHOD[POSE_SCALING_N] = {SCALE_NONE, SCALE_PI, SCALE_NTK, SCALE_REVISED_YARN};

// Evaluation-time scaling needs what it scales: PI the positions (not NoPE), the others
// RoPE's frequencies; a model trained with --pose_scaling has its own.
static inline void scaling_check(int scaling, int pe, int pose_scaling) {
    if (scaling && pose_scaling)
        fail("--scaling %s: a model trained with --pose_scaling %s already scales its RoPE at evaluation (factor "
             "--pose_target / --seq_len); evaluate it without --scaling", SCALE_NAMES[scaling],
             POSE_SCALING_NAMES[pose_scaling]);
    if (scaling && (!pe_is(pe, PEF_POSITIONS) || (scaling != SCALE_PI && !pe_is(pe, PEF_FREQ_SCALES))))
        fail("--scaling %s changes %s, which a --pe %s model does not have", SCALE_NAMES[scaling],
             scaling == SCALE_PI ? "positions" : "RoPE's frequencies", PE_NAMES[pe]);
}
enum { YARN_TEMP_HF = 0, YARN_TEMP_PAPER };

typedef struct {
    int method;
    float factor;                // s
    float beta_fast, beta_slow;  // YaRN ramp (32, 1)
    int temperature;             // YARN_TEMP_HF or YARN_TEMP_PAPER
    int train_window;            // w
} EvalScaling;

// YaRN's ramp boundaries in rotary dimensions j (0 <= j < hd/2), clamped as YaRN's code and
// Hugging Face clamp them: high may pass the last dimension hd/2 - 1 (a window longer than
// the slowest wavelengths), and the ramp then keeps its slope instead of reaching 1 there.
static inline void yarn_low_high(int hd, double base, int w, double beta_fast, double beta_slow, int *low, int *high) {
    const double pi = 3.14159265358979323846;
    double d_fast = hd * log(w / (2 * pi * beta_fast)) / (2 * log(base));
    double d_slow = hd * log(w / (2 * pi * beta_slow)) / (2 * log(base));
    double lo = floor(d_fast), hi = ceil(d_slow);
    // the bounds at hd (low) and -1 (high) only keep the ints in range: the ramp is the same
    *low = (int)(lo < 0 ? 0 : lo > hd ? hd : lo);
    *high = (int)(hi > hd - 1 ? hd - 1 : hi < -1 ? -1 : hi);
}

// A scaling's change to a step (PI: alpha, the others: inv_freq and mscale), for a pass of
// seq_len tokens (dynamic NTK reads it).
static inline void scaling_apply(PosStep *ps, const PosConfig *pc, const EvalScaling *es, int seq_len) {
    int hd = pc->head_dim;
    double s = es->factor, B = pc->rope_base, expo = (double)hd / (hd - 2);
    switch (es->method) {
    case SCALE_PI:
        for (int l = 0; l < MAX_LAYERS; l++) ps->alpha[l] = (float)(1.0 / s);
        break;
    case SCALE_NTK: pos_inv_freq(ps->inv_freq, hd, B * pow(s, expo)); break;
    case SCALE_DYN_NTK:
        if (seq_len > es->train_window) pos_inv_freq(ps->inv_freq, hd, B * pow(s * seq_len / es->train_window - (s - 1), expo));
        break;
    case SCALE_NTK_PARTS:
    case SCALE_YARN:
    case SCALE_REVISED_YARN: {
        int low, high;
        yarn_low_high(hd, B, es->train_window, es->beta_fast, es->beta_slow, &low, &high);
        double span = high != low ? high - low : 0.001;  // as Hugging Face: avoid 0/0
        for (int j = 0; j < hd / 2; j++) {
            double ramp = (j - low) / span, theta = pow(B, -2.0 * j / hd);
            ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
            ps->inv_freq[j] = (float)(es->method == SCALE_REVISED_YARN ? theta / (ramp * s + 1 - ramp)
                                                                        : theta / s * ramp + theta * (1 - ramp));
        }
        if (es->method != SCALE_NTK_PARTS && s > 1) {
            double m = 0.1 * log(s) + 1.0;
            ps->mscale = (float)(es->temperature == YARN_TEMP_PAPER ? sqrt(m) : m);
        }
        break;
    }
    default: break;
    }
}

// PoSE's interpolation as a scaling: Hugging Face's defaults (YaRN's beta 32 and 1, its
// temperature), w the training window.
static inline EvalScaling pose_scaling_of(const PosConfig *pc) {
    EvalScaling es = {POSE_SCALING_METHOD[pc->pose_scaling], (float)pc->pose_target / (float)pc->seq_len,
                      32.0f, 1.0f, YARN_TEMP_HF, pc->seq_len};
    return es;
}

// Standard positions (alpha 1, offset 0, base B) with the encoding the trained model
// ends with: evaluation, validation, generation, plain RoPE. A PoSE model trained with
// --pose_scaling keeps its interpolation here, so every pass (training included) has it.
static inline PosStep pos_standard(const PosConfig *pc) {
    PosStep ps;
    memset(&ps, 0, sizeof(ps));
    for (int l = 0; l < MAX_LAYERS; l++) ps.alpha[l] = 1.0f;
    ps.mscale = 1.0f;
    ps.rel = pc->rel;
    ps.ape_scale = pc->ape_scale;
    pos_inv_freq(ps.inv_freq, pc->head_dim, pc->rope_base);
    pos_set_pe(&ps, pe_at_step(pc, pc->total_steps), pc->n_head);
    if (pos_is(pc->scheme, POSF_POSE_SCALING) && pc->pose_scaling) {
        EvalScaling es = pose_scaling_of(pc);
        scaling_apply(&ps, pc, &es, pc->seq_len);
    }
    return ps;
}

// The schemes' inference positions for a pass of seq_len tokens (POS_TABLE's infer): the
// standard ones p_t = t, RFS's (2t+1) / (2 max(T, n)) * L, or RPE's fixed draw per sequence
// length with --rpe_eval random.
static inline void pos_infer_standard(PosStep *ps, const PosConfig *pc, int seq_len) {
    (void)ps, (void)pc, (void)seq_len;
}
static inline void pos_infer_rfs(PosStep *ps, const PosConfig *pc, int seq_len) {
    float *p = pos_buffer(seq_len);
    int den = 2 * (pc->seq_len > seq_len ? pc->seq_len : seq_len);
    for (int t = 0; t < seq_len; t++) p[t] = (float)((2.0 * t + 1) / den * pc->rfs_scale);
    ps->positions = p;
    ps->n_positions = seq_len;
}
static inline void pos_infer_rpe(PosStep *ps, const PosConfig *pc, int seq_len) {
    if (!pc->rpe_eval_random) return;
    Rng r = rng_make(pc->seed, (uint64_t)RNG_POS * 1000000007ULL - 1 - (uint64_t)seq_len);
    pos_set_rpe(ps, pc, &r, seq_len);
}

// Standard positions with the scaling applied, for a sequence of seq_len tokens (the
// scheme's inference positions where it has its own).
static inline PosStep pos_eval_step(const PosConfig *pc, const EvalScaling *es, int seq_len) {
    PosStep ps = pos_standard(pc);
    switch (pc->scheme) {
#define POS_INFER_CASE(e, name, what, show, props, reach, alpha_fn, step_fn, infer_fn)                                 \
    case e: infer_fn(&ps, pc, seq_len); break;
        POS_TABLE(POS_INFER_CASE)
#undef POS_INFER_CASE
    }
    scaling_apply(&ps, pc, es, seq_len);
    return ps;
}

// Inference positions for seq_len tokens without scaling (validation, generation).
static inline PosStep pos_inference(const PosConfig *pc, int seq_len) {
    EvalScaling none = {SCALE_NONE, 1.0f, 32.0f, 1.0f, YARN_TEMP_HF, pc->seq_len};
    return pos_eval_step(pc, &none, seq_len);
}

// The schemes' draws of alpha at a step from u ~ U[0,1) (POS_TABLE's alpha): 1 for the
// schemes without one.
static inline float alpha_one(const PosConfig *pc, long step, float u) {
    (void)pc, (void)step, (void)u;
    return 1.0f;
}
// uniform in [a, b], or log-uniform with --curriculum_dist log (the curriculum schemes)
static inline float alpha_in_range(float a, float b, float u, int log_uniform) {
    return log_uniform ? expf(logf(a) + (logf(b) - logf(a)) * u) : a + (b - a) * u;
}
static inline float alpha_uniform(const PosConfig *pc, long step, float u) {
    (void)step;
    return alpha_in_range(pc->alpha_min, pc->alpha_max, u, 0);
}
static inline float alpha_log_uniform(const PosConfig *pc, long step, float u) {
    (void)step;
    return alpha_in_range(pc->alpha_min, pc->alpha_max, u, 1);
}
static inline float alpha_fixed_of(const PosConfig *pc, long step, float u) {
    (void)step, (void)u;
    return pc->alpha_fixed;
}
static inline float alpha_discrete(const PosConfig *pc, long step, float u) {
    (void)step;
    int i = (int)(u * pc->n_alpha_set);
    return pc->alpha_set[i < pc->n_alpha_set ? i : pc->n_alpha_set - 1];
}
static inline float alpha_cycle(const PosConfig *pc, long step, float u) {
    (void)u;
    return pc->alpha_set[step % pc->n_alpha_set];
}
// the range moves linearly from [1/2, 2] to [a, b]
static inline float alpha_curriculum_linear(const PosConfig *pc, long step, float u) {
    float f = pc->total_steps > 1 ? (float)step / (float)(pc->total_steps - 1) : 1.0f;
    float a = 0.5f + (pc->alpha_min - 0.5f) * f, b = 2.0f + (pc->alpha_max - 2.0f) * f;
    return alpha_in_range(a, b, u, pc->curriculum_log);
}
// 1 for the first part of training, then from [a, b]
static inline float alpha_curriculum_step(const PosConfig *pc, long step, float u) {
    if (step < (long)(pc->curriculum_frac * pc->total_steps)) return 1.0f;
    return alpha_in_range(pc->alpha_min, pc->alpha_max, u, pc->curriculum_log);
}

// Draw alpha for (step, layer stream). Counter-based (a fresh stream per step and layer
// from the seed), so the sequence is a pure function of (seed, step): resume needs no
// extra state and the CPU and GPU trainers draw identical numbers.
static inline float pos_draw_alpha_stream(const PosConfig *pc, long step, int stream) {
    Rng r = rng_make(pc->seed, (uint64_t)RNG_POS * 1000000007ULL + (uint64_t)step + ((uint64_t)stream << 40));
    float u = rng_f32(&r);
    switch (pc->scheme) {
#define POS_ALPHA_CASE(e, name, what, show, props, reach, alpha_fn, step_fn, infer)                                    \
    case e: return alpha_fn(pc, step, u);
        POS_TABLE(POS_ALPHA_CASE)
#undef POS_ALPHA_CASE
    }
    return 1.0f;
}

static inline float pos_draw_alpha(const PosConfig *pc, long step) { return pos_draw_alpha_stream(pc, step, 0); }

// The schemes' steps (POS_TABLE's step): what optimizer step `step` changes of the
// standard positions ps. The alpha schemes: alpha[l] from the draw, as --pos_layers says.
static inline void pos_step_alphas(PosStep *ps, const PosConfig *pc, long step) {
    float shared = pos_draw_alpha(pc, step);
    for (int l = 0; l < pc->n_layer; l++) {
        int bottom = l < pc->n_layer / 2;
        switch (pc->layers) {
        case LAYERS_BOTTOM: ps->alpha[l] = bottom ? shared : 1.0f; break;
        case LAYERS_TOP: ps->alpha[l] = bottom ? 1.0f : shared; break;
        case LAYERS_INDEPENDENT: ps->alpha[l] = pos_draw_alpha_stream(pc, step, l); break;
        default: ps->alpha[l] = shared;
        }
    }
}

// the step's stream of the schemes that draw more than alpha
static inline Rng pos_step_rng(const PosConfig *pc, long step) {
    return rng_make(pc->seed, (uint64_t)RNG_POS * 1000000007ULL + (uint64_t)step);
}

// random-base: the base B ~ U[B0/8, 8 B0]
static inline void pos_step_random_base(PosStep *ps, const PosConfig *pc, long step) {
    Rng r = pos_step_rng(pc, step);
    double b0 = pc->rope_base;
    pos_inv_freq(ps->inv_freq, pc->head_dim, b0 / 8 + (8 * b0 - b0 / 8) * rng_f32(&r));
}

static inline void pos_step_rpe(PosStep *ps, const PosConfig *pc, long step) {
    Rng r = pos_step_rng(pc, step);
    pos_set_rpe(ps, pc, &r, pc->seq_len);
}

// RFS: T sorted floats U[0,1) * L
static inline void pos_step_rfs(PosStep *ps, const PosConfig *pc, long step) {
    Rng r = pos_step_rng(pc, step);
    int T = pc->seq_len;
    float *p = pos_buffer(T);
    for (int t = 0; t < T; t++) p[t] = rng_f32(&r) * pc->rfs_scale;
    qsort(p, T, sizeof(float), cmp_float);
    ps->positions = p;
    ps->n_positions = T;
}

// PoSE, per sequence: chunk 1 is t < n1, chunk 2 is skipped by u
static inline void pos_step_pose(PosStep *ps, const PosConfig *pc, long step) {
    Rng r = pos_step_rng(pc, step);
    int T = pc->seq_len, S = pc->step_seqs;
    float *p = pos_buffer(S * T), a = ps->alpha[0];  // a: 1, or 1/s with --pose_scaling linear
    for (int s = 0; s < S; s++) {
        int n1 = 1 + (int)rng_below(&r, (uint32_t)((T + 1) / 2));          // U{1..(T+1)/2}
        int u = (int)rng_below(&r, (uint32_t)(pc->pose_target - T + 1));  // U{0..L_t - T}
        for (int t = 0; t < T; t++) p[(size_t)s * T + t] = a * (float)(t < n1 ? t : t + u);
    }
    for (int l = 0; l < MAX_LAYERS; l++) ps->alpha[l] = 1.0f;  // the positions carry it
    ps->positions = p;
    ps->n_positions = T;
    ps->seq_stride = T;
}

// THE POSAUG HOOK (host side): positions, frequencies and biases for optimizer step `step`.
static inline PosStep pos_schedule_step(const PosConfig *pc, long step) {
    PosStep ps = pos_standard(pc);
    pos_set_pe(&ps, pe_at_step(pc, step), pc->n_head);
    switch (pc->scheme) {
#define POS_STEP_CASE(e, name, what, show, props, reach, alpha_fn, step_fn, infer_fn)                                  \
    case e: step_fn(&ps, pc, step); break;
        POS_TABLE(POS_STEP_CASE)
#undef POS_STEP_CASE
    }
    return ps;
}

// Linear warmup, then cosine from lr to min_lr (0-based step).
static inline float lr_at_step(long step, long warmup, long steps, float lr, float min_lr) {
    if (step < warmup) return lr * (float)(step + 1) / (float)warmup;
    double r = (double)(step - warmup) / (double)(steps - warmup > 1 ? steps - warmup : 1);
    if (r > 1.0) r = 1.0;
    return (float)(min_lr + 0.5 * (lr - min_lr) * (1.0 + cos(3.14159265358979323846 * r)));
}
