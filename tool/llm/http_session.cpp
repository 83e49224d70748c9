// HttpSession: one HTTP exchange over libcurl with connect/read timeouts, cancellation, retries.
#include "llm/http_session.h"

#include <curl/curl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>
#include <optional>

#include "common/error.h"
#include "common/process.h"
#include "common/text.h"
#include "llm/options.h"
#include "common/setting_error.h"
#include "llm/util.h"

namespace kevo::llm::detail {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

void global_init() {
    static std::once_flag once;
    std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct BodySink {
    std::string* body;
    size_t max;
    bool* too_large;
};

size_t on_body(char* data, size_t size, size_t count, void* user) {
    auto* sink = static_cast<BodySink*>(user);
    size_t n = size * count;
    if (sink->body->size() + n > sink->max) {   // aborts the transfer (CURLE_WRITE_ERROR): say why
        *sink->too_large = true;
        return 0;
    }
    sink->body->append(data, n);
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

[[noreturn]] void raise(const std::string& message, int status, bool retryable) {
    if (status) throw HttpError(redact(message), status, retryable);
    throw LlmError(redact(message), retryable);
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

}  // namespace

std::string server_message(const std::string& body) {
    json j = json::parse(body, nullptr, false);
    // Whatever the server sent may reach a terminal: control characters and bytes that are not
    // UTF-8 are shown as escapes.
    if (j.is_object()) {
        const json* e = j.contains("error") ? &j["error"] : &j;
        if (e->is_string()) return printable(e->get<std::string>());
        if (e->is_object()) {
            for (const char* field : {"message", "detail", "error"})
                if (e->contains(field) && (*e)[field].is_string()) return printable((*e)[field].get<std::string>());
        }
    }
    return printable(snippet(body));
}

std::string status_hint(int status, const std::string& model, bool have_key) {
    switch (status) {
        case 400: return named("the server rejected the request (check {llm.model} and the request parameters)");
        case 401:
            return have_key ? "the API key was rejected (check KERNELEVO_API_KEY or the provider's key variable)"
                            : named("no API key was sent; set KERNELEVO_API_KEY (see {llm.key_env})");
        case 402: return "payment required: the account is out of credits";
        case 403: return "forbidden: this key may not use model '" + model + "'";
        case 404:
            return named(model.empty() ? "not found: wrong {llm.url}, an unknown id, or the provider has no such endpoint"
                                       : "not found: unknown model '" + model + "' or wrong {llm.url}");
        case 408: return "the server timed out waiting for the request";
        case 429: return "rate limited";
        default: return status >= 500 ? "server error" : "request failed";
    }
}

struct HttpSession::Transfer {
    CURL* easy = curl_easy_init();
    CURLM* multi = curl_multi_init();
    ~Transfer() {
        if (multi) curl_multi_cleanup(multi);
        if (easy) curl_easy_cleanup(easy);
    }
};

HttpSession::HttpSession(HttpConfig config) : config_(std::move(config)), rng_(std::random_device{}()) {
    global_init();
    register_url_secrets(config_.base_url);
    base_ = config_.base_url;
    // A query (?key=..., ?api-version=...) stays at the end of every URL, after the endpoint's path.
    base_ = base_.substr(0, base_.find('#'));   // a fragment is never sent
    if (size_t q = base_.find('?'); q != std::string::npos) {
        query_ = base_.size() > q + 1 ? base_.substr(q) : "";
        base_.resize(q);
    }
    while (!base_.empty() && base_.back() == '/') base_.pop_back();
    if (!starts_with(base_, "http://") && !starts_with(base_, "https://"))
        throw SettingError({settings::kLlmUrl}, "{llm.url} must start with http:// or https:// (got '" + redact(display_url(config_.base_url)) + "')");
    if (config_.api_key.find_first_of("\r\n") != std::string::npos)
        throw UsageError("the API key contains a line break");
    if (config_.max_attempts < 1) throw UsageError("the number of LLM attempts must be at least 1");
    if (config_.connect_timeout_s <= 0 || config_.read_timeout_s <= 0)
        throw UsageError("LLM timeouts must be positive");
    register_secret(config_.api_key);
}

HttpSession::~HttpSession() = default;

void HttpSession::cancel() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        cancelled_ = true;
    }
    cancel_cv_.notify_all();
}

bool HttpSession::sleep_unless_cancelled(double seconds) {
    std::unique_lock<std::mutex> lock(mu_);
    return !cancel_cv_.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return cancelled_.load(); });
}

std::unique_ptr<HttpSession::Transfer> HttpSession::take_transfer() {
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

void HttpSession::give_transfer(std::unique_ptr<Transfer> transfer) {
    std::lock_guard<std::mutex> lock(mu_);
    idle_.push_back(std::move(transfer));
}

namespace {
// The request's method and body: a multipart form (returned, for the caller to free), a JSON body or a GET.
curl_mime* set_request_body(CURL* h, const HttpExchange& ex) {
    if (ex.method == "POST" && !ex.parts.empty()) {
        curl_mime* mime = curl_mime_init(h);
        for (const auto& part : ex.parts) {
            curl_mimepart* p = curl_mime_addpart(mime);
            curl_mime_name(p, part.name.c_str());
            curl_mime_data(p, part.data.data(), part.data.size());
            if (!part.filename.empty()) {
                curl_mime_filename(p, part.filename.c_str());
                curl_mime_type(p, "application/jsonl");
            }
        }
        curl_easy_setopt(h, CURLOPT_MIMEPOST, mime);
        return mime;
    }
    if (ex.method == "POST") {
        curl_easy_setopt(h, CURLOPT_POST, 1L);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, ex.body.data());
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(ex.body.size()));
    } else {
        curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    }
    return nullptr;
}

// Drives the transfer `h` (already in `multi`) until it ends, is cancelled, or reads for longer than
// read_s after connecting; sets a.connected and a.read_timed_out. True when it was aborted.
bool perform(CURLM* multi, CURL* h, double read_s, const std::atomic<bool>& cancelled, HttpResult& a) {
    std::optional<Clock::time_point> connected_at;
    bool aborted = false;
    for (int running = 1; running;) {
        if (curl_multi_perform(multi, &running) != CURLM_OK) break;
        if (!running) break;
        curl_off_t pretransfer_us = 0;   // > 0 once connected (TCP + TLS), also on a reused connection
        curl_easy_getinfo(h, CURLINFO_PRETRANSFER_TIME_T, &pretransfer_us);
        if (!connected_at && pretransfer_us > 0) connected_at = Clock::now();
        if (cancelled) {
            aborted = true;
            break;
        }
        if (connected_at && std::chrono::duration<double>(Clock::now() - *connected_at).count() > read_s) {
            a.read_timed_out = aborted = true;
            break;
        }
        curl_multi_poll(multi, nullptr, 0, 50, nullptr);
    }
    a.connected = connected_at.has_value();
    return aborted;
}
}  // namespace

// Runs the transfer through a multi handle so that it can enforce the read timeout from the
// moment the connection is ready (libcurl's own timeout counts from the start) and notice
// cancel() within a poll interval.
HttpResult HttpSession::attempt(const HttpExchange& ex) {
    HttpResult a;
    std::unique_ptr<Transfer> t = take_transfer();
    CURL* h = t->easy;
    curl_easy_reset(h);   // keeps the connection cache, which lives in the multi handle

    const std::string url = base_ + ex.path + query_;
    curl_slist* headers = nullptr;
    if (ex.method == "POST" && ex.parts.empty()) headers = curl_slist_append(headers, "Content-Type: application/json");
    headers = curl_slist_append(headers, "Accept: application/json");
    headers = curl_slist_append(headers, "Expect:");   // no 100-continue round trip
    if (!config_.api_key.empty())
        headers = curl_slist_append(headers, ("Authorization: Bearer " + config_.api_key).c_str());
    curl_mime* mime = nullptr;
    char errbuf[CURL_ERROR_SIZE] = {0};
    const double connect_s = config_.connect_timeout_s, read_s = config_.read_timeout_s;
    curl_easy_setopt(h, CURLOPT_URL, url.c_str());
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    mime = set_request_body(h, ex);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "kernelevo");
    curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(connect_s * 1000));
    // A backstop only; the read timeout proper is enforced below.
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>((connect_s + read_s) * 1000) + 1000);
    BodySink sink{&a.body, ex.max_reply_bytes, &a.too_large};
    // A Content-Length over the limit fails at once (CURLE_FILESIZE_EXCEEDED), before the body.
    curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(ex.max_reply_bytes));
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &sink);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &a.retry_after);

    curl_multi_add_handle(t->multi, h);
    const bool aborted = perform(t->multi, h, read_s, cancelled_, a);
    int queued = 0;
    CURLcode code = CURLE_ABORTED_BY_CALLBACK;
    if (!aborted)
        while (CURLMsg* msg = curl_multi_info_read(t->multi, &queued))
            if (msg->msg == CURLMSG_DONE && msg->easy_handle == h) code = msg->data.result;
    a.curl_code = static_cast<int>(code);
    a.timed_out = a.read_timed_out || code == CURLE_OPERATION_TIMEDOUT;
    if (code == CURLE_FILESIZE_EXCEEDED) a.too_large = true;
    a.curl_error = errbuf[0] ? errbuf : curl_easy_strerror(code);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &a.status);
    curl_off_t pretransfer_us = 0;
    curl_easy_getinfo(h, CURLINFO_PRETRANSFER_TIME_T, &pretransfer_us);
    a.connected = a.connected || pretransfer_us > 0;
    curl_multi_remove_handle(t->multi, h);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, nullptr);
    curl_easy_setopt(h, CURLOPT_MIMEPOST, nullptr);
    curl_slist_free_all(headers);
    if (mime) curl_mime_free(mime);
    // An aborted transfer leaves its connection in an unknown state: drop the handles with it.
    if (!aborted) give_transfer(std::move(t));
    return a;
}

double HttpSession::backoff(int n, double retry_after_s) {
    double wait = std::min(config_.backoff_max_s, config_.backoff_initial_s * std::pow(2.0, n - 1));
    {
        std::lock_guard<std::mutex> lock(mu_);
        wait *= std::uniform_real_distribution<double>(0.5, 1.0)(rng_);
    }
    return std::max(wait, retry_after_s);
}

std::string HttpSession::send(const HttpExchange& ex, const std::string& model,
                              const std::function<void(const std::string&, int)>& check) {
    const std::string url = this->url(ex.path);   // for messages
    double waited = 0;
    for (int n = 1;; ++n) {
        if (cancelled_) throw Cancelled();
        HttpResult a = attempt(ex);
        if (cancelled_) throw Cancelled();
        if (a.connected) connected_once_ = true;
        // What went wrong with this attempt; all of it may be retried but 4xx statuses.
        std::string message;
        int status = 0;
        double retry_after = -1;
        bool retryable = true;
        if (a.too_large) {
            // A reply this size will be as large next time: not a transient failure.
            char limit[32];
            std::snprintf(limit, sizeof limit, "%.0f MB", static_cast<double>(ex.max_reply_bytes) / (1 << 20));
            message = "reply too large (over " + std::string(limit) + ") from " + url +
                      "; not retried (the same request would get as large a reply)";
            retryable = false;
        } else if (a.timed_out) {
            message = a.connected ? "no complete reply from " + url + " within " + format_seconds(config_.read_timeout_s) +
                                        " (read timeout)"
                                  : "could not connect to " + url + " within " +
                                        format_seconds(config_.connect_timeout_s) + " (connect timeout)";
        } else if (a.curl_code != 0) {
            message = "request to " + url + " failed: " + a.curl_error;
        } else if (a.status < 200 || a.status >= 300) {
            status = static_cast<int>(a.status);
            retryable = status == 408 || status == 429 || status >= 500;
            retry_after = parse_retry_after(a.retry_after);
            message = "HTTP " + std::to_string(status) + " from " + url + ": " +
                      status_hint(status, model, !config_.api_key.empty()) + ": " + server_message(a.body);
        } else {
            try {
                if (check) check(a.body, n);
                return std::move(a.body);
            } catch (const RetryReply& r) {
                message = r.message;
                status = r.status;
            }
        }
        // A server this session has never reached (connection refused, unknown host, connect
        // timeout) is a wrong URL or no network, not a hiccup: fail within the connect timeout
        // instead of retrying for minutes.
        if (retryable && !a.connected && !connected_once_) {
            retryable = false;
            message += named(" (not retried: no connection to this server has succeeded yet; check {llm.url} and the "
                             "network)");
        }
        if (!retryable) raise(message, status, retryable);
        if (n >= config_.max_attempts)
            raise(message + (n > 1 ? " (gave up after " + std::to_string(n) + " attempts)" : ""), status, retryable);
        double wait = backoff(n, retry_after);
        if (waited + wait > config_.retry_total_max_s)
            raise(message + " (gave up after " + std::to_string(n) + " attempts: waiting " + format_seconds(wait) +
                      " more would exceed the retry cap of " + format_seconds(config_.retry_total_max_s) + ")",
                  status, retryable);
        if (config_.log)
            config_.log(redact(message + "; retrying in " + format_seconds(wait) + " (attempt " + std::to_string(n + 1) +
                               " of " + std::to_string(config_.max_attempts) + ")"));
        if (!sleep_unless_cancelled(wait)) throw Cancelled();
        waited += wait;
    }
}

}  // namespace kevo::llm::detail
