// `kernelevo report`: a run's history from its state store, as text and as a self-contained plot.
#pragma once
#include <string>

#include "store/store.h"

namespace kevo::evolve {

// Summary, best speedup by generation and by tokens spent, migrations and restarts.
std::string report_text(store::Store& store);
// Two charts (best speedup by generation, with every correct candidate as a dot; best speedup by
// tokens spent) as one standalone SVG document.
std::string report_svg(store::Store& store);
// The SVG and the text report in one standalone HTML page.
std::string report_html(store::Store& store);

}  // namespace kevo::evolve
