// train_gpt.cu: the GPU trainer. The same model, flags, data reader, position hook,
// checkpoints and evaluation as train_gpt_cpu.c (the reference it is tested against);
// cuBLAS for the matmuls, hand-written kernels for the rest. Each kernel names the CPU
// function it mirrors. bf16 activations and matmuls with fp32 master weights, fp32 AdamW
// moments and fp32 gradient accumulation by default (./train_gpt); -DENABLE_FP32 builds
// the all-fp32 ./train_gpt_fp32 for tight checks against the CPU.
//
// The PosAug hook: rope_kernel() computes angle = (alpha_l * t + offset) * theta_j in fp32;
// the host side that picks alpha each step is pos_schedule_step() in llmc/schedule.h.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <float.h>
#include <sys/stat.h>
#ifndef ENABLE_FP32
#include <mma.h>
#endif
#include "llmc/checkpoint.h"
#include "llmc/config.h"
#include "llmc/dataloader.h"
#include "llmc/evaluate.h"
#include "llmc/memory.h"
#include "llmc/runfolder.h"
#include "llmc/schedule.h"
#include "llmc/tensorfile.h"
#include "llmc/tokenizer.h"
#include "llmc/trainloop.h"

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

// ----------------------------------------------------------------------------
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

// ----------------------------------------------------------------------------
// embedding: x (N,C) = wte[tokens]                            mirrors encoder_forward
__global__ void encoder_forward_kernel(floatX *x, const int *tokens, const floatX *wte, int N, int C) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)N * C) return;
    int n = (int)(i / C), c = (int)(i % C);
    x[i] = wte[(size_t)tokens[n] * C + c];
}

// The position of token t as the absolute encodings see it (layer 0's), with the CPU's
// rounding (no fused multiply-add).                           mirrors pos_token
__device__ float token_position(const PosStep &ps, const float *positions, int t) {
    return positions ? positions[t] : __fadd_rn(__fmul_rn(ps.alpha[0], (float)t), ps.offset);
}

// x (B,T,C) += sinusoidal PE of each token's hook position (--pe sinusoidal); freq (C/2)
// holds f_k = 10000^(-2k/C) from the host's powf, as the CPU computes it (the device powf
// may differ in the last bit, which positions of 1e5 turn into 1e-2 in the angle).
//                                                             mirrors sinusoidal_forward
__global__ void sinusoidal_kernel(floatX *x, PosStep ps, int B, int T, int C, const float *positions, int pos0,
                                  const float *freq) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;  // over (B,T,C/2)
    if (i >= (size_t)B * T * (C / 2)) return;
    int k = (int)(i % (C / 2)), t = (int)((i / (C / 2)) % T);
    float p = token_position(ps, positions, pos0 + t);
    float s, c;
    sincosf(__fmul_rn(p, freq[k]), &s, &c);
    floatX *xt = x + (i / (C / 2)) * C;
    xt[2 * k] = to_x(to_f(xt[2 * k]) + s);
    xt[2 * k + 1] = to_x(to_f(xt[2 * k + 1]) + c);
}

// The frequencies f_k of sinusoidal_kernel on the device, computed once per width C.
static const float *sinusoidal_freqs(int C) {
    static float *d_freq;
    static int d_freq_C;
    if (d_freq_C != C) {
        float *h = (float *)xmalloc((size_t)(C / 2) * sizeof(float));
        for (int k = 0; k < C / 2; k++) h[k] = powf(10000.0f, -2.0f * k / C);  // the CPU's expression
        cudaFree(d_freq);
        d_freq = (float *)dmalloc((size_t)(C / 2) * sizeof(float));
        cudaCheck(cudaMemcpy(d_freq, h, (size_t)(C / 2) * sizeof(float), cudaMemcpyHostToDevice));
        free(h);
        d_freq_C = C;
    }
    return d_freq;
}

// x (B,T,C) += wpe[p_t] (--pe learned; the host checked every p_t is a row)
//                                                             mirrors learned_forward
__global__ void learned_forward_kernel(floatX *x, const floatX *wpe, PosStep ps, int B, int T, int C,
                                       const float *positions, int pos0) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;  // over (B,T,C)
    if (i >= (size_t)B * T * C) return;
    int c = (int)(i % C), t = (int)((i / C) % T);
    size_t row = (size_t)token_position(ps, positions, pos0 + t);
    x[i] = to_x(to_f(x[i]) + to_f(wpe[row * C + c]));
}

// The embedding tables' backward without atomics, so that a run repeats to the bit: the N
// gradient rows of a micro-batch go to table rows (a token's, a position's), grouped by the
// host (scatter_build) into sc = order (N), start (n_rows + 1), row (n_rows), n_rows (1):
// table row row[u] gets the rows order[start[u]..start[u+1]) summed in that order.
#define SCATTER_INTS(N) (3 * (size_t)(N) + 2)
// dtable (rows,C) += dx (N,C) grouped by sc; grid (N), one block per group
//                                              mirrors encoder_backward, learned_backward
__global__ void scatter_add_rows_kernel(float *dtable, const floatX *dx, const int *sc, int N, int C) {
    const int *order = sc, *start = sc + N, *row = sc + 2 * N + 1;
    int u = blockIdx.x;
    if (u >= sc[3 * N + 1]) return;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float sum = 0.0f;
        for (int j = start[u]; j < start[u + 1]; j++) sum += to_f(dx[(size_t)order[j] * C + c]);
        dtable[(size_t)row[u] * C + c] += sum;
    }
}

// ----------------------------------------------------------------------------
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

// ----------------------------------------------------------------------------
// RoPE, rotate-half layout (element j pairs with j + hd/2). THE POSAUG HOOK:
// p_t = alpha * t + offset and angle = p_t * inv_freq[j] in fp32 with the same rounding
// as the CPU (no fused multiply-add), then an accurate sincosf (this file is never built
// with --use_fast_math: __sinf/__cosf are wrong on unreduced angles of 1e5 radians).
// x (B,T,H,hd) rotated in place; sign -1 is the backward. positions (device), when given,
// replace alpha * t + offset by positions[pos0 + t] (RPE, RFS).  mirrors rope_forward/rope_backward
__global__ void rope_kernel(floatX *x, int B, int T, int H, int hd, PosStep ps, int layer, float sign,
                            const float *positions, int pos0) {
    int half = hd / 2;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;  // over (B,T,H,half)
    if (i >= (size_t)B * T * H * half) return;
    int j = (int)(i % half);
    size_t bth = i / half;
    int t = (int)((bth / H) % T);
    float p = positions ? positions[pos0 + t] : __fadd_rn(__fmul_rn(ps.alpha[layer], (float)t), ps.offset);
    float angle = __fmul_rn(p, ps.inv_freq[j]);
    float s, c;
    sincosf(angle, &s, &c);
    c *= ps.mscale;
    s *= sign * ps.mscale;
    floatX *v = x + bth * hd;
    float x0 = to_f(v[j]), x1 = to_f(v[j + half]);
    v[j] = to_x(x0 * c - x1 * s);
    v[j + half] = to_x(x1 * c + x0 * s);
}

// ps->positions (host; n_layer sets with --rpe_layers independent) go to the device once
// per pass: upload_positions()
static float *d_positions;
static size_t d_positions_cap;

static void upload_positions(const PosStep *ps, int n_layer) {
    if (!ps->positions) return;
    size_t n = (size_t)ps->n_positions * (ps->positions_stride ? n_layer : 1);
    if (n > d_positions_cap) {
        cudaFree(d_positions);
        d_positions = (float *)dmalloc(n * sizeof(float));
        d_positions_cap = n;
    }
    cudaCheck(cudaMemcpy(d_positions, ps->positions, n * sizeof(float), cudaMemcpyHostToDevice));
}

// Layer l's explicit positions on the device, or NULL.         mirrors pos_layer
static const float *d_pos_layer(const PosStep *ps, int l) {
    return ps->positions ? d_positions + (size_t)l * ps->positions_stride : NULL;
}

static void rope(floatX *x, int B, int T, int H, int hd, const PosStep *ps, int layer, float sign, int pos0) {
    if (ps->pe != PE_ROPE) return;  // NoPE, ALiBi, absolute encodings
    size_t n = (size_t)B * T * H * (hd / 2);
    rope_kernel<<<ceil_div(n, 256), 256>>>(x, B, T, H, hd, *ps, layer, sign, d_pos_layer(ps, layer), pos0);
    cudaCheck(cudaGetLastError());
}

// sc (SCATTER_INTS(N)) for scatter_add_rows_kernel: items 0..N-1 grouped by key[n] in
// [0, K), groups in key order, items in index order within a group (a counting sort)
static void scatter_build(int *sc, const int *key, int N, int K) {
    static int *count;
    static int cap;
    if (K + 1 > cap) {
        free(count);
        count = (int *)xmalloc((size_t)(K + 1) * sizeof(int));
        cap = K + 1;
    }
    memset(count, 0, (size_t)(K + 1) * sizeof(int));
    for (int n = 0; n < N; n++) count[key[n] + 1]++;
    int *order = sc, *start = sc + N, *row = sc + 2 * N + 1, u = 0;
    for (int k = 0; k < K; k++) {
        if (count[k + 1]) {
            start[u] = count[k];
            row[u++] = k;
        }
        count[k + 1] += count[k];  // count[k]: the first slot of key k
    }
    start[u] = N;
    sc[3 * N + 1] = u;
    for (int n = 0; n < N; n++) order[count[key[n]]++] = n;
}

static void scatter_add_rows(float *dtable, const floatX *dx, const int *sc, int N, int C) {
    scatter_add_rows_kernel<<<N, C < 256 ? 32 * ceil_div(C, 32) : 256>>>(dtable, dx, sc, N, C);
    cudaCheck(cudaGetLastError());
}

// ----------------------------------------------------------------------------
// causal GQA attention for training: scores through cuBLAS, one head at a time, batched
// over the sequences. Query head h reads key/value head h / (NH/NKV) by pointer offset:
// K and V are never copied. q (B,T,NH,hd), k, v (B,T,NKV,hd), att (B,NH,T,T).
//                                                             mirrors attention_forward

// in place: raw scores (B,NH,T,T) -> causal softmax probabilities, one warp per row
__global__ void softmax_forward_kernel(floatX *att, int rows, int T, float scale) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= rows) return;
    int t = row % T;
    floatX *a = att + (size_t)row * T;
    float maxv = -FLT_MAX;
    for (int s = lane; s <= t; s += 32) maxv = fmaxf(maxv, to_f(a[s]) * scale);
    maxv = warp_max(maxv);
    float sum = 0.0f;
    for (int s = lane; s <= t; s += 32) sum += expf(to_f(a[s]) * scale - maxv);
    float inv = 1.0f / warp_sum(sum);
    for (int s = lane; s < T; s += 32) a[s] = to_x(s <= t ? expf(to_f(a[s]) * scale - maxv) * inv : 0.0f);
}

// in place: dP -> dS = P * (dP - sum(P * dP)) * scale
__global__ void softmax_backward_kernel(floatX *datt, const floatX *att, int rows, int T, float scale) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= rows) return;
    int t = row % T;
    const floatX *a = att + (size_t)row * T;
    floatX *d = datt + (size_t)row * T;
    float dot = 0.0f;
    for (int s = lane; s <= t; s += 32) dot += to_f(a[s]) * to_f(d[s]);
    dot = warp_sum(dot);
    for (int s = lane; s < T; s += 32) d[s] = to_x(s <= t ? to_f(a[s]) * (to_f(d[s]) - dot) * scale : 0.0f);
}

// ALiBi slope of query head h of n (as alibi_slopes in llmc/schedule.h)
__device__ float alibi_slope(int h, int n) {
    int c = 1;
    while (c * 2 <= n) c *= 2;
    return h < c ? exp2f(-8.0f * (h + 1) / c) : exp2f(-8.0f * (2 * (h - c) + 1) / (2 * c));
}

// ALiBi on raw scores (B,NH,T,T): adds -m_h * alpha * (t - s) / scale, so that the
// softmax's scale * score carries -m_h * alpha * (t - s).   mirrors the bias in attention_forward_train
__global__ void alibi_bias_kernel(floatX *att, int NH, int T, float alpha, float scale, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int s = (int)(i % T), t = (int)((i / T) % T), h = (int)((i / ((size_t)T * T)) % NH);
    if (s <= t) att[i] = to_x(to_f(att[i]) - alibi_slope(h, NH) * alpha * (float)(t - s) / scale);
}

// strided-batched gemm over the B sequences (column-major arguments)
static void gemm_batched(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const floatX *A, int lda,
                         long long sa, const floatX *Bm, int ldb, long long sb, float beta, floatX *Cm, int ldc,
                         long long sc, int batch) {
    cublasCheck(cublasGemmStridedBatchedEx(cublas, ta, tb, m, n, k, &ONE, A, CUDA_FX, lda, sa, Bm, CUDA_FX, ldb, sb,
                                           &beta, Cm, CUDA_FX, ldc, sc, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// alibi_alpha > 0: ALiBi with distances times alibi_alpha
static void attention_forward(floatX *y, floatX *att, const floatX *q, const floatX *k, const floatX *v, int B, int T,
                              int NH, int NKV, int hd, float alibi_alpha) {
    int group = NH / NKV;
    long long sq = (long long)T * NH * hd, skv = (long long)T * NKV * hd, sa = (long long)NH * T * T;
    for (int h = 0; h < NH; h++) {  // S_h = Q_h K_kvh^T
        int kvh = h / group;
        gemm_batched(CUBLAS_OP_T, CUBLAS_OP_N, T, T, hd, k + kvh * hd, NKV * hd, skv, q + h * hd, NH * hd, sq, 0.0f,
                     att + (size_t)h * T * T, T, sa, B);
    }
    if (alibi_alpha > 0) {
        size_t n = (size_t)B * NH * T * T;
        alibi_bias_kernel<<<ceil_div(n, 256), 256>>>(att, NH, T, alibi_alpha, 1.0f / sqrtf((float)hd), n);
        cudaCheck(cudaGetLastError());
    }
    int rows = B * NH * T;
    softmax_forward_kernel<<<ceil_div(rows, 8), 256>>>(att, rows, T, 1.0f / sqrtf((float)hd));
    cudaCheck(cudaGetLastError());
    for (int h = 0; h < NH; h++) {  // Y_h = P_h V_kvh
        int kvh = h / group;
        gemm_batched(CUBLAS_OP_N, CUBLAS_OP_N, hd, T, T, v + kvh * hd, NKV * hd, skv, att + (size_t)h * T * T, T, sa,
                     0.0f, y + h * hd, NH * hd, sq, B);
    }
}

// dq, dk, dv overwritten; datt (B,NH,T,T) is scratch.         mirrors attention_backward
static void attention_backward(floatX *dq, floatX *dk, floatX *dv, floatX *datt, const floatX *dy, const floatX *att,
                               const floatX *q, const floatX *k, const floatX *v, int B, int T, int NH, int NKV,
                               int hd) {
    int group = NH / NKV;
    long long sq = (long long)T * NH * hd, skv = (long long)T * NKV * hd, sa = (long long)NH * T * T;
    for (int h = 0; h < NH; h++) {  // dP_h = dY_h V_kvh^T
        int kvh = h / group;
        gemm_batched(CUBLAS_OP_T, CUBLAS_OP_N, T, T, hd, v + kvh * hd, NKV * hd, skv, dy + h * hd, NH * hd, sq, 0.0f,
                     datt + (size_t)h * T * T, T, sa, B);
    }
    int rows = B * NH * T;
    softmax_backward_kernel<<<ceil_div(rows, 8), 256>>>(datt, att, rows, T, 1.0f / sqrtf((float)hd));
    cudaCheck(cudaGetLastError());
    for (int h = 0; h < NH; h++) {
        int kvh = h / group;
        float beta = (h % group) ? 1.0f : 0.0f;  // the group's query heads sum into one dK, dV
        const floatX *ds = datt + (size_t)h * T * T, *p = att + (size_t)h * T * T;
        // dQ_h = dS_h K_kvh
        gemm_batched(CUBLAS_OP_N, CUBLAS_OP_N, hd, T, T, k + kvh * hd, NKV * hd, skv, ds, T, sa, 0.0f, dq + h * hd,
                     NH * hd, sq, B);
        // dK_kvh += dS_h^T Q_h
        gemm_batched(CUBLAS_OP_N, CUBLAS_OP_T, hd, T, T, q + h * hd, NH * hd, sq, ds, T, sa, beta, dk + kvh * hd,
                     NKV * hd, skv, B);
        // dV_kvh += P_h^T dY_h
        gemm_batched(CUBLAS_OP_N, CUBLAS_OP_T, hd, T, T, dy + h * hd, NH * hd, sq, p, T, sa, beta, dv + kvh * hd,
                     NKV * hd, skv, B);
    }
}

// ----------------------------------------------------------------------------
// Flash attention for training (--attention flash): the same causal GQA attention with no
// (T,T) matrix. The forward keeps y and the log-sum-exp of each row's scores, lse
// (B,NH,T) fp32; the backward recomputes the probabilities from it (doc/model.md):
//   x_ts = (q_t . k_s) * scale - bias_h * (t - s),   p_ts = exp(x_ts - lse_t),   s <= t
//   D_t = dy_t . y_t  (= sum_s p_ts dP_ts),   dS_ts = p_ts (dy_t . v_s - D_t) * scale
//   dv_s = sum_t p_ts dy_t,   dk_s = sum_t dS_ts q_t,   dq_t = sum_s dS_ts k_s
// bias_h = ALiBi slope * alpha (0 without ALiBi). CUDA cores, fp32 math: a block of
// FLASH_ROWS threads owns FLASH_ROWS query rows (forward, dQ) or key rows (dK/dV), one per
// thread, and walks tiles of FLASH_TILE rows of the other side staged in shared memory,
// which every thread reads at the same address (a broadcast). HDMAX (32, 64 or 128) sizes
// the per-thread register arrays; hd <= HDMAX at run time. The dK/dV pass sums the
// group's query heads in registers: GQA in fp32, with no atomics and no K/V copies.
//                                  mirrors attention_forward_train and attention_backward
#define FLASH_ROWS 64
#define FLASH_TILE 32
#define FLASH_CHUNK 16  // the forward's keys per online-softmax update (registers: x[FLASH_CHUNK])

// y (B,T,NH,hd), lse (B,NH,T); q (B,T,NH,hd), k, v (B,T,NKV,hd). Grid (T/FLASH_ROWS, NH, B).
template <int HDMAX>
__global__ void __launch_bounds__(FLASH_ROWS) flash_forward_kernel(floatX *y, float *lse, const floatX *q, const floatX *k,
                                                                   const floatX *v, int T, int NH, int NKV, int hd,
                                                                   float alibi_alpha) {
    __shared__ float ks[FLASH_TILE][HDMAX], vs[FLASH_TILE][HDMAX];
    int tile = gridDim.x - 1 - blockIdx.x;  // the longest rows first
    int h = blockIdx.y, b = blockIdx.z, kvh = h / (NH / NKV);
    int t = tile * FLASH_ROWS + threadIdx.x, last = min(tile * FLASH_ROWS + FLASH_ROWS, T) - 1;
    float scale = 1.0f / sqrtf((float)hd), bias = alibi_alpha > 0 ? alibi_slope(h, NH) * alibi_alpha : 0.0f;
    size_t kstride = (size_t)NKV * hd;
    const floatX *kb = k + ((size_t)b * T * NKV + kvh) * hd, *vb = v + ((size_t)b * T * NKV + kvh) * hd;
    const floatX *qt = q + (((size_t)b * T + min(t, T - 1)) * NH + h) * hd;
    float qr[HDMAX], acc[HDMAX];
#pragma unroll
    for (int c = 0; c < HDMAX; c++) {
        qr[c] = c < hd ? to_f(qt[c]) : 0.0f;
        acc[c] = 0.0f;
    }
    float m = -FLT_MAX, l = 0.0f;
    for (int s0 = 0; s0 <= last; s0 += FLASH_TILE) {
        __syncthreads();  // the previous tile is consumed
        for (int i = threadIdx.x; i < FLASH_TILE * hd; i += FLASH_ROWS) {
            int r = i / hd, c = i % hd, s = s0 + r;
            ks[r][c] = s < T ? to_f(kb[s * kstride + c]) : 0.0f;
            vs[r][c] = s < T ? to_f(vb[s * kstride + c]) : 0.0f;
        }
        __syncthreads();
        for (int j0 = 0; j0 < FLASH_TILE && s0 + j0 <= t; j0 += FLASH_CHUNK) {  // online softmax per chunk
            float x[FLASH_CHUNK], mt = m;
#pragma unroll
            for (int j = 0; j < FLASH_CHUNK; j++) {
                float dot = 0.0f;
#pragma unroll
                for (int c = 0; c < HDMAX; c++)
                    if (c < hd) dot += qr[c] * ks[j0 + j][c];
                int s = s0 + j0 + j;
                x[j] = s <= t ? dot * scale - bias * (float)(t - s) : -FLT_MAX;
                mt = fmaxf(mt, x[j]);
            }
            float corr = expf(m - mt);
            l *= corr;
#pragma unroll
            for (int c = 0; c < HDMAX; c++) acc[c] *= corr;
#pragma unroll
            for (int j = 0; j < FLASH_CHUNK; j++) {
                float p = s0 + j0 + j <= t ? expf(x[j] - mt) : 0.0f;
                l += p;
#pragma unroll
                for (int c = 0; c < HDMAX; c++)
                    if (c < hd) acc[c] += p * vs[j0 + j][c];
            }
            m = mt;
        }
    }
    if (t >= T) return;
    floatX *yt = y + (((size_t)b * T + t) * NH + h) * hd;
    float inv = 1.0f / l;
#pragma unroll
    for (int c = 0; c < HDMAX; c++)
        if (c < hd) yt[c] = to_x(acc[c] * inv);
    lse[((size_t)b * NH + h) * T + t] = m + logf(l);
}

// D (B,NH,T) = dy . y per row; one warp per (b,t,h)
__global__ void flash_backward_dot_kernel(float *D, const floatX *dy, const floatX *y, int B, int T, int NH, int hd) {
    size_t row = (size_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (row >= (size_t)B * T * NH) return;
    float s = 0.0f;
    for (int i = lane; i < hd; i += 32) s += to_f(dy[row * hd + i]) * to_f(y[row * hd + i]);
    s = warp_sum(s);
    int h = (int)(row % NH), t = (int)((row / NH) % T), b = (int)(row / ((size_t)NH * T));
    if (lane == 0) D[((size_t)b * NH + h) * T + t] = s;
}

// Loads rows r0.. of a (.,T,H,hd) tensor's head h into dst (n rows, stride ld), 0 past T.
__device__ void flash_load_rows(float *dst, int ld, int n, const floatX *src, int b, int r0, int T, int H, int h, int hd) {
    for (int i = threadIdx.x; i < n * hd; i += blockDim.x) {
        int r = i / hd, c = i % hd, t = r0 + r;
        dst[r * ld + c] = t < T ? to_f(src[(((size_t)b * T + t) * H + h) * hd + c]) : 0.0f;
    }
}

// dk, dv (B,T,NKV,hd), overwritten. Grid (T/FLASH_ROWS, NKV, B): a block owns FLASH_ROWS
// keys (their k, v rows in shared memory, padded to hd + 1 so that lanes hit different
// banks) and walks the queries t >= its first key of every head of its group.
template <int HDMAX>
__global__ void __launch_bounds__(FLASH_ROWS) flash_backward_kv_kernel(floatX *dk, floatX *dv, const floatX *dy,
                                                                       const float *lse, const float *D, const floatX *q,
                                                                       const floatX *k, const floatX *v, int T, int NH,
                                                                       int NKV, int hd, float alibi_alpha) {
    extern __shared__ float sm[];
    int ld = hd + 1;
    float *kown = sm, *vown = kown + FLASH_ROWS * ld;          // (FLASH_ROWS, hd+1)
    float *qs = vown + FLASH_ROWS * ld, *dys = qs + FLASH_TILE * HDMAX;  // (FLASH_TILE, HDMAX)
    float *lses = dys + FLASH_TILE * HDMAX, *Ds = lses + FLASH_TILE;     // (FLASH_TILE)
    int kvh = blockIdx.y, b = blockIdx.z, group = NH / NKV;
    int s0 = blockIdx.x * FLASH_ROWS, s = s0 + threadIdx.x, r = threadIdx.x;  // the first keys see the most queries
    float scale = 1.0f / sqrtf((float)hd);
    flash_load_rows(kown, ld, FLASH_ROWS, k, b, s0, T, NKV, kvh, hd);
    flash_load_rows(vown, ld, FLASH_ROWS, v, b, s0, T, NKV, kvh, hd);
    float dka[HDMAX], dva[HDMAX];
#pragma unroll
    for (int c = 0; c < HDMAX; c++) dka[c] = dva[c] = 0.0f;
    for (int h = kvh * group; h < (kvh + 1) * group; h++) {
        float bias = alibi_alpha > 0 ? alibi_slope(h, NH) * alibi_alpha : 0.0f;
        for (int t0 = s0 / FLASH_TILE * FLASH_TILE; t0 < T; t0 += FLASH_TILE) {
            __syncthreads();  // the previous tile is consumed (and the own rows are loaded)
            flash_load_rows(qs, HDMAX, FLASH_TILE, q, b, t0, T, NH, h, hd);
            flash_load_rows(dys, HDMAX, FLASH_TILE, dy, b, t0, T, NH, h, hd);
            if (threadIdx.x < FLASH_TILE) {
                int t = t0 + threadIdx.x;
                lses[threadIdx.x] = t < T ? lse[((size_t)b * NH + h) * T + t] : 0.0f;
                Ds[threadIdx.x] = t < T ? D[((size_t)b * NH + h) * T + t] : 0.0f;
            }
            __syncthreads();
            if (s >= T) continue;
            for (int j = 0; j < FLASH_TILE; j++) {
                int t = t0 + j;
                if (t < s || t >= T) continue;  // key s is seen by queries t >= s
                const float *qj = qs + j * HDMAX, *dyj = dys + j * HDMAX;
                float dot = 0.0f, dp = 0.0f;
#pragma unroll
                for (int c = 0; c < HDMAX; c++)
                    if (c < hd) {
                        dot += qj[c] * kown[r * ld + c];
                        dp += dyj[c] * vown[r * ld + c];
                    }
                float p = expf(dot * scale - bias * (float)(t - s) - lses[j]);
                float ds = p * (dp - Ds[j]) * scale;
#pragma unroll
                for (int c = 0; c < HDMAX; c++)
                    if (c < hd) {
                        dva[c] += p * dyj[c];
                        dka[c] += ds * qj[c];
                    }
            }
        }
    }
    if (s >= T) return;
    floatX *dkr = dk + (((size_t)b * T + s) * NKV + kvh) * hd, *dvr = dv + (((size_t)b * T + s) * NKV + kvh) * hd;
#pragma unroll
    for (int c = 0; c < HDMAX; c++)
        if (c < hd) {
            dkr[c] = to_x(dka[c]);
            dvr[c] = to_x(dva[c]);
        }
}

// dq (B,T,NH,hd), overwritten. Grid (T/FLASH_ROWS, NH, B): a block owns FLASH_ROWS queries
// (their q, dy rows in shared memory, padded) and walks the key tiles s <= its last query.
template <int HDMAX>
__global__ void __launch_bounds__(FLASH_ROWS) flash_backward_q_kernel(floatX *dq, const floatX *dy, const float *lse,
                                                                      const float *D, const floatX *q, const floatX *k,
                                                                      const floatX *v, int T, int NH, int NKV, int hd,
                                                                      float alibi_alpha) {
    extern __shared__ float sm[];
    int ld = hd + 1;
    float *qown = sm, *dyown = qown + FLASH_ROWS * ld;                  // (FLASH_ROWS, hd+1)
    float *ks = dyown + FLASH_ROWS * ld, *vs = ks + FLASH_TILE * HDMAX;  // (FLASH_TILE, HDMAX)
    int tile = gridDim.x - 1 - blockIdx.x;  // the longest rows first
    int h = blockIdx.y, b = blockIdx.z, kvh = h / (NH / NKV), r = threadIdx.x;
    int t0 = tile * FLASH_ROWS, t = t0 + r, last = min(t0 + FLASH_ROWS, T) - 1;
    float scale = 1.0f / sqrtf((float)hd), bias = alibi_alpha > 0 ? alibi_slope(h, NH) * alibi_alpha : 0.0f;
    flash_load_rows(qown, ld, FLASH_ROWS, q, b, t0, T, NH, h, hd);
    flash_load_rows(dyown, ld, FLASH_ROWS, dy, b, t0, T, NH, h, hd);
    float lt = t < T ? lse[((size_t)b * NH + h) * T + t] : 0.0f, Dt = t < T ? D[((size_t)b * NH + h) * T + t] : 0.0f;
    float dqa[HDMAX];
#pragma unroll
    for (int c = 0; c < HDMAX; c++) dqa[c] = 0.0f;
    for (int s0 = 0; s0 <= last; s0 += FLASH_TILE) {
        __syncthreads();  // the previous tile is consumed (and the own rows are loaded)
        flash_load_rows(ks, HDMAX, FLASH_TILE, k, b, s0, T, NKV, kvh, hd);
        flash_load_rows(vs, HDMAX, FLASH_TILE, v, b, s0, T, NKV, kvh, hd);
        __syncthreads();
        if (t >= T) continue;
        for (int j = 0; j < FLASH_TILE; j++) {
            int s = s0 + j;
            if (s > t) break;  // causal
            const float *kj = ks + j * HDMAX, *vj = vs + j * HDMAX;
            float dot = 0.0f, dp = 0.0f;
#pragma unroll
            for (int c = 0; c < HDMAX; c++)
                if (c < hd) {
                    dot += qown[r * ld + c] * kj[c];
                    dp += dyown[r * ld + c] * vj[c];
                }
            float p = expf(dot * scale - bias * (float)(t - s) - lt);
            float ds = p * (dp - Dt) * scale;
#pragma unroll
            for (int c = 0; c < HDMAX; c++)
                if (c < hd) dqa[c] += ds * kj[c];
        }
    }
    if (t >= T) return;
    floatX *dqr = dq + (((size_t)b * T + t) * NH + h) * hd;
#pragma unroll
    for (int c = 0; c < HDMAX; c++)
        if (c < hd) dqr[c] = to_x(dqa[c]);
}

#ifdef ENABLE_FP32  // the CUDA-core path is the fp32 build's (the bf16 build's: tensor cores, below)
// shared memory of the backward kernels (both use the same amount)
static size_t flash_backward_smem(int hd, int hdmax) {
    return (2 * (size_t)FLASH_ROWS * (hd + 1) + 2 * (size_t)FLASH_TILE * hdmax + 2 * FLASH_TILE) * sizeof(float);
}

template <int HDMAX>
static void flash_forward_hd(floatX *y, float *lse, const floatX *q, const floatX *k, const floatX *v, int B, int T,
                             int NH, int NKV, int hd, float alibi_alpha) {
    dim3 grid(ceil_div(T, FLASH_ROWS), NH, B);
    flash_forward_kernel<HDMAX><<<grid, FLASH_ROWS>>>(y, lse, q, k, v, T, NH, NKV, hd, alibi_alpha);
    cudaCheck(cudaGetLastError());
}

template <int HDMAX>
static void flash_backward_hd(floatX *dq, floatX *dk, floatX *dv, const float *D, const floatX *dy, const float *lse,
                              const floatX *q, const floatX *k, const floatX *v, int B, int T, int NH, int NKV, int hd,
                              float alibi_alpha) {
    size_t smem = flash_backward_smem(hd, HDMAX);
    static size_t opted = 0;  // above 48 KiB a kernel must opt in to dynamic shared memory
    if (smem > opted) {
        size_t most = flash_backward_smem(HDMAX, HDMAX);
        cudaCheck(cudaFuncSetAttribute(flash_backward_kv_kernel<HDMAX>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)most));
        cudaCheck(cudaFuncSetAttribute(flash_backward_q_kernel<HDMAX>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)most));
        opted = most;
    }
    flash_backward_kv_kernel<HDMAX><<<dim3(ceil_div(T, FLASH_ROWS), NKV, B), FLASH_ROWS, smem>>>(
        dk, dv, dy, lse, D, q, k, v, T, NH, NKV, hd, alibi_alpha);
    cudaCheck(cudaGetLastError());
    flash_backward_q_kernel<HDMAX><<<dim3(ceil_div(T, FLASH_ROWS), NH, B), FLASH_ROWS, smem>>>(
        dq, dy, lse, D, q, k, v, T, NH, NKV, hd, alibi_alpha);
    cudaCheck(cudaGetLastError());
}

// y (B,T,NH,hd) and lse (B,NH,T) of causal GQA attention on CUDA cores; hd <= FLASH_MAX_HD
// (checked by the flags). alibi_alpha > 0: ALiBi with distances times alibi_alpha.
static void flash_forward_cuda_cores(floatX *y, float *lse, const floatX *q, const floatX *k, const floatX *v, int B,
                                     int T, int NH, int NKV, int hd, float alibi_alpha) {
    if (hd <= 32) flash_forward_hd<32>(y, lse, q, k, v, B, T, NH, NKV, hd, alibi_alpha);
    else if (hd <= 64) flash_forward_hd<64>(y, lse, q, k, v, B, T, NH, NKV, hd, alibi_alpha);
    else flash_forward_hd<FLASH_MAX_HD>(y, lse, q, k, v, B, T, NH, NKV, hd, alibi_alpha);
}

// dq, dk, dv overwritten; D (B,NH,T) is scratch. y and lse: the forward's.
static void flash_backward_cuda_cores(floatX *dq, floatX *dk, floatX *dv, float *D, const floatX *dy, const floatX *y,
                                      const float *lse, const floatX *q, const floatX *k, const floatX *v, int B, int T,
                                      int NH, int NKV, int hd, float alibi_alpha) {
    size_t rows = (size_t)B * T * NH;
    flash_backward_dot_kernel<<<ceil_div(rows, 8), 256>>>(D, dy, y, B, T, NH, hd);
    cudaCheck(cudaGetLastError());
    if (hd <= 32) flash_backward_hd<32>(dq, dk, dv, D, dy, lse, q, k, v, B, T, NH, NKV, hd, alibi_alpha);
    else if (hd <= 64) flash_backward_hd<64>(dq, dk, dv, D, dy, lse, q, k, v, B, T, NH, NKV, hd, alibi_alpha);
    else flash_backward_hd<FLASH_MAX_HD>(dq, dk, dv, D, dy, lse, q, k, v, B, T, NH, NKV, hd, alibi_alpha);
}
#else
// ----------------------------------------------------------------------------
// Flash attention on tensor cores (the bf16 build, where floatX is __nv_bfloat16): the
// same passes and formulas, every product on WMMA tiles of 16x16x16 (bf16 inputs, fp32
// accumulation); the softmax, lse, the ALiBi bias and dS in fp32. A block of FTC_WARPS
// warps owns FTC_ROWS rows (queries in the forward and dQ, keys in dK/dV), 16 per warp,
// and walks tiles of FTC_TILE rows of the other side (FTC_ROWS == FTC_TILE: the last tile
// is the diagonal one). Tiles are staged in shared memory in bf16 with the head dimension
// zero-padded to HDP (32, 64 or 128, so any even hd up to 128: zeros add nothing to a
// product) and rows padded by 8 elements against bank conflicts. WMMA's register layout is
// unspecified, so fragments are only filled, loaded, stored and multiplied: the elementwise
// work goes through per-warp fp32 scratch in shared memory, and so does the forward's
// output accumulator, which is rescaled by rows.
//   forward  S = Q K^T; online softmax; O += P V with P in bf16; lse = m + ln l
//   dK/dV    S^T = K Q^T and dP^T = V dY^T; then dV += P^T dY and dK += dS^T Q, the group's
//            query heads summed into the same fp32 accumulator fragments
//   dQ       S = Q K^T and dP = dY V^T; then dQ += dS K
#define FTC_WARPS 4
#define FTC_THREADS (FTC_WARPS * 32)
#define FTC_ROWS (FTC_WARPS * 16)  // a block's own rows
#define FTC_TILE 64                // rows of the other side per tile
#define FTC_LDS (FTC_TILE + 4)     // leading dimension of the fp32 scratch (16, FTC_TILE) of a warp
#define FTC_LDP (FTC_TILE + 8)     // and of its bf16 probabilities or dS (16, FTC_TILE)

// Byte sizes of the dynamic shared memory regions; every region and every 16-row or
// 16-column offset in one is a multiple of 32 bytes (WMMA's pointer alignment).
template <int HDP>
struct FtcSmem {
    static constexpr int LDH = HDP + 8;                                       // bf16 tiles (64, HDP)
    static constexpr int LDO = HDP + 4;                                       // fp32 (16, HDP) per warp
    static constexpr size_t TILE = (size_t)FTC_TILE * LDH * sizeof(floatX);   // one bf16 tile
    static constexpr size_t VEC = FTC_TILE * sizeof(float);                   // lse or D of a tile
    static constexpr size_t SCR = (size_t)FTC_WARPS * 16 * FTC_LDS * sizeof(float);   // fp32 scratch, all warps
    static constexpr size_t PB = (size_t)FTC_WARPS * 16 * FTC_LDP * sizeof(floatX);   // bf16 scratch, all warps
    static constexpr size_t OUT = (size_t)FTC_WARPS * 16 * LDO * sizeof(float);       // fp32 (16, HDP), all warps
    static constexpr size_t fwd = 2 * TILE + SCR + PB + OUT;         // K, V, S, P, O (Q staged in O first)
    static constexpr size_t kv = 4 * TILE + 2 * VEC + 2 * SCR + 2 * PB;  // K, V, Q, dY, lse, D, S^T, dP^T, P^T, dS^T
    static constexpr size_t q = 4 * TILE + 2 * VEC + 2 * SCR + PB;       // Q, dY, K, V, lse, D, S, dP, dS
    static_assert(FTC_ROWS == FTC_TILE && HDP % 16 == 0, "diagonal tiles; whole WMMA tiles");
    static_assert(OUT >= TILE && 2 * SCR >= OUT, "Q is staged in O's region; the output in S's and dP's");
    static_assert(TILE % 32 == 0 && SCR % 32 == 0 && PB % 32 == 0 && OUT % 32 == 0 && (16 * LDH * 2) % 32 == 0 &&
                      (16 * LDO * 4) % 32 == 0, "32-byte aligned regions and 16-row offsets");
};

// rows r0 .. r0+FTC_TILE-1 of head h of a (B,T,H,hd) tensor into dst (FTC_TILE, HDP), leading
// dimension HDP + 8, zeros past T and in the columns hd .. HDP-1; coalesced, 16-byte loads
// when hd % 8 == 0 (every row then starts 16-byte aligned)
template <int HDP>
__device__ void flash_tc_load_tile(floatX *dst, const floatX *src, int b, int r0, int T, int H, int h, int hd) {
    const floatX *base = src + ((size_t)b * T * H + h) * hd;  // row t at base + t * H * hd
    if (hd % 8 == 0) {
        for (int i = threadIdx.x; i < FTC_TILE * HDP / 8; i += blockDim.x) {
            int r = i / (HDP / 8), c = i % (HDP / 8) * 8, t = r0 + r;
            int4 val = make_int4(0, 0, 0, 0);
            if (t < T && c < hd) val = *reinterpret_cast<const int4 *>(base + (size_t)t * H * hd + c);
            *reinterpret_cast<int4 *>(dst + r * (HDP + 8) + c) = val;
        }
    } else {
        for (int i = threadIdx.x; i < FTC_TILE * HDP; i += blockDim.x) {
            int r = i / HDP, c = i % HDP, t = r0 + r;
            dst[r * (HDP + 8) + c] = t < T && c < hd ? base[(size_t)t * H * hd + c] : to_x(0.0f);
        }
    }
}

// a warp's 16 rows staged in src (16, >= hd), leading dimension ld, to rows r0.. of head h
// of a (B,T,H,hd) tensor (rows past T skipped); consecutive lanes write consecutive columns
__device__ void flash_tc_write_rows(floatX *dst, const float *src, int ld, int b, int r0, int T, int H, int h, int hd) {
    for (int i = threadIdx.x % 32; i < 16 * hd; i += 32) {
        int r = i / hd, c = i % hd, t = r0 + r;
        if (t < T) dst[(((size_t)b * T + t) * H + h) * hd + c] = to_x(src[r * ld + c]);
    }
}

// y (B,T,NH,hd), lse (B,NH,T); q (B,T,NH,hd), k, v (B,T,NKV,hd). Grid (T/FTC_ROWS, NH, B).
template <int HDP>
__global__ void __launch_bounds__(FTC_THREADS) flash_tc_forward_kernel(floatX *y, float *lse, const floatX *q,
                                                                       const floatX *k, const floatX *v, int T, int NH,
                                                                       int NKV, int hd, float alibi_alpha) {
    using namespace nvcuda;
    typedef FtcSmem<HDP> L;
    extern __shared__ __align__(128) unsigned char smem[];
    floatX *Ks = (floatX *)smem, *Vs = (floatX *)(smem + L::TILE);  // (FTC_TILE, LDH)
    float *Ss = (float *)(smem + 2 * L::TILE);                        // per warp (16, FTC_LDS)
    floatX *Ps = (floatX *)(smem + 2 * L::TILE + L::SCR);             // per warp (16, FTC_LDP)
    float *Os = (float *)(smem + 2 * L::TILE + L::SCR + L::PB);       // per warp (16, LDO); first Q (FTC_ROWS, LDH)
    int tile = gridDim.x - 1 - blockIdx.x;  // the longest rows first
    int h = blockIdx.y, b = blockIdx.z, kvh = h / (NH / NKV), warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int t0 = tile * FTC_ROWS, last = min(t0 + FTC_ROWS, T) - 1;
    float scale = 1.0f / sqrtf((float)hd), bias = alibi_alpha > 0 ? alibi_slope(h, NH) * alibi_alpha : 0.0f;
    flash_tc_load_tile<HDP>((floatX *)Os, q, b, t0, T, NH, h, hd);
    __syncthreads();
    wmma::fragment<wmma::matrix_a, 16, 16, 16, floatX, wmma::row_major> qf[HDP / 16];  // the warp's 16 queries
#pragma unroll
    for (int d = 0; d < HDP / 16; d++) wmma::load_matrix_sync(qf[d], (floatX *)Os + warp * 16 * L::LDH + d * 16, L::LDH);
    __syncthreads();  // every warp holds its queries: O's region is free
    float *Sw = Ss + warp * 16 * FTC_LDS, *Ow = Os + warp * 16 * L::LDO;
    floatX *Pw = Ps + warp * 16 * FTC_LDP;
    for (int i = lane; i < 16 * L::LDO; i += 32) Ow[i] = 0.0f;
    // lanes 2r and 2r+1 keep row r's online softmax, over the even and the odd columns
    int r = lane / 2, half = lane % 2, t = t0 + warp * 16 + r;
    float m = -FLT_MAX, l = 0.0f;
    for (int s0 = 0; s0 <= last; s0 += FTC_TILE) {
        __syncthreads();  // the previous tile is consumed
        flash_tc_load_tile<HDP>(Ks, k, b, s0, T, NKV, kvh, hd);
        flash_tc_load_tile<HDP>(Vs, v, b, s0, T, NKV, kvh, hd);
        __syncthreads();
        // S_w (16, FTC_TILE) = Q_w K^T: K (key, d) row-major is K^T column-major
#pragma unroll
        for (int j = 0; j < FTC_TILE / 16; j++) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> sf;
            wmma::fill_fragment(sf, 0.0f);
#pragma unroll
            for (int d = 0; d < HDP / 16; d++) {
                wmma::fragment<wmma::matrix_b, 16, 16, 16, floatX, wmma::col_major> kf;
                wmma::load_matrix_sync(kf, Ks + j * 16 * L::LDH + d * 16, L::LDH);
                wmma::mma_sync(sf, qf[d], kf, sf);
            }
            wmma::store_matrix_sync(Sw + j * 16, sf, FTC_LDS, wmma::mem_row_major);
        }
        __syncwarp();
        const float *srow = Sw + r * FTC_LDS;
        float mx = -FLT_MAX;
        for (int j = half; j < FTC_TILE; j += 2)
            if (s0 + j <= t) mx = fmaxf(mx, srow[j] * scale - bias * (float)(t - s0 - j));
        float mt = fmaxf(m, fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 1)));
        float corr = expf(m - mt), ps = 0.0f;
        floatX *prow = Pw + r * FTC_LDP;
        for (int j = half; j < FTC_TILE; j += 2) {
            float p = s0 + j <= t ? expf(srow[j] * scale - bias * (float)(t - s0 - j) - mt) : 0.0f;
            ps += p;
            prow[j] = to_x(p);
        }
        l = l * corr + ps + __shfl_xor_sync(0xffffffff, ps, 1);
        m = mt;
        float *orow = Ow + r * L::LDO;
        for (int c = half; c < HDP; c += 2) orow[c] *= corr;
        __syncwarp();
        // O_w (16, HDP) += P_w (16, FTC_TILE) V (FTC_TILE, HDP)
        wmma::fragment<wmma::matrix_a, 16, 16, 16, floatX, wmma::row_major> pf[FTC_TILE / 16];
#pragma unroll
        for (int j = 0; j < FTC_TILE / 16; j++) wmma::load_matrix_sync(pf[j], Pw + j * 16, FTC_LDP);
#pragma unroll
        for (int d = 0; d < HDP / 16; d++) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> of;
            wmma::load_matrix_sync(of, Ow + d * 16, L::LDO, wmma::mem_row_major);
#pragma unroll
            for (int j = 0; j < FTC_TILE / 16; j++) {
                wmma::fragment<wmma::matrix_b, 16, 16, 16, floatX, wmma::row_major> vf;
                wmma::load_matrix_sync(vf, Vs + j * 16 * L::LDH + d * 16, L::LDH);
                wmma::mma_sync(of, pf[j], vf, of);
            }
            wmma::store_matrix_sync(Ow + d * 16, of, L::LDO, wmma::mem_row_major);
        }
        __syncwarp();
    }
    float inv = 1.0f / l, *orow = Ow + r * L::LDO;
    for (int c = half; c < HDP; c += 2) orow[c] *= inv;
    if (half == 0 && t < T) lse[((size_t)b * NH + h) * T + t] = m + logf(l);
    __syncwarp();
    flash_tc_write_rows(y, Ow, L::LDO, b, t0 + warp * 16, T, NH, h, hd);
}

// The backward's two score products of a warp: S (16, FTC_TILE) = A1 B1^T and P = A2 B2^T, for
// A1, A2 the warp's 16 rows and B1, B2 whole tiles (bf16, leading dimension HDP + 8), into
// fp32 scratch with leading dimension FTC_LDS. The j loop is not unrolled: in dK/dV, dK's
// and dV's accumulators take half the registers at HDP 128.
template <int HDP>
__device__ void flash_tc_scores(float *S, float *P, const floatX *a1, const floatX *b1, const floatX *a2, const floatX *b2) {
    using namespace nvcuda;
    const int ld = FtcSmem<HDP>::LDH;
#pragma unroll 1
    for (int j = 0; j < FTC_TILE / 16; j++) {
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> sf, pf;
        wmma::fill_fragment(sf, 0.0f);
        wmma::fill_fragment(pf, 0.0f);
#pragma unroll
        for (int d = 0; d < HDP / 16; d++) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, floatX, wmma::row_major> fa;
            wmma::fragment<wmma::matrix_b, 16, 16, 16, floatX, wmma::col_major> fb;  // B (row, d) row-major is B^T
            wmma::load_matrix_sync(fa, a1 + d * 16, ld);
            wmma::load_matrix_sync(fb, b1 + j * 16 * ld + d * 16, ld);
            wmma::mma_sync(sf, fa, fb, sf);
            wmma::load_matrix_sync(fa, a2 + d * 16, ld);
            wmma::load_matrix_sync(fb, b2 + j * 16 * ld + d * 16, ld);
            wmma::mma_sync(pf, fa, fb, pf);
        }
        wmma::store_matrix_sync(S + j * 16, sf, FTC_LDS, wmma::mem_row_major);
        wmma::store_matrix_sync(P + j * 16, pf, FTC_LDS, wmma::mem_row_major);
    }
}

// dk, dv (B,T,NKV,hd), overwritten. Grid (T/FTC_ROWS, NKV, B): a block owns FTC_ROWS keys,
// 16 per warp, and walks the query tiles t0 >= its first key of every head of its group.
template <int HDP>
__global__ void __launch_bounds__(FTC_THREADS) flash_tc_backward_kv_kernel(floatX *dk, floatX *dv, const floatX *dy,
                                                                           const float *lse, const float *D,
                                                                           const floatX *q, const floatX *k,
                                                                           const floatX *v, int T, int NH, int NKV,
                                                                           int hd, float alibi_alpha) {
    using namespace nvcuda;
    typedef FtcSmem<HDP> L;
    extern __shared__ __align__(128) unsigned char smem[];
    floatX *Ks = (floatX *)smem, *Vs = (floatX *)(smem + L::TILE);                       // own keys (FTC_ROWS, LDH)
    floatX *Qs = (floatX *)(smem + 2 * L::TILE), *dYs = (floatX *)(smem + 3 * L::TILE);  // (FTC_TILE, LDH)
    float *lses = (float *)(smem + 4 * L::TILE), *Ds = lses + FTC_TILE;                 // (FTC_TILE)
    float *STs = (float *)(smem + 4 * L::TILE + 2 * L::VEC), *DPs = STs + FTC_WARPS * 16 * FTC_LDS;  // per warp (16, FTC_LDS)
    floatX *PTs = (floatX *)(smem + 4 * L::TILE + 2 * L::VEC + 2 * L::SCR), *DSs = PTs + FTC_WARPS * 16 * FTC_LDP;
    int kvh = blockIdx.y, b = blockIdx.z, group = NH / NKV, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int s0 = blockIdx.x * FTC_ROWS, sw = s0 + warp * 16;  // the first keys see the most queries
    float scale = 1.0f / sqrtf((float)hd);
    float *STw = STs + warp * 16 * FTC_LDS, *DPw = DPs + warp * 16 * FTC_LDS;
    floatX *PTw = PTs + warp * 16 * FTC_LDP, *DSw = DSs + warp * 16 * FTC_LDP;
    flash_tc_load_tile<HDP>(Ks, k, b, s0, T, NKV, kvh, hd);
    flash_tc_load_tile<HDP>(Vs, v, b, s0, T, NKV, kvh, hd);
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> dkf[HDP / 16], dvf[HDP / 16];  // the warp's 16 keys
#pragma unroll
    for (int d = 0; d < HDP / 16; d++) {
        wmma::fill_fragment(dkf[d], 0.0f);
        wmma::fill_fragment(dvf[d], 0.0f);
    }
    for (int h = kvh * group; h < (kvh + 1) * group; h++) {
        float bias = alibi_alpha > 0 ? alibi_slope(h, NH) * alibi_alpha : 0.0f;
        for (int t0 = s0; t0 < T; t0 += FTC_TILE) {
            __syncthreads();  // the previous tile is consumed (and the own keys are loaded)
            flash_tc_load_tile<HDP>(Qs, q, b, t0, T, NH, h, hd);
            flash_tc_load_tile<HDP>(dYs, dy, b, t0, T, NH, h, hd);
            if (threadIdx.x < FTC_TILE) {
                int t = t0 + threadIdx.x;
                lses[threadIdx.x] = t < T ? lse[((size_t)b * NH + h) * T + t] : 0.0f;
                Ds[threadIdx.x] = t < T ? D[((size_t)b * NH + h) * T + t] : 0.0f;
            }
            __syncthreads();
            // S^T_w (16 keys, FTC_TILE queries) = K_w Q^T and dP^T_w = V_w dY^T
            flash_tc_scores<HDP>(STw, DPw, Ks + warp * 16 * L::LDH, Qs, Vs + warp * 16 * L::LDH, dYs);
            __syncwarp();
            for (int i = lane; i < 16 * FTC_TILE; i += 32) {
                int kr = i / FTC_TILE, qc = i % FTC_TILE, s = sw + kr, t = t0 + qc;
                float p = 0.0f, ds = 0.0f;
                if (s <= t && t < T) {  // key s is seen by queries t >= s
                    p = expf(STw[kr * FTC_LDS + qc] * scale - bias * (float)(t - s) - lses[qc]);
                    ds = p * (DPw[kr * FTC_LDS + qc] - Ds[qc]) * scale;
                }
                PTw[kr * FTC_LDP + qc] = to_x(p);
                DSw[kr * FTC_LDP + qc] = to_x(ds);
            }
            __syncwarp();
            // dV_w += P^T_w dY, dK_w += dS^T_w Q
#pragma unroll 1
            for (int j = 0; j < FTC_TILE / 16; j++) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, floatX, wmma::row_major> pa, dsa;
                wmma::load_matrix_sync(pa, PTw + j * 16, FTC_LDP);
                wmma::load_matrix_sync(dsa, DSw + j * 16, FTC_LDP);
#pragma unroll
                for (int d = 0; d < HDP / 16; d++) {
                    wmma::fragment<wmma::matrix_b, 16, 16, 16, floatX, wmma::row_major> dyb, qb;
                    wmma::load_matrix_sync(dyb, dYs + j * 16 * L::LDH + d * 16, L::LDH);
                    wmma::mma_sync(dvf[d], pa, dyb, dvf[d]);
                    wmma::load_matrix_sync(qb, Qs + j * 16 * L::LDH + d * 16, L::LDH);
                    wmma::mma_sync(dkf[d], dsa, qb, dkf[d]);
                }
            }
        }
    }
    __syncthreads();  // every warp is done with the scratch: S^T's and dP^T's regions stage the output
    float *Ow = STs + warp * 16 * L::LDO;
#pragma unroll
    for (int d = 0; d < HDP / 16; d++) wmma::store_matrix_sync(Ow + d * 16, dkf[d], L::LDO, wmma::mem_row_major);
    __syncwarp();
    flash_tc_write_rows(dk, Ow, L::LDO, b, sw, T, NKV, kvh, hd);
    __syncwarp();
#pragma unroll
    for (int d = 0; d < HDP / 16; d++) wmma::store_matrix_sync(Ow + d * 16, dvf[d], L::LDO, wmma::mem_row_major);
    __syncwarp();
    flash_tc_write_rows(dv, Ow, L::LDO, b, sw, T, NKV, kvh, hd);
}

// dq (B,T,NH,hd), overwritten. Grid (T/FTC_ROWS, NH, B): a block owns FTC_ROWS queries, 16
// per warp, and walks the key tiles s0 <= its last query.
template <int HDP>
__global__ void __launch_bounds__(FTC_THREADS) flash_tc_backward_q_kernel(floatX *dq, const floatX *dy, const float *lse,
                                                                          const float *D, const floatX *q,
                                                                          const floatX *k, const floatX *v, int T, int NH,
                                                                          int NKV, int hd, float alibi_alpha) {
    using namespace nvcuda;
    typedef FtcSmem<HDP> L;
    extern __shared__ __align__(128) unsigned char smem[];
    floatX *Qs = (floatX *)smem, *dYs = (floatX *)(smem + L::TILE);                     // own queries (FTC_ROWS, LDH)
    floatX *Ks = (floatX *)(smem + 2 * L::TILE), *Vs = (floatX *)(smem + 3 * L::TILE);  // (FTC_TILE, LDH)
    float *lses = (float *)(smem + 4 * L::TILE), *Ds = lses + FTC_ROWS;                // (FTC_ROWS)
    float *Ss = (float *)(smem + 4 * L::TILE + 2 * L::VEC), *DPs = Ss + FTC_WARPS * 16 * FTC_LDS;  // per warp (16, FTC_LDS)
    floatX *DSs = (floatX *)(smem + 4 * L::TILE + 2 * L::VEC + 2 * L::SCR);            // per warp (16, FTC_LDP)
    int tile = gridDim.x - 1 - blockIdx.x;  // the longest rows first
    int h = blockIdx.y, b = blockIdx.z, kvh = h / (NH / NKV), warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int t0 = tile * FTC_ROWS, tw = t0 + warp * 16, last = min(t0 + FTC_ROWS, T) - 1;
    float scale = 1.0f / sqrtf((float)hd), bias = alibi_alpha > 0 ? alibi_slope(h, NH) * alibi_alpha : 0.0f;
    float *Sw = Ss + warp * 16 * FTC_LDS, *DPw = DPs + warp * 16 * FTC_LDS;
    floatX *DSw = DSs + warp * 16 * FTC_LDP;
    flash_tc_load_tile<HDP>(Qs, q, b, t0, T, NH, h, hd);
    flash_tc_load_tile<HDP>(dYs, dy, b, t0, T, NH, h, hd);
    if (threadIdx.x < FTC_ROWS) {
        int t = t0 + threadIdx.x;
        lses[threadIdx.x] = t < T ? lse[((size_t)b * NH + h) * T + t] : 0.0f;
        Ds[threadIdx.x] = t < T ? D[((size_t)b * NH + h) * T + t] : 0.0f;
    }
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> dqf[HDP / 16];  // the warp's 16 queries
#pragma unroll
    for (int d = 0; d < HDP / 16; d++) wmma::fill_fragment(dqf[d], 0.0f);
    for (int s0 = 0; s0 <= last; s0 += FTC_TILE) {
        __syncthreads();  // the previous tile is consumed (and the own rows are loaded)
        flash_tc_load_tile<HDP>(Ks, k, b, s0, T, NKV, kvh, hd);
        flash_tc_load_tile<HDP>(Vs, v, b, s0, T, NKV, kvh, hd);
        __syncthreads();
        // S_w (16, FTC_TILE) = Q_w K^T and dP_w = dY_w V^T
        flash_tc_scores<HDP>(Sw, DPw, Qs + warp * 16 * L::LDH, Ks, dYs + warp * 16 * L::LDH, Vs);
        __syncwarp();
        for (int i = lane; i < 16 * FTC_TILE; i += 32) {
            int qr = i / FTC_TILE, kc = i % FTC_TILE, t = tw + qr, s = s0 + kc;
            float ds = 0.0f;
            if (s <= t && t < T) {  // causal
                float p = expf(Sw[qr * FTC_LDS + kc] * scale - bias * (float)(t - s) - lses[warp * 16 + qr]);
                ds = p * (DPw[qr * FTC_LDS + kc] - Ds[warp * 16 + qr]) * scale;
            }
            DSw[qr * FTC_LDP + kc] = to_x(ds);
        }
        __syncwarp();
        // dQ_w += dS_w (16, FTC_TILE) K (FTC_TILE, HDP)
#pragma unroll
        for (int j = 0; j < FTC_TILE / 16; j++) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, floatX, wmma::row_major> dsa;
            wmma::load_matrix_sync(dsa, DSw + j * 16, FTC_LDP);
#pragma unroll
            for (int d = 0; d < HDP / 16; d++) {
                wmma::fragment<wmma::matrix_b, 16, 16, 16, floatX, wmma::row_major> kb;
                wmma::load_matrix_sync(kb, Ks + j * 16 * L::LDH + d * 16, L::LDH);
                wmma::mma_sync(dqf[d], dsa, kb, dqf[d]);
            }
        }
    }
    __syncthreads();  // every warp is done with the scratch: S's and dP's regions stage the output
    float *Ow = Ss + warp * 16 * L::LDO;
#pragma unroll
    for (int d = 0; d < HDP / 16; d++) wmma::store_matrix_sync(Ow + d * 16, dqf[d], L::LDO, wmma::mem_row_major);
    __syncwarp();
    flash_tc_write_rows(dq, Ow, L::LDO, b, tw, T, NH, h, hd);
}

template <int HDP>
static void flash_tc_forward_hd(floatX *y, float *lse, const floatX *q, const floatX *k, const floatX *v, int B, int T,
                                int NH, int NKV, int hd, float alibi_alpha) {
    static bool opted = false;  // above 48 KiB a kernel must opt in to dynamic shared memory
    if (!opted) {
        cudaCheck(cudaFuncSetAttribute(flash_tc_forward_kernel<HDP>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       (int)FtcSmem<HDP>::fwd));
        opted = true;
    }
    flash_tc_forward_kernel<HDP><<<dim3(ceil_div(T, FTC_ROWS), NH, B), FTC_THREADS, FtcSmem<HDP>::fwd>>>(
        y, lse, q, k, v, T, NH, NKV, hd, alibi_alpha);
    cudaCheck(cudaGetLastError());
}

template <int HDP>
static void flash_tc_backward_hd(floatX *dq, floatX *dk, floatX *dv, const float *D, const floatX *dy, const float *lse,
                                 const floatX *q, const floatX *k, const floatX *v, int B, int T, int NH, int NKV,
                                 int hd, float alibi_alpha) {
    static bool opted = false;
    if (!opted) {
        cudaCheck(cudaFuncSetAttribute(flash_tc_backward_kv_kernel<HDP>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       (int)FtcSmem<HDP>::kv));
        cudaCheck(cudaFuncSetAttribute(flash_tc_backward_q_kernel<HDP>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       (int)FtcSmem<HDP>::q));
        opted = true;
    }
    flash_tc_backward_kv_kernel<HDP><<<dim3(ceil_div(T, FTC_ROWS), NKV, B), FTC_THREADS, FtcSmem<HDP>::kv>>>(
        dk, dv, dy, lse, D, q, k, v, T, NH, NKV, hd, alibi_alpha);
    cudaCheck(cudaGetLastError());
    flash_tc_backward_q_kernel<HDP><<<dim3(ceil_div(T, FTC_ROWS), NH, B), FTC_THREADS, FtcSmem<HDP>::q>>>(
        dq, dy, lse, D, q, k, v, T, NH, NKV, hd, alibi_alpha);
    cudaCheck(cudaGetLastError());
}

// as flash_forward_cuda_cores, on tensor cores
static void flash_forward_tensor_cores(floatX *y, float *lse, const floatX *q, const floatX *k, const floatX *v, int B,
                                       int T, int NH, int NKV, int hd, float alibi_alpha) {
    if (hd <= 32) flash_tc_forward_hd<32>(y, lse, q, k, v, B, T, NH, NKV, hd, alibi_alpha);
    else if (hd <= 64) flash_tc_forward_hd<64>(y, lse, q, k, v, B, T, NH, NKV, hd, alibi_alpha);
    else flash_tc_forward_hd<FLASH_MAX_HD>(y, lse, q, k, v, B, T, NH, NKV, hd, alibi_alpha);
}

// as flash_backward_cuda_cores, on tensor cores
static void flash_backward_tensor_cores(floatX *dq, floatX *dk, floatX *dv, float *D, const floatX *dy, const floatX *y,
                                        const float *lse, const floatX *q, const floatX *k, const floatX *v, int B, int T,
                                        int NH, int NKV, int hd, float alibi_alpha) {
    size_t rows = (size_t)B * T * NH;
    flash_backward_dot_kernel<<<ceil_div(rows, 8), 256>>>(D, dy, y, B, T, NH, hd);
    cudaCheck(cudaGetLastError());
    if (hd <= 32) flash_tc_backward_hd<32>(dq, dk, dv, D, dy, lse, q, k, v, B, T, NH, NKV, hd, alibi_alpha);
    else if (hd <= 64) flash_tc_backward_hd<64>(dq, dk, dv, D, dy, lse, q, k, v, B, T, NH, NKV, hd, alibi_alpha);
    else flash_tc_backward_hd<FLASH_MAX_HD>(dq, dk, dv, D, dy, lse, q, k, v, B, T, NH, NKV, hd, alibi_alpha);
}
#endif

// --attention flash: tensor cores in the bf16 build, CUDA cores in the fp32 build (WMMA takes
// no fp32 inputs, and tf32 would miss the fp32 build's 1e-5 checks)
static void flash_attention_forward(floatX *y, float *lse, const floatX *q, const floatX *k, const floatX *v, int B,
                                    int T, int NH, int NKV, int hd, float alibi_alpha) {
#ifdef ENABLE_FP32
    flash_forward_cuda_cores(y, lse, q, k, v, B, T, NH, NKV, hd, alibi_alpha);
#else
    flash_forward_tensor_cores(y, lse, q, k, v, B, T, NH, NKV, hd, alibi_alpha);
#endif
}
static void flash_attention_backward(floatX *dq, floatX *dk, floatX *dv, float *D, const floatX *dy, const floatX *y,
                                     const float *lse, const floatX *q, const floatX *k, const floatX *v, int B, int T,
                                     int NH, int NKV, int hd, float alibi_alpha) {
#ifdef ENABLE_FP32
    flash_backward_cuda_cores(dq, dk, dv, D, dy, y, lse, q, k, v, B, T, NH, NKV, hd, alibi_alpha);
#else
    flash_backward_tensor_cores(dq, dk, dv, D, dy, y, lse, q, k, v, B, T, NH, NKV, hd, alibi_alpha);
#endif
}

// ----------------------------------------------------------------------------
// Forward-only attention for evaluation and generation: online softmax, no (T,T) matrix,
// so memory grows linearly with T (16K positions fit). Queries are Tq rows, keys and
// values Tk rows; query t is the (q_offset + t)-th key position (q_offset > 0 with a KV
// cache) and reads keys s <= q_offset + t, only the last `window` of them when window > 0.
// entropy (B,NH,Tq), when given, gets ent_scale * (-sum p ln p) added per row (one thread
// per element, no atomics: the sums over heads and layers repeat to the bit), from the running
// sums: H = m + ln l - (sum_s e^(x_s - m) x_s) / l. alibi_alpha > 0: ALiBi, scores get
// -m_h * alibi_alpha * (position distance). hd <= ATT_MAX_HD.
// A block owns ATT_ROWS consecutive queries of one (b, h); warp w takes rows w, w + 4, ...
// (interleaved: the causal work is balanced). Tiles of ATT_TILE keys and values are loaded
// coalesced (consecutive threads, consecutive elements of a row) into shared memory as
// fp32 and serve every row of the block: for the scores each lane takes one key (key rows
// padded to hd + 1, so the 32 lanes read 32 banks), for the output each lane owns the
// columns lane, lane + 32, ... of its rows' accumulators, which are indexed with fixed
// bounds and stay in registers.                               mirrors attention_forward_rows
#define ATT_MAX_HD 256
#define ATT_WARPS 4
#define ATT_THREADS (ATT_WARPS * 32)
#define ATT_RPW 4                          // query rows per warp
#define ATT_ROWS (ATT_WARPS * ATT_RPW)     // query rows per block
#define ATT_TILE 32                        // keys per tile: one per lane
// y (B,Tq,NH,hd), q (B,Tq,NH,hd), k, v (B,Tk,NKV,hd). Grid (Tq/ATT_ROWS, NH, B), ATT_THREADS threads.
__global__ void __launch_bounds__(ATT_THREADS) attention_forward_online_kernel(
    floatX *y, const floatX *q, const floatX *k, const floatX *v, int Tq, int Tk, int q_offset, int NH, int NKV, int hd,
    int window, float *entropy, float ent_scale, float alibi_alpha) {
    extern __shared__ float sm[];
    float *qs = sm, *ks = qs + ATT_ROWS * hd, *vs = ks + ATT_TILE * (hd + 1);  // (ATT_ROWS,hd), (ATT_TILE,hd+1), (ATT_TILE,hd)
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int t0 = blockIdx.x * ATT_ROWS, h = blockIdx.y, b = blockIdx.z, kvh = h / (NH / NKV);
    int nrows = min(ATT_ROWS, Tq - t0);
    float scale = 1.0f / sqrtf((float)hd), bias = alibi_alpha > 0 ? alibi_slope(h, NH) * alibi_alpha : 0.0f;
    for (int i = threadIdx.x; i < nrows * hd; i += blockDim.x)
        qs[i] = to_f(q[(((size_t)b * Tq + t0 + i / hd) * NH + h) * hd + i % hd]) * scale;
    int hi = q_offset + t0 + nrows - 1;                                           // the block's last key
    int lo = window && q_offset + t0 - window + 1 > 0 ? q_offset + t0 - window + 1 : 0;  // its first row's first key
    float acc[ATT_RPW][ATT_MAX_HD / 32], m[ATT_RPW], l[ATT_RPW], xsum[ATT_RPW];
#pragma unroll
    for (int i = 0; i < ATT_RPW; i++) {
        m[i] = -FLT_MAX;
        l[i] = xsum[i] = 0.0f;
#pragma unroll
        for (int r = 0; r < ATT_MAX_HD / 32; r++) acc[i][r] = 0.0f;
    }
    size_t kstride = (size_t)NKV * hd;
    const floatX *kb = k + ((size_t)b * Tk * NKV + kvh) * hd, *vb = v + ((size_t)b * Tk * NKV + kvh) * hd;
    for (int s0 = lo; s0 <= hi; s0 += ATT_TILE) {
        __syncthreads();  // the previous tile is consumed (and the queries are stored)
        for (int i = threadIdx.x; i < ATT_TILE * hd; i += blockDim.x) {
            int j = i / hd, c = i % hd, s = s0 + j;
            ks[j * (hd + 1) + c] = s <= hi ? to_f(kb[s * kstride + c]) : 0.0f;
            vs[i] = s <= hi ? to_f(vb[s * kstride + c]) : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int i = 0; i < ATT_RPW; i++) {
            int r = warp + i * ATT_WARPS, last = q_offset + t0 + r;
            int first = window && last - window + 1 > 0 ? last - window + 1 : 0;
            if (r >= nrows || s0 > last || s0 + ATT_TILE <= first) continue;  // the whole warp skips
            int s = s0 + lane;
            bool in = s >= first && s <= last;
            float score = -FLT_MAX;
            if (in) {
                const float *qr = qs + r * hd, *kr = ks + lane * (hd + 1);
                score = 0.0f;
                for (int c = 0; c < hd; c++) score += qr[c] * kr[c];
                score -= bias * (float)(last - s);
            }
            float m_new = fmaxf(m[i], warp_max(score));
            float p = in ? expf(score - m_new) : 0.0f;
            float corr = expf(m[i] - m_new);
            l[i] = l[i] * corr + warp_sum(p);
            xsum[i] = xsum[i] * corr + warp_sum(in ? p * score : 0.0f);
#pragma unroll
            for (int c = 0; c < ATT_MAX_HD / 32; c++) acc[i][c] *= corr;
            int j1 = min(last - s0, ATT_TILE - 1);
            for (int j = max(first - s0, 0); j <= j1; j++) {
                float pj = __shfl_sync(0xffffffff, p, j);
                const float *vr = vs + j * hd;
#pragma unroll
                for (int c = 0; c < ATT_MAX_HD / 32; c++)  // fixed bounds: acc stays in registers
                    if (c * 32 + lane < hd) acc[i][c] += pj * vr[c * 32 + lane];
            }
            m[i] = m_new;
        }
    }
#pragma unroll
    for (int i = 0; i < ATT_RPW; i++) {
        int r = warp + i * ATT_WARPS;
        if (r >= nrows) continue;
        floatX *yr = y + (((size_t)b * Tq + t0 + r) * NH + h) * hd;
#pragma unroll
        for (int c = 0; c < ATT_MAX_HD / 32; c++)
            if (c * 32 + lane < hd) yr[c * 32 + lane] = to_x(acc[i][c] / l[i]);
        if (entropy && lane == 0)
            entropy[((size_t)b * NH + h) * Tq + t0 + r] += ent_scale * (m[i] + logf(l[i]) - xsum[i] / l[i]);
    }
}

// dynamic shared memory of attention_forward_online_kernel
static size_t attention_online_smem(int hd) {
    return ((size_t)ATT_ROWS * hd + (size_t)ATT_TILE * (hd + 1) + (size_t)ATT_TILE * hd) * sizeof(float);
}

// the launch of attention_forward_online_kernel over B sequences (the other arguments are its own)
static void attention_forward_online(floatX *y, const floatX *q, const floatX *k, const floatX *v, int B, int Tq, int Tk,
                                     int q_offset, int NH, int NKV, int hd, int window, float *entropy,
                                     float ent_scale, float alibi_alpha) {
    size_t smem = attention_online_smem(hd);
    static size_t opted = 0;  // above 48 KiB (hd > 128) a kernel must opt in to dynamic shared memory
    if (smem > 48 * 1024 && smem > opted) {
        opted = attention_online_smem(ATT_MAX_HD);
        cudaCheck(cudaFuncSetAttribute(attention_forward_online_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)opted));
    }
    attention_forward_online_kernel<<<dim3(ceil_div(Tq, ATT_ROWS), NH, B), ATT_THREADS, smem>>>(
        y, q, k, v, Tq, Tk, q_offset, NH, NKV, hd, window, entropy, ent_scale, alibi_alpha);
    cudaCheck(cudaGetLastError());
}

// ----------------------------------------------------------------------------
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

// ----------------------------------------------------------------------------
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
// GRU (--arch gru), time-major rows (T,B,...): torch.nn.GRU's equations, gates r, z, n.
//                                                    mirrors gru_layer_forward / gru_layer_backward

__device__ __forceinline__ float sigmoid_f(float v) { return 1.0f / (1.0f + expf(-v)); }

// One step: g (B,3C) holds Wih x + (no bias) on entry and r, z, n on exit; gh (B,3C) is
// Whh h_{t-1} (NULL with h_{t-1} = 0, i.e. hp NULL); hn (B,C) gets Whn h + bhn; h (B,C) h_t.
__global__ void gru_step_forward_kernel(floatX *h, floatX *g, floatX *hn, const floatX *gh, const floatX *hp,
                                        const floatX *b_ih, const floatX *b_hh, int B, int C) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= B * C) return;
    int b = i / C, c = i % C;
    floatX *gb = g + (size_t)b * 3 * C;
    const floatX *hb = gh ? gh + (size_t)b * 3 * C : NULL;
    float hr = hb ? to_f(hb[c]) : 0.0f, hz = hb ? to_f(hb[C + c]) : 0.0f, hh = hb ? to_f(hb[2 * C + c]) : 0.0f;
    float r = sigmoid_f(to_f(gb[c]) + to_f(b_ih[c]) + hr + to_f(b_hh[c]));
    float z = sigmoid_f(to_f(gb[C + c]) + to_f(b_ih[C + c]) + hz + to_f(b_hh[C + c]));
    float rec = hh + to_f(b_hh[2 * C + c]);
    float n = tanhf(to_f(gb[2 * C + c]) + to_f(b_ih[2 * C + c]) + r * rec);
    gb[c] = to_x(r);
    gb[C + c] = to_x(z);
    gb[2 * C + c] = to_x(n);
    hn[i] = to_x(rec);
    h[i] = to_x((1.0f - z) * n + z * (hp ? to_f(hp[i]) : 0.0f));
}

// One step back: dh (B,C) from above, dcarry (B,C) fp32 the gradient reaching h_t from t+1
// (replaced by the direct part d*z; the caller adds dgh . Whh); di, dr (B,3C) get the
// gradients of the input and recurrent pre-activations.
__global__ void gru_step_backward_kernel(floatX *di, floatX *dr, float *dcarry, const floatX *dh, const floatX *g,
                                         const floatX *hn, const floatX *hp, int B, int C) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= B * C) return;
    size_t j = (size_t)(i / C) * 3 * C + i % C;
    float r = to_f(g[j]), z = to_f(g[j + C]), n = to_f(g[j + 2 * C]);
    float d = to_f(dh[i]) + dcarry[i];
    float dn = d * (1.0f - z), dz = d * ((hp ? to_f(hp[i]) : 0.0f) - n);
    float dan = dn * (1.0f - n * n), daz = dz * z * (1.0f - z), dar = dan * to_f(hn[i]) * r * (1.0f - r);
    di[j] = dr[j] = to_x(dar);
    di[j + C] = dr[j + C] = to_x(daz);
    di[j + 2 * C] = to_x(dan);
    dr[j + 2 * C] = to_x(dan * r);
    dcarry[i] = d * z;
}

// db (fp32, cols) += column sums of d (rows, cols); one thread per column, rows in order
__global__ void column_sum_kernel(float *db, const floatX *d, size_t rows, int cols) {
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= cols) return;
    float s = 0.0f;
    for (size_t r = 0; r < rows; r++) s += to_f(d[r * cols + j]);
    db[j] += s;
}

// dst (T,B,C) = src (B,T,C), or back with to_batch = 1
__global__ void transpose_bt_kernel(floatX *dst, const floatX *src, int B, int T, int C, int to_batch) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;  // over (B,T,C) of the batch-major side
    if (i >= (size_t)B * T * C) return;
    int c = (int)(i % C), t = (int)((i / C) % T), b = (int)(i / ((size_t)C * T));
    size_t tm = ((size_t)t * B + b) * C + c;
    if (to_batch) dst[i] = src[tm];
    else dst[tm] = src[i];
}

// ----------------------------------------------------------------------------
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

__global__ void adamw_kernel(float *p, floatX *px, const float *g, float *m, float *v, size_t n, float lr, float beta1,
                             float beta2, float bc1, float bc2, float eps, float wd, float grad_scale) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float gi = g[i] * grad_scale;
    float mi = beta1 * m[i] + (1.0f - beta1) * gi;
    float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    float pi = p[i] - lr * ((mi / bc1) / (sqrtf(vi / bc2) + eps) + wd * p[i]);
    p[i] = pi;
    px[i] = to_x(pi);
}

__global__ void copy_to_x_kernel(floatX *dst, const float *src, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = to_x(src[i]);
}

// ----------------------------------------------------------------------------
// activations: the same named views as the CPU's Acts. train = 0: layers share one set of
// buffers and attention keeps no (T,T) matrix; nor does --attention flash, which keeps
// the rows' log-sum-exp instead.

typedef struct {
    int B, T, train;
    size_t ls_C, ls_q, ls_kv, ls_F, ls_N, ls_att;  // per-layer strides (0 when !train)
    void *mem;
    floatX *resid, *n1, *q, *k, *v, *att, *atty, *mid, *n2, *gate, *up, *h, *nf, *logits;
    float *rstd1, *rstd2, *rstdf, *losses;
    float *lse, *dsum;  // --attention flash: (L,B,NH,T) log-sum-exp of the scores; (B,NH,T) backward scratch
    float *dw_part;     // (ceil(N/8), max(C, NH*hd, NKV*hd)): the RMSNorm backward's per-block dw
    floatX *dres, *dC, *dq, *dk, *dv, *datty, *datt, *dgate, *dup, *dh;  // backward scratch, one layer
    floatX *qraw, *kraw, *dqraw, *dkraw;  // --qk_norm: projections before the norm, their gradients
    float *rstdq, *rstdk;
    // --arch gru (as the CPU's): resid (L+1,T,B,C) time-major, the blocks' views empty
    floatX *gates, *ghn, *gh, *top;  // (L,T,B,3C), (L,T,B,C), (B,3C), (B,T,C)
    floatX *dgi, *dgh, *dhx;         // (T,B,3C), (T,B,3C), (T,B,C)
    float *dcarry;                   // (B,C)
    int *inputs, *targets;  // (B,T); with train, the embeddings' scatters follow (acts_ints)
    int *sc_wte, *sc_wpe;   // (SCATTER_INTS(N)) dwte's rows by token, dwpe's by position (--pe learned)
} Acts;

// the ints of a (B,T) batch, in this order: inputs, targets, and with train sc_wte, sc_wpe
static size_t acts_ints(size_t N, int train) { return 2 * N + (train ? 2 * SCATTER_INTS(N) : 0); }

static size_t align64(size_t n) { return (n + 63) / 64 * 64; }

// Lays out the views of a (B,T) batch in mem (64-byte aligned) and returns the bytes they
// take (mem NULL: only counts, for the memory estimate).
static size_t acts_layout(Acts *a, const Config *c, int B, int T, int train, char *mem) {
    int hd = c->C / c->NH, L = c->L;
    size_t N = (size_t)B * T, C = c->C, QD = (size_t)c->NH * hd, KD = (size_t)c->NKV * hd, F = c->F;
    size_t nl = train ? L : 1, qk = c->qk_norm, tq = train && qk;
    size_t gru = c->arch == ARCH_GRU, tr = !gru, gt = gru && train;  // tr: transformer views, gru/gt: GRU views
    size_t flash = tr * train * (c->attention == ATTN_FLASH);  // flash keeps lse (B,NH,T), not att (B,NH,T,T)
    size_t att = tr * !flash * B * c->NH * T * T;
    memset(a, 0, sizeof(*a));
    a->B = B; a->T = T; a->train = train;
    a->ls_C = train ? N * C : 0;
    a->ls_q = train ? N * QD : 0;
    a->ls_kv = train ? N * KD : 0;
    a->ls_F = train ? N * F : 0;
    a->ls_N = train ? N : 0;
    a->ls_att = train ? att : 0;
    size_t xs[] = {(train ? L + 1 : 1) * N * C, tr * nl * N * C, tr * nl * N * QD, tr * nl * N * KD, tr * nl * N * KD,
                   train ? nl * att : 0, tr * nl * N * QD, tr * nl * N * C, tr * nl * N * C, tr * nl * N * F,
                   tr * nl * N * F, tr * nl * N * F, N * C, N * c->Vp,
                   train ? N * C : 0, train ? N * C : 0, tr * (train ? N * QD : 0), tr * (train ? N * KD : 0),
                   tr * (train ? N * KD : 0), tr * (train ? N * QD : 0), train ? att : 0, tr * (train ? N * F : 0),
                   tr * (train ? N * F : 0), tr * (train ? N * F : 0),
                   qk * nl * N * QD, qk * nl * N * KD, tq * N * QD, tq * N * KD,
                   gru * nl * N * 3 * C, gru * nl * N * C, gru * B * 3 * C, gru * N * C, gt * N * 3 * C, gt * N * 3 * C,
                   gt * N * C};
    floatX **xv[] = {&a->resid, &a->n1, &a->q, &a->k, &a->v, &a->att, &a->atty, &a->mid, &a->n2, &a->gate, &a->up,
                     &a->h, &a->nf, &a->logits, &a->dres, &a->dC, &a->dq, &a->dk, &a->dv, &a->datty, &a->datt,
                     &a->dgate, &a->dup, &a->dh, &a->qraw, &a->kraw, &a->dqraw, &a->dkraw,
                     &a->gates, &a->ghn, &a->gh, &a->top, &a->dgi, &a->dgh, &a->dhx};
    size_t widest = C > QD ? (C > KD ? C : KD) : (QD > KD ? QD : KD);
    size_t fs[] = {tr * nl * N, tr * nl * N, N, N, qk * nl * N, qk * nl * N, gt * B * C, flash * nl * N * c->NH,
                   flash * N * c->NH, train * (N + 7) / 8 * widest};
    float **fv[] = {&a->rstd1, &a->rstd2, &a->rstdf, &a->losses, &a->rstdq, &a->rstdk, &a->dcarry, &a->lse, &a->dsum,
                    &a->dw_part};
    size_t nx = sizeof(xs) / sizeof(xs[0]), nf = sizeof(fs) / sizeof(fs[0]), off = 0;
    a->mem = mem;
    for (size_t i = 0; i < nf; i++) {
        *fv[i] = fs[i] && mem ? (float *)(mem + off) : NULL;
        off += align64(fs[i] * sizeof(float));
    }
    int *ints = mem ? (int *)(mem + off) : NULL;
    off += align64(acts_ints(N, train) * sizeof(int));
    a->inputs = ints;
    a->targets = ints ? ints + N : NULL;
    a->sc_wte = ints && train ? ints + 2 * N : NULL;
    a->sc_wpe = ints && train ? ints + 2 * N + SCATTER_INTS(N) : NULL;
    for (size_t i = 0; i < nx; i++) {
        *xv[i] = xs[i] && mem ? (floatX *)(mem + off) : NULL;
        off += align64(xs[i] * sizeof(floatX));
    }
    return off;
}

static void acts_alloc(Acts *a, const Config *c, int B, int T, int train) {
    size_t n = acts_layout(a, c, B, T, train, NULL);
    acts_layout(a, c, B, T, train, (char *)dmalloc(n));
}

// ----------------------------------------------------------------------------
// the model

typedef struct {
    Config cfg;
    int hd;
    Shape shapes[NP];
    size_t n_params, offsets[NP];
    float *params, *grads, *m, *v;  // fp32 master weights, gradients, moments (device)
    floatX *params_x;               // compute copy (aliases params in the FP32 build)
    float *norm_partial;
    float *loss_sum;                // (1) device: the step's mean loss, summed micro-batch by micro-batch
    int *stage;                     // pinned host: the step's ints (acts_ints), uploaded asynchronously
    float *stage_w, *d_weights;     // loss masks: the step's target weights (pinned), a micro-batch's (device)
    size_t stage_cap, stage_w_cap;
    Acts acts;
} GPT;

// host copies of the NP parameter views (checkpoints, init, dumps)
typedef struct {
    float *mem, *views[NP];
} HostParams;

static void host_params(HostParams *h, const GPT *g) {
    h->mem = (float *)xmalloc(g->n_params * sizeof(float));
    for (int i = 0; i < NP; i++) h->views[i] = h->mem + g->offsets[i];
}

static floatX *P(const GPT *g, int i) { return g->params_x + g->offsets[i]; }
static float *G(const GPT *g, int i) { return g->grads + g->offsets[i]; }

static void gpt_alloc(GPT *g, const Config *c, int train) {
    memset(g, 0, sizeof(*g));
    g->cfg = *c;
    g->hd = c->C / c->NH;
    if (c->arch == ARCH_TRANSFORMER && g->hd > ATT_MAX_HD)
        fail("train_gpt's evaluation attention takes head sizes up to %d; this model's is %d", ATT_MAX_HD, g->hd);
    param_shapes(c, g->shapes);
    for (int i = 0; i < NP; i++) {
        g->offsets[i] = g->n_params;
        g->n_params += g->shapes[i].numel;
    }
    size_t bytes = g->n_params * sizeof(float);
    g->params = (float *)dmalloc(bytes);
#ifdef ENABLE_FP32
    g->params_x = g->params;
#else
    g->params_x = (floatX *)dmalloc(g->n_params * sizeof(floatX));
#endif
    if (train) {
        g->grads = (float *)dmalloc(bytes);
        g->m = (float *)dmalloc(bytes);
        g->v = (float *)dmalloc(bytes);
        cudaCheck(cudaMemset(g->m, 0, bytes));
        cudaCheck(cudaMemset(g->v, 0, bytes));
        g->norm_partial = (float *)dmalloc(NORM_BLOCKS * sizeof(float));
        g->loss_sum = (float *)dmalloc(sizeof(float));
    }
}

static void gpt_free(GPT *g) {
    cudaFree(g->params);
#ifndef ENABLE_FP32
    cudaFree(g->params_x);
#endif
    cudaFree(g->grads);
    cudaFree(g->m);
    cudaFree(g->v);
    cudaFree(g->norm_partial);
    cudaFree(g->loss_sum);
    cudaFreeHost(g->stage);
    cudaFreeHost(g->stage_w);
    cudaFree(g->d_weights);
    cudaFree(g->acts.mem);
}

// host fp32 weights (NP views) -> device master weights and compute copy
static void gpt_upload(GPT *g, float *const *host) {
    for (int i = 0; i < NP; i++)
        if (g->shapes[i].numel)
            cudaCheck(cudaMemcpy(g->params + g->offsets[i], host[i], g->shapes[i].numel * sizeof(float), cudaMemcpyHostToDevice));
#ifndef ENABLE_FP32
    copy_to_x_kernel<<<ceil_div(g->n_params, 256), 256>>>(g->params_x, g->params, g->n_params);
    cudaCheck(cudaGetLastError());
#endif
}

// The CPU's init (llmc/checkpoint.h), drawn on the host.
static void gpt_init(GPT *g, uint64_t seed) {
    HostParams h;
    host_params(&h, g);
    param_init(&g->cfg, h.views, seed);
    gpt_upload(g, h.views);
    free(h.mem);
}

#define LAUNCH_ROWS(kernel, rows, smem, ...)                                  \
    do {                                                                      \
        kernel<<<ceil_div((rows), 8), 256, (smem)>>>(__VA_ARGS__);            \
        cudaCheck(cudaGetLastError());                                        \
    } while (0)
#define LAUNCH_ELEMS(kernel, n, ...)                                          \
    do {                                                                      \
        kernel<<<ceil_div((n), 256), 256>>>(__VA_ARGS__);                      \
        cudaCheck(cudaGetLastError());                                        \
    } while (0)

// A device KV cache for evaluation and generation (B = 1): keys (after RoPE) and values
// of every layer. Mirrors KVCache.
typedef struct {
    int cap, len, KD, L;
    floatX *k, *v, *tmp;  // (L, cap, KD); tmp (cap, KD) for moves
} KVCache;

static void kv_alloc(KVCache *kv, const Config *c, int cap) {
    kv->cap = cap;
    kv->len = 0;
    kv->L = c->L;
    kv->KD = c->NKV * (c->C / c->NH);
    kv->k = (floatX *)dmalloc((size_t)c->L * cap * kv->KD * sizeof(floatX));
    kv->v = (floatX *)dmalloc((size_t)c->L * cap * kv->KD * sizeof(floatX));
    kv->tmp = (floatX *)dmalloc((size_t)cap * kv->KD * sizeof(floatX));
}

static void kv_free(KVCache *kv) {
    cudaFree(kv->k);
    cudaFree(kv->v);
    cudaFree(kv->tmp);
}

// Keep only the last `keep` entries (their rotations unchanged).    mirrors kv_keep_last
static void kv_keep_last(KVCache *kv, int keep) {
    if (kv->len <= keep) return;
    size_t drop = (size_t)(kv->len - keep) * kv->KD, bytes = (size_t)keep * kv->KD * sizeof(floatX);
    for (int l = 0; l < kv->L; l++) {
        floatX *bufs[2] = {kv->k + (size_t)l * kv->cap * kv->KD, kv->v + (size_t)l * kv->cap * kv->KD};
        for (int i = 0; i < 2; i++) {
            cudaCheck(cudaMemcpy(kv->tmp, bufs[i] + drop, bytes, cudaMemcpyDeviceToDevice));
            cudaCheck(cudaMemcpy(bufs[i], kv->tmp, bytes, cudaMemcpyDeviceToDevice));
        }
    }
    kv->len = keep;
}

// Options of a forward-only pass (acts with train = 0).              mirrors FwdOpts
typedef struct {
    int window;      // > 0: each query sees only the last `window` keys
    float *entropy;  // device (B,NH,T): each head's share of the mean attention entropy is added
    KVCache *kv;     // inputs continue the cached sequence at positions pos0 + t
    int pos0;
    floatX *state;   // --arch gru, device (L,B,C), when given: the state to continue from, updated
} FwdOpts;

// The head: final norm of xL (B,T,C), logits, and with with_loss the per-position losses.
//                                                             mirrors head_forward
static void head_forward(GPT *g, Acts *a, const floatX *xL, int with_loss) {
    const Config *c = &g->cfg;
    int N = a->B * a->T;
    LAUNCH_ROWS(rmsnorm_forward_kernel, N, 0, a->nf, a->rstdf, xL, P(g, P_FINAL_NORM), N, c->C, c->rms_eps);
    matmul_forward(a->logits, a->nf, P(g, P_WTE), N, c->C, c->Vp);
    if (with_loss) {
        classifier_kernel<<<N, 1024>>>(a->logits, a->losses, a->targets, NULL, N, c->V, c->Vp, 0.0f, 0);
        cudaCheck(cudaGetLastError());
    }
}

// Its backward (the forward must not have run the classifier): a->dres = d xL. Each
// target's loss weighs dloss / N, or weights[i] (device) when given.  mirrors head_backward
static void head_backward(GPT *g, Acts *a, const floatX *xL, const float *weights, float dloss) {
    const Config *c = &g->cfg;
    int N = a->B * a->T;
    classifier_kernel<<<N, 1024>>>(a->logits, a->losses, a->targets, weights, N, c->V, c->Vp, dloss / N, 1);
    cudaCheck(cudaGetLastError());
    matmul_backward(a->dC, G(g, P_WTE), a->logits, a->nf, P(g, P_WTE), N, c->C, c->Vp, 0);
    rmsnorm_backward(a->dres, G(g, P_FINAL_NORM), a->dw_part, a->dC, xL, P(g, P_FINAL_NORM), a->rstdf, N, c->C, 0);
}

// ----------------------------------------------------------------------------
// the GRU model (--arch gru)                                  mirrors gru_forward, gru_backward

static void gru_forward(GPT *g, Acts *a, int with_loss, floatX *state) {
    const Config *c = &g->cfg;
    int B = a->B, T = a->T, C = c->C, N = B * T;
    size_t BC = (size_t)B * C, G3 = 3 * (size_t)C, lsG = a->train ? (size_t)N * G3 : 0, CC = G3 * C;
    LAUNCH_ELEMS(encoder_forward_kernel, (size_t)N * C, a->top, a->inputs, P(g, P_WTE), N, C);
    LAUNCH_ELEMS(transpose_bt_kernel, (size_t)N * C, a->resid, a->top, B, T, C, 0);
    for (int l = 0; l < c->L; l++) {
        floatX *x = a->resid + l * a->ls_C, *h = a->resid + (a->train ? (l + 1) * a->ls_C : 0);  // eval: in place
        floatX *gates = a->gates + l * lsG, *ghn = a->ghn + l * a->ls_C, *h0 = state ? state + l * BC : NULL;
        const floatX *w_hh = P(g, P_GRU_W_HH) + l * CC, *b_ih = P(g, P_GRU_B_IH) + l * G3, *b_hh = P(g, P_GRU_B_HH) + l * G3;
        matmul_forward(gates, x, P(g, P_GRU_W_IH) + l * CC, N, C, 3 * C);  // every step's input projection
        for (int t = 0; t < T; t++) {
            const floatX *hp = t ? h + (t - 1) * BC : h0;
            if (hp) matmul_forward(a->gh, hp, w_hh, B, C, 3 * C);
            LAUNCH_ELEMS(gru_step_forward_kernel, BC, h + t * BC, gates + t * B * G3, ghn + t * BC, hp ? a->gh : NULL, hp,
                         b_ih, b_hh, B, C);
        }
        if (h0) cudaCheck(cudaMemcpy(h0, h + (T - 1) * BC, BC * sizeof(floatX), cudaMemcpyDeviceToDevice));
    }
    LAUNCH_ELEMS(transpose_bt_kernel, (size_t)N * C, a->top, a->resid + (a->train ? c->L * a->ls_C : 0), B, T, C, 1);
    head_forward(g, a, a->top, with_loss);
}

static void gru_backward(GPT *g, Acts *a, const float *weights, float dloss) {
    const Config *c = &g->cfg;
    int B = a->B, T = a->T, C = c->C, N = B * T;
    size_t BC = (size_t)B * C, G3 = 3 * (size_t)C, lsG = (size_t)N * G3, CC = G3 * C;
    head_backward(g, a, a->top, weights, dloss);
    floatX *dout = a->dhx, *dx = a->dC;  // d(layer output), d(layer input): swapped per layer
    LAUNCH_ELEMS(transpose_bt_kernel, (size_t)N * C, dout, a->dres, B, T, C, 0);
    for (int l = c->L - 1; l >= 0; l--) {
        floatX *x = a->resid + l * a->ls_C, *h = a->resid + (l + 1) * a->ls_C;
        floatX *gates = a->gates + l * lsG, *ghn = a->ghn + l * a->ls_C;
        const floatX *w_hh = P(g, P_GRU_W_HH) + l * CC;
        cudaCheck(cudaMemset(a->dcarry, 0, BC * sizeof(float)));
        for (int t = T - 1; t >= 0; t--) {
            LAUNCH_ELEMS(gru_step_backward_kernel, BC, a->dgi + t * B * G3, a->dgh + t * B * G3, a->dcarry, dout + t * BC,
                         gates + t * B * G3, ghn + t * BC, t ? h + (t - 1) * BC : NULL, B, C);
            if (t) matmul_dinp_f32(a->dcarry, a->dgh + t * B * G3, w_hh, B, C, 3 * C);
        }
        if (T > 1) matmul_dweight(G(g, P_GRU_W_HH) + l * CC, a->dgh + B * G3, h, (T - 1) * B, C, 3 * C);
        matmul_backward(dx, G(g, P_GRU_W_IH) + l * CC, a->dgi, x, P(g, P_GRU_W_IH) + l * CC, N, C, 3 * C, 0);
        LAUNCH_ELEMS(column_sum_kernel, G3, G(g, P_GRU_B_IH) + l * G3, a->dgi, (size_t)N, 3 * C);
        LAUNCH_ELEMS(column_sum_kernel, G3, G(g, P_GRU_B_HH) + l * G3, a->dgh, (size_t)N, 3 * C);
        floatX *swap = dout;
        dout = dx;
        dx = swap;
    }
    LAUNCH_ELEMS(transpose_bt_kernel, (size_t)N * C, a->dres, dout, B, T, C, 1);  // d(embeddings)
    scatter_add_rows(G(g, P_WTE), a->dres, a->sc_wte, N, C);
}

// ----------------------------------------------------------------------------
// the transformer

// ALiBi's distance factor for layer l (0: no ALiBi)
static float alibi_alpha(const PosStep *ps, int l) { return ps->pe == PE_ALIBI ? ps->alpha[l] : 0.0f; }

// Forward over a->inputs (B,T) on the device; per-position losses land in a->losses when
// with_loss. Mirrors gpt_forward.
static void gpt_forward(GPT *g, Acts *a, const PosStep *ps, int with_loss, const FwdOpts *o) {
    const Config *c = &g->cfg;
    if (c->arch == ARCH_GRU) {
        gru_forward(g, a, with_loss, o ? o->state : NULL);
        return;
    }
    int B = a->B, T = a->T, C = c->C, NH = c->NH, NKV = c->NKV, hd = g->hd, F = c->F;
    int N = B * T, QD = NH * hd, KD = NKV * hd;
    size_t NC = (size_t)N * C, NF = (size_t)N * F;
    if (o && o->kv && (B != 1 || o->kv->len + T > o->kv->cap))  // checked before anything is written
        fail("internal: a KV cache of %d entries (batch 1) cannot take %d x %d more", o->kv->cap, B, T);
    int pos0 = o && o->kv ? o->pos0 : 0;
    upload_positions(ps, c->L);  // RPE, RFS (the backward reuses them)
    LAUNCH_ELEMS(encoder_forward_kernel, NC, a->resid, a->inputs, P(g, P_WTE), N, C);
    if (ps->pe == PE_SINUSOIDAL)
        LAUNCH_ELEMS(sinusoidal_kernel, (size_t)N * (C / 2), a->resid, *ps, B, T, C, d_pos_layer(ps, 0), pos0,
                     sinusoidal_freqs(C));
    if (ps->pe == PE_LEARNED) {
        learned_rows_check(ps, pos0, T, g->shapes[P_WPE].shape[0]);
        LAUNCH_ELEMS(learned_forward_kernel, NC, a->resid, P(g, P_WPE), *ps, B, T, C, d_pos_layer(ps, 0), pos0);
    }
    for (int l = 0; l < c->L; l++) {
        floatX *x = a->resid + l * a->ls_C, *xn = a->resid + (a->train ? (l + 1) * a->ls_C : 0);
        floatX *n1 = a->n1 + l * a->ls_C, *q = a->q + l * a->ls_q, *k = a->k + l * a->ls_kv, *v = a->v + l * a->ls_kv;
        floatX *atty = a->atty + l * a->ls_q, *mid = a->mid + l * a->ls_C, *n2 = a->n2 + l * a->ls_C;
        floatX *gate = a->gate + l * a->ls_F, *up = a->up + l * a->ls_F, *h = a->h + l * a->ls_F;
        LAUNCH_ROWS(rmsnorm_forward_kernel, N, 0, n1, a->rstd1 + l * a->ls_N, x, P(g, P_ATTN_NORM) + (size_t)l * C, N, C,
                    c->rms_eps);
        floatX *qraw = c->qk_norm ? a->qraw + l * a->ls_q : q, *kraw = c->qk_norm ? a->kraw + l * a->ls_kv : k;
        matmul_forward(qraw, n1, P(g, P_WQ) + (size_t)l * QD * C, N, C, QD);
        matmul_forward(kraw, n1, P(g, P_WK) + (size_t)l * KD * C, N, C, KD);
        if (c->qk_norm) {  // RMSNorm over the whole projection of each token, before RoPE
            LAUNCH_ROWS(rmsnorm_forward_kernel, N, 0, q, a->rstdq + l * a->ls_N, qraw, P(g, P_Q_NORM) + (size_t)l * QD, N,
                        QD, c->rms_eps);
            LAUNCH_ROWS(rmsnorm_forward_kernel, N, 0, k, a->rstdk + l * a->ls_N, kraw, P(g, P_K_NORM) + (size_t)l * KD, N,
                        KD, c->rms_eps);
        }
        matmul_forward(v, n1, P(g, P_WV) + (size_t)l * KD * C, N, C, KD);
        if (a->train) {
            rope(q, B, T, NH, hd, ps, l, 1.0f, 0);
            rope(k, B, T, NKV, hd, ps, l, 1.0f, 0);
            if (c->attention == ATTN_FLASH)
                flash_attention_forward(atty, a->lse + l * a->ls_N * NH, q, k, v, B, T, NH, NKV, hd, alibi_alpha(ps, l));
            else
                attention_forward(atty, a->att + l * a->ls_att, q, k, v, B, T, NH, NKV, hd, alibi_alpha(ps, l));
        } else {
            KVCache *kv = o ? o->kv : NULL;
            PosStep pl = *ps;  // positions pos0 + t with a KV cache
            if (kv) pl.offset = ps->offset + ps->alpha[l] * (float)o->pos0;
            rope(q, B, T, NH, hd, &pl, l, 1.0f, pos0);
            rope(k, B, T, NKV, hd, &pl, l, 1.0f, pos0);
            const floatX *keys = k, *vals = v;
            int Tk = T, q_off = 0;
            if (kv) {  // append, then attend over the whole cache
                floatX *kl = kv->k + (size_t)l * kv->cap * KD, *vl = kv->v + (size_t)l * kv->cap * KD;
                cudaCheck(cudaMemcpy(kl + (size_t)kv->len * KD, k, (size_t)T * KD * sizeof(floatX), cudaMemcpyDeviceToDevice));
                cudaCheck(cudaMemcpy(vl + (size_t)kv->len * KD, v, (size_t)T * KD * sizeof(floatX), cudaMemcpyDeviceToDevice));
                keys = kl;
                vals = vl;
                Tk = kv->len + T;
                q_off = kv->len;
            }
            attention_forward_online(atty, q, keys, vals, B, T, Tk, q_off, NH, NKV, hd, o ? o->window : 0,
                                     o ? o->entropy : NULL, 1.0f / ((float)B * NH * c->L), alibi_alpha(ps, l));
        }
        matmul_forward(mid, atty, P(g, P_WO) + (size_t)l * C * QD, N, QD, C);
        LAUNCH_ELEMS(residual_forward_kernel, NC, mid, mid, x, NC);
        LAUNCH_ROWS(rmsnorm_forward_kernel, N, 0, n2, a->rstd2 + l * a->ls_N, mid, P(g, P_MLP_NORM) + (size_t)l * C, N,
                    C, c->rms_eps);
        matmul_forward(gate, n2, P(g, P_W_GATE) + (size_t)l * F * C, N, C, F);
        matmul_forward(up, n2, P(g, P_W_UP) + (size_t)l * F * C, N, C, F);
        LAUNCH_ELEMS(swiglu_forward_kernel, NF, h, gate, up, NF);
        matmul_forward(xn, h, P(g, P_W_DOWN) + (size_t)l * C * F, N, F, C);
        LAUNCH_ELEMS(residual_forward_kernel, NC, xn, xn, mid, NC);
    }
    if (o && o->kv) o->kv->len += T;
    head_forward(g, a, a->resid + (a->train ? c->L * a->ls_C : 0), with_loss);
}

// Backward of the last forward (which must not have run the classifier): gradients
// accumulate into g->grads. Mirrors gpt_backward.
static void gpt_backward(GPT *g, Acts *a, const float *weights, const PosStep *ps, float dloss) {
    const Config *c = &g->cfg;
    if (c->arch == ARCH_GRU) {
        gru_backward(g, a, weights, dloss);
        return;
    }
    int B = a->B, T = a->T, C = c->C, NH = c->NH, NKV = c->NKV, hd = g->hd, F = c->F;
    int N = B * T, QD = NH * hd, KD = NKV * hd;
    size_t NF = (size_t)N * F;
    head_backward(g, a, a->resid + c->L * a->ls_C, weights, dloss);
    for (int l = c->L - 1; l >= 0; l--) {
        floatX *x = a->resid + l * a->ls_C, *n1 = a->n1 + l * a->ls_C;
        floatX *q = a->q + l * a->ls_q, *k = a->k + l * a->ls_kv, *v = a->v + l * a->ls_kv;
        floatX *att = a->att + l * a->ls_att, *atty = a->atty + l * a->ls_q;
        floatX *mid = a->mid + l * a->ls_C, *n2 = a->n2 + l * a->ls_C;
        floatX *gate = a->gate + l * a->ls_F, *up = a->up + l * a->ls_F, *h = a->h + l * a->ls_F;
        matmul_backward(a->dh, G(g, P_W_DOWN) + (size_t)l * C * F, a->dres, h, P(g, P_W_DOWN) + (size_t)l * C * F, N, F, C, 0);
        LAUNCH_ELEMS(swiglu_backward_kernel, NF, a->dgate, a->dup, a->dh, gate, up, NF);
        matmul_backward(a->dC, G(g, P_W_GATE) + (size_t)l * F * C, a->dgate, n2, P(g, P_W_GATE) + (size_t)l * F * C, N, C, F, 0);
        matmul_backward(a->dC, G(g, P_W_UP) + (size_t)l * F * C, a->dup, n2, P(g, P_W_UP) + (size_t)l * F * C, N, C, F, 1);
        rmsnorm_backward(a->dres, G(g, P_MLP_NORM) + (size_t)l * C, a->dw_part, a->dC, mid, P(g, P_MLP_NORM) + (size_t)l * C,
                         a->rstd2 + l * a->ls_N, N, C, 1);
        matmul_backward(a->datty, G(g, P_WO) + (size_t)l * C * QD, a->dres, atty, P(g, P_WO) + (size_t)l * C * QD, N, QD, C, 0);
        if (c->attention == ATTN_FLASH)
            flash_attention_backward(a->dq, a->dk, a->dv, a->dsum, a->datty, atty, a->lse + l * a->ls_N * NH, q, k, v, B,
                                     T, NH, NKV, hd, alibi_alpha(ps, l));
        else
            attention_backward(a->dq, a->dk, a->dv, a->datt, a->datty, att, q, k, v, B, T, NH, NKV, hd);
        rope(a->dq, B, T, NH, hd, ps, l, -1.0f, 0);
        rope(a->dk, B, T, NKV, hd, ps, l, -1.0f, 0);
        floatX *dq = a->dq, *dk = a->dk;  // gradients of the projections
        if (c->qk_norm) {
            rmsnorm_backward(a->dqraw, G(g, P_Q_NORM) + (size_t)l * QD, a->dw_part, a->dq, a->qraw + l * a->ls_q,
                             P(g, P_Q_NORM) + (size_t)l * QD, a->rstdq + l * a->ls_N, N, QD, 0);
            rmsnorm_backward(a->dkraw, G(g, P_K_NORM) + (size_t)l * KD, a->dw_part, a->dk, a->kraw + l * a->ls_kv,
                             P(g, P_K_NORM) + (size_t)l * KD, a->rstdk + l * a->ls_N, N, KD, 0);
            dq = a->dqraw;
            dk = a->dkraw;
        }
        matmul_backward(a->dC, G(g, P_WQ) + (size_t)l * QD * C, dq, n1, P(g, P_WQ) + (size_t)l * QD * C, N, C, QD, 0);
        matmul_backward(a->dC, G(g, P_WK) + (size_t)l * KD * C, dk, n1, P(g, P_WK) + (size_t)l * KD * C, N, C, KD, 1);
        matmul_backward(a->dC, G(g, P_WV) + (size_t)l * KD * C, a->dv, n1, P(g, P_WV) + (size_t)l * KD * C, N, C, KD, 1);
        rmsnorm_backward(a->dres, G(g, P_ATTN_NORM) + (size_t)l * C, a->dw_part, a->dC, x, P(g, P_ATTN_NORM) + (size_t)l * C,
                         a->rstd1 + l * a->ls_N, N, C, 1);
    }
    scatter_add_rows(G(g, P_WTE), a->dres, a->sc_wte, N, C);
    if (ps->pe == PE_LEARNED) scatter_add_rows(G(g, P_WPE), a->dres, a->sc_wpe, N, C);
}

static float grad_global_norm(GPT *g) {
    sumsq_kernel<<<NORM_BLOCKS, 512>>>(g->norm_partial, g->grads, g->n_params);
    cudaCheck(cudaGetLastError());
    float partial[NORM_BLOCKS];
    cudaCheck(cudaMemcpy(partial, g->norm_partial, sizeof(partial), cudaMemcpyDeviceToHost));
    double s = 0.0;
    for (int i = 0; i < NORM_BLOCKS; i++) s += partial[i];
    return (float)sqrt(s);
}

// A micro-batch's ints for the device (acts_ints, train): inputs and targets from rows
// (B,T+1), then the embeddings' scatters, dwpe's from the positions of ps (--pe learned)
static void stage_micro(int *dst, const GPT *g, const int *rows, const PosStep *ps) {
    int B = g->acts.B, T = g->acts.T, N = B * T;
    int *inp = dst, *tgt = dst + N, *sc_wte = dst + 2 * N, *sc_wpe = sc_wte + SCATTER_INTS(N);
    for (int b = 0; b < B; b++) {
        memcpy(inp + b * T, rows + (size_t)b * (T + 1), T * sizeof(int));
        memcpy(tgt + b * T, rows + (size_t)b * (T + 1) + 1, T * sizeof(int));
    }
    scatter_build(sc_wte, inp, N, g->cfg.V);
    if (ps->pe != PE_LEARNED) return;
    int wpe_rows = (int)g->shapes[P_WPE].shape[0];
    learned_rows_check(ps, 0, T, wpe_rows);  // before the positions become indices
    int *key = (int *)xmalloc(N * sizeof(int));
    for (int n = 0; n < N; n++) key[n] = (int)pos_token(ps, n % T);
    scatter_build(sc_wpe, key, N, wpe_rows);
    free(key);
}

// Forward and backward over rows (accum,B,T+1) on the host into g->grads. Returns the
// mean loss; *norm the global gradient norm. Mirrors compute_gradients. The step's tokens
// go to a pinned buffer first, so each micro-batch's upload is queued behind the previous
// one's kernels without waiting for them; the losses are summed on the device and read
// once per step.
static float compute_gradients(GPT *g, const int *rows, const float *weights, int accum, const PosStep *ps, float *norm) {
    Acts *a = &g->acts;
    int B = a->B, T = a->T;
    size_t n = (size_t)B * T, ni = acts_ints(n, 1);
    if (g->stage_cap < ni * accum) {
        cudaFreeHost(g->stage);
        cudaCheck(cudaMallocHost((void **)&g->stage, ni * accum * sizeof(int)));
        g->stage_cap = ni * accum;
    }
    if (weights && g->stage_w_cap < n * accum) {
        cudaFreeHost(g->stage_w);
        cudaFree(g->d_weights);
        cudaCheck(cudaMallocHost((void **)&g->stage_w, n * accum * sizeof(float)));
        g->d_weights = (float *)dmalloc(n * sizeof(float));
        g->stage_w_cap = n * accum;
    }
    if (weights) memcpy(g->stage_w, weights, n * accum * sizeof(float));
    for (int micro = 0; micro < accum; micro++)
        stage_micro(g->stage + ni * micro, g, rows + (size_t)micro * B * (T + 1), ps);
    cudaCheck(cudaMemset(g->grads, 0, g->n_params * sizeof(float)));
    cudaCheck(cudaMemset(g->loss_sum, 0, sizeof(float)));
    for (int micro = 0; micro < accum; micro++) {
        cudaCheck(cudaMemcpyAsync(a->inputs, g->stage + ni * micro, ni * sizeof(int), cudaMemcpyHostToDevice, 0));
        const float *w = NULL;
        if (weights) {
            cudaCheck(cudaMemcpyAsync(g->d_weights, g->stage_w + n * micro, n * sizeof(float), cudaMemcpyHostToDevice, 0));
            w = g->d_weights;
        }
        gpt_forward(g, a, ps, 0, NULL);
        gpt_backward(g, a, w, ps, 1.0f / accum);
        loss_sum_kernel<<<1, 1024>>>(g->loss_sum, a->losses, w, (int)n, w ? 1.0f : 1.0f / ((float)n * accum));
        cudaCheck(cudaGetLastError());
    }
    float loss;
    cudaCheck(cudaMemcpy(&loss, g->loss_sum, sizeof(float), cudaMemcpyDeviceToHost));
    *norm = grad_global_norm(g);
    return loss;
}

// Clip (folded into AdamW as a scale) with the norm compute_gradients gave, then AdamW.
// Mirrors apply_update.
static void apply_update(GPT *g, float lr, int t, float norm) {
    const Config *c = &g->cfg;
    float scale = (c->grad_clip > 0 && norm > c->grad_clip) ? c->grad_clip / (norm + 1e-6f) : 1.0f;
    float bc1 = 1.0f - powf(c->beta1, (float)t), bc2 = 1.0f - powf(c->beta2, (float)t);
    for (int i = 0; i < NP; i++) {
        size_t n = g->shapes[i].numel, o = g->offsets[i];
        if (!n) continue;  // a tensor this model does not have
        LAUNCH_ELEMS(adamw_kernel, n, g->params + o, g->params_x + o, g->grads + o, g->m + o, g->v + o, n, lr, c->beta1,
                     c->beta2, bc1, bc2, c->adam_eps, PARAM_DECAY[i] ? c->weight_decay : 0.0f, scale);
    }
}

// One optimizer step (the test cases). Mirrors train_step.
static float train_step(GPT *g, const int *rows, int accum, const PosStep *ps, float lr, int t, float *norm) {
    float loss = compute_gradients(g, rows, NULL, accum, ps, norm);
    apply_update(g, lr, t, *norm);
    return loss;
}

// ----------------------------------------------------------------------------
// checkpoints: the CPU's format (llmc/checkpoint.h), through host copies

static void gpt_checkpoint_save(const GPT *g, const TrainState *st, const char *path) {
    HostParams hp[3];
    const float *src[3] = {g->params, g->m, g->v};
    for (int k = 0; k < 3; k++) {
        host_params(&hp[k], g);
        cudaCheck(cudaMemcpy(hp[k].mem, src[k], g->n_params * sizeof(float), cudaMemcpyDeviceToHost));
    }
    checkpoint_save(&g->cfg, st, path, hp[0].views, hp[1].views, hp[2].views);
    for (int k = 0; k < 3; k++) free(hp[k].mem);
}

// mode CK_INIT keeps the current weights where the checkpoint has none (QK-norm gains).
static void gpt_checkpoint_load(GPT *g, TrainState *st, const char *path, int mode) {
    int resume = mode == CK_RESUME;
    HostParams hp[3];
    for (int k = 0; k < 3; k++) host_params(&hp[k], g);
    if (mode == CK_INIT)  // keep what the checkpoint does not have
        cudaCheck(cudaMemcpy(hp[0].mem, g->params, g->n_params * sizeof(float), cudaMemcpyDeviceToHost));
    checkpoint_load(&g->cfg, st, path, hp[0].views, hp[1].views, hp[2].views, mode);
    gpt_upload(g, hp[0].views);
    if (resume) {
        cudaCheck(cudaMemcpy(g->m, hp[1].mem, g->n_params * sizeof(float), cudaMemcpyHostToDevice));
        cudaCheck(cudaMemcpy(g->v, hp[2].mem, g->n_params * sizeof(float), cudaMemcpyHostToDevice));
    }
    for (int k = 0; k < 3; k++) free(hp[k].mem);
}

// ----------------------------------------------------------------------------
// evaluation (llmc/evaluate.h drives it through an EvalModel): forward-only passes with
// memory linear in L (16K positions fit) and a device KV cache.   mirrors the CPU's EvalCtx

typedef struct {
    GPT *g;
    Acts a, a1;        // the current pass; one token at a time
    float *d_entropy;  // (NH,cap): per head, summed on the host
    int ent_cap;
} EvalCtx;

static Acts *eval_acts(EvalCtx *e, Acts *a, int T) {
    if (!a->mem || a->T != T) {
        cudaFree(a->mem);
        acts_alloc(a, &e->g->cfg, 1, T, 0);
    }
    return a;
}

static void upload_tokens(Acts *a, const int *tokens, int n, int with_targets) {
    cudaCheck(cudaMemcpy(a->inputs, tokens, n * sizeof(int), cudaMemcpyHostToDevice));
    if (with_targets) cudaCheck(cudaMemcpy(a->targets, tokens + 1, n * sizeof(int), cudaMemcpyHostToDevice));
}

static void gpu_losses(void *ctx, const int *tokens, int L, const PosStep *ps, int window, float *losses, float *entropy) {
    EvalCtx *e = (EvalCtx *)ctx;
    Acts *a = eval_acts(e, &e->a, L);
    size_t ne = (size_t)e->g->cfg.NH * L;
    if (entropy && e->ent_cap < L) {
        cudaFree(e->d_entropy);
        e->d_entropy = (float *)dmalloc(ne * sizeof(float));
        e->ent_cap = L;
    }
    if (entropy) cudaCheck(cudaMemset(e->d_entropy, 0, ne * sizeof(float)));
    upload_tokens(a, tokens, L, 1);
    FwdOpts o = {window, entropy ? e->d_entropy : NULL, NULL, 0, NULL};
    gpt_forward(e->g, a, ps, 1, &o);
    cudaCheck(cudaMemcpy(losses, a->losses, L * sizeof(float), cudaMemcpyDeviceToHost));
    if (entropy) {
        float *h = (float *)xmalloc(ne * sizeof(float));
        cudaCheck(cudaMemcpy(h, e->d_entropy, ne * sizeof(float), cudaMemcpyDeviceToHost));
        for (int i = 0; i < L; i++) {
            float sum = 0.0f;
            for (int head = 0; head < e->g->cfg.NH; head++) sum += h[(size_t)head * L + i];
            entropy[i] += sum;
        }
        free(h);
    }
}

static void gpu_losses_chunked(void *ctx, const int *tokens, int L, const PosStep *ps, int window, int chunk,
                               float *losses) {
    EvalCtx *e = (EvalCtx *)ctx;
    KVCache kv;
    kv_alloc(&kv, &e->g->cfg, window + chunk);
    for (int pos = 0; pos < L; pos += chunk) {
        int n = L - pos < chunk ? L - pos : chunk;
        Acts *a = eval_acts(e, &e->a, n);
        upload_tokens(a, tokens + pos, n, 1);
        FwdOpts o = {0, NULL, &kv, kv.len, NULL};  // this chunk's positions start at the cache size
        gpt_forward(e->g, a, ps, 1, &o);
        cudaCheck(cudaMemcpy(losses + pos, a->losses, n * sizeof(float), cudaMemcpyDeviceToHost));
        kv_keep_last(&kv, window);
    }
    kv_free(&kv);
}

// argmax over the V real columns of one device logits row
static int argmax_row(const floatX *d_row, int V) {
    floatX *h = (floatX *)xmalloc(V * sizeof(floatX));
    cudaCheck(cudaMemcpy(h, d_row, V * sizeof(floatX), cudaMemcpyDeviceToHost));
    int best = 0;
    for (int v = 1; v < V; v++)
        if ((float)h[v] > (float)h[best]) best = v;
    free(h);
    return best;
}

// greedy decoding with a KV cache (GRU: its state)             mirrors cpu_decode
static void gpu_greedy(void *ctx, const int *prompt, int n, int n_new, const PosStep *ps, int *out) {
    EvalCtx *e = (EvalCtx *)ctx;
    const Config *c = &e->g->cfg;
    int gru = c->arch == ARCH_GRU;
    KVCache kv;
    memset(&kv, 0, sizeof(kv));
    if (!gru) kv_alloc(&kv, c, n + n_new);
    floatX *state = gru ? (floatX *)dmalloc((size_t)c->L * c->C * sizeof(floatX)) : NULL;
    if (gru) cudaCheck(cudaMemset(state, 0, (size_t)c->L * c->C * sizeof(floatX)));
    Acts *a = eval_acts(e, &e->a, n);
    upload_tokens(a, prompt, n, 0);
    FwdOpts o = {0, NULL, gru ? NULL : &kv, 0, state};
    gpt_forward(e->g, a, ps, 0, &o);
    int next = argmax_row(a->logits + (size_t)(n - 1) * c->Vp, c->V);
    for (int i = 0; i < n_new; i++) {
        out[i] = next;
        if (i + 1 == n_new) break;
        Acts *a1 = eval_acts(e, &e->a1, 1);
        upload_tokens(a1, &next, 1, 0);
        o.pos0 = kv.len;
        gpt_forward(e->g, a1, ps, 0, &o);
        next = argmax_row(a1->logits, c->V);
    }
    if (!gru) kv_free(&kv);
    cudaFree(state);
}

static void run_evaluation_gpu(GPT *g, const Config *c, const Tokenizer *tok) {
    EvalCtx e;
    memset(&e, 0, sizeof(e));
    e.g = g;
    EvalModel m = {&e, gpu_losses, gpu_losses_chunked, gpu_greedy};
    run_evaluation(c, &m, tok);
    run_task_evaluation(c, &m);
    cudaFree(e.a.mem);
    cudaFree(e.a1.mem);
    cudaFree(e.d_entropy);
}

// Mean loss over the first `batches` (B,T) windows of the validation stream.
// mirrors validation_loss (with a loss mask: the mean over the targets it marks)
static float validation_loss(GPT *g, const int *val, const unsigned char *mask, long n_val, int batches) {
    Acts *a = &g->acts;
    PosConfig pc = pos_config_of(&g->cfg);
    PosStep ps = pos_inference(&pc, a->T);
    int B = a->B, T = a->T;
    float *losses = (float *)xmalloc((size_t)B * T * sizeof(float));
    double s = 0.0, counted = 0.0;
    int used = 0;
    for (int k = 0; k < batches && (long)(k + 1) * B * T + 1 <= n_val; k++, used++) {
        for (int b = 0; b < B; b++) {
            const int *src = val + ((long)k * B + b) * T;
            cudaCheck(cudaMemcpy(a->inputs + b * T, src, T * sizeof(int), cudaMemcpyHostToDevice));
            cudaCheck(cudaMemcpy(a->targets + b * T, src + 1, T * sizeof(int), cudaMemcpyHostToDevice));
        }
        gpt_forward(g, a, &ps, 1, NULL);
        cudaCheck(cudaMemcpy(losses, a->losses, (size_t)B * T * sizeof(float), cudaMemcpyDeviceToHost));
        for (int i = 0; i < B * T; i++) {
            int w = mask ? mask[(long)k * B * T + i + 1] : 1;  // target i is stream token k*B*T + i + 1
            s += mask ? w * (double)losses[i] : losses[i] / (B * T);
            counted += w;
        }
    }
    free(losses);
    if (mask) return counted > 0 ? (float)(s / counted) : NAN;
    return used ? (float)(s / used) : NAN;
}

// ----------------------------------------------------------------------------
// dump mode, for test_gpt's GPU-vs-CPU check: reads a case file (the input part of the
// PyTorch reference format: config_i, config_f, alphas, tokens, initial weights), runs
// the check pass at config_f[9]'s alpha and the training steps, writes the same names
// the reference uses (logits, loss, grad.*, losses, grad_norms, final.*), with the
// training attention given (ATTN_NAIVE or ATTN_FLASH).

static void dump_case(const char *in_path, const char *out_path, int attention) {
    TensorFile tf;
    tf_load(&tf, in_path, TF_KIND_REFERENCE);
    Config c;
    int micro;
    int scheduled = config_from_case(&c, &tf, &micro);
    c.attention = attention;
    if (attention == ATTN_FLASH && c.C / c.NH > FLASH_MAX_HD) fail("--attention flash takes head sizes up to %d", FLASH_MAX_HD);
    int B = c.B, T = c.T, steps = c.steps, N = B * T;
    float check_alpha = ((const float *)tf_get(&tf, "config_f", TF_F32, 10))[9];
    const float *alphas = (const float *)tf_get(&tf, "alphas", TF_F32, steps);
    const int *tokens = (const int *)tf_get(&tf, "tokens", TF_I32, (size_t)steps * micro * B * (T + 1));
    GPT g;
    gpt_alloc(&g, &c, 1);
    float *init[NP];
    int present = 0;
    for (int i = 0; i < NP; i++) {
        init[i] = g.shapes[i].numel ? (float *)tf_get(&tf, PARAM_NAMES[i], TF_F32, g.shapes[i].numel) : NULL;
        present += g.shapes[i].numel > 0;
    }
    gpt_upload(&g, init);
    acts_alloc(&g.acts, &c, B, T, 1);
    PosConfig pc = pos_config_of(&c);
    PosStep ps = case_pos_step(&pc, scheduled, check_alpha, 0);

    // check pass on tokens[0,0]: forward (logits kept before the classifier overwrites them), backward
    size_t ni = acts_ints(N, 1);
    int *ints = (int *)xmalloc(ni * sizeof(int));
    stage_micro(ints, &g, tokens, &ps);
    cudaCheck(cudaMemcpy(g.acts.inputs, ints, ni * sizeof(int), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemset(g.grads, 0, g.n_params * sizeof(float)));
    gpt_forward(&g, &g.acts, &ps, 0, NULL);
    floatX *lx = (floatX *)xmalloc((size_t)N * c.Vp * sizeof(floatX));
    cudaCheck(cudaMemcpy(lx, g.acts.logits, (size_t)N * c.Vp * sizeof(floatX), cudaMemcpyDeviceToHost));
    float *logits = (float *)xmalloc((size_t)N * c.V * sizeof(float));
    for (int i = 0; i < N; i++)
        for (int v = 0; v < c.V; v++) {
#ifdef ENABLE_FP32
            logits[(size_t)i * c.V + v] = lx[(size_t)i * c.Vp + v];
#else
            logits[(size_t)i * c.V + v] = __bfloat162float(lx[(size_t)i * c.Vp + v]);
#endif
        }
    gpt_backward(&g, &g.acts, NULL, &ps, 1.0f);
    float *losses_bt = (float *)xmalloc(N * sizeof(float));
    cudaCheck(cudaMemcpy(losses_bt, g.acts.losses, N * sizeof(float), cudaMemcpyDeviceToHost));
    double s = 0.0;
    for (int i = 0; i < N; i++) s += losses_bt[i];
    float loss = (float)(s / N);
    HostParams grads;
    host_params(&grads, &g);
    cudaCheck(cudaMemcpy(grads.mem, g.grads, g.n_params * sizeof(float), cudaMemcpyDeviceToHost));

    // the training steps
    float *losses = (float *)xmalloc(steps * sizeof(float)), *norms = (float *)xmalloc(steps * sizeof(float));
    for (int st = 0; st < steps; st++) {
        PosStep p = case_pos_step(&pc, scheduled, alphas[st], st);
        float lr = lr_at_step(st, c.warmup, c.steps, c.lr, c.min_lr);
        losses[st] = train_step(&g, tokens + (size_t)st * micro * B * (T + 1), micro, &p, lr, st + 1, &norms[st]);
    }
    HostParams fin;
    host_params(&fin, &g);
    cudaCheck(cudaMemcpy(fin.mem, g.params, g.n_params * sizeof(float), cudaMemcpyDeviceToHost));

    TensorWriter w;
    tw_open(&w, out_path, TF_KIND_DUMP, 4 + 2 * present);
    int lshape[3] = {B, T, c.V};
    tw_add(&w, "logits", TF_F32, 3, lshape, logits);
    tw_add1(&w, "loss", TF_F32, 1, &loss);
    char name[TF_MAX_NAME];
    for (int i = 0; i < NP; i++) {
        if (!g.shapes[i].numel) continue;
        snprintf(name, sizeof(name), "grad.%s", PARAM_NAMES[i]);
        tw_add(&w, name, TF_F32, g.shapes[i].ndim, g.shapes[i].shape, grads.views[i]);
    }
    tw_add1(&w, "losses", TF_F32, steps, losses);
    tw_add1(&w, "grad_norms", TF_F32, steps, norms);
    for (int i = 0; i < NP; i++) {
        if (!g.shapes[i].numel) continue;
        snprintf(name, sizeof(name), "final.%s", PARAM_NAMES[i]);
        tw_add(&w, name, TF_F32, g.shapes[i].ndim, g.shapes[i].shape, fin.views[i]);
    }
    tw_close(&w);
    printf("dump (%s): loss %.6f, last step loss %.6f -> %s\n", PRECISION_NAME, loss, losses[steps - 1], out_path);
    free(ints); free(lx); free(logits); free(losses_bt); free(losses); free(norms);
    free(grads.mem); free(fin.mem);
    gpt_free(&g);
    tf_free(&tf);
}

// ----------------------------------------------------------------------------
// training loop (the same as train_gpt_cpu.c's main, plus MFU)

// the model for llmc/trainloop.h (MFU against 989 TFLOP/s, the dense bf16 peak of H100/H200)
static float gpu_gradients(void *g, const int *rows, const float *weights, int accum, const PosStep *ps, float *norm) {
    return compute_gradients((GPT *)g, rows, weights, accum, ps, norm);
}
static void gpu_update(void *g, float lr, int t, float norm) {
    apply_update((GPT *)g, lr, t, norm);
    cudaCheck(cudaDeviceSynchronize());  // the step's time includes its last kernels
}
static float gpu_val_loss(void *g, const int *val, const unsigned char *mask, long n_val, int batches) {
    return validation_loss((GPT *)g, val, mask, n_val, batches);
}
static void gpu_save(void *g, const TrainState *st, const char *path) { gpt_checkpoint_save((GPT *)g, st, path); }
static void gpu_init(void *g, uint64_t seed) { gpt_init((GPT *)g, seed); }
static void gpu_load(void *g, TrainState *st, const char *path, int mode) { gpt_checkpoint_load((GPT *)g, st, path, mode); }

// The memory this run will allocate on the GPU and on the host (llmc/memory.h), checked
// before allocating it. The host holds copies of the weights and moments while a
// checkpoint is read or written, and the data.
static void gpu_memory_check(const Config *c, int train) {
    Shape sh[NP];
    param_shapes(c, sh);
    double n = 0, largest, total, fl = sizeof(float), fx = sizeof(floatX);
    for (int i = 0; i < NP; i++) n += (double)sh[i].numel;
    Acts a;
    MemPlan dev = {"GPU memory", n * (fl + (fx == fl ? 0 : fx)) + (train ? 3 * fl * n : 0), 0, 0, 0, NULL};
    MemPlan host = {"host memory", 0, file_bytes(c->resume[0] ? c->resume : c->init_from) + fl * n * (train ? 3 : 1), 0, 0, NULL};
    if (train) {
        dev.train = (double)acts_layout(&a, c, c->B, c->T, 1, NULL);
        shard_token_counts(c->train_data, &largest, &total);
        host.train = 3 * fl * n + 8 * largest;
        shard_token_counts(c->val_data, &largest, &total);
        if (c->val_every) host.train += fl * total;
    }
    if (c->eval_len) {  // one full pass, a chunk with its KV cache (keys, values, scratch), passkey prompts
        int chunk = c->gain_chunk ? c->gain_chunk : c->gain_window, pk = passkey_longest(c) + 16;  // and the decoded tokens
        if (task_longest(c) > pk) pk = task_longest(c);
        int small = pk > chunk ? pk : chunk;
        double kv_row = (2.0 * c->L + 1) * c->NKV * (c->C / c->NH) * fx;
        dev.eval = (double)acts_layout(&a, c, 1, c->eval_len, 0, NULL) + (double)acts_layout(&a, c, 1, small, 0, NULL) +
                   fl * c->NH * c->eval_len + kv_row * (c->gain_window + chunk > small ? c->gain_window + chunk : small);
        shard_token_counts(c->val_data, &largest, &total);
        host.eval = fl * (total + largest) + 48.0 * c->eval_len;
    }
    size_t free_b, total_b;
    cudaCheck(cudaMemGetInfo(&free_b, &total_b));
    memory_check(&dev, (double)free_b, 0);
    memory_check(&host, host_available_memory(), c->max_memory);
}

static cudaDeviceProp gpu_init(void) {
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) fail("no CUDA device found (use ./train_gpt_cpu on a CPU)");
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, 0));
    cublasCheck(cublasCreate(&cublas));
    return prop;
}

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "--dump_case") == 0) {  // test_gpt's GPU-vs-CPU check
        int attention = ATTN_N;  // ATTN_N: not given right
        if (argc == 4) attention = ATTN_NAIVE;
        else if (argc == 6 && strcmp(argv[4], "--attention") == 0)
            for (attention = 0; attention < ATTN_N && strcmp(argv[5], ATTN_NAMES[attention]) != 0; attention++) {}
        if (attention == ATTN_N) fail("usage: %s --dump_case CASE_FILE OUT_FILE [--attention naive|flash]", argv[0]);
        gpu_init();
        dump_case(argv[2], argv[3], attention);
        return 0;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);  // each step's line reaches a pipe (| tee) when it is printed
    Config cfg;
    parse_args(&cfg, argc, argv);
    cudaDeviceProp prop = gpu_init();
    Tokenizer tok;
    if (cfg.tokenizer[0]) {
        tokenizer_load(&tok, cfg.tokenizer);
        if (tok.vocab_size > cfg.V) fail("--tokenizer has %d tokens but --vocab_size is %d", tok.vocab_size, cfg.V);
    } else {
        tokenizer_init_bytes(&tok);
    }
    int train = !cfg.eval_only;
    if (cfg.generate) fail("--generate runs on the CPU trainer: ./train_gpt_cpu --resume CKPT --steps 0 --generate N");
    TrainState st;
    run_prepare(&cfg, &st, train);
    run_preflight(&cfg, &tok);
    run_folder_claim(&cfg);
    gpu_memory_check(&cfg, train);
    GPT g;
    gpt_alloc(&g, &cfg, train);
    run_weights(&cfg, &st, train, &g, gpu_init, gpu_load);
    int hd = cfg.C / cfg.NH;
    printf("device %s | %s | model %s: V=%d (padded %d) C=%d L=%d NH=%d NKV=%d hd=%d F=%d T=%d | %.2fM params\n", prop.name,
           PRECISION_NAME, cfg.model, cfg.V, cfg.Vp, cfg.C, cfg.L, cfg.NH, cfg.NKV, hd, cfg.F, cfg.T, g.n_params / 1e6);
    if (!cfg.eval_only && st.step < cfg.steps) {
        acts_alloc(&g.acts, &cfg, cfg.B, cfg.T, 1);
        TrainModel m = {&g, gpu_gradients, gpu_update, gpu_val_loss, gpu_save, model_flops_per_token(&cfg), 989e12};
        int finished = run_training(&cfg, &st, &m, prop.name);
        size_t free_b, total_b;
        cudaCheck(cudaMemGetInfo(&free_b, &total_b));
        printf("GPU memory in use: %.2f GiB of %.2f GiB\n", (total_b - free_b) / 1073741824.0, total_b / 1073741824.0);
        cudaFree(g.acts.mem);
        g.acts.mem = NULL;
        if (!finished) {
            gpt_free(&g);
            return 0;
        }
    }
    run_evaluation_gpu(&g, &cfg, &tok);
    gpt_free(&g);
    cublasDestroy(cublas);
    return 0;
}
