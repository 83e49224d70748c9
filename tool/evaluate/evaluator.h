// The seam between a search (evolve/, tune/) and whatever measures its candidates: compile them (in
// parallel) and run them (one at a time on a local GPU). validate/validator_evaluator.h adapts the
// local kevo::Validator, worker/remote_evaluator.h the validation queue; tests script their own.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "evaluate/compile_result.h"
#include "evaluate/device_info.h"
#include "evaluate/status.h"

namespace kevo {

struct Evaluation {
    Status status = Status::runtime_error;
    double speedup = 0;
    std::string feedback;    // for prompts: timings when ok, else the compile log / error / first mismatch
    nlohmann::json details;  // the full result (ValidationResult::to_json() for the real validator)
    // A failure the kernel did not cause (the GPU's memory taken by other processes, a GPU too busy
    // to time it): the verdict says nothing about the kernel. A search runs the same candidate
    // again itself (after retry_after_s, else its own back-off) and never asks the model about it.
    bool outside_kernel = false;
    double retry_after_s = 0;  // a hint for that wait; 0: the caller's own
    // Seconds this evaluation held the GPU (the validator's job under its lock); 0: not reported,
    // the caller times run() instead.
    double gpu_s = 0;
    bool ok() const { return status == Status::ok; }
};

class Evaluator {
public:
    virtual ~Evaluator() = default;
    // The target GPU, for prompts (present == false when unknown).
    virtual DeviceInfo device() = 0;
    virtual std::string arch() = 0;  // "sm_90"
    // Thread-safe: the search compiles several candidates at once.
    virtual CompileResult compile(const std::string& source) = 0;
    // Only called for a successful compile, and never more than parallel_runs() at once (the
    // search serializes runs on a local GPU).
    virtual Evaluation run(const CompileResult& compiled) = 0;
    // The device's measured copy bandwidth in GB/s (read + write counted) for the speed-of-light
    // floors; 0 when not measured (the datasheet peak in device() stands in, and prompts say so).
    virtual double measured_bandwidth_gbs() { return 0; }
    // A few lines from a profiler (Nsight Compute) about a compiled candidate that ran correctly,
    // for the next prompts; "" when there is no profiler. Never called concurrently with run().
    virtual std::string profile(const CompileResult& /*compiled*/) { return ""; }
    // A second, independent judgement of a candidate whose run() passed (`first`), before it enters
    // a cache. ok when the second passes and the two speedups agree within `agree` (a fraction);
    // else `feedback` says why not. details["confirmation"] holds the second judgement; status
    // no_device: no verdict (no device, or the wait gave up). Default (the queue's workers, tests):
    // run() once more and compare; validate/ confirms in a fresh sandbox with new seeds.
    virtual Evaluation confirm(const CompileResult& compiled, const Evaluation& first, double agree = 0.1);
    // Runs the search may have in flight at once: 1 for the local GPU; many through the queue,
    // where every worker takes its GPU's jobs one at a time.
    virtual int parallel_runs() { return 1; }
    // Candidates to keep in flight to keep every validator busy (0: the search's own default).
    virtual int capacity() { return 0; }
};

}  // namespace kevo
