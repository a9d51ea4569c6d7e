// llmc/cuda/attention.cuh: causal GQA attention for training, --attention naive (cuBLAS scores, (T,T) probabilities).
#pragma once
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

// ALiBi slope of query head h of n (as alibi_slopes in llmc/schedule.h)
__device__ float alibi_slope(int h, int n) {
    int c = 1;
    while (c * 2 <= n) c *= 2;
    return h < c ? exp2f(-8.0f * (h + 1) / c) : exp2f(-8.0f * (2 * (h - c) + 1) / (2 * c));
}

// ALiBi on raw scores (B,NH,T,T): adds -m_h * alpha * (t - s) / scale, so that the
// softmax's scale * score carries -m_h * alpha * (t - s).   mirrors the bias in attention_forward_train
__global__ void alibi_bias_kernel(floatX *att, int NH, int T, float alpha, float scale, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int s = (int)(i % T), t = (int)((i / T) % T), h = (int)((i / ((size_t)T * T)) % NH);
    if (s <= t) att[i] = to_x(to_f(att[i]) - alibi_slope(h, NH) * alpha * (float)(t - s) / scale);
}

// strided-batched gemm over the B sequences (column-major arguments)
static void gemm_batched(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const floatX *A, int lda,
                         long long sa, const floatX *Bm, int ldb, long long sb, float beta, floatX *Cm, int ldc,
                         long long sc, int batch) {
    cublasCheck(cublasGemmStridedBatchedEx(cublas, ta, tb, m, n, k, &ONE, A, CUDA_FX, lda, sa, Bm, CUDA_FX, ldb, sb,
                                           &beta, Cm, CUDA_FX, ldc, sc, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// alibi_alpha > 0: ALiBi with distances times alibi_alpha
static void attention_forward(floatX *y, floatX *att, const floatX *q, const floatX *k, const floatX *v, int B, int T,
                              int NH, int NKV, int hd, float alibi_alpha) {
    int group = NH / NKV;
    long long sq = (long long)T * NH * hd, skv = (long long)T * NKV * hd, sa = (long long)NH * T * T;
    for (int h = 0; h < NH; h++) {  // S_h = Q_h K_kvh^T
        int kvh = h / group;
        gemm_batched(CUBLAS_OP_T, CUBLAS_OP_N, T, T, hd, k + kvh * hd, NKV * hd, skv, q + h * hd, NH * hd, sq, 0.0f,
                     att + (size_t)h * T * T, T, sa, B);
    }
    if (alibi_alpha > 0) {
        size_t n = (size_t)B * NH * T * T;
        alibi_bias_kernel<<<ceil_div(n, 256), 256>>>(att, NH, T, alibi_alpha, 1.0f / sqrtf((float)hd), n);
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

// dq, dk, dv overwritten; datt (B,NH,T,T) is scratch.         mirrors attention_backward
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
