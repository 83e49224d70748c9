// Client (budgets, concurrency, cancellation, secrets) and the transcript and replay, against a real
// HTTP server on loopback.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/fs.h"
#include "http_fixture.h"
#include "llm/llm.h"
#include "llm/options.h"
#include "loopback_server.h"

namespace kevo::llm {
namespace {

using namespace http_testing;
using test::chat_body;
using test::ScriptedReply;
using json = nlohmann::json;

// ---- Client ---------------------------------------------------------------------------------------

TEST_F(LlmHttp, TokenCapStopsNewRequests) {
    server.set_default({200, {}, chat_body("ok", "stop", 10, 5)});
    ClientConfig cc;
    cc.models = {{"test/model", 1}};
    cc.max_in_flight = 1;
    // Each request reserves 185 tokens (62 for the prompt: its bytes plus 16 per message; 123 max
    // tokens) and uses 15.
    cc.max_total_tokens = 210;
    Client client(std::make_shared<HttpProvider>(config()), cc);
    ChatRequest r = request();
    r.model.clear();   // the client picks its only model
    EXPECT_EQ(client.chat(r).content, "ok");   // 15 used: 15 + 185 fit
    EXPECT_EQ(client.chat(r).content, "ok");   // 30 used: 30 + 185 do not
    auto e = expect_throw<BudgetExceeded>([&] { client.chat(r); });
    EXPECT_NE(std::string(e.what()).find("token budget: 30 tokens used and 0 reserved for requests in flight of 210"),
              std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("may use up to 185"), std::string::npos) << e.what();
    EXPECT_EQ(server.requests().size(), 2u);
    EXPECT_EQ(json::parse(server.requests()[0].body)["model"], "test/model");
    Totals t = client.totals();
    EXPECT_EQ(t.requests, 2);
    EXPECT_EQ(t.prompt_tokens, 20);
    EXPECT_EQ(t.completion_tokens, 10);
    EXPECT_NO_THROW(client.check_budget());   // the cap itself is not reached
}

TEST_F(LlmHttp, CostCapStopsNewRequests) {
    server.set_default({200, {}, chat_body("ok", "stop", 10, 5, 0.01)});
    ClientConfig cc;
    cc.max_in_flight = 1;
    cc.max_cost_usd = 0.015;
    Client client(std::make_shared<HttpProvider>(config()), cc);
    client.chat(request());   // no price known yet: it goes alone
    // Now $0.01 per 15 tokens is known: the next request may cost up to 185 tokens' worth.
    auto e = expect_throw<BudgetExceeded>([&] { client.chat(request()); });
    EXPECT_NE(std::string(e.what()).find("cost budget: $0.0100 spent and $0.0000 reserved for requests in flight of "
                                         "$0.0150 (the budget in US dollars); the next request may cost up to $0.1233"),
              std::string::npos) << e.what();
    EXPECT_EQ(server.requests().size(), 1u);
    EXPECT_NEAR(client.totals().cost_usd, 0.01, 1e-12);

    // At the cap itself, the message says it is reached.
    ClientConfig at_cap = cc;
    at_cap.max_cost_usd = 0.01;
    Client spent(std::make_shared<HttpProvider>(config()), at_cap);
    spent.chat(request());
    auto reached = expect_throw<BudgetExceeded>([&] { spent.chat(request()); });
    EXPECT_NE(std::string(reached.what()).find("cost budget reached: $0.0100 of $0.0100 spent"), std::string::npos)
        << reached.what();
    EXPECT_THROW(spent.check_budget(), BudgetExceeded);
}

TEST_F(LlmHttp, APriceBoundsTheCostAndPricesRepliesWithoutOne) {
    server.set_default({200, {}, chat_body("ok", "stop", 50, 100)});   // no cost reported
    ClientConfig cc;
    cc.max_in_flight = 4;
    cc.max_cost_usd = 0.01;
    cc.price = Price{2, 8};   // USD per million tokens: a request reserves 62*2e-6 + 123*8e-6 = $0.001108
    Client client(std::make_shared<HttpProvider>(config()), cc);
    std::vector<std::future<ChatResponse>> futures;
    for (int i = 0; i < 12; ++i) futures.push_back(client.submit(request()));
    int answered = 0, refused = 0;
    for (auto& f : futures) {
        try {
            ChatResponse r = f.get();
            EXPECT_TRUE(r.usage.cost_known);
            EXPECT_NEAR(r.usage.cost_usd, 50 * 2e-6 + 100 * 8e-6, 1e-12);   // $0.0009, priced as counted
            ++answered;
        } catch (const BudgetExceeded&) {
            ++refused;
        }
    }
    // Sent while $0.0009 per reply spent plus $0.001108 per request in flight fit in $0.01.
    EXPECT_EQ(answered, 10);
    EXPECT_EQ(refused, 2);
    EXPECT_EQ(static_cast<int>(server.requests().size()), answered);
    EXPECT_LE(client.totals().cost_usd, 0.01);
}

TEST_F(LlmHttp, TruncatedRepliesCountAgainstTheBudget) {
    server.set_default({200, {}, chat_body("partial", "length", 10, 100)});
    ClientConfig cc;
    cc.max_total_tokens = 250;   // 185 reserved per request
    Client client(std::make_shared<HttpProvider>(config()), cc);
    EXPECT_THROW(client.chat(request()), TruncatedReply);
    EXPECT_THROW(client.chat(request()), BudgetExceeded);   // 110 used + 185
    EXPECT_EQ(client.totals().failures, 1);
    EXPECT_EQ(client.totals().total_tokens(), 110);
}

TEST_F(LlmHttp, ManyRequestsInFlightNeverOverrunTheTokenCap) {
    server.set_default({200, {}, chat_body("ok", "stop", 10, 5), 0.05});
    ClientConfig cc;
    cc.max_in_flight = 8;
    cc.max_total_tokens = 185 * 4;   // four reservations at once, at first
    Client client(std::make_shared<HttpProvider>(config()), cc);
    std::vector<std::future<ChatResponse>> futures;
    for (int i = 0; i < 60; ++i) futures.push_back(client.submit(request("request " + std::to_string(i % 10))));
    int answered = 0, refused = 0;
    for (auto& f : futures) {
        try {
            f.get();
            ++answered;
        } catch (const BudgetExceeded&) {
            ++refused;
        }
    }
    EXPECT_EQ(answered + refused, 60);
    EXPECT_EQ(static_cast<int>(server.requests().size()), answered);
    // Everything that went out, at the most it could have used, fits in the cap; and the cap was
    // used up to within one reservation.
    EXPECT_LE(client.totals().total_tokens() , cc.max_total_tokens);
    EXPECT_GT(client.totals().total_tokens() + 185 + 15, cc.max_total_tokens);
    EXPECT_GE(client.max_reserved_at_once(), 2) << "requests did not run concurrently";
    EXPECT_LE(client.max_reserved_at_once(), 4);
    EXPECT_GE(server.max_concurrent(), 2);
}

TEST_F(LlmHttp, AbsurdUsageIsNeverCounted) {
    ClientConfig cc;
    cc.max_in_flight = 1;
    cc.log = log.fn();
    Client client(std::make_shared<HttpProvider>(config()), cc);
    auto reply = [](const json& usage) {
        json j = json::parse(chat_body("ok"));
        j["usage"] = usage;
        return ScriptedReply{200, {}, j.dump()};
    };
    server.push(reply({{"prompt_tokens", -5}, {"completion_tokens", 3}}));
    server.push(reply({{"prompt_tokens", 1e30}, {"completion_tokens", 3}}));
    server.push(reply({{"prompt_tokens", 2.5}, {"completion_tokens", 3}}));
    server.push(reply({{"prompt_tokens", 10}, {"completion_tokens", 3}, {"cost", -0.5}}));
    server.push(reply({{"prompt_tokens", 10}, {"completion_tokens", 3}, {"cost", 1e9}}));
    server.push(reply({{"prompt_tokens", 10}, {"completion_tokens", 3}, {"cost", 0.25}}));   // a sane one
    for (int i = 0; i < 5; ++i) {
        ChatResponse r = client.chat(request());
        EXPECT_EQ(r.usage.prompt_tokens, 62) << i << ": the reservation is counted instead";
        EXPECT_EQ(r.usage.completion_tokens, 123) << i;
    }
    EXPECT_EQ(client.totals().total_tokens(), 5 * 185);
    EXPECT_EQ(client.totals().cost_usd, 0);
    ChatResponse sane = client.chat(request());
    EXPECT_EQ(sane.usage.prompt_tokens, 10);
    EXPECT_DOUBLE_EQ(client.totals().cost_usd, 0.25);
    std::string notes = log.all();
    EXPECT_NE(notes.find("ignored the usage the LLM provider reported (token counts that are negative or not whole "
                         "numbers (prompt -1, completion 3)); counting the request's reserved maximum instead: 185 tokens"),
              std::string::npos) << notes;
    EXPECT_NE(notes.find("a negative or non-finite cost"), std::string::npos) << notes;
    EXPECT_NE(notes.find("a cost of $1000000000.0000 for one request"), std::string::npos) << notes;
}

TEST_F(LlmHttp, SeveralRequestsInFlightWithinTheLimit) {
    server.set_default({200, {}, chat_body("ok"), 0.3});
    ClientConfig cc;
    cc.max_in_flight = 3;
    Client client(std::make_shared<HttpProvider>(config()), cc);
    auto start = std::chrono::steady_clock::now();
    std::vector<std::future<ChatResponse>> futures;
    for (int i = 0; i < 9; ++i) futures.push_back(client.submit(request("request " + std::to_string(i))));
    for (auto& f : futures) EXPECT_EQ(f.get().content, "ok");
    double elapsed = seconds_since(start);
    EXPECT_EQ(server.max_concurrent(), 3) << "the in-flight limit was not used or not respected";
    EXPECT_GE(elapsed, 0.85);   // 3 waves of 0.3 s
    EXPECT_LT(elapsed, 2.5);
    EXPECT_EQ(client.totals().requests, 9);
}

TEST_F(LlmHttp, DestroyingTheClientCancelsRetryWaits) {
    server.set_default({503, {{"Retry-After", "30"}}, "busy"});
    HttpConfig c = config();
    c.retry_total_max_s = 100;
    auto start = std::chrono::steady_clock::now();
    std::future<ChatResponse> f;
    {
        Client client(std::make_shared<HttpProvider>(c), ClientConfig{});
        f = client.submit(request());
        while (server.requests().empty()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        client.submit(request());
    }
    EXPECT_THROW(f.get(), Cancelled);
    EXPECT_LT(seconds_since(start), 3);
}

// The key never reaches a log or an error message; but what the model said is data, recorded and
// replayed byte for byte even where it holds the key's text (issue 37: a reply altered by
// redaction corrupts the kernel in it).
TEST_F(LlmHttp, TheKeyNeverReachesLogsOrErrorsAndTheExchangeIsRecordedAsItWas) {
    TempDir dir("kevo-llm-test");
    const auto transcript = dir.path() / "t.jsonl";
    server.push({429, {{"Retry-After", "0"}}, R"({"error":{"message":"key )" + kKey + R"( is rate limited"}})"});
    server.push({200, {}, chat_body("echo: " + kKey)});
    server.push({401, {}, R"({"error":{"message":"Incorrect API key provided: )" + kKey + R"("}})"});
    ClientConfig cc;
    cc.transcript = transcript;
    cc.log = log.fn();
    std::string errors;
    {
        Client client(std::make_shared<HttpProvider>(config()), cc);
        ChatResponse r = client.chat(request("my key is " + kKey));
        // The reply itself is not redacted for the caller (it is the model's text) ...
        EXPECT_EQ(r.content, "echo: " + kKey);
        try {
            client.chat(request());
        } catch (const LlmError& e) {
            errors = e.what();
        }
    }
    ASSERT_FALSE(errors.empty());
    // ... but every message and log line is.
    EXPECT_EQ(errors.find(kKey), std::string::npos) << errors;
    EXPECT_EQ(log.all().find(kKey), std::string::npos) << log.all();
    EXPECT_NE(log.all().find("HTTP 429"), std::string::npos) << log.all();
    // The transcript holds the exchange as it was (its error message redacted), and replays it so.
    std::string recorded = read_file(transcript);
    EXPECT_NE(recorded.find("my key is " + kKey), std::string::npos) << recorded;
    EXPECT_NE(recorded.find("echo: " + kKey), std::string::npos) << recorded;
    EXPECT_EQ(recorded.find("Incorrect API key provided: " + kKey), std::string::npos) << recorded;
    EXPECT_NE(recorded.find("Incorrect API key provided: ***"), std::string::npos) << recorded;
    ReplayProvider replay(transcript);
    EXPECT_EQ(replay.chat(request("my key is " + kKey)).content, "echo: " + kKey);
    // The key was sent where it belongs.
    for (const auto& req : server.requests()) EXPECT_EQ(req.headers.at("authorization"), "Bearer " + kKey);
}

// ---- Transcript and replay ------------------------------------------------------------------------

TEST_F(LlmHttp, TranscriptRecordsEveryExchangeAndReplaysThem) {
    TempDir dir("kevo-llm-test");
    const auto transcript = dir.path() / "sub" / "t.jsonl";
    server.push({200, {}, chat_body("first", "stop", 1, 2, 0.5)});
    server.push({200, {}, chat_body("cut", "length", 3, 4)});
    server.push({400, {}, R"({"error":{"message":"bad temperature"}})"});
    ChatRequest a = request("a"), b = request("b"), c = request("c");
    {
        ClientConfig cc;
        cc.max_in_flight = 1;
        cc.transcript = transcript;
        Client client(std::make_shared<HttpProvider>(config()), cc);
        client.chat(a);
        EXPECT_THROW(client.chat(b), TruncatedReply);
        EXPECT_THROW(client.chat(c), HttpError);
    }
    // One flushed JSON line per exchange.
    std::string text = read_file(transcript);
    std::vector<json> lines;
    for (size_t pos = 0, end; (end = text.find('\n', pos)) != std::string::npos; pos = end + 1)
        lines.push_back(json::parse(text.substr(pos, end - pos)));
    ASSERT_EQ(lines.size(), 3u);
    EXPECT_EQ(lines[0]["request"]["messages"][1]["content"], "a");
    EXPECT_EQ(lines[0]["request_hash"], request_hash(a));
    EXPECT_EQ(lines[0]["response"]["content"], "first");
    EXPECT_EQ(lines[0]["usage"]["cost_usd"], 0.5);
    EXPECT_TRUE(lines[0]["error"].is_null());
    EXPECT_GT(lines[0]["latency_s"].get<double>(), 0);
    EXPECT_EQ(lines[1]["error"]["kind"], "truncated");
    EXPECT_EQ(lines[1]["response"]["content"], "cut");
    EXPECT_EQ(lines[2]["error"]["kind"], "http");
    EXPECT_EQ(lines[2]["error"]["status"], 400);

    // By hash: any order.
    ReplayProvider by_hash(transcript);
    EXPECT_THROW(by_hash.chat(c), HttpError);
    auto cut = expect_throw<TruncatedReply>([&] { by_hash.chat(b); });
    EXPECT_EQ(cut.response.content, "cut");
    ChatResponse r = by_hash.chat(a);
    EXPECT_EQ(r.content, "first");
    EXPECT_TRUE(r.usage.cost_known);
    EXPECT_EQ(r.usage.completion_tokens, 2);
    EXPECT_EQ(by_hash.remaining(), 0u);
    auto none = expect_throw<LlmError>([&] { by_hash.chat(a); });
    EXPECT_NE(std::string(none.what()).find("no further exchange"), std::string::npos) << none.what();
    EXPECT_THROW(by_hash.chat(request("never asked")), LlmError);

    // In order: whatever is asked.
    ReplayProvider in_order(transcript, ReplayProvider::Mode::InOrder);
    EXPECT_EQ(in_order.chat(c).content, "first");
    EXPECT_THROW(in_order.chat(c), TruncatedReply);
    EXPECT_THROW(in_order.chat(c), HttpError);
    EXPECT_THROW(in_order.chat(c), LlmError);
}

TEST_F(LlmHttp, MakeClientBuildsAClientFromTheSharedOptions) {
    server.set_default({200, {}, chat_body("ok")});
    LlmOptions o;
    o.url = server.base_url();
    o.models = {"a/one:3", "b/two:1"};
    o.model_seed = 7;
    o.backoff_initial_s = 0.01;
    auto client = make_client(o, {});
    ASSERT_EQ(client->config().models.size(), 2u);
    EXPECT_EQ(client->config().models[0].name, "a/one");
    EXPECT_EQ(client->config().models[0].weight, 3);
    ChatRequest r = request();
    r.model.clear();
    client->chat(r);
    std::string model = json::parse(server.requests().at(0).body)["model"];
    EXPECT_TRUE(model == "a/one" || model == "b/two") << model;

    o.models.clear();
    EXPECT_THROW(make_client(o, {}), UsageError);
}

}  // namespace
}  // namespace kevo::llm
