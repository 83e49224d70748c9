// What the search tests (search_test.cpp, search_batch_test.cpp) share: a run on the gelu_bias task
// with a scripted evaluator and its own state, a small configuration, and a run's outcome.
#pragma once
#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "common/fs.h"
#include "evolve/search.h"
#include "scripted.h"
#include "store/store.h"
#include "task/task.h"

namespace kevo::evolve::search_testing {

struct SearchRun {
    TempDir dir;
    Task task = load_task(fs::path(KEVO_TEST_DATA_DIR) / "gelu_bias" / "task.json");
    std::unique_ptr<store::Store> store = store::open_store((dir.path() / "state.db").string());
    testing::ScriptedEvaluator evaluator;

    SearchResult run(const SearchConfig& cfg, llm::Provider& provider, const std::atomic<bool>* stop = nullptr) {
        Search search(task, cfg, Prompts(), provider, evaluator, *store);
        return search.run(stop);
    }
    std::vector<store::Program> programs() { return store->programs(); }
    std::optional<store::Program> program(const std::string& key) { return store->find_program(key); }
};

inline SearchConfig small(int generations) {
    SearchConfig c;
    c.structure.islands = 2;
    c.structure.children = 2;
    c.evolution.generations = generations;
    c.evolution.repair_attempts = 2;
    c.evolution.migration_interval = 0;
    c.evolution.restart_after = 0;
    c.structure.seed = 7;
    return c;
}

// Runs to `generations` in one go, or with an interrupt after `interrupt_after` LLM calls and a resume.
inline std::vector<std::tuple<std::string, std::string, std::string>> outcome(SearchRun& r) {
    std::vector<std::tuple<std::string, std::string, std::string>> out;
    for (const auto& p : r.programs()) out.emplace_back(p.key, p.source, store::program_status_name(p.status));
    std::sort(out.begin(), out.end());
    return out;
}

}  // namespace kevo::evolve::search_testing
