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

}  // namespace
