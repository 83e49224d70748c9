// The Store contract, run against the SQLite file and a real Redis server (Store/Backends.X/sqlite
// and .../redis), plus what is particular to each backend.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "common/error.h"
#include "common/fs.h"
#include "common/process.h"
#include "store/store.h"
#include "store_backend.h"

namespace kevo::store {
namespace {

using kevo::testing::RedisServer;
using kevo::testing::shared_redis;

Program make_program(const std::string& key, const std::string& hash) {
    Program p;
    p.key = key;
    p.origin = "mutation";
    p.source = "// " + key;
    p.norm_hash = hash;
    return p;
}

std::string error_of(const std::function<void()>& fn) {
    try {
        fn();
    } catch (const UsageError& e) {
        return e.what();
    }
    return "(no error)";
}

class StoreContract : public kevo::testing::BackendTest {};
KEVO_INSTANTIATE_BACKENDS(StoreContract);

TEST_P(StoreContract, MetaCallsAndBudgetPersistAcrossReopen) {
    std::string where = location();
    {
        auto s = open_store(where);
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
        bool inserted = false;
        const int64_t id = s->add_llm_call(c, &inserted);
        EXPECT_TRUE(inserted);
        c.reply = "a second reply";
        EXPECT_EQ(s->add_llm_call(c), id);  // keys are unique: the stored call stands, nothing is added
        EXPECT_EQ(s->add_llm_call(c, &inserted), id);
        EXPECT_FALSE(inserted) << "the caller must read the stored call back";
    }
    auto s = open_store(redis() ? where : "sqlite:" + where);
    EXPECT_TRUE(store_exists(where));
    EXPECT_EQ(s->get_meta("config")->at("islands"), 3);
    EXPECT_EQ(s->get_meta("schema_version"), nlohmann::json(1));
    auto c = s->find_llm_call("g0.seed.a0");
    ASSERT_TRUE(c);
    EXPECT_EQ(c->reply, "```cuda\nint x;\n```");
    EXPECT_EQ(c->kind, "seed");
    EXPECT_EQ(c->request, nlohmann::json({{"messages", nlohmann::json::array()}}));
    EXPECT_GT(c->created, 1.7e9);
    EXPECT_FALSE(s->find_llm_call("nope"));
    ASSERT_EQ(s->llm_calls().size(), 2u);
    EXPECT_EQ(s->llm_calls()[1].key, "g1.i0.c0.a0");
    EXPECT_LT(s->llm_calls()[0].id, s->llm_calls()[1].id);
    Spent spent = s->spent();
    EXPECT_EQ(spent.calls, 2);
    EXPECT_EQ(spent.tokens(), 240);
    EXPECT_DOUBLE_EQ(spent.cost_usd, 1.0);
}

TEST_P(StoreContract, BatchRequestsRecordWhichRequestWentIntoWhichFile) {
    std::string where = location();
    auto batch = [](int n, const std::string& key) {
        BatchRequest b;
        b.custom_id = "b" + std::to_string(n) + ":" + key;
        b.key = key;
        b.batch = n;
        b.file = "/runs/gelu-batch-" + std::to_string(n) + ".jsonl";
        b.kind = "mutation";
        b.request = {{"model", "m"}, {"max_tokens", 100}};
        b.reserved_tokens = 1234;
        b.reserved_cost_usd = 0.0625;
        return b;
    };
    {
        auto s = open_store(where);
        EXPECT_TRUE(s->batch_requests().empty());
        s->add_batch({batch(1, "g1.i1.c0.a0"), batch(1, "g1.i0.c0.a0")});
        // A batch is written whole or not at all: an id that exists refuses all of it.
        EXPECT_THROW(s->add_batch({batch(2, "g1.i0.c1.a0"), batch(1, "g1.i0.c0.a0")}), UsageError);
        s->fail_batch_request("b1:g1.i1.c0.a0", "batch_expired: the batch expired");
        s->add_batch({batch(2, "g1.i1.c0.a0")});   // the failed one, in the next batch
    }
    auto s = open_store(where);
    std::vector<BatchRequest> all = s->batch_requests();
    ASSERT_EQ(all.size(), 3u);
    EXPECT_EQ(all[0].custom_id, "b1:g1.i0.c0.a0");
    EXPECT_EQ(all[0].key, "g1.i0.c0.a0");
    EXPECT_EQ(all[0].batch, 1);
    EXPECT_EQ(all[0].file, "/runs/gelu-batch-1.jsonl");
    EXPECT_EQ(all[0].kind, "mutation");
    EXPECT_EQ(all[0].request, nlohmann::json({{"model", "m"}, {"max_tokens", 100}}));
    EXPECT_EQ(all[0].reserved_tokens, 1234);
    EXPECT_DOUBLE_EQ(all[0].reserved_cost_usd, 0.0625);
    EXPECT_EQ(all[0].error, "");
    EXPECT_GT(all[0].created, 1.7e9);
    EXPECT_EQ(all[1].custom_id, "b1:g1.i1.c0.a0");
    EXPECT_EQ(all[1].error, "batch_expired: the batch expired");
    EXPECT_EQ(all[2].custom_id, "b2:g1.i1.c0.a0");
    EXPECT_EQ(all[2].error, "");
}

// An import of Batch API replies is stored whole or not at all (issue 28: a refused import
// changes nothing): a key stored already, or twice in the import, refuses every call and error.
TEST_P(StoreContract, ImportOfBatchRepliesIsAllOrNothing) {
    auto s = open_store(location());
    BatchRequest b;
    b.custom_id = "r0a1b2c3d.gelu.sm_90:b1:g1.i0.c0.a0";
    b.key = "g1.i0.c0.a0";
    b.batch = 1;
    b.kind = "mutation";
    BatchRequest f = b;
    f.custom_id = "r0a1b2c3d.gelu.sm_90:b1:g1.i1.c0.a0";
    f.key = "g1.i1.c0.a0";
    s->add_batch({b, f});
    auto call = [](const std::string& key) {
        LlmCall c;
        c.key = key;
        c.kind = "mutation";
        c.request = {{"model", "m"}};
        c.reply = "reply of " + key;
        c.prompt_tokens = 10;
        c.completion_tokens = 5;
        c.cost_usd = 0.25;
        return c;
    };
    s->add_llm_call(call("g0.seed.a0"));
    EXPECT_THROW(s->import_batch_replies({call("g1.i0.c0.a0"), call("g0.seed.a0")}, {{f.custom_id, "expired"}}),
                 UsageError);
    EXPECT_THROW(s->import_batch_replies({call("g1.i0.c0.a0"), call("g1.i0.c0.a0")}, {}), UsageError);
    EXPECT_EQ(s->llm_calls().size(), 1u);
    EXPECT_EQ(s->spent().calls, 1);
    for (const auto& r : s->batch_requests()) EXPECT_EQ(r.error, "") << r.custom_id;

    s->import_batch_replies({call("g1.i0.c0.a0")}, {{f.custom_id, "batch_expired: too late"}});
    auto reopened = open_store(location());
    ASSERT_TRUE(reopened->find_llm_call("g1.i0.c0.a0"));
    EXPECT_EQ(reopened->find_llm_call("g1.i0.c0.a0")->reply, "reply of g1.i0.c0.a0");
    EXPECT_EQ(reopened->spent().calls, 2);
    EXPECT_EQ(reopened->spent().prompt_tokens, 20);
    EXPECT_DOUBLE_EQ(reopened->spent().cost_usd, 0.5);
    EXPECT_EQ(reopened->batch_requests()[1].error, "batch_expired: too late");
}

TEST_P(StoreContract, ClaimRejectsADuplicateFromAnotherSlotButNotItsOwnRetry) {
    auto s = open_store(location());
    Program a = s->claim_program(make_program("a", "h1"));
    EXPECT_GT(a.id, 0);
    EXPECT_EQ(a.key, "a");
    Program b = s->claim_program(make_program("b", "h1"));
    EXPECT_EQ(b.key, "a");  // the earlier program is returned; nothing is written
    EXPECT_EQ(b.id, a.id);
    EXPECT_FALSE(s->find_program("b"));
    Program again = s->claim_program(make_program("a", "h1"));  // a resumed slot re-claims itself
    EXPECT_EQ(again.id, a.id);

    a.status = ProgramStatus::ok;
    a.speedup = 1.5;
    a.details = {{"kernel_us", 3.0}};
    a.feedback = "bad byte \xff here";
    EXPECT_EQ(s->put_program(a), a.id);
    auto got = s->get_program(a.id);
    ASSERT_TRUE(got);
    EXPECT_TRUE(got->ok());
    EXPECT_DOUBLE_EQ(got->speedup, 1.5);
    EXPECT_EQ(got->details["kernel_us"], 3.0);
    EXPECT_EQ(got->feedback, "bad byte \xff here");
    EXPECT_EQ(s->programs().size(), 1u);
    // A duplicate of a finished program comes back with its result.
    Program c = s->claim_program(make_program("c", "h1"));
    EXPECT_EQ(c.id, a.id);
    EXPECT_EQ(c.status, ProgramStatus::ok);
}

TEST_P(StoreContract, ProgramsKeepEveryFieldAndTheirOrder) {
    std::string where = location();
    Program p;
    p.key = "g2.i1.c0.a3";
    p.generation = 2;
    p.island = 1;
    p.parent_id = 7;
    p.origin = "repair";
    p.attempt = 3;
    p.source = std::string("__global__ void k() {}\n// nul \0 byte and \xc3\x28 bad utf-8", 60);
    p.norm_hash = "abc123";
    p.status = ProgramStatus::mismatch;
    p.speedup = 0.1 + 0.2;  // not representable in few digits
    p.feedback = "first mismatch at [3, 4]: got 1.5, expected 2";
    p.details = {{"status", "mismatch"}, {"trials", {1, 2, 3}}};
    p.llm_call_id = 42;
    p.created = 1767225600.125;
    int64_t id;
    {
        auto s = open_store(where);
        id = s->put_program(p);
        EXPECT_GT(id, 0);
        for (int i = 0; i < 5; ++i) s->put_program(make_program("k" + std::to_string(i), "h" + std::to_string(i)));
        Program np = make_program("no-code", "");
        np.status = ProgramStatus::no_code;
        s->put_program(np);
    }
    auto s = open_store(where);
    auto got = s->find_program("g2.i1.c0.a3");
    ASSERT_TRUE(got);
    EXPECT_EQ(got->id, id);
    EXPECT_EQ(got->generation, 2);
    EXPECT_EQ(got->island, 1);
    EXPECT_EQ(got->parent_id, 7);
    EXPECT_EQ(got->origin, "repair");
    EXPECT_EQ(got->attempt, 3);
    EXPECT_EQ(got->source, p.source);
    EXPECT_EQ(got->source.size(), 60u);
    EXPECT_EQ(got->norm_hash, "abc123");
    EXPECT_EQ(got->status, ProgramStatus::mismatch);
    EXPECT_EQ(got->speedup, 0.1 + 0.2);  // exactly
    EXPECT_EQ(got->feedback, p.feedback);
    EXPECT_EQ(got->details, p.details);
    EXPECT_EQ(got->llm_call_id, 42);
    EXPECT_EQ(got->created, 1767225600.125);
    EXPECT_TRUE(s->find_program("no-code"));
    EXPECT_TRUE(s->find_program("no-code")->details.is_null());
    EXPECT_FALSE(s->find_program("missing"));
    EXPECT_FALSE(s->get_program(0));
    EXPECT_FALSE(s->get_program(123456));

    // Replacing keeps the id and the creation time.
    Program changed = *got;
    changed.status = ProgramStatus::ok;
    changed.created = 5;
    EXPECT_EQ(s->put_program(changed), id);
    EXPECT_EQ(s->get_program(id)->status, ProgramStatus::ok);
    EXPECT_EQ(s->get_program(id)->created, 1767225600.125);

    auto all = s->programs();
    ASSERT_EQ(all.size(), 7u);
    for (size_t i = 1; i < all.size(); ++i) EXPECT_LT(all[i - 1].id, all[i].id);
    EXPECT_EQ(all[0].key, "g2.i1.c0.a3");
    EXPECT_EQ(all[6].key, "no-code");
}

TEST_P(StoreContract, ChangingAProgramsHashMovesItInTheDuplicateIndex) {
    auto s = open_store(location());
    Program a = s->claim_program(make_program("a", "h1"));
    a.norm_hash = "h2";
    s->put_program(a);
    EXPECT_EQ(s->claim_program(make_program("b", "h1")).key, "b");  // h1 is free again
    EXPECT_EQ(s->claim_program(make_program("c", "h2")).key, "a");
    // Several programs share a hash (a duplicate is stored with the hash it duplicates): the
    // earliest other one that is not itself a duplicate is returned, so a slot resumed while its
    // program was pending re-claims it rather than becoming a duplicate of its duplicate.
    Program d = make_program("d", "h2");
    d.status = ProgramStatus::duplicate;
    s->put_program(d);
    EXPECT_EQ(s->claim_program(make_program("e", "h2")).key, "a");
    EXPECT_EQ(s->claim_program(make_program("a", "h2")).key, "a");  // its own retry
    EXPECT_EQ(s->claim_program(make_program("d", "h2")).key, "a");
    EXPECT_EQ(s->claim_program(make_program("b", "h2")).key, "a");  // b changes hash: a duplicate of a
    Program f = make_program("f", "h3");
    f.status = ProgramStatus::duplicate;
    s->put_program(f);
    EXPECT_EQ(s->claim_program(make_program("g", "h3")).key, "g");  // only a duplicate had h3
}

TEST_P(StoreContract, ClaimsAndCallsAreAtomicAcrossConnections) {
    // Two connections (two machines) race for the same sources and call keys.
    std::string where = location();
    auto s1 = open_store(where), s2 = open_store(where);
    constexpr int kThreads = 8, kHashes = 10;
    std::vector<std::vector<Program>> got(kThreads);
    std::mutex mu;
    std::map<std::string, std::set<int64_t>> call_ids;  // the id each add_llm_call returned, by key
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            Store& s = t % 2 ? *s1 : *s2;
            for (int h = 0; h < kHashes; ++h) {
                got[t].push_back(s.claim_program(
                    make_program("t" + std::to_string(t) + ".h" + std::to_string(h), "hash" + std::to_string(h))));
                LlmCall c;
                c.key = "call" + std::to_string(h);
                c.prompt_tokens = 1;
                const int64_t id = s.add_llm_call(c);  // never fails on a key stored already
                std::lock_guard<std::mutex> lock(mu);
                call_ids[c.key].insert(id);
            }
        });
    }
    for (auto& t : threads) t.join();
    for (int h = 0; h < kHashes; ++h) {
        std::set<int64_t> winners;
        for (int t = 0; t < kThreads; ++t) winners.insert(got[t][h].id);
        EXPECT_EQ(winners.size(), 1u) << "hash " << h;  // everyone agrees on one program
    }
    EXPECT_EQ(s1->programs().size(), static_cast<size_t>(kHashes));
    EXPECT_EQ(call_ids.size(), static_cast<size_t>(kHashes));
    for (const auto& [key, ids] : call_ids) EXPECT_EQ(ids.size(), 1u) << key;  // all got the one stored call
    EXPECT_EQ(s2->spent().calls, kHashes);
    EXPECT_EQ(s2->spent().prompt_tokens, kHashes);
    std::set<int64_t> ids;
    for (const auto& c : s1->llm_calls()) ids.insert(c.id);
    EXPECT_EQ(ids.size(), static_cast<size_t>(kHashes));
}

TEST_P(StoreContract, CommitGenerationReplacesIslandsAndAppendsHistory) {
    auto s = open_store(location());
    EXPECT_EQ(s->last_generation(), -1);
    EXPECT_TRUE(s->islands().empty());
    EXPECT_TRUE(s->history().empty());
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
    EXPECT_EQ(h[1].best_program, 2);
    EXPECT_EQ(h[1].ok, 2);
    EXPECT_EQ(h[1].failed, 1);
    EXPECT_DOUBLE_EQ(h[1].cost_usd, 0.2);
    EXPECT_DOUBLE_EQ(h[1].elapsed_s, 4.0);
    auto ev = s->events();
    ASSERT_EQ(ev.size(), 2u);
    EXPECT_EQ(ev[0].detail["id"], 1);
    EXPECT_EQ(ev[1].kind, "migration");
    EXPECT_TRUE(ev[1].detail.is_null());

    // Generations beyond 9 sort numerically; a recommitted generation replaces its row; the
    // island list may shrink; events accumulate.
    for (int g = 2; g <= 11; ++g) s->commit_generation(Generation{g, 2.0 + g, 3, 3, 1, 100, 0.3, 5.0}, {{{"cells", g}}}, {});
    s->commit_generation(Generation{11, 9.5, 3, 3, 1, 100, 0.3, 5.0}, {}, {Event{11, "stop", {{"why", "x"}}}});
    EXPECT_EQ(s->last_generation(), 11);
    EXPECT_TRUE(s->islands().empty());
    h = s->history();
    ASSERT_EQ(h.size(), 12u);
    for (size_t i = 0; i < h.size(); ++i) EXPECT_EQ(h[i].generation, static_cast<int>(i));
    EXPECT_DOUBLE_EQ(h[11].best_speedup, 9.5);
    EXPECT_EQ(s->events().size(), 3u);
}

TEST_P(StoreContract, RemoveDeletesOnlyThisRun) {
    std::string mine = location("mine"), other = location("other");
    EXPECT_FALSE(store_exists(mine));
    {
        auto a = open_store(mine), b = open_store(other);
        a->put_meta("x", 1);
        b->put_meta("x", 2);
        a->claim_program(make_program("p", "h"));
        a->commit_generation(Generation{0, 1, 1, 1, 0, 0, 0, 0}, {{{"c", 1}}}, {Event{0, "seed", nullptr}});
        LlmCall c;
        c.key = "k";
        a->add_llm_call(c);
    }
    EXPECT_TRUE(store_exists(mine));
    remove_store(mine);
    EXPECT_FALSE(store_exists(mine));
    remove_store(mine);  // nothing there: fine
    auto a = open_store(mine);
    EXPECT_FALSE(a->get_meta("x"));
    EXPECT_TRUE(a->programs().empty());
    EXPECT_EQ(a->spent().calls, 0);
    EXPECT_EQ(a->last_generation(), -1);
    EXPECT_EQ(open_store(other)->get_meta("x"), nlohmann::json(2));
}

// ---- SQLite only ------------------------------------------------------------------------------

TEST(SqliteStore, RejectsAFileThatIsNotAState) {
    TempDir dir;
    write_file_atomic(dir.path() / "junk.db", std::string(4096, 'x'));
    EXPECT_THROW(open_store((dir.path() / "junk.db").string()), UsageError);
    EXPECT_THROW(open_store(""), UsageError);
    EXPECT_THROW(open_store("sqlite:"), UsageError);
}

// ---- Locations ----------------------------------------------------------------------------------

TEST(StoreLocation, ParsesFilesAndRedisUrls) {
    EXPECT_FALSE(parse_store_location("a/b.db").redis);
    EXPECT_EQ(parse_store_location("sqlite:a/b.db").path, "a/b.db");
    EXPECT_EQ(parse_store_location("a/b.db").display(), "a/b.db");

    ::unsetenv("KERNELEVO_REDIS_PASSWORD");
    StoreLocation w = parse_store_location("redis://cache.example.com");
    EXPECT_TRUE(w.redis);
    EXPECT_EQ(w.host, "cache.example.com");
    EXPECT_EQ(w.port, 6379);
    EXPECT_EQ(w.db, 0);
    EXPECT_EQ(w.prefix, "kernelevo");
    EXPECT_EQ(w.key_prefix(), "{kernelevo}:");
    EXPECT_TRUE(w.password.empty());
    EXPECT_EQ(w.display(), "redis://cache.example.com:6379/0?prefix=kernelevo");

    w = parse_store_location("redis://:s3cr%40t-pass@10.0.0.5:7000/3?prefix=gelu:sm_90");
    EXPECT_EQ(w.host, "10.0.0.5");
    EXPECT_EQ(w.port, 7000);
    EXPECT_EQ(w.db, 3);
    EXPECT_EQ(w.prefix, "gelu:sm_90");
    EXPECT_EQ(w.password, "s3cr@t-pass");
    EXPECT_TRUE(w.user.empty());
    EXPECT_EQ(w.display().find("s3cr"), std::string::npos);
    EXPECT_EQ(redact("x s3cr@t-pass y"), "x *** y");  // registered as a secret

    w = parse_store_location("redis://alice:pw-for-alice@[::1]:6380/");
    EXPECT_EQ(w.user, "alice");
    EXPECT_EQ(w.password, "pw-for-alice");
    EXPECT_EQ(w.host, "::1");
    EXPECT_EQ(w.port, 6380);
    EXPECT_EQ(w.display(), "redis://alice@[::1]:6380/0?prefix=kernelevo");

    ::setenv("KERNELEVO_REDIS_PASSWORD", "from-the-environment", 1);
    EXPECT_EQ(parse_store_location("redis://h").password, "from-the-environment");
    EXPECT_EQ(parse_store_location("redis://:in-url@h").password, "in-url");
    ::unsetenv("KERNELEVO_REDIS_PASSWORD");

    for (const char* bad : {"redis://", "redis://h:0", "redis://h:99999", "redis://h:x", "redis://h/x",
                            "redis://h?prefix=", "redis://h?prefix=a*b", "redis://h?prefix=a%7Bb",
                            "redis://h?db=1", "rediss://h", "redis+unix:///tmp/s", "redis://:pw-bad%zz@h"})
        EXPECT_THROW(parse_store_location(bad), UsageError) << bad;
    EXPECT_EQ(error_of([] { parse_store_location("redis://:hunter2-secret@h:x"); }).find("hunter2"), std::string::npos);
}

// ---- Redis only ---------------------------------------------------------------------------------

TEST(RedisStore, UnreachableServerIsAClearErrorNamingHostAndPort) {
    if (!redis_supported()) {
        std::string e = error_of([] { open_store("redis://127.0.0.1:1/0"); });
        EXPECT_NE(e.find("not built with Redis"), std::string::npos) << e;
        return;
    }
    // Port 1: nothing listens there.
    std::string e = error_of([] { open_store("redis://:pw-never-shown@127.0.0.1:1/0?prefix=x"); });
    EXPECT_NE(e.find("127.0.0.1:1"), std::string::npos) << e;
    EXPECT_NE(e.find("cannot connect"), std::string::npos) << e;
    EXPECT_EQ(e.find("pw-never-shown"), std::string::npos) << e;
    e = error_of([] { store_exists("redis://127.0.0.1:1"); });
    EXPECT_NE(e.find("127.0.0.1:1"), std::string::npos) << e;
}

class RedisOnly : public ::testing::Test {
protected:
    void SetUp() override {
        if (!redis_supported()) GTEST_SKIP() << "kernelevo was built without hiredis";
        if (!RedisServer::installed()) GTEST_SKIP() << "redis-server is not installed";
        server = shared_redis();
        ASSERT_TRUE(server);
    }
    RedisServer* server = nullptr;
};

TEST_F(RedisOnly, KeysAreNamespacedPerRun) {
    std::string a = server->url("layout-a"), b = server->url("layout-a:b");  // one prefix extends the other
    {
        auto s = open_store(a), t = open_store(b);
        s->put_meta("who", "a");
        t->put_meta("who", "b");
        LlmCall c;
        c.key = "k";
        s->add_llm_call(c);
        Program p = s->claim_program(make_program("p", "hh"));
        t->claim_program(make_program("p", "hh"));  // not a duplicate: another run
        s->commit_generation(Generation{0, 1, p.id, 1, 0, 0, 0, 0}, {{{"c", 1}}}, {Event{0, "seed", nullptr}});
        EXPECT_EQ(s->programs().size(), 1u);
        EXPECT_EQ(t->programs().size(), 1u);
        EXPECT_EQ(t->get_meta("who"), nlohmann::json("b"));
    }
    std::vector<std::string> keys;
    ASSERT_TRUE(server->call({"KEYS", "{layout-a}:*"}, &keys));
    std::set<std::string> got(keys.begin(), keys.end());
    std::set<std::string> want{"{layout-a}:meta",    "{layout-a}:llm:seq",     "{layout-a}:llm:ids",
                               "{layout-a}:llm:1",   "{layout-a}:spent",       "{layout-a}:prog:seq",
                               "{layout-a}:prog:ids", "{layout-a}:prog:1",     "{layout-a}:prog:hash:hh",
                               "{layout-a}:islands", "{layout-a}:generations", "{layout-a}:events"};
    EXPECT_EQ(got, want);
    remove_store(a);
    keys.clear();
    ASSERT_TRUE(server->call({"KEYS", "{layout-a}:*"}, &keys));
    EXPECT_TRUE(keys.empty());
    EXPECT_EQ(open_store(b)->get_meta("who"), nlohmann::json("b"));
}

TEST_F(RedisOnly, DatabaseNumberSelectsTheDatabase) {
    {
        auto s = open_store(server->url("db-test", 3));
        s->put_meta("x", 1);
    }
    EXPECT_TRUE(store_exists(server->url("db-test", 3)));
    EXPECT_FALSE(store_exists(server->url("db-test", 0)));
    std::string e = error_of([&] { open_store(server->url("db-test", 99999)); });
    EXPECT_NE(e.find("database 99999"), std::string::npos) << e;
}

TEST_F(RedisOnly, RefusesKeysThatAreNotAKernelEvoState) {
    ASSERT_TRUE(server->call({"SET", "{junk}:meta", "hello"}));
    std::string e = error_of([&] { open_store(server->url("junk")); });
    EXPECT_NE(e.find("not a KernelEvo state"), std::string::npos) << e;
    ASSERT_TRUE(server->call({"HSET", "{junk2}:meta", "a", "b"}));
    e = error_of([&] { open_store(server->url("junk2")); });
    EXPECT_NE(e.find("not a KernelEvo state"), std::string::npos) << e;
    ASSERT_TRUE(server->call({"HSET", "{future}:meta", "schema_version", "99"}));
    e = error_of([&] { open_store(server->url("future")); });
    EXPECT_NE(e.find("schema version 99"), std::string::npos) << e;
}

TEST_F(RedisOnly, ReconnectsAfterTheConnectionDropped) {
    // A dropped connection fails the call in progress with a clear error (no crash, no SIGPIPE);
    // the next call reconnects.
    auto s = open_store(server->url("reconnect"));
    s->put_meta("x", 1);
    std::vector<std::string> out;
    ASSERT_TRUE(server->call({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"}, &out));
    bool failed = false;
    try {
        s->put_meta("y", 2);
    } catch (const UsageError& e) {
        failed = true;
        EXPECT_NE(std::string(e.what()).find("127.0.0.1:" + std::to_string(server->port())), std::string::npos)
            << e.what();
        EXPECT_NE(std::string(e.what()).find("rerun"), std::string::npos) << e.what();
    }
    EXPECT_TRUE(failed);
    s->put_meta("y", 2);
    EXPECT_EQ(s->get_meta("y"), nlohmann::json(2));
}

TEST(RedisAuth, PasswordFromTheUrlOrTheEnvironmentNeverShown) {
    if (!redis_supported()) GTEST_SKIP() << "kernelevo was built without hiredis";
    if (!RedisServer::installed()) GTEST_SKIP() << "redis-server is not installed";
    const std::string password = "correct-horse-battery-staple";
    RedisServer server;
    ASSERT_TRUE(server.start(password)) << server.error();
    std::string base = "127.0.0.1:" + std::to_string(server.port());
    ::unsetenv("KERNELEVO_REDIS_PASSWORD");

    std::string e = error_of([&] { open_store("redis://" + base + "/0?prefix=auth"); });
    EXPECT_NE(e.find(base), std::string::npos) << e;
    e = error_of([&] { open_store("redis://:wrong-password-here@" + base + "/0?prefix=auth"); });
    EXPECT_NE(e.find("password was refused"), std::string::npos) << e;
    EXPECT_EQ(e.find("wrong-password-here"), std::string::npos) << e;

    open_store("redis://:" + password + "@" + base + "/0?prefix=auth")->put_meta("x", 1);
    ::setenv("KERNELEVO_REDIS_PASSWORD", password.c_str(), 1);
    EXPECT_EQ(open_store("redis://" + base + "/0?prefix=auth")->get_meta("x"), nlohmann::json(1));
    EXPECT_EQ(open_store("redis://default:" + password + "@" + base + "/0?prefix=auth")->get_meta("x"),
              nlohmann::json(1));  // ACL form, user "default"
    ::unsetenv("KERNELEVO_REDIS_PASSWORD");
    EXPECT_EQ(redact("the password is " + password), "the password is ***");
}

}  // namespace
}  // namespace kevo::store
