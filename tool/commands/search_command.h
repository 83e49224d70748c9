// `kernelevo search` as a function, for the commands that run searches (search, bench): its
// arguments, its options (all but --task, --out, --state, --fresh and --initial) and one run.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "evolve/search.h"
#include "llm/options.h"

namespace CLI { class App; }

namespace kevo::evolve {

struct SearchArgs {
    std::string task, out, arch, state, initial, prompts, mode = "mixed", max_time, workers, schedule = "steady";
    std::string python;            // --python: the interpreter with Triton (--backend triton|both)
    bool fresh = false, json = false, no_profile = false;
    // issue 35 (tool/baseline): the fitness's baseline (reference | baseline::kinds()), whether the
    // PyTorch baselines are timed for the summary, and whether AOTInductor is among them (--aoti).
    std::string fitness_baseline = "reference";
    bool no_baselines = false, aoti = false;
    std::string batch_dir = ".";   // --llm-batch-dir
    double timeout = 30;
    int timing_trials = 100;
    SearchConfig cfg;
    llm::LlmOptions llm;
};

struct SearchOutcome {
    int rc = 1;                 // as `kernelevo search` exits: 0 done with a kernel, 1 not (yet), 2 setup, 3 batch
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
};

// "90", "90s", "30m", "2h" -> seconds (--max-time); UsageError on anything else.
double parse_duration(const std::string& s);

// The search options shared by `kernelevo search` and `kernelevo bench`.
void add_search_options(CLI::App& cmd, SearchArgs& args);
// One search, resumable through args.state (printing progress lines prefixed by progress_prefix);
// writes the best kernel into the cache directory args.out. Throws UsageError on bad setup.
SearchOutcome run_search(SearchArgs& args, const std::string& progress_prefix = "");

}  // namespace kevo::evolve

namespace kevo {
// `kernelevo search --model-dir DIR` (model_search_command.cpp): one `kernelevo search` per region of
// the model folder's plan.json with status "task", as child processes of this executable, at most
// `jobs` at once, the --max-time split by time share; every search option set on `cmd` is passed on.
struct ModelSearchArgs {
    std::string dir;
    int jobs = 2;
    bool dry_run = false;
};
int run_model_search(const evolve::SearchArgs& a, const ModelSearchArgs& m, const CLI::App& cmd);
}  // namespace kevo
