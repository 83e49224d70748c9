// The Batch API: input and output lines, and the /v1/files + /v1/batches client against the
// loopback server's implementation of them (the same calls `kernelevo llm batch` makes).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/fs.h"
#include "llm/llm.h"
#include "llm/batch.h"
#include "loopback_server.h"

namespace kevo::llm {
namespace {

using json = nlohmann::json;
using test::LoopbackServer;

const std::string kKey = "sk-batch-test-Hq2Lr9Vt4Wx1";

ChatRequest request(const std::string& prompt, int64_t seed) {
    ChatRequest r;
    r.model = "gpt-x";
    r.messages = {{"system", "You write CUDA."}, {"user", prompt}};
    r.max_tokens = 100;
    r.seed = seed;
    return r;
}

// The content the loopback server answers each request body with: its user prompt, reversed.
std::string reverse_prompt(const std::string& body) {
    json j = json::parse(body);
    std::string p = j["messages"][1]["content"];
    return std::string(p.rbegin(), p.rend());
}

class LlmBatch : public ::testing::Test {
protected:
    HttpConfig config() {
        HttpConfig c;
        c.base_url = server.base_url();
        c.api_key = kKey;
        c.max_attempts = 2;
        c.backoff_initial_s = 0.01;
        c.backoff_max_s = 0.02;
        return c;
    }
    LoopbackServer server;
    TempDir dir;
};

TEST_F(LlmBatch, InputLinesCarryTheBodyHttpProviderSends) {
    json line = json::parse(batch_input_line("b1:g0.seed.a0", request("hi", 7), "https://api.openai.com/v1"));
    EXPECT_EQ(line["custom_id"], "b1:g0.seed.a0");
    EXPECT_EQ(line["method"], "POST");
    EXPECT_EQ(line["url"], "/v1/chat/completions");
    EXPECT_EQ(line["body"]["model"], "gpt-x");
    EXPECT_EQ(line["body"]["max_completion_tokens"], 100);   // OpenAI's dialect
    EXPECT_EQ(line["body"]["seed"], 7);
    EXPECT_EQ(line["body"]["messages"][1]["content"], "hi");
    EXPECT_EQ(json::parse(batch_input_line("x", request("hi", 7), "http://localhost:8000/v1"))["body"]["max_tokens"], 100);
}

TEST_F(LlmBatch, OutputLinesGiveRepliesOrSayWhyNot) {
    std::string ok = R"({"id":"r1","custom_id":"b1:k","response":{"status_code":200,"body":)" +
                     test::chat_body("the kernel", "stop", 11, 22, -1, "gpt-x-2025") + R"(},"error":null})";
    BatchOutputLine line = parse_batch_output_line(ok, "out.jsonl:1");
    EXPECT_EQ(line.custom_id, "b1:k");
    EXPECT_EQ(line.status_code, 200);
    BatchReply reply = batch_reply(line, request("p", 1), "out.jsonl:1");
    ASSERT_TRUE(reply.response);
    EXPECT_EQ(reply.response->content, "the kernel");
    EXPECT_EQ(reply.response->model, "gpt-x-2025");
    EXPECT_EQ(reply.response->usage.prompt_tokens, 11);
    EXPECT_EQ(reply.response->usage.completion_tokens, 22);
    EXPECT_FALSE(reply.response->usage.cost_known);

    std::string cut = R"({"custom_id":"b1:k","response":{"status_code":200,"body":)" +
                      test::chat_body("half a ker", "length", 11, 100) + R"(},"error":null})";
    BatchReply truncated = batch_reply(parse_batch_output_line(cut, "w"), request("p", 1), "w");
    ASSERT_TRUE(truncated.response);   // paid for: kept
    EXPECT_TRUE(truncated.truncated);

    BatchReply expired = batch_reply(
        parse_batch_output_line(R"({"custom_id":"b1:k","response":null,"error":{"code":"batch_expired","message":"too late"}})", "w"),
        request("p", 1), "w");
    EXPECT_FALSE(expired.response);
    EXPECT_EQ(expired.error, "batch_expired: too late");
    BatchReply refused = batch_reply(
        parse_batch_output_line(R"({"custom_id":"b1:k","response":{"status_code":400,"body":{"error":{"message":"bad max_tokens"}}},"error":null})", "w"),
        request("p", 1), "w");
    EXPECT_EQ(refused.error, "HTTP 400: bad max_tokens");

    EXPECT_THROW(parse_batch_output_line("not json", "out.jsonl:3"), UsageError);
    // A request (a line of an input file given as replies) is no failed reply: it is refused.
    try {
        parse_batch_output_line(batch_input_line("r0123abcd.t.sm_90:b1:k", request("p", 1), "http://x/v1"), "in.jsonl:1");
        ADD_FAILURE() << "no error";
    } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find("in.jsonl:1: a Batch API input line (a request), not a reply"),
                  std::string::npos) << e.what();
    }
    // Terminal controls of a broken line are shown escaped.
    try {
        parse_batch_output_line("\x1b[2J{", "out.jsonl:5");
        ADD_FAILURE() << "no error";
    } catch (const UsageError& e) {
        EXPECT_EQ(std::string(e.what()).find('\x1b'), std::string::npos) << e.what();
    }
    try {
        parse_batch_output_line(R"({"response":{}})", "out.jsonl:4");
    } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find("out.jsonl:4: not a Batch API output line"), std::string::npos) << e.what();
    }
}

TEST_F(LlmBatch, UploadsCreatesPollsAndDownloadsABatch) {
    server.enable_batch_api(reverse_prompt, /*polls=*/1, {"b1:c"});
    std::string input;
    const char* ids[] = {"b1:a", "b1:b", "b1:c"};
    for (int i = 0; i < 3; ++i) input += batch_input_line(ids[i], request(std::string("prompt ") + ids[i], i), server.base_url()) + "\n";
    fs::path file = dir.path() / "gelu-batch-1.jsonl";
    write_file_atomic(file, input);

    BatchApi api(config());
    std::string file_id = api.upload(file);
    EXPECT_EQ(server.files().at(file_id), input) << "the uploaded bytes differ";
    auto uploads = server.requests();
    ASSERT_EQ(uploads.size(), 1u);
    EXPECT_EQ(uploads[0].path, "/v1/files");
    EXPECT_EQ(uploads[0].headers.at("authorization"), "Bearer " + kKey);
    EXPECT_EQ(uploads[0].headers.at("content-type").rfind("multipart/form-data; boundary=", 0), 0u);

    BatchInfo created = api.create(file_id);
    EXPECT_EQ(created.status, "validating");
    EXPECT_EQ(created.input_file_id, file_id);
    EXPECT_FALSE(created.finished());
    BatchInfo running = api.get(created.id);
    EXPECT_EQ(running.status, "in_progress");
    EXPECT_FALSE(running.finished());
    BatchInfo done = api.get(created.id);
    EXPECT_EQ(done.status, "completed");
    EXPECT_TRUE(done.finished());
    EXPECT_EQ(done.total, 3);
    EXPECT_EQ(done.completed, 2);
    EXPECT_EQ(done.failed, 1);
    ASSERT_FALSE(done.output_file_id.empty());
    ASSERT_FALSE(done.error_file_id.empty());

    std::string out = api.file_content(done.output_file_id);
    std::vector<std::string> lines;
    for (size_t pos = 0, end; (end = out.find('\n', pos)) != std::string::npos; pos = end + 1) lines.push_back(out.substr(pos, end - pos));
    ASSERT_EQ(lines.size(), 2u);
    BatchReply first = batch_reply(parse_batch_output_line(lines[0], "o:1"), request("x", 0), "o:1");
    ASSERT_TRUE(first.response);
    EXPECT_EQ(first.response->content, "a:1b tpmorp");
    BatchReply failed = batch_reply(parse_batch_output_line(api.file_content(done.error_file_id), "e:1"), request("x", 0), "e:1");
    EXPECT_EQ(failed.error.rfind("batch_expired", 0), 0u) << failed.error;
}

TEST_F(LlmBatch, AProviderWithoutABatchApiSaysSo) {
    server.set_default({404, {}, R"({"error":{"message":"Not Found"}})"});
    BatchApi api(config());
    fs::path file = dir.path() / "in.jsonl";
    write_file_atomic(file, batch_input_line("b1:a", request("p", 1), server.base_url()) + "\n");
    try {
        api.upload(file);
        ADD_FAILURE() << "no error";
    } catch (const HttpError& e) {
        EXPECT_EQ(e.status, 404);
        EXPECT_NE(std::string(e.what()).find("/v1/files: not found: wrong the LLM's URL, an unknown id, or the provider "
                                             "has no such endpoint"),
                  std::string::npos) << e.what();
    }
    EXPECT_EQ(server.requests().size(), 1u) << "a 404 is not retried";
    EXPECT_THROW(api.get("batch/../../etc"), UsageError);   // ids never reach a URL unchecked
}

// Files a user names for batch mode and replay (--llm-batch-replies, --llm-replay, a batch input
// file) are refused unread when they are not regular files: a FIFO given by mistake would block the
// command forever, a directory used to read as an empty file.
TEST(LlmInputFiles, BatchAndReplayFilesThatAreNotRegularFilesAreRefusedUnread) {
    TempDir dir("kevo-llm-input");
    const fs::path fifo = dir.path() / "replies.jsonl";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    // Both calls would block in open() on a FIFO with no writer if they opened it: the check
    // comes first, so they return at once.
    try {
        count_batch_input(fifo);
        FAIL() << "a FIFO was read as a batch input file";
    } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find("FIFO"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find(fifo.string()), std::string::npos) << e.what();
    }
    try {
        ReplayProvider replay(fifo);
        FAIL() << "a FIFO was read as a transcript";
    } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find("FIFO"), std::string::npos) << e.what();
    }
    try {
        ReplayProvider replay(dir.path());
        FAIL() << "a directory was read as a transcript";
    } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find("directory"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace kevo::llm
