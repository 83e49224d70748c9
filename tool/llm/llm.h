// LLM access for the search: an OpenAI-compatible Chat Completions client over libcurl, plus a
// replay provider for reproducible runs and tests.
//
//   HttpProvider   one blocking request at a time per calling thread; timeouts, retries, typed errors.
//   ReplayProvider serves the replies of a recorded transcript (tests, reproducible runs).
//   Client         what the search uses: picks a model by weight, runs requests on a pool with an
//                  in-flight limit (futures), keeps token/cost totals, enforces the budget with
//                  reservations (budget.h) and appends every exchange to a JSONL transcript.
//   batch.h        the OpenAI Batch API: input files, output files, /v1/files and /v1/batches.
//
// Secrets: the API key goes only into the Authorization header. HttpProvider registers it with
// kevo::register_secret(), and every log line and error message passes through kevo::redact().
// What the model said is never redacted: a reply reaches the caller, the state and the transcript
// byte for byte (the key's text in a reply is part of the kernel).
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace kevo::llm {

struct Message {
    std::string role;     // "system" | "user" | "assistant"
    std::string content;
};

struct ChatRequest {
    std::string model;    // empty: the client picks one of its configured models (by weight)
    std::vector<Message> messages;
    double temperature = 0.7;
    int max_tokens = 8192;        // the completion limit; bounds the budget's reservation
    std::optional<int64_t> seed;
};

struct Usage {
    int64_t prompt_tokens = 0, completion_tokens = 0;
    double cost_usd = 0;   // when the provider reports it
    bool cost_known = false;
};

// USD per million tokens, as providers list prices.
struct Price {
    double prompt_per_mtok = 0, completion_per_mtok = 0;
    double cost(int64_t prompt_tokens, int64_t completion_tokens) const {
        return (static_cast<double>(prompt_tokens) * prompt_per_mtok +
                static_cast<double>(completion_tokens) * completion_per_mtok) / 1e6;
    }
};

struct ChatResponse {
    std::string content;
    std::string finish_reason;  // "stop", "length", ...
    std::string model;          // the model that answered
    Usage usage;
    double latency_s = 0;       // wall time of the whole call, retries included
    int attempts = 1;           // HTTP attempts it took (1: no retry)
};

// Every failure is an LlmError; `retryable` says whether trying again later may help.
struct LlmError : std::runtime_error {
    LlmError(const std::string& what, bool can_retry) : std::runtime_error(what), retryable(can_retry) {}
    bool retryable;
};
// A token or cost cap is reached, or the next request's reservation would pass it (budget.h):
// the request is not sent.
struct BudgetExceeded : LlmError {
    explicit BudgetExceeded(const std::string& what) : LlmError(what, false) {}
};
// The server answered with an HTTP error status (after any retries). 400/401/403/404 are never
// retried; 429 and 5xx are retried first and surface here once the retries are used up.
struct HttpError : LlmError {
    HttpError(const std::string& what, int http_status, bool can_retry)
        : LlmError(what, can_retry), status(http_status) {}
    int status;
};
// The server's reply is not JSON or not a Chat Completions object.
struct MalformedReply : LlmError {
    explicit MalformedReply(const std::string& what) : LlmError(what, true) {}
};
// A well-formed reply without an answer: no choices, or no content.
struct EmptyReply : LlmError {
    explicit EmptyReply(const std::string& what) : LlmError(what, true) {}
};
// The reply was cut off by max_tokens (finish_reason "length"). `response` holds the partial
// content and the usage, which the client still counts against the budget.
struct TruncatedReply : LlmError {
    TruncatedReply(const std::string& what, ChatResponse partial)
        : LlmError(what, false), response(std::move(partial)) {}
    ChatResponse response;
};
// Client::cancel() or the client's destruction stopped the request.
struct Cancelled : LlmError {
    Cancelled() : LlmError("LLM request cancelled", false) {}
};

// Anything that answers chat requests: the HTTP client, the replay provider, test fakes.
class Provider {
public:
    virtual ~Provider() = default;
    // Blocking; thread-safe (several requests may be in flight from different threads).
    virtual ChatResponse chat(const ChatRequest& request) = 0;
    // Makes pending and future chat() calls throw Cancelled soon (aborts transfers and retry waits).
    virtual void cancel() {}
};

// Log sink for operational notes (retries, warnings). Lines are already redacted.
using LogFn = std::function<void(const std::string&)>;

// ---- HTTP ---------------------------------------------------------------------------------------

struct HttpConfig {
    std::string base_url = "https://openrouter.ai/api/v1";  // POST {base_url}/chat/completions
    std::string api_key;                 // empty: no Authorization header (local servers)
    double connect_timeout_s = 15;
    double read_timeout_s = 600;         // longest one attempt may wait for the complete reply
                                         // once connected (TLS handshake done)
    int max_attempts = 6;                // 1: never retry
    double backoff_initial_s = 2;        // exponential backoff with full jitter: the n-th retry
    double backoff_max_s = 60;           // waits U(0.5, 1) * min(max, initial * 2^(n-1)) ...
    double retry_total_max_s = 600;      // ... or Retry-After if longer; all waits of one request
                                         // together stay under this cap (else it gives up)
    LogFn log;                           // retry notes; empty: silent
};

class HttpProvider : public Provider {
public:
    explicit HttpProvider(HttpConfig config);
    ~HttpProvider() override;
    ChatResponse chat(const ChatRequest& request) override;
    void cancel() override;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// ---- Transcript and replay ----------------------------------------------------------------------

// The request as JSON (model, messages, temperature, max_tokens, seed) and its SHA-256: the key a
// ReplayProvider matches on.
std::string request_json(const ChatRequest& request);
std::string request_hash(const ChatRequest& request);
// The request request_json() wrote. Throws UsageError when `json` is not one.
ChatRequest request_from_json(const std::string& json);

// Appends one JSON object per exchange to a file (created 0600): time, request_hash, request,
// response (content, finish_reason, model), usage, latency_s, attempts, error (kind, message,
// retryable, status). The exchange is recorded as it was, only the error message redacted; each
// line is written with a single write(2): thread-safe and on
// disk (in the page cache) as soon as record() returns.
class Transcript {
public:
    explicit Transcript(const std::filesystem::path& path);
    ~Transcript();
    Transcript(const Transcript&) = delete;
    Transcript& operator=(const Transcript&) = delete;
    // `error` is null when the exchange succeeded; TruncatedReply records its partial response.
    void record(const ChatRequest& request, const ChatResponse* response, const LlmError* error,
                double latency_s);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// Serves a transcript back. ByHash (the default) answers each request with the next unused
// exchange recorded for the same request hash, so concurrent runs replay correctly whatever order
// the requests come in; InOrder answers the n-th call with the n-th exchange whatever was asked.
// Recorded errors are thrown again as the same error type. Running out of matching exchanges
// throws a non-retryable LlmError.
class ReplayProvider : public Provider {
public:
    enum class Mode { ByHash, InOrder };
    explicit ReplayProvider(const std::filesystem::path& transcript, Mode mode = Mode::ByHash);
    ~ReplayProvider() override;
    ChatResponse chat(const ChatRequest& request) override;
    size_t remaining() const;   // exchanges not served yet

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// ---- Client -------------------------------------------------------------------------------------

struct ModelChoice {
    std::string name;
    double weight = 1;
};
// "NAME[:WEIGHT]". The weight is taken only when the part after the last ':' is a positive
// number, so names with tags ("openai/gpt-oss-120b:free", "qwen2.5-coder:7b") stay whole.
// Throws kevo::UsageError on an empty name or a weight <= 0.
ModelChoice parse_model_choice(const std::string& spec);

// The most requests in flight at once (one thread each).
inline constexpr int kMaxInFlight = 256;

struct ClientConfig {
    std::vector<ModelChoice> models;     // used when a request names no model
    int max_in_flight = 4;               // requests running at once (worker threads), 1..kMaxInFlight
    int64_t max_total_tokens = 0;        // hard caps (see budget.h); 0 means none
    double max_cost_usd = 0;
    std::optional<Price> price;          // USD per million tokens: bounds reservations, prices
                                         // replies that report no cost
    std::filesystem::path transcript;    // empty: no transcript
    std::optional<uint64_t> seed;        // for the model pick; empty: random
    LogFn log;                           // warnings; empty: silent
};

struct Totals {
    int64_t requests = 0;                // sent (successful or not)
    int64_t failures = 0;
    int64_t prompt_tokens = 0, completion_tokens = 0;   // as counted by the budget
    double cost_usd = 0;                 // reported by the provider, or at the configured price
    int64_t replies_without_cost = 0;    // replies whose cost is unknown (not in cost_usd)
    int64_t total_tokens() const { return prompt_tokens + completion_tokens; }
};

// Thread-safe. Every request reserves its most possible usage before it is sent and settles with
// the real usage (budget.h), so requests in flight cannot overrun a cap: a request that does not
// fit waits for those in flight, and with none in flight throws BudgetExceeded naming the cap.
class Client {
public:
    Client(std::shared_ptr<Provider> provider, ClientConfig config);
    ~Client();   // cancels queued and running requests and joins the workers
    Client(const Client&) = delete;
    Client& operator=(const Client&) = delete;

    // Queues the request; the future yields the response or throws an LlmError.
    std::future<ChatResponse> submit(ChatRequest request);
    ChatResponse chat(ChatRequest request) { return submit(std::move(request)).get(); }

    Totals totals() const;
    // Throws BudgetExceeded when a cap is reached (what submit's requests would throw).
    void check_budget() const;
    // Requests that held a budget reservation at the same time, at most.
    int max_reserved_at_once() const;
    // Permanent: queued and later requests throw Cancelled; running ones are aborted through
    // Provider::cancel() (which, for an HttpProvider, is permanent too).
    void cancel();
    const ClientConfig& config() const;

private:
    void start_workers();
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace kevo::llm
