// dev/cuda/adamw.cu: the AdamW update over the model's parameters, one flat fp32 buffer
// holding the NP tensors back to back (master weights p, gradients g, moments m and v),
// plus the compute copy px = floatX(p) (aliases p in the fp32 build). The global-norm
// clip is folded in as grad_scale; weight decay only on matrices (PARAM_DECAY).
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;  p -= lr ((m/bc1) / (sqrt(v/bc2) + eps) + wd p)
//
//   v1  the header's variant 1: one element per thread, one launch per tensor
//   v2  the header's variant 2, the trainer's: one launch over the whole buffer, the
//       tensors' ends, decays and bounds in a table in the kernel's parameters; 128-bit
//       loads/stores of p, g, m, v; the same per-element code as v1 (adamw_at: the same bits)
//
// Validation on random state against the CPU reference (adamw_update of train_gpt_cpu.c
// after the clip's scaling), px poisoned with NaN first: the tiny preset's layout and an
// odd layout (tensor sizes not multiples of 4, total not a multiple of 4).
// Benchmark: the 10M preset's parameters (V=50277 padded 50304, C=384, L=6, F=1024).
//
// usage: ./adamw_bin [VERSION] [--no-bench]
#include "common.h"
#include "../../llmc/checkpoint.h"
#include "../../llmc/cuda/adamw.cuh"

#define NPT (P_FINAL_NORM + 1)  // the transformer's tensors (llmc/checkpoint.h's PARAM_TABLE)
static const int *DECAY = PARAM_DECAY;  // matrices only

// ----------------------------------------------------------------------------
// CPU reference (train_gpt_cpu.c's adamw_update with its clip scale, per tensor)
static void adamw_cpu(float *p, float *g, float *m, float *v, const std::vector<size_t> &sizes, float lr, float beta1,
                      float beta2, float eps, float weight_decay, int t, float grad_scale) {
    float bc1 = 1.0f - powf(beta1, (float)t), bc2 = 1.0f - powf(beta2, (float)t);
    size_t o = 0;
    for (size_t k = 0; k < sizes.size(); k++) {
        float wd = DECAY[k] ? weight_decay : 0.0f;
        for (size_t i = o; i < o + sizes[k]; i++) {
            g[i] *= grad_scale;  // the global-norm clip
            m[i] = beta1 * m[i] + (1.0f - beta1) * g[i];
            v[i] = beta2 * v[i] + (1.0f - beta2) * g[i] * g[i];
            float mhat = m[i] / bc1, vhat = v[i] / bc2;
            p[i] -= lr * (mhat / (sqrtf(vhat) + eps) + wd * p[i]);
        }
        o += sizes[k];
    }
}

// ----------------------------------------------------------------------------
// v1 and v2: the header's variants (llmc/cuda/adamw.cuh, included above), through the
// trainer's launcher adamw_update

// ----------------------------------------------------------------------------
// launchers

#define NV 2
static const char *const VERSIONS[NV + 1] = {
    "", "adamw.cuh's variant 1: one element per thread, one launch per tensor",
    "adamw.cuh's variant 2, the trainer's: one launch over all tensors (ends, decays, bounds in a parameter table), 128-bit loads/stores"};

typedef struct {
    float lr, beta1, beta2, eps, weight_decay, grad_scale;
    int t;
} Hyper;

static void adamw_run(int v, float *p, floatX *px, const float *g, float *m, float *vv, const std::vector<size_t> &sizes,
                      const Hyper &h) {
    float bc1 = 1.0f - powf(h.beta1, (float)h.t), bc2 = 1.0f - powf(h.beta2, (float)h.t);
    std::vector<float> wd(sizes.size()), lo(sizes.size(), -INFINITY), hi(sizes.size(), INFINITY);  // the reference has no bounds
    for (size_t i = 0; i < sizes.size(); i++) wd[i] = DECAY[i] ? h.weight_decay : 0.0f;
    adamw_update(p, px, g, m, vv, sizes.data(), wd.data(), lo.data(), hi.data(), (int)sizes.size(), h.lr, h.beta1, h.beta2, bc1,
                 bc2, h.eps, h.grad_scale, v);
}

// tensor sizes of a transformer, in PARAM_TABLE order (llmc/checkpoint.h's shapes)
static std::vector<size_t> layout(int Vp, int C, int L, int NH, int NKV, int F) {
    Config c;
    memset(&c, 0, sizeof(c));
    c.Vp = Vp, c.C = C, c.L = L, c.NH = NH, c.NKV = NKV, c.F = F;
    Shape s[NP];
    param_shapes(&c, s);
    std::vector<size_t> n;
    for (int i = 0; i < NPT; i++) n.push_back(s[i].numel);
    return n;
}

int main(int argc, char **argv) {
    Args args = parse_args(argc, argv, "adamw", VERSIONS, NV);
    device_init(argv[0]);
    int first = args.version ? args.version : 1, last = args.version ? args.version : NV;
    Verdicts vd;
    memset(&vd, 0, sizeof(vd));
    Hyper hp = {6e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.8f, 10};

    struct {
        const char *name;
        std::vector<size_t> sizes;
    } cases[] = {
        {"tiny preset", layout(384, 128, 4, 4, 2, 384)},
        {"odd sizes", {1001, 37, 5003, 3, 777, 12345, 1, 999, 4097, 2, 65537}},
    };
    Rng rng = rng_make(1337, 5);
    printf("validation (tolerance: norm rel %.0e for fp32 p, m, v; %.0e for %s px)\n", F32_TOL, FX_TOL, PRECISION_NAME);
    for (auto &c : cases) {
        size_t n = 0;
        for (size_t s : c.sizes) n += s;
        std::vector<float> p(n), g(n), m(n), v(n);
        fill_normal(p, 0.0f, 0.02f, &rng);
        fill_normal(g, 0.0f, 0.01f, &rng);
        fill_normal(m, 0.0f, 0.01f, &rng);
        fill_normal(v, 0.0f, 1e-4f, &rng);
        for (float &x : v) x = fabsf(x);
        std::vector<float> pr = p, gr = g, mr = m, vr = v;
        adamw_cpu(pr.data(), gr.data(), mr.data(), vr.data(), c.sizes, hp.lr, hp.beta1, hp.beta2, hp.eps,
                  hp.weight_decay, hp.t, hp.grad_scale);
        float *d_p = dalloc<float>(n), *d_g = dalloc<float>(n), *d_m = dalloc<float>(n), *d_v = dalloc<float>(n);
#ifdef ENABLE_FP32
        floatX *d_px = d_p;  // the fp32 trainer's compute copy aliases the master weights
#else
        floatX *d_px = dalloc<floatX>(n);
#endif
        printf("  case %s: %zu parameters in %zu tensors\n", c.name, n, c.sizes.size());
        for (int ver = first; ver <= last; ver++) {
            printf("   v%d:\n", ver);
            vd.ran[ver] = 1;
            upload_f(d_p, p);
            upload_f(d_g, g);
            upload_f(d_m, m);
            upload_f(d_v, v);
#ifndef ENABLE_FP32
            poison(d_px, n * sizeof(floatX));
#endif
            adamw_run(ver, d_p, d_px, d_g, d_m, d_v, c.sizes, hp);
            cudaCheck(cudaDeviceSynchronize());
            bool ok = ran_variant(VF_ADAMW, ver);
            ok &= check_close("p", download_f(d_p, n), pr, F32_TOL);
            ok &= check_close("m", download_f(d_m, n), mr, F32_TOL);
            ok &= check_close("v", download_f(d_v, n), vr, F32_TOL);
            ok &= check_close("px", download_x(d_px, n), pr, FX_TOL);
            ok &= check_close("g (unchanged)", download_f(d_g, n), g, 0.0);
            if (!ok) vd.failed[ver] = 1;
        }
        cudaCheck(cudaFree(d_p));
        cudaCheck(cudaFree(d_g));
        cudaCheck(cudaFree(d_m));
        cudaCheck(cudaFree(d_v));
#ifndef ENABLE_FP32
        cudaCheck(cudaFree(d_px));
#endif
    }
    for (int ver = first; ver <= last; ver++) verdict_print("adamw", ver, &vd);

    if (args.bench) {
        std::vector<size_t> sizes = layout(50304, 384, 6, 6, 6, 1024);
        size_t n = 0;
        for (size_t s : sizes) n += s;
        printf("benchmark: the 10M preset's %zu parameters in %zu tensors, median of 50 runs, L2 flushed\n", n,
               sizes.size());
        measured_copy_gbps();
        std::vector<float> h(n);
        fill_normal(h, 0.0f, 0.02f, &rng);
        float *d_p = dalloc<float>(n), *d_g = dalloc<float>(n), *d_m = dalloc<float>(n), *d_v = dalloc<float>(n);
        upload_f(d_p, h);
        upload_f(d_g, h);
        upload_f(d_m, h);
        for (float &x : h) x = fabsf(x);
        upload_f(d_v, h);
#ifdef ENABLE_FP32
        floatX *d_px = d_p;
        double bytes = n * (4.0 * 4 + 3.0 * 4);  // p g m v in; p m v out
#else
        floatX *d_px = dalloc<floatX>(n);
        double bytes = n * (4.0 * 4 + 3.0 * 4 + sizeof(floatX));  // + px out
#endif
        for (int ver = first; ver <= last; ver++) {
            if (vd.failed[ver]) continue;
            float us = bench_us([&] { adamw_run(ver, d_p, d_px, d_g, d_m, d_v, sizes, hp); });
            report_bandwidth("adamw", ver, "", us, bytes);
        }
        cudaCheck(cudaFree(d_p));
        cudaCheck(cudaFree(d_g));
        cudaCheck(cudaFree(d_m));
        cudaCheck(cudaFree(d_v));
#ifndef ENABLE_FP32
        cudaCheck(cudaFree(d_px));
#endif
    }
    return verdict_exit("adamw", first, last, &vd);
}
