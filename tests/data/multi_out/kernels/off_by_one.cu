#include <kernelevo/abi.h>
#include <cuda_fp16.h>
__global__ void k(const __half* a, const long long* idx, __half* s, long long* t, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) {
        s[i] = __float2half(__half2float(a[i]) * 3.0f + 1.0f);
        t[i] = idx[i] + 8;
    }
}
extern "C" int kevo_forward(const kevo_tensor* in, int, kevo_tensor* out, int, cudaStream_t st) {
    long long n = kevo_numel(&in[0]);
    k<<<(unsigned)((n + 255) / 256), 256, 0, st>>>((const __half*)in[0].data, (const long long*)in[1].data,
                                                  (__half*)out[0].data, (long long*)out[1].data, n);
    return 0;
}
