// `kernelevo import kernelbench FILE.py... --out DIR`.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <regex>
#include <sstream>
#include <thread>

#include "cli/commands.h"
#include "common/error.h"
#include "common/fs.h"
#include "common/process.h"
#include "kernelbench/kernelbench.h"
#include "reference/reference.h"
#include "task/task.h"

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

// "python3 -c 'import torch'" -> "1.13.1 cuda=False", or "" when it has no torch.
std::string probe_python(const std::string& python) {
    ProcessOptions po;
    po.argv = {python, "-c", "import torch; print(torch.__version__, 'cuda=%s' % torch.cuda.is_available())"};
    po.timeout_s = 120;
    ProcessResult r = run_process(po);
    if (!r.ok()) return "";
    std::string s = r.out;
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    return s;
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

}  // namespace

std::string find_python(const std::string& given, std::string* torch_version) {
    std::string version;
    if (!given.empty()) {
        version = probe_python(given);
        if (version.empty()) throw UsageError("--python " + given + ": cannot import torch there");
        if (torch_version) *torch_version = version;
        return given;
    }
    for (const char* cand : {"python3", "/usr/bin/python3"}) {
        version = probe_python(cand);
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
    if (!o.quiet)
        std::cerr << "kernelevo: reference " << (rb.cached ? "cached" : "built in " + fmt_seconds(rb.seconds)) << "; importing "
                  << files.size() << " problem(s) with " << python << " (torch " << torch_version << ") on the " << device << "\n";

    // Python workers, a few problems each, `jobs` at a time.
    int jobs = o.jobs > 0 ? o.jobs : std::max(1, std::min(4, static_cast<int>(std::thread::hardware_concurrency())));
    size_t chunk = std::clamp<size_t>((files.size() + jobs * 4 - 1) / (jobs * 4), 1, 8);
    std::vector<std::vector<fs::path>> chunks;
    for (size_t i = 0; i < files.size(); i += chunk)
        chunks.emplace_back(files.begin() + i, files.begin() + std::min(files.size(), i + chunk));
    const std::string refcheck = refcheck_path().string();
    std::vector<nlohmann::json> results(files.size());
    std::atomic<size_t> next{0};
    std::mutex mu;
    size_t done = 0;
    std::string fatal;
    auto worker = [&] {
        for (size_t c; (c = next.fetch_add(1)) < chunks.size();) {
            // One Python process for the chunk; if it dies (a crash inside PyTorch), the problems it
            // did not report go again in a new one, and a problem that kills it twice fails alone.
            std::map<std::string, nlohmann::json> by_source;
            std::vector<fs::path> pending = chunks[c];
            ProcessResult r;
            while (!pending.empty()) {
                ProcessOptions po;
                po.argv = {python, (dir / "import_kernelbench.py").string(), "--out", fs::absolute(o.out).string(),
                           "--reference-source", ref.string(), "--device", device, "--refcheck", refcheck, "--library",
                           rb.library.string(), "--max-numel", std::to_string(o.max_numel), "--timeout",
                           std::to_string(static_cast<long>(o.timeout_s))};
                for (const auto& f : pending) po.argv.push_back(fs::absolute(f).string());
                po.timeout_s = o.timeout_s * 3 * static_cast<double>(pending.size()) + 120;
                po.max_file_bytes = -1;  // model weights and verification tensors can be large
                po.max_output_bytes = 64 << 20;
                r = run_process(po);
                std::istringstream lines(r.out);
                for (std::string line; std::getline(lines, line);) {
                    if (line.empty() || line[0] != '{') continue;
                    try {
                        auto j = nlohmann::json::parse(line);
                        if (j.contains("fatal")) {
                            std::lock_guard<std::mutex> lock(mu);
                            fatal = j["fatal"].get<std::string>();
                        } else if (j.contains("source")) {
                            by_source[j["source"].get<std::string>()] = j;
                        }
                    } catch (const std::exception&) {
                    }
                }
                std::vector<fs::path> missing;
                for (const auto& f : pending)
                    if (!by_source.count(fs::absolute(f).string())) missing.push_back(f);
                if (missing.empty() || !fatal.empty()) break;
                if (missing.size() == pending.size()) {
                    // No progress: the first one is the culprit.
                    std::string err = r.err;
                    if (err.size() > 600) err = "..." + err.substr(err.size() - 600);
                    by_source[fs::absolute(missing[0]).string()] = {
                        {"source", fs::absolute(missing[0]).string()}, {"name", problem_task_name(missing[0])},
                        {"status", "failed"},
                        {"reason", one_line("the importer stopped (" + r.describe() + ")" + (err.empty() ? "" : ": " + err))}};
                    missing.erase(missing.begin());
                }
                pending = missing;
            }
            std::lock_guard<std::mutex> lock(mu);
            size_t base = c * chunk;
            for (size_t k = 0; k < chunks[c].size(); ++k) {
                const std::string src = fs::absolute(chunks[c][k]).string();
                nlohmann::json j;
                if (by_source.count(src)) {
                    j = by_source[src];
                } else {
                    j = {{"source", src}, {"name", problem_task_name(chunks[c][k])}, {"status", "failed"},
                         {"reason", "the importer stopped before this problem (" + r.describe() + ")"}};
                }
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
    if (!fatal.empty()) throw UsageError(fatal);

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
                {"max_numel", o.max_numel}, {"reference_library", rb.library.string()}, {"results", results}};
    write_file_atomic(o.out / "import.json", s.report.dump(2) + "\n");
    if (!o.quiet)
        std::cerr << "kernelevo: imported " << s.imported << "/" << results.size() << " (" << s.refused << " refused, "
                  << s.failed << " failed) in " << fmt_seconds(s.seconds) << "; report " << (o.out / "import.json").string()
                  << "\n";
    return s;
}

}  // namespace kevo::kernelbench

namespace kevo {

void register_import_command(CLI::App& app, int& rc) {
    auto o = std::make_shared<kernelbench::ImportOptions>();
    auto json = std::make_shared<bool>(false);
    CLI::App* imp = app.add_subcommand("import", "Import tasks from a benchmark (kernelbench)");
    imp->require_subcommand(1);
    CLI::App* kb = imp->add_subcommand(
        "kernelbench",
        "Turn KernelBench problems (Model, get_inputs, get_init_inputs) into task directories that validate "
        "without Python: the model is built as KernelBench builds it (seed 42, constructed on the CPU, then moved), "
        "traced to TorchScript (model.pt) and run by one generic C++ reference built once per suite; its parameters "
        "and buffers become file inputs, random inputs keep get_inputs()'s distribution. Each import verifies "
        "itself (the C++ reference on the recorded inputs against the Python model, on the GPU when this "
        "kernelevo's LibTorch has CUDA, else on the CPU). Problems that cannot be imported faithfully are refused "
        "with a reason. Needs PyTorch at import time only. Writes OUT/NAME/{task.json,model.pt,*.bin,problem.py} "
        "and OUT/import.json. Exit 0 when at least one problem was imported and none failed (refusals are "
        "not failures), 1 otherwise, 2 on bad usage or setup.");
    kb->add_option("files", o->files, "Problem files (.py) or folders of them")->required();
    kb->add_option("--out", o->out, "Suite directory to write the tasks to")->required();
    kb->add_option("--python", o->python, "Python with PyTorch (default: python3 if it has torch, else /usr/bin/python3)");
    kb->add_option("--max-numel", o->max_numel,
                   "Shrink each problem for small machines: halve its size constants (module-level integers and "
                   "integer tuples >= 16; batch, spatial and sequence sizes first, then channels and features; never "
                   "kernel sizes, strides, paddings, groups), largest first, until its inputs hold at most this many "
                   "elements; a problem that breaks at the shrunk sizes is tried again with 16x and 256x the limit "
                   "(0: KernelBench's own sizes)")
        ->capture_default_str()
        ->check(CLI::NonNegativeNumber);
    kb->add_option("--jobs", o->jobs, "Problems imported at once (0: min(4, cores))")->capture_default_str()->check(CLI::NonNegativeNumber);
    kb->add_option("--timeout", o->timeout_s, "Seconds allowed per problem")->capture_default_str()->check(CLI::PositiveNumber);
    kb->add_flag("--json", *json, "Print the import report (as in OUT/import.json) on stdout");
    kb->callback([o, json, &rc] {
        auto s = kernelbench::import_problems(*o);
        if (*json) std::cout << s.report.dump(2) << "\n";
        rc = s.imported > 0 && s.failed == 0 ? 0 : 1;
    });
}

}  // namespace kevo
