// llmc/cuda/positions.cuh: the position hook on the GPU. RoPE's kernels are PosAug's: angle =
// p[b][t] * theta_j in fp32, from the pass's positions, which the host fills each pass
// (pos_pass in llmc/schedule.h, after pos_schedule_step() picked the step's alpha or
// positions). Also the absolute encodings (sinusoidal, learned) at the same positions.
#pragma once
#include "../schedule.h"
#include "cuda_utils.cuh"

// The rotary encodings (ROTARY_TABLE, llmc/schedule.h), rotate-half layout (element j pairs
// with j + hd/2). THE POSAUG HOOK: each pair's angle and scale from the encoding's function
// pe_rotary at p[b * seq_stride + t] (for RoPE p * inv_freq[j] in fp32 with the CPU's
// rounding, scale 1), then an accurate sincosf (the project is never built with
// --use_fast_math: __sinf/__cosf are wrong on unreduced angles of 1e5 radians). p: one
// layer's pass positions on the device (seq_stride 0: every sequence shares them). x
// (B,T,H,hd) of the queries or keys (side ROT_QUERY, ROT_KEY) rotated in place; sign -1 is
// the backward. A rotary variant is a row of ROTARY_TABLE: no kernel here changes.
//                                                              mirrors rope_rotate
//
// Its variants, kernels rope_kernel_v<N>; dev/cuda/rope.cu validates and times each from
// here, and ROPE_VARIANT picks the trainer's (a call a variant cannot take runs the next
// lower one: rope_variant_for):
//   1  one thread per (b, t, h, j) pair, a sincosf per pair
//   2  one thread per (b, t, a 128-bit pack of j): the pack's sincosf serve every head;
//      hd/2 a multiple of the pack
//   3  one block per ROPE_TT positions: their cos/sin computed once into shared memory for
//      every sequence and head, then 128-bit loads and stores; positions shared by the
//      sequences only
// All three round each angle, cosine and product the same way: the same bits. On the H200
// (doc/gpu_runs.md, f9f8805), as shares of the copy bandwidth (bf16 build): v1 0.17, v2
// 0.60, v3 0.64.
#define ROPE_VARIANT 3
#define ROPE_TT 4

// the cosine and sine of pair j at position p of a query or key (side), scaled by mscale
// times the pair's scale (sine times the sign)
__device__ __forceinline__ void rope_cos_sin(float p, int j, int hd, const PosStep &ps, int side, float sign, float *c,
                                             float *s) {
    float scale, angle = pe_rotary(&ps, p, j, hd, side, &scale);
    float m = ps.mscale * scale;
    sincosf(angle, s, c);
    *c *= m;
    *s *= sign * m;
}

__global__ void rope_kernel_v1(floatX *x, int B, int T, int H, int hd, const float *p, int seq_stride, PosStep ps,
                               int side, float sign) {
    int half = hd / 2;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;  // over (B,T,H,half)
    if (i >= (size_t)B * T * H * half) return;
    int j = (int)(i % half);
    size_t bth = i / half;
    size_t bt = bth / H;
    int t = (int)(bt % T), b = (int)(bt / T);
    float c, s;
    rope_cos_sin(p[(size_t)b * seq_stride + t], j, hd, ps, side, sign, &c, &s);
    floatX *v = x + bth * hd;
    float x0 = to_f(v[j]), x1 = to_f(v[j + half]);
    v[j] = to_x(x0 * c - x1 * s);
    v[j + half] = to_x(x1 * c + x0 * s);
}

// one pack of both halves at row (its first half), rotated by the pack's cos/sin
__device__ __forceinline__ void rope_pack(floatX *row, int half, const float *c, const float *s) {
    Pack128<floatX> a = load128(row), b = load128(row + half), oa, ob;
#pragma unroll
    for (int k = 0; k < XVEC; k++) {
        float x0 = to_f(a.v[k]), x1 = to_f(b.v[k]);
        oa.v[k] = to_x(x0 * c[k] - x1 * s[k]);
        ob.v[k] = to_x(x1 * c[k] + x0 * s[k]);
    }
    store128(row, oa);
    store128(row + half, ob);
}

// v2: one thread per (b, t, group of XVEC consecutive j); the group's cos/sin serve all H heads
__global__ void rope_kernel_v2(floatX *x, int B, int T, int H, int hd, const float *p, int seq_stride, PosStep ps,
                               int side, float sign) {
    int half = hd / 2, nv = half / XVEC;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;  // over (B,T,nv)
    if (i >= (size_t)B * T * nv) return;
    int jv = (int)(i % nv);
    size_t bt = i / nv;
    float c[XVEC], s[XVEC];
#pragma unroll
    for (int k = 0; k < XVEC; k++)
        rope_cos_sin(p[(bt / T) * seq_stride + bt % T], jv * XVEC + k, hd, ps, side, sign, &c[k], &s[k]);
    floatX *row = x + bt * H * hd + jv * XVEC;
    for (int h = 0; h < H; h++, row += hd) rope_pack(row, half, c, s);
}

// v3: one block per ROPE_TT positions (shared by the sequences); their cos/sin table in shared memory
__global__ void rope_kernel_v3(floatX *x, int B, int T, int H, int hd, const float *p, PosStep ps, int side, float sign) {
    __shared__ float cs[ROPE_TT][MAX_HALF_HD], sn[ROPE_TT][MAX_HALF_HD];
    int half = hd / 2, nv = half / XVEC, t0 = blockIdx.x * ROPE_TT;
    for (int e = threadIdx.x; e < ROPE_TT * half; e += blockDim.x) {
        int tt = e / half, j = e % half;
        rope_cos_sin(t0 + tt < T ? p[t0 + tt] : 0.0f, j, hd, ps, side, sign, &cs[tt][j], &sn[tt][j]);
    }
    __syncthreads();
    int count = B * ROPE_TT * H * nv;  // items (b, tt, h, jv), jv fastest: consecutive threads, consecutive memory
    for (int i = threadIdx.x; i < count; i += blockDim.x) {
        int jv = i % nv, r = i / nv;
        int h = r % H;
        r /= H;
        int tt = r % ROPE_TT, b = r / ROPE_TT, t = t0 + tt;
        if (t < T)
            rope_pack(x + (((size_t)b * T + t) * H + h) * hd + jv * XVEC, half, cs[tt] + jv * XVEC, sn[tt] + jv * XVEC);
    }
}

// The variant that runs a call asking for v: v3 needs positions shared by the sequences,
// v2 and v3 a whole number of packs per half and x on 16 bytes; else the next lower one
// (*why: why, llmc/cuda/variants.cuh).
static inline int rope_variant_for(int v, const floatX *x, int hd, int seq_stride, const char **why = NULL) {
    if (v >= 3 && seq_stride) v = variant_fallback(why, "v3 takes positions shared by the sequences", 2);
    if (v >= 2 && (hd / 2) % XVEC) v = variant_fallback(why, "v2 and v3 take hd/2 a multiple of the 128-bit pack", 1);
    if (v >= 2 && !aligned128(x)) v = variant_fallback(why, "a tensor is not on 16 bytes", 1);
    return v;
}

// variant v (as rope_variant_for allows) of one rotation of the queries or keys (side)
static void rope_launch(int v, floatX *x, int B, int T, int H, int hd, const float *p, int seq_stride, const PosStep *ps,
                        int side, float sign) {
    const char *why = NULL;
    v = variant_note(VF_ROPE, v, rope_variant_for(v, x, hd, seq_stride, &why), why);
    if (v == 1)
        rope_kernel_v1<<<ceil_div((size_t)B * T * H * (hd / 2), 256), 256>>>(x, B, T, H, hd, p, seq_stride, *ps, side, sign);
    else if (v == 2)
        rope_kernel_v2<<<ceil_div((size_t)B * T * (hd / 2 / XVEC), 256), 256>>>(x, B, T, H, hd, p, seq_stride, *ps, side,
                                                                                 sign);
    else
        rope_kernel_v3<<<ceil_div((size_t)T, ROPE_TT), 256>>>(x, B, T, H, hd, p, *ps, side, sign);
    cudaCheck(cudaGetLastError());
}

// The pass's positions (pos_pass) on the device: uploaded when they differ from the last
// upload (a training step's micro-batches share them unless they are per sequence); the
// backward reads the forward's.
static float *d_positions;

static void upload_positions(const PassPositions *pp) {
    static DeviceMirror m;
    d_positions = (float *)mirror_upload(&m, pp->p, pp->n * sizeof(float));
}

// Layer l's pass positions on the device (after upload_positions)
static const float *d_pos_layer(const PassPositions *pp, int l) { return d_positions + (size_t)l * pp->layer_stride; }

// layer l's rotation of the queries or keys (side); the encodings without a rotary row rotate nothing
static void rope(floatX *x, int B, int T, int H, int hd, const PosStep *ps, const PassPositions *pp, int l, int side,
                 float sign) {
    if (!pe_rotates(ps->pe)) return;
    rope_launch(ROPE_VARIANT, x, B, T, H, hd, d_pos_layer(pp, l), pp->seq_stride, ps, side, sign);
}

// ----------------------------------------------------------------------------
// the absolute encodings at the same positions: p is layer 0's pass positions

// x (B,T,C) += sinusoidal PE of each token's hook position (--pe sinusoidal); freq (C/2)
// holds f_k = 10000^(-2k/C) (times tAPE's scale) from the host's powf, as the CPU computes it (the device powf
// may differ in the last bit, which positions of 1e5 turn into 1e-2 in the angle).
//                                                             mirrors sinusoidal_forward
__global__ void sinusoidal_kernel(floatX *x, int B, int T, int C, const float *p0, int seq_stride, const float *freq) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;  // over (B,T,C/2)
    if (i >= (size_t)B * T * (C / 2)) return;
    int k = (int)(i % (C / 2));
    size_t bt = i / (C / 2);
    float p = p0[(bt / T) * seq_stride + bt % T];
    float s, c;
    sincosf(__fmul_rn(p, freq[k]), &s, &c);
    floatX *xt = x + (i / (C / 2)) * C;
    xt[2 * k] = to_x(to_f(xt[2 * k]) + s);
    xt[2 * k + 1] = to_x(to_f(xt[2 * k + 1]) + c);
}

// The frequencies f_k of sinusoidal_kernel on the device (times tAPE's scale), computed
// once per width C and scale.
static const float *sinusoidal_freqs(int C, float scale) {
    static float *d_freq;
    static int d_freq_C;
    static float d_freq_scale;
    if (d_freq_C != C || d_freq_scale != scale) {
        float *h = (float *)xmalloc((size_t)(C / 2) * sizeof(float));
        sinusoidal_freqs_host(h, C, scale);  // the CPU's
        d_freq_scale = scale;
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
__global__ void learned_forward_kernel(floatX *x, const floatX *wpe, int B, int T, int C, const float *p0,
                                       int seq_stride) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;  // over (B,T,C)
    if (i >= (size_t)B * T * C) return;
    int c = (int)(i % C);
    size_t bt = i / C;
    size_t row = (size_t)p0[(bt / T) * seq_stride + bt % T];
    x[i] = to_x(to_f(x[i]) + to_f(wpe[row * C + c]));
}
