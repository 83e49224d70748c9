// A real HTTP/1.1 server on 127.0.0.1 (random port) for the LLM client tests. It answers every
// request with the next scripted reply (status, headers, body, optional delay), or with a default
// reply once the script is used up, and records what it received. One thread per connection;
// every reply closes its connection.
//
// With enable_batch_api() it also serves OpenAI's Batch API: POST /v1/files (multipart, purpose
// "batch"), POST /v1/batches, GET /v1/batches/ID (in_progress for the first `polls` reads, then
// completed: every input line answered by `answer` into an output file, failed ids into an error
// file) and GET /v1/files/ID/content.
#pragma once
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace kevo::llm::test {

struct ScriptedReply {
    int status = 200;
    std::vector<std::pair<std::string, std::string>> headers;
    std::string body;
    double delay_s = 0;   // before the reply is sent
    bool no_content_length = false;   // the body ends when the connection closes (no length given)
};

struct ReceivedRequest {
    std::string method, path;
    std::map<std::string, std::string> headers;   // lower-case names
    std::string body;
};

class LoopbackServer {
public:
    LoopbackServer();
    ~LoopbackServer();
    LoopbackServer(const LoopbackServer&) = delete;
    LoopbackServer& operator=(const LoopbackServer&) = delete;

    // Base URL for the client, e.g. "http://127.0.0.1:41234/v1".
    std::string base_url() const;
    void push(ScriptedReply reply);
    void set_default(ScriptedReply reply);
    std::vector<ReceivedRequest> requests() const;
    // Most requests that were being handled at the same time.
    int max_concurrent() const { return max_concurrent_; }

    // The reply content for one request body of a batch input line.
    using BatchAnswer = std::function<std::string(const std::string& body_json)>;
    void enable_batch_api(BatchAnswer answer, int polls = 1, std::vector<std::string> fail_ids = {});
    // The uploaded files, by id.
    std::map<std::string, std::string> files() const;

private:
    void accept_loop();
    void serve(int fd);
    // Answers a Batch API request (mu_ held); false when `req` is not one.
    bool batch_api(const ReceivedRequest& req, ScriptedReply& reply);

    struct Batch {
        std::string input_file_id, output_file_id, error_file_id;
        int polls_left = 0;
        bool done = false;
        int total = 0, failed = 0;
    };
    BatchAnswer batch_answer_;
    int batch_polls_ = 1;
    std::vector<std::string> batch_fail_;
    std::map<std::string, std::string> files_;
    std::map<std::string, Batch> batches_;
    int listen_fd_ = -1;
    int port_ = 0;
    std::atomic<bool> stopping_{false};
    std::thread acceptor_;
    mutable std::mutex mu_;
    std::condition_variable stop_cv_;
    std::deque<ScriptedReply> script_;
    ScriptedReply default_;
    std::vector<ReceivedRequest> received_;
    std::vector<std::thread> connections_;
    std::atomic<int> concurrent_{0}, max_concurrent_{0};
};

// A Chat Completions success body.
std::string chat_body(const std::string& content, const std::string& finish_reason = "stop",
                      int prompt_tokens = 10, int completion_tokens = 5, double cost = -1,
                      const std::string& model = "test/model");

}  // namespace kevo::llm::test
