// The command line's flags for the libraries' settings, from the one table (common/settings.h):
// every setting with an option has one that is an option of the commands whose errors name it (each
// setting of the search and of its request an option of `kernelevo search`, no two with one flag); a
// SettingError is shown with those flags, and the lower floors' errors name no flag themselves.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>

#include <cstdlib>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "commands/commands.h"
#include "common/fs.h"
#include "common/settings.h"
#include "compile/arch_support.h"
#include "kernelbench/kernelbench.h"
#include "llm/budget.h"
#include "llm/llm.h"
#include "llm/options.h"
#include "model/plan.h"
#include "sandbox/sandbox.h"
#ifdef KEVO_WITH_SERVE
#include "serve/serve.h"
#endif

namespace kevo {
namespace {

// Every command of kernelevo as main.cpp registers them (and kernelevo's own --sandbox).
struct Commands {
    CLI::App app{"kernelevo"};
    int rc = 0;
    Commands() {
        register_sandbox_option(app);
        register_validate_command(app, rc);
        register_llm_command(app, rc);
        register_search_command(app, rc);
        register_import_command(app, rc);
        register_bench_command(app, rc);
        register_tune_command(app, rc);
#ifdef KEVO_WITH_WORKER
        register_worker_command(app, rc);
#endif
#ifdef KEVO_WITH_SERVE
        register_serve_command(app, rc);
#endif
    }
    // "import kernelbench" -> that subcommand; "" -> kernelevo itself; nullptr: not in this build.
    const CLI::App* at(const std::string& path) {
        CLI::App* a = &app;
        std::string rest = path;
        while (!rest.empty()) {
            const size_t space = rest.find(' ');
            try {
                a = a->get_subcommand(rest.substr(0, space));
            } catch (const CLI::OptionNotFound&) {
                return nullptr;
            }
            rest = space == std::string::npos ? "" : rest.substr(space + 1);
        }
        return a;
    }
};

// The commands whose errors name the settings of a group (a setting's id up to its first dot).
const std::map<std::string, std::vector<std::string>> kCommandsOf = {
    {"structure", {"search"}}, {"evolution", {"search"}}, {"requests", {"search"}}, {"stopping", {"search"}},
    {"batch", {"search"}},     {"prompts", {"search"}},   {"search", {"search"}},   {"request", {"search"}},
    {"language", {"search"}},  {"llm", {"llm check", "search"}}, {"sandbox", {""}}, {"compile", {"validate", "search"}},
    {"import", {"import kernelbench"}}, {"model", {"search", "bench"}}, {"bench", {"bench"}}, {"store", {"search"}},
    {"tune", {"tune"}}, {"serve", {"serve"}}, {"worker", {"worker"}},
};
const std::set<std::string> kSearchGroups = {"structure", "evolution", "requests", "stopping",
                                             "batch",     "prompts",   "search",   "request"};

TEST(SettingFlags, EverySettingWithAnOptionIsAnOptionOfTheCommandsThatUseIt) {
    Commands c;
    std::set<std::string> search_flags;
    for (const Setting* s : kSettingTable) {
        const std::string id = s->id, group = id.substr(0, id.find('.')), flag = s->flag;
        if (kSearchGroups.count(group)) {
            ASSERT_FALSE(flag.empty()) << id << " has no flag";
            EXPECT_TRUE(search_flags.insert(flag).second) << flag << " is the flag of two settings of the search";
        }
        if (flag.empty()) continue;
        ASSERT_TRUE(kCommandsOf.count(group)) << id << ": which commands name it? (kCommandsOf)";
        for (const std::string& path : kCommandsOf.at(group)) {
            const CLI::App* cmd = c.at(path);
            if (!cmd) continue;  // a command this build lacks (worker, serve without Redis)
            EXPECT_NE(cmd->get_option_no_throw(flag), nullptr) << id << ": " << flag << " is no option of '" << path << "'";
        }
    }
}

TEST(SettingFlags, AMessageNamesTheFlagsAndASettingWithoutOneInWords) {
    const SettingError e({settings::kBatch, settings::kModel, {"x.internal", "the internal thing"}},
                         "{batch.enabled} needs exactly one {requests.model} and {x.internal}");
    EXPECT_EQ(std::string(e.what()), "batch mode needs exactly one model and the internal thing");
    EXPECT_EQ(message_with_flags(e), "--llm-batch needs exactly one --model and the internal thing");
}

// Each lower floor's SettingError: its message in words names no flag, and the command line's
// (message_with_flags) is the one `kernelevo` prints.
TEST(SettingFlags, TheLowerFloorsErrorsNameNoFlag) {
    ::unsetenv("KERNELEVO_SERVE_TOKEN");  // a token in the environment would let 10.1.2.3 listen
    TempDir dir("kevo-setting-flags");
    write_file_atomic(dir.path() / "empty.tsv", "");
    write_file_atomic(dir.path() / "p.py", "");
    struct Case {
        std::function<void()> fails;
        std::string id;
        std::string shown;  // the message with flags
    };
    const std::string d = dir.path().string();
    llm::LlmOptions ftp;
    ftp.url = "ftp://host/v1";
    ftp.models = {"m"};
    llm::LlmOptions no_key = ftp;
    no_key.url = "http://127.0.0.1:9/v1";
    no_key.key_env = "KEVO_SETTING_FLAGS_TEST_UNSET";
    llm::LlmOptions replay_dir = ftp;
    replay_dir.replay = d;
    kernelbench::ImportOptions no_out;
    no_out.files = {dir.path() / "p.py"};
    kernelbench::ImportOptions bad_precision = no_out;
    bad_precision.out = dir.path() / "out";
    bad_precision.precision = "nonsense";
    const std::vector<Case> cases = {
        {[] { parse_sandbox_mode("never"); }, "sandbox.mode", "--sandbox must be auto, require or off, not 'never'"},
        {[] { llm::parse_model_choice("m:0"); }, "llm.model", "--model m:0: the weight must be a positive number"},
        {[] { llm::parse_model_choice(":2"); }, "llm.model", "--model :2: the model name is empty"},
        {[] { llm::parse_price("cheap"); }, "llm.price",
         "--llm-price cheap: expected PROMPT:COMPLETION or one price, in USD per million tokens (e.g. 0.30:2.50)"},
        {[&] { llm::make_client(ftp, {}); }, "llm.url", "--llm-url must start with http:// or https:// (got 'ftp://host/v1')"},
        {[&] { llm::make_client(no_key, {}); }, "llm.key_env", "--llm-key-env KEVO_SETTING_FLAGS_TEST_UNSET: the variable is not set or empty"},
        {[&] { llm::make_client(replay_dir, {}); }, "llm.replay", d + " is a directory, not an LLM transcript (--llm-replay)"},
        {[] { llm::make_client({}, {}); }, "llm.model",
         "no model: pass --model NAME (repeatable, NAME[:WEIGHT]), e.g. --model google/gemini-3-flash"},
        {[&] { kernelbench::import_problems(no_out); }, "import.out", "--out: required"},
        {[&] { kernelbench::import_problems(bad_precision); }, "import.precision", ""},
        {[&] { bench::suite_tasks(dir.path() / "none"); }, "bench.suite", "--suite " + d + "/none: not a directory"},
        {[&] { bench::suite_tasks(dir.path()); }, "bench.suite",
         "--suite " + d + ": no task folders (DIR/NAME/task.json), e.g. from `kernelevo import kernelbench`"},
        {[&] { bench::load_baseline(dir.path() / "empty.tsv"); }, "bench.baseline", "--baseline " + d + "/empty.tsv: empty file"},
        {[&] { model::load_plan(dir.path() / "none"); }, "model.dir", "--model-dir: " + d + "/none is not a folder"},
        {[] { require_toolkit_arch("sm_20", CompileOptions{}); }, "compile.arch", ""},
#ifdef KEVO_WITH_SERVE
        {[] { serve::Server({"nowhere"}); }, "serve.listen", "--listen: expected HOST:PORT, e.g. 127.0.0.1:8377, not 'nowhere'"},
        {[] { serve::Server({"10.1.2.3:8377"}); }, "serve.listen",
         "--listen 10.1.2.3:8377 is reachable from other machines: give a token of at least 16 characters in "
         "$KERNELEVO_SERVE_TOKEN (or --token), or listen on 127.0.0.1"},
#endif
    };
    for (const Case& c : cases) {
        try {
            c.fails();
            ADD_FAILURE() << c.id << ": no error";
        } catch (const SettingError& e) {
            EXPECT_EQ(e.id(), c.id) << e.what();
            EXPECT_EQ(std::string(e.what()).find("--"), std::string::npos) << e.what();
            const std::string shown = message_with_flags(e);
            if (!c.shown.empty()) EXPECT_EQ(shown, c.shown);
            EXPECT_NE(shown.find(e.settings().front().flag), std::string::npos) << shown;
        }
    }
}

}  // namespace
}  // namespace kevo
