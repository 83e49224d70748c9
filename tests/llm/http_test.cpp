// HttpProvider and Client against a real HTTP server on loopback.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/fs.h"
#include "llm/llm.h"
#include "llm/options.h"
#include "loopback_server.h"

namespace kevo::llm {
namespace {

using test::chat_body;
using test::LoopbackServer;
using test::ScriptedReply;
using json = nlohmann::json;

const std::string kKey = "sk-test-Zq8uV3rT5yW7-secret-key";

double seconds_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

struct Log {
    std::mutex mu;
    std::vector<std::string> lines;
    LogFn fn() {
        return [this](const std::string& line) {
            std::lock_guard<std::mutex> lock(mu);
            lines.push_back(line);
        };
    }
    std::string all() {
        std::lock_guard<std::mutex> lock(mu);
        std::string out;
        for (const auto& l : lines) out += l + "\n";
        return out;
    }
};

class LlmHttp : public ::testing::Test {
protected:
    HttpConfig config() {
        HttpConfig c;
        c.base_url = server.base_url();
        c.api_key = kKey;
        c.connect_timeout_s = 2;
        c.read_timeout_s = 2;
        c.max_attempts = 3;
        c.backoff_initial_s = 0.01;
        c.backoff_max_s = 0.05;
        c.retry_total_max_s = 5;
        c.log = log.fn();
        return c;
    }
    static ChatRequest request(const std::string& prompt = "hello") {
        ChatRequest r;
        r.model = "test/model";
        r.messages = {{"system", "You write CUDA."}, {"user", prompt}};
        r.temperature = 0.25;
        r.max_tokens = 123;
        r.seed = 42;
        return r;
    }
    // Runs `f`, expecting it to throw E; returns the exception.
    template <class E, class F>
    static E expect_throw(F f) {
        try {
            f();
        } catch (const E& e) {
            return e;
        } catch (const std::exception& e) {
            ADD_FAILURE() << "wrong exception type: " << e.what();
            throw;
        }
        ADD_FAILURE() << "no exception";
        throw std::logic_error("no exception");
    }

    LoopbackServer server;
    Log log;
};

TEST_F(LlmHttp, SuccessSendsTheRequestAndParsesTheReply) {
    server.push({200, {}, chat_body("the answer", "stop", 17, 4, 0.00123, "vendor/model-v2")});
    HttpProvider provider(config());
    ChatResponse r = provider.chat(request());
    EXPECT_EQ(r.content, "the answer");
    EXPECT_EQ(r.finish_reason, "stop");
    EXPECT_EQ(r.model, "vendor/model-v2");
    EXPECT_EQ(r.usage.prompt_tokens, 17);
    EXPECT_EQ(r.usage.completion_tokens, 4);
    EXPECT_TRUE(r.usage.cost_known);
    EXPECT_DOUBLE_EQ(r.usage.cost_usd, 0.00123);
    EXPECT_EQ(r.attempts, 1);
    EXPECT_GT(r.latency_s, 0);

    auto reqs = server.requests();
    ASSERT_EQ(reqs.size(), 1u);
    EXPECT_EQ(reqs[0].method, "POST");
    EXPECT_EQ(reqs[0].path, "/v1/chat/completions");
    EXPECT_EQ(reqs[0].headers["authorization"], "Bearer " + kKey);
    EXPECT_EQ(reqs[0].headers["content-type"], "application/json");
    json body = json::parse(reqs[0].body);
    EXPECT_EQ(body["model"], "test/model");
    EXPECT_EQ(body["messages"].size(), 2u);
    EXPECT_EQ(body["messages"][0]["role"], "system");
    EXPECT_EQ(body["messages"][1]["content"], "hello");
    EXPECT_DOUBLE_EQ(body["temperature"].get<double>(), 0.25);
    EXPECT_EQ(body["max_tokens"], 123);
    EXPECT_EQ(body["seed"], 42);
    EXPECT_EQ(body["stream"], false);
}

TEST_F(LlmHttp, NoKeyMeansNoAuthorizationHeaderAndNoCostWhenUnreported) {
    server.push({200, {}, chat_body("ok")});
    HttpConfig c = config();
    c.api_key.clear();
    ChatResponse r = HttpProvider(c).chat(request());
    EXPECT_FALSE(r.usage.cost_known);
    EXPECT_EQ(server.requests().at(0).headers.count("authorization"), 0u);
}

TEST_F(LlmHttp, RetriesA429HonouringRetryAfter) {
    server.push({429, {{"Retry-After", "1"}}, R"({"error":{"message":"slow down"}})"});
    server.push({200, {}, chat_body("after the wait")});
    HttpProvider provider(config());
    auto start = std::chrono::steady_clock::now();
    ChatResponse r = provider.chat(request());
    double elapsed = seconds_since(start);
    EXPECT_EQ(r.content, "after the wait");
    EXPECT_EQ(r.attempts, 2);
    EXPECT_GE(elapsed, 0.95) << "Retry-After: 1 was not honoured (backoff alone is 0.01 s)";
    EXPECT_LT(elapsed, 3);
    EXPECT_EQ(server.requests().size(), 2u);
    EXPECT_NE(log.all().find("HTTP 429"), std::string::npos) << log.all();
    EXPECT_NE(log.all().find("retrying in 1 s"), std::string::npos) << log.all();
}

TEST_F(LlmHttp, GivesUpWhenRetryAfterExceedsTheRetryCap) {
    server.push({429, {{"Retry-After", "3600"}}, R"({"error":{"message":"come back in an hour"}})"});
    HttpProvider provider(config());
    auto start = std::chrono::steady_clock::now();
    auto e = expect_throw<HttpError>([&] { provider.chat(request()); });
    EXPECT_LT(seconds_since(start), 1.5);
    EXPECT_EQ(e.status, 429);
    EXPECT_TRUE(e.retryable);
    EXPECT_NE(std::string(e.what()).find("retry cap"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("come back in an hour"), std::string::npos) << e.what();
    EXPECT_EQ(server.requests().size(), 1u);
}

TEST_F(LlmHttp, Retries500ThenSucceeds) {
    server.push({500, {}, R"({"error":{"message":"upstream exploded"}})"});
    server.push({200, {}, chat_body("recovered")});
    ChatResponse r = HttpProvider(config()).chat(request());
    EXPECT_EQ(r.content, "recovered");
    EXPECT_EQ(r.attempts, 2);
    EXPECT_EQ(server.requests().size(), 2u);
}

TEST_F(LlmHttp, PersistentServerErrorsExhaustTheAttempts) {
    server.set_default({503, {}, "<html>Service Unavailable</html>"});
    auto e = expect_throw<HttpError>([&] { HttpProvider(config()).chat(request()); });
    EXPECT_EQ(e.status, 503);
    EXPECT_TRUE(e.retryable);
    EXPECT_NE(std::string(e.what()).find("gave up after 3 attempts"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("Service Unavailable"), std::string::npos) << e.what();
    EXPECT_EQ(server.requests().size(), 3u);
}

TEST_F(LlmHttp, AReplySlowerThanTheReadTimeoutFails) {
    server.set_default({200, {}, chat_body("too late"), 3.0});
    HttpConfig c = config();
    c.read_timeout_s = 0.3;
    c.max_attempts = 2;
    auto start = std::chrono::steady_clock::now();
    auto e = expect_throw<LlmError>([&] { HttpProvider(c).chat(request()); });
    EXPECT_LT(seconds_since(start), 2.0);
    EXPECT_TRUE(e.retryable);
    EXPECT_NE(std::string(e.what()).find("read timeout"), std::string::npos) << e.what();
    EXPECT_EQ(server.requests().size(), 2u) << "a timeout is retried";
}

TEST_F(LlmHttp, MalformedJsonIsATypedErrorAndNotRetried) {
    server.push({200, {}, "{\"choices\": [ this is not json"});
    auto e = expect_throw<MalformedReply>([&] { HttpProvider(config()).chat(request()); });
    EXPECT_NE(std::string(e.what()).find("not a JSON object"), std::string::npos) << e.what();
    EXPECT_EQ(server.requests().size(), 1u);
}

TEST_F(LlmHttp, EmptyChoicesIsATypedError) {
    server.push({200, {}, R"({"model":"m","choices":[]})"});
    auto e = expect_throw<EmptyReply>([&] { HttpProvider(config()).chat(request()); });
    EXPECT_NE(std::string(e.what()).find("no choices"), std::string::npos) << e.what();
}

TEST_F(LlmHttp, Unauthorized401IsNotRetriedAndSaysWhy) {
    // Servers like to echo the key they rejected: it must not reach the message.
    server.set_default({401, {}, R"({"error":{"message":"Incorrect API key provided: )" + kKey + R"("}})"});
    auto e = expect_throw<HttpError>([&] { HttpProvider(config()).chat(request()); });
    std::string what = e.what();
    EXPECT_EQ(e.status, 401);
    EXPECT_FALSE(e.retryable);
    EXPECT_EQ(server.requests().size(), 1u);
    EXPECT_NE(what.find("HTTP 401"), std::string::npos) << what;
    EXPECT_NE(what.find("API key was rejected"), std::string::npos) << what;
    EXPECT_NE(what.find("Incorrect API key provided: ***"), std::string::npos) << what;
    EXPECT_EQ(what.find(kKey), std::string::npos) << what;
}

TEST_F(LlmHttp, UnknownModel404NamesTheModel) {
    server.set_default({404, {}, R"({"error":{"message":"No endpoints found"}})"});
    auto e = expect_throw<HttpError>([&] { HttpProvider(config()).chat(request()); });
    EXPECT_FALSE(e.retryable);
    EXPECT_EQ(server.requests().size(), 1u);
    EXPECT_NE(std::string(e.what()).find("unknown model 'test/model'"), std::string::npos) << e.what();
}

TEST_F(LlmHttp, CutOffByTheTokenLimitIsATypedErrorWithThePartialReply) {
    server.push({200, {}, chat_body("__global__ void k(", "length", 50, 123)});
    auto e = expect_throw<TruncatedReply>([&] { HttpProvider(config()).chat(request()); });
    EXPECT_FALSE(e.retryable);
    EXPECT_EQ(e.response.content, "__global__ void k(");
    EXPECT_EQ(e.response.usage.completion_tokens, 123);
    EXPECT_NE(std::string(e.what()).find("max_tokens 123"), std::string::npos) << e.what();
}

TEST_F(LlmHttp, AServerNeverReachedFailsAtOnceWithoutRetries) {
    HttpConfig c = config();
    {
        LoopbackServer closed;   // a port that was just free
        c.base_url = closed.base_url();
    }
    c.max_attempts = 6;
    c.backoff_initial_s = 5;     // a retry would show in the time taken
    auto t0 = std::chrono::steady_clock::now();
    auto e = expect_throw<LlmError>([&] { HttpProvider(c).chat(request()); });
    EXPECT_LT(seconds_since(t0), 2.0);
    EXPECT_FALSE(e.retryable);
    EXPECT_NE(std::string(e.what()).find("failed"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("not retried"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--llm-url"), std::string::npos) << e.what();
    EXPECT_EQ(log.all().find("retrying"), std::string::npos) << log.all();
}

TEST_F(LlmHttp, ConnectionRefusedAfterASuccessIsRetried) {
    auto flaky = std::make_unique<LoopbackServer>();
    flaky->push({200, {}, chat_body("first", "stop", 1, 1)});
    HttpConfig c = config();
    c.base_url = flaky->base_url();
    c.max_attempts = 2;
    HttpProvider provider(c);
    EXPECT_EQ(provider.chat(request()).content, "first");
    flaky.reset();               // the server goes away mid-run: a network hiccup, worth retrying
    auto e = expect_throw<LlmError>([&] { provider.chat(request()); });
    EXPECT_TRUE(e.retryable);
    EXPECT_NE(std::string(e.what()).find("gave up after 2 attempts"), std::string::npos) << e.what();
}

TEST_F(LlmHttp, RejectsABadUrl) {
    HttpConfig c = config();
    c.base_url = "openrouter.ai/api/v1";
    EXPECT_THROW(HttpProvider{c}, UsageError);
}

// A reply over the size limit (64 MB) will be as large next time: "reply too large", sent once.
// With a Content-Length (refused before the body), and without one (the body counted as it comes).
TEST_F(LlmHttp, AReplyOverTheSizeLimitSaysSoAndIsNotRetried) {
    const std::string huge = chat_body(std::string(70u << 20, 'x'));
    for (bool with_length : {true, false}) {
        SCOPED_TRACE(with_length ? "Content-Length given" : "close-delimited");
        LoopbackServer big;
        ScriptedReply reply{200, {}, huge};
        reply.no_content_length = !with_length;
        big.set_default(reply);
        HttpConfig c = config();
        c.base_url = big.base_url();
        c.read_timeout_s = 30;
        auto e = expect_throw<LlmError>([&] { HttpProvider(c).chat(request()); });
        const std::string what = e.what();
        EXPECT_NE(what.find("reply too large (over 64 MB)"), std::string::npos) << what;
        EXPECT_EQ(what.find("Failure writing output"), std::string::npos) << what;
        EXPECT_FALSE(e.retryable);
        EXPECT_EQ(big.requests().size(), 1u);
        EXPECT_EQ(log.all().find("retrying"), std::string::npos) << log.all();
    }
}

// What the server says reaches terminals: its control characters arrive escaped, never raw.
TEST_F(LlmHttp, AServersMessageHasItsControlCharactersEscaped) {
    server.set_default({400, {}, json{{"error", {{"message", "bad \x1b[2J\x1b]0;pwned\x07 request"}}}}.dump()});
    auto e = expect_throw<HttpError>([&] { HttpProvider(config()).chat(request()); });
    const std::string what = e.what();
    EXPECT_EQ(what.find('\x1b'), std::string::npos) << what;
    EXPECT_EQ(what.find('\x07'), std::string::npos) << what;
    EXPECT_NE(what.find("bad \\x1b[2J\\x1b]0;pwned\\x07 request"), std::string::npos) << what;
}

// Credentials in the base URL: never in a message; a query stays after the endpoint's path.
TEST_F(LlmHttp, CredentialsInTheUrlNeverReachAMessage) {
    const std::string password = "pw-Hunter2-Zx9q", query_key = "qk-Query-Secret-77";
    std::string url = server.base_url();   // http://127.0.0.1:PORT/v1
    url.insert(url.find("//") + 2, "kevo:" + password + "@");
    url += "?api_key=" + query_key;
    server.set_default({500, {}, R"({"error":{"message":"upstream failed"}})"});
    HttpConfig c = config();
    c.base_url = url;
    c.max_attempts = 2;
    auto e = expect_throw<HttpError>([&] { HttpProvider(c).chat(request()); });
    const std::string what = e.what(), logged = log.all();
    for (const std::string& secret : {password, query_key}) {
        EXPECT_EQ(what.find(secret), std::string::npos) << what;
        EXPECT_EQ(logged.find(secret), std::string::npos) << logged;
    }
    EXPECT_NE(what.find("http://***@127.0.0.1:"), std::string::npos) << what;
    EXPECT_NE(what.find("/v1/chat/completions?api_key=***"), std::string::npos) << what;
    ASSERT_EQ(server.requests().size(), 2u);
    EXPECT_EQ(server.requests()[0].path, "/v1/chat/completions?api_key=" + query_key);
}

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
                                         "$0.0150 (--budget-usd); the next request may cost up to $0.1233"),
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
