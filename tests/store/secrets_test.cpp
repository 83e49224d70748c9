// Secrets never reach the state store: whatever is written (prompts, requests, replies, sources,
// error messages, validation details, metadata, events, island states, batch records) passes through
// kevo::redact() first. Checked on the raw bytes: the SQLite files on disk and every value on the
// Redis server.
#include <gtest/gtest.h>

#include "common/fs.h"
#include "common/process.h"
#include "evolve/search.h"
#include "scripted.h"
#include "store/store.h"
#include "store_backend.h"

namespace kevo::store {
namespace {

using kevo::testing::shared_redis;

const std::string kSecret = "sk-or-v1-TESTSECRET-0123456789abcdef";

class StoreSecrets : public kevo::testing::BackendTest {
protected:
    void SetUp() override {
        BackendTest::SetUp();
        register_secret(kSecret);
    }
    // Everything the backend holds, as raw bytes: every file of the test's directory (the SQLite
    // database, its WAL and SHM), or every key and value on the Redis server.
    std::string raw() {
        if (redis()) return shared_redis()->dump_everything();
        std::string all;
        for (const auto& e : fs::directory_iterator(dir.path()))
            if (e.is_regular_file()) all += read_file(e.path());
        return all;
    }
};
KEVO_INSTANTIATE_BACKENDS(StoreSecrets);

TEST_P(StoreSecrets, EveryWrittenTextIsRedacted) {
    std::string where = location();
    {
        auto s = open_store(where);
        LlmCall c;
        c.key = "g0.seed.a0";
        c.kind = "seed";
        c.request = {{"messages", {{{"role", "user"}, {"content", "use the key " + kSecret + " please"}}}},
                     {kSecret, "as an object key"}};
        c.reply = "```cuda\n// " + kSecret + "\n```";
        c.model = "model-" + kSecret;
        s->add_llm_call(c);
        Program p;
        p.key = "g0.seed.a0";
        p.source = "const char* k = \"" + kSecret + "\";";
        p.norm_hash = "h";
        p.status = "compile_error";
        p.feedback = "error: " + kSecret + " is not declared";
        p.details = {{"log", "error near " + kSecret}, {"list", {kSecret}}};
        s->claim_program(p);
        p.key = "g0.seed.a1";
        p.norm_hash = "h2";
        s->put_program(p);
        BatchRequest b;
        b.custom_id = "b1:g1.i0.c0.a0";
        b.key = "g1.i0.c0.a0";
        b.batch = 1;
        b.file = "/runs/" + kSecret + ".jsonl";
        b.request = {{"messages", {{{"role", "user"}, {"content", "key " + kSecret}}}}};
        s->add_batch({b});
        s->fail_batch_request(b.custom_id, "HTTP 401: bad key " + kSecret);
        // An import of Batch API replies (one transaction) too.
        BatchRequest b2 = b;
        b2.custom_id = "b1:g1.i1.c0.a0";
        b2.key = "g1.i1.c0.a0";
        s->add_batch({b2});
        LlmCall imported = c;
        imported.key = "g1.i0.c0.a0";
        s->import_batch_replies({imported}, {{b2.custom_id, "HTTP 401: bad key " + kSecret}});
        s->put_meta("stop_reason", "error: LLM request failed: 401 for key " + kSecret);
        s->commit_generation(Generation{0, 1, 1, 0, 1, 0, 0, 0}, {{{"last_feedback", kSecret}}},
                             {Event{0, "restart", {{"why", kSecret}}}});

        // What comes back is redacted, and the store still works as before.
        auto got = s->find_llm_call("g0.seed.a0");
        ASSERT_TRUE(got);
        EXPECT_EQ(got->reply, "```cuda\n// ***\n```");
        EXPECT_EQ(got->request["messages"][0]["content"], "use the key *** please");
        EXPECT_TRUE(got->request.contains("***"));
        EXPECT_EQ(s->find_program("g0.seed.a0")->feedback, "error: *** is not declared");
        EXPECT_EQ(s->get_meta("stop_reason"), nlohmann::json("error: LLM request failed: 401 for key ***"));
        EXPECT_EQ(s->islands()[0]["last_feedback"], "***");
        EXPECT_EQ(s->events()[0].detail["why"], "***");
        auto batched = s->batch_requests();
        ASSERT_EQ(batched.size(), 2u);
        EXPECT_EQ(batched[0].request["messages"][0]["content"], "key ***");
        EXPECT_EQ(batched[0].error, "HTTP 401: bad key ***");
        EXPECT_EQ(batched[1].error, "HTTP 401: bad key ***");
        EXPECT_EQ(s->find_llm_call("g1.i0.c0.a0")->reply, "```cuda\n// ***\n```");
    }
    std::string bytes = raw();
    EXPECT_NE(bytes.find("***"), std::string::npos);  // the dump does see the stored texts
    EXPECT_EQ(bytes.find(kSecret), std::string::npos) << "the raw secret is in the state store";
}

// A whole search whose LLM replies, kernels, compile logs and validation feedback carry the
// secret: none of it reaches the store.
class LeakyEvaluator : public evolve::testing::ScriptedEvaluator {
public:
    CompileResult compile(const std::string& source) override {
        CompileResult r = ScriptedEvaluator::compile(source);
        if (!r.ok) r.log += " (token " + kSecret + ")";
        return r;
    }
    Evaluation run(const CompileResult& compiled) override {
        Evaluation e = ScriptedEvaluator::run(compiled);
        e.feedback += " measured with " + kSecret;
        e.details["env"] = "OPENROUTER_API_KEY=" + kSecret;
        return e;
    }
};

TEST_P(StoreSecrets, ASearchStoresNoSecret) {
    std::string where = location();
    Task task = load_task(fs::path(KEVO_TEST_DATA_DIR) / "gelu_bias" / "task.json");
    LeakyEvaluator evaluator;
    evolve::testing::ScriptedProvider provider([](const llm::ChatRequest& req) {
        // The seed fails to compile (its log and the repair prompt carry the secret); every reply
        // and every kernel mentions it.
        std::string marker = evolve::testing::prompt_kind(req) == "seed" ? "COMPILE_ERROR" : "";
        std::string reply = evolve::testing::prompt_kind(req) == "seed"
                                ? evolve::testing::kernel_reply(1, 1.0, marker)
                                : evolve::testing::evolving(req);
        size_t fence = reply.find("```cuda\n");
        if (fence != std::string::npos) reply.insert(fence + 8, "// api key " + kSecret + "\n");
        return "Here is the kernel (key " + kSecret + "):\n" + reply;
    });
    evolve::SearchConfig cfg;
    cfg.islands = 2;
    cfg.children = 2;
    cfg.generations = 3;
    cfg.repair_attempts = 2;
    cfg.migration_interval = 2;
    cfg.restart_after = 0;
    cfg.seed = 5;
    {
        auto s = open_store(where);
        evolve::Search search(task, cfg, evolve::Prompts(), provider, evaluator, *s);
        evolve::SearchResult r = search.run();
        ASSERT_EQ(r.stop_reason, "generations");
        ASSERT_TRUE(r.best);
        // The secret really was in play: in the requests the provider saw (repair prompts quote
        // the failing kernel and its log).
        bool in_requests = false;
        for (const auto& q : provider.requests())
            if (evolve::testing::user_prompt(q).find(kSecret) != std::string::npos) in_requests = true;
        EXPECT_TRUE(in_requests);
        EXPECT_GT(s->programs().size(), 4u);
    }
    std::string bytes = raw();
    EXPECT_NE(bytes.find("// api key ***"), std::string::npos);
    EXPECT_EQ(bytes.find(kSecret), std::string::npos) << "the raw secret is in the state store";

    // The run resumes from the redacted state without asking again.
    size_t calls = provider.calls();
    auto s = open_store(where);
    evolve::Search again(task, cfg, evolve::Prompts(), provider, evaluator, *s);
    EXPECT_EQ(again.run().stop_reason, "generations");
    EXPECT_EQ(provider.calls(), calls);
}

}  // namespace
}  // namespace kevo::store
