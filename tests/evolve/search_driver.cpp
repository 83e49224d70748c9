// Runs the search with the scripted LLM and evaluator on a state store, for the kill -9 test.
//   evolve_search_driver STATE GENERATIONS RUN_DELAY_S LLM_LOG EVAL_LOG
// Prints the stop reason and exits 0 when the run finished.
#include <iostream>
#include <string>

#include "common/fs.h"
#include "evolve/search.h"
#include "scripted.h"
#include "store/store.h"

using namespace kevo;

int main(int argc, char** argv) {
    if (argc != 6) {
        std::cerr << "usage: evolve_search_driver STATE GENERATIONS RUN_DELAY_S LLM_LOG EVAL_LOG\n";
        return 2;
    }
    Task task = load_task(fs::path(KEVO_TEST_DATA_DIR) / "gelu_bias" / "task.json");
    auto store = store::open_store(argv[1]);
    evolve::testing::ScriptedEvaluator evaluator;
    evaluator.run_delay_s = std::stod(argv[3]);
    evaluator.log_path = argv[5];
    evolve::testing::ScriptedProvider provider(evolve::testing::evolving);
    provider.log_path = argv[4];
    evolve::SearchConfig cfg;
    cfg.islands = 2;
    cfg.children = 2;
    cfg.generations = std::stoi(argv[2]);
    cfg.repair_attempts = 2;
    cfg.migration_interval = 2;
    cfg.restart_after = 3;
    cfg.seed = 11;
    evolve::Search search(task, cfg, evolve::Prompts(), provider, evaluator, *store);
    evolve::SearchResult r = search.run();
    std::cout << r.stop_reason << "\n";
    return r.stop_reason == "generations" ? 0 : 1;
}
