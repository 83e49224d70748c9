// Test doubles for the search: an evaluator and an LLM provider driven by the text they are given.
//
// ScriptedEvaluator reads markers in a candidate's source:
//   COMPILE_ERROR   the compile fails (log "error: scripted compile error")
//   MISMATCH        it compiles and runs but the output is wrong
//   SPEEDUP=<x>     correct, <x> times faster than the reference (default 1.0)
//   KEVO_TUNABLE(FACTOR, <d>, ...)  the speedup is multiplied by d/100 (for the tuner)
// Correct results carry speed-of-light details: a 3 us floor, so the fraction is 0.3 x speedup.
#pragma once
#include <atomic>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "evaluate/evaluator.h"
#include "evolve/search.h"
#include "llm/llm.h"

namespace kevo::evolve::testing {

class ScriptedEvaluator : public Evaluator {
public:
    DeviceInfo device() override;
    std::string arch() override { return "sm_90"; }
    CompileResult compile(const std::string& source) override;
    Evaluation run(const CompileResult& compiled) override;
    double measured_bandwidth_gbs() override { return 4300; }
    std::string profile(const CompileResult&) override {
        ++profiles_;
        return profile_text;
    }
    std::string profile_text;  // what profile() answers ("" : no profiler)
    int profiles() const { return profiles_; }

    // Seconds each run() sleeps (to give a test time to kill the process mid-run).
    double run_delay_s = 0;
    // When set, every run() appends the normalized hash of its source, one line, to this file.
    std::string log_path;

    std::vector<std::string> runs() const;  // sources run, in order
    int compiles() const { return compiles_; }
    bool overlapped() const { return overlapped_; }  // two run() calls were ever concurrent

private:
    mutable std::mutex mu_;
    std::vector<std::string> sources_by_id_, runs_;
    std::atomic<int> compiles_{0}, running_{0}, profiles_{0};
    std::atomic<bool> overlapped_{false};
};

// Answers each request with respond(request); counts 100 prompt + 50 completion tokens and $0.001
// per call. Thread-safe.
class ScriptedProvider : public llm::Provider {
public:
    using Respond = std::function<std::string(const llm::ChatRequest&)>;
    explicit ScriptedProvider(Respond respond) : respond_(std::move(respond)) {}
    llm::ChatResponse chat(const llm::ChatRequest& request) override;

    // When set, every call appends its request seed, one line, to this file.
    std::string log_path;

    std::vector<llm::ChatRequest> requests() const;
    size_t calls() const;

private:
    Respond respond_;
    mutable std::mutex mu_;
    std::vector<llm::ChatRequest> requests_;
};

// Answers a Batch API input file (its text) as a provider would: one output line per input line,
// in order, with 100 prompt + 50 completion tokens and the cost `cost_usd` (< 0: none reported);
// the requests whose custom_id is in `fail` get an error line ("batch_expired") instead.
std::string answer_batch(const std::string& input, const ScriptedProvider::Respond& respond,
                         const std::vector<std::string>& fail = {}, double cost_usd = -1);
// The requests of a Batch API input file, as ChatRequests (model, messages, temperature, seed).
std::vector<std::pair<std::string, llm::ChatRequest>> batch_requests_of(const std::string& input);

// The kind of prompt a request carries: "seed", "mutate_full", "mutate_diff" or "repair".
std::string prompt_kind(const llm::ChatRequest& request);
// The user message of a request.
const std::string& user_prompt(const llm::ChatRequest& request);
// A kernel (in a ```cuda fence) with a distinct body per `variant` and the given markers.
std::string kernel_reply(long variant, double speedup, const std::string& extra_marker = "");
std::string kernel_source(long variant, double speedup, const std::string& extra_marker = "");
// A deterministic "LLM": seeds and repairs give plain 1.0x kernels, mutations distinct kernels
// between 1x and 3x (chosen by the request's seed).
std::string evolving(const llm::ChatRequest& request);

// The search of the kill -9 tests (tests/evolve/search_driver.cpp, tests/worker/remote_search_driver.cpp):
// two islands of two children, repairs, migrations and restarts within a few generations.
inline SearchConfig kill_test_config(int generations) {
    SearchConfig cfg;
    cfg.structure.islands = 2;
    cfg.structure.children = 2;
    cfg.evolution.generations = generations;
    cfg.evolution.repair_attempts = 2;
    cfg.evolution.migration_interval = 2;
    cfg.evolution.restart_after = 3;
    cfg.structure.seed = 11;
    return cfg;
}

}  // namespace kevo::evolve::testing
