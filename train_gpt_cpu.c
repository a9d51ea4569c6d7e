// train_gpt_cpu.c: the fp32 reference trainer. A Llama-style GPT (RMSNorm, RoPE, GQA,
// SwiGLU, tied embeddings) with every forward and backward pass written by hand, AdamW,
// and the per-position evaluation that shows the extrapolation cliff.
// Each layer's forward is followed by its backward; doc/model.md derives every backward.
//
// The PosAug hook: rope_rotate() below computes angle = p_t * theta_j from the pass's
// positions p[layer][b][t]; the host side that chooses them each step is
// pos_schedule_step() in llmc/schedule.h, and pos_pass() fills them for each pass.
#define _DEFAULT_SOURCE
#include <math.h>
#include <stddef.h>
#include <sys/stat.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "llmc/checkpoint.h"
#include "llmc/config.h"
#include "llmc/dataloader.h"
#include "llmc/evaluate.h"
#include "llmc/gemm.h"
#include "llmc/memory.h"
#include "llmc/metrics.h"
#include "llmc/runfolder.h"
#include "llmc/schedule.h"
#include "llmc/tensorfile.h"
#include "llmc/tokenizer.h"
#include "llmc/trainloop.h"
#include "llmc/vecmath.h"

// ----------------------------------------------------------------------------
// linear layers: the matrix products are llmc/gemm.h's

// out (N,OC) = inp (N,IC) . weight (OC,IC)^T      (a bias-free nn.Linear)
static void matmul_forward(float *out, const float *inp, const float *weight, int N, int IC, int OC) {
    gemm_nt(out, inp, weight, N, IC, OC);
}

// dinp (N,IC) (+)= dout (N,OC) . weight (OC,IC);   dweight (OC,IC) += dout^T . inp
static void matmul_backward(float *dinp, float *dweight, const float *dout, const float *inp, const float *weight,
                            int N, int IC, int OC, int accumulate_dinp) {
    gemm_nn(dinp, dout, weight, N, OC, IC, accumulate_dinp, 0);
    gemm_nn(dweight, dout, inp, OC, N, IC, 1, 1);
}

// ----------------------------------------------------------------------------
// embedding: x (N,C) = wte[tokens] * scale (embed_scale: sqrt(C) under the sinusoids, else 1)

static void encoder_forward(float *x, const int *tokens, const float *wte, int N, int C, float scale) {
    for (int i = 0; i < N; i++) {
        const float *row = wte + (size_t)tokens[i] * C;
        float *xi = x + (size_t)i * C;
        for (int c = 0; c < C; c++) xi[c] = row[c] * scale;
    }
}

// Sinusoidal absolute positions (--pe sinusoidal, tape), added to x (B,T,C) at the pass's
// positions p (layer 0's), PE[p, 2k] = sin(p * f_k), PE[p, 2k+1] = cos(p * f_k),
// f_k = 10000^(-2k/C) * scale (tAPE: C / T), fp32 angles. No parameters, so no backward.
static void sinusoidal_forward(float *x, const PassPositions *pp, int B, int T, int C, float scale) {
    float *f = (float *)xmalloc((size_t)(C / 2) * sizeof(float));
    sinusoidal_freqs_host(f, C, scale);
#pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            float p = pass_pos(pp, 0, b, t);
            float *xt = x + ((size_t)b * T + t) * C;
            for (int k = 0; k < C / 2; k++) {
                float angle = p * f[k];
                xt[2 * k] += sinf(angle);
                xt[2 * k + 1] += cosf(angle);
            }
        }
    free(f);
}

// Learned absolute positions (--pe learned): x (B,T,C) += wpe[p_t], wpe (rows,C); the
// positions are integers below rows (learned_rows_check).
static void learned_forward(float *x, const float *wpe, const PassPositions *pp, int B, int T, int C) {
#pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *row = wpe + (size_t)pass_pos(pp, 0, b, t) * C;
            float *xt = x + ((size_t)b * T + t) * C;
            for (int c = 0; c < C; c++) xt[c] += row[c];
        }
}

// dwpe[p_t] += sum_b dx[b,t]; serial over (b,t) so a repeated position accumulates in order
static void learned_backward(float *dwpe, const float *dx, const PassPositions *pp, int B, int T, int C) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            float *d = dwpe + (size_t)pass_pos(pp, 0, b, t) * C;
            const float *g = dx + ((size_t)b * T + t) * C;
            for (int c = 0; c < C; c++) d[c] += g[c];
        }
}

// dwte[tokens[i]] += dx[i] * scale; serial so repeated tokens accumulate in a fixed order
static void encoder_backward(float *dwte, const float *dx, const int *tokens, int N, int C, float scale) {
    for (int i = 0; i < N; i++) {
        float *d = dwte + (size_t)tokens[i] * C;
        const float *g = dx + (size_t)i * C;
        for (int c = 0; c < C; c++) d[c] += g[c] * scale;
    }
}

// ----------------------------------------------------------------------------
// RMSNorm: out = x * rstd * w,  rstd = 1/sqrt(mean(x^2) + eps)
// x (N,C), w (C), out (N,C), rstd (N)

static void rmsnorm_forward(float *out, float *rstd, const float *x, const float *w, int N, int C, float eps) {
#pragma omp parallel for
    for (int i = 0; i < N; i++) {
        const float *xi = x + (size_t)i * C;
        float ss = 0.0f;
        for (int c = 0; c < C; c++) ss += xi[c] * xi[c];
        float r = 1.0f / sqrtf(ss / C + eps);
        float *o = out + (size_t)i * C;
        for (int c = 0; c < C; c++) o[c] = xi[c] * r * w[c];
        rstd[i] = r;
    }
}

// dx (+)= rstd * (dout*w - xhat * mean(dout*w*xhat)),  dw += sum_i dout*xhat
#define RMSNORM_DW_COLS 64  // dw: columns per task
static void rmsnorm_backward(float *dx, float *dw, const float *dout, const float *x, const float *w,
                             const float *rstd, int N, int C, int accumulate) {
#pragma omp parallel for
    for (int i = 0; i < N; i++) {
        const float *xi = x + (size_t)i * C, *g = dout + (size_t)i * C;
        float r = rstd[i], dot = 0.0f;
        for (int c = 0; c < C; c++) dot += g[c] * w[c] * xi[c] * r;
        dot /= C;
        float *d = dx + (size_t)i * C;
        for (int c = 0; c < C; c++) {
            float v = r * (g[c] * w[c] - xi[c] * r * dot);
            d[c] = accumulate ? d[c] + v : v;
        }
    }
    // dw: a task per block of columns adds the rows in order, reading them contiguously
#pragma omp parallel for
    for (int c0 = 0; c0 < C; c0 += RMSNORM_DW_COLS) {
        int nc = C - c0 < RMSNORM_DW_COLS ? C - c0 : RMSNORM_DW_COLS;
        float s[RMSNORM_DW_COLS] = {0};
        for (int i = 0; i < N; i++) {
            const float *g = dout + (size_t)i * C + c0, *xi = x + (size_t)i * C + c0;
            for (int c = 0; c < nc; c++) s[c] += g[c] * xi[c] * rstd[i];
        }
        for (int c = 0; c < nc; c++) dw[c0 + c] += s[c];
    }
}

// ----------------------------------------------------------------------------
// The rotary encodings (ROTARY_TABLE, llmc/schedule.h), rotate-half layout: element j pairs
// with j + hd/2. THE POSAUG HOOK: each pair's angle (p[b][t] * inv_freq[j] in fp32 for RoPE)
// and scale from the encoding's function pe_rotary, computed here when needed, from one
// layer's pass positions p (seq_stride 0: every sequence shares them; llmc/schedule.h's
// pos_pass fills them from the step's alpha, offset or explicit positions); cos and sin are
// scaled by mscale (YaRN's attention factor) times the pair's scale.
// x (B,T,H,hd) of the queries or keys (side ROT_QUERY, ROT_KEY) rotated in place; sign = +1
// forward, -1 backward (rotation by -angle, the same scale).
static void rope_rotate(float *x, int B, int T, int H, int hd, const float *p, int seq_stride, const PosStep *ps,
                        int side, float sign) {
    int half = hd / 2, nb = seq_stride ? B : 1;
    float *cs = (float *)xmalloc((size_t)nb * T * half * 2 * sizeof(float));  // (nb, T, half, {cos,sin})
#pragma omp parallel for collapse(2)
    for (int b = 0; b < nb; b++)
        for (int t = 0; t < T; t++) {
            float pt = p[(size_t)b * seq_stride + t];
            float *c = cs + ((size_t)b * T + t) * half * 2;
            for (int j = 0; j < half; j++) {
                float scale, angle = pe_rotary(ps, pt, j, hd, side, &scale);  // libm sinf/cosf reduce large angles exactly
                float m = ps->mscale * scale;
                c[2 * j + 0] = cosf(angle) * m;
                c[2 * j + 1] = sinf(angle) * (sign * m);
            }
        }
#pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *c = cs + ((size_t)(seq_stride ? b : 0) * T + t) * half * 2;
            for (int h = 0; h < H; h++) {
                float *v = x + (((size_t)b * T + t) * H + h) * hd;
                for (int j = 0; j < half; j++) {
                    float x0 = v[j], x1 = v[j + half], co = c[2 * j], si = c[2 * j + 1];
                    v[j] = x0 * co - x1 * si;
                    v[j + half] = x1 * co + x0 * si;
                }
            }
        }
    free(cs);
}

// layer l's rotation of the queries or keys (side) at the pass's positions pp (the encodings
// without a rotary row rotate nothing)
static void rope_forward(float *x, int B, int T, int H, int hd, const PosStep *ps, const PassPositions *pp, int l, int side) {
    if (!pe_rotates(ps->pe)) return;
    rope_rotate(x, B, T, H, hd, pp->p + (size_t)l * pp->layer_stride, pp->seq_stride, ps, side, 1.0f);
}

// The rotation is orthogonal: its transpose is the rotation by -angle (times the same mscale
// and scale).
static void rope_backward(float *dx, int B, int T, int H, int hd, const PosStep *ps, const PassPositions *pp, int l, int side) {
    if (!pe_rotates(ps->pe)) return;
    rope_rotate(dx, B, T, H, hd, pp->p + (size_t)l * pp->layer_stride, pp->seq_stride, ps, side, -1.0f);
}

// ----------------------------------------------------------------------------
// causal GQA attention. q (B,T,NH,hd), k,v (B,T,NKV,hd), y (B,T,NH,hd)
// att (B,NH,T,T) softmax probabilities, kept for backward (NULL: forward only).
// Query head h reads key/value head h / (NH/NKV): no copy of K/V.

// rows (T,hd) with row stride ld -> dst (hd,T)
static void transpose_rows(float *dst, const float *src, int T, int hd, int ld) {
    for (int t = 0; t < T; t++)
        for (int i = 0; i < hd; i++) dst[(size_t)i * T + t] = src[(size_t)t * ld + i];
}

// Softmax of each row t of S (T,T) over its first t + 1 entries, the rest set to 0. Rows go
// 16 at a time, each step (max; exp and sum; scale) over all 16 before the next: a row's max
// and sum end in short chains of dependent operations, which then overlap with the other
// rows' work. Measured with S in cache, against row by row: 1.5x faster at T 128, 1.2x at 512.
#define SOFTMAX_ROWS 16
static void causal_softmax(float *S, int T) {
    for (int t0 = 0; t0 < T; t0 += SOFTMAX_ROWS) {
        int nr = T - t0 < SOFTMAX_ROWS ? T - t0 : SOFTMAX_ROWS;
        float mx[SOFTMAX_ROWS], inv[SOFTMAX_ROWS];
        for (int r = 0; r < nr; r++) mx[r] = max_array(S + (size_t)(t0 + r) * T, t0 + r + 1);
        for (int r = 0; r < nr; r++) {
            float *a = S + (size_t)(t0 + r) * T;
            inv[r] = (float)(1.0 / exp_sum_array(a, a, -mx[r], t0 + r + 1));
        }
        for (int r = 0; r < nr; r++) {
            float *a = S + (size_t)(t0 + r) * T;
            for (int s = 0; s <= t0 + r; s++) a[s] *= inv[r];
            memset(a + t0 + r + 1, 0, (size_t)(T - t0 - r - 1) * sizeof(float));
        }
    }
}

// Training: per (b, kv head) and each of its query heads, tiled products S = Q K^T and
// Y = P V, keeping P; K^T is formed once per kv head. The logit of key s for query t gets the
// attention-score hook's attn_bias(ab, h, t - s) (llmc/attn_bias.h); without one (RoPE, NoPE,
// the absolute encodings) the row is only scaled, as a vector (adding the hook's +0 would
// change nothing but a -0, which the softmax maps to the same bits).
static void attention_forward_train(float *y, float *att, const float *q, const float *k, const float *v, int B,
                                    int T, int NH, int NKV, int hd, const AttnBias *ab) {
    int group = NH / NKV;
    float scale = 1.0f / sqrtf((float)hd);
#pragma omp parallel
    {
        float *kt = (float *)xmalloc((size_t)hd * T * sizeof(float));  // K^T (hd,T)
#pragma omp for collapse(2) schedule(dynamic, 1)
        for (int b = 0; b < B; b++)
            for (int kvh = 0; kvh < NKV; kvh++) {
                transpose_rows(kt, k + ((size_t)b * T * NKV + kvh) * hd, T, hd, NKV * hd);
                for (int h = kvh * group; h < (kvh + 1) * group; h++) {
                    float *S = att + ((size_t)b * NH + h) * T * T;
                    Gemm qk = {S, q + ((size_t)b * T * NH + h) * hd, kt, T, NH * hd, T, hd, 0, GEMM_CAUSAL_OUT, 0};
                    gemm_serial(&qk, T, T);
                    AttnBiasHead hb = attn_bias_head(*ab, h);
                    for (int t = 0; t < T; t++) {  // row t's logits, scaled and biased
                        float *a = S + (size_t)t * T;
                        const float *qrow = attn_bias_qrow(*ab, b, t, h);
                        if (hb.term || hb.slope != 0.0f || qrow)
                            for (int s = 0; s <= t; s++) a[s] = a[s] * scale + attn_bias_at_row(hb, qrow, t - s);
                        else
                            for (int s = 0; s <= t; s++) a[s] *= scale;
                        if (ab->pair)  // TUPE's untied positions
                            for (int s = 0; s <= t; s++) a[s] += ab->pair[((size_t)h * T + t) * ab->n_dist + s];
                    }
                    causal_softmax(S, T);
                    Gemm pv = {y + ((size_t)b * T * NH + h) * hd, S, v + ((size_t)b * T * NKV + kvh) * hd,
                               NH * hd, T, NKV * hd, T, 0, GEMM_LOWER_A, 0};
                    gemm_serial(&pv, T, hd);
                }
            }
        free(kt);
    }
}

// Relative keys (--pe shaw, tpe): one query row's scores qr (nb) = q . rk_j / sqrt(hd)
// against the first nb key vectors rk (nb,hd): what the attention adds at each distance's
// bucket.
static void rel_key_row(float *qr, const float *q, const float *rk, int hd, int nb) {
    float scale = 1.0f / sqrtf((float)hd);
    for (int j = 0; j < nb; j++) {
        float dot = 0.0f;
        for (int c = 0; c < hd; c++) dot += q[c] * rk[(size_t)j * hd + c];
        qr[j] = dot * scale;
    }
}

// ... for one layer's query rows q (rows,hd) (B,T,NH as rows): qrel (rows,NB), one product
// (T-PE has a key per distance: as many products as the attention's own)
static void rel_key_scores(float *qrel, const float *q, const float *rk, size_t rows, int hd, int NB) {
    matmul_forward(qrel, q, rk, (int)rows, hd, NB);
    float scale = 1.0f / sqrtf((float)hd);
#pragma omp parallel for
    for (size_t i = 0; i < rows * NB; i++) qrel[i] *= scale;
}

// Evaluation and generation: row by row with one (Tk) scratch per thread, so memory grows
// linearly with T (no (T,T) matrix). Queries are Tq rows; keys and values Tk rows, of
// which query t is the (q_offset + t)-th (q_offset > 0 with a KV cache). Query t reads
// keys s <= q_offset + t, and with window W > 0 only the last W of them (itself included).
// entropy (Tq), when given, gets the attention entropy -sum p ln p of each query row
// added, averaged over the heads and divided by `layers`. ab: the attention-score hook.
static void attention_forward_rows(float *y, const float *q, const float *k, const float *v, int B, int Tq, int Tk,
                                   int q_offset, int NH, int NKV, int hd, int window, float *entropy, int layers,
                                   const AttnBias *ab) {
    int group = NH / NKV;
    float scale = 1.0f / sqrtf((float)hd);
    float *ent = entropy ? (float *)xcalloc((size_t)B * NH * Tq, sizeof(float)) : NULL;  // (B,NH,Tq)
#pragma omp parallel
    {
        float *a = (float *)xmalloc((size_t)Tk * sizeof(float));
        float *qr = ab->rkeys ? (float *)xmalloc((size_t)ab->NB * sizeof(float)) : NULL;  // a query's relative-key scores
#pragma omp for collapse(3) schedule(dynamic, 8)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++)
                for (int t = 0; t < Tq; t++) {
                    int kvh = h / group, last = q_offset + t;
                    int first = window && last - window + 1 > 0 ? last - window + 1 : 0;
                    const float *qt = q + (((size_t)b * Tq + t) * NH + h) * hd;
                    const float *kb = k + (size_t)b * Tk * NKV * hd, *vb = v + (size_t)b * Tk * NKV * hd;
                    AttnBiasHead hb = attn_bias_head(*ab, h);
                    const float *qrow = attn_bias_qrow(*ab, b, t, h);
                    if (qr) {  // relative keys: this row's scores, up to the farthest key's bucket
                        rel_key_row(qr, qt, ab->rkeys, hd, ab->bucket[last < ab->n_dist ? last : ab->n_dist - 1] + 1);
                        qrow = qr;
                    }
                    for (int s = first; s <= last; s++) {
                        const float *ks = kb + ((size_t)s * NKV + kvh) * hd;
                        float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
                        for (int i = 0; i < hd; i++) dot += qt[i] * ks[i];
                        a[s] = dot * scale + attn_bias_at_row(hb, qrow, last - s);
                        if (ab->fn)  // a learned bias of the query's position and the distance
                            a[s] += bias_fn_term(ab->fn, h, ab->fn->alpha * (float)last, ab->fn->alpha * (float)(last - s));
                        if (ab->pq)  // TUPE's untied positions: query position last, key s
                            a[s] += tupe_pair_at(ab->pq + (size_t)last * NH * hd + h * hd, ab->pk + (size_t)s * NH * hd + h * hd,
                                                 hd, scale);
                    }
                    int n = last - first + 1;
                    float inv = (float)(1.0 / exp_sum_array(a + first, a + first, -max_array(a + first, n), n));
                    float *yt = y + (((size_t)b * Tq + t) * NH + h) * hd;
                    for (int i = 0; i < hd; i++) yt[i] = 0.0f;
                    double hsum = 0.0;
                    for (int s = first; s <= last; s++) {
                        const float *vs = vb + ((size_t)s * NKV + kvh) * hd;
                        float w = a[s] * inv;
                        if (ent && w > 0.0f) hsum -= w * log(w);
#pragma omp simd
                        for (int i = 0; i < hd; i++) yt[i] += w * vs[i];
                    }
                    if (ent) ent[((size_t)b * NH + h) * Tq + t] = (float)hsum;
                }
        free(a);
        free(qr);
    }
    if (ent) {
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++)
                for (int t = 0; t < Tq; t++) entropy[t] += ent[((size_t)b * NH + h) * Tq + t] / ((float)B * NH * layers);
        free(ent);
    }
}

// dq, dk, dv overwritten. Parallel over (b, kv head): every dk/dv element has one writer,
// and the group's query heads add into it in a fixed order.
//   dP = dY V^T;  dX = P * (dP - rowsum(P * dP));  dS = dX * scale;
//   dQ = dS K;  dK += dS^T Q;  dV += P^T dY
// diag (B,NH,T), when given: the logits' gradient summed along each diagonal,
// diag[b][h][d] = sum over t (ascending) of dX[t][t - d]: what a learned bias per distance
// needs (bias_fn_backward). rowg (B,T,NH,NB), when given: dX summed per query row and
// bucket of ab, s ascending: what the relative keys need (rel_key_backward). pairg
// (B,NH,T,T), when given: dX added to it (a term per query and key).
static void attention_backward(float *dq, float *dk, float *dv, float *diag, float *rowg, float *pairg, const AttnBias *ab,
                               const float *dy, const float *att, const float *q, const float *k, const float *v, int B,
                               int T, int NH, int NKV, int hd) {
    int group = NH / NKV;
    float scale = 1.0f / sqrtf((float)hd);
#pragma omp parallel
    {
        float *vt = (float *)xmalloc((size_t)hd * T * sizeof(float));  // V^T (hd,T)
        float *ds = (float *)xmalloc((size_t)T * T * sizeof(float));   // dP, then dS (T,T)
#pragma omp for collapse(2) schedule(dynamic, 1)
        for (int b = 0; b < B; b++)
            for (int kvh = 0; kvh < NKV; kvh++) {
                const float *kb = k + ((size_t)b * T * NKV + kvh) * hd, *vb = v + ((size_t)b * T * NKV + kvh) * hd;
                float *dkb = dk + ((size_t)b * T * NKV + kvh) * hd, *dvb = dv + ((size_t)b * T * NKV + kvh) * hd;
                transpose_rows(vt, vb, T, hd, NKV * hd);
                for (int h = kvh * group; h < (kvh + 1) * group; h++) {
                    const float *P = att + ((size_t)b * NH + h) * T * T;
                    const float *qh = q + ((size_t)b * T * NH + h) * hd, *dyh = dy + ((size_t)b * T * NH + h) * hd;
                    int first = h == kvh * group;
                    float *dg = diag ? diag + ((size_t)b * NH + h) * T : NULL;
                    float *pg = pairg ? pairg + ((size_t)b * NH + h) * T * T : NULL;
                    if (dg) memset(dg, 0, (size_t)T * sizeof(float));
                    Gemm dp = {ds, dyh, vt, T, NH * hd, T, hd, 0, GEMM_CAUSAL_OUT, 0};
                    gemm_serial(&dp, T, T);
                    for (int t = 0; t < T; t++) {
                        const float *p = P + (size_t)t * T;
                        float *d = ds + (size_t)t * T, dsum = 0.0f;
                        for (int s = 0; s <= t; s++) dsum += p[s] * d[s];
                        float *g = rowg ? rowg + (((size_t)b * T + t) * NH + h) * ab->NB : NULL;
                        if (g) memset(g, 0, (size_t)ab->NB * sizeof(float));
                        if (dg || g || pg)  // the logits' gradient dX, summed where the hook needs it
                            for (int s = 0; s <= t; s++) {
                                float dx = p[s] * (d[s] - dsum);
                                if (dg) dg[t - s] += dx;
                                if (g) g[ab->bucket[t - s]] += dx;
                                if (pg) pg[(size_t)t * T + s] += dx;
                                d[s] = dx * scale;
                            }
                        else
                            for (int s = 0; s <= t; s++) d[s] = p[s] * (d[s] - dsum) * scale;
                        for (int s = t + 1; s < T; s++) d[s] = 0.0f;
                    }
                    Gemm dqg = {dq + ((size_t)b * T * NH + h) * hd, ds, kb, NH * hd, T, NKV * hd, T, 0, GEMM_LOWER_A, 0};
                    gemm_serial(&dqg, T, hd);
                    Gemm dkg = {dkb, ds, qh, NKV * hd, T, NH * hd, T, !first, GEMM_UPPER_A, 1};  // dS^T Q
                    gemm_serial(&dkg, T, hd);
                    Gemm dvg = {dvb, P, dyh, NKV * hd, T, NH * hd, T, !first, GEMM_UPPER_A, 1};   // P^T dY
                    gemm_serial(&dvg, T, hd);
                }
            }
        free(vt);
        free(ds);
    }
}

// g (rows,NB): the logits' gradient summed per query row and bucket (attention_backward's
// rowg), scaled by 1/sqrt(hd) in place; then dq (rows,hd) += g rk and drk (NB,hd) += g^T q,
// the products of a linear layer's backward (the same bits for any thread count).
static void rel_key_backward(float *dq, float *drk, float *g, const float *q, const float *rk, size_t rows, int hd, int NB) {
    float scale = 1.0f / sqrtf((float)hd);
#pragma omp parallel for
    for (size_t i = 0; i < rows * NB; i++) g[i] *= scale;
    matmul_backward(dq, drk, g, q, rk, (int)rows, hd, NB, 1);
}

// T-PE (--pe tpe): one layer's keys from its function h, rk (n,hd), rk[d] = h(u_d) with
// u_d = ln(1 + alpha * d) (the pass's tpe_u), h = w2 tanh(w1 u + b1), and its hidden units
// hid (n,TPE_HIDDEN), each tanh formed once (the sums in tpe_key's order: its bits).
static void tpe_keys(float *rk, float *hid, const float *u, const float *w1, const float *b1, const float *w2, int n,
                     int hd) {
#pragma omp parallel for
    for (int d = 0; d < n; d++) {
        float *a = hid + (size_t)d * TPE_HIDDEN;
        for (int j = 0; j < TPE_HIDDEN; j++) a[j] = tpe_hidden(w1, b1, j, u[d]);
        for (int c = 0; c < hd; c++) {
            float acc = 0.0f;
            for (int j = 0; j < TPE_HIDDEN; j++) acc += w2[c * TPE_HIDDEN + j] * a[j];
            rk[(size_t)d * hd + c] = acc;
        }
    }
}

// Its backward: from drk (n,hd), the keys' gradient, into dw1, db1 (TPE_HIDDEN) and dw2
// (hd,TPE_HIDDEN), with the forward's hidden units hid; each element's sum over d in order
// (tpe_grad_hidden's and tpe_grad_w2's, their bits).
static void tpe_backward(float *dw1, float *db1, float *dw2, const float *drk, const float *hid, const float *u,
                         const float *w2, int n, int hd) {
#pragma omp parallel for
    for (int j = 0; j < TPE_HIDDEN; j++) {
        float g1 = 0.0f, gb = 0.0f;
        for (int d = 0; d < n; d++) {
            float a = hid[(size_t)d * TPE_HIDDEN + j], da = 0.0f;
            for (int c = 0; c < hd; c++) da += w2[c * TPE_HIDDEN + j] * drk[(size_t)d * hd + c];
            float dz = da * (1.0f - a * a);
            g1 += dz * u[d];
            gb += dz;
        }
        dw1[j] += g1;
        db1[j] += gb;
        for (int c = 0; c < hd; c++) {
            float acc = 0.0f;
            for (int d = 0; d < n; d++) acc += drk[(size_t)d * hd + c] * hid[(size_t)d * TPE_HIDDEN + j];
            dw2[c * TPE_HIDDEN + j] += acc;
        }
    }
}

// ----------------------------------------------------------------------------
// SwiGLU: h = silu(gate) * up, silu(g) = g * sigmoid(g). gate, up, h (N,F)

#define SWIGLU_CHUNK 1024  // elements per exp_array call

static void swiglu_forward(float *h, const float *gate, const float *up, size_t n) {
#pragma omp parallel for
    for (size_t i0 = 0; i0 < n; i0 += SWIGLU_CHUNK) {
        size_t m = n - i0 < SWIGLU_CHUNK ? n - i0 : SWIGLU_CHUNK;
        float *e = h + i0;  // exp(-g), then h
        exp_array(e, gate + i0, -1.0f, 0.0f, m);
        for (size_t j = 0; j < m; j++) e[j] = gate[i0 + j] / (1.0f + e[j]) * up[i0 + j];
    }
}

// dgate = dh * up * sig(g) * (1 + g * (1 - sig(g))),  dup = dh * silu(g)
static void swiglu_backward(float *dgate, float *dup, const float *dh, const float *gate, const float *up, size_t n) {
#pragma omp parallel for
    for (size_t i0 = 0; i0 < n; i0 += SWIGLU_CHUNK) {
        size_t m = n - i0 < SWIGLU_CHUNK ? n - i0 : SWIGLU_CHUNK;
        exp_array(dgate + i0, gate + i0, -1.0f, 0.0f, m);  // exp(-g), then dgate
        for (size_t j = 0; j < m; j++) {
            size_t i = i0 + j;
            float g = gate[i], sg = 1.0f / (1.0f + dgate[i]);
            dgate[i] = dh[i] * up[i] * sg * (1.0f + g * (1.0f - sg));
            dup[i] = dh[i] * g * sg;
        }
    }
}

// out = a + b (out may alias a)
static void residual_forward(float *out, const float *a, const float *b, size_t n) {
#pragma omp parallel for
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

// ----------------------------------------------------------------------------
// classifier: softmax over the V real columns of logits (N,Vp) (padded columns never
// win), per-position loss (N), and dlogits = (probs - onehot) * dloss written in place
// (no second logits buffer); with weights (N), row i's dloss is weights[i] (loss masks).
// targets NULL: losses not computed.

static void classifier_forward_backward(float *logits, float *losses, const int *targets, const float *weights, int N,
                                        int V, int Vp, float dloss, int backward) {
    if (!targets) return;  // generation reads the logits themselves
#pragma omp parallel
    {
        float *e = backward ? NULL : (float *)xmalloc((size_t)V * sizeof(float));  // exp of the logits
#pragma omp for
        for (int i = 0; i < N; i++) {
            float *l = logits + (size_t)i * Vp, *ex = backward ? l : e;  // backward: in place, one exp per logit
            float maxv = max_array(l, V), target_logit = l[targets[i]];
            double sum = exp_sum_array(ex, l, -maxv, V);
            losses[i] = maxv + (float)log(sum) - target_logit;
            if (backward) {
                float d = weights ? weights[i] : dloss, scale = (float)(d / sum);
                for (int c = 0; c < V; c++) l[c] *= scale;
                l[targets[i]] -= d;
                for (int c = V; c < Vp; c++) l[c] = 0.0f;
            }
        }
        free(e);
    }
}

// ----------------------------------------------------------------------------
// GRU layer (--arch gru), torch.nn.GRU's equations, gates in the order r, z, n:
//   r = sigmoid(Wir x + bir + Whr h + bhr)        z = sigmoid(Wiz x + biz + Whz h + bhz)
//   n = tanh(Win x + bin + r * (Whn h + bhn))     h' = (1 - z) * n + z * h
// Rows are time-major (T,B,...), so one step's B rows are contiguous for the products.
// x, h (T,B,C); w_ih, w_hh (3C,C); b_ih, b_hh (3C); gates (T,B,3C) keep r, z, n for the
// backward, ghn (T,B,C) keeps Whn h + bhn; gh (B,3C) is scratch. h0 (B,C): the state
// before step 0 (NULL: zeros). h may alias x: x is read only by the first product.

static float sigmoidf(float v) { return 1.0f / (1.0f + expf(-v)); }

static void gru_layer_forward(float *h, float *gates, float *ghn, float *gh, const float *x, const float *w_ih,
                              const float *w_hh, const float *b_ih, const float *b_hh, const float *h0, int T, int B, int C) {
    size_t BC = (size_t)B * C, G = 3 * (size_t)C;
    matmul_forward(gates, x, w_ih, T * B, C, 3 * C);  // the input projections of every step at once
    for (int t = 0; t < T; t++) {
        const float *hp = t ? h + (t - 1) * BC : h0;
        if (hp) matmul_forward(gh, hp, w_hh, B, C, 3 * C);
        else memset(gh, 0, B * G * sizeof(float));
        float *g = gates + t * B * G, *hn = ghn + t * BC, *ht = h + t * BC;
#pragma omp parallel for
        for (int b = 0; b < B; b++)
            for (int c = 0; c < C; c++) {
                float *gb = g + b * G, *hb = gh + b * G;
                float r = sigmoidf(gb[c] + b_ih[c] + hb[c] + b_hh[c]);
                float z = sigmoidf(gb[C + c] + b_ih[C + c] + hb[C + c] + b_hh[C + c]);
                float rec = hb[2 * C + c] + b_hh[2 * C + c];
                float n = tanhf(gb[2 * C + c] + b_ih[2 * C + c] + r * rec);
                gb[c] = r; gb[C + c] = z; gb[2 * C + c] = n;
                hn[b * C + c] = rec;
                ht[b * C + c] = (1.0f - z) * n + z * (hp ? hp[b * C + c] : 0.0f);
            }
    }
}

// Backward through time. dh (T,B,C): the gradient of h from above (the layer's output).
// Writes dx (T,B,C); accumulates dw_ih, dw_hh, db_ih, db_hh. dgi, dgh (T,B,3C) get the
// gradients of the input and recurrent pre-activations; dcarry (B,C) is d h_{t-1}.
//   d = dh_t + dcarry;  dn = d (1 - z);  dz = d (h_{t-1} - n);  dcarry = d z + dgh_t . Whh
//   dan = dn (1 - n^2);  daz = dz z (1 - z);  dar = dan (Whn h + bhn) r (1 - r)
//   dgi_t = (dar, daz, dan),  dgh_t = (dar, daz, dan r)
static void gru_layer_backward(float *dx, float *dw_ih, float *dw_hh, float *db_ih, float *db_hh, float *dgi,
                               float *dgh, float *dcarry, const float *dh, const float *x, const float *h,
                               const float *gates, const float *ghn, const float *w_ih, const float *w_hh, int T, int B,
                               int C) {
    size_t BC = (size_t)B * C, G = 3 * (size_t)C;
    memset(dcarry, 0, BC * sizeof(float));
    for (int t = T - 1; t >= 0; t--) {
        const float *hp = t ? h + (t - 1) * BC : NULL, *g = gates + t * B * G, *hn = ghn + t * BC, *dht = dh + t * BC;
        float *di = dgi + t * B * G, *dr = dgh + t * B * G;
#pragma omp parallel for
        for (int b = 0; b < B; b++)
            for (int c = 0; c < C; c++) {
                size_t i = (size_t)b * C + c, j = b * G + c;
                float r = g[j], z = g[j + C], n = g[j + 2 * C];
                float d = dht[i] + dcarry[i];
                float dn = d * (1.0f - z), dz = d * ((hp ? hp[i] : 0.0f) - n);
                float dan = dn * (1.0f - n * n), daz = dz * z * (1.0f - z), dar = dan * hn[i] * r * (1.0f - r);
                di[j] = dr[j] = dar;
                di[j + C] = dr[j + C] = daz;
                di[j + 2 * C] = dan;
                dr[j + 2 * C] = dan * r;
                dcarry[i] = d * z;
            }
        if (t) gemm_nn(dcarry, dr, w_hh, B, 3 * C, C, 1, 0);  // dcarry += dgh_t (B,3C) . Whh (3C,C)
    }
    if (T > 1) gemm_nn(dw_hh, dgh + B * G, h, 3 * C, (T - 1) * B, C, 1, 1);  // sum_t dgh_t^T h_{t-1}
    matmul_backward(dx, dw_ih, dgi, x, w_ih, T * B, C, 3 * C, 0);
#pragma omp parallel for
    for (int j = 0; j < 3 * C; j++) {  // bias gradients: column sums, rows in order
        float si = 0.0f, sh = 0.0f;
        for (size_t row = 0; row < (size_t)T * B; row++) {
            si += dgi[row * G + j];
            sh += dgh[row * G + j];
        }
        db_ih[j] += si;
        db_hh[j] += sh;
    }
}

// dst (T,B,C) = src (B,T,C) transposed over (B,T), and back
static void to_time_major(float *dst, const float *src, int B, int T, int C) {
#pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            memcpy(dst + ((size_t)t * B + b) * C, src + ((size_t)b * T + t) * C, C * sizeof(float));
}

static void to_batch_major(float *dst, const float *src, int B, int T, int C) {
#pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            memcpy(dst + ((size_t)b * T + t) * C, src + ((size_t)t * B + b) * C, C * sizeof(float));
}

// ----------------------------------------------------------------------------
// Activations for a (B,T) batch, named views into one buffer. train = 0 (evaluation,
// generation): layers share one set of buffers (layer stride 0) and attention keeps no
// (T,T) matrix, so memory grows linearly with T.

typedef struct {
    int B, T, train;
    size_t ls_C, ls_q, ls_kv, ls_F, ls_N, ls_att;  // per-layer strides (0 when !train)
    float *mem;
    float *resid;     // (L+1,B,T,C) input of each layer; resid[L] feeds the final norm (GRU: (L+1,T,B,C))
    float *rstd1;     // (L,B,T)
    float *n1;        // (L,B,T,C)
    float *q;         // (L,B,T,NH*hd) after QK-norm and RoPE
    float *k;         // (L,B,T,NKV*hd) after QK-norm and RoPE
    float *qraw, *kraw;   // (L,B,T,NH*hd), (L,B,T,NKV*hd) projections before QK-norm (--qk_norm only)
    float *rstdq, *rstdk; // (L,B,T) their RMSNorm rstd
    float *v;         // (L,B,T,NKV*hd)
    float *att;       // (L,B,NH,T,T) probabilities (train only)
    float *atty;      // (L,B,T,NH*hd)
    float *mid;       // (L,B,T,C) residual after attention
    float *rstd2;     // (L,B,T)
    float *n2;        // (L,B,T,C)
    float *gate, *up; // (L,B,T,F) pre-activations
    float *h;         // (L,B,T,F) silu(gate) * up
    float *rstdf;     // (B,T)
    float *nf;        // (B,T,C)
    float *logits;    // (B,T,Vp), turned into dlogits in place by the backward
    float *losses;    // (B,T)
    // backward scratch (train only), one layer at a time
    float *dres;      // (B,T,C) gradient of the residual stream
    float *dC;        // (B,T,C)
    float *dq, *dk, *dv, *datty;  // like q, k, v, atty
    float *dqraw, *dkraw;         // like q, k: gradients before QK-norm (--qk_norm only)
    float *dgate, *dup, *dh;      // (B,T,F)
    float *bias_diag;             // (B,NH,T) a learned bias per distance: the logits' gradient per diagonal
    float *qrel;                  // (B,T,NH,NB) one layer's relative-key scores (--pe shaw, tpe; train only:
                                  //   the rows path forms each query's own)
    float *rel_g;                 // (B,T,NH,NB) their gradient
    float *pair, *pairg;          // train only, a term per query and key (NH,T,T): --pe tupe's untied one
                                  //   (all layers') or a learned bias's (one layer's); the logits' gradient
                                  //   (B,NH,T,T), for TUPE summed over the layers
    float *dpq, *dpk;             // (T,NH*hd) TUPE's projected positions' gradients
    float *dpn;                   // (T,C) TUPE's normalized position rows' gradient
    // --arch gru, time-major: resid[l] is layer l's input (T,B,C); the blocks' views are empty
    float *gates;     // (L,T,B,3C) r, z, n
    float *ghn;       // (L,T,B,C) Whn h + bhn
    float *gh;        // (B,3C) one step's recurrent projection
    float *top;       // (B,T,C) the last layer's output, batch-major
    float *dgi, *dgh; // (T,B,3C) gradients of the pre-activations (train only)
    float *dhx;       // (T,B,C) gradient of a layer's output (train only)
    float *dcarry;    // (B,C) gradient of h_{t-1} (train only)
    PassPositions pos;  // the last forward's positions, which its backward reuses (pos_pass's buffer)
    BiasPass bias;      // the last forward's attention-score hook (attn_bias_pass's buffers)
} Acts;

// Lays out the views of a (B,T) batch in mem and returns the floats they take (mem NULL:
// only counts, for the memory estimate).
static size_t acts_layout(Acts *a, const Config *c, int B, int T, int train, float *mem) {
    int hd = c->C / c->NH, L = c->L;
    size_t N = (size_t)B * T, C = c->C, QD = (size_t)c->NH * hd, KD = (size_t)c->NKV * hd, F = c->F;
    size_t nl = train ? L : 1, qk = c->qk_norm, tq = train && qk;
    size_t gru = c->arch == ARCH_GRU, tr = !gru, gt = gru && train;  // tr: transformer views, gru/gt: GRU views
    size_t pq = pe_bias_per_query(c->pe), tb = tr && train && pe_bias_fn(c->pe) && !pq;  // a learned bias per distance
    size_t rk = tr && train && pe_bias_keys(c->pe) ? (size_t)pe_bias_buckets(c->pe, rel_shape_of(c), T) : 0;  // relative keys
    size_t tu = tr && train && pe_is(c->pe, PEF_UNTIED);  // TUPE's untied positions
    size_t tt = tu || (tr && train && pq);        // a term per query and key: TUPE's, or a learned bias's
    memset(a, 0, sizeof(*a));
    a->B = B; a->T = T; a->train = train;
    a->ls_C = train ? N * C : 0;  // also the GRU's per-layer stride of resid and ghn
    a->ls_q = train ? N * QD : 0;
    a->ls_kv = train ? N * KD : 0;
    a->ls_F = train ? N * F : 0;
    a->ls_N = train ? N : 0;
    a->ls_att = train ? (size_t)B * c->NH * T * T : 0;
    // one row per view, in memory order: the view, its floats (0: this run has none)
#define VIEW(view, n) {&a->view, (size_t)(n)}
    struct { float **view; size_t n; } views[] = {
        // the forward's, per layer when training
        VIEW(resid, (train ? L + 1 : 1) * N * C), VIEW(rstd1, tr * nl * N), VIEW(n1, tr * nl * N * C),
        VIEW(q, tr * nl * N * QD), VIEW(k, tr * nl * N * KD), VIEW(v, tr * nl * N * KD),
        VIEW(att, tr * (train ? nl * B * c->NH * (size_t)T * T : 0)), VIEW(atty, tr * nl * N * QD),
        VIEW(mid, tr * nl * N * C), VIEW(rstd2, tr * nl * N), VIEW(n2, tr * nl * N * C), VIEW(gate, tr * nl * N * F),
        VIEW(up, tr * nl * N * F), VIEW(h, tr * nl * N * F), VIEW(rstdf, N), VIEW(nf, N * C), VIEW(logits, N * c->Vp),
        VIEW(losses, N),
        // the backward's scratch, one layer
        VIEW(dres, train * N * C), VIEW(dC, train * N * C), VIEW(dq, tr * train * N * QD), VIEW(dk, tr * train * N * KD),
        VIEW(dv, tr * train * N * KD), VIEW(datty, tr * train * N * QD), VIEW(dgate, tr * train * N * F),
        VIEW(dup, tr * train * N * F), VIEW(dh, tr * train * N * F), VIEW(bias_diag, tb * B * c->NH * T),
        VIEW(qrel, rk * N * c->NH), VIEW(rel_g, rk * N * c->NH), VIEW(pair, tt * c->NH * T * T),
        VIEW(pairg, tt * B * c->NH * T * T), VIEW(dpq, tu * T * QD), VIEW(dpk, tu * T * QD), VIEW(dpn, tu * T * C),
        // --qk_norm
        VIEW(qraw, qk * nl * N * QD), VIEW(kraw, qk * nl * N * KD), VIEW(rstdq, qk * nl * N), VIEW(rstdk, qk * nl * N),
        VIEW(dqraw, tq * N * QD), VIEW(dkraw, tq * N * KD),
        // --arch gru
        VIEW(gates, gru * nl * N * 3 * C), VIEW(ghn, gru * nl * N * C), VIEW(gh, gru * B * 3 * C), VIEW(top, gru * N * C),
        VIEW(dgi, gt * N * 3 * C), VIEW(dgh, gt * N * 3 * C), VIEW(dhx, gt * N * C), VIEW(dcarry, gt * B * C)};
#undef VIEW
    size_t total = 0;
    a->mem = mem;
    for (size_t i = 0; i < sizeof(views) / sizeof(views[0]); i++) {
        *views[i].view = views[i].n && mem ? mem + total : NULL;
        total += views[i].n;
    }
    return total;
}

static void acts_alloc(Acts *a, const Config *c, int B, int T, int train) {
    size_t n = acts_layout(a, c, B, T, train, NULL);
    acts_layout(a, c, B, T, train, (float *)big_calloc(n, sizeof(float)));
}

// ----------------------------------------------------------------------------
// The model

typedef struct {
    Config cfg;
    int hd;
    Shape shapes[NP];
    size_t n_params;
    float *params_mem, *grads_mem, *m_mem, *v_mem;
    float *params[NP], *grads[NP], *m[NP], *v[NP];  // named views
    Acts acts;         // training batch (B,T)
} GPT;

static void gpt_alloc(GPT *g, const Config *c, int train) {
    memset(g, 0, sizeof(*g));
    g->cfg = *c;
    g->hd = c->C / c->NH;
    param_shapes(c, g->shapes);
    g->n_params = 0;
    for (int i = 0; i < NP; i++) g->n_params += g->shapes[i].numel;
    g->params_mem = (float *)big_calloc(g->n_params, sizeof(float));
    if (train) {
        g->grads_mem = (float *)big_calloc(g->n_params, sizeof(float));
        g->m_mem = (float *)big_calloc(g->n_params, sizeof(float));
        g->v_mem = (float *)big_calloc(g->n_params, sizeof(float));
    }
    size_t off = 0;
    for (int i = 0; i < NP; i++) {
        g->params[i] = g->params_mem + off;
        g->grads[i] = train ? g->grads_mem + off : NULL;
        g->m[i] = train ? g->m_mem + off : NULL;
        g->v[i] = train ? g->v_mem + off : NULL;
        off += g->shapes[i].numel;
    }
}

static void gpt_free(GPT *g) {
    free(g->params_mem);
    free(g->grads_mem);
    free(g->m_mem);
    free(g->v_mem);
    free(g->acts.mem);
}

static void gpt_init(GPT *g, uint64_t seed) { param_init(&g->cfg, g->params, seed); }

// A KV cache for evaluation and generation (B = 1): the keys (after RoPE) and values of
// every layer, so new tokens attend to old ones without recomputing them.
typedef struct {
    int cap, len, KD;
    float *k, *v;  // (L, cap, KD)
} KVCache;

static void kv_alloc(KVCache *kv, const Config *c, int cap) {
    kv->cap = cap;
    kv->len = 0;
    kv->KD = c->NKV * (c->C / c->NH);
    kv->k = (float *)xmalloc((size_t)c->L * cap * kv->KD * sizeof(float));
    kv->v = (float *)xmalloc((size_t)c->L * cap * kv->KD * sizeof(float));
}

static void kv_free(KVCache *kv) {
    free(kv->k);
    free(kv->v);
}

// Keep only the last `keep` entries (their rotations unchanged).
static void kv_keep_last(KVCache *kv, int n_layer, int keep) {
    if (kv->len <= keep) return;
    size_t drop = (size_t)(kv->len - keep) * kv->KD, n = (size_t)keep * kv->KD;
    for (int l = 0; l < n_layer; l++) {
        float *kl = kv->k + (size_t)l * kv->cap * kv->KD, *vl = kv->v + (size_t)l * kv->cap * kv->KD;
        memmove(kl, kl + drop, n * sizeof(float));
        memmove(vl, vl + drop, n * sizeof(float));
    }
    kv->len = keep;
}

// Options of a forward-only pass (acts with train = 0):
typedef struct {
    int window;      // > 0: each query sees only the last `window` keys (the exact banded variant)
    float *entropy;  // (T) when given: mean attention entropy per query position is added
    KVCache *kv;     // when given: the inputs continue the cached sequence at positions pos0 + t,
    int pos0;        // and their keys and values are appended to the cache
    float *state;    // --arch gru (L,B,C), when given: the state to continue from, updated
} FwdOpts;

// Layer l's attention in a forward-only pass: q (B,T,NH*hd), k, v (B,T,NKV*hd) of this
// pass; with a KV cache (B = 1) they are appended first and the queries attend over the
// whole cache. y (B,T,NH*hd).
static void attention_forward_infer(GPT *g, Acts *a, int l, float *y, const float *q, const float *k, const float *v,
                                    const AttnBias *ab, const FwdOpts *o) {
    const Config *c = &g->cfg;
    int T = a->T, KD = c->NKV * g->hd;
    KVCache *kv = o ? o->kv : NULL;
    const float *keys = k, *vals = v;
    int Tk = T, q_off = 0;
    if (kv) {  // append, then attend over the whole cache
        float *kl = kv->k + (size_t)l * kv->cap * KD, *vl = kv->v + (size_t)l * kv->cap * KD;
        memcpy(kl + (size_t)kv->len * KD, k, (size_t)T * KD * sizeof(float));
        memcpy(vl + (size_t)kv->len * KD, v, (size_t)T * KD * sizeof(float));
        keys = kl;
        vals = vl;
        Tk = kv->len + T;
        q_off = kv->len;
    }
    attention_forward_rows(y, q, keys, vals, a->B, T, Tk, q_off, c->NH, c->NKV, g->hd, o ? o->window : 0,
                           o ? o->entropy : NULL, c->L, ab);
}

// The head: final norm of xL (B,T,C), logits (B,T,Vp), and with targets the per-position
// losses in a->losses; returns their mean.
static float head_forward(GPT *g, Acts *a, const float *xL, const int *targets) {
    const Config *c = &g->cfg;
    int N = a->B * a->T;
    rmsnorm_forward(a->nf, a->rstdf, xL, g->params[P_FINAL_NORM], N, c->C, c->rms_eps);
    matmul_forward(a->logits, a->nf, g->params[P_WTE], N, c->C, c->Vp);
    if (!targets) return 0.0f;
    classifier_forward_backward(a->logits, a->losses, targets, NULL, N, c->V, c->Vp, 0.0f, 0);
    double s = 0.0;
    for (int i = 0; i < N; i++) s += a->losses[i];
    return (float)(s / N);
}

// Its backward: dlogits in place, wte's and final_norm's gradients, and a->dres = d xL.
// Each target's loss weighs dloss / N, or weights[i] when given (loss masks).
static void head_backward(GPT *g, Acts *a, const float *xL, const int *targets, const float *weights, float dloss) {
    const Config *c = &g->cfg;
    int N = a->B * a->T;
    classifier_forward_backward(a->logits, a->losses, targets, weights, N, c->V, c->Vp, dloss / N, 1);
    matmul_backward(a->dC, g->grads[P_WTE], a->logits, a->nf, g->params[P_WTE], N, c->C, c->Vp, 0);
    rmsnorm_backward(a->dres, g->grads[P_FINAL_NORM], a->dC, xL, g->params[P_FINAL_NORM], a->rstdf, N, c->C, 0);
}

// ----------------------------------------------------------------------------
// The GRU model (--arch gru): embedding, L stacked GRU layers, final RMSNorm, the tied
// head. No positions: the recurrence carries order. Layer l's weights: rows l of gru_*.

static float gru_forward(GPT *g, Acts *a, const int *inputs, const int *targets, float *state) {
    const Config *c = &g->cfg;
    int B = a->B, T = a->T, C = c->C, N = B * T;
    size_t lsG = a->train ? (size_t)N * 3 * C : 0, CC = 3 * (size_t)C * C;
    float **P = g->params;
    encoder_forward(a->top, inputs, P[P_WTE], N, C, embed_scale(c));
    to_time_major(a->resid, a->top, B, T, C);
    for (int l = 0; l < c->L; l++) {
        float *x = a->resid + l * a->ls_C, *h = a->resid + (a->train ? (l + 1) * a->ls_C : 0);  // eval: in place
        float *h0 = state ? state + (size_t)l * B * C : NULL;
        gru_layer_forward(h, a->gates + l * lsG, a->ghn + l * a->ls_C, a->gh, x, P[P_GRU_W_IH] + l * CC,
                          P[P_GRU_W_HH] + l * CC, P[P_GRU_B_IH] + (size_t)l * 3 * C, P[P_GRU_B_HH] + (size_t)l * 3 * C, h0,
                          T, B, C);
        if (h0) memcpy(h0, h + (size_t)(T - 1) * B * C, (size_t)B * C * sizeof(float));
    }
    to_batch_major(a->top, a->resid + (a->train ? c->L * a->ls_C : 0), B, T, C);
    return head_forward(g, a, a->top, targets);
}

static void gru_backward(GPT *g, Acts *a, const int *inputs, const int *targets, const float *weights, float dloss) {
    const Config *c = &g->cfg;
    int B = a->B, T = a->T, C = c->C, N = B * T;
    size_t lsG = (size_t)N * 3 * C, CC = 3 * (size_t)C * C;
    float **P = g->params, **G = g->grads;
    head_backward(g, a, a->top, targets, weights, dloss);
    float *dout = a->dhx, *dx = a->dC;  // d(layer output), d(layer input): swapped per layer
    to_time_major(dout, a->dres, B, T, C);
    for (int l = c->L - 1; l >= 0; l--) {
        gru_layer_backward(dx, G[P_GRU_W_IH] + l * CC, G[P_GRU_W_HH] + l * CC, G[P_GRU_B_IH] + (size_t)l * 3 * C,
                           G[P_GRU_B_HH] + (size_t)l * 3 * C, a->dgi, a->dgh, a->dcarry, dout, a->resid + l * a->ls_C,
                           a->resid + (l + 1) * a->ls_C, a->gates + l * lsG, a->ghn + l * a->ls_C, P[P_GRU_W_IH] + l * CC,
                           P[P_GRU_W_HH] + l * CC, T, B, C);
        float *swap = dout;
        dout = dx;
        dx = swap;
    }
    to_batch_major(a->dres, dout, B, T, C);  // d(embeddings)
    encoder_backward(G[P_WTE], a->dres, inputs, N, C, embed_scale(c));
}

// ----------------------------------------------------------------------------
// The transformer

// A learned bias (llmc/attn_bias.h's BIAS_FN_TABLE), layer l of the last forward's pass
// (a->bias): its tensors' slices, and their gradients' when training.
static BiasFn layer_bias_fn(GPT *g, const Acts *a, int l) {
    return bias_fn_layer(&a->bias, l, &g->cfg, g->shapes, (const float *const *)g->params, a->train ? g->grads : NULL);
}

// Its term for Tq queries at q_offset + t over n keys: out (NH, n) per distance, or (NH, Tq,
// n) per query and key (f->per_query).                mirrors bias_fn_fill_kernel
static void bias_fn_fill(float *out, const BiasFn *f, int Tq, int n, int q_offset) {
    size_t total = (size_t)f->NH * n * (f->per_query ? (size_t)Tq : 1);
#pragma omp parallel for
    for (size_t i = 0; i < total; i++) out[i] = bias_fn_fill_at(f, i, Tq, n, q_offset);
}

// ... per distance, into a buffer valid until the next call
static const float *bias_fn_term_of(const BiasFn *f, int n) {
    static float *term;
    static size_t cap;
    term = (float *)grow_buffer(term, &cap, (size_t)f->NH * n * sizeof(float));
    bias_fn_fill(term, f, 1, n, 0);
    return term;
}

// Its backward: f->dw += the gradient through the function from the term's gradient dterm
// (bias_fn_chunk's layout), chunk by chunk into partial rows, then the rows summed in order:
// the same bits for any thread count.                  mirrors bias_fn_backward (CUDA)
static void bias_fn_backward(const BiasFn *f, const float *dterm, int B, int Tq, int n) {
    static float *part;
    static size_t cap;
    int chunks = bias_fn_chunks(f, Tq, n);
    part = (float *)grow_buffer(part, &cap, (size_t)chunks * f->P * sizeof(float));
#pragma omp parallel for schedule(dynamic, 1)
    for (int ch = 0; ch < chunks; ch++) bias_fn_chunk(f, part + (size_t)ch * f->P, ch, dterm, B, Tq, n, 0);
#pragma omp parallel for
    for (int p = 0; p < f->P; p++) bias_fn_reduce_at(f, part, chunks, p);
}

// x[0..n) += x[b n .. (b+1) n) for b = 1 .. B-1, in order: a per-sequence gradient summed over the batch
static void sum_over_batch(float *x, int B, size_t n) {
#pragma omp parallel for
    for (size_t i = 0; i < n; i++)
        for (int b = 1; b < B; b++) x[i] += x[(size_t)b * n + i];
}

// Layer l's relative keys (NB,hd) in the last forward's pass (a->bias): Shaw's rows of
// rel_key, or T-PE's computed by its function (into a buffer valid until the next call, its
// hidden units into *hid when asked); NULL without.
static const float *layer_rel_keys(GPT *g, const Acts *a, int l, const float **hid) {
    static float *rk;
    static size_t cap;
    const BiasPass *bp = &a->bias;
    int hd = g->hd;
    if (bp->kind == BIAS_KEY) return g->params[P_REL_KEY] + (size_t)l * bp->NB * hd;
    if (bp->kind != BIAS_KEY_FN) return NULL;
    rk = (float *)grow_buffer(rk, &cap, (size_t)bp->NB * (hd + TPE_HIDDEN) * sizeof(float));
    float *h = rk + (size_t)bp->NB * hd;
    tpe_keys(rk, h, bp->tpe_u + (size_t)l * bp->bucket_stride, g->params[P_TPE_W1] + l * TPE_HIDDEN,
             g->params[P_TPE_B1] + l * TPE_HIDDEN, g->params[P_TPE_W2] + (size_t)l * hd * TPE_HIDDEN, bp->NB, hd);
    if (hid) *hid = h;
    return rk;
}

// Their backward after the attention's (a->rel_g holding the row sums): dq += ..., and the
// gradient of rel_key (Shaw) or of T-PE's function (through the keys' gradient).
static void rel_keys_backward(GPT *g, Acts *a, int l, const AttnBias *ab, const float *q) {
    static float *drk;
    static size_t cap;
    float **P = g->params, **G = g->grads;
    int hd = g->hd, NB = ab->NB;
    size_t rows = (size_t)a->B * a->T * g->cfg.NH;
    const float *hid = NULL, *rk = layer_rel_keys(g, a, l, &hid);  // the keys again (T-PE: and its hidden units)
    if (a->bias.kind == BIAS_KEY) {
        rel_key_backward(a->dq, G[P_REL_KEY] + (size_t)l * NB * hd, a->rel_g, q, rk, rows, hd, NB);
        return;
    }
    drk = (float *)grow_buffer(drk, &cap, (size_t)NB * hd * sizeof(float));
    memset(drk, 0, (size_t)NB * hd * sizeof(float));
    rel_key_backward(a->dq, drk, a->rel_g, q, rk, rows, hd, NB);
    size_t lh = (size_t)l * TPE_HIDDEN, lw = (size_t)l * hd * TPE_HIDDEN;
    tpe_backward(G[P_TPE_W1] + lh, G[P_TPE_B1] + lh, G[P_TPE_W2] + lw, drk, hid, a->bias.tpe_u + (size_t)l * a->bias.bucket_stride,
                 P[P_TPE_W2] + lw, NB, hd);
}

// TUPE (--pe tupe, Ke et al. 2020, as its released code): the untied positions' term of query
// position t and key position s in head h, scale * pq_h[t] . pk_h[s], with p = LayerNorm(wpe)
// (tupe_ln_w, tupe_ln_b), pq = (p U^Q + b^Q) / sqrt(2) and pk = p U^K (rows 0..n-1: positions
// p_t = t), the same in every layer. The queries are scaled by 1/sqrt(2) too, so each logit is
// (q . k + (p_t U^Q + b^Q) . (p_s U^K)) / sqrt(2 hd). (U^K's bias would add a constant to each
// query's row, which the softmax ignores: the code's stays 0, this model has none.)
typedef struct {
    float *pq, *pk;  // (n, NH*hd), valid until the next tupe_pass
    float *p, *mr;   // (n, C) the normalized rows, (n, 2) their means and 1/std
} TupePass;

// The pass's projected positions for its n keys (positions 0..n-1; the queries' are the last
// of them), after checking that positions are p_t = t; with_pair: training's pair (NH,n,n) too.
static TupePass tupe_pass(GPT *g, Acts *a, const PassPositions *pp, int n, int with_pair) {
    static float *buf;
    static size_t cap;
    const Config *c = &g->cfg;
    int C = c->C, QD = c->NH * g->hd, rows = g->shapes[P_WPE].shape[0];
    float **P = g->params;
    tupe_positions_check(pp, a->B, rows, n);
    buf = (float *)grow_buffer(buf, &cap, (size_t)n * (2 * QD + C + 2) * sizeof(float));
    TupePass tp = {buf, buf + (size_t)n * QD, buf + 2 * (size_t)n * QD, buf + (size_t)n * (2 * QD + C)};
#pragma omp parallel for
    for (int t = 0; t < n; t++)
        tupe_ln_row(tp.p + (size_t)t * C, tp.mr + 2 * t, P[P_WPE] + (size_t)t * C, P[P_TUPE_LN_W], P[P_TUPE_LN_B], C);
    matmul_forward(tp.pq, tp.p, P[P_TUPE_UQ], n, C, QD);
    matmul_forward(tp.pk, tp.p, P[P_TUPE_UK], n, C, QD);
    for (size_t i = 0; i < (size_t)n * QD; i++) tp.pq[i] = (tp.pq[i] + P[P_TUPE_BQ][i % QD]) * TUPE_QSCALE;
    if (with_pair) {  // training: the whole (NH,n,n) term once, for every layer
        float scale = 1.0f / sqrtf((float)g->hd);
#pragma omp parallel for collapse(2)
        for (int h = 0; h < c->NH; h++)
            for (int t = 0; t < n; t++)
                for (int s = 0; s < n; s++)
                    a->pair[((size_t)h * n + t) * n + s] =
                        s <= t ? tupe_pair_at(tp.pq + (size_t)t * QD + h * g->hd, tp.pk + (size_t)s * QD + h * g->hd, g->hd, scale)
                               : 0.0f;
    }
    return tp;
}

// Its backward after every layer's (a->pairg holding dX per sequence): D = sum over b of
// pairg; dpq = scale D pk / sqrt(2), dpk = scale D^T pq (pq holding the 1/sqrt(2)); then
// tupe_uq, tupe_uk, tupe_bq and the normalized rows dp through the projections, and wpe's
// rows 0..T-1, tupe_ln_w and tupe_ln_b through the LayerNorm.
static void tupe_backward(GPT *g, Acts *a, const TupePass *tp) {
    const Config *c = &g->cfg;
    int T = a->T, NH = c->NH, hd = g->hd, QD = NH * hd, C = c->C;
    float scale = 1.0f / sqrtf((float)hd), *D = a->pairg;
    sum_over_batch(D, a->B, (size_t)NH * T * T);
#pragma omp parallel for collapse(2)
    for (int t = 0; t < T; t++)
        for (int o = 0; o < QD; o++) {
            int h = o / hd;
            const float *Dh = D + (size_t)h * T * T;
            float gq = 0.0f, gk = 0.0f;
            for (int s = 0; s <= t; s++) gq += Dh[(size_t)t * T + s] * tp->pk[(size_t)s * QD + o];
            for (int u = t; u < T; u++) gk += Dh[(size_t)u * T + t] * tp->pq[(size_t)u * QD + o];
            a->dpq[(size_t)t * QD + o] = gq * scale * TUPE_QSCALE;
            a->dpk[(size_t)t * QD + o] = gk * scale;
        }
    float **P = g->params, **G = g->grads, *dp = a->dpn;
    matmul_backward(dp, G[P_TUPE_UQ], a->dpq, tp->p, P[P_TUPE_UQ], T, C, QD, 0);
    matmul_backward(dp, G[P_TUPE_UK], a->dpk, tp->p, P[P_TUPE_UK], T, C, QD, 1);
    for (int o = 0; o < QD; o++) G[P_TUPE_BQ][o] += tupe_column_grad(a->dpq, NULL, NULL, T, QD, o);
#pragma omp parallel for
    for (int t = 0; t < T; t++)
        tupe_ln_row_backward(G[P_WPE] + (size_t)t * C, dp + (size_t)t * C, P[P_WPE] + (size_t)t * C, P[P_TUPE_LN_W],
                             tp->mr + 2 * t, C);
    for (int k = 0; k < C; k++) {
        G[P_TUPE_LN_W][k] += tupe_column_grad(dp, P[P_WPE], tp->mr, T, C, k);
        G[P_TUPE_LN_B][k] += tupe_column_grad(dp, NULL, NULL, T, C, k);
    }
}

// Forward over inputs (B,T); returns the mean loss when targets are given. Per-position
// losses stay in a->losses. Positions and frequencies come from the hook `ps`.
static float gpt_forward_ex(GPT *g, Acts *a, const int *inputs, const int *targets, const PosStep *ps,
                            const FwdOpts *o) {
    const Config *c = &g->cfg;
    if (c->arch == ARCH_GRU) return gru_forward(g, a, inputs, targets, o ? o->state : NULL);
    int B = a->B, T = a->T, C = c->C, NH = c->NH, NKV = c->NKV, hd = g->hd, F = c->F;
    int N = B * T, QD = NH * hd, KD = NKV * hd;
    float **P = g->params;
    KVCache *kv = o ? o->kv : NULL;
    if (kv && (B != 1 || kv->len + T > kv->cap)) fail("internal: a KV cache of %d entries cannot take %d more", kv->cap, T);
    a->pos = pos_pass(ps, c->L, B, kv ? o->pos0 : 0, T);  // this pass's positions p[l][b][t]
    const PassPositions *pp = &a->pos;
    int Tk = kv ? kv->len + T : T;  // keys of the pass
    a->bias = attn_bias_pass(ps, c->L, NH, Tk);  // its attention-score hook
    encoder_forward(a->resid, inputs, P[P_WTE], N, C, embed_scale(c));
    if (pe_sinusoidal(ps->pe)) sinusoidal_forward(a->resid, pp, B, T, C, ps->ape_scale);
    if (pe_is(ps->pe, PEF_WPE_ADDED)) {
        learned_rows_check(pp, B, g->shapes[P_WPE].shape[0]);
        learned_forward(a->resid, P[P_WPE], pp, B, T, C);
    }
    TupePass tp = {NULL, NULL, NULL, NULL};
    if (pe_is(ps->pe, PEF_UNTIED)) tp = tupe_pass(g, a, pp, Tk, a->train);
    for (int l = 0; l < c->L; l++) {
        float *x = a->resid + l * a->ls_C, *xn = a->resid + (a->train ? (l + 1) * a->ls_C : 0);
        float *n1 = a->n1 + l * a->ls_C, *q = a->q + l * a->ls_q, *k = a->k + l * a->ls_kv, *v = a->v + l * a->ls_kv;
        float *atty = a->atty + l * a->ls_q;
        float *mid = a->mid + l * a->ls_C, *n2 = a->n2 + l * a->ls_C;
        float *gate = a->gate + l * a->ls_F, *up = a->up + l * a->ls_F, *h = a->h + l * a->ls_F;
        rmsnorm_forward(n1, a->rstd1 + l * a->ls_N, x, P[P_ATTN_NORM] + (size_t)l * C, N, C, c->rms_eps);
        float *qraw = c->qk_norm ? a->qraw + l * a->ls_q : q, *kraw = c->qk_norm ? a->kraw + l * a->ls_kv : k;
        matmul_forward(qraw, n1, P[P_WQ] + (size_t)l * QD * C, N, C, QD);
        matmul_forward(kraw, n1, P[P_WK] + (size_t)l * KD * C, N, C, KD);
        if (c->qk_norm) {  // RMSNorm over the whole projection of each token, before RoPE
            rmsnorm_forward(q, a->rstdq + l * a->ls_N, qraw, P[P_Q_NORM] + (size_t)l * QD, N, QD, c->rms_eps);
            rmsnorm_forward(k, a->rstdk + l * a->ls_N, kraw, P[P_K_NORM] + (size_t)l * KD, N, KD, c->rms_eps);
        }
        matmul_forward(v, n1, P[P_WV] + (size_t)l * KD * C, N, C, KD);
        rope_forward(q, B, T, NH, hd, ps, pp, l, ROT_QUERY);
        rope_forward(k, B, T, NKV, hd, ps, pp, l, ROT_KEY);
        if (tp.pq)  // TUPE: q . k / sqrt(2 hd)
            for (size_t i = 0; i < (size_t)N * QD; i++) q[i] *= TUPE_QSCALE;
        const float *rk = layer_rel_keys(g, a, l, NULL);  // relative keys: training scores every query first
        if (rk && a->train) rel_key_scores(a->qrel, q, rk, (size_t)N * NH, hd, a->bias.NB);
        BiasFn f = layer_bias_fn(g, a, l);  // a learned bias: its term per distance, or per query and key
        const float *term = a->bias.fn && !f.per_query ? bias_fn_term_of(&f, Tk) : NULL;
        AttnBias ab = attn_bias_layer(&a->bias, l, NH, term, a->train ? a->qrel : NULL, rk, T, hd);
        if (a->bias.fn && f.per_query && a->train) bias_fn_fill(a->pair, &f, T, T, 0);
        ab.fn = a->bias.fn && f.per_query && !a->train ? &f : NULL;  // evaluation forms it per row
        ab.pair = a->train ? a->pair : NULL;  // TUPE too: training reads the whole term, evaluation forms it per row
        ab.pq = a->train ? NULL : tp.pq;
        ab.pk = a->train ? NULL : tp.pk;
        if (a->train)  // training keeps P (B,NH,T,T) for the backward
            attention_forward_train(atty, a->att + l * a->ls_att, q, k, v, B, T, NH, NKV, hd, &ab);
        else  // evaluation and generation: row by row, windows, entropy, the KV cache
            attention_forward_infer(g, a, l, atty, q, k, v, &ab, o);
        matmul_forward(mid, atty, P[P_WO] + (size_t)l * C * QD, N, QD, C);
        residual_forward(mid, mid, x, (size_t)N * C);
        rmsnorm_forward(n2, a->rstd2 + l * a->ls_N, mid, P[P_MLP_NORM] + (size_t)l * C, N, C, c->rms_eps);
        matmul_forward(gate, n2, P[P_W_GATE] + (size_t)l * F * C, N, C, F);
        matmul_forward(up, n2, P[P_W_UP] + (size_t)l * F * C, N, C, F);
        swiglu_forward(h, gate, up, (size_t)N * F);
        matmul_forward(xn, h, P[P_W_DOWN] + (size_t)l * C * F, N, F, C);
        residual_forward(xn, xn, mid, (size_t)N * C);
    }
    if (kv) kv->len += T;
    return head_forward(g, a, a->resid + (a->train ? c->L * a->ls_C : 0), targets);
}

static float gpt_forward(GPT *g, Acts *a, const int *inputs, const int *targets, const PosStep *ps) {
    return gpt_forward_ex(g, a, inputs, targets, ps, NULL);
}

// Backward of the last forward; gradients accumulate into g->grads (zero them per step).
// dloss scales the mean loss: 1/(grad_accum) for gradient accumulation; weights (B,T), when
// given, replace it by each target's own share of the loss (loss masks).
static void gpt_backward(GPT *g, Acts *a, const int *inputs, const int *targets, const float *weights, const PosStep *ps,
                         float dloss) {
    const Config *c = &g->cfg;
    if (c->arch == ARCH_GRU) {
        gru_backward(g, a, inputs, targets, weights, dloss);
        return;
    }
    int B = a->B, T = a->T, C = c->C, NH = c->NH, NKV = c->NKV, hd = g->hd, F = c->F;
    int N = B * T, QD = NH * hd, KD = NKV * hd;
    float **P = g->params, **G = g->grads;
    head_backward(g, a, a->resid + c->L * a->ls_C, targets, weights, dloss);
    size_t n_pair = (size_t)B * NH * T * T;
    if (pe_is(ps->pe, PEF_UNTIED)) memset(a->pairg, 0, n_pair * sizeof(float));
    for (int l = c->L - 1; l >= 0; l--) {
        float *x = a->resid + l * a->ls_C, *n1 = a->n1 + l * a->ls_C;
        float *q = a->q + l * a->ls_q, *k = a->k + l * a->ls_kv, *v = a->v + l * a->ls_kv;
        float *att = a->att + l * a->ls_att, *atty = a->atty + l * a->ls_q;
        float *mid = a->mid + l * a->ls_C, *n2 = a->n2 + l * a->ls_C;
        float *gate = a->gate + l * a->ls_F, *up = a->up + l * a->ls_F, *h = a->h + l * a->ls_F;
        // MLP: dres is d(xn); the residual passes it to mid unchanged
        matmul_backward(a->dh, G[P_W_DOWN] + (size_t)l * C * F, a->dres, h, P[P_W_DOWN] + (size_t)l * C * F, N, F, C, 0);
        swiglu_backward(a->dgate, a->dup, a->dh, gate, up, (size_t)N * F);
        matmul_backward(a->dC, G[P_W_GATE] + (size_t)l * F * C, a->dgate, n2, P[P_W_GATE] + (size_t)l * F * C, N, C, F, 0);
        matmul_backward(a->dC, G[P_W_UP] + (size_t)l * F * C, a->dup, n2, P[P_W_UP] + (size_t)l * F * C, N, C, F, 1);
        rmsnorm_backward(a->dres, G[P_MLP_NORM] + (size_t)l * C, a->dC, mid, P[P_MLP_NORM] + (size_t)l * C,
                         a->rstd2 + l * a->ls_N, N, C, 1);
        // attention: dres is now d(mid)
        matmul_backward(a->datty, G[P_WO] + (size_t)l * C * QD, a->dres, atty, P[P_WO] + (size_t)l * C * QD, N, QD, C, 0);
        AttnBias ab = attn_bias_layer(&a->bias, l, NH, NULL, a->qrel, NULL, T, hd);  // keys: rel_keys_backward
        BiasFn f = layer_bias_fn(g, a, l);
        int fn_pair = a->bias.fn && f.per_query;
        float *diag = a->bias.fn && !f.per_query ? a->bias_diag : NULL;  // a learned bias per distance: its gradient
        float *rowg = ab.qrel ? a->rel_g : NULL;                          // relative keys: theirs
        float *pairg = pe_is(ps->pe, PEF_UNTIED) || fn_pair ? a->pairg : NULL;   // a term per query and key: its (TUPE's over the layers)
        if (fn_pair) memset(a->pairg, 0, n_pair * sizeof(float));
        attention_backward(a->dq, a->dk, a->dv, diag, rowg, pairg, &ab, a->datty, att, q, k, v, B, T, NH, NKV, hd);
        if (diag) bias_fn_backward(&f, diag, B, 1, T);
        if (fn_pair) {
            sum_over_batch(a->pairg, B, n_pair / B);
            bias_fn_backward(&f, a->pairg, 1, T, T);
        }
        if (rowg) rel_keys_backward(g, a, l, &ab, q);
        if (pe_is(ps->pe, PEF_UNTIED))  // through TUPE's query scale
            for (size_t i = 0; i < (size_t)N * QD; i++) a->dq[i] *= TUPE_QSCALE;
        rope_backward(a->dq, B, T, NH, hd, ps, &a->pos, l, ROT_QUERY);
        rope_backward(a->dk, B, T, NKV, hd, ps, &a->pos, l, ROT_KEY);
        float *dq = a->dq, *dk = a->dk;  // gradients of the projections
        if (c->qk_norm) {
            rmsnorm_backward(a->dqraw, G[P_Q_NORM] + (size_t)l * QD, a->dq, a->qraw + l * a->ls_q,
                             P[P_Q_NORM] + (size_t)l * QD, a->rstdq + l * a->ls_N, N, QD, 0);
            rmsnorm_backward(a->dkraw, G[P_K_NORM] + (size_t)l * KD, a->dk, a->kraw + l * a->ls_kv,
                             P[P_K_NORM] + (size_t)l * KD, a->rstdk + l * a->ls_N, N, KD, 0);
            dq = a->dqraw;
            dk = a->dkraw;
        }
        matmul_backward(a->dC, G[P_WQ] + (size_t)l * QD * C, dq, n1, P[P_WQ] + (size_t)l * QD * C, N, C, QD, 0);
        matmul_backward(a->dC, G[P_WK] + (size_t)l * KD * C, dk, n1, P[P_WK] + (size_t)l * KD * C, N, C, KD, 1);
        matmul_backward(a->dC, G[P_WV] + (size_t)l * KD * C, a->dv, n1, P[P_WV] + (size_t)l * KD * C, N, C, KD, 1);
        rmsnorm_backward(a->dres, G[P_ATTN_NORM] + (size_t)l * C, a->dC, x, P[P_ATTN_NORM] + (size_t)l * C,
                         a->rstd1 + l * a->ls_N, N, C, 1);
    }
    encoder_backward(G[P_WTE], a->dres, inputs, N, C, embed_scale(c));
    if (pe_is(ps->pe, PEF_WPE_ADDED)) learned_backward(G[P_WPE], a->dres, &a->pos, B, T, C);
    if (pe_is(ps->pe, PEF_UNTIED)) {
        TupePass tp = tupe_pass(g, a, &a->pos, T, 0);  // the forward's projections again (small: T rows)
        tupe_backward(g, a, &tp);
    }
}

// ----------------------------------------------------------------------------
// optimizer

// sqrt of the sum of squared gradients, in fixed blocks (each in order, then the blocks in
// order): the same bits for any thread count
#define NORM_BLOCK 65536
static float grad_global_norm(const GPT *g) {
    size_t nb = (g->n_params + NORM_BLOCK - 1) / NORM_BLOCK;
    double *part = (double *)xmalloc(nb * sizeof(double)), s = 0.0;
#pragma omp parallel for
    for (size_t b = 0; b < nb; b++) {
        size_t end = (b + 1) * NORM_BLOCK < g->n_params ? (b + 1) * NORM_BLOCK : g->n_params;
        double sb = 0.0;
        for (size_t i = b * NORM_BLOCK; i < end; i++) sb += (double)g->grads_mem[i] * g->grads_mem[i];
        part[b] = sb;
    }
    for (size_t b = 0; b < nb; b++) s += part[b];
    free(part);
    return (float)sqrt(s);
}

#define ADAMW_CHUNK 4096  // elements per call of adamw_array (llmc/vecmath.h)
// AdamW (decoupled weight decay on matrices only) on the gradients times clip_scale (the
// global-norm clip); t is the 1-based step count.
static void adamw_update(GPT *g, float lr, int t, float clip_scale) {
    const Config *c = &g->cfg;
    float bc1 = 1.0f - powf(c->beta1, (float)t), bc2 = 1.0f - powf(c->beta2, (float)t);
#pragma omp parallel
    for (int k = 0; k < NP; k++) {
        AdamWArgs a = {clip_scale, c->beta1, c->beta2, 1.0f - c->beta1, 1.0f - c->beta2, bc1, bc2, lr, c->adam_eps,
                       PARAM_DECAY[k] ? c->weight_decay : 0.0f};
        size_t n = g->shapes[k].numel, chunks = (n + ADAMW_CHUNK - 1) / ADAMW_CHUNK;
#pragma omp for nowait
        for (size_t ch = 0; ch < chunks; ch++) {
            size_t i = ch * ADAMW_CHUNK, m = n - i < ADAMW_CHUNK ? n - i : ADAMW_CHUNK;
            adamw_array(g->params[k] + i, g->grads[k] + i, g->m[k] + i, g->v[k] + i, m, a);
            for (size_t j = 0; param_bounded(k) && j < m; j++)  // the tensor's constraint
                g->params[k][i + j] = param_clamp(k, g->params[k][i + j]);
        }
    }
}

// Forward and backward over `accum` micro-batches of rows (accum,B,T+1) (inputs
// row[0..T-1], targets row[1..T]) into g->grads. Returns the mean loss over the
// micro-batches (with weights (accum,B,T): the weighted sum, the mean over the counted
// targets); *norm gets the global gradient norm.
static float compute_gradients(GPT *g, const int *rows, const float *weights, int accum, const PosStep *ps, float *norm) {
    Acts *a = &g->acts;
    int B = a->B, T = a->T;
    int *inp = (int *)xmalloc((size_t)B * T * sizeof(int)), *tgt = (int *)xmalloc((size_t)B * T * sizeof(int));
    memset(g->grads_mem, 0, g->n_params * sizeof(float));
    double loss = 0.0;
    for (int micro = 0; micro < accum; micro++) {
        for (int b = 0; b < B; b++) {
            const int *row = rows + ((size_t)micro * B + b) * (T + 1);
            memcpy(inp + b * T, row, T * sizeof(int));
            memcpy(tgt + b * T, row + 1, T * sizeof(int));
        }
        PosStep pm = pos_micro(ps, micro, B);  // this micro-batch's sequences of the step
        float mean = gpt_forward(g, a, inp, tgt, &pm);
        const float *w = weights ? weights + (size_t)micro * B * T : NULL;
        if (w)
            for (int i = 0; i < B * T; i++) loss += (double)w[i] * a->losses[i];
        else
            loss += mean / accum;
        gpt_backward(g, a, inp, tgt, w, &pm, 1.0f / accum);
    }
    *norm = grad_global_norm(g);
    free(inp);
    free(tgt);
    return (float)loss;
}

// Clip with the norm compute_gradients gave, then AdamW; t is the 1-based step count.
static void apply_update(GPT *g, float lr, int t, float norm) {
    float clip = g->cfg.grad_clip;  // scale the gradients so their global norm is at most clip (0: off)
    adamw_update(g, lr, t, clip > 0 && norm > clip ? clip / (norm + 1e-6f) : 1.0f);
}

// One optimizer step (the test cases): gradients, clip, AdamW. Returns the mean loss.
static float train_step(GPT *g, const int *rows, int accum, const PosStep *ps, float lr, int t, float *norm) {
    float loss = compute_gradients(g, rows, NULL, accum, ps, norm);
    apply_update(g, lr, t, *norm);
    return loss;
}

// ----------------------------------------------------------------------------
// checkpoints: llmc/checkpoint.h writes and reads the named tensors

static void gpt_checkpoint_save(const GPT *g, const TrainState *st, const char *path) {
    checkpoint_save(&g->cfg, st, path, g->params, g->m_mem ? g->m : NULL, g->m_mem ? g->v : NULL);
}

static void gpt_checkpoint_load(GPT *g, TrainState *st, const char *path, int mode) {
    checkpoint_load(&g->cfg, st, path, g->params, g->m, g->v, mode);
}

// ----------------------------------------------------------------------------
// evaluation (llmc/evaluate.h drives it through an EvalModel): forward-only passes with
// activations that grow linearly in L, and a KV cache for chunks and decoding.

typedef struct {
    GPT *g;
    Acts a, a1;  // a: the current pass, a1: one token at a time
} EvalCtx;

static Acts *eval_acts(EvalCtx *e, Acts *a, int T) {
    if (!a->mem || a->T != T) {
        free(a->mem);
        acts_alloc(a, &e->g->cfg, 1, T, 0);
    }
    return a;
}

static void cpu_losses(void *ctx, const int *tokens, int L, const PosStep *ps, int window, float *losses, float *entropy) {
    EvalCtx *e = (EvalCtx *)ctx;
    Acts *a = eval_acts(e, &e->a, L);
    FwdOpts o = {window, entropy, NULL, 0, NULL};
    gpt_forward_ex(e->g, a, tokens, tokens + 1, ps, &o);
    memcpy(losses, a->losses, L * sizeof(float));
}

static void cpu_losses_chunked(void *ctx, const int *tokens, int L, const PosStep *ps, int window, int chunk,
                               float *losses) {
    EvalCtx *e = (EvalCtx *)ctx;
    KVCache kv;
    kv_alloc(&kv, &e->g->cfg, window + chunk);
    for (int pos = 0; pos < L; pos += chunk) {
        int n = L - pos < chunk ? L - pos : chunk;
        Acts *a = eval_acts(e, &e->a, n);
        FwdOpts o = {0, NULL, &kv, kv.len, NULL};  // this chunk's positions start at the cache size
        gpt_forward_ex(e->g, a, tokens + pos, tokens + pos + 1, ps, &o);
        memcpy(losses + pos, a->losses, n * sizeof(float));
        kv_keep_last(&kv, e->g->cfg.L, window);
    }
    kv_free(&kv);
}

// The next token from one row of logits: argmax at temperature 0, else sampled.
static int pick_token(const float *logits, int V, float temperature, Rng *r) {
    int best = 0;
    for (int v = 1; v < V; v++)
        if (logits[v] > logits[best]) best = v;
    if (temperature <= 0.0f) return best;
    double sum = 0.0, acc = 0.0;
    for (int v = 0; v < V; v++) sum += exp((logits[v] - logits[best]) / temperature);
    double u = rng_f32(r) * sum;
    for (int v = 0; v < V; v++) {
        acc += exp((logits[v] - logits[best]) / temperature);
        if (acc > u) return v;
    }
    return V - 1;
}

// Decodes n_new tokens after prompt (n tokens) with a KV cache (GRU: its state);
// positions keep counting.
// stream: print each new token as it is picked (--generate), or NULL
static void cpu_decode(EvalCtx *e, const int *prompt, int n, int n_new, const PosStep *ps, float temperature, Rng *r,
                       int *out, const Tokenizer *stream) {
    const Config *c = &e->g->cfg;
    int gru = c->arch == ARCH_GRU;
    KVCache kv;
    memset(&kv, 0, sizeof(kv));
    if (!gru) kv_alloc(&kv, c, n + n_new);
    float *state = gru ? (float *)xcalloc((size_t)c->L * c->C, sizeof(float)) : NULL;
    Acts *a = eval_acts(e, &e->a, n);
    FwdOpts o = {0, NULL, gru ? NULL : &kv, 0, state};
    gpt_forward_ex(e->g, a, prompt, NULL, ps, &o);
    int next = pick_token(a->logits + (size_t)(n - 1) * c->Vp, c->V, temperature, r);
    for (int i = 0; i < n_new; i++) {
        out[i] = next;
        if (stream) {
            tokenizer_print(stream, next, stdout);
            fflush(stdout);
        }
        if (i + 1 == n_new) break;
        Acts *a1 = eval_acts(e, &e->a1, 1);
        o.pos0 = kv.len;
        gpt_forward_ex(e->g, a1, &next, NULL, ps, &o);
        next = pick_token(a1->logits, c->V, temperature, r);
    }
    if (!gru) kv_free(&kv);
    free(state);
}

static void cpu_greedy(void *ctx, const int *prompt, int n, int n_new, const PosStep *ps, int *out) {
    cpu_decode((EvalCtx *)ctx, prompt, n, n_new, ps, 0.0f, NULL, out, NULL);
}

static void eval_ctx_free(EvalCtx *e) {
    free(e->a.mem);
    free(e->a1.mem);
}

// Mean loss over the first `batches` (B,T) windows of the validation stream; with a loss
// mask (n_val), the mean over the targets it marks.
static float validation_loss(GPT *g, Acts *a, const int *val, const unsigned char *mask, long n_val, int batches) {
    PosConfig pc = pos_config_of(&g->cfg);
    PosStep ps = pos_inference(&pc, a->T);
    int B = a->B, T = a->T;
    int *inp = (int *)xmalloc((size_t)B * T * sizeof(int)), *tgt = (int *)xmalloc((size_t)B * T * sizeof(int));
    double s = 0.0, counted = 0.0;
    int used = 0;
    for (int k = 0; k < batches; k++) {
        if ((long)(k + 1) * B * T + 1 > n_val) break;
        for (int b = 0; b < B; b++) {
            const int *src = val + ((long)k * B + b) * T;
            memcpy(inp + b * T, src, T * sizeof(int));
            memcpy(tgt + b * T, src + 1, T * sizeof(int));
        }
        float mean = gpt_forward(g, a, inp, tgt, &ps);
        if (!mask) s += mean;
        for (int i = 0; mask && i < B * T; i++) {  // target i is stream token k*B*T + i + 1
            int w = mask[(long)k * B * T + i + 1];
            s += w * (double)a->losses[i];
            counted += w;
        }
        used++;
    }
    free(inp); free(tgt);
    if (mask) return counted > 0 ? (float)(s / counted) : NAN;
    return used ? (float)(s / used) : NAN;
}

// ----------------------------------------------------------------------------
// generation: greedy (temperature 0) or sampled continuation of a prompt, KV-cached;
// positions run past the training window (that is what PosAug is for).

static void generate(GPT *g, const Tokenizer *tok, const char *prompt, int n_new, float temperature, uint64_t seed) {
    int n_prompt = tok->pieces ? 0 : (int)strlen(prompt);  // the byte tokenizer encodes a prompt directly
    if (tok->pieces && prompt[0])
        fprintf(stderr, "note: prompts are encoded only with the byte tokenizer; generating from end-of-text\n");
    int *ctx = (int *)xmalloc((size_t)(n_prompt + 1) * sizeof(int)), *out = (int *)xmalloc(n_new * sizeof(int));
    ctx[0] = tok->eot;
    for (int i = 0; i < n_prompt; i++) ctx[1 + i] = (unsigned char)prompt[i];
    PosConfig pc = pos_config_of(&g->cfg);
    PosStep ps = pos_inference(&pc, n_prompt + 1 + n_new);
    Rng r = rng_make(seed, RNG_SAMPLE);
    EvalCtx e;
    memset(&e, 0, sizeof(e));
    e.g = g;
    fputs(prompt, stdout);
    fflush(stdout);
    cpu_decode(&e, ctx, n_prompt + 1, n_new, &ps, temperature, &r, out, tok);  // prints as it goes
    printf("\n");
    eval_ctx_free(&e);
    free(ctx);
    free(out);
}

// ----------------------------------------------------------------------------
// dump mode (test_gpt compares dumps by tensor name): reads a case file (the input part
// of the PyTorch reference format: config_i, config_f, alphas, tokens, initial weights),
// runs the check pass at alpha config_f[9] and the training steps, writes the names the
// reference uses: logits, loss, grad.*, losses, grad_norms, final.*.

static void dump_case(const char *in_path, const char *out_path) {
    TensorFile tf;
    tf_load(&tf, in_path, TF_KIND_REFERENCE);
    Config c;
    int micro;
    int scheduled = config_from_case(&c, &tf, &micro);
    int B = c.B, T = c.T, steps = c.steps, N = B * T;
    float check_alpha = ((const float *)tf_get(&tf, "config_f", TF_F32, 10))[9];
    const float *alphas = (const float *)tf_get(&tf, "alphas", TF_F32, steps);
    const int *tokens = (const int *)tf_get(&tf, "tokens", TF_I32, (size_t)steps * micro * B * (T + 1));
    GPT g;
    gpt_alloc(&g, &c, 1);
    int present = 0;
    for (int i = 0; i < NP; i++) {
        if (!g.shapes[i].numel) continue;
        memcpy(g.params[i], tf_get(&tf, PARAM_NAMES[i], TF_F32, g.shapes[i].numel), g.shapes[i].numel * sizeof(float));
        present++;
    }
    acts_alloc(&g.acts, &c, B, T, 1);
    PosConfig pc = pos_config_of(&c);
    PosStep ps = case_pos_step(&pc, scheduled, check_alpha, 0);
    int *inp = (int *)xmalloc(N * sizeof(int)), *tgt = (int *)xmalloc(N * sizeof(int));
    for (int b = 0; b < B; b++) {
        memcpy(inp + b * T, tokens + b * (T + 1), T * sizeof(int));
        memcpy(tgt + b * T, tokens + b * (T + 1) + 1, T * sizeof(int));
    }
    memset(g.grads_mem, 0, g.n_params * sizeof(float));
    float loss = gpt_forward(&g, &g.acts, inp, tgt, &ps);
    float *logits = (float *)xmalloc((size_t)N * c.V * sizeof(float));
    for (int i = 0; i < N; i++) memcpy(logits + (size_t)i * c.V, g.acts.logits + (size_t)i * c.Vp, c.V * sizeof(float));
    gpt_backward(&g, &g.acts, inp, tgt, NULL, &ps, 1.0f);
    float *grads = (float *)xmalloc(g.n_params * sizeof(float));
    memcpy(grads, g.grads_mem, g.n_params * sizeof(float));
    float *losses = (float *)xmalloc(steps * sizeof(float)), *norms = (float *)xmalloc(steps * sizeof(float));
    for (int s = 0; s < steps; s++) {
        PosStep st = case_pos_step(&pc, scheduled, alphas[s], s);
        float lr = lr_at_step(s, c.warmup, c.steps, c.lr, c.min_lr);
        losses[s] = train_step(&g, tokens + (size_t)s * micro * B * (T + 1), micro, &st, lr, s + 1, &norms[s]);
    }
    TensorWriter w;
    tw_open(&w, out_path, TF_KIND_DUMP, 4 + 2 * present);
    int lshape[3] = {B, T, c.V};
    tw_add(&w, "logits", TF_F32, 3, lshape, logits);
    tw_add1(&w, "loss", TF_F32, 1, &loss);
    char name[TF_MAX_NAME];
    for (int i = 0, off = 0; i < NP; off += (int)g.shapes[i].numel, i++) {
        if (!g.shapes[i].numel) continue;
        snprintf(name, sizeof(name), "grad.%s", PARAM_NAMES[i]);
        tw_add(&w, name, TF_F32, g.shapes[i].ndim, g.shapes[i].shape, grads + off);
    }
    tw_add1(&w, "losses", TF_F32, steps, losses);
    tw_add1(&w, "grad_norms", TF_F32, steps, norms);
    for (int i = 0; i < NP; i++) {
        if (!g.shapes[i].numel) continue;
        snprintf(name, sizeof(name), "final.%s", PARAM_NAMES[i]);
        tw_add(&w, name, TF_F32, g.shapes[i].ndim, g.shapes[i].shape, g.params[i]);
    }
    tw_close(&w);
    free(inp); free(tgt); free(logits); free(grads); free(losses); free(norms);
    gpt_free(&g);
    tf_free(&tf);
}

static void run_evaluation_cpu(GPT *g, const Config *c, const Tokenizer *tok) {
    EvalCtx e;
    memset(&e, 0, sizeof(e));
    e.g = g;
    EvalModel m = {&e, cpu_losses, cpu_losses_chunked, cpu_greedy};
    run_evaluation(c, &m, tok);
    run_task_evaluation(c, &m);
    eval_set_commit(c->out_dir, c->eval_tag);  // its files, all at once
    eval_ctx_free(&e);
}

// ----------------------------------------------------------------------------
// the memory this run will allocate (llmc/memory.h), computed before allocating it

static MemPlan cpu_memory_plan(const Config *c, int train, int evaluate) {
    Shape sh[NP];
    param_shapes(c, sh);
    double n = 0, largest, total, fl = sizeof(float);
    for (int i = 0; i < NP; i++) n += (double)sh[i].numel;
    Acts a;
    MemPlan p = {"host memory", fl * n * (train ? 4 : 1), file_bytes(c->resume[0] ? c->resume : c->init_from), 0, 0, NULL};
    if (train) {  // activations, the loaded shard (int tokens + raw), the validation stream
        shard_token_counts(c->train_data, &largest, &total);
        int rows = c->B * c->T > c->Vp ? c->B * c->T : c->Vp;  // op(A) rows: tokens, or Vp (the head's gradient)
        p.train = fl * acts_layout(&a, c, c->B, c->T, 1, NULL) + 8 * largest + gemm_buffer_bytes(rows > c->F ? rows : c->F) +
                  gemm_tall_bytes(c->Vp, c->B * c->T, c->C);  // the head's dwte
        shard_token_counts(c->val_data, &largest, &total);
        if (c->val_every) p.train += fl * total;
    }
    double kd = (double)c->NKV * (c->C / c->NH), kv_row = 2 * fl * c->L * kd;  // KV cache bytes per position
    if (evaluate && c->eval_len) {  // one full pass, a chunk with its cache, passkey prompts
        int chunk = c->gain_chunk ? c->gain_chunk : c->gain_window, pk = passkey_longest(c) + 16;  // and the decoded tokens
        if (task_longest(c) > pk) pk = task_longest(c);
        int small = pk > chunk ? pk : chunk;
        shard_token_counts(c->val_data, &largest, &total);
        p.eval = fl * acts_layout(&a, c, 1, c->eval_len, 0, NULL) + fl * acts_layout(&a, c, 1, small, 0, NULL) +
                 kv_row * (c->gain_window + chunk > small ? c->gain_window + chunk : small) + fl * (total + largest) +
                 48.0 * c->eval_len + gemm_buffer_bytes(c->eval_len);
    }
    if (c->generate) {
        p.eval_flag = "--generate";
        int len = (int)strlen(c->prompt) + 1 + c->generate;  // at most MAX_POSITION (validate_config)
        p.eval = fl * acts_layout(&a, c, 1, len, 0, NULL) + kv_row * len + gemm_buffer_bytes(len);
    }
    return p;
}

#ifndef TESTING
// the model for llmc/trainloop.h
static float cpu_gradients(void *g, const int *rows, const float *weights, int accum, const PosStep *ps, float *norm) {
    return compute_gradients((GPT *)g, rows, weights, accum, ps, norm);
}
static void cpu_update(void *g, float lr, int t, float norm) { apply_update((GPT *)g, lr, t, norm); }
static float cpu_val_loss(void *g, const int *val, const unsigned char *mask, long n_val, int batches) {
    return validation_loss((GPT *)g, &((GPT *)g)->acts, val, mask, n_val, batches);
}
static void cpu_save(void *g, const TrainState *st, const char *path) { gpt_checkpoint_save((GPT *)g, st, path); }
static void cpu_init(void *g, uint64_t seed) { gpt_init((GPT *)g, seed); }
static void cpu_load(void *g, TrainState *st, const char *path, int mode) { gpt_checkpoint_load((GPT *)g, st, path, mode); }

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "--dump_case") == 0) {  // test_gpt compares dumps
        if (argc != 4) fail("usage: %s --dump_case CASE_FILE OUT_FILE", argv[0]);
        dump_case(argv[2], argv[3]);
        return 0;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);  // each step's line reaches a pipe (| tee) when it is printed
    Config cfg;
    describe_if_asked(argc, argv);  // --describe: the tables as JSON
    parse_args(&cfg, argc, argv);
#ifdef _OPENMP
    if (cfg.threads > 0) omp_set_num_threads(cfg.threads);
    else if (omp_get_max_threads() > MAX_THREADS)  // OMP_NUM_THREADS, held to --threads' limit
        fail("OMP_NUM_THREADS asks for %d threads, more than %d: lower it, or pass --threads N", omp_get_max_threads(),
             MAX_THREADS);
    int nthreads = omp_get_max_threads();
#else
    int nthreads = 1;
#endif
    Tokenizer tok;
    if (cfg.tokenizer[0]) {
        tokenizer_load(&tok, cfg.tokenizer);
        if (tok.vocab_size > cfg.V) fail("--tokenizer has %d tokens but --vocab_size is %d", tok.vocab_size, cfg.V);
    } else {
        tokenizer_init_bytes(&tok);
    }
    int train = !cfg.eval_only && !(cfg.generate && cfg.resume[0] && cfg.steps == 0);
    TrainState st;
    run_prepare(&cfg, &st, train);
    run_preflight(&cfg, &tok);
    MemPlan plan = cpu_memory_plan(&cfg, train, !cfg.generate);
    memory_check(&plan, host_available_memory(), cfg.max_memory);
    GPT g;
    gpt_alloc(&g, &cfg, train);
    run_weights(&cfg, &st, train, &g, cpu_init, cpu_load);
    if (train || cfg.eval_only) run_folder_claim(&cfg);  // after every refusal; sampling alone writes nothing
    int hd = cfg.C / cfg.NH;
    printf("model %s: V=%d (padded %d) C=%d L=%d NH=%d NKV=%d hd=%d F=%d T=%d | %.2fM params (%.2fM without embedding)\n",
           cfg.model, cfg.V, cfg.Vp, cfg.C, cfg.L, cfg.NH, cfg.NKV, hd, cfg.F, cfg.T, g.n_params / 1e6,
           (g.n_params - g.shapes[P_WTE].numel - g.shapes[P_WPE].numel) / 1e6);
    if (cfg.eval_only) {
        run_evaluation_cpu(&g, &cfg, &tok);
        gpt_free(&g);
        return 0;
    }
    if (train && st.step < cfg.steps) {
        acts_alloc(&g.acts, &cfg, cfg.B, cfg.T, 1);
        char where[32];
        snprintf(where, sizeof(where), "%d thread%s", nthreads, nthreads == 1 ? "" : "s");
        TrainModel m = {&g, cpu_gradients, cpu_update, cpu_val_loss, cpu_save, model_flops_per_token(&cfg), 0.0, NULL};
        int finished = run_training(&cfg, &st, &m, where);
        free(g.acts.mem);  // the evaluation allocates its own
        g.acts.mem = NULL;
        if (!finished) {
            gpt_free(&g);
            return 0;
        }
    }
    if (cfg.generate) {
        generate(&g, &tok, cfg.prompt, cfg.generate, cfg.temperature, (uint64_t)cfg.seed);
    } else {
        run_evaluation_cpu(&g, &cfg, &tok);
    }
    gpt_free(&g);
    return 0;
}
#endif
