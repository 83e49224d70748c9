// The per-device GPU memory ledger (validate/gpu_ledger.h) with real processes (fork) reserving
// against a fake device total in a temporary lock directory: they take turns when their sum would
// exceed the budget, none sees the budget exceeded, and a holder killed with SIGKILL gives its
// reservation back. No GPU needed.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "child_wait.h"
#include "validate/gpu_ledger.h"

using namespace kevo;
namespace fs = std::filesystem;

namespace {
struct LedgerDir : ::testing::Test {
    std::string dir;
    void SetUp() override {
        char tmpl[] = "/tmp/kevo_ledger_XXXXXX";
        dir = mkdtemp(tmpl);
        setenv("KERNELEVO_GPU_MEMORY_MARGIN_BYTES", "0", 1);
        unsetenv("KERNELEVO_GPU_MEMORY_BYTES");
    }
    void TearDown() override {
        unsetenv("KERNELEVO_GPU_MEMORY_MARGIN_BYTES");
        fs::remove_all(dir);
    }
};
struct Shared {  // in memory shared by the forked holders
    std::atomic<int> holding, max_holding, over_budget;
};
}  // namespace

TEST_F(LedgerDir, ProcessesTakeTurnsAndNoneExceedsTheBudget) {
    auto* sh = static_cast<Shared*>(mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    ASSERT_NE(sh, MAP_FAILED);
    new (sh) Shared{};
    std::vector<pid_t> kids;
    for (int k = 0; k < 6; ++k) {
        pid_t pid = fork();
        ASSERT_GE(pid, 0);
        if (pid == 0) {
            MemoryLedger ledger("fake-gpu", 1000, dir);  // 1000 bytes, 400 each: two fit at once
            LedgerWait w;
            w.timeout_s = 60;
            auto r = ledger.reserve(400, 400, "job", w);
            if (!r) _exit(3);
            int now = ++sh->holding;
            for (int seen = sh->max_holding.load(); now > seen && !sh->max_holding.compare_exchange_weak(seen, now);) {
            }
            if (ledger.reserved() > ledger.budget()) ++sh->over_budget;
            std::this_thread::sleep_for(std::chrono::milliseconds(80));
            --sh->holding;
            r.reset();
            _exit(0);
        }
        kids.push_back(pid);
    }
    for (pid_t p : kids) {
        int st = 0;
        ASSERT_EQ(waitpid(p, &st, 0), p);
        EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "a holder got no reservation";
    }
    EXPECT_LE(sh->max_holding.load(), 2);  // the third waited for one of the first two
    EXPECT_GE(sh->max_holding.load(), 1);
    EXPECT_EQ(sh->over_budget.load(), 0);
    EXPECT_EQ(MemoryLedger("fake-gpu", 1000, dir).reserved(), 0u);  // all given back
    munmap(sh, sizeof(Shared));
}

TEST_F(LedgerDir, AKilledHoldersReservationIsReclaimed) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        MemoryLedger ledger("fake-gpu", 1000, dir);
        auto r = ledger.reserve(900, 900, "kept");
        (void)!write(fds[1], r ? "y" : "n", 1);
        pause();  // until killed
        _exit(0);
    }
    char c = 0;
    ASSERT_EQ(read(fds[0], &c, 1), 1);
    ASSERT_EQ(c, 'y');
    MemoryLedger ledger("fake-gpu", 1000, dir);
    EXPECT_EQ(ledger.reserved(), 900u);
    EXPECT_EQ(ledger.reserve(500, 500, "job"), nullptr);  // the holder lives: no room
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    auto r = ledger.reserve(500, 500, "job");
    ASSERT_NE(r, nullptr);  // reclaimed
    EXPECT_EQ(ledger.reserved(), 500u);
    close(fds[0]);
    close(fds[1]);
}

TEST_F(LedgerDir, KeptCopiesAreCappedPerDeviceAndShrinkUnderPressure) {
    MemoryLedger ledger("fake-gpu", 1000, dir);
    auto job = ledger.reserve(500, 500, "job");
    ASSERT_NE(job, nullptr);
    // Wants 800 of kept copies, needs 100: gets what the cap (300) allows.
    auto a = ledger.reserve(100, 800, "kept", {}, 300);
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->bytes(), 300u);
    EXPECT_EQ(ledger.reserve(100, 800, "kept", {}, 300), nullptr);  // the device's cap is spent (another judge)
    a.reset();
    auto b = ledger.reserve(100, 800, "kept", {}, 600);  // a larger cap: bounded by the budget's room instead
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(b->bytes(), 500u);
    EXPECT_EQ(ledger.reserved("kept"), 500u);
    EXPECT_EQ(ledger.reserve(2000, 2000, "job"), nullptr);  // above the budget: never fits, no wait
}

TEST_F(LedgerDir, WaitingHonoursStopAndTheEnvironmentsTotal) {
    setenv("KERNELEVO_GPU_MEMORY_BYTES", "600", 1);
    unsetenv("KERNELEVO_GPU_MEMORY_MARGIN_BYTES");
    MemoryLedger ledger("fake-gpu", 1000, dir);
    EXPECT_EQ(ledger.budget(), 540u);  // min(1000, 600) less a tenth
    unsetenv("KERNELEVO_GPU_MEMORY_BYTES");
    auto held = ledger.reserve(500, 500, "job");
    ASSERT_NE(held, nullptr);
    int asked = 0;
    LedgerWait w;
    w.timeout_s = 600;  // would wait ten minutes; the stop ends it at its second look
    w.stop = [&] { return ++asked >= 2; };
    EXPECT_EQ(ledger.reserve(100, 100, "job", w), nullptr);
    EXPECT_EQ(asked, 2);
}

// Issue 50's attacks on the ledger's folder: a FIFO planted among the reservations never hangs a
// count, planted held lines whose bytes add past 2^64 never wrap round to room that is not there,
// and a guard file that is a symlink is refused in one line, its target never created.
TEST_F(LedgerDir, PlantedReservationsNeitherHangNorWrapTheSum) {
    MemoryLedger ledger("fake-gpu", 1000, dir);
    const std::string mem = dir + "/gpu-fake-gpu.mem";
    ASSERT_EQ(mkfifo((mem + "/1-0-job").c_str(), 0666), 0);
    pid_t child = fork();
    if (child == 0) _exit(ledger.reserved() == 0 ? 0 : 1);
    int status = 0;
    if (!ended_within(child, 10, status)) FAIL() << "counting the ledger hung on a FIFO among the reservations";
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    std::vector<int> held;
    for (const char* name : {"/2-0-job", "/2-1-job"}) {  // each 2^63 + 8: together they wrap to 16
        int fd = open((mem + name).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
        ASSERT_GE(fd, 0);
        ASSERT_EQ(write(fd, "9223372036854775816\n", 20), 20);
        ASSERT_EQ(flock(fd, LOCK_EX), 0);  // before the fork: the child's copy keeps it held
        held.push_back(fd);
    }
    pid_t holder = fork();  // holds the planted lines as a live holder would
    if (holder == 0) {
        pause();
        _exit(0);
    }
    for (int fd : held) close(fd);
    EXPECT_GE(ledger.reserved(), ledger.budget()) << "the planted bytes wrapped round";
    LedgerWait w;
    w.timeout_s = 0.05;
    EXPECT_EQ(ledger.reserve(100, 100, "job", w), nullptr) << "a reservation fit beside 2^64 bytes";
    kill(holder, SIGKILL);
    waitpid(holder, nullptr, 0);
}

TEST_F(LedgerDir, AGuardThatIsASymlinkIsRefused) {
    MemoryLedger ledger("fake-gpu", 1000, dir);
    const std::string target = dir + "/planted-target";
    fs::create_symlink(target, dir + "/gpu-fake-gpu.mem.lock");
    try {
        (void)ledger.reserved();
        ADD_FAILURE() << "the guard was opened through a symlink";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("gpu-fake-gpu.mem.lock"), std::string::npos) << e.what();
    }
    EXPECT_FALSE(fs::exists(target)) << "the symlink's target was created";
}
