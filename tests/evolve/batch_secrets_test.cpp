// Batch mode stores what it sends: a Batch API input file keeps a kernel's text byte for byte, even
// when the kernel quotes a registered secret's text (issue 37: redact only what is displayed or logged).
#include <gtest/gtest.h>

#include "common/fs.h"
#include "common/process.h"
#include "evolve/search.h"
#include "scripted.h"
#include "store/store.h"

namespace kevo::evolve {
namespace {

const std::string kSecret = "sk-batch-TESTSECRET-0123456789abcdef";

TEST(SearchBatchSecrets, AnInputFileKeepsAKernelQuotingASecretByteForByte) {
    register_secret(kSecret);
    TempDir dir;
    Task task = load_task(fs::path(KEVO_TEST_DATA_DIR) / "gelu_bias" / "task.json");
    auto store = store::open_store((dir.path() / "state.db").string());
    testing::ScriptedEvaluator evaluator;
    SearchConfig cfg;
    cfg.structure.islands = 1;
    cfg.structure.children = 1;
    cfg.evolution.generations = 2;
    cfg.evolution.repair_attempts = 0;
    cfg.structure.seed = 7;
    cfg.requests.model = "vendor/m";
    cfg.batch.enabled = true;
    cfg.batch.prefix = (dir.path() / "gelu").string();
    cfg.batch.url = "https://api.openai.com/v1";
    testing::ScriptedProvider never([](const llm::ChatRequest&) {
        ADD_FAILURE() << "a request was sent";
        return std::string();
    });
    auto run = [&] { return Search(task, cfg, Prompts(), never, evaluator, *store).run(); };
    SearchResult res = run();
    ASSERT_EQ(res.stop_reason, "batch");
    // The seed's reply is a kernel that quotes the secret's text; the next batch's prompts quote it.
    const std::string kernel = testing::kernel_source(1, 1.5, kSecret);
    fs::path out = dir.path() / "replies-1.jsonl";
    write_file_atomic(out, testing::answer_batch(read_file(res.batch_file), [&](const llm::ChatRequest&) {
        return testing::kernel_reply(1, 1.5, kSecret);
    }));
    cfg.batch.replies.push_back(out.string());
    res = run();
    ASSERT_EQ(res.stop_reason, "batch");
    bool quoted = false;
    for (const auto& [id, request] : testing::batch_requests_of(read_file(res.batch_file)))
        for (const auto& m : request.messages) quoted |= m.content.find(kernel) != std::string::npos;
    EXPECT_TRUE(quoted) << read_file(res.batch_file);
    EXPECT_EQ(read_file(res.batch_file).find("***"), std::string::npos);
}

}  // namespace
}  // namespace kevo::evolve
