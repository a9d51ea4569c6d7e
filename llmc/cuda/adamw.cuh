// llmc/cuda/adamw.cuh: the optimizer: gradient norm, loss sums, AdamW, and the floatX copy of the weights.
#pragma once
#include "cuda_utils.cuh"

// optimizer: sum of squares per block (a fixed grid, summed on the host in order, so the
// norm is deterministic), then AdamW with the clip scale folded in.  mirrors grad_global_norm, adamw_update
#define NORM_BLOCKS 512
__global__ void sumsq_kernel(float *partial, const float *g, size_t n) {
    float s = 0.0f;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        s += g[i] * g[i];
    s = block_sum(s);
    if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

// *acc += scale * sum(losses[0..n) (times w[i] when given)), one block in a fixed order
// (deterministic)
__global__ void loss_sum_kernel(float *acc, const float *losses, const float *w, int n, float scale) {
    float s = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) s += w ? w[i] * losses[i] : losses[i];
    s = block_sum(s);
    if (threadIdx.x == 0) *acc += scale * s;
}

// floor: the least value the tensor keeps (its constraint; -INFINITY: none)
__global__ void adamw_kernel(float *p, floatX *px, const float *g, float *m, float *v, size_t n, float lr, float beta1,
                             float beta2, float bc1, float bc2, float eps, float wd, float grad_scale, float floor) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float gi = g[i] * grad_scale;
    float mi = beta1 * m[i] + (1.0f - beta1) * gi;
    float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    float pi = p[i] - lr * ((mi / bc1) / (sqrtf(vi / bc2) + eps) + wd * p[i]);
    if (pi < floor) pi = floor;
    p[i] = pi;
    px[i] = to_x(pi);
}

__global__ void copy_to_x_kernel(floatX *dst, const float *src, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = to_x(src[i]);
}
