#include "validate/turns.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <memory>
#include <thread>

#include "common/text.h"
#include "common/turn_files.h"
#include "validate/gpu_ledger.h"
#include "validate/gpu_lock.h"
#include "validate/validate.h"

namespace kevo {
namespace fs = std::filesystem;

namespace {
bool exists(const std::string& path) {
    std::error_code ec;
    return fs::exists(path, ec);
}

void nap() { std::this_thread::sleep_for(std::chrono::milliseconds(2)); }

std::string gib(uint64_t bytes) { return format_double("%.1f GiB", static_cast<double>(bytes) / (1ull << 30)); }

// The helper's share of the device's memory ledger (the judges' key: the device's UUID), or null
// where none is asked for or none can be had; a wait and a helper run unreserved are each said once.
std::unique_ptr<MemoryLedger::Reservation> reserve_memory(const DeviceInfo& device, const HelperRun& run) {
    if (run.memory_bytes == 0 || device.total_mem <= 0) return nullptr;
    auto say = [&](const std::string& line) {
        if (run.note) run.note(line);
    };
    try {
        MemoryLedger ledger(GpuLock::device_key(device.uuid, device.index), static_cast<uint64_t>(device.total_mem));
        if (run.memory_bytes > ledger.budget()) {
            say(run.reason + " needs about " + gib(run.memory_bytes) + " of GPU memory, more than the " +
                gib(ledger.budget()) + " the memory ledger shares out: it runs without a share");
            return nullptr;
        }
        LedgerWait wait;
        wait.timeout_s = run.memory_wait_s;
        bool said = false;
        wait.waiting = [&](const std::string& line) {
            if (!said) say(run.reason + ": " + line);
            said = true;
        };
        auto share = ledger.reserve(run.memory_bytes, run.memory_bytes, "helper", wait);
        if (!share)
            say(run.reason + ": no share of GPU memory after " + format_double("%.0f", run.memory_wait_s) +
                " s; it runs without one");
        return share;
    } catch (const std::exception&) {  // the ledger's folder unusable: as before the ledger
        return nullptr;
    }
}
}  // namespace

struct GpuTurns::Impl {
    Impl(const DeviceInfo& d, const HelperRun& r) : device(d), run(r) {}
    const DeviceInfo device;
    const HelperRun run;
    std::unique_ptr<MemoryLedger::Reservation> share;
    std::unique_ptr<GpuLock> held;  // only the serving thread touches it until it is joined
    std::atomic<bool> ended{false};
    std::exception_ptr failed;  // the lock directory became unusable: the helper goes on unlocked, then it is said
    std::thread serving;

    std::string between_reason() const { return run.reason + " (preparing)"; }
    void relock(bool in_turn) {
        held.reset();
        if (failed || (!in_turn && !run.hold_between)) return;
        try {
            held = lock_device(device, in_turn ? run.turn_use : GpuUse::shared, in_turn ? run.reason : between_reason(),
                               run.note);
        } catch (...) {
            failed = std::current_exception();
        }
    }
    void serve() {
        const std::string where = run.turns_dir.string();
        for (int n = 0; !ended.load();) {
            if (!exists(turn_file(where, n, "ready"))) {
                nap();
                continue;
            }
            relock(true);
            create_turn_file(turn_file(where, n, "go"));
            while (!ended.load() && (run.first_turn_to_end || !exists(turn_file(where, n, "done")))) nap();
            if (!ended.load()) relock(false);
            ++n;
        }
    }
};

GpuTurns::GpuTurns(const DeviceInfo& device, const HelperRun& run) {
    if (!device.present) return;
    impl_ = std::make_unique<Impl>(device, run);
    const std::string where = run.turns_dir.string();
    for (int n = 0; n < 1024; ++n) {  // a former run's turns in the same folder (a profile run again)
        bool any = false;
        for (const char* what : {"ready", "go", "done"}) any |= ::unlink(turn_file(where, n, what).c_str()) == 0;
        if (!any) break;
    }
    impl_->share = reserve_memory(device, run);
    if (run.hold_between) impl_->held = lock_device(device, GpuUse::shared, impl_->between_reason(), run.note);
    impl_->serving = std::thread([this] { impl_->serve(); });
}

void GpuTurns::end() {
    if (!impl_ || impl_->ended.exchange(true)) return;
    impl_->serving.join();
    impl_->held.reset();
    impl_->share.reset();
    if (impl_->failed) std::rethrow_exception(impl_->failed);
}

GpuTurns::~GpuTurns() {
    try {
        end();
    } catch (...) {  // said by end() where the caller asks; a destructor only stops serving
    }
}

ProcessResult run_with_turns(const ProcessOptions& po, const DeviceInfo& device, const HelperRun& run) {
    GpuTurns turns(device, run);
    ProcessResult p = run_process(po);
    turns.end();
    return p;
}

}  // namespace kevo
