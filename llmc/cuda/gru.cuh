// llmc/cuda/gru.cuh: --arch gru: the GRU's step kernels, its layout transposes and bias sums.
#pragma once
#include "cuda_common.cuh"

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
