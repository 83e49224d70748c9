// Speed-of-light figures on a ValidationResult: what the validator, `kernelevo validate`, the search
// and `kernelevo tune` call after a successful run. Header-only use of validate.h: kevo_validate
// itself links this (kevo_sol).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "sol/sol.h"
#include "validate/validate.h"

namespace kevo::sol {

// The bandwidth the memory floors assume, and where it comes from: the measured copy bandwidth
// (Validator::measured_bandwidth_gbs(), read + write counted) when positive, else the device's
// datasheet peak (from clock and bus width), else 0 (no GPU: no floors).
std::pair<double, std::string> bandwidth_of(const DeviceInfo& device, double measured_gbs = 0);

// The kernel times of a result per timed shape set: details.shapes[] ({"set", "kernel_us"}) when the
// runner timed several sets, else the result's kernel_us for the first timed set.
std::vector<std::pair<int, double>> kernel_times(const ValidationResult& r, const Task& task);

// Adds details["sol"] (Sol::to_json()) to an ok result with a kernel time; leaves others as they are.
// `gbs` 0: nothing is added. `sm_count` scales the compute peak (0: the table's reference part).
void annotate_sol(ValidationResult& r, const Task& task, double gbs, const std::string& bandwidth_source = "measured copy bandwidth",
                  int sm_count = 0);
// The same with the kernel times given: (shape set, kernel us) per timed set, e.g. from the
// validator's per-set timings.
void annotate_sol(ValidationResult& r, const Task& task, double gbs, const std::string& bandwidth_source, int sm_count,
                  const std::vector<std::pair<int, double>>& kernel_us);

}  // namespace kevo::sol

namespace kevo {
// Adds details["resources"] (ptxas figures per kernel, KernelResources::to_json()) from the compile.
void annotate_resources(ValidationResult& r, const CompileResult& compiled);
}  // namespace kevo
