// The steps of run_search() (search.cpp) kept in their own files: the evaluator chosen and its
// hooks (evaluators.cpp: the only place that knows the queue's RemoteEvaluator), and the Ctrl-C
// watcher around a search (interrupt.cpp); and the PyTorch baselines that search, bench and validate
// share (search.cpp). Internal to tool/workflows.
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "baseline/baseline.h"
#include "evaluate/evaluator.h"
#include "evolve/search.h"
#include "llm/llm.h"
#include "validate/validate.h"

namespace kevo::workflows {

struct SearchArgs;

// The evaluator of a search and what the search command does with the queue's (no-ops for the
// local validator): tell `kernelevo serve` about the run, stop its waits, report its overhead.
struct Evaluators {
    std::unique_ptr<Evaluator> evaluator;
    std::function<void(const std::string& state_display)> register_run = [](const std::string&) {};
    // `stopping`: 0 while the search runs, 1 once it stops, 2 when it aborts (a second Ctrl-C).
    std::function<void(std::function<int()> stopping)> stop_when = [](std::function<int()>) {};
    std::function<void()> report_overhead = [] {};
};

// The workers' queue (--workers) or the local validator (with ncu profiles unless --no-profile).
Evaluators make_evaluators(const SearchArgs& a, const Task& task, const ValidateOptions& vo, Validator& validator,
                           bool profile_best);

// Runs the search; the first Ctrl-C sets `stop` (the search ends after the work in flight), the
// second cancels the LLM requests through `provider`; the evaluator's waits honour both.
evolve::SearchResult run_interruptibly(evolve::Search& search, llm::Provider& provider, Evaluators& ev,
                                       double max_time_s, std::atomic<bool>& stop);

// The task's PyTorch baselines (tool/baseline: in the import's sandbox, under the GPU lock) timed
// with `o` on `device`; with `progress`, what is timed and each wait said on stderr.
baseline::Result time_torch_baselines(const Task& task, baseline::Options o, const DeviceInfo& device, bool progress);

// The baselines not run, as the request said: each "not run: --no-baselines".
baseline::Result no_torch_baselines(const Task& task);

}  // namespace kevo::workflows
