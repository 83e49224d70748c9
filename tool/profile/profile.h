// Profiler feedback through Nsight Compute (ncu): the command line around a program that runs a
// candidate, the parser for ncu's CSV output (--csv with --page raw or --page details), and a
// few-line summary for the next prompts (DRAM and SM throughput, achieved occupancy, registers,
// the top warp-stall reasons). Where ncu is missing, Profiler says so once and profiles nothing.
//
// The profiled program runs candidate code, which is untrusted (host code included), so ncu and the
// program run inside the sandbox as validation does (tool/sandbox): bubblewrap with the GPU devices,
// no network, a private /tmp, one fresh writable work dir and the environment allowlist; the program
// (kernelevo-profile) then confines itself (Landlock, seccomp) before it loads the candidate. Where the sandbox cannot
// host the run (no namespaces here, or --sandbox off), profiling is skipped and said once: a
// candidate is never profiled unsandboxed.
#pragma once
#include <filesystem>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/process.h"

#include "task/task.h"

namespace kevo::profile {

struct ProfileError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// The metrics asked for: a small fixed set (ncu names), plus the stall reasons below.
const std::vector<std::string>& default_metrics();
// Warp-stall reasons reported, each as smsp__average_warps_issue_stalled_<reason>_per_issue_active.ratio
// (warp-cycles stalled per issued instruction).
const std::vector<std::string>& stall_reasons();

struct ProfileOptions {
    std::string ncu;            // empty: $KERNELEVO_NCU, else ncu on PATH, else /usr/local/cuda/bin/ncu
    int launch_skip = 0;        // kernel launches to let pass before profiling (warm-up)
    int launch_count = 3;       // launches profiled
    std::string kernel_regex;   // only kernels whose name matches (ncu --kernel-name regex:...); empty: all
    bool profile_from_start = true;  // false: only launches between cudaProfilerStart/Stop (kernelevo-profile)
    double timeout_s = 300;     // ncu replays every kernel several times: slow
    std::vector<std::string> metrics;  // empty: default_metrics()
};

// The ncu executable, or "" when there is none.
std::string find_ncu(const ProfileOptions& options);
// ncu --csv --page raw --metrics ... [--launch-skip/--launch-count/--kernel-name] -- program args
std::vector<std::string> ncu_command(const std::string& ncu, const std::vector<std::string>& program_argv,
                                     const ProfileOptions& options);

struct KernelProfile {
    std::string name;      // "Kernel Name" as ncu prints it (demangled)
    std::string grid, block;
    int launches = 0;      // profiled launches averaged into `metrics`
    std::map<std::string, double> metrics;  // metric name -> mean value (duration in us, see below)
    double value(const std::string& metric, double missing = -1) const;
};

// Parses ncu's CSV (lines before the header, such as ==PROF== messages, are skipped). Launches of
// the same kernel are averaged; kernels come in order of first appearance. gpu__time_duration is
// converted to microseconds whatever unit ncu used. Throws ProfileError when there is no CSV table.
std::vector<KernelProfile> parse_ncu_csv(const std::string& text);

// A short summary, the slowest kernels first (at most `max_kernels`):
// "gelu(float const*, float*, int) [grid (4096, 1, 1), block (256, 1, 1)]: 131 us; DRAM 91% of peak,
//  SM 23%; achieved occupancy 87% (theoretical 100%); 32 registers/thread; top stalls: long_scoreboard 12.3, ..."
std::string summarize(const std::vector<KernelProfile>& kernels, size_t max_kernels = 3);

// kernelevo-profile (tool/profile/profile_main.cu), the program the profiler runs:
// $KERNELEVO_PROFILE, else the deprecated $KERNELEVO_BENCH (said once on stderr), else beside this
// executable, else the build tree's.
std::filesystem::path default_profile_program();
// kernelevo-profile's command line for a compiled candidate on shape set `set` of the task: inputs
// drawn as the task says (dtype and init kind by their table values), `calls` profiled calls after
// `warmup` unprofiled ones; it confines itself (--confine) before loading the candidate.
std::vector<std::string> profile_program_command(const std::filesystem::path& program, const std::filesystem::path& library,
                                                 const Task& task, size_t set, int warmup = 3, int calls = 1);
// The options to profile a kernelevo-profile run: its profiled range only, every launch in it.
ProfileOptions profile_program_options();

// Why the sandbox cannot host a profiled run here ("" when it can): the sandbox is off, or
// bubblewrap cannot create namespaces. One line.
std::string sandbox_refusal();

// Runs ncu around programs, inside the sandbox, and summarizes; tells `log` once when ncu is
// missing or the sandbox cannot host it.
class Profiler {
public:
    explicit Profiler(ProfileOptions options = {}, std::function<void(const std::string&)> log = {});
    bool available();  // false (said once through log) without ncu or without a sandbox for it
    // How a profiled run is started: given the process and the run's work folder. Set, the program
    // (kernelevo-profile) gets --turns FOLDER and asks there for the GPU alone around its profiled
    // calls (validate/turns.h's run_with_turns answers); unset, run_process.
    using Run = std::function<ProcessResult(const ProcessOptions&, const std::filesystem::path& turns)>;
    // The summary of one profiled run of `program_argv` in the sandbox, which shows the program
    // (argv[0]), ncu's directory and `reads` read-only; "" when unavailable. A failing ncu run
    // returns "profile failed: ..." (the search goes on without a profile).
    std::string profile(const std::vector<std::string>& program_argv,
                        const std::vector<std::filesystem::path>& reads = {}, const Run& run = {});
    const std::string& ncu() const { return ncu_; }

private:
    ProfileOptions options_;
    std::function<void(const std::string&)> log_;
    std::string ncu_;
    bool checked_ = false, said_ = false;
};

}  // namespace kevo::profile
