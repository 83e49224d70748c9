#include "validate/turns.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <memory>
#include <thread>

#include "common/turn_files.h"
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
}  // namespace

ProcessResult run_with_turns(const ProcessOptions& po, const DeviceInfo& device, const std::string& reason,
                             const fs::path& dir, const std::function<void(const std::string&)>& note) {
    if (!device.present) return run_process(po);
    const std::string preparing = reason + " (preparing)", where = dir.string();
    for (int n = 0; n < 1024; ++n) {  // a former run's turns in the same folder (a profile run again)
        bool any = false;
        for (const char* what : {"ready", "go", "done"}) any |= ::unlink(turn_file(where, n, what).c_str()) == 0;
        if (!any) break;
    }
    std::unique_ptr<GpuLock> held = lock_device(device, GpuUse::shared, preparing, note);
    std::atomic<bool> ended{false};
    std::exception_ptr failed;  // the lock directory became unusable: the helper goes on unlocked, then it is said
    auto relock = [&](GpuUse use, const std::string& why) {
        held.reset();
        if (failed) return;
        try {
            held = lock_device(device, use, why, note);
        } catch (...) {
            failed = std::current_exception();
        }
    };
    // Only this thread touches `held` until it is joined.
    std::thread turns([&] {
        for (int n = 0; !ended.load();) {
            if (!exists(turn_file(where, n, "ready"))) {
                nap();
                continue;
            }
            relock(GpuUse::exclusive, reason);
            create_turn_file(turn_file(where, n, "go"));
            while (!ended.load() && !exists(turn_file(where, n, "done"))) nap();
            if (!ended.load()) relock(GpuUse::shared, preparing);
            ++n;
        }
    });
    ProcessResult p = run_process(po);
    ended = true;
    turns.join();
    held.reset();
    if (failed) std::rethrow_exception(failed);
    return p;
}

}  // namespace kevo
