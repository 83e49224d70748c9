#include "common/process.h"

#include "common/error.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>

extern char** environ;

namespace kevo {

namespace {
// Live children's process groups, for the signal handler (fixed slots: async-signal-safe).
constexpr int kMaxChildren = 256;
std::atomic<int> g_children[kMaxChildren];

void register_child(int pid) {
    for (auto& c : g_children) {
        int expected = 0;
        if (c.compare_exchange_strong(expected, pid)) return;
    }
}
void unregister_child(int pid) {
    for (auto& c : g_children) {
        int expected = pid;
        if (c.compare_exchange_strong(expected, 0)) return;
    }
}
void on_fatal_signal(int sig) {
    for (auto& c : g_children) {
        int pid = c.load();
        if (pid > 0) {
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
        }
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

void apply_limits(const ProcessOptions& opt) {
    struct rlimit core{0, 0};
    setrlimit(RLIMIT_CORE, &core);
    auto lim = [](int res, long v) {
        if (v <= 0) return;
        struct rlimit r{static_cast<rlim_t>(v), static_cast<rlim_t>(v)};
        setrlimit(res, &r);
    };
    lim(RLIMIT_FSIZE, opt.max_file_bytes);
    lim(RLIMIT_AS, opt.max_address_space);
    lim(RLIMIT_CPU, opt.max_cpu_s);
    lim(RLIMIT_NOFILE, opt.max_open_files);
}

std::vector<std::string> child_env(const ProcessOptions& opt) {
    std::vector<std::string> env_strings;
    if (opt.exact_env) {
        for (const auto& [k, v] : *opt.exact_env) env_strings.push_back(k + "=" + v);
        return env_strings;
    }
    for (char** e = environ; e && *e; ++e) {
        std::string kv(*e);
        auto eq = kv.find('=');
        std::string name = kv.substr(0, eq);
        if (is_secret_env_name(name) || opt.env.count(name)) continue;
        env_strings.push_back(kv);
    }
    for (const auto& [k, v] : opt.env) env_strings.push_back(k + "=" + v);
    return env_strings;
}

std::mutex g_secret_mu;
std::vector<std::string>& secrets() {
    static std::vector<std::string> s;
    return s;
}

std::string upper(std::string s) {
    for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return s;
}
}  // namespace

bool is_secret_env_name(const std::string& name) {
    const std::string u = upper(name);
    return u.find("API_KEY") != std::string::npos || u.find("APIKEY") != std::string::npos ||
           u.find("TOKEN") != std::string::npos || u.find("SECRET") != std::string::npos ||
           u.find("PASSWORD") != std::string::npos || u.find("PASSWD") != std::string::npos;
}

void register_secret(const std::string& secret) {
    if (secret.size() < 4) return;  // too short to redact meaningfully
    std::lock_guard<std::mutex> lock(g_secret_mu);
    auto& s = secrets();
    if (std::find(s.begin(), s.end(), secret) == s.end()) s.push_back(secret);
}

std::string redact(std::string text) {
    std::lock_guard<std::mutex> lock(g_secret_mu);
    for (const auto& s : secrets()) {
        for (size_t pos = text.find(s); pos != std::string::npos; pos = text.find(s, pos + 3))
            text.replace(pos, s.size(), "***");
    }
    return text;
}

std::string shell_quote(const std::string& arg) {
    if (!arg.empty() && arg.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+@%") == std::string::npos)
        return arg;
    std::string out = "'";
    for (char c : arg) {
        if (c == '\'') out += "'\\''";
        else out += c;
    }
    return out + "'";
}

std::string ProcessResult::describe() const {
    if (!started) return "could not start: " + error;
    if (timed_out) return "timed out after " + std::to_string(static_cast<long>(seconds + 0.5)) + " s and was killed";
    if (term_signal) return "killed by signal " + std::to_string(term_signal) + " (" + strsignal(term_signal) + ")";
    return "exit code " + std::to_string(exit_code);
}

namespace {
// The child after fork(): only async-signal-safe calls. Its stdout and stderr go to the pipes, stdin
// is /dev/null; an errno from chdir or exec is written to exec_fd before _exit(127).
[[noreturn]] void exec_child(const ProcessOptions& opt, int out_fd, int err_fd, int exec_fd, const std::string& cwd,
                             char** argv, char** envp) {
    if (opt.new_session) setsid();
    dup2(out_fd, 1);
    dup2(err_fd, 2);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    apply_limits(opt);
    if (!cwd.empty() && chdir(cwd.c_str()) != 0) {
        int e = errno;
        (void)!write(exec_fd, &e, sizeof e);
        _exit(127);
    }
    execvpe(argv[0], argv, envp);
    int e = errno;
    (void)!write(exec_fd, &e, sizeof e);
    _exit(127);
}

// Reads the child's stdout and stderr into r.out and r.err (each up to opt.max_output_bytes, then
// marked truncated) until both close and it has exited, its exit grace has passed, or its time is up
// (then it is killed and r.timed_out set); closes both. True when it was reaped (status set).
// Everything the child wrote before it exited is read whatever the grace: the bytes in a pipe when
// it is reaped are owed, and only a pipe with nothing owed may be left to the grace (a daemon it
// left holding it). On a loaded machine this process may lose the CPU for longer than the grace
// between the reaping and its reads; the output must not depend on that.
bool collect_output(pid_t pid, int out_fd, int err_fd, const ProcessOptions& opt,
                    std::chrono::steady_clock::time_point t0, ProcessResult& r, int& status) {
    struct pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
    std::string* bufs[2] = {&r.out, &r.err};
    bool truncated[2] = {false, false};
    int open_fds = 2;
    char buf[65536];
    auto deadline = t0 + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                             std::chrono::duration<double>(opt.timeout_s));
    bool reaped = false;
    auto exited_at = std::chrono::steady_clock::now();
    int owed[2] = {0, 0};  // bytes each pipe held when the child was reaped, not read yet
    while (true) {
        int wait_ms = 200;
        if (opt.timeout_s > 0) {
            auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
            if (left <= 0) {
                r.timed_out = true;
                kill(opt.new_session ? -pid : pid, SIGKILL);
                kill(pid, SIGKILL);
                break;
            }
            wait_ms = static_cast<int>(std::min<long long>(left, 200));
        }
        if (open_fds == 0) {
            if (reaped) break;
            pid_t w = waitpid(pid, &status, WNOHANG);
            if (w == pid) {
                reaped = true;
                break;
            }
            poll(nullptr, 0, std::min(wait_ms, 20));
            continue;
        }
        if (!reaped && waitpid(pid, &status, WNOHANG) == pid) {
            reaped = true;
            exited_at = std::chrono::steady_clock::now();
            for (int i = 0; i < 2; ++i)
                if (fds[i].fd >= 0 && ioctl(fds[i].fd, FIONREAD, &owed[i]) != 0) owed[i] = 0;
        }
        const bool drained = owed[0] <= 0 && owed[1] <= 0;
        if (reaped && drained &&
            std::chrono::steady_clock::now() - exited_at > std::chrono::duration<double>(opt.exit_grace_s))
            break;
        if (reaped) wait_ms = std::min(wait_ms, 20);
        int n = poll(fds, 2, wait_ms);
        if (n < 0 && errno != EINTR) break;
        for (int i = 0; i < 2; ++i) {
            if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            ssize_t got = read(fds[i].fd, buf, sizeof buf);
            if (got <= 0) {
                close(fds[i].fd);
                fds[i].fd = -1;
                owed[i] = 0;
                --open_fds;
                continue;
            }
            owed[i] -= static_cast<int>(got);
            if (bufs[i]->size() < opt.max_output_bytes) {
                bufs[i]->append(buf, std::min<size_t>(static_cast<size_t>(got), opt.max_output_bytes - bufs[i]->size()));
            } else {
                truncated[i] = true;
            }
        }
    }
    for (auto& f : fds)
        if (f.fd >= 0) close(f.fd);
    for (int i = 0; i < 2; ++i)
        if (truncated[i]) bufs[i]->append("\n[... output truncated ...]\n");
    return reaped;
}
}  // namespace

ProcessResult run_process(const ProcessOptions& opt) {
    ProcessResult r;
    if (opt.argv.empty()) {
        r.error = "empty command";
        return r;
    }
    // Build argv and envp before fork: only async-signal-safe calls may follow it.
    std::vector<char*> argv;
    for (const auto& a : opt.argv) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    std::vector<std::string> env_strings = child_env(opt);
    std::vector<char*> envp;
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::string cwd = opt.cwd.string();

    int out_pipe[2], err_pipe[2], exec_pipe[2];
    if (pipe2(out_pipe, O_CLOEXEC) || pipe2(err_pipe, O_CLOEXEC) || pipe2(exec_pipe, O_CLOEXEC)) {
        r.error = std::string("pipe: ") + std::strerror(errno);
        return r;
    }
    auto t0 = std::chrono::steady_clock::now();
    pid_t pid = fork();
    if (pid < 0) {
        r.error = std::string("fork: ") + std::strerror(errno);
        return r;
    }
    if (pid == 0) exec_child(opt, out_pipe[1], err_pipe[1], exec_pipe[1], cwd, argv.data(), envp.data());
    close(out_pipe[1]);
    close(err_pipe[1]);
    close(exec_pipe[1]);
    int exec_errno = 0;
    if (read(exec_pipe[0], &exec_errno, sizeof exec_errno) == sizeof exec_errno) {
        close(exec_pipe[0]);
        close(out_pipe[0]);
        close(err_pipe[0]);
        waitpid(pid, nullptr, 0);
        r.error = opt.argv[0] + ": " + std::strerror(exec_errno);
        return r;
    }
    close(exec_pipe[0]);
    r.started = true;
    register_child(pid);

    int status = 0;
    const bool reaped = collect_output(pid, out_pipe[0], err_pipe[0], opt, t0, r, status);
    if (!reaped) waitpid(pid, &status, 0);
    // The child's process group may still hold grandchildren (a candidate's stray threads/processes).
    if (opt.new_session) kill(-pid, SIGKILL);
    unregister_child(pid);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!r.timed_out) {
        if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
        else if (WIFSIGNALED(status)) r.term_signal = WTERMSIG(status);
    }
    return r;
}

void install_child_cleanup() {
    struct sigaction sa{};
    sa.sa_handler = on_fatal_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGHUP, &sa, nullptr);
    struct sigaction old{};
    sigaction(SIGINT, nullptr, &old);
    if (old.sa_handler == SIG_DFL) sigaction(SIGINT, &sa, nullptr);
}

Subprocess::Subprocess(const ProcessOptions& opt) {
    if (opt.argv.empty()) throw UsageError("empty command");
    std::vector<char*> argv;
    for (const auto& a : opt.argv) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    std::vector<std::string> env_strings = child_env(opt);
    std::vector<char*> envp;
    for (auto& e : env_strings) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::string cwd = opt.cwd.string();
    int in_pipe[2], out_pipe[2], err_pipe[2];
    if (pipe2(in_pipe, O_CLOEXEC) || pipe2(out_pipe, O_CLOEXEC) || pipe2(err_pipe, O_CLOEXEC))
        throw UsageError(std::string("pipe: ") + std::strerror(errno));
    pid_ = fork();
    if (pid_ < 0) throw UsageError(std::string("fork: ") + std::strerror(errno));
    if (pid_ == 0) {
        if (opt.new_session) setsid();
        dup2(in_pipe[0], 0);
        dup2(out_pipe[1], 1);
        dup2(err_pipe[1], 2);
        apply_limits(opt);
        if (!cwd.empty() && chdir(cwd.c_str()) != 0) _exit(127);
        execvpe(argv[0], argv.data(), envp.data());
        _exit(127);
    }
    close(in_pipe[0]);
    close(out_pipe[1]);
    close(err_pipe[1]);
    in_ = in_pipe[1];
    out_ = out_pipe[0];
    err_ = err_pipe[0];
    fcntl(err_, F_SETFL, O_NONBLOCK);
    register_child(pid_);
}

Subprocess::~Subprocess() {
    kill_now();
    if (in_ >= 0) close(in_);
    if (out_ >= 0) close(out_);
    if (err_ >= 0) close(err_);
}

void Subprocess::kill_now() {
    if (pid_ > 0 && !reaped_) {
        kill(-pid_, SIGKILL);
        kill(pid_, SIGKILL);
        waitpid(pid_, &status_, 0);
        reaped_ = true;
        unregister_child(pid_);
    }
}

bool Subprocess::alive() {
    if (reaped_) return false;
    if (waitpid(pid_, &status_, WNOHANG) == pid_) {
        reaped_ = true;
        kill(-pid_, SIGKILL);
        unregister_child(pid_);
    }
    return !reaped_;
}

std::string Subprocess::describe_exit() {
    if (!reaped_) return "still running";
    if (WIFSIGNALED(status_)) return "killed by signal " + std::to_string(WTERMSIG(status_)) + " (" + strsignal(WTERMSIG(status_)) + ")";
    return "exit code " + std::to_string(WEXITSTATUS(status_));
}

void Subprocess::drain_err() {
    char buf[8192];
    ssize_t n;
    while ((n = read(err_, buf, sizeof buf)) > 0) {
        err_buf_.append(buf, n);
        if (err_buf_.size() > (64u << 10)) err_buf_.erase(0, err_buf_.size() - (64u << 10));
    }
}

bool Subprocess::wait_closed(double limit_s) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(limit_s);
    for (;;) {
        int* open[2] = {nullptr, nullptr};
        struct pollfd fds[2];
        int n = 0;
        for (int* fd : {&out_, &err_})
            if (*fd >= 0) {
                open[n] = fd;
                fds[n++] = {*fd, POLLIN, 0};
            }
        if (n == 0) return true;
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
        if (left <= 0) return false;
        if (poll(fds, n, static_cast<int>(std::min<long long>(left, 1000))) < 0 && errno != EINTR) return false;
        for (int i = 0; i < n; ++i) {
            if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            char buf[65536];
            const ssize_t got = read(fds[i].fd, buf, sizeof buf);
            if (got > 0 && open[i] == &err_) {
                err_buf_.append(buf, got);
                if (err_buf_.size() > (64u << 10)) err_buf_.erase(0, err_buf_.size() - (64u << 10));
            }
            if (got > 0 || (got < 0 && (errno == EAGAIN || errno == EINTR))) continue;
            close(*open[i]);
            *open[i] = -1;
        }
    }
}

std::string Subprocess::err_tail(size_t n) const { return err_buf_.size() <= n ? err_buf_ : err_buf_.substr(err_buf_.size() - n); }

bool Subprocess::write_line(const std::string& line) {
    std::string data = line + "\n";
    size_t off = 0;
    signal(SIGPIPE, SIG_IGN);
    while (off < data.size()) {
        ssize_t n = write(in_, data.data() + off, data.size() - off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        off += n;
    }
    return true;
}

Subprocess::Read Subprocess::read_line(std::string& line, double timeout_s) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (true) {
        auto nl = buf_.find('\n');
        if (nl != std::string::npos) {
            line = buf_.substr(0, nl);
            buf_.erase(0, nl + 1);
            return Read::line;
        }
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
        if (left <= 0) return Read::timeout;
        struct pollfd fds[2] = {{out_, POLLIN, 0}, {err_, POLLIN, 0}};
        int n = poll(fds, 2, static_cast<int>(std::min<long long>(left, 1000)));
        if (n < 0 && errno != EINTR) return Read::closed;
        if (fds[1].revents & POLLIN) drain_err();
        if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            char buf[65536];
            ssize_t got = read(out_, buf, sizeof buf);
            if (got <= 0) {
                drain_err();
                alive();
                return Read::closed;
            }
            buf_.append(buf, got);
        }
    }
}

}  // namespace kevo
