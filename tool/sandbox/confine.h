// In-process confinement for the process that loads candidate code (kernelevo-runner's candidate
// side). Called after CUDA is initialised and before the candidate library is opened, so static
// constructors already run confined. Torch-free and CUDA-free: plain Linux system calls.
#pragma once
#include <string>
#include <vector>

namespace kevo {

struct ConfineOptions {
    std::vector<std::string> writable;   // Landlock: directories writable (the work dir)
    std::vector<std::string> readable;   // Landlock: directories readable (system paths)
    bool seccomp = true;
    bool landlock = true;
    // New sockets allowed (seccomp): only for a process inside the sandbox's network namespace,
    // whose profiler (ncu's injected library) talks to its host process over them.
    bool sockets = false;
    long cpu_seconds = 0;                // RLIMIT_CPU, 0: unchanged
    long open_files = 256;               // RLIMIT_NOFILE
    long file_bytes = 64L << 20;         // RLIMIT_FSIZE
};

struct ConfineReport {
    bool seccomp = false, landlock = false, no_new_privs = false, caps_dropped = false;
    std::string notes;  // why a layer is off
};

// Applies the layers; never throws. A forbidden call afterwards either fails (EPERM) or, for exec,
// fork and ptrace, kills the process with SIGSYS.
ConfineReport confine_current_process(const ConfineOptions& options);

// Forbids, on every thread of the calling process (seccomp, EPERM), what would let code run later
// on its own: new threads, interval and POSIX timers, signals on I/O or performance events. The
// process that loads candidate code calls it once its own threads run and before the library is
// opened: a kernel's work must then be launched from within kevo_forward, inside the timed call
// (validate/runner/context_fence.h), not by a thread or a signal handler after the call has ended.
// Returns false (with the reason in `notes`) when the filter could not be loaded.
bool forbid_new_threads(std::string& notes);

// What a confined process that loads candidate code may read (Landlock): the system directories
// (/usr, /lib*, /bin, /sbin, /opt, /sys, /dev), the loader's and CUDA's files in /etc, the
// directories named in LD_LIBRARY_PATH, and /proc: all of it for a process inside the sandbox's
// namespaces (its /proc is its own), otherwise (whole_proc false) only its own entry and the
// system-wide files CUDA reads (/proc/driver, cpuinfo, meminfo, sys).
std::vector<std::string> system_readable_paths(bool whole_proc = true);

// The signal a seccomp kill ends a process with.
constexpr int kSandboxKillSignal = 31;  // SIGSYS

}  // namespace kevo
