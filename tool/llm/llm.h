// LLM access for the search: an OpenAI-compatible Chat Completions client over libcurl, plus a
// replay provider for reproducible runs and tests. (Interface sketch: the llm part owns this file
// and may extend it; keep these names stable, the search uses them.)
#pragma once
#include <cstdint>
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
    int max_tokens = 8192;
    std::optional<int64_t> seed;
};

struct Usage {
    int64_t prompt_tokens = 0, completion_tokens = 0;
    double cost_usd = 0;   // when the provider reports it
    bool cost_known = false;
};

struct ChatResponse {
    std::string content;
    std::string finish_reason;  // "stop", "length", ...
    std::string model;          // the model that answered
    Usage usage;
    double latency_s = 0;
};

// Every failure is an LlmError; `retryable` says whether trying again later may help.
struct LlmError : std::runtime_error {
    LlmError(const std::string& what, bool retryable) : std::runtime_error(what), retryable(retryable) {}
    bool retryable;
};
// The run's token or cost cap is reached: no new request is sent.
struct BudgetExceeded : LlmError {
    explicit BudgetExceeded(const std::string& what) : LlmError(what, false) {}
};

// Anything that answers chat requests: the HTTP client, the replay provider, test fakes.
class Provider {
public:
    virtual ~Provider() = default;
    // Blocking; thread-safe (several requests may be in flight from different threads).
    virtual ChatResponse chat(const ChatRequest& request) = 0;
};

}  // namespace kevo::llm
