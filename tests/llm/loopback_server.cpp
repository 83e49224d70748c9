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
    auto read_more = [&] {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 2000) <= 0) return false;
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
        if (script_.empty()) {
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
    out += "Content-Length: " + std::to_string(reply.body.size()) + "\r\nConnection: close\r\n\r\n" + reply.body;
    --concurrent_;   // before sending: the client may start its next request once it has the reply
    for (size_t done = 0; done < out.size();) {
        ssize_t n = ::send(fd, out.data() + done, out.size() - done, MSG_NOSIGNAL);
        if (n <= 0) break;
        done += static_cast<size_t>(n);
    }
    ::shutdown(fd, SHUT_WR);
    ::close(fd);
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
