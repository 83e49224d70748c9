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

// The user prompt of the first mutation of a one-generation scripted search under `cfg`.
std::string first_mutation_prompt(SearchConfig cfg) {
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
    for (const auto& q : provider.requests()) {
        const std::string u = testing::user_prompt(q);
        if (u.find("Improve the speed") != std::string::npos) return u;
    }
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

}  // namespace
}  // namespace kevo::evolve
