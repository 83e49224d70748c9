// The judge's verdict on one output of one correctness trial: tool/device/tolerance.h's rule, run on
// the device by tool/device/compare.cuh, and what the result and the log say about it.
#pragma once
#include <cuda_runtime.h>

#include <string>

#include <nlohmann/json.hpp>

#include "device/compare.cuh"
#include "validate/job.h"

namespace kevo_runner {

struct OutputCheck {
    bool pass = true;
    bool varies = false;      // the expected output is not the same value everywhere
    double max_abs = 0;       // the largest finite |diff|
    nlohmann::json report;    // its figures (details.checks[].outputs[])
    std::string message;      // why it failed, for the log (empty when it passed)
};

// `got` and `expected` are device buffers of `d`'s shape and dtype; `dev` the judge's stats buffer;
// `where` names the trial ("shape set 0 (M=4096), seed 7") for the message. Throws SetupFailure
// (judge.h) when CUDA fails.
OutputCheck compare_output(const kevo::JobTensor& d, const void* got, const void* expected, double atol, double rtol, int grid,
                           cudaStream_t stream, kevo_device::CompareStats* dev, const std::string& where);

}  // namespace kevo_runner
