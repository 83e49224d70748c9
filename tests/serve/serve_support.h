// What the serve tests share: a scripted search that writes a real SQLite run.
#pragma once
#include "common/fs.h"
#include "evolve/search.h"
#include "scripted.h"
#include "store/store.h"

namespace kevo::serve::test_support {

// A scripted search of `generations` on a state (continuing what is there).
inline void search(const fs::path& state, int generations) {
    Task task = load_task(fs::path(KEVO_TEST_DATA_DIR) / "gelu_bias" / "task.json");
    auto store = store::open_store(state.string());
    evolve::testing::ScriptedEvaluator ev;
    evolve::testing::ScriptedProvider provider(evolve::testing::evolving);
    evolve::SearchConfig cfg;
    cfg.islands = 2;
    cfg.children = 2;
    cfg.generations = generations;
    cfg.repair_attempts = 1;
    cfg.seed = 5;
    evolve::Search s(task, cfg, evolve::Prompts(), provider, ev, *store);
    s.run();
}

}  // namespace kevo::serve::test_support
