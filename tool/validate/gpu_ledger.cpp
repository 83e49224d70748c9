#include "validate/gpu_ledger.h"
#include "common/settings.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace kevo {

namespace {
std::string safe(const std::string& s) {
    std::string o;
    for (char c : s) o += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') ? c : '_';
    return o.empty() ? "gpu" : o;
}
uint64_t env_bytes(EnvVar var) {
    const char* v = env(var);
    if (!v || !*v) return 0;
    char* end = nullptr;
    unsigned long long n = std::strtoull(v, &end, 10);
    return end && *end == '\0' ? n : 0;  // not a plain number: ignored
}
// The entry's kind: the last '-'-separated field of "PID-SEQ-KIND".
std::string kind_of(const std::string& name) {
    auto p = name.rfind('-');
    return p == std::string::npos ? "" : name.substr(p + 1);
}
std::atomic<unsigned> g_seq{0};

struct Guard {  // the ledger's flock: counting and adding are one step
    int fd;
    // Never through a symlink someone planted in the shared folder (O_CREAT would make its target).
    explicit Guard(const std::string& path)
        : fd(open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0666)) {
        if (fd < 0) throw std::runtime_error("cannot open the GPU memory ledger " + path + ": " + std::strerror(errno));
        while (flock(fd, LOCK_EX) != 0 && errno == EINTR) {
        }
    }
    ~Guard() {
        flock(fd, LOCK_UN);
        close(fd);
    }
};
}  // namespace

std::string gpu_state_dir() {
    if (const char* d = env(EnvVar::kLockDir); d && *d) return d;
    return "/tmp/kernelevo-locks";
}

MemoryLedger::MemoryLedger(const std::string& device_key, uint64_t device_total_bytes, const std::string& dir) {
    if (mkdir(dir.c_str(), 01777) == 0) chmod(dir.c_str(), 01777);  // shared by every user of the host
    dir_ = dir + "/gpu-" + safe(device_key) + ".mem";
    guard_ = dir_ + ".lock";
    if (mkdir(dir_.c_str(), 01777) == 0) chmod(dir_.c_str(), 01777);
    uint64_t total = device_total_bytes;
    if (uint64_t cap = env_bytes(EnvVar::kGpuMemoryBytes); cap > 0) total = std::min(total, cap);
    const char* m = env(EnvVar::kGpuMemoryMarginBytes);
    uint64_t margin = m && *m ? env_bytes(EnvVar::kGpuMemoryMarginBytes) : total / 10;
    budget_ = total > margin ? total - margin : 0;
}

// Under the guard: the live reservations' bytes; a file nobody holds is a dead holder's, removed.
uint64_t MemoryLedger::sum_live(int /*guard_fd: held by the caller*/, const std::string& kind) const {
    uint64_t sum = 0;
    DIR* d = opendir(dir_.c_str());
    if (!d) return 0;
    while (dirent* e = readdir(d)) {
        std::string name = e->d_name;
        if (name == "." || name == "..") continue;
        std::string path = dir_ + "/" + name;
        int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);  // a planted FIFO: no hang
        if (fd < 0) continue;
        struct stat st {};
        if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {  // not a reservation: skipped
            close(fd);
            continue;
        }
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) {  // its holder is gone
            unlink(path.c_str());
            close(fd);
            continue;
        }
        char buf[32] = {0};
        ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
        close(fd);
        if (n > 0 && (kind.empty() || kind_of(name) == kind)) {
            const uint64_t b = std::strtoull(buf, nullptr, 10);
            sum = b > UINT64_MAX - sum ? UINT64_MAX : sum + b;  // planted lines never wrap round
        }
    }
    closedir(d);
    return sum;
}

uint64_t MemoryLedger::reserved(const std::string& kind) const {
    Guard g(guard_);
    return sum_live(g.fd, kind);
}

std::unique_ptr<MemoryLedger::Reservation> MemoryLedger::reserve(uint64_t min_bytes, uint64_t want_bytes, const std::string& kind,
                                                                 const LedgerWait& wait, uint64_t kind_cap) const {
    want_bytes = std::max(want_bytes, min_bytes);
    if (min_bytes > budget_ || (kind_cap > 0 && min_bytes > kind_cap)) return nullptr;  // would never fit
    const auto t0 = std::chrono::steady_clock::now();
    auto last_note = t0;
    int sleep_ms = 10;
    for (;;) {
        {
            Guard g(guard_);
            const uint64_t used = sum_live(g.fd, "");
            uint64_t room = budget_ > used ? budget_ - used : 0;
            if (kind_cap > 0) {
                const uint64_t mine = sum_live(g.fd, kind);
                room = std::min(room, kind_cap > mine ? kind_cap - mine : 0);
            }
            if (room >= min_bytes) {
                auto r = std::unique_ptr<Reservation>(new Reservation());
                r->bytes_ = std::min(room, want_bytes);
                r->guard_ = guard_;
                r->path_ = dir_ + "/" + std::to_string(getpid()) + "-" + std::to_string(g_seq++) + "-" + safe(kind);
                r->fd_ = open(r->path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
                if (r->fd_ < 0) throw std::runtime_error("cannot write the GPU memory ledger " + r->path_ + ": " + std::strerror(errno));
                flock(r->fd_, LOCK_EX);  // held until released: how the others know this holder lives
                std::string s = std::to_string(r->bytes_) + "\n";
                (void)!write(r->fd_, s.data(), s.size());
                return r;
            }
        }
        const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (waited >= wait.timeout_s || (wait.stop && wait.stop())) return nullptr;
        auto now = std::chrono::steady_clock::now();
        if (wait.waiting && now - last_note >= std::chrono::seconds(2)) {
            last_note = now;
            wait.waiting("waiting for " + std::to_string(min_bytes >> 20) + " MiB of GPU memory (budget " + std::to_string(budget_ >> 20) +
                         " MiB, reserved by others " + std::to_string(reserved() >> 20) + " MiB)");
        }
        std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(std::min<double>(sleep_ms, 1000 * (wait.timeout_s - waited) + 1)));
        sleep_ms = std::min(sleep_ms * 2, 500);  // back-off
    }
}

MemoryLedger::Reservation::~Reservation() {
    if (fd_ < 0) return;
    try {
        Guard g(guard_);  // not while someone counts
        unlink(path_.c_str());
    } catch (const std::exception&) {
        unlink(path_.c_str());
    }
    close(fd_);
}

}  // namespace kevo
