// llmc/cuda/cuda_utils.cuh: helpers of the kernels: launch sizes, warp and block
// reductions, 128-bit loads and stores.
#pragma once
#include <float.h>
#include "cuda_common.cuh"
#include "variants.cuh"

static inline int ceil_div(size_t a, size_t b) { return (int)((a + b - 1) / b); }

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, o));
    return v;
}
// sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets it
__device__ float block_sum(float v) {
    __shared__ float partial[32];
    __shared__ float total;
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nw = blockDim.x / 32;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float s = lane < nw ? partial[lane] : 0.0f;
        s = warp_sum(s);
        if (lane == 0) total = s;
    }
    __syncthreads();
    return total;
}
__device__ float block_max(float v) {
    __shared__ float partial[32];
    __shared__ float total;
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nw = blockDim.x / 32;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float s = lane < nw ? partial[lane] : -FLT_MAX;
        s = warp_max(s);
        if (lane == 0) total = s;
    }
    __syncthreads();
    return total;
}

// 128-bit packs: 8 bf16 or 4 fp32 moved with one load/store instruction. The pointer
// must be 16-byte aligned (each file checks its layout before using a packed version).
template <class T>
struct alignas(16) Pack128 {
    static constexpr int N = 16 / sizeof(T);
    T v[N];
};
template <class T>
__device__ __forceinline__ Pack128<T> load128(const T *p) {
    Pack128<T> r;
    *reinterpret_cast<int4 *>(r.v) = *reinterpret_cast<const int4 *>(p);
    return r;
}
template <class T>
__device__ __forceinline__ void store128(T *p, const Pack128<T> &r) {
    *reinterpret_cast<int4 *>(p) = *reinterpret_cast<const int4 *>(r.v);
}
#define XVEC (Pack128<floatX>::N)  // floatX elements per 128 bits: 8 (bf16) or 4 (fp32)

// whether every pointer given is on 16 bytes, as a pack's load and store need
static inline bool aligned128(const void *a, const void *b = NULL, const void *c = NULL, const void *d = NULL,
                              const void *e = NULL) {
    return (((uintptr_t)a | (uintptr_t)b | (uintptr_t)c | (uintptr_t)d | (uintptr_t)e) & 15) == 0;
}

// A grow-only device buffer of at least `bytes` (its old contents are not kept)
static void *device_grow(void *p, size_t *cap, size_t bytes) {
    if (bytes <= *cap) return p;
    cudaFree(p);
    *cap = bytes;
    return dmalloc(bytes);
}

// A device copy of host data that a pass reads (positions, the attention bias's slopes and
// buckets): uploaded only when the data differ from the last upload. Grow-only.
typedef struct {
    void *dev, *last;  // the device copy, and the host copy of what it holds
    size_t cap, n;     // bytes
} DeviceMirror;

static void *mirror_upload(DeviceMirror *m, const void *src, size_t bytes) {
    if (m->dev && bytes == m->n && memcmp(m->last, src, bytes) == 0) return m->dev;
    if (bytes > m->cap) {
        cudaFree(m->dev);
        free(m->last);
        m->dev = dmalloc(bytes);
        m->last = xmalloc(bytes);
        m->cap = bytes;
    }
    cudaCheck(cudaMemcpy(m->dev, src, bytes, cudaMemcpyHostToDevice));
    memcpy(m->last, src, bytes);
    m->n = bytes;
    return m->dev;
}
