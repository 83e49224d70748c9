// Device-side helpers of the runner: checksums, the gate and the L2 flush; input generation and
// comparison come from tool/device/ (fill.cuh, compare.cuh). Everything works on raw buffers
// described by (kevo_dtype, element count) so the runner stays torch-free and handles multi-GiB
// tensors at memory speed.
#pragma once
#include <cuda_runtime.h>
#include <stdint.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "device/compare.cuh"
#include "device/fill.cuh"
#include "kernelevo/abi.h"

namespace kevo_runner {

// The one filler and the compare kernels live in tool/device/ (kernelevo-profile and refcheck use
// the same): the judge calls them by these names.
using kevo_device::CompareStats;
using kevo_device::compare_kernel;
using kevo_device::fill_kernel;
using kevo_device::mix64;
using kevo_device::tensor_seed;
using kevo_device::vary_kernel;
using kevo_device::worst_kernel;

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

}  // namespace kevo_runner
