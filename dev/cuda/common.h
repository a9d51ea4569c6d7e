// dev/cuda/common.h: what every kernel-variant file shares.
//   - the trainer's own CUDA headers: llmc/cuda/cuda_common.cuh (floatX: bf16 by default,
//     fp32 with -DENABLE_FP32; cudaCheck / cublasCheck; the cuBLAS handle) and
//     cuda_utils.cuh; each file includes the trainer's kernels from llmc/cuda/ as its v1
//     (or its flash versions): one source, nothing copied
//   - device_init() (a clear "error: no CUDA device" without a GPU)
//   - the command line: [VERSION] [--no-bench]
//   - host data: fixed-seed random inputs (the project's Rng, llmc/rng.h), rounding to
//     floatX so the CPU reference sees exactly the device's inputs, upload/download
//   - poison(): fill an output buffer with NaN before a kernel runs, so a kernel that
//     skips elements fails validation
//   - check_close(): max abs / max rel / norm-relative error against the CPU reference
//   - bench_us(): cudaEvent timing, L2 flushed before every run, MEDIAN of the runs
//   - device ceilings measured in the same run: device-to-device cudaMemcpy bandwidth
//     (GB/s, read + write) and a cuBLAS 8192^3 GEMM in floatX (TFLOP/s)
// Exit codes of every binary: 0 all selected versions PASS, 1 a version FAILED
// validation (or a CUDA error), 2 could not run (no CUDA device, bad arguments).
#pragma once
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <vector>
#include "../../llmc/cuda/cuda_common.cuh"
#include "../../llmc/cuda/cuda_utils.cuh"
#include "../../llmc/rng.h"

#define EXIT_VALIDATION_FAILED 1
#define EXIT_CANNOT_RUN 2

#ifdef ENABLE_FP32
#define FX_TOL 1e-5  // norm-relative tolerance for floatX outputs
#else
#define FX_TOL 1e-2
#endif
#define F32_TOL 1e-5  // norm-relative tolerance for fp32 outputs (rstd, losses, AdamW state)

static inline floatX host_to_x(float v) {
#ifdef ENABLE_FP32
    return v;
#else
    return __float2bfloat16(v);
#endif
}
static inline float host_to_f(floatX v) {
#ifdef ENABLE_FP32
    return v;
#else
    return __bfloat162float(v);
#endif
}

// ----------------------------------------------------------------------------
// command line and device

typedef struct {
    int version;  // 0: every version
    int bench;    // 0 with --no-bench: validation only
} Args;

// versions[1..n] describe the versions (versions[0] unused)
static inline Args parse_args(int argc, char **argv, const char *kernel, const char *const *versions, int n) {
    Args a = {0, 1};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--no-bench") == 0) {
            a.bench = 0;
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            printf("usage: %s [VERSION] [--no-bench]\n"
                   "validates each %s version against the CPU reference (PASS/FAIL), then benchmarks it.\n"
                   "VERSION 1..%d runs one version (default: all). Exit 0: all PASS, 1: a FAIL, 2: cannot run.\n",
                   argv[0], kernel, n);
            for (int v = 1; v <= n; v++) printf("  %d  %s\n", v, versions[v]);
            exit(0);
        } else {
            char *end = NULL;
            long v = strtol(argv[i], &end, 10);
            if (!argv[i][0] || *end || v < 1 || v > n) {
                fprintf(stderr, "error: unknown argument '%s' (usage: %s [VERSION 1..%d] [--no-bench])\n", argv[i],
                        argv[0], n);
                exit(EXIT_CANNOT_RUN);
            }
            a.version = (int)v;
        }
    }
    return a;
}

static inline cudaDeviceProp &device_prop(void) {
    static cudaDeviceProp prop;
    return prop;
}

// Call after parse_args and before any other CUDA call.
static inline void device_init(const char *prog) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        fprintf(stderr, "error: no CUDA device (%s); %s needs an NVIDIA GPU\n",
                e != cudaSuccess ? cudaGetErrorString(e) : "0 devices found", prog);
        exit(EXIT_CANNOT_RUN);
    }
    cudaCheck(cudaSetDevice(0));
    cudaDeviceProp &p = device_prop();
    cudaCheck(cudaGetDeviceProperties(&p, 0));
    printf("device: %s (sm_%d%d, %d SMs, %.0f GiB, L2 %.0f MiB) | floatX %s\n", p.name, p.major, p.minor,
           p.multiProcessorCount, p.totalGlobalMem / 1073741824.0, p.l2CacheSize / 1048576.0, PRECISION_NAME);
}

static inline cublasHandle_t get_cublas(void) {
    static cublasHandle_t h = NULL;
    if (!h) cublasCheck(cublasCreate(&h));
    return h;
}

// ----------------------------------------------------------------------------
// host data

static inline void fill_normal(std::vector<float> &v, float mean, float std, Rng *r) {
    for (float &x : v) x = mean + std * rng_normal(r);
}
static inline void fill_uniform(std::vector<float> &v, float lo, float hi, Rng *r) {
    for (float &x : v) x = lo + (hi - lo) * rng_f32(r);
}
// round in place to what floatX can hold, so the CPU reference reads the device's inputs
static inline void round_to_x(std::vector<float> &v) {
    for (float &x : v) x = host_to_f(host_to_x(x));
}

template <class T>
static inline T *dalloc(size_t n) {
    T *p = NULL;
    cudaCheck(cudaMalloc((void **)&p, (n ? n : 1) * sizeof(T)));
    return p;
}
static inline void upload_x(floatX *d, const std::vector<float> &h) {
    std::vector<floatX> t(h.size());
    for (size_t i = 0; i < h.size(); i++) t[i] = host_to_x(h[i]);
    cudaCheck(cudaMemcpy(d, t.data(), t.size() * sizeof(floatX), cudaMemcpyHostToDevice));
}
static inline void upload_f(float *d, const std::vector<float> &h) {
    cudaCheck(cudaMemcpy(d, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice));
}
static inline std::vector<float> download_x(const floatX *d, size_t n) {
    std::vector<floatX> t(n);
    cudaCheck(cudaMemcpy(t.data(), d, n * sizeof(floatX), cudaMemcpyDeviceToHost));
    std::vector<float> h(n);
    for (size_t i = 0; i < n; i++) h[i] = host_to_f(t[i]);
    return h;
}
static inline std::vector<float> download_f(const float *d, size_t n) {
    std::vector<float> h(n);
    cudaCheck(cudaMemcpy(h.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost));
    return h;
}

// All bytes 0xFF: NaN as fp32 (0xFFFFFFFF) and as bf16 (0xFFFF).
static inline void poison(void *d, size_t bytes) { cudaCheck(cudaMemset(d, 0xFF, bytes)); }

// ----------------------------------------------------------------------------
// validation. Prints max abs error, max rel error (elementwise |got-ref| / (|ref| + rms(ref)),
// so elements near zero are judged against the tensor's scale) and the norm-relative
// error ||got-ref|| / ||ref|| (as test_gpt.c). PASS: every element finite, norm rel <= tol,
// max rel <= 8 tol.
static inline bool check_close(const char *what, const float *got, const float *ref, size_t n, double tol) {
    double sr = 0.0;
    for (size_t i = 0; i < n; i++) sr += (double)ref[i] * ref[i];
    double rms = n ? sqrt(sr / n) : 0.0;
    double se = 0.0, maxabs = 0.0, maxrel = 0.0;
    size_t nonfinite = 0, worst = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i])) {
            if (nonfinite++ == 0) worst = i;
            continue;
        }
        double d = fabs((double)got[i] - ref[i]);
        se += d * d;
        double rel = d / (fabs((double)ref[i]) + rms + 1e-30);
        if (d > maxabs) maxabs = d;
        if (rel > maxrel) {
            maxrel = rel;
            if (!nonfinite) worst = i;
        }
    }
    double normrel = sr > 0 ? sqrt(se / sr) : sqrt(se);
    bool ok = nonfinite == 0 && normrel <= tol && maxrel <= 8 * tol;
    printf("    %-14s n=%-10zu max abs %.2e  max rel %.2e  norm rel %.2e  (tol %.0e) %s\n", what, n, maxabs, maxrel,
           normrel, tol, ok ? "ok" : "BAD");
    if (nonfinite) printf("      %zu non-finite values (first at %zu): an element skipped or a NaN computed\n", nonfinite, worst);
    if (!ok && n) printf("      worst element %zu: got %.8g, ref %.8g\n", worst, got[worst], ref[worst]);
    return ok;
}
static inline bool check_close(const char *what, const std::vector<float> &got, const std::vector<float> &ref,
                               double tol) {
    if (got.size() != ref.size()) {
        printf("    %-14s size mismatch %zu vs %zu BAD\n", what, got.size(), ref.size());
        return false;
    }
    return check_close(what, got.data(), ref.data(), got.size(), tol);
}

// per-version verdicts
typedef struct {
    int ran[16], failed[16], skipped[16];
} Verdicts;
static inline void verdict_print(const char *kernel, int v, const Verdicts *vd) {
    if (vd->skipped[v] && !vd->ran[v])
        printf("%s v%d: SKIPPED (not supported for these shapes/precision)\n", kernel, v);
    else
        printf("%s v%d: %s\n", kernel, v, vd->failed[v] ? "FAIL" : "PASS");
}
// Whether the launch just made through a header's launcher (family f of
// llmc/cuda/variants.cuh) ran its variant v; a BAD line with the reason when it fell back, so
// a version is never judged or timed as a variant it did not run
static inline bool ran_variant(int f, int v) {
    const VariantUse *u = &variant_uses()[f];
    if (u->last == v) return true;
    printf("    ran %s v%d, not v%d: %s BAD\n", u->name, u->last, v, u->last_why ? u->last_why : "a lower variant asked for");
    return false;
}
static inline int verdict_exit(const char *kernel, int first, int last, const Verdicts *vd) {
    int nf = 0;
    for (int v = first; v <= last; v++) nf += vd->failed[v] ? 1 : 0;
    if (nf) printf("%s: %d version(s) FAILED\n", kernel, nf);
    else printf("%s: all selected versions PASS\n", kernel);
    return nf ? EXIT_VALIDATION_FAILED : 0;
}

// ----------------------------------------------------------------------------
// timing: every run is preceded by reset() (untimed: restores inputs of in-place kernels)
// and an L2 flush (untimed), then timed alone between two cudaEvents. Returns the median
// in microseconds.

static inline void flush_l2(void) {
    static void *buf = NULL;
    static size_t bytes = 0;
    if (!buf) {
        bytes = 2 * (size_t)std::max(device_prop().l2CacheSize, 1 << 20);
        cudaCheck(cudaMalloc(&buf, bytes));
    }
    cudaCheck(cudaMemsetAsync(buf, 0, bytes));
}

static inline float median_of(std::vector<float> t) {
    std::sort(t.begin(), t.end());
    size_t n = t.size();
    if (!n) return 0.0f;
    return n % 2 ? t[n / 2] : 0.5f * (t[n / 2 - 1] + t[n / 2]);
}

template <class Launch, class Reset>
static float bench_us(Launch &&launch, Reset &&reset, int warmup = 5, int reps = 50) {
    cudaEvent_t e0, e1;
    cudaCheck(cudaEventCreate(&e0));
    cudaCheck(cudaEventCreate(&e1));
    std::vector<float> times;
    for (int i = 0; i < warmup + reps; i++) {
        reset();
        flush_l2();
        cudaCheck(cudaEventRecord(e0));
        launch();
        cudaCheck(cudaEventRecord(e1));
        cudaCheck(cudaEventSynchronize(e1));
        cudaCheck(cudaGetLastError());
        float ms = 0.0f;
        cudaCheck(cudaEventElapsedTime(&ms, e0, e1));
        if (i >= warmup) times.push_back(ms * 1000.0f);
    }
    cudaCheck(cudaEventDestroy(e0));
    cudaCheck(cudaEventDestroy(e1));
    return median_of(times);
}
template <class Launch>
static float bench_us(Launch &&launch, int warmup = 5, int reps = 50) {
    return bench_us(launch, [] {}, warmup, reps);
}

// ----------------------------------------------------------------------------
// device ceilings, measured once per process

// device-to-device cudaMemcpy of 1 GiB (far above L2): GB/s counting bytes read + written
static inline double measured_copy_gbps(void) {
    static double gbps = 0.0;
    if (gbps > 0.0) return gbps;
    size_t bytes = std::min((size_t)1 << 30, (size_t)(device_prop().totalGlobalMem / 8));
    void *src = NULL, *dst = NULL;
    cudaCheck(cudaMalloc(&src, bytes));
    cudaCheck(cudaMalloc(&dst, bytes));
    cudaCheck(cudaMemset(src, 1, bytes));
    float us = bench_us([&] { cudaCheck(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice)); }, 3, 20);
    cudaCheck(cudaFree(src));
    cudaCheck(cudaFree(dst));
    gbps = 2.0 * bytes / (us * 1e-6) / 1e9;
    printf("ceiling: cudaMemcpy device-to-device, %zu MiB: %.1f us, %.0f GB/s (read + write, median of 20)\n",
           bytes >> 20, us, gbps);
    return gbps;
}

__global__ void fill_hash_kernel(floatX *x, size_t n, uint32_t seed) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    uint32_t h = (uint32_t)i * 2654435761u ^ seed;
    h ^= h >> 16;
    h *= 0x7feb352du;
    h ^= h >> 15;
    x[i] = to_x((float)(h & 0xFFFF) / 32768.0f - 1.0f);  // uniform in [-1, 1): realistic power draw
}

// cuBLAS GEMM 8192^3 in floatX with fp32 accumulation (tensor cores for bf16): TFLOP/s
static inline double measured_gemm_tflops(void) {
    static double tflops = 0.0;
    if (tflops > 0.0) return tflops;
    const int n = 8192;
    size_t e = (size_t)n * n;
    floatX *A = dalloc<floatX>(e), *B = dalloc<floatX>(e), *C = dalloc<floatX>(e);
    fill_hash_kernel<<<ceil_div(e, 256), 256>>>(A, e, 1u);
    fill_hash_kernel<<<ceil_div(e, 256), 256>>>(B, e, 2u);
    cudaCheck(cudaGetLastError());
    cublasHandle_t h = get_cublas();
    const float one = 1.0f, zero = 0.0f;
    float us = bench_us(
        [&] {
            cublasCheck(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, A, CUDA_FX, n, B, CUDA_FX, n, &zero, C,
                                     CUDA_FX, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        },
        3, 10);
    cudaCheck(cudaFree(A));
    cudaCheck(cudaFree(B));
    cudaCheck(cudaFree(C));
    tflops = 2.0 * n * (double)n * n / (us * 1e-6) / 1e12;
    printf("ceiling: cuBLAS %s GEMM %d^3 (fp32 accumulation): %.1f us, %.1f TFLOP/s (median of 10)\n", PRECISION_NAME, n,
           us, tflops);
    return tflops;
}

// "rope v2: 41.2 us, 2850 GB/s, 0.72 of measured copy bandwidth"
static inline void report_bandwidth(const char *kernel, int v, const char *label, float us, double bytes) {
    double gbps = bytes / (us * 1e-6) / 1e9;
    printf("%s v%d%s: %.1f us, %.0f GB/s, %.2f of measured copy bandwidth\n", kernel, v, label, us, gbps,
           gbps / measured_copy_gbps());
}
static inline void report_tflops(const char *kernel, int v, const char *label, float us, double flops) {
    double tf = flops / (us * 1e-6) / 1e12;
    printf("%s v%d%s: %.1f us, %.2f TFLOP/s, %.3f of measured cuBLAS %s GEMM\n", kernel, v, label, us, tf,
           tf / measured_gemm_tflops(), PRECISION_NAME);
}
// report_tflops of a version that runs variant `variant` of a header's family f (0: none),
// the variant it ran beside the numbers; false (ran_variant's BAD line instead: the version
// fails) when the launcher ran another
static inline bool report_tflops_ran(const char *kernel, int v, int f, int variant, float us, double flops) {
    char ran[64] = "";
    if (variant) {
        if (!ran_variant(f, variant)) return false;
        snprintf(ran, sizeof(ran), " (ran %s v%d)", variant_uses()[f].name, variant);
    }
    report_tflops(kernel, v, ran, us, flops);
    return true;
}
