// row_softmax for sm_90 (hand-written): y[m, :] = softmax(x[m, :]) over the last dimension.
// One pass over HBM: each row is read once into registers, reduced (max, then sum of exp) with
// warp shuffles, and written once.
//  - N <= 1024: one warp per row, up to 32 values per lane in registers (float4 loads when N % 4 == 0).
//  - N <= 8192: one block of 256 threads per row, up to 32 values per thread in registers.
//  - larger N: one block per row, online max/sum in one read, a second read (from L2) to write.
#include <cuda_runtime.h>
#include <kernelevo/abi.h>

#include <cfloat>

namespace {

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// One warp per row; each lane keeps VPT values (VEC: 4 consecutive floats per 16-byte load).
template <int VPT, bool VEC>
__global__ void __launch_bounds__(128) softmax_warp(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * (blockDim.x / 32) + (threadIdx.x >> 5);
    if (row >= rows) return;
    const float* xr = x + (long long)row * cols;
    float* yr = y + (long long)row * cols;
    float v[VPT];
    float m = -FLT_MAX;
    if (VEC) {
#pragma unroll
        for (int k = 0; k < VPT / 4; ++k) {
            const int c = (k * 32 + lane) * 4;
            float4 q = c < cols ? __ldcs(reinterpret_cast<const float4*>(xr + c)) : make_float4(-FLT_MAX, -FLT_MAX, -FLT_MAX, -FLT_MAX);
            v[4 * k] = q.x, v[4 * k + 1] = q.y, v[4 * k + 2] = q.z, v[4 * k + 3] = q.w;
        }
    } else {
#pragma unroll
        for (int k = 0; k < VPT; ++k) {
            const int c = k * 32 + lane;
            v[k] = c < cols ? __ldcs(xr + c) : -FLT_MAX;
        }
    }
#pragma unroll
    for (int k = 0; k < VPT; ++k) m = fmaxf(m, v[k]);
    m = warp_max(m);
    float s = 0.f;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        v[k] = __expf(v[k] - m);
        s += v[k];
    }
    s = warp_sum(s);
    const float inv = 1.0f / s;
    if (VEC) {
#pragma unroll
        for (int k = 0; k < VPT / 4; ++k) {
            const int c = (k * 32 + lane) * 4;
            if (c < cols)
                __stcs(reinterpret_cast<float4*>(yr + c), make_float4(v[4 * k] * inv, v[4 * k + 1] * inv, v[4 * k + 2] * inv, v[4 * k + 3] * inv));
        }
    } else {
#pragma unroll
        for (int k = 0; k < VPT; ++k) {
            const int c = k * 32 + lane;
            if (c < cols) yr[c] = v[k] * inv;
        }
    }
}

template <int THREADS>
__device__ __forceinline__ float block_reduce(float v, bool is_max, float* smem) {
    v = is_max ? warp_max(v) : warp_sum(v);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    __syncthreads();  // smem reuse between calls
    if (lane == 0) smem[warp] = v;
    __syncthreads();
    v = lane < THREADS / 32 ? smem[lane] : (is_max ? -FLT_MAX : 0.f);
    return is_max ? warp_max(v) : warp_sum(v);
}

// One block per row, the row in registers: VPT values per thread (VEC: float4 loads).
template <int VPT, bool VEC>
__global__ void __launch_bounds__(256) softmax_block(const float* __restrict__ x, float* __restrict__ y, int cols) {
    constexpr int THREADS = 256;
    __shared__ float smem[THREADS / 32];
    const float* xr = x + (long long)blockIdx.x * cols;
    float* yr = y + (long long)blockIdx.x * cols;
    float v[VPT];
    float m = -FLT_MAX;
    if (VEC) {
#pragma unroll
        for (int k = 0; k < VPT / 4; ++k) {
            const int c = (k * THREADS + threadIdx.x) * 4;
            float4 q = c < cols ? __ldcs(reinterpret_cast<const float4*>(xr + c)) : make_float4(-FLT_MAX, -FLT_MAX, -FLT_MAX, -FLT_MAX);
            v[4 * k] = q.x, v[4 * k + 1] = q.y, v[4 * k + 2] = q.z, v[4 * k + 3] = q.w;
        }
    } else {
#pragma unroll
        for (int k = 0; k < VPT; ++k) {
            const int c = k * THREADS + threadIdx.x;
            v[k] = c < cols ? __ldcs(xr + c) : -FLT_MAX;
        }
    }
#pragma unroll
    for (int k = 0; k < VPT; ++k) m = fmaxf(m, v[k]);
    m = block_reduce<THREADS>(m, true, smem);
    float s = 0.f;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        v[k] = __expf(v[k] - m);
        s += v[k];
    }
    s = block_reduce<THREADS>(s, false, smem);
    const float inv = 1.0f / s;
    if (VEC) {
#pragma unroll
        for (int k = 0; k < VPT / 4; ++k) {
            const int c = (k * THREADS + threadIdx.x) * 4;
            if (c < cols)
                __stcs(reinterpret_cast<float4*>(yr + c), make_float4(v[4 * k] * inv, v[4 * k + 1] * inv, v[4 * k + 2] * inv, v[4 * k + 3] * inv));
        }
    } else {
#pragma unroll
        for (int k = 0; k < VPT; ++k) {
            const int c = k * THREADS + threadIdx.x;
            if (c < cols) yr[c] = v[k] * inv;
        }
    }
}

// Any N: online (max, sum) in one read, then a second read (mostly from L2) to write.
__global__ void __launch_bounds__(512) softmax_online(const float* __restrict__ x, float* __restrict__ y, int cols) {
    constexpr int THREADS = 512;
    __shared__ float smem_m[THREADS / 32], smem_s[THREADS / 32];
    const float* xr = x + (long long)blockIdx.x * cols;
    float* yr = y + (long long)blockIdx.x * cols;
    float m = -FLT_MAX, s = 0.f;
    for (int c = threadIdx.x; c < cols; c += THREADS) {
        const float v = xr[c];
        if (v > m) {
            s = s * __expf(m - v) + 1.f;
            m = v;
        } else {
            s += __expf(v - m);
        }
    }
    // Combine (m, s) pairs: warp, then block.
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float om = __shfl_xor_sync(0xffffffffu, m, o), os = __shfl_xor_sync(0xffffffffu, s, o);
        const float nm = fmaxf(m, om);
        s = s * __expf(m - nm) + os * __expf(om - nm);
        m = nm;
    }
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (lane == 0) smem_m[warp] = m, smem_s[warp] = s;
    __syncthreads();
    m = lane < THREADS / 32 ? smem_m[lane] : -FLT_MAX;
    s = lane < THREADS / 32 ? smem_s[lane] : 0.f;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float om = __shfl_xor_sync(0xffffffffu, m, o), os = __shfl_xor_sync(0xffffffffu, s, o);
        const float nm = fmaxf(m, om);
        s = (s == 0.f ? 0.f : s * __expf(m - nm)) + (os == 0.f ? 0.f : os * __expf(om - nm));
        m = nm;
    }
    const float inv = 1.0f / s;
    for (int c = threadIdx.x; c < cols; c += THREADS) yr[c] = __expf(xr[c] - m) * inv;
}

template <int VPT>
void launch_warp(const float* x, float* y, int rows, int cols, bool vec, cudaStream_t stream) {
    constexpr int rows_per_block = 4;  // 128 threads
    const int blocks = (rows + rows_per_block - 1) / rows_per_block;
    if (vec) softmax_warp<VPT, true><<<blocks, 128, 0, stream>>>(x, y, rows, cols);
    else softmax_warp<VPT, false><<<blocks, 128, 0, stream>>>(x, y, rows, cols);
}

template <int VPT>
void launch_block(const float* x, float* y, int rows, int cols, bool vec, cudaStream_t stream) {
    if (vec) softmax_block<VPT, true><<<rows, 256, 0, stream>>>(x, y, cols);
    else softmax_block<VPT, false><<<rows, 256, 0, stream>>>(x, y, cols);
}

}  // namespace

extern "C" int kevo_forward(const kevo_tensor* in, int n_in, kevo_tensor* out, int n_out, cudaStream_t stream) {
    if (n_in != 1 || n_out != 1) return 1;
    const kevo_tensor& t = in[0];
    if (t.dtype != KEVO_FLOAT32 || t.ndim < 1) return 2;
    const long long cols_ll = t.sizes[t.ndim - 1];
    const long long rows_ll = cols_ll ? kevo_numel(&t) / cols_ll : 0;
    if (rows_ll == 0 || cols_ll == 0) return 0;
    if (rows_ll > 0x7fffffffLL || cols_ll > 0x7fffffffLL) return 3;
    const int rows = (int)rows_ll, cols = (int)cols_ll;
    const float* x = static_cast<const float*>(t.data);
    float* y = static_cast<float*>(out[0].data);
    const bool vec = cols % 4 == 0 && ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(y)) & 15u) == 0;
    if (cols <= 128) launch_warp<4>(x, y, rows, cols, vec, stream);
    else if (cols <= 256) launch_warp<8>(x, y, rows, cols, vec, stream);
    else if (cols <= 512) launch_warp<16>(x, y, rows, cols, vec, stream);
    else if (cols <= 1024) launch_warp<32>(x, y, rows, cols, vec, stream);
    else if (cols <= 2048) launch_block<8>(x, y, rows, cols, vec, stream);
    else if (cols <= 4096) launch_block<16>(x, y, rows, cols, vec, stream);
    else if (cols <= 8192) launch_block<32>(x, y, rows, cols, vec, stream);
    else softmax_online<<<rows, 512, 0, stream>>>(x, y, cols);
    return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
