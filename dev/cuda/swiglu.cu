// dev/cuda/swiglu.cu: SwiGLU, elementwise over gate, up (N,F):
//   forward:  h = silu(g) * up, silu(g) = g * sigmoid(g)
//   backward: dgate = dh * up * sig(g) * (1 + g (1 - sig(g))), dup = dh * silu(g)
//
//   v1  train_gpt.cu's kernels: one element per thread, scalar loads/stores
//   v2  one 128-bit pack (bf16x8 / float4) per thread and tensor; a scalar tail when n is
//       not a multiple of the pack
//   v3  four packs per thread, spaced a block apart (coalesced), every load issued before
//       any math: more bytes in flight per thread
//
// Validation on random inputs (plus saturated gates, |g| up to 100) against the CPU
// reference (swiglu_forward/backward of train_gpt_cpu.c), outputs poisoned with NaN first;
// one size with a tail (n % 8 != 0).
// Benchmark: N*F = 16*2048 x 1024 (the 10M preset's MLP).
//
// usage: ./swiglu_bin [VERSION] [--no-bench]
#include "common.h"
#include "../../llmc/cuda/swiglu.cuh"

// ----------------------------------------------------------------------------
// CPU reference (train_gpt_cpu.c)
static void swiglu_forward_cpu(float *h, const float *gate, const float *up, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float g = gate[i];
        h[i] = g / (1.0f + expf(-g)) * up[i];
    }
}
static void swiglu_backward_cpu(float *dgate, float *dup, const float *dh, const float *gate, const float *up,
                                size_t n) {
    for (size_t i = 0; i < n; i++) {
        float g = gate[i], sg = 1.0f / (1.0f + expf(-g));
        dgate[i] = dh[i] * up[i] * sg * (1.0f + g * (1.0f - sg));
        dup[i] = dh[i] * g * sg;
    }
}

// ----------------------------------------------------------------------------
// v1: the trainer's own kernels (llmc/cuda/, included above)

// ----------------------------------------------------------------------------
// the math of one element, shared by v2 and v3 (the same expressions as v1)
__device__ __forceinline__ float silu_mul(float g, float u) { return g / (1.0f + expf(-g)) * u; }
__device__ __forceinline__ void swiglu_grad(float d, float g, float u, float *dg, float *du) {
    float sg = 1.0f / (1.0f + expf(-g));
    *dg = d * u * sg * (1.0f + g * (1.0f - sg));
    *du = d * g * sg;
}

// v2: one pack per thread. Packs [0, n/XVEC) vectorized; the thread of pack n/XVEC does the tail.
__global__ void swiglu_forward_kernel_v2(floatX *h, const floatX *gate, const floatX *up, size_t n) {
    size_t p = (size_t)blockIdx.x * blockDim.x + threadIdx.x, np = n / XVEC;
    if (p < np) {
        Pack128<floatX> g = load128(gate + p * XVEC), u = load128(up + p * XVEC), o;
#pragma unroll
        for (int k = 0; k < XVEC; k++) o.v[k] = to_x(silu_mul(to_f(g.v[k]), to_f(u.v[k])));
        store128(h + p * XVEC, o);
    } else if (p == np) {
        for (size_t i = np * XVEC; i < n; i++) h[i] = to_x(silu_mul(to_f(gate[i]), to_f(up[i])));
    }
}

__global__ void swiglu_backward_kernel_v2(floatX *dgate, floatX *dup, const floatX *dh, const floatX *gate,
                                          const floatX *up, size_t n) {
    size_t p = (size_t)blockIdx.x * blockDim.x + threadIdx.x, np = n / XVEC;
    if (p < np) {
        Pack128<floatX> d = load128(dh + p * XVEC), g = load128(gate + p * XVEC), u = load128(up + p * XVEC), og, ou;
#pragma unroll
        for (int k = 0; k < XVEC; k++) {
            float a, b;
            swiglu_grad(to_f(d.v[k]), to_f(g.v[k]), to_f(u.v[k]), &a, &b);
            og.v[k] = to_x(a);
            ou.v[k] = to_x(b);
        }
        store128(dgate + p * XVEC, og);
        store128(dup + p * XVEC, ou);
    } else if (p == np) {
        for (size_t i = np * XVEC; i < n; i++) {
            float a, b;
            swiglu_grad(to_f(dh[i]), to_f(gate[i]), to_f(up[i]), &a, &b);
            dgate[i] = to_x(a);
            dup[i] = to_x(b);
        }
    }
}

// v3: U packs per thread: block b covers packs [b*U*blockDim, (b+1)*U*blockDim), pack
// base + u*blockDim + threadIdx.x; loads first, then math and stores.
#define SWIGLU_U 4
__global__ void swiglu_forward_kernel_v3(floatX *h, const floatX *gate, const floatX *up, size_t n) {
    size_t np = n / XVEC, base = (size_t)blockIdx.x * blockDim.x * SWIGLU_U + threadIdx.x;
    Pack128<floatX> g[SWIGLU_U], u[SWIGLU_U];
#pragma unroll
    for (int j = 0; j < SWIGLU_U; j++) {
        size_t p = base + (size_t)j * blockDim.x;
        if (p < np) {
            g[j] = load128(gate + p * XVEC);
            u[j] = load128(up + p * XVEC);
        }
    }
#pragma unroll
    for (int j = 0; j < SWIGLU_U; j++) {
        size_t p = base + (size_t)j * blockDim.x;
        if (p < np) {
            Pack128<floatX> o;
#pragma unroll
            for (int k = 0; k < XVEC; k++) o.v[k] = to_x(silu_mul(to_f(g[j].v[k]), to_f(u[j].v[k])));
            store128(h + p * XVEC, o);
        } else if (p == np) {
            for (size_t i = np * XVEC; i < n; i++) h[i] = to_x(silu_mul(to_f(gate[i]), to_f(up[i])));
        }
    }
}

__global__ void swiglu_backward_kernel_v3(floatX *dgate, floatX *dup, const floatX *dh, const floatX *gate,
                                          const floatX *up, size_t n) {
    size_t np = n / XVEC, base = (size_t)blockIdx.x * blockDim.x * SWIGLU_U + threadIdx.x;
    Pack128<floatX> d[SWIGLU_U], g[SWIGLU_U], u[SWIGLU_U];
#pragma unroll
    for (int j = 0; j < SWIGLU_U; j++) {
        size_t p = base + (size_t)j * blockDim.x;
        if (p < np) {
            d[j] = load128(dh + p * XVEC);
            g[j] = load128(gate + p * XVEC);
            u[j] = load128(up + p * XVEC);
        }
    }
#pragma unroll
    for (int j = 0; j < SWIGLU_U; j++) {
        size_t p = base + (size_t)j * blockDim.x;
        if (p < np) {
            Pack128<floatX> og, ou;
#pragma unroll
            for (int k = 0; k < XVEC; k++) {
                float a, b;
                swiglu_grad(to_f(d[j].v[k]), to_f(g[j].v[k]), to_f(u[j].v[k]), &a, &b);
                og.v[k] = to_x(a);
                ou.v[k] = to_x(b);
            }
            store128(dgate + p * XVEC, og);
            store128(dup + p * XVEC, ou);
        } else if (p == np) {
            for (size_t i = np * XVEC; i < n; i++) {
                float a, b;
                swiglu_grad(to_f(dh[i]), to_f(gate[i]), to_f(up[i]), &a, &b);
                dgate[i] = to_x(a);
                dup[i] = to_x(b);
            }
        }
    }
}

// ----------------------------------------------------------------------------
// launchers

#define NV 3
static const char *const VERSIONS[NV + 1] = {
    "", "train_gpt.cu's kernels: one element per thread, scalar loads/stores",
    "one 128-bit pack (bf16x8 / float4) per thread and tensor, scalar tail",
    "four 128-bit packs per thread, all loads issued before the math"};

static bool aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

static void forward_run(int v, floatX *h, const floatX *gate, const floatX *up, size_t n) {
    size_t packs = n / XVEC + 1;  // + the tail thread
    if (v == 1) swiglu_forward_kernel<<<ceil_div(n, 256), 256>>>(h, gate, up, n);  // LAUNCH_ELEMS
    else if (v == 2) swiglu_forward_kernel_v2<<<ceil_div(packs, 256), 256>>>(h, gate, up, n);
    else swiglu_forward_kernel_v3<<<ceil_div(packs, 256 * SWIGLU_U), 256>>>(h, gate, up, n);
    cudaCheck(cudaGetLastError());
}
static void backward_run(int v, floatX *dgate, floatX *dup, const floatX *dh, const floatX *gate, const floatX *up,
                         size_t n) {
    size_t packs = n / XVEC + 1;
    if (v == 1) swiglu_backward_kernel<<<ceil_div(n, 256), 256>>>(dgate, dup, dh, gate, up, n);
    else if (v == 2) swiglu_backward_kernel_v2<<<ceil_div(packs, 256), 256>>>(dgate, dup, dh, gate, up, n);
    else swiglu_backward_kernel_v3<<<ceil_div(packs, 256 * SWIGLU_U), 256>>>(dgate, dup, dh, gate, up, n);
    cudaCheck(cudaGetLastError());
}

int main(int argc, char **argv) {
    Args args = parse_args(argc, argv, "swiglu", VERSIONS, NV);
    device_init(argv[0]);
    int first = args.version ? args.version : 1, last = args.version ? args.version : NV;
    Verdicts vd;
    memset(&vd, 0, sizeof(vd));

    const size_t sizes[] = {(size_t)4 * 2048 * 1024, 1000003};
    Rng rng = rng_make(1337, 3);
    printf("validation (tolerance: norm rel %.0e for %s outputs)\n", FX_TOL, PRECISION_NAME);
    for (size_t n : sizes) {
        std::vector<float> g(n), u(n), dh(n);
        fill_normal(g, 0.0f, 2.0f, &rng);
        fill_normal(u, 0.0f, 1.0f, &rng);
        fill_normal(dh, 0.0f, 1.0f, &rng);
        const float extremes[] = {-100.0f, -88.0f, -20.0f, 20.0f, 88.0f, 100.0f};  // saturated sigmoid
        for (int i = 0; i < 6; i++) g[i * 7919 % n] = extremes[i];
        round_to_x(g);
        round_to_x(u);
        round_to_x(dh);
        std::vector<float> h_ref(n), dg_ref(n), du_ref(n);
        swiglu_forward_cpu(h_ref.data(), g.data(), u.data(), n);
        swiglu_backward_cpu(dg_ref.data(), du_ref.data(), dh.data(), g.data(), u.data(), n);
        floatX *d_g = dalloc<floatX>(n), *d_u = dalloc<floatX>(n), *d_dh = dalloc<floatX>(n), *d_h = dalloc<floatX>(n),
               *d_dg = dalloc<floatX>(n), *d_du = dalloc<floatX>(n);
        upload_x(d_g, g);
        upload_x(d_u, u);
        upload_x(d_dh, dh);
        printf("  case n=%zu (n %% %d = %zu)\n", n, XVEC, n % XVEC);
        for (int v = first; v <= last; v++) {
            printf("   v%d:\n", v);
            vd.ran[v] = 1;
            bool ok = true;
            poison(d_h, n * sizeof(floatX));
            poison(d_dg, n * sizeof(floatX));
            poison(d_du, n * sizeof(floatX));
            forward_run(v, d_h, d_g, d_u, n);
            backward_run(v, d_dg, d_du, d_dh, d_g, d_u, n);
            cudaCheck(cudaDeviceSynchronize());
            ok &= check_close("fwd h", download_x(d_h, n), h_ref, FX_TOL);
            ok &= check_close("bwd dgate", download_x(d_dg, n), dg_ref, FX_TOL);
            ok &= check_close("bwd dup", download_x(d_du, n), du_ref, FX_TOL);
            if (!ok) vd.failed[v] = 1;
        }
        cudaCheck(cudaFree(d_g));
        cudaCheck(cudaFree(d_u));
        cudaCheck(cudaFree(d_dh));
        cudaCheck(cudaFree(d_h));
        cudaCheck(cudaFree(d_dg));
        cudaCheck(cudaFree(d_du));
    }
    for (int v = first; v <= last; v++) verdict_print("swiglu", v, &vd);

    if (args.bench) {
        size_t n = (size_t)16 * 2048 * 1024;
        printf("benchmark: n = N*F = %zu (B=16 T=2048 F=1024), median of 50 runs, L2 flushed\n", n);
        measured_copy_gbps();
        std::vector<float> hst(n);
        fill_normal(hst, 0.0f, 1.0f, &rng);
        floatX *d_g = dalloc<floatX>(n), *d_u = dalloc<floatX>(n), *d_dh = dalloc<floatX>(n), *d_h = dalloc<floatX>(n),
               *d_dg = dalloc<floatX>(n), *d_du = dalloc<floatX>(n);
        upload_x(d_g, hst);
        upload_x(d_u, hst);
        upload_x(d_dh, hst);
        if (!aligned16(d_g) || !aligned16(d_h)) printf("warning: buffers not 16-byte aligned\n");
        for (int v = first; v <= last; v++) {
            if (vd.failed[v]) continue;
            float us = bench_us([&] { forward_run(v, d_h, d_g, d_u, n); });
            report_bandwidth("swiglu", v, " forward", us, 3.0 * n * sizeof(floatX));
        }
        for (int v = first; v <= last; v++) {
            if (vd.failed[v]) continue;
            float us = bench_us([&] { backward_run(v, d_dg, d_du, d_dh, d_g, d_u, n); });
            report_bandwidth("swiglu", v, " backward", us, 5.0 * n * sizeof(floatX));
        }
        cudaCheck(cudaFree(d_g));
        cudaCheck(cudaFree(d_u));
        cudaCheck(cudaFree(d_dh));
        cudaCheck(cudaFree(d_h));
        cudaCheck(cudaFree(d_dg));
        cudaCheck(cudaFree(d_du));
    }
    return verdict_exit("swiglu", first, last, &vd);
}
