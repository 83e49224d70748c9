// The evaluator seam (evaluate/evaluator.h) over the validation queue (`kernelevo search --workers redis://...`):
// compile() queues a compile job (a compile-only or GPU worker builds the .so and puts it in the
// queue by content hash), run() queues a run job naming that object (a GPU worker of the
// architecture fetches it, verifies its sha256, checks and times it). Many runs may be in flight:
// each GPU takes its jobs one at a time, so the search keeps enough candidates in flight to keep
// every worker busy.
//
// Jobs are content-addressed: a search restarted after kill -9 that submits the same candidate
// gets the stored result (or joins the queued job) instead of validating it again.
#pragma once
#include <atomic>
#include <functional>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "evaluate/evaluator.h"
#include "validate/validate.h"
#include "worker/queue.h"

namespace kevo::worker {

class RemoteEvaluator : public Evaluator {
public:
    // Publishes the task to the queue. `options.arch` empty: the architecture of a live GPU worker,
    // else sm_90. `log` receives occasional lines (waiting for workers).
    RemoteEvaluator(const std::string& queue_url, const Task& task, const ValidateOptions& options,
                    std::function<void(const std::string&)> log = nullptr);
    ~RemoteEvaluator() override;

    DeviceInfo device() override;
    std::string arch() override;
    CompileResult compile(const std::string& source) override;
    Evaluation run(const CompileResult& compiled) override;
    // A "run" job with the confirmation asked (JobSpec::confirm): a worker confirms as the local
    // validator does, in a fresh sandbox with new seeds.
    Evaluation confirm(const CompileResult& compiled, const Evaluation& first, double agree = 0.1) override;
    int parallel_runs() override { return 1 << 20; }  // the workers take turns per GPU
    int capacity() override;                          // 2 per live worker of this architecture

    // Submits a job and waits for its result (thread-safe); nullopt when the wait gave up
    // (stop_when()). The first job that no live worker serves logs one warning saying so.
    std::optional<nlohmann::json> wait(const JobSpec& spec);
    // Queue overhead of the jobs so far: submit -> result seen, minus the time the job waited for a
    // free worker and the worker's time on it (ms).
    std::vector<double> overhead_ms();
    // How long each job waited for a free worker (ms): a backlog, not the queue's cost.
    std::vector<double> queued_ms();
    const std::string& display() const { return ops_->display(); }
    // Tells `kernelevo serve` about the run (its state location, task, architecture).
    void register_run(const std::string& state_display);
    // How the search stops this evaluator's waits (kernelevo search: Ctrl-C, --max-time).
    // `stopping` answers 0 while the search runs, 1 once it stops (the first Ctrl-C, or past its
    // deadline), 2 when it aborts (a second Ctrl-C). A job's wait then gives up: at 1 when no live
    // worker serves its stream (none would ever answer), at 2 at once. Given up, run() reports no
    // device and compile() a result whose run() does (a stopping search never runs it): no verdict
    // on the candidate, which a resumed run evaluates.
    void stop_when(std::function<int()> stopping);
    // Whether a live worker (heartbeat within 3 leases) takes jobs of `kind` for this architecture.
    bool served(const std::string& kind);

private:
    struct Waiter {
        std::condition_variable cv;
        std::optional<nlohmann::json> result;
    };
    void listen();
    std::vector<nlohmann::json> live_workers();
    JobSpec spec(const std::string& kind, const std::string& source) const;
    Evaluation stopped_evaluation(const std::string& kind);
    // The run job of a candidate compile() answered (its source and the compiling worker's toolkit
    // taken from what compile() kept).
    JobSpec run_spec(const CompileResult& compiled, std::string& toolkit);

    const Task& task_;
    ValidateOptions options_;
    std::function<void(const std::string&)> log_;
    std::unique_ptr<Queue> ops_, listener_;
    std::string client_, arch_;
    nlohmann::json job_options_;
    std::mutex mu_;
    std::map<std::string, std::shared_ptr<Waiter>> waiters_;
    // Compiled object handle -> {source, the compiling worker's toolkit}, until run().
    std::map<std::string, std::pair<std::string, std::string>> sources_;
    // Run job id (its first run's) -> how many of its runs were not judged: the next one is a new job.
    std::map<std::string, int> reruns_;
    std::vector<double> overhead_ms_, queued_ms_;
    std::atomic<bool> done_{false}, warned_{false};
    std::function<int()> stopping_;
    std::thread listen_thread_;
};

}  // namespace kevo::worker
