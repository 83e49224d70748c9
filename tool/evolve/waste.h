// What a run spent for nothing, and how well it used its GPU (issue 36): the one computation that
// the search summary, the state, `kernelevo report` (text, JSON, HTML) all show.
//
// A wasted request is an LLM request whose reply could not change the search: a repair asked for
// an attempt that was no fault of the kernel's (not judged: the GPU's memory or time was taken by
// others, so the honest reply is the same kernel), for a duplicate, or with no error text to fix.
// The search sends none of these; the figure shows that it did not (and what an older run paid).
//
// GPU use: the candidates that ran on the GPU, the GPU time their evaluations held (the
// validator's job under the GPU lock, retries included; "gpu_s" in a program's details), and
// candidates per GPU-minute.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "store/store.h"

namespace kevo::evolve {

struct Waste {
    int64_t requests = 0, prompt_tokens = 0, completion_tokens = 0;
    double cost_usd = 0;
    int64_t not_judged = 0;  // candidates stored as not judged (no request spent on them)
    int64_t evaluated = 0;   // candidates that ran on the GPU
    double gpu_s = 0;        // the GPU time of their evaluations
    double wall_s = 0;       // the run's wall time (0: unknown, e.g. a report of a state file alone)
    double gpu_minutes() const { return gpu_s / 60; }
    double candidates_per_gpu_minute() const { return gpu_s > 0 ? static_cast<double>(evaluated) / gpu_minutes() : 0; }
    // The share of the run's wall time its evaluations held a GPU (0 when the wall time is unknown).
    double busy_share() const { return wall_s > 0 ? gpu_s / wall_s : 0; }
    // {"wasted": {"requests", "prompt_tokens", "completion_tokens", "cost_usd"}, "not_judged",
    //  "gpu": {"candidates", "minutes", "candidates_per_minute"[, "wall_s", "busy_share"]}}
    nlohmann::json to_json() const;
    // Two lines, "Wasted LLM requests: ..." and "GPU: ...", each ending in "\n".
    std::string text() const;
};

// Whether the evaluator could not judge it, retries included: status not_judged (or a failure with
// details "outside_kernel": true, as states from before that status stored it).
bool not_judged(const store::Program& p);
// Whether a repair of `failed` (the attempt before it) could not change the search.
bool repair_is_waste(const store::Program& failed);
Waste waste_of(const std::vector<store::Program>& programs, const std::vector<store::LlmCall>& calls);
// Of a state: its programs and calls, and the run's wall time when recorded (meta "elapsed_s").
Waste waste_of(store::Store& store);

}  // namespace kevo::evolve
