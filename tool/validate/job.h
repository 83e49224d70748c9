// The contract between the validator (kernelevo) and its judge process (kernelevo-runner): one job
// in, one result out, as JSON lines. Both sides use these types; neither builds the JSON by hand.
// Header-only and torch-free: the runner (a CUDA program) includes it too.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernelevo/abi.h"
#include "task/init_kind.h"

namespace kevo {

struct JobTensor {
    std::string name;
    int32_t dtype = KEVO_FLOAT32;  // kevo_dtype
    std::vector<int64_t> sizes;
    int init = KEVO_INIT_RANDN;  // kevo_init_kind (inputs only)
    double a = 0, b = 1;         // the init's parameters (task/init_kind.h)
    std::string path;            // init file: absolute path of the raw contiguous bytes
    bool parameter = false;      // init file: a model parameter, varied after each set's first trial (task.h)
    int64_t numel() const {
        int64_t n = 1;
        for (auto s : sizes) n *= s;
        return n;
    }
    int64_t bytes() const { return numel() * kevo_dtype_size(dtype); }
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(JobTensor, name, dtype, sizes, init, a, b, path, parameter)

struct JobShapeSet {
    std::string label;  // "M=4096, N=4096"
    std::vector<JobTensor> inputs, outputs;
    bool timed = false;   // timed as well as checked
    double weight = 1;    // its weight in the geometric-mean speedup
    double reference_us = 0;  // known reference time (timed earlier in this run); 0: time it now
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(JobShapeSet, label, inputs, outputs, timed, weight, reference_us)

struct Job {
    std::string kernel;         // the compiled candidate (.so), or empty for a reference-only job
    std::string reference;      // the reference build (.so)
    std::string reference_arg;  // passed to kevo_ref_setup() when the reference defines it
    std::vector<JobShapeSet> sets;
    int trials = 5;             // correctness trials in all (at least two per shape set)
    double atol = 1e-4, rtol = 1e-4;
    uint64_t seed = 42;
    bool time = true;
    int timing_trials = 100;        // the most timed calls per shape set
    int min_timing_trials = 20;     // the fewest before stopping early
    double target_ci = 0.005;       // stop once the median's 95% interval is within ±this fraction
    double extend_timing_s = 0;     // > 0: a set still imprecise at timing_trials may take up to 10x as many calls while its timing cost under this (trials.h)
    int warmup = 10;
    double timing_budget_s = 10;    // all timing of one job
    std::string l2_flush = "read";  // read: a proven read of a buffer 4x L2 before each call; none
    int timing_copies = 64;         // input/output copies, one per call of a timed batch
    // The wall-clock cross-check: what a timed batch may cost beyond its calls' reported times and
    // the proven flushes (messages, a context switch), and what each call may add (launch, events).
    double wall_batch_allow_us = 1000;
    double wall_call_allow_us = 6;
    double verify_fraction = 0.1;   // share of timed calls whose outputs are checked afterwards
    double call_timeout_s = 30;     // the longest one call into the candidate may take
    double best_speedup = 0;        // a known reference time is re-measured when a result would beat this
    // The candidate process: its sandbox command prefix, environment and work dir.
    std::vector<std::string> sandbox_prefix;
    std::map<std::string, std::string> candidate_env;
    std::string workdir;
    bool confine = true;            // seccomp + Landlock inside the candidate process
    std::vector<std::string> readable;  // Landlock: paths the candidate process may read
    std::vector<std::string> writable;  // Landlock: paths the candidate process may write
    bool load_only = false;         // load the candidate (static constructors, symbols) and stop
    std::string label;              // what it is for, shown to other users of the GPU lock (the task's name)
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(Job, kernel, reference, reference_arg, sets, trials, atol, rtol, seed, time,
                                                timing_trials, min_timing_trials, target_ci, extend_timing_s, warmup,
                                                timing_budget_s, l2_flush, timing_copies, wall_batch_allow_us,
                                                wall_call_allow_us, verify_fraction, call_timeout_s, best_speedup,
                                                sandbox_prefix, candidate_env, workdir, confine, readable, writable,
                                                load_only, label)

// What the judge reports. `status` is a validation status name (validate.h), or "setup_error" when
// the reference or the runner failed (not the candidate's fault).
struct JobResult {
    std::string status = "runtime_error";
    std::string log;
    double max_abs_diff = 0;
    int trials = 0;
    std::vector<std::string> warnings;
    nlohmann::json device = nlohmann::json::object();
    nlohmann::json checks = nlohmann::json::array();
    nlohmann::json timing = nlohmann::json::object();   // per timed set: kernel, reference, trials, ...
    nlohmann::json sandbox = nlohmann::json::object();  // the layers the candidate process ran under
    nlohmann::json profile_s = nlohmann::json::object();
    std::string candidate_output;                       // the candidate process's stdout+stderr (capped)
    // After a wall-clock rejection: other processes' use of the GPU during the job
    // (runner/gpu_activity.h), so the validator can say whose time it was.
    nlohmann::json interference;
    // Each wait for the device's lock that passed a second, said once: whose turn it was and for what.
    std::vector<std::string> lock_waits;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(JobResult, status, log, max_abs_diff, trials, warnings, device, checks,
                                                timing, sandbox, profile_s, candidate_output, interference,
                                                lock_waits)

// Part of the judge's wall-clock rejection (runner/timing.cu), by which the validator and the judge
// recognize it.
constexpr const char* kWallCheckPhrase = "do not agree with the time the judge observed";

}  // namespace kevo
