// Inside the search (search.cpp and its parts, not for other callers): the state one run shares
// between its threads (progress, stop reasons, the islands, the budget), its set-up and resume,
// and the small helpers every part uses. The parts: search_evaluate.h (a candidate's evaluation),
// search_slot.h (a slot: LLM calls, prompts, repairs), search_generation.h (generations).
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "compile/language.h"
#include "evaluate/evaluator.h"
#include "evolve/archive.h"
#include "evolve/batch_mode.h"
#include "evolve/program_state.h"
#include "evolve/prompts.h"
#include "evolve/search.h"
#include "evolve/waste.h"
#include "llm/budget.h"
#include "llm/reply.h"
#include "store/store.h"
#include "task/task.h"

namespace kevo::evolve::detail {

// Deterministic random numbers for one slot: splitmix64 seeded by (run seed, slot key).
class Rng {
public:
    Rng(uint64_t seed, const std::string& key) : state_(seed) {
        for (unsigned char c : key) state_ = (state_ ^ c) * 0x100000001b3ULL;  // FNV-1a over the key
    }
    uint64_t next() {
        uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
    }
    double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

private:
    uint64_t state_;
};

// Thrown inside a slot when the run must stop (interrupt, budget, time, LLM failure); the slot's
// generation is then left uncommitted and replayed on resume.
struct Stopped {};

std::string fixed(double v, int digits);
Elite elite_of(const store::Program& p);
std::string backend_of(const std::string& source);  // the name of its language (language/registry.h)
const CandidateLanguage& language_named(const std::string& backend);  // UsageError when none is
std::string fence_of(const std::string& backend);   // the Markdown fence of a language's code
const llm::ReplyLanguages& reply_languages();        // the reply parser's view of every language

struct Slot {
    std::string key;  // "g0.seed", "g3.i1.c0"
    int generation = 0, island = 0;
};

struct SlotResult {
    bool completed = false;
    std::optional<store::Program> child;  // the correct program the slot produced
    std::string feedback;                 // its latest validation feedback
};

struct RunState {
    RunState(const Task& t, SearchConfig c, Prompts p, Evaluator& ev, store::Store& st)
        : task(t), cfg(std::move(c)), prompts(std::move(p)), evaluator(ev), store(st) {}

    const Task& task;
    SearchConfig cfg;
    Prompts prompts;
    Evaluator& evaluator;
    store::Store& store;

    std::string reference, task_text, gpu_text, arch, limits_text;  // prompt texts, made once
    std::vector<Island> islands;
    // Guards `islands` where slots read them while others complete (steady state).
    std::mutex islands_mu;
    std::function<void(const Progress&)> progress_fn;

    std::mutex mu;  // guards progress, best_id, stop, progress_fn calls
    Progress progress;
    int64_t best_id = 0;
    Stop stop;  // why the run stops (the first reason given)
    std::atomic<bool> stopping_now{false};
    const std::atomic<bool>* stop_flag = nullptr;
    std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
    double elapsed_before = 0;  // time spent by earlier invocations of this run
    std::unique_ptr<llm::Budget> budget;  // the caps over the stored totals, with reservations
    std::unique_ptr<BatchMode> batch;

    double invocation_s() const;
    // Returns true for the first reason given.
    bool request_stop(StopReason reason, const std::string& detail = "");
    // True once the run must stop; records why.
    bool should_stop();
    void check_stop();  // throws Stopped once the run must stop
    bool budget_reached() { return budget->reached(); }
    void report();  // called with `mu` held
    // Counts an evaluated (or stored) program into the progress figures; the caller holds `mu`
    // where other threads may be counting too.
    void tally(const store::Program& p);
    bool is_new_best(double speedup);
    double best_speedup();

    // Set-up and resume: checks the store belongs to this run (or claims it), loads the islands,
    // the progress figures and the budget's spending (importing batch replies first).
    void load_or_init();

private:
    void check_structure();
    void load_spent();
};

}  // namespace kevo::evolve::detail
