#include "cli/cli.h"

#include <CLI/CLI.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "common/error.h"
#include "common/exit_code.h"
#include "common/log.h"
#include "reference/reference.h"
#include "store/store.h"
#include "common/process.h"
#include "common/text.h"

namespace kevo::cli {

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
                out += "'" + word + "' is not an option of '" + where + "'; did you mean " + quoted_list(near) + "?\n";
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
                out += "'" + word + "' is an option of " + quoted_list(owners) + ": give it after the command\n";
            }
        } else {
            auto names = subcommand_names(at);
            if (names.empty() || command_seen) continue;
            command_seen = true;
            auto near = closest(word, names);
            out += "'" + word + "' is not a command of '" + where + "'" +
                   (near.empty() ? " (commands: " + quoted_list(names) + ")" : "; did you mean " + quoted_list(near) + "?") + "\n";
        }
    }
    if (!out.empty()) out.pop_back();
    return out;
}

namespace {

// The option named `name` in the command the parse reached or one above it (options fall through).
const CLI::Option* find_option(const CLI::App& root, const std::string& name) {
    for (const CLI::App* a = &deepest_selected(root); a; a = a->get_parent())
        if (const CLI::Option* o = a->get_option_no_throw(name)) return o;
    return nullptr;
}

// 1e-308 and 1.79e308 as CLI11's Range prints them ("0.000000", 309 digits): a bound or none.
std::string number(const std::string& s) {
    const double v = std::strtod(s.c_str(), nullptr);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
}

// "Value -1 not in range 0.000000 to 1797...": what the option accepts, in words.
std::string range_message(const CLI::Option* opt, const std::string& value, const std::string& lo, const std::string& hi) {
    const std::string type = opt ? opt->get_type_name() : "";
    if (type.find("POSITIVE") != std::string::npos) return "must be a positive number, not " + value;
    if (type.find("NONNEGATIVE") != std::string::npos) return "must be 0 or more, not " + value;
    if (std::strtod(hi.c_str(), nullptr) > 1e300) return "must be at least " + number(lo) + ", not " + value;
    return "must be between " + number(lo) + " and " + number(hi) + ", not " + value;
}

std::string kind_of_value(const CLI::Option* opt) {
    const std::string type = opt ? opt->get_type_name() : "";
    if (type.rfind("UINT", 0) == 0) return "a whole number, 0 or more";
    if (type.rfind("INT", 0) == 0) return "a whole number";
    if (type.rfind("FLOAT", 0) == 0 || type.rfind("NUMBER", 0) == 0) return "a number";
    return "";
}

// "--name: rest" from a CLI11 validation message, in short words.
std::string validation_message(const CLI::App& root, const std::string& what) {
    static const std::regex named(R"(^(-{1,2}[A-Za-z0-9_-]+|[A-Z_]+): ([\s\S]*)$)");
    std::smatch m;
    if (!std::regex_match(what, m, named)) return what;
    const std::string name = m[1], rest = m[2];
    const CLI::Option* opt = find_option(root, name);
    static const std::regex range(R"(^Value (.*) not in range (\S+) to (\S+)$)");
    static const std::regex member(R"(^(.*) not in \{(.*)\}$)");
    static const std::regex missing(R"(^(File|Directory|Path) does not exist: (.*)$)");
    std::smatch r;
    if (std::regex_match(rest, r, range)) {
        const std::string kind = kind_of_value(opt);
        char* end = nullptr;
        const std::string v = r[1];
        std::strtod(v.c_str(), &end);
        if (!kind.empty() && (v.empty() || (end && *end))) return name + ": must be " + kind + ", not '" + v + "'";
        return name + ": " + range_message(opt, v, r[2], r[3]);
    }
    if (std::regex_match(rest, r, member)) {
        std::string choices = r[2];
        std::replace(choices.begin(), choices.end(), ',', ' ');
        return name + ": '" + std::string(r[1]) + "' is not one of: " + choices;
    }
    if (std::regex_match(rest, r, missing)) return name + ": no such " + (r[1] == "Directory" ? "directory" : "file") + ": " + std::string(r[2]);
    if (std::regex_match(rest, r, std::regex(R"(^\d+ required .* missing$)"))) return name + " needs a value";
    if (std::regex_match(rest, r, std::regex(R"(^At Most 1 required but received (\d+)$)")))
        return name + " is given " + std::string(r[1]) + " times: give it once";  // the last would win silently
    return name + ": " + rest;
}

std::string help_line(const CLI::App& app) {
    const std::string where = command_path(app);
    return "Run 'kernelevo help" + where.substr(std::min(where.size(), std::string("kernelevo").size())) + "' for usage.";
}

}  // namespace

std::string parse_error_message(const CLI::App& root, const CLI::ParseError& e) {
    // An argument the parse did not know is the cause; "--task is required" after "--tsk" is not.
    std::string hints = suggestions(root);
    if (!hints.empty()) return hints;
    const std::string what = e.what();
    std::smatch m;
    if (dynamic_cast<const CLI::ExtrasError*>(&e) &&
        std::regex_match(what, m, std::regex(R"(^The following arguments? (?:was|were) not expected: ([\s\S]*)$)")))
        return "'" + command_path(deepest_selected(root)) + "' does not take " + (std::string(m[1]).find(' ') == std::string::npos ? "'" + std::string(m[1]) + "'" : "these arguments: " + std::string(m[1]));
    if (std::regex_match(what, m, std::regex(R"(^Could not convert: (\S+) = ([\s\S]*)$)"))) {
        const std::string kind = kind_of_value(find_option(root, m[1]));
        return std::string(m[1]) + ": must be " + (kind.empty() ? "a valid value" : kind) + ", not '" + std::string(m[2]) + "'";
    }
    if (std::regex_match(what, m, std::regex(R"(^The value (.*) is not an allowed value for (\S+)$)")))
        return std::string(m[2]) + ": '" + std::string(m[1]) + "' is not an allowed value";
    if (std::regex_match(what, m, std::regex(R"(^(\S+): too many inputs for a flag$)")))
        return std::string(m[1]) + " takes no value";
    if (std::regex_match(what, m, std::regex(R"(^Expected (?:exactly|at least) \d+ arguments? to (\S+), got \d+$)")))
        return std::string(m[1]) + " needs a value";
    if (dynamic_cast<const CLI::ValidationError*>(&e) || dynamic_cast<const CLI::ArgumentMismatch*>(&e) ||
        dynamic_cast<const CLI::ConversionError*>(&e))
        return validation_message(root, what);
    return what;
}

bool json_requested(const CLI::App& root, int argc, const char* const* argv) {
    bool given = false;
    for (int i = 1; i < argc; ++i) {
        if (std::string(argv[i]) == "--") break;
        if (std::string(argv[i]) == "--json") given = true;
    }
    if (!given) return false;
    for (const CLI::App* a = &deepest_selected(root); a; a = a->get_parent())
        if (a->get_option_no_throw("--json")) return true;
    return false;
}

int report_error(const std::string& message, int code, bool json, const CLI::App* usage_of) {
    // Messages may quote a server's reply or a file's bytes: escaped, never obeyed by the terminal.
    const std::string shown = printable(redact(message));
    const std::string error = colour(STDERR_FILENO) ? "\033[1;31merror:\033[0m " : "error: ";
    if (!usage_of) {
        std::cerr << "kernelevo: " << error << shown << "\n";  // a log it quotes goes on below as it is
    } else {
        // A parse error: one line per argument that was not understood, then where the usage is.
        size_t start = 0;
        for (size_t nl = shown.find('\n'); ; nl = shown.find('\n', start)) {
            std::cerr << "kernelevo: " << error << shown.substr(start, nl == std::string::npos ? nl : nl - start) << "\n";
            if (nl == std::string::npos) break;
            start = nl + 1;
        }
        std::cerr << help_line(*usage_of) << "\n";
    }
    if (json) std::cout << nlohmann::json{{"error", shown}, {"exit_code", code}}.dump() << std::endl;
    return code;
}

void add_help_command(CLI::App& root, int& rc) {
    auto words = std::make_shared<std::vector<std::string>>();
    CLI::App* help = root.add_subcommand("help", "Show the help of kernelevo or of one of its commands. kernelevo help [COMMAND [SUBCOMMAND]]");
    set_examples(*help, {{"The options of search", "kernelevo help search"}, {"Those of cache status", "kernelevo help cache status"},
                         {"The environment variables kernelevo reads (markdown)", "kernelevo help environment"},
                         {"The reference page of search (markdown)", "kernelevo help --markdown search"}});
    help->add_option("command", *words, "The command, e.g. search, or cache status");
    auto markdown = std::make_shared<bool>(false);
    help->add_flag("--markdown", *markdown,
                   "The command reference in markdown at 80 columns: every command's (docs/reference/commands.md), or "
                   "COMMAND's and its subcommands' help (docs/reference/commands/COMMAND.md)");
    help->callback([&root, &rc, words, markdown] {
        if (words->size() == 1 && print_help_topic(words->front())) {
            rc = kExitSuccess;
            return;
        }
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
        std::cout << (*markdown ? reference_markdown(*cur)
                                : cur->get_formatter()->make_help(cur, command_path(*cur), CLI::AppFormatMode::Normal));
        rc = kExitSuccess;
    });
}

void add_verbosity_flags(CLI::App& cmd, const std::string& verbose_help) {
    CLI::Option* q = cmd.add_flag_callback("-q,--quiet", [] { set_verbosity(Verbosity::quiet); },
                                           "Print only the result and errors (no progress lines)");
    if (verbose_help.empty()) return;
    CLI::Option* v = cmd.add_flag_callback("-v,--verbose", [] { set_verbosity(Verbosity::verbose); }, verbose_help);
    q->excludes(v);
}

std::string version_text() {
    const ReferenceSupport torch = reference_support();
    const std::string commit = KEVO_GIT_COMMIT;
    std::ostringstream ss;
    ss << "kernelevo " << KEVO_VERSION << "\n"
       << "  git commit:    " << (commit.empty() ? "unknown (not configured from a git checkout)" : commit + " (at configure time)") << "\n"
       << "  CUDA toolkit:  " << KEVO_CUDA_VERSION << "\n"
       << "  LibTorch:      " << (!torch.available ? "no (references cannot be built; imports and baselines need it)"
                                  : torch.cuda    ? "yes, with CUDA"
                                                  : "yes, CPU only")
       << "\n"
       << "  Redis:         " << (store::redis_supported() ? "yes" : "no (built without hiredis)") << "\n"
       << "  build type:    " << KEVO_BUILD_TYPE;
    return ss.str();
}

}  // namespace kevo::cli
