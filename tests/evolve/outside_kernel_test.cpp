// A candidate the evaluator could not judge (Evaluation::outside_kernel: a busy GPU) does not
// mark its source: the same kernel sent again later is evaluated again, not dropped as a duplicate.
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
        busy.outside_kernel = true;
        busy.details = {{"status", "rejected"}};
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
    // A plain seed, then the model sends the same BUSY_GPU kernel for both mutations.
    ScriptedProvider provider([](const llm::ChatRequest& r) {
        return prompt_kind(r) == "seed" ? kernel_reply(1, 1.0) : kernel_reply(2, 1.5, "BUSY_GPU");
    });
    SearchConfig cfg;
    cfg.structure.islands = 1;
    cfg.structure.children = 1;
    cfg.evolution.generations = 2;
    cfg.evolution.repair_attempts = 1;
    cfg.evolution.outside_kernel_retries = 0;  // not judged at once
    cfg.structure.seed = 3;
    Search search(task, cfg, Prompts(), provider, evaluator, *store);
    SearchResult res = search.run();

    auto g1 = store->find_program("g1.i0.c0.a0"), g2 = store->find_program("g2.i0.c0.a0");
    ASSERT_TRUE(g1 && g2);
    EXPECT_EQ(g1->status, store::ProgramStatus::not_judged);
    EXPECT_EQ(g2->status, store::ProgramStatus::ok) << "the same kernel, sent again after a busy-GPU failure, was not evaluated again: " << g2->status;
    EXPECT_EQ(evaluator.runs().size(), 3u);
    ASSERT_TRUE(res.best);
    EXPECT_NEAR(res.best->speedup, 1.5, 1e-9);
    for (const auto& q : provider.requests()) EXPECT_NE(prompt_kind(q), "repair") << "a repair was asked for a busy GPU";
}

}  // namespace
}  // namespace kevo::evolve
