// Internal to the llm part: HTTP exchanges over libcurl with the connect and read timeouts,
// cancellation and the retry policy of HttpConfig, shared by the chat client (HttpProvider) and
// the Batch API client (BatchApi).
#pragma once
#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "llm/llm.h"
#include "llm/options.h"

namespace kevo::llm::detail {

struct HttpExchange {
    std::string method = "POST";    // GET or POST
    std::string path;               // appended to the base URL, e.g. "/chat/completions"
    std::string body;               // POST: JSON
    struct Part {                   // POST multipart/form-data instead of a JSON body
        std::string name, data, filename;   // filename empty: a plain field
    };
    std::vector<Part> parts;
    size_t max_reply_bytes = kMaxReplyBytes;   // a longer reply aborts the transfer: "reply too large", not retried
};

// Thrown by a send() check to retry a 2xx reply (an error reported inside it).
struct RetryReply {
    std::string message;
    int status = 0;   // 0: none (a plain LlmError when the retries are used up)
};

// One attempt's outcome.
struct HttpResult {
    int curl_code = 0;             // CURLcode; 0: a reply came back
    std::string curl_error;
    bool read_timed_out = false;   // our own deadline, counted from the end of the connect phase
    bool timed_out = false;        // read_timed_out or libcurl's own timeout
    bool connected = false;
    bool too_large = false;        // the reply passed HttpExchange::max_reply_bytes (transfer aborted)
    long status = 0;
    std::string body;
    std::string retry_after;
};

// The server's own explanation, from the usual error shapes, else the start of the body.
std::string server_message(const std::string& body);
// What an HTTP error status means for a user ("rate limited", "the API key was rejected ...").
std::string status_hint(int status, const std::string& model, bool have_key);

class HttpSession {
public:
    explicit HttpSession(HttpConfig config);   // validates the config, registers the key as a secret
    ~HttpSession();
    HttpSession(const HttpSession&) = delete;
    HttpSession& operator=(const HttpSession&) = delete;

    HttpResult attempt(const HttpExchange& exchange);
    // The exchange with the retry policy (network errors, 408, 429 and 5xx retried with backoff
    // and jitter, honouring Retry-After, within max_attempts and retry_total_max_s): returns the
    // 2xx reply's body once `check(body, attempt)` accepts it; `check` throws RetryReply to have
    // the attempt retried, anything else to give up. Failures are typed LlmErrors (HttpError with
    // the status), redacted; `model` names the model in hints ("" for other endpoints).
    std::string send(const HttpExchange& exchange, const std::string& model,
                     const std::function<void(const std::string& body, int attempt)>& check = {});
    // False when cancel() interrupted the wait.
    bool sleep_unless_cancelled(double seconds);
    void cancel();
    bool cancelled() const { return cancelled_; }
    const HttpConfig& config() const { return config_; }
    // The URL of `path` for messages: credentials in --llm-url shown as *** (display_url()).
    std::string url(const std::string& path) const { return display_url(base_ + path + query_); }

private:
    // The wait before retry `n` (1-based) given the server's Retry-After (< 0: none).
    double backoff(int n, double retry_after_s);
    struct Transfer;   // a curl easy handle in its own multi handle, kept to reuse connections
    std::unique_ptr<Transfer> take_transfer();
    void give_transfer(std::unique_ptr<Transfer> transfer);

    HttpConfig config_;
    std::string base_;
    std::string query_;        // "?..." of the base URL, put after each path ("" when none)
    std::atomic<bool> cancelled_{false};
    std::atomic<bool> connected_once_{false};  // some attempt reached the server (retry policy)
    std::mutex mu_;                      // guards idle_, rng_, and the cancel wait
    std::condition_variable cancel_cv_;
    std::vector<std::unique_ptr<Transfer>> idle_;
    std::mt19937_64 rng_;
};

}  // namespace kevo::llm::detail
