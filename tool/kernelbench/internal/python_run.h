// How `kernelevo import kernelbench` runs the importer's Python (kernelbench.cpp): sandboxed, one
// problem per process, reading its protocol lines (results, progress, fatal) from its stdout.
#pragma once
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernelbench/kernelbench.h"

namespace kevo::kernelbench {

namespace fs = std::filesystem;

// What the import needs to know of a Python: its torch ("1.13.1 cuda=False") and, to run it in the
// sandbox with its installation read-only, where it lives (as the ahead-of-time compile's probe does:
// sys.executable, the import path that becomes PYTHONPATH inside, the prefixes).
using PythonInfo = PythonInstall;

// How the importer's Python runs: the command prefix (bwrap ... --) and the environment, or the
// user's own rights under --no-sandbox.
struct Confinement {
    std::vector<std::string> prefix;
    std::optional<std::map<std::string, std::string>> env;
    std::string label;  // for import.json and the first line: "bwrap (no network, ...)" or "off (--no-sandbox)"
    fs::path library;   // the reference library as the Python (and refcheck) sees it
};

// The sandbox for one problem's Python, writable `workdir` (its private folder) and a private /tmp
// of at most `tmp_bytes` (> 0; and half the machine's memory: a tmpfs) where bwrap can size it;
// throws UsageError without bubblewrap (unless --no-sandbox or --sandbox off).
Confinement confine(const ImportOptions& o, const PythonInfo& py, const std::vector<fs::path>& readable, const fs::path& library,
                    bool gpu, const fs::path& workdir, int64_t tmp_bytes = 0);

// A refusal's reason when the sandbox stopped the problem (what it tried, the opt-out).
void note_sandbox_denial(nlohmann::json& result, bool sandboxed);

// The wrapper run as `python -c` before the importer: only the importer's own prints reach stdout.
extern const char* const kProtocolWrapper;

// What one Python process of the importer reported.
struct PythonRun {
    std::map<std::string, nlohmann::json> by_source;  // result lines, by the source path given
    std::set<std::string> repeated;                    // sources reported more than once
    std::string fatal;
    std::string exit;  // "exit code 0", "killed by signal 9 (...)", "timed out after N s"
    std::string err;   // the end of its stderr
    bool over_output = false;  // stopped for what it wrote (`exit` says what): none of its results count
};

// The bounds of one Python process of the importer.
struct PythonLimits {
    double timeout_s = 900;  // the problem's --timeout: its own alarm; the process is killed kTimeoutGrace later
    int64_t max_as = 0;      // address space, 0: unlimited
    // Its writable output: each file (RLIMIT_FSIZE) and everything under `output_dir` together (its
    // bytes, checked while it runs and once it ended, also in folders it made unreadable) at most
    // `max_output_bytes`, at most kMaxOutputEntries files and folders; and the disk holding it keeps
    // `disk_floor_bytes` free (what files deleted while open still take). 0: no bound.
    int64_t max_output_bytes = 0;
    int64_t disk_floor_bytes = 0;
    fs::path output_dir;
};
// How long a problem's Python may run past its --timeout (its alarm) before it is killed: its start
// (Python, torch) and its result's writing. A problem that ignores the alarm dies then.
constexpr double kTimeoutGrace = 30;
// The longest wait for a killed problem's sandbox to end (its processes die after the one killed):
// only a limit for one that the kill could not reach; a killed sandbox ends at once.
constexpr double kSandboxEndLimit = 120;
constexpr uintmax_t kMaxOutputEntries = 100000;

// Runs the importer's Python (argv) on `files` under `conf`; see python_run.cpp.
PythonRun run_python(const std::vector<std::string>& argv, const std::vector<std::string>& files, const Confinement& conf,
                     const PythonLimits& limits, bool quiet, std::mutex& print_mu);

// "3.2 GiB", "16.0 MiB": a bound as the import's reasons say it.
std::string gib_text(int64_t bytes);

// Newlines and runs of blanks become one space: a reason is one line.
std::string one_line(const std::string& text);

}  // namespace kevo::kernelbench
