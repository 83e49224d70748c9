// The OpenAI Batch API (also served by other providers at the same paths): requests written to a
// JSONL input file, uploaded (POST /files, purpose "batch"), run as a batch (POST /batches,
// completion window 24h) at about half the price, and answered in JSONL output and error files.
//
//   input line   {"custom_id": ID, "method": "POST", "url": "/v1/chat/completions", "body": {...}}
//                (the body is exactly what HttpProvider sends)
//   output line  {"id": ..., "custom_id": ID, "response": {"status_code": 200, "body": {...}},
//                 "error": null}; an error file's lines have "error": {"code", "message"} or a
//                 non-2xx status_code with an error body.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "llm/llm.h"

namespace kevo::llm {

// One input line (without the newline). `base_url` picks the body's dialect, as for HttpProvider.
std::string batch_input_line(const std::string& custom_id, const ChatRequest& request, const std::string& base_url);

// The number of requests in an input file; throws UsageError naming the file and line for
// anything that is not an input line (e.g. an output file given by mistake) or an empty file.
size_t count_batch_input(const std::filesystem::path& file);

// One line of an output or error file, before it is matched with its request.
struct BatchOutputLine {
    std::string custom_id;
    int status_code = 0;   // of the response; 0 when there is none
    std::string body;      // the response body (JSON text), "" when there is none
    std::string error;     // the line's error, or the error body's message ("" when none)
};
// Throws UsageError naming `where` ("FILE:LINE") when the line is not a Batch API output line
// (an input line, a request, says so).
BatchOutputLine parse_batch_output_line(const std::string& line, const std::string& where);

// The reply a line gives to `request`: a response (a truncated one too: it was paid for), or the
// error that says why there is none.
struct BatchReply {
    std::optional<ChatResponse> response;
    bool truncated = false;
    std::string error;
};
BatchReply batch_reply(const BatchOutputLine& line, const ChatRequest& request, const std::string& where);

struct BatchInfo {
    std::string id, status;          // validating, failed, in_progress, finalizing, completed, expired,
                                     // cancelling, cancelled
    std::string input_file_id, output_file_id, error_file_id;
    int64_t total = 0, completed = 0, failed = 0;
    std::string errors;              // the batch's own errors (validation), one per line
    // Whether the provider is done with it (output, when any, can be fetched).
    bool finished() const;
};

// A client of /files and /batches under HttpConfig::base_url, with its timeouts and retries.
// Every failure is an LlmError (HttpError with the status; 404 says that the provider may not
// have a Batch API). An id the server gives (a batch's, a file's) that is not letters, digits and
// - _ . : is a MalformedReply: ids go into URL paths and into commands printed to paste.
class BatchApi {
public:
    explicit BatchApi(HttpConfig config);
    ~BatchApi();
    BatchApi(const BatchApi&) = delete;
    BatchApi& operator=(const BatchApi&) = delete;

    std::string upload(const std::filesystem::path& input_file);                 // -> file id
    BatchInfo create(const std::string& input_file_id);                          // 24h window
    BatchInfo get(const std::string& batch_id);
    std::string file_content(const std::string& file_id);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace kevo::llm
