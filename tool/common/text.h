// Small text helpers shared by the parts that write HTML, SVG or XML reports.
#pragma once
#include <string>

namespace kevo {

// Escapes the five characters that are special in XML/HTML text and attribute values.
inline std::string xml_escape(const std::string& s) {
    std::string out;
    out.reserve(s.size());
    for (char c : s) {
        switch (c) {
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '&': out += "&amp;"; break;
            case '"': out += "&quot;"; break;
            case '\'': out += "&#39;"; break;
            default: out += c;
        }
    }
    return out;
}

}  // namespace kevo
