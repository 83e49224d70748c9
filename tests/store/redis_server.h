// Test fixture helper: a private redis-server on a random free loopback port with its own temp dir
// (no persistence), killed (and reaped) on destruction, plus a minimal RESP client to inspect what
// the store wrote. Header-only; used by tests/store and tests/evolve.
//
//   RedisServer server;                 // starts nothing
//   if (!RedisServer::installed()) GTEST_SKIP() << "redis-server is not installed";
//   ASSERT_TRUE(server.start()) << server.error();
//   open_store(server.url("my-run"));
#pragma once
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/fs.h"

namespace kevo::testing {

class RedisServer {
public:
    RedisServer() = default;
    ~RedisServer() { stop(); }
    RedisServer(const RedisServer&) = delete;
    RedisServer& operator=(const RedisServer&) = delete;

    // The redis-server binary: on PATH, else /usr/bin or /usr/sbin; empty when not installed.
    static std::string binary() {
        std::string path = std::getenv("PATH") ? std::getenv("PATH") : "";
        path += ":/usr/bin:/usr/sbin:/usr/local/bin";
        std::stringstream ss(path);
        for (std::string dir; std::getline(ss, dir, ':');) {
            if (dir.empty()) continue;
            std::string p = dir + "/redis-server";
            if (::access(p.c_str(), X_OK) == 0) return p;
        }
        return {};
    }
    static bool installed() { return !binary().empty(); }

    // Starts the server (requirepass when `password` is given). False, with error(), when it could
    // not be started on any of a few random ports.
    bool start(const std::string& password = "") {
        password_ = password;
        dir_ = std::make_unique<TempDir>("kevo-redis");
        for (int attempt = 0; attempt < 8; ++attempt) {
            port_ = free_port();
            if (port_ <= 0) continue;
            std::vector<std::string> args{binary(), "--port", std::to_string(port_), "--bind", "127.0.0.1",
                                          "--save", "", "--appendonly", "no", "--dir", dir_->path().string(),
                                          "--daemonize", "no", "--logfile", (dir_->path() / "redis.log").string()};
            if (!password.empty()) {
                args.push_back("--requirepass");
                args.push_back(password);
            }
            std::vector<char*> argv;
            for (auto& a : args) argv.push_back(a.data());
            argv.push_back(nullptr);
            std::string log = (dir_->path() / "redis.out").string();
            pid_ = ::fork();
            if (pid_ == 0) {
                ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the test
                int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
                ::dup2(out, 1);
                ::dup2(out, 2);
                ::execv(argv[0], argv.data());
                ::_exit(127);
            }
            if (pid_ < 0) break;
            auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
            while (std::chrono::steady_clock::now() < deadline) {
                int status = 0;
                if (::waitpid(pid_, &status, WNOHANG) == pid_) {  // exited: most likely the port was taken
                    pid_ = -1;
                    break;
                }
                std::vector<std::string> pong;
                if (call({"PING"}, &pong)) return true;  // "+PONG", or "-NOAUTH" with a password
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
            }
            stop();
        }
        error_ = "could not start redis-server (see " + (dir_->path() / "redis.log").string() + ")";
        if (dir_) dir_->keep();
        return false;
    }

    void stop() {
        if (pid_ <= 0) return;
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
        pid_ = -1;
    }

    int port() const { return port_; }
    const std::string& error() const { return error_; }
    // redis://127.0.0.1:PORT/DB?prefix=NAME (no password in it).
    std::string url(const std::string& prefix, int db = 0) const {
        return "redis://127.0.0.1:" + std::to_string(port_) + "/" + std::to_string(db) + "?prefix=" + prefix;
    }

    // Runs one command (authenticating first when the server has a password); every string of the
    // reply, flattened, goes to `out` (errors as "-MESSAGE"). False when the server cannot be reached.
    bool call(const std::vector<std::string>& args, std::vector<std::string>* out = nullptr) const {
        int fd = ::socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0) return false;
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(static_cast<uint16_t>(port_));
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        timeval tv{10, 0};
        ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
        std::string buf;
        std::vector<std::string> scratch;
        if (ok && !password_.empty()) ok = send_command(fd, {"AUTH", password_}) && read_reply(fd, buf, scratch);
        if (ok) ok = send_command(fd, args) && read_reply(fd, buf, out ? *out : scratch);
        ::close(fd);
        return ok;
    }

    // Every key name and every value stored in every database 0..15, concatenated: what a test
    // greps for a secret.
    std::string dump_everything() const {
        static const char* script = R"lua(
local out = {}
for _, k in ipairs(redis.call('KEYS', '*')) do
  table.insert(out, k)
  local t = redis.call('TYPE', k)['ok']
  local vals = {}
  if t == 'string' then vals = {redis.call('GET', k)}
  elseif t == 'hash' then vals = redis.call('HGETALL', k)
  elseif t == 'list' then vals = redis.call('LRANGE', k, 0, -1)
  elseif t == 'set' then vals = redis.call('SMEMBERS', k)
  elseif t == 'zset' then vals = redis.call('ZRANGE', k, 0, -1) end
  for _, v in ipairs(vals) do table.insert(out, v) end
end
return out
)lua";
        std::string all;
        for (int db = 0; db < 16; ++db) {
            std::vector<std::string> got;
            // SELECT and EVAL on one connection: a MULTI-less pipeline through a small script.
            std::string s = std::string("redis.call('SELECT', ") + std::to_string(db) + ")\n" + script;
            call({"EVAL", s, "0"}, &got);
            for (const auto& g : got) all += g + "\n";
        }
        return all;
    }

private:
    static int free_port() {
        int fd = ::socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0) return -1;
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = 0;
        socklen_t len = sizeof a;
        int port = -1;
        if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
            ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
            port = ntohs(a.sin_port);
        ::close(fd);
        return port;
    }

    static bool send_command(int fd, const std::vector<std::string>& args) {
        std::string req = "*" + std::to_string(args.size()) + "\r\n";
        for (const auto& a : args) req += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
        for (size_t sent = 0; sent < req.size();) {
            ssize_t n = ::send(fd, req.data() + sent, req.size() - sent, MSG_NOSIGNAL);
            if (n <= 0) return false;
            sent += static_cast<size_t>(n);
        }
        return true;
    }

    static bool fill(int fd, std::string& buf, size_t need) {
        char chunk[65536];
        while (buf.size() < need) {
            ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
            if (n <= 0) return false;
            buf.append(chunk, static_cast<size_t>(n));
        }
        return true;
    }
    static bool line(int fd, std::string& buf, std::string& l) {
        size_t pos;
        while ((pos = buf.find("\r\n")) == std::string::npos)
            if (!fill(fd, buf, buf.size() + 1)) return false;
        l = buf.substr(0, pos);
        buf.erase(0, pos + 2);
        return true;
    }
    // One RESP2 reply, flattened into `out`.
    static bool read_reply(int fd, std::string& buf, std::vector<std::string>& out) {
        std::string l;
        if (!line(fd, buf, l) || l.empty()) return false;
        char type = l[0];
        std::string rest = l.substr(1);
        if (type == '+' || type == ':') {
            out.push_back(rest);
        } else if (type == '-') {
            out.push_back("-" + rest);
        } else if (type == '$') {
            long n = std::stol(rest);
            if (n < 0) return true;
            if (!fill(fd, buf, static_cast<size_t>(n) + 2)) return false;
            out.push_back(buf.substr(0, static_cast<size_t>(n)));
            buf.erase(0, static_cast<size_t>(n) + 2);
        } else if (type == '*') {
            long n = std::stol(rest);
            for (long i = 0; i < n; ++i)
                if (!read_reply(fd, buf, out)) return false;
        } else {
            return false;
        }
        return true;
    }

    std::unique_ptr<TempDir> dir_;
    pid_t pid_ = -1;
    int port_ = 0;
    std::string password_, error_;
};

}  // namespace kevo::testing
