// `kernelevo report`: a run's history from its state store, as text and as a self-contained plot.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "store/store.h"

namespace kevo::evolve {

// Meta key: the best program's speedups over the PyTorch baselines, stored by `kernelevo search`
// (tool/commands: it times them) at its end: {"program": ID, "eager"|"compile": {"label", "us",
// "speedup"} or {"label", "not_run"}, "precision", "torch_version", "device"} (baseline::speedups_json
// plus the program), or {"not_run": REASON} when none were timed.
inline constexpr const char* kBestBaselinesMeta = "best_baselines";
// The best program's speedups over the PyTorch baselines, as the report shows them: each baseline
// {"label", "us", "speedup"} or {"label", "not_run"}, or {"not_run": REASON} for all (never a 0).
nlohmann::json best_baselines(store::Store& store, int64_t best_program);

// Summary, best speedup by generation and by tokens spent, migrations and restarts.
std::string report_text(store::Store& store);
// Two charts (best speedup by generation, with every correct candidate as a dot coloured by its
// island, migrations as dashed lines and restarts as triangles; best speedup by tokens spent) and a
// legend, as one standalone SVG document. An empty run says "no data yet".
std::string report_svg(store::Store& store);
// The charts of the HTML report (serve/search_report.h draws them with the embedded uPlot; the chart
// objects are described in serve/page.h): best speedup by generation (the best-so-far step line,
// every correct candidate as a dot coloured by its island, migrations as dashed lines, restarts
// named in the caption) and best speedup by LLM tokens spent (a step line). Without data, a chart
// is {"title", "empty": why} ("no candidate was evaluated", ...), never an empty plot.
nlohmann::json report_charts(store::Store& store);
// The report as JSON (schema in README.md, "JSON output").
nlohmann::json report_json(store::Store& store);
// Every candidate (program) of the run, one row each: id, generation, island, origin, attempt,
// parent_id, status, speedup, kernel_us, reference_us, key, norm_hash, llm_call_id, created. The
// JSON rows add feedback and source.
std::string candidates_csv(store::Store& store);
nlohmann::json candidates_json(store::Store& store);

}  // namespace kevo::evolve
