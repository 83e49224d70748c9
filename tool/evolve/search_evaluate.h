// Inside the search: what becomes of a candidate. It is claimed in the store (or found a duplicate),
// compiled and run through the evaluator (at most parallel_runs() at once), profiled when it is a
// new best, stored with its verdict, and tuned without the LLM when it declares tunables.
#pragma once
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>

#include "evolve/search_state.h"

namespace kevo::evolve::detail {

class EvaluationPipeline {
public:
    explicit EvaluationPipeline(RunState& state) : s_(state) {}
    // Stores an attempt: rejected as a duplicate, evaluated, or recorded as an unusable reply
    // (status "no_code" set by the caller). Throws Stopped when the run must stop.
    void finish(store::Program& p);
    // Tunes a correct program that declares tunables and is within 10% of the best so far. The
    // better variant (if any) is stored under KEY.tune, so a resumed run replays it.
    std::optional<store::Program> tune_program(const store::Program& p, const std::string& key);

private:
    struct GpuSlot;
    struct LockedEvaluator;
    void evaluate(store::Program& p);
    Evaluation run_once(const CompileResult& compiled, double& gpu_s);
    void wait_before_retry(const store::Program& p, const Evaluation& ev, int retry);
    void add_profile(Evaluation& ev, const CompileResult& compiled);

    RunState& s_;
    // Runs in flight at most evaluator.parallel_runs() (one candidate on a local GPU at a time).
    std::mutex gpu_mu_;
    std::condition_variable gpu_cv_;
    int gpu_busy_ = 0;
};

}  // namespace kevo::evolve::detail
