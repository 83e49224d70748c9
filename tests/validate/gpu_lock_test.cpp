// The device's GPU lock (validate/gpu_lock.h) between real processes (fork) in a temporary lock
// directory: measurements take turns, shared users run beside each other but never beside a
// measurement, a waiting measurement keeps new shared users out, a wait is said once with the
// holder and its reason, and a holder that died is taken over and said once. No GPU needed. Order
// is read from a log the holders append to, never from how long something took.
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "validate/gpu_lock.h"

using namespace kevo;
namespace fs = std::filesystem;

namespace {
struct LockDir : ::testing::Test {
    std::string dir;
    void SetUp() override {
        char tmpl[] = "/tmp/kevo_gpulock_XXXXXX";
        dir = mkdtemp(tmpl);
        setenv("KERNELEVO_LOCK_DIR", dir.c_str(), 1);
    }
    void TearDown() override {
        unsetenv("KERNELEVO_LOCK_DIR");
        fs::remove_all(dir);
    }
    void note(const std::string& line) { std::ofstream(dir + "/log", std::ios::app) << line << "\n"; }
    std::string log() {
        std::ifstream f(dir + "/log");
        std::stringstream s;
        s << f.rdbuf();
        return s.str();
    }
    bool exists(const std::string& name) { return fs::exists(dir + "/" + name); }
    // Whether the file `name` appeared within a minute (a lock that never comes fails, never hangs).
    bool wait_for(const std::string& name) {
        const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        while (!exists(name) && std::chrono::steady_clock::now() < end)
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        return exists(name);
    }
    // A child that takes the lock in `use`, logs "WHO in", holds it until the file `release` exists
    // (or for `hold_ms` when `release` is empty), then logs "WHO out".
    pid_t holder(const std::string& who, GpuUse use, const std::string& release, int hold_ms = 0) {
        pid_t pid = fork();
        if (pid != 0) return pid;
        {
            GpuLock lock("GPU-test", "GPU 0 (test)", {}, use, who);
            note(who + " in");
            std::ofstream(dir + "/" + who + ".in");
            if (!release.empty()) (void)wait_for(release);
            std::this_thread::sleep_for(std::chrono::milliseconds(hold_ms));
            note(who + " out");
        }
        _exit(0);
    }
    bool turnstile_held() {  // someone waits for the lock (gpu_lock.cpp's turnstile)
        int fd = open((dir + "/gpu-GPU-test.turn").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
        bool held = flock(fd, LOCK_EX | LOCK_NB) != 0;
        close(fd);
        return held;
    }
    static void reap(std::vector<pid_t> pids) {
        for (pid_t p : pids) waitpid(p, nullptr, 0);
    }
};
}  // namespace

TEST_F(LockDir, MeasurementsTakeTurnsAndAWaitIsSaidOnceWithItsHolder) {
    pid_t a = holder("timing A", GpuUse::exclusive, "", 2500);
    ASSERT_TRUE(wait_for("timing A.in"));
    std::vector<std::string> notes;
    {
        GpuLock lock(
            "GPU-test", "GPU 0 (test)", [&](const std::string& n) { notes.push_back(n); }, GpuUse::exclusive, "B");
        note("B in");
        note("B out");
    }
    reap({a});
    EXPECT_EQ(log(), "timing A in\ntiming A out\nB in\nB out\n");
    ASSERT_EQ(notes.size(), 1u) << "a wait of over two seconds is one line, not one every so often";
    EXPECT_NE(notes[0].find("waiting for GPU 0 (test) to time B: held by pid " + std::to_string(a) + " (timing A)"),
              std::string::npos)
        << notes[0];
}

TEST_F(LockDir, SharedUsersRunBesideEachOtherButNotBesideAMeasurement) {
    pid_t a = holder("check A", GpuUse::shared, "go");
    pid_t b = holder("check B", GpuUse::shared, "go");
    ASSERT_TRUE(wait_for("check A.in"));
    ASSERT_TRUE(wait_for("check B.in")) << "two shared users did not hold the lock at once";
    pid_t t = holder("timing", GpuUse::exclusive, "");
    while (!turnstile_held()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_FALSE(exists("timing.in")) << "a measurement got the GPU while checks ran";
    std::ofstream(dir + "/go");
    reap({a, b, t});
    const std::string l = log();
    EXPECT_LT(l.find("check A out"), l.find("timing in")) << l;
    EXPECT_LT(l.find("check B out"), l.find("timing in")) << l;
}

TEST_F(LockDir, AWaitingMeasurementKeepsNewSharedUsersOut) {
    pid_t a = holder("check A", GpuUse::shared, "release A");
    ASSERT_TRUE(wait_for("check A.in"));
    pid_t t = holder("timing", GpuUse::exclusive, "", 300);
    while (!turnstile_held()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    pid_t c = holder("check C", GpuUse::shared, "");
    // C asks while A still holds the lock shared and the timing waits: C must not slip in beside A.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_FALSE(exists("check C.in")) << "a shared user went ahead of a waiting measurement";
    std::ofstream(dir + "/release A");
    reap({a, t, c});
    const std::string l = log();
    EXPECT_LT(l.find("timing out"), l.find("check C in")) << l;
}

TEST_F(LockDir, AHolderThatDiedIsTakenOverAndSaidOnce) {
    pid_t dead = fork();
    if (dead == 0) {
        new GpuLock("GPU-test", "GPU 0 (test)", {}, GpuUse::exclusive, "killed timing");  // never released
        kill(getpid(), SIGKILL);
    }
    reap({dead});
    std::vector<std::string> notes;
    auto take = [&] { GpuLock lock("GPU-test", "GPU 0 (test)", [&](const std::string& n) { notes.push_back(n); }); };
    take();
    ASSERT_EQ(notes.size(), 1u);
    EXPECT_NE(notes[0].find("took over the lock of GPU 0 (test) from pid " + std::to_string(dead) + " (killed timing)"),
              std::string::npos)
        << notes[0];
    take();
    EXPECT_EQ(notes.size(), 1u) << "a lock released cleanly was reported as taken over";
}
