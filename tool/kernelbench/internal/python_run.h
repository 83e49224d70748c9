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

// The sandbox for one problem's Python, writable `workdir` (its private folder); throws UsageError
// without bubblewrap (unless --no-sandbox or --sandbox off).
Confinement confine(const ImportOptions& o, const PythonInfo& py, const std::vector<fs::path>& readable, const fs::path& library,
                    bool gpu, const fs::path& workdir);

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
};

// Runs the importer's Python (argv) on `files` under `conf`; see python_run.cpp.
PythonRun run_python(const std::vector<std::string>& argv, const std::vector<std::string>& files, const Confinement& conf,
                     double timeout_s, int64_t max_as, bool quiet, std::mutex& print_mu);

// Newlines and runs of blanks become one space: a reason is one line.
std::string one_line(const std::string& text);

}  // namespace kevo::kernelbench
