// The validation queue on a real redis-server: idempotent jobs and results, verified objects,
// leases and takeover, worker processes that drain 100 jobs, kill -9 and SIGSTOP of a worker
// mid-job, a job that kills its workers (dead letter), a steady-state search through workers,
// kill -9 of that search and its resume, and the real `kernelevo worker --compile-only` with nvcc.
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
#include "scripted.h"
#include "store/store.h"
#include "worker/queue.h"
#include "worker/remote_evaluator.h"

namespace kevo::worker {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::string> lines(const fs::path& p) {
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
bool eventually(F ok, double seconds) {
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
TEST_F(QueueTest, ASteadyStateSearchValidatesThroughWorkers) {
    Child gpu(driver("gpu0", {"--lease", "5"}), log("gpu")), c1(driver("cpu1", {"--compile-only"}), log("c1")),
        c2(driver("cpu2", {"--compile-only"}), log("c2"));
    Queue q(url);
    ASSERT_TRUE(eventually([&] { return q.workers().size() == 3; }, 10));
    Task task = load_task(fs::path(KEVO_TEST_DATA_DIR) / "gelu_bias" / "task.json");
    ValidateOptions vo;  // arch from the live GPU worker
    RemoteEvaluator ev(url, task, vo);
    EXPECT_EQ(ev.arch(), "sm_90");
    EXPECT_EQ(ev.device().name, "Scripted GPU");
    EXPECT_EQ(ev.capacity(), 6);
    auto store = store::open_store((dir.path() / "state.db").string());
    evolve::testing::ScriptedProvider provider(evolve::testing::evolving);
    evolve::SearchConfig cfg;
    cfg.structure.islands = 2;
    cfg.structure.children = 2;
    cfg.evolution.generations = 4;
    cfg.evolution.repair_attempts = 2;
    cfg.evolution.migration_interval = 2;
    cfg.structure.seed = 3;
    cfg.evolution.steady = true;
    evolve::Search search(task, cfg, evolve::Prompts(), provider, ev, *store);
    evolve::SearchResult r = search.run();
    EXPECT_EQ(r.stop_reason, "generations");
    EXPECT_EQ(r.generations_committed, 5);
    ASSERT_TRUE(r.best);
    EXPECT_GT(r.best->speedup, 1.0);
    EXPECT_EQ(r.best->details.value("worker", ""), "gpu0");
    int compiled_by_cpu = 0;
    for (const auto& l : lines(dir.path() / "jobs.log"))
        if (l.rfind("compile", 0) == 0 && l.find(" cpu") != std::string::npos) ++compiled_by_cpu;
    EXPECT_GT(compiled_by_cpu, 0);
    for (const auto& p : store->programs()) EXPECT_NE(p.status, store::ProgramStatus::pending) << p.key;
    std::vector<double> o = ev.overhead_ms();
    ASSERT_FALSE(o.empty());
    std::sort(o.begin(), o.end());
    std::cout << "queue overhead per job (loopback, scripted work): median " << o[o.size() / 2] << " ms, p90 "
              << o[o.size() * 9 / 10] << " ms over " << o.size() << " jobs\n";
    EXPECT_LT(o[o.size() / 2], 50);
}

// kill -9 of the search mid-run, then the same command again: it finishes, and no candidate the
// workers had validated is validated again (the job ids are content hashes: a resubmitted job
// returns its stored result).
TEST_F(QueueTest, Kill9OfTheSearchThenTheSameCommandResumes) {
    Child gpu(driver("gpu0", {"--lease", "5", "--delay-ms", "30"}), log("gpu")),
        cpu(driver("cpu1", {"--compile-only"}), log("cpu"));
    fs::path state = dir.path() / "state.db", llm = dir.path() / "llm.log";
    std::vector<std::string> cmd{KEVO_REMOTE_SEARCH_DRIVER, state.string(), url, "8", llm.string()};
    {
        Child search(cmd, log("search"));
        ASSERT_TRUE(eventually([&] { return lines(dir.path() / "jobs.log").size() >= 20; }, 60)) << read_file(log("search"));
        search.signal(SIGKILL);
        EXPECT_EQ(search.wait(), -SIGKILL);
    }
    std::set<std::string> paid;
    {
        auto s = store::open_store(state.string());
        ASSERT_LT(s->last_generation(), 8) << "the run finished before it was killed";
        for (const auto& c : s->llm_calls()) paid.insert(std::to_string(c.request.at("seed").get<int64_t>()));
    }
    size_t llm_before = lines(llm).size();
    Child again(cmd, log("search"));
    EXPECT_EQ(again.wait(), 0) << read_file(log("search"));
    // Every job ran exactly once across both invocations.
    std::map<std::string, int> runs;
    for (const auto& l : lines(dir.path() / "jobs.log")) ++runs[l.substr(0, l.rfind(' '))];
    for (const auto& [job, n] : runs) EXPECT_EQ(n, 1) << job << " ran " << n << " times";
    auto store = store::open_store(state.string());
    EXPECT_EQ(store->last_generation(), 8);
    for (const auto& p : store->programs()) EXPECT_NE(p.status, store::ProgramStatus::pending) << p.key;
    // No stored reply was requested again.
    auto after = lines(llm);
    for (size_t i = llm_before; i < after.size(); ++i) EXPECT_FALSE(paid.count(after[i])) << "a stored reply was requested again";
}

// The real `kernelevo worker --compile-only` with nvcc: the object lands in the queue by content
// hash, and a compile error comes back with the compiler's log.
TEST_F(QueueTest, TheRealCompileOnlyWorkerCompilesWithNvcc) {
    Child w({KEVO_EXE, "worker", "--redis", url, "--compile-only", "--arch", "sm_90", "--name", "nvcc-host"},
            log("kernelevo"));
    Task task = load_task(fs::path(KEVO_TEST_DATA_DIR) / "gelu_bias" / "task.json");
    ValidateOptions vo;
    vo.arch = "sm_90";
    RemoteEvaluator ev(url, task, vo);
    std::string good = read_file(fs::path(KEVO_SOURCE_DIR) / "tests" / "evolve" / "gpu" / "seed_fixed.cu");
    auto t0 = Clock::now();
    CompileResult c = ev.compile(good);
    double s = std::chrono::duration<double>(Clock::now() - t0).count();
    ASSERT_TRUE(c.ok) << c.log << read_file(log("kernelevo"));
    // ptxas's figures came back with the result: the search's prompts quote them.
    ASSERT_FALSE(c.kernels.empty());
    EXPECT_GT(c.kernels[0].registers, 0);
    EXPECT_EQ(c.kernels[0].arch, "sm_90");
    Queue q(url);
    auto job = q.result(JobSpec{"compile", "sm_90", task.hash(), task.reference_hash(), good, "", {}}.id());
    (void)job;
    auto recent = q.recent_jobs(1);
    ASSERT_EQ(recent.size(), 1u);
    auto result = q.job(recent[0]["id"])->at("result");
    std::string sha = result.value("object_sha256", "");
    auto obj = q.get_object(sha);
    ASSERT_TRUE(obj);
    EXPECT_EQ(obj->substr(1, 3), "ELF");
    std::cout << "compiled through the queue in " << s << " s; object " << obj->size() << " bytes, put in "
              << result.value("object_put_s", 0.0) * 1000 << " ms\n";
    CompileResult bad = ev.compile("#include <kernelevo/abi.h>\nthis is not C++;\n");
    EXPECT_FALSE(bad.ok);
    EXPECT_NE(bad.log.find("error"), std::string::npos) << bad.log;
    w.signal(SIGTERM);
    EXPECT_EQ(w.wait(), 0) << read_file(log("kernelevo"));
    EXPECT_NE(read_file(log("kernelevo")).find("stopped (stopped)"), std::string::npos);
}

// A Triton candidate compiled by a compile-only worker (CI's stand-in Triton, which serves a
// recorded AOT output): its generated .cu and AOT facts come back with the result, so the search
// host stores the best kernel without a Triton of its own.
TEST_F(QueueTest, ATritonCandidateCompiledByAWorkerBringsItsGeneratedSource) {
    const fs::path triton = fs::path(KEVO_TEST_DATA_DIR) / "triton";
    const fs::path py = dir.path() / "python-with-fake-triton.sh";
    write_file_atomic(py, "#!/bin/sh\nPYTHONPATH='" + (triton / "fake_triton").string() + ":" + (triton / "aot").string() +
                              "' exec python3 \"$@\"\n");
    ::chmod(py.c_str(), 0755);
    ::setenv("KERNELEVO_PYTHON", py.c_str(), 1);  // the worker's Triton (the Child inherits it)
    Child w({KEVO_EXE, "worker", "--redis", url, "--compile-only", "--arch", "sm_90", "--name", "triton-host"}, log("kernelevo"));
    ::unsetenv("KERNELEVO_PYTHON");
    Task task = load_task(fs::path(KEVO_TEST_DATA_DIR) / "gelu_bias" / "task.json");
    ValidateOptions vo;
    vo.arch = "sm_90";
    RemoteEvaluator ev(url, task, vo);
    CompileResult c = ev.compile(read_file(triton / "gelu_bias.py"));
    ASSERT_TRUE(c.ok) << c.log << read_file(log("kernelevo"));
    EXPECT_EQ(c.backend, "triton");
    EXPECT_NE(c.generated_source.find("extern \"C\" int kevo_forward("), std::string::npos) << c.generated_source.substr(0, 400);
    EXPECT_EQ(c.backend_info.value("triton_version", ""), "3.6.0+recorded");
    CompileResult cuda = ev.compile(read_file(fs::path(KEVO_SOURCE_DIR) / "tests" / "evolve" / "gpu" / "seed_fixed.cu"));
    ASSERT_TRUE(cuda.ok) << cuda.log;
    EXPECT_EQ(cuda.backend, "cuda");
    EXPECT_TRUE(cuda.generated_source.empty());
    w.signal(SIGTERM);
    EXPECT_EQ(w.wait(), 0) << read_file(log("kernelevo"));
}

// `kernelevo search --workers` end to end (scripted workers: no GPU needed): the run validates
// through the queue, writes its best kernel, registers itself for `kernelevo serve` and reports
// the queue overhead.
TEST_F(QueueTest, TheSearchCommandValidatesThroughWorkers) {
    Child gpu(driver("gpu0"), log("gpu")), cpu(driver("cpu1", {"--compile-only"}), log("cpu"));
    std::vector<std::string> kernels{evolve::testing::kernel_source(1, 1.0)};
    for (int i = 0; i < 8; ++i) kernels.push_back(evolve::testing::kernel_source(10 + i, 1.0 + i * 0.25));
    fs::path transcript = dir.path() / "t.jsonl";
    {
        llm::Transcript t(transcript);
        for (size_t i = 0; i < kernels.size(); ++i) {
            llm::ChatRequest req;
            req.messages = {{"user", "request " + std::to_string(i)}};
            llm::ChatResponse resp;
            resp.content = "```cuda\n" + kernels[i] + "```\n";
            resp.finish_reason = "stop";
            resp.model = "replay-model";
            t.record(req, &resp, nullptr, 0.01);
        }
    }
    fs::path state = dir.path() / "run.db", out = dir.path() / "kernels";
    ProcessOptions o;
    o.argv = {KEVO_EXE, "search", "--task", (fs::path(KEVO_TEST_DATA_DIR) / "gelu_bias" / "task.json").string(),
              "--out", out.string(), "--state", state.string(), "--replay", transcript.string(), "--llm-replay-in-order",
              "--islands", "2", "--children", "2", "--generations", "2", "--mode", "full", "--workers", url};
    o.timeout_s = 120;
    ProcessResult r = run_process(o);
    ASSERT_EQ(r.exit_code, 0) << r.err << read_file(log("gpu"));
    EXPECT_NE(r.err.find("validating through " + server.url("qtest")), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("steady"), std::string::npos);
    EXPECT_NE(r.err.find("queue overhead per job"), std::string::npos) << r.err;
    auto meta = nlohmann::json::parse(read_file(out / "gelu_bias" / "sm_90.json"));
    EXPECT_DOUBLE_EQ(meta.value("speedup", 0.0), 2.75);
    EXPECT_EQ(meta.value("gpu", ""), "Scripted GPU");
    Queue q(url);
    auto runs = q.runs();
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_EQ(runs[0].value("state", ""), state.string());
    EXPECT_EQ(runs[0].value("task", ""), "gelu_bias");

    o.argv.back() = "redis://127.0.0.1:1/0";
    r = run_process(o);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("cannot connect to the Redis queue at 127.0.0.1:1"), std::string::npos) << r.err;
}

// Issue 37: `search --workers` with no worker at all stops. A transcript of seed kernels; the
// compile jobs wait on a real redis-server that no worker serves.
class NoWorker : public QueueTest {
protected:
    std::vector<std::string> search(const std::vector<std::string>& extra) {
        fs::path transcript = dir.path() / "t.jsonl";
        {
            llm::Transcript t(transcript);
            for (int i = 0; i < 8; ++i) {
                llm::ChatRequest req;
                req.messages = {{"user", "request " + std::to_string(i)}};
                llm::ChatResponse resp;
                resp.content = "```cuda\n" + evolve::testing::kernel_source(i, 1.0) + "```\n";
                resp.finish_reason = "stop";
                t.record(req, &resp, nullptr, 0.01);
            }
        }
        std::vector<std::string> a{KEVO_EXE, "search", "--task", (fs::path(KEVO_TEST_DATA_DIR) / "gelu_bias" / "task.json").string(),
                                   "--out", (dir.path() / "kernels").string(), "--state", (dir.path() / "run.db").string(),
                                   "--replay", transcript.string(), "--llm-replay-in-order", "--islands", "2",
                                   "--children", "2", "--generations", "3", "--arch", "sm_90", "--workers", url};
        a.insert(a.end(), extra.begin(), extra.end());
        return a;
    }
    static size_t count(const std::string& hay, const std::string& needle) {
        size_t n = 0;
        for (size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
        return n;
    }
    const std::string warning = "no live worker serves compile:sm_90 on ";
};

TEST_F(NoWorker, MaxTimeStopsTheSearchWithOneWarning) {
    ProcessOptions o;
    o.argv = search({"--max-time", "5"});
    o.timeout_s = 60;  // (today's bound: it never stopped)
    const auto t0 = Clock::now();
    ProcessResult r = run_process(o);
    const double took = std::chrono::duration<double>(Clock::now() - t0).count();
    EXPECT_EQ(r.exit_code, 1) << r.err;  // stopped by the time limit without a kernel
    EXPECT_LT(took, 30) << r.err;
    EXPECT_EQ(count(r.err, warning), 1u) << r.err;
    EXPECT_NE(r.err.find("kernelevo: stopped (time)"), std::string::npos) << r.err;
    // Nothing was judged: the candidates wait for a worker in a resumed run.
    auto s = store::open_store((dir.path() / "run.db").string(), store::Access::read_only);
    for (const auto& p : s->programs()) EXPECT_NE(p.status, store::ProgramStatus::compile_error) << p.key;
}

TEST_F(NoWorker, CtrlCStopsTheSearch) {
    Child search_process(search({}), log("search"));
    ASSERT_TRUE(eventually([&] { return fs::exists(log("search")) && read_file(log("search")).find(warning) != std::string::npos; }, 60))
        << read_file(log("search"));
    search_process.signal(SIGINT);
    ASSERT_TRUE(eventually([&] { return search_process.exited(); }, 20)) << "a Ctrl-C did not stop it:\n" << read_file(log("search"));
    const std::string err = read_file(log("search"));
    EXPECT_NE(err.find("kernelevo: stopped (interrupted)"), std::string::npos) << err;
    EXPECT_EQ(count(err, warning), 1u) << err;
}

// Issue 37: a job's error quotes text about an untrusted kernel; the worker's log escapes it.
TEST_F(QueueTest, AWorkersLogEscapesTerminalControlsFromAJob) {
    Child w(driver("w1"), log("w1"));
    Queue q(url);
    JobSpec s{"compile", "sm_90", "t", "r", "THROW \x1b]0;owned\x07\x1b[2J", ""};
    EXPECT_FALSE(q.submit(s, "c1"));
    auto got = collect(q, "c1", {s.id()}, 30);
    ASSERT_EQ(got.size(), 1u) << read_file(log("w1"));
    ASSERT_TRUE(eventually([&] { return read_file(log("w1")).find("scripted failure of") != std::string::npos; }, 10));
    const std::string text = read_file(log("w1"));
    EXPECT_EQ(text.find('\x1b'), std::string::npos) << "a raw ESC reached the worker's terminal";
    EXPECT_EQ(text.find('\x07'), std::string::npos) << "a raw BEL reached the worker's terminal";
    EXPECT_NE(text.find("THROW \\x1b]0;owned\\x07"), std::string::npos) << text;
}

TEST(WorkerCli, RefusesBadUsage) {
    auto run = [](std::vector<std::string> args) {
        ProcessOptions o;
        o.argv = {KEVO_EXE};
        o.argv.insert(o.argv.end(), args.begin(), args.end());
        o.timeout_s = 60;
        return run_process(o);
    };
    ProcessResult r = run({"worker", "--redis", "redis://127.0.0.1:1/0", "--compile-only"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("--compile-only needs --arch"), std::string::npos) << r.err;
    r = run({"worker", "--redis", "redis://127.0.0.1:1/0", "--compile-only", "--arch", "sm_90"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("cannot connect to the Redis queue at 127.0.0.1:1"), std::string::npos) << r.err;
    r = run({"worker", "--redis", "/tmp/file.db", "--compile-only", "--arch", "sm_90"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("redis://"), std::string::npos) << r.err;
    r = run({"worker", "--redis", "redis://127.0.0.1:1/0", "--gpu", "0", "--compile-only"});
    EXPECT_EQ(r.exit_code, 2);
    r = run({"worker", "--help"});
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_NE(r.out.find("--compile-only"), std::string::npos);
}

}  // namespace
}  // namespace kevo::worker
