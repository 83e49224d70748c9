// The help text of every kernelevo command (cli.h: HelpFormatter, examples, terminal width, colour).
#include <CLI/CLI.hpp>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <map>
#include <sstream>

#include "cli/cli.h"
#include "common/settings.h"

namespace kevo::cli {
namespace {

std::map<const CLI::App*, std::vector<Example>>& example_table() {
    static std::map<const CLI::App*, std::vector<Example>> table;
    return table;
}

int g_help_fd = STDOUT_FILENO;
size_t g_fixed_width = 0;  // set_fixed_help_width(): the width, without colour; 0: the terminal's

// Columns a string takes on a terminal: UTF-8 continuation bytes take none.
size_t columns(const std::string& s) {
    return static_cast<size_t>(std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

// The words of one paragraph; a call such as KEVO_TUNABLE(NAME, DEFAULT, V1 V2 ...) stays one word
// (it is read, and searched for, as one thing).
std::vector<std::string> split_words(const std::string& para) {
    std::vector<std::string> words;
    std::istringstream in(para);
    std::string w;
    while (in >> w) {
        const size_t open = w.find('(');
        if (!words.empty() && open == std::string::npos) {
            const std::string& last = words.back();
            const size_t lopen = last.find('(');
            if (lopen != std::string::npos && lopen > 0 && std::count(last.begin(), last.end(), '(') > std::count(last.begin(), last.end(), ')') &&
                last.size() + w.size() < 40) {
                words.back() += " " + w;
                continue;
            }
        }
        words.push_back(w);
    }
    return words;
}

// Cuts a word longer than `width` into pieces, after a '/', ',', ']' or '|' where one is near the end.
std::vector<std::string> cut_word(std::string w, size_t width) {
    std::vector<std::string> pieces;
    while (columns(w) > width) {
        size_t cut = width;
        const size_t soft = w.find_last_of("/,]|&", width - 1);
        if (soft != std::string::npos && soft + 1 >= width / 2) cut = soft + 1;
        while (cut < w.size() && (static_cast<unsigned char>(w[cut]) & 0xC0) == 0x80) --cut;  // not inside a character
        pieces.push_back(w.substr(0, cut));
        w = w.substr(cut);
    }
    pieces.push_back(w);
    return pieces;
}

std::string bold(const std::string& s) { return !g_fixed_width && colour(g_help_fd) ? "\033[1m" + s + "\033[0m" : s; }

// Appends `text` wrapped to `width` columns, every line indented by `indent` spaces, except the
// first when `first_indent` says it is already `first_indent` columns into its line.
void append_wrapped(std::string& out, const std::string& text, size_t width, size_t indent, size_t first_indent = std::string::npos) {
    const size_t avail = width > indent + 10 ? width - indent : 10;
    const auto lines = wrap_lines(text, avail);
    for (size_t i = 0; i < lines.size(); ++i) {
        if (i > 0 || first_indent == std::string::npos) out += std::string(indent, ' ');
        else if (first_indent < indent) out += std::string(indent - first_indent, ' ');
        out += lines[i] + "\n";
    }
    if (lines.empty() && first_indent != std::string::npos) out += "\n";
}

// Appends `text` in the column at `col`, after a name `used` columns wide: on the same line when
// the name leaves room, else from the next one.
void append_in_column(std::string& out, const std::string& text, size_t width, size_t col, size_t used) {
    if (used + 2 <= col) {
        append_wrapped(out, text, width, col, used);
    } else {
        out += "\n";
        append_wrapped(out, text, width, col);
    }
}

// "INT:INT in [1 - 64]" -> "INT", "TEXT:FILE" -> "FILE", "NAME[:WEIGHT]" and "IN:OUT" stay: the
// type name without what CLI11's validators append to it.
std::string value_name(const std::string& type) {
    std::vector<std::string> parts;
    std::string part;
    std::istringstream in(type);
    while (std::getline(in, part, ':')) parts.push_back(part);
    std::string out;
    for (size_t i = 0; i < parts.size(); ++i) {
        const std::string& p = parts[i];
        const bool validator = i > 0 && (p == "POSITIVE" || p == "NONNEGATIVE" || p == "NUMBER" || p == "FILE" || p == "DIR" ||
                                         p == "PATH" || p.find(" in [") != std::string::npos || p.rfind("{", 0) == 0);
        if (!validator) out += (out.empty() ? "" : ":") + p;
        else if ((p == "FILE" || p == "DIR" || p == "PATH") && out == "TEXT") out = p;
    }
    return out;
}

const std::vector<std::string> kGroupOrder = {"Options", "Evolution", "LLM", "Budget", "Validation", "Output"};

class HelpFormatter : public CLI::Formatter {
public:
    std::string make_help(const CLI::App* app, std::string name, CLI::AppFormatMode mode) const override {
        if (mode == CLI::AppFormatMode::Sub) return CLI::Formatter::make_help(app, name, mode);
        width_ = g_fixed_width ? g_fixed_width : terminal_width(g_help_fd);
        col_ = std::clamp<size_t>(width_ * 35 / 100, 16, 30);
        std::string out;
        append_wrapped(out, app->get_description(), width_, 0);
        out += "\n";
        const auto usage = wrap_lines(make_usage(app, name), width_ - 4);
        for (size_t i = 0; i < usage.size(); ++i) out += (i ? "    " : "") + usage[i] + "\n";
        out += make_positionals(app);
        for (const std::string& group : ordered_groups(app)) {
            auto opts = app->get_options([&group](const CLI::Option* o) { return o->get_group() == group && o->nonpositional(); });
            if (!opts.empty()) out += make_group(group, false, opts);
        }
        out += make_subcommands(app, mode);
        out += make_examples(*app);
        if (!app->get_footer().empty()) {
            out += "\n";
            append_wrapped(out, app->get_footer(), width_, 0);
        }
        return out;
    }

    std::string make_group(std::string group, bool positional, std::vector<const CLI::Option*> opts) const override {
        std::string out = "\n" + bold(group + ":") + "\n";
        for (const CLI::Option* o : opts) out += make_option(o, positional);
        return out;
    }

    std::string make_option(const CLI::Option* opt, bool positional) const override {
        std::string out;
        // The names, type and default (on more lines only when wider than the terminal), then the
        // description in its column, or below them when they reach into it.
        const auto left = wrap_lines(make_option_name(opt, positional) + make_option_opts(opt), width_ - 6);
        for (size_t i = 0; i < left.size(); ++i) out += (i ? "\n      " : "  ") + left[i];
        const size_t used = (left.size() > 1 ? 6 : 2) + (left.empty() ? 0 : columns(left.back()));
        const std::string desc = make_option_desc(opt);
        if (desc.empty()) return out + "\n";
        append_in_column(out, desc, width_, col_, used);
        return out;
    }

    // " INT=3", " {full,diff,mixed}=mixed", " TEXT ... REQUIRED": the value's kind without the
    // validators' words (a range is checked, and said, when a value is out of it).
    std::string make_option_opts(const CLI::Option* opt) const override {
        if (!opt->get_option_text().empty()) return " " + opt->get_option_text();
        std::string out;
        if (opt->get_expected_max() != 0) {
            const std::string type = opt->get_type_name();
            const size_t open = type.find('{'), close = type.find('}');
            if (open != std::string::npos && close != std::string::npos && close > open) out += " " + type.substr(open, close - open + 1);
            else if (!type.empty()) out += " " + value_name(type);
            if (!opt->get_default_str().empty()) out += "=" + opt->get_default_str();
            if (opt->get_expected_max() == CLI::detail::expected_max_vector_size) out += " ...";
            if (opt->get_required()) out += " " + get_label("REQUIRED");
        }
        if (!opt->get_envname().empty()) out += " (env: " + opt->get_envname() + ")";
        for (const CLI::Option* other : opt->get_excludes()) out += " (not with " + make_option_name(other, false) + ")";
        return out;
    }

    // "-q,--quiet": the names only (CLI11's own adds a disabling flag's "{false}").
    std::string make_option_name(const CLI::Option* opt, bool positional) const override {
        if (positional) return opt->get_name(true, false);
        std::string names;
        for (const auto& s : opt->get_snames()) names += (names.empty() ? "-" : ",-") + s;
        for (const auto& l : opt->get_lnames()) names += (names.empty() ? "--" : ",--") + l;
        return names;
    }

    std::string make_subcommands(const CLI::App* app, CLI::AppFormatMode) const override {
        auto subs = app->get_subcommands([](const CLI::App* s) { return !s->get_name().empty() && !s->get_disabled(); });
        if (subs.empty()) return "";
        size_t longest = 0;
        for (const CLI::App* s : subs) longest = std::max(longest, columns(s->get_name()));
        sub_col_ = std::min(longest + 4, col_);
        std::string out = "\n" + bold("Subcommands:") + "\n";
        for (const CLI::App* s : subs) out += make_subcommand(s);
        return out;
    }

    // One line: the name and the first sentence of its description.
    std::string make_subcommand(const CLI::App* sub) const override {
        std::string out = "  " + sub->get_name();
        append_in_column(out, summary(sub->get_description()), width_, sub_col_, columns(out));
        return out;
    }

private:
    std::vector<std::string> ordered_groups(const CLI::App* app) const {
        std::vector<std::string> groups = app->get_groups(), out;
        for (const auto& g : kGroupOrder)
            if (std::find(groups.begin(), groups.end(), g) != groups.end()) out.push_back(g);
        for (const auto& g : groups)
            if (!g.empty() && std::find(out.begin(), out.end(), g) == out.end()) out.push_back(g);
        return out;
    }

    std::string make_examples(const CLI::App& app) const {
        const std::vector<Example> ex = examples_of(app);
        if (ex.empty()) return "";
        std::string out = "\n" + bold("Examples:") + "\n";
        for (size_t i = 0; i < ex.size(); ++i) {
            if (i) out += "\n";
            if (!ex[i].what.empty()) append_wrapped(out, ex[i].what, width_, 2);
            // A command too long for the line goes on over several, each ending in " \" as in a shell.
            const auto lines = wrap_lines(ex[i].command, width_ > 12 ? width_ - 8 : 4);
            for (size_t j = 0; j < lines.size(); ++j)
                out += std::string(j ? 6 : 4, ' ') + lines[j] + (j + 1 < lines.size() ? " \\" : "") + "\n";
        }
        return out;
    }

    mutable size_t width_ = 80, col_ = 30, sub_col_ = 30;
};

}  // namespace

std::vector<std::string> wrap_lines(const std::string& text, size_t width) {
    width = std::max<size_t>(width, 8);
    std::vector<std::string> lines;
    std::istringstream paras(text);
    std::string para;
    while (std::getline(paras, para)) {
        std::string line;
        for (const std::string& word : split_words(para)) {
            for (const std::string& piece : cut_word(word, width)) {
                if (!line.empty() && columns(line) + 1 + columns(piece) > width) {
                    lines.push_back(line);
                    line.clear();
                }
                line += (line.empty() ? "" : " ") + piece;
            }
        }
        lines.push_back(line);
    }
    while (!lines.empty() && lines.back().empty()) lines.pop_back();
    return lines;
}

std::string summary(const std::string& description) {
    // The first sentence: up to the first ". " or line end outside parentheses ("e.g. x" goes on).
    int depth = 0;
    size_t end = description.size();
    for (size_t i = 0; i < description.size(); ++i) {
        const char c = description[i];
        if (c == '(') ++depth;
        if (c == ')') depth = std::max(0, depth - 1);
        if (c == '\n') { end = i; break; }
        if (c == '.' && depth == 0 && (i + 1 == description.size() || description[i + 1] == ' ' || description[i + 1] == '\n')) {
            const bool abbreviation = i >= 3 && (description.compare(i - 3, 3, "e.g") == 0 || description.compare(i - 3, 3, "i.e") == 0);
            if (!abbreviation) { end = i; break; }
        }
    }
    return description.substr(0, end);
}

void set_examples(CLI::App& app, std::vector<Example> examples) { example_table()[&app] = std::move(examples); }

std::vector<Example> examples_of(const CLI::App& app) {
    auto& table = example_table();
    if (auto it = table.find(&app); it != table.end()) return it->second;
    // A subcommand without its own: those of its nearest ancestor that run it.
    const std::string path = command_path(app);
    for (const CLI::App* p = app.get_parent(); p; p = p->get_parent()) {
        auto it = table.find(p);
        if (it == table.end()) continue;
        std::vector<Example> mine;
        for (const Example& e : it->second)
            if (e.command == path || e.command.rfind(path + " ", 0) == 0) mine.push_back(e);
        return mine;
    }
    return {};
}

size_t terminal_width(int fd) {
    size_t w = 0;
    struct winsize ws {};
    if (::isatty(fd) && ::ioctl(fd, TIOCGWINSZ, &ws) == 0) w = ws.ws_col;
    if (w == 0)
        if (const char* c = std::getenv("COLUMNS")) w = static_cast<size_t>(std::max(0L, std::strtol(c, nullptr, 10)));
    if (w == 0) w = 80;
    // Narrower than 40 leaves no room for a description; wider than 100 is hard to read.
    return std::clamp<size_t>(w, 40, 100);
}

bool colour(int fd) {
    const char* no = std::getenv("NO_COLOR");  // https://no-color.org: present and not empty
    if (no && *no) return false;
    const char* term = std::getenv("TERM");
    if (term && std::string(term) == "dumb") return false;
    return ::isatty(fd) == 1;
}

void set_help_stream(int fd) { g_help_fd = fd; }

void set_fixed_help_width(size_t width) { g_fixed_width = width; }

std::shared_ptr<CLI::FormatterBase> make_formatter() { return std::make_shared<HelpFormatter>(); }

bool print_help_topic(const std::string& topic) {
    if (topic != "environment") return false;
    std::cout << environment_markdown();
    return true;
}

}  // namespace kevo::cli
