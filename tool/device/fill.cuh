// The device side of the one filler (fill.h): the kernel the validator's runner and the profiler's
// kernelevo-profile launch. Element i gets value(seed, i, ...) whatever the grid, so any launch shape gives the
// bits fill_host gives.
#pragma once
#include <cuda_runtime.h>

#include "device/fill.h"

namespace kevo_device {

static __global__ void fill_kernel(void* p, int32_t dtype, int64_t n, int kind, double a, double b, uint64_t seed) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        store_from_double(p, dtype, i, value(seed, static_cast<uint64_t>(i), kind, a, b));
}

// Adds vary_noise to the n elements of a floating `dtype` at p, in place (a varied parameter, fill.h).
static __global__ void vary_kernel(void* p, int32_t dtype, int64_t n, double scale, uint64_t seed) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        store_from_double(p, dtype, i, add(load_as_double(p, dtype, i), vary_noise(seed, static_cast<uint64_t>(i), scale)));
}

}  // namespace kevo_device
