// benchmarks/studies/model_proof.sh's kernel for a residual join region (ResNet's `out += identity; relu(out)`):
// inputs a, b of the same shape (either order: the sum is symmetric), out = max(a + b, 0), fp32.
// Inputs of any strides (a region task hands over what the model's tensors are); the output is the
// contiguous tensor the caller allocated. Kernel ABI version 2, on the given stream, no library.
#include "kernelevo/abi.h"

struct Dims {
    int nd;
    long long size[KEVO_MAX_DIMS], sa[KEVO_MAX_DIMS], sb[KEVO_MAX_DIMS];
};

__global__ void add_relu(const float* a, const float* b, float* out, long long n, Dims d) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        long long rest = i, oa = 0, ob = 0;
        for (int k = d.nd - 1; k >= 0; --k) {
            const long long c = rest % d.size[k];
            rest /= d.size[k];
            oa += c * d.sa[k];
            ob += c * d.sb[k];
        }
        const float v = a[oa] + b[ob];
        out[i] = v > 0.f ? v : 0.f;
    }
}

extern "C" int kevo_forward(const kevo_tensor* in, int n_in, kevo_tensor* out, int n_out, cudaStream_t stream) {
    if (n_in != 2 || n_out != 1) return 1;
    if (in[0].dtype != KEVO_FLOAT32 || in[1].dtype != KEVO_FLOAT32 || out[0].dtype != KEVO_FLOAT32) return 2;
    if (in[0].ndim != in[1].ndim || in[0].ndim > KEVO_MAX_DIMS) return 3;
    Dims d;
    d.nd = in[0].ndim;
    for (int k = 0; k < d.nd; ++k) {
        if (in[0].sizes[k] != in[1].sizes[k]) return 3;
        d.size[k] = in[0].sizes[k];
        d.sa[k] = in[0].strides[k];
        d.sb[k] = in[1].strides[k];
    }
    const long long n = kevo_numel(&in[0]);
    if (kevo_numel(&out[0]) != n || out[0].ndim != d.nd) return 3;
    long long expect = 1;  // the output is written in row-major order
    for (int k = d.nd - 1; k >= 0; --k) {
        if (out[0].sizes[k] != d.size[k] || (d.size[k] != 1 && out[0].strides[k] != expect)) return 4;
        expect *= d.size[k];
    }
    if (n == 0) return 0;
    const long long blocks = (n + 255) / 256;
    add_relu<<<(unsigned)(blocks < 65535 * 16 ? blocks : 65535 * 16), 256, 0, stream>>>(
        (const float*)in[0].data, (const float*)in[1].data, (float*)out[0].data, n, d);
    return cudaGetLastError() == cudaSuccess ? 0 : 7;
}
