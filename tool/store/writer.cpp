// The writer lease of a state (writer.h): an fcntl lock beside an SQLite file, a renewed key on Redis.
#include "store/writer.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <ctime>
#include <iostream>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <utility>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "store/internal/backends.h"
#include "common/setting_error.h"
#include "store/store.h"
#ifdef KEVO_HAVE_REDIS
#include "store/redis_connection.h"
#endif

namespace kevo::store {
namespace {

std::string host_name() {
    char buf[256] = {};
    if (::gethostname(buf, sizeof buf - 1) != 0 || !buf[0]) return "unknown-host";
    return buf;
}

double now_unix() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string utc(double t) {
    std::time_t s = static_cast<std::time_t>(t);
    std::tm tm{};
    ::gmtime_r(&s, &tm);
    char buf[40];
    std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
    return buf;
}

// Which running system a pid belongs to: the boot and the pid namespace ("" when unknown). Two
// processes with equal `system()` see the same pids, so one can tell whether the other is alive.
std::string this_system() {
    std::string boot;
    if (FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "r")) {
        char buf[64] = {};
        if (std::fgets(buf, sizeof buf, f)) boot = buf;
        std::fclose(f);
    }
    while (!boot.empty() && (boot.back() == '\n' || boot.back() == ' ')) boot.pop_back();
    char ns[64] = {};
    ssize_t n = ::readlink("/proc/self/ns/pid", ns, sizeof ns - 1);
    if (boot.empty() || n <= 0) return "";
    return boot + "/" + std::string(ns, static_cast<size_t>(n));
}

// Whether the holder in `record` is a process of this very system that no longer exists.
bool holder_is_dead_here(const nlohmann::json& record) {
    const std::string sys = this_system();
    const int64_t pid = record.value("pid", int64_t{0});
    if (sys.empty() || record.value("system", std::string()) != sys || pid <= 0) return false;
    return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

nlohmann::json holder_record(const WriterOptions& o) {
    std::random_device rd;
    return {{"pid", static_cast<int64_t>(::getpid())}, {"host", host_name()}, {"system", this_system()},
            {"since", now_unix()},
            {"what", o.what}, {"command", o.command.substr(0, 2000)}, {"workers", o.workers},
            {"token", std::to_string(rd()) + "-" + std::to_string(rd())}};
}

nlohmann::json parse_record(const std::string& text) {
    try {
        nlohmann::json j = nlohmann::json::parse(text);
        if (j.is_object()) return j;
    } catch (const nlohmann::json::exception&) {
    }
    return nlohmann::json::object();
}

// "kernelevo search (pid 1234 on host gpu1, since 2026-12-04 05:40:12 UTC)"; `pid` when the
// record could not be read (a holder between taking the lock and writing it).
std::string describe(const nlohmann::json& h, int64_t pid = 0) {
    const std::string what = h.value("what", std::string("kernelevo search"));
    std::string who = "pid " + std::to_string(h.value("pid", pid));
    if (h.contains("host")) who += " on host " + h.value("host", std::string());
    if (h.contains("since") && h["since"].is_number()) who += ", since " + utc(h["since"].get<double>());
    return what + " (" + who + ")";
}

const char* kNothingDone = " Nothing was sent to the LLM and the state was not changed.";

// ---- SQLite: an fcntl lock on PATH.lock, an OFD lock on the state file itself ----------------

// fcntl locks belong to the process: a second lock of the same file from this process would
// succeed, and closing any descriptor of it would drop the first. The files this process holds.
std::mutex g_held_mu;
std::set<std::pair<dev_t, ino_t>> g_held;
class SqliteLease;
std::map<std::string, SqliteLease*> g_leases;  // by the state's real path (bind_writer)

// The real path of a state: symbolic links resolved (in the folders and the name), so that a
// state reached through a link is locked as the file it is.
std::string real_state_path(const std::string& path) {
    std::error_code ec;
    std::filesystem::path p = std::filesystem::weakly_canonical(std::filesystem::absolute(path, ec), ec);
    return ec || p.empty() ? path : p.string();
}

// Where the lease locks the state file itself: one byte far past anything SQLite locks (its lock
// bytes are at 1 GiB) or stores. An open-file-description lock (F_OFD_SETLK): it conflicts with the
// same lock through any name of the file (a hard link) from any process, this one included, and,
// unlike a POSIX lock, SQLite closing its own descriptors of the file does not drop it.
constexpr off_t kFileLockAt = off_t{1} << 62;

class SqliteLease : public WriterLease {
public:
    SqliteLease(const std::string& state, const WriterOptions& o)
        : state_(state), real_(real_state_path(state)), lock_path_(writer_lock_path(real_)) {
        std::error_code ec;
        if (std::filesystem::is_symlink(state, ec) && o.log)
            o.log("the state " + state + " is a symbolic link to " + real_ + ": it is locked as that file");
        struct stat st {};
        {
            std::lock_guard<std::mutex> lock(g_held_mu);
            if (::stat(lock_path_.c_str(), &st) == 0 && g_held.count({st.st_dev, st.st_ino}))
                throw UsageError("the state " + state + " is in use by this process already (pid " +
                                 std::to_string(::getpid()) + ")");
        }
        fd_ = ::open(lock_path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd_ < 0)
            throw UsageError("cannot create the lock file " + lock_path_ + " of the state " + state + ": " +
                             std::strerror(errno));
        struct flock fl {};
        fl.l_type = F_WRLCK;
        fl.l_whence = SEEK_SET;
        if (::fcntl(fd_, F_SETLK, &fl) != 0) {
            const int err = errno;
            if (err != EACCES && err != EAGAIN) {
                ::close(fd_);
                throw UsageError("cannot lock " + lock_path_ + " (one search per state): " + std::strerror(err) +
                                 " (a file system without POSIX locks? put the state on a local disk)");
            }
            struct flock q {};
            q.l_type = F_WRLCK;
            q.l_whence = SEEK_SET;
            const int64_t pid = ::fcntl(fd_, F_GETLK, &q) == 0 && q.l_type != F_UNLCK ? q.l_pid : 0;
            const nlohmann::json holder = parse_record(read_all());
            ::close(fd_);
            throw SettingError({settings::kState}, "the state " + state + " is in use: " + describe(holder, pid) +
                                   " writes it, and one search writes a state at a time. Wait for it to finish, or stop "
                                   "it (Ctrl-C; a rerun resumes from the state), or give this search another {store.state}." +
                                   kNothingDone);
        }
        ::fstat(fd_, &st);
        id_ = {st.st_dev, st.st_ino};
        try {
            lock_file();  // the file itself, when it exists (a new one: open_store locks it once made)
        } catch (...) {
            ::close(fd_);
            throw;
        }
        {
            std::lock_guard<std::mutex> lock(g_held_mu);
            g_held.insert(id_);
            g_leases[real_] = this;
        }
        // A record left behind: its holder ended without releasing (killed, crashed, power cut).
        const std::string previous = read_all();
        if (!previous.empty() && o.log)
            o.log("taking over the state " + state + " from " + describe(parse_record(previous)) +
                  ", which ended without releasing it");
        const std::string line = holder_record(o).dump() + "\n";
        if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, line.data(), line.size(), 0) != static_cast<ssize_t>(line.size())) {
            // The lock holds regardless; a refused second search then names the pid from the lock.
        }
    }
    ~SqliteLease() override {
        (void)::ftruncate(fd_, 0);  // a clean end: nothing for a successor to report
        ::close(fd_);               // drops the lock
        if (file_fd_ >= 0) ::close(file_fd_);
        std::lock_guard<std::mutex> lock(g_held_mu);
        g_held.erase(id_);
        g_leases.erase(real_);
    }

    // Locks the state file itself (kFileLockAt) when it exists and is not the file locked already
    // (made since, or replaced by --fresh). Throws UsageError when another lease holds that file,
    // which can only be through another name of it: the same name is refused by PATH.lock first.
    void lock_file() {
        struct stat st {};
        if (::stat(real_.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return;
        if (file_fd_ >= 0 && file_id_ == std::make_pair(st.st_dev, st.st_ino)) return;
        const int fd = ::open(real_.c_str(), O_RDWR | O_CLOEXEC);
        if (fd < 0) return;  // not writable: the search fails on its first write, with SQLite's reason
        struct flock fl {};
        fl.l_type = F_WRLCK;
        fl.l_whence = SEEK_SET;
        fl.l_start = kFileLockAt;
        fl.l_len = 1;
        if (::fcntl(fd, F_OFD_SETLK, &fl) != 0) {
            const int err = errno;
            ::close(fd);
            if (err != EACCES && err != EAGAIN) return;  // no OFD locks here: PATH.lock alone guards it
            throw SettingError({settings::kState}, "the state " + state_ + " is in use: another process writes the same file (" +
                                                       real_ + ") under another name, a hard link to it, and one search writes a "
                                                       "state at a time. Wait for it to finish, or give this search another "
                                                       "{store.state}." + kNothingDone);
        }
        if (file_fd_ >= 0) ::close(file_fd_);  // the file it replaced (--fresh): no longer the state
        file_fd_ = fd;
        file_id_ = {st.st_dev, st.st_ino};
    }

private:
    std::string read_all() const {
        std::string out;
        char buf[4096];
        for (off_t at = 0;;) {
            ssize_t n = ::pread(fd_, buf, sizeof buf, at);
            if (n <= 0 || out.size() > 65536) break;
            out.append(buf, static_cast<size_t>(n));
            at += n;
        }
        while (!out.empty() && (out.back() == '\n' || out.back() == '\0')) out.pop_back();
        return out;
    }

    std::string state_, real_, lock_path_;
    int fd_ = -1, file_fd_ = -1;
    std::pair<dev_t, ino_t> id_{}, file_id_{};
};

// ---- Redis: a renewed lease key ------------------------------------------------------------------

#ifdef KEVO_HAVE_REDIS
// ARGV: KEY HELD VALUE TTL_MS -> {1, previous HELD value or ""} (taken), or {0, holder, pttl} (refused).
const char* kAcquireScript = R"lua(
local cur = redis.call('GET', ARGV[1])
if cur then return {0, cur, redis.call('PTTL', ARGV[1])} end
local last = redis.call('GET', ARGV[2]) or ''
redis.call('SET', ARGV[1], ARGV[3], 'PX', ARGV[4])
redis.call('SET', ARGV[2], ARGV[3])
return {1, last}
)lua";

// Renews; retakes a lease that expired only while nobody else took it (HELD still ours). Else
// {0, the holder}: another process has run on the state since.
const char* kRenewScript = R"lua(
local cur = redis.call('GET', ARGV[1])
if cur == ARGV[3] then
  redis.call('PEXPIRE', ARGV[1], ARGV[4])
  return {1}
end
if not cur and redis.call('GET', ARGV[2]) == ARGV[3] then
  redis.call('SET', ARGV[1], ARGV[3], 'PX', ARGV[4])
  return {1}
end
return {0, cur or redis.call('GET', ARGV[2]) or ''}
)lua";

// Takes the lease from a holder known to be dead, only while it is still that holder's.
// ARGV: KEY HELD VALUE TTL_MS DEAD_VALUE -> 1 taken, 0 it changed meanwhile.
const char* kTakeFromDeadScript = R"lua(
if redis.call('GET', ARGV[1]) ~= ARGV[5] then return 0 end
redis.call('SET', ARGV[1], ARGV[3], 'PX', ARGV[4])
redis.call('SET', ARGV[2], ARGV[3])
return 1
)lua";

const char* kReleaseScript = R"lua(
if redis.call('GET', ARGV[1]) == ARGV[3] then redis.call('DEL', ARGV[1]) end
if redis.call('GET', ARGV[2]) == ARGV[3] then redis.call('DEL', ARGV[2]) end
return 1
)lua";

class RedisLease : public WriterLease {
public:
    RedisLease(const StoreLocation& w, const WriterOptions& o)
        : conn_(w), key_(w.key_prefix() + "writer"), held_(w.key_prefix() + "writer:held"),
          value_(holder_record(o).dump()), ttl_ms_(std::to_string(static_cast<int64_t>(o.redis_ttl_s * 1000))),
          period_(o.redis_ttl_s / 4), on_lost_(o.on_lost) {
        redis::Reply r = eval(kAcquireScript);
        if (r->element[0]->integer != 1) {
            const std::string current = redis::str(r->element[1]);
            const nlohmann::json holder = parse_record(current);
            // A holder on this machine whose process is gone need not be waited for until its lease expires.
            if (holder_is_dead_here(holder) &&
                conn_.command({"EVAL", kTakeFromDeadScript, "0", key_, held_, value_, ttl_ms_, current})->integer == 1) {
                if (o.log)
                    o.log("taking over the state " + w.display() + " from " + describe(holder) +
                          ", whose process is gone (its lease had not expired yet)");
                renewer_ = std::thread([this] { renew_loop(); });
                return;
            }
            const double expires = now_unix() + static_cast<double>(r->element[2]->integer) / 1000;
            throw UsageError("the state " + w.display() + " is in use: " + describe(holder) +
                             " writes it (its lease expires at " + utc(expires) +
                             " unless renewed; it renews it while it runs), and one search writes a state at a time. " +
                             join_advice(holder) + kNothingDone);
        }
        const std::string previous = redis::str(r->element[1]);
        if (!previous.empty() && o.log)
            o.log("taking over the state " + w.display() + " from " + describe(parse_record(previous)) +
                  ", whose lease expired without being released");
        renewer_ = std::thread([this] { renew_loop(); });
    }
    ~RedisLease() override {
        {
            std::lock_guard<std::mutex> lock(mu_);
            stop_ = true;
        }
        cv_.notify_all();
        renewer_.join();
        try {
            eval(kReleaseScript);
        } catch (const UsageError&) {
            // The server is gone: the lease expires by itself.
        }
    }

private:
    static std::string join_advice(const nlohmann::json& holder) {
        const std::string workers = holder.value("workers", std::string());
        if (!workers.empty())
            return "Wait for it to finish, or add GPUs to that run: its validations go through the queue " + workers +
                   ", so start `kernelevo worker --redis " + workers +
                   " --gpu N` on each GPU (or `--compile-only --arch ARCH` on a host without one).";
        return "Wait for it to finish, or stop it (Ctrl-C; a rerun resumes from the state), or give this search "
               "another prefix. (A run started with --workers QUEUE takes more GPUs through `kernelevo worker "
               "--redis QUEUE --gpu N`.)";
    }

    redis::Reply eval(const char* script) {
        return conn_.command({"EVAL", script, "0", key_, held_, value_, ttl_ms_});
    }

    void renew_loop() {
        std::unique_lock<std::mutex> lock(mu_);
        while (!cv_.wait_for(lock, std::chrono::duration<double>(period_), [this] { return stop_; })) {
            try {
                redis::Reply r = eval(kRenewScript);
                if (r->element[0]->integer == 1) continue;
                const std::string why = "another process took over this run's state: " +
                                        describe(parse_record(redis::str(r->element[1]))) +
                                        " (this one could not renew its writer lease in time); stopping";
                if (on_lost_) {
                    on_lost_(why);
                    return;
                }
                std::cerr << "\nkernelevo: error: " << why << std::endl;
                std::_Exit(2);  // two writers must never run on: what was committed stays committed
            } catch (const UsageError&) {
                // The server is unreachable for now: retry at the next period (the lease holds for the ttl).
            }
        }
    }

    redis::Connection conn_;
    std::string key_, held_, value_, ttl_ms_;
    double period_;
    std::function<void(const std::string&)> on_lost_;
    std::mutex mu_;
    std::condition_variable cv_;
    bool stop_ = false;
    std::thread renewer_;
};
#endif

}  // namespace

std::string writer_lock_path(const std::string& path) { return path + ".lock"; }

namespace detail {
void bind_writer(const std::string& path) {
    std::lock_guard<std::mutex> lock(g_held_mu);
    auto it = g_leases.find(real_state_path(path));
    if (it != g_leases.end()) it->second->lock_file();
}
}  // namespace detail

std::unique_ptr<WriterLease> acquire_writer(const std::string& location, const WriterOptions& options) {
    StoreLocation w = parse_store_location(location);
    if (!w.redis) return std::make_unique<SqliteLease>(w.path, options);
#ifdef KEVO_HAVE_REDIS
    return std::make_unique<RedisLease>(w, options);
#else
    throw UsageError("state store " + w.display() + ": this kernelevo was not built with Redis support");
#endif
}

}  // namespace kevo::store
