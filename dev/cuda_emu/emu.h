// dev/cuda_emu/emu.h: just enough of CUDA to run train_gpt.cu's kernel bodies on the CPU,
// unchanged, in fp32 (floatX = float, as in train_gpt_fp32). One block at a time; its
// threads are std::threads, __syncthreads() a barrier over them, a thread that returns
// leaves the barrier (as on the GPU). __shared__ arrays are function statics (one block
// runs at a time, so they are the block's), dynamic shared memory a buffer filled with NaN
// (a read before a write shows up in the results). Warp operations (the shuffles behind
// warp_sum, warp_max, __shfl_sync) meet at a barrier per warp: all 32 lanes must take part,
// as the full mask 0xffffffff requires on the GPU. Slow, and blind to races that only
// real hardware shows; what it checks is indexing, bounds, barriers and the arithmetic.
#pragma once
#include <algorithm>
#include <atomic>
#include <barrier>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>
using std::max;
using std::min;

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
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
#define __syncthreads() emu_block_barrier->arrive_and_wait()
typedef float floatX;
inline float to_f(float v) { return v; }
inline float to_x(float v) { return v; }

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

// kernel<<<grid, block, smem>>>(...) becomes emu_launch(grid, block, smem, [&] { kernel(...); })
template <class F>
static void emu_launch(dim3 grid, dim3 block, size_t smem, F body) {
    gridDim = grid;
    blockDim = block;
    unsigned nt = block.x * block.y * block.z;
    if (nt % 32) { fprintf(stderr, "emu_launch: %u threads is not whole warps\n", nt); exit(2); }
    std::vector<float> dyn(smem / sizeof(float) + 1);
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) {
                std::fill(dyn.begin(), dyn.end(), NAN);
                emu_dynamic_smem = dyn.data();
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
                        bar.arrive_and_drop();  // an exited thread no longer holds the block's barriers
                    });
                for (std::thread &t : threads) t.join();
                for (std::barrier<> *w : warps) delete w;
            }
}
