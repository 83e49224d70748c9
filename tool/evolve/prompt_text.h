// The task-, GPU- and result-dependent text the prompt templates get: the task with its input
// distributions and bounds, the GPU, the speed-of-light floors, and the choice of inspirations.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluate/device_info.h"
#include "task/task.h"

namespace kevo::evolve {

// "normal (mean 0, std 1)", "uniform in [-1, 1)", "integers in [-100, 100)", "all ones", ...
std::string describe_init(const Init& init);
// {{task}}: the reference function, inputs with dtypes, shapes and value distributions, outputs,
// shape sets (which are timed, their weights) and the tolerance.
std::string describe_task(const Task& task);
// The prompt's reference section(s): the reference source under "Reference implementation
// (LibTorch)", or, where the task names reference.show (a reference that is a wrapper, such as an
// imported KernelBench task's generic loader), each of those files under its title instead. Each
// file is cut at max_bytes, and says so.
std::string describe_reference(const Task& task, size_t max_bytes = 40000);
// {{gpu}}
std::string describe_gpu(const DeviceInfo& device, const std::string& arch);
// {{speed_of_light}}: the floors of every timed shape set on this device (bytes each call must
// move, FLOPs where the task gives them); says so when the bandwidth is unknown.
std::string describe_limits(const Task& task, const DeviceInfo& device, double measured_gbs, const std::string& arch);

// A program's speed-of-light fraction and line from its stored details (the ValidationResult JSON,
// whose details hold "sol"; or an evaluator's own details with "sol" at the top). 0 / "" if none.
double sol_fraction_of(const nlohmann::json& details);
std::string sol_line_of(const nlohmann::json& details);

// Inspirations for a mutation of `parent` (an index into `sources`, or -1): first the fastest
// other program, then, one by one, the one most different (token-set Jaccard distance over the
// normalized source) from the parent and those already chosen. At most `n` indices, deterministic.
std::vector<size_t> pick_inspirations(const std::vector<std::string>& sources, const std::vector<double>& speedups, int parent,
                                      int n);

}  // namespace kevo::evolve
