// llmc/cuda/swiglu.cuh: SwiGLU forward and backward, and the residual add.
#pragma once
#include "cuda_common.cuh"

// SwiGLU: h = silu(gate) * up                                 mirrors swiglu_forward
__global__ void swiglu_forward_kernel(floatX *h, const floatX *gate, const floatX *up, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float g = to_f(gate[i]);
    h[i] = to_x(g / (1.0f + expf(-g)) * to_f(up[i]));
}

// dgate = dh * up * sig(g) * (1 + g (1 - sig(g))), dup = dh * silu(g)   mirrors swiglu_backward
__global__ void swiglu_backward_kernel(floatX *dgate, floatX *dup, const floatX *dh, const floatX *gate,
                                       const floatX *up, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float g = to_f(gate[i]), sg = 1.0f / (1.0f + expf(-g)), d = to_f(dh[i]);
    dgate[i] = to_x(d * to_f(up[i]) * sg * (1.0f + g * (1.0f - sg)));
    dup[i] = to_x(d * g * sg);
}

// out = a + b                                                 mirrors residual_forward
__global__ void residual_forward_kernel(floatX *out, const floatX *a, const floatX *b, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = to_x(to_f(a[i]) + to_f(b[i]));
}
