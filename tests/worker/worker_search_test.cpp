// Searches through the validation queue on a real redis-server: a steady-state search through
// workers, kill -9 of that search and its resume, the real `kernelevo worker --compile-only` with nvcc
// (CUDA and Triton candidates), `kernelevo search --workers` with and without a worker, a worker's log.
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
