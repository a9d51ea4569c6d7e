// llmc/cuda/attention.cuh: causal GQA attention for training, --attention naive (cuBLAS scores, (T,T) probabilities).
#pragma once
#include "../attn_bias.h"
#include "cuda_utils.cuh"
#include "matmul.cuh"

// causal GQA attention for training: scores through cuBLAS, one head at a time, batched
// over the sequences. Query head h reads key/value head h / (NH/NKV) by pointer offset:
// K and V are never copied. q (B,T,NH,hd), k, v (B,T,NKV,hd), att (B,NH,T,T).
//                                                             mirrors attention_forward

// in place: raw scores (B,NH,T,T) -> causal softmax probabilities, one warp per row
__global__ void softmax_forward_kernel(floatX *att, int rows, int T, float scale) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= rows) return;
    int t = row % T;
    floatX *a = att + (size_t)row * T;
    float maxv = -FLT_MAX;
    for (int s = lane; s <= t; s += 32) maxv = fmaxf(maxv, to_f(a[s]) * scale);
    maxv = warp_max(maxv);
    float sum = 0.0f;
    for (int s = lane; s <= t; s += 32) sum += expf(to_f(a[s]) * scale - maxv);
    float inv = 1.0f / warp_sum(sum);
    for (int s = lane; s < T; s += 32) a[s] = to_x(s <= t ? expf(to_f(a[s]) * scale - maxv) * inv : 0.0f);
}

// in place: dP -> dS = P * (dP - sum(P * dP)) * scale
__global__ void softmax_backward_kernel(floatX *datt, const floatX *att, int rows, int T, float scale) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= rows) return;
    int t = row % T;
    const floatX *a = att + (size_t)row * T;
    floatX *d = datt + (size_t)row * T;
    float dot = 0.0f;
    for (int s = lane; s <= t; s += 32) dot += to_f(a[s]) * to_f(d[s]);
    dot = warp_sum(dot);
    for (int s = lane; s < T; s += 32) d[s] = to_x(s <= t ? to_f(a[s]) * (to_f(d[s]) - dot) * scale : 0.0f);
}

// The attention-score hook (llmc/attn_bias.h) on raw scores (B,NH,T,T): adds
// attn_bias(h, t - s) / scale, so that the softmax's scale * score carries it.
//                                              mirrors the bias in attention_forward_train
__global__ void attn_bias_kernel(floatX *att, int NH, int T, AttnBias ab, float scale, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int s = (int)(i % T), t = (int)((i / T) % T), h = (int)((i / ((size_t)T * T)) % NH), b = (int)(i / ((size_t)NH * T * T));
    if (s <= t) {
        float bias = attn_bias_at_row(attn_bias_head(ab, h), attn_bias_qrow(ab, b, t, h), t - s);
        if (ab.pair) bias += ab.pair[((size_t)h * T + t) * ab.n_dist + s];  // TUPE's untied positions
        att[i] = to_x(to_f(att[i]) + bias / scale);
    }
}

// Relative keys (--pe shaw, tpe): qrel (rows,NB) = q . rk_j / sqrt(hd) in fp32, q (rows,hd) the
// query rows (B,T,NH), rk (NB,hd) the layer's fp32 keys. One thread per (row, j).
//                                                                 mirrors rel_key_scores
__global__ void rel_key_scores_kernel(float *qrel, const floatX *q, const float *rk, size_t rows, int hd, int NB) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * NB) return;
    size_t r = i / NB;
    int j = (int)(i % NB);
    float dot = 0.0f;
    for (int c = 0; c < hd; c++) dot += to_f(q[r * hd + c]) * rk[(size_t)j * hd + c];
    qrel[i] = dot / sqrtf((float)hd);
}

// Their gradient, step 1: rowg (B,T,NH,NB), the logits' gradient of query row (b,t,h)
// summed over the keys s of bucket j, s ascending, from dS = dX * scale (B,NH,T,T).
// Buckets never decrease with the distance, so a thread walks only its own bucket's run.
//                                                      mirrors the rowg in attention_backward
__global__ void rel_key_rowg_kernel(float *rowg, const floatX *ds, const int *bucket, int B, int NH, int T, int NB,
                                    float scale) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;  // over (B,T,NH,NB)
    if (i >= (size_t)B * T * NH * NB) return;
    int j = (int)(i % NB), h = (int)((i / NB) % NH), t = (int)((i / ((size_t)NB * NH)) % T), b = (int)(i / ((size_t)NB * NH * T));
    const floatX *row = ds + (((size_t)b * NH + h) * T + t) * T;
    float acc = 0.0f;
    for (int s = 0; s <= t; s++) {  // distance t - s falls: buckets from high to low
        int k = bucket[t - s];
        if (k > j) continue;
        if (k < j) break;
        acc += to_f(row[s]);
    }
    rowg[i] = acc / scale;
}

// Step 2: dq (rows,hd) += rowg rk / sqrt(hd), one thread per element.
//                                                       mirrors rel_key_backward's dq
__global__ void rel_key_dq_kernel(floatX *dq, const float *rowg, const float *rk, size_t rows, int hd, int NB) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * hd) return;
    size_t r = i / hd;
    int c = (int)(i % hd);
    float acc = 0.0f;
    for (int j = 0; j < NB; j++) acc += rowg[r * NB + j] * rk[(size_t)j * hd + c];
    dq[i] = to_x(to_f(dq[i]) + acc / sqrtf((float)hd));
}

// Step 3: drk (NB,hd) += rowg^T q / sqrt(hd), the rows in order: one thread per (j, c), no
// atomics.                                                mirrors rel_key_backward's drk
__global__ void rel_key_drk_kernel(float *drk, const float *rowg, const floatX *q, size_t rows, int hd, int NB) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= NB * hd) return;
    int j = i / hd, c = i % hd;
    float acc = 0.0f;
    for (size_t r = 0; r < rows; r++) acc += rowg[r * NB + j] * to_f(q[r * hd + c]);
    drk[i] += acc / sqrtf((float)hd);
}

// T-PE (--pe tpe): one layer's keys rk (n,hd) = h(u_d) in fp32 from its fp32 weights, one
// thread per element.                                                   mirrors tpe_keys
__global__ void tpe_keys_kernel(float *rk, const float *u, const float *w1, const float *b1, const float *w2, int n,
                                int hd) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n * hd) return;
    rk[i] = tpe_key(w1, b1, w2, i % hd, u[i / hd]);
}

// Its backward from drk (n,hd): one thread per hidden unit j for dw1, db1 and per (c, j) for
// dw2, each summing over d in order.                                mirrors tpe_backward
__global__ void tpe_grad_hidden_kernel(float *dw1, float *db1, const float *drk, const float *u, const float *w1,
                                       const float *b1, const float *w2, int n, int hd) {
    int j = threadIdx.x;
    if (j >= TPE_HIDDEN) return;
    float g1, gb;
    tpe_grad_hidden(&g1, &gb, drk, u, w1, b1, w2, n, hd, j);
    dw1[j] += g1;
    db1[j] += gb;
}

__global__ void tpe_grad_w2_kernel(float *dw2, const float *drk, const float *u, const float *w1, const float *b1, int n,
                                   int hd) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= hd * TPE_HIDDEN) return;
    dw2[i] += tpe_grad_w2(drk, u, w1, b1, n, hd, i / TPE_HIDDEN, i % TPE_HIDDEN);
}

static void tpe_keys(float *rk, const float *u, const float *w1, const float *b1, const float *w2, int n, int hd) {
    tpe_keys_kernel<<<ceil_div((size_t)n * hd, 256), 256>>>(rk, u, w1, b1, w2, n, hd);
    cudaCheck(cudaGetLastError());
}

static void tpe_backward(float *dw1, float *db1, float *dw2, const float *drk, const float *u, const float *w1,
                         const float *b1, const float *w2, int n, int hd) {
    tpe_grad_hidden_kernel<<<1, TPE_HIDDEN>>>(dw1, db1, drk, u, w1, b1, w2, n, hd);
    cudaCheck(cudaGetLastError());
    tpe_grad_w2_kernel<<<ceil_div((size_t)hd * TPE_HIDDEN, 64), 64>>>(dw2, drk, u, w1, b1, n, hd);
    cudaCheck(cudaGetLastError());
}

// TUPE (--pe tupe), its weights and their gradients on the device: the position table wpe,
// its LayerNorm's gain and bias, the projections U^Q, U^K and U^Q's bias
typedef struct {
    const float *wpe, *ln_w, *ln_b, *uq, *uk, *bq;
} TupeWeights;
typedef struct {
    float *wpe, *ln_w, *ln_b, *uq, *uk, *bq;
} TupeGrads;

// The normalized rows p (n, C) of wpe's first n, their means and 1/std mr (n, 2): one
// thread per row.                                       mirrors tupe_pass's LayerNorm
__global__ void tupe_ln_kernel(float *p, float *mr, TupeWeights w, int n, int C) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < n) tupe_ln_row(p + (size_t)t * C, mr + 2 * t, w.wpe + (size_t)t * C, w.ln_w, w.ln_b, C);
}

// The projected positions pq = (p U^Q + b^Q) / sqrt(2), pk = p U^K (n, QD), fp32 from the
// fp32 weights; one thread per (row, output).          mirrors tupe_pass's projections
__global__ void tupe_project_kernel(float *pq, float *pk, const float *p, TupeWeights w, int n, int C, int QD) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)n * QD) return;
    const float *row = p + (i / QD) * C, *wq = w.uq + (i % QD) * C, *wk = w.uk + (i % QD) * C;
    float aq = 0.0f, ak = 0.0f;
    for (int c = 0; c < C; c++) {
        aq += row[c] * wq[c];
        ak += row[c] * wk[c];
    }
    pq[i] = (aq + w.bq[i % QD]) * TUPE_QSCALE;
    pk[i] = ak;
}

// Their term pair (NH, Tq, n) of query position q_offset + t and key position s (0 past the
// query), scaled: one thread per element.          mirrors the pair of tupe_pass
__global__ void tupe_pair_kernel(float *pair, const float *pq, const float *pk, int NH, int Tq, int n, int q_offset, int hd,
                                 float scale) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)NH * Tq * n) return;
    int s = (int)(i % n), t = (int)((i / n) % Tq) + q_offset, h = (int)(i / ((size_t)n * Tq)), QD = NH * hd;
    pair[i] = s <= t ? tupe_pair_at(pq + (size_t)t * QD + h * hd, pk + (size_t)s * QD + h * hd, hd, scale) : 0.0f;
}

// x *= s (n elements): TUPE's queries and their gradient
__global__ void scale_kernel(floatX *x, float s, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = to_x(to_f(x[i]) * s);
}

// The gradient of a term per query and key (TUPE's, a learned bias's), after each layer's
// naive backward (datt holding dS = dX * scale, (B,NH,T,T)): D (NH,T,T) += the sum over b
// (ascending) of dX. One thread per element.   mirrors the pairg of attention_backward
__global__ void tupe_pair_grad_kernel(float *D, const floatX *ds, int B, int NH, int T, float scale) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x, n = (size_t)NH * T * T;
    if (i >= n || (int)(i % T) > (int)((i / T) % T)) return;
    float acc = 0.0f;
    for (int b = 0; b < B; b++) acc += to_f(ds[(size_t)b * n + i]);
    D[i] += acc / scale;
}

// Step 2, after every layer's: dpq = scale D pk / sqrt(2), dpk = scale D^T pq (T, QD), one
// thread per element, the keys and queries in order.           mirrors tupe_backward
__global__ void tupe_proj_grad_kernel(float *dpq, float *dpk, const float *D, const float *pq, const float *pk, int T, int NH,
                                      int hd, float scale) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    int QD = NH * hd;
    if (i >= (size_t)T * QD) return;
    int t = (int)(i / QD), o = (int)(i % QD);
    const float *Dh = D + (size_t)(o / hd) * T * T;
    float gq = 0.0f, gk = 0.0f;
    for (int s = 0; s <= t; s++) gq += Dh[(size_t)t * T + s] * pk[(size_t)s * QD + o];
    for (int u = t; u < T; u++) gk += Dh[(size_t)u * T + t] * pq[(size_t)u * QD + o];
    dpq[i] = gq * scale * TUPE_QSCALE;
    dpk[i] = gk * scale;
}

// Step 3: the projections' gradients, dU^Q[o][c] += sum over t of dpq[t][o] p[t][c] (and
// U^K's), one thread per element of U.
__global__ void tupe_du_kernel(float *duq, float *duk, const float *dpq, const float *dpk, const float *p, int T, int C,
                               int QD) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)QD * C) return;
    int o = (int)(i / C), c = (int)(i % C);
    float aq = 0.0f, ak = 0.0f;
    for (int t = 0; t < T; t++) {
        aq += dpq[(size_t)t * QD + o] * p[(size_t)t * C + c];
        ak += dpk[(size_t)t * QD + o] * p[(size_t)t * C + c];
    }
    duq[i] += aq;
    duk[i] += ak;
}

// ... and the normalized rows': dp[t][c] = sum over o of dpq[t][o] U^Q[o][c] + dpk[t][o] U^K[o][c]
__global__ void tupe_dp_kernel(float *dp, const float *dpq, const float *dpk, TupeWeights w, int T, int C, int QD) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)T * C) return;
    int t = (int)(i / C), c = (int)(i % C);
    float acc = 0.0f;
    for (int o = 0; o < QD; o++)
        acc += dpq[(size_t)t * QD + o] * w.uq[(size_t)o * C + c] + dpk[(size_t)t * QD + o] * w.uk[(size_t)o * C + c];
    dp[i] = acc;
}

// Step 4: wpe's rows through the LayerNorm, one thread per row  mirrors tupe_backward's rows
__global__ void tupe_ln_backward_kernel(float *dwpe, const float *dp, const float *mr, TupeWeights w, int T, int C) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < T) tupe_ln_row_backward(dwpe + (size_t)t * C, dp + (size_t)t * C, w.wpe + (size_t)t * C, w.ln_w, mr + 2 * t, C);
}

// ... and the sums over the rows, in order: the gain's and the bias's (a thread per channel),
// U^Q's bias's (a thread per output)                  mirrors tupe_backward's sums
__global__ void tupe_sums_kernel(TupeGrads g, const float *dp, const float *dpq, const float *mr, TupeWeights w, int T, int C,
                                 int QD) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < C) {
        g.ln_w[i] += tupe_column_grad(dp, w.wpe, mr, T, C, i);
        g.ln_b[i] += tupe_column_grad(dp, NULL, NULL, T, C, i);
    } else if (i < C + QD)
        g.bq[i - C] += tupe_column_grad(dpq, NULL, NULL, T, QD, i - C);
}

// the normalized rows p and mr, then pq, pk (n rows)
static void tupe_project(float *pq, float *pk, float *p, float *mr, TupeWeights w, int n, int C, int QD) {
    tupe_ln_kernel<<<ceil_div((size_t)n, 128), 128>>>(p, mr, w, n, C);
    cudaCheck(cudaGetLastError());
    tupe_project_kernel<<<ceil_div((size_t)n * QD, 256), 256>>>(pq, pk, p, w, n, C, QD);
    cudaCheck(cudaGetLastError());
}

static void tupe_pair(float *pair, const float *pq, const float *pk, int NH, int Tq, int n, int q_offset, int hd) {
    tupe_pair_kernel<<<ceil_div((size_t)NH * Tq * n, 256), 256>>>(pair, pq, pk, NH, Tq, n, q_offset, hd,
                                                                    1.0f / sqrtf((float)hd));
    cudaCheck(cudaGetLastError());
}

static void scale_array(floatX *x, float s, size_t n) {
    scale_kernel<<<ceil_div(n, 256), 256>>>(x, s, n);
    cudaCheck(cudaGetLastError());
}

static void tupe_pair_grad(float *D, const floatX *datt, int B, int NH, int T, int hd) {
    size_t n = (size_t)NH * T * T;
    tupe_pair_grad_kernel<<<ceil_div(n, 256), 256>>>(D, datt, B, NH, T, 1.0f / sqrtf((float)hd));
    cudaCheck(cudaGetLastError());
}

// steps 2 to 4 into g (wpe's rows 0..T-1) from D and the pass's pq, pk, p, mr; dpq, dpk (T,
// QD) and dp (T, C) scratch
static void tupe_backward(TupeGrads g, float *dpq, float *dpk, float *dp, const float *D, const float *pq, const float *pk,
                          const float *p, const float *mr, TupeWeights w, int T, int NH, int hd, int C) {
    int QD = NH * hd;
    tupe_proj_grad_kernel<<<ceil_div((size_t)T * QD, 256), 256>>>(dpq, dpk, D, pq, pk, T, NH, hd, 1.0f / sqrtf((float)hd));
    cudaCheck(cudaGetLastError());
    tupe_du_kernel<<<ceil_div((size_t)QD * C, 256), 256>>>(g.uq, g.uk, dpq, dpk, p, T, C, QD);
    cudaCheck(cudaGetLastError());
    tupe_dp_kernel<<<ceil_div((size_t)T * C, 256), 256>>>(dp, dpq, dpk, w, T, C, QD);
    cudaCheck(cudaGetLastError());
    tupe_ln_backward_kernel<<<ceil_div((size_t)T, 128), 128>>>(g.wpe, dp, mr, w, T, C);
    cudaCheck(cudaGetLastError());
    tupe_sums_kernel<<<ceil_div((size_t)(C + QD), 128), 128>>>(g, dp, dpq, mr, w, T, C, QD);
    cudaCheck(cudaGetLastError());
}

// one layer's relative-key scores (rows = B*T*NH query rows)
static void rel_key_scores(float *qrel, const floatX *q, const float *rk, size_t rows, int hd, int NB) {
    rel_key_scores_kernel<<<ceil_div(rows * NB, 256), 256>>>(qrel, q, rk, rows, hd, NB);
    cudaCheck(cudaGetLastError());
}

// Their backward after the naive attention's (datt holding dS): dq += ..., drk += ...;
// rowg (B,T,NH,NB) is scratch.
static void rel_key_backward(floatX *dq, float *drk, float *rowg, const floatX *datt, const floatX *q, const float *rk,
                             const AttnBias *ab, int B, int T, int NH, int hd) {
    size_t rows = (size_t)B * T * NH;
    rel_key_rowg_kernel<<<ceil_div(rows * ab->NB, 256), 256>>>(rowg, datt, ab->bucket, B, NH, T, ab->NB,
                                                                1.0f / sqrtf((float)hd));
    cudaCheck(cudaGetLastError());
    rel_key_dq_kernel<<<ceil_div(rows * hd, 256), 256>>>(dq, rowg, rk, rows, hd, ab->NB);
    cudaCheck(cudaGetLastError());
    rel_key_drk_kernel<<<ceil_div((size_t)ab->NB * hd, 64), 64>>>(drk, rowg, q, rows, hd, ab->NB);
    cudaCheck(cudaGetLastError());
}

// A learned bias per distance: the logits' gradient along each diagonal, diag (B,NH,T),
// diag[b][h][d] = sum over t >= d (ascending) of dX[t][t - d], from dS = dX * scale
// (B,NH,T,T). One thread per diagonal: no atomics, the same order as the CPU.
//                                                       mirrors the diag in attention_backward
__global__ void attn_bias_diag_kernel(float *diag, const floatX *ds, int B, int NH, int T, float scale) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;  // over (B,NH,T)
    if (i >= (size_t)B * NH * T) return;
    int d = (int)(i % T);
    const floatX *m = ds + (i / T) * T * T;
    float acc = 0.0f;
    for (int t = d; t < T; t++) acc += to_f(m[(size_t)t * T + t - d]);
    diag[i] = acc / scale;
}

// A learned bias (llmc/attn_bias.h's BIAS_FN_TABLE): its term (NH, n) per distance, or (NH,
// Tq, n) per query at q_offset + t and key, from the encoding's function. One thread per
// element.                                                       mirrors bias_fn_fill
__global__ void bias_fn_fill_kernel(float *out, BiasFn f, int Tq, int n, int q_offset, size_t total) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < total) out[i] = bias_fn_fill_at(&f, i, Tq, n, q_offset);
}

// Its gradient, step 1: one thread per chunk (bias_fn_chunk), each into its own partial row
// of part (chunks, f.P).                                    mirrors bias_fn_backward's chunks
__global__ void bias_fn_chunk_kernel(float *part, BiasFn f, const float *dterm, int B, int Tq, int n, int chunks) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c < chunks) bias_fn_chunk(&f, part + (size_t)c * f.P, c, dterm, B, Tq, n, 0);
}

// Step 2: one thread per entry of a row, the rows summed in order into f.dw (no atomics).
__global__ void bias_fn_reduce_kernel(BiasFn f, const float *part, int chunks) {
    int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p < f.P) bias_fn_reduce_at(&f, part, chunks, p);
}

static void bias_fn_fill(float *out, const BiasFn *f, int Tq, int n, int q_offset) {
    size_t total = (size_t)f->NH * n * (f->per_query ? (size_t)Tq : 1);
    bias_fn_fill_kernel<<<ceil_div(total, 256), 256>>>(out, *f, Tq, n, q_offset, total);
    cudaCheck(cudaGetLastError());
}

// f->dw += the gradient through the function from the term's gradient dterm (bias_fn_chunk's layout)
static void bias_fn_backward(const BiasFn *f, const float *dterm, int B, int Tq, int n) {
    static float *part;
    static size_t cap;
    int chunks = bias_fn_chunks(f, Tq, n);
    part = (float *)device_grow(part, &cap, (size_t)chunks * f->P * sizeof(float));
    bias_fn_chunk_kernel<<<ceil_div((size_t)chunks, 64), 64>>>(part, *f, dterm, B, Tq, n, chunks);
    cudaCheck(cudaGetLastError());
    bias_fn_reduce_kernel<<<ceil_div((size_t)f->P, 64), 64>>>(*f, part, chunks);
    cudaCheck(cudaGetLastError());
}

// The pass's slopes, buckets and T-PE inputs (attn_bias_pass) on the device, uploaded when they change:
// the same BiasPass with device pointers, for attn_bias_layer.
static BiasPass upload_attn_bias(const BiasPass *bp) {
    static DeviceMirror slopes, buckets, tpe_u;
    BiasPass d = *bp;
    if (bp->slope) d.slope = (const float *)mirror_upload(&slopes, bp->slope, bp->n_slope * sizeof(float));
    if (bp->bucket) d.bucket = (const int *)mirror_upload(&buckets, bp->bucket, bp->n_bucket * sizeof(int));
    if (bp->tpe_u) d.tpe_u = (const float *)mirror_upload(&tpe_u, bp->tpe_u, bp->n_bucket * sizeof(float));
    return d;
}

// strided-batched gemm over the B sequences (column-major arguments)
static void gemm_batched(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const floatX *A, int lda,
                         long long sa, const floatX *Bm, int ldb, long long sb, float beta, floatX *Cm, int ldc,
                         long long sc, int batch) {
    cublasCheck(cublasGemmStridedBatchedEx(cublas, ta, tb, m, n, k, &ONE, A, CUDA_FX, lda, sa, Bm, CUDA_FX, ldb, sb,
                                           &beta, Cm, CUDA_FX, ldc, sc, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// ab: the attention-score hook (its pointers on the device)
static void attention_forward(floatX *y, floatX *att, const floatX *q, const floatX *k, const floatX *v, int B, int T,
                              int NH, int NKV, int hd, AttnBias ab) {
    int group = NH / NKV;
    long long sq = (long long)T * NH * hd, skv = (long long)T * NKV * hd, sa = (long long)NH * T * T;
    for (int h = 0; h < NH; h++) {  // S_h = Q_h K_kvh^T
        int kvh = h / group;
        gemm_batched(CUBLAS_OP_T, CUBLAS_OP_N, T, T, hd, k + kvh * hd, NKV * hd, skv, q + h * hd, NH * hd, sq, 0.0f,
                     att + (size_t)h * T * T, T, sa, B);
    }
    if (ab.slope || ab.term || ab.qrel || ab.pair) {
        size_t n = (size_t)B * NH * T * T;
        attn_bias_kernel<<<ceil_div(n, 256), 256>>>(att, NH, T, ab, 1.0f / sqrtf((float)hd), n);
        cudaCheck(cudaGetLastError());
    }
    int rows = B * NH * T;
    softmax_forward_kernel<<<ceil_div(rows, 8), 256>>>(att, rows, T, 1.0f / sqrtf((float)hd));
    cudaCheck(cudaGetLastError());
    for (int h = 0; h < NH; h++) {  // Y_h = P_h V_kvh
        int kvh = h / group;
        gemm_batched(CUBLAS_OP_N, CUBLAS_OP_N, hd, T, T, v + kvh * hd, NKV * hd, skv, att + (size_t)h * T * T, T, sa,
                     0.0f, y + h * hd, NH * hd, sq, B);
    }
}

// dq, dk, dv overwritten; datt (B,NH,T,T) is scratch. diag (B,NH,T), when given: the
// logits' gradient per diagonal (attn_bias_diag_kernel).       mirrors attention_backward
static void attention_backward(floatX *dq, floatX *dk, floatX *dv, float *diag, floatX *datt, const floatX *dy,
                               const floatX *att, const floatX *q, const floatX *k, const floatX *v, int B, int T, int NH,
                               int NKV, int hd) {
    int group = NH / NKV;
    long long sq = (long long)T * NH * hd, skv = (long long)T * NKV * hd, sa = (long long)NH * T * T;
    for (int h = 0; h < NH; h++) {  // dP_h = dY_h V_kvh^T
        int kvh = h / group;
        gemm_batched(CUBLAS_OP_T, CUBLAS_OP_N, T, T, hd, v + kvh * hd, NKV * hd, skv, dy + h * hd, NH * hd, sq, 0.0f,
                     datt + (size_t)h * T * T, T, sa, B);
    }
    int rows = B * NH * T;
    softmax_backward_kernel<<<ceil_div(rows, 8), 256>>>(datt, att, rows, T, 1.0f / sqrtf((float)hd));
    cudaCheck(cudaGetLastError());
    if (diag) {
        attn_bias_diag_kernel<<<ceil_div(rows, 256), 256>>>(diag, datt, B, NH, T, 1.0f / sqrtf((float)hd));
        cudaCheck(cudaGetLastError());
    }
    for (int h = 0; h < NH; h++) {
        int kvh = h / group;
        float beta = (h % group) ? 1.0f : 0.0f;  // the group's query heads sum into one dK, dV
        const floatX *ds = datt + (size_t)h * T * T, *p = att + (size_t)h * T * T;
        // dQ_h = dS_h K_kvh
        gemm_batched(CUBLAS_OP_N, CUBLAS_OP_N, hd, T, T, k + kvh * hd, NKV * hd, skv, ds, T, sa, 0.0f, dq + h * hd,
                     NH * hd, sq, B);
        // dK_kvh += dS_h^T Q_h
        gemm_batched(CUBLAS_OP_N, CUBLAS_OP_T, hd, T, T, q + h * hd, NH * hd, sq, ds, T, sa, beta, dk + kvh * hd,
                     NKV * hd, skv, B);
        // dV_kvh += P_h^T dY_h
        gemm_batched(CUBLAS_OP_N, CUBLAS_OP_T, hd, T, T, dy + h * hd, NH * hd, sq, p, T, sa, beta, dv + kvh * hd,
                     NKV * hd, skv, B);
    }
}
