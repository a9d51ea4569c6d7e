// llmc/cuda/matmul.cuh: the linear layers' products through cuBLAS (fp32 accumulation).
#pragma once
#include "cuda_common.cuh"

// matmul (cuBLAS). Row-major X (r,c) is column-major X^T, so each call below is the
// column-major form of the row-major product in its comment.

// out (N,OC) = inp (N,IC) . weight (OC,IC)^T                 mirrors matmul_forward
static void matmul_forward(floatX *out, const floatX *inp, const floatX *weight, int N, int IC, int OC) {
    cublasCheck(cublasGemmEx(cublas, CUBLAS_OP_T, CUBLAS_OP_N, OC, N, IC, &ONE, weight, CUDA_FX, IC, inp, CUDA_FX, IC,
                             &ZERO, out, CUDA_FX, OC, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// dinp (N,IC) (+)= dout (N,OC) . weight (OC,IC); dweight (OC,IC) fp32 += dout^T . inp
//                                                             mirrors matmul_backward
static void matmul_dweight(float *dweight, const floatX *dout, const floatX *inp, int N, int IC, int OC);
static void matmul_backward(floatX *dinp, float *dweight, const floatX *dout, const floatX *inp, const floatX *weight,
                            int N, int IC, int OC, int accumulate_dinp) {
    const float *beta = accumulate_dinp ? &ONE : &ZERO;
    cublasCheck(cublasGemmEx(cublas, CUBLAS_OP_N, CUBLAS_OP_N, IC, N, OC, &ONE, weight, CUDA_FX, IC, dout, CUDA_FX, OC,
                             beta, dinp, CUDA_FX, IC, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    matmul_dweight(dweight, dout, inp, N, IC, OC);
}

// dweight (OC,IC) fp32 += dout (N,OC)^T . inp (N,IC)
static void matmul_dweight(float *dweight, const floatX *dout, const floatX *inp, int N, int IC, int OC) {
    cublasCheck(cublasGemmEx(cublas, CUBLAS_OP_N, CUBLAS_OP_T, IC, OC, N, &ONE, inp, CUDA_FX, IC, dout, CUDA_FX, OC,
                             &ONE, dweight, CUDA_R_32F, IC, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// dinp (N,IC) fp32 += dout (N,OC) . weight (OC,IC): the GRU's gradient carried back in time
static void matmul_dinp_f32(float *dinp, const floatX *dout, const floatX *weight, int N, int IC, int OC) {
    cublasCheck(cublasGemmEx(cublas, CUBLAS_OP_N, CUBLAS_OP_N, IC, N, OC, &ONE, weight, CUDA_FX, IC, dout, CUDA_FX, OC,
                             &ONE, dinp, CUDA_R_32F, IC, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}
