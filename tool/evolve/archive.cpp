#include "evolve/archive.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <regex>

#include "common/hash.h"
#include "language/registry.h"

namespace kevo::evolve {

std::string normalize_source(const std::string& s) {
    std::string out;
    out.reserve(s.size());
    auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
    bool pending_space = false, in_directive = false, line_start = true;
    for (size_t i = 0; i < s.size(); ++i) {
        char c = s[i];
        if (c == '/' && i + 1 < s.size() && s[i + 1] == '/') {  // line comment
            while (i + 1 < s.size() && s[i + 1] != '\n') ++i;  // stop before the newline
            pending_space = true;
            continue;
        }
        if (c == '/' && i + 1 < s.size() && s[i + 1] == '*') {  // block comment
            size_t end = s.find("*/", i + 2);
            i = end == std::string::npos ? s.size() : end + 1;
            pending_space = true;
            continue;
        }
        if (c == '"' || c == '\'') {  // literals stay verbatim
            if (pending_space && !out.empty() && word(out.back())) out += ' ';
            pending_space = false;
            size_t j = i + 1;
            while (j < s.size() && s[j] != c) j += s[j] == '\\' ? 2 : 1;
            out.append(s, i, std::min(j + 1, s.size()) - i);
            i = j;
            continue;
        }
        if (std::isspace(static_cast<unsigned char>(c))) {
            if (c == '\n') line_start = true;
            if (c == '\n' && in_directive) {  // a preprocessor line ends at its newline
                out += '\n';
                in_directive = false;
                pending_space = false;
                continue;
            }
            pending_space = true;
            continue;
        }
        if (c == '#' && line_start) {  // directives start a line of their own
            if (!out.empty() && out.back() != '\n') out += '\n';
            in_directive = true;
            pending_space = false;
        }
        line_start = false;
        // A space survives only between two word characters ("unsigned int").
        if (pending_space && !out.empty() && word(out.back()) && word(c)) out += ' ';
        pending_space = false;
        out += c;
    }
    return out;
}

std::string normalized_hash(const std::string& source) { return sha256_hex(normalize_source(source)); }

std::string technique_of(const std::string& source) {
    // Each language has techniques of its own, so an archive keeps the best of each language.
    const CandidateLanguage& language = language::of_source(source);
    for (const Technique& t : language.techniques())
        if (std::regex_search(source, t.pattern)) return t.tag;
    return language.plain_technique();
}

int speedup_bin(double speedup) {
    if (!(speedup > 0)) return -16;
    return std::clamp(static_cast<int>(std::floor(std::log2(speedup) * 4 + 1e-9)), -16, 32);
}

bool Archive::insert(const Elite& e) {
    auto key = std::make_pair(speedup_bin(e.speedup), e.technique);
    auto it = cells_.find(key);
    if (it == cells_.end()) {
        cells_.emplace(key, e);
        return true;
    }
    const Elite& cur = it->second;
    if (cur.id == e.id) return false;
    if (e.speedup > cur.speedup || (e.speedup == cur.speedup && e.size < cur.size)) {
        it->second = e;
        return true;
    }
    return false;
}

std::vector<Elite> Archive::elites() const {
    std::vector<Elite> out;
    for (const auto& [key, e] : cells_) out.push_back(e);
    return out;
}

std::optional<Elite> Archive::best() const {
    std::optional<Elite> best;
    for (const auto& [key, e] : cells_)
        if (!best || e.speedup > best->speedup) best = e;
    return best;
}

bool Archive::contains(int64_t id) const {
    return std::any_of(cells_.begin(), cells_.end(), [&](const auto& kv) { return kv.second.id == id; });
}

nlohmann::json Archive::to_json() const {
    nlohmann::json cells = nlohmann::json::array();
    for (const auto& [key, e] : cells_)
        cells.push_back({{"id", e.id}, {"speedup", e.speedup}, {"technique", e.technique}, {"size", e.size}});
    return cells;
}

Archive Archive::from_json(const nlohmann::json& j) {
    Archive a;
    for (const auto& c : j)
        a.insert(Elite{c.at("id").get<int64_t>(), c.at("speedup").get<double>(), c.at("technique").get<std::string>(),
                       c.at("size").get<int64_t>()});
    return a;
}

nlohmann::json Island::to_json() const {
    return {{"index", index},         {"archive", archive.to_json()}, {"best", best},
            {"last_improvement", last_improvement}, {"restarts", restarts}, {"seed_id", seed_id},
            {"last_feedback", last_feedback}};
}

Island Island::from_json(const nlohmann::json& j) {
    Island i;
    i.index = j.at("index").get<int>();
    i.archive = Archive::from_json(j.at("archive"));
    i.best = j.at("best").get<double>();
    i.last_improvement = j.at("last_improvement").get<int>();
    i.restarts = j.at("restarts").get<int>();
    i.seed_id = j.at("seed_id").get<int64_t>();
    i.last_feedback = j.at("last_feedback").get<std::string>();
    return i;
}

size_t select_index(const std::vector<double>& speedups, double temperature, double u) {
    double t = std::max(temperature, 1e-3);
    std::vector<double> w(speedups.size());
    // Computed in log space (relative to the best) so a low temperature cannot overflow.
    double top = -1e300;
    for (double s : speedups) top = std::max(top, std::log(std::max(s, 1e-6)));
    double total = 0;
    for (size_t i = 0; i < speedups.size(); ++i) {
        w[i] = std::exp((std::log(std::max(speedups[i], 1e-6)) - top) / t);
        total += w[i];
    }
    double x = u * total;
    for (size_t i = 0; i < w.size(); ++i) {
        if (x < w[i]) return i;
        x -= w[i];
    }
    return w.size() - 1;
}

}  // namespace kevo::evolve
