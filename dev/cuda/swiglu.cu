// dev/cuda/swiglu.cu: SwiGLU, elementwise over gate, up (N,F):
//   forward:  h = silu(g) * up, silu(g) = g * sigmoid(g)
//   backward: dgate = dh * up * sig(g) * (1 + g (1 - sig(g))), dup = dh * silu(g)
//
//   v1  one element per thread, scalar loads/stores
//   v2  one 128-bit pack (bf16x8 / float4) per thread and tensor; a scalar tail when n is
//       not a multiple of the pack
//   v3  four packs per thread, spaced a block apart (coalesced), every load issued before
//       any math: more bytes in flight per thread
// All three live in llmc/cuda/swiglu.cuh; nothing here is a copy.
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
// the versions: llmc/cuda/swiglu.cuh's variants (SWIGLU_VARIANT is the trainer's), launched
// by its swiglu_forward / swiglu_backward

#define NV 3
static const char *const VERSIONS[NV + 1] = {
    "", "one element per thread, scalar loads/stores",
    "one 128-bit pack (bf16x8 / float4) per thread and tensor, scalar tail",
    "four 128-bit packs per thread, all loads issued before the math"};

static void forward_run(int v, floatX *h, const floatX *gate, const floatX *up, size_t n) {
    swiglu_forward(h, gate, up, n, v);
}
static void backward_run(int v, floatX *dgate, floatX *dup, const floatX *dh, const floatX *gate, const floatX *up,
                         size_t n) {
    swiglu_backward(dgate, dup, dh, gate, up, n, v);
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
            ok &= ran_variant(VF_SWIGLU, v);
            backward_run(v, d_dg, d_du, d_dh, d_g, d_u, n);
            ok &= ran_variant(VF_SWIGLU, v);
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
        if (!aligned128(d_g, d_u, d_h, d_dg, d_du)) printf("warning: buffers not 16-byte aligned (v2, v3 run as v1)\n");
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
