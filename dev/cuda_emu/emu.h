// dev/cuda_emu/emu.h: just enough of CUDA to run train_gpt.cu's kernel bodies on the CPU,
// unchanged, in fp32 (floatX = float, as in train_gpt_fp32; test_kernels.cpp also compiles
// them with floatX = __nv_bfloat16, as in train_gpt). One block at a time; its
// threads are std::threads, __syncthreads() a barrier over them, a thread that returns
// leaves the barrier (as on the GPU). __shared__ arrays are function statics (one block
// runs at a time, so they are the block's), dynamic shared memory a buffer filled with NaN
// (a read before a write shows up in the results). Warp operations (the shuffles behind
// warp_sum, warp_max, __shfl_sync) meet at a barrier per warp: all 32 lanes must take part,
// as the full mask 0xffffffff requires on the GPU. Slow, and blind to races that only
// real hardware shows; what it checks is indexing, bounds, barriers and the arithmetic.
// For the bf16 build's kernels: __nv_bfloat16 with round-to-nearest-even conversions, a
// minimal nvcuda::wmma, and llmc/cuda/mma.cuh's PTX (mma.sync, ldmatrix, cp.async) with the
// PTX ISA's register layouts (below).
#pragma once
#include <algorithm>
#include <barrier>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>
using std::max;
using std::min;

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
// the 16-byte vector that 128-bit loads and stores go through (Pack128); may_alias, as the
// kernels move floats and bf16 through it like CUDA code does
struct __attribute__((may_alias, aligned(16))) int4 {
    int x, y, z, w;
};
inline int4 make_int4(int x, int y, int z, int w) { return int4{x, y, z, w}; }
thread_local dim3 threadIdx, blockIdx;
static dim3 blockDim, gridDim;
static std::barrier<> *emu_block_barrier;
static std::vector<std::barrier<> *> emu_warp_barrier;
static float emu_warp_buf[32][32];  // [warp][lane]
static float *emu_dynamic_smem;
static std::mutex emu_atomic;

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(x)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
#define __syncthreads() emu_block_barrier->arrive_and_wait()
#ifndef EMU_WHOLE_TRAINER  // the trainer defines these itself
typedef float floatX;
inline float to_f(float v) { return v; }
inline float to_x(float v) { return v; }
#endif

inline int emu_lane() { return (threadIdx.y * blockDim.x + threadIdx.x) % 32; }
inline int emu_warp() { return (threadIdx.y * blockDim.x + threadIdx.x) / 32; }
// every lane of the warp gets lane src's v
inline float __shfl_sync(unsigned, float v, int src) {
    std::barrier<> *b = emu_warp_barrier[emu_warp()];
    float *buf = emu_warp_buf[emu_warp()];
    b->arrive_and_wait();
    buf[emu_lane()] = v;
    b->arrive_and_wait();
    float r = buf[src & 31];
    b->arrive_and_wait();
    return r;
}
inline float __shfl_xor_sync(unsigned, float v, int mask) {
    std::barrier<> *b = emu_warp_barrier[emu_warp()];
    float *buf = emu_warp_buf[emu_warp()];
    b->arrive_and_wait();
    buf[emu_lane()] = v;
    b->arrive_and_wait();
    float r = buf[emu_lane() ^ mask];
    b->arrive_and_wait();
    return r;
}
inline void __syncwarp() { emu_warp_barrier[emu_warp()]->arrive_and_wait(); }
// round-to-nearest products and sums, never fused (run.sh builds with -ffp-contract=off)
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float rsqrtf(float v) { return 1.0f / sqrtf(v); }
inline float atomicAdd(float *p, float v) {
    std::lock_guard<std::mutex> g(emu_atomic);
    float old = *p;
    *p = old + v;
    return old;
}

// dynamic shared memory starts 128-byte aligned (the kernels declare __align__(128))
static float *emu_align128(float *p) { return (float *)(((uintptr_t)p + 127) / 128 * 128); }

// EMU_TRACE=FILE (coverage.sh): each launch appends the kernel's name to FILE and runs
// nothing, nor does cuBLAS: which kernels a run launches, in seconds (device memory stays
// zero, so the host code sees finite losses and token 0).
static FILE *emu_trace() {
    static FILE *f;
    static int opened;
    if (!opened) {
        opened = 1;
        const char *path = getenv("EMU_TRACE");
        if (path && *path && !(f = fopen(path, "a"))) { fprintf(stderr, "EMU_TRACE: cannot open %s\n", path); exit(2); }
    }
    return f;
}
static int emu_traced(const char *name) {
    FILE *f = emu_trace();
    if (f) fprintf(f, "%s\n", name ? name : "?");
    return f != NULL;
}

static void emu_cp_check_done();  // below, with cp.async

// kernel<<<grid, block, smem>>>(...) becomes emu_launch(grid, block, smem, [&] { kernel(...); }, "kernel")
template <class F>
static void emu_launch(dim3 grid, dim3 block, size_t smem, F body, const char *name = nullptr) {
    if (emu_traced(name)) return;
    gridDim = grid;
    blockDim = block;
    unsigned nt = block.x * block.y * block.z;
    if (nt % 32) { fprintf(stderr, "emu_launch: %u threads is not whole warps\n", nt); exit(2); }
    std::vector<float> dyn(smem / sizeof(float) + 33);
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) {
                std::fill(dyn.begin(), dyn.end(), NAN);
                emu_dynamic_smem = emu_align128(dyn.data());
                std::barrier<> bar(nt);
                emu_block_barrier = &bar;
                std::vector<std::barrier<> *> warps;
                for (unsigned w = 0; w < nt / 32; w++) warps.push_back(new std::barrier<>(32));
                emu_warp_barrier = warps;
                std::vector<std::thread> threads;
                for (unsigned t = 0; t < nt; t++)
                    threads.emplace_back([&, t, x, y, z] {
                        threadIdx = dim3(t % block.x, t / block.x % block.y, t / (block.x * block.y));
                        blockIdx = dim3(x, y, z);
                        body();
                        emu_cp_check_done();
                        bar.arrive_and_drop();  // an exited thread no longer holds the block's barriers
                    });
                for (std::thread &t : threads) t.join();
                for (std::barrier<> *w : warps) delete w;
            }
}

// A kernel with no barrier and no warp operation: its threads one after another on this thread.
template <class F>
static void emu_launch_serial(dim3 grid, dim3 block, size_t smem, F body, const char *name = nullptr) {
    if (emu_traced(name)) return;
    gridDim = grid;
    blockDim = block;
    std::vector<float> dyn(smem / sizeof(float) + 33, NAN);
    emu_dynamic_smem = emu_align128(dyn.data());
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++)
                for (unsigned t = 0; t < block.x * block.y * block.z; t++) {
                    threadIdx = dim3(t % block.x, t / block.x % block.y, t / (block.x * block.y));
                    blockIdx = dim3(x, y, z);
                    body();
                }
}

// ----------------------------------------------------------------------------
// bf16: the upper 16 bits of an fp32; float -> bf16 rounds to nearest even (as
// __float2bfloat16 does), NaN stays NaN. Values only: no arithmetic on the type, only the
// explicit (float) cast that host code uses.
struct __nv_bfloat16 {
    unsigned short x;
    explicit operator float() const {
        uint32_t u = (uint32_t)x << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
};
inline float __bfloat162float(__nv_bfloat16 v) {
    uint32_t u = (uint32_t)v.x << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
inline __nv_bfloat16 __float2bfloat16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return __nv_bfloat16{(unsigned short)((u >> 16) | 0x40)};  // quiet NaN
    u += 0x7fffu + ((u >> 16) & 1u);  // to nearest, ties to even (overflow gives inf)
    return __nv_bfloat16{(unsigned short)(u >> 16)};
}

// ----------------------------------------------------------------------------
// nvcuda::wmma, the m16n16k16 shape with bf16 a/b and fp32 accumulators only. The model:
// every lane of the warp holds the whole tile (num_elements = 256; on the GPU each lane
// holds 8 of them in an unspecified layout, so a kernel may touch x[i] only in ways that
// do not depend on the layout, e.g. the same operation on every element). The _sync calls
// are warp-collective: all 32 lanes must make them (each meets the others at the warp's
// barrier on entry, so what the warp wrote before the call is visible to it; the GPU needs
// a __syncwarp() there, which this model does not check). A store writes each lane's share
// (elements lane, lane + 32, ...) and does not wait: reading what other lanes stored needs
// a __syncwarp(), as on the GPU. Pointers must be 32-byte aligned and leading dimensions
// multiples of 16 bytes (checked: the GPU requires both). mma_sync multiplies exactly (bf16
// products fit in fp32) and adds in fp32, in k order.
namespace nvcuda {
namespace wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };
template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment {
    static_assert(M == 16 && N == 16 && K == 16, "only m16n16k16");
    static_assert(std::is_same<Use, accumulator>::value ? std::is_same<T, float>::value
                                                        : std::is_same<T, __nv_bfloat16>::value,
                  "bf16 a/b, fp32 accumulators");
    static constexpr int num_elements = 256;
    T x[256];  // element (i, j) of the 16 x 16 tile at x[16 i + j] (a: i = m, j = k; b: i = k, j = n)
};
inline void emu_wmma_check(const void *p, unsigned ldm, size_t elem, const char *what) {
    if ((uintptr_t)p % 32 || (ldm * elem) % 16) {
        fprintf(stderr, "FAIL: wmma::%s: pointer %p not 32-byte aligned or ldm %u not a multiple of 16 bytes\n", what, p,
                ldm);
        exit(1);
    }
}
template <class Use, class Layout>
inline void load_matrix_sync(fragment<Use, 16, 16, 16, __nv_bfloat16, Layout> &f, const __nv_bfloat16 *p, unsigned ldm) {
    static_assert(std::is_same<Layout, row_major>::value || std::is_same<Layout, col_major>::value, "a/b need a layout");
    emu_wmma_check(p, ldm, 2, "load_matrix_sync");
    emu_warp_barrier[emu_warp()]->arrive_and_wait();
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++)
            f.x[16 * i + j] = std::is_same<Layout, row_major>::value ? p[(size_t)i * ldm + j] : p[i + (size_t)j * ldm];
}
inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float> &f, const float *p, unsigned ldm, layout_t layout) {
    emu_wmma_check(p, ldm, 4, "load_matrix_sync");
    emu_warp_barrier[emu_warp()]->arrive_and_wait();
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) f.x[16 * i + j] = layout == mem_row_major ? p[(size_t)i * ldm + j] : p[i + (size_t)j * ldm];
}
inline void store_matrix_sync(float *p, const fragment<accumulator, 16, 16, 16, float> &f, unsigned ldm, layout_t layout) {
    emu_wmma_check(p, ldm, 4, "store_matrix_sync");
    emu_warp_barrier[emu_warp()]->arrive_and_wait();
    for (int e = emu_lane(); e < 256; e += 32) {
        int i = e / 16, j = e % 16;
        (layout == mem_row_major ? p[(size_t)i * ldm + j] : p[i + (size_t)j * ldm]) = f.x[e];
    }
}
inline void emu_set(float &e, float v) { e = v; }
inline void emu_set(__nv_bfloat16 &e, float v) { e = __float2bfloat16(v); }
template <class Use, class T, class Layout>
inline void fill_fragment(fragment<Use, 16, 16, 16, T, Layout> &f, float v) {
    for (T &e : f.x) emu_set(e, v);
}
template <class La, class Lb>
inline void mma_sync(fragment<accumulator, 16, 16, 16, float> &d, const fragment<matrix_a, 16, 16, 16, __nv_bfloat16, La> &a,
                     const fragment<matrix_b, 16, 16, 16, __nv_bfloat16, Lb> &b,
                     const fragment<accumulator, 16, 16, 16, float> &c) {
    emu_warp_barrier[emu_warp()]->arrive_and_wait();
    float r[256];
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) {
            float s = c.x[16 * i + j];
            for (int k = 0; k < 16; k++) s += __bfloat162float(a.x[16 * i + k]) * __bfloat162float(b.x[16 * k + j]);
            r[16 * i + j] = s;
        }
    memcpy(d.x, r, sizeof(r));
}
}  // namespace wmma
}  // namespace nvcuda

// ----------------------------------------------------------------------------
// llmc/cuda/mma.cuh's PTX, emulated with the register layouts of the PTX ISA, exactly: a
// kernel that puts an element in the wrong lane, register or half gets wrong numbers here
// as on the GPU. g = lane / 4, c = lane % 4 (groupID and threadID_in_group).
//   mma m16n8k16 .row.col bf16: A (16x16) element (r, k) in lane (r % 8) * 4 + (k % 8) / 2,
//     register r / 8 + 2 (k / 8), half k % 2 (the low 16 bits hold the even k); B (16x8)
//     element (k, n) in lane 4 n + (k % 8) / 2, register k / 8, half k % 2; C/D (16x8 fp32)
//     element (r, n) in lane (r % 8) * 4 + n / 2, register 2 (r / 8) + n % 2. Products exact
//     (bf16 x bf16 fits fp32), summed in k order onto C.
//   ldmatrix .x4: lane l gives the address of row l % 8 of matrix l / 8 (16 bytes, 16-byte
//     aligned); register i of lane l gets matrix i's row l / 4, columns 2 (l % 4) and + 1, or
//     with .trans its column l / 4, rows 2 (l % 4) and + 1.
//   cp.async: each thread's copies wait in commit groups and happen at cp_async_wait<N>,
//     all but the newest N groups: a read of a tile before its wait sees the old bytes (the
//     NaN fill at first). A thread that ends with a copy not waited for fails the run.
static uint32_t emu_xchg[32][32][6];      // [warp][lane]: a lane's A and B registers
static const void *emu_xaddr[32][32];     // [warp][lane]: a lane's ldmatrix row address
inline float emu_bf16_half(uint32_t r, int hi) { return __bfloat162float(__nv_bfloat16{(unsigned short)(hi ? r >> 16 : r & 0xffff)}); }
inline uint32_t pack_bf16(float lo, float hi) { return (uint32_t)__float2bfloat16(hi).x << 16 | __float2bfloat16(lo).x; }
inline void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    int w = emu_warp(), l = emu_lane();
    std::barrier<> *bar = emu_warp_barrier[w];
    for (int i = 0; i < 4; i++) emu_xchg[w][l][i] = a[i];
    emu_xchg[w][l][4] = b[0];
    emu_xchg[w][l][5] = b[1];
    bar->arrive_and_wait();
    float out[4];
    for (int i = 0; i < 4; i++) {
        int r = l / 4 + 8 * (i / 2), n = l % 4 * 2 + i % 2;
        float s = d[i];
        for (int k = 0; k < 16; k++) {
            float av = emu_bf16_half(emu_xchg[w][(r % 8) * 4 + (k % 8) / 2][r / 8 + 2 * (k / 8)], k % 2);
            float bv = emu_bf16_half(emu_xchg[w][n * 4 + (k % 8) / 2][4 + k / 8], k % 2);
            s += av * bv;
        }
        out[i] = s;
    }
    bar->arrive_and_wait();  // every lane has read the registers before any lane's next call
    for (int i = 0; i < 4; i++) d[i] = out[i];
}
inline void emu_ldmatrix(uint32_t (&r)[4], const void *row, bool trans) {
    int w = emu_warp(), l = emu_lane();
    if ((uintptr_t)row % 16) {
        fprintf(stderr, "FAIL: ldmatrix: row address %p not 16-byte aligned\n", row);
        exit(1);
    }
    std::barrier<> *bar = emu_warp_barrier[w];
    emu_xaddr[w][l] = row;
    bar->arrive_and_wait();
    for (int i = 0; i < 4; i++) {
        const unsigned short *lo, *hi;
        if (!trans) {
            const unsigned short *p = (const unsigned short *)emu_xaddr[w][8 * i + l / 4];
            lo = p + 2 * (l % 4);
            hi = lo + 1;
        } else {
            lo = (const unsigned short *)emu_xaddr[w][8 * i + 2 * (l % 4)] + l / 4;
            hi = (const unsigned short *)emu_xaddr[w][8 * i + 2 * (l % 4) + 1] + l / 4;
        }
        r[i] = (uint32_t)*hi << 16 | *lo;
    }
    bar->arrive_and_wait();
}
inline void ldmatrix_x4(uint32_t (&r)[4], const void *row) { emu_ldmatrix(r, row, false); }
inline void ldmatrix_x4_trans(uint32_t (&r)[4], const void *row) { emu_ldmatrix(r, row, true); }
struct EmuCopy {
    void *dst;
    const void *src;  // NULL: 16 zero bytes
};
thread_local std::vector<EmuCopy> emu_cp_open;
thread_local std::vector<std::vector<EmuCopy>> emu_cp_groups;
inline void cp_async16(void *dst, const void *src, bool valid) {
    if ((uintptr_t)dst % 16 || (valid && (uintptr_t)src % 16)) {
        fprintf(stderr, "FAIL: cp.async: %p <- %p not 16-byte aligned\n", dst, src);
        exit(1);
    }
    emu_cp_open.push_back({dst, valid ? src : nullptr});
}
inline void cp_async_commit() {
    emu_cp_groups.push_back(emu_cp_open);
    emu_cp_open.clear();
}
template <int N>
inline void cp_async_wait() {
    while ((int)emu_cp_groups.size() > N) {
        for (const EmuCopy &c : emu_cp_groups.front()) {
            if (c.src) memcpy(c.dst, c.src, 16);
            else memset(c.dst, 0, 16);
        }
        emu_cp_groups.erase(emu_cp_groups.begin());
    }
}
static void emu_cp_check_done() {
    if (!emu_cp_open.empty() || !emu_cp_groups.empty()) {
        fprintf(stderr, "FAIL: a thread ended with cp.async copies not waited for\n");
        exit(1);
    }
}

// ----------------------------------------------------------------------------
// cuBLAS's two products as the trainer calls them, with their documented column-major
// meaning: C (m,n) = alpha op(A) (m,k) op(B) (k,n) + beta C, op(X) = X or X^T, X column-major
// with leading dimension ldx; batched: the matrices of batch i start i * stride elements
// further. Each matrix fp32 or bf16 (the bf16 build), sums in double, a bf16 C rounded to
// nearest even. A wrong transpose flag, leading dimension or stride in a caller gives wrong
// numbers here, as on the GPU.
typedef int cublasHandle_t;
typedef int cublasStatus_t;
enum cublasOperation_t { CUBLAS_OP_N, CUBLAS_OP_T };
enum cudaDataType { CUDA_R_32F, CUDA_R_16BF };
enum cublasComputeType_t { CUBLAS_COMPUTE_32F };
enum cublasGemmAlgo_t { CUBLAS_GEMM_DEFAULT };
#define CUBLAS_STATUS_SUCCESS 0

static inline double emu_blas_get(const void *p, cudaDataType t, size_t i) {
    return t == CUDA_R_32F ? (double)((const float *)p)[i] : (double)__bfloat162float(((const __nv_bfloat16 *)p)[i]);
}
static inline void emu_blas_put(void *p, cudaDataType t, size_t i, float v) {
    if (t == CUDA_R_32F) ((float *)p)[i] = v;
    else ((__nv_bfloat16 *)p)[i] = __float2bfloat16(v);
}
static inline cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m,
                                                        int n, int k, const void *alpha, const void *A, cudaDataType at,
                                                        int lda, long long sa, const void *B, cudaDataType bt, int ldb,
                                                        long long sb, const void *beta, void *C, cudaDataType ct, int ldc,
                                                        long long sc, int batch, cublasComputeType_t, cublasGemmAlgo_t) {
    if (lda < (ta == CUBLAS_OP_N ? m : k) || ldb < (tb == CUBLAS_OP_N ? k : n) || ldc < m) {  // as cuBLAS refuses
        fprintf(stderr, "FAIL: cuBLAS would refuse: m %d n %d k %d, op(A) %s lda %d, op(B) %s ldb %d, ldc %d\n", m, n, k,
                ta == CUBLAS_OP_N ? "N" : "T", lda, tb == CUBLAS_OP_N ? "N" : "T", ldb, ldc);
        return 1;
    }
    if (emu_trace()) return 0;  // tracing: the shapes are checked, nothing computed
    float al = *(const float *)alpha, be = *(const float *)beta;
    for (int bi = 0; bi < batch; bi++) {
        size_t a0 = (size_t)bi * sa, b0 = (size_t)bi * sb, c0 = (size_t)bi * sc;
        for (int j = 0; j < n; j++)
            for (int i = 0; i < m; i++) {
                double s = 0;
                for (int p = 0; p < k; p++)
                    s += emu_blas_get(A, at, a0 + (ta == CUBLAS_OP_N ? i + (size_t)p * lda : p + (size_t)i * lda)) *
                         emu_blas_get(B, bt, b0 + (tb == CUBLAS_OP_N ? p + (size_t)j * ldb : j + (size_t)p * ldb));
                size_t ci = c0 + i + (size_t)j * ldc;  // beta 0: C is not read (may be NaN)
                emu_blas_put(C, ct, ci, (float)(al * s + (be != 0.0f ? be * emu_blas_get(C, ct, ci) : 0.0)));
            }
    }
    return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                          const void *alpha, const void *A, cudaDataType at, int lda, const void *B,
                                          cudaDataType bt, int ldb, const void *beta, void *C, cudaDataType ct, int ldc,
                                          cublasComputeType_t ctype, cublasGemmAlgo_t algo) {
    return cublasGemmStridedBatchedEx(h, ta, tb, m, n, k, alpha, A, at, lda, 0, B, bt, ldb, 0, beta, C, ct, ldc, 0, 1,
                                      ctype, algo);
}
