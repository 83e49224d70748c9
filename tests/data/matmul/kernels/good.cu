// Shared-memory tiled 32x32 fp32 matrix product (no tensor cores): correct, slower than cuBLAS.
#include <kernelevo/abi.h>

constexpr int T = 32;
__global__ void mm(const float* a, const float* b, float* c, int M, int N, int K) {
    __shared__ float as[T][T], bs[T][T + 1];
    int row = blockIdx.y * T + threadIdx.y, col = blockIdx.x * T + threadIdx.x;
    float acc = 0.f;
    for (int k0 = 0; k0 < K; k0 += T) {
        as[threadIdx.y][threadIdx.x] = row < M && k0 + threadIdx.x < K ? a[(long long)row * K + k0 + threadIdx.x] : 0.f;
        bs[threadIdx.y][threadIdx.x] = col < N && k0 + threadIdx.y < K ? b[(long long)(k0 + threadIdx.y) * N + col] : 0.f;
        __syncthreads();
        for (int k = 0; k < T; ++k) acc += as[threadIdx.y][k] * bs[k][threadIdx.x];
        __syncthreads();
    }
    if (row < M && col < N) c[(long long)row * N + col] = acc;
}

extern "C" int kevo_forward(const kevo_tensor* in, int n_in, kevo_tensor* out, int n_out, cudaStream_t st) {
    if (n_in != 2 || n_out != 1) return 1;
    int M = (int)in[0].sizes[0], K = (int)in[0].sizes[1], N = (int)in[1].sizes[1];
    dim3 grid((N + T - 1) / T, (M + T - 1) / T), block(T, T);
    mm<<<grid, block, 0, st>>>((const float*)in[0].data, (const float*)in[1].data, (float*)out[0].data, M, N, K);
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
