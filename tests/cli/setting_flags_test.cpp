// The command line's table of flags for the libraries' settings (commands/setting_flags.h): every
// setting of the search (evolve/search_config.h) and of its request (workflows/search.h) has a flag,
// and that flag is an option of `kernelevo search` as the command registers it; a SettingError is
// shown with those flags.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>

#include <set>
#include <string>

#include "commands/commands.h"
#include "commands/setting_flags.h"
#include "evolve/search_config.h"
#include "workflows/search.h"

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

}  // namespace
}  // namespace kevo
