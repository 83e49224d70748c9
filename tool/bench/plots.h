// The bench report's plots (inline SVG) and number formats, shared by bench.cpp's reports.
#pragma once
#include <string>
#include <vector>

#include "bench/bench.h"

namespace kevo::bench::detail {

std::string fmt(const char* f, double v);
std::string tokens_str(double t);
// Speedup per task over the reference (sorted, log scale), their distribution, and speedup vs tokens.
std::string speedup_bars(const std::vector<TaskResult>& results);
std::string speedup_histogram(const std::vector<TaskResult>& results);
std::string speedup_vs_tokens(const std::vector<TaskResult>& results);

}  // namespace kevo::bench::detail
