// The attention-score hook: every attention path of both trainers (CPU training and rows,
// the GPU's naive, flash and evaluation kernels) computes the logit of key s for query t as
//
//     x_ts = (q_t . k_s) / sqrt(hd) + attn_bias(ab, h, t - s) + pair[h][t][s]
//     attn_bias = term[h][t - s] + qrel[t][h][bucket[t - s]] - slope[h] * (t - s)
//
// term is a learned encoding's bias at each distance, pair its bias at each (query, key)
// when it reads the query's position too: both filled, before the attention, from the
// encoding's tensors by its function (BIAS_FN_TABLE below), which every backend evaluates
// with the same code. pair is also TUPE's untied positions (--pe tupe), the same in every
// layer; training reads pair whole, the CPU's rows form each entry (from the function, or
// from TUPE's projected positions pq, pk: tupe_pair_at).
//
// qrel is the query's own row of scores against relative key vectors r_j (qrel[t][h][j] =
// q_t . r_j / sqrt(hd)): a learned table (Shaw et al. 2018, the tensor rel_key (L,NB,hd)) or
// computed each pass by a learned function of the distance (T-PE: r_d = h(alpha * d), one
// bucket per token distance, tpe_key). Training forms it once per layer before the attention
// (rel_key_scores), the CPU's row-by-row evaluation one query row at a time from the keys
// (rkeys); its gradient is the logits' gradient summed per query row and bucket
// (rel_key_backward). The flash kernels do not read it.
//
// One BiasPass per pass, filled on the host by attn_bias_pass() from the step's recipe,
// and one AttnBias per layer from it (attn_bias_layer). ALiBi is the slope (m_h * alpha[l]).
// The learned function's gradient: the logits' gradient dX summed per distance (along each
// diagonal, t ascending, then over b) or per (query, key) (over b), then through the
// function in fixed chunks whose partial sums add in order: the same on both backends,
// no atomics (bias_fn_chunk, bias_fn_reduce_at). The positions of explicit-position schemes
// (RPE, RFS, PoSE) are not read: the bias sees token distances times alpha (config.h
// refuses those pairs). A new encoding is its tensors' rows, its two functions and a row of
// BIAS_FN_TABLE (doc/position_hook.md, section 6).
#pragma once
#include "schedule.h"

#define AB_HOST_DEVICE HOST_DEVICE

// T5's bucket of a causal distance (Raffel et al. 2020; nb buckets, the upper half
// log-spaced up to max_dist) of n = floor(dist): n itself below nb/2, then nb/2 +
// floor(ln(n / (nb/2)) / ln(max_dist / (nb/2)) * nb/2), at most nb - 1. In fp32, as T5's
// code computes it.
AB_HOST_DEVICE static inline int t5_bucket(float dist, int nb, float max_dist) {
    float exact = (float)(nb / 2), n = floorf(dist);
    if (n < exact) return (int)n;
    int j = nb / 2 + (int)(logf(n / exact) / logf(max_dist / exact) * (float)(nb - nb / 2));
    return j < nb - 1 ? j : nb - 1;
}

// eRPE's and Shaw's bucket: min(floor(dist), clip)
AB_HOST_DEVICE static inline int clip_bucket(float dist, int clip) { return dist < (float)clip ? (int)dist : clip; }

// ----------------------------------------------------------------------------
// The encodings with a learned function of the distance (and of the query's position): a
// bias b_h(i, j) added to the logits. Their tensors, one row each in llmc/checkpoint.h's
// PARAM_TABLE format (appended to it): name, ndim, shape in terms of the config c, the layer
// count L and nb (the encoding's buckets, BIAS_FN_TABLE), the init (NORMAL std, UNIFORM lo
// hi, CONST value; attn_bias is N(0, 0.02) for TUPE, as its released code's BERT init draws
// every embedding, zeros for eRPE and T5), AdamW weight decay, and its bounds [lo, hi]: the
// values the init and AdamW keep it in (a constraint; NO_LO, NO_HI for none). A tensor exists
// when the run's encoding reads it (the last column of BIAS_FN_TABLE). Append rows: the init
// draws in table order.
#define BIAS_PARAM_TABLE(X)                                                                                  \
    X(ATTN_BIAS, "attn_bias", 3, L, c->NH, nb, INIT_NORMAL, pe_is(c->pe, PEF_UNTIED) ? 0.02f : 0.0f, 0, 0, NO_LO, NO_HI) \
    X(KERPLE_R1, "kerple_r1", 2, L, c->NH, 0, INIT_UNIFORM, 0.0f, 2.0f, 0, KERPLE_EPS, NO_HI)                        \
    X(KERPLE_R2, "kerple_r2", 2, L, c->NH, 0, INIT_UNIFORM, 0.0f, 1.0f, 0, KERPLE_EPS, NO_HI)                        \
    X(FIRE_W1, "fire_w1", 2, L, FIRE_HIDDEN, 0, INIT_UNIFORM, -1.0f, 1.0f, 0, NO_LO, NO_HI)                        \
    X(FIRE_B1, "fire_b1", 2, L, FIRE_HIDDEN, 0, INIT_UNIFORM, -1.0f, 1.0f, 0, NO_LO, NO_HI)                        \
    X(FIRE_W2, "fire_w2", 3, L, c->NH, FIRE_HIDDEN, INIT_UNIFORM, -FIRE_W2_INIT, FIRE_W2_INIT, 0, NO_LO, NO_HI)    \
    X(FIRE_C, "fire_c", 1, L, 0, 0, INIT_CONST, 0.1f, 0.0f, 0, FIRE_EPS, NO_HI)                                       \
    X(FIRE_L_MULT, "fire_l_mult", 1, L, 0, 0, INIT_CONST, 1.0f, 0.0f, 0, FIRE_EPS, NO_HI)                             \
    X(KERPLE_POW_R1, "kerple_pow_r1", 2, L, c->NH, 0, INIT_UNIFORM, 0.0f, 1.0f, 0, KERPLE_EPS, NO_HI)         \
    X(KERPLE_POW_R2, "kerple_pow_r2", 2, L, c->NH, 0, INIT_UNIFORM, 0.0f, 2.0f, 0, KERPLE_EPS, KERPLE_MAX_POWER)
#define BP_ENUM(e, ...) BP_##e,
enum { BIAS_PARAM_TABLE(BP_ENUM) BP_N };
#undef BP_ENUM
#define NO_LO (-INFINITY)
#define NO_HI INFINITY
// the tensors an encoding reads, as bits of BP_*
#define BP_BIT(e) (1u << BP_##e)

// One layer's view of such an encoding (by value to the kernels; its pointers on the backend's side)
typedef struct {
    int pe;                 // PE_* of its row of BIAS_FN_TABLE
    int NH, NB;             // heads; buckets of a table (attn_bias (L,NH,NB))
    RelShape rs;            // eRPE's and T5's buckets
    float alpha;            // the layer's distances in positions are alpha * (t - s), the query's alpha * t
    int per_query;          // the term reads the query's position: (NH, Tq, n) rather than (NH, n)
    const float *w[BP_N];   // the layer's slice of each tensor it reads, else NULL
    float *dw[BP_N];        // ... of their gradients (training), else NULL
    int off[BP_N], n_w[BP_N];  // the slices' floats, and their place in a gradient's partial row
    int P;                  // the floats of a partial row (the sum of n_w)
} BiasFn;

// The functions, one pair per encoding: its term b_h at a query position and distance (both
// in positions), and its gradient: g (each tensor's slice, as w) += dy * d(term) / d(tensor).
// Written once, for the host and the device.

// eRPE (Wennberg and Chiu 2021) and T5 (Raffel et al. 2020): a learned table of buckets
AB_HOST_DEVICE static inline int erpe_bucket_of(const BiasFn *f, float dist) { return clip_bucket(dist, f->rs.clip); }
AB_HOST_DEVICE static inline int t5_bucket_of(const BiasFn *f, float dist) {
    return t5_bucket(dist, f->rs.t5_buckets, (float)f->rs.t5_max);
}
AB_HOST_DEVICE static inline float erpe_term(const BiasFn *f, int h, float qpos, float dist) {
    (void)qpos;
    return f->w[BP_ATTN_BIAS][h * f->NB + erpe_bucket_of(f, dist)];
}
AB_HOST_DEVICE static inline void erpe_grad(const BiasFn *f, int h, float qpos, float dist, float dy, float *const *g) {
    (void)qpos;
    g[BP_ATTN_BIAS][h * f->NB + erpe_bucket_of(f, dist)] += dy;
}
AB_HOST_DEVICE static inline float t5_term(const BiasFn *f, int h, float qpos, float dist) {
    (void)qpos;
    return f->w[BP_ATTN_BIAS][h * f->NB + t5_bucket_of(f, dist)];
}
AB_HOST_DEVICE static inline void t5_grad(const BiasFn *f, int h, float qpos, float dist, float dy, float *const *g) {
    (void)qpos;
    g[BP_ATTN_BIAS][h * f->NB + t5_bucket_of(f, dist)] += dy;
}

// KERPLE, log variant (Chi et al. 2022): b_h = -r1_h ln(1 + r2_h dist), r1 and r2 per head,
// one set for every layer (shared), drawn U(0, 2) and U(0, 1) and kept at or above KERPLE_EPS
// (the paper's code builds one such module for all layers, draws and clamps them so).
// d/dr1 = -ln(1 + r2 dist), d/dr2 = -r1 dist / (1 + r2 dist).
#define KERPLE_EPS 1e-2f
AB_HOST_DEVICE static inline float kerple_term(const BiasFn *f, int h, float qpos, float dist) {
    (void)qpos;
    return -f->w[BP_KERPLE_R1][h] * logf(1.0f + f->w[BP_KERPLE_R2][h] * dist);
}
AB_HOST_DEVICE static inline void kerple_grad(const BiasFn *f, int h, float qpos, float dist, float dy, float *const *g) {
    (void)qpos;
    float r1 = f->w[BP_KERPLE_R1][h], z = 1.0f + f->w[BP_KERPLE_R2][h] * dist;
    g[BP_KERPLE_R1][h] += dy * -logf(z);
    g[BP_KERPLE_R2][h] += dy * (-r1 * dist / z);
}

// KERPLE, power variant (Chi et al. 2022): b_h = -r1_h dist^r2_h, r1 > 0 and 0 < r2 <= 2 per
// head, shared by the layers (a conditionally positive definite kernel only for r2 in (0, 2]), drawn
// U(0, 1) and U(0, 2) and held in [KERPLE_EPS, inf) and [KERPLE_EPS, 2], as the paper's code
// clamps them. d/dr1 = -dist^r2, d/dr2 = -r1 dist^r2 ln(dist) (0 at distance 0).
#define KERPLE_MAX_POWER 2.0f
AB_HOST_DEVICE static inline float kerple_power_term(const BiasFn *f, int h, float qpos, float dist) {
    (void)qpos;
    return -f->w[BP_KERPLE_POW_R1][h] * powf(dist, f->w[BP_KERPLE_POW_R2][h]);
}
AB_HOST_DEVICE static inline void kerple_power_grad(const BiasFn *f, int h, float qpos, float dist, float dy,
                                                    float *const *g) {
    (void)qpos;
    float r1 = f->w[BP_KERPLE_POW_R1][h], d_r = powf(dist, f->w[BP_KERPLE_POW_R2][h]);
    g[BP_KERPLE_POW_R1][h] += dy * -d_r;
    g[BP_KERPLE_POW_R2][h] += dist > 0.0f ? dy * (-r1 * d_r * logf(dist)) : 0.0f;
}

// FIRE (Li et al. 2023): b_h(i, j) = f_h(x), x = psi(i - j) / psi(max(L, i)), psi(u) = ln(c u + 1),
// i the query's position, f = w2 relu(w1 x + b1) an MLP with FIRE_HIDDEN units and an output
// per head (no output bias: a constant per head moves no softmax), c and the threshold L per
// layer. L = m L0, a learned multiplier m of the fixed length L0 = FIRE_LENGTH, as FIRE's
// PyTorch port learns it (|m| * init_L, init_L = 512, whatever the window): Adam then moves L
// by about lr L0 a step. c and m are kept at or above FIRE_EPS. The MLP starts as nn.Linear's
// default, U(-1/sqrt(fan in), 1/sqrt(fan in)); c at 0.1, m at 1. x lies in [0, 1] at every
// length (j <= i).
#define FIRE_HIDDEN 32
#define FIRE_W2_INIT 0.17677669529663688f  // 1 / sqrt(FIRE_HIDDEN)
#define FIRE_EPS 1e-2f
#define FIRE_LENGTH 512.0f  // L0
// the threshold L = m L0 (one fp32 product)
AB_HOST_DEVICE static inline float fire_threshold(const BiasFn *f) { return f->w[BP_FIRE_L_MULT][0] * FIRE_LENGTH; }
// the MLP's input x at a query position and distance, with D = psi(max(L, i)) into *D
AB_HOST_DEVICE static inline float fire_input(const BiasFn *f, float qpos, float dist, float *D) {
    float c = f->w[BP_FIRE_C][0], thresh = fire_threshold(f), m = thresh > qpos ? thresh : qpos;
    *D = logf(c * m + 1.0f);
    return logf(c * dist + 1.0f) / *D;
}
AB_HOST_DEVICE static inline float fire_term(const BiasFn *f, int h, float qpos, float dist) {
    float D, x = fire_input(f, qpos, dist, &D), acc = 0.0f;
    const float *w1 = f->w[BP_FIRE_W1], *b1 = f->w[BP_FIRE_B1], *w2 = f->w[BP_FIRE_W2] + h * FIRE_HIDDEN;
    for (int j = 0; j < FIRE_HIDDEN; j++) acc += w2[j] * fmaxf(w1[j] * x + b1[j], 0.0f);
    return acc;
}
// With z_j = w1_j x + b1_j: dw2_hj = dy relu(z_j); through each active unit dz_j = dy w2_hj
// into dw1_j (dz_j x), db1_j (dz_j) and dx (dz_j w1_j); x = A / D with A = ln(c dist + 1),
// D = ln(c n + 1), n = max(L, i): dx/dc = (dist / (c dist + 1) - x n / (c n + 1)) / D, and
// dx/dm = L0 dx/dL = -x c L0 / ((c n + 1) D) where L > i (else 0).
AB_HOST_DEVICE static inline void fire_grad(const BiasFn *f, int h, float qpos, float dist, float dy, float *const *g) {
    float c = f->w[BP_FIRE_C][0], thresh = fire_threshold(f), n = thresh > qpos ? thresh : qpos;
    float D, x = fire_input(f, qpos, dist, &D), dx = 0.0f;
    const float *w1 = f->w[BP_FIRE_W1], *b1 = f->w[BP_FIRE_B1], *w2 = f->w[BP_FIRE_W2] + h * FIRE_HIDDEN;
    for (int j = 0; j < FIRE_HIDDEN; j++) {
        float z = w1[j] * x + b1[j];
        if (z <= 0.0f) continue;
        float dz = dy * w2[j];
        g[BP_FIRE_W2][h * FIRE_HIDDEN + j] += dy * z;
        g[BP_FIRE_W1][j] += dz * x;
        g[BP_FIRE_B1][j] += dz;
        dx += dz * w1[j];
    }
    g[BP_FIRE_C][0] += dx * (dist / (c * dist + 1.0f) - x * n / (c * n + 1.0f)) / D;
    if (thresh > qpos) g[BP_FIRE_L_MULT][0] += dx * (-x * c * FIRE_LENGTH / ((c * n + 1.0f) * D));
}

// The encodings of this kind, one row each: PE_*, its term and gradient, whether the term
// reads the query's position, whether one set of tensors serves every layer (shared: their
// first dimension is 1, not L, and each layer's gradient adds into it, layer after layer),
// its buckets per head nb (an expression of rs, 0 without a table), and the tensors it reads
// (BP_BIT of each).
#define BIAS_FN_TABLE(X)                                                                                       \
    X(PE_ERPE, erpe_term, erpe_grad, 0, 0, rs.clip + 1, BP_BIT(ATTN_BIAS))                                   \
    X(PE_T5, t5_term, t5_grad, 0, 0, rs.t5_buckets, BP_BIT(ATTN_BIAS))                                       \
    X(PE_TUPE, t5_term, t5_grad, 0, 1, rs.t5_buckets, BP_BIT(ATTN_BIAS))                                     \
    X(PE_KERPLE, kerple_term, kerple_grad, 0, 1, 0, BP_BIT(KERPLE_R1) | BP_BIT(KERPLE_R2))                   \
    X(PE_FIRE, fire_term, fire_grad, 1, 0, 0,                                                                 \
      BP_BIT(FIRE_W1) | BP_BIT(FIRE_B1) | BP_BIT(FIRE_W2) | BP_BIT(FIRE_C) | BP_BIT(FIRE_L_MULT))             \
    X(PE_KERPLE_POWER, kerple_power_term, kerple_power_grad, 0, 1, 0, BP_BIT(KERPLE_POW_R1) | BP_BIT(KERPLE_POW_R2))

// Encoding pe's row (per_query, tensors), or NULL without one; its table's buckets per head
// (an expression of rs: 0 without a table)
typedef struct {
    int pe, per_query, shared;
    unsigned tensors;
} BiasFnRow;
static inline const BiasFnRow *bias_fn_row(int pe) {
#define BIAS_FN_ROW(e, term, grad, per_query, shared, nb, tensors) {e, per_query, shared, tensors},
    static const BiasFnRow rows[] = {BIAS_FN_TABLE(BIAS_FN_ROW)};
#undef BIAS_FN_ROW
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
        if (rows[i].pe == pe) return &rows[i];
    return NULL;
}
static inline int pe_bias_fn(int pe) { return bias_fn_row(pe) != NULL; }
static inline int pe_bias_per_query(int pe) { return pe_bias_fn(pe) && bias_fn_row(pe)->per_query; }
static inline int pe_bias_shared(int pe) { return pe_bias_fn(pe) && bias_fn_row(pe)->shared; }
static inline unsigned pe_bias_tensors(int pe) { return pe_bias_fn(pe) ? bias_fn_row(pe)->tensors : 0u; }
static inline int pe_bias_fn_buckets(int pe, RelShape rs) {
#define BIAS_FN_NB(e, term, grad, per_query, shared, nb, tensors) if (pe == e) return nb;
    BIAS_FN_TABLE(BIAS_FN_NB)
#undef BIAS_FN_NB
    (void)rs;
    return 0;
}

AB_HOST_DEVICE static inline float bias_fn_term(const BiasFn *f, int h, float qpos, float dist) {
    switch (f->pe) {
#define BIAS_FN_TERM(e, term, grad, per_query, shared, nb, tensors) \
    case e: return term(f, h, qpos, dist);
        BIAS_FN_TABLE(BIAS_FN_TERM)
#undef BIAS_FN_TERM
    }
    return 0.0f;
}

AB_HOST_DEVICE static inline void bias_fn_grad(const BiasFn *f, int h, float qpos, float dist, float dy, float *const *g) {
    switch (f->pe) {
#define BIAS_FN_GRAD(e, term, grad, per_query, shared, nb, tensors) \
    case e: grad(f, h, qpos, dist, dy, g); return;
        BIAS_FN_TABLE(BIAS_FN_GRAD)
#undef BIAS_FN_GRAD
    }
}

// Element i of a pass's term, for Tq queries at q_offset + t over n keys: (NH, n) at each
// distance d (qpos 0), or with per_query (NH, Tq, n) at each query and key s (0 past the query).
AB_HOST_DEVICE static inline float bias_fn_fill_at(const BiasFn *f, size_t i, int Tq, int n, int q_offset) {
    if (!f->per_query) return bias_fn_term(f, (int)(i / n), 0.0f, f->alpha * (float)(i % n));
    int s = (int)(i % n), last = q_offset + (int)((i / n) % Tq), h = (int)(i / ((size_t)n * Tq));
    return s <= last ? bias_fn_term(f, h, f->alpha * (float)last, f->alpha * (float)(last - s)) : 0.0f;
}

// the chunks of a gradient: BIAS_CHUNK distances each, or one query row each (per_query)
#define BIAS_CHUNK 64
AB_HOST_DEVICE static inline int bias_fn_chunks(const BiasFn *f, int Tq, int n) {
    return f->per_query ? Tq : (n + BIAS_CHUNK - 1) / BIAS_CHUNK;
}

// The gradient, step 1: chunk c's partial row part (f->P floats, overwritten) from the
// term's gradient dterm: (B, NH, n) per distance (summed over b here, ascending), or (NH,
// Tq, n) per query and key, summed over b already. Within a chunk: heads, then distances or
// keys, in order.
AB_HOST_DEVICE static inline void bias_fn_chunk(const BiasFn *f, float *part, int c, const float *dterm, int B, int Tq,
                                                int n, int q_offset) {
    float *g[BP_N];
    for (int k = 0; k < BP_N; k++) g[k] = f->w[k] ? part + f->off[k] : NULL;
    for (int p = 0; p < f->P; p++) part[p] = 0.0f;
    if (f->per_query) {
        int last = q_offset + c;
        float qpos = f->alpha * (float)last;
        for (int h = 0; h < f->NH; h++)
            for (int s = 0; s <= last && s < n; s++)
                bias_fn_grad(f, h, qpos, f->alpha * (float)(last - s), dterm[((size_t)h * Tq + c) * n + s], g);
        return;
    }
    int d1 = (c + 1) * BIAS_CHUNK < n ? (c + 1) * BIAS_CHUNK : n;
    for (int h = 0; h < f->NH; h++)
        for (int d = c * BIAS_CHUNK; d < d1; d++) {
            float dy = 0.0f;
            for (int b = 0; b < B; b++) dy += dterm[((size_t)b * f->NH + h) * n + d];
            bias_fn_grad(f, h, 0.0f, f->alpha * (float)d, dy, g);
        }
}

// Step 2: entry p of the partial rows (n_chunks of them) summed in chunk order, into the
// tensor it belongs to.
AB_HOST_DEVICE static inline void bias_fn_reduce_at(const BiasFn *f, const float *part, int n_chunks, int p) {
    for (int k = 0; k < BP_N; k++)
        if (f->dw[k] && p >= f->off[k] && p < f->off[k] + f->n_w[k]) {
            float acc = 0.0f;
            for (int c = 0; c < n_chunks; c++) acc += part[(size_t)c * f->P + p];
            f->dw[k][p - f->off[k]] += acc;
            return;
        }
}

// ----------------------------------------------------------------------------
// The encodings with relative keys: their PE_*, the number of buckets NB, the bucket of
// token distance d (its distance in positions is `dist` = alpha * d) as an expression (both
// may read `rs`, the RelShape of --rel_clip, and `n_dist`, the pass's distances; buckets
// never decrease with the distance), and what a bucket holds: a key vector shared by the
// heads (BIAS_KEY: rel_key), or a key vector computed by a learned function of dist
// (BIAS_KEY_FN: T-PE's r = tpe_w2 tanh(tpe_w1 ln(1 + dist) + tpe_b1), tpe_key).
enum { BIAS_NONE, BIAS_KEY, BIAS_KEY_FN };
#define PE_KEY_TABLE(X)                                                        \
    X(PE_SHAW, rs.clip + 1, clip_bucket(dist, rs.clip), BIAS_KEY)            \
    X(PE_TPE, n_dist, d, BIAS_KEY_FN)

// T-PE's function h: R -> R^hd, one hidden layer of TPE_HIDDEN tanh units per layer
#define TPE_HIDDEN 32
// TUPE's queries and projected positions are scaled by 1/sqrt(2): logits over sqrt(2 hd)
#define TUPE_QSCALE 0.70710678118654752f

// TUPE's untied term of one head, query row pq and key row pk (hd each): pq . pk * scale
AB_HOST_DEVICE static inline float tupe_pair_at(const float *pq, const float *pk, int hd, float scale) {
    float dot = 0.0f;
    for (int c = 0; c < hd; c++) dot += pq[c] * pk[c];
    return dot * scale;
}

// TUPE's position path before its projections, as its released code: p = LayerNorm(wpe's
// row) with the gain tupe_ln_w and bias tupe_ln_b (eps 1e-5, the code's); mr keeps the row's
// mean and 1/std for the backward.
#define TUPE_LN_EPS 1e-5f
AB_HOST_DEVICE static inline void tupe_ln_row(float *p, float *mr, const float *x, const float *w, const float *b, int C) {
    float m = 0.0f, v = 0.0f;
    for (int c = 0; c < C; c++) m += x[c];
    m /= (float)C;
    for (int c = 0; c < C; c++) v += (x[c] - m) * (x[c] - m);
    float r = 1.0f / sqrtf(v / (float)C + TUPE_LN_EPS);
    for (int c = 0; c < C; c++) p[c] = (x[c] - m) * r * w[c] + b[c];
    mr[0] = m;
    mr[1] = r;
}

// Its backward for one row, x^ = (x - m) r and g = dp w: dx += r (g - mean(g) - x^ mean(g x^))
AB_HOST_DEVICE static inline void tupe_ln_row_backward(float *dx, const float *dp, const float *x, const float *w,
                                                       const float *mr, int C) {
    float m = mr[0], r = mr[1], mg = 0.0f, mgx = 0.0f;
    for (int c = 0; c < C; c++) {
        mg += dp[c] * w[c];
        mgx += dp[c] * w[c] * (x[c] - m) * r;
    }
    mg /= (float)C;
    mgx /= (float)C;
    for (int c = 0; c < C; c++) dx[c] += r * (dp[c] * w[c] - mg - (x[c] - m) * r * mgx);
}

// Sums over rows 0..n-1 of column c, in order: the gain's gradient sum of dp x^ (x given) or
// a bias's sum of d (x NULL), of a (n, W) gradient
AB_HOST_DEVICE static inline float tupe_column_grad(const float *d, const float *x, const float *mr, int n, int W, int c) {
    float acc = 0.0f;
    for (int t = 0; t < n; t++)
        acc += d[(size_t)t * W + c] * (x ? (x[(size_t)t * W + c] - mr[2 * t]) * mr[2 * t + 1] : 1.0f);
    return acc;
}

// Layer l's hook as the kernels take it (by value; every pointer on the kernel's side).
typedef struct {
    const float *slope;   // (NH) -slope[h] * (t - s): ALiBi's m_h * alpha[l]; NULL without
    const float *term;    // (NH, n_dist) this layer's learned bias at each distance, or NULL
    const float *qrel;    // (B, Tq, NH, NB) each query's scores against the relative keys, or NULL
    const float *rkeys;   // (NB, hd) the relative keys, or NULL (the CPU's rows form qrel from them)
    const int *bucket;    // (n_dist) bucket of token distance d = t - s (with relative keys)
    const float *pair;    // (NH, Tq, n_dist) a term of each query and key (TUPE's untied positions, or a
                          //   learned bias that reads the query's position), or NULL
    const float *pq, *pk; // (n_dist, NH*hd) TUPE's projected positions, pq / sqrt(2): the CPU's rows form pair
    const BiasFn *fn;     // a learned bias that reads the query's position: the CPU's rows form pair from it
    int NB, n_dist, NH, Tq, hd;
} AttnBias;

// One head's part of it, which the kernels take once, out of their loops.
typedef struct {
    const float *term;   // (n_dist) this head's row, or NULL
    const int *bucket;   // (n_dist)
    int n_dist;
    float slope;         // 0 without
} AttnBiasHead;

AB_HOST_DEVICE static inline AttnBiasHead attn_bias_head(AttnBias ab, int h) {
    AttnBiasHead hb = {ab.term ? ab.term + (size_t)h * ab.n_dist : NULL, ab.bucket, ab.n_dist, ab.slope ? ab.slope[h] : 0.0f};
    return hb;
}

// The bias at token distance d. Distances past the pass's keys (the padded rows of a
// kernel's last tile, never kept) read the last one.
AB_HOST_DEVICE static inline float attn_bias_at(AttnBiasHead hb, int d) {
    return (hb.term ? hb.term[d < hb.n_dist ? d : hb.n_dist - 1] : 0.0f) - hb.slope * (float)d;
}

// Query row t of sequence b (head h): its scores against the relative keys, or NULL
AB_HOST_DEVICE static inline const float *attn_bias_qrow(AttnBias ab, int b, int t, int h) {
    return ab.qrel ? ab.qrel + (((size_t)b * ab.Tq + t) * ab.NH + h) * ab.NB : NULL;
}

// The bias at distance d for a query whose relative-key scores are qrow (NULL: none)
AB_HOST_DEVICE static inline float attn_bias_at_row(AttnBiasHead hb, const float *qrow, int d) {
    return attn_bias_at(hb, d) + (qrow ? qrow[hb.bucket[d < hb.n_dist ? d : hb.n_dist - 1]] : 0.0f);
}

// Buckets per head of encoding pe's relative keys in a pass of n_dist distances (0: none)
static inline int pe_bias_buckets(int pe, RelShape rs, int n_dist) {
#define PE_KEY_NB(e, nb, bucket_of, kind) if (pe == e) return nb;
    PE_KEY_TABLE(PE_KEY_NB)
#undef PE_KEY_NB
    (void)rs;
    (void)n_dist;
    return 0;
}

// BIAS_KEY, BIAS_KEY_FN or BIAS_NONE
static inline int pe_bias_kind(int pe) {
#define PE_KEY_KIND(e, nb, bucket_of, kind) if (pe == e) return kind;
    PE_KEY_TABLE(PE_KEY_KIND)
#undef PE_KEY_KIND
    return BIAS_NONE;
}

// whether encoding pe scores relative keys
static inline int pe_bias_keys(int pe) { return pe_bias_kind(pe) != BIAS_NONE; }

// whether encoding pe acts on the logits through distances (ALiBi, a learned function,
// relative keys): explicit positions (RPE, RFS, PoSE) cannot reach it
static inline int pe_reads_distances(int pe) { return pe_is(pe, PEF_SLOPES) || pe_bias_fn(pe) || pe_bias_keys(pe); }

static inline int pe_bias_bucket(int pe, RelShape rs, int n_dist, float dist, int d) {
#define PE_KEY_BUCKET(e, nb, bucket_of, kind) if (pe == e) return (bucket_of);
    PE_KEY_TABLE(PE_KEY_BUCKET)
#undef PE_KEY_BUCKET
    (void)rs;
    (void)n_dist;
    (void)dist;
    (void)d;
    return 0;
}

// T-PE's hidden unit j at input u (= ln(1 + dist)): tanh(w1[j] u + b1[j])
AB_HOST_DEVICE static inline float tpe_hidden(const float *w1, const float *b1, int j, float u) {
    return tanhf(w1[j] * u + b1[j]);
}

// Element c of T-PE's key at input u: sum over j (ascending) of w2[c][j] * hidden j.
// w1, b1 (TPE_HIDDEN), w2 (hd, TPE_HIDDEN): one layer's tpe_w1, tpe_b1, tpe_w2.
AB_HOST_DEVICE static inline float tpe_key(const float *w1, const float *b1, const float *w2, int c, float u) {
    float acc = 0.0f;
    for (int j = 0; j < TPE_HIDDEN; j++) acc += w2[c * TPE_HIDDEN + j] * tpe_hidden(w1, b1, j, u);
    return acc;
}

// T-PE's backward, from drk (n,hd) the gradient of the keys at inputs u (n): for hidden unit
// j, with a = tpe_hidden and da_d = sum over c of w2[c][j] drk[d][c], dz_d = da_d (1 - a^2):
// *gw1 = sum over d (ascending) of dz_d u_d, *gb1 = sum of dz_d.
AB_HOST_DEVICE static inline void tpe_grad_hidden(float *gw1, float *gb1, const float *drk, const float *u, const float *w1,
                                                  const float *b1, const float *w2, int n, int hd, int j) {
    float g1 = 0.0f, gb = 0.0f;
    for (int d = 0; d < n; d++) {
        float a = tpe_hidden(w1, b1, j, u[d]), da = 0.0f;
        for (int c = 0; c < hd; c++) da += w2[c * TPE_HIDDEN + j] * drk[(size_t)d * hd + c];
        float dz = da * (1.0f - a * a);
        g1 += dz * u[d];
        gb += dz;
    }
    *gw1 = g1;
    *gb1 = gb;
}

// ... and dw2[c][j] = sum over d (ascending) of drk[d][c] * hidden j at u_d
AB_HOST_DEVICE static inline float tpe_grad_w2(const float *drk, const float *u, const float *w1, const float *b1, int n,
                                               int hd, int c, int j) {
    float acc = 0.0f;
    for (int d = 0; d < n; d++) acc += drk[(size_t)d * hd + c] * tpe_hidden(w1, b1, j, u[d]);
    return acc;
}

// What a pass's hook reads, filled on the host from the step's recipe: slopes [l][h] and the
// relative keys' buckets of token distances 0 .. n_dist-1, [l][d] (a stride of 0: all layers
// share one row), and what a learned function needs (bias_fn_layer). Grow-only host buffers,
// valid until the next attn_bias_pass.
typedef struct {
    const float *slope;   // NULL: no slopes
    const int *bucket;    // NULL: no relative keys
    const float *tpe_u;   // BIAS_KEY_FN: the function's input ln(1 + alpha[l] * d), [l][d] (bucket's stride)
    int slope_stride, bucket_stride, n_dist, NB;
    int kind;                  // BIAS_* of the encoding's relative keys
    size_t n_slope, n_bucket;  // entries of each (tpe_u: n_bucket)
    int pe;                    // the pass's encoding
    int fn;                    // it is a learned function (BIAS_FN_TABLE)
    RelShape rs;
    float alpha[MAX_LAYERS];   // layer l's distances in positions: alpha[l] * d
} BiasPass;

static inline BiasPass attn_bias_pass(const PosStep *ps, int n_layer, int NH, int n_dist) {
    static float *slope, *tpe_u;
    static int *bucket;
    static size_t slope_cap, bucket_cap, u_cap;
    BiasPass bp;
    memset(&bp, 0, sizeof(bp));
    int nl = pos_per_layer(ps, n_layer) ? n_layer : 1;
    if (pe_is(ps->pe, PEF_SLOPES)) {  // m_h * alpha[l]
        bp.n_slope = (size_t)nl * NH;
        slope = (float *)grow_buffer(slope, &slope_cap, bp.n_slope * sizeof(float));
        for (int l = 0; l < nl; l++)
            for (int h = 0; h < NH; h++) slope[(size_t)l * NH + h] = ps->alibi_slope[h] * ps->alpha[l];
        bp.slope = slope;
        bp.slope_stride = nl > 1 ? NH : 0;
    }
    bp.pe = ps->pe;
    bp.fn = pe_bias_fn(ps->pe);
    bp.rs = ps->rel;
    memcpy(bp.alpha, ps->alpha, sizeof(bp.alpha));
    bp.NB = pe_bias_buckets(ps->pe, ps->rel, n_dist);
    bp.kind = pe_bias_kind(ps->pe);
    bp.n_dist = n_dist;
    if (bp.NB) {  // the bucket of alpha[l] * d
        bp.n_bucket = (size_t)nl * n_dist;
        bucket = (int *)grow_buffer(bucket, &bucket_cap, bp.n_bucket * sizeof(int));
        if (bp.kind == BIAS_KEY_FN) tpe_u = (float *)grow_buffer(tpe_u, &u_cap, bp.n_bucket * sizeof(float));
        for (int l = 0; l < nl; l++)
            for (int d = 0; d < n_dist; d++) {
                float dist = ps->alpha[l] * (float)d;
                int j = pe_bias_bucket(ps->pe, ps->rel, n_dist, dist, d);
                if (j < 0 || j >= bp.NB) fail("internal: distance %d in bucket %d of %d", d, j, bp.NB);
                bucket[(size_t)l * n_dist + d] = j;
                if (bp.kind == BIAS_KEY_FN) tpe_u[(size_t)l * n_dist + d] = log1pf(dist);
            }
        bp.bucket = bucket;
        bp.tpe_u = bp.kind == BIAS_KEY_FN ? tpe_u : NULL;
        bp.bucket_stride = nl > 1 ? n_dist : 0;
    }
    return bp;
}

// Layer l's hook from the pass bp (its pointers wherever bp's point), a learned function's
// term (NH, n_dist) and its relative keys rkeys (NB,hd) with their scores qrel (B,Tq,NH,NB)
// (any may be NULL).
static inline AttnBias attn_bias_layer(const BiasPass *bp, int l, int NH, const float *term, const float *qrel,
                                       const float *rkeys, int Tq, int hd) {
    AttnBias ab;
    memset(&ab, 0, sizeof(ab));
    ab.slope = bp->slope ? bp->slope + (size_t)l * bp->slope_stride : NULL;
    ab.term = term;
    int key = bp->kind != BIAS_NONE && (qrel || rkeys);
    ab.NB = bp->bucket && key ? bp->NB : 0;
    ab.qrel = ab.NB ? qrel : NULL;
    ab.rkeys = ab.NB ? rkeys : NULL;
    ab.bucket = ab.NB ? bp->bucket + (size_t)l * bp->bucket_stride : NULL;
    ab.n_dist = bp->n_dist;
    ab.NH = NH;
    ab.Tq = Tq;
    ab.hd = hd;
    return ab;
}
