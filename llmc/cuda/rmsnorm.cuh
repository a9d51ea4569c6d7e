// llmc/cuda/rmsnorm.cuh: RMSNorm forward and backward (dw summed in a fixed order).
#pragma once
#include "cuda_utils.cuh"

// RMSNorm, one warp per row. out (N,C) = x * rstd * w, rstd (N) fp32
//                                                             mirrors rmsnorm_forward
__global__ void rmsnorm_forward_kernel(floatX *out, float *rstd, const floatX *x, const floatX *w, int N, int C,
                                       float eps) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N) return;
    const floatX *xr = x + (size_t)row * C;
    float ss = 0.0f;
    for (int c = lane; c < C; c += 32) {
        float v = to_f(xr[c]);
        ss += v * v;
    }
    float r = rsqrtf(warp_sum(ss) / C + eps);
    for (int c = lane; c < C; c += 32) out[(size_t)row * C + c] = to_x(to_f(xr[c]) * r * to_f(w[c]));
    if (lane == 0) rstd[row] = r;
}

// dx (+)= rstd * (g*w - xhat * mean(g*w*xhat)), one warp per row. The block's share of
// dw, sum over its rows of g*xhat, goes to dw_part (gridDim.x, C) with the rows added in
// a fixed order (no atomics), so dw does not depend on scheduling.  mirrors rmsnorm_backward
__global__ void rmsnorm_backward_kernel(floatX *dx, float *dw_part, const floatX *dout, const floatX *x, const floatX *w,
                                        const float *rstd, int N, int C, int accumulate) {
    extern __shared__ float dw_shared[];  // (C)
    for (int c = threadIdx.x; c < C; c += blockDim.x) dw_shared[c] = 0.0f;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, row = blockIdx.x * (blockDim.x / 32) + warp;
    const floatX *xr = x + (size_t)row * C, *g = dout + (size_t)row * C;
    float r = row < N ? rstd[row] : 0.0f;
    if (row < N) {
        float dot = 0.0f;
        for (int c = lane; c < C; c += 32) dot += to_f(g[c]) * to_f(w[c]) * to_f(xr[c]) * r;
        dot = warp_sum(dot) / C;
        floatX *d = dx + (size_t)row * C;
        for (int c = lane; c < C; c += 32) {
            float xhat = to_f(xr[c]) * r, gc = to_f(g[c]);
            float v = r * (gc * to_f(w[c]) - xhat * dot);
            d[c] = to_x(accumulate ? to_f(d[c]) + v : v);
        }
    }
    for (int k = 0; k < (int)blockDim.x / 32; k++) {  // the block's rows in order
        __syncthreads();
        if (warp == k && row < N)
            for (int c = lane; c < C; c += 32) dw_shared[c] += to_f(g[c]) * (to_f(xr[c]) * r);
    }
    __syncthreads();
    for (int c = threadIdx.x; c < C; c += blockDim.x) dw_part[(size_t)blockIdx.x * C + c] = dw_shared[c];
}

// dw (C) += the sum of dw_part (nb, C) over its nb rows, in a fixed order: thread (x, y) of
// a 32 x 8 block sums rows y, y + 8, ... of column 32 * blockIdx.x + x, then row 0 adds the 8.
__global__ void rmsnorm_dw_kernel(float *dw, const float *dw_part, int nb, int C) {
    __shared__ float s[8][32];
    int c = blockIdx.x * 32 + threadIdx.x;
    float acc = 0.0f;
    if (c < C)
        for (int b = threadIdx.y; b < nb; b += 8) acc += dw_part[(size_t)b * C + c];
    s[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        float t = 0.0f;
        for (int y = 0; y < 8; y++) t += s[y][threadIdx.x];
        dw[c] += t;
    }
}

// dx (N,C) (+)= the RMSNorm backward; dw (C) fp32 += sum_rows g*xhat. dw_part: scratch of
// ceil(N/8) x C floats.
static void rmsnorm_backward(floatX *dx, float *dw, float *dw_part, const floatX *dout, const floatX *x, const floatX *w,
                             const float *rstd, int N, int C, int accumulate) {
    int nb = ceil_div(N, 8);
    size_t smem = (size_t)C * sizeof(float);
    static size_t opted = 48 * 1024;  // above 48 KiB (C > 12288) a kernel must opt in
    if (smem > opted) {
        cudaCheck(cudaFuncSetAttribute(rmsnorm_backward_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        opted = smem;
    }
    rmsnorm_backward_kernel<<<nb, 256, smem>>>(dx, dw_part, dout, x, w, rstd, N, C, accumulate);
    cudaCheck(cudaGetLastError());
    rmsnorm_dw_kernel<<<ceil_div(C, 32), dim3(32, 8)>>>(dw, dw_part, nb, C);
    cudaCheck(cudaGetLastError());
}
