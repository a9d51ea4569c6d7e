// The attention-score hook: every attention path of both trainers (CPU training and rows,
// the GPU's naive, flash and evaluation kernels) computes the logit of key s for query t as
//
//     x_ts = (q_t . k_s) / sqrt(hd) + attn_bias(ab, h, t - s) + pair[h][t][s]
//     attn_bias = table[h][bucket[t - s]] + qrel[t][h][bucket[t - s]] - slope[h] * (t - s)
//
// pair is the one term of a (query, key) pair rather than of a distance: TUPE's untied
// positions (--pe tupe), the same in every layer; training reads it whole, the CPU's rows form
// each entry from the projected positions pq, pk (tupe_pair_at).
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
// and one AttnBias per layer from it (attn_bias_layer). ALiBi is the slope (m_h * alpha[l]);
// an encoding with a learned bias is a table of NB buckets per head and layer (the tensor
// attn_bias (L,NH,NB)) and the bucket of each distance in positions, alpha[l] * (t - s).
// Its gradient: dtable[h][j] sums dx_ts over every (b, t, s) whose distance falls in bucket
// j: along each diagonal d = t - s first (t ascending), then over b and d in order, the
// same on both backends. The positions of explicit-position schemes (RPE, RFS, PoSE) are
// not read: the bias sees token distances times alpha (config.h refuses those pairs).
// A new encoding of the bias kind is a row of PE_BIAS_TABLE (doc/position_hook.md, §6).
#pragma once
#include "schedule.h"

#ifdef __CUDACC__
#define AB_HOST_DEVICE __host__ __device__
#else
#define AB_HOST_DEVICE
#endif

// T5's bucket of a causal distance (Raffel et al. 2020; nb buckets, the upper half
// log-spaced up to max_dist) of n = floor(dist): n itself below nb/2, then nb/2 +
// floor(ln(n / (nb/2)) / ln(max_dist / (nb/2)) * nb/2), at most nb - 1. In fp32, as T5's
// code computes it.
static inline int t5_bucket(float dist, int nb, float max_dist) {
    float exact = (float)(nb / 2), n = floorf(dist);
    if (n < exact) return (int)n;
    int j = nb / 2 + (int)(logf(n / exact) / logf(max_dist / exact) * (float)(nb - nb / 2));
    return j < nb - 1 ? j : nb - 1;
}

// The encodings with a learned term per bucket of distance: their PE_* (a row of PE_TABLE),
// the number of buckets NB, the bucket of token distance d (its distance in positions is
// `dist` = alpha * d) as an expression (both may read `rs`, the RelShape of --rel_clip,
// --t5_buckets and --t5_max_distance, and `n_dist`, the pass's distances; buckets never
// decrease with the distance), and what a bucket holds: a scalar bias per head (BIAS_SCALAR:
// the tensor attn_bias), a key vector shared by the heads (BIAS_KEY: rel_key), or a key
// vector computed by a learned function of dist (BIAS_KEY_FN: T-PE's
// r = tpe_w2 tanh(tpe_w1 ln(1 + dist) + tpe_b1), tpe_key). TUPE's relative bias is T5's.
enum { BIAS_NONE, BIAS_SCALAR, BIAS_KEY, BIAS_KEY_FN };
#define PE_BIAS_TABLE(X)                                                      \
    X(PE_ERPE, rs.clip + 1, dist < (float)rs.clip ? (int)dist : rs.clip, BIAS_SCALAR)      \
    X(PE_T5, rs.t5_buckets, t5_bucket(dist, rs.t5_buckets, (float)rs.t5_max), BIAS_SCALAR) \
    X(PE_SHAW, rs.clip + 1, dist < (float)rs.clip ? (int)dist : rs.clip, BIAS_KEY)         \
    X(PE_TPE, n_dist, d, BIAS_KEY_FN)                                                          \
    X(PE_TUPE, rs.t5_buckets, t5_bucket(dist, rs.t5_buckets, (float)rs.t5_max), BIAS_SCALAR)

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

// Layer l's hook as the kernels take it (by value; every pointer on the kernel's side).
typedef struct {
    const float *slope;   // (NH) -slope[h] * (t - s): ALiBi's m_h * alpha[l]; NULL without
    const float *table;   // (NH, NB) this layer's learned bias, or NULL
    const float *qrel;    // (B, Tq, NH, NB) each query's scores against the relative keys, or NULL
    const float *rkeys;   // (NB, hd) the relative keys, or NULL (the CPU's rows form qrel from them)
    const int *bucket;    // (n_dist) bucket of token distance d = t - s (with a table)
    const float *pair;    // (NH, Tq, n_dist) a term of each query and key (TUPE's untied positions), or NULL
    const float *pq, *pk; // (n_dist, NH*hd) TUPE's projected positions, pq / sqrt(2): the CPU's rows form pair
    int NB, n_dist, NH, Tq, hd;
} AttnBias;

// One head's part of it, which the kernels take once, out of their loops.
typedef struct {
    const float *table;  // (NB) this head's row, or NULL
    const int *bucket;   // (n_dist)
    int n_dist;
    float slope;         // 0 without
} AttnBiasHead;

AB_HOST_DEVICE static inline AttnBiasHead attn_bias_head(AttnBias ab, int h) {
    AttnBiasHead hb = {ab.table ? ab.table + h * ab.NB : NULL, ab.bucket, ab.n_dist, ab.slope ? ab.slope[h] : 0.0f};
    return hb;
}

// The bias at token distance d. Distances past the pass's keys (the padded rows of a
// kernel's last tile, never kept) read the last bucket.
AB_HOST_DEVICE static inline float attn_bias_at(AttnBiasHead hb, int d) {
    return (hb.table ? hb.table[hb.bucket[d < hb.n_dist ? d : hb.n_dist - 1]] : 0.0f) - hb.slope * (float)d;
}

// Query row t of sequence b (head h): its scores against the relative keys, or NULL
AB_HOST_DEVICE static inline const float *attn_bias_qrow(AttnBias ab, int b, int t, int h) {
    return ab.qrel ? ab.qrel + (((size_t)b * ab.Tq + t) * ab.NH + h) * ab.NB : NULL;
}

// The bias at distance d for a query whose relative-key scores are qrow (NULL: none)
AB_HOST_DEVICE static inline float attn_bias_at_row(AttnBiasHead hb, const float *qrow, int d) {
    return attn_bias_at(hb, d) + (qrow ? qrow[hb.bucket[d < hb.n_dist ? d : hb.n_dist - 1]] : 0.0f);
}

// Buckets per head of encoding pe in a pass of n_dist distances (0: no learned table)
static inline int pe_bias_buckets(int pe, RelShape rs, int n_dist) {
#define PE_BIAS_NB(e, nb, bucket_of, kind) if (pe == e) return nb;
    PE_BIAS_TABLE(PE_BIAS_NB)
#undef PE_BIAS_NB
    (void)rs;
    (void)n_dist;
    return 0;
}

// BIAS_SCALAR, BIAS_KEY, BIAS_KEY_FN or BIAS_NONE
static inline int pe_bias_kind(int pe) {
#define PE_BIAS_KIND(e, nb, bucket_of, kind) if (pe == e) return kind;
    PE_BIAS_TABLE(PE_BIAS_KIND)
#undef PE_BIAS_KIND
    return BIAS_NONE;
}

// whether buckets of this kind (of encoding pe) hold relative key vectors: a table's or a
// function's
static inline int bias_keys(int kind) { return kind == BIAS_KEY || kind == BIAS_KEY_FN; }
static inline int pe_bias_keys(int pe) { return bias_keys(pe_bias_kind(pe)); }

static inline int pe_bias_bucket(int pe, RelShape rs, int n_dist, float dist, int d) {
#define PE_BIAS_BUCKET(e, nb, bucket_of, kind) if (pe == e) return (bucket_of);
    PE_BIAS_TABLE(PE_BIAS_BUCKET)
#undef PE_BIAS_BUCKET
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
// buckets of token distances 0 .. n_dist-1, [l][d] (a stride of 0: all layers share one
// row). Grow-only host buffers, valid until the next attn_bias_pass.
typedef struct {
    const float *slope;   // NULL: no slopes
    const int *bucket;    // NULL: no learned table
    const float *tpe_u;   // BIAS_KEY_FN: the function's input ln(1 + alpha[l] * d), [l][d] (bucket's stride)
    int slope_stride, bucket_stride, n_dist, NB;
    int kind;                  // BIAS_* of the encoding: what the buckets index
    size_t n_slope, n_bucket;  // entries of each (tpe_u: n_bucket)
} BiasPass;

static inline BiasPass attn_bias_pass(const PosStep *ps, int n_layer, int NH, int n_dist) {
    static float *slope, *tpe_u;
    static int *bucket;
    static size_t slope_cap, bucket_cap, u_cap;
    BiasPass bp;
    memset(&bp, 0, sizeof(bp));
    int nl = pos_per_layer(ps, n_layer) ? n_layer : 1;
    if (ps->pe == PE_ALIBI) {  // m_h * alpha[l]
        bp.n_slope = (size_t)nl * NH;
        slope = (float *)grow_buffer(slope, &slope_cap, bp.n_slope * sizeof(float));
        for (int l = 0; l < nl; l++)
            for (int h = 0; h < NH; h++) slope[(size_t)l * NH + h] = ps->alibi_slope[h] * ps->alpha[l];
        bp.slope = slope;
        bp.slope_stride = nl > 1 ? NH : 0;
    }
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

// Layer l's hook from the pass bp (its pointers wherever bp's point), the model's
// attn_bias (L,NH,NB), and this layer's relative keys rkeys (NB,hd) with their scores qrel
// (B,Tq,NH,NB) (either may be NULL), each read only when the pass's encoding has that kind.
static inline AttnBias attn_bias_layer(const BiasPass *bp, int l, int NH, const float *attn_bias, const float *qrel,
                                       const float *rkeys, int Tq, int hd) {
    AttnBias ab;
    memset(&ab, 0, sizeof(ab));
    ab.slope = bp->slope ? bp->slope + (size_t)l * bp->slope_stride : NULL;
    int scalar = bp->kind == BIAS_SCALAR && attn_bias, key = bias_keys(bp->kind) && (qrel || rkeys);
    ab.NB = bp->bucket && (scalar || key) ? bp->NB : 0;
    ab.table = ab.NB && scalar ? attn_bias + (size_t)l * NH * ab.NB : NULL;
    ab.qrel = ab.NB && key ? qrel : NULL;
    ab.rkeys = ab.NB && key ? rkeys : NULL;
    ab.bucket = ab.NB ? bp->bucket + (size_t)l * bp->bucket_stride : NULL;
    ab.n_dist = bp->n_dist;
    ab.NH = NH;
    ab.Tq = Tq;
    ab.hd = hd;
    return ab;
}

// dtable (NH, NB) += the diagonal sums diag (B, NH, T) of dx, bucket by bucket: over b,
// then d, in order.
static inline void attn_bias_table_grad(float *dtable, const float *diag, const int *bucket, int B, int NH, int T,
                                        int NB) {
    for (int h = 0; h < NH; h++)
        for (int b = 0; b < B; b++)
            for (int d = 0; d < T; d++) dtable[h * NB + bucket[d]] += diag[((size_t)b * NH + h) * T + d];
}
