// evolve::validate() (evolve/search_config.h): the search's one check of its settings. Its errors
// name the setting in words, never a command-line flag, and carry the setting's identifier, which
// `kernelevo` maps to the flag (tests/cli: the same errors under their flags).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <set>
#include <string>

#include "common/setting_error.h"
#include "evolve/search_config.h"

namespace kevo::evolve {
namespace {

struct Refusal {
    std::string id, message;
};

// The refusal of `cfg` by validate() (an empty id when it passes).
Refusal refusal(const SearchConfig& cfg) {
    try {
        validate(cfg);
    } catch (const SettingError& e) {
        return {e.id(), e.what()};
    }
    return {};
}

SearchConfig with(const std::function<void(SearchConfig&)>& change) {
    SearchConfig c;
    change(c);
    return c;
}

TEST(SearchConfigValidate, TheDefaultsPass) { EXPECT_EQ(refusal(SearchConfig()).id, ""); }

TEST(SearchConfigValidate, ABadSettingIsNamedInWordsWithItsIdentifier) {
    const std::vector<std::pair<SearchConfig, Refusal>> cases = {
        {with([](SearchConfig& c) { c.structure.islands = 0; }),
         {"structure.islands", "the number of islands: must be between 1 and 64, not 0"}},
        {with([](SearchConfig& c) { c.structure.children = 65; }),
         {"structure.children", "the number of children per island: must be between 1 and 64, not 65"}},
        {with([](SearchConfig& c) { c.evolution.repair_attempts = -1; }),
         {"evolution.repair_attempts", "the number of repair attempts: must be between 0 and 50, not -1"}},
        {with([](SearchConfig& c) { c.evolution.generations = -2; }),
         {"evolution.generations", "the number of generations: must be 0 or more, not -2"}},
        {with([](SearchConfig& c) { c.evolution.temperature = 0; }),
         {"evolution.temperature", "the parent selection temperature: must be a positive number, not 0"}},
        {with([](SearchConfig& c) { c.evolution.temperature = std::nan(""); }),
         {"evolution.temperature", "the parent selection temperature: must be a finite number, not 'nan'"}},
        {with([](SearchConfig& c) { c.evolution.mode = "half"; }),
         {"evolution.mode", "the mutation mode: 'half' is not one of: full diff mixed"}},
        {with([](SearchConfig& c) { c.requests.temperature = 3; }),
         {"requests.temperature", "the LLM's sampling temperature: must be between 0 and 2, not 3"}},
        {with([](SearchConfig& c) { c.stopping.target_sol = 1.5; }),
         {"stopping.target_sol", "the target fraction of the speed of light: must be between 0 and 1, not 1.5"}},
        {with([](SearchConfig& c) { c.structure.backend = "rust"; }),
         {"structure.backend", "the candidate language: 'rust' is not one of: cuda triton both"}},
        {with([](SearchConfig& c) { c.structure.backend = "both", c.structure.islands = 1; }),
         {"structure.backend", "the candidate language both needs at least 2 islands (island 0 writes Triton, island 1 CUDA, and so on in turn)"}},
        {with([](SearchConfig& c) { c.batch.enabled = true; }),
         {"batch.enabled", "batch mode needs exactly one model: a Batch API input file holds requests for one model"}},
        {with([](SearchConfig& c) { c.batch.enabled = true, c.requests.model = "m", c.stopping.budget_usd = 2; }),
         {"batch.enabled", "batch mode with the budget in US dollars needs the price per token (the batch price): Batch API "
                           "replies report no cost, so the cap could not be kept"}},
    };
    for (const auto& [cfg, expected] : cases) {
        const Refusal r = refusal(cfg);
        EXPECT_EQ(r.id, expected.id) << expected.message;
        EXPECT_EQ(r.message, expected.message);
        EXPECT_EQ(r.message.find("--"), std::string::npos) << r.message;  // no flag below the commands
    }
}

TEST(SearchConfigValidate, ZeroMeansNoLimitForTheStopConditions) {
    SearchConfig c;
    c.stopping = {0, 0, 0, 0, 0};
    EXPECT_EQ(refusal(c).id, "");
    c.stopping.max_time_s = INFINITY;  // no limit either
    EXPECT_EQ(refusal(c).id, "");
    c.stopping.budget_usd = -1;
    EXPECT_EQ(refusal(c).message, "the budget in US dollars: must be 0 or more, not -1");
}

TEST(SearchConfigValidate, TheTimeLimitIsReadInWords) {
    EXPECT_EQ(parse_duration(""), 0);
    EXPECT_EQ(parse_duration("90"), 90);
    EXPECT_EQ(parse_duration("30m"), 1800);
    EXPECT_EQ(parse_duration("2h"), 7200);
    for (const char* bad : {"5x", "-3", "nan", "soon"}) {
        try {
            parse_duration(bad);
            ADD_FAILURE() << bad << " was read";
        } catch (const SettingError& e) {
            EXPECT_EQ(e.id(), "stopping.max_time");
            EXPECT_EQ(std::string(e.what()), "the time limit: cannot read '" + std::string(bad) + "' (use e.g. 900, 30m or 2h)");
        }
    }
}

// Every setting has its own identifier, and the errors render with any names a caller gives them.
TEST(SearchConfigValidate, EachSettingHasOneIdentifierAndRendersUnderAnyName) {
    std::set<std::string> ids;
    for (const Setting* s : kSettingTable) EXPECT_TRUE(ids.insert(s->id).second) << s->id;
    try {
        validate(with([](SearchConfig& c) { c.batch.enabled = true; }));
        ADD_FAILURE() << "no error";
    } catch (const SettingError& e) {
        EXPECT_EQ(e.render([](const Setting& s) { return "<" + std::string(s.id) + ">"; }),
                  "<batch.enabled> needs exactly one <requests.model>: a Batch API input file holds requests for one model");
    }
}

}  // namespace
}  // namespace kevo::evolve
