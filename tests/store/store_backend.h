// Runs a store test suite against both backends: TEST_P(Suite, ...) with a fixture derived from
// BackendTest, instantiated with KEVO_INSTANTIATE_BACKENDS(Suite). The Redis instance is skipped
// only when redis-server is not installed (or the build has no hiredis).
#pragma once
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "common/fs.h"
#include "redis_server.h"
#include "store/store.h"

namespace kevo::testing {

// One server for the whole test program, started on first use and killed at exit.
inline RedisServer* shared_redis() {
    static std::unique_ptr<RedisServer> server = [] {
        auto s = std::make_unique<RedisServer>();
        if (!RedisServer::installed() || !s->start()) return std::unique_ptr<RedisServer>();
        return s;
    }();
    return server.get();
}

class BackendTest : public ::testing::TestWithParam<std::string> {
protected:
    void SetUp() override {
        if (redis()) {
            if (!store::redis_supported()) GTEST_SKIP() << "kernelevo was built without hiredis";
            if (!RedisServer::installed()) GTEST_SKIP() << "redis-server is not installed";
            ASSERT_TRUE(shared_redis()) << "redis-server is installed but could not be started";
        }
    }
    bool redis() const { return GetParam() == "redis"; }

    // A fresh state location for this test: a file in a temp dir, or a prefix of its own on the
    // shared server.
    std::string location(const std::string& name = "state") {
        if (!redis()) return (dir.path() / (name + ".db")).string();
        const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
        return shared_redis()->url(std::string(info->test_suite_name()) + "." + info->name() + "." + name);
    }

    TempDir dir;
};

inline std::string backend_name(const ::testing::TestParamInfo<std::string>& info) { return info.param; }

}  // namespace kevo::testing

#define KEVO_INSTANTIATE_BACKENDS(Suite) \
    INSTANTIATE_TEST_SUITE_P(Backends, Suite, ::testing::Values("sqlite", "redis"), ::kevo::testing::backend_name)
