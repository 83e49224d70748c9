// The reports' charts: the embedded uPlot and web/report.js, inlined (page.h).
#include "serve/page.h"

#include <stdexcept>

#include "common/text.h"

namespace kevo::serve {
namespace {

std::string asset(const std::string& name) {
    auto it = kWebAssets.find(name);
    if (it == kWebAssets.end()) throw std::logic_error("internal: the web asset " + name + " was not embedded");
    return std::string(reinterpret_cast<const char*>(it->second.data), it->second.size);
}

// JSON that is safe inside <script>: "<" only occurs in strings, where \u003c means the same.
std::string script_json(const nlohmann::json& j) {
    std::string s = j.dump(), out;
    out.reserve(s.size());
    for (char c : s) out += c == '<' ? std::string("\\u003c") : std::string(1, c);
    return out;
}

}  // namespace

std::string charts_html(const nlohmann::json& charts) {
    std::string out = "<style>.chart{margin:12px 0}.chart figcaption{font-weight:bold;margin-bottom:4px}"
                      ".chart .caption{color:#555;font-size:13px}.nodata{color:#666;font-style:italic}</style>\n";
    nlohmann::json drawn = nlohmann::json::array();
    for (const auto& c : charts) {
        const std::string title = c.value("title", std::string());
        if (c.contains("empty")) {
            out += "<p class='nodata'><b>" + xml_escape(title) + ":</b> " + xml_escape(c.value("empty", std::string())) +
                   "</p>\n";
            continue;
        }
        const std::string id = "chart-" + std::to_string(drawn.size());
        out += "<figure class='chart' id='" + id + "'><figcaption>" + xml_escape(title) + "</figcaption>";
        out += "<div class='plot'></div>";
        if (c.contains("caption")) out += "<div class='caption'>" + xml_escape(c.value("caption", std::string())) + "</div>";
        out += "</figure>\n";
        nlohmann::json spec = c;
        spec["id"] = id;
        drawn.push_back(std::move(spec));
    }
    if (drawn.empty()) return out;
    out += "<style>" + asset("vendor/uplot/uPlot.min.css") + "</style>\n<script>" + asset("vendor/uplot/uPlot.iife.min.js") +
           "\n</script>\n<script>" + asset("report.js") + "\n</script>\n<script>kevoDrawCharts(" + script_json(drawn) +
           ");</script>\n";
    return out;
}

std::string report_page(const std::string& title, const std::string& body_top, const nlohmann::json& charts,
                        const std::string& body_bottom) {
    return "<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>" + xml_escape(title) +
           "</title>\n<style>body{font-family:sans-serif;margin:24px;max-width:1100px}table{border-collapse:collapse;"
           "margin:12px 0}td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px}td.n{text-align:right}"
           "th{background:#f3f3f3}.bad{color:#a00}.warn{background:#fff3cd;padding:8px}</style></head><body>\n" +
           body_top + charts_html(charts) + body_bottom + "</body></html>\n";
}

}  // namespace kevo::serve
