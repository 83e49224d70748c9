// `kernelevo cache stats`: a summary of a kernel cache like ccache -s (entries, states, speedups,
// sizes, ages), as text or --json.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <set>

#include <nlohmann/json.hpp>

#include "cache/cache.h"
#include "commands/cache_command.h"
#include "common/error.h"
#include "common/fs.h"
#include "common/log.h"
#include "common/text.h"
#include "task/fitness.h"

namespace kevo {
namespace fs = std::filesystem;
namespace {

// ---- cache stats --------------------------------------------------------------------------------

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

// One "label   value" line of the summary, the value right-aligned like ccache -s.
void stat_line(const std::string& label, const std::string& value) {
    if (value.empty()) std::printf("%s\n", label.c_str());
    else std::printf("%-32s %24s\n", label.c_str(), value.c_str());
}

std::string times(const nlohmann::json& v) { return v.is_number() ? format_double("%.2fx", v.get<double>()) : "-"; }

void print_stats(const nlohmann::json& j, const std::string& cache_dir) {
    const auto& t = j["totals"];
    std::printf("%-32s %s\n", "Cache directory", printable(cache_dir).c_str());
    if (!j["exists"].get<bool>()) {
        std::cout << "No cache at " << printable(cache_dir) << " (nothing stored yet: kernelevo search --out or cache add fill it)\n";
        return;
    }
    if (t["entries"].get<int>() == 0) {
        std::cout << "No kernels in " << printable(cache_dir) << "\n";
        return;
    }
    const size_t tasks = j["tasks_checked"].get<size_t>();
    stat_line("Checked against", tasks ? std::to_string(tasks) + " task" + (tasks == 1 ? "" : "s") : "no task");
    stat_line("Entries", std::to_string(t["entries"].get<int>()));
    stat_line("  fresh", std::to_string(t["fresh"].get<int>()));
    if (t["unchecked"].get<int>()) stat_line("  not checked (no task given)", std::to_string(t["unchecked"].get<int>()));
    stat_line("  stale", std::to_string(t["stale"].get<int>()));
    stat_line("  invalid", std::to_string(t["invalid"].get<int>()));
    stat_line("  unvalidated", std::to_string(t["unvalidated"].get<int>()));
    stat_line("Functions", std::to_string(t["functions"].get<int>()));
    stat_line("Size", human_size(t["size_bytes"].get<std::uintmax_t>()));
    const auto& sp = j["speedup"];
    if (sp["count"].get<int>()) {
        stat_line("Speedup (" + std::to_string(sp["count"].get<int>()) + " usable, validated)", "");
        stat_line("  min / median / max", times(sp["min"]) + " / " + times(sp["median"]) + " / " + times(sp["max"]));
        stat_line("  geometric mean", times(sp["geomean"]));
    } else {
        stat_line("Speedup", "no usable validated entry");
    }
    for (const char* end : {"oldest", "newest"}) {
        const auto& w = j["last_validated"][end];
        std::string label = std::string("Last validated, ") + end;
        if (w.is_null()) {
            stat_line(label, "never");
            continue;
        }
        long days = w["days_ago"].get<long>();
        std::printf("%-32s %24s (%s) %s %s\n", label.c_str(), w["date"].get<std::string>().c_str(),
                    days < 0 ? "?" : days == 0 ? "today" : (std::to_string(days) + " day" + (days == 1 ? "" : "s") + " ago").c_str(),
                    w["function"].get<std::string>().c_str(), w["arch"].get<std::string>().c_str());
    }
    std::printf("\n%-10s %8s %6s %10s %6s %8s %12s %8s\n", "ARCH", "ENTRIES", "FRESH", "UNCHECKED", "STALE", "INVALID", "UNVALIDATED", "GEOMEAN");
    for (const auto& a : j["architectures"])
        std::printf("%-10s %8d %6d %10d %6d %8d %12d %8s\n", a["arch"].get<std::string>().c_str(), a["entries"].get<int>(),
                    a["fresh"].get<int>(), a["unchecked"].get<int>(), a["stale"].get<int>(), a["invalid"].get<int>(),
                    a["unvalidated"].get<int>(), times(a["speedup_geomean"]).c_str());
    if (verbose()) {
        std::printf("\n%-24s %-8s %-10s %8s %-21s %10s\n", "FUNCTION", "ARCH", "STATE", "SPEEDUP", "LAST VALIDATED", "SIZE");
        for (const auto& e : j["entries"]) {
            std::printf("%-24s %-8s %-10s %8s %-21s %10s\n", e["function"].get<std::string>().c_str(), e["arch"].get<std::string>().c_str(),
                        e["state"].get<std::string>().c_str(), times(e["speedup"]).c_str(),
                        e["validated_at"].is_string() ? e["validated_at"].get<std::string>().c_str()
                                                      : e["validated"].is_boolean() ? "never (unvalidated)" : "-",
                        human_size(e["size_bytes"].get<std::uintmax_t>()).c_str());
            if (!e["reason"].get<std::string>().empty() && e["state"] != "fresh" && e["state"] != "unchecked")
                std::printf("    %s\n", e["reason"].get<std::string>().c_str());
        }
    }
    if (!tasks) std::cout << "(fresh or stale needs the current tasks: pass --task T.json or --build-dir BUILD)\n";
}

}  // namespace

void run_stats(const StatsArgs& a, int& rc) {
    std::error_code ec;
    if (fs::exists(a.cache_dir, ec) && !fs::is_directory(a.cache_dir, ec))
        throw UsageError("--cache-dir: " + a.cache_dir + " is not a directory");
    const auto hashes = hashes_of(collect_tasks(a.tasks, a.build_dir));
    nlohmann::json j = stats_json(a.cache_dir, cache::scan(a.cache_dir, hashes), hashes.size());
    if (a.json) std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    else print_stats(j, a.cache_dir);
    rc = 0;
}

}  // namespace kevo
