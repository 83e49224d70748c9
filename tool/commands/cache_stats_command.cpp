// `kernelevo cache stats`: a summary of a kernel cache like ccache -s (entries, states, speedups,
// sizes, ages), as text or --json.
#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "commands/cache_command.h"
#include "common/exit_code.h"
#include "common/log.h"
#include "common/text.h"

namespace kevo {
namespace {

// ---- cache stats --------------------------------------------------------------------------------

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

void run_stats(const workflows::CacheStatsRequest& a, bool json, int& rc) {
    const nlohmann::json j = workflows::cache_stats(a);
    if (json) std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    else print_stats(j, a.cache_dir);
    rc = kExitSuccess;
}

}  // namespace kevo
