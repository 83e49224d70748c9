// The bench report's charts (serve/page.h's chart objects, drawn by the embedded uPlot) and the
// number formats bench.cpp's reports share.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/bench.h"
#include "common/text.h"

namespace kevo::bench::detail {

inline std::string fmt(const char* f, double v) { return format_double(f, v); }
using kevo::tokens_str;

// Whether a task ran here: "no_device" tasks (no GPU of their architecture) did not, and are never
// counted or drawn as "not correct".
inline bool ran(const TaskResult& r) { return r.status != "no_device"; }

// Speedup per correct task over the reference (sorted, log scale), the distribution of all tasks
// (correct ones by speedup, then "not correct" and "not run"), and speedup vs tokens spent. A chart
// without data is {"title", "empty": why}.
nlohmann::json speedup_bars(const std::vector<TaskResult>& results);
nlohmann::json speedup_histogram(const std::vector<TaskResult>& results);
nlohmann::json speedup_vs_tokens(const std::vector<TaskResult>& results);
// The three, in that order.
nlohmann::json charts(const std::vector<TaskResult>& results);

}  // namespace kevo::bench::detail
