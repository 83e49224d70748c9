// The sandbox for untrusted code: every process that compiles or loads a candidate runs inside it.
//
// Layers, each used where the kernel allows it (`layers()` says which are active):
//   namespaces  bubblewrap (bwrap): no network, own PID view (no parent's /proc; every process of
//               the sandbox dies with it), own IPC/UTS, read-only system directories, a private /tmp
//               and one writable work dir, no home directories, all capabilities dropped;
//   seccomp     (in the candidate process, after CUDA is up) no exec, no fork (threads only), no
//               ptrace or cross-process memory access, no sockets;
//   landlock    (in the candidate process) writes only to its work dir, reads only system paths;
//   rlimits     address space (compilers), CPU time, processes, open files, file size;
//   environment an allowlist (what nvcc and CUDA need), never the parent's secrets.
// Mode: `auto` uses what is available and says once which layers are missing; `require` makes a
// missing layer an error; `off` runs unconfined (tests of the sandbox itself, debugging).
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "common/setting_error.h"

namespace kevo {

enum class SandboxMode { automatic, require, off };
SandboxMode parse_sandbox_mode(const std::string& s);  // auto | require | off; throws SettingError
const char* sandbox_mode_name(SandboxMode m);

struct SandboxLayers {
    bool namespaces = false;  // bwrap works here
    bool seccomp = false;     // the kernel accepts seccomp filters
    bool landlock = false;    // the kernel has Landlock (ABI >= 1)
    int landlock_abi = 0;
    bool tmpfs_size = false;  // bwrap sizes a tmpfs (--size, bubblewrap 0.7 and later)
    std::string bwrap;        // its path when found
    std::string why_not;      // what is missing and why, one line per layer
    std::string describe() const;  // "namespaces (bwrap 0.8.0), seccomp, landlock ABI 7"
};

// Probed once per process (bwrap is tried for real).
const SandboxLayers& sandbox_layers();

// The process-wide mode: set from --sandbox (or $KERNELEVO_SANDBOX) by the CLI.
void set_sandbox_mode(SandboxMode m);
SandboxMode sandbox_mode();
// In `require` mode throws UsageError naming the missing layers; in `auto` mode prints a note once
// (stderr) when a layer is missing. Called before the first sandboxed process starts.
void check_sandbox_layers();

struct SandboxPolicy {
    std::filesystem::path workdir;                 // the only writable place besides a private /tmp
    std::vector<std::filesystem::path> read_only;  // extra paths visible read-only (files or dirs; bound
                                                   // at their real place unless a system tree shows it)
    bool gpu = false;                              // expose /dev/nvidia* (candidate processes)
    bool keep_fds = false;                         // inherited fds stay open (bwrap keeps them anyway)
    int64_t tmp_bytes = 0;                         // > 0: the private /tmp's size (a tmpfs, in memory), where
                                                   // bwrap can set it (SandboxLayers::tmpfs_size); 0: its default
};

// The command prefix (bwrap and its arguments, ending in "--") that runs argv inside the sandbox,
// or an empty vector when namespaces are unavailable or the mode is off.
std::vector<std::string> sandbox_prefix(const SandboxPolicy& policy);

// The environment a sandboxed child gets: an allowlist of the parent's variables (PATH, locale,
// CUDA_*, NVIDIA_*, NCCL_*, TORCH_*, LD_LIBRARY_PATH, ...; of KERNELEVO_* only common/settings.h's table
// and the tests' hooks), never a variable that may hold a secret (by its name: *KEY, *TOKEN*,
// *SECRET*, *PASSW*, *CREDENTIAL*, ...; or by its value: a URL with a user or password, a registered
// secret), plus `extra`. HOME and TMPDIR point into the sandbox.
std::map<std::string, std::string> sandbox_environment(const std::map<std::string, std::string>& extra = {});
// True for a variable name that the allowlist lets through (its value is checked too: sandbox_environment).
bool env_allowed(const std::string& name);

}  // namespace kevo
