// Charts for the self-contained HTML reports (`kernelevo report --plot FILE.html`, `kernelevo bench`'s
// report.html), drawn by the same uPlot the serve page embeds (web/vendor/uplot, embedded once at
// build time by embed_web.cmake): the page inlines it, so it works offline as one file.
//
// A chart is a JSON object:
//   {"title": T, "empty": SENTENCE}  no data: the sentence is shown instead of a chart
//   {"title": T, "caption": C (optional, shown below), "xlabel": L, "ylabel": L,
//    "x": "int" | "tokens" | "category" (integer ticks; tokens in k/M; "categories": [names]),
//    "ylog": true (log2 y), "yint": true (integer y ticks), "ref": 1 (dashed line at y = 1),
//    "vlines": [x...] (dashed vertical marks, "vlines_label" names them),
//    "xs": [x...] (ascending), "series": [{"label", "color", "kind": "step" | "points" | "bars",
//    "data": [y or null, one per x]}]}
#pragma once
#include <cstddef>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

namespace kevo::serve {

// A file of web/ as embedded at build time (web_assets.cpp, generated): content type and bytes.
struct WebAsset {
    const char* type;
    const unsigned char* data;
    size_t size;
};
extern const std::map<std::string, WebAsset> kWebAssets;

// The charts as HTML to put in a page's <body>: uPlot's CSS and code inline, one <figure> per chart
// (or a <p class='nodata'> with its "empty" sentence), and the script that draws them.
std::string charts_html(const nlohmann::json& charts);

// A whole self-contained page: TITLE, then BODY_TOP (HTML), the charts, then BODY_BOTTOM (HTML).
std::string report_page(const std::string& title, const std::string& body_top, const nlohmann::json& charts,
                        const std::string& body_bottom);

}  // namespace kevo::serve
