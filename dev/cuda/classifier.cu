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
//
// Validation on random logits (NaN in the padded columns, so reading them fails) against
// the CPU reference (classifier_forward_backward of train_gpt_cpu.c, double sum): backward
// (losses, dlogits incl. zeros in the padding) and forward-only (losses; real columns left
// untouched). Vocabularies 50277 (padded 50304), 257 (384), 1000 (1024).
// Benchmark: N = B*T = 16*2048 rows, V = 50277, Vp = 50304; GB/s counts the minimal traffic
// (logits read once, dlogits written once) for every version.
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

#define NV 3
static const char *const VERSIONS[NV + 1] = {
    "", "train_gpt.cu's classifier_kernel: block of 1024 per row, online max+sum in one pass then the write pass, 128-bit loads/stores",
    "the former trainer kernel: block of 512 per row, 3 passes (max, sum, write), scalar loads",
    "as v1 with the row cached in shared memory: logits read from memory once, written once"};

static size_t v3_smem(int Vp) { return (size_t)Vp * sizeof(floatX); }
static bool supported(int v, int Vp) {
    if (v == 2) return true;
    if (Vp % XVEC) return false;
    return v == 1 || v3_smem(Vp) + 1024 <= device_prop().sharedMemPerBlockOptin;  // + the reduction's static smem
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

int main(int argc, char **argv) {
    Args args = parse_args(argc, argv, "classifier", VERSIONS, NV);
    device_init(argv[0]);
    int first = args.version ? args.version : 1, last = args.version ? args.version : NV;
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
        printf("  case N=%d V=%d Vp=%d (padded logits = NaN)\n", N, V, Vp);
        for (int v = first; v <= last; v++) {
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
    for (int v = first; v <= last; v++) verdict_print("classifier", v, &vd);

    if (args.bench) {
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
        for (int v = first; v <= last; v++) {
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
    return verdict_exit("classifier", first, last, &vd);
}
