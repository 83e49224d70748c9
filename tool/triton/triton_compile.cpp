#include "triton/triton_compile.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "common/setting_error.h"
#include "common/error.h"
#include "common/fs.h"
#include "common/hash.h"
#include "common/process.h"
#include "sandbox/sandbox.h"
#include "triton/aot.h"
#include "triton/launch.h"

namespace kevo::triton {

namespace {

// Bump when the generated wrapper changes: cached wrappers of older versions are not reused.
const char* const kWrapperVersion = "kevo-triton-wrapper-6";
// Address-space limit of a sandboxed Triton compile (Python + Triton's LLVM reserve more than nvcc).
const long kTritonMemoryBytes = 16L << 30;

const char* const kProbeScript = R"PY(
import sys
try:
    import triton
except Exception as e:
    print("KEVO_NO_TRITON", type(e).__name__, e)
    sys.exit(0)
print("KEVO_TRITON", getattr(triton, "__version__", "unknown"))
import json, os
print("KEVO_EXE", os.path.abspath(sys.executable))  # a venv's python stays itself (its site dir, .pth files)
print("KEVO_PATH", json.dumps([p for p in sys.path if p and os.path.isdir(p)]))
print("KEVO_PREFIX", json.dumps(sorted({os.path.realpath(p) for p in (sys.prefix, sys.exec_prefix, sys.base_prefix)})))
import contextlib, io, runpy
buf = io.StringIO()
sys.argv = ["triton.tools.compile", "--help"]
try:
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
        runpy.run_module("triton.tools.compile", run_name="__main__")
except BaseException:
    pass
h = buf.getvalue()
print("KEVO_GRID", "--grid" in h)
print("KEVO_TARGET", "--target" in h)
)PY";

// `python -m triton.tools.compile ARGS`, run so that Triton 3.6 needs no GPU. Its compile.py uses
// the active driver three times: for the target (JITFunction.create_binder, even when --target is
// given), for --target itself (whose architecture it leaves a string, "90", which the NVIDIA
// backend compares with an int), and for the C type of each argument. The compile sandbox has no
// GPU, so no driver is active ("0 active drivers"). Where Triton lets one set the active driver,
// --target becomes a stand-in: the CUDA driver without its GPU-side set-up, answering with the
// target (an int architecture); --target is then not passed on.
const char* const kCompileShim = R"PY(
import runpy, sys
args = sys.argv[1:]
if "--target" in args:
    i = args.index("--target")
    backend, arch, warp = args[i + 1].split(":")
    try:
        from triton.backends.compiler import GPUTarget
        from triton.runtime.driver import driver
        from triton.backends.nvidia.driver import CudaDriver
    except ImportError:
        driver = None
    if driver is not None and hasattr(driver, "set_active") and backend == "cuda":
        class _TargetOnly(CudaDriver):  # the CUDA driver's type mapping, without its GPU-side setup
            def __init__(self):
                pass
            def get_current_target(self):
                return GPUTarget(backend, int(arch) if arch.isdigit() else arch, int(warp))
        driver.set_active(_TargetOnly())
        del args[i:i + 2]
sys.argv = ["triton.tools.compile"] + args
runpy.run_module("triton.tools.compile", run_name="__main__", alter_sys=True)
)PY";

std::string line_value(const std::string& out, const std::string& key) {
    size_t p = out.find(key + " ");
    if (p == std::string::npos) return "";
    size_t e = out.find('\n', p);
    return out.substr(p + key.size() + 1, e == std::string::npos ? std::string::npos : e - p - key.size() - 1);
}

std::string install_hint() {
    return named("The Triton backend needs Python 3 with Triton 3.x on the machine that compiles (the GPU host): "
                 "`pip install triton`, or point KERNELEVO_PYTHON (or {language.python}) at the interpreter that has "
                 "it. Nothing of Python is needed to build or run the result.");
}

std::string hint_for(const std::string& log) {
    if (log.find("No module named") != std::string::npos)
        return "\nnote: the AOT compiler executes the candidate file: import only triton and triton.language (no torch, no numpy)\n";
    if (log.find("global scratch") != std::string::npos)
        return "\nnote: kernels that need global scratch memory cannot be compiled ahead of time; avoid what needs it "
               "(e.g. device-side tensor descriptors)\n";
    if (log.find("out of resource") != std::string::npos || log.find("OutOfResources") != std::string::npos)
        return "\nnote: the kernel needs more shared memory or registers than the GPU has: use smaller blocks or fewer num_stages\n";
    return "";
}

struct Job {
    size_t launch = 0;
    bool hinted = false;
    std::string stem;  // output path stem inside aot/
    std::vector<std::string> argv;
    ProcessResult result;
};

}  // namespace

std::string python_path(const std::string& option) {
    if (!option.empty()) return option;
    if (const char* p = env(EnvVar::kPython); p && *p) return p;
    return "python3";
}

TritonInfo probe(const std::string& python_option) {
    static std::mutex mu;
    static std::map<std::string, TritonInfo> cache;
    TritonInfo info;
    info.python = python_path(python_option);
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = cache.find(info.python); it != cache.end()) return it->second;
    ProcessOptions po;
    po.argv = {info.python, "-c", kProbeScript};
    po.timeout_s = 120;
    po.env = {{"PYTHONDONTWRITEBYTECODE", "1"}};
    ProcessResult r = run_process(po);
    if (!r.started || (r.exit_code == 127 && r.out.empty()))
        throw UsageError("cannot run Python (" + info.python + "): " + (r.error.empty() ? r.describe() : r.error) +
                         ". " + install_hint());
    if (!r.ok())
        throw UsageError("Python (" + info.python + ") failed while looking for Triton: " + r.describe() + "\n" +
                         trim_python_log(r.out + r.err, 2000) + install_hint());
    if (r.out.find("KEVO_NO_TRITON") != std::string::npos)
        throw UsageError("Triton is not installed for " + info.python + " (" + line_value(r.out, "KEVO_NO_TRITON") +
                         "). " + install_hint());
    info.version = line_value(r.out, "KEVO_TRITON");
    if (line_value(r.out, "KEVO_GRID") != "True")
        throw UsageError("Triton " + info.version + " (" + info.python + ") is too old for kernelevo: its ahead-of-time compiler "
                         "(python -m triton.tools.compile) has no --grid option. Install Triton 3.0 or newer: "
                         "`pip install -U triton`.");
    info.has_target = line_value(r.out, "KEVO_TARGET") == "True";
    info.executable = line_value(r.out, "KEVO_EXE");
    if (info.executable.empty()) info.executable = info.python;
    try {
        for (const auto& p : nlohmann::json::parse(line_value(r.out, "KEVO_PATH"))) info.import_path.push_back(p.get<std::string>());
        for (const auto& p : nlohmann::json::parse(line_value(r.out, "KEVO_PREFIX"))) info.prefixes.push_back(p.get<std::string>());
    } catch (const std::exception&) {
        throw UsageError("Python (" + info.python + ") did not report its import path; output:\n" + trim_python_log(r.out + r.err, 2000));
    }
    cache[info.python] = info;
    return info;
}

std::string trim_python_log(const std::string& log, size_t max_bytes) {
    if (log.size() <= max_bytes) return log;
    size_t start = log.size() - max_bytes;
    size_t nl = log.find('\n', start);
    if (nl != std::string::npos && nl + 1 < log.size()) start = nl + 1;
    return "[... " + std::to_string(start) + " bytes of earlier output omitted ...]\n" + log.substr(start);
}

namespace {

// One triton.tools.compile run per specialization: the hinted one first (when the launch has
// hints), then the generic one.
std::vector<Job> aot_jobs(const std::vector<Launch>& launches, const TritonInfo& info, const std::string& arch) {
    std::string cc;
    for (char c : arch.substr(3))
        if (std::isdigit(static_cast<unsigned char>(c))) cc += c;
    std::vector<Job> jobs;
    for (size_t li = 0; li < launches.size(); ++li) {
        const Launch& L = launches[li];
        for (bool hinted : {true, false}) {
            if (hinted && !L.has_hints()) continue;
            Job j;
            j.launch = li;
            j.hinted = hinted;
            j.stem = "k" + std::to_string(li) + (hinted ? "h" : "g");
            j.argv = {info.executable, "-c", kCompileShim, "kernel.py", "--kernel-name", L.kernel,
                      "--out-path", "aot/" + j.stem, "--out-name", "kevo_" + j.stem,
                      "--signature", L.signature(hinted), "--grid", "kevo_grid_x,kevo_grid_y,kevo_grid_z",
                      "--num-warps", std::to_string(L.num_warps), "--num-stages", std::to_string(L.num_stages)};
            if (info.has_target) {
                j.argv.push_back("--target");
                j.argv.push_back("cuda:" + cc + ":32");
            }
            jobs.push_back(std::move(j));
        }
    }
    return jobs;
}

// The address-space limit of each AOT compile.
long aot_memory_limit(const CompileOptions& opt) { return std::max(opt.memory_bytes, kTritonMemoryBytes); }

// Runs the jobs in parallel in `workdir`. The AOT compiler executes the candidate file (untrusted,
// LLM-written Python): it runs in the same sandbox and under the same kind of limits as nvcc.
// Visible: the system, the Python installation and its import path (read-only), the work dir (the
// only writable place) and a private /tmp; no network, no home directories, an allowlisted environment.
void run_sandboxed(std::vector<Job>& jobs, const fs::path& workdir, const TritonInfo& info, const CompileOptions& opt) {
    check_sandbox_layers();
    SandboxPolicy policy;
    policy.workdir = workdir;
    policy.gpu = !info.has_target;  // a Triton without --target asks the GPU for its architecture
    // (sandbox_prefix binds each at its real place, and none that the system trees already show)
    policy.read_only.insert(policy.read_only.end(), info.prefixes.begin(), info.prefixes.end());
    std::string pythonpath;
    for (const auto& p : info.import_path) {
        policy.read_only.push_back(p);
        pythonpath += (pythonpath.empty() ? "" : ":") + p;
    }
    policy.read_only.push_back(fs::path(info.executable).parent_path());
    const std::vector<std::string> prefix = sandbox_prefix(policy);
    const auto env = sandbox_environment({{"HOME", workdir.string()},
                                          {"PYTHONDONTWRITEBYTECODE", "1"},
                                          {"PYTHONNOUSERSITE", "1"},
                                          {"PYTHONPATH", pythonpath},  // the import path the probe saw, user site included
                                          {"TRITON_CACHE_DIR", (workdir / "triton-cache").string()},
                                          {"TRITON_HOME", workdir.string()}});
    const long memory = aot_memory_limit(opt);
    std::vector<std::thread> threads;
    for (Job& j : jobs)
        threads.emplace_back([&j, &workdir, &opt, &prefix, &env, memory] {
            ProcessOptions po;
            po.argv = prefix;
            po.argv.insert(po.argv.end(), j.argv.begin(), j.argv.end());
            po.cwd = workdir;
            po.timeout_s = opt.timeout_s;
            po.exact_env = env;
            po.max_address_space = memory;
            po.max_cpu_s = static_cast<long>(opt.timeout_s) + 5;
            po.max_file_bytes = 256L << 20;
            j.result = run_process(po);
        });
    for (auto& t : threads) t.join();
}

// The compile_error of a failed AOT compile: what failed, why (a limit, or Triton's message) and
// the end of its output; sets limit_hit when a limit stopped it. Throws UsageError when Triton
// cannot be imported inside the sandbox (a setup problem, not the candidate's).
std::string failure_log(const Job& j, const Launch& L, const TritonInfo& info, const fs::path& workdir, const CompileOptions& opt,
                        bool& limit_hit) {
    std::string log = strip_dir(j.result.out + j.result.err, workdir);
    if (log.find("No module named 'triton'") != std::string::npos)
        throw UsageError("Triton " + info.version + " (" + info.python + ") cannot be imported inside the compile sandbox: is it "
                         "installed in a directory of Python's import path?\n" + trim_python_log(log, 1500));
    const std::string what = "Triton's compiler failed on " + L.kernel + " (signature \"" + L.signature(j.hinted) + "\", num_warps " +
                             std::to_string(L.num_warps) + ", num_stages " + std::to_string(L.num_stages) + ")";
    const bool memory = log.find("MemoryError") != std::string::npos || log.find("std::bad_alloc") != std::string::npos ||
                        log.find("Cannot allocate memory") != std::string::npos || log.find("out of memory") != std::string::npos;
    limit_hit = j.result.timed_out || memory || j.result.term_signal != 0;
    if (j.result.timed_out)
        return "compile_error: the compilation hit the time limit (" + std::to_string(static_cast<long>(opt.timeout_s)) +
               " s) and was killed: " + what + "\n" + trim_python_log(log, 2000);
    if (memory)
        return "compile_error: the compiler hit the memory limit (" + std::to_string(aot_memory_limit(opt) >> 20) +
               " MiB of address space per process) and was stopped: " + what + "\n" + trim_python_log(log, 2000);
    if (j.result.term_signal != 0)
        return "compile_error: the compiler was killed by a limit (" + j.result.describe() + "; CPU time, file size or memory): " + what +
               "\n" + trim_python_log(log, 2000);
    return what + ": " + j.result.describe() + "\n" + trim_python_log(log) + hint_for(log);
}

// The launches with the AOT sources that the jobs wrote into workdir/aot.
std::vector<CompiledLaunch> read_aot_output(const std::vector<Job>& jobs, const std::vector<Launch>& launches, const fs::path& workdir,
                                            const TritonInfo& info) {
    std::vector<CompiledLaunch> compiled(launches.size());
    for (size_t li = 0; li < launches.size(); ++li) compiled[li].launch = launches[li];
    for (const Job& j : jobs) {
        fs::path c_file;
        for (const auto& e : fs::directory_iterator(workdir / "aot"))
            if (e.path().filename().string().rfind(j.stem + ".", 0) == 0 && e.path().extension() == ".c") c_file = e.path();
        if (c_file.empty())
            throw UsageError("Triton " + info.version + "'s AOT compiler ran but wrote no " + j.stem +
                             ".*.c; this Triton version is not supported (Triton 3.x expected)");
        try {
            compiled[j.launch].specializations.push_back(parse_aot_source(read_file(c_file)));
        } catch (const AotFormatError& e) {
            throw UsageError("Triton " + info.version + ": " + e.what());
        }
    }
    return compiled;
}

// Compiles every specialization with Triton's AOT compiler and returns the wrapper around them
// (backend_info gets "aot_s"). A candidate's failure returns nothing and sets res.log and
// res.limit_hit; a real verdict (not a limit) is remembered in err_file.
std::optional<std::string> aot_wrapper(const std::string& source, const std::vector<Launch>& launches, const TritonInfo& info,
                                       const CompileOptions& opt, const fs::path& err_file, nlohmann::json& backend_info,
                                       CompileResult& res) {
    TempDir tmp("kernelevo-triton");
    write_file_atomic(tmp.path() / "kernel.py", source);
    fs::create_directories(tmp.path() / "aot");
    std::vector<Job> jobs = aot_jobs(launches, info, res.arch);
    auto t_aot = std::chrono::steady_clock::now();
    run_sandboxed(jobs, tmp.path(), info, opt);
    backend_info["aot_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_aot).count();
    for (const Job& j : jobs) {
        if (j.result.ok()) continue;
        res.log = failure_log(j, launches[j.launch], info, tmp.path(), opt, res.limit_hit);
        // Only a real verdict is remembered: a compile stopped by a limit is tried again next time.
        if (j.result.started && !res.limit_hit) write_file_atomic(err_file, res.log);
        return std::nullopt;
    }
    std::vector<CompiledLaunch> compiled = read_aot_output(jobs, launches, tmp.path(), info);
    try {
        const Task& task = *opt.task;
        return generate_wrapper(compiled, task,
                                "Built by kernelevo from a Triton candidate with Triton " + info.version + " for " + res.arch + " (task " +
                                    task.name + ")");
    } catch (const AotFormatError& e) {
        throw UsageError("Triton " + info.version + ": " + e.what());
    }
}

// Builds the wrapper with the CUDA path into the kernel-ABI library.
CompileResult compile_wrapper(const std::string& wrapper, const CompileOptions& opt) {
    CompileOptions co = opt;
    // The wrapper opens the driver itself; a cu* function it does not route (a Triton whose AOT
    // code calls more of the driver) fails here, not when the kernel is loaded.
    co.extra_flags.push_back("-ldl");
    // No device code in the wrapper (the cubin is data): host C++ only, 0.4 s instead of 1.5 s.
    co.extra_flags.push_back("-x");
    co.extra_flags.push_back("c++");
    co.extra_flags.push_back("-Xlinker");
    co.extra_flags.push_back("--no-undefined");
    CompileResult c = compile_kernel(wrapper, co);
    c.backend = "triton";
    c.generated_source = wrapper;
    if (!c.ok) c.log = "the .cu generated around Triton's output did not compile (please report this as a kernelevo bug):\n" + c.log;
    return c;
}

}  // namespace

CompileResult compile_triton(const std::string& source, const CompileOptions& opt) {
    auto t0 = std::chrono::steady_clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
    CompileResult res;
    res.backend = "triton";
    res.arch = normalize_arch(opt.arch);
    if (!opt.task) throw UsageError("internal error: compiling a Triton candidate needs the task (CompileOptions::task)");
    const Task& task = *opt.task;

    std::vector<Launch> launches;
    try {
        launches = parse_launches(source, task);
    } catch (const LaunchError& e) {
        res.log = std::string("launch description: ") + e.what() + "\n";
        res.seconds = elapsed();
        return res;
    }
    TritonInfo info = probe(opt.python);
    const std::string key = sha256_hex(source + "\x1e" + task.hash() + "\x1e" + res.arch + "\x1e" + info.version + "\x1e" + info.python +
                                       "\x1e" + kWrapperVersion);
    fs::path dir = cache_root() / "triton" / key.substr(0, 2);
    fs::path wrapper_file = dir / (key + ".cu"), err_file = dir / (key + ".log");
    nlohmann::json backend_info = {{"triton_version", info.version}, {"launches", launches_to_json(launches)}};

    std::optional<std::string> wrapper;
    bool aot_cached = false;
    std::error_code ec;
    if (fs::exists(wrapper_file, ec)) {
        wrapper = read_file(wrapper_file);
        aot_cached = true;
    } else if (fs::exists(err_file, ec)) {  // the same candidate failed before: same answer
        res.cached = true;
        res.log = read_file(err_file);
    } else {
        wrapper = aot_wrapper(source, launches, info, opt, err_file, backend_info, res);
        if (wrapper) write_file_atomic(wrapper_file, *wrapper);
    }
    if (!wrapper) {  // the candidate failed: res says why
        res.backend_info = backend_info;
        res.seconds = elapsed();
        return res;
    }
    CompileResult c = compile_wrapper(*wrapper, opt);
    c.backend_info = backend_info;
    c.cached = aot_cached && c.cached;
    c.seconds = elapsed();
    return c;
}

}  // namespace kevo::triton
