// llmc/cuda/positions.cuh: the position hook on the GPU. rope_kernel is PosAug's: angle =
// p[b][t] * theta_j in fp32, from the pass's positions, which the host fills each pass
// (pos_pass in llmc/schedule.h, after pos_schedule_step() picked the step's alpha or
// positions). Also the absolute encodings (sinusoidal, learned) at the same positions.
#pragma once
#include "../schedule.h"
#include "cuda_utils.cuh"

// RoPE, rotate-half layout (element j pairs with j + hd/2). THE POSAUG HOOK:
// angle = p[b * seq_stride + t] * inv_freq[j] in fp32 with the CPU's rounding, then an
// accurate sincosf (the project is never built with --use_fast_math: __sinf/__cosf are
// wrong on unreduced angles of 1e5 radians). p: one layer's pass positions on the device
// (seq_stride 0: every sequence shares them).
// x (B,T,H,hd) rotated in place; sign -1 is the backward.     mirrors rope_rotate
__global__ void rope_kernel(floatX *x, int B, int T, int H, int hd, const float *p, int seq_stride, PosStep ps,
                            float sign) {
    int half = hd / 2;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;  // over (B,T,H,half)
    if (i >= (size_t)B * T * H * half) return;
    int j = (int)(i % half);
    size_t bth = i / half;
    size_t bt = bth / H;
    int t = (int)(bt % T), b = (int)(bt / T);
    float angle = __fmul_rn(p[(size_t)b * seq_stride + t], ps.inv_freq[j]);
    float s, c;
    sincosf(angle, &s, &c);
    c *= ps.mscale;
    s *= sign * ps.mscale;
    floatX *v = x + bth * hd;
    float x0 = to_f(v[j]), x1 = to_f(v[j + half]);
    v[j] = to_x(x0 * c - x1 * s);
    v[j + half] = to_x(x1 * c + x0 * s);
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

static void rope(floatX *x, int B, int T, int H, int hd, const PosStep *ps, const PassPositions *pp, int l, float sign) {
    if (ps->pe != PE_ROPE) return;  // NoPE, ALiBi, absolute encodings
    size_t n = (size_t)B * T * H * (hd / 2);
    rope_kernel<<<ceil_div(n, 256), 256>>>(x, B, T, H, hd, d_pos_layer(pp, l), pp->seq_stride, *ps, sign);
    cudaCheck(cudaGetLastError());
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
