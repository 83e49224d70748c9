// `kernelevo search --workers` confirms its best through the workers before the cache (it was
// written unconfirmed before): a confirmation job (JobSpec::confirm, never the stored verdict of the
// run) on a real redis-server, answered by the worker loop over the scripted handler.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "../store/redis_server.h"
#include "common/fs.h"
#include "common/process.h"
#include "llm/llm.h"
#include "scripted.h"
#include "worker/queue.h"

namespace fs = std::filesystem;

namespace kevo::worker {
namespace {

class WorkersConfirm : public ::testing::Test {
protected:
    void SetUp() override {
        if (!kevo::testing::RedisServer::installed()) GTEST_SKIP() << "redis-server is not installed";
        ASSERT_TRUE(server.start()) << server.error();
        url = server.url("confirm");
        ProcessOptions o;
        o.argv = {KEVO_WORKER_DRIVER, "--redis", url, "--name", "gpu0", "--log", (dir.path() / "jobs.log").string()};
        worker = std::make_unique<Subprocess>(o);
        Queue q(url);
        for (int i = 0; i < 500 && q.workers().empty(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
        ASSERT_FALSE(q.workers().empty()) << worker->err_tail(2000);
    }
    // One seed kernel from a replayed transcript, judged by the worker, then confirmed by it.
    ProcessResult search(const std::string& kernel) {
        fs::path transcript = dir.path() / "t.jsonl";
        {
            llm::Transcript t(transcript);
            llm::ChatRequest req;
            req.messages = {{"user", "request 0"}};
            llm::ChatResponse resp;
            resp.content = "```cuda\n" + kernel + "```\n";
            resp.finish_reason = "stop";
            t.record(req, &resp, nullptr, 0.01);
        }
        ProcessOptions o;
        o.argv = {KEVO_EXE, "search", "--task", (fs::path(KEVO_TEST_DATA_DIR) / "gelu_bias" / "task.json").string(), "--out",
                  out.string(), "--state", (dir.path() / "run.db").string(), "--replay", transcript.string(),
                  "--llm-replay-in-order", "--islands", "1", "--children", "1", "--generations", "0", "--workers", url};
        o.timeout_s = 120;
        return run_process(o);
    }
    int confirmation_jobs() {
        int n = 0;
        std::ifstream in(dir.path() / "jobs.log");
        for (std::string l; std::getline(in, l);) n += l.rfind("confirm ", 0) == 0;
        return n;
    }
    kevo::testing::RedisServer server;
    std::string url;
    TempDir dir;
    fs::path out = dir.path() / "kernels";
    std::unique_ptr<Subprocess> worker;
};

}  // namespace

TEST_F(WorkersConfirm, ABestTheWorkersConfirmIsCached) {
    ProcessResult r = search(evolve::testing::kernel_source(1, 2.0));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(confirmation_jobs(), 1) << r.err;
    auto meta = nlohmann::json::parse(read_file(out / "gelu_bias" / "sm_90.json"));
    EXPECT_DOUBLE_EQ(meta.value("speedup", 0.0), 2.0);
}

TEST_F(WorkersConfirm, ABestTheWorkersDoNotConfirmIsNotCached) {
    ProcessResult r = search(evolve::testing::kernel_source(1, 2.0, "CONFIRM_SPEEDUP=1.2"));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(confirmation_jobs(), 1) << r.err;
    EXPECT_NE(r.err.find("was not written to the cache: the second validation (scripted) measured 1.2"), std::string::npos)
        << r.err;
    EXPECT_FALSE(fs::exists(out / "gelu_bias" / "sm_90.cu"));
}

}  // namespace kevo::worker
