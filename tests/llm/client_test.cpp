// Client logic without a network: model choice, key lookup.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <thread>

#include "common/error.h"
#include "common/process.h"
#include "common/text.h"
#include "llm/budget.h"
#include "llm/llm.h"
#include "llm/options.h"

namespace kevo::llm {
namespace {

// Answers with the model it was asked for.
struct EchoModel : Provider {
    ChatResponse chat(const ChatRequest& r) override {
        ChatResponse out;
        out.content = out.model = r.model;
        out.usage.prompt_tokens = 1;
        return out;
    }
};

TEST(LlmModelChoice, ParsesNamesAndWeights) {
    EXPECT_EQ(parse_model_choice("google/gemini-3-flash:3").name, "google/gemini-3-flash");
    EXPECT_EQ(parse_model_choice("google/gemini-3-flash:3").weight, 3);
    EXPECT_EQ(parse_model_choice("z-ai/glm-5:0.5").weight, 0.5);
    EXPECT_EQ(parse_model_choice("openai/gpt-oss-120b:free").name, "openai/gpt-oss-120b:free");
    EXPECT_EQ(parse_model_choice("qwen2.5-coder:7b").name, "qwen2.5-coder:7b");
    EXPECT_EQ(parse_model_choice("openai/gpt-oss-120b:free:2").name, "openai/gpt-oss-120b:free");
    EXPECT_EQ(parse_model_choice("plain").weight, 1);
    EXPECT_THROW(parse_model_choice("m:0"), UsageError);
    EXPECT_THROW(parse_model_choice("m:-1"), UsageError);
    EXPECT_THROW(parse_model_choice(":2"), UsageError);
}

TEST(LlmModelChoice, PicksInProportionToTheWeights) {
    ClientConfig cc;
    cc.models = {{"heavy", 3}, {"light", 1}};
    cc.seed = 1;
    Client client(std::make_shared<EchoModel>(), cc);
    int heavy = 0;
    for (int i = 0; i < 400; ++i) heavy += client.chat({}).content == "heavy";
    EXPECT_GT(heavy, 260);
    EXPECT_LT(heavy, 340);
    EXPECT_EQ(client.chat(ChatRequest{"explicit", {}, 0, 1, {}}).content, "explicit");
    EXPECT_EQ(client.totals().requests, 401);
}

TEST(LlmModelChoice, NoModelAnywhereIsAnError) {
    Client client(std::make_shared<EchoModel>(), ClientConfig{});
    EXPECT_THROW(client.chat({}), LlmError);
}

// Takes 50 ms per request, reports 10 + 5 tokens and $0.001, and counts the requests in flight.
struct SlowPricedModel : Provider {
    std::atomic<int> running{0}, most{0}, first_alone{-1}, calls{0};
    ChatResponse chat(const ChatRequest& r) override {
        int now = ++running;
        for (int seen = most; now > seen && !most.compare_exchange_weak(seen, now);) {}
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        if (calls++ == 0) first_alone = running.load() == 1;
        --running;
        ChatResponse out;
        out.content = "ok";
        out.model = r.model;
        out.usage = {10, 5, 0.001, true};
        return out;
    }
};

TEST(LlmBudget, UnderACostCapTheFirstRequestOfUnknownPriceGoesAlone) {
    auto model = std::make_shared<SlowPricedModel>();
    ClientConfig cc;
    cc.models = {{"m", 1}};
    cc.max_in_flight = 4;
    cc.max_cost_usd = 1.0;
    Client client(model, cc);
    std::vector<std::future<ChatResponse>> futures;
    for (int i = 0; i < 12; ++i) futures.push_back(client.submit(ChatRequest{"", {{"user", "x"}}, 0, 10, {}}));
    for (auto& f : futures) EXPECT_EQ(f.get().content, "ok");
    EXPECT_EQ(model->first_alone, 1) << "a request of unknown cost ran next to another";
    EXPECT_GE(model->most, 2) << "once a price was known, requests did not run in parallel";
    EXPECT_NEAR(client.totals().cost_usd, 0.012, 1e-12);
}

TEST(LlmBudget, ReservationsAreBoundedByThePromptBytesAndMaxTokens) {
    ChatRequest r{"m", {{"system", "abc"}, {"user", "hello"}}, 0, 0, {}};
    EXPECT_EQ(max_prompt_tokens(r), (3 + 6) + (5 + 4) + 2 * kPromptOverheadTokens);
    EXPECT_EQ(max_completion_tokens(r), kDefaultMaxTokens);   // no max_tokens: the documented default
    r.max_tokens = 77;
    EXPECT_EQ(max_completion_tokens(r), 77);
    EXPECT_EQ(usage_problem({5, 7, 0.1, true}), "");
    EXPECT_NE(usage_problem({-1, 7, 0, false}), "");
    EXPECT_NE(usage_problem({5, kAbsurdTokens + 1, 0, false}), "");
    EXPECT_NE(usage_problem({5, 7, -0.01, true}), "");
    EXPECT_NE(usage_problem({5, 7, std::nan(""), true}), "");
    EXPECT_EQ(usage_problem({5, 7, std::nan(""), false}), "") << "an unknown cost is not a wrong one";
    EXPECT_EQ(parse_price("0.30:2.50").completion_per_mtok, 2.5);
    EXPECT_EQ(parse_price("1").prompt_per_mtok, 1);
    EXPECT_THROW(parse_price("-1:2"), UsageError);
    EXPECT_THROW(parse_price("cheap"), UsageError);
}

// The message of the BudgetExceeded `f` throws ("" when it throws none).
template <class F>
std::string refusal(F f) {
    try {
        f();
    } catch (const BudgetExceeded& e) {
        return e.what();
    }
    return "";
}

// The search's budget stops at its first refusal: a smaller request that would fit is refused after
// it too (in steady mode, which waiting slot asks first depends on how the threads wake). A plain
// budget, and a refusal without waiting (batch mode: others may be in flight), stay per request.
TEST(LlmBudget, WithFinalRefusalNoRequestGoesAfterTheFirstRefused) {
    const ChatRequest big{"m", {{"user", std::string(100, 'x')}}, 0, 10, {}};  // 100 + 4 + 16 + 10 = 130
    const ChatRequest small{"m", {{"user", "x"}}, 0, 10, {}};                   // 1 + 4 + 16 + 10 = 31
    for (bool final_refusal : {false, true}) {
        BudgetCaps caps{100, 0, std::nullopt};
        caps.final_refusal = final_refusal;
        Budget budget(caps);
        const std::string refused = refusal([&] { budget.reserve(big); });
        EXPECT_NE(refused.find("may use up to 130"), std::string::npos) << refused;
        if (!final_refusal) {
            EXPECT_EQ(budget.reserve(small).tokens(), 31);
            continue;
        }
        EXPECT_EQ(refusal([&] { budget.reserve(small); }), refused);
        EXPECT_FALSE(budget.reached()) << "the cap itself is not reached";
    }
    BudgetCaps caps{100, 0, std::nullopt};
    caps.final_refusal = true;
    Budget batch(caps);
    EXPECT_THROW(batch.reserve(big, /*wait=*/false), BudgetExceeded);
    EXPECT_EQ(batch.reserve(small, /*wait=*/false).tokens(), 31);
}

class LlmApiKey : public ::testing::Test {
protected:
    void SetUp() override {
        for (const char* v : {"KERNELEVO_API_KEY", "OPENROUTER_API_KEY", "OPENAI_API_KEY", "MY_KEY"}) unsetenv(v);
    }
    void TearDown() override { SetUp(); }
};

TEST_F(LlmApiKey, LookupOrderPerHost) {
    const std::string openrouter = "https://openrouter.ai/api/v1", openai = "https://api.openai.com/v1",
                      local = "http://localhost:8000/v1";
    EXPECT_TRUE(find_api_key(openrouter).value.empty());
    setenv("OPENROUTER_API_KEY", "  or-key-123456\n", 1);
    setenv("OPENAI_API_KEY", "oa-key-123456", 1);
    EXPECT_EQ(find_api_key(openrouter).value, "or-key-123456");   // trimmed
    EXPECT_EQ(find_api_key(openrouter).source, "OPENROUTER_API_KEY");
    EXPECT_EQ(find_api_key(openai).value, "oa-key-123456");
    EXPECT_EQ(find_api_key(local).value, "oa-key-123456");
    unsetenv("OPENAI_API_KEY");
    EXPECT_TRUE(find_api_key(local).value.empty()) << "an OpenRouter key must not go to another host";
    EXPECT_EQ(find_api_key(local).withheld, "OPENROUTER_API_KEY");
    EXPECT_EQ(find_api_key(local, "OPENROUTER_API_KEY").value, "or-key-123456");
    setenv("KERNELEVO_API_KEY", "kv-key-123456", 1);
    EXPECT_EQ(find_api_key(openrouter).value, "kv-key-123456");
    EXPECT_EQ(find_api_key(local).source, "KERNELEVO_API_KEY");
    setenv("MY_KEY", "mine-123456", 1);
    EXPECT_EQ(find_api_key(local, "MY_KEY").value, "mine-123456");
    EXPECT_THROW(find_api_key(local, "UNSET_VARIABLE_XYZ"), UsageError);
    // Found keys are registered as secrets.
    EXPECT_EQ(redact("a mine-123456 b"), "a *** b");
}

// --llm-url may carry credentials: shown as ***, registered as secrets, the rest of the URL intact.
TEST(LlmUrlCredentials, ShownAsStarsAndRedactedEverywhere) {
    EXPECT_EQ(display_url("https://api.example.com/v1"), "https://api.example.com/v1");
    EXPECT_FALSE(url_has_credentials("http://localhost:8000/v1"));
    EXPECT_EQ(url_credentials_note("http://localhost:8000/v1"), "");
    EXPECT_EQ(display_url("https://me:pw-Secret-81x@host:8443/v1"), "https://***@host:8443/v1");
    EXPECT_EQ(display_url("https://tok-Only-User-9911@host/v1"), "https://***@host/v1");
    EXPECT_EQ(display_url("https://host/v1?key=k-Q-4471&api-version=2024-06-01"), "https://host/v1?key=***&api-version=2024-06-01");
    EXPECT_EQ(display_url("https://host/v1?access_token=abc#frag"), "https://host/v1?access_token=***#frag");
    EXPECT_EQ(display_url("https://host/v1?x=0123456789abcdef0123"), "https://host/v1?x=***");   // long: a token
    EXPECT_EQ(display_url("https://host/p@th/v1"), "https://host/p@th/v1");   // an '@' in the path is not user-info
    EXPECT_TRUE(url_has_credentials("https://me:pw@host/v1"));
    EXPECT_NE(url_credentials_note("https://me:pw@host/v1").find("show as ***"), std::string::npos);

    register_url_secrets("https://me:pw-Secret-81x@host/v1?key=k-Q%2F4471&api-version=2024-06-01");
    EXPECT_EQ(redact("failed: https://me:pw-Secret-81x@host/v1"), "failed: https://me:***@host/v1");
    EXPECT_EQ(redact("key k-Q%2F4471 or k-Q/4471"), "key *** or ***");   // raw and decoded
    EXPECT_EQ(redact("api-version=2024-06-01"), "api-version=2024-06-01");  // not a secret
    EXPECT_EQ(redact("me"), "me");   // the user name alone is not one either
}

// Text from a model or a server, for a terminal: escapes shown, never obeyed; UTF-8 kept.
TEST(LlmPrintable, EscapesControlsKeepsNewlinesTabsAndUtf8) {
    EXPECT_EQ(printable("pong"), "pong");
    EXPECT_EQ(printable("a\tb\nc"), "a\tb\nc");
    EXPECT_EQ(printable("\x1b[31mred\x1b[0m\x07\r\x7f"), "\\x1b[31mred\\x1b[0m\\x07\\x0d\\x7f");
    EXPECT_EQ(printable(std::string("nul\0!", 5)), "nul\\x00!");
    EXPECT_EQ(printable("gr\xc3\xbc\xc3\x9f \xe2\x9c\x93 \xf0\x9f\x98\x80"), "gr\xc3\xbc\xc3\x9f \xe2\x9c\x93 \xf0\x9f\x98\x80");
    EXPECT_EQ(printable("\xc2\x9b" "2J"), "\\u009b2J");                 // C1 CSI
    EXPECT_EQ(printable("abc\xe2\x80\xae" "def"), "abc\\u202edef");     // right-to-left override
    EXPECT_EQ(printable("bad \xff\xfe \xc3"), "bad \\xff\\xfe \\xc3");   // not UTF-8; cut sequence
    EXPECT_EQ(printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");           // a surrogate is not UTF-8
}

}  // namespace
}  // namespace kevo::llm
