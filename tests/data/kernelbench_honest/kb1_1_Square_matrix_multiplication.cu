// A plain honest kernel for KernelBench L1-1 (C = A @ B, A and B [N, N], N = 4096; any
// [M, K] @ [K, N] works). Tiled shared-memory fp32 GEMM (no TF32, no tensor cores): a 32x32 output
// tile per block of 32x8 threads; each thread owns column tx and rows ty, ty+8, ty+16, ty+24.
// Tiles of A and B are staged 32 k at a time with coalesced loads. Simple and clearly correct.
#include <kernelevo/abi.h>

constexpr int kTile = 32, kRows = 8;

__global__ void matmul_tiled(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
                             long long M, long long N, long long K) {
    __shared__ float as[kTile][kTile + 1];
    __shared__ float bs[kTile][kTile + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const long long row0 = (long long)blockIdx.y * kTile, col0 = (long long)blockIdx.x * kTile;
    float acc[kTile / kRows] = {0.f, 0.f, 0.f, 0.f};
    for (long long k0 = 0; k0 < K; k0 += kTile) {
        for (int r = ty; r < kTile; r += kRows) {
            const long long m = row0 + r, ka = k0 + tx;  // A tile: row r, column k
            const long long kb = k0 + r, n = col0 + tx;  // B tile: row k, column n
            as[r][tx] = (m < M && ka < K) ? a[m * K + ka] : 0.f;
            bs[r][tx] = (kb < K && n < N) ? b[kb * N + n] : 0.f;
        }
        __syncthreads();
        for (int k = 0; k < kTile; ++k) {
            const float bv = bs[k][tx];
            for (int i = 0; i < kTile / kRows; ++i) acc[i] = fmaf(as[ty + i * kRows][k], bv, acc[i]);
        }
        __syncthreads();
    }
    const long long n = col0 + tx;
    if (n >= N) return;
    for (int i = 0; i < kTile / kRows; ++i) {
        const long long m = row0 + ty + i * kRows;
        if (m < M) c[m * N + n] = acc[i];
    }
}

extern "C" int kevo_forward(const kevo_tensor* in, int n_in, kevo_tensor* out, int n_out, cudaStream_t s) {
    if (n_in != 2 || n_out != 1 || in[0].ndim != 2 || in[1].ndim != 2) return 1;
    const long long M = in[0].sizes[0], K = in[0].sizes[1], N = in[1].sizes[1];
    if (in[1].sizes[0] != K) return 1;
    if (M == 0 || N == 0) return 0;
    const dim3 grid((unsigned)((N + kTile - 1) / kTile), (unsigned)((M + kTile - 1) / kTile));
    matmul_tiled<<<grid, dim3(kTile, kRows), 0, s>>>((const float*)in[0].data, (const float*)in[1].data,
                                                      (float*)out[0].data, M, N, K);
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
