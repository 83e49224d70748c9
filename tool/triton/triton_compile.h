// Triton's compile behind the candidate-language seam (compile/language.h; its language is
// backends.h's, chosen by compile_candidate() in language/registry.h): a Triton candidate (one Python file, see launch.h) is
// compiled ahead of time by Triton (python -m triton.tools.compile, one process per
// specialization, in parallel, through run_process like nvcc) into C with the cubin embedded,
// wrapped into a kernel-ABI .cu (aot.h) and compiled by the CUDA path (the wrapper opens the CUDA
// driver at run time; nothing links libcuda). The wrapper is
// cached by content hash (source, task, architecture, Triton version), as is a failed AOT compile.
#pragma once
#include <string>
#include <vector>

#include "compile/compile.h"

namespace kevo::triton {

struct TritonInfo {
    std::string python;        // the interpreter used
    std::string version;       // triton.__version__, e.g. "3.6.0"
    bool has_target = false;   // compile.py takes --target (compiles without a GPU)
    std::string executable;    // sys.executable (what runs inside the sandbox)
    std::vector<std::string> import_path;  // sys.path (existing dirs): PYTHONPATH inside the sandbox
    std::vector<std::string> prefixes;     // sys.prefix and friends: visible (read-only) inside the sandbox
};

// The Python interpreter: `option`, else $KERNELEVO_PYTHON, else python3.
std::string python_path(const std::string& option);

// Finds Triton under that Python and checks that its AOT compiler takes --grid (Triton 3.x).
// Cached per interpreter. Throws UsageError (exit 2) saying what to install or set.
TritonInfo probe(const std::string& python_option);

// Compiles a Triton candidate. A broken launch description or a Triton compile error
// is a failed CompileResult (the log says what to fix); a missing Triton throws UsageError.
// Triton's AOT compiler executes the candidate file, so it runs sandboxed (tool/sandbox: bwrap, no
// network, private /tmp, the work dir as the only writable place, an allowlisted environment) with
// limits on time (options.timeout_s), address space, CPU time and file size; a compile stopped by
// a limit is a compile_error naming the limit and is not cached.
CompileResult compile_triton(const std::string& source, const CompileOptions& options);

// Keeps the end of a Python traceback (where the error is) within max_bytes.
std::string trim_python_log(const std::string& log, size_t max_bytes = 6000);

}  // namespace kevo::triton
