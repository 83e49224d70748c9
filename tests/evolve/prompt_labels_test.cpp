// What the prompts say: the parent's speedup names what it is over (search --fitness-baseline sets
// SearchConfig::speedup_label), and the task's tolerance states the judge's rule (one source,
// kevo_device::kToleranceRule) beside its numbers.
#include <gtest/gtest.h>

#include "common/fs.h"
#include "device/tolerance.h"
#include "evolve/prompt_text.h"
#include "evolve/search.h"
#include "scripted.h"
#include "store/store.h"

namespace kevo::evolve {
namespace {

Task gelu() { return load_task(fs::path(KEVO_TEST_DATA_DIR) / "gelu_bias" / "task.json"); }

// The user prompts of a one-generation scripted search under `cfg`: the seed's, then the mutations'.
std::vector<std::string> user_prompts(SearchConfig cfg) {
    TempDir dir;
    Task task = gelu();
    auto store = store::open_store((dir.path() / "state.db").string());
    testing::ScriptedEvaluator evaluator;
    testing::ScriptedProvider provider(testing::evolving);
    cfg.structure.islands = 1;
    cfg.structure.children = 1;
    cfg.evolution.generations = 1;
    cfg.evolution.repair_attempts = 0;
    cfg.structure.seed = 3;
    Search(task, cfg, Prompts(), provider, evaluator, *store).run();
    std::vector<std::string> out;
    for (const auto& q : provider.requests()) out.push_back(testing::user_prompt(q));
    return out;
}

// The user prompt of the first mutation of a one-generation scripted search under `cfg`.
std::string first_mutation_prompt(SearchConfig cfg) {
    for (const std::string& u : user_prompts(std::move(cfg)))
        if (u.find("Improve the speed") != std::string::npos) return u;
    ADD_FAILURE() << "no mutation prompt";
    return "";
}

TEST(PromptLabels, TheParentsSpeedupNamesWhatItIsOver) {
    EXPECT_NE(first_mutation_prompt(SearchConfig()).find("x over the LibTorch reference"), std::string::npos);
    SearchConfig eager;
    eager.evolution.speedup_label = "PyTorch eager";
    const std::string u = first_mutation_prompt(eager);
    EXPECT_NE(u.find("x over PyTorch eager"), std::string::npos) << u;
    EXPECT_EQ(u.find("x over the LibTorch reference"), std::string::npos) << u;
}

TEST(PromptLabels, TheToleranceStatesTheJudgesRuleWithItsNumbers) {
    const Task t = gelu();
    const std::string text = describe_task(t);
    std::ostringstream numbers;
    numbers << "Tolerance: atol " << t.atol << ", rtol " << t.rtol << "; the rule: ";
    EXPECT_NE(text.find(numbers.str() + kevo_device::kToleranceRule + "."), std::string::npos) << text;
}

// Issue 49 item 4: where the search timed the task's PyTorch module, the seed's and every mutation's prompt
// show the time to beat (SearchConfig::to_beat, baseline::to_beat_section()) right after the speed of light;
// without it the prompts are as they were: the speed of light, then the next section.
TEST(PromptLabels, TheTimeToBeatFollowsTheSpeedOfLightWhereTheBaselinesRan) {
    const std::vector<std::string> plain = user_prompts(SearchConfig());
    ASSERT_GE(plain.size(), 2u);
    EXPECT_EQ(plain[0].find("time to beat"), std::string::npos) << plain[0];
    EXPECT_NE(plain[0].find(".\n\nStart with a straightforward, clearly correct kernel"), std::string::npos)
        << plain[0];
    SearchConfig cfg;
    cfg.evolution.to_beat = "\n\n## The time to beat: torch.compile\n\n| 0 | 812.40 us | 402.10 us | 2.02x |\n";
    const std::vector<std::string> shown = user_prompts(cfg);
    ASSERT_EQ(shown.size(), plain.size());
    for (size_t i = 0; i < shown.size(); ++i) {
        const size_t at = shown[i].find(cfg.evolution.to_beat);
        ASSERT_NE(at, std::string::npos) << shown[i];
        EXPECT_LT(shown[i].find("## Speed of light"), at);
        EXPECT_EQ(shown[i].substr(0, at) + shown[i].substr(at + cfg.evolution.to_beat.size()), plain[i]);
    }
}

}  // namespace
}  // namespace kevo::evolve
