// A plain honest kernel for KernelBench L2-63 (nn.Linear 8192->8192 on [1024, 8192], then ReLU,
// then / 2.0).
// Tiled shared-memory fp32 GEMM (no TF32, no tensor cores). Simple and clearly correct, not tuned.
#include <kernelevo/abi.h>

// divisor = 2.0 (get_init_inputs): torch.relu, then x / divisor (a true division).
__device__ __forceinline__ float epilogue(float v) {
    v = v > 0.f ? v : 0.f;
    return v / 2.0f;
}

// y[m][n] = epilogue(sum_k x[m][k] * w[n][k] + b[n]) (nn.Linear: weight [out, in], so y = x @ W^T + b).
// 32x32 output tile per block of 32x8 threads; each thread owns column tx and rows ty, ty+8, ty+16,
// ty+24. Both operands are staged through shared memory 32 k at a time, loads coalesced along k;
// the w tile is padded to 33 columns so reading ws[tx][k] has no bank conflicts. Plain fp32 FMAs.
constexpr int kTile = 32, kRows = 8;

__global__ void linear_tiled(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                             float* __restrict__ y, long long M, long long N, long long K) {
    __shared__ float xs[kTile][kTile + 1];
    __shared__ float ws[kTile][kTile + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const long long row0 = (long long)blockIdx.y * kTile, col0 = (long long)blockIdx.x * kTile;
    float acc[kTile / kRows] = {0.f, 0.f, 0.f, 0.f};
    for (long long k0 = 0; k0 < K; k0 += kTile) {
        for (int r = ty; r < kTile; r += kRows) {
            const long long m = row0 + r, n = col0 + r, k = k0 + tx;
            xs[r][tx] = (m < M && k < K) ? x[m * K + k] : 0.f;
            ws[r][tx] = (n < N && k < K) ? w[n * K + k] : 0.f;
        }
        __syncthreads();
        for (int k = 0; k < kTile; ++k) {
            const float wv = ws[tx][k];
            for (int i = 0; i < kTile / kRows; ++i) acc[i] = fmaf(xs[ty + i * kRows][k], wv, acc[i]);
        }
        __syncthreads();
    }
    const long long n = col0 + tx;
    if (n >= N) return;
    for (int i = 0; i < kTile / kRows; ++i) {
        const long long m = row0 + ty + i * kRows;
        if (m < M) y[m * N + n] = epilogue(acc[i] + b[n]);
    }
}

extern "C" int kevo_forward(const kevo_tensor* in, int n_in, kevo_tensor* out, int n_out, cudaStream_t s) {
    // in: x [M, K], weight [N, K], bias [N]; out: [M, N]
    if (n_in != 3 || n_out != 1 || in[0].ndim != 2 || in[1].ndim != 2 || in[2].ndim != 1) return 1;
    const long long M = in[0].sizes[0], K = in[0].sizes[1], N = in[1].sizes[0];
    if (in[1].sizes[1] != K || in[2].sizes[0] != N) return 1;
    if (M == 0 || N == 0) return 0;
    const dim3 grid((unsigned)((N + kTile - 1) / kTile), (unsigned)((M + kTile - 1) / kTile));
    linear_tiled<<<grid, dim3(kTile, kRows), 0, s>>>((const float*)in[0].data, (const float*)in[1].data,
                                                      (const float*)in[2].data, (float*)out[0].data, M, N, K);
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
