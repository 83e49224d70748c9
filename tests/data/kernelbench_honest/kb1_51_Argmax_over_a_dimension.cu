// A plain honest kernel for KernelBench L1-51 (torch.argmax(x, dim=1) on [128, 4096, 4095]: int64
// output [128, 4095]). One thread per output: it walks dim 1 in order and keeps the first index of the
// largest value (torch's rule for ties: the first maximal value). Threads of a warp read neighbouring
// elements of the innermost dimension (coalesced). Simple and clearly correct, not tuned.
#include <kernelevo/abi.h>

// dim = 1 (get_init_inputs). x viewed as [outer, red, inner]; y[o][i] = argmax_r x[o][r][i].
__global__ void argmax_dim(const float* __restrict__ x, long long* __restrict__ y,
                           long long outer, long long red, long long inner) {
    const long long total = outer * inner;
    for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < total;
         t += (long long)gridDim.x * blockDim.x) {
        const long long o = t / inner, i = t % inner;
        const float* p = x + o * red * inner + i;
        float best = p[0];
        long long arg = 0;
        for (long long r = 1; r < red; ++r) {
            const float v = p[r * inner];
            // NaN counts as the maximum (torch.argmax); strict '>' keeps the first of equal values.
            if (!(best != best) && (v > best || v != v)) { best = v; arg = r; }
        }
        y[t] = arg;
    }
}

extern "C" int kevo_forward(const kevo_tensor* in, int n_in, kevo_tensor* out, int n_out, cudaStream_t s) {
    // in: x [B, D1, D2...] float32; out: x's sizes without dim 1, int64
    const int dim = 1;
    if (n_in != 1 || n_out != 1 || in[0].ndim <= dim || in[0].dtype != KEVO_FLOAT32 || out[0].dtype != KEVO_INT64)
        return 1;
    long long outer = 1, inner = 1;
    for (int d = 0; d < dim; ++d) outer *= in[0].sizes[d];
    for (int d = dim + 1; d < in[0].ndim; ++d) inner *= in[0].sizes[d];
    const long long red = in[0].sizes[dim];
    if (red == 0) return 1;  // torch.argmax refuses an empty dimension
    const long long total = outer * inner;
    if (total == 0) return 0;
    const long long blocks = (total + 255) / 256;
    argmax_dim<<<(unsigned)(blocks < 1048576 ? blocks : 1048576), 256, 0, s>>>(
        (const float*)in[0].data, (long long*)out[0].data, outer, red, inner);
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
