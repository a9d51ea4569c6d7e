// dev/cuda/attention.cu: causal GQA attention forward. q (B,T,NH,hd), k, v (B,T,NKV,hd),
// y (B,T,NH,hd); query head h reads key/value head h / (NH/NKV) by pointer offset (K and V
// are never copied); scale 1/sqrt(hd); softmax in fp32.
//
//   v1  train_gpt.cu's training path (attention_forward): scores through cuBLAS (strided-
//       batched GEMM per head), softmax_forward_kernel in place on the (B,NH,T,T) matrix
//       (kept for the backward), then P V through cuBLAS. Full T x T GEMMs.
//   v2  train_gpt.cu's evaluation kernel (attention_forward_online_kernel): a block of 4
//       warps owns 16 query rows of one (b,h); K/V tiles of 32 keys loaded coalesced into
//       shared memory (fp32) serve all 16; per row, one key per lane for the scores, online
//       softmax per tile, the output accumulators in registers; no (T,T) matrix
//   v3  flash-style on CUDA cores (fp32 math): a block of 64 threads owns 64 query rows
//       of one (b,h), one row per thread with q and the output accumulator in registers;
//       K/V tiles of 32 keys staged in shared memory (fp32) and read as broadcasts; online
//       softmax per tile; causal: key tiles stop at the block's last row, longest query
//       tiles scheduled first. hd 32, 64 or 128.
//   v4  flash-style on tensor cores (bf16 WMMA 16x16x16, fp32 accumulation; bf16 build
//       only): 4 warps x 16 query rows, K/V tiles of 64 keys in shared memory, S = Q K^T
//       and O += P V as WMMA fragments, online softmax by lane pairs per row, the output
//       accumulator in shared memory (rescaled per tile). hd 64 or 128.
//   v5  train_gpt.cu's --attention flash forward of the fp32 build (flash_forward_cuda_cores):
//       a thread per query row, q and the accumulator in registers, K/V tiles of 32 in
//       shared memory (fp32), online softmax per 16 keys; also writes lse (B,NH,T) for the
//       backward (checked at 1e-5). Any hd up to 128. The backward: attention_backward.cu.
//   v6  train_gpt.cu's --attention flash forward of the bf16 build (flash_forward_tensor_cores;
//       bf16 only): 4 warps x 16 query rows, K/V tiles of 64 in shared memory (bf16, the
//       head dimension zero-padded to 32, 64 or 128), S = Q K^T and O += P V on tensor cores
//       (WMMA 16x16x16, fp32 accumulation), online softmax by lane pairs in fp32, the output
//       accumulator in shared memory; also writes lse (checked at 1e-5). Any even hd up to 128.
//       The trainer's forward variant 1 (flash_tc_forward_kernel_v1).
//   v7  the same entry with forward variant 2 (flash_tc_forward_kernel_v2; bf16 only), FA2-
//       class: mma.sync m16n8k16 with S, P and O in registers (P's accumulators reused as A
//       fragments), Q in registers, K/V tiles of 64 double-buffered by cp.async, ldmatrix
//       (.trans for V), 4 warps x 16 rows, exp2 with the scale folded. hd 32, 64 or 128.
//
// Validation on random q, k, v against the CPU reference (attention_forward of
// train_gpt_cpu.c, with the attention-score hook's bias), outputs poisoned with NaN first:
// GQA (NH 6, NKV 2), a T that is not a multiple of any tile (1000), MQA with hd 128, hd 48
// (the deep preset; v5 and v6 only), hd 32 with ALiBi at PosAug's alpha 8, and hd 64 with a
// learned bias of each distance (T5's buckets and KERPLE reach the kernels as such a term).
// v7 runs the hd 32, 64 and 128 cases (the trainer runs v6's kernel for other hd); v3 and v4
// take no bias. v1 also checks its probability matrix. v6 and v7 fail when the launcher ran
// another variant than theirs (llmc/cuda/variants.cuh).
// Benchmark: the 10M preset, B=16 T=2048 NH=NKV=6 hd=64. TFLOP/s counts the causal work
// (4 * B * NH * hd * T(T+1)/2), the same for every version (v1 computes the full T x T).
//
// usage: ./attention_bin [VERSION] [--no-bench]
#include <mma.h>
#include "common.h"
#include "../../llmc/cuda/attention.cuh"
#include "../../llmc/cuda/flash_attention.cuh"
#include "../../llmc/cuda/attention_eval.cuh"

// ----------------------------------------------------------------------------
// The bias of head h at distance d, as llmc/attn_bias.h's attn_bias_at: term (NH,T) of each
// distance (or NULL) minus ALiBi's slope[h] (NH, or NULL) times d
static float bias_cpu(const float *slope, const float *term, int T, int h, int d) {
    return (term ? term[(size_t)h * T + d] : 0.0f) - (slope ? slope[h] * (float)d : 0.0f);
}

// CPU reference: attention_forward of train_gpt_cpu.c (serial). att may be NULL.
static void attention_cpu(float *y, float *att, const float *q, const float *k, const float *v, int B, int T, int NH,
                          int NKV, int hd, const float *slope, const float *term) {
    int group = NH / NKV;
    float scale = 1.0f / sqrtf((float)hd);
    std::vector<float> scratch(T);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                int kvh = h / group;
                const float *qt = q + (((size_t)b * T + t) * NH + h) * hd;
                float *a = att ? att + (((size_t)b * NH + h) * T + t) * T : scratch.data();
                float maxv = -INFINITY;
                for (int s = 0; s <= t; s++) {
                    const float *ks = k + (((size_t)b * T + s) * NKV + kvh) * hd;
                    float dot = 0.0f;
                    for (int i = 0; i < hd; i++) dot += qt[i] * ks[i];
                    a[s] = dot * scale + bias_cpu(slope, term, T, h, t - s);
                    if (a[s] > maxv) maxv = a[s];
                }
                float sum = 0.0f;
                for (int s = 0; s <= t; s++) {
                    a[s] = expf(a[s] - maxv);
                    sum += a[s];
                }
                float inv = 1.0f / sum;
                float *yt = y + (((size_t)b * T + t) * NH + h) * hd;
                for (int i = 0; i < hd; i++) yt[i] = 0.0f;
                for (int s = 0; s <= t; s++) {
                    a[s] *= inv;
                    const float *vs = v + (((size_t)b * T + s) * NKV + kvh) * hd;
                    float w = a[s];
                    for (int i = 0; i < hd; i++) yt[i] += w * vs[i];
                }
                if (att)
                    for (int s = t + 1; s < T; s++) a[s] = 0.0f;
            }
}

// lse (B,NH,T): log sum_s exp(score_ts) of each row's scaled causal scores, in double
static void lse_cpu(float *lse, const float *q, const float *k, int B, int T, int NH, int NKV, int hd, const float *slope,
                    const float *term) {
    std::vector<double> x(T);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const float *qt = q + (((size_t)b * T + t) * NH + h) * hd;
                double mx = -INFINITY, sum = 0.0;
                for (int s = 0; s <= t; s++) {
                    const float *ks = k + (((size_t)b * T + s) * NKV + h / (NH / NKV)) * hd;
                    double dot = 0.0;
                    for (int i = 0; i < hd; i++) dot += (double)qt[i] * ks[i];
                    x[s] = dot / sqrt((double)hd) + bias_cpu(slope, term, T, h, t - s);
                    mx = std::max(mx, x[s]);
                }
                for (int s = 0; s <= t; s++) sum += exp(x[s] - mx);
                lse[((size_t)b * NH + h) * T + t] = (float)(mx + log(sum));
            }
}

// ----------------------------------------------------------------------------
// v1 (attention_forward: llmc/cuda/attention.cuh), v2 (attention_forward_online:
// llmc/cuda/attention_eval.cuh; its KV-cache offset, window and entropy inputs unused here),
// v5, v6 and v7 (flash_attention.cuh): the trainer's own code, included above

// ----------------------------------------------------------------------------
// v3: flash-style on CUDA cores. Block (query tile, h, b) of FA3_BQ threads, one query row
// each; K/V tiles of FA3_BK keys in shared memory as fp32.
#define FA3_BQ 64
#define FA3_BK 32
template <int HD>
__global__ void __launch_bounds__(FA3_BQ) attention_forward_kernel_v3(floatX *y, const floatX *q, const floatX *k,
                                                                      const floatX *v, int B, int T, int NH, int NKV) {
    __shared__ __align__(16) float Ks[FA3_BK * HD];
    __shared__ __align__(16) float Vs[FA3_BK * HD];
    int nqt = (T + FA3_BQ - 1) / FA3_BQ;
    int qt = nqt - 1 - (int)blockIdx.x;  // the longest query tiles first
    int h = blockIdx.y, b = blockIdx.z, kvh = h / (NH / NKV);
    int t = qt * FA3_BQ + threadIdx.x;
    int tq = t < T ? t : T - 1;  // rows past T compute a valid row; never stored
    const float scale = 1.0f / sqrtf((float)HD);
    float qr[HD], acc[HD];
    const floatX *qp = q + (((size_t)b * T + tq) * NH + h) * HD;
#pragma unroll
    for (int i = 0; i < HD; i += XVEC) {
        Pack128<floatX> pk = load128(qp + i);
#pragma unroll
        for (int e = 0; e < XVEC; e++) qr[i + e] = to_f(pk.v[e]);
    }
#pragma unroll
    for (int i = 0; i < HD; i++) acc[i] = 0.0f;
    float m = -FLT_MAX, l = 0.0f;
    size_t kstride = (size_t)NKV * HD;
    const floatX *kb = k + ((size_t)b * T * NKV + kvh) * HD, *vb = v + ((size_t)b * T * NKV + kvh) * HD;
    int kend = min(qt * FA3_BQ + FA3_BQ, T);  // keys [0, kend) serve every row of the tile
    for (int k0 = 0; k0 < kend; k0 += FA3_BK) {
        __syncthreads();  // the previous tile is no longer read
        for (int c = threadIdx.x; c < FA3_BK * HD / XVEC; c += blockDim.x) {
            int r = c / (HD / XVEC), cc = (c % (HD / XVEC)) * XVEC, s = k0 + r;
            float *kd = Ks + r * HD + cc, *vd = Vs + r * HD + cc;
            if (s < T) {
                Pack128<floatX> pk = load128(kb + s * kstride + cc), pv = load128(vb + s * kstride + cc);
#pragma unroll
                for (int e = 0; e < XVEC; e++) {
                    kd[e] = to_f(pk.v[e]);
                    vd[e] = to_f(pv.v[e]);
                }
            } else {
#pragma unroll
                for (int e = 0; e < XVEC; e++) kd[e] = vd[e] = 0.0f;  // zeros, never garbage: 0 * NaN = NaN
            }
        }
        __syncthreads();
        int nk = min(FA3_BK, tq - k0 + 1);  // keys k0 .. k0+nk-1 are visible to row tq
        if (nk > 0) {
            float sc[FA3_BK];
            float mt = m;
#pragma unroll
            for (int j = 0; j < FA3_BK; j++) {
                const float4 *kr = reinterpret_cast<const float4 *>(Ks + j * HD);
                float dot = 0.0f;
#pragma unroll
                for (int i = 0; i < HD / 4; i++) {
                    float4 kk = kr[i];
                    dot += qr[4 * i] * kk.x + qr[4 * i + 1] * kk.y + qr[4 * i + 2] * kk.z + qr[4 * i + 3] * kk.w;
                }
                sc[j] = dot * scale;
                if (j < nk) mt = fmaxf(mt, sc[j]);
            }
            float corr = expf(m - mt);
            l *= corr;
#pragma unroll
            for (int i = 0; i < HD; i++) acc[i] *= corr;
#pragma unroll
            for (int j = 0; j < FA3_BK; j++) {
                float pj = j < nk ? expf(sc[j] - mt) : 0.0f;
                l += pj;
                const float4 *vr = reinterpret_cast<const float4 *>(Vs + j * HD);
#pragma unroll
                for (int i = 0; i < HD / 4; i++) {
                    float4 vv = vr[i];
                    acc[4 * i] += pj * vv.x;
                    acc[4 * i + 1] += pj * vv.y;
                    acc[4 * i + 2] += pj * vv.z;
                    acc[4 * i + 3] += pj * vv.w;
                }
            }
            m = mt;
        }
    }
    if (t < T) {
        float inv = 1.0f / l;
        floatX *yp = y + (((size_t)b * T + t) * NH + h) * HD;
#pragma unroll
        for (int i = 0; i < HD; i += XVEC) {
            Pack128<floatX> o;
#pragma unroll
            for (int e = 0; e < XVEC; e++) o.v[e] = to_x(acc[i + e] * inv);
            store128(yp + i, o);
        }
    }
}

// ----------------------------------------------------------------------------
// v4: flash-style on tensor cores (bf16 only). Block (query tile of 64, h, b) of 4 warps;
// warp w owns query rows 16w .. 16w+15. Shared memory (dynamic): the Q, K, V tiles (bf16,
// rows padded by 8 elements against bank conflicts) and, per warp, its scores S (fp32),
// probabilities P (bf16) and output accumulator O (fp32). Every WMMA pointer is 32-byte
// aligned: region sizes and 16-row / 16-column offsets are multiples of 32 bytes.
#ifndef ENABLE_FP32
#define FA4_BQ 64
#define FA4_BK 64
#define FA4_WARPS 4
typedef __nv_bfloat16 bf16;
template <int HD>
struct Fa4Smem {
    static constexpr int LDH = HD + 8;      // Q, K, V tiles (bf16)
    static constexpr int LDS = FA4_BK + 4;  // a warp's scores (fp32)
    static constexpr int LDO = HD + 4;      // a warp's output accumulator (fp32)
    static constexpr int LDP = FA4_BK + 8;  // a warp's probabilities (bf16)
    static constexpr size_t q_off = 0;
    static constexpr size_t k_off = q_off + (size_t)FA4_BQ * LDH * sizeof(bf16);
    static constexpr size_t v_off = k_off + (size_t)FA4_BK * LDH * sizeof(bf16);
    static constexpr size_t s_off = v_off + (size_t)FA4_BK * LDH * sizeof(bf16);
    static constexpr size_t o_off = s_off + (size_t)FA4_WARPS * 16 * LDS * sizeof(float);
    static constexpr size_t p_off = o_off + (size_t)FA4_WARPS * 16 * LDO * sizeof(float);
    static constexpr size_t bytes = p_off + (size_t)FA4_WARPS * 16 * LDP * sizeof(bf16);
    static_assert(k_off % 32 == 0 && v_off % 32 == 0 && s_off % 32 == 0 && o_off % 32 == 0 && p_off % 32 == 0,
                  "WMMA needs 32-byte aligned regions");
    static_assert((16 * LDH * sizeof(bf16)) % 32 == 0 && (16 * LDS * sizeof(float)) % 32 == 0 &&
                      (16 * LDO * sizeof(float)) % 32 == 0 && (16 * LDP * sizeof(bf16)) % 32 == 0,
                  "16-row offsets must stay 32-byte aligned");
    static_assert(LDH % 8 == 0 && LDP % 8 == 0 && LDS % 4 == 0 && LDO % 4 == 0, "WMMA leading dimensions");
};

template <int HD>
__global__ void __launch_bounds__(FA4_WARPS * 32) attention_forward_kernel_v4(bf16 *y, const bf16 *q, const bf16 *k,
                                                                               const bf16 *v, int B, int T, int NH,
                                                                               int NKV) {
    using namespace nvcuda;
    typedef Fa4Smem<HD> S;
    constexpr int CPR = HD / 8;  // 16-byte chunks per row
    constexpr int HALF = FA4_BK / 2;
    extern __shared__ __align__(128) unsigned char smem[];
    bf16 *Qs = reinterpret_cast<bf16 *>(smem + S::q_off), *Ks = reinterpret_cast<bf16 *>(smem + S::k_off),
         *Vs = reinterpret_cast<bf16 *>(smem + S::v_off), *Ps = reinterpret_cast<bf16 *>(smem + S::p_off);
    float *Ss = reinterpret_cast<float *>(smem + S::s_off), *Os = reinterpret_cast<float *>(smem + S::o_off);
    int nqt = (T + FA4_BQ - 1) / FA4_BQ;
    int qt = nqt - 1 - (int)blockIdx.x;  // the longest query tiles first
    int h = blockIdx.y, b = blockIdx.z, kvh = h / (NH / NKV);
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, q0 = qt * FA4_BQ;
    const int4 zero4 = make_int4(0, 0, 0, 0);

    for (int c = threadIdx.x; c < FA4_BQ * CPR; c += blockDim.x) {  // Q tile, zero rows past T
        int r = c / CPR, cc = (c % CPR) * 8, t = q0 + r;
        int4 val = zero4;
        if (t < T) val = *reinterpret_cast<const int4 *>(q + (((size_t)b * T + t) * NH + h) * HD + cc);
        *reinterpret_cast<int4 *>(Qs + r * S::LDH + cc) = val;
    }
    float *Sw = Ss + warp * 16 * S::LDS, *Ow = Os + warp * 16 * S::LDO;
    bf16 *Pw = Ps + warp * 16 * S::LDP;
    for (int i = lane; i < 16 * HD; i += 32) Ow[(i / HD) * S::LDO + i % HD] = 0.0f;
    // softmax bookkeeping: lanes 2r and 2r+1 own row r of the warp's 16, half the columns each
    int row = lane >> 1, hf = lane & 1, tq = q0 + warp * 16 + row;
    float m_run = -FLT_MAX, l_run = 0.0f;
    const float scale = 1.0f / sqrtf((float)HD);
    __syncthreads();

    wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> qf[HD / 16];
#pragma unroll
    for (int d = 0; d < HD / 16; d++) wmma::load_matrix_sync(qf[d], Qs + warp * 16 * S::LDH + d * 16, S::LDH);

    size_t kstride = (size_t)NKV * HD;
    const bf16 *kb = k + ((size_t)b * T * NKV + kvh) * HD, *vb = v + ((size_t)b * T * NKV + kvh) * HD;
    int kend = min(q0 + FA4_BQ, T);  // BQ == BK: the last key tile is the diagonal tile (k0 == q0)
    for (int k0 = 0; k0 < kend; k0 += FA4_BK) {
        __syncthreads();  // the previous K/V tile is no longer read
        for (int c = threadIdx.x; c < FA4_BK * CPR; c += blockDim.x) {
            int r = c / CPR, cc = (c % CPR) * 8, s = k0 + r;
            int4 kv4 = zero4, vv4 = zero4;  // zeros past T, never garbage: 0 * NaN = NaN in the MMA
            if (s < T) {
                kv4 = *reinterpret_cast<const int4 *>(kb + s * kstride + cc);
                vv4 = *reinterpret_cast<const int4 *>(vb + s * kstride + cc);
            }
            *reinterpret_cast<int4 *>(Ks + r * S::LDH + cc) = kv4;
            *reinterpret_cast<int4 *>(Vs + r * S::LDH + cc) = vv4;
        }
        __syncthreads();

        // S (16 x BK) = Q_w K^T: K row-major [key][d] is K^T (d x key) column-major
#pragma unroll
        for (int j = 0; j < FA4_BK / 16; j++) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> sf;
            wmma::fill_fragment(sf, 0.0f);
#pragma unroll
            for (int d = 0; d < HD / 16; d++) {
                wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> kf;
                wmma::load_matrix_sync(kf, Ks + j * 16 * S::LDH + d * 16, S::LDH);
                wmma::mma_sync(sf, qf[d], kf, sf);
            }
            wmma::store_matrix_sync(Sw + j * 16, sf, S::LDS, wmma::mem_row_major);
        }
        __syncwarp();

        // online softmax on row `row`, columns hf*HALF .. hf*HALF+HALF-1 of the tile. Key k0 is
        // visible to every row of the tile (k0 <= q0), so each row's max is finite.
        const float *srow = Sw + row * S::LDS + hf * HALF;
        int kbase = k0 + hf * HALF;
        float mx = -FLT_MAX;
#pragma unroll
        for (int jj = 0; jj < HALF; jj++)
            if (kbase + jj <= tq) mx = fmaxf(mx, srow[jj] * scale);
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 1));
        float m_new = fmaxf(m_run, mx);
        float corr = expf(m_run - m_new);
        bf16 *prow = Pw + row * S::LDP + hf * HALF;
        float psum = 0.0f;
#pragma unroll
        for (int jj = 0; jj < HALF; jj++) {
            float p = kbase + jj <= tq ? expf(srow[jj] * scale - m_new) : 0.0f;
            psum += p;
            prow[jj] = __float2bfloat16(p);
        }
        psum += __shfl_xor_sync(0xffffffff, psum, 1);
        l_run = l_run * corr + psum;
        m_run = m_new;
        float *orow = Ow + row * S::LDO + hf * (HD / 2);
#pragma unroll
        for (int i = 0; i < HD / 2; i++) orow[i] *= corr;
        __syncwarp();

        // O (16 x HD) += P (16 x BK) V (BK x HD)
        wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> pf[FA4_BK / 16];
#pragma unroll
        for (int j = 0; j < FA4_BK / 16; j++) wmma::load_matrix_sync(pf[j], Pw + j * 16, S::LDP);
#pragma unroll
        for (int d = 0; d < HD / 16; d++) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> of;
            wmma::load_matrix_sync(of, Ow + d * 16, S::LDO, wmma::mem_row_major);
#pragma unroll
            for (int j = 0; j < FA4_BK / 16; j++) {
                wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> vf;
                wmma::load_matrix_sync(vf, Vs + j * 16 * S::LDH + d * 16, S::LDH);
                wmma::mma_sync(of, pf[j], vf, of);
            }
            wmma::store_matrix_sync(Ow + d * 16, of, S::LDO, wmma::mem_row_major);
        }
        __syncwarp();
    }
    if (tq < T) {
        float inv = 1.0f / l_run;
        const float *orow = Ow + row * S::LDO + hf * (HD / 2);
        bf16 *yp = y + (((size_t)b * T + tq) * NH + h) * HD + hf * (HD / 2);
#pragma unroll
        for (int i = 0; i < HD / 2; i += 8) {
            Pack128<bf16> o;
#pragma unroll
            for (int e = 0; e < 8; e++) o.v[e] = __float2bfloat16(orow[i + e] * inv);
            store128(yp + i, o);
        }
    }
}
#endif

// ----------------------------------------------------------------------------
// launchers

#define NV 7
static const char *const VERSIONS[NV + 1] = {
    "", "train_gpt.cu's training path: cuBLAS scores + softmax_forward_kernel on (B,NH,T,T) + cuBLAS P V",
    "train_gpt.cu's evaluation kernel: 16 query rows per block, K/V tiles of 32 in shared memory, online softmax",
    "flash-style on CUDA cores: thread per query row, K/V tiles of 32 in shared memory, online softmax",
    "flash-style on tensor cores: bf16 WMMA, 4 warps x 16 rows, K/V tiles of 64, online softmax (bf16 only)",
    "train_gpt.cu's --attention flash forward, fp32 build: thread per query row, K/V tiles of 32, softmax per 16 keys, lse kept",
    "train_gpt.cu's --attention flash forward, bf16 build, variant 1: tensor cores (WMMA), 4 warps x 16 rows, K/V tiles of 64, lse kept",
    "train_gpt.cu's --attention flash forward, bf16 build, variant 2: mma.sync, S/P/O in registers, cp.async double-buffered K/V"};

static bool supported(int v, int hd, bool bias, const char **why) {
    *why = "";
    if ((v == 3 || v == 4) && bias) { *why = "no attention bias"; return false; }
    if (v == 2 && hd > ATT_MAX_HD) { *why = "hd > 256"; return false; }
    if (v == 3 && hd != 32 && hd != 64 && hd != 128) { *why = "hd not 32, 64 or 128"; return false; }
    if ((v == 5 || v == 6) && hd > FLASH_MAX_HD) { *why = "hd > 128"; return false; }
#ifdef ENABLE_FP32
    if (v == 6 || v == 7) { *why = "bf16 tensor cores (bf16 build only)"; return false; }
#else
    if (v == 7) {
        if (hd != 32 && hd != 64 && hd != 128) { *why = "hd not 32, 64 or 128"; return false; }
        size_t bytes = hd == 32 ? FmmaSmem<32>::fwd : hd == 64 ? FmmaSmem<64>::fwd : FmmaSmem<128>::fwd;
        if (bytes > device_prop().sharedMemPerBlockOptin) { *why = "not enough shared memory"; return false; }
    }
    if (v == 6) {
        size_t bytes = hd <= 32 ? FtcSmem<32>::fwd : hd <= 64 ? FtcSmem<64>::fwd : FtcSmem<128>::fwd;
        if (bytes > device_prop().sharedMemPerBlockOptin) { *why = "not enough shared memory"; return false; }
    }
#endif
    if (v == 4) {
#ifdef ENABLE_FP32
        *why = "bf16 tensor cores (bf16 build only)";
        return false;
#else
        if (hd != 64 && hd != 128) { *why = "hd not 64 or 128"; return false; }
        size_t bytes = hd == 64 ? Fa4Smem<64>::bytes : Fa4Smem<128>::bytes;
        if (bytes > device_prop().sharedMemPerBlockOptin) { *why = "not enough shared memory"; return false; }
#endif
    }
    return true;
}

#ifndef ENABLE_FP32
template <int HD>
static void launch_v4(floatX *y, const floatX *q, const floatX *k, const floatX *v, int B, int T, int NH, int NKV) {
    size_t bytes = Fa4Smem<HD>::bytes;
    static bool configured = false;
    if (!configured) {
        cudaCheck(cudaFuncSetAttribute(attention_forward_kernel_v4<HD>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       (int)bytes));
        configured = true;
    }
    dim3 grid(ceil_div(T, FA4_BQ), NH, B);
    attention_forward_kernel_v4<HD><<<grid, FA4_WARPS * 32, bytes>>>(y, q, k, v, B, T, NH, NKV);
}
#endif

// att (B,NH,T,T) only for v1, lse (B,NH,T) only for v5, v6 and v7; ab: the bias (v3, v4: none)
static void attention_run(int ver, floatX *y, floatX *att, float *lse, const floatX *q, const floatX *k, const floatX *v,
                          int B, int T, int NH, int NKV, int hd, AttnBias ab) {
    if (ver == 5) {
        flash_forward_cuda_cores(y, lse, q, k, v, B, T, NH, NKV, hd, ab);
    } else if (ver == 6 || ver == 7) {
#ifndef ENABLE_FP32
        flash_forward_tensor_cores(y, lse, q, k, v, B, T, NH, NKV, hd, ab, ver - 5);
#endif
    } else if (ver == 1) {
        attention_forward(y, att, q, k, v, B, T, NH, NKV, hd, ab);
    } else if (ver == 2) {
        // as gpt_forward runs it for a whole sequence: no KV cache, no window, no entropy
        attention_forward_online(y, q, k, v, B, T, T, 0, NH, NKV, hd, 0, NULL, 0.0f, ab);
    } else if (ver == 3) {
        dim3 grid(ceil_div(T, FA3_BQ), NH, B);
        if (hd == 32) attention_forward_kernel_v3<32><<<grid, FA3_BQ>>>(y, q, k, v, B, T, NH, NKV);
        else if (hd == 64) attention_forward_kernel_v3<64><<<grid, FA3_BQ>>>(y, q, k, v, B, T, NH, NKV);
        else attention_forward_kernel_v3<128><<<grid, FA3_BQ>>>(y, q, k, v, B, T, NH, NKV);
    } else {
#ifndef ENABLE_FP32
        if (hd == 64) launch_v4<64>(y, q, k, v, B, T, NH, NKV);
        else launch_v4<128>(y, q, k, v, B, T, NH, NKV);
#endif
    }
    cudaCheck(cudaGetLastError());
}

typedef struct {
    int B, T, NH, NKV, hd;
    float alibi_alpha;  // > 0: ALiBi's slopes times alpha
    int term;           // 1: a learned bias of each distance (NH, T), N(0, 1)
} AttCase;

// The flash variant a version of the bf16 build's tensor-core entry runs (0: not one of them)
static int flash_variant_of(int ver) { return ver == 6 || ver == 7 ? ver - 5 : 0; }

int main(int argc, char **argv) {
    Args args = parse_args(argc, argv, "attention", VERSIONS, NV);
    device_init(argv[0]);
    cublas = get_cublas();
    int first = args.version ? args.version : 1, last = args.version ? args.version : NV;
    Verdicts vd;
    memset(&vd, 0, sizeof(vd));

    const AttCase cases[] = {
        {2, 256, 6, 2, 64, 0.0f, 0},   // GQA, group 3
        {1, 1000, 6, 6, 64, 0.0f, 0},  // T not a multiple of any tile
        {1, 200, 4, 1, 128, 0.0f, 0},  // MQA, hd 128
        {1, 300, 4, 2, 48, 0.0f, 0},   // hd 48: padded to 64 by v6
        {2, 100, 4, 2, 32, 8.0f, 0},   // hd 32, ALiBi at PosAug's alpha 8
        {1, 300, 4, 2, 64, 0.0f, 1},   // a learned bias of each distance (T5, KERPLE), T off the tiles
    };
    Rng rng = rng_make(1337, 6);
    printf("validation (tolerance: norm rel %.0e for %s outputs)\n", FX_TOL, PRECISION_NAME);
    for (const AttCase &c : cases) {
        size_t nq = (size_t)c.B * c.T * c.NH * c.hd, nkv = (size_t)c.B * c.T * c.NKV * c.hd;
        size_t natt = (size_t)c.B * c.NH * c.T * c.T;
        std::vector<float> q(nq), k(nkv), v(nkv);
        fill_normal(q, 0.0f, 1.0f, &rng);
        fill_normal(k, 0.0f, 1.0f, &rng);
        fill_normal(v, 0.0f, 1.0f, &rng);
        round_to_x(q);
        round_to_x(k);
        round_to_x(v);
        size_t nl = (size_t)c.B * c.NH * c.T;
        std::vector<float> y_ref(nq), att_ref(natt), lse_ref(nl);
        std::vector<float> slope(c.NH), term((size_t)c.NH * c.T);
        for (int h = 0; h < c.NH; h++) {  // as llmc/schedule.h's alibi_slopes
            int p2 = 1;
            while (p2 * 2 <= c.NH) p2 *= 2;
            slope[h] = c.alibi_alpha * (h < p2 ? exp2f(-8.0f * (h + 1) / p2) : exp2f(-8.0f * (2 * (h - p2) + 1) / (2 * p2)));
        }
        fill_normal(term, 0.0f, 1.0f, &rng);
        const float *h_slope = c.alibi_alpha > 0 ? slope.data() : NULL, *h_term = c.term ? term.data() : NULL;
        attention_cpu(y_ref.data(), att_ref.data(), q.data(), k.data(), v.data(), c.B, c.T, c.NH, c.NKV, c.hd, h_slope,
                      h_term);
        lse_cpu(lse_ref.data(), q.data(), k.data(), c.B, c.T, c.NH, c.NKV, c.hd, h_slope, h_term);
        floatX *d_q = dalloc<floatX>(nq), *d_k = dalloc<floatX>(nkv), *d_v = dalloc<floatX>(nkv),
               *d_y = dalloc<floatX>(nq), *d_att = dalloc<floatX>(natt);
        float *d_lse = dalloc<float>(nl);
        upload_x(d_q, q);
        upload_x(d_k, k);
        upload_x(d_v, v);
        float *d_slope = dalloc<float>(c.NH), *d_term = dalloc<float>(term.size());
        upload_f(d_slope, slope);
        upload_f(d_term, term);
        AttnBias ab = AttnBias{};
        ab.slope = h_slope ? d_slope : NULL;
        ab.term = h_term ? d_term : NULL;
        ab.n_dist = c.T;
        ab.NH = c.NH;
        bool bias = h_slope || h_term;
        printf("  case B=%d T=%d NH=%d NKV=%d hd=%d%s%s\n", c.B, c.T, c.NH, c.NKV, c.hd, h_slope ? ", ALiBi" : "",
               h_term ? ", a learned bias of each distance" : "");
        for (int ver = first; ver <= last; ver++) {
            const char *why;
            if (!supported(ver, c.hd, bias, &why)) {
                printf("   v%d: not supported (%s)\n", ver, why);
                vd.skipped[ver] = 1;
                continue;
            }
            printf("   v%d:\n", ver);
            vd.ran[ver] = 1;
            poison(d_y, nq * sizeof(floatX));
            poison(d_att, natt * sizeof(floatX));
            poison(d_lse, nl * sizeof(float));
            attention_run(ver, d_y, d_att, d_lse, d_q, d_k, d_v, c.B, c.T, c.NH, c.NKV, c.hd, ab);
            cudaCheck(cudaDeviceSynchronize());
            bool ok = !flash_variant_of(ver) || ran_variant(VF_FLASH_FWD, flash_variant_of(ver));
            ok &= check_close("y", download_x(d_y, nq), y_ref, FX_TOL);
            if (ver == 1) ok &= check_close("att (probs)", download_x(d_att, natt), att_ref, FX_TOL);
            if (ver >= 5) ok &= check_close("lse", download_f(d_lse, nl), lse_ref, F32_TOL);
            if (!ok) vd.failed[ver] = 1;
        }
        cudaCheck(cudaFree(d_q));
        cudaCheck(cudaFree(d_k));
        cudaCheck(cudaFree(d_v));
        cudaCheck(cudaFree(d_y));
        cudaCheck(cudaFree(d_att));
        cudaCheck(cudaFree(d_lse));
        cudaCheck(cudaFree(d_slope));
        cudaCheck(cudaFree(d_term));
    }
    for (int ver = first; ver <= last; ver++) verdict_print("attention", ver, &vd);

    if (args.bench) {
        AttCase c = {16, 2048, 6, 6, 64, 0.0f, 0};
        size_t nq = (size_t)c.B * c.T * c.NH * c.hd, nkv = (size_t)c.B * c.T * c.NKV * c.hd;
        size_t natt = (size_t)c.B * c.NH * c.T * c.T;
        double flops = 4.0 * c.B * c.NH * c.hd * ((double)c.T * (c.T + 1) / 2);
        printf("benchmark: B=%d T=%d NH=%d NKV=%d hd=%d (causal %.1f GFLOP), median of 50 runs (v2: 10), L2 flushed\n",
               c.B, c.T, c.NH, c.NKV, c.hd, flops / 1e9);
        measured_gemm_tflops();
        std::vector<float> h(nq);
        fill_normal(h, 0.0f, 1.0f, &rng);
        floatX *d_q = dalloc<floatX>(nq), *d_k = dalloc<floatX>(nkv), *d_v = dalloc<floatX>(nkv),
               *d_y = dalloc<floatX>(nq), *d_att = dalloc<floatX>(natt);
        float *d_lse = dalloc<float>((size_t)c.B * c.NH * c.T);
        upload_x(d_q, h);
        h.resize(nkv);
        upload_x(d_k, h);
        upload_x(d_v, h);
        for (int ver = first; ver <= last; ver++) {
            const char *why;
            if (vd.failed[ver] || !supported(ver, c.hd, false, &why)) continue;
            int reps = ver == 2 ? 10 : 50;  // v2 takes tens of ms per run
            float us = bench_us(
                [&] { attention_run(ver, d_y, d_att, d_lse, d_q, d_k, d_v, c.B, c.T, c.NH, c.NKV, c.hd, AttnBias{}); },
                [] {}, ver == 2 ? 2 : 5, reps);
            if (!report_tflops_ran("attention", ver, VF_FLASH_FWD, flash_variant_of(ver), us, flops)) vd.failed[ver] = 1;
        }
        cudaCheck(cudaFree(d_q));
        cudaCheck(cudaFree(d_k));
        cudaCheck(cudaFree(d_v));
        cudaCheck(cudaFree(d_y));
        cudaCheck(cudaFree(d_att));
        cudaCheck(cudaFree(d_lse));
    }
    return verdict_exit("attention", first, last, &vd);
}
