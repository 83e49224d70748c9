#include <kernelevo/abi.h>
#include <cuda_fp16.h>
__global__ void k(const __half* a, const long long* idx, __half* s, long long* t, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) {
        s[i] = __float2half(__half2float(a[i]) * 3.0f + 1.0f);
        t[i] = idx[i] + 7;
    }
}
extern "C" int kevo_forward(const kevo_tensor* in, int n_in, kevo_tensor* out, int n_out, cudaStream_t st) {
    if (n_in != 2 || n_out != 2 || in[0].dtype != KEVO_FLOAT16 || in[1].dtype != KEVO_INT64) return 1;
    long long n = kevo_numel(&in[0]);
    k<<<(unsigned)((n + 255) / 256), 256, 0, st>>>((const __half*)in[0].data, (const long long*)in[1].data,
                                                  (__half*)out[0].data, (long long*)out[1].data, n);
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
