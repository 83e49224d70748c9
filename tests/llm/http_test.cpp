// HttpProvider against a real HTTP server on loopback: requests, replies, retries, errors.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "http_fixture.h"
#include "llm/llm.h"
#include "loopback_server.h"

namespace kevo::llm {
namespace {

using namespace http_testing;
using test::chat_body;
using test::LoopbackServer;
using test::ScriptedReply;
using json = nlohmann::json;

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
    EXPECT_NE(std::string(e.what()).find("check the LLM's URL"), std::string::npos) << e.what();
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

}  // namespace
}  // namespace kevo::llm
