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

TEST_P(StoreSecrets, TheToolsOwnTextsAreRedacted) {
    std::string where = location();
    {
        auto s = open_store(where);
        BatchRequest b;
        b.custom_id = "b1:g1.i0.c0.a0";
        b.key = "g1.i0.c0.a0";
        b.batch = 1;
        b.file = "/runs/" + kSecret + ".jsonl";
        b.request = {{"messages", {{{"role", "user"}, {"content", "key"}}}}};
        s->add_batch({b});
        s->fail_batch_request(b.custom_id, "HTTP 401: bad key " + kSecret);
        // An import of Batch API replies (one transaction) too.
        BatchRequest b2 = b;
        b2.custom_id = "b1:g1.i1.c0.a0";
        b2.key = "g1.i1.c0.a0";
        s->add_batch({b2});
        s->import_batch_replies({}, {{b2.custom_id, "HTTP 401: bad key " + kSecret}});
        s->put_meta("stop_reason", "error: LLM request failed: 401 for key " + kSecret);
        s->commit_generation(Generation{0, 1, 1, 0, 1, 0, 0, 0}, {}, {Event{0, "restart", {{"why", kSecret}}}});

        EXPECT_EQ(s->get_meta("stop_reason"), nlohmann::json("error: LLM request failed: 401 for key ***"));
        EXPECT_EQ(s->events()[0].detail["why"], "***");
        auto batched = s->batch_requests();
        ASSERT_EQ(batched.size(), 2u);
        EXPECT_EQ(batched[0].file, "/runs/***.jsonl");
        EXPECT_EQ(batched[0].error, "HTTP 401: bad key ***");
        EXPECT_EQ(batched[1].error, "HTTP 401: bad key ***");
    }
    std::string bytes = raw();
    EXPECT_NE(bytes.find("bad key ***"), std::string::npos);  // the dump does see the stored texts
    EXPECT_EQ(bytes.find(kSecret), std::string::npos) << "the raw secret is in the state store";
}

TEST_P(StoreSecrets, DataIsStoredByteForByteEvenWhereItHoldsASecretsText) {
    std::string where = location();
    auto s = open_store(where);
    LlmCall c;
    c.key = "g0.seed.a0";
    c.kind = "seed";
    c.request = {{"messages", {{{"role", "user"}, {"content", "use the key " + kSecret + " please"}}}}};
    c.reply = "```cuda\n// " + kSecret + "\n```";
    c.model = "model-" + kSecret;
    s->add_llm_call(c);
    Program p;
    p.key = "g0.seed.a0";
    p.source = "const char* k = \"" + kSecret + "\";";
    p.norm_hash = "h";
    p.status = ProgramStatus::compile_error;
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
    b.request = c.request;
    s->add_batch({b});
    LlmCall imported = c;
    imported.key = "g1.i0.c0.a0";
    s->import_batch_replies({imported}, {});
    s->commit_generation(Generation{0, 1, 1, 0, 1, 0, 0, 0}, {{{"last_feedback", kSecret}}}, {});

    for (const std::string& key : {"g0.seed.a0", "g1.i0.c0.a0"}) {
        auto got = s->find_llm_call(key);
        ASSERT_TRUE(got);
        EXPECT_EQ(got->reply, c.reply);
        EXPECT_EQ(got->request, c.request);
        EXPECT_EQ(got->model, c.model);
    }
    for (const std::string& key : {"g0.seed.a0", "g0.seed.a1"}) {
        auto got = s->find_program(key);
        ASSERT_TRUE(got);
        EXPECT_EQ(got->source, p.source);
        EXPECT_EQ(got->feedback, p.feedback);
        EXPECT_EQ(got->details, p.details);
    }
    EXPECT_EQ(s->batch_requests()[0].request, c.request);
    EXPECT_EQ(s->islands()[0]["last_feedback"], kSecret);
}

// A whole search where every kernel holds a secret's text (a short Redis password or API key can
// be any word, "cudaStream_t" here): each kernel is compiled, run and stored as the model wrote it,
// the best one included, and the run resumes from the state without asking again.
TEST_P(StoreSecrets, ASearchCompilesAndKeepsKernelsAsTheModelWroteThem) {
    const std::string word = "cudaStream_t";  // in every kernel's signature
    register_secret(word);
    std::string where = location();
    Task task = load_task(fs::path(KEVO_TEST_DATA_DIR) / "gelu_bias" / "task.json");
    evolve::testing::ScriptedEvaluator evaluator;
    evolve::testing::ScriptedProvider provider(evolve::testing::evolving);
    evolve::SearchConfig cfg;
    cfg.structure.islands = 2;
    cfg.structure.children = 2;
    cfg.evolution.generations = 3;
    cfg.structure.seed = 5;
    {
        auto s = open_store(where);
        evolve::Search search(task, cfg, evolve::Prompts(), provider, evaluator, *s);
        evolve::SearchResult r = search.run();
        ASSERT_EQ(r.stop_reason, "generations");
        ASSERT_TRUE(r.best);
        EXPECT_NE(r.best->source.find(word), std::string::npos) << r.best->source;
        ASSERT_FALSE(evaluator.runs().empty());
        for (const std::string& ran : evaluator.runs()) {
            EXPECT_NE(ran.find("cudaStream_t s"), std::string::npos) << "a kernel was altered before it ran:\n" << ran;
            EXPECT_EQ(ran.find("***"), std::string::npos) << ran;
        }
        for (const LlmCall& call : s->llm_calls()) EXPECT_EQ(call.reply.find("***"), std::string::npos) << call.reply;
        for (const Program& p : s->programs()) EXPECT_EQ(p.source.find("***"), std::string::npos) << p.source;
    }
    size_t calls = provider.calls();
    auto s = open_store(where);
    evolve::Search again(task, cfg, evolve::Prompts(), provider, evaluator, *s);
    EXPECT_EQ(again.run().stop_reason, "generations");
    EXPECT_EQ(provider.calls(), calls);
}

}  // namespace
}  // namespace kevo::store
