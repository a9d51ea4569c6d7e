// llmc/cuda/swiglu.cuh: SwiGLU forward and backward, and the residual add.
#pragma once
#include "cuda_utils.cuh"

// SwiGLU's variants, each a kernel pair named _v<N>; dev/cuda/swiglu.cu validates and times
// every one from here, and SWIGLU_VARIANT picks the trainer's (promoting another is this one
// line):
//   1  one element per thread, scalar loads and stores
//   2  one 128-bit pack (bf16x8 / float4) per thread and tensor; the thread after the last
//      pack does the tail
//   3  four packs per thread, a block apart, every load issued before the math
// All compute each element with swiglu_at / swiglu_grad_at: the same bits in every variant.
// On the H200 (doc/gpu_runs.md, f9f8805), forward / backward as shares of the copy
// bandwidth: v1 0.31 / 0.46, v2 0.91 / 0.95, v3 0.72 / 0.90 (bf16 build).
#define SWIGLU_VARIANT 2
#define SWIGLU_U 4  // v3's packs per thread

// h = silu(g) * up                                            mirrors swiglu_forward
__device__ __forceinline__ float swiglu_at(float g, float u) { return g / (1.0f + expf(-g)) * u; }
// dgate = dh * up * sig(g) * (1 + g (1 - sig(g))), dup = dh * silu(g)   mirrors swiglu_backward
__device__ __forceinline__ void swiglu_grad_at(float d, float g, float u, float *dg, float *du) {
    float sg = 1.0f / (1.0f + expf(-g));
    *dg = d * u * sg * (1.0f + g * (1.0f - sg));
    *du = d * g * sg;
}

// v1: one element per thread
__global__ void swiglu_forward_kernel_v1(floatX *h, const floatX *gate, const floatX *up, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) h[i] = to_x(swiglu_at(to_f(gate[i]), to_f(up[i])));
}

__global__ void swiglu_backward_kernel_v1(floatX *dgate, floatX *dup, const floatX *dh, const floatX *gate,
                                          const floatX *up, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float a, b;
    swiglu_grad_at(to_f(dh[i]), to_f(gate[i]), to_f(up[i]), &a, &b);
    dgate[i] = to_x(a);
    dup[i] = to_x(b);
}

// v2: one pack per thread. Packs [0, n/XVEC) vectorized; the thread of pack n/XVEC does the tail.
__global__ void swiglu_forward_kernel_v2(floatX *h, const floatX *gate, const floatX *up, size_t n) {
    size_t p = (size_t)blockIdx.x * blockDim.x + threadIdx.x, np = n / XVEC;
    if (p < np) {
        Pack128<floatX> g = load128(gate + p * XVEC), u = load128(up + p * XVEC), o;
#pragma unroll
        for (int k = 0; k < XVEC; k++) o.v[k] = to_x(swiglu_at(to_f(g.v[k]), to_f(u.v[k])));
        store128(h + p * XVEC, o);
    } else if (p == np) {
        for (size_t i = np * XVEC; i < n; i++) h[i] = to_x(swiglu_at(to_f(gate[i]), to_f(up[i])));
    }
}

// ... its backward: the three inputs' packs, then both outputs'
__device__ __forceinline__ void swiglu_grad_pack(floatX *dgate, floatX *dup, Pack128<floatX> d, Pack128<floatX> g,
                                                 Pack128<floatX> u) {
    Pack128<floatX> og, ou;
#pragma unroll
    for (int k = 0; k < XVEC; k++) {
        float a, b;
        swiglu_grad_at(to_f(d.v[k]), to_f(g.v[k]), to_f(u.v[k]), &a, &b);
        og.v[k] = to_x(a);
        ou.v[k] = to_x(b);
    }
    store128(dgate, og);
    store128(dup, ou);
}
// the scalar tail [from, n) of a backward
__device__ __forceinline__ void swiglu_grad_tail(floatX *dgate, floatX *dup, const floatX *dh, const floatX *gate,
                                                 const floatX *up, size_t from, size_t n) {
    for (size_t i = from; i < n; i++) {
        float a, b;
        swiglu_grad_at(to_f(dh[i]), to_f(gate[i]), to_f(up[i]), &a, &b);
        dgate[i] = to_x(a);
        dup[i] = to_x(b);
    }
}

__global__ void swiglu_backward_kernel_v2(floatX *dgate, floatX *dup, const floatX *dh, const floatX *gate,
                                          const floatX *up, size_t n) {
    size_t p = (size_t)blockIdx.x * blockDim.x + threadIdx.x, np = n / XVEC;
    if (p < np)
        swiglu_grad_pack(dgate + p * XVEC, dup + p * XVEC, load128(dh + p * XVEC), load128(gate + p * XVEC),
                         load128(up + p * XVEC));
    else if (p == np)
        swiglu_grad_tail(dgate, dup, dh, gate, up, np * XVEC, n);
}

// v3: SWIGLU_U packs per thread: block b covers packs [b*U*blockDim, (b+1)*U*blockDim), pack
// base + j*blockDim + threadIdx.x; loads first, then math and stores.
// v3's loads of one tensor: its SWIGLU_U packs of this thread (those below np)
__device__ __forceinline__ void swiglu_v3_load(Pack128<floatX> *dst, const floatX *src, size_t base, size_t np) {
#pragma unroll
    for (int j = 0; j < SWIGLU_U; j++) {
        size_t p = base + (size_t)j * blockDim.x;
        if (p < np) dst[j] = load128(src + p * XVEC);
    }
}

__global__ void swiglu_forward_kernel_v3(floatX *h, const floatX *gate, const floatX *up, size_t n) {
    size_t np = n / XVEC, base = (size_t)blockIdx.x * blockDim.x * SWIGLU_U + threadIdx.x;
    Pack128<floatX> g[SWIGLU_U], u[SWIGLU_U];
    swiglu_v3_load(g, gate, base, np);
    swiglu_v3_load(u, up, base, np);
#pragma unroll
    for (int j = 0; j < SWIGLU_U; j++) {
        size_t p = base + (size_t)j * blockDim.x;
        if (p < np) {
            Pack128<floatX> o;
#pragma unroll
            for (int k = 0; k < XVEC; k++) o.v[k] = to_x(swiglu_at(to_f(g[j].v[k]), to_f(u[j].v[k])));
            store128(h + p * XVEC, o);
        } else if (p == np) {
            for (size_t i = np * XVEC; i < n; i++) h[i] = to_x(swiglu_at(to_f(gate[i]), to_f(up[i])));
        }
    }
}

__global__ void swiglu_backward_kernel_v3(floatX *dgate, floatX *dup, const floatX *dh, const floatX *gate,
                                          const floatX *up, size_t n) {
    size_t np = n / XVEC, base = (size_t)blockIdx.x * blockDim.x * SWIGLU_U + threadIdx.x;
    Pack128<floatX> d[SWIGLU_U], g[SWIGLU_U], u[SWIGLU_U];
    swiglu_v3_load(d, dh, base, np);
    swiglu_v3_load(g, gate, base, np);
    swiglu_v3_load(u, up, base, np);
#pragma unroll
    for (int j = 0; j < SWIGLU_U; j++) {
        size_t p = base + (size_t)j * blockDim.x;
        if (p < np) swiglu_grad_pack(dgate + p * XVEC, dup + p * XVEC, d[j], g[j], u[j]);
        else if (p == np) swiglu_grad_tail(dgate, dup, dh, gate, up, np * XVEC, n);
    }
}

// The launchers: variant v (default SWIGLU_VARIANT) over n elements. v2 and v3 read 128-bit
// packs, so a pointer off 16 bytes (a layer's slice when N*F is not a multiple of the pack)
// takes v1: the same bits (*why: why, llmc/cuda/variants.cuh).
static inline int swiglu_variant_for(int v, const void *a, const void *b, const void *c, const void *d = NULL,
                                     const void *e = NULL, const char **why = NULL) {
    return v >= 2 && !aligned128(a, b, c, d, e) ? variant_fallback(why, "a tensor is not on 16 bytes", 1) : v;
}

static void swiglu_forward(floatX *h, const floatX *gate, const floatX *up, size_t n, int v = SWIGLU_VARIANT) {
    const char *why = NULL;
    v = variant_note(VF_SWIGLU, v, swiglu_variant_for(v, h, gate, up, NULL, NULL, &why), why);
    size_t packs = n / XVEC + 1;  // + the tail thread
    if (v == 1) swiglu_forward_kernel_v1<<<ceil_div(n, 256), 256>>>(h, gate, up, n);
    else if (v == 2) swiglu_forward_kernel_v2<<<ceil_div(packs, 256), 256>>>(h, gate, up, n);
    else swiglu_forward_kernel_v3<<<ceil_div(packs, 256 * SWIGLU_U), 256>>>(h, gate, up, n);
    cudaCheck(cudaGetLastError());
}

static void swiglu_backward(floatX *dgate, floatX *dup, const floatX *dh, const floatX *gate, const floatX *up, size_t n,
                            int v = SWIGLU_VARIANT) {
    const char *why = NULL;
    v = variant_note(VF_SWIGLU, v, swiglu_variant_for(v, dgate, dup, dh, gate, up, &why), why);
    size_t packs = n / XVEC + 1;
    if (v == 1) swiglu_backward_kernel_v1<<<ceil_div(n, 256), 256>>>(dgate, dup, dh, gate, up, n);
    else if (v == 2) swiglu_backward_kernel_v2<<<ceil_div(packs, 256), 256>>>(dgate, dup, dh, gate, up, n);
    else swiglu_backward_kernel_v3<<<ceil_div(packs, 256 * SWIGLU_U), 256>>>(dgate, dup, dh, gate, up, n);
    cudaCheck(cudaGetLastError());
}

// out = a + b                                                 mirrors residual_forward
__global__ void residual_forward_kernel(floatX *out, const floatX *a, const floatX *b, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = to_x(to_f(a[i]) + to_f(b[i]));
}
