// benchmarks/studies/model_proof.sh's kernel for a Linear (+ activation) region of an imported model: inputs
// x[..., K] (any leading dimensions, contiguous rows), weight[M, K], bias[M] (the region task's
// order); out[..., M] = act(x @ weight^T + bias). The GEMM goes through cuBLAS with the handle the
// caller made (kernel ABI version 2): row-major out[N, M] is column-major out^T[M, N] = W X^T, so
// cublasSgemm(T, N) on the row-major buffers, in plain fp32 (the handle's default math mode, no
// TF32), then one pass adds the bias and applies the activation. The script picks the activation
// by rewriting the KEVO_PROOF_ACT line: 0 none, 1 ReLU, 2 GELU (tanh approximation, NewGELU), 3 tanh.
#include <cublas_v2.h>

#include "kernelevo/abi.h"

#define KEVO_PROOF_ACT 1

__device__ __forceinline__ float activation(float v) {
#if KEVO_PROOF_ACT == 1
    return v > 0.f ? v : 0.f;
#elif KEVO_PROOF_ACT == 2
    const float c = 0.7978845608028654f;  // sqrt(2 / pi)
    return 0.5f * v * (1.f + tanhf(c * (v + 0.044715f * v * v * v)));
#elif KEVO_PROOF_ACT == 3
    return tanhf(v);
#else
    return v;
#endif
}

__global__ void bias_act(float* out, const float* b, long long n, int m, long long sb) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n * m) return;
    out[i] = activation(out[i] + b[(i % m) * sb]);
}

extern "C" int kevo_forward(const kevo_tensor* in, int n_in, kevo_tensor* out, int n_out, cudaStream_t stream) {
    if (n_in != 3 || n_out != 1 || in[0].ndim < 1 || in[1].ndim != 2 || in[2].ndim != 1) return 1;
    for (int i = 0; i < 3; ++i)
        if (in[i].dtype != KEVO_FLOAT32) return 2;
    const int d = in[0].ndim;
    const long long k = in[0].sizes[d - 1], m = in[1].sizes[0];
    const long long n = k ? kevo_numel(&in[0]) / k : 0;
    if (in[1].sizes[1] != k || in[2].sizes[0] != m || kevo_numel(&out[0]) != n * m) return 3;
    // Contiguous rows of x and of the weight (what an imported task hands over).
    long long expect = 1;
    for (int i = d - 1; i >= 0; --i) {
        if (in[0].sizes[i] != 1 && in[0].strides[i] != expect) return 4;
        expect *= in[0].sizes[i];
    }
    if (in[1].strides[1] != 1 || in[1].strides[0] != k) return 4;
    if (n == 0 || m == 0) return 0;
    cublasHandle_t h = kevo_cublas_handle(stream);
    if (!h) return 5;
    const float one = 1.f, zero = 0.f;
    if (cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)m, (int)n, (int)k, &one, (const float*)in[1].data, (int)k,
                    (const float*)in[0].data, (int)k, &zero, (float*)out[0].data, (int)m) != CUBLAS_STATUS_SUCCESS)
        return 6;
    const long long total = n * m;
    bias_act<<<(unsigned)((total + 255) / 256), 256, 0, stream>>>((float*)out[0].data, (const float*)in[2].data, n, (int)m,
                                                                  in[2].strides[0]);
    return cudaGetLastError() == cudaSuccess ? 0 : 7;
}
