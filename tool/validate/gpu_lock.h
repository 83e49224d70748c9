// One GPU is one timing domain: what measures on a device (timed calls of a kernel and of its
// reference, a profile, PyTorch baselines) has it to itself; everything else the tool runs there
// (correctness runs, an import's tracing) may share it with other such work, never with a
// measurement. A reader-writer lock across processes (searches, `cache add`, workers, imports,
// tests): flock on a file per device, keyed by the device's UUID, in $KERNELEVO_LOCK_DIR (default
// /tmp/kernelevo-locks), released by the kernel when its holder dies. A turnstile file in front of
// it makes a waiting measurement keep new shared users out, so that a stream of correctness runs
// never starves a timing. With $KEVO_PHASE_LOG set, each hold appends a line there (when it was
// asked for, taken and given back), which benchmarks/studies/gpu_busy.py reads.
#pragma once
#include <functional>
#include <string>

namespace kevo {

enum class GpuUse {
    exclusive,  // a measurement: no other GPU work of the tool's beside it
    shared,     // work that measures nothing: beside other shared work, never beside a measurement
};

class GpuLock {
public:
    // Blocks until this process holds the device's lock in `use`. `label` names the device
    // ("GPU 0 (NVIDIA H100)"), `reason` what it is for ("timing kb1_23_Softmax"): the lock file
    // shows it to the others. A wait longer than a second is said once, through `waiting`:
    // "waiting for GPU 0 (...) to time kb1_23_Softmax: held by pid 123 (timing kb1_9) for 3 s".
    GpuLock(const std::string& device_key, const std::string& label,
            const std::function<void(const std::string&)>& waiting = {}, GpuUse use = GpuUse::exclusive,
            const std::string& reason = "");
    ~GpuLock();
    GpuLock(const GpuLock&) = delete;
    GpuLock& operator=(const GpuLock&) = delete;
    double waited_s() const { return waited_s_; }
    // The line said when a wait went past a second ("" when none did).
    const std::string& wait_note() const { return wait_note_; }
    static std::string lock_dir();
    // The key of device `index` with `uuid` ("" when unknown): the lock's and the memory ledger's.
    static std::string device_key(const std::string& uuid, int index);

private:
    void log_hold() const;
    int fd_ = -1, turn_fd_ = -1;
    GpuUse use_;
    std::string reason_;
    double asked_ = 0, got_ = 0;  // unix seconds: for $KEVO_PHASE_LOG
    double waited_s_ = 0;
    std::string wait_note_;
};

}  // namespace kevo
