// `kernelevo search`'s options for the commands that run searches (search, bench): all but --task,
// --out, --state, --fresh and --initial; the search itself is workflows/search.h.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "workflows/search.h"

namespace CLI { class App; }

namespace kevo::evolve {

// The request and outcome of a search, and run_search(), are the use case's (workflows/search.h).
using workflows::run_search;
using workflows::SearchArgs;
using workflows::SearchOutcome;

// The search options shared by `kernelevo search` and `kernelevo bench`.
void add_search_options(CLI::App& cmd, SearchArgs& args);

}  // namespace kevo::evolve

namespace kevo {
// `kernelevo search --model-dir DIR` (model_search_command.cpp): one `kernelevo search` per region of
// the model folder's plan.json with status "task", as child processes of this executable, at most
// `jobs` at once, the --max-time split by time share; every search option set on `cmd` is passed on.
struct ModelSearchArgs {
    std::string dir;
    int jobs = 2;
    bool dry_run = false;
    std::vector<std::string> regions;  // --region: only these (region or task names)
};
int run_model_search(const evolve::SearchArgs& a, const evolve::SearchConfig& cfg, const ModelSearchArgs& m,
                     const CLI::App& cmd);
}  // namespace kevo
