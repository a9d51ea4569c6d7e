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

// The backward, a family of two variants (RMSNORM_BWD_VARIANT below picks the trainer's):
// dx (+)= rstd * (g*w - xhat * mean(g*w*xhat)), one warp per row; the block's share of dw,
// the sum over its rows of g*xhat, goes to dw_part (gridDim.x, C) with the rows added in a
// fixed order (no atomics), and rmsnorm_dw_kernel sums the blocks in a fixed order, so dw
// does not depend on scheduling.                                   mirrors rmsnorm_backward
// v1: a block of 8 warps owns 8 rows, scalar loads; its rows' dw added one warp at a time.
__global__ void rmsnorm_backward_kernel_v1(floatX *dx, float *dw_part, const floatX *dout, const floatX *x, const floatX *w,
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

// v2: a block of 8 warps owns RMSNORM_ROWS consecutive rows, warp w its rows w, w + 8, ...
// (a fixed number per block, so the order of dw's sums is the same on every GPU); 128-bit
// loads and stores, lane l owning the packs l, l + 32, ... of every row. Each warp adds
// its rows' g*xhat into its own row of shared memory (its lanes own their columns: no
// barrier, no conflict), and the block sums the 8 rows in order at the end. Against v1:
// packed loads instead of 2-byte ones, no barrier per row, and dw_part 8 times smaller
// (4 bytes per column per 64 rows instead of per 8, which rmsnorm_dw_kernel then reads
// with its few blocks). Needs C % XVEC == 0, 16-byte aligned rows, and 8 C floats of
// shared memory (C <= 1536); rmsnorm_backward runs v1 otherwise.
#define RMSNORM_ROWS 64
__global__ void __launch_bounds__(256) rmsnorm_backward_kernel_v2(floatX *dx, float *dw_part, const floatX *dout,
                                                                   const floatX *x, const floatX *w, const float *rstd,
                                                                   int N, int C, int accumulate) {
    extern __shared__ float dw_warp[];  // (8, C): warp w's sum over its rows
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    float *mine = dw_warp + (size_t)warp * C;
    for (int c = lane * XVEC; c < C; c += 32 * XVEC)
        for (int e = 0; e < XVEC; e++) mine[c + e] = 0.0f;
    for (int i = warp; i < RMSNORM_ROWS; i += 8) {
        int row = blockIdx.x * RMSNORM_ROWS + i;
        if (row >= N) break;
        const floatX *xr = x + (size_t)row * C, *g = dout + (size_t)row * C;
        floatX *d = dx + (size_t)row * C;
        float r = rstd[row], dot = 0.0f;
        for (int c = lane * XVEC; c < C; c += 32 * XVEC) {
            Pack128<floatX> gp = load128(g + c), xp = load128(xr + c), wp = load128(w + c);
#pragma unroll
            for (int e = 0; e < XVEC; e++) dot += to_f(gp.v[e]) * to_f(wp.v[e]) * to_f(xp.v[e]) * r;
        }
        dot = warp_sum(dot) / C;
        for (int c = lane * XVEC; c < C; c += 32 * XVEC) {  // the row again, from L1
            Pack128<floatX> gp = load128(g + c), xp = load128(xr + c), wp = load128(w + c), dp;
            if (accumulate) dp = load128(d + c);
#pragma unroll
            for (int e = 0; e < XVEC; e++) {
                float xhat = to_f(xp.v[e]) * r, gc = to_f(gp.v[e]);
                float v = r * (gc * to_f(wp.v[e]) - xhat * dot);
                dp.v[e] = to_x(accumulate ? to_f(dp.v[e]) + v : v);
                mine[c + e] += gc * xhat;
            }
            store128(d + c, dp);
        }
    }
    __syncthreads();
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float t = 0.0f;
        for (int k = 0; k < 8; k++) t += dw_warp[(size_t)k * C + c];
        dw_part[(size_t)blockIdx.x * C + c] = t;
    }
}

#define RMSNORM_BWD_VARIANT 2
// the variant that runs when v is asked for (*why: why it falls back, llmc/cuda/variants.cuh)
static inline int rmsnorm_backward_variant_for(int v, int C, const void *dx, const void *dout, const void *x,
                                               const void *w, const char **why = NULL) {
    if (v < 2) return 1;
    if (C % XVEC) return variant_fallback(why, "v2 takes C a multiple of the 128-bit pack", 1);
    if (C > 1536) return variant_fallback(why, "v2 takes C up to 1536 (its warps' dw in shared memory)", 1);
    if (!aligned128(dx, dout, x, w)) return variant_fallback(why, "a tensor is not on 16 bytes", 1);
    return 2;
}

// dx (N,C) (+)= the RMSNorm backward; dw (C) fp32 += sum_rows g*xhat. dw_part: scratch of
// ceil(N/8) x C floats (v1's; v2 needs ceil(N/RMSNORM_ROWS) x C).
static void rmsnorm_backward(floatX *dx, float *dw, float *dw_part, const floatX *dout, const floatX *x, const floatX *w,
                             const float *rstd, int N, int C, int accumulate, int variant = RMSNORM_BWD_VARIANT) {
    int nb;
    const char *why = NULL;
    if (variant_note(VF_RMSNORM_BWD, variant, rmsnorm_backward_variant_for(variant, C, dx, dout, x, w, &why), why) == 2) {
        nb = ceil_div(N, RMSNORM_ROWS);
        rmsnorm_backward_kernel_v2<<<nb, 256, 8 * (size_t)C * sizeof(float)>>>(dx, dw_part, dout, x, w, rstd, N, C,
                                                                               accumulate);
    } else {
        nb = ceil_div(N, 8);
        size_t smem = (size_t)C * sizeof(float);
        static size_t opted = 48 * 1024;  // above 48 KiB (C > 12288) a kernel must opt in
        if (smem > opted) {
            cudaCheck(cudaFuncSetAttribute(rmsnorm_backward_kernel_v1, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           (int)smem));
            opted = smem;
        }
        rmsnorm_backward_kernel_v1<<<nb, 256, smem>>>(dx, dw_part, dout, x, w, rstd, N, C, accumulate);
    }
    cudaCheck(cudaGetLastError());
    rmsnorm_dw_kernel<<<ceil_div(C, 32), dim3(32, 8)>>>(dw, dw_part, nb, C);
    cudaCheck(cudaGetLastError());
}
