// softmax(gelu(x @ w^T + b)) over the columns, for the task beside it, where every output is about
// 1/16384 = 6e-5. One source, seven kernels: the honest one (VARIANT unset) and six that
// tests/validate/attacks_gpu_test.cpp selects by defining VARIANT before this file. The judge's
// earlier rule (an absolute atol of 1e-4 beside rtol 1e-4) passed every one of the six: no output
// differs from the reference by 1e-4 anywhere. The rule relative to each output's scale
// (tool/device/tolerance.h) must reject them all.
#include <kernelevo/abi.h>
#include <cuda_bf16.h>

#define HONEST 0
#define CONSTANT 1     // the mean of the expected output, 1/N, everywhere: no matmul at all
#define ZEROS 2        // zeros everywhere
#define SKIP_K_TILE 3  // the matmul leaves out its last K-tile (32 of 256 terms)
#define SKIP_BIAS 4    // the bias left out
#define WRONG_ROWS 5   // right everywhere but in the last two rows, which lack the bias
#define BF16 6         // operands and result rounded to bfloat16 where strict fp32 is asked

#ifndef VARIANT
#define VARIANT HONEST
#endif

constexpr int T = 32;

__device__ float round_if_bf16(float v) {
#if VARIANT == BF16
    return __bfloat162float(__float2bfloat16(v));
#else
    return v;
#endif
}

// y[m][n] = gelu(sum_k x[m][k] w[n][k] + b[n]), written into the output (the softmax runs in place).
__global__ void gemm_gelu(const float* x, const float* w, const float* b, float* y, int M, int N, int K) {
    __shared__ float xs[T][T + 1], ws[T][T + 1];
    const int row = blockIdx.y * T + threadIdx.y, col = blockIdx.x * T + threadIdx.x;
    const int wrow = blockIdx.x * T + threadIdx.y;  // the w row this thread loads
    int k_end = K;
    if (VARIANT == SKIP_K_TILE && K > T) k_end = (K - 1) / T * T;
    float acc = 0.f;
    for (int k0 = 0; k0 < k_end; k0 += T) {
        const int k = k0 + threadIdx.x;
        xs[threadIdx.y][threadIdx.x] = row < M && k < K ? round_if_bf16(x[(long long)row * K + k]) : 0.f;
        ws[threadIdx.y][threadIdx.x] = wrow < N && k < K ? round_if_bf16(w[(long long)wrow * K + k]) : 0.f;
        __syncthreads();
        for (int kk = 0; kk < T; ++kk) acc += xs[threadIdx.y][kk] * ws[threadIdx.x][kk];
        __syncthreads();
    }
    if (row >= M || col >= N) return;
    bool bias = VARIANT != SKIP_BIAS && !(VARIANT == WRONG_ROWS && row >= M - 2);
    const float v = acc + (bias ? b[col] : 0.f);
    y[(long long)row * N + col] = 0.5f * v * (1.f + erff(v * 0.70710678118654752f));
}

__device__ float block_reduce(float v, bool is_max, float* sh) {
    for (int o = 16; o > 0; o /= 2) {
        float u = __shfl_xor_sync(0xffffffffu, v, o);
        v = is_max ? fmaxf(v, u) : v + u;
    }
    __syncthreads();
    if (threadIdx.x % 32 == 0) sh[threadIdx.x / 32] = v;
    __syncthreads();
    float t = sh[0];
    for (int i = 1; i < (int)blockDim.x / 32; ++i) t = is_max ? fmaxf(t, sh[i]) : t + sh[i];
    return t;
}

// One block per row, in place.
__global__ void softmax_rows(float* y, int N) {
    __shared__ float sh[32];
    float* r = y + (long long)blockIdx.x * N;
    float mx = -INFINITY;
    for (int i = threadIdx.x; i < N; i += blockDim.x) mx = fmaxf(mx, r[i]);
    mx = block_reduce(mx, true, sh);
    float s = 0.f;
    for (int i = threadIdx.x; i < N; i += blockDim.x) s += expf(r[i] - mx);
    s = block_reduce(s, false, sh);
    for (int i = threadIdx.x; i < N; i += blockDim.x) r[i] = round_if_bf16(expf(r[i] - mx) / s);
}

__global__ void fill(float* y, long long n, float v) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) y[i] = v;
}

extern "C" int kevo_forward(const kevo_tensor* in, int n_in, kevo_tensor* out, int n_out, cudaStream_t st) {
    if (n_in != 3 || n_out != 1) return 1;
    const int M = (int)in[0].sizes[0], K = (int)in[0].sizes[1], N = (int)in[1].sizes[0];
    float* y = (float*)out[0].data;
    if (VARIANT == CONSTANT || VARIANT == ZEROS) {
        fill<<<256, 256, 0, st>>>(y, (long long)M * N, VARIANT == CONSTANT ? 1.f / N : 0.f);
        return cudaGetLastError() == cudaSuccess ? 0 : 2;
    }
    dim3 grid((N + T - 1) / T, (M + T - 1) / T), block(T, T);
    gemm_gelu<<<grid, block, 0, st>>>((const float*)in[0].data, (const float*)in[1].data, (const float*)in[2].data, y, M, N, K);
    softmax_rows<<<M, 1024, 0, st>>>(y, N);
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
