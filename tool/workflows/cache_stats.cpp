// cache_stats(): a summary of a kernel cache like ccache -s (entries, states, speedups, sizes,
// ages), as the JSON document `kernelevo cache stats` prints or reads its text from. Moved from
// tool/commands/cache_stats_command.cpp.
#include <algorithm>
#include <cmath>
#include <ctime>

#include "common/text.h"
#include "task/fitness.h"
#include "workflows/cache.h"

namespace kevo::workflows {
namespace fs = std::filesystem;
namespace {

// Whole days between an ISO 8601 UTC date ("2026-12-02T10:11:12Z") and now; -1 when unreadable.
long days_ago(const std::string& iso) {
    std::tm tm{};
    if (!strptime(iso.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm)) return -1;
    const std::time_t then = timegm(&tm);
    return static_cast<long>((std::time(nullptr) - then) / 86400);
}

// min, median, max and geometric mean of `v` (not empty; every value > 0).
nlohmann::json speedup_figures(std::vector<double> v) {
    if (v.empty()) return {{"count", 0}, {"min", nullptr}, {"median", nullptr}, {"max", nullptr}, {"geomean", nullptr}};
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    const double median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    return {{"count", n}, {"min", v.front()}, {"median", median}, {"max", v.back()}, {"geomean", weighted_geomean(v, {})}};
}

// The state stats counts an entry under: lookup() decides; "valid" is "fresh" when compared with its
// task and "unchecked" when no task for its function was given.
std::string stats_state(const cache::EntryReport& e) {
    if (e.lookup.state == cache::State::valid) return e.checked ? "fresh" : "unchecked";
    return cache::state_name(e.lookup.state);
}

// Everything `cache stats` reports, as JSON; the human output is printed from it.
nlohmann::json stats_json(const std::string& cache_dir, const std::vector<cache::EntryReport>& entries, size_t tasks) {
    const char* kStates[] = {"fresh", "unchecked", "stale", "invalid"};
    auto zero_counts = [&] {
        nlohmann::json c{{"entries", 0}};
        for (const char* st : kStates) c[st] = 0;
        c["unvalidated"] = 0;
        return c;
    };
    nlohmann::json totals = zero_counts();
    totals["size_bytes"] = 0;
    totals["files"] = 0;
    std::set<std::string> functions;
    std::map<std::string, nlohmann::json> arches;
    std::map<std::string, std::vector<double>> arch_speedups;
    std::vector<double> speedups;
    nlohmann::json oldest, newest, list = nlohmann::json::array();
    for (const auto& e : entries) {
        const std::string state = stats_state(e);
        const auto& m = e.lookup.meta;
        const bool unvalidated = m && !m->validated;
        // A usable entry (what a build would compile in) counts towards the speedups when validated.
        const bool usable = e.lookup.state == cache::State::valid;
        nlohmann::json& a = arches.try_emplace(e.arch, zero_counts()).first->second;
        for (nlohmann::json* c : {&totals, &a}) {
            (*c)["entries"] = (*c)["entries"].get<int>() + 1;
            (*c)[state] = (*c)[state].get<int>() + 1;
            if (unvalidated) (*c)["unvalidated"] = (*c)["unvalidated"].get<int>() + 1;
        }
        totals["size_bytes"] = totals["size_bytes"].get<std::uintmax_t>() + e.bytes;
        totals["files"] = totals["files"].get<int>() + e.files;
        functions.insert(e.function);
        if (usable && m && m->validated && m->speedup > 0 && std::isfinite(m->speedup)) {
            speedups.push_back(m->speedup);
            arch_speedups[e.arch].push_back(m->speedup);
        }
        // When it was last validated: the date it was stored with its validation (unvalidated: never).
        nlohmann::json validated_at = m && m->validated && !m->date.empty() ? nlohmann::json(printable(m->date)) : nlohmann::json();
        if (validated_at.is_string()) {
            nlohmann::json when{{"date", validated_at}, {"function", e.function}, {"arch", e.arch}, {"days_ago", days_ago(m->date)}};
            if (oldest.is_null() || m->date < oldest["date"].get<std::string>()) oldest = when;
            if (newest.is_null() || m->date > newest["date"].get<std::string>()) newest = when;
        }
        nlohmann::json row{{"function", e.function}, {"arch", e.arch}, {"state", state}, {"reason", e.lookup.reason},
                           {"validated", m ? nlohmann::json(m->validated) : nlohmann::json()}, {"validated_at", validated_at},
                           {"speedup", m ? nlohmann::json(m->speedup) : nlohmann::json()},
                           {"backend", m ? nlohmann::json(printable(m->backend)) : nlohmann::json()},
                           {"gpu", m ? nlohmann::json(printable(m->gpu)) : nlohmann::json()}, {"size_bytes", e.bytes}};
        list.push_back(row);
    }
    totals["functions"] = functions.size();
    nlohmann::json per_arch = nlohmann::json::array();
    for (auto& [arch, c] : arches) {
        c["arch"] = arch;
        c["speedup_geomean"] = speedup_figures(arch_speedups[arch])["geomean"];
        per_arch.push_back(c);
    }
    return {{"cache_dir", fs::absolute(cache_dir).string()}, {"exists", fs::is_directory(cache_dir)},
            {"tasks_checked", tasks}, {"totals", totals}, {"speedup", speedup_figures(speedups)},
            {"last_validated", {{"oldest", oldest}, {"newest", newest}}}, {"architectures", per_arch}, {"entries", list}};
}

}  // namespace

nlohmann::json cache_stats(const CacheStatsRequest& a) {
    std::error_code ec;
    if (fs::exists(a.cache_dir, ec) && !fs::is_directory(a.cache_dir, ec))
        throw CacheInputError(CacheInputError::Kind::cache_not_a_directory, a.cache_dir);
    const auto hashes = hashes_of(collect_tasks(a.tasks, a.build_dir));
    return stats_json(a.cache_dir, cache::scan(a.cache_dir, hashes), hashes.size());
}

}  // namespace kevo::workflows
