// dev/cuda/classifier.cu: the fused classifier over logits (N,Vp): softmax over the V real
// columns (padded columns V..Vp-1 are never read into the softmax), the per-row loss
// lse - logit[target], and (backward) dlogits = (softmax - onehot(target)) * dloss written
// in place, with 0 in the padded columns.
//
//   v1  train_gpt.cu's classifier_kernel: one block of 1024 per row, two passes: an online
//       max-and-sum (rescaling the running sum when the max grows) in one pass, then the
//       write; 128-bit loads/stores
//   v2  the trainer's former kernel: one block of 512 per row, three passes over the row
//       (max, sum of exp, write), scalar loads
//   v3  as v1, with the row cached in shared memory during the statistics pass: the
//       logits are read from memory once and written once
// and the LM head around the kernel (logits = x wte^T, the kernel, dx = dlogits wte,
// dwte += dlogits^T x: classifier_backward of llmc/cuda/classifier.cuh), its two variants:
//   v4  the header's variant 1: all N rows at once, the (N,Vp) logits in one buffer
//   v5  the header's variant 2: chunks of rows into one (chunk,Vp) buffer, dwte added
//       chunk by chunk (cuBLAS beta = 1, in order)
//
// Validation of v1-v3 on random logits (NaN in the padded columns, so reading them fails)
// against the CPU reference (classifier_forward_backward of train_gpt_cpu.c, double sum):
// backward (losses, dlogits incl. zeros in the padding) and forward-only (losses; real
// columns left untouched). Vocabularies 50277 (padded 50304), 257 (384), 1000 (1024).
// Validation of v4, v5 from random x and wte (its padded rows too) against double from the
// same floatX inputs (logits rounded to floatX, as the device keeps them): forward-only
// losses, losses, dx, what was added to a nonzero dwte, its padded rows unchanged to the
// bit; v5 in chunks that do not divide N, and against v4.
// Benchmark: v1-v3 at N = B*T = 16*2048 rows, V = 50277, Vp = 50304; GB/s counts the minimal
// traffic (logits read once, dlogits written once) for every version. v4, v5 at the 10m
// preset's C 384 and N = 4*2048 and 16*2048 (v5 at chunks of 512 to 4096 rows): the whole
// head's time, its three products' TFLOP/s and the logits buffer (doc/cuda.md counts the
// bytes each moves).
//
// usage: ./classifier_bin [VERSION] [--no-bench]
#include "common.h"
#include "../../llmc/cuda/classifier.cuh"

// ----------------------------------------------------------------------------
// CPU reference (train_gpt_cpu.c)
static void classifier_cpu(float *logits, float *losses, const int *targets, int N, int V, int Vp, float dloss,
                           int backward) {
    for (int i = 0; i < N; i++) {
        float *l = logits + (size_t)i * Vp;
        float maxv = -INFINITY;
        for (int c = 0; c < V; c++) maxv = l[c] > maxv ? l[c] : maxv;
        double sum = 0.0;
        for (int c = 0; c < V; c++) sum += expf(l[c] - maxv);
        float lse = maxv + (float)log(sum);
        if (targets) losses[i] = lse - l[targets[i]];
        if (backward) {
            for (int c = 0; c < V; c++) l[c] = expf(l[c] - lse) * dloss;
            l[targets[i]] -= dloss;
            for (int c = V; c < Vp; c++) l[c] = 0.0f;
        }
    }
}

// ----------------------------------------------------------------------------
// v1: the trainer's own kernel (llmc/cuda/, included above)

// ----------------------------------------------------------------------------
// v2: the trainer's former kernel, three passes (max, sum, write) with scalar loads
__global__ void classifier_kernel_v2(floatX *logits, float *losses, const int *targets, const float *weights, int N,
                                     int V, int Vp, float dloss, int backward) {
    int row = blockIdx.x;
    if (row >= N) return;
    floatX *l = logits + (size_t)row * Vp;
    float maxv = -FLT_MAX;
    for (int c = threadIdx.x; c < V; c += blockDim.x) maxv = fmaxf(maxv, to_f(l[c]));
    maxv = block_max(maxv);
    float sum = 0.0f;
    for (int c = threadIdx.x; c < V; c += blockDim.x) sum += expf(to_f(l[c]) - maxv);
    float lse = maxv + logf(block_sum(sum));
    int target = targets[row];
    float lt = to_f(l[target]);
    __syncthreads();  // every thread has read l[target] before it is overwritten
    if (threadIdx.x == 0) losses[row] = lse - lt;
    if (!backward) return;
    if (weights) dloss = weights[row];  // loss masks: this target's share of the step's loss
    for (int c = threadIdx.x; c < Vp; c += blockDim.x) {
        float d = c < V ? (expf(to_f(l[c]) - lse) - (c == target ? 1.0f : 0.0f)) * dloss : 0.0f;
        l[c] = to_x(d);
    }
}

// v3: v1 with the row cached in shared memory (dynamic, Vp * sizeof(floatX): 98 KiB for bf16 and
// Vp 50304, two blocks per H100/H200 SM). Each thread re-reads only the packs it wrote, so
// the cache needs no extra barrier. (A register cache was tried first: the compiler keeps the
// converted fp32 values alive across the reduction and spills.)
__global__ void __launch_bounds__(1024) classifier_kernel_v3(floatX *logits, float *losses, const int *targets, int N,
                                                             int V, int Vp, float dloss, int backward) {
    extern __shared__ __align__(16) unsigned char row_smem[];
    floatX *rs = reinterpret_cast<floatX *>(row_smem);  // (Vp)
    int row = blockIdx.x;
    if (row >= N) return;
    floatX *l = logits + (size_t)row * Vp;
    int nch = Vp / XVEC, target = targets[row];
    float lt = threadIdx.x == 0 ? to_f(l[target]) : 0.0f;  // read before the reduction's barriers
    float m = -FLT_MAX, s = 0.0f;
    for (int ch = threadIdx.x; ch < nch; ch += blockDim.x) {
        Pack128<floatX> p = load128(l + (size_t)ch * XVEC);
        store128(rs + (size_t)ch * XVEC, p);
        int c0 = ch * XVEC;
        float cm = -FLT_MAX;
#pragma unroll
        for (int k = 0; k < XVEC; k++)
            if (c0 + k < V) cm = fmaxf(cm, to_f(p.v[k]));
        if (cm > m) {
            s *= expf(m - cm);
            m = cm;
        }
#pragma unroll
        for (int k = 0; k < XVEC; k++)
            if (c0 + k < V) s += expf(to_f(p.v[k]) - m);
    }
    block_online_reduce(m, s);
    float lse = m + logf(s);
    if (threadIdx.x == 0) losses[row] = lse - lt;
    if (!backward) return;
    for (int ch = threadIdx.x; ch < nch; ch += blockDim.x) {
        Pack128<floatX> p = load128(rs + (size_t)ch * XVEC), o;
        int c0 = ch * XVEC;
#pragma unroll
        for (int k = 0; k < XVEC; k++) {
            int c = c0 + k;
            float d = c < V ? (expf(to_f(p.v[k]) - lse) - (c == target ? 1.0f : 0.0f)) * dloss : 0.0f;
            o.v[k] = to_x(d);
        }
        store128(l + (size_t)ch * XVEC, o);
    }
}

// ----------------------------------------------------------------------------
// launchers

#define NV 5
#define NK 3  // v1-v3: the kernel alone; v4, v5: the LM head around it
static const char *const VERSIONS[NV + 1] = {
    "", "train_gpt.cu's classifier_kernel: block of 1024 per row, online max+sum in one pass then the write pass, 128-bit loads/stores",
    "the former trainer kernel: block of 512 per row, 3 passes (max, sum, write), scalar loads",
    "as v1 with the row cached in shared memory: logits read from memory once, written once",
    "the LM head (logits product, v1's kernel, dx and dwte products), CLASSIFIER_VARIANT 1: all rows at once",
    "the LM head, CLASSIFIER_VARIANT 2: chunks of rows, dwte added chunk by chunk (beta = 1, in order)"};

static size_t v3_smem(int Vp) { return (size_t)Vp * sizeof(floatX); }
static bool supported(int v, int Vp) {
    if (v == 2) return true;
    if (Vp % XVEC) return false;
    return v != 3 || v3_smem(Vp) + 1024 <= device_prop().sharedMemPerBlockOptin;  // + the reduction's static smem
}

static void classifier_run(int v, floatX *logits, float *losses, const int *targets, int N, int V, int Vp, float dloss,
                           int backward) {
    if (v == 1) {
        classifier_kernel<<<N, 1024>>>(logits, losses, targets, NULL, N, V, Vp, dloss, backward);
    } else if (v == 2) {
        classifier_kernel_v2<<<N, 512>>>(logits, losses, targets, NULL, N, V, Vp, dloss, backward);
    } else {
        static size_t configured = 0;
        size_t smem = v3_smem(Vp);
        if (smem > configured) {
            cudaCheck(cudaFuncSetAttribute(classifier_kernel_v3, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
            configured = smem;
        }
        classifier_kernel_v3<<<N, 1024, smem>>>(logits, losses, targets, N, V, Vp, dloss, backward);
    }
    cudaCheck(cudaGetLastError());
}

// ----------------------------------------------------------------------------
// v4, v5: the LM head

// losses (N), dx (N,C), and what the head adds to dwte (Vp,C) (rows V..Vp-1: 0) in double
// from the floatX inputs x (N,C), wte (Vp,C); the logits rounded to floatX as the device keeps them
static void head_cpu(std::vector<float> &losses, std::vector<float> &dx, std::vector<float> &dwte_added,
                     const std::vector<float> &x, const std::vector<float> &wte, const int *targets,
                     const float *weights, int N, int C, int V, int Vp, float dloss) {
    std::vector<double> z(V), gx((size_t)N * C, 0.0), gw((size_t)Vp * C, 0.0);
    for (int i = 0; i < N; i++) {
        double m = -1e300, s = 0.0, d = weights ? weights[i] : dloss;
        for (int c = 0; c < V; c++) {
            double t = 0.0;
            for (int k = 0; k < C; k++) t += (double)x[(size_t)i * C + k] * wte[(size_t)c * C + k];
            z[c] = host_to_f(host_to_x((float)t));
            m = std::max(m, z[c]);
        }
        for (int c = 0; c < V; c++) s += exp(z[c] - m);
        double lse = m + log(s);
        losses[i] = (float)(lse - z[targets[i]]);
        for (int c = 0; c < V; c++) {
            double g = (exp(z[c] - lse) - (c == targets[i] ? 1.0 : 0.0)) * d;
            for (int k = 0; k < C; k++) {
                gx[(size_t)i * C + k] += g * wte[(size_t)c * C + k];
                gw[(size_t)c * C + k] += g * x[(size_t)i * C + k];
            }
        }
    }
    dx.assign(gx.begin(), gx.end());
    dwte_added.assign(gw.begin(), gw.end());
}

// the head's device buffers for N rows: x, dx (N,C), wte (Vp,C), logits (N,Vp), dwte (Vp,C)
// fp32, losses and forward-only losses, loss masks, targets (N)
struct HeadBuffers {
    floatX *x, *wte, *dx, *logits;
    float *dwte, *losses, *fwd, *w;
    int *targets;
};
static HeadBuffers head_alloc(int N, int C, int Vp) {
    size_t nx = (size_t)N * C, nw = (size_t)Vp * C;
    return {dalloc<floatX>(nx), dalloc<floatX>(nw), dalloc<floatX>(nx), dalloc<floatX>((size_t)N * Vp),
            dalloc<float>(nw), dalloc<float>(N), dalloc<float>(N), dalloc<float>(N), dalloc<int>(N)};
}
static void head_free(HeadBuffers &b) {
    void *all[] = {b.x, b.wte, b.dx, b.logits, b.dwte, b.losses, b.fwd, b.w, b.targets};
    for (void *p : all) cudaCheck(cudaFree(p));
}

// one head case: v4 and v5 (chunks of `rows`) against head_cpu and v5 against v4
static void validate_head(int N, int C, int V, int Vp, int rows, int weighted, int first, int last, Verdicts *vd,
                          Rng *rng) {
    std::vector<float> x((size_t)N * C), wte((size_t)Vp * C), dwte0((size_t)Vp * C), w(N);
    fill_normal(x, 0.0f, 1.0f, rng);
    fill_normal(wte, 0.0f, 3.0f / sqrtf((float)C), rng);  // logits of about 3 standard deviations; padded rows too
    fill_normal(dwte0, 0.0f, 0.01f, rng);  // the gradient the head adds to
    round_to_x(x);
    round_to_x(wte);
    std::vector<int> targets(N);
    for (int i = 0; i < N; i++) targets[i] = (int)rng_below(rng, (uint32_t)V), w[i] = 0.1f * (i % 3);
    targets[0] = V - 1;
    targets[N - 1] = 0;
    float dloss = 1.0f / N;
    const float *hw = weighted ? w.data() : NULL;
    std::vector<float> loss_ref(N), dx_ref, dw_ref;
    head_cpu(loss_ref, dx_ref, dw_ref, x, wte, targets.data(), hw, N, C, V, Vp, dloss);
    HeadBuffers d = head_alloc(N, C, Vp);
    upload_x(d.x, x);
    upload_x(d.wte, wte);
    upload_f(d.w, w);
    cudaCheck(cudaMemcpy(d.targets, targets.data(), N * sizeof(int), cudaMemcpyHostToDevice));
    printf("  head case N=%d C=%d V=%d Vp=%d%s; v5 in chunks of %d rows\n", N, C, V, Vp,
           weighted ? ", per-target weights" : "", rows);
    std::vector<float> v4_out[3];  // v4's losses, dx, dwte
    for (int v = std::max(first, NK + 1); v <= last; v++) {
        int chunk = v == 4 ? N : rows;
        printf("   v%d:\n", v);
        vd->ran[v] = 1;
        upload_f(d.dwte, dwte0);
        poison(d.losses, N * sizeof(float));
        poison(d.fwd, N * sizeof(float));
        poison(d.dx, x.size() * sizeof(floatX));
        poison(d.logits, (size_t)N * Vp * sizeof(floatX));
        classifier_forward(d.fwd, d.logits, d.x, d.wte, d.targets, N, C, V, Vp, chunk);
        classifier_backward(d.dx, d.dwte, d.losses, d.logits, d.x, d.wte, d.targets, weighted ? d.w : NULL, N, C, V, Vp,
                            dloss, chunk);
        cudaCheck(cudaDeviceSynchronize());
        std::vector<float> losses = download_f(d.losses, N), dx = download_x(d.dx, x.size());
        std::vector<float> dwte = download_f(d.dwte, wte.size()), added(wte.size());
        for (size_t i = 0; i < added.size(); i++) added[i] = (float)((double)dwte[i] - dwte0[i]);
        bool ok = check_close("fwd losses", download_f(d.fwd, N), loss_ref, FX_TOL);  // bf16: logits 1 ulp off cuBLAS's
        ok &= check_close("losses", losses, loss_ref, FX_TOL);
        ok &= check_close("dx", dx, dx_ref, FX_TOL);
        ok &= check_close("dwte added", added, dw_ref, FX_TOL);
        bool kept = memcmp(&dwte[(size_t)V * C], &dwte0[(size_t)V * C], (size_t)(Vp - V) * C * sizeof(float)) == 0;
        printf("    %-14s rows %d..%d unchanged to the bit: %s\n", "dwte padded", V, Vp - 1, kept ? "ok" : "BAD");
        ok &= kept;
        if (v == 4) {
            v4_out[0] = losses, v4_out[1] = dx, v4_out[2] = dwte;
        } else if (!v4_out[0].empty()) {  // the same sums but dwte's in chunks; cuBLAS may pick other kernels per chunk
            ok &= check_close("losses vs v4", losses, v4_out[0], FX_TOL);
            ok &= check_close("dx vs v4", dx, v4_out[1], FX_TOL);
            ok &= check_close("dwte vs v4", dwte, v4_out[2], F32_TOL);
        }
        if (!ok) vd->failed[v] = 1;
    }
    head_free(d);
}

// the whole head's time over N rows at the 10m preset's width: v4, and v5 at several chunks
static void bench_head(int N, int first, int last, const Verdicts *vd) {
    const int C = 384, V = 50277, Vp = 50304;
    printf("benchmark: the LM head, N=%d rows (B=%d x T=2048), C=%d, V=%d, Vp=%d, median of 50 runs, L2 flushed\n", N,
           N / 2048, C, V, Vp);
    size_t nx = (size_t)N * C, nw = (size_t)Vp * C;
    HeadBuffers d = head_alloc(N, C, Vp);
    fill_hash_kernel<<<ceil_div(nx, 256), 256>>>(d.x, nx, 3u);
    fill_hash_kernel<<<ceil_div(nw, 256), 256>>>(d.wte, nw, 4u);
    cudaCheck(cudaGetLastError());
    cudaCheck(cudaMemset(d.dwte, 0, nw * sizeof(float)));
    std::vector<int> targets(N);
    for (int i = 0; i < N; i++) targets[i] = (int)((uint64_t)i * 2654435761u % V);
    cudaCheck(cudaMemcpy(d.targets, targets.data(), N * sizeof(int), cudaMemcpyHostToDevice));
    double flops = 6.0 * N * (double)Vp * C;  // logits, dx, dwte: 2 N Vp C each
    for (int v = std::max(first, NK + 1); v <= last; v++) {
        if (vd->failed[v]) continue;
        std::vector<int> sizes = v == 4 ? std::vector<int>{N} : std::vector<int>{512, 1024, CLASSIFIER_CHUNK, 4096};
        for (int rows : sizes) {
            if (v == 5 && rows >= N) continue;  // one chunk: v4
            float us = bench_us([&] {
                classifier_backward(d.dx, d.dwte, d.losses, d.logits, d.x, d.wte, d.targets, NULL, N, C, V, Vp, 1.0f / N,
                                    rows);
            });
            char label[128];
            snprintf(label, sizeof(label), " (head, N %d, %d rows at a time: logits buffer %.0f MiB%s)", N, rows,
                     (double)rows * Vp * sizeof(floatX) / 1048576.0,
                     v == 5 && rows == CLASSIFIER_CHUNK ? ", CLASSIFIER_CHUNK" : "");
            report_tflops("classifier", v, label, us, flops);
        }
    }
    head_free(d);
}

int main(int argc, char **argv) {
    Args args = parse_args(argc, argv, "classifier", VERSIONS, NV);
    device_init(argv[0]);
    cublas = get_cublas();  // the head's products (llmc/cuda/matmul.cuh)
    int first = args.version ? args.version : 1, last = args.version ? args.version : NV;
    int klast = std::min(last, NK);  // the kernel versions among those asked for
    Verdicts vd;
    memset(&vd, 0, sizeof(vd));

    const int cases[][3] = {{64, 50277, 50304}, {37, 257, 384}, {16, 1000, 1024}};  // (N, V, Vp)
    Rng rng = rng_make(1337, 4);
    printf("validation (tolerance: norm rel %.0e for %s dlogits, %.0e for fp32 losses)\n", FX_TOL, PRECISION_NAME,
           F32_TOL);
    for (const auto &cs : cases) {
        int N = cs[0], V = cs[1], Vp = cs[2];
        size_t n = (size_t)N * Vp;
        std::vector<float> logits(n);
        fill_normal(logits, 0.0f, 3.0f, &rng);
        round_to_x(logits);
        std::vector<int> targets(N);
        for (int i = 0; i < N; i++) targets[i] = (int)rng_below(&rng, (uint32_t)V);
        targets[0] = V - 1;  // the last real column
        targets[N - 1] = 0;
        for (int i = 0; i < N; i++)
            for (int c = V; c < Vp; c++) logits[(size_t)i * Vp + c] = NAN;  // padded columns: must not be read
        float dloss = 1.0f / N;
        std::vector<float> ref = logits, loss_ref(N);
        classifier_cpu(ref.data(), loss_ref.data(), targets.data(), N, V, Vp, dloss, 1);
        std::vector<float> real_in, real_ref;  // the V real columns, for the forward-only check
        for (int i = 0; i < N; i++)
            for (int c = 0; c < V; c++) real_in.push_back(logits[(size_t)i * Vp + c]);
        floatX *d_logits = dalloc<floatX>(n);
        float *d_losses = dalloc<float>(N);
        int *d_targets = dalloc<int>(N);
        cudaCheck(cudaMemcpy(d_targets, targets.data(), N * sizeof(int), cudaMemcpyHostToDevice));
        if (first <= klast) printf("  case N=%d V=%d Vp=%d (padded logits = NaN)\n", N, V, Vp);
        for (int v = first; v <= klast; v++) {
            if (!supported(v, Vp)) {
                printf("   v%d: not supported for Vp=%d\n", v, Vp);
                vd.skipped[v] = 1;
                continue;
            }
            printf("   v%d:\n", v);
            vd.ran[v] = 1;
            bool ok = true;
            // forward only
            upload_x(d_logits, logits);
            poison(d_losses, N * sizeof(float));
            classifier_run(v, d_logits, d_losses, d_targets, N, V, Vp, dloss, 0);
            cudaCheck(cudaDeviceSynchronize());
            ok &= check_close("fwd losses", download_f(d_losses, N), loss_ref, F32_TOL);
            std::vector<float> after = download_x(d_logits, n), real_after;
            for (int i = 0; i < N; i++)
                for (int c = 0; c < V; c++) real_after.push_back(after[(size_t)i * Vp + c]);
            ok &= check_close("fwd logits", real_after, real_in, 0.0);  // untouched
            // forward + backward
            upload_x(d_logits, logits);
            poison(d_losses, N * sizeof(float));
            classifier_run(v, d_logits, d_losses, d_targets, N, V, Vp, dloss, 1);
            cudaCheck(cudaDeviceSynchronize());
            ok &= check_close("bwd losses", download_f(d_losses, N), loss_ref, F32_TOL);
            ok &= check_close("bwd dlogits", download_x(d_logits, n), ref, FX_TOL);
            if (!ok) vd.failed[v] = 1;
        }
        cudaCheck(cudaFree(d_logits));
        cudaCheck(cudaFree(d_losses));
        cudaCheck(cudaFree(d_targets));
    }
    // (N, C, V, Vp, v5's rows, loss masks)
    const int head_cases[][6] = {{64, 64, 50277, 50304, 24, 0}, {37, 32, 257, 384, 16, 1}};
    for (const auto &hc : head_cases)
        if (last > NK) validate_head(hc[0], hc[1], hc[2], hc[3], hc[4], hc[5], first, last, &vd, &rng);
    for (int v = first; v <= last; v++) verdict_print("classifier", v, &vd);

    if (args.bench && first <= klast) {
        int N = 16 * 2048, V = 50277, Vp = 50304;
        size_t n = (size_t)N * Vp;
        printf("benchmark: N=%d rows (B=16 x T=2048), V=%d, Vp=%d (%.2f GiB of logits), median of 50 runs, L2 flushed\n",
               N, V, Vp, n * sizeof(floatX) / 1073741824.0);
        measured_copy_gbps();
        std::vector<float> h(n);
        fill_normal(h, 0.0f, 3.0f, &rng);
        std::vector<int> targets(N);
        for (int i = 0; i < N; i++) targets[i] = (int)rng_below(&rng, (uint32_t)V);
        floatX *d_logits = dalloc<floatX>(n), *d_pristine = dalloc<floatX>(n);
        float *d_losses = dalloc<float>(N);
        int *d_targets = dalloc<int>(N);
        upload_x(d_pristine, h);
        cudaCheck(cudaMemcpy(d_targets, targets.data(), N * sizeof(int), cudaMemcpyHostToDevice));
        double bytes = (double)N * V * sizeof(floatX) + (double)n * sizeof(floatX) + N * 8.0;
        for (int v = first; v <= klast; v++) {
            if (vd.failed[v] || !supported(v, Vp)) continue;
            float us = bench_us([&] { classifier_run(v, d_logits, d_losses, d_targets, N, V, Vp, 1.0f / N, 1); },
                                [&] {  // in place: restore the logits (untimed)
                                    cudaCheck(cudaMemcpyAsync(d_logits, d_pristine, n * sizeof(floatX),
                                                              cudaMemcpyDeviceToDevice));
                                });
            report_bandwidth("classifier", v, " (forward+backward)", us, bytes);
        }
        cudaCheck(cudaFree(d_logits));
        cudaCheck(cudaFree(d_pristine));
        cudaCheck(cudaFree(d_losses));
        cudaCheck(cudaFree(d_targets));
    }
    if (args.bench && last > NK) {
        bench_head(4 * 2048, first, last, &vd);
        bench_head(16 * 2048, first, last, &vd);
    }
    return verdict_exit("classifier", first, last, &vd);
}
