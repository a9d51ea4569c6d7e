// llmc/cuda/attention_eval.cuh: attention for evaluation and generation: online softmax, KV cache, windows,
// per-head entropy.
#pragma once
#include "attention.cuh"
#include "cuda_utils.cuh"

// Forward-only attention for evaluation and generation: online softmax, no (T,T) matrix,
// so memory grows linearly with T (16K positions fit). Queries are Tq rows, keys and
// values Tk rows; query t is the (q_offset + t)-th key position (q_offset > 0 with a KV
// cache) and reads keys s <= q_offset + t, only the last `window` of them when window > 0.
// entropy (B,NH,Tq), when given, gets ent_scale * (-sum p ln p) added per row (one thread
// per element, no atomics: the sums over heads and layers repeat to the bit), from the running
// sums: H = m + ln l - (sum_s e^(x_s - m) x_s) / l. ab: the attention-score hook, at the
// token distance last - s. hd <= ATT_MAX_HD.
// A block owns ATT_ROWS consecutive queries of one (b, h); warp w takes rows w, w + 4, ...
// (interleaved: the causal work is balanced). Tiles of ATT_TILE keys and values are loaded
// coalesced (consecutive threads, consecutive elements of a row) into shared memory as
// fp32 and serve every row of the block: for the scores each lane takes one key (key rows
// padded to hd + 1, so the 32 lanes read 32 banks), for the output each lane owns the
// columns lane, lane + 32, ... of its rows' accumulators, which are indexed with fixed
// bounds and stay in registers.                               mirrors attention_forward_rows
#define ATT_MAX_HD 256
#define ATT_WARPS 4
#define ATT_THREADS (ATT_WARPS * 32)
#define ATT_RPW 4                          // query rows per warp
#define ATT_ROWS (ATT_WARPS * ATT_RPW)     // query rows per block
#define ATT_TILE 32                        // keys per tile: one per lane
// y (B,Tq,NH,hd), q (B,Tq,NH,hd), k, v (B,Tk,NKV,hd). Grid (Tq/ATT_ROWS, NH, B), ATT_THREADS threads.
__global__ void __launch_bounds__(ATT_THREADS) attention_forward_online_kernel(
    floatX *y, const floatX *q, const floatX *k, const floatX *v, int Tq, int Tk, int q_offset, int NH, int NKV, int hd,
    int window, float *entropy, float ent_scale, AttnBias ab) {
    extern __shared__ float sm[];
    float *qs = sm, *ks = qs + ATT_ROWS * hd, *vs = ks + ATT_TILE * (hd + 1);  // (ATT_ROWS,hd), (ATT_TILE,hd+1), (ATT_TILE,hd)
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int t0 = blockIdx.x * ATT_ROWS, h = blockIdx.y, b = blockIdx.z, kvh = h / (NH / NKV);
    int nrows = min(ATT_ROWS, Tq - t0);
    float scale = 1.0f / sqrtf((float)hd);
    AttnBiasHead hb = attn_bias_head(ab, h);
    for (int i = threadIdx.x; i < nrows * hd; i += blockDim.x)
        qs[i] = to_f(q[(((size_t)b * Tq + t0 + i / hd) * NH + h) * hd + i % hd]) * scale;
    int hi = q_offset + t0 + nrows - 1;                                           // the block's last key
    int lo = window && q_offset + t0 - window + 1 > 0 ? q_offset + t0 - window + 1 : 0;  // its first row's first key
    float acc[ATT_RPW][ATT_MAX_HD / 32], m[ATT_RPW], l[ATT_RPW], xsum[ATT_RPW];
#pragma unroll
    for (int i = 0; i < ATT_RPW; i++) {
        m[i] = -FLT_MAX;
        l[i] = xsum[i] = 0.0f;
#pragma unroll
        for (int r = 0; r < ATT_MAX_HD / 32; r++) acc[i][r] = 0.0f;
    }
    size_t kstride = (size_t)NKV * hd;
    const floatX *kb = k + ((size_t)b * Tk * NKV + kvh) * hd, *vb = v + ((size_t)b * Tk * NKV + kvh) * hd;
    for (int s0 = lo; s0 <= hi; s0 += ATT_TILE) {
        __syncthreads();  // the previous tile is consumed (and the queries are stored)
        for (int i = threadIdx.x; i < ATT_TILE * hd; i += blockDim.x) {
            int j = i / hd, c = i % hd, s = s0 + j;
            ks[j * (hd + 1) + c] = s <= hi ? to_f(kb[s * kstride + c]) : 0.0f;
            vs[i] = s <= hi ? to_f(vb[s * kstride + c]) : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int i = 0; i < ATT_RPW; i++) {
            int r = warp + i * ATT_WARPS, last = q_offset + t0 + r;
            int first = window && last - window + 1 > 0 ? last - window + 1 : 0;
            if (r >= nrows || s0 > last || s0 + ATT_TILE <= first) continue;  // the whole warp skips
            int s = s0 + lane;
            bool in = s >= first && s <= last;
            float score = -FLT_MAX;
            if (in) {
                const float *qr = qs + r * hd, *kr = ks + lane * (hd + 1);
                score = 0.0f;
                for (int c = 0; c < hd; c++) score += qr[c] * kr[c];
                score += attn_bias_at_row(hb, attn_bias_qrow(ab, b, t0 + r, h), last - s);
                if (ab.pair) score += ab.pair[((size_t)h * Tq + t0 + r) * ab.n_dist + s];  // TUPE's untied positions
            }
            float m_new = fmaxf(m[i], warp_max(score));
            float p = in ? expf(score - m_new) : 0.0f;
            float corr = expf(m[i] - m_new);
            l[i] = l[i] * corr + warp_sum(p);
            xsum[i] = xsum[i] * corr + warp_sum(in ? p * score : 0.0f);
#pragma unroll
            for (int c = 0; c < ATT_MAX_HD / 32; c++) acc[i][c] *= corr;
            int j1 = min(last - s0, ATT_TILE - 1);
            for (int j = max(first - s0, 0); j <= j1; j++) {
                float pj = __shfl_sync(0xffffffff, p, j);
                const float *vr = vs + j * hd;
#pragma unroll
                for (int c = 0; c < ATT_MAX_HD / 32; c++)  // fixed bounds: acc stays in registers
                    if (c * 32 + lane < hd) acc[i][c] += pj * vr[c * 32 + lane];
            }
            m[i] = m_new;
        }
    }
#pragma unroll
    for (int i = 0; i < ATT_RPW; i++) {
        int r = warp + i * ATT_WARPS;
        if (r >= nrows) continue;
        floatX *yr = y + (((size_t)b * Tq + t0 + r) * NH + h) * hd;
#pragma unroll
        for (int c = 0; c < ATT_MAX_HD / 32; c++)
            if (c * 32 + lane < hd) yr[c * 32 + lane] = to_x(acc[i][c] / l[i]);
        if (entropy && lane == 0)
            entropy[((size_t)b * NH + h) * Tq + t0 + r] += ent_scale * (m[i] + logf(l[i]) - xsum[i] / l[i]);
    }
}

// dynamic shared memory of attention_forward_online_kernel
static size_t attention_online_smem(int hd) {
    return ((size_t)ATT_ROWS * hd + (size_t)ATT_TILE * (hd + 1) + (size_t)ATT_TILE * hd) * sizeof(float);
}

// the launch of attention_forward_online_kernel over B sequences (the other arguments are its own)
static void attention_forward_online(floatX *y, const floatX *q, const floatX *k, const floatX *v, int B, int Tq, int Tk,
                                     int q_offset, int NH, int NKV, int hd, int window, float *entropy,
                                     float ent_scale, AttnBias ab) {
    size_t smem = attention_online_smem(hd);
    static size_t opted = 0;  // above 48 KiB (hd > 128) a kernel must opt in to dynamic shared memory
    if (smem > 48 * 1024 && smem > opted) {
        opted = attention_online_smem(ATT_MAX_HD);
        cudaCheck(cudaFuncSetAttribute(attention_forward_online_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)opted));
    }
    attention_forward_online_kernel<<<dim3(ceil_div(Tq, ATT_ROWS), NH, B), ATT_THREADS, smem>>>(
        y, q, k, v, Tq, Tk, q_offset, NH, NKV, hd, window, entropy, ent_scale, ab);
    cudaCheck(cudaGetLastError());
}
