// Each output's accuracy over a validation's correctness trials, from the judge's per-trial figures
// (details.checks[].outputs[], runner/verdict.cu; the rule is tool/device/tolerance.h).
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kevo {

// Adds details.accuracy (per output: the largest |diff| and relative L2 error over the trials, the
// effective tolerance, the largest fraction of it used, near_tolerance) and details.kernelbench_check
// ("pass" or "fail": KernelBench's own allclose at atol = rtol = 1e-2, reported, never the verdict).
// Returns a warning for each output right only to about its tolerance (more than half of it used).
std::vector<std::string> summarize_accuracy(nlohmann::json& details);

}  // namespace kevo
