// The command line's table of flags for the libraries' settings (commands/setting_flags.h): every
// setting of the search (evolve/search_config.h) and of its request (workflows/search.h) has a flag,
// and that flag is an option of `kernelevo search` as the command registers it; every setting of the
// lower floors (llm, sandbox, compile, import, serve, model, bench) has a flag that is an option of
// the commands that use that floor; a SettingError is shown with those flags, and the lower floors'
// errors name no flag themselves.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>

#include <cstdlib>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "commands/commands.h"
#include "commands/setting_flags.h"
#include "common/fs.h"
#include "compile/arch_support.h"
#include "evolve/search_config.h"
#include "kernelbench/kernelbench.h"
#include "llm/budget.h"
#include "llm/llm.h"
#include "llm/options.h"
#include "llm/settings.h"
#include "model/plan.h"
#include "sandbox/sandbox.h"
#include "store/settings.h"
#include "tune/tune.h"
#include "workflows/search.h"
#ifdef KEVO_WITH_SERVE
#include "serve/serve.h"
#endif

namespace kevo {
namespace {

TEST(SettingFlags, EverySettingOfTheSearchIsAnOptionOfSearch) {
    CLI::App app{"kernelevo"};
    int rc = 0;
    register_search_command(app, rc);
    const CLI::App* search = app.get_subcommand("search");
    std::set<std::string> flags;
    std::vector<Setting> all = evolve::settings::all();
    for (const Setting& s : workflows::settings::all()) all.push_back(s);
    for (const Setting& s : all) {
        const std::string flag = flag_of(s.id);
        ASSERT_FALSE(flag.empty()) << s.id << " has no flag";
        EXPECT_TRUE(flags.insert(flag).second) << flag << " is the flag of two settings";
        EXPECT_NE(search->get_option_no_throw(flag), nullptr) << s.id << ": " << flag << " is no option of search";
    }
}

TEST(SettingFlags, AMessageNamesTheFlagsAndASettingWithoutOneInWords) {
    const SettingError e({evolve::settings::kBatch, evolve::settings::kModel, {"x.internal", "the internal thing"}},
                         "{batch.enabled} needs exactly one {requests.model} and {x.internal}");
    EXPECT_EQ(std::string(e.what()), "batch mode needs exactly one model and the internal thing");
    EXPECT_EQ(message_with_flags(e), "--llm-batch needs exactly one --model and the internal thing");
    EXPECT_EQ(flag_of("x.internal"), "");
}

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
#ifdef KEVO_WITH_SERVE
        register_serve_command(app, rc);
#endif
    }
    // "import kernelbench" -> that subcommand; "" -> kernelevo itself.
    const CLI::App* at(const std::string& path) {
        CLI::App* a = &app;
        std::string rest = path;
        while (!rest.empty()) {
            const size_t space = rest.find(' ');
            a = a->get_subcommand(rest.substr(0, space));
            rest = space == std::string::npos ? "" : rest.substr(space + 1);
        }
        return a;
    }
};

TEST(SettingFlags, EverySettingOfTheLowerFloorsIsAnOptionOfTheCommandsThatUseIt) {
    struct Floor {
        std::vector<Setting> settings;
        std::vector<std::string> commands;  // the commands whose errors name these settings
    };
    const std::vector<Floor> floors = {
        {llm::settings::all(), {"llm check", "search"}},
        {sandbox::settings::all(), {""}},
        {compile::settings::all(), {"validate", "search"}},
        {kernelbench::settings::all(), {"import kernelbench"}},
        {model::settings::all(), {"search", "bench"}},
        {bench::settings::all(), {"bench"}},
        {store::settings::all(), {"search"}},
        {tune::settings::all(), {"tune"}},
#ifdef KEVO_WITH_SERVE
        {serve::settings::all(), {"serve"}},
#endif
    };
    Commands c;
    for (const Floor& f : floors)
        for (const Setting& s : f.settings) {
            const std::string flag = flag_of(s.id);
            ASSERT_FALSE(flag.empty()) << s.id << " has no flag";
            for (const std::string& path : f.commands)
                EXPECT_NE(c.at(path)->get_option_no_throw(flag), nullptr) << s.id << ": " << flag << " is no option of '" << path << "'";
        }
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
            EXPECT_NE(shown.find(flag_of(c.id)), std::string::npos) << shown;
        }
    }
}

}  // namespace
}  // namespace kevo
