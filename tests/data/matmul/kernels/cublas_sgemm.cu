// C[M,N] = A[M,K] B[K,N] in fp32 through cuBLAS, with the handle the caller made (kernel ABI
// version 2, kernelevo/abi.h): row-major C is column-major C^T = B^T A^T.
#include <cublas_v2.h>

#include "kernelevo/abi.h"

extern "C" int kevo_forward(const kevo_tensor* in, int n_in, kevo_tensor* out, int n_out, cudaStream_t stream) {
    if (n_in != 2 || n_out != 1 || in[0].dtype != KEVO_FLOAT32 || in[1].dtype != KEVO_FLOAT32) return 1;
    cublasHandle_t h = kevo_cublas_handle(stream);
    if (!h) return 2;
    const int m = (int)in[0].sizes[0], k = (int)in[0].sizes[1], n = (int)in[1].sizes[1];
    const float one = 1.0f, zero = 0.0f;
    cublasStatus_t s = cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, (const float*)in[1].data, n,
                                   (const float*)in[0].data, k, &zero, (float*)out[0].data, n);
    return s == CUBLAS_STATUS_SUCCESS ? 0 : 3;
}
