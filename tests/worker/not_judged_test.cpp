// A run that a worker could not judge (a failure outside the kernel: the GPU's memory taken by
// others) is run again when the search asks again, not answered with the stored not-judged result
// (a job's id is the hash of what determines its result, and a stored result answers a resubmitted
// job: issue 36, "every request counts", through --workers). Real redis-server; the real worker
// loop in a thread over the ScriptedHandler; the real RemoteEvaluator.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <thread>

#include "../store/redis_server.h"
#include "scripted_handler.h"
#include "worker/remote_evaluator.h"

namespace kevo::worker {
namespace {

TEST(NotJudgedThroughWorkers, TheSearchsRerunIsANewJobThatAWorkerRuns) {
    if (!kevo::testing::RedisServer::installed()) GTEST_SKIP() << "redis-server is not installed";
    kevo::testing::RedisServer server;
    ASSERT_TRUE(server.start()) << server.error();
    const std::string url = server.url("notjudged");
    WorkerOptions o;
    o.redis_url = url;
    o.name = "gpu0";
    o.gpu = 0;
    o.archs = {"sm_90"};
    TempDir dir;
    testing::ScriptedHandler h;
    h.name = "gpu0";
    h.log_path = (dir.path() / "jobs.log").string();
    std::atomic<bool> stop{false};
    std::thread worker([&] { run_worker(o, h, &stop); });
    {
        Task task = load_task(fs::path(KEVO_TEST_DATA_DIR) / "gelu_bias" / "task.json");
        RemoteEvaluator ev(url, task, ValidateOptions{});
        const std::string src = "// NOT_JUDGED_ONCE SPEEDUP=2\n__global__ void k() {}\n";
        Evaluation first = ev.run(ev.compile(src));
        EXPECT_TRUE(first.outside_kernel) << first.feedback;
        // What the search does next (EvaluationPipeline::evaluate): compile and run the same again.
        Evaluation again = ev.run(ev.compile(src));
        EXPECT_FALSE(again.outside_kernel) << again.feedback;
        EXPECT_TRUE(again.ok()) << again.feedback;
        EXPECT_DOUBLE_EQ(again.speedup, 2.0);
        // A kernel judged once is not run again: its stored result answers.
        Evaluation third = ev.run(ev.compile("// SPEEDUP=3\n"));
        Evaluation fourth = ev.run(ev.compile("// SPEEDUP=3\n"));
        EXPECT_TRUE(third.ok() && fourth.ok());
    }
    stop = true;
    worker.join();
    int runs = 0;
    std::ifstream log(dir.path() / "jobs.log");
    for (std::string l; std::getline(log, l);) runs += l.rfind("run ", 0) == 0;
    EXPECT_EQ(runs, 3);  // not judged, run again, the SPEEDUP=3 kernel once
}

}  // namespace
}  // namespace kevo::worker
