// train_gpt.cu: the GPU trainer. The same model, flags, data reader, position hook,
// checkpoints and evaluation as train_gpt_cpu.c (the reference it is tested against);
// cuBLAS for the matmuls, hand-written kernels for the rest, one header per layer in
// llmc/cuda/ (each kernel names the CPU function it mirrors). bf16 activations and matmuls
// with fp32 master weights, fp32 AdamW moments and fp32 gradient accumulation by default
// (./train_gpt); -DENABLE_FP32 builds the all-fp32 ./train_gpt_fp32 for tight checks
// against the CPU.
//
// One training step (train_step), in the order it runs:
//   stage_micro        the host copies a micro-batch's tokens and groups the embeddings'
//                      gradient rows (llmc/cuda/encoder.cuh)
//   gpt_forward        embedding, then per layer: RMSNorm, Q/K/V, RoPE at the step's
//                      positions (THE POSAUG HOOK: rope_cos_sin in llmc/cuda/positions.cuh;
//                      alpha is drawn by pos_schedule_step() in llmc/schedule.h), attention
//                      (with the attention-score hook's bias, llmc/attn_bias.h: ALiBi, a
//                      learned table), output projection, residual, RMSNorm, SwiGLU MLP,
//                      residual; then the final norm
//   gpt_backward       the LM head and the fused classifier (logits, loss and dlogits, all
//                      rows at once or in chunks: CLASSIFIER_VARIANT), then the layers in reverse
//   compute_gradients  the three above per micro-batch, accumulated; the global gradient norm
//   apply_update       clip folded into AdamW; the bf16 copy of the weights
#include "llmc/checkpoint.h"
#include "llmc/config.h"
#include "llmc/dataloader.h"
#include "llmc/evaluate.h"
#include "llmc/memory.h"
#include "llmc/runfolder.h"
#include "llmc/schedule.h"
#include "llmc/tensorfile.h"
#include "llmc/tokenizer.h"
#include "llmc/trainloop.h"
#include <sys/stat.h>

#include "llmc/cuda/cuda_common.cuh"
#include "llmc/cuda/cuda_utils.cuh"
#include "llmc/cuda/matmul.cuh"
#include "llmc/cuda/encoder.cuh"
#include "llmc/cuda/positions.cuh"
#include "llmc/cuda/rmsnorm.cuh"
#include "llmc/cuda/attention.cuh"
#include "llmc/cuda/flash_attention.cuh"
#include "llmc/cuda/attention_eval.cuh"
#include "llmc/cuda/swiglu.cuh"
#include "llmc/cuda/classifier.cuh"
#include "llmc/cuda/gru.cuh"
#include "llmc/cuda/adamw.cuh"

// ----------------------------------------------------------------------------
// activations: the same named views as the CPU's Acts. train = 0: layers share one set of
// buffers and attention keeps no (T,T) matrix; nor does --attention flash, which keeps
// the rows' log-sum-exp instead.

typedef struct {
    int B, T, train;
    int logit_rows;  // the rows of logits kept at once: B*T, or a chunk (classifier_rows)
    size_t ls_C, ls_q, ls_kv, ls_F, ls_N, ls_att;  // per-layer strides (0 when !train)
    void *mem;
    floatX *resid, *n1, *q, *k, *v, *att, *atty, *mid, *n2, *gate, *up, *h, *nf, *logits;
    float *rstd1, *rstd2, *rstdf, *losses;
    float *lse, *dsum;  // --attention flash: (L,B,NH,T) log-sum-exp of the scores; (B,NH,T) backward scratch
    float *dw_part;     // (ceil(N/8), max(C, NH*hd, NKV*hd)): the RMSNorm backward's per-block dw
    float *bias_diag;   // (B,NH,T) a learned bias per distance: the logits' gradient per diagonal
    float *qrel, *rel_g;  // (B,T,NH,NB) one layer's relative-key scores (--pe shaw, tpe), their gradient: training's
                          //   (evaluation's scores: a buffer the forward grows to the pass's keys)
    float *pair, *tupe_D;  // train, a term per query and key (NH,T,T): --pe tupe's untied one (all layers') or a
                           //   learned bias's (one layer's); dX summed over b (for TUPE, and the layers)
    float *dpq, *dpk;      // (T,NH*hd) TUPE's projected positions' gradients
    float *dpn;            // (T,C) TUPE's normalized position rows' gradient
    floatX *dres, *dC, *dq, *dk, *dv, *datty, *datt, *dgate, *dup, *dh;  // backward scratch, one layer
    floatX *qraw, *kraw, *dqraw, *dkraw;  // --qk_norm: projections before the norm, their gradients
    float *rstdq, *rstdk;
    // --arch gru (as the CPU's): resid (L+1,T,B,C) time-major, the blocks' views empty
    floatX *gates, *ghn, *gh, *top;  // (L,T,B,3C), (L,T,B,C), (B,3C), (B,T,C)
    floatX *dgi, *dgh, *dhx;         // (T,B,3C), (T,B,3C), (T,B,C)
    float *dcarry;                   // (B,C)
    int *inputs, *targets;  // (B,T); with train, the embeddings' scatters follow (acts_ints)
    int *sc_wte, *sc_wpe;   // (SCATTER_INTS(N)) dwte's rows by token, dwpe's by position (--pe learned)
    PassPositions pos;      // the last forward's positions (uploaded; the backward reads their strides)
    BiasPass bias;          // the last forward's attention-score hook, its pointers on the device
} Acts;

// the ints of a (B,T) batch, in this order: inputs, targets, and with train sc_wte, sc_wpe
static size_t acts_ints(size_t N, int train) { return 2 * N + (train ? 2 * SCATTER_INTS(N) : 0); }

static size_t align64(size_t n) { return (n + 63) / 64 * 64; }

// Lays out the views of a (B,T) batch in mem (64-byte aligned) and returns the bytes they
// take (mem NULL: only counts, for the memory estimate).
static size_t acts_layout(Acts *a, const Config *c, int B, int T, int train, char *mem) {
    int hd = c->C / c->NH, L = c->L;
    size_t N = (size_t)B * T, C = c->C, QD = (size_t)c->NH * hd, KD = (size_t)c->NKV * hd, F = c->F;
    size_t nl = train ? L : 1, qk = c->qk_norm, tq = train && qk;
    size_t gru = c->arch == ARCH_GRU, tr = !gru, gt = gru && train;  // tr: transformer views, gru/gt: GRU views
    size_t flash = tr * train * (c->attention == ATTN_FLASH);  // flash keeps lse (B,NH,T), not att (B,NH,T,T)
    size_t att = tr * !flash * B * c->NH * T * T;
    size_t pq = pe_bias_per_query(c->pe), tb = tr && train && pe_bias_fn(c->pe) && !pq;  // a learned bias per distance
    size_t rk = tr && train && pe_bias_keys(c->pe) ? (size_t)pe_bias_buckets(c->pe, rel_shape_of(c), T) : 0;  // relative keys
    size_t tu = tr && train && pe_is(c->pe, PEF_UNTIED);  // TUPE's untied positions
    size_t tt = tu || (tr && train && pq);        // a term per query and key: TUPE's, or a learned bias's
    memset(a, 0, sizeof(*a));
    a->B = B; a->T = T; a->train = train;
    a->logit_rows = classifier_rows(CLASSIFIER_VARIANT, (int)N);
    a->ls_C = train ? N * C : 0;
    a->ls_q = train ? N * QD : 0;
    a->ls_kv = train ? N * KD : 0;
    a->ls_F = train ? N * F : 0;
    a->ls_N = train ? N : 0;
    a->ls_att = train ? att : 0;
    size_t widest = C > QD ? (C > KD ? C : KD) : (QD > KD ? QD : KD);
    // one row per view: the view, its elements (0: this run has none), the element's size
#define VIEW(view, n) {(void **)&a->view, (size_t)(n), sizeof(*a->view)}
    struct { void **view; size_t n, elem; } views[] = {
        VIEW(rstd1, tr * nl * N), VIEW(rstd2, tr * nl * N), VIEW(rstdf, N), VIEW(losses, N),
        VIEW(rstdq, qk * nl * N), VIEW(rstdk, qk * nl * N), VIEW(dcarry, gt * B * C),
        VIEW(lse, flash * nl * N * c->NH), VIEW(dsum, flash * N * c->NH), VIEW(dw_part, train * (N + 7) / 8 * widest),
        VIEW(bias_diag, tb * N * c->NH), VIEW(qrel, rk * N * c->NH), VIEW(rel_g, rk * N * c->NH),
        VIEW(pair, tt * c->NH * T * T), VIEW(tupe_D, tt * c->NH * T * T), VIEW(dpq, tu * T * QD), VIEW(dpk, tu * T * QD),
        VIEW(dpn, tu * T * C),
        VIEW(inputs, acts_ints(N, train)),  // then targets and the scatters, in one upload
        // the forward's, per layer when training
        VIEW(resid, (train ? L + 1 : 1) * N * C), VIEW(n1, tr * nl * N * C), VIEW(q, tr * nl * N * QD),
        VIEW(k, tr * nl * N * KD), VIEW(v, tr * nl * N * KD), VIEW(att, train ? nl * att : 0),
        VIEW(atty, tr * nl * N * QD), VIEW(mid, tr * nl * N * C), VIEW(n2, tr * nl * N * C),
        VIEW(gate, tr * nl * N * F), VIEW(up, tr * nl * N * F), VIEW(h, tr * nl * N * F), VIEW(nf, N * C),
        VIEW(logits, (size_t)a->logit_rows * c->Vp),
        // the backward's scratch, one layer
        VIEW(dres, train * N * C), VIEW(dC, train * N * C), VIEW(dq, tr * train * N * QD),
        VIEW(dk, tr * train * N * KD), VIEW(dv, tr * train * N * KD), VIEW(datty, tr * train * N * QD),
        VIEW(datt, train ? att : 0), VIEW(dgate, tr * train * N * F), VIEW(dup, tr * train * N * F),
        VIEW(dh, tr * train * N * F),
        // --qk_norm
        VIEW(qraw, qk * nl * N * QD), VIEW(kraw, qk * nl * N * KD), VIEW(dqraw, tq * N * QD), VIEW(dkraw, tq * N * KD),
        // --arch gru
        VIEW(gates, gru * nl * N * 3 * C), VIEW(ghn, gru * nl * N * C), VIEW(gh, gru * B * 3 * C), VIEW(top, gru * N * C),
        VIEW(dgi, gt * N * 3 * C), VIEW(dgh, gt * N * 3 * C), VIEW(dhx, gt * N * C)};
#undef VIEW
    size_t off = 0;
    a->mem = mem;
    for (size_t i = 0; i < sizeof(views) / sizeof(views[0]); i++) {
        *views[i].view = views[i].n && mem ? mem + off : NULL;
        off += align64(views[i].n * views[i].elem);
    }
    a->targets = a->inputs ? a->inputs + N : NULL;
    a->sc_wte = a->inputs && train ? a->inputs + 2 * N : NULL;
    a->sc_wpe = a->inputs && train ? a->inputs + 2 * N + SCATTER_INTS(N) : NULL;
    return off;
}

static void acts_alloc(Acts *a, const Config *c, int B, int T, int train) {
    size_t n = acts_layout(a, c, B, T, train, NULL);
    acts_layout(a, c, B, T, train, (char *)dmalloc(n));
}

// ----------------------------------------------------------------------------
// the model

typedef struct {
    Config cfg;
    int hd;
    Shape shapes[NP];
    size_t n_params, offsets[NP];
    float *params, *grads, *m, *v;  // fp32 master weights, gradients, moments (device)
    floatX *params_x;               // compute copy (aliases params in the FP32 build)
    float *norm_partial;
    float *loss_sum;                // (1) device: the step's mean loss, summed micro-batch by micro-batch
    int *stage;                     // pinned host: the step's ints (acts_ints), uploaded asynchronously
    float *stage_w, *d_weights;     // loss masks: the step's target weights (pinned), a micro-batch's (device)
    size_t stage_cap, stage_w_cap;
    Acts acts;
} GPT;

// host copies of the NP parameter views (checkpoints, init, dumps)
typedef struct {
    float *mem, *views[NP];
} HostParams;

static void host_params(HostParams *h, const GPT *g) {
    h->mem = (float *)xmalloc(g->n_params * sizeof(float));
    for (int i = 0; i < NP; i++) h->views[i] = h->mem + g->offsets[i];
}

static floatX *P(const GPT *g, int i) { return g->params_x + g->offsets[i]; }
static float *G(const GPT *g, int i) { return g->grads + g->offsets[i]; }

static void gpt_alloc(GPT *g, const Config *c, int train) {
    memset(g, 0, sizeof(*g));
    g->cfg = *c;
    g->hd = c->C / c->NH;
    if (c->arch == ARCH_TRANSFORMER && g->hd > ATT_MAX_HD)
        fail("train_gpt's evaluation attention takes head sizes up to %d; this model's is %d", ATT_MAX_HD, g->hd);
    param_shapes(c, g->shapes);
    for (int i = 0; i < NP; i++) {
        g->offsets[i] = g->n_params;
        g->n_params += g->shapes[i].numel;
    }
    size_t bytes = g->n_params * sizeof(float);
    g->params = (float *)dmalloc(bytes);
#ifdef ENABLE_FP32
    g->params_x = g->params;
#else
    g->params_x = (floatX *)dmalloc(g->n_params * sizeof(floatX));
#endif
    if (train) {
        g->grads = (float *)dmalloc(bytes);
        g->m = (float *)dmalloc(bytes);
        g->v = (float *)dmalloc(bytes);
        cudaCheck(cudaMemset(g->m, 0, bytes));
        cudaCheck(cudaMemset(g->v, 0, bytes));
        g->norm_partial = (float *)dmalloc(NORM_BLOCKS * sizeof(float));
        g->loss_sum = (float *)dmalloc(sizeof(float));
    }
}

static void gpt_free(GPT *g) {
    cudaFree(g->params);
#ifndef ENABLE_FP32
    cudaFree(g->params_x);
#endif
    cudaFree(g->grads);
    cudaFree(g->m);
    cudaFree(g->v);
    cudaFree(g->norm_partial);
    cudaFree(g->loss_sum);
    cudaFreeHost(g->stage);
    cudaFreeHost(g->stage_w);
    cudaFree(g->d_weights);
    cudaFree(g->acts.mem);
}

// host fp32 weights (NP views) -> device master weights and compute copy
static void gpt_upload(GPT *g, float *const *host) {
    for (int i = 0; i < NP; i++)
        if (g->shapes[i].numel)
            cudaCheck(cudaMemcpy(g->params + g->offsets[i], host[i], g->shapes[i].numel * sizeof(float), cudaMemcpyHostToDevice));
#ifndef ENABLE_FP32
    copy_to_x_kernel<<<ceil_div(g->n_params, 256), 256>>>(g->params_x, g->params, g->n_params);
    cudaCheck(cudaGetLastError());
#endif
}

// The CPU's init (llmc/checkpoint.h), drawn on the host.
static void gpt_init(GPT *g, uint64_t seed) {
    HostParams h;
    host_params(&h, g);
    param_init(&g->cfg, h.views, seed);
    gpt_upload(g, h.views);
    free(h.mem);
}

#define LAUNCH_ROWS(kernel, rows, smem, ...)                                  \
    do {                                                                      \
        kernel<<<ceil_div((rows), 8), 256, (smem)>>>(__VA_ARGS__);            \
        cudaCheck(cudaGetLastError());                                        \
    } while (0)
#define LAUNCH_ELEMS(kernel, n, ...)                                          \
    do {                                                                      \
        kernel<<<ceil_div((n), 256), 256>>>(__VA_ARGS__);                      \
        cudaCheck(cudaGetLastError());                                        \
    } while (0)

// A device KV cache for evaluation and generation (B = 1): keys (after RoPE) and values
// of every layer. Mirrors KVCache.
typedef struct {
    int cap, len, KD, L;
    floatX *k, *v, *tmp;  // (L, cap, KD); tmp (cap, KD) for moves
} KVCache;

static void kv_alloc(KVCache *kv, const Config *c, int cap) {
    kv->cap = cap;
    kv->len = 0;
    kv->L = c->L;
    kv->KD = c->NKV * (c->C / c->NH);
    kv->k = (floatX *)dmalloc((size_t)c->L * cap * kv->KD * sizeof(floatX));
    kv->v = (floatX *)dmalloc((size_t)c->L * cap * kv->KD * sizeof(floatX));
    kv->tmp = (floatX *)dmalloc((size_t)cap * kv->KD * sizeof(floatX));
}

static void kv_free(KVCache *kv) {
    cudaFree(kv->k);
    cudaFree(kv->v);
    cudaFree(kv->tmp);
}

// Keep only the last `keep` entries (their rotations unchanged).    mirrors kv_keep_last
static void kv_keep_last(KVCache *kv, int keep) {
    if (kv->len <= keep) return;
    size_t drop = (size_t)(kv->len - keep) * kv->KD, bytes = (size_t)keep * kv->KD * sizeof(floatX);
    for (int l = 0; l < kv->L; l++) {
        floatX *bufs[2] = {kv->k + (size_t)l * kv->cap * kv->KD, kv->v + (size_t)l * kv->cap * kv->KD};
        for (int i = 0; i < 2; i++) {
            cudaCheck(cudaMemcpy(kv->tmp, bufs[i] + drop, bytes, cudaMemcpyDeviceToDevice));
            cudaCheck(cudaMemcpy(bufs[i], kv->tmp, bytes, cudaMemcpyDeviceToDevice));
        }
    }
    kv->len = keep;
}

// Options of a forward-only pass (acts with train = 0).              mirrors FwdOpts
typedef struct {
    int window;      // > 0: each query sees only the last `window` keys
    float *entropy;  // device (B,NH,T): each head's share of the mean attention entropy is added
    KVCache *kv;     // inputs continue the cached sequence at positions pos0 + t
    int pos0;
    floatX *state;   // --arch gru, device (L,B,C), when given: the state to continue from, updated
} FwdOpts;

// The head: final norm of xL (B,T,C), and with with_loss the per-position losses (the
// logits a->logit_rows rows at a time). Without, the logits wait for head_logits or for
// head_backward, which computes them itself.                  mirrors head_forward
static void head_forward(GPT *g, Acts *a, const floatX *xL, int with_loss) {
    const Config *c = &g->cfg;
    int N = a->B * a->T;
    LAUNCH_ROWS(rmsnorm_forward_kernel, N, 0, a->nf, a->rstdf, xL, P(g, P_FINAL_NORM), N, c->C, c->rms_eps);
    if (with_loss)
        classifier_forward(a->losses, a->logits, a->nf, P(g, P_WTE), a->targets, N, c->C, c->V, c->Vp, a->logit_rows);
}

// The logits (n,Vp) of rows row0.. of the last forward into a->logits (n <= a->logit_rows)
static void head_logits(GPT *g, Acts *a, int row0, int n) {
    const Config *c = &g->cfg;
    matmul_forward(a->logits, a->nf + (size_t)row0 * c->C, P(g, P_WTE), n, c->C, c->Vp);
}

// Its backward: the logits, losses and dlogits, a->logit_rows rows at a time (the forward
// keeps none), then a->dres = d xL. Each target's loss weighs dloss / N, or weights[i]
// (device) when given.                                        mirrors head_backward
static void head_backward(GPT *g, Acts *a, const floatX *xL, const float *weights, float dloss) {
    const Config *c = &g->cfg;
    int N = a->B * a->T;
    classifier_backward(a->dC, G(g, P_WTE), a->losses, a->logits, a->nf, P(g, P_WTE), a->targets, weights, N, c->C,
                        c->V, c->Vp, dloss / N, a->logit_rows);
    rmsnorm_backward(a->dres, G(g, P_FINAL_NORM), a->dw_part, a->dC, xL, P(g, P_FINAL_NORM), a->rstdf, N, c->C, 0);
}

// ----------------------------------------------------------------------------
// the GRU model (--arch gru)                                  mirrors gru_forward, gru_backward

static void gru_forward(GPT *g, Acts *a, int with_loss, floatX *state) {
    const Config *c = &g->cfg;
    int B = a->B, T = a->T, C = c->C, N = B * T;
    size_t BC = (size_t)B * C, G3 = 3 * (size_t)C, lsG = a->train ? (size_t)N * G3 : 0, CC = G3 * C;
    LAUNCH_ELEMS(encoder_forward_kernel, (size_t)N * C, a->top, a->inputs, P(g, P_WTE), N, C, embed_scale(c));
    LAUNCH_ELEMS(transpose_bt_kernel, (size_t)N * C, a->resid, a->top, B, T, C, 0);
    for (int l = 0; l < c->L; l++) {
        floatX *x = a->resid + l * a->ls_C, *h = a->resid + (a->train ? (l + 1) * a->ls_C : 0);  // eval: in place
        floatX *gates = a->gates + l * lsG, *ghn = a->ghn + l * a->ls_C, *h0 = state ? state + l * BC : NULL;
        const floatX *w_hh = P(g, P_GRU_W_HH) + l * CC, *b_ih = P(g, P_GRU_B_IH) + l * G3, *b_hh = P(g, P_GRU_B_HH) + l * G3;
        matmul_forward(gates, x, P(g, P_GRU_W_IH) + l * CC, N, C, 3 * C);  // every step's input projection
        for (int t = 0; t < T; t++) {
            const floatX *hp = t ? h + (t - 1) * BC : h0;
            if (hp) matmul_forward(a->gh, hp, w_hh, B, C, 3 * C);
            LAUNCH_ELEMS(gru_step_forward_kernel, BC, h + t * BC, gates + t * B * G3, ghn + t * BC, hp ? a->gh : NULL, hp,
                         b_ih, b_hh, B, C);
        }
        if (h0) cudaCheck(cudaMemcpy(h0, h + (T - 1) * BC, BC * sizeof(floatX), cudaMemcpyDeviceToDevice));
    }
    LAUNCH_ELEMS(transpose_bt_kernel, (size_t)N * C, a->top, a->resid + (a->train ? c->L * a->ls_C : 0), B, T, C, 1);
    head_forward(g, a, a->top, with_loss);
}

static void gru_backward(GPT *g, Acts *a, const float *weights, float dloss) {
    const Config *c = &g->cfg;
    int B = a->B, T = a->T, C = c->C, N = B * T;
    size_t BC = (size_t)B * C, G3 = 3 * (size_t)C, lsG = (size_t)N * G3, CC = G3 * C;
    head_backward(g, a, a->top, weights, dloss);
    floatX *dout = a->dhx, *dx = a->dC;  // d(layer output), d(layer input): swapped per layer
    LAUNCH_ELEMS(transpose_bt_kernel, (size_t)N * C, dout, a->dres, B, T, C, 0);
    for (int l = c->L - 1; l >= 0; l--) {
        floatX *x = a->resid + l * a->ls_C, *h = a->resid + (l + 1) * a->ls_C;
        floatX *gates = a->gates + l * lsG, *ghn = a->ghn + l * a->ls_C;
        const floatX *w_hh = P(g, P_GRU_W_HH) + l * CC;
        cudaCheck(cudaMemset(a->dcarry, 0, BC * sizeof(float)));
        for (int t = T - 1; t >= 0; t--) {
            LAUNCH_ELEMS(gru_step_backward_kernel, BC, a->dgi + t * B * G3, a->dgh + t * B * G3, a->dcarry, dout + t * BC,
                         gates + t * B * G3, ghn + t * BC, t ? h + (t - 1) * BC : NULL, B, C);
            if (t) matmul_dinp_f32(a->dcarry, a->dgh + t * B * G3, w_hh, B, C, 3 * C);
        }
        if (T > 1) matmul_dweight(G(g, P_GRU_W_HH) + l * CC, a->dgh + B * G3, h, (T - 1) * B, C, 3 * C);
        matmul_backward(dx, G(g, P_GRU_W_IH) + l * CC, a->dgi, x, P(g, P_GRU_W_IH) + l * CC, N, C, 3 * C, 0);
        LAUNCH_ELEMS(column_sum_kernel, G3, G(g, P_GRU_B_IH) + l * G3, a->dgi, (size_t)N, 3 * C);
        LAUNCH_ELEMS(column_sum_kernel, G3, G(g, P_GRU_B_HH) + l * G3, a->dgh, (size_t)N, 3 * C);
        floatX *swap = dout;
        dout = dx;
        dx = swap;
    }
    LAUNCH_ELEMS(transpose_bt_kernel, (size_t)N * C, a->dres, dout, B, T, C, 1);  // d(embeddings)
    scatter_add_rows(G(g, P_WTE), a->dres, a->sc_wte, N, C, embed_scale(c));
}

// ----------------------------------------------------------------------------
// the transformer

// Layer l's attention in a forward-only pass: q (B,T,NH*hd), k, v (B,T,NKV*hd) of this
// pass; with a KV cache (B = 1) they are appended first and the queries attend over the
// whole cache. y (B,T,NH*hd).                             mirrors attention_forward_infer
static void attention_forward_infer(GPT *g, Acts *a, int l, floatX *y, const floatX *q, const floatX *k,
                                    const floatX *v, AttnBias ab, const FwdOpts *o) {
    const Config *c = &g->cfg;
    int B = a->B, T = a->T, KD = c->NKV * g->hd;
    KVCache *kv = o ? o->kv : NULL;
    const floatX *keys = k, *vals = v;
    int Tk = T, q_off = 0;
    if (kv) {  // append, then attend over the whole cache
        floatX *kl = kv->k + (size_t)l * kv->cap * KD, *vl = kv->v + (size_t)l * kv->cap * KD;
        cudaCheck(cudaMemcpy(kl + (size_t)kv->len * KD, k, (size_t)T * KD * sizeof(floatX), cudaMemcpyDeviceToDevice));
        cudaCheck(cudaMemcpy(vl + (size_t)kv->len * KD, v, (size_t)T * KD * sizeof(floatX), cudaMemcpyDeviceToDevice));
        keys = kl;
        vals = vl;
        Tk = kv->len + T;
        q_off = kv->len;
    }
    attention_forward_online(y, q, keys, vals, B, T, Tk, q_off, c->NH, c->NKV, g->hd, o ? o->window : 0,
                             o ? o->entropy : NULL, 1.0f / ((float)B * c->NH * c->L), ab);
}

// Layer l's fp32 relative keys (NB,hd) on the device in the last forward's pass (a->bias):
// Shaw's rows of rel_key, or T-PE's computed by its function (into a buffer valid until the
// next call); NULL without.                                     mirrors layer_rel_keys
static const float *layer_rel_keys(const GPT *g, const Acts *a, int l) {
    static float *rk;
    static size_t cap;
    const BiasPass *bp = &a->bias;
    int hd = g->hd;
    const float *p = g->params;
    if (bp->kind == BIAS_KEY) return p + g->offsets[P_REL_KEY] + (size_t)l * bp->NB * hd;
    if (bp->kind != BIAS_KEY_FN) return NULL;
    rk = (float *)device_grow(rk, &cap, (size_t)bp->NB * hd * sizeof(float));
    tpe_keys(rk, bp->tpe_u + (size_t)l * bp->bucket_stride, p + g->offsets[P_TPE_W1] + l * TPE_HIDDEN,
             p + g->offsets[P_TPE_B1] + l * TPE_HIDDEN, p + g->offsets[P_TPE_W2] + (size_t)l * hd * TPE_HIDDEN, bp->NB, hd);
    return rk;
}

// A learned bias (llmc/attn_bias.h's BIAS_FN_TABLE), layer l of the last forward's pass
// (a->bias): its fp32 tensors' slices on the device, and their gradients' when training.
//                                                                 mirrors layer_bias_fn
static BiasFn layer_bias_fn(const GPT *g, const Acts *a, int l) {
    const float *w[NP];
    float *dw[NP];
    for (int i = 0; i < NP; i++) {
        w[i] = g->params + g->offsets[i];
        dw[i] = g->grads ? g->grads + g->offsets[i] : NULL;
    }
    return bias_fn_layer(&a->bias, l, &g->cfg, g->shapes, w, a->train && g->grads ? dw : NULL);
}

// Layer l's attention-score hook on the device: a learned bias's term per distance (with
// `term`: into a buffer valid until the next call), the layer's relative keys and their
// scores (a->qrel, computed by its forward).
static AttnBias layer_attn_bias(const GPT *g, const Acts *a, int l, const float *rkeys, int term) {
    static float *buf;
    static size_t cap;
    const float *t = NULL;
    if (term && a->bias.fn && !pe_bias_per_query(a->bias.pe)) {
        BiasFn f = layer_bias_fn(g, a, l);
        buf = (float *)device_grow(buf, &cap, (size_t)f.NH * a->bias.n_dist * sizeof(float));
        bias_fn_fill(buf, &f, 1, a->bias.n_dist, 0);
        t = buf;
    }
    return attn_bias_layer(&a->bias, l, g->cfg.NH, t, a->qrel, rkeys, a->T, g->hd);
}

// A learned bias that reads the query's position: layer l's term (NH, T, n) of the pass's
// queries at q_offset + t over its n keys, into a->pair (training) or a buffer valid until the
// next call (evaluation).                      mirrors the pair of a learned bias in gpt_forward_ex
static const float *layer_bias_pair(const GPT *g, const Acts *a, int l, int n, int q_offset) {
    static float *buf;
    static size_t cap;
    BiasFn f = layer_bias_fn(g, a, l);
    float *pair = a->pair;
    if (!a->train) pair = buf = (float *)device_grow(buf, &cap, (size_t)f.NH * a->T * n * sizeof(float));
    bias_fn_fill(pair, &f, a->T, n, q_offset);
    return pair;
}

// The relative keys' backward after the naive attention's (a->datt holding dS): dq += ...,
// and the gradient of rel_key (Shaw) or of T-PE's function (through the keys').
//                                                            mirrors rel_keys_backward
static void rel_keys_backward(GPT *g, Acts *a, int l, const AttnBias *ab, const floatX *q) {
    static float *drk;
    static size_t cap;
    int hd = g->hd, NB = ab->NB;
    const float *rk = layer_rel_keys(g, a, l);
    if (a->bias.kind == BIAS_KEY) {
        rel_key_backward(a->dq, G(g, P_REL_KEY) + (size_t)l * NB * hd, a->rel_g, a->datt, q, rk, ab, a->B, a->T, g->cfg.NH, hd);
        return;
    }
    drk = (float *)device_grow(drk, &cap, (size_t)NB * hd * sizeof(float));
    cudaCheck(cudaMemset(drk, 0, (size_t)NB * hd * sizeof(float)));
    rel_key_backward(a->dq, drk, a->rel_g, a->datt, q, rk, ab, a->B, a->T, g->cfg.NH, hd);
    size_t lh = (size_t)l * TPE_HIDDEN, lw = (size_t)l * hd * TPE_HIDDEN;
    const float *p = g->params;
    tpe_backward(G(g, P_TPE_W1) + lh, G(g, P_TPE_B1) + lh, G(g, P_TPE_W2) + lw, drk, a->bias.tpe_u + (size_t)l * a->bias.bucket_stride,
                 p + g->offsets[P_TPE_W1] + lh, p + g->offsets[P_TPE_B1] + lh, p + g->offsets[P_TPE_W2] + lw, NB, hd);
}

// TUPE's untied positions in a pass (--pe tupe): the projected positions pq, pk (n, NH*hd)
// of positions 0..n-1 (from the normalized rows p (n, C), their means and 1/std mr (n, 2))
// and their term pair (NH, T, n) for the pass's queries at q_offset + t, on the device (valid
// until the next tupe_pass).                                      mirrors tupe_pass
typedef struct {
    float *pq, *pk, *p, *mr, *pair;
} TupePass;

static TupeWeights tupe_weights(const GPT *g) {
    const float *p = g->params;
    TupeWeights w = {p + g->offsets[P_WPE], p + g->offsets[P_TUPE_LN_W], p + g->offsets[P_TUPE_LN_B],
                     p + g->offsets[P_TUPE_UQ], p + g->offsets[P_TUPE_UK], p + g->offsets[P_TUPE_BQ]};
    return w;
}

static TupePass tupe_pass(GPT *g, Acts *a, const PassPositions *pp, int n, int q_offset) {
    static float *buf, *pair_eval;
    static size_t cap, pair_cap;
    const Config *c = &g->cfg;
    int C = c->C, QD = c->NH * g->hd, rows = g->shapes[P_WPE].shape[0];
    tupe_positions_check(pp, a->B, rows, n);
    buf = (float *)device_grow(buf, &cap, (size_t)n * (2 * QD + C + 2) * sizeof(float));
    TupePass tp = {buf, buf + (size_t)n * QD, buf + 2 * (size_t)n * QD, buf + (size_t)n * (2 * QD + C), a->pair};
    tupe_project(tp.pq, tp.pk, tp.p, tp.mr, tupe_weights(g), n, C, QD);
    if (!a->train) {
        pair_eval = (float *)device_grow(pair_eval, &pair_cap, (size_t)c->NH * a->T * n * sizeof(float));
        tp.pair = pair_eval;
    }
    tupe_pair(tp.pair, tp.pq, tp.pk, c->NH, a->T, n, q_offset, g->hd);
    return tp;
}

// Forward over a->inputs (B,T) on the device; per-position losses land in a->losses when
// with_loss. Mirrors gpt_forward.
static void gpt_forward(GPT *g, Acts *a, const PosStep *ps, int with_loss, const FwdOpts *o) {
    const Config *c = &g->cfg;
    if (c->arch == ARCH_GRU) {
        gru_forward(g, a, with_loss, o ? o->state : NULL);
        return;
    }
    int B = a->B, T = a->T, C = c->C, NH = c->NH, NKV = c->NKV, hd = g->hd, F = c->F;
    int N = B * T, QD = NH * hd, KD = NKV * hd;
    size_t NC = (size_t)N * C, NF = (size_t)N * F;
    if (o && o->kv && (B != 1 || o->kv->len + T > o->kv->cap))  // checked before anything is written
        fail("internal: a KV cache of %d entries (batch 1) cannot take %d x %d more", o->kv->cap, B, T);
    a->pos = pos_pass(ps, c->L, B, o && o->kv ? o->pos0 : 0, T);  // this pass's positions p[l][b][t]
    const PassPositions *pp = &a->pos;
    upload_positions(pp);  // the backward reuses them
    BiasPass bp = attn_bias_pass(ps, c->L, NH, o && o->kv ? o->kv->len + T : T);
    a->bias = upload_attn_bias(&bp);  // its attention-score hook
    if (!a->train && bp.kind != BIAS_NONE && bp.NB) {  // the relative keys' scores
        static float *qrel_eval;
        static size_t cap;
        qrel_eval = (float *)device_grow(qrel_eval, &cap, (size_t)N * NH * bp.NB * sizeof(float));
        a->qrel = qrel_eval;
    }
    LAUNCH_ELEMS(encoder_forward_kernel, NC, a->resid, a->inputs, P(g, P_WTE), N, C, embed_scale(c));
    if (pe_sinusoidal(ps->pe))
        LAUNCH_ELEMS(sinusoidal_kernel, (size_t)N * (C / 2), a->resid, B, T, C, d_pos_layer(pp, 0), pp->seq_stride,
                     sinusoidal_freqs(C, ps->ape_scale));
    if (pe_is(ps->pe, PEF_WPE_ADDED)) {
        if (!a->train) learned_rows_check(pp, B, g->shapes[P_WPE].shape[0]);  // training's: stage_micro
        LAUNCH_ELEMS(learned_forward_kernel, NC, a->resid, P(g, P_WPE), B, T, C, d_pos_layer(pp, 0), pp->seq_stride);
    }
    TupePass tp = {NULL, NULL, NULL, NULL, NULL};
    if (pe_is(ps->pe, PEF_UNTIED)) {
        if (a->train && c->attention == ATTN_FLASH)
            fail("--attention flash does not take --pe tupe's untied positions yet: use --attention naive");
        tp = tupe_pass(g, a, pp, o && o->kv ? o->kv->len + T : T, o && o->kv ? o->kv->len : 0);
    }
    for (int l = 0; l < c->L; l++) {
        floatX *x = a->resid + l * a->ls_C, *xn = a->resid + (a->train ? (l + 1) * a->ls_C : 0);
        floatX *n1 = a->n1 + l * a->ls_C, *q = a->q + l * a->ls_q, *k = a->k + l * a->ls_kv, *v = a->v + l * a->ls_kv;
        floatX *atty = a->atty + l * a->ls_q, *mid = a->mid + l * a->ls_C, *n2 = a->n2 + l * a->ls_C;
        floatX *gate = a->gate + l * a->ls_F, *up = a->up + l * a->ls_F, *h = a->h + l * a->ls_F;
        LAUNCH_ROWS(rmsnorm_forward_kernel, N, 0, n1, a->rstd1 + l * a->ls_N, x, P(g, P_ATTN_NORM) + (size_t)l * C, N, C,
                    c->rms_eps);
        floatX *qraw = c->qk_norm ? a->qraw + l * a->ls_q : q, *kraw = c->qk_norm ? a->kraw + l * a->ls_kv : k;
        matmul_forward(qraw, n1, P(g, P_WQ) + (size_t)l * QD * C, N, C, QD);
        matmul_forward(kraw, n1, P(g, P_WK) + (size_t)l * KD * C, N, C, KD);
        if (c->qk_norm) {  // RMSNorm over the whole projection of each token, before RoPE
            LAUNCH_ROWS(rmsnorm_forward_kernel, N, 0, q, a->rstdq + l * a->ls_N, qraw, P(g, P_Q_NORM) + (size_t)l * QD, N,
                        QD, c->rms_eps);
            LAUNCH_ROWS(rmsnorm_forward_kernel, N, 0, k, a->rstdk + l * a->ls_N, kraw, P(g, P_K_NORM) + (size_t)l * KD, N,
                        KD, c->rms_eps);
        }
        matmul_forward(v, n1, P(g, P_WV) + (size_t)l * KD * C, N, C, KD);
        rope(q, B, T, NH, hd, ps, pp, l, ROT_QUERY, 1.0f);
        rope(k, B, T, NKV, hd, ps, pp, l, ROT_KEY, 1.0f);
        if (tp.pq) scale_array(q, TUPE_QSCALE, (size_t)N * QD);  // TUPE: q . k / sqrt(2 hd)
        const float *rk = layer_rel_keys(g, a, l);  // relative keys: every query's scores first
        if (rk) rel_key_scores(a->qrel, q, rk, (size_t)N * NH, hd, a->bias.NB);
        AttnBias ab = layer_attn_bias(g, a, l, rk, 1);
        ab.pair = tp.pair;
        if (a->bias.fn && pe_bias_per_query(a->bias.pe)) {
            if (a->train && c->attention == ATTN_FLASH)
                fail("--attention flash does not take --pe %s's bias of each query and key yet: use --attention naive",
                     PE_NAMES[ps->pe]);
            ab.pair = layer_bias_pair(g, a, l, o && o->kv ? o->kv->len + T : T, o && o->kv ? o->kv->len : 0);
        }
        if (a->train && c->attention == ATTN_FLASH && ab.qrel)
            fail("--attention flash does not take --pe %s's relative keys yet: use --attention naive", PE_NAMES[ps->pe]);
        if (a->train && c->attention == ATTN_FLASH)  // training: flash keeps lse (B,NH,T)
            flash_attention_forward(atty, a->lse + l * a->ls_N * NH, q, k, v, B, T, NH, NKV, hd, ab);
        else if (a->train)  // training: naive keeps P (B,NH,T,T)
            attention_forward(atty, a->att + l * a->ls_att, q, k, v, B, T, NH, NKV, hd, ab);
        else  // evaluation and generation: online softmax, windows, entropy, the KV cache
            attention_forward_infer(g, a, l, atty, q, k, v, ab, o);
        matmul_forward(mid, atty, P(g, P_WO) + (size_t)l * C * QD, N, QD, C);
        LAUNCH_ELEMS(residual_forward_kernel, NC, mid, mid, x, NC);
        LAUNCH_ROWS(rmsnorm_forward_kernel, N, 0, n2, a->rstd2 + l * a->ls_N, mid, P(g, P_MLP_NORM) + (size_t)l * C, N,
                    C, c->rms_eps);
        matmul_forward(gate, n2, P(g, P_W_GATE) + (size_t)l * F * C, N, C, F);
        matmul_forward(up, n2, P(g, P_W_UP) + (size_t)l * F * C, N, C, F);
        swiglu_forward(h, gate, up, NF);
        matmul_forward(xn, h, P(g, P_W_DOWN) + (size_t)l * C * F, N, F, C);
        LAUNCH_ELEMS(residual_forward_kernel, NC, xn, xn, mid, NC);
    }
    if (o && o->kv) o->kv->len += T;
    head_forward(g, a, a->resid + (a->train ? c->L * a->ls_C : 0), with_loss);
}

// Backward of the last forward: gradients accumulate into g->grads. Mirrors gpt_backward.
static void gpt_backward(GPT *g, Acts *a, const float *weights, const PosStep *ps, float dloss) {
    const Config *c = &g->cfg;
    if (c->arch == ARCH_GRU) {
        gru_backward(g, a, weights, dloss);
        return;
    }
    int B = a->B, T = a->T, C = c->C, NH = c->NH, NKV = c->NKV, hd = g->hd, F = c->F;
    int N = B * T, QD = NH * hd, KD = NKV * hd;
    size_t NF = (size_t)N * F;
    head_backward(g, a, a->resid + c->L * a->ls_C, weights, dloss);
    int tupe = pe_is(ps->pe, PEF_UNTIED);
    if (tupe) cudaCheck(cudaMemset(a->tupe_D, 0, (size_t)NH * T * T * sizeof(float)));
    for (int l = c->L - 1; l >= 0; l--) {
        floatX *x = a->resid + l * a->ls_C, *n1 = a->n1 + l * a->ls_C;
        floatX *q = a->q + l * a->ls_q, *k = a->k + l * a->ls_kv, *v = a->v + l * a->ls_kv;
        floatX *att = a->att + l * a->ls_att, *atty = a->atty + l * a->ls_q;
        floatX *mid = a->mid + l * a->ls_C, *n2 = a->n2 + l * a->ls_C;
        floatX *gate = a->gate + l * a->ls_F, *up = a->up + l * a->ls_F, *h = a->h + l * a->ls_F;
        matmul_backward(a->dh, G(g, P_W_DOWN) + (size_t)l * C * F, a->dres, h, P(g, P_W_DOWN) + (size_t)l * C * F, N, F, C, 0);
        swiglu_backward(a->dgate, a->dup, a->dh, gate, up, NF);
        matmul_backward(a->dC, G(g, P_W_GATE) + (size_t)l * F * C, a->dgate, n2, P(g, P_W_GATE) + (size_t)l * F * C, N, C, F, 0);
        matmul_backward(a->dC, G(g, P_W_UP) + (size_t)l * F * C, a->dup, n2, P(g, P_W_UP) + (size_t)l * F * C, N, C, F, 1);
        rmsnorm_backward(a->dres, G(g, P_MLP_NORM) + (size_t)l * C, a->dw_part, a->dC, mid, P(g, P_MLP_NORM) + (size_t)l * C,
                         a->rstd2 + l * a->ls_N, N, C, 1);
        matmul_backward(a->datty, G(g, P_WO) + (size_t)l * C * QD, a->dres, atty, P(g, P_WO) + (size_t)l * C * QD, N, QD, C, 0);
        AttnBias ab = layer_attn_bias(g, a, l, NULL, c->attention == ATTN_FLASH);  // flash recomputes the logits
        BiasFn f = layer_bias_fn(g, a, l);
        int fn_pair = a->bias.fn && f.per_query;
        float *diag = a->bias.fn && !f.per_query ? a->bias_diag : NULL;  // a learned bias per distance: its gradient
        if (c->attention == ATTN_FLASH)
            flash_attention_backward(a->dq, a->dk, a->dv, diag, a->dsum, a->datty, atty, a->lse + l * a->ls_N * NH, q, k,
                                     v, B, T, NH, NKV, hd, ab);
        else
            attention_backward(a->dq, a->dk, a->dv, diag, a->datt, a->datty, att, q, k, v, B, T, NH, NKV, hd);
        if (diag) bias_fn_backward(&f, diag, B, 1, T);
        if (fn_pair) {  // per query and key (naive only): dX summed over b, then through the function
            cudaCheck(cudaMemset(a->tupe_D, 0, (size_t)NH * T * T * sizeof(float)));
            tupe_pair_grad(a->tupe_D, a->datt, B, NH, T, hd);
            bias_fn_backward(&f, a->tupe_D, 1, T, T);
        }
        if (ab.qrel) rel_keys_backward(g, a, l, &ab, q);  // relative keys: from the row sums of dS (naive only)
        if (tupe) {  // TUPE's untied term (naive only): dX summed, and the queries' scale
            tupe_pair_grad(a->tupe_D, a->datt, B, NH, T, hd);
            scale_array(a->dq, TUPE_QSCALE, (size_t)N * QD);
        }
        rope(a->dq, B, T, NH, hd, ps, &a->pos, l, ROT_QUERY, -1.0f);
        rope(a->dk, B, T, NKV, hd, ps, &a->pos, l, ROT_KEY, -1.0f);
        floatX *dq = a->dq, *dk = a->dk;  // gradients of the projections
        if (c->qk_norm) {
            rmsnorm_backward(a->dqraw, G(g, P_Q_NORM) + (size_t)l * QD, a->dw_part, a->dq, a->qraw + l * a->ls_q,
                             P(g, P_Q_NORM) + (size_t)l * QD, a->rstdq + l * a->ls_N, N, QD, 0);
            rmsnorm_backward(a->dkraw, G(g, P_K_NORM) + (size_t)l * KD, a->dw_part, a->dk, a->kraw + l * a->ls_kv,
                             P(g, P_K_NORM) + (size_t)l * KD, a->rstdk + l * a->ls_N, N, KD, 0);
            dq = a->dqraw;
            dk = a->dkraw;
        }
        matmul_backward(a->dC, G(g, P_WQ) + (size_t)l * QD * C, dq, n1, P(g, P_WQ) + (size_t)l * QD * C, N, C, QD, 0);
        matmul_backward(a->dC, G(g, P_WK) + (size_t)l * KD * C, dk, n1, P(g, P_WK) + (size_t)l * KD * C, N, C, KD, 1);
        matmul_backward(a->dC, G(g, P_WV) + (size_t)l * KD * C, a->dv, n1, P(g, P_WV) + (size_t)l * KD * C, N, C, KD, 1);
        rmsnorm_backward(a->dres, G(g, P_ATTN_NORM) + (size_t)l * C, a->dw_part, a->dC, x, P(g, P_ATTN_NORM) + (size_t)l * C,
                         a->rstd1 + l * a->ls_N, N, C, 1);
    }
    scatter_add_rows(G(g, P_WTE), a->dres, a->sc_wte, N, C, embed_scale(c));
    if (pe_is(ps->pe, PEF_WPE_ADDED)) scatter_add_rows(G(g, P_WPE), a->dres, a->sc_wpe, N, C, 1.0f);
    if (tupe) {  // through the projections, once for every layer's share
        TupePass tp = tupe_pass(g, a, &a->pos, T, 0);
        TupeGrads tg = {G(g, P_WPE), G(g, P_TUPE_LN_W), G(g, P_TUPE_LN_B), G(g, P_TUPE_UQ), G(g, P_TUPE_UK), G(g, P_TUPE_BQ)};
        tupe_backward(tg, a->dpq, a->dpk, a->dpn, a->tupe_D, tp.pq, tp.pk, tp.p, tp.mr, tupe_weights(g), T, NH, hd, C);
    }
}

static float grad_global_norm(GPT *g) {
    sumsq_kernel<<<NORM_BLOCKS, 512>>>(g->norm_partial, g->grads, g->n_params);
    cudaCheck(cudaGetLastError());
    float partial[NORM_BLOCKS];
    cudaCheck(cudaMemcpy(partial, g->norm_partial, sizeof(partial), cudaMemcpyDeviceToHost));
    double s = 0.0;
    for (int i = 0; i < NORM_BLOCKS; i++) s += partial[i];
    return (float)sqrt(s);
}

// A micro-batch's ints for the device (acts_ints, train): inputs and targets from rows
// (B,T+1), then the embeddings' scatters, dwpe's from the micro-batch's positions (--pe learned)
static void stage_micro(int *dst, const GPT *g, const int *rows, const PosStep *ps) {
    int B = g->acts.B, T = g->acts.T, N = B * T;
    int *inp = dst, *tgt = dst + N, *sc_wte = dst + 2 * N, *sc_wpe = sc_wte + SCATTER_INTS(N);
    for (int b = 0; b < B; b++) {
        memcpy(inp + b * T, rows + (size_t)b * (T + 1), T * sizeof(int));
        memcpy(tgt + b * T, rows + (size_t)b * (T + 1) + 1, T * sizeof(int));
    }
    scatter_build(sc_wte, inp, N, g->cfg.V);
    if (!pe_is(ps->pe, PEF_WPE_ADDED)) return;
    int wpe_rows = (int)g->shapes[P_WPE].shape[0];
    PassPositions pp = pos_pass(ps, g->cfg.L, B, 0, T);
    learned_rows_check(&pp, B, wpe_rows);  // before the positions become indices
    int *key = (int *)xmalloc(N * sizeof(int));
    for (int n = 0; n < N; n++) key[n] = (int)pass_pos(&pp, 0, n / T, n % T);
    scatter_build(sc_wpe, key, N, wpe_rows);
    free(key);
}

// Forward and backward over rows (accum,B,T+1) on the host into g->grads. Returns the
// mean loss; *norm the global gradient norm. Mirrors compute_gradients. The step's tokens
// go to a pinned buffer first, so each micro-batch's upload is queued behind the previous
// one's kernels without waiting for them; the losses are summed on the device and read
// once per step.
static float compute_gradients(GPT *g, const int *rows, const float *weights, int accum, const PosStep *ps, float *norm) {
    Acts *a = &g->acts;
    int B = a->B, T = a->T;
    size_t n = (size_t)B * T, ni = acts_ints(n, 1);
    if (g->stage_cap < ni * accum) {
        cudaFreeHost(g->stage);
        cudaCheck(cudaMallocHost((void **)&g->stage, ni * accum * sizeof(int)));
        g->stage_cap = ni * accum;
    }
    if (weights && g->stage_w_cap < n * accum) {
        cudaFreeHost(g->stage_w);
        cudaFree(g->d_weights);
        cudaCheck(cudaMallocHost((void **)&g->stage_w, n * accum * sizeof(float)));
        g->d_weights = (float *)dmalloc(n * sizeof(float));
        g->stage_w_cap = n * accum;
    }
    if (weights) memcpy(g->stage_w, weights, n * accum * sizeof(float));
    for (int micro = 0; micro < accum; micro++) {
        PosStep pm = pos_micro(ps, micro, B);
        stage_micro(g->stage + ni * micro, g, rows + (size_t)micro * B * (T + 1), &pm);
    }
    cudaCheck(cudaMemset(g->grads, 0, g->n_params * sizeof(float)));
    cudaCheck(cudaMemset(g->loss_sum, 0, sizeof(float)));
    for (int micro = 0; micro < accum; micro++) {
        cudaCheck(cudaMemcpyAsync(a->inputs, g->stage + ni * micro, ni * sizeof(int), cudaMemcpyHostToDevice, 0));
        const float *w = NULL;
        if (weights) {
            cudaCheck(cudaMemcpyAsync(g->d_weights, g->stage_w + n * micro, n * sizeof(float), cudaMemcpyHostToDevice, 0));
            w = g->d_weights;
        }
        PosStep pm = pos_micro(ps, micro, B);  // this micro-batch's sequences of the step
        gpt_forward(g, a, &pm, 0, NULL);
        gpt_backward(g, a, w, &pm, 1.0f / accum);
        loss_sum_kernel<<<1, 1024>>>(g->loss_sum, a->losses, w, (int)n, w ? 1.0f : 1.0f / ((float)n * accum));
        cudaCheck(cudaGetLastError());
    }
    float loss;
    cudaCheck(cudaMemcpy(&loss, g->loss_sum, sizeof(float), cudaMemcpyDeviceToHost));
    *norm = grad_global_norm(g);
    return loss;
}

// Clip (folded into AdamW as a scale) with the norm compute_gradients gave, then AdamW.
// Mirrors apply_update.
static void apply_update(GPT *g, float lr, int t, float norm) {
    const Config *c = &g->cfg;
    float scale = (c->grad_clip > 0 && norm > c->grad_clip) ? c->grad_clip / (norm + 1e-6f) : 1.0f;
    float bc1 = 1.0f - powf(c->beta1, (float)t), bc2 = 1.0f - powf(c->beta2, (float)t);
    size_t numel[NP];  // the tensors lie back to back (gpt_alloc); one this model lacks has none
    float wd[NP];
    for (int i = 0; i < NP; i++) {
        numel[i] = g->shapes[i].numel;
        wd[i] = PARAM_DECAY[i] ? c->weight_decay : 0.0f;
    }
    adamw_update(g->params, g->params_x, g->grads, g->m, g->v, numel, wd, PARAM_LO, PARAM_HI, NP, lr, c->beta1, c->beta2, bc1,
                 bc2, c->adam_eps, scale);
}

// One optimizer step (the test cases). Mirrors train_step.
static float train_step(GPT *g, const int *rows, int accum, const PosStep *ps, float lr, int t, float *norm) {
    float loss = compute_gradients(g, rows, NULL, accum, ps, norm);
    apply_update(g, lr, t, *norm);
    return loss;
}

// ----------------------------------------------------------------------------
// checkpoints: the CPU's format (llmc/checkpoint.h), through host copies

static void gpt_checkpoint_save(const GPT *g, const TrainState *st, const char *path) {
    HostParams hp[3];
    const float *src[3] = {g->params, g->m, g->v};
    for (int k = 0; k < 3; k++) {
        host_params(&hp[k], g);
        cudaCheck(cudaMemcpy(hp[k].mem, src[k], g->n_params * sizeof(float), cudaMemcpyDeviceToHost));
    }
    checkpoint_save(&g->cfg, st, path, hp[0].views, hp[1].views, hp[2].views);
    for (int k = 0; k < 3; k++) free(hp[k].mem);
}

// mode CK_INIT keeps the current weights where the checkpoint has none (QK-norm gains).
static void gpt_checkpoint_load(GPT *g, TrainState *st, const char *path, int mode) {
    int resume = mode == CK_RESUME;
    HostParams hp[3];
    for (int k = 0; k < 3; k++) host_params(&hp[k], g);
    if (mode == CK_INIT)  // keep what the checkpoint does not have
        cudaCheck(cudaMemcpy(hp[0].mem, g->params, g->n_params * sizeof(float), cudaMemcpyDeviceToHost));
    checkpoint_load(&g->cfg, st, path, hp[0].views, hp[1].views, hp[2].views, mode);
    gpt_upload(g, hp[0].views);
    if (resume) {
        cudaCheck(cudaMemcpy(g->m, hp[1].mem, g->n_params * sizeof(float), cudaMemcpyHostToDevice));
        cudaCheck(cudaMemcpy(g->v, hp[2].mem, g->n_params * sizeof(float), cudaMemcpyHostToDevice));
    }
    for (int k = 0; k < 3; k++) free(hp[k].mem);
}

// ----------------------------------------------------------------------------
// evaluation (llmc/evaluate.h drives it through an EvalModel): forward-only passes with
// memory linear in L (16K positions fit) and a device KV cache.   mirrors the CPU's EvalCtx

typedef struct {
    GPT *g;
    Acts a, a1;        // the current pass; one token at a time
    float *d_entropy;  // (NH,cap): per head, summed on the host
    int ent_cap;
} EvalCtx;

static Acts *eval_acts(EvalCtx *e, Acts *a, int T) {
    if (!a->mem || a->T != T) {
        cudaFree(a->mem);
        acts_alloc(a, &e->g->cfg, 1, T, 0);
    }
    return a;
}

static void upload_tokens(Acts *a, const int *tokens, int n, int with_targets) {
    cudaCheck(cudaMemcpy(a->inputs, tokens, n * sizeof(int), cudaMemcpyHostToDevice));
    if (with_targets) cudaCheck(cudaMemcpy(a->targets, tokens + 1, n * sizeof(int), cudaMemcpyHostToDevice));
}

static void gpu_losses(void *ctx, const int *tokens, int L, const PosStep *ps, int window, float *losses, float *entropy) {
    EvalCtx *e = (EvalCtx *)ctx;
    Acts *a = eval_acts(e, &e->a, L);
    size_t ne = (size_t)e->g->cfg.NH * L;
    if (entropy && e->ent_cap < L) {
        cudaFree(e->d_entropy);
        e->d_entropy = (float *)dmalloc(ne * sizeof(float));
        e->ent_cap = L;
    }
    if (entropy) cudaCheck(cudaMemset(e->d_entropy, 0, ne * sizeof(float)));
    upload_tokens(a, tokens, L, 1);
    FwdOpts o = {window, entropy ? e->d_entropy : NULL, NULL, 0, NULL};
    gpt_forward(e->g, a, ps, 1, &o);
    cudaCheck(cudaMemcpy(losses, a->losses, L * sizeof(float), cudaMemcpyDeviceToHost));
    if (entropy) {
        float *h = (float *)xmalloc(ne * sizeof(float));
        cudaCheck(cudaMemcpy(h, e->d_entropy, ne * sizeof(float), cudaMemcpyDeviceToHost));
        for (int i = 0; i < L; i++) {
            float sum = 0.0f;
            for (int head = 0; head < e->g->cfg.NH; head++) sum += h[(size_t)head * L + i];
            entropy[i] += sum;
        }
        free(h);
    }
}

static void gpu_losses_chunked(void *ctx, const int *tokens, int L, const PosStep *ps, int window, int chunk,
                               float *losses) {
    EvalCtx *e = (EvalCtx *)ctx;
    KVCache kv;
    kv_alloc(&kv, &e->g->cfg, window + chunk);
    for (int pos = 0; pos < L; pos += chunk) {
        int n = L - pos < chunk ? L - pos : chunk;
        Acts *a = eval_acts(e, &e->a, n);
        upload_tokens(a, tokens + pos, n, 1);
        FwdOpts o = {0, NULL, &kv, kv.len, NULL};  // this chunk's positions start at the cache size
        gpt_forward(e->g, a, ps, 1, &o);
        cudaCheck(cudaMemcpy(losses + pos, a->losses, n * sizeof(float), cudaMemcpyDeviceToHost));
        kv_keep_last(&kv, window);
    }
    kv_free(&kv);
}

// argmax over the V real columns of one device logits row
static int argmax_row(const floatX *d_row, int V) {
    floatX *h = (floatX *)xmalloc(V * sizeof(floatX));
    cudaCheck(cudaMemcpy(h, d_row, V * sizeof(floatX), cudaMemcpyDeviceToHost));
    int best = 0;
    for (int v = 1; v < V; v++)
        if ((float)h[v] > (float)h[best]) best = v;
    free(h);
    return best;
}

// greedy decoding with a KV cache (GRU: its state)             mirrors cpu_decode
static void gpu_greedy(void *ctx, const int *prompt, int n, int n_new, const PosStep *ps, int *out) {
    EvalCtx *e = (EvalCtx *)ctx;
    const Config *c = &e->g->cfg;
    int gru = c->arch == ARCH_GRU;
    KVCache kv;
    memset(&kv, 0, sizeof(kv));
    if (!gru) kv_alloc(&kv, c, n + n_new);
    floatX *state = gru ? (floatX *)dmalloc((size_t)c->L * c->C * sizeof(floatX)) : NULL;
    if (gru) cudaCheck(cudaMemset(state, 0, (size_t)c->L * c->C * sizeof(floatX)));
    Acts *a = eval_acts(e, &e->a, n);
    upload_tokens(a, prompt, n, 0);
    FwdOpts o = {0, NULL, gru ? NULL : &kv, 0, state};
    gpt_forward(e->g, a, ps, 0, &o);
    head_logits(e->g, a, n - 1, 1);
    int next = argmax_row(a->logits, c->V);
    for (int i = 0; i < n_new; i++) {
        out[i] = next;
        if (i + 1 == n_new) break;
        Acts *a1 = eval_acts(e, &e->a1, 1);
        upload_tokens(a1, &next, 1, 0);
        o.pos0 = kv.len;
        gpt_forward(e->g, a1, ps, 0, &o);
        head_logits(e->g, a1, 0, 1);
        next = argmax_row(a1->logits, c->V);
    }
    if (!gru) kv_free(&kv);
    cudaFree(state);
}

static void run_evaluation_gpu(GPT *g, const Config *c, const Tokenizer *tok) {
    EvalCtx e;
    memset(&e, 0, sizeof(e));
    e.g = g;
    EvalModel m = {&e, gpu_losses, gpu_losses_chunked, gpu_greedy};
    run_evaluation(c, &m, tok);
    run_task_evaluation(c, &m);
    eval_set_commit(c->out_dir, c->eval_tag);  // its files, all at once
    cudaFree(e.a.mem);
    cudaFree(e.a1.mem);
    cudaFree(e.d_entropy);
}

// Mean loss over the first `batches` (B,T) windows of the validation stream.
// mirrors validation_loss (with a loss mask: the mean over the targets it marks)
static float validation_loss(GPT *g, const int *val, const unsigned char *mask, long n_val, int batches) {
    Acts *a = &g->acts;
    PosConfig pc = pos_config_of(&g->cfg);
    PosStep ps = pos_inference(&pc, a->T);
    int B = a->B, T = a->T;
    float *losses = (float *)xmalloc((size_t)B * T * sizeof(float));
    double s = 0.0, counted = 0.0;
    int used = 0;
    for (int k = 0; k < batches && (long)(k + 1) * B * T + 1 <= n_val; k++, used++) {
        for (int b = 0; b < B; b++) {
            const int *src = val + ((long)k * B + b) * T;
            cudaCheck(cudaMemcpy(a->inputs + b * T, src, T * sizeof(int), cudaMemcpyHostToDevice));
            cudaCheck(cudaMemcpy(a->targets + b * T, src + 1, T * sizeof(int), cudaMemcpyHostToDevice));
        }
        gpt_forward(g, a, &ps, 1, NULL);
        cudaCheck(cudaMemcpy(losses, a->losses, (size_t)B * T * sizeof(float), cudaMemcpyDeviceToHost));
        for (int i = 0; i < B * T; i++) {
            int w = mask ? mask[(long)k * B * T + i + 1] : 1;  // target i is stream token k*B*T + i + 1
            s += mask ? w * (double)losses[i] : losses[i] / (B * T);
            counted += w;
        }
    }
    free(losses);
    if (mask) return counted > 0 ? (float)(s / counted) : NAN;
    return used ? (float)(s / used) : NAN;
}

// ----------------------------------------------------------------------------
// dump mode, for test_gpt's GPU-vs-CPU check: reads a case file (the input part of the
// PyTorch reference format: config_i, config_f, alphas, tokens, initial weights), runs
// the check pass at config_f[9]'s alpha and the training steps, writes the same names
// the reference uses (logits, loss, grad.*, losses, grad_norms, final.*), with the
// training attention given (ATTN_NAIVE or ATTN_FLASH).

static void dump_case(const char *in_path, const char *out_path, int attention) {
    TensorFile tf;
    tf_load(&tf, in_path, TF_KIND_REFERENCE);
    Config c;
    int micro;
    int scheduled = config_from_case(&c, &tf, &micro);
    c.attention = attention;
    if (attention == ATTN_FLASH && c.C / c.NH > FLASH_MAX_HD) fail("--attention flash takes head sizes up to %d", FLASH_MAX_HD);
    int B = c.B, T = c.T, steps = c.steps, N = B * T;
    float check_alpha = ((const float *)tf_get(&tf, "config_f", TF_F32, 10))[9];
    const float *alphas = (const float *)tf_get(&tf, "alphas", TF_F32, steps);
    const int *tokens = (const int *)tf_get(&tf, "tokens", TF_I32, (size_t)steps * micro * B * (T + 1));
    GPT g;
    gpt_alloc(&g, &c, 1);
    float *init[NP];
    int present = 0;
    for (int i = 0; i < NP; i++) {
        init[i] = g.shapes[i].numel ? (float *)tf_get(&tf, PARAM_NAMES[i], TF_F32, g.shapes[i].numel) : NULL;
        present += g.shapes[i].numel > 0;
    }
    gpt_upload(&g, init);
    acts_alloc(&g.acts, &c, B, T, 1);
    PosConfig pc = pos_config_of(&c);
    PosStep ps = case_pos_step(&pc, scheduled, check_alpha, 0);

    // check pass on tokens[0,0]: forward, its logits (a->logit_rows rows at a time), backward
    size_t ni = acts_ints(N, 1);
    int *ints = (int *)xmalloc(ni * sizeof(int));
    stage_micro(ints, &g, tokens, &ps);
    cudaCheck(cudaMemcpy(g.acts.inputs, ints, ni * sizeof(int), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemset(g.grads, 0, g.n_params * sizeof(float)));
    gpt_forward(&g, &g.acts, &ps, 0, NULL);
    floatX *lx = (floatX *)xmalloc((size_t)N * c.Vp * sizeof(floatX));
    for (int r0 = 0; r0 < N; r0 += g.acts.logit_rows) {
        int n = N - r0 < g.acts.logit_rows ? N - r0 : g.acts.logit_rows;
        head_logits(&g, &g.acts, r0, n);
        cudaCheck(cudaMemcpy(lx + (size_t)r0 * c.Vp, g.acts.logits, (size_t)n * c.Vp * sizeof(floatX), cudaMemcpyDeviceToHost));
    }
    float *logits = (float *)xmalloc((size_t)N * c.V * sizeof(float));
    for (int i = 0; i < N; i++)
        for (int v = 0; v < c.V; v++) {
#ifdef ENABLE_FP32
            logits[(size_t)i * c.V + v] = lx[(size_t)i * c.Vp + v];
#else
            logits[(size_t)i * c.V + v] = __bfloat162float(lx[(size_t)i * c.Vp + v]);
#endif
        }
    gpt_backward(&g, &g.acts, NULL, &ps, 1.0f);
    float *losses_bt = (float *)xmalloc(N * sizeof(float));
    cudaCheck(cudaMemcpy(losses_bt, g.acts.losses, N * sizeof(float), cudaMemcpyDeviceToHost));
    double s = 0.0;
    for (int i = 0; i < N; i++) s += losses_bt[i];
    float loss = (float)(s / N);
    HostParams grads;
    host_params(&grads, &g);
    cudaCheck(cudaMemcpy(grads.mem, g.grads, g.n_params * sizeof(float), cudaMemcpyDeviceToHost));

    // the training steps
    float *losses = (float *)xmalloc(steps * sizeof(float)), *norms = (float *)xmalloc(steps * sizeof(float));
    for (int st = 0; st < steps; st++) {
        PosStep p = case_pos_step(&pc, scheduled, alphas[st], st);
        float lr = lr_at_step(st, c.warmup, c.steps, c.lr, c.min_lr);
        losses[st] = train_step(&g, tokens + (size_t)st * micro * B * (T + 1), micro, &p, lr, st + 1, &norms[st]);
    }
    HostParams fin;
    host_params(&fin, &g);
    cudaCheck(cudaMemcpy(fin.mem, g.params, g.n_params * sizeof(float), cudaMemcpyDeviceToHost));

    TensorWriter w;
    tw_open(&w, out_path, TF_KIND_DUMP, 4 + 2 * present);
    int lshape[3] = {B, T, c.V};
    tw_add(&w, "logits", TF_F32, 3, lshape, logits);
    tw_add1(&w, "loss", TF_F32, 1, &loss);
    char name[TF_MAX_NAME];
    for (int i = 0; i < NP; i++) {
        if (!g.shapes[i].numel) continue;
        snprintf(name, sizeof(name), "grad.%s", PARAM_NAMES[i]);
        tw_add(&w, name, TF_F32, g.shapes[i].ndim, g.shapes[i].shape, grads.views[i]);
    }
    tw_add1(&w, "losses", TF_F32, steps, losses);
    tw_add1(&w, "grad_norms", TF_F32, steps, norms);
    for (int i = 0; i < NP; i++) {
        if (!g.shapes[i].numel) continue;
        snprintf(name, sizeof(name), "final.%s", PARAM_NAMES[i]);
        tw_add(&w, name, TF_F32, g.shapes[i].ndim, g.shapes[i].shape, fin.views[i]);
    }
    tw_close(&w);
    printf("dump (%s): loss %.6f, last step loss %.6f -> %s\n", PRECISION_NAME, loss, losses[steps - 1], out_path);
    free(ints); free(lx); free(logits); free(losses_bt); free(losses); free(norms);
    free(grads.mem); free(fin.mem);
    gpt_free(&g);
    tf_free(&tf);
}

// ----------------------------------------------------------------------------
// training loop (the same as train_gpt_cpu.c's main, plus MFU)

// the model for llmc/trainloop.h (MFU against 989 TFLOP/s, the dense bf16 peak of H100/H200)
static float gpu_gradients(void *g, const int *rows, const float *weights, int accum, const PosStep *ps, float *norm) {
    return compute_gradients((GPT *)g, rows, weights, accum, ps, norm);
}
static void gpu_update(void *g, float lr, int t, float norm) {
    apply_update((GPT *)g, lr, t, norm);
    cudaCheck(cudaDeviceSynchronize());  // the step's time includes its last kernels
}
static float gpu_val_loss(void *g, const int *val, const unsigned char *mask, long n_val, int batches) {
    return validation_loss((GPT *)g, val, mask, n_val, batches);
}
static void gpu_save(void *g, const TrainState *st, const char *path) { gpt_checkpoint_save((GPT *)g, st, path); }
static void gpu_init(void *g, uint64_t seed) { gpt_init((GPT *)g, seed); }
static void gpu_load(void *g, TrainState *st, const char *path, int mode) { gpt_checkpoint_load((GPT *)g, st, path, mode); }

// The memory this run will allocate on the GPU and on the host (llmc/memory.h), checked
// before allocating it. The host holds copies of the weights and moments while a
// checkpoint is read or written, and the data.
static void gpu_memory_check(const Config *c, int train) {
    Shape sh[NP];
    param_shapes(c, sh);
    double n = 0, largest, total, fl = sizeof(float), fx = sizeof(floatX);
    for (int i = 0; i < NP; i++) n += (double)sh[i].numel;
    Acts a;
    MemPlan dev = {"GPU memory", n * (fl + (fx == fl ? 0 : fx)) + (train ? 3 * fl * n : 0), 0, 0, 0, NULL};
    MemPlan host = {"host memory", 0, file_bytes(c->resume[0] ? c->resume : c->init_from) + fl * n * (train ? 3 : 1), 0, 0, NULL};
    if (train) {
        dev.train = (double)acts_layout(&a, c, c->B, c->T, 1, NULL);
        shard_token_counts(c->train_data, &largest, &total);
        host.train = 3 * fl * n + 8 * largest;
        shard_token_counts(c->val_data, &largest, &total);
        if (c->val_every) host.train += fl * total;
    }
    if (c->eval_len) {  // one full pass, a chunk with its KV cache (keys, values, scratch), passkey prompts
        int chunk = c->gain_chunk ? c->gain_chunk : c->gain_window, pk = passkey_longest(c) + 16;  // and the decoded tokens
        if (task_longest(c) > pk) pk = task_longest(c);
        int small = pk > chunk ? pk : chunk;
        double kv_row = (2.0 * c->L + 1) * c->NKV * (c->C / c->NH) * fx;
        dev.eval = (double)acts_layout(&a, c, 1, c->eval_len, 0, NULL) + (double)acts_layout(&a, c, 1, small, 0, NULL) +
                   fl * c->NH * c->eval_len + kv_row * (c->gain_window + chunk > small ? c->gain_window + chunk : small);
        if (pe_bias_keys(c->pe))  // the relative keys' scores of a full pass (T-PE: a key per distance)
            dev.eval += fl * c->NH * c->eval_len * (double)pe_bias_buckets(c->pe, rel_shape_of(c), c->eval_len);
        if (pe_is(c->pe, PEF_UNTIED))  // TUPE's untied term of a full pass, its projected and normalized positions
            dev.eval += fl * (double)c->eval_len * (c->NH * (c->eval_len + 2.0 * (c->C / c->NH)) + c->C + 2);
        if (pe_bias_per_query(c->pe))  // a learned bias's term of each query and key of a full pass
            dev.eval += fl * c->NH * (double)c->eval_len * c->eval_len;
        shard_token_counts(c->val_data, &largest, &total);
        host.eval = fl * (total + largest) + 48.0 * c->eval_len;
    }
    size_t free_b, total_b;
    cudaCheck(cudaMemGetInfo(&free_b, &total_b));
    memory_check(&dev, (double)free_b, 0);
    memory_check(&host, host_available_memory(), c->max_memory);
}

static cudaDeviceProp gpu_init(void) {
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) fail("no CUDA device found (use ./train_gpt_cpu on a CPU)");
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, 0));
    cublasCheck(cublasCreate(&cublas));
    return prop;
}

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "--dump_case") == 0) {  // test_gpt's GPU-vs-CPU check
        int attention = ATTN_N;  // ATTN_N: not given right
        if (argc == 4) attention = ATTN_NAIVE;
        else if (argc == 6 && strcmp(argv[4], "--attention") == 0)
            for (attention = 0; attention < ATTN_N && strcmp(argv[5], ATTN_NAMES[attention]) != 0; attention++) {}
        if (attention == ATTN_N) fail("usage: %s --dump_case CASE_FILE OUT_FILE [--attention naive|flash]", argv[0]);
        gpu_init();
        dump_case(argv[2], argv[3], attention);
        return 0;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);  // each step's line reaches a pipe (| tee) when it is printed
    Config cfg;
    describe_if_asked(argc, argv);  // --describe: the tables as JSON
    parse_args(&cfg, argc, argv);
    cudaDeviceProp prop = gpu_init();
    Tokenizer tok;
    if (cfg.tokenizer[0]) {
        tokenizer_load(&tok, cfg.tokenizer);
        if (tok.vocab_size > cfg.V) fail("--tokenizer has %d tokens but --vocab_size is %d", tok.vocab_size, cfg.V);
    } else {
        tokenizer_init_bytes(&tok);
    }
    int train = !cfg.eval_only;
    if (cfg.generate) fail("--generate runs on the CPU trainer: ./train_gpt_cpu --resume CKPT --steps 0 --generate N");
    TrainState st;
    run_prepare(&cfg, &st, train);
    run_preflight(&cfg, &tok);
    gpu_memory_check(&cfg, train);
    GPT g;
    gpt_alloc(&g, &cfg, train);
    run_weights(&cfg, &st, train, &g, gpu_init, gpu_load);
    run_folder_claim(&cfg);  // after every refusal
    int hd = cfg.C / cfg.NH;
    printf("device %s | %s | model %s: V=%d (padded %d) C=%d L=%d NH=%d NKV=%d hd=%d F=%d T=%d | %.2fM params\n", prop.name,
           PRECISION_NAME, cfg.model, cfg.V, cfg.Vp, cfg.C, cfg.L, cfg.NH, cfg.NKV, hd, cfg.F, cfg.T, g.n_params / 1e6);
    if (!cfg.eval_only && st.step < cfg.steps) {
        acts_alloc(&g.acts, &cfg, cfg.B, cfg.T, 1);
        TrainModel m = {&g, gpu_gradients, gpu_update, gpu_val_loss, gpu_save, model_flops_per_token(&cfg), 989e12};
        int finished = run_training(&cfg, &st, &m, prop.name);
        size_t free_b, total_b;
        cudaCheck(cudaMemGetInfo(&free_b, &total_b));
        printf("GPU memory in use: %.2f GiB of %.2f GiB\n", (total_b - free_b) / 1073741824.0, total_b / 1073741824.0);
        cudaFree(g.acts.mem);
        g.acts.mem = NULL;
        if (!finished) {
            gpt_free(&g);
            return 0;
        }
    }
    run_evaluation_gpu(&g, &cfg, &tok);
    gpt_free(&g);
    cublasDestroy(cublas);
    return 0;
}
