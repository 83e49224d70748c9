// KernelBench import (kernelbench.h): the problems' Python, sandboxed, turned into task directories.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include <unistd.h>

#include "common/settings.h"
#include "common/error.h"
#include "common/fs.h"
#include "common/process.h"
#include "common/text.h"
#include "kernelbench/internal/install.h"
#include "kernelbench/internal/python_run.h"
#include "kernelbench/internal/result_check.h"
#include "kernelbench/kernelbench.h"
#include "reference/internal/torch_config.h"
#include "reference/reference.h"
#include "sandbox/sandbox.h"
#include "task/task.h"
#include "validate/gpu_lock.h"
#include "validate/turns.h"
#include "validate/validate.h"

namespace kevo::kernelbench {

namespace {

fs::path refcheck_path() {
    fs::path beside = self_exe_dir() / "kernelevo-refcheck";
    if (fs::exists(beside)) return beside;
#ifdef KEVO_BUILD_REFCHECK
    if (fs::exists(KEVO_BUILD_REFCHECK)) return KEVO_BUILD_REFCHECK;
#endif
    throw UsageError("kernelevo-refcheck not found beside " + self_exe_dir().string() + " (reinstall kernelevo)");
}

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

std::string fmt_seconds(double s) {
    char buf[32];
    long t = static_cast<long>(s + 0.5);
    if (t >= 60) std::snprintf(buf, sizeof buf, "%ldm%02lds", t / 60, t % 60);
    else std::snprintf(buf, sizeof buf, "%.1fs", s);
    return buf;
}

}  // namespace

std::string find_python(const std::string& given, std::string* torch_version) {
    std::string version;
    if (!given.empty()) {
        version = probe_python(given).torch;
        if (version.empty()) throw SettingError({settings::kImportPython}, "{import.python} " + given + ": cannot import torch there");
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
    throw SettingError({settings::kImportPython}, "no Python with PyTorch found (tried python3 and /usr/bin/python3): install Debian's "
                                            "python3-torch, or PyTorch's pip package, or pass {import.python}");
}

PythonInstall python_install(const std::string& python) {
    PythonInfo i = probe_python(python);
    return {i.torch, i.executable, i.import_path, i.prefixes};
}

fs::path data_dir() {
    fs::path installed = self_exe_dir().parent_path() / "share" / "kernelevo" / "kernelbench";
    if (fs::exists(installed / "import_kernelbench.py")) return installed;
#ifdef KEVO_KERNELBENCH_SOURCE_DIR
    if (fs::exists(fs::path(KEVO_KERNELBENCH_SOURCE_DIR) / "import_kernelbench.py")) return KEVO_KERNELBENCH_SOURCE_DIR;
#endif
    throw UsageError("the KernelBench importer's files are missing (looked in " + installed.string() + ")");
}

fs::path python_package_dir() {
    const fs::path data = data_dir();
    std::vector<fs::path> candidates;
    if (const char* dir = env(EnvVar::kPythonDir)) candidates.push_back(dir);
    candidates.push_back(data.parent_path() / "python");
    candidates.push_back(data.parent_path().parent_path() / "python");
    for (const auto& c : candidates)
        if (!c.empty() && fs::exists(c / "kernelevo" / "kernelbench" / "driver.py")) return fs::weakly_canonical(c);
    throw UsageError("the KernelBench importer's code is kernelevo's Python package (kernelevo/kernelbench/), not found "
                     "beside " + data.string() + ": reinstall kernelevo, or set KERNELEVO_PYTHON_DIR to the folder holding it");
}

namespace {

// What every problem's run shares: the Python, the sandbox's view, the argument list, the GPU lock.
struct ImportSetup {
    const ImportOptions* o = nullptr;
    fs::path python_package;     // the folder holding python/kernelevo: the importer's code, export_model
    std::string reference_text;  // jit_reference.cpp: the reference of every task, also of model regions
    fs::path out;  // the suite, canonical
    std::string device, python, executable;
    PythonInfo py;
    std::vector<fs::path> readable;
    fs::path library;
    bool gpu = false, sandboxed = false;
    std::vector<std::string> importer_args;  // after the Python and the wrapper, before --out
    std::optional<DeviceInfo> lock_dev;
    int64_t max_as = 0;
    int64_t max_output = 0, disk_floor = 0;  // PythonLimits: each problem's output, the disk's free floor
};

// A problem's Python killed by SIGKILL, not for its time: most often the kernel's out-of-memory
// killer (a model's weights alone can be gigabytes: KernelBench's ShallowWideMLP holds 8 GiB).
std::string killed_hint(const std::string& exit, int jobs) {
    if (exit.find("signal 9") == std::string::npos) return "";
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
    std::string hint = "; a kill that is not a timeout is most often the out-of-memory killer";
    if (pages > 0 && page > 0)
        hint += ": this machine has " + std::to_string(static_cast<long long>(pages) * page >> 30) + " GiB";
    if (jobs != 1) hint += ", shared by the problems imported at once (--jobs 1: one at a time)";
    return hint;
}

// The bound of one problem's output (ImportOptions::max_output_bytes) and the free space the disk
// holding the suite keeps while problems run (a quarter of what it had): `jobs` problems at once.
void output_bounds(const ImportOptions& o, ImportSetup& s, int jobs) {
    std::error_code ec;
    const fs::space_info sp = fs::space(s.out, ec);
    // (unknown: the 64 GiB bound, no floor)
    const int64_t available = ec ? int64_t{256} << 30 : static_cast<int64_t>(sp.available);
    s.max_output = o.max_output_bytes;
    if (s.max_output <= 0)
        s.max_output = std::max<int64_t>(1, std::min<int64_t>(64LL << 30, available / 2 / std::max(1, jobs)));
    s.disk_floor = ec ? 0 : available / 4;
}

// A problem that failed on its output bound from within (Python's "File too large", "No space left
// on device": its file-size limit, its /tmp): the reason says which bound it met.
void note_output_bound(nlohmann::json& j, const ImportSetup& s) {
    if (j["status"] != "failed" || !j.contains("reason")) return;
    const std::string reason = j["reason"].get<std::string>();
    if (reason.find("File too large") == std::string::npos && reason.find("No space left on device") == std::string::npos)
        return;
    j["reason"] = reason + " [a problem's output is bounded: each file and its private folder at most " +
                  gib_text(s.max_output) + " (--max-output-gib), its /tmp as well where bubblewrap can size it]";
}

// A problem whose Python gave no result: how it ended, and what to do about it.
nlohmann::json stopped_result(const ImportSetup& s, const PythonRun& r, const std::string& src, bool model,
                              double wall_s) {
    std::string err = r.err.empty() ? "" : std::string(": ") + (r.err.size() >= 600 ? "..." : "") + r.err;
    std::string hint;
    if (r.over_output)
        hint = "; a problem's output is bounded: at most " + gib_text(s.max_output) + ", each file and all together "
               "(--max-output-gib), and the disk holding the suite keeps " + gib_text(s.disk_floor) + " free";
    else if (r.exit.find("timed out") != std::string::npos)
        hint = "; raise --timeout (seconds per problem, now " + std::to_string(static_cast<long>(s.o->timeout_s)) +
               (model ? "; a whole model's regions are each traced, timed and checked" : "") + ")";
    else
        hint = killed_hint(r.exit, s.o->jobs);
    // Its stderr is the problem's bytes: made printable (and valid UTF-8 for import.json).
    return {{"source", src},
            {"status", "failed"},
            {"reason", one_line(printable("the importer stopped (" + r.exit + hint + ")" + err))},
            {"seconds", wall_s}};
}

// Whether a problem is imported as a whole model: --regions, --whole, else a level-3 problem.
bool as_model(const ImportOptions& o, const std::string& src) {
    if (o.regions >= 0) return o.regions > 0;
    std::smatch m;
    return std::regex_search(src, m, std::regex("level[_-]?([0-9]+)")) && m[1].str() == "3";
}

// One problem, alone in its Python process and sandbox, writing only to a fresh private folder;
// the tool installs what it reports (install_result) and removes the folder.
nlohmann::json import_one(const ImportSetup& s, const std::string& src, std::mutex& print_mu) {
    const std::string name = problem_task_name(src);
    const bool model = as_model(*s.o, src);
    const fs::path priv = make_private_dir(s.out, name);
    struct Removed {
        fs::path dir;
        ~Removed() { remove_private_dir(dir); }
    } removed{priv};
    PythonRun r;
    double wall_s = 0;
    {
        const Confinement conf = confine(*s.o, s.py, s.readable, s.library, s.gpu, priv, s.max_output);
        std::vector<std::string> args = {s.executable, "-c", kProtocolWrapper};
        args.insert(args.end(), s.importer_args.begin(), s.importer_args.end());
        args.insert(args.end(), {"--out", priv.string()});
        if (model) args.push_back("--regions");
        if (s.sandboxed) args.insert(args.end(), {"--scratch", "/tmp"});  // the sandbox's private tmpfs, gone with it
        // The GPU lock, shared (an import measures nothing that another's work could spoil more than its
        // plan's shares), from the importer's ask, before it loads the problem, to its end (validate/turns.h):
        // Python's start holds nothing; the problem's code, untrusted, never runs without it.
        HelperRun turns;
        turns.reason = "importing " + name;
        turns.turns_dir = priv;
        turns.hold_between = false;
        turns.turn_use = GpuUse::shared;
        turns.first_turn_to_end = true;
        turns.note = [&](const std::string& line) {
            if (s.o->quiet) return;
            std::lock_guard<std::mutex> lock(print_mu);
            std::cerr << "kernelevo: " << line << "\n";
        };
        if (s.lock_dev) args.insert(args.end(), {"--turns", priv.string()});
        GpuTurns served(s.lock_dev ? *s.lock_dev : DeviceInfo{}, turns);
        const auto t0 = std::chrono::steady_clock::now();
        r = run_python(args, {src}, conf, {s.o->timeout_s, s.max_as, s.max_output, s.disk_floor, priv}, s.o->quiet,
                       print_mu);
        wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        served.end();
    }
    // The result comes from the sandbox: only its known fields, each of its type (result_check.h).
    nlohmann::json j = r.by_source.count(src) && !r.over_output ? checked_result(r.by_source[src], src)
                                                                  : stopped_result(s, r, src, model, wall_s);
    j["name"] = name;  // the tool's name for it, whatever the result said
    if (!r.fatal.empty()) j["fatal"] = r.fatal;
    note_sandbox_denial(j, s.sandboxed);
    note_output_bound(j, s);
    const nlohmann::json precision = parse_precision(s.o->precision, "the precision policy").to_json();
    if (j["status"] == "ok" && model) install_model(j, priv, s.out, name, s.reference_text, precision);
    else if (j["status"] == "ok") install_result(j, priv, s.out, name, precision);
    j.erase("task_json");
    j.erase("plan");
    return j;
}

// The share of the model's time in its task regions and their repeats (what a search can speed up;
// the rest stays in PyTorch).
double task_share(const nlohmann::json& model) {
    double share = 0;
    for (const auto& r : model["regions"]) {
        const std::string status = r.value("status", "");
        if ((status == "task" || status == "repeat") && r.contains("share") && r["share"].is_number()) share += r["share"].get<double>();
    }
    return share;
}

std::string fmt_share(double share) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f%%", 100 * share);
    return buf;
}

// The import's line for one problem; what the problem's sandbox said (a reason, a region's name) is
// shown printable: no control character of a problem's reaches the terminal.
void print_result(const nlohmann::json& j, size_t done, size_t total, const std::string& device) {
    std::string status = j.value("status", "failed");
    std::ostringstream os;
    os << "[" << done << "/" << total << "] ";
    if (status == "ok" && j.contains("model")) {
        const auto& m = j["model"];
        os << "imported model " << j.value("name", "?") << ": " << m["regions"].size() << " regions, "
           << m.value("tasks", 0) << " tasks"
           << (m.value("repeat", 0) > 0 ? " (+" + std::to_string(m.value("repeat", 0)) + " repeats)" : "") << ", "
           << m.value("refused", 0) << " refused, " << m.value("below_threshold", 0) << " below threshold"
           << (m.value("failed", 0) > 0 ? ", " + std::to_string(m.value("failed", 0)) + " failed" : "")
           << "; the tasks are " << fmt_share(task_share(m)) << " of its time (" << m.value("plan", "") << ")";
    } else if (status == "ok") {
        os << j.value("name", "?") << ": ok";
        const auto& v = j["verify"];
        if (v.is_object() && v.contains("max_abs_diff") && v["max_abs_diff"].is_number())
            os << " (C++ reference on the "
               << (v.contains("device") && v["device"].is_string() ? v["device"].get<std::string>() : device)
               << " vs Python: max |diff| " << v["max_abs_diff"].get<double>() << ")";
    } else {
        os << j.value("name", "?") << ": " << status << ": " << one_line(j.value("reason", ""));
    }
    const double seconds = j.contains("seconds") && j["seconds"].is_number() ? j["seconds"].get<double>() : 0.0;
    os << " [" << fmt_seconds(seconds) << "]";
    std::cerr << printable(os.str()) << "\n";
}

// Runs every problem, `jobs` at a time (on the GPU under its lock, shared), a line per problem and,
// every minute, one saying how far the import is.
std::vector<nlohmann::json> run_all(const ImportSetup& s, const std::vector<std::string>& sources, int jobs,
                                    std::chrono::steady_clock::time_point t0) {
    std::vector<nlohmann::json> results(sources.size());
    std::atomic<size_t> next{0};
    std::mutex mu, print_mu;
    size_t done = 0;
    auto worker = [&] {
        for (size_t i; (i = next.fetch_add(1)) < sources.size();) {
            nlohmann::json j;
            try {
                j = import_one(s, sources[i], print_mu);
            } catch (const std::exception& e) {  // in a worker thread: a reason, never an escaping exception
                j = {{"source", sources[i]},
                     {"name", problem_task_name(sources[i])},
                     {"status", "failed"},
                     {"reason", one_line(printable(e.what()))}};
            }
            std::lock_guard<std::mutex> lock(mu);
            results[i] = j;
            ++done;
            if (!s.o->quiet || j.value("status", "failed") != "ok") {  // quiet: no progress, every refusal and failure
                std::lock_guard<std::mutex> print(print_mu);
                print_result(j, done, sources.size(), s.device);
            }
        }
    };
    std::condition_variable finished;
    bool all_done = false;
    std::thread heartbeat([&] {
        std::unique_lock<std::mutex> lock(mu);
        while (!finished.wait_for(lock, std::chrono::seconds(60), [&] { return all_done; }))
            if (!s.o->quiet)
                std::cerr << "kernelevo: importing: " << done << "/" << sources.size() << " done after "
                          << fmt_seconds(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()) << "\n";
    });
    std::vector<std::thread> pool;
    for (int i = 0; i < std::min<int>(jobs, static_cast<int>(sources.size())); ++i) pool.emplace_back(worker);
    for (auto& t : pool) t.join();
    {
        std::lock_guard<std::mutex> lock(mu);
        all_done = true;
    }
    finished.notify_all();
    heartbeat.join();
    return results;
}

// The problems as the Python is given them (their real paths, bound there), each once; two files
// that would make the same task are a usage error, never one silently replacing the other.
std::vector<std::string> problem_sources(const std::vector<fs::path>& files) {
    std::vector<std::string> sources;
    std::map<std::string, std::string> by_name;
    for (const auto& f : files) {
        const std::string src = fs::weakly_canonical(fs::absolute(f)).string();
        if (std::find(sources.begin(), sources.end(), src) != sources.end()) continue;
        auto [it, fresh] = by_name.emplace(problem_task_name(src), src);
        if (!fresh)
            throw SettingError({settings::kImportOut}, it->second + " and " + src + " would both be task " + it->first +
                                                    ": import them into different {import.out} folders");
        sources.push_back(src);
    }
    return sources;
}

// While `work` runs: after 2 s a line saying what it does (`starting`), then one every 15 s with the
// time so far (a cached reference returns at once and prints neither); silent when `quiet`.
template <class Work>
auto with_heartbeat(bool quiet, const std::string& starting, Work work) {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    const auto t0 = std::chrono::steady_clock::now();
    std::thread beat([&] {
        std::unique_lock<std::mutex> lock(mu);
        if (cv.wait_for(lock, std::chrono::seconds(2), [&] { return done; })) return;
        if (!quiet) std::cerr << "kernelevo: " << starting << "\n";
        while (!cv.wait_for(lock, std::chrono::seconds(15), [&] { return done; }))
            if (!quiet)
                std::cerr << "kernelevo: still building the reference ("
                          << fmt_seconds(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()) << ")\n";
    });
    struct Stop {
        std::mutex& mu;
        std::condition_variable& cv;
        bool& done;
        std::thread& beat;
        ~Stop() {
            {
                std::lock_guard<std::mutex> lock(mu);
                done = true;
            }
            cv.notify_all();
            beat.join();
        }
    } stop{mu, cv, done, beat};
    return work();
}

// The suite's generic reference: written (with its sha256 record) by the tool, built once for every
// task, and reused from the compiled-object cache by every suite whose reference has the same bytes.
ReferenceBuild build_suite_reference(const fs::path& out, const fs::path& dir, bool quiet) {
    const std::string ref_text = read_file(dir / "jit_reference.cpp");
    Task generic;
    generic.name = "kernelbench";
    generic.reference_source = write_suite_reference(out, ref_text);
    generic.reference_function = kReferenceFunction;
    generic.reference_signature = "vector";
    generic.reference_setup = kReferenceSetup;
    ReferenceBuild rb = with_heartbeat(quiet,
        "building the generic TorchScript reference with LibTorch (about a minute, once: later imports reuse it "
        "from " + (cache_root() / "references").string() + ")...",
        [&] { return build_reference(generic); });
    if (!rb.ok) throw UsageError("the generic reference did not build:\n" + rb.log);
    return rb;
}


// The import's report (OUT/import.json) and its last line; a fatal error of the importer (a Python
// that lost the GPU) ends the import as a usage error.
ImportSummary summarize(const ImportOptions& o, const ImportSetup& s, const ReferenceBuild& rb, const std::string& torch_version,
                        const std::string& label, std::vector<nlohmann::json>& results, std::chrono::steady_clock::time_point t0) {
    for (auto& j : results) {
        if (!j.contains("fatal")) continue;
        // The probe saw CUDA outside the sandbox; a Python that loses it inside lacks a device node there.
        const std::string fatal = j["fatal"].get<std::string>();
        if (!s.sandboxed || !s.gpu) throw UsageError(fatal);
        throw SettingError({settings::kImportNoSandbox}, fatal + " (inside the import sandbox, which shows the GPU's /dev/nvidia* nodes; "
                                                           "the same Python saw the GPU outside it: importing {import.no_sandbox} "
                                                           "tells whether the sandbox is the cause)");
    }
    ImportSummary sum;
    sum.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (const auto& j : results) {
        const std::string st = j.value("status", "failed");
        if (st == "ok") ++sum.imported;
        else if (st == "refused") ++sum.refused;
        else ++sum.failed;
    }
    sum.report = {{"problems", results.size()}, {"imported", sum.imported}, {"refused", sum.refused}, {"failed", sum.failed},
                  {"seconds", sum.seconds}, {"device", s.device}, {"python", s.python}, {"torch", torch_version},
                  {"max_numel", o.max_numel}, {"reference_library", rb.library.string()}, {"sandbox", label},
                  {"gpu_lock", s.lock_dev.has_value()}, {"results", results}};
    // (a text the tool did not check, bytes that are not UTF-8, is written with U+FFFD, never aborts the report)
    const auto replace = nlohmann::json::error_handler_t::replace;
    write_file_atomic(o.out / "import.json", sum.report.dump(2, ' ', false, replace) + "\n");
    if (!o.quiet)
        std::cerr << "kernelevo: imported " << sum.imported << "/" << results.size() << " (" << sum.refused << " refused, "
                  << sum.failed << " failed) in " << fmt_seconds(sum.seconds) << "; report " << (o.out / "import.json").string()
                  << "\n";
    return sum;
}

}  // namespace

ImportSummary import_problems(const ImportOptions& o) {
    auto t0 = std::chrono::steady_clock::now();
    const std::vector<fs::path> files = expand(o.files);
    if (files.empty()) throw UsageError("no problem files given");
    if (o.out.empty()) throw SettingError({settings::kImportOut}, "{import.out}: required");
    // The policy and its flags for the importer (it measures the policy's error; "task" is what task.json says).
    if (kevo_precision_from_name(o.precision.c_str()) < 0)
        throw SettingError({settings::kImportPrecision},
                           "{import.precision} " + o.precision + ": unknown precision policy (expected one of: " + precision_choices() + ")");
    const Precision precision = parse_precision(o.precision, "the precision policy");
    const nlohmann::json precision_arg = {{"task", precision.to_json()}, {"policy", precision.name()},
                                          {"cudnn_tf32", precision.cudnn_tf32}, {"matmul_tf32", precision.matmul_tf32}};
    const std::vector<std::string> sources = problem_sources(files);
    const ReferenceSupport refs = reference_support();
    if (!refs.available) throw UsageError("this kernelevo was built without LibTorch: it cannot build the generic reference");
    ImportSetup s;
    s.o = &o;
    s.device = refs.cuda ? "cuda" : "cpu";
    s.gpu = refs.cuda;

    // A Python with PyTorch (import time only).
    std::string torch_version;
    s.python = find_python(o.python, &torch_version);
    if (s.gpu && torch_version.find("cuda=True") == std::string::npos)
        throw UsageError("this kernelevo's LibTorch runs references on the GPU, but " + s.python + " (torch " +
                         torch_version + ") sees no CUDA device");
    fs::create_directories(o.out);
    s.out = fs::weakly_canonical(fs::absolute(o.out));
    const fs::path dir = data_dir();
    const ReferenceBuild rb = build_suite_reference(s.out, dir, o.quiet);

    // The sandbox: what the Python must see (read-only) besides the system and its own installation.
    const fs::path refcheck = fs::weakly_canonical(refcheck_path());
    s.library = fs::weakly_canonical(rb.library);
    s.readable = {dir, refcheck};
    s.readable.insert(s.readable.end(), sources.begin(), sources.end());
    s.reference_text = read_file(dir / "jit_reference.cpp");
    // The importer's code (kernelevo.kernelbench, read-only like the rest): every problem needs it.
    s.python_package = python_package_dir();
    s.readable.push_back(s.python_package);
    if (std::any_of(sources.begin(), sources.end(), [&](const std::string& src) { return as_model(o, src); })) {
        // The precision table the package reads beside the importer (installed) or in the source tree.
        for (const fs::path& table : {dir / "precision.h", dir.parent_path() / "task" / "precision.h"})
            if (fs::exists(table)) s.readable.push_back(fs::weakly_canonical(table));
    }
    s.py = probe_python(s.python);
    const Confinement conf = confine(o, s.py, s.readable, s.library, s.gpu, s.out);  // the label, and bwrap's absence as an error
    s.sandboxed = !conf.prefix.empty();
    if (!s.sandboxed)
        std::cerr << "kernelevo: warning: the import sandbox is " << conf.label
                  << ": problem files run with your rights (network, home directory, environment)\n";
    // Address space: unlimited on the GPU (CUDA reserves far more than it uses), the machine's memory
    // on the CPU (a runaway problem fails with MemoryError instead of dragging the machine into swap).
    s.max_as = s.gpu ? 0 : static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
    // The GPU's lock (validate.h), the one every GPU use of the tool takes: a problem's Python runs
    // the model on the GPU, so it holds the lock, shared, for its whole run: problems run beside each
    // other and beside judges' checks, never inside another validation's timed calls.
    if (s.gpu) s.lock_dev = Validator(Task{}, ValidateOptions{}).device();
    if (!o.quiet)
        std::cerr << "kernelevo: reference " << (rb.cached ? "reused from the cache" : "built in " + fmt_seconds(rb.seconds))
                  << " (" << rb.library.string() << "); importing "
                  << sources.size() << " problem(s) with " << s.python << " (torch " << torch_version << ") on the " << s.device
                  << (s.gpu ? " (the GPU shared, never beside a timing)" : "") << "; sandbox: " << conf.label << "\n";

    // One Python process (and sandbox) per problem, `jobs` at a time, on the CPU or the GPU.
    int jobs = o.jobs > 0 ? o.jobs : std::max(1, std::min(4, static_cast<int>(std::thread::hardware_concurrency())));
    output_bounds(o, s, jobs);
    s.executable = s.sandboxed ? s.py.executable : s.python;
    s.importer_args = {(dir / "import_kernelbench.py").string(), "--reference-source", (s.out / kReferenceName).string(),
                       "--device", s.device, "--refcheck", refcheck.string(), "--library", conf.library.string(),
                       "--max-numel", std::to_string(o.max_numel), "--timeout", std::to_string(static_cast<long>(o.timeout_s)),
                       "--precision", precision_arg.dump(), "--kernelevo-python", s.python_package.string()};
    std::vector<nlohmann::json> results = run_all(s, sources, jobs, t0);
    return summarize(o, s, rb, torch_version, conf.label, results, t0);
}

}  // namespace kevo::kernelbench
