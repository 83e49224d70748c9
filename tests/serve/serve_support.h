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
    cfg.structure.islands = 2;
    cfg.structure.children = 2;
    cfg.evolution.generations = generations;
    cfg.evolution.repair_attempts = 1;
    cfg.structure.seed = 5;
    evolve::Search s(task, cfg, evolve::Prompts(), provider, ev, *store);
    s.run();
}

}  // namespace kevo::serve::test_support
