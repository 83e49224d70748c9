// HttpProvider: Chat Completions over an HttpSession (timeouts, retries, typed errors), and the
// Chat Completions wire format (chat_json.h).
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/process.h"
#include "llm/chat_json.h"
#include "llm/http_session.h"
#include "llm/llm.h"
#include "llm/util.h"

namespace kevo::llm {
namespace {

using json = nlohmann::json;

bool is_openrouter(const std::string& url) {
    std::string host = url_host(url);
    return host == "openrouter.ai" || ends_with(host, ".openrouter.ai");
}

// Chat Completions "content" is a string, or (some servers) a list of {"type":"text","text":...}.
std::string content_text(const json& content) {
    if (content.is_string()) return content.get<std::string>();
    std::string text;
    if (content.is_array())
        for (const auto& part : content)
            if (part.is_object() && part.contains("text") && part["text"].is_string())
                text += part["text"].get<std::string>();
    return text;
}

// A token count: 0 when absent, -1 when it is not a whole non-negative number (rejected by the budget).
int64_t token_field(const json& object, const char* field) {
    if (!object.is_object() || !object.contains(field) || object[field].is_null()) return 0;
    const json& v = object[field];
    if (v.is_number_unsigned()) return v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX) ? -1 : v.get<int64_t>();
    if (v.is_number_integer()) return v.get<int64_t>() < 0 ? -1 : v.get<int64_t>();
    if (v.is_number_float()) {
        double d = v.get<double>();
        return std::isfinite(d) && d >= 0 && d <= 1e15 && d == std::floor(d) ? static_cast<int64_t>(d) : -1;
    }
    return -1;
}

}  // namespace

namespace detail {

json chat_request_body(const ChatRequest& request, const std::string& base_url) {
    json body = {{"model", request.model},
                 {"messages", json::array()},
                 {"temperature", request.temperature},
                 {"stream", false}};
    for (const auto& m : request.messages) body["messages"].push_back({{"role", m.role}, {"content", m.content}});
    body[url_host(base_url) == "api.openai.com" ? "max_completion_tokens" : "max_tokens"] = request.max_tokens;
    if (request.seed) body["seed"] = *request.seed;
    if (is_openrouter(base_url)) body["usage"] = {{"include", true}};   // report the cost
    return body;
}

ChatResponse parse_chat_response(const json& j, const ChatRequest& request, const std::string& from) {
    if (!j.is_object()) throw MalformedReply("the reply from " + from + " is not a JSON object: " + snippet(j.dump()));
    if (j.contains("error") && !j["error"].is_null()) {
        // Some gateways report upstream errors inside a 200.
        const json& e = j["error"];
        int code = e.is_object() && e.contains("code") && e["code"].is_number() ? e["code"].get<int>() : 0;
        throw HttpError(redact("error reported by " + from + " for model '" + request.model + "': " +
                               detail::server_message(j.dump())),
                        code, code == 429 || code >= 500 || code == 0);
    }
    const json& choices = j.contains("choices") ? j["choices"] : json();
    if (!choices.is_array())
        throw MalformedReply(redact("the reply from " + from + " has no \"choices\" array: " + snippet(j.dump())));
    if (choices.empty()) throw EmptyReply("the reply from " + from + " for model '" + request.model + "' has no choices");
    const json& choice = choices[0];
    const json& message = choice.is_object() && choice.contains("message") ? choice["message"] : json();
    ChatResponse r;
    r.content = message.is_object() && message.contains("content") ? content_text(message["content"]) : "";
    r.finish_reason = choice.is_object() && choice.contains("finish_reason") && choice["finish_reason"].is_string()
                          ? choice["finish_reason"].get<std::string>()
                          : "";
    r.model = j.contains("model") && j["model"].is_string() ? j["model"].get<std::string>() : request.model;
    const json& usage = j.contains("usage") ? j["usage"] : json();
    r.usage.prompt_tokens = token_field(usage, "prompt_tokens");
    r.usage.completion_tokens = token_field(usage, "completion_tokens");
    if (usage.is_object() && usage.contains("cost") && usage["cost"].is_number()) {
        r.usage.cost_usd = usage["cost"].get<double>();
        r.usage.cost_known = true;
    }
    if (r.finish_reason == "length")
        throw TruncatedReply("the reply of model '" + r.model + "' was cut off by the token limit (max_tokens " +
                                 std::to_string(request.max_tokens) + ", " + std::to_string(r.usage.completion_tokens) +
                                 " completion tokens" +
                                 (r.content.empty() ? ", no content: a reasoning model may need a larger limit" : "") +
                                 ")",
                             r);
    if (r.content.empty())
        throw EmptyReply("model '" + r.model + "' returned no content (finish_reason '" + r.finish_reason + "')");
    return r;
}

}  // namespace detail

struct HttpProvider::Impl {
    explicit Impl(HttpConfig c) : session(std::move(c)) {}
    detail::HttpSession session;
};

HttpProvider::HttpProvider(HttpConfig config) : impl_(std::make_unique<Impl>(std::move(config))) {}

HttpProvider::~HttpProvider() = default;

void HttpProvider::cancel() { impl_->session.cancel(); }

ChatResponse HttpProvider::chat(const ChatRequest& request) {
    if (request.model.empty()) throw LlmError("no model: the request names none", false);
    detail::HttpSession& session = impl_->session;
    const auto start = std::chrono::steady_clock::now();
    const std::string url = session.url("/chat/completions");
    detail::HttpExchange exchange;
    exchange.path = "/chat/completions";
    exchange.body = detail::chat_request_body(request, session.config().base_url)
                        .dump(-1, ' ', false, json::error_handler_t::replace);
    ChatResponse response;
    session.send(exchange, request.model, [&](const std::string& body, int attempt) {
        json j = json::parse(body, nullptr, false);
        if (j.is_discarded() || !j.is_object())
            throw MalformedReply(redact("the reply from " + url + " is not a JSON object: " + snippet(body)));
        const double latency = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        try {
            response = detail::parse_chat_response(j, request, url);
        } catch (TruncatedReply& e) {
            e.response.attempts = attempt;
            e.response.latency_s = latency;
            throw;
        } catch (const HttpError& e) {
            if (!e.retryable) throw;
            throw detail::RetryReply{e.what(), e.status};
        }
        response.attempts = attempt;
        response.latency_s = latency;
    });
    return response;
}

}  // namespace kevo::llm
