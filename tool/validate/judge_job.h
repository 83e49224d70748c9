// The job a Validator sends its judge (validate/job.h), built from the task and the options, and the
// judge's answer read back into a ValidationResult. The Validator (validate.cpp) owns the judge
// process, the reference, the GPU lock and the reference-time reuse; these are the pure parts.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "common/fs.h"
#include "validate/job.h"
#include "validate/validate.h"

namespace kevo {

// The last n characters of s, marked "[...]" when cut.
std::string log_tail(const std::string& s, size_t n);

// The inputs' seed: options.seed + seed_offset when a seed is given, else a fresh random one
// (53 bits, exact in any JSON reader; never 0).
uint64_t job_seed(const ValidateOptions& options, uint64_t seed_offset);

// The candidate process's confinement in `workdir`: the sandbox prefix (the GPU only when `gpu`),
// its environment (KERNELEVO_DEVICE where options.device_index is set) and Landlock's readable and
// writable paths (`namespaces`: the sandbox has its own /tmp), and the per-call watchdog.
void set_job_sandbox(Job& job, const fs::path& workdir, const fs::path& runner, bool gpu, bool namespaces,
                     const ValidateOptions& options);

// Each shape set of the task: its label, input and output tensors, whether it is timed and its weight.
std::vector<JobShapeSet> job_shape_sets(const Task& task);

// The correctness check's tolerances and trials, and the timing's settings.
void set_job_checks(Job& job, const Task& task, const ValidateOptions& options);

// A judge's answer that is not a setup error, read into `res`: status, log, details (accuracy,
// candidate output, warnings), the per-set timing, the speedup (and the one against strict fp32),
// the suspicious flag, and after a wall-clock rejection whether other processes used the GPU.
void read_job_result(JobResult out, const ValidateOptions& options, ValidationResult& res);

// The facts of the validation added to a result's details: the judge's waits for the GPU lock, the
// seed, the tolerance rule, and the reference's precision (moved up from the timing).
void add_validation_facts(nlohmann::json& details, const Task& task, uint64_t seed);

}  // namespace kevo
