// A plain honest kernel for KernelBench L1-83 (depthwise nn.Conv2d(8, 8, kernel_size=(3, 1),
// groups=8, no bias) on [64, 8, 512, 512]; stride 1, padding 0, dilation 1: output [64, 8, 510, 512]).
// Direct fp32 convolution, one thread per output element, grid-stride over the 64-bit output index.
// Simple and clearly correct, not tuned.
#include <kernelevo/abi.h>

// stride = 1, padding = 0, dilation = 1 (get_init_inputs), the Model's bias = False.
// y[n][c][oh][ow] = sum_{kh,kw} x[n][c][oh+kh][ow+kw] * w[c][0][kh][kw]
__global__ void depthwise_conv2d(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y,
                                 long long N, long long C, long long H, long long W,
                                 long long KH, long long KW, long long OH, long long OW) {
    const long long total = N * C * OH * OW;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const long long ow = i % OW, oh = (i / OW) % OH, nc = i / (OW * OH), c = nc % C;
        const float* xp = x + (nc * H + oh) * W + ow;
        const float* wp = w + c * KH * KW;
        float acc = 0.f;
        for (long long kh = 0; kh < KH; ++kh)
            for (long long kw = 0; kw < KW; ++kw) acc = fmaf(xp[kh * W + kw], wp[kh * KW + kw], acc);
        y[i] = acc;
    }
}

extern "C" int kevo_forward(const kevo_tensor* in, int n_in, kevo_tensor* out, int n_out, cudaStream_t s) {
    // in: x [N, C, H, W], conv2d.weight [C, 1, KH, KW]; out: [N, C, OH, OW]
    if (n_in != 2 || n_out != 1 || in[0].ndim != 4 || in[1].ndim != 4 || out[0].ndim != 4) return 1;
    const long long N = in[0].sizes[0], C = in[0].sizes[1], H = in[0].sizes[2], W = in[0].sizes[3];
    const long long KH = in[1].sizes[2], KW = in[1].sizes[3], OH = out[0].sizes[2], OW = out[0].sizes[3];
    if (in[1].sizes[0] != C || in[1].sizes[1] != 1 || out[0].sizes[0] != N || out[0].sizes[1] != C ||
        OH != H - KH + 1 || OW != W - KW + 1)
        return 1;
    const long long total = N * C * OH * OW;
    if (total == 0) return 0;
    const long long blocks = (total + 255) / 256;
    depthwise_conv2d<<<(unsigned)(blocks < 1048576 ? blocks : 1048576), 256, 0, s>>>(
        (const float*)in[0].data, (const float*)in[1].data, (float*)out[0].data, N, C, H, W, KH, KW, OH, OW);
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
