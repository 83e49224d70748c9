// The kernelevo command line as its users meet it: the real binary, run as a child process, against
// real SQLite files, a real HTTP server on loopback, the real nvcc and a real CMake configure.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cache/cache.h"
#include "cli/cli.h"
#include "common/fs.h"
#include "common/hash.h"
#include "common/process.h"
#include "compile/arch_support.h"
#include "llm/llm.h"
#include "../llm/loopback_server.h"
#include "cli_run.h"
#include "store/store.h"
#include "task/task.h"
#include "validate/validate.h"

namespace fs = std::filesystem;
using namespace kevo;
using nlohmann::json;

namespace {

using namespace kevo::clitest;

// ---- did-you-mean, help, usage lines ----------------------------------------------------------

TEST(CliSuggest, EditDistanceAndClosest) {
    EXPECT_EQ(cli::edit_distance("search", "search"), 0u);
    EXPECT_EQ(cli::edit_distance("serch", "search"), 1u);
    EXPECT_EQ(cli::edit_distance("saerch", "search"), 1u);  // adjacent swap
    EXPECT_EQ(cli::edit_distance("", "abc"), 3u);
    EXPECT_EQ(cli::closest("serch", {"search", "report", "cache"}), std::vector<std::string>{"search"});
    EXPECT_EQ(cli::closest("--tsk", {"--task", "--kernel", "--arch"}), std::vector<std::string>{"--task"});
    EXPECT_EQ(cli::closest("--budget", {"--budget-usd", "--budget-tokens", "--arch"}),
              (std::vector<std::string>{"--budget-usd", "--budget-tokens"}));
    EXPECT_TRUE(cli::closest("xyz", {"search", "report", "cache"}).empty());
    EXPECT_TRUE(cli::closest("-q", {"-h", "-v"}).empty());  // too short to guess
}

TEST(CliSuggest, MistypedCommandSuggestsTheNearestOne) {
    auto r = kernelevo({"serch", "--task", "t.json"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(contains(r.err, "'serch' is not a command of 'kernelevo'; did you mean 'search'?")) << r.err;
    EXPECT_TRUE(contains(r.err, "Run 'kernelevo help' for usage.")) << r.err;
    EXPECT_FALSE(contains(r.err, "t.json")) << r.err;  // a value is not taken for a command

    r = kernelevo({"cache", "stauts"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(contains(r.err, "'stauts' is not a command of 'kernelevo cache'; did you mean 'status'")) << r.err;  // or 'stats'

    r = kernelevo({"frobnicate"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(contains(r.err, "(commands: ")) << r.err;
    EXPECT_TRUE(contains(r.err, "'search'")) << r.err;
}

TEST(CliSuggest, MistypedOptionSuggestsTheNearestOneOfThatCommand) {
    auto r = kernelevo({"validate", "--tsk", "t.json", "--kernel", "k.cu"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(contains(r.err, "'--tsk' is not an option of 'kernelevo validate'; did you mean '--task'?")) << r.err;
    EXPECT_TRUE(contains(r.err, "Run 'kernelevo help validate' for usage.")) << r.err;

    r = kernelevo({"cache", "status", "--cache-dir", ".", "--jsno"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(contains(r.err, "did you mean '--json'?")) << r.err;

    r = kernelevo({"--json", "cache", "status", "--cache-dir", "."});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(contains(r.err, "'--json' is an option of ")) << r.err;
    EXPECT_TRUE(contains(r.err, "'kernelevo cache status'")) << r.err;
    EXPECT_TRUE(contains(r.err, "give it after the command")) << r.err;

    r = kernelevo({"search", "--task", "t", "--out", "o", "--model", "m", "--budget-uds=5"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(contains(r.err, "'--budget-uds' is not an option of 'kernelevo search'; did you mean '--budget-usd'?")) << r.err;
}

TEST(CliHelp, HelpCommandPrintsTheCommandsHelpWithKernelevoInTheUsage) {
    auto r = kernelevo({"help"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(contains(r.out, "Usage: kernelevo [OPTIONS] SUBCOMMAND")) << r.out;
    for (const char* cmd : {"validate", "search", "report", "cache", "llm", "help"}) EXPECT_TRUE(contains(r.out, cmd)) << cmd;

    r = kernelevo({"help", "search"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(contains(r.out, "Usage: kernelevo search [OPTIONS]")) << r.out;
    EXPECT_TRUE(contains(r.out, "--budget-usd")) << r.out;

    r = kernelevo({"help", "cache", "prune"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(contains(r.out, "Usage: kernelevo cache prune [OPTIONS]")) << r.out;
    EXPECT_EQ(r.out, kernelevo({"cache", "prune", "--help"}).out);  // the same text as --help

    r = kernelevo({"help", "serch"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(contains(r.err, "did you mean 'search'?")) << r.err;
}

TEST(CliHelp, UsageLinesNeverShowTheExecutablesPath) {
    for (std::vector<std::string> args : {std::vector<std::string>{"--help"}, {"validate", "--help"}, {"cache", "status", "--help"},
                                          {"llm", "check", "--help"}, {"report", "--help"}}) {
        auto r = kernelevo(args);
        EXPECT_EQ(r.exit_code, 0);
        EXPECT_TRUE(contains(r.out, "Usage: kernelevo")) << r.out;
        EXPECT_FALSE(contains(r.out + r.err, kExe)) << r.out;
    }
    auto r = kernelevo({"validate"});  // a missing required option
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_FALSE(contains(r.out + r.err, kExe)) << r.err;
}

TEST(CliHelp, ACommandWithoutItsSubcommandShowsItsHelp) {
    auto r = kernelevo({"cache"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(contains(r.err, "'kernelevo cache' needs a command")) << r.err;
    EXPECT_TRUE(contains(r.err, "Usage: kernelevo cache [OPTIONS] SUBCOMMAND")) << r.err;
    for (const char* sub : {"status", "add", "remove", "prune", "hash"}) EXPECT_TRUE(contains(r.err, sub)) << sub;
}

// ---- help layout, short errors, JSON errors, colour, completion (issue 30) ------------------------

// Columns a line takes (UTF-8 continuation bytes take none).
size_t columns(const std::string& line) {
    return static_cast<size_t>(std::count_if(line.begin(), line.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    return lines;
}

// Every command kernelevo has, as `kernelevo help` lists it (worker and serve only where built).
std::vector<std::string> top_level_commands() {
    std::vector<std::string> cmds;
    bool in_list = false;
    for (const auto& l : lines_of(kernelevo({"--help"}, {{"COLUMNS", "100"}}).out)) {
        if (l == "Subcommands:") { in_list = true; continue; }
        if (in_list && l.empty()) break;
        if (in_list && l.rfind("  ", 0) == 0 && l[2] != ' ') cmds.push_back(l.substr(2, l.find(' ', 2) - 2));
    }
    return cmds;
}

TEST(CliHelpLayout, WrapAndSummaryHelpers) {
    for (const auto& l : cli::wrap_lines("a redis://[[USER]:PASSWORD@]HOST[:PORT][/DB][?prefix=NAME] b KEVO_TUNABLE(NAME, DEFAULT, V1 V2 ...) c", 30))
        EXPECT_LE(columns(l), 30u) << l;
    bool whole = false;
    for (const auto& l : cli::wrap_lines("xx KEVO_TUNABLE(NAME, DEFAULT, V1 V2 ...) yy", 45)) whole |= contains(l, "KEVO_TUNABLE(NAME, DEFAULT, V1 V2 ...)");
    EXPECT_TRUE(whole);  // a call is read (and searched for) as one thing
    EXPECT_EQ(cli::summary("Benchmark a suite (e.g. from import). More."), "Benchmark a suite (e.g. from import)");
    EXPECT_EQ(cli::summary("Search for a kernel.\nExit codes: 0"), "Search for a kernel");
}

TEST(CliHelpLayout, EveryHelpWrapsToTheTerminalAndEndsWithExamples) {
    const auto cmds = top_level_commands();
    for (const char* c : {"validate", "doctor", "llm", "search", "report", "cache", "tune", "import", "bench", "completion", "help"})
        EXPECT_NE(std::find(cmds.begin(), cmds.end(), c), cmds.end()) << c;
    std::vector<std::vector<std::string>> all = {{"--help"}, {"cache", "status", "--help"}, {"llm", "check", "--help"},
                                                 {"import", "kernelbench", "--help"}};
    for (const auto& c : cmds) all.push_back({c, "--help"});
    for (const auto& args : all) {
        std::string what;
        for (const auto& a : args) what += a + " ";
        for (const char* cols : {"60", "100"}) {
            auto r = kernelevo(args, {{"COLUMNS", cols}});
            EXPECT_EQ(r.exit_code, 0) << what << r.err;
            for (const auto& l : lines_of(r.out)) EXPECT_LE(columns(l), std::stoul(cols)) << what << "at " << cols << ": " << l;
            EXPECT_TRUE(contains(r.out, "\nExamples:\n    kernelevo ") || contains(r.out, "\nExamples:\n  ")) << what << r.out;
            EXPECT_FALSE(contains(r.out, "\x1b")) << what;  // not a terminal: no colour
            EXPECT_FALSE(contains(r.out, "{false}")) << what;
        }
    }
    // The command list: one line per command, its first sentence (no continuation lines).
    auto r = kernelevo({"--help"}, {{"COLUMNS", "100"}});
    bool in_list = false;
    for (const auto& l : lines_of(r.out)) {
        if (l == "Subcommands:") { in_list = true; continue; }
        if (in_list && l.empty()) break;
        if (in_list) EXPECT_NE(l[2], ' ') << "a summary on more than one line: " << l;
    }
}

TEST(CliHelpLayout, SearchOptionsAreGrouped) {
    auto r = kernelevo({"search", "--help"});
    size_t last = 0;
    for (const char* g : {"\nOptions:\n", "\nEvolution:\n", "\nLLM:\n", "\nBudget:\n", "\nValidation:\n", "\nOutput:\n", "\nExamples:\n"}) {
        const size_t at = r.out.find(g);
        ASSERT_NE(at, std::string::npos) << g << r.out;
        EXPECT_GT(at, last) << g;  // in this order
        last = at;
    }
    EXPECT_GT(r.out.find("--budget-usd"), r.out.find("\nBudget:\n"));
    EXPECT_GT(r.out.find("--islands"), r.out.find("\nEvolution:\n"));
    EXPECT_LT(r.out.find("--islands"), r.out.find("\nLLM:\n"));
}

TEST(CliErrors, ValuesOutOfRangeGetOneShortLine) {
    auto r = kernelevo({"search", "--task", "t.json", "--out", "o", "--timeout", "-1"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(contains(r.err, "kernelevo: error: --timeout: must be a number of seconds above 0, at most 604800 (a week), "
                                "not '-1'\n")) << r.err;
    EXPECT_LT(r.err.size(), 160u) << r.err;  // not a 309-digit range
    r = kernelevo({"search", "--task", "t.json", "--out", "o", "--islands", "0"});
    EXPECT_TRUE(contains(r.err, "kernelevo: error: --islands: must be between 1 and 64, not 0")) << r.err;
    r = kernelevo({"search", "--task", "t.json", "--out", "o", "--backend", "rust"});
    EXPECT_TRUE(contains(r.err, "kernelevo: error: --backend: 'rust' is not one of: cuda triton both")) << r.err;
    r = kernelevo({"search", "--task", "t.json", "--out", "o", "--timeout", "soon"});
    EXPECT_TRUE(contains(r.err, "kernelevo: error: --timeout: must be a number, not 'soon'")) << r.err;
    r = kernelevo({"validate", "--task"});
    EXPECT_TRUE(contains(r.err, "kernelevo: error: --task needs a value")) << r.err;
    for (const auto& l : lines_of(r.err)) EXPECT_TRUE(l.rfind("kernelevo: error: ", 0) == 0 || l.rfind("Run 'kernelevo help", 0) == 0) << l;
}

TEST(CliErrors, AnUnknownOptionIsTheErrorNotTheRequiredOneItHides) {
    auto r = kernelevo({"validate", "--tsk", "t.json"});
    EXPECT_EQ(r.exit_code, 2);
    const auto lines = lines_of(r.err);
    ASSERT_FALSE(lines.empty());
    EXPECT_EQ(lines[0], "kernelevo: error: '--tsk' is not an option of 'kernelevo validate'; did you mean '--task'?") << r.err;
    EXPECT_FALSE(contains(r.err, "is required")) << r.err;
}

TEST(CliErrors, UnderJsonAFailureIsAlsoJsonOnStdout) {
    for (std::vector<std::string> args : {std::vector<std::string>{"validate", "--task", "/nonexistent/task.json", "--kernel", "k.cu", "--json"},
                                          {"validate", "--json", "--tsk", "t.json"},
                                          {"report", "--state", "/nonexistent/run.db", "--json"}}) {
        auto r = kernelevo(args);
        EXPECT_EQ(r.exit_code, 2) << r.err;
        json j = json::parse(r.out, nullptr, false);
        ASSERT_FALSE(j.is_discarded()) << r.out;
        EXPECT_EQ(j.value("exit_code", 0), 2);
        EXPECT_FALSE(j.value("error", "").empty()) << r.out;
        EXPECT_TRUE(contains(r.err, "kernelevo: error: " + j.value("error", "").substr(0, 20))) << r.err;
    }
    auto r = kernelevo({"validate", "--task", "/nonexistent/task.json", "--kernel", "k.cu"});  // without --json: nothing on stdout
    EXPECT_EQ(r.out, "");
}

TEST(CliErrors, NoColourWithoutATerminalOrWithNoColor) {
    for (std::map<std::string, std::string> env : {std::map<std::string, std::string>{}, {{"NO_COLOR", "1"}}}) {
        auto r = kernelevo({"validate", "--tsk", "t.json"}, env);
        EXPECT_FALSE(contains(r.out + r.err, "\x1b")) << r.err;
        r = kernelevo({"search", "--help"}, env);
        EXPECT_FALSE(contains(r.out + r.err, "\x1b"));
    }
}

// On a terminal (a pty from script(1)): a red "error:" and bold headings, unless NO_COLOR is set.
TEST(CliErrors, ColourOnATerminalUnlessNoColor) {
    if (!fs::exists("/usr/bin/script")) GTEST_SKIP() << "no script(1) to give kernelevo a terminal";
    auto on_tty = [](const std::string& args, const std::string& no_color) {
        ProcessOptions o;
        o.argv = {"/usr/bin/script", "-qc", shell_quote(kExe) + " " + args, "/dev/null"};
        o.env = {{"NO_COLOR", no_color}, {"TERM", "xterm"}};
        o.timeout_s = 60;
        return run_process(o).out;
    };
    EXPECT_TRUE(contains(on_tty("validate --tsk t.json", ""), "kernelevo: \x1b[1;31merror:\x1b[0m '--tsk'"));
    EXPECT_TRUE(contains(on_tty("search --help", ""), "\x1b[1mOptions:\x1b[0m"));
    EXPECT_FALSE(contains(on_tty("validate --tsk t.json", "1"), "\x1b"));
    EXPECT_FALSE(contains(on_tty("search --help", "1"), "\x1b"));
}

// The bash completion, sourced in a real bash; COMP_WORDS/COMP_CWORD as bash sets them on <TAB>.
TEST(CliCompletion, BashCompletesCommandsOptionsAndValues) {
    if (!fs::exists("/bin/bash")) GTEST_SKIP() << "no bash";
    TempDir dir("kevo-completion");
    auto r = kernelevo({"completion", "bash"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    write_file_atomic(dir.path() / "kernelevo.bash", r.out);
    auto complete = [&](const std::string& words, int cword) {
        ProcessOptions o;
        o.argv = {"/bin/bash", "--norc", "-c",
                  "source " + shell_quote((dir.path() / "kernelevo.bash").string()) + " && COMP_WORDS=(" + words +
                      ") && COMP_CWORD=" + std::to_string(cword) + " && _kernelevo && printf '%s\\n' \"${COMPREPLY[@]}\""};
        o.timeout_s = 30;
        ProcessResult p = run_process(o);
        EXPECT_EQ(p.exit_code, 0) << p.err;
        return lines_of(p.out);
    };
    EXPECT_EQ(complete("kernelevo sea", 1), std::vector<std::string>{"search"});
    auto llm = complete("kernelevo search --llm-", 2);
    for (const char* o : {"--llm-url", "--llm-batch", "--llm-timeout", "--llm-price"})
        EXPECT_NE(std::find(llm.begin(), llm.end(), o), llm.end()) << o;
    for (const auto& o : llm) EXPECT_EQ(o.rfind("--llm-", 0), 0u) << o;
    EXPECT_EQ(complete("kernelevo search --backend t", 3), std::vector<std::string>{"triton"});
    auto cache = complete("kernelevo cache sta", 2);
    std::sort(cache.begin(), cache.end());
    EXPECT_EQ(cache, (std::vector<std::string>{"stats", "status"}));
    EXPECT_EQ(complete("kernelevo --sandbox r", 2), std::vector<std::string>{"require"});
    auto files = complete("kernelevo search --task " + shell_quote((dir.path() / "kern").string()), 3);
    EXPECT_EQ(files, std::vector<std::string>{(dir.path() / "kernelevo.bash").string()});

    // Issue 40: the positional's choices, --arch's architectures, help's own command tree, folders for
    // folder options.
    EXPECT_EQ(complete("kernelevo completion ''", 2), (std::vector<std::string>{"bash", "zsh"}));
    const auto archs = complete("kernelevo validate --arch sm_9", 3);
    EXPECT_NE(std::find(archs.begin(), archs.end(), "sm_90"), archs.end()) << archs.size();
    auto help_cache = complete("kernelevo help cache st", 3);
    std::sort(help_cache.begin(), help_cache.end());
    EXPECT_EQ(help_cache, (std::vector<std::string>{"stats", "status"}));
    fs::create_directories(dir.path() / "kernels.d");
    EXPECT_EQ(complete("kernelevo import kernelbench --out " + shell_quote((dir.path() / "kern").string()), 4),
              std::vector<std::string>{(dir.path() / "kernels.d").string()});
    EXPECT_EQ(complete("kernelevo cache status --build-dir " + shell_quote((dir.path() / "kern").string()), 4),
              std::vector<std::string>{(dir.path() / "kernels.d").string()});

    r = kernelevo({"completion", "zsh"});
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_EQ(r.out.rfind("#compdef kernelevo\n", 0), 0u) << r.out;  // native: also usable as _kernelevo on $fpath
    EXPECT_FALSE(contains(r.out, "bashcompinit")) << r.out;
    EXPECT_TRUE(contains(r.out, "_describe -t commands")) << r.out;
    EXPECT_EQ(kernelevo({"completion", "fish"}).exit_code, 2);
    if (!fs::exists("/usr/bin/zsh")) GTEST_SKIP() << "no zsh to try the zsh script in";
    write_file_atomic(dir.path() / "kernelevo.zsh", r.out);
    ProcessOptions o;
    o.env = {{"HOME", dir.path().string()}};
    o.timeout_s = 60;
    ProcessResult z;
    // And a real interactive zsh on a pty (zsh/zpty): <TAB> after each word, waiting for what it completes to.
    write_file_atomic(dir.path() / "tab.zsh",
                      "zmodload zsh/zpty\n"
                      "zpty z 'zsh -f -i'\n"
                      "zpty -w z 'autoload -U compinit && compinit -u && source " + (dir.path() / "kernelevo.zsh").string() + " && PS1=\"P> \"'\n"
                      "zpty -r z out '*P> *'\n"
                      "zpty -w -n z $'kernelevo sea\\t'; zpty -r z out '*search*' && print searched\n"
                      "zpty -w -n z $'--llm-ur\\t'; zpty -r z out '*--llm-url*' && print llm-url\n"
                      "zpty -w -n z $'--backend t\\t'; zpty -r z out '*triton*' && print triton\n"
                      "zpty -w -n z $'\\C-u'; zpty -w -n z $'kernelevo help cache sta\\t'; zpty -r z out '*stat*' && print help-cache\n"
                      "zpty -w -n z $'\\C-u'; zpty -w -n z $'kernelevo completion z\\t'; zpty -r z out '*zsh*' && print zsh\n"
                      "zpty -d z\n");
    o.argv = {"/usr/bin/zsh", "-f", (dir.path() / "tab.zsh").string()};
    z = run_process(o);
    EXPECT_EQ(z.out, "searched\nllm-url\ntriton\nhelp-cache\nzsh\n") << z.err;
}

// Issue 40: --version says what this build has, a line each.
TEST(CliVersion, VersionListsTheBuildsDetails) {
    auto r = kernelevo({"--version"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out.rfind("kernelevo 0.", 0), 0u) << r.out;
    for (const char* line : {"\n  git commit:    ", "\n  CUDA toolkit:  ", "\n  LibTorch:      ", "\n  Redis:         ", "\n  build type:    "})
        EXPECT_TRUE(contains(r.out, line)) << line << "\n" << r.out;
}

// ---- --quiet / --verbose -------------------------------------------------------------------------

TEST(CliVerbosity, QuietAndVerboseAreOfferedWhereLongOperationsPrintAndExcludeEachOther) {
    for (std::vector<std::string> cmd : {std::vector<std::string>{"validate"}, {"search"}, {"cache", "add"}, {"cache", "prune"}}) {
        const bool has_verbose = cmd[0] != "cache";  // cache add/prune have nothing more to say
        cmd.push_back("--help");
        auto r = kernelevo(cmd);
        EXPECT_TRUE(contains(r.out, "-q,--quiet")) << r.out;
        EXPECT_EQ(contains(r.out, "-v,--verbose"), has_verbose) << r.out;
    }
    auto r = kernelevo({"validate", "--task", (kData / "gelu_bias" / "task.json").string(), "--kernel", "k.cu", "-q", "-v"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(contains(r.err, "excludes")) << r.err;
}

TEST(CliVerbosity, QuietValidatePrintsOnlyTheResult) {
    const std::string task = (kData / "gelu_bias" / "task.json").string(), kernel = (kData / "gelu_bias" / "kernels" / "good.cu").string();
    auto normal = kernelevo({"validate", "--task", task, "--kernel", kernel, "--no-timing"}, {}, 600);
    auto quiet = kernelevo({"validate", "--task", task, "--kernel", kernel, "--no-timing", "--quiet"}, {}, 600);
    EXPECT_EQ(normal.exit_code, quiet.exit_code) << normal.err << quiet.err;
    EXPECT_TRUE(contains(normal.err, "kernelevo: compiling")) << normal.err;
    EXPECT_FALSE(contains(quiet.err, "kernelevo: compiling")) << quiet.err;
    EXPECT_EQ(normal.out, quiet.out);  // the result itself is the same
}

// ---- --arch the toolkit cannot compile -------------------------------------------------------------

TEST(CliArch, AnArchitectureTheToolkitCannotCompileIsASetupError) {
    const std::string task = (kData / "gelu_bias" / "task.json").string(), kernel = (kData / "gelu_bias" / "kernels" / "good.cu").string();
    TempDir dir;
    for (const char* arch : {"sm_20", "89a"}) {
        SCOPED_TRACE(arch);
        auto v = kernelevo({"validate", "--task", task, "--kernel", kernel, "--arch", arch, "--json"});
        EXPECT_EQ(v.exit_code, 2) << v.out << v.err;
        // No candidate result (nothing was compiled): under --json, only the error as JSON.
        EXPECT_EQ(json::parse(v.out, nullptr, false), (json{{"error", json::parse(v.out, nullptr, false).value("error", "")}, {"exit_code", 2}})) << v.out;
        EXPECT_TRUE(contains(v.out, "cannot compile for it")) << v.out;
        EXPECT_TRUE(contains(v.err, "cannot compile for it; it supports ")) << v.err;
        EXPECT_TRUE(contains(v.err, "sm_90")) << v.err;

        auto s = kernelevo({"search", "--task", task, "--out", (dir.path() / "out").string(), "--state",
                            (dir.path() / "s.db").string(), "--model", "m", "--arch", arch});
        EXPECT_EQ(s.exit_code, 2) << s.err;
        EXPECT_TRUE(contains(s.err, "cannot compile for it")) << s.err;
        EXPECT_FALSE(fs::exists(dir.path() / "s.db"));

        auto c = kernelevo({"cache", "add", "--task", task, "--kernel", kernel, "--arch", arch, "--cache-dir",
                            (dir.path() / "kernels").string()});
        EXPECT_EQ(c.exit_code, 2) << c.err;
        EXPECT_TRUE(contains(c.err, "cannot compile for it")) << c.err;
    }
    // Spellings the toolkit does support pass the check (the arch-specific sm_90a included).
    EXPECT_TRUE(toolkit_supports_arch("sm_90", CompileOptions{}));
    EXPECT_TRUE(toolkit_supports_arch("sm_90a", CompileOptions{}));
    EXPECT_FALSE(toolkit_supports_arch("sm_20", CompileOptions{}));
    auto listed = toolkit_arches(CompileOptions{});
    EXPECT_NE(std::find(listed.begin(), listed.end(), "sm_90"), listed.end());
}

// ---- search: no GPU, unreachable LLM -------------------------------------------------------------

TEST(CliSearch, WithoutAGpuExitsTwoBeforeAnyRequestAndBeforeCreatingState) {
    if (have_gpu()) GTEST_SKIP() << "this machine has a GPU";
    llm::test::LoopbackServer server;
    TempDir dir;
    const fs::path state = dir.path() / "state.db", out = dir.path() / "kernels";
    auto t0 = std::chrono::steady_clock::now();
    auto r = kernelevo({"search", "--task", (kData / "gelu_bias" / "task.json").string(), "--out", out.string(), "--state",
                        state.string(), "--llm-url", server.base_url(), "--model", "m", "--json"},
                       {{"KERNELEVO_API_KEY", "sk-test-key"}});
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 30.0);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_TRUE(contains(r.err, "validates every candidate on the local GPU")) << r.err;
    EXPECT_TRUE(contains(r.err, "Nothing was sent to the LLM and no search state was created")) << r.err;
    EXPECT_FALSE(contains(r.err, "run again")) << r.err;
    EXPECT_TRUE(server.requests().empty());
    EXPECT_FALSE(fs::exists(state));
    EXPECT_FALSE(fs::exists(out));
}

TEST(CliSearch, ABadLlmConfigurationIsRejectedBeforeTheStateIsCreated) {
    TempDir dir;
    const fs::path state = dir.path() / "state.db";
    for (std::vector<std::string> bad : {std::vector<std::string>{"--llm-url", "ftp://example.org", "--model", "m"},
                                         {"--llm-url", "http://127.0.0.1:9/v1"}}) {  // no --model
        std::vector<std::string> args = {"search", "--task", (kData / "gelu_bias" / "task.json").string(), "--out",
                                         (dir.path() / "kernels").string(), "--state", state.string()};
        args.insert(args.end(), bad.begin(), bad.end());
        auto r = kernelevo(args);
        EXPECT_EQ(r.exit_code, 2) << r.err;
        EXPECT_FALSE(fs::exists(state)) << r.err;
    }
}

TEST(CliLlm, AnUnreachableUrlFailsWithinTheConnectTimeoutWithoutRetries) {
    std::string url;
    {
        llm::test::LoopbackServer closed;  // a port that was just free
        url = closed.base_url();
    }
    auto t0 = std::chrono::steady_clock::now();
    auto r = kernelevo({"llm", "check", "--llm-url", url, "--model", "m", "--llm-attempts", "6", "--llm-connect-timeout", "5"});
    double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_LT(took, 5.0);
    EXPECT_TRUE(contains(r.err, "not retried")) << r.err;
    EXPECT_FALSE(contains(r.err, "retrying")) << r.err;
}

TEST(CliLlm, CheckJsonReportsEveryModel) {
    llm::test::LoopbackServer server;
    server.push({200, {}, llm::test::chat_body("pong", "stop", 12, 1, 0.000042, "vendor/a-2025")});
    server.push({404, {}, R"({"error":{"message":"no such model"}})"});
    auto r = kernelevo({"llm", "check", "--llm-url", server.base_url(), "--model", "vendor/a", "--model", "vendor/b", "--json"},
                       {{"KERNELEVO_API_KEY", "sk-test-Zq8uV3rT5yW7"}});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    json j = json::parse(r.out);  // stdout is exactly one JSON object
    EXPECT_EQ(j["url"], server.base_url());
    EXPECT_EQ(j["key_source"], "KERNELEVO_API_KEY");
    EXPECT_EQ(j["ok"], false);
    ASSERT_EQ(j["models"].size(), 2u);
    EXPECT_EQ(j["models"][0]["model"], "vendor/a");
    EXPECT_EQ(j["models"][0]["status"], "ok");
    EXPECT_EQ(j["models"][0]["answered_by"], "vendor/a-2025");
    EXPECT_EQ(j["models"][0]["answer"], "pong");
    EXPECT_EQ(j["models"][0]["prompt_tokens"], 12);
    EXPECT_DOUBLE_EQ(j["models"][0]["cost_usd"].get<double>(), 0.000042);
    EXPECT_GT(j["models"][0]["latency_s"].get<double>(), 0);
    EXPECT_EQ(j["models"][1]["status"], "failed");
    EXPECT_TRUE(contains(j["models"][1]["error"].get<std::string>(), "404")) << j.dump(2);
    EXPECT_FALSE(contains(r.out + r.err, "sk-test-Zq8uV3rT5yW7"));
}

// ---- report ----------------------------------------------------------------------------------

// A small finished run written through the store API: 2 islands, 3 generations, a migration at
// generation 2 and a restart of island 1 at generation 2.
void write_run(const fs::path& file) {
    auto st = store::open_store(file.string());
    st->put_meta("task_name", "gelu_bias");
    st->put_meta("structure", json{{"arch", "sm_90"}, {"islands", 2}, {"children", 1}, {"seed", 0}});
    st->put_meta("stop_reason", "generations");
    st->put_meta("elapsed_s", 75.0);
    store::LlmCall call;
    call.key = "c1";
    call.kind = "seed";
    call.request = json::object();
    call.reply = "```cuda\n...\n```";
    call.model = "vendor/m";
    call.prompt_tokens = 1000;
    call.completion_tokens = 500;
    call.cost_usd = 0.01;
    st->add_llm_call(call);
    int n = 0;
    auto add = [&](int gen, int island, const std::string& status, double speedup, const std::string& origin) {
        store::Program p;
        p.key = "g" + std::to_string(gen) + ".i" + std::to_string(island) + "." + std::to_string(n++);
        p.generation = gen;
        p.island = island;
        p.origin = origin;
        p.source = "// kernel, with \"quotes\", commas\n";
        p.norm_hash = "h" + std::to_string(n);
        p.status = store::parse_program_status(status);
        p.speedup = speedup;
        p.feedback = status == "ok" ? "" : "error: x";
        p.details = status == "ok" ? json{{"kernel_us", 10.0 / speedup}, {"reference_us", 10.0}} : json::object();
        st->put_program(p);
    };
    add(0, 0, "ok", 1.0, "seed");
    add(0, 1, "compile_error", 0, "seed");
    add(0, 1, "ok", 1.1, "repair");
    add(1, 0, "ok", 1.4, "mutation");
    add(1, 1, "mismatch", 0, "mutation");
    add(2, 0, "ok", 1.9, "mutation");
    add(2, 1, "ok", 1.2, "mutation");
    auto gen = [](int g, double best, int64_t tokens) {
        store::Generation x;
        x.generation = g;
        x.best_speedup = best;
        x.tokens = tokens;
        return x;
    };
    st->commit_generation(gen(0, 1.1, 1500), {}, {});
    st->commit_generation(gen(1, 1.4, 3000), {}, {});
    st->commit_generation(gen(2, 1.9, 4500), {},
                          {{2, "migration", {{"from", 0}, {"to", 1}, {"programs", {6}}}},
                           {2, "restart", {{"island", 1}, {"restarts", 1}}}});
}

std::string sha_of(const fs::path& f) { return sha256_hex(read_file(f)); }

TEST(CliReport, NeverAltersAnEmptyOrForeignSqliteFile) {
    TempDir dir;
    const fs::path empty = dir.path() / "empty.db", foreign = dir.path() / "foreign.db";
    write_file_atomic(empty, "");
    {
        sqlite3* db = nullptr;
        ASSERT_EQ(sqlite3_open(foreign.c_str(), &db), SQLITE_OK);
        sqlite3_exec(db, "CREATE TABLE notes(t TEXT); INSERT INTO notes VALUES('mine');", nullptr, nullptr, nullptr);
        sqlite3_close(db);
    }
    const std::string foreign_sha = sha_of(foreign);
    for (const fs::path& f : {empty, foreign}) {
        auto r = kernelevo({"report", "--state", f.string(), "--json"});
        EXPECT_EQ(r.exit_code, 2) << r.out;
        EXPECT_TRUE(contains(r.err, "not a KernelEvo state")) << r.err;  // "...: it has tables notes", "an empty file, ..."
        EXPECT_EQ(json::parse(r.out, nullptr, false).value("exit_code", 0), 2) << r.out;  // under --json: only the error
        EXPECT_TRUE(contains(r.out, "not a KernelEvo state")) << r.out;
    }
    EXPECT_EQ(fs::file_size(empty), 0u);
    EXPECT_EQ(sha_of(foreign), foreign_sha);
    for (const char* suffix : {"-wal", "-shm", "-journal"}) {
        EXPECT_FALSE(fs::exists(empty.string() + suffix)) << suffix;
        EXPECT_FALSE(fs::exists(foreign.string() + suffix)) << suffix;
    }
    auto r = kernelevo({"report", "--state", (dir.path() / "none.db").string()});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(contains(r.err, "no search state at")) << r.err;
    EXPECT_FALSE(fs::exists(dir.path() / "none.db"));
}

TEST(CliReport, ReadsARunWithoutWritingToIt) {
    TempDir dir;
    const fs::path state = dir.path() / "run.db";
    write_run(state);
    const std::string before = sha_of(state);
    auto r = kernelevo({"report", "--state", state.string()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(contains(r.out, "Task gelu_bias (sm_90), 3 generation(s) committed, stopped: generations")) << r.out;
    EXPECT_TRUE(contains(r.out, "Migrations: 1; restarts: 1 (island 1 at generation 2)")) << r.out;
    EXPECT_EQ(sha_of(state), before);
    for (const char* suffix : {"-wal", "-shm"}) EXPECT_FALSE(fs::exists(state.string() + suffix)) << suffix;

    // While a search has the state open (and writes to its WAL), the report sees what it committed.
    auto live = store::open_store(state.string());
    store::Generation g;
    g.generation = 3;
    g.best_speedup = 2.5;
    live->commit_generation(g, {}, {});
    r = kernelevo({"report", "--state", state.string(), "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(json::parse(r.out)["generations"].size(), 4u);
}

TEST(CliReport, JsonAndCandidateExports) {
    TempDir dir;
    const fs::path state = dir.path() / "run.db";
    write_run(state);
    auto r = kernelevo({"report", "--state", state.string(), "--json", "--candidates", (dir.path() / "c.csv").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    json j = json::parse(r.out);
    EXPECT_EQ(j["task"], "gelu_bias");
    EXPECT_EQ(j["arch"], "sm_90");
    EXPECT_EQ(j["islands"], 2);
    EXPECT_EQ(j["stop_reason"], "generations");
    EXPECT_EQ(j["candidates"]["ok"], 5);
    EXPECT_EQ(j["candidates"]["failed"], 2);
    EXPECT_EQ(j["candidates"]["repairs"], 1);
    EXPECT_EQ(j["llm"]["requests"], 1);
    EXPECT_EQ(j["llm"]["prompt_tokens"], 1000);
    EXPECT_DOUBLE_EQ(j["best"]["speedup"].get<double>(), 1.9);
    EXPECT_EQ(j["best"]["generation"], 2);
    ASSERT_EQ(j["generations"].size(), 3u);
    EXPECT_EQ(j["generations"][2]["tokens"], 4500);
    ASSERT_EQ(j["migrations"].size(), 1u);
    EXPECT_EQ(j["migrations"][0]["from"], 0);
    ASSERT_EQ(j["restarts"].size(), 1u);
    EXPECT_EQ(j["restarts"][0]["island"], 1);

    std::string csv = read_file(dir.path() / "c.csv");
    std::istringstream lines(csv);
    std::string header, line;
    std::getline(lines, header);
    EXPECT_EQ(header, "id,generation,island,origin,attempt,parent_id,status,speedup,kernel_us,reference_us,key,norm_hash,llm_call_id,created");
    int rows = 0;
    while (std::getline(lines, line)) ++rows;
    EXPECT_EQ(rows, 7);
    EXPECT_TRUE(contains(csv, ",compile_error,")) << csv;

    r = kernelevo({"report", "--state", state.string(), "--candidates", (dir.path() / "c.json").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    json c = json::parse(read_file(dir.path() / "c.json"));
    ASSERT_EQ(c.size(), 7u);
    EXPECT_EQ(c[0]["status"], "ok");
    EXPECT_EQ(c[0]["source"], "// kernel, with \"quotes\", commas\n");
    EXPECT_EQ(c[1]["feedback"], "error: x");
    EXPECT_DOUBLE_EQ(c[5]["kernel_us"].get<double>(), 10.0 / 1.9);

    r = kernelevo({"report", "--state", state.string(), "--candidates", (dir.path() / "c.txt").string()});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(contains(r.err, ".csv, .json")) << r.err;
}

TEST(CliReport, PlotHasALegendIslandColoursAndMarks) {
    TempDir dir;
    const fs::path state = dir.path() / "run.db", svg = dir.path() / "run.svg";
    write_run(state);
    auto r = kernelevo({"report", "--state", state.string(), "--plot", svg.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::string s = read_file(svg);
    EXPECT_TRUE(contains(s, "class='legend'")) << s;
    for (const char* label : {">island 0<", ">island 1<", ">best so far<", ">migration<", ">restart (island colour)<"})
        EXPECT_TRUE(contains(s, label)) << label;
    // One colour per island: the dots of island 0 and island 1 differ.
    std::regex dot("class='candidate'[^>]*fill='(#[0-9a-f]{6})'");
    std::set<std::string> colours;
    for (auto it = std::sregex_iterator(s.begin(), s.end(), dot); it != std::sregex_iterator(); ++it) colours.insert((*it)[1]);
    EXPECT_EQ(colours.size(), 2u) << s;
    EXPECT_EQ(std::count(s.begin(), s.end(), '\n') > 0, true);
    EXPECT_TRUE(contains(s, "class='migration'")) << s;
    EXPECT_TRUE(contains(s, "class='restart'")) << s;
    // Generation ticks are whole numbers, each shown once.
    std::regex tick("class='xtick'[^>]*>([^<]*)<");
    std::vector<std::string> gen_ticks;
    for (auto it = std::sregex_iterator(s.begin(), s.end(), tick); it != std::sregex_iterator(); ++it) gen_ticks.push_back((*it)[1]);
    ASSERT_GE(gen_ticks.size(), 3u);
    EXPECT_EQ(std::vector<std::string>(gen_ticks.begin(), gen_ticks.begin() + 3), (std::vector<std::string>{"0", "1", "2"}));
}

TEST(CliReport, ShortAndEmptyRunsPlotSanely) {
    TempDir dir;
    // A run that committed only generation 0: the generation axis reads 0, 1 (no repeated labels).
    const fs::path one = dir.path() / "one.db";
    {
        auto st = store::open_store(one.string());
        st->put_meta("task_name", "t");
        store::Program p;
        p.key = "g0.seed.a0";
        p.status = store::ProgramStatus::ok;
        p.speedup = 1.3;
        p.norm_hash = "h";
        st->put_program(p);
        store::Generation g;
        g.best_speedup = 1.3;
        st->commit_generation(g, {}, {});
    }
    auto r = kernelevo({"report", "--state", one.string(), "--plot", (dir.path() / "one.svg").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::string s = read_file(dir.path() / "one.svg");
    std::regex tick("<text class='xtick'[^>]*>([^<]*)<");
    std::vector<std::string> labels;
    for (auto it = std::sregex_iterator(s.begin(), s.end(), tick); it != std::sregex_iterator(); ++it) labels.push_back((*it)[1]);
    ASSERT_GE(labels.size(), 2u) << s;
    EXPECT_EQ(labels[0], "0");
    EXPECT_EQ(labels[1], "1");
    EXPECT_FALSE(contains(s, "no data")) << s;

    // A state with nothing committed says so instead of drawing an empty frame.
    const fs::path none = dir.path() / "none.db";
    store::open_store(none.string())->put_meta("task_name", "t");
    r = kernelevo({"report", "--state", none.string(), "--plot", (dir.path() / "none.html").string(), "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string page = read_file(dir.path() / "none.html");
    EXPECT_TRUE(contains(page, "no candidate was evaluated")) << page;  // a sentence, not an empty chart
    EXPECT_FALSE(contains(page, "<canvas")) << page;
    EXPECT_FALSE(contains(page, "uPlot")) << page;
    json j = json::parse(r.out);
    EXPECT_TRUE(j["best"].is_null());
    EXPECT_TRUE(j["generations"].empty());
}

// ---- files the user names: --task, --kernel ------------------------------------------------------

// Runs `args` with a deadline far below the test's: a FIFO or a device must be refused, not read.
ProcessResult quick(std::vector<std::string> args) {
    auto t0 = std::chrono::steady_clock::now();
    ProcessResult r = kernelevo(std::move(args), {}, 20);
    EXPECT_FALSE(r.timed_out) << "blocked on a file it should have refused";
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 15.0);
    return r;
}

TEST(CliInputFiles, ATaskThatIsADirectoryAFifoADeviceOrHugeIsRefusedWithTheReason) {
    TempDir dir("kevo-cli-inputs");
    const std::string task = (kData / "gelu_bias" / "task.json").string();
    const std::string good_kernel = (kData / "gelu_bias" / "kernels" / "good.cu").string();
    const fs::path fifo = dir.path() / "task.fifo";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    const fs::path big = dir.path() / "big.json";
    write_file_atomic(big, "{\"name\": \"" + std::string(17u << 20, 'x') + "\"}");
    const fs::path empty_dir = dir.path() / "empty";
    fs::create_directories(empty_dir);

    struct Case {
        std::string task, expect;
    };
    const std::vector<Case> cases = {
        {(kData / "gelu_bias").string(), "is a directory; give its task.json (" + (kData / "gelu_bias" / "task.json").string() + ")"},
        {empty_dir.string(), "is a directory, not a task file (and it holds no task.json)"},
        {fifo.string(), "is a FIFO (named pipe), not a task file"},
        {"/dev/zero", "is a character device, not a task file"},
        {big.string(), "is too large for a task file (17.0 MB; at most 16.0 MB)"},
    };
    for (const auto& c : cases)
        for (std::vector<std::string> args : {std::vector<std::string>{"cache", "hash", "--task", c.task},
                                              std::vector<std::string>{"validate", "--task", c.task, "--kernel", good_kernel}}) {
            SCOPED_TRACE(args[0] + " --task " + c.task);
            ProcessResult r = quick(args);
            EXPECT_EQ(r.exit_code, 2) << r.err;
            EXPECT_TRUE(contains(r.err, "kernelevo: error: " + c.task + ": ")) << r.err;
            EXPECT_TRUE(contains(r.err, c.expect)) << r.err;
            EXPECT_FALSE(contains(r.err, "internal error")) << r.err;
            EXPECT_FALSE(contains(r.err, "not valid JSON")) << r.err;
        }
}

TEST(CliInputFiles, AKernelThatIsADirectoryAFifoADeviceOrHugeIsRefusedWithTheReason) {
    TempDir dir("kevo-cli-inputs");
    const std::string task = (kData / "gelu_bias" / "task.json").string();
    const fs::path fifo = dir.path() / "kernel.cu";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    const fs::path big = dir.path() / "big.cu";
    write_file_atomic(big, std::string(17u << 20, '/'));
    const std::vector<std::pair<std::string, std::string>> cases = {
        {dir.path().string(), "--kernel: " + dir.path().string() + " is a directory, not a kernel file (.cu, or a Triton .py)"},
        {fifo.string(), "--kernel: " + fifo.string() + " is a FIFO (named pipe), not a kernel file"},
        {"/dev/zero", "--kernel: /dev/zero is a character device, not a kernel file"},
        {big.string(), "--kernel: " + big.string() + " is too large for a kernel file (17.0 MB; at most 16.0 MB)"},
        {(dir.path() / "none.cu").string(), "--kernel: cannot read " + (dir.path() / "none.cu").string() + ": No such file"},
    };
    for (const auto& [kernel, expect] : cases)
        for (std::vector<std::string> args :
             {std::vector<std::string>{"validate", "--task", task, "--kernel", kernel},
              std::vector<std::string>{"cache", "add", "--task", task, "--kernel", kernel, "--arch", "sm_90", "--cache-dir",
                                       (dir.path() / "cache").string(), "--unvalidated"}}) {
            SCOPED_TRACE(args[0] + " --kernel " + kernel);
            ProcessResult r = quick(args);
            EXPECT_EQ(r.exit_code, 2) << r.err;
            EXPECT_TRUE(contains(r.err, "kernelevo: error: " + expect)) << r.err;
        }
    EXPECT_FALSE(fs::exists(dir.path() / "cache"));
}

// ---- cache status / remove / prune ----------------------------------------------------------------

const char* kKernel = "#include <kernelevo/abi.h>\nextern \"C\" int kevo_forward(const kevo_tensor*, int, kevo_tensor*, int, cudaStream_t) { return 0; }\n";

class CliCache : public ::testing::Test {
protected:
    void SetUp() override {
        write_file_atomic(dir.path() / "ref.cpp", "at::Tensor scale(const at::Tensor& x) { return x * 2; }\n");
        write_task(2);
        cache_dir = dir.path() / "kernels";
    }
    void write_task(int n) {
        write_file_atomic(dir.path() / "task.json", R"({"name": "scale", "reference": {"source": "ref.cpp"},
            "inputs": [{"name": "x", "dtype": "float32", "shape": ["N"]}],
            "outputs": [{"name": "y", "dtype": "float32", "shape": ["N"]}], "shapes": [{"N": )" + std::to_string(1000 + n) + "}]}");
    }
    void store(const std::string& function, const std::string& arch, bool validated = true) {
        Task t = load_task(task_file());
        cache::EntryMeta m;
        m.function = function;
        m.arch = arch;
        m.task_hash = t.hash();
        m.reference_hash = t.reference_hash();
        m.origin = "manual";
        m.validated = validated;
        m.speedup = validated ? 2.0 : 0;
        cache::store(cache_dir, kKernel, m);
    }
    std::string task_file() const { return (dir.path() / "task.json").string(); }
    TempDir dir;
    fs::path cache_dir;
};

// A metadata file of binary bytes, or one whose text holds terminal escapes, and a cache folder
// whose name is not UTF-8: an invalid entry with its reason, JSON that parses, escapes never raw.
TEST_F(CliCache, StatusReportsABinaryMetadataFileAsAnInvalidEntry) {
    const fs::path odd = dir.path() / "kernels-\xff\xfe";   // a folder name that is not UTF-8
    cache_dir = odd;
    store("scale", "sm_90");
    write_file_atomic(odd / "scale" / "sm_80.cu", kKernel);
    write_file_atomic(odd / "scale" / "sm_80.json", std::string("\xff\xfe\x00\x01\x1b[2J\x80\x81binary", 14));
    cache::EntryMeta m;   // valid JSON whose text holds escapes (a file anyone could have committed)
    m.function = "scale";
    m.arch = "sm_75";
    m.origin = "\x1b]0;pwned\x07manual";
    m.date = "\x1b[2J2026";
    cache::store(odd, kKernel, m);

    auto r = kernelevo({"cache", "status", "--cache-dir", odd.string(), "--json"});
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;   // an invalid entry is a problem, not a crash
    EXPECT_FALSE(contains(r.err, "internal error")) << r.err;
    json j = json::parse(r.out, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << r.out;
    ASSERT_EQ(j["entries"].size(), 3u) << j.dump(2);
    for (const auto& e : j["entries"]) {
        if (e["arch"] != "sm_80") continue;
        EXPECT_EQ(e["state"], "invalid");
        EXPECT_TRUE(contains(e["reason"].get<std::string>(), "unreadable metadata")) << e.dump();
    }

    r = kernelevo({"cache", "status", "--cache-dir", odd.string(), "--task", task_file()});
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_TRUE(std::regex_search(r.out, std::regex("scale +sm_80 +invalid"))) << r.out;
    EXPECT_TRUE(contains(r.out, "unreadable metadata")) << r.out;
    for (const char* raw : {"\x1b", "\x07", "\x80"}) EXPECT_FALSE(contains(r.out + r.err, raw)) << r.out;
    EXPECT_TRUE(contains(r.out, "\\x1b]0;pwned\\x07manual")) << r.out;
}

TEST_F(CliCache, StatusMarksUnvalidatedEntries) {
    auto add = kernelevo({"cache", "add", "--task", task_file(), "--kernel", (kData / "gelu_bias" / "kernels" / "good.cu").string(),
                          "--arch", "sm_90", "--cache-dir", cache_dir.string(), "--unvalidated"});
    ASSERT_EQ(add.exit_code, 0) << add.err;
    store("scale", "sm_80");
    auto r = kernelevo({"cache", "status", "--cache-dir", cache_dir.string(), "--task", task_file()});
    EXPECT_EQ(r.exit_code, 0) << r.out;
    EXPECT_TRUE(std::regex_search(r.out, std::regex("scale +sm_90 +unval\\. .*UNVALIDATED"))) << r.out;
    EXPECT_TRUE(std::regex_search(r.out, std::regex("scale +sm_80 +valid "))) << r.out;
    EXPECT_TRUE(contains(r.out, "never checked against the reference")) << r.out;
    json j = json::parse(kernelevo({"cache", "status", "--cache-dir", cache_dir.string(), "--json"}).out);
    for (const auto& e : j["entries"]) EXPECT_EQ(e["validated"], e["arch"] == "sm_80") << e.dump();
}

TEST_F(CliCache, RemoveDeletesEntriesAndSaysWhatIsNotThere) {
    store("scale", "sm_80");
    store("scale", "sm_90");
    auto r = kernelevo({"cache", "remove", "--cache-dir", cache_dir.string(), "--function", "scale", "--arch", "80", "--dry-run"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(contains(r.out, "would remove")) << r.out;
    EXPECT_TRUE(fs::exists(cache_dir / "scale" / "sm_80.cu"));

    r = kernelevo({"cache", "remove", "--cache-dir", cache_dir.string(), "--function", "scale", "--arch", "sm_80"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_FALSE(fs::exists(cache_dir / "scale" / "sm_80.cu"));
    EXPECT_FALSE(fs::exists(cache_dir / "scale" / "sm_80.json"));
    EXPECT_TRUE(fs::exists(cache_dir / "scale" / "sm_90.cu"));

    r = kernelevo({"cache", "remove", "--cache-dir", cache_dir.string(), "--function", "scale", "--arch", "sm_80"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(contains(r.err, "has no scale kernel for sm_80 (it has sm_90)")) << r.err;
    r = kernelevo({"cache", "remove", "--cache-dir", cache_dir.string(), "--function", "scael"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(contains(r.err, "did you mean 'scale'?")) << r.err;

    r = kernelevo({"cache", "remove", "--cache-dir", cache_dir.string(), "--function", "scale"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_FALSE(fs::exists(cache_dir / "scale"));  // the emptied folder goes too
}

TEST_F(CliCache, PruneRemovesStaleEntriesAndKeepsHandEdits) {
    store("scale", "sm_80");
    store("scale", "sm_90");
    store("scale", "sm_86");
    write_task(3);  // the task changed: all three are stale now
    std::ofstream(cache_dir / "scale" / "sm_86.cu", std::ios::app) << "// tuned by hand\n";
    write_file_atomic(cache_dir / "scale" / "sm_75.cu", kKernel);  // a kernel without metadata (work in progress)

    auto r = kernelevo({"cache", "prune", "--cache-dir", cache_dir.string()});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(contains(r.err, "--build-dir BUILD or --task")) << r.err;

    r = kernelevo({"cache", "prune", "--cache-dir", cache_dir.string(), "--task", task_file(), "--dry-run"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(contains(r.out, "would remove scale sm_80 (stale: the task changed")) << r.out;
    EXPECT_TRUE(fs::exists(cache_dir / "scale" / "sm_80.cu"));

    r = kernelevo({"cache", "prune", "--cache-dir", cache_dir.string(), "--task", task_file()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_FALSE(fs::exists(cache_dir / "scale" / "sm_80.cu"));
    EXPECT_FALSE(fs::exists(cache_dir / "scale" / "sm_90.json"));
    EXPECT_TRUE(fs::exists(cache_dir / "scale" / "sm_86.cu"));   // edited by hand: kept
    EXPECT_TRUE(fs::exists(cache_dir / "scale" / "sm_75.cu"));   // no metadata: kept
    EXPECT_TRUE(contains(r.out, "kept scale sm_86 (the kernel source was edited")) << r.out;
    EXPECT_TRUE(contains(r.out, "kept scale sm_75")) << r.out;
    EXPECT_TRUE(contains(r.out, "removed 2 entries, kept 2")) << r.out;
}

// A real configure of the CMake test project: what the build wants is what status compares with.
class CliCacheBuild : public ::testing::Test {
protected:
    void SetUp() override {
        src = dir.path() / "src";
        build = dir.path() / "build";
        cache_dir = dir.path() / "kernels";
        fs::copy(kSource / "tests" / "cmake" / "project", src, fs::copy_options::recursive);
        ProcessOptions o;
        o.argv = {KEVO_CMAKE_COMMAND, "-S", src.string(), "-B", build.string(), "-G", "Ninja",
                  "-DCMAKE_MAKE_PROGRAM=" KEVO_MAKE_PROGRAM, "-DCMAKE_CUDA_COMPILER=" KEVO_CUDA_COMPILER,
                  "-DCMAKE_BUILD_TYPE=Release", "-DKernelEvo_DIR=" + kBinary.string(),
                  "-DKEVO_TEST_CACHE_DIR=" + cache_dir.string(), "-DCMAKE_CUDA_ARCHITECTURES=80;90"};
        o.timeout_s = 600;
        ProcessResult r = run_process(o);
        ASSERT_TRUE(r.ok()) << r.out << r.err;
    }
    TempDir dir;
    fs::path src, build, cache_dir;
};

TEST_F(CliCacheBuild, StatusListsTheArchitecturesTheBuildWantsThatTheCacheLacks) {
    Task t = load_task(build / "kernelevo" / "scale" / "task.json");
    cache::EntryMeta m;
    m.function = "scale";
    m.arch = "sm_90";
    m.task_hash = t.hash();
    m.reference_hash = t.reference_hash();
    m.origin = "manual";
    m.speedup = 2.0;
    cache::store(cache_dir, kKernel, m);
    m.arch = "sm_75";  // cached, but not a target of this build
    cache::store(cache_dir, kKernel, m);

    auto r = kernelevo({"cache", "status", "--cache-dir", cache_dir.string(), "--build-dir", build.string()});
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;  // a gap the build would fill with the reference
    EXPECT_TRUE(std::regex_search(r.out, std::regex("scale +sm_80 +MISSING"))) << r.out;
    EXPECT_TRUE(std::regex_search(r.out, std::regex("scale +sm_90 +valid"))) << r.out;
    EXPECT_TRUE(contains(r.out, "wants 1 kernel(s) the cache lacks")) << r.out;
    EXPECT_TRUE(contains(r.out, "scale sm_80 (missing): kernelevo search --task ")) << r.out;

    json j = json::parse(kernelevo({"cache", "status", "--cache-dir", cache_dir.string(), "--build-dir", build.string(), "--json"}).out);
    ASSERT_EQ(j["build_lacks"].size(), 1u) << j.dump(2);
    EXPECT_EQ(j["build_lacks"][0]["arch"], "sm_80");
    for (const auto& e : j["entries"]) EXPECT_EQ(e["wanted_by_build"], e["arch"] != "sm_75") << e.dump();

    // prune --unused drops what the build does not target; the build's own entries stay.
    r = kernelevo({"cache", "prune", "--cache-dir", cache_dir.string(), "--build-dir", build.string(), "--unused"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(contains(r.out, "removed scale sm_75 (unused: the build does not target sm_75)")) << r.out;
    EXPECT_FALSE(fs::exists(cache_dir / "scale" / "sm_75.cu"));
    EXPECT_TRUE(fs::exists(cache_dir / "scale" / "sm_90.cu"));
}

}  // namespace
