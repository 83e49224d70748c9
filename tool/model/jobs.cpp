#include "model/jobs.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "common/exit_code.h"
#include "evolve/stop.h"

extern char** environ;

namespace kevo::model {
namespace {

struct Running {
    size_t index;
    pid_t pid;
    std::chrono::steady_clock::time_point t0;
    bool interrupted = false;
};

// fork + exec with only async-signal-safe calls in the child; argv and paths are prepared here.
JobResult start(const Job& job, pid_t& pid) {
    JobResult r;
    std::vector<char*> argv;
    for (const auto& a : job.argv) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    std::error_code ec;
    fs::create_directories(job.out_file.parent_path(), ec);
    fs::create_directories(job.log_file.parent_path(), ec);
    const int out = ::open(job.out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const int log = ::open(job.log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    const int in = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (out < 0 || log < 0 || in < 0) {
        r.error = "cannot open " + (out < 0 ? job.out_file : job.log_file).string() + ": " + std::strerror(errno);
        for (int fd : {out, log, in})
            if (fd >= 0) ::close(fd);
        return r;
    }
    const pid_t parent = ::getpid();
    pid = ::fork();
    if (pid == 0) {
        ::setpgid(0, 0);
        ::prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (::getppid() != parent) _exit(127);
        ::dup2(in, 0);
        ::dup2(out, 1);
        ::dup2(log, 2);
        ::signal(SIGINT, SIG_DFL);
        ::execve(argv[0], argv.data(), environ);
        const char msg[] = "kernelevo: cannot start the region's search (exec failed)\n";
        (void)!::write(2, msg, sizeof msg - 1);
        _exit(127);
    }
    for (int fd : {out, log, in}) ::close(fd);
    if (pid < 0) {
        r.error = std::string("fork: ") + std::strerror(errno);
        return r;
    }
    ::setpgid(pid, pid);  // (also in the child: whichever runs first)
    r.started = true;
    return r;
}

}  // namespace

std::string JobResult::describe() const {
    if (!started) return "did not start: " + error;
    if (signal) return "signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
    return "exit code " + std::to_string(exit_code);
}

fs::path self_executable() {
    std::error_code ec;
    fs::path p = fs::read_symlink("/proc/self/exe", ec);
    return ec ? self_exe_dir() / "kernelevo" : p;
}

std::vector<std::optional<JobResult>> run_jobs(const std::vector<Job>& jobs, int parallel, const std::atomic<int>& interrupts,
                                               const JobEvents& events) {
    std::vector<std::optional<JobResult>> results(jobs.size());
    std::vector<Running> running;
    size_t next = 0;
    int forwarded = 0;
    parallel = std::max(1, parallel);
    while (running.size() > 0 || (next < jobs.size() && interrupts.load() == 0)) {
        while (interrupts.load() == 0 && next < jobs.size() && static_cast<int>(running.size()) < parallel) {
            pid_t pid = -1;
            JobResult r = start(jobs[next], pid);
            if (events.started) events.started(next);
            if (!r.started) {
                results[next] = r;
                if (events.ended) events.ended(next, r);
            } else {
                running.push_back({next, pid, std::chrono::steady_clock::now()});
            }
            ++next;
        }
        const int n = interrupts.load();
        if (n > forwarded) {  // each Ctrl-C of the parent, passed on to every running search
            for (auto& j : running) {
                ::kill(-j.pid, SIGINT);
                j.interrupted = true;
            }
            forwarded = n;
        }
        for (size_t k = 0; k < running.size();) {
            int status = 0;
            pid_t got = ::waitpid(running[k].pid, &status, WNOHANG);
            if (got != running[k].pid) {
                ++k;
                continue;
            }
            JobResult r;
            r.started = true;
            r.interrupted = running[k].interrupted;
            r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - running[k].t0).count();
            if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
            else if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
            const size_t index = running[k].index;
            running.erase(running.begin() + static_cast<long>(k));
            results[index] = r;
            if (events.ended) events.ended(index, r);
        }
        if (!running.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return results;
}

RunStatus region_status(const JobResult& r, const nlohmann::json& child_json) {
    if (!r.started) return RunStatus::failed;
    const std::string stop = child_json.is_object() ? child_json.value("stop_reason", "") : "";
    for (const auto& info : evolve::kStopReasons)
        if (info.finished && stop == info.name && (r.exit_code == kExitSuccess || r.exit_code == kExitFailed))
            return RunStatus::done;
    if (r.exit_code == kExitBatchPending || stop == evolve::stop_reason_name(evolve::StopReason::interrupted) ||
        stop == evolve::stop_reason_name(evolve::StopReason::batch))
        return RunStatus::stopped;
    if (r.interrupted && (r.signal != 0 || r.exit_code == kExitFailed)) return RunStatus::stopped;
    return RunStatus::failed;
}

}  // namespace kevo::model
