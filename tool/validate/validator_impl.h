// Validator's state (validate.h), shared by the files that implement it: validate.cpp (a job on the
// judge) and validator_retry.cpp (the retries and the confirmation). The job itself is built and
// its result read in judge_job.h.
#pragma once
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "common/fs.h"
#include "common/process.h"
#include "reference/reference.h"
#include "validate/job.h"
#include "validate/validate.h"

namespace kevo {

struct Validator::Impl {
    std::mutex device_mu, ref_mu, run_mu, bw_mu;
    bool device_queried = false;
    DeviceInfo device;
    bool ref_built = false;
    ReferenceBuild ref;
    fs::path runner;
    std::unique_ptr<Subprocess> judge;
    // The reference's time per shape set, measured once and re-measured periodically.
    std::map<int, double> ref_us;
    int ref_age = 0;
    std::chrono::steady_clock::time_point ref_time;
    double best_speedup = 0;
    double bandwidth = -1;
    double retry_pause_s = 2;
    std::function<void(const std::string&)> note = [](const std::string& s) { std::fprintf(stderr, "kernelevo: %s\n", s.c_str()); };

    // The task's reference, built once (thread-safe); throws UsageError when it does not build.
    const ReferenceBuild& reference(const Task& task);
    // Under run_mu: gives the job the reference times measured earlier (and the best speedup, so a
    // result that would beat it re-measures), unless they are stale, fresh_reference is asked or
    // options.reuse_reference_timing is off. Returns whether it did.
    bool reuse_reference_times(Job& job, const ValidateOptions& options, bool fresh_reference);
    // Under run_mu: keeps the reference times an ok result measured (not reused ones); they age from
    // now unless `reused`.
    void remember_reference_times(const ValidationResult& out, bool reused);
    // Starts the judge process (kernelevo-runner --serve) unless one is alive.
    void start_judge(int device_index);
    // The judge timed out or died before answering: kills it and says so in `res`.
    void judge_lost(Subprocess::Read rd, ValidationResult& res);
};

}  // namespace kevo
