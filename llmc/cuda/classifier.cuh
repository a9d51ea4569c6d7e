// llmc/cuda/classifier.cuh: the fused classifier: softmax, loss and dlogits in one kernel per row;
// the LM head's products around it, over all rows at once or in chunks of rows.
#pragma once
#include "cuda_utils.cuh"
#include "matmul.cuh"

// fused classifier, one block of 1024 per row, two passes over the row in 128-bit packs
// (Vp is a multiple of 128, so rows are 16-byte aligned): the max and the sum of
// exp(x - max) together (the running sum rescaled whenever the max grows), then dlogits
// written in place (no second logits buffer). Only the V real columns enter the softmax
// (V ends mid-pack: the padded columns in the last pack are masked); the padded ones get
// 0. With weights (N), row i's dloss is weights[i] (loss masks).
//                                                             mirrors classifier_forward_backward

// (m, s) = (max, sum of exp(x - max)) merged with (m2, s2)
__device__ __forceinline__ void online_merge(float &m, float &s, float m2, float s2) {
    float mn = fmaxf(m, m2);
    s = s * expf(m - mn) + s2 * expf(m2 - mn);  // -FLT_MAX (empty) never makes inf - inf
    m = mn;
}
// the merge over the block (blockDim.x a multiple of 32); every thread gets it
__device__ void block_online_reduce(float &m, float &s) {
    __shared__ float sm[32], ssum[32];
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nw = blockDim.x / 32;
    for (int o = 16; o > 0; o >>= 1) {
        float m2 = __shfl_xor_sync(0xffffffff, m, o), s2 = __shfl_xor_sync(0xffffffff, s, o);
        online_merge(m, s, m2, s2);
    }
    __syncthreads();
    if (lane == 0) {
        sm[warp] = m;
        ssum[warp] = s;
    }
    __syncthreads();
    if (warp == 0) {
        m = lane < nw ? sm[lane] : -FLT_MAX;
        s = lane < nw ? ssum[lane] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) {
            float m2 = __shfl_xor_sync(0xffffffff, m, o), s2 = __shfl_xor_sync(0xffffffff, s, o);
            online_merge(m, s, m2, s2);
        }
        if (lane == 0) {
            sm[0] = m;
            ssum[0] = s;
        }
    }
    __syncthreads();
    m = sm[0];
    s = ssum[0];
}

// logits (N,Vp) in place, losses (N), targets (N); grid N, block 1024
__global__ void __launch_bounds__(1024) classifier_kernel(floatX *logits, float *losses, const int *targets,
                                                          const float *weights, int N, int V, int Vp, float dloss,
                                                          int backward) {
    int row = blockIdx.x;
    if (row >= N) return;
    floatX *l = logits + (size_t)row * Vp;
    int npack = Vp / XVEC, target = targets[row];
    float lt = threadIdx.x == 0 ? to_f(l[target]) : 0.0f;  // read before any thread writes
    float m = -FLT_MAX, s = 0.0f;
    for (int i = threadIdx.x; i < npack; i += blockDim.x) {
        Pack128<floatX> p = load128(l + (size_t)i * XVEC);
        int c0 = i * XVEC;
        float pm = -FLT_MAX;
#pragma unroll
        for (int e = 0; e < XVEC; e++)
            if (c0 + e < V) pm = fmaxf(pm, to_f(p.v[e]));
        if (pm > m) {
            s *= expf(m - pm);
            m = pm;
        }
#pragma unroll
        for (int e = 0; e < XVEC; e++)
            if (c0 + e < V) s += expf(to_f(p.v[e]) - m);
    }
    block_online_reduce(m, s);  // its barriers also order thread 0's read of l[target] before the writes
    float lse = m + logf(s);
    if (threadIdx.x == 0) losses[row] = lse - lt;
    if (!backward) return;
    if (weights) dloss = weights[row];  // loss masks: this target's share of the step's loss
    for (int i = threadIdx.x; i < npack; i += blockDim.x) {
        Pack128<floatX> p = load128(l + (size_t)i * XVEC), o;
        int c0 = i * XVEC;
#pragma unroll
        for (int e = 0; e < XVEC; e++) {
            int c = c0 + e;
            o.v[e] = to_x(c < V ? (expf(to_f(p.v[e]) - lse) - (c == target ? 1.0f : 0.0f)) * dloss : 0.0f);
        }
        store128(l + (size_t)i * XVEC, o);
    }
}

// ----------------------------------------------------------------------------
// The LM head (tied: logits = x . wte^T, wte (Vp,C)) with the classifier, a family of two
// variants (CLASSIFIER_VARIANT below picks the trainer's). Both run the same three cuBLAS
// products and the kernel above on a block of rows; they differ in how many rows at once:
//   v1  all N rows: the (N,Vp) logits exist at once (824 MB in bf16 at N 8192, Vp 50304)
//   v2  chunks of CLASSIFIER_CHUNK rows, one after another, into one (CLASSIFIER_CHUNK,Vp)
//       buffer: the chunk's logits, its dlogits written over them, its rows of dx, and its
//       share of dwte added by cuBLAS with beta = 1, the chunks in order (no atomics: the
//       same bits on every run). Every chunk reads wte twice and reads and writes the fp32
//       dwte, which v1 does once, so v2 moves more bytes than v1 unless a chunk's logits
//       stay in L2 (doc/cuda.md counts them); it saves the memory.
// A pass of N <= CLASSIFIER_CHUNK rows is one chunk: v1 (classifier_variant_for).
#define CLASSIFIER_VARIANT 1
#define CLASSIFIER_CHUNK 2048

// the variant that runs when v is asked for over N rows
static inline int classifier_variant_for(int v, int N) { return v >= 2 && N > CLASSIFIER_CHUNK ? 2 : 1; }
// the rows of logits variant v keeps at once over N rows: the logits buffer's
static inline int classifier_rows(int v, int N) { return classifier_variant_for(v, N) == 2 ? CLASSIFIER_CHUNK : N; }

// losses (N) of the rows x (N,C) against targets (N), no backward, `rows` rows of logits
// at a time in logits (rows,Vp).                   mirrors head_forward's logits and losses
static void classifier_forward(float *losses, floatX *logits, const floatX *x, const floatX *wte, const int *targets,
                               int N, int C, int V, int Vp, int rows) {
    for (int r0 = 0; r0 < N; r0 += rows) {
        int n = N - r0 < rows ? N - r0 : rows;
        matmul_forward(logits, x + (size_t)r0 * C, wte, n, C, Vp);
        classifier_kernel<<<n, 1024>>>(logits, losses + r0, targets + r0, NULL, n, V, Vp, 0.0f, 0);
        cudaCheck(cudaGetLastError());
    }
}

// The forward and backward of the same: losses (N), dx (N,C) = dlogits . wte, dwte (Vp,C)
// fp32 += dlogits^T . x, each row's dloss as in classifier_kernel (weights (N) or dloss),
// `rows` rows of logits at a time in logits (rows,Vp).  mirrors head_backward's classifier and products
static void classifier_backward(floatX *dx, float *dwte, float *losses, floatX *logits, const floatX *x,
                                const floatX *wte, const int *targets, const float *weights, int N, int C, int V,
                                int Vp, float dloss, int rows) {
    for (int r0 = 0; r0 < N; r0 += rows) {
        int n = N - r0 < rows ? N - r0 : rows;
        const floatX *xc = x + (size_t)r0 * C;
        matmul_forward(logits, xc, wte, n, C, Vp);
        classifier_kernel<<<n, 1024>>>(logits, losses + r0, targets + r0, weights ? weights + r0 : NULL, n, V, Vp,
                                       dloss, 1);
        cudaCheck(cudaGetLastError());
        matmul_backward(dx + (size_t)r0 * C, dwte, logits, xc, wte, n, C, Vp, 0);
    }
}
