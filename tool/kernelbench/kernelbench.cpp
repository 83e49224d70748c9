// KernelBench import (kernelbench.h): the problems' Python, sandboxed, turned into task directories.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <mutex>
#include <optional>
#include <regex>
#include <sstream>
#include <thread>

#include <unistd.h>

#include "common/error.h"
#include "common/fs.h"
#include "common/process.h"
#include "kernelbench/kernelbench.h"
#include "reference/internal/torch_config.h"
#include "reference/reference.h"
#include "sandbox/sandbox.h"
#include "task/task.h"
#include "validate/gpu_lock.h"
#include "validate/validate.h"

namespace kevo::kernelbench {

namespace {

const char* kReferenceName = "kernelbench_reference.cpp";

fs::path refcheck_path() {
    fs::path beside = self_exe_dir() / "kernelevo-refcheck";
    if (fs::exists(beside)) return beside;
#ifdef KEVO_BUILD_REFCHECK
    if (fs::exists(KEVO_BUILD_REFCHECK)) return KEVO_BUILD_REFCHECK;
#endif
    throw UsageError("kernelevo-refcheck not found beside " + self_exe_dir().string() + " (reinstall kernelevo)");
}

// What the import needs to know of a Python: its torch ("1.13.1 cuda=False") and, to run it in the
// sandbox with its installation read-only, where it lives (as the Triton compile's probe does:
// sys.executable, the import path that becomes PYTHONPATH inside, the prefixes).
struct PythonInfo {
    std::string torch;  // "" when it has no torch
    std::string executable;
    std::vector<std::string> import_path, prefixes;
};

const char* const kProbeScript = R"PY(
import json, os, sys, torch
print(json.dumps({"torch": "%s cuda=%s" % (torch.__version__, torch.cuda.is_available()),
                  "exe": os.path.abspath(sys.executable),
                  "path": [p for p in sys.path if p and os.path.isdir(p)],
                  "prefix": sorted({os.path.realpath(p) for p in (sys.prefix, sys.exec_prefix, sys.base_prefix)})}))
)PY";

PythonInfo probe_python(const std::string& python) {
    static std::mutex mu;
    static std::map<std::string, PythonInfo> cache;
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = cache.find(python); it != cache.end()) return it->second;
    ProcessOptions po;
    po.argv = {python, "-c", kProbeScript};
    po.timeout_s = 120;
    po.env = {{"PYTHONDONTWRITEBYTECODE", "1"}};
    ProcessResult r = run_process(po);
    PythonInfo info;
    if (r.ok()) {
        std::string last = r.out.substr(0, r.out.find_last_not_of("\r\n") + 1);
        last = last.substr(last.find_last_of('\n') + 1);
        try {
            auto j = nlohmann::json::parse(last);
            info.torch = j.at("torch").get<std::string>();
            info.executable = j.at("exe").get<std::string>();
            info.import_path = j.at("path").get<std::vector<std::string>>();
            info.prefixes = j.at("prefix").get<std::vector<std::string>>();
        } catch (const std::exception&) {
            info = PythonInfo{};
        }
    }
    cache[python] = info;
    return info;
}

std::vector<fs::path> expand(const std::vector<fs::path>& inputs) {
    std::vector<fs::path> files;
    for (const auto& p : inputs) {
        std::error_code ec;
        if (fs::is_directory(p, ec)) {
            std::vector<fs::path> in_dir;
            for (const auto& e : fs::directory_iterator(p))
                if (e.path().extension() == ".py") in_dir.push_back(e.path());
            if (in_dir.empty()) throw UsageError(p.string() + ": no .py problem files in this folder");
            std::sort(in_dir.begin(), in_dir.end());
            files.insert(files.end(), in_dir.begin(), in_dir.end());
        } else if (fs::is_regular_file(p, ec)) {
            files.push_back(p);
        } else {
            throw UsageError(p.string() + ": no such problem file or folder");
        }
    }
    return files;
}

// The task name the importer gives a problem file (import_kernelbench.py: task_name), for problems
// it could not report on: kb<level>_<stem>, e.g. kb1_19_ReLU.
std::string problem_task_name(const fs::path& file) {
    std::smatch m;
    const std::string abs = fs::absolute(file).string();
    std::string name = std::regex_search(abs, m, std::regex("level[_-]?([0-9]+)")) ? "kb" + m[1].str() + "_" : "kb_";
    for (char c : file.stem().string()) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    name = std::regex_replace(name, std::regex("_+$"), "");
    return name;
}

// Newlines and runs of blanks become one space: a reason is one line.
std::string one_line(const std::string& text) {
    std::string out;
    for (char c : text) {
        bool blank = c == '\n' || c == '\r' || c == '\t' || c == ' ';
        if (blank && (out.empty() || out.back() == ' ')) continue;
        out += blank ? ' ' : c;
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out;
}

std::string fmt_seconds(double s) {
    char buf[32];
    long t = static_cast<long>(s + 0.5);
    if (t >= 60) std::snprintf(buf, sizeof buf, "%ldm%02lds", t / 60, t % 60);
    else std::snprintf(buf, sizeof buf, "%.1fs", s);
    return buf;
}

// How the importer's Python runs: the command prefix (bwrap ... --) and the environment, or the
// user's own rights under --no-sandbox.
struct Confinement {
    std::vector<std::string> prefix;
    std::optional<std::map<std::string, std::string>> env;
    std::string label;  // for import.json and the first line: "bwrap (no network, ...)" or "off (--no-sandbox)"
    fs::path library;   // the reference library as the Python (and refcheck) sees it
};

// Where the sandbox shows the reference library's folder: it is built under the user's cache
// (~/.cache/kernelevo), and a bind at its real place would make the home directory's path appear.
const char* const kLibraryMount = "/run/kernelevo-reference";

const char* const kSandboxed =
    "no network, writes only to the output dir and a private /tmp, no home directory, allowlisted environment, "
    "Python and problem files read-only";

// Problem files are untrusted Python: the importer runs them in the same sandbox as a candidate's
// compile (tool/sandbox), never silently without it. Visible read-only: the system, the Python
// installation and its import path, LibTorch, the importer's files, kernelevo-refcheck and the
// reference library it loads (at kLibraryMount), the problem files; writable: the output dir (the
// tasks) and a private /tmp (the verification tensors: --scratch /tmp; /dev/shm is the sandbox's own too).
Confinement confine(const ImportOptions& o, const PythonInfo& py, const std::vector<fs::path>& readable, const fs::path& library,
                     bool gpu) {
    Confinement c;
    c.library = library;
    if (o.no_sandbox || sandbox_mode() == SandboxMode::off) {
        c.label = o.no_sandbox ? "off (--no-sandbox)" : "off (--sandbox off)";
        return c;
    }
    const SandboxLayers& l = sandbox_layers();
    if (!l.namespaces)
        throw UsageError("the import runs each problem file (untrusted Python) in a sandbox, which needs bubblewrap:\n" + l.why_not +
                         "Install it (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap) and allow user "
                         "namespaces, or pass --no-sandbox to run the problem files with your own rights (unsafe: only for "
                         "files you trust)");
    SandboxPolicy policy;
    policy.workdir = fs::weakly_canonical(fs::absolute(o.out));  // as import_problems gives it to the Python
    policy.gpu = gpu;
    std::string pythonpath;
    for (const auto& p : py.import_path) {
        policy.read_only.push_back(p);
        pythonpath += (pythonpath.empty() ? "" : ":") + p;
    }
    policy.read_only.insert(policy.read_only.end(), py.prefixes.begin(), py.prefixes.end());
    policy.read_only.push_back(fs::path(py.executable).parent_path());
    policy.read_only.insert(policy.read_only.end(), readable.begin(), readable.end());
    // LibTorch, which the reference library loads (pip's torch/lib lies in the import path already).
    if (!torch_config().libdir.empty()) policy.read_only.push_back(torch_config().libdir);
    c.prefix = sandbox_prefix(policy);
    if (c.prefix.empty() || c.prefix.back() != "--")
        throw UsageError("the import sandbox could not be set up (bwrap: " + l.bwrap + ")");
    c.prefix.pop_back();
    c.library = fs::path(kLibraryMount) / library.filename();
    c.prefix.insert(c.prefix.end(), {"--ro-bind", library.parent_path().string(), kLibraryMount});
    // The new root is a tmpfs in which bwrap made the folders leading to each bind (/home/USER/...
    // for a Python installed there): read-only, so the only writable places are the output dir and
    // the sandbox's own /tmp, /run and /dev/shm (separate mounts, gone with it).
    c.prefix.insert(c.prefix.end(), {"--remount-ro", "/", "--"});
    // HOME in the private /tmp (bwrap sets it to the work dir): nothing of a problem's lands beside the tasks.
    c.prefix.insert(c.prefix.end(), {"/usr/bin/env", "HOME=/tmp"});
    c.env = sandbox_environment({{"PYTHONPATH", pythonpath},
                                 {"PYTHONNOUSERSITE", "1"},
                                 {"PYTHONDONTWRITEBYTECODE", "1"},
                                 {"XDG_CACHE_HOME", "/tmp/.cache"},
                                 {"TORCH_HOME", "/tmp/.torch"},
                                 {"TRITON_CACHE_DIR", "/tmp/.triton"},
                                 {"MPLCONFIGDIR", "/tmp"}});
    c.label = std::string("bwrap (") + kSandboxed + (gpu ? ", GPU device nodes" : "") + ")";
    return c;
}

// A problem stopped by the sandbox (a write outside the output dir, a socket, a home directory)
// cannot be imported faithfully here: it is refused, and its reason says what it tried beside
// Python's own error, and what the opt-out is. Without the sandbox the reason stays as it is.
struct Denial {
    std::regex error;
    const char* what;
};

void note_sandbox_denial(nlohmann::json& result, bool sandboxed) {
    if (!sandboxed || result.value("status", "") == "ok" || !result.contains("reason") || !result["reason"].is_string()) return;
    static const std::vector<Denial> denials = {
        {std::regex("Network is unreachable|Connection refused|Name or service not known|Temporary failure in name resolution|"
                    "No address associated with hostname|getaddrinfo|urlopen error|Address family not supported"),
         "the problem tried to use the network, which the sandbox does not have"},
        {std::regex("Read-only file system"), "the problem tried to write outside the output dir"},
        {std::regex("No such file or directory: '/(root|home)/"), "the problem reached for a home directory, which the sandbox does not show"},
        {std::regex("Permission denied|Operation not permitted"), "the problem tried something the sandbox does not permit"},
    };
    const std::string reason = result["reason"].get<std::string>();
    for (const auto& d : denials) {
        if (!std::regex_search(reason, d.error)) continue;
        result["status"] = "refused";
        result["reason"] = reason + " [" + d.what + ": denied by the import sandbox (" + kSandboxed +
                           "); --no-sandbox runs files you trust unconfined]";
        return;
    }
}

// Runs the importer (argv[1], then its arguments) so that only the importer's own protocol lines
// reach stdout: its module-level print() (results, progress, fatal) writes to a copy of stdout,
// while fd 1 and sys.stdout become stderr before any problem runs, so what a problem prints (from
// Python, C or a child process) can never be taken for a result, a progress line or a fatal error.
const char* const kProtocolWrapper = R"PY(
import builtins, os, runpy, sys
_proto = os.fdopen(os.dup(1), "w", buffering=1)
os.dup2(2, 1)
sys.stdout = sys.stderr
def _print(*args, **kw):
    if kw.get("file") is not None:
        return builtins.print(*args, **kw)
    kw.pop("file", None)
    kw["flush"] = True
    builtins.print(*args, file=_proto, **kw)
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], init_globals={"print": _print}, run_name="__main__")
)PY";

// One line on stderr for a progress record of the importer: "kb2_46_...: trace 1.2 s".
std::string progress_line(const nlohmann::json& p) {
    std::ostringstream os;
    os << "kernelevo:   " << one_line(p.value("name", std::string("?"))) << ": " << one_line(p.value("phase", std::string("?")));
    if (p.contains("seconds") && p["seconds"].is_number()) {
        char buf[32];
        std::snprintf(buf, sizeof buf, " %.1f s", p["seconds"].get<double>());
        os << buf;
    }
    return os.str();
}

// How the Python ended, in the same words with or without the sandbox: bwrap exits 128+N when the
// process inside dies of signal N. The limits' signals name their limit.
std::string describe_python_exit(Subprocess& proc, bool sandboxed) {
    std::string exit = proc.describe_exit();
    std::smatch m;
    if (sandboxed && std::regex_match(exit, m, std::regex("exit code (1[3-5][0-9])")) && std::stoi(m[1]) > 128) {
        int sig = std::stoi(m[1]) - 128;
        exit = "killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ") in the sandbox";
    }
    if (exit.find("signal 24 ") != std::string::npos) exit += ": its CPU-time limit";
    if (exit.find("signal 25 ") != std::string::npos) exit += ": the 64 GiB file-size limit";
    return exit;
}

// What one Python process of the importer reported.
struct PythonRun {
    std::map<std::string, nlohmann::json> by_source;  // result lines, by the source path given
    std::string fatal;
    std::string exit;  // "exit code 0", "killed by signal 9 (...)", "timed out after N s"
    std::string err;   // the end of its stderr
};

// Runs the importer's Python on `files`, reading its stdout as it comes: a result line per problem
// ({"source": ...}, kept only for a file of this run), a progress line per phase ({"progress": ...},
// forwarded to stderr, never a result), anything else ignored (a problem's own prints).
PythonRun run_python(const std::vector<std::string>& argv, const std::vector<std::string>& files, const Confinement& conf,
                     double timeout_s, int64_t max_as, bool quiet, std::mutex& print_mu) {
    ProcessOptions po;
    po.argv = conf.prefix;
    po.argv.insert(po.argv.end(), argv.begin(), argv.end());
    po.argv.insert(po.argv.end(), files.begin(), files.end());
    po.exact_env = conf.env;
    po.max_file_bytes = 64L << 30;  // model weights and verification tensors can be many GiB
    po.max_address_space = max_as;
    // CPU time: a backstop behind the wall-clock deadline below (all of PyTorch's threads count).
    po.max_cpu_s = static_cast<long>(timeout_s) * std::max(1u, std::thread::hardware_concurrency());
    po.max_open_files = 4096;
    PythonRun run;
    std::optional<Subprocess> started;
    try {
        started.emplace(po);
    } catch (const std::exception& e) {  // in a worker thread: a reason, never an escaping exception
        run.exit = std::string("could not start: ") + e.what();
        return run;
    }
    Subprocess& proc = *started;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    for (std::string line;;) {
        double left = std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
        if (left <= 0) {
            proc.kill_now();
            run.exit = "timed out after " + std::to_string(static_cast<long>(timeout_s)) + " s";
            break;
        }
        Subprocess::Read got = proc.read_line(line, std::min(left, 1.0));
        if (got == Subprocess::Read::closed) {
            // Its stdout is closed: give it a moment to exit, then stop whatever is left.
            for (int i = 0; i < 50 && proc.alive(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
            proc.kill_now();
            run.exit = describe_python_exit(proc, !conf.prefix.empty());
            break;
        }
        if (got != Subprocess::Read::line || line.empty() || line[0] != '{') continue;
        nlohmann::json j;
        try {
            j = nlohmann::json::parse(line);
        } catch (const std::exception&) {
            continue;
        }
        if (!j.is_object()) continue;
        if (j.contains("progress") && j["progress"].is_object()) {
            if (!quiet) {
                std::lock_guard<std::mutex> lock(print_mu);
                std::cerr << progress_line(j["progress"]) << "\n";
            }
        } else if (j.contains("fatal") && j["fatal"].is_string()) {
            run.fatal = j["fatal"].get<std::string>();
        } else if (j.contains("source") && j["source"].is_string() && j.contains("status")) {
            const std::string src = j["source"].get<std::string>();
            if (std::find(files.begin(), files.end(), src) != files.end()) run.by_source[src] = j;
        }
    }
    run.err = proc.err_tail(600);
    return run;
}

}  // namespace

std::string find_python(const std::string& given, std::string* torch_version) {
    std::string version;
    if (!given.empty()) {
        version = probe_python(given).torch;
        if (version.empty()) throw UsageError("--python " + given + ": cannot import torch there");
        if (torch_version) *torch_version = version;
        return given;
    }
    for (const char* cand : {"python3", "/usr/bin/python3"}) {
        version = probe_python(cand).torch;
        if (!version.empty()) {
            if (torch_version) *torch_version = version;
            return cand;
        }
    }
    throw UsageError("no Python with PyTorch found (tried python3 and /usr/bin/python3): install Debian's "
                     "python3-torch, or PyTorch's pip package, or pass --python");
}

fs::path data_dir() {
    fs::path installed = self_exe_dir().parent_path() / "share" / "kernelevo" / "kernelbench";
    if (fs::exists(installed / "import_kernelbench.py")) return installed;
#ifdef KEVO_KERNELBENCH_SOURCE_DIR
    if (fs::exists(fs::path(KEVO_KERNELBENCH_SOURCE_DIR) / "import_kernelbench.py")) return KEVO_KERNELBENCH_SOURCE_DIR;
#endif
    throw UsageError("the KernelBench importer's files are missing (looked in " + installed.string() + ")");
}

ImportSummary import_problems(const ImportOptions& o) {
    auto t0 = std::chrono::steady_clock::now();
    const std::vector<fs::path> files = expand(o.files);
    if (files.empty()) throw UsageError("no problem files given");
    if (o.out.empty()) throw UsageError("--out: required");
    const ReferenceSupport refs = reference_support();
    if (!refs.available) throw UsageError("this kernelevo was built without LibTorch: it cannot build the generic reference");
    const std::string device = refs.cuda ? "cuda" : "cpu";

    // A Python with PyTorch (import time only).
    std::string torch_version;
    const std::string python = find_python(o.python, &torch_version);
    if (device == "cuda" && torch_version.find("cuda=True") == std::string::npos)
        throw UsageError("this kernelevo's LibTorch runs references on the GPU, but " + python + " (torch " +
                         torch_version + ") sees no CUDA device");

    // The suite's generic reference: one source, one build for every task.
    fs::create_directories(o.out);
    const fs::path dir = data_dir();
    const fs::path ref = fs::absolute(o.out / kReferenceName).lexically_normal();
    const std::string ref_text = read_file(dir / "jit_reference.cpp");
    std::error_code ec;
    if (!fs::exists(ref, ec) || read_file(ref) != ref_text) write_file_atomic(ref, ref_text);
    Task generic;
    generic.name = "kernelbench";
    generic.reference_source = ref;
    generic.reference_function = "kevo_kb::forward";
    generic.reference_signature = "vector";
    generic.reference_setup = "kevo_kb::setup";
    if (!o.quiet) std::cerr << "kernelevo: building the generic TorchScript reference (once; cached)...\n";
    ReferenceBuild rb = build_reference(generic);
    if (!rb.ok) throw UsageError("the generic reference did not build:\n" + rb.log);

    // The sandbox: what the Python must see (read-only) besides the system and its own installation.
    const bool gpu = device == "cuda";
    const fs::path out_dir = fs::weakly_canonical(fs::absolute(o.out));  // bound at its real place
    std::vector<fs::path> sources;  // each problem as the Python is given it: its real path, bound there
    for (const auto& f : files) sources.push_back(fs::weakly_canonical(fs::absolute(f)));
    const fs::path refcheck = fs::weakly_canonical(refcheck_path());
    const fs::path library = fs::weakly_canonical(rb.library);
    std::vector<fs::path> readable = {dir, refcheck};
    readable.insert(readable.end(), sources.begin(), sources.end());
    const Confinement conf = confine(o, probe_python(python), readable, library, gpu);
    const bool sandboxed = !conf.prefix.empty();
    if (!sandboxed)
        std::cerr << "kernelevo: warning: the import sandbox is " << conf.label
                  << ": problem files run with your rights (network, home directory, environment)\n";
    // Address space: unlimited on the GPU (CUDA reserves far more than it uses), the machine's memory
    // on the CPU (a runaway problem fails with MemoryError instead of dragging the machine into swap).
    const int64_t max_as = gpu ? 0 : static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
    // The GPU's lock (validate.h), the one every GPU use of the tool takes: a worker's Python runs
    // the models on the GPU, so it holds the lock for its whole run and never lands in another
    // validation's timed batches (workers on the GPU take turns; on the CPU there is no lock).
    std::optional<DeviceInfo> lock_dev;
    if (gpu) lock_dev = Validator(Task{}, ValidateOptions{}).device();
    if (!o.quiet)
        std::cerr << "kernelevo: reference " << (rb.cached ? "cached" : "built in " + fmt_seconds(rb.seconds)) << "; importing "
                  << files.size() << " problem(s) with " << python << " (torch " << torch_version << ") on the " << device
                  << (gpu ? " under its GPU lock" : "") << "; sandbox: " << conf.label << "\n";

    // Python workers, a few problems each, `jobs` at a time.
    int jobs = o.jobs > 0 ? o.jobs : std::max(1, std::min(4, static_cast<int>(std::thread::hardware_concurrency())));
    size_t chunk = std::clamp<size_t>((files.size() + jobs * 4 - 1) / (jobs * 4), 1, 8);
    // Under the GPU lock the workers would only take turns: one, with up to 8 problems per Python
    // (one start of Python, torch and CUDA for them instead of one each).
    if (lock_dev && lock_dev->present) {
        jobs = 1;
        chunk = std::clamp<size_t>(files.size(), 1, 8);
    }
    std::vector<std::vector<std::string>> chunks;
    for (size_t i = 0; i < files.size(); i += chunk)
        chunks.emplace_back(sources.begin() + i, sources.begin() + std::min(files.size(), i + chunk));
    const std::string executable = sandboxed ? probe_python(python).executable : python;
    const std::vector<std::string> argv = {executable, "-c", kProtocolWrapper, (dir / "import_kernelbench.py").string(), "--out", out_dir.string(),
                                           "--reference-source", (out_dir / kReferenceName).string(), "--device", device, "--refcheck", refcheck.string(),
                                           "--library", conf.library.string(), "--max-numel", std::to_string(o.max_numel), "--timeout",
                                           std::to_string(static_cast<long>(o.timeout_s))};
    std::vector<std::string> scratch;
    if (sandboxed) scratch = {"--scratch", "/tmp"};  // the sandbox's private tmpfs, gone with it
    std::vector<nlohmann::json> results(files.size());
    std::atomic<size_t> next{0};
    std::mutex mu, print_mu;
    size_t done = 0;
    std::string fatal;
    auto worker = [&] {
        for (size_t c; (c = next.fetch_add(1)) < chunks.size();) {
            // One Python process for the chunk; if it dies (a crash inside PyTorch), the problems it
            // did not report go again in a new one, and a problem that kills it twice fails alone.
            std::map<std::string, nlohmann::json> by_source;
            std::vector<std::string> pending = chunks[c];
            PythonRun r;
            while (!pending.empty()) {
                std::vector<std::string> args = argv;
                args.insert(args.end(), scratch.begin(), scratch.end());
                {
                    std::unique_ptr<GpuLock> held;
                    if (lock_dev) held = lock_device(*lock_dev, [&](const std::string& line) {
                        if (o.quiet) return;
                        std::lock_guard<std::mutex> lock(print_mu);
                        std::cerr << "kernelevo: " << line << "\n";
                    });
                    r = run_python(args, pending, conf, o.timeout_s * 3 * static_cast<double>(pending.size()) + 120, max_as, o.quiet,
                                   print_mu);
                }
                for (auto& [src, j] : r.by_source) by_source[src] = j;
                if (!r.fatal.empty()) {
                    std::lock_guard<std::mutex> lock(mu);
                    fatal = r.fatal;
                }
                std::vector<std::string> missing;
                for (const auto& f : pending)
                    if (!by_source.count(f)) missing.push_back(f);
                if (missing.empty() || !r.fatal.empty()) break;
                if (missing.size() == pending.size()) {
                    // No progress: the first one is the culprit.
                    std::string err = r.err.empty() ? "" : std::string(": ") + (r.err.size() >= 600 ? "..." : "") + r.err;
                    by_source[missing[0]] = {{"source", missing[0]}, {"name", problem_task_name(missing[0])}, {"status", "failed"},
                                             {"reason", one_line("the importer stopped (" + r.exit + ")" + err)}};
                    missing.erase(missing.begin());
                }
                pending = missing;
            }
            std::lock_guard<std::mutex> lock(mu);
            size_t base = c * chunk;
            for (size_t k = 0; k < chunks[c].size(); ++k) {
                const std::string src = chunks[c][k];
                nlohmann::json j;
                if (by_source.count(src)) {
                    j = by_source[src];
                } else {
                    j = {{"source", src}, {"name", problem_task_name(src)}, {"status", "failed"},
                         {"reason", "the importer stopped before this problem (" + r.exit + ")"}};
                }
                note_sandbox_denial(j, sandboxed);
                // The task must also load as a task (file sizes, names, shapes).
                if (j.value("status", "") == "ok") {
                    try {
                        Task t = load_task(j.at("task").get<std::string>());
                        (void)t;
                    } catch (const std::exception& e) {
                        j["status"] = "failed";
                        j["reason"] = std::string("the written task does not load: ") + e.what();
                    }
                }
                results[base + k] = j;
                ++done;
                if (!o.quiet) {
                    std::lock_guard<std::mutex> print(print_mu);
                    std::string status = j.value("status", "failed");
                    std::cerr << "[" << done << "/" << files.size() << "] " << j.value("name", src) << ": " << status;
                    if (status == "ok") {
                        const auto& v = j["verify"];
                        if (v.contains("max_abs_diff") && v["max_abs_diff"].is_number())
                            std::cerr << " (C++ reference on the " << v.value("device", device) << " vs Python: max |diff| "
                                      << v["max_abs_diff"].get<double>() << ")";
                    } else {
                        std::cerr << ": " << j.value("reason", "");
                    }
                    std::cerr << " [" << fmt_seconds(j.value("seconds", 0.0)) << "]\n";
                }
            }
        }
    };
    // A chunk reports when it ends; a chunk of large problems on a CPU can take many minutes, so a
    // line every minute says the import is alive and how far it is.
    std::condition_variable finished;
    bool all_done = false;
    std::thread heartbeat([&] {
        std::unique_lock<std::mutex> lock(mu);
        while (!finished.wait_for(lock, std::chrono::seconds(60), [&] { return all_done; }))
            if (!o.quiet)
                std::cerr << "kernelevo: importing: " << done << "/" << files.size() << " done after "
                          << fmt_seconds(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()) << "\n";
    });
    std::vector<std::thread> pool;
    for (int i = 0; i < std::min<int>(jobs, static_cast<int>(chunks.size())); ++i) pool.emplace_back(worker);
    for (auto& t : pool) t.join();
    {
        std::lock_guard<std::mutex> lock(mu);
        all_done = true;
    }
    finished.notify_all();
    heartbeat.join();
    // The probe saw CUDA outside the sandbox; a Python that loses it inside lacks a device node there.
    if (!fatal.empty())
        throw UsageError(fatal + (sandboxed && gpu ? " (inside the import sandbox, which shows the GPU's /dev/nvidia* nodes; "
                                                     "the same Python saw the GPU outside it: --no-sandbox tells whether the "
                                                     "sandbox is the cause)"
                                                   : ""));

    ImportSummary s;
    s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    nlohmann::json reasons = nlohmann::json::object();
    for (const auto& j : results) {
        std::string st = j.value("status", "failed");
        if (st == "ok") ++s.imported;
        else if (st == "refused") ++s.refused;
        else ++s.failed;
        if (st != "ok") {
            std::string r = j.value("reason", "");
            reasons[r] = reasons.value(r, 0) + 1;
        }
    }
    s.report = {{"problems", results.size()}, {"imported", s.imported}, {"refused", s.refused}, {"failed", s.failed},
                {"seconds", s.seconds}, {"device", device}, {"python", python}, {"torch", torch_version},
                {"max_numel", o.max_numel}, {"reference_library", rb.library.string()}, {"sandbox", conf.label},
                {"gpu_lock", lock_dev.has_value()}, {"results", results}};
    write_file_atomic(o.out / "import.json", s.report.dump(2) + "\n");
    if (!o.quiet)
        std::cerr << "kernelevo: imported " << s.imported << "/" << results.size() << " (" << s.refused << " refused, "
                  << s.failed << " failed) in " << fmt_seconds(s.seconds) << "; report " << (o.out / "import.json").string()
                  << "\n";
    return s;
}

}  // namespace kevo::kernelbench
