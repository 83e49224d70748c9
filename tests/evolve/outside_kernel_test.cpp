// A failure the evaluator cannot attribute to the kernel (a busy GPU: details "outside_kernel")
// neither marks the kernel's source as done (the same kernel sent again is evaluated again, not
// dropped as a duplicate) nor tells the model in its repair prompt that the kernel misbehaved.
#include <gtest/gtest.h>

#include "common/fs.h"
#include "evolve/search.h"
#include "scripted.h"
#include "store/store.h"

namespace kevo::evolve {
namespace {

using testing::kernel_reply;
using testing::prompt_kind;
using testing::ScriptedEvaluator;
using testing::ScriptedProvider;
using testing::user_prompt;

// The scripted evaluator, except that the first run of a source marked BUSY_GPU fails as a busy
// GPU does after the validator's retries (validate.h: outside_kernel_reason).
class BusyOnce : public ScriptedEvaluator {
public:
    Evaluation run(const CompileResult& compiled) override {
        Evaluation e = ScriptedEvaluator::run(compiled);
        const std::string source = runs().back();
        if (source.find("BUSY_GPU") == std::string::npos || busy_done_) return e;
        busy_done_ = true;
        Evaluation busy;
        busy.status = Status::rejected;
        busy.feedback = "not judged: the validator could not measure this kernel reliably (other processes used the GPU); "
                        "this says nothing about the kernel, which may be sent again unchanged";
        busy.details = {{"status", "rejected"}, {"outside_kernel", true}};
        return busy;
    }

private:
    bool busy_done_ = false;
};

TEST(SearchOutsideKernel, ABusyGpuFailureDoesNotPoisonTheKernelsHash) {
    TempDir dir("kevo-test");
    Task task = load_task(fs::path(KEVO_TEST_DATA_DIR) / "gelu_bias" / "task.json");
    auto store = store::open_store((dir.path() / "state.db").string());
    BusyOnce evaluator;
    // The model sends the same kernel for the seed and for its repair.
    ScriptedProvider provider([](const llm::ChatRequest&) { return kernel_reply(1, 1.5, "BUSY_GPU"); });
    SearchConfig cfg;
    cfg.islands = 1;
    cfg.children = 1;
    cfg.generations = 0;
    cfg.repair_attempts = 1;
    cfg.seed = 3;
    Search search(task, cfg, Prompts(), provider, evaluator, *store);
    SearchResult res = search.run();

    auto a0 = store->find_program("g0.seed.a0"), a1 = store->find_program("g0.seed.a1");
    ASSERT_TRUE(a0 && a1);
    EXPECT_EQ(a0->status, "rejected");
    EXPECT_EQ(a1->status, "ok") << "the same kernel, sent again after a busy-GPU failure, was not evaluated again: " << a1->status;
    EXPECT_EQ(evaluator.runs().size(), 2u);
    ASSERT_TRUE(res.best);
    EXPECT_NEAR(res.best->speedup, 1.5, 1e-9);
    // The repair prompt passes on what the validator said, without "rejected:" in front.
    auto reqs = provider.requests();
    auto repair = std::find_if(reqs.begin(), reqs.end(), [](const auto& q) { return prompt_kind(q) == "repair"; });
    ASSERT_NE(repair, reqs.end());
    EXPECT_NE(user_prompt(*repair).find("not judged"), std::string::npos);
    EXPECT_EQ(user_prompt(*repair).find("rejected: not judged"), std::string::npos);
    EXPECT_EQ(user_prompt(*repair).find("misreport"), std::string::npos);
}

}  // namespace
}  // namespace kevo::evolve
