#include "serve/http_guard.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>

namespace kevo::serve {
namespace {

using Clock = std::chrono::steady_clock;

// Set by a handler (close_after_reply) for the connection its worker thread is serving.
thread_local bool t_close_after_reply = false;

Clock::time_point after(double seconds) {
    return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// Waits until FD has EVENTS (or an error or hang-up, which the next recv/send reports) or DEADLINE.
bool wait_for(int fd, short events, Clock::time_point deadline) {
    for (;;) {
        auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        pollfd p{fd, events, 0};
        int r = ::poll(&p, 1, static_cast<int>(std::clamp<long long>(ms, 0, INT_MAX)));
        if (r >= 0) return r > 0;
        if (errno != EINTR) return false;
    }
}

void socket_address(int fd, bool peer, std::string& ip, int& port) {
    sockaddr_storage a{};
    socklen_t n = sizeof a;
    if ((peer ? ::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &n)
              : ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n)) != 0)
        return;
    char text[INET6_ADDRSTRLEN] = {};
    if (a.ss_family == AF_INET) {
        const auto* s = reinterpret_cast<const sockaddr_in*>(&a);
        ::inet_ntop(AF_INET, &s->sin_addr, text, sizeof text);
        port = ntohs(s->sin_port);
    } else if (a.ss_family == AF_INET6) {
        const auto* s = reinterpret_cast<const sockaddr_in6*>(&a);
        ::inet_ntop(AF_INET6, &s->sin6_addr, text, sizeof text);
        port = ntohs(s->sin6_port);
    }
    ip = text;
}

// A connection's socket, read through a buffer (httplib reads request lines one byte at a time).
// Each request gets a byte budget and deadlines: a client that sends too much, or too slowly,
// sees its reads fail and its connection closed, and frees the worker for others.
class GuardedStream : public httplib::Stream {
public:
    GuardedStream(int fd, const HttpLimits& limits) : fd_(fd), limits_(limits) {}

    bool buffered() const { return pos_ < end_; }
    // Whether a read ran out of time or budget: the connection is closed after the reply (httplib
    // answers 400), not kept for another slow request.
    bool cut() const { return cut_; }
    void begin_request() {
        budget_ = limits_.request_bytes;
        read_deadline_ = after(limits_.request_s);
        write_deadline_ = after(limits_.reply_s);
    }

    bool is_readable() const override { return buffered() || wait_for(fd_, POLLIN, read_deadline_); }
    bool is_writable() const override { return wait_for(fd_, POLLOUT, write_deadline_); }
    ssize_t read(char* ptr, size_t size) override {
        if (!buffered()) {
            if (budget_ == 0 || !wait_for(fd_, POLLIN, read_deadline_)) {
                cut_ = true;
                return -1;
            }
            ssize_t n;
            do n = ::recv(fd_, buf_, std::min(sizeof buf_, budget_), 0);
            while (n < 0 && errno == EINTR);
            if (n <= 0) return n;
            budget_ -= static_cast<size_t>(n);
            pos_ = 0;
            end_ = static_cast<size_t>(n);
        }
        size_t n = std::min(size, end_ - pos_);
        std::memcpy(ptr, buf_ + pos_, n);
        pos_ += n;
        return static_cast<ssize_t>(n);
    }
    ssize_t write(const char* ptr, size_t size) override {
        if (!is_writable()) return -1;
        ssize_t n;
        do n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
        while (n < 0 && errno == EINTR);
        return n;
    }
    void get_remote_ip_and_port(std::string& ip, int& port) const override { socket_address(fd_, true, ip, port); }
    void get_local_ip_and_port(std::string& ip, int& port) const override { socket_address(fd_, false, ip, port); }
    socket_t socket() const override { return fd_; }

private:
    int fd_;
    const HttpLimits& limits_;
    char buf_[4096];
    size_t pos_ = 0, end_ = 0;
    size_t budget_ = 0;
    bool cut_ = false;
    Clock::time_point read_deadline_, write_deadline_;
};

// After a refusal the client may still be sending (a body): send our FIN after the reply and
// discard a little of what arrives for a moment, so that the reply is not cut by a reset, then close.
void close_gently(int fd) {
    ::shutdown(fd, SHUT_WR);
    char sink[4096];
    size_t discarded = 0;
    auto deadline = after(1.0);
    while (discarded < (256u << 10) && wait_for(fd, POLLIN, deadline)) {
        ssize_t n = ::recv(fd, sink, sizeof sink, 0);
        if (n <= 0) break;
        discarded += static_cast<size_t>(n);
    }
}

}  // namespace

GuardedServer::GuardedServer(HttpLimits limits) : limits_(limits) {
    const size_t workers = limits_.workers;
    new_task_queue = [workers] { return new httplib::ThreadPool(workers); };
    // SO_REUSEADDR only: a restarted serve binds again while the old connections are in TIME_WAIT,
    // but a second server on a port that is listened on fails (httplib's default, SO_REUSEPORT,
    // would let it share the port and take half of the connections).
    set_socket_options([](socket_t sock) {
        int yes = 1;
        ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    });
    set_read_timeout(static_cast<time_t>(limits_.request_s));
    set_write_timeout(static_cast<time_t>(limits_.reply_s));
    set_keep_alive_timeout(static_cast<time_t>(limits_.idle_s));
    set_keep_alive_max_count(limits_.requests_per_connection);
    set_payload_max_length(limits_.request_bytes);
}

void GuardedServer::close_after_reply() { t_close_after_reply = true; }

bool GuardedServer::process_and_close_socket(socket_t sock) {
    GuardedStream strm(sock, limits_);
    bool ok = true, refused = false;
    for (size_t n = 0; n < limits_.requests_per_connection; ++n) {
        // Wait for the next request in short steps, so that stop() does not wait for idle clients.
        auto idle_until = after(limits_.idle_s);
        bool ready = strm.buffered();
        while (!ready && svr_sock_ != INVALID_SOCKET && Clock::now() < idle_until)
            ready = wait_for(sock, POLLIN, std::min(idle_until, after(0.1)));
        if (!ready || svr_sock_ == INVALID_SOCKET) break;
        strm.begin_request();
        t_close_after_reply = false;
        bool closed = false;
        ok = process_request(strm, n + 1 == limits_.requests_per_connection, closed, nullptr);
        refused = t_close_after_reply;
        if (!ok || closed || refused || strm.cut()) break;
    }
    t_close_after_reply = false;
    if (refused || strm.cut()) close_gently(sock);
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
    return ok;
}

}  // namespace kevo::serve
