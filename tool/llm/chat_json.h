// Internal to the llm part: the Chat Completions wire format, one source for the HTTP client and
// the Batch API files.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "llm/llm.h"

namespace kevo::llm::detail {

// The request body for POST {base_url}/chat/completions. OpenAI's newer models refuse max_tokens
// (api.openai.com gets max_completion_tokens); OpenRouter is asked to report the cost.
nlohmann::json chat_request_body(const ChatRequest& request, const std::string& base_url);

// Reads a Chat Completions reply object. Throws MalformedReply (not a completion), EmptyReply (no
// choice or no content), TruncatedReply (finish_reason "length", with the partial response) or
// HttpError (an error object inside a 2xx reply, as some gateways send; retryable unless it names
// a 4xx code other than 429). `from` names the source for messages (a URL, a batch file line).
// Token counts that are not whole non-negative numbers read as -1, for the budget to reject.
ChatResponse parse_chat_response(const nlohmann::json& reply, const ChatRequest& request, const std::string& from);

}  // namespace kevo::llm::detail
