// The machine's FP32 FMA peak, the limit `make bench` measures against: every thread runs
// 12 independent chains of fused multiply-adds (enough to cover the FMA latency on two
// ports), in the widest vector the build uses: AVX-512 where the compiler targets it
// (-march=native on a CPU that has it), else AVX2 + FMA, else scalar fmaf.
//   gcc -O2 -march=native -fopenmp dev/peak_flops.c -o peak_flops && ./peak_flops [threads]
// Prints one line: threads, vector width, GFLOP/s (2 flops per FMA lane), best of 5.
#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CHAINS 12
#define ITERS 20000000L

#if defined(__AVX512F__)
#define WIDTH 16
#define NAME "AVX-512"
typedef __m512 vec;
static vec vset(float x) { return _mm512_set1_ps(x); }
static vec vfma(vec a, vec b, vec c) { return _mm512_fmadd_ps(a, b, c); }
static float vsum(vec a) { return _mm512_reduce_add_ps(a); }
#elif defined(__AVX2__) && defined(__FMA__)
#define WIDTH 8
#define NAME "AVX2+FMA"
typedef __m256 vec;
static vec vset(float x) { return _mm256_set1_ps(x); }
static vec vfma(vec a, vec b, vec c) { return _mm256_fmadd_ps(a, b, c); }
static float vsum(vec a) {
    float t[8];
    _mm256_storeu_ps(t, a);
    return t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
}
#else
#define WIDTH 1
#define NAME "scalar"
typedef float vec;
static vec vset(float x) { return x; }
static vec vfma(vec a, vec b, vec c) { return fmaf(a, b, c); }
static float vsum(vec a) { return a; }
#endif

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : omp_get_max_threads();
    omp_set_num_threads(threads);
    double best = 0, sink = 0;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now();
#pragma omp parallel reduction(+ : sink)
        {
            vec acc[CHAINS], m = vset(0.999999f), a = vset(1e-7f);
            for (int c = 0; c < CHAINS; c++) acc[c] = vset((float)c);
            for (long i = 0; i < ITERS; i++)
#pragma GCC unroll 12
                for (int c = 0; c < CHAINS; c++) acc[c] = vfma(acc[c], m, a);  // unrolled: 12 registers
            for (int c = 0; c < CHAINS; c++) sink += vsum(acc[c]);  // keeps the chains alive
        }
        double gflops = 2.0 * WIDTH * CHAINS * ITERS * threads / (now() - t0) / 1e9;
        if (gflops > best) best = gflops;
    }
    printf("peak: %d threads, %s (%d lanes), %.1f GFLOP/s FP32 FMA (check %g)\n", threads, NAME, WIDTH, best, sink > 0 ? 1.0 : 0.0);
    return 0;
}
