// tests/python/load_op_cublas_test.py's kernel for pyhelper_test.py's Linear(64, 32) + GELU, its GEMM
// through cuBLAS with the handle the caller made (kernel ABI version 2, kernelevo/abi.h): inputs
// x[N, K], fc_weight[M, K], fc_bias[M]; out[N, M] = gelu(x @ fc_weight^T + fc_bias) (exact GELU).
// Row-major out[N, M] is column-major out^T[M, N] = W X^T: cublasSgemm(T, N) on the row-major buffers.
#include <cublas_v2.h>

#include "kernelevo/abi.h"

__global__ void bias_gelu(float* out, const float* b, int n, int m, long long sb) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= (long long)n * m) return;
    const float v = out[i] + b[(i % m) * sb];
    out[i] = 0.5f * v * (1.f + erff(v * 0.70710678118654752f));
}

extern "C" int kevo_forward(const kevo_tensor* in, int n_in, kevo_tensor* out, int n_out, cudaStream_t stream) {
    if (n_in != 3 || n_out != 1 || in[0].ndim != 2 || in[1].ndim != 2 || in[2].ndim != 1) return 1;
    for (int i = 0; i < 3; ++i)
        if (in[i].dtype != KEVO_FLOAT32) return 2;
    const int n = (int)in[0].sizes[0], k = (int)in[0].sizes[1], m = (int)in[1].sizes[0];
    if (in[1].sizes[1] != k || in[2].sizes[0] != m) return 3;
    if (in[0].strides[1] != 1 || in[0].strides[0] != k || in[1].strides[1] != 1 || in[1].strides[0] != k) return 4;
    cublasHandle_t h = kevo_cublas_handle(stream);
    if (!h) return 5;
    const float one = 1.f, zero = 0.f;
    if (cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, (const float*)in[1].data, k, (const float*)in[0].data, k, &zero,
                    (float*)out[0].data, m) != CUBLAS_STATUS_SUCCESS)
        return 6;
    const long long total = (long long)n * m;
    bias_gelu<<<(unsigned)((total + 255) / 256), 256, 0, stream>>>((float*)out[0].data, (const float*)in[2].data, n, m,
                                                                   in[2].strides[0]);
    return cudaGetLastError() == cudaSuccess ? 0 : 7;
}
