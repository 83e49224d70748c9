#include "common/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>

extern char** environ;

namespace kevo {

namespace {
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
    std::vector<std::string> env_strings;
    for (char** e = environ; e && *e; ++e) {
        std::string kv(*e);
        auto eq = kv.find('=');
        std::string name = kv.substr(0, eq);
        if (is_secret_env_name(name) || opt.env.count(name)) continue;
        env_strings.push_back(kv);
    }
    for (const auto& [k, v] : opt.env) env_strings.push_back(k + "=" + v);
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
    if (pid == 0) {
        if (opt.new_session) setsid();
        dup2(out_pipe[1], 1);
        dup2(err_pipe[1], 2);
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0) dup2(devnull, 0);
        struct rlimit core{0, 0};
        setrlimit(RLIMIT_CORE, &core);
        if (opt.max_file_bytes > 0) {
            struct rlimit fsz{static_cast<rlim_t>(opt.max_file_bytes), static_cast<rlim_t>(opt.max_file_bytes)};
            setrlimit(RLIMIT_FSIZE, &fsz);
        }
        if (!cwd.empty() && chdir(cwd.c_str()) != 0) {
            int e = errno;
            (void)!write(exec_pipe[1], &e, sizeof e);
            _exit(127);
        }
        execvpe(argv[0], argv.data(), envp.data());
        int e = errno;
        (void)!write(exec_pipe[1], &e, sizeof e);
        _exit(127);
    }
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

    struct pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
    std::string* bufs[2] = {&r.out, &r.err};
    bool truncated[2] = {false, false};
    int open_fds = 2;
    char buf[65536];
    auto deadline = t0 + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                             std::chrono::duration<double>(opt.timeout_s));
    int status = 0;
    bool reaped = false;
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
            pid_t w = waitpid(pid, &status, WNOHANG);
            if (w == pid) {
                reaped = true;
                break;
            }
            poll(nullptr, 0, std::min(wait_ms, 20));
            continue;
        }
        int n = poll(fds, 2, wait_ms);
        if (n < 0 && errno != EINTR) break;
        for (int i = 0; i < 2; ++i) {
            if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            ssize_t got = read(fds[i].fd, buf, sizeof buf);
            if (got <= 0) {
                close(fds[i].fd);
                fds[i].fd = -1;
                --open_fds;
                continue;
            }
            if (bufs[i]->size() < opt.max_output_bytes) {
                bufs[i]->append(buf, std::min<size_t>(static_cast<size_t>(got), opt.max_output_bytes - bufs[i]->size()));
            } else {
                truncated[i] = true;
            }
        }
    }
    for (auto& f : fds)
        if (f.fd >= 0) close(f.fd);
    if (!reaped) waitpid(pid, &status, 0);
    // The child's process group may still hold grandchildren (a candidate's stray threads/processes).
    if (opt.new_session) kill(-pid, SIGKILL);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!r.timed_out) {
        if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
        else if (WIFSIGNALED(status)) r.term_signal = WTERMSIG(status);
    }
    for (int i = 0; i < 2; ++i)
        if (truncated[i]) bufs[i]->append("\n[... output truncated ...]\n");
    return r;
}

}  // namespace kevo
