// GPU memory shared by admission, not by luck (issue 36): a per-device ledger of the bytes that the
// tool's processes on one GPU (judges of validations, references, tuning, profiles) will allocate.
// A user reserves before allocating and gives the reservation back when done; while the device's
// budget (its total, or $KERNELEVO_GPU_MEMORY_BYTES when smaller, minus a margin for contexts and
// library caches) minus the others' reservations is too small, it waits with back-off, honouring its
// caller's stop and timeout.
//
// On disk, beside the GPU lock (gpu_lock.h, $KERNELEVO_LOCK_DIR): a directory gpu-KEY.mem/ holding
// one small file per reservation ("PID-SEQ-KIND", its bytes inside), each held under flock by its
// holder for as long as the reservation lives, and a guard file gpu-KEY.mem.lock whose flock makes
// "count, then add mine" atomic. A holder that died (however: kill -9 included) left its file
// unlocked: the next reader reclaims it. Liveness by flock, not by pid: immune to pid reuse and to
// holders in another pid namespace (containers sharing the GPU and /tmp).
//
// Plain C++ (no CUDA, no other part): the runner links it, and tests drive it with a fake total.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace kevo {

// $KERNELEVO_LOCK_DIR, or /tmp/kernelevo-locks: where the GPU lock and the ledger live.
std::string gpu_state_dir();

struct LedgerWait {
    double timeout_s = 0;                                  // 0: try once, never wait
    std::function<bool()> stop;                            // true: give up now (Ctrl-C, the caller's deadline)
    std::function<void(const std::string&)> waiting;       // about every 2 s while waiting
};

class MemoryLedger {
public:
    // `device_total_bytes`: what the device reports (cudaMemGetInfo's total).
    MemoryLedger(const std::string& device_key, uint64_t device_total_bytes, const std::string& dir = gpu_state_dir());

    class Reservation {
    public:
        ~Reservation();
        Reservation(const Reservation&) = delete;
        Reservation& operator=(const Reservation&) = delete;
        uint64_t bytes() const { return bytes_; }

    private:
        friend class MemoryLedger;
        Reservation() = default;
        std::string path_, guard_;
        int fd_ = -1;
        uint64_t bytes_ = 0;
    };

    // The budget: min(device total, $KERNELEVO_GPU_MEMORY_BYTES) minus the margin
    // ($KERNELEVO_GPU_MEMORY_MARGIN_BYTES, default a tenth of that total).
    uint64_t budget() const { return budget_; }
    // Bytes of all live reservations of `kind` ("" : every kind); reclaims dead holders' ones.
    uint64_t reserved(const std::string& kind = "") const;

    // Grants between `min_bytes` and `want_bytes` (as much as fits), once at least `min_bytes` fit in
    // the budget and, when `kind_cap` > 0, the reservations of `kind` stay within `kind_cap`.
    // nullptr when it could not within `wait` (stopped, timed out, or min_bytes above the budget).
    std::unique_ptr<Reservation> reserve(uint64_t min_bytes, uint64_t want_bytes, const std::string& kind, const LedgerWait& wait = {},
                                         uint64_t kind_cap = 0) const;

private:
    std::string dir_, guard_;
    uint64_t budget_ = 0;
    uint64_t sum_live(int guard_fd, const std::string& kind) const;
};

}  // namespace kevo
