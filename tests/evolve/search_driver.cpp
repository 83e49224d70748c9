// Runs the search with the scripted LLM and evaluator on a state store, for the kill -9 test.
//   evolve_search_driver STATE GENERATIONS RUN_DELAY_S LLM_LOG EVAL_LOG [steady | BATCH_PREFIX [REPLIES...]]
// "steady" runs without a generation barrier; with BATCH_PREFIX the run is in batch mode
// (--llm-batch) and imports the REPLIES files first.
// Prints the stop reason; exits 0 when the run finished, 3 when it stopped for a batch.
#include <iostream>
#include <string>

#include "common/fs.h"
#include "evolve/search.h"
#include "scripted.h"
#include "store/store.h"

using namespace kevo;

int main(int argc, char** argv) {
    if (argc < 6) {
        std::cerr << "usage: evolve_search_driver STATE GENERATIONS RUN_DELAY_S LLM_LOG EVAL_LOG [steady | BATCH_PREFIX [REPLIES...]]\n";
        return 2;
    }
    Task task = load_task(fs::path(KEVO_TEST_DATA_DIR) / "gelu_bias" / "task.json");
    auto store = store::open_store(argv[1]);
    evolve::testing::ScriptedEvaluator evaluator;
    evaluator.run_delay_s = std::stod(argv[3]);
    evaluator.log_path = argv[5];
    evolve::testing::ScriptedProvider provider(evolve::testing::evolving);
    provider.log_path = argv[4];
    evolve::SearchConfig cfg = evolve::testing::kill_test_config(std::stoi(argv[2]));
    cfg.evolution.steady = argc == 7 && std::string(argv[6]) == "steady";
    if (argc > 6 && !cfg.evolution.steady) {
        cfg.batch.enabled = true;
        cfg.requests.model = "vendor/m";
        cfg.batch.prefix = argv[6];
        cfg.batch.url = "https://api.openai.com/v1";
        for (int i = 7; i < argc; ++i) cfg.batch.replies.push_back(argv[i]);
    }
    evolve::Search search(task, cfg, evolve::Prompts(), provider, evaluator, *store);
    evolve::SearchResult r = search.run();
    std::cout << r.stop_reason << "\n";
    return r.stop_reason == "generations" ? 0 : r.stop_reason == "batch" ? 3 : 1;
}
