// A plain honest kernel for KernelBench L1-48 (torch.mean over dim 1, the Model's init input, of a
// [batch, dim1, dim2] input; output [batch, dim2]). The input is viewed as [outer, reduced, inner];
// one thread per output element sums its column in order (consecutive threads read consecutive
// addresses, so loads are coalesced) and divides by the reduced size. Strict fp32, not tuned.
#include <kernelevo/abi.h>

__global__ void mean_dim(const float* __restrict__ x, float* __restrict__ y, long long outer, long long red,
                         long long inner) {
    const long long n = outer * inner, stride = (long long)gridDim.x * blockDim.x;
    for (long long o = (long long)blockIdx.x * blockDim.x + threadIdx.x; o < n; o += stride) {
        const long long b = o / inner, k = o % inner;
        const float* p = x + b * red * inner + k;
        float sum = 0.f;
        for (long long j = 0; j < red; ++j) sum += p[j * inner];
        y[o] = sum / (float)red;
    }
}

extern "C" int kevo_forward(const kevo_tensor* in, int n_in, kevo_tensor* out, int n_out, cudaStream_t s) {
    const int dim = 1;  // Model(dim) with get_init_inputs() == [1]
    if (n_in != 1 || n_out != 1 || in[0].ndim <= dim || in[0].dtype != KEVO_FLOAT32) return 1;
    long long outer = 1, inner = 1;
    for (int d = 0; d < dim; ++d) outer *= in[0].sizes[d];
    for (int d = dim + 1; d < in[0].ndim; ++d) inner *= in[0].sizes[d];
    const long long red = in[0].sizes[dim], n = outer * inner;
    if (n == 0) return 0;
    const int threads = 256;
    long long blocks = (n + threads - 1) / threads;
    if (blocks > 132LL * 64) blocks = 132LL * 64;
    mean_dim<<<(unsigned)blocks, threads, 0, s>>>((const float*)in[0].data, (float*)out[0].data, outer, red, inner);
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
