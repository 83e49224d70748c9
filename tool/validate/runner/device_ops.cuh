// Device-side helpers of the runner: deterministic input generation, checksums and comparison.
// Everything works on raw buffers described by (kevo_dtype, element count) so the runner stays
// torch-free and handles multi-GiB tensors at memory speed.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernelevo/abi.h"
#include "task/init_kind.h"

namespace kevo_runner {

__device__ __forceinline__ uint64_t mix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// A counter-based uniform in (0, 1]: the value of element i depends only on (seed, i, lane).
__device__ __forceinline__ double uniform01(uint64_t seed, uint64_t i, uint64_t lane) {
    uint64_t h = mix64(mix64(seed) ^ (i * 2 + lane));
    return ((h >> 11) + 1) * 0x1.0p-53;
}

// Element access by kevo_dtype, expanded from the one dtype table (kernelevo/abi.h).
template <int D> struct dtype_storage;
template <> struct dtype_storage<KEVO_FLOAT32> { using type = float; };
template <> struct dtype_storage<KEVO_FLOAT16> { using type = __half; };
template <> struct dtype_storage<KEVO_BFLOAT16> { using type = __nv_bfloat16; };
template <> struct dtype_storage<KEVO_INT32> { using type = int32_t; };
template <> struct dtype_storage<KEVO_INT64> { using type = int64_t; };
template <> struct dtype_storage<KEVO_BOOL> { using type = uint8_t; };
template <> struct dtype_storage<KEVO_FLOAT64> { using type = double; };
template <> struct dtype_storage<KEVO_INT8> { using type = int8_t; };
template <> struct dtype_storage<KEVO_UINT8> { using type = uint8_t; };

template <typename T> __device__ __forceinline__ double to_double(T v) { return static_cast<double>(v); }
template <> __device__ __forceinline__ double to_double(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ double to_double(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T from_double(double v) { return static_cast<T>(v); }
template <> __device__ __forceinline__ __half from_double(double v) { return __float2half(static_cast<float>(v)); }
template <> __device__ __forceinline__ __nv_bfloat16 from_double(double v) { return __float2bfloat16(static_cast<float>(v)); }

__device__ __forceinline__ double load_as_double(const void* p, int32_t dtype, int64_t i) {
    switch (dtype) {
#define KEVO_LOAD_(e, v, n, sz, fl, at) \
    case KEVO_##e: return to_double(static_cast<const dtype_storage<KEVO_##e>::type*>(p)[i]);
        KEVO_DTYPE_LIST(KEVO_LOAD_)
#undef KEVO_LOAD_
    }
    return 0;
}

__device__ __forceinline__ void store_from_double(void* p, int32_t dtype, int64_t i, double v) {
    if (dtype == KEVO_BOOL) {  // any non-zero value is true
        static_cast<uint8_t*>(p)[i] = v != 0 ? 1 : 0;
        return;
    }
    switch (dtype) {
#define KEVO_STORE_(e, vv, n, sz, fl, at) \
    case KEVO_##e: static_cast<dtype_storage<KEVO_##e>::type*>(p)[i] = from_double<dtype_storage<KEVO_##e>::type>(v); break;
        KEVO_DTYPE_LIST(KEVO_STORE_)
#undef KEVO_STORE_
    }
}

static __global__ void fill_kernel(void* p, int32_t dtype, int64_t n, int kind, double a, double b, uint64_t seed) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        double v = 0;
        switch (kind) {
            case KEVO_INIT_RANDN: {
                double u1 = uniform01(seed, i, 0), u2 = uniform01(seed, i, 1);
                v = a + b * sqrt(-2.0 * log(u1)) * cospi(2.0 * u2);
                break;
            }
            case KEVO_INIT_RAND: v = a + (b - a) * (1.0 - uniform01(seed, i, 0)); break;
            case KEVO_INIT_RANDINT: v = fmin(floor(a + (b - a) * (1.0 - uniform01(seed, i, 0))), b - 1); break;
            case KEVO_INIT_ONES: v = 1; break;
            case KEVO_INIT_ZEROS: v = 0; break;
            case KEVO_INIT_FULL: v = a; break;
            case KEVO_INIT_ARANGE: v = static_cast<double>(i); break;
            default: break;  // file: uploaded by the host, never filled here
        }
        store_from_double(p, dtype, i, v);
    }
}

// Order-independent 64-bit checksum of a byte range (sum of mixed 8-byte words).
static __global__ void checksum_kernel(const void* p, int64_t bytes, unsigned long long* out) {
    const int64_t words = bytes / 8;
    unsigned long long acc = 0;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < words; i += (int64_t)gridDim.x * blockDim.x)
        acc += mix64(static_cast<const uint64_t*>(p)[i] ^ (static_cast<uint64_t>(i) * 0x2545F4914F6CDD1Dull));
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        uint64_t tail = 0;
        for (int64_t b = words * 8; b < bytes; ++b) tail = (tail << 8) | static_cast<const uint8_t*>(p)[b];
        acc += mix64(tail ^ 0xABCDEFull);
    }
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, off);
    if ((threadIdx.x & 31) == 0) atomicAdd(out, acc);
}

// Holds back the stream it runs on until the host raises *flag (or a time limit passes, for kernels
// that synchronize inside their call). Work a kernel enqueues on that stream cannot start before it,
// so anything that changes the outputs meanwhile was done elsewhere.
static __global__ void gate_kernel(volatile int* flag, volatile int* timed_out, long long max_cycles) {
    long long t0 = clock64();
    while (*flag == 0) {
        if (clock64() - t0 > max_cycles) {
            *timed_out = 1;
            return;
        }
        __nanosleep(2000);
    }
}

__device__ __forceinline__ unsigned long long kevo_mix64(unsigned long long x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// The L2 flush before a timed call, with a proof that it ran: it reads the whole flush buffer (random
// values the judge chose) and folds every word, keyed by the previous call's proof and by its
// position, into proof[j + 1] (zeroed by the judge). No shortcut gives that sum without reading the
// whole buffer, and the chain of keys makes every flush of a batch a separate full read, so the
// judge can check any link afterwards and subtract the flushes' time from the time it observed.
constexpr unsigned long long kFlushDigestKey = 0x6b65766f2d666c75ull;  // the judge's check of the buffer itself

// The L2 flush reads a buffer well beyond L2's size (4x, at least 256 MiB), with 4 blocks per SM:
// the judge and the candidate process (its timed calls and its launch-cost calibration) alike.
inline size_t l2_flush_bytes(int64_t l2_bytes) { return static_cast<size_t>(std::max<int64_t>(4 * l2_bytes, int64_t(256) << 20)); }
inline int l2_flush_blocks(int sms) { return std::max(1, sms) * 4; }

// What a call costs that does nothing (the launch-cost calibration and its diagnostics).
static __global__ void empty_kernel() {}

static __global__ void l2_flush_proof(const uint4* p, size_t n, unsigned long long* proof, int j) {
    const unsigned long long key = proof[j];
    unsigned long long acc = 0;
    for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<size_t>(gridDim.x) * blockDim.x) {
        uint4 v = p[i];
        unsigned long long w = ((static_cast<unsigned long long>(v.x) << 32) | v.y) ^ (((static_cast<unsigned long long>(v.z) << 32) | v.w) * 0x9e3779b97f4a7c15ull);
        acc += kevo_mix64(w ^ key ^ (i * 0xd6e8feb86659fd93ull));
    }
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
    if ((threadIdx.x & 31) == 0) atomicAdd(&proof[j + 1], acc);
}

struct CompareStats {
    unsigned long long mismatches;
    unsigned long long first_bad;      // smallest mismatching index (~0ull: none)
    unsigned int max_diff_bits;        // float bits of the largest |diff| (inf when NaN/inf disagree)
    unsigned int max_finite_bits;      // float bits of the largest finite |diff|
    unsigned long long nonconstant;    // expected elements that differ from expected[0]
    unsigned long long worst;          // smallest index whose |diff| equals the largest (second pass)
};

__device__ __forceinline__ float elem_diff(double x, double y, bool exact, double atol, double rtol, bool* bad) {
    if (exact) {
        *bad = x != y;
        return static_cast<float>(fabs(x - y));
    }
    if (isnan(x) || isnan(y)) {
        *bad = !(isnan(x) && isnan(y));
        return *bad ? INFINITY : 0.f;
    }
    if (isinf(x) || isinf(y)) {
        *bad = x != y;
        return *bad ? INFINITY : 0.f;
    }
    double d = fabs(x - y);
    *bad = d > atol + rtol * fabs(y);
    return static_cast<float>(d);
}

static __global__ void compare_kernel(const void* got, const void* expected, int32_t dtype, int64_t n, bool exact, double atol,
                               double rtol, CompareStats* st) {
    unsigned long long bad_count = 0, first = ~0ull, nonconst = 0;
    float max_diff = 0.f, max_finite = 0.f;
    const double e0 = load_as_double(expected, dtype, 0);
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        double x = load_as_double(got, dtype, i), y = load_as_double(expected, dtype, i);
        bool bad;
        float d = elem_diff(x, y, exact, atol, rtol, &bad);
        if (bad) {
            ++bad_count;
            if (static_cast<unsigned long long>(i) < first) first = i;
        }
        max_diff = fmaxf(max_diff, d);
        if (isfinite(d)) max_finite = fmaxf(max_finite, d);
        if (y != e0) ++nonconst;
    }
    if (bad_count) {
        atomicAdd(&st->mismatches, bad_count);
        atomicMin(&st->first_bad, first);
    }
    if (nonconst) atomicAdd(&st->nonconstant, nonconst);
    atomicMax(&st->max_diff_bits, __float_as_uint(max_diff));
    atomicMax(&st->max_finite_bits, __float_as_uint(max_finite));
}

static __global__ void worst_kernel(const void* got, const void* expected, int32_t dtype, int64_t n, bool exact, double atol,
                             double rtol, CompareStats* st) {
    // Run only when something mismatched. Each thread visits its indices in increasing order, so
    // its first hit is its smallest: one atomic per thread at most.
    const float target = __uint_as_float(st->max_diff_bits);
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        bool bad;
        float d = elem_diff(load_as_double(got, dtype, i), load_as_double(expected, dtype, i), exact, atol, rtol, &bad);
        if (d == target) {
            atomicMin(&st->worst, static_cast<unsigned long long>(i));
            break;
        }
    }
}

}  // namespace kevo_runner
