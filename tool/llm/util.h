// Small string helpers shared by the llm part's sources (internal, not part of the public API).
#pragma once
#include <string>

#include "common/text.h"

namespace kevo::llm {

std::string trim(const std::string& s);
inline bool starts_with(const std::string& s, const std::string& prefix) {
    return s.compare(0, prefix.size(), prefix) == 0;
}
inline bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
// The start of a (server) text on one line, for error messages: "<empty>" or at most `max` chars.
std::string snippet(const std::string& text, size_t max = 300);
// "0.25 s", "3 s", "90 s".
std::string format_seconds(double seconds);
// The lower-case host of an http(s) URL ("" when there is none).
std::string url_host(const std::string& url);

}  // namespace kevo::llm
