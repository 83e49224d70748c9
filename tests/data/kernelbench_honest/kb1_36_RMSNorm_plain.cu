// A plain honest kernel for KernelBench L1-36 (x / sqrt(mean(x^2 over dim 1) + 1e-5) on
// [batch, features, d1, d2]): one thread per (batch, position), the features strided by d1*d2 so
// that a warp's loads are contiguous. (benchmarks/studies/kb_concurrent.sh; not tuned.)
#include <kernelevo/abi.h>
#include <math.h>

__global__ void rms_norm(const float* __restrict__ x, float* __restrict__ y, long long batch, long long features, long long plane, float eps) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= batch * plane) return;
    const long long b = i / plane, p = i % plane;
    const float* xs = x + b * features * plane + p;
    float* ys = y + b * features * plane + p;
    float sum = 0.f;
    for (long long f = 0; f < features; ++f) {
        float v = xs[f * plane];
        sum = fmaf(v, v, sum);
    }
    const float inv = 1.f / sqrtf(sum / (float)features + eps);
    for (long long f = 0; f < features; ++f) ys[f * plane] = xs[f * plane] * inv;
}

extern "C" int kevo_forward(const kevo_tensor* in, int n_in, kevo_tensor* out, int n_out, cudaStream_t s) {
    if (n_in != 1 || n_out != 1 || in[0].ndim < 2) return 1;
    const long long batch = in[0].sizes[0], features = in[0].sizes[1], plane = kevo_numel(&in[0]) / (batch * features);
    const long long threads = batch * plane;
    rms_norm<<<(unsigned)((threads + 255) / 256), 256, 0, s>>>((const float*)in[0].data, (float*)out[0].data, batch, features, plane, 1e-5f);
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
