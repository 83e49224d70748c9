// The judge's comparison of an output with the expected one, on the device, by the rule in
// tolerance.h: a first pass finds the expected output's scale (the RMS of its finite elements) and
// whether it varies at all; a second counts the elements outside their scaled tolerance (exact for
// integer dtypes), sums the squared differences for the norm rule, counts KernelBench's own check,
// and finds the first and the worst element. Elements are read through dtype.h.
#pragma once
#include <cuda_runtime.h>

#include "device/dtype.h"
#include "device/tolerance.h"

namespace kevo_device {

struct CompareStats {
    // first pass: the expected output
    double sum_sq;                  // squares of its finite elements
    unsigned long long finite;      // its finite elements
    unsigned long long nonconstant; // elements that differ from expected[0]
    // second pass: the candidate's against it
    double sum_d2;
    unsigned long long mismatches;
    unsigned long long kernelbench_mismatches;
    unsigned long long first_bad;   // smallest mismatching index (~0ull: none)
    unsigned int max_diff_bits;     // float bits of the largest |diff| (inf when NaN/inf disagree)
    unsigned int max_finite_bits;   // float bits of the largest finite |diff|
    unsigned int max_ratio_bits;    // float bits of the largest |diff| / allowed
    unsigned long long worst;       // smallest index whose |diff| equals the largest (third pass)
};

inline CompareStats compare_stats_init() {
    CompareStats s{};
    s.first_bad = ~0ull;
    s.worst = ~0ull;
    return s;
}

// The second pass's sums as tolerance.h adds them up.
inline DiffSums diff_sums(const CompareStats& s) {
    DiffSums d = no_diffs();
    d.mismatches = s.mismatches;
    d.kernelbench_mismatches = s.kernelbench_mismatches;
    d.first_bad = s.first_bad;
    d.sum_d2 = s.sum_d2;
    d.max_diff = bits_float(s.max_diff_bits);
    d.max_finite = bits_float(s.max_finite_bits);
    d.max_ratio = bits_float(s.max_ratio_bits);
    return d;
}

template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
    return v;
}

static __global__ void scale_kernel(const void* expected, int32_t dtype, int64_t n, CompareStats* st) {
    double sum_sq = 0;
    unsigned long long finite = 0, nonconst = 0;
    const double e0 = load_as_double(expected, dtype, 0);
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const double y = load_as_double(expected, dtype, i);
        if (isfinite(y)) {
            sum_sq += y * y;
            ++finite;
        }
        if (y != e0) ++nonconst;
    }
    sum_sq = warp_sum(sum_sq);
    finite = warp_sum(finite);
    nonconst = warp_sum(nonconst);
    if ((threadIdx.x & 31) == 0) {
        if (sum_sq != 0) atomicAdd(&st->sum_sq, sum_sq);
        if (finite) atomicAdd(&st->finite, finite);
        if (nonconst) atomicAdd(&st->nonconstant, nonconst);
    }
}

static __global__ void compare_kernel(const void* got, const void* expected, int32_t dtype, int64_t n, bool exact, OutputTolerance t,
                                      CompareStats* st) {
    DiffSums s = no_diffs();
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        add_element(s, static_cast<unsigned long long>(i),
                    check_element(load_as_double(got, dtype, i), load_as_double(expected, dtype, i), exact, t));
    const double sum_d2 = warp_sum(s.sum_d2);
    if ((threadIdx.x & 31) == 0 && sum_d2 != 0) atomicAdd(&st->sum_d2, sum_d2);
    if (s.mismatches) {
        atomicAdd(&st->mismatches, s.mismatches);
        atomicMin(&st->first_bad, s.first_bad);
    }
    if (s.kernelbench_mismatches) atomicAdd(&st->kernelbench_mismatches, s.kernelbench_mismatches);
    // Non-negative floats order as their bits do.
    atomicMax(&st->max_diff_bits, __float_as_uint(s.max_diff));
    atomicMax(&st->max_finite_bits, __float_as_uint(s.max_finite));
    atomicMax(&st->max_ratio_bits, __float_as_uint(s.max_ratio));
}

static __global__ void worst_kernel(const void* got, const void* expected, int32_t dtype, int64_t n, bool exact, OutputTolerance t,
                                    CompareStats* st) {
    // Run only when something mismatched. Each thread visits its indices in increasing order, so
    // its first hit is its smallest: one atomic per thread at most.
    const float target = __uint_as_float(st->max_diff_bits);
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        if (check_element(load_as_double(got, dtype, i), load_as_double(expected, dtype, i), exact, t).diff == target) {
            atomicMin(&st->worst, static_cast<unsigned long long>(i));
            break;
        }
    }
}

}  // namespace kevo_device
