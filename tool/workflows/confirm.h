// The use case "confirm and cache a best": what enters a cache is judged twice, through the
// Evaluator seam (the local validator: a fresh sandbox, new seeds; the queue: a second job on a
// worker), and written (cache::store_candidate) only when the two agree.
#pragma once
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "evaluate/evaluator.h"
#include "store/store.h"
#include "task/task.h"

namespace kevo::workflows {

struct CacheRequest {
    std::filesystem::path out;  // the cache directory (NAME/sm_XX.cu + .json)
    std::string arch;
    std::string origin = "search";  // EntryMeta::origin
    std::string model;              // the model that wrote it
    store::Spent spent;             // the LLM tokens and cost behind it, for the entry
};

struct CacheOutcome {
    bool written = false;
    bool confirmed = false;     // a second judgement agreed (false also when none could run)
    std::string refused;        // why not written, when not
    std::string not_confirmed;  // why it was written without a second judgement (no device, no verdict)
    std::filesystem::path source;  // the cache entry's source, when written
};

// Confirms `best` (its details: the first run's result) through `evaluator` when it has a device,
// then writes it. A kernel whose language keeps its own source in the cache (CandidateLanguage::
// keeps_source()) is stored as the .cu generated from it (a compile that fails again here
// throws UsageError). Prints nothing.
CacheOutcome confirm_and_cache(Evaluator& evaluator, const Task& task, const store::Program& best, const CacheRequest& req);

}  // namespace kevo::workflows
