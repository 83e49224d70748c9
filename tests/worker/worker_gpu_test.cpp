// Workers on a real GPU (skipped without a CUDA device): two `kernelevo worker --gpu 0` share one
// GPU (the validator's cross-process lock), the queue overhead per job, kill -9 of a GPU worker
// mid-validation, and `kernelevo search --workers` through 1 GPU worker + 3 compile-only workers
// against the local search (candidates per minute, GPU busy share).
//
//   ctest --test-dir BUILD -R WorkerGpu --output-on-failure
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <regex>
#include <thread>

#include "../store/redis_server.h"
#include "common/fs.h"
#include "common/process.h"
#include "gpu_kernels.h"
#include "store/store.h"
#include "validate/validate.h"
#include "worker/queue.h"
#include "worker/remote_evaluator.h"

namespace kevo::worker {
namespace {

using Clock = std::chrono::steady_clock;
const fs::path kData = fs::path(KEVO_TEST_DATA_DIR) / "gelu_bias";

const DeviceInfo& device() {
    static DeviceInfo d = [] {
        Validator v(load_task(kData / "task.json"), ValidateOptions{});
        return v.device();
    }();
    return d;
}

class Child {
public:
    Child(const std::vector<std::string>& args, const fs::path& log) {
        pid_ = ::fork();
        if (pid_ == 0) {
            ::prctl(PR_SET_PDEATHSIG, SIGKILL);
            FILE* f = std::fopen(log.c_str(), "a");
            if (f) ::dup2(fileno(f), 2);
            std::vector<char*> argv;
            for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
            argv.push_back(nullptr);
            ::execv(argv[0], argv.data());
            ::_exit(127);
        }
    }
    ~Child() {
        if (pid_ > 0) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, nullptr, 0);
        }
    }
    void kill9() {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
        pid_ = -1;
    }

private:
    pid_t pid_ = -1;
};

class WorkerGpu : public ::testing::Test {
protected:
    void SetUp() override {
        if (!device().present) GTEST_SKIP() << "no CUDA device: " << device().error;
        if (!kevo::testing::RedisServer::installed()) GTEST_SKIP() << "redis-server is not installed";
        ASSERT_TRUE(redis.start()) << redis.error();
        url = redis.url("gpu");
        arch = device().arch();
    }
    std::unique_ptr<Child> worker(const std::string& name, bool compile_only = false) {
        std::vector<std::string> a{KEVO_EXE, "worker", "--redis", url, "--name", name, "--lease", "10"};
        if (compile_only) a.insert(a.end(), {"--compile-only", "--arch", arch});
        else a.insert(a.end(), {"--gpu", "0"});
        return std::make_unique<Child>(a, dir.path() / (name + ".log"));
    }
    void wait_workers(size_t n) {
        Queue q(url);
        auto deadline = Clock::now() + std::chrono::seconds(60);
        while (q.workers().size() < n && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(50));
        ASSERT_EQ(q.workers().size(), n);
    }
    std::string logs() {
        std::string all;
        for (const auto& e : fs::directory_iterator(dir.path()))
            if (e.path().extension() == ".log") all += e.path().filename().string() + ":\n" + read_file(e.path());
        return all;
    }
    kevo::testing::RedisServer redis;
    std::string url, arch;
    TempDir dir;
};

TEST_F(WorkerGpu, TwoWorkersShareOneGpuAndTheQueueCostsLittle) {
    auto a = worker("gpu0-a"), b = worker("gpu0-b");
    wait_workers(2);
    Task task = load_task(kData / "task.json");
    ValidateOptions vo;
    vo.timing_trials = 50;
    RemoteEvaluator ev(url, task, vo);
    ASSERT_EQ(ev.arch(), arch);
    // 16 candidates at once: the two workers take turns on the GPU.
    std::vector<std::future<Evaluation>> futures;
    for (int i = 0; i < 16; ++i)
        futures.push_back(std::async(std::launch::async, [&, i] {
            CompileResult c = ev.compile(vec4_variant(100 + i));
            EXPECT_TRUE(c.ok) << c.log;
            return ev.run(c);
        }));
    std::vector<double> speedups;
    std::map<std::string, int> by_worker;
    for (auto& f : futures) {
        Evaluation e = f.get();
        EXPECT_EQ(e.status, Status::ok) << e.feedback;  // none rejected as "work outside the given stream"
        speedups.push_back(e.speedup);
        ++by_worker[e.details.value("worker", "")];
    }
    EXPECT_EQ(by_worker.size(), 2u) << logs();
    std::sort(speedups.begin(), speedups.end());
    double spread = (speedups.back() - speedups.front()) / speedups[speedups.size() / 2];
    std::cout << "16 validations through 2 workers on one GPU: speedups " << speedups.front() << ".." << speedups.back()
              << " (spread " << spread * 100 << "%)\n";
    EXPECT_LT(spread, 0.1) << "validations on one GPU disturbed each other's timing";

    // The overhead with idle workers, one job at a time.
    RemoteEvaluator quiet(url, task, vo);
    for (int i = 0; i < 10; ++i) {
        CompileResult c = quiet.compile(vec4_variant(200 + i));
        ASSERT_TRUE(c.ok);
        EXPECT_EQ(quiet.run(c).status, Status::ok);
    }
    std::vector<double> o = quiet.overhead_ms();
    std::sort(o.begin(), o.end());
    std::cout << "queue overhead per job (submit -> result seen, validation excluded): median " << o[o.size() / 2]
              << " ms, max " << o.back() << " ms over " << o.size() << " jobs\n";
    EXPECT_LE(o[o.size() / 2], 50);
}

TEST_F(WorkerGpu, Kill9OfAGpuWorkerMidValidationTheOtherFinishesIt) {
    auto a = worker("victim"), b = worker("rescuer");
    wait_workers(2);
    Task task = load_task(kData / "task.json");
    ValidateOptions vo;
    RemoteEvaluator ev(url, task, vo);
    CompileResult c = ev.compile(vec4_variant(300));
    ASSERT_TRUE(c.ok);
    auto f = std::async(std::launch::async, [&] { return ev.run(c); });
    Queue q(url);
    bool killed = false;
    auto deadline = Clock::now() + std::chrono::seconds(60);
    while (!killed && Clock::now() < deadline) {
        for (const auto& w : q.workers())
            if (w.contains("job") && w["job"].value("kind", "") == "run") {
                (w.value("name", "") == "victim" ? a : b)->kill9();
                killed = true;
                break;
            }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ASSERT_TRUE(killed);
    Evaluation e = f.get();
    EXPECT_EQ(e.status, Status::ok) << e.feedback << logs();
    EXPECT_EQ(q.stats()["done"], 2);  // the compile and the run, each once
}

struct SearchRate {
    int evaluated = 0;
    double wall_s = 0, per_minute = 0;
    std::string err;
};

SearchRate search(const std::vector<std::string>& extra, const fs::path& dir, const std::string& name, int first_variant) {
    std::vector<std::string> kernels = {read_file(kGpuKernels / "seed_fixed.cu")};
    for (int i = 0; i < 40; ++i) kernels.push_back(vec4_variant(first_variant + i, i % 2 ? 256 : 512, 4 << (i % 3)));
    fs::path transcript = dir / (name + ".jsonl"), state = dir / (name + ".db");
    write_transcript(transcript, kernels);
    ProcessOptions o;
    o.argv = {KEVO_EXE, "search", "--task", (kData / "task.json").string(), "--out", (dir / name).string(), "--state",
              state.string(), "--replay", transcript.string(), "--llm-replay-in-order", "--islands", "4", "--children",
              "2", "--generations", "5", "--mode", "full", "--migration-interval", "0"};
    o.argv.insert(o.argv.end(), extra.begin(), extra.end());
    o.timeout_s = 540;
    auto t0 = Clock::now();
    ProcessResult r = run_process(o);
    SearchRate rate;
    rate.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
    rate.err = r.err;
    EXPECT_EQ(r.exit_code, 0) << r.describe() << "\n" << r.err;
    auto s = store::open_store(state.string());
    using S = store::ProgramStatus;
    for (const auto& p : s->programs())
        if (p.status != S::duplicate && p.status != S::no_code && p.status != S::pending) ++rate.evaluated;
    rate.per_minute = rate.evaluated / rate.wall_s * 60;
    return rate;
}

TEST_F(WorkerGpu, SearchThroughOneGpuAndThreeCompileWorkersKeepsUpWithTheLocalSearch) {
    {
        Validator warm(load_task(kData / "task.json"), ValidateOptions{});  // the local reference build, likewise
        ASSERT_TRUE(warm.validate(vec4_variant(999)).ok());
    }
    SearchRate local = search({}, dir.path(), "local", 1000);
    auto g = worker("gpu0");
    std::vector<std::unique_ptr<Child>> cpus;
    for (int i = 0; i < 3; ++i) cpus.push_back(worker("cpu" + std::to_string(i), true));
    wait_workers(4);
    {
        // Warm-up: the workers build the task's reference once per host (a LibTorch compile), as the
        // local search did before; the measurement is of the steady flow after that.
        Task task = load_task(kData / "task.json");
        RemoteEvaluator warm(url, task, ValidateOptions{});
        CompileResult c = warm.compile(vec4_variant(1999));
        ASSERT_TRUE(c.ok) << c.log;
        ASSERT_EQ(warm.run(c).status, Status::ok) << logs();
    }
    Queue q(url);
    double busy_before = 0;
    for (const auto& w : q.workers())
        if (w.value("name", "") == "gpu0") busy_before = w.value("busy_s", 0.0);
    SearchRate remote = search({"--workers", url}, dir.path(), "remote", 2000);
    std::this_thread::sleep_for(std::chrono::seconds(3));  // the last heartbeat
    double busy = 0;
    for (const auto& w : q.workers())
        if (w.value("name", "") == "gpu0") busy = w.value("busy_s", 0.0) - busy_before;
    std::smatch m;
    std::regex_search(remote.err, m, std::regex("queue overhead per job[^\\n]*"));
    std::cout << "local search: " << local.evaluated << " candidates in " << local.wall_s << " s (" << local.per_minute
              << "/min)\nthrough workers: " << remote.evaluated << " in " << remote.wall_s << " s (" << remote.per_minute
              << "/min), GPU busy " << busy << " s = " << 100 * busy / remote.wall_s << "% of the wall time\n"
              << m.str() << "\n";
    EXPECT_GE(remote.per_minute, local.per_minute);
    EXPECT_GE(busy / remote.wall_s, 0.8);
}

}  // namespace
}  // namespace kevo::worker
