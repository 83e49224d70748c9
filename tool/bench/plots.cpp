// The bench report's charts (plots.h): data only; serve/page.h draws them with the embedded uPlot.
#include "bench/plots.h"

#include <algorithm>

namespace kevo::bench::detail {
namespace {

const char* const kFaster = "#2a9d4b";
const char* const kSlower = "#e08a1e";
const char* const kNotCorrect = "#bbbbbb";
const char* const kNotRun = "#7a9cc6";

struct Counts {
    int correct = 0, not_correct = 0, not_run = 0, no_kernel = 0;  // no_kernel: nothing to run (not "not correct")
};

Counts count(const std::vector<TaskResult>& results) {
    Counts c;
    for (const auto& r : results) {
        if (!ran(r)) ++c.not_run;
        else if (r.no_kernel()) ++c.no_kernel;
        else if (r.correct()) ++c.correct;
        else ++c.not_correct;
    }
    return c;
}

// Why a chart of correct tasks has nothing to draw, or "" when it has.
std::string no_correct_task(const Counts& c) {
    if (c.correct) return "";
    const std::string without = c.no_kernel ? std::to_string(c.no_kernel) + " without a kernel" : "";
    if (c.not_correct == 0 && c.not_run == 0 && c.no_kernel == 0) return "no task in this report";
    if (c.not_correct == 0 && c.not_run == 0) return "no task has a kernel (" + without + ")";
    if (c.not_correct == 0)
        return "no task was run (" + std::to_string(c.not_run) + " not run: no GPU of their architecture here" +
               (without.empty() ? "" : ", " + without) + ")";
    return "no task has a correct kernel (" + std::to_string(c.not_correct) + " run, none correct" +
           (c.not_run ? ", " + std::to_string(c.not_run) + " not run" : "") + (without.empty() ? "" : ", " + without) + ")";
}

// "N not correct, M not run (not drawn)" for the charts that draw correct tasks only.
std::string left_out(const Counts& c) {
    std::string s;
    if (c.not_correct) s += std::to_string(c.not_correct) + " not correct";
    if (c.no_kernel) s += (s.empty() ? "" : ", ") + std::to_string(c.no_kernel) + " without a kernel";
    if (c.not_run) s += (s.empty() ? "" : ", ") + std::to_string(c.not_run) + " not run (no GPU of their architecture here)";
    return s.empty() ? "" : "Not drawn: " + s + ".";
}

}  // namespace

nlohmann::json speedup_bars(const std::vector<TaskResult>& results) {
    const std::string title = "Speedup per task over LibTorch eager (correct tasks, fastest first, log scale)";
    const Counts c = count(results);
    if (std::string why = no_correct_task(c); !why.empty()) return {{"title", title}, {"empty", why}};
    std::vector<const TaskResult*> rs;
    for (const auto& r : results)
        if (r.correct()) rs.push_back(&r);
    std::stable_sort(rs.begin(), rs.end(), [](auto* a, auto* b) { return a->speedup > b->speedup; });
    nlohmann::json xs = nlohmann::json::array(), faster = nlohmann::json::array(), slower = nlohmann::json::array(),
                   names = nlohmann::json::array();
    for (size_t i = 0; i < rs.size(); ++i) {
        xs.push_back(i);
        names.push_back(rs[i]->name);
        faster.push_back(rs[i]->speedup >= 1 ? nlohmann::json(rs[i]->speedup) : nlohmann::json());
        slower.push_back(rs[i]->speedup < 1 ? nlohmann::json(rs[i]->speedup) : nlohmann::json());
    }
    nlohmann::json chart = {{"title", title}, {"xlabel", "task"}, {"ylabel", "speedup over LibTorch eager"},
                            {"x", "category"}, {"categories", names}, {"ylog", true}, {"ref", 1}, {"xs", xs},
                            {"series", {{{"label", "faster"}, {"color", kFaster}, {"kind", "bars"}, {"data", faster}},
                                        {{"label", "slower"}, {"color", kSlower}, {"kind", "bars"}, {"data", slower}}}}};
    if (std::string s = left_out(c); !s.empty()) chart["caption"] = s;
    return chart;
}

nlohmann::json speedup_histogram(const std::vector<TaskResult>& results) {
    const std::string title = "Speedup distribution (all tasks)";
    if (results.empty()) return {{"title", title}, {"empty", "no task in this report"}};
    const std::vector<std::pair<std::string, std::pair<double, double>>> bins = {
        {"<0.5x", {0, 0.5}}, {"0.5-0.8x", {0.5, 0.8}}, {"0.8-1x", {0.8, 1}}, {"1-1.5x", {1, 1.5}},
        {"1.5-2x", {1.5, 2}}, {"2-4x", {2, 4}},         {">=4x", {4, 1e300}}};
    const size_t not_correct = bins.size(), not_run = bins.size() + 1;
    std::vector<int> n(bins.size() + 2, 0);
    for (const auto& r : results) {
        if (!ran(r) || r.no_kernel()) ++n[not_run];  // (without a kernel: nothing was run)
        else if (!r.correct()) ++n[not_correct];
        else
            for (size_t i = 0; i < bins.size(); ++i)
                if (r.speedup >= bins[i].second.first && r.speedup < bins[i].second.second) ++n[i];
    }
    nlohmann::json xs = nlohmann::json::array(), names = nlohmann::json::array();
    nlohmann::json faster = nlohmann::json::array(), slower = nlohmann::json::array(), bad = nlohmann::json::array(),
                   skipped = nlohmann::json::array();
    auto only = [](bool here, int v) { return here ? nlohmann::json(v) : nlohmann::json(); };
    for (size_t i = 0; i < n.size(); ++i) {
        xs.push_back(i);
        names.push_back(i < bins.size() ? bins[i].first : i == not_correct ? "not correct" : "not run");
        const bool fast = i < bins.size() && bins[i].second.first >= 1;
        faster.push_back(only(fast, n[i]));
        slower.push_back(only(i < bins.size() && !fast, n[i]));
        bad.push_back(only(i == not_correct, n[i]));
        skipped.push_back(only(i == not_run, n[i]));
    }
    return {{"title", title}, {"xlabel", "speedup over LibTorch eager"}, {"ylabel", "tasks"}, {"x", "category"},
            {"categories", names}, {"yint", true}, {"xs", xs},
            {"series", {{{"label", "faster"}, {"color", kFaster}, {"kind", "bars"}, {"data", faster}},
                        {{"label", "slower"}, {"color", kSlower}, {"kind", "bars"}, {"data", slower}},
                        {{"label", "not correct"}, {"color", kNotCorrect}, {"kind", "bars"}, {"data", bad}},
                        {{"label", "not run"}, {"color", kNotRun}, {"kind", "bars"}, {"data", skipped}}}}};
}

nlohmann::json speedup_vs_tokens(const std::vector<TaskResult>& results) {
    const std::string title = "Best speedup vs LLM tokens spent (correct tasks)";
    const Counts c = count(results);
    if (std::string why = no_correct_task(c); !why.empty()) return {{"title", title}, {"empty", why}};
    std::vector<const TaskResult*> rs;
    int64_t spent = 0;
    for (const auto& r : results)
        if (r.correct()) rs.push_back(&r), spent += r.tokens;
    if (spent == 0) return {{"title", title}, {"empty", "no LLM tokens were spent (ready kernels were validated)"}};
    std::stable_sort(rs.begin(), rs.end(), [](auto* a, auto* b) { return a->tokens < b->tokens; });
    nlohmann::json xs = nlohmann::json::array(), faster = nlohmann::json::array(), slower = nlohmann::json::array();
    for (const auto* r : rs) {
        xs.push_back(r->tokens);
        faster.push_back(r->speedup >= 1 ? nlohmann::json(r->speedup) : nlohmann::json());
        slower.push_back(r->speedup < 1 ? nlohmann::json(r->speedup) : nlohmann::json());
    }
    nlohmann::json chart = {{"title", title}, {"xlabel", "LLM tokens"}, {"ylabel", "speedup over LibTorch eager"},
                            {"x", "tokens"}, {"ylog", true}, {"ref", 1}, {"xs", xs},
                            {"series", {{{"label", "faster"}, {"color", kFaster}, {"kind", "points"}, {"data", faster}},
                                        {{"label", "slower"}, {"color", kSlower}, {"kind", "points"}, {"data", slower}}}}};
    if (std::string s = left_out(c); !s.empty()) chart["caption"] = s;
    return chart;
}

nlohmann::json charts(const std::vector<TaskResult>& results) {
    return {speedup_bars(results), speedup_histogram(results), speedup_vs_tokens(results)};
}

}  // namespace kevo::bench::detail
