// The search's configuration (SearchConfig, nested by what each part governs) and its one check,
// validate(), whose errors name settings in words with a stable identifier (common/setting_error.h);
// `kernelevo search` shows each under its flag (commands/setting_flags.cpp).
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/setting_error.h"
#include "llm/budget.h"

namespace kevo::evolve {

// Structure: fixed for a run (a resume with different values is refused).
struct StructureConfig {
    int islands = 3;
    int children = 2;              // slots per island per generation
    uint64_t seed = 0;
    // A candidate language's name (language/registry.h) or "both": with both, the islands take
    // turns over every language (mixed_language(); their seeds and mutations; a program that
    // migrates in is translated on its first mutation), and each language's techniques keep its
    // programs in archive cells of their own. backend_choices() lists the values.
    std::string backend = "cuda";
    std::string initial_source;    // the seed kernel (empty: the LLM writes the seed)
};

// Evolution: how generations make, repair, judge and share programs.
struct EvolutionConfig {
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
    // What the fitness is a speedup over, as the prompts name it ("speedup 1.234x over <label>"):
    // search --fitness-baseline compile|eager sets baseline::label() of it.
    std::string speedup_label = "the LibTorch reference";
    // The prompts' section on the time to beat ({{to_beat}}, after the speed of light): torch.compile's times and
    // Inductor's code (baseline::to_beat_section()), when the search timed the task's PyTorch module; "": none.
    std::string to_beat;
};

// LLM requests.
struct RequestsConfig {
    std::string model;             // empty: the provider picks
    double temperature = 0.7;
    int max_tokens = 8192;
    // LLM costs: the budget reserves each request's most possible usage (llm/budget.h).
    std::optional<llm::Price> price;
};

// Stopping (0: no limit).
struct StoppingConfig {
    int64_t budget_tokens = 0;
    double budget_usd = 0;
    double max_time_s = 0;         // wall time of this invocation
    double target_speedup = 0;
    double target_sol = 0;         // stop once the best kernel reaches this fraction of the speed of light
};

// Batch mode (evolve/batch_mode.h): requests are not sent but written to OpenAI Batch API input
// files "<prefix>-<n>.jsonl" in the dialect of `url`, and the run stops (reason "batch") once every
// slot waits for a reply. `replies`: Batch API output or error files whose replies the run imports
// first.
struct BatchConfig {
    bool enabled = false;
    std::string prefix, url;
    std::vector<std::string> replies;
};

struct SearchConfig {
    StructureConfig structure;
    EvolutionConfig evolution;
    RequestsConfig requests;
    StoppingConfig stopping;
    BatchConfig batch;
    std::function<void(const std::string&)> log;   // notes (imports, ignored usage); empty: silent
};

// The values of structure.backend (--backend): every candidate language's name, in the registry's
// order (language/registry.h), then "both".
std::vector<std::string> backend_choices();
// --backend's help: each value and what the LLM writes for it (CandidateLanguage::candidate_help()).
std::string backend_help();
// The language island `island` of a "both" run writes: every language in turn, the last listed
// first (of two: even islands the second language, odd ones CUDA).
std::string mixed_language(int island);
// The names of the languages a run with structure.backend `backend` writes candidates in (all of
// them for "both"), whose CandidateLanguage::preflight() runs before it.
std::vector<std::string> languages_of(const std::string& backend);

// Throws SettingError for the first setting out of its range or at odds with another.
void validate(const SearchConfig& config);

// "90", "90s", "30m", "2h" -> seconds (the time limit); SettingError on anything else.
double parse_duration(const std::string& text);

}  // namespace kevo::evolve
