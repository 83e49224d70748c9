// The validator: compiles a candidate, runs it in an isolated child process (kernelevo-runner)
// against the task's LibTorch reference on seeded random inputs for every shape set, catches the
// known cheats, times candidate and reference the same way, and reports a ValidationResult.
//
// The kernelevo process itself never touches CUDA: device queries, reference runs and candidate runs
// all happen in children, so a crashing or hanging kernel cannot take the caller down.
#pragma once
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "compile/compile.h"
#include "evaluate/device_info.h"
#include "evaluate/status.h"
#include "task/task.h"
#include "validate/gpu_lock.h"

namespace kevo {

struct ValidateOptions {
    std::string arch;             // empty: the local GPU's, else sm_90
    double timeout_s = 30;        // watchdog for one candidate run (compile has its own)
    int timing_trials = 100;        // the most timed calls per shape set
    int min_timing_trials = 20;     // the fewest before stopping early
    double target_ci = 0.005;       // stop once the time's 95% interval is within +-0.5%
    // > 0: a shape set still imprecise at timing_trials goes on (up to 10x) while its timing cost
    // under this many seconds. A launch-bound set's calls spread by about 10% (gelu_bias's 33x1001
    // set on the H200), and 100 of them left its speedup 1.7% apart between validations in one run;
    // 1000 calls, about 0.1 s, 0.6-0.7% (README). Since the launch-cost correction the per-process
    // shift that had made more calls useless is small within a run.
    double extend_timing_s = 0.25;
    double verify_fraction = 0.1;   // share of timed calls whose outputs are checked
    bool reuse_reference_timing = true;  // time the reference once per run (re-timed periodically)
    int warmup = 10;
    // How L2 is flushed before each timed call: read (a proven read of a buffer 4x L2, by the
    // candidate process before each call and by the judge before each reference call) or none.
    std::string l2_flush = "read";
    int timing_copies = 64;         // input/output copies, one per call of a timed batch (1-64)
    double suspicious_speedup = 10;
    // The inputs' seed. 0 (the default): a fresh random seed for every validation, so no candidate
    // can know its inputs in advance, nor find results an earlier candidate left for the same
    // inputs. The seed used is in the result's details ("seed"); set it to repeat a validation.
    uint64_t seed = 0;
    bool time_kernels = true;     // false: correctness only
    std::filesystem::path runner; // empty: kernelevo-runner beside this executable
    CompileOptions compile;       // arch is filled from `arch`
    int device_index = -1;        // the GPU to use (KERNELEVO_DEVICE); -1: the default
    bool keep_temps = false;
};

// The options a validation job carries to a worker on another host (worker/): one list, so that
// the search's side and the worker's side cannot disagree on which travel. The rest are local
// (paths, the device, the compiler's own options).
#define KEVO_PORTABLE_VALIDATE_OPTIONS(X)                                                              \
    X(timeout_s) X(timing_trials) X(min_timing_trials) X(target_ci) X(verify_fraction)                 \
    X(reuse_reference_timing) X(warmup) X(l2_flush) X(timing_copies) X(suspicious_speedup) X(time_kernels) X(extend_timing_s) \
    X(seed)
nlohmann::json portable_options(const ValidateOptions& o);
// Sets the portable options present in `j` (the others keep their values).
void apply_portable_options(ValidateOptions& o, const nlohmann::json& j);

struct ShapeTiming {
    int set = 0;
    std::string label;
    double kernel_us = 0, reference_us = 0, speedup = 0, weight = 1;
};

struct ValidationResult {
    Status status = Status::runtime_error;
    double speedup = 0, kernel_us = 0, reference_us = 0;
    double kernel_spread = 0, reference_spread = 0;  // (p90 - p10) / median, as a fraction
    double max_abs_diff = 0;
    bool suspicious = false;  // speedup above the threshold
    std::string log;          // trimmed compiler output, the error text, or the first mismatch
    std::string arch, gpu;
    double compile_s = 0, run_s = 0;
    int trials = 0;           // correctness trials run
    std::vector<ShapeTiming> shapes;  // every timed shape set; `speedup` is their weighted geometric mean
    bool confirmed = false;   // a second validation in a fresh sandbox with new seeds agreed
    nlohmann::json details;   // per-shape-set and per-check details from the runner
    bool ok() const { return status == Status::ok; }
    nlohmann::json to_json() const;
    nlohmann::json shapes_json() const;
    static ValidationResult from_json(const nlohmann::json& j);
};

// Holds the device's GPU lock (gpu_lock.h) in `use` for as long as the returned object lives: the
// one lock every GPU use of the tool takes (a judge's correctness runs shared and its timing
// exclusive, profiling a kernel, timing PyTorch, an import), keyed by the device's UUID. nullptr
// when `d` is no device. `note`: the waiting line; `reason`: what it is for, shown to the others.
// `use` has no default: an import that took the lock exclusively by default ran its problems one at a time.
std::unique_ptr<GpuLock> lock_device(const DeviceInfo& d, GpuUse use, const std::string& reason,
                                     const std::function<void(const std::string&)>& note = {});

// Why a failed validation is not the kernel's fault ("" when it may be): no GPU, or a wall-clock
// rejection while the judge saw other processes use the GPU ("not_attributable" in its details).
// Such a failure is retried where a result matters (confirm), and a search neither counts it
// against the kernel's source (its hash) nor tells the LLM that the kernel misbehaved.
std::string outside_kernel_reason(const ValidationResult& r);
// The status/log phrase of the judge's wall-clock rejection (runner/timing.cu).
bool is_wall_check_rejection(const ValidationResult& r);

class Validator {
public:
    Validator(Task task, ValidateOptions options);
    ~Validator();
    const Task& task() const { return task_; }
    // Queries the GPU once (in a child process) and caches the answer.
    const DeviceInfo& device();
    // The target architecture: options.arch, else the local GPU's, else sm_90.
    std::string arch();
    // Thread-safe; may run in parallel with other compiles and with run().
    CompileResult compile(const std::string& source);
    // Runs a compiled candidate; one at a time per validator (its judge process). The judge holds the
    // device's GpuLock shared for the correctness runs and exclusively for the timed calls only.
    ValidationResult run(const CompileResult& compiled);
    // compile() then run().
    ValidationResult validate(const std::string& source);
    // Validates `compiled` again in a fresh sandbox with new seeds and a re-measured reference;
    // `first` is confirmed when both succeed and their speedups agree within `agree` (fraction).
    // What enters a cache goes through here. A second validation that fails for a reason outside
    // the kernel (outside_kernel_reason, a timeout, a wall-clock rejection, speedups apart) is
    // tried again, at most `attempts` times in all, after a short pause: one busy moment of the
    // GPU does not keep a kernel out of the cache.
    ValidationResult confirm(const CompileResult& compiled, const ValidationResult& first, double agree = 0.1, int attempts = 3);
    // A result that would beat this speedup gets its reference re-measured in the same run.
    void set_best_speedup(double s);
    // Device copy bandwidth (GB/s, read + written), measured once per device and cached; 0 without a GPU.
    double measured_bandwidth_gbs();
    // Where progress notes go (waiting for the GPU lock, sandbox layers); default: stderr.
    void set_note(std::function<void(const std::string&)> note);
    // lock_device(device()), exclusive: for measurements beside validations (the profiler, PyTorch timings).
    std::unique_ptr<GpuLock> lock_gpu(const std::string& reason = "");
    // Seconds between attempts (confirm's, and run's after a wall-clock rejection); tests set 0.
    void set_retry_pause(double s);

private:
    ValidationResult run_job(const CompileResult& compiled, uint64_t seed_offset, bool fresh_reference);
    // run_job, again while the GPU's memory was taken by other processes (validator_retry.cpp).
    ValidationResult run_for_memory(const CompileResult& compiled, uint64_t seed_offset, bool fresh_reference);
    ValidationResult send_job(const struct Job& job, const ValidationResult& base);
    std::string verify_compiled(const CompileResult& compiled);
    struct Impl;
    Task task_;
    ValidateOptions options_;
    std::unique_ptr<Impl> impl_;
};

}  // namespace kevo
