// A direct 3x3 convolution (stride 1, padding 1) in exact fp32: one thread per output element, the
// output channel's weights in shared memory. Correct against strict fp32; not tuned.
#include <kernelevo/abi.h>

constexpr int kMaxC = 64;

__global__ void conv3x3(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y, int C, int H, int W, int OC) {
    __shared__ float ws[kMaxC * 9];
    const int n = blockIdx.z / OC, oc = blockIdx.z % OC;
    for (int i = threadIdx.y * blockDim.x + threadIdx.x; i < C * 9; i += blockDim.x * blockDim.y) ws[i] = w[(long long)oc * C * 9 + i];
    __syncthreads();
    const int ox = blockIdx.x * blockDim.x + threadIdx.x, oy = blockIdx.y * blockDim.y + threadIdx.y;
    if (ox >= W || oy >= H) return;
    float acc = 0.f;
    for (int c = 0; c < C; ++c) {
        const float* xc = x + ((long long)n * C + c) * H * W;
        for (int ky = 0; ky < 3; ++ky) {
            const int iy = oy + ky - 1;
            if (iy < 0 || iy >= H) continue;
            for (int kx = 0; kx < 3; ++kx) {
                const int ix = ox + kx - 1;
                if (ix >= 0 && ix < W) acc = fmaf(ws[c * 9 + ky * 3 + kx], xc[(long long)iy * W + ix], acc);
            }
        }
    }
    y[(((long long)n * OC + oc) * H + oy) * W + ox] = acc;
}

extern "C" int kevo_forward(const kevo_tensor* in, int n_in, kevo_tensor* out, int n_out, cudaStream_t st) {
    if (n_in != 2 || n_out != 1) return 1;
    const int N = (int)in[0].sizes[0], C = (int)in[0].sizes[1], H = (int)in[0].sizes[2], W = (int)in[0].sizes[3];
    const int OC = (int)in[1].sizes[0];
    if (C > kMaxC || in[1].sizes[2] != 3 || in[1].sizes[3] != 3) return 2;
    dim3 block(32, 8), grid((W + 31) / 32, (H + 7) / 8, N * OC);
    conv3x3<<<grid, block, 0, st>>>((const float*)in[0].data, (const float*)in[1].data, (float*)out[0].data, C, H, W, OC);
    return cudaGetLastError() == cudaSuccess ? 0 : 3;
}
