// Child processes with a watchdog, resource limits, captured output and a scrubbed environment.
// Everything untrusted (compilers fed LLM-written code, candidate kernels) runs through here.
#pragma once
#include <filesystem>
#include <map>
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
