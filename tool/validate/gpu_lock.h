// One GPU is one timing domain: validations on the same device take turns under a lock that spans
// processes (searches, `cache add`, workers, tests). A file lock (flock) per device, keyed by the
// device's UUID, in $KERNELEVO_LOCK_DIR (default /tmp/kernelevo-locks): released by the kernel when
// its holder dies, never shared between two devices.
#pragma once
#include <functional>
#include <string>

namespace kevo {

class GpuLock {
public:
    // Blocks until this process holds the device's lock. While waiting, calls `waiting` about every
    // 2 s with a line such as "waiting for GPU 0 (NVIDIA H200), held by pid 123 for 3 s".
    GpuLock(const std::string& device_key, const std::string& label, const std::function<void(const std::string&)>& waiting = {});
    ~GpuLock();
    GpuLock(const GpuLock&) = delete;
    GpuLock& operator=(const GpuLock&) = delete;
    double waited_s() const { return waited_s_; }
    static std::string lock_dir();

private:
    int fd_ = -1;
    double waited_s_ = 0;
};

}  // namespace kevo
