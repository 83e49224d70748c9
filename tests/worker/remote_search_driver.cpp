// The search in steady state with the scripted LLM, validating through the queue's workers
// (RemoteEvaluator), for the kill -9 test:
//   kevo_remote_search_driver STATE QUEUE_URL GENERATIONS LLM_LOG
// Prints the stop reason and the queue overhead median; exits 0 when the run finished.
#include <algorithm>
#include <iostream>
#include <string>

#include "common/fs.h"
#include "evolve/search.h"
#include "scripted.h"
#include "store/store.h"
#include "worker/remote_evaluator.h"

using namespace kevo;

int main(int argc, char** argv) {
    if (argc != 5) {
        std::cerr << "usage: kevo_remote_search_driver STATE QUEUE_URL GENERATIONS LLM_LOG\n";
        return 2;
    }
    try {
        Task task = load_task(fs::path(KEVO_TEST_DATA_DIR) / "gelu_bias" / "task.json");
        auto store = store::open_store(argv[1]);
        ValidateOptions vo;
        vo.arch = "sm_90";
        worker::RemoteEvaluator evaluator(argv[2], task, vo);
        evolve::testing::ScriptedProvider provider(evolve::testing::evolving);
        provider.log_path = argv[4];
        evolve::SearchConfig cfg = evolve::testing::kill_test_config(std::stoi(argv[3]));
        cfg.evolution.steady = true;
        evolve::Search search(task, cfg, evolve::Prompts(), provider, evaluator, *store);
        evolve::SearchResult r = search.run();
        std::vector<double> o = evaluator.overhead_ms();
        std::sort(o.begin(), o.end());
        std::cout << r.stop_reason << " " << (o.empty() ? 0 : o[o.size() / 2]) << "\n";
        return r.stop_reason == "generations" ? 0 : 1;
    } catch (const std::exception& e) {
        std::cerr << "remote search driver: " << e.what() << "\n";
        return 2;
    }
}
