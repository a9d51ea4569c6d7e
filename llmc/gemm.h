// The CPU trainer's matrix products (train_gpt_cpu.c; the GPU uses cuBLAS).
#pragma once
#include "utils.h"
#ifdef _OPENMP
#include <omp.h>
#endif

// ----------------------------------------------------------------------------
// The packed product: the linear layers, most of the model's FLOPs.
//   out (N,M) (+)= op(A) (N,K) . op(B) (K,M), all row-major and contiguous, where op(A)
//   is A (N,K) or, with a_trans, A^T of an A stored (K,N); op(B) is B (K,M) or, with
//   b_trans, B^T of a B stored (M,K) (an nn.Linear weight: out = x W^T).
// Every output element is out (accumulate) or 0 followed by fused multiply-adds over k in
// order: one thread computes it, so results do not depend on the thread count or on the
// blocking below.
// Blocking (Goto and van de Geijn's): k runs in blocks of at most KC (equal sizes), and for
// each, op(A) is packed into panels of MR rows (k-major: a kernel reads it contiguously)
// and op(B), NC columns at a time, into panels of NR columns. When out has at most NC
// columns, each A panel would be used once after packing, so A is read in place instead
// (MR rows at stride K, or for A^T MR contiguous floats at stride N), and only a last,
// partial panel is packed, by each thread for itself (measured: the 10m LM head's dx
// product 72% -> 84% of peak, the tiny model's products 77% -> 83%; with more columns,
// packed panels were faster). A weight gradient (A^T B) of at most NC columns reads B's
// whole panels in place too (its packing per k block was a quarter of the small dW
// products' time). In place, no thread reads what another wrote, so the k blocks run
// without a barrier between them (a handful of points of peak on the small dW products,
// whose 6 blocks each made one thread wait for the other). The register
// kernel computes an MR x NR tile of out with its accumulators in registers. Each thread
// owns a contiguous range of B panels (columns of out), packs them itself (no barrier) and
// sweeps every A panel against them: one A panel (MR x KC, 18 KB at KC 384) stays in L1
// while the thread's B panels (KC x NC/threads) stream from L2, and the tiles of out are
// visited along their rows; each kernel prefetches the next tile of out, so the first
// loads of a tile do not wait for memory (the LM head's logits are hundreds of MB).
// Measured on the LM-head shapes (dev/bench_gemm.c), this order beat the other (a B panel
// in L1 against a block of A panels from L2) by 10-15 points of peak.
// The tile fills the register file: AVX-512 12 x 32 (24 of the 32 zmm registers hold
// accumulators, 2 hold B, 1 the broadcast A value), AVX2 + FMA 6 x 16 (12 of 16 ymm), NEON
// 6 x 16 (24 of 32), and a portable 8 x 16 that the compiler vectorizes; chosen by the build.
#ifndef GEMM_KC
#define GEMM_KC 384
#endif
#ifndef GEMM_NC
#define GEMM_NC 512
#endif
#if defined(__AVX512F__)
#include <immintrin.h>
#ifndef GEMM_MR
#define GEMM_MR 12
#define GEMM_NV 2  // zmm vectors per tile row
#endif
#define GEMM_NR (16 * GEMM_NV)
// the AVX-512 kernel: tile (nr <= MR, nc <= NR) of out at o (row stride ldo); next: the
// next tile this thread computes (full rows), prefetched, or NULL
static inline __attribute__((always_inline)) void gemm_kernel(const float *ap, int a_rs, int a_ks, const float *bp, int b_ks, int kc, float *o,
                                                               int ldo, int nr, int nc, int load, const float *next) {
    __m512 acc[GEMM_MR][GEMM_NV];
    __mmask16 mask[GEMM_NV];
    for (int v = 0; v < GEMM_NV; v++) {
        int w = nc - 16 * v;
        mask[v] = w >= 16 ? 0xFFFF : w <= 0 ? 0 : (__mmask16)((1u << w) - 1);
    }
#pragma GCC unroll 32
    for (int r = 0; r < GEMM_MR; r++)
#pragma GCC unroll 4
        for (int v = 0; v < GEMM_NV; v++)
            acc[r][v] = load && r < nr ? _mm512_maskz_loadu_ps(mask[v], o + (size_t)r * ldo + 16 * v) : _mm512_setzero_ps();
    for (int k = 0; k < kc; k++, ap += a_ks, bp += b_ks) {
        if (k < GEMM_MR && next)  // the next tile's row k, spread over the first iterations
#pragma GCC unroll 4
            for (int v = 0; v < GEMM_NV; v++) _mm_prefetch((const char *)(next + (size_t)k * ldo + 16 * v), _MM_HINT_T0);
        __m512 b[GEMM_NV];
#pragma GCC unroll 4
        for (int v = 0; v < GEMM_NV; v++) b[v] = _mm512_loadu_ps(bp + 16 * v);
#pragma GCC unroll 32
        for (int r = 0; r < GEMM_MR; r++) {
            __m512 a = _mm512_set1_ps(ap[r * a_rs]);
#pragma GCC unroll 4
            for (int v = 0; v < GEMM_NV; v++) acc[r][v] = _mm512_fmadd_ps(a, b[v], acc[r][v]);
        }
    }
#pragma GCC unroll 32
    for (int r = 0; r < GEMM_MR; r++)
        if (r < nr)
#pragma GCC unroll 4
            for (int v = 0; v < GEMM_NV; v++) _mm512_mask_storeu_ps(o + (size_t)r * ldo + 16 * v, mask[v], acc[r][v]);
}
#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define GEMM_MR 6
#define GEMM_NR 16
// the AVX2 kernel: tile (nr <= 6, nc <= 16) of out at o (row stride ldo)
static inline __attribute__((always_inline)) void gemm_kernel(const float *ap, int a_rs, int a_ks, const float *bp, int b_ks, int kc, float *o,
                                                               int ldo, int nr, int nc, int load, const float *next) {
    (void)next;
    __m256 acc[GEMM_MR][2];
    __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256i m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(nc), lane), m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(nc - 8), lane);
    int full = nc == GEMM_NR;  // whole rows: plain loads and stores (AMD's masked stores are slow: 73% -> 84% of peak on tiny's products)
#pragma GCC unroll 6
    for (int r = 0; r < GEMM_MR; r++) {
        const float *row = o + (size_t)r * ldo;
        if (!load || r >= nr) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
        else if (full) acc[r][0] = _mm256_loadu_ps(row), acc[r][1] = _mm256_loadu_ps(row + 8);
        else acc[r][0] = _mm256_maskload_ps(row, m0), acc[r][1] = _mm256_maskload_ps(row + 8, m1);
    }
    for (int k = 0; k < kc; k++, ap += a_ks, bp += b_ks) {
        __m256 b0 = _mm256_loadu_ps(bp), b1 = _mm256_loadu_ps(bp + 8);
#pragma GCC unroll 6
        for (int r = 0; r < GEMM_MR; r++) {
            __m256 a = _mm256_broadcast_ss(ap + r * a_rs);
            acc[r][0] = _mm256_fmadd_ps(a, b0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(a, b1, acc[r][1]);
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < GEMM_MR; r++) {  // a constant bound: acc stays in registers
        float *row = o + (size_t)r * ldo;
        if (r >= nr) break;
        if (full) _mm256_storeu_ps(row, acc[r][0]), _mm256_storeu_ps(row + 8, acc[r][1]);
        else _mm256_maskstore_ps(row, m0, acc[r][0]), _mm256_maskstore_ps(row + 8, m1, acc[r][1]);
    }
}
#elif defined(__aarch64__)
#include <arm_neon.h>
#define GEMM_MR 6
#define GEMM_NR 16
// the NEON kernel (ARM: Apple's M chips, Linux on ARM): tile (nr <= 6, nc <= 16) of out at o
// (row stride ldo); 24 of the 32 registers hold accumulators (the portable 8 x 16 spilled)
static inline __attribute__((always_inline)) void gemm_kernel(const float *ap, int a_rs, int a_ks, const float *bp, int b_ks, int kc, float *o,
                                                               int ldo, int nr, int nc, int load, const float *next) {
    (void)next;
    float edge[GEMM_MR * GEMM_NR];  // a partial tile, through the stack
    int full = nr == GEMM_MR && nc == GEMM_NR, ldt = full ? ldo : GEMM_NR;
    float *t = full ? o : edge;
    if (!full && load) {
        memset(edge, 0, sizeof(edge));
        for (int r = 0; r < nr; r++) memcpy(edge + r * GEMM_NR, o + (size_t)r * ldo, (size_t)nc * sizeof(float));
    }
    float32x4_t acc[GEMM_MR][4];
#pragma GCC unroll 6
    for (int r = 0; r < GEMM_MR; r++)
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++) acc[r][v] = load ? vld1q_f32(t + (size_t)r * ldt + 4 * v) : vdupq_n_f32(0.0f);
    for (int k = 0; k < kc; k++, ap += a_ks, bp += b_ks) {
        float32x4_t b0 = vld1q_f32(bp), b1 = vld1q_f32(bp + 4), b2 = vld1q_f32(bp + 8), b3 = vld1q_f32(bp + 12);
#pragma GCC unroll 6
        for (int r = 0; r < GEMM_MR; r++) {
            float32x4_t a = vdupq_n_f32(ap[r * a_rs]);
            acc[r][0] = vfmaq_f32(acc[r][0], b0, a);  // acc + b * a, one rounding: fmaf(a, b, acc)
            acc[r][1] = vfmaq_f32(acc[r][1], b1, a);
            acc[r][2] = vfmaq_f32(acc[r][2], b2, a);
            acc[r][3] = vfmaq_f32(acc[r][3], b3, a);
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < GEMM_MR; r++)
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++) vst1q_f32(t + (size_t)r * ldt + 4 * v, acc[r][v]);
    for (int r = 0; r < nr && !full; r++) memcpy(o + (size_t)r * ldo, edge + r * GEMM_NR, (size_t)nc * sizeof(float));
}
#else
#define GEMM_MR 8
#define GEMM_NR 16
// the portable kernel: tile (nr <= 8, nc <= 16) of out at o (row stride ldo)
static inline __attribute__((always_inline)) void gemm_kernel(const float *ap, int a_rs, int a_ks, const float *bp, int b_ks, int kc, float *o,
                                                               int ldo, int nr, int nc, int load, const float *next) {
    (void)next;
    float acc[GEMM_MR][GEMM_NR] = {{0.0f}};
    for (int r = 0; r < nr && load; r++)
        for (int c = 0; c < nc; c++) acc[r][c] = o[(size_t)r * ldo + c];
    for (int k = 0; k < kc; k++, ap += a_ks, bp += b_ks)
        for (int r = 0; r < GEMM_MR; r++)
#pragma omp simd
            for (int c = 0; c < GEMM_NR; c++) acc[r][c] = fmaf(ap[r * a_rs], bp[c], acc[r][c]);
    for (int r = 0; r < nr; r++)
        for (int c = 0; c < nc; c++) o[(size_t)r * ldo + c] = acc[r][c];
}
#endif

// Panels p_lo..p_hi-1 of op(A): rows i = p*MR.., k0..k0+kc-1, each as Ap[k][r] (rows past
// N are 0). Panel by panel: the writes are contiguous and a panel's reads stay in L1.
static inline void pack_a(float *Ap, const float *A, int N, int K, int a_trans, int p_lo, int p_hi, int k0, int kc) {
    for (int p = p_lo; p < p_hi; p++, Ap += (size_t)GEMM_MR * kc) {
        int i0 = p * GEMM_MR, rows = N - i0 < GEMM_MR ? N - i0 : GEMM_MR;
        if (rows < GEMM_MR) memset(Ap, 0, (size_t)kc * GEMM_MR * sizeof(float));
        if (a_trans && rows == GEMM_MR)  // A (K,N): op(A)'s rows are columns of A, MR contiguous floats
            for (int k = 0; k < kc; k++)
                for (int r = 0; r < GEMM_MR; r++) Ap[(size_t)k * GEMM_MR + r] = A[(size_t)(k0 + k) * N + i0 + r];
        else if (a_trans)
            for (int k = 0; k < kc; k++)
                for (int r = 0; r < rows; r++) Ap[(size_t)k * GEMM_MR + r] = A[(size_t)(k0 + k) * N + i0 + r];
        else
            for (int r = 0; r < rows; r++)
                for (int k = 0; k < kc; k++) Ap[(size_t)k * GEMM_MR + r] = A[(size_t)(i0 + r) * K + k0 + k];
    }
}

// Panel q of op(B): columns j = j0 + q*NR.., rows k0..k0+kc-1, as Bp[k][c] (columns past M are 0).
static inline void pack_b_panel(float *Bp, const float *B, int K, int M, int b_trans, int j0, int q, int k0, int kc) {
    int jq = j0 + q * GEMM_NR, cols = M - jq < GEMM_NR ? M - jq : GEMM_NR;
    if (cols < GEMM_NR) memset(Bp, 0, (size_t)kc * GEMM_NR * sizeof(float));
    if (b_trans)  // B (M,K): the panel's columns are rows of B
        for (int c = 0; c < cols; c++)
            for (int k = 0; k < kc; k++) Bp[(size_t)k * GEMM_NR + c] = B[(size_t)(jq + c) * K + k0 + k];
    else
        for (int k = 0; k < kc; k++)  // a loop the compiler vectorizes, not a memcpy call per row of the panel
            for (int c = 0; c < cols; c++) Bp[(size_t)k * GEMM_NR + c] = B[(size_t)(k0 + k) * M + jq + c];
}

// The packed blocks' bytes for products with at most max_rows rows of op(A) (memory plans)
static inline double gemm_buffer_bytes(int max_rows) {
    return sizeof(float) * ((double)(max_rows + GEMM_MR) * GEMM_KC + (double)((GEMM_NC + GEMM_NR - 1) / GEMM_NR * GEMM_NR) * GEMM_KC);
}

// a 64-byte aligned buffer of at least n floats, reallocated only when it must grow
static inline float *gemm_buffer(float *buf, size_t *cap, size_t n) {
    if (n <= *cap) return buf;
    free(buf);
    buf = (float *)aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
    if (!buf) fail("out of memory allocating %zu bytes for a matrix product", n * sizeof(float));
    *cap = n;
    return buf;
}

// The tall product: out (N,M) far larger than the caches, with few columns (M <= NC) and
// several k blocks: the LM head's weight gradient dwte (V,C) += dlogits^T x. gemm() would
// sweep all of out once per k block (77 MB read and written 6 times at the 10m shapes) and
// pack all of op(A) per block. Here op(B) is packed whole once (K x M: 3 MB there), and each
// thread takes chunks of GEMM_TALL_ROWS rows of out, running every k block over a chunk
// before the next: the chunk's tiles of out stay in L2 across the k blocks. Each element of
// out is still one fused multiply-add chain over k in order: the same bits as gemm().
// Each row of op(A)'s block is a short piece of a row of dlogits, in a page of its own: the
// next block's pieces are prefetched while this one computes, a few after each kernel call.
// Measured on 2 AMD cores (dev/bench_gemm.c, dwte at the 10m shapes): 79-81% of peak ->
// 86-87% with chunks of 48 rows (96 rows: 77-83%, 384: 71%); with the operands in huge
// pages (big_calloc) 86-89%, and with the prefetch 88-91% (medians of 6 interleaved runs
// 88.1% -> 90.0%).
#define GEMM_TALL_ROWS 48  // rows of out per chunk (whole panels of every ISA's MR): 74 KB of out at M 384
#define GEMM_TALL_BYTES (64.0 * 1024 * 1024)

// Whether gemm() takes the tall product: a weight gradient (a_trans) whose out is at least
// GEMM_TALL_BYTES, with M <= NC and more than one k block
static inline int gemm_is_tall(int N, int K, int M, int a_trans) {
    return a_trans && M <= GEMM_NC && K > GEMM_KC && (double)N * M * sizeof(float) >= GEMM_TALL_BYTES;
}

static inline void gemm_tall(float *out, const float *A, const float *B, int N, int K, int M, int accumulate, int a_trans,
                             int b_trans) {
    static float *Ap, *Bp;
    static size_t a_cap, b_cap;
    int nk = (K + GEMM_KC - 1) / GEMM_KC, kcmax = (K + nk - 1) / nk;
    int np = (N + GEMM_MR - 1) / GEMM_MR, nq = (M + GEMM_NR - 1) / GEMM_NR;
    int cp = GEMM_TALL_ROWS / GEMM_MR, chunks = (np + cp - 1) / cp, threads = 1;  // cp: panels per chunk
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    Bp = gemm_buffer(Bp, &b_cap, (size_t)nq * GEMM_NR * K);  // k block at k0: Bp + k0 * nq * NR, its panels in turn
    Ap = gemm_buffer(Ap, &a_cap, (size_t)threads * GEMM_TALL_ROWS * kcmax);
#pragma omp parallel
    {
        int thread = 0;
#ifdef _OPENMP
        thread = omp_get_thread_num();
#endif
#pragma omp for collapse(2)
        for (int kb = 0; kb < nk; kb++)
            for (int q = 0; q < nq; q++) {
                int k0 = kb * kcmax, kc = K - k0 < kcmax ? K - k0 : kcmax;
                pack_b_panel(Bp + (size_t)k0 * nq * GEMM_NR + (size_t)q * GEMM_NR * kc, B, K, M, b_trans, 0, q, k0, kc);
            }
        float *Apt = Ap + (size_t)thread * GEMM_TALL_ROWS * kcmax;
#pragma omp for schedule(dynamic, 1)
        for (int ch = 0; ch < chunks; ch++) {
            int p_lo = ch * cp, p_hi = p_lo + cp < np ? p_lo + cp : np;
            int i_lo = p_lo * GEMM_MR, i_hi = p_hi * GEMM_MR < N ? p_hi * GEMM_MR : N;  // the chunk's rows of out
            for (int k0 = 0; k0 < K; k0 += kcmax) {
                int kc = K - k0 < kcmax ? K - k0 : kcmax, load = accumulate || k0 > 0;
                pack_a(Apt, A, N, K, a_trans, p_lo, p_hi, k0, kc);
                const float *bk = Bp + (size_t)k0 * nq * GEMM_NR;
                // the next block's rows k0 + kc.. of A (K,N), the chunk's columns, fetched pf_per a call
                int pf_rows = a_trans && k0 + kc < K ? (K - k0 - kc < kcmax ? K - k0 - kc : kcmax) : 0, pf_k = 0;
                int pf_per = (pf_rows + (p_hi - p_lo) * nq - 1) / ((p_hi - p_lo) * nq);  // rows per kernel call
                for (int p = p_lo; p < p_hi; p++) {
                    int i = p * GEMM_MR, nr = N - i < GEMM_MR ? N - i : GEMM_MR;
                    for (int q = 0; q < nq; q++) {
                        int j = q * GEMM_NR, nc = M - j < GEMM_NR ? M - j : GEMM_NR;
                        const float *next = NULL;  // the next whole tile: along the row, or the next rows' first
                        if (q + 1 < nq && nr == GEMM_MR && j + 2 * GEMM_NR <= M) next = out + (size_t)i * M + j + GEMM_NR;
                        if (q + 1 == nq && p + 1 < p_hi && i + 2 * GEMM_MR <= N) next = out + (size_t)(i + GEMM_MR) * M;
                        gemm_kernel(Apt + (size_t)(p - p_lo) * GEMM_MR * kc, 1, GEMM_MR, bk + (size_t)q * GEMM_NR * kc, GEMM_NR,
                                    kc, out + (size_t)i * M + j, M, nr, nc, load, next);
                        for (int e = 0; e < pf_per && pf_k < pf_rows; e++, pf_k++)
                            for (int c = i_lo; c < i_hi; c += 16) __builtin_prefetch(A + (size_t)(k0 + kc + pf_k) * N + c, 0, 2);
                    }
                }
            }
        }
    }
}

// The tall product's buffers (memory plans) for the weight gradient out (N,M) += A^T B over
// K rows (tokens), or 0 when gemm() does not take it
static inline double gemm_tall_bytes(int N, int K, int M) {
    if (!gemm_is_tall(N, K, M, 1)) return 0.0;
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    return sizeof(float) * ((double)K * ((M + GEMM_NR - 1) / GEMM_NR * GEMM_NR) + (double)threads * GEMM_TALL_ROWS * GEMM_KC);
}

static inline void gemm(float *out, const float *A, const float *B, int N, int K, int M, int accumulate, int a_trans,
                        int b_trans) {
    if (K == 0) {
        if (!accumulate) memset(out, 0, (size_t)N * M * sizeof(float));
        return;
    }
    if (gemm_is_tall(N, K, M, a_trans)) {
        gemm_tall(out, A, B, N, K, M, accumulate, a_trans, b_trans);
        return;
    }
    static float *Ap, *Bp;  // packed blocks, grown once (the products run one at a time)
    static size_t a_cap, b_cap;
    int nk = (K + GEMM_KC - 1) / GEMM_KC, kcmax = (K + nk - 1) / nk;  // nk blocks of k, equal but the last
    int np = (N + GEMM_MR - 1) / GEMM_MR, nqmax = (GEMM_NC + GEMM_NR - 1) / GEMM_NR;
    // in place (the top of the file says why): A's whole panels with one block of NC columns,
    // and a weight gradient's plain B too
    int in_place = M <= GEMM_NC, b_in_place = in_place && a_trans && !b_trans;
    int a_rs = a_trans ? 1 : K, a_ks = a_trans ? N : 1;  // in place: element (r,k) of op(A) at A[r * a_rs + k * a_ks]
    int threads_max = 1;
#ifdef _OPENMP
    threads_max = omp_get_max_threads();
#endif
    // in place, each thread packs its own copy of A's partial panel
    Ap = gemm_buffer(Ap, &a_cap, (size_t)(in_place ? threads_max : np) * GEMM_MR * kcmax);
    Bp = gemm_buffer(Bp, &b_cap, (size_t)nqmax * GEMM_NR * kcmax);
#pragma omp parallel
    {
        int thread = 0, threads = 1;
#ifdef _OPENMP
        thread = omp_get_thread_num();
        threads = omp_get_num_threads();
#endif
        int p0 = in_place ? N / GEMM_MR : 0;  // panels from p0 on are packed
        float *own = Ap + (size_t)thread * GEMM_MR * kcmax;  // in place: this thread's partial panel
        for (int k0 = 0; k0 < K; k0 += kcmax) {
            int kc = K - k0 < kcmax ? K - k0 : kcmax, load = accumulate || k0 > 0;
            if (in_place) {  // the partial panel, if any, for this thread alone
                if (p0 < np) pack_a(own, A, N, K, a_trans, p0, np, k0, kc);
            } else {  // this thread's share of every panel
                int p_lo = np * thread / threads, p_hi = np * (thread + 1) / threads;
                if (p_hi > p_lo) pack_a(Ap + (size_t)p_lo * GEMM_MR * kc, A, N, K, a_trans, p_lo, p_hi, k0, kc);
#pragma omp barrier
            }
            for (int j0 = 0; j0 < M; j0 += GEMM_NC) {
                // this thread's B panels q_lo..q_hi-1 of the block: packed, then swept by every A panel
                int nq = ((M - j0 < GEMM_NC ? M - j0 : GEMM_NC) + GEMM_NR - 1) / GEMM_NR;
                int q_lo = nq * thread / threads, q_hi = nq * (thread + 1) / threads;
                if (j0 > 0 && M - j0 < GEMM_NC) {  // a shorter last block moves the ranges: wait for the others
#pragma omp barrier
                }
                for (int q = q_lo; q < q_hi; q++)
                    if (!b_in_place || j0 + (q + 1) * GEMM_NR > M) pack_b_panel(Bp + (size_t)q * GEMM_NR * kcmax, B, K, M, b_trans, j0, q, k0, kc);
                for (int p = 0; p < np; p++) {
                    int i = p * GEMM_MR, nr = N - i < GEMM_MR ? N - i : GEMM_MR;
                    for (int q = q_lo; q < q_hi; q++) {
                        int j = j0 + q * GEMM_NR, nc = M - j < GEMM_NR ? M - j : GEMM_NR;
                        // the tile after this one when it is whole: the next panel of B, or the next rows
                        const float *next = NULL;
                        if (q + 1 < q_hi && nr == GEMM_MR && j + 2 * GEMM_NR <= M) next = out + (size_t)i * M + j + GEMM_NR;
                        if (q + 1 == q_hi && i + 2 * GEMM_MR <= N && j0 + (q_lo + 1) * GEMM_NR <= M)
                            next = out + (size_t)(i + GEMM_MR) * M + j0 + q_lo * GEMM_NR;
                        int b_here = b_in_place && nc == GEMM_NR;  // B's panel in place: row k at B[(k0 + k) * M + j]
                        // a packed panel sits at a fixed place whatever the block's kc: in place, a thread
                        // may already pack its next block while the others read their panels of this one
                        const float *bp = b_here ? B + (size_t)k0 * M + j : Bp + (size_t)q * GEMM_NR * kcmax;
                        int b_ks = b_here ? M : GEMM_NR;
                        float *o = out + (size_t)i * M + j;
                        if (p < p0)  // in place
                            gemm_kernel(A + (size_t)i * a_rs + (size_t)k0 * a_ks, a_rs, a_ks, bp, b_ks, kc, o, M, nr, nc, load, next);
                        else  // packed: element (r,k) at [k * MR + r] of the panel
                            gemm_kernel(in_place ? own : Ap + (size_t)p * GEMM_MR * kc, 1, GEMM_MR, bp, b_ks, kc, o, M, nr, nc, load, next);
                    }
                }
            }
            if (!in_place) {
#pragma omp barrier
            }
        }
    }
}

// out (N,M) (+)= A (N,K) . B (K,M), or with a_trans A^T . B for an A stored (K,N)
static inline void gemm_nn(float *out, const float *A, const float *B, int N, int K, int M, int accumulate, int a_trans) {
    gemm(out, A, B, N, K, M, accumulate, a_trans, 0);
}

// out (N,M) = A (N,K) . Bt^T, Bt stored (M,K): a bias-free nn.Linear with Bt its weight
static inline void gemm_nt(float *out, const float *A, const float *Bt, int N, int K, int M) {
    gemm(out, A, Bt, N, K, M, 0, 0, 1);
}

// ----------------------------------------------------------------------------
// The serial product: attention's per-(b,h) products, called by one thread inside a parallel
// loop. out (N,M) (+)= op(A) . Bm with row strides ldc, lda, ldb, read in place (no
// packing); op(A) is A or, with a_trans, A stored transposed. Each element is out
// (accumulate) or 0 followed by fmaf over k in order, as in the packed product.
// Attention's triangular shapes: CAUSAL_OUT computes only tiles that touch s <= t (the
// softmax overwrites the rest of each row); LOWER_A / UPPER_A skip the zero half of a
// triangular op(A) (skipping a term 0 * b leaves the sum unchanged).

enum { GEMM_FULL, GEMM_CAUSAL_OUT, GEMM_LOWER_A, GEMM_UPPER_A };
typedef struct {
    float *out;
    const float *A, *Bm;
    int ldc, lda, ldb, K, accumulate, shape;
    int a_trans;  // A is stored transposed: element (r,k) at A[k * lda + r]
} Gemm;

#define GEMM_EDGE_KC 128  // k per step of an edge tile (its stack copy of the partial operand)

// The MR x NR tile of out at (r0, c0), nr <= MR rows and nc <= NR columns: the register
// kernel on A and Bm in place; at the edges the partial operand (fewer than MR rows of
// op(A), fewer than NR columns of Bm) is copied to the stack, zero-padded, GEMM_EDGE_KC
// values of k at a time.
static inline void gemm_tile(const Gemm *g, int r0, int nr, int c0, int nc) {
    float *o = g->out + (size_t)r0 * g->ldc + c0;
    if (g->shape == GEMM_CAUSAL_OUT && c0 > r0 + nr - 1) return;  // wholly above the diagonal
    int k_lo = g->shape == GEMM_UPPER_A ? r0 : 0;
    int k_hi = g->shape == GEMM_LOWER_A && r0 + nr < g->K ? r0 + nr : g->K;
    int a_rs = g->a_trans ? 1 : g->lda, a_ks = g->a_trans ? g->lda : 1;  // strides of op(A)'s rows and k
    const float *a = g->A + (size_t)r0 * a_rs + (size_t)k_lo * a_ks, *b = g->Bm + (size_t)k_lo * g->ldb + c0;
    int a_edge = nr < GEMM_MR, b_edge = nc < GEMM_NR, kn = k_hi - k_lo;
    if (!a_edge && !b_edge) {
        gemm_kernel(a, a_rs, a_ks, b, g->ldb, kn, o, g->ldc, nr, nc, g->accumulate, NULL);
        return;
    }
    float ap[GEMM_EDGE_KC * GEMM_MR], bp[GEMM_EDGE_KC * GEMM_NR];
    int k0 = 0;
    do {  // once at least: kn may be 0 (out = 0 or unchanged)
        int kc = kn - k0 < GEMM_EDGE_KC ? kn - k0 : GEMM_EDGE_KC;
        const float *ak = a + (size_t)k0 * a_ks, *bk = b + (size_t)k0 * g->ldb;
        for (int k = 0; a_edge && k < kc; k++)
            for (int r = 0; r < GEMM_MR; r++) ap[k * GEMM_MR + r] = r < nr ? ak[(size_t)r * a_rs + (size_t)k * a_ks] : 0.0f;
        for (int k = 0; b_edge && k < kc; k++)
            for (int c = 0; c < GEMM_NR; c++) bp[k * GEMM_NR + c] = c < nc ? bk[(size_t)k * g->ldb + c] : 0.0f;
        gemm_kernel(a_edge ? ap : ak, a_edge ? 1 : a_rs, a_edge ? GEMM_MR : a_ks, b_edge ? bp : bk, b_edge ? GEMM_NR : g->ldb,
                    kc, o, g->ldc, nr, nc, g->accumulate || k0 > 0, NULL);
    } while ((k0 += GEMM_EDGE_KC) < kn);
}

static inline void gemm_serial(const Gemm *g, int N, int M) {
    for (int c0 = 0; c0 < M; c0 += GEMM_NR)
        for (int r0 = 0; r0 < N; r0 += GEMM_MR)
            gemm_tile(g, r0, N - r0 < GEMM_MR ? N - r0 : GEMM_MR, c0, M - c0 < GEMM_NR ? M - c0 : GEMM_NR);
}

// The definition, for the tests: out (N,M) (+)= op(A) . op(B), one fmaf chain per element.
static inline void gemm_reference(float *out, const float *A, const float *B, int N, int K, int M, int accumulate,
                                  int a_trans, int b_trans) {
    for (int i = 0; i < N; i++)
        for (int j = 0; j < M; j++) {
            float s = accumulate ? out[(size_t)i * M + j] : 0.0f;
            for (int k = 0; k < K; k++)
                s = fmaf(a_trans ? A[(size_t)k * N + i] : A[(size_t)i * K + k], b_trans ? B[(size_t)j * K + k] : B[(size_t)k * M + j], s);
            out[(size_t)i * M + j] = s;
        }
}
