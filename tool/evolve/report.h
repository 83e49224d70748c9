// `kernelevo report`: a run's history from its state store, as text and as a self-contained plot.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "store/store.h"

namespace kevo::evolve {

// Summary, best speedup by generation and by tokens spent, migrations and restarts.
std::string report_text(store::Store& store);
// Two charts (best speedup by generation, with every correct candidate as a dot coloured by its
// island, migrations as dashed lines and restarts as triangles; best speedup by tokens spent) and a
// legend, as one standalone SVG document. An empty run says "no data yet".
std::string report_svg(store::Store& store);
// The SVG and the text report in one standalone HTML page.
std::string report_html(store::Store& store);
// The report as JSON (schema in README.md, "JSON output").
nlohmann::json report_json(store::Store& store);
// Every candidate (program) of the run, one row each: id, generation, island, origin, attempt,
// parent_id, status, speedup, kernel_us, reference_us, key, norm_hash, llm_call_id, created. The
// JSON rows add feedback and source.
std::string candidates_csv(store::Store& store);
nlohmann::json candidates_json(store::Store& store);

}  // namespace kevo::evolve
