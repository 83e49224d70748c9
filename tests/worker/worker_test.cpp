// The validation queue on a real redis-server: idempotent jobs and results, verified objects,
// leases and takeover, worker processes that drain 100 jobs, kill -9 and SIGSTOP of a worker
// mid-job, a job that kills its workers (dead letter).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "../store/redis_server.h"
#include "common/error.h"
#include "common/fs.h"
#include "common/process.h"
#include "evolve/search.h"
#include "llm/llm.h"
#include "queue_fixture.h"
#include "scripted.h"
#include "store/store.h"
#include "worker/queue.h"
#include "worker/remote_evaluator.h"

namespace kevo::worker {
namespace {

using namespace queue_testing;

TEST_F(QueueTest, AJobIsQueuedOnceAndItsResultWrittenOnce) {
    Queue q(url);
    JobSpec s{"compile", "sm_90", "t", "r", "__global__ void k() {}", ""};
    EXPECT_EQ(s.id(), JobSpec::from_json(s.to_json()).id());
    EXPECT_FALSE(q.submit(s, "c1"));
    EXPECT_FALSE(q.submit(s, "c2"));  // the same job: joined, not queued again
    EXPECT_EQ(q.stats()["submitted"], 1);
    EXPECT_EQ(q.stats()["streams"]["compile:sm_90"]["queued"], 1);

    std::this_thread::sleep_for(std::chrono::milliseconds(400));  // no worker yet: the job waits
    auto c = q.next({"compile:sm_90"}, "w1", 0);
    ASSERT_TRUE(c);
    EXPECT_EQ(c->id, s.id());
    EXPECT_EQ(c->attempts, 1);
    // The wait is measured on the Redis server's clock (queued stamp to start): the search counts it
    // as a backlog, not as the queue's own cost.
    EXPECT_GE(c->queued_s, 0.39);
    EXPECT_LT(c->queued_s, 5);
    EXPECT_EQ(c->spec.source, s.source);
    EXPECT_FALSE(q.next({"compile:sm_90"}, "w2", 0)) << "a job was handed out twice";
    EXPECT_TRUE(q.complete(*c, {{"ok", true}}, "w1"));
    EXPECT_FALSE(q.complete(*c, {{"ok", false}}, "w1"));  // a second result is not written
    EXPECT_EQ(q.result(s.id())->value("ok", false), true);
    nlohmann::json st = q.stats();
    EXPECT_EQ(st["done"], 1);
    EXPECT_EQ(st["duplicate_results"], 1);
    EXPECT_EQ(st["streams"]["compile:sm_90"]["length"], 0);
    // Both waiting clients are told; a later submit returns the result at once.
    EXPECT_EQ(q.wait_replies("c1", 1), std::vector<std::string>{s.id()});
    EXPECT_EQ(q.wait_replies("c2", 1), std::vector<std::string>{s.id()});
    auto again = q.submit(s, "c3");
    ASSERT_TRUE(again);
    EXPECT_EQ(again->value("ok", false), true);
    EXPECT_EQ(q.stats()["submitted"], 1);
}

TEST_F(QueueTest, ObjectsTravelByContentHashAndAreVerified) {
    Queue q(url);
    std::string bytes(200000, '\0');
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 7);
    std::string sha = q.put_object(bytes);
    EXPECT_EQ(*q.get_object(sha), bytes);
    EXPECT_FALSE(q.get_object(std::string(64, 'a')));
    ASSERT_TRUE(server.call({"SET", q.key_prefix() + "obj:" + sha, "tampered"}));
    EXPECT_THROW(q.get_object(sha), UsageError);
}

TEST_F(QueueTest, AJobWhoseWorkerStalledIsTakenOverAfterTheLease) {
    Queue q(url);
    JobSpec s{"compile", "sm_90", "t", "r", "src", ""};
    q.submit(s, "");
    auto mine = q.next({"compile:sm_90"}, "w1", 0);
    ASSERT_TRUE(mine);
    EXPECT_FALSE(q.reclaim({"compile:sm_90"}, "w2", 300));  // within its lease
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    q.touch(*mine, "w1");  // the heartbeat renews it
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_FALSE(q.reclaim({"compile:sm_90"}, "w2", 300));
    std::this_thread::sleep_for(std::chrono::milliseconds(350));
    auto taken = q.reclaim({"compile:sm_90"}, "w2", 300);
    ASSERT_TRUE(taken);
    EXPECT_TRUE(taken->reclaimed);
    EXPECT_EQ(taken->attempts, 2);
    EXPECT_EQ(taken->workers, "w1");
    EXPECT_TRUE(q.complete(*taken, {{"ok", true}, {"by", "w2"}}, "w2"));
    EXPECT_FALSE(q.complete(*mine, {{"ok", true}, {"by", "w1"}}, "w1"));  // the stalled one, late
    EXPECT_EQ(q.result(s.id())->value("by", ""), "w2");
    EXPECT_EQ(q.stats()["done"], 1);
}

TEST_F(QueueTest, TwoWorkersDrainAHundredJobs) {
    Queue q(url);
    Child a(driver("gpu-a", {"--lease", "5"}), log("a")), b(driver("gpu-b", {"--lease", "5"}), log("b"));
    std::set<std::string> ids;
    auto t0 = Clock::now();
    for (int i = 0; i < 100; ++i) {
        JobSpec s = run_spec("kernel " + std::to_string(i) + " SPEEDUP=1.5 DELAY_MS=5", q);
        ids.insert(s.id());
        EXPECT_FALSE(q.submit(s, "search"));
    }
    auto got = collect(q, "search", ids, 60);
    double wall = std::chrono::duration<double>(Clock::now() - t0).count();
    ASSERT_EQ(got.size(), 100u) << read_file(log("a")) << read_file(log("b"));
    std::map<std::string, int> by_worker;
    for (const auto& [id, r] : got) {
        EXPECT_EQ(r.value("status", ""), "ok") << r.dump();
        ++by_worker[r.value("worker", "")];
    }
    EXPECT_GT(by_worker["gpu-a"], 0);
    EXPECT_GT(by_worker["gpu-b"], 0);
    auto done = lines(dir.path() / "jobs.log");
    EXPECT_EQ(done.size(), 100u) << "a job ran twice or not at all";
    nlohmann::json st = q.stats();
    EXPECT_EQ(st["done"], 100);
    EXPECT_EQ(st.value("duplicate_results", 0.0), 0);
    EXPECT_EQ(st["streams"]["run:sm_90"]["length"], 0);
    std::cout << "100 jobs (5 ms each) drained by 2 workers in " << wall << " s (gpu-a " << by_worker["gpu-a"]
              << ", gpu-b " << by_worker["gpu-b"] << ")\n";
    // Both are on the status board, with their recent log lines.
    auto ws = q.workers();
    ASSERT_EQ(ws.size(), 2u);
    EXPECT_FALSE(ws[0]["log"].empty());
}

TEST_F(QueueTest, Kill9OfAWorkerMidJobAnotherFinishesItOnce) {
    Queue q(url);
    Child a(driver("victim", {"--lease", "1"}), log("a"));
    JobSpec s = run_spec("slow kernel SPEEDUP=2 DELAY_MS=2500", q);
    q.submit(s, "search");
    ASSERT_TRUE(eventually(
        [&] {
            for (const auto& w : q.workers())
                if (w.value("name", "") == "victim" && w.contains("job")) return true;
            return false;
        },
        10))
        << read_file(log("a"));
    a.signal(SIGKILL);
    EXPECT_EQ(a.wait(), -SIGKILL);
    Child b(driver("rescuer", {"--lease", "1"}), log("b"));
    auto got = collect(q, "search", {s.id()}, 20);
    ASSERT_EQ(got.size(), 1u) << read_file(log("b"));
    EXPECT_EQ(got[s.id()].value("worker", ""), "rescuer");
    EXPECT_EQ(got[s.id()].value("speedup", 0.0), 2.0);
    auto job = q.job(s.id());
    EXPECT_EQ(job->value("attempts", 0.0), 2);
    EXPECT_EQ(job->value("workers", ""), "victim,rescuer");
    EXPECT_EQ(lines(dir.path() / "jobs.log").size(), 1u);  // the victim never finished it
    EXPECT_EQ(q.stats()["done"], 1);
    EXPECT_NE(read_file(log("b")).find("took over job"), std::string::npos);
}

TEST_F(QueueTest, AStalledWorkersLateResultCountsOnce) {
    Queue q(url);
    Child a(driver("sleepy", {"--lease", "1"}), log("a"));
    JobSpec s = run_spec("kernel SPEEDUP=3 DELAY_MS=2000", q);
    q.submit(s, "search");
    ASSERT_TRUE(eventually(
        [&] {
            for (const auto& w : q.workers())
                if (w.value("name", "") == "sleepy" && w.contains("job")) return true;
            return false;
        },
        10));
    a.signal(SIGSTOP);
    Child b(driver("awake", {"--lease", "1"}), log("b"));
    auto got = collect(q, "search", {s.id()}, 20);
    ASSERT_EQ(got.size(), 1u) << read_file(log("b"));
    EXPECT_EQ(got[s.id()].value("worker", ""), "awake");
    a.signal(SIGCONT);
    ASSERT_TRUE(eventually([&] { return q.stats().value("duplicate_results", 0.0) == 1; }, 10)) << read_file(log("a"));
    EXPECT_EQ(q.stats()["done"], 1);
    EXPECT_EQ(q.result(s.id())->value("worker", ""), "awake");
    EXPECT_EQ(lines(dir.path() / "jobs.log").size(), 2u);  // both ran it; it counted once
}

// A worker alive (heartbeating) but stuck in one job for longer than --max-job-time loses it.
TEST_F(QueueTest, AWorkerStuckInAJobLosesItAfterTheMaximumJobTime) {
    Queue q(url);
    Child a(driver("stuck", {"--lease", "0.5", "--max-job-time", "0.5"}), log("a"));
    JobSpec s = run_spec("kernel SPEEDUP=2 DELAY_MS=4000", q);
    q.submit(s, "search");
    ASSERT_TRUE(eventually([&] { return q.job(s.id())->value("state", "") == "running"; }, 10));
    Child b(driver("fresh", {"--lease", "0.5", "--max-job-time", "10"}), log("b"));
    ASSERT_TRUE(eventually([&] { return q.job(s.id())->value("workers", "") == "stuck,fresh"; }, 10)) << read_file(log("b"));
    auto got = collect(q, "search", {s.id()}, 20);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(q.stats()["done"], 1);
}

TEST_F(QueueTest, AJobThatKillsItsWorkersGoesToTheDeadLetterStream) {
    Queue q(url);
    JobSpec s = run_spec("kernel CRASH", q);
    q.submit(s, "search");
    // Two workers die on it; the third sees it was started twice and dead-letters it.
    for (int i = 0; i < 2; ++i) {
        Child w(driver("crash" + std::to_string(i), {"--lease", "0.5", "--max-attempts", "2"}), log("crash"));
        EXPECT_EQ(w.wait(), -SIGKILL);
    }
    Child last(driver("survivor", {"--lease", "0.5", "--max-attempts", "2", "--idle-exit", "3"}), log("survivor"));
    auto got = collect(q, "search", {s.id()}, 20);
    ASSERT_EQ(got.size(), 1u) << read_file(log("survivor"));
    const nlohmann::json& r = got[s.id()];
    EXPECT_TRUE(r.value("dead_letter", false));
    EXPECT_EQ(r.value("status", ""), "runtime_error");
    EXPECT_NE(r.value("log", "").find("started 2 times"), std::string::npos) << r.dump();
    auto dead = q.dead_letters(10);
    ASSERT_EQ(dead.size(), 1u);
    EXPECT_EQ(dead[0]["job"], s.id());
    EXPECT_EQ(dead[0]["workers"], "crash0,crash1,survivor");
    EXPECT_EQ(last.wait(), 0);
}

// The search in steady state through 1 GPU worker and 2 compile-only workers.

}  // namespace
}  // namespace kevo::worker
