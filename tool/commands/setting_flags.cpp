#include "commands/setting_flags.h"

#include <map>

namespace kevo {

std::string flag_of(const std::string& id) {
    static const std::map<std::string, std::string> flags = {
        // The search's settings (evolve/search_config.h).
        {"structure.islands", "--islands"},
        {"structure.children", "--children"},
        {"structure.backend", "--backend"},
        {"evolution.generations", "--generations"},
        {"evolution.repair_attempts", "--repair-attempts"},
        {"evolution.migration_interval", "--migration-interval"},
        {"evolution.migrants", "--migrants"},
        {"evolution.restart_after", "--restart-after"},
        {"evolution.temperature", "--temperature"},
        {"evolution.mode", "--mode"},
        {"evolution.inspirations", "--inspirations"},
        {"evolution.tune_evals", "--tune-evals"},
        {"evolution.jobs", "--jobs"},
        {"requests.model", "--model"},
        {"requests.temperature", "--llm-temperature"},
        {"requests.max_tokens", "--max-tokens"},
        {"requests.price", "--llm-price"},
        {"stopping.budget_tokens", "--budget-tokens"},
        {"stopping.budget_usd", "--budget-usd"},
        {"stopping.max_time", "--max-time"},
        {"stopping.target_speedup", "--target-speedup"},
        {"stopping.target_sol", "--target-sol"},
        {"batch.enabled", "--llm-batch"},
        {"batch.replies", "--llm-batch-replies"},
        {"prompts.dir", "--prompts"},
        // The search request's (workflows/search.h).
        {"request.arch", "--arch"},
        {"request.fitness_baseline", "--fitness-baseline"},
        {"request.workers", "--workers"},
        // The lower floors' (each floor's settings::all()).
        {"llm.url", "--llm-url"},
        {"llm.key_env", "--llm-key-env"},
        {"llm.model", "--model"},
        {"llm.price", "--llm-price"},
        {"llm.replay", "--llm-replay"},
        {"llm.parallel", "--llm-parallel"},
        {"sandbox.mode", "--sandbox"},
        {"compile.arch", "--arch"},
        {"import.out", "--out"},
        {"import.python", "--python"},
        {"import.precision", "--precision"},
        {"import.no_sandbox", "--no-sandbox"},
        {"serve.listen", "--listen"},
        {"serve.token", "--token"},
        {"serve.queue", "--redis"},
        {"model.dir", "--model-dir"},
        {"bench.suite", "--suite"},
        {"bench.baseline", "--baseline"},
        {"store.state", "--state"},
        {"search.fresh", "--fresh"},
        {"tune.max_evals", "--max-evals"},
    };
    const auto it = flags.find(id);
    return it == flags.end() ? std::string() : it->second;
}

std::string message_with_flags(const SettingError& e) {
    return e.render([](const Setting& s) {
        const std::string flag = flag_of(s.id);
        return flag.empty() ? std::string(s.words) : flag;
    });
}

}  // namespace kevo
