// Internal to the search: batch mode (--llm-batch) and the import of Batch API replies
// (--llm-batch-replies), behind three hooks of the search loop (load, waiting/defer, finish).
//
// A batch-mode run never sends a request: each slot that needs a reply not in the store defers
// its request and stops; once every slot has stopped, the deferred requests are written as the
// next batch file "<prefix>-<n>.jsonl" and recorded in the store (custom_id "b<n>:<key>"), and
// the run stops with reason "batch". A later run imports the replies files first: every line is
// matched by custom_id with a recorded request and stored as the LLM call of its key, so the
// replay of the generation finds it and nothing is asked twice; a reply already stored (an import
// interrupted by a kill, or the same file given twice) is skipped, never counted twice. Requests
// whose lines failed (errors, an expired batch) may be requested again; requests still waiting in
// a batch are never sent again, online or in another batch, and the budget holds their reservations.
#pragma once
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "evolve/search.h"
#include "llm/budget.h"
#include "store/store.h"

namespace kevo::evolve {

class BatchMode {
public:
    BatchMode(const SearchConfig& cfg, store::Store& store, llm::Budget& budget);
    // Imports the replies files and holds the budget of the requests still waiting. Returns the
    // tokens and cost the imported replies counted. Throws UsageError for a file that is not a
    // Batch API output of this run.
    store::Spent load(const llm::LogFn& log);
    // True when `key` waits for a reply in a batch written already (do not request it).
    bool waiting(const std::string& key);
    // Batch mode: defers the request into the next batch file. False when the budget cannot hold
    // it next to what is deferred or waiting already.
    bool defer(const std::string& key, const std::string& kind, const llm::ChatRequest& request);
    // After the slots stopped: writes and records the deferred requests as the next batch file and
    // fills the result's batch fields. Returns the run's stop reason: "batch" when it waits for
    // replies, "budget" when only the budget stopped a deferral, "" otherwise.
    std::string finish(SearchResult& result);

private:
    struct Deferred {
        std::string key, kind;
        llm::ChatRequest request;
        llm::Reservation reservation;
    };
    const SearchConfig& cfg_;
    store::Store& store_;
    llm::Budget& budget_;
    std::mutex mu_;
    std::set<std::string> waiting_, asked_;        // keys in written batches; those asked this run
    std::vector<llm::Reservation> held_;
    std::vector<Deferred> deferred_;
    bool budget_stopped_ = false;
};

}  // namespace kevo::evolve
