#include "cli/cli.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <iostream>
#include <memory>

#include "common/error.h"
#include "common/log.h"

namespace kevo::cli {

size_t edit_distance(const std::string& a, const std::string& b) {
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

std::vector<std::string> closest(const std::string& word, const std::vector<std::string>& candidates) {
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

const CLI::App& deepest_selected(const CLI::App& root) {
    const CLI::App* cur = &root;
    for (auto subs = cur->get_subcommands(); !subs.empty(); subs = cur->get_subcommands()) cur = subs.front();
    return *cur;
}

std::string command_path(const CLI::App& app) {
    std::string path = app.get_name();
    for (const CLI::App* p = app.get_parent(); p; p = p->get_parent()) path = p->get_name() + " " + path;
    return path;
}

namespace {

std::vector<std::string> subcommand_names(const CLI::App& app) {
    std::vector<std::string> names;
    for (const CLI::App* s : app.get_subcommands([](const CLI::App*) { return true; })) names.push_back(s->get_name());
    return names;
}

// Every spelling of every option of `app` ("--task", "-q").
std::vector<std::string> option_names(const CLI::App& app) {
    std::vector<std::string> names;
    for (const CLI::Option* o : app.get_options()) {
        for (const auto& l : o->get_lnames()) names.push_back("--" + l);
        for (const auto& s : o->get_snames()) names.push_back("-" + s);
    }
    return names;
}

std::string quoted_list(const std::vector<std::string>& v) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) s += (i ? (i + 1 == v.size() ? " or " : ", ") : "") + ("'" + v[i] + "'");
    return s;
}

}  // namespace

std::string suggestions(const CLI::App& root) {
    const CLI::App& at = deepest_selected(root);
    const std::string where = command_path(at);
    std::string out;
    bool command_seen = false;   // only the first word can be a mistyped command; later ones are values
    for (std::string word : root.remaining(true)) {
        if (word.rfind("-", 0) == 0) {
            word = word.substr(0, word.find('='));
            auto near = closest(word, option_names(at));
            if (!near.empty()) {
                out += "kernelevo: '" + word + "' is not an option of '" + where + "'; did you mean " + quoted_list(near) + "?\n";
                continue;
            }
            // An option of a command, given before it ("kernelevo --json cache status").
            std::vector<std::string> owners;
            std::vector<const CLI::App*> pending = {&at};  // `at` itself: it was given before `at` was named
            while (!pending.empty()) {
                const CLI::App* sub = pending.back();
                pending.pop_back();
                auto names = option_names(*sub);
                if (std::find(names.begin(), names.end(), word) != names.end()) owners.push_back(command_path(*sub));
                for (const CLI::App* s2 : sub->get_subcommands([](const CLI::App*) { return true; })) pending.push_back(s2);
            }
            std::sort(owners.begin(), owners.end());
            if (!owners.empty()) {
                if (owners.size() > 3) owners.resize(3), owners.back() = "...";
                out += "kernelevo: '" + word + "' is an option of " + quoted_list(owners) + ": give it after the command\n";
            }
        } else {
            auto names = subcommand_names(at);
            if (names.empty() || command_seen) continue;
            command_seen = true;
            auto near = closest(word, names);
            out += "kernelevo: '" + word + "' is not a command of '" + where + "'" +
                   (near.empty() ? " (commands: " + quoted_list(names) + ")" : "; did you mean " + quoted_list(near) + "?") + "\n";
        }
    }
    if (!out.empty()) out += "Run 'kernelevo help" + where.substr(std::min(where.size(), std::string("kernelevo").size())) + "' for usage.\n";
    return out;
}

void add_help_command(CLI::App& root, int& rc) {
    auto words = std::make_shared<std::vector<std::string>>();
    CLI::App* help = root.add_subcommand("help", "Show the help of kernelevo or of one of its commands: kernelevo help [COMMAND [SUBCOMMAND]]");
    help->add_option("command", *words, "The command, e.g. search, or cache status");
    help->callback([&root, &rc, words] {
        const CLI::App* cur = &root;
        for (const auto& w : *words) {
            const CLI::App* next = nullptr;
            for (const CLI::App* s : cur->get_subcommands([](const CLI::App*) { return true; }))
                if (s->check_name(w)) next = s;
            if (!next) {
                auto names = subcommand_names(*cur);
                auto near = closest(w, names);
                throw UsageError("'" + w + "' is not a command of '" + command_path(*cur) + "'" +
                                 (names.empty() ? std::string(" (it has no subcommands)")
                                  : near.empty() ? " (commands: " + quoted_list(names) + ")"
                                                 : "; did you mean " + quoted_list(near) + "?"));
            }
            cur = next;
        }
        // The formatter directly: App::help() would show the help of the selected `help` itself.
        std::cout << cur->get_formatter()->make_help(cur, command_path(*cur), CLI::AppFormatMode::Normal);
        rc = 0;
    });
}

void add_verbosity_flags(CLI::App& cmd, const std::string& verbose_help) {
    CLI::Option* q = cmd.add_flag_callback("-q,--quiet", [] { set_verbosity(Verbosity::quiet); },
                                           "Print only the result and errors (no progress lines)");
    if (verbose_help.empty()) return;
    CLI::Option* v = cmd.add_flag_callback("-v,--verbose", [] { set_verbosity(Verbosity::verbose); }, verbose_help);
    q->excludes(v);
}

}  // namespace kevo::cli
