// The candidate process seen from the judge (judge.h): starting it in the sandbox, its first
// messages, the channel's requests (calls, buffer mappings), stopping it.
#include "judge.h"
#include "test_hooks.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace kevo_runner {

namespace {
// What a candidate process's end says about why it ended (bwrap reports 128 + signal).
std::string describe_exit(int status) {
    int sig = 0;
    if (WIFSIGNALED(status)) sig = WTERMSIG(status);
    else if (WIFEXITED(status) && WEXITSTATUS(status) > 128) sig = WEXITSTATUS(status) - 128;
    if (sig == SIGSYS)
        return "the sandbox killed the candidate process for a forbidden system call (starting programs or processes, "
               "ptrace or reading other processes' memory are not allowed)";
    if (sig) return std::string("the candidate process was killed by signal ") + std::to_string(sig) + " (" + strsignal(sig) + ")";
    if (WIFEXITED(status)) return "the candidate process exited with code " + std::to_string(WEXITSTATUS(status));
    return "the candidate process ended";
}

// Starts the candidate process (argv, env) in its own session: the channel to the judge is its
// descriptor 3, its stdout and stderr go to `output_fd`. Returns its pid.
pid_t spawn(std::vector<std::string>& argv, std::vector<std::string>& env, int channel_fd, int output_fd) {
    std::vector<char*> av, ev;
    for (auto& a : argv) av.push_back(a.data());
    av.push_back(nullptr);
    for (auto& e : env) ev.push_back(e.data());
    ev.push_back(nullptr);
    pid_t pid = fork();
    if (pid < 0) throw SetupFailure{"fork failed"};
    if (pid == 0) {
        setsid();
        dup2(channel_fd, 3);
        dup2(output_fd, 1);
        dup2(output_fd, 2);
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0) dup2(devnull, 0);
        // Nothing of the judge's leaks in, however many descriptors it has open.
        if (syscall(SYS_close_range, 4u, ~0u, 0u) != 0)
            for (long fd = 4, end = sysconf(_SC_OPEN_MAX); fd < (end > 0 ? end : 65536); ++fd) close(static_cast<int>(fd));
        execvpe(av[0], av.data(), ev.data());
        _exit(127);
    }
    return pid;
}
}  // namespace

// The candidate process: the sandbox, then runner code bringing its CUDA context up. No kernel of its
// runs before admit_candidate, so it starts without the GPU lock, beside other judges' timing.
void Judge::spawn_candidate(const Job& job) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) throw SetupFailure{"socketpair failed"};
    int out_pipe[2];
    if (pipe2(out_pipe, O_CLOEXEC) != 0) throw SetupFailure{"pipe failed"};
    std::vector<std::string> argv = candidate_argv(job);
    std::vector<std::string> env;
    for (const auto& [k, v] : job.candidate_env) env.push_back(k + "=" + v);
    pid_t pid = spawn(argv, env, sv[1], out_pipe[1]);
    close(sv[1]);
    close(out_pipe[1]);
    pid_ = pid;
    sock_ = sv[0];
    flush_id_ = proof_id_ = -1;  // a new process has mapped nothing yet
    for (auto& [set, tc] : timing_copies_) tc.arena_id = -1;  // share_copies maps it again and sets the views' ids
    warmed_up_ = false;
    output_.clear();
    read_output(out_pipe[0]);
    candidate_exe_ = argv[0];
}

// With the GPU held shared: the candidate process may calibrate and load its library (OP_GO; a
// load-only process loads unbidden). A process already gone leaves its hello, read by await_hello.
void Judge::admit_candidate(const Job& job, JobResult& r) {
    if (!job.load_only) {
        Msg go;
        go.op = OP_GO;
        (void)send_msg(sock_, go, -1, job.call_timeout_s);
    }
    await_hello(job, r, candidate_exe_);
}

// The candidate process's command line: the sandbox's prefix, then this runner as --candidate.
std::vector<std::string> Judge::candidate_argv(const Job& job) const {
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) throw SetupFailure{"cannot find the runner's own executable"};
    self[n] = 0;
    std::vector<std::string> argv = job.sandbox_prefix;
    argv.insert(argv.end(), {self, "--candidate", "--channel", "3", "--device", std::to_string(device_), "--kernel", job.kernel});
    if (!job.workdir.empty()) argv.insert(argv.end(), {"--workdir", job.workdir});
    std::string readable;
    for (const auto& p : job.readable) readable += (readable.empty() ? "" : ":") + p;
    if (!readable.empty()) argv.insert(argv.end(), {"--readable", readable});
    std::string writable;
    for (const auto& p : job.writable) writable += (writable.empty() ? "" : ":") + p;
    if (!writable.empty()) argv.insert(argv.end(), {"--writable", writable});
    if (!job.confine) argv.push_back("--no-confine");
    if (job.load_only) argv.push_back("--load-only");
    if (test_hook(kevo::EnvVar::kGateKernel)) argv.push_back("--gate-kernel");  // test builds only (validate.cpp passes it on)
    return argv;
}

// The candidate process's output (its stdout and stderr, the first 64 KiB), read while it runs.
void Judge::read_output(int rfd) {
    output_reader_ = std::thread([this, rfd] {
        char buf[4096];
        ssize_t got;
        while ((got = read(rfd, buf, sizeof buf)) > 0)
            if (output_.size() < (64u << 10)) output_.append(buf, std::min<size_t>(got, (64u << 10) - output_.size()));
        close(rfd);
    });
}

// The candidate process's first messages: its launch-cost calibration, then the loader's hello.
void Judge::await_hello(const Job& job, JobResult& r, const std::string& exe) {
    Msg hello;
    RecvStatus st = recv_msg(sock_, hello, std::max(60.0, job.call_timeout_s), nullptr);
    // First, sent by runner code before the candidate's library was loaded: what an empty call costs
    // in that process (timing_session.cu compares it with the judge's own).
    candidate_empty_us_ = 0;
    if (st == RecvStatus::ok && hello.op == OP_CALIBRATION) {
        std::vector<double> us;
        for (int i = 0; i < std::min(hello.count, kMaxBatch); ++i) us.push_back(hello.us[i]);
        candidate_empty_us_ = kevo::empty_call_cost_us(us);
        st = recv_msg(sock_, hello, std::max(60.0, job.call_timeout_s), nullptr);
    }
    if (st == RecvStatus::timeout) throw CandidateFailure{"timeout", "the candidate process did not start within the time limit (its static constructors hang?)"};
    if (st == RecvStatus::malformed || (st == RecvStatus::ok && hello.op != OP_HELLO)) {
        // A message that is not the loader's: the candidate's code wrote on the channel. The process
        // may well be alive and waiting, so it is ended, not waited for.
        kill_candidate();
        throw CandidateFailure{"rejected", "malformed message from the candidate process while loading (its code wrote on the runner's channel)"};
    }
    if (st != RecvStatus::ok) {
        int status = 0;
        waitpid(pid_, &status, 0);
        pid_ = -1;
        if (output_reader_.joinable()) output_reader_.join();
        std::string why = describe_exit(status);
        if (WIFEXITED(status) && WEXITSTATUS(status) == 127 && output_.empty()) throw SetupFailure{"cannot start the sandboxed candidate process (" + exe + ")"};
        if (output_.find("bwrap:") != std::string::npos && output_.find("kevo") == std::string::npos)
            throw SetupFailure{"the sandbox (bubblewrap) failed to start: " + output_.substr(0, 500)};
        throw CandidateFailure{why.find("sandbox killed") != std::string::npos ? "rejected" : "runtime_error",
                               why + " while loading (static constructors run at load time)"};
    }
    r.sandbox["candidate_layers"] = hello.text;
    r.sandbox["namespaces"] = !job.sandbox_prefix.empty();
    if (hello.rc == 1) throw CandidateFailure{"compile_error", hello.text};
    if (hello.rc != 0) throw SetupFailure{hello.text};
}

void Judge::kill_candidate(bool reap) {
    kill(-pid_, SIGKILL);
    kill(pid_, SIGKILL);
    int status = 0;
    if (reap) waitpid(pid_, &status, 0);
    pid_ = -1;
}

void Judge::stop_candidate(JobResult& r) {
    if (pid_ > 0) {
        Msg q;
        q.op = OP_QUIT;
        send_msg(sock_, q, -1, 1.0);
        int status = 0;
        bool reaped = false;
        for (int i = 0; i < 100 && !reaped; ++i) {  // up to 1 s to exit on its own
            if (waitpid(pid_, &status, WNOHANG) == pid_) reaped = true;
            else usleep(10000);
        }
        // Whatever it left behind dies with it: its session, and with bwrap its whole PID namespace.
        kill_candidate(!reaped);
    }
    if (sock_ >= 0) close(sock_);
    sock_ = -1;
    if (output_reader_.joinable()) output_reader_.join();
    if (!output_.empty()) r.candidate_output = output_;
}

Msg Judge::request(Msg m, double timeout_s, const char* what, int fd) {
    if (!send_msg(sock_, m, fd, std::max(1.0, timeout_s))) {
        if (errno == ETIMEDOUT) {  // alive but not reading: it is ended, not waited for
            kill_candidate();
            throw CandidateFailure{"timeout", std::string("the candidate process stopped reading the runner's channel ") + what + "; the process was killed"};
        }
        int status = 0;
        waitpid(pid_, &status, 0);
        pid_ = -1;
        throw CandidateFailure{describe_exit(status).find("sandbox killed") != std::string::npos ? "rejected" : "runtime_error",
                               describe_exit(status) + " " + what};
    }
    Msg r;
    RecvStatus st = recv_msg(sock_, r, timeout_s, nullptr);
    if (st == RecvStatus::timeout)
        throw CandidateFailure{"timeout", std::string("the kernel did not finish within ") + fmt(timeout_s) + " s " + what + " (watchdog); the process was killed"};
    if (st == RecvStatus::closed) {
        int status = 0;
        waitpid(pid_, &status, 0);
        pid_ = -1;
        std::string why = describe_exit(status);
        throw CandidateFailure{why.find("sandbox killed") != std::string::npos ? "rejected" : "runtime_error", why + " " + what};
    }
    if (st != RecvStatus::ok || r.op != OP_REPLY) throw CandidateFailure{"rejected", std::string("malformed reply from the candidate process ") + what};
    return r;
}

int Judge::map_in_candidate(const Mapping& mem) {
    Msg m;
    m.op = OP_MAP;
    m.id = next_id_++;
    m.size = mem.size;
    int fd = -1;
    std::string e = export_shared(mem, fd);
    if (!e.empty()) throw SetupFailure{"cannot share a buffer with the candidate process: " + e};
    Msg r;
    try {
        r = request(m, job_->call_timeout_s, "while mapping buffers", fd);
    } catch (...) {
        close(fd);
        throw;
    }
    close(fd);
    if (r.rc != 0) throw SetupFailure{std::string("the candidate process could not map a buffer: ") + r.text};
    return m.id;
}

void Judge::share(Tensors& t) {
    for (size_t i = 0; i < t.mem.size(); ++i)
        if (t.ids[i] < 0) t.ids[i] = map_in_candidate(t.mem[i]);
}

void Judge::unmap_in_candidate(int& id) {
    if (pid_ > 0 && id >= 0) {
        Msg m;
        m.op = OP_UNMAP;
        m.id = id;
        request(m, job_->call_timeout_s, "while unmapping buffers");
    }
    id = -1;
}

void Judge::unshare(Tensors& t) {
    if (pid_ <= 0) return;
    for (int& id : t.ids) unmap_in_candidate(id);
}

void Judge::call_candidate(const Tensors& in, const Tensors& out, int32_t flags, const std::string& when) {
    Msg call;
    call.op = OP_CALL;
    call.flags = flags;
    fill_refs(call, in, out);
    Msg r = request(call, job_->call_timeout_s, when.c_str());
    if (r.rc == -1001) throw CandidateFailure{"rejected", r.text};
    if (r.rc != 0) throw CandidateFailure{"runtime_error", "kevo_forward returned " + std::to_string(r.rc) + " (" + when + ")"};
}

Msg Judge::sync_candidate(int32_t op, const std::string& what) {
    Msg m;
    m.op = op;
    Msg r = request(m, job_->call_timeout_s, what.c_str());
    if (r.cuda_error != 0) throw CandidateFailure{"runtime_error", "CUDA error " + what + ": " + r.text};
    return r;
}

}  // namespace kevo_runner
