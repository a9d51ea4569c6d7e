// dev/cuda/attention_backward.cu: causal GQA attention backward. dy, q (B,T,NH,hd), k, v
// (B,T,NKV,hd); dq (B,T,NH,hd), dk, dv (B,T,NKV,hd), overwritten; query head h reads
// key/value head h / (NH/NKV), and dk, dv sum the group's query heads.
//
//   v1  train_gpt.cu's --attention naive (attention_backward): dP = dY V^T per head through
//       cuBLAS into (B,NH,T,T), softmax_backward_kernel in place, then dQ = dS K,
//       dK += dS^T Q, dV += P^T dY through cuBLAS. Reads the forward's probabilities P.
//   v2  train_gpt.cu's --attention flash of the fp32 build (flash_backward_cuda_cores): D =
//       rowsum(dY * Y), then a dK/dV kernel (a thread per key, the group's heads summed in
//       registers) and a dQ kernel (a thread per query), both recomputing P from the
//       forward's lse (B,NH,T). CUDA cores, fp32 math. Also takes ALiBi (the bias is
//       recomputed with P).
//   v3  train_gpt.cu's --attention flash of the bf16 build (flash_backward_tensor_cores; bf16
//       only): D as v2, then a dK/dV kernel (4 warps x 16 keys; S^T = K Q^T, dP^T = V dY^T,
//       dV += P^T dY, dK += dS^T Q, the group's heads summed in fp32 accumulator fragments)
//       and a dQ kernel (4 warps x 16 queries; dQ += dS K), every product on tensor cores
//       (WMMA 16x16x16, fp32 accumulation), P and dS in fp32 then bf16 for the products.
//       The header's backward variant 1 (flash_tc_backward_*_kernel_v1).
//   v4  the same entry with backward variant 2, the trainer's (flash_tc_backward_*_kernel_v2;
//       bf16 only, hd 32, 64 or 128), FA2-class: mma.sync m16n8k16 with S, dP, P and dS in
//       registers (P and dS reused as A fragments), the other side's tiles double-buffered by
//       cp.async (the dK/dV pass's prefetch crosses the group's heads), 32 columns per pass
//       over a tile; the same two passes and seven products as v3, no atomics.
//
// Validation on random q, k, v, dy against the CPU reference (attention_backward of
// train_gpt_cpu.c, serial), outputs poisoned with NaN first: GQA, T off every tile (1000),
// MQA with hd 128, hd 32 with ALiBi at alpha 8, hd 48 with ALiBi (v3 and v4 fail when the
// launcher ran another variant than theirs, llmc/cuda/variants.cuh). The forward's P, y and
// lse come from the CPU, rounded to what the trainer keeps (P and y in floatX, lse in fp32).
// v1 is judged against D = sum_s P dP, v2 to v4 against D = rowsum(dY y) from that kept y
// (their recipe: in bf16 the rounded y alone moves dq's first rows by up to 1e-1 of the
// scale, which the elementwise bound of check_close would count against the kernels).
// Benchmark: the 10M preset, B=16 T=2048 NH=NKV=6 hd=64. TFLOP/s counts the causal work
// of the four products (8 * B * NH * hd * T(T+1)/2), the same for every version.
//
// usage: ./attention_backward_bin [VERSION] [--no-bench]
#include "common.h"
#include "../../llmc/cuda/attention.cuh"
#include "../../llmc/cuda/flash_attention.cuh"

// ----------------------------------------------------------------------------
// CPU reference: the forward (P, y, lse; ALiBi bias_h * (t - s)) and attention_backward
// of train_gpt_cpu.c (serial)
static void forward_cpu(float *P, float *y, float *lse, const float *q, const float *k, const float *v, int B, int T,
                        int NH, int NKV, int hd, const float *bias) {
    int group = NH / NKV;
    float scale = 1.0f / sqrtf((float)hd);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                int kvh = h / group;
                const float *qt = q + (((size_t)b * T + t) * NH + h) * hd;
                float *a = P + (((size_t)b * NH + h) * T + t) * T, maxv = -INFINITY;
                for (int s = 0; s <= t; s++) {
                    const float *ks = k + (((size_t)b * T + s) * NKV + kvh) * hd;
                    float dot = 0.0f;
                    for (int i = 0; i < hd; i++) dot += qt[i] * ks[i];
                    a[s] = dot * scale - bias[h] * (float)(t - s);
                    maxv = fmaxf(maxv, a[s]);
                }
                double sum = 0.0;
                for (int s = 0; s <= t; s++) sum += exp((double)a[s] - maxv);
                lse[((size_t)b * NH + h) * T + t] = (float)(maxv + log(sum));
                float *yt = y + (((size_t)b * T + t) * NH + h) * hd;
                for (int i = 0; i < hd; i++) yt[i] = 0.0f;
                for (int s = 0; s < T; s++) {
                    a[s] = s <= t ? (float)(exp((double)a[s] - maxv) / sum) : 0.0f;
                    const float *vs = v + (((size_t)b * T + s) * NKV + kvh) * hd;
                    if (s <= t)
                        for (int i = 0; i < hd; i++) yt[i] += a[s] * vs[i];
                }
            }
}

// y null: D = sum_s P dP (v1's recipe, from the forward's P); y given: D = rowsum(dY * y),
// the flash recipe's, from the output as the trainer keeps it (floatX)
static void backward_cpu(float *dq, float *dk, float *dv, const float *dy, const float *P, const float *q,
                         const float *k, const float *v, const float *y, int B, int T, int NH, int NKV, int hd) {
    int group = NH / NKV;
    float scale = 1.0f / sqrtf((float)hd);
    std::vector<float> ds(T);
    size_t nkv = (size_t)B * T * NKV * hd;
    std::fill(dk, dk + nkv, 0.0f);
    std::fill(dv, dv + nkv, 0.0f);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                int kvh = h / group;
                const float *p = P + (((size_t)b * NH + h) * T + t) * T;
                const float *dyt = dy + (((size_t)b * T + t) * NH + h) * hd, *qt = q + (((size_t)b * T + t) * NH + h) * hd;
                float dsum = 0.0f;
                for (int s = 0; s <= t; s++) {
                    const float *vs = v + (((size_t)b * T + s) * NKV + kvh) * hd;
                    float dp = 0.0f;
                    for (int i = 0; i < hd; i++) dp += dyt[i] * vs[i];
                    ds[s] = dp;
                    dsum += p[s] * dp;
                }
                if (y) {
                    const float *yt = y + (((size_t)b * T + t) * NH + h) * hd;
                    dsum = 0.0f;
                    for (int i = 0; i < hd; i++) dsum += dyt[i] * yt[i];
                }
                float *dqt = dq + (((size_t)b * T + t) * NH + h) * hd;
                for (int i = 0; i < hd; i++) dqt[i] = 0.0f;
                for (int s = 0; s <= t; s++) {
                    float d = p[s] * (ds[s] - dsum) * scale;
                    const float *ks = k + (((size_t)b * T + s) * NKV + kvh) * hd;
                    float *dks = dk + (((size_t)b * T + s) * NKV + kvh) * hd, *dvs = dv + (((size_t)b * T + s) * NKV + kvh) * hd;
                    for (int i = 0; i < hd; i++) {
                        dqt[i] += d * ks[i];
                        dks[i] += d * qt[i];
                        dvs[i] += p[s] * dyt[i];
                    }
                }
            }
}

// ----------------------------------------------------------------------------
// v1 (attention_backward: llmc/cuda/attention.cuh), v2, v3 and v4 (flash_attention.cuh): the
// trainer's own code, included above

// ----------------------------------------------------------------------------
// launchers

#define NV 4
static const char *const VERSIONS[NV + 1] = {
    "", "train_gpt.cu's --attention naive: cuBLAS dP into (B,NH,T,T), softmax_backward_kernel, cuBLAS dQ, dK, dV",
    "train_gpt.cu's --attention flash, fp32 build: D = rowsum(dY Y), dK/dV and dQ kernels recomputing P from lse (CUDA cores)",
    "train_gpt.cu's --attention flash, bf16 build, variant 1: the same passes on tensor cores (WMMA), 4 warps x 16 rows, tiles of 64",
    "train_gpt.cu's --attention flash, bf16 build, variant 2: mma.sync, S/dP/P/dS in registers, cp.async double-buffered tiles"};

static bool supported(int v, int hd, const char **why) {
    *why = "";
    if (v >= 2 && hd > FLASH_MAX_HD) { *why = "hd > 128"; return false; }
#ifdef ENABLE_FP32
    if (v >= 3) { *why = "bf16 tensor cores (bf16 build only)"; return false; }
#else
    if (v == 4) {
        if (hd != 32 && hd != 64 && hd != 128) { *why = "hd not 32, 64 or 128"; return false; }
        size_t bytes = hd == 32 ? FmmaSmem<32>::bwd : hd == 64 ? FmmaSmem<64>::bwd : FmmaSmem<128>::bwd;
        if (bytes > device_prop().sharedMemPerBlockOptin) { *why = "not enough shared memory"; return false; }
    }
    if (v == 3) {
        size_t bytes = hd <= 32 ? FtcSmem<32>::kv : hd <= 64 ? FtcSmem<64>::kv : FtcSmem<128>::kv;
        if (bytes > device_prop().sharedMemPerBlockOptin) { *why = "not enough shared memory"; return false; }
    }
#endif
    return true;
}

// Everything one version reads: the forward's P (v1), y and lse (v2), and D scratch (v2).
typedef struct {
    floatX *q, *k, *v, *dy, *y, *att, *datt, *dq, *dk, *dv;
    float *lse, *D;
} Bufs;

// ab: the attention-score hook (ALiBi's slopes on the device, or none)
static void backward_run(int ver, const Bufs &d, int B, int T, int NH, int NKV, int hd, AttnBias ab) {
    if (ver == 1) attention_backward(d.dq, d.dk, d.dv, NULL, d.datt, d.dy, d.att, d.q, d.k, d.v, B, T, NH, NKV, hd);
    else if (ver == 2)
        flash_backward_cuda_cores(d.dq, d.dk, d.dv, d.D, d.dy, d.y, d.lse, d.q, d.k, d.v, B, T, NH, NKV, hd, ab);
#ifndef ENABLE_FP32
    else flash_backward_tensor_cores(d.dq, d.dk, d.dv, d.D, d.dy, d.y, d.lse, d.q, d.k, d.v, B, T, NH, NKV, hd, ab, ver - 2);
#endif
    cudaCheck(cudaGetLastError());
}

static Bufs bufs_alloc(size_t nq, size_t nkv, size_t natt, size_t nl) {
    Bufs d;
    d.q = dalloc<floatX>(nq); d.dy = dalloc<floatX>(nq); d.y = dalloc<floatX>(nq); d.dq = dalloc<floatX>(nq);
    d.k = dalloc<floatX>(nkv); d.v = dalloc<floatX>(nkv); d.dk = dalloc<floatX>(nkv); d.dv = dalloc<floatX>(nkv);
    d.att = dalloc<floatX>(natt); d.datt = dalloc<floatX>(natt);
    d.lse = dalloc<float>(nl); d.D = dalloc<float>(nl);
    return d;
}
static void bufs_free(Bufs &d) {
    floatX *xs[] = {d.q, d.k, d.v, d.dy, d.y, d.att, d.datt, d.dq, d.dk, d.dv};
    for (floatX *p : xs) cudaCheck(cudaFree(p));
    cudaCheck(cudaFree(d.lse));
    cudaCheck(cudaFree(d.D));
}

typedef struct {
    int B, T, NH, NKV, hd;
    float alibi_alpha;  // 0: no ALiBi
} AttCase;

// The flash variant a version of the bf16 build's tensor-core entry runs (0: not one of them)
static int flash_variant_of(int ver) { return ver == 3 || ver == 4 ? ver - 2 : 0; }

int main(int argc, char **argv) {
    Args args = parse_args(argc, argv, "attention_backward", VERSIONS, NV);
    device_init(argv[0]);
    cublas = get_cublas();
    int first = args.version ? args.version : 1, last = args.version ? args.version : NV;
    Verdicts vd;
    memset(&vd, 0, sizeof(vd));

    const AttCase cases[] = {
        {2, 256, 6, 2, 64, 0.0f},   // GQA, group 3
        {1, 1000, 6, 6, 64, 0.0f},  // T not a multiple of any tile
        {1, 200, 4, 1, 128, 0.0f},  // MQA, hd 128
        {2, 100, 4, 2, 32, 8.0f},   // ALiBi at PosAug's alpha 8, hd 32
        {1, 300, 4, 2, 48, 1.0f},   // hd 48 (padded to 64 by v3), ALiBi
    };
    Rng rng = rng_make(1337, 7);
    printf("validation (tolerance: norm rel %.0e for %s outputs)\n", FX_TOL, PRECISION_NAME);
    for (const AttCase &c : cases) {
        size_t nq = (size_t)c.B * c.T * c.NH * c.hd, nkv = (size_t)c.B * c.T * c.NKV * c.hd;
        size_t natt = (size_t)c.B * c.NH * c.T * c.T, nl = (size_t)c.B * c.NH * c.T;
        std::vector<float> q(nq), k(nkv), v(nkv), dy(nq);
        fill_normal(q, 0.0f, 1.0f, &rng);
        fill_normal(k, 0.0f, 1.0f, &rng);
        fill_normal(v, 0.0f, 1.0f, &rng);
        fill_normal(dy, 0.0f, 1.0f, &rng);
        round_to_x(q);
        round_to_x(k);
        round_to_x(v);
        round_to_x(dy);
        float bias[64] = {0};
        for (int h = 0; h < c.NH && c.alibi_alpha > 0; h++) {  // as llmc/schedule.h's alibi_slopes
            int p2 = 1;
            while (p2 * 2 <= c.NH) p2 *= 2;
            float m = h < p2 ? exp2f(-8.0f * (h + 1) / p2) : exp2f(-8.0f * (2 * (h - p2) + 1) / (2 * p2));
            bias[h] = m * c.alibi_alpha;
        }
        std::vector<float> P(natt), y(nq), lse(nl), dq_ref(nq), dk_ref(nkv), dv_ref(nkv);
        forward_cpu(P.data(), y.data(), lse.data(), q.data(), k.data(), v.data(), c.B, c.T, c.NH, c.NKV, c.hd, bias);
        round_to_x(y);  // the output as the trainer keeps it
        backward_cpu(dq_ref.data(), dk_ref.data(), dv_ref.data(), dy.data(), P.data(), q.data(), k.data(), v.data(),
                     nullptr, c.B, c.T, c.NH, c.NKV, c.hd);
        // v2, v3: D from the kept y (header)
        std::vector<float> dq_flash(nq), dk_flash(nkv), dv_flash(nkv);
        backward_cpu(dq_flash.data(), dk_flash.data(), dv_flash.data(), dy.data(), P.data(), q.data(), k.data(),
                     v.data(), y.data(), c.B, c.T, c.NH, c.NKV, c.hd);
        Bufs d = bufs_alloc(nq, nkv, natt, nl);
        upload_x(d.q, q);
        upload_x(d.k, k);
        upload_x(d.v, v);
        upload_x(d.dy, dy);
        upload_x(d.y, y);
        upload_x(d.att, P);
        upload_f(d.lse, lse);
        float *d_slope = dalloc<float>(64);
        cudaCheck(cudaMemcpy(d_slope, bias, sizeof(bias), cudaMemcpyHostToDevice));
        AttnBias ab = AttnBias{};
        ab.slope = c.alibi_alpha > 0 ? d_slope : NULL;
        printf("  case B=%d T=%d NH=%d NKV=%d hd=%d alibi alpha %g\n", c.B, c.T, c.NH, c.NKV, c.hd, c.alibi_alpha);
        for (int ver = first; ver <= last; ver++) {
            const char *why;
            if (!supported(ver, c.hd, &why)) {
                printf("   v%d: not supported (%s)\n", ver, why);
                vd.skipped[ver] = 1;
                continue;
            }
            printf("   v%d:\n", ver);
            vd.ran[ver] = 1;
            poison(d.dq, nq * sizeof(floatX));
            poison(d.dk, nkv * sizeof(floatX));
            poison(d.dv, nkv * sizeof(floatX));
            backward_run(ver, d, c.B, c.T, c.NH, c.NKV, c.hd, ab);
            cudaCheck(cudaDeviceSynchronize());
            bool flash = ver >= 2;
            bool ok = !flash_variant_of(ver) || ran_variant(VF_FLASH_BWD, flash_variant_of(ver));
            ok &= check_close("dq", download_x(d.dq, nq), flash ? dq_flash : dq_ref, FX_TOL);
            ok &= check_close("dk", download_x(d.dk, nkv), flash ? dk_flash : dk_ref, FX_TOL);
            ok &= check_close("dv", download_x(d.dv, nkv), flash ? dv_flash : dv_ref, FX_TOL);
            if (!ok) vd.failed[ver] = 1;
        }
        bufs_free(d);
        cudaCheck(cudaFree(d_slope));
    }
    for (int ver = first; ver <= last; ver++) verdict_print("attention_backward", ver, &vd);

    if (args.bench) {
        AttCase c = {16, 2048, 6, 6, 64, 0.0f};
        size_t nq = (size_t)c.B * c.T * c.NH * c.hd, nkv = (size_t)c.B * c.T * c.NKV * c.hd;
        size_t natt = (size_t)c.B * c.NH * c.T * c.T, nl = (size_t)c.B * c.NH * c.T;
        double flops = 8.0 * c.B * c.NH * c.hd * ((double)c.T * (c.T + 1) / 2);
        printf("benchmark: B=%d T=%d NH=%d NKV=%d hd=%d (causal %.1f GFLOP), median of 20 runs, L2 flushed\n", c.B, c.T,
               c.NH, c.NKV, c.hd, flops / 1e9);
        measured_gemm_tflops();
        Bufs d = bufs_alloc(nq, nkv, natt, nl);
        std::vector<float> h(nq);
        fill_normal(h, 0.0f, 1.0f, &rng);
        upload_x(d.q, h);
        upload_x(d.dy, h);
        upload_x(d.y, h);
        h.resize(nkv);
        upload_x(d.k, h);
        upload_x(d.v, h);
        cudaCheck(cudaMemset(d.att, 0, natt * sizeof(floatX)));  // the timing does not depend on the values
        std::vector<float> l(nl, 10.0f);
        upload_f(d.lse, l);
        for (int ver = first; ver <= last; ver++) {
            const char *why;
            if (vd.failed[ver] || !supported(ver, c.hd, &why)) continue;
            float us = bench_us([&] { backward_run(ver, d, c.B, c.T, c.NH, c.NKV, c.hd, AttnBias{}); }, [] {}, 3, 20);
            if (!report_tflops_ran("attention_backward", ver, VF_FLASH_BWD, flash_variant_of(ver), us, flops)) vd.failed[ver] = 1;
        }
        bufs_free(d);
    }
    return verdict_exit("attention_backward", first, last, &vd);
}
