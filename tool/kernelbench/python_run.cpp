// Running the importer's Python (internal/python_run.h): the sandbox, the protocol, the denials.
#include "kernelbench/internal/python_run.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iostream>
#include <regex>
#include <sstream>
#include <thread>

#include "common/error.h"
#include "common/process.h"
#include "common/text.h"
#include "reference/internal/torch_config.h"
#include "sandbox/sandbox.h"

namespace kevo::kernelbench {

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

namespace {

// Where the sandbox shows the reference library's folder: it is built under the user's cache
// (~/.cache/kernelevo), and a bind at its real place would make the home directory's path appear.
const char* const kLibraryMount = "/run/kernelevo-reference";

const char* const kSandboxed =
    "one sandbox per problem, no network, writes only to a private folder of its own (never the suite: kernelevo "
    "installs the checked results) and a private /tmp, no home directory, allowlisted environment, Python and "
    "problem files read-only";

}  // namespace

// Problem files are untrusted Python: the importer runs them in the same sandbox as a candidate's
// compile (tool/sandbox), never silently without it. Visible read-only: the system, the Python
// installation and its import path, LibTorch, the importer's files, kernelevo-refcheck and the
// reference library it loads (at kLibraryMount), the problem files; writable: `workdir`, the one
// problem's private folder (internal/install.h: never the suite, which no sandbox sees), and a private
// /tmp (the verification tensors: --scratch /tmp; /dev/shm is the sandbox's own too).
PythonSandbox python_sandbox(const PythonInstall& py, const fs::path& workdir, bool gpu, const std::vector<fs::path>& readable,
                             const std::map<std::string, std::string>& extra) {
    PythonSandbox box;
    box.policy.workdir = workdir;
    box.policy.gpu = gpu;
    std::string pythonpath;
    for (const auto& p : py.import_path) {
        box.policy.read_only.push_back(p);
        pythonpath += (pythonpath.empty() ? "" : ":") + p;
    }
    box.policy.read_only.insert(box.policy.read_only.end(), py.prefixes.begin(), py.prefixes.end());
    box.policy.read_only.push_back(fs::path(py.executable).parent_path());
    box.policy.read_only.insert(box.policy.read_only.end(), readable.begin(), readable.end());
    std::map<std::string, std::string> env = {{"PYTHONPATH", pythonpath},
                                              {"PYTHONNOUSERSITE", "1"},
                                              {"PYTHONDONTWRITEBYTECODE", "1"},
                                              {"XDG_CACHE_HOME", "/tmp/.cache"},
                                              {"TORCH_HOME", "/tmp/.torch"},
                                              {"TRITON_CACHE_DIR", "/tmp/.triton"},
                                              {"MPLCONFIGDIR", "/tmp"}};
    for (const auto& [k, v] : extra) env[k] = v;
    box.env = sandbox_environment(env);
    return box;
}

Confinement confine(const ImportOptions& o, const PythonInfo& py, const std::vector<fs::path>& readable, const fs::path& library,
                     bool gpu, const fs::path& workdir, int64_t tmp_bytes) {
    Confinement c;
    c.library = library;
    if (o.no_sandbox || sandbox_mode() == SandboxMode::off) {
        c.label = o.no_sandbox ? "off (--no-sandbox)" : "off (--sandbox off)";
        return c;
    }
    const SandboxLayers& l = sandbox_layers();
    if (!l.namespaces)
        throw SettingError({settings::kImportNoSandbox},
                           "the import runs each problem file (untrusted Python) in a sandbox, which needs bubblewrap:\n" + l.why_not +
                               "Install it (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap) and allow user "
                               "namespaces, or run the problem files with your own rights ({import.no_sandbox}; unsafe: only for "
                               "files you trust)");
    std::vector<fs::path> visible = readable;
    // LibTorch, which the reference library loads (pip's torch/lib lies in the import path already).
    if (!torch_config().libdir.empty()) visible.push_back(torch_config().libdir);
    PythonSandbox box = python_sandbox(py, workdir, gpu, visible);  // workdir as import_problems gives it to the Python
    const int64_t half_memory = static_cast<int64_t>(::sysconf(_SC_PHYS_PAGES)) * ::sysconf(_SC_PAGE_SIZE) / 2;
    if (tmp_bytes > 0) box.policy.tmp_bytes = half_memory > 0 ? std::min(tmp_bytes, half_memory) : tmp_bytes;
    c.prefix = sandbox_prefix(box.policy);
    if (c.prefix.empty() || c.prefix.back() != "--")
        throw UsageError("the import sandbox could not be set up (bwrap: " + l.bwrap + ")");
    c.prefix.pop_back();
    c.library = fs::path(kLibraryMount) / library.filename();
    c.prefix.insert(c.prefix.end(), {"--ro-bind", library.parent_path().string(), kLibraryMount});
    // The new root is a tmpfs in which bwrap made the folders leading to each bind (/home/USER/...
    // for a Python installed there): read-only, so the only writable places are the private folder
    // and the sandbox's own /tmp, /run and /dev/shm (separate mounts, gone with it).
    c.prefix.insert(c.prefix.end(), {"--remount-ro", "/", "--"});
    // HOME in the private /tmp (bwrap sets it to the work dir): nothing of a problem's lands beside its results.
    c.prefix.insert(c.prefix.end(), {"/usr/bin/env", "HOME=/tmp"});
    c.env = std::move(box.env);
    c.label = std::string("bwrap (") + kSandboxed + (gpu ? ", GPU device nodes" : "") + ")";
    return c;
}

namespace {
struct Denial {
    std::regex error;
    const char* what;
};
}  // namespace

// A problem stopped by the sandbox (a write outside its private folder, a socket, a home directory)
// cannot be imported faithfully here: it is refused, and its reason says what it tried beside
// Python's own error, and what the opt-out is. Without the sandbox the reason stays as it is.
void note_sandbox_denial(nlohmann::json& result, bool sandboxed) {
    if (!sandboxed || result.value("status", "") == "ok" || !result.contains("reason") || !result["reason"].is_string()) return;
    static const std::vector<Denial> denials = {
        {std::regex("Network is unreachable|Connection refused|Name or service not known|Temporary failure in name resolution|"
                    "No address associated with hostname|getaddrinfo|urlopen error|Address family not supported"),
         "the problem tried to use the network, which the sandbox does not have"},
        {std::regex("Read-only file system"), "the problem tried to write outside its private folder"},
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

namespace {
// One line on stderr for a progress record of the importer: "kb2_46_...: trace 1.2 s" (fields of
// another type, which only a problem's code would print, show as "?").
std::string progress_line(const nlohmann::json& p) {
    auto text = [&](const char* key) { return p.contains(key) && p[key].is_string() ? one_line(p[key].get<std::string>()) : "?"; };
    std::ostringstream os;
    os << "kernelevo:   " << text("name") << ": " << text("phase");
    if (p.contains("seconds") && p["seconds"].is_number()) {
        char buf[32];
        std::snprintf(buf, sizeof buf, " %.1f s", p["seconds"].get<double>());
        os << buf;
    }
    return os.str();
}

// How the Python ended, in the same words with or without the sandbox: bwrap exits 128+N when the
// process inside dies of signal N. The limits' signals name their limit.
std::string describe_python_exit(Subprocess& proc, bool sandboxed, int64_t max_file) {
    std::string exit = proc.describe_exit();
    std::smatch m;
    if (sandboxed && std::regex_match(exit, m, std::regex("exit code (1[3-5][0-9])")) && std::stoi(m[1]) > 128) {
        int sig = std::stoi(m[1]) - 128;
        exit = "killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ") in the sandbox";
    }
    if (exit.find("signal 24 ") != std::string::npos) exit += ": its CPU-time limit";
    if (exit.find("signal 25 ") != std::string::npos) exit += ": the " + gib_text(max_file) + " file-size limit";
    return exit;
}

// What a folder of the sandbox's holds: its bytes (each entry's larger of its size and its blocks,
// links never followed) and its entries. A folder the problem made unreadable is made readable
// again (it is the user's own); one nested deeper than 32 folders counts as too many entries.
struct DirUse {
    uintmax_t bytes = 0, entries = 0;
};

void add_dir_use(const fs::path& dir, DirUse& u, int depth) {
    std::error_code ec;
    fs::permissions(dir, fs::perms::owner_all, fs::perm_options::add | fs::perm_options::nofollow, ec);
    if (depth > 32) u.entries = kMaxOutputEntries + 1;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end && u.entries <= kMaxOutputEntries;
         it.increment(ec)) {
        struct stat st;
        if (::lstat(it->path().c_str(), &st) != 0) continue;
        ++u.entries;
        u.bytes += std::max<uintmax_t>(static_cast<uintmax_t>(st.st_size), static_cast<uintmax_t>(st.st_blocks) * 512u);
        if (S_ISDIR(st.st_mode) && depth <= 32) add_dir_use(it->path(), u, depth + 1);
    }
}

// Why the Python must stop for what it wrote ("" while it is within its bounds).
std::string output_over(const PythonLimits& l) {
    if (l.output_dir.empty()) return "";
    if (l.max_output_bytes > 0) {
        DirUse u;
        add_dir_use(l.output_dir, u, 0);
        if (u.bytes > static_cast<uintmax_t>(l.max_output_bytes))
            return "it wrote more than " + gib_text(l.max_output_bytes) + " to its private folder";
        if (u.entries > kMaxOutputEntries)
            return "it made more than " + std::to_string(kMaxOutputEntries) +
                   " files and folders (or nested them deeper than 32) in its private folder";
    }
    std::error_code ec;
    const fs::space_info sp = fs::space(l.output_dir, ec);
    if (!ec && l.disk_floor_bytes > 0 && sp.available < static_cast<uintmax_t>(l.disk_floor_bytes))
        return "the disk holding the output folder has less than " + gib_text(l.disk_floor_bytes) + " free (" +
               gib_text(static_cast<int64_t>(sp.available)) + ")";
    return "";
}

// One line of the Python's stdout: a result, a progress line (printed), a fatal error, or ignored.
void take_line(const std::string& line, const std::vector<std::string>& files, bool quiet, std::mutex& print_mu,
               PythonRun& run) {
    if (line.empty() || line[0] != '{') return;
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(line);
    } catch (const std::exception&) {
        return;
    }
    if (!j.is_object()) return;
    if (j.contains("progress") && j["progress"].is_object()) {
        if (!quiet) {
            std::lock_guard<std::mutex> lock(print_mu);
            std::cerr << printable(progress_line(j["progress"])) << "\n";
        }
    } else if (j.contains("fatal") && j["fatal"].is_string()) {
        run.fatal = j["fatal"].get<std::string>();
    } else if (j.contains("source") && j["source"].is_string() && j.contains("status")) {
        const std::string src = j["source"].get<std::string>();
        if (std::find(files.begin(), files.end(), src) == files.end()) return;
        if (run.by_source.count(src)) run.repeated.insert(src);
        run.by_source[src] = j;
    }
}

}  // namespace

std::string gib_text(int64_t bytes) {
    char buf[32];
    const double b = static_cast<double>(bytes);
    if (b >= (1 << 30)) std::snprintf(buf, sizeof buf, "%.1f GiB", b / (1 << 30));
    else std::snprintf(buf, sizeof buf, "%.1f MiB", b / (1 << 20));
    return buf;
}

// Runs the importer's Python on `files`, reading its stdout as it comes: a result line per problem
// ({"source": ...}, kept only for a file of this run), a progress line per phase ({"progress": ...},
// forwarded to stderr, never a result), anything else ignored (a problem's own prints). It is killed
// at its --timeout plus kTimeoutGrace, and as soon as it writes more than its bounds allow.
PythonRun run_python(const std::vector<std::string>& argv, const std::vector<std::string>& files, const Confinement& conf,
                     const PythonLimits& limits, bool quiet, std::mutex& print_mu) {
    ProcessOptions po;
    po.argv = conf.prefix;
    po.argv.insert(po.argv.end(), argv.begin(), argv.end());
    po.argv.insert(po.argv.end(), files.begin(), files.end());
    po.exact_env = conf.env;
    // Each file at most the output's bound (model weights and verification tensors can be many GiB).
    po.max_file_bytes = limits.max_output_bytes > 0 ? limits.max_output_bytes : 64L << 30;
    po.max_address_space = limits.max_as;
    const double wall_s = limits.timeout_s + kTimeoutGrace;
    // CPU time: a backstop behind the wall-clock deadline below (all of PyTorch's threads count).
    po.max_cpu_s = static_cast<long>(wall_s) * std::max(1u, std::thread::hardware_concurrency());
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
    const auto t0 = std::chrono::steady_clock::now();
    auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
    double checked = 0;
    for (std::string line;;) {
        const double left = wall_s - seconds();
        if (left <= 0) {
            proc.kill_now();
            run.exit = "timed out: still running " + std::to_string(static_cast<long>(kTimeoutGrace)) +
                       " s after its " + std::to_string(static_cast<long>(limits.timeout_s)) + " s (--timeout), killed";
            break;
        }
        if (seconds() - checked >= 0.5) {
            checked = seconds();
            if (std::string why = output_over(limits); !why.empty()) {
                proc.kill_now();
                run.exit = "killed: " + why;
                run.over_output = true;
                break;
            }
        }
        Subprocess::Read got = proc.read_line(line, std::min(left, 0.5));
        if (got == Subprocess::Read::closed) {
            // Its stdout is closed: give it a moment to exit, then stop whatever is left.
            for (int i = 0; i < 50 && proc.alive(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
            proc.kill_now();
            run.exit = describe_python_exit(proc, !conf.prefix.empty(), po.max_file_bytes);
            if (std::string why = output_over(limits); !why.empty()) {  // what it wrote just before it ended
                run.exit = "stopped: " + why;
                run.over_output = true;
            }
            break;
        }
        if (got == Subprocess::Read::line) take_line(line, files, quiet, print_mu, run);
    }
    // Every way out above killed it; its sandbox's processes end after it. The caller then removes
    // their private folder: only once none of them can still create a file there.
    proc.wait_closed(kSandboxEndLimit);
    run.err = proc.err_tail(600);
    // Two results for one problem: something besides the importer printed one (its problem's code).
    for (const auto& src : run.repeated)
        run.by_source[src] = {{"source", src}, {"status", "failed"}, {"reason", "the importer reported this problem more than once"}};
    return run;
}

}  // namespace kevo::kernelbench
