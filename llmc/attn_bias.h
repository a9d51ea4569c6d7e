// The attention-score hook: every attention path of both trainers (CPU training and rows,
// the GPU's naive, flash and evaluation kernels) computes the logit of key s for query t as
//
//     x_ts = (q_t . k_s) / sqrt(hd) + attn_bias(ab, h, t - s)
//     attn_bias = table[h][bucket[t - s]] - slope[h] * (t - s)
//
// One AttnBias per layer and pass, filled on the host by attn_bias_layer() from the step's
// recipe: ALiBi is the slope (m_h * alpha[l]); an encoding with a learned bias is a table
// of NB buckets per head and layer (the tensor attn_bias (L,NH,NB)) and the bucket of each
// distance in positions, alpha[l] * (t - s). Its gradient: dtable[h][j] is the sum of
// dx_ts over every (b, t, s) whose distance falls in bucket j, summed per diagonal first
// (attn_bias_diag: d = t - s, t ascending), then over b and d in order, the same on both
// backends. The positions of explicit-position schemes (RPE, RFS) are not read: the bias
// sees token distances times alpha.
// A new encoding of the bias kind is a row of PE_BIAS_TABLE (doc/position_hook.md, §6).
#pragma once
#include "schedule.h"

#ifdef __CUDACC__
#define AB_HOST_DEVICE __host__ __device__
#else
#define AB_HOST_DEVICE
#endif

// The encodings with a learned bias table: their PE_* (a row of PE_TABLE), the number of
// buckets NB, and the bucket of a distance `dist` (in positions, >= 0) as an expression.
// Empty: no encoding has a learned bias yet (issue: the PE survey's relative encodings).
#define PE_BIAS_TABLE(X)

#define MAX_BIAS_BUCKETS 1024

typedef struct {
    float slope[MAX_HEADS];  // -slope[h] * (t - s): ALiBi's m_h * alpha[l]; 0 without
    const float *table;      // (NH, NB) this layer's learned bias, or NULL
    const int *bucket;       // (n_dist) bucket of token distance d = t - s (with a table)
    int NB, n_dist;
} AttnBias;

// The bias at token distance d of a head whose table row is table_h (NULL: none) and slope
// slope_h: what the kernels compute, with both hoisted out of their loops.
AB_HOST_DEVICE static inline float attn_bias_at(const float *table_h, const int *bucket, float slope_h, int d) {
    return (table_h ? table_h[bucket[d]] : 0.0f) - slope_h * (float)d;
}

// Head h's table row, or NULL
AB_HOST_DEVICE static inline const float *attn_bias_row(const AttnBias *ab, int h) {
    return ab->table ? ab->table + h * ab->NB : NULL;
}

// Buckets per head of encoding pe (0: no learned table)
static inline int pe_bias_buckets(int pe) {
#define PE_BIAS_NB(e, nb, bucket_of) if (pe == e) return nb;
    PE_BIAS_TABLE(PE_BIAS_NB)
#undef PE_BIAS_NB
    (void)pe;
    return 0;
}

static inline int pe_bias_bucket(int pe, float dist) {
#define PE_BIAS_BUCKET(e, nb, bucket_of) if (pe == e) return (bucket_of);
    PE_BIAS_TABLE(PE_BIAS_BUCKET)
#undef PE_BIAS_BUCKET
    (void)pe;
    (void)dist;
    return 0;
}

// The bucket of every token distance 0 .. n_dist-1 of each layer, bucket[l][d], for the
// layers' alphas (one row when they share it): a grow-only host buffer, valid until the
// next call. NULL without a learned table.
static inline const int *attn_bias_buckets(const PosStep *ps, int n_layer, int n_dist, int *layer_stride) {
    static int *buf;
    static size_t cap;
    *layer_stride = 0;
    if (pe_bias_buckets(ps->pe) == 0) return NULL;
    int nl = pos_per_layer(ps, n_layer) ? n_layer : 1;
    if ((size_t)nl * n_dist > cap) {
        free(buf);
        cap = (size_t)nl * n_dist;
        buf = (int *)xmalloc(cap * sizeof(int));
    }
    for (int l = 0; l < nl; l++)
        for (int d = 0; d < n_dist; d++) {
            int j = pe_bias_bucket(ps->pe, ps->alpha[l] * (float)d);
            if (j < 0 || j >= pe_bias_buckets(ps->pe)) fail("internal: distance %d in bucket %d of %d", d, j,
                                                           pe_bias_buckets(ps->pe));
            buf[(size_t)l * n_dist + d] = j;
        }
    *layer_stride = nl > 1 ? n_dist : 0;
    return buf;
}

// Layer l's hook: table_l (NH, NB) is that layer's slice of attn_bias (NULL without one),
// bucket_l its bucket row of n_dist distances.
static inline AttnBias attn_bias_layer(const PosStep *ps, int l, int NH, const float *table_l, const int *bucket_l,
                                       int n_dist) {
    AttnBias ab;
    for (int h = 0; h < MAX_HEADS; h++) ab.slope[h] = h < NH ? ps->alibi_slope[h] * ps->alpha[l] : 0.0f;
    ab.NB = pe_bias_buckets(ps->pe);
    ab.table = ab.NB ? table_l : NULL;
    ab.bucket = ab.NB ? bucket_l : NULL;
    ab.n_dist = n_dist;
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
