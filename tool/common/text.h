// Small text helpers: XML/HTML escaping for the parts that write reports, line iteration for the
// parts that read JSON Lines files.
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

// Calls f(line, number) for every line of `text` that is not blank (spaces, tabs, "\r"), `line`
// without its "\n" (a string the callee may move from), `number` counting every line from 1 so that
// messages can point at it. A final "\n" does not start another line.
template <class F>
void for_each_nonblank_line(const std::string& text, F&& f) {
    size_t number = 0;
    for (size_t pos = 0; pos < text.size();) {
        size_t end = text.find('\n', pos);
        if (end == std::string::npos) end = text.size();
        std::string line = text.substr(pos, end - pos);
        pos = end + 1;
        ++number;
        if (line.find_first_not_of(" \t\r") != std::string::npos) f(line, number);
    }
}

}  // namespace kevo
