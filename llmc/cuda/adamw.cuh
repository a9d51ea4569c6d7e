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

// AdamW, a family of two variants (ADAMW_VARIANT below picks the trainer's). One element,
// the same expressions in every variant (the same bits): m, v updated in place, the new
// weight returned. lo, hi: the bounds the tensor keeps (its constraint; -INFINITY, INFINITY:
// none; a NaN stays one)
__device__ __forceinline__ float adamw_at(float p, float &m, float &v, float g, float lr, float beta1, float beta2,
                                          float bc1, float bc2, float eps, float wd, float grad_scale, float lo, float hi) {
    float gi = g * grad_scale;
    float mi = beta1 * m + (1.0f - beta1) * gi;
    float vi = beta2 * v + (1.0f - beta2) * gi * gi;
    m = mi;
    v = vi;
    float pi = p - lr * ((mi / bc1) / (sqrtf(vi / bc2) + eps) + wd * p);
    return pi < lo ? lo : pi > hi ? hi : pi;
}

// v1: one tensor per launch, one element per thread
__global__ void adamw_kernel_v1(float *p, floatX *px, const float *g, float *m, float *v, size_t n, float lr, float beta1,
                                float beta2, float bc1, float bc2, float eps, float wd, float grad_scale, float lo, float hi) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float mi = m[i], vi = v[i];
    float pi = adamw_at(p[i], mi, vi, g[i], lr, beta1, beta2, bc1, bc2, eps, wd, grad_scale, lo, hi);
    m[i] = mi;
    v[i] = vi;
    p[i] = pi;
    px[i] = to_x(pi);
}

// v2: one launch over every tensor of the flat buffers (they lie back to back), a thread per
// ADAMW_PACK elements with 128-bit loads and stores of p, g, m, v and px; each element's decay
// and bounds from a table of the tensors' ends passed in the kernel's parameters (a pack may
// straddle tensors; empty tensors are skipped by the search). Against v1: one launch instead
// of one per tensor, and 16-byte accesses instead of 4- and 2-byte ones.
#define ADAMW_MAX_TENSORS 64
#define ADAMW_PACK 8  // elements per thread: two fp32 packs, one bf16 pack (two in the fp32 build)
typedef struct {
    unsigned long long end[ADAMW_MAX_TENSORS];  // tensor k's elements end here (exclusive)
    float wd[ADAMW_MAX_TENSORS], lo[ADAMW_MAX_TENSORS], hi[ADAMW_MAX_TENSORS];
    int n;
} AdamwTable;

__global__ void adamw_kernel_v2(float *p, floatX *px, const float *g, float *m, float *v, size_t n, AdamwTable tab,
                                float lr, float beta1, float beta2, float bc1, float bc2, float eps, float grad_scale) {
    size_t base = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * ADAMW_PACK;
    if (base >= n) return;
    int k = 0;
    if (base + ADAMW_PACK <= n) {
        float pv[ADAMW_PACK];
#pragma unroll
        for (int h = 0; h < ADAMW_PACK; h += 4) {
            Pack128<float> pp = load128(p + base + h), gg = load128(g + base + h), mm = load128(m + base + h),
                           vv = load128(v + base + h);
#pragma unroll
            for (int e = 0; e < 4; e++) {
                while (k < tab.n - 1 && base + h + e >= tab.end[k]) k++;
                pp.v[e] = adamw_at(pp.v[e], mm.v[e], vv.v[e], gg.v[e], lr, beta1, beta2, bc1, bc2, eps, tab.wd[k],
                                   grad_scale, tab.lo[k], tab.hi[k]);
                pv[h + e] = pp.v[e];
            }
            store128(p + base + h, pp);
            store128(m + base + h, mm);
            store128(v + base + h, vv);
        }
#pragma unroll
        for (int h = 0; h < ADAMW_PACK; h += XVEC) {
            Pack128<floatX> xp;
#pragma unroll
            for (int e = 0; e < XVEC; e++) xp.v[e] = to_x(pv[h + e]);
            store128(px + base + h, xp);
        }
    } else {
        for (size_t i = base; i < n; i++) {
            while (k < tab.n - 1 && i >= tab.end[k]) k++;
            float mi = m[i], vi = v[i];
            p[i] = adamw_at(p[i], mi, vi, g[i], lr, beta1, beta2, bc1, bc2, eps, tab.wd[k], grad_scale, tab.lo[k],
                            tab.hi[k]);
            m[i] = mi;
            v[i] = vi;
            px[i] = to_x(p[i]);
        }
    }
}

#define ADAMW_VARIANT 2
// the variant that runs when v is asked for: v2 needs 16-byte aligned buffers and nt <=
// ADAMW_MAX_TENSORS, else v1 (*why: why, llmc/cuda/variants.cuh)
static inline int adamw_variant_for(int v, int nt, const void *p, const void *px, const void *g, const void *m,
                                    const void *vv, const char **why = NULL) {
    if (v < 2) return 1;
    if (nt > ADAMW_MAX_TENSORS) return variant_fallback(why, "v2 takes up to ADAMW_MAX_TENSORS tensors", 1);
    if (!aligned128(p, px, g, m, vv)) return variant_fallback(why, "a buffer is not on 16 bytes", 1);
    return 2;
}

// AdamW over nt tensors lying back to back in the flat buffers p, px, g, m, v (tensor k has
// numel[k] elements, decay wd[k] and bounds [lo[k], hi[k]]); adamw_variant_for picks the
// variant (the same bits in both).                                 mirrors adamw_update
static void adamw_update(float *p, floatX *px, const float *g, float *m, float *v, const size_t *numel, const float *wd,
                         const float *lo, const float *hi, int nt, float lr, float beta1, float beta2, float bc1, float bc2,
                         float eps, float grad_scale, int variant = ADAMW_VARIANT) {
    const char *why = NULL;
    if (variant_note(VF_ADAMW, variant, adamw_variant_for(variant, nt, p, px, g, m, v, &why), why) == 2) {
        AdamwTable tab;
        size_t n = 0;
        for (int k = 0; k < nt; k++) {
            n += numel[k];
            tab.end[k] = n;
            tab.wd[k] = wd[k];
            tab.lo[k] = lo[k];
            tab.hi[k] = hi[k];
        }
        tab.n = nt;
        if (!n) return;
        adamw_kernel_v2<<<ceil_div(ceil_div(n, ADAMW_PACK), 256), 256>>>(p, px, g, m, v, n, tab, lr, beta1, beta2, bc1, bc2,
                                                                         eps, grad_scale);
        cudaCheck(cudaGetLastError());
        return;
    }
    size_t o = 0;
    for (int k = 0; k < nt; k++) {
        if (numel[k]) {
            adamw_kernel_v1<<<ceil_div(numel[k], 256), 256>>>(p + o, px + o, g + o, m + o, v + o, numel[k], lr, beta1,
                                                              beta2, bc1, bc2, eps, wd[k], grad_scale, lo[k], hi[k]);
            cudaCheck(cudaGetLastError());
        }
        o += numel[k];
    }
}

__global__ void copy_to_x_kernel(floatX *dst, const float *src, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = to_x(src[i]);
}
