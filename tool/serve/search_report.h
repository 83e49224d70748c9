// `kernelevo report --plot FILE.html`: a search's report as one self-contained page: the charts of
// evolve::report_charts() drawn by the embedded uPlot (page.h), then the text report.
#pragma once
#include <string>

#include "store/store.h"

namespace kevo::serve {

std::string search_report_html(store::Store& store);

}  // namespace kevo::serve
