// The evolution loop: islands of MAP-Elites archives, LLM mutations (full rewrite or
// SEARCH/REPLACE edits), a repair loop, migration, restarts on stagnation, budgets, and a state
// store that makes every run resumable.
//
// A run is a sequence of generations. Generation 0 makes the seed program (the user's --initial
// kernel, else the LLM's first straightforward kernel) and gives it to every island. Each later
// generation runs `children` slots per island concurrently; a slot picks a parent in its island's
// archive (fitness-proportional with a temperature), asks the LLM for a child, validates it and
// repairs it up to `repair_attempts` times. When all slots are done the generation is committed:
// children enter their archives, migration and restarts happen, and the islands' new state goes to
// the store in one transaction.
//
// Resume: every LLM call and every candidate is stored under a key derived from its place in the
// run ("g4.i1.c0.a2"), and every random choice is drawn from a generator seeded by (seed, key).
// A resumed run replays the unfinished generation from the store — no stored reply is requested
// again and no evaluated candidate is evaluated again — and then continues.
//
// With `steady`, generations overlap (see SearchConfig::steady); the keys, the store and resume
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
#include "evolve/stop.h"
#include "evolve/waste.h"
#include "llm/llm.h"
#include "store/store.h"
#include "task/task.h"

namespace kevo::evolve {

struct SearchConfig {
    // Structure: fixed for a run (a resume with different values is refused).
    int islands = 3;
    int children = 2;              // slots per island per generation
    uint64_t seed = 0;
    // "cuda", "triton" or "both": with both, even islands write Triton and odd ones CUDA (their
    // seeds and mutations; a program that migrates in is translated on its first mutation), and
    // techniques keep CUDA and Triton programs in separate archive cells.
    std::string backend = "cuda";
    // Evolution.
    int generations = 50;          // evolution generations after the seed generation 0
    int repair_attempts = 6;       // per failing candidate
    // A verdict outside the kernel (Evaluation::outside_kernel: the GPU's memory or time taken by
    // other processes) never becomes a repair prompt: the same candidate is evaluated again, up to
    // this many more times, after a back-off that starts at outside_kernel_backoff_s and doubles
    // (or the evaluator's retry_after_s when longer). Still not judged then, it is stored as
    // "not_judged" (no LLM request spent on it) and its slot ends; the search goes on.
    int outside_kernel_retries = 4;
    double outside_kernel_backoff_s = 10;
    int migration_interval = 10;   // generations between migrations (0: never)
    int migrants = 1;              // best programs each island sends to the next (ring)
    int restart_after = 30;        // generations without improvement before an island restarts (0: never)
    double temperature = 1.0;      // parent selection (see select_index)
    std::string mode = "mixed";    // "full" | "diff" | "mixed" (diff with probability diff_share)
    double diff_share = 0.5;
    int inspirations = 2;
    // LLM requests.
    std::string model;             // empty: the provider picks
    double llm_temperature = 0.7;
    int max_tokens = 8192;
    // Stopping (0: no limit).
    int64_t budget_tokens = 0;
    double budget_usd = 0;
    double max_time_s = 0;         // wall time of this invocation
    double target_speedup = 0;
    double target_sol = 0;         // stop once the best kernel reaches this fraction of the speed of light
    // Without the LLM: a correct candidate declaring KEVO_TUNABLE parameters that is within 10% of
    // the best so far is tuned with up to this many validations (0: never); a better variant
    // enters the archive as a program of origin "tune".
    int tune_evals = 16;
    bool profile_best = true;      // profile each new best kernel (Evaluator::profile) for the next prompts
    int jobs = 0;                  // slots run at once (0: all of a generation, or the evaluator's capacity)
    // Steady state: no generation barrier. A new slot starts as soon as one finishes, its parent
    // chosen from the archive as it stands (children enter it as they complete); generation g is
    // committed (history row, migration, restarts, island states) once all its slots are done, and
    // slots may run up to a few generations ahead. Faster, but not reproducible under a seed:
    // which parents a slot sees depends on what finished first. false: generations with a barrier.
    bool steady = false;
    std::string initial_source;    // --initial kernel (empty: the LLM writes the seed)
    // What the fitness is a speedup over, as the prompts name it ("speedup 1.234x over <label>"):
    // search --fitness-baseline compile|eager sets baseline::label() of it.
    std::string speedup_label = "the LibTorch reference";
    // LLM costs: the budget reserves each request's most possible usage (llm/budget.h).
    std::optional<llm::Price> price;   // --llm-price
    // Batch mode (--llm-batch, evolve/batch_mode.h): requests are not sent but written to OpenAI
    // Batch API input files "<batch_prefix>-<n>.jsonl" in the dialect of batch_url (the --llm-url),
    // and the run stops (reason "batch") once every slot waits for a reply. batch_replies
    // (--llm-batch-replies): Batch API output or error files whose replies the run imports first.
    bool llm_batch = false;
    std::string batch_prefix, batch_url;
    std::vector<std::string> batch_replies;
    std::function<void(const std::string&)> log;   // notes (imports, ignored usage); empty: silent
};

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
    // `task` must outlive the search; the reference source is read once here.
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
