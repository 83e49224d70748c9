// The judge's comparison of an output with the expected one, on the device: counts of elements
// outside atol + rtol * |expected| (exact for integer dtypes), the first and the worst of them, and
// whether the expected output varies at all. Elements are read through dtype.h.
#pragma once
#include <cuda_runtime.h>

#include "device/dtype.h"

namespace kevo_device {

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

}  // namespace kevo_device
