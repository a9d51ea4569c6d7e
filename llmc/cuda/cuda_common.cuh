// llmc/cuda/cuda_common.cuh: what every CUDA file shares: the precision (floatX: bf16 by
// default, fp32 with -DENABLE_FP32), error checks, the cuBLAS handle, device allocation.
// The CPU emulation (dev/cuda_emu) brings its own versions of these.
#pragma once
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include "../utils.h"

#ifdef ENABLE_FP32
typedef float floatX;
#define CUDA_FX CUDA_R_32F
#define PRECISION_NAME "fp32"
__device__ __forceinline__ floatX to_x(float v) { return v; }
#else
typedef __nv_bfloat16 floatX;
#define CUDA_FX CUDA_R_16BF
#define PRECISION_NAME "bf16"
__device__ __forceinline__ floatX to_x(float v) { return __float2bfloat16(v); }
#endif
__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }

static void cuda_check(cudaError_t e, const char *file, int line) {
    if (e != cudaSuccess) fail("CUDA error at %s:%d: %s", file, line, cudaGetErrorString(e));
}
#define cudaCheck(x) cuda_check((x), __FILE__, __LINE__)
static void cublas_check(cublasStatus_t s, const char *file, int line) {
    if (s != CUBLAS_STATUS_SUCCESS) fail("cuBLAS error %d at %s:%d", (int)s, file, line);
}
#define cublasCheck(x) cublas_check((x), __FILE__, __LINE__)

static cublasHandle_t cublas;
static const float ONE = 1.0f, ZERO = 0.0f;

static void *dmalloc(size_t bytes) {
    void *p = NULL;
    if (bytes && cudaMalloc(&p, bytes) != cudaSuccess)
        fail("out of GPU memory allocating %.2f GiB (lower --batch_size or --eval_len)", bytes / 1073741824.0);
    return p;
}
