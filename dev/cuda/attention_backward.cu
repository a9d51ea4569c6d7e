// dev/cuda/attention_backward.cu: causal GQA attention backward. dy, q (B,T,NH,hd), k, v
// (B,T,NKV,hd); dq (B,T,NH,hd), dk, dv (B,T,NKV,hd), overwritten; query head h reads
// key/value head h / (NH/NKV), and dk, dv sum the group's query heads.
//
//   v1  train_gpt.cu's --attention naive (attention_backward): dP = dY V^T per head through
//       cuBLAS into (B,NH,T,T), softmax_backward_kernel in place, then dQ = dS K,
//       dK += dS^T Q, dV += P^T dY through cuBLAS. Reads the forward's probabilities P.
//   v2  train_gpt.cu's --attention flash of the fp32 build (flash_backward_cuda_cores): D =
//       rowsum(dY * Y), then a dK/dV kernel (a thread per key, the group's heads summed in
//       registers) and a dQ kernel (a thread per query), both recomputing P from the
//       forward's lse (B,NH,T). CUDA cores, fp32 math. Also takes ALiBi (the bias is
//       recomputed with P).
//   v3  train_gpt.cu's --attention flash of the bf16 build (flash_backward_tensor_cores; bf16
//       only): D as v2, then a dK/dV kernel (4 warps x 16 keys; S^T = K Q^T, dP^T = V dY^T,
//       dV += P^T dY, dK += dS^T Q, the group's heads summed in fp32 accumulator fragments)
//       and a dQ kernel (4 warps x 16 queries; dQ += dS K), every product on tensor cores
//       (WMMA 16x16x16, fp32 accumulation), P and dS in fp32 then bf16 for the products.
//
// Validation on random q, k, v, dy against the CPU reference (attention_backward of
// train_gpt_cpu.c, serial), outputs poisoned with NaN first: GQA, T off every tile (1000),
// MQA with hd 128, hd 32 with ALiBi at alpha 8, hd 48 with ALiBi. The forward's P, y and
// lse come from the CPU, rounded to what the trainer keeps (P and y in floatX, lse in fp32).
// v1 is judged against D = sum_s P dP, v2 and v3 against D = rowsum(dY y) from that kept y
// (their recipe: in bf16 the rounded y alone moves dq's first rows by up to 1e-1 of the
// scale, which the elementwise bound of check_close would count against the kernels).
// Benchmark: the 10M preset, B=16 T=2048 NH=NKV=6 hd=64. TFLOP/s counts the causal work
// of the four products (8 * B * NH * hd * T(T+1)/2), the same for both versions.
//
// usage: ./attention_backward_bin [VERSION] [--no-bench]
#include "common.h"

// ----------------------------------------------------------------------------
// CPU reference: the forward (P, y, lse; ALiBi bias_h * (t - s)) and attention_backward
// of train_gpt_cpu.c (serial)
static void forward_cpu(float *P, float *y, float *lse, const float *q, const float *k, const float *v, int B, int T,
                        int NH, int NKV, int hd, const float *bias) {
    int group = NH / NKV;
    float scale = 1.0f / sqrtf((float)hd);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                int kvh = h / group;
                const float *qt = q + (((size_t)b * T + t) * NH + h) * hd;
                float *a = P + (((size_t)b * NH + h) * T + t) * T, maxv = -INFINITY;
                for (int s = 0; s <= t; s++) {
                    const float *ks = k + (((size_t)b * T + s) * NKV + kvh) * hd;
                    float dot = 0.0f;
                    for (int i = 0; i < hd; i++) dot += qt[i] * ks[i];
                    a[s] = dot * scale - bias[h] * (float)(t - s);
                    maxv = fmaxf(maxv, a[s]);
                }
                double sum = 0.0;
                for (int s = 0; s <= t; s++) sum += exp((double)a[s] - maxv);
                lse[((size_t)b * NH + h) * T + t] = (float)(maxv + log(sum));
                float *yt = y + (((size_t)b * T + t) * NH + h) * hd;
                for (int i = 0; i < hd; i++) yt[i] = 0.0f;
                for (int s = 0; s < T; s++) {
                    a[s] = s <= t ? (float)(exp((double)a[s] - maxv) / sum) : 0.0f;
                    const float *vs = v + (((size_t)b * T + s) * NKV + kvh) * hd;
                    if (s <= t)
                        for (int i = 0; i < hd; i++) yt[i] += a[s] * vs[i];
                }
            }
}

// y null: D = sum_s P dP (v1's recipe, from the forward's P); y given: D = rowsum(dY * y),
// the flash recipe's, from the output as the trainer keeps it (floatX)
static void backward_cpu(float *dq, float *dk, float *dv, const float *dy, const float *P, const float *q,
                         const float *k, const float *v, const float *y, int B, int T, int NH, int NKV, int hd) {
    int group = NH / NKV;
    float scale = 1.0f / sqrtf((float)hd);
    std::vector<float> ds(T);
    size_t nkv = (size_t)B * T * NKV * hd;
    std::fill(dk, dk + nkv, 0.0f);
    std::fill(dv, dv + nkv, 0.0f);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                int kvh = h / group;
                const float *p = P + (((size_t)b * NH + h) * T + t) * T;
                const float *dyt = dy + (((size_t)b * T + t) * NH + h) * hd, *qt = q + (((size_t)b * T + t) * NH + h) * hd;
                float dsum = 0.0f;
                for (int s = 0; s <= t; s++) {
                    const float *vs = v + (((size_t)b * T + s) * NKV + kvh) * hd;
                    float dp = 0.0f;
                    for (int i = 0; i < hd; i++) dp += dyt[i] * vs[i];
                    ds[s] = dp;
                    dsum += p[s] * dp;
                }
                if (y) {
                    const float *yt = y + (((size_t)b * T + t) * NH + h) * hd;
                    dsum = 0.0f;
                    for (int i = 0; i < hd; i++) dsum += dyt[i] * yt[i];
                }
                float *dqt = dq + (((size_t)b * T + t) * NH + h) * hd;
                for (int i = 0; i < hd; i++) dqt[i] = 0.0f;
                for (int s = 0; s <= t; s++) {
                    float d = p[s] * (ds[s] - dsum) * scale;
                    const float *ks = k + (((size_t)b * T + s) * NKV + kvh) * hd;
                    float *dks = dk + (((size_t)b * T + s) * NKV + kvh) * hd, *dvs = dv + (((size_t)b * T + s) * NKV + kvh) * hd;
                    for (int i = 0; i < hd; i++) {
                        dqt[i] += d * ks[i];
                        dks[i] += d * qt[i];
                        dvs[i] += p[s] * dyt[i];
                    }
                }
            }
}

// ----------------------------------------------------------------------------
// v1 and v2: copied from train_gpt.cu (make check-v1 verifies the copies)
static cublasHandle_t cublas;
static const float ONE = 1.0f;

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

static void gemm_batched(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const floatX *A, int lda,
                         long long sa, const floatX *Bm, int ldb, long long sb, float beta, floatX *Cm, int ldc,
                         long long sc, int batch) {
    cublasCheck(cublasGemmStridedBatchedEx(cublas, ta, tb, m, n, k, &ONE, A, CUDA_FX, lda, sa, Bm, CUDA_FX, ldb, sb,
                                           &beta, Cm, CUDA_FX, ldc, sc, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

static void attention_backward(floatX *dq, floatX *dk, floatX *dv, floatX *datt, const floatX *dy, const floatX *att,
                               const floatX *q, const floatX *k, const floatX *v, int B, int T, int NH, int NKV,
                               int hd) {
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

// ALiBi slope of query head h of n
__device__ float alibi_slope(int h, int n) {
    int c = 1;
    while (c * 2 <= n) c *= 2;
    return h < c ? exp2f(-8.0f * (h + 1) / c) : exp2f(-8.0f * (2 * (h - c) + 1) / (2 * c));
}

#define FLASH_ROWS 64
#define FLASH_TILE 32
#define FLASH_MAX_HD 128  // as llmc/config.h

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

__device__ void flash_load_rows(float *dst, int ld, int n, const floatX *src, int b, int r0, int T, int H, int h, int hd) {
    for (int i = threadIdx.x; i < n * hd; i += blockDim.x) {
        int r = i / hd, c = i % hd, t = r0 + r;
        dst[r * ld + c] = t < T ? to_f(src[(((size_t)b * T + t) * H + h) * hd + c]) : 0.0f;
    }
}

template <int HDMAX>
__global__ void __launch_bounds__(FLASH_ROWS) flash_backward_kv_kernel(floatX *dk, floatX *dv, const floatX *dy,
                                                                       const float *lse, const float *D, const floatX *q,
                                                                       const floatX *k, const floatX *v, int T, int NH,
                                                                       int NKV, int hd, float alibi_alpha) {
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
        float bias = alibi_alpha > 0 ? alibi_slope(h, NH) * alibi_alpha : 0.0f;
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
                float p = expf(dot * scale - bias * (float)(t - s) - lses[j]);
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

template <int HDMAX>
__global__ void __launch_bounds__(FLASH_ROWS) flash_backward_q_kernel(floatX *dq, const floatX *dy, const float *lse,
                                                                      const float *D, const floatX *q, const floatX *k,
                                                                      const floatX *v, int T, int NH, int NKV, int hd,
                                                                      float alibi_alpha) {
    extern __shared__ float sm[];
    int ld = hd + 1;
    float *qown = sm, *dyown = qown + FLASH_ROWS * ld;                  // (FLASH_ROWS, hd+1)
    float *ks = dyown + FLASH_ROWS * ld, *vs = ks + FLASH_TILE * HDMAX;  // (FLASH_TILE, HDMAX)
    int tile = gridDim.x - 1 - blockIdx.x;  // the longest rows first
    int h = blockIdx.y, b = blockIdx.z, kvh = h / (NH / NKV), r = threadIdx.x;
    int t0 = tile * FLASH_ROWS, t = t0 + r, last = min(t0 + FLASH_ROWS, T) - 1;
    float scale = 1.0f / sqrtf((float)hd), bias = alibi_alpha > 0 ? alibi_slope(h, NH) * alibi_alpha : 0.0f;
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
            float p = expf(dot * scale - bias * (float)(t - s) - lt);
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

static size_t flash_backward_smem(int hd, int hdmax) {
    return (2 * (size_t)FLASH_ROWS * (hd + 1) + 2 * (size_t)FLASH_TILE * hdmax + 2 * FLASH_TILE) * sizeof(float);
}

template <int HDMAX>
static void flash_backward_hd(floatX *dq, floatX *dk, floatX *dv, const float *D, const floatX *dy, const float *lse,
                              const floatX *q, const floatX *k, const floatX *v, int B, int T, int NH, int NKV, int hd,
                              float alibi_alpha) {
    size_t smem = flash_backward_smem(hd, HDMAX);
    static size_t opted = 0;  // above 48 KiB a kernel must opt in to dynamic shared memory
    if (smem > opted) {
        size_t most = flash_backward_smem(HDMAX, HDMAX);
        cudaCheck(cudaFuncSetAttribute(flash_backward_kv_kernel<HDMAX>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)most));
        cudaCheck(cudaFuncSetAttribute(flash_backward_q_kernel<HDMAX>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)most));
        opted = most;
    }
    flash_backward_kv_kernel<HDMAX><<<dim3(ceil_div(T, FLASH_ROWS), NKV, B), FLASH_ROWS, smem>>>(
        dk, dv, dy, lse, D, q, k, v, T, NH, NKV, hd, alibi_alpha);
    cudaCheck(cudaGetLastError());
    flash_backward_q_kernel<HDMAX><<<dim3(ceil_div(T, FLASH_ROWS), NH, B), FLASH_ROWS, smem>>>(
        dq, dy, lse, D, q, k, v, T, NH, NKV, hd, alibi_alpha);
    cudaCheck(cudaGetLastError());
}

static void flash_backward_cuda_cores(floatX *dq, floatX *dk, floatX *dv, float *D, const floatX *dy, const floatX *y,
                                      const float *lse, const floatX *q, const floatX *k, const floatX *v, int B, int T,
                                      int NH, int NKV, int hd, float alibi_alpha) {
    size_t rows = (size_t)B * T * NH;
    flash_backward_dot_kernel<<<ceil_div(rows, 8), 256>>>(D, dy, y, B, T, NH, hd);
    cudaCheck(cudaGetLastError());
    if (hd <= 32) flash_backward_hd<32>(dq, dk, dv, D, dy, lse, q, k, v, B, T, NH, NKV, hd, alibi_alpha);
    else if (hd <= 64) flash_backward_hd<64>(dq, dk, dv, D, dy, lse, q, k, v, B, T, NH, NKV, hd, alibi_alpha);
    else flash_backward_hd<FLASH_MAX_HD>(dq, dk, dv, D, dy, lse, q, k, v, B, T, NH, NKV, hd, alibi_alpha);
}

// ----------------------------------------------------------------------------
// v3: train_gpt.cu's --attention flash backward, bf16 build: tensor cores (copied; make
// check-v1 verifies the copy)
#ifndef ENABLE_FP32
#include <mma.h>
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

__device__ void flash_tc_write_rows(floatX *dst, const float *src, int ld, int b, int r0, int T, int H, int h, int hd) {
    for (int i = threadIdx.x % 32; i < 16 * hd; i += 32) {
        int r = i / hd, c = i % hd, t = r0 + r;
        if (t < T) dst[(((size_t)b * T + t) * H + h) * hd + c] = to_x(src[r * ld + c]);
    }
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

template <int HDP>
__global__ void __launch_bounds__(FTC_THREADS) flash_tc_backward_kv_kernel(floatX *dk, floatX *dv, const floatX *dy,
                                                                           const float *lse, const float *D,
                                                                           const floatX *q, const floatX *k,
                                                                           const floatX *v, int T, int NH, int NKV,
                                                                           int hd, float alibi_alpha) {
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
        float bias = alibi_alpha > 0 ? alibi_slope(h, NH) * alibi_alpha : 0.0f;
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
                    p = expf(STw[kr * FTC_LDS + qc] * scale - bias * (float)(t - s) - lses[qc]);
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

template <int HDP>
__global__ void __launch_bounds__(FTC_THREADS) flash_tc_backward_q_kernel(floatX *dq, const floatX *dy, const float *lse,
                                                                          const float *D, const floatX *q,
                                                                          const floatX *k, const floatX *v, int T, int NH,
                                                                          int NKV, int hd, float alibi_alpha) {
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
    float scale = 1.0f / sqrtf((float)hd), bias = alibi_alpha > 0 ? alibi_slope(h, NH) * alibi_alpha : 0.0f;
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
                float p = expf(Sw[qr * FTC_LDS + kc] * scale - bias * (float)(t - s) - lses[warp * 16 + qr]);
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

template <int HDP>
static void flash_tc_backward_hd(floatX *dq, floatX *dk, floatX *dv, const float *D, const floatX *dy, const float *lse,
                                 const floatX *q, const floatX *k, const floatX *v, int B, int T, int NH, int NKV,
                                 int hd, float alibi_alpha) {
    static bool opted = false;
    if (!opted) {
        cudaCheck(cudaFuncSetAttribute(flash_tc_backward_kv_kernel<HDP>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       (int)FtcSmem<HDP>::kv));
        cudaCheck(cudaFuncSetAttribute(flash_tc_backward_q_kernel<HDP>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       (int)FtcSmem<HDP>::q));
        opted = true;
    }
    flash_tc_backward_kv_kernel<HDP><<<dim3(ceil_div(T, FTC_ROWS), NKV, B), FTC_THREADS, FtcSmem<HDP>::kv>>>(
        dk, dv, dy, lse, D, q, k, v, T, NH, NKV, hd, alibi_alpha);
    cudaCheck(cudaGetLastError());
    flash_tc_backward_q_kernel<HDP><<<dim3(ceil_div(T, FTC_ROWS), NH, B), FTC_THREADS, FtcSmem<HDP>::q>>>(
        dq, dy, lse, D, q, k, v, T, NH, NKV, hd, alibi_alpha);
    cudaCheck(cudaGetLastError());
}

static void flash_backward_tensor_cores(floatX *dq, floatX *dk, floatX *dv, float *D, const floatX *dy, const floatX *y,
                                        const float *lse, const floatX *q, const floatX *k, const floatX *v, int B, int T,
                                        int NH, int NKV, int hd, float alibi_alpha) {
    size_t rows = (size_t)B * T * NH;
    flash_backward_dot_kernel<<<ceil_div(rows, 8), 256>>>(D, dy, y, B, T, NH, hd);
    cudaCheck(cudaGetLastError());
    if (hd <= 32) flash_tc_backward_hd<32>(dq, dk, dv, D, dy, lse, q, k, v, B, T, NH, NKV, hd, alibi_alpha);
    else if (hd <= 64) flash_tc_backward_hd<64>(dq, dk, dv, D, dy, lse, q, k, v, B, T, NH, NKV, hd, alibi_alpha);
    else flash_tc_backward_hd<FLASH_MAX_HD>(dq, dk, dv, D, dy, lse, q, k, v, B, T, NH, NKV, hd, alibi_alpha);
}
#endif

// ----------------------------------------------------------------------------
// launchers

#define NV 3
static const char *const VERSIONS[NV + 1] = {
    "", "train_gpt.cu's --attention naive: cuBLAS dP into (B,NH,T,T), softmax_backward_kernel, cuBLAS dQ, dK, dV",
    "train_gpt.cu's --attention flash, fp32 build: D = rowsum(dY Y), dK/dV and dQ kernels recomputing P from lse (CUDA cores)",
    "train_gpt.cu's --attention flash, bf16 build: the same passes on tensor cores (WMMA), 4 warps x 16 rows, tiles of 64"};

static bool supported(int v, int hd, const char **why) {
    *why = "";
    if (v >= 2 && hd > FLASH_MAX_HD) { *why = "hd > 128"; return false; }
#ifdef ENABLE_FP32
    if (v == 3) { *why = "bf16 tensor cores (bf16 build only)"; return false; }
#else
    if (v == 3) {
        size_t bytes = hd <= 32 ? FtcSmem<32>::kv : hd <= 64 ? FtcSmem<64>::kv : FtcSmem<128>::kv;
        if (bytes > device_prop().sharedMemPerBlockOptin) { *why = "not enough shared memory"; return false; }
    }
#endif
    return true;
}

// Everything one version reads: the forward's P (v1), y and lse (v2), and D scratch (v2).
typedef struct {
    floatX *q, *k, *v, *dy, *y, *att, *datt, *dq, *dk, *dv;
    float *lse, *D;
} Bufs;

static void backward_run(int ver, const Bufs &d, int B, int T, int NH, int NKV, int hd, float alibi_alpha) {
    if (ver == 1) attention_backward(d.dq, d.dk, d.dv, d.datt, d.dy, d.att, d.q, d.k, d.v, B, T, NH, NKV, hd);
    else if (ver == 2)
        flash_backward_cuda_cores(d.dq, d.dk, d.dv, d.D, d.dy, d.y, d.lse, d.q, d.k, d.v, B, T, NH, NKV, hd, alibi_alpha);
#ifndef ENABLE_FP32
    else flash_backward_tensor_cores(d.dq, d.dk, d.dv, d.D, d.dy, d.y, d.lse, d.q, d.k, d.v, B, T, NH, NKV, hd, alibi_alpha);
#endif
    cudaCheck(cudaGetLastError());
}

static Bufs bufs_alloc(size_t nq, size_t nkv, size_t natt, size_t nl) {
    Bufs d;
    d.q = dalloc<floatX>(nq); d.dy = dalloc<floatX>(nq); d.y = dalloc<floatX>(nq); d.dq = dalloc<floatX>(nq);
    d.k = dalloc<floatX>(nkv); d.v = dalloc<floatX>(nkv); d.dk = dalloc<floatX>(nkv); d.dv = dalloc<floatX>(nkv);
    d.att = dalloc<floatX>(natt); d.datt = dalloc<floatX>(natt);
    d.lse = dalloc<float>(nl); d.D = dalloc<float>(nl);
    return d;
}
static void bufs_free(Bufs &d) {
    floatX *xs[] = {d.q, d.k, d.v, d.dy, d.y, d.att, d.datt, d.dq, d.dk, d.dv};
    for (floatX *p : xs) cudaCheck(cudaFree(p));
    cudaCheck(cudaFree(d.lse));
    cudaCheck(cudaFree(d.D));
}

typedef struct {
    int B, T, NH, NKV, hd;
    float alibi_alpha;  // 0: no ALiBi
} AttCase;

int main(int argc, char **argv) {
    Args args = parse_args(argc, argv, "attention_backward", VERSIONS, NV);
    device_init(argv[0]);
    cublas = get_cublas();
    int first = args.version ? args.version : 1, last = args.version ? args.version : NV;
    Verdicts vd;
    memset(&vd, 0, sizeof(vd));

    const AttCase cases[] = {
        {2, 256, 6, 2, 64, 0.0f},   // GQA, group 3
        {1, 1000, 6, 6, 64, 0.0f},  // T not a multiple of any tile
        {1, 200, 4, 1, 128, 0.0f},  // MQA, hd 128
        {2, 100, 4, 2, 32, 8.0f},   // ALiBi at PosAug's alpha 8, hd 32
        {1, 300, 4, 2, 48, 1.0f},   // hd 48 (padded to 64 by v3), ALiBi
    };
    Rng rng = rng_make(1337, 7);
    printf("validation (tolerance: norm rel %.0e for %s outputs)\n", FX_TOL, PRECISION_NAME);
    for (const AttCase &c : cases) {
        size_t nq = (size_t)c.B * c.T * c.NH * c.hd, nkv = (size_t)c.B * c.T * c.NKV * c.hd;
        size_t natt = (size_t)c.B * c.NH * c.T * c.T, nl = (size_t)c.B * c.NH * c.T;
        std::vector<float> q(nq), k(nkv), v(nkv), dy(nq);
        fill_normal(q, 0.0f, 1.0f, &rng);
        fill_normal(k, 0.0f, 1.0f, &rng);
        fill_normal(v, 0.0f, 1.0f, &rng);
        fill_normal(dy, 0.0f, 1.0f, &rng);
        round_to_x(q);
        round_to_x(k);
        round_to_x(v);
        round_to_x(dy);
        float bias[64] = {0};
        for (int h = 0; h < c.NH && c.alibi_alpha > 0; h++) {  // as llmc/schedule.h's alibi_slopes
            int p2 = 1;
            while (p2 * 2 <= c.NH) p2 *= 2;
            float m = h < p2 ? exp2f(-8.0f * (h + 1) / p2) : exp2f(-8.0f * (2 * (h - p2) + 1) / (2 * p2));
            bias[h] = m * c.alibi_alpha;
        }
        std::vector<float> P(natt), y(nq), lse(nl), dq_ref(nq), dk_ref(nkv), dv_ref(nkv);
        forward_cpu(P.data(), y.data(), lse.data(), q.data(), k.data(), v.data(), c.B, c.T, c.NH, c.NKV, c.hd, bias);
        round_to_x(y);  // the output as the trainer keeps it
        backward_cpu(dq_ref.data(), dk_ref.data(), dv_ref.data(), dy.data(), P.data(), q.data(), k.data(), v.data(),
                     nullptr, c.B, c.T, c.NH, c.NKV, c.hd);
        // v2, v3: D from the kept y (header)
        std::vector<float> dq_flash(nq), dk_flash(nkv), dv_flash(nkv);
        backward_cpu(dq_flash.data(), dk_flash.data(), dv_flash.data(), dy.data(), P.data(), q.data(), k.data(),
                     v.data(), y.data(), c.B, c.T, c.NH, c.NKV, c.hd);
        Bufs d = bufs_alloc(nq, nkv, natt, nl);
        upload_x(d.q, q);
        upload_x(d.k, k);
        upload_x(d.v, v);
        upload_x(d.dy, dy);
        upload_x(d.y, y);
        upload_x(d.att, P);
        upload_f(d.lse, lse);
        printf("  case B=%d T=%d NH=%d NKV=%d hd=%d alibi alpha %g\n", c.B, c.T, c.NH, c.NKV, c.hd, c.alibi_alpha);
        for (int ver = first; ver <= last; ver++) {
            const char *why;
            if (!supported(ver, c.hd, &why)) {
                printf("   v%d: not supported (%s)\n", ver, why);
                vd.skipped[ver] = 1;
                continue;
            }
            printf("   v%d:\n", ver);
            vd.ran[ver] = 1;
            poison(d.dq, nq * sizeof(floatX));
            poison(d.dk, nkv * sizeof(floatX));
            poison(d.dv, nkv * sizeof(floatX));
            backward_run(ver, d, c.B, c.T, c.NH, c.NKV, c.hd, c.alibi_alpha);
            cudaCheck(cudaDeviceSynchronize());
            bool flash = ver >= 2;
            bool ok = check_close("dq", download_x(d.dq, nq), flash ? dq_flash : dq_ref, FX_TOL);
            ok &= check_close("dk", download_x(d.dk, nkv), flash ? dk_flash : dk_ref, FX_TOL);
            ok &= check_close("dv", download_x(d.dv, nkv), flash ? dv_flash : dv_ref, FX_TOL);
            if (!ok) vd.failed[ver] = 1;
        }
        bufs_free(d);
    }
    for (int ver = first; ver <= last; ver++) verdict_print("attention_backward", ver, &vd);

    if (args.bench) {
        AttCase c = {16, 2048, 6, 6, 64, 0.0f};
        size_t nq = (size_t)c.B * c.T * c.NH * c.hd, nkv = (size_t)c.B * c.T * c.NKV * c.hd;
        size_t natt = (size_t)c.B * c.NH * c.T * c.T, nl = (size_t)c.B * c.NH * c.T;
        double flops = 8.0 * c.B * c.NH * c.hd * ((double)c.T * (c.T + 1) / 2);
        printf("benchmark: B=%d T=%d NH=%d NKV=%d hd=%d (causal %.1f GFLOP), median of 20 runs, L2 flushed\n", c.B, c.T,
               c.NH, c.NKV, c.hd, flops / 1e9);
        measured_gemm_tflops();
        Bufs d = bufs_alloc(nq, nkv, natt, nl);
        std::vector<float> h(nq);
        fill_normal(h, 0.0f, 1.0f, &rng);
        upload_x(d.q, h);
        upload_x(d.dy, h);
        upload_x(d.y, h);
        h.resize(nkv);
        upload_x(d.k, h);
        upload_x(d.v, h);
        cudaCheck(cudaMemset(d.att, 0, natt * sizeof(floatX)));  // the timing does not depend on the values
        std::vector<float> l(nl, 10.0f);
        upload_f(d.lse, l);
        for (int ver = first; ver <= last; ver++) {
            const char *why;
            if (vd.failed[ver] || !supported(ver, c.hd, &why)) continue;
            float us = bench_us([&] { backward_run(ver, d, c.B, c.T, c.NH, c.NKV, c.hd, 0.0f); }, [] {}, 3, 20);
            report_tflops("attention_backward", ver, "", us, flops);
        }
        bufs_free(d);
    }
    return verdict_exit("attention_backward", first, last, &vd);
}
