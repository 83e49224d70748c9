// Internal to the search: batch mode (--llm-batch) and the import of Batch API replies
// (--llm-batch-replies), behind three hooks of the search loop (load, waiting/defer, finish).
//
// A batch-mode run never sends a request: each slot that needs a reply not in the store defers
// its request and stops; once every slot has stopped, the deferred requests are written as the
// next batch file "<prefix>-<n>.jsonl" and recorded in the store, and the run stops with reason
// "batch". A later run imports the replies files first: every line is matched by custom_id with a
// recorded request and stored as the LLM call of its key, so the replay of the generation finds
// it and nothing is asked twice; a reply already stored (the same file given twice, a kill after
// an import) is skipped, never counted twice. Requests whose lines failed (errors, an expired
// batch) may be requested again; requests still waiting in a batch are never sent again, online
// or in another batch, and the budget holds their reservations.
//
// Batch files belong to their run. A state gets a random run id ("r" and 8 hex digits, metadata
// "run_id") the first time a search opens it, and every custom_id names it with the task and
// architecture: "RUN.TASK.ARCH:b<n>:<key>" (at most 64 characters of [A-Za-z0-9_.:-], what Batch
// APIs accept; a key that would not fit is replaced by "k" and 12 hex digits of its hash). An
// import checks every line of every replies file before it stores anything, and refuses the whole
// import, naming the line, for: a file of another run, task or architecture (saying whose it is),
// a reply to a request this run never wrote, a custom_id twice in a file, an input file given as
// replies, an empty file or one cut short in a line. A file that passes is stored in one store
// transaction (Store::import_batch_replies): all of it or, should the process die, none of it.
// States of older versions (custom ids "b<n>:<key>", no run id) still import their own files;
// their batches written from now on carry the run id.
#pragma once
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "evolve/search.h"
#include "llm/batch.h"
#include "llm/budget.h"
#include "store/store.h"

namespace kevo::evolve {

// The parts of a custom_id that kernelevo wrote; nullopt for any other text.
struct BatchCustomId {
    std::string run, task, arch;   // "" in an id of an older version ("b<n>:<key>")
    int batch = 0;
    std::string key;               // the key, or "k" + hash where it did not fit
};
std::optional<BatchCustomId> parse_batch_custom_id(const std::string& id);
// "RUN.TASK.ARCH": the part of every custom_id that names the run (task and arch made safe and
// short; see above).
std::string batch_run_tag(const std::string& run_id, const std::string& task, const std::string& arch);
// "TAG:b<batch>:<key>", at most kMaxBatchCustomId characters.
constexpr size_t kMaxBatchCustomId = 64;
std::string batch_custom_id(const std::string& tag, int batch, const std::string& key);

class BatchMode {
public:
    BatchMode(const SearchConfig& cfg, store::Store& store, llm::Budget& budget);
    // Gives the state its run id when it has none, imports the replies files and holds the budget
    // of the requests still waiting. Returns the tokens and cost the imported replies counted.
    // Throws UsageError, before anything is stored, for a file that is not a Batch API output of
    // this run's batch files.
    store::Spent load(const llm::LogFn& log);
    // True when `key` waits for a reply in a batch written already (do not request it).
    bool waiting(const std::string& key);
    // Batch mode: defers the request into the next batch file. False when the budget cannot hold
    // it next to what is deferred or waiting already.
    bool defer(const std::string& key, const std::string& kind, const llm::ChatRequest& request);
    // After the slots stopped: writes and records the deferred requests as the next batch file and
    // fills the result's batch fields. Returns the run's stop reason: batch when it waits for
    // replies, budget when only the budget stopped a deferral, none otherwise.
    StopReason finish(SearchResult& result);

private:
    // A replies file, checked: what it adds to the store.
    struct Checked {
        std::string file;
        struct Line {
            const store::BatchRequest* request;
            llm::ChatRequest chat;   // its request, parsed once
            llm::BatchReply reply;
        };
        std::vector<Line> lines;   // new answers and failures
        int known = 0;   // lines imported (or failed) before
    };
    // What the files checked so far answer: custom_ids, and keys with a reply.
    struct Seen {
        std::set<std::string> ids, keys;
    };
    void identity();
    Checked check(const std::string& file, const std::map<std::string, store::BatchRequest>& by_id, Seen& seen,
                  bool legacy_records) const;
    std::string foreign(const std::string& where, const std::string& custom_id, bool legacy_records) const;

    struct Deferred {
        std::string key, kind;
        llm::ChatRequest request;
        llm::Reservation reservation;
    };
    const SearchConfig& cfg_;
    store::Store& store_;
    llm::Budget& budget_;
    std::string run_id_, task_, arch_, tag_;        // this run's identity (identity())
    std::mutex mu_;
    std::set<std::string> waiting_, asked_;        // keys in written batches; those asked this run
    std::vector<llm::Reservation> held_;
    std::vector<Deferred> deferred_;
    bool budget_stopped_ = false;
};

}  // namespace kevo::evolve
