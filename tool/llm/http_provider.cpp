// HttpProvider: Chat Completions over libcurl with timeouts, retries and typed errors.
#include <curl/curl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <optional>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/process.h"
#include "llm/llm.h"
#include "llm/util.h"

namespace kevo::llm {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr size_t kMaxReplyBytes = 64u << 20;

void global_init() {
    static std::once_flag once;
    std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// What went wrong with one attempt, and how to report it.
struct Failure {
    enum Kind { Network, Http, Malformed, Empty, Truncated } kind = Network;
    std::string message;
    int status = 0;
    bool retryable = false;
    double retry_after_s = -1;   // from the Retry-After header; < 0 when absent
    ChatResponse partial;        // Truncated only
};

[[noreturn]] void raise(const Failure& f) {
    std::string message = redact(f.message);
    switch (f.kind) {
        case Failure::Http: throw HttpError(message, f.status, f.retryable);
        case Failure::Malformed: throw MalformedReply(message);
        case Failure::Empty: throw EmptyReply(message);
        case Failure::Truncated: throw TruncatedReply(message, f.partial);
        case Failure::Network: break;
    }
    throw LlmError(message, f.retryable);
}

size_t on_body(char* data, size_t size, size_t count, void* user) {
    auto* body = static_cast<std::string*>(user);
    size_t n = size * count;
    if (body->size() + n > kMaxReplyBytes) return 0;   // aborts the transfer
    body->append(data, n);
    return n;
}

size_t on_header(char* data, size_t size, size_t count, void* user) {
    size_t n = size * count;
    std::string line(data, n);
    auto colon = line.find(':');
    if (colon != std::string::npos && lower(trim(line.substr(0, colon))) == "retry-after")
        *static_cast<std::string*>(user) = trim(line.substr(colon + 1));
    return n;
}

// Retry-After is either delta-seconds or an HTTP date. Returns < 0 when absent or unreadable.
double parse_retry_after(const std::string& value) {
    if (value.empty()) return -1;
    char* end = nullptr;
    double seconds = std::strtod(value.c_str(), &end);
    if (end != value.c_str() && *end == '\0') return std::max(0.0, seconds);
    time_t when = curl_getdate(value.c_str(), nullptr);
    if (when < 0) return -1;
    return std::max(0.0, std::difftime(when, std::time(nullptr)));
}

// The server's own explanation, from the usual error shapes, else the start of the body.
std::string server_message(const std::string& body) {
    json j = json::parse(body, nullptr, false);
    if (j.is_object()) {
        const json* e = j.contains("error") ? &j["error"] : &j;
        if (e->is_string()) return e->get<std::string>();
        if (e->is_object()) {
            for (const char* field : {"message", "detail", "error"})
                if (e->contains(field) && (*e)[field].is_string()) return (*e)[field].get<std::string>();
        }
    }
    return snippet(body);
}

std::string status_hint(int status, const std::string& model, bool have_key) {
    switch (status) {
        case 400: return "the server rejected the request (check --model and the request parameters)";
        case 401:
            return have_key ? "the API key was rejected (check KERNELEVO_API_KEY or the provider's key variable)"
                            : "no API key was sent; set KERNELEVO_API_KEY (see --llm-key-env)";
        case 402: return "payment required: the account is out of credits";
        case 403: return "forbidden: this key may not use model '" + model + "'";
        case 404: return "not found: unknown model '" + model + "' or wrong --llm-url";
        case 408: return "the server timed out waiting for the request";
        case 429: return "rate limited";
        default: return status >= 500 ? "server error" : "request failed";
    }
}

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

int64_t int_field(const json& object, const char* field) {
    if (!object.is_object() || !object.contains(field) || !object[field].is_number()) return 0;
    return object[field].get<int64_t>();
}

}  // namespace

struct HttpProvider::Attempt {
    CURLcode code = CURLE_OK;
    std::string curl_error;
    bool read_timed_out = false;   // our own deadline, counted from the end of the connect phase
    bool connected = false;
    long status = 0;
    std::string body;
    std::string retry_after;
};

struct HttpProvider::Transfer {
    CURL* easy = curl_easy_init();
    CURLM* multi = curl_multi_init();
    ~Transfer() {
        if (multi) curl_multi_cleanup(multi);
        if (easy) curl_easy_cleanup(easy);
    }
};

HttpProvider::HttpProvider(HttpConfig config) : config_(std::move(config)), rng_(std::random_device{}()) {
    global_init();
    std::string base = config_.base_url;
    while (!base.empty() && base.back() == '/') base.pop_back();
    if (!starts_with(base, "http://") && !starts_with(base, "https://"))
        throw UsageError("--llm-url must start with http:// or https:// (got '" + redact(base) + "')");
    if (config_.api_key.find_first_of("\r\n") != std::string::npos)
        throw UsageError("the API key contains a line break");
    if (config_.max_attempts < 1) throw UsageError("the number of LLM attempts must be at least 1");
    if (config_.connect_timeout_s <= 0 || config_.read_timeout_s <= 0)
        throw UsageError("LLM timeouts must be positive");
    register_secret(config_.api_key);
    url_ = base + "/chat/completions";
}

HttpProvider::~HttpProvider() = default;

void HttpProvider::cancel() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        cancelled_ = true;
    }
    cancel_cv_.notify_all();
}

bool HttpProvider::sleep_unless_cancelled(double seconds) {
    std::unique_lock<std::mutex> lock(mu_);
    return !cancel_cv_.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return cancelled_.load(); });
}

std::unique_ptr<HttpProvider::Transfer> HttpProvider::take_transfer() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (!idle_.empty()) {
            auto t = std::move(idle_.back());
            idle_.pop_back();
            return t;
        }
    }
    auto t = std::make_unique<Transfer>();
    if (!t->easy || !t->multi) throw LlmError("libcurl could not create a handle", true);
    return t;
}

void HttpProvider::give_transfer(std::unique_ptr<Transfer> transfer) {
    std::lock_guard<std::mutex> lock(mu_);
    idle_.push_back(std::move(transfer));
}

// One HTTP exchange. Runs the transfer through a multi handle so that it can enforce the read
// timeout from the moment the connection is ready (libcurl's own timeout counts from the start)
// and notice cancel() within a poll interval.
HttpProvider::Attempt HttpProvider::attempt(const std::string& body) {
    Attempt a;
    std::unique_ptr<Transfer> t = take_transfer();
    CURL* h = t->easy;
    curl_easy_reset(h);   // keeps the connection cache, which lives in the multi handle

    curl_slist* headers = nullptr;
    headers = curl_slist_append(headers, "Content-Type: application/json");
    headers = curl_slist_append(headers, "Accept: application/json");
    headers = curl_slist_append(headers, "Expect:");   // no 100-continue round trip
    if (!config_.api_key.empty())
        headers = curl_slist_append(headers, ("Authorization: Bearer " + config_.api_key).c_str());
    char errbuf[CURL_ERROR_SIZE] = {0};
    const double connect_s = config_.connect_timeout_s, read_s = config_.read_timeout_s;
    curl_easy_setopt(h, CURLOPT_URL, url_.c_str());
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    curl_easy_setopt(h, CURLOPT_USERAGENT, "kernelevo");
    curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(connect_s * 1000));
    // A backstop only; the read timeout proper is enforced below.
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>((connect_s + read_s) * 1000) + 1000);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &a.body);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &a.retry_after);

    curl_multi_add_handle(t->multi, h);
    std::optional<Clock::time_point> connected_at;
    bool aborted = false;
    for (int running = 1; running;) {
        if (curl_multi_perform(t->multi, &running) != CURLM_OK) break;
        if (!running) break;
        curl_off_t pretransfer_us = 0;   // > 0 once connected (TCP + TLS), also on a reused connection
        curl_easy_getinfo(h, CURLINFO_PRETRANSFER_TIME_T, &pretransfer_us);
        if (!connected_at && pretransfer_us > 0) connected_at = Clock::now();
        if (cancelled_) {
            aborted = true;
            break;
        }
        if (connected_at && std::chrono::duration<double>(Clock::now() - *connected_at).count() > read_s) {
            a.read_timed_out = aborted = true;
            break;
        }
        curl_multi_poll(t->multi, nullptr, 0, 50, nullptr);
    }
    int queued = 0;
    a.code = CURLE_ABORTED_BY_CALLBACK;
    if (!aborted)
        while (CURLMsg* msg = curl_multi_info_read(t->multi, &queued))
            if (msg->msg == CURLMSG_DONE && msg->easy_handle == h) a.code = msg->data.result;
    a.curl_error = errbuf[0] ? errbuf : curl_easy_strerror(a.code);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &a.status);
    curl_off_t pretransfer_us = 0;
    curl_easy_getinfo(h, CURLINFO_PRETRANSFER_TIME_T, &pretransfer_us);
    a.connected = connected_at.has_value() || pretransfer_us > 0;
    curl_multi_remove_handle(t->multi, h);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, nullptr);
    curl_slist_free_all(headers);
    // An aborted transfer leaves its connection in an unknown state: drop the handles with it.
    if (!aborted) give_transfer(std::move(t));
    return a;
}

ChatResponse HttpProvider::chat(const ChatRequest& request) {
    if (request.model.empty()) throw LlmError("no model: the request names none", false);
    const auto start = Clock::now();
    const bool openai = url_host(url_) == "api.openai.com";

    json body = {{"model", request.model},
                 {"messages", json::array()},
                 {"temperature", request.temperature},
                 {"stream", false}};
    for (const auto& m : request.messages) body["messages"].push_back({{"role", m.role}, {"content", m.content}});
    // OpenAI's newer models refuse max_tokens; everyone else knows max_tokens.
    body[openai ? "max_completion_tokens" : "max_tokens"] = request.max_tokens;
    if (request.seed) body["seed"] = *request.seed;
    if (is_openrouter(url_)) body["usage"] = {{"include", true}};   // report the cost
    const std::string payload = body.dump(-1, ' ', false, json::error_handler_t::replace);

    double waited = 0;
    for (int n = 1;; ++n) {
        if (cancelled_) throw Cancelled();
        Attempt a = attempt(payload);
        Failure f;
        if (cancelled_) throw Cancelled();
        if (a.connected) connected_once_ = true;
        if (a.read_timed_out || a.code == CURLE_OPERATION_TIMEDOUT) {
            f.message = a.connected ? "no complete reply from " + url_ + " within " +
                                          format_seconds(config_.read_timeout_s) + " (read timeout)"
                                    : "could not connect to " + url_ + " within " +
                                          format_seconds(config_.connect_timeout_s) + " (connect timeout)";
            f.retryable = true;
        } else if (a.code != CURLE_OK) {
            f.message = "request to " + url_ + " failed: " + a.curl_error;
            f.retryable = true;
        } else if (a.status < 200 || a.status >= 300) {
            f.kind = Failure::Http;
            f.status = static_cast<int>(a.status);
            f.retryable = a.status == 408 || a.status == 429 || a.status >= 500;
            f.retry_after_s = parse_retry_after(a.retry_after);
            f.message = "HTTP " + std::to_string(a.status) + " from " + url_ + ": " +
                        status_hint(f.status, request.model, !config_.api_key.empty()) + ": " +
                        server_message(a.body);
        } else {
            // A 2xx reply: parse it. Errors here are not retried by the provider.
            json j = json::parse(a.body, nullptr, false);
            if (j.is_discarded() || !j.is_object()) {
                f.kind = Failure::Malformed;
                f.message = "the reply from " + url_ + " is not a JSON object: " + snippet(a.body);
                raise(f);
            }
            if (j.contains("error") && !j["error"].is_null()) {
                // Some gateways report upstream errors inside a 200.
                const json& e = j["error"];
                int code = e.is_object() && e.contains("code") && e["code"].is_number() ? e["code"].get<int>() : 0;
                f.kind = Failure::Http;
                f.status = code;
                f.retryable = code == 429 || code >= 500 || code == 0;
                f.message = "error reported by " + url_ + " for model '" + request.model + "': " +
                            server_message(a.body);
            } else {
                const json& choices = j.contains("choices") ? j["choices"] : json();
                if (!choices.is_array()) {
                    f.kind = Failure::Malformed;
                    f.message = "the reply from " + url_ + " has no \"choices\" array: " + snippet(a.body);
                    raise(f);
                }
                if (choices.empty()) {
                    f.kind = Failure::Empty;
                    f.message = "the reply from " + url_ + " for model '" + request.model + "' has no choices";
                    raise(f);
                }
                const json& choice = choices[0];
                const json& message = choice.is_object() && choice.contains("message") ? choice["message"] : json();
                ChatResponse r;
                r.content = message.is_object() && message.contains("content") ? content_text(message["content"]) : "";
                r.finish_reason = choice.is_object() && choice.contains("finish_reason") &&
                                          choice["finish_reason"].is_string()
                                      ? choice["finish_reason"].get<std::string>()
                                      : "";
                r.model = j.contains("model") && j["model"].is_string() ? j["model"].get<std::string>() : request.model;
                const json& usage = j.contains("usage") ? j["usage"] : json();
                r.usage.prompt_tokens = int_field(usage, "prompt_tokens");
                r.usage.completion_tokens = int_field(usage, "completion_tokens");
                if (usage.is_object() && usage.contains("cost") && usage["cost"].is_number()) {
                    r.usage.cost_usd = usage["cost"].get<double>();
                    r.usage.cost_known = true;
                }
                r.attempts = n;
                r.latency_s = std::chrono::duration<double>(Clock::now() - start).count();
                if (r.finish_reason == "length") {
                    f.kind = Failure::Truncated;
                    f.message = "the reply of model '" + r.model + "' was cut off by the token limit (max_tokens " +
                                std::to_string(request.max_tokens) + ", " +
                                std::to_string(r.usage.completion_tokens) + " completion tokens" +
                                (r.content.empty() ? ", no content: a reasoning model may need a larger limit" : "") +
                                ")";
                    f.partial = std::move(r);
                    raise(f);
                }
                if (r.content.empty()) {
                    f.kind = Failure::Empty;
                    f.message = "model '" + r.model + "' returned no content (finish_reason '" + r.finish_reason + "')";
                    raise(f);
                }
                return r;
            }
        }

        // A failed attempt: retry it, or give up. A server that this provider has never reached
        // (connection refused, unknown host, connect timeout) is a wrong URL or no network, not a
        // hiccup: fail within the connect timeout instead of retrying for minutes.
        if (f.retryable && !a.connected && !connected_once_) {
            f.retryable = false;
            f.message += " (not retried: no connection to this server has succeeded yet; check --llm-url and the network)";
        }
        if (!f.retryable) raise(f);
        if (n >= config_.max_attempts) {
            if (n > 1) f.message += " (gave up after " + std::to_string(n) + " attempts)";
            raise(f);
        }
        double backoff = std::min(config_.backoff_max_s, config_.backoff_initial_s * std::pow(2.0, n - 1));
        double wait;
        {
            std::lock_guard<std::mutex> lock(mu_);
            wait = backoff * std::uniform_real_distribution<double>(0.5, 1.0)(rng_);
        }
        wait = std::max(wait, f.retry_after_s);
        if (waited + wait > config_.retry_total_max_s) {
            f.message += " (gave up after " + std::to_string(n) + " attempts: waiting " + format_seconds(wait) +
                         " more would exceed the retry cap of " + format_seconds(config_.retry_total_max_s) + ")";
            raise(f);
        }
        if (config_.log)
            config_.log(redact(f.message + "; retrying in " + format_seconds(wait) + " (attempt " +
                               std::to_string(n + 1) + " of " + std::to_string(config_.max_attempts) + ")"));
        if (!sleep_unless_cancelled(wait)) throw Cancelled();
        waited += wait;
    }
}

}  // namespace kevo::llm
