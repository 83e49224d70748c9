// A plain honest kernel for KernelBench L2-46: conv2d (valid, stride 1) + bias, minus 0.5, tanh,
// minus 0.2, 2x2 average pooling, in one pass: each thread computes the four convolution outputs
// under one pooled output, with the output channel's weights in shared memory. Exact fp32
// arithmetic (a TF32 reference differs by up to ~3e-4). (benchmarks/studies/kb_concurrent.sh; not tuned.)
#include <kernelevo/abi.h>
#include <math.h>

constexpr int kMaxWeights = 64 * 3 * 3;

__global__ void conv_sub_tanh_sub_pool(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias, float* __restrict__ y,
                                       int C, int H, int W, int OC, int KS, int PH, int PW, float sub1, float sub2) {
    __shared__ float ws[kMaxWeights];
    const int n = blockIdx.z / OC, oc = blockIdx.z % OC;
    const int nw = C * KS * KS;
    for (int i = threadIdx.y * blockDim.x + threadIdx.x; i < nw; i += blockDim.x * blockDim.y) ws[i] = w[(long long)oc * nw + i];
    __syncthreads();
    const int pw = blockIdx.x * blockDim.x + threadIdx.x, ph = blockIdx.y * blockDim.y + threadIdx.y;
    if (pw >= PW || ph >= PH) return;
    float acc[2][2] = {{0.f, 0.f}, {0.f, 0.f}};
    for (int c = 0; c < C; ++c) {
        const float* xc = x + ((long long)n * C + c) * H * W;
        const float* wc = ws + c * KS * KS;
        for (int ky = 0; ky < KS; ++ky)
            for (int kx = 0; kx < KS; ++kx) {
                const float wv = wc[ky * KS + kx];
#pragma unroll
                for (int dy = 0; dy < 2; ++dy)
#pragma unroll
                    for (int dx = 0; dx < 2; ++dx)
                        acc[dy][dx] = fmaf(wv, xc[(long long)(2 * ph + dy + ky) * W + 2 * pw + dx + kx], acc[dy][dx]);
            }
    }
    float sum = 0.f;
    for (int dy = 0; dy < 2; ++dy)
        for (int dx = 0; dx < 2; ++dx) sum += tanhf(acc[dy][dx] + bias[oc] - sub1) - sub2;
    y[(((long long)n * OC + oc) * PH + ph) * PW + pw] = sum * 0.25f;
}

extern "C" int kevo_forward(const kevo_tensor* in, int n_in, kevo_tensor* out, int n_out, cudaStream_t s) {
    // x [N, C, H, W], weight [OC, C, KS, KS], bias [OC] -> y [N, OC, PH, PW]
    if (n_in != 3 || n_out != 1 || in[0].ndim != 4 || in[1].ndim != 4) return 1;
    const int N = (int)in[0].sizes[0], C = (int)in[0].sizes[1], H = (int)in[0].sizes[2], W = (int)in[0].sizes[3];
    const int OC = (int)in[1].sizes[0], KS = (int)in[1].sizes[2];
    const int PH = (int)out[0].sizes[2], PW = (int)out[0].sizes[3];
    if (C * KS * KS > kMaxWeights || 2 * PH + KS - 1 > H || 2 * PW + KS - 1 > W) return 2;
    dim3 block(32, 8), grid((PW + 31) / 32, (PH + 7) / 8, N * OC);
    conv_sub_tanh_sub_pool<<<grid, block, 0, s>>>((const float*)in[0].data, (const float*)in[1].data, (const float*)in[2].data,
                                                  (float*)out[0].data, C, H, W, OC, KS, PH, PW, 0.5f, 0.2f);
    return cudaGetLastError() == cudaSuccess ? 0 : 3;
}
