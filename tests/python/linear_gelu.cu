// A hand-written kernel for tests/python/pyhelper_test.py's exported module (Linear(64, 32) + GELU):
// inputs x[N, K], fc_weight[M, K], fc_bias[M] (the task's order), output out[N, M] =
// gelu(x @ fc_weight^T + fc_bias) with the exact (erf) GELU. One thread per output, plain fp32.
#include "kernelevo/abi.h"

__global__ void linear_gelu(const float* x, const float* w, const float* b, float* out, int n, int m, int k,
                            long long sx0, long long sx1, long long sw0, long long sw1, long long sb) {
    const int i = blockIdx.y;
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || j >= m) return;
    float acc = 0.f;
    for (int t = 0; t < k; ++t) acc += x[i * sx0 + t * sx1] * w[j * sw0 + t * sw1];
    acc += b[j * sb];
    out[(long long)i * m + j] = 0.5f * acc * (1.f + erff(acc * 0.70710678118654752f));
}

extern "C" int kevo_forward(const kevo_tensor* in, int n_in, kevo_tensor* out, int n_out, cudaStream_t stream) {
    if (n_in != 3 || n_out != 1 || in[0].ndim != 2 || in[1].ndim != 2 || in[2].ndim != 1) return 1;
    for (int i = 0; i < 3; ++i)
        if (in[i].dtype != KEVO_FLOAT32) return 2;
    const int n = (int)in[0].sizes[0], k = (int)in[0].sizes[1], m = (int)in[1].sizes[0];
    if (in[1].sizes[1] != k || in[2].sizes[0] != m) return 3;
    dim3 block(128), grid((m + 127) / 128, n);
    linear_gelu<<<grid, block, 0, stream>>>((const float*)in[0].data, (const float*)in[1].data,
                                            (const float*)in[2].data, (float*)out[0].data, n, m, k,
                                            in[0].strides[0], in[0].strides[1], in[1].strides[0], in[1].strides[1],
                                            in[2].strides[0]);
    return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
