// The evolution loop: islands of MAP-Elites archives, LLM mutations (full rewrite or
// SEARCH/REPLACE edits), a repair loop, migration, restarts on stagnation, budgets, and a state
// store that makes every run resumable.
//
// A run is a sequence of generations. Generation 0 makes the seed program (the user's --initial
// kernel, else the LLM's first straightforward kernel) and gives it to every island. Each later
// generation runs `children` slots per island concurrently; a slot picks a parent in its island's
// archive (fitness-proportional with a temperature), asks the LLM for a child, validates it and
// repairs it up to `evolution.repair_attempts` times. When all slots are done the generation is committed:
// children enter their archives, migration and restarts happen, and the islands' new state goes to
// the store in one transaction.
//
// Resume: every LLM call and every candidate is stored under a key derived from its place in the
// run ("g4.i1.c0.a2"), and every random choice is drawn from a generator seeded by (seed, key).
// A resumed run replays the unfinished generation from the store — no stored reply is requested
// again and no evaluated candidate is evaluated again — and then continues.
//
// With `steady`, generations overlap (see EvolutionConfig::steady); the keys, the store and resume
// are the same, a resume replays every generation after the last committed one.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "evaluate/evaluator.h"
#include "evolve/prompts.h"
#include "evolve/search_config.h"
#include "evolve/stop.h"
#include "evolve/waste.h"
#include "llm/llm.h"
#include "store/store.h"
#include "task/task.h"

namespace kevo::evolve {

struct Progress {
    int generation = 0;
    double best_speedup = 0;
    double best_sol = 0;           // the best fraction of the speed of light reached (0: unknown)
    int64_t ok = 0, failed = 0, duplicates = 0;
    int64_t not_judged = 0;        // candidates the evaluator could not judge, retries included
    int64_t tokens = 0;
    double cost_usd = 0, elapsed_s = 0;
};

struct SearchResult {
    StopReason stop = StopReason::none;  // why the run stopped (stop.h)
    std::string stop_reason;             // its text with the error's detail: printed, stored as meta "stop_reason"
    std::optional<store::Program> best;  // the fastest correct program of the whole run
    std::string best_model;              // the model whose reply produced it ("" for --initial)
    Progress progress;
    int generations_committed = 0;       // generations completed so far (0 included)
    Waste waste;                         // requests spent for nothing, GPU use (waste.h); also meta "waste"
    // Stop reason "batch": the batch file written now ("" when none) and its request count, and
    // how many requests of earlier batches the run waited for.
    std::string batch_file;
    int batch_written = 0, batch_waiting = 0;
};

class Search {
public:
    // `task` must outlive the search; the reference source is read once here. `config` is checked
    // (validate(): its caller checks it once, before anything is read or sent).
    Search(const Task& task, SearchConfig config, Prompts prompts, llm::Provider& provider, Evaluator& evaluator,
           store::Store& store);
    ~Search();
    // Called after every evaluation and generation (from worker threads, serialized).
    void on_progress(std::function<void(const Progress&)> fn);
    // Runs until a stop condition. `stop` (e.g. set by SIGINT) makes it stop cleanly: no new LLM
    // request or evaluation starts, the unfinished generation is replayed on resume.
    // Throws UsageError when the store belongs to another task or another run structure.
    SearchResult run(const std::atomic<bool>* stop = nullptr);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace kevo::evolve
