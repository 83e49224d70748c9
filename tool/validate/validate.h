// The validator: compiles a candidate, runs it in an isolated child process (kernelevo-runner)
// against the task's LibTorch reference on seeded random inputs for every shape set, catches the
// known cheats, times candidate and reference the same way, and reports a ValidationResult.
//
// The kernelevo process itself never touches CUDA: device queries, reference runs and candidate runs
// all happen in children, so a crashing or hanging kernel cannot take the caller down.
#pragma once
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "compile/compile.h"
#include "task/task.h"

namespace kevo {

enum class Status { ok, compile_error, runtime_error, mismatch, timeout, rejected, no_device };
const char* status_name(Status s);
Status parse_status(const std::string& s);  // throws UsageError on an unknown name

struct DeviceInfo {
    bool present = false;
    std::string error;          // why no device (driver missing, no GPU, ...)
    int index = 0;
    std::string name;           // "NVIDIA H200"
    int cc_major = 0, cc_minor = 0;
    int sm_count = 0;
    double mem_bandwidth_gbs = 0;  // theoretical peak from clock and bus width
    int64_t total_mem = 0, l2_bytes = 0;
    int smem_per_block = 0, smem_per_block_optin = 0, smem_per_sm = 0;
    int driver_version = 0, runtime_version = 0;
    std::string arch() const;  // "sm_90"
    nlohmann::json to_json() const;
    static DeviceInfo from_json(const nlohmann::json& j);
};

struct ValidateOptions {
    std::string arch;             // empty: the local GPU's, else sm_90
    double timeout_s = 30;        // watchdog for one candidate run (compile has its own)
    int timing_trials = 100;
    int warmup = 10;
    std::string l2_flush = "read";  // how L2 is flushed before each timed call: read or write
    int timing_copies = 4;          // input/output copies at different addresses, used in turn
    double suspicious_speedup = 10;
    bool time_kernels = true;     // false: correctness only
    std::filesystem::path runner; // empty: kernelevo-runner beside this executable
    CompileOptions compile;       // arch is filled from `arch`
    bool keep_temps = false;
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
    nlohmann::json details;   // per-shape-set and per-check details from the runner
    bool ok() const { return status == Status::ok; }
    nlohmann::json to_json() const;
    static ValidationResult from_json(const nlohmann::json& j);
};

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
    // Runs a compiled candidate; one at a time on the GPU (internally serialized).
    ValidationResult run(const CompileResult& compiled);
    // compile() then run().
    ValidationResult validate(const std::string& source);

private:
    struct Impl;
    Task task_;
    ValidateOptions options_;
    std::unique_ptr<Impl> impl_;
};

}  // namespace kevo
