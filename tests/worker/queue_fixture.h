// The fixture of the queue's tests (worker_test.cpp, worker_search_test.cpp): a real redis-server,
// worker processes started as children (killed with SIGKILL when a test ends first), and helpers.
#pragma once
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "../store/redis_server.h"
#include "common/fs.h"
#include "worker/queue.h"

namespace kevo::worker::queue_testing {

using Clock = std::chrono::steady_clock;

inline std::vector<std::string> lines(const fs::path& p) {
    std::vector<std::string> out;
    std::ifstream in(p);
    for (std::string l; std::getline(in, l);)
        if (!l.empty()) out.push_back(l);
    return out;
}

// A child process (killed with SIGKILL when the test ends first).
class Child {
public:
    explicit Child(const std::vector<std::string>& args, const fs::path& log = {}) {
        pid_ = ::fork();
        if (pid_ == 0) {
            ::prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (!log.empty()) {
                FILE* f = std::fopen(log.c_str(), "a");
                if (f) {
                    ::dup2(fileno(f), 2);
                    ::dup2(fileno(f), 1);
                }
            }
            std::vector<char*> argv;
            for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
            argv.push_back(nullptr);
            ::execv(argv[0], argv.data());
            ::_exit(127);
        }
    }
    ~Child() {
        if (pid_ > 0 && !reaped_) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, nullptr, 0);
        }
    }
    pid_t pid() const { return pid_; }
    void signal(int sig) { ::kill(pid_, sig); }
    // Exit code, or -signal.
    int wait() {
        int status = 0;
        ::waitpid(pid_, &status, 0);
        reaped_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    }
    bool exited() {
        if (reaped_) return true;
        int status = 0;
        if (::waitpid(pid_, &status, WNOHANG) == pid_) reaped_ = true;
        return reaped_;
    }

private:
    pid_t pid_ = -1;
    bool reaped_ = false;
};

template <class F>
inline bool eventually(F ok, double seconds) {
    auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<int>(seconds * 1000));
    while (Clock::now() < deadline) {
        if (ok()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return ok();
}

class QueueTest : public ::testing::Test {
protected:
    void SetUp() override {
        if (!kevo::testing::RedisServer::installed()) GTEST_SKIP() << "redis-server is not installed";
        ASSERT_TRUE(server.start()) << server.error();
        url = server.url("qtest");
    }
    std::vector<std::string> driver(const std::string& name, std::vector<std::string> extra = {}) {
        std::vector<std::string> a{KEVO_WORKER_DRIVER, "--redis", url, "--name", name, "--log",
                                   (dir.path() / "jobs.log").string()};
        a.insert(a.end(), extra.begin(), extra.end());
        return a;
    }
    fs::path log(const std::string& name) { return dir.path() / (name + ".out"); }
    JobSpec run_spec(const std::string& source, Queue& q) {
        JobSpec s{"run", "sm_90", "task", "ref", source, q.put_object("object of " + source)};
        return s;
    }
    // Waits for the results of `ids` on client's reply list.
    std::map<std::string, nlohmann::json> collect(Queue& q, const std::string& client, std::set<std::string> ids, double s) {
        std::map<std::string, nlohmann::json> got;
        auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<int>(s * 1000));
        while (!ids.empty() && Clock::now() < deadline)
            for (const auto& id : q.wait_replies(client, 0.5))
                if (ids.erase(id)) got[id] = *q.result(id);
        return got;
    }
    kevo::testing::RedisServer server;
    std::string url;
    TempDir dir;
};

}  // namespace kevo::worker::queue_testing
