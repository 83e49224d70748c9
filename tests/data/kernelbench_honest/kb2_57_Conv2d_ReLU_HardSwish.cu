// A plain honest kernel for KernelBench L2-57 (nn.Conv2d(8, 64, 3) with bias on [128, 8, 128, 128],
// then torch.relu, then x * clamp((x + 3) / 6, 0, 1)).
// Direct fp32 convolution, one thread per output element (no im2col, no TF32, no tensor cores),
// grid-stride over the 64-bit output index. Simple and clearly correct, not tuned.
#include <kernelevo/abi.h>

// nn.Conv2d's defaults, as the Model builds it: stride 1, padding 0, dilation 1, groups 1.
__device__ __forceinline__ float epilogue(float v) {
    v = v > 0.f ? v : 0.f;                 // torch.relu
    float g = (v + 3.0f) / 6.0f;           // torch.clamp((x + 3) / 6, 0, 1)
    g = g < 0.f ? 0.f : (g > 1.f ? 1.f : g);
    return v * g;
}

// y[n][oc][oh][ow] = epilogue(b[oc] + sum_{ic,kh,kw} x[n][ic][oh+kh][ow+kw] * w[oc][ic][kh][kw]).
// ow varies fastest across threads, so a warp reads neighbouring x and mostly one oc's weights.
__global__ void conv2d_relu_hardswish(const float* __restrict__ x, const float* __restrict__ w,
                                      const float* __restrict__ b, float* __restrict__ y,
                                      long long N, long long C, long long H, long long W,
                                      long long OC, long long KH, long long KW, long long OH, long long OW) {
    const long long total = N * OC * OH * OW;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const long long ow = i % OW, oh = (i / OW) % OH, oc = (i / (OW * OH)) % OC, n = i / (OW * OH * OC);
        float acc = 0.f;
        for (long long ic = 0; ic < C; ++ic) {
            const float* xp = x + ((n * C + ic) * H + oh) * W + ow;
            const float* wp = w + (oc * C + ic) * KH * KW;
            for (long long kh = 0; kh < KH; ++kh)
                for (long long kw = 0; kw < KW; ++kw) acc = fmaf(xp[kh * W + kw], wp[kh * KW + kw], acc);
        }
        y[i] = epilogue(acc + b[oc]);
    }
}

extern "C" int kevo_forward(const kevo_tensor* in, int n_in, kevo_tensor* out, int n_out, cudaStream_t s) {
    // in: x [N, C, H, W], conv.weight [OC, C, KH, KW], conv.bias [OC]; out: [N, OC, OH, OW]
    if (n_in != 3 || n_out != 1 || in[0].ndim != 4 || in[1].ndim != 4 || in[2].ndim != 1 || out[0].ndim != 4)
        return 1;
    const long long N = in[0].sizes[0], C = in[0].sizes[1], H = in[0].sizes[2], W = in[0].sizes[3];
    const long long OC = in[1].sizes[0], KH = in[1].sizes[2], KW = in[1].sizes[3];
    const long long OH = out[0].sizes[2], OW = out[0].sizes[3];
    if (in[1].sizes[1] != C || in[2].sizes[0] != OC || out[0].sizes[0] != N || out[0].sizes[1] != OC ||
        OH != H - KH + 1 || OW != W - KW + 1)
        return 1;
    const long long total = N * OC * OH * OW;
    if (total == 0) return 0;
    const long long blocks = (total + 255) / 256;
    conv2d_relu_hardswish<<<(unsigned)(blocks < 1048576 ? blocks : 1048576), 256, 0, s>>>(
        (const float*)in[0].data, (const float*)in[1].data, (const float*)in[2].data, (float*)out[0].data,
        N, C, H, W, OC, KH, KW, OH, OW);
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
