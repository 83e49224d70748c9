// Transcript (JSONL recording of every exchange) and ReplayProvider (serving one back).
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <deque>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/fs.h"
#include "common/hash.h"
#include "common/process.h"
#include "common/text.h"
#include "llm/llm.h"
#include "common/setting_error.h"

namespace kevo::llm {
namespace {

using json = nlohmann::json;

json request_object(const ChatRequest& r) {
    json messages = json::array();
    for (const auto& m : r.messages) messages.push_back({{"role", m.role}, {"content", m.content}});
    return {{"model", r.model},
            {"messages", messages},
            {"temperature", r.temperature},
            {"max_tokens", r.max_tokens},
            {"seed", r.seed ? json(*r.seed) : json()}};
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string utc_now() {
    auto now = std::chrono::system_clock::now();
    std::time_t t = std::chrono::system_clock::to_time_t(now);
    int ms = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[40];
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                  tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
    return buf;
}

const char* error_kind(const LlmError& e) {
    if (dynamic_cast<const BudgetExceeded*>(&e)) return "budget";
    if (dynamic_cast<const HttpError*>(&e)) return "http";
    if (dynamic_cast<const MalformedReply*>(&e)) return "malformed";
    if (dynamic_cast<const EmptyReply*>(&e)) return "empty";
    if (dynamic_cast<const TruncatedReply*>(&e)) return "truncated";
    if (dynamic_cast<const Cancelled*>(&e)) return "cancelled";
    return "error";
}

json response_object(const ChatResponse& r) {
    return {{"content", r.content}, {"finish_reason", r.finish_reason}, {"model", r.model}};
}

ChatResponse response_from(const json& line) {
    ChatResponse r;
    const json& resp = line.at("response");
    r.content = resp.at("content").get<std::string>();
    r.finish_reason = resp.value("finish_reason", "");
    r.model = resp.value("model", "");
    const json& u = line.at("usage");
    r.usage.prompt_tokens = u.value("prompt_tokens", int64_t{0});
    r.usage.completion_tokens = u.value("completion_tokens", int64_t{0});
    if (u.contains("cost_usd") && u["cost_usd"].is_number()) {
        r.usage.cost_usd = u["cost_usd"].get<double>();
        r.usage.cost_known = true;
    }
    r.latency_s = line.value("latency_s", 0.0);
    r.attempts = line.value("attempts", 1);
    return r;
}

}  // namespace

std::string request_json(const ChatRequest& request) { return dump(request_object(request)); }
std::string request_hash(const ChatRequest& request) { return sha256_hex(request_json(request)); }

ChatRequest request_from_json(const std::string& text) {
    json j = json::parse(text, nullptr, false);
    ChatRequest r;
    try {
        if (!j.is_object()) throw std::runtime_error("not an object");
        r.model = j.at("model").get<std::string>();
        for (const auto& m : j.at("messages")) r.messages.push_back({m.at("role").get<std::string>(), m.at("content").get<std::string>()});
        r.temperature = j.at("temperature").get<double>();
        r.max_tokens = j.at("max_tokens").get<int>();
        if (j.contains("seed") && !j["seed"].is_null()) r.seed = j["seed"].get<int64_t>();
    } catch (const std::exception& e) {
        throw UsageError(std::string("not a stored LLM request (") + e.what() + "): " + text.substr(0, 120));
    }
    return r;
}

struct Transcript::Impl {
    std::filesystem::path path;
    int fd = -1;
    std::mutex mu;
};

Transcript::Transcript(const std::filesystem::path& path) : impl_(std::make_unique<Impl>()) {
    impl_->path = path;
    std::error_code ec;
    if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
    impl_->fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (impl_->fd < 0) throw UsageError("cannot open the LLM transcript " + path.string() + ": " + std::strerror(errno));
}

Transcript::~Transcript() {
    if (impl_->fd >= 0) ::close(impl_->fd);
}

void Transcript::record(const ChatRequest& request, const ChatResponse* response, const LlmError* error,
                        double latency_s) {
    const TruncatedReply* truncated = dynamic_cast<const TruncatedReply*>(error);
    if (truncated) response = &truncated->response;
    json line = {{"time", utc_now()},
                 {"request_hash", request_hash(request)},
                 {"request", request_object(request)},
                 {"response", response ? response_object(*response) : json()},
                 {"usage", json::object()},
                 {"latency_s", latency_s},
                 {"attempts", response ? json(response->attempts) : json()},
                 {"error", json()}};
    if (response) {
        const Usage& u = response->usage;
        line["usage"] = {{"prompt_tokens", u.prompt_tokens},
                         {"completion_tokens", u.completion_tokens},
                         {"cost_usd", u.cost_known ? json(u.cost_usd) : json()}};
    }
    if (error) {
        const HttpError* http = dynamic_cast<const HttpError*>(error);
        line["error"] = {{"kind", error_kind(*error)},
                         {"message", redact(error->what())},
                         {"retryable", error->retryable},
                         {"status", http ? json(http->status) : json()}};
    }
    // The exchange is recorded as it was (a reply is replayed byte for byte); only the error
    // message, the tool's own text, is redacted.
    std::string text = dump(line) + "\n";
    std::lock_guard<std::mutex> lock(impl_->mu);
    // O_APPEND + one write per line: lines never interleave, even across processes.
    for (size_t done = 0; done < text.size();) {
        ssize_t n = ::write(impl_->fd, text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0)
            throw LlmError("cannot write the LLM transcript " + impl_->path.string() + ": " + std::strerror(errno), false);
        done += static_cast<size_t>(n);
    }
}

struct ReplayProvider::Impl {
    Mode mode;
    std::filesystem::path path;
    std::vector<std::string> lines;                 // the exchanges, as recorded
    size_t next = 0;                                // InOrder cursor
    std::map<std::string, std::deque<size_t>> by_hash;
    std::mutex mu;
};

ReplayProvider::~ReplayProvider() = default;

ReplayProvider::ReplayProvider(const std::filesystem::path& transcript, Mode mode) : impl_(std::make_unique<Impl>()) {
    impl_->mode = mode;
    impl_->path = transcript;
    std::string text;
    try {
        text = read_input_file(transcript, "an LLM transcript ({llm.replay})", std::uintmax_t{1} << 30);
    } catch (const UsageError& e) {
        throw SettingError({settings::kLlmReplay}, e.what());
    }
    for_each_nonblank_line(text, [&](std::string& line, size_t number) {
        json j = json::parse(line, nullptr, false);
        if (!j.is_object() || !j.contains("request_hash") || !j.contains("response") || !j.contains("error"))
            throw UsageError(transcript.string() + ": line " + std::to_string(number) + " is not a transcript exchange");
        // Budget stops and cancellations never reached the server: nothing to replay.
        if (j["error"].is_object() && (j["error"].value("kind", "") == "budget" || j["error"].value("kind", "") == "cancelled"))
            return;
        impl_->by_hash[j["request_hash"].get<std::string>()].push_back(impl_->lines.size());
        impl_->lines.push_back(std::move(line));
    });
}

size_t ReplayProvider::remaining() const {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->mode == Mode::InOrder) return impl_->lines.size() - impl_->next;
    size_t n = 0;
    for (const auto& [hash, queue] : impl_->by_hash) n += queue.size();
    return n;
}

ChatResponse ReplayProvider::chat(const ChatRequest& request) {
    Impl& m = *impl_;
    size_t index;
    {
        std::lock_guard<std::mutex> lock(m.mu);
        if (m.mode == Mode::InOrder) {
            if (m.next >= m.lines.size())
                throw LlmError("replay: all " + std::to_string(m.lines.size()) + " exchanges of " + m.path.string() +
                                   " were served already",
                               false);
            index = m.next++;
        } else {
            std::string hash = request_hash(request);
            auto it = m.by_hash.find(hash);
            if (it == m.by_hash.end() || it->second.empty())
                throw LlmError("replay: " + m.path.string() + " holds no " + (it == m.by_hash.end() ? "" : "further ") +
                                   "exchange for this request (model '" + request.model + "', hash " +
                                   hash.substr(0, 12) + ")",
                               false);
            index = it->second.front();
            it->second.pop_front();
        }
    }
    json line = json::parse(m.lines[index]);
    const json& error = line["error"];
    if (error.is_object()) {
        std::string kind = error.value("kind", "error");
        std::string message = error.value("message", "");
        bool retryable = error.value("retryable", false);
        if (kind == "http") throw HttpError(message, error["status"].is_number() ? error["status"].get<int>() : 0, retryable);
        if (kind == "malformed") throw MalformedReply(message);
        if (kind == "empty") throw EmptyReply(message);
        if (kind == "truncated") throw TruncatedReply(message, response_from(line));
        throw LlmError(message, retryable);
    }
    return response_from(line);
}

}  // namespace kevo::llm
