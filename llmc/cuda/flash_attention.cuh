// llmc/cuda/flash_attention.cuh: causal GQA attention for training, --attention flash (no (T,T) matrix):
// CUDA cores in the fp32 build, tensor cores in the bf16 build (variant 1 on WMMA, variant 2
// FA2-class on mma.sync).
#pragma once
#include "../config.h"
#include "attention.cuh"
#include "cuda_utils.cuh"
#ifndef ENABLE_FP32
#include <mma.h>
#include "mma.cuh"
#endif

// Flash attention for training (--attention flash): the same causal GQA attention with no
// (T,T) matrix. The forward keeps y and the log-sum-exp of each row's scores, lse
// (B,NH,T) fp32; the backward recomputes the probabilities from it (doc/model.md):
//   x_ts = (q_t . k_s) * scale + attn_bias(h, t - s),   p_ts = exp(x_ts - lse_t),   s <= t
//   D_t = dy_t . y_t  (= sum_s p_ts dP_ts),   dS_ts = p_ts (dy_t . v_s - D_t) * scale
//   dv_s = sum_t p_ts dy_t,   dk_s = sum_t dS_ts q_t,   dq_t = sum_s dS_ts k_s
// attn_bias: the attention-score hook (llmc/attn_bias.h). CUDA cores, fp32 math: a block of
// FLASH_ROWS threads owns FLASH_ROWS query rows (forward, dQ) or key rows (dK/dV), one per
// thread, and walks tiles of FLASH_TILE rows of the other side staged in shared memory,
// which every thread reads at the same address (a broadcast). HDMAX (32, 64 or 128) sizes
// the per-thread register arrays; hd <= HDMAX at run time. The dK/dV pass sums the
// group's query heads in registers: GQA in fp32, with no atomics and no K/V copies.
//                                  mirrors attention_forward_train and attention_backward
#define FLASH_ROWS 64
#define FLASH_TILE 32
#define FLASH_CHUNK 16  // the forward's keys per online-softmax update (registers: x[FLASH_CHUNK])

// y (B,T,NH,hd), lse (B,NH,T); q (B,T,NH,hd), k, v (B,T,NKV,hd). Grid (T/FLASH_ROWS, NH, B).
template <int HDMAX>
__global__ void __launch_bounds__(FLASH_ROWS) flash_forward_kernel(floatX *y, float *lse, const floatX *q, const floatX *k,
                                                                   const floatX *v, int T, int NH, int NKV, int hd,
                                                                   AttnBias ab) {
    __shared__ float ks[FLASH_TILE][HDMAX], vs[FLASH_TILE][HDMAX];
    int tile = gridDim.x - 1 - blockIdx.x;  // the longest rows first
    int h = blockIdx.y, b = blockIdx.z, kvh = h / (NH / NKV);
    int t = tile * FLASH_ROWS + threadIdx.x, last = min(tile * FLASH_ROWS + FLASH_ROWS, T) - 1;
    float scale = 1.0f / sqrtf((float)hd);
    AttnBiasHead hb = attn_bias_head(ab, h);
    size_t kstride = (size_t)NKV * hd;
    const floatX *kb = k + ((size_t)b * T * NKV + kvh) * hd, *vb = v + ((size_t)b * T * NKV + kvh) * hd;
    const floatX *qt = q + (((size_t)b * T + min(t, T - 1)) * NH + h) * hd;
    float qr[HDMAX], acc[HDMAX];
#pragma unroll
    for (int c = 0; c < HDMAX; c++) {
        qr[c] = c < hd ? to_f(qt[c]) : 0.0f;
        acc[c] = 0.0f;
    }
    float m = -FLT_MAX, l = 0.0f;
    for (int s0 = 0; s0 <= last; s0 += FLASH_TILE) {
        __syncthreads();  // the previous tile is consumed
        for (int i = threadIdx.x; i < FLASH_TILE * hd; i += FLASH_ROWS) {
            int r = i / hd, c = i % hd, s = s0 + r;
            ks[r][c] = s < T ? to_f(kb[s * kstride + c]) : 0.0f;
            vs[r][c] = s < T ? to_f(vb[s * kstride + c]) : 0.0f;
        }
        __syncthreads();
        for (int j0 = 0; j0 < FLASH_TILE && s0 + j0 <= t; j0 += FLASH_CHUNK) {  // online softmax per chunk
            float x[FLASH_CHUNK], mt = m;
#pragma unroll
            for (int j = 0; j < FLASH_CHUNK; j++) {
                float dot = 0.0f;
#pragma unroll
                for (int c = 0; c < HDMAX; c++)
                    if (c < hd) dot += qr[c] * ks[j0 + j][c];
                int s = s0 + j0 + j;
                x[j] = s <= t ? dot * scale + attn_bias_at(hb, t - s) : -FLT_MAX;
                mt = fmaxf(mt, x[j]);
            }
            float corr = expf(m - mt);
            l *= corr;
#pragma unroll
            for (int c = 0; c < HDMAX; c++) acc[c] *= corr;
#pragma unroll
            for (int j = 0; j < FLASH_CHUNK; j++) {
                float p = s0 + j0 + j <= t ? expf(x[j] - mt) : 0.0f;
                l += p;
#pragma unroll
                for (int c = 0; c < HDMAX; c++)
                    if (c < hd) acc[c] += p * vs[j0 + j][c];
            }
            m = mt;
        }
    }
    if (t >= T) return;
    floatX *yt = y + (((size_t)b * T + t) * NH + h) * hd;
    float inv = 1.0f / l;
#pragma unroll
    for (int c = 0; c < HDMAX; c++)
        if (c < hd) yt[c] = to_x(acc[c] * inv);
    lse[((size_t)b * NH + h) * T + t] = m + logf(l);
}

// D (B,NH,T) = dy . y per row; one warp per (b,t,h)
__global__ void flash_backward_dot_kernel(float *D, const floatX *dy, const floatX *y, int B, int T, int NH, int hd) {
    size_t row = (size_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (row >= (size_t)B * T * NH) return;
    float s = 0.0f;
    for (int i = lane; i < hd; i += 32) s += to_f(dy[row * hd + i]) * to_f(y[row * hd + i]);
    s = warp_sum(s);
    int h = (int)(row % NH), t = (int)((row / NH) % T), b = (int)(row / ((size_t)NH * T));
    if (lane == 0) D[((size_t)b * NH + h) * T + t] = s;
}

// Loads rows r0.. of a (.,T,H,hd) tensor's head h into dst (n rows, stride ld), 0 past T.
__device__ void flash_load_rows(float *dst, int ld, int n, const floatX *src, int b, int r0, int T, int H, int h, int hd) {
    for (int i = threadIdx.x; i < n * hd; i += blockDim.x) {
        int r = i / hd, c = i % hd, t = r0 + r;
        dst[r * ld + c] = t < T ? to_f(src[(((size_t)b * T + t) * H + h) * hd + c]) : 0.0f;
    }
}

// dk, dv (B,T,NKV,hd), overwritten. Grid (T/FLASH_ROWS, NKV, B): a block owns FLASH_ROWS
// keys (their k, v rows in shared memory, padded to hd + 1 so that lanes hit different
// banks) and walks the queries t >= its first key of every head of its group.
template <int HDMAX>
__global__ void __launch_bounds__(FLASH_ROWS) flash_backward_kv_kernel(floatX *dk, floatX *dv, const floatX *dy,
                                                                       const float *lse, const float *D, const floatX *q,
                                                                       const floatX *k, const floatX *v, int T, int NH,
                                                                       int NKV, int hd, AttnBias ab) {
    extern __shared__ float sm[];
    int ld = hd + 1;
    float *kown = sm, *vown = kown + FLASH_ROWS * ld;          // (FLASH_ROWS, hd+1)
    float *qs = vown + FLASH_ROWS * ld, *dys = qs + FLASH_TILE * HDMAX;  // (FLASH_TILE, HDMAX)
    float *lses = dys + FLASH_TILE * HDMAX, *Ds = lses + FLASH_TILE;     // (FLASH_TILE)
    int kvh = blockIdx.y, b = blockIdx.z, group = NH / NKV;
    int s0 = blockIdx.x * FLASH_ROWS, s = s0 + threadIdx.x, r = threadIdx.x;  // the first keys see the most queries
    float scale = 1.0f / sqrtf((float)hd);
    flash_load_rows(kown, ld, FLASH_ROWS, k, b, s0, T, NKV, kvh, hd);
    flash_load_rows(vown, ld, FLASH_ROWS, v, b, s0, T, NKV, kvh, hd);
    float dka[HDMAX], dva[HDMAX];
#pragma unroll
    for (int c = 0; c < HDMAX; c++) dka[c] = dva[c] = 0.0f;
    for (int h = kvh * group; h < (kvh + 1) * group; h++) {
        AttnBiasHead hb = attn_bias_head(ab, h);
        for (int t0 = s0 / FLASH_TILE * FLASH_TILE; t0 < T; t0 += FLASH_TILE) {
            __syncthreads();  // the previous tile is consumed (and the own rows are loaded)
            flash_load_rows(qs, HDMAX, FLASH_TILE, q, b, t0, T, NH, h, hd);
            flash_load_rows(dys, HDMAX, FLASH_TILE, dy, b, t0, T, NH, h, hd);
            if (threadIdx.x < FLASH_TILE) {
                int t = t0 + threadIdx.x;
                lses[threadIdx.x] = t < T ? lse[((size_t)b * NH + h) * T + t] : 0.0f;
                Ds[threadIdx.x] = t < T ? D[((size_t)b * NH + h) * T + t] : 0.0f;
            }
            __syncthreads();
            if (s >= T) continue;
            for (int j = 0; j < FLASH_TILE; j++) {
                int t = t0 + j;
                if (t < s || t >= T) continue;  // key s is seen by queries t >= s
                const float *qj = qs + j * HDMAX, *dyj = dys + j * HDMAX;
                float dot = 0.0f, dp = 0.0f;
#pragma unroll
                for (int c = 0; c < HDMAX; c++)
                    if (c < hd) {
                        dot += qj[c] * kown[r * ld + c];
                        dp += dyj[c] * vown[r * ld + c];
                    }
                float p = expf(dot * scale + attn_bias_at(hb, t - s) - lses[j]);
                float ds = p * (dp - Ds[j]) * scale;
#pragma unroll
                for (int c = 0; c < HDMAX; c++)
                    if (c < hd) {
                        dva[c] += p * dyj[c];
                        dka[c] += ds * qj[c];
                    }
            }
        }
    }
    if (s >= T) return;
    floatX *dkr = dk + (((size_t)b * T + s) * NKV + kvh) * hd, *dvr = dv + (((size_t)b * T + s) * NKV + kvh) * hd;
#pragma unroll
    for (int c = 0; c < HDMAX; c++)
        if (c < hd) {
            dkr[c] = to_x(dka[c]);
            dvr[c] = to_x(dva[c]);
        }
}

// dq (B,T,NH,hd), overwritten. Grid (T/FLASH_ROWS, NH, B): a block owns FLASH_ROWS queries
// (their q, dy rows in shared memory, padded) and walks the key tiles s <= its last query.
template <int HDMAX>
__global__ void __launch_bounds__(FLASH_ROWS) flash_backward_q_kernel(floatX *dq, const floatX *dy, const float *lse,
                                                                      const float *D, const floatX *q, const floatX *k,
                                                                      const floatX *v, int T, int NH, int NKV, int hd,
                                                                      AttnBias ab) {
    extern __shared__ float sm[];
    int ld = hd + 1;
    float *qown = sm, *dyown = qown + FLASH_ROWS * ld;                  // (FLASH_ROWS, hd+1)
    float *ks = dyown + FLASH_ROWS * ld, *vs = ks + FLASH_TILE * HDMAX;  // (FLASH_TILE, HDMAX)
    int tile = gridDim.x - 1 - blockIdx.x;  // the longest rows first
    int h = blockIdx.y, b = blockIdx.z, kvh = h / (NH / NKV), r = threadIdx.x;
    int t0 = tile * FLASH_ROWS, t = t0 + r, last = min(t0 + FLASH_ROWS, T) - 1;
    float scale = 1.0f / sqrtf((float)hd);
    AttnBiasHead hb = attn_bias_head(ab, h);
    flash_load_rows(qown, ld, FLASH_ROWS, q, b, t0, T, NH, h, hd);
    flash_load_rows(dyown, ld, FLASH_ROWS, dy, b, t0, T, NH, h, hd);
    float lt = t < T ? lse[((size_t)b * NH + h) * T + t] : 0.0f, Dt = t < T ? D[((size_t)b * NH + h) * T + t] : 0.0f;
    float dqa[HDMAX];
#pragma unroll
    for (int c = 0; c < HDMAX; c++) dqa[c] = 0.0f;
    for (int s0 = 0; s0 <= last; s0 += FLASH_TILE) {
        __syncthreads();  // the previous tile is consumed (and the own rows are loaded)
        flash_load_rows(ks, HDMAX, FLASH_TILE, k, b, s0, T, NKV, kvh, hd);
        flash_load_rows(vs, HDMAX, FLASH_TILE, v, b, s0, T, NKV, kvh, hd);
        __syncthreads();
        if (t >= T) continue;
        for (int j = 0; j < FLASH_TILE; j++) {
            int s = s0 + j;
            if (s > t) break;  // causal
            const float *kj = ks + j * HDMAX, *vj = vs + j * HDMAX;
            float dot = 0.0f, dp = 0.0f;
#pragma unroll
            for (int c = 0; c < HDMAX; c++)
                if (c < hd) {
                    dot += qown[r * ld + c] * kj[c];
                    dp += dyown[r * ld + c] * vj[c];
                }
            float p = expf(dot * scale + attn_bias_at(hb, t - s) - lt);
            float ds = p * (dp - Dt) * scale;
#pragma unroll
            for (int c = 0; c < HDMAX; c++)
                if (c < hd) dqa[c] += ds * kj[c];
        }
    }
    if (t >= T) return;
    floatX *dqr = dq + (((size_t)b * T + t) * NH + h) * hd;
#pragma unroll
    for (int c = 0; c < HDMAX; c++)
        if (c < hd) dqr[c] = to_x(dqa[c]);
}

// The CUDA-core path is the fp32 build's (the bf16 build trains on tensor cores, below;
// dev/cuda runs this path in both builds, hence inline: no unused-function warning).
// shared memory of the backward kernels (both use the same amount)
static inline size_t flash_backward_smem(int hd, int hdmax) {
    return (2 * (size_t)FLASH_ROWS * (hd + 1) + 2 * (size_t)FLASH_TILE * hdmax + 2 * FLASH_TILE) * sizeof(float);
}

template <int HDMAX>
static void flash_forward_hd(floatX *y, float *lse, const floatX *q, const floatX *k, const floatX *v, int B, int T,
                             int NH, int NKV, int hd, AttnBias ab) {
    dim3 grid(ceil_div(T, FLASH_ROWS), NH, B);
    flash_forward_kernel<HDMAX><<<grid, FLASH_ROWS>>>(y, lse, q, k, v, T, NH, NKV, hd, ab);
    cudaCheck(cudaGetLastError());
}

template <int HDMAX>
static void flash_backward_hd(floatX *dq, floatX *dk, floatX *dv, const float *D, const floatX *dy, const float *lse,
                              const floatX *q, const floatX *k, const floatX *v, int B, int T, int NH, int NKV, int hd,
                              AttnBias ab) {
    size_t smem = flash_backward_smem(hd, HDMAX);
    static size_t opted = 0;  // above 48 KiB a kernel must opt in to dynamic shared memory
    if (smem > opted) {
        size_t most = flash_backward_smem(HDMAX, HDMAX);
        cudaCheck(cudaFuncSetAttribute(flash_backward_kv_kernel<HDMAX>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)most));
        cudaCheck(cudaFuncSetAttribute(flash_backward_q_kernel<HDMAX>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)most));
        opted = most;
    }
    flash_backward_kv_kernel<HDMAX><<<dim3(ceil_div(T, FLASH_ROWS), NKV, B), FLASH_ROWS, smem>>>(
        dk, dv, dy, lse, D, q, k, v, T, NH, NKV, hd, ab);
    cudaCheck(cudaGetLastError());
    flash_backward_q_kernel<HDMAX><<<dim3(ceil_div(T, FLASH_ROWS), NH, B), FLASH_ROWS, smem>>>(
        dq, dy, lse, D, q, k, v, T, NH, NKV, hd, ab);
    cudaCheck(cudaGetLastError());
}

// y (B,T,NH,hd) and lse (B,NH,T) of causal GQA attention on CUDA cores; hd <= FLASH_MAX_HD
// (checked by the flags). ab: the attention-score hook.
static inline void flash_forward_cuda_cores(floatX *y, float *lse, const floatX *q, const floatX *k, const floatX *v, int B,
                                     int T, int NH, int NKV, int hd, AttnBias ab) {
    if (hd <= 32) flash_forward_hd<32>(y, lse, q, k, v, B, T, NH, NKV, hd, ab);
    else if (hd <= 64) flash_forward_hd<64>(y, lse, q, k, v, B, T, NH, NKV, hd, ab);
    else flash_forward_hd<FLASH_MAX_HD>(y, lse, q, k, v, B, T, NH, NKV, hd, ab);
}

// dq, dk, dv overwritten; D (B,NH,T) is scratch. y and lse: the forward's.
static inline void flash_backward_cuda_cores(floatX *dq, floatX *dk, floatX *dv, float *D, const floatX *dy, const floatX *y,
                                      const float *lse, const floatX *q, const floatX *k, const floatX *v, int B, int T,
                                      int NH, int NKV, int hd, AttnBias ab) {
    size_t rows = (size_t)B * T * NH;
    flash_backward_dot_kernel<<<ceil_div(rows, 8), 256>>>(D, dy, y, B, T, NH, hd);
    cudaCheck(cudaGetLastError());
    if (hd <= 32) flash_backward_hd<32>(dq, dk, dv, D, dy, lse, q, k, v, B, T, NH, NKV, hd, ab);
    else if (hd <= 64) flash_backward_hd<64>(dq, dk, dv, D, dy, lse, q, k, v, B, T, NH, NKV, hd, ab);
    else flash_backward_hd<FLASH_MAX_HD>(dq, dk, dv, D, dy, lse, q, k, v, B, T, NH, NKV, hd, ab);
}

#ifndef ENABLE_FP32
// ----------------------------------------------------------------------------
// Flash attention on tensor cores, variant 1 (the bf16 build, where floatX is __nv_bfloat16): the
// same passes and formulas, every product on WMMA tiles of 16x16x16 (bf16 inputs, fp32
// accumulation); the softmax, lse, the attention bias and dS in fp32. A block of FTC_WARPS
// warps owns FTC_ROWS rows (queries in the forward and dQ, keys in dK/dV), 16 per warp,
// and walks tiles of FTC_TILE rows of the other side (FTC_ROWS == FTC_TILE: the last tile
// is the diagonal one). Tiles are staged in shared memory in bf16 with the head dimension
// zero-padded to HDP (32, 64 or 128, so any even hd up to 128: zeros add nothing to a
// product) and rows padded by 8 elements against bank conflicts. WMMA's register layout is
// unspecified, so fragments are only filled, loaded, stored and multiplied: the elementwise
// work goes through per-warp fp32 scratch in shared memory, and so does the forward's
// output accumulator, which is rescaled by rows.
//   forward  S = Q K^T; online softmax; O += P V with P in bf16; lse = m + ln l
//   dK/dV    S^T = K Q^T and dP^T = V dY^T; then dV += P^T dY and dK += dS^T Q, the group's
//            query heads summed into the same fp32 accumulator fragments
//   dQ       S = Q K^T and dP = dY V^T; then dQ += dS K
#define FTC_WARPS 4
#define FTC_THREADS (FTC_WARPS * 32)
#define FTC_ROWS (FTC_WARPS * 16)  // a block's own rows
#define FTC_TILE 64                // rows of the other side per tile
#define FTC_LDS (FTC_TILE + 4)     // leading dimension of the fp32 scratch (16, FTC_TILE) of a warp
#define FTC_LDP (FTC_TILE + 8)     // and of its bf16 probabilities or dS (16, FTC_TILE)

// Byte sizes of the dynamic shared memory regions; every region and every 16-row or
// 16-column offset in one is a multiple of 32 bytes (WMMA's pointer alignment).
template <int HDP>
struct FtcSmem {
    static constexpr int LDH = HDP + 8;                                       // bf16 tiles (64, HDP)
    static constexpr int LDO = HDP + 4;                                       // fp32 (16, HDP) per warp
    static constexpr size_t TILE = (size_t)FTC_TILE * LDH * sizeof(floatX);   // one bf16 tile
    static constexpr size_t VEC = FTC_TILE * sizeof(float);                   // lse or D of a tile
    static constexpr size_t SCR = (size_t)FTC_WARPS * 16 * FTC_LDS * sizeof(float);   // fp32 scratch, all warps
    static constexpr size_t PB = (size_t)FTC_WARPS * 16 * FTC_LDP * sizeof(floatX);   // bf16 scratch, all warps
    static constexpr size_t OUT = (size_t)FTC_WARPS * 16 * LDO * sizeof(float);       // fp32 (16, HDP), all warps
    static constexpr size_t fwd = 2 * TILE + SCR + PB + OUT;         // K, V, S, P, O (Q staged in O first)
    static constexpr size_t kv = 4 * TILE + 2 * VEC + 2 * SCR + 2 * PB;  // K, V, Q, dY, lse, D, S^T, dP^T, P^T, dS^T
    static constexpr size_t q = 4 * TILE + 2 * VEC + 2 * SCR + PB;       // Q, dY, K, V, lse, D, S, dP, dS
    static_assert(FTC_ROWS == FTC_TILE && HDP % 16 == 0, "diagonal tiles; whole WMMA tiles");
    static_assert(OUT >= TILE && 2 * SCR >= OUT, "Q is staged in O's region; the output in S's and dP's");
    static_assert(TILE % 32 == 0 && SCR % 32 == 0 && PB % 32 == 0 && OUT % 32 == 0 && (16 * LDH * 2) % 32 == 0 &&
                      (16 * LDO * 4) % 32 == 0, "32-byte aligned regions and 16-row offsets");
};

// rows r0 .. r0+FTC_TILE-1 of head h of a (B,T,H,hd) tensor into dst (FTC_TILE, HDP), leading
// dimension HDP + 8, zeros past T and in the columns hd .. HDP-1; coalesced, 16-byte loads
// when hd % 8 == 0 (every row then starts 16-byte aligned)
template <int HDP>
__device__ void flash_tc_load_tile(floatX *dst, const floatX *src, int b, int r0, int T, int H, int h, int hd) {
    const floatX *base = src + ((size_t)b * T * H + h) * hd;  // row t at base + t * H * hd
    if (hd % 8 == 0) {
        for (int i = threadIdx.x; i < FTC_TILE * HDP / 8; i += blockDim.x) {
            int r = i / (HDP / 8), c = i % (HDP / 8) * 8, t = r0 + r;
            int4 val = make_int4(0, 0, 0, 0);
            if (t < T && c < hd) val = *reinterpret_cast<const int4 *>(base + (size_t)t * H * hd + c);
            *reinterpret_cast<int4 *>(dst + r * (HDP + 8) + c) = val;
        }
    } else {
        for (int i = threadIdx.x; i < FTC_TILE * HDP; i += blockDim.x) {
            int r = i / HDP, c = i % HDP, t = r0 + r;
            dst[r * (HDP + 8) + c] = t < T && c < hd ? base[(size_t)t * H * hd + c] : to_x(0.0f);
        }
    }
}

// a warp's 16 rows staged in src (16, >= hd), leading dimension ld, to rows r0.. of head h
// of a (B,T,H,hd) tensor (rows past T skipped); consecutive lanes write consecutive columns
__device__ void flash_tc_write_rows(floatX *dst, const float *src, int ld, int b, int r0, int T, int H, int h, int hd) {
    for (int i = threadIdx.x % 32; i < 16 * hd; i += 32) {
        int r = i / hd, c = i % hd, t = r0 + r;
        if (t < T) dst[(((size_t)b * T + t) * H + h) * hd + c] = to_x(src[r * ld + c]);
    }
}

// y (B,T,NH,hd), lse (B,NH,T); q (B,T,NH,hd), k, v (B,T,NKV,hd). Grid (T/FTC_ROWS, NH, B).
template <int HDP>
__global__ void __launch_bounds__(FTC_THREADS) flash_tc_forward_kernel_v1(floatX *y, float *lse, const floatX *q,
                                                                       const floatX *k, const floatX *v, int T, int NH,
                                                                       int NKV, int hd, AttnBias ab) {
    using namespace nvcuda;
    typedef FtcSmem<HDP> L;
    extern __shared__ __align__(128) unsigned char smem[];
    floatX *Ks = (floatX *)smem, *Vs = (floatX *)(smem + L::TILE);  // (FTC_TILE, LDH)
    float *Ss = (float *)(smem + 2 * L::TILE);                        // per warp (16, FTC_LDS)
    floatX *Ps = (floatX *)(smem + 2 * L::TILE + L::SCR);             // per warp (16, FTC_LDP)
    float *Os = (float *)(smem + 2 * L::TILE + L::SCR + L::PB);       // per warp (16, LDO); first Q (FTC_ROWS, LDH)
    int tile = gridDim.x - 1 - blockIdx.x;  // the longest rows first
    int h = blockIdx.y, b = blockIdx.z, kvh = h / (NH / NKV), warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int t0 = tile * FTC_ROWS, last = min(t0 + FTC_ROWS, T) - 1;
    float scale = 1.0f / sqrtf((float)hd);
    AttnBiasHead hb = attn_bias_head(ab, h);
    flash_tc_load_tile<HDP>((floatX *)Os, q, b, t0, T, NH, h, hd);
    __syncthreads();
    wmma::fragment<wmma::matrix_a, 16, 16, 16, floatX, wmma::row_major> qf[HDP / 16];  // the warp's 16 queries
#pragma unroll
    for (int d = 0; d < HDP / 16; d++) wmma::load_matrix_sync(qf[d], (floatX *)Os + warp * 16 * L::LDH + d * 16, L::LDH);
    __syncthreads();  // every warp holds its queries: O's region is free
    float *Sw = Ss + warp * 16 * FTC_LDS, *Ow = Os + warp * 16 * L::LDO;
    floatX *Pw = Ps + warp * 16 * FTC_LDP;
    for (int i = lane; i < 16 * L::LDO; i += 32) Ow[i] = 0.0f;
    // lanes 2r and 2r+1 keep row r's online softmax, over the even and the odd columns
    int r = lane / 2, half = lane % 2, t = t0 + warp * 16 + r;
    float m = -FLT_MAX, l = 0.0f;
    for (int s0 = 0; s0 <= last; s0 += FTC_TILE) {
        __syncthreads();  // the previous tile is consumed
        flash_tc_load_tile<HDP>(Ks, k, b, s0, T, NKV, kvh, hd);
        flash_tc_load_tile<HDP>(Vs, v, b, s0, T, NKV, kvh, hd);
        __syncthreads();
        // S_w (16, FTC_TILE) = Q_w K^T: K (key, d) row-major is K^T column-major
#pragma unroll
        for (int j = 0; j < FTC_TILE / 16; j++) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> sf;
            wmma::fill_fragment(sf, 0.0f);
#pragma unroll
            for (int d = 0; d < HDP / 16; d++) {
                wmma::fragment<wmma::matrix_b, 16, 16, 16, floatX, wmma::col_major> kf;
                wmma::load_matrix_sync(kf, Ks + j * 16 * L::LDH + d * 16, L::LDH);
                wmma::mma_sync(sf, qf[d], kf, sf);
            }
            wmma::store_matrix_sync(Sw + j * 16, sf, FTC_LDS, wmma::mem_row_major);
        }
        __syncwarp();
        const float *srow = Sw + r * FTC_LDS;
        float mx = -FLT_MAX;
        for (int j = half; j < FTC_TILE; j += 2)
            if (s0 + j <= t) mx = fmaxf(mx, srow[j] * scale + attn_bias_at(hb, t - s0 - j));
        float mt = fmaxf(m, fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 1)));
        float corr = expf(m - mt), ps = 0.0f;
        floatX *prow = Pw + r * FTC_LDP;
        for (int j = half; j < FTC_TILE; j += 2) {
            float p = s0 + j <= t ? expf(srow[j] * scale + attn_bias_at(hb, t - s0 - j) - mt) : 0.0f;
            ps += p;
            prow[j] = to_x(p);
        }
        l = l * corr + ps + __shfl_xor_sync(0xffffffff, ps, 1);
        m = mt;
        float *orow = Ow + r * L::LDO;
        for (int c = half; c < HDP; c += 2) orow[c] *= corr;
        __syncwarp();
        // O_w (16, HDP) += P_w (16, FTC_TILE) V (FTC_TILE, HDP)
        wmma::fragment<wmma::matrix_a, 16, 16, 16, floatX, wmma::row_major> pf[FTC_TILE / 16];
#pragma unroll
        for (int j = 0; j < FTC_TILE / 16; j++) wmma::load_matrix_sync(pf[j], Pw + j * 16, FTC_LDP);
#pragma unroll
        for (int d = 0; d < HDP / 16; d++) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> of;
            wmma::load_matrix_sync(of, Ow + d * 16, L::LDO, wmma::mem_row_major);
#pragma unroll
            for (int j = 0; j < FTC_TILE / 16; j++) {
                wmma::fragment<wmma::matrix_b, 16, 16, 16, floatX, wmma::row_major> vf;
                wmma::load_matrix_sync(vf, Vs + j * 16 * L::LDH + d * 16, L::LDH);
                wmma::mma_sync(of, pf[j], vf, of);
            }
            wmma::store_matrix_sync(Ow + d * 16, of, L::LDO, wmma::mem_row_major);
        }
        __syncwarp();
    }
    float inv = 1.0f / l, *orow = Ow + r * L::LDO;
    for (int c = half; c < HDP; c += 2) orow[c] *= inv;
    if (half == 0 && t < T) lse[((size_t)b * NH + h) * T + t] = m + logf(l);
    __syncwarp();
    flash_tc_write_rows(y, Ow, L::LDO, b, t0 + warp * 16, T, NH, h, hd);
}

// The backward's two score products of a warp: S (16, FTC_TILE) = A1 B1^T and P = A2 B2^T, for
// A1, A2 the warp's 16 rows and B1, B2 whole tiles (bf16, leading dimension HDP + 8), into
// fp32 scratch with leading dimension FTC_LDS. The j loop is not unrolled: in dK/dV, dK's
// and dV's accumulators take half the registers at HDP 128.
template <int HDP>
__device__ void flash_tc_scores(float *S, float *P, const floatX *a1, const floatX *b1, const floatX *a2, const floatX *b2) {
    using namespace nvcuda;
    const int ld = FtcSmem<HDP>::LDH;
#pragma unroll 1
    for (int j = 0; j < FTC_TILE / 16; j++) {
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> sf, pf;
        wmma::fill_fragment(sf, 0.0f);
        wmma::fill_fragment(pf, 0.0f);
#pragma unroll
        for (int d = 0; d < HDP / 16; d++) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, floatX, wmma::row_major> fa;
            wmma::fragment<wmma::matrix_b, 16, 16, 16, floatX, wmma::col_major> fb;  // B (row, d) row-major is B^T
            wmma::load_matrix_sync(fa, a1 + d * 16, ld);
            wmma::load_matrix_sync(fb, b1 + j * 16 * ld + d * 16, ld);
            wmma::mma_sync(sf, fa, fb, sf);
            wmma::load_matrix_sync(fa, a2 + d * 16, ld);
            wmma::load_matrix_sync(fb, b2 + j * 16 * ld + d * 16, ld);
            wmma::mma_sync(pf, fa, fb, pf);
        }
        wmma::store_matrix_sync(S + j * 16, sf, FTC_LDS, wmma::mem_row_major);
        wmma::store_matrix_sync(P + j * 16, pf, FTC_LDS, wmma::mem_row_major);
    }
}

// dk, dv (B,T,NKV,hd), overwritten. Grid (T/FTC_ROWS, NKV, B): a block owns FTC_ROWS keys,
// 16 per warp, and walks the query tiles t0 >= its first key of every head of its group.
template <int HDP>
__global__ void __launch_bounds__(FTC_THREADS) flash_tc_backward_kv_kernel_v1(floatX *dk, floatX *dv, const floatX *dy,
                                                                           const float *lse, const float *D,
                                                                           const floatX *q, const floatX *k,
                                                                           const floatX *v, int T, int NH, int NKV,
                                                                           int hd, AttnBias ab) {
    using namespace nvcuda;
    typedef FtcSmem<HDP> L;
    extern __shared__ __align__(128) unsigned char smem[];
    floatX *Ks = (floatX *)smem, *Vs = (floatX *)(smem + L::TILE);                       // own keys (FTC_ROWS, LDH)
    floatX *Qs = (floatX *)(smem + 2 * L::TILE), *dYs = (floatX *)(smem + 3 * L::TILE);  // (FTC_TILE, LDH)
    float *lses = (float *)(smem + 4 * L::TILE), *Ds = lses + FTC_TILE;                 // (FTC_TILE)
    float *STs = (float *)(smem + 4 * L::TILE + 2 * L::VEC), *DPs = STs + FTC_WARPS * 16 * FTC_LDS;  // per warp (16, FTC_LDS)
    floatX *PTs = (floatX *)(smem + 4 * L::TILE + 2 * L::VEC + 2 * L::SCR), *DSs = PTs + FTC_WARPS * 16 * FTC_LDP;
    int kvh = blockIdx.y, b = blockIdx.z, group = NH / NKV, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int s0 = blockIdx.x * FTC_ROWS, sw = s0 + warp * 16;  // the first keys see the most queries
    float scale = 1.0f / sqrtf((float)hd);
    float *STw = STs + warp * 16 * FTC_LDS, *DPw = DPs + warp * 16 * FTC_LDS;
    floatX *PTw = PTs + warp * 16 * FTC_LDP, *DSw = DSs + warp * 16 * FTC_LDP;
    flash_tc_load_tile<HDP>(Ks, k, b, s0, T, NKV, kvh, hd);
    flash_tc_load_tile<HDP>(Vs, v, b, s0, T, NKV, kvh, hd);
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> dkf[HDP / 16], dvf[HDP / 16];  // the warp's 16 keys
#pragma unroll
    for (int d = 0; d < HDP / 16; d++) {
        wmma::fill_fragment(dkf[d], 0.0f);
        wmma::fill_fragment(dvf[d], 0.0f);
    }
    for (int h = kvh * group; h < (kvh + 1) * group; h++) {
        AttnBiasHead hb = attn_bias_head(ab, h);
        for (int t0 = s0; t0 < T; t0 += FTC_TILE) {
            __syncthreads();  // the previous tile is consumed (and the own keys are loaded)
            flash_tc_load_tile<HDP>(Qs, q, b, t0, T, NH, h, hd);
            flash_tc_load_tile<HDP>(dYs, dy, b, t0, T, NH, h, hd);
            if (threadIdx.x < FTC_TILE) {
                int t = t0 + threadIdx.x;
                lses[threadIdx.x] = t < T ? lse[((size_t)b * NH + h) * T + t] : 0.0f;
                Ds[threadIdx.x] = t < T ? D[((size_t)b * NH + h) * T + t] : 0.0f;
            }
            __syncthreads();
            // S^T_w (16 keys, FTC_TILE queries) = K_w Q^T and dP^T_w = V_w dY^T
            flash_tc_scores<HDP>(STw, DPw, Ks + warp * 16 * L::LDH, Qs, Vs + warp * 16 * L::LDH, dYs);
            __syncwarp();
            for (int i = lane; i < 16 * FTC_TILE; i += 32) {
                int kr = i / FTC_TILE, qc = i % FTC_TILE, s = sw + kr, t = t0 + qc;
                float p = 0.0f, ds = 0.0f;
                if (s <= t && t < T) {  // key s is seen by queries t >= s
                    p = expf(STw[kr * FTC_LDS + qc] * scale + attn_bias_at(hb, t - s) - lses[qc]);
                    ds = p * (DPw[kr * FTC_LDS + qc] - Ds[qc]) * scale;
                }
                PTw[kr * FTC_LDP + qc] = to_x(p);
                DSw[kr * FTC_LDP + qc] = to_x(ds);
            }
            __syncwarp();
            // dV_w += P^T_w dY, dK_w += dS^T_w Q
#pragma unroll 1
            for (int j = 0; j < FTC_TILE / 16; j++) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, floatX, wmma::row_major> pa, dsa;
                wmma::load_matrix_sync(pa, PTw + j * 16, FTC_LDP);
                wmma::load_matrix_sync(dsa, DSw + j * 16, FTC_LDP);
#pragma unroll
                for (int d = 0; d < HDP / 16; d++) {
                    wmma::fragment<wmma::matrix_b, 16, 16, 16, floatX, wmma::row_major> dyb, qb;
                    wmma::load_matrix_sync(dyb, dYs + j * 16 * L::LDH + d * 16, L::LDH);
                    wmma::mma_sync(dvf[d], pa, dyb, dvf[d]);
                    wmma::load_matrix_sync(qb, Qs + j * 16 * L::LDH + d * 16, L::LDH);
                    wmma::mma_sync(dkf[d], dsa, qb, dkf[d]);
                }
            }
        }
    }
    __syncthreads();  // every warp is done with the scratch: S^T's and dP^T's regions stage the output
    float *Ow = STs + warp * 16 * L::LDO;
#pragma unroll
    for (int d = 0; d < HDP / 16; d++) wmma::store_matrix_sync(Ow + d * 16, dkf[d], L::LDO, wmma::mem_row_major);
    __syncwarp();
    flash_tc_write_rows(dk, Ow, L::LDO, b, sw, T, NKV, kvh, hd);
    __syncwarp();
#pragma unroll
    for (int d = 0; d < HDP / 16; d++) wmma::store_matrix_sync(Ow + d * 16, dvf[d], L::LDO, wmma::mem_row_major);
    __syncwarp();
    flash_tc_write_rows(dv, Ow, L::LDO, b, sw, T, NKV, kvh, hd);
}

// dq (B,T,NH,hd), overwritten. Grid (T/FTC_ROWS, NH, B): a block owns FTC_ROWS queries, 16
// per warp, and walks the key tiles s0 <= its last query.
template <int HDP>
__global__ void __launch_bounds__(FTC_THREADS) flash_tc_backward_q_kernel_v1(floatX *dq, const floatX *dy, const float *lse,
                                                                          const float *D, const floatX *q,
                                                                          const floatX *k, const floatX *v, int T, int NH,
                                                                          int NKV, int hd, AttnBias ab) {
    using namespace nvcuda;
    typedef FtcSmem<HDP> L;
    extern __shared__ __align__(128) unsigned char smem[];
    floatX *Qs = (floatX *)smem, *dYs = (floatX *)(smem + L::TILE);                     // own queries (FTC_ROWS, LDH)
    floatX *Ks = (floatX *)(smem + 2 * L::TILE), *Vs = (floatX *)(smem + 3 * L::TILE);  // (FTC_TILE, LDH)
    float *lses = (float *)(smem + 4 * L::TILE), *Ds = lses + FTC_ROWS;                // (FTC_ROWS)
    float *Ss = (float *)(smem + 4 * L::TILE + 2 * L::VEC), *DPs = Ss + FTC_WARPS * 16 * FTC_LDS;  // per warp (16, FTC_LDS)
    floatX *DSs = (floatX *)(smem + 4 * L::TILE + 2 * L::VEC + 2 * L::SCR);            // per warp (16, FTC_LDP)
    int tile = gridDim.x - 1 - blockIdx.x;  // the longest rows first
    int h = blockIdx.y, b = blockIdx.z, kvh = h / (NH / NKV), warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int t0 = tile * FTC_ROWS, tw = t0 + warp * 16, last = min(t0 + FTC_ROWS, T) - 1;
    float scale = 1.0f / sqrtf((float)hd);
    AttnBiasHead hb = attn_bias_head(ab, h);
    float *Sw = Ss + warp * 16 * FTC_LDS, *DPw = DPs + warp * 16 * FTC_LDS;
    floatX *DSw = DSs + warp * 16 * FTC_LDP;
    flash_tc_load_tile<HDP>(Qs, q, b, t0, T, NH, h, hd);
    flash_tc_load_tile<HDP>(dYs, dy, b, t0, T, NH, h, hd);
    if (threadIdx.x < FTC_ROWS) {
        int t = t0 + threadIdx.x;
        lses[threadIdx.x] = t < T ? lse[((size_t)b * NH + h) * T + t] : 0.0f;
        Ds[threadIdx.x] = t < T ? D[((size_t)b * NH + h) * T + t] : 0.0f;
    }
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> dqf[HDP / 16];  // the warp's 16 queries
#pragma unroll
    for (int d = 0; d < HDP / 16; d++) wmma::fill_fragment(dqf[d], 0.0f);
    for (int s0 = 0; s0 <= last; s0 += FTC_TILE) {
        __syncthreads();  // the previous tile is consumed (and the own rows are loaded)
        flash_tc_load_tile<HDP>(Ks, k, b, s0, T, NKV, kvh, hd);
        flash_tc_load_tile<HDP>(Vs, v, b, s0, T, NKV, kvh, hd);
        __syncthreads();
        // S_w (16, FTC_TILE) = Q_w K^T and dP_w = dY_w V^T
        flash_tc_scores<HDP>(Sw, DPw, Qs + warp * 16 * L::LDH, Ks, dYs + warp * 16 * L::LDH, Vs);
        __syncwarp();
        for (int i = lane; i < 16 * FTC_TILE; i += 32) {
            int qr = i / FTC_TILE, kc = i % FTC_TILE, t = tw + qr, s = s0 + kc;
            float ds = 0.0f;
            if (s <= t && t < T) {  // causal
                float p = expf(Sw[qr * FTC_LDS + kc] * scale + attn_bias_at(hb, t - s) - lses[warp * 16 + qr]);
                ds = p * (DPw[qr * FTC_LDS + kc] - Ds[warp * 16 + qr]) * scale;
            }
            DSw[qr * FTC_LDP + kc] = to_x(ds);
        }
        __syncwarp();
        // dQ_w += dS_w (16, FTC_TILE) K (FTC_TILE, HDP)
#pragma unroll
        for (int j = 0; j < FTC_TILE / 16; j++) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, floatX, wmma::row_major> dsa;
            wmma::load_matrix_sync(dsa, DSw + j * 16, FTC_LDP);
#pragma unroll
            for (int d = 0; d < HDP / 16; d++) {
                wmma::fragment<wmma::matrix_b, 16, 16, 16, floatX, wmma::row_major> kb;
                wmma::load_matrix_sync(kb, Ks + j * 16 * L::LDH + d * 16, L::LDH);
                wmma::mma_sync(dqf[d], dsa, kb, dqf[d]);
            }
        }
    }
    __syncthreads();  // every warp is done with the scratch: S's and dP's regions stage the output
    float *Ow = Ss + warp * 16 * L::LDO;
#pragma unroll
    for (int d = 0; d < HDP / 16; d++) wmma::store_matrix_sync(Ow + d * 16, dqf[d], L::LDO, wmma::mem_row_major);
    __syncwarp();
    flash_tc_write_rows(dq, Ow, L::LDO, b, tw, T, NH, h, hd);
}

// ----------------------------------------------------------------------------
// FA2-class kernels (bf16 build), variant 2 of the forward and of the backward: mma.sync
// m16n8k16 with the scores and the accumulators in registers (llmc/cuda/mma.cuh). A block
// of FMMA_WARPS warps owns FMMA_ROWS rows (queries in the forward and dQ, keys in dK/dV),
// 16 per warp, and walks tiles of FMMA_TILE rows of the other side; the tiles come into
// shared memory by cp.async, double-buffered: tile j+1 loads while tile j is computed.
// Lane (g, c) = (lane / 4, lane % 4) holds rows g and g + 8 of its warp's 16 and columns
// 2c, 2c + 1 of every 8-column block of a score or accumulator tile (the accumulator
// layout), so a row's max and sum take two shuffles among its 4 lanes, and two 8-column
// blocks of P (or dS) are, as they stand, the A operand of a 16-wide chunk of the next
// product: P and dS never leave registers. Scores in log2 units,
//   x = (q . k) * scale * log2 e + attn_bias(h, t - s) * log2 e,  p = 2^(x - m),  lse = (m + log2 l) ln 2
// the same softmax as v1 in another base. hd == HD (32, 64, 128) with 16-byte aligned
// tensors (flash_forward_variant_for and flash_backward_variant_for fall back to v1).
#define FMMA_WARPS 4
#define FMMA_THREADS (FMMA_WARPS * 32)
#define FMMA_ROWS (FMMA_WARPS * 16)
#define FMMA_TILE 64   // == FMMA_ROWS: the last tile of the other side is the diagonal one
#define FMMA_CHUNK 32  // the backward's columns per pass over a tile (its scores' registers)
#define FLASH_LOG2E 1.4426950408889634f
#define FLASH_LN2 0.6931471805599453f

template <int HD>
struct FmmaSmem {
    static constexpr int LD = HD + 8;  // 16 bytes of pad: an ldmatrix's 8 rows fall in 8 different bank groups
    static constexpr size_t TILE = (size_t)FMMA_TILE * LD * sizeof(floatX);
    static constexpr size_t fwd = 5 * TILE;                                   // Q (then the output), K, V twice
    static constexpr size_t bwd = 6 * TILE + 4 * FMMA_TILE * sizeof(float);  // two own, two others twice; lse, D twice
    static_assert(FMMA_ROWS == FMMA_TILE && HD % 32 == 0 && FMMA_TILE % FMMA_CHUNK == 0,
                  "diagonal tiles; pairs of 16-wide k chunks");
};

// The grid of every v2 kernel: (heads, B, tiles). The tile index varies slowest, so the
// GPU hands out all (head, batch) blocks of one tile before the next tile's: the order the
// kernels pick (longest rows first) then holds across the whole grid, not only inside one
// (head, batch), and the last wave is made of the shortest blocks.
static inline dim3 fmma_grid(int heads, int B, int T) { return dim3(heads, B, ceil_div(T, FMMA_ROWS)); }

// rows r0 .. r0 + FMMA_TILE - 1 of head h of a (B,T,H,HD) tensor into dst (FMMA_TILE, HD + 8)
// by cp.async (the caller commits), zeros past T
template <int HD>
__device__ void flash_mma_load_tile(floatX *dst, const floatX *src, int b, int r0, int T, int H, int h) {
    const floatX *base = src + ((size_t)b * T * H + h) * HD;  // row t at base + t * H * HD
    for (int i = threadIdx.x; i < FMMA_TILE * HD / 8; i += FMMA_THREADS) {
        int r = i / (HD / 8), c = i % (HD / 8) * 8, t = r0 + r;
        cp_async16(dst + r * (HD + 8) + c, base + (size_t)min(t, T - 1) * H * HD + c, t < T);
    }
}

// The key walk's step j of the forward and dQ: key tile j + 1 (if j < last) of K and V into
// the other halves of Ks and Vs (two (FMMA_TILE, HD + 8) tiles each), freed by the barrier
// that ended step j - 1; then wait until tile j (and what was committed before it) has
// landed, and a barrier, so every thread sees it
template <int HD>
__device__ void flash_mma_next_kv(floatX *Ks, floatX *Vs, const floatX *k, const floatX *v, int b, int j, int last, int T,
                                  int NKV, int kvh) {
    if (j < last) {
        int buf = (j + 1) % 2 * FMMA_TILE * (HD + 8);
        flash_mma_load_tile<HD>(Ks + buf, k, b, (j + 1) * FMMA_TILE, T, NKV, kvh);
        flash_mma_load_tile<HD>(Vs + buf, v, b, (j + 1) * FMMA_TILE, T, NKV, kvh);
        cp_async_commit();
        cp_async_wait<1>();
    } else {
        cp_async_wait<0>();
    }
    __syncthreads();
}

// a warp's 16 rows (16, HD) at rows (leading dimension HD + 8) as A fragments, one per 16-wide chunk
template <int HD>
__device__ void flash_mma_load_a(uint32_t (&a)[HD / 16][4], const floatX *rows) {
    int lane = threadIdx.x % 32;
#pragma unroll
    for (int kc = 0; kc < HD / 16; kc++) ldmatrix_x4(a[kc], rows + (lane % 16) * (HD + 8) + kc * 16 + lane / 16 * 8);
}

// s (16, N) = A B^T for A the warp's 16 rows (fragments a) and B the N rows at brows
// (leading dimension HD + 8): a B row is a column of the product's B operand, so plain ldmatrix
template <int HD, int N>
__device__ void flash_mma_scores(float (&s)[N / 8][4], const uint32_t (&a)[HD / 16][4], const floatX *brows) {
    int lane = threadIdx.x % 32;
#pragma unroll
    for (int nb = 0; nb < N / 8; nb++) {
        s[nb][0] = s[nb][1] = s[nb][2] = s[nb][3] = 0.0f;
#pragma unroll
        for (int kc = 0; kc < HD / 16; kc += 2) {  // matrices: rows nb*8.., columns kc*16, +8, +16, +24
            uint32_t f[4];
            ldmatrix_x4(f, brows + (nb * 8 + lane % 8) * (HD + 8) + kc * 16 + lane / 8 * 8);
            mma_bf16_16816(s[nb], a[kc], {f[0], f[1]});
            mma_bf16_16816(s[nb], a[kc + 1], {f[2], f[3]});
        }
    }
}

// acc (16, HD) += P (16, N) B (N, HD) for P's fragments p and B the N rows at brows: a B row
// is a row of the product's B operand, so ldmatrix .trans
template <int HD, int N>
__device__ void flash_mma_accumulate(float (&acc)[HD / 8][4], const uint32_t (&p)[N / 16][4], const floatX *brows) {
    int lane = threadIdx.x % 32;
#pragma unroll
    for (int kc = 0; kc < N / 16; kc++)
#pragma unroll
        for (int d = 0; d < HD / 8; d += 2) {  // matrices: rows kc*16, +8 by columns d*8, +8
            uint32_t f[4];
            ldmatrix_x4_trans(f, brows + (kc * 16 + lane % 16) * (HD + 8) + d * 8 + lane / 16 * 8);
            mma_bf16_16816(acc[d], p[kc], {f[0], f[1]});
            mma_bf16_16816(acc[d + 1], p[kc], {f[2], f[3]});
        }
}

// score tile x (16, N) in the accumulator layout as A fragments in bf16: 8-column blocks 2i and 2i + 1 make chunk i
template <int N>
__device__ void flash_mma_pack(uint32_t (&p)[N / 16][4], const float (&x)[N / 8][4]) {
#pragma unroll
    for (int nb = 0; nb < N / 8; nb++) {
        p[nb / 2][nb % 2 * 2] = pack_bf16(x[nb][0], x[nb][1]);
        p[nb / 2][nb % 2 * 2 + 1] = pack_bf16(x[nb][2], x[nb][3]);
    }
}

// a warp's 16 rows of an accumulator tile (16, HD), times rscale[0] (row g) and rscale[1]
// (row g + 8), to rows r0.. of head h of a (B,T,H,HD) tensor (rows past T skipped), staged
// through the warp's 16 rows of stage (leading dimension HD + 8) for 16-byte stores
template <int HD>
__device__ void flash_mma_store(floatX *dst, floatX *stage, const float (&acc)[HD / 8][4], const float (&rscale)[2],
                                int b, int r0, int T, int H, int h) {
    int lane = threadIdx.x % 32;
#pragma unroll
    for (int d = 0; d < HD / 8; d++) {
        floatX *p0 = stage + (lane / 4) * (HD + 8) + d * 8 + lane % 4 * 2, *p1 = p0 + 8 * (HD + 8);
        p0[0] = to_x(acc[d][0] * rscale[0]);
        p0[1] = to_x(acc[d][1] * rscale[0]);
        p1[0] = to_x(acc[d][2] * rscale[1]);
        p1[1] = to_x(acc[d][3] * rscale[1]);
    }
    __syncwarp();
    for (int i = lane; i < 16 * HD / 8; i += 32) {
        int r = i / (HD / 8), c = i % (HD / 8) * 8, t = r0 + r;
        if (t < T) *reinterpret_cast<int4 *>(dst + (((size_t)b * T + t) * H + h) * HD + c) =
            *reinterpret_cast<const int4 *>(stage + r * (HD + 8) + c);
    }
}

// Forward v2. y (B,T,NH,HD), lse (B,NH,T); q (B,T,NH,HD), k, v (B,T,NKV,HD). Grid
// fmma_grid(NH, B, T). Q in registers once; per key tile S = Q K^T, the online softmax, O
// += P V, all in registers. What v1 spends per warp and tile and this does not: S through
// fp32 shared memory (written, read twice), P through bf16 shared memory, O loaded,
// rescaled and stored in fp32 shared memory, a synchronous tile load.
template <int HD>
__global__ void __launch_bounds__(FMMA_THREADS) flash_tc_forward_kernel_v2(floatX *y, float *lse, const floatX *q,
                                                                          const floatX *k, const floatX *v, int T,
                                                                          int NH, int NKV, AttnBias ab) {
    constexpr int LD = FmmaSmem<HD>::LD, NB = FMMA_TILE / 8, DB = HD / 8;
    extern __shared__ __align__(128) unsigned char smem[];
    floatX *Qs = (floatX *)smem;                                      // (FMMA_ROWS, LD)
    floatX *Ks = Qs + FMMA_TILE * LD, *Vs = Ks + 2 * FMMA_TILE * LD;  // two (FMMA_TILE, LD) each
    int tile = gridDim.z - 1 - blockIdx.z;  // the longest rows first
    int h = blockIdx.x, b = blockIdx.y, kvh = h / (NH / NKV), warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int t0 = tile * FMMA_ROWS, tr = t0 + warp * 16 + lane / 4, c2 = lane % 4 * 2;  // the lane's rows tr, tr + 8
    float sc = FLASH_LOG2E / sqrtf((float)HD);
    AttnBiasHead hb = attn_bias_head(ab, h);
    flash_mma_load_tile<HD>(Qs, q, b, t0, T, NH, h);
    flash_mma_load_tile<HD>(Ks, k, b, 0, T, NKV, kvh);
    flash_mma_load_tile<HD>(Vs, v, b, 0, T, NKV, kvh);
    cp_async_commit();
    uint32_t qf[HD / 16][4];  // the warp's 16 queries
    float o[DB][4], m[2] = {-FLT_MAX, -FLT_MAX}, l[2] = {0.0f, 0.0f};  // l: this lane's part of the row sums
#pragma unroll
    for (int d = 0; d < DB; d++) o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.0f;
    for (int j = 0; j <= tile; j++) {
        const floatX *Kj = Ks + (j % 2) * FMMA_TILE * LD, *Vj = Vs + (j % 2) * FMMA_TILE * LD;
        flash_mma_next_kv<HD>(Ks, Vs, k, v, b, j, tile, T, NKV, kvh);
        if (j == 0) flash_mma_load_a<HD>(qf, Qs + warp * 16 * LD);
        float s[NB][4];
        flash_mma_scores<HD, FMMA_TILE>(s, qf, Kj);  // S (16, FMMA_TILE) = Q_w K_j^T
        // scores with the hook, the diagonal tile masked; the online softmax of rows tr, tr + 8
        int s0 = j * FMMA_TILE;
        float mx[2] = {m[0], m[1]};
#pragma unroll
        for (int nb = 0; nb < NB; nb++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int t = tr + e / 2 * 8, key = s0 + nb * 8 + c2 + e % 2;
                float x = j == tile && key > t ? -FLT_MAX : s[nb][e] * sc + attn_bias_at(hb, t - key) * FLASH_LOG2E;
                s[nb][e] = x;
                mx[e / 2] = fmaxf(mx[e / 2], x);
            }
        float corr[2];
#pragma unroll
        for (int i = 0; i < 2; i++) {
            mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffff, mx[i], 1));
            mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffff, mx[i], 2));
            corr[i] = exp2f(m[i] - mx[i]);
            m[i] = mx[i];
            l[i] *= corr[i];
        }
#pragma unroll
        for (int d = 0; d < DB; d++) {
            o[d][0] *= corr[0];
            o[d][1] *= corr[0];
            o[d][2] *= corr[1];
            o[d][3] *= corr[1];
        }
#pragma unroll
        for (int nb = 0; nb < NB; nb++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                s[nb][e] = exp2f(s[nb][e] - m[e / 2]);  // 0 where masked
                l[e / 2] += s[nb][e];
            }
        uint32_t pf[FMMA_TILE / 16][4];
        flash_mma_pack<FMMA_TILE>(pf, s);
        flash_mma_accumulate<HD, FMMA_TILE>(o, pf, Vj);  // O (16, HD) += P (16, FMMA_TILE) V_j
        __syncthreads();  // every warp is done with tile j's buffers before tile j + 2 loads into them
    }
    float inv[2];
#pragma unroll
    for (int i = 0; i < 2; i++) {
        l[i] += __shfl_xor_sync(0xffffffff, l[i], 1);
        l[i] += __shfl_xor_sync(0xffffffff, l[i], 2);
        inv[i] = 1.0f / l[i];
        int t = tr + 8 * i;
        if (c2 == 0 && t < T) lse[((size_t)b * NH + h) * T + t] = m[i] * FLASH_LN2 + logf(l[i]);
    }
    // the warp's rows of Q's region are free since tile 0
    flash_mma_store<HD>(y, Qs + warp * 16 * LD, o, inv, b, t0 + warp * 16, T, NH, h);
}

// Backward v2, dK/dV. dk, dv (B,T,NKV,HD), overwritten. Grid fmma_grid(NKV, B, T): a block
// owns FMMA_ROWS keys (their K, V rows in shared memory) and walks the query tiles from its
// diagonal on, of every head of its group, as one sequence of tiles (the prefetch crosses
// heads). Per tile and FMMA_CHUNK queries, per warp: S^T = K_w Q^T and dP^T = V_w dY^T,
// P^T = 2^(S^T sc + bias log2 e - lse log2 e), dS^T = P^T (dP^T - D) scale, then dV += P^T dY
// and dK += dS^T Q, the group's heads summed in the same fp32 registers (no atomics).
template <int HD>
__global__ void __launch_bounds__(FMMA_THREADS) flash_tc_backward_kv_kernel_v2(floatX *dk, floatX *dv, const floatX *dy,
                                                                              const float *lse, const float *D,
                                                                              const floatX *q, const floatX *k,
                                                                              const floatX *v, int T, int NH, int NKV,
                                                                              AttnBias ab) {
    constexpr int LD = FmmaSmem<HD>::LD, NC = FMMA_CHUNK / 8, DB = HD / 8;
    extern __shared__ __align__(128) unsigned char smem[];
    floatX *Ks = (floatX *)smem, *Vs = Ks + FMMA_TILE * LD;                      // own keys (FMMA_ROWS, LD)
    floatX *Qs = Vs + FMMA_TILE * LD, *dYs = Qs + 2 * FMMA_TILE * LD;            // two (FMMA_TILE, LD) each
    float *lses = (float *)(dYs + 2 * FMMA_TILE * LD), *Ds = lses + 2 * FMMA_TILE;  // two (FMMA_TILE) each
    int kvh = blockIdx.x, b = blockIdx.y, group = NH / NKV, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int s0 = blockIdx.z * FMMA_ROWS, sr = s0 + warp * 16 + lane / 4, c2 = lane % 4 * 2;  // the lane's keys sr, sr + 8
    int nqt = (T - s0 + FMMA_TILE - 1) / FMMA_TILE, n = group * nqt;  // query tiles per head; tiles in all
    float scale = 1.0f / sqrtf((float)HD), sc = scale * FLASH_LOG2E;
    // tile i: head kvh * group + i / nqt, queries from s0 + (i % nqt) * FMMA_TILE
    auto load = [&](int i) {
        int h = kvh * group + i / nqt, t0 = s0 + i % nqt * FMMA_TILE, buf = i % 2;
        flash_mma_load_tile<HD>(Qs + buf * FMMA_TILE * LD, q, b, t0, T, NH, h);
        flash_mma_load_tile<HD>(dYs + buf * FMMA_TILE * LD, dy, b, t0, T, NH, h);
        cp_async_commit();
        if (threadIdx.x < FMMA_TILE) {  // plain loads, seen by all after the next barrier
            int t = t0 + threadIdx.x;
            lses[buf * FMMA_TILE + threadIdx.x] = t < T ? lse[((size_t)b * NH + h) * T + t] * FLASH_LOG2E : 0.0f;
            Ds[buf * FMMA_TILE + threadIdx.x] = t < T ? D[((size_t)b * NH + h) * T + t] : 0.0f;
        }
    };
    flash_mma_load_tile<HD>(Ks, k, b, s0, T, NKV, kvh);
    flash_mma_load_tile<HD>(Vs, v, b, s0, T, NKV, kvh);
    load(0);
    float dka[DB][4], dva[DB][4];
#pragma unroll
    for (int d = 0; d < DB; d++)
#pragma unroll
        for (int e = 0; e < 4; e++) dka[d][e] = dva[d][e] = 0.0f;
    for (int i = 0; i < n; i++) {
        if (i + 1 < n) {
            load(i + 1);
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        int h = kvh * group + i / nqt, t0 = s0 + i % nqt * FMMA_TILE, buf = i % 2;
        AttnBiasHead hb = attn_bias_head(ab, h);
        const floatX *Qi = Qs + buf * FMMA_TILE * LD, *dYi = dYs + buf * FMMA_TILE * LD;
        const float *lsei = lses + buf * FMMA_TILE, *Di = Ds + buf * FMMA_TILE;
#pragma unroll 1
        for (int c0 = 0; c0 < FMMA_TILE; c0 += FMMA_CHUNK) {
            float st[NC][4], dpt[NC][4];
            {
                uint32_t a[HD / 16][4];
                flash_mma_load_a<HD>(a, Ks + warp * 16 * LD);
                flash_mma_scores<HD, FMMA_CHUNK>(st, a, Qi + c0 * LD);    // S^T (16 keys, FMMA_CHUNK queries)
                flash_mma_load_a<HD>(a, Vs + warp * 16 * LD);
                flash_mma_scores<HD, FMMA_CHUNK>(dpt, a, dYi + c0 * LD);  // dP^T
            }
#pragma unroll
            for (int nb = 0; nb < NC; nb++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    int s = sr + e / 2 * 8, col = c0 + nb * 8 + c2 + e % 2, t = t0 + col;
                    float p = 0.0f;
                    if (s <= t && t < T) p = exp2f(st[nb][e] * sc + attn_bias_at(hb, t - s) * FLASH_LOG2E - lsei[col]);
                    st[nb][e] = p;
                    dpt[nb][e] = p * (dpt[nb][e] - Di[col]) * scale;
                }
            uint32_t pf[FMMA_CHUNK / 16][4], dsf[FMMA_CHUNK / 16][4];
            flash_mma_pack<FMMA_CHUNK>(pf, st);
            flash_mma_pack<FMMA_CHUNK>(dsf, dpt);
            flash_mma_accumulate<HD, FMMA_CHUNK>(dva, pf, dYi + c0 * LD);  // dV_w += P^T dY
            flash_mma_accumulate<HD, FMMA_CHUNK>(dka, dsf, Qi + c0 * LD);  // dK_w += dS^T Q
        }
        __syncthreads();  // every warp is done with tile i's buffers before tile i + 2 loads into them
    }
    // the warp's own rows of K and V are its own: they stage its output
    const float one[2] = {1.0f, 1.0f};
    flash_mma_store<HD>(dk, Ks + warp * 16 * LD, dka, one, b, s0 + warp * 16, T, NKV, kvh);
    flash_mma_store<HD>(dv, Vs + warp * 16 * LD, dva, one, b, s0 + warp * 16, T, NKV, kvh);
}

// Backward v2, dQ. dq (B,T,NH,HD), overwritten. Grid fmma_grid(NH, B, T): a block owns
// FMMA_ROWS queries (Q and dY in registers) and walks the key tiles up to its diagonal. Per
// tile and FMMA_CHUNK keys, per warp: S = Q_w K^T and dP = dY_w V^T, P and dS as in dK/dV,
// dQ += dS K.
template <int HD>
__global__ void __launch_bounds__(FMMA_THREADS) flash_tc_backward_q_kernel_v2(floatX *dq, const floatX *dy, const float *lse,
                                                                             const float *D, const floatX *q,
                                                                             const floatX *k, const floatX *v, int T,
                                                                             int NH, int NKV, AttnBias ab) {
    constexpr int LD = FmmaSmem<HD>::LD, NC = FMMA_CHUNK / 8, DB = HD / 8;
    extern __shared__ __align__(128) unsigned char smem[];
    floatX *Qs = (floatX *)smem, *dYs = Qs + FMMA_TILE * LD;                // own queries (FMMA_ROWS, LD)
    floatX *Ks = dYs + FMMA_TILE * LD, *Vs = Ks + 2 * FMMA_TILE * LD;       // two (FMMA_TILE, LD) each
    int tile = gridDim.z - 1 - blockIdx.z;  // the longest rows first
    int h = blockIdx.x, b = blockIdx.y, kvh = h / (NH / NKV), warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int t0 = tile * FMMA_ROWS, tr = t0 + warp * 16 + lane / 4, c2 = lane % 4 * 2;  // the lane's queries tr, tr + 8
    float scale = 1.0f / sqrtf((float)HD), sc = scale * FLASH_LOG2E;
    AttnBiasHead hb = attn_bias_head(ab, h);
    float lr[2], Dr[2];  // lse (in log2 units) and D of rows tr, tr + 8
#pragma unroll
    for (int i = 0; i < 2; i++) {
        int t = tr + 8 * i;
        lr[i] = t < T ? lse[((size_t)b * NH + h) * T + t] * FLASH_LOG2E : 0.0f;
        Dr[i] = t < T ? D[((size_t)b * NH + h) * T + t] : 0.0f;
    }
    flash_mma_load_tile<HD>(Qs, q, b, t0, T, NH, h);
    flash_mma_load_tile<HD>(dYs, dy, b, t0, T, NH, h);
    flash_mma_load_tile<HD>(Ks, k, b, 0, T, NKV, kvh);
    flash_mma_load_tile<HD>(Vs, v, b, 0, T, NKV, kvh);
    cp_async_commit();
    uint32_t qf[HD / 16][4], dyf[HD / 16][4];  // the warp's 16 queries and their dY
    float dqa[DB][4];
#pragma unroll
    for (int d = 0; d < DB; d++) dqa[d][0] = dqa[d][1] = dqa[d][2] = dqa[d][3] = 0.0f;
    for (int j = 0; j <= tile; j++) {
        const floatX *Kj = Ks + (j % 2) * FMMA_TILE * LD, *Vj = Vs + (j % 2) * FMMA_TILE * LD;
        flash_mma_next_kv<HD>(Ks, Vs, k, v, b, j, tile, T, NKV, kvh);
        if (j == 0) {
            flash_mma_load_a<HD>(qf, Qs + warp * 16 * LD);
            flash_mma_load_a<HD>(dyf, dYs + warp * 16 * LD);
        }
#pragma unroll 1
        for (int c0 = 0; c0 < FMMA_TILE; c0 += FMMA_CHUNK) {
            float s[NC][4], dp[NC][4];
            flash_mma_scores<HD, FMMA_CHUNK>(s, qf, Kj + c0 * LD);    // S (16 queries, FMMA_CHUNK keys)
            flash_mma_scores<HD, FMMA_CHUNK>(dp, dyf, Vj + c0 * LD);  // dP
#pragma unroll
            for (int nb = 0; nb < NC; nb++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    int t = tr + e / 2 * 8, key = j * FMMA_TILE + c0 + nb * 8 + c2 + e % 2;
                    float ds = 0.0f;
                    if (key <= t && t < T) {
                        float p = exp2f(s[nb][e] * sc + attn_bias_at(hb, t - key) * FLASH_LOG2E - lr[e / 2]);
                        ds = p * (dp[nb][e] - Dr[e / 2]) * scale;
                    }
                    dp[nb][e] = ds;
                }
            uint32_t dsf[FMMA_CHUNK / 16][4];
            flash_mma_pack<FMMA_CHUNK>(dsf, dp);
            flash_mma_accumulate<HD, FMMA_CHUNK>(dqa, dsf, Kj + c0 * LD);  // dQ_w += dS K
        }
        __syncthreads();
    }
    const float one[2] = {1.0f, 1.0f};
    flash_mma_store<HD>(dq, Qs + warp * 16 * LD, dqa, one, b, t0 + warp * 16, T, NH, h);
}

template <int HDP>
static void flash_tc_forward_hd(floatX *y, float *lse, const floatX *q, const floatX *k, const floatX *v, int B, int T,
                                int NH, int NKV, int hd, AttnBias ab) {
    static bool opted = false;  // above 48 KiB a kernel must opt in to dynamic shared memory
    if (!opted) {
        cudaCheck(cudaFuncSetAttribute(flash_tc_forward_kernel_v1<HDP>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       (int)FtcSmem<HDP>::fwd));
        opted = true;
    }
    flash_tc_forward_kernel_v1<HDP><<<dim3(ceil_div(T, FTC_ROWS), NH, B), FTC_THREADS, FtcSmem<HDP>::fwd>>>(
        y, lse, q, k, v, T, NH, NKV, hd, ab);
    cudaCheck(cudaGetLastError());
}

template <int HDP>
static void flash_tc_backward_hd(floatX *dq, floatX *dk, floatX *dv, const float *D, const floatX *dy, const float *lse,
                                 const floatX *q, const floatX *k, const floatX *v, int B, int T, int NH, int NKV,
                                 int hd, AttnBias ab) {
    static bool opted = false;
    if (!opted) {
        cudaCheck(cudaFuncSetAttribute(flash_tc_backward_kv_kernel_v1<HDP>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       (int)FtcSmem<HDP>::kv));
        cudaCheck(cudaFuncSetAttribute(flash_tc_backward_q_kernel_v1<HDP>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       (int)FtcSmem<HDP>::q));
        opted = true;
    }
    flash_tc_backward_kv_kernel_v1<HDP><<<dim3(ceil_div(T, FTC_ROWS), NKV, B), FTC_THREADS, FtcSmem<HDP>::kv>>>(
        dk, dv, dy, lse, D, q, k, v, T, NH, NKV, hd, ab);
    cudaCheck(cudaGetLastError());
    flash_tc_backward_q_kernel_v1<HDP><<<dim3(ceil_div(T, FTC_ROWS), NH, B), FTC_THREADS, FtcSmem<HDP>::q>>>(
        dq, dy, lse, D, q, k, v, T, NH, NKV, hd, ab);
    cudaCheck(cudaGetLastError());
}

template <int HD>
static void flash_mma_forward_hd(floatX *y, float *lse, const floatX *q, const floatX *k, const floatX *v, int B, int T,
                                 int NH, int NKV, AttnBias ab) {
    static bool opted = false;
    if (!opted) {
        cudaCheck(cudaFuncSetAttribute(flash_tc_forward_kernel_v2<HD>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       (int)FmmaSmem<HD>::fwd));
        opted = true;
    }
    flash_tc_forward_kernel_v2<HD><<<fmma_grid(NH, B, T), FMMA_THREADS, FmmaSmem<HD>::fwd>>>(
        y, lse, q, k, v, T, NH, NKV, ab);
    cudaCheck(cudaGetLastError());
}

// The forward on tensor cores that --attention flash runs: 1 (WMMA, any even hd up to 128) or
// 2 (mma.sync, FA2-class; falls back to 1). dev/cuda/attention.cu validates and times both.
#define FLASH_FWD_VARIANT 2
// the variant that runs when v is asked for: v2 takes hd 32, 64 or 128 and 16-byte aligned
// tensors; *why (when given) says why it falls back (llmc/cuda/variants.cuh)
static inline int flash_forward_variant_for(int v, int hd, const void *y, const void *q, const void *k, const void *vv,
                                            const char **why = NULL) {
    if (v < 2) return 1;
    if (hd != 32 && hd != 64 && hd != 128) return variant_fallback(why, "v2 takes hd 32, 64 or 128", 1);
    if (!aligned128(y, q, k, vv)) return variant_fallback(why, "a tensor is not on 16 bytes", 1);
    return 2;
}

// as flash_forward_cuda_cores, on tensor cores; variant: flash_forward_variant_for's v
static void flash_forward_tensor_cores(floatX *y, float *lse, const floatX *q, const floatX *k, const floatX *v, int B,
                                       int T, int NH, int NKV, int hd, AttnBias ab, int variant = FLASH_FWD_VARIANT) {
    const char *why = NULL;
    if (variant_note(VF_FLASH_FWD, variant, flash_forward_variant_for(variant, hd, y, q, k, v, &why), why) == 2) {
        if (hd == 32) flash_mma_forward_hd<32>(y, lse, q, k, v, B, T, NH, NKV, ab);
        else if (hd == 64) flash_mma_forward_hd<64>(y, lse, q, k, v, B, T, NH, NKV, ab);
        else flash_mma_forward_hd<128>(y, lse, q, k, v, B, T, NH, NKV, ab);
        return;
    }
    if (hd <= 32) flash_tc_forward_hd<32>(y, lse, q, k, v, B, T, NH, NKV, hd, ab);
    else if (hd <= 64) flash_tc_forward_hd<64>(y, lse, q, k, v, B, T, NH, NKV, hd, ab);
    else flash_tc_forward_hd<FLASH_MAX_HD>(y, lse, q, k, v, B, T, NH, NKV, hd, ab);
}

template <int HD>
static void flash_mma_backward_hd(floatX *dq, floatX *dk, floatX *dv, const float *D, const floatX *dy, const float *lse,
                                  const floatX *q, const floatX *k, const floatX *v, int B, int T, int NH, int NKV,
                                  AttnBias ab) {
    static bool opted = false;
    if (!opted) {
        cudaCheck(cudaFuncSetAttribute(flash_tc_backward_kv_kernel_v2<HD>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       (int)FmmaSmem<HD>::bwd));
        cudaCheck(cudaFuncSetAttribute(flash_tc_backward_q_kernel_v2<HD>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       (int)FmmaSmem<HD>::bwd));
        opted = true;
    }
    flash_tc_backward_kv_kernel_v2<HD><<<fmma_grid(NKV, B, T), FMMA_THREADS, FmmaSmem<HD>::bwd>>>(
        dk, dv, dy, lse, D, q, k, v, T, NH, NKV, ab);
    cudaCheck(cudaGetLastError());
    flash_tc_backward_q_kernel_v2<HD><<<fmma_grid(NH, B, T), FMMA_THREADS, FmmaSmem<HD>::bwd>>>(
        dq, dy, lse, D, q, k, v, T, NH, NKV, ab);
    cudaCheck(cudaGetLastError());
}

// The backward on tensor cores that --attention flash runs: 1 (WMMA) or 2 (mma.sync, FA2-class;
// falls back to 1 as the forward does). dev/cuda/attention_backward.cu validates and times both.
#define FLASH_BWD_VARIANT 2
static inline int flash_backward_variant_for(int v, int hd, const void *dq, const void *dk, const void *dv,
                                             const void *dy, const void *q, const void *k, const void *vv,
                                             const char **why = NULL) {
    if (flash_forward_variant_for(v, hd, dq, dk, dv, dy, why) != 2) return 1;
    if (!aligned128(q, k, vv)) return variant_fallback(why, "a tensor is not on 16 bytes", 1);
    return 2;
}

// as flash_backward_cuda_cores, on tensor cores; variant: flash_backward_variant_for's v
static void flash_backward_tensor_cores(floatX *dq, floatX *dk, floatX *dv, float *D, const floatX *dy, const floatX *y,
                                        const float *lse, const floatX *q, const floatX *k, const floatX *v, int B, int T,
                                        int NH, int NKV, int hd, AttnBias ab, int variant = FLASH_BWD_VARIANT) {
    size_t rows = (size_t)B * T * NH;
    flash_backward_dot_kernel<<<ceil_div(rows, 8), 256>>>(D, dy, y, B, T, NH, hd);
    cudaCheck(cudaGetLastError());
    const char *why = NULL;
    if (variant_note(VF_FLASH_BWD, variant, flash_backward_variant_for(variant, hd, dq, dk, dv, dy, q, k, v, &why), why) ==
        2) {
        if (hd == 32) flash_mma_backward_hd<32>(dq, dk, dv, D, dy, lse, q, k, v, B, T, NH, NKV, ab);
        else if (hd == 64) flash_mma_backward_hd<64>(dq, dk, dv, D, dy, lse, q, k, v, B, T, NH, NKV, ab);
        else flash_mma_backward_hd<128>(dq, dk, dv, D, dy, lse, q, k, v, B, T, NH, NKV, ab);
        return;
    }
    if (hd <= 32) flash_tc_backward_hd<32>(dq, dk, dv, D, dy, lse, q, k, v, B, T, NH, NKV, hd, ab);
    else if (hd <= 64) flash_tc_backward_hd<64>(dq, dk, dv, D, dy, lse, q, k, v, B, T, NH, NKV, hd, ab);
    else flash_tc_backward_hd<FLASH_MAX_HD>(dq, dk, dv, D, dy, lse, q, k, v, B, T, NH, NKV, hd, ab);
}
#endif

// A learned bias's gradient on the flash path, which keeps no (T,T) matrix: the diagonal
// sums diag (B,NH,T) of dX_ts = p_ts (dy_t . v_s - D_t), recomputed from q, k, v, dy, lse
// and D. One thread per diagonal, t ascending (the CPU's order): a plain path of
// O(T^2 hd) per (b, h) that runs only with a learned table. mirrors the diag in attention_backward
__global__ void flash_bias_diag_kernel(float *diag, const floatX *dy, const float *lse, const float *D, const floatX *q,
                                       const floatX *k, const floatX *v, int B, int T, int NH, int NKV, int hd,
                                       AttnBias ab) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;  // over (B,NH,T)
    if (i >= (size_t)B * NH * T) return;
    int d = (int)(i % T), h = (int)((i / T) % NH), b = (int)(i / ((size_t)T * NH)), kvh = h / (NH / NKV);
    float scale = 1.0f / sqrtf((float)hd), bias = attn_bias_at(attn_bias_head(ab, h), d);
    float acc = 0.0f;
    for (int t = d; t < T; t++) {
        size_t qo = (((size_t)b * T + t) * NH + h) * hd, ko = (((size_t)b * T + t - d) * NKV + kvh) * hd;
        float dot = 0.0f, dp = 0.0f;
        for (int c = 0; c < hd; c++) {
            dot += to_f(q[qo + c]) * to_f(k[ko + c]);
            dp += to_f(dy[qo + c]) * to_f(v[ko + c]);
        }
        size_t row = ((size_t)b * NH + h) * T + t;
        acc += expf(dot * scale + bias - lse[row]) * (dp - D[row]);
    }
    diag[i] = acc;
}

// --attention flash: tensor cores in the bf16 build, CUDA cores in the fp32 build (WMMA takes
// no fp32 inputs, and tf32 would miss the fp32 build's 1e-5 checks)
static void flash_attention_forward(floatX *y, float *lse, const floatX *q, const floatX *k, const floatX *v, int B,
                                    int T, int NH, int NKV, int hd, AttnBias ab) {
#ifdef ENABLE_FP32
    flash_forward_cuda_cores(y, lse, q, k, v, B, T, NH, NKV, hd, ab);
#else
    flash_forward_tensor_cores(y, lse, q, k, v, B, T, NH, NKV, hd, ab);
#endif
}
// diag (B,NH,T), when given: the logits' gradient per diagonal (flash_bias_diag_kernel)
static void flash_attention_backward(floatX *dq, floatX *dk, floatX *dv, float *diag, float *D, const floatX *dy,
                                     const floatX *y, const float *lse, const floatX *q, const floatX *k, const floatX *v,
                                     int B, int T, int NH, int NKV, int hd, AttnBias ab) {
#ifdef ENABLE_FP32
    flash_backward_cuda_cores(dq, dk, dv, D, dy, y, lse, q, k, v, B, T, NH, NKV, hd, ab);
#else
    flash_backward_tensor_cores(dq, dk, dv, D, dy, y, lse, q, k, v, B, T, NH, NKV, hd, ab);
#endif
    if (diag) {
        flash_bias_diag_kernel<<<ceil_div((size_t)B * NH * T, 128), 128>>>(diag, dy, lse, D, q, k, v, B, T, NH, NKV, hd,
                                                                          ab);
        cudaCheck(cudaGetLastError());
    }
}
