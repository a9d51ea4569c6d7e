// llmc/cuda/encoder.cuh: the token embedding and the embedding tables' backward (no atomics: grouped
// on the host, summed in order).
#pragma once
#include "cuda_utils.cuh"

// embedding: x (N,C) = wte[tokens] * scale (embed_scale)      mirrors encoder_forward
__global__ void encoder_forward_kernel(floatX *x, const int *tokens, const floatX *wte, int N, int C, float scale) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)N * C) return;
    int n = (int)(i / C), c = (int)(i % C);
    x[i] = to_x(to_f(wte[(size_t)tokens[n] * C + c]) * scale);
}

// The embedding tables' backward without atomics, so that a run repeats to the bit: the N
// gradient rows of a micro-batch go to table rows (a token's, a position's), grouped by the
// host (scatter_build) into sc = order (N), start (n_rows + 1), row (n_rows), n_rows (1):
// table row row[u] gets the rows order[start[u]..start[u+1]) summed in that order.
#define SCATTER_INTS(N) (3 * (size_t)(N) + 2)
// dtable (rows,C) += dx (N,C) * scale grouped by sc; grid (N), one block per group
//                                              mirrors encoder_backward, learned_backward
__global__ void scatter_add_rows_kernel(float *dtable, const floatX *dx, const int *sc, int N, int C, float scale) {
    const int *order = sc, *start = sc + N, *row = sc + 2 * N + 1;
    int u = blockIdx.x;
    if (u >= sc[3 * N + 1]) return;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float sum = 0.0f;
        for (int j = start[u]; j < start[u + 1]; j++) sum += to_f(dx[(size_t)order[j] * C + c]) * scale;
        dtable[(size_t)row[u] * C + c] += sum;
    }
}

// sc (SCATTER_INTS(N)) for scatter_add_rows_kernel: items 0..N-1 grouped by key[n] in
// [0, K), groups in key order, items in index order within a group (a counting sort)
static void scatter_build(int *sc, const int *key, int N, int K) {
    static int *count;
    static int cap;
    if (K + 1 > cap) {
        free(count);
        count = (int *)xmalloc((size_t)(K + 1) * sizeof(int));
        cap = K + 1;
    }
    memset(count, 0, (size_t)(K + 1) * sizeof(int));
    for (int n = 0; n < N; n++) count[key[n] + 1]++;
    int *order = sc, *start = sc + N, *row = sc + 2 * N + 1, u = 0;
    for (int k = 0; k < K; k++) {
        if (count[k + 1]) {
            start[u] = count[k];
            row[u++] = k;
        }
        count[k + 1] += count[k];  // count[k]: the first slot of key k
    }
    start[u] = N;
    sc[3 * N + 1] = u;
    for (int n = 0; n < N; n++) order[count[key[n]]++] = n;
}

static void scatter_add_rows(float *dtable, const floatX *dx, const int *sc, int N, int C, float scale) {
    scatter_add_rows_kernel<<<N, C < 256 ? 32 * ceil_div(C, 32) : 256>>>(dtable, dx, sc, N, C, scale);
    cudaCheck(cudaGetLastError());
}
