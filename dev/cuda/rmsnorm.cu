// dev/cuda/rmsnorm.cu: RMSNorm forward and backward, x (N,C), w (C), eps 1e-5.
//   forward:  out = x * rstd * w, rstd = 1/sqrt(mean(x^2) + eps) (fp32, kept for backward)
//   backward: dx (+)= rstd * (g*w - xhat * mean(g*w*xhat)), xhat = x*rstd; dw (fp32) += sum_rows g*xhat
//
//   v1  train_gpt.cu's kernels: one warp per row, scalar loads, x read twice; backward
//       adds each 8-row block's dw in a fixed row order into a (N/8, C) scratch, and a
//       second kernel sums the blocks in a fixed order: dw is deterministic (checked: two
//       runs give the same bits)
//   v2  one warp per row with the row held in registers (128-bit loads/stores, bf16x8 /
//       float4; x read once). Backward: a grid of resident blocks, each warp walks rows
//       with its lane's columns fixed, so dw accumulates in registers across all its
//       rows; one shared-memory reduction and one global atomic per column per block (so
//       dw is not bit-reproducible: the trainer would need a fixed-order sum to use it).
//   v3  the forward of v1; the header's backward variant 2, the trainer's: 8 warps own 64
//       consecutive rows (a fixed number, so dw's order is the same on every GPU), 128-bit
//       loads and stores, each warp's dw in its own row of shared memory, the 8 rows summed
//       in order into a (N/64, C) scratch that rmsnorm_dw_kernel sums in a fixed order:
//       deterministic, no atomics (checked: two runs give the same bits).
//
// Validation on random inputs against the CPU reference (rmsnorm_forward/backward of
// train_gpt_cpu.c, with double accumulators), outputs poisoned with NaN first; backward
// with accumulate 0 (dx poisoned) and 1 (dx random). Shapes: C 384 (10M), 448 (wide),
// 2048 (1b), row counts that are not multiples of the rows per block.
// Benchmark: N = B*T = 16*2048 rows, C = 384; backward with accumulate 1 (as in the trainer).
//
// usage: ./rmsnorm_bin [VERSION] [--no-bench]
#include "common.h"
#include "../../llmc/cuda/rmsnorm.cuh"

// ----------------------------------------------------------------------------
// CPU reference (train_gpt_cpu.c's math; sums in double)
static void rmsnorm_forward_cpu(float *out, float *rstd, const float *x, const float *w, int N, int C, float eps) {
    for (int i = 0; i < N; i++) {
        const float *xi = x + (size_t)i * C;
        double ss = 0.0;
        for (int c = 0; c < C; c++) ss += (double)xi[c] * xi[c];
        float r = 1.0f / sqrtf((float)(ss / C) + eps);
        float *o = out + (size_t)i * C;
        for (int c = 0; c < C; c++) o[c] = xi[c] * r * w[c];
        rstd[i] = r;
    }
}

static void rmsnorm_backward_cpu(float *dx, float *dw, const float *dout, const float *x, const float *w,
                                 const float *rstd, int N, int C, int accumulate) {
    for (int i = 0; i < N; i++) {
        const float *xi = x + (size_t)i * C, *g = dout + (size_t)i * C;
        float r = rstd[i];
        double dot = 0.0;
        for (int c = 0; c < C; c++) dot += (double)g[c] * w[c] * xi[c] * r;
        float dotf = (float)(dot / C);
        float *d = dx + (size_t)i * C;
        for (int c = 0; c < C; c++) {
            float v = r * (g[c] * w[c] - xi[c] * r * dotf);
            d[c] = accumulate ? d[c] + v : v;
        }
    }
    for (int c = 0; c < C; c++) {
        double s = 0.0;
        for (int i = 0; i < N; i++) s += (double)dout[(size_t)i * C + c] * (x[(size_t)i * C + c] * rstd[i]);
        dw[c] += (float)s;
    }
}

// ----------------------------------------------------------------------------
// v1: the trainer's own kernels (llmc/cuda/, included above)

// ----------------------------------------------------------------------------
// v2: row in registers. Lane `lane` owns the 128-bit chunks lane, lane+32, ... (CH of them at
// most), so C <= 32 * CH * XVEC and C % XVEC == 0.

template <int CH>
__global__ void __launch_bounds__(256) rmsnorm_forward_kernel_packed(floatX *out, float *rstd, const floatX *x,
                                                                  const floatX *w, int N, int C, float eps) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N) return;
    int nch = C / XVEC;
    const floatX *xr = x + (size_t)row * C;
    Pack128<floatX> xv[CH];
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < CH; k++) {
        int ch = lane + 32 * k;
        if (ch < nch) {
            xv[k] = load128(xr + (size_t)ch * XVEC);
#pragma unroll
            for (int i = 0; i < XVEC; i++) {
                float f = to_f(xv[k].v[i]);
                ss += f * f;
            }
        }
    }
    float r = rsqrtf(warp_sum(ss) / C + eps);
    floatX *o = out + (size_t)row * C;
#pragma unroll
    for (int k = 0; k < CH; k++) {
        int ch = lane + 32 * k;
        if (ch < nch) {
            Pack128<floatX> wv = load128(w + (size_t)ch * XVEC), ov;
#pragma unroll
            for (int i = 0; i < XVEC; i++) ov.v[i] = to_x(to_f(xv[k].v[i]) * r * to_f(wv.v[i]));
            store128(o + (size_t)ch * XVEC, ov);
        }
    }
    if (lane == 0) rstd[row] = r;
}

template <int CH>
__global__ void __launch_bounds__(256) rmsnorm_backward_kernel_atomic(floatX *dx, float *dw, const floatX *dout,
                                                                   const floatX *x, const floatX *w, const float *rstd,
                                                                   int N, int C, int accumulate) {
    extern __shared__ float dw_shared[];  // (C)
    for (int c = threadIdx.x; c < C; c += blockDim.x) dw_shared[c] = 0.0f;
    __syncthreads();
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nw = blockDim.x / 32;
    int nch = C / XVEC;
    Pack128<floatX> wv[CH];  // w stays packed: registers are the limit here
    float dwacc[CH][XVEC];
#pragma unroll
    for (int k = 0; k < CH; k++) {
        int ch = lane + 32 * k;
        if (ch < nch) wv[k] = load128(w + (size_t)ch * XVEC);
#pragma unroll
        for (int i = 0; i < XVEC; i++) dwacc[k][i] = 0.0f;
    }
    for (int row = blockIdx.x * nw + warp; row < N; row += gridDim.x * nw) {
        const floatX *xr = x + (size_t)row * C, *g = dout + (size_t)row * C;
        float r = rstd[row], dot = 0.0f;
        Pack128<floatX> xv[CH], gv[CH];
#pragma unroll
        for (int k = 0; k < CH; k++) {
            int ch = lane + 32 * k;
            if (ch < nch) {
                xv[k] = load128(xr + (size_t)ch * XVEC);
                gv[k] = load128(g + (size_t)ch * XVEC);
#pragma unroll
                for (int i = 0; i < XVEC; i++) dot += to_f(gv[k].v[i]) * to_f(wv[k].v[i]) * to_f(xv[k].v[i]) * r;
            }
        }
        dot = warp_sum(dot) / C;
        floatX *d = dx + (size_t)row * C;
#pragma unroll
        for (int k = 0; k < CH; k++) {
            int ch = lane + 32 * k;
            if (ch < nch) {
                Pack128<floatX> dv, ov;
                if (accumulate) dv = load128(d + (size_t)ch * XVEC);
#pragma unroll
                for (int i = 0; i < XVEC; i++) {
                    float xhat = to_f(xv[k].v[i]) * r, gc = to_f(gv[k].v[i]);
                    float v = r * (gc * to_f(wv[k].v[i]) - xhat * dot);
                    ov.v[i] = to_x(accumulate ? to_f(dv.v[i]) + v : v);
                    dwacc[k][i] += gc * xhat;
                }
                store128(d + (size_t)ch * XVEC, ov);
            }
        }
    }
#pragma unroll
    for (int k = 0; k < CH; k++) {
        int ch = lane + 32 * k;
        if (ch < nch)
#pragma unroll
            for (int i = 0; i < XVEC; i++) atomicAdd(&dw_shared[ch * XVEC + i], dwacc[k][i]);
    }
    __syncthreads();
    for (int c = threadIdx.x; c < C; c += blockDim.x) atomicAdd(&dw[c], dw_shared[c]);
}

// ----------------------------------------------------------------------------
// launchers

#define NV 3
static const char *const VERSIONS[NV + 1] = {
    "", "train_gpt.cu's kernels: warp per row, scalar loads; dw per 8 rows into a scratch, summed in a fixed order",
    "warp per row, row in registers, 128-bit loads/stores; backward: resident grid, dw in registers, one atomic per "
    "column per block",
    "forward v1; backward: 64 rows per block, 128-bit loads/stores, dw per warp in shared memory, summed in a fixed order"};

static int chunks_needed(int C) { return ceil_div(C / XVEC, 32); }
// forward v2: C <= 32*16*XVEC (8192 bf16); backward v2 keeps dw, x, dout and w per lane in
// registers: C <= 32*8*XVEC (2048 bf16, 1024 fp32), beyond that it would spill
static bool supported(int v, int C, bool backward) {
    if (v == 1 || (v == 3 && !backward)) return true;
    if (v == 3) return rmsnorm_backward_variant_for(2, C, NULL, NULL, NULL, NULL) == 2;
    return C % XVEC == 0 && chunks_needed(C) <= (backward ? 8 : 16);
}

template <int CH>
static void forward_v2(floatX *out, float *rstd, const floatX *x, const floatX *w, int N, int C, float eps) {
    rmsnorm_forward_kernel_packed<CH><<<ceil_div(N, 8), 256>>>(out, rstd, x, w, N, C, eps);
}
template <int CH>
static void backward_v2(floatX *dx, float *dw, const floatX *dout, const floatX *x, const floatX *w, const float *rstd,
                        int N, int C, int accumulate) {
    size_t smem = C * sizeof(float);
    static int per_sm = 0, per_sm_C = -1;  // cached: no host work between the benchmark's events
    if (per_sm_C != C) {
        cudaCheck(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, rmsnorm_backward_kernel_atomic<CH>, 256, smem));
        per_sm_C = C;
    }
    int grid = std::min(ceil_div(N, 8), std::max(per_sm, 1) * device_prop().multiProcessorCount);
    rmsnorm_backward_kernel_atomic<CH><<<grid, 256, smem>>>(dx, dw, dout, x, w, rstd, N, C, accumulate);
}

static void forward_run(int v, floatX *out, float *rstd, const floatX *x, const floatX *w, int N, int C, float eps) {
    if (v == 1 || v == 3) {
        rmsnorm_forward_kernel<<<ceil_div(N, 8), 256>>>(out, rstd, x, w, N, C, eps);  // LAUNCH_ROWS
    } else {
        int ch = chunks_needed(C);
        if (ch <= 1) forward_v2<1>(out, rstd, x, w, N, C, eps);
        else if (ch <= 2) forward_v2<2>(out, rstd, x, w, N, C, eps);
        else if (ch <= 4) forward_v2<4>(out, rstd, x, w, N, C, eps);
        else if (ch <= 8) forward_v2<8>(out, rstd, x, w, N, C, eps);
        else forward_v2<16>(out, rstd, x, w, N, C, eps);
    }
    cudaCheck(cudaGetLastError());
}

static float *dw_scratch(int N, int C) {  // the (ceil(N/8), C) dw partials (v1's; v3 needs fewer), grown as needed
    static float *p = NULL;
    static size_t cap = 0;
    size_t need = (size_t)ceil_div(N, 8) * C;
    if (need > cap) {
        if (p) cudaCheck(cudaFree(p));
        p = dalloc<float>(need);
        cap = need;
    }
    return p;
}

static void backward_run(int v, floatX *dx, float *dw, const floatX *dout, const floatX *x, const floatX *w,
                         const float *rstd, int N, int C, int accumulate) {
    if (v == 1 || v == 3) {
        rmsnorm_backward(dx, dw, dw_scratch(N, C), dout, x, w, rstd, N, C, accumulate, v == 3 ? 2 : 1);
    } else {
        int ch = chunks_needed(C);
        if (ch <= 1) backward_v2<1>(dx, dw, dout, x, w, rstd, N, C, accumulate);
        else if (ch <= 2) backward_v2<2>(dx, dw, dout, x, w, rstd, N, C, accumulate);
        else if (ch <= 4) backward_v2<4>(dx, dw, dout, x, w, rstd, N, C, accumulate);
        else backward_v2<8>(dx, dw, dout, x, w, rstd, N, C, accumulate);
    }
    cudaCheck(cudaGetLastError());
}

int main(int argc, char **argv) {
    Args args = parse_args(argc, argv, "rmsnorm", VERSIONS, NV);
    device_init(argv[0]);
    int first = args.version ? args.version : 1, last = args.version ? args.version : NV;
    Verdicts vd;
    memset(&vd, 0, sizeof(vd));
    const float eps = 1e-5f;

    const int cases[][2] = {{4099, 384}, {517, 448}, {301, 2048}};  // (N, C)
    Rng rng = rng_make(1337, 2);
    printf("validation (tolerance: norm rel %.0e for %s outputs, %.0e for fp32 rstd and dw)\n", FX_TOL,
           PRECISION_NAME, F32_TOL);
    for (const auto &cs : cases) {
        int N = cs[0], C = cs[1];
        size_t n = (size_t)N * C;
        std::vector<float> x(n), w(C), g(n), dx0(n), dw0(C);
        fill_normal(x, 0.0f, 1.0f, &rng);
        fill_normal(w, 1.0f, 0.1f, &rng);
        fill_normal(g, 0.0f, 1.0f, &rng);
        fill_normal(dx0, 0.0f, 1.0f, &rng);
        fill_normal(dw0, 0.0f, 1.0f, &rng);
        round_to_x(x);
        round_to_x(w);
        round_to_x(g);
        round_to_x(dx0);
        std::vector<float> out_ref(n), rstd_ref(N);
        rmsnorm_forward_cpu(out_ref.data(), rstd_ref.data(), x.data(), w.data(), N, C, eps);
        std::vector<float> dx_ref0(n), dw_ref0 = dw0, dx_ref1 = dx0, dw_ref1 = dw0;
        rmsnorm_backward_cpu(dx_ref0.data(), dw_ref0.data(), g.data(), x.data(), w.data(), rstd_ref.data(), N, C, 0);
        rmsnorm_backward_cpu(dx_ref1.data(), dw_ref1.data(), g.data(), x.data(), w.data(), rstd_ref.data(), N, C, 1);

        floatX *d_x = dalloc<floatX>(n), *d_w = dalloc<floatX>(C), *d_g = dalloc<floatX>(n), *d_out = dalloc<floatX>(n),
               *d_dx = dalloc<floatX>(n);
        float *d_rstd = dalloc<float>(N), *d_dw = dalloc<float>(C);
        upload_x(d_x, x);
        upload_x(d_w, w);
        upload_x(d_g, g);
        printf("  case N=%d C=%d\n", N, C);
        for (int v = first; v <= last; v++) {
            bool fwd = supported(v, C, false), bwd = supported(v, C, true);
            if (!fwd && !bwd) {
                printf("   v%d: not supported for C=%d\n", v, C);
                vd.skipped[v] = 1;
                continue;
            }
            printf("   v%d:%s\n", v, bwd ? "" : " (backward not supported for this C)");
            vd.ran[v] = 1;
            bool ok = true;
            if (fwd) {
                poison(d_out, n * sizeof(floatX));
                poison(d_rstd, N * sizeof(float));
                forward_run(v, d_out, d_rstd, d_x, d_w, N, C, eps);
                cudaCheck(cudaDeviceSynchronize());
                ok &= check_close("fwd out", download_x(d_out, n), out_ref, FX_TOL);
                ok &= check_close("fwd rstd", download_f(d_rstd, N), rstd_ref, F32_TOL);
            }
            // backward reads the reference rstd, so forward and backward are judged separately
            upload_f(d_rstd, rstd_ref);
            for (int acc = 0; bwd && acc <= 1; acc++) {
                if (acc) upload_x(d_dx, dx0);
                else poison(d_dx, n * sizeof(floatX));
                upload_f(d_dw, dw0);
                backward_run(v, d_dx, d_dw, d_g, d_x, d_w, d_rstd, N, C, acc);
                cudaCheck(cudaDeviceSynchronize());
                if (v != 2) ok &= ran_variant(VF_RMSNORM_BWD, v == 3 ? 2 : 1);  // the header's variant, as named
                ok &= check_close(acc ? "bwd dx (acc)" : "bwd dx", download_x(d_dx, n), acc ? dx_ref1 : dx_ref0, FX_TOL);
                std::vector<float> dw_got = download_f(d_dw, C);
                ok &= check_close(acc ? "bwd dw (acc)" : "bwd dw", dw_got, acc ? dw_ref1 : dw_ref0, F32_TOL);
                if (v != 2 && acc) {  // deterministic: a second run gives the same bits
                    upload_x(d_dx, dx0);
                    upload_f(d_dw, dw0);
                    backward_run(v, d_dx, d_dw, d_g, d_x, d_w, d_rstd, N, C, acc);
                    bool same = memcmp(download_f(d_dw, C).data(), dw_got.data(), C * sizeof(float)) == 0;
                    printf("    %-14s %s\n", "dw rerun", same ? "bit-identical ok" : "differs BAD");
                    ok &= same;
                }
            }
            if (!ok) vd.failed[v] = 1;
        }
        cudaCheck(cudaFree(d_x));
        cudaCheck(cudaFree(d_w));
        cudaCheck(cudaFree(d_g));
        cudaCheck(cudaFree(d_out));
        cudaCheck(cudaFree(d_dx));
        cudaCheck(cudaFree(d_rstd));
        cudaCheck(cudaFree(d_dw));
    }
    for (int v = first; v <= last; v++) verdict_print("rmsnorm", v, &vd);

    if (args.bench) {
        int N = 16 * 2048, C = 384;
        size_t n = (size_t)N * C;
        printf("benchmark: N=%d rows (B=16 x T=2048), C=%d, median of 50 runs, L2 flushed\n", N, C);
        measured_copy_gbps();
        std::vector<float> h(n), hw(C);
        fill_normal(h, 0.0f, 1.0f, &rng);
        fill_normal(hw, 1.0f, 0.1f, &rng);
        floatX *d_x = dalloc<floatX>(n), *d_w = dalloc<floatX>(C), *d_g = dalloc<floatX>(n), *d_out = dalloc<floatX>(n),
               *d_dx = dalloc<floatX>(n), *d_dx0 = dalloc<floatX>(n);
        float *d_rstd = dalloc<float>(N), *d_dw = dalloc<float>(C);
        upload_x(d_x, h);
        upload_x(d_g, h);
        upload_x(d_dx0, h);
        upload_x(d_w, hw);
        cudaCheck(cudaMemset(d_dw, 0, C * sizeof(float)));
        forward_run(1, d_out, d_rstd, d_x, d_w, N, C, eps);  // a real rstd for the backward
        double fwd_bytes = 2.0 * n * sizeof(floatX) + N * sizeof(float);      // x in, out, rstd
        double bwd_bytes = 4.0 * n * sizeof(floatX) + N * sizeof(float);      // dout, x, dx in; dx out; rstd
        for (int v = first; v <= last; v++) {
            if (vd.failed[v] || !supported(v, C, false)) continue;
            float us = bench_us([&] { forward_run(v, d_out, d_rstd, d_x, d_w, N, C, eps); });
            report_bandwidth("rmsnorm", v, " forward", us, fwd_bytes);
        }
        cudaCheck(cudaDeviceSynchronize());
        for (int v = first; v <= last; v++) {
            if (vd.failed[v] || !supported(v, C, true)) continue;
            float us = bench_us([&] { backward_run(v, d_dx, d_dw, d_g, d_x, d_w, d_rstd, N, C, 1); },
                                [&] {  // dx accumulates: restore it (untimed)
                                    cudaCheck(cudaMemcpyAsync(d_dx, d_dx0, n * sizeof(floatX), cudaMemcpyDeviceToDevice));
                                });
            report_bandwidth("rmsnorm", v, " backward (accumulate)", us, bwd_bytes);
        }
        cudaCheck(cudaFree(d_x));
        cudaCheck(cudaFree(d_w));
        cudaCheck(cudaFree(d_g));
        cudaCheck(cudaFree(d_out));
        cudaCheck(cudaFree(d_dx));
        cudaCheck(cudaFree(d_dx0));
        cudaCheck(cudaFree(d_rstd));
        cudaCheck(cudaFree(d_dw));
    }
    return verdict_exit("rmsnorm", first, last, &vd);
}
