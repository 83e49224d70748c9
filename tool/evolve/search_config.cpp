#include "evolve/search_config.h"

#include <cmath>
#include <cstdio>

#include "common/duration.h"
#include "language/registry.h"

namespace kevo::evolve {
namespace {

std::string number(double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
}

[[noreturn]] void fail(const Setting& s, const std::string& problem) {
    throw SettingError({s}, "{" + std::string(s.id) + "}: " + problem);
}

void in_range(const Setting& s, double v, double lo, double hi) {
    if (!std::isfinite(v)) fail(s, "must be a finite number, not '" + number(v) + "'");
    if (v < lo || v > hi) fail(s, "must be between " + number(lo) + " and " + number(hi) + ", not " + number(v));
}

void not_negative(const Setting& s, double v) {
    if (!std::isfinite(v)) fail(s, "must be a finite number, not '" + number(v) + "'");
    if (v < 0) fail(s, "must be 0 or more, not " + number(v));
}

void positive(const Setting& s, double v) {
    if (!std::isfinite(v)) fail(s, "must be a finite number, not '" + number(v) + "'");
    if (!(v > 0)) fail(s, "must be a positive number, not " + number(v));
}

void one_of(const Setting& s, const std::string& v, const std::vector<std::string>& choices) {
    std::string list;
    for (const auto& c : choices) {
        if (c == v) return;
        list += (list.empty() ? "" : " ") + c;
    }
    fail(s, "'" + v + "' is not one of: " + list);
}

void validate_structure(const StructureConfig& c) {
    using namespace settings;
    in_range(kIslands, c.islands, 1, 64);
    in_range(kChildren, c.children, 1, 64);
    one_of(kBackend, c.backend, backend_choices());
    const size_t languages = language::all().size();
    if (c.backend == "both" && c.islands < static_cast<int>(languages)) {
        std::string turns;  // "island 0 writes <the last language>, island 1 ..."
        for (size_t i = 0; i < languages; ++i)
            turns += std::string(i ? ", island " : "island ") + std::to_string(i) + (i ? " " : " writes ") +
                     language::named(mixed_language(static_cast<int>(i)))->display_name();
        throw SettingError({kBackend, kIslands}, "{structure.backend} both needs at least " + std::to_string(languages) +
                                                     " islands (" + turns + ", and so on in turn)");
    }
}

void validate_evolution(const EvolutionConfig& c) {
    using namespace settings;
    not_negative(kGenerations, c.generations);
    in_range(kRepairAttempts, c.repair_attempts, 0, 50);
    not_negative(kMigrationInterval, c.migration_interval);
    not_negative(kMigrants, c.migrants);
    not_negative(kRestartAfter, c.restart_after);
    positive(kTemperature, c.temperature);
    one_of(kMutationMode, c.mode, {"full", "diff", "mixed"});
    not_negative(kInspirations, c.inspirations);
    not_negative(kTuneEvals, c.tune_evals);
    not_negative(kJobs, c.jobs);
}

}  // namespace

std::vector<std::string> backend_choices() {
    std::vector<std::string> names;
    for (const CandidateLanguage* l : language::all()) names.push_back(l->name());
    names.push_back("both");
    return names;
}

std::string backend_help() {
    std::string text = "What the LLM writes: ";
    for (const CandidateLanguage* l : language::all()) text += l->name() + ": " + l->candidate_help() + "; ";
    return text + "both: the islands take turns over the languages (the archive keeps the best of each)";
}

std::string mixed_language(int island) {
    const auto& all = language::all();
    return all[all.size() - 1 - static_cast<size_t>(island) % all.size()]->name();
}

std::vector<std::string> languages_of(const std::string& backend) {
    if (backend != "both") return {backend};
    std::vector<std::string> names = backend_choices();
    names.pop_back();
    return names;
}

void validate(const SearchConfig& c) {
    using namespace settings;
    validate_structure(c.structure);
    validate_evolution(c.evolution);
    in_range(kLlmTemperature, c.requests.temperature, 0, 2);
    positive(kMaxTokens, c.requests.max_tokens);
    not_negative(kBudgetTokens, static_cast<double>(c.stopping.budget_tokens));
    not_negative(kBudgetUsd, c.stopping.budget_usd);
    if (!(c.stopping.max_time_s >= 0)) fail(kMaxTime, "must be 0 or more, not " + number(c.stopping.max_time_s));  // inf: none
    not_negative(kTargetSpeedup, c.stopping.target_speedup);  // 0: no target
    in_range(kTargetSol, c.stopping.target_sol, 0, 1);         // 0: no target
    if (c.batch.enabled && c.requests.model.empty())
        throw SettingError({kBatch, kModel}, "{batch.enabled} needs exactly one {requests.model}: a Batch API input file "
                                             "holds requests for one model");
    if (c.batch.enabled && c.stopping.budget_usd > 0 && !c.requests.price)
        throw SettingError({kBatch, kBudgetUsd, kPrice},
                           "{batch.enabled} with {stopping.budget_usd} needs {requests.price} (the batch price): Batch "
                           "API replies report no cost, so the cap could not be kept");
}

double parse_duration(const std::string& s) {
    if (s.empty()) return 0;
    const std::string shown = s.size() > 40 ? s.substr(0, 40) + "..." : s;
    const std::string bad = "{stopping.max_time}: cannot read '" + shown + "' (use e.g. 900, 30m or 2h)";
    size_t used = 0;
    double v = 0;
    try {
        v = std::stod(s, &used);
    } catch (const std::exception&) {
        throw SettingError({settings::kMaxTime}, bad);
    }
    const std::string unit = s.substr(used);
    const double mult = unit.empty() || unit == "s" ? 1 : unit == "m" ? 60 : unit == "h" ? 3600 : -1;
    if (mult < 0 || !(v >= 0)) throw SettingError({settings::kMaxTime}, bad);
    if (!(v * mult <= kMaxDurationSeconds))  // inf, 1e308: no limit is no --max-time (0)
        throw SettingError({settings::kMaxTime}, "{stopping.max_time}: at most a week (604800 s), not '" + shown + "'");
    return v * mult;
}

}  // namespace kevo::evolve
