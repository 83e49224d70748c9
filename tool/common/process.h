// Child processes with a watchdog, resource limits, captured output and a scrubbed environment.
// Everything untrusted (compilers fed LLM-written code, candidate kernels) runs through here.
#pragma once
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kevo {

struct ProcessOptions {
    std::vector<std::string> argv;           // argv[0] is looked up on PATH
    std::filesystem::path cwd;               // empty: inherit
    double timeout_s = 0;                    // 0: no watchdog
    std::map<std::string, std::string> env;  // added to / overriding the (scrubbed) environment
    size_t max_output_bytes = 4 << 20;       // per stream; the rest is dropped (and said so)
    long max_file_bytes = 1L << 30;          // RLIMIT_FSIZE
    bool new_session = true;                 // own process group, killed as a whole
    // When set, the child's whole environment (e.g. the sandbox's allowlist); otherwise the parent's
    // minus every variable that may hold a secret, plus `env`.
    std::optional<std::map<std::string, std::string>> exact_env;
    long max_address_space = 0;              // RLIMIT_AS in bytes (compilers); 0: unchanged
    long max_cpu_s = 0;                      // RLIMIT_CPU; 0: unchanged
    long max_open_files = 0;                 // RLIMIT_NOFILE; 0: unchanged
    // Once the child has exited, how long its pipes may stay open (a daemon it left holding them)
    // before the output is taken as complete: the caller never waits on an orphaned pipe.
    double exit_grace_s = 0.2;
};

struct ProcessResult {
    bool started = false;     // false: could not fork/exec (see error)
    int exit_code = -1;       // valid when exited normally
    int term_signal = 0;      // non-zero when killed by a signal
    bool timed_out = false;   // killed by the watchdog
    std::string out, err;
    double seconds = 0;
    std::string error;        // why it did not start
    bool ok() const { return started && !timed_out && term_signal == 0 && exit_code == 0; }
    // "exit code 3", "signal 11 (Segmentation fault)", "timed out after 30 s" ...
    std::string describe() const;
};

ProcessResult run_process(const ProcessOptions& options);

// A long-lived child spoken to in lines over stdin/stdout (the validator's judge). Its stderr is
// kept (the last 64 KiB). Destruction kills its whole process group.
class Subprocess {
public:
    explicit Subprocess(const ProcessOptions& options);  // throws UsageError when it cannot start
    ~Subprocess();
    Subprocess(const Subprocess&) = delete;
    Subprocess& operator=(const Subprocess&) = delete;
    enum class Read { line, timeout, closed };
    bool write_line(const std::string& line);
    Read read_line(std::string& line, double timeout_s);
    bool alive();
    void kill_now();
    // After kill_now(): reads stdout and stderr to their end (stdout's bytes dropped, stderr's kept
    // for err_tail), i.e. until every process that held them is gone, at most limit_s; true when all
    // are. The children of a process killed with SIGKILL end after it (a sandbox's processes, in a
    // PID namespace of their own, may still be in a system call that creates a file).
    bool wait_closed(double limit_s);
    std::string err_tail(size_t n) const;
    std::string describe_exit();  // after it ended: "exit code 3", "killed by signal 11 (...)"
    int pid() const { return pid_; }

private:
    int pid_ = -1, in_ = -1, out_ = -1, err_ = -1;
    std::string buf_, err_buf_;
    int status_ = 0;
    bool reaped_ = false;
    void drain_err();
};

// Kills the process groups of every child still running (registered by run_process and
// Subprocess) on SIGTERM, and on SIGINT unless a command installed its own handler, then exits.
void install_child_cleanup();

// True for environment variable names that may hold credentials (…_API_KEY, …TOKEN…, …SECRET…,
// …PASSWORD…). Such variables are removed from every child's environment.
bool is_secret_env_name(const std::string& name);

// Secrets registered here are replaced by "***" wherever redact() is applied (logs, transcripts,
// error messages, state stores).
void register_secret(const std::string& secret);
std::string redact(std::string text);

// Quotes one argument for display in a shell command line.
std::string shell_quote(const std::string& arg);
}  // namespace kevo
