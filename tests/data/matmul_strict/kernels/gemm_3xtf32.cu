// fp32 matrix product on TF32 tensor cores with the 3xTF32 split (what CUTLASS calls fast fp32):
// each operand x = big + small, big = tf32(x), small = tf32(x - big), and
// c += a_small*b_big + a_big*b_small + a_big*b_big, as accurate as fp32 (the dropped small*small term
// lies below fp32's rounding) at a third of the TF32 rate. mma.sync m16n8k8, 128x128x16 block tiles,
// 8 warps of 64x32, two blocks per SM, cp.async double buffering. M and N must be multiples of 128
// and K of 16 (the task's 4096^3); other shapes are refused (return 1).
#include <kernelevo/abi.h>

#include <cstdint>

constexpr int BM = 128, BN = 128, BK = 16, APAD = 4, BPAD = 8, THREADS = 256;

__device__ __forceinline__ uint32_t to_tf32(float x) {
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
}
__device__ __forceinline__ void split(float x, uint32_t& big, uint32_t& small) {
    big = to_tf32(x);
    small = to_tf32(x - __uint_as_float(big));
}
__device__ __forceinline__ void mma(float* c, const uint32_t* a, const uint32_t* b) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
    const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(gmem));
}

struct Tiles {
    float a[2][BM][BK + APAD];  // row-major A tile; the padding spreads a fragment's rows over the banks
    float b[2][BK][BN + BPAD];
};

__device__ __forceinline__ void load_tiles(Tiles& s, int stage, const float* A, const float* B, int N, int K, int bm, int bn, int k0) {
    for (int i = threadIdx.x; i < BM * BK / 4; i += THREADS) {
        const int row = i / (BK / 4), c = (i % (BK / 4)) * 4;
        cp_async16(&s.a[stage][row][c], A + (size_t)(bm + row) * K + k0 + c);
    }
    for (int i = threadIdx.x; i < BK * BN / 4; i += THREADS) {
        const int row = i / (BN / 4), c = (i % (BN / 4)) * 4;
        cp_async16(&s.b[stage][row][c], B + (size_t)(k0 + row) * N + bn + c);
    }
    asm volatile("cp.async.commit_group;");
}

// One k8 step of the warp's 64x32 tile: fragments split into big and small, three mmas each.
__device__ __forceinline__ void step(const Tiles& s, int st, int kk, int wm, int wn, int g, int t, float (&acc)[4][4][4]) {
    uint32_t ab[4][4], as[4][4], bb[4][2], bs[4][2];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int r = wm + i * 16 + g;
        split(s.a[st][r][kk + t], ab[i][0], as[i][0]);
        split(s.a[st][r + 8][kk + t], ab[i][1], as[i][1]);
        split(s.a[st][r][kk + t + 4], ab[i][2], as[i][2]);
        split(s.a[st][r + 8][kk + t + 4], ab[i][3], as[i][3]);
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const int c = wn + j * 8 + g;
        split(s.b[st][kk + t][c], bb[j][0], bs[j][0]);
        split(s.b[st][kk + t + 4][c], bb[j][1], bs[j][1]);
    }
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            mma(acc[i][j], as[i], bb[j]);
            mma(acc[i][j], ab[i], bs[j]);
            mma(acc[i][j], ab[i], bb[j]);
        }
}

__global__ void __launch_bounds__(THREADS, 2) gemm_3xtf32(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int N,
                                                       int K) {
    __shared__ __align__(16) Tiles s;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int wm = (warp / 4) * 64, wn = (warp % 4) * 32;  // the warp's tile within the block's
    const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;
    float acc[4][4][4] = {};
    load_tiles(s, 0, A, B, N, K, bm, bn, 0);
    const int tiles = K / BK;
    for (int kt = 0; kt < tiles; ++kt) {
        const int st = kt & 1;
        asm volatile("cp.async.wait_group 0;" ::: "memory");
        __syncthreads();  // tile kt is in; every warp is done reading stage st ^ 1
        if (kt + 1 < tiles) load_tiles(s, st ^ 1, A, B, N, K, bm, bn, (kt + 1) * BK);
#pragma unroll
        for (int kk = 0; kk < BK; kk += 8) step(s, st, kk, wm, wn, g, t, acc);
    }
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const size_t row = bm + wm + i * 16 + g, col = bn + wn + j * 8 + 2 * t;
            *reinterpret_cast<float2*>(C + row * N + col) = make_float2(acc[i][j][0], acc[i][j][1]);
            *reinterpret_cast<float2*>(C + (row + 8) * N + col) = make_float2(acc[i][j][2], acc[i][j][3]);
        }
}

extern "C" int kevo_forward(const kevo_tensor* in, int n_in, kevo_tensor* out, int n_out, cudaStream_t st) {
    if (n_in != 2 || n_out != 1) return 1;
    const int64_t M = in[0].sizes[0], K = in[0].sizes[1], N = in[1].sizes[1];
    if (M % BM || N % BN || K % BK || M / BM > 65535) return 1;
    dim3 grid((unsigned)(N / BN), (unsigned)(M / BM));
    gemm_3xtf32<<<grid, THREADS, 0, st>>>((const float*)in[0].data, (const float*)in[1].data, (float*)out[0].data, (int)N, (int)K);
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
