#include "evolve/search_state.h"

#include <algorithm>
#include <sstream>

#include "common/error.h"
#include "evolve/prompt_text.h"
#include "language/registry.h"
#include "common/setting_error.h"

namespace kevo::evolve::detail {

std::string fixed(double v, int digits) {
    std::ostringstream s;
    s.precision(digits);
    s << std::fixed << v;
    return s.str();
}

Elite elite_of(const store::Program& p) {
    return Elite{p.id, p.speedup, technique_of(p.source), static_cast<int64_t>(normalize_source(p.source).size())};
}

std::string backend_of(const std::string& source) { return language::of_source(source).name(); }

const CandidateLanguage& language_named(const std::string& backend) {
    const CandidateLanguage* l = language::named(backend);
    if (!l) throw UsageError("no candidate language named '" + backend + "'");
    return *l;
}

std::string fence_of(const std::string& backend) { return language_named(backend).fence_tags().front(); }

const llm::ReplyLanguages& reply_languages() {
    static const llm::ReplyLanguages l{language::fence_tags(), language::marks_candidate};
    return l;
}

double RunState::invocation_s() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
}

bool RunState::request_stop(StopReason reason, const std::string& detail) {
    std::lock_guard<std::mutex> lock(mu);
    bool first = stop.reason == StopReason::none;
    if (first) stop = Stop{reason, detail};
    stopping_now = true;
    return first;
}

bool RunState::should_stop() {
    if (stop_flag && stop_flag->load()) request_stop(StopReason::interrupted);
    if (cfg.stopping.max_time_s > 0 && invocation_s() >= cfg.stopping.max_time_s) request_stop(StopReason::time);
    return stopping_now.load();
}

void RunState::check_stop() {
    if (should_stop()) throw Stopped{};
}

void RunState::report() {
    progress.elapsed_s = elapsed_before + invocation_s();
    if (progress_fn) progress_fn(progress);
}

void RunState::tally(const store::Program& p) {
    if (p.ok()) {
        ++progress.ok;
        progress.best_sol = std::max(progress.best_sol, sol_fraction_of(p.details));
        if (p.speedup > progress.best_speedup) {
            progress.best_speedup = p.speedup;
            best_id = p.id;
        }
    } else if (p.status == store::ProgramStatus::duplicate) {
        ++progress.duplicates;
    } else if (not_judged(p)) {
        ++progress.not_judged;
    } else if (p.status != store::ProgramStatus::pending) {
        ++progress.failed;
    }
}

bool RunState::is_new_best(double speedup) {
    std::lock_guard<std::mutex> lock(mu);
    return speedup > progress.best_speedup;
}

double RunState::best_speedup() {
    std::lock_guard<std::mutex> lock(mu);
    return progress.best_speedup;
}

void RunState::load_or_init() {
    check_structure();
    store.put_meta("config", {{"generations", cfg.evolution.generations},
                              {"repair_attempts", cfg.evolution.repair_attempts},
                              {"migration_interval", cfg.evolution.migration_interval},
                              {"restart_after", cfg.evolution.restart_after},
                              {"temperature", cfg.evolution.temperature},
                              {"mode", cfg.evolution.mode},
                              {"model", cfg.requests.model},
                              {"backend", cfg.structure.backend}});
    elapsed_before = store.get_meta("elapsed_s").value_or(0.0).get<double>();

    islands.clear();
    if (store.last_generation() >= 0) {
        for (const auto& j : store.islands()) islands.push_back(Island::from_json(j));
    } else {
        for (int i = 0; i < cfg.structure.islands; ++i) islands.push_back(Island{i, {}, 0, 0, 0, 0, {}});
    }
    load_spent();
}

// A resumed run must have the structure it started with; a new one records it.
void RunState::check_structure() {
    nlohmann::json structure = {{"task_hash", task.hash()},     {"reference_hash", task.reference_hash()},
                                {"arch", arch},                 {"islands", cfg.structure.islands},
                                {"children", cfg.structure.children},     {"seed", cfg.structure.seed},
                                {"initial", !cfg.structure.initial_source.empty()}};
    if (cfg.structure.backend != "cuda") structure["backend"] = cfg.structure.backend;  // absent in runs from before backends
    if (auto existing = store.get_meta("structure")) {
        for (auto& [k, v] : structure.items())
            if (existing->value(k, nlohmann::json()) != v)
                throw SettingError({settings::kState, settings::kFresh},
                                   "the state store belongs to another run (" + k + " was " +
                                       existing->value(k, nlohmann::json()).dump() + ", now " + v.dump() +
                                       "); use another {store.state}, or {search.fresh} to start over");
    } else {
        store.put_meta("structure", structure);
        store.put_meta("task_name", task.name);
    }
}

// The stored programs' figures, and what the run has spent (with the batch replies it imports).
void RunState::load_spent() {
    for (const store::Program& p : store.programs()) tally(p);
    store::Spent s = store.spent();
    // The run stops at the budget's first refusal: no request smaller than the refused one goes after it.
    llm::BudgetCaps caps{cfg.stopping.budget_tokens, cfg.stopping.budget_usd, cfg.requests.price};
    caps.final_refusal = true;
    budget = std::make_unique<llm::Budget>(caps, cfg.log);
    budget->add_spent({s.prompt_tokens, s.completion_tokens, s.cost_usd});
    batch = std::make_unique<BatchMode>(cfg, store, *budget);
    if (batch->load(cfg.log).calls > 0) s = store.spent();
    progress.tokens = s.tokens();
    progress.cost_usd = s.cost_usd;
}

}  // namespace kevo::evolve::detail
