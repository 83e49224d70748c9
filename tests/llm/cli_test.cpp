// The real `kernelevo llm check` binary against the loopback server.
#include <gtest/gtest.h>

#include <filesystem>

#include "common/process.h"
#include "loopback_server.h"

namespace kevo::llm {
namespace {

using test::chat_body;

const std::string kKey = "sk-cli-test-4fJ9kQ2mX7pL";

class LlmCheckCli : public ::testing::Test {
protected:
    ProcessResult run(std::vector<std::string> args) {
        ProcessOptions o;
        o.argv = {binary};
        o.argv.insert(o.argv.end(), args.begin(), args.end());
        o.env = {{"KERNELEVO_API_KEY", kKey}};
        o.timeout_s = 30;
        return run_process(o);
    }
    const std::string binary = KEVO_EXE;
    test::LoopbackServer server;
};

TEST_F(LlmCheckCli, ReportsTheAnswerAndExitsZero) {
    server.push({200, {}, chat_body("pong", "stop", 12, 1, 0.000042, "vendor/m-2025")});
    auto r = run({"llm", "check", "--llm-url", server.base_url(), "--model", "vendor/m"});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("answer:   pong"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("answered: vendor/m-2025"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("tokens:   12 prompt + 1 completion"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("cost:     $0.000042"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("latency:  "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("key:      from $KERNELEVO_API_KEY"), std::string::npos) << r.out;
    ASSERT_EQ(server.requests().size(), 1u);
    EXPECT_EQ(server.requests()[0].headers.at("authorization"), "Bearer " + kKey);
    EXPECT_EQ((r.out + r.err).find(kKey), std::string::npos);
}

TEST_F(LlmCheckCli, ARejectedKeyExitsOneWithoutShowingIt) {
    server.set_default({401, {}, R"({"error":{"message":"Incorrect API key provided: )" + kKey + R"("}})"});
    auto r = run({"llm", "check", "--llm-url", server.base_url(), "--model", "m"});
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_NE(r.err.find("HTTP 401"), std::string::npos) << r.err;
    EXPECT_EQ((r.out + r.err).find(kKey), std::string::npos) << r.out << r.err;
    EXPECT_EQ(server.requests().size(), 1u);
}

TEST_F(LlmCheckCli, BadUsageExitsTwo) {
    EXPECT_EQ(run({"llm", "check", "--llm-url", server.base_url()}).exit_code, 2);            // no --model
    EXPECT_EQ(run({"llm", "check", "--model", "m", "--llm-parallel", "0"}).exit_code, 2);
    EXPECT_EQ(run({"llm", "check", "--model", "m", "--llm-url", "ftp://x"}).exit_code, 2);
    EXPECT_TRUE(server.requests().empty());
}

TEST_F(LlmCheckCli, HelpDescribesTheOptions) {
    auto r = run({"llm", "check", "--help"});
    EXPECT_EQ(r.exit_code, 0);
    for (const char* option : {"--llm-url", "--model", "--budget-tokens", "--llm-transcript", "KERNELEVO_API_KEY"})
        EXPECT_NE(r.out.find(option), std::string::npos) << option << "\n" << r.out;
}

}  // namespace
}  // namespace kevo::llm
