// A validation worker (`kernelevo worker`): takes jobs from the queue's streams through the
// consumer group, heartbeats (status + lease renewal on the job in progress), takes over jobs whose
// worker died or stalled once their lease ran out, dead-letters a job that has been started
// `max_attempts` times without finishing, and writes every result once.
//
// A GPU worker reads run:<arch> first, then compile:<arch> when no run job waits; a compile-only
// worker reads compile:<arch> for each of its architectures. What a job does is the JobHandler's:
// ValidatorHandler (the real validator) in `kernelevo worker`, a scripted one in tests.
#pragma once
#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "validate/validate.h"
#include "worker/queue.h"

namespace kevo::worker {

struct WorkerOptions {
    std::string redis_url;
    std::string name;                 // empty: HOST-gpuN-PID or HOST-cpu-PID
    int gpu = -1;                     // the device index (KERNELEVO_DEVICE for the runner); -1 with compile_only
    bool compile_only = false;
    std::vector<std::string> archs;   // compile-only: architectures to compile for; GPU: empty = the device's
    double lease_s = 30;              // a job untouched this long is taken over by another worker
    double heartbeat_s = 0;           // 0: lease_s / 4
    int max_attempts = 3;             // starts of one job before it is dead-lettered
    double max_job_s = 900;           // a job running longer stops being renewed (a stalled worker loses it)
    int max_jobs = 0;                 // exit after this many jobs (0: never; for tests and draining)
    double idle_exit_s = 0;           // exit after this long without a job (0: never)
    int log_lines = 30;               // recent log lines shown in the status
};

// One job's work. handle() returns the result JSON written to the queue; an exception becomes a
// "runtime_error" result with its message (a UsageError about the task: status "error").
class JobHandler {
public:
    virtual ~JobHandler() = default;
    virtual nlohmann::json handle(const Claimed& job, Queue& queue, const std::function<void(const std::string&)>& log) = 0;
    // For the status: {"gpu": name, "arch": ...} or {} for a compile-only worker.
    virtual nlohmann::json device() { return nlohmann::json::object(); }
};

// The real thing: tasks fetched from the queue and materialized under the cache, one Validator per
// task and options; compile jobs put the shared object in the queue by content hash, run jobs fetch
// it (verifying the sha256), or compile themselves when it is gone.
class ValidatorHandler : public JobHandler {
public:
    explicit ValidatorHandler(const WorkerOptions& options);
    ~ValidatorHandler() override;
    nlohmann::json handle(const Claimed& job, Queue& queue, const std::function<void(const std::string&)>& log) override;
    nlohmann::json device() override;
    // The device's architecture ("" without one).
    std::string device_arch();

private:
    Validator& validator(const JobSpec& spec, Queue& queue);
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

struct WorkerSummary {
    int64_t jobs = 0, duplicates = 0, dead = 0, reclaimed = 0;
    std::string stop_reason;  // "stopped", "max_jobs", "idle"
};

// Runs the worker loop until `stop` is set, max_jobs or idle_exit_s. Throws UsageError when the
// queue cannot be reached at start.
WorkerSummary run_worker(const WorkerOptions& options, JobHandler& handler, const std::atomic<bool>* stop);

// The streams a worker reads, in priority order.
std::vector<std::string> worker_streams(const WorkerOptions& options);

}  // namespace kevo::worker
