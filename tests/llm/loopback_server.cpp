#include "loopback_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace kevo::llm::test {

LoopbackServer::LoopbackServer() {
    default_.status = 500;
    default_.body = R"({"error":{"message":"the test script is used up"}})";
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listen_fd_ < 0) throw std::runtime_error("socket() failed");
    int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(listen_fd_, 64) != 0)
        throw std::runtime_error("bind/listen on 127.0.0.1 failed");
    socklen_t len = sizeof addr;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::thread([this] { accept_loop(); });
}

LoopbackServer::~LoopbackServer() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stopping_ = true;
    }
    stop_cv_.notify_all();
    acceptor_.join();
    ::close(listen_fd_);
    std::vector<std::thread> connections;
    {
        std::lock_guard<std::mutex> lock(mu_);
        connections.swap(connections_);
    }
    for (auto& t : connections) t.join();
}

std::string LoopbackServer::base_url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1"; }

void LoopbackServer::push(ScriptedReply reply) {
    std::lock_guard<std::mutex> lock(mu_);
    script_.push_back(std::move(reply));
}

void LoopbackServer::set_default(ScriptedReply reply) {
    std::lock_guard<std::mutex> lock(mu_);
    default_ = std::move(reply);
}

std::vector<ReceivedRequest> LoopbackServer::requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return received_;
}

void LoopbackServer::accept_loop() {
    while (!stopping_) {
        pollfd p{listen_fd_, POLLIN, 0};
        if (::poll(&p, 1, 50) <= 0) continue;
        int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) continue;
        std::lock_guard<std::mutex> lock(mu_);
        connections_.emplace_back([this, fd] { serve(fd); });
    }
}

void LoopbackServer::serve(int fd) {
    // Read the head, then Content-Length bytes of body.
    std::string data;
    char buf[65536];
    size_t head_end;
    // However long the client takes between its bytes (a loaded machine stalls it): until it sends,
    // closes, or the server stops: a fixed limit (it was 2 s) would drop a stalled client's request.
    auto read_more = [&] {
        pollfd p{fd, POLLIN, 0};
        int ready = 0;
        while ((ready = ::poll(&p, 1, 50)) == 0)
            if (stopping_) return false;
        if (ready < 0) return false;
        ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n <= 0) return false;
        data.append(buf, static_cast<size_t>(n));
        return true;
    };
    while ((head_end = data.find("\r\n\r\n")) == std::string::npos)
        if (!read_more()) {
            ::close(fd);
            return;
        }
    ReceivedRequest req;
    size_t line_end = data.find("\r\n");
    std::string request_line = data.substr(0, line_end);
    req.method = request_line.substr(0, request_line.find(' '));
    req.path = request_line.substr(req.method.size() + 1, request_line.rfind(' ') - req.method.size() - 1);
    for (size_t pos = line_end + 2; pos < head_end;) {
        size_t end = data.find("\r\n", pos);
        std::string line = data.substr(pos, end - pos);
        pos = end + 2;
        size_t colon = line.find(':');
        if (colon == std::string::npos) continue;
        std::string name = line.substr(0, colon);
        std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
        size_t v = line.find_first_not_of(' ', colon + 1);
        req.headers[name] = v == std::string::npos ? "" : line.substr(v);
    }
    size_t length = req.headers.count("content-length") ? std::stoul(req.headers["content-length"]) : 0;
    while (data.size() < head_end + 4 + length)
        if (!read_more()) break;
    req.body = data.substr(head_end + 4, length);

    ScriptedReply reply;
    {
        std::lock_guard<std::mutex> lock(mu_);
        received_.push_back(req);
        if (batch_api(req, reply)) {
        } else if (script_.empty()) {
            reply = default_;
        } else {
            reply = script_.front();
            script_.pop_front();
        }
    }
    int now = ++concurrent_;
    for (int seen = max_concurrent_; now > seen && !max_concurrent_.compare_exchange_weak(seen, now);) {}
    if (reply.delay_s > 0) {
        std::unique_lock<std::mutex> lock(mu_);
        stop_cv_.wait_for(lock, std::chrono::duration<double>(reply.delay_s), [&] { return stopping_.load(); });
    }
    std::string out = "HTTP/1.1 " + std::to_string(reply.status) + " Scripted\r\n";
    bool has_type = false;
    for (const auto& [name, value] : reply.headers) {
        out += name + ": " + value + "\r\n";
        has_type = has_type || name == "Content-Type";
    }
    if (!has_type) out += "Content-Type: application/json\r\n";
    if (!reply.no_content_length) out += "Content-Length: " + std::to_string(reply.body.size()) + "\r\n";
    out += "Connection: close\r\n\r\n" + reply.body;
    --concurrent_;   // before sending: the client may start its next request once it has the reply
    for (size_t done = 0; done < out.size();) {
        ssize_t n = ::send(fd, out.data() + done, out.size() - done, MSG_NOSIGNAL);
        if (n <= 0) break;
        done += static_cast<size_t>(n);
    }
    ::shutdown(fd, SHUT_WR);
    ::close(fd);
}

void LoopbackServer::enable_batch_api(BatchAnswer answer, int polls, std::vector<std::string> fail_ids) {
    std::lock_guard<std::mutex> lock(mu_);
    batch_answer_ = std::move(answer);
    batch_polls_ = polls;
    batch_fail_ = std::move(fail_ids);
}

std::map<std::string, std::string> LoopbackServer::files() const {
    std::lock_guard<std::mutex> lock(mu_);
    return files_;
}

namespace {

// The parts of a multipart/form-data body: name -> content.
std::map<std::string, std::string> multipart(const std::string& content_type, const std::string& body) {
    std::map<std::string, std::string> parts;
    size_t b = content_type.find("boundary=");
    if (b == std::string::npos) return parts;
    std::string boundary = "--" + content_type.substr(b + 9);
    for (size_t pos = body.find(boundary); pos != std::string::npos;) {
        size_t head = pos + boundary.size();
        if (body.compare(head, 2, "--") == 0) break;
        size_t head_end = body.find("\r\n\r\n", head);
        size_t next = body.find("\r\n" + boundary, head_end);
        if (head_end == std::string::npos || next == std::string::npos) break;
        std::string headers = body.substr(head, head_end - head);
        size_t n = headers.find("name=\"");
        if (n != std::string::npos) {
            size_t e = headers.find('"', n + 6);
            parts[headers.substr(n + 6, e - n - 6)] = body.substr(head_end + 4, next - head_end - 4);
        }
        pos = next + 2;
    }
    return parts;
}

ScriptedReply json_reply(int status, const nlohmann::json& j) { return ScriptedReply{status, {}, j.dump(), 0}; }

}  // namespace

bool LoopbackServer::batch_api(const ReceivedRequest& req, ScriptedReply& reply) {
    if (!batch_answer_) return false;
    using nlohmann::json;
    auto not_found = [&] { reply = json_reply(404, {{"error", {{"message", "No such object: " + req.path}}}}); };
    if (req.method == "POST" && req.path == "/v1/files") {
        auto it = req.headers.find("content-type");
        auto parts = multipart(it == req.headers.end() ? "" : it->second, req.body);
        if (parts["purpose"] != "batch" || !parts.count("file")) {
            reply = json_reply(400, {{"error", {{"message", "expected purpose=batch and a file"}}}});
            return true;
        }
        std::string id = "file-" + std::to_string(files_.size() + 1);
        files_[id] = parts["file"];
        reply = json_reply(200, {{"id", id}, {"object", "file"}, {"purpose", "batch"}, {"bytes", parts["file"].size()}});
        return true;
    }
    if (req.method == "POST" && req.path == "/v1/batches") {
        json j = json::parse(req.body, nullptr, false);
        std::string input = j.is_object() ? j.value("input_file_id", "") : "";
        if (!files_.count(input) || j.value("endpoint", "") != "/v1/chat/completions") {
            reply = json_reply(400, {{"error", {{"message", "bad input_file_id or endpoint"}}}});
            return true;
        }
        std::string id = "batch_" + std::to_string(batches_.size() + 1);
        batches_[id] = Batch{input, "", "", batch_polls_, false, 0, 0};
        reply = json_reply(200, {{"id", id}, {"object", "batch"}, {"status", "validating"}, {"input_file_id", input}});
        return true;
    }
    const std::string batches = "/v1/batches/", files = "/v1/files/", content = "/content";
    if (req.method == "GET" && req.path.rfind(batches, 0) == 0) {
        auto it = batches_.find(req.path.substr(batches.size()));
        if (it == batches_.end()) return not_found(), true;
        Batch& b = it->second;
        if (!b.done && b.polls_left-- <= 0) {
            // Answer every line of the input file.
            std::string out, err;
            size_t pos = 0;
            const std::string& input = files_[b.input_file_id];
            for (int n = 1; pos < input.size(); ++n) {
                size_t end = input.find('\n', pos);
                if (end == std::string::npos) end = input.size();
                json line = json::parse(input.substr(pos, end - pos));
                pos = end + 1;
                std::string cid = line["custom_id"];
                ++b.total;
                if (std::find(batch_fail_.begin(), batch_fail_.end(), cid) != batch_fail_.end()) {
                    ++b.failed;
                    err += json({{"id", "batch_req_" + std::to_string(n)}, {"custom_id", cid}, {"response", nullptr},
                                 {"error", {{"code", "batch_expired"}, {"message", "not executed in time"}}}})
                               .dump() + "\n";
                    continue;
                }
                json body = json::parse(chat_body(batch_answer_(line["body"].dump()), "stop", 100, 50, -1,
                                                  line["body"].value("model", "m") + "-2025"));
                out += json({{"id", "batch_req_" + std::to_string(n)},
                             {"custom_id", cid},
                             {"response", {{"status_code", 200}, {"request_id", "req_" + std::to_string(n)}, {"body", body}}},
                             {"error", nullptr}})
                           .dump() + "\n";
            }
            b.output_file_id = "file-out-" + it->first;
            files_[b.output_file_id] = out;
            if (!err.empty()) {
                b.error_file_id = "file-err-" + it->first;
                files_[b.error_file_id] = err;
            }
            b.done = true;
        }
        json j = {{"id", it->first}, {"object", "batch"}, {"status", b.done ? "completed" : "in_progress"},
                  {"input_file_id", b.input_file_id},
                  {"request_counts", {{"total", b.total}, {"completed", b.total - b.failed}, {"failed", b.failed}}}};
        j["output_file_id"] = b.output_file_id.empty() ? json() : json(b.output_file_id);
        j["error_file_id"] = b.error_file_id.empty() ? json() : json(b.error_file_id);
        reply = json_reply(200, j);
        return true;
    }
    if (req.method == "GET" && req.path.rfind(files, 0) == 0 && req.path.size() > content.size() &&
        req.path.compare(req.path.size() - content.size(), content.size(), content) == 0) {
        auto it = files_.find(req.path.substr(files.size(), req.path.size() - files.size() - content.size()));
        if (it == files_.end()) return not_found(), true;
        reply = ScriptedReply{200, {{"Content-Type", "application/octet-stream"}}, it->second, 0};
        return true;
    }
    return false;
}

std::string chat_body(const std::string& content, const std::string& finish_reason, int prompt_tokens,
                      int completion_tokens, double cost, const std::string& model) {
    nlohmann::json usage = {{"prompt_tokens", prompt_tokens},
                            {"completion_tokens", completion_tokens},
                            {"total_tokens", prompt_tokens + completion_tokens}};
    if (cost >= 0) usage["cost"] = cost;
    nlohmann::json j = {{"id", "chatcmpl-test"},
                        {"object", "chat.completion"},
                        {"model", model},
                        {"choices",
                         {{{"index", 0},
                           {"message", {{"role", "assistant"}, {"content", content}}},
                           {"finish_reason", finish_reason}}}},
                        {"usage", usage}};
    return j.dump();
}

}  // namespace kevo::llm::test
