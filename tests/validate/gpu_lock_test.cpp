// The device's GPU lock (validate/gpu_lock.h) between real processes (fork) in a temporary lock
// directory: measurements take turns, shared users run beside each other but never beside a
// measurement, a waiting measurement keeps new shared users out, a wait is said once with the
// holder and its reason, and a holder that died is taken over and said once. No GPU needed. Order
// is read from a log the holders append to, never from how long something took.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
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

#include "child_wait.h"
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

// On the H100 a search waited "held by pid N for 47 s": the line of a measurement killed a run before,
// while checks held the lock shared. A wait names the measurement only while one holds the lock.
TEST_F(LockDir, AKilledMeasurementsLineIsNotTheHolderWhileChecksHoldIt) {
    pid_t dead = fork();
    if (dead == 0) {
        new GpuLock("GPU-test", "GPU 0 (test)", {}, GpuUse::exclusive, "killed timing");  // never released
        kill(getpid(), SIGKILL);
    }
    reap({dead});
    pid_t a = holder("check A", GpuUse::shared, "", 1500);
    ASSERT_TRUE(wait_for("check A.in"));
    std::vector<std::string> notes;
    {
        GpuLock lock(
            "GPU-test", "GPU 0 (test)", [&](const std::string& n) { notes.push_back(n); }, GpuUse::exclusive, "B");
    }
    reap({a});
    ASSERT_FALSE(notes.empty());
    EXPECT_NE(notes[0].find("held by other work that measures nothing"), std::string::npos) << notes[0];
    EXPECT_EQ(notes[0].find("pid " + std::to_string(dead)), std::string::npos) << notes[0];
}

// Issue 50's attacks on the lock directory: a planted lock file (a symlink to someone's file, a
// FIFO, a folder) is one clear error, and the file it points to is neither truncated nor opened to
// every user; a holder's line with an absurd start time is never a garbage duration; a phase log
// that is a FIFO nobody reads never hangs the release.
TEST_F(LockDir, APlantedLockFileIsRefusedAndItsTargetKept) {
    const std::string victim = dir + "/victim";
    std::ofstream(victim) << "precious\n";
    fs::permissions(victim, fs::perms::owner_read | fs::perms::owner_write);
    fs::create_symlink(victim, dir + "/gpu-GPU-test.lock");
    try {
        GpuLock lock("GPU-test", "GPU 0 (test)", {}, GpuUse::exclusive, "attack");
        ADD_FAILURE() << "a lock file that is a symlink was followed";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("gpu-GPU-test.lock"), std::string::npos) << e.what();
        EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    }
    std::ifstream f(victim);
    std::string line;
    std::getline(f, line);
    EXPECT_EQ(line, "precious") << "the symlink's target was truncated";
    EXPECT_EQ(fs::status(victim).permissions() & fs::perms::others_write, fs::perms::none)
        << "the symlink's target was opened to every user";
    fs::remove(dir + "/gpu-GPU-test.lock");
    ASSERT_EQ(mkfifo((dir + "/gpu-GPU-test.lock").c_str(), 0600), 0);
    EXPECT_THROW(GpuLock("GPU-test", "GPU 0 (test)", {}, GpuUse::shared, "fifo"), std::runtime_error);
    fs::remove(dir + "/gpu-GPU-test.lock");
    fs::create_directory(dir + "/gpu-GPU-test.lock");
    EXPECT_THROW(GpuLock("GPU-test", "GPU 0 (test)", {}, GpuUse::shared, "folder"), std::runtime_error);
}

TEST_F(LockDir, AHolderLineWithAnAbsurdStartIsNoGarbageDuration) {
    for (const char* since : {"1e300", "inf", "-5", "nan", "99999999999999"}) {
        int fd = open((dir + "/gpu-GPU-test.lock").c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
        ASSERT_GE(fd, 0);
        const std::string line = std::string("4242 ") + since + " odd\x01reason\n";
        ASSERT_EQ(write(fd, line.data(), line.size()), static_cast<ssize_t>(line.size()));
        ASSERT_EQ(flock(fd, LOCK_EX), 0);
        std::thread release([fd] {
            std::this_thread::sleep_for(std::chrono::milliseconds(1300));
            flock(fd, LOCK_UN);
        });
        std::vector<std::string> notes;
        { GpuLock lock("GPU-test", "GPU 0 (test)", [&](const std::string& n) { notes.push_back(n); }); }
        release.join();
        close(fd);
        ASSERT_FALSE(notes.empty()) << since;
        EXPECT_NE(notes[0].find("held by pid 4242 (odd?reason)"), std::string::npos) << notes[0];
        EXPECT_EQ(notes[0].find(" for -"), std::string::npos) << since << ": " << notes[0];
        EXPECT_EQ(notes[0].find("922337"), std::string::npos) << since << ": " << notes[0];
    }
}

TEST_F(LockDir, APhaseLogThatIsAFifoNobodyReadsNeverHangs) {
    const std::string fifo = dir + "/phase.fifo";
    ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
    pid_t child = fork();
    if (child == 0) {
        setenv("KEVO_PHASE_LOG", fifo.c_str(), 1);
        { GpuLock lock("GPU-test", "GPU 0 (test)", {}, GpuUse::shared, "fifo log"); }
        _exit(0);
    }
    int status = 0;
    if (!ended_within(child, 10, status)) FAIL() << "releasing the lock hung on a phase log that is a FIFO";
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}
