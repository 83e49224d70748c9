// A helper that asks for the GPU alone by files (validate/turns.h, common/turn_files.h), played by a
// shell script, with a fake device in a temporary lock directory: it prepares with the lock shared,
// its measurements have it exclusively, a shared holder keeps its turn from starting, and a link it
// plants where the tool writes is never followed. No GPU needed; order is read from the holds' log
// ($KEVO_PHASE_LOG) and from files, never from how long something took.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/fs.h"
#include "validate/gpu_ledger.h"
#include "validate/gpu_lock.h"
#include "validate/turns.h"

namespace kevo {
namespace {
namespace fs = std::filesystem;

struct Turns : ::testing::Test {
    TempDir tmp{"kevo-turns"};
    fs::path work = tmp.path() / "work", log = tmp.path() / "phases.jsonl";
    DeviceInfo device;
    void SetUp() override {
        fs::create_directories(work);
        fs::create_directories(tmp.path() / "locks");
        ::setenv("KERNELEVO_LOCK_DIR", (tmp.path() / "locks").c_str(), 1);
        ::setenv("KEVO_PHASE_LOG", log.c_str(), 1);
        device.present = true;
        device.name = "fake";
        device.uuid = "GPU-turns-test";
    }
    void TearDown() override {
        ::unsetenv("KERNELEVO_LOCK_DIR");
        ::unsetenv("KEVO_PHASE_LOG");
    }
    // A helper that asks for `n` turns, each after a line of preparation; `before` runs before turn 1.
    ProcessOptions helper(int n, const std::string& before = "") const {
        std::string script = "cd '" + work.string() + "'\n";
        for (int i = 0; i < n; ++i) {
            const std::string t = "turn-" + std::to_string(i);
            if (i == 1) script += before + "\n";
            script += "echo preparing " + t + "\ntouch " + t + ".ready\nwhile [ ! -e " + t +
                      ".go ]; do sleep 0.005; done\necho measuring " + t + "\ntouch " + t + ".done\n";
        }
        ProcessOptions po;
        po.argv = {"bash", "-c", script};
        po.timeout_s = 60;
        return po;
    }
    HelperRun as(const std::string& reason) const {
        HelperRun r;
        r.reason = reason;
        r.turns_dir = work;
        return r;
    }
    std::vector<nlohmann::json> holds() const {
        std::vector<nlohmann::json> out;
        std::istringstream lines(read_file(log));
        for (std::string line; std::getline(lines, line);) out.push_back(nlohmann::json::parse(line));
        return out;
    }
};

TEST_F(Turns, PreparationSharesTheGpuAndEachMeasurementHasItAlone) {
    const ProcessResult p = run_with_turns(helper(2), device, as("timing X"));
    ASSERT_TRUE(p.ok()) << p.describe() << p.err;
    EXPECT_EQ(p.out, "preparing turn-0\nmeasuring turn-0\npreparing turn-1\nmeasuring turn-1\n");
    const auto h = holds();
    std::vector<std::string> seq;
    for (const auto& j : h) seq.push_back(j["lock"].get<std::string>() + " " + j["reason"].get<std::string>());
    // After the last done the lock goes back to shared unless the helper has already ended: either way.
    if (seq.size() == 5 && seq.back() == "shared timing X (preparing)") seq.pop_back();
    EXPECT_EQ(seq, (std::vector<std::string>{"shared timing X (preparing)", "exclusive timing X",
                                             "shared timing X (preparing)", "exclusive timing X"}))
        << read_file(log);
    for (size_t i = 1; i < h.size(); ++i)  // one hold at a time, each taken after the last was given back
        EXPECT_GE(h[i]["got"].get<double>(), h[i - 1]["released"].get<double>()) << read_file(log);
}

TEST_F(Turns, AMeasurementWaitsForTheOthersSharedWork) {
    auto other = std::make_unique<GpuLock>(GpuLock::device_key(device.uuid, 0), "fake", nullptr, GpuUse::shared,
                                           "another's correctness checks");
    std::atomic<bool> done{false};
    ProcessResult p;
    std::thread run([&] {
        p = run_with_turns(helper(1), device, as("timing X"));
        done = true;
    });
    while (!fs::exists(work / "turn-0.ready") && !done) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // time to fail: go given beside a shared holder
    EXPECT_FALSE(fs::exists(work / "turn-0.go")) << "the helper measured while another held the GPU shared";
    other.reset();
    run.join();
    EXPECT_TRUE(p.ok()) << p.describe() << p.err;
    EXPECT_TRUE(fs::exists(work / "turn-0.go"));
}

TEST_F(Turns, ALinkPlantedWhereTheToolWritesIsNotFollowed) {
    const fs::path victim = tmp.path() / "victim";
    write_file_atomic(victim, "keep");
    // A former run's turn-0.go (here a link) is cleared before the helper starts, so turn 0 waits for the
    // tool's own go; a link the helper plants during the run stays a link and is never written through.
    fs::create_symlink(victim, work / "turn-0.go");
    const ProcessResult p = run_with_turns(helper(2, "ln -s '" + victim.string() + "' turn-1.go"), device,
                                           as("timing X"));
    ASSERT_TRUE(p.ok()) << p.describe() << p.err;
    EXPECT_EQ(read_file(victim), "keep");
    EXPECT_FALSE(fs::is_symlink(work / "turn-0.go"));
    EXPECT_TRUE(fs::is_symlink(work / "turn-1.go"));
}

// The baselines' script asks as the C++ side answers: its gpu_alone() under run_with_turns.
TEST_F(Turns, TheBaselinesScriptAsksForItsTurnsByTheSameFiles) {
    const std::string code = "import sys; sys.path.insert(0, sys.argv[1]); import baseline_torch as b\n"
                             "for n in range(2):\n"
                             "    with b.gpu_alone({'turns': sys.argv[2]}, n): print('measuring', n)\n";
    ProcessOptions po;
    po.argv = {"python3", "-c", code, std::string(KEVO_SOURCE_DIR) + "/tool/baseline", work.string()};
    po.timeout_s = 60;
    const ProcessResult p = run_with_turns(po, device, as("PyTorch baselines of X"));
    ASSERT_TRUE(p.ok()) << p.describe() << p.err;
    EXPECT_EQ(p.out, "measuring 0\nmeasuring 1\n");
    int alone = 0;
    for (const auto& j : holds()) alone += j["lock"] == "exclusive" && j["reason"] == "PyTorch baselines of X";
    EXPECT_EQ(alone, 2) << read_file(log);
}

TEST_F(Turns, WithoutADeviceTheHelperJustRuns) {
    device.present = false;
    ProcessOptions po;
    po.argv = {"bash", "-c", "echo ran"};
    const ProcessResult p = run_with_turns(po, device, as("timing X"));
    EXPECT_EQ(p.out, "ran\n");
    EXPECT_FALSE(fs::exists(log));
}

// An import holds nothing until it asks (Python's start), then the lock shared to its end: the
// problem's code, untrusted, runs in its process and cannot end the hold by writing turn-0.done.
TEST_F(Turns, AnImportHoldsTheGpuSharedFromItsAskToItsEndWhateverItsCodeSays) {
    const std::string code = "import os, sys, time; sys.path.insert(0, sys.argv[1])\n"
                             "from kernelevo.kernelbench.gpu_turns import GpuTurns\n"
                             "t = GpuTurns(sys.argv[2]); t.take(); t.take()\n"
                             "open(os.path.join(sys.argv[2], 'turn-0.done'), 'x').close()  # the problem's code\n"
                             "time.sleep(0.3); print('%.6f' % time.time())\n";
    ProcessOptions po;
    po.argv = {"python3", "-c", code, std::string(KEVO_SOURCE_DIR) + "/python", work.string()};
    po.timeout_s = 120;
    HelperRun run = as("importing X");
    run.hold_between = false;
    run.turn_use = GpuUse::shared;
    run.first_turn_to_end = true;
    const ProcessResult p = run_with_turns(po, device, run);
    ASSERT_TRUE(p.ok()) << p.describe() << p.err;
    const auto h = holds();
    ASSERT_EQ(h.size(), 1u) << read_file(log);
    EXPECT_EQ(h[0]["lock"], "shared");
    EXPECT_EQ(h[0]["reason"], "importing X");
    EXPECT_GE(h[0]["released"].get<double>(), std::stod(p.out)) << "the hold ended before the process did";
}

// A helper that will use GPU memory (the baselines' script, a profile) waits for its share of the
// device's memory ledger beside the judges, says so once, and holds the share while it runs.
TEST_F(Turns, AHelperWaitsForItsShareOfGpuMemoryAndHoldsItWhileItRuns) {
    device.total_mem = int64_t{1000} << 20;  // less the default margin (a tenth): a budget of 900 MiB
    MemoryLedger ledger(device.uuid, static_cast<uint64_t>(device.total_mem));
    auto others = ledger.reserve(ledger.budget() - (uint64_t{100} << 20), 0, "job");
    ASSERT_TRUE(others);
    HelperRun run = as("PyTorch baselines of X");
    run.memory_bytes = uint64_t{200} << 20;
    std::mutex m;
    std::vector<std::string> notes;
    run.note = [&](const std::string& line) {
        std::lock_guard<std::mutex> l(m);
        notes.push_back(line);
    };
    ProcessOptions po;
    po.argv = {"bash", "-c", "touch '" + (work / "started").string() + "'; ls -R '" + (tmp.path() / "locks").string() +
                                 "' | grep -c -- '-helper$'"};
    po.timeout_s = 60;
    ProcessResult p;
    std::atomic<bool> done{false};
    std::thread t([&] {
        p = run_with_turns(po, device, run);
        done = true;
    });
    for (;;) {  // the ledger says a wait after it has lasted two seconds
        {
            std::lock_guard<std::mutex> l(m);
            if (!notes.empty() || done || fs::exists(work / "started")) break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_FALSE(fs::exists(work / "started")) << "the helper started before its memory was free";
    others.reset();
    t.join();
    EXPECT_TRUE(p.ok()) << p.describe() << p.err;
    EXPECT_EQ(p.out, "1\n") << "its share was not held while it ran";
    ASSERT_EQ(notes.size(), 1u);
    EXPECT_NE(notes[0].find("PyTorch baselines of X: waiting for 200 MiB of GPU memory"), std::string::npos) << notes[0];
    EXPECT_EQ(ledger.reserved("helper"), 0u);
}

TEST_F(Turns, AHelperThatNeedsMoreThanTheLedgersBudgetRunsWithoutAShareAndSaysSo) {
    device.total_mem = int64_t{1000} << 20;
    HelperRun run = as("profiling X");
    run.memory_bytes = uint64_t{2000} << 20;
    std::vector<std::string> notes;
    run.note = [&](const std::string& line) { notes.push_back(line); };
    ProcessOptions po;
    po.argv = {"bash", "-c", "echo ran"};
    const ProcessResult p = run_with_turns(po, device, run);
    EXPECT_EQ(p.out, "ran\n");
    ASSERT_EQ(notes.size(), 1u);
    EXPECT_EQ(notes[0], "profiling X needs about 2.0 GiB of GPU memory, more than the 0.9 GiB the memory ledger "
                        "shares out: it runs without a share");
}

}  // namespace
}  // namespace kevo
