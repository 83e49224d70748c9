#include "validate/gpu_lock.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "common/settings.h"
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
// Never through a symlink nor onto a FIFO or device someone planted in the shared folder: the
// holder truncates the file and opens it to every user.
int open_lock(const std::string& path) {
    int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0666);
    if (fd < 0 && errno == ELOOP)
        throw std::runtime_error("cannot open the GPU lock " + path + ": it is a symbolic link; remove it");
    if (fd < 0) throw std::runtime_error("cannot open the GPU lock " + path + ": " + std::strerror(errno));
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        throw std::runtime_error("cannot open the GPU lock " + path + ": it is not a regular file; remove it");
    }
    return fchmod(fd, 0666), fd;  // shared by every user of the host
}

// What the exclusive holder wrote: "PID SINCE REASON" (empty: no measurement holds it, or it was
// released cleanly).
struct Holder {
    long pid = 0;
    double since = 0;
    std::string reason;
};
Holder read_holder(int fd) {
    char buf[256] = {0};
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    Holder h;
    int used = 0;
    if (n > 0 && std::sscanf(buf, "%ld %lf %n", &h.pid, &h.since, &used) >= 2) {
        h.reason = std::string(buf + used);
        while (!h.reason.empty() && (h.reason.back() == '\n' || h.reason.back() == '\r')) h.reason.pop_back();
        for (char& c : h.reason)
            if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';  // another process's words
    }
    return h;
}
std::string describe(const Holder& h) {
    if (h.pid <= 0) return "held by other work that measures nothing (correctness runs, imports)";
    std::string s = "held by pid " + std::to_string(h.pid);
    if (!h.reason.empty()) s += " (" + h.reason + ")";
    // Only a start in the past that a holder could have written (no garbage from a planted line).
    const double held = now_s() - h.since;
    if (h.since > 0 && held >= 0 && held < 1e9) s += " for " + std::to_string(static_cast<long>(held)) + " s";
    return s;
}
// flock(fd, op) without blocking the caller's words: polls every 2 ms, and once the wait passes a
// second calls `said()` once.
void take(int fd, int op, const std::string& path, const std::function<void()>& said) {
    const auto t0 = std::chrono::steady_clock::now();
    bool told = false;
    while (flock(fd, op | LOCK_NB) != 0) {
        if (errno != EWOULDBLOCK && errno != EINTR)
            throw std::runtime_error("cannot lock " + path + ": " + std::strerror(errno));
        if (!told && std::chrono::steady_clock::now() - t0 >= std::chrono::seconds(1)) {
            told = true;
            said();
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
}
}  // namespace

std::string GpuLock::lock_dir() {
    return gpu_state_dir();
}

std::string GpuLock::device_key(const std::string& uuid, int index) {
    return uuid.empty() ? "gpu" + std::to_string(index) : uuid;
}

GpuLock::GpuLock(const std::string& device_key, const std::string& label,
                 const std::function<void(const std::string&)>& waiting, GpuUse use, const std::string& reason)
    : use_(use), reason_(reason), asked_(now_s()) {
    std::string dir = lock_dir();
    if (mkdir(dir.c_str(), 01777) == 0) chmod(dir.c_str(), 01777);  // shared by every user of the host
    const std::string path = dir + "/gpu-" + safe(device_key) + ".lock";
    fd_ = open_lock(path);
    try {
        turn_fd_ = open_lock(dir + "/gpu-" + safe(device_key) + ".turn");
    } catch (...) {
        close(fd_);
        throw;
    }
    const std::string what = reason.empty() ? "" : (use == GpuUse::exclusive ? " to time " : " for ") + reason;
    bool said = false;
    auto say = [&] {
        if (said) return;
        said = true;
        Holder holder = read_holder(fd_);
        // A measurement's line while the lock can be had shared is a killed measurement's, not who holds it now.
        if (holder.pid > 0 && flock(fd_, LOCK_SH | LOCK_NB) == 0) {
            flock(fd_, LOCK_UN);
            holder = Holder{};
        }
        wait_note_ = "waiting for " + label + what + ": " + describe(holder);
        if (waiting) waiting(wait_note_);
    };
    const auto t0 = std::chrono::steady_clock::now();
    try {
        // The turnstile: whoever waits for the lock holds it, so no new shared user slips in ahead
        // of a waiting measurement.
        take(turn_fd_, LOCK_EX, path, say);
        take(fd_, use == GpuUse::exclusive ? LOCK_EX : LOCK_SH, path, say);
    } catch (...) {
        close(fd_);
        close(turn_fd_);
        throw;
    }
    flock(turn_fd_, LOCK_UN);
    waited_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    got_ = now_s();
    if (use != GpuUse::exclusive) return;
    // A measurement that ended without releasing (killed) left its line: say once that it is taken over.
    const Holder stale = read_holder(fd_);
    if (stale.pid > 0 && stale.pid != getpid() && waiting)
        waiting("took over the lock of " + label + " from pid " + std::to_string(stale.pid) +
                (stale.reason.empty() ? "" : " (" + stale.reason + ")") + ", which ended while holding it");
    char buf[256];
    int n = std::snprintf(buf, sizeof buf, "%ld %.3f %s\n", static_cast<long>(getpid()), now_s(),
                          reason.substr(0, 160).c_str());
    if (ftruncate(fd_, 0) == 0) (void)!pwrite(fd_, buf, n, 0);
}

GpuLock::~GpuLock() {
    if (use_ == GpuUse::exclusive) (void)!ftruncate(fd_, 0);  // released cleanly: no holder to name
    flock(fd_, LOCK_UN);
    close(fd_);
    close(turn_fd_);
    log_hold();
}

void GpuLock::log_hold() const {
    const char* path = env(EnvVar::kPhaseLog);
    if (!path || !*path) return;
    std::string why;
    for (char c : reason_) why += (c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20) ? '?' : c;
    char buf[512];
    int n = std::snprintf(buf, sizeof buf,
                          "{\"lock\": \"%s\", \"pid\": %ld, \"reason\": \"%s\", \"asked\": %.6f, \"got\": %.6f, "
                          "\"released\": %.6f}\n",
                          use_ == GpuUse::exclusive ? "exclusive" : "shared", static_cast<long>(getpid()),
                          why.substr(0, 200).c_str(), asked_, got_, now_s());
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0644);  // a FIFO unread: skip
    if (fd < 0) return;
    (void)!write(fd, buf, std::min<int>(n, sizeof buf - 1));  // one write: lines of several processes never interleave
    close(fd);
}

}  // namespace kevo
