// Did-you-mean: the nearest names to a mistyped one. Shared by the command line (tool/cli: mistyped
// subcommands and options) and the task parser (tool/task: mistyped task.json fields and enum values),
// so both guess the same way.
#pragma once
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace kevo {

// Optimal-string-alignment distance (insertions, deletions, substitutions, adjacent swaps).
inline size_t edit_distance(const std::string& a, const std::string& b) {
    const size_t n = a.size(), m = b.size();
    std::vector<std::vector<size_t>> d(n + 1, std::vector<size_t>(m + 1));
    for (size_t i = 0; i <= n; ++i) d[i][0] = i;
    for (size_t j = 0; j <= m; ++j) d[0][j] = j;
    for (size_t i = 1; i <= n; ++i)
        for (size_t j = 1; j <= m; ++j) {
            size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
            d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
                d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
        }
    return d[n][m];
}

// The candidates nearest to `word` (distance at most max(1, |word| / 3), or `word` a prefix of
// a candidate; leading dashes not counted), nearest first, at most three; empty when none is close
// or `word` is shorter than three letters.
inline std::vector<std::string> closest(const std::string& word, const std::vector<std::string>& candidates) {
    // Leading dashes count as part of the word but not towards its length.
    const size_t core = word.size() - std::min(word.find_first_not_of('-'), word.size());
    const size_t limit = std::max<size_t>(1, core / 3);
    std::vector<std::pair<size_t, std::string>> hits;
    if (core < 3) return {};  // "-q" is one edit away from every short option: no useful guess
    for (const auto& c : candidates) {
        if (c == word) continue;
        size_t dist = edit_distance(word, c);
        bool prefix = core >= 3 && c.rfind(word, 0) == 0;
        if (dist <= limit || prefix) hits.emplace_back(prefix ? std::min(dist, limit) : dist, c);
    }
    std::stable_sort(hits.begin(), hits.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    std::vector<std::string> out;
    for (const auto& h : hits)
        if (std::find(out.begin(), out.end(), h.second) == out.end()) out.push_back(h.second);
    if (out.size() > 3) out.resize(3);
    return out;
}

}  // namespace kevo
