// The fixture of the HTTP provider's and the client's tests (http_test.cpp, http_client_test.cpp):
// a loopback server, a log, a provider's configuration pointed at the server, a request.
#pragma once
#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "llm/llm.h"
#include "loopback_server.h"

namespace kevo::llm::http_testing {

inline const std::string kKey = "sk-test-Zq8uV3rT5yW7-secret-key";

inline double seconds_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

struct Log {
    std::mutex mu;
    std::vector<std::string> lines;
    LogFn fn() {
        return [this](const std::string& line) {
            std::lock_guard<std::mutex> lock(mu);
            lines.push_back(line);
        };
    }
    std::string all() {
        std::lock_guard<std::mutex> lock(mu);
        std::string out;
        for (const auto& l : lines) out += l + "\n";
        return out;
    }
};

class LlmHttp : public ::testing::Test {
protected:
    HttpConfig config() {
        HttpConfig c;
        c.base_url = server.base_url();
        c.api_key = kKey;
        c.connect_timeout_s = 2;
        c.read_timeout_s = 2;
        c.max_attempts = 3;
        c.backoff_initial_s = 0.01;
        c.backoff_max_s = 0.05;
        c.retry_total_max_s = 5;
        c.log = log.fn();
        return c;
    }
    static ChatRequest request(const std::string& prompt = "hello") {
        ChatRequest r;
        r.model = "test/model";
        r.messages = {{"system", "You write CUDA."}, {"user", prompt}};
        r.temperature = 0.25;
        r.max_tokens = 123;
        r.seed = 42;
        return r;
    }
    // Runs `f`, expecting it to throw E; returns the exception.
    template <class E, class F>
    static E expect_throw(F f) {
        try {
            f();
        } catch (const E& e) {
            return e;
        } catch (const std::exception& e) {
            ADD_FAILURE() << "wrong exception type: " << e.what();
            throw;
        }
        ADD_FAILURE() << "no exception";
        throw std::logic_error("no exception");
    }

    test::LoopbackServer server;
    Log log;
};

}  // namespace kevo::llm::http_testing
