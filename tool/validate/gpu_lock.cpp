#include "validate/gpu_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "common/error.h"
#include "validate/gpu_ledger.h"

namespace kevo {

namespace {
std::string safe(const std::string& s) {
    std::string o;
    for (char c : s) o += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') ? c : '_';
    return o.empty() ? "gpu" : o;
}
double now_s() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}
}  // namespace

std::string GpuLock::lock_dir() { return gpu_state_dir(); }

GpuLock::GpuLock(const std::string& device_key, const std::string& label, const std::function<void(const std::string&)>& waiting) {
    std::string dir = lock_dir();
    if (mkdir(dir.c_str(), 01777) == 0) chmod(dir.c_str(), 01777);  // shared by every user of the host
    std::string path = dir + "/gpu-" + safe(device_key) + ".lock";
    fd_ = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd_ < 0) throw UsageError("cannot open the GPU lock " + path + ": " + std::strerror(errno));
    auto t0 = std::chrono::steady_clock::now();
    auto last_note = t0;
    while (flock(fd_, LOCK_EX | LOCK_NB) != 0) {
        if (errno != EWOULDBLOCK && errno != EINTR) throw UsageError("cannot lock " + path + ": " + std::strerror(errno));
        auto now = std::chrono::steady_clock::now();
        if (waiting && now - last_note >= std::chrono::seconds(2)) {
            last_note = now;
            char buf[64] = {0};
            ssize_t n = pread(fd_, buf, sizeof buf - 1, 0);
            long pid = 0;
            double since = 0;
            if (n > 0) std::sscanf(buf, "%ld %lf", &pid, &since);
            std::string who = pid > 0 ? ", held by pid " + std::to_string(pid) : std::string();
            if (pid > 0 && since > 0) who += " for " + std::to_string(static_cast<long>(now_s() - since)) + " s";
            waiting("waiting for " + label + who);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    waited_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    char buf[64];
    int n = std::snprintf(buf, sizeof buf, "%ld %.3f\n", static_cast<long>(getpid()), now_s());
    if (ftruncate(fd_, 0) == 0) (void)!pwrite(fd_, buf, n, 0);
}

GpuLock::~GpuLock() {
    if (fd_ >= 0) {
        flock(fd_, LOCK_UN);
        close(fd_);
    }
}

}  // namespace kevo
