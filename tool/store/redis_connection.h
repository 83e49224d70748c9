// A synchronous hiredis connection shared by the Redis state store (redis_store.cpp) and the
// validation queue (tool/worker): AUTH and SELECT from a StoreLocation, reconnect after a broken
// connection, pipelines, SIGPIPE blocked per command, and server errors as UsageError naming the
// server (never the password). One Connection is used by one thread at a time.
#pragma once
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>
#include <sys/time.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "store/store.h"

namespace kevo::store::redis {

struct ReplyDeleter {
    void operator()(redisReply* r) const {
        if (r) freeReplyObject(r);
    }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

inline std::string str(const redisReply* r) {
    if (!r) return {};
    if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS || r->type == REDIS_REPLY_ERROR)
        return std::string(r->str, r->len);
    if (r->type == REDIS_REPLY_INTEGER) return std::to_string(r->integer);
    return {};
}

// A flat field/value array (HGETALL) as a map.
inline std::map<std::string, std::string> fields(const redisReply* r) {
    std::map<std::string, std::string> m;
    if (r && r->type == REDIS_REPLY_ARRAY)
        for (size_t i = 0; i + 1 < r->elements; i += 2) m[str(r->element[i])] = str(r->element[i + 1]);
    return m;
}

// Writing to a socket the server has closed raises SIGPIPE, which would kill the process. Block
// it on this thread for the duration of a command and swallow what it raised, leaving the
// process's signal dispositions (inherited by child processes) alone.
class SigpipeGuard {
public:
    SigpipeGuard() {
        sigemptyset(&set_);
        sigaddset(&set_, SIGPIPE);
        sigset_t pending;
        sigemptyset(&pending);
        sigpending(&pending);
        was_pending_ = sigismember(&pending, SIGPIPE) == 1;
        pthread_sigmask(SIG_BLOCK, &set_, &old_);
    }
    ~SigpipeGuard() {
        if (!was_pending_) {
            timespec zero{0, 0};
            while (sigtimedwait(&set_, nullptr, &zero) == SIGPIPE) {
            }
        }
        pthread_sigmask(SIG_SETMASK, &old_, nullptr);
    }
    SigpipeGuard(const SigpipeGuard&) = delete;
    SigpipeGuard& operator=(const SigpipeGuard&) = delete;

private:
    sigset_t set_, old_;
    bool was_pending_ = false;
};

// One connection to the server (reconnected when it broke), used under the store's mutex.
class Connection {
public:
    // `label` names the server in messages ("Redis state store", "Redis queue").
    explicit Connection(const StoreLocation& w, std::string label = "Redis state store")
        : w_(w), where_(w.host + ":" + std::to_string(w.port)), label_(std::move(label)) {
        connect();
    }
    ~Connection() {
        if (ctx_) redisFree(ctx_);
    }
    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;

    const std::string& where() const { return where_; }
    // The socket timeout for replies (blocking reads such as XREADGROUP BLOCK need more than they block).
    void set_timeout(double seconds) {
        timeout_s_ = seconds;
        if (ctx_) apply_timeout();
    }

    // One command; a server error reply becomes a UsageError.
    Reply command(const std::vector<std::string>& args) {
        std::vector<Reply> r = pipeline({args});
        return std::move(r[0]);
    }

    // Several commands in one round trip (MULTI ... EXEC among them). Replies in order.
    std::vector<Reply> pipeline(const std::vector<std::vector<std::string>>& commands) {
        SigpipeGuard guard;
        if (!ctx_ || ctx_->err) connect();
        for (const auto& args : commands) {
            std::vector<const char*> argv;
            std::vector<size_t> lens;
            for (const auto& a : args) {
                argv.push_back(a.data());
                lens.push_back(a.size());
            }
            if (redisAppendCommandArgv(ctx_, static_cast<int>(argv.size()), argv.data(), lens.data()) != REDIS_OK)
                broken();
        }
        std::vector<Reply> replies;
        std::string error;
        for (size_t i = 0; i < commands.size(); ++i) {
            void* raw = nullptr;
            if (redisGetReply(ctx_, &raw) != REDIS_OK || !raw) broken();
            Reply r(static_cast<redisReply*>(raw));
            if (r->type == REDIS_REPLY_ERROR && error.empty()) error = str(r.get());
            if (r->type == REDIS_REPLY_ARRAY && commands[i][0] == "EXEC")
                for (size_t e = 0; e < r->elements; ++e)
                    if (r->element[e]->type == REDIS_REPLY_ERROR && error.empty()) error = str(r->element[e]);
            replies.push_back(std::move(r));
        }
        if (!error.empty()) throw UsageError(label_ + " at " + where_ + ": " + strip_lua_noise(error));
        return replies;
    }

private:
    // "ERR user_script:5: the key ... script: 1d2c..., on @user_script:5." -> the message.
    static std::string strip_lua_noise(std::string e) {
        if (size_t p = e.find(" script: "); p != std::string::npos) e = e.substr(0, p);
        if (e.rfind("ERR ", 0) == 0) e = e.substr(4);
        if (e.rfind("user_script:", 0) == 0)
            if (size_t p = e.find(": "); p != std::string::npos) e = e.substr(p + 2);
        return e;
    }

    [[noreturn]] void broken() {
        std::string why = ctx_ && ctx_->errstr[0] ? ctx_->errstr : "connection lost";
        if (ctx_) {
            redisFree(ctx_);
            ctx_ = nullptr;  // the next call reconnects
        }
        throw UsageError(label_ + " at " + where_ + ": " + why +
                         " (the operation in progress may not have been applied; rerun the same command to resume)");
    }

    void apply_timeout() {
        timeval io_timeout{static_cast<time_t>(timeout_s_), static_cast<suseconds_t>((timeout_s_ - static_cast<double>(static_cast<time_t>(timeout_s_))) * 1e6)};
        redisSetTimeout(ctx_, io_timeout);
    }

    void connect() {
        if (ctx_) {
            redisFree(ctx_);
            ctx_ = nullptr;
        }
        timeval connect_timeout{5, 0};
        redisContext* c = redisConnectWithTimeout(w_.host.c_str(), w_.port, connect_timeout);
        if (!c || c->err) {
            std::string why = c ? c->errstr : "out of memory";
            if (c) redisFree(c);
            throw UsageError("cannot connect to the " + label_ + " at " + where_ + ": " + why +
                             " (is redis-server running there, and reachable from this machine?)");
        }
        ctx_ = c;
        apply_timeout();
        redisEnableKeepAlive(ctx_);
        auto setup = [&](const std::vector<std::string>& args, const std::string& what) {
            const char* argv[3];
            size_t lens[3];
            for (size_t i = 0; i < args.size(); ++i) {
                argv[i] = args[i].data();
                lens[i] = args[i].size();
            }
            Reply r(static_cast<redisReply*>(
                redisCommandArgv(ctx_, static_cast<int>(args.size()), argv, lens)));
            if (!r) broken();
            if (r->type == REDIS_REPLY_ERROR) {
                std::string msg = str(r.get());
                redisFree(ctx_);
                ctx_ = nullptr;
                throw UsageError(label_ + " at " + where_ + ": " + what + ": " + msg);
            }
        };
        if (!w_.password.empty()) {
            if (w_.user.empty())
                setup({"AUTH", w_.password}, "the password was refused");
            else
                setup({"AUTH", w_.user, w_.password}, "user " + w_.user + " could not log in");
        }
        if (w_.db != 0) setup({"SELECT", std::to_string(w_.db)}, "cannot select database " + std::to_string(w_.db));
    }

    StoreLocation w_;
    std::string where_, label_;
    double timeout_s_ = 60;
    redisContext* ctx_ = nullptr;
};

}  // namespace kevo::store::redis
