// llmc/cuda/positions.cuh: the position hook on the GPU. rope_kernel is PosAug's: angle =
// (alpha_l * t + offset) * theta_j in fp32; pos_schedule_step() in llmc/schedule.h picks
// alpha each step. Also the absolute encodings (sinusoidal, learned) at the same positions.
#pragma once
#include "../schedule.h"
#include "cuda_utils.cuh"

// RoPE, rotate-half layout (element j pairs with j + hd/2). THE POSAUG HOOK:
// p_t = alpha * t + offset and angle = p_t * inv_freq[j] in fp32 with the same rounding
// as the CPU (no fused multiply-add), then an accurate sincosf (the project is never built
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

// ----------------------------------------------------------------------------
// the absolute encodings at the same positions

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
