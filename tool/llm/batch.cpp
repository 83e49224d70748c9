// Batch API files and the /files + /batches client.
#include "llm/batch.h"

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/fs.h"
#include "common/process.h"
#include "common/text.h"
#include "llm/chat_json.h"
#include "llm/http_session.h"
#include "llm/util.h"

namespace kevo::llm {
namespace {

using json = nlohmann::json;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string string_field(const json& j, const char* field) {
    return j.is_object() && j.contains(field) && j[field].is_string() ? j[field].get<std::string>() : "";
}

// Ids go into URL paths and into commands printed for users to paste: only the characters
// providers use, and never a leading '-' (an id "--force" would be read as an option).
bool valid_id(const std::string& id) {
    return !id.empty() && id.size() <= 200 && id[0] != '-' &&
           id.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:") == std::string::npos;
}

const std::string& checked_id(const std::string& id, const char* what) {
    if (!valid_id(id)) throw UsageError(std::string("not a valid ") + what + " id: '" + printable(redact(id)) + "'");
    return id;
}

// An id the server chose (`field` of its reply `j`): a reply whose id is not one is refused.
std::string server_id(const json& j, const char* field, const char* what, const std::string& from, bool required) {
    std::string id = string_field(j, field);
    if ((!required && id.empty()) || valid_id(id)) return id;
    throw MalformedReply(redact("the reply from " + from + " gives a " + what + " id that is not one (letters, digits, "
                                "- _ . : only, not starting with -): '" + printable(snippet(id)) + "'"));
}

// A request count of the reply (`field` of request_counts): a whole number from 0 to 2^53 (a count
// sent as text, a fraction or 1e300 is a malformed reply, never a crash or a wrapped figure).
int64_t count_field(const json& counts, const char* field, const std::string& from) {
    if (!counts.contains(field) || counts[field].is_null()) return 0;
    const json& v = counts[field];
    constexpr int64_t kMost = int64_t{1} << 53;  // what a double holds exactly
    if (v.is_number_unsigned() && v.get<uint64_t>() <= static_cast<uint64_t>(kMost)) return v.get<int64_t>();
    if (v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= kMost) return v.get<int64_t>();
    const double d = v.is_number_float() ? v.get<double>() : -1;
    if (d >= 0 && d <= static_cast<double>(kMost) && d == static_cast<double>(static_cast<int64_t>(d)))
        return static_cast<int64_t>(d);
    throw MalformedReply(redact("the reply from " + from + " gives request_counts." + field +
                                " that is not a count: " + printable(snippet(dump(v)))));
}

BatchInfo batch_info(const std::string& body, const std::string& from) {
    json j = json::parse(body, nullptr, false);
    if (!j.is_object() || string_field(j, "id").empty())
        throw MalformedReply(redact("the reply from " + from + " is not a batch object: " + snippet(body)));
    BatchInfo b;
    b.id = server_id(j, "id", "batch", from, true);
    b.status = string_field(j, "status");
    b.input_file_id = server_id(j, "input_file_id", "file", from, false);
    b.output_file_id = server_id(j, "output_file_id", "file", from, false);
    b.error_file_id = server_id(j, "error_file_id", "file", from, false);
    if (j.contains("request_counts") && j["request_counts"].is_object()) {
        const json& c = j["request_counts"];
        b.total = count_field(c, "total", from);
        b.completed = count_field(c, "completed", from);
        b.failed = count_field(c, "failed", from);
    }
    if (j.contains("errors") && j["errors"].is_object() && j["errors"].contains("data") && j["errors"]["data"].is_array())
        for (const auto& e : j["errors"]["data"]) {
            std::string line = string_field(e, "message");
            if (e.contains("line") && e["line"].is_number_integer()) line = "line " + e["line"].dump() + ": " + line;
            b.errors += (b.errors.empty() ? "" : "\n") + line;
        }
    return b;
}

}  // namespace

std::string batch_input_line(const std::string& custom_id, const ChatRequest& request, const std::string& base_url) {
    return dump({{"custom_id", custom_id},
                 {"method", "POST"},
                 {"url", "/v1/chat/completions"},
                 {"body", detail::chat_request_body(request, base_url)}});
}

size_t count_batch_input(const std::filesystem::path& file) {
    std::string text = read_input_file(file, "a Batch API input file", std::uintmax_t{1} << 30);
    size_t lines = 0;
    for_each_nonblank_line(text, [&](const std::string& line, size_t number) {
        json j = json::parse(line, nullptr, false);
        if (string_field(j, "custom_id").empty() || string_field(j, "method") != "POST" ||
            string_field(j, "url").empty() || !j.contains("body") || !j["body"].is_object())
            throw UsageError(file.string() + ":" + std::to_string(number) +
                             ": not a Batch API input line ({custom_id, method, url, body}: a file that kernelevo "
                             "search --llm-batch writes)");
        ++lines;
    });
    if (lines == 0) throw UsageError(file.string() + ": no requests in the file");
    return lines;
}

BatchOutputLine parse_batch_output_line(const std::string& text, const std::string& where) {
    if (text.size() > kMaxReplyBytes)  // as large as no reply online may be
        throw UsageError(where + ": a reply line of " + std::to_string(text.size() >> 20) + " MB; a reply is at most " +
                         std::to_string(kMaxReplyBytes >> 20) + " MB, in a file as online");
    json j = json::parse(text, nullptr, false);
    if (!j.is_object() || string_field(j, "custom_id").empty())
        throw UsageError(where + ": not a Batch API output line (no custom_id): " + printable(snippet(text, 120)));
    // A request, not a reply: taken as "neither a response nor an error" it would fail every request.
    if (j.contains("body") && j.contains("method") && !j.contains("response") && !j.contains("error"))
        throw UsageError(where + ": a Batch API input line (a request), not a reply: this is a file that kernelevo "
                         "search --llm-batch writes; submit it with `kernelevo llm batch submit FILE` and give the "
                         "file that `kernelevo llm batch fetch BATCH_ID --out REPLIES.jsonl` writes");
    BatchOutputLine line;
    line.custom_id = string_field(j, "custom_id");
    if (j.contains("response") && j["response"].is_object()) {
        const json& r = j["response"];
        if (r.contains("status_code") && r["status_code"].is_number_integer()) line.status_code = r["status_code"].get<int>();
        if (r.contains("body") && !r["body"].is_null()) line.body = r["body"].is_string() ? r["body"].get<std::string>() : dump(r["body"]);
    }
    if (j.contains("error") && !j["error"].is_null()) {
        const json& e = j["error"];
        std::string code = string_field(e, "code"), message = e.is_string() ? e.get<std::string>() : string_field(e, "message");
        line.error = code.empty() ? message : code + ": " + message;
        if (line.error.empty()) line.error = snippet(dump(e), 200);
    } else if (line.status_code != 0 && (line.status_code < 200 || line.status_code >= 300)) {
        line.error = "HTTP " + std::to_string(line.status_code) + ": " + detail::server_message(line.body);
    } else if (line.body.empty()) {
        line.error = "the line has neither a response nor an error";
    }
    return line;
}

BatchReply batch_reply(const BatchOutputLine& line, const ChatRequest& request, const std::string& where) {
    BatchReply out;
    if (!line.error.empty()) {
        out.error = line.error;
        return out;
    }
    json body = json::parse(line.body, nullptr, false);
    try {
        out.response = detail::parse_chat_response(body, request, where);
    } catch (const TruncatedReply& e) {
        out.response = e.response;
        out.truncated = true;
    } catch (const LlmError& e) {
        out.error = e.what();
    }
    return out;
}

bool BatchInfo::finished() const {
    return status == "completed" || status == "failed" || status == "expired" || status == "cancelled";
}

struct BatchApi::Impl {
    explicit Impl(HttpConfig c) : session(std::move(c)) {}
    detail::HttpSession session;
};

BatchApi::BatchApi(HttpConfig config) : impl_(std::make_unique<Impl>(std::move(config))) {}
BatchApi::~BatchApi() = default;

std::string BatchApi::upload(const std::filesystem::path& input_file) {
    detail::HttpExchange ex;
    ex.path = "/files";
    ex.parts = {{"purpose", "batch", ""}, {"file", read_file(input_file), input_file.filename().string()}};
    std::string body = impl_->session.send(ex, "");
    json j = json::parse(body, nullptr, false);
    if (string_field(j, "id").empty())
        throw MalformedReply(redact("the reply from " + impl_->session.url("/files") + " is not a file object: " + snippet(body)));
    return server_id(j, "id", "file", impl_->session.url("/files"), true);
}

BatchInfo BatchApi::create(const std::string& input_file_id) {
    detail::HttpExchange ex;
    ex.path = "/batches";
    ex.body = dump({{"input_file_id", checked_id(input_file_id, "file")},
                    {"endpoint", "/v1/chat/completions"},
                    {"completion_window", "24h"}});
    return batch_info(impl_->session.send(ex, ""), impl_->session.url(ex.path));
}

BatchInfo BatchApi::get(const std::string& batch_id) {
    detail::HttpExchange ex;
    ex.method = "GET";
    ex.path = "/batches/" + checked_id(batch_id, "batch");
    return batch_info(impl_->session.send(ex, ""), impl_->session.url(ex.path));
}

std::string BatchApi::file_content(const std::string& file_id) {
    detail::HttpExchange ex;
    ex.method = "GET";
    ex.path = "/files/" + checked_id(file_id, "file") + "/content";
    ex.max_reply_bytes = size_t{1} << 30;   // output files hold up to 50,000 replies
    return impl_->session.send(ex, "");
}

}  // namespace kevo::llm
