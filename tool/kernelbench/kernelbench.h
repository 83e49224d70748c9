// KernelBench: `kernelevo import kernelbench` turns KernelBench problem files into task
// directories that validate without Python (a TorchScript model run by one generic C++ reference,
// the model's weights as file inputs), and verifies each import against the Python model.
#pragma once
#include "sandbox/sandbox.h"
#include "task/task.h"
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/setting_error.h"

namespace kevo::kernelbench {

struct ImportOptions {
    std::vector<std::filesystem::path> files;  // problem .py files or folders of them
    std::filesystem::path out;
    std::string python;        // empty: python3 if it has torch, else /usr/bin/python3
    int64_t max_numel = 0;     // > 0: shrink size constants until inputs + parameters hold at most this
    int jobs = 0;              // 0: min(4, cores)
    double timeout_s = 900;    // per problem (its Python is killed kTimeoutGrace, 30 s, later: internal/python_run.h)
    // What a problem's sandbox may write to its private folder on the disk of `out` (each file and all
    // together): 0, at most 64 GiB and half the disk's free space shared by the problems run at once.
    int64_t max_output_bytes = 0;
    bool quiet = false;
    // Each problem's Python runs in a sandbox of its own (tool/sandbox: bwrap, no network, writes only
    // to a private folder and a private /tmp, never to `out`, which the tool writes from the checked
    // results; no home, allowlisted environment); true runs it with the user's rights
    // (--no-sandbox, documented as unsafe). Without bwrap the import is an error, never silently unconfined.
    bool no_sandbox = false;
    // The tasks' precision policy (task.json "precision", a KEVO_PRECISION_LIST name): what their
    // reference is timed as; the importer widens the tolerance to admit the policy's own error.
    std::string precision = kevo_precision_name(KEVO_PRECISION_PYTORCH);
    // A problem as a whole model (issue 38): a model folder OUT/NAME/ (python/kernelevo/model_plan.md)
    // of region tasks made by kernelevo.export_model, instead of one task for its whole forward.
    // -1: problems under a folder named level3 (--regions: all, 1; --whole: none, 0).
    int regions = -1;
};

struct ImportSummary {
    int imported = 0, refused = 0, failed = 0;
    double seconds = 0;
    nlohmann::json report;     // also written to OUT/import.json
};

// Where the shipped data files (jit_reference.cpp, import_kernelbench.py, the importer's entry script) live.
std::filesystem::path data_dir();
// The folder holding the kernelevo Python package, whose kernelevo/kernelbench/ is the importer's code
// (and kernelevo.export_model, for problems imported as models): $KERNELEVO_PYTHON_DIR, the installed
// share/kernelevo/python beside share/kernelevo/kernelbench, or the source tree's python/ beside
// tool/kernelbench. Throws UsageError when none holds it.
std::filesystem::path python_package_dir();
// A Python with PyTorch: `python` when given (throws UsageError when it has no torch), else python3
// if it has torch, else /usr/bin/python3 (Debian's python3-torch). Returns the interpreter and
// fills `torch_version` ("2.11.0 cuda=True"); throws UsageError when none has torch.
std::string find_python(const std::string& python, std::string* torch_version = nullptr);
// A Python's installation as a sandbox must show it, read-only (what the import's own sandbox binds):
// torch ("2.11.0 cuda=True", "" without torch), sys.executable, its import path, its prefixes.
// tool/baseline runs the baseline script in the same kind of sandbox.
struct PythonInstall {
    std::string torch, executable;
    std::vector<std::string> import_path, prefixes;
};
PythonInstall python_install(const std::string& python);
// The sandbox an untrusted Python module runs in (an imported problem, tool/baseline's module): the
// Python's installation and `readable` visible read-only, `workdir` writable, the GPU's device nodes
// when `gpu`; and the environment inside (PYTHONPATH = the import path, caches in the private /tmp,
// plus `extra`). Callers add their own binds and the command after sandbox_prefix(policy).
struct PythonSandbox {
    SandboxPolicy policy;
    std::map<std::string, std::string> env;
};
PythonSandbox python_sandbox(const PythonInstall& py, const std::filesystem::path& workdir, bool gpu,
                             const std::vector<std::filesystem::path>& readable,
                             const std::map<std::string, std::string>& extra = {});
// Throws UsageError for bad usage or setup (no Python with torch, no LibTorch, reference build failure).
ImportSummary import_problems(const ImportOptions& options);

}  // namespace kevo::kernelbench
