#include <gtest/gtest.h>

#include "common/error.h"
#include "common/fs.h"
#include "store/store.h"

namespace kevo::store {
namespace {

Program make_program(const std::string& key, const std::string& hash) {
    Program p;
    p.key = key;
    p.origin = "mutation";
    p.source = "// " + key;
    p.norm_hash = hash;
    return p;
}

TEST(Store, MetaCallsAndBudgetPersistAcrossReopen) {
    TempDir dir;
    std::string path = (dir.path() / "state.db").string();
    {
        auto s = open_store(path);
        EXPECT_FALSE(s->get_meta("config"));
        s->put_meta("config", {{"islands", 3}});
        LlmCall c;
        c.key = "g0.seed.a0";
        c.kind = "seed";
        c.request = {{"messages", nlohmann::json::array()}};
        c.reply = "```cuda\nint x;\n```";
        c.prompt_tokens = 100;
        c.completion_tokens = 20;
        c.cost_usd = 0.5;
        EXPECT_GT(s->add_llm_call(c), 0);
        c.key = "g1.i0.c0.a0";
        s->add_llm_call(c);
        EXPECT_THROW(s->add_llm_call(c), UsageError);  // keys are unique
    }
    auto s = open_store("sqlite:" + path);
    EXPECT_EQ(s->get_meta("config")->at("islands"), 3);
    auto c = s->find_llm_call("g0.seed.a0");
    ASSERT_TRUE(c);
    EXPECT_EQ(c->reply, "```cuda\nint x;\n```");
    EXPECT_EQ(c->kind, "seed");
    ASSERT_EQ(s->llm_calls().size(), 2u);
    EXPECT_EQ(s->llm_calls()[1].key, "g1.i0.c0.a0");
    Spent spent = s->spent();
    EXPECT_EQ(spent.calls, 2);
    EXPECT_EQ(spent.tokens(), 240);
    EXPECT_DOUBLE_EQ(spent.cost_usd, 1.0);
}

TEST(Store, ClaimRejectsADuplicateFromAnotherSlotButNotItsOwnRetry) {
    TempDir dir;
    auto s = open_store((dir.path() / "s.db").string());
    Program a = s->claim_program(make_program("a", "h1"));
    EXPECT_GT(a.id, 0);
    EXPECT_EQ(a.key, "a");
    Program b = s->claim_program(make_program("b", "h1"));
    EXPECT_EQ(b.key, "a");  // the earlier program is returned; nothing is written
    EXPECT_FALSE(s->find_program("b"));
    Program again = s->claim_program(make_program("a", "h1"));  // a resumed slot re-claims itself
    EXPECT_EQ(again.id, a.id);

    a.status = "ok";
    a.speedup = 1.5;
    a.details = {{"kernel_us", 3.0}};
    a.feedback = "bad byte \xff here";
    EXPECT_EQ(s->put_program(a), a.id);
    auto got = s->get_program(a.id);
    ASSERT_TRUE(got);
    EXPECT_TRUE(got->ok());
    EXPECT_DOUBLE_EQ(got->speedup, 1.5);
    EXPECT_EQ(got->details["kernel_us"], 3.0);
    EXPECT_EQ(s->programs().size(), 1u);
}

TEST(Store, CommitGenerationReplacesIslandsAndAppendsHistory) {
    TempDir dir;
    auto s = open_store((dir.path() / "s.db").string());
    EXPECT_EQ(s->last_generation(), -1);
    s->commit_generation(Generation{0, 1.0, 1, 1, 0, 50, 0.1, 2.0}, {{{"cells", 1}}, {{"cells", 2}}},
                         {Event{0, "seed", {{"id", 1}}}});
    s->commit_generation(Generation{1, 1.5, 2, 2, 1, 90, 0.2, 4.0}, {{{"cells", 3}}, {{"cells", 4}}},
                         {Event{1, "migration", nullptr}});
    EXPECT_EQ(s->last_generation(), 1);
    auto islands = s->islands();
    ASSERT_EQ(islands.size(), 2u);
    EXPECT_EQ(islands[1]["cells"], 4);
    auto h = s->history();
    ASSERT_EQ(h.size(), 2u);
    EXPECT_DOUBLE_EQ(h[1].best_speedup, 1.5);
    EXPECT_EQ(h[1].tokens, 90);
    auto ev = s->events();
    ASSERT_EQ(ev.size(), 2u);
    EXPECT_EQ(ev[1].kind, "migration");
}

TEST(Store, RejectsAFileThatIsNotAState) {
    TempDir dir;
    write_file_atomic(dir.path() / "junk.db", std::string(4096, 'x'));
    EXPECT_THROW(open_store((dir.path() / "junk.db").string()), UsageError);
    EXPECT_THROW(open_store("redis://localhost"), UsageError);
}

}  // namespace
}  // namespace kevo::store
