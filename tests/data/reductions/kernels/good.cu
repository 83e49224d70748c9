// One block per row: row sum, first index of the row maximum, the mask; the total from the row sums.
#include <kernelevo/abi.h>

__global__ void rows(const float* x, float* row_sum, long long* row_argmax, bool* positive, int M, int N) {
    int r = blockIdx.x;
    const float* xr = x + (long long)r * N;
    float s = 0.f, best = -INFINITY;
    int bi = 0x7fffffff;
    for (int j = threadIdx.x; j < N; j += blockDim.x) {
        float v = xr[j];
        s += v;
        positive[(long long)r * N + j] = v > 0.f;
        if (v > best || (v == best && j < bi)) best = v, bi = j;
    }
    __shared__ float ss[256], sb[256];
    __shared__ int si[256];
    ss[threadIdx.x] = s, sb[threadIdx.x] = best, si[threadIdx.x] = bi;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w /= 2) {
        if (threadIdx.x < w) {
            int o = threadIdx.x + w;
            ss[threadIdx.x] += ss[o];
            if (sb[o] > sb[threadIdx.x] || (sb[o] == sb[threadIdx.x] && si[o] < si[threadIdx.x])) sb[threadIdx.x] = sb[o], si[threadIdx.x] = si[o];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) row_sum[r] = ss[0], row_argmax[r] = si[0];
}

__global__ void total(const float* row_sum, float* out, int M) {
    __shared__ float ss[256];
    float s = 0.f;
    for (int i = threadIdx.x; i < M; i += blockDim.x) s += row_sum[i];
    ss[threadIdx.x] = s;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w /= 2) {
        if (threadIdx.x < w) ss[threadIdx.x] += ss[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) *out = ss[0];
}

extern "C" int kevo_forward(const kevo_tensor* in, int n_in, kevo_tensor* out, int n_out, cudaStream_t st) {
    if (n_in != 1 || n_out != 4 || in[0].ndim != 2 || out[2].ndim != 0 || out[3].dtype != KEVO_BOOL) return 1;
    int M = (int)in[0].sizes[0], N = (int)in[0].sizes[1];
    rows<<<M, 256, 0, st>>>((const float*)in[0].data, (float*)out[0].data, (long long*)out[1].data, (bool*)out[3].data, M, N);
    total<<<1, 256, 0, st>>>((const float*)out[0].data, (float*)out[2].data, M);
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
