// Notes added to a ValidationResult after a run: speed-of-light figures (sol/ computes them) and
// ptxas's resources (from the compile). What `kernelevo validate`, the cache, the search's
// ValidatorEvaluator and `kernelevo tune` call after a run.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "sol/sol.h"
#include "validate/validate.h"

namespace kevo {

// The kernel times of a result per timed shape set: details.shapes[] ({"set", "kernel_us"}) when the
// runner timed several sets, else the result's kernel_us for the first timed set.
std::vector<std::pair<int, double>> kernel_times(const ValidationResult& r, const Task& task);

// Adds details["sol"] (sol::Sol::to_json()) to an ok result with a kernel time; leaves others as they
// are. `gbs` 0: nothing is added (sol::bandwidth_of() gives it). `sm_count` scales the compute peak
// (0: the table's reference part).
void annotate_sol(ValidationResult& r, const Task& task, double gbs, const std::string& bandwidth_source = "measured copy bandwidth",
                  int sm_count = 0);
// The same with the kernel times given: (shape set, kernel us) per timed set, e.g. from the
// validator's per-set timings.
void annotate_sol(ValidationResult& r, const Task& task, double gbs, const std::string& bandwidth_source, int sm_count,
                  const std::vector<std::pair<int, double>>& kernel_us);

// Adds details["resources"] (ptxas figures per kernel, KernelResources::to_json()) from the compile.
void annotate_resources(ValidationResult& r, const CompileResult& compiled);

}  // namespace kevo
