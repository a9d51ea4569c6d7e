// The CPU GEMM (llmc/gemm.h) alone, in GFLOP/s and as a share of the FMA peak that
// dev/peak_flops.c measured in the same `make bench` run (passed as the first argument).
// Shapes: the LM head of the 10m bench case (B*T = 2048 tokens, C = 384, Vp = 50304) in
// its three products, a square 1024 product, and every linear product of one training
// micro-batch of the tiny bench case (forward and backward, timed as one): the most the
// trainer could reach on that model if everything but these products took no time.
//   gcc -O3 -march=native -fopenmp -ffp-contract=off -I. dev/bench_gemm.c -o bench_gemm -lm
//   ./bench_gemm PEAK_GFLOPS [threads]
#define _DEFAULT_SOURCE
#include <math.h>
#include "llmc/gemm.h"
#include "llmc/rng.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static float *random_matrix(size_t n, unsigned seed) {  // uniform in [-0.5, 0.5)
    float *m = (float *)big_calloc(n, sizeof(float));  // as the trainer allocates
    Rng r = rng_make(seed, 0);
    for (size_t i = 0; i < n; i++) m[i] = rng_f32(&r) - 0.5f;
    return m;
}

enum { NN, NT, TN };  // out = A B, A B^T (nn.Linear forward), A^T B (weight gradient)

// Best of 3 timed runs after one warm-up; prints GFLOP/s and the share of peak.
static void bench(const char *name, int kind, int N, int K, int M, double peak) {
    size_t a_n = (size_t)N * K, b_n = (size_t)K * M;
    float *A = random_matrix(a_n, 1), *Bm = random_matrix(b_n, 2), *out = (float *)big_calloc((size_t)N * M, sizeof(float));
    double best = 1e30;
    for (int rep = 0; rep < 4; rep++) {
        double t0 = now();
        if (kind == NN) gemm_nn(out, A, Bm, N, K, M, 0, 0);
        else if (kind == NT) gemm_nt(out, A, Bm, N, K, M);
        else gemm_nn(out, A, Bm, N, K, M, 1, 1);
        double dt = now() - t0;
        if (rep > 0 && dt < best) best = dt;
    }
    double gflops = 2.0 * N * K * M / best / 1e9;
    printf("%-44s N %5d K %5d M %5d | %7.1f ms | %6.1f GFLOP/s | %5.1f%% of peak\n", name, N, K, M, best * 1e3, gflops,
           100 * gflops / peak);
    free(A);
    free(Bm);
    free(out);
}

// All linear products of one micro-batch of N tokens (forward: out = x W^T per weight; backward:
// dx = dout W and dW += dout^T x), for L layers of the model's shape and the tied head.
static void bench_model(const char *name, int N, int C, int QD, int KD, int F, int Vp, int L, double peak) {
    int shapes[][2] = {{C, QD}, {C, KD}, {C, KD}, {QD, C}, {C, F}, {C, F}, {F, C}};  // (in, out) per layer
    int ns = (int)(sizeof(shapes) / sizeof(shapes[0])), big = F > Vp ? F : Vp;
    size_t most = (size_t)N * (big > QD ? big : QD);
    float *x = random_matrix(most, 1), *dout = random_matrix(most, 2), *out = (float *)big_calloc(most, sizeof(float));
    float *W = random_matrix((size_t)big * big, 3), *dW = (float *)big_calloc((size_t)big * big, sizeof(float));
    double flops = 0, best = 1e30;
    for (int rep = 0; rep < 4; rep++) {
        flops = 0;
        double t0 = now();
        for (int l = 0; l <= L; l++)
            for (int s = 0; s < (l < L ? ns : 1); s++) {
                int in = l < L ? shapes[s][0] : C, o = l < L ? shapes[s][1] : Vp;
                gemm_nt(out, x, W, N, in, o);            // forward
                gemm_nn(out, dout, W, N, o, in, 0, 0);   // dx
                gemm_nn(dW, dout, x, o, N, in, 1, 1);    // dW
                flops += 6.0 * N * in * o;
            }
        double dt = now() - t0;
        if (rep > 0 && dt < best) best = dt;
    }
    double gflops = flops / best / 1e9;
    printf("%-44s %3d products | %7.1f ms | %6.1f GFLOP/s | %5.1f%% of peak\n", name, 3 * (ns * L + 1), best * 1e3, gflops,
           100 * gflops / peak);
    free(x);
    free(dout);
    free(out);
    free(W);
    free(dW);
}

int main(int argc, char **argv) {
    if (argc < 2) fail("usage: %s PEAK_GFLOPS [threads]", argv[0]);
    double peak = atof(argv[1]);
#ifdef _OPENMP
    if (argc > 2) omp_set_num_threads(atoi(argv[2]));
#endif
    bench("LM head forward: logits = x wte^T", NT, 2048, 384, 50304, peak);
    bench("LM head backward: dx = dlogits wte", NN, 2048, 50304, 384, peak);
    bench("LM head backward: dwte += dlogits^T x", TN, 50304, 2048, 384, peak);
    bench("square", NN, 1024, 1024, 1024, peak);
    bench_model("tiny, one micro-batch's linear products", 16 * 128, 128, 128, 64, 384, 384, 4, peak);
    return 0;
}
