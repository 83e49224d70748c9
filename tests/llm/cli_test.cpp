// The real `kernelevo llm check` binary against the loopback server.
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "common/fs.h"
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

// A reply's terminal escapes (colours, screen clears, a window title, C1 controls, bidi overrides)
// are shown escaped, never obeyed; --json stays valid JSON even for a reply cut inside a UTF-8
// character.
TEST_F(LlmCheckCli, TheRepliesTerminalControlsArePrintedEscaped) {
    const std::string hostile = "\x1b[2J\x1b]0;owned\x07po\xc2\x9bng\xe2\x80\xae";
    server.push({200, {}, chat_body(hostile, "stop", 3, 1, -1, "vendor/\x1b[31mm")});
    auto r = run({"llm", "check", "--llm-url", server.base_url(), "--model", "vendor/m"});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    for (const char* raw : {"\x1b", "\x07", "\xc2\x9b", "\xe2\x80\xae"})
        EXPECT_EQ((r.out + r.err).find(raw), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("answer:   \\x1b[2J\\x1b]0;owned\\x07po\\u009bng\\u202e"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("answered: vendor/\\x1b[31mm"), std::string::npos) << r.out;

    // 199 ASCII characters, then a 3-byte character: the 200-character snippet cuts it.
    server.push({200, {}, chat_body(std::string(199, 'a') + "\xe2\x9c\x93 tail")});
    auto j = run({"llm", "check", "--llm-url", server.base_url(), "--model", "vendor/m", "--json"});
    EXPECT_EQ(j.exit_code, 0) << j.out << j.err;
    EXPECT_EQ(j.err.find("internal error"), std::string::npos) << j.err;
    auto report = nlohmann::json::parse(j.out, nullptr, false);
    ASSERT_FALSE(report.is_discarded()) << j.out;
    EXPECT_EQ(report["models"][0]["status"], "ok");

    // An error message quoting the server: escaped on stderr too.
    server.set_default({400, {}, R"({"error":{"message":"no \u001b[5mblink\u001b[0m here"}})"});
    auto e = run({"llm", "check", "--llm-url", server.base_url(), "--model", "vendor/m"});
    EXPECT_EQ(e.exit_code, 1) << e.err;
    EXPECT_EQ(e.err.find('\x1b'), std::string::npos) << e.err;
    EXPECT_NE(e.err.find("no \\x1b[5mblink\\x1b[0m here"), std::string::npos) << e.err;
}

// Credentials inside --llm-url (user:password@, ?key=) never reach stdout or stderr: the URL is
// shown with ***, errors name it so, and the printed next commands say to give them again.
TEST_F(LlmCheckCli, CredentialsInTheUrlAreNeverPrinted) {
    const std::string password = "pw-Hunter2-Zx9q", query_key = "qk-Query-Secret-77";
    std::string url = server.base_url();
    url.insert(url.find("//") + 2, "kevo:" + password + "@");
    const std::string secret_url = url + "?api_key=" + query_key;
    auto no_secret = [&](const ProcessResult& r) {
        for (const std::string& secret : {password, query_key})
            EXPECT_EQ((r.out + r.err).find(secret), std::string::npos) << r.out << r.err;
    };
    server.set_default({500, {}, R"({"error":{"message":"upstream failed"}})"});
    auto check = run({"llm", "check", "--llm-url", secret_url, "--model", "m", "--llm-attempts", "1"});
    EXPECT_EQ(check.exit_code, 1) << check.out << check.err;
    no_secret(check);
    EXPECT_NE(check.out.find("url:      http://***@127.0.0.1:"), std::string::npos) << check.out;
    EXPECT_NE(check.err.find("/v1/chat/completions?api_key=***"), std::string::npos) << check.err;

    // A bad URL: the usage error shows it redacted, exit 2.
    auto bad = run({"llm", "check", "--llm-url", "ftp://kevo:" + password + "@host/v1", "--model", "m"});
    EXPECT_EQ(bad.exit_code, 2) << bad.err;
    no_secret(bad);

    // The resume hints of a batch search: the URL with ***, and a note to give the credentials again.
    TempDir dir;
    auto r = run({"search", "--task", std::string(KEVO_TEST_DATA_DIR) + "/gelu_bias/task.json", "--out",
                  (dir.path() / "kernels").string(), "--state", (dir.path() / "state.db").string(), "--arch", "sm_90",
                  "--llm-batch", "--llm-batch-dir", dir.path().string(), "--model", "gpt-x", "--llm-url", secret_url});
    ASSERT_EQ(r.exit_code, 3) << r.out << r.err;
    no_secret(r);
    EXPECT_NE(r.err.find("--llm-url 'http://***@127.0.0.1:"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("--llm-batch-replies REPLIES.jsonl (the credentials of --llm-url show as ***: give them again)"),
              std::string::npos) << r.err;
    for (const auto& f : fs::directory_iterator(dir.path()))
        if (f.is_regular_file() && f.path().extension() == ".jsonl") {
            const std::string text = read_file(f.path());
            EXPECT_EQ(text.find(password), std::string::npos) << f.path();
            EXPECT_EQ(text.find(query_key), std::string::npos) << f.path();
        }
    EXPECT_TRUE(server.requests().size() == 1u) << "only the check's request reached the server";
}

// Issue 37: what a Batch API server chooses never reaches the terminal raw nor a command to paste
// unquoted. A batch id that is not one (here a shell command substitution) is refused as a
// malformed reply; a status with terminal controls is shown escaped.
TEST_F(LlmCheckCli, AServersBatchIdAndStatusAreCheckedAndEscaped) {
    TempDir dir("kevo-llm-cli");
    const fs::path input = dir.path() / "batch.jsonl", marker = dir.path() / "pwned";
    write_file_atomic(input, R"({"custom_id":"r1","method":"POST","url":"/v1/chat/completions","body":{"model":"m"}})" "\n");
    server.push({200, {}, R"({"id":"file-1","object":"file"})"});
    server.push({200, {}, nlohmann::json{{"id", "batch_$(touch " + marker.string() + ")"}, {"status", "validating"}}.dump()});
    auto r = run({"llm", "batch", "submit", input.string(), "--llm-url", server.base_url()});
    EXPECT_NE(r.exit_code, 0) << r.out;
    EXPECT_EQ(r.out.find("$(touch"), std::string::npos) << "an unchecked server id was printed:\n" << r.out;
    EXPECT_NE(r.err.find("gives a batch id that is not one"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(marker));

    const std::string status = "in_progress\x1b]0;owned\x07\x1b[2J";
    for (const char* command : {"status", "fetch"}) {
        server.push({200, {}, nlohmann::json{{"id", "batch_1"}, {"status", status}}.dump()});
        std::vector<std::string> args{"llm", "batch", command, "batch_1", "--llm-url", server.base_url()};
        if (std::string(command) == "fetch") args.insert(args.end(), {"--out", (dir.path() / "replies.jsonl").string()});
        auto s = run(args);
        EXPECT_EQ((s.out + s.err).find('\x1b'), std::string::npos) << command << ": a raw ESC reached the terminal";
        EXPECT_EQ((s.out + s.err).find('\x07'), std::string::npos) << command << ": a raw BEL reached the terminal";
        EXPECT_NE((s.out + s.err).find("in_progress\\x1b]0;owned"), std::string::npos) << command << ": " << s.out << s.err;
    }
}

// The whole batch loop through the real binary: `search --llm-batch` writes the requests,
// `llm batch submit|status|fetch` run them through the loopback server's Batch API, and
// `search --llm-batch-replies` imports the replies and writes the next batch. The model answers
// without code, so the next batch holds the repair request and no GPU is needed.
TEST_F(LlmCheckCli, BatchLoopThroughSearchAndTheBatchApi) {
    server.enable_batch_api([](const std::string&) { return std::string("I would rather not write a kernel."); });
    TempDir dir;
    const std::string state = (dir.path() / "state.db").string();
    std::vector<std::string> search = {"search", "--task", std::string(KEVO_TEST_DATA_DIR) + "/gelu_bias/task.json",
                                       "--out", (dir.path() / "kernels").string(), "--state", state, "--arch", "sm_90",
                                       "--llm-batch", "--llm-batch-dir", dir.path().string(), "--model", "gpt-x",
                                       "--llm-url", server.base_url()};
    auto r = run(search);
    ASSERT_EQ(r.exit_code, 3) << r.out << r.err;
    const std::string batch1 = (dir.path() / "gelu_bias-sm_90-batch-1.jsonl").string();
    EXPECT_NE(r.err.find("wrote 1 LLM request(s) to " + batch1), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("kernelevo llm batch submit " + batch1), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("--llm-batch-replies REPLIES.jsonl"), std::string::npos) << r.err;
    EXPECT_TRUE(server.requests().empty()) << "batch mode sent a request";

    auto submit = run({"llm", "batch", "submit", batch1, "--llm-url", server.base_url()});
    ASSERT_EQ(submit.exit_code, 0) << submit.out << submit.err;
    EXPECT_NE(submit.out.find("file:     file-1 (1 requests from " + batch1 + ")"), std::string::npos) << submit.out;
    EXPECT_NE(submit.out.find("batch:    batch_1"), std::string::npos) << submit.out;
    EXPECT_NE(submit.out.find("kernelevo llm batch fetch batch_1 --out REPLIES.jsonl"), std::string::npos) << submit.out;
    EXPECT_EQ(server.requests().at(0).headers.at("authorization"), "Bearer " + kKey);

    const std::string replies = (dir.path() / "replies-1.jsonl").string();
    auto early = run({"llm", "batch", "fetch", "batch_1", "--out", replies, "--llm-url", server.base_url()});
    EXPECT_EQ(early.exit_code, 1) << early.out << early.err;   // still in progress
    EXPECT_NE(early.err.find("batch batch_1 is in_progress"), std::string::npos) << early.err;
    EXPECT_FALSE(fs::exists(replies));
    auto status = run({"llm", "batch", "status", "batch_1", "--llm-url", server.base_url()});
    EXPECT_EQ(status.exit_code, 0) << status.err;
    EXPECT_NE(status.out.find("status:   completed"), std::string::npos) << status.out;
    EXPECT_NE(status.out.find("requests: 1 of 1 done, 0 failed"), std::string::npos) << status.out;
    auto fetch = run({"llm", "batch", "fetch", "batch_1", "--out", replies, "--llm-url", server.base_url()});
    ASSERT_EQ(fetch.exit_code, 0) << fetch.out << fetch.err;
    EXPECT_TRUE(fs::exists(replies));

    search.insert(search.end(), {"--llm-batch-replies", replies});
    auto resumed = run(search);
    ASSERT_EQ(resumed.exit_code, 3) << resumed.out << resumed.err;
    EXPECT_NE(resumed.err.find("imported 1 replies from " + replies), std::string::npos) << resumed.err;
    EXPECT_NE(resumed.err.find("wrote 1 LLM request(s) to " + (dir.path() / "gelu_bias-sm_90-batch-2.jsonl").string()),
              std::string::npos) << resumed.err;
    // The second batch asks to repair the unusable reply.
    std::string second = read_file(dir.path() / "gelu_bias-sm_90-batch-2.jsonl");
    EXPECT_NE(second.find(".gelu_bias.sm_90:b2:g0.seed.a1\""), std::string::npos) << second;
    EXPECT_NE(second.find("could not be used"), std::string::npos) << second;
    // The same replies again: skipped, not counted twice; nothing new to write.
    auto again = run(search);
    EXPECT_EQ(again.exit_code, 3) << again.err;
    EXPECT_NE(again.err.find("imported 0 replies from " + replies + ", 1 imported before"), std::string::npos) << again.err;
    EXPECT_NE(again.err.find("1 request(s) wait for replies in batch files written before"), std::string::npos) << again.err;
    // Another run's replies (another run id in the custom_ids): refused before anything is
    // imported, exit 2, saying whose file it is.
    std::string other = read_file(replies);
    const size_t at = other.find("\"custom_id\":\"r");
    ASSERT_NE(at, std::string::npos) << other;
    other.replace(at + 13, 9, "r00000000");
    const std::string foreign = (dir.path() / "replies-of-another-run.jsonl").string();
    write_file_atomic(foreign, other);
    std::vector<std::string> with_foreign = search;
    with_foreign.insert(with_foreign.end(), {"--llm-batch-replies", foreign});
    auto refused = run(with_foreign);
    EXPECT_EQ(refused.exit_code, 2) << refused.err;
    EXPECT_NE(refused.err.find("kernelevo: error: " + foreign + ":1: the replies of another run of gelu_bias on sm_90 (run "
                               "r00000000); this state is run r"), std::string::npos) << refused.err;
    EXPECT_NE(refused.err.find("Nothing was imported"), std::string::npos) << refused.err;
    for (const auto& q : server.requests()) EXPECT_NE(q.path, "/v1/chat/completions");
    EXPECT_EQ((r.out + r.err + submit.out + resumed.err).find(kKey), std::string::npos);

    // Bad usage exits 2: two models, or a file that is not a batch input.
    std::vector<std::string> two = search;
    two.insert(two.end(), {"--model", "other"});
    EXPECT_EQ(run(two).exit_code, 2);
    auto bad = run({"llm", "batch", "submit", replies, "--llm-url", server.base_url()});
    EXPECT_EQ(bad.exit_code, 2) << bad.err;
    EXPECT_NE(bad.err.find("not a Batch API input line"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace kevo::llm
