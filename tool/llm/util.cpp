#include "llm/util.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

namespace kevo::llm {

std::string trim(const std::string& s) {
    size_t b = s.find_first_not_of(" \t\r\n");
    if (b == std::string::npos) return "";
    size_t e = s.find_last_not_of(" \t\r\n");
    return s.substr(b, e - b + 1);
}

std::string snippet(const std::string& text, size_t max) {
    std::string one_line;
    bool space = false;
    for (char c : text) {
        if (std::isspace(static_cast<unsigned char>(c))) {
            space = !one_line.empty();
            continue;
        }
        if (space) one_line += ' ';
        space = false;
        one_line += c;
    }
    if (one_line.empty()) return "<empty>";
    if (one_line.size() > max) one_line = one_line.substr(0, max) + "...";
    return one_line;
}

std::string format_seconds(double seconds) {
    char buf[32];
    std::snprintf(buf, sizeof buf, seconds < 10 ? "%.2g s" : "%.0f s", seconds);
    return buf;
}

std::string url_host(const std::string& url) {
    size_t start = url.find("://");
    start = start == std::string::npos ? 0 : start + 3;
    size_t end = url.find_first_of("/?#", start);
    std::string authority = url.substr(start, end == std::string::npos ? std::string::npos : end - start);
    size_t at = authority.rfind('@');
    if (at != std::string::npos) authority = authority.substr(at + 1);
    if (!authority.empty() && authority[0] == '[') return lower(authority.substr(0, authority.find(']') + 1));
    return lower(authority.substr(0, authority.find(':')));
}

}  // namespace kevo::llm
