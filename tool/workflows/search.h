// The use case "run a search": one `kernelevo search` (and each search of `kernelevo bench`) from
// its request to its outcome: the evaluator (local validator or the workers' queue), the state and
// its one-writer lease, Ctrl-C, the confirmed best into the cache, the exit code. The commands parse
// the request (tool/commands/search_command.cpp), call run_search() and print the outcome.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/exit_code.h"
#include "evolve/search.h"
#include "llm/options.h"

namespace kevo::workflows {

// What `kernelevo search` was asked (its options; the command line fills it).
struct SearchArgs {
    std::string task, out, arch, state, initial, prompts, max_time, workers, schedule = "steady";
    std::string python;            // --python: the interpreter of the languages that run Python (CandidateLanguage::python_use)
    bool fresh = false, json = false, no_profile = false;
    // issue 35 (tool/baseline): the fitness's baseline (reference | baseline::kinds()), whether the
    // PyTorch baselines are timed for the summary, and whether AOTInductor is among them (--aoti).
    std::string fitness_baseline = "reference";
    bool no_baselines = false, aoti = false;
    std::string batch_dir = ".";   // --llm-batch-dir
    double timeout = 30;
    int timing_trials = 100;
    evolve::SearchConfig cfg;      // the search's settings the command line sets directly (--islands, --mode, ...)
    llm::LlmOptions llm;
};

struct SearchOutcome {
    int rc = kExitFailed;       // as `kernelevo search` exits: 0 done with a kernel, 1 not (yet), 2 setup, 3 batch
    std::string stop_reason;    // SearchResult::stop_reason
    evolve::StopReason stop = evolve::StopReason::none;  // SearchResult::stop
    bool finished = false;      // stopped by generations, target, budget or time (not interrupted)
    bool found = false;         // a correct kernel was written to `out`
    double speedup = 0;
    nlohmann::json best_details;  // the best program's validation (ValidationResult::to_json())
    int64_t tokens = 0;         // prompt + completion tokens of the whole run (resumes included)
    double cost_usd = 0;
    std::string arch;
    int generations = 0;
    nlohmann::json baselines;   // the PyTorch baselines the search measured (baseline::Result::to_json()), or null
    nlohmann::json summary;     // with args.json: the final summary (README.md, "JSON output"); else null
};

// The search's configuration from the request (`args.cfg` with the time limit, the schedule, the
// profiles, the budgets and the model filled in), checked by evolve::validate(): a SettingError names
// the setting at fault. Reads no file and touches no LLM, so a command can check it first.
evolve::SearchConfig search_config(const SearchArgs& args);

// One search of `cfg` (search_config(args), which the caller computes once, first), resumable through
// args.state (printing progress lines prefixed by progress_prefix to stderr); writes the best kernel
// into the cache directory args.out. Throws UsageError on bad setup.
SearchOutcome run_search(const SearchArgs& args, evolve::SearchConfig cfg, const std::string& progress_prefix = "");

}  // namespace kevo::workflows
