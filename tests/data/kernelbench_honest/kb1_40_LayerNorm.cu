// A plain honest kernel for KernelBench L1-40 (nn.LayerNorm((64, 256, 256)) on [16, 64, 256, 256]:
// each of the 16 rows of 4 Mi elements is normalized with its own mean and biased variance, eps 1e-5,
// then scaled by ln.weight and shifted by ln.bias, both [64, 256, 256]).
// Two kernels, so a row's 4 Mi elements are spread over many blocks: (1) each block sums x and x^2 of
// its share of a row in double precision into a partial; (2) each block adds its row's partials,
// derives mean and 1/sqrt(var + eps) (double), and writes its share. Deterministic, no atomics.
// Simple and clearly correct, not tuned.
#include <kernelevo/abi.h>
#include <math.h>

constexpr double kEps = 1e-5;        // nn.LayerNorm's default eps
constexpr int kThreads = 256;
constexpr int kMaxPartials = 65536;  // capacity of the partials buffer: rows * blocks per row
__device__ double g_sum[kMaxPartials], g_sumsq[kMaxPartials];

// Sums a and b over the block (kThreads threads); thread 0 gets the totals.
__device__ void block_sum2(double& a, double& b) {
    __shared__ double sa[kThreads / 32], sb[kThreads / 32];
    for (int o = 16; o > 0; o >>= 1) {
        a += __shfl_xor_sync(0xffffffffu, a, o);
        b += __shfl_xor_sync(0xffffffffu, b, o);
    }
    if ((threadIdx.x & 31) == 0) { sa[threadIdx.x >> 5] = a; sb[threadIdx.x >> 5] = b; }
    __syncthreads();
    if (threadIdx.x == 0) {
        a = 0.0; b = 0.0;
        for (int i = 0; i < kThreads / 32; ++i) { a += sa[i]; b += sb[i]; }
    }
}

// grid (P, rows): block (p, r) sums elements p*kThreads + t, stepping P*kThreads, of row r.
__global__ void row_partials(const float* __restrict__ x, long long inner) {
    const long long r = blockIdx.y, p = blockIdx.x, P = gridDim.x;
    const float* row = x + r * inner;
    double s = 0.0, sq = 0.0;
    for (long long i = p * kThreads + threadIdx.x; i < inner; i += P * kThreads) {
        const double v = row[i];
        s += v;
        sq += v * v;
    }
    block_sum2(s, sq);
    if (threadIdx.x == 0) { g_sum[r * P + p] = s; g_sumsq[r * P + p] = sq; }
}

// grid (P, rows): every block of row r reduces the row's P partials, then normalizes its share.
__global__ void normalize(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                          float* __restrict__ y, long long inner) {
    __shared__ float stats[2];
    const long long r = blockIdx.y, p = blockIdx.x, P = gridDim.x;
    double s = 0.0, sq = 0.0;
    for (long long i = threadIdx.x; i < P; i += kThreads) { s += g_sum[r * P + i]; sq += g_sumsq[r * P + i]; }
    block_sum2(s, sq);
    if (threadIdx.x == 0) {
        const double mean = s / (double)inner;
        double var = sq / (double)inner - mean * mean;  // biased variance, as LayerNorm uses
        if (var < 0.0) var = 0.0;
        stats[0] = (float)mean;
        stats[1] = (float)(1.0 / sqrt(var + kEps));
    }
    __syncthreads();
    const float mean = stats[0], rstd = stats[1];
    const float* row = x + r * inner;
    float* out = y + r * inner;
    for (long long i = p * kThreads + threadIdx.x; i < inner; i += P * kThreads)
        out[i] = (row[i] - mean) * rstd * w[i] + b[i];
}

extern "C" int kevo_forward(const kevo_tensor* in, int n_in, kevo_tensor* out, int n_out, cudaStream_t s) {
    // in: x [..., normalized dims], ln.weight [normalized dims], ln.bias [normalized dims]; out: like x
    if (n_in != 3 || n_out != 1 || in[1].ndim < 1 || in[0].ndim < in[1].ndim) return 1;
    long long inner = 1, numel = 1;
    for (int d = 0; d < in[1].ndim; ++d) {
        if (in[1].sizes[d] != in[0].sizes[in[0].ndim - in[1].ndim + d]) return 1;
        inner *= in[1].sizes[d];
    }
    for (int d = 0; d < in[0].ndim; ++d) numel *= in[0].sizes[d];
    if (numel == 0) return 0;
    const long long rows = numel / inner;
    if (rows > kMaxPartials || rows > 65535) return 1;  // more rows than this plain kernel's buffers hold
    long long P = (inner + kThreads - 1) / kThreads;   // blocks per row: at most one per kThreads elements,
    if (P > 128) P = 128;                              // at most 128 (16 rows x 128 = 2048 blocks here),
    if (P > kMaxPartials / rows) P = kMaxPartials / rows;  // and within the partials buffer
    const dim3 grid((unsigned)P, (unsigned)rows);
    row_partials<<<grid, kThreads, 0, s>>>((const float*)in[0].data, inner);
    normalize<<<grid, kThreads, 0, s>>>((const float*)in[0].data, (const float*)in[1].data, (const float*)in[2].data,
                                        (float*)out[0].data, inner);
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
