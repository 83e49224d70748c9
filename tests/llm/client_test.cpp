// Client logic without a network: model choice, key lookup.
#include <gtest/gtest.h>

#include <cstdlib>

#include "common/error.h"
#include "common/process.h"
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

}  // namespace
}  // namespace kevo::llm
