// The validator's retries and its GPU lock, on the CPU: a fake runner (fake_runner.sh) stands in for
// kernelevo-runner and answers each job with a scripted result, noting whether the GPU lock was
// held while it ran. What is checked: a confirming validation that fails for a reason outside the
// kernel is tried again and, when it keeps failing, says so; a wall-clock rejection is validated
// once more and blames the kernel only when no other process used the GPU; lock_gpu() holds the
// device's lock, and a job does not (its judge takes the lock itself, shared and then exclusive).
#include <gtest/gtest.h>
#include <sys/file.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>

#include "common/fs.h"
#include "reference/reference.h"
#include "validate/validate.h"

using namespace kevo;

namespace {
const fs::path kData = fs::path(KEVO_TEST_DATA_DIR) / "gelu_bias";

const char* kWallRejection =
    "{\"status\":\"rejected\",\"log\":\"the reported kernel times (10 us) do not agree with the time the judge observed, on the set's "
    "second timing: 4 batches of 256 calls in all took 79000 us more\"%s}";
std::string wall_rejection(bool others) {
    char buf[1024];
    std::snprintf(buf, sizeof buf, kWallRejection,
                  others ? ",\"interference\":{\"source\":\"nvml\",\"others\":[{\"pid\":4242,\"name\":\"python3\",\"sm_pct\":80,\"mem_pct\":40}]}"
                         : ",\"interference\":{\"source\":\"nvml\",\"others\":[]}");
    return buf;
}
std::string ok_result(double speedup) {
    return "{\"status\":\"ok\",\"timing\":{\"sets\":[{\"shape_set\":0,\"kernel\":{\"time_us\":" + std::to_string(10 / speedup) +
           "},\"reference\":{\"time_us\":10},\"speedup\":" + std::to_string(speedup) + "}]}}";
}

// One validator over the fake runner, with the replies its jobs get.
struct FakeGpu {
    TempDir dir{"kevo-retry"};
    std::unique_ptr<Validator> v;
    CompileResult compiled;

    explicit FakeGpu(const std::vector<std::string>& replies) {
        std::string text;
        for (const auto& r : replies) text += r + "\n";
        write_file_atomic(dir.path() / "replies", text);
        setenv("KERNELEVO_RUNNER", (fs::path(KEVO_SOURCE_DIR) / "tests/validate/fake_runner.sh").c_str(), 1);
        setenv("KERNELEVO_FAKE_REPLIES", (dir.path() / "replies").c_str(), 1);
        setenv("KERNELEVO_FAKE_LOG", (dir.path() / "log").c_str(), 1);
        setenv("KERNELEVO_LOCK_DIR", (dir.path() / "locks").c_str(), 1);
        if (!std::getenv("KERNELEVO_CACHE_HOME")) setenv("KERNELEVO_CACHE_HOME", (fs::path(KEVO_BINARY_DIR) / "test-cache").c_str(), 1);
        ValidateOptions o;
        o.arch = "sm_90";
        v = std::make_unique<Validator>(load_task(kData / "task.json"), o);
        v->set_retry_pause(0);
        v->set_note([](const std::string&) {});
        write_file_atomic(dir.path() / "kernel.so", "not a library: the fake runner never loads it");
        compiled.ok = true;
        compiled.arch = "sm_90";
        compiled.library = dir.path() / "kernel.so";
    }
    std::vector<std::string> log() {
        std::vector<std::string> lines;
        std::string text = fs::exists(dir.path() / "log") ? read_file(dir.path() / "log") : "";
        for (size_t at = 0, nl; (nl = text.find('\n', at)) != std::string::npos; at = nl + 1) lines.push_back(text.substr(at, nl - at));
        return lines;
    }
};

#define REQUIRE_REFERENCE()                                                                          \
    if (!reference_support().available) GTEST_SKIP() << "this kernelevo cannot build references (no LibTorch)"

ValidationResult passed(double speedup) {
    ValidationResult r;
    r.status = Status::ok;
    r.speedup = speedup;
    return r;
}
}  // namespace

TEST(ValidateRetry, ConfirmTriesAgainAfterAWallClockRejection) {
    REQUIRE_REFERENCE();
    FakeGpu g({wall_rejection(true), ok_result(2.0)});
    ValidationResult r = g.v->confirm(g.compiled, passed(2.0));
    EXPECT_EQ(r.status, Status::ok) << r.log;
    EXPECT_TRUE(r.confirmed);
    ASSERT_TRUE(r.details.contains("confirmation_attempts")) << r.details.dump();
    EXPECT_EQ(r.details["confirmation_attempts"].size(), 1u);
    EXPECT_EQ(g.log().size(), 2u);
}

TEST(ValidateRetry, ConfirmThatKeepsFailingOutsideTheKernelSaysSo) {
    REQUIRE_REFERENCE();
    // run() itself validates a wall-clock rejection twice, so each of confirm's 3 attempts is one job.
    FakeGpu g({wall_rejection(true), wall_rejection(true), wall_rejection(true)});
    ValidationResult r = g.v->confirm(g.compiled, passed(2.0));
    EXPECT_EQ(r.status, Status::rejected);
    EXPECT_FALSE(r.confirmed);
    EXPECT_EQ(g.log().size(), 3u);
    EXPECT_NE(r.log.find("not the kernel's fault"), std::string::npos) << r.log;
    EXPECT_NE(outside_kernel_reason(r), "") << r.details.dump();
}

TEST(ValidateRetry, ConfirmTriesAgainWhenSpeedupsDisagreeButNotAfterAMismatch) {
    REQUIRE_REFERENCE();
    {
        FakeGpu g({ok_result(1.0), ok_result(1.95)});
        ValidationResult r = g.v->confirm(g.compiled, passed(2.0));
        EXPECT_EQ(r.status, Status::ok) << r.log;
        EXPECT_EQ(g.log().size(), 2u);
    }
    {
        FakeGpu g({"{\"status\":\"mismatch\",\"log\":\"output 'y' differs\"}", ok_result(2.0)});
        ValidationResult r = g.v->confirm(g.compiled, passed(2.0));
        EXPECT_EQ(r.status, Status::rejected);
        EXPECT_EQ(g.log().size(), 1u) << "a mismatch is the kernel's: not tried again";
        EXPECT_EQ(outside_kernel_reason(r), "");
    }
}

TEST(ValidateRetry, WallClockRejectionIsValidatedAgainAndBlamesOnlyWhatTheJudgeSaw) {
    REQUIRE_REFERENCE();
    {
        FakeGpu g({wall_rejection(false), ok_result(1.5)});
        ValidationResult r = g.v->run(g.compiled);
        EXPECT_EQ(r.status, Status::ok) << r.log;
        EXPECT_EQ(r.details["earlier_attempts"].size(), 1u);
    }
    {
        // Another process used the GPU during both jobs: not attributable to the kernel.
        FakeGpu g({wall_rejection(true), wall_rejection(true)});
        ValidationResult r = g.v->run(g.compiled);
        EXPECT_EQ(r.status, Status::rejected);
        EXPECT_TRUE(r.details.value("not_attributable", false)) << r.details.dump();
        EXPECT_NE(outside_kernel_reason(r), "");
        EXPECT_NE(r.log.find("pid 4242 (python3)"), std::string::npos) << r.log;
        EXPECT_NE(r.log.find("not attributed to the kernel"), std::string::npos) << r.log;
    }
    {
        // Nobody else was seen: the kernel's own rejection, as before.
        FakeGpu g({wall_rejection(false), wall_rejection(false)});
        ValidationResult r = g.v->run(g.compiled);
        EXPECT_EQ(r.status, Status::rejected);
        EXPECT_EQ(outside_kernel_reason(r), "");
        EXPECT_NE(r.log.find("no other process used the GPU"), std::string::npos) << r.log;
    }
}

TEST(ValidateRetry, AFullGpuMemoryIsNotTheKernelsFaultNorABrokenTask) {
    REQUIRE_REFERENCE();
    const std::string oom = "{\"status\":\"setup_error\",\"log\":\"the timing copies: cuMemCreate: CUDA_ERROR_OUT_OF_MEMORY\"}";
    {
        FakeGpu g({oom, ok_result(1.2)});
        ValidationResult r = g.v->run(g.compiled);  // a new judge, once more
        EXPECT_EQ(r.status, Status::ok) << r.log;
        EXPECT_EQ(g.log().size(), 2u);
    }
    {
        // Another process keeps the memory for a while: the job waits for its share, never fails on it.
        FakeGpu g({oom, oom, oom, ok_result(1.3)});
        ValidationResult r = g.v->run(g.compiled);
        EXPECT_EQ(r.status, Status::ok) << r.log;
        EXPECT_EQ(g.log().size(), 4u);
        EXPECT_EQ(r.details["earlier_attempts"].size(), 3u);
    }
    {
        FakeGpu g({oom, oom, oom, oom, oom, oom, ok_result(1.3)});
        ValidationResult r;
        ASSERT_NO_THROW(r = g.v->run(g.compiled));
        EXPECT_NE(r.status, Status::ok);
        EXPECT_NE(outside_kernel_reason(r), "") << r.log;
        EXPECT_EQ(g.log().size(), 6u) << "the waits are bounded";
    }
}

TEST(ValidateRetry, LockGpuHoldsTheDevicesLockAndAJobLeavesItToItsJudge) {
    REQUIRE_REFERENCE();
    FakeGpu g({ok_result(1.0)});
    const std::string lock = (g.dir.path() / "locks" / "gpu-GPU-fake.lock").string();
    auto probe = [&] {
        int fd = open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
        bool free = flock(fd, LOCK_EX | LOCK_NB) == 0;
        close(fd);
        return free;
    };
    {
        auto held = g.v->lock_gpu();
        ASSERT_TRUE(held);
        EXPECT_FALSE(probe()) << "lock_gpu() did not take " << lock;
    }
    EXPECT_TRUE(probe());
    EXPECT_EQ(g.v->run(g.compiled).status, Status::ok);
    // The job's correctness runs share the GPU with other judges' checks: the validator holds no lock
    // around it (runner/gpu_turns.cu takes it, shared for the checks and exclusive for the timing).
    EXPECT_EQ(g.log(), std::vector<std::string>{"job 1 unlocked"});
}
